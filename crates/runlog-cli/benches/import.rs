//! Workload 7b, `import` (moved here from the core's `benches/peers`, so that the core needs
//! no dev-dependency on this crate): import the shared corpus (copied to a temp dir first; the
//! original is never touched) into a fresh file store through `runlog_cli::import`, timing
//! discovery + parsing and the durable appends separately. One markdown table (the rows the
//! peers table carried), or JSON.
//!
//! ```text
//! cargo bench -p runlog-cli --bench import -- [--json] [--dir PATH]
//! ```
//! The corpus is `$RUNLOG_CORPUS_DIR`, else `tests/fixtures/world-local-5.0.0-beta.29` of the
//! repository; `--dir` (default: the system temp dir) should be a real disk, not tmpfs.

use std::path::{Path, PathBuf};
use std::time::Instant;

use runlog::{Config, Store};
use runlog_cli::import::{BatchLimits, discover, import_run, load_run};

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

/// One measured figure: a row of the table.
struct Row {
    workload: String,
    metric: &'static str,
    value: f64,
    note: String,
}

/// The corpus directory: `$RUNLOG_CORPUS_DIR`, else the copy in the repository.
fn corpus_root() -> PathBuf {
    std::env::var_os("RUNLOG_CORPUS_DIR").map_or_else(
        || {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../tests/fixtures/world-local-5.0.0-beta.29")
        },
        PathBuf::from,
    )
}

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
fn w7_import(root: &Path, corpus: &Path) -> BenchResult<Vec<Row>> {
    let dir = tempfile::tempdir_in(root)?;
    let src = dir.path().join("corpus");
    copy_tree(corpus, &src)?;
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
    let workload = format!("w7 import corpus: {} runs, {events} events", sources.len());
    let row = |metric, value, note: &str| Row {
        workload: workload.clone(),
        metric,
        value,
        note: note.to_string(),
    };
    let found_note = format!(
        "{} files found, {failed_runs} runs rejected by the importer, {} other files",
        found.file_count(),
        found.problems.len()
    );
    Ok(vec![
        row("total ms", total.as_secs_f64() * 1e3, &found_note),
        row(
            "parse ms",
            parsed.as_secs_f64() * 1e3,
            "discover + read + validate every file",
        ),
        row(
            "create+append ms",
            imported * 1e3,
            "create_run_with_meta + batched durable appends, per run",
        ),
        row("events/s", events as f64 / total.as_secs_f64(), ""),
    ])
}

fn markdown(rows: &[Row]) -> String {
    let mut out = String::from("| workload | metric | runlog | note |\n|---|---|---:|---|\n");
    for r in rows {
        let value = if r.value >= 1000.0 {
            format!("{:.0}", r.value)
        } else {
            format!("{:.2}", r.value)
        };
        out += &format!("| {} | {} | {value} | {} |\n", r.workload, r.metric, r.note);
    }
    out
}

fn json(rows: &[Row]) -> String {
    let rows: Vec<_> = rows
        .iter()
        .map(|r| {
            serde_json::json!({
                "workload": r.workload, "metric": r.metric,
                "values": { "runlog": r.value }, "note": r.note,
            })
        })
        .collect();
    serde_json::to_string_pretty(&serde_json::json!({ "rows": rows })).unwrap_or_default()
}

fn run(args: &[String]) -> BenchResult<()> {
    let mut as_json = false;
    let mut root = std::env::temp_dir();
    let mut args = args.iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--json" => as_json = true,
            "--dir" => root = PathBuf::from(args.next().ok_or("--dir needs a path")?),
            // cargo bench passes --bench to every harness = false target.
            "--bench" => {}
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    let corpus = corpus_root();
    if !corpus.is_dir() {
        return Err(format!("no corpus at {}", corpus.display()).into());
    }
    let rows = w7_import(&root, &corpus)?;
    let text = if as_json {
        json(&rows)
    } else {
        markdown(&rows)
    };
    println!("{text}");
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = run(&args) {
        eprintln!("import: {e}");
        std::process::exit(1);
    }
}
