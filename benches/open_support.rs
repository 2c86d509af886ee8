//! Helpers shared by `open_cost` and `scale_cost` (included with `#[path]`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use runlog::{NewEvent, RunId, Store};

/// An environment variable as a number, or `default`.
pub fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Creates `run` and appends `events` facts in batches of 1,000, each with a key and a
/// 20-byte payload; event `j` has kind `kind(j)`.
pub fn fill_with(store: &Store, run: &RunId, events: u64, kind: impl Fn(u64) -> &'static str) {
    store.create_run(run).unwrap();
    let mut i = 0;
    while i < events {
        let n = 1000.min(events - i);
        let batch = (i..i + n)
            .map(|j| NewEvent::new(kind(j), format!("{{\"j\":{j:012}}}")).key(format!("k{j}")))
            .collect();
        store.append_facts(run, batch).unwrap();
        i += n;
    }
}

/// Counts the live heap bytes of the bench process: a memory figure that heap freed by an
/// earlier step and handed out again cannot hide, as it hides from a difference of the
/// process's resident memory (the 1M-event run's was measured after the store that built
/// it, and the 1k-event runs, had freed megabytes).
struct CountingAlloc;

static HEAP_LIVE: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; only counted.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        HEAP_LIVE.fetch_add(layout.size() as u64, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        HEAP_LIVE.fetch_add(layout.size() as u64, Ordering::Relaxed);
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HEAP_LIVE.fetch_sub(layout.size() as u64, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        HEAP_LIVE.fetch_add(new_size as u64, Ordering::Relaxed);
        HEAP_LIVE.fetch_sub(layout.size() as u64, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// What an open store holds in memory: its live heap, and the resident pages of this
/// process's mappings of the files under its directory (the segment maps' touched pages).
#[derive(Clone, Copy, Debug)]
pub struct Footprint {
    pub heap: u64,
    pub mapped: u64,
}

impl Footprint {
    /// Now, for a store in `dir`.
    pub fn of(dir: &Path) -> Footprint {
        Footprint {
            heap: HEAP_LIVE.load(Ordering::Relaxed),
            mapped: mapped_bytes_under(dir),
        }
    }

    /// What was added since `before` (heap, mapped), in bytes.
    pub fn since(self, before: Footprint) -> (u64, u64) {
        (
            self.heap.saturating_sub(before.heap),
            self.mapped.saturating_sub(before.mapped),
        )
    }
}

/// Resident bytes of this process's mappings of files under `dir` (`/proc/self/smaps`).
fn mapped_bytes_under(dir: &Path) -> u64 {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    let (mut ours, mut kib) = (false, 0u64);
    for line in smaps.lines() {
        let mut f = line.split_whitespace();
        let first = f.next().unwrap_or("");
        if first.contains('-') && !first.ends_with(':') {
            // A mapping's first line: address range, perms, offset, device, inode, path.
            ours = f.nth(4).is_some_and(|p| Path::new(p).starts_with(&dir));
        } else if ours && first == "Rss:" {
            kib += f.next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    kib * 1024
}
