//! Idle files closed, opened again on use: a bounded set of open descriptors shared by the
//! files of a file system that no longer change (a sealed segment, a sealed segment's index).
//!
//! A run keeps its lock file and its last segment open. Its sealed segments and their indexes
//! are written once and never again, so holding a descriptor for each would make a run's
//! descriptors grow with its length (two per 4 MiB segment): a store with its default 256
//! open runs of a million events each would hold some 5,000, past the common soft limit of
//! 1,024 (`EMFILE`). Such a file is handed over to a [`Descriptors`] set instead ([`Reopened`]):
//! its descriptor stays open while the set has room (least recently used out first), and a
//! later use opens the path again and checks that it is the same file: the same device and
//! inode, and the same hash of its first bytes, which hold its random salt (a segment's
//! immutable sector 0; an index's header). A file
//! unlinked or replaced since is reported as such ([`FsFile::is_unlinked`]) and its reads fail
//! with `NotFound`, never serving another file's bytes. The LevelDB family calls the same
//! thing its table cache.

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use parking_lot::Mutex;

use super::{Fs, FsFile, OpenMode, read_up_to};

/// Bytes of a file's start compared when it is opened again, by a hash: sector 0 of a
/// segment (its salt, index, base seq, creation time and run id), the start of an index's
/// header.
const HEAD_LEN: usize = 512;

/// What tells a file apart when it is opened again: its identity on the file system (device
/// and inode, which a file system may give a new file once the old one is gone) and a hash of
/// its first [`HEAD_LEN`] bytes (fewer when it is shorter). Not a CRC: a segment's sector 0
/// ends with its own CRC-32, and a CRC-32 over bytes followed by their CRC-32 is the same
/// constant for every segment.
fn fingerprint(file: &dyn FsFile) -> io::Result<((u64, u64), u64)> {
    use std::hash::{Hash, Hasher};
    let mut head = [0u8; HEAD_LEN];
    let n = read_up_to(file, &mut head, 0)?;
    let mut h = std::hash::DefaultHasher::new();
    head[..n].hash(&mut h);
    Ok((file.identity()?, h.finish()))
}

/// A bounded set of values by key, the least recently used out first: the idle files'
/// descriptors ([`Descriptors`]) and a run's parked segments opened again
/// (`crate::run::state`).
#[derive(Debug)]
pub(crate) struct Recent<K, V> {
    max: usize,
    entries: Mutex<VecDeque<(K, V)>>,
}

impl<K: PartialEq, V: Clone> Recent<K, V> {
    /// A set holding at most `max` values (at least 1).
    pub(crate) fn new(max: usize) -> Recent<K, V> {
        Recent {
            max: max.max(1),
            entries: Mutex::new(VecDeque::new()),
        }
    }

    /// How many values it holds now.
    pub(crate) fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// The value of `key`, now the most recently used.
    pub(crate) fn get(&self, key: &K) -> Option<V> {
        let mut entries = self.entries.lock();
        let at = entries.iter().position(|(k, _)| k == key)?;
        let entry = entries.remove(at)?;
        let value = entry.1.clone();
        entries.push_back(entry);
        Some(value)
    }

    /// Holds `value` under `key` (in place of one held there), the most recently used; the
    /// values that fell out are returned, to be dropped outside the lock.
    #[must_use = "the values that fell out are dropped by the caller, outside the lock"]
    pub(crate) fn put(&self, key: K, value: V) -> Vec<V> {
        let mut entries = self.entries.lock();
        entries.retain(|(k, _)| *k != key);
        entries.push_back((key, value));
        let over = entries.len().saturating_sub(self.max);
        entries.drain(..over).map(|(_, v)| v).collect()
    }

    /// Lets go of `key`'s value, returned to be dropped outside the lock.
    pub(crate) fn forget(&self, key: &K) -> Option<V> {
        let mut entries = self.entries.lock();
        let at = entries.iter().position(|(k, _)| k == key)?;
        entries.remove(at).map(|(_, v)| v)
    }

    /// The keys held, the least recently used first.
    #[cfg(test)]
    pub(crate) fn keys(&self) -> Vec<K>
    where
        K: Clone,
    {
        self.entries.lock().iter().map(|(k, _)| k.clone()).collect()
    }
}

/// A bounded set of open descriptors, least recently used first.
#[derive(Debug)]
pub struct Descriptors {
    open: Recent<u64, Arc<dyn FsFile>>,
    next_key: AtomicU64,
}

impl Descriptors {
    /// A set holding at most `max` descriptors open (at least 1).
    pub fn new(max: usize) -> Descriptors {
        Descriptors {
            open: Recent::new(max),
            next_key: AtomicU64::new(1),
        }
    }

    /// How many descriptors it holds open now.
    pub fn held(&self) -> usize {
        self.open.len()
    }

    fn get(&self, key: u64) -> Option<Arc<dyn FsFile>> {
        self.open.get(&key)
    }

    fn put(&self, key: u64, file: Arc<dyn FsFile>) {
        // Closed outside the lock.
        drop(self.open.put(key, file));
    }

    fn forget(&self, key: u64) {
        drop(self.open.forget(&key));
    }
}

/// What makes a file opened again from its path the file that was adopted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sameness {
    /// The same inode (device and number) with the same first bytes: a file that nothing
    /// writes again under its name while the run lives (a sealed segment).
    Inode,
    /// The same first bytes, whatever the inode: a derived file that any writer may write
    /// again whole under its name, the same bytes each time (a sealed segment's index, a
    /// function of that segment's bytes alone, format/SPEC.md §9, whose header, in the
    /// bytes compared, names the segment's salt and counter). Two writers that both found it
    /// missing both write it, and the second rename replaces the first writer's file.
    Content,
}

/// A file system able to close idle files of its own and open them again: itself, shared,
/// and the set its idle files' descriptors are kept in ([`Fs::shared`]).
#[derive(Clone, Debug)]
pub struct Shared {
    /// The file system, to open a file again.
    pub fs: Arc<dyn Fs>,
    /// Where idle files keep their descriptors.
    pub descriptors: Arc<Descriptors>,
}

impl Shared {
    /// `file`, open at `path` in `mode`, as a file whose descriptor is kept in the set while
    /// it has room, and which opens `path` again when it is used after that (and checks that
    /// the path still holds this file). The caller promises the file no longer changes.
    ///
    /// # Errors
    /// Reading the first bytes of `file`, or its identity (a file system that does not give
    /// one: `Unsupported`).
    pub fn adopt(
        &self,
        path: &Path,
        mode: OpenMode,
        file: Arc<dyn FsFile>,
        same: Sameness,
    ) -> io::Result<Arc<dyn FsFile>> {
        let head = fingerprint(file.as_ref())?;
        let key = self.descriptors.next_key.fetch_add(1, Ordering::Relaxed);
        let maps_are_live = file.maps_are_live();
        self.descriptors.put(key, file);
        Ok(Arc::new(Reopened {
            shared: self.clone(),
            path: path.to_path_buf(),
            mode,
            head,
            same,
            key,
            maps_are_live,
        }))
    }
}

/// `file`, open at `path` in `mode` and no longer changing, handed to the idle set of `fs`
/// ([`Shared::adopt`]); `file` itself where `fs` has no such set or the handover fails (its
/// first bytes or identity unreadable): it then keeps its own descriptor.
pub(crate) fn idle(
    fs: &dyn Fs,
    path: &Path,
    mode: OpenMode,
    file: Arc<dyn FsFile>,
    same: Sameness,
) -> Arc<dyn FsFile> {
    match fs.shared() {
        Some(shared) => shared.adopt(path, mode, file.clone(), same).unwrap_or(file),
        None => file,
    }
}

/// A file that no longer changes, its descriptor in a [`Descriptors`] set while there is
/// room and opened again from its path when it is used after that.
pub struct Reopened {
    shared: Shared,
    path: PathBuf,
    mode: OpenMode,
    /// Its [`fingerprint`] when it was adopted.
    head: ((u64, u64), u64),
    /// Which part of the fingerprint a file opened again must match.
    same: Sameness,
    key: u64,
    maps_are_live: bool,
}

impl fmt::Debug for Reopened {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reopened")
            .field("path", &self.path)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl Reopened {
    /// The open file: the one held in the set, else the path opened again and checked.
    ///
    /// # Errors
    /// `NotFound` when the path is gone or now holds another file; the open's own errors.
    fn file(&self) -> io::Result<Arc<dyn FsFile>> {
        if let Some(f) = self.shared.descriptors.get(self.key) {
            return Ok(f);
        }
        let f = self.shared.fs.open(&self.path, self.mode)?;
        let now = fingerprint(f.as_ref())?;
        let same = match self.same {
            Sameness::Inode => now == self.head,
            Sameness::Content => now.1 == self.head.1,
        };
        if !same {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{} was replaced by another file since it was first opened",
                    self.path.display()
                ),
            ));
        }
        self.shared.descriptors.put(self.key, f.clone());
        Ok(f)
    }
}

impl Drop for Reopened {
    fn drop(&mut self) {
        self.shared.descriptors.forget(self.key);
    }
}

impl FsFile for Reopened {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.file()?.read_at(buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.file()?.write_all_at(buf, offset)
    }

    fn len(&self) -> io::Result<u64> {
        self.file()?.len()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file()?.set_len(len)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.file()?.sync_data()
    }

    fn sync_all(&self) -> io::Result<()> {
        self.file()?.sync_all()
    }

    fn try_lock(&self) -> io::Result<bool> {
        self.file()?.try_lock()
    }

    fn unlock(&self) -> io::Result<()> {
        self.file()?.unlock()
    }

    fn map(&self, len: u64) -> io::Result<Bytes> {
        self.file()?.map(len)
    }

    fn map_range(&self, offset: u64, len: u64) -> io::Result<Bytes> {
        self.file()?.map_range(offset, len)
    }

    fn maps_are_live(&self) -> bool {
        self.maps_are_live
    }

    /// Unlinked, or replaced at its path by another file: either way not this file's path
    /// any more. Closed, it is asked of the path's identity, without opening the file (a
    /// deletion check runs before every use of a run read-only).
    fn is_unlinked(&self) -> io::Result<bool> {
        if let Some(f) = self.shared.descriptors.get(self.key) {
            return f.is_unlinked();
        }
        match self.shared.fs.identity_at(&self.path) {
            Ok(id) => Ok(id != self.head.0),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(true),
            Err(e) => Err(e),
        }
    }

    fn is_at(&self, path: &Path) -> io::Result<bool> {
        match self.file() {
            Ok(f) => f.is_at(path),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileExt;

    use super::*;
    use crate::io::StdFs;

    /// A set of `max` over the real file system, and `n` files of distinct contents in `dir`.
    fn setup(dir: &Path, max: usize, n: usize) -> (Shared, Vec<PathBuf>) {
        let shared = Shared {
            fs: Arc::new(StdFs),
            descriptors: Arc::new(Descriptors::new(max)),
        };
        let paths = (0..n)
            .map(|i| {
                let p = dir.join(format!("f{i}"));
                std::fs::write(&p, format!("file {i} ").repeat(100)).unwrap();
                p
            })
            .collect();
        (shared, paths)
    }

    fn adopt(shared: &Shared, path: &Path) -> Arc<dyn FsFile> {
        let f = shared.fs.open(path, OpenMode::Read).unwrap();
        shared
            .adopt(path, OpenMode::Read, f, Sameness::Inode)
            .unwrap()
    }

    fn first_bytes(f: &dyn FsFile) -> io::Result<String> {
        let mut b = [0u8; 7];
        read_up_to(f, &mut b, 0).map(|n| String::from_utf8_lossy(&b[..n]).into_owned())
    }

    #[test]
    fn past_its_bound_the_least_recently_used_is_closed_and_opened_again_on_use() {
        let dir = tempfile::tempdir().unwrap();
        let (shared, paths) = setup(dir.path(), 2, 3);
        let files: Vec<_> = paths.iter().map(|p| adopt(&shared, p)).collect();
        assert_eq!(shared.descriptors.held(), 2);
        // f0 was evicted by f2: read, it is opened again (and f1, now oldest, closed).
        assert_eq!(first_bytes(files[0].as_ref()).unwrap(), "file 0 ");
        assert_eq!(shared.descriptors.held(), 2);
        let keys: Vec<u64> = shared.descriptors.open.keys();
        assert_eq!(keys, [3, 1], "f2 then f0 held, f1 closed");
        for (i, f) in files.iter().enumerate() {
            assert_eq!(first_bytes(f.as_ref()).unwrap(), format!("file {i} "));
            assert_eq!(f.len().unwrap(), 700);
            assert!(!f.is_unlinked().unwrap());
            assert!(f.is_at(&paths[i]).unwrap());
        }
        drop(files);
        assert_eq!(
            shared.descriptors.held(),
            0,
            "a dropped file closes its descriptor"
        );
    }

    #[test]
    fn a_file_replaced_or_removed_while_closed_is_reported_gone_and_never_read() {
        let dir = tempfile::tempdir().unwrap();
        let (shared, paths) = setup(dir.path(), 1, 3);
        let a = adopt(&shared, &paths[0]);
        let b = adopt(&shared, &paths[1]);
        // Both closed now (a by b, b by the next one); then replaced and removed.
        let _c = adopt(&shared, &paths[2]);
        std::fs::rename(&paths[2], &paths[0]).unwrap();
        std::fs::remove_file(&paths[1]).unwrap();
        for (f, path) in [(&a, &paths[0]), (&b, &paths[1])] {
            let e = first_bytes(f.as_ref()).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
            assert!(f.is_unlinked().unwrap());
            assert!(!f.is_at(path).unwrap());
        }
        assert!(
            first_bytes(a.as_ref())
                .unwrap_err()
                .to_string()
                .contains("replaced by another file"),
        );
    }

    /// 508 bytes of `fill` and their CRC-32, as a segment's sector 0 ends.
    fn sector_with_own_crc(fill: u8) -> Vec<u8> {
        let mut b = vec![fill; 508];
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    #[test]
    fn files_whose_first_bytes_end_in_their_own_crc_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let (shared, paths) = setup(dir.path(), 1, 2);
        std::fs::write(&paths[0], sector_with_own_crc(b'a')).unwrap();
        let a = adopt(&shared, &paths[0]);
        let _b = adopt(&shared, &paths[1]);
        // The same inode, rewritten with another sector that ends in its CRC (the CRC-32 of
        // either whole sector is the same constant).
        let other = sector_with_own_crc(b'z');
        assert_eq!(
            crc32fast::hash(&other),
            crc32fast::hash(&sector_with_own_crc(b'a'))
        );
        std::fs::OpenOptions::new()
            .write(true)
            .open(&paths[0])
            .unwrap()
            .write_all_at(&other, 0)
            .unwrap();
        let e = first_bytes(a.as_ref()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
    }

    #[test]
    fn a_byte_for_byte_copy_put_in_a_files_place_is_another_file() {
        let dir = tempfile::tempdir().unwrap();
        let (shared, paths) = setup(dir.path(), 1, 2);
        let a = adopt(&shared, &paths[0]);
        let _b = adopt(&shared, &paths[1]);
        let copy = dir.path().join("copy");
        std::fs::copy(&paths[0], &copy).unwrap();
        std::fs::rename(&copy, &paths[0]).unwrap();
        assert!(
            a.is_unlinked().unwrap(),
            "a restored copy is not the file opened"
        );
        assert!(first_bytes(a.as_ref()).is_err());
    }

    #[test]
    fn a_file_held_open_keeps_serving_its_bytes_after_its_path_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let (shared, paths) = setup(dir.path(), 4, 2);
        let a = adopt(&shared, &paths[0]);
        std::fs::rename(&paths[1], &paths[0]).unwrap();
        // Still held: its own descriptor, as a file never released would.
        assert_eq!(first_bytes(a.as_ref()).unwrap(), "file 0 ");
        assert!(a.is_unlinked().unwrap());
    }
}
