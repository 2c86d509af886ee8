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

/// The running retention thread of a World; [`RetentionTask::stop`] stops it and waits,
/// dropping it (or the World) stops it without waiting.
#[derive(Debug)]
pub struct RetentionTask {
    stop: Arc<(Mutex<bool>, Condvar)>,
    counters: Arc<Counters>,
    /// Taken by the first [`RetentionTask::stop`]; behind a lock so that a shared task (the
    /// Node binding's, read by `retentionStats()` while `close()` stops it) can be stopped.
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl RetentionTask {
    /// Gc passes completed so far (a pass that failed as a whole included).
    pub fn passes(&self) -> u64 {
        self.counters.passes.load(Ordering::Acquire)
    }

    /// Runs collected so far.
    pub fn collected(&self) -> u64 {
        self.counters.collected.load(Ordering::Acquire)
    }

    /// Runs already archived whose leftover stream or attribute logs were swept into their
    /// archive so far ([`crate::GcReport::swept`]).
    pub fn swept(&self) -> u64 {
        self.counters.swept.load(Ordering::Acquire)
    }

    /// Failures so far: each run that could not be judged or collected in a pass, and each
    /// pass that failed as a whole (the archive directory cannot be created or locked, the
    /// store cannot be listed), counted once per pass. Each failed run is still live.
    pub fn failures(&self) -> u64 {
        self.counters.failures.load(Ordering::Acquire)
    }

    /// The last failure's message (with the run it concerns), `None` while there was none.
    pub fn last_error(&self) -> Option<String> {
        self.counters.last_error.lock().clone()
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
    /// Tells the thread to stop without waiting for it: a drop may run where blocking is
    /// wrong (a JavaScript finalizer on the event loop's thread, for a `Store` collected
    /// without `close()`), and a pass under way may take long. The thread ends after that
    /// pass (holding the World only while a pass runs); each run it touches is live or
    /// archived at any moment, so a process that exits meanwhile loses nothing.
    /// [`RetentionTask::stop`] waits.
    fn drop(&mut self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
    }
}

impl<B: RunLog + 'static> World<B> {
    /// Starts the retention thread of [`crate::WorldConfig::retention`]; `None` when the
    /// option is off. The thread holds the World weakly: it ends with the World too.
    pub fn start_retention(self: &Arc<Self>) -> Option<RetentionTask> {
        let retention = self.config.retention.clone()?;
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let counters = Arc::new(Counters::default());
        let world = Arc::downgrade(self);
        let (s, c) = (stop.clone(), counters.clone());
        let thread = std::thread::Builder::new()
            .name("runlog-retention".into())
            .spawn(move || retention_loop(world, &retention, &s, &c))
            .ok()?;
        Some(RetentionTask {
            stop,
            counters,
            thread: Mutex::new(Some(thread)),
        })
    }
}

fn retention_loop<B: RunLog>(
    world: Weak<World<B>>,
    retention: &Retention,
    stop: &(Mutex<bool>, Condvar),
    counters: &Counters,
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
        // archived whatever happened. Failures are counted and the last one kept; a
        // development server sees a new kind of failure once on stderr, not every pass.
        match world.collect_finished(&StdFs, &params, &mut |_| {}) {
            Ok(report) => {
                counters
                    .collected
                    .fetch_add(report.collected.len() as u64, Ordering::AcqRel);
                counters
                    .swept
                    .fetch_add(report.swept.len() as u64, Ordering::AcqRel);
                for (run, e) in &report.failed {
                    counters.failed(
                        format!("run {run} {}", e.kind().name),
                        &format!("run {run}: {e}"),
                    );
                }
            }
            Err(e) => counters.failed(format!("pass {}", e.kind().name), &format!("pass: {e}")),
        }
        counters.passes.fetch_add(1, Ordering::AcqRel);
    }
}

/// Distinct failures remembered as written to stderr (then forgotten all at once).
const REPORTED_MAX: usize = 4096;

/// What the retention thread did, shared with its [`RetentionTask`].
#[derive(Debug, Default)]
struct Counters {
    passes: AtomicU64,
    collected: AtomicU64,
    swept: AtomicU64,
    failures: AtomicU64,
    last_error: Mutex<Option<String>>,
    /// What was written to stderr already: a run (or the pass) and the kind of its failure
    /// (the error table's row), so that a failure repeated at every pass, also with other
    /// numbers in its message, is written once.
    reported: Mutex<std::collections::HashSet<String>>,
}

impl Counters {
    /// Counts a failure and keeps its message; it goes to stderr the first time its `what`
    /// (the run or pass and the kind of failure) fails.
    fn failed(&self, what: String, message: &str) {
        self.failures.fetch_add(1, Ordering::AcqRel);
        *self.last_error.lock() = Some(message.to_owned());
        let mut reported = self.reported.lock();
        if reported.len() >= REPORTED_MAX {
            reported.clear();
        }
        if reported.insert(what) {
            use std::io::Write;
            let line =
                format!("runlog retention: {message} (tried again at each pass; written once)");
            let _ = writeln!(std::io::stderr().lock(), "{line}");
        }
    }
}
