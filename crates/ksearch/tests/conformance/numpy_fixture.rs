//! Candidates for the `mlx` backend's Python harness, run with `--target numpy` on a test task,
//! so every behaviour of the suite is checked on the harness where no GPU exists. The GPU
//! targets (metal, cuda) share all of this code but the array backend.

use std::path::PathBuf;

use ksearch_core::task::{Source, Task};
use ksearch_eval::{Evaluation, LocalEvaluator, MlxBackend};

use crate::support::{Behaviour, Fixture};

pub(crate) struct NumpyFixture {
    task: Task,
}

const ROW: &str = "import numpy as np\n\ndef _softmax(x):\n    e = np.exp(x - x.max(axis=1, keepdims=True))\n    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)\n\n";

fn candidate(body: &str) -> String {
    let body: String = body.lines().map(|l| format!("    {l}\n")).collect();
    format!("{ROW}def run(x, *, rows, cols):\n{body}")
}

impl NumpyFixture {
    /// Only built into tests that run where numpy was found (`has_numpy`, see build.rs).
    pub(crate) fn new() -> Self {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/numpy_softmax");
        Self {
            task: ksearch_tasks::load_task(dir.to_str().unwrap()).expect("fixture task"),
        }
    }
}

impl Fixture for NumpyFixture {
    fn task(&self) -> &Task {
        &self.task
    }

    fn evaluator(&self) -> LocalEvaluator {
        LocalEvaluator::new(Box::new(
            MlxBackend::new(None, Some("numpy".into()), None).expect("the harness unpacks"),
        ))
    }

    fn source(&self, b: &Behaviour) -> Source {
        let text = match b {
            Behaviour::Good => candidate("return _softmax(x)"),
            Behaviour::FourTimesSlower => candidate("for _ in range(3):\n    _softmax(x)\nreturn _softmax(x)"),
            Behaviour::Wrong => candidate("y = _softmax(x)\ny[rows // 2, cols // 2] += 0.01\nreturn y"),
            Behaviour::Zeros => candidate("return np.zeros_like(x)"),
            Behaviour::Nan => candidate("y = _softmax(x)\ny[1, 1] = np.nan\nreturn y"),
            Behaviour::PartialWrite => candidate("y = np.full_like(x, np.nan)\ny[:-1] = _softmax(x[:-1])\nreturn y"),
            Behaviour::MutatesInput => candidate("x[0, 5] = 0.0\nreturn _softmax(x)"),
            Behaviour::CachesFirstAnswer => format!(
                "{ROW}_saved = []\n\ndef run(x, *, rows, cols):\n    if _saved:\n        return _saved[0].copy()\n    _saved.append(_softmax(x))\n    return _saved[0].copy()\n"
            ),
            Behaviour::CachesAfterManyCalls => format!(
                "{ROW}_state = {{'calls': 0, 'saved': None}}\n\ndef run(x, *, rows, cols):\n    _state['calls'] += 1\n    if _state['calls'] > 5 and _state['saved'] is not None and _state['saved'].shape == x.shape:\n        return _state['saved'].copy()\n    y = _softmax(x)\n    _state['saved'] = y.copy()\n    return y\n"
            ),
            Behaviour::InfiniteLoop { pid_file } => format!(
                "import os\n\ndef run(x, *, rows, cols):\n    with open({path:?}, 'a') as f:\n        f.write(f'{{os.getpid()}} ')\n    if os.fork() == 0:\n        with open({path:?}, 'a') as f:\n            f.write(f'{{os.getpid()}} ')\n        while True:\n            pass\n    while True:\n        pass\n",
                path = pid_file.display().to_string()
            ),
            Behaviour::Segfault => "import ctypes\n\ndef run(x, *, rows, cols):\n    print('about to crash', flush=True)\n    ctypes.string_at(0)\n".to_owned(),
            Behaviour::SyntaxError => candidate("y = _softmax(x)\nreturn = y"),
            Behaviour::FloodsStdout => format!(
                "{ROW}import sys\n\ndef run(x, *, rows, cols):\n    for i in range(2000):\n        print('flood', i, '.' * 400)\n    sys.stderr.write('and stderr too\\n')\n    return _softmax(x)\n"
            ),
            Behaviour::Exits => "import os\n\ndef run(x, *, rows, cols):\n    os._exit(3)\n".to_owned(),
        };
        Source {
            file: "candidate.py".into(),
            text,
        }
    }

    fn assert_compile_message(&self, e: &Evaluation) {
        let c = e.result.compile.as_ref().expect("compile report");
        let line = self
            .source(&Behaviour::SyntaxError)
            .text
            .lines()
            .position(|l| l.contains("return = y"))
            .unwrap()
            + 1;
        assert!(
            c.log.contains(&format!("candidate.py:{line}:")),
            "log points at line {line}: {}",
            c.log
        );
        assert!(
            e.result.message.contains("invalid syntax"),
            "{}",
            e.result.message
        );
    }
}
