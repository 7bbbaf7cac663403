//! The conformance suite every evaluation backend is held to: each behaviour of a candidate
//! (correct, wrong, hanging, crashing, and the ways a candidate attacks the evaluator) must come
//! out as the same status on every backend, unless the backend's model of execution makes an
//! attack impossible (then its fixture says what it comes to instead). A backend provides a
//! fixture that writes its own candidate for each behaviour.

mod c_fixture;
mod c_round3;
mod harness_unit;
mod mlx_cpu_fixture;
mod numpy_fixture;
mod python_candidates;
mod python_judge_rules;
mod python_protocol;
mod sandbox_attacks;
mod support;
mod torch_cpu_fixture;

use std::time::{Duration, Instant};

use ksearch_core::protocol::Status;
use support::{Behaviour, Expect, Fixture, Watch, marker, named, printed, quick_options};

/// Instantiate every conformance test for one backend fixture.
macro_rules! conformance_suite {
    ($module:ident, $fixture:ty $(, #[$attr:meta])*) => {
        mod $module {
            use super::*;

            fn fixture() -> $fixture {
                <$fixture>::new()
            }

            #[test]
            $(#[$attr])*
            fn wrong_result_is_incorrect() {
                let f = fixture();
                outcome(&f, &Behaviour::Wrong);
            }
            #[test]
            $(#[$attr])*
            fn all_zero_output_is_incorrect() {
                let f = fixture();
                outcome(&f, &Behaviour::Zeros);
            }
            #[test]
            $(#[$attr])*
            fn nan_output_is_incorrect() {
                let f = fixture();
                outcome(&f, &Behaviour::Nan);
            }
            #[test]
            $(#[$attr])*
            fn unwritten_output_is_incorrect() {
                let f = fixture();
                outcome(&f, &Behaviour::PartialWrite);
            }
            #[test]
            $(#[$attr])*
            fn input_mutation_is_incorrect() {
                let f = fixture();
                outcome(&f, &Behaviour::MutatesInput);
            }
            #[test]
            $(#[$attr])*
            fn replaying_the_first_answer_is_incorrect() {
                let f = fixture();
                outcome(&f, &Behaviour::CachesFirstAnswer);
            }
            #[test]
            $(#[$attr])*
            fn answers_cached_by_address_are_caught_while_timed() {
                let f = fixture();
                outcome(&f, &Behaviour::CachesByAddress);
            }
            #[test]
            $(#[$attr])*
            fn garbage_when_timed_is_caught() {
                let f = fixture();
                outcome(&f, &Behaviour::GarbageWhenTimed);
            }
            #[test]
            $(#[$attr])*
            fn copying_an_earlier_answer_into_most_timed_calls_is_caught() {
                let f = fixture();
                outcome(&f, &Behaviour::CopiesAnEarlierAnswer);
            }
            #[test]
            $(#[$attr])*
            fn computing_half_the_rows_while_timed_is_caught() {
                let f = fixture();
                outcome(&f, &Behaviour::HalfTheRowsWhenTimed);
            }
            #[test]
            $(#[$attr])*
            fn drifting_within_the_timed_tolerance_is_caught() {
                let f = fixture();
                outcome(&f, &Behaviour::DriftsWhenTimed);
            }
            #[test]
            $(#[$attr])*
            fn exiting_the_process_is_a_runtime_error() {
                let f = fixture();
                outcome(&f, &Behaviour::Exits);
            }
            #[test]
            $(#[$attr])*
            fn killing_everything_it_can_harms_nothing() {
                let f = fixture();
                outcome(&f, &Behaviour::KillsEverything);
            }
            #[test]
            $(#[$attr])*
            fn good_candidate_passes_with_a_speedup() {
                let f = fixture();
                good_candidate_passes_with_a_speedup_impl(&f);
            }
            #[test]
            $(#[$attr])*
            fn a_forged_result_is_not_believed() {
                let f = fixture();
                let e = outcome(&f, &Behaviour::ForgesProtocol);
                assert!(!e.result.message.contains("FORGED"), "{}", e.result.message);
                assert!(e.speedup.is_none());
            }
            #[test]
            $(#[$attr])*
            fn work_between_timed_calls_is_caught_or_gains_nothing() {
                let f = fixture();
                outcome(&f, &Behaviour::BackgroundWork);
            }
            #[test]
            $(#[$attr])*
            fn working_while_another_contender_is_timed_is_caught_or_gains_nothing() {
                let f = fixture();
                outcome(&f, &Behaviour::WorksWhileOthersAreTimed);
            }
            #[test]
            $(#[$attr])*
            fn work_after_done_is_caught() {
                let f = fixture();
                outcome(&f, &Behaviour::WorkAfterDone);
            }
            #[test]
            $(#[$attr])*
            fn skipping_a_finished_output_gains_nothing() {
                let f = fixture();
                let _ = no_faster_than_good(&f, &Behaviour::SkipsFinishedOutput, None);
            }
            #[test]
            $(#[$attr])*
            fn a_replaced_clock_changes_nothing() {
                let f = fixture();
                let _ = no_faster_than_good(&f, &Behaviour::ClockTamper, None);
            }
            #[test]
            $(#[$attr])*
            fn infinite_loop_times_out_and_leaves_no_process() {
                let f = fixture();
                infinite_loop_times_out_impl(&f);
            }
            #[test]
            $(#[$attr])*
            fn a_setsid_daemon_does_not_outlive_the_evaluation() {
                let f = fixture();
                let m = marker();
                let watch = Watch::start(&m);
                outcome(&f, &Behaviour::ForksDaemon { marker: m.clone() });
                assert!(watch.seen(), "the candidate ran (named {m})");
                std::thread::sleep(Duration::from_millis(200));
                assert_eq!(
                    named(&m),
                    Vec::<i32>::new(),
                    "processes outlived the evaluation"
                );
            }
            #[test]
            $(#[$attr])*
            fn segfault_crashes_and_the_next_evaluation_passes() {
                let f = fixture();
                segfault_then_pass_impl(&f);
            }
            #[test]
            $(#[$attr])*
            fn a_thread_left_behind_does_not_touch_the_next_candidate() {
                let f = fixture();
                let opts = quick_options();
                let mut ev = f.evaluator();
                let _ = f.evaluate_with(&mut ev, &Behaviour::ThreadCrashesLater, None, &opts);
                std::thread::sleep(Duration::from_millis(1500));
                let next = f.evaluate_with(&mut ev, &Behaviour::Good, None, &opts);
                assert_eq!(
                    next.result.status,
                    Status::Passed,
                    "{}",
                    next.result.message
                );
            }
            #[test]
            $(#[$attr])*
            fn syntax_error_is_a_compile_error_with_the_message() {
                let f = fixture();
                let e = outcome(&f, &Behaviour::SyntaxError);
                f.assert_compile_message(&e);
            }
            #[test]
            $(#[$attr])*
            fn flooding_stdout_does_not_break_the_protocol() {
                let f = fixture();
                let e = outcome(&f, &Behaviour::FloodsStdout);
                assert!(
                    e.result.output.bytes > 2_000_000,
                    "captured only {} bytes",
                    e.result.output.bytes
                );
                assert!(
                    e.result.output.head.contains("flood"),
                    "{:?}",
                    &e.result.output.head[..100.min(e.result.output.head.len())]
                );
            }
            #[test]
            $(#[$attr])*
            fn files_outside_the_sandbox_cannot_be_written() {
                let f = fixture();
                let dir = tempfile::tempdir().unwrap();
                open_to_all(dir.path());
                let path = dir.path().join("escaped");
                outcome(&f, &Behaviour::WritesOutside { path: path.clone() });
                assert!(!path.exists(), "the candidate wrote {}", path.display());
            }
            #[test]
            $(#[$attr])*
            fn the_network_cannot_be_reached() {
                let f = fixture();
                let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                listener.set_nonblocking(true).unwrap();
                let port = listener.local_addr().unwrap().port();
                outcome(&f, &Behaviour::Connects { port });
                assert!(
                    listener.accept().is_err(),
                    "the candidate connected to 127.0.0.1:{port}"
                );
            }
            #[test]
            $(#[$attr])*
            fn inputs_cannot_be_reopened_writable() {
                let f = fixture();
                let e = outcome(&f, &Behaviour::ReopensInputsWritable);
                let out = printed(&e);
                assert!(!out.contains("REOPENED WRITABLE"), "{out}");
                if f.inputs_in_shared_memory() {
                    assert!(out.contains("refused"), "the candidate found no input descriptor: {out:?}");
                }
            }
            #[test]
            $(#[$attr])*
            fn memory_is_limited() {
                let f = fixture();
                let e = outcome(&f, &Behaviour::MemoryHog);
                let out = printed(&e);
                assert!(out.contains("allocation refused"), "{out:?}");
            }
            #[test]
            $(#[$attr])*
            fn a_four_times_slower_variant_measures_slower() {
                let f = fixture();
                four_times_slower_impl(&f);
            }
        }
    };
}

conformance_suite!(c_backend, c_fixture::CFixture);
conformance_suite!(
    mlx_harness_numpy,
    numpy_fixture::NumpyFixture,
    #[cfg_attr(
        not(has_numpy),
        ignore = "needs python3 with numpy (`.ci/run` installs it: pip install numpy)"
    )]
);
conformance_suite!(
    mlx_harness_cpu,
    mlx_cpu_fixture::MlxCpuFixture,
    #[cfg_attr(
        not(has_mlx),
        ignore = "needs python3 with MLX for CPU (`.ci/run` installs it: pip install \"mlx[cpu]\")"
    )]
);

conformance_suite!(
    torch_harness_cpu,
    torch_cpu_fixture::TorchCpuFixture,
    #[cfg_attr(
        not(has_torch),
        ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
    )]
);

/// A Python candidate shares its direct runner's interpreter, so it can send the byte that
/// stops the judge's clock itself, early, and then do its work: the judge must time the batch up
/// to the runner's "done". (MLX candidates only run while traced; C candidates have no such
/// interpreter to share.)
mod python_runners {
    use super::*;

    /// Timed against the same work done honestly, the early clock must read the same.
    fn a_clock_stopped_early_gains_nothing<F: Fixture>(f: &F) {
        let mut opts = quick_options();
        if let Some(t) = opts.timing.as_mut() {
            t.min_runs = 15;
        }
        let honest = f.source(&Behaviour::WaitsEachCall);
        let e = f.evaluate_with(
            &mut f.evaluator(),
            &Behaviour::StopsTheClockEarly,
            Some(&honest),
            &opts,
        );
        assert_eq!(e.result.status, Status::Passed, "{}", e.result.message);
        let vs_honest = e
            .speedup_vs_parent
            .as_ref()
            .expect("timed against the honest one")
            .geomean;
        // Each call waits a millisecond: read up to the early clock byte it would be many times
        // faster than the honest one. Slower is no gain: the lower bound is as loose as the
        // other paired checks' (0.50 was seen on a loaded two-core machine).
        assert!(
            (0.2..2.0).contains(&vs_honest),
            "measured {vs_honest:.2}× the honest candidate"
        );
    }

    /// A candidate that describes itself as a library, and rewrites its runner's answer to say
    /// so, is never described: only the task's own modules are asked, and only their answers
    /// read.
    fn a_forged_description_is_not_believed<F: Fixture>(f: &F) {
        let e = f.evaluate_with(
            &mut f.evaluator(),
            &Behaviour::ForgesItsDescription,
            Some(&f.source(&Behaviour::ForgesItsDescription)),
            &quick_options(),
        );
        assert_eq!(e.result.status, Status::Passed, "{}", e.result.message);
        assert!(
            e.result
                .described
                .iter()
                .all(|d| !d.text.contains("FORGED")),
            "{:?}",
            e.result.described
        );
        let json = serde_json::to_string(&e.result).unwrap();
        assert!(!json.contains("FORGED"), "{json}");
    }

    /// A module that carries the answers for the check seeds it can predict (the harness's own
    /// input draw is importable, and `quick_options` checks seeds 11, 12 and 13; the re-check
    /// used to follow at 11 + 0x5EED0000) and returns zeros for anything else: it passes the
    /// check phase, and the re-check, on a seed drawn from the OS, finds it out.
    fn answers_carried_for_predictable_seeds_fail_the_recheck<F: Fixture>(f: &F, draw: &str) {
        let text = format!(
            "import numpy as np\n{draw}\nSEEDS = [11, 12, 13, 11 + 0x5EED0000]\nSPEC = {{'name': 'x', 'dtype': 'f32', 'init': {{'uniform': [-12.0, 12.0]}}}}\n_t = {{}}\n\ndef _table(shape):\n    if shape not in _t:\n        rows = []\n        for s in SEEDS:\n            x = _draw(SPEC, shape, s).astype(np.float64)\n            e = np.exp(x - x.max(axis=1, keepdims=True))\n            rows.append((_as(x[0, :8].astype(np.float32)), _as((e / e.sum(axis=1, keepdims=True)).astype(np.float32))))\n        _t[shape] = rows\n    return _t[shape]\n\ndef run(x, *, rows, cols):\n    y = _zeros(x)\n    for k, o in _table((rows, cols)):\n        y = _where(_all(x[0, :8] == k), o, y)\n    return y\n"
        );
        use ksearch_eval::Evaluator;
        let mut opts = quick_options();
        opts.timing = None;
        let e = f
            .evaluator()
            .evaluate(
                f.task(),
                &ksearch_core::task::Source {
                    file: "candidate.py".into(),
                    text,
                },
                ksearch_eval::Contenders::default(),
                &opts,
            )
            .expect("evaluation completes");
        assert_eq!(e.result.status, Status::Incorrect, "{}", e.result.message);
        assert!(
            e.result.message.contains("re-check on fresh inputs"),
            "it must pass the check phase and fail the re-check: {}",
            e.result.message
        );
    }

    #[test]
    #[cfg_attr(
        not(has_numpy),
        ignore = "needs python3 with numpy (`.ci/run` installs it)"
    )]
    fn mlx_harness_numpy_answers_carried_for_predictable_seeds_fail_the_recheck() {
        answers_carried_for_predictable_seeds_fail_the_recheck(
            &numpy_fixture::NumpyFixture::new(),
            "from ksearch_harness.arrays import draw\n\ndef _draw(spec, shape, s):\n    return draw(spec, shape, s, 'small')\n_as = lambda a: a\n_zeros = np.zeros_like\n_where = lambda c, a, b: a if c else b\n_all = lambda a: bool(np.all(a))\n",
        );
    }

    #[test]
    #[cfg_attr(
        not(has_mlx),
        ignore = "needs python3 with MLX for CPU (`.ci/run` installs it)"
    )]
    fn mlx_harness_cpu_answers_carried_for_predictable_seeds_fail_the_recheck() {
        answers_carried_for_predictable_seeds_fail_the_recheck(
            &mlx_cpu_fixture::MlxCpuFixture::new(),
            "import mlx.core as mx\nfrom ksearch_harness.arrays import MlxArrays\n_arrays = MlxArrays('cpu')\n\ndef _draw(spec, shape, s):\n    return np.array(_arrays.draw_inputs([spec], [shape], s, 'small')[0])\n_as = mx.array\n_zeros = mx.zeros_like\n_where = mx.where\n_all = mx.all\n",
        );
    }

    #[test]
    #[cfg_attr(
        not(has_numpy),
        ignore = "needs python3 with numpy (`.ci/run` installs it)"
    )]
    fn mlx_harness_numpy_a_forged_description_is_not_believed() {
        a_forged_description_is_not_believed(&numpy_fixture::NumpyFixture::new());
    }

    #[test]
    #[cfg_attr(
        not(has_torch),
        ignore = "needs python3 with PyTorch (`.ci/run` installs it)"
    )]
    fn torch_harness_cpu_a_forged_description_is_not_believed() {
        a_forged_description_is_not_believed(&torch_cpu_fixture::TorchCpuFixture::new());
    }

    #[test]
    #[cfg_attr(
        not(has_numpy),
        ignore = "needs python3 with numpy (`.ci/run` installs it)"
    )]
    fn mlx_harness_numpy_a_clock_stopped_early_gains_nothing() {
        a_clock_stopped_early_gains_nothing(&numpy_fixture::NumpyFixture::new());
    }

    #[test]
    #[cfg_attr(
        not(has_torch),
        ignore = "needs python3 with PyTorch (`.ci/run` installs it)"
    )]
    fn torch_harness_cpu_a_clock_stopped_early_gains_nothing() {
        a_clock_stopped_early_gains_nothing(&torch_cpu_fixture::TorchCpuFixture::new());
    }
}

/// Let anyone write in `dir`, so only the sandbox can stop a candidate writing there.
fn open_to_all(dir: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
}

/// Evaluate `b` and check it comes to what the fixture expects.
fn outcome<F: Fixture>(f: &F, b: &Behaviour) -> ksearch_eval::Evaluation {
    let mut opts = quick_options();
    if *b == Behaviour::BackgroundWork
        && let Some(t) = opts.timing.as_mut()
    {
        // Long enough that the background thread's CPU stands far above the allowance.
        t.min_time_ms = 150.0;
    }
    if *b == Behaviour::WorksWhileOthersAreTimed
        && let Some(t) = opts.timing.as_mut()
    {
        // This attack times its work by sleeping until a batch has ended; under load its sleep
        // overshot the next contender's whole 2 ms batch (two CI runs in about thirty, once
        // twice in a row), and then it competed with nothing. Batches of 4 ms leave it twice
        // the time to land, and the judge's allowance (100 µs and 1% of the batch) stays below
        // the 200 µs the attack works.
        t.target_sample_ms = 4.0;
    }
    let mut e = f.evaluate(b, None, &opts);
    for _ in 0..2 {
        if *b != Behaviour::WorksWhileOthersAreTimed || e.result.status != Status::Passed {
            break;
        }
        // Missed where it did not land; a judge that misses the work where it lands misses it
        // every time.
        e = f.evaluate(b, None, &opts);
    }
    match f.expect(b) {
        Expect::Status(status, part) => {
            assert_eq!(e.result.status, status, "{b:?}: {}", e.result.message);
            assert!(
                e.result.message.contains(part),
                "{b:?}: message {:?} lacks {part:?}",
                e.result.message
            );
        }
        Expect::StatusSaying(status, parts) => {
            assert_eq!(e.result.status, status, "{b:?}: {}", e.result.message);
            assert!(
                parts.iter().any(|part| e.result.message.contains(part)),
                "{b:?}: message {:?} holds none of {parts:?}",
                e.result.message
            );
        }
        Expect::NotPassed => {
            assert_ne!(
                e.result.status,
                Status::Passed,
                "{b:?}: {}",
                e.result.message
            );
        }
        Expect::CaughtOrNoFaster(part) => {
            if e.result.status == Status::Incorrect {
                assert!(
                    e.result.message.contains(part),
                    "{b:?}: {}",
                    e.result.message
                );
            } else {
                return no_faster_than_good(f, b, Some(part));
            }
        }
    }
    e
}

fn good_candidate_passes_with_a_speedup_impl<F: Fixture>(f: &F) {
    let e = outcome(f, &Behaviour::Good);
    let s = e.speedup.expect("a passed evaluation has a speedup");
    assert!(s.geomean.is_finite() && s.geomean > 0.0);
    let w = &e.result.workloads[0];
    let err = w.errors.expect("errors measured");
    assert!(err.seeds_checked >= 4, "3 seeds and the re-check");
    assert!(w.timings.len() >= 2, "candidate and baseline timed");
    let sandbox = e
        .result
        .sandbox
        .as_ref()
        .expect("the result says how it was confined");
    if ksearch_eval::sandbox::no_namespaces_asked() {
        // `.ci/run` runs the suite again with KSEARCH_SANDBOX_NO_NAMESPACES=1: the setting must
        // reach the judge and its runners (the judge's scrubbed environment once dropped it,
        // and the Python harness's runners kept their namespaces).
        assert!(
            !sandbox.user_namespace
                && !sandbox.pid_namespace
                && !sandbox.network_namespace
                && !sandbox.private_root,
            "{sandbox:?}"
        );
    } else if cfg!(target_os = "linux") && unsafe_is_root() {
        // CI runs as root on Linux, where every layer is available: demand all of them there.
        assert!(sandbox.is_full(), "{sandbox:?}");
    }
}

fn unsafe_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
    })
}

/// `b` passes, and is not measured faster than the good candidate it contains (or, when
/// `caught` is given, is `incorrect` saying so).
fn no_faster_than_good<F: Fixture>(
    f: &F,
    b: &Behaviour,
    caught: Option<&str>,
) -> ksearch_eval::Evaluation {
    // A Python thread spinning beside the runner takes the interpreter from the runner's own
    // timed calls (Python switches threads every 5 ms; a call takes microseconds): measured at
    // 0.03-0.08x its honest twin in one CI run. Slower gains nothing: no lower bound.
    let floor = if *b == Behaviour::BackgroundWork {
        0.0
    } else {
        NOISE_FLOOR
    };
    let good = f.source(&Behaviour::Good);
    no_faster_than(f, &f.source(b), &good, &format!("{b:?}"), caught, floor)
}

/// Below this ratio to its honest twin, a measurement that should match it is taken as broken
/// (measured up to twice more, then a failure).
pub(crate) const NOISE_FLOOR: f64 = 0.2;

/// `candidate` (called `what` in messages) timed against the good candidate: caught (`caught`
/// in its `incorrect` message), or passed within the bounds of noise of the good one.
pub(crate) fn no_faster_than_good_source<F: Fixture>(
    f: &F,
    candidate: &ksearch_core::task::Source,
    what: &str,
    caught: Option<&str>,
) -> ksearch_eval::Evaluation {
    no_faster_than(
        f,
        candidate,
        &f.source(&Behaviour::Good),
        what,
        caught,
        NOISE_FLOOR,
    )
}

/// `candidate` (called `what` in messages) timed against the honest `good` it wraps: caught
/// (`caught` in its `incorrect` message), or passed within the bounds of noise of `good`: no
/// faster than 2.5x, no slower than `floor`.
pub(crate) fn no_faster_than<F: Fixture>(
    f: &F,
    candidate: &ksearch_core::task::Source,
    good: &ksearch_core::task::Source,
    what: &str,
    caught: Option<&str>,
    floor: f64,
) -> ksearch_eval::Evaluation {
    no_faster_than_on(f, candidate, good, what, caught, floor, quick_options())
}

/// [`no_faster_than`] on the workloads `opts` names (its timing lengthened as there).
pub(crate) fn no_faster_than_on<F: Fixture>(
    f: &F,
    candidate: &ksearch_core::task::Source,
    good: &ksearch_core::task::Source,
    what: &str,
    caught: Option<&str>,
    floor: f64,
    mut opts: ksearch_eval::EvalOptions,
) -> ksearch_eval::Evaluation {
    use ksearch_eval::Evaluator as _;
    if let Some(t) = opts.timing.as_mut() {
        t.min_runs = 15;
        t.min_time_ms = 200.0;
    }
    // A ratio outside the bounds is measured up to twice more before it fails the test: the
    // tests run two at a time on two cores, and a burst of another test's work has skewed
    // paired measurements past them (4.4× and 0.03×, each once in a CI run; 2.56–3.42× twice in
    // a row for honest twins of the numpy harness, in three CI runs of 2026-12-05). An attack
    // that gains does so every time.
    let mut seen = Vec::new();
    for _ in 0..3 {
        let e = f
            .evaluator()
            .evaluate(
                f.task(),
                candidate,
                ksearch_eval::Contenders {
                    parent: Some(good),
                    incumbent: None,
                    comparisons: true,
                },
                &opts,
            )
            .expect("evaluation completes");
        if let Some(part) = caught
            && e.result.status == Status::Incorrect
        {
            assert!(
                e.result.message.contains(part),
                "{what}: {}",
                e.result.message
            );
            return e;
        }
        // The judge's check that a runner is idle while another is timed forgives one reading
        // over its allowance per runner and workload; a loaded machine has charged an idle
        // runner twice (329 µs during a 3.5 ms batch, once in a CI run). It is measured again
        // too: a runner that does work while others are timed does it every time.
        if e.result.status == Status::Incorrect
            && e.result.message.contains("outside its timed calls")
        {
            seen.push(e.result.message.clone());
            continue;
        }
        assert_eq!(
            e.result.status,
            Status::Passed,
            "{what}: {}",
            e.result.message
        );
        let speedup = e
            .speedup_vs_parent
            .as_ref()
            .expect("timed against the good one");
        // Loose bounds: a loaded two-core machine blurs paired timings by up to 2× (seen); the
        // attacks this guards against would gain far more.
        if (floor..2.5).contains(&speedup.geomean) {
            return e;
        }
        // Each workload's median times (candidate / good, ms) and calls a batch, for a failure
        // to be read.
        let calls = |name: &str, role| {
            e.result
                .workloads
                .iter()
                .find(|w| w.name == name)
                .and_then(|w| w.timing(role))
                .map_or(0, |t| t.calls_per_sample)
        };
        let times: Vec<_> = speedup
            .workloads
            .iter()
            .map(|w| {
                format!(
                    "{} {:.4}/{:.4} ms, {}/{} calls a batch",
                    w.workload,
                    w.candidate_ms,
                    w.other_ms,
                    calls(&w.workload, ksearch_core::protocol::Role::Candidate),
                    calls(&w.workload, ksearch_core::protocol::Role::Parent)
                )
            })
            .collect();
        seen.push(format!("{:.2} ({})", speedup.geomean, times.join(", ")));
    }
    panic!(
        "{what}, three times: measured outside {floor}–2.5× the good candidate it wraps, or charged with work outside its timed calls: {}",
        seen.join(" and ")
    );
}

fn infinite_loop_times_out_impl<F: Fixture>(f: &F) {
    let m = marker();
    let mut opts = quick_options();
    opts.timeout = Duration::from_secs(4) + f.start_slack();
    let watch = Watch::start(&m);
    let started = Instant::now();
    let e = f.evaluate(&Behaviour::InfiniteLoop { marker: m.clone() }, None, &opts);
    let took = started.elapsed();
    assert!(watch.seen(), "the candidate ran (named {m})");
    assert_eq!(e.result.status, Status::Timeout, "{}", e.result.message);
    // Killing a worker takes longer where its processes are larger (up to the start slack).
    assert!(
        took < opts.timeout + Duration::from_secs(5) + f.start_slack(),
        "timeout took {took:?}"
    );
    assert!(
        e.result.message.contains("did not finish within"),
        "{}",
        e.result.message
    );
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        named(&m),
        Vec::<i32>::new(),
        "processes survived the timeout"
    );
}

fn segfault_then_pass_impl<F: Fixture>(f: &F) {
    let opts = quick_options();
    let mut ev = f.evaluator();
    let crashed = f.evaluate_with(&mut ev, &Behaviour::Segfault, None, &opts);
    assert_eq!(
        crashed.result.status,
        Status::Crashed,
        "{}",
        crashed.result.message
    );
    assert!(
        crashed.result.message.contains("SIGSEGV"),
        "{}",
        crashed.result.message
    );
    assert!(
        crashed.result.output.head.contains("about to crash"),
        "output before the crash is kept: {:?}",
        crashed.result.output
    );
    let next = f.evaluate_with(&mut ev, &Behaviour::Good, None, &opts);
    assert_eq!(
        next.result.status,
        Status::Passed,
        "{}",
        next.result.message
    );
}

fn four_times_slower_impl<F: Fixture>(f: &F) {
    let mut opts = quick_options();
    if let Some(t) = opts.timing.as_mut() {
        t.min_runs = 15;
        t.min_time_ms = 100.0;
    }
    let good = f.source(&Behaviour::Good);
    let mut ev = f.evaluator();
    // Ideal is 0.25; the Python harnesses' per-call overhead on the small workload brings it
    // to about 0.46 (measured on the 2-core CI machine); the bound leaves room for load noise.
    // A machine busy with the rest of the suite can still blur one measurement: a second one
    // is taken before failing, and a variant that does not measure slower fails both.
    let mut measured = Vec::new();
    for _ in 0..2 {
        let slow = f.evaluate_with(&mut ev, &Behaviour::FourTimesSlower, Some(&good), &opts);
        assert_eq!(
            slow.result.status,
            Status::Passed,
            "{}",
            slow.result.message
        );
        let vs_parent = slow
            .speedup_vs_parent
            .expect("timed against the parent")
            .geomean;
        if vs_parent < f.slower_bound() {
            return;
        }
        measured.push(vs_parent);
    }
    panic!(
        "the 4× slower variant measured {measured:.2?}× of the good one, twice (at most {} expected)",
        f.slower_bound()
    );
}
