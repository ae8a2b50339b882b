//! What a read of the command clock costs (observability/mod.rs quotes it):
//! quanta's TSC read against `std::time::Instant`, alone and as a command's pair
//! of reads converted to nanoseconds. Run pinned to one CPU, in release mode:
//! `taskset -c 1 cargo run --release -p ruvio-server --example clock_cost`.

use std::hint::black_box;
use std::time::Instant;

/// Reads per measurement: long enough that the loop's own cost is noise.
const READS: u32 = 20_000_000;

/// Nanoseconds per iteration of `f`, over [`READS`] iterations.
fn per_read(mut f: impl FnMut() -> u64) -> f64 {
    let started = Instant::now();
    let mut sink = 0u64;
    for _ in 0..READS {
        sink = sink.wrapping_add(f());
    }
    black_box(sink);
    started.elapsed().as_nanos() as f64 / f64::from(READS)
}

fn main() {
    let clock = quanta::Clock::new();
    let origin = Instant::now();
    for run in 1..=3 {
        let tsc = per_read(|| clock.raw());
        let tsc_pair = per_read(|| {
            let start = clock.raw();
            clock.delta_as_nanos(start, clock.raw())
        });
        let std = per_read(|| origin.elapsed().as_nanos() as u64);
        let std_pair = per_read(|| Instant::now().elapsed().as_nanos() as u64);
        println!(
            "run {run}: quanta {tsc:.1} ns a read, {tsc_pair:.1} ns a pair; \
             Instant {std:.1} ns a read, {std_pair:.1} ns a pair"
        );
    }
}
