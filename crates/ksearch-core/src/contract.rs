//! The candidate contract of the `c` backend, produced from the task so that docs, prompts and
//! the worker's calling shim all say the same thing.
//!
//! A candidate is one C function named after the task. Its parameters are the inputs (as
//! `const T *restrict`), then the outputs (`T *restrict`), then every axis as `int64_t`, in the
//! order the task declares them. Tensors are dense and row-major.

use std::fmt::Write as _;

use crate::task::TaskSpec;

/// Name of the function the worker calls in the generated shim.
pub const SHIM_SYMBOL: &str = "ksearch_shim_call";

fn c_type(dtype: crate::Dtype) -> &'static str {
    // Task validation rejects dtypes the c backend cannot express.
    dtype.c_type().unwrap_or("void")
}

/// The C prototype a candidate must define, e.g.
/// `void softmax(const float *restrict x, float *restrict y, int64_t rows, int64_t cols)`.
pub fn c_signature(spec: &TaskSpec) -> String {
    let mut params = Vec::new();
    for t in &spec.inputs {
        params.push(format!("const {} *restrict {}", c_type(t.dtype), t.name));
    }
    for t in &spec.outputs {
        params.push(format!("{} *restrict {}", c_type(t.dtype), t.name));
    }
    for a in &spec.axes {
        params.push(format!("int64_t {a}"));
    }
    format!("void {}({})", spec.name, params.join(", "))
}

/// Every tensor of the task, one line each (`- input `x`: f32[rows][cols]`), for the contracts.
fn tensor_lines(spec: &TaskSpec) -> String {
    let mut lines = String::new();
    for (kind, tensors) in [("input", &spec.inputs), ("output", &spec.outputs)] {
        for t in tensors {
            let _ = writeln!(
                lines,
                "- {kind} `{}`: {}[{}]",
                t.name,
                t.dtype,
                t.shape.join("][")
            );
        }
    }
    lines.trim_end().to_owned()
}

/// The contract in words, for docs and prompts (`backend/c_contract.txt`).
pub fn c_contract(spec: &TaskSpec) -> String {
    let language = if spec.build.as_ref().is_some_and(|b| b.cxx) {
        "C++17, not static; `restrict` is the compiler's `__restrict`"
    } else {
        "C11, not static"
    };
    include_str!("backend/c_contract.txt")
        .replace("{language}", language)
        .replace("{signature}", &c_signature(spec))
        .replace("{tensors}", &tensor_lines(spec))
}

/// The candidate contract of the task's backend, in words.
pub fn contract_for(spec: &TaskSpec) -> String {
    spec.backend.backend().contract(spec)
}

/// The candidate contract of the `mlx` backend, in words: a Python module with `run`
/// (`backend/mlx_contract.txt`).
pub fn mlx_contract(spec: &TaskSpec) -> String {
    let inputs: Vec<&str> = spec.inputs.iter().map(|t| t.name.as_str()).collect();
    let outputs: Vec<&str> = spec.outputs.iter().map(|t| t.name.as_str()).collect();
    let (returns, what, tuple) = if outputs.len() == 1 {
        (outputs[0].to_owned(), "the output", "")
    } else {
        (
            format!("({})", outputs.join(", ")),
            "the outputs, in this order,",
            " (a tuple)",
        )
    };
    include_str!("backend/mlx_contract.txt")
        .replace("{inputs}", &inputs.join(", "))
        .replace("{axes}", &spec.axes.join(", "))
        .replace("{returns}", &returns)
        .replace("{tensors}", &tensor_lines(spec))
        .replace("{what}", what)
        .replace("{tuple}", tuple)
}

/// The candidate contract of the `torch` backend, in words: a Python module with `run` (or
/// KernelBench's `ModelNew`).
pub fn torch_contract(spec: &TaskSpec) -> String {
    let mut params: Vec<&str> = spec.inputs.iter().map(|t| t.name.as_str()).collect();
    let axes: Vec<&str> = spec.axes.iter().map(String::as_str).collect();
    let outputs: Vec<&str> = spec.outputs.iter().map(|t| t.name.as_str()).collect();
    let joined_axes = format!("*, {}", axes.join(", "));
    params.push(&joined_axes);
    let returns = if outputs.len() == 1 {
        outputs[0].to_owned()
    } else {
        format!("({})", outputs.join(", "))
    };
    let mut tensors = String::new();
    for (kind, list) in [("input", &spec.inputs), ("output", &spec.outputs)] {
        for t in list {
            let shape = if t.shape.is_empty() {
                "a 0-d tensor".to_owned()
            } else {
                format!("[{}]", t.shape.join("]["))
            };
            let _ = writeln!(tensors, "- {kind} `{}`: {}{shape}", t.name, t.dtype);
        }
    }
    let what = if outputs.len() == 1 {
        "the output as a tensor"
    } else {
        "the outputs, in this order,"
    };
    include_str!("backend/torch_contract.txt")
        .replace("{params}", &params.join(", "))
        .replace("{returns}", &returns)
        .replace("{tensors}", tensors.trim_end())
        .replace("{what}", what)
}

/// The calling shim the worker compiles around a candidate. It includes the candidate in the
/// same translation unit after the prototype, so a definition with the wrong signature is a
/// compile error rather than a silent mismatch at run time.
///
/// For a C++ task (`[build] cxx`), the shim is C++: `restrict` is the compiler's `__restrict`,
/// and the shim's own function has C linkage, so that the worker finds it by name.
pub fn c_shim(spec: &TaskSpec, candidate_file: &str) -> String {
    let cxx = spec.build.as_ref().is_some_and(|b| b.cxx);
    let mut s = String::new();
    let _ = writeln!(s, "#include <stdint.h>");
    if cxx {
        let _ = writeln!(s, "#define restrict __restrict");
    }
    let _ = writeln!(s, "{};", c_signature(spec));
    let _ = writeln!(s, "#include \"{candidate_file}\"");
    let _ = writeln!(
        s,
        "{}void {SHIM_SYMBOL}(void *const *ksearch_buffers, const int64_t *ksearch_axes) {{",
        if cxx { "extern \"C\" " } else { "" }
    );
    let mut args = Vec::new();
    let tensors = spec
        .inputs
        .iter()
        .map(|t| (t, true))
        .chain(spec.outputs.iter().map(|t| (t, false)));
    for (i, (t, is_input)) in tensors.enumerate() {
        let constness = if is_input { "const " } else { "" };
        args.push(format!(
            "({constness}{} *)ksearch_buffers[{i}]",
            c_type(t.dtype)
        ));
    }
    for i in 0..spec.axes.len() {
        args.push(format!("ksearch_axes[{i}]"));
    }
    let _ = writeln!(s, "    {}({});", spec.name, args.join(", "));
    let _ = writeln!(s, "}}");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::tests_support::matmul_spec;

    #[test]
    fn signature_lists_inputs_outputs_then_axes() {
        let spec = matmul_spec();
        assert_eq!(
            c_signature(&spec),
            "void matmul(const float *restrict a, const float *restrict b, float *restrict c, \
             int64_t m, int64_t n, int64_t k)"
        );
    }

    #[test]
    fn the_mlx_contract_names_inputs_axes_and_outputs() {
        let c = mlx_contract(&matmul_spec());
        assert!(c.contains("def run(a, b, *, m, n, k):"), "{c}");
        assert!(c.contains("return c"), "{c}");
        assert!(c.contains("KSEARCH_TARGET"), "{c}");
    }

    #[test]
    fn the_contracts_read_as_their_text_files_fill_them() {
        let spec = matmul_spec();
        let mlx = mlx_contract(&spec);
        assert!(mlx.starts_with(
            "Write a Python module that defines exactly this function:\n\n    import mlx.core as mx\n    def run(a, b, *, m, n, k):\n        ...\n        return c\n\nInputs are `mx.array`s, row-major and contiguous; axes are Python ints:\n- input `a`: f32[m][k]\n- input `b`: f32[k][n]\n- output `c`: f32[m][n]\nReturn the output as `mx.array`s of exactly these shapes and dtypes. Build kernels with"
        ), "{mlx}");
        assert!(
            mlx.ends_with("nothing may be kept between calls.\n"),
            "{mlx}"
        );
        let c = c_contract(&spec);
        assert!(c.starts_with(
            "Define exactly this function (C11, not static):\n\n    #include <stdint.h>\n    void matmul(const float *restrict a, const float *restrict b, float *restrict c, int64_t m, int64_t n, int64_t k);\n\nTensors are dense, row-major and 64-byte aligned:\n- input `a`: f32[m][k]\n- input `b`: f32[k][n]\n- output `c`: f32[m][n]\nInputs must not be modified."
        ), "{c}");
        assert!(c.ends_with("Do not define `main`.\n"), "{c}");
        for text in [&mlx, &c] {
            assert!(!text.contains('{'), "every placeholder filled: {text}");
        }
    }

    #[test]
    fn the_torch_contract_names_inputs_axes_outputs_and_model_new() {
        let c = torch_contract(&matmul_spec());
        assert!(c.contains("def run(a, b, *, m, n, k):"), "{c}");
        assert!(c.contains("return c"), "{c}");
        assert!(c.contains("- input `a`: f32[m][k]"), "{c}");
        assert!(c.contains("ModelNew(*init_inputs)"), "{c}");
        assert!(!c.contains('{'), "every placeholder filled: {c}");
    }

    #[test]
    fn shim_calls_the_candidate_with_every_buffer_and_axis() {
        let shim = c_shim(&matmul_spec(), "candidate.c");
        assert!(shim.contains("#include \"candidate.c\""));
        assert!(shim.contains(
            "matmul((const float *)ksearch_buffers[0], (const float *)ksearch_buffers[1], \
             (float *)ksearch_buffers[2], ksearch_axes[0], ksearch_axes[1], ksearch_axes[2]);"
        ));
        assert!(c_contract(&matmul_spec()).contains("input `a`: f32[m][k]"));
    }
}
