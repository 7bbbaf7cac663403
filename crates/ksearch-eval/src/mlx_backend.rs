//! The `mlx` backend: candidates are Python modules building kernels with `mx.fast.metal_kernel`
//! (Apple GPUs) or `mx.fast.cuda_kernel` (NVIDIA GPUs, MLX's CUDA backend). The worker is the
//! Python harness, embedded in the binary and unpacked to a cache directory on first use.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ksearch_core::static_check::{Violation, check_candidate};
use ksearch_core::task::{BackendKind, TaskSpec};

use crate::backend::BackendEval;
use crate::error::EvalError;
use crate::worker_process::WorkerCommand;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/harness_files.rs"));
}

/// MLX through the Python harness.
#[derive(Debug, Clone)]
pub struct MlxBackend {
    pub python: PathBuf,
    /// `metal`, `cuda`, or `None` for the GPU MLX finds.
    pub target: Option<String>,
    /// Where the harness package was unpacked (its parent goes on `PYTHONPATH`).
    harness_root: PathBuf,
    /// The device whose limits the knowledge rules use.
    hardware: Option<ksearch_knowledge::Hardware>,
    /// The binary whose `ksearch sandbox` starts the harness's runners.
    sandbox_exe: PathBuf,
}

pub(crate) fn cache_root() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("ksearch")
}

/// Unpack the embedded harness under `root`, once per content version.
pub(crate) fn unpack_harness(root: &Path) -> Result<PathBuf, EvalError> {
    let mut h = DefaultHasher::new();
    embedded::HARNESS_FILES.hash(&mut h);
    let dir = root.join(format!("harness-{:016x}", h.finish()));
    if dir.join("ksearch_harness").join("__main__.py").exists() {
        return Ok(dir);
    }
    let io = |e: std::io::Error| EvalError::BackendUnavailable {
        backend: BackendKind::Mlx.name().into(),
        reason: format!("could not unpack the harness: {e}"),
    };
    // One staging directory per call: threads of one process (the test suite's) unpack at once.
    static STAGING: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let tmp = root.join(format!(
        ".harness-{}-{}-{:016x}",
        std::process::id(),
        STAGING.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        h.finish()
    ));
    fs_err::create_dir_all(tmp.join("ksearch_harness")).map_err(io)?;
    for (name, text) in embedded::HARNESS_FILES {
        fs_err::write(tmp.join("ksearch_harness").join(name), text).map_err(io)?;
    }
    match fs_err::rename(&tmp, &dir) {
        Ok(()) => Ok(dir),
        // Another process unpacked the same version first.
        Err(_) if dir.join("ksearch_harness").join("__main__.py").exists() => {
            let _ = fs_err::remove_dir_all(&tmp);
            Ok(dir)
        }
        Err(e) => Err(io(e)),
    }
}

impl MlxBackend {
    /// `sandbox_exe` is the ksearch binary, whose launcher confines the harness's runners.
    pub fn new(
        python: Option<PathBuf>,
        target: Option<String>,
        hardware: Option<ksearch_knowledge::Hardware>,
        sandbox_exe: PathBuf,
    ) -> Result<Self, EvalError> {
        if let Some(t) = &target
            && !["metal", "cuda", "numpy", "cpu"].contains(&t.as_str())
        {
            return Err(EvalError::Options(format!(
                "unknown mlx target `{t}` (expected metal or cuda)"
            )));
        }
        Ok(Self {
            python: python.unwrap_or_else(|| PathBuf::from(crate::backend::DEFAULT_PYTHON)),
            target,
            harness_root: unpack_harness(&cache_root())?,
            hardware,
            sandbox_exe,
        })
    }
}

impl BackendEval for MlxBackend {
    /// The knowledge rules of the target; with no target given, the GPU is only known once the
    /// worker runs, so only the target-independent checks apply.
    fn static_check(&self, spec: &TaskSpec, source: &str) -> Vec<Violation> {
        let mut v = check_candidate(spec, source);
        let mlx = BackendKind::Mlx.backend();
        // `numpy` and `cpu` are the test suite's targets, with no rules of their own.
        if let Some(t) = self.target.as_deref().and_then(|t| mlx.target_named(t)) {
            v.extend(crate::knowledge_checks::check(
                source,
                mlx.language(),
                t,
                self.hardware.as_ref(),
            ));
        }
        v
    }

    fn python(&self) -> Option<&Path> {
        Some(&self.python)
    }

    fn worker_command(&self) -> WorkerCommand {
        harness_command(
            &self.python,
            &self.harness_root,
            &self.sandbox_exe,
            BackendKind::Mlx,
            self.target.as_deref(),
        )
    }
}

/// `python3 -m ksearch_harness --backend B [--target T]`, with the unpacked harness on
/// `PYTHONPATH` and the binary whose launcher confines its runners.
pub(crate) fn harness_command(
    python: &Path,
    harness_root: &Path,
    sandbox_exe: &Path,
    backend: BackendKind,
    target: Option<&str>,
) -> WorkerCommand {
    let mut args = vec![
        "-m".to_owned(),
        "ksearch_harness".to_owned(),
        "--backend".to_owned(),
        backend.name().to_owned(),
    ];
    if let Some(t) = target {
        args.extend(["--target".to_owned(), t.to_owned()]);
    }
    let mut path = harness_root.display().to_string();
    if let Some(existing) = std::env::var_os("PYTHONPATH").filter(|p| !p.is_empty()) {
        path.push(':');
        path.push_str(&existing.to_string_lossy());
    }
    WorkerCommand {
        program: python.to_owned(),
        args,
        env: vec![
            ("PYTHONPATH".into(), path),
            ("PYTHONUNBUFFERED".into(), "1".into()),
            (
                "KSEARCH_SANDBOX_EXE".into(),
                sandbox_exe.display().to_string(),
            ),
        ],
        // Importing MLX or PyTorch and initialising the GPU can take a while on a cold machine.
        startup_timeout: Duration::from_secs(120),
        current_dir: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_harness_unpacks_once_and_completely() {
        let root = tempfile::tempdir().unwrap();
        let a = unpack_harness(root.path()).unwrap();
        let b = unpack_harness(root.path()).unwrap();
        assert_eq!(a, b);
        for (name, text) in embedded::HARNESS_FILES {
            assert_eq!(
                fs_err::read_to_string(a.join("ksearch_harness").join(name)).unwrap(),
                *text
            );
        }
        assert!(
            embedded::HARNESS_FILES
                .iter()
                .any(|(n, _)| *n == "__main__.py")
        );
    }

    #[test]
    fn threads_of_one_process_unpack_at_once() {
        // They shared one staging directory (named by the process), and all but one failed.
        let root = tempfile::tempdir().unwrap();
        let dirs: Vec<_> = std::thread::scope(|s| {
            let all: Vec<_> = (0..8)
                .map(|_| s.spawn(|| unpack_harness(root.path())))
                .collect();
            all.into_iter()
                .map(|t| t.join().unwrap().unwrap())
                .collect()
        });
        assert!(dirs.iter().all(|d| *d == dirs[0]));
        assert!(dirs[0].join("ksearch_harness").join("__main__.py").exists());
        let left: Vec<_> = fs_err::read_dir(root.path())
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
            .collect();
        assert!(left.is_empty(), "staging directories left: {left:?}");
    }
}
