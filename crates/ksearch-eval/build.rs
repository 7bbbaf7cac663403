//! Embeds the Python harness (`harness/ksearch_harness/`: its Python, the C file it builds and the CUDA header of its own kernel) so the binary can unpack and run it from any directory.

fn main() {
    ksearch_embed::embed_dir(
        "../../harness/ksearch_harness",
        |p| {
            p.extension()
                .is_some_and(|e| e == "py" || e == "c" || e == "cuh")
        },
        "HARNESS_FILES",
        "harness_files.rs",
    );
}
