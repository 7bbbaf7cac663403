//! `ksearch`: the command-line front end. Logic lives in the library crates.

mod cli;
mod commands;
mod config;
mod exit_codes;
mod interrupt;
mod mcp;
mod progress;
mod tree_view;

use std::io::Write;

use clap::Parser;

fn main() {
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            // Help and version requests are not errors.
            std::process::exit(if err.use_stderr() {
                exit_codes::USAGE
            } else {
                exit_codes::OK
            });
        }
    };
    // Nothing may read this process's memory or environment (it holds API keys), not even a
    // process of the same user: /proc/<pid>/environ and /proc/<pid>/mem close.
    #[cfg(target_os = "linux")]
    // SAFETY: prctl on ourselves.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
    let code = match commands::run(cli.command) {
        Ok(code) => code,
        // The reader of the output went away (`ksearch report -o - | head`): not an error.
        Err(err) if commands::broken_pipe(&err) => exit_codes::OK,
        Err(err) => {
            let code = commands::exit_code_for(&err);
            // The one place errors reach the user; a closed stderr leaves nobody to tell.
            let line = match commands::paused_line(&err) {
                Some(line) => line,
                None => format!("error: {}", commands::error_text(&err)),
            };
            let _ = writeln!(std::io::stderr().lock(), "{line}");
            code
        }
    };
    std::process::exit(code);
}
