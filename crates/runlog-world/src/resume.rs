//! Hook resume identities (`capabilities.hookResumeDedup` of `@workflow/world`
//! 5.0.0-beta.37): a `hook_received` created with `params.resumeId` is a fact of its run
//! keyed `resume/<resumeId>` (with the `resumePayloadDigest`, when one was given, after a
//! space), so every writer of one resume — a transport retry, a queue redelivery, another
//! process — commits at most one event, and each is answered with that one event.
//!
//! The rules (`rules.rs`) decide a resume against the run's fold at seq N, which knows
//! every resume of the run ([`crate::RunState::resume`]); the append is fenced at N, so two
//! writers racing one resume are decided one after the other and the second finds the
//! first's event. The key is the same identity written into the log: it is what the fold
//! reads back and what `events.list`/`get` return as the event's `resumeId`.
//!
//! As in world-local 5.0.0-beta.46: an empty `resumeId` is no resume id (the plain write);
//! a resume id already recorded for another hook, or with another payload digest (both
//! present and different), is an `EntityConflictError` (409) and writes nothing.

use crate::error::WorldError;
use crate::model::{CreateEventParams, EventType};

/// Longest `resumeId`, in bytes (the runtime mints a 26-character ULID).
pub const RESUME_ID_LEN_MAX: usize = 128;

/// Longest `resumePayloadDigest`, in bytes (the runtime sends SHA-256 as 64 hex digits).
pub const RESUME_DIGEST_LEN_MAX: usize = 96;

/// The prefix of a resume's idempotency key.
const KEY_PREFIX: &str = "resume/";

/// A resume identity of a `hook_received` request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ResumeClaim {
    pub id: String,
    pub digest: Option<String>,
}

impl ResumeClaim {
    /// The claim of a request of type `ty` with `params`: `None` unless a `hook_received`
    /// carries a non-empty `resumeId` (the digest is only read alongside one).
    ///
    /// # Errors
    /// [`WorldError::InvalidRequest`] for an id or digest that is too long or holds
    /// whitespace or control characters (they could not be told apart in the key).
    pub(crate) fn of(
        ty: EventType,
        params: &CreateEventParams,
    ) -> Result<Option<ResumeClaim>, WorldError> {
        let id = match (&params.resume_id, ty) {
            (Some(id), EventType::HookReceived) if !id.is_empty() => id,
            _ => return Ok(None),
        };
        check(id, "resumeId", RESUME_ID_LEN_MAX)?;
        let digest = params
            .resume_payload_digest
            .as_ref()
            .filter(|d| !d.is_empty());
        if let Some(d) = digest {
            check(d, "resumePayloadDigest", RESUME_DIGEST_LEN_MAX)?;
        }
        Ok(Some(ResumeClaim {
            id: id.clone(),
            digest: digest.cloned(),
        }))
    }

    /// The idempotency key of the event: `resume/<id>` or `resume/<id> <digest>`.
    pub(crate) fn key(&self) -> String {
        match &self.digest {
            Some(d) => format!("{KEY_PREFIX}{} {d}", self.id),
            None => format!("{KEY_PREFIX}{}", self.id),
        }
    }

    /// Whether a resume recorded with `digest` may be this one: the digests are equal, or
    /// one of them is absent (world-local compares only when both are present).
    pub(crate) fn digest_matches(&self, digest: Option<&str>) -> bool {
        match (self.digest.as_deref(), digest) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        }
    }
}

/// The `(resumeId, digest)` of a stored event's key, when it is a resume's.
pub(crate) fn parse_key(key: &str) -> Option<(&str, Option<&str>)> {
    let rest = key.strip_prefix(KEY_PREFIX)?;
    Some(match rest.split_once(' ') {
        Some((id, digest)) => (id, Some(digest)),
        None => (rest, None),
    })
}

/// The `resumeId` of a stored event of type `ty` keyed `key`.
pub(crate) fn resume_id_of(ty: EventType, key: Option<&str>) -> Option<&str> {
    match ty {
        EventType::HookReceived => key.and_then(parse_key).map(|(id, _)| id),
        _ => None,
    }
}

/// The `resumeId` of a stored event of kind `kind` keyed `key`: set on a `hook_received`
/// a World wrote for `params.resumeId` (keyed `resume/<resumeId>[ <digest>]`), else `None`.
/// For readers of the raw logs (`runlog export`); the World's own reads carry it already.
pub fn resume_id_of_stored<'a>(kind: &str, key: Option<&'a str>) -> Option<&'a str> {
    if kind != EventType::HookReceived.as_str() {
        return None;
    }
    resume_id_of(EventType::HookReceived, key)
}

fn check(value: &str, field: &str, len_max: usize) -> Result<(), WorldError> {
    if value.len() > len_max {
        return Err(WorldError::invalid(
            format!("params.{field}"),
            format!("length {} exceeds {len_max} bytes", value.len()),
        ));
    }
    if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(WorldError::invalid(
            format!("params.{field}"),
            "must not hold whitespace or control characters",
        ));
    }
    Ok(())
}
