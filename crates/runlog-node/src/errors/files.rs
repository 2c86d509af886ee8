//! The files generated from the error table (`runlog_world::error_table`): the JavaScript
//! constants, their TypeScript declarations and `docs/ERRORS.md`. The test below fails when
//! a checked-in file differs from what the table gives; `RUNLOG_WRITE_GENERATED=1 cargo
//! test -p runlog-node generated_error_files` rewrites them.

use std::fmt::Write as _;

use runlog_world::error_table::{Code, ERROR_KINDS, ErrorKind, KindCode, Surface};

const HEADER: &str = "Generated from the error table (crates/runlog-world/src/error_table.rs) by \
crates/runlog-node/src/errors/files.rs; do not edit. Rewrite with \
RUNLOG_WRITE_GENERATED=1 cargo test -p runlog-node generated_error_files";

fn json_str(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

fn status_text(c: Code) -> String {
    c.status().map_or("null".to_owned(), |s| s.to_string())
}

fn js_object(doc: &str, name: &str, value: impl Fn(Code) -> String) -> String {
    let mut out = format!("/** {doc} */\nexport const {name} = Object.freeze({{\n");
    for c in Code::ALL {
        let _ = writeln!(out, "  {}: {},", c.as_str(), value(c));
    }
    out.push_str("});\n");
    out
}

/// `packages/world-runlog/src/error-codes.js`.
fn error_codes_js() -> String {
    [
        format!("// {HEADER}\n"),
        js_object(
            "Every `code` a rejection of the addon can carry, with what it means.",
            "ERROR_CODES",
            |c| json_str(c.meaning()),
        ),
        js_object(
            "The HTTP-like `status` a World error of each code carries (null: none).",
            "ERROR_STATUS",
            status_text,
        ),
        js_object(
            "Whether the Workflow runtime retries a call that failed with each code (5xx, 412, 425).",
            "ERROR_RETRYABLE",
            |c| c.retryable().to_string(),
        ),
    ]
    .join("\n")
}

fn class_names() -> Vec<&'static str> {
    let mut names: Vec<&str> = ERROR_KINDS.iter().map(|k| k.class_name).collect();
    names.sort_unstable();
    names.dedup();
    names
}

fn ts_union(doc: &str, name: &str, members: &[&str]) -> String {
    let mut out = format!("/** {doc} */\nexport type {name} =\n");
    for (i, m) in members.iter().enumerate() {
        let end = if i + 1 == members.len() { ";" } else { "" };
        let _ = writeln!(out, "  | '{m}'{end}");
    }
    out
}

/// `packages/world-runlog/src/error-codes.d.ts`.
fn error_codes_d_ts() -> String {
    let codes: Vec<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
    [
        format!("// {HEADER}\n"),
        ts_union(
            "A stable error code of the addon (see ERROR_CODES).",
            "RunlogErrorCode",
            &codes,
        ),
        ts_union(
            "The `name` of the Workflow SDK error class a rejection stands for (its `className`).",
            "RunlogErrorClassName",
            &class_names(),
        ),
        "export declare const ERROR_CODES: Readonly<Record<RunlogErrorCode, string>>;\n\
         export declare const ERROR_STATUS: Readonly<Record<RunlogErrorCode, number | null>>;\n\
         export declare const ERROR_RETRYABLE: Readonly<Record<RunlogErrorCode, boolean>>;\n"
            .to_owned(),
    ]
    .join("\n")
}

fn kind_code(k: &ErrorKind) -> String {
    match k.code {
        KindCode::Is(c) => format!("`{}`", c.as_str()),
        KindCode::OfFirstFault => "its first run's fault's".to_owned(),
    }
}

fn kind_status(k: &ErrorKind) -> String {
    match k.code {
        KindCode::Is(c) => c.status().map_or("none".to_owned(), |s| s.to_string()),
        KindCode::OfFirstFault => "its code's".to_owned(),
    }
}

const ERRORS_MD_INTRO: &str = "\
Every failure of runlog seen from JavaScript: a rejection of the addon (`world-runlog/store`,
`Store#world()`) is an `Error` with a stable `code`, `className` (the Workflow SDK class it
stands for) and `status` (HTTP-like; none for `CLOSED`), plus the fields the code names; the
World (`createWorld()`) throws that class (`toWorkflowError`), with the rejection as `cause`.

One table in Rust (`crates/runlog-world/src/error_table.rs`) gives all of it: the World's
`WorldError::status()`/`class_name()`, the streams' `StreamError::status()`/`class_name()`,
the addon's rejections, `src/error-codes.js`, `src/error-codes.d.ts` and this page. The
status belongs to the code (a store's `InvalidEvent` is 400 whether a store call, the World
or the streams meet it); the class belongs to the kind (`NOT_FOUND` is
`WorkflowRunNotFoundError` for a run, `HookNotFoundError` for a hook, `WorkflowWorldError` 404
for a step).

The runtime (`@workflow/core`) dispatches on the class names (`EntityConflictError.is`,
`RunExpiredError.is`, `TooEarlyError.is`, `HookNotFoundError.is`, ...), retries a
`WorkflowWorldError` of status 5xx (`isRetryableWorldError`), treats status 400 as a
validation failure that no retry fixes, replays on 412 and waits `retryAfter` on 425. A hook
token held by another run is not an error: `events.create` answers with a `hook_conflict`
event, from which the runtime raises `HookConflictError` itself.
";

/// `docs/ERRORS.md`.
fn errors_md() -> String {
    let mut out = format!("# Errors\n\n<!-- {HEADER} -->\n\n{ERRORS_MD_INTRO}\n## Codes\n\n");
    out.push_str("| code | status | retried by the runtime | meaning |\n|---|---|---|---|\n");
    for c in Code::ALL {
        let status = c.status().map_or("none".to_owned(), |s| s.to_string());
        let retried = if c.retryable() { "yes" } else { "no" };
        let _ = writeln!(
            out,
            "| `{}` | {status} | {retried} | {} |",
            c.as_str(),
            c.meaning()
        );
    }
    out.push_str("\n## Kinds\n\n");
    out.push_str(
        "A `WorldError::Storage` or `StreamError::Store` is the store error it wraps: its row \
         below.\n",
    );
    for surface in [
        Surface::Store,
        Surface::World,
        Surface::Streams,
        Surface::Binding,
    ] {
        let title = match surface {
            Surface::Store => "Store (`runlog::Error`)",
            Surface::World => "World (`runlog_world::WorldError`)",
            Surface::Streams => "Streams (`runlog_world::StreamError`)",
            Surface::Binding => "Binding (`crates/runlog-node`)",
        };
        let _ = write!(
            out,
            "\n### {title}\n\n| kind | code | status | class | when |\n|---|---|---|---|---|\n"
        );
        for k in ERROR_KINDS.iter().filter(|k| k.surface == surface) {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | `{}` | {} |",
                k.name,
                kind_code(k),
                kind_status(k),
                k.class_name,
                k.when
            );
        }
    }
    out
}

#[test]
fn generated_error_files_match_the_table() {
    let files = [
        ("packages/world-runlog/src/error-codes.js", error_codes_js()),
        (
            "packages/world-runlog/src/error-codes.d.ts",
            error_codes_d_ts(),
        ),
        ("docs/ERRORS.md", errors_md()),
    ];
    crate::generated::check_files(&files, "the error table", "generated_error_files");
}

#[test]
fn the_generated_union_holds_every_code_and_class() {
    let ts = error_codes_d_ts();
    for c in Code::ALL {
        assert!(
            ts.contains(&format!("| '{}'", c.as_str())),
            "{}",
            c.as_str()
        );
    }
    for class in [
        "WorkflowWorldError",
        "WorkflowRunNotFoundError",
        "EntityConflictError",
        "HookNotFoundError",
        "RunExpiredError",
        "TooEarlyError",
        "PreconditionFailedError",
        "RunNotSupportedError",
        "AttributeValidationError",
    ] {
        assert!(ts.contains(&format!("| '{class}'")), "{class}");
    }
}

#[test]
fn the_addons_error_table_lists_every_code_and_kind() {
    let table: serde_json::Value = serde_json::from_str(&super::error_table()).unwrap();
    let codes: Vec<&str> = table["codes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["code"].as_str().unwrap())
        .collect();
    let want: Vec<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(codes, want);
    assert_eq!(table["codes"][14]["status"], serde_json::Value::Null);
    assert_eq!(table["kinds"].as_array().unwrap().len(), ERROR_KINDS.len());
}
