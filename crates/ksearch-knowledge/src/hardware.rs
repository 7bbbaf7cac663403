//! Device specifications (`knowledge/hardware/*.toml`): one file per device.

use serde::{Deserialize, Serialize};

use crate::fact::{Fact, Unit};
use crate::platform::Target;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Vendor {
    Nvidia,
    Apple,
    Generic,
}

/// One device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hardware {
    /// The file's name without `.toml`, e.g. `h200`.
    pub id: String,
    /// What a user calls it: "NVIDIA H200 SXM 141GB".
    pub name: String,
    pub vendor: Vendor,
    /// Architecture and chip: "Hopper (GH100)".
    pub arch: String,
    pub target: Target,
    /// One or two sentences for prompts.
    pub summary: String,
    /// NVIDIA compute capability, e.g. "9.0".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_capability: Option<String>,
    /// Apple `MTLGPUFamily`, e.g. "Apple9".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_family: Option<String>,
    /// What MLX reports as `mx.metal.device_info()["architecture"]`, e.g. "applegpu_g15s".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlx_architecture: Option<String>,
    /// Names this device is detected or asked for by (matched after normalisation).
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Words that mean a *different* device when they appear in a detected name
    /// (e.g. `pcie` for an SXM part).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub detect_exclude: Vec<String>,
    /// Where the file's general facts come from.
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute: Option<Compute>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_chip: Option<OnChip>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix: Option<Matrix>,
    /// The CPU cost model's parameters (CPU hosts only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuSection>,
    #[serde(default, rename = "pitfall", skip_serializing_if = "Vec::is_empty")]
    pub pitfalls: Vec<Pitfall>,
}

/// Arithmetic throughput. Peaks are dense (no structured sparsity) and for the fastest path
/// the chip has for that type: tensor cores on NVIDIA, the ALUs (also behind
/// `simdgroup_matrix`) on Apple GPUs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Compute {
    /// "SM" or "GPU core".
    pub unit_name: String,
    pub units: Fact,
    pub clock_ghz: Fact,
    /// Non-tensor FP32 FMA throughput.
    pub peak_fp32_tflops: Fact,
    pub peak_fp16_tflops: Fact,
    pub peak_bf16_tflops: Fact,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_tf32_tflops: Option<Fact>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Memory {
    pub capacity_gb: Fact,
    pub bandwidth_gbs: Fact,
    pub l2_bytes: Fact,
    /// Apple's system-level cache (shared with the CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_cache_bytes: Option<Fact>,
}

/// Per-threadgroup and per-core limits. "Unit" is the SM (NVIDIA) or GPU core (Apple).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OnChip {
    /// Shared/threadgroup memory one block may declare statically (CUDA: without opting in).
    pub shared_per_block_bytes: Fact,
    /// The most one block can get after opting in (CUDA `cudaFuncSetAttribute`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_per_block_optin_bytes: Option<Fact>,
    pub shared_per_unit_bytes: Fact,
    pub registers_per_unit_bytes: Fact,
    pub max_registers_per_thread: Fact,
    /// Warp / SIMD-group width in threads.
    pub simd_width: Fact,
    pub max_threads_per_block: Fact,
    pub max_threads_per_unit: Fact,
}

/// The on-chip limits an assertion can check against.
pub const LIMIT_FIELDS: &[&str] = &[
    "shared_per_block_bytes",
    "shared_per_block_optin_bytes",
    "shared_per_unit_bytes",
    "max_threads_per_block",
    "simd_width",
];

impl OnChip {
    /// A limit by its field name (see [`LIMIT_FIELDS`]).
    pub fn limit(&self, field: &str) -> Option<&Fact> {
        match field {
            "shared_per_block_bytes" => Some(&self.shared_per_block_bytes),
            "shared_per_block_optin_bytes" => self.shared_per_block_optin_bytes.as_ref(),
            "shared_per_unit_bytes" => Some(&self.shared_per_unit_bytes),
            "max_threads_per_block" => Some(&self.max_threads_per_block),
            "simd_width" => Some(&self.simd_width),
            _ => None,
        }
    }
}

/// Matrix-multiply hardware: tensor cores, `simdgroup_matrix`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Matrix {
    pub available: bool,
    pub name: String,
    pub note: String,
    pub source: String,
}

/// Something that has bitten people on this device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pitfall {
    pub id: String,
    /// 1 (niche) – 3 (bites almost every kernel); decides what prompts keep when space is short.
    pub importance: u8,
    pub text: String,
    pub source: String,
}

/// The builtin proposer's CPU cost model, as data. Vector width and cache sizes are detected at
/// run time; these are the fallbacks, and the bandwidths are modelling assumptions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuSection {
    pub vector_bytes: Fact,
    pub fma_units: Fact,
    pub l1_bytes: Fact,
    pub l2_bytes: Fact,
    pub llc_bytes: Fact,
    pub dram_bytes_per_cycle: Fact,
    pub llc_bytes_per_cycle: Fact,
    /// L2 bandwidth as a multiple of the LLC's.
    pub l2_over_llc_bandwidth: Fact,
    /// Vector loads per cycle from L1 (L1 bandwidth = this × vector width).
    pub l1_vector_loads_per_cycle: Fact,
}

/// [`CpuSection`] as plain numbers: the parameters of one CPU core the builtin proposer's cost
/// models use, in cycles of that core.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuModel {
    /// Width of the widest usable SIMD register, in bytes (64 for AVX-512, 32 for AVX2, 16 for
    /// NEON or SSE).
    pub vector_bytes: u32,
    /// Full-width vector FMAs the core can start per cycle.
    pub fma_units: u32,
    pub l1_bytes: usize,
    pub l2_bytes: usize,
    pub llc_bytes: usize,
    /// Sustained DRAM bandwidth of one core (an assumption).
    pub dram_bytes_per_cycle: f64,
    /// Sustained last-level-cache bandwidth of one core (an assumption).
    pub llc_bytes_per_cycle: f64,
    /// L2 bandwidth over the LLC's (an assumption).
    pub l2_over_llc_bandwidth: f64,
    /// Vector loads per cycle from L1 (an assumption).
    pub l1_vector_loads_per_cycle: f64,
}

impl CpuModel {
    /// f32 lanes in one vector register.
    pub fn f32_lanes(&self) -> u32 {
        (self.vector_bytes / 4).max(1)
    }

    /// Vector FMAs (or other FP operations) of `lanes` f32 lanes the core completes per cycle:
    /// narrower vectors than the hardware's issue up to two a cycle (the FMA pipes split, as on
    /// Zen 4), wider ones take several instructions.
    pub fn vector_ops_per_cycle(&self, lanes: u32) -> f64 {
        let hw = self.f32_lanes();
        let units = f64::from(self.fma_units.max(1));
        if lanes > hw {
            units / f64::from(lanes.div_ceil(hw))
        } else {
            (units * f64::from(hw / lanes.max(1))).min(2.0_f64.max(units))
        }
    }

    /// Assumed L2 bandwidth: a multiple of the LLC's.
    pub fn l2_bytes_per_cycle(&self) -> f64 {
        self.l2_over_llc_bandwidth * self.llc_bytes_per_cycle
    }

    /// Assumed L1 bandwidth: a number of vector loads per cycle.
    pub fn l1_bytes_per_cycle(&self) -> f64 {
        self.l1_vector_loads_per_cycle * f64::from(self.vector_bytes)
    }

    /// Bandwidth of the level a working set of `bytes` lives in, when it is re-read.
    pub fn bytes_per_cycle_for(&self, working_set: f64) -> f64 {
        if working_set <= self.l1_bytes as f64 {
            self.l1_bytes_per_cycle()
        } else if working_set <= self.l2_bytes as f64 {
            self.l2_bytes_per_cycle()
        } else if working_set <= self.llc_bytes as f64 {
            self.llc_bytes_per_cycle
        } else {
            self.dram_bytes_per_cycle
        }
    }
}

impl CpuSection {
    pub(crate) fn facts(&self) -> [(&'static str, &Fact, Unit); 9] {
        [
            ("vector_bytes", &self.vector_bytes, Unit::Bytes),
            ("fma_units", &self.fma_units, Unit::Count),
            ("l1_bytes", &self.l1_bytes, Unit::Bytes),
            ("l2_bytes", &self.l2_bytes, Unit::Bytes),
            ("llc_bytes", &self.llc_bytes, Unit::Bytes),
            (
                "dram_bytes_per_cycle",
                &self.dram_bytes_per_cycle,
                Unit::BytesPerCycle,
            ),
            (
                "llc_bytes_per_cycle",
                &self.llc_bytes_per_cycle,
                Unit::BytesPerCycle,
            ),
            (
                "l2_over_llc_bandwidth",
                &self.l2_over_llc_bandwidth,
                Unit::Ratio,
            ),
            (
                "l1_vector_loads_per_cycle",
                &self.l1_vector_loads_per_cycle,
                Unit::Count,
            ),
        ]
    }

    /// The numbers; `None` when any is unknown (the loader rejects that for CPU files).
    pub fn model(&self) -> Option<CpuModel> {
        let u = |f: &Fact| f.value().map(|v| v as usize);
        Some(CpuModel {
            vector_bytes: self.vector_bytes.value()? as u32,
            fma_units: self.fma_units.value()? as u32,
            l1_bytes: u(&self.l1_bytes)?,
            l2_bytes: u(&self.l2_bytes)?,
            llc_bytes: u(&self.llc_bytes)?,
            dram_bytes_per_cycle: self.dram_bytes_per_cycle.value()?,
            llc_bytes_per_cycle: self.llc_bytes_per_cycle.value()?,
            l2_over_llc_bandwidth: self.l2_over_llc_bandwidth.value()?,
            l1_vector_loads_per_cycle: self.l1_vector_loads_per_cycle.value()?,
        })
    }
}

impl Hardware {
    /// The CPU cost model's numbers, for CPU hosts.
    pub fn cpu_model(&self) -> Option<CpuModel> {
        self.cpu.as_ref().and_then(CpuSection::model)
    }

    /// An on-chip limit in bytes or threads, when this device publishes it.
    pub fn limit(&self, field: &str) -> Option<f64> {
        self.on_chip.as_ref()?.limit(field)?.value()
    }

    /// Every published number by its field path (`on_chip.shared_per_block_bytes`), for
    /// expressions that weigh a design against the device (template spaces).
    pub fn numbers(&self) -> Vec<(String, f64)> {
        self.facts()
            .into_iter()
            .filter_map(|(path, fact, _)| fact.value().map(|v| (path, v)))
            .collect()
    }

    /// Every fact with its field path and unit, for validation and display.
    pub(crate) fn facts(&self) -> Vec<(String, &Fact, Unit)> {
        let mut out = Vec::new();
        if let Some(c) = &self.compute {
            let mut push = |f: &str, fact, unit| out.push((format!("compute.{f}"), fact, unit));
            push("units", &c.units, Unit::Count);
            push("clock_ghz", &c.clock_ghz, Unit::GigaHertz);
            push("peak_fp32_tflops", &c.peak_fp32_tflops, Unit::TeraFlops);
            push("peak_fp16_tflops", &c.peak_fp16_tflops, Unit::TeraFlops);
            push("peak_bf16_tflops", &c.peak_bf16_tflops, Unit::TeraFlops);
            if let Some(f) = &c.peak_tf32_tflops {
                push("peak_tf32_tflops", f, Unit::TeraFlops);
            }
        }
        if let Some(m) = &self.memory {
            out.push(("memory.capacity_gb".into(), &m.capacity_gb, Unit::GigaBytes));
            out.push((
                "memory.bandwidth_gbs".into(),
                &m.bandwidth_gbs,
                Unit::GigaBytesPerSecond,
            ));
            out.push(("memory.l2_bytes".into(), &m.l2_bytes, Unit::Bytes));
            if let Some(f) = &m.system_cache_bytes {
                out.push(("memory.system_cache_bytes".into(), f, Unit::Bytes));
            }
        }
        if let Some(o) = &self.on_chip {
            let mut push = |f: &str, fact, unit| out.push((format!("on_chip.{f}"), fact, unit));
            push(
                "shared_per_block_bytes",
                &o.shared_per_block_bytes,
                Unit::Bytes,
            );
            if let Some(f) = &o.shared_per_block_optin_bytes {
                push("shared_per_block_optin_bytes", f, Unit::Bytes);
            }
            push(
                "shared_per_unit_bytes",
                &o.shared_per_unit_bytes,
                Unit::Bytes,
            );
            push(
                "registers_per_unit_bytes",
                &o.registers_per_unit_bytes,
                Unit::Bytes,
            );
            push(
                "max_registers_per_thread",
                &o.max_registers_per_thread,
                Unit::Count,
            );
            push("simd_width", &o.simd_width, Unit::Count);
            push(
                "max_threads_per_block",
                &o.max_threads_per_block,
                Unit::Count,
            );
            push("max_threads_per_unit", &o.max_threads_per_unit, Unit::Count);
        }
        if let Some(c) = &self.cpu {
            for (name, fact, unit) in c.facts() {
                out.push((format!("cpu.{name}"), fact, unit));
            }
        }
        out
    }

    /// FLOP per byte below which FP32 work is memory-bound, when both numbers are known.
    pub fn fp32_ridge_point(&self) -> Option<f64> {
        self.ridge_point(self.compute.as_ref()?.peak_fp32_tflops.value()?)
    }

    /// The same for dense BF16 matrix work.
    pub fn bf16_ridge_point(&self) -> Option<f64> {
        self.ridge_point(self.compute.as_ref()?.peak_bf16_tflops.value()?)
    }

    fn ridge_point(&self, tflops: f64) -> Option<f64> {
        let bytes = self.memory.as_ref()?.bandwidth_gbs.value()? * 1e9;
        (bytes > 0.0).then(|| tflops * 1e12 / bytes)
    }
}
