//! The `runlog` binary on PostgreSQL (issue 14): every command with `--store postgres://…`
//! against a real server, `runlog copy` between the file store and PostgreSQL both ways
//! (checked by equal `export` output, byte for byte), and the storm over processes.
//!
//! Each case gets a fresh schema (`?schema=t_<ulid>`) on the server named by `RUNLOG_PG_URL`
//! and drops it afterwards. Without `RUNLOG_PG_URL` the server cases skip
//! (`runlog_conformance::skip::skip`), and fail instead under `RUNLOG_NO_SKIP=1` (`.ci/run`) or
//! `RUNLOG_REQUIRE_PG=1` (`.ci/pg.sh`). The cases that need no server (an unreachable one,
//! `repair` refused) always run.

mod cli_support;
mod gc_support;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use cli_support::*;
use runlog::{Config, Error, NewEvent, RunId};
use runlog_cli::target::{Access, open};
use serde_json::Value;

/// Whether a server is configured; reports the skip (a failure under `RUNLOG_NO_SKIP=1`), or
/// fails when one is required (`RUNLOG_REQUIRE_PG=1`).
fn ready() -> bool {
    match std::env::var("RUNLOG_PG_URL") {
        Ok(u) if !u.is_empty() => true,
        _ if std::env::var("RUNLOG_REQUIRE_PG").as_deref() == Ok("1") => panic!(
            "RUNLOG_REQUIRE_PG=1 but RUNLOG_PG_URL is not set: run .ci/pg.sh, or start a server \
             with .ci/pg-server.sh and export RUNLOG_PG_URL"
        ),
        _ => {
            runlog_conformance::skip::skip(
                "RUNLOG_PG_URL not set (a server: eval \"$(.ci/pg-server.sh start)\")",
            );
            false
        }
    }
}

/// A fresh schema's store URL; drops the schema on drop.
struct Schema {
    url: String,
}

impl Schema {
    fn fresh() -> Schema {
        let base = std::env::var("RUNLOG_PG_URL").expect("checked by ready()");
        let name = format!("t_{}", ulid::Ulid::generate().to_string().to_lowercase());
        let sep = if base.contains('?') { '&' } else { '?' };
        Schema {
            url: format!("{base}{sep}schema={name}"),
        }
    }

    fn path(&self) -> &Path {
        Path::new(&self.url)
    }

    /// Whether the schema exists on the server.
    fn exists(&self) -> bool {
        let (url, schema) = runlog_pg::split_schema(&self.url);
        let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
        let row = client
            .query_one(
                "SELECT count(*) FROM pg_namespace WHERE nspname = $1",
                &[&schema.expect("a schema")],
            )
            .expect("query");
        row.get::<_, i64>(0) == 1
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let _ = runlog_pg::drop_schema(&self.url);
    }
}

fn ok(out: &Output) {
    assert_eq!(
        code(out),
        0,
        "stdout: {}\nstderr: {}",
        stdout(out),
        stderr(out)
    );
}

fn append(store: &Path, args: &[&str]) -> Output {
    let mut all = vec!["append"];
    all.extend_from_slice(args);
    runlog(store, &all)
}

#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn append_events_runs_export_tail_verify_audit_work_on_postgres() {
    if !ready() {
        return;
    }
    let db = Schema::fresh();
    let s = db.path();
    let created = append(
        s,
        &[
            "r1",
            "--create",
            "--kind",
            "run_created",
            "--payload",
            r#"{"a":1}"#,
        ],
    );
    ok(&created);
    assert_eq!(stdout(&created).trim(), "1");
    let step = [
        "r1",
        "--kind",
        "note",
        "--correlation-id",
        "step_1",
        "--key",
        "k1",
        "--payload",
        "plain text",
    ];
    assert_eq!(stdout(&append(s, &step)).trim(), "2");
    let again = append(s, &step);
    ok(&again);
    assert_eq!(
        stdout(&again).trim(),
        "2",
        "a repeated key: the original seq"
    );
    let fenced = append(s, &["r1", "--kind", "run_completed", "--expected-seq", "1"]);
    assert_eq!(code(&fenced), 3, "{}", stderr(&fenced));
    let decided = append(s, &["r1", "--kind", "run_completed", "--expected-seq", "2"]);
    assert_eq!(stdout(&decided).trim(), "3");
    let missing = append(s, &["r2", "--kind", "x"]);
    assert_eq!(code(&missing), 2, "no --create: {}", stderr(&missing));

    let events = json_lines(&runlog(s, &["events", "r1", "--json"]));
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["run_created", "note", "run_completed"]);
    assert_eq!(events[0]["payload"], serde_json::json!({"a": 1}));
    assert_eq!(events[1]["payload"], "plain text");
    assert_eq!(events[1]["correlation_id"], "step_1");
    assert_eq!(events[1]["key"], "k1");

    let runs = json_lines(&runlog(s, &["runs", "--json"]));
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["run"], "r1");
    assert_eq!(runs[0]["last_seq"], 3);
    assert_eq!(runs[0]["status"], "completed");

    let export = json_lines(&runlog(s, &["export"]));
    assert_eq!(export.len(), 3);
    assert_eq!(export[1]["eventType"], "note");
    assert_eq!(export[1]["seq"], 2);
    assert!(export[1]["eventDataBase64"].is_string(), "{}", export[1]);

    let tail = runlog(s, &["tail", "r1", "-n", "1", "--json"]);
    ok(&tail);
    let tail = json_lines(&tail);
    assert_eq!((tail.len(), &tail[0]["seq"]), (1, &Value::from(3)));

    let verify = runlog(s, &["verify", "--json"]);
    ok(&verify);
    let report = json_lines(&verify);
    assert_eq!(report[0]["run"], "r1");
    assert_eq!(report[0]["events"], 3);
    assert_eq!(report[0]["ok"], true);

    let audit = runlog(s, &["audit", "--json"]);
    assert_eq!(code(&audit), 0, "r1 is a clean log: {}", stdout(&audit));
    let late = append(s, &["r1", "--kind", "run_completed"]);
    ok(&late);
    let audit = runlog(s, &["audit", "--json"]);
    assert_eq!(code(&audit), 1, "a second terminal event is a finding");
    let classes: Vec<String> = json_lines(&audit)
        .iter()
        .map(|f| f["class"].as_str().unwrap().to_string())
        .collect();
    assert!(
        classes.contains(&"multiple_terminal".to_string()),
        "{classes:?}"
    );
}

#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn the_store_env_var_names_a_postgres_store_too() {
    if !ready() {
        return;
    }
    let db = Schema::fresh();
    ok(&append(db.path(), &["r1", "--create", "--kind", "k"]));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_runlog"))
        .args(["runs", "--json"])
        .env("RUNLOG_STORE", &db.url)
        .output()
        .expect("run runlog");
    ok(&out);
    assert_eq!(json_lines(&out)[0]["run"], "r1");
}

#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn tail_follow_on_postgres_prints_a_commit_of_another_process() {
    if !ready() {
        return;
    }
    let db = Schema::fresh();
    ok(&append(db.path(), &["r1", "--create", "--kind", "first"]));
    let mut follow = std::process::Command::new(env!("CARGO_BIN_EXE_runlog"))
        .arg("--store")
        .arg(&db.url)
        .args(["tail", "r1", "--follow", "--json"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start tail --follow");
    std::thread::sleep(std::time::Duration::from_millis(500));
    ok(&append(db.path(), &["r1", "--kind", "second"]));
    let stdout = follow.stdout.take().expect("piped");
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
    let mut seen = Vec::new();
    for line in lines.by_ref().take(2) {
        let v: Value = serde_json::from_str(&line.expect("line")).expect("json");
        seen.push(v["kind"].as_str().unwrap().to_string());
    }
    // The follower is this test's own child: end it.
    follow.kill().expect("kill tail");
    follow.wait().expect("reap tail");
    assert_eq!(seen, ["first", "second"]);
}

/// Runs `sql` on the server of `url` as its own user.
fn admin(url: &str, sql: &str) {
    let (url, _) = runlog_pg::split_schema(url);
    let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    client.batch_execute(sql).expect(sql);
}

#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn tail_follow_on_postgres_outlives_a_lost_connection_and_prints_the_next_commit() {
    if !ready() {
        return;
    }
    let db = Schema::fresh();
    ok(&append(db.path(), &["r1", "--create", "--kind", "first"]));
    // The follower connects as a role of its own, so its connections can be cut (and new ones
    // refused for a while, as during a server restart) without touching anyone else's.
    let role = format!("f_{}", ulid::Ulid::generate().to_string().to_lowercase());
    let schema = runlog_pg::split_schema(&db.url).1.expect("a schema");
    admin(
        &db.url,
        &format!(
            "CREATE ROLE {role} LOGIN; GRANT USAGE ON SCHEMA \"{schema}\" TO {role}; \
             GRANT SELECT ON ALL TABLES IN SCHEMA \"{schema}\" TO {role}"
        ),
    );
    let (scheme, rest) = db.url.split_once("://").expect("a URL");
    let host = rest.split_once('@').map_or(rest, |(_, host)| host);
    let follower_url = format!("{scheme}://{role}@{host}");
    let mut follow = std::process::Command::new(env!("CARGO_BIN_EXE_runlog"))
        .arg("--store")
        .arg(&follower_url)
        .args(["tail", "r1", "--follow", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start tail --follow");
    std::thread::sleep(std::time::Duration::from_millis(500));
    admin(
        &db.url,
        &format!(
            "ALTER ROLE {role} NOLOGIN; \
             SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'"
        ),
    );
    std::thread::sleep(std::time::Duration::from_millis(1000));
    admin(&db.url, &format!("ALTER ROLE {role} LOGIN"));
    ok(&append(db.path(), &["r1", "--kind", "second"]));
    let stdout = follow.stdout.take().expect("piped");
    let lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
    let reader = std::thread::spawn(move || {
        lines
            .take(2)
            .map(|l| {
                let v: Value = serde_json::from_str(&l.expect("line")).expect("json");
                v["kind"].as_str().unwrap().to_string()
            })
            .collect::<Vec<_>>()
    });
    std::thread::sleep(std::time::Duration::from_millis(3000));
    let exited = follow.try_wait().expect("poll tail");
    // The follower is this test's own child: end it.
    let _ = follow.kill();
    follow.wait().expect("reap tail");
    let seen = reader.join().expect("reader");
    drop(db);
    admin(
        &std::env::var("RUNLOG_PG_URL").expect("checked by ready()"),
        &format!("DROP ROLE {role}"),
    );
    assert_eq!(exited, None, "tail --follow ended on a lost connection");
    assert_eq!(seen, ["first", "second"]);
}

#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn read_commands_on_a_schema_without_a_store_exit_2_and_create_nothing() {
    if !ready() {
        return;
    }
    let db = Schema::fresh();
    for args in [
        &["runs"][..],
        &["events", "r1"],
        &["export"],
        &["verify"],
        &["audit"],
        &["inspect", "runs"],
        &["append", "r1", "--kind", "k"],
    ] {
        let out = runlog(db.path(), args);
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("no store at postgres"),
            "{}",
            stderr(&out)
        );
    }
    assert!(!db.exists(), "no schema was created");
}

#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn a_read_only_postgres_connection_refuses_every_write() {
    if !ready() {
        return;
    }
    let db = Schema::fresh();
    ok(&append(db.path(), &["r1", "--create", "--kind", "k"]));
    let log = open(Path::new(&db.url), Config::default(), Access::ReadOnly)
        .expect("open")
        .log;
    let r1 = RunId::new("r1").unwrap();
    let r2 = RunId::new("r2").unwrap();
    let refused = [
        log.create_run(&r2, b""),
        log.append_facts(&r1, vec![NewEvent::new("k", &b"x"[..])])
            .map(drop),
        log.append_decisions(&r1, 1, vec![NewEvent::new("k", &b"x"[..])])
            .map(drop),
        log.delete_run(&r1),
    ];
    for r in refused {
        match r {
            Err(e @ Error::Io { .. }) => {
                let text = format!("{:?}", std::error::Error::source(&e));
                assert!(text.contains("read-only transaction"), "{text}");
            }
            other => panic!("a write on a read-only connection: {other:?}"),
        }
    }
    let runs = json_lines(&runlog(db.path(), &["runs", "--json"]));
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["last_seq"], 1, "nothing was written");
}

#[test]
fn an_unreachable_server_is_an_environment_error_exit_6() {
    let url = "postgresql://postgres@%2Fnonexistent%2Frunlog-no-server/postgres?schema=t_x";
    for args in [
        &["runs"][..],
        &["append", "r1", "--create", "--kind", "k"],
        &["import", "/nonexistent"],
    ] {
        let out = runlog(Path::new(url), args);
        let err = stderr(&out);
        if args[0] == "import" {
            // The source is checked first: bad input.
            assert_eq!(code(&out), 2, "{err}");
            continue;
        }
        assert_eq!(code(&out), 6, "{args:?}: {err}");
        assert!(
            err.contains("connecting to postgres") && err.lines().count() == 1,
            "{err}"
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    let dst = tmp.path().join("dst");
    let copy = runlog(Path::new("unused"), &["copy", url, dst.to_str().unwrap()]);
    assert_eq!(code(&copy), 6, "{}", stderr(&copy));
    assert!(
        !dst.exists(),
        "nothing created when the source is unreachable"
    );
}

#[test]
fn repair_on_postgres_exits_2_saying_why() {
    let url = "postgresql://postgres@%2Fnonexistent/postgres";
    let out = runlog(Path::new(url), &["repair", "r1", "--cut"]);
    assert_eq!(code(&out), 2);
    let err = stderr(&out);
    assert!(
        err.contains("repair works on a file store only") && err.lines().count() == 1,
        "{err}"
    );
}

/// `export` of `store` (all workflow runs), as bytes.
fn export_all(store: &Path) -> Vec<u8> {
    let out = runlog(store, &["export"]);
    ok(&out);
    out.stdout
}

/// A run of the corpus with an imported stream: two data chunks and its end marker.
const STREAM_RUN: &str = "wrun_01M8N4BQX3533WHD0GK89WDY54";

#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn the_imported_corpus_reads_the_same_on_postgres_as_on_the_file_store() {
    if !ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let src = copy_corpus(tmp.path());
    let file = tmp.path().join("file");
    let db = Schema::fresh();
    let on_file = import(&file, &src);
    let on_pg = import(db.path(), &src);
    assert_eq!(code(&on_pg), code(&on_file), "{}", stderr(&on_pg));
    assert_eq!(stdout(&on_pg), stdout(&on_file), "the same import report");
    assert!(stdout(&on_pg).contains("created"), "{}", stdout(&on_pg));
    let again = import(db.path(), &src);
    assert!(!stdout(&again).contains("created"), "{}", stdout(&again));

    let exported = export_all(db.path());
    assert_eq!(exported, export_all(&file));
    assert!(exported.len() > 10_000, "{} bytes", exported.len());
    let runs = |s: &Path| -> Vec<Value> {
        json_lines(&runlog(s, &["runs", "--all", "--json"]))
            .into_iter()
            .map(|mut r| {
                if r["run"].as_str().unwrap().starts_with("stream-") {
                    r["created_at"] = Value::Null;
                    r["updated_at"] = Value::Null;
                }
                r
            })
            .collect()
    };
    assert_eq!(runs(db.path()), runs(&file));
    // 38 logs of the corpus with --all: 30 workflow runs and 8 stream logs.
    assert_eq!(runs(&file).len(), 38);
    for args in [
        &["audit", "--json"][..],
        &["inspect", "runs", "--json"],
        &["inspect", "hooks", "--json"],
    ] {
        let (p, f) = (runlog(db.path(), args), runlog(&file, args));
        assert_eq!(code(&p), code(&f), "{args:?}: {}", stderr(&p));
        assert_eq!(stdout(&p), stdout(&f), "{args:?}");
        assert!(!p.stdout.is_empty(), "{args:?}");
    }
    let run = THIRTEEN_TERMINALS_RUN;
    for args in [
        &["inspect", "steps", run, "--json"][..],
        &["inspect", "events", run, "--json"],
        &["events", run, "--json"],
    ] {
        let (p, f) = (runlog(db.path(), args), runlog(&file, args));
        assert_eq!(code(&p), 0, "{args:?}: {}", stderr(&p));
        assert_eq!(stdout(&p), stdout(&f), "{args:?}");
        assert!(!p.stdout.is_empty(), "{args:?}");
    }
    // A run with an imported stream (its chunk log and index log on PostgreSQL).
    let args = ["inspect", "streams", STREAM_RUN, "--json"];
    let (p, f) = (runlog(db.path(), &args), runlog(&file, &args));
    assert_eq!(code(&p), 0, "{}", stderr(&p));
    assert_eq!(stdout(&p), stdout(&f));
    let stream = &json_lines(&p)[0];
    assert_eq!(
        (&stream["chunks"], &stream["done"]),
        (&Value::from(2), &Value::from(true))
    );
    let verify = runlog(db.path(), &["verify", "--json"]);
    ok(&verify);
    assert!(json_lines(&verify).iter().all(|r| r["ok"] == true));
}

/// Synthetic runs beside the corpus: binary payloads, keys, correlation ids, an empty run.
fn add_synthetic_runs(store: &Path, tmp: &Path) {
    let binary = tmp.join("binary.bin");
    std::fs::write(&binary, [0u8, 0xff, 0xfe, 0x80, b'\n', 0x1b, 0]).unwrap();
    let binary = binary.to_str().unwrap();
    let runs: [&[&str]; 5] = [
        &[
            "syn-a",
            "--create",
            "--kind",
            "blob",
            "--payload-file",
            binary,
        ],
        &[
            "syn-a",
            "--kind",
            "step_completed",
            "--key",
            "key-1",
            "--correlation-id",
            "corr-1",
            "--payload",
            "{\"x\":[1,2]}",
        ],
        &["syn-a", "--kind", "empty", "--expected-seq", "2"],
        &[
            "syn-b",
            "--create",
            "--kind",
            "text",
            "--payload",
            "tab\there",
        ],
        &[
            "syn-b",
            "--kind",
            "blob",
            "--key",
            "k",
            "--payload-file",
            binary,
        ],
    ];
    for args in runs {
        ok(&append(store, args));
    }
    let empty = open(store, Config::default(), Access::Write).unwrap().log;
    empty
        .create_run(&RunId::new("syn-empty").unwrap(), b"opaque meta")
        .unwrap();
}

/// Every run's events as `events --json` prints them (keys included, which `export` omits).
fn all_events(store: &Path) -> String {
    let runs = json_lines(&runlog(store, &["runs", "--json"]));
    let mut text = String::new();
    for r in runs {
        let out = runlog(store, &["events", r["run"].as_str().unwrap(), "--json"]);
        ok(&out);
        text.push_str(&stdout(&out));
    }
    text
}

fn copy(src: &Path, dst: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["copy", src.to_str().unwrap(), dst.to_str().unwrap()];
    args.extend_from_slice(extra);
    runlog(Path::new("unused-global-store"), &args)
}

#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn copy_file_to_postgres_and_back_keeps_export_byte_for_byte() {
    if !ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let src = copy_corpus(tmp.path());
    let file = tmp.path().join("file");
    import(&file, &src);
    add_synthetic_runs(&file, tmp.path());
    let (db, db2) = (Schema::fresh(), Schema::fresh());
    let back = tmp.path().join("back");

    let to_pg = copy(&file, db.path(), &["--verify"]);
    ok(&to_pg);
    let report = stdout(&to_pg);
    assert!(
        report.contains("syn-empty") && report.contains("created"),
        "{report}"
    );
    let to_pg2 = copy(db.path(), db2.path(), &["--json"]);
    ok(&to_pg2);
    let back_out = copy(db2.path(), &back, &["--verify"]);
    ok(&back_out);

    let expected = export_all(&file);
    assert!(expected.len() > 10_000);
    for store in [db.path(), db2.path(), back.as_path()] {
        assert_eq!(export_all(store), expected, "{}", store.display());
    }
    let events = all_events(&file);
    assert!(events.contains("payload_base64") && events.contains("\"key\":\"key-1\""));
    assert_eq!(all_events(db.path()), events);
    assert_eq!(all_events(&back), events);
    let runs = |s: &Path| stdout(&runlog(s, &["runs", "--json"])).lines().count();
    assert_eq!(runs(&back), runs(&file));

    let again = copy(&file, db.path(), &["--json"]);
    ok(&again);
    let results: Vec<Value> = json_lines(&again);
    assert!(!results.is_empty());
    assert!(
        results
            .iter()
            .all(|r| r["result"] == "unchanged" && r["appended"] == 0),
        "{results:?}"
    );
}

/// Flips every bit of the byte at `offset` of `path`.
fn flip_byte(path: &Path, offset: u64) {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open segment");
    let mut byte = [0u8; 1];
    file.read_exact_at(&mut byte, offset).expect("read byte");
    file.write_all_at(&[!byte[0]], offset).expect("write byte");
    file.sync_all().expect("sync");
}

/// The first payload byte of the first batch of a run's first segment (format/SPEC.md: a
/// 4096-byte header, the batch header, the event header; as `cli_damaged_run_rows.rs`).
const FIRST_PAYLOAD_BYTE: u64 = 4096 + 32 + 44 + 11 + 40;

#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn copy_reports_a_damaged_source_run_and_a_conflict_and_copies_the_others() {
    if !ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let file: PathBuf = tmp.path().join("file");
    let payload = format!("{{\"pad\":\"{}\"}}", "x".repeat(190));
    for run in ["r1", "r2", "r3"] {
        for kind in ["run_started", "step_completed"] {
            ok(&append(
                &file,
                &[run, "--create", "--kind", kind, "--payload", &payload],
            ));
        }
    }
    flip_byte(
        &file.join("runs").join("r2").join("seg-00000001.log"),
        FIRST_PAYLOAD_BYTE,
    );
    let db = Schema::fresh();
    ok(&append(
        db.path(),
        &["r3", "--create", "--kind", "other", "--payload", "x"],
    ));

    let out = copy(&file, db.path(), &["--json"]);
    assert_eq!(code(&out), 5, "a damaged source run: {}", stderr(&out));
    let lines = json_lines(&out);
    let result = |run: &str| {
        lines
            .iter()
            .find(|l| l["run"] == run)
            .unwrap_or_else(|| panic!("{run}: {lines:?}"))
            .clone()
    };
    assert_eq!(result("r1")["result"], "created");
    assert_eq!(result("r1")["appended"], 2);
    assert_eq!(result("r2")["result"], "failed");
    assert!(
        result("r2")["error"]
            .as_str()
            .unwrap()
            .contains("corrupt run r2"),
        "{lines:?}"
    );
    assert_eq!(result("r3")["result"], "conflict");
    let runs = json_lines(&runlog(db.path(), &["runs", "--json"]));
    let names: Vec<(&str, u64)> = runs
        .iter()
        .map(|r| (r["run"].as_str().unwrap(), r["last_seq"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        names,
        [("r1", 2), ("r3", 1)],
        "r2 not copied, r3 left alone"
    );

    std::fs::remove_dir_all(file.join("runs").join("r2")).unwrap();
    let conflict_only = copy(&file, db.path(), &[]);
    assert_eq!(code(&conflict_only), 1, "{}", stdout(&conflict_only));
    assert!(stdout(&conflict_only).contains("r3 (conflict)"));
}

/// The storm reports of `runlog --store URL storm … --json`.
fn storm(url: &str, extra: &[&str]) -> (i32, Vec<Value>) {
    let mut args = vec![
        "storm",
        "--processes",
        "--scenario",
        "step-storm",
        "--runs",
        "4",
        "--replayers",
        "4",
        "--seed",
        "7",
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = runlog(Path::new(url), &args);
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {} {}", stdout(&out), stderr(&out)));
    (code(&out), doc["reports"].as_array().unwrap().clone())
}

#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn storm_over_processes_on_postgres_fenced_never_corrupts_unfenced_does() {
    if !ready() {
        return;
    }
    let db = Schema::fresh();
    let (code_fenced, fenced) = storm(&db.url, &[]);
    let r = &fenced[0];
    assert_eq!(code_fenced, 0, "{r}");
    assert_eq!(r["transport"], "processes", "{r}");
    assert_eq!(r["fenced"], true, "{r}");
    assert_eq!(r["corrupted"], 0, "{r}");
    assert_eq!(r["completed"], 4, "{r}");
    assert!(r["replay"]["rejections"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["replay"]["errors"], 0, "{r}");

    let (code_unfenced, unfenced) = storm(&db.url, &["--unfenced"]);
    let r = &unfenced[0];
    assert_eq!(code_unfenced, 0, "unfenced shows its corruption: {r}");
    assert_eq!(r["fenced"], false, "{r}");
    assert!(r["corrupted"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["replay"]["rejections"], 0, "{r}");

    // Each storm ran in a schema of its own under the URL's: the runs are there.
    for name in ["step_proc_fenced", "step_proc_unfenced"] {
        let url = format!("{}_{name}", db.url);
        let runs = runlog(Path::new(&url), &["runs", "--json"]);
        ok(&runs);
        assert_eq!(json_lines(&runs).len(), 4, "{name}");
        runlog_pg::drop_schema(&url).unwrap();
    }
}

/// Every log of the PostgreSQL store `store`, read through a read-only connection.
fn pg_logs(store: &Path) -> gc_support::Logs {
    let opened = open(store, Config::default(), Access::ReadOnly).expect("open read-only");
    gc_support::snapshot_of(&*opened.log)
}

#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn gc_and_restore_on_postgres_round_trip_byte_exact_and_keep_live_hook_runs() {
    if !ready() {
        return;
    }
    const CUT: &str = "2999-01-01T00:00:00Z";
    let db = Schema::fresh();
    let s = db.path();
    let log = open(s, Config::default(), Access::Write).expect("open").log;
    let (done, live) = gc_support::add_world_runs_to(std::sync::Arc::clone(&log));
    let hooked = gc_support::add_retained_hook_run(log);
    let before = pg_logs(s);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    let dir_arg = dir.to_str().unwrap();

    let refused = runlog(s, &["gc", "--finished-before", CUT]);
    assert_eq!(code(&refused), 2, "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("--archive DIR"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(pg_logs(s), before, "a refused gc changes nothing");

    let out = runlog(
        s,
        &[
            "gc",
            "--finished-before",
            CUT,
            "--archive",
            dir_arg,
            "--json",
        ],
    );
    ok(&out);
    let lines = json_lines(&out);
    let summary = &lines.last().unwrap()["summary"];
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["run"], done.as_str());
    assert_eq!(lines[0]["result"], "archived");
    assert_eq!(lines[0]["logs"].as_array().unwrap().len(), 5);
    assert_eq!(
        (summary["scanned"].as_u64(), summary["collected"].as_u64()),
        (Some(3), Some(1))
    );
    assert_eq!(
        summary["kept"].as_u64(),
        Some(2),
        "the running and the hooked run"
    );
    assert!(
        stderr(&out).contains(&format!("gc: archived {done}")),
        "{}",
        stderr(&out)
    );

    let runs: Vec<String> = json_lines(&runlog(s, &["runs", "--json"]))
        .iter()
        .map(|r| r["run"].as_str().unwrap().to_string())
        .collect();
    assert!(!runs.iter().any(|r| r.contains(&done[5..])), "{runs:?}");
    assert!(runs.contains(&live) && runs.contains(&hooked), "{runs:?}");
    let after = pg_logs(s);
    for (id, log) in &before {
        match id.contains(&done[5..]) {
            true => assert!(!after.contains_key(id), "{id} still live"),
            false => assert_eq!(after.get(id), Some(log), "{id} changed"),
        }
    }
    let archive = gc_support::archived(&dir, &done).expect("an archive");
    for (id, (meta, events)) in before.iter().filter(|(id, _)| id.contains(&done[5..])) {
        let a = archive
            .log(id)
            .unwrap_or_else(|| panic!("{id} not archived"));
        assert_eq!((&a.meta, &a.events), (meta, events), "{id}");
    }
    ok(&runlog(s, &["verify", "--archive", dir_arg]));
    let read = runlog(s, &["events", "--archive", dir_arg, &done, "--json"]);
    ok(&read);
    assert_eq!(json_lines(&read).len(), before[&done].1.len());

    let refused = runlog(s, &["restore", &done]);
    assert_eq!(code(&refused), 2, "{}", stderr(&refused));
    let restored = runlog(s, &["restore", &done, "--archive", dir_arg, "--json"]);
    ok(&restored);
    assert_eq!(
        pg_logs(s),
        before,
        "every log back, every field of every event"
    );
    assert!(
        gc_support::archived(&dir, &done).is_none(),
        "the archive is removed"
    );
    ok(&runlog(s, &["verify"]));
}
