//! The `eventData` schemas of spec 5 (`CreateEventSchema` of `@workflow/world`), as typed
//! views over the stored JSON. The reference stores requests without validating them; this
//! World rejects a request whose data does not match its type's schema (400) before
//! anything is written, and the fold reads the same views (an event whose data does not
//! parse changes no entity and is counted as an anomaly).
//!
//! Unknown members are allowed (the runtime adds telemetry such as `ttfs` to step events);
//! they are stored with the rest of the bytes.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::error::WorldError;
use crate::json::{DateInput, RawJson, present};
use crate::model::EventType;

/// Longest hook token, in bytes.
pub const HOOK_TOKEN_LEN_MAX: usize = 2048;
/// Longest `run_cancelled.cancelReason`, in characters (the SDK's schema bound).
pub const CANCEL_REASON_LEN_MAX: usize = 512;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunCreatedData {
    pub deployment_id: String,
    pub workflow_name: String,
    #[serde(default, deserialize_with = "present")]
    pub input: Option<RawJson>,
    #[serde(default, deserialize_with = "present")]
    pub execution_context: Option<RawJson>,
    #[serde(default)]
    pub attributes: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub allow_reserved_attributes: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunStartedData {
    #[serde(default, deserialize_with = "present")]
    pub input: Option<RawJson>,
    #[serde(default)]
    pub deployment_id: Option<String>,
    #[serde(default)]
    pub workflow_name: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub execution_context: Option<RawJson>,
    #[serde(default)]
    pub attributes: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub allow_reserved_attributes: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunCompletedData {
    #[serde(default, deserialize_with = "present")]
    pub output: Option<RawJson>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunFailedData {
    #[serde(default, deserialize_with = "present")]
    pub error: Option<RawJson>,
    #[serde(default)]
    pub error_code: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunCancelledData {
    #[serde(default)]
    pub cancel_reason: Option<String>,
}

#[derive(Deserialize)]
pub(crate) struct AttrChange {
    pub key: String,
    #[serde(deserialize_with = "Option::deserialize")]
    pub value: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub(crate) enum AttrWriter {
    Workflow,
    #[serde(rename_all = "camelCase")]
    Step {
        #[allow(dead_code)]
        step_id: String,
        #[allow(dead_code)]
        attempt: f64,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AttrSetData {
    pub changes: Vec<AttrChange>,
    pub writer: AttrWriter,
    #[serde(default)]
    pub allow_reserved_attributes: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StepCreatedData {
    pub step_name: String,
    #[serde(default, deserialize_with = "present")]
    pub input: Option<RawJson>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StepStartedData {
    #[serde(default)]
    pub step_name: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    pub attempt: Option<f64>,
    #[serde(default)]
    #[allow(dead_code)]
    pub workflow_name: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub input: Option<RawJson>,
    #[serde(default)]
    #[allow(dead_code)]
    pub owner_message_id: Option<String>,
}

impl StepStartedData {
    /// The lazy start: `stepName` and `input` present (`isChildEntityCreationEvent`).
    pub(crate) fn lazy(&self) -> Option<(&str, &RawJson)> {
        Some((self.step_name.as_deref()?, self.input.as_ref()?))
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StepCompletedData {
    #[serde(default, deserialize_with = "present")]
    pub result: Option<RawJson>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StepErrorData {
    #[serde(default, deserialize_with = "present")]
    pub error: Option<RawJson>,
    #[serde(default)]
    pub retry_after: Option<DateInput>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HookCreatedData {
    pub token: String,
    #[serde(default, deserialize_with = "present")]
    pub metadata: Option<RawJson>,
    #[serde(default)]
    pub is_webhook: Option<bool>,
    #[serde(default)]
    pub is_system: Option<bool>,
    #[serde(default)]
    pub token_retention_until: Option<DateInput>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HookReceivedData {
    #[serde(default)]
    pub token: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub payload: Option<RawJson>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HookDisposedData {
    #[serde(default)]
    #[allow(dead_code)]
    pub token: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WaitCreatedData {
    pub resume_at: DateInput,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WaitCompletedData {
    #[serde(default)]
    pub resume_at: Option<DateInput>,
}

/// Parses `data` as `T`; `None` when absent.
pub(crate) fn view<T: DeserializeOwned>(data: Option<&RawJson>) -> Option<T> {
    serde_json::from_str(data?.as_str()).ok()
}

/// Whether `eventData` must be present for `ty` (the SDK's schemas make it optional for
/// `run_started`, `run_cancelled`, `step_started`, `hook_disposed`, `wait_completed`).
fn data_required(ty: EventType) -> bool {
    !matches!(
        ty,
        EventType::RunStarted
            | EventType::RunCancelled
            | EventType::StepStarted
            | EventType::HookDisposed
            | EventType::WaitCompleted
    )
}

fn parse<T: DeserializeOwned>(data: &RawJson) -> Result<T, WorldError> {
    serde_json::from_str(data.as_str())
        .map_err(|e| WorldError::invalid("eventData", format!("does not match the schema: {e}")))
}

fn require(member: &str, present: bool) -> Result<(), WorldError> {
    if present {
        Ok(())
    } else {
        Err(WorldError::invalid(
            format!("eventData.{member}"),
            "required",
        ))
    }
}

/// Checks `data` against the schema of `ty`: present when required, an object, the SDK's
/// members with their types, payload members present where the schema names them
/// (`input`, `result`, `error`, `payload`), dates parseable, bounds (token length,
/// cancel reason). `hook_conflict` is never accepted (the World writes it).
///
/// # Errors
/// [`WorldError::InvalidRequest`] naming the member.
pub(crate) fn check(ty: EventType, data: Option<&RawJson>) -> Result<(), WorldError> {
    if ty == EventType::HookConflict {
        return Err(WorldError::invalid(
            "eventType",
            "hook_conflict is written by the World, never requested",
        ));
    }
    let Some(data) = data else {
        return match data_required(ty) {
            true => Err(WorldError::invalid(
                "eventData",
                format!("required for {ty}"),
            )),
            false => Ok(()),
        };
    };
    if !data.is_object() {
        return Err(WorldError::invalid("eventData", "must be a JSON object"));
    }
    match ty {
        EventType::RunCreated => {
            let d: RunCreatedData = parse(data)?;
            require("input", d.input.is_some())?;
            check_context(d.execution_context.as_ref())
        }
        EventType::RunStarted => {
            check_context(parse::<RunStartedData>(data)?.execution_context.as_ref())
        }
        EventType::RunCompleted => parse::<RunCompletedData>(data).map(drop),
        EventType::RunFailed => require("error", parse::<RunFailedData>(data)?.error.is_some()),
        EventType::RunCancelled => {
            let d: RunCancelledData = parse(data)?;
            let n = d
                .cancel_reason
                .as_deref()
                .map_or(0, |r| r.encode_utf16().count());
            if n > CANCEL_REASON_LEN_MAX {
                return Err(WorldError::invalid(
                    "eventData.cancelReason",
                    format!("{n} characters > {CANCEL_REASON_LEN_MAX}"),
                ));
            }
            Ok(())
        }
        EventType::AttrSet => parse::<AttrSetData>(data).map(drop),
        EventType::StepCreated => require("input", parse::<StepCreatedData>(data)?.input.is_some()),
        EventType::StepStarted => parse::<StepStartedData>(data).map(drop),
        EventType::StepCompleted => {
            require("result", parse::<StepCompletedData>(data)?.result.is_some())
        }
        EventType::StepFailed | EventType::StepRetrying => {
            let d: StepErrorData = parse(data)?;
            require("error", d.error.is_some())?;
            check_date("retryAfter", d.retry_after.as_ref())
        }
        EventType::HookCreated => {
            let d: HookCreatedData = parse(data)?;
            check_token(&d.token)?;
            check_date("tokenRetentionUntil", d.token_retention_until.as_ref())
        }
        EventType::HookReceived => require(
            "payload",
            parse::<HookReceivedData>(data)?.payload.is_some(),
        ),
        EventType::HookDisposed => parse::<HookDisposedData>(data).map(drop),
        EventType::HookConflict => Ok(()),
        EventType::WaitCreated => {
            check_date("resumeAt", Some(&parse::<WaitCreatedData>(data)?.resume_at))
        }
        EventType::WaitCompleted => check_date(
            "resumeAt",
            parse::<WaitCompletedData>(data)?.resume_at.as_ref(),
        ),
    }
}

fn check_context(ctx: Option<&RawJson>) -> Result<(), WorldError> {
    match ctx {
        Some(c) if !c.is_object() => Err(WorldError::invalid(
            "eventData.executionContext",
            "must be an object",
        )),
        _ => Ok(()),
    }
}

fn check_date(member: &str, date: Option<&DateInput>) -> Result<(), WorldError> {
    match date {
        Some(d) if d.to_ms().is_none() => Err(WorldError::invalid(
            format!("eventData.{member}"),
            "not a date (ISO 8601 text or ms since the epoch)",
        )),
        _ => Ok(()),
    }
}

fn check_token(token: &str) -> Result<(), WorldError> {
    if token.is_empty() || token.len() > HOOK_TOKEN_LEN_MAX {
        return Err(WorldError::invalid(
            "eventData.token",
            format!("length {} not in 1..={HOOK_TOKEN_LEN_MAX}", token.len()),
        ));
    }
    Ok(())
}
