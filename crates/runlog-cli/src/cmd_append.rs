//! `runlog append`: one fact, or one fenced decision.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use clap::Args;
use runlog::{Config, Error, NewEvent, RunId, Seq};

use crate::support::{CliError, open_existing, open_store};

/// Arguments of `runlog append`.
#[derive(Debug, Args)]
pub struct AppendArgs {
    /// The run.
    run: RunId,
    /// Event kind (1–64 bytes), e.g. `step_created`.
    #[arg(long)]
    kind: String,
    /// Correlation id (step, hook or wait id).
    #[arg(long)]
    correlation_id: Option<String>,
    /// Idempotency key: a fact whose key exists appends nothing and prints the original seq.
    #[arg(long)]
    key: Option<String>,
    /// Append as a fenced decision: committed at N+1 only if the run's last seq is N;
    /// otherwise nothing is written and the exit code is 3.
    #[arg(long, value_name = "N")]
    expected_seq: Option<Seq>,
    /// Payload text (stored as its UTF-8 bytes).
    #[arg(long, conflicts_with = "payload_file")]
    payload: Option<String>,
    /// Read the payload bytes from this file (`-`: standard input). At most the payload limit
    /// (16 MiB) is read: a larger file is refused (exit 2) without reading the rest.
    #[arg(long, value_name = "FILE")]
    payload_file: Option<PathBuf>,
    /// Create the run (and the store) if missing.
    #[arg(long)]
    create: bool,
}

/// `runlog append`: prints the assigned seq (the original seq for a duplicate fact).
pub fn run(store_dir: &Path, args: AppendArgs) -> Result<bool, CliError> {
    // Bad input is refused before any store or run is created.
    let limit = Config::default().payload_len_bytes_max;
    let event = build_event(&args, limit)?;
    event.validate(limit)?;
    let store = if args.create {
        open_store(store_dir)?
    } else {
        open_existing(store_dir)?
    };
    if args.create {
        match store.create_run(&args.run, &[]) {
            Ok(()) | Err(Error::RunExists { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let seq = match args.expected_seq {
        Some(expected) => store
            .append_decisions(&args.run, expected, vec![event])?
            .first()
            .copied(),
        None => store
            .append_facts(&args.run, vec![event])?
            .first()
            .map(|a| {
                if a.duplicate {
                    eprintln!(
                        "duplicate key: nothing appended; the original is at seq {}",
                        a.seq
                    );
                }
                a.seq
            }),
    };
    if let Some(seq) = seq {
        println!("{seq}");
    }
    Ok(false)
}

fn build_event(args: &AppendArgs, payload_limit: usize) -> Result<NewEvent, CliError> {
    let payload = match (&args.payload, &args.payload_file) {
        (Some(text), _) => text.clone().into_bytes(),
        (None, Some(path)) => read_payload_file(path, payload_limit)?,
        (None, None) => Vec::new(),
    };
    let mut event = NewEvent::new(args.kind.clone(), payload);
    if let Some(c) = &args.correlation_id {
        event = event.correlation_id(c.clone());
    }
    if let Some(k) = &args.key {
        event = event.key(k.clone());
    }
    Ok(event)
}

/// The bytes of `path` (`-`: standard input), reading at most `limit` + 1 bytes: a larger
/// input is refused after that many, so `/dev/zero` or a huge file costs bounded time and
/// memory.
fn read_payload_file(path: &Path, limit: usize) -> Result<Vec<u8>, CliError> {
    let unreadable = |e: io::Error| CliError::Input(format!("cannot read {}: {e}", path.display()));
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    let mut payload = Vec::new();
    if path == Path::new("-") {
        io::stdin().lock().take(cap).read_to_end(&mut payload)
    } else {
        File::open(path).and_then(|f| f.take(cap).read_to_end(&mut payload))
    }
    .map_err(unreadable)?;
    if payload.len() > limit {
        return Err(CliError::Input(format!(
            "payload file {} is larger than the payload limit of {limit} bytes",
            path.display()
        )));
    }
    Ok(payload)
}
