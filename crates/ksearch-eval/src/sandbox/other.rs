//! The launcher where Linux namespaces and seccomp do not exist (macOS): the program still runs
//! in its own process and session, with resource limits and only the environment it is given;
//! the report says what is missing. `docs/sandbox.md` says what that means for a user.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::Write;
use std::os::fd::FromRawFd;
use std::os::unix::ffi::OsStrExt;

use super::spec::{Confinement, Report, SandboxSpec, report};

pub(crate) fn main_with(spec_json: &OsStr) -> i32 {
    let spec: SandboxSpec = match serde_json::from_slice(spec_json.as_bytes()) {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "ksearch sandbox: malformed spec: {e}");
            return 2;
        }
    };
    // SAFETY: plain process calls.
    unsafe { libc::setsid() };
    for (res, value) in [
        (libc::RLIMIT_DATA, spec.limits.memory_bytes),
        (libc::RLIMIT_CPU, spec.limits.cpu_seconds),
        (libc::RLIMIT_FSIZE, spec.limits.file_bytes),
        (libc::RLIMIT_NOFILE, spec.limits.open_files),
        (libc::RLIMIT_CORE, 0),
    ] {
        let r = libc::rlimit {
            rlim_cur: value as libc::rlim_t,
            rlim_max: value as libc::rlim_t,
        };
        // SAFETY: a valid rlimit.
        unsafe { libc::setrlimit(res, &raw const r) };
    }
    if let Err(e) = std::env::set_current_dir(&spec.cwd) {
        report(spec.report_fd, &Report::Failed(format!("chdir: {e}")));
        return 127;
    }
    report(spec.report_fd, &Report::Pid(std::process::id() as i32));
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    report(
        spec.report_fd,
        &Report::Ready(Confinement {
            uid,
            missing: vec![
                "no namespaces or seccomp on this platform: the program runs as your user, can read your files and reach the network; it has its own process and session, resource limits and a scrubbed environment".into(),
            ],
            ..Confinement::default()
        }),
    );
    // SAFETY: closing the report fd before exec.
    unsafe { libc::close(spec.report_fd) };
    let program = CString::new(spec.program.as_os_str().as_bytes()).expect("no NUL");
    let mut args = vec![program.clone()];
    args.extend(
        spec.args
            .iter()
            .filter_map(|a| CString::new(a.as_bytes()).ok()),
    );
    let env: Vec<CString> = spec
        .env
        .iter()
        .filter_map(|(k, v)| CString::new(format!("{k}={v}")).ok())
        .collect();
    let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = env.iter().map(|a| a.as_ptr()).collect();
    envp.push(std::ptr::null());
    // SAFETY: NUL-terminated arrays of valid strings.
    unsafe { libc::execve(program.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
    127
}
