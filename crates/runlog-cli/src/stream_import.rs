//! Streams of a world-local data directory, imported into `runlog-world` streams.
//!
//! The source layout (`docs/world-reference-notes.md` §5.1):
//!
//! ```text
//! <src>/streams/runs/<runId>.json                    {"streams": [name, …]}  (run → names)
//! <src>/streams/chunks/<name>/chnk_<ULID>.bin        flag byte 0x00 + the chunk's bytes,
//!                                                    or the single byte 0x01: end of stream
//! ```
//!
//! The chunk storage is keyed by the stream's name only; a stream belongs to the run whose
//! `streams/runs/<runId>.json` lists its name. The reference reads a stream's chunks in the
//! order of their file names (`chnk_<ULID>`, so write order) and stops at the end marker;
//! chunk `i` of that order becomes chunk `i` of the imported stream, byte for byte, and the
//! end marker closes it. With a tag, `<runId>.<tag>.json` and `chnk_<ULID>.<tag>.bin` are
//! read too (as the tagged store reads them); other tags are skipped.
//!
//! Idempotent: a stream already holding a prefix of the source's chunks (compared byte for
//! byte) is extended with the rest (`extended`), one holding all of them is `unchanged`; one
//! whose chunks differ from the source, or that holds more, is left alone (`conflict`).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use runlog::{RunId, RunLog};
use runlog_world::Streams;
use serde_json::Value;

use crate::import::FileProblem;

/// The directory under the source holding the streams.
pub const STREAMS_DIR: &str = "streams";
/// First byte of a data chunk file.
pub const CHUNK_FLAG_DATA: u8 = 0;
/// The single byte of an end-of-stream file.
pub const CHUNK_FLAG_EOF: u8 = 1;
/// Chunks written per `write_many` call.
const CHUNKS_PER_WRITE: usize = 1000;

/// One stream of the source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceStream {
    /// The run that lists it.
    pub run: String,
    /// Its name.
    pub name: String,
    /// Its data chunks in the reference's order, each without the flag byte.
    pub chunks: Vec<Bytes>,
    /// Whether the end marker was found.
    pub closed: bool,
}

/// What [`discover_streams`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamDiscovery {
    /// Whether the source has a `streams/` directory at all.
    pub present: bool,
    /// The streams, by (run, name).
    pub streams: Vec<SourceStream>,
    /// Files not taken (with the reason): malformed index or chunk files, chunks after the end
    /// marker, chunk directories no run lists, temp files.
    pub problems: Vec<FileProblem>,
}

/// How the import of one stream went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamResult {
    /// The stream did not exist and was written.
    Created,
    /// It held a prefix of the source; the rest was appended (or the close marker).
    Extended,
    /// It already held every chunk (and the close marker when the source has one).
    Unchanged,
    /// It holds chunks that differ from the source's, or more of them: left alone.
    Conflict,
}

impl StreamResult {
    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            StreamResult::Created => "created",
            StreamResult::Extended => "extended",
            StreamResult::Unchanged => "unchanged",
            StreamResult::Conflict => "conflict",
        }
    }
}

/// The outcome of one stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamImport {
    /// What happened.
    pub result: StreamResult,
    /// Chunks appended by this import.
    pub appended: u64,
    /// Chunks that were already there (equal to the source's).
    pub already_present: u64,
    /// Whether the stream is closed after the import.
    pub done: bool,
    /// Why, for a conflict (or a failed write).
    pub problem: Option<String>,
}

fn problem(path: &Path, reason: impl Into<String>) -> FileProblem {
    FileProblem {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// `name` without the `.json`/`.bin` suffix and the selected tag, or why it is not taken:
/// `Ok(None)` for a file of another tag.
fn strip_name<'a>(
    file: &'a str,
    suffix: &str,
    tag: Option<&str>,
) -> Result<Option<&'a str>, &'static str> {
    if file.contains(".tmp.") {
        return Err("leftover temp file (a write the source store never renamed into place)");
    }
    let stem = file.strip_suffix(suffix).ok_or("unexpected file name")?;
    match stem.split_once('.') {
        None => Ok(Some(stem)),
        Some((id, t)) if Some(t) == tag => Ok(Some(id)),
        Some(_) => Ok(None),
    }
}

/// Sorted (file name, path) pairs of a directory; a missing directory is empty.
fn entries(dir: &Path) -> std::io::Result<Vec<(String, PathBuf, bool)>> {
    let mut out = Vec::new();
    let list = match fs::read_dir(dir) {
        Ok(list) => list,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for entry in list {
        let entry = entry?;
        let is_dir = entry.file_type()?.is_dir();
        out.push((
            entry.file_name().to_string_lossy().into_owned(),
            entry.path(),
            is_dir,
        ));
    }
    out.sort();
    Ok(out)
}

/// Reads `<src>/streams`: every run's stream names and every stream's chunks.
///
/// # Errors
/// When `<src>/streams` (or one of its two subdirectories) exists but cannot be listed.
pub fn discover_streams(src: &Path, tag: Option<&str>) -> std::io::Result<StreamDiscovery> {
    let root = src.join(STREAMS_DIR);
    let mut found = StreamDiscovery {
        present: root.is_dir(),
        ..StreamDiscovery::default()
    };
    if !found.present {
        return Ok(found);
    }
    // Run → names, from the run index files.
    let mut owner: BTreeMap<String, String> = BTreeMap::new();
    let mut listed: Vec<(String, String)> = Vec::new();
    for (file, path, is_dir) in entries(&root.join("runs"))? {
        let run = match (is_dir, strip_name(&file, ".json", tag)) {
            (true, _) => {
                found.problems.push(problem(&path, "unexpected directory"));
                continue;
            }
            (false, Ok(Some(run))) => run.to_string(),
            (false, Ok(None)) => continue,
            (false, Err(reason)) => {
                found.problems.push(problem(&path, reason));
                continue;
            }
        };
        let names = fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<Value>(&b).map_err(|e| e.to_string()))
            .and_then(|v| {
                v.get("streams")
                    .and_then(Value::as_array)
                    .and_then(|a| {
                        a.iter()
                            .map(|n| n.as_str().map(str::to_string))
                            .collect::<Option<Vec<_>>>()
                    })
                    .ok_or_else(|| "no \"streams\" array of names".to_string())
            });
        match names {
            Ok(names) => {
                for name in names {
                    if let Some(first) = owner.get(&name) {
                        if *first != run {
                            found.problems.push(problem(
                                &path,
                                format!("stream {name} is also listed by run {first}"),
                            ));
                        }
                        continue;
                    }
                    owner.insert(name.clone(), run.clone());
                    listed.push((run.clone(), name));
                }
            }
            Err(e) => found
                .problems
                .push(problem(&path, format!("not a stream index: {e}"))),
        }
    }
    // Chunks, by stream name.
    let mut chunks_of: BTreeMap<String, (Vec<Bytes>, bool)> = BTreeMap::new();
    for (name, dir, is_dir) in entries(&root.join("chunks"))? {
        if !is_dir {
            found.problems.push(problem(&dir, "unexpected file"));
            continue;
        }
        if !owner.contains_key(&name) {
            found
                .problems
                .push(problem(&dir, "a stream no run lists (not imported)"));
            continue;
        }
        // The reference's order: by chunk id (the file name without tag and suffix).
        let mut files: Vec<(String, PathBuf)> = Vec::new();
        for (file, path, is_dir) in entries(&dir)? {
            match (is_dir, strip_name(&file, ".bin", tag)) {
                (false, Ok(Some(id))) if id.starts_with("chnk_") => {
                    files.push((id.to_string(), path))
                }
                (false, Ok(None)) => {}
                (false, Err(reason)) => found.problems.push(problem(&path, reason)),
                _ => found.problems.push(problem(&path, "unexpected name")),
            }
        }
        files.sort();
        let (mut chunks, mut closed) = (Vec::new(), false);
        for (_, path) in files {
            if closed {
                found.problems.push(problem(
                    &path,
                    "a chunk after the end marker (not imported)",
                ));
                continue;
            }
            match fs::read(&path) {
                Ok(bytes) => match bytes.split_first() {
                    Some((&CHUNK_FLAG_DATA, data)) => chunks.push(Bytes::copy_from_slice(data)),
                    Some((&CHUNK_FLAG_EOF, [])) => closed = true,
                    _ => found.problems.push(problem(
                        &path,
                        "not a chunk file (flag byte 0x00 + data, or the single byte 0x01)",
                    )),
                },
                Err(e) => found
                    .problems
                    .push(problem(&path, format!("unreadable: {e}"))),
            }
        }
        chunks_of.insert(name, (chunks, closed));
    }
    for (run, name) in listed {
        // A listed name without chunks was registered but never written: nothing to import.
        if let Some((chunks, closed)) = chunks_of.remove(&name) {
            found.streams.push(SourceStream {
                run,
                name,
                chunks,
                closed,
            });
        }
    }
    Ok(found)
}

/// Imports one stream into `streams`: the missing chunks, then the close marker.
pub fn import_stream<B: RunLog>(streams: &Streams<B>, source: &SourceStream) -> StreamImport {
    let outcome = |result, appended, already_present, done, problem: Option<String>| StreamImport {
        result,
        appended,
        already_present,
        done,
        problem,
    };
    let failed = |e: String| outcome(StreamResult::Conflict, 0, 0, false, Some(e));
    let run = match RunId::new(source.run.as_str()) {
        Ok(run) => run,
        Err(e) => return failed(format!("run id {}: {e}", source.run)),
    };
    let name = source.name.as_str();
    let info = match streams.info(&run, name) {
        Ok(info) => info,
        Err(e) => return failed(e.to_string()),
    };
    let have = u64::try_from(info.tail_index + 1).unwrap_or(0);
    let total = source.chunks.len() as u64;
    if have > total || (info.done && (have < total || !source.closed)) {
        return outcome(
            StreamResult::Conflict,
            0,
            0,
            info.done,
            Some(format!(
                "the stored stream has {have} chunks{} but the source {total}{}",
                if info.done { " and is closed" } else { "" },
                if source.closed {
                    " and an end marker"
                } else {
                    ""
                }
            )),
        );
    }
    // The stored chunks must equal the source's prefix, byte for byte.
    let mut index = 0u64;
    while index < have {
        let read = match streams.read(&run, name, index as i64, CHUNKS_PER_WRITE) {
            Ok(read) => read,
            Err(e) => return failed(e.to_string()),
        };
        if read.chunks.is_empty() {
            break;
        }
        for chunk in read.chunks {
            let Some(want) = source.chunks.get(chunk.index as usize) else {
                break;
            };
            if chunk.data != *want {
                return outcome(
                    StreamResult::Conflict,
                    0,
                    have,
                    info.done,
                    Some(format!(
                        "stored chunk {} differs from the source's",
                        chunk.index
                    )),
                );
            }
        }
        index = read.next_index;
    }
    let mut appended = 0u64;
    for batch in source.chunks[have as usize..].chunks(CHUNKS_PER_WRITE) {
        match streams.write_many(&run, name, batch.iter().cloned()) {
            Ok(range) => appended += range.end - range.start,
            Err(e) => return failed(e.to_string()),
        }
    }
    let mut closed_now = false;
    if source.closed && !info.done {
        if let Err(e) = streams.close(&run, name) {
            return failed(e.to_string());
        }
        closed_now = true;
    }
    let result = if have == 0 && !info.done && info.tail_index < 0 && (appended > 0 || closed_now) {
        StreamResult::Created
    } else if appended > 0 || closed_now {
        StreamResult::Extended
    } else {
        StreamResult::Unchanged
    };
    outcome(result, appended, have, source.closed, None)
}
