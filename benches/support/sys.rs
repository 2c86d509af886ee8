//! Facts about the machine and the file system the numbers were measured on.

use std::path::Path;

use serde::Serialize;

/// What BENCHMARKS.md states about the machine.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// CPU model name.
    pub cpu: String,
    /// Logical CPUs.
    pub cpus: usize,
    /// Total memory, MiB.
    pub mem_mib: u64,
    /// Kernel release.
    pub kernel: String,
    /// File system type of the bench directory (`ext4`, `tmpfs`, …) and its device.
    pub fs: String,
}

impl Machine {
    /// Reads /proc for the machine and `dir`'s mount.
    pub fn describe(dir: &Path) -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|l| l.trim_start_matches([' ', '\t', ':']).to_string())
            .unwrap_or_default();
        Machine {
            cpu,
            cpus: std::thread::available_parallelism().map_or(1, usize::from),
            mem_mib: proc_kib("/proc/meminfo", "MemTotal:").unwrap_or(0) / 1024,
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim()
                .to_string(),
            fs: mount_of(dir),
        }
    }
}

/// A `Key:   123 kB` line of a /proc status file, in KiB.
pub fn proc_kib(file: &str, key: &str) -> Option<u64> {
    std::fs::read_to_string(file)
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(key))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// This process's resident set size, KiB.
pub fn rss_kib() -> Option<u64> {
    proc_kib("/proc/self/status", "VmRSS:")
}

/// `"<fstype> on <device> at <mount point>"` for the longest mount point containing `dir`.
pub fn mount_of(dir: &Path) -> String {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some((f.next()?, f.next()?, f.next()?))
        })
        .filter(|(_, point, _)| dir.starts_with(point))
        .max_by_key(|(_, point, _)| point.len())
        .map_or_else(
            || "unknown".to_string(),
            |(dev, point, fstype)| format!("{fstype} on {dev} at {point}"),
        )
}

/// Whose CPU time [`cpu_secs`] reads.
#[derive(Clone, Copy, Debug)]
pub enum CpuOf {
    /// Every thread of this process.
    Process,
    /// The calling thread.
    Thread,
}

/// CPU time (user + system) used so far, seconds (`getrusage`). Work the kernel does in its
/// own threads for the process (the journal, block I/O completion) is not counted.
pub fn cpu_secs(of: CpuOf) -> Option<f64> {
    let who = match of {
        CpuOf::Process => libc::RUSAGE_SELF,
        CpuOf::Thread => libc::RUSAGE_THREAD,
    };
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` is a writable `rusage` that `getrusage` fills; `who` is one of the
    // two values above.
    let rc = unsafe { libc::getrusage(who, usage.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: `getrusage` returned 0, so it initialised `usage` (it was zeroed before anyway).
    let u = unsafe { usage.assume_init() };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(secs(u.ru_utime) + secs(u.ru_stime))
}
