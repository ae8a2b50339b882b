//! Lists (listpack and quicklist encodings): arbitrary LPUSH/RPUSH/LPOP/RPOP/LSET/
//! LINSERT/LREM/LTRIM/LINDEX/LRANGE sequences against a `VecDeque`, with the
//! thresholds (`list-max-listpack-size`) changing between steps; after every step
//! the whole list must equal the model.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use ruvio_fuzz::engine::{Elem, EngineRun, Thresholds, Value};
use std::collections::VecDeque;

const KEY: &[u8] = b"list";

#[derive(Arbitrary, Debug)]
enum Op {
    Push {
        left: bool,
        elems: Vec<Elem>,
    },
    Pop {
        left: bool,
        count: Option<u8>,
    },
    Set {
        index: i8,
        elem: Elem,
    },
    Insert {
        before: bool,
        pivot: Elem,
        elem: Elem,
    },
    Rem {
        count: i8,
        elem: Elem,
    },
    Trim {
        start: i8,
        stop: i8,
    },
    Index {
        index: i8,
    },
    Range {
        start: i8,
        stop: i8,
    },
    Config(Thresholds),
}

/// Redis' index range clamp: `None` for an empty range.
fn clamp(len: usize, start: i8, stop: i8) -> Option<(usize, usize)> {
    let len = len as i64;
    let at = |i: i8| {
        if i < 0 {
            len + i64::from(i)
        } else {
            i64::from(i)
        }
    };
    let (start, stop) = (at(start).max(0), at(stop).min(len - 1));
    (start <= stop && start < len).then_some((start as usize, stop as usize))
}

fn index(len: usize, i: i8) -> Option<usize> {
    let i = if i < 0 {
        len as i64 + i64::from(i)
    } else {
        i64::from(i)
    };
    (0..len as i64).contains(&i).then_some(i as usize)
}

fn step(run: &mut EngineRun, model: &mut VecDeque<Vec<u8>>, op: &Op) {
    match op {
        Op::Push { left, elems } => {
            let mut argv = vec![
                if *left {
                    b"LPUSH".to_vec()
                } else {
                    b"RPUSH".to_vec()
                },
                KEY.to_vec(),
            ];
            argv.extend(elems.iter().map(|e| e.bytes()));
            let reply = run.call(&argv);
            if elems.is_empty() {
                assert!(reply.is_error());
                return;
            }
            for e in elems {
                if *left {
                    model.push_front(e.bytes());
                } else {
                    model.push_back(e.bytes());
                }
            }
            assert_eq!(reply.int(), model.len() as i64);
        }
        Op::Pop { left, count } => {
            let name: &[u8] = if *left { b"LPOP" } else { b"RPOP" };
            let pop = |model: &mut VecDeque<Vec<u8>>| {
                if *left {
                    model.pop_front()
                } else {
                    model.pop_back()
                }
            };
            match count.map(|c| c % 8 + 1) {
                None => {
                    let reply = run.call(&[name, KEY]);
                    assert_eq!(reply.bulk().map(<[u8]>::to_vec), pop(model));
                }
                Some(count) => {
                    let existed = !model.is_empty();
                    let count_text = count.to_string();
                    let reply = run.call(&[name, KEY, count_text.as_bytes()]);
                    let popped: Vec<Vec<u8>> = (0..count).map_while(|_| pop(model)).collect();
                    if existed {
                        assert_eq!(reply.strings(), popped);
                    } else {
                        assert_eq!(reply, Value::Nil);
                    }
                }
            }
        }
        Op::Set { index: i, elem } => {
            let reply = run.call(&[
                b"LSET".as_slice(),
                KEY,
                i.to_string().as_bytes(),
                &elem.bytes(),
            ]);
            match index(model.len(), *i) {
                Some(at) => {
                    assert_eq!(reply, Value::Status("OK".into()));
                    model[at] = elem.bytes();
                }
                None => assert!(reply.is_error()),
            }
        }
        Op::Insert {
            before,
            pivot,
            elem,
        } => {
            let place: &[u8] = if *before { b"BEFORE" } else { b"AFTER" };
            let reply = run.call(&[
                b"LINSERT".as_slice(),
                KEY,
                place,
                &pivot.bytes(),
                &elem.bytes(),
            ]);
            let expected = if model.is_empty() {
                0
            } else if let Some(at) = model.iter().position(|e| *e == pivot.bytes()) {
                model.insert(if *before { at } else { at + 1 }, elem.bytes());
                model.len() as i64
            } else {
                -1
            };
            assert_eq!(reply.int(), expected);
        }
        Op::Rem { count, elem } => {
            let reply = run.call(&[
                b"LREM".as_slice(),
                KEY,
                count.to_string().as_bytes(),
                &elem.bytes(),
            ]);
            let target = elem.bytes();
            let limit = if *count == 0 {
                usize::MAX
            } else {
                usize::from(count.unsigned_abs())
            };
            let mut positions: Vec<usize> =
                (0..model.len()).filter(|&i| model[i] == target).collect();
            if *count < 0 {
                positions.reverse();
            }
            positions.truncate(limit);
            positions.sort_unstable();
            for &at in positions.iter().rev() {
                model.remove(at);
            }
            assert_eq!(reply.int(), positions.len() as i64);
        }
        Op::Trim { start, stop } => {
            let reply = run.call(&[
                b"LTRIM".as_slice(),
                KEY,
                start.to_string().as_bytes(),
                stop.to_string().as_bytes(),
            ]);
            assert_eq!(reply, Value::Status("OK".into()));
            match clamp(model.len(), *start, *stop) {
                Some((s, e)) => {
                    model.truncate(e + 1);
                    model.drain(..s);
                }
                None => model.clear(),
            }
        }
        Op::Index { index: i } => {
            let reply = run.call(&[b"LINDEX".as_slice(), KEY, i.to_string().as_bytes()]);
            let expected = index(model.len(), *i).map(|at| model[at].clone());
            assert_eq!(reply.bulk().map(<[u8]>::to_vec), expected);
        }
        Op::Range { start, stop } => {
            let reply = run.call(&[
                b"LRANGE".as_slice(),
                KEY,
                start.to_string().as_bytes(),
                stop.to_string().as_bytes(),
            ]);
            let expected: Vec<Vec<u8>> = match clamp(model.len(), *start, *stop) {
                Some((s, e)) => model.range(s..=e).cloned().collect(),
                None => Vec::new(),
            };
            assert_eq!(reply.strings(), expected);
        }
        Op::Config(t) => t.apply(run.engine.config_mut()),
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let mut run = EngineRun::default();
    let mut model = VecDeque::new();
    for op in &ops {
        step(&mut run, &mut model, op);
        let whole = run
            .call(&[b"LRANGE".as_slice(), KEY, b"0", b"-1"])
            .strings();
        assert!(whole.iter().eq(model.iter()), "after {op:?}");
        assert_eq!(
            run.call(&[b"LLEN".as_slice(), KEY]).int(),
            model.len() as i64
        );
        assert_eq!(run.encoding(KEY).is_some(), !model.is_empty());
    }
});
