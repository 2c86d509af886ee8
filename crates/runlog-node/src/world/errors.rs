//! World and stream errors as rejections: the error table's code, class and status, and the
//! fields of each error (`runId`, `stepId`, `hook`, ...).

use runlog_world::{StreamError, WorldError};

use crate::errors::BindError;

/// The `code` of a World error (the error table's).
pub(crate) fn world_code(e: &WorldError) -> &'static str {
    e.code().as_str()
}

/// A `WorldError` as a rejection: its code, class and status (the error table,
/// `runlog_world::error_table`), `retryAfter` and the error's fields. A store-wide answer
/// that lies in unreadable runs (`WorldError::Unreadable`) carries the code of the first
/// run's fault, `runId` (that run) and `runIds` (every such run, joined by `,`).
pub(crate) fn from_world(e: WorldError) -> BindError {
    let (code, class) = (e.code(), e.class_name());
    let retry = e.retry_after_s();
    let message = e.to_string();
    let mut b = match e {
        WorldError::Storage(inner) => BindError::from_store(inner),
        WorldError::Unreadable { ref runs, .. } => {
            let first = runs.first();
            let ids: Vec<&str> = runs.iter().map(|f| f.run_id.as_str()).collect();
            BindError::with_code(code, class, message)
                .with_str("runId", first.map_or("", |f| &f.run_id))
                .with_str("runIds", ids.join(","))
        }
        _ => BindError::with_code(code, class, message),
    };
    if let Some(s) = retry {
        b = b.with_num("retryAfter", s);
    }
    b
}

fn world_fields(b: BindError, e: &WorldError) -> BindError {
    match e {
        WorldError::RunNotFound { run_id }
        | WorldError::EntityConflict { run_id, .. }
        | WorldError::RunExpired { run_id, .. }
        | WorldError::PreconditionFailed { run_id, .. }
        | WorldError::LegacySpecVersion { run_id, .. }
        | WorldError::Busy { run_id, .. }
        | WorldError::InvalidStoredEvent { run_id, .. } => b.with_str("runId", run_id),
        WorldError::StepNotFound { run_id, step_id }
        | WorldError::TooEarly {
            run_id, step_id, ..
        } => b.with_str("runId", run_id).with_str("stepId", step_id),
        WorldError::HookNotFound { hook } => b.with_str("hook", hook),
        WorldError::WaitNotFound { run_id, wait_id } => {
            b.with_str("runId", run_id).with_str("waitId", wait_id)
        }
        WorldError::EventNotFound { run_id, event_id }
        | WorldError::DuplicateEventId { run_id, event_id } => {
            b.with_str("runId", run_id).with_str("eventId", event_id)
        }
        WorldError::RunNotSupported {
            run_id,
            found,
            supported,
        } => b
            .with_str("runId", run_id)
            .with_num("found", u64::from(*found))
            .with_num("supported", u64::from(*supported)),
        WorldError::InvalidRequest { field, .. } => b.with_str("field", field),
        WorldError::AtOutOfRange { run_id, last, .. } => {
            b.with_str("runId", run_id).with_num("lastSeq", *last)
        }
        _ => b,
    }
}

pub(crate) fn world_err(e: WorldError) -> BindError {
    let fields = world_fields(BindError::internal(""), &e);
    let mut b = from_world(e);
    for (k, v) in fields.props {
        if !b.props.iter().any(|(key, _)| *key == k) {
            b.props.push((k, v));
        }
    }
    b
}

/// A `StreamError` as a rejection: its code, class and status (the error table).
pub(crate) fn stream_err(e: StreamError) -> BindError {
    let (code, class) = (e.code(), e.class_name());
    let message = e.to_string();
    match e {
        StreamError::Store(inner) => BindError::from_store(inner),
        StreamError::Closed { run, name } => BindError::with_code(code, class, message)
            .with_str("runId", run)
            .with_str("name", name),
        _ => BindError::with_code(code, class, message),
    }
}

impl From<WorldError> for BindError {
    fn from(e: WorldError) -> BindError {
        world_err(e)
    }
}

impl From<StreamError> for BindError {
    fn from(e: StreamError) -> BindError {
        stream_err(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errors::Prop;

    fn prop<'a>(e: &'a BindError, key: &str) -> Option<&'a Prop> {
        e.props.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    #[test]
    fn world_errors_carry_code_class_status_and_fields() {
        let e = world_err(WorldError::TooEarly {
            run_id: "wrun_1".into(),
            step_id: "step_1".into(),
            retry_after_s: 7,
        });
        assert_eq!(e.code.as_str(), "TOO_EARLY");
        assert_eq!(
            prop(&e, "className"),
            Some(&Prop::Str("TooEarlyError".into()))
        );
        assert_eq!(prop(&e, "status"), Some(&Prop::Num(425.0)));
        assert_eq!(prop(&e, "retryAfter"), Some(&Prop::Num(7.0)));
        assert_eq!(prop(&e, "stepId"), Some(&Prop::Str("step_1".into())));

        let cases = [
            (
                WorldError::RunNotFound {
                    run_id: "wrun_1".into(),
                },
                "NOT_FOUND",
                404.0,
            ),
            (
                WorldError::EntityConflict {
                    run_id: "wrun_1".into(),
                    message: "terminal".into(),
                },
                "CONFLICT",
                409.0,
            ),
            (
                WorldError::RunExpired {
                    run_id: "wrun_1".into(),
                    message: "ended".into(),
                },
                "GONE",
                410.0,
            ),
            (
                WorldError::InvalidRequest {
                    field: "runId".into(),
                    reason: "bad".into(),
                },
                "INVALID_INPUT",
                400.0,
            ),
        ];
        for (err, code, status) in cases {
            let b = world_err(err);
            assert_eq!(b.code.as_str(), code);
            assert_eq!(prop(&b, "status"), Some(&Prop::Num(status)));
        }
    }

    #[test]
    fn an_answer_lying_in_unreadable_runs_carries_the_first_faults_code_and_every_run() {
        let fault = |run: &str, code: &str| runlog_world::StorageFault {
            run_id: run.into(),
            code: code.into(),
            message: format!("corrupt run {run}"),
            readable_seq: 3,
            segment: None,
            offset: None,
        };
        let e = world_err(WorldError::Unreadable {
            what: "hooks.list",
            runs: vec![fault("wrun_1", "CORRUPT"), fault("wrun_2", "IO")],
        });
        assert_eq!(e.code.as_str(), "CORRUPT");
        assert_eq!(
            prop(&e, "className"),
            Some(&Prop::Str("WorkflowWorldError".into()))
        );
        assert_eq!(prop(&e, "status"), Some(&Prop::Num(500.0)));
        assert_eq!(prop(&e, "runId"), Some(&Prop::Str("wrun_1".into())));
        assert_eq!(prop(&e, "runIds"), Some(&Prop::Str("wrun_1,wrun_2".into())));
        assert!(e.message.contains("wrun_2"), "{}", e.message);
    }

    #[test]
    fn storage_faults_keep_the_store_code_and_a_5xx_status() {
        let e = world_err(WorldError::Storage(runlog::Error::corrupt(
            "wrun_1",
            "seg-00000001.log",
            4096,
            "crc",
        )));
        assert_eq!(e.code.as_str(), "CORRUPT");
        assert_eq!(prop(&e, "status"), Some(&Prop::Num(500.0)));
        assert_eq!(
            prop(&e, "className"),
            Some(&Prop::Str("WorkflowWorldError".into()))
        );
        let s = stream_err(StreamError::Closed {
            run: "wrun_1".into(),
            name: "s".into(),
        });
        assert_eq!(s.code.as_str(), "STREAM_CLOSED");
        assert_eq!(prop(&s, "status"), Some(&Prop::Num(409.0)));
    }
}
