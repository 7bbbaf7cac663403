//! `ksearch worker c`, the judge: it compiles candidates (in a sandbox), runs the reference,
//! starts a sandboxed runner per contender, checks and times them. It reads requests on one
//! file descriptor and writes messages on another (see `docs/protocol.md`); candidate code runs
//! only in runners, which can reach neither descriptor.

use std::collections::HashMap;
use std::fs::File;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::FromRawFd;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Instant;

use ksearch_core::protocol::{
    CompileReport, ContenderTiming, Described, Envelope, ErrorStats, EvaluateRequest,
    EvaluateResult, PROTOCOL_VERSION, Phase, Phases, Request, Role, Status, WorkerMessage,
    WorkloadReport,
};
use ksearch_core::task::{Source, Workload};

use super::contender::{Lost, Runner, RunnerSetup};
use super::gauntlet::{CheckStop, TaskFault, check_seed};
use super::kernel::{Compiler, Flavor, Kernel};
use super::pool::{InputPlace, Pool};
use super::timing::{Timed, TimingStop, time_workload};
use crate::output_capture::end_marker;
use crate::sandbox::{Limits, Sandbox};
use crate::worker_process::PROTOCOL_FDS_VAR;

/// Writes protocol messages, one JSON line each.
/// A failed check: the seed it failed on and what was wrong.
type Failure = (u64, String);

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
    // SAFETY: the supervisor opened these descriptors for us and nothing else owns them. They
    // are closed on exec, so no program this worker starts inherits them.
    let (requests, messages) = unsafe {
        libc::fcntl(req_fd, libc::F_SETFD, libc::FD_CLOEXEC);
        libc::fcntl(msg_fd, libc::F_SETFD, libc::FD_CLOEXEC);
        (File::from_raw_fd(req_fd), File::from_raw_fd(msg_fd))
    };
    std::panic::set_hook(Box::new(move |info| {
        // SAFETY: the message fd stays open for the life of the process; ManuallyDrop keeps
        // this handle from closing it.
        let f = std::mem::ManuallyDrop::new(unsafe { File::from_raw_fd(msg_fd) });
        let mut m = Messages(f.try_clone().expect("dup of the message fd"));
        m.send(WorkerMessage::Error {
            id: None,
            message: format!("the c worker panicked: {info}"),
            task_fault: false,
        });
    }));
    super::reference_fault::install(msg_fd);
    let mut out = Messages(messages);
    out.send(WorkerMessage::Hello {
        backend: ksearch_core::task::BackendKind::C.name().into(),
        version: env!("CARGO_PKG_VERSION").into(),
        pid: std::process::id(),
    });

    // Nothing may read this process's memory or environment, even processes of the same user.
    // SAFETY: prctl on ourselves.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    let mut worker = match CWorker::new() {
        Ok(w) => w,
        Err(e) => {
            out.send(WorkerMessage::Error {
                id: None,
                message: e,
                task_fault: false,
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
                    task_fault: false,
                });
                continue;
            }
            Err(e) => {
                out.send(WorkerMessage::Error {
                    id: None,
                    message: format!("malformed request: {e}"),
                    task_fault: false,
                });
                continue;
            }
        };
        match request {
            Request::Shutdown => break,
            Request::Evaluate(req) => {
                let reply = match worker.evaluate(&req, &mut out) {
                    Ok(result) => WorkerMessage::Result(Box::new(result)),
                    Err((message, task_fault)) => WorkerMessage::Error {
                        id: Some(req.id),
                        message,
                        task_fault,
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
    /// Trusted builds (reference, baselines, comparisons, parents) by source hash.
    built: HashMap<u64, PathBuf>,
    /// The references, loaded in the judge.
    references: HashMap<PathBuf, Rc<Kernel>>,
    runners: RunnerSetup,
    next_pool: u32,
}

/// A failed evaluation step: an outcome for the candidate, a fault of the task's own code
/// (its reference, baseline or comparisons), or the judge's own failure.
enum Stop {
    Outcome(Status, String),
    Fault(String),
    Internal(String),
}

impl From<TaskFault> for Stop {
    fn from(f: TaskFault) -> Self {
        Stop::Fault(f.0)
    }
}

/// Memory a runner may allocate beyond the tensors it shares with the judge.
const RUNNER_MEMORY: u64 = 4 << 30;

/// The CPUs this process may run on.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &raw mut set) }
        != 0
    {
        return Vec::new();
    }
    // SAFETY: CPU_ISSET reads the set within bounds.
    (0..1024)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// Pin the judge to one CPU and its runners to another, when there are two; which pair is
/// picked at random, so judges running side by side spread out.
fn pick_cpus() -> (Option<usize>, Option<usize>) {
    let cpus = allowed_cpus();
    if cpus.len() < 2 {
        return (None, None);
    }
    let r = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as usize)
        ^ std::process::id() as usize;
    let judge = cpus[r % cpus.len()];
    let runner = cpus[(r / cpus.len() + 1 + (r % cpus.len())) % cpus.len()];
    let runner = if runner == judge {
        cpus[(cpus.iter().position(|&c| c == judge).unwrap_or(0) + 1) % cpus.len()]
    } else {
        runner
    };
    crate::sandbox::pin_to_cpu(judge);
    (Some(judge), Some(runner))
}

impl CWorker {
    fn new() -> Result<Self, String> {
        let cwd = std::env::current_dir().map_err(|e| format!("no working directory: {e}"))?;
        let build_root = cwd.join("builds");
        let root_dir = cwd.join("sandbox-root");
        for d in [&build_root, &root_dir] {
            std::fs::create_dir_all(d)
                .map_err(|e| format!("could not create {}: {e}", d.display()))?;
        }
        let exe =
            std::env::current_exe().map_err(|e| format!("cannot find the ksearch binary: {e}"))?;
        let sandbox = Sandbox {
            launcher: exe.clone(),
        };
        let (judge_cpu, runner_cpu) = pick_cpus();
        Ok(Self {
            compiler: Compiler::detect(sandbox.clone(), root_dir.clone()),
            build_root,
            builds: 0,
            built: HashMap::new(),
            references: HashMap::new(),
            runners: RunnerSetup {
                sandbox,
                exe,
                root_dir,
                limits: Limits {
                    memory_bytes: RUNNER_MEMORY,
                    cpu_seconds: 3600,
                    file_bytes: 64 << 20,
                    processes: 4096,
                    open_files: 256,
                },
                cpu: runner_cpu,
                judge_cpu,
            },
            next_pool: 0,
        })
    }

    fn next_dir(&mut self) -> PathBuf {
        self.builds += 1;
        self.build_root.join(format!("{:06}", self.builds))
    }

    /// Build a trusted source (reference or contender), reusing an earlier build.
    fn trusted(
        &mut self,
        req: &EvaluateRequest,
        source: &Source,
        libs: &[String],
        flavor: Flavor,
        what: &str,
    ) -> Result<PathBuf, String> {
        let mut h = DefaultHasher::new();
        // The signature comes from these fields of the task; the rest cannot change the build.
        let signature = serde_json::to_string(&(
            &req.task.name,
            &req.task.inputs,
            &req.task.outputs,
            &req.task.axes,
        ))
        .unwrap_or_default();
        let build = serde_json::to_string(&req.task.build).unwrap_or_default();
        (signature, build, &source.file, &source.text, libs, flavor).hash(&mut h);
        let key = h.finish();
        if let Some(p) = self.built.get(&key) {
            return Ok(p.clone());
        }
        let dir = self.next_dir();
        let built = self
            .compiler
            .build(&dir, &req.task, source, libs, flavor)
            .map_err(|f| format!("the {what} does not build ({}):\n{}", f.command, f.log))?;
        self.built.insert(key, built.path.clone());
        Ok(built.path)
    }

    fn reference(&mut self, req: &EvaluateRequest) -> Result<Rc<Kernel>, String> {
        let path = self.trusted(req, &req.reference, &[], Flavor::Reference, "reference")?;
        if let Some(k) = self.references.get(&path) {
            return Ok(Rc::clone(k));
        }
        let k =
            Rc::new(Kernel::load(&path).map_err(|e| format!("the reference does not load: {e}"))?);
        self.references.insert(path, Rc::clone(&k));
        Ok(k)
    }

    /// The result, or why there is none: the message and whether the task's own code is at
    /// fault.
    fn evaluate(
        &mut self,
        req: &EvaluateRequest,
        out: &mut Messages,
    ) -> Result<EvaluateResult, (String, bool)> {
        let mut result = EvaluateResult {
            id: req.id,
            status: Status::Passed,
            message: String::new(),
            compile: None,
            workloads: Vec::new(),
            phases: Phases::default(),
            output: Default::default(),
            sandbox: None,
            described: Vec::new(),
        };
        let mut runners = Vec::new();
        let outcome = self.run_phases(req, out, &mut result, &mut runners);
        for (_, r) in runners {
            Runner::stop(r);
        }
        match outcome {
            Ok(()) => {
                result.message = req.passed_message();
                Ok(result)
            }
            Err(Stop::Outcome(status, message)) => {
                result.status = status;
                result.message = message;
                Ok(result)
            }
            Err(Stop::Fault(message)) => Err((message, true)),
            Err(Stop::Internal(message)) => Err((message, false)),
        }
    }

    /// What a runner's loss means for the evaluation: an outcome when the candidate (or an
    /// earlier candidate timed beside it) failed, a fault when the task's own code did.
    fn lost(
        req: &EvaluateRequest,
        who: Option<usize>,
        lost: &Lost,
        phase: &str,
        workload: &Workload,
        pool: Option<&Pool>,
        runner: Option<&Runner>,
    ) -> Stop {
        let what = match who {
            None => "the candidate".to_owned(),
            Some(i) => format!(
                "the {} `{}`",
                req.contenders[i].role, req.contenders[i].label
            ),
        };
        if let Some(c) = who.map(|i| &req.contenders[i])
            && matches!(c.role, Role::Baseline | Role::Comparison)
        {
            return Stop::Fault(format!(
                "{what} {} during the {phase} on workload `{}`",
                lost.message, workload.name
            ));
        }
        // A write to the inputs (mapped read-only) faults inside their mapping; a read past
        // the end of one, in the guard page after it.
        if let (Some(addr), Some(pool), Some(runner)) = (lost.fault, pool, runner)
            && let Some(p) = runner.pools.get(&pool.id)
            && addr >= p.runner_inputs
            && addr < p.runner_inputs + pool.layout.input_region() as u64
        {
            let w = &workload.name;
            return match pool.input_at(&req.task, (addr - p.runner_inputs) as usize) {
                Some(InputPlace::Past(name)) => Stop::Outcome(
                    Status::Crashed,
                    format!(
                        "{what} accessed memory past the end of input `{name}` during the {phase} on workload `{w}` (a guard page follows every input; it was killed by the access)"
                    ),
                ),
                place => {
                    let name = match place {
                        Some(InputPlace::Inside(n)) => n,
                        _ => "?".into(),
                    };
                    Stop::Outcome(
                        Status::Incorrect,
                        format!(
                            "{what} modified input `{name}` during the {phase} on workload `{w}` (inputs are read-only; it was killed by the write); inputs must not be written"
                        ),
                    )
                }
            };
        }
        if lost.timed_out {
            return Stop::Outcome(
                Status::Timeout,
                format!(
                    "{what}'s runner {} during the {phase} on workload `{}`",
                    lost.message, workload.name
                ),
            );
        }
        let (status, hint) = if lost.signalled {
            (Status::Crashed, "")
        } else if lost.exited {
            (Status::RuntimeError, " (did candidate code call exit()?)")
        } else {
            (Status::RuntimeError, "")
        };
        Stop::Outcome(
            status,
            format!(
                "{what}'s runner {} during the {phase} on workload `{}`{hint}",
                lost.message, workload.name
            ),
        )
    }

    fn run_phases(
        &mut self,
        req: &EvaluateRequest,
        out: &mut Messages,
        result: &mut EvaluateResult,
        runners: &mut Vec<(Option<usize>, Runner)>,
    ) -> Result<(), Stop> {
        let t = Instant::now();
        out.progress(req.id, Phase::Compile, None);
        let reference = self.reference(req).map_err(Stop::Fault)?;
        let mut contender_builds = Vec::new();
        for c in &req.contenders {
            let what = format!("{} `{}`", c.role, c.label);
            contender_builds.push(
                self.trusted(req, &c.source, &c.libs, Flavor::Optimized, &what)
                    .map_err(Stop::Fault)?,
            );
        }
        let dir = self.next_dir();
        let built = self
            .compiler
            .build(&dir, &req.task, &req.candidate, &[], Flavor::Optimized);
        result.phases.compile_s = t.elapsed().as_secs_f64();
        let candidate_so = match built {
            Ok(b) => {
                result.compile = Some(CompileReport {
                    command: b.command,
                    compiler: self.compiler.version(&req.task),
                    seconds: b.seconds,
                    log: b.log,
                });
                b.path
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
                    compiler: self.compiler.version(&req.task),
                    seconds: f.seconds,
                    log: f.log,
                });
                return Err(Stop::Outcome(Status::CompileError, first));
            }
        };
        // A fresh runner for every contender of this evaluation, the candidate first.
        let candidate = Runner::start(&self.runners, &candidate_so, &[], false).map_err(|e| {
            Stop::Outcome(
                Status::RuntimeError,
                format!("the candidate could not be loaded: {e}"),
            )
        })?;
        result.sandbox = Some(candidate.confinement().clone());
        runners.push((None, candidate));
        for (i, (c, so)) in req.contenders.iter().zip(&contender_builds).enumerate() {
            let env: Vec<(String, String)> =
                c.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            let trusted = matches!(c.role, Role::Baseline | Role::Comparison);
            let r = Runner::start(&self.runners, so, &env, trusted).map_err(|e| {
                let msg = format!("the {} `{}` could not be loaded: {e}", c.role, c.label);
                if trusted {
                    Stop::Fault(msg)
                } else {
                    Stop::Outcome(Status::RuntimeError, msg)
                }
            })?;
            if let Some(text) = r.description.clone() {
                result.described.push(Described {
                    role: c.role,
                    label: c.label.clone(),
                    text,
                });
            }
            runners.push((Some(i), r));
        }

        let t = Instant::now();
        for w in &req.workloads {
            out.progress(req.id, Phase::Check, Some(&w.name));
            let worst = self.check_workload(
                req,
                w,
                &req.check.seeds,
                &reference,
                &mut runners[0].1,
                "check",
            )?;
            match worst {
                (errors, None) => result.workloads.push(WorkloadReport {
                    name: w.name.clone(),
                    status: Status::Passed,
                    message: None,
                    errors,
                    timings: Vec::new(),
                }),
                (errors, Some((seed, f))) => {
                    result.phases.check_s = t.elapsed().as_secs_f64();
                    result.workloads.push(failed_workload(&w.name, errors, &f));
                    return Err(Stop::Outcome(
                        Status::Incorrect,
                        format!("workload `{}`, seed {seed}: {f}", w.name),
                    ));
                }
            }
        }
        result.phases.check_s = t.elapsed().as_secs_f64();

        if let Some(plan) = &req.timing {
            let t = Instant::now();
            let timing_seed = req.check.recheck_seed ^ 0x7143_D00D;
            let baseline = req
                .contenders
                .iter()
                .position(|c| c.role == Role::Baseline)
                .map(|i| i + 1)
                .ok_or_else(|| Stop::Internal("the request names no baseline".into()))?;
            for (w, report) in req.workloads.iter().zip(&mut result.workloads) {
                out.progress(req.id, Phase::Timing, Some(&w.name));
                let mut timed: Vec<Timed<'_>> = runners
                    .iter_mut()
                    .map(|(who, r)| Timed {
                        trusted: who.is_some_and(|i| {
                            matches!(req.contenders[i].role, Role::Baseline | Role::Comparison)
                        }),
                        what: who.map_or_else(
                            || "the candidate".to_owned(),
                            |i| {
                                format!(
                                    "the {} `{}`",
                                    req.contenders[i].role, req.contenders[i].label
                                )
                            },
                        ),
                        runner: r,
                    })
                    .collect();
                let stats = time_workload(
                    &req.task,
                    w,
                    plan,
                    &req.check.tolerances,
                    timing_seed,
                    &mut timed,
                    baseline,
                    &reference,
                    &mut self.next_pool,
                );
                drop(timed);
                let stats = match stats {
                    Ok(s) => s,
                    Err(TimingStop::Internal(m)) => return Err(Stop::Internal(m)),
                    Err(TimingStop::Task(f)) => return Err(Stop::from(f)),
                    Err(TimingStop::Runner { index, lost }) => {
                        let who = runners[index].0;
                        return Err(Self::lost(req, who, &lost, "timing", w, None, None));
                    }
                    Err(TimingStop::Incorrect { index, message }) => {
                        let who = runners[index].0;
                        let message = match who {
                            None => message,
                            Some(i) => format!(
                                "{message} (the {} `{}`, timed beside the candidate)",
                                req.contenders[i].role, req.contenders[i].label
                            ),
                        };
                        report.status = Status::Incorrect;
                        report.message = Some(message.clone());
                        return Err(Stop::Outcome(
                            Status::Incorrect,
                            format!("workload `{}`: {message}", w.name),
                        ));
                    }
                };
                let labels = std::iter::once((Role::Candidate, req.candidate.file.clone()))
                    .chain(req.contenders.iter().map(|c| (c.role, c.label.clone())));
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
            let (errors, failure) = self.check_workload(
                req,
                w,
                &[req.check.recheck_seed],
                &reference,
                &mut runners[0].1,
                "re-check",
            )?;
            report.errors = match (report.errors, errors) {
                (Some(a), Some(b)) => Some(merge(Some(a), b)),
                (a, b) => a.or(b),
            };
            if let Some((_, f)) = failure {
                result.phases.check_s += t.elapsed().as_secs_f64();
                report.status = Status::Incorrect;
                report.message = Some(format!("after timing: {f}"));
                return Err(Stop::Outcome(
                    Status::Incorrect,
                    format!(
                        "workload `{}`, re-check on fresh inputs after timing (seed {}): {f}",
                        w.name, req.check.recheck_seed
                    ),
                ));
            }
        }
        result.phases.check_s += t.elapsed().as_secs_f64();
        Ok(())
    }

    /// Check the candidate on `seeds` of one workload; the worst errors, and the first failure
    /// with its seed.
    fn check_workload(
        &mut self,
        req: &EvaluateRequest,
        w: &Workload,
        seeds: &[u64],
        reference: &Kernel,
        candidate: &mut Runner,
        phase: &str,
    ) -> Result<(Option<ErrorStats>, Option<Failure>), Stop> {
        self.next_pool += 1;
        let mut pool = Pool::new(self.next_pool, &req.task, w, 1)
            .map_err(|e| Stop::Internal(format!("shared memory: {e}")))?;
        if let Err(lost) = candidate.map_pool(pool.id, &pool.axes, &pool.layout, &pool.inputs_ro) {
            return Err(Self::lost(req, None, &lost, phase, w, None, None));
        }
        let mut worst: Option<ErrorStats> = None;
        for &seed in seeds {
            match check_seed(
                &req.task,
                &req.check.tolerances,
                w,
                seed,
                &mut pool,
                reference,
                candidate,
            ) {
                Ok(check) => {
                    worst = Some(merge(worst, check.errors));
                    if let Some(f) = check.failure {
                        candidate.drop_pool(pool.id);
                        return Ok((worst, Some((seed, f))));
                    }
                }
                Err(CheckStop::Task(f)) => return Err(Stop::Fault(f.0)),
                Err(CheckStop::Runner(lost)) => {
                    return Err(Self::lost(
                        req,
                        None,
                        &lost,
                        phase,
                        w,
                        Some(&pool),
                        Some(candidate),
                    ));
                }
            }
        }
        candidate.drop_pool(pool.id);
        Ok((worst, None))
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
