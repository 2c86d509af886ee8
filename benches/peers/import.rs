//! Workload 7b: import the shared corpus (copied to a temp dir first; the original is never
//! touched) into a fresh store through `runlog_cli::import`, timing discovery + parsing and the
//! durable appends separately.

use std::path::Path;
use std::time::Instant;

use runlog::{Config, Store};
use runlog_cli::import::{BatchLimits, discover, import_run, load_run};

use crate::Ctx;
use crate::report::{Better, Row};
use crate::support::BenchResult;
use crate::support::corpus::corpus_root;

/// Copies `src` into `dst` recursively (files and directories only).
fn copy_tree(src: &Path, dst: &Path) -> BenchResult<()> {
    std::fs::create_dir_all(dst)?;
    for entry in std::fs::read_dir(src)? {
        let entry = entry?;
        let to = dst.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &to)?;
        } else {
            std::fs::copy(entry.path(), &to)?;
        }
    }
    Ok(())
}

/// Imports the corpus; rows for parse time, import time and the events/s of the whole.
pub fn w7_import(ctx: &Ctx) -> BenchResult<Vec<Row>> {
    let dir = tempfile::tempdir_in(&ctx.root)?;
    let src = dir.path().join("corpus");
    copy_tree(&corpus_root(), &src)?;
    let store = Store::open(dir.path().join("store"), Config::default())?;
    let started = Instant::now();
    let found = discover(&src, None)?;
    let mut sources = Vec::new();
    let mut failed_runs = 0usize;
    for (run, files) in &found.runs {
        match load_run(run, files, store.config().payload_len_bytes_max) {
            Ok(source) => sources.push(source),
            Err(_) => failed_runs += 1,
        }
    }
    let parsed = started.elapsed();
    let mut events = 0u64;
    for source in &sources {
        events += import_run(&store, source, BatchLimits::default(), &mut |_| {})?.appended;
    }
    let total = started.elapsed();
    let imported = (total - parsed).as_secs_f64();
    let label = format!("w7 import corpus: {} runs, {events} events", sources.len());
    let note = format!(
        "{} files found, {failed_runs} runs rejected by the importer, {} other files",
        found.file_count(),
        found.problems.len()
    );
    Ok(vec![
        Row::new(
            &label,
            "total ms",
            Better::Lower,
            &[("runlog", total.as_secs_f64() * 1e3)],
        )
        .note(note),
        Row::new(
            &label,
            "parse ms",
            Better::Lower,
            &[("runlog", parsed.as_secs_f64() * 1e3)],
        )
        .note("discover + read + validate every file"),
        Row::new(
            &label,
            "create+append ms",
            Better::Lower,
            &[("runlog", imported * 1e3)],
        )
        .note("create_run_with_meta + batched durable appends, per run"),
        Row::new(
            &label,
            "events/s",
            Better::Higher,
            &[("runlog", events as f64 / total.as_secs_f64())],
        ),
    ])
}
