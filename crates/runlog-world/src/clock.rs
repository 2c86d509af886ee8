//! The wall clock the World's time-bound rules are judged by: a step's `retryAfter`, the
//! end of a retained hook's `tokenRetentionUntil`. Event times (`createdAt`) are stamped
//! from the system clock whatever this says; [`Clock::from_fn`] is the seam that lets a
//! test (or an embedder with its own time source) move the rules' time without sleeping.

use std::fmt;
use std::sync::Arc;

/// A source of "now" in milliseconds since the Unix epoch.
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> u64 + Send + Sync>);

impl Clock {
    /// The system's wall clock.
    pub fn system() -> Clock {
        Clock(Arc::new(crate::ids::now_ms))
    }

    /// A clock that reads `now` (ms since the epoch) on every call.
    pub fn from_fn(now: impl Fn() -> u64 + Send + Sync + 'static) -> Clock {
        Clock(Arc::new(now))
    }

    /// Now, in ms since the epoch.
    pub fn now_ms(&self) -> u64 {
        (self.0)()
    }
}

impl Default for Clock {
    fn default() -> Clock {
        Clock::system()
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Clock({})", self.now_ms())
    }
}
