//! `ksearch worker c`: the process that compiles, checks and times C candidates. It reads
//! requests on one file descriptor and writes messages on another (see `docs/protocol.md`);
//! candidate code may print whatever it likes on stdout and stderr.

use std::collections::HashMap;
use std::fs::File;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::FromRawFd;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Instant;

use ksearch_core::protocol::{
    CompileReport, ContenderTiming, Envelope, ErrorStats, EvaluateRequest, EvaluateResult,
    PROTOCOL_VERSION, Phase, Phases, Request, Role, Status, WorkerMessage, WorkloadReport,
};
use ksearch_core::task::Source;

use super::gauntlet::{TaskFault, check_seed};
use super::kernel::{Compiler, Flavor, Kernel};
use super::timing::time_workload;
use crate::output_capture::end_marker;
use crate::worker_process::PROTOCOL_FDS_VAR;

/// Writes protocol messages, one JSON line each.
struct Messages(File);

impl Messages {
    fn send(&mut self, message: WorkerMessage) {
        let mut line = serde_json::to_string(&Envelope::new(message)).expect("messages serialize");
        line.push('\n');
        // If the orchestrator is gone there is nobody to tell.
        let _ = self
            .0
            .write_all(line.as_bytes())
            .and_then(|()| self.0.flush());
    }

    fn progress(&mut self, id: u64, phase: Phase, workload: Option<&str>) {
        self.send(WorkerMessage::Progress {
            id,
            phase,
            workload: workload.map(str::to_owned),
        });
    }
}

/// Run the worker until its request channel closes. Returns the process exit code.
pub fn run() -> i32 {
    let Some((req_fd, msg_fd)) = std::env::var(PROTOCOL_FDS_VAR).ok().and_then(|v| {
        let (a, b) = v.split_once(',')?;
        Some((a.trim().parse::<i32>().ok()?, b.trim().parse::<i32>().ok()?))
    }) else {
        let _ = writeln!(
            std::io::stderr(),
            "`ksearch worker c` is started by ksearch itself; it expects {PROTOCOL_FDS_VAR}"
        );
        return 2;
    };
    // SAFETY: no other thread exists yet that could read the environment.
    unsafe { std::env::remove_var(PROTOCOL_FDS_VAR) };
    // SAFETY: the supervisor opened these descriptors for us and nothing else owns them.
    let (requests, messages) = unsafe { (File::from_raw_fd(req_fd), File::from_raw_fd(msg_fd)) };
    std::panic::set_hook(Box::new(move |info| {
        // SAFETY: the message fd stays open for the life of the process; ManuallyDrop keeps
        // this handle from closing it.
        let f = std::mem::ManuallyDrop::new(unsafe { File::from_raw_fd(msg_fd) });
        let mut m = Messages(f.try_clone().expect("dup of the message fd"));
        m.send(WorkerMessage::Error {
            id: None,
            message: format!("the c worker panicked: {info}"),
        });
    }));
    let mut out = Messages(messages);
    out.send(WorkerMessage::Hello {
        backend: "c".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        pid: std::process::id(),
    });

    let mut worker = match CWorker::new() {
        Ok(w) => w,
        Err(e) => {
            out.send(WorkerMessage::Error {
                id: None,
                message: e,
            });
            return 1;
        }
    };
    for line in BufReader::new(requests).lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        let request = match serde_json::from_str::<Envelope<Request>>(&line) {
            Ok(env) if env.protocol == PROTOCOL_VERSION => env.message,
            Ok(env) => {
                out.send(WorkerMessage::Error {
                    id: None,
                    message: format!(
                        "request of protocol version {}; this worker speaks {PROTOCOL_VERSION}",
                        env.protocol
                    ),
                });
                continue;
            }
            Err(e) => {
                out.send(WorkerMessage::Error {
                    id: None,
                    message: format!("malformed request: {e}"),
                });
                continue;
            }
        };
        match request {
            Request::Shutdown => break,
            Request::Evaluate(req) => {
                let reply = match worker.evaluate(&req, &mut out) {
                    Ok(result) => WorkerMessage::Result(Box::new(result)),
                    Err(message) => WorkerMessage::Error {
                        id: Some(req.id),
                        message,
                    },
                };
                flush_candidate_output(req.id);
                out.send(reply);
            }
        }
    }
    0
}

/// Flush C stdio buffers and mark the end of this evaluation's output for the supervisor.
fn flush_candidate_output(id: u64) {
    // SAFETY: fflush(NULL) flushes every open C stream.
    unsafe { libc::fflush(std::ptr::null_mut()) };
    let marker = end_marker(id);
    // SAFETY: writing a valid buffer to fd 1; failure (fd closed by a candidate) is harmless.
    unsafe { libc::write(1, marker.as_ptr().cast(), marker.len()) };
}

struct CWorker {
    compiler: Compiler,
    build_root: PathBuf,
    builds: u64,
    /// References and contenders by source hash; candidates are always built fresh.
    cache: HashMap<u64, Rc<Kernel>>,
}

/// A failed evaluation step: either an outcome for the candidate or a fault of the request.
enum Stop {
    Outcome(Status, String),
    Fault(String),
}

impl From<TaskFault> for Stop {
    fn from(f: TaskFault) -> Self {
        Stop::Fault(f.0)
    }
}

impl CWorker {
    fn new() -> Result<Self, String> {
        let build_root = std::env::current_dir()
            .map_err(|e| format!("no working directory: {e}"))?
            .join("builds");
        std::fs::create_dir_all(&build_root)
            .map_err(|e| format!("could not create {}: {e}", build_root.display()))?;
        Ok(Self {
            compiler: Compiler::detect(),
            build_root,
            builds: 0,
            cache: HashMap::new(),
        })
    }

    fn next_dir(&mut self) -> PathBuf {
        self.builds += 1;
        self.build_root.join(format!("{:06}", self.builds))
    }

    /// Build and load a trusted source (reference or contender), reusing an earlier build.
    fn trusted(
        &mut self,
        req: &EvaluateRequest,
        source: &Source,
        libs: &[String],
        flavor: Flavor,
        what: &str,
    ) -> Result<Rc<Kernel>, String> {
        let mut h = DefaultHasher::new();
        // The signature comes from these fields of the task; the rest cannot change the build.
        let signature = serde_json::to_string(&(
            &req.task.name,
            &req.task.inputs,
            &req.task.outputs,
            &req.task.axes,
        ))
        .unwrap_or_default();
        (signature, &source.file, &source.text, libs, flavor).hash(&mut h);
        let key = h.finish();
        if let Some(k) = self.cache.get(&key) {
            return Ok(Rc::clone(k));
        }
        let dir = self.next_dir();
        let built = self
            .compiler
            .build(&dir, &req.task, source, libs, flavor)
            .map_err(|f| format!("the {what} does not build ({}):\n{}", f.command, f.log))?;
        let kernel = Rc::new(
            Kernel::load(&built.path).map_err(|e| format!("the {what} does not load: {e}"))?,
        );
        self.cache.insert(key, Rc::clone(&kernel));
        Ok(kernel)
    }

    fn evaluate(
        &mut self,
        req: &EvaluateRequest,
        out: &mut Messages,
    ) -> Result<EvaluateResult, String> {
        let mut result = EvaluateResult {
            id: req.id,
            status: Status::Passed,
            message: String::new(),
            compile: None,
            workloads: Vec::new(),
            phases: Phases::default(),
            output: Default::default(),
        };
        match self.run_phases(req, out, &mut result) {
            Ok(()) => {
                result.message = format!(
                    "passed {} workload(s) × {} seed(s) and a re-check after timing",
                    req.workloads.len(),
                    req.check.seeds.len()
                );
                Ok(result)
            }
            Err(Stop::Outcome(status, message)) => {
                result.status = status;
                result.message = message;
                Ok(result)
            }
            Err(Stop::Fault(message)) => Err(message),
        }
    }

    fn run_phases(
        &mut self,
        req: &EvaluateRequest,
        out: &mut Messages,
        result: &mut EvaluateResult,
    ) -> Result<(), Stop> {
        let t = Instant::now();
        out.progress(req.id, Phase::Compile, None);
        let reference = self
            .trusted(req, &req.reference, &[], Flavor::Reference, "reference")
            .map_err(Stop::Fault)?;
        let mut contenders = Vec::new();
        for c in &req.compare {
            for (k, v) in &c.env {
                // SAFETY: the worker is single-threaded apart from nothing that reads the env.
                unsafe { std::env::set_var(k, v) };
            }
            let what = format!("{} `{}`", c.role, c.label);
            contenders.push((
                c,
                self.trusted(req, &c.source, &c.libs, Flavor::Optimized, &what)
                    .map_err(Stop::Fault)?,
            ));
        }
        let dir = self.next_dir();
        let built = self
            .compiler
            .build(&dir, &req.task, &req.candidate, &[], Flavor::Optimized);
        result.phases.compile_s = t.elapsed().as_secs_f64();
        let candidate = match built {
            Ok(b) => {
                result.compile = Some(CompileReport {
                    command: b.command,
                    compiler: self.compiler.version.clone(),
                    seconds: b.seconds,
                    log: b.log,
                });
                Kernel::load(&b.path).map_err(|e| Stop::Outcome(Status::RuntimeError, e))?
            }
            Err(f) => {
                let first = f
                    .log
                    .lines()
                    .find(|l| l.contains("error"))
                    .unwrap_or("the compiler failed")
                    .to_owned();
                result.compile = Some(CompileReport {
                    command: f.command,
                    compiler: self.compiler.version.clone(),
                    seconds: f.seconds,
                    log: f.log,
                });
                return Err(Stop::Outcome(Status::CompileError, first));
            }
        };

        let t = Instant::now();
        for w in &req.workloads {
            out.progress(req.id, Phase::Check, Some(&w.name));
            let mut worst: Option<ErrorStats> = None;
            for &seed in &req.check.seeds {
                let check = check_seed(
                    &req.task,
                    &req.check.tolerances,
                    w,
                    seed,
                    &reference,
                    &candidate,
                )?;
                worst = Some(merge(worst, check.errors));
                if let Some(f) = check.failure {
                    result.phases.check_s = t.elapsed().as_secs_f64();
                    result.workloads.push(failed_workload(&w.name, worst, &f));
                    return Err(Stop::Outcome(
                        Status::Incorrect,
                        format!("workload `{}`, seed {seed}: {f}", w.name),
                    ));
                }
            }
            result.workloads.push(WorkloadReport {
                name: w.name.clone(),
                status: Status::Passed,
                message: None,
                errors: worst,
                timings: Vec::new(),
            });
        }
        result.phases.check_s = t.elapsed().as_secs_f64();

        if let Some(plan) = &req.timing {
            let t = Instant::now();
            let timing_seed = req.check.recheck_seed ^ 0x7143_D00D;
            for (w, report) in req.workloads.iter().zip(&mut result.workloads) {
                out.progress(req.id, Phase::Timing, Some(&w.name));
                let kernels: Vec<&Kernel> = std::iter::once(&candidate)
                    .chain(contenders.iter().map(|(_, k)| k.as_ref()))
                    .collect();
                let stats = time_workload(&req.task, w, plan, timing_seed, &kernels);
                let labels = std::iter::once((Role::Candidate, req.candidate.file.clone()))
                    .chain(contenders.iter().map(|(c, _)| (c.role, c.label.clone())));
                report.timings = labels
                    .zip(stats)
                    .map(|((role, label), stats)| ContenderTiming { role, label, stats })
                    .collect();
            }
            result.phases.timing_s = t.elapsed().as_secs_f64();
        }

        // A last check on inputs never seen before: a candidate that replays an earlier
        // answer, or breaks after many calls, fails here.
        let t = Instant::now();
        for (w, report) in req.workloads.iter().zip(&mut result.workloads) {
            out.progress(req.id, Phase::Recheck, Some(&w.name));
            let check = check_seed(
                &req.task,
                &req.check.tolerances,
                w,
                req.check.recheck_seed,
                &reference,
                &candidate,
            )?;
            let merged = merge(report.errors, check.errors);
            report.errors = Some(merged);
            if let Some(f) = check.failure {
                result.phases.check_s += t.elapsed().as_secs_f64();
                report.status = Status::Incorrect;
                report.message = Some(format!("after timing: {f}"));
                return Err(Stop::Outcome(
                    Status::Incorrect,
                    format!(
                        "workload `{}`, re-check on fresh inputs after timing: {f}",
                        w.name
                    ),
                ));
            }
        }
        result.phases.check_s += t.elapsed().as_secs_f64();
        Ok(())
    }
}

fn merge(a: Option<ErrorStats>, b: ErrorStats) -> ErrorStats {
    match a {
        None => b,
        Some(a) => ErrorStats {
            max_abs_err: a.max_abs_err.max(b.max_abs_err),
            max_rel_err: a.max_rel_err.max(b.max_rel_err),
            norm_rel_err: a.norm_rel_err.max(b.norm_rel_err),
            seeds_checked: a.seeds_checked + b.seeds_checked,
        },
    }
}

fn failed_workload(name: &str, errors: Option<ErrorStats>, message: &str) -> WorkloadReport {
    WorkloadReport {
        name: name.to_owned(),
        status: Status::Incorrect,
        message: Some(message.to_owned()),
        errors,
        timings: Vec::new(),
    }
}
