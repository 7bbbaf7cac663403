//! Embeds every file under the repository's `tasks/` directory, so built-in tasks work from any
//! directory without the source tree.

fn main() {
    ksearch_embed::embed_dir("../../tasks", |_| true, "FILES", "builtin_files.rs");
}
