//! The launcher on Linux: `ksearch sandbox` sets up a sandbox and executes the program in it.
//!
//! ```text
//! launcher (host namespaces, own session)
//!   └─ clone(user, pid, mount, network, ipc, uts namespaces) ── pid 1 of its namespace
//!        private root: system dirs read-only, its own /tmp, /dev and /proc
//!        rlimits, CPU pin, capabilities gone, seccomp filter ── exec the program
//! ```
//!
//! The launcher writes the program's uid and gid maps from outside (so that, run as root, the
//! program is uid 65534 outside, not root), reports the program's pid, waits for it and exits
//! the way it did. When the launcher dies, the program gets SIGKILL, and with it, as pid 1,
//! every process of its namespace: a `setsid` double-forked daemon included.
//!
//! Where the kernel refuses a user namespace, root still gets the other namespaces and drops to
//! uid 65534; where it refuses all namespaces, the program runs with the limits and the seccomp
//! filter only, and the report says what is missing.

use std::ffi::{CString, OsStr};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::spec::{Confinement, Report, SandboxSpec, UNPRIVILEGED_ID, report};
use super::{landlock, seccomp};

mod root;
use root::{Exposure, fallback_cwd, fence, plan_all, private_root};

/// System paths every sandbox sees read-only (those that exist). Programs, libraries, the
/// dynamic loader's cache, and the alternatives links that `cc` goes through.
const SYSTEM_PATHS: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
];

/// Device nodes every sandbox gets (`/dev/zero` but on the CPU runners, see `cpu_runner`).
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom"];

/// The most main-thread stack a CPU runner may have (the usual default).
const CPU_RUNNER_STACK_BYTES: u64 = 8 << 20;

/// Whether `spec` starts a runner on the CPU that may start no process (every candidate's
/// runner there: `c`, numpy, MLX's CPU target, torch on the CPU): its memory limit must hold.
/// `RLIMIT_DATA` counts only private memory, so it gets no shared memory but its bounded tmpfs
/// (the seccomp filter refuses memfds, System V shared memory and shared anonymous mappings),
/// no `/dev/zero` (a shared mapping of it is shared anonymous memory, and a read-only mount
/// does not stop a device opening for writing) and a main-thread stack it cannot raise. GPU
/// runners keep them (the CUDA driver may need them); so do the compiler and the torch
/// backend's trusted runners, which run no candidate code.
fn cpu_runner(spec: &SandboxSpec) -> bool {
    !spec.gpu && !spec.allow_fork
}

/// Inside the user namespace the setup runs as uid 0 (it mounts what the program will see),
/// then the program runs as `PROGRAM_ID`: the caller's own uid outside, or 65534 when the caller
/// is root. It keeps no capability past exec.
const SETUP_ID: u32 = 0;
const PROGRAM_ID: u32 = 1000;

fn err(what: &str, e: &io::Error) -> String {
    format!("{what}: {e}")
}

fn check(r: libc::c_int, what: &str) -> Result<(), String> {
    if r < 0 {
        Err(err(what, &io::Error::last_os_error()))
    } else {
        Ok(())
    }
}

fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).expect("paths have no NUL")
}

/// Mark every descriptor but 0–2, `keep` and `report` close-on-exec; clear it on those.
fn tidy_fds(keep: &[i32], report: i32) {
    let mut keep: Vec<u32> = keep.iter().chain([&report]).map(|&f| f as u32).collect();
    keep.extend([0, 1, 2]);
    keep.sort_unstable();
    keep.dedup();
    let mut from = 0u32;
    for &k in &keep {
        if k > from {
            // SAFETY: close_range only changes descriptor flags.
            unsafe {
                libc::syscall(
                    libc::SYS_close_range,
                    from,
                    k - 1,
                    libc::CLOSE_RANGE_CLOEXEC,
                )
            };
        }
        from = k + 1;
    }
    // SAFETY: as above.
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            from,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    for &k in &keep {
        // SAFETY: F_SETFD on our own descriptors.
        unsafe { libc::fcntl(k as i32, libc::F_SETFD, 0) };
    }
    // The report fd must not reach the program.
    // SAFETY: as above.
    unsafe { libc::fcntl(report, libc::F_SETFD, libc::FD_CLOEXEC) };
}

/// `clone` with namespace flags, used like `fork` (no new stack: the child continues here).
fn clone_with(flags: libc::c_int) -> io::Result<libc::pid_t> {
    // SAFETY: like fork(2): with no CLONE_VM, the child gets a copy of this single-threaded
    // process and returns 0 here; the extra arguments are null.
    let r = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (flags | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as libc::pid_t)
    }
}

/// Whether other processes of the same user may read this one's memory and descriptors and
/// write its `/proc` files.
fn set_dumpable(on: bool) {
    // SAFETY: prctl on ourselves.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, libc::c_ulong::from(on), 0, 0, 0) };
}

/// How far namespaces went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Isolation {
    /// User, pid, mount, network, ipc and uts namespaces.
    Full,
    /// Root without a user namespace: the other namespaces, then uid 65534.
    NoUserNamespace,
    /// None at all: limits and seccomp only.
    None,
}

/// The launcher. Returns only on failure before the program started (as an exit code).
pub(crate) fn launch(spec: &SandboxSpec) -> i32 {
    tidy_fds(&spec.keep_fds, spec.report_fd);
    // SAFETY: plain process-attribute calls.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        libc::setsid();
    }
    let mut sync = [0; 2];
    // SAFETY: pipe2 fills the array.
    if unsafe { libc::pipe2(sync.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        report(
            spec.report_fd,
            &Report::Failed(err("pipe", &io::Error::last_os_error())),
        );
        return 127;
    }
    // Planned now, while this process can still see everything the program may be shown.
    let exposures = plan_all(spec);
    let ns = libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWNET
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS;
    // SAFETY: geteuid, getuid and getgid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    // SAFETY: as above.
    let launcher_ids = unsafe { (libc::getuid(), libc::getgid()) };
    let mut missing = Vec::new();
    let full = if spec.no_namespaces {
        Err(io::Error::other("not asked for"))
    } else {
        // The program's /proc files must be its own user's, not root's, while the launcher
        // writes its uid and gid maps (an ordinary user may not write root's): a clone inherits
        // the dumpable flag that `main` clears in every ksearch process, so the launcher sets
        // it for the clone alone, and the program clears it again once the maps are written.
        // Safe: in that window the launcher and the program hold only the program's own spec
        // and descriptors, and no sandboxed process can see them (every one is in its own PID
        // namespace, or in none and fenced from `/proc/PID` by Landlock).
        set_dumpable(true);
        let r = clone_with(ns | libc::CLONE_NEWUSER);
        if !matches!(r, Ok(0)) {
            set_dumpable(false);
        }
        r
    };
    let (pid, isolation, own) = match full {
        Ok(pid) => (pid, Isolation::Full, None),
        Err(e) => {
            missing.push(format!("no user namespace ({e})"));
            match (root && !spec.no_namespaces).then(|| clone_with(ns)) {
                Some(Ok(pid)) => (pid, Isolation::NoUserNamespace, None),
                other => {
                    if let Some(Err(e)) = other {
                        missing.push(format!("no pid, mount or network namespace ({e})"));
                    } else {
                        missing.push(
                            "no pid, mount or network namespace (they need a user namespace or root)"
                                .into(),
                        );
                    }
                    // Without a private /tmp, a directory of its own: fresh, beneath the root
                    // directory every sandbox of its judge shares.
                    let own = match own_directory(&spec.root_dir) {
                        Ok(d) => d,
                        Err(e) => {
                            report(
                                spec.report_fd,
                                &Report::Failed(err("creating its own directory", &e)),
                            );
                            return 127;
                        }
                    };
                    // SAFETY: fork in a single-threaded process.
                    match unsafe { libc::fork() } {
                        -1 => {
                            report(
                                spec.report_fd,
                                &Report::Failed(err("fork", &io::Error::last_os_error())),
                            );
                            return 127;
                        }
                        pid => (pid, Isolation::None, Some(own)),
                    }
                }
            }
        }
    };
    if pid == 0 {
        // SAFETY: closing our copy of the write end, so EOF tells us the launcher died.
        unsafe { libc::close(sync[1]) };
        let outer_uid = match isolation {
            // Asked of the launcher's credentials: in the new user namespace, getuid says 0 or
            // the overflow uid, depending on whether the maps are written yet.
            Isolation::Full => outer_ids(root, launcher_ids).0,
            _ => launcher_ids.0,
        };
        let own_spec;
        let spec = match &own {
            Some(dir) => {
                own_spec = SandboxSpec {
                    root_dir: dir.clone(),
                    ..spec.clone()
                };
                &own_spec
            }
            None => spec,
        };
        let code = match child(
            spec, &exposures, isolation, sync[0], outer_uid, root, missing,
        ) {
            Ok(never) => match never {},
            Err(e) => {
                report(spec.report_fd, &Report::Failed(e));
                127
            }
        };
        // SAFETY: leaving the child without running the parent's atexit handlers.
        unsafe { libc::_exit(code) };
    }
    // SAFETY: our copy of the read end.
    unsafe { libc::close(sync[0]) };
    if isolation == Isolation::Full
        && let Err(e) = write_id_maps(pid, root, launcher_ids)
    {
        report(spec.report_fd, &Report::Failed(e));
        // SAFETY: killing the child we just made.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        return 127;
    }
    report(spec.report_fd, &Report::Pid(pid));
    // SAFETY: writing one byte to our pipe and closing the report fd. The pipe's write end
    // stays open while we live: the program checks it to know we are still here.
    unsafe {
        libc::write(sync[1], [1u8].as_ptr().cast(), 1);
        libc::close(spec.report_fd);
    }
    wait_and_mirror(pid, own.as_deref())
}

/// A new directory beneath `root_dir`, readable and writable by this user alone.
fn own_directory(root_dir: &Path) -> io::Result<PathBuf> {
    Ok(tempfile::Builder::new()
        .prefix("own-")
        .tempdir_in(root_dir)?
        .keep())
}

/// Map the program's uid and gid to the caller's own (`uid`, `gid`), or to 65534 when the caller
/// is root.
fn write_id_maps(pid: libc::pid_t, root: bool, (uid, gid): (u32, u32)) -> Result<(), String> {
    let (outer_uid, outer_gid) = outer_ids(root, (uid, gid));
    let write = |file: &str, text: String| {
        std::fs::write(format!("/proc/{pid}/{file}"), text)
            .map_err(|e| err(&format!("writing /proc/{pid}/{file}"), &e))
    };
    write("setgroups", "deny".into())?;
    // Root maps the setup to itself (so it can read what it exposes, e.g. a Python under
    // /root) and the program to 65534; anyone else maps both to themselves.
    if root {
        write(
            "uid_map",
            format!("{SETUP_ID} {uid} 1\n{PROGRAM_ID} {outer_uid} 1\n"),
        )?;
        write(
            "gid_map",
            format!("{SETUP_ID} {gid} 1\n{PROGRAM_ID} {outer_gid} 1\n"),
        )
    } else {
        write("uid_map", format!("{SETUP_ID} {outer_uid} 1\n"))?;
        write("gid_map", format!("{SETUP_ID} {outer_gid} 1\n"))
    }
}

/// The uid and gid the program has outside its user namespace, given the launcher's.
fn outer_ids(root: bool, launcher_ids: (u32, u32)) -> (u32, u32) {
    if root {
        (UNPRIVILEGED_ID, UNPRIVILEGED_ID)
    } else {
        launcher_ids
    }
}

/// Wait for the program, remove its own directory (`own`, where it had one), and end the way it
/// ended (same exit code, or same signal). A launcher killed first leaves the directory to its
/// judge's, which is removed when the judge ends.
fn wait_and_mirror(pid: libc::pid_t, own: Option<&Path>) -> i32 {
    let mut status = 0;
    loop {
        // SAFETY: waiting for our child.
        let r = unsafe { libc::waitpid(pid, &raw mut status, 0) };
        if r == pid {
            break;
        }
        if r < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return 127;
        }
    }
    if let Some(dir) = own {
        let _ = std::fs::remove_dir_all(dir);
    }
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        // SAFETY: restore the default action and die of the same signal; a core dump is not
        // wanted.
        unsafe {
            let no_core = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &raw const no_core);
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&raw mut set);
            libc::sigaddset(&raw mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &raw const set, std::ptr::null_mut());
            libc::raise(sig);
        }
        128 + sig
    } else {
        libc::WEXITSTATUS(status)
    }
}

/// In the program's process: wait for the maps, confine, exec.
fn child(
    spec: &SandboxSpec,
    exposures: &[Exposure],
    isolation: Isolation,
    sync: i32,
    outer_uid: u32,
    root: bool,
    mut missing: Vec<String>,
) -> Result<std::convert::Infallible, String> {
    // SAFETY: prctl on ourselves.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    let mut byte = [0u8];
    // SAFETY: reading from our pipe; EOF means the launcher is gone.
    let n = unsafe { libc::read(sync, byte.as_mut_ptr().cast(), 1) };
    if n != 1 {
        return Err("the launcher went away".into());
    }
    if isolation == Isolation::Full {
        set_dumpable(false);
        // Take the uid and gid the launcher mapped (credentials do not change by themselves).
        // SAFETY: plain credential calls.
        unsafe {
            check(libc::setresgid(SETUP_ID, SETUP_ID, SETUP_ID), "setresgid")?;
            check(libc::setresuid(SETUP_ID, SETUP_ID, SETUP_ID), "setresuid")?;
        }
    }

    let namespaces = isolation != Isolation::None;
    if namespaces {
        private_root(spec, exposures)?;
        // SAFETY: a valid buffer.
        unsafe { libc::sethostname(c"ksearch-sandbox".as_ptr(), 15) };
    } else {
        let cwd = fallback_cwd(spec);
        if let Err(e) = std::env::set_current_dir(cwd) {
            return Err(err(&format!("chdir {}", cwd.display()), &e));
        }
    }
    limits(spec)?;
    place(spec);
    drop_bounding_capabilities();
    let uid = match isolation {
        Isolation::Full => {
            if root {
                // Root's sandbox: leave the setup uid for the program's (only root's maps hold
                // a second uid).
                // SAFETY: plain credential calls, within the namespace's map.
                unsafe {
                    check(
                        libc::setresgid(PROGRAM_ID, PROGRAM_ID, PROGRAM_ID),
                        "setresgid",
                    )?;
                    check(
                        libc::setresuid(PROGRAM_ID, PROGRAM_ID, PROGRAM_ID),
                        "setresuid",
                    )?;
                }
            }
            outer_uid
        }
        Isolation::NoUserNamespace => {
            drop_to_unprivileged()?;
            UNPRIVILEGED_ID
        }
        Isolation::None => outer_uid,
    };
    // Without a mount namespace, Landlock fences the files instead, and the program's temp dir
    // is its own directory rather than a private /tmp.
    let mut fenced;
    let spec = if namespaces {
        spec
    } else {
        match landlock::restrict(&fence(spec, exposures)) {
            Ok(()) => missing.push(
                "no mount namespace: files are fenced by Landlock instead (it reads what a private root would show and writes only its own directory)".into(),
            ),
            Err(e) => missing.push(format!(
                "files outside its temp dir are not hidden (no mount namespace, no Landlock: {e})"
            )),
        }
        fenced = spec.clone();
        let own = spec.root_dir.display().to_string();
        for (k, v) in &mut fenced.env {
            if k == "TMPDIR" || k == "HOME" {
                v.clone_from(&own);
            }
        }
        &fenced
    };
    let seccomp_ok = match seccomp::install(spec.allow_fork, cpu_runner(spec)) {
        Ok(()) => true,
        Err(e) => {
            missing.push(format!("no seccomp filter ({e})"));
            false
        }
    };
    let confinement = Confinement {
        user_namespace: isolation == Isolation::Full,
        pid_namespace: namespaces,
        network_namespace: namespaces,
        private_root: namespaces,
        seccomp: seccomp_ok,
        uid,
        missing,
    };
    // Changing credentials cleared the parent-death signal: set it again, then make sure the
    // launcher did not die before it was set (its end of the pipe would have closed).
    // SAFETY: prctl and poll on our own descriptors.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        let mut p = libc::pollfd {
            fd: sync,
            events: libc::POLLIN,
            revents: 0,
        };
        if libc::poll(&raw mut p, 1, 0) != 0 {
            return Err("the launcher went away".into());
        }
    }
    report(spec.report_fd, &Report::Ready(confinement));
    exec(spec)
}

fn drop_to_unprivileged() -> Result<(), String> {
    let id = UNPRIVILEGED_ID;
    // SAFETY: plain credential calls.
    unsafe {
        check(libc::setgroups(0, std::ptr::null()), "setgroups")?;
        check(libc::setresgid(id, id, id), "setresgid")?;
        check(libc::setresuid(id, id, id), "setresuid")?;
    }
    Ok(())
}

/// Drop every capability from the bounding set (where we hold CAP_SETPCAP), so nothing the
/// program executes can regain one: at exec, even uid 0 gets only what the bounding set holds.
fn drop_bounding_capabilities() {
    // SAFETY: prctl; root in the namespace gets no capability from exec either.
    unsafe {
        libc::prctl(
            libc::PR_SET_SECUREBITS,
            0x01 | 0x02, // SECBIT_NOROOT and its lock
            0,
            0,
            0,
        );
    }
    for cap in 0..64 {
        // SAFETY: prctl; EINVAL past the last capability is fine.
        unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
    }
    // SAFETY: as above.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
    }
}

fn limits(spec: &SandboxSpec) -> Result<(), String> {
    let l = &spec.limits;
    let set = |res, value: u64, name: &str| {
        // Never above the hard limit already in force: raising it takes CAP_SYS_RESOURCE in the
        // initial namespace, which no ordinary user has (nor root inside a user namespace), and
        // a lower limit caps all the same (`ulimit -n 1024` made every runner fail).
        let mut now = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit fills the struct.
        check(unsafe { libc::getrlimit(res, &raw mut now) }, name)?;
        let value = value.min(now.rlim_max);
        let r = libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        // SAFETY: a valid rlimit.
        check(unsafe { libc::setrlimit(res, &raw const r) }, name)
    };
    set(libc::RLIMIT_DATA, l.memory_bytes, "RLIMIT_DATA")?;
    set(libc::RLIMIT_CPU, l.cpu_seconds, "RLIMIT_CPU")?;
    set(libc::RLIMIT_FSIZE, l.file_bytes, "RLIMIT_FSIZE")?;
    set(libc::RLIMIT_NPROC, l.processes, "RLIMIT_NPROC")?;
    set(libc::RLIMIT_NOFILE, l.open_files, "RLIMIT_NOFILE")?;
    if cpu_runner(spec) {
        // The main thread's stack is not data either, and grows up to RLIMIT_STACK, whose soft
        // limit a program may raise to the hard one (often unlimited): soft and hard at most
        // 8 MiB. (Not more than that: glibc gives every thread a stack of the soft limit.)
        let mut now = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit fills the struct.
        check(
            unsafe { libc::getrlimit(libc::RLIMIT_STACK, &raw mut now) },
            "RLIMIT_STACK",
        )?;
        set(
            libc::RLIMIT_STACK,
            now.rlim_cur.min(CPU_RUNNER_STACK_BYTES),
            "RLIMIT_STACK",
        )?;
    }
    set(libc::RLIMIT_CORE, 0, "RLIMIT_CORE")
}

fn exec(spec: &SandboxSpec) -> Result<std::convert::Infallible, String> {
    let program = cstr(&spec.program);
    let mut argv: Vec<CString> = vec![program.clone()];
    for a in &spec.args {
        argv.push(CString::new(a.as_bytes()).map_err(|_| format!("argument {a:?} holds NUL"))?);
    }
    let envp: Vec<CString> = spec
        .env
        .iter()
        .map(|(k, v)| {
            CString::new(format!("{k}={v}")).map_err(|_| format!("variable {k} holds NUL"))
        })
        .collect::<Result<_, _>>()?;
    let mut argv_p: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_p.push(std::ptr::null());
    let mut envp_p: Vec<*const libc::c_char> = envp.iter().map(|a| a.as_ptr()).collect();
    envp_p.push(std::ptr::null());
    // SAFETY: NUL-terminated arrays of valid C strings that outlive the call.
    unsafe { libc::execve(program.as_ptr(), argv_p.as_ptr(), envp_p.as_ptr()) };
    Err(err(
        &format!("executing {}", spec.program.display()),
        &io::Error::last_os_error(),
    ))
}

/// Read the launcher's spec from its argument and run it.
pub(crate) fn main_with(spec_json: &OsStr) -> i32 {
    let spec: SandboxSpec = match serde_json::from_slice(spec_json.as_bytes()) {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(io::stderr(), "ksearch sandbox: malformed spec: {e}");
            return 2;
        }
    };
    launch(&spec)
}

/// The CPUs the program runs on: `cpu`, else `cpus`, else those the launcher inherited.
fn place(spec: &SandboxSpec) {
    match spec.cpu {
        Some(cpu) => super::pin_to_cpu(cpu),
        None => super::pin_to_cpus(&spec.cpus),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::Limits;

    fn spec(limits: Limits) -> SandboxSpec {
        SandboxSpec {
            program: PathBuf::from("/bin/true"),
            args: Vec::new(),
            env: Vec::new(),
            cwd: PathBuf::from("/tmp"),
            root_dir: PathBuf::from("/nonexistent"),
            read_only: Vec::new(),
            writable: Vec::new(),
            tmp_bytes: 1 << 20,
            gpu: false,
            allow_fork: false,
            cpu: None,
            cpus: Vec::new(),
            limits,
            keep_fds: Vec::new(),
            report_fd: 2,
            no_namespaces: true,
        }
    }

    /// Run `f` in a child process (what it changes cannot be undone) and return its exit code.
    fn in_child(f: impl FnOnce() -> i32) -> i32 {
        // SAFETY: the child only makes system calls and exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let code = f();
            // SAFETY: leaving the child without running the parent's destructors.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &raw mut status, 0) };
        assert!(libc::WIFEXITED(status), "status {status}");
        libc::WEXITSTATUS(status)
    }

    /// Leave root (and with it CAP_SYS_RESOURCE) in a child, as an ordinary user is.
    fn as_ordinary_user() -> bool {
        // SAFETY: plain credential calls.
        unsafe {
            libc::geteuid() != 0
                || (libc::setgroups(0, std::ptr::null()) == 0
                    && libc::setresgid(UNPRIVILEGED_ID, UNPRIVILEGED_ID, UNPRIVILEGED_ID) == 0
                    && libc::setresuid(UNPRIVILEGED_ID, UNPRIVILEGED_ID, UNPRIVILEGED_ID) == 0)
        }
    }

    /// `ulimit -n 1024` (a hard limit under the runners' 4096 open files) must not make the
    /// sandbox fail: the limit is lowered to the hard limit.
    #[test]
    fn a_limit_above_the_hard_limit_is_lowered_to_it() {
        let code = in_child(|| {
            let low = libc::rlimit {
                rlim_cur: 512,
                rlim_max: 512,
            };
            // SAFETY: setting our own limit from a local struct.
            if !as_ordinary_user()
                || unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raw const low) } != 0
            {
                return 10;
            }
            let asked = spec(Limits {
                open_files: 4096,
                ..limits_of_a_runner()
            });
            if limits(&asked).is_err() {
                return 11;
            }
            let mut now = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: reading our own limit into a local struct.
            unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut now) };
            if now.rlim_cur != 512 || now.rlim_max != 512 {
                return 12;
            }
            0
        });
        assert_eq!(code, 0, "see the codes in the child");
    }

    fn affinity() -> Vec<usize> {
        // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity fills it.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: our own affinity into a local set.
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &raw mut set) };
        // SAFETY: CPU_ISSET reads the local set within its bounds.
        (0..1024)
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect()
    }

    /// A GPU runner is started by a judge pinned to one CPU: it runs on the CPUs its spec names
    /// instead of inheriting that one; a runner with `cpu` is pinned to it; one with neither
    /// keeps what it inherited.
    #[test]
    fn a_runner_runs_on_the_cpus_its_spec_names() {
        let all = affinity();
        if all.len() < 2 {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("one CPU here: no other CPU to run a runner on");
            }
            return;
        }
        let (judge, rest) = (all[0], all[1..].to_vec());
        for (cpu, cpus, want) in [
            (None, rest.clone(), rest.clone()),
            (Some(rest[0]), rest.clone(), vec![rest[0]]),
            (None, Vec::new(), vec![judge]),
        ] {
            let code = in_child(|| {
                super::super::pin_to_cpu(judge);
                place(&SandboxSpec {
                    cpu,
                    cpus: cpus.clone(),
                    ..spec(limits_of_a_runner())
                });
                i32::from(affinity() != want)
            });
            assert_eq!(code, 0, "cpu {cpu:?}, cpus {cpus:?}: expected {want:?}");
        }
    }

    fn limits_of_a_runner() -> Limits {
        Limits {
            memory_bytes: 1 << 30,
            cpu_seconds: 60,
            file_bytes: 1 << 20,
            processes: 1 << 16,
            open_files: 256,
        }
    }

    /// A CPU runner's main-thread stack (not data, so not under RLIMIT_DATA) is at most 8 MiB,
    /// and it cannot raise that; a GPU runner's is left as it was.
    #[test]
    fn a_cpu_runner_cannot_grow_its_stack() {
        let unlimited = libc::rlimit {
            rlim_cur: libc::RLIM_INFINITY,
            rlim_max: libc::RLIM_INFINITY,
        };
        let stack = || {
            let mut now = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: reading our own limit into a local struct.
            unsafe { libc::getrlimit(libc::RLIMIT_STACK, &raw mut now) };
            now
        };
        for gpu in [false, true] {
            let code = in_child(|| {
                // As `ulimit -s unlimited` leaves it, where it may (root, or a user whose hard
                // limit is unlimited).
                // SAFETY: setting our own limit from a local struct.
                unsafe { libc::setrlimit(libc::RLIMIT_STACK, &raw const unlimited) };
                let before = stack();
                let mut asked = spec(limits_of_a_runner());
                asked.gpu = gpu;
                if !as_ordinary_user() || limits(&asked).is_err() {
                    return 10;
                }
                let after = stack();
                // SAFETY: as above.
                let raised = unsafe { libc::setrlimit(libc::RLIMIT_STACK, &raw const unlimited) };
                match gpu {
                    false if after.rlim_max > CPU_RUNNER_STACK_BYTES || raised == 0 => 11,
                    true if after.rlim_max != before.rlim_max => 12,
                    _ => 0,
                }
            });
            assert_eq!(code, 0, "gpu {gpu}: see the codes in the child");
        }
    }

    /// No `/dev/zero` for a CPU runner (shared memory its limit would not count); the GPU
    /// runners and the compiler keep it.
    #[test]
    fn a_cpu_runner_gets_no_dev_zero() {
        let zero = Path::new("/dev/zero");
        let mut runner = spec(limits_of_a_runner());
        assert!(!plan_all(&runner).iter().any(|e| e.host == zero));
        assert!(
            plan_all(&runner)
                .iter()
                .any(|e| e.host == Path::new("/dev/null"))
        );
        runner.gpu = true;
        assert!(plan_all(&runner).iter().any(|e| e.host == zero));
        runner.gpu = false;
        runner.allow_fork = true;
        assert!(plan_all(&runner).iter().any(|e| e.host == zero));
    }
}
