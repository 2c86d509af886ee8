//! `runlog repair`: describes the damage without `--cut`, cuts at the first bad batch with it
//! (keeping the cut bytes in the file it names), and the run takes writes again.

use std::process::Command;

fn runlog(store: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_runlog"))
        .arg("--store")
        .arg(store)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn repair_cuts_only_with_cut_and_names_the_kept_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    for i in 0..6 {
        let payload = format!("{{\"i\":{i}}}");
        let out = runlog(
            &store,
            &[
                "append",
                "r",
                "--kind",
                "k",
                "--payload",
                &payload,
                "--create",
            ],
        );
        assert!(out.status.success(), "{out:?}");
    }
    let seg = store.join("runs/r/seg-00000001.log");
    let mut bytes = std::fs::read(&seg).unwrap();
    // The header and the six batches (the zeros preallocated to the end of the block follow).
    let run = runlog::RunId::new("r").unwrap();
    let read = runlog::Store::open_read_only(&store, runlog::Config::default()).unwrap();
    let len = 4096 + read.run_info(&run).unwrap().committed_bytes as usize;
    drop(read);
    let batch = (len - 4096) / 6;
    // A byte in the middle of the 4th batch (one-event batches of one size).
    bytes[4096 + 3 * batch + batch / 2] ^= 0x10;
    std::fs::write(&seg, &bytes).unwrap();

    let events = runlog(&store, &["events", "r", "--limit", "3"]);
    assert!(
        events.status.success(),
        "the events before the damage read: {events:?}"
    );
    let describe = runlog(&store, &["repair", "r"]);
    assert_eq!(describe.status.code(), Some(1));
    let text = String::from_utf8_lossy(&describe.stdout);
    assert!(text.contains("events 1..=3 are intact"), "{text}");
    assert_eq!(
        std::fs::read(&seg).unwrap(),
        bytes,
        "nothing changed without --cut"
    );

    let cut = runlog(&store, &["repair", "r", "--cut"]);
    assert!(cut.status.success(), "{cut:?}");
    let text = String::from_utf8_lossy(&cut.stdout);
    assert!(text.contains("last seq 3"), "{text}");
    let kept = std::fs::read_dir(store.join("repair")).unwrap().count();
    assert_eq!(kept, 1, "the cut bytes are kept in one file");
    let append = runlog(&store, &["append", "r", "--kind", "k", "--payload", "{}"]);
    assert_eq!(String::from_utf8_lossy(&append.stdout).trim(), "4");
    let verify = runlog(&store, &["verify", "r"]);
    assert!(verify.status.success(), "{verify:?}");
}

/// A sealed segment's lost seal (a flipped bit in its header slot): `runlog repair` writes it
/// again from the segment's batches, with or without `--cut`, says so, and nothing is cut;
/// the run then reads whole and verifies clean.
#[test]
fn repair_writes_a_lost_seal_again_without_cutting() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    {
        let config = runlog::Config {
            segment_len_bytes_max: 4096 + 1500,
            ..runlog::Config::default()
        };
        let s = runlog::Store::open(&store, config).unwrap();
        let run = runlog::RunId::new("r").unwrap();
        s.create_run(&run).unwrap();
        while s.run_info(&run).unwrap().segment_count < 3 {
            let e = runlog::NewEvent::new("k", "{\"payload\":1}");
            s.append_facts(&run, vec![e]).unwrap();
        }
    }
    let seg = store.join("runs/r/seg-00000001.log");
    let bytes = std::fs::read(&seg).unwrap();
    let events = |store: &std::path::Path| {
        let out = runlog(store, &["events", "r", "--json"]);
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).lines().count(),
        )
    };
    let (ok, whole) = events(&store);
    assert!(ok && whole > 20, "{whole} events over three segments");
    // Flip a byte in each header slot in turn: the one that is the seal makes reads fail.
    let mut lost = false;
    for slot in [512usize, 1024] {
        let mut damaged = bytes.clone();
        damaged[slot + 9] ^= 0x04;
        std::fs::write(&seg, &damaged).unwrap();
        if events(&store).0 {
            continue;
        }
        lost = true;
        let out = runlog(&store, &["repair", "r"]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert!(
            text.contains("the seal of seg-00000001.log was lost; written again"),
            "{text}"
        );
        assert!(text.contains("run r: no other damage"), "{text}");
        assert_eq!(events(&store), (true, whole));
        let verify = runlog(&store, &["verify", "r"]);
        assert!(verify.status.success(), "{verify:?}");
        assert!(
            !store.join("repair").exists()
                || std::fs::read_dir(store.join("repair")).unwrap().count() == 0,
            "nothing cut"
        );
    }
    assert!(lost, "one of the two slots is the seal");
}
