//! The embedding example `examples/job_runner.rs`, run for real: started, killed with SIGKILL
//! mid-work several times, restarted until it finishes; then every job must be completed
//! exactly once, every step completed once by its last attempt and never run after its
//! completion was stored — read back here from the store and the journal, and by the
//! example's own `--check`, which is also shown to fail on a store that breaks the rule.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

use runlog::{Config, NewEvent, RunId, Store};

const JOBS: usize = 6;
const STEPS: usize = 5;
const STEP_MS: u64 = 40;
const KILLS: usize = 5;

/// The example's binary: the one `cargo test` built beside this test when it is newer than
/// every source it is built from (`cargo test` without a target filter builds examples),
/// else built now with the profile and features this test was built with.
fn example_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/..");
    let bin = profile_dir.join("examples").join("job_runner");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let built = std::fs::metadata(&bin).and_then(|m| m.modified()).ok();
    let sources = [
        root.join("examples/job_runner.rs"),
        root.join("src"),
        root.join("Cargo.toml"),
    ];
    if built.is_some_and(|t| sources.iter().all(|s| newest_mtime(s) <= t)) {
        return bin;
    }
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("release") => "bench",
        _ => "test",
    };
    let features: Vec<&str> = [
        ("sim", cfg!(feature = "sim")),
        ("internals", cfg!(feature = "internals")),
    ]
    .into_iter()
    .filter_map(|(name, on)| on.then_some(name))
    .collect();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let status = Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "-p",
            "runlog",
            "--example",
            "job_runner",
        ])
        .args(["--profile", profile, "--features", &features.join(",")])
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(profile_dir.parent().expect("target/"))
        .status()
        .expect("running cargo build --example job_runner");
    assert!(
        status.success(),
        "cargo build --example job_runner: {status}"
    );
    assert!(bin.exists(), "{} missing after the build", bin.display());
    bin
}

/// The newest modification time of the file `path`, or of the `.rs` files under the
/// directory `path`.
fn newest_mtime(path: &Path) -> SystemTime {
    let Ok(entries) = std::fs::read_dir(path) else {
        let modified = std::fs::metadata(path).and_then(|m| m.modified());
        return modified.unwrap_or(SystemTime::now());
    };
    entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir() || p.extension().is_some_and(|x| x == "rs"))
        .map(|p| newest_mtime(&p))
        .fold(SystemTime::UNIX_EPOCH, SystemTime::max)
}

fn runner(bin: &Path, store: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(bin);
    cmd.arg("--store").arg(store);
    for (flag, value) in [("--jobs", JOBS), ("--steps", STEPS), ("--workers", 2)] {
        cmd.arg(flag).arg(value.to_string());
    }
    cmd.args(["--step-ms", &STEP_MS.to_string()]).args(extra);
    cmd
}

/// A small deterministic generator of kill delays (xorshift), seeded per run and printed:
/// how long after its first attempt a process is killed.
fn delays(seed: u64) -> impl Iterator<Item = Duration> {
    let mut x = seed | 1;
    std::iter::repeat_with(move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        Duration::from_millis(x % 60)
    })
}

/// True when the journal holds an attempt started by the process `pid`.
fn journal_names(journal: &Path, pid: u32) -> bool {
    let text = std::fs::read_to_string(journal).unwrap_or_default();
    let pid = pid.to_string();
    text.lines()
        .any(|l| l.split(' ').nth(4) == Some(pid.as_str()))
}

/// Starts the runner, waits until it has started an attempt of its own (its pid in the
/// journal), then kills it after `delay`; true when it was still working then. Waiting on
/// the journal rather than on the clock makes "mid-work" independent of the machine's load.
fn start_and_kill(bin: &Path, store: &Path, delay: Duration) -> bool {
    let journal = store.with_extension("runlog.effects");
    let mut child = runner(bin, store, &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawning job_runner");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !journal_names(&journal, child.id()) && Instant::now() < deadline {
        if child.try_wait().expect("try_wait").is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(delay);
    let running = child.try_wait().expect("try_wait").is_none();
    child.kill().expect("SIGKILL"); // Child::kill is SIGKILL on Unix
    child.wait().expect("wait");
    running
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Reads every job's log back and counts, independently of the example's `--check`.
fn assert_each_job_completed_once(store: &Path) {
    let store = Store::open_read_only(store, Config::default()).expect("open store");
    for job in 0..JOBS {
        let run = RunId::new(format!("job-{job:03}")).expect("run id");
        let events = store.read(&run, 0, 10_000).expect("read job").events;
        let count = |kind: &str| events.iter().filter(|e| e.kind == kind).count();
        assert_eq!(count("job_created"), 1, "{run}");
        assert_eq!(count("job_completed"), 1, "{run}");
        assert_eq!(count("step_completed"), STEPS, "{run}");
        assert!(count("step_started") >= STEPS, "{run}");
        assert_eq!(events.last().map(|e| &*e.kind), Some("job_completed"));
        let done: Vec<Option<&str>> = events
            .iter()
            .filter(|e| e.kind == "step_completed")
            .map(|e| e.key.as_deref())
            .collect();
        let want: Vec<String> = (0..STEPS).map(|i| format!("done/{i}")).collect();
        assert_eq!(
            done,
            want.iter().map(|k| Some(k.as_str())).collect::<Vec<_>>()
        );
    }
}

#[test]
fn job_runner_killed_mid_work_resumes_and_completes_every_job_exactly_once() {
    let bin = example_binary();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("jobs.runlog");
    let seed = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    eprintln!("kill delays seeded with {seed}");
    let mut killed_mid_work = 0;
    for delay in delays(seed).take(KILLS) {
        killed_mid_work += usize::from(start_and_kill(&bin, &store, delay));
    }
    eprintln!("{killed_mid_work} of {KILLS} kills landed mid-work");
    // Each process is killed at most 60 ms after its first attempt started, and an attempt
    // takes 40 ms: a process gets through at most about 2 steps per worker of the 30, so
    // every kill lands mid-work unless this test's thread is starved for most of a second
    // (a process that exits first counts not); three of five leaves that margin.
    assert!(
        killed_mid_work >= 3,
        "only {killed_mid_work} of {KILLS} kills landed mid-work"
    );

    let t0 = Instant::now();
    let last = runner(&bin, &store, &[]).output().expect("final run");
    assert!(last.status.success(), "final run failed:\n{}", text(&last));
    let said = text(&last);
    assert!(
        said.contains(&format!("job_runner: {JOBS} jobs:")),
        "{said}"
    );
    eprintln!("final run ({:?}):\n{said}", t0.elapsed());

    let check = runner(&bin, &store, &["--check"])
        .output()
        .expect("--check");
    let found = text(&check);
    assert!(check.status.success(), "--check failed:\n{found}");
    assert!(
        found.contains(&format!("check: {JOBS} jobs, {} steps", JOBS * STEPS)),
        "{found}"
    );
    assert!(found.contains("none run after its completion"), "{found}");
    assert_each_job_completed_once(&store);

    // The work spanned processes: the journal names more than one pid.
    let journal = std::fs::read_to_string(dir.path().join("jobs.runlog.effects")).unwrap();
    let pids: std::collections::BTreeSet<&str> = journal
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .collect();
    assert!(pids.len() >= 2, "one process did all the work: {journal}");

    // A run started on the finished store does nothing: every job is complete already.
    let again = runner(&bin, &store, &[]).output().expect("run again");
    let said = text(&again);
    assert!(again.status.success(), "{said}");
    let summary = format!("0 completed by this process, {JOBS} complete already; 0 steps run");
    assert!(said.contains(&summary), "{said}");
}

#[test]
fn check_fails_on_a_second_completion_and_on_a_step_run_after_its_completion() {
    let bin = example_binary();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("jobs.runlog");
    let first = runner(&bin, &store, &[]).output().expect("run");
    assert!(first.status.success(), "{}", text(&first));
    let ok = runner(&bin, &store, &["--check"])
        .output()
        .expect("--check");
    assert!(ok.status.success(), "{}", text(&ok));

    // The step's attempt run a second time after its completion.
    let journal = dir.path().join("jobs.runlog.effects");
    let text_before = std::fs::read_to_string(&journal).unwrap();
    let line = text_before
        .lines()
        .find(|l| l.starts_with("start job-001 0 "))
        .unwrap()
        .to_string();
    std::fs::write(&journal, format!("{text_before}{line}\n")).unwrap();
    let rerun = runner(&bin, &store, &["--check"])
        .output()
        .expect("--check");
    let found = text(&rerun);
    assert_eq!(rerun.status.code(), Some(1), "{found}");
    let attempt = line.split(' ').nth(3).unwrap();
    let what = format!("job-001 step 0: attempt @{attempt} ran more than once");
    assert!(found.contains(&what), "{found}");
    assert!(found.contains(": 1 problems"), "{found}");

    // A run of step 0 that no committed decision allowed.
    std::fs::write(&journal, format!("{text_before}start job-001 0 999 1\n")).unwrap();
    let stray = runner(&bin, &store, &["--check"])
        .output()
        .expect("--check");
    let found = text(&stray);
    assert_eq!(stray.status.code(), Some(1), "{found}");
    assert!(
        found.contains("job-001 step 0: attempt @999 ran without a committed step_started"),
        "{found}"
    );
    std::fs::write(&journal, &text_before).unwrap();

    // A second completion of a job (a fact, so no fence stops it here).
    {
        let s = Store::open(&store, Config::default()).unwrap();
        let run = RunId::new("job-002").unwrap();
        let again = NewEvent::new("job_completed", "result=0");
        s.append_facts(&run, vec![again]).unwrap();
    }
    let twice = runner(&bin, &store, &["--check"])
        .output()
        .expect("--check");
    let found = text(&twice);
    assert_eq!(twice.status.code(), Some(1), "{found}");
    assert!(found.contains("job-002 seq"), "{found}");
    assert!(
        found.contains("job_completed after job_completed"),
        "{found}"
    );
    assert!(found.contains("job_completed 2 times"), "{found}");
}
