//! Reading and validating the knowledge files: every file parsed (unknown keys and wrong types
//! are errors with file, line and field), every item checked, every cross-reference resolved.
//! All errors are collected, not just the first.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;

use ksearch_core::location::{FieldPath, FileError, locate, parse_toml};
use thiserror::Error;

use crate::assertion::{Compiled, Rule, RuleFile, RuleKind, RuleSpec, Scope, placeholders_in};
use crate::hardware::{Hardware, LIMIT_FIELDS};
use crate::pattern::Pattern;
use crate::platform::{Language, Platform, Target};
use crate::translation::{Translation, TranslationFile};
use crate::{Knowledge, detect};

/// Why the knowledge could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LoadError {
    #[error("failed to read `{path}`: {message}")]
    Io { path: String, message: String },
    /// Every problem found, each with its file, line and field.
    #[error("{}", ErrorList(.0))]
    Invalid(Vec<FileError>),
}

impl LoadError {
    /// The file errors (empty for IO errors).
    pub fn errors(&self) -> &[FileError] {
        match self {
            LoadError::Invalid(errors) => errors,
            LoadError::Io { .. } => &[],
        }
    }
}

struct ErrorList<'a>(&'a [FileError]);

impl fmt::Display for ErrorList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

/// Where an item was read from, to point errors at it.
#[derive(Debug, Clone, Copy)]
struct Origin<'a> {
    file: &'a str,
    text: &'a str,
}

impl Origin<'_> {
    fn error(&self, path: &FieldPath, message: impl Into<String>) -> FileError {
        FileError {
            file: self.file.to_owned(),
            location: locate(self.text, path),
            field: path.to_string(),
            message: message.into(),
        }
    }
}

fn field(path: &[&str]) -> FieldPath {
    path.iter().fold(FieldPath::root(), |p, k| p.key(k))
}

fn is_id(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A file as given: its path relative to the knowledge root (`hardware/h200.toml`), the name
/// errors use, and its text.
pub(crate) struct SourceFile {
    pub(crate) rel: String,
    pub(crate) display: String,
    pub(crate) text: String,
}

/// Every `.toml` file under `dir`, sorted.
pub(crate) fn read_dir(dir: &Path) -> Result<Vec<SourceFile>, LoadError> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<SourceFile>) -> Result<(), LoadError> {
        let io = |e: std::io::Error| LoadError::Io {
            path: dir.display().to_string(),
            message: e.to_string(),
        };
        // std's, not fs-err's: `LoadError::Io` names the directory already.
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .map_err(io)?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .map_err(io)?;
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(root, &p, out)?;
            } else if p.extension().is_some_and(|e| e == "toml") {
                let text =
                    ksearch_tasks::read_text(&p, ksearch_tasks::MAX_TOML_BYTES, "a knowledge file")
                        .map_err(|e| LoadError::Io {
                            path: p.display().to_string(),
                            message: crate::cli::error_chain(&e),
                        })?;
                let rel = p
                    .strip_prefix(root)
                    .unwrap_or(&p)
                    .to_string_lossy()
                    .replace('\\', "/");
                out.push(SourceFile {
                    rel,
                    display: p.display().to_string(),
                    text,
                });
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out)?;
    Ok(out)
}

struct Loader<'a> {
    errors: Vec<FileError>,
    hardware: Vec<(Hardware, Origin<'a>)>,
    translations: Vec<(Translation, Origin<'a>, usize)>,
    patterns: Vec<(Pattern, Origin<'a>)>,
    rules: Vec<(RuleSpec, Origin<'a>, usize)>,
}

pub(crate) fn load(files: &[SourceFile]) -> Result<Knowledge, LoadError> {
    let mut l = Loader {
        errors: Vec::new(),
        hardware: Vec::new(),
        translations: Vec::new(),
        patterns: Vec::new(),
        rules: Vec::new(),
    };
    for f in files {
        let origin = Origin {
            file: &f.display,
            text: &f.text,
        };
        let (dir, name) = f.rel.split_once('/').unwrap_or(("", &f.rel));
        let stem = name.strip_suffix(".toml").unwrap_or(name);
        match dir {
            "hardware" => match parse_toml::<Hardware>(&f.text, &f.display) {
                Ok(hw) => {
                    if hw.id != stem {
                        l.errors.push(origin.error(
                            &field(&["id"]),
                            format!("must be the file's name, `{stem}`"),
                        ));
                    }
                    l.hardware.push((hw, origin));
                }
                Err(e) => l.errors.push(e),
            },
            "translation" => match parse_toml::<TranslationFile>(&f.text, &f.display) {
                Ok(t) => {
                    for (i, entry) in t.entries.into_iter().enumerate() {
                        l.translations.push((entry, origin, i));
                    }
                }
                Err(e) => l.errors.push(e),
            },
            "patterns" => match parse_toml::<Pattern>(&f.text, &f.display) {
                Ok(p) => {
                    if p.id != stem {
                        l.errors.push(origin.error(
                            &field(&["id"]),
                            format!("must be the file's name, `{stem}`"),
                        ));
                    }
                    l.patterns.push((p, origin));
                }
                Err(e) => l.errors.push(e),
            },
            "assertions" => match parse_toml::<RuleFile>(&f.text, &f.display) {
                Ok(r) => {
                    for (i, rule) in r.rules.into_iter().enumerate() {
                        l.rules.push((rule, origin, i));
                    }
                }
                Err(e) => l.errors.push(e),
            },
            _ => l.errors.push(FileError {
                file: f.display.clone(),
                location: None,
                field: String::new(),
                message: "knowledge files live in hardware/, translation/, patterns/ or \
                          assertions/"
                    .into(),
            }),
        }
    }
    l.check_hardware();
    let translation_ids = l.check_translations();
    l.check_patterns(&translation_ids);
    let rules = l.check_rules(&translation_ids);
    if !l.errors.is_empty() {
        return Err(LoadError::Invalid(l.errors));
    }
    let mut hardware: Vec<Hardware> = l.hardware.into_iter().map(|(h, _)| h).collect();
    hardware.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(Knowledge {
        hardware,
        translations: l.translations.into_iter().map(|(t, _, _)| t).collect(),
        patterns: l.patterns.into_iter().map(|(p, _)| p).collect(),
        rules,
    })
}

fn importance_ok(v: u8) -> bool {
    (1..=3).contains(&v)
}

impl Loader<'_> {
    fn check_hardware(&mut self) {
        let mut alias_owner: HashMap<String, String> = HashMap::new();
        for (hw, o) in &self.hardware {
            let mut err = |path: FieldPath, msg: String| self.errors.push(o.error(&path, msg));
            if !is_id(&hw.id) {
                err(
                    field(&["id"]),
                    "ids are lowercase letters, digits and `-`".into(),
                );
            }
            for (path, fact, _) in hw.facts() {
                if let Some((sub, msg)) = fact.problem() {
                    let mut p = FieldPath::root();
                    for k in path.split('.') {
                        p = p.key(k);
                    }
                    err(p.key(sub), msg);
                }
            }
            match hw.target {
                Target::Cuda | Target::Metal => {
                    for (name, present) in [
                        ("compute", hw.compute.is_some()),
                        ("memory", hw.memory.is_some()),
                        ("on_chip", hw.on_chip.is_some()),
                        ("matrix", hw.matrix.is_some()),
                    ] {
                        if !present {
                            err(field(&[name]), format!("a GPU needs a `[{name}]` table"));
                        }
                    }
                    if hw.cpu.is_some() {
                        err(field(&["cpu"]), "`[cpu]` is for CPU hosts only".into());
                    }
                }
                Target::Cpu => match &hw.cpu {
                    None => err(field(&["cpu"]), "a CPU host needs a `[cpu]` table".into()),
                    Some(cpu) => {
                        for (name, fact, _) in cpu.facts() {
                            if fact.value().is_none() {
                                err(
                                    field(&["cpu", name]),
                                    "the cost model needs a number here".into(),
                                );
                            }
                        }
                    }
                },
            }
            let mut seen = HashMap::new();
            for (i, p) in hw.pitfalls.iter().enumerate() {
                let path = FieldPath::root().key("pitfall").index(i);
                if !importance_ok(p.importance) {
                    err(path.key("importance"), "must be 1, 2 or 3".into());
                }
                if seen.insert(p.id.clone(), i).is_some() {
                    err(path.key("id"), format!("duplicate pitfall id `{}`", p.id));
                }
                if p.source.trim().is_empty() {
                    err(path.key("source"), "every pitfall names its source".into());
                }
            }
            for (i, alias) in hw.aliases.iter().enumerate() {
                let key = detect::normalize(alias).join(" ");
                if key.is_empty() {
                    err(
                        FieldPath::root().key("aliases").index(i),
                        "empty alias".into(),
                    );
                    continue;
                }
                if let Some(owner) = alias_owner.insert(key, hw.id.clone())
                    && owner != hw.id
                {
                    err(
                        FieldPath::root().key("aliases").index(i),
                        format!("alias `{alias}` also names `{owner}`"),
                    );
                }
            }
        }
    }

    fn check_translations(&mut self) -> BTreeMap<String, ()> {
        let mut ids: HashMap<String, (String, usize)> = HashMap::new();
        for (t, o, i) in &self.translations {
            let at = |k: &str| FieldPath::root().key("entry").index(*i).key(k);
            if !is_id(&t.id) {
                self.errors
                    .push(o.error(&at("id"), "ids are lowercase letters, digits and `-`"));
            }
            if let Some((file, _)) = ids.get(&t.id) {
                self.errors.push(o.error(
                    &at("id"),
                    format!("duplicate translation id `{}` (also in {file})", t.id),
                ));
            } else {
                ids.insert(t.id.clone(), (o.file.to_owned(), *i));
            }
            if !importance_ok(t.importance) {
                self.errors
                    .push(o.error(&at("importance"), "must be 1, 2 or 3"));
            }
            for (name, value) in [
                ("concept", &t.concept),
                ("cuda", &t.cuda),
                ("metal", &t.metal),
                ("mlx", &t.mlx),
                ("limits", &t.limits),
                ("source", &t.source),
            ] {
                if value.trim().is_empty() {
                    self.errors.push(o.error(&at(name), "must not be empty"));
                }
            }
        }
        for (t, o, i) in &self.translations {
            for (j, p) in t.applies_to.iter().enumerate() {
                if let Err(e) = p.parse::<Platform>() {
                    self.errors.push(
                        o.error(
                            &FieldPath::root()
                                .key("entry")
                                .index(*i)
                                .key("applies_to")
                                .index(j),
                            e.to_string(),
                        ),
                    );
                }
            }
            for (j, other) in t.see_also.iter().enumerate() {
                if !ids.contains_key(other) {
                    self.errors.push(
                        o.error(
                            &FieldPath::root()
                                .key("entry")
                                .index(*i)
                                .key("see_also")
                                .index(j),
                            format!("unknown translation id `{other}`"),
                        ),
                    );
                }
            }
        }
        ids.into_keys().map(|k| (k, ())).collect()
    }

    fn check_patterns(&mut self, translation_ids: &BTreeMap<String, ()>) {
        let mut ids: HashMap<String, String> = HashMap::new();
        for (p, o) in &self.patterns {
            let mut err = |path: FieldPath, msg: String| self.errors.push(o.error(&path, msg));
            if !is_id(&p.id) {
                err(
                    field(&["id"]),
                    "ids are lowercase letters, digits and `-`".into(),
                );
            }
            if let Some(file) = ids.insert(p.id.clone(), o.file.to_owned()) {
                err(
                    field(&["id"]),
                    format!("duplicate pattern id `{}` (also in {file})", p.id),
                );
            }
            if p.classes.is_empty() {
                err(field(&["classes"]), "name at least one kernel class".into());
            }
            if !importance_ok(p.importance) {
                err(field(&["importance"]), "must be 1, 2 or 3".into());
            }
            for (axis, impact) in [
                ("memory_bandwidth", &p.impact.memory_bandwidth),
                ("register_pressure", &p.impact.register_pressure),
                ("compute_fit", &p.impact.compute_fit),
            ] {
                if !(0.0..=10.0).contains(&impact.rating) {
                    err(
                        field(&["impact", axis, "rating"]),
                        "must be between 0 and 10".into(),
                    );
                }
            }
            if p.sketch.is_empty() {
                err(
                    field(&["sketch"]),
                    "give a sketch for at least one backend (c, cuda, metal, mlx)".into(),
                );
            }
            if p.source.trim().is_empty() {
                err(field(&["source"]), "must not be empty".into());
            }
            for (j, t) in p.translations.iter().enumerate() {
                if !translation_ids.contains_key(t) {
                    err(
                        FieldPath::root().key("translations").index(j),
                        format!("unknown translation id `{t}`"),
                    );
                }
            }
        }
    }

    fn check_rules(&mut self, translation_ids: &BTreeMap<String, ()>) -> Vec<Rule> {
        let mut ids: HashMap<String, String> = HashMap::new();
        let mut out = Vec::new();
        for (spec, o, i) in &self.rules {
            let before = self.errors.len();
            let at = |k: &str| FieldPath::root().key("rule").index(*i).key(k);
            let mut err = |k: &str, msg: String| self.errors.push(o.error(&at(k), msg));
            if !is_id(&spec.id) {
                err("id", "ids are lowercase letters, digits and `-`".into());
            }
            if let Some(file) = ids.insert(spec.id.clone(), o.file.to_owned()) {
                err(
                    "id",
                    format!("duplicate rule id `{}` (also in {file})", spec.id),
                );
            }
            let mut platforms = Vec::new();
            for (j, name) in spec.applies_to.iter().enumerate() {
                match name.parse::<Platform>() {
                    Ok(p) => platforms.push(p),
                    Err(e) => self.errors.push(
                        o.error(
                            &FieldPath::root()
                                .key("rule")
                                .index(*i)
                                .key("applies_to")
                                .index(j),
                            e.to_string(),
                        ),
                    ),
                }
            }
            let mut err = |k: &str, msg: String| self.errors.push(o.error(&at(k), msg));
            if spec.applies_to.is_empty() {
                err("applies_to", "name at least one platform".into());
            }
            let all_mlx = platforms.iter().all(|p| p.language == Language::Mlx);
            let scope = spec.scope.unwrap_or(Scope::Kernel);
            if matches!(scope, Scope::Python | Scope::Function) && !all_mlx {
                err(
                    "scope",
                    "`python` and `function` scopes read MLX (Python) candidates only".into(),
                );
            }
            if (scope == Scope::Function) != spec.function.is_some() {
                err(
                    "function",
                    "give `function` exactly when the scope is `function`".into(),
                );
            }
            let allowed = spec.kind.placeholders();
            for name in placeholders_in(&spec.message) {
                if !allowed.contains(&name) {
                    err(
                        "message",
                        format!(
                            "`{{{name}}}` is not filled by `{}` rules (they fill: {})",
                            spec.kind.name(),
                            allowed.join(", ")
                        ),
                    );
                }
            }
            if spec.summary.trim().is_empty() {
                err("summary", "must not be empty".into());
            }
            // Which parameters each kind reads; the others must be absent.
            let used: &[&str] = match spec.kind {
                RuleKind::Token => &["tokens"],
                RuleKind::Regex => &["pattern"],
                RuleKind::ThreadgroupMemory => &["qualifiers", "limit", "fallback_limit"],
                RuleKind::ThreadgroupSize => &["limit", "fallback_limit"],
                RuleKind::BarrierInBranch | RuleKind::ExitBeforeBarrier => {
                    &["barriers", "thread_vars"]
                }
                RuleKind::MlxGrid => &[],
            };
            let present = [
                ("tokens", !spec.tokens.is_empty()),
                ("pattern", spec.pattern.is_some()),
                ("qualifiers", !spec.qualifiers.is_empty()),
                ("limit", spec.limit.is_some()),
                ("fallback_limit", spec.fallback_limit.is_some()),
                ("barriers", !spec.barriers.is_empty()),
                ("thread_vars", !spec.thread_vars.is_empty()),
            ];
            for (name, is_present) in present {
                if used.contains(&name) && !is_present {
                    err(name, format!("`{}` rules need `{name}`", spec.kind.name()));
                }
                if !used.contains(&name) && is_present {
                    err(
                        name,
                        format!("`{}` rules do not use `{name}`", spec.kind.name()),
                    );
                }
            }
            if let Some(limit) = &spec.limit
                && !LIMIT_FIELDS.contains(&limit.as_str())
            {
                err(
                    "limit",
                    format!(
                        "unknown hardware limit `{limit}` (known: {})",
                        LIMIT_FIELDS.join(", ")
                    ),
                );
            }
            if spec.kind == RuleKind::MlxGrid && !all_mlx {
                err("applies_to", "`mlx-grid` rules apply to MLX only".into());
            }
            let compiled = match Compiled::new(spec) {
                Ok(c) => c,
                Err(e) => {
                    err("pattern", e);
                    Compiled::default()
                }
            };
            for (j, t) in spec.tokens.iter().enumerate() {
                let tp = FieldPath::root()
                    .key("rule")
                    .index(*i)
                    .key("tokens")
                    .index(j);
                if t.token.trim().is_empty() {
                    self.errors
                        .push(o.error(&tp.key("token"), "must not be empty"));
                }
                if let Some(tr) = &t.translation
                    && !translation_ids.contains_key(tr)
                {
                    self.errors.push(o.error(
                        &tp.key("translation"),
                        format!("unknown translation id `{tr}`"),
                    ));
                }
            }
            if self.errors.len() == before {
                out.push(Rule {
                    spec: spec.clone(),
                    platforms,
                    compiled,
                });
            }
        }
        out
    }
}
