//! What the `c` judge and its runners share: the messages they exchange over a socket pair, the
//! layout of the tensors in shared memory, and the control page whose doorbell starts and ends
//! a timed batch without a system call on the timed path.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64};

use serde::{Deserialize, Serialize};

/// Where the runner finds its socket.
pub(crate) const RUNNER_SOCKET_FD: RawFd = 3;
/// Bytes of a guard zone before and after every output tensor.
pub(crate) const GUARD: usize = 64;
pub(crate) const GUARD_BYTE: u8 = 0xA5;
pub(crate) const POISON_BYTE: u8 = 0xFF;
const ALIGN: usize = 64;
/// Largest message; a runner that sends more is broken or hostile.
const MAX_MESSAGE: usize = 1 << 18;

/// Judge → runner.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum ToRunner {
    /// Load a kernel (the path of a shared object built for the task); with `describe`, call
    /// its `ksearch_describe` too (a task's own implementation).
    Load {
        path: PathBuf,
        #[serde(default)]
        describe: bool,
    },
    /// Map a pool (descriptors: inputs read-only, this runner's outputs read-write).
    Pool {
        id: u32,
        axes: Vec<i64>,
        layout: Layout,
    },
    DropPool {
        id: u32,
    },
    /// Call the kernel once on each of these sets, then answer `Done`.
    Call {
        pool: u32,
        sets: Vec<u32>,
    },
    /// A timed batch on the `count` sets listed in the control region: set `armed` to `seq`,
    /// wait for `go` to reach `seq` (spinning a little when the judge and the runner have CPUs
    /// of their own), call the kernel on each set, answer `Done` at once. The judge's clock runs
    /// from its `go` to the kernel's timestamp of that answer.
    Arm {
        pool: u32,
        count: u32,
        seq: u32,
        spin: bool,
    },
}

/// Runner → judge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum FromRunner {
    Ready,
    /// The kernel is loaded; what it says it runs, when asked and it says.
    Loaded {
        description: Option<String>,
    },
    /// A pool is mapped; its inputs at this address (so a fault address can be placed).
    Mapped {
        inputs: u64,
    },
    Done,
    Failed {
        message: String,
    },
}

/// Where each tensor of each set lies: inputs in one region all runners share read-only,
/// outputs in each runner's own region, with a guard zone before and after each.
///
/// Every input ends within 64 bytes of a guard page (mapped with no access in the judge and in
/// every runner), so a kernel that reads past the end of an input faults instead of reading the
/// next tensor; the few bytes between an input's end and its guard page hold NaN (all bits set).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Layout {
    pub(crate) sets: usize,
    /// Bytes of each input and output tensor.
    pub(crate) input_sizes: Vec<usize>,
    pub(crate) output_sizes: Vec<usize>,
    /// The page size input guards are made of (the judge's, which its runners share).
    pub(crate) page: usize,
}

fn align(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

/// This machine's page size.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page)
        .ok()
        .filter(|&p| p >= ALIGN)
        .unwrap_or(4096)
}

impl Layout {
    /// The layout of `sets` sets of tensors of these sizes, with this machine's page size.
    pub(crate) fn new(sets: usize, input_sizes: Vec<usize>, output_sizes: Vec<usize>) -> Self {
        Self {
            sets,
            input_sizes,
            output_sizes,
            page: page_size(),
        }
    }

    /// Bytes of input `t`'s block: its data, rounded up to whole pages, then its guard page.
    fn input_block(&self, t: usize) -> usize {
        self.input_pages(t) + self.page
    }

    /// Bytes of whole pages input `t`'s data lies in (at their end).
    fn input_pages(&self, t: usize) -> usize {
        align(self.input_sizes[t].max(1)).div_ceil(self.page) * self.page
    }

    fn input_stride(&self) -> usize {
        (0..self.input_sizes.len())
            .map(|t| self.input_block(t))
            .sum()
    }

    fn output_stride(&self) -> usize {
        self.output_sizes
            .iter()
            .map(|&b| GUARD + align(b.max(1)) + GUARD)
            .sum()
    }

    pub(crate) fn input_region(&self) -> usize {
        self.input_stride() * self.sets
    }

    pub(crate) fn output_region(&self) -> usize {
        self.output_stride() * self.sets
    }

    /// Byte offset of input `t`'s block in set `s`.
    fn input_block_at(&self, s: usize, t: usize) -> usize {
        s * self.input_stride() + (0..t).map(|u| self.input_block(u)).sum::<usize>()
    }

    /// Byte offset of input `t` of set `s`: 64-byte aligned, less than 64 bytes before a guard
    /// page.
    pub(crate) fn input(&self, s: usize, t: usize) -> usize {
        self.input_block_at(s, t) + self.input_pages(t) - align(self.input_sizes[t].max(1))
    }

    /// The guard page after input `t` of set `s`: (offset, length).
    pub(crate) fn input_guard(&self, s: usize, t: usize) -> (usize, usize) {
        (self.input_block_at(s, t) + self.input_pages(t), self.page)
    }

    /// Every input guard page of every set: (offset, length, input).
    pub(crate) fn input_guards(&self) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
        (0..self.sets).flat_map(move |s| {
            (0..self.input_sizes.len()).map(move |t| {
                let (off, len) = self.input_guard(s, t);
                (off, len, t)
            })
        })
    }

    /// The bytes between the end of input `t` of set `s` and its guard page.
    pub(crate) fn input_slack(&self, s: usize, t: usize) -> std::ops::Range<usize> {
        self.input(s, t) + self.input_sizes[t]..self.input_guard(s, t).0
    }

    /// Byte offset of output `t`'s data in slot `s` (its guards lie just before and after).
    pub(crate) fn output(&self, s: usize, t: usize) -> usize {
        s * self.output_stride()
            + self.output_sizes[..t]
                .iter()
                .map(|&b| GUARD + align(b.max(1)) + GUARD)
                .sum::<usize>()
            + GUARD
    }

    /// Every guard zone of slot `s`: (offset, length).
    pub(crate) fn guards(&self, s: usize) -> Vec<(usize, usize)> {
        (0..self.output_sizes.len())
            .flat_map(|t| {
                let data = self.output(s, t);
                let size = align(self.output_sizes[t].max(1));
                [
                    (data - GUARD, GUARD),
                    (
                        data + self.output_sizes[t],
                        size - self.output_sizes[t] + GUARD,
                    ),
                ]
            })
            .collect()
    }
}

/// The control page: the judge rings `go` (and `bell`, which a sleeping runner sleeps on), the
/// runner answers `armed`. Each field on its own cache line, so neither side's writes slow the
/// other's reads. The sets of a timed batch follow the page (`BATCH_OFFSET`).
#[repr(C, align(64))]
#[derive(Debug)]
pub(crate) struct Control {
    pub(crate) go: AtomicU32,
    _pad0: [u8; 60],
    pub(crate) armed: AtomicU32,
    _pad1: [u8; 60],
    /// Bumped by the judge with every `go`, and to ask a sleeping runner to spin again.
    pub(crate) bell: AtomicU32,
    _pad2: [u8; 60],
    /// Set by the runner's fault handler: the address of an invalid access, with `fault` = 1.
    pub(crate) fault: AtomicU32,
    pub(crate) fault_addr: AtomicU64,
}

/// The most calls in one timed batch.
pub(crate) const MAX_BATCH: usize = 8192;
/// Where a timed batch's set numbers (`u32`s) lie in the control region.
pub(crate) const BATCH_OFFSET: usize = 4096;
pub(crate) const CONTROL_BYTES: usize = BATCH_OFFSET + 4 * MAX_BATCH;

/// `SO_TIMESTAMPNS`: the kernel stamps each message with the time it was sent.
const SO_TIMESTAMPNS: libc::c_int = 35;

/// Ask the kernel to stamp every message this socket receives with its send time.
pub(crate) fn stamp_messages(sock: BorrowedFd<'_>) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt with a valid int.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_TIMESTAMPNS,
            (&raw const on).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Now, on the clock the kernel stamps messages with (nanoseconds since the epoch).
pub(crate) fn now_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

/// In `armed`: the runner stopped spinning and sleeps until `bell` rings. The judge starts its
/// clock only while the runner spins, so that no wake-up latency lands in a timed batch; when
/// it finds the runner asleep, it rings `bell` without `go` to make it spin again.
pub(crate) const SLEEPING: u32 = 1 << 31;
/// Batch numbers use the other bits.
pub(crate) const SEQ_MASK: u32 = SLEEPING - 1;
const _: () = assert!(std::mem::size_of::<Control>() <= BATCH_OFFSET);

/// Send one message with descriptors attached.
pub(crate) fn send<T: Serialize>(
    sock: BorrowedFd<'_>,
    msg: &T,
    fds: &[BorrowedFd<'_>],
) -> io::Result<()> {
    let bytes = serde_json::to_vec(msg).map_err(io::Error::other)?;
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr().cast_mut().cast(),
        iov_len: bytes.len(),
    };
    let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of_val(raw.as_slice()) as u32) } as usize;
    let mut cbuf = vec![0u64; space.div_ceil(8).max(1)];
    // SAFETY: a zeroed msghdr is valid; the pointers below outlive the sendmsg call.
    let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
    hdr.msg_iov = &raw mut iov;
    hdr.msg_iovlen = 1;
    if !raw.is_empty() {
        hdr.msg_control = cbuf.as_mut_ptr().cast();
        hdr.msg_controllen = space as _;
        // SAFETY: the control buffer has room for one header with `raw.len()` fds.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&raw const hdr);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of_val(raw.as_slice()) as u32) as _;
            std::ptr::copy_nonoverlapping(
                raw.as_ptr(),
                libc::CMSG_DATA(c).cast::<RawFd>(),
                raw.len(),
            );
        }
    }
    loop {
        // SAFETY: a valid msghdr for this socket.
        let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &raw const hdr, libc::MSG_NOSIGNAL) };
        if n >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Receive one message and the descriptors attached to it; `Ok(None)` when the peer is gone.
pub(crate) fn recv<T: for<'de> Deserialize<'de>>(
    sock: BorrowedFd<'_>,
) -> io::Result<Option<(T, Vec<OwnedFd>)>> {
    Ok(recv_stamped(sock)?.map(|(m, fds, _)| (m, fds)))
}

/// A message, the descriptors it carried, and the kernel's stamp of when it was sent.
pub(crate) type Stamped<T> = (T, Vec<OwnedFd>, Option<i128>);

/// Like [`recv`], with the kernel's stamp of when the message was sent (nanoseconds since the
/// epoch), where the socket asked for stamps ([`stamp_messages`]).
pub(crate) fn recv_stamped<T: for<'de> Deserialize<'de>>(
    sock: BorrowedFd<'_>,
) -> io::Result<Option<Stamped<T>>> {
    let mut buf = vec![0u8; MAX_MESSAGE];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut cbuf = vec![0u64; 64];
    // SAFETY: a zeroed msghdr is valid; the pointers outlive recvmsg.
    let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
    hdr.msg_iov = &raw mut iov;
    hdr.msg_iovlen = 1;
    hdr.msg_control = cbuf.as_mut_ptr().cast();
    hdr.msg_controllen = (cbuf.len() * 8) as _;
    let n = loop {
        // SAFETY: as above.
        let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &raw mut hdr, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    let mut fds = Vec::new();
    let mut stamp = None;
    // SAFETY: walking the control messages the kernel wrote into `cbuf`.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&raw const hdr);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == SO_TIMESTAMPNS {
                let ts = libc::CMSG_DATA(c).cast::<libc::timespec>().read_unaligned();
                stamp = Some(i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec));
            }
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c).cast::<RawFd>();
                let count = ((*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize)
                    / std::mem::size_of::<RawFd>();
                for i in 0..count {
                    fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                }
            }
            c = libc::CMSG_NXTHDR(&raw const hdr, c);
        }
    }
    if n == 0 {
        return Ok(None);
    }
    if hdr.msg_flags & libc::MSG_TRUNC != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a message too long",
        ));
    }
    let msg = serde_json::from_slice(&buf[..n])
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    Ok(Some((msg, fds, stamp)))
}

/// A connected pair of sequenced-packet sockets (message boundaries kept).
pub(crate) fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: socketpair fills the array.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh descriptors.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn layout_keeps_tensors_apart_and_aligned() {
        let l = Layout {
            sets: 3,
            input_sizes: vec![100, 8, 4096],
            output_sizes: vec![36, 200],
            page: 4096,
        };
        assert_eq!(l.input_region() % 4096, 0);
        for s in 0..3 {
            for t in 0..3 {
                // Aligned, and ending less than 64 bytes before its guard page.
                assert_eq!(l.input(s, t) % 64, 0);
                let (guard, len) = l.input_guard(s, t);
                assert_eq!((guard % 4096, len), (0, 4096));
                let end = l.input(s, t) + l.input_sizes[t];
                assert!(end <= guard && guard - end < 64, "input {t} ends at {end}");
                assert_eq!(l.input_slack(s, t), end..guard);
                assert!(guard + len <= l.input_region());
                if t + 1 < 3 {
                    assert!(guard + len <= l.input(s, t + 1));
                }
            }
            for t in 0..2 {
                assert_eq!(l.output(s, t) % 64, 0);
            }
            assert!(l.output(s, 0) + 36 + GUARD <= l.output(s, 1));
            for (off, len) in l.guards(s) {
                assert!(off + len <= l.output_region());
                for t in 0..2 {
                    let (a, b) = (l.output(s, t), l.output(s, t) + l.output_sizes[t]);
                    assert!(off + len <= a || off >= b, "a guard overlaps output {t}");
                }
            }
        }
        assert_eq!(l.input_guards().count(), 9);
    }

    #[test]
    fn messages_carry_descriptors() {
        let (a, b) = socket_pair().unwrap();
        let (r, _w) = std::io::pipe().unwrap();
        let r: OwnedFd = r.into();
        send(a.as_fd(), &FromRunner::Done, &[r.as_fd()]).unwrap();
        let (m, fds): (FromRunner, _) = recv(b.as_fd()).unwrap().unwrap();
        assert_eq!(m, FromRunner::Done);
        assert_eq!(fds.len(), 1);
        drop(a);
        assert!(recv::<FromRunner>(b.as_fd()).unwrap().is_none());
    }
}

#[cfg(test)]
mod stamp_tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_message_carries_the_time_it_was_sent() {
        let (a, b) = socket_pair().unwrap();
        stamp_messages(b.as_fd()).unwrap();
        let sent = now_ns();
        send(a.as_fd(), &FromRunner::Done, &[]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let (_, _, stamp) = recv_stamped::<FromRunner>(b.as_fd()).unwrap().unwrap();
        let stamp = stamp.expect("stamped");
        // Stamped when sent, not when received 30 ms later.
        assert!(
            (stamp - sent).abs() < 10_000_000,
            "{} µs",
            (stamp - sent) / 1000
        );
    }
}
