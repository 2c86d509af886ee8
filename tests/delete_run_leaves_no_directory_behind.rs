//! Deleting a run removes its directory whole, even when a writer killed mid-write left a
//! file under a name of its own in it: an index is written to `seg-N.idx.tmp-<ulid>` and
//! renamed into place, so a kill -9 between the two leaves that temp file. Before, the
//! renamed-away `runs/.deleted-<run>-<ulid>` directory stayed forever (its removal named only
//! the files runlog knows by name, and a non-empty directory is not removed).

use runlog::{Config, NewEvent, RunId, Store};

/// What `runs/` holds besides run directories: the dot-named leftovers.
fn hidden_entries(root: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    names.sort();
    names
}

/// A run with two events and the temp file of a killed index write beside its segment.
fn run_with_a_killed_index_write(s: &Store, root: &std::path::Path, id: &str) -> RunId {
    let run = RunId::new(id).unwrap();
    s.create_run(&run).unwrap();
    s.append_facts(
        &run,
        vec![NewEvent::new("a", &b"1"[..]), NewEvent::new("b", &b"2"[..])],
    )
    .unwrap();
    let left = root
        .join("runs")
        .join(id)
        .join("seg-00000001.idx.tmp-01JZ0000000000000000000000");
    std::fs::write(&left, b"half an index").unwrap();
    run
}

#[test]
fn delete_run_removes_a_killed_index_writes_temp_file_and_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), Config::default()).unwrap();
    let run = run_with_a_killed_index_write(&s, dir.path(), "r1");
    s.delete_run(&run).unwrap();
    assert_eq!(hidden_entries(dir.path()), Vec::<String>::new());
    assert!(!dir.path().join("runs").join("r1").exists());
    // The id is free again: a new run of that id starts at seq 1.
    s.create_run(&run).unwrap();
    let appended = s
        .append_facts(&run, vec![NewEvent::new("c", &b"3"[..])])
        .unwrap();
    assert_eq!(appended.iter().map(|a| a.seq).collect::<Vec<_>>(), vec![1]);
}

#[test]
fn delete_run_at_removes_it_too() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), Config::default()).unwrap();
    let run = run_with_a_killed_index_write(&s, dir.path(), "r2");
    s.delete_run_at(&run, 2).unwrap();
    assert_eq!(hidden_entries(dir.path()), Vec::<String>::new());
    assert!(!dir.path().join("runs").join("r2").exists());
}
