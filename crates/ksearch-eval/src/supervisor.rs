//! The supervisor runs evaluations on a worker process and turns everything that can happen to
//! that process — a reply, a hang, a crash, garbage — into an [`EvaluateResult`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ksearch_core::protocol::{
    EvaluateRequest, EvaluateResult, Phase, Phases, Request, Status, WorkerMessage,
};

use crate::error::EvalError;
use crate::worker_process::{Incoming, WorkerCommand, WorkerProcess, describe_exit};

/// Told each phase of an evaluation as the worker starts it (and the workload, where it has
/// one): to show a long evaluation's progress.
pub type PhaseObserver = Box<dyn FnMut(Phase, Option<&str>) + Send>;

/// Runs evaluations on one worker at a time, restarting it whenever it is lost.
pub struct Supervisor {
    command: WorkerCommand,
    worker: Option<WorkerProcess>,
    /// Between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// When set, a running evaluation is abandoned and its worker stopped.
    cancel: Option<Arc<AtomicBool>>,
    phases: Option<PhaseObserver>,
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor")
            .field("command", &self.command)
            .field("grace", &self.grace)
            .finish_non_exhaustive()
    }
}

impl Supervisor {
    pub fn new(command: WorkerCommand) -> Self {
        Self {
            command,
            worker: None,
            grace: Duration::from_secs(1),
            cancel: None,
            phases: None,
        }
    }

    /// Tell `observer` each phase the worker starts.
    pub fn set_phase_observer(&mut self, observer: PhaseObserver) {
        self.phases = Some(observer);
    }

    /// Abandon evaluations (with [`EvalError::Cancelled`]) once `flag` is set, e.g. by Ctrl-C.
    pub fn set_cancel(&mut self, flag: Arc<AtomicBool>) {
        self.cancel = Some(flag);
    }

    fn cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Relaxed))
    }

    fn ensure_worker(&mut self) -> Result<&mut WorkerProcess, EvalError> {
        if self.worker.is_none() {
            self.worker = Some(WorkerProcess::spawn(&self.command)?);
        }
        Ok(self.worker.as_mut().expect("just started"))
    }

    /// Stop the worker; the next evaluation starts a fresh one.
    pub fn retire(&mut self) {
        if let Some(w) = self.worker.take() {
            w.shutdown();
        }
    }

    /// Evaluate on the worker within `limit` of wall-clock time.
    pub fn evaluate(
        &mut self,
        request: &EvaluateRequest,
        limit: Duration,
    ) -> Result<EvaluateResult, EvalError> {
        let id = request.id;
        let message = Request::Evaluate(Box::new(request.clone()));
        let worker = self.ensure_worker()?;
        worker.capture.take();
        if worker.send(&message).is_err() {
            // The worker died since its last evaluation; one fresh start.
            self.retire();
            let worker = self.ensure_worker()?;
            if let Err(e) = worker.send(&message) {
                return Err(EvalError::Worker {
                    message: format!("could not send the request: {e}"),
                });
            }
        }
        let deadline = Instant::now() + limit;
        let mut place: Option<(Phase, Option<String>)> = None;
        loop {
            if self.cancelled() {
                self.retire();
                return Err(EvalError::Cancelled);
            }
            // Wake up now and then to notice a cancellation.
            let wake = deadline.min(Instant::now() + Duration::from_millis(100));
            let worker = self
                .worker
                .as_mut()
                .expect("worker present during evaluation");
            match worker.recv(wake) {
                Incoming::TimedOut if Instant::now() < deadline => {}
                Incoming::Message(WorkerMessage::Progress {
                    id: pid,
                    phase,
                    workload,
                }) if pid == id => {
                    if let Some(observe) = self.phases.as_mut() {
                        observe(phase, workload.as_deref());
                    }
                    place = Some((phase, workload));
                }
                Incoming::Message(WorkerMessage::Result(mut result)) if result.id == id => {
                    worker.capture.wait_end(id, Duration::from_millis(200));
                    result.output = worker.capture.take();
                    return Ok(crate::validate::validated(request, *result));
                }
                Incoming::Message(WorkerMessage::Error {
                    message,
                    task_fault,
                    ..
                }) => {
                    self.retire();
                    return Err(if task_fault {
                        EvalError::Task { message }
                    } else {
                        EvalError::Worker { message }
                    });
                }
                Incoming::Message(_) => {}
                Incoming::Garbage(line) => {
                    // Only the trusted worker holds this channel: anything but a protocol
                    // message means it is broken, and nothing it says is believed.
                    let msg = format!(
                        "the worker wrote a line that is not a protocol message ({line:?}){}; its evaluation is void",
                        where_(&place)
                    );
                    return Ok(self.lost_worker(id, Status::Rejected, msg));
                }
                Incoming::Closed => {
                    let status = worker.wait_exit(Duration::from_secs(2));
                    let (signalled, how) = describe_exit(status);
                    let (status, hint) = if signalled {
                        (Status::Crashed, "")
                    } else {
                        (Status::RuntimeError, " (did candidate code call exit()?)")
                    };
                    let msg = format!("the worker {how}{}{hint}", where_(&place));
                    return Ok(self.lost_worker(id, status, msg));
                }
                Incoming::TimedOut => {
                    let msg = format!(
                        "the evaluation did not finish within its limit of {:.1} s{}; the worker was killed",
                        limit.as_secs_f64(),
                        where_(&place)
                    );
                    return Ok(self.lost_worker(id, Status::Timeout, msg));
                }
            }
        }
    }

    /// Stop a worker that failed mid-evaluation and report what it printed.
    fn lost_worker(&mut self, id: u64, status: Status, message: String) -> EvaluateResult {
        let mut worker = self.worker.take().expect("worker present");
        worker.stop(self.grace);
        worker.finish_output();
        let output = worker.capture.take();
        EvaluateResult {
            id,
            status,
            message,
            compile: None,
            workloads: Vec::new(),
            phases: Phases::default(),
            output,
            sandbox: None,
            described: Vec::new(),
        }
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.retire();
    }
}

fn where_(place: &Option<(Phase, Option<String>)>) -> String {
    match place {
        Some((phase, Some(w))) => format!(" during the {phase} phase on workload `{w}`"),
        Some((phase, None)) => format!(" during the {phase} phase"),
        None => " before it reported any progress".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::test_request;

    /// A worker that says hello, reads one request, then writes `reply` on its message channel.
    fn fake_worker(reply: &str) -> Supervisor {
        let script = format!(
            "echo '{{\"protocol\":2,\"type\":\"hello\",\"backend\":\"fake\",\"version\":\"0\",\"pid\":1}}' >&4; read line <&3; echo '{reply}' >&4; sleep 5"
        );
        Supervisor::new(WorkerCommand {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script],
            env: Vec::new(),
            startup_timeout: Duration::from_secs(10),
            current_dir: None,
        })
    }

    #[test]
    fn a_line_that_is_not_a_protocol_message_voids_the_evaluation() {
        let mut s = fake_worker("{\"protocol\":2,\"type\":\"result\" and then garbage");
        let r = s
            .evaluate(&test_request(7), Duration::from_secs(20))
            .unwrap();
        assert_eq!(r.status, Status::Rejected, "{}", r.message);
        assert!(
            r.message.contains("not a protocol message"),
            "{}",
            r.message
        );
    }

    #[test]
    fn a_result_that_does_not_answer_the_request_is_refused() {
        // A well-formed `passed` result, but for another request and with an infinite speedup's
        // zero time: neither may be believed.
        let forged = r#"{"protocol":2,"type":"result","id":7,"status":"passed","message":"FORGED","workloads":[{"name":"small","status":"passed","errors":{"max_abs_err":0,"max_rel_err":0,"norm_rel_err":0,"seeds_checked":4},"timings":[{"role":"candidate","label":"c.c","stats":{"median_ms":0,"p10_ms":0,"p90_ms":0,"runs":5,"calls_per_sample":1,"samples_ms":[0,0,0,0,0]}},{"role":"baseline","label":"reference","stats":{"median_ms":1,"p10_ms":1,"p90_ms":1,"runs":5,"calls_per_sample":1,"samples_ms":[1,1,1,1,1]}}]}],"phases":{"compile_s":0,"check_s":0,"timing_s":0},"output":{"bytes":0,"head":"","tail":""}}"#;
        let mut s = fake_worker(forged);
        let r = s
            .evaluate(&test_request(7), Duration::from_secs(20))
            .unwrap();
        assert_eq!(r.status, Status::Rejected, "{}", r.message);
        assert!(r.message.contains("positive"), "{}", r.message);
        assert!(r.workloads.is_empty());
    }

    #[test]
    fn the_directory_of_a_killed_orchestrator_is_swept() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let stale = std::env::temp_dir().join(format!("ksearch-worker-{dead}-test"));
        fs_err::create_dir_all(stale.join("builds")).unwrap();
        let mine = std::env::temp_dir().join(format!("ksearch-worker-{}-live", std::process::id()));
        fs_err::create_dir_all(&mine).unwrap();
        let mut s = fake_worker("{}");
        let _ = s.evaluate(&test_request(1), Duration::from_secs(20));
        assert!(!stale.exists(), "{} was left", stale.display());
        assert!(mine.exists(), "a live orchestrator's directory was removed");
        fs_err::remove_dir_all(mine).unwrap();
    }
}
