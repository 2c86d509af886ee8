//! Streams: a workflow run's named streams of binary chunks, each an append-only runlog log
//! of its own (`docs/WORLD.md` §4), on any [`RunLog`] backend.
//!
//! A stream is one run of the backend ([`Streams::chunk_log_id`] derives its id from the
//! workflow run id and the stream name; `streams/id.rs` has the layout). Chunk `i` is the
//! event at seq `i + 1`, so indexes are dense and every chunk is checksummed by the store;
//! [`Streams::close`] appends the close marker, after which nothing is ever appended.
//! Reading from chunk `i` is a read after seq `i`, which the store finds through its batch
//! index: a page costs the same at chunk 10 and at chunk 100,000 (the reference lists every
//! chunk file of the stream on each read and poll). A live reader waits on the stream's log
//! ([`Streams::wait`]): woken at once by commits in this process, by counter polling across
//! processes, like `runlog tail --follow`.
//!
//! Writes are fenced at the log's last seq after checking that it is not the close marker,
//! so "not closed" and "appended" are one atomic step: a write racing a close either lands
//! before the marker or fails with [`StreamError::Closed`], never after it. Concurrent writers
//! to one stream get dense, distinct indexes (a writer that loses the race looks again).
//!
//! Each workflow run also has an index log with one fact per stream name, keyed by the
//! stream's log id (so registering twice appends nothing), written before the stream's log is
//! created: [`Streams::list`] reads that run's index, never the store's run list, and gives
//! names in first-write order, as the reference does.
//!
//! A stream nobody has written yet reads as empty and open (`tail_index` −1, not done), as in
//! the reference, so a reader may start before the writer: there is no "not found".
//!
//! ```
//! use runlog::{Config, RunId, Store};
//! use runlog_world::streams::{StreamError, Streams};
//! use std::time::Duration;
//!
//! # fn main() -> Result<(), StreamError> {
//! # let tmp = tempfile::tempdir().unwrap();
//! let streams = Streams::new(Store::open(tmp.path().join("store"), Config::default())?);
//! let run = RunId::new("wrun_01J9ZKZ8T5X6Q0N3F4G7H8J9KM")?;
//! let name = "strm_01J9ZKZ8T5X6Q0N3F4G7H8J9KM_user";
//!
//! assert_eq!(streams.write(&run, name, &b"hello"[..])?, 0);
//! assert_eq!(streams.write_many(&run, name, [&b"a\0b"[..], b""])?, 1..3);
//! streams.close(&run, name)?;
//! assert!(matches!(streams.write(&run, name, &b"late"[..]), Err(StreamError::Closed { .. })));
//!
//! let last_two = streams.read(&run, name, -2, 100)?; // negative: from the end
//! assert_eq!(last_two.chunks[0].data, &b"a\0b"[..]);
//! assert!(last_two.done);
//! let page = streams.get_chunks(&run, name, None, Some(2))?;
//! assert_eq!((page.data.len(), page.has_more, page.cursor.as_deref()), (2, true, Some("2")));
//! let info = streams.info(&run, name)?;
//! assert_eq!((info.tail_index, info.done), (2, true));
//! assert_eq!(streams.list(&run)?, [name]);
//! // A follower: read from where it is, wait for more, until done.
//! let info = streams.wait(&run, name, 3, Duration::from_secs(1))?;
//! assert!(info.done);
//! # Ok(())
//! # }
//! ```

mod error;
pub(crate) mod id;

pub use error::StreamError;
pub use id::{INDEX_META_MAGIC, LOG_ID_PREFIX, NAME_LEN_BYTES_MAX, STREAM_META_MAGIC};

use std::ops::Range;
use std::time::{Duration, Instant};

use bytes::Bytes;
use runlog::{EventRef, NewEvent, RunId, RunLog, Seq};

use crate::fenced::{self, Attempted};
use error::clip;

type Result<T> = std::result::Result<T, StreamError>;

/// Most chunks in one page ([`Streams::get_chunks`], [`Streams::read`]), as the reference's
/// interface says. A larger limit is [`StreamError::InvalidLimit`] (the reference's local
/// store takes any limit; its interface documents this maximum).
pub const CHUNKS_PER_PAGE_MAX: usize = 1000;
/// The page size of [`Streams::get_chunks`] when none is given (the reference's default).
pub const CHUNKS_PER_PAGE_DEFAULT: usize = 100;
/// How many times one write looks again after other writers (or the close marker) took the
/// index it was about to write at, before giving up with [`StreamError::Contended`]. Every
/// lost race is another append's commit, so the stream as a whole always progresses.
pub const WRITE_ATTEMPTS_MAX: u32 = 1000;

/// Event kind of a chunk in a stream's log; the payload is the chunk, byte for byte.
const CHUNK_KIND: &str = "chunk";
/// Event kind of the close marker (empty payload, key [`CLOSE_KEY`]): the last event.
const CLOSE_KIND: &str = "close";
/// The close marker's idempotency key: a second close appends nothing.
const CLOSE_KEY: &str = "close";
/// Event kind of a name in a run's index log (payload: the name, key: its log id).
const NAME_KIND: &str = "stream";
/// How often [`Streams::wait`] looks for a stream whose log does not exist yet (the store
/// can only wait on an existing run).
const MISSING_LOG_POLL: Duration = Duration::from_millis(10);

/// One chunk and its 0-based index in the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamChunk {
    /// Position in the stream: dense, from 0 (the chunk's seq in its log minus 1).
    pub index: u64,
    /// The chunk exactly as written (any bytes, NUL included; possibly empty).
    pub data: Bytes,
}

/// A page of [`Streams::get_chunks`] (the reference's `StreamChunksResponse`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkPage {
    /// Chunks in index order, dense, starting at the cursor's index.
    pub data: Vec<StreamChunk>,
    /// The cursor of the next page; `Some` exactly when `has_more`.
    pub cursor: Option<String>,
    /// Whether chunks past this page were already written when it was read.
    pub has_more: bool,
    /// Whether the stream is closed and this page reached its end.
    pub done: bool,
}

/// What [`Streams::read`] returns: chunks from a start index, and where to go on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkRead {
    /// Chunks in index order, dense, from the resolved start index. Empty chunks are
    /// included (the reference's live reader skips them on delivery; their index counts).
    pub chunks: Vec<StreamChunk>,
    /// The index to read (or [`Streams::wait`]) from next: start + `chunks.len()`.
    pub next_index: u64,
    /// Whether chunks past `next_index` were already written.
    pub has_more: bool,
    /// Whether the stream is closed and nothing follows `next_index`: the reader is finished.
    pub done: bool,
}

/// [`Streams::info`] (the reference's `StreamInfoResponse`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamInfo {
    /// Index of the last chunk written; −1 when none was.
    pub tail_index: i64,
    /// Whether the stream is closed.
    pub done: bool,
}

/// The streams of every workflow run, over one backend (`B` is typically `runlog::Store` or
/// `Arc<Store>`). Cheap to share by reference across threads; holds no state of its own
/// (only a cache of the store's record of collected runs, brought up to date at each use), so
/// any number of handles in any number of processes see the same streams.
#[derive(Debug)]
pub struct Streams<B> {
    log: B,
    /// What this handle has read of the runs gc collected (`collected.rs`), refreshed at each
    /// lookup: a cache of the store, never a state of its own.
    collected: crate::collected::CollectedRuns,
}

/// A stream log's last seq and whether that event is the close marker.
#[derive(Clone, Copy, Debug)]
struct Tail {
    last: Seq,
    closed: bool,
}

impl Tail {
    fn chunk_count(self) -> u64 {
        self.last - u64::from(self.closed)
    }

    fn info(tail: Option<Tail>) -> StreamInfo {
        match tail {
            None => StreamInfo {
                tail_index: -1,
                done: false,
            },
            Some(t) => StreamInfo {
                tail_index: i64::try_from(t.chunk_count()).unwrap_or(i64::MAX) - 1,
                done: t.closed,
            },
        }
    }
}

/// Chunks read from one start index.
#[derive(Default)]
struct Page {
    chunks: Vec<StreamChunk>,
    has_more: bool,
    done: bool,
}

impl<B: RunLog> Streams<B> {
    /// Streams stored in `log`.
    pub fn new(log: B) -> Streams<B> {
        Streams {
            log,
            collected: Default::default(),
        }
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.log
    }

    /// The id of the backend run that holds stream `name` of workflow run `run` (for the
    /// store's own tools: `runlog events`, `verify`, …). Pure: nothing is read.
    ///
    /// # Errors
    /// [`StreamError::InvalidName`].
    pub fn chunk_log_id(run: &RunId, name: &str) -> Result<RunId> {
        locate(run, name)
    }

    /// The workflow run and stream name that backend run `log` holds, from its metadata;
    /// `None` when `log` is not a stream's log (a workflow run, an index log, another run).
    ///
    /// # Errors
    /// `Store(RunNotFound)` and the backend's read errors.
    pub fn owner(&self, log: &RunId) -> Result<Option<(RunId, String)>> {
        Ok(id::parse_stream_meta(&self.log.run_meta(log)?))
    }

    /// Appends one chunk; returns its index. Durable on return.
    ///
    /// # Errors
    /// [`StreamError::InvalidName`]; [`StreamError::Closed`] (nothing written);
    /// [`StreamError::Contended`]; [`StreamError::Collision`]; `Store(InvalidEvent)` for a
    /// chunk above the backend's payload limit (16 MiB by default: no chunk is written, but a
    /// stream never written before is left created, empty); other backend errors.
    pub fn write(&self, run: &RunId, name: &str, chunk: impl Into<Bytes>) -> Result<u64> {
        self.append(run, name, vec![chunk.into()])
            .map(|indexes| indexes.start)
    }

    /// Appends `chunks` in order as one atomic batch (all or none, at consecutive indexes);
    /// returns their index range. No chunks: writes nothing and returns an empty range at the
    /// stream's end (after the same checks).
    ///
    /// # Errors
    /// As [`Streams::write`]; the backend's batch limits (100,000 events, 64 MiB by default)
    /// are `Store(InvalidEvent)` and write nothing.
    pub fn write_many<I>(&self, run: &RunId, name: &str, chunks: I) -> Result<Range<u64>>
    where
        I: IntoIterator,
        I::Item: Into<Bytes>,
    {
        self.append(run, name, chunks.into_iter().map(Into::into).collect())
    }

    /// Appends the close marker: the stream is done and takes no more writes. Closing a
    /// closed stream does nothing; closing one never written creates it, empty and closed.
    ///
    /// # Errors
    /// [`StreamError::InvalidName`]; [`StreamError::Collision`]; backend errors.
    pub fn close(&self, run: &RunId, name: &str) -> Result<()> {
        let log = locate(run, name)?;
        // A second round when the log was deleted between the look and the append (gc
        // collecting its run): the missing log then decides, as for a write.
        for round in 0..2 {
            match self.tail(&log, run, name)? {
                Some(tail) if tail.closed => return Ok(()),
                Some(_) => {}
                None => self.create(&log, run, name)?,
            }
            // A fact, idempotent by its key: of racing closes one appends, the others find
            // it. A write fenced at the seq before it is rejected and then sees the marker.
            let marker = NewEvent::new(CLOSE_KIND, Bytes::new()).key(CLOSE_KEY);
            match self.log.append_facts(&log, vec![marker]) {
                Err(runlog::Error::RunNotFound { .. }) if round == 0 => continue,
                other => return other.map(|_| ()).map_err(Into::into),
            }
        }
        Ok(())
    }

    /// Up to `limit` chunks from `start_index`: 0-based, or negative to count back from the
    /// number of chunks written (`-2` on 5 chunks starts at 3; clamped at 0). Costs the same
    /// wherever it starts. To follow a live stream, read from `next_index` after
    /// [`Streams::wait`] until `done`.
    ///
    /// # Errors
    /// [`StreamError::InvalidLimit`] outside `1..=`[`CHUNKS_PER_PAGE_MAX`];
    /// [`StreamError::InvalidName`]; [`StreamError::Malformed`]; backend read errors.
    pub fn read(
        &self,
        run: &RunId,
        name: &str,
        start_index: i64,
        limit: usize,
    ) -> Result<ChunkRead> {
        check_limit(limit)?;
        let log = locate(run, name)?;
        let start = match u64::try_from(start_index) {
            Ok(start) => start,
            Err(_) => {
                let count = self.tail(&log, run, name)?.map_or(0, Tail::chunk_count);
                count.saturating_sub(start_index.unsigned_abs())
            }
        };
        let page = self.page(&log, run, name, start, limit)?;
        Ok(ChunkRead {
            next_index: start + page.chunks.len() as u64,
            chunks: page.chunks,
            has_more: page.has_more,
            done: page.done,
        })
    }

    /// Blocks until chunk `index` exists or the stream is closed, at most `timeout`; returns
    /// the stream's info then (on timeout, `tail_index < index` and not `done`). Woken at
    /// once by commits in this process; other processes' commits are seen by the backend's
    /// counter polling. A stream not yet written is polled for every 10 ms until it is.
    ///
    /// # Errors
    /// [`StreamError::InvalidName`]; [`StreamError::Collision`]; backend errors.
    pub fn wait(
        &self,
        run: &RunId,
        name: &str,
        index: u64,
        timeout: Duration,
    ) -> Result<StreamInfo> {
        let log = locate(run, name)?;
        let deadline = Instant::now().checked_add(timeout);
        loop {
            let tail = self.tail(&log, run, name)?;
            let ready = tail.is_some_and(|t| t.closed || t.chunk_count() > index);
            let remaining = deadline.map_or(Duration::MAX, |d| {
                d.saturating_duration_since(Instant::now())
            });
            if ready || remaining.is_zero() {
                return Ok(Tail::info(tail));
            }
            match tail {
                // Any commit wakes this; the loop then decides whether it was the one.
                Some(t) => match self.log.wait(&log, t.last, remaining) {
                    Ok(_) | Err(runlog::Error::RunNotFound { .. }) => {}
                    Err(e) => return Err(e.into()),
                },
                None => {
                    self.refuse_collected(run, name)?;
                    std::thread::sleep(remaining.min(MISSING_LOG_POLL));
                }
            }
        }
    }

    /// A page of chunks (the reference's `getChunks`): from the start (`cursor` `None`) or
    /// from a cursor that an earlier page returned; `limit` chunks at most
    /// ([`CHUNKS_PER_PAGE_DEFAULT`] when `None`). A snapshot: `has_more` says whether more
    /// were already written, `done` whether the stream is closed and this page reached its
    /// end. Costs the same at any cursor.
    ///
    /// # Errors
    /// [`StreamError::InvalidLimit`] outside `1..=`[`CHUNKS_PER_PAGE_MAX`] (0 would never
    /// advance); [`StreamError::InvalidCursor`]; [`StreamError::InvalidName`];
    /// [`StreamError::Malformed`]; backend read errors.
    pub fn get_chunks(
        &self,
        run: &RunId,
        name: &str,
        cursor: Option<&str>,
        limit: Option<usize>,
    ) -> Result<ChunkPage> {
        let limit = limit.unwrap_or(CHUNKS_PER_PAGE_DEFAULT);
        check_limit(limit)?;
        let log = locate(run, name)?;
        let start = cursor.map(parse_cursor).transpose()?.unwrap_or(0);
        let page = self.page(&log, run, name, start, limit)?;
        let next = start + page.chunks.len() as u64;
        Ok(ChunkPage {
            cursor: page.has_more.then(|| next.to_string()),
            data: page.chunks,
            has_more: page.has_more,
            done: page.done,
        })
    }

    /// The index of the last chunk (−1 when none) and whether the stream is closed; a
    /// stream never written is `{-1, false}`. Reads the log's last event only.
    ///
    /// # Errors
    /// [`StreamError::InvalidName`]; [`StreamError::Collision`];
    /// [`StreamError::Malformed`]; backend read errors.
    pub fn info(&self, run: &RunId, name: &str) -> Result<StreamInfo> {
        let log = locate(run, name)?;
        let tail = self.tail(&log, run, name)?;
        if tail.is_none() {
            self.refuse_collected(run, name)?;
        }
        Ok(Tail::info(tail))
    }

    /// The names of workflow run `run`'s streams, in the order they were first written or
    /// closed; empty when it has none. Reads that run's index log only.
    ///
    /// # Errors
    /// [`StreamError::Collision`]; [`StreamError::Malformed`]; backend read errors.
    pub fn list(&self, run: &RunId) -> Result<Vec<String>> {
        let index = id::index_log(run);
        match self.check_meta(&index, &id::index_meta(run), || run.to_string()) {
            Err(StreamError::Store(runlog::Error::RunNotFound { .. })) => {
                self.refuse_collected(run, "(any)")?;
                return Ok(vec![]);
            }
            other => other?,
        }
        let (mut names, mut after) = (Vec::new(), 0);
        loop {
            let mut bad = None;
            let read = self
                .log
                .read_each(&index, after, CHUNKS_PER_PAGE_MAX, &mut |e| {
                    if bad.is_none() {
                        match name_of(&index, e) {
                            Ok(name) => names.push(name),
                            Err(e) => bad = Some(e),
                        }
                    }
                });
            let (next, more) = match read {
                Ok(read) => read,
                Err(runlog::Error::RunNotFound { .. }) => return Ok(names),
                Err(e) => return Err(e.into()),
            };
            if let Some(e) = bad {
                return Err(e);
            }
            if !more {
                return Ok(names);
            }
            after = next;
        }
    }

    /// The write path of [`Streams::write`] and [`Streams::write_many`]: check "not closed"
    /// at the log's last seq N, append fenced at N; when anything landed first, look again
    /// at once (the crate's fenced retry, `fenced.rs`, without backoff).
    fn append(&self, run: &RunId, name: &str, chunks: Vec<Bytes>) -> Result<Range<u64>> {
        let log = locate(run, name)?;
        let written = fenced::retry(WRITE_ATTEMPTS_MAX, None, |_| {
            let Some(tail) = self.tail(&log, run, name)? else {
                if chunks.is_empty() {
                    return Ok(Attempted::Done(0..0));
                }
                self.create(&log, run, name)?;
                return Ok(Attempted::Again);
            };
            if tail.closed {
                return Err(StreamError::Closed {
                    run: run.to_string(),
                    name: clip(name),
                });
            }
            if chunks.is_empty() {
                return Ok(Attempted::Done(tail.last..tail.last));
            }
            let events = chunks
                .iter()
                .map(|chunk| NewEvent::new(CHUNK_KIND, chunk.clone()))
                .collect();
            match self.log.append_decisions(&log, tail.last, events) {
                // Chunk i is seq i + 1.
                Ok(seqs) => Ok(Attempted::Done(
                    tail.last..seqs.last().copied().unwrap_or(tail.last),
                )),
                // Another write or the close marker took seq N + 1 (or the log was deleted).
                Err(runlog::Error::Fenced { .. } | runlog::Error::RunNotFound { .. }) => {
                    Ok(Attempted::Fenced)
                }
                Err(e) => Err(e.into()),
            }
        })?;
        written.ok_or_else(|| StreamError::Contended {
            run: run.to_string(),
            name: clip(name),
            attempts: WRITE_ATTEMPTS_MAX,
        })
    }

    /// Registers `name` in the run's index, then creates its log. In this order a crash in
    /// between leaves a listed stream that reads as empty and open (as one never written
    /// does), never a stream that `list` misses.
    fn create(&self, log: &RunId, run: &RunId, name: &str) -> Result<()> {
        self.refuse_collected(run, name)?;
        let index = id::index_log(run);
        self.create_log(&index, &id::index_meta(run), || run.to_string())?;
        let entry =
            NewEvent::new(NAME_KIND, Bytes::copy_from_slice(name.as_bytes())).key(log.as_str());
        self.log.append_facts(&index, vec![entry])?;
        self.create_log(log, &id::stream_meta(run, name), || owner(run, name))
    }

    /// [`StreamError::RunCollected`] when `run` is a workflow run gc collected and nobody
    /// restored since (`collected.rs`); asked only where the stream's log is missing, so a
    /// stream that exists pays nothing.
    fn refuse_collected(&self, run: &RunId, name: &str) -> Result<()> {
        if crate::ids::parse_run_id(run.as_str()).is_ok()
            && self.collected.is_collected(&self.log, run)
        {
            return Err(StreamError::RunCollected {
                run: run.to_string(),
                name: clip(name),
            });
        }
        Ok(())
    }

    /// Creates run `id` with `meta`; an existing one is fine when it records the same owner.
    fn create_log(&self, id: &RunId, meta: &[u8], wanted: impl Fn() -> String) -> Result<()> {
        match self.log.create_run(id, meta) {
            Err(runlog::Error::RunExists { .. }) => self.check_meta(id, meta, wanted),
            other => Ok(other?),
        }
    }

    /// [`StreamError::Collision`] unless run `id` records `meta`.
    fn check_meta(&self, id: &RunId, meta: &[u8], wanted: impl Fn() -> String) -> Result<()> {
        let found = self.log.run_meta(id)?;
        if found == meta {
            return Ok(());
        }
        let found = match id::parse_stream_meta(&found) {
            Some((run, name)) => owner(&run, &name),
            None => format!("a run with {} bytes of other metadata", found.len()),
        };
        Err(StreamError::Collision {
            log: id.to_string(),
            wanted: wanted(),
            found,
        })
    }

    /// The log's last seq and whether it is the close marker; `None` when the log does not
    /// exist. The owner recorded in the log's metadata is checked first.
    fn tail(&self, log: &RunId, run: &RunId, name: &str) -> Result<Option<Tail>> {
        match self.tail_unchecked(log, run, name) {
            Err(StreamError::Store(runlog::Error::RunNotFound { .. })) => Ok(None),
            other => other.map(Some),
        }
    }

    fn tail_unchecked(&self, log: &RunId, run: &RunId, name: &str) -> Result<Tail> {
        self.check_meta(log, &id::stream_meta(run, name), || owner(run, name))?;
        let last = self.log.last_seq(log)?;
        if last == 0 {
            return Ok(Tail {
                last,
                closed: false,
            });
        }
        let mut closed = Ok(false);
        self.log.read_each(log, last - 1, 1, &mut |e| {
            closed = match e.kind {
                CHUNK_KIND => Ok(false),
                CLOSE_KIND => Ok(true),
                other => Err(malformed(log, e.seq, unknown_kind(other))),
            };
        })?;
        Ok(Tail {
            last,
            closed: closed?,
        })
    }

    /// Up to `limit` chunks from index `start` on (a read after seq `start`), reading one
    /// event more to learn `has_more` and `done`. A missing log is an empty page.
    fn page(&self, log: &RunId, run: &RunId, name: &str, start: u64, limit: usize) -> Result<Page> {
        match self.check_meta(log, &id::stream_meta(run, name), || owner(run, name)) {
            Err(StreamError::Store(runlog::Error::RunNotFound { .. })) => {
                self.refuse_collected(run, name)?;
                return Ok(Page::default());
            }
            other => other?,
        }
        let mut page = Page::default();
        let mut bad = None;
        let read = self.log.read_each(log, start, limit + 1, &mut |e| {
            let problem = match e.kind {
                _ if page.done => "an event after the close marker".to_owned(),
                CHUNK_KIND if page.chunks.len() < limit => {
                    page.chunks.push(chunk_of(e));
                    return;
                }
                CHUNK_KIND => {
                    page.has_more = true;
                    return;
                }
                CLOSE_KIND => {
                    page.done = true;
                    return;
                }
                other => unknown_kind(other),
            };
            bad.get_or_insert_with(|| malformed(log, e.seq, problem));
        });
        match read {
            Ok(_) => {}
            Err(runlog::Error::RunNotFound { .. }) => {
                // Deleted since the look above (gc collecting its run).
                self.refuse_collected(run, name)?;
                return Ok(Page::default());
            }
            Err(e) => return Err(e.into()),
        }
        if let Some(e) = bad {
            return Err(e);
        }
        if page.chunks.is_empty() && !page.done && start > 0 {
            // Nothing at or after `start`: past the end. Done when the marker is behind it.
            page.done = self.tail(log, run, name)?.is_some_and(|t| t.closed);
        }
        Ok(page)
    }
}

/// The chunk log of a valid stream name.
fn locate(run: &RunId, name: &str) -> Result<RunId> {
    match id::name_problem(name) {
        None => Ok(id::chunk_log(run, name)),
        Some(reason) => Err(StreamError::InvalidName {
            name: clip(name),
            reason,
        }),
    }
}

fn check_limit(limit: usize) -> Result<()> {
    match (1..=CHUNKS_PER_PAGE_MAX).contains(&limit) {
        true => Ok(()),
        false => Err(StreamError::InvalidLimit {
            limit,
            max: CHUNKS_PER_PAGE_MAX,
        }),
    }
}

/// A cursor is the next chunk index in decimal, as [`Streams::get_chunks`] returns it.
fn parse_cursor(cursor: &str) -> Result<u64> {
    let digits = !cursor.is_empty() && cursor.bytes().all(|b| b.is_ascii_digit());
    digits
        .then(|| cursor.parse().ok())
        .flatten()
        .ok_or_else(|| StreamError::InvalidCursor {
            cursor: clip(cursor),
        })
}

/// The stream name an index log's event records.
fn name_of(index: &RunId, e: EventRef<'_>) -> Result<String> {
    match (e.kind, std::str::from_utf8(e.payload)) {
        (NAME_KIND, Ok(name)) => Ok(name.to_owned()),
        (kind, _) => {
            let detail = format!("a {kind:?} event that is not a UTF-8 stream name");
            Err(malformed(index, e.seq, detail))
        }
    }
}

fn chunk_of(e: EventRef<'_>) -> StreamChunk {
    StreamChunk {
        index: e.seq - 1,
        data: Bytes::copy_from_slice(e.payload),
    }
}

fn owner(run: &RunId, name: &str) -> String {
    format!("{run}/{name:?}")
}

fn unknown_kind(kind: &str) -> String {
    format!("unknown event kind {kind:?}")
}

fn malformed(log: &RunId, seq: Seq, detail: String) -> StreamError {
    StreamError::Malformed {
        log: log.to_string(),
        seq,
        detail,
    }
}
