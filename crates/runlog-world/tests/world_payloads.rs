//! Payloads round-trip exactly: event data and entity fields (binary values in the
//! reference's `{"__type":"Uint8Array","data":<base64>}` shape with every byte value, NUL as
//! `\u0000`, non-ASCII, odd whitespace, dates), through `create_event`, the stored runlog
//! payload, `events.list`/`events.get`, the entities, their JSON, and a World that folds the
//! logs again from seq 1.

mod common;

use common::*;
use runlog::RunId;
use runlog_world::{EventType, ResolveData, format_iso_ms, parse_iso_ms};

fn every_byte() -> Vec<u8> {
    (0..=255u8).chain([0, 0, 255, 0]).collect()
}

#[test]
fn event_data_is_stored_and_returned_byte_for_byte() {
    let (dir, w) = world();
    let input = bin(&every_byte());
    let data = format!(
        "{{ \"deploymentId\" : \"dpl\",\n\t\"workflowName\":\"wf\u{e9}\\u0000\",\"input\":{input},\"executionContext\":{{\"date\":\"2026-11-30T10:46:45.403Z\",\"nul\":\"a\\u0000b\",\"emoji\":\"\u{1F600}\"}} }}"
    );
    let run = runlog_world::mint_run_id();
    let r = ev(&w, &run, EventType::RunCreated, None, Some(&data)).unwrap();
    assert_eq!(
        r.event
            .as_ref()
            .unwrap()
            .event_data
            .as_ref()
            .unwrap()
            .as_str(),
        data
    );
    let created = r.run.unwrap();
    assert_eq!(created.input.as_ref().unwrap().as_str(), input);
    assert_eq!(created.workflow_name, "wf\u{e9}\0");
    // The stored runlog payload is the request's bytes.
    let id = RunId::new(&run).unwrap();
    let stored = w.backend().read(&id, 0, 1).unwrap().events.remove(0);
    assert_eq!(stored.payload.as_ref(), data.as_bytes());
    // events.list / events.get, in this World and in one folding from the log.
    let fresh = open(dir.path());
    for world in [&w, &fresh] {
        let listed = world
            .list_events(&run, &Default::default(), ResolveData::All)
            .unwrap();
        assert_eq!(listed.data[0].event_data.as_ref().unwrap().as_str(), data);
        let event_id = &listed.data[0].event_id;
        let got = world.get_event(&run, event_id, ResolveData::All).unwrap();
        assert_eq!(got.event_data.unwrap().as_str(), data);
        let again = world.get_run(&run, ResolveData::All).unwrap();
        assert_eq!(again, created);
    }
}

#[test]
fn entity_payload_fields_round_trip_through_every_entity() {
    let (dir, w) = world();
    let run = running_run(&w);
    let bytes = every_byte();
    let step_input = format!(r#"{{"stepName":"s","input":{}}}"#, bin(&bytes));
    ev(
        &w,
        &run,
        EventType::StepStarted,
        Some("s1"),
        Some(&step_input),
    )
    .unwrap();
    let result = format!(r#"{{"result":{},"stso":1.5}}"#, bin(b"null byte \0"));
    ev(
        &w,
        &run,
        EventType::StepCompleted,
        Some("s1"),
        Some(&result),
    )
    .unwrap();
    let hook = format!(
        r#"{{"token":"t\u0000ok","metadata":{},"isWebhook":true}}"#,
        bin(&bytes[..17])
    );
    ev(&w, &run, EventType::HookCreated, Some("h1"), Some(&hook)).unwrap();
    let received = r#"{"payload":{"nested":["\u0000",{"__type":"Uint8Array","data":""}]}}"#;
    ev(
        &w,
        &run,
        EventType::HookReceived,
        Some("h1"),
        Some(received),
    )
    .unwrap();
    let output = format!(r#"{{"output":{}}}"#, bin(b"\0\0\0"));
    terminal_with(&w, &run, &output);

    let fresh = open(dir.path());
    for world in [&w, &fresh] {
        let step = world.get_step(&run, "s1", ResolveData::All).unwrap();
        assert_eq!(step.input.unwrap().as_str(), bin(&bytes));
        assert_eq!(step.output.unwrap().as_str(), bin(b"null byte \0"));
        let done = world.get_run(&run, ResolveData::All).unwrap();
        assert_eq!(done.output.as_ref().unwrap().as_str(), bin(b"\0\0\0"));
        // The entity's JSON carries the payload verbatim.
        let json = serde_json::to_string(&done).unwrap();
        assert!(
            json.contains(&format!(r#""output":{}"#, bin(b"\0\0\0"))),
            "{json}"
        );
        let events = world
            .list_events(&run, &Default::default(), ResolveData::All)
            .unwrap();
        let received_event = events
            .data
            .iter()
            .find(|e| e.event_type == EventType::HookReceived)
            .unwrap();
        assert_eq!(
            received_event.event_data.as_ref().unwrap().as_str(),
            received
        );
    }
    // The hook existed with its metadata until the run ended.
    let hook_event = w
        .list_events_by_correlation_id("h1", Some(&run), &Default::default(), ResolveData::All)
        .unwrap();
    assert_eq!(
        hook_event.data[0].event_data.as_ref().unwrap().as_str(),
        hook
    );
}

fn terminal_with(w: &TestWorld, run: &str, data: &str) {
    ev(w, run, EventType::RunCompleted, None, Some(data)).unwrap();
}

#[test]
fn a_live_hooks_metadata_and_token_round_trip() {
    let (_d, w) = world();
    let run = running_run(&w);
    let token = "tok \u{0}\u{1F600} \"quoted\"";
    let token_json = serde_json::to_string(token).unwrap();
    let data = format!(
        r#"{{"token":{token_json},"metadata":{}}}"#,
        bin(&every_byte())
    );
    let created = ev(&w, &run, EventType::HookCreated, Some("h"), Some(&data))
        .unwrap()
        .hook
        .unwrap();
    assert_eq!(created.token, token);
    let found = w.get_hook_by_token(token).unwrap();
    assert_eq!(found.metadata.unwrap().as_str(), bin(&every_byte()));
}

#[test]
fn null_and_absent_payloads_stay_distinct() {
    let (_d, w) = world();
    let a = running_run(&w);
    let done = ev(
        &w,
        &a,
        EventType::RunCompleted,
        None,
        Some(r#"{"output":null}"#),
    )
    .unwrap();
    assert_eq!(done.run.unwrap().output.unwrap().as_str(), "null");
    let b = running_run(&w);
    let done = ev(&w, &b, EventType::RunCompleted, None, Some("{}")).unwrap();
    assert!(done.run.unwrap().output.is_none());
    let c = running_run(&w);
    let r = ev(&w, &c, EventType::RunCancelled, None, None).unwrap();
    assert!(r.event.unwrap().event_data.is_none());
    let id = RunId::new(&c).unwrap();
    let stored = w.backend().read(&id, 2, 1).unwrap().events.remove(0);
    assert!(stored.payload.is_empty());
}

#[test]
fn dates_are_iso_milliseconds_in_utc() {
    let (_d, w) = world();
    let run = running_run(&w);
    lazy_start(&w, &run, "s").unwrap();
    // An offset date is the same instant.
    let retried = step_retrying(&w, &run, "s", Some("2001-02-03T05:06:07.089+01:00")).unwrap();
    let step = retried.step.unwrap();
    assert_eq!(
        step.retry_after_ms.map(format_iso_ms).as_deref(),
        Some("2001-02-03T04:06:07.089Z")
    );
    let json: serde_json::Value = serde_json::to_value(&step).unwrap();
    assert_eq!(json["retryAfter"], "2001-02-03T04:06:07.089Z");
    let created = json["createdAt"].as_str().unwrap();
    assert_eq!(parse_iso_ms(created), Some(step.created_at_ms));
    assert!(created.ends_with('Z') && created.len() == 24, "{created}");
    // Milliseconds since the epoch are dates too (z.coerce.date).
    let wait = ev(
        &w,
        &run,
        EventType::WaitCreated,
        Some("w"),
        Some(r#"{"resumeAt":981173167089}"#),
    )
    .unwrap();
    assert_eq!(wait.wait.unwrap().resume_at_ms, Some(981_173_167_089));
    // The stored event keeps the caller's text.
    let events = w
        .list_events_by_correlation_id("s", Some(&run), &Default::default(), ResolveData::All)
        .unwrap();
    let last = events
        .data
        .last()
        .unwrap()
        .event_data
        .as_ref()
        .unwrap()
        .as_str()
        .to_string();
    assert!(last.contains("2001-02-03T05:06:07.089+01:00"), "{last}");
}

#[test]
fn a_large_payload_round_trips() {
    let (_d, w) = world();
    let run = running_run(&w);
    let big: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let data = format!(r#"{{"stepName":"s","input":{}}}"#, bin(&big));
    ev(&w, &run, EventType::StepCreated, Some("big"), Some(&data)).unwrap();
    let fresh = open(_d.path());
    let step = fresh.get_step(&run, "big", ResolveData::All).unwrap();
    assert_eq!(step.input.unwrap().as_str(), bin(&big));
}
