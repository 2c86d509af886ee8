//! The one shape of every asynchronous method: on the JavaScript thread, read and check the
//! arguments, then take the handle's lease (the store held open, counted by `close()`); on a
//! lane of the addon's own threads, run the work with both. Whatever fails before the work is
//! queued (a bad argument, a closed store, a panic) rejects the returned promise; nothing
//! throws synchronously.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use napi::Env;

use crate::errors::BindError;
use crate::js::{IntoJs, Raw, array, entry, rejected, spawn, spawn_each};
use crate::pool::Pool;

/// Checks the arguments (`args`, first: a bad one rejects with `INVALID_INPUT` even on a
/// closed store), takes the lease (`hold`), and returns a promise of `work` run on `lane`
/// with them; the lease is dropped when `work` returns.
pub(crate) fn call<L, A, T>(
    env: &Env,
    lane: &'static Pool,
    hold: impl FnOnce() -> Result<L, BindError>,
    args: impl FnOnce() -> Result<A, BindError>,
    work: impl FnOnce(&L, A) -> Result<T, BindError> + Send + 'static,
) -> napi::Result<Raw>
where
    L: Send + 'static,
    A: Send + 'static,
    T: IntoJs,
{
    entry(env, || {
        let args = args()?;
        let lease = hold()?;
        spawn(env, lane, move || work(&lease, args))
    })
}

/// [`call`] whose `work` settles up to `n` promises in turn, each as soon as it has its
/// result (`emit`); returns them as an array (`spawn_each`). Whatever fails before the work
/// is queued rejects the first, and the array holds that one alone.
pub(crate) fn call_each<L, A, T>(
    env: &Env,
    lane: &'static Pool,
    hold: impl FnOnce() -> Result<L, BindError>,
    args: impl FnOnce() -> Result<(A, usize), BindError>,
    work: impl FnOnce(&L, A, &mut dyn FnMut(Result<T, BindError>)) + Send + 'static,
) -> napi::Result<Raw>
where
    L: Send + 'static,
    A: Send + 'static,
    T: IntoJs,
{
    let started = catch_unwind(AssertUnwindSafe(|| {
        let (args, n) = args()?;
        let lease = hold()?;
        spawn_each(env, lane, n, move |emit| work(&lease, args, emit))
    }));
    let err = match started {
        Ok(Ok(promises)) => return Ok(promises),
        Ok(Err(e)) => e,
        Err(panic) => BindError::panicked(&*panic),
    };
    let one = rejected(env, &err)?;
    Ok(Raw::new(array(env, vec![one.to_unknown(env)?])?))
}

/// Largest wait timeout (`wait`, `streamsWait`): about 24.8 days (`setTimeout`'s limit).
pub(crate) const WAIT_TIMEOUT_MS_MAX: u64 = (1 << 31) - 1;
/// A wait sleeps in slices of at most this long, so that `close()` ends it promptly
/// (commits of this process wake it at once whatever the slice).
const WAIT_SLICE: Duration = Duration::from_millis(100);

/// The one wait loop: `step(slice)` waits at most `slice` and returns what it saw and
/// whether that ends the wait; repeated in slices of [`WAIT_SLICE`] until it does or
/// `deadline` passes (then the last answer), giving up with `CLOSED` as soon as `closed()`.
pub(crate) fn wait_sliced<T>(
    closed: impl Fn() -> bool,
    deadline: Instant,
    mut step: impl FnMut(Duration) -> Result<(T, bool), BindError>,
) -> Result<T, BindError> {
    loop {
        if closed() {
            return Err(BindError::closed());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let (seen, done) = step(left.min(WAIT_SLICE))?;
        if done || left <= WAIT_SLICE {
            return Ok(seen);
        }
    }
}
