//! The SDK's ids: run ids `wrun_<ULID>` (which are valid runlog run ids) and event ids
//! `evnt_<ULID>` (stored as the runlog event id, the ULID alone), minted monotonically.

use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use runlog::RunId;
use ulid::{Generator, Ulid};

use crate::error::WorldError;

/// Prefix of a workflow run id.
pub const RUN_ID_PREFIX: &str = "wrun_";
/// Prefix of an event id.
pub const EVENT_ID_PREFIX: &str = "evnt_";
/// Longest correlation id (step, hook, wait or attribute id), in bytes: the World builds
/// runlog idempotency keys from it (`step/<id>`), which runlog bounds at 256 bytes.
pub const CORRELATION_ID_LEN_MAX: usize = 200;

static GENERATOR: Mutex<Generator> = Mutex::new(Generator::new());

/// A new ULID, strictly greater than every ULID this process minted before (monotonic
/// within a millisecond, like the reference's `monotonicUlid`).
pub fn mint_ulid() -> Ulid {
    let mut generator = GENERATOR.lock();
    match generator.generate() {
        Ok(ulid) => ulid,
        Err(overflow) => overflow.commit_overflow_increment(),
    }
}

/// A new workflow run id, `wrun_<ULID>` (what the reference mints for `run_created`
/// without a run id).
pub fn mint_run_id() -> String {
    format!("{RUN_ID_PREFIX}{}", mint_ulid())
}

/// `evnt_<ULID>` for a stored event id.
pub fn event_id_string(ulid: Ulid) -> String {
    format!("{EVENT_ID_PREFIX}{ulid}")
}

/// Digits of a slot event id's body (`evnt_` + the seq zero-padded to 26 decimal digits).
const SLOT_BODY_LEN: usize = 26;
/// Leading zeros every slot body has (a ULID's first 10 characters are its time, never
/// all zero, so the two schemes never collide).
const SLOT_BODY_ZEROS: usize = 10;

/// Whether the runs of spec version `spec` name their events by slot (spec 6 "slot
/// identity" and later): the event id is derived from the seq, never stored.
pub fn uses_slot_ids(spec: Option<u32>) -> bool {
    spec.is_some_and(|v| v >= crate::model::SPEC_VERSION_SLOT_IDENTITY)
}

/// The slot event id of `seq`: `evnt_` + `seq` zero-padded to 26 decimal digits
/// (`slotToEventId` of `@workflow/world` 5.0.0-beta.37).
pub fn slot_event_id(seq: u64) -> String {
    format!("{EVENT_ID_PREFIX}{seq:0SLOT_BODY_LEN$}")
}

/// The seq named by a slot event id, or `None` when `id` is no slot id (the reference's
/// `eventIdToSlot`: the body after the first `_` is 26 digits, the first 10 of them `0`,
/// and the number is at least 1 and a safe integer).
pub fn parse_slot_event_id(id: &str) -> Option<u64> {
    let (_, body) = id.split_once('_')?;
    let slot_like = body.len() == SLOT_BODY_LEN
        && body.bytes().all(|b| b.is_ascii_digit())
        && body.bytes().take(SLOT_BODY_ZEROS).all(|b| b == b'0');
    let seq: u64 = body.parse().ok().filter(|_| slot_like)?;
    // Number.MAX_SAFE_INTEGER
    (1..=(1u64 << 53) - 1).contains(&seq).then_some(seq)
}

/// The event id a reader sees for the event at `seq` stored with `ulid`, on a run of spec
/// version `spec`: the slot id from spec 6 on, else `evnt_<ULID>`.
pub fn event_id_for(spec: Option<u32>, ulid: Ulid, seq: u64) -> String {
    if uses_slot_ids(spec) {
        slot_event_id(seq)
    } else {
        event_id_string(ulid)
    }
}

/// Milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Validates a workflow run id: `wrun_` followed by a 26-character ULID (Crockford base32,
/// either case, as the SDK's `workflowRunIdSchema` accepts). Returns the runlog run id (the
/// same string) and the ULID.
///
/// # Errors
/// [`WorldError::InvalidRequest`] (field `runId`) for any other string; no runlog run id of
/// another shape is ever read or written by the World (so system runs such as the hook
/// token claims log cannot be addressed).
pub fn parse_run_id(id: &str) -> Result<(RunId, Ulid), WorldError> {
    let bad = |reason: &str| WorldError::invalid("runId", format!("{id:?}: {reason}"));
    let ulid_text = id
        .strip_prefix(RUN_ID_PREFIX)
        .ok_or_else(|| bad("must be wrun_<ULID>"))?;
    if ulid_text.len() != 26 {
        return Err(bad("must be wrun_ followed by a 26-character ULID"));
    }
    let ulid = Ulid::from_string(ulid_text).map_err(|e| bad(&format!("not a ULID: {e}")))?;
    let run = RunId::new(id).map_err(|e| bad(&e.to_string()))?;
    Ok((run, ulid))
}

/// Checks that a client-supplied run id's ULID time lies within `past_ms` before and
/// `future_ms` after now (the reference's `validateUlidTimestamp`: 24 h and 5 min).
///
/// # Errors
/// [`WorldError::InvalidRequest`] (field `runId`) naming the drift.
pub(crate) fn check_run_id_time(
    id: &str,
    ulid: Ulid,
    past_ms: u64,
    future_ms: u64,
) -> Result<(), WorldError> {
    let now = now_ms();
    let t = ulid.timestamp_ms();
    let ok = if t <= now {
        now - t <= past_ms
    } else {
        t - now <= future_ms
    };
    if ok {
        return Ok(());
    }
    let (drift, direction) = if t <= now {
        (now - t, "past")
    } else {
        (t - now, "future")
    };
    Err(WorldError::invalid(
        "runId",
        format!(
            "{id:?}: embedded timestamp is {} s in the {direction} (allowed: {} s past, {} s future)",
            drift / 1000,
            past_ms / 1000,
            future_ms / 1000
        ),
    ))
}

/// Parses a caller-supplied event id `evnt_<ULID>` (canonical upper case, so the id reads
/// back exactly as given).
///
/// # Errors
/// [`WorldError::InvalidRequest`] (field `eventId`).
pub fn parse_event_id(id: &str) -> Result<Ulid, WorldError> {
    let bad = |reason: &str| WorldError::invalid("eventId", format!("{id:?}: {reason}"));
    let text = id
        .strip_prefix(EVENT_ID_PREFIX)
        .ok_or_else(|| bad("must be evnt_<ULID>"))?;
    let ulid = Ulid::from_string(text).map_err(|e| bad(&format!("not a ULID: {e}")))?;
    if ulid.to_string() != text {
        return Err(bad("the ULID must be in canonical upper case"));
    }
    Ok(ulid)
}

/// Validates a correlation id: 1–[`CORRELATION_ID_LEN_MAX`] bytes, no control characters.
///
/// # Errors
/// [`WorldError::InvalidRequest`] (field `correlationId`).
pub(crate) fn check_correlation_id(id: &str) -> Result<(), WorldError> {
    if id.is_empty() || id.len() > CORRELATION_ID_LEN_MAX {
        return Err(WorldError::invalid(
            "correlationId",
            format!("length {} not in 1..={CORRELATION_ID_LEN_MAX}", id.len()),
        ));
    }
    if id.chars().any(char::is_control) {
        return Err(WorldError::invalid(
            "correlationId",
            "control characters are not allowed",
        ));
    }
    Ok(())
}
