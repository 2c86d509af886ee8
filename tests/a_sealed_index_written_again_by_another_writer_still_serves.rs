//! A sealed segment's index is derived: a writer that finds it missing writes it (a temp file
//! renamed into place), and two writers that both found it missing both write it, the second
//! rename replacing the first writer's file with the same bytes under a new inode. An open
//! run keeps an idle sealed index's descriptor only while the process's set of idle
//! descriptors has room (`src/io/pool.rs`) and opens the path again after that: a file with
//! the same bytes there is the same index, and lookups go on. A file with other bytes (not
//! this index) is never read as it: the lookup fails loudly. Found by
//! `tests/appends_racing_a_delete_and_remake_land_where_acknowledged.rs` in its unpaced form
//! (keyed appends through three stores failed `Io` "replaced by another file").

use std::path::{Path, PathBuf};

use runlog::{Config, Error, NewEvent, RunId, Store};

fn run() -> RunId {
    RunId::new("r").unwrap()
}

fn config() -> Config {
    Config {
        segment_len_bytes_max: 8 << 10,
        ..Config::default()
    }
}

fn fact(i: usize) -> NewEvent {
    NewEvent::new("step_completed", vec![b'p'; 40]).key(format!("k{i}"))
}

fn index(root: &Path, n: u32) -> PathBuf {
    root.join(format!("runs/r/seg-{n:08}.idx"))
}

/// Puts `bytes` at `path` as a writer does: a new file renamed over the old one.
fn write_again(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("idx.tmp-test");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A run of more sealed segments than the process keeps idle descriptors (64), each with its
/// index; returns the number of facts (keys `k0..`).
fn long_run(store: &Store, root: &Path) -> usize {
    store.create_run(&run()).unwrap();
    let mut i = 0;
    while !root.join("runs/r/seg-00000090.log").exists() {
        store
            .append_facts(&run(), (i..i + 20).map(fact).collect())
            .unwrap();
        i += 20;
    }
    i
}

/// A lookup of a key in no segment: every sealed index is read, so the idle set holds the
/// last 64 of them and seg 2's descriptor is closed.
fn touch_every_index(store: &Store) {
    let e = NewEvent::new("step_created", "d").key("nowhere");
    let fenced = store.append_decisions(&run(), 0, vec![e]);
    assert!(matches!(fenced, Err(Error::Fenced { .. })), "{fenced:?}");
}

/// The seq of the fact holding key `k{i}`, through a duplicate append.
fn seq_of_key(store: &Store, i: usize) -> Result<u64, Error> {
    let got = store.append_facts(&run(), vec![fact(i)])?;
    assert!(got[0].duplicate, "k{i} is held");
    Ok(got[0].seq)
}

#[test]
fn the_same_bytes_under_a_new_inode_serve_as_the_index_they_are() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let store = Store::open(root, config()).unwrap();
    let n = long_run(&store, root);
    assert!(n > 1000);
    // Looked up once: the sealed indexes are open, their descriptors in the idle set.
    assert_eq!(seq_of_key(&store, 200).unwrap(), 201);
    // Every sealed index written again by "another writer", byte for byte.
    for s in 1..89 {
        let path = index(root, s);
        write_again(&path, &std::fs::read(&path).unwrap());
    }
    touch_every_index(&store);
    for i in [0, 200, 555, 1000] {
        assert_eq!(seq_of_key(&store, i).unwrap(), i as u64 + 1, "k{i}");
    }
    let page = store.read(&run(), 199, 3).unwrap();
    let keys: Vec<_> = page
        .events
        .iter()
        .map(|e| e.key.as_deref().unwrap().to_string())
        .collect();
    assert_eq!(keys, ["k199", "k200", "k201"]);
}

#[test]
fn other_bytes_under_the_index_name_are_never_read_as_it() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let store = Store::open(root, config()).unwrap();
    long_run(&store, root);
    assert_eq!(seq_of_key(&store, 0).unwrap(), 1);
    // Segment 1's index replaced by segment 2's (a valid index, of another segment).
    write_again(&index(root, 1), &std::fs::read(index(root, 2)).unwrap());
    touch_every_index(&store);
    match seq_of_key(&store, 0) {
        Err(Error::Io { source, .. }) => {
            assert!(source.to_string().contains("replaced"), "{source}")
        }
        other => panic!("segment 1's key looked up in another file: {other:?}"),
    }
}
