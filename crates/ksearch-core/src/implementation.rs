//! A task's baselines and comparisons (`[baseline]`, `[[comparisons]]` in `task.toml`): other
//! implementations timed beside every candidate, and what they need that a machine may lack
//! (libraries they link, Python modules they import), with how to install it.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::backend::Dependency;
use crate::location::FieldPath;
use crate::task::{Source, check_relative_file};

/// How a user gets a library a baseline or comparison links (or a Python module it imports), for
/// the message shown when it is missing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstallHint {
    /// What the library is called, e.g. "OpenBLAS"; on systems without a known package, the
    /// user is told to install it by this name.
    pub name: String,
    /// The Debian and Ubuntu package that provides `-l<lib>`, e.g. `libopenblas-dev`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debian: Option<String>,
    /// The PyPI package that provides a Python module, e.g. `flashinfer-python`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pip: Option<String>,
}

/// The production implementation speedups are quoted against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BaselineRef {
    /// A name a user recognises, e.g. "OpenBLAS sgemm (1 thread)".
    pub name: String,
    pub file: String,
    /// Extra libraries to link (`m` for `-lm` is always linked). They are optional at run time:
    /// where one is missing, the implementation is left out (a baseline gives way to the
    /// reference) and the user is told how to install it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub libs: Vec<String>,
    /// Python modules it imports that a machine may lack (backends whose implementations are
    /// Python: `mlx`, `torch`), optional at run time as `libs` are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modules: Vec<String>,
    /// How to install each of `libs` (or `modules`), by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub install: BTreeMap<String, InstallHint>,
    /// Environment the worker sets before loading the baseline, e.g. thread counts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
}

/// The production baseline with its source loaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Baseline {
    pub name: String,
    pub source: Source,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub libs: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modules: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub install: BTreeMap<String, InstallHint>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
}

/// A baseline or comparison: its file, name, what it needs and how to install it. `needs` is
/// what its backend's implementations may need (`libs` on `c`, `modules` on the Python ones).
pub(crate) fn validate_implementation(
    path: &FieldPath,
    b: &BaselineRef,
    what: &str,
    needs: Dependency,
) -> Result<(), (FieldPath, String)> {
    check_relative_file(&path.key("file"), &b.file)?;
    if b.name.trim().is_empty() {
        return Err((path.key("name"), format!("give the {what} a name")));
    }
    let (field, names, other) = match needs {
        Dependency::Library => ("libs", &b.libs, ("modules", &b.modules)),
        Dependency::PythonModule => ("modules", &b.modules, ("libs", &b.libs)),
    };
    if !other.1.is_empty() {
        return Err((
            path.key(other.0),
            format!(
                "this backend's implementations name what they need in `{field}`, not `{}`",
                other.0
            ),
        ));
    }
    for (i, name) in names.iter().enumerate() {
        check_dependency_name(needs, name).map_err(|m| (path.key(field).index(i), m))?;
    }
    for (lib, hint) in &b.install {
        let at = path.key("install").key(lib);
        if !names.contains(lib) {
            return Err((
                at,
                format!(
                    "`{lib}` is not one of this {what}'s `{field}` ({})",
                    if names.is_empty() {
                        "none".to_owned()
                    } else {
                        names.join(", ")
                    }
                ),
            ));
        }
        if hint.name.trim().is_empty() {
            return Err((
                at.key("name"),
                format!("give `{lib}` the name users know it by"),
            ));
        }
        // Debian's rule for package names; the name is shown in a command to run.
        if let Some(pkg) = &hint.debian {
            let ok = pkg.len() >= 2
                && pkg.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                && pkg
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c));
            if !ok {
                return Err((
                    at.key("debian"),
                    format!("`{pkg}` is not a Debian package name"),
                ));
            }
        }
        // A PyPI name, optionally with extras (`mlx[cuda13]`); it is shown in a command to run.
        if let Some(pkg) = &hint.pip {
            // PyPI's rule: letters, digits, `-_.`, beginning and ending with a letter or digit.
            let word = |s: &str| {
                s.starts_with(|c: char| c.is_ascii_alphanumeric())
                    && s.ends_with(|c: char| c.is_ascii_alphanumeric())
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            };
            let ok = match pkg.split_once('[') {
                None => word(pkg),
                Some((base, rest)) => {
                    word(base)
                        && rest
                            .strip_suffix(']')
                            .is_some_and(|e| e.split(',').all(word))
                }
            };
            if !ok {
                return Err((at.key("pip"), format!("`{pkg}` is not a PyPI package name")));
            }
        }
    }
    Ok(())
}

/// A library as in `-l<name>`, or a module as in `import <name>`.
fn check_dependency_name(needs: Dependency, name: &str) -> Result<(), String> {
    match needs {
        Dependency::Library => crate::build::is_library_name(name)
            .then_some(())
            .ok_or_else(|| format!("`{name}` is not a library name (as in `-l<name>`)")),
        Dependency::PythonModule => name
            .split('.')
            .all(crate::task::is_identifier)
            .then_some(())
            .ok_or_else(|| format!("`{name}` is not a Python module name (as in `import <name>`)")),
    }
}

#[cfg(test)]
mod tests {
    use crate::backend::BackendKind;
    use crate::task::{BaselineRef, InstallHint, parse_task, tests_support::matmul_spec};

    /// The matmul spec on `backend` with one comparison, as task.toml text.
    fn with_comparison(backend: BackendKind, libs: &[&str], modules: &[&str]) -> String {
        let mut spec = matmul_spec();
        spec.backend = backend;
        spec.comparisons.push(BaselineRef {
            name: "FlashInfer".into(),
            file: "flashinfer_gemm.py".into(),
            libs: libs.iter().map(|s| (*s).to_owned()).collect(),
            modules: modules.iter().map(|s| (*s).to_owned()).collect(),
            install: [(
                "flashinfer".to_owned(),
                InstallHint {
                    name: "FlashInfer".into(),
                    debian: None,
                    pip: Some("flashinfer-python".into()),
                },
            )]
            .into(),
            env: Default::default(),
        });
        toml::to_string(&spec).unwrap()
    }

    #[test]
    fn a_python_implementation_names_the_modules_it_imports_and_their_pip_package() {
        let text = with_comparison(BackendKind::Torch, &[], &["flashinfer"]);
        let spec = parse_task(&text, "task.toml").unwrap();
        assert_eq!(spec.comparisons[0].modules, ["flashinfer"]);
        assert_eq!(
            spec.comparisons[0].install["flashinfer"].pip.as_deref(),
            Some("flashinfer-python")
        );
        let extras = text.replace("\"flashinfer-python\"", "\"mlx[cuda13]\"");
        assert!(parse_task(&extras, "task.toml").is_ok());
    }

    #[test]
    fn what_an_implementation_needs_is_checked_at_its_field() {
        let err = |text: &str| parse_task(text, "tasks/x/task.toml").unwrap_err();
        // A C task links libraries; a torch task imports modules.
        let e = err(&with_comparison(BackendKind::C, &[], &["flashinfer"]));
        assert_eq!(e.field, "comparisons[0].modules", "{e}");
        assert!(e.message.contains("in `libs`, not `modules`"), "{e}");
        let e = err(&with_comparison(BackendKind::Torch, &["flashinfer"], &[]));
        assert_eq!(e.field, "comparisons[0].libs", "{e}");
        let e = err(&with_comparison(BackendKind::Torch, &[], &["flash-infer"]));
        assert_eq!(e.field, "comparisons[0].modules[0]", "{e}");
        assert!(e.message.contains("not a Python module name"), "{e}");
        // The file, the line of the field, the field.
        let line = with_comparison(BackendKind::Torch, &[], &["flash-infer"])
            .lines()
            .position(|l| l.starts_with("modules = "))
            .unwrap()
            + 1;
        assert!(
            e.to_string()
                .starts_with(&format!("tasks/x/task.toml:{line}:")),
            "{e}"
        );
        assert!(
            e.to_string()
                .contains("field `comparisons[0].modules[0]`: `flash-infer` is not"),
            "{e}"
        );
        // A module list that is not a list of strings is refused at the field too.
        let text = with_comparison(BackendKind::Torch, &[], &["flashinfer"]);
        for bad in ["\"flashinfer\"", "[1]"] {
            let e = err(&text.replace("[\"flashinfer\"]", bad));
            assert!(e.field.starts_with("comparisons[0].modules"), "{e}");
            assert!(e.location.is_some(), "{e}");
        }
        let e = err(&with_comparison(BackendKind::Torch, &[], &["other"]));
        assert_eq!(e.field, "comparisons[0].install.flashinfer", "{e}");
        assert!(e.message.contains("comparison's `modules` (other)"), "{e}");
        let text = with_comparison(BackendKind::Torch, &[], &["flashinfer"]);
        for bad in [
            "flashinfer python",
            "x; rm -rf ~",
            "mlx[cuda",
            "[x]",
            "-e",
            "--index-url",
        ] {
            let e = err(&text.replace("\"flashinfer-python\"", &format!("{bad:?}")));
            assert_eq!(e.field, "comparisons[0].install.flashinfer.pip", "{e}");
            assert!(e.location.is_some(), "{e}");
        }
    }
}
