//! [`StreamError`]: every way a stream operation fails, typed, with its context.

/// A failed stream operation. Bad input (`InvalidName`, `InvalidLimit`, `InvalidCursor`) and
/// `Closed` are found before anything is written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// The stream name is empty or longer than [`super::NAME_LEN_BYTES_MAX`] bytes.
    #[error("invalid stream name {name:?}: {reason}")]
    InvalidName {
        /// The name (its first 64 characters).
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// A page limit outside `1..=max` (`max` is [`super::CHUNKS_PER_PAGE_MAX`]).
    #[error("page limit {limit} not in 1..={max}")]
    InvalidLimit {
        /// The limit asked for.
        limit: usize,
        /// The largest allowed.
        max: usize,
    },

    /// A cursor that no page of this API returned (not a chunk index in decimal).
    #[error("invalid stream cursor {cursor:?}")]
    InvalidCursor {
        /// The cursor (its first 64 characters).
        cursor: String,
    },

    /// A write to a closed stream; nothing was written.
    #[error("stream {name:?} of run {run} is closed")]
    Closed {
        /// The workflow run.
        run: String,
        /// The stream.
        name: String,
    },

    /// A write lost the race for the stream's next index to other writers this many times in
    /// a row ([`super::WRITE_ATTEMPTS_MAX`]); nothing was written by this call.
    #[error(
        "stream {name:?} of run {run}: {attempts} writes raced ahead of this one; nothing written"
    )]
    Contended {
        /// The workflow run.
        run: String,
        /// The stream.
        name: String,
        /// Attempts made.
        attempts: u32,
    },

    /// The log where this stream must live records another owner: a hashed log id shared by
    /// two names (or a run made outside this API under a `stream-` id). Nothing was written.
    #[error("stream log {log} belongs to {found}, not to {wanted}")]
    Collision {
        /// The log's run id.
        log: String,
        /// The owner wanted, as `run/name`.
        wanted: String,
        /// The owner recorded in the log's metadata.
        found: String,
    },

    /// A stream of a workflow run that gc archived and that is not live (not restored):
    /// its logs are in its archive (`runlog restore` puts them back), so a write there
    /// would start a second copy no run owns, and a read would wait for chunks that never
    /// come. Nothing was written.
    #[error(
        "run {run} was collected by gc into its archive (runlog restore puts it back): stream {name:?} is not in the store"
    )]
    RunCollected {
        /// The workflow run.
        run: String,
        /// The stream.
        name: String,
    },

    /// A stream or index log holds an event this API never writes there (an unknown kind, an
    /// event after the close marker, a name that is not UTF-8).
    #[error("stream log {log} is malformed at seq {seq}: {detail}")]
    Malformed {
        /// The log's run id.
        log: String,
        /// Where.
        seq: u64,
        /// What.
        detail: String,
    },

    /// The backend failed (I/O, corruption, a chunk above the payload limit, a read-only
    /// store, …); see [`runlog::Error`].
    #[error(transparent)]
    Store(#[from] runlog::Error),
}

/// The first 64 characters of `s`, for error messages that carry caller input.
pub(crate) fn clip(s: &str) -> String {
    s.chars().take(64).collect()
}
