//! The backup manifest `<backup>/BACKUP` (format/SPEC.md §12): a few lines of text saying
//! whether the directory is a complete backup, and of which store.

use std::io;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::io::{Fs, OpenMode, read_up_to};

/// Name of the manifest file in a backup's directory.
pub const BACKUP_FILE: &str = "BACKUP";
/// Name of the file a running backup holds its advisory lock on.
pub(crate) const LOCK_NAME: &str = "BACKUP.lock";
/// First line of every manifest.
const MAGIC_LINE: &str = "runlog-backup 1";
/// A manifest is a few hundred bytes; a longer file is not one.
const MANIFEST_LEN_MAX: usize = 64 << 10;

/// What a backup's manifest says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackupManifest {
    /// Whether the last backup into the directory finished (every run copied and synced).
    /// `false` from the moment a backup starts until it has.
    pub complete: bool,
    /// The store backed up (as the backup was given it).
    pub source: PathBuf,
    /// When the last backup started (ms since the Unix epoch).
    pub started_at_ms: u64,
    /// When it finished; `None` while incomplete.
    pub finished_at_ms: Option<u64>,
}

impl BackupManifest {
    /// The manifest of a backup of `source` that started at `started_at_ms` and has not
    /// finished.
    pub(crate) fn started(source: &Path, started_at_ms: u64) -> BackupManifest {
        BackupManifest {
            complete: false,
            source: source.to_path_buf(),
            started_at_ms,
            finished_at_ms: None,
        }
    }

    /// The manifest of a finished backup.
    pub(crate) fn completed(source: &Path, started_at_ms: u64, finished: u64) -> BackupManifest {
        BackupManifest {
            complete: true,
            finished_at_ms: Some(finished),
            ..BackupManifest::started(source, started_at_ms)
        }
    }

    /// The file's text: the magic line, then `state`, `source`, `started_at_ms` and (when
    /// complete) `finished_at_ms`, one `name value` line each.
    fn encode(&self) -> String {
        let state = if self.complete {
            "complete"
        } else {
            "incomplete"
        };
        let mut text = format!(
            "{MAGIC_LINE}\nstate {state}\nsource {}\nstarted_at_ms {}\n",
            self.source.display(),
            self.started_at_ms
        );
        if let Some(f) = self.finished_at_ms {
            text.push_str(&format!("finished_at_ms {f}\n"));
        }
        text
    }

    fn decode(text: &str) -> std::result::Result<BackupManifest, String> {
        let mut lines = text.lines();
        if lines.next() != Some(MAGIC_LINE) {
            return Err(format!("does not start with {MAGIC_LINE:?}"));
        }
        let mut m = BackupManifest::started(Path::new(""), 0);
        let (mut state, mut started) = (None, None);
        for line in lines {
            let (name, value) = line.split_once(' ').unwrap_or((line, ""));
            let number = || {
                value
                    .parse::<u64>()
                    .map_err(|_| format!("bad {name} {value:?}"))
            };
            match name {
                "state" => state = Some(value == "complete"),
                "source" => m.source = PathBuf::from(value),
                "started_at_ms" => started = Some(number()?),
                "finished_at_ms" => m.finished_at_ms = Some(number()?),
                _ => return Err(format!("unknown line {line:?}")),
            }
        }
        m.complete = state.ok_or("no state line")?;
        m.started_at_ms = started.ok_or("no started_at_ms line")?;
        if m.complete != m.finished_at_ms.is_some() {
            return Err("finished_at_ms must be present exactly when complete".to_string());
        }
        Ok(m)
    }
}

/// The manifest of the backup directory `dir`; `Ok(None)` when it has none (not a backup,
/// or not yet one).
///
/// # Errors
/// [`Error::NotAStore`] for a `BACKUP` file that is not a manifest; [`Error::Io`].
pub fn read_manifest(fs: &dyn Fs, dir: &Path) -> Result<Option<BackupManifest>> {
    let path = dir.join(BACKUP_FILE);
    let file = match fs.open(&path, OpenMode::Read) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("opening", &path, e)),
    };
    let mut buf = vec![0u8; MANIFEST_LEN_MAX + 1];
    let n = read_up_to(file.as_ref(), &mut buf, 0).map_err(|e| Error::io("reading", &path, e))?;
    let text = std::str::from_utf8(&buf[..n]).map_err(|_| "is not UTF-8".to_string());
    let decoded = text.and_then(|t| match n > MANIFEST_LEN_MAX {
        true => Err(format!("is longer than {MANIFEST_LEN_MAX} bytes")),
        false => BackupManifest::decode(t),
    });
    decoded.map(Some).map_err(|why| Error::NotAStore {
        path: dir.to_path_buf(),
        detail: format!("its {BACKUP_FILE} file {why}"),
    })
}

/// Writes `m` as `dir`'s manifest: whole or not at all (temp name, synced, renamed, `dir`
/// synced), so a crash leaves the previous manifest or this one.
pub(crate) fn write_manifest(fs: &dyn Fs, dir: &Path, m: &BackupManifest) -> Result<()> {
    let path = dir.join(BACKUP_FILE);
    super::replace_synced(fs, dir, &path, m.encode().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_text_round_trips_and_rejects_a_finish_without_completion() {
        let done = BackupManifest::completed(Path::new("/s"), 5, 9);
        assert_eq!(
            done.encode(),
            "runlog-backup 1\nstate complete\nsource /s\nstarted_at_ms 5\nfinished_at_ms 9\n"
        );
        assert_eq!(BackupManifest::decode(&done.encode()), Ok(done));
        let started = BackupManifest::started(Path::new("/s"), 5);
        assert_eq!(BackupManifest::decode(&started.encode()), Ok(started));
        let bad =
            "runlog-backup 1\nstate incomplete\nsource /s\nstarted_at_ms 5\nfinished_at_ms 9\n";
        assert!(BackupManifest::decode(bad).is_err());
        assert!(BackupManifest::decode("runlog-backup 2\n").is_err());
    }
}
