//! Workflow-level anomalies in a run's log: a pure function over the events, no I/O.
//!
//! These are facts about what the *writers* of a log did (the workflow engine and the store
//! it ran on), not about runlog's storage: a log can be perfectly intact (every checksum and
//! seq verified, see `Store::verify_run`) and still hold thirteen `run_completed` events.
//!
//! | class | meaning | `seqs` |
//! |---|---|---|
//! | `multiple_terminal` | a terminal event (`run_completed`/`run_failed`/`run_cancelled`) after the first one | first terminal, this one |
//! | `event_after_terminal` | a non-terminal event after the first terminal event | first terminal, this one |
//! | `duplicate_creation` | a second `step_created`/`hook_created`/`wait_created` for one correlation id | first creation, this one |
//! | `creation_later` | a step/hook/wait event that precedes its entity's creation event | this one, the creation |
//! | `creation_missing` | a step/hook/wait event whose entity is never created (or that has no correlation id) | this one |
//! | `run_created_not_first` | a `run_created` at a seq other than 1, or none in a non-empty log | each misplaced `run_created` (empty when there is none) |
//! | `missing_slots` | the import found slot numbers missing in the source run (recorded in its stamp, see [`crate::import`]) | the first event after each gap |
//!
//! Entity events are recognized by kind prefix: `step_*` belongs to `step_created`,
//! `hook_*` to `hook_created`, `wait_*` to `wait_created`, matched by correlation id.

use std::collections::HashMap;
use std::fmt;

use runlog::{Event, RunId, Seq};

use crate::import::{OrderScheme, RunStamp};

/// Kinds that end a run.
pub const TERMINAL_KINDS: [&str; 3] = ["run_completed", "run_failed", "run_cancelled"];

/// The kind that starts a run.
pub const RUN_CREATED: &str = "run_created";

/// One class of workflow anomaly (see the module docs for the table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AnomalyClass {
    /// A terminal event after the first terminal event.
    MultipleTerminal,
    /// A non-terminal event after the first terminal event.
    EventAfterTerminal,
    /// A second creation event for one step, hook or wait.
    DuplicateCreation,
    /// An entity event before its entity's creation event.
    CreationLater,
    /// An entity event whose entity is never created.
    CreationMissing,
    /// `run_created` not at seq 1 (or absent).
    RunCreatedNotFirst,
    /// The source run of an import lacked slot numbers (its events skip a slot).
    MissingSlots,
}

impl AnomalyClass {
    /// The stable snake_case name printed by `runlog audit`.
    pub fn name(self) -> &'static str {
        match self {
            AnomalyClass::MultipleTerminal => "multiple_terminal",
            AnomalyClass::EventAfterTerminal => "event_after_terminal",
            AnomalyClass::DuplicateCreation => "duplicate_creation",
            AnomalyClass::CreationLater => "creation_later",
            AnomalyClass::CreationMissing => "creation_missing",
            AnomalyClass::RunCreatedNotFirst => "run_created_not_first",
            AnomalyClass::MissingSlots => "missing_slots",
        }
    }
}

impl fmt::Display for AnomalyClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One anomaly found in one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The run.
    pub run: RunId,
    /// What kind of anomaly.
    pub class: AnomalyClass,
    /// The seqs involved, in the order given by the class table in the module docs.
    pub seqs: Vec<Seq>,
    /// A one-line human explanation naming the kinds and correlation id involved.
    pub detail: String,
}

/// Whether `kind` ends a run.
pub fn is_terminal(kind: &str) -> bool {
    TERMINAL_KINDS.contains(&kind)
}

/// The creation kind an entity event belongs to (`step_started` → `step_created`), or `None`
/// for events that are not about a step, hook or wait.
pub fn creation_kind_of(kind: &str) -> Option<&'static str> {
    match kind.split_once('_')?.0 {
        "step" => Some("step_created"),
        "hook" => Some("hook_created"),
        "wait" => Some("wait_created"),
        _ => None,
    }
}

/// A run's status as derived from its log (not from any materialized run record).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunStatus {
    /// No `run_started` and no terminal event yet.
    Pending,
    /// `run_started` seen, no terminal event.
    Running,
    /// The first terminal event is `run_completed`.
    Completed,
    /// The first terminal event is `run_failed`.
    Failed,
    /// The first terminal event is `run_cancelled`.
    Cancelled,
}

impl RunStatus {
    /// Lower-case name: `pending`, `running`, `completed`, `failed`, `cancelled`.
    pub fn name(self) -> &'static str {
        match self {
            RunStatus::Pending => "pending",
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }

    /// The status after one more event of `kind`; the first terminal event decides for good.
    pub fn after(self, kind: &str) -> RunStatus {
        match (self, kind) {
            (RunStatus::Pending | RunStatus::Running, "run_completed") => RunStatus::Completed,
            (RunStatus::Pending | RunStatus::Running, "run_failed") => RunStatus::Failed,
            (RunStatus::Pending | RunStatus::Running, "run_cancelled") => RunStatus::Cancelled,
            (RunStatus::Pending, "run_started") => RunStatus::Running,
            (status, _) => status,
        }
    }

    /// The status of a log with these event kinds, in seq order.
    pub fn of<'a>(kinds: impl IntoIterator<Item = &'a str>) -> RunStatus {
        kinds.into_iter().fold(RunStatus::Pending, RunStatus::after)
    }
}

/// Audits one run's events, given in seq order (as read from the store). Findings come out
/// ordered by the seq of the offending event, then by class.
pub fn audit_run(run: &RunId, events: &[Event]) -> Vec<Finding> {
    let mut found: Vec<(Seq, AnomalyClass, Vec<Seq>, String)> = Vec::new();
    check_run_created(events, &mut found);
    check_terminals(events, &mut found);
    check_entities(events, &mut found);
    found.sort_by_key(|a| (a.0, a.1));
    found
        .into_iter()
        .map(|(_, class, seqs, detail)| Finding {
            run: run.clone(),
            class,
            seqs,
            detail,
        })
        .collect()
}

/// [`audit_run`], plus the holes that the import of `run` recorded in its `stamp`: a
/// `missing_slots` finding, first, whose seqs are the first event after each listed gap.
pub fn audit_imported_run(run: &RunId, stamp: Option<&RunStamp>, events: &[Event]) -> Vec<Finding> {
    let mut found: Vec<Finding> = stamp
        .and_then(|s| missing_slots_finding(run, s, events))
        .into_iter()
        .collect();
    found.extend(audit_run(run, events));
    found
}

fn missing_slots_finding(run: &RunId, stamp: &RunStamp, events: &[Event]) -> Option<Finding> {
    if stamp.order != OrderScheme::Slot || stamp.missing_slot_count == 0 {
        return None;
    }
    // An imported slot event's id is the ULID whose value is its slot number.
    let mut seqs: Vec<Seq> = Vec::new();
    for missing in &stamp.missing_slots {
        let after = events
            .iter()
            .find(|e| e.event_id.0 > *missing)
            .map(|e| e.seq);
        if let Some(seq) = after.filter(|s| seqs.last() != Some(s)) {
            seqs.push(seq);
        }
    }
    let listed: Vec<String> = stamp.missing_slots.iter().map(u128::to_string).collect();
    let more = if stamp.missing_slot_count > stamp.missing_slots.len() as u128 {
        ", …"
    } else {
        ""
    };
    let detail = format!(
        "the source run lacked {} slot(s): {}{more}; imported with dense seqs, so every event \
         after a gap has a seq below its slot",
        stamp.missing_slot_count,
        listed.join(","),
    );
    Some(Finding {
        run: run.clone(),
        class: AnomalyClass::MissingSlots,
        seqs,
        detail,
    })
}

type Found = Vec<(Seq, AnomalyClass, Vec<Seq>, String)>;

fn check_run_created(events: &[Event], found: &mut Found) {
    let class = AnomalyClass::RunCreatedNotFirst;
    let mut any = false;
    for e in events.iter().filter(|e| e.kind == RUN_CREATED) {
        any = true;
        if e.seq != 1 {
            let detail = format!("run_created at seq {} (must be seq 1)", e.seq);
            found.push((e.seq, class, vec![e.seq], detail));
        }
    }
    if !any && let Some(first) = events.first() {
        let detail = format!("no run_created in the log (seq 1 is {})", first.kind);
        found.push((first.seq, class, Vec::new(), detail));
    }
}

fn check_terminals(events: &[Event], found: &mut Found) {
    let Some(first) = events.iter().find(|e| is_terminal(&e.kind)) else {
        return;
    };
    for e in events.iter().filter(|e| e.seq > first.seq) {
        let (class, what) = if is_terminal(&e.kind) {
            (AnomalyClass::MultipleTerminal, "another terminal event")
        } else {
            (AnomalyClass::EventAfterTerminal, "an event")
        };
        let detail = format!(
            "{} at seq {} is {what} after {} at seq {}",
            e.kind, e.seq, first.kind, first.seq
        );
        found.push((e.seq, class, vec![first.seq, e.seq], detail));
    }
}

fn check_entities(events: &[Event], found: &mut Found) {
    let mut created: HashMap<(&str, &str), Seq> = HashMap::new();
    for e in events {
        let (Some(creation), Some(corr)) = (creation_kind_of(&e.kind), e.correlation_id.as_deref())
        else {
            continue;
        };
        if e.kind != creation {
            continue;
        }
        match created.get(&(creation, corr)) {
            Some(&first) => {
                let detail = format!("{} for {corr} at seq {} repeats seq {first}", e.kind, e.seq);
                found.push((
                    e.seq,
                    AnomalyClass::DuplicateCreation,
                    vec![first, e.seq],
                    detail,
                ));
            }
            None => {
                created.insert((creation, corr), e.seq);
            }
        }
    }
    for e in events {
        let Some(creation) = creation_kind_of(&e.kind).filter(|c| **c != *e.kind) else {
            continue;
        };
        let corr = e.correlation_id.as_deref();
        match corr.and_then(|c| created.get(&(creation, c))) {
            Some(&at) if at > e.seq => {
                let detail = format!(
                    "{} for {} at seq {} precedes its {creation} at seq {at}",
                    e.kind,
                    corr.unwrap_or_default(),
                    e.seq
                );
                found.push((e.seq, AnomalyClass::CreationLater, vec![e.seq, at], detail));
            }
            Some(_) => {}
            None => {
                let detail = match corr {
                    Some(c) => format!("{} for {c} at seq {} has no {creation}", e.kind, e.seq),
                    None => format!("{} at seq {} has no correlation id", e.kind, e.seq),
                };
                found.push((e.seq, AnomalyClass::CreationMissing, vec![e.seq], detail));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use ulid::Ulid;

    fn log(kinds: &[(&str, Option<&str>)]) -> Vec<Event> {
        kinds
            .iter()
            .zip(1..)
            .map(|(&(kind, corr), seq)| Event {
                seq,
                event_id: Ulid(u128::from(seq)),
                created_at_ms: seq,
                kind: kind.into(),
                correlation_id: corr.map(Into::into),
                key: None,
                payload: Bytes::new(),
            })
            .collect()
    }

    fn classes(events: &[Event]) -> Vec<(AnomalyClass, Vec<Seq>)> {
        let run = RunId::new("wrun_t").expect("valid");
        audit_run(&run, events)
            .into_iter()
            .map(|f| (f.class, f.seqs))
            .collect()
    }

    #[test]
    fn missing_run_created_is_reported_without_seqs() {
        let events = log(&[("run_started", None)]);
        assert_eq!(
            classes(&events),
            vec![(AnomalyClass::RunCreatedNotFirst, vec![])]
        );
        assert_eq!(classes(&[]), vec![]);
    }

    #[test]
    fn clean_log_has_no_findings() {
        let events = log(&[
            ("run_created", None),
            ("run_started", None),
            ("step_created", Some("s1")),
            ("step_started", Some("s1")),
            ("step_completed", Some("s1")),
            ("hook_created", Some("h1")),
            ("hook_received", Some("h1")),
            ("wait_created", Some("w1")),
            ("wait_completed", Some("w1")),
            ("run_completed", None),
        ]);
        assert_eq!(classes(&events), vec![]);
    }

    #[test]
    fn every_class_is_found_with_its_seqs() {
        use AnomalyClass::*;
        let events = log(&[
            ("run_started", None),
            ("step_started", Some("s1")),
            ("step_created", Some("s1")),
            ("step_created", Some("s1")),
            ("hook_disposed", Some("h9")),
            ("wait_completed", None),
            ("run_created", None),
            ("run_completed", None),
            ("step_completed", Some("s1")),
            ("run_failed", None),
        ]);
        assert_eq!(
            classes(&events),
            vec![
                (CreationLater, vec![2, 3]),
                (DuplicateCreation, vec![3, 4]),
                (CreationMissing, vec![5]),
                (CreationMissing, vec![6]),
                (RunCreatedNotFirst, vec![7]),
                (EventAfterTerminal, vec![8, 9]),
                (MultipleTerminal, vec![8, 10]),
            ]
        );
    }

    #[test]
    fn recorded_holes_become_one_missing_slots_finding() {
        let run = RunId::new("wrun_t").expect("valid");
        let mut events = log(&[
            ("run_created", None),
            ("run_started", None),
            ("step_created", Some("s")),
        ]);
        // Slots 1, 2 and 5: 3 and 4 are missing, slot 5 is seq 3.
        events[2].event_id = Ulid(5);
        let mut stamp = RunStamp {
            source: crate::import::STAMP_SOURCE.into(),
            order: OrderScheme::Slot,
            spec_version: None,
            missing_slots: vec![3, 4],
            missing_slot_count: 2,
        };
        let found = audit_imported_run(&run, Some(&stamp), &events);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].class, AnomalyClass::MissingSlots);
        assert_eq!(found[0].seqs, vec![3]);
        assert!(
            found[0].detail.contains("lacked 2 slot(s): 3,4;"),
            "{}",
            found[0].detail
        );
        stamp.missing_slots.clear();
        stamp.missing_slot_count = 0;
        assert_eq!(audit_imported_run(&run, Some(&stamp), &events), vec![]);
        assert_eq!(audit_imported_run(&run, None, &events), vec![]);
    }

    #[test]
    fn status_follows_the_first_terminal_event() {
        assert_eq!(RunStatus::of([]), RunStatus::Pending);
        assert_eq!(RunStatus::of(["run_created"]), RunStatus::Pending);
        assert_eq!(
            RunStatus::of(["run_created", "run_started"]),
            RunStatus::Running
        );
        assert_eq!(
            RunStatus::of(["run_created", "run_started", "run_failed", "run_completed"]),
            RunStatus::Failed
        );
        assert_eq!(
            RunStatus::of(["run_created", "run_cancelled"]),
            RunStatus::Cancelled
        );
        assert_eq!(
            RunStatus::of(["run_completed", "run_started"]),
            RunStatus::Completed
        );
    }

    #[test]
    fn creation_kind_matches_by_prefix() {
        assert_eq!(creation_kind_of("step_retrying"), Some("step_created"));
        assert_eq!(creation_kind_of("hook_received"), Some("hook_created"));
        assert_eq!(creation_kind_of("wait_created"), Some("wait_created"));
        assert_eq!(creation_kind_of("steps_x"), None);
        assert_eq!(creation_kind_of("run_started"), None);
    }
}
