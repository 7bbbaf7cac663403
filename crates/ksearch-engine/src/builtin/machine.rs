//! What the builtin proposer's cost models know about the CPU they run on.
//!
//! The model works in cycles of one core. Vector width and cache sizes are read from the
//! machine; the bandwidths are modelling assumptions, kept with their reasons in the knowledge
//! layer's CPU host model (`knowledge/hardware/generic-x86-64.toml`), which also supplies every
//! value detection cannot read. The numbers only need to rank candidates sensibly;
//! measurements correct them.

use ksearch_knowledge::HostCpu;

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

/// The host's parameters: the vector width and FMA pipes from `/proc/cpuinfo`, the caches from
/// `/sys/devices/system/cpu/cpu0/cache` (the knowledge layer's [`HostCpu`] detection); any cache
/// size not reported keeps its [`generic`] value.
pub fn detect() -> Machine {
    from_host(&HostCpu::detect())
}

/// The cost model's parameters for a detected CPU.
pub fn from_host(h: &HostCpu) -> Machine {
    let mut m = generic();
    m.vector_bytes = h.vector_bytes;
    m.fma_units = h.fma_units;
    let size = |b: u64| usize::try_from(b).unwrap_or(usize::MAX);
    if let Some(l1) = h.l1d_bytes {
        m.l1_bytes = size(l1);
    }
    if let Some(l2) = h.l2_bytes {
        m.l2_bytes = size(l2);
    }
    match (h.l3_bytes, h.l2_bytes) {
        (Some(l3), _) => m.llc_bytes = size(l3),
        (None, Some(l2)) => m.llc_bytes = size(l2),
        (None, None) => {}
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_detected_cpu_sets_the_width_and_the_caches() {
        let h = HostCpu::parse(
            "vendor_id\t: AuthenticAMD\nflags\t\t: fpu sse avx avx2 fma avx512f\n",
            ksearch_knowledge::CacheSizes {
                l1d: Some(48 * 1024),
                l2: Some(2 * 1024 * 1024),
                l3: None,
            },
            2,
        );
        let m = from_host(&h);
        assert_eq!((m.vector_bytes, m.fma_units), (64, 1));
        assert_eq!((m.l1_bytes, m.l2_bytes), (48 * 1024, 2 * 1024 * 1024));
        assert_eq!(
            m.llc_bytes,
            2 * 1024 * 1024,
            "no L3: the L2 is the last level"
        );
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
