//! Where a stream lives: the runlog run ids of a stream's chunk log and of a workflow run's
//! stream index, derived from (workflow run id, stream name), and the metadata that records
//! both in full.
//!
//! ```text
//! chunk log   stream-<R>-n<E(name)>      when it fits in 128 bytes, else
//!             stream-<R>-h<H(name)>
//! index log   stream-<R>-i
//! R           <decimal length of run>-<run>   when the run id is at most 80 bytes, else
//!             h<H(run)>
//! E(name)     each UTF-8 byte of [A-Za-z0-9_] as itself, every other byte as -xx (hex)
//! H(s)        the first 16 bytes of SHA-256(s), as 32 lowercase hex digits
//! ```
//!
//! Why this shape:
//! - every id is a valid [`RunId`] (`[A-Za-z0-9_-]`, at most 128 bytes, starts with `s`);
//! - the `stream-` prefix keeps stream logs apart from workflow runs, whose ids the SDK
//!   mints as `wrun_…` (`-` is not in an SDK run id at all);
//! - `R` is prefix-free (a length-delimited run id starts with a digit, a hashed one with
//!   `h` and has a fixed length), so `stream-<R>-` names exactly one workflow run's logs: a
//!   range of `list_runs`, which is id-ordered;
//! - after `stream-<R>-` comes one of `n`, `h`, `i`: a plain name, a hashed name, the index;
//! - `E` is injective (`-` only ever starts an escape), so plain ids never collide. Hashed
//!   ids could in principle (and any run could be made under a `stream-` id by hand): the
//!   owner recorded in a log's metadata is checked on every operation, so a collision is
//!   [`StreamError::Collision`], never two streams in one log.
//!
//! The metadata (at most 2048 bytes, `RunLog::create_run`) records the owner in full, so
//! every id is reversible, hashed or not: [`STREAM_META_MAGIC`], one byte of run id length,
//! the run id, the name's UTF-8 bytes. An index log's metadata is [`INDEX_META_MAGIC`] and
//! the run id.
//!
//! [`StreamError::Collision`]: super::StreamError::Collision

use runlog::RunId;
use sha2::{Digest, Sha256};

/// The prefix of every run id that holds a stream's chunks or a run's stream index.
pub const LOG_ID_PREFIX: &str = "stream-";

/// Longest stream name, in UTF-8 bytes (the shortest is 1). The recorded owner (run id up
/// to 128 bytes, name, 10 bytes of framing) then fits the 2048-byte run metadata.
pub const NAME_LEN_BYTES_MAX: usize = 1024;

/// The longest workflow run id kept in clear in a log id; longer ones are hashed so that a
/// hashed name still fits: `7 + (2 + 1 + 80) + 2 + 32 = 124 ≤ 128`.
const RUN_PLAIN_LEN_BYTES_MAX: usize = 80;

/// The first bytes of a chunk log's metadata (version 1).
pub const STREAM_META_MAGIC: &[u8; 8] = b"rlstrm1\0";
/// The first bytes of an index log's metadata (version 1).
pub const INDEX_META_MAGIC: &[u8; 8] = b"rlsidx1\0";

/// Why a stream name is refused, or `None` when it is usable. Any characters are allowed,
/// NUL and `/` included: the name never reaches the file system in clear.
pub(crate) fn name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("empty");
    }
    if name.len() > NAME_LEN_BYTES_MAX {
        return Some("longer than 1024 bytes");
    }
    None
}

/// The chunk log of stream `name` of workflow run `run`. `name` must be valid
/// ([`name_problem`] is `None`).
pub(crate) fn chunk_log(run: &RunId, name: &str) -> RunId {
    let head = format!("{LOG_ID_PREFIX}{}-", run_part(run));
    RunId::new(format!("{head}n{}", encode(name))).unwrap_or_else(|_| {
        RunId::new(format!("{head}h{}", hash_hex(name.as_bytes())))
            .expect("a hashed log id is at most 124 bytes of [A-Za-z0-9_-]")
    })
}

/// The index log of workflow run `run`: one fact per stream name, keyed by its chunk log id.
pub(crate) fn index_log(run: &RunId) -> RunId {
    RunId::new(format!("{LOG_ID_PREFIX}{}-i", run_part(run)))
        .expect("an index log id is at most 93 bytes of [A-Za-z0-9_-]")
}

fn run_part(run: &RunId) -> String {
    let run = run.as_str();
    match run.len() > RUN_PLAIN_LEN_BYTES_MAX {
        true => format!("h{}", hash_hex(run.as_bytes())),
        false => format!("{}-{run}", run.len()),
    }
}

/// `E(name)`: bytes of `[A-Za-z0-9_]` as themselves, every other byte as `-` and two
/// lowercase hex digits. Injective, and its output is in the run id alphabet.
fn encode(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' {
            out.push(char::from(b));
        } else {
            out.push('-');
            push_hex(&mut out, b);
        }
    }
    out
}

fn hash_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(32);
    for &b in &digest[..16] {
        push_hex(&mut out, b);
    }
    out
}

fn push_hex(out: &mut String, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(char::from(HEX[usize::from(b >> 4)]));
    out.push(char::from(HEX[usize::from(b & 0x0f)]));
}

/// The metadata of a chunk log: the owner in full.
pub(crate) fn stream_meta(run: &RunId, name: &str) -> Vec<u8> {
    let run = run.as_str().as_bytes();
    let mut meta = Vec::with_capacity(STREAM_META_MAGIC.len() + 1 + run.len() + name.len());
    meta.extend_from_slice(STREAM_META_MAGIC);
    meta.push(u8::try_from(run.len()).expect("a run id is at most 128 bytes"));
    meta.extend_from_slice(run);
    meta.extend_from_slice(name.as_bytes());
    meta
}

/// The owner recorded in a chunk log's metadata, or `None` when `meta` is not one.
pub(crate) fn parse_stream_meta(meta: &[u8]) -> Option<(RunId, String)> {
    let rest = meta.strip_prefix(STREAM_META_MAGIC.as_slice())?;
    let (&run_len, rest) = rest.split_first()?;
    let (run, name) = rest.split_at_checked(usize::from(run_len))?;
    let run = RunId::new(std::str::from_utf8(run).ok()?).ok()?;
    let name = String::from_utf8(name.to_vec()).ok()?;
    name_problem(&name).is_none().then_some((run, name))
}

/// The metadata of an index log: the run id in full.
pub(crate) fn index_meta(run: &RunId) -> Vec<u8> {
    [INDEX_META_MAGIC.as_slice(), run.as_str().as_bytes()].concat()
}

/// `stream-<R>-`: the prefix every stream log of workflow run `run` starts with, and no
/// other run's (`R` is prefix-free), so its logs are one range of an id-ordered listing.
pub(crate) fn run_logs_prefix(run: &RunId) -> String {
    format!("{LOG_ID_PREFIX}{}-", run_part(run))
}

/// The workflow run a chunk log's or an index log's metadata names as its owner.
/// The workflow run a stream or index log's id names (`stream-<len>-<run>-…`); `None` for
/// any other id and for a hashed run part (a run id above 80 bytes, never `wrun_<ULID>`).
/// Only a hint: the log's metadata ([`owner_of_meta`]) is what says.
pub(crate) fn owner_of_log_id(log: &str) -> Option<RunId> {
    let rest = log.strip_prefix(LOG_ID_PREFIX)?;
    let (len, rest) = rest.split_once('-')?;
    let len: usize = len.parse().ok()?;
    let run = rest.get(..len)?;
    rest[len..].starts_with('-').then(|| RunId::new(run).ok())?
}

pub(crate) fn owner_of_meta(meta: &[u8]) -> Option<RunId> {
    if let Some(rest) = meta.strip_prefix(INDEX_META_MAGIC.as_slice()) {
        return RunId::new(std::str::from_utf8(rest).ok()?).ok();
    }
    parse_stream_meta(meta).map(|(run, _)| run)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: &str) -> RunId {
        RunId::new(id).unwrap()
    }

    #[test]
    fn the_owner_is_read_back_from_every_log_id_of_a_short_run() {
        let owner = run("wrun_01J9ZKZ8T5X6Q0N3F4G7H8J9KM");
        for log in [
            chunk_log(&owner, "strm_x_user"),
            chunk_log(&owner, &"n".repeat(300)),
            index_log(&owner),
        ] {
            assert_eq!(owner_of_log_id(log.as_str()), Some(owner.clone()), "{log}");
        }
        let long = run(&"r".repeat(100));
        assert_eq!(owner_of_log_id(index_log(&long).as_str()), None);
        for other in [
            "stream-owner-nout",
            "stream-30-short",
            "stream-x-",
            "wrun_1",
            "stream-2-ab",
        ] {
            assert_eq!(owner_of_log_id(other), None, "{other}");
        }
    }

    #[test]
    fn sdk_names_stay_readable_in_the_log_id() {
        let log = chunk_log(
            &run("wrun_01J9ZKZ8T5X6Q0N3F4G7H8J9KM"),
            "strm_01J9ZKZ8T5X6Q0N3F4G7H8J9KM_user",
        );
        assert_eq!(
            log.as_str(),
            "stream-31-wrun_01J9ZKZ8T5X6Q0N3F4G7H8J9KM-nstrm_01J9ZKZ8T5X6Q0N3F4G7H8J9KM_user"
        );
        assert_eq!(
            index_log(&run("wrun_01J9ZKZ8T5X6Q0N3F4G7H8J9KM")).as_str(),
            "stream-31-wrun_01J9ZKZ8T5X6Q0N3F4G7H8J9KM-i"
        );
    }

    #[test]
    fn escapes_keep_distinct_names_distinct() {
        let r = run("wrun_1");
        let names = [
            "a-b", "a_b", "a-2db", "a/b", "a\0b", "a.b", "ä", "-", "--", "_",
        ];
        let ids: std::collections::HashSet<_> = names.iter().map(|n| chunk_log(&r, n)).collect();
        assert_eq!(ids.len(), names.len());
        assert_eq!(chunk_log(&r, "a-b").as_str(), "stream-6-wrun_1-na-2db");
        assert_eq!(chunk_log(&r, "a\0b").as_str(), "stream-6-wrun_1-na-00b");
    }

    #[test]
    fn run_parts_are_prefix_free() {
        // "a" and "a-1" would share a prefix without the length; with it they cannot.
        let short = index_log(&run("a"));
        let long = chunk_log(&run("a-1"), "x");
        assert!(
            !long
                .as_str()
                .starts_with(short.as_str().trim_end_matches('i'))
        );
    }

    #[test]
    fn long_names_and_runs_are_hashed_and_fit() {
        let long_run = run(&"r".repeat(128));
        let long_name = "\u{1F600}".repeat(256); // 1024 bytes, 3072 after escaping
        let log = chunk_log(&long_run, &long_name);
        assert!(log.as_str().starts_with("stream-h"));
        assert_eq!(log.as_str().len(), 7 + 33 + 2 + 32);
        let edge = run(&"r".repeat(80));
        let log = chunk_log(&edge, &"n".repeat(NAME_LEN_BYTES_MAX));
        assert_eq!(log.as_str().len(), 7 + 83 + 2 + 32);
        assert!(log.as_str()[7 + 83..].starts_with("-h"));
        assert_eq!(index_log(&long_run).as_str().len(), 7 + 33 + 2);
    }

    #[test]
    fn metadata_round_trips_the_owner_within_the_limit() {
        let r = run(&"r".repeat(128));
        let name = "\0\u{1F600}/.".repeat(NAME_LEN_BYTES_MAX / 8);
        let meta = stream_meta(&r, &name);
        assert!(meta.len() <= 2048);
        assert_eq!(parse_stream_meta(&meta), Some((r.clone(), name)));
        assert_eq!(parse_stream_meta(&index_meta(&r)), None);
        assert_eq!(parse_stream_meta(b"rlstrm1\0\x05ab"), None);
    }
}
