//! The addon's own worker threads: every store call runs here, never on the JavaScript thread
//! and never on libuv's thread pool (4 threads by default, shared with `fs`, `dns` and
//! `crypto`). Group commit needs many appends blocked in the store at once: with libuv's
//! pool at most four would be, and a slow `fdatasync` would stall every `fs` call of the
//! process.
//!
//! Two lanes, each a bounded pool that grows on demand and shrinks when idle:
//! - `io`: every call but `wait` (default at most 32 threads, `RUNLOG_NODE_THREADS`);
//! - `wait`: calls that block on others — `wait` (until a commit or its timeout) and
//!   `close` (until the calls before it settle) — (default at most 256,
//!   `RUNLOG_NODE_WAIT_THREADS`), so that they can never starve the `io` jobs they wait
//!   for.
//!
//! A job queued beyond the bound waits for a free thread. A job is a closure that always
//! runs exactly once: with `Ok(())` on a worker, or with an error when no thread could be
//! started at all, so that its promise is settled either way.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::LazyLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::errors::BindError;

/// A unit of work; called once, with `Err` only when the pool could not run it.
pub(crate) type Job = Box<dyn FnOnce(Result<(), BindError>) + Send>;

/// Threads of a lane exit after this long without work.
const IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// Upper bound of either lane's thread limit, whatever the environment says.
const THREADS_LIMIT: usize = 1024;

/// The `io` lane.
pub(crate) static IO: LazyLock<Pool> =
    LazyLock::new(|| Pool::new("runlog-io", threads_from_env("RUNLOG_NODE_THREADS", 32)));
/// The `wait` lane.
pub(crate) static WAIT: LazyLock<Pool> = LazyLock::new(|| {
    Pool::new(
        "runlog-wait",
        threads_from_env("RUNLOG_NODE_WAIT_THREADS", 256),
    )
});

/// The thread limit named by `var` (1..=1024), else `default`.
fn threads_from_env(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| (1..=THREADS_LIMIT).contains(n))
        .unwrap_or(default)
}

/// A bounded, growing pool of named threads with a FIFO queue.
pub(crate) struct Pool {
    name: &'static str,
    threads_max: usize,
    state: Mutex<State>,
    work: Condvar,
    /// The queue's length, for the spinning threads to poll without the lock.
    queued: AtomicUsize,
}

/// How long a thread that ran a job polls for the next one (yielding the CPU between polls)
/// before it waits on the condvar, when no other thread of the lane polls: a sequential
/// caller's next call usually comes within this and finds a thread awake, which saves the
/// futex wake-up of a sleeping one (on this 2-vCPU machine ~50–90 µs per World
/// `events.create`, `docs/NODE.md`).
const SPIN: Duration = Duration::from_micros(200);

#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    threads: usize,
    idle: usize,
    /// Threads between jobs that poll for the next one before they wait (`SPIN`).
    spinning: usize,
    threads_started: u64,
    jobs_queued: u64,
    jobs_run: u64,
}

/// Counters of a lane, for diagnostics and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PoolStats {
    pub threads: usize,
    pub idle: usize,
    pub queued: usize,
    pub threads_max: usize,
    pub threads_started: u64,
    /// Jobs handed to the lane (counted when queued, on the caller's thread).
    pub jobs_queued: u64,
    /// Jobs that ran to their end (counted after the job settled its promise).
    pub jobs_run: u64,
}

impl Pool {
    pub(crate) fn new(name: &'static str, threads_max: usize) -> Pool {
        Pool {
            name,
            threads_max,
            state: Mutex::new(State::default()),
            work: Condvar::new(),
            queued: AtomicUsize::new(0),
        }
    }

    /// Queues `job`; starts a thread when the queue holds more jobs than idle threads wait
    /// for and the lane is below its limit.
    pub(crate) fn execute(&'static self, job: Job) {
        let mut st = self.state.lock();
        st.queue.push_back(job);
        st.jobs_queued += 1;
        self.queued.store(st.queue.len(), Ordering::Release);
        if st.queue.len() <= st.spinning {
            return;
        }
        if st.queue.len() <= st.idle + st.spinning {
            self.work.notify_one();
            return;
        }
        if st.threads >= self.threads_max {
            return;
        }
        let index = st.threads_started;
        let spawned = std::thread::Builder::new()
            .name(format!("{}-{index}", self.name))
            .spawn(move || self.worker());
        match spawned {
            Ok(_) => {
                st.threads += 1;
                st.threads_started += 1;
            }
            // With a thread alive the job is served later; with none, nobody would serve it.
            Err(e) if st.threads == 0 => {
                let jobs: Vec<Job> = st.queue.drain(..).collect();
                drop(st);
                let err = BindError::thread_spawn(self.name, &e);
                for job in jobs {
                    let _ = catch_unwind(AssertUnwindSafe(|| job(Err(err.clone()))));
                }
            }
            Err(_) => {}
        }
    }

    fn worker(&'static self) {
        let mut st = self.state.lock();
        loop {
            if let Some(job) = st.queue.pop_front() {
                self.queued.store(st.queue.len(), Ordering::Release);
                drop(st);
                // A job settles its own promise, panics included; this keeps the thread (and
                // the lane's count) alive should settling itself panic.
                let _ = catch_unwind(AssertUnwindSafe(|| job(Ok(()))));
                st = self.state.lock();
                st.jobs_run += 1;
                // One thread per lane at most polls: a burst's threads do not all spin.
                if st.queue.is_empty() && st.spinning == 0 {
                    st.spinning += 1;
                    drop(st);
                    let until = Instant::now() + SPIN;
                    while self.queued.load(Ordering::Acquire) == 0 && Instant::now() < until {
                        std::thread::yield_now();
                    }
                    st = self.state.lock();
                    st.spinning -= 1;
                }
                continue;
            }
            st.idle += 1;
            let timed_out = self.work.wait_for(&mut st, IDLE_TIMEOUT).timed_out();
            st.idle -= 1;
            if timed_out && st.queue.is_empty() {
                st.threads -= 1;
                return;
            }
        }
    }

    pub(crate) fn stats(&self) -> PoolStats {
        let st = self.state.lock();
        PoolStats {
            threads: st.threads,
            idle: st.idle,
            queued: st.queue.len(),
            threads_max: self.threads_max,
            threads_started: st.threads_started,
            jobs_queued: st.jobs_queued,
            jobs_run: st.jobs_run,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;

    use super::*;

    fn leaked(name: &'static str, max: usize) -> &'static Pool {
        Box::leak(Box::new(Pool::new(name, max)))
    }

    #[test]
    fn every_job_runs_once_and_threads_stay_within_the_limit() {
        let pool = leaked("t-bound", 3);
        let (tx, rx) = mpsc::channel();
        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        for i in 0..40 {
            let (tx, running, peak) = (tx.clone(), running.clone(), peak.clone());
            pool.execute(Box::new(move |ok| {
                assert!(ok.is_ok());
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(2));
                running.fetch_sub(1, Ordering::SeqCst);
                tx.send(i).unwrap();
            }));
        }
        let mut got: Vec<i32> = (0..40).map(|_| rx.recv().unwrap()).collect();
        got.sort_unstable();
        assert_eq!(got, (0..40).collect::<Vec<_>>());
        assert!(peak.load(Ordering::SeqCst) <= 3);
        let stats = pool.stats();
        assert!(stats.threads <= 3 && stats.threads_started <= 3);
        assert_eq!(stats.threads_max, 3);
        assert_eq!(stats.jobs_queued, 40);
    }

    #[test]
    fn blocked_jobs_get_their_own_threads_up_to_the_limit() {
        // 8 jobs that each wait for all 8 to have started: only possible on 8 threads.
        let pool = leaked("t-grow", 8);
        let barrier = Arc::new(std::sync::Barrier::new(8));
        let (tx, rx) = mpsc::channel();
        for _ in 0..8 {
            let (barrier, tx) = (barrier.clone(), tx.clone());
            pool.execute(Box::new(move |_| {
                barrier.wait();
                tx.send(std::thread::current().name().map(str::to_owned))
                    .unwrap();
            }));
        }
        let names: Vec<_> = (0..8)
            .map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap().unwrap())
            .collect();
        assert!(names.iter().all(|n| n.starts_with("t-grow-")));
        assert_eq!(pool.stats().threads_started, 8);
    }

    #[test]
    fn a_panicking_job_leaves_the_worker_alive() {
        let pool = leaked("t-panic", 1);
        pool.execute(Box::new(|_| panic!("job panics")));
        let (tx, rx) = mpsc::channel();
        pool.execute(Box::new(move |_| tx.send(7).unwrap()));
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), 7);
        assert_eq!(pool.stats().threads_started, 1);
    }

    #[test]
    fn thread_limit_from_env_is_bounded() {
        assert_eq!(threads_from_env("RUNLOG_NODE_TEST_UNSET_VAR", 5), 5);
    }
}
