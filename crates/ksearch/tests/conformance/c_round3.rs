//! Attacks on the `c` judge of its third round, each written here (`attacks/`): work done
//! between being told of a timed batch and the clock's start, drift on a share of the timed
//! calls, nothing done in the warm-up that sizes the batches, a batch's list of sets rewritten.

use ksearch_core::protocol::Status;
use ksearch_core::task::{Source, Workload};
use ksearch_eval::{Evaluation, Evaluator};

use crate::c_fixture::CFixture;
use crate::support::{Fixture, quick_options};

fn attack(text: &str) -> Source {
    Source {
        file: "candidate.c".into(),
        text: text.into(),
    }
}

fn evaluate(f: &CFixture, source: &Source) -> Evaluation {
    f.evaluator()
        .evaluate(
            f.task(),
            source,
            ksearch_eval::Contenders::default(),
            &quick_options(),
        )
        .expect("evaluation completes")
}

/// The thread that computes a batch while the runner's main thread is held between "arm" and
/// "go" (`attacks/works_before_the_clock.c`), on a workload whose call (about 60 µs here) fits in
/// the fixed allowance per batch the judge had for CPU outside the timed calls. Against the
/// judge before this round it read 6.3 times faster than its honest twin (`ksearch eval
/// --against`, default timing, on this workload). The judge now writes a batch's sets only once
/// its clock runs, so what the thread computes are the last batch's sets, and the CPU a runner
/// used since its last answer is counted into the batch: caught, or no faster than the softmax
/// it wraps.
#[test]
fn work_between_arm_and_go_gains_nothing() {
    let mut f = CFixture::new();
    f.task.spec.workloads.push(Workload {
        name: "tiny".into(),
        axes: [("rows".to_owned(), 8), ("cols".to_owned(), 1000)].into(),
    });
    let mut opts = quick_options();
    opts.workloads = vec!["tiny".into()];
    crate::no_faster_than_on(
        &f,
        &attack(include_str!("attacks/works_before_the_clock.c")),
        &f.source(&crate::support::Behaviour::Good),
        "a thread that works between arm and go",
        Some("outside its timed calls"),
        // Slower gains nothing: its work before the clock is charged to its batches.
        0.0,
        opts,
    );
}

/// `attacks/drifts_on_half_the_timed_calls.c`: wrong by 1 to 2.4 times the tolerance on every
/// second timed call it can tell (all but the first of a batch: a third to a half of them),
/// right everywhere else. Four timed calls of every untrusted contender, drawn uniformly over
/// all of its timed calls, are held to the reference at the task's own tolerance: each
/// evaluation catches it with a chance of about 1 − (2/3)^4 = 80% or more (the judge before
/// this round, checking one call, caught it in 2 of 4 evaluations; this one in 3 of 4, both on
/// `small`); five evaluations in a row that miss it fail this test.
#[test]
fn drifting_on_half_the_timed_calls_is_caught() {
    let f = CFixture::new();
    let source = attack(include_str!("attacks/drifts_on_half_the_timed_calls.c"));
    let mut seen = Vec::new();
    for _ in 0..5 {
        let e = evaluate(&f, &source);
        if e.result.status == Status::Incorrect {
            assert!(
                e.result.message.contains("compared with the reference")
                    || e.result.message.contains("re-check on fresh inputs"),
                "{}",
                e.result.message
            );
            return;
        }
        assert_eq!(e.result.status, Status::Passed, "{}", e.result.message);
        seen.push(e.result.message);
    }
    panic!("passed five evaluations in a row: {seen:?}");
}

/// `attacks/idle_in_warm_up.c`: does nothing in the warm-up calls, which before this round
/// were not checked and sized its batches (to the most the judge allows, with pools of
/// gigabytes). Warm-up outputs are poisoned and sampled now.
#[test]
fn doing_nothing_in_warm_up_is_caught() {
    let f = CFixture::new();
    let e = evaluate(&f, &attack(include_str!("attacks/idle_in_warm_up.c")));
    assert_eq!(e.result.status, Status::Incorrect, "{}", e.result.message);
    assert!(
        e.result.message.contains("in warm-up"),
        "{}",
        e.result.message
    );
}

/// `attacks/rewrites_the_batch_list.c`: maps the control page writable and, at the first call of
/// each batch, points every later call of it at the first set, answering those with a copy (one
/// softmax a batch). The judge reads each call's outputs in its own memory, where it poisoned
/// every set of the batch: the sets the runner was turned away from stay unwritten, in the
/// first warm-up batch of more than one call or, failing that, in a timed one.
#[test]
fn rewriting_the_batch_list_is_caught() {
    let f = CFixture::new();
    let e = evaluate(
        &f,
        &attack(include_str!("attacks/rewrites_the_batch_list.c")),
    );
    assert_eq!(e.result.status, Status::Incorrect, "{}", e.result.message);
    assert!(
        (e.result.message.contains("in warm-up") || e.result.message.contains("while timed"))
            && e.result.message.contains("NaN"),
        "{}",
        e.result.message
    );
}
