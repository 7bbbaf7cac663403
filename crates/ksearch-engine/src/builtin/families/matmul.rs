//! `cpu/matmul`: C = A B for row-major float32 matrices.
//!
//! The template computes C in register tiles of `mr` rows × `nr` vectors of `vec` floats, k
//! innermost; at 1 × 1 scalar a tile is the seed's dot product per element. Around the tiles,
//! `loop_order` chooses whether rows or columns of tiles are the outer loop, `kc` and `nc` block
//! K and N for the caches, `pack_b` copies each K×N block of B into contiguous zero-padded panels
//! of the tile width, and `unroll` unrolls the k loop.
//!
//! The classic i-k-j interchange (rows of B streamed into rows of C held in memory) is left out
//! on purpose: measured on a Zen 4 core it is the best first step from the seed (about 25×) but a
//! dead end for single-knob hill climbing, topping out near a third of OpenBLAS, whereas the
//! register-tile path below reaches OpenBLAS speed in five steps.
//!
//! Remainders: rows are handled by a micro-kernel specialized for every row count up to `mr`;
//! columns that do not fill a tile go through a zero-padded copy of the B panel and a buffered
//! store.

use ksearch_core::task::{TaskSpec, Workload};
use ksearch_core::tree::{Impacts, Risk};

use super::{
    Cost, Family, Knob, Machine, Point, axis, c_vector_preamble, header, impact, in_space,
    point_of, spec_is, value, values,
};

/// The matmul template family.
#[derive(Debug)]
pub struct Matmul {
    knobs: Vec<Knob>,
}

impl Default for Matmul {
    fn default() -> Self {
        Self::new()
    }
}

impl Matmul {
    pub fn new() -> Matmul {
        let knobs = vec![
            Knob {
                name: "loop_order".into(),
                pattern: None,
                tactic: "loop interchange".into(),
                description: "Chooses the outer loop over tiles: rows of tiles outermost keeps the A rows of a tile in L1 while it sweeps B; columns outermost keeps a B panel in cache while it sweeps every row of A.".into(),
                difficulty: 1,
                values: values(&[
                    (0, "row tiles outermost (i, j, k)"),
                    (1, "column tiles outermost (j, i, k)"),
                ]),
                ordered: false,
            },
            Knob {
                name: "vec".into(),
                pattern: Some("vectorized-access".into()),
                tactic: "explicit vectorization".into(),
                description: "Tile columns are handled as GCC vectors of this many floats: one vector load of B and one broadcast of A feed a vector FMA.".into(),
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
                name: "nr".into(),
                pattern: Some("register-blocking".into()),
                tactic: "register blocking (columns)".into(),
                description: "Vectors per tile row: each loaded A element is reused across this many vectors of B, and the tile has this many independent accumulator chains per row.".into(),
                difficulty: 2,
                values: values(&[
                    (1, "1 vector wide"),
                    (2, "2 vectors wide"),
                    (3, "3 vectors wide"),
                    (4, "4 vectors wide"),
                ]),
                ordered: true,
            },
            Knob {
                name: "mr".into(),
                pattern: Some("register-blocking".into()),
                tactic: "register blocking (rows)".into(),
                description: "Rows of C per tile: each loaded vector of B is reused across this many rows of A, multiplying the accumulators held in registers.".into(),
                difficulty: 2,
                values: values(&[
                    (1, "1 row"),
                    (2, "2 rows"),
                    (3, "3 rows"),
                    (4, "4 rows"),
                    (6, "6 rows"),
                    (8, "8 rows"),
                ]),
                ordered: true,
            },
            Knob {
                name: "kc".into(),
                pattern: Some("cache-blocking".into()),
                tactic: "cache blocking (K)".into(),
                description: "Splits the k loop into blocks of this depth so the slice of B a tile sweeps stays in cache while C tiles are revisited once per block.".into(),
                difficulty: 2,
                values: values(&[
                    (0, "no K blocking"),
                    (64, "K blocks of 64"),
                    (128, "K blocks of 128"),
                    (256, "K blocks of 256"),
                    (512, "K blocks of 512"),
                ]),
                ordered: true,
            },
            Knob {
                name: "nc".into(),
                pattern: Some("cache-blocking".into()),
                tactic: "cache blocking (N)".into(),
                description: "Splits the columns into blocks of this width so the K×N block of B reused by every row of A fits in L2.".into(),
                difficulty: 2,
                values: values(&[
                    (0, "no N blocking"),
                    (256, "N blocks of 256"),
                    (512, "N blocks of 512"),
                    (1024, "N blocks of 1024"),
                    (2048, "N blocks of 2048"),
                ]),
                ordered: true,
            },
            Knob {
                name: "pack_b".into(),
                pattern: None,
                tactic: "packing B panels".into(),
                description: "Copies each K×N block of B into contiguous, zero-padded panels as wide as a tile, so the micro-kernel reads B sequentially without cache-set conflicts or TLB misses from the row stride.".into(),
                difficulty: 3,
                values: values(&[(0, "B read in place"), (1, "B packed into panels")]),
                ordered: false,
            },
            Knob {
                name: "unroll".into(),
                pattern: None,
                tactic: "loop unrolling".into(),
                description: "Unrolls the k loop of the micro-kernel by this factor to cut loop overhead and let loads run ahead.".into(),
                difficulty: 1,
                values: values(&[
                    (1, "no unrolling"),
                    (2, "unroll ×2"),
                    (4, "unroll ×4"),
                    (8, "unroll ×8"),
                ]),
                ordered: true,
            },
        ];
        Matmul { knobs }
    }
}

#[derive(Debug, Clone, Copy)]
struct P {
    cols_outer: bool,
    vec: i64,
    nr: i64,
    mr: i64,
    kc: i64,
    nc: i64,
    pack_b: bool,
    unroll: i64,
}

impl P {
    /// Tile width in floats.
    fn ncols(self) -> i64 {
        self.nr * self.vec
    }

    /// Effective N block: a multiple of the tile width, or 0 for none.
    fn nc_eff(self) -> i64 {
        if self.nc == 0 {
            0
        } else {
            (self.nc / self.ncols()).max(1) * self.ncols()
        }
    }
}

fn params(c: &Point) -> P {
    P {
        cols_outer: value(c, "loop_order") == 1,
        vec: value(c, "vec").max(1),
        nr: value(c, "nr").max(1),
        mr: value(c, "mr").max(1),
        kc: value(c, "kc").max(0),
        nc: value(c, "nc").max(0),
        pack_b: value(c, "pack_b") == 1,
        unroll: value(c, "unroll").max(1),
    }
}

impl Family for Matmul {
    fn name(&self) -> &str {
        "matmul"
    }

    fn matches(&self, spec: &TaskSpec) -> bool {
        spec_is(
            spec,
            "matmul",
            &["m", "n", "k"],
            &[("a", &["m", "k"]), ("b", &["k", "n"])],
            &[("c", &["m", "n"])],
        )
    }

    fn seed(&self) -> Point {
        point_of(&[
            ("loop_order", 0),
            ("vec", 1),
            ("nr", 1),
            ("mr", 1),
            ("kc", 0),
            ("nc", 0),
            ("pack_b", 0),
            ("unroll", 1),
        ])
    }

    fn knobs(&self) -> &[Knob] {
        &self.knobs
    }

    fn valid(&self, point: &Point) -> bool {
        in_space(&self.knobs, point)
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
        "matmul",
        point,
        &format!(
            "{} outermost, {}×{} tiles ({} × {} floats), {}{}{}{}.",
            if p.cols_outer {
                "column tiles"
            } else {
                "row tiles"
            },
            p.mr,
            p.ncols(),
            p.mr,
            if p.vec == 1 {
                format!("{} scalars", p.nr)
            } else {
                format!("{} vectors of {}", p.nr, p.vec)
            },
            if p.kc > 0 {
                format!("K blocks of {}", p.kc)
            } else {
                "no K blocking".to_owned()
            },
            if p.nc > 0 {
                format!(", N blocks of {}", p.nc_eff())
            } else {
                String::new()
            },
            if p.pack_b { ", packed B panels" } else { "" },
            if p.unroll > 1 {
                format!(", innermost loop unrolled ×{}", p.unroll)
            } else {
                String::new()
            },
        ),
    );
    s.push_str(&c_vector_preamble(p.vec));
    s.push_str(&format!("#define MR {}\n#define NR {}\n", p.mr, p.ncols()));
    for r in 1..=p.mr {
        s.push_str(&kernel(p, r));
    }
    s.push_str(&driver(p));
    s
}

fn unroll_pragma(p: P, indent: &str) -> String {
    if p.unroll > 1 {
        format!("{indent}#pragma GCC unroll {}\n", p.unroll)
    } else {
        String::new()
    }
}

/// Register-tile micro-kernel for `rows` rows: C[rows][NR] (+)= A[rows][kk] · B[kk][NR], where
/// only the first `nv` columns of C are real.
fn kernel(p: P, rows: i64) -> String {
    let nv = p.nr;
    let vw = p.vec;
    let accs: Vec<(i64, i64)> = (0..rows)
        .flat_map(|r| (0..nv).map(move |v| (r, v)))
        .collect();
    let acc = |r: i64, v: i64| format!("c{r}_{v}");
    let mut s = format!(
        "\n/* {rows}×NR register tile: C[{rows}][NR] (+)= A[{rows}][kk] B[kk][NR]; only the first nv columns of C are real. */\n\
         static inline void kern_{rows}(const float *restrict a, int64_t lda, const float *restrict b, int64_t ldb,\n\
         \x20                           float *restrict c, int64_t ldc, int64_t kk, int first, int64_t nv) {{\n"
    );
    s.push_str("    V ");
    s.push_str(
        &accs
            .iter()
            .map(|(r, v)| acc(*r, *v))
            .collect::<Vec<_>>()
            .join(", "),
    );
    s.push_str(";\n");
    // Load or zero the tile.
    s.push_str("    if (first) {\n");
    for (r, v) in &accs {
        s.push_str(&format!("        {} = vsplat(0.0f);\n", acc(*r, *v)));
    }
    s.push_str("    } else if (nv == NR) {\n");
    for (r, v) in &accs {
        s.push_str(&format!(
            "        {} = vld(c + {r} * ldc + {});\n",
            acc(*r, *v),
            v * vw
        ));
    }
    s.push_str(&format!(
        "    }} else {{\n\
         \x20       float t[{rows}][NR] = {{{{0}}}};\n\
         \x20       for (int r = 0; r < {rows}; r++)\n\
         \x20           for (int64_t j = 0; j < nv; j++) t[r][j] = c[r * ldc + j];\n"
    ));
    for (r, v) in &accs {
        s.push_str(&format!(
            "        {} = vld(&t[{r}][{}]);\n",
            acc(*r, *v),
            v * vw
        ));
    }
    s.push_str("    }\n");
    // The k loop.
    s.push_str(&unroll_pragma(p, "    "));
    s.push_str("    for (int64_t p = 0; p < kk; p++) {\n");
    s.push_str("        const float *bp = b + p * ldb;\n");
    for v in 0..nv {
        s.push_str(&format!("        const V b{v} = vld(bp + {});\n", v * vw));
    }
    for r in 0..rows {
        s.push_str(&format!("        const float a{r} = a[{r} * lda + p];\n"));
    }
    for (r, v) in &accs {
        let c = acc(*r, *v);
        s.push_str(&format!("        {c} += a{r} * b{v};\n"));
    }
    s.push_str("    }\n");
    // Store.
    s.push_str("    if (nv == NR) {\n");
    for (r, v) in &accs {
        s.push_str(&format!(
            "        vst(c + {r} * ldc + {}, {});\n",
            v * vw,
            acc(*r, *v)
        ));
    }
    s.push_str(&format!("    }} else {{\n        float t[{rows}][NR];\n"));
    for (r, v) in &accs {
        s.push_str(&format!(
            "        vst(&t[{r}][{}], {});\n",
            v * vw,
            acc(*r, *v)
        ));
    }
    s.push_str(&format!(
        "        for (int r = 0; r < {rows}; r++)\n\
         \x20           for (int64_t j = 0; j < nv; j++) c[r * ldc + j] = t[r][j];\n\
         \x20   }}\n}}\n"
    ));
    s
}

fn driver(p: P) -> String {
    let mut s = String::from(
        "\nvoid matmul(const float *restrict a, const float *restrict b, float *restrict c,\n\
         \x20           int64_t m, int64_t n, int64_t k) {\n\
         \x20   if (k <= 0) {\n\
         \x20       for (int64_t i = 0; i < m * n; i++) c[i] = 0.0f;\n\
         \x20       return;\n\
         \x20   }\n",
    );
    if p.kc > 0 {
        s.push_str(&format!(
            "    const int64_t KC = k < {kc} ? k : {kc};\n",
            kc = p.kc
        ));
    } else {
        s.push_str("    const int64_t KC = k;\n");
    }
    if p.nc > 0 {
        s.push_str(&format!(
            "    const int64_t NC = n < {nc} ? n : {nc};\n",
            nc = p.nc_eff()
        ));
    } else {
        s.push_str("    const int64_t NC = n;\n");
    }
    let edge = !p.pack_b && p.ncols() > 1;
    if p.pack_b {
        s.push_str(
            "    /* Packed B block: panels of NR columns, each KC rows deep, zero-padded. */\n\
             \x20   const size_t pbytes = (size_t)((NC + NR - 1) / NR) * NR * KC * sizeof(float);\n\
             \x20   float *bpk = aligned_alloc(64, (pbytes + 63) / 64 * 64);\n\
             \x20   if (!bpk) abort();\n",
        );
    }
    if edge {
        s.push_str(
            "    /* Zero-padded copy of the B columns that do not fill a whole tile. */\n\
             \x20   float *bedge = aligned_alloc(64, ((size_t)KC * NR * sizeof(float) + 63) / 64 * 64);\n\
             \x20   if (!bedge) abort();\n",
        );
    }
    s.push_str(
        "    for (int64_t jc = 0; jc < n; jc += NC) {\n\
         \x20       const int64_t nb = n - jc < NC ? n - jc : NC;\n\
         \x20       for (int64_t pc = 0; pc < k; pc += KC) {\n\
         \x20           const int64_t kb = k - pc < KC ? k - pc : KC;\n\
         \x20           const int first = pc == 0;\n\
         \x20           const float *bblk = b + pc * n + jc;\n",
    );
    if p.pack_b {
        s.push_str(
            "            for (int64_t jp = 0; jp < nb; jp += NR) {\n\
             \x20               float *panel = bpk + (jp / NR) * kb * NR;\n\
             \x20               const int64_t w = nb - jp < NR ? nb - jp : NR;\n\
             \x20               for (int64_t q = 0; q < kb; q++) {\n\
             \x20                   const float *src = bblk + q * n + jp;\n\
             \x20                   float *dst = panel + q * NR;\n\
             \x20                   int64_t j = 0;\n\
             \x20                   for (; j < w; j++) dst[j] = src[j];\n\
             \x20                   for (; j < NR; j++) dst[j] = 0.0f;\n\
             \x20               }\n\
             \x20           }\n",
        );
    }
    if edge {
        s.push_str(
            "            const int64_t nfull = nb / NR * NR;\n\
             \x20           if (nfull < nb)\n\
             \x20               for (int64_t q = 0; q < kb; q++)\n\
             \x20                   for (int64_t j = 0; j < NR; j++)\n\
             \x20                       bedge[q * NR + j] = nfull + j < nb ? bblk[q * n + nfull + j] : 0.0f;\n",
        );
    }
    let row_loop = "for (int64_t i = 0; i < m; i += MR) {\n\
                    const int64_t mv = m - i < MR ? m - i : MR;\n\
                    const float *ai = a + i * k + pc;\n\
                    float *ci = c + i * n + jc;\n";
    let col_loop = "for (int64_t j = 0; j < nb; j += NR) {\n\
                    const int64_t nv = nb - j < NR ? nb - j : NR;\n";
    let (outer, inner) = if p.cols_outer {
        (col_loop, row_loop)
    } else {
        (row_loop, col_loop)
    };
    // Re-indents a loop header (its first line at `n` spaces, the rest one level deeper) or a
    // block of statements (`header` = false: every line at `n`).
    let indent = |text: &str, n: usize, header: bool| -> String {
        text.lines()
            .enumerate()
            .map(|(i, l)| {
                let width = if header && i > 0 { n + 4 } else { n };
                format!("{}{}\n", " ".repeat(width), l.trim_start())
            })
            .collect()
    };
    s.push_str(&indent(outer, 12, true));
    s.push_str(&indent(inner, 16, true));
    let body = if p.pack_b {
        "const float *bj = bpk + (j / NR) * kb * NR;\nconst int64_t ldb = NR;\n"
    } else if edge {
        "const float *bj = nv == NR ? bblk + j : bedge;\nconst int64_t ldb = nv == NR ? n : NR;\n"
    } else {
        "const float *bj = bblk + j;\nconst int64_t ldb = n;\n"
    };
    s.push_str(&indent(body, 20, false));
    s.push_str("                    switch (mv) {\n");
    for r in 1..=p.mr {
        s.push_str(&format!(
            "                    case {r}: kern_{r}(ai, k, bj, ldb, ci + j, n, kb, first, nv); break;\n"
        ));
    }
    s.push_str("                    }\n                }\n");
    s.push_str("            }\n        }\n    }\n");
    if p.pack_b {
        s.push_str("    free(bpk);\n");
    }
    if edge {
        s.push_str("    free(bedge);\n");
    }
    s.push_str("}\n");
    s
}

/// Roofline-style estimate, calibrated loosely on a Zen 4 core.
///
/// Every k step of a tile costs the slowest of its FMAs, its FMA latency chain and its load
/// slots, plus fetching the tile's slice of a row of B. Packed, that slice streams from the
/// cache level holding what must stay cached between its reuses (the K×N block of B with row
/// tiles outermost, one panel with column tiles outermost). Unpacked, it is whole cache lines
/// down a column, which a row stride of 4 KiB or more makes conflict in the caches (about 10
/// cycles a line from the LLC) and, once the block spans more pages than the TLB reaches, page
/// walks (about 35 cycles a line). With column tiles outermost, A is re-read once per column
/// tile from the level its K block fits in.
fn cost(p: P, w: &Workload, machine: &Machine) -> Cost {
    let m = axis(w, "m");
    let n = axis(w, "n");
    let k = axis(w, "k");
    let macs = m * n * k;
    let hw_lanes = f64::from(machine.f32_lanes());
    let vec = p.vec as f64;
    let mr = p.mr as f64;
    let nr = p.nr as f64;
    let ncols = p.ncols() as f64;
    // Instructions per vector operation of `vec` floats.
    let per_op = (vec / hw_lanes).ceil().max(1.0);
    let kc = if p.kc > 0 { (p.kc as f64).min(k) } else { k };
    let ncb = if p.nc > 0 {
        (p.nc_eff() as f64).min(n)
    } else {
        n
    };
    let k_blocks = (k / kc).ceil();
    let line = 64.0;
    // Bytes of B beyond which a column walk misses the TLB (about 6 MiB of 4 KiB pages: a
    // modelling assumption).
    let tlb_bytes = 6.0 * 1024.0 * 1024.0;
    let conflict = n * 4.0 >= 4096.0;
    let regs = if machine.vector_bytes >= 64 {
        32.0
    } else {
        16.0
    };
    let accs = mr * nr * per_op;
    let spill = if accs + nr * per_op + 1.0 > regs {
        2.0
    } else {
        1.0
    };
    let fma = mr * nr / machine.vector_ops_per_cycle(p.vec as u32);
    // The FMA latency bounds a k step; with a short k loop, out-of-order execution overlaps
    // consecutive tiles.
    let step_ops = nr * per_op + mr + mr * nr * per_op + 2.0;
    let overlap = if k * step_ops < 2000.0 { 2.0 } else { 1.0 };
    let chain = if p.vec == 1 { 2.0 } else { 4.0 } / overlap;
    let loads = (nr * per_op + mr) / 2.0;
    let step_core = fma.max(chain).max(loads) * spill + 1.0 / p.unroll as f64;
    let tiles = (m / mr).ceil() * (n / ncols).ceil();
    let steps = tiles * k;
    let b_block = kc * ncb * 4.0;
    // What must stay cached for B to be reused by the next tile.
    let b_reuse = if p.cols_outer {
        kc * ncols * 4.0
    } else {
        b_block
    };
    let (step_b, b_bytes) = if p.pack_b {
        let bw = machine.bytes_per_cycle_for(b_reuse);
        (ncols * 4.0 / bw, (m / mr).ceil() * k * n * 4.0)
    } else {
        let lines = (ncols * 4.0 / line).ceil().max(1.0);
        let per_line = if b_reuse <= machine.l1_bytes as f64 && !conflict {
            0.5
        } else if b_reuse <= machine.l2_bytes as f64 && !conflict {
            3.0
        } else if b_reuse > tlb_bytes && conflict {
            // Neighbouring narrow tiles share lines and pages.
            10.0 + 25.0 * (ncols * 4.0 / line).min(1.0)
        } else {
            10.0
        };
        (lines.powf(0.7) * per_line, steps * lines * line)
    };
    let step_a = if p.cols_outer {
        mr * 4.0 / machine.bytes_per_cycle_for(m * kc * 4.0)
    } else {
        0.0
    };
    let step_mem = step_b + step_a;
    let step = step_core.max(step_mem) + 0.2 * step_core.min(step_mem);
    let pack = if p.pack_b {
        k * n * 8.0 / machine.llc_bytes_per_cycle
    } else {
        0.0
    };
    let tile_overhead = tiles * k_blocks * (20.0 + 2.0 * mr * nr);
    let core = steps * step + pack + tile_overhead;
    let a_bytes = m * k * 4.0 * (n / ncols).ceil();
    let c_cycles = m * n * 8.0 * k_blocks / machine.llc_bytes_per_cycle;
    Cost {
        cycles: core.max(c_cycles) + 200.0,
        bytes: b_bytes + a_bytes + m * n * 8.0 * k_blocks,
        flops: 2.0 * macs,
    }
}

fn impacts(from: P, knob: &str, v: i64) -> Impacts {
    use Risk::{High, Low, Medium};
    let mut out = Impacts::default();
    let accs = |mr: i64, nr: i64| mr * nr;
    match knob {
        "loop_order" => {
            let packed = from.pack_b;
            out.memory_bandwidth = impact(
                if packed { 3.0 } else { 1.0 },
                Medium,
                if v == 1 {
                    "a B panel stays in cache across all row tiles; A is re-read per column tile"
                } else {
                    "the A rows of a tile stay in L1 across the sweep of B"
                },
            );
            out.compute_fit = impact(1.0, Low, "same micro-kernel");
        }
        "vec" => {
            out.compute_fit = impact(
                if v > from.vec { 8.0 } else { 1.0 },
                Low,
                format!("{v} floats per FMA"),
            );
            out.register_pressure = impact(
                (from.mr * from.nr) as f64 / 4.0,
                Low,
                "same accumulator count, wider registers",
            );
            out.memory_bandwidth = impact(3.0, Low, "whole cache lines of B used per load");
        }
        "nr" | "mr" => {
            let (mr, nr) = if knob == "mr" {
                (v, from.nr)
            } else {
                (from.mr, v)
            };
            let n = accs(mr, nr);
            let grow = n > accs(from.mr, from.nr);
            out.register_pressure = impact(
                n as f64 / 3.0,
                if n + nr > 30 {
                    High
                } else if n > 16 {
                    Medium
                } else {
                    Low
                },
                format!("{n} accumulators"),
            );
            out.compute_fit = impact(
                if grow { 7.0 } else { 2.0 },
                Low,
                "more independent FMA chains hide the FMA latency",
            );
            out.memory_bandwidth = impact(
                if grow { 5.0 } else { 1.0 },
                Low,
                if knob == "mr" {
                    "each B vector is reused across more rows"
                } else {
                    "each A element is reused across more columns"
                },
            );
        }
        "kc" | "nc" => {
            out.memory_bandwidth = impact(
                if v > 0 { 6.0 } else { 1.0 },
                Medium,
                format!("the B block reused across rows stays in cache ({knob}={v})"),
            );
            out.compute_fit = impact(1.0, Low, "C tiles are revisited once per K block");
        }
        "pack_b" => {
            out.memory_bandwidth = impact(
                if v == 1 { 7.0 } else { 0.0 },
                Medium,
                "contiguous panels: no cache-set conflicts or TLB misses from the row stride",
            );
            out.compute_fit = impact(2.0, Low, "one copy of B per block");
        }
        "unroll" => {
            out.compute_fit = impact(
                if v > from.unroll { 3.0 } else { 1.0 },
                Low,
                "less loop overhead per FMA",
            );
            out.register_pressure = impact(2.0, Low, "more loads in flight");
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::Family;
    use super::super::test_support::{
        assert_impacts_rated, assert_renders_and_costs, compile_all, model_total, sample,
        within_two,
    };
    use super::*;

    fn spec() -> TaskSpec {
        ksearch_core::task::parse_task(
            include_str!("../../../../../tasks/cpu/matmul/task.toml"),
            "matmul/task.toml",
        )
        .expect("task parses")
    }

    /// The greedy path measured with `ksearch eval` (each step faster than its parent).
    pub(crate) fn best_path() -> Vec<Point> {
        let f = Matmul::new();
        let mut path = vec![f.seed()];
        for (k, v) in [("vec", 16), ("mr", 8), ("nc", 512), ("nr", 3)] {
            let mut c = path.last().expect("path").clone();
            c.insert(k.to_owned(), v);
            path.push(c);
        }
        path
    }

    #[test]
    fn matches_the_builtin_task() {
        assert!(Matmul::new().matches(&spec()));
        let mut other = spec();
        other.inputs.swap(0, 1);
        assert!(!Matmul::new().matches(&other));
    }

    #[test]
    fn seed_and_neighbours_render_and_cost() {
        assert_renders_and_costs(
            &Matmul::new(),
            &spec(),
            best_path(),
            "void matmul(const float *restrict a",
            8,
        );
    }

    #[test]
    fn seed_renders_a_dot_product() {
        let src = Matmul::new().render(&Matmul::new().seed()).unwrap();
        assert!(src.contains("typedef float V;"));
        assert!(src.contains("c0_0 += a0 * b0;"));
        assert!(!src.contains("#pragma GCC unroll"));
    }

    #[test]
    fn cost_ranks_the_path() {
        let f = Matmul::new();
        let s = spec();
        let total = |c: &Point| model_total(&f, &s, c);
        let path = best_path();
        for pair in path.windows(2).take(3) {
            assert!(total(&pair[1]) < total(&pair[0]), "{:?}", pair[1]);
        }
        assert!(total(path.last().expect("path")) < total(&path[0]) - 3.0 * 2.0);
    }

    #[test]
    fn impacts_are_rated() {
        assert_impacts_rated(&Matmul::new());
    }

    #[test]
    fn invalid_points_are_rejected() {
        let f = Matmul::new();
        let mut c = f.seed();
        c.insert("loop_order".into(), 1);
        assert!(f.valid(&c));
        c.insert("mr".into(), 5);
        assert!(!f.valid(&c));
        c.insert("mr".into(), 6);
        c.remove("unroll");
        assert!(!f.valid(&c));
    }

    #[test]
    fn reachable_points_compile() {
        let f = Matmul::new();
        // A sample of everything within two knob changes of the seed (about 300 points; all of
        // them were compiled and checked with `ksearch eval` when the space was built), the
        // path, and a sample of the neighbourhood of the path's end.
        let near = within_two(&f, &f.seed());
        assert!(near.len() > 200, "{}", near.len());
        let mut points = sample(&near, 100);
        points.extend(best_path());
        let end = within_two(&f, best_path().last().expect("path"));
        points.extend(sample(&end, 20));
        points.sort();
        points.dedup();
        let failures = compile_all(&f, &points);
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
