//! A crash-prone, in-memory file system for crash tests and fuzzing (cargo feature `sim`).
//!
//! [`SimFs`] implements [`Fs`] and [`FsFile`] and keeps, like redb's and pebble's test file
//! systems, two images of everything:
//!
//! - every file has its *live* bytes (what reads see), its *durable* bytes (what survives a
//!   power loss for sure) and the list of unsynced operations (writes and `set_len`) between
//!   the two. `sync_data` / `sync_all` of any handle make the live bytes durable.
//! - every directory has its live entries and its durable entries. Creating, renaming or
//!   removing an entry is an unsynced directory operation until `sync_dir` of the directory
//!   it touches (a rename touches both parents; syncing either makes it durable, and also
//!   makes durable the earlier operation that created the renamed or removed entry, as a
//!   journaling file system would).
//!
//! [`SimFs::crash`] models a power loss: every open handle dies (later calls return `EIO`),
//! every lock is released, and the live state is replaced by a durable state in which each
//! unsynced write was independently kept, dropped, torn at 512-byte sector boundaries or
//! replaced with garbage, each unsynced `set_len` kept or dropped, a file that had unsynced
//! operations may have grown with zeros or garbage up to its live length (rounded up to a
//! 4 KiB block), and each unsynced directory operation was kept or dropped (atomically, in
//! issue order; a rename applies only if its source entry survived).
//!
//! Faults ([`Fault`]) are injected by operation index: every mutating call (create, write,
//! `set_len`, rename, remove, sync) is one *op*; every `sync_data`, `sync_all` and `sync_dir`
//! call is also one *sync point*; and each [`CallKind`] (write, `set_len`, `sync_data`,
//! `sync_all`, `sync_dir`) is counted on its own, so a test can fail "the next fdatasync and the
//! next truncate" while the `fsync`s around them succeed ([`Trigger::Call`]).
//! [`FaultKind::PowerLoss`] halts the machine at that point: the call and everything after it
//! fail with `EIO` until [`SimFs::crash`], which is how a test crashes "at sync point k".
//!
//! Paths are absolute or relative to the root `/`; `.` and `..` are resolved lexically.
//! Errors are raw OS errors (`ENOENT`, `EEXIST`, `ENOSPC`, `EIO`, ...) so callers map them
//! exactly as they map the real ones.
//!
//! [`SimFs::new_case_insensitive`] gives a file system that, like APFS and NTFS by default,
//! compares names without regard to (ASCII) case but keeps the case a name was created with:
//! `/runs/run1` finds the directory created as `/runs/Run1`, `read_dir` lists `Run1`, creating
//! `run1` beside it fails with `EEXIST`, and a rename onto a name that differs only in case
//! replaces that entry under POSIX rules (`ENOTEMPTY` for a non-empty directory), or, when it
//! is the renamed entry itself, only changes the case of its name.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::path::{Component, Path};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use super::{Descriptors, Fs, FsFile, OpenMode, Shared};

/// Unit of a torn write: a write survives a crash sector by sector.
const SECTOR_LEN: u64 = 512;
/// A file that grows after a crash grows up to its live length rounded up to this.
const BLOCK_LEN: u64 = 4096;
/// Largest simulated file, so a wild offset fails with `EFBIG` instead of exhausting memory.
const FILE_LEN_MAX: u64 = 1 << 30;
/// Inode number of the root directory.
const ROOT: Ino = 0;

type Ino = u64;

/// When an injected [`Fault`] fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// At the op with this 0-based index (see [`SimFs::op_count`]).
    Op(u64),
    /// At the sync point with this 0-based index (see [`SimFs::sync_count`]).
    Sync(u64),
    /// At the call of this kind with this 0-based index among the calls of that kind (see
    /// [`SimFs::call_count`]): the next `set_len` whatever the writes and syncs before it, or
    /// an fdatasync but not the `fsync` of another file.
    Call(CallKind, u64),
}

/// A kind of call counted on its own, for [`Trigger::Call`] (a call of each kind is also an
/// op, and a sync is also a sync point).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallKind {
    /// [`FsFile::write_all_at`].
    Write,
    /// [`FsFile::set_len`] (truncate or extend; `ftruncate`).
    SetLen,
    /// [`FsFile::sync_data`] (`fdatasync`).
    SyncData,
    /// [`FsFile::sync_all`] (`fsync` of a file).
    SyncAll,
    /// [`Fs::sync_dir`] (`fsync` of a directory).
    SyncDir,
}

impl CallKind {
    const COUNT: usize = 5;

    fn index(self) -> usize {
        self as usize
    }
}

/// What an injected [`Fault`] does to the call it fires on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// The call fails with `EIO` and has no effect.
    Eio,
    /// The call fails with `ENOSPC` (disk full) and has no effect.
    Enospc,
    /// Power loss: the call and every later call fail with `EIO` until [`SimFs::crash`].
    PowerLoss,
}

/// An injected failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// Which call it fires on.
    pub at: Trigger,
    /// What it does.
    pub kind: FaultKind,
    /// When true the fault also fires on every later call of the same class (every later
    /// op for [`Trigger::Op`], every later sync for [`Trigger::Sync`]): a dead or full disk.
    pub sticky: bool,
}

impl Fault {
    /// A fault that fires once, at `at`.
    pub fn once(at: Trigger, kind: FaultKind) -> Fault {
        Fault {
            at,
            kind,
            sticky: false,
        }
    }

    /// A fault that fires at `at` and on every later call of the same class.
    pub fn sticky(at: Trigger, kind: FaultKind) -> Fault {
        Fault {
            at,
            kind,
            sticky: true,
        }
    }

    /// A power loss at `at` (sticky by nature).
    pub fn power_loss(at: Trigger) -> Fault {
        Fault::once(at, FaultKind::PowerLoss)
    }

    /// Whether the fault fires on the call that is op number `op`, sync point number `sync`
    /// (when it is a sync) and call number `nth` of its kind (when it has one).
    fn fires(&self, op: u64, sync: Option<u64>, call: Option<(CallKind, u64)>) -> bool {
        let index = match self.at {
            Trigger::Op(at) => Some((op, at)),
            Trigger::Sync(at) => sync.map(|s| (s, at)),
            Trigger::Call(kind, at) => call.filter(|(k, _)| *k == kind).map(|(_, n)| (n, at)),
        };
        index.is_some_and(|(i, at)| i == at || (self.sticky && i > at))
    }
}

/// How [`SimFs::crash_with`] treats what was not synced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashPolicy {
    /// Each unsynced operation is kept, dropped, torn or garbled, chosen by this seed.
    Random(u64),
    /// Nothing unsynced survives: the durable image exactly.
    DropUnsynced,
    /// Everything unsynced survives: the live image exactly.
    KeepUnsynced,
}

/// The simulated file system. Cloning gives another handle to the same file system.
///
/// # Examples
/// ```
/// use std::path::Path;
/// use runlog::io::{Fs, OpenMode, sim::SimFs};
///
/// let fs = SimFs::new(7);
/// let f = fs.open(Path::new("/a"), OpenMode::CreateNew).unwrap();
/// f.write_all_at(b"hello", 0).unwrap();
/// f.sync_data().unwrap();
/// fs.sync_dir(Path::new("/")).unwrap();
/// f.write_all_at(b"HELLO", 0).unwrap(); // never synced
/// fs.crash_with(runlog::io::sim::CrashPolicy::DropUnsynced);
/// let f = fs.open(Path::new("/a"), OpenMode::Read).unwrap();
/// assert_eq!(f.map(5).unwrap(), &b"hello"[..]);
/// ```
#[derive(Clone, Debug)]
pub struct SimFs {
    state: Arc<Mutex<State>>,
    /// Where idle files that no longer change keep their descriptors ([`Fs::shared`]): a
    /// small set, so that the crash tests also open them again.
    descriptors: Arc<Descriptors>,
}

/// Most idle descriptors a simulated file system keeps ([`SimFs::shared`]).
const SIM_IDLE_DESCRIPTORS_MAX: usize = 4;

#[derive(Clone, Debug)]
struct State {
    nodes: HashMap<Ino, Node>,
    /// Unsynced directory operations, in issue order.
    dir_ops: Vec<DirOp>,
    /// Inode → id of the handle holding its advisory lock.
    locks: HashMap<Ino, u64>,
    /// Incremented by every crash; handles of an older epoch are dead.
    epoch: u64,
    next_ino: Ino,
    next_handle: u64,
    ops: u64,
    syncs: u64,
    /// Calls started per [`CallKind`] (indexed by `CallKind::index`).
    calls: [u64; CallKind::COUNT],
    faults: Vec<Fault>,
    halted: bool,
    /// The store's waits return at once ([`SimFs::skip_waits`]).
    waits_skipped: bool,
    seed: u64,
    /// Names are compared without regard to ASCII case (and stored as created).
    fold_case: bool,
}

#[derive(Clone, Debug)]
enum Node {
    File(FileNode),
    Dir(DirNode),
}

#[derive(Clone, Debug, Default)]
struct FileNode {
    live: Vec<u8>,
    durable: Vec<u8>,
    pending: Vec<FileOp>,
    /// Live directory entries pointing at this file.
    nlink: u32,
}

#[derive(Clone, Debug)]
enum FileOp {
    Write { offset: u64, data: Vec<u8> },
    SetLen(u64),
}

#[derive(Clone, Debug, Default)]
struct DirNode {
    live: BTreeMap<String, Ino>,
    durable: BTreeMap<String, Ino>,
}

/// A directory entry: (directory inode, name).
type Entry = (Ino, String);

#[derive(Clone, Debug)]
enum DirOp {
    Link { at: Entry, ino: Ino },
    Unlink { at: Entry, ino: Ino },
    Rename { from: Entry, to: Entry, ino: Ino },
}

impl DirOp {
    fn touches(&self, dir: Ino) -> bool {
        match self {
            DirOp::Link { at, .. } | DirOp::Unlink { at, .. } => at.0 == dir,
            DirOp::Rename { from, to, .. } => from.0 == dir || to.0 == dir,
        }
    }

    /// The entries this op reads or writes (a rename: source and target).
    fn entries(&self) -> [Option<&Entry>; 2] {
        match self {
            DirOp::Link { at, .. } | DirOp::Unlink { at, .. } => [Some(at), None],
            DirOp::Rename { from, to, .. } => [Some(from), Some(to)],
        }
    }

    /// Whether the two ops read or write a common entry (so their order matters); with
    /// `fold_case`, names that differ only in case are one entry.
    fn overlaps(&self, other: &DirOp, fold_case: bool) -> bool {
        let theirs = other.entries();
        self.entries().iter().flatten().any(|e| {
            theirs
                .iter()
                .flatten()
                .any(|o| o.0 == e.0 && same_name(&o.1, &e.1, fold_case))
        })
    }
}

/// Whether two entry names name the same entry.
fn same_name(a: &str, b: &str, fold_case: bool) -> bool {
    a == b || (fold_case && a.eq_ignore_ascii_case(b))
}

/// The entry of `entries` that `name` names: its stored name (the case it was created with)
/// and inode. With `fold_case` at most one stored name differs from `name` only in case.
fn find_entry<'a>(
    entries: &'a BTreeMap<String, Ino>,
    name: &str,
    fold_case: bool,
) -> Option<(&'a String, Ino)> {
    if let Some((stored, ino)) = entries.get_key_value(name) {
        return Some((stored, *ino));
    }
    if !fold_case {
        return None;
    }
    entries
        .iter()
        .find(|(stored, _)| stored.eq_ignore_ascii_case(name))
        .map(|(stored, ino)| (stored, *ino))
}

/// What kind of call is starting (decides what it counts as): a read counts as nothing, a
/// mutation as an op (and as a call of its kind, if it has one), a sync as an op, a sync
/// point and a call of its kind.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Call {
    Read,
    Mutate(Option<CallKind>),
    Sync(CallKind),
}

fn os(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

/// A tiny deterministic generator (splitmix64), stable across crate versions so a seed
/// reproduces the same crash forever.
struct SimRng(u64);

impl SimRng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }

    fn garbage(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// What happens to one unsynced write at a crash.
#[derive(Clone, Copy)]
enum Fate {
    Keep,
    Drop,
    /// Each sector of the write independently kept or dropped.
    Torn,
    /// Each sector of the write independently kept, dropped or garbled.
    Garbled,
}

/// Makes the crash decisions for one [`CrashPolicy`].
struct Chooser {
    policy: CrashPolicy,
    rng: SimRng,
}

impl Chooser {
    fn write_fate(&mut self) -> Fate {
        match self.policy {
            CrashPolicy::KeepUnsynced => Fate::Keep,
            CrashPolicy::DropUnsynced => Fate::Drop,
            CrashPolicy::Random(_) => match self.rng.below(20) {
                0..=5 => Fate::Keep,
                6..=11 => Fate::Drop,
                12..=16 => Fate::Torn,
                _ => Fate::Garbled,
            },
        }
    }

    /// Whether an unsynced `set_len` or directory operation survives.
    fn keep_meta(&mut self) -> bool {
        match self.policy {
            CrashPolicy::KeepUnsynced => true,
            CrashPolicy::DropUnsynced => false,
            CrashPolicy::Random(_) => self.rng.below(2) == 0,
        }
    }

    /// How many bytes of zeros or garbage a file with unsynced operations grows by.
    fn growth(&mut self, len: usize, live_len: usize) -> Option<(usize, bool)> {
        if !matches!(self.policy, CrashPolicy::Random(_)) || self.rng.below(5) != 0 {
            return None;
        }
        let limit = (live_len.max(len) as u64).div_ceil(BLOCK_LEN) * BLOCK_LEN;
        let target = len as u64 + self.rng.below(limit.saturating_sub(len as u64) + 1);
        Some((target as usize, self.rng.below(2) == 0))
    }
}

impl SimFs {
    /// An empty file system holding only the root directory `/`. `seed` is mixed into the
    /// seed of every [`SimFs::crash`], so two file systems with different seeds crash
    /// differently under the same crash seed.
    pub fn new(seed: u64) -> SimFs {
        SimFs::with_case(seed, false)
    }

    /// Like [`SimFs::new`], but case-insensitive and case-preserving, as APFS and NTFS are by
    /// default (see the module docs): a lookup compares names ignoring ASCII case, a name keeps
    /// the case it was created with.
    ///
    /// # Examples
    /// ```
    /// use std::path::Path;
    /// use runlog::io::{Fs, OpenMode, sim::SimFs};
    ///
    /// let fs = SimFs::new_case_insensitive(7);
    /// fs.create_dir(Path::new("/Run1")).unwrap();
    /// assert!(fs.is_dir(Path::new("/run1")).unwrap());
    /// assert!(fs.create_dir(Path::new("/RUN1")).is_err()); // EEXIST
    /// fs.open(Path::new("/run1/f"), OpenMode::CreateNew).unwrap();
    /// assert_eq!(fs.read_dir(Path::new("/")).unwrap(), ["Run1"]);
    /// ```
    pub fn new_case_insensitive(seed: u64) -> SimFs {
        SimFs::with_case(seed, true)
    }

    /// Whether names are compared without regard to case ([`SimFs::new_case_insensitive`]).
    pub fn is_case_insensitive(&self) -> bool {
        self.state.lock().fold_case
    }

    fn with_case(seed: u64, fold_case: bool) -> SimFs {
        let mut nodes = HashMap::new();
        nodes.insert(ROOT, Node::Dir(DirNode::default()));
        let state = State {
            nodes,
            dir_ops: Vec::new(),
            locks: HashMap::new(),
            epoch: 0,
            next_ino: ROOT + 1,
            next_handle: 0,
            ops: 0,
            syncs: 0,
            calls: [0; CallKind::COUNT],
            faults: Vec::new(),
            halted: false,
            waits_skipped: false,
            seed,
            fold_case,
        };
        SimFs {
            state: Arc::new(Mutex::new(state)),
            descriptors: Arc::new(Descriptors::new(SIM_IDLE_DESCRIPTORS_MAX)),
        }
    }

    /// Makes the store's waits on this file system ([`Fs::sleep`]: an open retried across a
    /// delete racing it, a verify letting a tail settle) return at once. For callers with one
    /// thread and no other process, whose waits nothing can end early or change (the
    /// fuzzers): a wait there only slows them.
    pub fn skip_waits(&self) {
        self.state.lock().waits_skipped = true;
    }

    /// Simulates a power loss and reboot with a random fate for every unsynced operation,
    /// chosen by `seed` (see the module docs). Kills every open handle, releases every lock,
    /// clears the injected faults and the halt of a [`FaultKind::PowerLoss`].
    pub fn crash(&self, seed: u64) {
        let seed = seed ^ self.state.lock().seed.rotate_left(32);
        self.crash_with(CrashPolicy::Random(seed));
    }

    /// Like [`SimFs::crash`] with an explicit policy.
    pub fn crash_with(&self, policy: CrashPolicy) {
        let seed = match policy {
            CrashPolicy::Random(seed) => seed,
            _ => 0,
        };
        let mut chooser = Chooser {
            policy,
            rng: SimRng(seed),
        };
        let mut st = self.state.lock();
        st.crash_files(&mut chooser);
        st.crash_dirs(&mut chooser);
        st.collect_garbage();
        st.locks.clear();
        st.epoch += 1;
        st.faults.clear();
        st.halted = false;
    }

    /// An independent copy of the file system as it is now: live and durable images,
    /// unsynced operations, counters, faults and halt, but no lock (no handle reaches the
    /// copy). Crashing several forks explores several outcomes of one moment, like pebble's
    /// `CrashClone`.
    pub fn fork(&self) -> SimFs {
        let mut copy = self.state.lock().clone();
        copy.locks.clear();
        copy.epoch += 1;
        SimFs {
            state: Arc::new(Mutex::new(copy)),
            descriptors: Arc::new(Descriptors::new(SIM_IDLE_DESCRIPTORS_MAX)),
        }
    }

    /// Every live file by path (absolute, `/`-separated) with its live bytes: what a test
    /// compares to prove an operation wrote nothing.
    pub fn live_files(&self) -> BTreeMap<String, Vec<u8>> {
        let st = self.state.lock();
        let mut files = BTreeMap::new();
        let mut todo = vec![(ROOT, String::new())];
        while let Some((ino, path)) = todo.pop() {
            match st.nodes.get(&ino) {
                Some(Node::Dir(d)) => {
                    todo.extend(d.live.iter().map(|(n, i)| (*i, format!("{path}/{n}"))));
                }
                Some(Node::File(f)) => {
                    files.insert(path, f.live.clone());
                }
                None => {}
            }
        }
        files
    }

    /// Arms `fault`. Several faults may be armed at once; the first that fires wins.
    pub fn inject(&self, fault: Fault) {
        self.state.lock().faults.push(fault);
    }

    /// Disarms every injected fault (a power-loss halt stays until [`SimFs::crash`]).
    pub fn clear_faults(&self) {
        self.state.lock().faults.clear();
    }

    /// How many ops (mutating calls: create, write, `set_len`, rename, remove, sync) were
    /// started since [`SimFs::new`], including failed ones. The next op has this index.
    pub fn op_count(&self) -> u64 {
        self.state.lock().ops
    }

    /// How many sync points (`sync_data`, `sync_all`, `sync_dir` calls) were started since
    /// [`SimFs::new`], including failed ones. The next sync point has this index.
    pub fn sync_count(&self) -> u64 {
        self.state.lock().syncs
    }

    /// How many calls of `kind` were started since [`SimFs::new`], including failed ones. The
    /// next call of that kind has this index ([`Trigger::Call`]).
    pub fn call_count(&self, kind: CallKind) -> u64 {
        self.state.lock().calls[kind.index()]
    }

    /// Whether a [`FaultKind::PowerLoss`] fired and no crash followed yet.
    pub fn is_halted(&self) -> bool {
        self.state.lock().halted
    }

    /// How many operations a crash could still lose: unsynced file writes and `set_len`s
    /// plus unsynced directory operations.
    pub fn unsynced_op_count(&self) -> usize {
        let st = self.state.lock();
        let files: usize = st
            .nodes
            .values()
            .map(|n| match n {
                Node::File(f) => f.pending.len(),
                Node::Dir(_) => 0,
            })
            .sum();
        files + st.dir_ops.len()
    }
}

impl State {
    /// Counts the call and fires faults. Every call of a handle or of the file system
    /// starts here.
    fn begin(&mut self, call: Call) -> io::Result<()> {
        if self.halted {
            return Err(os(libc::EIO));
        }
        let kind = match call {
            Call::Read => return Ok(()),
            Call::Mutate(kind) => kind,
            Call::Sync(kind) => Some(kind),
        };
        let op = self.ops;
        self.ops += 1;
        let sync = matches!(call, Call::Sync(_)).then(|| {
            self.syncs += 1;
            self.syncs - 1
        });
        let nth = kind.map(|k| {
            self.calls[k.index()] += 1;
            (k, self.calls[k.index()] - 1)
        });
        let Some(fault) = self.faults.iter().find(|f| f.fires(op, sync, nth)) else {
            return Ok(());
        };
        match fault.kind {
            FaultKind::Eio => Err(os(libc::EIO)),
            FaultKind::Enospc => Err(os(libc::ENOSPC)),
            FaultKind::PowerLoss => {
                self.halted = true;
                Err(os(libc::EIO))
            }
        }
    }

    fn dir(&self, ino: Ino) -> io::Result<&DirNode> {
        match self.nodes.get(&ino) {
            Some(Node::Dir(d)) => Ok(d),
            Some(Node::File(_)) => Err(os(libc::ENOTDIR)),
            None => Err(os(libc::ENOENT)),
        }
    }

    fn dir_mut(&mut self, ino: Ino) -> io::Result<&mut DirNode> {
        match self.nodes.get_mut(&ino) {
            Some(Node::Dir(d)) => Ok(d),
            Some(Node::File(_)) => Err(os(libc::ENOTDIR)),
            None => Err(os(libc::ENOENT)),
        }
    }

    fn file_mut(&mut self, ino: Ino) -> io::Result<&mut FileNode> {
        match self.nodes.get_mut(&ino) {
            Some(Node::File(f)) => Ok(f),
            Some(Node::Dir(_)) => Err(os(libc::EISDIR)),
            None => Err(os(libc::ESTALE)),
        }
    }

    fn is_dir_node(&self, ino: Ino) -> bool {
        matches!(self.nodes.get(&ino), Some(Node::Dir(_)))
    }

    /// The live inode of the entry `name` in directory `dir`.
    fn child(&self, dir: Ino, name: &str) -> io::Result<Ino> {
        find_entry(&self.dir(dir)?.live, name, self.fold_case)
            .map(|(_, ino)| ino)
            .ok_or_else(|| os(libc::ENOENT))
    }

    /// The live inode at `path`.
    fn lookup(&self, path: &Path) -> io::Result<Ino> {
        let mut ino = ROOT;
        for name in components(path)? {
            ino = self.child(ino, &name)?;
        }
        Ok(ino)
    }

    /// The live parent directory of `path` and the last component of `path` (as given, which
    /// on a case-insensitive file system may differ in case from a stored name it finds).
    fn parent(&self, path: &Path) -> io::Result<Entry> {
        let mut names = components(path)?;
        let name = names.pop().ok_or_else(|| os(libc::EBUSY))?;
        let mut ino = ROOT;
        for part in names {
            ino = self.child(ino, &part)?;
        }
        self.dir(ino)?;
        Ok((ino, name))
    }

    fn entry(&self, at: &Entry) -> io::Result<Option<Ino>> {
        Ok(self.stored(at)?.map(|(_, ino)| ino))
    }

    /// The live entry `at` names: its stored name (the case it was created with) and inode.
    fn stored(&self, at: &Entry) -> io::Result<Option<(String, Ino)>> {
        let found = find_entry(&self.dir(at.0)?.live, &at.1, self.fold_case);
        Ok(found.map(|(name, ino)| (name.clone(), ino)))
    }

    fn new_node(&mut self, node: Node) -> Ino {
        let ino = self.next_ino;
        self.next_ino += 1;
        self.nodes.insert(ino, node);
        ino
    }

    /// Points the live entry `at` at `ino` (replacing what was there) and logs the op.
    fn link(&mut self, at: Entry, ino: Ino) -> io::Result<()> {
        self.replace_live(&at, ino)?;
        self.dir_ops.push(DirOp::Link { at, ino });
        Ok(())
    }

    /// Makes the live name `at` point at `ino`, dropping the entry it replaces (on a
    /// case-insensitive file system, one whose name differs only in case).
    fn replace_live(&mut self, at: &Entry, ino: Ino) -> io::Result<()> {
        if let Some((name, old)) = self.stored(at)? {
            self.dir_mut(at.0)?.live.remove(&name);
            self.adjust_nlink(old, -1);
        }
        self.dir_mut(at.0)?.live.insert(at.1.clone(), ino);
        self.adjust_nlink(ino, 1);
        Ok(())
    }

    fn unlink(&mut self, at: Entry) -> io::Result<()> {
        let (name, ino) = self.stored(&at)?.ok_or_else(|| os(libc::ENOENT))?;
        self.dir_mut(at.0)?.live.remove(&name);
        self.adjust_nlink(ino, -1);
        self.dir_ops.push(DirOp::Unlink {
            at: (at.0, name),
            ino,
        });
        Ok(())
    }

    fn adjust_nlink(&mut self, ino: Ino, by: i32) {
        if let Some(Node::File(f)) = self.nodes.get_mut(&ino) {
            f.nlink = f.nlink.saturating_add_signed(by);
        }
    }

    fn open(&mut self, path: &Path, mode: OpenMode) -> io::Result<Ino> {
        let creates = matches!(mode, OpenMode::CreateNew | OpenMode::CreateTruncate);
        self.begin(if creates {
            Call::Mutate(None)
        } else {
            Call::Read
        })?;
        let at = self.parent(path)?;
        match (self.entry(&at)?, mode) {
            (Some(ino), _) if self.is_dir_node(ino) => Err(os(libc::EISDIR)),
            (Some(_), OpenMode::CreateNew) => Err(os(libc::EEXIST)),
            (Some(ino), OpenMode::CreateTruncate) => {
                self.file_mut(ino)?.set_len(0);
                Ok(ino)
            }
            (Some(ino), _) => Ok(ino),
            (None, OpenMode::Read | OpenMode::ReadWrite) => Err(os(libc::ENOENT)),
            (None, _) => {
                let ino = self.new_node(Node::File(FileNode::default()));
                self.link(at, ino)?;
                Ok(ino)
            }
        }
    }

    /// Renames `from` to `to`. On a case-insensitive file system `to` may name the renamed
    /// entry itself in another case: then only the case of its name changes (as on APFS and
    /// NTFS); an entry it names that is another file or directory is replaced by POSIX rules.
    fn rename(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        self.begin(Call::Mutate(None))?;
        let src = self.parent(from)?;
        let dst = self.parent(to)?;
        let (name, ino) = self.stored(&src)?.ok_or_else(|| os(libc::ENOENT))?;
        let src = (src.0, name);
        if src == dst {
            return Ok(());
        }
        if self.entry(&dst)? != Some(ino) {
            self.check_rename_target(ino, &dst)?;
        }
        self.dir_mut(src.0)?.live.remove(&src.1);
        self.adjust_nlink(ino, -1);
        self.replace_live(&dst, ino)?;
        self.dir_ops.push(DirOp::Rename {
            from: src,
            to: dst,
            ino,
        });
        Ok(())
    }

    /// POSIX rules for replacing `dst` with `ino`, and no directory into its own subtree.
    fn check_rename_target(&self, ino: Ino, dst: &Entry) -> io::Result<()> {
        let moving_dir = self.is_dir_node(ino);
        if let Some(old) = self.entry(dst)? {
            match (moving_dir, self.is_dir_node(old)) {
                (false, true) => return Err(os(libc::EISDIR)),
                (true, false) => return Err(os(libc::ENOTDIR)),
                (true, true) if !self.dir(old)?.live.is_empty() => {
                    return Err(os(libc::ENOTEMPTY));
                }
                _ => {}
            }
        }
        if moving_dir && self.is_descendant(dst.0, ino) {
            return Err(os(libc::EINVAL));
        }
        Ok(())
    }

    /// Whether `dir` is `ancestor` or lies below it in the live tree.
    fn is_descendant(&self, dir: Ino, ancestor: Ino) -> bool {
        let mut below = HashSet::new();
        let mut todo = vec![ancestor];
        while let Some(d) = todo.pop() {
            below.insert(d);
            if let Ok(node) = self.dir(d) {
                todo.extend(node.live.values().filter(|i| self.is_dir_node(**i)));
            }
        }
        below.contains(&dir)
    }

    fn remove(&mut self, path: &Path, dir: bool) -> io::Result<()> {
        self.begin(Call::Mutate(None))?;
        let at = self.parent(path)?;
        let ino = self.entry(&at)?.ok_or_else(|| os(libc::ENOENT))?;
        match (dir, self.nodes.get(&ino)) {
            (false, Some(Node::Dir(_))) => return Err(os(libc::EISDIR)),
            (true, Some(Node::File(_))) => return Err(os(libc::ENOTDIR)),
            (true, Some(Node::Dir(d))) if !d.live.is_empty() => return Err(os(libc::ENOTEMPTY)),
            _ => {}
        }
        self.unlink(at)
    }

    /// `sync_dir`: makes durable every unsynced directory op touching `dir`, and (first)
    /// every earlier op on an entry one of those ops reads or writes, so the durable order
    /// of the operations on one entry is their issue order.
    fn sync_dir(&mut self, dir: Ino) {
        let mut commit = vec![false; self.dir_ops.len()];
        for i in (0..self.dir_ops.len()).rev() {
            commit[i] |= self.dir_ops[i].touches(dir);
            if commit[i] {
                let op = &self.dir_ops[i];
                for (j, earlier) in self.dir_ops[..i].iter().enumerate() {
                    commit[j] |= earlier.overlaps(op, self.fold_case);
                }
            }
        }
        let ops = std::mem::take(&mut self.dir_ops);
        for (op, committed) in ops.into_iter().zip(commit) {
            if committed {
                self.apply_durable(&op, false);
            } else {
                self.dir_ops.push(op);
            }
        }
    }

    /// Applies a directory op to the durable entries. With `strict`, a rename or unlink
    /// whose source entry is not durable is skipped (it cannot have happened).
    fn apply_durable(&mut self, op: &DirOp, strict: bool) {
        let source_ok = |st: &State, at: &Entry, ino: Ino| {
            st.dir(at.0).is_ok_and(|d| {
                find_entry(&d.durable, &at.1, st.fold_case).is_some_and(|(_, i)| i == ino)
            })
        };
        match op {
            DirOp::Link { at, ino } => self.set_durable(at, Some(*ino)),
            DirOp::Unlink { at, ino } => {
                if source_ok(self, at, *ino) {
                    self.set_durable(at, None);
                }
            }
            DirOp::Rename { from, to, ino } => {
                if strict && !source_ok(self, from, *ino) {
                    return;
                }
                if source_ok(self, from, *ino) {
                    self.set_durable(from, None);
                }
                self.set_durable(to, Some(*ino));
            }
        }
    }

    /// Sets (or removes) the durable entry `at`; on a case-insensitive file system it first
    /// drops the durable name that differs only in case, so no directory ever holds two.
    fn set_durable(&mut self, at: &Entry, ino: Option<Ino>) {
        let fold_case = self.fold_case;
        if let Ok(d) = self.dir_mut(at.0) {
            if let Some((name, _)) = find_entry(&d.durable, &at.1, fold_case) {
                let name = name.clone();
                d.durable.remove(&name);
            }
            if let Some(ino) = ino {
                d.durable.insert(at.1.clone(), ino);
            }
        }
    }

    fn crash_files(&mut self, chooser: &mut Chooser) {
        for node in self.nodes.values_mut() {
            if let Node::File(f) = node {
                f.crash(chooser);
            }
        }
    }

    fn crash_dirs(&mut self, chooser: &mut Chooser) {
        for op in std::mem::take(&mut self.dir_ops) {
            if chooser.keep_meta() {
                self.apply_durable(&op, true);
            }
        }
        for node in self.nodes.values_mut() {
            if let Node::Dir(d) = node {
                d.live = d.durable.clone();
            }
        }
    }

    /// Drops every inode no durable entry reaches and recounts links.
    fn collect_garbage(&mut self) {
        let mut links: HashMap<Ino, u32> = HashMap::new();
        let mut todo = vec![ROOT];
        let mut seen = HashSet::new();
        while let Some(ino) = todo.pop() {
            if !seen.insert(ino) {
                continue;
            }
            if let Ok(d) = self.dir(ino) {
                for child in d.live.values() {
                    *links.entry(*child).or_default() += 1;
                    todo.push(*child);
                }
            }
        }
        self.nodes.retain(|ino, _| seen.contains(ino));
        for (ino, node) in &mut self.nodes {
            if let Node::File(f) = node {
                f.nlink = links.get(ino).copied().unwrap_or(0);
            }
        }
    }
}

impl FileNode {
    fn write(&mut self, buf: &[u8], offset: u64) -> io::Result<()> {
        write_at(&mut self.live, buf, offset)?;
        self.pending.push(FileOp::Write {
            offset,
            data: buf.to_vec(),
        });
        Ok(())
    }

    fn set_len(&mut self, len: u64) {
        self.live.resize(len as usize, 0);
        self.pending.push(FileOp::SetLen(len));
    }

    fn sync(&mut self) {
        self.durable.clone_from(&self.live);
        self.pending.clear();
    }

    /// Replaces both images with what survives a power loss under `chooser`.
    fn crash(&mut self, chooser: &mut Chooser) {
        if self.pending.is_empty() {
            self.live.clone_from(&self.durable);
            return;
        }
        let mut bytes = std::mem::take(&mut self.durable);
        for op in std::mem::take(&mut self.pending) {
            match op {
                FileOp::Write { offset, data } => crash_write(&mut bytes, &data, offset, chooser),
                FileOp::SetLen(len) if chooser.keep_meta() => bytes.resize(len as usize, 0),
                FileOp::SetLen(_) => {}
            }
        }
        if let Some((target, zeros)) = chooser.growth(bytes.len(), self.live.len()) {
            let tail = if zeros {
                vec![0; target - bytes.len()]
            } else {
                chooser.rng.garbage(target - bytes.len())
            };
            bytes.extend_from_slice(&tail);
        }
        self.live.clone_from(&bytes);
        self.durable = bytes;
    }
}

/// Writes `buf` at `offset` of `bytes`, zero-filling a gap.
fn write_at(bytes: &mut Vec<u8>, buf: &[u8], offset: u64) -> io::Result<()> {
    let end = offset
        .checked_add(buf.len() as u64)
        .filter(|end| *end <= FILE_LEN_MAX)
        .ok_or_else(|| os(libc::EFBIG))?;
    let (start, end) = (offset as usize, end as usize);
    if bytes.len() < end {
        bytes.resize(end, 0);
    }
    bytes[start..end].copy_from_slice(buf);
    Ok(())
}

/// Applies one unsynced write to the image being rebuilt at a crash.
fn crash_write(bytes: &mut Vec<u8>, data: &[u8], offset: u64, chooser: &mut Chooser) {
    let fate = chooser.write_fate();
    for (at, piece) in sectors(data, offset) {
        let outcome = match fate {
            Fate::Keep => Some(piece.to_vec()),
            Fate::Drop => None,
            Fate::Torn => (chooser.rng.below(2) == 0).then(|| piece.to_vec()),
            Fate::Garbled => match chooser.rng.below(3) {
                0 => Some(piece.to_vec()),
                1 => Some(chooser.rng.garbage(piece.len())),
                _ => None,
            },
        };
        if let Some(piece) = outcome {
            // Offsets were validated when the write was issued.
            let _ = write_at(bytes, &piece, at);
        }
    }
}

/// Splits a write at 512-byte sector boundaries of the file: `(file offset, bytes)` pieces.
fn sectors(data: &[u8], offset: u64) -> Vec<(u64, &[u8])> {
    let mut pieces = Vec::new();
    let mut rest = data;
    let mut at = offset;
    while !rest.is_empty() {
        let room = (SECTOR_LEN - at % SECTOR_LEN) as usize;
        let (piece, tail) = rest.split_at(room.min(rest.len()));
        pieces.push((at, piece));
        at += piece.len() as u64;
        rest = tail;
    }
    pieces
}

/// The names of `path` after lexical resolution of `.`, `..` and the root.
fn components(path: &Path) -> io::Result<Vec<String>> {
    let mut names = Vec::new();
    for c in path.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir => {
                names.pop();
            }
            Component::Normal(name) => {
                let name = name.to_str().ok_or_else(|| os(libc::EINVAL))?;
                names.push(name.to_string());
            }
            Component::Prefix(_) => return Err(os(libc::EINVAL)),
        }
    }
    Ok(names)
}

impl Fs for SimFs {
    fn sleep(&self, d: std::time::Duration) {
        if !self.state.lock().waits_skipped {
            std::thread::sleep(d);
        }
    }

    fn shared(&self) -> Option<Shared> {
        Some(Shared {
            fs: Arc::new(self.clone()),
            descriptors: self.descriptors.clone(),
        })
    }

    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn FsFile>> {
        let mut st = self.state.lock();
        let ino = st.open(path, mode)?;
        let id = st.next_handle;
        st.next_handle += 1;
        Ok(Arc::new(SimFile {
            state: Arc::clone(&self.state),
            ino,
            id,
            epoch: st.epoch,
            writable: mode != OpenMode::Read,
        }))
    }

    fn create_dir(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.begin(Call::Mutate(None))?;
        let at = st.parent(path)?;
        if st.entry(&at)?.is_some() {
            return Err(os(libc::EEXIST));
        }
        let ino = st.new_node(Node::Dir(DirNode::default()));
        st.link(at, ino)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.state.lock().rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.state.lock().remove(path, false)
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        self.state.lock().remove(path, true)
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut st = self.state.lock();
        st.begin(Call::Read)?;
        let ino = st.lookup(path)?;
        Ok(st.dir(ino)?.live.keys().cloned().collect())
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.begin(Call::Sync(CallKind::SyncDir))?;
        let ino = st.lookup(path)?;
        st.dir(ino)?;
        st.sync_dir(ino);
        Ok(())
    }

    fn identity_at(&self, path: &Path) -> io::Result<(u64, u64)> {
        let mut st = self.state.lock();
        st.begin(Call::Read)?;
        st.lookup(path).map(|ino| (0, ino))
    }

    fn is_dir(&self, path: &Path) -> io::Result<bool> {
        let mut st = self.state.lock();
        st.begin(Call::Read)?;
        match st.lookup(path) {
            Ok(ino) => Ok(st.is_dir_node(ino)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// An open handle of a [`SimFs`] file. Dead (every call fails with `EIO`) after a crash.
#[derive(Debug)]
struct SimFile {
    state: Arc<Mutex<State>>,
    ino: Ino,
    id: u64,
    epoch: u64,
    writable: bool,
}

impl SimFile {
    /// Runs `f` on the file node after the handle checks and the op accounting of `call`.
    fn with<T>(&self, call: Call, f: impl FnOnce(&mut FileNode) -> io::Result<T>) -> io::Result<T> {
        let mut st = self.state.lock();
        if st.epoch != self.epoch {
            return Err(os(libc::EIO));
        }
        if call != Call::Read && !self.writable {
            return Err(os(libc::EBADF));
        }
        st.begin(call)?;
        f(st.file_mut(self.ino)?)
    }

    fn with_locks<T>(&self, f: impl FnOnce(&mut HashMap<Ino, u64>) -> T) -> io::Result<T> {
        let mut st = self.state.lock();
        if st.epoch != self.epoch || st.halted {
            return Err(os(libc::EIO));
        }
        Ok(f(&mut st.locks))
    }
}

impl FsFile for SimFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.with(Call::Read, |f| {
            let start = usize::try_from(offset)
                .unwrap_or(usize::MAX)
                .min(f.live.len());
            let n = buf.len().min(f.live.len() - start);
            buf[..n].copy_from_slice(&f.live[start..start + n]);
            Ok(n)
        })
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.with(Call::Mutate(Some(CallKind::Write)), |f| {
            f.write(buf, offset)
        })
    }

    fn len(&self) -> io::Result<u64> {
        self.with(Call::Read, |f| Ok(f.live.len() as u64))
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.with(Call::Mutate(Some(CallKind::SetLen)), |f| {
            if len > FILE_LEN_MAX {
                return Err(os(libc::EFBIG));
            }
            f.set_len(len);
            Ok(())
        })
    }

    fn sync_data(&self) -> io::Result<()> {
        self.with(Call::Sync(CallKind::SyncData), |f| {
            f.sync();
            Ok(())
        })
    }

    fn sync_all(&self) -> io::Result<()> {
        self.with(Call::Sync(CallKind::SyncAll), |f| {
            f.sync();
            Ok(())
        })
    }

    fn try_lock(&self) -> io::Result<bool> {
        self.with_locks(|locks| *locks.entry(self.ino).or_insert(self.id) == self.id)
    }

    fn unlock(&self) -> io::Result<()> {
        self.with_locks(|locks| {
            if locks.get(&self.ino) == Some(&self.id) {
                locks.remove(&self.ino);
            }
        })
    }

    fn map(&self, len: u64) -> io::Result<Bytes> {
        self.with(Call::Read, |f| {
            let len = usize::try_from(len).map_err(|_| os(libc::EINVAL))?;
            let bytes = f.live.get(..len).ok_or_else(|| os(libc::EINVAL))?;
            Ok(Bytes::copy_from_slice(bytes))
        })
    }

    fn map_range(&self, offset: u64, len: u64) -> io::Result<Bytes> {
        self.with(Call::Read, |f| {
            let from = usize::try_from(offset).map_err(|_| os(libc::EINVAL))?;
            let len = usize::try_from(len).map_err(|_| os(libc::EINVAL))?;
            let end = from.checked_add(len).ok_or_else(|| os(libc::EINVAL))?;
            let bytes = f.live.get(from..end).ok_or_else(|| os(libc::EINVAL))?;
            Ok(Bytes::copy_from_slice(bytes))
        })
    }

    fn is_unlinked(&self) -> io::Result<bool> {
        self.with(Call::Read, |f| Ok(f.nlink == 0))
    }

    fn identity(&self) -> io::Result<(u64, u64)> {
        self.with(Call::Read, |_| Ok(()))?;
        Ok((0, self.ino))
    }

    fn is_at(&self, path: &Path) -> io::Result<bool> {
        self.with(Call::Read, |_| Ok(()))?;
        let st = self.state.lock();
        match st.lookup(path) {
            Ok(ino) => Ok(ino == self.ino),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

impl Drop for SimFile {
    fn drop(&mut self) {
        let mut st = self.state.lock();
        if st.locks.get(&self.ino) == Some(&self.id) {
            st.locks.remove(&self.ino);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> &Path {
        Path::new(s)
    }

    /// Creates `/d/name` with `data`, file data synced, directory entry durable iff `sync_dir`.
    fn put(fs: &SimFs, name: &str, data: &[u8], sync_dir: bool) -> Arc<dyn FsFile> {
        if !fs.is_dir(p("/d")).unwrap() {
            fs.create_dir(p("/d")).unwrap();
            fs.sync_dir(p("/")).unwrap();
        }
        let f = fs
            .open(&Path::new("/d").join(name), OpenMode::CreateNew)
            .unwrap();
        f.write_all_at(data, 0).unwrap();
        f.sync_data().unwrap();
        if sync_dir {
            fs.sync_dir(p("/d")).unwrap();
        }
        f
    }

    fn contents(fs: &SimFs, path: &str) -> Option<Vec<u8>> {
        let f = match fs.open(p(path), OpenMode::Read) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
            Err(e) => panic!("open {path}: {e}"),
        };
        Some(f.map(f.len().unwrap()).unwrap().to_vec())
    }

    fn names(fs: &SimFs, dir: &str) -> Vec<String> {
        let mut v = fs.read_dir(p(dir)).unwrap();
        v.sort();
        v
    }

    #[test]
    fn synced_write_survives_and_unsynced_write_is_dropped() {
        let fs = SimFs::new(1);
        let f = put(&fs, "a", b"durable!", true);
        f.write_all_at(b"LIVE", 0).unwrap();
        f.write_all_at(b"tail", 8).unwrap();
        assert_eq!(contents(&fs, "/d/a").unwrap(), b"LIVEble!tail");
        assert_eq!(fs.unsynced_op_count(), 2);
        fs.crash_with(CrashPolicy::DropUnsynced);
        assert_eq!(contents(&fs, "/d/a").unwrap(), b"durable!");
        assert_eq!(fs.unsynced_op_count(), 0);
    }

    #[test]
    fn keep_unsynced_crash_reproduces_the_live_image() {
        let fs = SimFs::new(1);
        let f = put(&fs, "a", b"0123456789", true);
        f.set_len(4).unwrap();
        f.write_all_at(b"xy", 6).unwrap();
        fs.create_dir(p("/d/sub")).unwrap();
        fs.rename(p("/d/a"), p("/d/sub/b")).unwrap();
        fs.crash_with(CrashPolicy::KeepUnsynced);
        assert_eq!(names(&fs, "/d"), ["sub"]);
        assert_eq!(contents(&fs, "/d/sub/b").unwrap(), b"0123\0\0xy");
    }

    #[test]
    fn file_without_synced_directory_entry_vanishes() {
        let fs = SimFs::new(1);
        put(&fs, "kept", b"k", true);
        put(&fs, "lost", b"l", false);
        assert_eq!(names(&fs, "/d"), ["kept", "lost"]);
        fs.crash_with(CrashPolicy::DropUnsynced);
        assert_eq!(names(&fs, "/d"), ["kept"]);
    }

    #[test]
    fn directory_with_unsynced_entry_vanishes_with_its_contents() {
        let fs = SimFs::new(1);
        fs.create_dir(p("/x")).unwrap();
        let f = fs.open(p("/x/f"), OpenMode::CreateNew).unwrap();
        f.write_all_at(b"data", 0).unwrap();
        f.sync_all().unwrap();
        fs.sync_dir(p("/x")).unwrap();
        fs.crash_with(CrashPolicy::DropUnsynced);
        assert!(!fs.is_dir(p("/x")).unwrap());
        assert!(names(&fs, "/").is_empty());
    }

    #[test]
    fn unsynced_rename_reverts_to_both_old_entries() {
        let fs = SimFs::new(1);
        put(&fs, "old", b"old target", true);
        put(&fs, "tmp", b"new", true);
        fs.rename(p("/d/tmp"), p("/d/old")).unwrap();
        assert_eq!(names(&fs, "/d"), ["old"]);
        fs.crash_with(CrashPolicy::DropUnsynced);
        assert_eq!(names(&fs, "/d"), ["old", "tmp"]);
        assert_eq!(contents(&fs, "/d/old").unwrap(), b"old target");
        assert_eq!(contents(&fs, "/d/tmp").unwrap(), b"new");
    }

    #[test]
    fn synced_rename_also_makes_the_renamed_entry_creation_durable() {
        let fs = SimFs::new(1);
        fs.create_dir(p("/a")).unwrap();
        fs.create_dir(p("/b")).unwrap();
        fs.sync_dir(p("/")).unwrap();
        let f = fs.open(p("/a/tmp"), OpenMode::CreateNew).unwrap();
        f.write_all_at(b"v", 0).unwrap();
        f.sync_data().unwrap();
        fs.rename(p("/a/tmp"), p("/b/final")).unwrap();
        fs.sync_dir(p("/b")).unwrap();
        assert_eq!(fs.unsynced_op_count(), 0);
        fs.crash_with(CrashPolicy::DropUnsynced);
        assert!(names(&fs, "/a").is_empty());
        assert_eq!(contents(&fs, "/b/final").unwrap(), b"v");
    }

    #[test]
    fn rename_over_a_pending_entry_keeps_per_entry_order() {
        for seed in 0..50 {
            let fs = SimFs::new(1);
            fs.create_dir(p("/a")).unwrap();
            fs.create_dir(p("/b")).unwrap();
            fs.sync_dir(p("/")).unwrap();
            fs.open(p("/b/x"), OpenMode::CreateNew).unwrap();
            let f = fs.open(p("/a/y"), OpenMode::CreateNew).unwrap();
            f.write_all_at(b"y", 0).unwrap();
            f.sync_data().unwrap();
            fs.rename(p("/a/y"), p("/b/x")).unwrap();
            fs.sync_dir(p("/a")).unwrap();
            assert_eq!(fs.unsynced_op_count(), 0);
            fs.crash(seed);
            assert_eq!(contents(&fs, "/b/x").unwrap(), b"y", "seed {seed}");
        }
    }

    #[test]
    fn unsynced_remove_comes_back() {
        let fs = SimFs::new(1);
        let f = put(&fs, "a", b"abc", true);
        fs.remove_file(p("/d/a")).unwrap();
        assert!(f.is_unlinked().unwrap());
        assert_eq!(f.map(3).unwrap(), &b"abc"[..]);
        fs.crash_with(CrashPolicy::DropUnsynced);
        assert_eq!(contents(&fs, "/d/a").unwrap(), b"abc");
        fs.remove_file(p("/d/a")).unwrap();
        fs.sync_dir(p("/d")).unwrap();
        fs.crash_with(CrashPolicy::KeepUnsynced);
        assert_eq!(contents(&fs, "/d/a"), None);
    }

    #[test]
    fn handles_die_at_a_crash() {
        let fs = SimFs::new(1);
        let f = put(&fs, "a", b"abc", true);
        fs.crash(9);
        let mut buf = [0u8; 3];
        assert_eq!(
            f.read_at(&mut buf, 0).unwrap_err().raw_os_error(),
            Some(libc::EIO)
        );
        assert_eq!(
            f.write_all_at(b"x", 0).unwrap_err().raw_os_error(),
            Some(libc::EIO)
        );
        assert_eq!(f.sync_data().unwrap_err().raw_os_error(), Some(libc::EIO));
        assert!(f.try_lock().is_err());
        assert_eq!(contents(&fs, "/d/a").unwrap(), b"abc");
    }

    #[test]
    fn locks_have_flock_semantics() {
        let fs = SimFs::new(1);
        put(&fs, "lock", b"", true);
        let open = || fs.open(p("/d/lock"), OpenMode::ReadWrite).unwrap();
        let (a, b) = (open(), open());
        assert!(a.try_lock().unwrap());
        assert!(a.try_lock().unwrap(), "re-locking by the holder succeeds");
        assert!(!b.try_lock().unwrap());
        a.unlock().unwrap();
        assert!(b.try_lock().unwrap());
        assert!(!a.try_lock().unwrap());
        drop(b);
        assert!(a.try_lock().unwrap(), "dropping the holder releases");
        let c = open();
        assert!(!c.try_lock().unwrap());
        fs.crash(1);
        let d = open();
        assert!(d.try_lock().unwrap(), "a crash releases every lock");
        drop(a);
        assert!(
            !open().try_lock().unwrap(),
            "a dead handle's drop releases nothing"
        );
    }

    #[test]
    fn read_only_handles_cannot_write() {
        let fs = SimFs::new(1);
        put(&fs, "a", b"abc", true);
        let f = fs.open(p("/d/a"), OpenMode::Read).unwrap();
        assert_eq!(
            f.write_all_at(b"x", 0).unwrap_err().raw_os_error(),
            Some(libc::EBADF)
        );
        assert_eq!(f.set_len(0).unwrap_err().raw_os_error(), Some(libc::EBADF));
        assert_eq!(f.map(4).unwrap_err().raw_os_error(), Some(libc::EINVAL));
        let mut buf = [0u8; 8];
        assert_eq!(f.read_at(&mut buf, 1).unwrap(), 2);
        assert_eq!(&buf[..2], b"bc");
        assert_eq!(f.read_at(&mut buf, 99).unwrap(), 0);
    }

    #[test]
    fn namespace_errors_match_posix() {
        let fs = SimFs::new(1);
        put(&fs, "a", b"", true);
        let err = |r: io::Result<()>| r.unwrap_err().raw_os_error();
        assert_eq!(
            fs.open(p("/d/none"), OpenMode::Read).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert_eq!(
            fs.open(p("/d/a"), OpenMode::CreateNew).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        assert_eq!(err(fs.create_dir(p("/d"))), Some(libc::EEXIST));
        assert_eq!(err(fs.create_dir(p("/none/x"))), Some(libc::ENOENT));
        assert_eq!(err(fs.remove_dir(p("/d"))), Some(libc::ENOTEMPTY));
        assert_eq!(err(fs.remove_dir(p("/d/a"))), Some(libc::ENOTDIR));
        assert_eq!(err(fs.remove_file(p("/d"))), Some(libc::EISDIR));
        assert_eq!(err(fs.rename(p("/d"), p("/d/sub"))), Some(libc::EINVAL));
        assert_eq!(err(fs.sync_dir(p("/d/a"))), Some(libc::ENOTDIR));
        assert!(!fs.is_dir(p("/d/a")).unwrap());
        assert!(fs.is_dir(p("/d/../d/.")).unwrap());
        let t = fs.open(p("/d/a"), OpenMode::CreateTruncate).unwrap();
        assert_eq!(t.len().unwrap(), 0);
    }

    #[test]
    fn injected_faults_fail_without_effect() {
        let fs = SimFs::new(1);
        let f = put(&fs, "a", b"abc", true);
        let base = fs.op_count();
        fs.inject(Fault::once(Trigger::Op(base + 1), FaultKind::Enospc));
        f.write_all_at(b"1", 0).unwrap();
        let e = f.write_all_at(b"2", 1).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::StorageFull);
        f.write_all_at(b"3", 2).unwrap();
        assert_eq!(f.map(3).unwrap(), &b"1b3"[..]);
        let sync = fs.sync_count();
        fs.inject(Fault::sticky(Trigger::Sync(sync), FaultKind::Eio));
        assert_eq!(f.sync_data().unwrap_err().raw_os_error(), Some(libc::EIO));
        assert_eq!(
            fs.sync_dir(p("/d")).unwrap_err().raw_os_error(),
            Some(libc::EIO)
        );
        f.write_all_at(b"4", 0).unwrap();
        assert_eq!(fs.op_count(), base + 6);
        assert_eq!(fs.sync_count(), sync + 2);
        fs.clear_faults();
        f.sync_data().unwrap();
    }

    #[test]
    fn call_triggers_count_each_kind_on_its_own() {
        let fs = SimFs::new(1);
        let f = put(&fs, "a", b"abc", true);
        let (sync_data, set_len) = (
            fs.call_count(CallKind::SyncData),
            fs.call_count(CallKind::SetLen),
        );
        // Every fdatasync from now on fails, and the next truncate; fsyncs still succeed.
        fs.inject(Fault::sticky(
            Trigger::Call(CallKind::SyncData, sync_data),
            FaultKind::Eio,
        ));
        fs.inject(Fault::once(
            Trigger::Call(CallKind::SetLen, set_len),
            FaultKind::Eio,
        ));
        f.write_all_at(b"X", 0).unwrap();
        assert_eq!(f.sync_data().unwrap_err().raw_os_error(), Some(libc::EIO));
        assert_eq!(f.set_len(1).unwrap_err().raw_os_error(), Some(libc::EIO));
        assert_eq!(
            f.map(3).unwrap(),
            &b"Xbc"[..],
            "the failed truncate did nothing"
        );
        let g = fs.open(p("/d/b"), OpenMode::CreateNew).unwrap();
        g.write_all_at(b"fsync'd", 0).unwrap();
        g.sync_all().unwrap();
        fs.sync_dir(p("/d")).unwrap();
        f.set_len(2).unwrap();
        assert!(f.sync_data().is_err(), "sticky: every later fdatasync");
        assert_eq!(fs.call_count(CallKind::SyncData), sync_data + 2);
        assert_eq!(fs.call_count(CallKind::SetLen), set_len + 2);
        assert_eq!(fs.call_count(CallKind::SyncAll), 1);
        assert_eq!(fs.call_count(CallKind::SyncDir), 3);
        fs.crash_with(CrashPolicy::DropUnsynced);
        assert_eq!(contents(&fs, "/d/a").unwrap(), b"abc");
        assert_eq!(contents(&fs, "/d/b").unwrap(), b"fsync'd");
    }

    #[test]
    fn power_loss_halts_until_the_crash() {
        let fs = SimFs::new(1);
        let f = put(&fs, "a", b"abc", true);
        fs.inject(Fault::power_loss(Trigger::Sync(fs.sync_count())));
        f.write_all_at(b"X", 0).unwrap();
        assert!(f.sync_data().is_err());
        assert!(fs.is_halted());
        assert!(f.len().is_err());
        assert!(fs.read_dir(p("/d")).is_err());
        fs.crash_with(CrashPolicy::DropUnsynced);
        assert!(!fs.is_halted());
        assert_eq!(contents(&fs, "/d/a").unwrap(), b"abc");
    }

    #[test]
    fn random_crash_is_deterministic_per_seed() {
        let run = |seed| {
            let fs = SimFs::new(3);
            let f = put(&fs, "a", &[1; 4096], true);
            f.write_all_at(&[2; 3000], 100).unwrap();
            fs.crash(seed);
            contents(&fs, "/d/a").unwrap()
        };
        assert_eq!(run(5), run(5));
        assert!((0..20).any(|s| run(s) != run(s + 1)));
    }

    /// Classifies each 512-byte sector of a crashed 2048-byte write of `2`s over `1`s.
    fn sector_fates(seed: u64) -> Vec<&'static str> {
        let fs = SimFs::new(0);
        let f = put(&fs, "a", &[1; 2048], true);
        f.write_all_at(&[2; 2048], 0).unwrap();
        fs.crash(seed);
        let bytes = contents(&fs, "/d/a").unwrap();
        bytes[..2048]
            .chunks(512)
            .map(|s| match s {
                s if s.iter().all(|b| *b == 1) => "old",
                s if s.iter().all(|b| *b == 2) => "new",
                _ => "garbage",
            })
            .collect()
    }

    #[test]
    fn writes_survive_whole_dropped_torn_at_sectors_or_garbled() {
        let all: Vec<Vec<&str>> = (0..300).map(sector_fates).collect();
        let uniform = |fate| all.iter().any(|v| v.iter().all(|s| *s == fate));
        assert!(uniform("new"));
        assert!(uniform("old"));
        assert!(all.iter().any(|v| v.contains(&"old") && v.contains(&"new")));
        assert!(all.iter().any(|v| v.contains(&"garbage")));
    }

    #[test]
    fn crash_growth_stays_within_the_live_block() {
        let mut grown = 0;
        for seed in 0..300 {
            let fs = SimFs::new(0);
            let f = put(&fs, "a", &[1; 100], true);
            f.write_all_at(&[2; 100], 5000).unwrap();
            fs.crash(seed);
            let len = contents(&fs, "/d/a").unwrap().len();
            assert!((100..=8192).contains(&len), "seed {seed}: {len}");
            grown += usize::from(len != 100 && len != 5100);
        }
        assert!(grown > 0);
    }

    #[test]
    fn forks_crash_independently() {
        let fs = SimFs::new(1);
        let f = put(&fs, "a", b"abc", true);
        assert!(f.try_lock().unwrap());
        f.write_all_at(b"X", 0).unwrap();
        let (drop, keep) = (fs.fork(), fs.fork());
        drop.crash_with(CrashPolicy::DropUnsynced);
        keep.crash_with(CrashPolicy::KeepUnsynced);
        assert_eq!(contents(&drop, "/d/a").unwrap(), b"abc");
        assert_eq!(contents(&keep, "/d/a").unwrap(), b"Xbc");
        assert_eq!(f.map(3).unwrap(), &b"Xbc"[..], "the original lives on");
        let lock = drop.open(p("/d/a"), OpenMode::Read).unwrap();
        assert!(lock.try_lock().unwrap(), "a fork holds no lock");
        let files = keep.live_files();
        assert_eq!(files.keys().collect::<Vec<_>>(), ["/d/a"]);
        assert_eq!(files["/d/a"], b"Xbc");
    }

    #[test]
    fn case_insensitive_lookups_find_the_name_in_the_case_it_was_created_with() {
        let fs = SimFs::new_case_insensitive(1);
        assert!(fs.is_case_insensitive());
        fs.create_dir(p("/Runs")).unwrap();
        fs.create_dir(p("/runs/Run1")).unwrap();
        let f = fs.open(p("/RUNS/run1/seg"), OpenMode::CreateNew).unwrap();
        f.write_all_at(b"abc", 0).unwrap();
        assert_eq!(names(&fs, "/"), ["Runs"]);
        assert_eq!(names(&fs, "/runs"), ["Run1"]);
        assert_eq!(names(&fs, "/runs/RUN1"), ["seg"]);
        assert!(fs.is_dir(p("/rUnS/rUn1")).unwrap());
        assert_eq!(contents(&fs, "/Runs/Run1/SEG").unwrap(), b"abc");
        let err = |r: io::Result<()>| r.unwrap_err().raw_os_error();
        assert_eq!(err(fs.create_dir(p("/runs/run1"))), Some(libc::EEXIST));
        assert_eq!(
            fs.open(p("/runs/run1/Seg"), OpenMode::CreateNew)
                .unwrap_err()
                .raw_os_error(),
            Some(libc::EEXIST)
        );
        let t = fs
            .open(p("/runs/run1/SEG"), OpenMode::CreateTruncate)
            .unwrap();
        assert_eq!(
            t.len().unwrap(),
            0,
            "truncates the one file, creates no other"
        );
        assert_eq!(names(&fs, "/runs/Run1"), ["seg"]);
        fs.remove_file(p("/RUNS/RUN1/SEG")).unwrap();
        assert!(f.is_unlinked().unwrap());
        fs.remove_dir(p("/runs/run1")).unwrap();
        assert!(names(&fs, "/runs").is_empty());
    }

    #[test]
    fn case_sensitive_names_that_differ_in_case_are_two_entries() {
        let fs = SimFs::new(1);
        assert!(!fs.is_case_insensitive());
        fs.create_dir(p("/Run1")).unwrap();
        fs.create_dir(p("/run1")).unwrap();
        assert!(!fs.is_dir(p("/RUN1")).unwrap());
        assert_eq!(names(&fs, "/"), ["Run1", "run1"]);
    }

    #[test]
    fn case_insensitive_rename_onto_a_case_variant_follows_posix_rules() {
        let fs = SimFs::new_case_insensitive(1);
        let err = |r: io::Result<()>| r.unwrap_err().raw_os_error();
        fs.create_dir(p("/Run1")).unwrap();
        fs.open(p("/Run1/seg"), OpenMode::CreateNew).unwrap();
        fs.create_dir(p("/tmp1")).unwrap();
        fs.open(p("/tmp1/seg"), OpenMode::CreateNew).unwrap();
        assert_eq!(
            err(fs.rename(p("/tmp1"), p("/run1"))),
            Some(libc::ENOTEMPTY)
        );
        assert_eq!(names(&fs, "/"), ["Run1", "tmp1"]);
        assert_eq!(
            err(fs.rename(p("/tmp1/seg"), p("/RUN1"))),
            Some(libc::EISDIR)
        );
        fs.create_dir(p("/Empty")).unwrap();
        fs.rename(p("/tmp1"), p("/empty")).unwrap();
        assert_eq!(
            names(&fs, "/"),
            ["Run1", "empty"],
            "the empty directory is replaced"
        );
        assert_eq!(names(&fs, "/EMPTY"), ["seg"]);
        let f = put(&fs, "A", b"old", true);
        put(&fs, "b", b"new", true);
        fs.rename(p("/d/b"), p("/d/a")).unwrap();
        assert!(
            f.is_unlinked().unwrap(),
            "the replaced file lost its only link"
        );
        assert_eq!(names(&fs, "/d"), ["a"]);
        assert_eq!(contents(&fs, "/d/A").unwrap(), b"new");
    }

    #[test]
    fn case_insensitive_rename_to_another_case_of_itself_changes_only_the_case() {
        let fs = SimFs::new_case_insensitive(1);
        let f = put(&fs, "Name", b"x", true);
        fs.rename(p("/d/name"), p("/d/Name")).unwrap();
        assert_eq!(
            names(&fs, "/d"),
            ["Name"],
            "same name and case: nothing happens"
        );
        fs.rename(p("/d/name"), p("/d/NAME")).unwrap();
        assert_eq!(names(&fs, "/d"), ["NAME"]);
        assert!(!f.is_unlinked().unwrap());
        assert_eq!(contents(&fs, "/d/name").unwrap(), b"x");
        let lost = fs.fork();
        lost.crash_with(CrashPolicy::DropUnsynced);
        assert_eq!(
            names(&lost, "/d"),
            ["Name"],
            "an unsynced case change is lost"
        );
        fs.sync_dir(p("/d")).unwrap();
        fs.crash_with(CrashPolicy::DropUnsynced);
        assert_eq!(names(&fs, "/d"), ["NAME"]);
    }

    #[test]
    fn case_insensitive_crashes_never_leave_two_names_that_differ_only_in_case() {
        for seed in 0..100 {
            let fs = SimFs::new_case_insensitive(1);
            put(&fs, "run1", b"first", true);
            fs.remove_file(p("/d/RUN1")).unwrap();
            let f = fs.open(p("/d/Run1"), OpenMode::CreateNew).unwrap();
            f.write_all_at(b"second", 0).unwrap();
            f.sync_data().unwrap();
            fs.create_dir(p("/d/tmp")).unwrap();
            fs.rename(p("/d/tmp"), p("/d/other")).unwrap();
            fs.rename(p("/d/other"), p("/d/OTHER")).unwrap();
            fs.crash(seed);
            let listed = names(&fs, "/d");
            let mut folded: Vec<String> = listed.iter().map(|n| n.to_ascii_lowercase()).collect();
            folded.dedup();
            assert_eq!(folded.len(), listed.len(), "seed {seed}: {listed:?}");
            let run = contents(&fs, "/d/run1");
            assert!(
                matches!(run.as_deref(), Some(b"first" | b"second") | None),
                "seed {seed}: {run:?}"
            );
        }
    }

    #[test]
    fn skipped_waits_return_at_once_and_clones_share_the_setting() {
        let fs = SimFs::new(0);
        let clone = fs.clone();
        fs.skip_waits();
        // An hour's wait, on another thread: it must end long before the test gives up.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            clone.sleep(std::time::Duration::from_secs(3600));
            let _ = tx.send(());
        });
        let waited = rx.recv_timeout(std::time::Duration::from_secs(10));
        assert!(waited.is_ok(), "the wait was not skipped");
    }

    #[test]
    fn wild_offsets_fail_with_efbig() {
        let fs = SimFs::new(0);
        let f = put(&fs, "a", b"", true);
        let e = f.write_all_at(b"x", u64::MAX).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EFBIG));
        assert_eq!(
            f.set_len(1 << 40).unwrap_err().raw_os_error(),
            Some(libc::EFBIG)
        );
    }
}
