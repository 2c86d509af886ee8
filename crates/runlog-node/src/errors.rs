//! [`BindError`]: what a rejected promise carries. Every error becomes a JavaScript `Error`
//! with a stable string `code`, the message, the fields of the failure (camelCase, e.g.
//! `{code: 'FENCED', runId, expected, actual}`), and from the one error table
//! ([`runlog_world::error_table`]) the SDK class it stands for (`className`) and its
//! HTTP-like `status` (none for `CLOSED`).
//!
//! The codes are a contract of the binding; `packages/world-runlog/src/error-codes.js`,
//! its `.d.ts` and `docs/ERRORS.md` are generated from the table (`error_files.rs`).

use std::any::Any;

use napi::bindgen_prelude::Unknown;
use napi::{Env, JsValue};
use napi_derive::napi;
use runlog_world::error_table::{
    Code, ERROR_KINDS, ErrorKind, KindCode, Surface, error_kind, store_kind,
};

#[cfg(test)]
mod files;

/// A field of an error object.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Prop {
    Str(String),
    Num(f64),
}

/// An error on its way to JavaScript: code, message, fields (`className` and `status`
/// first).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct BindError {
    pub code: Code,
    pub message: String,
    pub props: Vec<(&'static str, Prop)>,
}

/// Largest integer a JavaScript number holds exactly (`Number.MAX_SAFE_INTEGER`).
pub(crate) const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// The binding's own row `name` of the error table, checked when the crate is built.
macro_rules! binding {
    ($name:literal) => {
        const { error_kind(Surface::Binding, $name) }
    };
}

impl BindError {
    /// An error of `code` standing for SDK class `class_name`: its fields start with
    /// `className` and the code's `status` (none for `CLOSED`).
    pub(crate) fn with_code(
        code: Code,
        class_name: &'static str,
        message: impl Into<String>,
    ) -> BindError {
        let b = BindError {
            code,
            message: message.into(),
            props: Vec::new(),
        }
        .str("className", class_name);
        match code.status() {
            Some(status) => b.num("status", status.into()),
            None => b,
        }
    }

    /// An error of the table's row `kind` (of a fixed code).
    pub(crate) fn of(kind: &'static ErrorKind, message: impl Into<String>) -> BindError {
        let code = match kind.code {
            KindCode::Is(c) => c,
            KindCode::OfFirstFault => Code::Unknown,
        };
        BindError::with_code(code, kind.class_name, message)
    }

    /// `INTERNAL`: a Node-API call, or the serialization of a result, failed.
    pub(crate) fn internal(message: impl Into<String>) -> BindError {
        BindError::of(binding!("Internal"), message)
    }

    /// `INVALID_INPUT` without a field: reading an argument failed (a getter threw).
    pub(crate) fn unreadable_input(message: impl Into<String>) -> BindError {
        BindError::of(binding!("InvalidInput"), message)
    }

    /// `UNSUPPORTED`: `op` does not exist on this backend.
    pub(crate) fn unsupported(op: &'static str, message: impl Into<String>) -> BindError {
        BindError::of(binding!("Unsupported"), message).str("op", op)
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
        BindError::of(
            binding!("InvalidInput"),
            format!("{field}: {}", reason.as_ref()),
        )
        .str("field", field)
    }

    /// `CLOSED`: the store was closed by `close()`.
    pub(crate) fn closed() -> BindError {
        BindError::of(
            binding!("Closed"),
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
        BindError::of(
            binding!("Panicked"),
            format!("runlog binding panicked: {detail} (caught; the process goes on)"),
        )
        .str("detail", detail)
    }

    /// `OUT_OF_RANGE`: a value the store returned does not fit a JavaScript number exactly.
    pub(crate) fn out_of_range(what: &str, value: u64) -> BindError {
        BindError::of(
            binding!("OutOfRange"),
            format!("{what} {value} exceeds Number.MAX_SAFE_INTEGER"),
        )
        .num("value", value)
    }

    /// `IO`: no worker thread could be started.
    pub(crate) fn thread_spawn(lane: &str, e: &std::io::Error) -> BindError {
        BindError::of(
            binding!("ThreadSpawn"),
            format!("cannot start a {lane} thread: {e}"),
        )
        .str("op", "spawning a thread")
    }

    /// The code, class and fields of every `runlog::Error` variant (its row of the error
    /// table, [`store_kind`]); the message is the error's followed by each cause it does not
    /// already say (as the CLI prints it): on PostgreSQL the client's error says only "db
    /// error", and the server's reason is its cause.
    pub(crate) fn from_store(e: runlog::Error) -> BindError {
        use runlog::Error as E;
        let b = BindError::of(store_kind(&e), e.message_with_causes());
        match e {
            E::InvalidRunId { id, reason } => b
                .str("field", "runId")
                .str("runId", id)
                .str("reason", reason),
            E::InvalidEvent { field, reason } => {
                b.str("field", js_field(field)).str("reason", reason)
            }
            E::InvalidConfig(reason) => b.str("field", "options").str("reason", reason),
            E::RunIdCaseConflict {
                requested,
                existing,
            } => b
                .str("field", "runId")
                .str("runId", requested)
                .str("existing", existing),
            E::RunNotFound { run } | E::RunExists { run } => b.str("runId", run),
            E::Fenced {
                run,
                expected,
                actual,
            } => b
                .str("runId", run)
                .num("expected", expected)
                .num("actual", actual),
            E::DuplicateDecision { run, key, seq } => {
                b.str("runId", run).str("key", key).num("seq", seq)
            }
            E::Busy {
                run,
                holder,
                waited_ms,
            } => b
                .str("runId", run)
                .str("holder", holder)
                .num("waitedMs", waited_ms),
            E::Corrupt {
                run,
                segment,
                offset,
                detail,
            } => b
                .str("runId", run)
                .str("segment", segment)
                .num("offset", offset)
                .str("detail", detail),
            E::UnsupportedVersion {
                path,
                found,
                supported,
            } => b
                .str("path", path.display().to_string())
                .num("found", found.into())
                .num("supported", supported.into()),
            E::NotAStore { path, detail } => b
                .str("path", path.display().to_string())
                .str("detail", detail),
            E::DiskFull { op, path } => b.str("op", op).str("path", path.display().to_string()),
            E::ReadOnly { op, path } => b.str("op", op).str("path", path.display().to_string()),
            E::Poisoned { run, cause } => b.str("runId", run).str("cause", cause),
            E::Panicked { run, detail } => b.str("runId", run).str("detail", detail),
            E::Io { op, path, source } => {
                let err = b.str("op", op).str("path", path.display().to_string());
                match source.raw_os_error() {
                    Some(errno) => err.with("errno", Prop::Num(errno.into())),
                    None => err,
                }
            }
            // `runlog::Error` is non_exhaustive: a variant added later is still an error with
            // a code (`UNKNOWN`, its row of the table), never a crash.
            _ => b,
        }
    }

    /// Builds the JavaScript `Error`: `code`, message and the fields. Runs on the JavaScript
    /// thread.
    pub(crate) fn to_js<'e>(&self, env: &'e Env) -> napi::Result<Unknown<'e>> {
        // napi's `Error` carries a status, not a code: the object's `code` is set after.
        let mut obj = env.create_error(napi::Error::from_reason(self.message.as_str()))?;
        obj.set("code", self.code.as_str())?;
        for (key, value) in &self.props {
            match value {
                Prop::Str(s) => obj.set(key, s.as_str())?,
                Prop::Num(n) => obj.set(key, *n)?,
            }
        }
        Ok(obj.to_unknown())
    }
}

impl From<runlog::Error> for BindError {
    fn from(e: runlog::Error) -> BindError {
        BindError::from_store(e)
    }
}

/// `errorTable() → string`: the error table as JSON, `{codes: [{code, status, retryable,
/// meaning}], kinds: [{surface, name, code, className, when}]}` (`status` null for
/// `CLOSED`, `code` null for a kind that takes its fault's): what this build of the addon
/// rejects with, for the test that compares it with the generated `src/error-codes.js`.
#[napi(js_name = "errorTable")]
pub fn error_table() -> String {
    error_table_json().to_string()
}

pub(crate) fn error_table_json() -> serde_json::Value {
    use serde_json::json;
    let codes: Vec<_> = Code::ALL
        .iter()
        .map(|c| {
            json!({
                "code": c.as_str(),
                "status": c.status(),
                "retryable": c.retryable(),
                "meaning": c.meaning(),
            })
        })
        .collect();
    let kinds: Vec<_> = ERROR_KINDS
        .iter()
        .map(|k| {
            let code = match k.code {
                KindCode::Is(c) => Some(c.as_str()),
                KindCode::OfFirstFault => None,
            };
            json!({
                "surface": k.surface.as_str(),
                "name": k.name,
                "code": code,
                "className": k.class_name,
                "when": k.when,
            })
        })
        .collect();
    json!({ "codes": codes, "kinds": kinds })
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
        assert_eq!(e.code, Code::Fenced);
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
            (
                E::RunIdCaseConflict {
                    requested: "Run".into(),
                    existing: "run".into(),
                },
                "INVALID_INPUT",
            ),
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
            assert_eq!(b.code.as_str(), code, "{shown}");
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
        assert_eq!(e.code, Code::Io);
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
        assert_eq!(e.code, Code::Panicked);
        assert_eq!(prop(&e, "detail"), Some(&Prop::Str("boom".into())));
        let e = BindError::panicked(&String::from("owned"));
        assert_eq!(prop(&e, "detail"), Some(&Prop::Str("owned".into())));
    }

    #[test]
    fn store_rejections_carry_the_class_and_status_of_their_row() {
        let cases: Vec<(runlog::Error, &str, Option<u16>)> = vec![
            (
                runlog::Error::RunNotFound { run: "r".into() },
                "WorkflowRunNotFoundError",
                Some(404),
            ),
            (
                runlog::Error::RunExists { run: "r".into() },
                "EntityConflictError",
                Some(409),
            ),
            (
                runlog::Error::InvalidEvent {
                    field: "payload",
                    reason: "too big".into(),
                },
                "WorkflowWorldError",
                Some(400),
            ),
            (
                runlog::Error::ReadOnly {
                    op: "append".into(),
                    path: PathBuf::from("/s"),
                },
                "WorkflowWorldError",
                Some(403),
            ),
        ];
        for (err, class, status) in cases {
            let b = BindError::from(err);
            assert_eq!(
                prop(&b, "className"),
                Some(&Prop::Str(class.into())),
                "{b:?}"
            );
            let status = status.map(|s| Prop::Num(s.into()));
            assert_eq!(prop(&b, "status"), status.as_ref(), "{b:?}");
        }
        let closed = BindError::closed();
        assert_eq!((closed.code, prop(&closed, "status")), (Code::Closed, None));
    }

    /// Without its row this variant was `UNKNOWN` 500: it is bad input (use the existing id).
    #[test]
    fn a_run_id_case_conflict_is_invalid_input_naming_both_ids() {
        let e = BindError::from(runlog::Error::RunIdCaseConflict {
            requested: "Run".into(),
            existing: "run".into(),
        });
        assert_eq!((e.code, e.code.status()), (Code::InvalidInput, Some(400)));
        assert_eq!(prop(&e, "field"), Some(&Prop::Str("runId".into())));
        assert_eq!(prop(&e, "runId"), Some(&Prop::Str("Run".into())));
        assert_eq!(prop(&e, "existing"), Some(&Prop::Str("run".into())));
    }
}
