use ksearch_knowledge::{Detection, detect_with, normalize};

use crate::knowledge;

/// Detection with canned command outputs.
fn detect(os: &str, outputs: &[(&str, &str)]) -> Option<Detection> {
    let k = knowledge();
    let mut run = |program: &str, _args: &[&str]| {
        outputs
            .iter()
            .find(|(p, _)| *p == program)
            .map(|(_, out)| (*out).to_owned())
    };
    detect_with(&k, os, &mut run)
}

fn id(d: Option<Detection>) -> Option<String> {
    d.and_then(|d| d.hardware)
}

#[test]
fn nvidia_names_map_to_files() {
    let smi = |name: &str| detect("linux", &[("nvidia-smi", name)]);
    assert_eq!(id(smi("NVIDIA H200\n")), Some("h200".into()));
    assert_eq!(id(smi("NVIDIA H200\nNVIDIA H200\n")), Some("h200".into()));
    assert_eq!(id(smi("NVIDIA H100 80GB HBM3")), Some("h100-sxm".into()));
    assert_eq!(
        id(smi("NVIDIA A100-SXM4-80GB")),
        Some("a100-sxm-80gb".into())
    );
    assert_eq!(id(smi("NVIDIA B200")), Some("b200".into()));
    // Other parts are found but not mapped to a file that would describe them wrongly.
    for other in [
        "NVIDIA H100 PCIe",
        "NVIDIA A100-SXM4-40GB",
        "NVIDIA H200 NVL",
        "NVIDIA GeForce RTX 4090",
    ] {
        let d = smi(other).expect("a GPU was found");
        assert_eq!(d.name, other);
        assert_eq!(d.hardware, None, "{other}");
    }
    // No nvidia-smi, not macOS: nothing.
    assert_eq!(detect("linux", &[]), None);
}

#[test]
fn apple_names_map_to_files() {
    let d = detect("macos", &[("sysctl", "Apple M3 Max\n")]).expect("found");
    assert_eq!(d.hardware.as_deref(), Some("m3-max"));
    assert_eq!(d.via, "sysctl -n machdep.cpu.brand_string");
    let profiler = "Graphics/Displays:\n\n    Apple M2 Ultra:\n\n      Chipset Model: Apple M2 Ultra\n      Type: GPU\n      Total Number of Cores: 76\n";
    let d = detect(
        "macos",
        &[
            ("sysctl", "Intel(R) Core(TM) i9"),
            ("system_profiler", profiler),
        ],
    )
    .expect("found");
    assert_eq!(d.hardware.as_deref(), Some("m2-ultra"));
    // An M3 (not Max) is found but has no file.
    let d = detect("macos", &[("sysctl", "Apple M3")]).expect("found");
    assert_eq!(d.hardware, None);
    // macOS tools are not run elsewhere.
    assert_eq!(detect("linux", &[("sysctl", "Apple M3 Max")]), None);
}

#[test]
fn explicit_names_resolve_fuzzily() {
    let k = knowledge();
    let find = |n: &str| k.find_hardware(n).map(|h| h.id.clone());
    assert_eq!(find("h200").as_deref(), Some("h200"));
    assert_eq!(find("NVIDIA H200").as_deref(), Some("h200"));
    assert_eq!(find("M1 Max").as_deref(), Some("m1-max"));
    assert_eq!(find("apple m4 max").as_deref(), Some("m4-max"));
    assert_eq!(find("h100").as_deref(), Some("h100-sxm"));
    assert_eq!(find("x86_64").as_deref(), Some("generic-x86-64"));
    assert_eq!(find("mi300x"), None);
    assert_eq!(normalize("NVIDIA A100-SXM4-80GB"), ["a100", "sxm4", "80gb"]);
    // An explicit name overrides detection; an unknown one is an error.
    let chosen = k.select_hardware(Some("Apple M1 Max")).expect("known");
    assert_eq!(chosen.map(|h| h.id.as_str()), Some("m1-max"));
    assert!(k.select_hardware(Some("tpu v5e")).is_err());
}
