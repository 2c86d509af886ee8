//! A fresh schema on the server named by `RUNLOG_PG_URL`, for every PostgreSQL test.
#![allow(dead_code)]

use runlog_conformance::skip::skip;
use runlog_pg::{Options, PgLog};

/// Drops the fixture's schema when the case ends.
pub struct DropSchema {
    url: String,
    schema: String,
}

impl DropSchema {
    /// A guard dropping `schema` of the server at `url`.
    pub fn new(url: &str, schema: &str) -> DropSchema {
        DropSchema {
            url: url.to_string(),
            schema: schema.to_string(),
        }
    }
}

impl Drop for DropSchema {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.url, postgres::NoTls) {
            let _ = c.batch_execute(&format!(
                "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
                self.schema
            ));
        }
    }
}

/// Whether a server is configured; reports the skip (`runlog_conformance::skip::skip`: a
/// failure under `RUNLOG_NO_SKIP=1`), or fails when one is required (`RUNLOG_REQUIRE_PG=1`).
pub fn ready() -> bool {
    match std::env::var("RUNLOG_PG_URL") {
        Ok(u) if !u.is_empty() => true,
        _ if require_pg() => panic!(
            "RUNLOG_REQUIRE_PG=1 but RUNLOG_PG_URL is not set: start a server with .ci/pg.sh \
             or set RUNLOG_PG_URL (e.g. 'host=/tmp/pg user=postgres dbname=postgres')"
        ),
        _ => {
            skip("RUNLOG_PG_URL not set (a server: eval \"$(.ci/pg-server.sh start)\")");
            false
        }
    }
}

/// `RUNLOG_REQUIRE_PG=1`: a missing server is a failure (`.ci/pg.sh`, `.ci/node-pg.sh`).
fn require_pg() -> bool {
    std::env::var("RUNLOG_REQUIRE_PG").as_deref() == Ok("1")
}

/// A store on a fresh schema `t_<ulid>`, and the guard that drops it.
pub fn fresh_schema() -> (PgLog, DropSchema) {
    let url = std::env::var("RUNLOG_PG_URL").expect("checked by ready()");
    let schema = format!("t_{}", ulid::Ulid::generate().to_string().to_lowercase());
    let log = PgLog::connect_with(
        &url,
        Options {
            schema: Some(schema.clone()),
            ..Options::default()
        },
    )
    .unwrap_or_else(|e| panic!("connecting to RUNLOG_PG_URL={url}: {e}"));
    (log, DropSchema { url, schema })
}

/// `url` with one more connection parameter: a query parameter of a `postgres://` URL
/// (percent-encoded), or a `key='value'` pair of a libpq-style string.
pub fn with_param(url: &str, key: &str, value: &str) -> String {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let enc: String = value
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}{key}={enc}")
    } else {
        format!("{url} {key}='{value}'")
    }
}

/// A store on a fresh schema of the server named by `url` (a second handle on the same schema
/// when `schema` is given).
pub fn connect_schema(url: &str, schema: &str) -> PgLog {
    PgLog::connect_with(
        url,
        Options {
            schema: Some(schema.to_string()),
            ..Options::default()
        },
    )
    .unwrap_or_else(|e| panic!("connecting to {url}: {e}"))
}

/// A second, independent handle (its own pool, as another process has) on `log`'s schema.
pub fn second_handle(log: &PgLog) -> PgLog {
    connect_schema(
        &std::env::var("RUNLOG_PG_URL").expect("checked by ready()"),
        log.schema().expect("a fresh schema"),
    )
}

/// A fresh schema name and its guard, without a handle.
pub fn fresh_schema_name() -> (String, DropSchema) {
    let url = std::env::var("RUNLOG_PG_URL").expect("checked by ready()");
    let schema = format!("t_{}", ulid::Ulid::generate().to_string().to_lowercase());
    (schema.clone(), DropSchema { url, schema })
}

/// A PostgreSQL server of a test's own (`.ci/pg-server.sh start`: a temp dir, a Unix socket),
/// stopped and removed on drop. For tests that restart or kill the server: they must not pull
/// the shared server from under the tests running beside them.
pub struct PrivateServer {
    /// A `postgresql://` URL of the server.
    pub url: String,
    /// Its directory (`data/`, `server.log`, the socket).
    pub dir: String,
}

const PG_SERVER_SH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.ci/pg-server.sh");

impl PrivateServer {
    /// Starts one, when the machine can (PostgreSQL 15 binaries, root to run them as
    /// `postgres`): `None` (skipped) when it cannot, a panic when `RUNLOG_REQUIRE_PG=1` or
    /// `RUNLOG_NO_SKIP=1`.
    pub fn start() -> Option<PrivateServer> {
        if !ready() {
            return None;
        }
        let out = std::process::Command::new("bash")
            .arg(PG_SERVER_SH)
            .arg("start")
            .output()
            .expect("running .ci/pg-server.sh");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let var = |name: &str| {
            text.lines()
                .find_map(|l| {
                    l.strip_prefix(&format!("export {name}='"))?
                        .strip_suffix('\'')
                })
                .map(str::to_string)
        };
        match (
            out.status.success(),
            var("RUNLOG_PG_URL"),
            var("RUNLOG_PG_DIR"),
        ) {
            (true, Some(url), Some(dir)) => Some(PrivateServer { url, dir }),
            _ if require_pg() => panic!(
                "RUNLOG_REQUIRE_PG=1 but a private server could not be started: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
            _ => {
                skip(format!(
                    "no private PostgreSQL server ({})",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
                None
            }
        }
    }

    /// `pg_ctl restart -m <mode>` as `postgres`, waiting until it accepts connections.
    pub fn restart(&self, mode: &str) {
        let status = std::process::Command::new("setpriv")
            .args(["--reuid=postgres", "--regid=postgres", "--init-groups"])
            .arg("/usr/lib/postgresql/15/bin/pg_ctl")
            .args(["-D", &format!("{}/data", self.dir)])
            .args(["-l", &format!("{}/server.log", self.dir)])
            .args(["-m", mode, "-w", "restart"])
            .stdout(std::process::Stdio::null())
            .status()
            .expect("running pg_ctl");
        assert!(status.success(), "pg_ctl restart -m {mode} failed");
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        let _ = std::process::Command::new("bash")
            .arg(PG_SERVER_SH)
            .args(["stop", &self.dir])
            .status();
    }
}
