//! The `c` runner: `ksearch runner c`, started in a sandbox by the judge, once per contender and
//! evaluation. It loads one kernel, maps the tensors the judge shares with it (inputs
//! read-only), and calls the kernel when told. It never sees a reference, an expected output or
//! a clock the judge uses, and it reports nothing but "done".

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicPtr, Ordering};

use super::kernel::Kernel;
use super::link::{
    BATCH_OFFSET, CONTROL_BYTES, Control, FromRunner, Layout, MAX_BATCH, RUNNER_SOCKET_FD,
    SLEEPING, ToRunner, recv, send,
};
use crate::shm::Shared;

/// Where the control page is passed.
pub(crate) const RUNNER_CONTROL_FD: i32 = 4;

/// How long to spin on the doorbell before sleeping on it: a judge that is awake rings within
/// a microsecond of seeing the runner armed; one that is not will ask the runner to spin again
/// when it is. Spinning longer would be CPU used outside the timed calls.
const SPIN_LIMIT: std::time::Duration = std::time::Duration::from_micros(20);

struct Pool {
    /// Keeps the mappings alive while `pointers` points into them.
    inputs: Shared,
    _outputs: Shared,
    axes: Vec<i64>,
    /// For each set: every input, then every output.
    pointers: Vec<Vec<*mut std::ffi::c_void>>,
}

static CONTROL: AtomicPtr<Control> = AtomicPtr::new(std::ptr::null_mut());

/// Record a faulting address for the judge, then let the fault kill the process: the handler
/// is reset on entry, so the faulting instruction runs again and takes the default action.
extern "C" fn on_fault(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    let control = CONTROL.load(Ordering::Relaxed);
    if !control.is_null() {
        // SAFETY: the kernel hands a valid siginfo; the control page stays mapped.
        unsafe {
            (*control)
                .fault_addr
                .store((*info).si_addr() as u64, Ordering::Relaxed);
            (*control).fault.store(1, Ordering::Release);
        }
    }
}

fn install_fault_handler() {
    for sig in [libc::SIGSEGV, libc::SIGBUS] {
        // SAFETY: installing a handler that only stores to atomics.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_fault as *const () as usize;
            act.sa_flags = libc::SA_SIGINFO | libc::SA_RESETHAND;
            libc::sigaction(sig, &raw const act, std::ptr::null_mut());
        }
    }
}

/// Get ready for batch `seq` and wait for the judge's `go`: announce `armed` and spin (when the
/// judge has a CPU of its own), so that the judge can start its clock knowing the runner reacts
/// at once; after `SPIN_LIMIT`, announce sleeping and sleep until the judge rings `bell`: with
/// `go` (start) or without (spin again).
fn await_go(control: &Control, seq: u32, spin: bool) {
    loop {
        let bell = control.bell.load(Ordering::Acquire);
        if spin {
            control.armed.store(seq, Ordering::Release);
            super::futex::wake(&control.armed);
            let until = std::time::Instant::now() + SPIN_LIMIT;
            let mut spins = 0u32;
            loop {
                if control.go.load(Ordering::Acquire) == seq {
                    return;
                }
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(64) && std::time::Instant::now() >= until {
                    break;
                }
                std::hint::spin_loop();
            }
        }
        control.armed.store(seq | SLEEPING, Ordering::Release);
        super::futex::wake(&control.armed);
        loop {
            if control.go.load(Ordering::Acquire) == seq {
                return;
            }
            if control.bell.load(Ordering::Acquire) != bell {
                break;
            }
            super::futex::wait(&control.bell, bell, None);
        }
    }
}

/// Run until the judge closes the socket.
pub fn run() -> i32 {
    // SAFETY: the judge passed these descriptors at these numbers.
    let sock = unsafe { OwnedFd::from_raw_fd(RUNNER_SOCKET_FD) };
    let control_file = unsafe { File::from_raw_fd(RUNNER_CONTROL_FD) };
    let control_map = match Shared::map(control_file, CONTROL_BYTES, true) {
        Ok(m) => m,
        Err(e) => {
            let _ = send(
                sock.as_fd(),
                &FromRunner::Failed {
                    message: format!("mapping the control page: {e}"),
                },
                &[],
            );
            return 1;
        }
    };
    // SAFETY: the page is CONTROL_BYTES long, page-aligned, and holds a Control.
    let control: &Control = unsafe { &*control_map.ptr().cast::<Control>() };
    CONTROL.store(std::ptr::from_ref(control).cast_mut(), Ordering::Relaxed);
    install_fault_handler();

    let mut kernel: Option<Kernel> = None;
    let mut pools: HashMap<u32, Pool> = HashMap::new();
    loop {
        let (msg, fds) = match recv::<ToRunner>(sock.as_fd()) {
            Ok(Some(m)) => m,
            Ok(None) => return 0,
            Err(e) => {
                let _ = send(
                    sock.as_fd(),
                    &FromRunner::Failed {
                        message: format!("bad request: {e}"),
                    },
                    &[],
                );
                return 1;
            }
        };
        let reply = match msg {
            ToRunner::Load { path, describe } => match Kernel::load(&path) {
                Ok(k) => {
                    let description = if describe { k.describe() } else { None };
                    kernel = Some(k);
                    FromRunner::Loaded { description }
                }
                Err(message) => FromRunner::Failed { message },
            },
            ToRunner::Pool { id, axes, layout } => match map_pool(fds, axes, &layout) {
                Ok(p) => {
                    let reply = FromRunner::Mapped {
                        inputs: p.inputs.ptr() as u64,
                    };
                    pools.insert(id, p);
                    reply
                }
                Err(message) => FromRunner::Failed { message },
            },
            ToRunner::DropPool { id } => {
                pools.remove(&id);
                FromRunner::Ready
            }
            ToRunner::Call { pool, sets } => match (&kernel, pools.get(&pool)) {
                (Some(k), Some(p)) => {
                    call(k, p, &sets);
                    FromRunner::Done
                }
                _ => FromRunner::Failed {
                    message: "no kernel or pool".into(),
                },
            },
            ToRunner::Arm {
                pool,
                count,
                seq,
                spin,
            } => match (&kernel, pools.get(&pool)) {
                (Some(k), Some(p)) => {
                    let count = (count as usize).min(MAX_BATCH);
                    await_go(control, seq, spin);
                    // The judge writes the batch's sets once its clock runs. Each is read as
                    // its call comes (kernel code shares this page).
                    let list = control_map.ptr().wrapping_add(BATCH_OFFSET).cast::<u32>();
                    for i in 0..count {
                        // SAFETY: the control region holds MAX_BATCH u32s at BATCH_OFFSET.
                        let s = unsafe { std::ptr::read_volatile(list.add(i)) };
                        if let Some(ptrs) = p.pointers.get(s as usize) {
                            // SAFETY: pointers into mappings sized by the layout for these axes.
                            unsafe { k.call(ptrs, &p.axes) };
                        }
                    }
                    // Sent at once: the kernel's stamp of this message stops the judge's clock.
                    if send(sock.as_fd(), &FromRunner::Done, &[]).is_err() {
                        return 0;
                    }
                    flush_stdio();
                    continue;
                }
                _ => FromRunner::Failed {
                    message: "no kernel or pool".into(),
                },
            },
        };
        flush_stdio();
        if send(sock.as_fd(), &reply, &[]).is_err() {
            return 0;
        }
    }
}

/// What candidate code printed reaches the judge's output before the runner can be killed.
fn flush_stdio() {
    // SAFETY: fflush(NULL) flushes every open C stream.
    unsafe { libc::fflush(std::ptr::null_mut()) };
}

fn call(k: &Kernel, p: &Pool, sets: &[u32]) {
    for &s in sets {
        if let Some(ptrs) = p.pointers.get(s as usize) {
            // SAFETY: the pointers lie in mappings sized by the layout for these axes.
            unsafe { k.call(ptrs, &p.axes) };
        }
    }
}

fn map_pool(fds: Vec<OwnedFd>, axes: Vec<i64>, layout: &Layout) -> Result<Pool, String> {
    let [inputs, outputs]: [OwnedFd; 2] = fds
        .try_into()
        .map_err(|_| "a pool needs two descriptors".to_owned())?;
    let inputs = Shared::map(File::from(inputs), layout.input_region(), false)
        .map_err(|e| format!("mapping the inputs: {e}"))?;
    for (off, len, _) in layout.input_guards() {
        inputs
            .no_access(off, len)
            .map_err(|e| format!("guarding the inputs: {e}"))?;
    }
    let outputs = Shared::map(File::from(outputs), layout.output_region(), true)
        .map_err(|e| format!("mapping the outputs: {e}"))?;
    let pointers = (0..layout.sets)
        .map(|s| {
            (0..layout.input_sizes.len())
                // SAFETY: offsets from the layout lie inside the mapping.
                .map(|t| unsafe { inputs.ptr().add(layout.input(s, t)) }.cast())
                .chain(
                    (0..layout.output_sizes.len())
                        // SAFETY: as above.
                        .map(|t| unsafe { outputs.ptr().add(layout.output(s, t)) }.cast()),
                )
                .collect()
        })
        .collect();
    Ok(Pool {
        inputs,
        _outputs: outputs,
        axes,
        pointers,
    })
}
