//! A template space as files: the knobs of a task's kernel template, what each value stands for,
//! the constraints between them, and an optional cost hint. The builtin proposer searches any
//! task that ships one (`[space] file = "space/space.toml"` in `task.toml`), one knob change at
//! a time, as it searches its built-in CPU families.
//!
//! This module holds the format and its validation only; rendering and the evaluation of the
//! expressions (minijinja) live with the proposer.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::location::{FieldPath, FileError, parse_checked};
use crate::task::is_identifier;

/// Version of the space file format.
pub const SPACE_FORMAT: u32 = 1;

/// Most values a knob may list, and most knobs a space may have: a space is walked one knob at
/// a time, and `ksearch space check` renders every point of a small one.
pub const MAX_KNOB_VALUES: usize = 64;
pub const MAX_KNOBS: usize = 32;

/// `space.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpaceSpec {
    pub format: u32,
    /// One line: what the template generates.
    pub summary: String,
    /// The template rendered into a candidate, relative to the space file; its name without
    /// `.j2` is the candidate's file name pattern (`module.py.j2` gives `.py` candidates).
    pub template: String,
    /// Other templates the main one includes, imports or extends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub includes: Vec<String>,
    pub knobs: Vec<KnobSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constraints: Vec<ConstraintSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<CostSpec>,
}

/// A tunable dimension of the template: changing it is one tactic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KnobSpec {
    /// The template variable, e.g. `block_m`.
    pub name: String,
    /// The tactic a change of this knob stands for, e.g. "query tiling".
    pub tactic: String,
    /// The knowledge pattern it instantiates (`knowledge/patterns/<id>.toml`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// What changes in the code and why it can help.
    pub description: String,
    /// 1 (trivial) to 5 (very hard).
    pub difficulty: u8,
    /// Whether neighbouring values are worth trying as refinements (sizes: yes; switches: no).
    #[serde(default)]
    pub ordered: bool,
    /// Its value in the seed point of the space.
    pub seed: i64,
    pub values: Vec<KnobValueSpec>,
    /// What a change of this knob is expected to touch, 0 to 10 on each axis (5 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impacts: Option<ImpactHints>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KnobValueSpec {
    pub value: i64,
    /// Short, for titles: "64-row tiles".
    pub label: String,
    /// Expected speedup of this value over the knob's seed value, before anything is measured
    /// (1 when absent). Used when the space has no `[cost]` expression.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub hint: f64,
}

fn one() -> f64 {
    1.0
}

fn is_one(x: &f64) -> bool {
    *x == 1.0
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImpactHints {
    #[serde(default = "five")]
    pub memory_bandwidth: f64,
    #[serde(default = "five")]
    pub register_pressure: f64,
    #[serde(default = "five")]
    pub compute_fit: f64,
}

fn five() -> f64 {
    5.0
}

/// A condition every point must meet, as an expression over the knobs, the workload's axes
/// (`axes.<name>`) and the hardware's published limits (`hw.on_chip.shared_per_block_bytes`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConstraintSpec {
    pub check: String,
    /// Said when a point fails it.
    pub message: String,
}

/// A cost model: `time` is an expression over the knobs, `axes.<name>` and `hw.*` whose value
/// is proportional to the expected time of one call on that workload (a roofline, say).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostSpec {
    pub time: String,
}

/// A task's space as loaded: the space file and every template it names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskSpace {
    /// The space file, relative to the task directory (`space/space.toml`).
    pub file: String,
    pub spec: SpaceSpec,
    /// Each template by its name in the space file (relative to the space file's directory).
    pub templates: Vec<crate::task::Source>,
}

impl TaskSpace {
    /// A template's text by its name in the space file.
    pub fn template(&self, name: &str) -> Option<&str> {
        self.templates
            .iter()
            .find(|t| t.file == name)
            .map(|t| t.text.as_str())
    }
}

/// A space file that could not be read: where, which field, and what is wrong.
pub type SpaceError = FileError;

/// Parse and validate `space.toml`.
pub fn parse_space(text: &str, file: &str) -> Result<SpaceSpec, SpaceError> {
    parse_checked(text, file, validate)
}

/// A path inside the space's directory: relative, no `..`.
fn is_inner_path(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('/')
        && !p.contains('\\')
        && p.split('/').all(|s| !s.is_empty() && s != "." && s != "..")
}

/// Names a knob may not take: the variables every expression and template already has.
const RESERVED: &[&str] = &["axes", "hw", "knobs", "ksearch_config", "target"];

fn validate(spec: &SpaceSpec) -> Result<(), (FieldPath, String)> {
    let root = FieldPath::root();
    if spec.format != SPACE_FORMAT {
        return Err((
            root.key("format"),
            format!(
                "format {} is not supported (this ksearch reads format {SPACE_FORMAT})",
                spec.format
            ),
        ));
    }
    for (path, file) in std::iter::once((root.key("template"), &spec.template)).chain(
        spec.includes
            .iter()
            .enumerate()
            .map(|(i, f)| (root.key("includes").index(i), f)),
    ) {
        if !is_inner_path(file) {
            return Err((
                path,
                format!("`{file}` must be a relative path inside the space's directory"),
            ));
        }
    }
    if !spec.template.ends_with(".j2") || spec.template.trim_end_matches(".j2").is_empty() {
        return Err((
            root.key("template"),
            format!(
                "`{}` must be named like the candidate it renders plus `.j2` (e.g. `kernel.c.j2`)",
                spec.template
            ),
        ));
    }
    if spec.knobs.is_empty() {
        return Err((root.key("knobs"), "a space needs at least one knob".into()));
    }
    if spec.knobs.len() > MAX_KNOBS {
        return Err((
            root.key("knobs"),
            format!("{} knobs; at most {MAX_KNOBS}", spec.knobs.len()),
        ));
    }
    let mut names = BTreeSet::new();
    for (i, k) in spec.knobs.iter().enumerate() {
        let at = root.key("knobs").index(i);
        if !is_identifier(&k.name) {
            return Err((
                at.key("name"),
                format!("`{}` must be an identifier (letters, digits, `_`)", k.name),
            ));
        }
        if RESERVED.contains(&k.name.as_str()) {
            return Err((
                at.key("name"),
                format!(
                    "`{}` is reserved (every template and expression has it)",
                    k.name
                ),
            ));
        }
        if !names.insert(k.name.as_str()) {
            return Err((at.key("name"), format!("a second knob `{}`", k.name)));
        }
        if k.tactic.trim().is_empty() {
            return Err((at.key("tactic"), "must not be empty".into()));
        }
        if !(1..=5).contains(&k.difficulty) {
            return Err((
                at.key("difficulty"),
                format!("{} is not in 1..=5", k.difficulty),
            ));
        }
        if k.values.len() < 2 || k.values.len() > MAX_KNOB_VALUES {
            return Err((
                at.key("values"),
                format!(
                    "{} value(s); a knob has 2 to {MAX_KNOB_VALUES}",
                    k.values.len()
                ),
            ));
        }
        let mut seen = BTreeSet::new();
        for (j, v) in k.values.iter().enumerate() {
            let vat = at.key("values").index(j);
            if !seen.insert(v.value) {
                return Err((vat.key("value"), format!("{} is listed twice", v.value)));
            }
            if !(v.hint.is_finite() && v.hint > 0.0) {
                return Err((
                    vat.key("hint"),
                    format!("{} is not a positive number", v.hint),
                ));
            }
            if v.label.trim().is_empty() {
                return Err((vat.key("label"), "must not be empty".into()));
            }
        }
        if !seen.contains(&k.seed) {
            return Err((
                at.key("seed"),
                format!("{} is not one of the knob's values", k.seed),
            ));
        }
        if let Some(h) = &k.impacts {
            for (name, x) in [
                ("memory_bandwidth", h.memory_bandwidth),
                ("register_pressure", h.register_pressure),
                ("compute_fit", h.compute_fit),
            ] {
                if !(0.0..=10.0).contains(&x) {
                    return Err((at.key("impacts").key(name), format!("{x} is not in 0..=10")));
                }
            }
        }
    }
    for (i, c) in spec.constraints.iter().enumerate() {
        let at = root.key("constraints").index(i);
        if c.check.trim().is_empty() {
            return Err((at.key("check"), "must not be empty".into()));
        }
        if c.message.trim().is_empty() {
            return Err((at.key("message"), "must not be empty".into()));
        }
    }
    if let Some(c) = &spec.cost
        && c.time.trim().is_empty()
    {
        return Err((root.key("cost").key("time"), "must not be empty".into()));
    }
    Ok(())
}

impl SpaceSpec {
    /// The candidate's file extension: the template's name without `.j2`, after its last dot.
    pub fn extension(&self) -> &str {
        let base = self.template.trim_end_matches(".j2");
        let name = base.rsplit('/').next().unwrap_or(base);
        name.rsplit_once('.').map_or(name, |(_, ext)| ext)
    }

    /// Every file the space reads besides itself: the template and its includes.
    pub fn template_files(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.template.as_str()).chain(self.includes.iter().map(String::as_str))
    }

    /// Number of points in the space, before constraints (saturating).
    pub fn size(&self) -> u128 {
        self.knobs
            .iter()
            .fold(1u128, |n, k| n.saturating_mul(k.values.len() as u128))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
format = 1
summary = "a scaled copy"
template = "kernel.c.j2"

[[knobs]]
name = "unroll"
tactic = "loop unrolling"
pattern = "multiple-accumulators"
description = "Unroll the loop."
difficulty = 1
ordered = true
seed = 1
values = [
  { value = 1, label = "no unrolling" },
  { value = 4, label = "4×", hint = 1.5 },
]

[[constraints]]
check = "unroll <= axes.n"
message = "cannot unroll past the row"
"#;

    #[test]
    fn a_space_parses_and_round_trips() {
        let s = parse_space(GOOD, "space.toml").unwrap();
        assert_eq!(s.extension(), "c");
        assert_eq!(s.size(), 2);
        assert_eq!(s.knobs[0].values[1].hint, 1.5);
        assert_eq!(s.knobs[0].values[0].hint, 1.0);
        let back: SpaceSpec = toml::from_str(&toml::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn errors_name_the_line_and_field() {
        let bad = GOOD.replace("seed = 1", "seed = 3");
        let e = parse_space(&bad, "space.toml").unwrap_err();
        assert_eq!(e.field, "knobs[0].seed");
        assert!(e.message.contains("not one of the knob's values"), "{e}");
        assert_eq!(e.location.map(|l| l.line), Some(13));

        let e = parse_space(&GOOD.replace("\"unroll\"", "\"hw\""), "s.toml").unwrap_err();
        assert_eq!(e.field, "knobs[0].name");
        let e = parse_space(&GOOD.replace("kernel.c.j2", "../x.c.j2"), "s.toml").unwrap_err();
        assert_eq!(e.field, "template");
        let e = parse_space(&GOOD.replace("kernel.c.j2", "kernel.c"), "s.toml").unwrap_err();
        assert_eq!(e.field, "template");
        let e = parse_space(&GOOD.replace("hint = 1.5", "hint = -1"), "s.toml").unwrap_err();
        assert_eq!(e.field, "knobs[0].values[1].hint");
        let e =
            parse_space(&GOOD.replace("difficulty = 1", "difficulty = 9"), "s.toml").unwrap_err();
        assert_eq!(e.field, "knobs[0].difficulty");
        let e = parse_space(&GOOD.replace("format = 1", "format = 2"), "s.toml").unwrap_err();
        assert_eq!(e.field, "format");
        let e = parse_space(&GOOD.replace("summary", "sumary"), "s.toml").unwrap_err();
        assert!(e.message.contains("sumary"), "{e}");
    }
}
