//! `runlog import`: a world-local data directory into the store, run by run.

use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use std::sync::Arc;

use runlog::{Config, RunLog};
use runlog_cli::check_entities::{EntityCheck, check_entities};
use runlog_cli::import::{BatchLimits, FileProblem, RunImport, discover, import_run, load_run};
use runlog_cli::stream_import::{
    SourceStream, StreamDiscovery, StreamImport, StreamResult, discover_streams, import_stream,
};
use runlog_world::{Streams, World, WorldConfig};
use serde::Serialize;
use serde_json::json;

use crate::output::{Table, escape_text, json_line};
use crate::support::{CliError, open_store};

/// Extra `--help` text of `import`.
pub const AFTER_HELP: &str = "\
SRC is the directory holding `events/`, in either layout: `events/<runId>-<eventId>.json` or
`events/<runId>/<runId>-<eventId>.json`. Files tagged `<id>.<tag>.json` are imported only with
--tag <tag>. Each run is ordered as that store lists it (slot ids by slot, ULID ids by
(createdAt, eventId)) and gets dense seqs from 1.

A run imports whole or not at all: one malformed file keeps its whole run out. Leftover temp
files (`*.json.tmp.*`) and malformed files are reported with path and reason; the import goes
on with the other runs and exits 1 at the end. A slot run whose slots skip a number (1, 2, 4)
is imported (slot 4 becomes seq 3), its missing slots are recorded in the run's stamp
(`missing_slots`, `missing_slot_count`; `runlog audit` reports them as `missing_slots`), and
the import names run and slots and exits 1. Re-running an import is idempotent: runs already
imported are checked against the source and only missing events are appended.

Streams: `streams/runs/<runId>.json` names each run's streams, `streams/chunks/<name>/chnk_*.bin`
holds their chunks (flag byte 0x00 + data, or 0x01: end of stream), read in file-name order
and imported byte for byte into the run's stream of the same name (closed at the end marker).
A stream already imported is `unchanged`, one holding a prefix `extended`, one that differs
from the source a `conflict` (left alone, exit 1).

--check-entities: after importing, the runs, steps and live hooks computed from the logs are
compared field by field with the source's runs/, steps/ and hooks/ files (dates as instants;
absent = null for the schemas' optional members). Every difference is printed (run, entity,
field, ours, theirs), each differing run gets a class (extra-terminal-events,
terminal-in-temp-file, terminal-not-in-log, status-without-event, unexplained) and the classes
are counted; exit 1 when anything differs.";

/// Arguments of `runlog import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The world-local data directory (the one holding `events/`).
    src: PathBuf,
    /// Also import files tagged `<id>.TAG.json` (files of other tags are always skipped).
    #[arg(long)]
    tag: Option<String>,
    /// One JSON object per run and per problem file instead of the report.
    #[arg(long)]
    json: bool,
    /// After importing, compare the runs, steps and hooks computed from the logs with the
    /// source's own runs/, steps/ and hooks/ files; print every difference (exit 1 if any).
    #[arg(long)]
    check_entities: bool,
}

/// How one run went.
enum Outcome {
    /// Imported; with the number of identical duplicate files collapsed into one event, and
    /// the source's missing slots (listed up to a cap, and counted).
    Imported(RunImport, usize, Holes),
    Failed(Vec<FileProblem>),
}

/// Slot numbers a source run lacked: the first ones, and how many in all (0: none).
struct Holes {
    listed: Vec<u128>,
    count: u128,
}

impl Holes {
    /// `3,5,…` (the ellipsis when more are missing than listed).
    fn text(&self) -> String {
        let listed: Vec<String> = self.listed.iter().map(u128::to_string).collect();
        let more = if self.count > self.listed.len() as u128 {
            ",…"
        } else {
            ""
        };
        format!("{}{more}", listed.join(","))
    }
}

/// `runlog import`: exit 1 when any file or run was left out.
pub fn run(store_dir: &Path, args: ImportArgs) -> Result<bool, CliError> {
    let found = discover(&args.src, args.tag.as_deref())
        .map_err(|e| CliError::Input(format!("cannot import {}: {e}", args.src.display())))?;
    let streams_found = discover_streams(&args.src, args.tag.as_deref()).map_err(|e| {
        CliError::Input(format!(
            "cannot import the streams of {}: {e}",
            args.src.display()
        ))
    })?;
    let store: Arc<dyn RunLog> = open_store(store_dir)?.log();
    let bar = progress_bar(found.file_count() as u64);
    let mut outcomes = Vec::with_capacity(found.runs.len());
    for (run, files) in &found.runs {
        let start = bar.position();
        let outcome = import_one(&store, run, files, &bar);
        bar.set_position(start + files.len() as u64);
        outcomes.push((run.as_str(), outcome));
    }
    bar.finish_and_clear();
    let streams = Streams::new(store.clone());
    let stream_outcomes: Vec<(&SourceStream, StreamImport)> = streams_found
        .streams
        .iter()
        .map(|s| (s, import_stream(&streams, s)))
        .collect();
    let mut out = BufWriter::new(io::stdout().lock());
    if args.json {
        print_json(&mut out, &outcomes, &found.problems)?;
        print_streams_json(&mut out, &streams_found, &stream_outcomes)?;
    } else {
        print_report(&mut out, &outcomes, &found.problems, found.skipped_tagged)?;
        print_streams_report(&mut out, &streams_found, &stream_outcomes)?;
    }
    let mut differs = false;
    if args.check_entities {
        let world = World::new(store.clone(), WorldConfig::default());
        let check = check_entities(&world, &args.src, found.runs.keys().cloned());
        differs = check.any();
        if args.json {
            print_check_json(&mut out, &check)?;
        } else {
            print_check_report(&mut out, &check)?;
        }
    }
    out.flush()?;
    let incomplete = outcomes.iter().any(|(_, o)| match o {
        Outcome::Failed(_) => true,
        Outcome::Imported(_, _, holes) => holes.count > 0,
    });
    let streams_incomplete = !streams_found.problems.is_empty()
        || stream_outcomes
            .iter()
            .any(|(_, o)| o.result == StreamResult::Conflict);
    Ok(incomplete || !found.problems.is_empty() || streams_incomplete || differs)
}

fn print_streams_json(
    out: &mut impl Write,
    found: &StreamDiscovery,
    outcomes: &[(&SourceStream, StreamImport)],
) -> io::Result<()> {
    for (s, o) in outcomes {
        json_line(
            out,
            &json!({"stream": s.name, "run": s.run, "result": o.result.name(),
                    "chunks": s.chunks.len(), "appended": o.appended,
                    "already_present": o.already_present, "done": o.done, "problem": o.problem}),
        )?;
    }
    for p in &found.problems {
        json_line(
            out,
            &json!({"path": p.path.display().to_string(), "reason": p.reason, "stream_file": true}),
        )?;
    }
    Ok(())
}

fn print_streams_report(
    out: &mut impl Write,
    found: &StreamDiscovery,
    outcomes: &[(&SourceStream, StreamImport)],
) -> io::Result<()> {
    if !found.present {
        return Ok(());
    }
    let mut table = Table::new(&[
        "STREAM",
        "RUN",
        "RESULT",
        "CHUNKS",
        "APPENDED",
        "ALREADY_PRESENT",
        "DONE",
    ]);
    let (mut appended, mut already, mut imported, mut closed) = (0, 0, 0, 0);
    let mut problems: Vec<String> = found
        .problems
        .iter()
        .map(|p| format!("{}: {}", p.path.display(), p.reason))
        .collect();
    for (s, o) in outcomes {
        table.row(vec![
            s.name.clone(),
            s.run.clone(),
            o.result.name().into(),
            s.chunks.len().to_string(),
            o.appended.to_string(),
            o.already_present.to_string(),
            o.done.to_string(),
        ]);
        (appended, already) = (appended + o.appended, already + o.already_present);
        if o.result != StreamResult::Conflict {
            imported += 1;
            closed += usize::from(o.done);
        }
        if let Some(p) = &o.problem {
            problems.push(format!("stream {} of run {}: {p}", s.name, s.run));
        }
    }
    if !table.is_empty() {
        table.print(out)?;
    }
    writeln!(
        out,
        "imported {imported} of {} streams: {appended} chunks appended, {already} already present, {closed} closed",
        outcomes.len()
    )?;
    if !problems.is_empty() {
        writeln!(out, "streams not imported ({}):", problems.len())?;
        for p in problems {
            writeln!(out, "  {}", escape_text(&p))?;
        }
    }
    Ok(())
}

/// A value of a difference as compact JSON (`-` when absent).
fn cell(v: Option<&serde_json::Value>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

fn print_check_json(out: &mut impl Write, check: &EntityCheck) -> io::Result<()> {
    for r in &check.differing {
        for d in &r.differences {
            json_line(
                out,
                &json!({"check": "difference", "run": r.run, "entity": d.entity, "field": d.field,
                        "ours": d.ours, "theirs": d.theirs}),
            )?;
        }
        json_line(
            out,
            &json!({"check": "run", "run": r.run, "class": r.class.name(), "why": r.why,
                    "differences": r.differences.len()}),
        )?;
    }
    for p in &check.problems {
        json_line(
            out,
            &json!({"check": "problem", "path": p.path.display().to_string(), "reason": p.reason}),
        )?;
    }
    let classes: serde_json::Map<String, serde_json::Value> = check
        .class_counts()
        .into_iter()
        .map(|(c, n)| (c.name().to_string(), n.into()))
        .collect();
    json_line(
        out,
        &json!({"check": "summary", "compared": check.compared, "runs": check.runs, "steps": check.steps, "hooks": check.hooks,
                "differing_runs": check.differing.len(), "classes": classes}),
    )
}

fn print_check_report(out: &mut impl Write, check: &EntityCheck) -> io::Result<()> {
    writeln!(
        out,
        "check-entities ({}): compared {} runs, {} steps, {} live hooks with the source's files: {} runs differ",
        check.compared.join(", "),
        check.runs,
        check.steps,
        check.hooks,
        check.differing.len()
    )?;
    if !check.differing.is_empty() {
        let mut table = Table::new(&["RUN", "ENTITY", "FIELD", "OURS", "THEIRS"]);
        for r in &check.differing {
            for d in &r.differences {
                table.row(vec![
                    r.run.clone(),
                    d.entity.clone(),
                    d.field.clone(),
                    cell(d.ours.as_ref()),
                    cell(d.theirs.as_ref()),
                ]);
            }
        }
        table.print(out)?;
        writeln!(out, "classes:")?;
        for (class, n) in check.class_counts() {
            writeln!(out, "  {} {n}", class.name())?;
            for r in check.differing.iter().filter(|r| r.class == class) {
                writeln!(out, "    {}: {}", r.run, escape_text(&r.why))?;
            }
        }
    }
    if !check.problems.is_empty() {
        writeln!(out, "unreadable entity files ({}):", check.problems.len())?;
        for p in &check.problems {
            writeln!(
                out,
                "  {}",
                escape_text(&format!("{}: {}", p.path.display(), p.reason))
            )?;
        }
    }
    Ok(())
}

/// Loads, validates and imports one run; every failure becomes problems of that run.
fn import_one(store: &dyn RunLog, run: &str, files: &[PathBuf], bar: &ProgressBar) -> Outcome {
    let source = match load_run(run, files, Config::default().payload_len_bytes_max) {
        Ok(source) => source,
        Err(problems) => return Outcome::Failed(problems),
    };
    match import_run(store, &source, BatchLimits::default(), &mut |n| bar.inc(n)) {
        Ok(done) => {
            let holes = Holes {
                listed: source.stamp.missing_slots.clone(),
                count: source.stamp.missing_slot_count,
            };
            Outcome::Imported(done, source.duplicate_copies.len(), holes)
        }
        Err(e) => {
            let dir = files
                .first()
                .and_then(|f| f.parent())
                .unwrap_or(Path::new(""));
            Outcome::Failed(vec![FileProblem {
                path: dir.to_path_buf(),
                reason: format!("run {run}: {e}"),
            }])
        }
    }
}

fn progress_bar(files: u64) -> ProgressBar {
    if !io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(files);
    if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} files {msg}") {
        bar.set_style(style);
    }
    bar
}

fn result_name(o: &Outcome) -> &'static str {
    match o {
        Outcome::Imported(r, ..) if r.created => "created",
        Outcome::Imported(r, ..) if r.appended > 0 => "extended",
        Outcome::Imported(..) => "unchanged",
        Outcome::Failed(_) => "failed",
    }
}

fn counts(o: &Outcome) -> (u64, u64) {
    match o {
        Outcome::Imported(r, ..) => (r.appended, r.already_present),
        Outcome::Failed(_) => (0, 0),
    }
}

/// The JSON line of one run. A struct rather than a `Value` because slot numbers can exceed
/// `u64` (26 decimal digits), which a `serde_json::Value` cannot hold but a JSON number can.
#[derive(Serialize)]
struct RunLine<'a> {
    run: &'a str,
    result: &'static str,
    appended: u64,
    already_present: u64,
    problems: Vec<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    missing_slots: Option<&'a [u128]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    missing_slot_count: Option<u128>,
}

fn print_json(
    out: &mut impl Write,
    outcomes: &[(&str, Outcome)],
    stray: &[FileProblem],
) -> io::Result<()> {
    let problem = |p: &FileProblem, run: Option<&str>| json!({"path": p.path.display().to_string(), "reason": p.reason, "run": run});
    for (run, o) in outcomes {
        let (appended, already) = counts(o);
        let problems: Vec<_> = match o {
            Outcome::Failed(ps) => ps.iter().map(|p| problem(p, Some(run))).collect(),
            Outcome::Imported(..) => Vec::new(),
        };
        let holes = match o {
            Outcome::Imported(_, _, holes) if holes.count > 0 => Some(holes),
            _ => None,
        };
        let line = RunLine {
            run,
            result: result_name(o),
            appended,
            already_present: already,
            problems,
            missing_slots: holes.map(|h| h.listed.as_slice()),
            missing_slot_count: holes.map(|h| h.count),
        };
        serde_json::to_writer(&mut *out, &line)?;
        writeln!(out)?;
    }
    for p in stray {
        json_line(out, &problem(p, None))?;
    }
    Ok(())
}

fn print_report(
    out: &mut impl Write,
    outcomes: &[(&str, Outcome)],
    stray: &[FileProblem],
    skipped_tagged: usize,
) -> io::Result<()> {
    let mut table = Table::new(&["RUN", "RESULT", "APPENDED", "ALREADY_PRESENT"]);
    let mut problems: Vec<String> = stray
        .iter()
        .map(|p| format!("{}: {}", p.path.display(), p.reason))
        .collect();
    let mut holes = Vec::new();
    let (mut appended, mut already, mut imported, mut copies) = (0, 0, 0, 0);
    for (run, o) in outcomes {
        let (a, p) = counts(o);
        (appended, already) = (appended + a, already + p);
        table.row(vec![
            run.to_string(),
            result_name(o).into(),
            a.to_string(),
            p.to_string(),
        ]);
        match o {
            Outcome::Imported(_, c, h) => {
                (imported, copies) = (imported + 1, copies + c);
                if h.count > 0 {
                    holes.push(format!(
                        "run {run}: the source lacks {} slot(s): {} (imported with dense seqs; \
                         recorded on the run, see `runlog audit`)",
                        h.count,
                        h.text()
                    ));
                }
            }
            Outcome::Failed(ps) => problems.extend(ps.iter().map(|p| {
                format!(
                    "{}: {} (run {run} not imported)",
                    p.path.display(),
                    p.reason
                )
            })),
        }
    }
    table.print(out)?;
    writeln!(
        out,
        "imported {imported} of {} runs: {appended} events appended, {already} already present",
        outcomes.len()
    )?;
    if copies > 0 {
        writeln!(
            out,
            "collapsed {copies} identical duplicate event files (imported once)"
        )?;
    }
    if skipped_tagged > 0 {
        writeln!(
            out,
            "skipped {skipped_tagged} files tagged for another world (see --tag)"
        )?;
    }
    if !holes.is_empty() {
        writeln!(out, "imported with missing slots ({}):", holes.len())?;
        for h in holes {
            writeln!(out, "  {}", escape_text(&h))?;
        }
    }
    if !problems.is_empty() {
        writeln!(out, "not imported ({}):", problems.len())?;
        for p in problems {
            // Paths and reasons come from the source directory: never raw to the terminal.
            writeln!(out, "  {}", escape_text(&p))?;
        }
    }
    Ok(())
}
