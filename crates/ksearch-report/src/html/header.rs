//! The summary at the top of the page: facts about the run and the headline speedups.

use std::fmt::Write as _;

use ksearch_core::units::time_ms;

use super::text::{esc, truncate};
use crate::data::RunData;
use crate::format::{duration, x};

pub(super) fn section(o: &mut String, data: &RunData) {
    let s = &data.summary;
    let spec = &data.task.spec;
    let _ = write!(
        o,
        "<header id=\"summary\">\n<div>\n<h1>{} <span class=\"desc\">{}</span></h1>\n<dl class=\"facts\">\n",
        esc(&data.task.id),
        esc(&spec.description)
    );
    let mut fact = |k: &str, v: String| {
        let _ = writeln!(o, "<dt>{}</dt><dd>{v}</dd>", esc(k));
    };
    let compiler = data
        .attempt(0)
        .and_then(|a| a.evaluation.as_ref())
        .and_then(|e| e.result.compile.as_ref())
        .map(|c| c.compiler.clone());
    fact(
        "backend / target",
        format!(
            "<code>{}</code>{}{}",
            esc(spec.backend.name()),
            data.config
                .eval
                .target
                .as_ref()
                .map_or_else(String::new, |t| format!(
                    " · target <code>{}</code>",
                    esc(t)
                )),
            compiler.map_or_else(String::new, |c| format!(" · {}", esc(&c)))
        ),
    );
    fact("hardware", esc(&data.config.machine));
    let models = match &data.config.llm {
        Some(l) => format!(
            "reasoning <code>{}</code> · codegen <code>{}</code>{}",
            esc(&l.reasoning),
            esc(&l.codegen),
            l.base_url
                .as_ref()
                .map_or_else(String::new, |u| format!(" · via <code>{}</code>", esc(u)))
        ),
        None => format!(
            "<code>{}</code> for both roles (reasoning and codegen)",
            esc(&data.config.proposer)
        ),
    };
    fact("models", models);
    let budget = data
        .state
        .round_budget
        .map_or_else(String::new, |b| format!(" of {b}"));
    let stop = s.stop_reason.map_or_else(
        || "running or killed".to_owned(),
        |r| {
            serde_json::to_value(r)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        },
    );
    fact(
        "rounds",
        format!(
            "{}{budget} · {} nodes · {} cycles · stopped: {}",
            s.rounds,
            s.nodes,
            s.cycles,
            esc(&stop)
        ),
    );
    fact(
        "time",
        format!(
            "{} wall · {} device-seconds spent evaluating{} · {} session(s)",
            duration(s.wall_s),
            duration(s.eval_s),
            if s.eval_s >= 60.0 {
                format!(" ({:.0} s)", s.eval_s)
            } else {
                String::new()
            },
            data.state.sessions
        ),
    );
    let calls: u64 = s.llm.values().map(|t| t.calls).sum();
    let unpriced: u64 = s.llm.values().map(|t| t.unpriced_calls).sum();
    let empty: u64 = s.llm.values().map(|t| t.empty_answers).sum();
    let truncated: u64 = s.llm.values().map(|t| t.truncated_answers).sum();
    // The manual model's tokens are estimates, and say so.
    let estimated = if s.llm.values().any(|t| t.tokens_estimated) {
        " (estimated)"
    } else {
        ""
    };
    fact(
        "LLM",
        format!(
            "{} tokens{estimated} · ${:.4} · {calls} calls{}{}",
            s.tokens,
            // `+ 0.0` turns a -0.0 sum into 0.0.
            s.cost_usd.max(0.0) + 0.0,
            if unpriced > 0 {
                format!(" ({unpriced} without a price)")
            } else {
                String::new()
            },
            ksearch_run::asked_again(empty, truncated)
        ),
    );
    let best_round = data
        .tree
        .get(s.best.node)
        .and_then(|n| n.solution.as_ref())
        .map_or_else(String::new, |sol| format!(" · round {}", sol.round));
    let baseline = match (&data.task.baseline, &s.baseline_left_out) {
        (Some(_), _) => esc(&s.baseline),
        (None, Some(left_out)) => format!(
            "none here (the task's production baseline, {}, needs {}, which the machine that \
             started the run lacked): speedups \"over the baseline\" in the chart and the tree \
             are over the reference (<code>{}</code>)",
            esc(&left_out.name),
            esc(&left_out.needs),
            esc(&data.task.reference.file)
        ),
        (None, None) => format!(
            "none (the task has no production baseline): speedups \"over the baseline\" \
             in the chart and the tree are over the reference (<code>{}</code>)",
            esc(&data.task.reference.file)
        ),
    };
    fact(
        "best kernel",
        format!(
            "node {} · {}{best_round} · baseline: {baseline}",
            s.best.node,
            esc(&s.best.title),
        ),
    );
    if !s.best.latency_ms.is_empty() {
        let lat: Vec<String> = s
            .best
            .latency_ms
            .iter()
            .map(|(w, v)| {
                let seed = s
                    .seed_latency_ms
                    .get(w)
                    .map_or_else(String::new, |v| format!(" (seed {})", time_ms(*v)));
                format!("{} {}{seed}", esc(w), time_ms(*v))
            })
            .collect();
        fact("best latency", lat.join(" · "));
    }
    // What makes the seed's numbers (and so every speedup over the baseline) less certain.
    let seed_caveats = data
        .attempt(0)
        .and_then(|a| a.evaluation.as_ref())
        .map(|e| e.caveats.as_slice())
        .unwrap_or_default();
    if !seed_caveats.is_empty() {
        let items: Vec<String> = seed_caveats
            .iter()
            .map(|c| format!("<li>{}</li>", esc(c)))
            .collect();
        fact(
            "caveats",
            format!(
                "when the seed was measured:<ul class=\"caveats\">{}</ul>",
                items.concat()
            ),
        );
    }
    o.push_str("</dl>\n</div>\n");
    headline(o, data);
    o.push_str("</header>\n");
}

/// The two headline numbers. With a production baseline, the speedup over it comes first.
/// Without one, the "baseline" is the task's reference, written to be obviously correct rather
/// than fast, so a speedup over it flatters: the speedup over the seed comes first, and the
/// other number says what it is against.
fn headline(o: &mut String, data: &RunData) {
    let s = &data.summary;
    let production = data.task.baseline.is_some();
    let over_baseline = if let Some(b) = &data.task.baseline {
        format!("over the baseline ({})", esc(&truncate(&b.name, 40)))
    } else {
        format!(
            "over the reference ({}), a deliberately simple implementation: {}",
            esc(&data.task.reference.file),
            esc(&ksearch_run::no_baseline_words(
                s.baseline_left_out.as_ref()
            ))
        )
    };
    let vs_baseline = ("best-speedup", x(s.best.speedup), over_baseline);
    let vs_seed = (
        "best-vs-seed",
        x(s.best.speedup_vs_seed),
        "over the seed".to_owned(),
    );
    let (first, second) = if production {
        (vs_baseline, vs_seed)
    } else {
        (vs_seed, vs_baseline)
    };
    let _ = write!(
        o,
        "<div class=\"headline\" data-baseline=\"{}\">",
        if production {
            "production"
        } else {
            "reference"
        }
    );
    for (id, value, what) in [first, second] {
        let _ = write!(
            o,
            "<div class=\"big\" id=\"{id}\">{value}</div><div class=\"sub\">{what}</div>"
        );
    }
    o.push_str("</div>\n");
}
