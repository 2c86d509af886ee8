//! A backend that passes every [`RunLog`] call through to an inner one, except the appends
//! and the fenced delete, which it hands to an [`Interposer`] first: the fault-injection and racing backends of the
//! tests are an `Interposer` each, without a pass-through of the whole trait of their own.

use std::time::Duration;

use runlog::{
    Appended, EventRef, NewEvent, ReadPage, Result, RunId, RunInfo, RunLog, RunPage, Seq,
    VerifyReport,
};

/// An `append_decisions` call: its arguments, and [`Decisions::pass`] to make it on a backend.
pub struct Decisions<'a> {
    pub run: &'a RunId,
    pub expected: Seq,
    pub events: Vec<NewEvent>,
}

impl Decisions<'_> {
    pub fn pass(self, to: &dyn RunLog) -> Result<Vec<Seq>> {
        to.append_decisions(self.run, self.expected, self.events)
    }
}

/// An `append_facts` call: its arguments, and [`Facts::pass`] to make it on a backend.
pub struct Facts<'a> {
    pub run: &'a RunId,
    pub events: Vec<NewEvent>,
}

impl Facts<'_> {
    pub fn pass(self, to: &dyn RunLog) -> Result<Vec<Appended>> {
        to.append_facts(self.run, self.events)
    }
}

/// What happens to the appends of an [`Interposed`] backend. Each hook is given the inner
/// backend and the call, and its result is the call's: it may act before passing the call on
/// to `inner`, after it, or answer instead of it. A hook not written passes the call on.
pub trait Interposer: Send + Sync {
    fn append_decisions(&self, inner: &dyn RunLog, call: Decisions<'_>) -> Result<Vec<Seq>> {
        call.pass(inner)
    }

    fn append_facts(&self, inner: &dyn RunLog, call: Facts<'_>) -> Result<Vec<Appended>> {
        call.pass(inner)
    }

    fn delete_run_at(&self, inner: &dyn RunLog, run: &RunId, expected: Seq) -> Result<()> {
        inner.delete_run_at(run, expected)
    }
}

/// `inner` with its appends going through `hooks` (the test reaches its interposer's state
/// as `world.backend().hooks`).
pub struct Interposed<L, H> {
    pub inner: L,
    pub hooks: H,
}

impl<L: RunLog, H: Interposer> Interposed<L, H> {
    pub fn new(inner: L, hooks: H) -> Self {
        Self { inner, hooks }
    }
}

impl<L: RunLog, H: Interposer> RunLog for Interposed<L, H> {
    fn create_run(&self, run: &RunId, meta: &[u8]) -> Result<()> {
        self.inner.create_run(run, meta)
    }
    fn append_facts(&self, run: &RunId, events: Vec<NewEvent>) -> Result<Vec<Appended>> {
        self.hooks.append_facts(&self.inner, Facts { run, events })
    }
    fn append_decisions(
        &self,
        run: &RunId,
        expected: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<Seq>> {
        let call = Decisions {
            run,
            expected,
            events,
        };
        self.hooks.append_decisions(&self.inner, call)
    }
    fn read(&self, run: &RunId, after: Seq, limit: usize) -> Result<ReadPage> {
        self.inner.read(run, after, limit)
    }
    fn read_each(
        &self,
        run: &RunId,
        after: Seq,
        limit: usize,
        f: &mut dyn FnMut(EventRef<'_>),
    ) -> Result<(Seq, bool)> {
        self.inner.read_each(run, after, limit, f)
    }
    fn last_seq(&self, run: &RunId) -> Result<Seq> {
        self.inner.last_seq(run)
    }
    fn wait(&self, run: &RunId, after: Seq, timeout: Duration) -> Result<Seq> {
        self.inner.wait(run, after, timeout)
    }
    fn run_info(&self, run: &RunId) -> Result<RunInfo> {
        self.inner.run_info(run)
    }
    fn run_meta(&self, run: &RunId) -> Result<Vec<u8>> {
        self.inner.run_meta(run)
    }
    fn list_runs(&self, after: Option<&RunId>, limit: usize) -> Result<RunPage> {
        self.inner.list_runs(after, limit)
    }
    fn delete_run(&self, run: &RunId) -> Result<()> {
        self.inner.delete_run(run)
    }
    fn delete_run_at(&self, run: &RunId, expected_last_seq: Seq) -> Result<()> {
        self.hooks
            .delete_run_at(&self.inner, run, expected_last_seq)
    }
    fn verify_run(&self, run: &RunId) -> Result<VerifyReport> {
        self.inner.verify_run(run)
    }
    fn lock_collector(&self) -> Result<runlog::CollectorLock> {
        self.inner.lock_collector()
    }
}
