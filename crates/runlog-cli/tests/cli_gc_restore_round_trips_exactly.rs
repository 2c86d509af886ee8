//! `runlog gc` + `runlog restore` round-trip byte-exact: the shared corpus imported with
//! `runlog import` plus World runs with streams and attributes; after gc every finished run
//! is out of the store and in an archive that `verify --archive` passes and `events
//! --archive` reads, and `inspect run|steps|hooks|events|streams --archive` shows exactly as
//! it showed the live run; after restore every log of the store equals the original in its
//! metadata and every field of every event, and `verify` is clean. A damaged archive fails
//! loudly (exit 1 from `verify --archive`, 5 from `restore`, which writes nothing).

mod cli_support;
mod gc_support;

use cli_support::{code, copy_corpus, import, json_lines, runlog, stdout};
use gc_support::{add_world_runs, archived, collected_record, snapshot};

const CUT: &str = "2999-01-01T00:00:00Z";

#[test]
fn gc_then_restore_gives_back_every_field_of_every_event_of_every_log() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    import(&store, &copy_corpus(tmp.path()));
    let (done, live) = add_world_runs(&store);
    let before = snapshot(&store);
    let archive_dir = store.join("archive");
    let views = ["run", "steps", "hooks", "events", "streams"];
    let inspect = |view: &str, archive: Option<&std::path::Path>| {
        let mut args = vec!["inspect", view, done.as_str(), "--json"];
        if let Some(dir) = archive {
            args.extend(["--archive", dir.to_str().unwrap()]);
        }
        let out = runlog(&store, &args);
        assert_eq!(
            code(&out),
            0,
            "inspect {view}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout(&out)
    };
    let live_views: Vec<String> = views.iter().map(|v| inspect(v, None)).collect();

    let out = runlog(&store, &["gc", "--finished-before", CUT, "--json"]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let lines = json_lines(&out);
    let summary = &lines.last().unwrap()["summary"];
    let collected: Vec<String> = lines[..lines.len() - 1]
        .iter()
        .map(|l| l["run"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        summary["collected"].as_u64().unwrap() as usize,
        collected.len()
    );
    assert!(
        collected.contains(&done) && !collected.contains(&live),
        "{collected:?}"
    );
    assert!(
        collected.len() > 10,
        "the corpus' finished runs: {collected:?}"
    );
    let events: u64 = lines[..lines.len() - 1]
        .iter()
        .map(|l| l["events"].as_u64().unwrap())
        .sum();
    assert_eq!(summary["events"].as_u64(), Some(events));

    let mut recorded = collected_record(&store);
    recorded.sort();
    let mut want = collected.clone();
    want.sort();
    assert_eq!(recorded, want, "gc records each run it archived, once");

    let after_gc = snapshot(&store);
    for id in before.keys() {
        let owner = collected.iter().find(|r| id.contains(&r[5..]));
        match owner {
            Some(run) => {
                assert!(
                    !after_gc.contains_key(id),
                    "{id} of collected {run} is still live"
                );
                let a = archived(&archive_dir, run).expect("archive");
                let log = a
                    .log(id)
                    .unwrap_or_else(|| panic!("{id} not in {run}'s archive"));
                assert_eq!(
                    (&log.meta, &log.events),
                    (&before[id].0, &before[id].1),
                    "{id}"
                );
            }
            None => assert_eq!(
                after_gc.get(id),
                Some(&before[id]),
                "{id} was not collected"
            ),
        }
    }
    let verify = runlog(
        &store,
        &["verify", "--archive", archive_dir.to_str().unwrap()],
    );
    assert_eq!(code(&verify), 0, "{}", stdout(&verify));
    let read = runlog(
        &store,
        &[
            "events",
            "--archive",
            archive_dir.to_str().unwrap(),
            &done,
            "--json",
        ],
    );
    assert_eq!(code(&read), 0);
    assert_eq!(json_lines(&read).len(), before[&done].1.len());
    // `inspect … --archive` shows the archived run exactly as it showed the live one.
    for (view, live) in views.iter().zip(&live_views) {
        let empty = ["steps", "hooks"].contains(view); // the run has none
        assert_eq!(live.trim().is_empty(), empty, "inspect {view}: {live}");
        assert_eq!(&inspect(view, Some(&archive_dir)), live, "inspect {view}");
    }
    let gone = runlog(&store, &["inspect", "run", &done, "--json"]);
    assert_eq!(
        code(&gone),
        2,
        "without --archive the collected run is unknown"
    );

    for run in &collected {
        let out = runlog(&store, &["restore", run]);
        assert_eq!(
            code(&out),
            0,
            "{run}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(
        snapshot(&store),
        before,
        "every log back, every field of every event"
    );
    assert!(
        archived(&archive_dir, &done).is_none(),
        "restore removes the archive"
    );
    assert_eq!(code(&runlog(&store, &["verify"])), 0);
}

#[test]
fn a_damaged_archive_fails_verify_and_restore_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let (done, _) = add_world_runs(&store);
    assert_eq!(code(&runlog(&store, &["gc", "--finished-before", CUT])), 0);
    let file = store.join("archive").join(format!("{done}.rla"));
    let mut bytes = std::fs::read(&file).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x10;
    std::fs::write(&file, &bytes).unwrap();
    let before = snapshot(&store);

    let verify = runlog(
        &store,
        &[
            "verify",
            "--archive",
            store.join("archive").to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(code(&verify), 1, "{}", stdout(&verify));
    let row = &json_lines(&verify)[0];
    assert!(
        row["problems"][0]
            .as_str()
            .unwrap()
            .contains("checksum mismatch"),
        "{row}"
    );
    let restore = runlog(&store, &["restore", &done]);
    assert_eq!(
        code(&restore),
        5,
        "{}",
        String::from_utf8_lossy(&restore.stderr)
    );
    assert!(String::from_utf8_lossy(&restore.stderr).contains(&format!("{done}.rla")));
    assert_eq!(snapshot(&store), before, "nothing written");
    assert!(file.exists(), "the damaged archive is left for inspection");
}
