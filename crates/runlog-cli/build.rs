// Without a PostgreSQL server (RUNLOG_PG_URL unset) the server tests are `#[ignore]`d with
// their reason, so `cargo test`'s summary counts them; RUNLOG_NO_SKIP=1 or
// RUNLOG_REQUIRE_PG=1 (CI) keeps them, and they fail for want of a server.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(runlog_no_pg_server)");
    let set = |k: &str| std::env::var(k).is_ok_and(|v| !v.is_empty());
    for k in ["RUNLOG_PG_URL", "RUNLOG_NO_SKIP", "RUNLOG_REQUIRE_PG"] {
        println!("cargo::rerun-if-env-changed={k}");
    }
    if !set("RUNLOG_PG_URL") && !set("RUNLOG_NO_SKIP") && !set("RUNLOG_REQUIRE_PG") {
        println!("cargo::rustc-cfg=runlog_no_pg_server");
    }
}
