//! HyperLogLog (sparse and dense encodings): PFADD/PFMERGE/PFCOUNT sequences on
//! two keys against exact sets, with `hll-sparse-max-bytes` changing between
//! steps (a sparse HLL turns dense past it). A count must stay within the
//! estimator's error (well inside 3% plus 2 at these sizes), and a key must keep
//! answering after every change.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use ruvio_fuzz::engine::{EngineRun, Thresholds};
use std::collections::BTreeSet;

const KEYS: [&[u8]; 2] = [b"hll1", b"hll2"];

#[derive(Arbitrary, Debug)]
enum Op {
    /// Add elements `e0 .. e{n}`: `(first, how many)` to add runs cheaply.
    Add(bool, u16, u8),
    Merge(bool),
    Count(bool),
    CountBoth,
    Config(Thresholds),
}

fn assert_close(estimate: i64, exact: usize, what: &str) {
    let exact = exact as i64;
    let allowed = 2 + exact * 3 / 100;
    assert!(
        (estimate - exact).abs() <= allowed,
        "{what}: estimate {estimate}, exact {exact}"
    );
}

fuzz_target!(|ops: Vec<Op>| {
    let mut run = EngineRun::default();
    let mut model: [BTreeSet<u32>; 2] = Default::default();
    for op in &ops {
        match op {
            Op::Add(second, first, n) => {
                let k = usize::from(*second);
                let elems: Vec<u32> = (0..u32::from(*n)).map(|i| u32::from(*first) + i).collect();
                let mut argv = vec![b"PFADD".to_vec(), KEYS[k].to_vec()];
                argv.extend(elems.iter().map(|e| format!("e{e}").into_bytes()));
                let reply = run.call(&argv).int();
                assert!(reply == 0 || reply == 1);
                model[k].extend(elems);
            }
            Op::Merge(second) => {
                let (to, from) = if *second { (1, 0) } else { (0, 1) };
                run.call(&[b"PFMERGE".as_slice(), KEYS[to], KEYS[from]]);
                let union: BTreeSet<u32> = model[0].union(&model[1]).copied().collect();
                model[to] = union;
            }
            Op::Count(second) => {
                let k = usize::from(*second);
                let estimate = run.call(&[b"PFCOUNT".as_slice(), KEYS[k]]).int();
                assert_close(estimate, model[k].len(), "PFCOUNT");
            }
            Op::CountBoth => {
                let estimate = run.call(&[b"PFCOUNT".as_slice(), KEYS[0], KEYS[1]]).int();
                assert_close(
                    estimate,
                    model[0].union(&model[1]).count(),
                    "PFCOUNT of both",
                );
            }
            Op::Config(t) => t.apply(run.engine.config_mut()),
        }
    }
});
