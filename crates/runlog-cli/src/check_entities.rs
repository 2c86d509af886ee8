//! `runlog import --check-entities`: the runs, steps and hooks `runlog-world` computes from the
//! imported logs, compared field by field with the source store's own entity files
//! (`runs/<runId>.json`, `steps/<runId>-<stepId>.json`, `hooks/<hookId>.json`).
//!
//! Both sides are compared as JSON values, member by member, after normalizing
//! representation only ([`same`]):
//!
//! 1. **Dates as instants.** A member whose two values are both ISO-8601 dates compares by
//!    the instant (the reference writes `JSON.stringify(new Date)`, always `…sssZ`; the World
//!    writes the same form, but equality must not hinge on it).
//! 2. **Absent = `null` for the optional members** of the reference's schemas
//!    (`WorkflowRunSchema`, `StepSchema`, `HookSchema` mark them `.optional()`, and a `null`
//!    in a file is what `JSON.stringify` leaves of an `undefined` it was handed explicitly):
//!    [`OPTIONAL_MEMBERS`]. Any other member must be present on both sides or on neither.
//!
//! Nothing else is normalized: payloads (`input`, `output`, `error`, `metadata`, including
//! `{"__type":"Uint8Array","data":…}` values) compare as values, statuses and attempts
//! exactly.
//!
//! Which hooks: the reference deletes a hook's file when the hook is disposed or its run
//! ends, so `hooks/` holds the live hooks; they are compared with the World's live hooks.
//!
//! Every run with a difference gets one class ([`RunClass`]), decided from the run's log and
//! the source's files — the evidence, not the differences, names the class.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use runlog::RunLog;
use runlog_world::{EventType, Pagination, ResolveData, RunState, World, WorldError, parse_iso_ms};
use serde_json::{Map, Value};

use crate::import::FileProblem;

/// Members the reference's schemas declare optional, where an absent member and `null` are the
/// same value (normalization 2).
pub const OPTIONAL_MEMBERS: [&str; 14] = [
    "specVersion",
    "executionContext",
    "input",
    "output",
    "error",
    "errorCode",
    "expiredAt",
    "startedAt",
    "completedAt",
    "retryAfter",
    "metadata",
    "isWebhook",
    "isSystem",
    "attributes",
];

/// Why a run's files and its log disagree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RunClass {
    /// The log holds more than one terminal run event: the fold keeps the first (the state
    /// every reader of the log agrees on), the source's run file shows the last one written.
    ExtraTerminalEvents,
    /// The run's terminal event exists only as a leftover temp file in `events/`
    /// (`*.json.tmp.*`, never renamed into place, so not in the log), but the source's run
    /// file was updated with it.
    TerminalInTempFile,
    /// The source's run file was rewritten by a terminal write whose event is not in the
    /// log: the log has one terminal event, the file another terminal time/result.
    TerminalNotInLog,
    /// The source's run file has a status that no event of the log gives it (e.g. `running`
    /// without a `run_started`).
    StatusWithoutEvent,
    /// None of the above: a difference the evidence does not explain.
    Unexplained,
}

impl RunClass {
    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            RunClass::ExtraTerminalEvents => "extra-terminal-events",
            RunClass::TerminalInTempFile => "terminal-in-temp-file",
            RunClass::TerminalNotInLog => "terminal-not-in-log",
            RunClass::StatusWithoutEvent => "status-without-event",
            RunClass::Unexplained => "unexplained",
        }
    }
}

/// One differing member.
#[derive(Clone, Debug, PartialEq)]
pub struct Difference {
    /// `run`, `step <stepId>` or `hook <hookId>`.
    pub entity: String,
    /// The member (`status`, `completedAt`, …), or `(exists)` for an entity only one side has.
    pub field: String,
    /// The World's value (`None`: absent).
    pub ours: Option<Value>,
    /// The source file's value (`None`: absent).
    pub theirs: Option<Value>,
}

/// A run with differences, its class and the evidence for it.
#[derive(Clone, Debug, PartialEq)]
pub struct RunDifferences {
    /// The run.
    pub run: String,
    /// Its class.
    pub class: RunClass,
    /// The evidence, in words.
    pub why: String,
    /// Every differing member.
    pub differences: Vec<Difference>,
}

/// The whole comparison.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EntityCheck {
    /// The kinds compared: `runs`, `steps`, `hooks` — those the source has a directory of.
    pub compared: Vec<&'static str>,
    /// Runs compared (any entity of theirs or ours).
    pub runs: usize,
    /// Steps compared (either side).
    pub steps: usize,
    /// Live hooks compared (either side).
    pub hooks: usize,
    /// Runs with differences, by run id.
    pub differing: Vec<RunDifferences>,
    /// Source entity files that could not be read (they count as differences too).
    pub problems: Vec<FileProblem>,
}

impl EntityCheck {
    /// Runs with differences per class.
    pub fn class_counts(&self) -> BTreeMap<RunClass, usize> {
        let mut counts = BTreeMap::new();
        for d in &self.differing {
            *counts.entry(d.class).or_insert(0) += 1;
        }
        counts
    }

    /// Whether anything differs.
    pub fn any(&self) -> bool {
        !self.differing.is_empty() || !self.problems.is_empty()
    }
}

/// Whether `ours` and `theirs` (the member `key` on each side) are the same value after the
/// documented normalizations.
pub fn same(key: &str, ours: Option<&Value>, theirs: Option<&Value>) -> bool {
    let optional = OPTIONAL_MEMBERS.contains(&key);
    let norm = |v: Option<&Value>| match v {
        Some(Value::Null) if optional => None,
        other => other.cloned(),
    };
    match (norm(ours), norm(theirs)) {
        (Some(Value::String(a)), Some(Value::String(b))) => {
            match (parse_iso_ms(&a), parse_iso_ms(&b)) {
                (Some(x), Some(y)) => x == y,
                _ => a == b,
            }
        }
        (a, b) => a == b,
    }
}

fn diff_entity(entity: &str, ours: &Value, theirs: &Value, out: &mut Vec<Difference>) {
    let empty = Map::new();
    let (a, b) = (
        ours.as_object().unwrap_or(&empty),
        theirs.as_object().unwrap_or(&empty),
    );
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for key in keys {
        let (x, y) = (a.get(key.as_str()), b.get(key.as_str()));
        if !same(key, x, y) {
            out.push(Difference {
                entity: entity.to_string(),
                field: key.clone(),
                ours: x.cloned(),
                theirs: y.cloned(),
            });
        }
    }
}

fn exists(entity: String, ours: bool) -> Difference {
    Difference {
        entity,
        field: "(exists)".into(),
        ours: Some(Value::Bool(ours)),
        theirs: Some(Value::Bool(!ours)),
    }
}

/// The source's entity files of one kind: (run id, entity id) → value; `None` when the
/// source has no such directory (that kind is then not compared). Temp files and
/// subdirectories (the hook indexes) are not entities.
fn read_entities(
    dir: &Path,
    id_member: &str,
    problems: &mut Vec<FileProblem>,
) -> Option<BTreeMap<(String, String), Value>> {
    let mut out = BTreeMap::new();
    let list = match fs::read_dir(dir) {
        Ok(list) => list,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            problems.push(FileProblem {
                path: dir.to_path_buf(),
                reason: format!("cannot list: {e}"),
            });
            return Some(out);
        }
    };
    let mut paths: Vec<_> = list.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() || path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let parsed = fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<Value>(&b).map_err(|e| e.to_string()));
        let value = match parsed {
            Ok(v) => v,
            Err(e) => {
                problems.push(FileProblem {
                    path: path.clone(),
                    reason: format!("unreadable entity file: {e}"),
                });
                continue;
            }
        };
        match (value["runId"].as_str(), value[id_member].as_str()) {
            (Some(run), Some(id)) => {
                out.insert((run.to_string(), id.to_string()), value);
            }
            _ => problems.push(FileProblem {
                path: path.clone(),
                reason: format!("entity file without runId or {id_member}"),
            }),
        }
    }
    Some(out)
}

/// What the log says about a run, for its class.
#[derive(Default)]
struct Evidence {
    terminal_events: usize,
    run_started: bool,
    /// The event type of a leftover temp file of this run in `events/` that is a terminal
    /// run event.
    temp_terminal: Option<String>,
}

fn evidence<B: RunLog>(world: &World<B>, run: &str, temp_terminal: Option<String>) -> Evidence {
    let mut ev = Evidence {
        temp_terminal,
        ..Evidence::default()
    };
    let mut pagination = Pagination {
        limit: Some(1000),
        ..Pagination::default()
    };
    while let Ok(page) = world.list_events(run, &pagination, ResolveData::None) {
        for e in &page.data {
            match e.event_type {
                EventType::RunCompleted | EventType::RunFailed | EventType::RunCancelled => {
                    ev.terminal_events += 1
                }
                EventType::RunStarted => ev.run_started = true,
                _ => {}
            }
        }
        match (page.has_more, page.cursor) {
            (true, Some(c)) => pagination.cursor = Some(c),
            _ => break,
        }
    }
    ev
}

const TERMINAL: [&str; 3] = ["completed", "failed", "cancelled"];
const TERMINAL_FIELDS: [&str; 6] = [
    "status",
    "output",
    "error",
    "errorCode",
    "completedAt",
    "updatedAt",
];

fn classify(diffs: &[Difference], ev: &Evidence) -> (RunClass, String) {
    let status = |side: fn(&Difference) -> &Option<Value>| {
        diffs
            .iter()
            .find(|d| d.entity == "run" && d.field == "status")
            .and_then(|d| side(d).as_ref().and_then(Value::as_str).map(str::to_string))
    };
    let theirs_status = status(|d| &d.theirs);
    let theirs_terminal = theirs_status
        .as_deref()
        .is_some_and(|s| TERMINAL.contains(&s));
    let only_run = diffs.iter().all(|d| d.entity == "run");
    if !only_run {
        return (RunClass::Unexplained, "a step or hook differs".to_string());
    }
    if ev.terminal_events > 1 {
        return (
            RunClass::ExtraTerminalEvents,
            format!(
                "{} terminal run events in the log: ours is the first, the run file the last write",
                ev.terminal_events
            ),
        );
    }
    if let Some(kind) = &ev.temp_terminal
        && ev.terminal_events == 0
        && theirs_terminal
    {
        return (
            RunClass::TerminalInTempFile,
            format!(
                "its {kind} exists only as a leftover temp file in events/, yet the run file is {}",
                theirs_status.unwrap_or_default()
            ),
        );
    }
    let terminal_only = diffs
        .iter()
        .all(|d| TERMINAL_FIELDS.contains(&d.field.as_str()));
    let file_terminal = theirs_terminal || theirs_status.is_none();
    if ev.terminal_events == 1 && terminal_only && file_terminal {
        return (
            RunClass::TerminalNotInLog,
            "one terminal event in the log; the run file holds another terminal write".to_string(),
        );
    }
    if theirs_status.as_deref() == Some("running") && !ev.run_started {
        return (
            RunClass::StatusWithoutEvent,
            "the run file says running, but the log has no run_started".to_string(),
        );
    }
    (
        RunClass::Unexplained,
        "no evidence in the log or the files".to_string(),
    )
}

/// Leftover temp files in `<src>/events` that hold a terminal run event, by run.
fn temp_terminals(src: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut visit = |path: &Path| {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !name.contains(".json.tmp.") {
            return;
        }
        let Ok(v) = fs::read(path).map(|b| serde_json::from_slice::<Value>(&b)) else {
            return;
        };
        let Ok(v) = v else { return };
        if let (Some(run), Some(kind)) = (v["runId"].as_str(), v["eventType"].as_str())
            && ["run_completed", "run_failed", "run_cancelled"].contains(&kind)
        {
            out.insert(run.to_string(), kind.to_string());
        }
    };
    let Ok(list) = fs::read_dir(src.join("events")) else {
        return out;
    };
    for entry in list.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Ok(inner) = fs::read_dir(&path) {
                inner.flatten().for_each(|e| visit(&e.path()));
            }
        } else {
            visit(&path);
        }
    }
    out
}

/// Compares the World's runs, steps and live hooks of every run named by the source (its
/// entity files, or `runs` — the runs of its `events/`) with the source's own files.
pub fn check_entities<B: RunLog>(
    world: &World<B>,
    src: &Path,
    runs: impl IntoIterator<Item = String>,
) -> EntityCheck {
    let mut check = EntityCheck::default();
    let mut problems = Vec::new();
    let their_runs = read_entities(&src.join("runs"), "runId", &mut problems);
    let their_steps = read_entities(&src.join("steps"), "stepId", &mut problems);
    let their_hooks = read_entities(&src.join("hooks"), "hookId", &mut problems);
    let temps = temp_terminals(src);
    check.compared = [
        ("runs", their_runs.is_some()),
        ("steps", their_steps.is_some()),
        ("hooks", their_hooks.is_some()),
    ]
    .into_iter()
    .filter_map(|(kind, present)| present.then_some(kind))
    .collect();
    let mut ids: BTreeSet<String> = runs.into_iter().collect();
    for m in [&their_runs, &their_steps, &their_hooks]
        .into_iter()
        .flatten()
    {
        ids.extend(m.keys().map(|(r, _)| r.clone()));
    }
    for run in ids {
        check.runs += 1;
        let mut diffs = Vec::new();
        let state: Option<RunState> = match world.run_state(&run) {
            Ok(state) => Some(state),
            Err(WorldError::RunNotFound { .. }) => None,
            Err(e) => {
                diffs.push(Difference {
                    entity: "run".into(),
                    field: "(error)".into(),
                    ours: Some(Value::String(e.to_string())),
                    theirs: None,
                });
                None
            }
        };
        let ours_run = state.as_ref().and_then(RunState::run);
        if let Some(their_runs) = &their_runs {
            match (ours_run, their_runs.get(&(run.clone(), run.clone()))) {
                (Some(o), Some(t)) => diff_entity("run", &to_value(o), t, &mut diffs),
                (None, None) => {}
                (o, _) => diffs.push(exists("run".into(), o.is_some())),
            }
        }
        let prefix = (run.clone(), String::new());
        let theirs_of = |m: &BTreeMap<(String, String), Value>| -> BTreeMap<String, Value> {
            m.range(prefix.clone()..)
                .take_while(|((r, _), _)| *r == run)
                .map(|((_, id), v)| (id.clone(), v.clone()))
                .collect()
        };
        let mut steps = their_steps.as_ref().map(theirs_of).unwrap_or_default();
        let mut hooks = their_hooks.as_ref().map(theirs_of).unwrap_or_default();
        if let Some(state) = &state {
            let (with_steps, with_hooks) = (their_steps.is_some(), their_hooks.is_some());
            for (_, step) in state.steps().filter(|_| with_steps) {
                check.steps += 1;
                let entity = format!("step {}", step.step_id);
                match steps.remove(&step.step_id) {
                    Some(t) => diff_entity(&entity, &to_value(step), &t, &mut diffs),
                    None => diffs.push(exists(entity, true)),
                }
            }
            for (_, hook) in state.live_hooks().filter(|_| with_hooks) {
                check.hooks += 1;
                let entity = format!("hook {}", hook.hook_id);
                match hooks.remove(&hook.hook_id) {
                    Some(t) => diff_entity(&entity, &to_value(hook), &t, &mut diffs),
                    None => diffs.push(exists(entity, true)),
                }
            }
        }
        for id in steps.into_keys() {
            check.steps += 1;
            diffs.push(exists(format!("step {id}"), false));
        }
        for id in hooks.into_keys() {
            check.hooks += 1;
            diffs.push(exists(format!("hook {id}"), false));
        }
        if diffs.is_empty() {
            continue;
        }
        let ev = evidence(world, &run, temps.get(&run).cloned());
        let (class, why) = classify(&diffs, &ev);
        check.differing.push(RunDifferences {
            run,
            class,
            why,
            differences: diffs,
        });
    }
    check.problems = problems;
    check
}

fn to_value<T: serde::Serialize>(entity: &T) -> Value {
    serde_json::to_value(entity).unwrap_or(Value::Null)
}
