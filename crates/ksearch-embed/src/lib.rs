//! For build scripts: embed a directory of the repository (tasks, knowledge, the Python
//! harness) in a crate, so the binary works from any directory without the source tree.

#![allow(
    clippy::print_stdout,
    reason = "a build script talks to cargo on standard output"
)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Writes `$OUT_DIR/{out_file}`, which declares `pub(crate) static {name}: &[(&str, &str)]`:
/// every file under `dir` (relative to the crate's manifest) that `keep` accepts, as its path
/// relative to `dir` (with `/`) and its text, sorted by path. Cargo reruns the build script when
/// anything under `dir` changes. Panics (failing the build) when `dir` is missing.
pub fn embed_dir(dir: &str, keep: fn(&Path) -> bool, name: &str, out_file: &str) {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest
        .join(dir)
        .canonicalize()
        .unwrap_or_else(|e| panic!("{dir} must exist next to the crate: {e}"));
    // A directory makes cargo scan everything below it, new files included.
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    walk(&root, keep, &mut files);
    let mut code = format!("pub(crate) static {name}: &[(&str, &str)] = &[\n");
    for f in files {
        let rel = f
            .strip_prefix(&root)
            .expect("under root")
            .to_string_lossy()
            .replace('\\', "/");
        let _ = writeln!(
            code,
            "    ({rel:?}, include_str!({:?})),",
            f.display().to_string()
        );
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo")).join(out_file);
    fs_err::write(&out, code).unwrap_or_else(|e| panic!("{e}"));
}

/// Files below `dir` that `keep` accepts, in sorted order.
fn walk(dir: &Path, keep: fn(&Path) -> bool, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs_err::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, keep, out);
        } else if keep(&p) {
            out.push(p);
        }
    }
}
