//! The archive codec (`format/SPEC.md` §11): pure bytes, no I/O.
//!
//! An archive holds whole logs: each log's metadata and every event with its seq, event id,
//! creation time, kind, correlation id, key and payload. It is a 32-byte header and a chain
//! of records, each checksummed with the previous record's checksum as the seed (the first
//! with the header's), so a record is valid only at its own place in its own file: stale
//! bytes of another archive, a dropped or a reordered record cannot validate.

use ulid::Ulid;

use crate::error::{Error, Result};
use crate::event::{Event, KIND_LEN_MAX, RunId, Seq};

/// The first 8 bytes of every archive file.
pub const ARCHIVE_MAGIC: &[u8; 8] = b"rlarch1\0";
/// The archive format version this build writes and reads.
pub const ARCHIVE_VERSION: u32 = 1;
/// The length of the file header, in bytes.
pub const HEADER_LEN: usize = 32;
/// The seed of the header's checksum.
pub const HEADER_SEED: u32 = 0x4152_4348; // "ARCH"
/// The longest record body accepted: a 16 MiB payload plus its event's fields.
pub const RECORD_BODY_LEN_MAX: u32 = (16 << 20) + 4096;

const RECORD_LOG: u8 = 1;
const RECORD_EVENT: u8 = 2;
const RECORD_END: u8 = 3;
/// Type byte + body length before the body, checksum after it.
const RECORD_FRAME_LEN: usize = 1 + 4 + 4;

/// One archived log: a run's event log, or one of its auxiliary logs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchivedLog {
    /// The log's run id in the store.
    pub run: RunId,
    /// The metadata blob the log was created with.
    pub meta: Vec<u8>,
    /// Every event, seqs 1, 2, 3, … (dense).
    pub events: Vec<Event>,
}

/// A decoded archive file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Archive {
    /// When the archive was written, ms since the Unix epoch.
    pub archived_at_ms: u64,
    /// The per-file salt the checksum chain is seeded with.
    pub salt: u32,
    /// The logs, in file order.
    pub logs: Vec<ArchivedLog>,
}

impl Archive {
    /// The log with run id `run`, if the archive holds it.
    pub fn log(&self, run: &str) -> Option<&ArchivedLog> {
        self.logs.iter().find(|l| l.run.as_str() == run)
    }

    /// Events in all logs.
    pub fn event_count(&self) -> u64 {
        self.logs.iter().map(|l| l.events.len() as u64).sum()
    }
}

fn checksum(seed: u32, bytes: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new_with_initial(seed);
    h.update(bytes);
    h.finalize()
}

/// Encodes `archive` into the bytes of an archive file.
///
/// # Errors
/// `InvalidEvent` when a log's events are not dense from seq 1, or a field exceeds its
/// length field (never for logs read from a store).
pub fn encode(archive: &Archive) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(HEADER_LEN + 256);
    out.extend_from_slice(ARCHIVE_MAGIC);
    out.extend_from_slice(&ARCHIVE_VERSION.to_le_bytes());
    out.extend_from_slice(&archive.salt.to_le_bytes());
    out.extend_from_slice(&archive.archived_at_ms.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    let mut chain = checksum(HEADER_SEED, &out);
    out.extend_from_slice(&chain.to_le_bytes());
    let mut body = Vec::new();
    for log in &archive.logs {
        body.clear();
        log_body(log, &mut body)?;
        chain = push_record(&mut out, RECORD_LOG, &body, chain);
        for (i, e) in log.events.iter().enumerate() {
            if e.seq != i as Seq + 1 {
                return Err(invalid(
                    "seq",
                    format!("log {} is not dense at seq {}", log.run, e.seq),
                ));
            }
            body.clear();
            event_body(e, &mut body)?;
            chain = push_record(&mut out, RECORD_EVENT, &body, chain);
        }
    }
    body.clear();
    body.extend_from_slice(&(archive.logs.len() as u32).to_le_bytes());
    body.extend_from_slice(&archive.event_count().to_le_bytes());
    push_record(&mut out, RECORD_END, &body, chain);
    Ok(out)
}

fn invalid(field: &'static str, reason: String) -> Error {
    Error::InvalidEvent { field, reason }
}

fn push_record(out: &mut Vec<u8>, ty: u8, body: &[u8], seed: u32) -> u32 {
    let start = out.len();
    out.push(ty);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(body);
    let crc = checksum(seed, &out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
    crc
}

fn log_body(log: &ArchivedLog, out: &mut Vec<u8>) -> Result<()> {
    let id = log.run.as_str().as_bytes();
    out.push(id.len() as u8);
    out.extend_from_slice(id);
    let meta_len = u16::try_from(log.meta.len())
        .map_err(|_| invalid("meta", format!("{} bytes", log.meta.len())))?;
    out.extend_from_slice(&meta_len.to_le_bytes());
    out.extend_from_slice(&log.meta);
    out.extend_from_slice(&(log.events.len() as u64).to_le_bytes());
    Ok(())
}

fn event_body(e: &Event, out: &mut Vec<u8>) -> Result<()> {
    out.extend_from_slice(&e.seq.to_le_bytes());
    out.extend_from_slice(&e.event_id.to_bytes());
    out.extend_from_slice(&e.created_at_ms.to_le_bytes());
    if e.kind.len() > KIND_LEN_MAX {
        return Err(invalid("kind", format!("{} bytes", e.kind.len())));
    }
    out.push(e.kind.len() as u8);
    out.extend_from_slice(e.kind.as_bytes());
    push_optional(out, e.correlation_id.as_deref(), "correlation_id")?;
    push_optional(out, e.key.as_deref(), "key")?;
    let len = u32::try_from(e.payload.len())
        .map_err(|_| invalid("payload", format!("{} bytes", e.payload.len())))?;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&e.payload);
    Ok(())
}

/// An optional string: its length + 1 as u16 (0 = absent), then its bytes.
fn push_optional(out: &mut Vec<u8>, s: Option<&str>, field: &'static str) -> Result<()> {
    let tag = match s {
        None => 0u16,
        Some(s) => u16::try_from(s.len() + 1)
            .ok()
            .filter(|&n| n < u16::MAX)
            .ok_or_else(|| invalid(field, format!("{} bytes", s.len())))?,
    };
    out.extend_from_slice(&tag.to_le_bytes());
    out.extend_from_slice(s.unwrap_or("").as_bytes());
    Ok(())
}

/// Where a decode failed: the archive's file name (for the error) and the run it is of.
struct Ctx<'a> {
    file: &'a str,
    run: &'a str,
}

impl Ctx<'_> {
    fn corrupt(&self, offset: usize, detail: impl Into<String>) -> Error {
        Error::corrupt(self.run, self.file, offset as u64, detail)
    }
}

/// Decodes and validates a whole archive file: the header, every record's checksum in the
/// chain, the density of each log's seqs (1, 2, …, its event count), the end record's
/// counts, and that nothing follows it. `file` and `run` name the archive in errors.
///
/// # Errors
/// `Corrupt { run, segment: file, offset, detail }` at the first problem;
/// `UnsupportedVersion`-like problems are `Corrupt` too (an archive is not a store).
pub fn decode(bytes: &[u8], file: &str, run: &str) -> Result<Archive> {
    let ctx = Ctx { file, run };
    let mut chain = decode_header(bytes, &ctx)?;
    let mut archive = Archive {
        archived_at_ms: u64_at(bytes, 16),
        salt: u32_at(bytes, 12),
        logs: Vec::new(),
    };
    let mut at = HEADER_LEN;
    let mut expected_events: u64 = 0;
    loop {
        let (ty, body, next, crc) = record_at(bytes, at, chain, &ctx)?;
        chain = crc;
        let current = archive.logs.last_mut();
        match (ty, current) {
            (RECORD_EVENT, Some(log)) if (log.events.len() as u64) < expected_events => {
                let e = decode_event(body, at, &ctx)?;
                let want = log.events.len() as Seq + 1;
                if e.seq != want {
                    return Err(ctx.corrupt(
                        at,
                        format!(
                            "log {}: seq {} where {want} belongs (density)",
                            log.run, e.seq
                        ),
                    ));
                }
                log.events.push(e);
            }
            (RECORD_LOG | RECORD_END, ref current)
                if current
                    .as_ref()
                    .is_none_or(|l| l.events.len() as u64 == expected_events) =>
            {
                if ty == RECORD_END {
                    decode_end(body, at, next, bytes.len(), &archive, &ctx)?;
                    return Ok(archive);
                }
                let (log, count) = decode_log(body, at, &ctx)?;
                expected_events = count;
                archive.logs.push(log);
            }
            _ => return Err(ctx.corrupt(at, format!("record type {ty} out of place"))),
        }
        at = next;
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

fn decode_header(bytes: &[u8], ctx: &Ctx<'_>) -> Result<u32> {
    if bytes.len() < HEADER_LEN {
        return Err(ctx.corrupt(
            0,
            format!("{} bytes, shorter than the 32-byte header", bytes.len()),
        ));
    }
    if &bytes[0..8] != ARCHIVE_MAGIC {
        return Err(ctx.corrupt(0, "not a runlog archive (bad magic)"));
    }
    let crc = checksum(HEADER_SEED, &bytes[..28]);
    if crc != u32_at(bytes, 28) {
        return Err(ctx.corrupt(28, "archive header checksum mismatch"));
    }
    let version = u32_at(bytes, 8);
    if version != ARCHIVE_VERSION {
        return Err(ctx.corrupt(
            8,
            format!("archive version {version}; this build reads {ARCHIVE_VERSION}"),
        ));
    }
    Ok(crc)
}

/// The record at `at`: its type, body, the offset after it, and its checksum.
fn record_at<'b>(
    bytes: &'b [u8],
    at: usize,
    seed: u32,
    ctx: &Ctx<'_>,
) -> Result<(u8, &'b [u8], usize, u32)> {
    if bytes.len() < at + RECORD_FRAME_LEN {
        return Err(ctx.corrupt(at, "truncated: the archive ends before its end record"));
    }
    let ty = bytes[at];
    let len = u32_at(bytes, at + 1);
    if len > RECORD_BODY_LEN_MAX || bytes.len() - at - RECORD_FRAME_LEN < len as usize {
        return Err(ctx.corrupt(
            at,
            format!("record length {len} runs past the end of the file"),
        ));
    }
    let end = at + 5 + len as usize;
    let crc = checksum(seed, &bytes[at..end]);
    if crc != u32_at(bytes, end) {
        return Err(ctx.corrupt(at, "record checksum mismatch"));
    }
    if !(RECORD_LOG..=RECORD_END).contains(&ty) {
        return Err(ctx.corrupt(at, format!("unknown record type {ty}")));
    }
    Ok((ty, &bytes[at + 5..end], end + 4, crc))
}

/// Reads fields off a record body; every read is bounds-checked.
struct Body<'b> {
    bytes: &'b [u8],
    at: usize,
}

impl<'b> Body<'b> {
    fn take(&mut self, n: usize) -> Option<&'b [u8]> {
        let s = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|b| u32_at(b, 0))
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8).map(|b| u64_at(b, 0))
    }
    fn text(&mut self, n: usize) -> Option<String> {
        self.take(n)
            .and_then(|b| String::from_utf8(b.to_vec()).ok())
    }
    fn optional(&mut self) -> Option<Option<String>> {
        match self.u16()? {
            0 => Some(None),
            n => self.text(n as usize - 1).map(Some),
        }
    }
    fn done(&self) -> bool {
        self.at == self.bytes.len()
    }
}

fn decode_log(body: &[u8], at: usize, ctx: &Ctx<'_>) -> Result<(ArchivedLog, u64)> {
    let mut b = Body { bytes: body, at: 0 };
    let parsed = (|| {
        let id_len = b.u8()? as usize;
        let id = b.text(id_len)?;
        let meta_len = b.u16()? as usize;
        let meta = b.take(meta_len)?.to_vec();
        let count = b.u64()?;
        Some((id, meta, count))
    })();
    let Some((id, meta, count)) = parsed.filter(|_| b.done()) else {
        return Err(ctx.corrupt(at, "malformed log record"));
    };
    let run = RunId::new(&id).map_err(|_| ctx.corrupt(at, format!("invalid log id {id:?}")))?;
    let log = ArchivedLog {
        run,
        meta,
        events: Vec::new(),
    };
    Ok((log, count))
}

fn decode_event(body: &[u8], at: usize, ctx: &Ctx<'_>) -> Result<Event> {
    let mut b = Body { bytes: body, at: 0 };
    let parsed = (|| {
        let seq = b.u64()?;
        let mut id = [0u8; 16];
        id.copy_from_slice(b.take(16)?);
        let created_at_ms = b.u64()?;
        let kind_len = b.u8()? as usize;
        let kind = b.text(kind_len)?;
        let correlation_id = b.optional()?;
        let key = b.optional()?;
        let payload_len = b.u32()? as usize;
        let payload = b.take(payload_len)?.to_vec().into();
        Some(Event {
            seq,
            event_id: Ulid::from_bytes(id),
            created_at_ms,
            kind: kind.into(),
            correlation_id: correlation_id.map(Into::into),
            key: key.map(Into::into),
            payload,
        })
    })();
    parsed
        .filter(|_| b.done())
        .ok_or_else(|| ctx.corrupt(at, "malformed event record"))
}

fn decode_end(
    body: &[u8],
    at: usize,
    next: usize,
    file_len: usize,
    archive: &Archive,
    ctx: &Ctx<'_>,
) -> Result<()> {
    let mut b = Body { bytes: body, at: 0 };
    let counts = (|| Some((b.u32()?, b.u64()?)))().filter(|_| b.done());
    let want = (archive.logs.len() as u32, archive.event_count());
    if counts != Some(want) {
        return Err(ctx.corrupt(
            at,
            format!("end record counts {counts:?}, the archive holds {want:?} (logs, events)"),
        ));
    }
    if next != file_len {
        return Err(ctx.corrupt(
            next,
            format!("{} bytes after the end record", file_len - next),
        ));
    }
    Ok(())
}
