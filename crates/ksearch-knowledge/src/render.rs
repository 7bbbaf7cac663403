//! The prompt context: what the model is told about the target, how CUDA idioms translate,
//! which tactics fit the kernel class, and which checks every candidate must pass.
//!
//! **Levels.** `none` renders nothing (the naive-seed and no-knowledge arms of an ablation);
//! `hardware` renders the device block only; `full` adds translation, tactics and checks.
//!
//! **Budget.** The block is kept within `budget_chars` characters. Every entry has a relevance:
//! its `importance` × 10, plus 5 for a translation entry that names the task's kernel class, a
//! device pitfall or a tactic (tactics are already chosen by class), plus 10 more for a tactic
//! whose first class is the task's; the checks count as 28. Every entry has a full form and a one-line form (no examples, sketches, pitfalls or
//! preconditions). When the block is too long, entries are shortened and dropped one step at a
//! time, always the step that loses least: shortening costs an entry's relevance, dropping it
//! twice that — so niche entries are shortened, then dropped, before core entries lose their
//! detail. The device block is never dropped; as a last resort it is cut at the budget. A
//! closing line says how many entries were shortened and which were left out, so the model can
//! ask for them by name (`ksearch knowledge show ID`).

use std::fmt::Write as _;
use std::str::FromStr;

use ksearch_core::task::{KernelClass, TaskSpec};

use crate::Knowledge;
use crate::fact::{Fact, FactStatus, Unit, format_value};
use crate::hardware::{Hardware, Vendor};
use crate::host::HostCpu;
use crate::pattern::{Pattern, PatternImpact};
use crate::platform::{InvalidPlatform, Language, ParseError, Platform, Target};
use crate::translation::Translation;

/// About 3,000 tokens.
pub const DEFAULT_BUDGET_CHARS: usize = 12_000;

/// How much knowledge goes into prompts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    None,
    Hardware,
    Full,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::None => "none",
            Level::Hardware => "hardware",
            Level::Full => "full",
        }
    }
}

impl FromStr for Level {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" => Ok(Level::None),
            "hardware" => Ok(Level::Hardware),
            "full" => Ok(Level::Full),
            _ => Err(ParseError {
                what: "knowledge level",
                given: s.to_owned(),
                expected: "none, hardware, full",
            }),
        }
    }
}

/// What to render context for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextRequest {
    /// The language the known-good idioms come from (CUDA: decades of kernels).
    pub from: Language,
    /// What candidates are written in and run on.
    pub to: Platform,
    pub class: KernelClass,
    /// A hardware id or name (`m3-max`, "NVIDIA H200"); `None` renders platform defaults.
    pub hardware: Option<String>,
    /// The CPU the run measures on, described for a CPU target that names no hardware file.
    pub host: Option<HostCpu>,
    pub level: Level,
    pub budget_chars: usize,
}

impl ContextRequest {
    /// CUDA knowledge for `to`, full level, the default budget, no device.
    pub fn new(to: Platform, class: KernelClass) -> ContextRequest {
        ContextRequest {
            from: Language::Cuda,
            to,
            class,
            hardware: None,
            host: None,
            level: Level::Full,
            budget_chars: DEFAULT_BUDGET_CHARS,
        }
    }

    /// For a task: its class, its backend's language on `target`.
    pub fn for_task(spec: &TaskSpec, target: Target) -> Result<ContextRequest, InvalidPlatform> {
        let to = Platform::new(spec.backend.backend().language(), target)?;
        Ok(ContextRequest::new(to, spec.class))
    }

    #[must_use]
    pub fn with_hardware(mut self, hardware: impl Into<String>) -> Self {
        self.hardware = Some(hardware.into());
        self
    }

    #[must_use]
    pub fn with_host(mut self, host: HostCpu) -> Self {
        self.host = Some(host);
        self
    }

    #[must_use]
    pub fn with_level(mut self, level: Level) -> Self {
        self.level = level;
        self
    }

    #[must_use]
    pub fn with_budget(mut self, chars: usize) -> Self {
        self.budget_chars = chars;
        self
    }

    #[must_use]
    pub fn with_from(mut self, from: Language) -> Self {
        self.from = from;
        self
    }
}

/// How much of an entry is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shown {
    Full,
    Compact,
    Dropped,
}

/// One entry of a section, in two renderings.
#[derive(Debug)]
struct Item {
    id: String,
    section: usize,
    relevance: u32,
    full: String,
    compact: String,
    shown: Shown,
}

impl Item {
    fn text(&self) -> &str {
        match self.shown {
            Shown::Full => &self.full,
            Shown::Compact => &self.compact,
            Shown::Dropped => "",
        }
    }
}

pub(crate) fn render(k: &Knowledge, req: &ContextRequest) -> String {
    if req.level == Level::None {
        return String::new();
    }
    let hw = req.hardware.as_deref().and_then(|n| k.find_hardware(n));
    let mut head = String::new();
    let on = hw.map_or(String::new(), |h| format!(" on {}", h.name));
    let _ = writeln!(
        head,
        "Knowledge for {} kernels in {}{on}.",
        req.class.name(),
        req.to.describe()
    );
    if let (Some(name), None) = (&req.hardware, hw) {
        let _ = writeln!(
            head,
            "(Hardware `{name}` is not in the knowledge base; limits below are platform defaults.)"
        );
    }
    if let Some(h) = hw {
        head.push('\n');
        head.push_str(&hardware_block(h, false));
    } else if let (Some(host), false) = (&req.host, req.to.is_gpu()) {
        head.push('\n');
        head.push_str(&host.describe());
    } else if req.level == Level::Full && req.to.is_gpu() {
        let _ = writeln!(
            head,
            "No device was named: the checks use conservative platform defaults."
        );
    }

    let mut sections: Vec<String> = Vec::new();
    let mut items: Vec<Item> = Vec::new();

    if let Some(h) = hw
        && !h.pitfalls.is_empty()
    {
        let s = sections.len();
        sections.push(format!("#### Known pitfalls on {}\n", short_name(h)));
        for p in &h.pitfalls {
            items.push(Item {
                id: format!("{}#{}", h.id, p.id),
                section: s,
                relevance: u32::from(p.importance) * 10 + 5,
                full: format!("- {}\n", p.text.trim()),
                compact: format!("- {}\n", first_sentence(&p.text)),
                shown: Shown::Full,
            });
        }
    }

    if req.level == Level::Full {
        let translate = req.from == Language::Cuda
            && req.to.language != Language::Cuda
            && req.to.language != Language::C;
        if translate {
            let entries: Vec<&Translation> = k
                .translations
                .iter()
                .filter(|t| t.applies_to(req.to))
                .collect();
            if !entries.is_empty() {
                let s = sections.len();
                sections.push(format!("#### CUDA → {}\n", target_words(req.to)));
                for t in entries {
                    let bonus = if t.classes.contains(&req.class) { 5 } else { 0 };
                    items.push(Item {
                        id: t.id.clone(),
                        section: s,
                        relevance: u32::from(t.importance) * 10 + bonus,
                        full: translation_full(t, req.to),
                        compact: translation_compact(t, req.to),
                        shown: Shown::Full,
                    });
                }
            }
        }
        // Tactics with a sketch in the candidate's language (a CPU-only tactic is noise on a GPU).
        let patterns: Vec<&Pattern> = k
            .patterns_for(req.class)
            .filter(|p| p.sketch.for_platform(req.to).is_some())
            .collect();
        if !patterns.is_empty() {
            let s = sections.len();
            sections.push(format!(
                "#### Tactics for {} kernels (expected effect 0–10 and risk per axis)\n",
                req.class.name()
            ));
            for p in patterns {
                // Tactics are already chosen by class; the ones whose first class it is lead.
                let primary = if p.classes.first() == Some(&req.class) {
                    10
                } else {
                    0
                };
                items.push(Item {
                    id: p.id.clone(),
                    section: s,
                    relevance: u32::from(p.importance) * 10 + 5 + primary,
                    full: pattern_full(p, req.to),
                    compact: pattern_compact(p),
                    shown: Shown::Full,
                });
            }
        }
        let rules: Vec<_> = k.rules_for(req.to).collect();
        if !rules.is_empty() {
            let s = sections.len();
            sections.push(
                "#### Checks every candidate must pass (a violation is rejected before compiling)\n"
                    .to_owned(),
            );
            for r in rules {
                items.push(Item {
                    id: r.id().to_owned(),
                    section: s,
                    relevance: 28,
                    full: format!("- {}\n", r.spec.summary.trim()),
                    compact: format!("- {}\n", r.spec.summary.trim()),
                    shown: Shown::Full,
                });
            }
        }
    }

    fit(&head, &sections, &mut items, req.budget_chars)
}

/// Assemble, shortening and dropping least relevant items until it fits.
fn fit(head: &str, sections: &[String], items: &mut [Item], budget: usize) -> String {
    let assemble = |items: &[Item]| -> String {
        let mut out = head.to_owned();
        for (s, title) in sections.iter().enumerate() {
            let body: String = items
                .iter()
                .filter(|i| i.section == s)
                .map(Item::text)
                .collect();
            if !body.is_empty() {
                out.push('\n');
                out.push_str(title);
                out.push_str(&body);
            }
        }
        let compacted = items.iter().filter(|i| i.shown == Shown::Compact).count();
        let dropped: Vec<&str> = items
            .iter()
            .filter(|i| i.shown == Shown::Dropped)
            .map(|i| i.id.as_str())
            .collect();
        if compacted > 0 || !dropped.is_empty() {
            let _ = write!(
                out,
                "\n(Trimmed to fit the prompt: {compacted} entries shortened, {} left out",
                dropped.len()
            );
            if !dropped.is_empty() {
                let shown: Vec<&str> = dropped.iter().take(8).copied().collect();
                let more = if dropped.len() > 8 { ", …" } else { "" };
                let _ = write!(out, ": {}{more}", shown.join(", "));
            }
            out.push_str(".)\n");
        }
        out
    };
    let chars = |s: &str| s.chars().count();
    // Each step gives up the least value: shortening an entry costs half its relevance,
    // dropping it the whole. Ties: shorten before dropping, later entries first.
    let mut steps: Vec<(u32, Shown, std::cmp::Reverse<usize>)> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        if item.compact.len() < item.full.len() {
            steps.push((item.relevance, Shown::Compact, std::cmp::Reverse(i)));
        }
        steps.push((item.relevance * 2, Shown::Dropped, std::cmp::Reverse(i)));
    }
    steps.sort_by_key(|&(cost, step, i)| (cost, step == Shown::Dropped, i));
    let mut text = assemble(items);
    for (_, step, std::cmp::Reverse(i)) in steps {
        if chars(&text) <= budget {
            return text;
        }
        items[i].shown = step;
        text = assemble(items);
    }
    if chars(&text) <= budget {
        return text;
    }
    // The device block alone is too long: cut it.
    let mut cut: String = text.chars().take(budget.saturating_sub(2)).collect();
    if budget >= 2 {
        cut.push_str("…\n");
    }
    cut
}

fn short_name(h: &Hardware) -> &str {
    h.name.split(" (").next().unwrap_or(&h.name)
}

/// Up to the first full stop followed by a capital letter (so "e.g. 4×4" does not end it).
fn first_sentence(s: &str) -> String {
    let s = s.trim();
    let b = s.as_bytes();
    for (i, _) in s.match_indices(". ") {
        if b.get(i + 2).is_some_and(u8::is_ascii_uppercase) {
            return s[..=i].to_owned();
        }
    }
    s.to_owned()
}

fn target_words(p: Platform) -> &'static str {
    match p {
        Platform::MLX_METAL => "Metal / MLX (`mx.fast.metal_kernel`)",
        Platform::MLX_CUDA => "MLX (`mx.fast.cuda_kernel`)",
        _ => "Metal (MSL)",
    }
}

fn translation_full(t: &Translation, to: Platform) -> String {
    let mut s = format!("- **{}**: CUDA {}", t.concept.trim(), t.cuda.trim());
    let metal = to.target == Target::Metal;
    let mlx = to.language == Language::Mlx;
    if metal {
        let _ = write!(s, " → Metal {}", t.metal.trim());
    }
    if mlx {
        let _ = write!(s, "; MLX: {}", t.mlx.trim());
    }
    s.push('\n');
    let _ = writeln!(s, "  Limits: {}", t.limits.trim());
    for p in &t.pitfalls {
        let _ = writeln!(s, "  Pitfall: {}", p.trim());
    }
    let example = if mlx {
        &t.example.mlx
    } else {
        &t.example.metal
    };
    if metal || mlx {
        let _ = writeln!(
            s,
            "  e.g. `{}` → `{}`",
            t.example.cuda.trim(),
            example.trim()
        );
    }
    s
}

fn translation_compact(t: &Translation, to: Platform) -> String {
    let other = if to.target == Target::Metal {
        &t.example.metal
    } else {
        &t.example.mlx
    };
    format!(
        "- {}: `{}` → `{}`\n",
        t.concept.trim(),
        t.example.cuda.trim(),
        other.trim()
    )
}

fn impact_words(i: &PatternImpact) -> String {
    format!(
        "{}/10 ({} risk)",
        format_value(i.rating, Unit::Count),
        i.risk.as_str()
    )
}

fn pattern_full(p: &Pattern, to: Platform) -> String {
    let mut s = format!("- **{}**: {}\n", p.title.trim(), p.summary.trim());
    let _ = writeln!(
        s,
        "  Effect: memory bandwidth {}, register pressure {}, compute fit {}.",
        impact_words(&p.impact.memory_bandwidth),
        impact_words(&p.impact.register_pressure),
        impact_words(&p.impact.compute_fit)
    );
    if !p.preconditions.is_empty() {
        let _ = writeln!(s, "  When: {}", p.preconditions.join("; "));
    }
    if let Some(sketch) = p.sketch.for_platform(to) {
        let lang = match (to.language, to.target) {
            (Language::Mlx, Target::Metal) if p.sketch.mlx.is_some() => "mlx",
            (_, Target::Metal) => "metal",
            (_, Target::Cuda) => "cuda",
            (_, Target::Cpu) => "c",
        };
        let _ = writeln!(s, "  Sketch ({lang}):");
        for line in sketch.trim_end().lines() {
            let _ = writeln!(s, "    {line}");
        }
    }
    s
}

fn pattern_compact(p: &Pattern) -> String {
    format!(
        "- **{}**: {} (memory {}, registers {}, compute {})\n",
        p.title.trim(),
        first_sentence(&p.summary),
        short_impact(&p.impact.memory_bandwidth),
        short_impact(&p.impact.register_pressure),
        short_impact(&p.impact.compute_fit)
    )
}

fn short_impact(i: &PatternImpact) -> String {
    let risk = match i.risk {
        ksearch_core::tree::Risk::Low => "low",
        ksearch_core::tree::Risk::Medium => "med",
        ksearch_core::tree::Risk::High => "high",
    };
    format!("{}/{risk}", format_value(i.rating, Unit::Count))
}

/// What a fact says, for prompts: the value, or `unknown`.
fn show(f: &Fact, unit: Unit) -> String {
    f.display(unit)
}

/// The device block: the numbers a kernel author needs, each with its status when it is not a
/// published or measured figure. `detailed` adds sources and notes (for `ksearch knowledge
/// hardware NAME`).
pub(crate) fn hardware_block(h: &Hardware, detailed: bool) -> String {
    let mut s = format!("#### Target: {}\n", h.name);
    let vendor = vendor_name(h.vendor);
    let mut tags = vec![if h.arch.starts_with(vendor) {
        h.arch.clone()
    } else {
        format!("{vendor} {}", h.arch)
    }];
    if let Some(cc) = &h.compute_capability {
        tags.push(format!("compute capability {cc}"));
    }
    if let Some(f) = &h.gpu_family {
        tags.push(format!("MTLGPUFamily {f}"));
    }
    if let Some(a) = &h.mlx_architecture {
        tags.push(format!("MLX architecture `{a}`"));
    }
    let _ = writeln!(s, "{}. {}", tags.join(", "), h.summary.trim());
    let apple = h.vendor == Vendor::Apple;
    let (shared, block, unit_word) = if apple {
        ("Threadgroup memory", "threadgroup", "core")
    } else {
        ("Shared memory", "block", "SM")
    };
    if let Some(c) = &h.compute {
        let mut line = format!(
            "- Compute: {} {}s, clock {}; peak dense FP32 {}, FP16 {}, BF16 {}",
            show(&c.units, Unit::Count),
            c.unit_name,
            show(&c.clock_ghz, Unit::GigaHertz),
            show(&c.peak_fp32_tflops, Unit::TeraFlops),
            show(&c.peak_fp16_tflops, Unit::TeraFlops),
            show(&c.peak_bf16_tflops, Unit::TeraFlops),
        );
        if let Some(tf32) = &c.peak_tf32_tflops {
            let _ = write!(line, ", TF32 {}", show(tf32, Unit::TeraFlops));
        }
        let _ = writeln!(s, "{line}");
    }
    if let Some(m) = &h.memory {
        let mut line = format!(
            "- Memory: {} bandwidth, {} capacity; L2 {}",
            show(&m.bandwidth_gbs, Unit::GigaBytesPerSecond),
            show(&m.capacity_gb, Unit::GigaBytes),
            show(&m.l2_bytes, Unit::Bytes)
        );
        if let Some(slc) = &m.system_cache_bytes {
            let _ = write!(line, "; system-level cache {}", show(slc, Unit::Bytes));
        }
        let _ = writeln!(s, "{line}");
    }
    if let Some(r) = h.fp32_ridge_point() {
        let mut line = format!(
            "- Memory-bound below about {} FLOP per byte moved (FP32",
            format_value(r.round(), Unit::Count)
        );
        if let Some(bf16) = h.bf16_ridge_point() {
            let _ = write!(
                line,
                "; {} for dense BF16",
                format_value(bf16.round(), Unit::Count)
            );
        }
        let _ = writeln!(s, "{line}).");
    }
    if let Some(o) = &h.on_chip {
        let mut line = format!(
            "- {shared}: {} per {block}",
            show(&o.shared_per_block_bytes, Unit::Bytes)
        );
        if let Some(optin) = &o.shared_per_block_optin_bytes
            && optin.value() != o.shared_per_block_bytes.value()
        {
            let _ = write!(line, " ({} after opting in)", show(optin, Unit::Bytes));
        }
        let _ = writeln!(
            line,
            ", {} per {unit_word}",
            show(&o.shared_per_unit_bytes, Unit::Bytes)
        );
        s.push_str(&line);
        let per_thread = match o.max_registers_per_thread.value() {
            Some(_) => format!(
                "at most {} per thread",
                show(&o.max_registers_per_thread, Unit::Count)
            ),
            None => "per-thread limit unknown".to_owned(),
        };
        let _ = writeln!(
            s,
            "- Registers: {} per {unit_word}, {per_thread}",
            show(&o.registers_per_unit_bytes, Unit::Bytes),
        );
        let _ = writeln!(
            s,
            "- {} width {}; at most {} threads per {block}, {} per {unit_word}",
            if apple { "SIMD-group" } else { "Warp" },
            show(&o.simd_width, Unit::Count),
            show(&o.max_threads_per_block, Unit::Count),
            show(&o.max_threads_per_unit, Unit::Count)
        );
    }
    if let Some(mx) = &h.matrix {
        let _ = writeln!(
            s,
            "- Matrix units: {}{}. {}",
            if mx.available { "" } else { "none — " },
            mx.name.trim(),
            mx.note.trim()
        );
    }
    if let Some(cpu) = &h.cpu {
        for (name, fact, unit) in cpu.facts() {
            let _ = writeln!(s, "- {}: {}", name.replace('_', " "), show(fact, unit));
        }
    }
    if detailed {
        s.push_str("\nProvenance:\n");
        for (path, fact, unit) in h.facts() {
            let value = match fact.value() {
                Some(v) => format_value(v, unit),
                None => "unknown".to_owned(),
            };
            let mut line = format!("- {path}: {value} [{}]", fact.status);
            if let Some(src) = &fact.source {
                let _ = write!(line, " source: {}", src.trim());
            }
            if let Some(note) = &fact.note {
                let _ = write!(line, " — {}", note.trim());
            }
            let _ = writeln!(s, "{line}");
        }
        if let Some(mx) = &h.matrix {
            let _ = writeln!(s, "- matrix: source: {}", mx.source.trim());
        }
        let _ = writeln!(s, "- general: {}", h.source.trim());
        if !h.pitfalls.is_empty() {
            s.push_str("\nPitfalls:\n");
            for p in &h.pitfalls {
                let _ = writeln!(
                    s,
                    "- [{}] {} (source: {})",
                    p.id,
                    p.text.trim(),
                    p.source.trim()
                );
            }
        }
    } else {
        let unknown: Vec<String> = h
            .facts()
            .into_iter()
            .filter(|(_, f, _)| f.status == FactStatus::Unknown)
            .map(|(p, _, _)| label(p.rsplit('.').next().unwrap_or(&p)))
            .collect();
        if !unknown.is_empty() {
            let _ = writeln!(
                s,
                "- Not published for this device (do not assume a value): {}.",
                unknown.join(", ")
            );
        }
    }
    s
}

/// A fact's field name in words.
fn label(field: &str) -> String {
    match field {
        "clock_ghz" => "clock".into(),
        "peak_fp32_tflops" => "FP32 peak".into(),
        "peak_fp16_tflops" => "FP16 peak".into(),
        "peak_bf16_tflops" => "BF16 peak".into(),
        "peak_tf32_tflops" => "TF32 peak".into(),
        "l2_bytes" => "L2 size".into(),
        "system_cache_bytes" => "system-level cache size".into(),
        "shared_per_unit_bytes" => "on-chip shared memory per core".into(),
        "registers_per_unit_bytes" => "register file per core".into(),
        "max_registers_per_thread" => "registers per thread".into(),
        "max_threads_per_unit" => "resident threads per core".into(),
        other => other.replace('_', " "),
    }
}

fn vendor_name(v: Vendor) -> &'static str {
    match v {
        Vendor::Nvidia => "NVIDIA",
        Vendor::Apple => "Apple",
        Vendor::Generic => "generic",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_shortens_then_drops_least_relevant_first() {
        let item = |id: &str, relevance, n| Item {
            id: id.into(),
            section: 0,
            relevance,
            full: format!("{}\n", "x".repeat(n)),
            compact: "c\n".into(),
            shown: Shown::Full,
        };
        let sections = vec!["S\n".to_owned()];
        let fresh = || vec![item("a", 30, 100), item("b", 10, 100), item("c", 20, 100)];
        let mut items = fresh();
        let all = fit("H\n", &sections, &mut items, 10_000);
        assert!(!all.contains("Trimmed"));
        let mut items = fresh();
        let out = fit("H\n", &sections, &mut items, 250);
        assert!(out.chars().count() <= 250, "{out}");
        assert_eq!(items[0].shown, Shown::Full);
        assert_eq!(items[1].shown, Shown::Compact);
        let rank = |s: Shown| match s {
            Shown::Full => 0,
            Shown::Compact => 1,
            Shown::Dropped => 2,
        };
        for budget in [60, 90, 120, 200] {
            let mut items = fresh();
            let out = fit("H\n", &sections, &mut items, budget);
            assert!(out.chars().count() <= budget, "{out}");
            // Less relevant entries are always trimmed at least as much.
            assert!(rank(items[1].shown) >= rank(items[2].shown));
            assert!(rank(items[2].shown) >= rank(items[0].shown));
        }
        let tiny = fit(&"h".repeat(100), &sections, &mut [], 20);
        assert_eq!(tiny.chars().count(), 20);
    }
}
