//! `runlog append`: one fact, or one fenced decision.

use std::fs;
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
    /// Read the payload bytes from this file.
    #[arg(long, value_name = "FILE")]
    payload_file: Option<PathBuf>,
    /// Create the run (and the store) if missing.
    #[arg(long)]
    create: bool,
}

/// `runlog append`: prints the assigned seq (the original seq for a duplicate fact).
pub fn run(store_dir: &Path, args: AppendArgs) -> Result<bool, CliError> {
    // Bad input is refused before any store or run is created.
    let event = build_event(&args)?;
    event.validate(Config::default().payload_len_bytes_max)?;
    let store = if args.create {
        open_store(store_dir)?
    } else {
        open_existing(store_dir)?
    };
    if args.create {
        match store.create_run(&args.run) {
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

fn build_event(args: &AppendArgs) -> Result<NewEvent, CliError> {
    let payload = match (&args.payload, &args.payload_file) {
        (Some(text), _) => text.clone().into_bytes(),
        (None, Some(path)) => fs::read(path)
            .map_err(|e| CliError::Input(format!("cannot read {}: {e}", path.display())))?,
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
