//! Memory shared between a judge and a runner: a file with no name (a memfd on Linux, an
//! unlinked temporary file elsewhere) mapped by both. The judge maps it read-write; a runner gets
//! a read-only descriptor for inputs, so it cannot change what the judge will check against.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

/// A shared mapping of a whole file.
#[derive(Debug)]
pub(crate) struct Shared {
    file: File,
    ptr: *mut u8,
    len: usize,
    writable: bool,
}

// SAFETY: the mapping is owned by this value; synchronisation with the other process is the
// caller's business (atomics or a message round trip).
unsafe impl Send for Shared {}

impl Shared {
    /// A new zero-filled region of `len` bytes, mapped read-write. Its size is sealed: a runner
    /// handed a writable descriptor (its outputs, its control page) could otherwise truncate
    /// the file, and the judge would die of SIGBUS reading its own mapping.
    pub(crate) fn create(name: &str, len: usize) -> io::Result<Self> {
        let file = anonymous_file(name)?;
        file.set_len(len.max(1) as u64)?;
        seal_size(&file)?;
        Self::map(file, len, true)
    }

    /// Map `file` (`len` bytes) shared, read-write or read-only.
    pub(crate) fn map(file: File, len: usize, writable: bool) -> io::Result<Self> {
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        // SAFETY: mapping a file we own; the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len.max(1),
                prot,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            file,
            ptr: ptr.cast(),
            len,
            writable,
        })
    }

    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// A new descriptor of the same file that only allows reading: a process given it can map
    /// it, but never writably, and (once [`Shared::seal`]ed) cannot reopen it writable either.
    pub(crate) fn read_only_fd(&self) -> io::Result<OwnedFd> {
        reopen_read_only(&self.file)
    }

    /// From now on only this mapping can write the file: no new writable mapping and no
    /// `write` through any descriptor, however it was opened (a runner could otherwise reopen
    /// its read-only descriptor writable through `/proc/self/fd`), and its size is fixed.
    pub(crate) fn seal(&self) -> io::Result<()> {
        seal_writers(&self.file)
    }

    /// A descriptor of the same file, read-write.
    pub(crate) fn fd(&self) -> io::Result<OwnedFd> {
        self.file.as_fd().try_clone_to_owned()
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is `len` bytes long and lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        assert!(self.writable, "a read-only mapping");
        // SAFETY: as above, and the mapping is writable.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Shared {
    /// Bytes `range` of the mapping, writable, without making a reference to the rest (which
    /// may hold pages with no access: input guards).
    pub(crate) fn slice_mut(&mut self, range: std::ops::Range<usize>) -> &mut [u8] {
        assert!(self.writable, "a read-only mapping");
        assert!(range.start <= range.end && range.end <= self.len);
        // SAFETY: inside the writable mapping, borrowed mutably through `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(range.start), range.len()) }
    }

    /// Make `len` bytes at `offset` (both whole pages) inaccessible in this mapping: any access
    /// faults.
    pub(crate) fn no_access(&self, offset: usize, len: usize) -> io::Result<()> {
        assert!(offset + len <= self.len);
        // SAFETY: a page range inside this mapping; nothing in this process references it.
        let r = unsafe { libc::mprotect(self.ptr.add(offset).cast(), len, libc::PROT_NONE) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: unmapping what `map` mapped.
        unsafe { libc::munmap(self.ptr.cast(), self.len.max(1)) };
    }
}

#[cfg(target_os = "linux")]
fn anonymous_file(name: &str) -> io::Result<File> {
    use std::os::fd::FromRawFd;
    let name = std::ffi::CString::new(name).expect("no NUL");
    // SAFETY: memfd_create with a valid name; the fd is checked and then owned.
    let fd =
        unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nobody else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

#[cfg(not(target_os = "linux"))]
fn anonymous_file(name: &str) -> io::Result<File> {
    // Created, opened and unlinked at once: only descriptors reach it.
    let _ = name;
    tempfile::tempfile()
}

/// No descriptor can shrink or grow the file from now on.
#[cfg(target_os = "linux")]
fn seal_size(file: &File) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor we own.
    if unsafe {
        libc::fcntl(
            file.as_raw_fd(),
            libc::F_ADD_SEALS,
            libc::F_SEAL_GROW | libc::F_SEAL_SHRINK,
        )
    } != 0
    {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn seal_size(_file: &File) -> io::Result<()> {
    // No memfd seals: a runner's descriptor of an unlinked file can resize it (docs/sandbox.md).
    Ok(())
}

/// `F_SEAL_FUTURE_WRITE` (Linux 5.1): writable mappings made before it keep working.
#[cfg(target_os = "linux")]
fn seal_writers(file: &File) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    const F_SEAL_FUTURE_WRITE: libc::c_int = 0x0010;
    let seals = F_SEAL_FUTURE_WRITE | libc::F_SEAL_GROW | libc::F_SEAL_SHRINK | libc::F_SEAL_SEAL;
    // SAFETY: fcntl on a descriptor we own.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // Readable by its owner only, as well: another uid cannot even open it.
    file.set_permissions(std::fs::Permissions::from_mode(0o400))
}

#[cfg(not(target_os = "linux"))]
fn seal_writers(_file: &File) -> io::Result<()> {
    // No memfd seals: the runner maps the file read-only itself (docs/sandbox.md says so).
    Ok(())
}

#[cfg(target_os = "linux")]
fn reopen_read_only(file: &File) -> io::Result<OwnedFd> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .open(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
    Ok(f.into())
}

#[cfg(not(target_os = "linux"))]
fn reopen_read_only(file: &File) -> io::Result<OwnedFd> {
    // Without /proc there is no way to reopen an unlinked file read-only; the runner maps it
    // read-only, which protects against mistakes but not against a hostile runner. The docs
    // say so (docs/sandbox.md).
    file.as_fd().try_clone_to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_only_descriptor_cannot_be_mapped_writable() {
        let mut s = Shared::create("t", 4096).unwrap();
        s.bytes_mut()[7] = 42;
        let ro = File::from(s.read_only_fd().unwrap());
        let view = Shared::map(ro.try_clone().unwrap(), 4096, false).unwrap();
        assert_eq!(view.bytes()[7], 42);
        s.bytes_mut()[8] = 43;
        assert_eq!(view.bytes()[8], 43, "both map the same memory");
        #[cfg(target_os = "linux")]
        assert!(
            Shared::map(ro, 4096, true).is_err(),
            "a read-only descriptor must not map writable"
        );
    }

    /// What a hostile runner holding a writable descriptor (its outputs, its control page)
    /// tries: truncate the file, so that the judge faults reading its own mapping, or grow it.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_created_file_cannot_be_resized() {
        let mut s = Shared::create("t", 4096).unwrap();
        let theirs = File::from(s.fd().unwrap());
        let reopened = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/proc/self/fd/{}", theirs.as_raw_fd()))
            .unwrap();
        for f in [&theirs, &reopened] {
            for len in [0, 100, 8192, 1 << 30] {
                let e = f.set_len(len).expect_err("the size is sealed");
                assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{len}: {e}");
            }
        }
        s.bytes_mut()[4095] = 7;
        assert_eq!(
            s.bytes()[4095],
            7,
            "the judge still reads its whole mapping"
        );
    }

    /// What a hostile runner holding the read-only descriptor tries: reopen it writable through
    /// `/proc/self/fd`, write through it, map it writable. After `seal` all fail, and the judge's
    /// own mapping still writes.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_sealed_file_cannot_be_reopened_writable() {
        use std::io::Write;
        let mut s = Shared::create("t", 4096).unwrap();
        let ro = File::from(s.read_only_fd().unwrap());
        let reopen = || {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(format!("/proc/self/fd/{}", ro.as_raw_fd()))
        };
        let before = reopen().expect("an unsealed memfd reopens writable (the hole)");
        drop(before);
        s.seal().unwrap();
        s.bytes_mut()[9] = 44;
        let view = Shared::map(ro.try_clone().unwrap(), 4096, false).unwrap();
        assert_eq!(view.bytes()[9], 44, "the judge's mapping still writes");
        match reopen() {
            // Root passes the permission bits: the seals must hold anyway.
            Ok(mut f) => {
                assert!(
                    f.write_all(b"x").is_err(),
                    "a write through a reopened descriptor"
                );
                assert!(
                    Shared::map(f, 4096, true).is_err(),
                    "a writable mapping of a reopened descriptor"
                );
            }
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}"),
        }
        assert_eq!(view.bytes()[0], 0);
    }
}
