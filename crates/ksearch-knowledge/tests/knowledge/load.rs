use std::path::Path;

use ksearch_core::task::KernelClass;
use ksearch_knowledge::{FactStatus, Knowledge, LoadError, Platform, Target};

use crate::knowledge;

#[test]
fn builtin_data_loads_and_cross_references_resolve() {
    let k = knowledge();
    for id in [
        "h100-sxm",
        "h200",
        "a100-sxm-80gb",
        "b200",
        "m1-max",
        "m2-ultra",
        "m3-max",
        "m4-max",
        "generic-x86-64",
    ] {
        assert!(k.hardware(id).is_some(), "missing hardware file {id}");
    }
    assert!(
        k.translations.len() >= 30,
        "{} translation entries",
        k.translations.len()
    );
    assert!(k.patterns.len() >= 15, "{} patterns", k.patterns.len());
    for t in &k.translations {
        for other in &t.see_also {
            assert!(k.translation(other).is_some(), "{} → {other}", t.id);
        }
    }
    for p in &k.patterns {
        for t in &p.translations {
            assert!(k.translation(t).is_some(), "{} → {t}", p.id);
        }
    }
    for r in &k.rules {
        for t in &r.spec.tokens {
            if let Some(tr) = &t.translation {
                assert!(k.translation(tr).is_some(), "{} → {tr}", r.id());
            }
        }
    }
    // Every kernel class but `other` has tactics; every GPU platform has rules.
    for class in [
        KernelClass::Elementwise,
        KernelClass::Reduction,
        KernelClass::Normalization,
        KernelClass::Scan,
        KernelClass::Matmul,
        KernelClass::Attention,
        KernelClass::Convolution,
    ] {
        assert!(k.patterns_for(class).count() >= 2, "{class:?}");
    }
    for p in [
        Platform::CUDA,
        Platform::METAL,
        Platform::MLX_METAL,
        Platform::MLX_CUDA,
    ] {
        assert!(k.rules_for(p).count() >= 5, "{p}");
    }
}

#[test]
fn every_number_has_provenance_and_unknowns_are_explicit() {
    let k = knowledge();
    for hw in &k.hardware {
        if hw.target == Target::Cpu {
            continue;
        }
        let on_chip = hw.on_chip.as_ref().expect("GPU files have on_chip");
        // The limits the assertions read are known on every GPU.
        assert!(hw.limit("shared_per_block_bytes").is_some(), "{}", hw.id);
        assert!(hw.limit("max_threads_per_block").is_some(), "{}", hw.id);
        assert_eq!(on_chip.simd_width.value(), Some(32.0), "{}", hw.id);
    }
    // Apple publishes no TFLOPS for M3/M4: said so, not invented.
    let m3 = k.hardware("m3-max").expect("m3");
    let fp32 = &m3.compute.as_ref().expect("compute").peak_fp32_tflops;
    assert_eq!(fp32.status, FactStatus::Unknown);
    assert!(fp32.value().is_none() && fp32.note.is_some());
    assert_eq!(m3.limit("shared_per_block_bytes"), Some(32768.0));
    assert_eq!(
        k.hardware("h200")
            .and_then(|h| h.limit("shared_per_block_optin_bytes")),
        Some(232448.0)
    );
}

#[test]
fn the_cpu_file_carries_the_cost_model_numbers() {
    let k = knowledge();
    let cpu = k.hardware("generic-x86-64").expect("cpu file");
    let m = cpu.cpu_model().expect("all numbers known");
    // The values crates/ksearch-engine/src/builtin/machine.rs hard-codes today.
    assert_eq!(m.vector_bytes, 32);
    assert_eq!(m.fma_units, 2);
    assert_eq!(m.l1_bytes, 32 * 1024);
    assert_eq!(m.l2_bytes, 1024 * 1024);
    assert_eq!(m.llc_bytes, 32 * 1024 * 1024);
    assert_eq!(m.dram_bytes_per_cycle, 8.0);
    assert_eq!(m.llc_bytes_per_cycle, 32.0);
    assert_eq!(m.l2_over_llc_bandwidth, 2.0);
    assert_eq!(m.l1_vector_loads_per_cycle, 2.0);
    let section = cpu.cpu.as_ref().expect("cpu section");
    assert_eq!(section.dram_bytes_per_cycle.status, FactStatus::Assumption);
}

/// A copy of the built-in data in a temporary directory, with one file replaced.
fn broken_copy(rel: &str, edit: impl Fn(&str) -> String) -> (tempfile::TempDir, LoadError) {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, text) in Knowledge::builtin_files() {
        let dest = dir.path().join(path);
        std::fs::create_dir_all(dest.parent().expect("parent")).expect("mkdir");
        let text = if path == rel {
            edit(text)
        } else {
            text.to_owned()
        };
        std::fs::write(dest, text).expect("write");
    }
    let err = Knowledge::load_dir(dir.path()).expect_err("the broken copy must not load");
    (dir, err)
}

fn one_error(err: &LoadError) -> &ksearch_core::location::FileError {
    assert_eq!(err.errors().len(), 1, "{err}");
    &err.errors()[0]
}

#[test]
fn a_directory_copy_loads() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, text) in Knowledge::builtin_files() {
        let dest = dir.path().join(path);
        std::fs::create_dir_all(dest.parent().expect("parent")).expect("mkdir");
        std::fs::write(dest, text).expect("write");
    }
    let k = Knowledge::load_dir(dir.path()).expect("loads");
    assert_eq!(k.patterns.len(), knowledge().patterns.len());
    assert!(matches!(
        Knowledge::load_dir(Path::new("/nonexistent/knowledge")),
        Err(LoadError::Io { .. })
    ));
}

#[test]
fn an_unknown_kernel_class_fails_with_file_line_and_field() {
    let (_dir, err) = broken_copy("patterns/online-softmax.toml", |t| {
        t.replace(
            r#"classes = ["attention", "normalization", "reduction"]"#,
            r#"classes = ["attention", "normalisation", "reduction"]"#,
        )
    });
    let e = one_error(&err);
    assert!(e.file.ends_with("patterns/online-softmax.toml"), "{e}");
    assert_eq!(e.location.map(|l| l.line), Some(3), "{e}");
    assert!(e.field.starts_with("classes"), "{e}");
    assert!(e.message.contains("normalisation"), "{e}");
}

#[test]
fn an_unknown_translation_id_fails_with_file_line_and_field() {
    let (_dir, err) = broken_copy("patterns/online-softmax.toml", |t| {
        t.replace(
            r#""warp-reduce", "fast-exp""#,
            r#""warp-reduce", "fast-expp""#,
        )
    });
    let e = one_error(&err);
    assert!(e.file.ends_with("patterns/online-softmax.toml"));
    assert_eq!(e.field, "translations[1]");
    assert_eq!(e.location.map(|l| l.line), Some(10), "{e}");
    assert!(
        e.message.contains("unknown translation id `fast-expp`"),
        "{e}"
    );
}

#[test]
fn duplicate_ids_fail() {
    let (_dir, err) = broken_copy("translation/sync.toml", |t| {
        t.replace(r#"id = "syncwarp""#, r#"id = "syncthreads""#)
    });
    assert!(
        err.errors()
            .iter()
            .any(|e| e.message.contains("duplicate translation id `syncthreads`")),
        "{err}"
    );
    let (_dir, err) = broken_copy("assertions/mlx.toml", |t| {
        t.replace(
            r#"id = "mlx-host-sync-in-run""#,
            r#"id = "mlx-grid-is-threads""#,
        )
    });
    let e = one_error(&err);
    assert_eq!(e.field, "rule[1].id");
    assert!(e.message.contains("duplicate rule id"), "{e}");
}

#[test]
fn facts_without_provenance_and_bad_rules_fail() {
    let (_dir, err) = broken_copy("hardware/h200.toml", |t| {
        t.replace(
            r#"units = { value = 132, status = "measured", source = "cudaDeviceProp.multiProcessorCount on an H200 (this project, 2026)" }"#,
            r#"units = { value = 132, status = "measured" }"#,
        )
    });
    let e = one_error(&err);
    assert_eq!(e.field, "compute.units.source");
    assert!(e.location.is_some());
    // An unknown key, with its line.
    let (_dir, err) = broken_copy("hardware/m3-max.toml", |t| {
        t.replace("summary =", "sumary =")
    });
    let e = one_error(&err);
    assert!(e.message.contains("sumary"), "{e}");
    assert!(e.location.is_some());
    // A message placeholder the rule kind does not fill.
    let (_dir, err) = broken_copy("assertions/resources.toml", |t| {
        t.replacen("({detail})", "({details})", 1)
    });
    let e = one_error(&err);
    assert_eq!(e.field, "rule[0].message");
    // A rule naming a hardware limit that does not exist.
    let (_dir, err) = broken_copy("assertions/resources.toml", |t| {
        t.replacen(
            r#"limit = "shared_per_block_bytes""#,
            r#"limit = "smem""#,
            1,
        )
    });
    assert_eq!(one_error(&err).field, "rule[0].limit");
    // A regex that does not compile.
    let (_dir, err) = broken_copy("assertions/portability.toml", |t| {
        t.replace(r"pattern = '__global__'", r"pattern = '__global__('")
    });
    assert!(one_error(&err).message.contains("not a valid regex"));
}
