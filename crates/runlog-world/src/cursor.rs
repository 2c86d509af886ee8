//! Cursors: opaque strings to the caller, stable across processes and restarts
//! (`docs/WORLD.md` §3). An events cursor is the seq of the last event returned
//! (`seq:<n>`); entity lists page by their own stable keys (`run:<runId>`,
//! `step:<creation seq>`, `hook:<runId>/<creation seq>`, `evc:<runId>/<seq>`).

use runlog::Seq;

use crate::error::WorldError;

fn bad(field: &str, cursor: &str) -> WorldError {
    WorldError::invalid(field, format!("{cursor:?} is not a cursor of this list"))
}

/// `seq:<n>`.
pub(crate) fn encode_seq(seq: Seq) -> String {
    format!("seq:{seq}")
}

/// Decodes [`encode_seq`].
///
/// # Errors
/// [`WorldError::InvalidRequest`] naming `field`.
pub(crate) fn decode_seq(cursor: &str, field: &str) -> Result<Seq, WorldError> {
    cursor
        .strip_prefix("seq:")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| bad(field, cursor))
}

/// `<tag>:<text>`.
pub(crate) fn encode(tag: &str, text: &str) -> String {
    format!("{tag}:{text}")
}

/// Decodes [`encode`] with `tag`.
///
/// # Errors
/// [`WorldError::InvalidRequest`] (field `pagination.cursor`).
pub(crate) fn decode<'a>(cursor: &'a str, tag: &str) -> Result<&'a str, WorldError> {
    cursor
        .strip_prefix(tag)
        .and_then(|rest| rest.strip_prefix(':'))
        .filter(|rest| !rest.is_empty())
        .ok_or_else(|| bad("pagination.cursor", cursor))
}

/// `<tag>:<runId>/<seq>`.
pub(crate) fn encode_pair(tag: &str, run_id: &str, seq: Seq) -> String {
    format!("{tag}:{run_id}/{seq}")
}

/// Decodes [`encode_pair`].
///
/// # Errors
/// [`WorldError::InvalidRequest`] (field `pagination.cursor`).
pub(crate) fn decode_pair(cursor: &str, tag: &str) -> Result<(String, Seq), WorldError> {
    let rest = decode(cursor, tag)?;
    let (run, seq) = rest
        .rsplit_once('/')
        .ok_or_else(|| bad("pagination.cursor", cursor))?;
    let seq = seq.parse().map_err(|_| bad("pagination.cursor", cursor))?;
    Ok((run.to_string(), seq))
}
