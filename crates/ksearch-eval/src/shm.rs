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
    /// A new zero-filled region of `len` bytes, mapped read-write.
    pub(crate) fn create(name: &str, len: usize) -> io::Result<Self> {
        let file = anonymous_file(name)?;
        file.set_len(len.max(1) as u64)?;
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
    /// it, but never writably.
    pub(crate) fn read_only_fd(&self) -> io::Result<OwnedFd> {
        reopen_read_only(&self.file)
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
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
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
}
