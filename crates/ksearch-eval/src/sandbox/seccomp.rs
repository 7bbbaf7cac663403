//! The seccomp filter of sandboxed programs: a short allow-by-default list of refusals. What it
//! takes away is what untrusted kernel code has no business doing: starting processes and
//! signalling any process but itself (runners only; threads stay allowed), inspecting or writing
//! other processes, changing namespaces or
//! mounts, loading BPF, unpinning itself from its CPU, and opening any socket but a Unix or netlink
//! one (the network namespace already has no network; this also holds where namespaces are
//! refused, and for families a network namespace does not fence, such as a VM's `AF_VSOCK`).
//! Runners on the CPU also make no shared memory, which their memory limit would not count,
//! and no System V or POSIX message queue or semaphore, which could carry data between runners
//! where no IPC namespace separates them.

use std::io;

// Offsets into `struct seccomp_data`.
const NR: u32 = 0;
const ARCH: u32 = 4;
const ARG0_LO: u32 = 16;
const ARG1_LO: u32 = 24;
const ARG3_LO: u32 = 40;

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
        // Compares the kernel objects of two processes (their files, memory, signal handlers):
        // what another runner holds, where no PID namespace separates them.
        libc::SYS_kcmp,
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

/// System calls whose first argument names a process, 0 meaning the caller: a runner may only
/// change its own priority, scheduling, limits and memory placement (without a pid namespace it
/// could otherwise lower the baseline's limits or priority, or the judge's).
fn self_or_own_process_only() -> [i64; 6] {
    [
        libc::SYS_prlimit64,
        libc::SYS_sched_setscheduler,
        libc::SYS_sched_setparam,
        libc::SYS_sched_setattr,
        libc::SYS_migrate_pages,
        libc::SYS_move_pages,
    ]
}

/// System calls that make shared memory or carry data past a process: memfds, secret memfds,
/// System V shared memory (`shmat` too: without an IPC namespace it would reach the segments of
/// the user's other programs), System V message queues and semaphores, POSIX message queues.
/// `RLIMIT_DATA` counts only private memory, so a runner on the CPU could hold any amount in
/// the first (5 GiB past a 4 GiB limit was seen); without an IPC namespace (where namespaces
/// are refused) the others are a channel between runners of the same user: a candidate's
/// checked runner and its timed one, or two contenders. And changing a file's mode: without a
/// user namespace (or when ksearch runs as an ordinary user) a runner owns the output memory it
/// is handed write-only, and could make it readable, reopen it and map it. No runner on the CPU
/// needs any of them.
fn shared_memory() -> Vec<i64> {
    let mut v = vec![
        libc::SYS_fchmod,
        libc::SYS_fchmodat,
        libc::SYS_fchmodat2,
        libc::SYS_memfd_create,
        libc::SYS_memfd_secret,
        libc::SYS_shmget,
        libc::SYS_shmat,
        libc::SYS_msgget,
        libc::SYS_msgsnd,
        libc::SYS_msgrcv,
        libc::SYS_msgctl,
        libc::SYS_semget,
        libc::SYS_semop,
        libc::SYS_semtimedop,
        libc::SYS_semctl,
        libc::SYS_mq_open,
        libc::SYS_mq_timedsend,
        libc::SYS_mq_timedreceive,
        libc::SYS_mq_notify,
    ];
    // aarch64 has no `chmod` system call (only `fchmodat`).
    #[cfg(target_arch = "x86_64")]
    v.push(libc::SYS_chmod);
    v
}

/// The filter: refuse what `refused` lists; with `no_shared_memory`, what `shared_memory` lists
/// and shared anonymous mappings; for runners (`own_pid`), signals and pidfds only for
/// themselves, and no `fork`, `vfork` or `clone` without `CLONE_THREAD` (`clone3` answers
/// `ENOSYS`, so libraries fall back to `clone`).
fn program(allow_fork: bool, no_shared_memory: bool, own_pid: u32) -> Vec<libc::sock_filter> {
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
    // socket(domain, …) and socketpair(domain, …): Unix and netlink sockets only (no IPv4, IPv6,
    // packet, vsock, Bluetooth, … sockets).
    for nr in [libc::SYS_socket, libc::SYS_socketpair] {
        p.push(jump(BPF_JEQ_K, nr as u32, 0, 5));
        p.push(stmt(BPF_LD_W_ABS, ARG0_LO));
        p.push(jump(BPF_JEQ_K, libc::AF_UNIX as u32, 1, 0));
        p.push(jump(BPF_JEQ_K, libc::AF_NETLINK as u32, 0, 1));
        p.push(stmt(BPF_RET_K, RET_ALLOW));
        p.push(stmt(BPF_RET_K, deny));
    }
    if no_shared_memory {
        p.push(stmt(BPF_LD_W_ABS, NR));
        for nr in shared_memory() {
            p.push(jump(BPF_JEQ_K, nr as u32, 0, 1));
            p.push(stmt(BPF_RET_K, deny));
        }
        // mmap(addr, len, prot, flags, …) with MAP_SHARED (or MAP_SHARED_VALIDATE, which holds
        // its bit) and MAP_ANONYMOUS.
        p.push(jump(BPF_JEQ_K, libc::SYS_mmap as u32, 0, 5));
        p.push(stmt(BPF_LD_W_ABS, ARG3_LO));
        p.push(jump(BPF_JSET_K, libc::MAP_ANONYMOUS as u32, 0, 2));
        p.push(jump(BPF_JSET_K, libc::MAP_SHARED as u32, 0, 1));
        p.push(stmt(BPF_RET_K, deny));
        p.push(stmt(BPF_RET_K, RET_ALLOW));
    }
    if !allow_fork {
        p.push(stmt(BPF_LD_W_ABS, NR));
        for nr in own_process_only() {
            p.push(jump(BPF_JEQ_K, nr as u32, 0, 4));
            p.push(stmt(BPF_LD_W_ABS, ARG0_LO));
            p.push(jump(BPF_JEQ_K, own_pid, 0, 1));
            p.push(stmt(BPF_RET_K, RET_ALLOW));
            p.push(stmt(BPF_RET_K, deny));
        }
        for nr in self_or_own_process_only() {
            p.push(jump(BPF_JEQ_K, nr as u32, 0, 5));
            p.push(stmt(BPF_LD_W_ABS, ARG0_LO));
            p.push(jump(BPF_JEQ_K, 0, 1, 0));
            p.push(jump(BPF_JEQ_K, own_pid, 0, 1));
            p.push(stmt(BPF_RET_K, RET_ALLOW));
            p.push(stmt(BPF_RET_K, deny));
        }
        // setpriority(which, who, …): only PRIO_PROCESS of itself; ioprio_set not at all.
        p.push(jump(BPF_JEQ_K, libc::SYS_setpriority as u32, 0, 7));
        p.push(stmt(BPF_LD_W_ABS, ARG0_LO));
        p.push(jump(BPF_JEQ_K, 0 /* PRIO_PROCESS */, 0, 4));
        p.push(stmt(BPF_LD_W_ABS, ARG1_LO));
        p.push(jump(BPF_JEQ_K, 0, 1, 0));
        p.push(jump(BPF_JEQ_K, own_pid, 0, 1));
        p.push(stmt(BPF_RET_K, RET_ALLOW));
        p.push(stmt(BPF_RET_K, deny));
        p.push(jump(BPF_JEQ_K, libc::SYS_ioprio_set as u32, 0, 1));
        p.push(stmt(BPF_RET_K, deny));
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
pub(crate) fn install(allow_fork: bool, no_shared_memory: bool) -> io::Result<()> {
    // SAFETY: getpid cannot fail; exec keeps the pid.
    let own_pid = unsafe { libc::getpid() } as u32;
    let filter = program(allow_fork, no_shared_memory, own_pid);
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
        for (allow_fork, no_shared_memory) in [(false, true), (false, false), (true, false)] {
            let p = program(allow_fork, no_shared_memory, 4242);
            for (i, ins) in p.iter().enumerate() {
                if ins.code & 0x07 == 0x05 {
                    assert!(i + 1 + (ins.jt as usize) < p.len(), "jt of {i}");
                    assert!(i + 1 + (ins.jf as usize) < p.len(), "jf of {i}");
                }
            }
            assert_eq!(p.last().map(|i| i.k), Some(RET_ALLOW));
        }
    }

    /// In a child under the filter: which socket families open, and that other calls (after
    /// the socket rules in the program) still reach their own rules.
    #[cfg(target_os = "linux")]
    #[test]
    fn only_unix_sockets_and_its_own_process_are_in_reach() {
        fn opens(domain: i32) -> bool {
            // SAFETY: a plain socket call; the descriptor is closed at once.
            let fd = unsafe { libc::socket(domain, libc::SOCK_STREAM, 0) };
            let fd = if fd < 0 && domain == libc::AF_NETLINK {
                // SAFETY: as above (netlink sockets are datagram sockets).
                unsafe { libc::socket(domain, libc::SOCK_RAW, 0) }
            } else {
                fd
            };
            if fd >= 0 {
                // SAFETY: our own descriptor.
                unsafe { libc::close(fd) };
            }
            fd >= 0
        }
        // SAFETY: the child only makes system calls and exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let code = (|| {
                if install(false, true).is_err() {
                    return 10;
                }
                let expected = [
                    (libc::AF_UNIX, true),
                    (libc::AF_NETLINK, true),
                    (libc::AF_INET, false),
                    (libc::AF_INET6, false),
                    (libc::AF_PACKET, false),
                    (libc::AF_VSOCK, false),
                ];
                for (i, (domain, open)) in expected.into_iter().enumerate() {
                    if opens(domain) != open {
                        return 20 + i as i32;
                    }
                }
                let mut pair = [0; 2];
                // SAFETY: a socketpair into a local array.
                let inet_pair = unsafe {
                    libc::socketpair(libc::AF_INET, libc::SOCK_STREAM, 0, pair.as_mut_ptr())
                };
                // SAFETY: as above.
                let unix_pair = unsafe {
                    libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, pair.as_mut_ptr())
                };
                if inet_pair == 0 || unix_pair != 0 {
                    return 30;
                }
                // SAFETY: a signal to a process that is not this one is refused by the rules
                // after the socket rules; pid 1 is never this test.
                if unsafe { libc::kill(1, 0) } == 0 {
                    return 31;
                }
                // Its own priority and limits it may change; nobody else's.
                let mut lim = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                // SAFETY: reading and setting limits through a local struct.
                unsafe {
                    if libc::setpriority(libc::PRIO_PROCESS, 0, 1) != 0
                        || libc::setpriority(libc::PRIO_USER, 0, 1) == 0
                        || libc::setpriority(libc::PRIO_PROCESS, 1, 1) == 0
                    {
                        return 32;
                    }
                    if libc::prlimit(0, libc::RLIMIT_NOFILE, std::ptr::null(), &raw mut lim) != 0
                        || libc::prlimit(1, libc::RLIMIT_NOFILE, std::ptr::null(), &raw mut lim)
                            == 0
                    {
                        return 33;
                    }
                }
                0
            })();
            // SAFETY: leave the child without running the parent's destructors.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &raw mut status, 0) };
        assert!(libc::WIFEXITED(status), "status {status}");
        assert_eq!(libc::WEXITSTATUS(status), 0, "see the codes in the child");
    }

    /// In children under the filter: a CPU runner makes no shared memory, but maps files shared
    /// (its inputs and outputs) and anonymous memory private; a GPU runner keeps memfds.
    #[cfg(target_os = "linux")]
    #[test]
    fn cpu_runners_make_no_shared_memory() {
        fn in_child(no_shared_memory: bool) -> i32 {
            // SAFETY: the child only makes system calls and exits.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                let code = (|| {
                    if install(false, no_shared_memory).is_err() {
                        return 10;
                    }
                    let refused = |r: i64| {
                        r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
                    };
                    let len = 1 << 20;
                    // SAFETY: plain system calls; what they return is only compared.
                    unsafe {
                        let map = |flags| {
                            let m = libc::mmap(
                                std::ptr::null_mut(),
                                len,
                                libc::PROT_READ | libc::PROT_WRITE,
                                flags,
                                -1,
                                0,
                            );
                            if m == libc::MAP_FAILED { -1 } else { 0 }
                        };
                        let memfd = libc::memfd_create(c"t".as_ptr(), 0);
                        if refused(memfd.into()) != no_shared_memory {
                            return 20;
                        }
                        if !no_shared_memory {
                            return if map(libc::MAP_SHARED | libc::MAP_ANONYMOUS) == 0 {
                                0
                            } else {
                                21
                            };
                        }
                        let shm = libc::shmget(libc::IPC_PRIVATE, len, libc::IPC_CREAT | 0o600);
                        if !refused(shm.into())
                            || !refused(libc::syscall(libc::SYS_memfd_secret, 0))
                        {
                            return 22;
                        }
                        // Channels between processes of one user: message queues, semaphores.
                        let queue = libc::msgget(libc::IPC_PRIVATE, libc::IPC_CREAT | 0o600);
                        let sems = libc::semget(libc::IPC_PRIVATE, 1, libc::IPC_CREAT | 0o600);
                        let mq = libc::syscall(
                            libc::SYS_mq_open,
                            c"ksearch-test".as_ptr(),
                            libc::O_CREAT | libc::O_RDWR,
                            0o600,
                            std::ptr::null::<libc::c_void>(),
                        );
                        if !refused(queue.into()) || !refused(sems.into()) || !refused(mq) {
                            return 25;
                        }
                        if !refused(libc::syscall(libc::SYS_kcmp, 1, 1, 0, 0, 0)) {
                            return 26;
                        }
                        // No file's mode changes (the output memory it is handed write-only).
                        if !refused(libc::chmod(c"/tmp".as_ptr(), 0o777).into())
                            || !refused(libc::fchmod(0, 0o777).into())
                        {
                            return 27;
                        }
                        let anonymous = libc::MAP_ANONYMOUS;
                        if !refused(map(libc::MAP_SHARED | anonymous))
                            || !refused(map(libc::MAP_SHARED_VALIDATE | anonymous))
                            || map(libc::MAP_PRIVATE | anonymous) != 0
                        {
                            return 23;
                        }
                        // A file it was handed, mapped shared.
                        let file = libc::open(c"/proc/self/exe".as_ptr(), libc::O_RDONLY);
                        if file < 0
                            || libc::mmap(
                                std::ptr::null_mut(),
                                4096,
                                libc::PROT_READ,
                                libc::MAP_SHARED,
                                file,
                                0,
                            ) == libc::MAP_FAILED
                        {
                            return 24;
                        }
                    }
                    0
                })();
                // SAFETY: leave the child without running the parent's destructors.
                unsafe { libc::_exit(code) };
            }
            let mut status = 0;
            // SAFETY: waiting for our own child.
            unsafe { libc::waitpid(pid, &raw mut status, 0) };
            assert!(libc::WIFEXITED(status), "status {status}");
            libc::WEXITSTATUS(status)
        }
        assert_eq!(
            in_child(true),
            0,
            "a CPU runner: see the codes in the child"
        );
        assert_eq!(
            in_child(false),
            0,
            "a GPU runner: see the codes in the child"
        );
    }
}
