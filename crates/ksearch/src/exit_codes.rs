//! Exit codes of the `ksearch` binary, in one place.

/// The command did what was asked. For `eval`, whatever the candidate's status.
pub(crate) const OK: i32 = 0;
/// ksearch itself failed (a worker could not start, an IO error).
pub(crate) const INTERNAL: i32 = 1;
/// A check command (`space check`) found a fault in what it checked.
pub(crate) const CHECK_FAILED: i32 = 1;
/// Bad command-line usage (clap uses this code too).
pub(crate) const USAGE: i32 = 2;
/// The task or candidate given is malformed or missing.
pub(crate) const INPUT: i32 = 3;
/// The run paused: a manual model's call waits for its answer (`ksearch resume` goes on).
pub(crate) const PAUSED: i32 = 4;
/// Ctrl-C stopped the run (after saving it; `ksearch resume` goes on): 128 + SIGINT, as a shell
/// reports a process SIGINT ended.
pub(crate) const INTERRUPTED: i32 = 130;
