//! Candidates for the `c` backend, on the built-in `cpu/softmax` task, and the attacks only C
//! can make (reading files through `#include`, huge static data).

use ksearch_core::protocol::Status;
use ksearch_core::task::{Source, Task};
use ksearch_eval::{CBackend, Evaluation, LocalEvaluator};

use crate::support::{Behaviour, Expect, Fixture, default_expect, printed};

pub(crate) struct CFixture {
    pub(crate) task: Task,
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

/// Whether this call is timed, as far as a candidate can tell: checking takes three calls, so
/// from the fifth on it is in the timing phase.
const TIMED: &str = "static long ksq_calls = 0;\n#define KSQ_TIMED (++ksq_calls > 4)\n";

fn with_prelude(prelude: &str, body: &str) -> String {
    let c = candidate(body);
    // Put the prelude after the headers, before the function.
    c.replacen(
        "\nstatic void row(",
        &format!("\n{prelude}\nstatic void row("),
        1,
    )
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
        let n = "rows * cols";
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
                "static float *saved = 0;\nif (saved) {{ memcpy(y, saved, sizeof(float) * {n}); return; }}\n{ALL_ROWS}\nsaved = malloc(sizeof(float) * {n}); memcpy(saved, y, sizeof(float) * {n});"
            )),
            Behaviour::CachesByAddress => candidate(&format!(
                "static const float *seen_x[256]; static float *seen_y[256]; static int seen = 0; static long calls = 0;\ncalls++;\nfor (int i = 0; i < seen; i++) if (seen_x[i] == x && calls > 3) {{ memcpy(y, seen_y[i], sizeof(float) * {n}); return; }}\n{ALL_ROWS}\nif (seen < 256) {{ seen_x[seen] = x; seen_y[seen] = malloc(sizeof(float) * {n}); memcpy(seen_y[seen], y, sizeof(float) * {n}); seen++; }}"
            )),
            Behaviour::SkipsFinishedOutput => candidate(&format!(
                "if (!isnan(y[0]) && !isnan(y[{n} - 1])) return;\n{ALL_ROWS}"
            )),
            Behaviour::GarbageWhenTimed => with_prelude(
                TIMED,
                &format!(
                    "if (KSQ_TIMED) {{ for (int64_t i = 0; i < {n}; i++) y[i] = 0.5f; }} else {{ {ALL_ROWS} }}"
                ),
            ),
            Behaviour::HalfTheRowsWhenTimed => with_prelude(
                TIMED,
                &format!(
                    "if (KSQ_TIMED) {{ int64_t h = rows / 2; for (int64_t r = 0; r < h; r++) row(x + r * cols, y + r * cols, cols); for (int64_t i = h * cols; i < {n}; i++) y[i] = 1.0f / (float)cols; }} else {{ {ALL_ROWS} }}"
                ),
            ),
            Behaviour::CopiesAnEarlierAnswer => with_prelude(
                &format!(
                    "{TIMED}#include <stdlib.h>\nstatic float *ksq_last; static int64_t ksq_len;\n"
                ),
                &format!(
                    "int64_t n = {n};\n\
                     if (KSQ_TIMED && ksq_last && ksq_len == n && ksq_calls % 8 != 0) {{\n\
                       memcpy(y, ksq_last, sizeof(float) * n);\n\
                       return;\n\
                     }}\n\
                     {ALL_ROWS}\n\
                     if (ksq_len != n) {{ free(ksq_last); ksq_last = malloc(sizeof(float) * n); ksq_len = n; }}\n\
                     memcpy(ksq_last, y, sizeof(float) * n);"
                ),
            ),
            Behaviour::DriftsWhenTimed => with_prelude(
                "static long ksq_calls; static const char *ksq_last;\n",
                &format!(
                    "const char *at = (const char *)x; long d = at - ksq_last;\nint drift = ++ksq_calls > 4 && d != 0 && d > -(64L << 20) && d < (64L << 20);\nksq_last = at;\n{ALL_ROWS}\nif (drift) for (int64_t i = 0; i < {n}; i++) y[i] *= 1.0002f;"
                ),
            ),
            Behaviour::WorkAfterDone => with_prelude(
                &format!(
                    "{TIMED}#include <pthread.h>\n#include <sched.h>\nstatic const float *volatile job_x; static float *volatile job_y; static int64_t job_r, job_c; static volatile int pending = 0, started = 0;\nstatic void row(const float *x, float *y, int64_t cols);\nstatic void *worker(void *a) {{ (void)a; for (;;) {{ while (!pending) sched_yield(); for (int64_t r = 0; r < job_r; r++) row(job_x + r * job_c, job_y + r * job_c, job_c); pending = 0; }} return 0; }}\n"
                ),
                &format!(
                    "if (KSQ_TIMED) {{ if (!started) {{ pthread_t th; pthread_create(&th, 0, worker, 0); started = 1; }} while (pending) sched_yield(); job_x = x; job_y = y; job_r = rows; job_c = cols; pending = 1; }} else {{ {ALL_ROWS} }}"
                ),
            ),
            Behaviour::WorksWhileOthersAreTimed => with_prelude(
                "#include <pthread.h>\n#include <stdatomic.h>\n#include <time.h>\nstatic _Atomic unsigned ksq_batches; static volatile double ksq_sink; static int ksq_started;\nstatic double ksq_now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }\n/* Every 150 µs: when no call came since the last look (the batch has ended) and this batch was not yet followed by work, work 200 µs. */\nstatic void *ksq_after(void *a) { (void)a; unsigned seen = 0, worked = 0; for (;;) { struct timespec d = {0, 150000}; nanosleep(&d, 0); unsigned c = atomic_load(&ksq_batches); if (c != seen) { seen = c; continue; } if (worked == c) continue; worked = c; double end = ksq_now() + 200e-6, v = 1.0; while (ksq_now() < end) for (int i = 0; i < 1000; i++) v = v * 1.0000001 + 1e-9; ksq_sink = v; } return 0; }\n",
                &format!(
                    "if (!ksq_started) {{ pthread_t th; pthread_create(&th, 0, ksq_after, 0); ksq_started = 1; }}\n{ALL_ROWS}\natomic_fetch_add(&ksq_batches, 1);"
                ),
            ),
            Behaviour::BackgroundWork => with_prelude(
                "#include <pthread.h>\nstatic volatile unsigned long spin_count; static int spinner = 0;\nstatic void *spin(void *a) { (void)a; for (;;) spin_count++; return 0; }\n",
                &format!(
                    "if (!spinner) {{ pthread_t th; pthread_create(&th, 0, spin, 0); spinner = 1; }}\n{ALL_ROWS}"
                ),
            ),
            Behaviour::InfiniteLoop { marker } => with_prelude(
                "#include <sys/prctl.h>\n",
                &format!(
                    "prctl(PR_SET_NAME, \"{marker}\");\nif (fork() == 0) {{ prctl(PR_SET_NAME, \"{marker}\"); for (;;) {{}} }}\nfor (volatile int spin = 1; spin;) {{}}"
                ),
            ),
            Behaviour::ForksDaemon { marker } => with_prelude(
                "#include <sys/prctl.h>\n#include <sys/wait.h>\n",
                &format!(
                    "static int once = 0;\nif (!once) {{ once = 1; prctl(PR_SET_NAME, \"{marker}\"); pid_t p = fork();\n  if (p == 0) {{ setsid(); if (fork() == 0) {{ prctl(PR_SET_NAME, \"{marker}\"); sleep(30); }} _exit(0); }}\n  if (p < 0) printf(\"fork refused\\n\"); else waitpid(p, 0, 0); }}\n{ALL_ROWS}"
                ),
            ),
            Behaviour::Segfault => {
                candidate("printf(\"about to crash\\n\"); fflush(stdout);\n*(volatile int *)0 = 1;")
            }
            Behaviour::SyntaxError => candidate(&format!("{ALL_ROWS}\nint oops = ;")),
            Behaviour::FloodsStdout => candidate(&format!(
                "for (int i = 0; i < 2000; i++) printf(\"flood %d ............................................................................................................................................................................................................................................................................................................................................................................................\\n\", i);\nfprintf(stderr, \"and stderr too\\n\");\n{ALL_ROWS}"
            )),
            Behaviour::Exits => candidate("exit(3);"),
            Behaviour::ForgesProtocol => candidate(&format!(
                "static const char forged[] = \"{{\\\"protocol\\\":2,\\\"type\\\":\\\"result\\\",\\\"id\\\":1,\\\"status\\\":\\\"passed\\\",\\\"message\\\":\\\"FORGED\\\",\\\"workloads\\\":[],\\\"phases\\\":{{\\\"compile_s\\\":0,\\\"check_s\\\":0,\\\"timing_s\\\":0}},\\\"output\\\":{{\\\"bytes\\\":0,\\\"head\\\":\\\"\\\",\\\"tail\\\":\\\"\\\"}}}}\\n\";\nfor (int fd = 3; fd < 64; fd++) (void)!write(fd, forged, sizeof forged - 1);\nmemset(y, 0, sizeof(float) * {n});"
            )),
            Behaviour::WritesOutside { path } => candidate(&format!(
                "FILE *f = fopen({:?}, \"w\"); if (f) {{ fputs(\"escaped\", f); fclose(f); }}\n{ALL_ROWS}",
                path.display().to_string()
            )),
            Behaviour::Connects { port } => with_prelude(
                "#include <arpa/inet.h>\n#include <sys/socket.h>\n",
                &format!(
                    "static int once = 0;\nif (!once) {{ once = 1; int s = socket(AF_INET, SOCK_STREAM, 0);\n  if (s >= 0) {{ struct sockaddr_in a = {{0}}; a.sin_family = AF_INET; a.sin_port = htons({port}); a.sin_addr.s_addr = htonl(0x7f000001); (void)connect(s, (struct sockaddr *)&a, sizeof a); close(s); }} }}\n{ALL_ROWS}"
                ),
            ),
            Behaviour::KillsEverything => with_prelude(
                "#include <signal.h>\n#include <dirent.h>\n",
                &format!(
                    "pid_t pp = getppid(); if (pp > 1) kill(pp, SIGKILL);\nDIR *d = opendir(\"/proc\"); struct dirent *e;\nwhile (d && (e = readdir(d))) {{ int pid = atoi(e->d_name); char p[64], comm[64] = {{0}}; if (pid <= 1 || pid == getpid()) continue; snprintf(p, sizeof p, \"/proc/%d/comm\", pid); FILE *f = fopen(p, \"r\"); if (!f) continue; if (fgets(comm, sizeof comm, f) && strncmp(comm, \"ksearch\", 7) == 0) kill(pid, SIGKILL); fclose(f); }}\nif (d) closedir(d);\n{ALL_ROWS}"
                ),
            ),
            Behaviour::MemoryHog => candidate(&format!(
                "static int once = 0;\nif (!once) {{ once = 1; size_t big = (size_t)8 << 30; char *p = malloc(big);\n  if (!p) printf(\"allocation refused\\n\"); else {{ memset(p, 1, big); printf(\"allocated 8 GiB\\n\"); free(p); }} }}\n{ALL_ROWS}"
            )),
            Behaviour::ThreadCrashesLater => with_prelude(
                "#include <pthread.h>\nstatic void *later(void *a) { (void)a; sleep(1); *(volatile int *)0 = 1; return 0; }\n",
                &format!(
                    "static int once = 0;\nif (!once) {{ once = 1; pthread_t th; pthread_create(&th, 0, later, 0); }}\n{ALL_ROWS}"
                ),
            ),
            Behaviour::ReopensInputsWritable => with_prelude(
                "#include <fcntl.h>\n#include <sys/mman.h>\n#include <sys/stat.h>\nstatic char ksq_said[64][160]; static int ksq_nsaid;\nstatic void ksq_say(const char *what, const char *link) { char m[160]; snprintf(m, sizeof m, \"%s %s\", what, link); for (int i = 0; i < ksq_nsaid; i++) if (!strcmp(ksq_said[i], m)) return; if (ksq_nsaid < 64) strcpy(ksq_said[ksq_nsaid++], m); printf(\"%s\\n\", m); fflush(stdout); }\n",
                &format!(
                    "for (int fd = 0; fd < 256; fd++) {{ char p[64], l[128]; snprintf(p, sizeof p, \"/proc/self/fd/%d\", fd); ssize_t n = readlink(p, l, sizeof l - 1); if (n <= 0) continue; l[n] = 0; int fl = fcntl(fd, F_GETFL); if (strncmp(l, \"/memfd:\", 7) || fl < 0 || (fl & O_ACCMODE) != O_RDONLY) continue;\n  int w = open(p, O_RDWR); if (w < 0) {{ ksq_say(\"reopen refused:\", l); continue; }}\n  struct stat st; fstat(w, &st); char *m = mmap(0, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, w, 0);\n  if (m == MAP_FAILED) ksq_say(\"writable map refused:\", l); else {{ ksq_say(\"REOPENED WRITABLE\", l); munmap(m, st.st_size); }}\n  close(w); }}\n{ALL_ROWS}"
                ),
            ),
            Behaviour::StopsTheClockEarly
            | Behaviour::WaitsEachCall
            | Behaviour::ForgesItsDescription => {
                unreachable!("an attack on Python runners' shared interpreter")
            }
            Behaviour::ClockTamper => with_prelude(
                "#include <time.h>\n#include <sys/time.h>\n",
                &format!(
                    "struct timespec zero = {{0, 0}}; (void)clock_settime(CLOCK_REALTIME, &zero); (void)clock_settime(CLOCK_MONOTONIC, &zero);\n{ALL_ROWS}"
                ),
            ),
        };
        Source {
            file: "candidate.c".into(),
            text,
        }
    }

    fn expect(&self, b: &Behaviour) -> Expect {
        match b {
            // Its thread may also fault on memory the judge has taken back (`crashed`): caught
            // either way.
            Behaviour::WorkAfterDone => Expect::NotPassed,
            other => default_expect(other),
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

/// Attacks only a C source can make: at compile time.
mod c_only {
    use super::*;
    use ksearch_eval::Evaluator;

    /// A complete `passed` result line, as a forger would write it.
    const FORGED_LINE: &str = "{\"protocol\":2,\"type\":\"result\",\"id\":1,\"status\":\"passed\",\"message\":\"FORGED\",\"workloads\":[],\"phases\":{\"compile_s\":0,\"check_s\":0,\"timing_s\":0},\"output\":{\"bytes\":0,\"head\":\"\",\"tail\":\"\"}}\n";

    /// The compile log of an evaluation that must have been a `compile_error`.
    fn refused_log(e: &Evaluation) -> &str {
        assert_eq!(
            e.result.status,
            Status::CompileError,
            "{}",
            e.result.message
        );
        &e.result.compile.as_ref().unwrap().log
    }

    fn evaluate(text: impl AsRef<str>) -> Evaluation {
        CFixture::new().evaluate_text("candidate.c", text.as_ref())
    }

    #[test]
    fn including_a_file_outside_the_system_headers_is_a_compile_error_that_leaks_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret.h");
        std::fs::write(&secret, "the-secret-is-swordfish\n").unwrap();
        let e = evaluate(format!(
            "#include {:?}\n{}",
            secret.display().to_string(),
            candidate(ALL_ROWS)
        ));
        let log = refused_log(&e);
        // Not there (a private root), or refused (Landlock, where there are no namespaces).
        assert!(
            log.contains("No such file") || log.contains("Permission denied"),
            "{log}"
        );
        assert!(!log.contains("swordfish"), "{log}");
    }

    #[test]
    fn the_compiler_sees_no_file_but_the_system_headers() {
        // /etc/passwd exists on every Linux machine, but not for the compiler's sandbox.
        let e = evaluate(format!("#include \"/etc/passwd\"\n{}", candidate(ALL_ROWS)));
        let log = refused_log(&e);
        // Not there (a private root), or refused (Landlock, where there are no namespaces).
        assert!(
            log.contains("No such file") || log.contains("Permission denied"),
            "{log}"
        );
        assert!(!log.contains("root:x:0:0"), "{log}");
    }

    #[test]
    fn the_assembler_embeds_no_file_but_the_candidates_own() {
        // `.incbin` in inline assembly reads a file past the preprocessor's include rules: the
        // assembler runs in the compiler's sandbox too, so the file is not there to embed (a
        // candidate that embedded it could print it into the run's stored output).
        let e = evaluate(format!(
            "__asm__(\".section .rodata\\n.incbin \\\"/etc/passwd\\\"\\n.previous\\n\");\n{}",
            candidate(ALL_ROWS)
        ));
        let log = refused_log(&e);
        assert!(log.contains("/etc/passwd"), "{log}");
        assert!(!log.contains("root:x:0:0"), "{log}");
    }

    /// A candidate that tries to steal the judge's descriptors through pidfds (`pidfd_open` on
    /// its parent and every low pid, then `pidfd_getfd` on their first 64 descriptors), writes a
    /// forged `passed` result to whatever it got, signals them, and returns zeros: only a forgery
    /// could make it pass.
    #[test]
    fn stealing_the_judges_descriptors_through_pidfds_forges_nothing() {
        let prefix = format!(
            "#include <signal.h>\n#include <stdio.h>\n#include <string.h>\n#include <sys/syscall.h>\n#include <unistd.h>\n\
             static int ksq_done;\n\
             static void ksq_attack(void) {{\n\
               int stolen = 0, opened = 0;\n\
               const char *forged = {forged:?};\n\
               for (long pid = 1; pid < 4096; pid++) {{\n\
                 long target = pid == 1 ? (long)getppid() : pid;\n\
                 int pfd = (int)syscall(SYS_pidfd_open, target, 0);\n\
                 if (pfd < 0) continue;\n\
                 opened++;\n\
                 for (int fd = 0; fd < 64; fd++) {{\n\
                   int got = (int)syscall(SYS_pidfd_getfd, pfd, fd, 0);\n\
                   if (got < 0) continue;\n\
                   stolen++;\n\
                   if (write(got, forged, strlen(forged)) < 0) {{}}\n\
                   close(got);\n\
                 }}\n\
                 syscall(SYS_pidfd_send_signal, pfd, SIGKILL, 0, 0);\n\
                 close(pfd);\n\
               }}\n\
               printf(\"pidfds opened %d, descriptors stolen %d\\n\", opened, stolen);\n\
               fflush(stdout);\n\
             }}\n",
            forged = FORGED_LINE,
        );
        let e = evaluate(format!(
            "{prefix}{}",
            candidate(
                "if (!ksq_done) { ksq_done = 1; ksq_attack(); }\nmemset(y, 0, sizeof(float) * rows * cols);"
            )
        ));
        assert_ne!(e.result.status, Status::Passed, "{}", e.result.message);
        assert!(!e.result.message.contains("FORGED"), "{}", e.result.message);
        let out = printed(&e);
        assert!(out.contains("descriptors stolen 0"), "{out}");
    }

    /// The runner's socket is the candidate's too (descriptor 3, in its process): once timed,
    /// it writes the runner's "done" there itself at the start of every call, then does the
    /// work. The judge would stop its clock at once; the runner's own "done" then arrives a step
    /// behind every request after it (this kept the judge waiting until the evaluation's limit,
    /// 300 s). It is stopped the next time the judge turns to it, and never measured.
    #[test]
    fn saying_done_early_on_the_runners_own_socket_is_stopped() {
        let started = std::time::Instant::now();
        let e = evaluate(with_prelude(
            &format!("{TIMED}#include <sys/socket.h>\n"),
            &format!(
                "if (KSQ_TIMED) (void)send(3, \"{{\\\"op\\\":\\\"done\\\"}}\", 13, MSG_DONTWAIT);\n{ALL_ROWS}"
            ),
        ));
        // Stopped when the judge turns to it again, or caught first by the outputs its early
        // "done" left unwritten in a warm-up batch (those are checked too).
        match e.result.status {
            Status::RuntimeError => assert!(
                e.result.message.contains("a message nobody asked for"),
                "{}",
                e.result.message
            ),
            _ => {
                assert_eq!(e.result.status, Status::Incorrect, "{}", e.result.message);
                assert!(
                    e.result.message.contains("in warm-up"),
                    "{}",
                    e.result.message
                );
            }
        }
        assert!(e.speedup.is_none());
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "took {:?}",
            started.elapsed()
        );
    }

    /// Answers remembered by a sample of their inputs' values, wherever the inputs lie: eight
    /// elements spread over `x` are the key, and a call whose sample matches a remembered one
    /// gets that answer copied (about ten times faster than the softmax on `small`). A judge
    /// that reused input sets between timed calls (rotating them, or changing only some of
    /// their elements) would time copies; every timed call changes every element, so no sample
    /// of a timed call matches and the kernel gains nothing over the one it wraps.
    #[test]
    fn answers_remembered_by_a_sample_of_the_inputs_gain_nothing() {
        let n = "rows * cols";
        let memo = candidate(&format!(
            "enum {{ SLOTS = 64, PICKS = 8 }};\n\
             static float keys[SLOTS][PICKS]; static float *answers[SLOTS]; static int used = 0, next = 0; static long calls = 0, hits = 0;\n\
             int64_t len = {n}; float key[PICKS];\n\
             for (int k = 0; k < PICKS; k++) key[k] = x[(len - 1) * k / (PICKS - 1)];\n\
             calls++;\n\
             for (int s = 0; s < used; s++) if (!memcmp(keys[s], key, sizeof key)) {{\n\
                 memcpy(y, answers[s], sizeof(float) * len);\n\
                 if (++hits == 1) {{ printf(\"memo hit at call %ld\\n\", calls); fflush(stdout); }}\n\
                 return;\n\
             }}\n\
             {ALL_ROWS}\n\
             int s = used < SLOTS ? used++ : next++ % SLOTS;\n\
             if (!answers[s]) answers[s] = malloc(sizeof(float) * len);\n\
             memcpy(keys[s], key, sizeof key); memcpy(answers[s], y, sizeof(float) * len);"
        ));
        let f = CFixture::new();
        let memo = Source {
            file: "candidate.c".into(),
            text: memo,
        };
        // Within the suite's bounds of noise of the good one (a copy of every answer would
        // read about 10×). Its warm-up calls, which repeat sets and are not timed, do hit
        // (it prints the first); its timed calls cannot.
        crate::no_faster_than_good_source(&f, &memo, "a sample-keyed memo", None);
    }

    /// A read 64 bytes past the end of an input lands in the guard page after it.
    const READ_PAST_X: &str = "y[0] += 0.0f * ((volatile const float *)x)[rows * cols + 16];";

    #[test]
    fn reading_past_the_end_of_an_input_crashes_and_names_the_input() {
        let e = evaluate(candidate(&format!("{ALL_ROWS}\n{READ_PAST_X}")));
        assert_eq!(e.result.status, Status::Crashed, "{}", e.result.message);
        assert!(
            e.result.message.contains("past the end of input `x`"),
            "{}",
            e.result.message
        );
    }

    /// A task whose reference reads past its input (shapes that do not hold what it reads) is
    /// a fault of the task, named, not a pass and not the candidate's crash.
    #[test]
    fn a_reference_that_reads_past_its_input_is_the_tasks_fault() {
        let mut f = CFixture::new();
        f.task.reference.text = candidate(&format!("{ALL_ROWS}\n{READ_PAST_X}"));
        let err = f
            .evaluator()
            .evaluate(
                &f.task,
                &Source {
                    file: "candidate.c".into(),
                    text: candidate(ALL_ROWS),
                },
                ksearch_eval::Contenders::default(),
                &crate::support::quick_options(),
            )
            .expect_err("the reference faults");
        let message = err.to_string();
        assert!(
            message.contains("the reference read past the end of input `x` on workload `small`"),
            "{message}"
        );
    }

    #[test]
    fn a_gigabyte_of_static_data_is_refused_at_build_time() {
        let e = evaluate(format!(
            "static volatile char ksq_big[300 << 20] = {{1}};\n{}",
            candidate(&format!("{ALL_ROWS}\ny[0] += 0.0f * ksq_big[rows];"))
        ));
        assert_eq!(
            e.result.status,
            Status::CompileError,
            "{}",
            e.result.message
        );
    }
}
