//! A backup while writers of its destination delete and create the runs it copies (a
//! destination is a store like any other), and while the source's runs lose a seal or are
//! repaired. Each case comes from a breaker (a fourth round on the backup); before the fixes
//! a, b, f and g aborted the whole backup with an I/O error, e reported `complete` with the
//! run damaged in the destination ("seal is lost": the recopy had locked a lock file a
//! delete had already renamed away, and swapped the run out from under a writer of the run
//! made again), and h removed the files of a replaced copy under its `.replaced-` name, so a
//! kill part-way left a part of it that the next backup put back as the run. c, d and i
//! held and are kept as they are.
mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::OpenHookFs;
use runlog::{Config, NewEvent, RunId, Store};

/// How long a thread waits for another to reach its hook: a failure, not a hang, when the
/// hook's file is never opened.
const WAIT: std::time::Duration = std::time::Duration::from_secs(30);

fn id(s: &str) -> RunId {
    RunId::new(s).unwrap()
}
fn small() -> Config {
    Config {
        segment_len_bytes_max: 8 << 10,
        ..Config::default()
    }
}
fn append(s: &Store, r: &RunId, n: usize, tag: &str) {
    for i in 0..n {
        s.append_facts(
            r,
            vec![NewEvent::new(
                "step_completed",
                format!("{tag} {i} {}", "p".repeat(100)),
            )],
        )
        .unwrap();
    }
}
fn payloads(s: &Store, r: &RunId) -> Vec<Vec<u8>> {
    s.read(r, 0, 1 << 20)
        .unwrap()
        .events
        .into_iter()
        .map(|e| e.payload.to_vec())
        .collect()
}
/// A temp dir holding a source store `src` on `fs` (small segments) and the path `dst`.
fn source_on(fs: Arc<dyn runlog::io::Fs>) -> (tempfile::TempDir, PathBuf, PathBuf, Store) {
    let tmp = tempfile::tempdir().unwrap();
    let (src_dir, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    let src = Store::open_with_fs(fs, &src_dir, small()).unwrap();
    (tmp, src_dir, dst, src)
}

fn is_lock_of(p: &Path, dst: &Path, run: &str) -> bool {
    p == dst.join("runs").join(run).join("lock")
}

/// A writer of the destination deletes run x as the backup opens x's lock: to extend it
/// (`recopy` false, the first open), or, when the destination's copy was appended to, for
/// the recopy's swap (the second open). The backup copies x as new and completes.
fn a_delete_in_the_destination_while_the_backup_opens_the_run(recopy: bool) {
    let hook = Arc::new(OpenHookFs::default());
    let (_tmp, _, dst, src) = source_on(hook.clone());
    let x = id("x");
    src.create_run(&x).unwrap();
    append(&src, &x, 20, "v1");
    assert!(src.backup(&dst, &mut |_| {}).unwrap().complete);
    if recopy {
        append(
            &Store::open(&dst, Config::default()).unwrap(),
            &x,
            3,
            "dstonly",
        );
    }
    append(&src, &x, 20, "v2");
    let d2 = dst.clone();
    let mut opens_left = if recopy { 2 } else { 1 };
    *hook.hook.lock() = Some(Box::new(move |p: &Path, _| {
        if !is_lock_of(p, &d2, "x") {
            return None;
        }
        opens_left -= 1;
        if opens_left > 0 {
            return None;
        }
        let w = Store::open(&d2, Config::default()).unwrap();
        w.delete_run(&id("x")).unwrap();
        Some(Ok(()))
    }));
    let r = src.backup(&dst, &mut |_| {});
    let r = r.expect("a DST writer's delete must not abort the backup");
    assert!(r.complete);
    let fresh = Store::open(&dst, Config::default()).unwrap();
    assert_eq!(payloads(&fresh, &x), payloads(&src, &x));
}

#[test]
fn case_a_dst_delete_before_held_open() {
    a_delete_in_the_destination_while_the_backup_opens_the_run(false);
}

#[test]
fn case_b_dst_delete_at_recopy_swap() {
    a_delete_in_the_destination_while_the_backup_opens_the_run(true);
}

/// A second backup into the same DST while the first runs: refused, nothing changed.
#[test]
fn case_c_two_backups_same_dst() {
    let hook = Arc::new(OpenHookFs::default());
    let (_tmp, src_dir, dst, src) = source_on(hook.clone());
    for r in ["a", "b"] {
        src.create_run(&id(r)).unwrap();
        append(&src, &id(r), 40, "v1");
    }
    assert!(src.backup(&dst, &mut |_| {}).unwrap().complete);
    append(&src, &id("a"), 40, "v2");
    append(&src, &id("b"), 40, "v2");
    let src2 = Store::open_read_only(&src_dir, small()).unwrap();
    let d2 = dst.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    *hook.hook.lock() = Some(Box::new(move |p: &Path, _| {
        if !p.starts_with(d2.join("runs/b")) {
            return None;
        }
        let r = src2.backup(&d2, &mut |_| {});
        tx.send(format!("{r:?}")).unwrap();
        Some(Ok(()))
    }));
    let r = src.backup(&dst, &mut |_| {}).unwrap();
    let second = rx.recv_timeout(WAIT).unwrap();
    assert!(second.contains("BackupRefused"), "{second}");
    assert!(r.complete);
    let fresh = Store::open(&dst, Config::default()).unwrap();
    for x in ["a", "b"] {
        assert_eq!(payloads(&fresh, &id(x)), payloads(&src, &id(x)));
        assert!(fresh.verify_run(&id(x)).unwrap().problems.is_empty());
    }
}

fn seg(dir: &Path, run: &str, n: u32) -> PathBuf {
    dir.join(format!("runs/{run}/seg-{n:08}.log"))
}

/// A source run with a lost seal: the backup fails that run (incomplete), keeps the DST's
/// older copy; after restore_seals the next backup is complete.
#[test]
fn case_d_lost_seal_in_source() {
    use runlog::format::{CounterSlot, HEADER_LEN, SegmentHeader};
    let tmp = tempfile::tempdir().unwrap();
    let (src_dir, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    let src = Store::open(&src_dir, small()).unwrap();
    let x = id("x");
    src.create_run(&x).unwrap();
    append(&src, &x, 10, "v1");
    assert!(src.backup(&dst, &mut |_| {}).unwrap().complete);
    while src.run_info(&x).unwrap().segment_count < 3 {
        append(&src, &x, 5, "v2");
    }
    let before = payloads(&src, &x);
    drop(src);
    // lose seg 1's seal: flip a bit in the sealed slot
    let p = seg(&src_dir, "x", 1);
    let mut bytes = std::fs::read(&p).unwrap();
    let salt = SegmentHeader::decode(&bytes[..HEADER_LEN as usize])
        .unwrap()
        .salt;
    let at = (0..2)
        .find(|&i| CounterSlot::decode(&bytes[512 + 512 * i..], salt, i).is_some_and(|s| s.sealed))
        .unwrap();
    bytes[512 + 512 * at + 8] ^= 1;
    std::fs::write(&p, &bytes).unwrap();
    let ro = Store::open_read_only(&src_dir, small()).unwrap();
    let r = ro.backup(&dst, &mut |_| {}).unwrap();
    assert!(!r.complete);
    let fresh = Store::open_read_only(&dst, Config::default()).unwrap();
    assert_eq!(payloads(&fresh, &x), before[..10].to_vec());
    drop(fresh);
    let w = Store::open(&src_dir, small()).unwrap();
    assert_eq!(w.restore_seals(&x).unwrap().len(), 1);
    let r = ro.backup(&dst, &mut |_| {}).unwrap();
    assert!(r.complete, "{r:?}");
    let fresh = Store::open(&dst, Config::default()).unwrap();
    assert_eq!(payloads(&fresh, &x), before);
    assert!(fresh.verify_run(&x).unwrap().problems.is_empty());
}

/// The recopy's lock_existing opens the old copy's lock file while a writer of the DST
/// holds it deleting the run; the writer then makes the run again and a writer W of it is
/// mid-commit (a roll) holding the new run's lock. The backup locks the orphaned lock file
/// and swaps the new incarnation away from under W.
#[test]
fn case_e_recopy_locks_an_orphaned_lock_file() {
    use std::os::unix::io::AsRawFd;
    use std::sync::mpsc::channel;
    let hook = Arc::new(OpenHookFs::default());
    let (_tmp, _, dst, src) = source_on(hook.clone());
    let src = Arc::new(src);
    let x = id("x");
    src.create_run(&x).unwrap();
    append(&src, &x, 5, "v1");
    assert!(src.backup(&dst, &mut |_| {}).unwrap().complete);
    {
        let w = Store::open(&dst, Config::default()).unwrap();
        append(&w, &x, 3, "dstonly");
    }
    append(&src, &x, 5, "v2");
    let src_payloads = payloads(&src, &x);

    let (go_tx, go_rx) = channel::<()>();
    let (locked_tx, locked_rx) = channel::<()>();
    let (cont_tx, cont_rx) = channel::<()>();
    let (acked_tx, acked_rx) = channel::<String>();
    let d2 = dst.clone();
    let mut n = 0;
    *hook.hook.lock() = Some(Box::new(move |p: &Path, _| {
        if !is_lock_of(p, &d2, "x") {
            return None;
        }
        n += 1;
        if n < 2 {
            return None;
        }
        go_tx.send(()).unwrap();
        locked_rx.recv_timeout(WAIT).unwrap();
        Some(Ok(()))
    }));
    let d3 = dst.clone();
    let t = std::thread::spawn(move || {
        go_rx.recv_timeout(WAIT).unwrap();
        let runs = d3.join("runs");
        let l1 = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(runs.join("x/lock"))
            .unwrap();
        assert_eq!(unsafe { libc::flock(l1.as_raw_fd(), libc::LOCK_EX) }, 0);
        locked_tx.send(()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        // the delete's commit point, as Store::delete_run does under the lock
        std::fs::rename(
            runs.join("x"),
            runs.join(format!(".deleted-x-{}", ulid::Ulid::generate())),
        )
        .unwrap();
        // W: makes x again and appends until its roll, which pauses mid-commit
        let (blocked_tx, blocked_rx) = channel::<()>();
        let d4 = d3.clone();
        let w = std::thread::spawn(move || {
            let whook = Arc::new(OpenHookFs::default());
            let target = d4.join("runs/x/seg-00000002.log.tmp");
            let blocked_tx = std::sync::Mutex::new(blocked_tx);
            let cont_rx = std::sync::Mutex::new(cont_rx);
            *whook.hook.lock() = Some(Box::new(move |p: &Path, _| {
                if p != target {
                    return None;
                }
                blocked_tx.lock().unwrap().send(()).unwrap();
                cont_rx.lock().unwrap().recv_timeout(WAIT).unwrap();
                Some(Ok(()))
            }));
            let ws = Store::open_with_fs(whook, &d4, small()).unwrap();
            ws.create_run(&id("x")).unwrap();
            let mut last = 0;
            for i in 0.. {
                let a = ws.append_facts(
                    &id("x"),
                    vec![NewEvent::new("w", format!("w {i} {}", "q".repeat(100)))],
                );
                match a {
                    Ok(a) => last = a[0].seq,
                    Err(e) => {
                        acked_tx
                            .send(format!("W error after seq {last}: {e}"))
                            .unwrap();
                        return;
                    }
                }
                if ws.run_info(&id("x")).map(|i| i.segment_count).unwrap_or(0) >= 2 {
                    acked_tx
                        .send(format!("W acknowledged up to seq {last} (rolled)"))
                        .unwrap();
                    return;
                }
            }
        });
        blocked_rx.recv_timeout(WAIT).unwrap();
        drop(l1); // unlock the orphan
        w
    });
    // The backup waits for the lock of the run there now, which W holds mid-commit; W is let
    // go once the backup waits (before the fix, the backup had locked the orphaned file and
    // swapped the run from under W).
    let backup = {
        let (src, dst) = (src.clone(), dst.clone());
        std::thread::spawn(move || src.backup(&dst, &mut |_| {}))
    };
    let w = t.join().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    cont_tx.send(()).unwrap();
    w.join().unwrap();
    let acked = acked_rx.recv_timeout(WAIT).unwrap();
    let r = backup.join().unwrap().unwrap();
    assert!(r.complete, "{r:?} ({acked})");
    let fresh = Store::open(&dst, Config::default()).unwrap();
    assert!(fresh.verify_run(&x).unwrap().problems.is_empty());
    assert_eq!(payloads(&fresh, &x), src_payloads);
    let next = fresh
        .append_facts(&x, vec![NewEvent::new("after", "z")])
        .unwrap();
    assert_eq!(next[0].seq, src_payloads.len() as u64 + 1);
}

type RenameHook = Box<dyn FnMut(&Path, &Path) + Send>;
#[derive(Default)]
struct RenameHookFs {
    hook: parking_lot::Mutex<Option<RenameHook>>,
    /// Every file removed through it.
    removed: parking_lot::Mutex<Vec<PathBuf>>,
}
impl std::fmt::Debug for RenameHookFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RenameHookFs")
    }
}
impl runlog::io::Fs for RenameHookFs {
    fn open(
        &self,
        path: &Path,
        mode: runlog::io::OpenMode,
    ) -> std::io::Result<Arc<dyn runlog::io::FsFile>> {
        runlog::io::StdFs.open(path, mode)
    }
    fn create_dir(&self, path: &Path) -> std::io::Result<()> {
        runlog::io::StdFs.create_dir(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        if let Some(h) = self.hook.lock().as_mut() {
            h(from, to);
        }
        runlog::io::StdFs.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        self.removed.lock().push(path.to_path_buf());
        runlog::io::StdFs.remove_file(path)
    }
    fn remove_dir(&self, path: &Path) -> std::io::Result<()> {
        runlog::io::StdFs.remove_dir(path)
    }
    fn read_dir(&self, path: &Path) -> std::io::Result<Vec<String>> {
        runlog::io::StdFs.read_dir(path)
    }
    fn sync_dir(&self, path: &Path) -> std::io::Result<()> {
        runlog::io::StdFs.sync_dir(path)
    }
    fn is_dir(&self, path: &Path) -> std::io::Result<bool> {
        runlog::io::StdFs.is_dir(path)
    }
}

fn name_of(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

/// A .replaced- copy renamed back while a DST writer's create_run of the run lands first.
#[test]
fn case_f_rename_back_races_create_run() {
    let fs = Arc::new(RenameHookFs::default());
    let (_tmp, _, dst, src) = source_on(fs.clone());
    for r in ["a", "x"] {
        src.create_run(&id(r)).unwrap();
        append(&src, &id(r), 5, "v1");
    }
    assert!(src.backup(&dst, &mut |_| {}).unwrap().complete);
    // as a recopy killed between its renames leaves it: the old copy aside, the new one built
    let attempt = ulid::Ulid::generate();
    std::fs::rename(
        dst.join("runs/x"),
        dst.join(format!("runs/.replaced-x-{attempt}")),
    )
    .unwrap();
    std::fs::create_dir(dst.join(format!("runs/.backup-x-{attempt}"))).unwrap();
    append(&src, &id("a"), 5, "v2");
    let d2 = dst.clone();
    let mut once = true;
    *fs.hook.lock() = Some(Box::new(move |from, to| {
        if once && name_of(from).starts_with(".replaced-x-") && name_of(to) == "x" {
            once = false;
            let w = Store::open(&d2, Config::default()).unwrap();
            w.create_run(&id("x")).unwrap();
            append(&w, &id("x"), 2, "dst");
        }
    }));
    let r = src.backup(&dst, &mut |_| {});
    assert!(
        r.expect("a DST writer's create_run must not abort the backup")
            .complete
    );
    // The writer's new run, not a prefix of the source's, was recopied; the old copy stays
    // aside, never removed.
    let fresh = Store::open(&dst, Config::default()).unwrap();
    assert_eq!(payloads(&fresh, &id("x")), payloads(&src, &id("x")));
    assert_eq!(dot_names(&dst, ".replaced-x-"), 1);
}

/// How many entries of `dst/runs/` start with `prefix`.
fn dot_names(dst: &Path, prefix: &str) -> usize {
    std::fs::read_dir(dst.join("runs"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(prefix)
        })
        .count()
}

/// A new run's whole copy renamed into place while a DST writer's create_run of it lands first.
#[test]
fn case_g_new_copy_races_create_run() {
    let fs = Arc::new(RenameHookFs::default());
    let (_tmp, _, dst, src) = source_on(fs.clone());
    src.create_run(&id("a")).unwrap();
    append(&src, &id("a"), 5, "v1");
    assert!(src.backup(&dst, &mut |_| {}).unwrap().complete);
    for r in ["m", "x"] {
        src.create_run(&id(r)).unwrap();
        append(&src, &id(r), 5, "v1");
    }
    let d2 = dst.clone();
    let mut once = true;
    *fs.hook.lock() = Some(Box::new(move |from, to| {
        if once && name_of(from).starts_with(".backup-m-") && name_of(to) == "m" {
            once = false;
            let w = Store::open(&d2, Config::default()).unwrap();
            w.create_run(&id("m")).unwrap();
        }
    }));
    let r = src.backup(&dst, &mut |_| {});
    assert!(
        r.expect("a DST writer's create_run must not abort the backup")
            .complete
    );
    // The writer's empty run replaced by the source's copy, like any copy not a prefix.
    let fresh = Store::open(&dst, Config::default()).unwrap();
    for r in ["m", "x"] {
        assert_eq!(payloads(&fresh, &id(r)), payloads(&src, &id(r)), "{r}");
    }
    assert_eq!(dot_names(&dst, "."), 0);
}

/// A recopy removes the old copy's files only under a delete's name (`.deleted-…`), never
/// under `.replaced-…`, the name the next backup puts back as the run: a kill while they are
/// removed then leaves garbage, not a part of a copy (before the fix, a part was put back
/// as the run when the run had meanwhile been deleted in the destination and in the source:
/// `complete`, and the run damaged). Every removal of a file is recorded here.
#[test]
fn case_h_a_replaced_copy_is_removed_only_under_a_deletes_name() {
    let fs = Arc::new(RenameHookFs::default());
    let (_tmp, _, dst, src) = source_on(fs.clone());
    for r in ["a", "x"] {
        src.create_run(&id(r)).unwrap();
    }
    while src.run_info(&id("x")).unwrap().segment_count < 3 {
        append(&src, &id("x"), 5, "v1");
    }
    assert!(src.backup(&dst, &mut |_| {}).unwrap().complete);
    append(
        &Store::open(&dst, Config::default()).unwrap(),
        &id("x"),
        1,
        "dstonly",
    );
    append(&src, &id("x"), 1, "v2");
    let r = src.backup(&dst, &mut |_| {}).unwrap();
    assert!(r.complete);
    assert_eq!(
        r.runs
            .iter()
            .find(|x| x.run == id("x"))
            .unwrap()
            .result
            .name(),
        "recopied"
    );
    let removed = fs.removed.lock().clone();
    assert!(
        removed
            .iter()
            .any(|p| p.to_string_lossy().contains("/.deleted-x-")),
        "{removed:?}"
    );
    for p in &removed {
        assert!(
            !p.to_string_lossy().contains("/.replaced-"),
            "removed under .replaced-: {p:?}"
        );
    }
    let left: Vec<String> = std::fs::read_dir(dst.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let fresh = Store::open(&dst, Config::default()).unwrap();
    assert_eq!(payloads(&fresh, &id("x")), payloads(&src, &id("x")));
    assert!(fresh.verify_run(&id("x")).unwrap().problems.is_empty());
}

/// repair --cut of a damaged source run during a backup (between runs a and x).
#[test]
fn case_i_repair_during_backup() {
    let hook = Arc::new(OpenHookFs::default());
    let (_tmp, src_dir, dst, src) = source_on(hook.clone());
    for r in ["a", "x"] {
        src.create_run(&id(r)).unwrap();
        append(&src, &id(r), 5, "v1");
    }
    assert!(src.backup(&dst, &mut |_| {}).unwrap().complete);
    while src.run_info(&id("x")).unwrap().segment_count < 2 {
        append(&src, &id("x"), 5, "v2");
    }
    append(&src, &id("x"), 3, "v3");
    append(&src, &id("a"), 3, "v2");
    let n = src.run_info(&id("x")).unwrap().segment_count;
    drop(src);
    let p = seg(&src_dir, "x", n);
    let offs = common::batch_offsets(&p);
    let mut b = std::fs::read(&p).unwrap();
    let last = *offs.last().unwrap() as usize;
    b[last + 40] ^= 0x55;
    std::fs::write(&p, &b).unwrap();
    let src = Store::open_read_only_with_fs(hook.clone(), &src_dir, small()).unwrap();
    let r = src.backup(&dst, &mut |_| {}).unwrap();
    assert!(!r.complete, "the damaged run fails alone");
    append(&Store::open(&src_dir, small()).unwrap(), &id("a"), 1, "v3");
    let (d2, s2) = (dst.clone(), src_dir.clone());
    *hook.hook.lock() = Some(Box::new(move |p: &Path, _| {
        if !p.starts_with(d2.join("runs/a")) {
            return None;
        }
        let w = Store::open(&s2, small()).unwrap();
        assert!(w.repair_run(&id("x")).unwrap().is_some());
        w.append_facts(&id("x"), vec![NewEvent::new("after", "repair")])
            .unwrap();
        Some(Ok(()))
    }));
    let r = src.backup(&dst, &mut |_| {}).unwrap();
    assert!(r.complete, "{r:?}");
    let fresh = Store::open(&dst, Config::default()).unwrap();
    let srcw = Store::open_read_only(&src_dir, small()).unwrap();
    for x in ["a", "x"] {
        assert!(fresh.verify_run(&id(x)).unwrap().problems.is_empty());
        let (d, s) = (payloads(&fresh, &id(x)), payloads(&srcw, &id(x)));
        assert!(s.starts_with(&d), "{x}: dst not a prefix");
    }
}
