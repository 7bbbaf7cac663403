//! Embeds the Python harness (`harness/ksearch_harness/*.py`) so the binary can unpack and run
//! it from any directory.

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let dir = manifest
        .join("../../harness/ksearch_harness")
        .canonicalize()
        .expect("harness/ksearch_harness exists");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("readable harness directory")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "py"))
        .collect();
    files.sort();
    let mut code = String::from("pub(crate) static HARNESS_FILES: &[(&str, &str)] = &[\n");
    for f in files {
        println!("cargo:rerun-if-changed={}", f.display());
        let name = f
            .file_name()
            .expect("a file name")
            .to_string_lossy()
            .into_owned();
        writeln!(
            code,
            "    ({name:?}, include_str!({:?})),",
            f.display().to_string()
        )
        .expect("write to string");
    }
    code.push_str("];\n");
    let out =
        PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo")).join("harness_files.rs");
    std::fs::write(out, code).expect("write generated file");
}
