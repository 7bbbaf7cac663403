//! The GPU kernels of Python modules compiled ahead of time for an NVIDIA device this machine need
//! not have (`ksearch space check TASK --hardware h200`), one Python process for every point
//! checked: a torch module's Triton kernels by the harness's `triton_aot` (each module called on
//! `meta` tensors with a Triton driver that compiles each launch for the device's compute
//! capability and runs nothing), an MLX module's `cuda_kernel`s by its `mlx_aot` (each module
//! called on MLX arrays on the CPU, each kernel wrapped and compiled by NVRTC).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use ksearch_core::task::{BackendKind, TaskSpec};
use ksearch_knowledge::Hardware;
use serde::Deserialize;

use crate::mlx_backend::{cache_root, unpack_harness};

/// One kernel as it compiled for the device: what `space check` sums up of it (the compiler
/// process also names it and its workload, which only its failures quote).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CompiledKernel {
    /// Shared memory a block uses, in bytes.
    pub shared: u64,
    /// Registers a thread (as ptxas or `cuobjdump` said; absent where neither could).
    pub registers: Option<u32>,
    /// Bytes of stack frame a thread spills registers to (these kernels have no other stack).
    pub spilled: Option<u64>,
    /// TMA copies (`cp.async.bulk.tensor`) and `wgmma` instructions in its PTX (Triton's only).
    #[serde(default)]
    pub tma: Option<u32>,
    #[serde(default)]
    pub wgmma: Option<u32>,
    /// ptxas's notes that it serialized the kernel's `wgmma` instructions (a register of a product
    /// in flight read or written, or a product issued on a divergent path: correct, and slow).
    #[serde(default)]
    pub serialized: Option<u32>,
}

/// What compiling one module's kernels ahead of time found.
#[derive(Debug, Clone, PartialEq)]
pub enum AheadOfTime {
    Compiled(Vec<CompiledKernel>),
    /// A kernel did not compile, or needs more shared memory than the device gives a block.
    Failed(String),
    /// The module could not be run without a GPU, or launched no kernel.
    Unchecked(String),
}

#[derive(Deserialize)]
struct Line {
    #[serde(default)]
    kernels: Vec<CompiledKernel>,
    error: Option<String>,
    unchecked: Option<String>,
    unavailable: Option<String>,
}

/// What compiling the points' kernels ahead of time found, over every point.
#[derive(Debug, Default)]
pub struct CompiledPoints {
    pub points: usize,
    kernels: Vec<CompiledKernel>,
    /// Points with a kernel that spills registers.
    spilling: Vec<String>,
    /// Points with a kernel whose warpgroup products ptxas serialized.
    serializing: Vec<String>,
    /// Points whose module could not be run without a GPU, and the first reason.
    unchecked: usize,
    why_unchecked: Option<String>,
    /// Why no kernel could be compiled here at all.
    pub unavailable: Option<String>,
}

impl CompiledPoints {
    /// Count one point's outcome; `Err` is a failure of that point.
    pub fn add(&mut self, point: &str, outcome: AheadOfTime) -> Result<(), String> {
        self.points += 1;
        match outcome {
            AheadOfTime::Compiled(k) => {
                if k.iter().any(|c| c.spilled.unwrap_or(0) > 0) {
                    self.spilling.push(point.to_owned());
                }
                if k.iter().any(|c| c.serialized.unwrap_or(0) > 0) {
                    self.serializing.push(point.to_owned());
                }
                self.kernels.extend(k);
            }
            AheadOfTime::Failed(e) => return Err(e),
            AheadOfTime::Unchecked(why) => {
                self.unchecked += 1;
                self.why_unchecked.get_or_insert(why);
            }
        }
        Ok(())
    }

    /// The lines `space check` prints after its list of points, for kernels of `what` ("Triton
    /// kernels").
    pub fn render(&self, what: &str, hw: &Hardware) -> String {
        let device = format!(
            "{} (compute capability {})",
            hw.name,
            hw.compute_capability.as_deref().unwrap_or("?")
        );
        if let Some(why) = &self.unavailable {
            return format!("({what} were not compiled for {device}: {why})\n");
        }
        let k = &self.kernels;
        if k.is_empty() && self.points > self.unchecked {
            return format!("({what} compiled ahead of time for {device}: no point passed)\n");
        }
        let range = |f: &dyn Fn(&CompiledKernel) -> Option<u64>| {
            let v: Vec<u64> = k.iter().filter_map(f).collect();
            match (v.iter().min(), v.iter().max()) {
                (Some(a), Some(b)) if a == b => a.to_string(),
                (Some(a), Some(b)) => format!("{a}-{b}"),
                _ => "?".into(),
            }
        };
        // What a Triton kernel's PTX says of it.
        let ptx = if k.iter().any(|c| c.tma.is_some()) {
            format!(
                ", {} copy tiles with TMA, {} use wgmma",
                k.iter().filter(|c| c.tma.unwrap_or(0) > 0).count(),
                k.iter().filter(|c| c.wgmma.unwrap_or(0) > 0).count(),
            )
        } else {
            String::new()
        };
        let mut out = format!(
            "({what} compiled ahead of time for {device}, every workload: {} of {}: registers a thread {}, shared memory {} bytes a block; {} spill registers{ptx})\n",
            counted(k.len(), "kernel"),
            counted(self.points - self.unchecked, "point"),
            range(&|c| c.registers.map(u64::from)),
            range(&|c| Some(c.shared)),
            k.iter().filter(|c| c.spilled.unwrap_or(0) > 0).count(),
        );
        for (points, what) in [
            (&self.spilling, "spilling registers"),
            (&self.serializing, "wgmma serialized by ptxas"),
        ] {
            if let Some(first) = points.first() {
                out.push_str(&format!(
                    "({what}: {}, {first}{})\n",
                    counted(points.len(), "point"),
                    if points.len() > 1 { "; ..." } else { "" }
                ));
            }
        }
        if let Some(why) = &self.why_unchecked {
            out.push_str(&format!(
                "({} not compiled ahead of time: {why})\n",
                counted(self.unchecked, "point")
            ));
        }
        out
    }
}

fn counted(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// The compiler process, started once for a task and a device.
#[derive(Debug)]
pub struct KernelCompiler {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    _task: tempfile::NamedTempFile,
}

impl KernelCompiler {
    /// What it compiles for a task of `backend`, as `space check` says it ("Triton kernels"),
    /// where it has a compiler.
    pub fn kernels(backend: BackendKind) -> Option<&'static str> {
        match backend {
            BackendKind::Torch => Some("Triton kernels"),
            BackendKind::Mlx => Some("MLX CUDA kernels (NVRTC)"),
            BackendKind::C => None,
        }
    }

    /// Start compiling a `backend` task's kernels for `hw` (an NVIDIA device with a compute
    /// capability and a shared-memory limit); `Err` says why it cannot (not such a device, no
    /// Python, no Triton or NVRTC). With `keep`, each kernel's machine code is written beside
    /// the module it came from, as `MODULE.KERNEL.WORKLOAD.sass` (disassembled by the `nvdisasm`
    /// Triton's wheel ships; the `.cubin` where there is none).
    pub fn start(
        backend: BackendKind,
        python: &Path,
        spec: &TaskSpec,
        hw: &Hardware,
        keep: bool,
    ) -> Result<Self, String> {
        let module = match backend {
            BackendKind::Torch => "ksearch_harness.triton_aot",
            BackendKind::Mlx => "ksearch_harness.mlx_aot",
            BackendKind::C => return Err("a C task's kernels compile with cc".into()),
        };
        let capability = hw
            .compute_capability
            .as_deref()
            .ok_or_else(|| format!("{} has no NVIDIA compute capability", hw.name))?;
        let shared = hw
            .on_chip
            .as_ref()
            .and_then(|c| {
                c.shared_per_block_optin_bytes
                    .as_ref()
                    .unwrap_or(&c.shared_per_block_bytes)
                    .value
            })
            .map(|bytes| bytes as u64)
            .ok_or_else(|| {
                format!(
                    "the knowledge of {} has no shared memory per block",
                    hw.name
                )
            })?;
        let harness = unpack_harness(&cache_root()).map_err(|e| e.to_string())?;
        let mut task = tempfile::NamedTempFile::new().map_err(|e| e.to_string())?;
        serde_json::to_writer(&mut task, spec).map_err(|e| e.to_string())?;
        task.flush().map_err(|e| e.to_string())?;
        // The template is the user's own code, but it is code: no API key reaches it, as none
        // reaches a worker.
        let mut child = Command::new(python)
            .env_clear()
            .envs(crate::env_scrub::scrubbed(std::env::vars_os()))
            .args(["-m", module, "--capability", capability])
            .arg("--shared-limit")
            .arg(shared.to_string())
            .arg("--task")
            .arg(task.path())
            .args(keep.then_some("--keep"))
            .env("PYTHONPATH", &harness)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        Ok(Self {
            child,
            stdin,
            stdout,
            _task: task,
        })
    }

    /// Compile the kernels `file` launches, on every workload of the task.
    pub fn compile(&mut self, file: &Path) -> Result<AheadOfTime, String> {
        let lost = |e: &dyn std::fmt::Display| format!("the compiler process stopped: {e}");
        writeln!(self.stdin, "{}", file.display()).map_err(|e| lost(&e))?;
        self.stdin.flush().map_err(|e| lost(&e))?;
        let mut line = String::new();
        if self.stdout.read_line(&mut line).map_err(|e| lost(&e))? == 0 {
            return Err(lost(&"no answer"));
        }
        let got: Line = serde_json::from_str(&line).map_err(|e| lost(&e))?;
        Ok(match (got.unavailable, got.error, got.unchecked) {
            (Some(why), _, _) => return Err(why),
            (_, Some(e), _) => AheadOfTime::Failed(e),
            (_, _, Some(why)) => AheadOfTime::Unchecked(why),
            _ => AheadOfTime::Compiled(got.kernels),
        })
    }
}

impl Drop for KernelCompiler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
