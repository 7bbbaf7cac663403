//! Seeing a run: `ksearch report` (the HTML page, opened in headless Chromium), `ksearch show`
//! and `ksearch export` (the exported kernel compiled, evaluated and linked), on a real search
//! and on the hand-built sample run of `ksearch_report::sample`.

mod browser;
mod cdp;
mod export;
mod report_cli;
mod show;
mod support;
