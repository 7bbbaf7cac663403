//! Finding the local GPU and matching device names to hardware files.
//!
//! NVIDIA GPUs are named by `nvidia-smi --query-gpu=name --format=csv,noheader`; Apple GPUs by
//! `sysctl -n machdep.cpu.brand_string` (the SoC, e.g. "Apple M3 Max") or, failing that, the
//! `Chipset Model` line of `system_profiler SPDisplaysDataType`. Names match a hardware file
//! when every word of one of its aliases appears in the name and none of its `detect_exclude`
//! words does; the most specific alias wins.

use std::process::{Command, Stdio};

use serde::Serialize;

use crate::Knowledge;
use crate::hardware::Hardware;

/// What detection found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Detection {
    /// The name as the tool printed it.
    pub name: String,
    /// The command that printed it.
    pub via: String,
    /// The matching hardware file, if any.
    pub hardware: Option<String>,
}

/// Lowercase words of a device name, without vendor names and punctuation:
/// "NVIDIA A100-SXM4-80GB" → `a100 sxm4 80gb`.
pub fn normalize(name: &str) -> Vec<String> {
    name.to_ascii_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty() && !matches!(*w, "nvidia" | "apple" | "tm" | "r"))
        .map(str::to_owned)
        .collect()
}

/// The hardware file a name refers to, if exactly one fits best.
pub(crate) fn match_name<'a>(hardware: &'a [Hardware], name: &str) -> Option<&'a Hardware> {
    let words = normalize(name);
    if words.is_empty() {
        return None;
    }
    let mut best: Option<(usize, &Hardware)> = None;
    let mut tie = false;
    for hw in hardware {
        if hw
            .detect_exclude
            .iter()
            .any(|x| words.contains(&x.to_ascii_lowercase()))
        {
            continue;
        }
        let id_alias = hw.id.replace('-', " ");
        let candidates = hw
            .aliases
            .iter()
            .map(String::as_str)
            .chain([hw.name.as_str(), id_alias.as_str()]);
        let score = candidates
            .map(normalize)
            .filter(|a| !a.is_empty() && a.iter().all(|w| words.contains(w)))
            .map(|a| a.len())
            .max();
        if let Some(score) = score {
            match best {
                Some((s, _)) if s > score => {}
                Some((s, other)) if s == score && other.id != hw.id => tie = true,
                _ => {
                    best = Some((score, hw));
                    tie = false;
                }
            }
        }
    }
    if tie { None } else { best.map(|(_, hw)| hw) }
}

/// Runs a command and returns its trimmed stdout when it succeeds.
fn run_command(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// Detect this machine's GPU with the real tools.
pub fn detect_local(knowledge: &Knowledge) -> Option<Detection> {
    detect_with(knowledge, std::env::consts::OS, &mut run_command)
}

/// Detection with the operating system and the command runner given (for tests).
pub fn detect_with(
    knowledge: &Knowledge,
    os: &str,
    run: &mut dyn FnMut(&str, &[&str]) -> Option<String>,
) -> Option<Detection> {
    let found = |name: &str, via: &str| Detection {
        name: name.to_owned(),
        via: via.to_owned(),
        hardware: knowledge.find_hardware(name).map(|h| h.id.clone()),
    };
    let smi = ["--query-gpu=name", "--format=csv,noheader"];
    if let Some(out) = run("nvidia-smi", &smi)
        && let Some(first) = out.lines().map(str::trim).find(|l| !l.is_empty())
    {
        return Some(found(
            first,
            "nvidia-smi --query-gpu=name --format=csv,noheader",
        ));
    }
    if os == "macos" {
        if let Some(out) = run("sysctl", &["-n", "machdep.cpu.brand_string"]) {
            let name = out.trim();
            if name.starts_with("Apple") {
                return Some(found(name, "sysctl -n machdep.cpu.brand_string"));
            }
        }
        if let Some(out) = run("system_profiler", &["SPDisplaysDataType"]) {
            let chipset = out.lines().find_map(|l| {
                l.trim()
                    .strip_prefix("Chipset Model:")
                    .map(|v| v.trim().to_owned())
            });
            if let Some(name) = chipset.filter(|n| !n.is_empty()) {
                return Some(found(&name, "system_profiler SPDisplaysDataType"));
            }
        }
    }
    None
}
