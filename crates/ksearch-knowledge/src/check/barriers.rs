//! The `barrier-in-branch` and `exit-before-barrier` rules: a barrier that not every thread of
//! the group reaches.

use std::collections::HashSet;
use std::ops::Range;

use ksearch_core::static_check::Violation;

use super::analysis::Analysis;
use super::flow;
use super::rules::{squash, violation};
use super::scan::find_token;
use crate::assertion::Rule;

/// Offsets of calls to any of `names` in `code[range]`.
fn calls(code: &str, range: Range<usize>, names: &[String]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for name in names {
        for at in find_token(&code[range.clone()], name) {
            let after = &code[range.start + at + name.len()..range.end];
            if after.trim_start().starts_with('(') {
                out.push((range.start + at, name.clone()));
            }
        }
    }
    out.sort();
    out
}

/// A unit's control statements, and the variables that depend on the thread.
fn flow_of(rule: &Rule, code: &str, unit: Range<usize>) -> (Vec<flow::Control>, HashSet<String>) {
    let controls = flow::controls(code, unit.clone());
    let tainted = flow::thread_dependent(
        code,
        unit,
        &rule.spec.thread_vars,
        rule.compiled.thread_params.as_ref(),
    );
    (controls, tainted)
}

pub(crate) fn barrier_in_branch(rule: &Rule, a: &Analysis<'_>, out: &mut Vec<Violation>) {
    let code = &a.kernel;
    for unit in &a.units {
        let barriers = calls(code, unit.clone(), &rule.spec.barriers);
        if barriers.is_empty() {
            continue;
        }
        let (controls, tainted) = flow_of(rule, code, unit.clone());
        for (at, name) in barriers {
            // The innermost enclosing control whose condition depends on the thread.
            let hit = controls
                .iter()
                .filter(|c| c.body.contains(&at))
                .filter_map(|c| flow::mentions(&code[c.cond.clone()], &tainted).map(|v| (c, v)))
                .min_by_key(|(c, _)| c.body.len());
            if let Some((c, var)) = hit {
                let cond = a.src.get(c.cond.clone()).unwrap_or("").trim();
                out.push(violation(
                    rule,
                    a.line(at),
                    &[
                        ("barrier", name),
                        ("condition", format!("{} ({})", c.keyword, squash(cond))),
                        ("condition_line", a.line(c.at).to_string()),
                        ("var", var),
                    ],
                ));
            }
        }
    }
}

pub(crate) fn exit_before_barrier(rule: &Rule, a: &Analysis<'_>, out: &mut Vec<Violation>) {
    let code = &a.kernel;
    for unit in &a.units {
        let barriers = calls(code, unit.clone(), &rule.spec.barriers);
        let Some((last_barrier, barrier)) = barriers.last().cloned() else {
            continue;
        };
        let (controls, tainted) = flow_of(rule, code, unit.clone());
        for ret in find_token(&code[unit.clone()], "return") {
            let at = unit.start + ret;
            if at > last_barrier {
                continue;
            }
            let hit = controls
                .iter()
                .filter(|c| c.body.contains(&at) && c.keyword != "for" && c.keyword != "while")
                .filter_map(|c| flow::mentions(&code[c.cond.clone()], &tainted).map(|v| (c, v)))
                .min_by_key(|(c, _)| c.body.len());
            if let Some((c, var)) = hit {
                let cond = a.src.get(c.cond.clone()).unwrap_or("").trim();
                let next_barrier = barriers
                    .iter()
                    .find(|(b, _)| *b > at)
                    .map_or(last_barrier, |(b, _)| *b);
                out.push(violation(
                    rule,
                    a.line(at),
                    &[
                        ("barrier", barrier.clone()),
                        ("barrier_line", a.line(next_barrier).to_string()),
                        ("condition", format!("{} ({})", c.keyword, squash(cond))),
                        ("var", var),
                    ],
                ));
            }
        }
    }
}
