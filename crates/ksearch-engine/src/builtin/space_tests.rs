use ksearch_core::space::{TaskSpace, parse_space};
use ksearch_core::task::{Source, TaskSpec, Workload};

use super::*;
use crate::builtin::families::{Family, point_of};

const SPACE: &str = r#"
format = 1
summary = "tiles"
template = "k.cu.j2"
includes = ["part.j2"]

[[knobs]]
name = "block"
tactic = "tiling"
description = "Rows per block."
difficulty = 2
ordered = true
seed = 16
values = [
  { value = 16, label = "16 rows" },
  { value = 64, label = "64 rows", hint = 2.0 },
  { value = 1024, label = "1024 rows", hint = 3.0 },
]

[[knobs]]
name = "warps"
tactic = "warps per block"
description = "Warps."
difficulty = 1
seed = 1
values = [
  { value = 1, label = "1 warp" },
  { value = 4, label = "4 warps", hint = 1.5 },
]

[[constraints]]
check = "block * axes.dim * 2 <= hw.on_chip.shared_per_block_bytes"
message = "a tile of rows must fit in shared memory"
"#;

fn spec() -> TaskSpec {
    let mut s = ksearch_core::task::tests_support::matmul_spec();
    s.backend = ksearch_core::task::BackendKind::Mlx;
    s.axes = vec!["n".into(), "dim".into()];
    s.workloads = vec![
        Workload {
            name: "d64".into(),
            axes: [("n".to_owned(), 4096), ("dim".to_owned(), 64)].into(),
        },
        Workload {
            name: "d128".into(),
            axes: [("n".to_owned(), 4096), ("dim".to_owned(), 128)].into(),
        },
    ];
    s
}

fn space(text: &str, template: &str) -> TaskSpace {
    TaskSpace {
        file: "space/space.toml".into(),
        spec: parse_space(text, "space.toml").unwrap(),
        templates: vec![
            Source {
                file: "k.cu.j2".into(),
                text: template.into(),
            },
            Source {
                file: "part.j2".into(),
                text: "warps={{ warps }}".into(),
            },
        ],
    }
}

fn h200() -> ksearch_knowledge::Hardware {
    ksearch_eval::knowledge()
        .hardware("h200")
        .expect("h200 is in the knowledge base")
        .clone()
}

const TEMPLATE: &str =
    "// {{ ksearch_config }} on {{ target }}\nblock={{ block }} {% include 'part.j2' %}";

#[test]
fn a_point_renders_with_its_knobs_and_includes() {
    let hw = h200();
    let f = FileSpace::new(&spec(), &space(SPACE, TEMPLATE), Some(&hw)).unwrap();
    assert_eq!(f.seed(), point_of(&[("block", 16), ("warps", 1)]));
    assert_eq!(f.extension(), "cu");
    let src = f.render(&point_of(&[("block", 64), ("warps", 4)])).unwrap();
    assert_eq!(src, "// block=64 warps=4 on cuda\nblock=64 warps=4");
}

#[test]
fn constraints_read_the_hardware_and_every_workload() {
    let hw = h200();
    let limit = hw.limit("shared_per_block_bytes").unwrap();
    assert_eq!(
        limit, 49152.0,
        "the test assumes 48 KB of static shared memory"
    );
    let f = FileSpace::new(&spec(), &space(SPACE, TEMPLATE), Some(&hw)).unwrap();
    // 64 rows × 128 × 2 = 16 KB fits; 1024 × 64 × 2 = 128 KB does not, on either workload.
    assert!(f.valid(&point_of(&[("block", 64), ("warps", 1)])));
    let e = f
        .check_point(&point_of(&[("block", 1024), ("warps", 1)]))
        .unwrap_err();
    assert_eq!(
        e,
        PointError::Constraint {
            check: "block * axes.dim * 2 <= hw.on_chip.shared_per_block_bytes".into(),
            message: "a tile of rows must fit in shared memory".into(),
            workload: "d64".into(),
        }
    );
    // Without hardware the limit is unknown: the point is refused with the expression named.
    let f = FileSpace::new(&spec(), &space(SPACE, TEMPLATE), None).unwrap();
    match f.check_point(&f.seed()) {
        Err(PointError::Template(m)) => assert!(m.contains("hw.on_chip"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn hints_and_cost_expressions_give_the_model_s_prediction() {
    let hw = h200();
    let f = FileSpace::new(&spec(), &space(SPACE, TEMPLATE), Some(&hw)).unwrap();
    let machine = crate::builtin::machine::generic();
    let w = &spec().workloads[0];
    let seed = f.cost(&f.seed(), w, &machine).cycles;
    let tiled = f
        .cost(&point_of(&[("block", 64), ("warps", 4)]), w, &machine)
        .cycles;
    assert!(
        (seed / tiled - 3.0).abs() < 1e-9,
        "hints 2 × 1.5: {}",
        seed / tiled
    );
    assert_eq!(f.cost_model(), "the space's hints");

    let with_cost = format!("{SPACE}\n[cost]\ntime = \"axes.n * axes.dim / (block * warps)\"\n");
    let f = FileSpace::new(&spec(), &space(&with_cost, TEMPLATE), Some(&hw)).unwrap();
    assert_eq!(f.cost_model(), "the space's cost expression");
    let c = |b, wp| {
        f.cost(&point_of(&[("block", b), ("warps", wp)]), w, &machine)
            .cycles
    };
    assert_eq!(c(16, 1), 4096.0 * 64.0 / 16.0);
    assert_eq!(c(64, 4), 4096.0 * 64.0 / 256.0);
}

#[test]
fn a_pattern_must_be_in_the_knowledge_base() {
    let text = SPACE.replace(
        "tactic = \"tiling\"",
        "tactic = \"tiling\"\npattern = \"no-such-pattern\"",
    );
    let e = FileSpace::new(&spec(), &space(&text, TEMPLATE), None).unwrap_err();
    assert!(
        e.contains("knobs[0].pattern") && e.contains("no-such-pattern"),
        "{e}"
    );
    let text = SPACE.replace(
        "tactic = \"tiling\"",
        "tactic = \"tiling\"\npattern = \"tiling-shared-memory\"",
    );
    assert!(FileSpace::new(&spec(), &space(&text, TEMPLATE), None).is_ok());
}

#[test]
fn a_template_error_is_found_when_the_space_loads_or_renders() {
    let e = FileSpace::new(&spec(), &space(SPACE, "{% if block %}"), None).unwrap_err();
    assert!(e.contains("k.cu.j2"), "{e}");
    let hw = h200();
    let f = FileSpace::new(&spec(), &space(SPACE, "{{ blok }}"), Some(&hw)).unwrap();
    let e = f.render(&f.seed()).unwrap_err();
    assert!(e.contains("k.cu.j2") && e.contains("undefined"), "{e}");
}

#[test]
fn a_template_rendering_past_the_candidate_limit_is_refused() {
    // A million bytes: more than a candidate may have, and more than the run store keeps.
    let template = "{% for i in range(1000) %}{% for j in range(1000) %}x{% endfor %}{% endfor %}";
    let hw = h200();
    let f = FileSpace::new(&spec(), &space(SPACE, template), Some(&hw)).unwrap();
    let e = f.render(&f.seed()).unwrap_err();
    assert!(
        e.contains("k.cu.j2 renders to 1000000 bytes") && e.contains("at most 524288"),
        "{e}"
    );
}

#[test]
fn points_start_at_the_seed_and_a_sample_is_fixed() {
    let hw = h200();
    let f = FileSpace::new(&spec(), &space(SPACE, TEMPLATE), Some(&hw)).unwrap();
    let all = f.points(100, &Point::new());
    assert_eq!(all.len(), 6);
    assert_eq!(all[0], f.seed());
    // The seed's neighbours next: one knob changed each.
    for p in &all[1..4] {
        let changed = p.iter().filter(|(k, v)| f.seed()[*k] != **v).count();
        assert_eq!(changed, 1, "{p:?}");
    }
    let some = f.points(2, &Point::new());
    assert_eq!(some.len(), 2);
    assert_eq!(some, f.points(2, &Point::new()));
    let report = f.check(4, &Point::new(), |c, _| {
        if c["warps"] == 4 {
            Err("no".into())
        } else {
            Ok(())
        }
    });
    assert_eq!(report.total, 6);
    assert_eq!(report.points.len(), 4);
    assert_eq!(report.failed(), 1);
    assert_eq!(report.excluded(), 1, "1024 rows do not fit");
    let text = report.render("t", "space/space.toml");
    assert!(text.contains("a sample of 4 of its 6 points"), "{text}");
    assert!(text.contains("FAILED    block=16 warps=4:"), "{text}");
}

#[test]
fn pinned_knobs_hold_in_every_point_and_bad_settings_are_named() {
    let hw = h200();
    let f = FileSpace::new(&spec(), &space(SPACE, TEMPLATE), Some(&hw)).unwrap();
    let pinned = f.pin(&["warps=4".to_string()]).unwrap();
    let points = f.points(100, &pinned);
    assert_eq!(points.len(), 3, "{points:?}");
    assert!(points.iter().all(|p| p["warps"] == 4), "{points:?}");
    assert_eq!(f.size_with(&pinned), 3);
    let report = f.check(100, &pinned, |_, _| Ok(()));
    assert_eq!(report.total, 3);
    let e = f.pin(&["wraps=4".to_string()]).unwrap_err();
    assert!(e.contains("no knob `wraps`") && e.contains("warps"), "{e}");
    let e = f.pin(&["warps=3".to_string()]).unwrap_err();
    assert!(e.contains("`warps` takes one of"), "{e}");
    let e = f.pin(&["warps".to_string()]).unwrap_err();
    assert!(e.contains("KNOB=VALUE"), "{e}");
}
