//! Candidates for the `mlx` backend on MLX's CPU device (`--target cpu`): the module is traced
//! in a tracer runner and its graph executed in an executor runner, the path every MLX target
//! takes, checked where no GPU exists. (Custom kernels need a GPU; these modules use MLX ops.)
//! A traced graph is a pure function of its inputs: it cannot keep answers, defer work or time
//! itself, so those attacks come to an honest result here.

use std::path::PathBuf;

use ksearch_core::protocol::Status;
use ksearch_core::task::{Source, Task};
use ksearch_eval::{Evaluation, LocalEvaluator, MlxBackend};

use crate::numpy_fixture::assert_python_compile_message;
use crate::python_candidates::{Lib, source};
use crate::support::{Behaviour, Expect, Fixture, default_expect, printed};

pub(crate) struct MlxCpuFixture {
    task: Task,
}

const MLX: Lib = Lib {
    prelude: "import mlx.core as mx\n\ndef _softmax(x):\n    e = mx.exp(x - x.max(axis=1, keepdims=True))\n    return (e / e.sum(axis=1, keepdims=True)).astype(mx.float32)\n",
    // A traced graph cannot write its inputs: the assignment only changes what it computes from.
    // A whole row, so the wrong output is certain (one element of a softmax row can be too
    // small to matter).
    mutate: "x[0, :] = 0.0",
    partial: "y = _softmax(x)\nrow = mx.full((1, cols), float('nan'), dtype=mx.float32)\nreturn mx.concatenate([y[:-1], row], axis=0)",
    nan: "y = _softmax(x)\ny[1, 1] = float('nan')\nreturn y",
    wrong: "y = _softmax(x)\ny[rows // 2, cols // 2] += 0.01\nreturn y",
    zeros: "return mx.zeros_like(x)",
    four_times: "y = _softmax(x)\nfor _ in range(3):\n    y = _softmax(x + 0.0 * y)\nreturn y",
    flood_lines: 6000,
};

impl MlxCpuFixture {
    /// Only built into tests that run where MLX was found (`has_mlx`, see build.rs).
    pub(crate) fn new() -> Self {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mlx_softmax");
        Self {
            task: ksearch_tasks::load_task(dir.to_str().unwrap()).expect("fixture task"),
        }
    }
}

impl Fixture for MlxCpuFixture {
    fn task(&self) -> &Task {
        &self.task
    }

    fn evaluator(&self) -> LocalEvaluator {
        LocalEvaluator::new(Box::new(
            MlxBackend::new(
                None,
                Some("cpu".into()),
                None,
                env!("CARGO_BIN_EXE_ksearch").into(),
            )
            .expect("the harness unpacks"),
        ))
    }

    fn source(&self, b: &Behaviour) -> Source {
        Source {
            file: "candidate.py".into(),
            text: source(&MLX, b),
        }
    }

    fn inputs_in_shared_memory(&self) -> bool {
        false
    }

    fn expect(&self, b: &Behaviour) -> Expect {
        match b {
            // MLX arrays are values: the assignment changes the candidate's copy, not the input,
            // and the result is computed from the wrong values.
            Behaviour::MutatesInput => Expect::Status(Status::Incorrect, "out of tolerance"),
            // The module only runs while traced (once per workload): memory, counters, clocks
            // and threads never see a call; what it traced is an honest graph.
            Behaviour::CachesFirstAnswer
            | Behaviour::CachesByAddress
            | Behaviour::GarbageWhenTimed
            | Behaviour::CopiesAnEarlierAnswer
            | Behaviour::HalfTheRowsWhenTimed
            | Behaviour::DriftsWhenTimed
            | Behaviour::WorkAfterDone
            | Behaviour::BackgroundWork
            | Behaviour::WorksWhileOthersAreTimed => Expect::Status(Status::Passed, "passed"),
            other => default_expect(other),
        }
    }

    fn assert_compile_message(&self, e: &Evaluation) {
        assert_python_compile_message(self, e);
    }
}

/// Attacks on what MLX shares between processes. (Named so that CI's run without namespaces,
/// which filters on `mlx_harness`, takes it too.)
mod mlx_harness_cpu_only {
    use super::*;

    /// The directory a candidate's line `<prefix><dir> <error>` names, which must be the shared
    /// kernel cache.
    fn refused_in<'a>(out: &'a str, prefix: &str) -> &'a str {
        let line = out
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("{out}"));
        let dir = line[prefix.len()..]
            .rsplit_once(' ')
            .expect("a directory and an error")
            .0;
        assert!(dir.contains("mlx-kernels"), "the cache is shared: {line}");
        dir
    }

    /// MLX's cache of run-time compiled kernels is shared by every evaluation (the judge and the
    /// baseline load from it); a candidate that could write it, or a module's own kernel
    /// directory beside it, could swap in a kernel of its own. Its tracer sees the shared one
    /// read-only and no module's directory at all.
    #[test]
    #[cfg_attr(
        not(has_mlx),
        ignore = "needs python3 with MLX for CPU (`.ci/run` installs it: pip install \"mlx[cpu]\")"
    )]
    fn the_kernel_cache_cannot_be_written_by_a_candidate() {
        let f = MlxCpuFixture::new();
        let text = "import os\nimport mlx.core as mx\n\
            _dir = os.environ.get('MLX_PTX_CACHE_DIR', '')\n\
            try:\n    with open(os.path.join(_dir, 'gather_poisoned.ptx'), 'w') as _f:\n        _f.write('poison')\n    print('KERNEL CACHE WRITTEN in', _dir)\n\
            except OSError as e:\n    print('kernel cache write refused in', _dir, type(e).__name__)\n\
            try:\n    os.makedirs(_dir + '-modules/planted', exist_ok=True)\n    with open(_dir + '-modules/planted/custom_kernel_x.ptx', 'w') as _f:\n        _f.write('poison')\n    print('MODULE CACHE WRITTEN')\n\
            except OSError as e:\n    print('module cache write refused', type(e).__name__)\n\n\
            def run(x, *, rows, cols):\n    e = mx.exp(x - x.max(axis=1, keepdims=True))\n    return (e / e.sum(axis=1, keepdims=True)).astype(mx.float32)\n";
        let e = f.evaluate_text("candidate.py", text);
        let out = printed(&e);
        assert_eq!(e.result.status, Status::Passed, "{}", e.result.message);
        assert!(!out.contains("WRITTEN"), "{out}");
        let dir = refused_in(&out, "kernel cache write refused in ");
        assert!(!out.contains("MODULE CACHE WRITTEN"), "{out}");
        assert!(
            !std::path::Path::new(&format!("{dir}-modules/planted")).exists(),
            "a candidate made a module's kernel directory: {out}"
        );
        assert!(
            !std::path::Path::new(dir)
                .join("gather_poisoned.ptx")
                .exists(),
            "{dir}"
        );
    }

    /// On CUDA every executor loads the judge's NVRTC keeper (`nvrtc-keep-<hash>.so` in the
    /// shared kernel directory) with `LD_PRELOAD`, trusted ones included: a candidate that could
    /// replace it, or plant one under the name the next build would take, would run its own code
    /// in the baseline's process. Its tracer tries both, and sets `LD_PRELOAD` for good measure.
    #[test]
    #[cfg_attr(
        not(has_mlx),
        ignore = "needs python3 with MLX for CPU (`.ci/run` installs it: pip install \"mlx[cpu]\")"
    )]
    fn the_nvrtc_keeper_cannot_be_replaced_by_a_candidate() {
        let f = MlxCpuFixture::new();
        let text = "import hashlib, os\nimport mlx.core as mx\n\
            _dir = os.environ.get('MLX_PTX_CACHE_DIR', '')\n\
            os.environ['LD_PRELOAD'] = os.path.join(_dir, 'evil.so')\n\
            _names = [n for n in os.listdir(_dir) if n.startswith('nvrtc-keep-')] if os.path.isdir(_dir) else []\n\
            _names.append('nvrtc-keep-' + hashlib.sha256(b'x').hexdigest()[:16] + '.so')\n\
            for _n in _names:\n    try:\n        with open(os.path.join(_dir, _n), 'wb') as _f:\n            _f.write(b'\\x7fELF')\n        print('KEEPER WRITTEN', _n)\n    except OSError as e:\n        print('keeper write refused in', _dir, type(e).__name__)\n\n\
            def run(x, *, rows, cols):\n    e = mx.exp(x - x.max(axis=1, keepdims=True))\n    return (e / e.sum(axis=1, keepdims=True)).astype(mx.float32)\n";
        let e = f.evaluate_text("candidate.py", text);
        let out = printed(&e);
        assert_eq!(e.result.status, Status::Passed, "{}", e.result.message);
        assert!(!out.contains("WRITTEN"), "{out}");
        let dir = refused_in(&out, "keeper write refused in ");
        let planted = std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(Result::ok)
                    .any(|e| e.path().metadata().is_ok_and(|m| m.len() == 4))
            })
            .unwrap_or(false);
        assert!(!planted, "a four-byte file was planted in {dir}");
    }

    /// The tracer plants Python start-up code (`sitecustomize`, `usercustomize`, a `.pth` file)
    /// in every site directory it can name, its user site under HOME=/tmp and its working
    /// directory: code that would run in the executors started after it, or in the next
    /// evaluation's runners, to turn MLX's CUDA graphs back on or skip work. Its payload ends
    /// any process that imports it, so the evaluation and the next one passing says no plant
    /// took; where the host's directories are concerned, none is left there either.
    #[test]
    #[cfg_attr(
        not(has_mlx),
        ignore = "needs python3 with MLX for CPU (`.ci/run` installs it: pip install \"mlx[cpu]\")"
    )]
    fn start_up_code_planted_by_a_tracer_runs_in_no_later_runner() {
        let f = MlxCpuFixture::new();
        let e = f.evaluate_text(
            "candidate.py",
            include_str!("../fixtures/hostile/plants_startup_code.py"),
        );
        let out = printed(&e);
        assert_eq!(
            e.result.status,
            Status::Passed,
            "{}\n{out}",
            e.result.message
        );
        // The interpreter's own site directories are read-only to it.
        assert!(
            out.lines()
                .any(|l| l.starts_with("plant refused ") && l.contains("site-packages")),
            "{out}"
        );
        let tried: Vec<&str> = out
            .lines()
            .filter_map(|l| {
                l.strip_prefix("PLANTED ")
                    .or_else(|| l.strip_prefix("plant refused "))
            })
            .map(|l| l.split(' ').next().unwrap())
            .collect();
        assert!(tried.len() >= 6, "{out}");
        for path in tried {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            assert!(
                !text.contains("PLANTED CODE RAN"),
                "the plant {path} is on this machine: {out}"
            );
        }
        // The next evaluation's runners start clean too.
        let honest = f.evaluate_text("candidate.py", &f.source(&Behaviour::Good).text);
        assert_eq!(
            honest.result.status,
            Status::Passed,
            "{}",
            honest.result.message
        );
    }
}
