//! The CPU a run measures on, as the prompts of C kernels describe it and the builtin
//! proposer's cost models read it: the model name, the logical CPUs, the SIMD extensions that
//! `-march=native` enables, the widest vector and the cache sizes.
//!
//! [`HostCpu::parse`] is pure (it reads the text of `/proc/cpuinfo` and the cache sizes given
//! to it); [`HostCpu::detect`] reads this machine's `/proc/cpuinfo` and
//! `/sys/devices/system/cpu/cpu0/cache`. A run records what it detected when it started, so
//! its prompts read the same on resume and replay wherever they run.

use std::fmt::Write as _;

use fs_err as fs;
use serde::{Deserialize, Serialize};

/// What detection found about the host CPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostCpu {
    /// As `/proc/cpuinfo` names it (`model name`), or the architecture when it does not.
    pub model: String,
    /// Logical CPUs this process may use.
    pub logical_cpus: u32,
    /// The SIMD extensions present, by their `/proc/cpuinfo` flag names, in [`SIMD_FLAGS`] order.
    pub simd: Vec<String>,
    /// Width of the widest usable SIMD register in bytes (64 with AVX-512F, 32 with AVX or
    /// AVX2, 16 otherwise).
    pub vector_bytes: u32,
    /// Full-width vector FMAs the core starts per cycle: an assumption from the vendor and the
    /// width (AMD runs 512-bit operations on two 256-bit pipes), not something the CPU reports.
    pub fma_units: u32,
    pub l1d_bytes: Option<u64>,
    pub l2_bytes: Option<u64>,
    pub l3_bytes: Option<u64>,
}

/// The SIMD flags worth naming to someone writing intrinsics, narrowest first.
pub const SIMD_FLAGS: &[&str] = &[
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512dq",
    "avx512cd",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "asimd",
    "asimdhp",
    "sve",
    "sve2",
];

/// Cache sizes of one core, as sysfs reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheSizes {
    pub l1d: Option<u64>,
    pub l2: Option<u64>,
    pub l3: Option<u64>,
}

impl HostCpu {
    /// From the text of `/proc/cpuinfo` (its first processor's lines), the caches and the
    /// number of logical CPUs.
    pub fn parse(cpuinfo: &str, caches: CacheSizes, logical_cpus: u32) -> HostCpu {
        let value = |key: &str| {
            cpuinfo
                .lines()
                .find(|l| l.split(':').next().is_some_and(|k| k.trim() == key))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        };
        let flags: Vec<String> = value("flags")
            .or_else(|| value("Features"))
            .map(|v| v.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default();
        let has = |f: &str| flags.iter().any(|x| x == f);
        let amd = cpuinfo.contains("AuthenticAMD");
        let (vector_bytes, fma_units) = if has("avx512f") {
            (64, if amd { 1 } else { 2 })
        } else if has("avx2") || has("avx") {
            (32, 2)
        } else {
            // NEON/ASIMD, SSE, or unknown.
            (16, 2)
        };
        HostCpu {
            model: value("model name")
                .or_else(|| value("Model"))
                .unwrap_or_else(|| std::env::consts::ARCH.to_owned()),
            logical_cpus: logical_cpus.max(1),
            simd: SIMD_FLAGS
                .iter()
                .filter(|f| has(f))
                .map(|f| (*f).to_owned())
                .collect(),
            vector_bytes,
            fma_units,
            l1d_bytes: caches.l1d,
            l2_bytes: caches.l2,
            l3_bytes: caches.l3,
        }
    }

    /// This machine's CPU. What cannot be read is left out (no flags, no cache sizes).
    pub fn detect() -> HostCpu {
        let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpus = std::thread::available_parallelism()
            .map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX));
        HostCpu::parse(
            &cpuinfo,
            read_caches("/sys/devices/system/cpu/cpu0/cache"),
            cpus,
        )
    }

    /// f32 lanes of the widest vector.
    pub fn f32_lanes(&self) -> u32 {
        (self.vector_bytes / 4).max(1)
    }

    /// The prompt's description of this CPU, a few lines under a heading.
    pub fn describe(&self) -> String {
        let mut s = String::from("#### This machine (detected when the run started)\n");
        let plural = if self.logical_cpus == 1 { "" } else { "s" };
        let _ = writeln!(
            s,
            "- CPU: {}, {} logical CPU{plural}; the kernel is called from one thread.",
            self.model, self.logical_cpus
        );
        if self.simd.is_empty() {
            let _ = writeln!(s, "- SIMD: none detected.");
        } else {
            let names: Vec<String> = self.simd.iter().map(|f| simd_name(f)).collect();
            let _ = writeln!(
                s,
                "- SIMD: {}; `-march=native` enables all of them{}.",
                names.join(", "),
                macro_hint(&self.simd)
            );
        }
        let _ = writeln!(
            s,
            "- Widest vector: {} bytes ({} f32 lanes); {} full-width FMA{} started per cycle (assumed{}).",
            self.vector_bytes,
            self.f32_lanes(),
            self.fma_units,
            if self.fma_units == 1 { "" } else { "s" },
            if self.vector_bytes == 64 && self.fma_units == 1 {
                ": AMD cores run 512-bit operations on two 256-bit pipes"
            } else {
                ""
            }
        );
        let caches: Vec<String> = [
            ("L1d", self.l1d_bytes),
            ("L2", self.l2_bytes),
            ("L3", self.l3_bytes),
        ]
        .into_iter()
        .filter_map(|(name, b)| b.map(|b| format!("{name} {}", bytes(b))))
        .collect();
        if caches.is_empty() {
            let _ = writeln!(s, "- Caches: not reported.");
        } else {
            let _ = writeln!(
                s,
                "- Caches: {} (as cpu0 reports them; the L3 may be shared with other cores).",
                caches.join(", ")
            );
        }
        s
    }
}

/// `avx512bw` → `AVX-512BW`, `sse4_2` → `SSE4.2`.
fn simd_name(flag: &str) -> String {
    match flag {
        "sse4_2" => "SSE4.2".into(),
        "asimd" => "NEON (ASIMD)".into(),
        "asimdhp" => "NEON fp16".into(),
        "amx_tile" => "AMX".into(),
        f => match f.strip_prefix("avx512") {
            Some(rest) => format!("AVX-512{}", rest.trim_start_matches('_').to_uppercase()),
            None => f.to_uppercase(),
        },
    }
}

/// The feature macro of the widest x86 extension, for `#ifdef`s.
fn macro_hint(simd: &[String]) -> &'static str {
    let has = |f: &str| simd.iter().any(|x| x == f);
    if has("avx512f") {
        " (`__AVX512F__`, `__AVX2__` and `__FMA__` are defined)"
    } else if has("avx2") && has("fma") {
        " (`__AVX2__` and `__FMA__` are defined; `__AVX512F__` is not)"
    } else if has("avx2") {
        " (`__AVX2__` is defined; `__FMA__` and `__AVX512F__` are not)"
    } else {
        ""
    }
}

/// `32 KiB`, `1 MiB`, `1.5 MiB`.
fn bytes(b: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * KIB;
    if b >= MIB && b.is_multiple_of(MIB / 2) {
        let whole = b / MIB;
        if b.is_multiple_of(MIB) {
            format!("{whole} MiB")
        } else {
            format!("{whole}.5 MiB")
        }
    } else if b >= KIB && b.is_multiple_of(KIB) {
        format!("{} KiB", b / KIB)
    } else {
        format!("{b} bytes")
    }
}

/// The data and unified caches of one CPU from its sysfs directory.
pub fn read_caches(dir: &str) -> CacheSizes {
    let mut caches = CacheSizes::default();
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
            "1" if kind != "Instruction" => caches.l1d = Some(bytes),
            "2" => caches.l2 = Some(bytes),
            "3" => caches.l3 = Some(bytes),
            _ => {}
        }
    }
    caches
}

/// "32K", "1024K", "32M", "1G" or a plain byte count.
fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (digits, mult) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 1024),
        'M' | 'm' => (&s[..s.len() - 1], 1024 * 1024),
        'G' | 'g' => (&s[..s.len() - 1], 1024 * 1024 * 1024),
        _ => (s, 1),
    };
    digits.trim().parse::<u64>().ok().map(|v| v * mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    const EPYC: &str = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9B14\n\
        flags\t\t: fpu sse sse2 ssse3 sse4_1 sse4_2 avx f16c avx2 fma avx512f avx512dq avx512cd avx512bw avx512vl avx512_bf16 avx512_vnni\n\
        processor\t: 1\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9B14\n";

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("32K"), Some(32 * 1024));
        assert_eq!(parse_size("1024K"), Some(1024 * 1024));
        assert_eq!(parse_size("32M"), Some(32 * 1024 * 1024));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("x"), None);
    }

    #[test]
    fn vector_width_and_fma_pipes_from_the_flags() {
        let h = HostCpu::parse(EPYC, CacheSizes::default(), 2);
        assert_eq!((h.vector_bytes, h.fma_units), (64, 1));
        let avx2 = "vendor_id\t: GenuineIntel\nflags\t\t: fpu sse avx avx2 fma\n";
        let h = HostCpu::parse(avx2, CacheSizes::default(), 8);
        assert_eq!((h.vector_bytes, h.fma_units), (32, 2));
        let arm = "Features\t: fp asimd evtstrm aes\n";
        let h = HostCpu::parse(arm, CacheSizes::default(), 4);
        assert_eq!(
            (h.vector_bytes, h.fma_units, h.simd.clone()),
            (16, 2, vec!["asimd".to_owned()])
        );
    }

    #[test]
    fn the_description_names_the_cpu_its_simd_and_caches() {
        let caches = CacheSizes {
            l1d: Some(32 * 1024),
            l2: Some(1024 * 1024),
            l3: Some(32 * 1024 * 1024),
        };
        let h = HostCpu::parse(EPYC, caches, 2);
        assert_eq!(h.model, "AMD EPYC 9B14");
        assert_eq!(
            h.simd,
            [
                "sse4_2",
                "avx",
                "avx2",
                "fma",
                "f16c",
                "avx512f",
                "avx512dq",
                "avx512cd",
                "avx512bw",
                "avx512vl",
                "avx512_vnni",
                "avx512_bf16"
            ]
        );
        insta::assert_snapshot!(h.describe(), @r"
        #### This machine (detected when the run started)
        - CPU: AMD EPYC 9B14, 2 logical CPUs; the kernel is called from one thread.
        - SIMD: SSE4.2, AVX, AVX2, FMA, F16C, AVX-512F, AVX-512DQ, AVX-512CD, AVX-512BW, AVX-512VL, AVX-512VNNI, AVX-512BF16; `-march=native` enables all of them (`__AVX512F__`, `__AVX2__` and `__FMA__` are defined).
        - Widest vector: 64 bytes (16 f32 lanes); 1 full-width FMA started per cycle (assumed: AMD cores run 512-bit operations on two 256-bit pipes).
        - Caches: L1d 32 KiB, L2 1 MiB, L3 32 MiB (as cpu0 reports them; the L3 may be shared with other cores).
        ");
    }

    #[test]
    fn what_is_unknown_is_said_to_be_unknown() {
        let h = HostCpu::parse("", CacheSizes::default(), 0);
        assert_eq!(h.logical_cpus, 1);
        let d = h.describe();
        assert!(d.contains("- SIMD: none detected."), "{d}");
        assert!(d.contains("- Caches: not reported."), "{d}");
    }

    #[test]
    fn a_record_without_optional_caches_reads_back() {
        let h = HostCpu::parse(EPYC, CacheSizes::default(), 2);
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(serde_json::from_str::<HostCpu>(&json).unwrap(), h);
    }

    #[test]
    fn detection_is_sane() {
        let h = HostCpu::detect();
        assert!(h.vector_bytes >= 16 && h.logical_cpus >= 1);
    }
}
