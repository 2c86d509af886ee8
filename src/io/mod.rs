//! The file-system seam: every byte runlog reads or writes goes through [`Fs`] and [`FsFile`].
//!
//! [`StdFs`] is the real implementation (std + memmap2 + fs4 advisory locks). With the `sim`
//! cargo feature, `sim::SimFs` is a crash-prone in-memory file system that keeps live and
//! durable images of every file, used by the crash tests and fuzz targets.

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

mod pool;
mod std_fs;
pub use pool::{Descriptors, Sameness, Shared};
pub(crate) use pool::{Recent, idle};
pub use std_fs::{Probe, StdFs, probe_file, probe_path};

#[cfg(feature = "sim")]
pub mod sim;

/// How [`Fs::open`] opens a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// Existing file, read only.
    Read,
    /// Existing file, read and write.
    ReadWrite,
    /// New file (read/write); fails with `AlreadyExists` if present.
    CreateNew,
    /// Create or truncate to zero length (read/write).
    CreateTruncate,
}

/// A file system: directories and files by path.
pub trait Fs: Send + Sync + fmt::Debug + 'static {
    /// Opens `path` in `mode`. Missing files give `io::ErrorKind::NotFound`.
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn FsFile>>;
    /// Creates one directory; `AlreadyExists` if present.
    fn create_dir(&self, path: &Path) -> io::Result<()>;
    /// Atomically renames a file or directory (replacing a file at `to`).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Removes an empty directory.
    fn remove_dir(&self, path: &Path) -> io::Result<()>;
    /// Names of the entries of a directory, unsorted.
    fn read_dir(&self, path: &Path) -> io::Result<Vec<String>>;
    /// Makes the directory's entries durable (fsync of the directory).
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
    /// Whether `path` exists and is a directory.
    fn is_dir(&self, path: &Path) -> io::Result<bool>;
    /// Bytes available to this user on the file system holding `path` (`statvfs`). Used only
    /// to decide whether to preallocate; the default (a simulated file system) is unlimited.
    fn available_space(&self, path: &Path) -> io::Result<u64> {
        let _ = path;
        Ok(u64::MAX)
    }
    /// The identity ([`FsFile::identity`]) of the file at `path`, without opening it. The
    /// default: not known (`Unsupported`).
    fn identity_at(&self, path: &Path) -> io::Result<(u64, u64)> {
        let _ = path;
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this file system does not tell files apart",
        ))
    }
    /// Waits `d` before the store looks at the files again: the window of a race to close (a
    /// delete and re-create swapping a run's directory), a tail in flux to settle. The
    /// default sleeps.
    fn sleep(&self, d: std::time::Duration) {
        std::thread::sleep(d);
    }
    /// This file system shared, with the set that files which no longer change keep their
    /// descriptors in while idle ([`pool`](Shared)). `None` (the default): such files keep
    /// their own descriptors open.
    fn shared(&self) -> Option<Shared> {
        None
    }
}

/// An open file.
#[allow(clippy::len_without_is_empty)] // `len` is fallible I/O; an `is_empty` would only repeat it
pub trait FsFile: Send + Sync + fmt::Debug {
    /// Reads up to `buf.len()` bytes at `offset`; returns how many (0 at end of file).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Writes all of `buf` at `offset`, growing the file if needed.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Current length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Truncates or extends (with zeros) to `len` bytes.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// fdatasync: file data (and the length) durable.
    fn sync_data(&self) -> io::Result<()>;
    /// fsync: data and all metadata durable.
    fn sync_all(&self) -> io::Result<()>;
    /// Tries to take the exclusive advisory lock of this open file (flock semantics: a lock
    /// belongs to the open file, conflicts with every other open of the same file, and is
    /// released by the kernel when the holder dies). `Ok(false)` when someone else holds it.
    fn try_lock(&self) -> io::Result<bool>;
    /// Releases the advisory lock.
    fn unlock(&self) -> io::Result<()>;
    /// A read-only view of bytes `[0, len)`. The caller guarantees `len <= self.len()`.
    fn map(&self, len: u64) -> io::Result<Bytes>;
    /// A read-only view of bytes `[offset, offset + len)`: a map of that window alone where
    /// the file system maps, so that what the kernel maps around a touched page
    /// (fault-around) stays within it. The default slices a view of `[0, offset + len)`.
    /// The caller guarantees `offset + len <= self.len()`.
    fn map_range(&self, offset: u64, len: u64) -> io::Result<Bytes> {
        let from = usize::try_from(offset).map_err(|_| io::Error::other("map offset overflows"))?;
        Ok(self.map(offset.saturating_add(len))?.slice(from..))
    }
    /// Whether a view from [`FsFile::map`] shows what is written to its bytes later (a
    /// shared memory map), so that a view mapped once can serve later reads of bytes written
    /// after it was taken; `false` when a view is a copy of the bytes as they were.
    fn maps_are_live(&self) -> bool {
        false
    }
    /// Which file this is on its file system (device and inode): two descriptors with the
    /// same identity are of one file. The default: not known (such a file keeps its own
    /// descriptor, [`Fs::shared`]).
    fn identity(&self) -> io::Result<(u64, u64)> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this file system does not tell files apart",
        ))
    }
    /// Whether the file has been unlinked from every directory (its run was deleted).
    fn is_unlinked(&self) -> io::Result<bool>;
    /// Whether `path` names this open file now (the same inode): `false` once the file was
    /// renamed away with its directory (a run's delete renames its directory first), unlinked,
    /// or replaced by another file of that name.
    fn is_at(&self, path: &Path) -> io::Result<bool>;
}

/// Reads exactly `buf.len()` bytes at `offset`; `UnexpectedEof` if the file is shorter.
pub fn read_exact_at(file: &dyn FsFile, buf: &mut [u8], offset: u64) -> io::Result<()> {
    if read_up_to(file, buf, offset)? < buf.len() {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

/// Reads from `offset` until `buf` is full or the file ends; returns the bytes read (fewer
/// than `buf.len()` only at the end of the file).
pub fn read_up_to(file: &dyn FsFile, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], offset + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
