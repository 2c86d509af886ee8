//! `runlog storm --store postgres://…`: one schema per storm under a base (the URL's
//! `?schema=`, or a fresh `storm_<16 random chars>` dropped afterwards unless `--keep`).
//! Compiled with the `postgres` feature only.

use std::path::Path;

use runlog::Config;
use runlog_cli::target::{Access, open};
use runlog_pg::{drop_schema, split_schema};

/// Where the storms of a PostgreSQL `--store` run: one schema per storm under `base`.
pub struct PgStorms {
    url: String,
    base: String,
    /// Whether `base` was made up here (the schemas are then dropped unless `--keep`).
    temporary: bool,
}

impl PgStorms {
    /// The storms of the PostgreSQL URL `url` (never fails in a build with PostgreSQL).
    pub fn new(url: &str) -> Result<PgStorms, String> {
        let (url, schema) = split_schema(url);
        let temporary = schema.is_none();
        let base = schema.unwrap_or_else(|| {
            let id = ulid::Ulid::generate().to_string().to_lowercase();
            // The random part of the ULID: the schema name stays short (see SCHEMA_LEN_MAX).
            format!("storm_{}", id.get(10..).unwrap_or(&id))
        });
        Ok(PgStorms {
            url,
            base,
            temporary,
        })
    }

    /// The schema of one storm `<scenario>-<transport>-<fence>`, e.g.
    /// `storm_3q…_step_proc_unfenced`.
    fn schema(&self, name: &str) -> String {
        let short = name
            .replace("-storm", "")
            .replace("control", "ctl")
            .replace("threads", "thr")
            .replace("processes", "proc")
            .replace('-', "_");
        format!("{}_{short}", self.base)
    }

    /// The URL of one storm's schema.
    fn url(&self, name: &str) -> String {
        let sep = if self.url.contains('?') { '&' } else { '?' };
        format!("{}{sep}schema={}", self.url, self.schema(name))
    }

    /// A fresh PostgreSQL schema for the storm `name`, migrated; its URL. Refused when it
    /// already holds runs.
    pub fn store(&self, name: &str) -> Result<String, String> {
        let schema = self.schema(name);
        if schema.len() > SCHEMA_LEN_MAX {
            return Err(format!(
                "schema {schema} is longer than {SCHEMA_LEN_MAX} bytes; pick a shorter ?schema="
            ));
        }
        let url = self.url(name);
        let log = open(Path::new(&url), Config::default(), Access::Write)
            .map_err(|e| e.to_string())?
            .log;
        let page = log.list_runs(None, 1).map_err(|e| e.to_string())?;
        if !page.runs.is_empty() || !page.damaged.is_empty() {
            return Err(format!(
                "schema {schema} already holds runs; pick another ?schema="
            ));
        }
        Ok(url)
    }

    /// Drops the schemas of the storms `names` when the base was made up here.
    pub fn drop_temporary(&self, names: &[String]) -> Result<(), String> {
        if !self.temporary {
            return Ok(());
        }
        for name in names {
            drop_schema(&self.url(name))
                .map_err(|e| format!("dropping {}: {e}", self.schema(name)))?;
        }
        Ok(())
    }
}

/// Longest storm schema name: runlog-pg notifies on the channel `runlog_<schema>`, and
/// PostgreSQL refuses channel names of 64 bytes or more.
const SCHEMA_LEN_MAX: usize = 56;

#[cfg(test)]
mod tests {
    use runlog_cli::storm::Scenario;

    use super::*;
    use crate::storm_cmd::storm_name;

    #[test]
    fn storm_schemas_are_distinct_and_short_enough_for_the_notify_channel() {
        let generated = PgStorms::new("postgresql://u@%2Ftmp/db").expect("generated");
        let given =
            PgStorms::new("postgresql://u@%2Ftmp/db?schema=t_01jabcdefghjkmnpqrstvwxyz0&x=1")
                .expect("given");
        assert!(generated.temporary && !given.temporary);
        assert_eq!(given.base, "t_01jabcdefghjkmnpqrstvwxyz0");
        for pg in [&generated, &given] {
            let mut schemas = Vec::new();
            for scenario in Scenario::ALL {
                for (processes, fenced) in
                    [(false, true), (false, false), (true, true), (true, false)]
                {
                    let name = storm_name(scenario, processes, fenced);
                    let schema = pg.schema(&name);
                    assert!(schema.len() <= SCHEMA_LEN_MAX, "{schema}");
                    assert!(pg.url(&name).ends_with(&format!("schema={schema}")));
                    schemas.push(schema);
                }
            }
            let count = schemas.len();
            schemas.sort();
            schemas.dedup();
            assert_eq!(schemas.len(), count, "{schemas:?}");
        }
        assert_eq!(
            given.schema("step-storm-processes-unfenced"),
            "t_01jabcdefghjkmnpqrstvwxyz0_step_proc_unfenced"
        );
        assert_eq!(
            given.url("control-threads-fenced"),
            "postgresql://u@%2Ftmp/db?x=1&schema=t_01jabcdefghjkmnpqrstvwxyz0_ctl_thr_fenced"
        );
    }
}
