//! The crate's one fenced retry loop. A write here is decided against a log as it reads it
//! at seq N and appended fenced at N; a lost fence (the log moved) means the decision is
//! discarded, the log read again and the write decided again. [`retry`] is that loop, once,
//! for both users: the World (`world/fenced.rs`: its budget, the core's backoff, `Busy`) and
//! [`crate::streams`] (a chunk write: [`crate::streams::WRITE_ATTEMPTS_MAX`] attempts, no
//! backoff, `Contended`). Each gives it one attempt as a closure and answers a spent budget
//! with its own error.

use runlog::replay::{self, ReplayConfig};

/// Attempts that follow a lost fence at once, before any backoff: a writer that lost to one
/// other usually wins its next attempt, so the common race never sleeps.
pub(crate) const IMMEDIATE_RETRIES: u32 = 4;

/// One attempt of a fenced retry: its number (from 1) and whether it is the last.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Attempt {
    pub(crate) number: u32,
    max: u32,
}

impl Attempt {
    /// Whether no attempt follows this one: a re-mint is pointless, its error stands.
    pub(crate) fn is_last(self) -> bool {
        self.number >= self.max
    }
}

/// What one attempt came to.
pub(crate) enum Attempted<T> {
    /// The answer; the retry ends with it.
    Done(T),
    /// The fence was lost (the log moved): read again and decide again, after the backoff.
    Fenced,
    /// Decide again at once, without backoff: a minted id was minted afresh, or a pending
    /// claim was waited for. Counts against the budget all the same.
    Again,
}

/// Runs `attempt` until it is [`Attempted::Done`], at most `attempts_max` times. After a
/// lost fence that is not the last attempt it sleeps the core's backoff
/// ([`runlog::replay::thread_backoff`] with `backoff`) once the first [`IMMEDIATE_RETRIES`]
/// are spent; with no `backoff` every attempt follows at once.
///
/// `Ok(None)` when no attempt was done: the caller answers the spent budget.
///
/// # Errors
/// The first error of `attempt`, at once.
pub(crate) fn retry<T, E>(
    attempts_max: u32,
    backoff: Option<&ReplayConfig>,
    mut attempt: impl FnMut(Attempt) -> Result<Attempted<T>, E>,
) -> Result<Option<T>, E> {
    for number in 1..=attempts_max {
        match attempt(Attempt {
            number,
            max: attempts_max,
        })? {
            Attempted::Done(answer) => return Ok(Some(answer)),
            Attempted::Fenced if number < attempts_max => pause(backoff, number),
            Attempted::Fenced | Attempted::Again => {}
        }
    }
    Ok(None)
}

/// Sleeps after lost fence number `number`, so that writers racing for one log spread out:
/// nothing for the first [`IMMEDIATE_RETRIES`] (or ever, with no `backoff`), then the core's.
fn pause(backoff: Option<&ReplayConfig>, number: u32) {
    if let Some(config) = backoff
        && number > IMMEDIATE_RETRIES
    {
        std::thread::sleep(replay::thread_backoff(config, number - IMMEDIATE_RETRIES));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn without_a_backoff_every_attempt_follows_at_once_until_the_budget_is_spent() {
        let mut seen = Vec::new();
        let started = Instant::now();
        let spent = retry(1000, None, |a| {
            seen.push(a.number);
            Ok::<Attempted<()>, ()>(Attempted::Fenced)
        });
        assert_eq!(spent, Ok(None));
        assert_eq!(seen, (1..=1000).collect::<Vec<_>>());
        // 996 backoffs of the World's policy would sleep ~4 s in all; here none is taken.
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn an_answer_or_an_error_ends_the_retry() {
        let done = retry(5, None, |a| {
            Ok::<_, ()>(if a.number < 3 {
                Attempted::Again
            } else {
                Attempted::Done(a.number)
            })
        });
        assert_eq!(done, Ok(Some(3)));
        let mut calls = 0;
        let failed = retry(5, None, |_| -> Result<Attempted<()>, &str> {
            calls += 1;
            Err("bad")
        });
        assert_eq!((failed, calls), (Err("bad"), 1));
    }
}
