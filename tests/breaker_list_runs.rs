//! `list_runs(after, 0)` returns `next: None` ("this was the last page") while runs exist
//! after the cursor, so a pager that asks for 0 concludes the store is empty.
//! Found by the breaker review.

use runlog::{Config, RunId, Store};

#[test]
fn list_runs_with_limit_zero_still_reports_a_next_page() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Config::default()).unwrap();
    store.create_run(&RunId::new("a").unwrap()).unwrap();
    store.create_run(&RunId::new("b").unwrap()).unwrap();

    let page = store.list_runs(None, 0).unwrap();

    assert!(page.runs.is_empty());
    // Nothing consumed: no cursor, but the page must not claim to be the last.
    assert_eq!(page.next, None);
    assert!(page.has_more, "limit 0 claims the last page");
    let first = store.list_runs(None, 1).unwrap();
    assert_eq!(
        (first.next.as_ref().map(RunId::as_str), first.has_more),
        (Some("a"), true)
    );
    let last = store.list_runs(first.next.as_ref(), 1).unwrap();
    assert_eq!(
        (last.next.as_ref().map(RunId::as_str), last.has_more),
        (Some("b"), false)
    );
}
