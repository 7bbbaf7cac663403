//! What a task's baseline and comparisons need that a machine may lack (`libs` in `task.toml`,
//! linked as `-l<name>`; `modules` on the Python backends, imported): whether this machine has
//! it, decided in the orchestrator before any request is built, and what to tell the user when
//! it does not. Libraries are asked of the C compiler, modules of the worker's Python.
//!
//! A missing dependency is not an error for a new run or an evaluation: [`drop_unavailable`]
//! takes the implementations that need it out of the task (a baseline gives way to the
//! reference), and the caller says once what is missing, what the speedups are quoted against
//! instead, and the command that installs it. A request for a task that still names a missing
//! one is refused ([`EvalError::MissingDependency`]) rather than failing in the worker.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

use ksearch_core::backend::Dependency;
use ksearch_core::task::{Baseline, InstallHint, Task};

use crate::backend::DEFAULT_PYTHON;
use crate::error::EvalError;

/// `probe()`'s answer for `key`, asked once per process.
fn once(key: String, probe: impl FnOnce() -> bool) -> bool {
    static PROBED: OnceLock<Mutex<HashMap<String, bool>>> = OnceLock::new();
    let probed = PROBED.get_or_init(Default::default);
    if let Some(&known) = probed
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(&key)
    {
        return known;
    }
    let found = probe();
    probed
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(key, found);
    found
}

/// Whether the C compiler (`$CC`, else `cc`) links `-l<name>` here. Probed once per process by
/// linking an empty shared object, as the worker links a baseline.
pub fn library_available(name: &str) -> bool {
    once(format!("-l{name}"), || link_probe(name))
}

/// Whether `python` finds the module `name` (`importlib.util.find_spec`, which does not import
/// it). Asked once per process and interpreter.
pub fn module_available(python: &Path, name: &str) -> bool {
    once(format!("{}\0{name}", python.display()), || {
        Command::new(python)
            .args([
                "-c",
                "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec(sys.argv[1]) else 1)",
                name,
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

fn link_probe(name: &str) -> bool {
    let Ok(dir) = tempfile::tempdir() else {
        return false;
    };
    let compiler = crate::c_worker::Driver::c();
    Command::new(&compiler.program)
        .args(&compiler.args)
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
        let os_release = fs_err::read_to_string(Path::new("/etc/os-release")).unwrap_or_default();
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

/// A library the linker does not find, or a module the worker's Python does not, and how to get
/// it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingDependency {
    /// As in `-l<name>`, or `import <name>`.
    pub name: String,
    pub dependency: Dependency,
    pub install: Option<InstallHint>,
}

impl MissingDependency {
    /// How it is named to a user without its common name: `-lopenblas`, `the Python module
    /// flashinfer`.
    fn technical(&self) -> String {
        match self.dependency {
            Dependency::Library => format!("-l{}", self.name),
            Dependency::PythonModule => format!("the Python module `{}`", self.name),
        }
    }
}

impl fmt::Display for MissingDependency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.install, self.dependency) {
            (Some(h), Dependency::Library) => write!(f, "{} (-l{})", h.name, self.name),
            (Some(h), Dependency::PythonModule) => {
                write!(f, "{} (Python module `{}`)", h.name, self.name)
            }
            (None, _) => f.write_str(&self.technical()),
        }
    }
}

/// Which implementation of the task could not be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Baseline,
    Comparison,
}

/// A baseline or comparison that needs libraries or modules missing here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    pub part: Part,
    /// The implementation's name, e.g. "OpenBLAS cblas_sgemm (1 thread)".
    pub name: String,
    pub missing: Vec<MissingDependency>,
    /// What speedups are quoted against without it, e.g. "reference (reference.c)".
    pub quoted_against: String,
    /// The Python that was asked for modules.
    pub python: String,
}

fn list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

impl Unavailable {
    /// What is missing, as said to a user: "OpenBLAS (-lopenblas)", "FlashInfer (Python module
    /// `flashinfer`)".
    pub fn needs(&self) -> String {
        self.each(ToString::to_string)
    }

    /// Who was asked and did not find it: the linker, or the worker's Python.
    pub fn finder(&self) -> String {
        match self.missing.first().map(|m| m.dependency) {
            Some(Dependency::PythonModule) => format!("`{}`", self.python),
            _ => "the linker".into(),
        }
    }

    /// How to install what is missing: the one command where the packages are known, else the
    /// names to look for.
    pub fn install_advice(&self, installer: Installer) -> String {
        if self
            .missing
            .iter()
            .all(|m| m.dependency == Dependency::PythonModule)
        {
            return match self.packages(|h| h.pip.as_deref()) {
                Some(p) => format!("install it with `{} -m pip install {p}`", self.python),
                None => format!(
                    "install the Python package that provides {} for `{}`",
                    self.each(MissingDependency::technical),
                    self.python
                ),
            };
        }
        match (installer, self.packages(|h| h.debian.as_deref())) {
            (Installer::Apt { root }, Some(p)) => format!(
                "install it with `{}apt-get install {p}`",
                if root { "" } else { "sudo " },
            ),
            _ => format!(
                "install {} (the development package that provides {}) with your system's package manager",
                self.each(|m| m
                    .install
                    .as_ref()
                    .map_or_else(|| format!("the library {}", m.name), |h| h.name.clone())),
                self.each(MissingDependency::technical),
            ),
        }
    }

    /// The packages that provide what is missing, space-separated, where every one is known.
    fn packages(&self, package: impl Fn(&InstallHint) -> Option<&str>) -> Option<String> {
        self.missing
            .iter()
            .map(|m| m.install.as_ref().and_then(&package))
            .collect::<Option<Vec<_>>>()
            .map(|p| p.join(" "))
    }

    /// `say` of each missing dependency, as a list: "a, b and c".
    fn each(&self, say: impl Fn(&MissingDependency) -> String) -> String {
        list(&self.missing.iter().map(say).collect::<Vec<_>>())
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
            "the {what} `{}` needs {}, which {} does not find on this machine: {instead}. To measure against it, {}.",
            self.name,
            self.needs(),
            self.finder(),
            self.install_advice(installer)
        )
    }
}

/// What `b` needs that this machine lacks; modules are asked of `python`.
fn missing_of(b: &Baseline, python: &Path) -> Vec<MissingDependency> {
    let libs = b.libs.iter().map(|l| (l, Dependency::Library));
    let modules = b.modules.iter().map(|m| (m, Dependency::PythonModule));
    libs.chain(modules)
        .filter(|(name, dependency)| match dependency {
            Dependency::Library => !library_available(name),
            Dependency::PythonModule => !module_available(python, name),
        })
        .map(|(name, dependency)| MissingDependency {
            name: name.clone(),
            dependency,
            install: b.install.get(name).cloned(),
        })
        .collect()
}

/// Takes out of `task` the baseline and the comparisons whose libraries the linker does not find
/// here, or whose modules `python` (`--python`; `python3` when `None`) does not: the baseline
/// gives way to the reference. Returns what was taken out, for the caller to say once; empty
/// when everything is available.
pub fn drop_unavailable(task: &mut Task, python: Option<&Path>) -> Vec<Unavailable> {
    let python = python.unwrap_or(Path::new(DEFAULT_PYTHON));
    let unavailable = |part, b: &Baseline, missing, quoted_against| Unavailable {
        part,
        name: b.name.clone(),
        missing,
        quoted_against,
        python: python.display().to_string(),
    };
    let mut out = Vec::new();
    if let Some(b) = task.baseline.take() {
        let missing = missing_of(&b, python);
        if missing.is_empty() {
            task.baseline = Some(b);
        } else {
            out.push(unavailable(
                Part::Baseline,
                &b,
                missing,
                task.baseline_name(),
            ));
        }
    }
    let quoted_against = task.baseline_name();
    task.comparisons.retain(|c| {
        let missing = missing_of(c, python);
        if missing.is_empty() {
            return true;
        }
        out.push(unavailable(
            Part::Comparison,
            c,
            missing,
            quoted_against.clone(),
        ));
        false
    });
    out
}

/// Refuses a task of the `c` backend where its C compiler (`$CC`, else `cc`) is not found:
/// the reference, the baseline and every candidate are compiled with it. Asked before anything
/// else, so that neither the task ("the reference does not build") nor a library (the linker is
/// asked through the compiler) takes the blame.
pub fn require_compiler(task: &Task) -> Result<(), EvalError> {
    if task.spec.backend != ksearch_core::task::BackendKind::C {
        return Ok(());
    }
    let driver = crate::c_worker::Driver::c();
    if crate::sandbox::which(Path::new(&driver.program)).is_ok_and(|p| p.is_file()) {
        return Ok(());
    }
    Err(EvalError::MissingCompiler {
        program: driver.program,
        named_by_cc: std::env::var("CC").is_ok_and(|cc| !cc.trim().is_empty()),
        advice: compiler_advice(Installer::here()),
    })
}

/// How to install a C compiler here.
fn compiler_advice(installer: Installer) -> String {
    let how = match installer {
        Installer::Apt { root } => format!(
            "install one with `{}apt-get install build-essential`",
            if root { "" } else { "sudo " }
        ),
        Installer::Other => "install gcc or clang with the system's package manager (e.g. `sudo dnf install gcc`; on macOS `xcode-select --install`)".into(),
    };
    format!("{how}, or name one with `CC=...`")
}

/// Refuses a task that still names an implementation whose libraries or modules are missing
/// here (a stored run's, say): it would fail in the worker.
pub fn require_available(task: &Task, python: Option<&Path>) -> Result<(), EvalError> {
    let mut task = task.clone();
    match drop_unavailable(&mut task, python).into_iter().next() {
        None => Ok(()),
        Some(u) => Err(EvalError::MissingDependency {
            name: u.name.clone(),
            needs: u.needs(),
            finder: u.finder(),
            advice: u.install_advice(Installer::here()),
        }),
    }
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
            modules: Vec::new(),
            install: hint
                .map(|(n, deb)| {
                    (
                        libs[0].to_owned(),
                        InstallHint {
                            name: n.into(),
                            debian: deb.map(Into::into),
                            pip: None,
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
        assert!(library_available(PRESENT));
        assert!(!library_available(MISSING));
        // Cached: the answer stands without the compiler.
        let started = std::time::Instant::now();
        for _ in 0..100 {
            assert!(!library_available(MISSING));
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
        assert!(require_available(&t, None).is_err());
        let dropped = drop_unavailable(&mut t, None);
        assert!(t.baseline.is_none());
        assert_eq!(t.baseline_name(), "reference (reference.c)");
        assert!(require_available(&t, None).is_ok());
        assert_eq!(dropped.len(), 1);
        let u = &dropped[0];
        assert_eq!(u.part, Part::Baseline);
        assert_eq!(u.quoted_against, "reference (reference.c)");
        assert_eq!(u.needs(), format!("BLAS (-l{MISSING})"));
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
        assert!(drop_unavailable(&mut t, None).is_empty());
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
        let dropped = drop_unavailable(&mut t, None);
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
    fn a_missing_python_module_is_named_with_its_pip_package() {
        let mut flashinfer = implementation("FlashInfer decode", &[], None);
        flashinfer.modules = vec!["flashinfer".into()];
        flashinfer.install = [(
            "flashinfer".to_owned(),
            InstallHint {
                name: "FlashInfer".into(),
                debian: None,
                pip: Some("flashinfer-python".into()),
            },
        )]
        .into();
        let mut bare = flashinfer.clone();
        bare.name = "bare".into();
        bare.install.clear();
        let mut t = task(None, vec![flashinfer, bare]);
        // An interpreter that is not there finds nothing.
        let python = Path::new("/nonexistent/bin/python3");
        assert!(require_available(&t, Some(python)).is_err());
        let dropped = drop_unavailable(&mut t, Some(python));
        assert!(t.comparisons.is_empty());
        assert_eq!(
            dropped[0].notice(Installer::Apt { root: false }),
            "the comparison `FlashInfer decode` needs FlashInfer (Python module `flashinfer`), which `/nonexistent/bin/python3` does not find on this machine: it is left out (speedups are quoted against reference (reference.c) as before). To measure against it, install it with `/nonexistent/bin/python3 -m pip install flashinfer-python`."
        );
        assert!(
            dropped[1].notice(Installer::Other).ends_with(
                "needs the Python module `flashinfer`, which `/nonexistent/bin/python3` does not find on this machine: it is left out (speedups are quoted against reference (reference.c) as before). To measure against it, install the Python package that provides the Python module `flashinfer` for `/nonexistent/bin/python3`."
            ),
            "{}",
            dropped[1].notice(Installer::Other)
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
