//! A store this user may write, holding one run whose files belong to another user (readable
//! by all, writable only by their owner: a run created once under `sudo`, say). The store
//! opened for writing serves that run's reads and refuses its writes with the error opening
//! it for writing meets (`Error::Io`, `EACCES`, naming its lock file), and every other run is
//! read and written as usual. Before, every read of that run failed with `EACCES` too (found
//! by trying to break the World from outside).
//!
//! Runs as root (it makes files of root and of `nobody`); the store is then opened by this
//! test binary run again as `nobody` through `setpriv`. Skipped otherwise.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use runlog::{Config, Error, NewEvent, RunId, Store};
use runlog_conformance::skip::skip;

/// The uid and gid of `nobody`.
const NOBODY: u32 = 65534;
/// Names the store the child opens (set only for the child).
const CHILD_STORE: &str = "RUNLOG_TEST_ANOTHER_USERS_RUN_STORE";

fn run(id: &str) -> RunId {
    RunId::new(id).expect("run id")
}

fn chown_tree(root: &Path, uid: u32, dirs: u32, files: u32) {
    if root.is_dir() {
        for e in std::fs::read_dir(root).expect("list") {
            chown_tree(&e.expect("entry").path(), uid, dirs, files);
        }
    }
    std::os::unix::fs::chown(root, Some(uid), Some(uid)).expect("chown");
    let mode = if root.is_dir() { dirs } else { files };
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// What the child saw, one line per check: `READ <seqs>`, `INFO <last seq>`, `APPEND_ROOT
/// <outcome>`, `APPEND_MINE <outcome>`, `APPEND_SEG <outcome>`, `LIST <runs> <damaged>`.
#[test]
#[ignore = "run by the test below as another user"]
fn child_entry() {
    let Some(path) = std::env::var_os(CHILD_STORE) else {
        return;
    };
    let store = Store::open(Path::new(&path), Config::default()).expect("open the store");
    let seqs = match store.read(&run("wrun_root"), 0, 100) {
        Ok(page) => page
            .events
            .iter()
            .map(|e| e.seq.to_string())
            .collect::<Vec<_>>()
            .join(","),
        Err(e) => format!("error:{e}"),
    };
    println!("READ {seqs}");
    match store.run_info(&run("wrun_root")) {
        Ok(info) => println!("INFO {}", info.last_seq),
        Err(e) => println!("INFO error:{e}"),
    }
    let outcome = |r: runlog::Result<Vec<runlog::Appended>>| match r {
        Ok(a) => format!("ok:{}", a[0].seq),
        Err(Error::Io { op, path, source }) => format!(
            "io:{op}:{}:{}",
            path.file_name().unwrap_or_default().to_string_lossy(),
            source.kind()
        ),
        Err(e) => format!("error:{e}"),
    };
    let ev = || vec![NewEvent::new("step_created", "{}")];
    println!(
        "APPEND_ROOT {}",
        outcome(store.append_facts(&run("wrun_root"), ev()))
    );
    println!(
        "APPEND_MINE {}",
        outcome(store.append_facts(&run("wrun_mine"), ev()))
    );
    println!(
        "APPEND_SEG {}",
        outcome(store.append_facts(&run("wrun_seg"), ev()))
    );
    let page = store.list_runs(None, 10).expect("list runs");
    println!("LIST {} {}", page.runs.len(), page.damaged.len());
}

#[test]
fn a_run_another_user_owns_is_read_and_refuses_writes_with_permission_denied() {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        skip("needs root, to make the files of two users");
        return;
    }
    let tmp = tempfile::Builder::new()
        .prefix("runlog-another-user-")
        .tempdir_in("/tmp")
        .expect("tempdir in /tmp");
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = tmp.path().join("store");
    {
        let store = Store::open(&path, Config::default()).expect("open");
        for id in ["wrun_root", "wrun_mine", "wrun_seg"] {
            store.create_run(&run(id)).expect("create run");
            for _ in 0..3 {
                store
                    .append_facts(&run(id), vec![NewEvent::new("step_created", "{}")])
                    .expect("append");
            }
        }
    }
    // The store and `wrun_mine` are nobody's; `wrun_root` stays root's, readable by all.
    chown_tree(&path, NOBODY, 0o755, 0o644);
    chown_tree(&path.join("runs").join("wrun_root"), 0, 0o755, 0o644);
    // `wrun_seg` is nobody's but for its segment, root's: its lock file opens for writing,
    // its segment does not, and the refusal names the segment (it named the lock file).
    chown_tree(
        &path.join("runs").join("wrun_seg").join("seg-00000001.log"),
        0,
        0o755,
        0o644,
    );
    let before: Vec<(String, Vec<u8>)> = files_of(&path.join("runs").join("wrun_root"));
    // The test binary, copied where `nobody` may run it.
    let bin = tmp.path().join("child");
    std::fs::copy(std::env::current_exe().expect("own path"), &bin).expect("copy");
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let out = match Command::new("setpriv")
        .args([
            &format!("--reuid={NOBODY}"),
            &format!("--regid={NOBODY}"),
            "--clear-groups",
        ])
        .arg(&bin)
        .args([
            "child_entry",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_STORE, &path)
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            skip(format!("setpriv is unavailable: {e}"));
            return;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = |tag: &str| -> String {
        stdout
            .lines()
            .find_map(|l| {
                l.find(&format!("{tag} "))
                    .map(|at| l[at + tag.len() + 1..].to_string())
            })
            .unwrap_or_else(|| panic!("no {tag} line in: {stdout}"))
    };
    assert_eq!(line("READ"), "1,2,3");
    assert_eq!(line("INFO"), "3");
    assert_eq!(
        line("APPEND_ROOT"),
        "io:opening lock file:lock:permission denied"
    );
    assert_eq!(line("APPEND_MINE"), "ok:4");
    assert_eq!(
        line("APPEND_SEG"),
        "io:opening segment:seg-00000001.log:permission denied"
    );
    assert_eq!(line("LIST"), "3 0");
    // Nothing of the other user's run was written.
    assert_eq!(files_of(&path.join("runs").join("wrun_root")), before);
}

/// (name, bytes) of every file in `dir`, by name.
fn files_of(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| {
            let e = e.expect("entry");
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).expect("read"),
            )
        })
        .collect();
    files.sort();
    files
}
