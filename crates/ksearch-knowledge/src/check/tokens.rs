//! The `token` and `regex` rules: what the candidate writes, found where the rule looks.

use std::collections::HashSet;

use ksearch_core::static_check::Violation;

use super::analysis::Analysis;
use super::rules::violation;
use super::scan::find_token;
use crate::assertion::Rule;

pub(crate) fn token(rule: &Rule, a: &Analysis<'_>, out: &mut Vec<Violation>) {
    let text = a.scope_text(rule);
    for spec in &rule.spec.tokens {
        let hits = find_token(&text, &spec.token);
        if let Some(&first) = hits.first() {
            out.push(violation(
                rule,
                a.line(first),
                &[
                    ("token", spec.token.clone()),
                    ("hint", spec.hint.clone()),
                    ("translation", spec.translation.clone().unwrap_or_default()),
                ],
            ));
        }
    }
}

pub(crate) fn regex_rule(rule: &Rule, a: &Analysis<'_>, out: &mut Vec<Violation>) {
    let Some(re) = &rule.compiled.pattern else {
        return;
    };
    let text = a.scope_text(rule);
    let mut lines_seen = HashSet::new();
    for m in re.find_iter(&text) {
        let line = a.line(m.start());
        if lines_seen.insert(line) {
            // Report what the candidate wrote, not the masked view.
            let written = a.src.get(m.range()).unwrap_or(m.as_str()).trim();
            out.push(violation(rule, line, &[("match", written.to_owned())]));
        }
    }
}
