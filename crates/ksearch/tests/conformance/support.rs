//! Shared helpers of the conformance suite.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ksearch_core::protocol::{Status, TimingPlan};
use ksearch_core::task::{Source, Task};
use ksearch_eval::{Contenders, EvalOptions, Evaluation, Evaluator, LocalEvaluator};

/// What a candidate does, independent of the language it is written in. Honest mistakes first,
/// then attacks on the evaluator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Behaviour {
    Good,
    /// Does the work four times: clearly slower even where per-call overhead and a loaded
    /// machine blur the ratio.
    FourTimesSlower,
    Wrong,
    Zeros,
    Nan,
    PartialWrite,
    MutatesInput,
    /// Returns its first answer forever.
    CachesFirstAnswer,
    /// Remembers answers by where its inputs are (and their shape), after a few calls.
    CachesByAddress,
    /// Returns at once when the output already holds finished values.
    SkipsFinishedOutput,
    /// Writes garbage when called back to back (as timing does).
    GarbageWhenTimed,
    /// Aimed at a judge that checks only some timed calls against the baseline: once timed, it
    /// computes one call in eight and returns a copy of its last honest answer from the other
    /// seven, finite and shaped like a softmax (rows sum to one), about eight times faster.
    CopiesAnEarlierAnswer,
    /// Once timed, computes only the first half of the rows and fills the rest with the uniform
    /// distribution (finite, each row summing to one): half the work, an answer that looks
    /// like a softmax to any check that only asks for finite values or row sums.
    HalfTheRowsWhenTimed,
    /// Once it can tell a timed call (after the check phase, its inputs near the last call's
    /// but not the same: a batch runs on neighbouring sets, while each check calls on one set
    /// and the re-check on new memory), returns the softmax off by twice the task's norm
    /// tolerance: what a faster, less precise kernel gives, within the looser bound of timed
    /// outputs compared with the baseline's, and precise wherever it is checked against the
    /// reference.
    DriftsWhenTimed,
    /// Says "done" at once when called back to back and computes on a thread afterwards.
    WorkAfterDone,
    /// Python runners only: stops the judge's clock itself, sending its runner's clock byte at
    /// the start of every call (and silencing the runner's own), then does the work and waits a
    /// millisecond (as a GPU kernel's wait looks to the CPU): timed up to the clock byte it would
    /// read about 0 ms.
    StopsTheClockEarly,
    /// Honest, and waits a millisecond in every call: what `StopsTheClockEarly` really costs.
    WaitsEachCall,
    /// Python runners only: claims to be a production library, defining `ksearch_describe()`
    /// and rewriting its runner's answer to "load" to carry that description, so that its
    /// speedups would be quoted as a baseline's.
    ForgesItsDescription,
    /// Correct, but keeps a thread busy between calls.
    BackgroundWork,
    /// Correct, with a thread that works for 200 µs once each batch of calls has ended: while
    /// the next contender (the baseline) is timed on the same CPU, which it slows down. Little
    /// enough per batch to stay inside the allowance for CPU outside a runner's own calls.
    WorksWhileOthersAreTimed,
    /// Names itself `marker`, tries to fork a child, and loops forever.
    InfiniteLoop {
        marker: String,
    },
    /// Names itself `marker` and tries to leave a `setsid` double-forked daemon behind.
    ForksDaemon {
        marker: String,
    },
    Segfault,
    SyntaxError,
    FloodsStdout,
    Exits,
    /// Writes a forged `passed` result line to every descriptor it can, then returns zeros.
    ForgesProtocol,
    /// Tries to write a file outside its own temporary directory.
    WritesOutside {
        path: PathBuf,
    },
    /// Tries to connect to a port on 127.0.0.1.
    Connects {
        port: u16,
    },
    /// Tries to kill every process it can, its parent first.
    KillsEverything,
    /// Tries to allocate and touch 8 GiB; says so if it may not.
    MemoryHog,
    /// Leaves a thread that crashes its process a little later.
    ThreadCrashesLater,
    /// Tries to change the clock.
    ClockTamper,
    /// Reopens every read-only shared-memory descriptor it holds (its inputs) writable through
    /// `/proc/self/fd` and maps it writable: with write access it could rewrite the inputs of
    /// later calls, and the baseline's, to values whose answer costs nothing. Prints
    /// `reopen refused` or `writable map refused` for each refusal, `REOPENED WRITABLE` if it
    /// got write access.
    ReopensInputsWritable,
}

/// What an evaluation of a behaviour must come to on a backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expect {
    Status(Status, &'static str),
    /// This status, the message holding one of these.
    StatusSaying(Status, &'static [&'static str]),
    /// Anything but `passed`.
    NotPassed,
    /// Either caught (`incorrect`, the message holding this), or `passed` and measured no
    /// faster than the good candidate: an attack this backend may not see, but that must not
    /// pay.
    CaughtOrNoFaster(&'static str),
}

pub(crate) trait Fixture {
    fn task(&self) -> &Task;
    fn source(&self, b: &Behaviour) -> Source;
    fn evaluator(&self) -> LocalEvaluator;
    fn assert_compile_message(&self, e: &Evaluation);

    /// What `b` must come to: the backend may override where its model of execution changes
    /// the outcome (a pure MLX graph cannot defer work or keep state, for instance).
    fn expect(&self, b: &Behaviour) -> Expect {
        default_expect(b)
    }

    /// How much longer than the others this backend's worker and runners take to start (an
    /// interpreter importing PyTorch twice): added to the hang test's limit.
    fn start_slack(&self) -> Duration {
        Duration::ZERO
    }

    /// Whether its runners get their inputs as shared-memory descriptors (not an MLX
    /// executor, which draws its inputs itself).
    fn inputs_in_shared_memory(&self) -> bool {
        true
    }

    /// The most a four times slower variant may measure against the good one (ideally 0.25):
    /// what a harness's fixed cost per call leaves of the difference on a loaded machine.
    fn slower_bound(&self) -> f64 {
        0.6
    }

    /// Evaluates `text` as it is (an attack only this backend allows), with `quick_options`.
    fn evaluate_text(&self, file: &str, text: &str) -> Evaluation {
        let source = Source {
            file: file.into(),
            text: text.into(),
        };
        self.evaluator()
            .evaluate(
                self.task(),
                &source,
                Contenders::default(),
                &quick_options(),
            )
            .expect("evaluation completes")
    }

    fn evaluate_with(
        &self,
        ev: &mut LocalEvaluator,
        b: &Behaviour,
        parent: Option<&Source>,
        opts: &EvalOptions,
    ) -> Evaluation {
        ev.evaluate(
            self.task(),
            &self.source(b),
            Contenders {
                parent,
                incumbent: None,
                comparisons: true,
            },
            opts,
        )
        .expect("evaluation completes")
    }

    fn evaluate(&self, b: &Behaviour, parent: Option<&Source>, opts: &EvalOptions) -> Evaluation {
        self.evaluate_with(&mut self.evaluator(), b, parent, opts)
    }
}

pub(crate) fn default_expect(b: &Behaviour) -> Expect {
    use Behaviour as B;
    match b {
        B::Wrong => Expect::Status(Status::Incorrect, "out of tolerance"),
        B::Zeros => Expect::Status(Status::Incorrect, ""),
        B::Nan | B::PartialWrite => Expect::Status(Status::Incorrect, "non-finite"),
        B::MutatesInput => Expect::Status(Status::Incorrect, "modified input"),
        B::CachesFirstAnswer => Expect::Status(Status::Incorrect, "seed"),
        B::CachesByAddress
        | B::GarbageWhenTimed
        | B::CopiesAnEarlierAnswer
        | B::HalfTheRowsWhenTimed => Expect::Status(Status::Incorrect, "while timed"),
        // Caught by the reference on a timed call the judge kept, or, where the kept call was
        // one of its clean ones (the same inputs as the call before it), by the re-check on
        // fresh inputs after timing.
        B::DriftsWhenTimed => Expect::StatusSaying(
            Status::Incorrect,
            &[
                "compared with the reference",
                "re-check on fresh inputs after timing",
            ],
        ),
        // Caught either in its outputs while timed, as an output that changed after "done", or
        // as CPU used outside its timed calls: every message says "timed".
        B::WorkAfterDone => Expect::Status(Status::Incorrect, "timed"),
        B::BackgroundWork => Expect::Status(Status::Incorrect, "outside its timed calls"),
        B::WorksWhileOthersAreTimed => Expect::Status(
            Status::Incorrect,
            "outside its timed calls while the baseline",
        ),
        B::InfiniteLoop { .. } => Expect::Status(Status::Timeout, "did not finish within"),
        B::Segfault => Expect::Status(Status::Crashed, "SIGSEGV"),
        B::SyntaxError => Expect::Status(Status::CompileError, ""),
        B::Exits => Expect::Status(Status::RuntimeError, "exited with status 3"),
        B::ForgesProtocol => Expect::NotPassed,
        B::Good
        | B::FourTimesSlower
        | B::SkipsFinishedOutput
        | B::ForksDaemon { .. }
        | B::FloodsStdout
        | B::WritesOutside { .. }
        | B::Connects { .. }
        | B::KillsEverything
        | B::MemoryHog
        | B::ThreadCrashesLater
        | B::ClockTamper
        | B::StopsTheClockEarly
        | B::WaitsEachCall
        | B::ForgesItsDescription
        | B::ReopensInputsWritable => Expect::Status(Status::Passed, "passed"),
    }
}

/// Three seeds, short timing: enough to exercise every phase quickly.
pub(crate) fn quick_options() -> EvalOptions {
    EvalOptions {
        workloads: vec!["small".into()],
        seeds: 3,
        base_seed: 11,
        timing: Some(TimingPlan {
            warmup_ms: 2.0,
            min_runs: 5,
            min_time_ms: 10.0,
            max_time_ms: 2_000.0,
            // Batches of several calls: attacks that detect back-to-back calls get to try.
            target_sample_ms: 2.0,
            rotate_bytes: 4 << 20,
        }),
        timeout: Duration::from_secs(60),
    }
}

/// A name no other process has: what a candidate calls itself so the test can find it.
pub(crate) fn marker() -> String {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos()
        ^ std::process::id().rotate_left(16);
    format!("ksq{n:08x}")
}

/// Processes whose name is `marker`.
pub(crate) fn named(marker: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == marker)
                && process_alive(*pid)
        })
        .collect()
}

/// Watches for processes named `marker` while something runs; whether one was ever seen.
pub(crate) struct Watch {
    seen: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watch {
    pub(crate) fn start(marker: &str) -> Watch {
        let seen = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, t, m) = (Arc::clone(&seen), Arc::clone(&stop), marker.to_owned());
        let thread = std::thread::spawn(move || {
            while !t.load(Ordering::Relaxed) {
                if !named(&m).is_empty() {
                    s.store(true, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        Watch {
            seen,
            stop,
            thread: Some(thread),
        }
    }

    pub(crate) fn seen(mut self) -> bool {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.seen.load(Ordering::Relaxed)
    }
}

/// Whether `pid` is a live process (zombies count as dead).
pub(crate) fn process_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat
                .rsplit_once(") ")
                .and_then(|(_, rest)| rest.chars().next());
            state != Some('Z') && state != Some('X')
        }
    }
}

/// What an evaluation's runners printed (the head and tail kept of their output).
pub(crate) fn printed(e: &Evaluation) -> String {
    format!("{}{}", e.result.output.head, e.result.output.tail)
}

/// What an evaluation's runners printed, once it is known to have passed (else the test fails
/// with its message and that output).
pub(crate) fn passed_and_printed(e: &Evaluation) -> String {
    let out = printed(e);
    assert_eq!(
        e.result.status,
        Status::Passed,
        "{}\n{out}",
        e.result.message
    );
    out
}
