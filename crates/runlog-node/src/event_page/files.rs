//! The files generated from the event page's encoder: the JavaScript constants
//! (`packages/world-runlog/src/event-page-format.js`: the place kinds and the date fields) and
//! the fixture (`packages/world-runlog/test/fixtures/event-page.json`: pages this module
//! writes, decoded by `test/event-page-fixture.test.mjs` with the package's decoder). The
//! tests below fail when a checked-in file differs; `RUNLOG_WRITE_GENERATED=1 cargo test -p
//! runlog-node generated_event_page` rewrites them.

use std::fmt::Write as _;

use base64::Engine as _;
use runlog_world::{Event, EventType, Page, RawJson};
use serde::Serialize;

use super::{FixKind, PageWire, REVIVED_DATES, events_page_json, walk_page_json};
use crate::generated::{check_files, header};

const SOURCE: &str = "the event page's encoder (crates/runlog-node/src/event_page.rs)";
const GENERATOR: &str = "crates/runlog-node/src/event_page/files.rs";
const TEST: &str = "generated_event_page";

/// `packages/world-runlog/src/event-page-format.js`.
fn format_js() -> String {
    let mut out = format!(
        "// {}\n// The wire form of event pages: docs/EVENT-PAGE.md.\n\n",
        header(SOURCE, GENERATOR, TEST)
    );
    out.push_str(
        "/** What the decoder does at a revive place of an event page, by the number that starts \
         the place's `fixPaths` entry. */\nexport const FIX_KIND = Object.freeze({\n",
    );
    for kind in FixKind::ALL {
        let _ = writeln!(
            out,
            "  /** {} */\n  {}: {},",
            kind.meaning(),
            kind.name(),
            kind as u8
        );
    }
    out.push_str("});\n\n");
    let list = |keys: &[&str]| {
        let quoted: Vec<String> = keys.iter().map(|k| format!("'{k}'")).collect();
        format!("Object.freeze([{}])", quoted.join(", "))
    };
    out.push_str(
        "/**\n * Where a string becomes a `Date` when it parses as one (else it stays the string), \
         as @workflow/world-local's schemas\n * revive (`z.coerce.date()`), and nowhere else: \
         `eventData` fields by event type (top level of the data; places of kind DATE),\n * and \
         the top-level fields of each entity the World returns. Binary values have no table: \
         every\n * {__type: 'Uint8Array', data: <string>} object is bytes, at any depth.\n */\n\
         export const REVIVED_DATES = Object.freeze({\n  eventData: Object.freeze({\n",
    );
    for (ty, keys) in REVIVED_DATES.event_data {
        let _ = writeln!(out, "    {}: {},", ty.as_str(), list(keys));
    }
    out.push_str("  }),\n  entities: Object.freeze({\n");
    for (name, keys) in REVIVED_DATES.entities {
        let _ = writeln!(out, "    {name}: {},", list(keys));
    }
    out.push_str("  }),\n});\n");
    out
}

/// One page of the fixture: what the addon resolves with, and each event's stored payload
/// (`null`: none), for the test to compare with the generic reviver's values.
#[derive(Serialize)]
struct FixturePage {
    name: &'static str,
    /// What it proves.
    about: &'static str,
    stored: Vec<Option<String>>,
    /// `[text, bytes as base64 | null, cursor, hasMore]`: the addon's tuple, its Buffer in
    /// base64.
    wire: (String, Option<String>, Option<String>, bool),
}

#[derive(Serialize)]
struct Fixture {
    generated: String,
    pages: Vec<FixturePage>,
}

fn fixture_page(
    name: &'static str,
    about: &'static str,
    page: &Page<Event>,
    wire: PageWire,
) -> FixturePage {
    let bytes =
        (!wire.bin.is_empty()).then(|| base64::engine::general_purpose::STANDARD.encode(&wire.bin));
    FixturePage {
        name,
        about,
        stored: page
            .data
            .iter()
            .map(|e| e.event_data.as_ref().map(|d| d.as_str().to_owned()))
            .collect(),
        wire: (wire.text, bytes, wire.cursor, wire.has_more),
    }
}

struct E {
    run: &'static str,
    id: &'static str,
    t: EventType,
    corr: Option<&'static str>,
    data: Option<&'static str>,
    at_ms: u64,
    spec: Option<u32>,
}

impl E {
    fn event(&self) -> Event {
        Event {
            run_id: self.run.into(),
            event_id: self.id.into(),
            event_type: self.t,
            correlation_id: self.corr.map(str::to_owned),
            event_data: self
                .data
                .map(|d| RawJson::from_text(d).unwrap_or_else(|e| panic!("{d}: {e}"))),
            created_at_ms: self.at_ms,
            spec_version: self.spec,
            resume_id: None,
            seq: 0,
        }
    }
}

fn page(events: &[E], cursor: Option<&str>, has_more: bool) -> Page<Event> {
    Page {
        data: events.iter().map(E::event).collect(),
        cursor: cursor.map(str::to_owned),
        has_more,
    }
}

/// Every place kind, text with escapes and beyond the BMP, nested data, the largest
/// integers, dates that are and are not, an event without data.
fn one_run() -> Page<Event> {
    let e = |id, t, corr, data, at_ms, spec| E {
        run: "wrun_fixture",
        id,
        t,
        corr,
        data,
        at_ms,
        spec,
    };
    page(
        &[
            e(
                "evnt_0",
                EventType::RunCreated,
                None,
                Some(
                    r#"{"deploymentId":"dpl_1","workflowName":"workflow//./src/wf//main","input":{"__type":"Uint8Array","data":"AQID/w=="}}"#,
                ),
                1_764_510_048_882,
                Some(5),
            ),
            e(
                "evnt_1",
                EventType::StepCreated,
                Some("step_1"),
                Some(
                    r#"{"stepName":"step//add","input":[{"__type":"Uint8Array","data":"AA=="},"2026-01-01T00:00:00.000Z",{"resumeAt":"2026-11-30T10:00:00.000Z"}],"meta":{"retryAfter":"2026-11-30T10:00:01.500Z","startedAt":"soon","completedAt":5,"expiredAt":null}}"#,
                ),
                1_764_510_048_889,
                Some(5),
            ),
            e(
                "evnt_2",
                EventType::StepStarted,
                Some("step_1"),
                None,
                1_764_510_048_889,
                None,
            ),
            e(
                "evnt_3",
                EventType::StepCompleted,
                Some("step \"1\" ☃"),
                Some(
                    r#"{"result":{"text":"héllo ☃ 𝄞 \"q\" \\ \n\u0000","ключ":"значение 🎉","esc\u00e9":"\ud83d\ude00"},"output":{"__type":"Uint8Array","data":""}}"#,
                ),
                1_764_510_050_000,
                Some(5),
            ),
            e(
                "evnt_4",
                EventType::HookCreated,
                Some("hook_1"),
                Some(
                    r#"{"token":"t","n":9007199254740991,"neg":-9007199254740991,"big":18446744073709551615,"f":1.5e300,"small":-0.000001,"t":true,"z":null,"arr":[1,[2,[3,[]]],{}]}"#,
                ),
                8_640_000_000_000_000,
                Some(u32::MAX),
            ),
            e(
                "evnt_5",
                EventType::WaitCreated,
                Some("wait_1"),
                Some(
                    r#"{"resumeAt":"2026-12-01T00:00:00.000Z","list":[{"__type":"Uint8Array","data":"AR=="},{"__type":"Uint8\u0041rray","data":"AQI="}]}"#,
                ),
                0,
                Some(5),
            ),
        ],
        Some("seq:6"),
        true,
    )
}

/// A page across runs (`listByCorrelationId`), with an event without data.
fn several_runs() -> Page<Event> {
    let e = |run, id, t, data, at_ms| E {
        run,
        id,
        t,
        corr: Some("step_1"),
        data,
        at_ms,
        spec: Some(5),
    };
    page(
        &[
            e(
                "wrun_a",
                "evnt_a0",
                EventType::StepCreated,
                Some(r#"{"stepName":"s","input":{"__type":"Uint8Array","data":"AQI="}}"#),
                1_764_510_048_882,
            ),
            e(
                "wrun_b",
                "evnt_b0",
                EventType::StepStarted,
                None,
                1_764_510_048_900,
            ),
            e(
                "wrun_a",
                "evnt_a1",
                EventType::StepCompleted,
                Some(r#"{"result":{"at":"x","createdAt":"2026-01-01T00:00:00.000Z"}}"#),
                1_764_510_048_890,
            ),
        ],
        Some("c2"),
        false,
    )
}

/// The binary values of a page all empty: a `bins` pair of length 0.
fn only_empty_bytes() -> Page<Event> {
    page(
        &[E {
            run: "wrun_empty_bytes",
            id: "evnt_0",
            t: EventType::RunCreated,
            corr: None,
            data: Some(
                r#"{"deploymentId":"d","workflowName":"wf","input":{"__type":"Uint8Array","data":""}}"#,
            ),
            at_ms: 1_764_510_048_882,
            spec: Some(5),
        }],
        None,
        false,
    )
}

/// The example of `docs/EVENT-PAGE.md`: one place of each kind, an event without data.
fn doc_example() -> Page<Event> {
    let e = |id, t, data, at_ms| E {
        run: "wrun_1",
        id,
        t,
        corr: Some("step_1"),
        data,
        at_ms,
        spec: Some(5),
    };
    page(
        &[
            e(
                "evnt_0",
                EventType::StepCreated,
                Some(
                    r#"{"stepName":"add","input":{"__type":"Uint8Array","data":"AQI="},"meta":{"createdAt":"2026-12-01T00:00:00.000Z"}}"#,
                ),
                1_764_510_048_882,
            ),
            e("evnt_1", EventType::StepStarted, None, 1_764_510_048_887),
            e(
                "evnt_2",
                EventType::StepRetrying,
                Some(
                    r#"{"error":{"__type":"Uint8Array","data":"AR=="},"retryAfter":"2026-12-01T00:00:00.000Z"}"#,
                ),
                1_764_510_048_899,
            ),
        ],
        Some("seq:3"),
        false,
    )
}

/// One event per payload of the revive-place tests of the encoder.
fn revive_places() -> Page<Event> {
    let payloads = super::tests::revive_payloads();
    Page {
        data: payloads
            .iter()
            .enumerate()
            .map(|(i, (event_type, data))| Event {
                run_id: "wrun_places".into(),
                event_id: format!("evnt_{i}"),
                event_type: *event_type,
                correlation_id: Some(format!("step_{i}")),
                event_data: Some(
                    RawJson::from_text(data).unwrap_or_else(|e| panic!("{data}: {e}")),
                ),
                created_at_ms: 1_764_510_048_882 + i as u64,
                spec_version: Some(5),
                resume_id: None,
                seq: 0,
            })
            .collect(),
        cursor: None,
        has_more: false,
    }
}

/// `packages/world-runlog/test/fixtures/event-page.json`.
fn fixture_json() -> String {
    let columns = |name, about, page: Page<Event>| {
        let wire = events_page_json(&page).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        fixture_page(name, about, &page, wire)
    };
    let several = several_runs();
    let walk = walk_page_json(&several).unwrap_or_else(|e| panic!("walk: {e:?}"));
    let pages = vec![
        columns(
            "docExample",
            "the example of docs/EVENT-PAGE.md",
            doc_example(),
        ),
        columns(
            "oneRun",
            "every place kind, escapes and text beyond the BMP, nested data, the largest integers, dates that are and are not, an event without data, createdAt going back",
            one_run(),
        ),
        columns(
            "severalRuns",
            "events of two runs: a run id per event",
            several_runs(),
        ),
        fixture_page(
            "severalRunsWalk",
            "the same page as severalRuns in the fallback form (plain JSON, \"walk\":true)",
            &several,
            walk,
        ),
        columns(
            "empty",
            "no events",
            Page {
                data: Vec::new(),
                cursor: None,
                has_more: false,
            },
        ),
        columns(
            "onlyEmptyBytes",
            "a binary value of no bytes",
            only_empty_bytes(),
        ),
        columns(
            "revivePlaces",
            "the payloads of the encoder's revive-place tests, one event each",
            revive_places(),
        ),
    ];
    let fixture = Fixture {
        generated: header(SOURCE, GENERATOR, TEST),
        pages,
    };
    let mut out = serde_json::to_string_pretty(&fixture).unwrap_or_else(|e| panic!("{e}"));
    out.push('\n');
    out
}

#[test]
fn generated_event_page_format_matches_the_encoder() {
    check_files(
        &[(
            "packages/world-runlog/src/event-page-format.js",
            format_js(),
        )],
        SOURCE,
        TEST,
    );
}

#[test]
fn generated_event_page_fixture_matches_the_encoder() {
    check_files(
        &[(
            "packages/world-runlog/test/fixtures/event-page.json",
            fixture_json(),
        )],
        SOURCE,
        TEST,
    );
}

#[test]
fn the_fixture_has_every_place_kind_and_a_page_with_only_empty_binary_values() {
    let fixture: serde_json::Value = serde_json::from_str(&fixture_json()).unwrap();
    let pages = fixture["pages"].as_array().unwrap();
    let text = |name: &str| -> serde_json::Value {
        let page = pages.iter().find(|p| p["name"] == name).unwrap();
        serde_json::from_str(page["wire"][0].as_str().unwrap()).unwrap()
    };
    let kinds: Vec<u64> = text("oneRun")["fixPaths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[0].as_u64().unwrap())
        .collect();
    for kind in FixKind::ALL {
        assert!(kinds.contains(&u64::from(kind as u8)), "{kind:?}");
    }
    let empty_bytes = super::tests::decoded(
        &events_page_json(&only_empty_bytes()).unwrap_or_else(|e| panic!("{e:?}")),
    );
    assert_eq!(empty_bytes["bins"], serde_json::json!([0, 0]));
    assert_eq!(
        empty_bytes["fixPaths"],
        serde_json::json!([[2, "eventData", "input"]])
    );
    assert_eq!(text("severalRunsWalk")["walk"], true);
    let walk = pages
        .iter()
        .find(|p| p["name"] == "severalRunsWalk")
        .unwrap();
    assert_eq!(walk["wire"][1], serde_json::Value::Null);
    assert_eq!(text("empty")["ids"], "");
}

#[test]
fn the_documents_example_is_a_page_the_encoder_writes() {
    let doc = std::fs::read_to_string(crate::generated::repo().join("docs/EVENT-PAGE.md"))
        .unwrap_or_else(|e| panic!("docs/EVENT-PAGE.md: {e}"));
    let wire = events_page_json(&doc_example()).unwrap_or_else(|e| panic!("{e:?}"));
    let bytes = base64::engine::general_purpose::STANDARD.encode(&wire.bin);
    assert!(
        doc.contains(&wire.text),
        "the example text differs: {}",
        wire.text
    );
    assert!(
        doc.contains(&format!("`{bytes}`")),
        "the example bytes differ: {bytes}"
    );
}
