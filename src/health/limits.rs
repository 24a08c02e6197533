//! The hard bounds of one health-check evaluation, and what enforces them.
//!
//! Evaluations run in worker processes (`worker.rs`): synchronous code (Lua inside C functions,
//! finalizers, CEL) cannot be interrupted inside a thread, but a process can be killed. Memory is
//! counted by a global allocator that the promoter binaries install: in a worker, every allocation
//! of an evaluation (Lua's, and the helpers' in Rust) counts against [`MEMORY_LIMIT`]; one that would
//! exceed it fails (Lua reports a memory error; Rust code aborts the worker, which the parent
//! reports as the limit). Kernel limits (address space, CPU time, no core files) are the backstop.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Wall time of one evaluation (one script or rule set against one object), compilation included.
pub const TIME_LIMIT: Duration = Duration::from_secs(1);
/// Memory one evaluation may allocate, everything the helpers allocate included.
pub const MEMORY_LIMIT: usize = 64 * 1024 * 1024;
/// A script's message or error, as written into status and Events.
pub const MESSAGE_LIMIT: usize = 1024;
/// A whole health verdict (cluster, check, resource and message).
pub const VERDICT_LIMIT: usize = 4096;
/// Nesting of brackets in a CEL rule: its parser recurses per level (about 100 levels overflowed an
/// 8 MiB stack); Kubernetes' own CEL limits nesting to 32 levels of some constructs.
pub const CEL_MAX_NESTING: usize = 32;
/// Length of a CEL rule (the Kubernetes CRD validation rules are limited to a few KiB too).
pub const CEL_MAX_LENGTH: usize = 8 * 1024;

static USED: AtomicUsize = AtomicUsize::new(0);
static LIMIT: AtomicUsize = AtomicUsize::new(usize::MAX);

/// The system allocator, counting. Installed as `#[global_allocator]` by the promoter binaries; the
/// limit is off (`usize::MAX`) except in a health-check worker.
pub struct CountingAlloc;

impl CountingAlloc {
    fn admit(size: usize) -> bool {
        let before = USED.fetch_add(size, Ordering::Relaxed);
        if before.saturating_add(size) > LIMIT.load(Ordering::Relaxed) {
            USED.fetch_sub(size, Ordering::Relaxed);
            return false;
        }
        true
    }
}

// SAFETY: delegates to `System`, only counting and refusing (a null return is allowed by the
// `GlobalAlloc` contract).
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !Self::admit(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: same layout as the caller's.
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            USED.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !Self::admit(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: same layout as the caller's.
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() {
            USED.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with this layout.
        unsafe { System.dealloc(ptr, layout) };
        USED.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = layout.size();
        if new_size > old && !Self::admit(new_size - old) {
            return std::ptr::null_mut();
        }
        // SAFETY: `ptr` was allocated by `System` with `layout`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() {
            if new_size > old {
                USED.fetch_sub(new_size - old, Ordering::Relaxed);
            }
        } else if new_size < old {
            USED.fetch_sub(old - new_size, Ordering::Relaxed);
        }
        p
    }
}

/// Bytes allocated now (through [`CountingAlloc`], when it is installed).
pub fn allocated() -> usize {
    USED.load(Ordering::Relaxed)
}

/// From now on, at most `bytes` more may be allocated (relative, so what the worker holds already,
/// its request included, is not charged to the evaluation).
pub fn limit_from_now(bytes: usize) {
    LIMIT.store(allocated().saturating_add(bytes), Ordering::Relaxed);
}

pub fn unlimited() {
    LIMIT.store(usize::MAX, Ordering::Relaxed);
}

/// Whether the running binary counts allocations (the limit is meaningless otherwise).
pub fn counting() -> bool {
    let before = allocated();
    let probe = std::hint::black_box(vec![0u8; 4096]);
    let counted = allocated() >= before + 4096;
    drop(probe);
    counted
}

/// Kernel limits for a worker process: no core files, a CPU-time ceiling (a stuck worker whose
/// parent vanished dies by itself), an address-space ceiling above the counted limit, no files.
#[cfg(unix)]
pub fn harden_process() {
    macro_rules! set {
        ($resource:expr, $soft:expr, $hard:expr) => {{
            let l = libc::rlimit {
                rlim_cur: $soft as libc::rlim_t,
                rlim_max: $hard as libc::rlim_t,
            };
            // SAFETY: plain system call with a valid pointer; failure leaves the old limit.
            unsafe { libc::setrlimit($resource, &l) };
        }};
    }
    set!(libc::RLIMIT_CORE, 0, 0);
    set!(libc::RLIMIT_CPU, 120, 130);
    set!(libc::RLIMIT_FSIZE, 0, 0);
    if let Some(vm) = virtual_size() {
        let ceiling = vm + 4 * MEMORY_LIMIT as u64;
        set!(libc::RLIMIT_AS, ceiling, ceiling);
    }
}

#[cfg(not(unix))]
pub fn harden_process() {}

/// The process's virtual size in bytes (Linux).
fn virtual_size() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().next()?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok().filter(|p| *p > 0)?)
}

/// At most `max` bytes of `s`, cut on a character boundary, saying that it was cut.
pub fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… (truncated, {} bytes in all)", &s[..end], s.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_cuts_on_a_char_boundary_and_says_so() {
        assert_eq!(truncate("short", 10), "short");
        let s = "é".repeat(10); // 2 bytes each
        let t = truncate(&s, 5);
        assert!(t.starts_with("éé…"), "{t}");
        assert!(t.ends_with("(truncated, 20 bytes in all)"), "{t}");
    }
}
