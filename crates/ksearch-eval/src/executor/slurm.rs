//! Evaluations as Slurm jobs. Each is `sbatch --wrap "ksearch eval-job JOB RESULT"`: the
//! orchestrator writes the job's file (the task and the request it built) to a directory the
//! nodes share, the job evaluates it on its node with the local path (judge, sandbox and all)
//! and writes its outcome beside it, and the orchestrator, polling `squeue`, reads it back and
//! holds it against the request it sent, as the local path does. A job that ends without an
//! outcome (cancelled, preempted, its node failed, lost from the queue) runs once more; a
//! second loss is the candidate's, recorded as `crashed` with the reason. The orchestrator
//! stays the only writer of the run store.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ksearch_core::protocol::{
    CapturedOutput, EvaluateRequest, EvaluateResult, Phases, Role, Status,
};
use ksearch_core::score::speedup_over;
use ksearch_core::task::Task;

use super::job_file::{JOB_FORMAT, JobFile, JobOutcome, write_json};
pub use super::slurm_cli::{NodeOptions, SlurmSettings};
use super::slurm_cli::{ended, quoted, run_tool, tail};
use super::{Executor, Finished, Job, now_unix};
use crate::error::EvalError;
use crate::evaluator::{Evaluation, Evaluator, build_request};

/// A job in flight.
#[derive(Debug)]
struct InFlight {
    slot: usize,
    round: u64,
    job_id: String,
    /// 1, or 2 for the retry.
    run: u32,
    request: EvaluateRequest,
    task_baseline: String,
    job_file: PathBuf,
    result_file: PathBuf,
    out_file: PathBuf,
    submitted_unix: f64,
    /// First seen running.
    running_unix: Option<f64>,
    /// When the queue first said it ended (or no longer knew it), and how.
    ended: Option<(Instant, String)>,
    retried: Vec<String>,
}

/// Evaluations as Slurm jobs.
#[derive(Debug)]
pub struct SlurmExecutor {
    settings: SlurmSettings,
    node: NodeOptions,
    jobs: usize,
    gpu: bool,
    exe: PathBuf,
    work_dir: PathBuf,
    /// Names the run's jobs (`ksearch-TAG-r7`).
    tag: String,
    in_flight: BTreeMap<u64, InFlight>,
    /// Finished without a job (a request that could not be built).
    ready: Vec<Finished>,
    /// Set by Ctrl-C: an evaluation waited for through [`Evaluator`] is abandoned.
    cancel: Option<Arc<AtomicBool>>,
}

impl SlurmExecutor {
    /// Jobs of up to `jobs` evaluations at once, their files in `work_dir` (which the nodes
    /// must see at the same path), named after `tag`. Checks that `sbatch` answers; cancels the
    /// jobs an earlier orchestrator of this directory left behind.
    pub fn new(
        settings: SlurmSettings,
        node: NodeOptions,
        jobs: usize,
        gpu: bool,
        work_dir: PathBuf,
        tag: &str,
    ) -> Result<Self, EvalError> {
        let unavailable = |reason: String| EvalError::BackendUnavailable {
            backend: "slurm".into(),
            reason,
        };
        run_tool("sbatch", &["--version".into()]).map_err(|(_, e)| {
            unavailable(format!("{e} (is Slurm installed, and its sbatch on PATH?)"))
        })?;
        std::fs::create_dir_all(&work_dir).map_err(|e| {
            unavailable(format!(
                "cannot create the jobs' directory {}: {e}",
                work_dir.display()
            ))
        })?;
        let exe = match &settings.ksearch {
            Some(p) => p.clone(),
            None => std::env::current_exe().map_err(|e| {
                unavailable(format!(
                    "cannot find the ksearch binary to run on the nodes: {e}"
                ))
            })?,
        };
        let tag: String = tag
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(40)
            .collect();
        let executor = Self {
            settings,
            node,
            jobs: jobs.max(1),
            gpu,
            exe,
            work_dir,
            tag,
            in_flight: BTreeMap::new(),
            ready: Vec::new(),
            cancel: None,
        };
        executor.cancel_left_behind();
        Ok(executor)
    }

    /// The file listing the jobs submitted from this directory and not yet seen to end.
    fn ledger(&self) -> PathBuf {
        self.work_dir.join("submitted-jobs")
    }

    /// Jobs an orchestrator killed without a chance to cancel them (SIGKILL) are cancelled by
    /// the next one: nothing would read what they write.
    fn cancel_left_behind(&self) {
        let ids: Vec<String> = std::fs::read_to_string(self.ledger())
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        if !ids.is_empty() {
            let _ = run_tool("scancel", &ids);
        }
        let _ = std::fs::remove_file(self.ledger());
    }

    fn note_submitted(&self, id: &str) {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.ledger())
        {
            let _ = writeln!(f, "{id}");
        }
    }

    fn rewrite_ledger(&self) {
        let ids: String = self
            .in_flight
            .values()
            .map(|j| format!("{}\n", j.job_id))
            .collect();
        let _ = std::fs::write(self.ledger(), ids);
    }

    fn free_slot(&self) -> Option<usize> {
        (0..self.jobs).find(|s| self.in_flight.values().all(|j| j.slot != *s))
    }

    /// `sbatch` the job in `job_file`; its id.
    fn sbatch(
        &self,
        name: &str,
        job_file: &Path,
        result_file: &Path,
        out_file: &Path,
        timeout_s: f64,
    ) -> Result<String, EvalError> {
        let s = &self.settings;
        let mut args: Vec<String> = vec![
            "--parsable".into(),
            "--export=ALL".into(),
            format!("--job-name={name}"),
            format!("--output={}", out_file.display()),
            format!("--chdir={}", self.work_dir.display()),
        ];
        if let Some(p) = &s.partition {
            args.push(format!("--partition={p}"));
        }
        if let Some(a) = &s.account {
            args.push(format!("--account={a}"));
        }
        let minutes = ((timeout_s + 300.0) / 60.0).ceil().clamp(1.0, 1e6) as u64;
        args.push(format!(
            "--time={}",
            s.time_limit.clone().unwrap_or_else(|| minutes.to_string())
        ));
        if let Some(c) = s.cpus_per_job {
            args.push(format!("--cpus-per-task={c}"));
        }
        if self.gpu {
            args.push(format!(
                "--gres={}",
                s.gres.clone().unwrap_or_else(|| "gpu:1".into())
            ));
        }
        args.extend(s.extra_args.iter().cloned());
        let command = format!(
            "exec {} eval-job {} {}",
            quoted(&self.exe.display().to_string()),
            quoted(&job_file.display().to_string()),
            quoted(&result_file.display().to_string())
        );
        args.push(format!("--wrap={command}"));
        let out = run_tool("sbatch", &args).map_err(|(_, output)| EvalError::WorkerStart {
            command: "sbatch".into(),
            output,
        })?;
        let id = out.trim().split(';').next().unwrap_or_default().to_owned();
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit()) {
            return Err(EvalError::WorkerStart {
                command: "sbatch".into(),
                output: format!("it answered `{}`, not a job id", out.trim()),
            });
        }
        self.note_submitted(&id);
        Ok(id)
    }

    /// Submit run `run` of the job whose files are in `j`.
    fn submit_run(&mut self, mut j: InFlight, run: u32) -> Result<(), EvalError> {
        let name = format!("ksearch-{}-r{}", self.tag, j.round);
        j.out_file = self.work_dir.join(format!("r{}-run{run}.out", j.round));
        let _ = std::fs::remove_file(&j.result_file);
        let timeout_s: f64 =
            serde_json::from_slice::<JobFile>(&std::fs::read(&j.job_file).unwrap_or_default())
                .map_or(crate::DEFAULT_TIMEOUT.as_secs_f64(), |f| f.timeout_s);
        j.job_id = self.sbatch(&name, &j.job_file, &j.result_file, &j.out_file, timeout_s)?;
        j.run = run;
        j.submitted_unix = now_unix();
        j.running_unix = None;
        j.ended = None;
        self.in_flight.insert(j.round, j);
        Ok(())
    }

    /// The queue's word on each job in flight: `Some(state, reason)`, or `None` for one it no
    /// longer knows. `Err` when the queue could not be asked at all.
    fn poll_queue(&self) -> Result<BTreeMap<String, (String, String)>, String> {
        let ids: Vec<&str> = self.in_flight.values().map(|j| j.job_id.as_str()).collect();
        if ids.is_empty() {
            return Ok(BTreeMap::new());
        }
        let args = vec![
            "-h".into(),
            "-t".into(),
            "all".into(),
            "-o".into(),
            "%i|%T|%R|%N".into(),
            "-j".into(),
            ids.join(","),
        ];
        match run_tool("squeue", &args) {
            Ok(out) => Ok(out
                .lines()
                .filter_map(|l| {
                    let mut parts = l.trim().splitn(4, '|');
                    let id = parts.next()?.to_owned();
                    let state = parts.next()?.to_owned();
                    let reason = parts.next().unwrap_or_default().to_owned();
                    let node = parts.next().unwrap_or_default().to_owned();
                    Some((
                        id,
                        (
                            state,
                            if reason.is_empty() || reason == "None" {
                                node
                            } else {
                                reason
                            },
                        ),
                    ))
                })
                .collect()),
            // Every id is gone from the controller's memory.
            Err((true, e)) if e.contains("Invalid job id") => Ok(BTreeMap::new()),
            Err((_, e)) => Err(e),
        }
    }

    /// A job that left the queue without an outcome: run it again once, or record the
    /// candidate as crashed.
    fn lost(&mut self, round: u64, how: &str) -> Option<Finished> {
        let mut j = self.in_flight.remove(&round)?;
        let out = tail(&j.out_file);
        let said = if out.is_empty() {
            String::new()
        } else {
            format!("; its output: {out}")
        };
        let what = format!("the Slurm job {} {how} without a result{said}", j.job_id);
        j.retried.push(what.clone());
        if j.run < 2 {
            let slot = j.slot;
            match self.submit_run(j, 2) {
                Ok(()) => return None,
                Err(e) => {
                    return Some(Finished {
                        round,
                        slot,
                        place: "slurm".into(),
                        started_unix: now_unix(),
                        finished_unix: now_unix(),
                        retried: vec![what],
                        result: Err(e),
                    });
                }
            }
        }
        let message = format!(
            "lost: the evaluation's Slurm job ended twice without a result, and is not run again: {}",
            j.retried.join("; then ")
        );
        let evaluation = Evaluation {
            result: EvaluateResult {
                id: j.request.id,
                status: Status::Crashed,
                message,
                compile: None,
                workloads: Vec::new(),
                phases: Phases::default(),
                output: CapturedOutput::default(),
                sandbox: None,
                described: Vec::new(),
            },
            speedup: None,
            speedup_vs_parent: None,
            baseline: j.task_baseline.clone(),
            wall_s: (now_unix() - j.submitted_unix).max(0.0),
            load: None,
            caveats: Vec::new(),
        };
        Some(Finished {
            round,
            slot: j.slot,
            place: format!("slurm job {}", j.job_id),
            started_unix: j.running_unix.unwrap_or(j.submitted_unix),
            finished_unix: now_unix(),
            retried: j.retried,
            result: Ok(evaluation),
        })
    }

    /// The outcome `j` wrote, read back and held against its request.
    fn outcome(j: InFlight, outcome: JobOutcome) -> Finished {
        let place = format!("slurm job {} on {}", j.job_id, outcome.host);
        let (started, finished) = (outcome.started_unix, outcome.finished_unix);
        let result = outcome.into_result().map(|mut e| {
            if let Err(_why) = crate::validate::check(&j.request, &e.result) {
                e.result = crate::validate::validated(&j.request, e.result);
                e.speedup = speedup_over(&e.result, Role::Baseline);
                e.speedup_vs_parent = speedup_over(&e.result, Role::Parent);
            }
            e
        });
        Finished {
            round: j.round,
            slot: j.slot,
            place,
            started_unix: started,
            finished_unix: finished,
            retried: j.retried,
            result,
        }
    }

    /// One look at every job in flight: the first that finished, if any.
    fn poll(&mut self) -> Option<Finished> {
        let rounds: Vec<u64> = self.in_flight.keys().copied().collect();
        // An outcome file first: it is written whole, and last.
        for round in &rounds {
            let j = &self.in_flight[round];
            if let Ok(bytes) = std::fs::read(&j.result_file) {
                let j = self.in_flight.remove(round).expect("in flight");
                self.rewrite_ledger();
                return Some(match serde_json::from_slice::<JobOutcome>(&bytes) {
                    Ok(o) => Self::outcome(j, o),
                    Err(e) => Finished {
                        round: *round,
                        slot: j.slot,
                        place: format!("slurm job {}", j.job_id),
                        started_unix: j.running_unix.unwrap_or(j.submitted_unix),
                        finished_unix: now_unix(),
                        retried: j.retried,
                        result: Err(EvalError::Worker {
                            message: format!(
                                "the Slurm job {} wrote an unreadable result ({}): {e}",
                                j.job_id,
                                j.result_file.display()
                            ),
                        }),
                    },
                });
            }
        }
        let Ok(queue) = self.poll_queue() else {
            // The controller did not answer: nothing is concluded from it.
            return None;
        };
        let now = now_unix();
        let mut lost = Vec::new();
        for j in self.in_flight.values_mut() {
            match queue.get(&j.job_id) {
                Some((state, _)) if state == "RUNNING" => {
                    j.running_unix.get_or_insert(now);
                }
                Some((state, reason)) if ended(state) => {
                    let how = if reason.is_empty() {
                        format!("ended {state}")
                    } else {
                        format!("ended {state} ({reason})")
                    };
                    let since = j.ended.get_or_insert_with(|| (Instant::now(), how)).0;
                    // A job that completed may still be writing its outcome through a shared
                    // file system; one that was killed will not.
                    let grace = if state == "COMPLETED" { 10 } else { 1 };
                    if since.elapsed() >= Duration::from_secs(grace) {
                        lost.push((j.round, j.ended.as_ref().expect("set").1.clone()));
                    }
                }
                Some(_) => {}
                None => {
                    let since = j
                        .ended
                        .get_or_insert_with(|| (Instant::now(), "left the queue".into()))
                        .0;
                    if since.elapsed() >= Duration::from_secs(10) {
                        lost.push((j.round, "is gone from the queue".into()));
                    }
                }
            }
        }
        for (round, how) in lost {
            if let Some(f) = self.lost(round, &how) {
                self.rewrite_ledger();
                return Some(f);
            }
        }
        None
    }
}

impl SlurmExecutor {
    /// Abandon an evaluation waited for through [`Evaluator`] (a run's seed) once `flag` is
    /// set, e.g. by Ctrl-C.
    pub fn set_cancel(&mut self, flag: Arc<AtomicBool>) {
        self.cancel = Some(flag);
    }
}

impl Evaluator for SlurmExecutor {
    fn evaluate(
        &mut self,
        task: &Task,
        candidate: &ksearch_core::task::Source,
        contenders: crate::Contenders<'_>,
        options: &crate::EvalOptions,
    ) -> Result<Evaluation, EvalError> {
        let cancel = self.cancel.clone();
        super::evaluate_one(
            self,
            cancel.as_deref(),
            task,
            candidate,
            contenders,
            options,
        )
    }

    fn executor(&mut self) -> Option<&mut dyn Executor> {
        Some(self)
    }
}

impl Executor for SlurmExecutor {
    fn slots(&self) -> usize {
        self.jobs
    }

    fn describe(&self) -> String {
        format!(
            "up to {} Slurm jobs at once (ksearch on the nodes: {}; jobs' files in {})",
            self.jobs,
            self.exe.display(),
            self.work_dir.display()
        )
    }

    fn in_flight(&self) -> usize {
        self.in_flight.len() + self.ready.len()
    }

    fn submit(&mut self, job: Job) -> Result<(), EvalError> {
        let slot = self
            .free_slot()
            .ok_or_else(|| EvalError::Options("every Slurm slot is busy".into()))?;
        let request = match build_request(
            job.round + 1,
            &job.task,
            &job.candidate,
            job.contenders(),
            &job.options,
        ) {
            Ok(r) => r,
            Err(e) => {
                self.ready.push(Finished {
                    round: job.round,
                    slot,
                    place: "slurm (not submitted)".into(),
                    started_unix: now_unix(),
                    finished_unix: now_unix(),
                    retried: Vec::new(),
                    result: Err(e),
                });
                return Ok(());
            }
        };
        let job_file = self.work_dir.join(format!("r{}.job.json", job.round));
        let file = JobFile {
            format: JOB_FORMAT,
            task: Task::clone(&job.task),
            request: request.clone(),
            timeout_s: job.options.timeout.as_secs_f64(),
            python: self.node.python.clone(),
            target: self.node.target.clone(),
            hardware: self.node.hardware.clone(),
        };
        write_json(&job_file, &file).map_err(|e| EvalError::WorkerSpawn {
            command: format!("writing {}", job_file.display()),
            source: e,
        })?;
        let j = InFlight {
            slot,
            round: job.round,
            job_id: String::new(),
            run: 0,
            request,
            task_baseline: job.task.baseline_name(),
            result_file: self.work_dir.join(format!("r{}.result.json", job.round)),
            job_file,
            out_file: PathBuf::new(),
            submitted_unix: now_unix(),
            running_unix: None,
            ended: None,
            retried: Vec::new(),
        };
        self.submit_run(j, 1)
    }

    fn next(&mut self, stop: &AtomicBool) -> Option<Finished> {
        loop {
            if let Some(f) = self.ready.pop() {
                return Some(f);
            }
            if self.in_flight.is_empty() || stop.load(Ordering::Relaxed) {
                return None;
            }
            if let Some(f) = self.poll() {
                return Some(f);
            }
            let wake = Instant::now() + self.settings.poll_interval.max(Duration::from_millis(50));
            while Instant::now() < wake && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    fn cancel_all(&mut self) {
        let ids: Vec<String> = self.in_flight.values().map(|j| j.job_id.clone()).collect();
        if !ids.is_empty() {
            let _ = run_tool("scancel", &ids);
        }
        self.in_flight.clear();
        self.ready.clear();
        self.rewrite_ledger();
    }
}

impl Drop for SlurmExecutor {
    fn drop(&mut self) {
        self.cancel_all();
    }
}
