//! Copying runs between two stores of any backends (file store → PostgreSQL, PostgreSQL →
//! file store, file → file, PostgreSQL → PostgreSQL): the run's metadata, and every event with
//! its seq, event id, creation time, kind, correlation id, key and payload, exactly.
//!
//! Seqs are kept by construction: the events are appended in seq order as decisions fenced at
//! the destination's last seq (rule 1 of `docs/INVARIANTS.md`), so each lands at the seq it had
//! in the source or the append is rejected with nothing written. Copying is idempotent: a run
//! the destination already holds whole is `unchanged`, one it holds a prefix of (an earlier,
//! interrupted copy, or a source that grew since) is `extended`, and one whose metadata or
//! events differ is a [`CopyError::Conflict`], left alone.

use std::fmt;

use runlog::{Error, Event, NewEvent, RunId, RunLog, Seq};

use crate::import::{BatchLimits, batches};

/// Events read from the source per call.
const READ_PAGE_LEN: usize = 1024;

/// What [`copy_run`] did to the destination's run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyResult {
    /// Created, holding every event of the source.
    Created,
    /// Already held a prefix of the source; the rest was appended.
    Extended,
    /// Already held every event of the source; nothing was written.
    Unchanged,
}

impl CopyResult {
    /// `created`, `extended` or `unchanged`.
    pub fn name(self) -> &'static str {
        match self {
            CopyResult::Created => "created",
            CopyResult::Extended => "extended",
            CopyResult::Unchanged => "unchanged",
        }
    }
}

/// What [`copy_run`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunCopy {
    /// Created, extended or unchanged.
    pub result: CopyResult,
    /// Events appended to the destination now.
    pub appended: u64,
    /// Events the destination already held.
    pub already_present: u64,
}

/// Why a run was not copied.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// The source run cannot be read (damaged, or the source failed). A run this call created
    /// in the destination was deleted again (`rollback` says if that failed).
    #[error("source: {error}{}", rollback_text(.rollback))]
    Source {
        /// The source's error.
        error: Error,
        /// The rollback error, if deleting a run created here failed.
        rollback: Option<String>,
    },
    /// The destination refused or failed. A run this call created was deleted again.
    #[error("destination: {error}{}", rollback_text(.rollback))]
    Destination {
        /// The destination's error.
        error: Error,
        /// The rollback error, if deleting a run created here failed.
        rollback: Option<String>,
    },
    /// The destination holds the run with other metadata or other events, or more events
    /// than the source; nothing was written.
    #[error("{0}")]
    Conflict(String),
    /// `verify`: reading both back after the copy found a difference.
    #[error("verify: {0}")]
    Mismatch(String),
}

fn rollback_text(rollback: &Option<String>) -> String {
    rollback
        .as_ref()
        .map(|r| format!(" (deleting the partial copy failed: {r})"))
        .unwrap_or_default()
}

impl CopyError {
    /// The store error of a source or destination failure (`None` for a conflict or a
    /// mismatch).
    pub fn store_error(&self) -> Option<&Error> {
        match self {
            CopyError::Source { error, .. } | CopyError::Destination { error, .. } => Some(error),
            CopyError::Conflict(_) | CopyError::Mismatch(_) => None,
        }
    }

    /// The store error, owned (see [`CopyError::store_error`]).
    pub fn into_store_error(self) -> Result<Error, CopyError> {
        match self {
            CopyError::Source { error, .. } | CopyError::Destination { error, .. } => Ok(error),
            other => Err(other),
        }
    }
}

fn source(error: Error) -> CopyError {
    CopyError::Source {
        error,
        rollback: None,
    }
}

fn destination(error: Error) -> CopyError {
    CopyError::Destination {
        error,
        rollback: None,
    }
}

/// Copies `run` from `src` to `dst`, every event its reads return: creates it with the source's metadata, or checks what the destination holds,
/// then appends the missing events in batches of at most `limits`, each fenced at the
/// destination's last seq. With `verify`, reads both logs back afterwards and compares every
/// event and the metadata.
///
/// # Errors
/// [`CopyError::Conflict`] when the destination's run differs (nothing written);
/// [`CopyError::Source`]/[`CopyError::Destination`] for store errors (a run created by this
/// call is deleted again, best effort); [`CopyError::Mismatch`] when `verify` finds a
/// difference.
pub fn copy_run(
    src: &dyn RunLog,
    dst: &dyn RunLog,
    run: &RunId,
    limits: BatchLimits,
    verify: bool,
) -> Result<RunCopy, CopyError> {
    copy_run_to(src, dst, run, limits, verify, Longer::Conflict)
}

/// What a destination run holding the whole source and more is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Longer {
    /// A conflict (`runlog copy`: the two have parted).
    Conflict,
    /// Done, `unchanged` (`runlog restore`: a log restored earlier that a writer has
    /// appended to since holds every archived event).
    Holds,
}

/// [`copy_run`], with `longer` saying what a destination run that holds every event of the
/// source and more is.
pub fn copy_run_to(
    src: &dyn RunLog,
    dst: &dyn RunLog,
    run: &RunId,
    limits: BatchLimits,
    verify: bool,
    longer: Longer,
) -> Result<RunCopy, CopyError> {
    let meta = src.run_meta(run).map_err(source)?;
    let src_last = src.last_seq(run).map_err(source)?;
    let present = match dst.run_meta(run) {
        Ok(dst_meta) => Some(check_existing(
            src, dst, run, &meta, &dst_meta, src_last, longer,
        )?),
        Err(Error::RunNotFound { .. }) => None,
        Err(e) => return Err(destination(e)),
    };
    if present.is_none() {
        dst.create_run(run, &meta).map_err(destination)?;
    }
    let from = present.unwrap_or(0);
    let last = match append_rest(src, dst, run, from, limits) {
        Ok(last) => last,
        // A conflict means another writer appended to the run meanwhile: its events stay.
        Err(e @ (CopyError::Source { .. } | CopyError::Destination { .. }))
            if present.is_none() =>
        {
            return Err(roll_back(dst, run, e));
        }
        Err(e) => return Err(e),
    };
    if verify {
        verify_copy(src, dst, run, &meta, last, longer)?;
    }
    let result = match present {
        None => CopyResult::Created,
        Some(n) if n < last => CopyResult::Extended,
        Some(_) => CopyResult::Unchanged,
    };
    Ok(RunCopy {
        result,
        appended: last - from,
        already_present: from,
    })
}

/// Deletes a run this copy created, after `e`; a failed delete is noted on the error.
fn roll_back(dst: &dyn RunLog, run: &RunId, e: CopyError) -> CopyError {
    let rollback = dst.delete_run(run).err().map(|r| r.to_string());
    match e {
        CopyError::Source { error, .. } => CopyError::Source { error, rollback },
        CopyError::Destination { error, .. } => CopyError::Destination { error, rollback },
        other => other,
    }
}

/// Checks, writing nothing, that [`copy_run_to`] of `run` would meet no conflict in `dst`
/// (a restore checks every log of an archive before it writes any).
///
/// # Errors
/// As [`copy_run_to`]'s, but never a write's.
pub fn check_copy(
    src: &dyn RunLog,
    dst: &dyn RunLog,
    run: &RunId,
    longer: Longer,
) -> Result<(), CopyError> {
    let meta = src.run_meta(run).map_err(source)?;
    let src_last = src.last_seq(run).map_err(source)?;
    match dst.run_meta(run) {
        Ok(dst_meta) => {
            check_existing(src, dst, run, &meta, &dst_meta, src_last, longer).map(|_| ())
        }
        Err(Error::RunNotFound { .. }) => Ok(()),
        Err(e) => Err(destination(e)),
    }
}

/// How many events of the source an existing destination run already holds: its last seq
/// (or, with [`Longer::Holds`], the source's, when it holds more), when its metadata is the
/// source's and its events are the source's first ones.
fn check_existing(
    src: &dyn RunLog,
    dst: &dyn RunLog,
    run: &RunId,
    meta: &[u8],
    dst_meta: &[u8],
    src_last: Seq,
    longer: Longer,
) -> Result<Seq, CopyError> {
    if dst_meta != meta {
        return Err(CopyError::Conflict(format!(
            "the destination's run has other metadata ({} bytes; the source's: {} bytes)",
            dst_meta.len(),
            meta.len()
        )));
    }
    let dst_last = dst.last_seq(run).map_err(destination)?;
    if dst_last > src_last && longer == Longer::Conflict {
        return Err(CopyError::Conflict(format!(
            "the destination's run has {dst_last} events, the source's {src_last}"
        )));
    }
    let held = dst_last.min(src_last);
    match first_difference(src, dst, run, held)? {
        Some(d) => Err(CopyError::Conflict(format!("the destination's run {d}"))),
        None => Ok(held),
    }
}

/// Appends the source's events after `from` to the destination, in seq order, up to the end
/// of the source's log as its reads report it (`has_more`), not only up to its counter: a
/// damaged run whose counter says less than its files still fails loudly on the read.
/// Returns the last seq copied.
fn append_rest(
    src: &dyn RunLog,
    dst: &dyn RunLog,
    run: &RunId,
    from: Seq,
    limits: BatchLimits,
) -> Result<Seq, CopyError> {
    let mut cursor = from;
    loop {
        let page = src.read(run, cursor, READ_PAGE_LEN).map_err(source)?;
        let events: Vec<NewEvent> = page.events.iter().map(Event::to_new_event).collect();
        for batch in batches(&events, limits) {
            append_batch(dst, run, cursor, batch)?;
            cursor += batch.len() as Seq;
        }
        if !page.has_more || events.is_empty() {
            return Ok(cursor);
        }
    }
}

/// Appends `batch` fenced at `expected`: it lands at `expected + 1 ..` or not at all.
fn append_batch(
    dst: &dyn RunLog,
    run: &RunId,
    expected: Seq,
    batch: &[NewEvent],
) -> Result<(), CopyError> {
    let seqs = match dst.append_decisions(run, expected, batch.to_vec()) {
        Ok(seqs) => seqs,
        Err(Error::Fenced { actual, .. }) => {
            return Err(CopyError::Conflict(format!(
                "another writer appended to the destination's run meanwhile (at seq {actual}, \
                 the copy expected {expected})"
            )));
        }
        Err(e) => return Err(destination(e)),
    };
    let wanted: Vec<Seq> = (expected + 1..=expected + batch.len() as Seq).collect();
    if seqs != wanted {
        return Err(CopyError::Mismatch(format!(
            "the destination assigned seqs {seqs:?} to the source's {wanted:?}"
        )));
    }
    Ok(())
}

/// Reads both runs back and compares the metadata, the last seq and every event.
fn verify_copy(
    src: &dyn RunLog,
    dst: &dyn RunLog,
    run: &RunId,
    meta: &[u8],
    src_last: Seq,
    longer: Longer,
) -> Result<(), CopyError> {
    if dst.run_meta(run).map_err(destination)? != meta {
        return Err(CopyError::Mismatch("the metadata differs".into()));
    }
    let dst_last = dst.last_seq(run).map_err(destination)?;
    if dst_last != src_last && !(dst_last > src_last && longer == Longer::Holds) {
        return Err(CopyError::Mismatch(format!(
            "the destination's last seq is {dst_last}, the source's {src_last}"
        )));
    }
    match first_difference(src, dst, run, src_last)? {
        Some(d) => Err(CopyError::Mismatch(format!("the destination's run {d}"))),
        None => Ok(()),
    }
}

/// Where the two logs first differ among seqs `1..=upto` (both must hold them all).
fn first_difference(
    src: &dyn RunLog,
    dst: &dyn RunLog,
    run: &RunId,
    upto: Seq,
) -> Result<Option<Difference>, CopyError> {
    let mut cursor = 0;
    while cursor < upto {
        let left = usize::try_from(upto - cursor).unwrap_or(usize::MAX);
        let limit = left.min(READ_PAGE_LEN);
        let theirs = src.read(run, cursor, limit).map_err(source)?.events;
        let ours = dst.read(run, cursor, limit).map_err(destination)?.events;
        for (s, d) in theirs.iter().zip(&ours) {
            if let Some(field) = differing_field(s, d) {
                return Ok(Some(Difference::Field { seq: s.seq, field }));
            }
        }
        if theirs.len() != ours.len() || theirs.is_empty() {
            return Ok(Some(Difference::Ends {
                seq: cursor + theirs.len().min(ours.len()) as Seq,
            }));
        }
        cursor += theirs.len() as Seq;
    }
    Ok(None)
}

/// The first field in which two events differ.
fn differing_field(a: &Event, b: &Event) -> Option<&'static str> {
    [
        ("seq", a.seq == b.seq),
        ("event id", a.event_id == b.event_id),
        ("created_at", a.created_at_ms == b.created_at_ms),
        ("kind", a.kind == b.kind),
        ("correlation id", a.correlation_id == b.correlation_id),
        ("key", a.key == b.key),
        ("payload", a.payload == b.payload),
    ]
    .into_iter()
    .find(|(_, same)| !same)
    .map(|(field, _)| field)
}

/// How a destination run differs from the source.
enum Difference {
    Field { seq: Seq, field: &'static str },
    Ends { seq: Seq },
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Difference::Field { seq, field } => {
                write!(f, "differs from the source at seq {seq} ({field})")
            }
            Difference::Ends { seq } => {
                write!(f, "and the source disagree on their length after seq {seq}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runlog::{Config, Store};

    fn store(dir: &std::path::Path) -> Store {
        Store::open(dir, Config::default()).unwrap()
    }

    fn run() -> RunId {
        RunId::new("r1").unwrap()
    }

    fn fill(s: &Store, n: u64) {
        s.create_run_with_meta(&run(), b"meta").unwrap();
        add(s, 0..n);
    }

    fn add(s: &Store, range: std::ops::Range<u64>) {
        for i in range {
            let e = NewEvent::new("k", vec![0xff, i as u8])
                .correlation_id(format!("c{i}"))
                .key(format!("key{i}"))
                .created_at_ms(1_000 + i);
            s.append_facts(&run(), vec![e]).unwrap();
        }
    }

    fn all(s: &Store) -> Vec<Event> {
        s.read(&run(), 0, 1000).unwrap().events
    }

    #[test]
    fn a_copy_holds_every_field_at_the_same_seq_and_a_second_copy_writes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let (src, dst) = (store(&tmp.path().join("a")), store(&tmp.path().join("b")));
        fill(&src, 5);
        let limits = BatchLimits {
            events_max: 2,
            payload_bytes_max: 1 << 20,
        };
        let first = copy_run(&src, &dst, &run(), limits, true).unwrap();
        assert_eq!(
            (first.result, first.appended, first.already_present),
            (CopyResult::Created, 5, 0)
        );
        assert_eq!(all(&dst), all(&src));
        assert_eq!(RunLog::run_meta(&dst, &run()).unwrap(), b"meta");
        let again = copy_run(&src, &dst, &run(), limits, true).unwrap();
        assert_eq!(
            (again.result, again.appended, again.already_present),
            (CopyResult::Unchanged, 0, 5)
        );
        assert_eq!(dst.last_seq(&run()).unwrap(), 5);
    }

    #[test]
    fn a_destination_prefix_is_extended_and_a_different_run_is_a_conflict() {
        let tmp = tempfile::tempdir().unwrap();
        let (src, dst) = (store(&tmp.path().join("a")), store(&tmp.path().join("b")));
        fill(&src, 2);
        copy_run(&src, &dst, &run(), BatchLimits::default(), false).unwrap();
        add(&src, 2..4);
        let done = copy_run(&src, &dst, &run(), BatchLimits::default(), false).unwrap();
        assert_eq!(
            (done.result, done.appended, done.already_present),
            (CopyResult::Extended, 2, 2)
        );
        assert_eq!(all(&dst), all(&src));

        let other = store(&tmp.path().join("c"));
        other.create_run_with_meta(&run(), b"meta").unwrap();
        let e = NewEvent::new("k", &b"different"[..]);
        other.append_facts(&run(), vec![e]).unwrap();
        let err = copy_run(&src, &other, &run(), BatchLimits::default(), false).unwrap_err();
        assert!(
            matches!(&err, CopyError::Conflict(m) if m.contains("seq 1 (event id)")),
            "{err}"
        );
        assert_eq!(
            other.last_seq(&run()).unwrap(),
            1,
            "a conflict writes nothing"
        );
    }

    #[test]
    fn other_metadata_is_a_conflict() {
        let tmp = tempfile::tempdir().unwrap();
        let (src, dst) = (store(&tmp.path().join("a")), store(&tmp.path().join("b")));
        fill(&src, 1);
        dst.create_run_with_meta(&run(), b"other").unwrap();
        let err = copy_run(&src, &dst, &run(), BatchLimits::default(), false).unwrap_err();
        assert!(
            matches!(&err, CopyError::Conflict(m) if m.contains("metadata")),
            "{err}"
        );
    }
}
