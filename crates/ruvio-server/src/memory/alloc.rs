//! The process's allocated bytes, counted as they are allocated (INFO
//! `used_memory`, and what `maxmemory` limits), not estimated.
//!
//! A global allocator wraps the system allocator and adds each block's usable size
//! (`malloc_usable_size`, what Redis' zmalloc counts) to a per-thread counter; a
//! thread folds its counter into the shared total once it has moved by
//! [`FLUSH_BYTES`], so the request path never touches a shared cache line. The
//! total is therefore exact to within `FLUSH_BYTES` per thread. A block freed by
//! another thread than the one that allocated it (a value moved between shards)
//! counts correctly: only the sum matters.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicU64, Ordering::Relaxed};

/// The allocator Ruvio runs with.
pub struct CountingAlloc;

/// Bytes allocated by every thread, as folded in so far.
static ALLOCATED: AtomicIsize = AtomicIsize::new(0);

/// A thread folds its count into [`ALLOCATED`] once it moved this far.
const FLUSH_BYTES: isize = 64 * 1024;

thread_local! {
    /// This thread's count not yet folded in (no destructor: safe in an allocator).
    static PENDING: Cell<isize> = const { Cell::new(0) };
}

fn note(delta: isize) {
    let _ = PENDING.try_with(|pending| {
        let now = pending.get() + delta;
        if now.abs() >= FLUSH_BYTES {
            ALLOCATED.fetch_add(now, Relaxed);
            pending.set(0);
        } else {
            pending.set(now);
        }
    });
}

fn usable(ptr: *mut u8) -> isize {
    // SAFETY: `ptr` is a live block from the system allocator (malloc family).
    unsafe { libc::malloc_usable_size(ptr.cast()) as isize }
}

// SAFETY: every call goes to the system allocator unchanged; only counts are added.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            note(usable(ptr));
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            note(usable(ptr));
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(-usable(ptr));
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let before = usable(ptr);
        // SAFETY: forwarded with the caller's guarantees.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            note(usable(new) - before);
        }
        new
    }
}

/// Bytes the process has allocated (exact to within 64 KiB per thread).
pub fn allocated_bytes() -> u64 {
    ALLOCATED.load(Relaxed).max(0) as u64
}

/// Resident set size of the process in bytes.
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// The most bytes allocated so far, as sampled ([`note_peak`]).
static PEAK: AtomicU64 = AtomicU64::new(0);
/// Bytes allocated once the server had started (0: not yet noted).
static STARTUP: AtomicU64 = AtomicU64::new(0);

/// Allocated bytes now, noted as the peak if they are the most so far (each
/// shard samples on its tick, and INFO / MEMORY STATS when they read it): the
/// peak of MEMORY STATS and INFO's `used_memory_peak`, exact to a tick, as the
/// counter's cost on the request path stays one thread-local add.
pub fn note_peak() -> u64 {
    let now = allocated_bytes();
    PEAK.fetch_max(now, Relaxed);
    now
}

/// The peak noted so far (at least the bytes allocated now).
pub fn peak_bytes() -> u64 {
    PEAK.load(Relaxed).max(allocated_bytes())
}

/// Note the bytes allocated once the server started (the first call wins):
/// MEMORY STATS' `startup.allocated`, as Redis notes its own after start-up.
pub fn note_startup() {
    let _ = STARTUP.compare_exchange(0, allocated_bytes(), Relaxed, Relaxed);
}

/// Bytes allocated once the server had started.
pub fn startup_bytes() -> u64 {
    STARTUP.load(Relaxed)
}
