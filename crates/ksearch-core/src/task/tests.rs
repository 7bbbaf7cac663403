use super::*;

const GOOD: &str = r#"
format = 1
name = "softmax"
description = "row softmax"
class = "reduction"
backend = "c"
axes = ["rows", "cols"]

[[inputs]]
name = "x"
shape = ["rows", "cols"]
dtype = "f32"
init = { uniform = [-10, 10] }

[[outputs]]
name = "y"
shape = ["rows", "cols"]
dtype = "f32"

[[workloads]]
name = "small"
axes = { rows = 4, cols = 8 }

[[workloads]]
name = "big"
axes = { rows = 64, cols = 1024 }

[tolerance.f32]
atol = 1e-6
rtol = 1e-5
norm_rtol = 1e-6

[reference]
file = "reference.c"

[seed]
file = "seed.c"
"#;

fn err(text: &str) -> TaskError {
    parse_task(text, "t/task.toml").expect_err("task should be rejected")
}

#[test]
fn parses_a_good_task_and_round_trips() {
    let spec = parse_task(GOOD, "t/task.toml").unwrap();
    assert_eq!(spec.name, "softmax");
    assert_eq!(spec.workloads[1].axes["cols"], 1024);
    assert_eq!(spec.tolerance_for(Dtype::F32).atol, 1e-6);
    assert_eq!(
        spec.tolerance_for(Dtype::F64),
        Tolerance::default_for(Dtype::F64)
    );
    assert_eq!(spec.inputs[0].init(), Init::Uniform([-10.0, 10.0]));
    let written = toml::to_string(&spec).unwrap();
    assert_eq!(parse_task(&written, "round-trip").unwrap(), spec);
    assert_eq!(spec.bytes_per_call(&spec.workloads[0]), 4 * 8 * 4 * 2);
}

const CONV: &str = r#"
format = 1
name = "conv1d"
description = "valid 1-d convolution"
class = "convolution"
backend = "c"
axes = ["n", "taps", "nout"]
derived = { nout = "n - taps + 1" }

[[inputs]]
name = "x"
shape = ["n"]
dtype = "f32"

[[inputs]]
name = "w"
shape = ["taps"]
dtype = "f32"

[[outputs]]
name = "y"
shape = ["nout"]
dtype = "f32"

[[workloads]]
name = "small"
axes = { n = 100, taps = 7 }

[[workloads]]
name = "big"
axes = { n = 4096, taps = 31, nout = 4066 }

[reference]
file = "reference.c"

[seed]
file = "seed.c"
"#;

#[test]
fn derived_axes_are_computed_checked_and_round_trip() {
    let spec = parse_task(CONV, "t/task.toml").unwrap();
    assert_eq!(spec.workloads[0].axes["nout"], 94, "computed");
    assert_eq!(spec.workloads[1].axes["nout"], 4066, "stated and right");
    let written = toml::to_string(&spec).unwrap();
    assert_eq!(parse_task(&written, "round-trip").unwrap(), spec);

    // The slip that made a reference read past its input: a stated value that disagrees.
    let text = CONV.replace("nout = 4066", "nout = 4067");
    let e = err(&text);
    assert_eq!(e.field, "workloads[1].axes.nout");
    assert_eq!(
        e.message,
        "is 4067, but `nout` = n - taps + 1 makes it 4066"
    );
    let line = text.lines().position(|l| l.contains("4067")).unwrap() + 1;
    assert_eq!(e.location.unwrap().line, line);

    // A derived size that is not positive is refused like a stated one.
    let e = err(&CONV.replace("n = 100, taps = 7", "n = 5, taps = 7"));
    assert_eq!(e.field, "workloads[0].axes.nout");
    assert!(e.message.contains("must be a positive integer"), "{e}");
}

#[test]
fn bad_derived_axes_name_the_field() {
    let with = |d: &str| err(&CONV.replace(r#"nout = "n - taps + 1""#, d));
    let e = with(r#"nout = "n - tap + 1""#);
    assert_eq!(e.field, "derived.nout");
    assert_eq!(e.message, "`tap` is not a declared axis");
    assert_eq!(e.location.unwrap().line, 8);
    let e = with(r#"m = "n + 1""#);
    assert_eq!(e.field, "derived.m");
    assert!(e.message.starts_with("`m` is not a declared axis"), "{e}");
    let e = with(r#"nout = "n - (taps""#);
    assert_eq!(e.message, "the `(` at character 5 is not closed");
    let e = with(r#"nout = "n - taps + 1", taps = "nout + 1""#);
    assert_eq!(e.field, "derived.nout");
    assert_eq!(
        e.message,
        "`taps` is derived itself; derive from declared axes only"
    );
    let e = with(r#"nout = "n / (taps - 7)""#);
    assert_eq!(e.field, "workloads[0].axes");
    assert_eq!(
        e.message,
        "derived axis `nout` = n / (taps - 7): division by zero"
    );
}

#[test]
fn unknown_key_names_file_line_and_field() {
    let text = GOOD.replace("name = \"big\"", "name = \"big\"\nrepeat = 3");
    let e = err(&text);
    assert_eq!(e.field, "workloads[1].repeat");
    assert!(e.message.contains("unknown field `repeat`"), "{e}");
    let line = text.lines().position(|l| l.starts_with("repeat")).unwrap() + 1;
    assert_eq!(e.location.unwrap().line, line);
    assert!(
        e.to_string().starts_with(&format!("t/task.toml:{line}:")),
        "{e}"
    );
}

#[test]
fn syntax_error_has_a_location() {
    let e = err("format = 1\nname = = 2\n");
    assert_eq!(e.location.unwrap().line, 2);
    assert!(e.field.is_empty());
}

#[test]
fn wrong_type_names_the_field() {
    let e = err(&GOOD.replace("rows = 64", "rows = \"many\""));
    assert_eq!(e.field, "workloads[1].axes.rows");
    assert!(e.message.contains("invalid type"), "{e}");
}

#[test]
fn semantic_errors_point_at_the_field() {
    let cases: &[(&str, &str, &str, &str)] = &[
        ("format = 1", "format = 7", "format", "not supported"),
        (
            "rows = 64,",
            "rows = -4,",
            "workloads[1].axes.rows",
            "positive",
        ),
        (
            "axes = { rows = 4, cols = 8 }",
            "axes = { rows = 4 }",
            "workloads[0].axes",
            "`cols` has no value",
        ),
        (
            "shape = [\"rows\", \"cols\"]\ndtype = \"f32\"\ninit",
            "shape = [\"rows\", \"k\"]\ndtype = \"f32\"\ninit",
            "inputs[0].shape[1]",
            "not a declared axis",
        ),
        (
            "name = \"softmax\"",
            "name = \"soft max\"",
            "name",
            "identifier",
        ),
        (
            "dtype = \"f32\"\ninit",
            "dtype = \"f16\"\ninit",
            "inputs[0].dtype",
            "does not support",
        ),
        (
            "init = { uniform = [-10, 10] }",
            "init = { uniform = [10, -10] }",
            "inputs[0].init",
            "low <= high",
        ),
        (
            "file = \"seed.c\"",
            "file = \"../seed.c\"",
            "seed.file",
            "inside the task directory",
        ),
        ("atol = 1e-6", "atol = -1.0", "tolerance.f32.atol", ">= 0"),
        (
            "name = \"big\"",
            "name = \"small\"",
            "workloads[1].name",
            "declared twice",
        ),
    ];
    for (from, to, field, message) in cases {
        assert!(GOOD.contains(from), "fixture lacks {from}");
        let e = err(&GOOD.replacen(from, to, 1));
        assert_eq!(e.field, *field, "{e}");
        assert!(e.message.contains(message), "{e}");
        assert!(e.location.is_some(), "no location for {e}");
    }
}

const BASELINE: &str = r#"
[baseline]
name = "OpenBLAS"
file = "baseline.c"
libs = ["openblas"]

[baseline.install.openblas]
name = "OpenBLAS"
debian = "libopenblas-dev"
"#;

#[test]
fn a_baseline_names_how_to_install_its_libraries() {
    let text = format!("{GOOD}{BASELINE}");
    let spec = parse_task(&text, "t/task.toml").unwrap();
    let b = spec.baseline.as_ref().unwrap();
    assert_eq!(
        b.install["openblas"],
        InstallHint {
            name: "OpenBLAS".into(),
            debian: Some("libopenblas-dev".into()),
            pip: None,
        }
    );
    let written = toml::to_string(&spec).unwrap();
    assert_eq!(parse_task(&written, "round-trip").unwrap(), spec);
    // The hint is optional, and so is its package.
    let bare = text.replace("debian = \"libopenblas-dev\"\n", "");
    let spec = parse_task(&bare, "t/task.toml").unwrap();
    assert_eq!(spec.baseline.unwrap().install["openblas"].debian, None);
    let none = text.replace("[baseline.install.openblas]\nname = \"OpenBLAS\"\n", "");
    let none = none.replace("debian = \"libopenblas-dev\"\n", "");
    assert!(
        parse_task(&none, "t/task.toml")
            .unwrap()
            .baseline
            .unwrap()
            .install
            .is_empty()
    );
}

#[test]
fn install_hints_are_checked_at_their_field() {
    let text = format!("{GOOD}{BASELINE}");
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "debian = \"libopenblas-dev\"",
            "apt = \"libopenblas-dev\"",
            "baseline.install.openblas.apt",
            "unknown field `apt`",
        ),
        (
            "[baseline.install.openblas]",
            "[baseline.install.blas]",
            "baseline.install.blas",
            "not one of this baseline's `libs` (openblas)",
        ),
        (
            "debian = \"libopenblas-dev\"",
            "debian = \"libopenblas-dev; rm -rf ~\"",
            "baseline.install.openblas.debian",
            "not a Debian package name",
        ),
        (
            "[baseline.install.openblas]\nname = \"OpenBLAS\"",
            "[baseline.install.openblas]\nname = \" \"",
            "baseline.install.openblas.name",
            "the name users know it by",
        ),
    ];
    for (from, to, field, message) in cases {
        assert!(text.contains(from), "fixture lacks {from}");
        let e = err(&text.replacen(from, to, 1));
        assert_eq!(e.field, *field, "{e}");
        assert!(e.message.contains(message), "{e}");
        let line = e.location.expect("a location").line;
        assert!(line > GOOD.lines().count(), "{e}");
        assert!(e.to_string().starts_with("t/task.toml:"), "{e}");
    }
    // Comparisons are held to the same rules.
    let comparison = BASELINE
        .replace("[baseline]", "[[comparisons]]")
        .replace("[baseline.install.openblas]", "[comparisons.install.blis]");
    let e = err(&format!("{GOOD}{comparison}"));
    assert_eq!(e.field, "comparisons[0].install.blis");
    assert!(e.message.contains("comparison's `libs`"), "{e}");
}

#[test]
fn one_workload_is_not_enough() {
    let text = GOOD.replace(
        "[[workloads]]\nname = \"big\"\naxes = { rows = 64, cols = 1024 }\n",
        "",
    );
    let e = err(&text);
    assert_eq!(e.field, "workloads");
    assert!(e.message.contains("at least two"), "{e}");
}
