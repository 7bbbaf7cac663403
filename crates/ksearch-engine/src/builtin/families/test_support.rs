//! Compiling rendered candidates in tests.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{Family, Point};

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A fresh temporary directory for this test process.
pub(crate) fn temp_dir(tag: &str) -> PathBuf {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir =
        std::env::temp_dir().join(format!("ksearch-families-{tag}-{}-{n}", std::process::id()));
    fs_err::create_dir_all(&dir).expect("create temp dir");
    dir
}

/// The seed, its neighbours and `path` are valid, render the contract's function without
/// reserved names, and cost something finite on every workload; the seed has at least
/// `min_neighbours` neighbours.
pub(crate) fn assert_renders_and_costs(
    family: &dyn Family,
    spec: &ksearch_core::task::TaskSpec,
    path: Vec<Point>,
    signature: &str,
    min_neighbours: usize,
) {
    let seed = family.seed();
    assert!(family.valid(&seed));
    let m = crate::builtin::machine::generic();
    let mut all = vec![seed.clone()];
    all.extend(
        super::neighbours(family, &seed)
            .into_iter()
            .map(|(_, _, c)| c),
    );
    all.extend(path);
    for c in &all {
        assert!(family.valid(c), "{c:?}");
        let src = family.render(c).unwrap();
        assert!(src.contains(signature), "{c:?}");
        assert!(!src.contains("ksearch_"));
        for w in &spec.workloads {
            let cost = family.cost(c, w, &m);
            assert!(cost.cycles.is_finite() && cost.cycles > 0.0, "{c:?}");
            assert!(cost.bytes > 0.0 && cost.flops > 0.0);
        }
    }
    assert!(super::neighbours(family, &seed).len() >= min_neighbours);
}

/// Every impact of every move from the seed is rated within 0..=10, and no move is rated
/// zero on all three axes.
pub(crate) fn assert_impacts_rated(family: &dyn Family) {
    let seed = family.seed();
    for (knob, value, _) in super::neighbours(family, &seed) {
        let i = family.impacts(&seed, &knob, value);
        let ratings = [
            i.memory_bandwidth.rating,
            i.register_pressure.rating,
            i.compute_fit.rating,
        ];
        assert!(ratings.iter().all(|r| (0.0..=10.0).contains(r)));
        assert!(ratings.iter().any(|r| *r > 0.0), "{knob}={value}");
    }
}

/// The cost model's total (log cycles over the workloads) of a point.
pub(crate) fn model_total(
    family: &dyn Family,
    spec: &ksearch_core::task::TaskSpec,
    c: &Point,
) -> f64 {
    let m = crate::builtin::machine::generic();
    spec.workloads
        .iter()
        .map(|w| family.cost(c, w, &m).cycles.ln())
        .sum()
}

/// Compiles each point's rendering as the worker does (plus `-c` and implicit-declaration
/// errors), two at a time; returns the failures with the compiler's output.
pub(crate) fn compile_all(family: &dyn Family, points: &[Point]) -> Vec<String> {
    let dir = temp_dir(family.name());
    let threads = 2;
    let chunks: Vec<Vec<(usize, &Point)>> = (0..threads)
        .map(|t| {
            points
                .iter()
                .enumerate()
                .filter(|(i, _)| i % threads == t)
                .collect()
        })
        .collect();
    let failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .iter()
            .map(|chunk| {
                let dir = &dir;
                s.spawn(move || {
                    let mut fails = Vec::new();
                    for (i, point) in chunk {
                        let src = dir.join(format!("c{i}.c"));
                        let obj = dir.join(format!("c{i}.o"));
                        fs_err::write(&src, family.render(point).unwrap()).expect("write source");
                        let out = Command::new(std::env::var("CC").unwrap_or("cc".into()))
                            .args([
                                "-O3",
                                "-march=native",
                                "-shared",
                                "-fPIC",
                                "-Wall",
                                "-Werror=implicit-function-declaration",
                                "-c",
                            ])
                            .arg(&src)
                            .arg("-o")
                            .arg(&obj)
                            .output()
                            .expect("run cc");
                        if !out.status.success() {
                            fails.push(format!(
                                "{point:?}: {}",
                                String::from_utf8_lossy(&out.stderr)
                            ));
                        }
                    }
                    fails
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("compile thread"))
            .collect()
    });
    let _ = fs_err::remove_dir_all(&dir);
    failures
}

/// Every valid point within two knob changes of `start` (including `start`).
pub(crate) fn within_two(family: &dyn Family, start: &Point) -> Vec<Point> {
    let mut seen = std::collections::BTreeSet::new();
    seen.insert(start.clone());
    for (_, _, one) in super::neighbours(family, start) {
        for (_, _, two) in super::neighbours(family, &one) {
            seen.insert(two);
        }
        seen.insert(one);
    }
    seen.into_iter().collect()
}

/// Deterministic sample of `n` items (every k-th).
pub(crate) fn sample<T: Clone>(items: &[T], n: usize) -> Vec<T> {
    if items.len() <= n {
        return items.to_vec();
    }
    let step = items.len() as f64 / n as f64;
    (0..n)
        .map(|i| items[(i as f64 * step) as usize].clone())
        .collect()
}
