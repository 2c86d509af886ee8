//! Fuzz target `crash_recovery` (issue 4 §3): an arbitrary workload (creates, deletes,
//! keyed facts, fenced and stale decisions, reopens, crashes) over the simulated file
//! system, a power loss at a fuzzed op, then a crash with a fuzzed seed, checked with every
//! check of issue 4 §2 (see `tests/crash_sim/harness.rs`).

#![no_main]

#[path = "../../tests/crash_sim/harness.rs"]
mod harness;
mod ops;

use arbitrary::{Result, Unstructured};
use harness::Harness;
use libfuzzer_sys::fuzz_target;
use runlog::io::sim::{CrashPolicy, Fault, FaultKind, Trigger};

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});

fn run(u: &mut Unstructured<'_>) -> Result<()> {
    let seed: u64 = u.arbitrary()?;
    let fault = fault(u)?;
    let tolerate = fault.is_some_and(|f| f.kind != FaultKind::PowerLoss);
    let ops = ops::ops(u, 24, true)?;
    let mut h = Harness::start(seed, fault);
    h.tolerate_errors = tolerate;
    h.apply_all(&ops);
    let policy = match u.int_in_range(0..=5)? {
        0 => CrashPolicy::DropUnsynced,
        1 => CrashPolicy::KeepUnsynced,
        _ => CrashPolicy::Random(seed),
    };
    h.crash_and_check(policy);
    Ok(())
}

/// Mostly a power loss at an op or sync point; sometimes EIO / ENOSPC (once or sticky).
fn fault(u: &mut Unstructured<'_>) -> Result<Option<Fault>> {
    let at = if u.arbitrary()? {
        Trigger::Op(u.int_in_range(0..=300)?)
    } else {
        Trigger::Sync(u.int_in_range(0..=120)?)
    };
    Ok(match u.int_in_range(0..=7)? {
        0 => None,
        1 => Some(Fault::once(at, FaultKind::Eio)),
        2 => Some(Fault {
            at,
            kind: FaultKind::Enospc,
            sticky: u.arbitrary()?,
        }),
        _ => Some(Fault::power_loss(at)),
    })
}
