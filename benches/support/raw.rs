//! The physical ceiling: each writer appends framed events (length, crc32, kind, payload —
//! the same bytes a log store writes) to its own file and `fdatasync`s. No seq, no fence, no
//! index, no sharing between writers.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::{BenchResult, Ev, Peer, ReadStat, Session};

/// Frame header: u32 body length, u32 crc32 of the body.
const FRAME_HEADER_LEN: usize = 8;

/// Raw files in one directory.
pub struct RawPeer {
    dir: PathBuf,
    sessions: AtomicU64,
}

impl RawPeer {
    /// Uses `dir` (existing) for the files.
    pub fn open(dir: &Path) -> BenchResult<RawPeer> {
        Ok(RawPeer {
            dir: dir.to_path_buf(),
            sessions: AtomicU64::new(0),
        })
    }

    fn load_path(&self, run: &str) -> PathBuf {
        self.dir.join(format!("{run}.load"))
    }
}

impl Peer for RawPeer {
    fn name(&self) -> &'static str {
        "raw"
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
        }))
    }

    fn bulk_load(&self, run: &str, events: &[Ev]) -> BenchResult<()> {
        let mut buf = Vec::new();
        for ev in events {
            frame_into(&mut buf, ev);
        }
        let mut file = File::create(self.load_path(run))?;
        file.write_all(&buf)?;
        file.sync_data()?;
        File::open(&self.dir)?.sync_all()?;
        Ok(())
    }
}

struct RawSession {
    dir: PathBuf,
    id: u64,
    files: HashMap<String, File>,
    buf: Vec<u8>,
}

impl RawSession {
    fn file(&mut self, run: &str) -> BenchResult<&mut File> {
        if !self.files.contains_key(run) {
            let path = self.dir.join(format!("{run}.w{}", self.id));
            let file = OpenOptions::new().create(true).append(true).open(path)?;
            File::open(&self.dir)?.sync_all()?;
            self.files.insert(run.to_string(), file);
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
        let result = self.file(run).and_then(|f| {
            f.write_all(&buf)?;
            f.sync_data()?;
            Ok(())
        });
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
        let mut bytes = Vec::new();
        File::open(self.dir.join(format!("{run}.load")))?.read_to_end(&mut bytes)?;
        parse_frames(&bytes)
    }

    fn read_after(&mut self, _: &str, _: u64, _: usize) -> BenchResult<Option<ReadStat>> {
        Ok(None)
    }
}

fn frame_into(buf: &mut Vec<u8>, ev: &Ev) {
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

fn parse_frames(mut bytes: &[u8]) -> BenchResult<ReadStat> {
    let mut stat = ReadStat::default();
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
        stat.add(body.len() - 1 - kind.len());
        bytes = &bytes[FRAME_HEADER_LEN + body_len..];
    }
    Ok(stat)
}
