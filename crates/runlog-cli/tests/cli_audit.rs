//! `runlog audit` on the imported real data: exactly the anomalies that are there.

mod cli_support;

use std::collections::BTreeSet;

use cli_support::*;
use serde_json::{Value, json};

/// Every `creation_later` of the whole corpus in that store's order: (run, [(event seq,
/// creation seq)]). Each is a `step_started` listed before its `step_created` (same
/// millisecond, lower event id). Computed independently of runlog from the source files.
const CREATION_LATER: &[(&str, &[(u64, u64)])] = &[
    ("wrun_01M8N4BFZ5ZB7EFN8RZEZ744VG", &[(3, 4)]),
    (
        "wrun_01M8N4BGVC6PBGA4VZWAQRRZ87",
        &[(5, 8), (6, 9), (7, 10), (30, 33), (31, 35), (32, 34)],
    ),
    ("wrun_01M8N4BJ9D6ZB68RC8VT3XA12E", &[(4, 5)]),
    ("wrun_01M8N4BK05SB0R676TQ4XPAHHP", &[(3, 4)]),
    ("wrun_01M8N4BKWEAJKFB8ZQTFZ5ZVSN", &[(3, 4), (8, 9)]),
    (
        "wrun_01M8N4BPQESEGTYCP8AS5R9Y05",
        &[(3, 4), (6, 7), (9, 10)],
    ),
    (
        "wrun_01M8N4BQX3533WHD0GK89WDY54",
        &[(3, 4), (6, 7), (9, 10)],
    ),
    ("wrun_01M8N4BRV2KFM4M7AG01H68PJ8", &[(5, 6)]),
    ("wrun_01M8N4BTS78ERKTZZQH8B3J76F", &[(3, 6), (4, 5)]),
    (
        "wrun_01M8N4BVQK7BPQKB26N1SZXTZC",
        &[(4, 5), (7, 8), (10, 11), (13, 14), (16, 17)],
    ),
    ("wrun_01M8N4BWYMF5RBZZPJJ10ZHDSF", &[(3, 4), (6, 7)]),
    ("wrun_01M8N4BX6DSAXFGM2G8E7QFJB3", &[(3, 4)]),
    ("wrun_01M8N4BXYQ876098RP77345GT5", &[(3, 4), (6, 7)]),
    ("wrun_01M8N4BY9Z7YT8ED2PZPMWC9G7", &[(3, 4), (6, 7)]),
    ("wrun_01M8N4BYFFVXNZDPV90W7Y630W", &[(3, 4)]),
    ("wrun_01M8N4C0854JQKYJWB0G1B2CAH", &[(3, 4)]),
    (
        "wrun_01M8N4C12X6NPQN7EKS11B9DF1",
        &[(5, 8), (6, 9), (7, 10), (30, 34), (31, 33), (32, 35)],
    ),
    ("wrun_01M8N4C2DGSWHERV3FE801SFQV", &[(3, 4)]),
    ("wrun_01M8N4C33R5A9T21ZRQ38A3BX4", &[(3, 4)]),
    ("wrun_01M8N4C41QJA8GCH4DJZDG1W2K", &[(3, 4), (8, 9)]),
    (
        "wrun_01M8N4C6Y9TQQ5Z12YZTYJNKR8",
        &[(3, 4), (6, 7), (9, 10)],
    ),
    (
        "wrun_01M8N4C7ZTCZ1J1T1X9AE50WK6",
        &[(3, 4), (6, 7), (9, 10)],
    ),
    ("wrun_01M8N4C8ZNC5RJY5XYFX1QZW94", &[(5, 6)]),
    ("wrun_01M8N4CAYCJ8NC807VPKQE8XD1", &[(3, 4), (5, 6)]),
    (
        "wrun_01M8N4CBY05THBHJAE55BG2VPT",
        &[(4, 5), (7, 8), (10, 11), (13, 14), (16, 17)],
    ),
    ("wrun_01M8N4CD2GBWPKZVCE399BZC6S", &[(3, 4), (6, 7)]),
    ("wrun_01M8N4CDBBNAEFXAFM1D09YPHW", &[(3, 4)]),
    ("wrun_01M8N4CE7GN6VEVXMQJG2KVVA6", &[(3, 4), (6, 7)]),
    ("wrun_01M8N4CEG6RGHPPSY47MDJ416W", &[(3, 4), (6, 7)]),
    ("wrun_01M8N4CENGAQNZ0VQE7SVS9DYQ", &[(3, 4)]),
];

fn expected_findings(runs: &BTreeSet<String>) -> BTreeSet<String> {
    let mut want = BTreeSet::new();
    for (run, pairs) in CREATION_LATER.iter().filter(|(r, _)| runs.contains(*r)) {
        for (at, created) in pairs.iter() {
            want.insert(
                json!({"run": run, "class": "creation_later", "seqs": [at, created]}).to_string(),
            );
        }
    }
    if runs.contains(THIRTEEN_TERMINALS_RUN) {
        for extra in 64..=75u64 {
            want.insert(
                json!({"run": THIRTEEN_TERMINALS_RUN, "class": "multiple_terminal", "seqs": [63, extra]})
                    .to_string(),
            );
        }
    }
    want
}

#[test]
fn audit_finds_the_thirteen_terminal_events_and_nothing_that_is_not_there() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = copy_corpus(tmp.path());
    let store = tmp.path().join("store");
    import(&store, &src);

    let out = runlog(&store, &["audit", "--json"]);
    assert_eq!(code(&out), 1, "anomalies found: {}", stderr(&out));
    let findings = json_lines(&out);
    let got: BTreeSet<String> = findings
        .iter()
        .map(|f| json!({"run": f["run"], "class": f["class"], "seqs": f["seqs"]}).to_string())
        .collect();
    assert_eq!(got.len(), findings.len(), "no finding twice");
    let runs: BTreeSet<String> = source_runs(&src).into_keys().collect();
    assert_eq!(got, expected_findings(&runs));
    assert_eq!(findings.len(), 78);

    let terminal: Vec<&Value> = findings
        .iter()
        .filter(|f| f["class"] == "multiple_terminal")
        .collect();
    assert_eq!(
        terminal.len(),
        12,
        "thirteen run_completed: twelve beyond the first"
    );
    assert!(terminal.iter().all(|f| f["run"] == THIRTEEN_TERMINALS_RUN));
    let exported = export(&store, THIRTEEN_TERMINALS_RUN);
    let completed: Vec<u64> = exported
        .iter()
        .filter(|e| e["eventType"] == "run_completed")
        .map(|e| e["seq"].as_u64().expect("seq"))
        .collect();
    assert_eq!(completed, (63..=75).collect::<Vec<u64>>());
}

#[test]
fn audit_of_one_run_prints_a_table_and_a_clean_run_exits_zero() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    import(&store, &fixture_dir());

    let out = runlog(&store, &["audit", THIRTEEN_TERMINALS_RUN]);
    assert_eq!(code(&out), 1);
    let table = stdout(&out);
    assert!(table.starts_with("RUN "), "{table}");
    assert_eq!(
        table
            .lines()
            .filter(|l| l.contains(" multiple_terminal "))
            .count(),
        12
    );
    assert!(table.contains(
        "run_completed at seq 75 is another terminal event after run_completed at seq 63"
    ));
    assert!(
        stderr(&out).contains("audited 1 runs: 18 findings in 1 runs"),
        "{}",
        stderr(&out)
    );

    for (kind, corr) in [
        ("run_created", None),
        ("run_started", None),
        ("step_created", Some("s1")),
        ("step_started", Some("s1")),
        ("run_completed", None),
    ] {
        let mut args = vec!["append", "clean", "--create", "--kind", kind];
        args.extend(corr.iter().flat_map(|c| ["--correlation-id", *c]));
        assert_eq!(code(&runlog(&store, &args)), 0);
    }
    let clean = runlog(&store, &["audit", "clean"]);
    assert_eq!(code(&clean), 0, "{}", stdout(&clean));
    assert_eq!(stdout(&clean), "");
}
