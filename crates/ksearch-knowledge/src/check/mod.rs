//! Running the assertion rules on a candidate's source. Each rule kind is implemented in a module
//! of its own; rules only choose a kind and give its parameters and messages.
//!
//! Everything is heuristic text analysis (no compiler): comments and strings are masked,
//! constants are resolved where the candidate defines them, and a check that cannot tell
//! (an array size it cannot compute) stays quiet rather than guess.

mod analysis;
mod barriers;
mod expr;
mod flow;
mod mlx_grid;
mod rules;
mod scan;
mod text;
mod threadgroup_memory;
mod threadgroup_size;
mod tokens;

pub(crate) use rules::check;
