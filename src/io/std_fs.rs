//! The real file system: std files, fs4 advisory locks, memmap2 read views, and metadata
//! probes that never ask for a file's times ([`Probe`]).
//!
//! This is the only module of the crate with `unsafe` code (creating a memory map, and the
//! `statx` call of [`Probe`]).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use super::{Descriptors, Fs, FsFile, OpenMode, Shared};

/// The operating system's file system.
#[derive(Clone, Copy, Debug, Default)]
pub struct StdFs;

/// An open file, and its (device, inode) once asked ([`FsFile::is_at`]).
#[derive(Debug)]
struct StdFile(File, std::sync::OnceLock<((u32, u32), u64)>);

/// Most descriptors of files that no longer change the process keeps open at once
/// ([`Descriptors`]): one set for the process, as the limit on descriptors is per process.
const IDLE_DESCRIPTORS_MAX: usize = 64;

impl Fs for StdFs {
    fn identity_at(&self, path: &Path) -> io::Result<(u64, u64)> {
        probe_path(path).map(|p| identity(p.id()))
    }

    fn shared(&self) -> Option<Shared> {
        static SHARED: std::sync::OnceLock<Shared> = std::sync::OnceLock::new();
        let shared = SHARED.get_or_init(|| Shared {
            fs: Arc::new(StdFs),
            descriptors: Arc::new(Descriptors::new(IDLE_DESCRIPTORS_MAX)),
        });
        Some(shared.clone())
    }

    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn FsFile>> {
        let mut o = OpenOptions::new();
        match mode {
            OpenMode::Read => o.read(true),
            OpenMode::ReadWrite => o.read(true).write(true),
            OpenMode::CreateNew => o.read(true).write(true).create_new(true),
            OpenMode::CreateTruncate => o.read(true).write(true).create(true).truncate(true),
        };
        Ok(Arc::new(StdFile(o.open(path)?, std::sync::OnceLock::new())))
    }

    fn create_dir(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir(path)
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(path)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        File::open(path)?.sync_all()
    }

    fn available_space(&self, path: &Path) -> io::Result<u64> {
        fs4::available_space(path)
    }

    fn is_dir(&self, path: &Path) -> io::Result<bool> {
        match probe_path(path) {
            Ok(m) => Ok(m.is_dir),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
}

impl StdFile {
    /// Its (device, inode), asked once.
    fn id(&self) -> io::Result<((u32, u32), u64)> {
        if let Some(id) = self.1.get() {
            return Ok(*id);
        }
        let id = probe_file(&self.0)?.id();
        Ok(*self.1.get_or_init(|| id))
    }
}

/// A (device, inode) pair as one identity ([`FsFile::identity`]).
fn identity(((major, minor), ino): ((u32, u32), u64)) -> (u64, u64) {
    ((u64::from(major) << 32) | u64::from(minor), ino)
}

impl FsFile for StdFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.0.read_at(buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_all_at(buf, offset)
    }

    fn len(&self) -> io::Result<u64> {
        Ok(probe_file(&self.0)?.size)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }

    fn sync_all(&self) -> io::Result<()> {
        self.0.sync_all()
    }

    fn try_lock(&self) -> io::Result<bool> {
        match fs4::FileExt::try_lock(&self.0) {
            Ok(()) => Ok(true),
            Err(fs4::TryLockError::WouldBlock) => Ok(false),
            Err(fs4::TryLockError::Error(e)) => Err(e),
        }
    }

    fn unlock(&self) -> io::Result<()> {
        fs4::FileExt::unlock(&self.0)
    }

    fn map(&self, len: u64) -> io::Result<Bytes> {
        self.map_range(0, len)
    }

    #[allow(unsafe_code)] // the one memory map of the crate; see the SAFETY note
    fn map_range(&self, offset: u64, len: u64) -> io::Result<Bytes> {
        if len == 0 {
            return Ok(Bytes::new());
        }
        let len = usize::try_from(len).map_err(|_| io::Error::other("map length overflows"))?;
        // SAFETY: runlog maps at most up to a file's length and only ever touches mapped
        // bytes below a segment's committed length (a view is sliced to it, `Segment::view`),
        // and committed bytes are never rewritten or truncated by any runlog process
        // (recovery truncates only past the last valid batch, which is at or beyond the
        // committed length; a zero-fill cut back after a failed write, past it too). The map
        // is read-only and outlives no borrow: `Bytes::from_owner` keeps it alive. memmap2
        // maps from the page `offset` lies in and hands out the bytes from `offset` on.
        let map = unsafe {
            memmap2::MmapOptions::new()
                .offset(offset)
                .len(len)
                .map(&self.0)?
        };
        Ok(Bytes::from_owner(map))
    }

    /// A shared map: bytes written after it was taken, through any descriptor, show in it.
    fn maps_are_live(&self) -> bool {
        true
    }

    fn is_unlinked(&self) -> io::Result<bool> {
        Ok(probe_file(&self.0)?.nlink == 0)
    }

    fn identity(&self) -> io::Result<(u64, u64)> {
        self.id().map(identity)
    }

    fn is_at(&self, path: &Path) -> io::Result<bool> {
        let mine = self.id()?;
        match probe_path(path) {
            Ok(m) => Ok(m.id() == mine),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// What runlog asks of a file's metadata: its type, links, inode, device and size — never its
/// times.
///
/// Why never the times: on Linux 6.13 and later, file systems with multigrain timestamps
/// (ext4, xfs, btrfs, tmpfs) mark an inode's ctime as *queried* when a stat asks for its ctime
/// or mtime (std's `metadata` asks for everything), and the next write to that file then takes
/// a fine-grained time and dirties the inode instead of reusing the coarse one. The commit path
/// checks the lock file every commit (a deleted run, [`FsFile::is_at`]) and writes a commit
/// slot into it; with a querying stat each of those writes dirtied the inode table block, and
/// every segment `fdatasync` wrote that block too: 2.0 device writes per commit instead of 1.0
/// and the `fdatasync` ~40% slower (BENCHMARKS.md, *The commit path: stat without times*).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    /// The device's major and minor numbers (on systems other than Linux, the high and low
    /// halves of `st_dev`).
    pub dev: (u32, u32),
    /// The inode number.
    pub ino: u64,
    /// Hard links (0: unlinked while open).
    pub nlink: u64,
    /// Length in bytes.
    pub size: u64,
    /// Whether it is a directory.
    pub is_dir: bool,
}

impl Probe {
    /// (device, inode): the file's identity.
    fn id(&self) -> ((u32, u32), u64) {
        (self.dev, self.ino)
    }
}

/// [`Probe`] of the file at `path` (symlinks followed).
///
/// # Errors
/// The `statx` error (`NotFound` for a missing file).
pub fn probe_path(path: &Path) -> io::Result<Probe> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
        statx_no_times(libc::AT_FDCWD, &c, 0)
    }
    #[cfg(not(target_os = "linux"))]
    std::fs::metadata(path).map(Probe::from)
}

/// [`Probe`] of an open file.
///
/// # Errors
/// The `statx` error.
pub fn probe_file(file: &File) -> io::Result<Probe> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        statx_no_times(file.as_raw_fd(), c"", libc::AT_EMPTY_PATH)
    }
    #[cfg(not(target_os = "linux"))]
    file.metadata().map(Probe::from)
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)] // one statx call into a zeroed buffer; see the SAFETY note
fn statx_no_times(
    dirfd: libc::c_int,
    path: &std::ffi::CStr,
    flags: libc::c_int,
) -> io::Result<Probe> {
    let mask = libc::STATX_TYPE | libc::STATX_NLINK | libc::STATX_INO | libc::STATX_SIZE;
    let mut sx = std::mem::MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: `path` is NUL-terminated and outlives the call; `sx` is a valid, writable
    // `statx` buffer the kernel fills (it was zeroed, so every field is initialised even
    // where the kernel writes none).
    let (r, sx) = unsafe {
        let r = libc::statx(
            dirfd,
            path.as_ptr(),
            flags | libc::AT_STATX_SYNC_AS_STAT,
            mask,
            sx.as_mut_ptr(),
        );
        (r, sx.assume_init())
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Probe {
        dev: (sx.stx_dev_major, sx.stx_dev_minor),
        ino: sx.stx_ino,
        nlink: u64::from(sx.stx_nlink),
        size: sx.stx_size,
        is_dir: u32::from(sx.stx_mode) & libc::S_IFMT == libc::S_IFDIR,
    })
}

/// Elsewhere: std's metadata (no multigrain timestamps to keep unqueried).
#[cfg(not(target_os = "linux"))]
impl From<std::fs::Metadata> for Probe {
    fn from(m: std::fs::Metadata) -> Probe {
        use std::os::unix::fs::MetadataExt;
        let dev = m.dev() as u64;
        Probe {
            dev: ((dev >> 32) as u32, dev as u32),
            ino: m.ino(),
            nlink: m.nlink(),
            size: m.len(),
            is_dir: m.is_dir(),
        }
    }
}
