//! `ksearch`: the command-line front end. Logic lives in the library crates.

mod cli;
mod commands;
mod config;
mod exit_codes;
mod interrupt;
mod mcp;
mod progress;
mod tree_view;

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
        Err(err) => {
            let code = commands::exit_code_for(&err);
            #[allow(clippy::print_stderr)] // the one place errors reach the user
            match commands::paused_line(&err) {
                Some(line) => eprintln!("{line}"),
                None => eprintln!("error: {err:#}"),
            }
            code
        }
    };
    std::process::exit(code);
}
