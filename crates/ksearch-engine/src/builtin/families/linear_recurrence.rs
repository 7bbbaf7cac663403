//! `cpu/linear_recurrence`: h[r][t] = a[r][t] · h[r][t-1] + b[r][t] along each row.
//!
//! The seed walks one row at a time and is bound by the latency of one FMA per element. The
//! knobs interleave several rows (independent chains in flight), scan blocks of time steps in
//! registers (a log-step prefix scan of the affine maps h -> A h + B, so only one scalar FMA per
//! block stays on the carried chain), and write h with non-temporal stores (no read for ownership
//! of the output, which is most of the memory traffic the kernel can save).

use ksearch_core::task::{TaskSpec, Workload};
use ksearch_core::tree::{Impacts, Risk};

use super::{
    Cost, Family, Knob, Machine, Point, axis, c_stream_helpers, c_vector_preamble, header, impact,
    in_space, point_of, spec_is, value, values,
};

/// The linear-recurrence template family.
#[derive(Debug)]
pub struct LinearRecurrence {
    knobs: Vec<Knob>,
}

impl Default for LinearRecurrence {
    fn default() -> Self {
        Self::new()
    }
}

impl LinearRecurrence {
    pub fn new() -> LinearRecurrence {
        let knobs = vec![
            Knob {
                name: "rows".into(),
                pattern: Some("multiple-accumulators".into()),
                tactic: "interleave rows".into(),
                description: "Advances this many rows in lock-step, so as many independent recurrence chains are in flight and the FMA latency of one row overlaps the others.".into(),
                difficulty: 2,
                values: values(&[
                    (1, "1 row at a time"),
                    (2, "2 rows together"),
                    (4, "4 rows together"),
                    (8, "8 rows together"),
                ]),
                ordered: true,
            },
            Knob {
                name: "block".into(),
                pattern: Some("chunked-scan".into()),
                tactic: "blocked in-register scan".into(),
                description: "Loads this many time steps as one GCC vector, composes their affine maps with a log-step prefix scan in registers, and applies the carried state with one vector FMA, leaving a single scalar FMA per block on the sequential chain.".into(),
                difficulty: 4,
                values: values(&[
                    (0, "sequential"),
                    (4, "blocks of 4 steps"),
                    (8, "blocks of 8 steps"),
                    (16, "blocks of 16 steps"),
                ]),
                ordered: true,
            },
            Knob {
                name: "nt_store".into(),
                pattern: None,
                tactic: "non-temporal stores".into(),
                description: "Peels each row to vector alignment and writes h with streaming stores, so output lines are not read for ownership nor left to evict the inputs.".into(),
                difficulty: 2,
                values: values(&[(0, "cached stores"), (1, "streaming stores")]),
                ordered: false,
            },
        ];
        LinearRecurrence { knobs }
    }
}

#[derive(Debug, Clone, Copy)]
struct P {
    rows: i64,
    block: i64,
    nt: bool,
}

fn params(c: &Point) -> P {
    P {
        rows: value(c, "rows").max(1),
        block: value(c, "block").max(0),
        nt: value(c, "nt_store") == 1,
    }
}

impl Family for LinearRecurrence {
    fn name(&self) -> &str {
        "linear_recurrence"
    }

    fn matches(&self, spec: &TaskSpec) -> bool {
        spec_is(
            spec,
            "linear_recurrence",
            &["rows", "len"],
            &[("a", &["rows", "len"]), ("b", &["rows", "len"])],
            &[("h", &["rows", "len"])],
        )
    }

    fn seed(&self) -> Point {
        point_of(&[("rows", 1), ("block", 0), ("nt_store", 0)])
    }

    fn knobs(&self) -> &[Knob] {
        &self.knobs
    }

    fn valid(&self, point: &Point) -> bool {
        if !in_space(&self.knobs, point) {
            return false;
        }
        let p = params(point);
        // Streaming stores write whole vectors: they need the blocked scan.
        !(p.nt && p.block == 0)
    }

    fn render(&self, point: &Point) -> Result<String, String> {
        Ok(render(point))
    }

    fn cost(&self, point: &Point, workload: &Workload, machine: &Machine) -> Cost {
        cost(params(point), workload, machine)
    }

    fn impacts(&self, from: &Point, knob: &str, value: i64) -> Impacts {
        impacts(params(from), knob, value)
    }
}

fn render(point: &Point) -> String {
    let p = params(point);
    let mut s = header(
        "linear_recurrence",
        point,
        &format!(
            "{} row(s) in lock-step, {}{}.",
            p.rows,
            if p.block > 0 {
                format!("in-register scan of {}-step blocks", p.block)
            } else {
                "sequential time steps".to_owned()
            },
            if p.nt { ", streaming stores" } else { "" }
        ),
    );
    s.push_str(&c_vector_preamble(p.block.max(1)));
    if p.block > 0 {
        s.push_str(&scan_helper(p.block));
    }
    if p.nt {
        s.push_str(&c_stream_helpers(p.block));
    }
    for r in 1..=p.rows {
        s.push_str(&group(p, r));
    }
    s.push_str(
        "\nvoid linear_recurrence(const float *restrict a, const float *restrict b, float *restrict h,\n\
         \x20                      int64_t rows, int64_t len) {\n\
         \x20   int64_t r = 0;\n",
    );
    s.push_str(&format!(
        "    for (; r + {R} <= rows; r += {R})\n\
         \x20       group_{R}(a + r * len, b + r * len, h + r * len, len);\n",
        R = p.rows
    ));
    if p.rows > 1 {
        s.push_str("    switch (rows - r) {\n");
        for r in 1..p.rows {
            s.push_str(&format!(
                "    case {r}: group_{r}(a + r * len, b + r * len, h + r * len, len); break;\n"
            ));
        }
        s.push_str("    default: break;\n    }\n");
    }
    if p.nt {
        s.push_str("    vstream_fence();\n");
    }
    s.push_str("}\n");
    s
}

/// `scan(&A, &B)`: inclusive prefix composition of the lanes' affine maps.
fn scan_helper(t: i64) -> String {
    let mut s = format!(
        "\n/* In-register inclusive scan over the {t} lanes: afterwards lane i holds the composition of\n\
         \x20* the maps h -> A h + B of lanes 0..i (Hillis-Steele, log2({t}) steps). SHIFT moves lanes up,\n\
         \x20* filling the low lanes from `fill`: GCC's __builtin_shuffle, clang's __builtin_shufflevector. */\n\
         #if defined(__clang__)\n\
         #define SHIFT(v, fill, ...) __builtin_shufflevector(v, fill, __VA_ARGS__)\n\
         #else\n\
         #define SHIFT(v, fill, ...) __builtin_shuffle(v, fill, (VI){{__VA_ARGS__}})\n\
         #endif\n\
         static inline void scan(V *pa, V *pb) {{\n\
         \x20   const V one = vsplat(1.0f), zero = vsplat(0.0f);\n\
         \x20   V A = *pa, B = *pb;\n"
    );
    let mut shift = 1;
    while shift < t {
        let mask: Vec<String> = (0..t)
            .map(|i| {
                if i < shift {
                    (t + i).to_string()
                } else {
                    (i - shift).to_string()
                }
            })
            .collect();
        let mask = mask.join(", ");
        s.push_str(&format!(
            "    B = A * SHIFT(B, zero, {mask}) + B;\n\
             \x20   A = A * SHIFT(A, one, {mask});\n"
        ));
        shift *= 2;
    }
    s.push_str("    *pa = A;\n    *pb = B;\n}\n");
    s
}

/// The kernel for a group of `rows` consecutive rows.
fn group(p: P, rows: i64) -> String {
    let rs: Vec<i64> = (0..rows).collect();
    let mut s = format!(
        "\n/* {rows} row(s) advanced together. */\n\
         static void group_{rows}(const float *restrict a, const float *restrict b, float *restrict h, int64_t len) {{\n"
    );
    for r in &rs {
        s.push_str(&format!(
            "    const float *restrict a{r} = a + {r} * len, *restrict b{r} = b + {r} * len;\n\
             \x20   float *restrict h{r} = h + {r} * len;\n\
             \x20   float x{r} = 0.0f;\n"
        ));
    }
    if p.block == 0 {
        s.push_str("    for (int64_t t = 0; t < len; t++) {\n");
        for r in &rs {
            s.push_str(&format!(
                "        x{r} = a{r}[t] * x{r} + b{r}[t];\n        h{r}[t] = x{r};\n"
            ));
        }
        s.push_str("    }\n}\n");
        return s;
    }
    let t = p.block;
    // Where each row's blocks start: 0, or after a scalar peel up to vector alignment.
    for r in &rs {
        if p.nt {
            s.push_str(&format!(
                "    int64_t t{r} = (int64_t)((sizeof(V) - ((uintptr_t)h{r} & (sizeof(V) - 1))) & (sizeof(V) - 1)) / 4;\n\
                 \x20   if (t{r} > len) t{r} = len;\n\
                 \x20   for (int64_t t = 0; t < t{r}; t++) {{\n\
                 \x20       x{r} = a{r}[t] * x{r} + b{r}[t];\n\
                 \x20       h{r}[t] = x{r};\n\
                 \x20   }}\n"
            ));
        } else {
            s.push_str(&format!("    int64_t t{r} = 0;\n"));
        }
    }
    s.push_str("    int64_t nblk = (len - t0) / VW;\n");
    for r in rs.iter().skip(1) {
        s.push_str(&format!(
            "    if ((len - t{r}) / VW < nblk) nblk = (len - t{r}) / VW;\n"
        ));
    }
    s.push_str("    for (int64_t q = 0; q < nblk; q++) {\n");
    let store = if p.nt { "vstream" } else { "vst" };
    for r in &rs {
        s.push_str(&format!(
            "        {{\n\
             \x20           const int64_t t = t{r} + q * VW;\n\
             \x20           V A = vld(a{r} + t), B = vld(b{r} + t);\n\
             \x20           scan(&A, &B);\n\
             \x20           {store}(h{r} + t, A * x{r} + B);\n\
             \x20           x{r} = A[{last}] * x{r} + B[{last}];\n\
             \x20       }}\n",
            last = t - 1
        ));
    }
    s.push_str("    }\n");
    // Finish each row sequentially.
    for r in &rs {
        s.push_str(&format!(
            "    for (int64_t t = t{r} + nblk * VW; t < len; t++) {{\n\
             \x20       x{r} = a{r}[t] * x{r} + b{r}[t];\n\
             \x20       h{r}[t] = x{r};\n\
             \x20   }}\n"
        ));
    }
    s.push_str("}\n");
    s
}

fn cost(p: P, w: &Workload, machine: &Machine) -> Cost {
    let rows = axis(w, "rows");
    let len = axis(w, "len");
    let n = rows * len;
    let fma_latency = 4.0;
    // Chains in flight: full groups of `rows`, then the remainder group.
    let group = p.rows as f64;
    let full = (rows / group).floor();
    let rem = rows - full * group;
    let per_chain_elems = len;
    let chain_per_elem = if p.block > 0 {
        // One scalar FMA per block on the chain, plus the lane extract.
        (fma_latency + 1.0) / p.block as f64
    } else {
        fma_latency
    };
    let latency = (full + if rem > 0.0 { 1.0 } else { 0.0 }) * per_chain_elems * chain_per_elem;
    let throughput = if p.block > 0 {
        let t = p.block as f64;
        // loads, store, log2(T) × (2 shuffles + 2 FP ops), the carry FMA and extracts.
        let ops = 3.0 + 4.0 * t.log2() + 4.0;
        n / t * ops / machine.vector_ops_per_cycle(p.block as u32)
    } else {
        n * 0.75
    };
    let write = if p.nt { 4.0 } else { 8.0 };
    let bytes = n * (8.0 + write);
    // Beyond a few concurrent streams (three per row) the prefetchers keep up less well.
    let streams = 3.0 * group.min(rows);
    let stream_penalty = 1.0 + ((streams - 6.0) / 24.0).max(0.0);
    let memory = bytes / machine.dram_bytes_per_cycle * stream_penalty;
    let core = latency.max(throughput);
    Cost {
        cycles: core.max(memory) + 0.25 * core.min(memory) + rows * 20.0 + 100.0,
        bytes,
        flops: 2.0 * n,
    }
}

fn impacts(from: P, knob: &str, v: i64) -> Impacts {
    use Risk::{Low, Medium};
    let mut out = Impacts::default();
    match knob {
        "rows" => {
            let up = v > from.rows;
            out.compute_fit = impact(
                if up && from.block == 0 {
                    8.0
                } else if up {
                    3.0
                } else {
                    1.0
                },
                Low,
                format!("{v} independent chains hide the FMA latency"),
            );
            out.register_pressure = impact(
                (v * from.block.max(1)) as f64 / 12.0,
                if v * from.block.max(1) > 64 {
                    Medium
                } else {
                    Low
                },
                format!("{v} carried states and their blocks"),
            );
            out.memory_bandwidth = impact(
                if up { 2.0 } else { 1.0 },
                if v >= 8 { Medium } else { Low },
                format!("{} concurrent streams for the prefetchers", 3 * v),
            );
        }
        "block" => {
            out.compute_fit = impact(
                if v > from.block { 8.0 } else { 1.0 },
                Medium,
                "one scalar FMA per block on the carried chain; the scan itself is parallel",
            );
            out.register_pressure =
                impact((v as f64 / 4.0).min(6.0), Low, "scan temporaries per row");
            out.memory_bandwidth = impact(2.0, Low, "vector loads and stores of whole blocks");
        }
        "nt_store" => {
            out.memory_bandwidth = impact(
                if v == 1 { 7.0 } else { 0.0 },
                Medium,
                "no read for ownership of h: a quarter less DRAM traffic",
            );
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::Family;
    use super::super::test_support::{
        assert_impacts_rated, assert_renders_and_costs, compile_all, model_total, within_two,
    };
    use super::*;

    fn spec() -> TaskSpec {
        ksearch_core::task::parse_task(
            include_str!("../../../../../tasks/cpu/linear_recurrence/task.toml"),
            "linear_recurrence/task.toml",
        )
        .expect("task parses")
    }

    /// The greedy path measured with `ksearch eval` (each step faster than its parent).
    pub(crate) fn best_path() -> Vec<Point> {
        let f = LinearRecurrence::new();
        let mut path = vec![f.seed()];
        for (k, v) in [("block", 16), ("nt_store", 1)] {
            let mut c = path.last().expect("path").clone();
            c.insert(k.to_owned(), v);
            path.push(c);
        }
        path
    }

    #[test]
    fn matches_the_builtin_task() {
        assert!(LinearRecurrence::new().matches(&spec()));
        let mut other = spec();
        other.outputs[0].name = "y".into();
        assert!(!LinearRecurrence::new().matches(&other));
    }

    #[test]
    fn seed_and_neighbours_render_and_cost() {
        assert_renders_and_costs(
            &LinearRecurrence::new(),
            &spec(),
            best_path(),
            "void linear_recurrence(const float *restrict a",
            5,
        );
    }

    #[test]
    fn seed_renders_the_sequential_recurrence() {
        let src = LinearRecurrence::new()
            .render(&LinearRecurrence::new().seed())
            .unwrap();
        assert!(src.contains("x0 = a0[t] * x0 + b0[t];"));
        assert!(!src.contains("scan("));
    }

    #[test]
    fn cost_ranks_the_path() {
        let f = LinearRecurrence::new();
        let s = spec();
        let total = |c: &Point| model_total(&f, &s, c);
        let path = best_path();
        assert!(total(&path[1]) < total(&path[0]));
        assert!(total(&path[2]) < total(&path[1]));
        let mut rows4 = f.seed();
        rows4.insert("rows".into(), 4);
        assert!(total(&rows4) < total(&path[0]));
    }

    #[test]
    fn impacts_are_rated() {
        assert_impacts_rated(&LinearRecurrence::new());
    }

    #[test]
    fn invalid_points_are_rejected() {
        let f = LinearRecurrence::new();
        let mut c = f.seed();
        c.insert("nt_store".into(), 1);
        assert!(!f.valid(&c));
        c.insert("block".into(), 8);
        assert!(f.valid(&c));
        c.insert("block".into(), 32);
        assert!(!f.valid(&c));
    }

    #[test]
    fn reachable_points_compile() {
        let f = LinearRecurrence::new();
        // The space is small: compile all of it.
        let mut points = within_two(&f, &f.seed());
        points.extend(best_path());
        points.sort();
        points.dedup();
        let failures = compile_all(&f, &points);
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
