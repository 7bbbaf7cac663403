//! `ksearch`: the command-line front end. Logic lives in the library crates.

mod cli;
mod commands;
mod error;
mod exit_codes;
mod interrupt;
mod ksearch_toml;
mod mcp;
mod progress;
mod tree_view;

use std::io::Write;

use clap::Parser;

/// With `--json`, a failure is a JSON object on stdout too (`{"error": …, "exit_code": …}`,
/// or `{"paused": …, "exit_code": 4}`), so that a script reading stdout always reads JSON.
fn json_failure(key: &str, message: &str, code: i32) {
    if std::env::args_os().skip(1).any(|a| a == "--json") {
        let line = serde_json::json!({ key: message, "exit_code": code });
        let _ = writeln!(std::io::stdout().lock(), "{line}");
    }
}

/// clap suggests hidden subcommands too (`ksearch runn`: "'runner', 'run'"): those that ksearch
/// starts for itself are left out of the suggestion.
fn without_hidden_suggestions(mut err: clap::Error) -> clap::Error {
    use clap::CommandFactory;
    use clap::error::{ContextKind, ContextValue};
    let cmd = cli::Cli::command();
    let hidden: Vec<&str> = cmd
        .get_subcommands()
        .filter(|s| s.is_hide_set())
        .map(clap::Command::get_name)
        .collect();
    if let Some(ContextValue::Strings(names)) = err.get(ContextKind::SuggestedSubcommand) {
        let kept: Vec<String> = names
            .iter()
            .filter(|n| !hidden.contains(&n.as_str()))
            .cloned()
            .collect();
        if kept.is_empty() {
            err.remove(ContextKind::SuggestedSubcommand);
        } else {
            err.insert(
                ContextKind::SuggestedSubcommand,
                ContextValue::Strings(kept),
            );
        }
    }
    err
}

fn main() {
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let err = without_hidden_suggestions(err);
            let _ = err.print();
            // Help and version requests are not errors.
            if !err.use_stderr() {
                std::process::exit(exit_codes::OK);
            }
            let rendered = err.render().to_string();
            let first = rendered.lines().next().unwrap_or_default();
            json_failure(
                "error",
                first.strip_prefix("error: ").unwrap_or(first),
                exit_codes::USAGE,
            );
            std::process::exit(exit_codes::USAGE);
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
                Some(line) => {
                    json_failure("paused", &line, code);
                    line
                }
                None => {
                    let text = commands::error_text(&err);
                    json_failure("error", &text, code);
                    format!("error: {text}")
                }
            };
            let line = ksearch_core::printable::printable(&line);
            let _ = writeln!(std::io::stderr().lock(), "{line}");
            code
        }
    };
    std::process::exit(code);
}
