//! Building a C source into a shared object around the generated shim, and calling it.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ksearch_core::contract::{SHIM_SYMBOL, c_shim};
use ksearch_core::protocol::trim_log;
use ksearch_core::task::{Source, TaskSpec};
use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW, Symbol};

use crate::sandbox::{Limits, Sandbox, SandboxSpec};

/// `void ksearch_shim_call(void *const *buffers, const int64_t *axes)`
type ShimFn = unsafe extern "C" fn(*const *mut std::ffi::c_void, *const i64);

/// How a source is compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Flavor {
    /// Candidates, parents and baselines: what the contract promises.
    Optimized,
    /// The reference: conservative, so that it stays trustworthy.
    Reference,
}

/// What candidates, parents and baselines are compiled with (into a shared object).
pub const CANDIDATE_FLAGS: &[&str] = &["-O3", "-march=native", "-shared", "-fPIC", "-Wall"];

impl Flavor {
    fn flags(self) -> &'static [&'static str] {
        match self {
            Flavor::Optimized => CANDIDATE_FLAGS,
            Flavor::Reference => &["-O2", "-ffp-contract=off", "-shared", "-fPIC", "-Wall"],
        }
    }
}

/// A compiler driver: the program and the arguments it is always given (`CC="ccache gcc"`,
/// `CC="clang --target=x86_64-linux-gnu"`).
#[derive(Debug, Clone)]
pub(crate) struct Driver {
    pub(crate) program: String,
    pub(crate) args: Vec<String>,
}

impl Driver {
    /// `$var` split at white space (no shell quoting), else `default`.
    pub(crate) fn from_env(var: &str, default: &str) -> Driver {
        let text = std::env::var(var)
            .ok()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| default.into());
        let mut words = text.split_whitespace().map(str::to_owned);
        let program = words.next().unwrap_or_else(|| default.into());
        Driver {
            program,
            args: words.collect(),
        }
    }

    /// The C compiler: `$CC`, else `cc`.
    pub(crate) fn c() -> Driver {
        Driver::from_env("CC", "cc")
    }

    /// The C++ compiler: `$CXX`, else `c++`.
    pub(crate) fn cxx() -> Driver {
        Driver::from_env("CXX", "c++")
    }

    /// The program found on PATH, and the first line of its `--version`.
    fn resolved(mut self) -> (Driver, String) {
        if let Ok(p) = crate::sandbox::which(Path::new(&self.program)) {
            self.program = p.display().to_string();
        }
        let version = Command::new(&self.program)
            .args(&self.args)
            .arg("--version")
            .output()
            .ok()
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .next()
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| format!("{} (version unknown)", self.program));
        (self, version)
    }

    /// `program args…`, for a command line shown to the user.
    fn shown(&self, args: &[String]) -> String {
        std::iter::once(self.program.as_str())
            .chain(self.args.iter().map(String::as_str))
            .chain(args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

#[derive(Debug)]
pub(crate) struct Compiler {
    c: (Driver, String),
    /// Found when a C++ task first needs it.
    cxx: Option<(Driver, String)>,
    /// Every compile runs in a sandbox: it sees the system's headers and libraries and its own
    /// build directory, nothing else, so `#include "/any/file"` is a compile error.
    sandbox: Sandbox,
    /// An empty directory sandboxes mount their private root on.
    root_dir: PathBuf,
}

/// Limits of one compile.
const COMPILE_LIMITS: Limits = Limits {
    memory_bytes: 4 << 30,
    cpu_seconds: 120,
    file_bytes: 256 << 20,
    processes: 256,
    open_files: 1024,
};
/// Wall-clock limit of one compile.
const COMPILE_WALL: Duration = Duration::from_secs(180);

/// System directories a compiler may live in (they are visible in every sandbox).
const SYSTEM_PREFIXES: &[&str] = &["/usr/", "/bin/", "/sbin/", "/lib", "/etc/alternatives/"];

/// A build that failed: the compiler's diagnostics.
#[derive(Debug)]
pub(crate) struct BuildFailure {
    pub(crate) command: String,
    pub(crate) log: String,
    pub(crate) seconds: f64,
}

#[derive(Debug)]
pub(crate) struct Built {
    pub(crate) path: PathBuf,
    pub(crate) command: String,
    pub(crate) log: String,
    pub(crate) seconds: f64,
}

/// Make a file name safe to `#include` and to write in the build directory.
fn sanitized_file_name(name: &str) -> String {
    let base = Path::new(name)
        .file_name()
        .and_then(|s| s.to_str())
        .unwrap_or("");
    let clean: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() || clean.starts_with("ksearch_") || clean.starts_with('.') {
        "candidate.c".to_owned()
    } else {
        clean
    }
}

impl Compiler {
    /// `$CC`, else `cc` (and, for C++ tasks, `$CXX`, else `c++`).
    pub(crate) fn detect(sandbox: Sandbox, root_dir: PathBuf) -> Self {
        Self {
            c: Driver::c().resolved(),
            cxx: None,
            sandbox,
            root_dir,
        }
    }

    /// The driver for `spec`'s sources and its version line.
    fn driver(&mut self, spec: &TaskSpec) -> &(Driver, String) {
        if spec.build.as_ref().is_some_and(|b| b.cxx) {
            self.cxx.get_or_insert_with(|| Driver::cxx().resolved())
        } else {
            &self.c
        }
    }

    /// The first line of `--version` of the compiler that builds `spec`'s sources.
    pub(crate) fn version(&mut self, spec: &TaskSpec) -> String {
        self.driver(spec).1.clone()
    }

    /// Run the compiler in a sandbox in `dir`; its combined output and whether it succeeded.
    fn run_sandboxed(
        &self,
        driver: &Driver,
        dir: &Path,
        args: &[String],
    ) -> Result<(bool, String), String> {
        let mut read_only = Vec::new();
        // A compiler outside the system directories (a toolchain under /opt, say) is exposed
        // with its whole prefix.
        if !SYSTEM_PREFIXES
            .iter()
            .any(|p| driver.program.starts_with(p))
            && let Some(prefix) = Path::new(&driver.program).parent().and_then(Path::parent)
        {
            read_only.push(prefix.to_owned());
        }
        let mut env = vec![
            ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
            ("LC_ALL".into(), "C".into()),
            ("TMPDIR".into(), "/tmp".into()),
            ("HOME".into(), "/tmp".into()),
        ];
        // Libraries the user points the linker at (a baseline's `-l`) are visible to it.
        let libs = search_dirs("LIBRARY_PATH");
        if !libs.is_empty() {
            env.push(("LIBRARY_PATH".into(), join_dirs(&libs)));
            read_only.extend(libs);
        }
        let spec = SandboxSpec {
            program: PathBuf::from(&driver.program),
            args: driver.args.iter().chain(args).cloned().collect(),
            env,
            cwd: dir.to_owned(),
            root_dir: self.root_dir.clone(),
            read_only,
            writable: vec![dir.to_owned()],
            tmp_bytes: 512 << 20,
            gpu: false,
            allow_fork: true,
            cpu: None,
            cpus: Vec::new(),
            limits: COMPILE_LIMITS,
            keep_fds: Vec::new(),
            report_fd: 0,
            no_namespaces: crate::sandbox::no_namespaces_asked(),
        };
        let (r, w) = std::io::pipe().map_err(|e| format!("pipe: {e}"))?;
        let w2 = w.try_clone().map_err(|e| format!("pipe: {e}"))?;
        let mut child = self
            .sandbox
            .spawn(spec, Vec::new(), Stdio::from(w), Stdio::from(w2))
            .map_err(|e| e.to_string())?;
        // The log is read on a thread, so a compiler that writes a lot cannot block.
        let reader = std::thread::spawn(move || {
            let mut log = Vec::new();
            let _ = r.take(4 << 20).read_to_end(&mut log);
            String::from_utf8_lossy(&log).into_owned()
        });
        let status = child.wait_timeout(COMPILE_WALL);
        if status.is_none() {
            child.kill();
        }
        drop(child);
        let log = reader.join().unwrap_or_default();
        match status {
            Some(s) if s.success() => Ok((true, log)),
            Some(s) => Ok((false, format!("{log}\n(the compiler {})", describe(s)))),
            None => Ok((
                false,
                format!(
                    "{log}\n(the compiler did not finish within {} s)",
                    COMPILE_WALL.as_secs()
                ),
            )),
        }
    }

    /// Compile `source` with the shim into `dir/kernel.so`; `dir` must be new and unique,
    /// which also gives every object its own path (the dynamic loader caches by path).
    pub(crate) fn build(
        &mut self,
        dir: &Path,
        spec: &TaskSpec,
        source: &Source,
        libs: &[String],
        flavor: Flavor,
    ) -> Result<Built, BuildFailure> {
        let started = Instant::now();
        let fail = |command: String, log: String| BuildFailure {
            command,
            log,
            seconds: started.elapsed().as_secs_f64(),
        };
        let build = spec.build.clone().unwrap_or_default();
        let file = sanitized_file_name(&source.file);
        let shim = if build.cxx {
            "ksearch_shim.cpp"
        } else {
            "ksearch_shim.c"
        };
        let object = dir.join("kernel.so");
        let write = fs_err::create_dir_all(dir)
            .and_then(|()| open_up(dir))
            .and_then(|()| fs_err::write(dir.join(&file), &source.text))
            .and_then(|()| fs_err::write(dir.join(shim), c_shim(spec, &file)));
        if let Err(e) = write {
            return Err(fail(String::new(), format!("could not write sources: {e}")));
        }
        let mut args: Vec<String> = flavor.flags().iter().map(|s| (*s).to_owned()).collect();
        if flavor == Flavor::Optimized {
            args.extend(build.cflags.iter().cloned());
        }
        args.extend([
            "-o".into(),
            "kernel.so".into(),
            shim.into(),
            "-Wl,-z,defs".into(),
        ]);
        args.extend(libs.iter().chain(&build.libs).map(|l| format!("-l{l}")));
        args.push("-lm".into());
        let driver = self.driver(spec).0.clone();
        let command = driver.shown(&args);
        let (ok, log) = match self.run_sandboxed(&driver, dir, &args) {
            Ok(r) => r,
            Err(e) => {
                return Err(fail(
                    command,
                    format!("could not run the compiler `{}`: {e}", driver.program),
                ));
            }
        };
        let log = trim_log(&log, 60, 8 * 1024);
        if !ok {
            return Err(fail(command, log));
        }
        Ok(Built {
            path: object,
            command,
            log,
            seconds: started.elapsed().as_secs_f64(),
        })
    }
}

/// Let the sandboxed compiler (another uid when ksearch runs as root) write in `dir`; the
/// directory lies inside the worker's private temporary directory.
fn open_up(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs_err::set_permissions(dir, std::fs::Permissions::from_mode(0o777))
}

fn describe(s: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (_, Some(sig)) => format!("was killed by {}", crate::worker_process::signal_name(sig)),
        (Some(c), None) => format!("exited with status {c}"),
        (None, None) => "ended".into(),
    }
}

/// `const char *ksearch_describe(void)`: what a task's own implementation says it runs.
type DescribeFn = unsafe extern "C" fn() -> *const std::ffi::c_char;

/// The function a baseline or comparison may define to describe itself (docs/task-format.md).
pub(crate) const DESCRIBE_SYMBOL: &str = "ksearch_describe";

/// A loaded kernel.
#[derive(Debug)]
pub(crate) struct Kernel {
    call: Symbol<ShimFn>,
    describe: Option<Symbol<DescribeFn>>,
    // Declared after `call` so the symbol is dropped before the library is closed.
    _library: Library,
}

impl Kernel {
    pub(crate) fn load(path: &Path) -> Result<Self, String> {
        // SAFETY: loading runs the object's constructors: only trusted code (a task's reference)
        // is loaded in the judge, and candidate code only in a sandboxed runner.
        let library = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }
            .map_err(|e| format!("could not load {}: {e}", path.display()))?;
        // SAFETY: the shim defines this symbol with exactly this signature.
        let call = unsafe { library.get::<ShimFn>(SHIM_SYMBOL.as_bytes()) }
            .map_err(|e| format!("{} lacks {SHIM_SYMBOL}: {e}", path.display()))?;
        // SAFETY: where the source defines it, the contract gives it this signature.
        let describe = unsafe { library.get::<DescribeFn>(DESCRIBE_SYMBOL.as_bytes()) }.ok();
        Ok(Self {
            call,
            describe,
            _library: library,
        })
    }

    /// What the kernel says it runs, when it defines `ksearch_describe`: one cleaned line.
    /// Only for a task's own implementations (their code is trusted).
    pub(crate) fn describe(&self) -> Option<String> {
        let f = self.describe.as_ref()?;
        // SAFETY: a trusted implementation's function of the documented signature.
        let text = unsafe { f() };
        if text.is_null() {
            return None;
        }
        // SAFETY: a NUL-terminated string, as the contract asks.
        let text = unsafe { std::ffi::CStr::from_ptr(text) }.to_string_lossy();
        Some(ksearch_core::protocol::Described::clean(&text)).filter(|t| !t.is_empty())
    }

    /// Run the kernel once.
    ///
    /// # Safety
    /// `buffers` must point to live buffers of the sizes the task's shapes give for `axes`.
    pub(crate) unsafe fn call(&self, buffers: &[*mut std::ffi::c_void], axes: &[i64]) {
        // SAFETY: forwarded from the caller.
        unsafe { (self.call)(buffers.as_ptr(), axes.as_ptr()) };
    }
}

/// The existing absolute directories listed in the environment variable `var`.
pub(crate) fn search_dirs(var: &str) -> Vec<PathBuf> {
    std::env::var_os(var)
        .map(|v| {
            std::env::split_paths(&v)
                .filter(|p| p.is_absolute() && p.is_dir())
                .collect()
        })
        .unwrap_or_default()
}

/// `dirs` as a search path.
pub(crate) fn join_dirs(dirs: &[PathBuf]) -> String {
    std::env::join_paths(dirs)
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compiler_variable_may_carry_arguments() {
        // SAFETY: this test alone reads and writes this variable name.
        unsafe { std::env::set_var("KSEARCH_TEST_CC", "  ccache  gcc -m64 ") };
        let d = Driver::from_env("KSEARCH_TEST_CC", "cc");
        assert_eq!(
            (d.program.as_str(), d.args.clone()),
            ("ccache", vec!["gcc".to_owned(), "-m64".to_owned()])
        );
        assert_eq!(d.shown(&["-c".into()]), "ccache gcc -m64 -c");
        unsafe { std::env::remove_var("KSEARCH_TEST_CC") };
        assert_eq!(Driver::from_env("KSEARCH_TEST_CC", "cc").program, "cc");
    }

    #[test]
    fn file_names_are_made_safe() {
        assert_eq!(sanitized_file_name("seed.c"), "seed.c");
        assert_eq!(sanitized_file_name("../../etc/x\".c"), "x_.c");
        assert_eq!(sanitized_file_name("ksearch_shim.c"), "candidate.c");
        assert_eq!(sanitized_file_name(""), "candidate.c");
    }
}
