//! The real file system: std files, fs4 advisory locks, memmap2 read views.
//!
//! This is the only module of the crate with `unsafe` code (creating a memory map).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use super::{Fs, FsFile, OpenMode};

/// The operating system's file system.
#[derive(Clone, Copy, Debug, Default)]
pub struct StdFs;

/// An open file, and its (device, inode) once asked ([`FsFile::is_at`]).
#[derive(Debug)]
struct StdFile(File, std::sync::OnceLock<(u64, u64)>);

impl Fs for StdFs {
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
        match std::fs::metadata(path) {
            Ok(m) => Ok(m.is_dir()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
}

impl FsFile for StdFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.0.read_at(buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_all_at(buf, offset)
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
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

    #[allow(unsafe_code)] // the one memory map of the crate; see the SAFETY note
    fn map(&self, len: u64) -> io::Result<Bytes> {
        if len == 0 {
            return Ok(Bytes::new());
        }
        let len = usize::try_from(len).map_err(|_| io::Error::other("map length overflows"))?;
        // SAFETY: runlog only maps bytes below a segment's committed length, and committed
        // bytes are never rewritten or truncated by any runlog process (recovery truncates
        // only past the last valid batch, which is at or beyond the committed length). The
        // map is read-only and outlives no borrow: `Bytes::from_owner` keeps it alive.
        let map = unsafe { memmap2::MmapOptions::new().len(len).map(&self.0)? };
        Ok(Bytes::from_owner(map))
    }

    fn is_unlinked(&self) -> io::Result<bool> {
        Ok(self.0.metadata()?.nlink() == 0)
    }

    fn is_at(&self, path: &Path) -> io::Result<bool> {
        let mine = match self.1.get() {
            Some(id) => *id,
            None => {
                let m = self.0.metadata()?;
                *self.1.get_or_init(|| (m.dev(), m.ino()))
            }
        };
        match std::fs::metadata(path) {
            Ok(m) => Ok((m.dev(), m.ino()) == mine),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
}
