//! What the builtin proposer's cost models know about the CPU they run on.
//!
//! The model works in cycles of one core. Vector width and cache sizes are read from the
//! machine; the bandwidths are modelling assumptions, kept with their reasons in the knowledge
//! layer's CPU host model (`knowledge/hardware/generic-x86-64.toml`), which also supplies every
//! value detection cannot read. The numbers only need to rank candidates sensibly;
//! measurements correct them.

use std::fs;

/// The parameters of one CPU core the cost models use: the knowledge layer's CPU model.
pub use ksearch_knowledge::CpuModel as Machine;

/// The CPU host model of the knowledge layer (`knowledge/hardware/generic-x86-64.toml`): an AVX2
/// core with its caches and the bandwidths the cost models assume. For tests and anywhere
/// results must not depend on the host.
pub fn generic() -> Machine {
    ksearch_eval::knowledge()
        .hardware(ksearch_knowledge::CPU_HOST_ID)
        .and_then(ksearch_knowledge::Hardware::cpu_model)
        .expect("the knowledge base describes the CPU host model")
}

/// The host's parameters: the vector width from `/proc/cpuinfo`, the caches from
/// `/sys/devices/system/cpu/cpu0/cache`; anything unreadable keeps its [`generic`] value.
pub fn detect() -> Machine {
    let mut m = generic();
    if let Ok(cpuinfo) = fs::read_to_string("/proc/cpuinfo") {
        let (vector_bytes, fma_units) = vector_from_cpuinfo(&cpuinfo);
        m.vector_bytes = vector_bytes;
        m.fma_units = fma_units;
    }
    let caches = read_caches("/sys/devices/system/cpu/cpu0/cache");
    if let Some(l1) = caches.l1 {
        m.l1_bytes = l1;
    }
    if let Some(l2) = caches.l2 {
        m.l2_bytes = l2;
    }
    match (caches.l3, caches.l2) {
        (Some(l3), _) => m.llc_bytes = l3,
        (None, Some(l2)) => m.llc_bytes = l2,
        (None, None) => {}
    }
    m
}

/// Vector width and FMA pipes from the `flags` (x86) or `Features` (ARM) line.
fn vector_from_cpuinfo(cpuinfo: &str) -> (u32, u32) {
    let flags: Vec<&str> = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags") || l.starts_with("Features"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.split_whitespace().collect())
        .unwrap_or_default();
    let has = |f: &str| flags.contains(&f);
    let amd = cpuinfo.contains("AuthenticAMD");
    if has("avx512f") {
        // AMD Zen 4 runs 512-bit operations on its two 256-bit pipes: one full-width FMA a cycle.
        (64, if amd { 1 } else { 2 })
    } else if has("avx2") || has("avx") {
        (32, 2)
    } else {
        // NEON/ASIMD, SSE, or unknown.
        (16, 2)
    }
}

#[derive(Debug, Default)]
struct Caches {
    l1: Option<usize>,
    l2: Option<usize>,
    l3: Option<usize>,
}

fn read_caches(dir: &str) -> Caches {
    let mut caches = Caches::default();
    let Ok(entries) = fs::read_dir(dir) else {
        return caches;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let is_index = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("index"));
        if !is_index {
            continue;
        }
        let read = |f: &str| fs::read_to_string(path.join(f)).map(|s| s.trim().to_owned());
        let (Ok(level), Ok(size)) = (read("level"), read("size")) else {
            continue;
        };
        let kind = read("type").unwrap_or_default();
        let Some(bytes) = parse_size(&size) else {
            continue;
        };
        match level.as_str() {
            "1" if kind != "Instruction" => caches.l1 = Some(bytes),
            "2" => caches.l2 = Some(bytes),
            "3" => caches.l3 = Some(bytes),
            _ => {}
        }
    }
    caches
}

/// "32K", "1024K", "32M", "1G" or a plain byte count.
fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (digits, mult) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 1024),
        'M' | 'm' => (&s[..s.len() - 1], 1024 * 1024),
        'G' | 'g' => (&s[..s.len() - 1], 1024 * 1024 * 1024),
        _ => (s, 1),
    };
    digits.trim().parse::<usize>().ok().map(|v| v * mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("32K"), Some(32 * 1024));
        assert_eq!(parse_size("1024K"), Some(1024 * 1024));
        assert_eq!(parse_size("32M"), Some(32 * 1024 * 1024));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("x"), None);
    }

    #[test]
    fn vector_width_from_flags() {
        let avx512 = "vendor_id\t: AuthenticAMD\nflags\t\t: fpu sse avx avx2 fma avx512f\n";
        assert_eq!(vector_from_cpuinfo(avx512), (64, 1));
        let avx2 = "vendor_id\t: GenuineIntel\nflags\t\t: fpu sse avx avx2 fma\n";
        assert_eq!(vector_from_cpuinfo(avx2), (32, 2));
        let arm = "Features\t: fp asimd evtstrm aes\n";
        assert_eq!(vector_from_cpuinfo(arm), (16, 2));
    }

    #[test]
    fn vector_rates() {
        let mut m = generic();
        m.vector_bytes = 64;
        m.fma_units = 1;
        assert_eq!(m.vector_ops_per_cycle(16), 1.0);
        assert_eq!(m.vector_ops_per_cycle(8), 2.0);
        assert_eq!(m.vector_ops_per_cycle(1), 2.0);
        let g = generic();
        assert_eq!(g.vector_ops_per_cycle(8), 2.0);
        assert_eq!(g.vector_ops_per_cycle(16), 1.0);
    }

    #[test]
    fn detect_is_sane() {
        let m = detect();
        assert!(m.vector_bytes >= 16);
        assert!(m.l1_bytes > 0 && m.l2_bytes >= m.l1_bytes && m.llc_bytes >= m.l2_bytes);
        assert!(m.dram_bytes_per_cycle > 0.0 && m.llc_bytes_per_cycle > 0.0);
    }
}
