//! Embeds the Python harness (`harness/ksearch_harness/`: its Python, and the C file it builds) so the binary can unpack and run it from any directory.

fn main() {
    ksearch_embed::embed_dir(
        "../../harness/ksearch_harness",
        |p| p.extension().is_some_and(|e| e == "py" || e == "c"),
        "HARNESS_FILES",
        "harness_files.rs",
    );
}
