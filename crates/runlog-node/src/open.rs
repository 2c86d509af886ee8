//! How `Store.open`, `Store.openReadOnly` and `Store.openOrReadOnly` (and `createWorld()`
//! through them) open the store a target names: through `runlog_pg::open_target`, the one
//! opener the CLI uses too (a file store directory, or PostgreSQL with the `Config`'s payload
//! and batch limits), and for `openOrReadOnly` a file store for writing when this process can
//! write it, else read-only (issue 20 item 4: as another user, or on a read-only mount, every
//! read works and every write is `READ_ONLY`).
//!
//! Built without the `postgres` cargo feature, `runlog-pg` is not compiled in: a PostgreSQL
//! URL rejects with `UNSUPPORTED` saying so, and file stores open as before.

use std::io;
use std::path::Path;
use std::sync::Arc;

use runlog::{Config, RunLog, Store as CoreStore};

use crate::errors::BindError;

/// How [`open_target`] opens a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// For writing (`Store.open`).
    Write,
    /// For reading only (`Store.openReadOnly`).
    Read,
    /// A file store for writing when this process can write it, else for reading only
    /// (`Store.openOrReadOnly`, [`open_file_store`]); PostgreSQL for writing.
    WriteOrRead,
}

/// A store [`open_target`] opened.
pub(crate) struct Opened {
    /// Every call goes through it.
    pub(crate) log: Arc<dyn RunLog>,
    /// The same store when it is a file store (for its commit counters), `None` on PostgreSQL.
    pub(crate) file: Option<CoreStore>,
    /// Why an [`Access::WriteOrRead`] open is read-only, if it is.
    pub(crate) read_only_cause: Option<runlog::Error>,
}

impl Opened {
    fn file(store: CoreStore, read_only_cause: Option<runlog::Error>) -> Opened {
        Opened {
            log: Arc::new(store.clone()),
            file: Some(store),
            read_only_cause,
        }
    }
}

/// Whether `target` is a PostgreSQL URL (the rule of `runlog_pg::Target::parse`: a
/// `postgres://` or `postgresql://` prefix, any case).
pub(crate) fn is_postgres(target: &str) -> bool {
    #[cfg(feature = "postgres")]
    {
        matches!(
            runlog_pg::Target::parse(target),
            runlog_pg::Target::Postgres(_)
        )
    }
    #[cfg(not(feature = "postgres"))]
    {
        // runlog-pg is not compiled in: its rule, so that a URL is refused, not taken for a
        // directory.
        let lower = target.get(..13).unwrap_or(target).to_ascii_lowercase();
        lower.starts_with("postgres://") || lower.starts_with("postgresql://")
    }
}

/// Opens the store `target` names as `access` says, with `config` on either backend.
///
/// # Errors
/// Those of `runlog_pg::open_target` and [`open_file_store`]; `UNSUPPORTED` (op `open`) for a
/// PostgreSQL URL in a build without the `postgres` feature.
pub(crate) fn open_target(
    target: &str,
    config: Config,
    access: Access,
) -> Result<Opened, BindError> {
    if access == Access::WriteOrRead && !is_postgres(target) {
        let (store, cause) = open_file_store(Path::new(target), config)?;
        return Ok(Opened::file(store, cause));
    }
    #[cfg(feature = "postgres")]
    {
        let access = match access {
            Access::Read => runlog_pg::Access::ReadOnly,
            Access::Write | Access::WriteOrRead => runlog_pg::Access::Write,
        };
        Ok(match runlog_pg::open_target(target, config, access)? {
            runlog_pg::Opened::File(store) => Opened::file(store, None),
            runlog_pg::Opened::Postgres(pg) => Opened {
                log: Arc::new(pg),
                file: None,
                read_only_cause: None,
            },
        })
    }
    #[cfg(not(feature = "postgres"))]
    {
        if is_postgres(target) {
            return Err(no_postgres());
        }
        Ok(Opened::file(
            match access {
                Access::Read => CoreStore::open_read_only(target, config)?,
                Access::Write | Access::WriteOrRead => CoreStore::open(target, config)?,
            },
            None,
        ))
    }
}

/// The rejection of a PostgreSQL target in a build without the `postgres` feature (the URL
/// is not repeated: it may hold a password).
#[cfg(not(feature = "postgres"))]
fn no_postgres() -> BindError {
    BindError::unsupported(
        "open",
        "a postgres:// store, but this addon was built without PostgreSQL support \
         (the `postgres` cargo feature of runlog-node)",
    )
}

/// Whether the operating system refused a write for good: EACCES or EPERM (permission bits,
/// an ACL, an immutable file) or EROFS (a read-only mount).
fn refuses_writing(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem
    )
}

/// Opens the file store at `dir` for writing when this process can write it, else read-only
/// (`runlog::Store::open_read_only`: no lock, nothing written), with the error that says why.
///
/// Whether it can is asked of the kernel, not guessed from modes or owners: `FORMAT` is
/// opened for writing (no create, no truncate, nothing written), and a refusal
/// ([`refuses_writing`]) opens the store read-only with that error as the cause. A directory
/// without `FORMAT` (missing or empty) is opened for writing, which creates the store; if the
/// directory exists and that is refused, it is opened read-only (an empty store, or
/// `NotAStore` for foreign files). A missing directory that cannot be created fails with the
/// error of creating it; foreign files fail with `NotAStore` either way.
///
/// # Errors
/// As `runlog::Store::open` and `runlog::Store::open_read_only`.
pub(crate) fn open_file_store(
    dir: &Path,
    config: Config,
) -> runlog::Result<(CoreStore, Option<runlog::Error>)> {
    let format = dir.join("FORMAT");
    match std::fs::OpenOptions::new().write(true).open(&format) {
        Ok(_) => Ok((CoreStore::open(dir, config)?, None)),
        Err(e) if refuses_writing(&e) => {
            let cause = runlog::Error::io("opening for writing", format, e);
            Ok((CoreStore::open_read_only(dir, config)?, Some(cause)))
        }
        Err(_) => match CoreStore::open(dir, config.clone()) {
            Err(runlog::Error::Io { op, path, source })
                if refuses_writing(&source) && dir.is_dir() =>
            {
                let cause = runlog::Error::Io { op, path, source };
                Ok((CoreStore::open_read_only(dir, config)?, Some(cause)))
            }
            opened => Ok((opened?, None)),
        },
    }
}

#[cfg(test)]
mod tests {
    //! On a real read-only mount (a tmpfs remounted `ro`, as root) and as another user
    //! (`nobody` through `setpriv`, a child re-running this binary's ignored `child_entry`),
    //! against a store written by root with directories 0755 and files 0644. Without the
    //! fallback (`runlog::Store::open`, what `Store.open` does) the open succeeds and every
    //! read fails opening the run's lock file.
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;
    use std::process::Command;

    use runlog::{Error, NewEvent, RunId};
    use runlog_conformance::skip::skip;

    use super::*;

    const CHILD_ENV: &str = "RUNLOG_NODE_OPEN_CHILD_STORE";
    /// Linux's errno values (the binding has no libc dependency).
    const EACCES: i32 = 13;
    const EROFS: i32 = 30;

    fn run() -> RunId {
        RunId::new("wrun_01M8RD6VDN78DRZESK20KEMJWK").expect("id")
    }

    /// A store at `dir` with one run of three events.
    fn write_store(dir: &Path) {
        let store = CoreStore::open(dir, Config::default()).expect("open");
        store.create_run(&run()).expect("create");
        let events = ["run_created", "run_started", "step_created"]
            .map(|k| NewEvent::new(k, "{}"))
            .to_vec();
        store.append_facts(&run(), events).expect("append");
    }

    /// What every caller may rely on: the store reads, lists and verifies; a write is
    /// `ReadOnly` naming the store; the cause is the refused open of `FORMAT`, with `errno`.
    fn assert_read_only(dir: &Path, errno: i32) {
        let (store, cause) = open_file_store(dir, Config::default()).expect("open");
        match cause {
            Some(Error::Io { op, path, source }) => {
                assert_eq!(op, "opening for writing");
                assert_eq!(path, dir.join("FORMAT"));
                assert_eq!(source.raw_os_error(), Some(errno), "{source}");
            }
            other => panic!("cause: {other:?}"),
        }
        assert!(store.is_read_only());
        let page = store.read(&run(), 0, 10).expect("read");
        assert_eq!(page.events.len(), 3);
        assert_eq!(store.list_runs(None, 10).expect("list").runs.len(), 1);
        assert!(
            store
                .verify_run(&run())
                .expect("verify")
                .problems
                .is_empty()
        );
        let refused = store.append_facts(&run(), vec![NewEvent::new("x", "{}")]);
        match refused {
            Err(Error::ReadOnly { path, .. }) => assert_eq!(path, dir),
            other => panic!("append: {other:?}"),
        }
        assert_eq!(store.last_seq(&run()).expect("last seq"), 3);
    }

    /// Unmounts on drop (also when an assertion fails).
    struct Mounted(PathBuf);

    impl Drop for Mounted {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }

    fn mount(args: &[&str], at: &Path) -> Result<(), String> {
        let out = Command::new("mount").args(args).arg(at).output();
        match out {
            Ok(o) if o.status.success() => Ok(()),
            Ok(o) => Err(format!(
                "mount {args:?} failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => Err(format!("mount is unavailable: {e}")),
        }
    }

    #[test]
    fn a_store_on_a_read_only_mount_opens_read_only_with_erofs_as_the_cause() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let at = tmp.path().join("mnt");
        std::fs::create_dir(&at).expect("mkdir");
        if let Err(why) = mount(&["-t", "tmpfs", "tmpfs"], &at) {
            return skip(why);
        }
        let _mounted = Mounted(at.clone());
        let dir = at.join("store");
        write_store(&dir);
        mount(&["-o", "remount,ro"], &at).expect("remount read-only");
        assert_read_only(&dir, EROFS);
        // A missing store directory on that mount cannot be created: the creation's error.
        let missing = at.join("missing");
        match open_file_store(&missing, Config::default()) {
            Err(Error::Io { path, source, .. }) => {
                assert_eq!(path, missing);
                assert_eq!(source.raw_os_error(), Some(EROFS));
            }
            other => panic!("missing: {:?}", other.map(|(_, c)| c)),
        }
    }

    fn chmod_tree(path: &Path) {
        let mode = if path.is_dir() { 0o755 } else { 0o644 };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        if path.is_dir() {
            for entry in std::fs::read_dir(path).expect("read dir") {
                chmod_tree(&entry.expect("entry").path());
            }
        }
    }

    #[test]
    fn a_store_another_user_cannot_write_opens_read_only_with_eacces_as_the_cause() {
        let tmp = tempfile::Builder::new()
            .prefix("runlog-node-open-")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let dir = tmp.path().join("store");
        write_store(&dir);
        chmod_tree(tmp.path());
        // The binary is copied where `nobody` may run it.
        let exe = tmp.path().join("tests");
        std::fs::copy(std::env::current_exe().expect("exe"), &exe).expect("copy");
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let ids = ["--reuid=nobody", "--regid=nogroup", "--clear-groups"];
        let out = Command::new("setpriv")
            .args(ids)
            .arg(&exe)
            .args(["open::tests::child_entry", "--exact", "--ignored"])
            .args(["--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, &dir)
            .output();
        let out = match out {
            Ok(out) => out,
            Err(e) => return skip(format!("setpriv is unavailable: {e}")),
        };
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        if !out.status.success() && text.contains("setpriv:") {
            return skip(format!("setpriv cannot run as nobody: {text}"));
        }
        assert!(out.status.success(), "the child as nobody: {text}");
        assert!(text.contains("1 passed"), "{text}");
    }

    #[cfg(not(feature = "postgres"))]
    #[test]
    fn without_the_postgres_feature_a_url_rejects_unsupported_naming_the_feature() {
        for url in ["postgres://u@h/db", "PostgreSQL:///db?schema=s"] {
            for access in [Access::Write, Access::Read, Access::WriteOrRead] {
                let Err(e) = open_target(url, Config::default(), access) else {
                    panic!("{url} {access:?}: opened");
                };
                assert_eq!(e.code.as_str(), "UNSUPPORTED", "{url} {access:?}");
                assert!(
                    e.message.contains("built without PostgreSQL support"),
                    "{e:?}"
                );
                assert!(e.message.contains("`postgres` cargo feature"), "{e:?}");
                assert!(!e.message.contains("u@h"), "{e:?}");
            }
        }
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("store");
        let opened = open_target(
            dir.to_str().expect("utf-8"),
            Config::default(),
            Access::Write,
        )
        .expect("a file store opens");
        assert!(opened.file.is_some() && opened.read_only_cause.is_none());
    }

    #[test]
    #[ignore = "entry point of the child process of the another-user test"]
    fn child_entry() {
        let Some(dir) = std::env::var_os(CHILD_ENV) else {
            panic!("an entry point of a child process, not a test: its parent sets {CHILD_ENV}")
        };
        assert_read_only(Path::new(&dir), EACCES);
    }
}
