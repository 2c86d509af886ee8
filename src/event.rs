//! The data model: [`RunId`], [`Seq`], [`NewEvent`] (what a caller appends) and [`Event`]
//! (what a reader gets back).

use std::fmt;

use bytes::Bytes;
use ulid::Ulid;

use crate::error::{Error, Result};
use crate::text::Text;

/// A dense, per-run log position assigned by the store at commit: 1, 2, 3, … (rule 6 of
/// INVARIANTS.md: `seq` is both read order and cursor). `0` means "before the first event".
pub type Seq = u64;

/// Longest run id, in bytes.
pub const RUN_ID_LEN_MAX: usize = 128;
/// Longest event kind, in bytes (shortest is 1).
pub const KIND_LEN_MAX: usize = 64;
/// Longest correlation id, in bytes.
pub const CORRELATION_ID_LEN_MAX: usize = 256;
/// Longest idempotency key, in bytes.
pub const KEY_LEN_MAX: usize = 256;

/// A validated run id: 1–128 bytes of `[A-Za-z0-9_-]`, not starting with `-`.
///
/// The alphabet makes every run id a safe single path component: no `/`, `\`, `..`, NUL,
/// spaces or non-ASCII can reach the file system.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunId(String);

impl RunId {
    /// Validates `id`.
    ///
    /// # Errors
    /// [`Error::InvalidRunId`] when `id` is empty, longer than [`RUN_ID_LEN_MAX`] bytes,
    /// starts with `-`, or holds any byte outside `[A-Za-z0-9_-]`.
    pub fn new(id: impl AsRef<str>) -> Result<RunId> {
        let id = id.as_ref();
        let reject = |reason| {
            Err(Error::InvalidRunId {
                id: id.chars().take(RUN_ID_LEN_MAX + 8).collect(),
                reason,
            })
        };
        if id.is_empty() {
            return reject("empty");
        }
        if id.len() > RUN_ID_LEN_MAX {
            return reject("longer than 128 bytes");
        }
        if id.starts_with('-') {
            return reject("starts with '-'");
        }
        if !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return reject("only [A-Za-z0-9_-] allowed");
        }
        Ok(RunId(id.to_string()))
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RunId({:?})", self.0)
    }
}

impl std::str::FromStr for RunId {
    type Err = Error;
    fn from_str(s: &str) -> Result<RunId> {
        RunId::new(s)
    }
}

/// An event to append. Built with [`NewEvent::new`] and the chained setters.
///
/// The store assigns `seq` always, and `event_id`/`created_at_ms` unless the caller supplies
/// them (imports do).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewEvent {
    /// Event type, 1–64 bytes (`step_created`, `hook_received`, …).
    pub kind: String,
    /// Optional correlation id (step, hook or wait id), ≤ 256 bytes.
    pub correlation_id: Option<String>,
    /// Opaque payload, at most `Config::payload_len_bytes_max` bytes.
    pub payload: Bytes,
    /// Optional idempotency key, ≤ 256 bytes: a fact whose key already exists in the run
    /// appends nothing and reports the original seq.
    pub key: Option<String>,
    /// Caller-supplied event id; makes the append idempotent on it like `key`.
    pub event_id: Option<Ulid>,
    /// Caller-supplied creation time in ms since the Unix epoch (imports); else commit time.
    pub created_at_ms: Option<u64>,
}

impl NewEvent {
    /// An event of `kind` carrying `payload`, with no key, correlation id or caller id.
    pub fn new(kind: impl Into<String>, payload: impl Into<Bytes>) -> NewEvent {
        NewEvent {
            kind: kind.into(),
            correlation_id: None,
            payload: payload.into(),
            key: None,
            event_id: None,
            created_at_ms: None,
        }
    }

    /// Sets the correlation id.
    pub fn correlation_id(mut self, id: impl Into<String>) -> NewEvent {
        self.correlation_id = Some(id.into());
        self
    }

    /// Sets the idempotency key.
    pub fn key(mut self, key: impl Into<String>) -> NewEvent {
        self.key = Some(key.into());
        self
    }

    /// Supplies the event id (idempotent on it).
    pub fn event_id(mut self, id: Ulid) -> NewEvent {
        self.event_id = Some(id);
        self
    }

    /// Supplies the creation time, ms since the Unix epoch.
    pub fn created_at_ms(mut self, ms: u64) -> NewEvent {
        self.created_at_ms = Some(ms);
        self
    }

    /// Checks every bound (kind 1–64 bytes, correlation id and key ≤ 256 bytes, payload ≤
    /// `payload_len_bytes_max`, from `Config`) without touching any file; every append runs
    /// the same check first.
    ///
    /// # Errors
    /// [`Error::InvalidEvent`] naming the field and the limit.
    pub fn validate(&self, payload_len_bytes_max: usize) -> Result<()> {
        let bad = |field, reason: String| Err(Error::InvalidEvent { field, reason });
        if self.kind.is_empty() || self.kind.len() > KIND_LEN_MAX {
            return bad("kind", format!("length {} not in 1..=64", self.kind.len()));
        }
        if let Some(c) = &self.correlation_id
            && c.len() > CORRELATION_ID_LEN_MAX
        {
            return bad("correlation_id", format!("length {} > 256", c.len()));
        }
        if let Some(k) = &self.key
            && k.len() > KEY_LEN_MAX
        {
            return bad("key", format!("length {} > 256", k.len()));
        }
        if self.payload.len() > payload_len_bytes_max {
            return bad(
                "payload",
                format!(
                    "{} bytes > limit {payload_len_bytes_max}",
                    self.payload.len()
                ),
            );
        }
        Ok(())
    }
}

/// A committed event as read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Dense per-run position, from 1.
    pub seq: Seq,
    /// Store-minted (monotonic within the run) or caller-supplied ULID.
    pub event_id: Ulid,
    /// Creation time, ms since the Unix epoch.
    pub created_at_ms: u64,
    /// Event type: like the correlation id and the key, a [`Text`] (used as a `str`) with no
    /// allocation of its own.
    pub kind: Text,
    /// Correlation id, if any.
    pub correlation_id: Option<Text>,
    /// Idempotency key, if any.
    pub key: Option<Text>,
    /// Payload bytes: a slice of one buffer its page of [`crate::Store::read`] owns (copied out
    /// of the mapped segment once per page), so it stays as read whatever the segment later
    /// goes through (a repair, a seal). [`crate::Store::read_each`] lends views of the map.
    pub payload: Bytes,
}

impl Event {
    /// This event borrowed, as [`crate::Store::read_each`] hands events out.
    pub fn as_event_ref(&self) -> EventRef<'_> {
        EventRef {
            seq: self.seq,
            event_id: self.event_id,
            created_at_ms: self.created_at_ms,
            kind: &self.kind,
            correlation_id: self.correlation_id.as_deref(),
            key: self.key.as_deref(),
            payload: &self.payload,
        }
    }

    /// This event as an append of exactly its fields (event id, creation time, kind,
    /// correlation id, key, payload): what copying it to another run or store appends; the
    /// store assigns only the seq.
    pub fn to_new_event(&self) -> NewEvent {
        NewEvent {
            kind: self.kind.to_string(),
            correlation_id: self.correlation_id.as_deref().map(str::to_owned),
            payload: self.payload.clone(),
            key: self.key.as_deref().map(str::to_owned),
            event_id: Some(self.event_id),
            created_at_ms: Some(self.created_at_ms),
        }
    }
}

/// An event borrowed from a mapped segment, handed to the callback of
/// [`crate::Store::read_each`]: nothing is allocated or reference-counted per event. Same
/// fields as [`Event`]; [`EventRef::to_event`] makes an owned copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventRef<'a> {
    /// Dense per-run position, from 1.
    pub seq: Seq,
    /// Store-minted or caller-supplied ULID.
    pub event_id: Ulid,
    /// Creation time, ms since the Unix epoch.
    pub created_at_ms: u64,
    /// Event type.
    pub kind: &'a str,
    /// Correlation id, if any.
    pub correlation_id: Option<&'a str>,
    /// Idempotency key, if any.
    pub key: Option<&'a str>,
    /// Payload bytes.
    pub payload: &'a [u8],
}

impl EventRef<'_> {
    /// An owned copy (strings and payload copied).
    pub fn to_event(&self) -> Event {
        Event {
            seq: self.seq,
            event_id: self.event_id,
            created_at_ms: self.created_at_ms,
            kind: Text::from(self.kind),
            correlation_id: self.correlation_id.map(Text::from),
            key: self.key.map(Text::from),
            payload: Bytes::copy_from_slice(self.payload),
        }
    }
}
