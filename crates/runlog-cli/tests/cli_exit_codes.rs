//! Issue 11 §7: environment errors (read-only file system, disk full, permission denied, EIO)
//! exit 6 with the path and the OS error; 5 stays for corruption; a run whose lock another
//! process holds past the lock wait exits 4. Real processes on real
//! file systems: a tmpfs mounted inside the test (remounted read-only, or filled), another
//! user via `setpriv`, an injected fdatasync error via `strace`. A scenario whose tool or
//! privilege is missing reports it through `runlog_conformance::skip::skip` (a failure under
//! `RUNLOG_NO_SKIP=1`, as in `.ci/run`).

mod cli_support;

use std::fs::{self, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use cli_support::*;
use runlog_conformance::skip::skip;

const EXIT_BUSY: i32 = 4;
const EXIT_CORRUPT: i32 = 5;
const EXIT_ENVIRONMENT: i32 = 6;

/// A tmpfs mounted on a fresh temporary directory, unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Result<Tmpfs, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !status.status.success() {
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&status.stderr).trim()
            ));
        }
        Ok(Tmpfs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn remount_read_only(&self) {
        let out = Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(self.path())
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

fn append(store: &Path, run: &str, kind: &str) -> Output {
    runlog(store, &["append", run, "--create", "--kind", kind])
}

fn assert_environment(out: &Output, what: &str, os_error: &str, path: &Path) {
    let err = stderr(out);
    assert_eq!(code(out), EXIT_ENVIRONMENT, "{what}: {err}");
    assert!(err.contains(os_error), "{what}: names the OS error: {err}");
    assert!(
        err.contains(path.to_str().expect("utf-8")),
        "{what}: names the path: {err}"
    );
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

#[test]
fn a_read_only_file_system_exits_6_naming_path_and_error() {
    let fs = match Tmpfs::mount("4m") {
        Ok(fs) => fs,
        Err(why) => return skip(why),
    };
    let store = fs.path().join("store");
    assert_eq!(code(&append(&store, "r", "run_created")), 0);
    fs.remount_read_only();
    let out = append(&store, "r", "run_started");
    assert_environment(&out, "append on EROFS", "Read-only file system", &store);
    let out = append(&store, "new_run", "run_created");
    assert_environment(&out, "create on EROFS", "Read-only file system", &store);
}

#[test]
fn a_full_file_system_exits_6() {
    let fs = match Tmpfs::mount("256k") {
        Ok(fs) => fs,
        Err(why) => return skip(why),
    };
    let store = fs.path().join("store");
    assert_eq!(code(&append(&store, "r", "run_created")), 0);
    // Fill what is left, page by page, until the file system refuses.
    let filler = fs.path().join("filler");
    let page = vec![1u8; 4096];
    let mut file = fs::File::create(&filler).expect("create filler");
    while std::io::Write::write_all(&mut file, &page).is_ok() {}
    drop(file);
    let payload = "x".repeat(64 << 10);
    let out = runlog(
        &store,
        &["append", "r", "--kind", "big", "--payload", &payload],
    );
    assert_environment(&out, "append on ENOSPC", "disk full", &store);
}

#[test]
fn permission_denied_exits_6() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    assert_eq!(code(&append(&store, "r", "run_created")), 0);
    let out = if is_root() {
        if !tool_exists("setpriv") {
            return skip("running as root and setpriv is missing");
        }
        // Another user may enter the directories (755) but write nothing (files 644).
        let mode = |p: &Path, m: u32| {
            fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(m)).expect("chmod")
        };
        mode(tmp.path(), 0o755);
        as_nobody(&store, &["append", "r", "--kind", "run_started"])
    } else {
        make_read_only(&store);
        append(&store, "r", "run_started")
    };
    assert_environment(
        &out,
        "append without permission",
        "Permission denied",
        &store,
    );
}

/// `runlog --store <store> <args>` as user and group 65534, without supplementary groups.
fn as_nobody(store: &Path, args: &[&str]) -> Output {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_runlog"))
        .arg("--store")
        .arg(store)
        .args(args)
        .env_remove("RUNLOG_STORE")
        .output()
        .expect("run setpriv")
}

/// Removes every write bit below `dir` (for a user that permissions apply to).
fn make_read_only(dir: &Path) {
    for entry in fs::read_dir(dir).expect("list") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            make_read_only(&path);
        }
        let mut perms = fs::metadata(&path).expect("stat").permissions();
        perms.set_readonly(true);
        fs::set_permissions(&path, perms).expect("chmod");
    }
}

#[test]
fn an_injected_fdatasync_eio_exits_6() {
    if !tool_exists("strace") {
        return skip("strace is not installed");
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    assert_eq!(code(&append(&store, "r", "run_created")), 0);
    let out = Command::new("strace")
        .args([
            "-f",
            "-o",
            "/dev/null",
            "-e",
            "inject=fdatasync:error=EIO:when=1",
        ])
        .arg(env!("CARGO_BIN_EXE_runlog"))
        .arg("--store")
        .arg(&store)
        .args(["append", "r", "--kind", "run_started"])
        .env_remove("RUNLOG_STORE")
        .output()
        .expect("run strace");
    if stderr(&out).contains("PTRACE") || stderr(&out).contains("ptrace") {
        return skip(format!("ptrace not permitted: {}", stderr(&out)));
    }
    assert_environment(
        &out,
        "append with fdatasync EIO",
        "Input/output error",
        &store,
    );
    // Issue 11 §2: the bytes whose sync failed are never acknowledged by anyone: the next
    // process does not adopt them, and a keyless retry appends once.
    let events = runlog(&store, &["events", "r", "--json"]);
    let lines: Vec<String> = String::from_utf8_lossy(&events.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(lines.len(), 1, "only the acknowledged event: {lines:?}");
    let retry = runlog(&store, &["append", "r", "--kind", "run_started"]);
    assert_eq!(String::from_utf8_lossy(&retry.stdout).trim(), "2");
    let events = runlog(&store, &["events", "r", "--json"]);
    assert_eq!(String::from_utf8_lossy(&events.stdout).lines().count(), 2);
}

/// Takes the kernel lock of run `run` (flock on `runs/<run>/lock`) on a descriptor of this
/// test process, as a writer of another process holds it inside a commit; released on drop.
fn hold_run_lock(store: &Path, run: &str) -> fs::File {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(store.join("runs").join(run).join("lock"))
        .expect("open the run's lock file");
    // SAFETY: flock on a descriptor owned by `file`, which outlives the call.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    assert_eq!(rc, 0, "flock: {}", std::io::Error::last_os_error());
    file
}

#[test]
fn a_run_locked_by_another_process_exits_4_after_the_lock_wait_and_writes_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    assert_eq!(code(&append(&store, "r", "run_created")), 0);
    let run_dir = store.join("runs").join("r");
    let before = snapshot(&run_dir);
    let lock = hold_run_lock(&store, "r");
    let holder = format!("lock held by pid {}", std::process::id());

    // A fact, with the wait from --lock-timeout-ms.
    let start = Instant::now();
    let out = runlog(
        &store,
        &[
            "append",
            "r",
            "--kind",
            "run_started",
            "--lock-timeout-ms",
            "300",
        ],
    );
    let waited = start.elapsed();
    assert_eq!(code(&out), EXIT_BUSY, "{}", stderr(&out));
    assert!(stderr(&out).contains("run r is busy"), "{}", stderr(&out));
    assert!(stderr(&out).contains(&holder), "{}", stderr(&out));
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(5),
        "waited {waited:?}: the flag's 300 ms, not the default 10 s"
    );

    // A fenced decision, with the wait from RUNLOG_LOCK_TIMEOUT_MS.
    let out = Command::new(env!("CARGO_BIN_EXE_runlog"))
        .arg("--store")
        .arg(&store)
        .args([
            "append",
            "r",
            "--kind",
            "run_completed",
            "--expected-seq",
            "1",
        ])
        .env_remove("RUNLOG_STORE")
        .env("RUNLOG_LOCK_TIMEOUT_MS", "200")
        .output()
        .expect("run runlog");
    assert_eq!(code(&out), EXIT_BUSY, "{}", stderr(&out));
    assert!(stderr(&out).contains(&holder), "{}", stderr(&out));
    assert_eq!(snapshot(&run_dir), before, "a busy append writes no byte");

    // Let go: the same append goes through at once.
    drop(lock);
    let out = runlog(
        &store,
        &[
            "append",
            "r",
            "--kind",
            "run_started",
            "--lock-timeout-ms",
            "300",
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "2");
}

/// The first segment of run `run`.
fn segment_1(store: &Path, run: &str) -> PathBuf {
    store.join("runs").join(run).join("seg-00000001.log")
}

#[test]
fn corruption_still_exits_5() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    let payload = "y".repeat(100);
    let out = runlog(
        &store,
        &[
            "append",
            "r",
            "--create",
            "--kind",
            "k",
            "--payload",
            &payload,
        ],
    );
    assert_eq!(code(&out), 0);
    // A byte inside the first batch's payload (60 bytes in: past the header and the record's
    // fields in every frame version): its checksum no longer matches.
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(segment_1(&store, "r"))
        .expect("open");
    file.write_all_at(b"Z", 4096 + 60).expect("write");
    file.sync_all().expect("sync");
    let out = runlog(&store, &["events", "r"]);
    assert_eq!(code(&out), EXIT_CORRUPT, "{}", stderr(&out));
    assert!(stderr(&out).contains("corrupt run r"), "{}", stderr(&out));
}
