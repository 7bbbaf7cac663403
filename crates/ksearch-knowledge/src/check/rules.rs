//! Running the rules: each rule goes to its kind's check, and what the kinds share (the limit a
//! rule checks against, the violation it reports).

use ksearch_core::static_check::Violation;

use super::analysis::Analysis;
use super::barriers::{barrier_in_branch, exit_before_barrier};
use super::mlx_grid::mlx_grid;
use super::threadgroup_memory::threadgroup_memory;
use super::threadgroup_size::threadgroup_size;
use super::tokens::{regex_rule, token};
use crate::assertion::{Rule, RuleKind, fill};
use crate::hardware::Hardware;
use crate::platform::Platform;

/// Most violations one rule reports; the proposer needs the first few, not a flood.
const MAX_PER_RULE: usize = 5;

pub(crate) fn check<'a>(
    rules: impl Iterator<Item = &'a Rule>,
    source: &str,
    platform: Platform,
    hardware: Option<&Hardware>,
) -> Vec<Violation> {
    let a = Analysis::new(source, platform);
    let mut out = Vec::new();
    for rule in rules {
        let mut found = Vec::new();
        match rule.spec.kind {
            RuleKind::Token => token(rule, &a, &mut found),
            RuleKind::Regex => regex_rule(rule, &a, &mut found),
            RuleKind::ThreadgroupMemory => threadgroup_memory(rule, &a, hardware, &mut found),
            RuleKind::ThreadgroupSize => threadgroup_size(rule, &a, hardware, &mut found),
            RuleKind::BarrierInBranch => barrier_in_branch(rule, &a, &mut found),
            RuleKind::ExitBeforeBarrier => exit_before_barrier(rule, &a, &mut found),
            RuleKind::MlxGrid => mlx_grid(rule, &a, &mut found),
        }
        found.truncate(MAX_PER_RULE);
        out.extend(found);
    }
    out.sort_by_key(|v| v.line.unwrap_or(usize::MAX));
    out
}

pub(crate) fn violation(rule: &Rule, line: usize, values: &[(&str, String)]) -> Violation {
    Violation {
        rule: rule.spec.id.clone(),
        line: Some(line),
        message: fill(&rule.spec.message, values),
    }
}

/// The limit a rule checks against, and where it comes from.
pub(crate) fn limit(rule: &Rule, hardware: Option<&Hardware>) -> Option<(u64, String)> {
    let field = rule.spec.limit.as_deref()?;
    if let Some(hw) = hardware
        && let Some(v) = hw.limit(field)
    {
        return Some((v as u64, format!("{} (`{field}`)", hw.name)));
    }
    rule.spec.fallback_limit.map(|v| {
        (
            v,
            match hardware {
                Some(hw) => format!(
                    "the default for this platform ({} does not publish `{field}`)",
                    hw.name
                ),
                None => "the default for this platform (no hardware given)".to_owned(),
            },
        )
    })
}

/// One line, single spaces.
pub(crate) fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
