//! The run as one self-contained HTML page (`ksearch report`): rendered here, server-side, as
//! HTML and inline SVG, with a small inline script for selecting tree nodes. It loads nothing:
//! no external script, style, font or image, and a Content-Security-Policy that forbids any.
//!
//! Stable hooks for tests and tools: `header#summary` (its `.headline[data-baseline]` is
//! `production` or `reference`; `#best-speedup` and `#best-vs-seed` hold the two numbers),
//! `svg#chart circle.attempt` (one per attempt, `data-round`, `data-node`, `data-status`),
//! `svg#chart path#best-line`, `svg#tree g.node` (one per tree node, `data-node`,
//! `data-status`), `#details .node-detail[data-node]`, `#best-source`, `#diff-parent`,
//! `#diff-seed`, `table#workload-table tr.workload`, `table#calibration-table
//! tr.calibration-point`, `svg#calibration-plot circle.calibration-point` and the data as JSON
//! in `script#run-data`.

mod best;
mod calibration;
mod chart;
mod diff_view;
mod header;
mod node;
mod page;
mod palette;
mod scale;
mod text;
mod tree;
mod workloads;

pub use page::render;
