//! Sets (intset, listpack and hashtable encodings): SADD/SREM/SPOP/SISMEMBER
//! sequences against a `BTreeSet`, with `set-max-intset-entries` and
//! `set-max-listpack-*` changing between steps; after every step SMEMBERS must
//! equal the model.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use ruvio_fuzz::engine::{Elem, EngineRun, Thresholds, Value};
use std::collections::BTreeSet;

const KEY: &[u8] = b"set";

#[derive(Arbitrary, Debug)]
enum Op {
    Add(Vec<Elem>),
    Rem(Vec<Elem>),
    Pop(Option<u8>),
    IsMember(Elem),
    Config(Thresholds),
}

fn step(run: &mut EngineRun, model: &mut BTreeSet<Vec<u8>>, op: &Op) {
    match op {
        Op::Add(members) | Op::Rem(members) => {
            let add = matches!(op, Op::Add(_));
            let mut argv = vec![
                if add {
                    b"SADD".to_vec()
                } else {
                    b"SREM".to_vec()
                },
                KEY.to_vec(),
            ];
            argv.extend(members.iter().map(|m| m.bytes()));
            let reply = run.call(&argv);
            if members.is_empty() {
                return assert!(reply.is_error());
            }
            let changed = members
                .iter()
                .filter(|m| {
                    if add {
                        model.insert(m.bytes())
                    } else {
                        model.remove(&m.bytes())
                    }
                })
                .count();
            assert_eq!(reply.int(), changed as i64);
        }
        Op::Pop(count) => {
            let popped = match count {
                None => run
                    .call(&[b"SPOP".as_slice(), KEY])
                    .bulk()
                    .map(<[u8]>::to_vec)
                    .into_iter()
                    .collect(),
                Some(c) => {
                    let reply = run.call(&[b"SPOP".as_slice(), KEY, c.to_string().as_bytes()]);
                    let popped = reply.strings();
                    assert_eq!(popped.len(), usize::from(*c).min(model.len()));
                    popped
                }
            };
            if count.is_none() {
                assert_eq!(popped.len(), usize::from(!model.is_empty()));
            }
            for m in popped {
                assert!(model.remove(&m), "SPOP gave {m:?}, not a member");
            }
        }
        Op::IsMember(m) => {
            let reply = run.call(&[b"SISMEMBER".as_slice(), KEY, &m.bytes()]);
            assert_eq!(reply, Value::Int(i64::from(model.contains(&m.bytes()))));
        }
        Op::Config(t) => t.apply(run.engine.config_mut()),
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let mut run = EngineRun::default();
    let mut model = BTreeSet::new();
    for op in &ops {
        step(&mut run, &mut model, op);
        let members = run.call(&[b"SMEMBERS".as_slice(), KEY]).strings();
        let got: BTreeSet<Vec<u8>> = members.iter().cloned().collect();
        assert_eq!(got.len(), members.len(), "members repeat after {op:?}");
        assert_eq!(got, model, "after {op:?}");
        assert_eq!(
            run.call(&[b"SCARD".as_slice(), KEY]),
            Value::Int(model.len() as i64)
        );
        assert_eq!(run.encoding(KEY).is_some(), !model.is_empty());
    }
});
