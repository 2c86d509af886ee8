//! Counts this process's durability syscalls (`fsync`, `fdatasync`, `msync`,
//! `sync_file_range`) with perf tracepoint counters, so every workload can report events per
//! sync — the group-commit factor — for every peer, whatever the store exposes.
//!
//! The counters use `inherit`: they count the opening thread and every thread created after
//! the counter, and a thread's count reaches the total when it exits. So start a counter
//! before the peer opens (and spawns any background thread), and read it after the writer
//! threads are joined and the peer is dropped. Unavailable (no tracefs, no perf permission,
//! not Linux) means `None`, reported as "-".

use std::fs::File;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};

const TRACEPOINTS: [&str; 4] = [
    "sys_enter_fsync",
    "sys_enter_fdatasync",
    "sys_enter_msync",
    "sys_enter_sync_file_range",
];
const TRACEFS_ROOTS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];
const PERF_TYPE_TRACEPOINT: u32 = 2;
/// `PERF_ATTR_SIZE_VER0`: the kernel accepts this prefix of `perf_event_attr`.
const PERF_ATTR_SIZE_VER0: u32 = 64;
const FLAG_INHERIT: u64 = 1 << 1;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;

/// `struct perf_event_attr` up to `PERF_ATTR_SIZE_VER0` (64 bytes).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttrV0 {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

/// Live counters; see the module docs for what they see.
pub struct SyncCounter {
    files: Vec<File>,
}

impl SyncCounter {
    /// Opens one counter per tracepoint; `None` when any cannot be opened.
    pub fn start() -> Option<SyncCounter> {
        let files = TRACEPOINTS
            .iter()
            .map(|tp| tracepoint_id(tp).and_then(open_counter))
            .collect::<Option<Vec<File>>>()?;
        Some(SyncCounter { files })
    }

    /// Sync syscalls counted so far (see the module docs for which threads are included).
    pub fn read(&mut self) -> Option<u64> {
        let mut total = 0u64;
        for file in &mut self.files {
            let mut buf = [0u8; 8];
            file.read_exact(&mut buf).ok()?;
            total += u64::from_ne_bytes(buf);
        }
        Some(total)
    }
}

fn tracepoint_id(name: &str) -> Option<u64> {
    TRACEFS_ROOTS.iter().find_map(|root| {
        std::fs::read_to_string(format!("{root}/events/syscalls/{name}/id"))
            .ok()?
            .trim()
            .parse()
            .ok()
    })
}

fn open_counter(id: u64) -> Option<File> {
    let attr = PerfEventAttrV0 {
        kind: PERF_TYPE_TRACEPOINT,
        size: PERF_ATTR_SIZE_VER0,
        config: id,
        flags: FLAG_INHERIT,
        ..PerfEventAttrV0::default()
    };
    // SAFETY: `attr` is a valid, initialised perf_event_attr prefix whose `size` field
    // says how many bytes the kernel may read; the other arguments are plain integers
    // (this process, any CPU, no group).
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttrV0,
            0 as libc::pid_t,
            -1 as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    let fd = i32::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: the kernel just returned `fd` as a new descriptor that nothing else owns.
    Some(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}
