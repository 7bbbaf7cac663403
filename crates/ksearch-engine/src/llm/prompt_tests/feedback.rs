//! What a debug or improve prompt tells the model about its last attempt, and the answer that
//! ends a cycle.

use super::*;

/// `evaluation(Passed, ms)` with the cycle's best attempt timed alongside: `samples` for the
/// candidate and the best, round by round.
fn timed_with_best(candidate: &[f64], best: &[f64]) -> Evaluation {
    let mut e = evaluation(Status::Passed, Some(candidate[0]));
    let w = &mut e.result.workloads[0];
    w.timings[0].stats = TimingStats::from_samples(candidate.to_vec(), 4);
    w.timings.push(ContenderTiming {
        role: Role::Incumbent,
        label: "best".into(),
        stats: TimingStats::from_samples(best.to_vec(), 4),
    });
    e
}

/// The candidate source every attempt of these tests has.
fn code() -> Source {
    Source {
        file: "candidate.c".into(),
        text: CODE.into(),
    }
}

/// The cycle's first pass (round 2): its best attempt.
fn first_pass() -> AttemptRecord {
    attempt(
        2,
        AttemptKind::Implement,
        evaluation(Status::Passed, Some(0.21)),
    )
}

fn evaluated<'a>(source: &'a Source, a: &'a AttemptRecord) -> Evaluated<'a> {
    Evaluated {
        source,
        attempt: a,
        evaluation: a.evaluation.as_ref().unwrap(),
    }
}

fn improve(
    p: &mut LlmProposer,
    c: &ProposeContext<'_>,
    last: Evaluated<'_>,
    best: Evaluated<'_>,
) -> Option<crate::proposer::Candidate> {
    let parent = task().seed;
    p.generate(
        c,
        &GenerateRequest {
            node: 1,
            kind: AttemptKind::Improve,
            parent_source: &parent,
            previous: Some(last),
            best: Some(best),
            cycle_attempts: &[last.attempt, best.attempt],
        },
    )
    .unwrap()
}

/// The last attempt's row shows the best attempt's time from the same rounds, and the gate's
/// verdict against it is quoted, so a model can tell a real gain from another evaluation's noise.
#[test]
fn an_improve_prompt_quotes_the_best_attempt_timed_with_the_last_one() {
    let task = task();
    let tree = tree();
    let (code, best) = (code(), first_pass());
    // Round 3 ran about as fast as the best attempt: the same, beyond noise.
    let same = [0.200, 0.212, 0.205, 0.230, 0.199, 0.204, 0.221, 0.207];
    let best_samples = [0.206, 0.209, 0.203, 0.219, 0.214, 0.201, 0.208, 0.226];
    let mut last = attempt(
        3,
        AttemptKind::Improve,
        timed_with_best(&same, &best_samples),
    );
    last.note = "improve: the exp uses the magic-constant rounding".into();
    let attempts = vec![best.clone(), last.clone()];
    let answer = format!("```c\n{CODE}```\nThe max pass uses four accumulators.");
    let mut got = None;
    let text = prompts(vec![answer], |p| {
        let c = ctx(&task, &tree, &attempts, None);
        got = improve(p, &c, evaluated(&code, &last), evaluated(&code, &best));
    });
    assert!(text.contains("| workload | status | max abs err | max rel err | candidate | best | parent | baseline |"), "{text}");
    assert!(
        text.contains(
            "| small | passed | 3.00e-8 | 1.00e-6 | 206.0 µs | 208.5 µs | 240.0 µs | 680.0 µs |"
        ),
        "{text}"
    );
    assert!(
        text.contains("Against the best attempt (paired, the acceptance gate): "),
        "{text}"
    );
    assert!(
        text.contains("not distinguishable from it, so it does not count"),
        "{text}"
    );
    assert!(text.contains("What it changed, in its author's words: improve: the exp uses the magic-constant rounding"), "{text}");
    assert!(text.contains("answer only `NOTHING MORE TO TRY`"), "{text}");
    // The candidate's note is the model's own account of the change.
    assert_eq!(
        got.unwrap().note,
        "improve: The max pass uses four accumulators."
    );
    insta::assert_snapshot!(text);
}

/// `NOTHING MORE TO TRY` in an improve round ends the cycle: no candidate, no repair re-ask,
/// and it counts as a usable answer (it does not bring the model closer to being given up).
#[test]
fn the_stop_word_ends_the_cycle_without_a_repair() {
    let task = task();
    let tree = tree();
    let (code, best) = (code(), first_pass());
    let last = attempt(
        3,
        AttemptKind::Improve,
        evaluation(Status::Passed, Some(0.5)),
    );
    let attempts = vec![best.clone(), last.clone()];
    let stop =
        "NOTHING MORE TO TRY: the second exp per element costs more than the stores it saves.";
    let mut outcomes = Vec::new();
    let text = prompts(vec![stop.into(), stop.into(), stop.into()], |p| {
        let c = ctx(&task, &tree, &attempts, None);
        for _ in 0..3 {
            outcomes
                .push(improve(p, &c, evaluated(&code, &last), evaluated(&code, &best)).is_none());
        }
    });
    assert_eq!(
        outcomes,
        [true, true, true],
        "three stops in a row do not give the model up"
    );
    assert_eq!(
        text.matches("===== request").count(),
        3,
        "one request per question: {text}"
    );
    assert!(!text.contains("could not be used"), "{text}");
}

/// The world model's seed line reads in units that suit the numbers and names the baseline's
/// time from the same measurement.
#[test]
fn the_world_model_quotes_the_seed_and_baseline_latency() {
    let task = task();
    let tree = tree();
    let seed = AttemptRecord {
        kind: AttemptKind::Seed,
        ..attempt(0, AttemptKind::Seed, evaluation(Status::Passed, Some(0.24)))
    };
    let text = prompts(vec![String::new(), String::new()], |p| {
        let _ = p.init_world_model(&ctx(&task, &tree, std::slice::from_ref(&seed), None));
    });
    assert!(
        text.contains(
            "Seed latency per workload (median per call): small 240.0 µs (baseline 680.0 µs)."
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "Correct means, on every workload and fresh random inputs: f32: every element within"
        ),
        "{text}"
    );
}
