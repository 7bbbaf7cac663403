//! The seccomp filter of sandboxed programs: a short allow-by-default list of refusals. What it
//! takes away is what untrusted kernel code has no business doing: starting processes and
//! signalling any process but itself (runners only; threads stay allowed), inspecting or writing
//! other processes, changing namespaces or
//! mounts, loading BPF, unpinning itself from its CPU, and opening IPv4/IPv6/packet sockets (the
//! network namespace already has no network; this also holds where namespaces are refused).

use std::io;

// Offsets into `struct seccomp_data`.
const NR: u32 = 0;
const ARCH: u32 = 4;
const ARG0_LO: u32 = 16;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JGE_K: u16 = 0x35;
const BPF_JSET_K: u16 = 0x45;
const BPF_RET_K: u16 = 0x06;

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// System calls refused with `EPERM` for every sandboxed program.
fn refused() -> Vec<i64> {
    let mut v = vec![
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_kexec_load,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_add_key,
        libc::SYS_keyctl,
        libc::SYS_request_key,
        libc::SYS_io_uring_setup,
        libc::SYS_userfaultfd,
        libc::SYS_personality,
        libc::SYS_open_tree,
        libc::SYS_move_mount,
        libc::SYS_fsopen,
        libc::SYS_fsmount,
        libc::SYS_sched_setaffinity,
        libc::SYS_pidfd_send_signal,
        libc::SYS_pidfd_getfd,
    ];
    #[cfg(target_arch = "x86_64")]
    v.push(libc::SYS_kexec_file_load);
    v
}

/// System calls whose first argument names a process: a runner may name only itself (where it
/// has no pid namespace, every process of its uid is otherwise in reach of `kill`).
fn own_process_only() -> [i64; 6] {
    [
        libc::SYS_kill,
        libc::SYS_tkill,
        libc::SYS_tgkill,
        libc::SYS_rt_sigqueueinfo,
        libc::SYS_rt_tgsigqueueinfo,
        libc::SYS_pidfd_open,
    ]
}

/// The filter: refuse what `refused` lists; for runners (`own_pid`), signals and pidfds only
/// for themselves, and no `fork`, `vfork` or `clone` without `CLONE_THREAD` (`clone3` answers
/// `ENOSYS`, so libraries fall back to `clone`).
fn program(allow_fork: bool, own_pid: u32) -> Vec<libc::sock_filter> {
    let deny = RET_ERRNO | libc::EPERM as u32;
    let mut p = vec![
        stmt(BPF_LD_W_ABS, ARCH),
        jump(BPF_JEQ_K, AUDIT_ARCH, 1, 0),
        stmt(BPF_RET_K, RET_KILL_PROCESS),
        stmt(BPF_LD_W_ABS, NR),
    ];
    // The x32 ABI of x86_64 numbers its calls from 0x40000000: none of them is allowed.
    #[cfg(target_arch = "x86_64")]
    {
        p.push(jump(BPF_JGE_K, 0x4000_0000, 0, 1));
        p.push(stmt(BPF_RET_K, deny));
    }
    for nr in refused() {
        p.push(jump(BPF_JEQ_K, nr as u32, 0, 1));
        p.push(stmt(BPF_RET_K, deny));
    }
    // socket(domain, …): no IPv4, IPv6 or raw packet sockets.
    p.push(jump(BPF_JEQ_K, libc::SYS_socket as u32, 0, 5));
    p.push(stmt(BPF_LD_W_ABS, ARG0_LO));
    p.push(jump(BPF_JEQ_K, libc::AF_INET as u32, 2, 0));
    p.push(jump(BPF_JEQ_K, libc::AF_INET6 as u32, 1, 0));
    p.push(jump(BPF_JEQ_K, libc::AF_PACKET as u32, 0, 1));
    p.push(stmt(BPF_RET_K, deny));
    if !allow_fork {
        p.push(stmt(BPF_LD_W_ABS, NR));
        for nr in own_process_only() {
            p.push(jump(BPF_JEQ_K, nr as u32, 0, 4));
            p.push(stmt(BPF_LD_W_ABS, ARG0_LO));
            p.push(jump(BPF_JEQ_K, own_pid, 0, 1));
            p.push(stmt(BPF_RET_K, RET_ALLOW));
            p.push(stmt(BPF_RET_K, deny));
        }
        p.push(jump(BPF_JEQ_K, libc::SYS_clone3 as u32, 0, 1));
        p.push(stmt(BPF_RET_K, RET_ERRNO | libc::ENOSYS as u32));
        #[cfg(target_arch = "x86_64")]
        for nr in [libc::SYS_fork, libc::SYS_vfork] {
            p.push(jump(BPF_JEQ_K, nr as u32, 0, 1));
            p.push(stmt(BPF_RET_K, deny));
        }
        p.push(jump(BPF_JEQ_K, libc::SYS_clone as u32, 0, 3));
        p.push(stmt(BPF_LD_W_ABS, ARG0_LO));
        p.push(jump(BPF_JSET_K, libc::CLONE_THREAD as u32, 1, 0));
        p.push(stmt(BPF_RET_K, deny));
    }
    p.push(stmt(BPF_RET_K, RET_ALLOW));
    p
}

/// Install the filter on the calling thread (and everything it starts). Needs
/// `PR_SET_NO_NEW_PRIVS`, which this sets.
pub(crate) fn install(allow_fork: bool) -> io::Result<()> {
    // SAFETY: getpid cannot fail; exec keeps the pid.
    let own_pid = unsafe { libc::getpid() } as u32;
    let filter = program(allow_fork, own_pid);
    let prog = libc::sock_fprog {
        len: u16::try_from(filter.len()).expect("the filter is short"),
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: plain prctl calls; `prog` points to `filter`, alive for the duration.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &raw const prog,
            0,
            0,
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every jump lands inside the program.
    #[test]
    fn jumps_stay_inside_the_program() {
        for allow_fork in [false, true] {
            let p = program(allow_fork, 4242);
            for (i, ins) in p.iter().enumerate() {
                if ins.code & 0x07 == 0x05 {
                    assert!(i + 1 + (ins.jt as usize) < p.len(), "jt of {i}");
                    assert!(i + 1 + (ins.jf as usize) < p.len(), "jf of {i}");
                }
            }
            assert_eq!(p.last().map(|i| i.k), Some(RET_ALLOW));
        }
    }
}
