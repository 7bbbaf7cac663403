//! Embeds every TOML file under the repository's `knowledge/` directory, so the knowledge layer
//! works from any directory without the source tree.

fn main() {
    ksearch_embed::embed_dir(
        "../../knowledge",
        |p| p.extension().is_some_and(|e| e == "toml"),
        "FILES",
        "builtin_files.rs",
    );
}
