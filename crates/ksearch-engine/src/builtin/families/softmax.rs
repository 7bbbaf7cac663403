//! `cpu/softmax`: row-wise softmax of a float32 matrix.
//!
//! The seed makes three scalar passes per row (max; exponentiate with libm, store and sum;
//! divide). The knobs vectorize the passes with GCC vector extensions, split the reductions over
//! several accumulators, replace `expf` with a vectorizable polynomial, multiply by the
//! reciprocal of the sum, fuse the max and the sum into one online pass, and stream the output
//! past the caches.
//!
//! Accuracy: a single float running sum (the seed's) loses about sqrt(cols) ulps, ~2e-5 on the
//! 32768-column workload; the task's norm tolerance (1e-4) allows that.

use ksearch_core::task::{TaskSpec, Workload};
use ksearch_core::tree::{Impacts, Risk};

use super::{
    Cost, Family, Knob, Machine, Point, axis, c_stream_helpers, c_vector_preamble, header, impact,
    in_space, point_of, spec_is, value, values,
};

/// The softmax template family.
#[derive(Debug)]
pub struct Softmax {
    knobs: Vec<Knob>,
}

impl Default for Softmax {
    fn default() -> Self {
        Self::new()
    }
}

impl Softmax {
    pub fn new() -> Softmax {
        let knobs = vec![
            Knob {
                name: "vec".into(),
                pattern: Some("vectorized-access".into()),
                tactic: "explicit vectorization".into(),
                description: "Processes each pass in vectors of this many floats (GCC vector extensions), so the max, the sum and the scaling run one instruction per vector instead of per element.".into(),
                difficulty: 2,
                values: values(&[
                    (1, "scalar"),
                    (4, "4-wide vectors"),
                    (8, "8-wide vectors"),
                    (16, "16-wide vectors"),
                ]),
                ordered: true,
            },
            Knob {
                name: "acc".into(),
                pattern: Some("multiple-accumulators".into()),
                tactic: "multiple accumulators".into(),
                description: "Splits the max and sum reductions over several independent accumulators (unrolling the loop), which hides the add latency chain and makes the float sum more accurate.".into(),
                difficulty: 1,
                values: values(&[
                    (1, "1 accumulator"),
                    (2, "2 accumulators"),
                    (4, "4 accumulators"),
                ]),
                ordered: true,
            },
            Knob {
                name: "exp".into(),
                pattern: None,
                tactic: "vectorized polynomial exp".into(),
                description: "Replaces the libm expf call per element with an inline range reduction and degree-6 polynomial that works on whole vectors, removing the dominant scalar call.".into(),
                difficulty: 3,
                values: values(&[(0, "libm expf"), (1, "polynomial exp")]),
                ordered: false,
            },
            Knob {
                name: "recip".into(),
                pattern: None,
                tactic: "reciprocal instead of division".into(),
                description: "Computes 1/sum once per row and multiplies each element by it instead of dividing each element by the sum.".into(),
                difficulty: 1,
                values: values(&[(0, "divide"), (1, "multiply by reciprocal")]),
                ordered: false,
            },
            Knob {
                name: "online".into(),
                pattern: Some("online-softmax".into()),
                tactic: "online (one-pass) softmax".into(),
                description: "Computes the running max and the rescaled running sum in a single pass over x, then writes exp(x - max) / sum in a second pass: the output is written once instead of stored, re-read and rewritten.".into(),
                difficulty: 3,
                values: values(&[(0, "three passes"), (1, "online max+sum, two passes")]),
                ordered: false,
            },
            Knob {
                name: "nt_store".into(),
                pattern: None,
                tactic: "non-temporal stores".into(),
                description: "Writes the final output with streaming (non-temporal) stores after peeling to vector alignment, so output lines are not read for ownership nor pollute the cache.".into(),
                difficulty: 2,
                values: values(&[(0, "cached stores"), (1, "streaming stores")]),
                ordered: false,
            },
        ];
        Softmax { knobs }
    }
}

#[derive(Debug, Clone, Copy)]
struct P {
    vec: i64,
    acc: i64,
    poly: bool,
    recip: bool,
    online: bool,
    nt: bool,
}

fn params(c: &Point) -> P {
    P {
        vec: value(c, "vec").max(1),
        acc: value(c, "acc").max(1),
        poly: value(c, "exp") == 1,
        recip: value(c, "recip") == 1,
        online: value(c, "online") == 1,
        nt: value(c, "nt_store") == 1,
    }
}

impl Family for Softmax {
    fn name(&self) -> &str {
        "softmax"
    }

    fn matches(&self, spec: &TaskSpec) -> bool {
        spec_is(
            spec,
            "softmax",
            &["rows", "cols"],
            &[("x", &["rows", "cols"])],
            &[("y", &["rows", "cols"])],
        )
    }

    fn seed(&self) -> Point {
        point_of(&[
            ("vec", 1),
            ("acc", 1),
            ("exp", 0),
            ("recip", 0),
            ("online", 0),
            ("nt_store", 0),
        ])
    }

    fn knobs(&self) -> &[Knob] {
        &self.knobs
    }

    fn valid(&self, point: &Point) -> bool {
        if !in_space(&self.knobs, point) {
            return false;
        }
        let p = params(point);
        // Streaming stores need vectors.
        !(p.nt && p.vec < 4)
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
    let vw = p.vec;
    let acc = p.acc as usize;
    let mut s = header(
        "softmax",
        point,
        &format!(
            "{}, {} accumulator(s), {} exp, {}, {}{}.",
            if vw == 1 {
                "scalar".to_owned()
            } else {
                format!("{vw}-wide vectors")
            },
            acc,
            if p.poly { "polynomial" } else { "libm" },
            if p.recip {
                "reciprocal multiply"
            } else {
                "division"
            },
            if p.online {
                "online max+sum then one write pass"
            } else {
                "three passes (max; exp, store and sum; normalize)"
            },
            if p.nt { ", streaming stores" } else { "" }
        ),
    );
    s.push_str(&c_vector_preamble(vw));
    s.push_str(&c_helpers(p));
    if p.nt {
        s.push_str(&c_stream_helpers(vw));
    }
    s.push_str(
        "\nvoid softmax(const float *restrict x, float *restrict y, int64_t rows, int64_t cols) {\n",
    );
    s.push_str("    for (int64_t r = 0; r < rows; r++) {\n");
    s.push_str("        const float *xr = x + r * cols;\n        float *yr = y + r * cols;\n");
    if p.online {
        s.push_str(&online_passes(p, acc));
    } else {
        s.push_str(&three_passes(p, acc));
    }
    s.push_str("    }\n");
    if p.nt {
        s.push_str("    vstream_fence();\n");
    }
    s.push_str("}\n");
    s
}

/// vmax, hmax, hsum, the scalar `sexp` and the vector `vexp`.
fn c_helpers(p: P) -> String {
    let mut s = String::new();
    // Scalar exp.
    if p.poly {
        s.push_str(
            "\n/* exp by Cody-Waite range reduction and a degree-6 polynomial (relative error ~2 ulp).\n\
             \x20* The argument is clamped to [-87.3, 88.3]; exp underflows to ~1e-38 below. */\n\
             static inline float sexp(float x) {\n\
             \x20   x = x < -87.3f ? -87.3f : x;\n\
             \x20   x = x > 88.3f ? 88.3f : x;\n\
             \x20   float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;\n\
             \x20   float r = x - n * 0.693359375f;\n\
             \x20   r = r + n * 2.12194440e-4f;\n\
             \x20   float q = 1.9875691500e-4f;\n\
             \x20   q = q * r + 1.3981999507e-3f;\n\
             \x20   q = q * r + 8.3334519073e-3f;\n\
             \x20   q = q * r + 4.1665795894e-2f;\n\
             \x20   q = q * r + 1.6666665459e-1f;\n\
             \x20   q = q * r + 5.0000001201e-1f;\n\
             \x20   float e = q * (r * r) + r + 1.0f;\n\
             \x20   int32_t bits = ((int32_t)n + 127) << 23;\n\
             \x20   float scale;\n\
             \x20   memcpy(&scale, &bits, sizeof scale);\n\
             \x20   return e * scale;\n\
             }\n",
        );
    } else {
        s.push_str("\nstatic inline float sexp(float x) { return expf(x); }\n");
    }
    if p.vec == 1 {
        s.push_str(
            "static inline V vmax(V a, V b) { return a > b ? a : b; }\n\
             static inline float hmax(V a) { return a; }\n\
             static inline float hsum(V a) { return a; }\n\
             static inline V vexp(V x) { return sexp(x); }\n",
        );
        return s;
    }
    s.push_str(
        "static inline V vmax(V a, V b) {\n\
         \x20   VI m = a > b;\n\
         \x20   return (V)((m & (VI)a) | (~m & (VI)b));\n\
         }\n\
         static inline float hmax(V a) {\n\
         \x20   float m = a[0];\n\
         \x20   for (int i = 1; i < VW; i++) m = a[i] > m ? a[i] : m;\n\
         \x20   return m;\n\
         }\n\
         static inline float hsum(V a) {\n\
         \x20   float s = 0.0f;\n\
         \x20   for (int i = 0; i < VW; i++) s += a[i];\n\
         \x20   return s;\n\
         }\n",
    );
    if p.poly {
        s.push_str(
            "static inline V vexp(V x) {\n\
             \x20   x = vmax(x, vsplat(-87.3f));\n\
             \x20   x = -vmax(-x, vsplat(-88.3f));\n\
             \x20   V n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;\n\
             \x20   V r = x - n * 0.693359375f;\n\
             \x20   r = r + n * 2.12194440e-4f;\n\
             \x20   V q = vsplat(1.9875691500e-4f);\n\
             \x20   q = q * r + 1.3981999507e-3f;\n\
             \x20   q = q * r + 8.3334519073e-3f;\n\
             \x20   q = q * r + 4.1665795894e-2f;\n\
             \x20   q = q * r + 1.6666665459e-1f;\n\
             \x20   q = q * r + 5.0000001201e-1f;\n\
             \x20   V e = q * (r * r) + r + 1.0f;\n\
             \x20   VI bits = (__builtin_convertvector(n, VI) + 127) << 23;\n\
             \x20   return e * (V)bits;\n\
             }\n",
        );
    } else {
        s.push_str(
            "static inline V vexp(V x) {\n\
             \x20   V e;\n\
             \x20   for (int i = 0; i < VW; i++) e[i] = expf(x[i]);\n\
             \x20   return e;\n\
             }\n",
        );
    }
    s
}

fn vars(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

/// `a0 op a1 op ...` as a balanced tree.
fn tree(items: &[String], f: &dyn Fn(&str, &str) -> String) -> String {
    if items.len() == 1 {
        return items[0].clone();
    }
    let mid = items.len() / 2;
    f(&tree(&items[..mid], f), &tree(&items[mid..], f))
}

fn vmax_tree(items: &[String]) -> String {
    tree(items, &|a, b| format!("vmax({a}, {b})"))
}

fn sum_tree(items: &[String]) -> String {
    tree(items, &|a, b| format!("({a} + {b})"))
}

/// The final write loop `yr[c] = <value(c)> (÷ or ×) sum`, vectorized, optionally streaming.
/// `vexpr`/`sexpr` produce the unnormalized vector/scalar value at column `c`.
fn write_pass(p: P, vexpr: &str, sexpr: &str) -> String {
    let mut s = String::new();
    let (vop, sop) = if p.recip {
        ("* vinv", "* inv")
    } else {
        ("/ vs", "/ s")
    };
    if p.recip {
        s.push_str("        const float inv = 1.0f / s;\n        const V vinv = vsplat(inv);\n");
    } else if p.vec > 1 {
        s.push_str("        const V vs = vsplat(s);\n");
    }
    s.push_str("        c = 0;\n");
    if p.nt {
        s.push_str(&format!(
            "        for (; c < cols && ((uintptr_t)(yr + c) & (sizeof(V) - 1)) != 0; c++)\n\
             \x20           yr[c] = {sexpr} {sop};\n\
             \x20       for (; c + VW <= cols; c += VW)\n\
             \x20           vstream(yr + c, {vexpr} {vop});\n"
        ));
    } else if p.vec > 1 {
        s.push_str(&format!(
            "        for (; c + VW <= cols; c += VW)\n\
             \x20           vst(yr + c, {vexpr} {vop});\n"
        ));
    }
    s.push_str(&format!(
        "        for (; c < cols; c++)\n            yr[c] = {sexpr} {sop};\n"
    ));
    s
}

fn three_passes(p: P, acc: usize) -> String {
    let mut s = String::new();
    let mv = vars("mx", acc);
    let sv = vars("sm", acc);
    // Pass 1: max.
    s.push_str("        /* Pass 1: the row max. */\n");
    for m in &mv {
        s.push_str(&format!("        V {m} = vsplat(-INFINITY);\n"));
    }
    s.push_str("        int64_t c = 0;\n");
    s.push_str(&format!(
        "        for (; c + {} <= cols; c += {}) {{\n",
        p.vec * acc as i64,
        p.vec * acc as i64
    ));
    for (i, m) in mv.iter().enumerate() {
        s.push_str(&format!(
            "            {m} = vmax({m}, vld(xr + c + {}));\n",
            i as i64 * p.vec
        ));
    }
    s.push_str("        }\n");
    if acc > 1 {
        s.push_str("        for (; c + VW <= cols; c += VW) mx0 = vmax(mx0, vld(xr + c));\n");
    }
    s.push_str(&format!("        float m = hmax({});\n", vmax_tree(&mv)));
    if p.vec > 1 {
        s.push_str("        for (; c < cols; c++) m = xr[c] > m ? xr[c] : m;\n");
    }
    // Pass 2: exponentiate, store, sum.
    s.push_str("        /* Pass 2: exponentiate, store and sum. */\n");
    s.push_str("        const V vm = vsplat(m);\n");
    for v in &sv {
        s.push_str(&format!("        V {v} = vsplat(0.0f);\n"));
    }
    s.push_str("        c = 0;\n");
    s.push_str(&format!(
        "        for (; c + {} <= cols; c += {}) {{\n",
        p.vec * acc as i64,
        p.vec * acc as i64
    ));
    for (i, v) in sv.iter().enumerate() {
        let off = i as i64 * p.vec;
        s.push_str(&format!(
            "            V e{i} = vexp(vld(xr + c + {off}) - vm);\n\
             \x20           vst(yr + c + {off}, e{i});\n\
             \x20           {v} += e{i};\n"
        ));
    }
    s.push_str("        }\n");
    if acc > 1 {
        s.push_str(
            "        for (; c + VW <= cols; c += VW) {\n\
             \x20           V e = vexp(vld(xr + c) - vm);\n\
             \x20           vst(yr + c, e);\n\
             \x20           sm0 += e;\n\
             \x20       }\n",
        );
    }
    s.push_str(&format!("        float s = hsum({});\n", sum_tree(&sv)));
    if p.vec > 1 {
        s.push_str(
            "        for (; c < cols; c++) {\n\
             \x20           float e = sexp(xr[c] - m);\n\
             \x20           yr[c] = e;\n\
             \x20           s += e;\n\
             \x20       }\n",
        );
    }
    // Pass 3: normalize.
    s.push_str("        /* Pass 3: normalize. */\n");
    s.push_str(&write_pass(p, "vld(yr + c)", "yr[c]"));
    s
}

fn online_passes(p: P, acc: usize) -> String {
    let mut s = String::new();
    let xv = vars("x", acc);
    let sv = vars("sm", acc);
    let step = p.vec * acc as i64;
    s.push_str(
        "        /* Pass 1 (online): per lane, a running max and a sum rescaled whenever the max grows. */\n",
    );
    s.push_str("        V mx = vsplat(-INFINITY);\n");
    for v in &sv {
        s.push_str(&format!("        V {v} = vsplat(0.0f);\n"));
    }
    s.push_str("        int64_t c = 0;\n");
    s.push_str(&format!(
        "        for (; c + {step} <= cols; c += {step}) {{\n"
    ));
    for (i, x) in xv.iter().enumerate() {
        s.push_str(&format!(
            "            V {x} = vld(xr + c + {});\n",
            i as i64 * p.vec
        ));
    }
    s.push_str(&format!(
        "            V mn = vmax(mx, {});\n\
         \x20           V sc = vexp(mx - mn);\n",
        vmax_tree(&xv)
    ));
    for (x, v) in xv.iter().zip(&sv) {
        s.push_str(&format!("            {v} = {v} * sc + vexp({x} - mn);\n"));
    }
    s.push_str("            mx = mn;\n        }\n");
    if acc > 1 {
        s.push_str(
            "        for (; c + VW <= cols; c += VW) {\n\
             \x20           V x0 = vld(xr + c);\n\
             \x20           V mn = vmax(mx, x0);\n\
             \x20           V sc = vexp(mx - mn);\n\
             \x20           sm0 = sm0 * sc + vexp(x0 - mn);\n",
        );
        for v in &sv[1..] {
            s.push_str(&format!("            {v} = {v} * sc;\n"));
        }
        s.push_str("            mx = mn;\n        }\n");
    }
    s.push_str("        const int64_t tail = c;\n");
    s.push_str("        float m = hmax(mx);\n");
    s.push_str("        for (; c < cols; c++) m = xr[c] > m ? xr[c] : m;\n");
    s.push_str(&format!(
        "        float s = hsum({} * vexp(mx - vsplat(m)));\n",
        sum_tree(&sv)
    ));
    s.push_str("        for (c = tail; c < cols; c++) s += sexp(xr[c] - m);\n");
    s.push_str("        /* Pass 2: write exp(x - max) / sum. */\n");
    s.push_str("        const V vm = vsplat(m);\n");
    s.push_str(&write_pass(p, "vexp(vld(xr + c) - vm)", "sexp(xr[c] - m)"));
    s
}

/// Per-element cycle costs summed over the passes (calibrated loosely on a Zen 4 core: libm
/// expf about 7 cycles an element, the polynomial about 16 vector operations, a vector division
/// about 0.6 cycles an element, reduction chains 2-4 cycles of latency per step), against the
/// DRAM traffic of x and y plus the re-reads of a row from the cache level it fits in.
fn cost(p: P, w: &Workload, machine: &Machine) -> Cost {
    let rows = axis(w, "rows");
    let cols = axis(w, "cols");
    let n = rows * cols;
    let vec = p.vec as f64;
    let chains = vec * p.acc as f64;
    // Cycles per element of one vector operation over the row; scalar code issues about four
    // simple operations a cycle.
    let op = if p.vec == 1 {
        0.25
    } else {
        1.0 / (vec * machine.vector_ops_per_cycle(p.vec as u32))
    };
    let hw_op =
        1.0 / (f64::from(machine.f32_lanes()) * machine.vector_ops_per_cycle(machine.f32_lanes()));
    let exp = if !p.poly {
        7.0
    } else if p.vec == 1 {
        // The compiler vectorizes the inline scalar polynomial only partly.
        2.5
    } else {
        16.0 * op
    };
    let max_pass = 3.0 * op + 2.0 / chains;
    // The compiler vectorizes the division loop even in scalar code.
    let norm = if p.recip {
        (2.0 * op).min(4.0 * hw_op)
    } else {
        0.6
    };
    let per_elem = if p.online {
        let pass1 = max_pass + exp * (1.0 + 1.0 / p.acc as f64) + 3.0 * op + 4.0 / chains;
        let pass2 = exp + 4.0 * op + norm;
        pass1 + pass2
    } else {
        let pass2 = exp + 4.0 * op + 3.0 / chains;
        max_pass + pass2 + norm
    };
    let compute = n * per_elem;
    let row_bytes = cols * 4.0;
    // Passes after the first re-read the row from wherever two rows (x and y) fit.
    let reread_bw = machine.bytes_per_cycle_for(2.0 * row_bytes);
    let dram = machine.dram_bytes_per_cycle;
    let (dram_bytes, reread_bytes) = if p.online {
        // x twice (the second time from cache), y once; streamed, y costs no read for ownership.
        (n * 4.0 + if p.nt { n * 4.0 } else { n * 8.0 }, n * 4.0)
    } else {
        // y is written in pass 2 (read for ownership), re-read and rewritten in pass 3;
        // streaming it in pass 3 only forces the lines out early.
        (n * 12.0 + if p.nt { n * 4.0 } else { 0.0 }, n * 12.0)
    };
    let memory = dram_bytes / dram + reread_bytes / reread_bw;
    Cost {
        cycles: compute.max(memory) + 0.25 * compute.min(memory) + rows * 50.0,
        bytes: dram_bytes,
        flops: n * if p.online { 50.0 } else { 25.0 },
    }
}

fn impacts(from: P, knob: &str, v: i64) -> Impacts {
    use Risk::{High, Low, Medium};
    let mut out = Impacts::default();
    match knob {
        "vec" => {
            let up = v > from.vec;
            out.compute_fit = impact(
                if up { 8.0 } else { 1.0 },
                Low,
                format!("{v}-wide vectors for max, sum and normalize"),
            );
            out.register_pressure = impact(
                if v >= 16 { 3.0 } else { 1.0 },
                Low,
                "one vector per accumulator",
            );
            out.memory_bandwidth = impact(2.0, Low, "wider loads and stores");
            if !from.poly && up {
                out.compute_fit
                    .notes
                    .push_str("; libm expf stays scalar per lane");
            }
        }
        "acc" => {
            out.compute_fit = impact(
                if v > from.acc { 4.0 } else { 1.0 },
                Low,
                "independent max/sum chains hide the add latency",
            );
            out.register_pressure = impact(
                (v * from.vec / 16) as f64,
                if v * from.vec > 64 { Medium } else { Low },
                format!("{v} accumulators per reduction"),
            );
        }
        "exp" => {
            out.compute_fit = impact(
                if v == 1 { 9.0 } else { 0.0 },
                Medium,
                "a branch-free polynomial exp vectorizes; libm expf is a scalar call per element",
            );
            out.register_pressure = impact(2.0, Low, "a few constants in registers");
        }
        "recip" => {
            out.compute_fit = impact(
                if v == 1 { 3.0 } else { 0.0 },
                Low,
                "one division per row instead of per element",
            );
        }
        "online" => {
            out.memory_bandwidth = impact(
                if v == 1 { 6.0 } else { 1.0 },
                Medium,
                "the output is written once instead of stored, re-read and rewritten",
            );
            out.compute_fit = impact(
                if v == 1 && !from.poly { 0.0 } else { 3.0 },
                if from.poly { Medium } else { High },
                "recomputes exp in the write pass and rescales the sum per chunk",
            );
            out.register_pressure = impact(3.0, Low, "running max and sums per lane");
        }
        "nt_store" => {
            out.memory_bandwidth = impact(
                if v == 1 && from.online { 6.0 } else { 2.0 },
                Medium,
                "streaming stores skip the read-for-ownership of output lines",
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
            include_str!("../../../../../tasks/cpu/softmax/task.toml"),
            "softmax/task.toml",
        )
        .expect("task parses")
    }

    /// The greedy path measured with `ksearch eval` (each step faster than its parent).
    pub(crate) fn best_path() -> Vec<Point> {
        let f = Softmax::new();
        let mut path = vec![f.seed()];
        for (k, v) in [("vec", 16), ("exp", 1), ("recip", 1), ("acc", 4)] {
            let mut c = path.last().expect("path").clone();
            c.insert(k.to_owned(), v);
            path.push(c);
        }
        path
    }

    #[test]
    fn matches_the_builtin_task() {
        assert!(Softmax::new().matches(&spec()));
        let mut other = spec();
        other.axes.reverse();
        assert!(!Softmax::new().matches(&other));
    }

    #[test]
    fn seed_and_neighbours_render_and_cost() {
        assert_renders_and_costs(
            &Softmax::new(),
            &spec(),
            best_path(),
            "void softmax(const float *restrict x",
            3,
        );
    }

    #[test]
    fn seed_renders_the_seed_algorithm() {
        let src = Softmax::new().render(&Softmax::new().seed()).unwrap();
        assert!(src.contains("expf"));
        assert!(src.contains("/ s"));
        assert!(!src.contains("vector_size"));
    }

    #[test]
    fn cost_ranks_the_path() {
        let f = Softmax::new();
        let s = spec();
        let total = |c: &Point| model_total(&f, &s, c);
        let path = best_path();
        let first = total(&path[0]);
        let last = total(path.last().expect("path"));
        assert!(last < first - 1.0, "{first} vs {last}");
        // Vectorizing with a polynomial exp beats the scalar libm seed.
        assert!(total(&path[2]) < total(&path[0]));
    }

    #[test]
    fn impacts_are_rated() {
        assert_impacts_rated(&Softmax::new());
    }

    #[test]
    fn invalid_points_are_rejected() {
        let f = Softmax::new();
        let mut c = f.seed();
        c.insert("recip".into(), 1);
        assert!(f.valid(&c));
        c.insert("nt_store".into(), 1);
        assert!(!f.valid(&c), "streaming stores need vectors");
        c.insert("vec".into(), 9);
        assert!(!f.valid(&c));
        c.remove("vec");
        assert!(!f.valid(&c));
    }

    #[test]
    fn reachable_points_compile() {
        let f = Softmax::new();
        let mut points = within_two(&f, &f.seed());
        points.extend(best_path());
        points.extend(within_two(&f, best_path().last().expect("path")));
        points.sort();
        points.dedup();
        let failures = compile_all(&f, &points);
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
