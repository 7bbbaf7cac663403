//! Embeds every file under the repository's `knowledge/` directory, so the knowledge layer works
//! from any directory without the source tree.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|e| e == "toml") {
            out.push(p);
        }
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest
        .join("../../knowledge")
        .canonicalize()
        .expect("the knowledge/ directory exists");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    walk(&root, &mut files);
    let mut code = String::from("pub(crate) static FILES: &[(&str, &str)] = &[\n");
    for f in files {
        let rel = f
            .strip_prefix(&root)
            .expect("under root")
            .to_string_lossy()
            .replace('\\', "/");
        println!("cargo:rerun-if-changed={}", f.display());
        if let Some(parent) = f.parent() {
            println!("cargo:rerun-if-changed={}", parent.display());
        }
        writeln!(
            code,
            "    ({rel:?}, include_str!({:?})),",
            f.display().to_string()
        )
        .expect("write to string");
    }
    code.push_str("];\n");
    let out =
        PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo")).join("builtin_files.rs");
    std::fs::write(out, code).expect("write generated file");
}
