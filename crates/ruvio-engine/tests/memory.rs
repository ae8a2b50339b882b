//! Memory probe: load the seed benchmark's string shapes (100,000 keys like
//! `key:000000012345`) and report bytes per key from the allocator's point of view
//! (requested bytes rounded to glibc malloc chunks), next to the engine's own
//! estimate. Run with `--nocapture` to see the numbers. The bounds asserted are the
//! targets from the issue (Valkey 9.1: 65, 210 and 96 bytes per key), so a layout
//! regression fails here long before a benchmark run.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use common::Harness;

/// Counts live bytes as glibc would charge them: request + 8-byte header, rounded up
/// to 16, at least 32.
struct Counting;

static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);
/// Tests in this file measure one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn chunk(size: usize) -> usize {
    ((size + 8 + 15) & !15).max(32)
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(chunk(layout.size()), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(chunk(layout.size()), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE_BYTES.fetch_sub(chunk(layout.size()), Ordering::Relaxed);
        LIVE_BYTES.fetch_add(chunk(new_size), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const KEYS: usize = 100_000;

/// Load `KEYS` keys with `value_bytes`-byte values (and a TTL when `ttl`), return
/// (allocator bytes per key, engine estimate per key).
fn probe(value_bytes: usize, ttl: bool) -> (f64, f64) {
    let _serial = SERIAL.lock().unwrap();
    let mut h = Harness::default();
    let value: Vec<u8> = (0..value_bytes).map(|i| b'a' + (i % 26) as u8).collect();
    let before = LIVE_BYTES.load(Ordering::Relaxed);
    let mut key = Vec::with_capacity(16);
    for i in 0..KEYS {
        key.clear();
        key.extend_from_slice(format!("key:{i:012}").as_bytes());
        let mut args: Vec<&[u8]> = vec![b"SET", &key, &value];
        if ttl {
            args.extend_from_slice(&[b"EX", b"100000"]);
        }
        h.run_args(&args);
    }
    // Drop the harness' transient buffers from the count by measuring the engine only.
    let after = LIVE_BYTES.load(Ordering::Relaxed);
    let estimate = h.engine.used_memory_bytes() as f64 / KEYS as f64;
    ((after - before) as f64 / KEYS as f64, estimate)
}

#[test]
fn bytes_per_key_beat_valkey_for_the_seed_shapes() {
    for (name, value_bytes, ttl, valkey) in [
        ("16 B", 16, false, 65.0),
        ("128 B", 128, false, 210.0),
        ("16 B + TTL", 16, true, 96.0),
    ] {
        let (allocator, estimate) = probe(value_bytes, ttl);
        println!("{name:>11}: {allocator:6.1} bytes/key (allocator), {estimate:6.1} (engine estimate); Valkey 9.1 {valkey}");
        assert!(allocator < valkey, "{name}: {allocator} bytes/key");
    }
}
