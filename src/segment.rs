//! One segment file, and every byte runlog reads from or writes to it: create (durably),
//! open, counter slots, appends, syncs, truncations, the seal, preallocation, and
//! committed-region views. Nothing above this module touches a segment's file handle.
//!
//! Layout and protocol: `format/SPEC.md` §2–§6.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::format::{
    CounterSlot, ENTRIES_OFFSET, EntriesRecord, FORMAT_VERSION, FORMAT_VERSION_MIN, FormatError,
    HEADER_LEN, IndexBinding, SLOT_LEN, SLOT_OFFSETS, SegmentHeader, pick_slot,
};
use crate::index::{PageCache, SegmentIndex};
use crate::io::{Fs, FsFile, OpenMode, read_exact_at, read_up_to};

/// File name of segment `index` (1-based): `seg-00000001.log`.
pub(crate) fn segment_name(index: u32) -> String {
    format!("seg-{index:08}.log")
}

/// How a run and its segment files are opened: to be written (a writable [`crate::Store`]),
/// or only read ([`crate::Store::open_read_only`], and every reader that never writes: run
/// listing and verify). A read-only open uses [`OpenMode::Read`] for every file, so it works
/// on files it may not write (another user's store, a read-only mount).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Files opened read-write (the run may be recovered and appended to).
    Write,
    /// Files opened read-only; nothing is ever written, truncated or locked.
    Read,
}

impl Access {
    /// The mode existing files are opened with.
    pub(crate) fn open_mode(self) -> OpenMode {
        match self {
            Access::Write => OpenMode::ReadWrite,
            Access::Read => OpenMode::Read,
        }
    }
}

/// File name of segment `index`'s index (SPEC §9): `seg-00000001.idx`.
pub(crate) fn index_name(index: u32) -> String {
    format!("seg-{index:08}.idx")
}

/// A segment's counter as read from disk.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Counter {
    /// The newest valid slot (header checkpoint or lock-file commit slot).
    pub(crate) newest: CounterSlot,
    /// Generation of the newest valid header slot (decides when a checkpoint is due).
    pub(crate) header_generation: u64,
}

/// Length of the lock file's commit-slot region, `[512, 1088)`: both commit slots.
const COMMIT_SLOTS_LEN: usize = 512 + SLOT_LEN;

/// The bytes of a run's lock file in its commit-slot region (SPEC §3), as far as the file
/// holds them. Every commit slot written has a generation above every earlier one, so the
/// region never returns to bytes it held before: a writer that finds it exactly as it left
/// it knows no other writer has written a commit slot since (SPEC §5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CommitSlots {
    bytes: [u8; COMMIT_SLOTS_LEN],
    len: usize,
}

impl CommitSlots {
    /// Reads the region (one positioned read; shorter when the file is).
    ///
    /// # Errors
    /// The read's.
    pub(crate) fn read(lock: &dyn FsFile) -> io::Result<CommitSlots> {
        let mut bytes = [0u8; COMMIT_SLOTS_LEN];
        let len = read_up_to(lock, &mut bytes, SLOT_OFFSETS[0])?;
        Ok(CommitSlots { bytes, len })
    }

    /// The bytes read.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// What the region holds after [`Segment::write_commit_slot`] wrote `slot` for a
    /// segment of `salt`: a write past the end leaves zeros (a hole) before it, as a read
    /// returns them.
    pub(crate) fn record(&mut self, slot: &CounterSlot, salt: u32) {
        let start = (slot.offset() - SLOT_OFFSETS[0]) as usize;
        self.bytes[start..start + SLOT_LEN].copy_from_slice(&slot.encode(salt));
        self.len = self.len.max(start + SLOT_LEN);
    }
}

/// An open segment file and its immutable header.
#[derive(Debug)]
pub(crate) struct Segment {
    pub(crate) name: String,
    pub(crate) path: PathBuf,
    /// Its own descriptor while it may change; once sealed, a file whose descriptor is
    /// closed while idle ([`Segment::release`]).
    file: Mutex<Arc<dyn FsFile>>,
    pub(crate) header: SegmentHeader,
    /// Cached read-only view of a window of the file; mapped again when a read needs more.
    view: Mutex<View>,
}

/// The index of segment `binding.segment_index` of `run` in `dir` when it is a valid one bound
/// to `binding` ([`Segment::open_index`]; a parked segment's, `crate::run::state`, without
/// the segment itself). A sealed segment's index keeps no descriptor while idle.
pub(crate) fn open_index_of(
    fs: &dyn Fs,
    dir: &Path,
    run: &str,
    binding: &IndexBinding,
    sealed: bool,
    cache: &Arc<PageCache>,
) -> Option<SegmentIndex> {
    let path = dir.join(index_name(binding.segment_index));
    let f = fs.open(&path, OpenMode::Read).ok()?;
    // A sealed segment's index is final: its descriptor need not stay open while idle (an
    // open segment's index is replaced at its seal, so it keeps its own).
    let f = match sealed {
        true => crate::io::idle(fs, &path, OpenMode::Read, f, crate::io::Sameness::Content),
        false => f,
    };
    SegmentIndex::open(f, Arc::from(run), path, binding, cache.clone())
}

/// Read-only bytes of a segment file from `base` on: byte `i` of `bytes` is byte `base + i`
/// of the file.
#[derive(Clone, Debug, Default)]
pub(crate) struct View {
    pub(crate) base: u64,
    pub(crate) bytes: Bytes,
}

/// What a lost seal is reported with (`why`: how it was found).
fn lost_seal_detail(why: &str) -> String {
    format!(
        "{why}: this segment's seal is lost (its events and the later segments are on disk; \
         the run is not read until `runlog repair`, or `Store::restore_seals`, writes the \
         seal again from the segment's batches)"
    )
}

/// A segment's two header slots as read (`Segment::header_slots`).
struct HeaderSlots {
    a: Option<CounterSlot>,
    b: Option<CounterSlot>,
    /// Offset of a slot that fails its checksum with bytes other than zeros.
    damaged: Option<u64>,
}

impl View {
    /// The file offset just past the view.
    fn end(&self) -> u64 {
        self.base + self.bytes.len() as u64
    }
}

/// What a new segment starts with.
pub(crate) struct NewSegment<'a> {
    pub(crate) run: &'a str,
    pub(crate) index: u32,
    pub(crate) base_seq: u64,
    pub(crate) run_created_at_ms: u64,
    pub(crate) now_ms: u64,
    pub(crate) meta: &'a [u8],
}

/// The page size a live map's end is rounded up to ([`Segment::view`]).
const MAP_PAGE_BYTES: u64 = 4096;

impl Segment {
    /// The file.
    fn file(&self) -> Arc<dyn FsFile> {
        self.file.lock().clone()
    }

    /// Lets go of the descriptor of a segment that no longer changes (sealed, with a segment
    /// after it): it is kept in the file system's set of idle descriptors and opened again
    /// when the segment is read after being evicted from it (`crate::io::Reopened`), so that a
    /// run's open descriptors do not grow with its segments. Opened again read-only, whatever
    /// the run's access: nothing writes a sealed segment (a repair cuts only the last one).
    /// Best effort: on a file system without that set, or when its first bytes cannot be
    /// read, the descriptor stays.
    pub(crate) fn release(&self, fs: &dyn Fs) {
        let mut file = self.file.lock();
        *file = crate::io::idle(
            fs,
            &self.path,
            OpenMode::Read,
            file.clone(),
            crate::io::Sameness::Inode,
        );
    }

    /// Writes a complete segment (header + both counter slots, generations 1 and 2, empty) to
    /// `dir/<tmp name>`, syncs it, renames it into place and syncs `dir`: the segment exists
    /// whole or not at all (rule 4: a new file is durable only after its directory is synced).
    pub(crate) fn create(fs: &dyn Fs, dir: &Path, new: &NewSegment<'_>) -> Result<Segment> {
        let name = segment_name(new.index);
        let path = dir.join(&name);
        let tmp = dir.join(format!("{name}.tmp"));
        let header = SegmentHeader {
            version: FORMAT_VERSION,
            segment_index: new.index,
            salt: rand::random::<u32>() | 1,
            base_seq: new.base_seq,
            created_at_ms: new.now_ms,
            run_created_at_ms: new.run_created_at_ms,
            run_id: new.run.to_string(),
            meta: new.meta.to_vec(),
        };
        let slot = CounterSlot {
            generation: 1,
            last_seq: new.base_seq - 1,
            committed_len: HEADER_LEN,
            updated_at_ms: new.now_ms,
            sealed: false,
            repair_epoch: 0,
        };
        let both = [
            slot,
            CounterSlot {
                generation: 2,
                ..slot
            },
        ];
        let bytes = header.encode_with_slots(&both);
        match fs.open(&path, OpenMode::Read) {
            // Under the run lock only a handle with a stale view of the run gets here: never
            // rename a new segment over one that may hold acknowledged events.
            Ok(_) => {
                let detail = format!(
                    "{name} already exists: this handle's view of the run is stale; nothing written"
                );
                return Err(Error::corrupt(new.run, &name, 0, detail));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("checking", &path, e)),
        }
        let write = || -> io::Result<()> {
            let f = fs.open(&tmp, OpenMode::CreateTruncate)?;
            f.write_all_at(&bytes, 0)?;
            f.sync_all()?;
            fs.rename(&tmp, &path)?;
            fs.sync_dir(dir)
        };
        if let Err(e) = write() {
            let _ = fs.remove_file(&tmp);
            return Err(Error::io("creating segment", &path, e));
        }
        let file = fs
            .open(&path, OpenMode::ReadWrite)
            .map_err(|e| Error::io("opening segment", &path, e))?;
        Ok(Segment {
            name,
            path,
            file: Mutex::new(file),
            header,
            view: Mutex::new(View::default()),
        })
    }

    /// The segment after a sealed one ([`Self::open`] of `index`). Its absence is a state a
    /// crash leaves (a roll syncs the seal, then makes the next segment), but only while no
    /// later segment exists: a missing segment with later ones in the directory is a hole in
    /// the chain, `Corrupt` naming it, never the run's end (the later segments hold
    /// acknowledged events). The directory is listed only in that rare state.
    ///
    /// # Errors
    /// As [`Self::open`]; [`Error::Corrupt`] for a hole.
    pub(crate) fn open_after_seal(
        fs: &dyn Fs,
        dir: &Path,
        run: &str,
        index: u32,
        access: Access,
    ) -> Result<Option<Segment>> {
        if let Some(seg) = Segment::open(fs, dir, run, index, access)? {
            return Ok(Some(seg));
        }
        let later = fs
            .read_dir(dir)
            .map_err(|e| Error::io("listing", dir, e))?
            .into_iter()
            .filter_map(|name| {
                let n = name.strip_prefix("seg-")?.strip_suffix(".log")?;
                n.parse::<u32>().ok().filter(|n| *n > index)
            })
            .min();
        // Made between the open and the listing (a writer rolled, and rolled again, while
        // this thread waited: segments are made in order, so a later one was made after it):
        // found by the open again. Only a segment still missing then is a hole (a reader
        // under load saw seg-6 missing and seg-7 there, and failed a sound run `Corrupt`).
        if later.is_some()
            && let Some(seg) = Segment::open(fs, dir, run, index, access)?
        {
            return Ok(Some(seg));
        }
        match later {
            None => Ok(None),
            Some(n) => Err(Error::corrupt(
                run,
                segment_name(index),
                0,
                format!(
                    "segment missing after a sealed one while {} exists: a hole in the chain",
                    segment_name(n)
                ),
            )),
        }
    }

    /// Opens segment `index` of `run` in `dir`; `Ok(None)` when the file does not exist.
    /// `access` decides the open mode: [`Access::Read`] opens the file read-only (every write
    /// method then fails), for readers that never write.
    ///
    /// # Errors
    /// [`Error::UnsupportedVersion`] for a foreign format version, [`Error::Corrupt`] for a
    /// bad header or one that names another run or position, [`Error::Io`] (e.g. `EACCES` for
    /// [`Access::Write`] on a file this user may only read); [`Error::RunIdCaseConflict`] when
    /// the header names `run` in another case (a case-insensitive file system, SPEC §1).
    pub(crate) fn open(
        fs: &dyn Fs,
        dir: &Path,
        run: &str,
        index: u32,
        access: Access,
    ) -> Result<Option<Segment>> {
        let name = segment_name(index);
        let path = dir.join(&name);
        let file = match fs.open(&path, access.open_mode()) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("opening segment", &path, e)),
        };
        let mut buf = vec![0u8; HEADER_LEN as usize];
        let header = match read_exact_at(file.as_ref(), &mut buf, 0) {
            Ok(()) => SegmentHeader::decode(&buf),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                Err(FormatError::short(0, "segment shorter than its header"))
            }
            Err(e) => return Err(Error::io("reading segment header", &path, e)),
        };
        let header = header.map_err(|e| match SegmentHeader::version_of(&buf) {
            // A file cut before the end of its header is short, not of another version: the
            // version read from the zero-filled buffer of a file cut at 8 bytes is 0.
            Some(found)
                if !(FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&found) && !e.incomplete =>
            {
                Error::UnsupportedVersion {
                    path: path.clone(),
                    found,
                    supported: FORMAT_VERSION,
                }
            }
            _ => Error::corrupt(run, &name, e.offset, e.detail),
        })?;
        // The header checksum held, so a name differing only in case is no bit flip: a
        // case-insensitive file system led `run` into the directory of another run (SPEC §1).
        if header.run_id != run && header.run_id.eq_ignore_ascii_case(run) {
            return Err(Error::case_conflict(run, &header.run_id));
        }
        if header.run_id != run || header.segment_index != index {
            let detail = format!(
                "header names run {:?} segment {}, expected run {run:?} segment {index}",
                header.run_id, header.segment_index
            );
            return Err(Error::corrupt(run, &name, 16, detail));
        }
        Ok(Some(Segment {
            name,
            path,
            file: Mutex::new(file),
            header,
            view: Mutex::new(View::default()),
        }))
    }

    /// The newest valid header slot, and the newest valid *sealed* header slot if there is
    /// one (a seal is final: nothing is committed to a segment after it, so it outranks any
    /// commit slot whatever their generations; SPEC §3).
    ///
    /// # Errors
    /// [`Error::Corrupt`] when neither slot is valid or a slot contradicts the header.
    fn read_header_slots(
        &self,
        fs: &dyn Fs,
        run: &str,
    ) -> Result<(CounterSlot, Option<CounterSlot>)> {
        let HeaderSlots { a, b, damaged } = self
            .header_slots()
            .map_err(|e| self.read_error(run, e, SLOT_OFFSETS[0]))?;
        let sealed = pick_slot(a.filter(|s| s.sealed), b.filter(|s| s.sealed));
        if sealed.is_none()
            && let Some(at) = damaged
        {
            // Both slots are written when the segment is made and only ever overwritten: one
            // that does not check is torn or damaged. Torn by a crash, it cannot have been
            // the seal (a roll syncs the seal before it makes the next segment); so when the
            // next segment exists, the seal is what was lost, and the chain past this
            // segment would be silently cut short (SPEC §3, §5 step 3). Every other form of a
            // lost seal (a slot zeroed, or an older copy) is found where a walker of the chain
            // stops (`end_of_chain`, once per segment and view); a damaged slot costs no look
            // at the directory to find, so it is reported here too, to views already past
            // that look (a live view's refresh reads only its last segment's counter).
            if let Some(next) = self.next_exists(fs)? {
                let detail = lost_seal_detail(&format!("counter slot damaged and {next} exists"));
                return Err(Error::corrupt(run, &self.name, at, detail));
            }
        }
        let slot = pick_slot(a, b).ok_or_else(|| {
            Error::corrupt(run, &self.name, SLOT_OFFSETS[0], "no valid counter slot")
        })?;
        for s in std::iter::once(slot).chain(sealed) {
            if s.last_seq
                .checked_add(1)
                .is_none_or(|n| n < self.header.base_seq)
            {
                let detail = format!(
                    "counter last seq {} below segment base seq {}",
                    s.last_seq, self.header.base_seq
                );
                return Err(Error::corrupt(run, &self.name, s.offset(), detail));
            }
        }
        Ok((slot, sealed))
    }

    /// Both header slots as stored (`None`: its checksum fails), and the offset of the first
    /// that fails while holding bytes other than zeros (damaged, not never written).
    fn header_slots(&self) -> io::Result<HeaderSlots> {
        let mut buf = [0u8; 2 * 512];
        read_exact_at(self.file().as_ref(), &mut buf, SLOT_OFFSETS[0])?;
        let salt = self.header.salt;
        let a = CounterSlot::decode(&buf[..SLOT_LEN], salt, 0);
        let b = CounterSlot::decode(&buf[512..512 + SLOT_LEN], salt, 1);
        let damaged = [(a, 0usize), (b, 512)]
            .into_iter()
            .find(|(slot, at)| slot.is_none() && buf[*at..*at + SLOT_LEN] != [0; SLOT_LEN])
            .map(|(_, at)| SLOT_OFFSETS[0] + at as u64);
        Ok(HeaderSlots { a, b, damaged })
    }

    /// The name of the next segment of the chain when its file exists. A file there that
    /// this user may not open (another user's) exists too; any other failure to open it (an
    /// I/O error, no descriptor left) is that error, naming the file, never taken for an
    /// answer: "exists" would report a healthy run's seal lost (found by a breaker: a failed
    /// open made a backup recopy a sound destination run).
    fn next_exists(&self, fs: &dyn Fs) -> Result<Option<String>> {
        let next = segment_name(self.header.segment_index + 1);
        let path = self.path.parent().unwrap_or(Path::new(".")).join(&next);
        match fs.open(&path, OpenMode::Read) {
            Ok(_) => Ok(Some(next)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Ok(Some(next)),
            Err(e) => Err(Error::io("checking for", path, e)),
        }
    }

    /// When this segment's seal was lost — no header slot sealed while the next segment
    /// exists, which no crash leaves (a roll syncs the seal before it makes the next
    /// segment): the newest header slot that checks (`Ok(Some(None))` when neither does);
    /// `Ok(None)` in any other state.
    pub(crate) fn lost_seal(&self, fs: &dyn Fs) -> Result<Option<Option<CounterSlot>>> {
        let HeaderSlots { a, b, .. } = self
            .header_slots()
            .map_err(|e| Error::io("reading", &self.path, e))?;
        if a.is_some_and(|s| s.sealed) || b.is_some_and(|s| s.sealed) {
            return Ok(None);
        }
        Ok(self.next_exists(fs)?.map(|_| pick_slot(a, b)))
    }

    /// [`Self::read_counter`] for a walker of the chain that would stop here when the counter
    /// is not sealed: see [`Self::end_of_chain`].
    ///
    /// # Errors
    /// As [`Self::read_counter`]; [`Error::Corrupt`] naming a lost seal.
    pub(crate) fn read_counter_in_chain(
        &self,
        fs: &dyn Fs,
        run: &str,
        lock: Option<&dyn FsFile>,
    ) -> Result<Counter> {
        let counter = self.read_counter(fs, run, lock)?;
        if counter.newest.sealed {
            return Ok(counter);
        }
        Ok(self.end_of_chain(fs, run, lock)?.unwrap_or(counter))
    }

    /// Whether this segment, found not sealed, ends the chain: `Ok(None)` when no next
    /// segment exists; `Ok(Some(counter))` when a roll sealed it and made the next one in the
    /// meantime (its counter, read again). A segment not sealed while the next exists is
    /// [`Error::Corrupt`]: its seal is lost (a slot zeroed, damaged or holding an older copy,
    /// SPEC §3), and the chain past it would be silently cut short.
    ///
    /// # Errors
    /// As [`Self::read_counter`]; [`Error::Corrupt`] naming the lost seal.
    pub(crate) fn end_of_chain(
        &self,
        fs: &dyn Fs,
        run: &str,
        lock: Option<&dyn FsFile>,
    ) -> Result<Option<Counter>> {
        let Some(next) = self.next_exists(fs)? else {
            return Ok(None);
        };
        let again = self.read_counter(fs, run, lock)?;
        if again.newest.sealed {
            return Ok(Some(again));
        }
        let detail = lost_seal_detail(&format!("no counter slot is sealed and {next} exists"));
        Err(Error::corrupt(run, &self.name, SLOT_OFFSETS[0], detail))
    }

    /// The segment's counter (SPEC §3): the newest valid slot among the header's two
    /// checkpoint slots and, when `lock` is given (the run's lock file; only the last segment
    /// of a run has commit slots there), the lock file's two commit slots. Slots of another
    /// segment fail their salted checksum there and are ignored.
    ///
    /// # Errors
    /// As [`Self::read_header_slots`] for the header (also [`Error::Corrupt`] naming a damaged
    /// header slot when no slot says sealed and the next segment exists: the seal was lost);
    /// [`Error::Io`] when the lock file cannot be read.
    pub(crate) fn read_counter(
        &self,
        fs: &dyn Fs,
        run: &str,
        lock: Option<&dyn FsFile>,
    ) -> Result<Counter> {
        let (header, sealed) = self.read_header_slots(fs, run)?;
        let lock = match (sealed, lock) {
            (Some(seal), _) => {
                return Ok(Counter {
                    newest: seal,
                    header_generation: header.generation,
                });
            }
            (None, None) => {
                return Ok(Counter {
                    newest: header,
                    header_generation: header.generation,
                });
            }
            (None, Some(lock)) => lock,
        };
        // Both commit slots, in one read: [512, 1088).
        let region = CommitSlots::read(lock)
            .map_err(|e| Error::io("reading commit counter of", &self.path, e))?;
        let buf = region.bytes();
        let salt = self.header.salt;
        let a = CounterSlot::decode(buf, salt, 0);
        let b = CounterSlot::decode(buf.get(512..).unwrap_or(&[]), salt, 1);
        // A commit slot below the segment's base seq cannot be this segment's (defensive: the
        // salt already says so).
        let fits = |s: &CounterSlot| s.last_seq.checked_add(1) >= Some(self.header.base_seq);
        let tail = pick_slot(a.filter(fits), b.filter(fits));
        Ok(Counter {
            newest: pick_slot(Some(header), tail).unwrap_or(header),
            header_generation: header.generation,
        })
    }

    /// Writes `slot` into its header position: a checkpoint, seal or recovery counter (not
    /// synced unless the caller syncs: the next sync of this file covers it, and recovery
    /// does not depend on it — see SPEC §5).
    pub(crate) fn write_slot(&self, slot: &CounterSlot) -> io::Result<()> {
        self.file()
            .write_all_at(&slot.encode(self.header.salt), slot.offset())
    }

    /// Writes `slot` into its commit-slot position in the run's lock file (never synced:
    /// it publishes synced data to readers in other processes; see SPEC §3, §5).
    pub(crate) fn write_commit_slot(
        &self,
        lock: &dyn FsFile,
        slot: &CounterSlot,
    ) -> io::Result<()> {
        lock.write_all_at(&slot.encode(self.header.salt), slot.offset())
    }

    /// The announcement (SPEC §5): `counter` written again into the run's lock file's commit
    /// slots, one generation newer than it and than the header's newest slot
    /// (`header_generation`), so that a writer skipping its refresh while the region is as it
    /// left it refreshes. Nothing changes for readers. Returns the slot written.
    pub(crate) fn write_announcement(
        &self,
        lock: &dyn FsFile,
        counter: &CounterSlot,
        header_generation: u64,
    ) -> io::Result<CounterSlot> {
        let slot = CounterSlot {
            generation: counter.generation.max(header_generation) + 1,
            ..*counter
        };
        self.write_commit_slot(lock, &slot)?;
        Ok(slot)
    }

    /// Whether the run's lock file holds this segment's entries record (SPEC §3): a writer
    /// fsync'd `runs/` and the run directory after this segment was created. A read failure
    /// or a short file is "no": the caller then syncs.
    pub(crate) fn entries_recorded(&self, lock: &dyn FsFile) -> bool {
        let mut b = [0u8; SLOT_LEN];
        read_exact_at(lock, &mut b, ENTRIES_OFFSET).is_ok()
            && EntriesRecord::decode(&b, self.header.salt)
                .is_some_and(|r| r.segment_index == self.header.segment_index)
    }

    /// Writes this segment's entries record into the run's lock file (never synced; only
    /// after the syncs it records succeeded).
    pub(crate) fn record_entries(&self, lock: &dyn FsFile) -> io::Result<()> {
        let record = EntriesRecord {
            segment_index: self.header.segment_index,
        };
        lock.write_all_at(&record.encode(self.header.salt), ENTRIES_OFFSET)
    }

    /// A view of bytes `[from, len)` of the file (a [`View`] that may start before `from`),
    /// mapping anew when the cached map does not hold them. The map taken starts at `from`
    /// (or at the cached map's start, when that is before: a reader going back and forth
    /// maps once), not at the file's start: the kernel maps the page-cache pages around a
    /// touched one into the process (fault-around, up to 64 KiB), and within a map of the
    /// window only the window's pages are counted in the process's resident memory, however
    /// long the segment. Where maps are live ([`crate::io::FsFile::maps_are_live`]) it ends
    /// at the end of the page `len` ends in (within the file: preallocated zeros are there),
    /// so that the reads after the next commits whose bytes land in that page need no map of
    /// their own: one map per page of log instead of one per commit (a map and an unmap cost
    /// a reader about 20 µs on a 2-vCPU machine, the unmap's TLB shootdown across the
    /// process's threads most of it). Not further, for the same fault-around: a map reaching
    /// into the zeros would count them in its resident memory.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the file is shorter than `len` (it was truncated behind our
    /// back); [`Error::Io`].
    pub(crate) fn view(&self, run: &str, from: u64, len: u64) -> Result<View> {
        // The length is checked on every read, cached map or not: touching mapped bytes that
        // an outside hand truncated away would kill the process (SIGBUS) instead of giving
        // `Corrupt`. (A truncation racing this very read cannot be excluded with mmap.)
        let mut cached = self.view.lock();
        let file_len = self
            .file()
            .len()
            .map_err(|e| Error::io("reading length of", &self.path, e))?;
        if file_len < len {
            *cached = View::default();
            let detail = format!("file is {file_len} bytes, committed length is {len}");
            return Err(Error::corrupt(run, &self.name, file_len, detail));
        }
        let from = from.min(len);
        let slice = |v: &View| {
            let end = usize::try_from(len - v.base).unwrap_or(usize::MAX);
            View {
                base: v.base,
                bytes: v.bytes.slice(..end.min(v.bytes.len())),
            }
        };
        if !cached.bytes.is_empty() && cached.base <= from && cached.end() >= len {
            return Ok(slice(&cached));
        }
        let base = match cached.bytes.is_empty() {
            true => from,
            false => from.min(cached.base),
        };
        let window = match self.file().maps_are_live() {
            true => len.next_multiple_of(MAP_PAGE_BYTES).min(file_len),
            false => len,
        };
        let bytes = self
            .file()
            .map_range(base, window - base)
            .map_err(|e| Error::io("mapping", &self.path, e))?;
        *cached = View { base, bytes };
        Ok(slice(&cached))
    }

    /// Whether the file has been unlinked (its run was deleted: segments are only ever
    /// unlinked by deletion, never replaced).
    pub(crate) fn is_unlinked(&self) -> Result<bool> {
        self.file()
            .is_unlinked()
            .map_err(|e| Error::io("checking", &self.path, e))
    }

    /// Current file length in bytes.
    pub(crate) fn len(&self) -> Result<u64> {
        self.file()
            .len()
            .map_err(|e| Error::io("reading length of", &self.path, e))
    }

    /// Reads from `at` until `buf` is full or the file ends; returns the bytes read.
    pub(crate) fn read_up_to(&self, buf: &mut [u8], at: u64) -> io::Result<usize> {
        read_up_to(self.file().as_ref(), buf, at)
    }

    /// Fills `buf` from `at`; an error when the file ends first.
    pub(crate) fn read_exact(&self, buf: &mut [u8], at: u64) -> io::Result<()> {
        read_exact_at(self.file().as_ref(), buf, at)
    }

    /// Whether the 4 bytes at `at` (where the next batch's magic goes) are zero or absent.
    pub(crate) fn magic_is_zero(&self, at: u64) -> Result<bool> {
        let mut magic = [0u8; 4];
        let n = self
            .read_up_to(&mut magic, at)
            .map_err(|e| Error::io("reading", &self.path, e))?;
        Ok(magic.iter().take(n).all(|&b| b == 0))
    }

    /// An uncached view of `[0, len)` for recovery and verify, which look past (recovery) or
    /// exactly at (verify) a counter without publishing anything. The caller has checked
    /// `len <= self.len()`.
    pub(crate) fn map_uncached(&self, len: u64) -> Result<Bytes> {
        self.file()
            .map(len)
            .map_err(|e| Error::io("mapping", &self.path, e))
    }

    /// Writes a group's encoded batches at `at` (the committed length). Not synced.
    pub(crate) fn append(&self, buf: &[u8], at: u64) -> io::Result<()> {
        self.file().write_all_at(buf, at)
    }

    /// Cuts the file to `len` bytes (a torn tail, a failed append, zeros before a seal).
    pub(crate) fn truncate(&self, len: u64) -> io::Result<()> {
        self.file().set_len(len)
    }

    /// The length of the batch at `offset`, read from its header, when the batch lies within
    /// the first `end` bytes (the committed length it belongs to): a damaged length field
    /// never sizes a read or an allocation; it is [`Error::Corrupt`] naming the batch.
    pub(crate) fn batch_len_at(&self, run: &str, offset: u64, end: u64) -> Result<u64> {
        let mut head = [0u8; 8];
        self.read_exact(&mut head, offset)
            .map_err(|e| Error::io("reading", &self.path, e))?;
        let len = self.header.frame_key().batch_len(&head).unwrap_or(0);
        if len > end.saturating_sub(offset) || len < head.len() as u64 {
            let detail = format!(
                "batch length {len} at offset {offset} does not fit the committed length {end}"
            );
            return Err(Error::corrupt(run, &self.name, offset, detail));
        }
        Ok(len)
    }

    /// The bytes of the whole batch at `offset` ([`Self::batch_len_at`] bounds its length).
    pub(crate) fn read_batch(&self, run: &str, offset: u64, end: u64) -> Result<Bytes> {
        let mut buf = vec![0u8; self.batch_len_at(run, offset, end)? as usize];
        self.read_exact(&mut buf, offset)
            .map_err(|e| Error::io("reading", &self.path, e))?;
        Ok(Bytes::from(buf))
    }

    /// Writes zeros over `[len, end of file)`, keeping the file's length: what a repair does
    /// to the bytes it cuts. A handle of another process may have them mapped (an event's
    /// payload is a view of the map): truncating would make its next touch of a page past the
    /// new end a SIGBUS; zeros read as no batch (SPEC §4), as preallocated space does. Not
    /// synced.
    pub(crate) fn zero_from(&self, len: u64) -> io::Result<()> {
        const CHUNK: u64 = 64 << 10;
        let end = self.file().len()?;
        let room = CHUNK.min(end.saturating_sub(len)) as usize;
        let (zeros, mut read) = (vec![0u8; room], vec![0u8; room]);
        let mut at = len;
        while at < end {
            let n = CHUNK.min(end - at) as usize;
            // Only chunks that hold a byte are written: a file longer than its preallocation
            // (sparse, an outside hand's) is not filled with written zeros.
            let got = read_up_to(self.file().as_ref(), &mut read[..n], at)?;
            if read[..got].iter().any(|&b| b != 0) {
                self.file().write_all_at(&zeros[..n], at)?;
            }
            at += n as u64;
        }
        Ok(())
    }

    /// fdatasync: everything written so far, and the length, durable.
    pub(crate) fn sync(&self) -> io::Result<()> {
        self.file().sync_data()
    }

    /// Seals the segment (SPEC §5 step 3): cuts preallocated zeros past the committed length,
    /// writes the sealed counter `sealed` into its header position and syncs.
    pub(crate) fn seal(&self, sealed: &CounterSlot) -> io::Result<()> {
        self.truncate(sealed.committed_len)?;
        self.write_slot(sealed)?;
        self.sync()
    }

    /// Zero-fills `[end, target)` (preallocation, SPEC §5). Not synced: the commit's own
    /// fdatasync covers it. On failure the file is cut back to `file_len`, best effort (the
    /// zeros are an optimisation; a full disk gives the space to commits).
    pub(crate) fn preallocate(&self, file_len: u64, end: u64, target: u64) -> bool {
        let zeros = vec![0u8; target.saturating_sub(end) as usize];
        match self.file().write_all_at(&zeros, end) {
            Ok(()) => true,
            Err(_) => {
                // Only zeros past the committed length are cut; if this fails too, the next
                // commit writes over them or recovery sees zeros.
                let _ = self.file().set_len(file_len);
                false
            }
        }
    }

    /// What an index of this segment must be bound to: a sealed segment's to its seal
    /// `counter` and a `last_batch_crc` of 0; the open segment's index (SPEC §9) to the
    /// counter it was written at and the checksum of the last batch that counter covers.
    pub(crate) fn index_binding(&self, counter: &CounterSlot, last_batch_crc: u32) -> IndexBinding {
        IndexBinding {
            salt: self.header.salt,
            segment_index: self.header.segment_index,
            base_seq: self.header.base_seq,
            last_seq: counter.last_seq,
            committed_len: counter.committed_len,
            last_batch_crc,
        }
    }

    /// Writes this segment's index (SPEC §9) next to it: a temp file of its own, synced, then
    /// renamed into place (the directory is not synced: an index lost in a crash only means the
    /// segment is decoded instead). The sync before the rename is what lets a reader check a
    /// page only when it reads it: an index that is there under its name after a crash is
    /// whole, never torn past a valid page 0.
    pub(crate) fn write_index(&self, fs: &dyn Fs, bytes: &[u8]) -> io::Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let name = index_name(self.header.segment_index);
        let tmp = dir.join(format!("{name}.tmp-{}", ulid::Ulid::generate()));
        let write = || -> io::Result<()> {
            let f = fs.open(&tmp, OpenMode::CreateTruncate)?;
            f.write_all_at(bytes, 0)?;
            f.sync_data()?;
            fs.rename(&tmp, &dir.join(&name))
        };
        write().inspect_err(|_| {
            let _ = fs.remove_file(&tmp);
        })
    }

    /// This segment's index, when a valid one bound to `counter` and `last_batch_crc` exists
    /// ([`Self::index_binding`]): its page 0 read and checked (nothing mapped, no other page
    /// read; those are checked when a lookup reads them). `None` when it is missing, stale,
    /// of another version or its header is damaged (then the segment is decoded).
    pub(crate) fn open_index(
        &self,
        fs: &dyn Fs,
        counter: &CounterSlot,
        last_batch_crc: u32,
        cache: &Arc<PageCache>,
    ) -> Option<SegmentIndex> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let binding = self.index_binding(counter, last_batch_crc);
        open_index_of(
            fs,
            dir,
            &self.header.run_id,
            &binding,
            counter.sealed,
            cache,
        )
    }

    /// This segment's index when one whose binding `accept` judges exists (the open
    /// segment's index, SPEC §9: bound to a counter of this segment before its seal). The
    /// salt, segment index and base seq must be this segment's whatever `accept` says.
    pub(crate) fn open_index_bound(
        &self,
        fs: &dyn Fs,
        accept: impl Fn(&IndexBinding) -> bool,
        cache: &Arc<PageCache>,
    ) -> Option<SegmentIndex> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let path = dir.join(index_name(self.header.segment_index));
        let f = fs.open(&path, OpenMode::Read).ok()?;
        let h = &self.header;
        SegmentIndex::open_bound(
            f,
            Arc::from(h.run_id.as_str()),
            path,
            h.salt,
            |b| {
                b.salt == h.salt
                    && b.segment_index == h.segment_index
                    && b.base_seq == h.base_seq
                    && accept(b)
            },
            cache.clone(),
        )
    }

    /// Removes this segment's index, if any (best effort: a missing one is fine).
    pub(crate) fn remove_index(&self, fs: &dyn Fs) {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let _ = fs.remove_file(&dir.join(index_name(self.header.segment_index)));
    }

    fn read_error(&self, run: &str, e: io::Error, offset: u64) -> Error {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            Error::corrupt(run, &self.name, offset, "file truncated")
        } else {
            Error::io("reading", &self.path, e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::StdFs;

    fn new_segment(dir: &Path) -> Segment {
        let new = NewSegment {
            run: "wrun_view",
            index: 1,
            base_seq: 1,
            run_created_at_ms: 1,
            now_ms: 1,
            meta: &[],
        };
        Segment::create(&StdFs, dir, &new).expect("segment")
    }

    #[test]
    fn a_view_is_exactly_its_length_and_one_live_map_serves_the_bytes_written_after_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let seg = new_segment(dir.path());
        let h = seg.len().expect("len");
        // Zeros past the committed length, as preallocation leaves them.
        seg.append(&[0u8; 8192], h).expect("zeros");
        seg.append(b"first", h).expect("append");
        let v1 = seg.view("wrun_view", 0, h + 5).expect("view");
        assert_eq!((v1.base, v1.bytes.len() as u64), (0, h + 5));
        assert_eq!(&v1.bytes[h as usize..], b"first");
        // A later commit's bytes, read through the map taken before them.
        seg.append(b"second", h + 5).expect("append");
        let v2 = seg.view("wrun_view", 0, h + 11).expect("view");
        assert_eq!(&v2.bytes[h as usize..], b"firstsecond");
        assert_eq!(
            v1.bytes.as_ptr(),
            v2.bytes.as_ptr(),
            "one map served both views"
        );
        // A shorter length is sliced from the same map.
        let short = seg.view("wrun_view", 0, h).expect("view");
        assert_eq!(short.bytes.len() as u64, h);
        // The map ends with the page: a commit into the next page maps again.
        seg.append(&[7u8; 4096], h + 11).expect("append");
        let v3 = seg.view("wrun_view", 0, h + 11 + 4096).expect("view");
        assert_ne!(v1.bytes.as_ptr(), v3.bytes.as_ptr());
        assert_eq!(&v3.bytes[h as usize..h as usize + 11], b"firstsecond");
        // Past the file's end: the file was cut behind our back.
        let past = seg.view("wrun_view", 0, h + 8192 + 1);
        assert!(matches!(past, Err(Error::Corrupt { .. })), "{past:?}");
    }

    #[test]
    fn a_view_maps_from_where_it_is_asked_and_grows_back_to_cover_an_earlier_read() {
        let dir = tempfile::tempdir().expect("temp dir");
        let seg = new_segment(dir.path());
        let h = seg.len().expect("len");
        let body: Vec<u8> = (0..3 * 4096u32).map(|i| (i % 251) as u8).collect();
        seg.append(&body, h).expect("append");
        let end = h + body.len() as u64;
        // Read from the last page on: the map starts there, not at the file's start.
        let tail = seg.view("wrun_view", h + 2 * 4096 + 10, end).expect("view");
        assert_eq!(tail.base, h + 2 * 4096 + 10);
        assert_eq!(tail.bytes.len() as u64, end - tail.base);
        assert_eq!(&tail.bytes[..], &body[2 * 4096 + 10..]);
        // A read within it is served by the same map.
        let within = seg
            .view("wrun_view", h + 2 * 4096 + 100, end)
            .expect("view");
        assert_eq!(
            (within.base, within.bytes.as_ptr()),
            (tail.base, tail.bytes.as_ptr())
        );
        // A read before it maps from there to the end: both reads in one map from then on.
        let head = seg.view("wrun_view", h, end).expect("view");
        assert_eq!(head.base, h);
        assert_eq!(&head.bytes[..], &body[..]);
        let again = seg.view("wrun_view", h + 2 * 4096 + 10, end).expect("view");
        assert_eq!((again.base, again.bytes.as_ptr()), (h, head.bytes.as_ptr()));
    }
}
