//! `ksearch import`'s conversions on real files of the suites (tests/fixtures/README.md names
//! their sources): the tasks they make parse, say what the suite says, and what cannot be
//! expressed is refused naming the file and field.

use ksearch_core::dtype::Dtype;
use ksearch_core::task::{Init, KernelClass, Suite, parse_task};
use ksearch_tasks::import::{ImportError, TaskFiles, flashinfer, kernelbench};

fn fixture(path: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/{path}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn file<'a>(t: &'a TaskFiles, name: &str) -> &'a str {
    &t.files
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no {name}"))
        .1
}

fn fib(name: &str) -> Result<TaskFiles, ImportError> {
    flashinfer::import(
        &fixture(&format!("flashinfer/{name}.json")),
        &format!("{name}.json"),
        None,
    )
}

#[test]
fn a_gemm_definition_with_its_traces_becomes_a_task_with_a_cublas_baseline() {
    let traces = fixture("flashinfer/gemm_n_4096_k_4096.traces.jsonl");
    let t = flashinfer::import(
        &fixture("flashinfer/gemm_n_4096_k_4096.json"),
        "gemm.json",
        Some((&traces, "traces.jsonl")),
    )
    .unwrap();
    let spec = parse_task(file(&t, "task.toml"), "task.toml").unwrap();
    assert_eq!(spec, t.spec);
    assert_eq!(spec.name, "gemm_n_4096_k_4096");
    assert_eq!(spec.class, KernelClass::Matmul);
    assert_eq!(spec.axes, ["M", "N", "K"]);
    assert_eq!(spec.derived["N"], "4096");
    // Seven lines, four distinct M, smallest first; consts filled in.
    let ms: Vec<i64> = spec.workloads.iter().map(|w| w.axes["M"]).collect();
    assert_eq!(ms, [232, 240, 248, 256]);
    assert_eq!(spec.workloads[0].name, "M232");
    assert!(spec.workloads.iter().all(|w| w.axes["K"] == 4096));
    assert_eq!(spec.inputs[0].dtype, Dtype::F16);
    assert_eq!(spec.inputs[0].init, Some(Init::Normal([0.0, 1.0])));
    assert_eq!(spec.tolerance[&Dtype::F16].rtol, 1e-2);
    assert_eq!(
        spec.baseline.as_ref().unwrap().name,
        "cuBLAS (torch.matmul)"
    );
    assert!(file(&t, "baseline.py").contains("torch.matmul(A, B.T).to(torch.float16)"));
    assert!(file(&t, "reference.py").contains("def run(A, B):"));
    assert!(
        !file(&t, "reference.py").contains("make_inputs"),
        "no structured input"
    );
    let origin = spec.origin.unwrap();
    assert_eq!(
        (origin.suite, origin.name.as_str()),
        (Suite::FlashinferBench, "gemm_n_4096_k_4096")
    );
    assert_eq!(
        file(&t, "definition.json"),
        fixture("flashinfer/gemm_n_4096_k_4096.json")
    );
}

#[test]
fn paged_decode_gets_offsets_indices_and_derived_axes() {
    let t = fib("gqa_paged_decode_h32_kv8_d128_ps1").unwrap();
    let spec = &t.spec;
    assert_eq!(spec.derived["len_indptr"], "batch_size + 1");
    assert_eq!(spec.class, KernelClass::Attention);
    let names: Vec<&str> = spec.inputs.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "q",
            "k_cache",
            "v_cache",
            "kv_indptr",
            "last_page_len",
            "kv_indices",
            "sm_scale"
        ]
    );
    assert_eq!(spec.inputs[0].dtype, Dtype::Bf16);
    assert!(spec.inputs[6].shape.is_empty(), "sm_scale is 0-d");
    let reference = file(&t, "reference.py");
    assert!(reference.contains("def make_inputs(seed, device, **axes):"));
    assert!(reference.contains(r#""name": "kv_indptr", "shape": ["len_indptr"], "dtype": "i32", "kind": "offsets", "total": "num_kv_indices""#), "{reference}");
    assert!(reference.contains(r#""kind": "indices", "bound": "num_pages""#));
    assert!(reference.contains(r#""kind": "page_len", "bound": "page_size""#));
    // Generated workloads: every free var axis at both sizes, but `batch_size` (len_indptr is
    // derived from it) counts sequences, which the reference loops over: at most 32.
    assert_eq!(spec.workloads.len(), 2);
    assert_eq!(spec.workloads[0].axes["len_indptr"], 33);
    assert_eq!(spec.workloads[1].axes["len_indptr"], 33);
    assert!(
        t.notes
            .iter()
            .any(|n| n.contains("generated two") && n.contains("at most 32 for `batch_size`")),
        "{:?}",
        t.notes
    );
}

#[test]
fn a_generated_ragged_workload_grows_its_sequences_not_their_number() {
    // A ragged prefill's reference loops over its sequences in Python: at 1024 of them an H100
    // took most of a second a call, and its seed's evaluation ran past 200 s.
    let t = fib("mla_ragged_prefill_h16_qk192_vo128").unwrap();
    let axes: Vec<(i64, i64)> = t
        .spec
        .workloads
        .iter()
        .map(|w| (w.axes["len_indptr"], w.axes["total_tokens"]))
        .collect();
    assert_eq!(axes, [(32, 512), (32, 16384)]);
    assert!(
        t.notes
            .iter()
            .any(|n| n.contains("at most 32 for `len_indptr`")),
        "{:?}",
        t.notes
    );
}

#[test]
fn every_public_definition_imports() {
    for name in [
        "gqa_paged_prefill_h32_kv8_d128_ps1",
        "mla_ragged_prefill_h16_qk192_vo128",
    ] {
        let t = fib(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        parse_task(file(&t, "task.toml"), "task.toml").unwrap();
        assert!(file(&t, "reference.py").contains("make_inputs"), "{name}");
    }
}

/// The gemm definition with one field changed.
fn gemm_with(from: &str, to: &str) -> Result<TaskFiles, ImportError> {
    let text = fixture("flashinfer/gemm_n_4096_k_4096.json");
    assert!(text.contains(from), "{from}");
    flashinfer::import(&text.replacen(from, to, 1), "gemm.json", None)
}

#[test]
fn what_cannot_be_expressed_is_refused_naming_the_field() {
    let cases = [
        (
            r#""dtype": "float16" },"#,
            r#""dtype": "float4_e2m1" },"#,
            "inputs.A.dtype",
            "float4_e2m1",
        ),
        (
            r#""M": { "type": "var" }"#,
            r#""M": { "type": "expr" }"#,
            "axes.M.type",
            "`expr`",
        ),
        (
            r#""shape": ["M", "K"]"#,
            r#""shape": ["M", "Q"]"#,
            "inputs.A.shape[1]",
            "`Q`",
        ),
        (
            r#""type": "gemm","#,
            r#""type": "gemm", "constraints": ["M ** 2 == K"],"#,
            "constraints[0]",
            "cannot be expressed",
        ),
        (
            r#""type": "gemm","#,
            r#""type": "gemm", "constraints": ["K == 1024"],"#,
            "constraints[0]",
            "does not hold",
        ),
        (
            r#""A": { "shape": ["M", "K"], "dtype": "float16" },"#,
            r#""A": { "shape": ["M", "K"], "dtype": "float16" }, "token_ids": { "shape": ["M"], "dtype": "int32" },"#,
            "inputs.token_ids",
            "index",
        ),
    ];
    for (from, to, field, part) in cases {
        let e = gemm_with(from, to).expect_err(to);
        assert_eq!(e.file, "gemm.json");
        assert_eq!(e.field, field, "{e}");
        assert!(e.message.contains(part), "{e}");
    }
}

#[test]
fn a_scalar_takes_the_workloads_value_and_keeps_it() {
    let def = r#"{"name": "rmsnorm_h4096", "op_type": "rmsnorm",
        "axes": {"batch_size": {"type": "var"}, "hidden_size": {"type": "const", "value": 4096}},
        "inputs": {"hidden_states": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16"},
                   "weight": {"shape": ["hidden_size"], "dtype": "bfloat16"},
                   "eps": {"shape": null, "dtype": "float32"}},
        "outputs": {"output": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16"}},
        "reference": "import torch\n\ndef run(hidden_states, weight, eps):\n    return hidden_states\n"}"#;
    let line = |b: i64, eps: f64| {
        format!(
            r#"{{"definition": "rmsnorm_h4096", "workload": {{"axes": {{"batch_size": {b}}}, "inputs": {{"hidden_states": {{"type": "random"}}, "weight": {{"type": "random"}}, "eps": {{"type": "scalar", "value": {eps}}}}}}}}}"#
        )
    };
    let good = format!("{}\n{}\n", line(1, 1e-6), line(64, 1e-6));
    let t = flashinfer::import(def, "rms.json", Some((&good, "w.jsonl"))).unwrap();
    assert_eq!(t.spec.inputs[2].init, Some(Init::Uniform([1e-6, 1e-6])));
    assert_eq!(t.spec.class, KernelClass::Normalization);
    // Another value of a float32 scalar leaves its line out, with a note; the same float32
    // written with more digits does not.
    let other = format!(
        "{}\n{}\n{}\n",
        line(1, 1e-6),
        line(64, 1e-5),
        line(8, 0.0883883461356163).replace("0.0883883461356163", "0.000000999999997475242707")
    );
    let t = flashinfer::import(def, "rms.json", Some((&other, "w.jsonl"))).unwrap();
    let sizes: Vec<i64> = t
        .spec
        .workloads
        .iter()
        .map(|w| w.axes["batch_size"])
        .collect();
    assert_eq!(sizes, [1, 8]);
    assert!(
        t.notes
            .iter()
            .any(|n| n.contains("line 2 (`eps` = 0.00001, not line 1's 0.000001)")),
        "{:?}",
        t.notes
    );
    let missing = line(1, 1e-6).replace(r#""batch_size": 1"#, r#""other": 1"#);
    let e = flashinfer::import(def, "rms.json", Some((&missing, "w.jsonl"))).unwrap_err();
    assert!(e.message.contains("`other` is not a var axis"), "{e}");
}

#[test]
fn a_solution_wraps_the_candidate_with_the_definitions_inputs() {
    let t = fib("gemm_n_4096_k_4096").unwrap();
    let candidate = "import torch, triton\n\ndef run(A, B, *, M):\n    return A @ B.T\n";
    let s = flashinfer::solution(&t.spec, candidate, "ks", "ksearch").unwrap();
    let j: serde_json::Value = serde_json::from_str(&s).unwrap();
    assert_eq!(j["definition"], "gemm_n_4096_k_4096");
    assert_eq!(j["spec"]["language"], "triton");
    assert_eq!(j["spec"]["entry_point"], "main.py::run");
    let main = j["sources"][0]["content"].as_str().unwrap();
    assert!(main.starts_with(candidate));
    assert!(main.contains("def run(A, B):"), "{main}");
    assert!(main.contains(r#""M": A.shape[0]"#), "{main}");
    let mut other = t.spec.clone();
    other.origin = None;
    assert!(flashinfer::solution(&other, candidate, "ks", "ksearch").is_none());
}

fn kb(name: &str) -> TaskFiles {
    kernelbench::import(
        &fixture(&format!("kernelbench/{name}.py")),
        &format!("KernelBench/level1/{name}.py"),
        &fixture(&format!("kernelbench/{name}.probe.json")),
    )
    .unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn a_kernelbench_problem_becomes_a_model_new_task_with_eager_and_compile() {
    let t = kb("1_Conv2D_ReLU_BiasAdd");
    let spec = parse_task(file(&t, "task.toml"), "task.toml").unwrap();
    assert_eq!(spec.name, "kernelbench_1_conv2d_relu_biasadd");
    assert_eq!(spec.class, KernelClass::Convolution);
    assert_eq!(spec.inputs[0].name, "x");
    assert_eq!(spec.inputs[0].shape[0], "batch_size");
    assert_eq!(spec.outputs[0].name, "out");
    let b: Vec<i64> = spec
        .workloads
        .iter()
        .map(|w| w.axes["batch_size"])
        .collect();
    assert_eq!(b, [128, 32]);
    assert_eq!(spec.baseline.as_ref().unwrap().name, "PyTorch eager");
    assert_eq!(spec.comparisons[0].name, "torch.compile");
    assert!(file(&t, "compiled.py").contains("_torch.compile(Model(*args))"));
    assert!(file(&t, "seed.py").ends_with("ModelNew = Model\n"));
    assert!(
        file(&t, "reference.py").contains(r#"_KSEARCH_GLOBALS = ["batch_size""#),
        "{}",
        file(&t, "reference.py")
    );
    assert_eq!(spec.tolerance[&Dtype::F32].atol, 1e-2);
    assert_eq!(spec.origin.unwrap().suite, Suite::Kernelbench);
}

#[test]
fn a_problem_without_batch_size_gets_its_workload_twice() {
    let t = kb("1_Square_matrix_multiplication_");
    assert_eq!(t.spec.workloads.len(), 2);
    assert_eq!(t.spec.workloads[1].name, "kernelbench-again");
    assert_eq!(
        t.spec
            .inputs
            .iter()
            .map(|i| i.name.as_str())
            .collect::<Vec<_>>(),
        ["A", "B"]
    );
    assert_eq!(t.spec.axes, ["N"]);
    assert!(t.notes.iter().any(|n| n.contains("one workload only")));
    let s = kb("23_Softmax");
    assert_eq!(s.spec.axes, ["batch_size", "dim"]);
}

#[test]
fn a_probe_that_failed_is_an_error_naming_the_field() {
    let e = kernelbench::import(
        "x = 1\n",
        "p.py",
        r#"{"error": "defines no `Model`", "field": "Model"}"#,
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "p.py: Model: defines no `Model`");
    let e = kernelbench::import("", "p.py", "not json").unwrap_err();
    assert!(e.message.contains("not JSON"), "{e}");
}

/// A definition written for these tests: a top-k over rows, with a const axis named like one
/// of its inputs (`k`), a literal size, a size that is an expression, and constraints of every
/// kind a definition states.
const TOPK: &str = r#"{"name": "topk_rows", "op_type": "topk",
    "axes": {"rows": {"type": "var"}, "width": {"type": "var"}, "k": {"type": "const", "value": 8},
             "group": {"type": "const", "value": 4}, "heads": {"type": "const", "value": 8}},
    "constraints": ["k <= width", "heads % group == 0", "heads >= group",
                    "values.shape[0] == rows", "values.shape[-1] == k", "width % 4 == 0"],
    "inputs": {"x": {"shape": ["rows", "width"], "dtype": "float32"},
               "bias": {"shape": [1, "width / 4"], "dtype": "float32"},
               "k": {"shape": null, "dtype": "int64"},
               "scale": {"shape": null, "dtype": "float32"}},
    "outputs": {"values": {"shape": ["rows", "k"], "dtype": "float32"}},
    "reference": "import torch\n\ndef run(x, bias, k, scale):\n    return torch.topk(x * scale, int(k), dim=-1).values\n"}"#;

#[test]
fn relations_between_axes_and_shapes_are_checks_every_workload_passes() {
    let t = flashinfer::import(TOPK, "topk.json", None).unwrap();
    let s = &t.spec;
    // The axis named like the input `k` is renamed; the literal and the expression are axes.
    assert!(s.axes.contains(&"k_axis".to_owned()), "{:?}", s.axes);
    assert_eq!(s.derived["k_axis"], "8");
    assert_eq!(s.inputs[1].shape, ["bias_0", "bias_1"]);
    assert_eq!(s.derived["bias_0"], "1");
    assert_eq!(s.derived["bias_1"], "width / 4");
    // The scalar `k` takes the value of its axis; `scale` is 1; both are said.
    assert_eq!(s.inputs[2].init, Some(Init::Randint([8, 8])));
    assert_eq!(s.inputs[3].init, Some(Init::Uniform([1.0, 1.0])));
    assert!(
        t.notes.iter().any(|n| n.contains("`k` = 8, `scale` = 1")),
        "{:?}",
        t.notes
    );
    // `k <= width`: every var axis at 32 and at 1024 satisfies it (and `width % 4 == 0`).
    let widths: Vec<i64> = s.workloads.iter().map(|w| w.axes["width"]).collect();
    assert_eq!(widths, [32, 1024]);
    // A relation a generated workload breaks moves it to the nearest value that keeps it.
    let wide = TOPK.replace(
        r#""k": {"type": "const", "value": 8}"#,
        r#""k": {"type": "const", "value": 100}"#,
    );
    assert_ne!(wide, TOPK);
    let t = flashinfer::import(&wide, "topk.json", None).unwrap();
    let widths: Vec<i64> = t.spec.workloads.iter().map(|w| w.axes["width"]).collect();
    assert_eq!(widths, [128, 1024]);
    // A given workload that breaks a relation is left out, with a note naming its line; a file
    // of nothing else is refused, saying why.
    let line = |rows: i64, width: i64| {
        format!(
            r#"{{"definition": "topk_rows", "workload": {{"axes": {{"rows": {rows}, "width": {width}}}}}}}"#
        )
    };
    let lines = format!("{}\n{}\n", line(4, 64), line(4, 6));
    let t = flashinfer::import(TOPK, "topk.json", Some((&lines, "w.jsonl"))).unwrap();
    assert_eq!(t.spec.workloads[0].axes["width"], 64);
    assert!(
        t.notes
            .iter()
            .any(|n| n.contains("line 2 (`k <= width` does not hold)")),
        "{:?}",
        t.notes
    );
    let e = flashinfer::import(TOPK, "topk.json", Some((&line(4, 6), "w.jsonl"))).unwrap_err();
    assert_eq!(e.file, "w.jsonl");
    assert!(e.message.contains("`k <= width` does not hold"), "{e}");
    // A size of 0 leaves its line out, with a note.
    let lines = format!("{}\n{}\n{}\n", line(4, 64), line(0, 64), line(16, 64));
    let t = flashinfer::import(TOPK, "topk.json", Some((&lines, "w.jsonl"))).unwrap();
    assert_eq!(t.spec.workloads.len(), 2);
    assert!(
        t.notes
            .iter()
            .any(|n| n.contains("line 2 (axis `rows` would be 0")),
        "{:?}",
        t.notes
    );
    // Between consts, a relation holds or the definition is refused.
    let e = flashinfer::import(
        &TOPK.replace("heads >= group", "heads < group"),
        "topk.json",
        None,
    )
    .unwrap_err();
    assert_eq!(e.field, "constraints[2]");
    assert!(
        e.message.contains("does not hold for the const axes"),
        "{e}"
    );
}

#[test]
fn generated_workloads_fit_and_spread_offsets_over_their_ranges() {
    // Every var axis at 1024 would make `x` 2^40 elements: the large workload is scaled down.
    let big = TOPK.replace(
        r#""x": {"shape": ["rows", "width"]"#,
        r#""x": {"shape": ["rows", "width", "width", "width"]"#,
    );
    let t = flashinfer::import(&big, "topk.json", None).unwrap();
    let widths: Vec<i64> = t.spec.workloads.iter().map(|w| w.axes["width"]).collect();
    assert_eq!(widths, [32, 128]);
    // Offsets: their total is 16 times the generated size, so at least 16 elements a range
    // (not one); the large workload has longer ranges, not more of them.
    let t = fib("gqa_paged_decode_h32_kv8_d128_ps1").unwrap();
    let sizes: Vec<(i64, i64)> = t
        .spec
        .workloads
        .iter()
        .map(|w| (w.axes["batch_size"], w.axes["num_kv_indices"]))
        .collect();
    assert_eq!(sizes, [(32, 512), (32, 16384)]);
}

#[test]
fn sampling_and_lists_of_definitions_are_refused_saying_why() {
    let sampling = TOPK.replace(
        "return torch.topk(x * scale, int(k), dim=-1).values",
        "return torch.multinomial(torch.softmax(x, -1), int(k)).float()",
    );
    let e = flashinfer::import(&sampling, "s.json", None).unwrap_err();
    assert_eq!(e.field, "reference");
    assert!(e.message.contains("`torch.multinomial`"), "{e}");
    let e = flashinfer::import(&format!("[{TOPK}, {TOPK}]"), "two.json", None).unwrap_err();
    assert!(e.message.contains("a list of 2 definitions"), "{e}");
}

#[test]
fn a_block_table_indexes_pages_and_lengths_stay_within_them() {
    let def = r#"{"name": "paged_lookup", "op_type": "dsa_paged",
        "axes": {"batch_size": {"type": "var"}, "max_num_pages": {"type": "var"},
                 "num_pages": {"type": "var"}, "page_size": {"type": "const", "value": 64}},
        "inputs": {"cache": {"shape": ["num_pages", "page_size"], "dtype": "float32"},
                   "seq_lens": {"shape": ["batch_size"], "dtype": "int32"},
                   "block_table": {"shape": ["batch_size", "max_num_pages"], "dtype": "int32"}},
        "outputs": {"out": {"shape": ["batch_size"], "dtype": "float32"}},
        "reference": "import torch\n\ndef run(cache, seq_lens, block_table):\n    return cache[block_table[:, 0], 0] * seq_lens\n"}"#;
    let t = flashinfer::import(def, "paged.json", None).unwrap();
    let reference = file(&t, "reference.py");
    assert!(
        reference.contains(r#""name": "seq_lens", "shape": ["batch_size"], "dtype": "i32", "kind": "up_to", "most": ["max_num_pages", "page_size"], "least": None"#),
        "{reference}"
    );
    assert!(
        reference.contains(r#""name": "block_table", "shape": ["batch_size", "max_num_pages"], "dtype": "i32", "kind": "indices", "bound": "num_pages""#),
        "{reference}"
    );
    // Lengths with nothing to bound them are refused, not drawn at random.
    let e = flashinfer::import(
        &def.replace("max_num_pages", "pages_per_seq"),
        "paged.json",
        None,
    )
    .unwrap_err();
    assert_eq!(e.field, "inputs.seq_lens", "{e}");
}
