//! Shared by the integration tests: for those that run real child processes, the child is
//! this test binary re-executed on its own ignored `child_entry` test, configured through
//! environment variables; and copying a store directory ([`copy_tree`]).
// Each test binary compiles this module and uses a part of it.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

pub mod fixture;

/// The names of the files in `dir` that end with `suffix` (`.log`, `.idx`), sorted.
pub fn names_ending(dir: &Path, suffix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(suffix))
        .collect();
    names.sort();
    names
}

/// Copies the directory tree `from` into `to` (created), files byte for byte.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// What a child entry point does when run without the variable `var` its parent sets (e.g. by
/// `cargo test -- --include-ignored`): it fails, so an entry point never counts as a passing
/// test.
pub fn not_started_as_a_child(var: &str) -> ! {
    panic!("an entry point of child processes, not a test: its parent test sets {var}")
}

/// A command that runs this test binary's ignored `child_entry` test, alone, with its output
/// uncaptured (the caller adds `env`, `stdout` and spawns).
pub fn child_command() -> Command {
    let exe = std::env::current_exe().expect("the test binary knows its own path");
    let mut cmd = Command::new(exe);
    cmd.args([
        "child_entry",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]);
    cmd
}

/// A spawned child with its stdin and a channel of its stdout lines (read by a thread, so the
/// parent can wait with a timeout).
pub struct Piped {
    /// The process.
    pub child: std::process::Child,
    /// Its standard input.
    pub stdin: std::process::ChildStdin,
    /// Its standard output, line by line.
    pub lines: std::sync::mpsc::Receiver<String>,
}

/// Spawns `cmd` with piped stdin and stdout, forwarding stdout lines to a channel.
pub fn spawn_piped(cmd: &mut Command) -> Piped {
    use std::io::BufRead;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn child process");
    let stdout = child.stdout.take().expect("piped stdout");
    let stdin = child.stdin.take().expect("piped stdin");
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    Piped {
        child,
        stdin,
        lines,
    }
}

/// A hook on [`OpenHookFs::open`]: `None` lets the open through and keeps the hook armed;
/// `Some(Ok(()))` fires it (removed) and lets the open through; `Some(Err(e))` fires it and
/// fails the open with `e`.
pub type OpenHook =
    Box<dyn FnMut(&std::path::Path, runlog::io::OpenMode) -> Option<std::io::Result<()>> + Send>;

/// The real file system with a one-shot hook on `open`, to put another handle's work (or a
/// failure) at an exact point of a store's file opens.
#[derive(Default)]
pub struct OpenHookFs {
    /// The armed hook, if any (`None` once it fired).
    pub hook: parking_lot::Mutex<Option<OpenHook>>,
}

impl std::fmt::Debug for OpenHookFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OpenHookFs")
    }
}

impl runlog::io::Fs for OpenHookFs {
    fn open(
        &self,
        path: &std::path::Path,
        mode: runlog::io::OpenMode,
    ) -> std::io::Result<std::sync::Arc<dyn runlog::io::FsFile>> {
        let taken = self.hook.lock().take();
        if let Some(mut hook) = taken {
            match hook(path, mode) {
                None => *self.hook.lock() = Some(hook),
                Some(Ok(())) => {}
                Some(Err(e)) => return Err(e),
            }
        }
        runlog::io::StdFs.open(path, mode)
    }
    fn create_dir(&self, path: &std::path::Path) -> std::io::Result<()> {
        runlog::io::StdFs.create_dir(path)
    }
    fn rename(&self, from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
        runlog::io::StdFs.rename(from, to)
    }
    fn remove_file(&self, path: &std::path::Path) -> std::io::Result<()> {
        runlog::io::StdFs.remove_file(path)
    }
    fn remove_dir(&self, path: &std::path::Path) -> std::io::Result<()> {
        runlog::io::StdFs.remove_dir(path)
    }
    fn read_dir(&self, path: &std::path::Path) -> std::io::Result<Vec<String>> {
        runlog::io::StdFs.read_dir(path)
    }
    fn sync_dir(&self, path: &std::path::Path) -> std::io::Result<()> {
        runlog::io::StdFs.sync_dir(path)
    }
    fn is_dir(&self, path: &std::path::Path) -> std::io::Result<bool> {
        runlog::io::StdFs.is_dir(path)
    }
}

/// The offsets of the batches of the segment file at `seg` (of version 2 or 3, as its header
/// says), from its first batch (past the 4 KiB header), walked by their length fields.
pub fn batch_offsets(seg: &Path) -> Vec<u64> {
    batch_offsets_in(&std::fs::read(seg).unwrap())
}

/// [`batch_offsets`] of a segment's bytes.
pub fn batch_offsets_in(b: &[u8]) -> Vec<u64> {
    let mut at = 4096usize;
    let mut out = Vec::new();
    while let Some(len) = batch_len_at(b, at) {
        out.push(at as u64);
        at += len;
    }
    out
}

/// The magic a batch of the segment whose bytes are `b` starts with (by its header's version).
pub fn batch_magic(b: &[u8]) -> &'static [u8] {
    match u32::from_le_bytes(b[8..12].try_into().unwrap()) {
        2 => b"RLB2",
        3 => b"R3",
        v => panic!("a test segment of version {v}"),
    }
}

/// The header fields of the batch at `at` of the segment whose bytes are `b`, read by the
/// layouts of format/SPEC.md §4a (version 2) and §4b (version 3), independently of the crate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHead {
    pub len: usize,
    pub first_seq: u64,
    pub fenced: bool,
    pub count: u64,
    /// Offset of the first record, from the batch's start.
    pub records_at: usize,
}

/// [`BatchHead`] of the batch at `at` (a batch must start there).
pub fn batch_head(b: &[u8], at: usize) -> BatchHead {
    let varint = |pos: &mut usize| {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let byte = b[*pos];
            *pos += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return v;
            }
            shift += 7;
        }
    };
    let u64_at = |p: usize| u64::from_le_bytes(b[p..p + 8].try_into().unwrap());
    let len = batch_len_at(b, at).expect("a batch starts there");
    if batch_magic(b).len() == 4 {
        let mut pos = at + 25;
        let count = varint(&mut pos);
        return BatchHead {
            len,
            first_seq: u64_at(at + 8),
            fenced: b[at + 24] == 1,
            count,
            records_at: pos - at,
        };
    }
    let mut pos = at + 2;
    varint(&mut pos);
    let first_seq = u64_at(24) + varint(&mut pos);
    varint(&mut pos);
    let fenced = b[pos] == 1;
    pos += 1;
    let count = varint(&mut pos);
    BatchHead {
        len,
        first_seq,
        fenced,
        count,
        records_at: pos - at,
    }
}

/// Where the length field of the batch at `at` is (version 2: a u32 at 4; version 3: the
/// varint after the 2-byte magic).
pub fn batch_len_field(b: &[u8], at: usize) -> std::ops::Range<usize> {
    if batch_magic(b).len() == 4 {
        return at + 4..at + 8;
    }
    let width = b[at + 2..].iter().position(|&x| x & 0x80 == 0).unwrap() + 1;
    at + 2..at + 2 + width
}

/// The length field of the batch at `at` of the segment whose bytes are `b` (version 2: a
/// u32 at 4; version 3: a varint after the 2-byte magic), when a batch starts there.
pub fn batch_len_at(b: &[u8], at: usize) -> Option<usize> {
    let magic = batch_magic(b);
    if !b.get(at..)?.starts_with(magic) {
        return None;
    }
    if magic.len() == 4 {
        return Some(u32::from_le_bytes(b.get(at + 4..at + 8)?.try_into().unwrap()) as usize);
    }
    let (mut len, mut shift) = (0usize, 0);
    for &byte in b.get(at + 2..at + 7)? {
        len |= usize::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(len);
        }
        shift += 7;
    }
    None
}

/// Writes `len` into the length field of the batch at `at` in its segment's frame (version
/// 3: a 5-byte varint, over the field and the header bytes after it).
pub fn set_batch_len(b: &mut [u8], at: usize, len: u32) {
    if batch_magic(b).len() == 4 {
        b[at + 4..at + 8].copy_from_slice(&len.to_le_bytes());
        return;
    }
    let mut v = len;
    for i in 0..5 {
        b[at + 2 + i] = (v as u8 & 0x7f) | if i < 4 { 0x80 } else { 0 };
        v >>= 7;
    }
}

/// The batch of the segment whose bytes are `b` that holds byte `at`.
pub fn batch_holding(b: &[u8], at: usize) -> usize {
    let offsets = batch_offsets_in(b);
    offsets[offsets.partition_point(|&o| o as usize <= at) - 1] as usize
}

/// The byte in the middle of the batch at `at` of the segment whose bytes are `b`: inside
/// its records whatever the frame's sizes.
pub fn middle_of_batch(b: &[u8], at: usize) -> usize {
    at + batch_len_at(b, at).expect("a batch starts there") / 2
}

/// Flips the bits of `mask` in the byte at `at` of the file at `path`, in place (bit rot).
pub fn flip(path: &Path, at: u64, mask: u8) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ mask], at).unwrap();
}

/// Why `strace` cannot inject faults here, if it cannot: not installed, or not allowed to
/// trace a child (no ptrace in a container).
pub fn strace_unusable() -> Option<String> {
    match Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "true"])
        .output()
    {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!(
            "strace cannot trace here (ptrace not permitted?): {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Some(format!("strace not found ({e}); apt-get install strace")),
    }
}

/// Holds a run's lock file with `flock`, as another process's writer would, until dropped.
pub struct HeldLock(std::fs::File);

impl HeldLock {
    /// Takes the lock on the file at `path` (waiting while someone else holds it).
    pub fn take(path: &Path) -> HeldLock {
        use std::os::fd::AsRawFd;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        // SAFETY: flock on a valid, open file descriptor owned by `f`.
        assert_eq!(unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) }, 0);
        HeldLock(f)
    }
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: as in `take`.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}
