//! The judge's side of a runner: starting it in a sandbox, giving it pools, calling it, timing
//! it. Everything a runner sends is treated as hostile: only the doorbell's `done` and plain
//! "ready"/"done" replies are read, and a runner that misbehaves is reported, not believed.

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::futex;
use super::link::{
    BATCH_OFFSET, CONTROL_BYTES, Control, FromRunner, Layout, MAX_BATCH, RUNNER_SOCKET_FD,
    SEQ_MASK, ToRunner, now_ns, recv, recv_stamped, send, socket_pair, stamp_messages,
};
use super::runner::RUNNER_CONTROL_FD;
use crate::sandbox::{Confinement, Limits, Sandbox, SandboxSpec, Sandboxed};
use crate::shm::Shared;
use crate::worker_process::signal_name;

/// How to start runners.
#[derive(Debug, Clone)]
pub(crate) struct RunnerSetup {
    pub(crate) sandbox: Sandbox,
    /// The binary that hosts the runner (`ksearch runner c`).
    pub(crate) exe: PathBuf,
    pub(crate) root_dir: PathBuf,
    pub(crate) limits: Limits,
    /// CPU runners are pinned to, and the judge's own (it spins on another one).
    pub(crate) cpu: Option<usize>,
    pub(crate) judge_cpu: Option<usize>,
}

/// Why a runner stopped answering.
#[derive(Debug, Clone)]
pub(crate) struct Lost {
    pub(crate) message: String,
    /// Killed by a signal (a crash) rather than exiting or breaking the protocol.
    pub(crate) signalled: bool,
    /// It ended on its own, with a status (not killed, not stopped by the judge).
    pub(crate) exited: bool,
    /// The address of the invalid access that killed it, when its fault handler recorded one.
    pub(crate) fault: Option<u64>,
    /// It was stopped for taking longer than its call limit (`Runner::limit_calls`).
    pub(crate) timed_out: bool,
}

/// A runner's mapping of one pool, as the judge sees it.
#[derive(Debug)]
pub(crate) struct RunnerPool {
    /// This runner's outputs, which the judge reads.
    pub(crate) outputs: Shared,
    /// Where the runner mapped the inputs (to place a fault address).
    pub(crate) runner_inputs: u64,
}

/// One running contender.
#[derive(Debug)]
pub(crate) struct Runner {
    process: Sandboxed,
    sock: OwnedFd,
    control: Shared,
    pub(crate) pools: HashMap<u32, RunnerPool>,
    seq: u32,
    spin: bool,
    /// The CPU it is pinned to and the judge's, when the judge pinned them apart.
    pub(crate) cpus: Option<(usize, usize)>,
    lost: Option<Lost>,
    /// What the kernel said it runs, when it was asked to describe itself.
    pub(crate) description: Option<String>,
    /// The CPU clocks of the processes its last timed batch was asked to watch (`timed`), read
    /// as that batch started.
    pub(crate) watched_at_go: Vec<Option<f64>>,
    /// Its CPU clock when it last answered (`mark_answer`).
    cpu_mark: Option<f64>,
    /// The longest one call of its kernel may take (`limit_calls`); none until set.
    call_limit: Option<Duration>,
}

/// One timed batch as the judge measured it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Batch {
    /// From the judge's `go` to the runner's "done".
    pub(crate) wall: Duration,
    /// CPU the runner's process used from its previous answer until it was armed: work done
    /// before the clock started, counted into the batch.
    pub(crate) before: Duration,
}

impl Batch {
    /// What the batch costs: its wall time and the CPU its runner spent before the clock.
    pub(crate) fn charged(&self) -> Duration {
        self.wall + self.before
    }
}

/// How long a runner may take to arm for a timed batch (an honest one takes microseconds; the
/// CPU it uses meanwhile is counted into the batch either way).
pub(crate) const ARM_LIMIT: Duration = Duration::from_secs(2);

impl Runner {
    /// Start a runner for the kernel at `kernel` (a shared object in `kernel_dir`); `describe`
    /// asks a task's own implementation what it runs.
    pub(crate) fn start(
        setup: &RunnerSetup,
        kernel: &Path,
        env: &[(String, String)],
        describe: bool,
    ) -> Result<Runner, String> {
        let (ours, theirs) = socket_pair().map_err(|e| format!("socketpair: {e}"))?;
        stamp_messages(ours.as_fd()).map_err(|e| format!("socket timestamps: {e}"))?;
        let control = Shared::create("ksearch-control", CONTROL_BYTES)
            .map_err(|e| format!("control page: {e}"))?;
        let control_fd = control.fd().map_err(|e| format!("control page: {e}"))?;
        let mut read_only = vec![setup.exe.clone()];
        if let Some(dir) = kernel.parent() {
            read_only.push(dir.to_owned());
        }
        let mut full_env: Vec<(String, String)> = vec![
            ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
            ("HOME".into(), "/tmp".into()),
            ("TMPDIR".into(), "/tmp".into()),
            ("LC_ALL".into(), "C".into()),
        ];
        // Shared libraries the user points the loader at (a baseline's `-l`) load in the runner.
        let libs = super::kernel::search_dirs("LD_LIBRARY_PATH");
        if !libs.is_empty() {
            full_env.push(("LD_LIBRARY_PATH".into(), super::kernel::join_dirs(&libs)));
            read_only.extend(libs);
        }
        full_env.extend(env.iter().cloned());
        let spec = SandboxSpec {
            program: setup.exe.clone(),
            args: vec![
                "runner".into(),
                ksearch_core::task::BackendKind::C.name().into(),
            ],
            env: full_env,
            cwd: PathBuf::from("/tmp"),
            root_dir: setup.root_dir.clone(),
            read_only,
            writable: Vec::new(),
            tmp_bytes: 64 << 20,
            gpu: false,
            allow_fork: false,
            cpu: setup.cpu,
            cpus: Vec::new(),
            limits: setup.limits,
            keep_fds: Vec::new(),
            report_fd: 0,
            no_namespaces: crate::sandbox::no_namespaces_asked(),
        };
        let process = setup
            .sandbox
            .spawn(
                spec,
                vec![(theirs, RUNNER_SOCKET_FD), (control_fd, RUNNER_CONTROL_FD)],
                Stdio::inherit(),
                Stdio::inherit(),
            )
            .map_err(|e| e.to_string())?;
        let mut runner = Runner {
            process,
            sock: ours,
            control,
            pools: HashMap::new(),
            seq: 0,
            spin: setup.cpu.is_some() && setup.judge_cpu.is_some() && setup.cpu != setup.judge_cpu,
            cpus: match (setup.cpu, setup.judge_cpu) {
                (Some(r), Some(j)) if r != j => Some((r, j)),
                _ => None,
            },
            lost: None,
            description: None,
            watched_at_go: Vec::new(),
            cpu_mark: None,
            call_limit: None,
        };
        match runner.request(
            &ToRunner::Load {
                path: kernel.to_owned(),
                describe,
            },
            &[],
        ) {
            Ok(FromRunner::Loaded { description }) => {
                runner.description = description
                    .filter(|_| describe)
                    .map(|d| ksearch_core::protocol::Described::clean(&d));
                Ok(runner)
            }
            Ok(FromRunner::Failed { message }) => Err(message),
            Ok(other) => Err(format!("unexpected answer {other:?}")),
            Err(lost) => Err(lost.message),
        }
    }

    pub(crate) fn confinement(&self) -> &Confinement {
        &self.process.confinement
    }

    fn control(&self) -> &Control {
        // SAFETY: the page is CONTROL_BYTES long and holds a Control; it lives as long as self.
        unsafe { &*self.control.ptr().cast::<Control>() }
    }

    /// CPU time the runner has used.
    pub(crate) fn cpu_time(&self) -> Option<crate::sandbox::CpuTime> {
        self.process.cpu_time()
    }

    /// The runner's process, as the judge sees it.
    pub(crate) fn pid(&self) -> i32 {
        self.process.pid()
    }

    /// A runner answers once per request, so nothing waits on its socket when the judge turns
    /// to it again. Something that does was sent out of turn: a "done" written on the socket by
    /// candidate code early in a batch (which stops the judge's clock at once), whose real one
    /// then arrives later, a step behind every request after it.
    fn silent_between_turns(&mut self) -> Result<(), Lost> {
        let mut byte = 0u8;
        // SAFETY: a one-byte peek into a local, without waiting.
        let n = unsafe {
            libc::recv(
                self.sock.as_raw_fd(),
                (&raw mut byte).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        if n > 0 {
            return Err(self.stop_for(
                "it sent a message nobody asked for: a \"done\" early in a batch, or a second one",
            ));
        }
        Ok(())
    }

    /// Stop a runner that broke the protocol, and say so (it did not crash: it was stopped).
    fn stop_for(&mut self, why: &str) -> Lost {
        self.process.kill();
        let lost = Lost {
            message: format!("broke the protocol ({why}) and was stopped"),
            signalled: false,
            exited: false,
            fault: None,
            timed_out: false,
        };
        self.lost = Some(lost.clone());
        lost
    }

    /// How the runner ended, once it stopped answering.
    fn lose(&mut self, why: &str) -> Lost {
        if let Some(l) = &self.lost {
            return l.clone();
        }
        let status = self.process.wait_timeout(Duration::from_millis(500));
        if status.is_none() {
            self.process.kill();
        }
        let control = self.control();
        let fault = (control.fault.load(Ordering::Acquire) == 1)
            .then(|| control.fault_addr.load(Ordering::Relaxed));
        let (message, signalled, exited) = match status {
            Some(s) if s.signal().is_some() => (
                format!("killed by {}", signal_name(s.signal().unwrap_or(0))),
                true,
                false,
            ),
            // The launcher mirrors a signal as 128 + its number when it could not re-raise it.
            Some(s) if s.code().is_some_and(|c| c > 128) => (
                format!("killed by {}", signal_name(s.code().unwrap_or(0) - 128)),
                true,
                false,
            ),
            Some(s) => (
                format!("exited with status {}", s.code().unwrap_or(-1)),
                false,
                true,
            ),
            None => (
                format!("stopped answering ({why}) and was killed"),
                false,
                false,
            ),
        };
        let lost = Lost {
            message,
            signalled,
            exited,
            fault,
            timed_out: false,
        };
        self.lost = Some(lost.clone());
        lost
    }

    /// Send a request and wait for its answer.
    pub(crate) fn request(
        &mut self,
        msg: &ToRunner,
        fds: &[std::os::fd::BorrowedFd<'_>],
    ) -> Result<FromRunner, Lost> {
        if let Some(l) = &self.lost {
            return Err(l.clone());
        }
        self.silent_between_turns()?;
        if send(self.sock.as_fd(), msg, fds).is_err() {
            return Err(self.lose("its socket closed"));
        }
        if let ToRunner::Call { sets, .. } = msg {
            self.await_answer(sets.len())?;
        }
        let answer = recv::<FromRunner>(self.sock.as_fd());
        self.mark_answer();
        match answer {
            Ok(Some((reply, _))) => Ok(reply),
            Ok(None) => Err(self.lose("its socket closed")),
            Err(e) => Err(self.stop_for(&format!("a malformed answer: {e}"))),
        }
    }

    /// Give the runner a pool: the shared inputs (read-only) and a fresh outputs region.
    pub(crate) fn map_pool(
        &mut self,
        id: u32,
        axes: &[i64],
        layout: &Layout,
        inputs_ro: &OwnedFd,
    ) -> Result<(), Lost> {
        let outputs = Shared::create("ksearch-outputs", layout.output_region())
            .map_err(|e| self.internal(&format!("outputs region: {e}")))?;
        let out_fd = outputs
            .fd()
            .map_err(|e| self.internal(&format!("outputs region: {e}")))?;
        let reply = self.request(
            &ToRunner::Pool {
                id,
                axes: axes.to_vec(),
                layout: layout.clone(),
            },
            &[inputs_ro.as_fd(), out_fd.as_fd()],
        )?;
        match reply {
            FromRunner::Mapped { inputs } => {
                self.pools.insert(
                    id,
                    RunnerPool {
                        outputs,
                        runner_inputs: inputs,
                    },
                );
                Ok(())
            }
            other => Err(self.protocol(&other)),
        }
    }

    pub(crate) fn drop_pool(&mut self, id: u32) {
        self.pools.remove(&id);
        let _ = self.request(&ToRunner::DropPool { id }, &[]);
    }

    fn internal(&mut self, message: &str) -> Lost {
        self.process.kill();
        self.lose(message)
    }

    fn protocol(&mut self, got: &FromRunner) -> Lost {
        self.stop_for(&format!("it answered {got:?} out of turn"))
    }

    /// Call the kernel once on each of `sets`, untimed.
    pub(crate) fn call(&mut self, pool: u32, sets: &[u32]) -> Result<(), Lost> {
        match self.request(
            &ToRunner::Call {
                pool,
                sets: sets.to_vec(),
            },
            &[],
        )? {
            FromRunner::Done => Ok(()),
            other => Err(self.protocol(&other)),
        }
    }

    /// A timed batch: the runner is armed, then the clock runs from the doorbell's `go` to the
    /// kernel's timestamp of the runner's "done" message, so neither the judge's own scheduling
    /// nor the time it takes to read the answer counts.
    ///
    /// Nothing a runner does before `go` is free: the CPU its process used since it last answered
    /// (asleep between batches, reading the order, arming) is read once it is armed and given
    /// back as [`Batch::before`], which the timing adds to the batch. The sets of the batch reach the
    /// control page only once the clock runs, so that no code in the runner knows them earlier;
    /// and a runner that does not arm within [`ARM_LIMIT`] is stopped.
    ///
    /// The CPU clocks of the processes `watch` names are read as the batch starts, while this
    /// runner spins on its CPU (theirs, when it is shared, so none of them is running then and
    /// each clock has counted all it ran): `watched_at_go`.
    pub(crate) fn timed(&mut self, pool: u32, sets: &[u32], watch: &[i32]) -> Result<Batch, Lost> {
        if let Some(l) = &self.lost {
            return Err(l.clone());
        }
        assert!(sets.len() <= MAX_BATCH, "a batch of {} calls", sets.len());
        self.silent_between_turns()?;
        self.seq = (self.seq + 1) & SEQ_MASK;
        let seq = self.seq;
        let msg = ToRunner::Arm {
            pool,
            count: sets.len() as u32,
            seq,
            spin: self.spin,
        };
        if send(self.sock.as_fd(), &msg, &[]).is_err() {
            return Err(self.lose("its socket closed"));
        }
        // Start the clock only while the runner spins: if it fell asleep, ring the bell so that
        // it spins again (each ring costs it one short spin).
        let arming = Instant::now();
        let mut armed = self.await_armed(|v| v & SEQ_MASK == seq, Some(ARM_LIMIT))?;
        while armed != seq && self.spin && arming.elapsed() < ARM_LIMIT {
            let control = self.control();
            control.bell.fetch_add(1, Ordering::AcqRel);
            futex::wake(&control.bell);
            armed = self.await_armed(|v| v == seq, Some(Duration::from_millis(5)))?;
        }
        if armed & SEQ_MASK != seq {
            return Err(self.stop_for(&format!(
                "it was not ready for a timed batch {:.1} s after being told of it",
                ARM_LIMIT.as_secs_f64()
            )));
        }
        // Read as soon as it is armed: its spin until "go" (the judge's own latency) is not its
        // work, and is left out; what it did before arming is counted.
        let before = self.cpu_since_answer();
        self.watched_at_go = watch
            .iter()
            .map(|&pid| super::verify::process_cpu_seconds(pid))
            .collect();
        let control = self.control();
        let start = now_ns();
        let started = Instant::now();
        // SAFETY: the control region holds MAX_BATCH u32s at BATCH_OFFSET; the runner reads
        // them only after `go`.
        unsafe {
            std::ptr::copy_nonoverlapping(
                sets.as_ptr(),
                self.control.ptr().add(BATCH_OFFSET).cast::<u32>(),
                sets.len(),
            );
        }
        control.go.store(seq, Ordering::Release);
        control.bell.fetch_add(1, Ordering::AcqRel);
        futex::wake(&control.bell);
        self.await_answer(sets.len())?;
        let answer = recv_stamped::<FromRunner>(self.sock.as_fd());
        self.mark_answer();
        match answer {
            Ok(Some((FromRunner::Done, _, stamp))) => {
                let ns = stamp.map_or(-1, |s| s - start);
                // A stamp from before the start (a clock step) falls back to this clock.
                let wall = if ns > 0 {
                    Duration::from_nanos(ns as u64)
                } else {
                    started.elapsed()
                };
                Ok(Batch { wall, before })
            }
            Ok(Some((other, _, _))) => Err(self.protocol(&other)),
            Ok(None) => Err(self.lose("its socket closed")),
            Err(e) => Err(self.stop_for(&format!("a malformed answer: {e}"))),
        }
    }

    /// Calls of this runner's kernel may take at most `limit` each (the largest limit asked
    /// for, over the workloads): one that takes longer (a hanging candidate) stops the runner as
    /// `timed_out`, in seconds rather than at the end of the evaluation's own limit.
    pub(crate) fn limit_calls(&mut self, limit: Duration) {
        self.call_limit = Some(self.call_limit.map_or(limit, |l| l.max(limit)));
    }

    /// Wait for the answer to `calls` calls within the call limit, if one is set.
    fn await_answer(&mut self, calls: usize) -> Result<(), Lost> {
        let Some(limit) = self.call_limit else {
            return Ok(());
        };
        let within = limit.saturating_mul(u32::try_from(calls.max(1)).unwrap_or(u32::MAX));
        let mut fd = libc::pollfd {
            fd: self.sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX);
            // SAFETY: one pollfd on a socket this runner owns.
            let n = unsafe { libc::poll(&raw mut fd, 1, ms) };
            if n > 0 {
                return Ok(());
            }
            if n == 0 && left.is_zero() {
                break;
            }
        }
        self.process.kill();
        let lost = Lost {
            message: format!(
                "did not finish {calls} call(s) within {:.1} s ({:.1} s a call, derived from the reference's time) and was stopped",
                within.as_secs_f64(),
                limit.as_secs_f64()
            ),
            signalled: false,
            exited: false,
            fault: None,
            timed_out: true,
        };
        self.lost = Some(lost.clone());
        Err(lost)
    }

    /// The runner's CPU clock now, as the mark its next batch's [`Batch::before`] counts from.
    pub(crate) fn mark_answer(&mut self) {
        self.cpu_mark = super::verify::process_cpu_seconds(self.pid());
    }

    /// CPU the runner used since [`Runner::mark_answer`] (zero where its clock cannot be read).
    fn cpu_since_answer(&self) -> Duration {
        match (
            self.cpu_mark,
            super::verify::process_cpu_seconds(self.pid()),
        ) {
            (Some(a), Some(b)) if b > a => Duration::from_secs_f64(b - a),
            _ => Duration::ZERO,
        }
    }

    /// Wait until `armed` satisfies `ok` (or, with `limit`, until that much time has passed):
    /// spin briefly when the runner has a CPU of its own, then sleep on the futex, checking the
    /// runner is alive. Returns the last value read.
    fn await_armed(
        &mut self,
        ok: impl Fn(u32) -> bool,
        limit: Option<Duration>,
    ) -> Result<u32, Lost> {
        let start = Instant::now();
        let spin_until = start
            + if self.spin {
                Duration::from_micros(200)
            } else {
                Duration::ZERO
            };
        let mut n = 0u32;
        loop {
            let w = &self.control().armed;
            let v = w.load(Ordering::Acquire);
            if ok(v) {
                return Ok(v);
            }
            n = n.wrapping_add(1);
            if limit.is_some_and(|l| start.elapsed() >= l) {
                return Ok(v);
            }
            if !n.is_multiple_of(64) || Instant::now() < spin_until {
                std::hint::spin_loop();
                continue;
            }
            futex::wait(w, v, Some(Duration::from_millis(limit.map_or(10, |_| 1))));
            if self.process.try_wait().is_some() {
                return Err(self.lose("it died"));
            }
        }
    }

    /// Stop the runner and everything it started.
    pub(crate) fn stop(mut self) {
        self.process.kill();
    }
}
