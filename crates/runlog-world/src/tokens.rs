//! Hook tokens are unique among the live hooks of the whole store (`docs/WORLD.md` §1, §2).
//!
//! The claims live in a runlog run of their own, [`HOOK_TOKENS_RUN`] (a name no SDK run id
//! can take: those are `wrun_<ULID>`), as `claim {token, runId, hookId, atSeq}` and
//! `release {token, runId, hookId}` events, appended fenced, so claims are linearized
//! across threads and processes. The run logs stay the truth; a claim is only as good as
//! its hook:
//!
//! - A `hook_created` for hook H of run R with token T first appends `claim(T, R, H, N)`,
//!   where N is the seq of R it validated at, then appends `hook_created` to R fenced at N.
//!   If R moved meanwhile, the request is re-validated and the claim renewed with the new
//!   N. So the claim's `hook_created` can only ever sit at seq N + 1 of R.
//! - Whether a claim holds is read from R's log: **live** while H is an available hook of R
//!   (live, or retained past R's end until its `tokenRetentionUntil`, judged by
//!   [`crate::WorldConfig::clock`]);
//!   **pending** while H does not exist and R is still at seq N (its claimant may be about
//!   to append, or its append failed, or it was killed before appending); **dead** otherwise
//!   (H disposed, R ended with H not retained or its retention over, R moved past N without
//!   H, R gone). A live claim makes the next
//!   claimant's request a `hook_conflict`; a dead one is taken over (a `release` and its
//!   `claim` in one fenced batch).
//! - A pending claim's hook was never acknowledged, so it never blocks another run: the next
//!   claimant waits for it at most [`crate::WorldConfig::pending_claim_grace_ms`] from the
//!   claim (R moving in that time settles it either way), then *settles* it by appending
//!   H's `hook_conflict` (keyed `hook/H`, naming the new claimant) to R fenced at N. That
//!   append and the claimant's `hook_created` (fenced at the same N) exclude each other:
//!   either R already holds the hook (the fence fails, the claim is live, the request a
//!   `hook_conflict`), or R holds H's conflict and the claimant's append can never commit,
//!   whatever became of it (an I/O error, a full disk, a kill -9, a panic, a reply lost on
//!   the way: nothing to undo, and nothing a lost reply could hide). The claim is then dead
//!   and taken over. The claimant, retrying or still in flight, finds H used in R (409, as
//!   for any repeated `hook_created`) and replays H's outcome from R's log: the
//!   `hook_conflict`. A same hook's retry before anyone else asks renews the claim instead
//!   (its own claim).
//! - A claimant run whose log cannot be read to its end is judged by its readable part
//!   where that settles the claim, dead when its store says nothing follows seq N, and
//!   otherwise the claimant's request fails naming it ([`WorldError::Unreadable`]): whether
//!   its hook holds the token lies past the fault. A damaged run's store never says that
//!   (its last seq is `Corrupt`, not where the readable part ends): its hook may be in the
//!   damage, so its claim holds until the run is repaired.
//! - `hook_disposed` and a run's terminal event release their tokens after they commit
//!   (a hint that keeps the claims small: a missing release changes nothing, the claim is
//!   dead by the rule above).
//! - A lost, emptied or damaged claims log is rebuilt from the run logs (every live hook
//!   of every `wrun_` run), first thing on its next use; [`World::rebuild_hook_tokens`]
//!   rebuilds on demand (a `rebuilt` event resets the state, fenced, keeping pending
//!   claims). The one window the rebuild of a *lost* log cannot close: a claim whose
//!   `hook_created` is in flight at the moment the log is lost (it is not in any run log
//!   yet); its hook is created without a claim.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::MutexGuard;
use runlog::{EventRef, NewEvent, RunId, RunLog, Seq};
use serde::{Deserialize, Serialize};

use crate::error::WorldError;
use crate::fenced::Attempted;
use crate::ids::{now_ms, parse_run_id};
use crate::incremental::{Folded, LogFold};
use crate::model::StorageFault;
use crate::rules::{self, Checked};
use crate::world::World;

/// The runlog run holding the hook token claims.
pub const HOOK_TOKENS_RUN: &str = "_world-hook-tokens";

/// One claim: token `token` is held by hook `hook_id` of run `run_id`, whose
/// `hook_created` may only sit at seq `at_seq + 1` of that run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenClaim {
    /// The token.
    pub token: String,
    /// The run of the hook.
    pub run_id: String,
    /// The hook.
    pub hook_id: String,
    /// The seq of the run the claimant validated its `hook_created` at.
    pub at_seq: Seq,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Release {
    token: String,
    run_id: String,
    hook_id: String,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Rebuilt {
    runs_scanned: u64,
    live_hooks: u64,
    pending_claims_kept: u64,
}

/// What a rebuild of the claims found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RebuildReport {
    /// `wrun_` runs folded.
    pub runs_scanned: u64,
    /// Live hooks found (one claim each), hooks retained past their run's end until their
    /// `tokenRetentionUntil` included.
    pub live_hooks: u64,
    /// Claims still pending at the rebuild, kept.
    pub pending_claims_kept: u64,
    /// Tokens held by more than one live hook in the run logs (possible only in logs not
    /// written by a World, or after a lost claims log); the earliest-scanned holder keeps
    /// the claim.
    pub duplicate_tokens: Vec<String>,
    /// Runs whose logs could not be read to their end (damaged, unreadable), each with its
    /// fault: the live hooks of their readable parts were claimed, nothing past it is known.
    pub damaged_runs: Vec<StorageFault>,
}

/// The folded claims log.
#[derive(Default)]
pub(crate) struct Claims {
    by_token: HashMap<String, TokenClaim>,
    by_hook: HashMap<String, String>,
    /// When each token's current claim was appended (its event's `createdAt`, ms).
    claimed_at_ms: HashMap<String, u64>,
}

impl Claims {
    /// `c` as the token's claim, made at `at_ms`.
    fn insert(&mut self, c: TokenClaim, at_ms: u64) {
        if let Some(old) = self.by_token.get(&c.token)
            && self.by_hook.get(&old.hook_id) == Some(&c.token)
        {
            self.by_hook.remove(&old.hook_id);
        }
        self.by_hook.insert(c.hook_id.clone(), c.token.clone());
        self.claimed_at_ms.insert(c.token.clone(), at_ms);
        self.by_token.insert(c.token.clone(), c);
    }
}

impl LogFold for Claims {
    fn apply(&mut self, e: &EventRef<'_>) {
        match e.kind {
            "rebuilt" => {
                self.by_token.clear();
                self.by_hook.clear();
                self.claimed_at_ms.clear();
            }
            "claim" => {
                if let Ok(c) = serde_json::from_slice::<TokenClaim>(e.payload) {
                    self.insert(c, e.created_at_ms);
                }
            }
            "release" => {
                if let Ok(r) = serde_json::from_slice::<Release>(e.payload)
                    && self
                        .by_token
                        .get(&r.token)
                        .is_some_and(|c| c.run_id == r.run_id && c.hook_id == r.hook_id)
                {
                    self.by_token.remove(&r.token);
                    self.claimed_at_ms.remove(&r.token);
                    if self.by_hook.get(&r.hook_id) == Some(&r.token) {
                        self.by_hook.remove(&r.hook_id);
                    }
                }
            }
            _ => {}
        }
    }
}

/// The claim attempt's outcome.
pub(crate) enum ClaimOutcome {
    /// The token is ours (newly, or renewed).
    Claimed,
    /// A live or pending hook of `holder_run` holds it.
    Conflict { holder_run: String },
}

enum Liveness {
    Live,
    Pending,
    Dead,
}

pub(crate) fn tokens_run() -> RunId {
    RunId::new(HOOK_TOKENS_RUN).unwrap_or_else(|_| unreachable!())
}

fn record<T: Serialize>(kind: &str, body: &T) -> NewEvent {
    NewEvent::new(
        kind,
        Bytes::from(serde_json::to_vec(body).unwrap_or_default()),
    )
}

fn release_of(c: &TokenClaim) -> NewEvent {
    record(
        "release",
        &Release {
            token: c.token.clone(),
            run_id: c.run_id.clone(),
            hook_id: c.hook_id.clone(),
        },
    )
}

impl<B: RunLog> World<B> {
    /// Claims `token` for the hook of `req` (its `hook_created` validated at seq `base`).
    pub(crate) fn claim_token(
        &self,
        req: &Checked,
        token: &str,
        base: Seq,
    ) -> Result<ClaimOutcome, WorldError> {
        let run = tokens_run();
        let hook_id = req.corr.as_deref().unwrap_or_default();
        let mut claims = self.claims.lock();
        self.retry_fenced(HOOK_TOKENS_RUN, |_| {
            self.advance_claims(&mut claims)?;
            let mut batch = Vec::new();
            match claims.by_token.get(token).cloned() {
                Some(c)
                    if c.run_id == req.run.as_str() && c.hook_id == hook_id && c.at_seq == base =>
                {
                    return Ok(Attempted::Done(ClaimOutcome::Claimed));
                }
                // Our own earlier claim, made at another seq of the run: renewed below.
                Some(c) if c.run_id == req.run.as_str() && c.hook_id == hook_id => {}
                Some(c) => match self.liveness(&c)? {
                    Liveness::Live => {
                        let holder_run = c.run_id;
                        return Ok(Attempted::Done(ClaimOutcome::Conflict { holder_run }));
                    }
                    Liveness::Dead => batch.push(release_of(&c)),
                    Liveness::Pending => {
                        if !self.settle_after_grace(&mut claims, &c, req.run.as_str())? {
                            return Ok(Attempted::Again);
                        }
                        batch.push(release_of(&c));
                    }
                },
                None => {}
            }
            let mine = TokenClaim {
                token: token.to_string(),
                run_id: req.run.to_string(),
                hook_id: hook_id.to_string(),
                at_seq: base,
            };
            batch.push(record("claim", &mine));
            match self.backend.append_decisions(&run, claims.seq(), batch) {
                Ok(_) => {
                    self.advance_claims(&mut claims)?;
                    Ok(Attempted::Done(ClaimOutcome::Claimed))
                }
                Err(runlog::Error::Fenced { .. }) => Ok(Attempted::Fenced),
                Err(runlog::Error::RunNotFound { .. }) => {
                    *claims = Folded::default();
                    Ok(Attempted::Again)
                }
                Err(e) => Err(e.into()),
            }
        })
    }

    /// Pending claim `c`, met by `holder_run`'s request for its token: within its grace its
    /// claimant may be about to append, so the rest of the grace is waited out (other claims
    /// go on meanwhile) and `Ok(false)` says to look again; past it, the claim is settled
    /// ([`World::settle_pending`]; `Ok(true)`: settled, to be released).
    fn settle_after_grace(
        &self,
        claims: &mut MutexGuard<'_, Folded<Claims>>,
        c: &TokenClaim,
        holder_run: &str,
    ) -> Result<bool, WorldError> {
        let claimed_at_ms = claims.claimed_at_ms.get(&c.token).copied().unwrap_or(0);
        let age_ms = now_ms().saturating_sub(claimed_at_ms);
        let grace_ms = self.config.pending_claim_grace_ms;
        if age_ms < grace_ms {
            MutexGuard::unlocked(claims, || self.wait_for_claimant(c, grace_ms - age_ms));
            return Ok(false);
        }
        self.settle_pending(c, holder_run)
    }

    /// Waits up to `wait_ms` for the run of claim `c` to move past the claim's seq.
    fn wait_for_claimant(&self, c: &TokenClaim, wait_ms: u64) {
        let wait = Duration::from_millis(wait_ms);
        let moved = parse_run_id(&c.run_id)
            .ok()
            .map(|(run, _)| self.backend.wait(&run, c.at_seq, wait));
        if !matches!(moved, Some(Ok(_))) {
            // Nothing to wait on: let the grace pass all the same.
            std::thread::sleep(wait);
        }
    }

    /// Settles claim `c`, still pending after its grace, so that it can be taken over:
    /// appends its hook's `hook_conflict` (naming `holder_run`, the claimant taking the
    /// token over) to its run, fenced at the claim's seq, the seq its claimant's
    /// `hook_created` is fenced at. That append and the claimant's exclude each other, so
    /// once it commits the claimant's `hook_created` never can, and the claim is dead;
    /// should the claimant's commit first, the run has moved. `Ok(true)`: settled;
    /// `Ok(false)`: the run moved meanwhile (look again).
    ///
    /// # Errors
    /// The storage fault that keeps the claimant's run from being written (a run poisoned
    /// in this process, a full disk): the claim stands, and nothing was written.
    fn settle_pending(&self, c: &TokenClaim, holder_run: &str) -> Result<bool, WorldError> {
        let Ok((run, _)) = parse_run_id(&c.run_id) else {
            return Ok(false);
        };
        let conflict = rules::settling_conflict(&c.hook_id, &c.token, holder_run);
        match self
            .backend
            .append_decisions(&run, c.at_seq, vec![conflict])
        {
            Ok(_) => Ok(true),
            Err(
                runlog::Error::Fenced { .. }
                | runlog::Error::DuplicateDecision { .. }
                | runlog::Error::RunNotFound { .. },
            ) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Releases the claims of `(token, hook id)` pairs of `run_id` still pointing at them.
    /// A hint: any failure leaves claims that the liveness rule already treats as dead.
    pub(crate) fn release_tokens(&self, run_id: &str, releases: &[(String, String)]) {
        let run = tokens_run();
        let mut claims = self.claims.lock();
        // A hint: a spent budget leaves the claims as they are, like any other failure.
        let _ = self.retry_fenced(HOOK_TOKENS_RUN, |_| {
            if self.advance_claims(&mut claims).is_err() {
                return Ok(Attempted::Done(()));
            }
            let batch: Vec<NewEvent> = releases
                .iter()
                .filter_map(|(token, hook)| {
                    claims
                        .by_token
                        .get(token)
                        .filter(|c| c.run_id == run_id && &c.hook_id == hook)
                })
                .map(release_of)
                .collect();
            if batch.is_empty() {
                return Ok(Attempted::Done(()));
            }
            match self.backend.append_decisions(&run, claims.seq(), batch) {
                Ok(_) => {
                    let _ = self.advance_claims(&mut claims);
                    Ok(Attempted::Done(()))
                }
                Err(runlog::Error::Fenced { .. }) => Ok(Attempted::Fenced),
                Err(_) => Ok(Attempted::Done(())),
            }
        });
    }

    /// Whether claim `c` still holds, read from its run's log. A run whose log cannot be
    /// read to its end is judged by its readable part where that settles it: its hook live
    /// there (conservatively live), dead or ended there, or the claim's seq passed there
    /// without it. Otherwise the claim is dead when the run's last seq is the claim's (its
    /// `hook_created` never committed), and unknown when the run goes on past the fault or
    /// its last seq cannot be known (a damaged run's is `Corrupt`: the hook may be in the
    /// damage): [`WorldError::Unreadable`].
    fn liveness(&self, c: &TokenClaim) -> Result<Liveness, WorldError> {
        let Ok((run, _)) = parse_run_id(&c.run_id) else {
            return Ok(Liveness::Dead);
        };
        let entry = self.entry(&run);
        let (state, fault) = match self.load_readable(&entry, &run) {
            Ok(loaded) => loaded,
            Err(WorldError::RunNotFound { .. }) => return Ok(Liveness::Dead),
            Err(e) => return Err(e),
        };
        let ended = state.run().is_some_and(|r| r.status.is_terminal());
        let settled = match state.hook_slot(&c.hook_id) {
            Some(slot) if slot.available_at(self.now_ms()) => Some(Liveness::Live),
            Some(_) => Some(Liveness::Dead),
            None if ended || state.hook_used(&c.hook_id) => Some(Liveness::Dead),
            None if state.seq() > c.at_seq => Some(Liveness::Dead),
            None => None,
        };
        let Some(fault) = fault else {
            return Ok(settled.unwrap_or(if state.seq() == c.at_seq {
                Liveness::Pending
            } else {
                Liveness::Dead
            }));
        };
        if let Some(liveness) = settled {
            return Ok(liveness);
        }
        let readable = state.seq();
        drop(state);
        match self.backend.last_seq(&run) {
            Ok(last) if last <= c.at_seq => Ok(Liveness::Dead),
            _ => Err(WorldError::Unreadable {
                what: "hook token claim",
                runs: vec![StorageFault::new(&c.run_id, &fault, readable)],
            }),
        }
    }

    /// Brings `claims` to the claims log's last event; rebuilds a missing, empty or damaged
    /// log from the run logs first.
    ///
    /// On a read-only store (`runlog::Store::open_read_only`), which cannot rebuild the log,
    /// the claims are the live hooks of the run logs, folded in memory on each call (a
    /// writer may have created the log meanwhile).
    pub(crate) fn advance_claims(&self, claims: &mut Folded<Claims>) -> Result<(), WorldError> {
        for _ in 0..4 {
            let rebuilt = match self.read_claims(claims) {
                Ok(true) => return Ok(()),
                Ok(false) => self.recreate_claims(false),
                Err(WorldError::Storage(runlog::Error::Corrupt { .. })) => {
                    self.recreate_claims(true)
                }
                Err(e) => return Err(e),
            };
            *claims = Folded::default();
            match rebuilt {
                Err(WorldError::Storage(runlog::Error::ReadOnly { .. })) => {
                    let (found, _) = self.scan_live_hooks()?;
                    found.into_iter().for_each(|c| claims.fold.insert(c, 0));
                    return Ok(());
                }
                rebuilt => rebuilt?,
            };
        }
        Err(WorldError::Busy {
            run_id: HOOK_TOKENS_RUN.to_string(),
            attempts: 4,
        })
    }

    /// Reads the claims log's new events into `claims`; `Ok(false)` when the log is
    /// missing or empty. A log replaced since the last read is read from the start
    /// ([`Folded::advance`]); so are claims at seq 0 (a read-only store's, scanned from the
    /// run logs, which a log made since replaces).
    fn read_claims(&self, claims: &mut Folded<Claims>) -> Result<bool, WorldError> {
        if claims.seq() == 0 {
            *claims = Folded::default();
        }
        match claims.advance(&self.backend, &tokens_run(), 4096) {
            Ok(()) => Ok(claims.seq() > 0),
            Err(runlog::Error::RunNotFound { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Creates the claims log from the run logs (after deleting a damaged one). A
    /// concurrent rebuild by another process wins harmlessly (fenced at 0).
    fn recreate_claims(&self, delete: bool) -> Result<RebuildReport, WorldError> {
        let run = tokens_run();
        if delete {
            match self.backend.delete_run(&run) {
                Ok(()) | Err(runlog::Error::RunNotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        crate::logs::ensure_log(
            &self.backend,
            &run,
            br#"{"source":"world","kind":"hook-tokens"}"#,
        )?;
        let (found, report) = self.scan_live_hooks()?;
        let events = rebuilt_batch(&report, found);
        match self.backend.append_decisions(&run, 0, events) {
            Ok(_) | Err(runlog::Error::Fenced { .. }) => Ok(report),
            Err(e) => Err(e.into()),
        }
    }

    /// Every live hook of every `wrun_` run of the store, as claims; a run whose log cannot
    /// be read to its end contributes the live hooks of its readable part and is named in
    /// [`RebuildReport::damaged_runs`] with its fault, as is a run that cannot be opened.
    fn scan_live_hooks(&self) -> Result<(Vec<TokenClaim>, RebuildReport), WorldError> {
        let mut report = RebuildReport::default();
        let mut found: Vec<TokenClaim> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut after: Option<RunId> = None;
        let now_ms = self.now_ms();
        loop {
            let page = self.backend.list_runs(after.as_ref(), 1000)?;
            let ids = page.runs.iter().map(|i| &i.run);
            let mut ids: Vec<&RunId> = ids.chain(page.damaged.iter().map(|d| &d.run)).collect();
            ids.sort();
            for id in ids {
                let Ok((run, _)) = parse_run_id(id.as_str()) else {
                    continue;
                };
                report.runs_scanned += 1;
                let entry = self.entry(&run);
                let (state, fault) = match self.load_readable(&entry, &run) {
                    Ok(loaded) => loaded,
                    Err(WorldError::RunNotFound { .. }) => continue,
                    Err(WorldError::Storage(e)) => {
                        report
                            .damaged_runs
                            .push(StorageFault::new(run.as_str(), &e, 0));
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                if let Some(e) = fault {
                    let fault = StorageFault::new(run.as_str(), &e, state.seq());
                    report.damaged_runs.push(fault);
                }
                for (seq, hook) in state.available_hooks(now_ms) {
                    report.live_hooks += 1;
                    if index.contains_key(&hook.token) {
                        report.duplicate_tokens.push(hook.token.clone());
                        continue;
                    }
                    index.insert(hook.token.clone(), found.len());
                    found.push(TokenClaim {
                        token: hook.token.clone(),
                        run_id: run.to_string(),
                        hook_id: hook.hook_id.clone(),
                        at_seq: seq - 1,
                    });
                }
            }
            match (page.has_more, page.next) {
                (true, Some(next)) => after = Some(next),
                _ => return Ok((found, report)),
            }
        }
    }

    /// Rebuilds the hook token claims from the run logs now: a `rebuilt` event followed by
    /// one claim per live hook (and per claim still pending), appended fenced on the
    /// claims log, or a new claims log when it is missing or damaged.
    ///
    /// Needed only after runs with hooks were added to the store by other means than a
    /// World (an import): their hooks hold no claim until then. A lost, emptied or damaged
    /// log is rebuilt automatically on next use. The log itself is not compacted (it keeps
    /// every claim and release; a fold reads it from seq 1 once per process).
    ///
    /// # Errors
    /// Storage errors; [`WorldError::Busy`] when claims kept moving under the rebuild.
    pub fn rebuild_hook_tokens(&self) -> Result<RebuildReport, WorldError> {
        let run = tokens_run();
        let mut claims = self.claims.lock();
        self.retry_fenced(HOOK_TOKENS_RUN, |_| {
            match self.read_claims(&mut claims) {
                Ok(true) => {}
                Ok(false) => {
                    *claims = Folded::default();
                    return self.recreate_claims(false).map(Attempted::Done);
                }
                Err(WorldError::Storage(runlog::Error::Corrupt { .. })) => {
                    *claims = Folded::default();
                    return self.recreate_claims(true).map(Attempted::Done);
                }
                Err(e) => return Err(e),
            }
            let (mut found, mut report) = self.scan_live_hooks()?;
            for c in claims.by_token.values() {
                let taken = found.iter().any(|f| f.token == c.token);
                if !taken && matches!(self.liveness(c)?, Liveness::Pending) {
                    found.push(c.clone());
                    report.pending_claims_kept += 1;
                }
            }
            let events = rebuilt_batch(&report, found);
            match self.backend.append_decisions(&run, claims.seq(), events) {
                Ok(_) => {
                    self.read_claims(&mut claims)?;
                    Ok(Attempted::Done(report))
                }
                Err(runlog::Error::Fenced { .. }) => Ok(Attempted::Fenced),
                Err(e) => Err(e.into()),
            }
        })
    }

    /// The claim on `token`, if any (current as of the claims log's last event).
    pub(crate) fn claim_of_token(&self, token: &str) -> Result<Option<TokenClaim>, WorldError> {
        let mut claims = self.claims.lock();
        self.advance_claims(&mut claims)?;
        Ok(claims.by_token.get(token).cloned())
    }

    /// The claim of hook `hook_id`, if any.
    pub(crate) fn claim_of_hook(&self, hook_id: &str) -> Result<Option<TokenClaim>, WorldError> {
        let mut claims = self.claims.lock();
        self.advance_claims(&mut claims)?;
        let token = claims.by_hook.get(hook_id);
        Ok(token
            .and_then(|t| claims.by_token.get(t))
            .filter(|c| c.hook_id == hook_id)
            .cloned())
    }

    /// Every claim.
    pub(crate) fn all_claims(&self) -> Result<Vec<TokenClaim>, WorldError> {
        let mut claims = self.claims.lock();
        self.advance_claims(&mut claims)?;
        Ok(claims.by_token.values().cloned().collect())
    }
}

fn rebuilt_batch(report: &RebuildReport, claims: Vec<TokenClaim>) -> Vec<NewEvent> {
    let header = Rebuilt {
        runs_scanned: report.runs_scanned,
        live_hooks: report.live_hooks,
        pending_claims_kept: report.pending_claims_kept,
    };
    std::iter::once(record("rebuilt", &header))
        .chain(claims.iter().map(|c| record("claim", c)))
        .collect()
}
