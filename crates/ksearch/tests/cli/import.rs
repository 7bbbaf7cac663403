//! `ksearch import` as a user runs it: a KernelBench problem (run by the probe on PyTorch's
//! meta device) becomes a task whose `ModelNew` answers are evaluated on PyTorch's CPU build,
//! against PyTorch eager and torch.compile; a definition ksearch cannot express writes nothing.

use super::{ksearch, run};

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
#[cfg_attr(
    not(has_torch),
    ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
)]
fn a_kernelbench_problem_imports_and_its_model_new_passes_against_eager_and_compile() {
    let dir = tempfile::tempdir().unwrap();
    let task = dir.path().join("linear_relu");
    let task_s = task.to_str().unwrap();
    let (code, out, err) = run(&mut ksearch(&[
        "import",
        "kernelbench",
        &fixture("kernelbench_small/7_Linear_ReLU.py"),
        "-o",
        task_s,
    ]));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("2 workloads"), "{out}");
    let answer = fixture("kernelbench_small/ModelNew.py");
    let (code, out, err) = run(&mut ksearch(&[
        "eval",
        task_s,
        &answer,
        "--target",
        "cpu",
        "--workload",
        "small",
        "--json",
        "--min-runs",
        "3",
        "--min-time-ms",
        "5",
    ]));
    assert_eq!(code, 0, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["status"], "passed", "{out}");
    assert_eq!(v["baseline"], "PyTorch eager", "{out}");
    let compared: Vec<&str> = v["comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["label"].as_str())
        .collect();
    assert!(compared.contains(&"torch.compile"), "{out}");
    // A ModelNew with other weights (its parameters made in another order) is wrong.
    let swapped = dir.path().join("swapped.py");
    std::fs::write(
        &swapped,
        std::fs::read_to_string(&answer).unwrap().replace(
            "        self.linear = nn.Linear(in_features, out_features)",
            "        self.pad = nn.Parameter(torch.randn(3))\n        self.linear = nn.Linear(in_features, out_features)",
        ),
    )
    .unwrap();
    let (_, out, err) = run(&mut ksearch(&[
        "eval",
        task_s,
        swapped.to_str().unwrap(),
        "--target",
        "cpu",
        "--workload",
        "small",
        "--json",
    ]));
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    assert_eq!(v["status"], "incorrect", "{out}");
}

#[test]
fn a_definition_that_cannot_be_expressed_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let def = dir.path().join("def.json");
    std::fs::write(
        &def,
        r#"{"name": "fp4_gemm", "op_type": "gemm", "axes": {"M": {"type": "var"}},
            "inputs": {"A": {"shape": ["M"], "dtype": "float4_e2m1"}},
            "outputs": {"C": {"shape": ["M"], "dtype": "float32"}},
            "reference": "def run(A):\n    return A\n"}"#,
    )
    .unwrap();
    let out_dir = dir.path().join("task");
    let (code, _, err) = run(&mut ksearch(&[
        "import",
        "flashinfer-bench",
        def.to_str().unwrap(),
        "-o",
        out_dir.to_str().unwrap(),
    ]));
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("def.json: inputs.A.dtype: `float4_e2m1` has no ksearch dtype"),
        "{err}"
    );
    assert!(err.contains("nothing was written"), "{err}");
    assert!(!out_dir.exists());
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no temporary directory left"
    );
}

#[test]
#[cfg_attr(
    not(has_torch),
    ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
)]
fn numbers_among_a_kernelbench_problems_inputs_reach_every_model_as_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let task = dir.path().join("scale_shift");
    let task_s = task.to_str().unwrap();
    let (code, out, err) = run(&mut ksearch(&[
        "import",
        "kernelbench",
        &fixture("kernelbench_small/9_Scale_Shift.py"),
        "-o",
        task_s,
    ]));
    assert_eq!(code, 0, "{out}{err}");
    let toml = std::fs::read_to_string(task.join("task.toml")).unwrap();
    // One input tensor; the numbers are constants the model (and the prompt) is told about.
    assert_eq!(toml.matches("[[inputs]]").count(), 1, "{toml}");
    assert!(
        toml.contains(
            "`scale` = 2.5 (argument 2), `shift` = -0.25 (argument 3), `clamp` = True (argument 4)"
        ),
        "{toml}"
    );
    let answer = fixture("kernelbench_small/ModelNewScaleShift.py");
    let eval = |candidate: &str| {
        let (_, out, err) = run(&mut ksearch(&[
            "eval",
            task_s,
            candidate,
            "--target",
            "cpu",
            "--workload",
            "small",
            "--no-timing",
            "--json",
        ]));
        let v: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
        (
            v["status"].as_str().unwrap_or("").to_owned(),
            v["message"].to_string(),
        )
    };
    let (status, message) = eval(&answer);
    assert_eq!(status, "passed", "{message}");
    // An answer that ignores the shift it was given is wrong.
    let ignores = dir.path().join("ignores.py");
    std::fs::write(
        &ignores,
        std::fs::read_to_string(&answer)
            .unwrap()
            .replace("torch.full_like(x, shift)", "torch.zeros_like(x)"),
    )
    .unwrap();
    let (status, message) = eval(ignores.to_str().unwrap());
    assert_eq!(status, "incorrect", "{message}");
}

/// A causal ragged attention written for this test: a query row sees the keys up to its own
/// position counted from the end of its sequence's keys, so a sequence with more queries than
/// keys has rows that see nothing (NaN).
const CAUSAL_RAGGED: &str = r#"{"name": "causal_ragged_h2_d16", "op_type": "gqa_ragged",
    "axes": {"len_indptr": {"type": "var"}, "total_q": {"type": "var"}, "total_kv": {"type": "var"},
             "heads": {"type": "const", "value": 2}, "dim": {"type": "const", "value": 16}},
    "constraints": ["total_q == qo_indptr[-1].item()", "total_kv == kv_indptr[-1].item()"],
    "inputs": {"q": {"shape": ["total_q", "heads", "dim"], "dtype": "float32"},
               "k": {"shape": ["total_kv", "heads", "dim"], "dtype": "float32"},
               "v": {"shape": ["total_kv", "heads", "dim"], "dtype": "float32"},
               "qo_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
               "kv_indptr": {"shape": ["len_indptr"], "dtype": "int32"}},
    "outputs": {"out": {"shape": ["total_q", "heads", "dim"], "dtype": "float32"}},
    "reference": "import torch\n\ndef run(q, k, v, qo_indptr, kv_indptr):\n    out = torch.empty_like(q)\n    for b in range(qo_indptr.shape[0] - 1):\n        q0, q1 = int(qo_indptr[b]), int(qo_indptr[b + 1])\n        k0, k1 = int(kv_indptr[b]), int(kv_indptr[b + 1])\n        s = torch.einsum('qhd,khd->hqk', q[q0:q1], k[k0:k1])\n        qi = torch.arange(q1 - q0).unsqueeze(1) + (k1 - k0) - (q1 - q0)\n        s = s.masked_fill(torch.arange(k1 - k0).unsqueeze(0) > qi, float('-inf'))\n        out[q0:q1] = torch.einsum('hqk,khd->qhd', torch.softmax(s, -1), v[k0:k1])\n    return out\n"}"#;

#[test]
#[cfg_attr(
    not(has_torch),
    ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
)]
fn generated_causal_ranges_give_every_query_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let def = dir.path().join("causal.json");
    std::fs::write(&def, CAUSAL_RAGGED).unwrap();
    let task = dir.path().join("causal");
    let (code, out, err) = run(&mut ksearch(&[
        "import",
        "flashinfer-bench",
        def.to_str().unwrap(),
        "-o",
        task.to_str().unwrap(),
    ]));
    assert_eq!(code, 0, "{out}{err}");
    // Queries and keys are drawn over the same ranges (16 a range on average): the reference
    // is finite on every input set the judge makes.
    let (code, out, err) = run(&mut ksearch(&[
        "eval",
        task.to_str().unwrap(),
        "--target",
        "cpu",
        "--no-timing",
        "--seeds",
        "8",
        "--workload",
        "len_indptr32_total_q512_total_kv512",
        "--json",
    ]));
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    assert_eq!(v["status"], "passed", "{code}: {out}{err}");
}
