//! The optional libraries of a task's baseline and comparisons (`libs` in `task.toml`): whether
//! the linker finds them on this machine, decided in the orchestrator before any request is
//! built, and what to tell the user when one is missing.
//!
//! A missing library is not an error for a new run or an evaluation: [`drop_unavailable`] takes
//! the implementations that need it out of the task (a baseline gives way to the reference), and
//! the caller says once what is missing, what the speedups are quoted against instead, and the
//! command that installs it. A request for a task that still names a missing library is refused
//! ([`EvalError::MissingLibrary`]) rather than failing to link in the worker.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

use ksearch_core::task::{Baseline, InstallHint, Task};

use crate::error::EvalError;

/// Whether the C compiler (`$CC`, else `cc`) links `-l<name>` here. Probed once per process by
/// linking an empty shared object, as the worker links a baseline.
pub fn available(name: &str) -> bool {
    static PROBED: OnceLock<Mutex<HashMap<String, bool>>> = OnceLock::new();
    let probed = PROBED.get_or_init(Default::default);
    if let Some(&known) = probed
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(name)
    {
        return known;
    }
    let found = link_probe(name);
    probed
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(name.to_owned(), found);
    found
}

fn link_probe(name: &str) -> bool {
    let Ok(dir) = tempfile::tempdir() else {
        return false;
    };
    let compiler = std::env::var("CC")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "cc".into());
    Command::new(compiler)
        .args(["-shared", "-fPIC", "-x", "c", "-", "-o"])
        .arg(dir.path().join("probe.so"))
        .arg(format!("-l{name}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// What the system offers for installing packages, as far as the advice goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Installer {
    /// Debian, Ubuntu and their derivatives: `apt-get install`, with `sudo` unless root.
    Apt { root: bool },
    /// Anything else: the library is named, the package manager is the user's.
    Other,
}

impl Installer {
    /// This machine's, from `/etc/os-release`.
    pub fn here() -> Installer {
        let os_release = std::fs::read_to_string(Path::new("/etc/os-release")).unwrap_or_default();
        // SAFETY: geteuid has no preconditions and cannot fail.
        Installer::from_os_release(&os_release, unsafe { libc::geteuid() } == 0)
    }

    /// From the text of `os-release(5)`: Debian, or a system `ID_LIKE` Debian, uses apt.
    pub fn from_os_release(os_release: &str, root: bool) -> Installer {
        let debian_like = os_release.lines().any(|l| {
            let (key, value) = l.split_once('=').unwrap_or(("", ""));
            matches!(key, "ID" | "ID_LIKE")
                && value
                    .trim_matches('"')
                    .split_whitespace()
                    .any(|id| id == "debian" || id == "ubuntu")
        });
        if debian_like {
            Installer::Apt { root }
        } else {
            Installer::Other
        }
    }
}

/// A library the linker does not find, and how to get it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingLibrary {
    /// As in `-l<name>`.
    pub name: String,
    pub install: Option<InstallHint>,
}

impl fmt::Display for MissingLibrary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.install {
            Some(h) => write!(f, "{} (-l{})", h.name, self.name),
            None => write!(f, "-l{}", self.name),
        }
    }
}

/// Which implementation of the task could not be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Baseline,
    Comparison,
}

/// A baseline or comparison that needs libraries missing here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    pub part: Part,
    /// The implementation's name, e.g. "OpenBLAS cblas_sgemm (1 thread)".
    pub name: String,
    pub missing: Vec<MissingLibrary>,
    /// What speedups are quoted against without it, e.g. "reference (reference.c)".
    pub quoted_against: String,
}

fn list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

impl Unavailable {
    /// The libraries, as said to a user: "OpenBLAS (-lopenblas)".
    pub fn libraries(&self) -> String {
        list(
            &self
                .missing
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
        )
    }

    /// How to install what is missing: the one command where the system's packages are known,
    /// else the names to look for.
    pub fn install_advice(&self, installer: Installer) -> String {
        let packages: Option<Vec<String>> = self
            .missing
            .iter()
            .map(|m| m.install.as_ref().and_then(|h| h.debian.clone()))
            .collect();
        match (installer, packages) {
            (Installer::Apt { root }, Some(p)) => format!(
                "install it with `{}apt-get install {}`",
                if root { "" } else { "sudo " },
                p.join(" ")
            ),
            _ => format!(
                "install {} (the development package that provides {}) with your system's package manager",
                list(
                    &self
                        .missing
                        .iter()
                        .map(|m| m
                            .install
                            .as_ref()
                            .map_or_else(|| format!("the library {}", m.name), |h| h.name.clone()))
                        .collect::<Vec<_>>()
                ),
                list(
                    &self
                        .missing
                        .iter()
                        .map(|m| format!("-l{}", m.name))
                        .collect::<Vec<_>>()
                ),
            ),
        }
    }

    /// The message for a run or evaluation that goes on without the implementation.
    pub fn notice(&self, installer: Installer) -> String {
        let what = match self.part {
            Part::Baseline => "baseline",
            Part::Comparison => "comparison",
        };
        let instead = match self.part {
            Part::Baseline => format!(
                "speedups are quoted against the {} instead",
                self.quoted_against
            ),
            Part::Comparison => format!(
                "it is left out (speedups are quoted against {} as before)",
                self.quoted_against
            ),
        };
        format!(
            "the {what} `{}` needs {}, which the linker does not find on this machine: {instead}. To measure against it, {}.",
            self.name,
            self.libraries(),
            self.install_advice(installer)
        )
    }
}

fn missing_of(b: &Baseline) -> Vec<MissingLibrary> {
    b.libs
        .iter()
        .filter(|l| !available(l))
        .map(|l| MissingLibrary {
            name: l.clone(),
            install: b.install.get(l).cloned(),
        })
        .collect()
}

/// Takes out of `task` the baseline and the comparisons whose libraries the linker does not find
/// here: the baseline gives way to the reference. Returns what was taken out, for the caller to
/// say once; empty when everything is available.
pub fn drop_unavailable(task: &mut Task) -> Vec<Unavailable> {
    let mut out = Vec::new();
    if let Some(b) = &task.baseline {
        let missing = missing_of(b);
        if !missing.is_empty() {
            let name = b.name.clone();
            task.baseline = None;
            out.push(Unavailable {
                part: Part::Baseline,
                name,
                missing,
                quoted_against: task.baseline_name(),
            });
        }
    }
    let quoted_against = task.baseline_name();
    task.comparisons.retain(|c| {
        let missing = missing_of(c);
        if missing.is_empty() {
            return true;
        }
        out.push(Unavailable {
            part: Part::Comparison,
            name: c.name.clone(),
            missing,
            quoted_against: quoted_against.clone(),
        });
        false
    });
    out
}

/// Refuses a task that still names an implementation whose libraries are missing here (a stored
/// run's, say): it would fail to link in the worker.
pub fn require_available(task: &Task) -> Result<(), EvalError> {
    let parts = task
        .baseline
        .iter()
        .map(|b| (Part::Baseline, b))
        .chain(task.comparisons.iter().map(|c| (Part::Comparison, c)));
    for (part, b) in parts {
        let missing = missing_of(b);
        if !missing.is_empty() {
            let u = Unavailable {
                part,
                name: b.name.clone(),
                missing,
                quoted_against: task.baseline_name(),
            };
            return Err(EvalError::MissingLibrary {
                name: u.name.clone(),
                libraries: u.libraries(),
                advice: u.install_advice(Installer::here()),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksearch_core::task::Source;
    use ksearch_core::task::tests_support::matmul_spec;

    fn source(file: &str) -> Source {
        Source {
            file: file.into(),
            text: String::new(),
        }
    }

    fn implementation(name: &str, libs: &[&str], hint: Option<(&str, Option<&str>)>) -> Baseline {
        Baseline {
            name: name.into(),
            source: source("baseline.c"),
            libs: libs.iter().map(|l| (*l).to_owned()).collect(),
            install: hint
                .map(|(n, deb)| {
                    (
                        libs[0].to_owned(),
                        InstallHint {
                            name: n.into(),
                            debian: deb.map(Into::into),
                        },
                    )
                })
                .into_iter()
                .collect(),
            env: Default::default(),
        }
    }

    /// A library no machine has, and one every machine with a C compiler has.
    const MISSING: &str = "ksearchnosuchlibrary";
    const PRESENT: &str = "m";

    fn task(baseline: Option<Baseline>, comparisons: Vec<Baseline>) -> Task {
        Task {
            id: "t".into(),
            spec: matmul_spec(),
            reference: source("reference.c"),
            seed: source("seed.c"),
            baseline,
            comparisons,
            space: None,
            worker: None,
        }
    }

    #[test]
    fn the_linker_is_asked_once_per_library() {
        assert!(available(PRESENT));
        assert!(!available(MISSING));
        // Cached: the answer stands without the compiler.
        let started = std::time::Instant::now();
        for _ in 0..100 {
            assert!(!available(MISSING));
        }
        assert!(started.elapsed() < std::time::Duration::from_millis(50));
    }

    #[test]
    fn a_missing_baseline_library_gives_way_to_the_reference() {
        let blas = implementation(
            "BLAS sgemm",
            &[MISSING],
            Some(("BLAS", Some("libblas-dev"))),
        );
        let mut t = task(Some(blas.clone()), Vec::new());
        assert!(require_available(&t).is_err());
        let dropped = drop_unavailable(&mut t);
        assert!(t.baseline.is_none());
        assert_eq!(t.baseline_name(), "reference (reference.c)");
        assert!(require_available(&t).is_ok());
        assert_eq!(dropped.len(), 1);
        let u = &dropped[0];
        assert_eq!(u.part, Part::Baseline);
        assert_eq!(u.quoted_against, "reference (reference.c)");
        assert_eq!(u.libraries(), format!("BLAS (-l{MISSING})"));
        let notice = u.notice(Installer::Apt { root: false });
        assert_eq!(
            notice,
            format!(
                "the baseline `BLAS sgemm` needs BLAS (-l{MISSING}), which the linker does not find on this machine: speedups are quoted against the reference (reference.c) instead. To measure against it, install it with `sudo apt-get install libblas-dev`."
            )
        );
        assert!(
            u.notice(Installer::Apt { root: true })
                .contains("`apt-get install libblas-dev`")
        );
        assert!(
            u.notice(Installer::Other).ends_with(&format!(
                "install BLAS (the development package that provides -l{MISSING}) with your system's package manager."
            )),
            "{}",
            u.notice(Installer::Other)
        );
        // Available libraries change nothing.
        let mut t = task(Some(implementation("libm", &[PRESENT], None)), Vec::new());
        assert!(drop_unavailable(&mut t).is_empty());
        assert!(t.baseline.is_some());
    }

    #[test]
    fn comparisons_are_left_out_and_said_so() {
        let mut t = task(
            Some(implementation("libm", &[PRESENT], None)),
            vec![
                implementation("kept", &[PRESENT], None),
                implementation("gone", &[PRESENT, MISSING], None),
            ],
        );
        let dropped = drop_unavailable(&mut t);
        assert_eq!(t.comparisons.len(), 1);
        assert_eq!(t.comparisons[0].name, "kept");
        assert_eq!(dropped.len(), 1);
        let u = &dropped[0];
        assert_eq!(u.part, Part::Comparison);
        assert_eq!(u.missing.len(), 1, "only the missing library is named");
        // Without an install hint, the library is named by its linker flag.
        let notice = u.notice(Installer::Apt { root: false });
        assert!(
            notice.contains(&format!("needs -l{MISSING}, which the linker")),
            "{notice}"
        );
        assert!(notice.contains("it is left out (speedups are quoted against libm as before)"));
        assert!(
            notice.contains(&format!("install the library {MISSING}")),
            "{notice}"
        );
    }

    #[test]
    fn installers_are_read_from_os_release() {
        let debian = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\n";
        let ubuntu = "NAME=\"Ubuntu\"\nID=ubuntu\nID_LIKE=debian\n";
        let mint = "ID=linuxmint\nID_LIKE=\"ubuntu debian\"\n";
        let fedora = "ID=fedora\nID_LIKE=\"rhel centos\"\n";
        for text in [debian, ubuntu, mint] {
            assert_eq!(
                Installer::from_os_release(text, false),
                Installer::Apt { root: false }
            );
        }
        assert_eq!(
            Installer::from_os_release(debian, true),
            Installer::Apt { root: true }
        );
        assert_eq!(Installer::from_os_release(fedora, false), Installer::Other);
        assert_eq!(Installer::from_os_release("", false), Installer::Other);
        // `ID_LIKE=debianish` is not Debian.
        assert_eq!(
            Installer::from_os_release("ID=x\nID_LIKE=debianish\n", false),
            Installer::Other
        );
    }
}
