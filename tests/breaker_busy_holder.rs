//! Rule 9: contention "fails with a typed error naming the holder". `Error::Busy { holder }`
//! is read from the lock file, which holds the pid of the last process that *wrote*, not of
//! the one holding the lock: the error names a process that may be long dead while the real
//! holder (a reader recovering at open, `delete_run`, a rejected append, any non-writing
//! holder) would go unnamed. The kernel's lock table names the live holder.

use std::os::fd::AsRawFd;
use std::time::Duration;

use runlog::{Config, Error, NewEvent, RunId, Store};

#[test]
fn busy_error_names_the_process_that_holds_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("s");
    // The last writer, as recorded in the lock file: a process that is long gone.
    {
        let store = Store::open(&store_dir, Config::default()).unwrap();
        let run = RunId::new("r1").unwrap();
        store.create_run(&run).unwrap();
        store
            .append_facts(&run, vec![NewEvent::new("k", "p")])
            .unwrap();
    }
    let record = format!("pid {:<16}\n", 999_999_999u64);
    std::fs::OpenOptions::new()
        .write(true)
        .open(store_dir.join("runs/r1/lock"))
        .and_then(|f| std::os::unix::fs::FileExt::write_all_at(&f, record.as_bytes(), 0))
        .unwrap();

    // This process now holds the run lock (flock, as runlog's own holders do).
    let lock = std::fs::File::open(store_dir.join("runs/r1/lock")).unwrap();
    // SAFETY: flock on a valid, open file descriptor owned by `lock`.
    let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    assert_eq!(rc, 0);

    let config = Config {
        lock_timeout: Duration::from_millis(100),
        ..Config::default()
    };
    let store = Store::open(&store_dir, config).unwrap();
    let run = RunId::new("r1").unwrap();
    let got = store.append_facts(&run, vec![NewEvent::new("k", "q")]);

    match got {
        // Actual: holder == "pid <the exited child>".
        Err(Error::Busy { holder, .. }) => {
            assert_eq!(holder, format!("pid {}", std::process::id()))
        }
        other => panic!("expected Busy, got {other:?}"),
    }
}
