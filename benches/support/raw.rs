//! The physical ceiling: each writer appends framed events (length, crc32, kind, payload —
//! the same bytes a log store writes) to its own file and `fdatasync`s. No seq, no fence, no
//! index, no sharing between writers.
//!
//! Two flavours here: `raw` appends (every `fdatasync` also writes the inode: the size
//! changed), `raw-pre` overwrites space zero-filled ahead of time in
//! [`PREALLOC_STEP_BYTES`] steps (an `fdatasync` then flushes data only) — the ceiling for a
//! log that preallocates. Writers never share a file, so with N writers on one run each
//! append still pays its own `fdatasync`: `raw_group.rs` is the ceiling with group commit.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

use super::{BenchResult, Ev, Peer, ReadStat, Session};

/// Frame header: u32 body length, u32 crc32 of the body.
const FRAME_HEADER_LEN: usize = 8;
/// `raw-pre` zero-fills this much ahead of the write position (and syncs it) at a time.
pub const PREALLOC_STEP_BYTES: u64 = 1 << 20;

/// Raw files in one directory.
pub struct RawPeer {
    dir: PathBuf,
    sessions: AtomicU64,
    prealloc: bool,
}

impl RawPeer {
    /// Uses `dir` (existing) for the files; `prealloc` selects `raw-pre`.
    pub fn open(dir: &Path, prealloc: bool) -> BenchResult<RawPeer> {
        Ok(RawPeer {
            dir: dir.to_path_buf(),
            sessions: AtomicU64::new(0),
            prealloc,
        })
    }
}

/// Where [`write_load`] puts a bulk-loaded run.
fn load_path(dir: &Path, run: &str) -> PathBuf {
    dir.join(format!("{run}.load"))
}

/// A bulk load: `events` framed into `<dir>/<run>.load` with one write and one sync.
pub fn write_load(dir: &Path, run: &str, events: &[Ev]) -> BenchResult<()> {
    let mut buf = Vec::new();
    for ev in events {
        frame_into(&mut buf, ev);
    }
    let mut file = File::create(load_path(dir, run))?;
    file.write_all(&buf)?;
    file.sync_data()?;
    File::open(dir)?.sync_all()?;
    Ok(())
}

/// A full read of a bulk-loaded run: the file into memory, every frame checked and walked.
pub fn read_load(dir: &Path, run: &str) -> BenchResult<ReadStat> {
    let mut bytes = Vec::new();
    File::open(load_path(dir, run))?.read_to_end(&mut bytes)?;
    let mut stat = ReadStat::default();
    for_each_frame(&bytes, |_, payload| stat.add(payload.len()))?;
    Ok(stat)
}

/// Events per page of [`read_load_owned`], as the runlog peer reads (`READ_PAGE_EVENTS`).
const OWNED_PAGE_EVENTS: usize = 1024;

/// What an owned read hands out at the least: a kind it owns and a payload that outlives the
/// read's buffer. runlog's `Event` is this plus a correlation id and a key (owned too, when
/// present), an event id, a creation time and a seq, which the raw frame does not hold.
struct OwnedFrame {
    kind: String,
    payload: Bytes,
}

/// [`read_load`] handing out owned events, a page of [`OWNED_PAGE_EVENTS`] at a time, as an
/// owned read of a log store must (runlog's `read` fills a `Vec<Event>` per page): each
/// kind a `String`, each payload a view of the file's buffer. The ceiling of an owned read.
pub fn read_load_owned(dir: &Path, run: &str) -> BenchResult<ReadStat> {
    let mut bytes = Vec::new();
    File::open(load_path(dir, run))?.read_to_end(&mut bytes)?;
    let file = Bytes::from(bytes);
    let mut stat = ReadStat::default();
    let mut page: Vec<OwnedFrame> = Vec::with_capacity(OWNED_PAGE_EVENTS);
    let mut hand_out = |page: &mut Vec<OwnedFrame>| {
        for event in page.drain(..) {
            stat.add(std::hint::black_box(&event).payload.len());
            debug_assert!(!event.kind.is_empty());
        }
    };
    for_each_frame(&file, |kind, payload| {
        page.push(OwnedFrame {
            kind: kind.to_owned(),
            payload: file.slice_ref(payload),
        });
        if page.len() == OWNED_PAGE_EVENTS {
            hand_out(&mut page);
        }
    })?;
    hand_out(&mut page);
    Ok(stat)
}

impl Peer for RawPeer {
    fn name(&self) -> &'static str {
        if self.prealloc { "raw-pre" } else { "raw" }
    }

    fn create_run(&self, _run: &str) -> BenchResult<()> {
        Ok(())
    }

    fn session(&self) -> BenchResult<Box<dyn Session>> {
        Ok(Box::new(RawSession {
            dir: self.dir.clone(),
            id: self.sessions.fetch_add(1, Ordering::Relaxed),
            files: HashMap::new(),
            buf: Vec::new(),
            prealloc: self.prealloc,
        }))
    }

    fn bulk_load(&self, run: &str, events: &[Ev]) -> BenchResult<()> {
        write_load(&self.dir, run, events)
    }
}

struct RawSession {
    dir: PathBuf,
    id: u64,
    files: HashMap<String, RawFile>,
    buf: Vec<u8>,
    prealloc: bool,
}

/// One writer's file: where the next frame goes, and how far it is zero-filled.
pub struct RawFile {
    file: File,
    write_pos: u64,
    filled_len: u64,
}

impl RawFile {
    /// Creates (truncating) the file at `path` in `dir` and syncs `dir`.
    pub fn create(dir: &Path, path: &Path) -> BenchResult<RawFile> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(path)?;
        File::open(dir)?.sync_all()?;
        Ok(RawFile {
            file,
            write_pos: 0,
            filled_len: 0,
        })
    }

    /// Writes `buf` at the write position and syncs; with `prealloc`, first zero-fills (and
    /// syncs) the next step when `buf` would cross the filled length.
    pub fn append(&mut self, buf: &[u8], prealloc: bool) -> BenchResult<()> {
        let end = self.write_pos + buf.len() as u64;
        if prealloc && end > self.filled_len {
            let step = vec![0u8; usize::try_from(PREALLOC_STEP_BYTES)?];
            while end > self.filled_len {
                self.file.write_all_at(&step, self.filled_len)?;
                self.filled_len += PREALLOC_STEP_BYTES;
            }
            self.file.sync_data()?;
        }
        self.file.write_all_at(buf, self.write_pos)?;
        self.file.sync_data()?;
        self.write_pos = end;
        Ok(())
    }
}

impl RawSession {
    fn file(&mut self, run: &str) -> BenchResult<&mut RawFile> {
        if !self.files.contains_key(run) {
            let path = self.dir.join(format!("{run}.w{}", self.id));
            let raw = RawFile::create(&self.dir, &path)?;
            self.files.insert(run.to_string(), raw);
        }
        self.files
            .get_mut(run)
            .ok_or_else(|| "raw file vanished".into())
    }

    fn write_frames(&mut self, run: &str, evs: &[Ev]) -> BenchResult<()> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        for ev in evs {
            frame_into(&mut buf, ev);
        }
        let prealloc = self.prealloc;
        let result = self.file(run).and_then(|f| f.append(&buf, prealloc));
        self.buf = buf;
        result
    }
}

impl Session for RawSession {
    fn append_fact(&mut self, run: &str, ev: &Ev) -> BenchResult<u64> {
        self.write_frames(run, std::slice::from_ref(ev))?;
        Ok(0)
    }

    fn append_decisions(&mut self, run: &str, expected: u64, evs: &[Ev]) -> BenchResult<u64> {
        self.write_frames(run, evs)?;
        Ok(expected + evs.len() as u64)
    }

    fn read_all(&mut self, run: &str) -> BenchResult<ReadStat> {
        read_load_owned(&self.dir, run)
    }

    fn read_after(&mut self, _: &str, _: u64, _: usize) -> BenchResult<Option<ReadStat>> {
        Ok(None)
    }

    /// Frames parsed in place.
    fn read_all_borrowed(&mut self, run: &str) -> BenchResult<Option<ReadStat>> {
        read_load(&self.dir, run).map(Some)
    }
}

/// Appends `ev`'s frame (length, crc32, kind, payload) to `buf`.
pub fn frame_into(buf: &mut Vec<u8>, ev: &Ev) {
    let kind_len = u8::try_from(ev.kind.len()).unwrap_or(u8::MAX);
    let body_len = 1 + usize::from(kind_len) + ev.payload.len();
    let start = buf.len();
    buf.extend_from_slice(&u32::try_from(body_len).unwrap_or(u32::MAX).to_le_bytes());
    buf.extend_from_slice(&[0; 4]);
    buf.push(kind_len);
    buf.extend_from_slice(&ev.kind.as_bytes()[..usize::from(kind_len)]);
    buf.extend_from_slice(&ev.payload);
    let crc = crc32fast::hash(&buf[start + FRAME_HEADER_LEN..]);
    buf[start + 4..start + FRAME_HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
}

/// Checks every frame of `bytes` (checksum, lengths, the kind as UTF-8) and hands its kind
/// and payload to `f`, in order.
fn for_each_frame<'a>(
    mut bytes: &'a [u8],
    mut f: impl FnMut(&'a str, &'a [u8]),
) -> BenchResult<()> {
    while !bytes.is_empty() {
        let header = bytes
            .get(..FRAME_HEADER_LEN)
            .ok_or("torn raw frame header")?;
        let body_len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
        let body = bytes
            .get(FRAME_HEADER_LEN..FRAME_HEADER_LEN + body_len)
            .ok_or("torn raw frame body")?;
        if crc32fast::hash(body) != crc {
            return Err("raw frame checksum mismatch".into());
        }
        let kind_len = usize::from(*body.first().ok_or("empty raw frame")?);
        let kind = std::str::from_utf8(body.get(1..1 + kind_len).ok_or("short raw kind")?)?;
        f(kind, &body[1 + kind_len..]);
        bytes = &bytes[FRAME_HEADER_LEN + body_len..];
    }
    Ok(())
}
