//! Small specs for tests in this crate and downstream ones.

use super::*;

pub fn matmul_spec() -> TaskSpec {
    let tensor = |name: &str, shape: [&str; 2]| TensorSpec {
        name: name.into(),
        shape: shape.iter().map(|s| (*s).to_owned()).collect(),
        dtype: Dtype::F32,
        init: None,
        description: None,
    };
    let workload = |name: &str, m: i64, n: i64, k: i64| Workload {
        name: name.into(),
        axes: [("m", m), ("n", n), ("k", k)]
            .iter()
            .map(|(a, v)| ((*a).to_owned(), *v))
            .collect(),
    };
    TaskSpec {
        format: TASK_FORMAT,
        name: "matmul".into(),
        description: "C = A B".into(),
        class: KernelClass::Matmul,
        backend: BackendKind::C,
        axes: vec!["m".into(), "n".into(), "k".into()],
        derived: BTreeMap::new(),
        inputs: vec![tensor("a", ["m", "k"]), tensor("b", ["k", "n"])],
        outputs: vec![tensor("c", ["m", "n"])],
        workloads: vec![workload("small", 8, 8, 8), workload("square", 64, 64, 64)],
        tolerance: BTreeMap::new(),
        reference: SourceRef {
            file: "reference.c".into(),
        },
        seed: SourceRef {
            file: "seed.c".into(),
        },
        baseline: None,
        comparisons: Vec::new(),
        space: None,
        origin: None,
        build: None,
        worker: None,
    }
}
