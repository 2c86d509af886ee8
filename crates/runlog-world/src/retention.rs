//! The World option `retention` ([`crate::WorldConfig::retention`], off by default): a
//! background thread that collects finished runs older than a duration on its own, every
//! interval ([`World::collect_finished`], the rules of `gc.rs`), for a development server
//! whose store would otherwise only grow. It takes no lock a request needs beyond the
//! per-run reads and deletes of a gc, so requests go on while it runs.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use runlog::RunLog;
use runlog::io::StdFs;

use crate::gc::GcParams;
use crate::world::World;

/// What the retention thread collects, and how often it looks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Runs whose terminal event is older than this many ms (by [`crate::WorldConfig::clock`])
    /// are archived and removed.
    pub finished_older_than_ms: u64,
    /// How often the thread runs a gc, in ms (at least 1).
    pub interval_ms: u64,
    /// Where the archives go (`runlog restore --archive DIR` puts a run back).
    pub archive_dir: PathBuf,
}

/// The running retention thread of a World; [`RetentionTask::stop`], or dropping it (or the
/// World), stops it.
#[derive(Debug)]
pub struct RetentionTask {
    stop: Arc<(Mutex<bool>, Condvar)>,
    passes: Arc<AtomicU64>,
    collected: Arc<AtomicU64>,
    /// Taken by the first [`RetentionTask::stop`]; behind a lock so that a shared task (the
    /// Node binding's, read by `retentionStats()` while `close()` stops it) can be stopped.
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl RetentionTask {
    /// Gc passes completed so far.
    pub fn passes(&self) -> u64 {
        self.passes.load(Ordering::Acquire)
    }

    /// Runs collected so far.
    pub fn collected(&self) -> u64 {
        self.collected.load(Ordering::Acquire)
    }

    /// Stops the thread and joins it: a pass under way ends first, and none starts after.
    /// When it returns, [`RetentionTask::passes`] and [`RetentionTask::collected`] are final.
    /// Idempotent (a later call returns at once; a concurrent one waits for the join).
    pub fn stop(&self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        let mut thread = self.thread.lock();
        if let Some(t) = thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for RetentionTask {
    fn drop(&mut self) {
        self.stop();
    }
}

impl<B: RunLog + 'static> World<B> {
    /// Starts the retention thread of [`crate::WorldConfig::retention`]; `None` when the
    /// option is off. The thread holds the World weakly: it ends with the World too.
    pub fn start_retention(self: &Arc<Self>) -> Option<RetentionTask> {
        let retention = self.config.retention.clone()?;
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let (passes, collected) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let world = Arc::downgrade(self);
        let (s, p, c) = (stop.clone(), passes.clone(), collected.clone());
        let thread = std::thread::Builder::new()
            .name("runlog-retention".into())
            .spawn(move || retention_loop(world, &retention, &s, &p, &c))
            .ok()?;
        Some(RetentionTask {
            stop,
            passes,
            collected,
            thread: Mutex::new(Some(thread)),
        })
    }
}

fn retention_loop<B: RunLog>(
    world: Weak<World<B>>,
    retention: &Retention,
    stop: &(Mutex<bool>, Condvar),
    passes: &AtomicU64,
    collected: &AtomicU64,
) {
    let interval = Duration::from_millis(retention.interval_ms.max(1));
    loop {
        {
            let mut stopped = stop.0.lock();
            if !*stopped {
                stop.1.wait_for(&mut stopped, interval);
            }
            if *stopped {
                return;
            }
        }
        let Some(world) = world.upgrade() else {
            return;
        };
        let params = GcParams {
            finished_before_ms: world
                .now_ms()
                .saturating_sub(retention.finished_older_than_ms),
            archive_dir: retention.archive_dir.clone(),
            dry_run: false,
        };
        // A failed pass (or run) is tried again at the next interval: each run is live or
        // archived whatever happened.
        if let Ok(report) = world.collect_finished(&StdFs, &params, &mut |_| {}) {
            collected.fetch_add(report.collected.len() as u64, Ordering::AcqRel);
        }
        passes.fetch_add(1, Ordering::AcqRel);
    }
}
