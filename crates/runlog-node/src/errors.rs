//! [`BindError`]: what a rejected promise carries. Every error becomes a JavaScript `Error`
//! with a stable string `code`, the message, and the fields of the `runlog::Error` variant
//! (camelCase), e.g. `{code: 'FENCED', runId, expected, actual}`.
//!
//! The codes are a contract of the binding (the README of `packages/world-runlog` lists
//! them); each `runlog::Error` variant is mapped explicitly in [`BindError::from_store`].

use std::any::Any;
use std::ptr;

use napi::bindgen_prelude::{Object, ToNapiValue};
use napi::sys;

/// A field of an error object.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Prop {
    Str(String),
    Num(f64),
}

/// An error on its way to JavaScript: code, message, fields.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct BindError {
    pub code: &'static str,
    pub message: String,
    pub props: Vec<(&'static str, Prop)>,
}

/// Largest integer a JavaScript number holds exactly (`Number.MAX_SAFE_INTEGER`).
pub(crate) const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

impl BindError {
    pub(crate) fn new(code: &'static str, message: impl Into<String>) -> BindError {
        BindError {
            code,
            message: message.into(),
            props: Vec::new(),
        }
    }

    fn with(mut self, key: &'static str, value: Prop) -> BindError {
        self.props.push((key, value));
        self
    }

    /// Adds a string field.
    pub(crate) fn with_str(self, key: &'static str, value: impl Into<String>) -> BindError {
        self.with(key, Prop::Str(value.into()))
    }

    /// Adds a number field.
    pub(crate) fn with_num(self, key: &'static str, value: u64) -> BindError {
        self.num(key, value)
    }

    fn str(self, key: &'static str, value: impl Into<String>) -> BindError {
        self.with(key, Prop::Str(value.into()))
    }

    fn num(self, key: &'static str, value: u64) -> BindError {
        // Seqs, offsets and durations of a real store are far below 2^53; a larger one is
        // rounded here, never wrapped.
        self.with(key, Prop::Num(value as f64))
    }

    /// `INVALID_INPUT` for argument `field` (`runId`, `events[3].payload`, `options.x`).
    pub(crate) fn invalid(field: impl Into<String>, reason: impl AsRef<str>) -> BindError {
        let field = field.into();
        BindError::new("INVALID_INPUT", format!("{field}: {}", reason.as_ref())).str("field", field)
    }

    /// `CLOSED`: the store was closed by `close()`.
    pub(crate) fn closed() -> BindError {
        BindError::new(
            "CLOSED",
            "the store is closed (Store.close() was called); open it again",
        )
    }

    /// `PANICKED`: the binding caught a panic; the process goes on.
    pub(crate) fn panicked(payload: &(dyn Any + Send)) -> BindError {
        let detail = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic payload".to_owned());
        BindError::new(
            "PANICKED",
            format!("runlog binding panicked: {detail} (caught; the process goes on)"),
        )
        .str("detail", detail)
    }

    /// `OUT_OF_RANGE`: a value the store returned does not fit a JavaScript number exactly.
    pub(crate) fn out_of_range(what: &str, value: u64) -> BindError {
        BindError::new(
            "OUT_OF_RANGE",
            format!("{what} {value} exceeds Number.MAX_SAFE_INTEGER"),
        )
        .num("value", value)
    }

    /// `IO`: no worker thread could be started.
    pub(crate) fn thread_spawn(lane: &str, e: &std::io::Error) -> BindError {
        BindError::new("IO", format!("cannot start a {lane} thread: {e}"))
            .str("op", "spawning a thread")
    }

    /// The code and fields of every `runlog::Error` variant; the message is the error's
    /// followed by each cause it does not already say (as the CLI prints it): on PostgreSQL
    /// the client's error says only "db error", and the server's reason is its cause.
    pub(crate) fn from_store(e: runlog::Error) -> BindError {
        use runlog::Error as E;
        let message = e.message_with_causes();
        let b = |code| BindError::new(code, message.clone());
        match e {
            E::InvalidRunId { id, reason } => b("INVALID_INPUT")
                .str("field", "runId")
                .str("runId", id)
                .str("reason", reason),
            E::InvalidEvent { field, reason } => b("INVALID_INPUT")
                .str("field", js_field(field))
                .str("reason", reason),
            E::InvalidConfig(reason) => b("INVALID_INPUT")
                .str("field", "options")
                .str("reason", reason),
            E::RunNotFound { run } => b("NOT_FOUND").str("runId", run),
            E::RunExists { run } => b("EXISTS").str("runId", run),
            E::Fenced {
                run,
                expected,
                actual,
            } => b("FENCED")
                .str("runId", run)
                .num("expected", expected)
                .num("actual", actual),
            E::DuplicateDecision { run, key, seq } => b("DUPLICATE")
                .str("runId", run)
                .str("key", key)
                .num("seq", seq),
            E::Busy {
                run,
                holder,
                waited_ms,
            } => b("BUSY")
                .str("runId", run)
                .str("holder", holder)
                .num("waitedMs", waited_ms),
            E::Corrupt {
                run,
                segment,
                offset,
                detail,
            } => b("CORRUPT")
                .str("runId", run)
                .str("segment", segment)
                .num("offset", offset)
                .str("detail", detail),
            E::UnsupportedVersion {
                path,
                found,
                supported,
            } => b("UNSUPPORTED_VERSION")
                .str("path", path.display().to_string())
                .num("found", found.into())
                .num("supported", supported.into()),
            E::NotAStore { path, detail } => b("NOT_A_STORE")
                .str("path", path.display().to_string())
                .str("detail", detail),
            E::DiskFull { op, path } => b("DISK_FULL")
                .str("op", op)
                .str("path", path.display().to_string()),
            E::Poisoned { run, cause } => b("POISONED").str("runId", run).str("cause", cause),
            E::Panicked { run, detail } => b("PANICKED").str("runId", run).str("detail", detail),
            E::ReadOnly { op, path } => b("READ_ONLY")
                .str("op", op)
                .str("path", path.display().to_string()),
            E::Io { op, path, source } => {
                let err = b("IO")
                    .str("op", op)
                    .str("path", path.display().to_string());
                match source.raw_os_error() {
                    Some(errno) => err.with("errno", Prop::Num(errno.into())),
                    None => err,
                }
            }
            // `runlog::Error` is non_exhaustive: a variant added later is still an error with
            // a code, never a crash; the mapping above is updated with it.
            _ => b("UNKNOWN"),
        }
    }

    /// Builds the JavaScript `Error`. Runs on the JavaScript thread.
    pub(crate) fn to_js(&self, env: sys::napi_env) -> napi::Result<sys::napi_value> {
        let code = unsafe { <&str as ToNapiValue>::to_napi_value(env, self.code)? };
        let msg = unsafe { <&str as ToNapiValue>::to_napi_value(env, &self.message)? };
        let mut raw = ptr::null_mut();
        let status = unsafe { sys::napi_create_error(env, code, msg, &mut raw) };
        if status != sys::Status::napi_ok {
            return Err(napi::Error::from_reason("napi_create_error failed"));
        }
        let mut obj = Object::from_raw(env, raw);
        for (key, value) in &self.props {
            match value {
                Prop::Str(s) => obj.set(key, s.as_str())?,
                Prop::Num(n) => obj.set(key, *n)?,
            }
        }
        Ok(raw)
    }
}

impl From<runlog::Error> for BindError {
    fn from(e: runlog::Error) -> BindError {
        BindError::from_store(e)
    }
}

/// The JavaScript name of a core event field (`correlation_id` → `correlationId`).
fn js_field(field: &str) -> String {
    match field {
        "correlation_id" => "correlationId".to_owned(),
        "event_id" => "eventId".to_owned(),
        other => other.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::path::PathBuf;

    use super::*;

    fn prop<'a>(e: &'a BindError, key: &str) -> Option<&'a Prop> {
        e.props.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    #[test]
    fn fenced_carries_expected_and_actual() {
        let e = BindError::from(runlog::Error::Fenced {
            run: "r1".into(),
            expected: 3,
            actual: 5,
        });
        assert_eq!(e.code, "FENCED");
        assert_eq!(prop(&e, "runId"), Some(&Prop::Str("r1".into())));
        assert_eq!(prop(&e, "expected"), Some(&Prop::Num(3.0)));
        assert_eq!(prop(&e, "actual"), Some(&Prop::Num(5.0)));
        assert!(e.message.contains("expected last seq 3, actual 5"));
    }

    #[test]
    fn every_variant_has_its_code() {
        use runlog::Error as E;
        let p = || PathBuf::from("/s");
        let cases: Vec<(runlog::Error, &str)> = vec![
            (
                E::InvalidRunId {
                    id: "a/b".into(),
                    reason: "only [A-Za-z0-9_-] allowed",
                },
                "INVALID_INPUT",
            ),
            (
                E::InvalidEvent {
                    field: "payload",
                    reason: "too big".into(),
                },
                "INVALID_INPUT",
            ),
            (E::InvalidConfig("x".into()), "INVALID_INPUT"),
            (E::RunNotFound { run: "r".into() }, "NOT_FOUND"),
            (E::RunExists { run: "r".into() }, "EXISTS"),
            (
                E::DuplicateDecision {
                    run: "r".into(),
                    key: "k".into(),
                    seq: 1,
                },
                "DUPLICATE",
            ),
            (
                E::Busy {
                    run: "r".into(),
                    holder: "pid 1".into(),
                    waited_ms: 10,
                },
                "BUSY",
            ),
            (E::corrupt("r", "seg-00000001.log", 4096, "crc"), "CORRUPT"),
            (
                E::UnsupportedVersion {
                    path: p(),
                    found: 9,
                    supported: 1,
                },
                "UNSUPPORTED_VERSION",
            ),
            (
                E::NotAStore {
                    path: p(),
                    detail: "no FORMAT".into(),
                },
                "NOT_A_STORE",
            ),
            (
                E::DiskFull {
                    op: "writing",
                    path: p(),
                },
                "DISK_FULL",
            ),
            (
                E::Poisoned {
                    run: "r".into(),
                    cause: "EIO".into(),
                },
                "POISONED",
            ),
            (
                E::Panicked {
                    run: "r".into(),
                    detail: "boom".into(),
                },
                "PANICKED",
            ),
            (
                E::ReadOnly {
                    op: "append to run r".into(),
                    path: p(),
                },
                "READ_ONLY",
            ),
            (
                E::Io {
                    op: "reading",
                    path: p(),
                    source: io::Error::from_raw_os_error(13),
                },
                "IO",
            ),
        ];
        for (err, code) in cases {
            let shown = err.to_string();
            let b = BindError::from(err);
            assert_eq!(b.code, code, "{shown}");
            assert_eq!(b.message, shown);
        }
    }

    /// An error that says little and keeps its reason as its source, as the PostgreSQL
    /// client's errors do ("db error", caused by the server's message).
    #[derive(Debug)]
    struct Terse(io::Error);

    impl std::fmt::Display for Terse {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("db error")
        }
    }

    impl std::error::Error for Terse {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_postgres_failure_message_carries_the_servers_reason() {
        let reason = "ERROR: permission denied for database app";
        let e = BindError::from(runlog::Error::Io {
            op: "migrating",
            path: PathBuf::from("postgres"),
            source: io::Error::other(Terse(io::Error::other(reason))),
        });
        assert_eq!(e.code, "IO");
        assert_eq!(
            e.message,
            format!("I/O error while migrating postgres: db error: {reason}")
        );
    }

    #[test]
    fn io_error_keeps_errno_and_corrupt_keeps_where() {
        let e = BindError::from(runlog::Error::Io {
            op: "opening",
            path: PathBuf::from("/x"),
            source: io::Error::from_raw_os_error(13),
        });
        assert_eq!(prop(&e, "errno"), Some(&Prop::Num(13.0)));
        assert_eq!(prop(&e, "path"), Some(&Prop::Str("/x".into())));
        let c = BindError::from(runlog::Error::corrupt("r", "seg-00000001.log", 4096, "crc"));
        assert_eq!(
            prop(&c, "segment"),
            Some(&Prop::Str("seg-00000001.log".into()))
        );
        assert_eq!(prop(&c, "offset"), Some(&Prop::Num(4096.0)));
    }

    #[test]
    fn invalid_event_field_is_named_in_javascript_terms() {
        let e = BindError::from(runlog::Error::InvalidEvent {
            field: "correlation_id",
            reason: "length 300 > 256".into(),
        });
        assert_eq!(prop(&e, "field"), Some(&Prop::Str("correlationId".into())));
    }

    #[test]
    fn panic_payloads_become_details() {
        let e = BindError::panicked(&"boom");
        assert_eq!(e.code, "PANICKED");
        assert_eq!(prop(&e, "detail"), Some(&Prop::Str("boom".into())));
        let e = BindError::panicked(&String::from("owned"));
        assert_eq!(prop(&e, "detail"), Some(&Prop::Str("owned".into())));
    }
}
