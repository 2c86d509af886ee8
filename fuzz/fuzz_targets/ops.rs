//! Decoding a fuzz input into harness operations (shared by `crash_recovery` and `model`).

// Each target uses a subset of these.
#![allow(dead_code)]

use arbitrary::{Result, Unstructured};

use crate::harness::{Ev, KEYS, Op, PAYLOAD_LEN_MAX, RUNS};

/// One event: small key and id spaces so repeats happen; payloads up to a fill of a third
/// of an 8 KiB segment so segments roll.
pub fn ev(u: &mut Unstructured<'_>) -> Result<Ev> {
    Ok(Ev {
        key: if u.ratio(2, 5)? {
            Some(u.int_in_range(0..=KEYS - 1)?)
        } else {
            None
        },
        id: if u.ratio(1, 6)? {
            Some(u.int_in_range(0..=KEYS - 1)?)
        } else {
            None
        },
        corr: u.arbitrary()?,
        payload_len: if u.ratio(3, 4)? {
            u.int_in_range(0..=63)?
        } else {
            u.int_in_range(0..=PAYLOAD_LEN_MAX)?
        },
    })
}

fn evs(u: &mut Unstructured<'_>) -> Result<Vec<Ev>> {
    (0..u.int_in_range(1..=4)?).map(|_| ev(u)).collect()
}

/// One operation; `with_crash` allows `Op::Crash`.
pub fn op(u: &mut Unstructured<'_>, with_crash: bool) -> Result<Op> {
    let run = u.int_in_range(0..=RUNS - 1)?;
    Ok(match u.int_in_range(0..=15)? {
        0..=1 => Op::CreateRun(run),
        2 => Op::DeleteRun(run),
        3..=8 => Op::Facts(run, evs(u)?),
        9..=12 => Op::Decisions(run, u.ratio(1, 3)?, evs(u)?),
        13 => Op::Reopen,
        _ if with_crash => Op::Crash(u.arbitrary()?),
        _ => Op::Facts(run, evs(u)?),
    })
}

/// Up to `max` operations.
pub fn ops(u: &mut Unstructured<'_>, max: usize, with_crash: bool) -> Result<Vec<Op>> {
    let n = u.int_in_range(0..=max)?;
    (0..n).map(|_| op(u, with_crash)).collect()
}
