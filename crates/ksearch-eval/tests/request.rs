//! What `build_request` (and the evaluator before it) accepts before anything is allocated or
//! started.

use ksearch_core::protocol::Role;
use ksearch_core::task::tests_support::matmul_spec;
use ksearch_core::task::{Source, Task};
use ksearch_eval::{
    CBackend, Contenders, EvalError, EvalOptions, Evaluator, LocalEvaluator, MAX_SEEDS,
    build_request,
};

fn task() -> Task {
    let source = |file: &str| Source {
        file: file.into(),
        text: "void matmul(void) {}".into(),
    };
    Task {
        id: "test/matmul".into(),
        spec: matmul_spec(),
        reference: source("reference.c"),
        seed: source("seed.c"),
        baseline: None,
        comparisons: Vec::new(),
        space: None,
        worker: None,
    }
}

fn request(seeds: usize) -> Result<ksearch_core::protocol::EvaluateRequest, EvalError> {
    let t = task();
    let options = EvalOptions {
        seeds,
        ..EvalOptions::default()
    };
    build_request(1, &t, &t.seed, Contenders::default(), &options)
}

#[test]
fn absurd_seed_counts_are_an_options_error_not_an_allocation() {
    for seeds in [0, MAX_SEEDS + 1, 4_294_967_295, usize::MAX] {
        let e = request(seeds).expect_err("refused");
        assert!(matches!(e, EvalError::Options(_)), "{seeds}: {e}");
    }
    let e = request(4_294_967_295).unwrap_err().to_string();
    assert!(
        e.contains("4294967295 seeds") && e.contains("at most 64"),
        "{e}"
    );
}

#[test]
fn every_seed_up_to_the_bound_is_planned() {
    for seeds in [1, 3, MAX_SEEDS] {
        let r = request(seeds).expect("accepted");
        assert_eq!(r.check.seeds.len(), seeds);
    }
}

#[test]
fn a_task_naming_a_missing_library_is_refused_with_how_to_install_it() {
    let mut t = task();
    t.baseline = Some(ksearch_core::task::Baseline {
        name: "Some BLAS".into(),
        source: t.seed.clone(),
        libs: vec!["ksearchnosuchlibrary".into()],
        modules: Vec::new(),
        install: [(
            "ksearchnosuchlibrary".to_owned(),
            ksearch_core::task::InstallHint {
                name: "NoSuchBLAS".into(),
                debian: Some("libnosuchblas-dev".into()),
                pip: None,
            },
        )]
        .into(),
        env: Default::default(),
    });
    // Refused before any worker starts (this one's program does not exist).
    let mut evaluator = LocalEvaluator::new(Box::new(CBackend {
        ksearch_exe: "/nonexistent/ksearch".into(),
    }));
    let e = evaluator
        .evaluate(&t, &t.seed, Contenders::default(), &EvalOptions::default())
        .expect_err("refused before the worker fails to link");
    assert!(matches!(e, EvalError::MissingDependency { .. }), "{e}");
    let text = e.to_string();
    assert!(
        text.contains("`Some BLAS` needs NoSuchBLAS (-lksearchnosuchlibrary)"),
        "{text}"
    );
    // Once it is left out, the request is built against the reference.
    let dropped = ksearch_eval::dependencies::drop_unavailable(&mut t, None);
    assert_eq!(dropped.len(), 1);
    let r = build_request(
        1,
        &t,
        &t.seed,
        Contenders::default(),
        &EvalOptions::default(),
    )
    .expect("built");
    assert_eq!(r.contenders[0].label, "reference (reference.c)");
    assert_eq!(r.contenders[0].source.file, "reference.c");
}

#[test]
fn comparisons_are_timed_only_when_asked() {
    let mut t = task();
    t.comparisons.push(ksearch_core::task::Baseline {
        name: "another way".into(),
        source: t.seed.clone(),
        libs: Vec::new(),
        modules: Vec::new(),
        install: Default::default(),
        env: Default::default(),
    });
    let roles = |comparisons| {
        let contenders = Contenders {
            comparisons,
            ..Contenders::default()
        };
        build_request(1, &t, &t.seed, contenders, &EvalOptions::default())
            .expect("built")
            .contenders
            .iter()
            .map(|c| c.role)
            .collect::<Vec<_>>()
    };
    assert_eq!(roles(false), [Role::Baseline]);
    assert_eq!(roles(true), [Role::Baseline, Role::Comparison]);
}
