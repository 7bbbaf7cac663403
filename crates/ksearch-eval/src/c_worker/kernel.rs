//! Building a C source into a shared object around the generated shim, and calling it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use ksearch_core::contract::{SHIM_SYMBOL, c_shim};
use ksearch_core::protocol::trim_log;
use ksearch_core::task::{Source, TaskSpec};
use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW, Symbol};

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

impl Flavor {
    fn flags(self) -> &'static [&'static str] {
        match self {
            Flavor::Optimized => &["-O3", "-march=native", "-shared", "-fPIC", "-Wall"],
            Flavor::Reference => &["-O2", "-ffp-contract=off", "-shared", "-fPIC", "-Wall"],
        }
    }
}

#[derive(Debug)]
pub(crate) struct Compiler {
    program: String,
    /// First line of `cc --version`.
    pub(crate) version: String,
}

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
    /// `$CC`, else `cc`.
    pub(crate) fn detect() -> Self {
        let program = std::env::var("CC")
            .ok()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| "cc".into());
        let version = Command::new(&program)
            .arg("--version")
            .output()
            .ok()
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .next()
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| format!("{program} (version unknown)"));
        Self { program, version }
    }

    /// Compile `source` with the shim into `dir/kernel.so`; `dir` must be new and unique,
    /// which also gives every object its own path (the dynamic loader caches by path).
    pub(crate) fn build(
        &self,
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
        let file = sanitized_file_name(&source.file);
        let shim = "ksearch_shim.c";
        let object = dir.join("kernel.so");
        let write = std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(dir.join(&file), &source.text))
            .and_then(|()| std::fs::write(dir.join(shim), c_shim(spec, &file)));
        if let Err(e) = write {
            return Err(fail(
                String::new(),
                format!("could not write sources to {}: {e}", dir.display()),
            ));
        }
        let mut args: Vec<String> = flavor.flags().iter().map(|s| (*s).to_owned()).collect();
        args.extend([
            "-o".into(),
            "kernel.so".into(),
            shim.into(),
            "-Wl,-z,defs".into(),
        ]);
        args.extend(libs.iter().map(|l| format!("-l{l}")));
        args.push("-lm".into());
        let command = format!("{} {}", self.program, args.join(" "));
        let output = match Command::new(&self.program)
            .args(&args)
            .current_dir(dir)
            .output()
        {
            Ok(o) => o,
            Err(e) => {
                return Err(fail(
                    command,
                    format!("could not run the C compiler `{}`: {e}", self.program),
                ));
            }
        };
        let mut log = String::from_utf8_lossy(&output.stderr).into_owned();
        log.push_str(&String::from_utf8_lossy(&output.stdout));
        let log = trim_log(&log, 60, 8 * 1024);
        if !output.status.success() {
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

/// A loaded kernel.
#[derive(Debug)]
pub(crate) struct Kernel {
    call: Symbol<ShimFn>,
    // Declared after `call` so the symbol is dropped before the library is closed.
    _library: Library,
}

impl Kernel {
    pub(crate) fn load(path: &Path) -> Result<Self, String> {
        // SAFETY: loading runs the object's constructors; candidate code is trusted to run in
        // this (sacrificial) worker process, which is the point of having one.
        let library = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }
            .map_err(|e| format!("could not load {}: {e}", path.display()))?;
        // SAFETY: the shim defines this symbol with exactly this signature.
        let call = unsafe { library.get::<ShimFn>(SHIM_SYMBOL.as_bytes()) }
            .map_err(|e| format!("{} lacks {SHIM_SYMBOL}: {e}", path.display()))?;
        Ok(Self {
            call,
            _library: library,
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_made_safe() {
        assert_eq!(sanitized_file_name("seed.c"), "seed.c");
        assert_eq!(sanitized_file_name("../../etc/x\".c"), "x_.c");
        assert_eq!(sanitized_file_name("ksearch_shim.c"), "candidate.c");
        assert_eq!(sanitized_file_name(""), "candidate.c");
    }
}
