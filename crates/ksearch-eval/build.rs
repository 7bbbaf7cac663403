//! Embeds the Python harness (`harness/ksearch_harness/*.py`) so the binary can unpack and run
//! it from any directory.

fn main() {
    ksearch_embed::embed_dir(
        "../../harness/ksearch_harness",
        |p| p.extension().is_some_and(|e| e == "py"),
        "HARNESS_FILES",
        "harness_files.rs",
    );
}
