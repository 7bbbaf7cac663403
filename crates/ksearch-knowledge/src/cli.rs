//! What `ksearch knowledge …` prints, as functions that return text and outcomes as data, so
//! the binary's command module stays a thin shell and the logic is tested here. The binary
//! turns them into its exit codes: a [`CliError`] (an unreadable file, an unknown topic,
//! backend, target or device) is the user's input; `check`'s violations are a failed check.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;
use thiserror::Error;

use crate::detect::Detection;
use crate::hardware::Hardware;
use crate::platform::{Language, Platform, Target};
use crate::render::hardware_block;
use crate::{Knowledge, Violation};

/// A usage or input error: what the user gave is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CliError {
    #[error("nothing in the knowledge base is called `{topic}`{}", suggest(.suggestions))]
    UnknownTopic {
        topic: String,
        suggestions: Vec<String>,
    },
    #[error("no hardware file matches `{name}` (known: {})", .known.join(", "))]
    UnknownHardware { name: String, known: Vec<String> },
    #[error("failed to read `{path}`: {message}")]
    Unreadable { path: String, message: String },
    #[error("{0}")]
    Usage(String),
}

fn suggest(s: &[String]) -> String {
    if s.is_empty() {
        " (`ksearch knowledge list` shows everything)".to_owned()
    } else {
        format!(" (did you mean: {}?)", s.join(", "))
    }
}

/// Text of a command that succeeded, and whether `check` found violations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutput {
    pub stdout: String,
    pub violations: bool,
}

#[derive(Serialize)]
struct ListJson<'a> {
    hardware: Vec<HardwareRow<'a>>,
    translations: Vec<TranslationRow<'a>>,
    patterns: Vec<PatternRow<'a>>,
    rules: Vec<RuleRow<'a>>,
}

#[derive(Serialize)]
struct HardwareRow<'a> {
    id: &'a str,
    name: &'a str,
    vendor: crate::hardware::Vendor,
    arch: &'a str,
    target: Target,
}

#[derive(Serialize)]
struct TranslationRow<'a> {
    id: &'a str,
    concept: &'a str,
}

#[derive(Serialize)]
struct PatternRow<'a> {
    id: &'a str,
    title: &'a str,
    classes: Vec<&'static str>,
}

#[derive(Serialize)]
struct RuleRow<'a> {
    id: &'a str,
    kind: &'static str,
    applies_to: &'a [String],
    summary: &'a str,
}

fn hardware_row(h: &Hardware) -> HardwareRow<'_> {
    HardwareRow {
        id: &h.id,
        name: &h.name,
        vendor: h.vendor,
        arch: &h.arch,
        target: h.target,
    }
}

/// `ksearch knowledge list [--json]`.
pub fn list(k: &Knowledge, json: bool) -> String {
    if json {
        let value = ListJson {
            hardware: k.hardware.iter().map(hardware_row).collect(),
            translations: k
                .translations
                .iter()
                .map(|t| TranslationRow {
                    id: &t.id,
                    concept: &t.concept,
                })
                .collect(),
            patterns: k
                .patterns
                .iter()
                .map(|p| PatternRow {
                    id: &p.id,
                    title: &p.title,
                    classes: p.classes.iter().map(|c| c.name()).collect(),
                })
                .collect(),
            rules: k
                .rules
                .iter()
                .map(|r| RuleRow {
                    id: r.id(),
                    kind: r.spec.kind.name(),
                    applies_to: &r.spec.applies_to,
                    summary: &r.spec.summary,
                })
                .collect(),
        };
        return to_json(&value);
    }
    let mut s = String::new();
    let width = k
        .hardware
        .iter()
        .map(|h| h.id.len())
        .chain(k.translations.iter().map(|t| t.id.len()))
        .chain(k.patterns.iter().map(|p| p.id.len()))
        .chain(k.rules.iter().map(|r| r.id().len()))
        .max()
        .unwrap_or(8);
    let _ = writeln!(s, "hardware ({}):", k.hardware.len());
    for h in &k.hardware {
        let _ = writeln!(s, "  {:width$}  {}", h.id, h.name);
    }
    let _ = writeln!(s, "\ntranslation ({}):", k.translations.len());
    for t in &k.translations {
        let _ = writeln!(s, "  {:width$}  {}", t.id, t.concept);
    }
    let _ = writeln!(s, "\npatterns ({}):", k.patterns.len());
    for p in &k.patterns {
        let classes: Vec<&str> = p.classes.iter().map(|c| c.name()).collect();
        let _ = writeln!(s, "  {:width$}  {} [{}]", p.id, p.title, classes.join(", "));
    }
    let _ = writeln!(s, "\nassertions ({}):", k.rules.len());
    for r in &k.rules {
        let _ = writeln!(
            s,
            "  {:width$}  {} [{}]",
            r.id(),
            r.spec.summary,
            r.spec.applies_to.join(", ")
        );
    }
    s
}

fn to_json<T: Serialize>(value: &T) -> String {
    let mut s =
        serde_json::to_string_pretty(value).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}

/// Ids that contain the topic or that it contains, for "did you mean".
fn suggestions(k: &Knowledge, topic: &str) -> Vec<String> {
    let t = topic
        .to_ascii_lowercase()
        .trim_start_matches('_')
        .to_owned();
    let ids = k
        .translations
        .iter()
        .map(|x| (x.id.as_str(), x.aliases.as_slice()))
        .chain(k.patterns.iter().map(|p| (p.id.as_str(), &[][..])))
        .chain(k.rules.iter().map(|r| (r.id(), &[][..])))
        .chain(
            k.hardware
                .iter()
                .map(|h| (h.id.as_str(), h.aliases.as_slice())),
        );
    let mut out: Vec<String> = ids
        .filter(|(id, aliases)| {
            let hit = |s: &str| {
                let s = s.to_ascii_lowercase();
                !t.is_empty() && (s.contains(&t) || (t.len() > 3 && t.contains(&s)))
            };
            hit(id) || aliases.iter().any(|a| hit(a))
        })
        .map(|(id, _)| id.to_owned())
        .collect();
    out.dedup();
    // Ids that contain the topic first (`syncthread` → `syncthreads`).
    out.sort_by_key(|id| !id.to_ascii_lowercase().contains(&t));
    out.truncate(6);
    out
}

/// `ksearch knowledge show TOPIC [--to metal|mlx|cuda]`: a translation entry (by id or alias),
/// a pattern, a rule or a device.
pub fn show(k: &Knowledge, topic: &str, to: Option<&str>) -> Result<String, CliError> {
    let to = to
        .map(str::parse::<Language>)
        .transpose()
        .map_err(|e| CliError::Usage(format!("--to: {e}")))?;
    if to == Some(Language::C) {
        return Err(CliError::Usage(
            "--to takes metal, mlx or cuda (there is no translation to C)".into(),
        ));
    }
    if let Some(t) = k.translation(topic) {
        return Ok(show_translation(t, to));
    }
    if let Some(p) = k.pattern(topic) {
        return Ok(show_pattern(p, to));
    }
    if let Some(r) = k.rule(topic) {
        let mut s = format!("{} — {} rule\n", r.id(), r.spec.kind.name());
        let _ = writeln!(s, "Applies to: {}", r.spec.applies_to.join(", "));
        let _ = writeln!(s, "{}", r.spec.summary.trim());
        let _ = writeln!(s, "Message: {}", r.spec.message.trim());
        if let Some(src) = &r.spec.source {
            let _ = writeln!(s, "Source: {}", src.trim());
        }
        return Ok(s);
    }
    if let Some(h) = k.find_hardware(topic) {
        return Ok(hardware_block(h, true));
    }
    Err(CliError::UnknownTopic {
        topic: topic.to_owned(),
        suggestions: suggestions(k, topic),
    })
}

fn show_translation(t: &crate::Translation, to: Option<Language>) -> String {
    let mut s = format!("{} — {}\n", t.id, t.concept.trim());
    // `--to cuda` reads the entry backwards: from Metal to CUDA.
    let sides: Vec<(&str, &str, &str)> = match to {
        None => vec![
            ("CUDA", &t.cuda, &t.example.cuda),
            ("Metal", &t.metal, &t.example.metal),
            ("MLX", &t.mlx, &t.example.mlx),
        ],
        Some(Language::Metal) => vec![
            ("CUDA", &t.cuda, &t.example.cuda),
            ("Metal", &t.metal, &t.example.metal),
        ],
        Some(Language::Mlx) => vec![
            ("CUDA", &t.cuda, &t.example.cuda),
            ("MLX", &t.mlx, &t.example.mlx),
        ],
        Some(_) => vec![
            ("Metal", &t.metal, &t.example.metal),
            ("CUDA", &t.cuda, &t.example.cuda),
        ],
    };
    for (name, text, _) in &sides {
        let _ = writeln!(s, "{:6} {}", format!("{name}:"), text.trim());
    }
    let _ = writeln!(s, "Limits: {}", t.limits.trim());
    if !t.pitfalls.is_empty() {
        s.push_str("Pitfalls:\n");
        for p in &t.pitfalls {
            let _ = writeln!(s, "  - {}", p.trim());
        }
    }
    s.push_str("Example:\n");
    for (name, _, example) in &sides {
        let _ = writeln!(s, "  {:6} {}", format!("{name}:"), example.trim());
    }
    if !t.see_also.is_empty() {
        let _ = writeln!(s, "See also: {}", t.see_also.join(", "));
    }
    let _ = writeln!(s, "Source: {}", t.source.trim());
    s
}

fn show_pattern(p: &crate::Pattern, to: Option<Language>) -> String {
    let classes: Vec<&str> = p.classes.iter().map(|c| c.name()).collect();
    let mut s = format!("{} — {} [{}]\n", p.id, p.title, classes.join(", "));
    let _ = writeln!(s, "{}", p.summary.trim());
    s.push_str("Expected effect:\n");
    for (axis, i) in [
        ("memory bandwidth", &p.impact.memory_bandwidth),
        ("register pressure", &p.impact.register_pressure),
        ("compute fit", &p.impact.compute_fit),
    ] {
        let _ = writeln!(
            s,
            "  {axis}: {}/10, {} risk — {}",
            i.rating,
            i.risk.as_str(),
            i.notes.trim()
        );
    }
    if !p.preconditions.is_empty() {
        s.push_str("Preconditions:\n");
        for c in &p.preconditions {
            let _ = writeln!(s, "  - {}", c.trim());
        }
    }
    let languages: Vec<Language> = match to {
        Some(l) => vec![l],
        None => Language::ALL.to_vec(),
    };
    for l in languages {
        if let Some(sketch) = p.sketch.for_language(l) {
            let _ = writeln!(s, "Sketch ({l}):");
            for line in sketch.trim_end().lines() {
                let _ = writeln!(s, "    {line}");
            }
        }
    }
    if !p.translations.is_empty() {
        let _ = writeln!(s, "Translation entries: {}", p.translations.join(", "));
    }
    let _ = writeln!(s, "Source: {}", p.source.trim());
    s
}

#[derive(Serialize)]
struct HardwareListJson<'a> {
    hardware: Vec<HardwareRow<'a>>,
    detected: Option<&'a Detection>,
}

/// `ksearch knowledge hardware [NAME] [--json]`: the list (with what detection found), or one
/// device with the provenance of every number.
pub fn hardware(
    k: &Knowledge,
    name: Option<&str>,
    json: bool,
    detected: Option<&Detection>,
) -> Result<String, CliError> {
    let Some(name) = name else {
        if json {
            return Ok(to_json(&HardwareListJson {
                hardware: k.hardware.iter().map(hardware_row).collect(),
                detected,
            }));
        }
        let width = k.hardware.iter().map(|h| h.id.len()).max().unwrap_or(4);
        let mut s = String::new();
        for h in &k.hardware {
            let _ = writeln!(s, "{:width$}  {:6}  {}", h.id, h.target.name(), h.name);
        }
        match detected {
            Some(d) => {
                let _ = writeln!(
                    s,
                    "\ndetected: {} (via `{}`) → {}",
                    d.name,
                    d.via,
                    d.hardware.as_deref().unwrap_or("no matching file")
                );
            }
            None => s.push_str("\ndetected: no GPU found\n"),
        }
        return Ok(s);
    };
    let h = resolve_hardware(k, name)?;
    if json {
        #[derive(Serialize)]
        struct One<'a> {
            #[serde(flatten)]
            hardware: &'a Hardware,
            fp32_ridge_point_flop_per_byte: Option<f64>,
        }
        return Ok(to_json(&One {
            hardware: h,
            fp32_ridge_point_flop_per_byte: h.fp32_ridge_point(),
        }));
    }
    Ok(hardware_block(h, true))
}

/// A device by id, alias or tool-printed name, or a [`CliError::UnknownHardware`].
pub fn resolve_hardware<'k>(k: &'k Knowledge, name: &str) -> Result<&'k Hardware, CliError> {
    k.find_hardware(name)
        .ok_or_else(|| CliError::UnknownHardware {
            name: name.to_owned(),
            known: k.hardware.iter().map(|h| h.id.clone()).collect(),
        })
}

/// The platform of a `check`: the language given as `--backend`, and the target given, else the
/// device's, else the language's only one.
pub fn resolve_platform(
    backend: &str,
    target: Option<&str>,
    hardware: Option<&Hardware>,
) -> Result<Platform, CliError> {
    let language: Language = backend
        .parse()
        .map_err(|e: crate::ParseError| CliError::Usage(format!("--backend: {e}")))?;
    let target = match target {
        Some(t) => t
            .parse::<Target>()
            .map_err(|e| CliError::Usage(format!("--target: {e}")))?,
        None => match (hardware, language.default_target()) {
            (Some(h), _) => h.target,
            (None, Some(t)) => t,
            (None, None) => {
                return Err(CliError::Usage(format!(
                    "--backend {language} runs on several targets: add --target metal or --target cuda"
                )));
            }
        },
    };
    if let Some(h) = hardware
        && h.target != target
    {
        return Err(CliError::Usage(format!(
            "--hardware {} is a {} device, but --target is {target}",
            h.id, h.target
        )));
    }
    Platform::new(language, target).map_err(|e| CliError::Usage(e.to_string()))
}

#[derive(Serialize)]
struct CheckJson<'a> {
    file: &'a str,
    platform: &'a str,
    hardware: Option<&'a str>,
    clean: bool,
    violations: &'a [Violation],
}

/// `ksearch knowledge check FILE --backend B [--target T] [--hardware NAME] [--json]`.
pub fn check_file(
    k: &Knowledge,
    file: &Path,
    backend: &str,
    target: Option<&str>,
    hardware: Option<&str>,
    json: bool,
) -> Result<CommandOutput, CliError> {
    let hw = hardware.map(|n| resolve_hardware(k, n)).transpose()?;
    let platform = resolve_platform(backend, target, hw)?;
    // A candidate-sized source at most, and a regular file: never `/dev/zero` read forever.
    let source = ksearch_tasks::read_text(file, ksearch_tasks::MAX_SOURCE_BYTES, "a source")
        .map_err(|e| CliError::Unreadable {
            path: file.display().to_string(),
            message: error_chain(&e),
        })?;
    Ok(check_source(
        k,
        &source,
        &file.display().to_string(),
        platform,
        hw,
        json,
    ))
}

/// The same on a source already read.
pub fn check_source(
    k: &Knowledge,
    source: &str,
    file: &str,
    platform: Platform,
    hardware: Option<&Hardware>,
    json: bool,
) -> CommandOutput {
    let violations = k.check(source, platform, hardware);
    let found = !violations.is_empty();
    let stdout = if json {
        to_json(&CheckJson {
            file,
            platform: platform.name(),
            hardware: hardware.map(|h| h.id.as_str()),
            clean: violations.is_empty(),
            violations: &violations,
        })
    } else {
        let mut s = String::new();
        let on = hardware.map_or(String::new(), |h| format!(" on {}", h.id));
        if violations.is_empty() {
            let n = k.rules_for(platform).count();
            let _ = writeln!(s, "{file}: clean ({n} {platform} rules{on})");
        } else {
            for v in &violations {
                let at = v.line.map_or(String::new(), |l| format!(":{l}"));
                let _ = writeln!(s, "{file}{at}: [{}] {}", v.rule, v.message);
            }
            let _ = writeln!(
                s,
                "{} violation{} ({platform}{on})",
                violations.len(),
                if violations.len() == 1 { "" } else { "s" }
            );
        }
        s
    };
    CommandOutput {
        stdout,
        violations: found,
    }
}

/// An error with its causes, `: `-separated.
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(&format!(": {c}"));
        cause = c.source();
    }
    text
}
