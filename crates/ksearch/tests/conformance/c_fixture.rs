//! Candidates for the `c` backend, on the built-in `cpu/softmax` task.

use ksearch_core::task::{Source, Task};
use ksearch_eval::{CBackend, Evaluation, LocalEvaluator};

use crate::support::{Behaviour, Fixture};

pub(crate) struct CFixture {
    task: Task,
}

#[path = "../common/softmax_kernels.rs"]
mod kernels;
use kernels::{ALL_ROWS, softmax_candidate as candidate};

impl CFixture {
    pub(crate) fn new() -> Self {
        Self {
            task: ksearch_tasks::load_builtin("cpu/softmax").expect("built-in task"),
        }
    }
}

impl Fixture for CFixture {
    fn task(&self) -> &Task {
        &self.task
    }

    fn evaluator(&self) -> LocalEvaluator {
        LocalEvaluator::new(Box::new(CBackend {
            ksearch_exe: env!("CARGO_BIN_EXE_ksearch").into(),
        }))
    }

    fn source(&self, b: &Behaviour) -> Source {
        let text = match b {
            Behaviour::Good => candidate(ALL_ROWS),
            Behaviour::FourTimesSlower => {
                candidate(&format!("{ALL_ROWS}\n{ALL_ROWS}\n{ALL_ROWS}\n{ALL_ROWS}"))
            }
            Behaviour::Wrong => candidate(&format!("{ALL_ROWS}\ny[rows * cols / 2] += 0.01f;")),
            Behaviour::Zeros => candidate("memset(y, 0, sizeof(float) * rows * cols);"),
            Behaviour::Nan => candidate(&format!("{ALL_ROWS}\ny[cols + 1] = NAN;")),
            Behaviour::PartialWrite => candidate(
                "for (int64_t r = 0; r + 1 < rows; r++) row(x + r * cols, y + r * cols, cols);",
            ),
            Behaviour::MutatesInput => candidate(&format!("{ALL_ROWS}\n((float *)x)[5] = 0.0f;")),
            Behaviour::CachesFirstAnswer => candidate(&format!(
                "static float *saved = 0;\nif (saved) {{ memcpy(y, saved, sizeof(float) * rows * cols); return; }}\n{ALL_ROWS}\nsaved = malloc(sizeof(float) * rows * cols); memcpy(saved, y, sizeof(float) * rows * cols);"
            )),
            Behaviour::CachesAfterManyCalls => candidate(&format!(
                "static long calls = 0; static float *saved = 0;\nif (++calls > 5 && saved) {{ memcpy(y, saved, sizeof(float) * rows * cols); return; }}\n{ALL_ROWS}\nif (!saved) saved = malloc(sizeof(float) * rows * cols);\nmemcpy(saved, y, sizeof(float) * rows * cols);"
            )),
            Behaviour::InfiniteLoop { pid_file } => candidate(&format!(
                "FILE *f = fopen({:?}, \"a\");\nif (fork() == 0) {{ fprintf(f, \"%d \", getpid()); fclose(f); for (;;) {{}} }}\nfprintf(f, \"%d \", getpid()); fclose(f);\nfor (volatile int spin = 1; spin;) {{}}",
                pid_file.display().to_string()
            )),
            Behaviour::Segfault => {
                candidate("printf(\"about to crash\\n\"); fflush(stdout);\n*(volatile int *)0 = 1;")
            }
            Behaviour::SyntaxError => candidate(&format!("{ALL_ROWS}\nint oops = ;")),
            Behaviour::FloodsStdout => candidate(&format!(
                "for (int i = 0; i < 2000; i++) printf(\"flood %d ............................................................................................................................................................................................................................................................................................................................................................................................\\n\", i);\nfprintf(stderr, \"and stderr too\\n\");\n{ALL_ROWS}"
            )),
            Behaviour::Exits => candidate("exit(3);"),
        };
        Source {
            file: "candidate.c".into(),
            text,
        }
    }

    fn assert_compile_message(&self, e: &Evaluation) {
        let c = e.result.compile.as_ref().expect("compile report");
        assert!(
            c.log.contains("candidate.c:"),
            "log names the file: {}",
            c.log
        );
        assert!(c.log.contains("error"), "{}", c.log);
        assert!(
            e.result.message.contains("expected expression"),
            "{}",
            e.result.message
        );
        let line = self
            .source(&Behaviour::SyntaxError)
            .text
            .lines()
            .position(|l| l.contains("int oops"))
            .unwrap()
            + 1;
        assert!(
            c.log.contains(&format!("candidate.c:{line}:")),
            "log points at line {line}: {}",
            c.log
        );
    }
}
