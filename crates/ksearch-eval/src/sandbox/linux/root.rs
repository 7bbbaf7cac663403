//! The files a sandboxed program sees: with a mount namespace, a private root of read-only
//! system directories and its own `/tmp`, `/dev` and `/proc`; without one, the same plan as the
//! paths Landlock lets it read and write.

use std::ffi::CString;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use super::super::landlock;
use super::super::spec::SandboxSpec;
use super::{DEVICES, SYSTEM_PATHS, check, cpu_runner, cstr, err};

fn mount(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> Result<(), String> {
    let source_c = source.map(cstr);
    let target_c = cstr(target);
    let fstype_c = fstype.map(|f| CString::new(f).expect("no NUL"));
    let data_c = data.map(|d| CString::new(d).expect("no NUL"));
    // SAFETY: valid C strings or null pointers.
    let r = unsafe {
        libc::mount(
            source_c.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            target_c.as_ptr(),
            fstype_c.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            flags,
            data_c
                .as_ref()
                .map_or(std::ptr::null(), |s| s.as_ptr().cast()),
        )
    };
    check(
        r,
        &format!(
            "mounting {} on {}",
            source.map_or_else(
                || fstype.unwrap_or("-").to_owned(),
                |s| s.display().to_string()
            ),
            target.display()
        ),
    )
}

/// `target` under the new root.
pub(super) fn under(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// The flags a read-only remount of a bind mount must keep: a mount inherited from another
/// user namespace has its nosuid/nodev/noexec/atime flags locked, and a remount that drops them
/// is refused.
fn locked_flags(path: &Path) -> libc::c_ulong {
    let c = cstr(path);
    // SAFETY: statvfs fills the struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &raw mut st) } != 0 {
        return 0;
    }
    let f = st.f_flag;
    let mut flags = 0;
    for (st_flag, ms_flag) in [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if f & st_flag != 0 {
            flags |= ms_flag;
        }
    }
    flags
}

/// A host path to make visible inside, planned by the launcher before the namespaces exist.
#[derive(Debug)]
pub(super) struct Exposure {
    pub(super) host: PathBuf,
    kind: Kind,
    writable: bool,
    /// Mount flags a remount must keep (see `locked_flags`).
    locked: libc::c_ulong,
}

#[derive(Debug)]
enum Kind {
    Dir,
    File,
    Link(PathBuf),
}

/// Plan exposing `host` (following symbolic links to what they point at).
fn plan(host: &Path, writable: bool, out: &mut Vec<Exposure>) {
    if out.iter().any(|e| e.host == host) {
        return;
    }
    let Ok(meta) = std::fs::symlink_metadata(host) else {
        return;
    };
    if meta.file_type().is_symlink() {
        let Ok(to) = std::fs::read_link(host) else {
            return;
        };
        let resolved = if to.is_absolute() {
            to.clone()
        } else {
            host.parent().unwrap_or(Path::new("/")).join(&to)
        };
        out.push(Exposure {
            host: host.to_owned(),
            kind: Kind::Link(to),
            writable,
            locked: 0,
        });
        plan(&resolved, writable, out);
        return;
    }
    out.push(Exposure {
        host: host.to_owned(),
        kind: if meta.is_dir() { Kind::Dir } else { Kind::File },
        writable,
        locked: locked_flags(host),
    });
}

/// What Landlock lets a program without a private root use: what the root would have shown it,
/// its own directory (written), and its own entry of `/proc` with the few system files that
/// runtimes read there.
pub(super) fn fence(spec: &SandboxSpec, exposures: &[Exposure]) -> Vec<landlock::Grant> {
    let mut grants: Vec<landlock::Grant> = exposures
        .iter()
        .filter(|e| !matches!(e.kind, Kind::Link(_)))
        .map(|e| landlock::Grant {
            path: e.host.clone(),
            write: e.writable,
        })
        .collect();
    grants.push(landlock::Grant {
        path: spec.root_dir.clone(),
        write: true,
    });
    for p in [
        "/proc/self",
        "/proc/cpuinfo",
        "/proc/meminfo",
        "/proc/stat",
        "/sys/devices/system/cpu",
    ] {
        grants.push(landlock::Grant {
            path: std::fs::canonicalize(p).unwrap_or_else(|_| PathBuf::from(p)),
            write: false,
        });
    }
    grants
}

/// The working directory of a program without a private root: the spec's where it may write
/// anyway (the compiler's build directory), else its own directory, as its `TMPDIR` and `HOME`
/// are. Never another one: the fence would have to grant it, and the Python harness starts its
/// runners in `/tmp`, every user's (a runner read another program's secret there).
pub(super) fn fallback_cwd(spec: &SandboxSpec) -> &Path {
    if spec.writable.iter().any(|w| spec.cwd.starts_with(w)) {
        &spec.cwd
    } else {
        &spec.root_dir
    }
}

/// Everything the program will see, planned outside its namespaces.
pub(super) fn plan_all(spec: &SandboxSpec) -> Vec<Exposure> {
    let mut out = Vec::new();
    for p in SYSTEM_PATHS {
        plan(Path::new(p), false, &mut out);
    }
    for d in DEVICES {
        if *d == "zero" && cpu_runner(spec) {
            continue;
        }
        plan(&Path::new("/dev").join(d), true, &mut out);
    }
    if spec.gpu {
        for d in gpu_devices() {
            plan(&d, true, &mut out);
        }
        plan(Path::new("/sys"), false, &mut out);
    }
    for p in &spec.read_only {
        plan(p, false, &mut out);
    }
    for p in &spec.writable {
        plan(p, true, &mut out);
    }
    out
}

/// Make one planned path visible under `root`.
fn expose(root: &Path, e: &Exposure) -> Result<(), String> {
    let target = under(root, &e.host);
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|err_| err(&format!("creating {}", parent.display()), &err_))?;
    }
    match &e.kind {
        Kind::Link(to) => {
            if std::fs::symlink_metadata(&target).is_err() {
                symlink(to, &target)
                    .map_err(|er| err(&format!("linking {}", target.display()), &er))?;
            }
            return Ok(());
        }
        Kind::Dir => std::fs::create_dir_all(&target)
            .map_err(|er| err(&format!("creating {}", target.display()), &er))?,
        Kind::File => {
            if std::fs::symlink_metadata(&target).is_err() {
                File::create(&target)
                    .map_err(|er| err(&format!("creating {}", target.display()), &er))?;
            }
        }
    }
    mount(
        Some(&e.host),
        &target,
        None,
        libc::MS_BIND | libc::MS_REC,
        None,
    )?;
    let mut flags = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_NOSUID | e.locked;
    if !e.writable {
        flags |= libc::MS_RDONLY;
    }
    mount(None, &target, None, flags, None)
}

/// The GPU's device nodes: `/dev/nvidia*` and `/dev/dri`.
fn gpu_devices() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir("/dev")
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.as_bytes().starts_with(b"nvidia"))
                })
                .collect()
        })
        .unwrap_or_default();
    v.push(PathBuf::from("/dev/dri"));
    v.sort();
    v
}

pub(super) fn private_root(spec: &SandboxSpec, exposures: &[Exposure]) -> Result<(), String> {
    let root = spec.root_dir.as_path();
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )?;
    mount(
        Some(Path::new("tmpfs")),
        root,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some("size=4m,mode=755"),
    )?;
    let (dev_nodes, rest): (Vec<&Exposure>, Vec<&Exposure>) =
        exposures.iter().partition(|e| e.host.starts_with("/dev"));
    let (tmp_paths, system): (Vec<&Exposure>, Vec<&Exposure>) =
        rest.into_iter().partition(|e| e.host.starts_with("/tmp"));
    for e in &system {
        expose(root, e)?;
    }
    // /dev: a few nodes, shared memory, the standard links.
    let dev = root.join("dev");
    std::fs::create_dir_all(&dev).map_err(|e| err("creating /dev", &e))?;
    mount(
        Some(Path::new("tmpfs")),
        &dev,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some("size=64k,mode=755"),
    )?;
    for e in &dev_nodes {
        expose(root, e)?;
    }
    for (link, to) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        let _ = symlink(to, dev.join(link));
    }
    let shm = dev.join("shm");
    std::fs::create_dir_all(&shm).map_err(|e| err("creating /dev/shm", &e))?;
    mount(
        Some(Path::new("tmpfs")),
        &shm,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some("size=64m,mode=1777"),
    )?;
    // The private /tmp, then what the spec exposes (some of it may lie under /tmp).
    let tmp = root.join("tmp");
    std::fs::create_dir_all(&tmp).map_err(|e| err("creating /tmp", &e))?;
    mount(
        Some(Path::new("tmpfs")),
        &tmp,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some(&format!("size={},mode=1777", spec.tmp_bytes.max(1 << 20))),
    )?;
    for e in &tmp_paths {
        expose(root, e)?;
    }
    let proc_dir = root.join("proc");
    std::fs::create_dir_all(&proc_dir).map_err(|e| err("creating /proc", &e))?;
    mount(
        Some(Path::new("proc")),
        &proc_dir,
        Some("proc"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
    )?;
    // Swap roots and forget the old one.
    let old = root.join(".old-root");
    std::fs::create_dir_all(&old).map_err(|e| err("creating the old-root mount point", &e))?;
    let (root_c, old_c) = (cstr(root), cstr(&old));
    // SAFETY: pivot_root with valid paths.
    check(
        unsafe { libc::syscall(libc::SYS_pivot_root, root_c.as_ptr(), old_c.as_ptr()) } as i32,
        "pivot_root",
    )?;
    std::env::set_current_dir("/").map_err(|e| err("chdir /", &e))?;
    // SAFETY: detaching a mount point we own.
    check(
        unsafe { libc::umount2(c"/.old-root".as_ptr(), libc::MNT_DETACH) },
        "unmounting the old root",
    )?;
    let _ = std::fs::remove_dir("/.old-root");
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV,
        None,
    )?;
    std::env::set_current_dir(&spec.cwd)
        .map_err(|e| err(&format!("chdir {}", spec.cwd.display()), &e))
}
