//! The group-commit ceiling, `raw-group`: the writers of a run share one file, preallocated as
//! `raw-pre`'s, and a leader/follower group commit shaped like runlog's own
//! (`src/run/commit.rs`): a writer queues its frames; the writer that finds no commit in
//! flight takes everything queued, writes it with one `pwrite` and one `fdatasync`, settles
//! each request and hands the lead to the next one queued meanwhile. No seq, no fence, no
//! index, no cross-process lock, no counter: the least a log shared by concurrent writers
//! does per group.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::raw::{RawFile, frame_into, read_load, read_load_owned, write_load};
use super::{BenchResult, Ev, GroupStats, Peer, ReadStat, Session};

/// The shared logs of one directory, by run.
type Logs = Arc<Mutex<HashMap<String, Arc<GroupLog>>>>;

/// Raw group-committed files in one directory, one per run.
pub struct RawGroupPeer {
    dir: PathBuf,
    logs: Logs,
}

impl RawGroupPeer {
    /// Uses `dir` (existing) for the files.
    pub fn open(dir: &Path) -> BenchResult<RawGroupPeer> {
        Ok(RawGroupPeer {
            dir: dir.to_path_buf(),
            logs: Arc::default(),
        })
    }
}

fn lock<T>(mutex: &Mutex<T>) -> BenchResult<MutexGuard<'_, T>> {
    mutex
        .lock()
        .map_err(|_| "raw-group: a writer panicked holding a lock".into())
}

impl Peer for RawGroupPeer {
    fn name(&self) -> &'static str {
        "raw-group"
    }

    /// Creates the run's file (and syncs the directory).
    fn create_run(&self, run: &str) -> BenchResult<()> {
        let file = RawFile::create(&self.dir, &self.dir.join(format!("{run}.log")))?;
        let log = Arc::new(GroupLog {
            queue: Mutex::default(),
            file: Mutex::new(file),
            stats: Mutex::default(),
        });
        lock(&self.logs)?.insert(run.to_string(), log);
        Ok(())
    }

    fn session(&self) -> BenchResult<Box<dyn Session>> {
        Ok(Box::new(RawGroupSession {
            dir: self.dir.clone(),
            logs: Arc::clone(&self.logs),
            cached: HashMap::new(),
            buf: Vec::new(),
        }))
    }

    fn bulk_load(&self, run: &str, events: &[Ev]) -> BenchResult<()> {
        write_load(&self.dir, run, events)
    }

    /// Summed over every run's log.
    fn commit_groups(&self) -> Option<GroupStats> {
        let logs = lock(&self.logs).ok()?;
        let mut total = GroupStats::default();
        for log in logs.values() {
            total.add(&*lock(&log.stats).ok()?);
        }
        Some(total)
    }
}

/// One run's shared file and its group commit.
struct GroupLog {
    queue: Mutex<Queue>,
    /// Locked only by the current leader, so never contended.
    file: Mutex<RawFile>,
    /// Groups written so far (the leader updates it after each `fdatasync`).
    stats: Mutex<GroupStats>,
}

/// Requests waiting for the next group, and whether a leader is writing one now.
#[derive(Default)]
struct Queue {
    pending: Vec<Arc<Request>>,
    leading: bool,
}

/// One writer's append in the queue.
struct Request {
    frames: Vec<u8>,
    turn: Mutex<Turn>,
    /// Signalled once, when `turn` leaves `Waiting`.
    cv: Condvar,
}

enum Turn {
    Waiting,
    /// This request's writer leads the next group.
    Lead,
    /// Durable, or failed with the group's error.
    Done(Result<(), String>),
}

impl Request {
    fn set(&self, turn: Turn) -> BenchResult<()> {
        *lock(&self.turn)? = turn;
        self.cv.notify_one();
        Ok(())
    }

    /// Blocks until the request's writer is to lead or the request is done.
    fn wait(&self) -> BenchResult<MutexGuard<'_, Turn>> {
        let mut turn = lock(&self.turn)?;
        while matches!(*turn, Turn::Waiting) {
            turn = self
                .cv
                .wait(turn)
                .map_err(|_| "raw-group: a writer panicked holding its turn")?;
        }
        Ok(turn)
    }
}

impl GroupLog {
    /// Queues `frames` and returns once they are durable. The writer that finds no leader
    /// leads: it takes every request queued, writes their frames with one `pwrite` and one
    /// `fdatasync` (no queue lock held), settles each, and hands the lead to the first request
    /// queued meanwhile, each waiter woken on its own condvar (as runlog's commit path does).
    fn append(&self, frames: &[u8]) -> BenchResult<()> {
        let request = Arc::new(Request {
            frames: frames.to_vec(),
            turn: Mutex::new(Turn::Waiting),
            cv: Condvar::new(),
        });
        let lead = {
            let mut queue = lock(&self.queue)?;
            queue.pending.push(Arc::clone(&request));
            !std::mem::replace(&mut queue.leading, true)
        };
        if !lead && let Turn::Done(result) = &*request.wait()? {
            return result.clone().map_err(Into::into);
        }
        let group = std::mem::take(&mut lock(&self.queue)?.pending);
        let mut buf = Vec::with_capacity(group.iter().map(|r| r.frames.len()).sum());
        for r in &group {
            buf.extend_from_slice(&r.frames);
        }
        let written = lock(&self.file)
            .and_then(|mut file| file.append(&buf, true))
            .map_err(|e| e.to_string());
        if written.is_ok() {
            count_group(&mut *lock(&self.stats)?, group.len());
        }
        for r in &group {
            r.set(Turn::Done(written.clone()))?;
        }
        let mut queue = lock(&self.queue)?;
        match queue.pending.first() {
            Some(next) => next.set(Turn::Lead)?,
            None => queue.leading = false,
        }
        written.map_err(Into::into)
    }
}

/// Adds a group of `requests` to `stats` (bucket `i` holds sizes in `(2^(i-1), 2^i]`).
fn count_group(stats: &mut GroupStats, requests: usize) {
    let bucket = (usize::BITS - requests.saturating_sub(1).leading_zeros()) as usize;
    if stats.sizes.len() <= bucket {
        stats.sizes.resize(bucket + 1, 0);
    }
    stats.sizes[bucket] += 1;
    stats.groups += 1;
    stats.requests += requests as u64;
}

struct RawGroupSession {
    dir: PathBuf,
    logs: Logs,
    /// The logs this session has written to.
    cached: HashMap<String, Arc<GroupLog>>,
    buf: Vec<u8>,
}

impl RawGroupSession {
    fn log(&mut self, run: &str) -> BenchResult<Arc<GroupLog>> {
        if let Some(log) = self.cached.get(run) {
            return Ok(Arc::clone(log));
        }
        let log = lock(&self.logs)?
            .get(run)
            .cloned()
            .ok_or_else(|| format!("raw-group: no run {run}"))?;
        self.cached.insert(run.to_string(), Arc::clone(&log));
        Ok(log)
    }

    fn write_frames(&mut self, run: &str, evs: &[Ev]) -> BenchResult<()> {
        self.buf.clear();
        for ev in evs {
            frame_into(&mut self.buf, ev);
        }
        self.log(run)?.append(&self.buf)
    }
}

impl Session for RawGroupSession {
    fn append_fact(&mut self, run: &str, ev: &Ev) -> BenchResult<u64> {
        self.write_frames(run, std::slice::from_ref(ev))?;
        Ok(0)
    }

    fn append_decisions(&mut self, run: &str, expected: u64, evs: &[Ev]) -> BenchResult<u64> {
        self.write_frames(run, evs)?;
        Ok(expected + evs.len() as u64)
    }

    fn read_all(&mut self, run: &str) -> BenchResult<ReadStat> {
        read_load_owned(&self.dir, run)
    }

    fn read_after(&mut self, _: &str, _: u64, _: usize) -> BenchResult<Option<ReadStat>> {
        Ok(None)
    }

    /// Frames parsed in place.
    fn read_all_borrowed(&mut self, run: &str) -> BenchResult<Option<ReadStat>> {
        read_load(&self.dir, run).map(Some)
    }
}
