//! The field's local development store made durable: one JSON file per event, written to a
//! temp name, fsync'd, renamed into place, directory fsync'd. A run's order is its sorted
//! directory listing (ULID file names); a fenced decision counts the directory first (the
//! field's slot scan), so its cost grows with the run.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use ulid::Ulid;

use super::{BenchResult, Ev, Peer, ReadStat, Session};

/// Runs as directories under `<dir>/runs`.
pub struct FilesPeer {
    runs: PathBuf,
}

impl FilesPeer {
    /// Creates `<dir>/runs`.
    pub fn open(dir: &Path) -> BenchResult<FilesPeer> {
        let runs = dir.join("runs");
        std::fs::create_dir_all(&runs)?;
        File::open(dir)?.sync_all()?;
        Ok(FilesPeer { runs })
    }
}

impl Peer for FilesPeer {
    fn name(&self) -> &'static str {
        "files"
    }

    fn create_run(&self, run: &str) -> BenchResult<()> {
        std::fs::create_dir(self.runs.join(run))?;
        File::open(&self.runs)?.sync_all()?;
        Ok(())
    }

    fn session(&self) -> BenchResult<Box<dyn Session>> {
        Ok(Box::new(FilesSession {
            runs: self.runs.clone(),
        }))
    }

    fn bulk_load(&self, run: &str, events: &[Ev]) -> BenchResult<()> {
        let dir = self.runs.join(run);
        for ev in events {
            std::fs::write(dir.join(format!("{}.json", Ulid::generate())), &ev.payload)?;
        }
        sync_tree(&dir)
    }
}

/// Makes a bulk-loaded directory durable: fsync every file, then the directory.
fn sync_tree(dir: &Path) -> BenchResult<()> {
    for entry in std::fs::read_dir(dir)? {
        File::open(entry?.path())?.sync_all()?;
    }
    File::open(dir)?.sync_all()?;
    Ok(())
}

struct FilesSession {
    runs: PathBuf,
}

impl FilesSession {
    /// temp file → fsync → rename → directory fsync.
    fn write_event(&self, dir: &Path, ev: &Ev) -> BenchResult<()> {
        let id = Ulid::generate();
        let tmp = dir.join(format!(".tmp-{id}"));
        let mut file = File::create(&tmp)?;
        file.write_all(&ev.payload)?;
        file.sync_all()?;
        std::fs::rename(&tmp, dir.join(format!("{id}.json")))?;
        File::open(dir)?.sync_all()?;
        Ok(())
    }

    /// The run's event files in order.
    fn listing(&self, run: &str) -> BenchResult<Vec<PathBuf>> {
        let mut names: Vec<PathBuf> = std::fs::read_dir(self.runs.join(run))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        names.sort();
        Ok(names)
    }

    fn read_files(paths: &[PathBuf]) -> BenchResult<ReadStat> {
        let mut stat = ReadStat::default();
        for path in paths {
            stat.add(std::fs::read(path)?.len());
        }
        Ok(stat)
    }
}

impl Session for FilesSession {
    fn append_fact(&mut self, run: &str, ev: &Ev) -> BenchResult<u64> {
        self.write_event(&self.runs.join(run), ev)?;
        Ok(0)
    }

    fn append_decisions(&mut self, run: &str, expected: u64, evs: &[Ev]) -> BenchResult<u64> {
        let actual = self.listing(run)?.len() as u64;
        if actual != expected {
            return Err(format!("files: fenced, expected {expected}, found {actual}").into());
        }
        let dir = self.runs.join(run);
        for ev in evs {
            self.write_event(&dir, ev)?;
        }
        Ok(expected + evs.len() as u64)
    }

    fn read_all(&mut self, run: &str) -> BenchResult<ReadStat> {
        Self::read_files(&self.listing(run)?)
    }

    fn read_after(&mut self, run: &str, after: u64, limit: usize) -> BenchResult<Option<ReadStat>> {
        let listing = self.listing(run)?;
        let start = usize::try_from(after)?.min(listing.len());
        let end = start.saturating_add(limit).min(listing.len());
        Self::read_files(&listing[start..end]).map(Some)
    }
}
