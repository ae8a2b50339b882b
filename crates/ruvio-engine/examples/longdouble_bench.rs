//! INCRBYFLOAT's arithmetic alone (parse the stored text, parse the increment, add,
//! print), each sum fed back as the next stored text as the command does, for each
//! implementation path. Prints ns per operation twice: over the whole run, and in
//! its fastest chunk of `CHUNK` operations (the machine is shared, and the fastest
//! chunk is the one other work disturbed least; the work per operation barely
//! changes along a run). docs/long-double.md has the numbers.
//!
//! `taskset -c 1 cargo run --release -p ruvio-engine --features bench-internals \
//!     --example longdouble_bench -- [iterations] [path]`
//!
//! `path` (a column name such as `x87`) runs that path alone, for `perf record`.

use std::hint::black_box;
use std::time::Instant;

use ruvio_engine::longdouble_bench as paths;

/// (name, starting value, increment).
const CASES: [(&str, &str, &str); 5] = [
    ("10000000.5 += 1.5", "10000000.5", "1.5"),
    ("3.0e15 += 1e-5", "3.0e15", "1e-5"),
    ("0 += 1e-5", "0", "1e-5"),
    ("10000000 += 0.1", "10000000", "0.1"),
    ("10.5 += 0.1", "10.5", "0.1"),
];

/// One INCRBYFLOAT computation: stored text, increment -> new text.
type Step = fn(&[u8], &[u8]) -> Vec<u8>;

fn software(a: &[u8], b: &[u8]) -> Vec<u8> {
    paths::software(a, b).expect("finite")
}

fn hardware(a: &[u8], b: &[u8]) -> Vec<u8> {
    paths::hardware(a, b).expect("finite").as_bytes().to_vec()
}

fn libc(a: &[u8], b: &[u8]) -> Vec<u8> {
    paths::libc(a, b).expect("finite").as_bytes().to_vec()
}

/// Operations per timed chunk: long enough for the clock, short enough that some
/// chunks run between other processes' time slices.
const CHUNK: u32 = 5_000;

/// Runs `step` `iterations` times from `start`: (mean ns/op, fastest chunk's
/// ns/op, final text).
fn run(iterations: u32, start: &str, incr: &str, step: Step) -> (f64, f64, Vec<u8>) {
    let mut value = start.as_bytes().to_vec();
    let mut best = f64::INFINITY;
    let began = Instant::now();
    let mut done = 0;
    while done < iterations {
        let n = CHUNK.min(iterations - done);
        let chunk_began = Instant::now();
        for _ in 0..n {
            value = step(black_box(&value), black_box(incr.as_bytes()));
        }
        best = best.min(chunk_began.elapsed().as_nanos() as f64 / n as f64);
        done += n;
    }
    let mean = began.elapsed().as_nanos() as f64 / iterations as f64;
    (mean, best, value)
}

fn main() {
    let iterations: u32 = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(500_000);
    let only = std::env::args().nth(2).unwrap_or_default();
    let steps: [(&str, Step); 3] = [
        ("software", software),
        ("(a) x87", hardware),
        ("(b) libc", libc),
    ];
    let steps: Vec<_> = steps
        .into_iter()
        .filter(|(name, _)| name.contains(&only))
        .collect();
    println!("{iterations} iterations, ns/op: mean / fastest chunk of {CHUNK}");
    print!("{:<22}", "case");
    for (name, _) in &steps {
        print!("{name:>18}");
    }
    println!("  final value");
    for (case, start, incr) in CASES {
        print!("{case:<22}");
        let mut finals = Vec::new();
        for (_, step) in &steps {
            let (mean, best, last) = run(iterations, start, incr, *step);
            print!("{:>18}", format!("{mean:.0} / {best:.0}"));
            finals.push(last);
        }
        assert!(
            finals.windows(2).all(|w| w[0] == w[1]),
            "paths disagree: {:?}",
            finals
                .iter()
                .map(|f| String::from_utf8_lossy(f))
                .collect::<Vec<_>>()
        );
        println!("  {}", String::from_utf8_lossy(&finals[0]));
    }
}
