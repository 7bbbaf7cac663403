//! Template families of the builtin proposer: for each built-in CPU task, a C code generator
//! over a small space of knobs, where changing one knob is one optimization tactic, and an
//! analytical cost model that ranks the points of the space.
//!
//! Every family's [`Family::seed`] renders the task's naive seed algorithm; the search walks the
//! space from there one knob at a time.

use std::collections::BTreeMap;

use ksearch_core::Dtype;
use ksearch_core::task::{BackendKind, TaskSpec, Workload};
use ksearch_core::tree::{Impact, Impacts, Risk};

use super::machine::Machine;

pub mod linear_recurrence;
pub mod matmul;
pub mod softmax;

/// A point in a family's template space: knob name -> chosen value.
pub type Config = BTreeMap<String, i64>;

/// One value of a knob, with a short label for titles ("64×64 tiles").
#[derive(Debug, Clone)]
pub struct KnobValue {
    pub value: i64,
    pub label: String,
}

/// A tunable dimension of a template: changing it is one tactic.
#[derive(Debug, Clone)]
pub struct Knob {
    /// Config key, e.g. "loop_order".
    pub name: String,
    /// Tactic name, e.g. "loop interchange".
    pub tactic: String,
    /// The knowledge layer's pattern this tactic instantiates (`knowledge/patterns/<id>.toml`),
    /// if there is one.
    pub pattern: Option<String>,
    /// One or two sentences: what changes in the code and why it can help.
    pub description: String,
    /// 1..=5
    pub difficulty: u8,
    pub values: Vec<KnobValue>,
    /// Whether neighbouring values are worth trying as refinements of the same tactic
    /// (true for sizes such as tile widths; false for on/off switches).
    pub ordered: bool,
}

/// The analytical estimate of one candidate on one workload.
#[derive(Debug, Clone, Copy)]
pub struct Cost {
    pub cycles: f64,
    pub bytes: f64,
    pub flops: f64,
}

pub trait Family: Send + Sync + std::fmt::Debug {
    /// "matmul"
    fn name(&self) -> &str;
    /// Name, inputs, outputs, axes and dtypes match the built-in task.
    fn matches(&self, spec: &TaskSpec) -> bool;
    /// Reproduces seed.c's algorithm.
    fn seed(&self) -> Config;
    fn knobs(&self) -> &[Knob];
    /// Whether the combination can be rendered.
    fn valid(&self, config: &Config) -> bool;
    /// Complete source satisfying the candidate contract; a header comment lists the config.
    /// Fails only for a file-defined space whose template cannot be rendered.
    fn render(&self, config: &Config) -> Result<String, String>;
    /// The candidate's file extension.
    fn extension(&self) -> &str {
        "c"
    }
    /// What `cost` is, for the rationale of an action.
    fn cost_model(&self) -> &str {
        "cost model"
    }
    /// What the cost model weighs, said when nothing has been measured yet.
    fn cost_basis(&self) -> &str {
        "bytes moved and operations per element against this machine's bandwidth and vector width"
    }
    /// Deterministic.
    fn cost(&self, config: &Config, workload: &Workload, machine: &Machine) -> Cost;
    /// Expected effect of setting `knob` to `value` from `from`, on the tree's three impact axes
    /// (ratings 0-10, risk, notes).
    fn impacts(&self, from: &Config, knob: &str, value: i64) -> Impacts;
}

/// Every family the builtin proposer knows.
pub fn all() -> Vec<Box<dyn Family>> {
    vec![
        Box::new(softmax::Softmax::new()),
        Box::new(matmul::Matmul::new()),
        Box::new(linear_recurrence::LinearRecurrence::new()),
    ]
}

/// The family whose task this is, if any.
pub fn for_task(spec: &TaskSpec) -> Option<Box<dyn Family>> {
    all().into_iter().find(|f| f.matches(spec))
}

/// Every valid config one knob change away from `config`: (knob, value, config).
pub fn neighbours(family: &dyn Family, config: &Config) -> Vec<(String, i64, Config)> {
    let mut out = Vec::new();
    for knob in family.knobs() {
        let current = value(config, &knob.name);
        for v in &knob.values {
            if v.value == current {
                continue;
            }
            let mut next = config.clone();
            next.insert(knob.name.clone(), v.value);
            if family.valid(&next) {
                out.push((knob.name.clone(), v.value, next));
            }
        }
    }
    out
}

/// The value of `knob` in `config`, 0 when absent.
pub fn value(config: &Config, knob: &str) -> i64 {
    config.get(knob).copied().unwrap_or(0)
}

/// Builds a config from pairs.
pub fn config_of(pairs: &[(&str, i64)]) -> Config {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

/// Whether `config` sets exactly the knobs of `knobs`, each to one of its values.
pub(crate) fn in_space(knobs: &[Knob], config: &Config) -> bool {
    config.len() == knobs.len()
        && knobs.iter().all(|k| {
            config
                .get(&k.name)
                .is_some_and(|v| k.values.iter().any(|kv| kv.value == *v))
        })
}

/// Knob values with labels.
pub(crate) fn values(pairs: &[(i64, &str)]) -> Vec<KnobValue> {
    pairs
        .iter()
        .map(|(value, label)| KnobValue {
            value: *value,
            label: (*label).to_owned(),
        })
        .collect()
}

/// The C header comment listing the family and its config.
pub(crate) fn header(family: &str, config: &Config, summary: &str) -> String {
    let knobs: Vec<String> = config.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!(
        "/* Builtin template family `{family}`: {summary}\n * config: {}\n */\n",
        knobs.join(" ")
    )
}

/// Whether a task tensor has this name, shape and dtype.
pub(crate) fn tensor_is(
    t: &ksearch_core::task::TensorSpec,
    name: &str,
    shape: &[&str],
    dtype: Dtype,
) -> bool {
    t.name == name
        && t.dtype == dtype
        && t.shape.iter().map(String::as_str).eq(shape.iter().copied())
}

/// Whether `spec` is a `c` task with this name, axes, inputs and outputs (all f32).
pub(crate) fn spec_is(
    spec: &TaskSpec,
    name: &str,
    axes: &[&str],
    inputs: &[(&str, &[&str])],
    outputs: &[(&str, &[&str])],
) -> bool {
    let same = |ts: &[ksearch_core::task::TensorSpec], want: &[(&str, &[&str])]| {
        ts.len() == want.len()
            && ts
                .iter()
                .zip(want)
                .all(|(t, (n, s))| tensor_is(t, n, s, Dtype::F32))
    };
    spec.name == name
        && spec.backend == BackendKind::C
        && spec
            .axes
            .iter()
            .map(String::as_str)
            .eq(axes.iter().copied())
        && same(&spec.inputs, inputs)
        && same(&spec.outputs, outputs)
}

/// The axis value of a workload, at least 1.
pub(crate) fn axis(workload: &Workload, name: &str) -> f64 {
    workload.axes.get(name).copied().unwrap_or(1).max(1) as f64
}

/// An impact rating with risk and notes.
pub(crate) fn impact(rating: f64, risk: Risk, notes: impl Into<String>) -> Impact {
    Impact {
        rating: rating.clamp(0.0, 10.0),
        risk,
        notes: notes.into(),
    }
}

/// C preamble shared by the families: includes, the vector type `V` of `lanes` floats (plain
/// `float` when `lanes` is 1), and unaligned load/store helpers `vld`/`vst` plus `vsplat`.
pub(crate) fn c_vector_preamble(lanes: i64) -> String {
    let mut s = String::from(
        "#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>\n#include <math.h>\n",
    );
    if lanes <= 1 {
        s.push_str(
            "\ntypedef float V;\n\
             #define VW 1\n\
             static inline V vld(const float *p) { return *p; }\n\
             static inline void vst(float *p, V v) { *p = v; }\n\
             static inline V vsplat(float x) { return x; }\n",
        );
    } else {
        let bytes = lanes * 4;
        s.push_str(&format!(
            "\n/* GCC vector extensions: {lanes} floats per vector. */\n\
             typedef float V __attribute__((vector_size({bytes})));\n\
             typedef int32_t VI __attribute__((vector_size({bytes})));\n\
             #define VW {lanes}\n\
             static inline V vld(const float *p) {{ V v; memcpy(&v, p, sizeof v); return v; }}\n\
             static inline void vst(float *p, V v) {{ memcpy(p, &v, sizeof v); }}\n\
             static inline V vsplat(float x) {{ return (V){{0}} + x; }}\n"
        ));
    }
    s
}

/// C helper `vstream(float *p, V v)`: a non-temporal store of one vector to an address aligned
/// to the vector's size, with intrinsics where the target has them and a plain store otherwise;
/// and `vstream_fence()` to order the streaming stores before returning.
pub(crate) fn c_stream_helpers(lanes: i64) -> String {
    let body = match lanes {
        16 => {
            "#if defined(__AVX512F__)\n    _mm512_stream_ps(p, (__m512)v);\n\
             #elif defined(__AVX__)\n    __m256 lo, hi; memcpy(&lo, &v, 32); memcpy(&hi, (const char *)&v + 32, 32);\n    _mm256_stream_ps(p, lo); _mm256_stream_ps(p + 8, hi);\n\
             #else\n    memcpy(p, &v, sizeof v);\n#endif\n"
        }
        8 => {
            "#if defined(__AVX__)\n    _mm256_stream_ps(p, (__m256)v);\n\
             #else\n    memcpy(p, &v, sizeof v);\n#endif\n"
        }
        4 => {
            "#if defined(__SSE__)\n    _mm_stream_ps(p, (__m128)v);\n\
             #else\n    memcpy(p, &v, sizeof v);\n#endif\n"
        }
        _ => "    memcpy(p, &v, sizeof v);\n",
    };
    format!(
        "\n#if defined(__x86_64__) || defined(__i386__)\n#include <immintrin.h>\n#endif\n\
         /* Non-temporal store of one vector; p is aligned to sizeof(V). */\n\
         static inline void vstream(float *p, V v) {{\n{body}}}\n\
         static inline void vstream_fence(void) {{\n\
         #if defined(__SSE__)\n    _mm_sfence();\n#endif\n}}\n"
    )
}

#[cfg(test)]
mod pattern_tests {
    #[test]
    fn every_pattern_a_knob_names_is_in_the_knowledge_base() {
        let k = ksearch_knowledge::Knowledge::builtin().unwrap();
        for family in super::all() {
            for knob in family.knobs() {
                if let Some(id) = &knob.pattern {
                    assert!(
                        k.pattern(id).is_some(),
                        "{}.{} names unknown pattern {id}",
                        family.name(),
                        knob.name
                    );
                }
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    //! Compiling rendered candidates in tests.

    use std::path::PathBuf;
    use std::process::Command;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::{Config, Family};

    static COUNTER: AtomicUsize = AtomicUsize::new(0);

    /// A fresh temporary directory for this test process.
    pub(crate) fn temp_dir(tag: &str) -> PathBuf {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("ksearch-families-{tag}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        dir
    }

    /// The seed, its neighbours and `path` are valid, render the contract's function without
    /// reserved names, and cost something finite on every workload; the seed has at least
    /// `min_neighbours` neighbours.
    pub(crate) fn assert_renders_and_costs(
        family: &dyn Family,
        spec: &ksearch_core::task::TaskSpec,
        path: Vec<Config>,
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

    /// The cost model's total (log cycles over the workloads) of a config.
    pub(crate) fn model_total(
        family: &dyn Family,
        spec: &ksearch_core::task::TaskSpec,
        c: &Config,
    ) -> f64 {
        let m = crate::builtin::machine::generic();
        spec.workloads
            .iter()
            .map(|w| family.cost(c, w, &m).cycles.ln())
            .sum()
    }

    /// Compiles each config's rendering as the worker does (plus `-c` and implicit-declaration
    /// errors), two at a time; returns the failures with the compiler's output.
    pub(crate) fn compile_all(family: &dyn Family, configs: &[Config]) -> Vec<String> {
        let dir = temp_dir(family.name());
        let threads = 2;
        let chunks: Vec<Vec<(usize, &Config)>> = (0..threads)
            .map(|t| {
                configs
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
                        for (i, config) in chunk {
                            let src = dir.join(format!("c{i}.c"));
                            let obj = dir.join(format!("c{i}.o"));
                            std::fs::write(&src, family.render(config).unwrap())
                                .expect("write source");
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
                                    "{config:?}: {}",
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
        let _ = std::fs::remove_dir_all(&dir);
        failures
    }

    /// Every valid config within two knob changes of `start` (including `start`).
    pub(crate) fn within_two(family: &dyn Family, start: &Config) -> Vec<Config> {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str, file: &str) -> TaskSpec {
        ksearch_core::task::parse_task(text, file).expect("task parses")
    }

    #[test]
    fn for_task_finds_each_builtin_task() {
        let cases = [
            (
                include_str!("../../../../../tasks/cpu/softmax/task.toml"),
                "softmax",
            ),
            (
                include_str!("../../../../../tasks/cpu/matmul/task.toml"),
                "matmul",
            ),
            (
                include_str!("../../../../../tasks/cpu/linear_recurrence/task.toml"),
                "linear_recurrence",
            ),
        ];
        for (text, name) in cases {
            let s = spec(text, name);
            let f = for_task(&s).unwrap_or_else(|| panic!("no family for {name}"));
            assert_eq!(f.name(), name);
        }
    }

    #[test]
    fn for_task_rejects_other_tasks() {
        let mut s = ksearch_core::task::tests_support::matmul_spec();
        s.name = "gemm".into();
        assert!(for_task(&s).is_none());
        let mut s = ksearch_core::task::tests_support::matmul_spec();
        s.inputs[0].dtype = Dtype::F64;
        assert!(for_task(&s).is_none());
    }

    #[test]
    fn every_family_seed_is_valid_and_in_space() {
        for f in all() {
            let seed = f.seed();
            assert!(in_space(f.knobs(), &seed), "{}", f.name());
            assert!(f.valid(&seed), "{}", f.name());
            for k in f.knobs() {
                assert!((1..=5).contains(&k.difficulty), "{}", k.name);
                assert!(k.values.len() >= 2, "{}", k.name);
            }
        }
    }
}
