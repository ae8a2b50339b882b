//! Hashes (listpack and hashtable encodings): HSET/HSETNX/HDEL/HINCRBY/HGET
//! sequences against a `BTreeMap`, with `hash-max-listpack-entries` and `-value`
//! changing between steps; after every step HGETALL must equal the model.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use ruvio_fuzz::engine::{Elem, EngineRun, Thresholds, Value};
use std::collections::BTreeMap;

const KEY: &[u8] = b"hash";

#[derive(Arbitrary, Debug)]
enum Op {
    Set(Vec<(Elem, Elem)>),
    SetNx(Elem, Elem),
    Del(Vec<Elem>),
    IncrBy(Elem, i16),
    Get(Elem),
    Config(Thresholds),
}

fn step(run: &mut EngineRun, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, op: &Op) {
    match op {
        Op::Set(pairs) => {
            let mut argv = vec![b"HSET".to_vec(), KEY.to_vec()];
            for (f, v) in pairs {
                argv.push(f.bytes());
                argv.push(v.bytes());
            }
            let reply = run.call(&argv);
            if pairs.is_empty() {
                return assert!(reply.is_error());
            }
            let mut added = std::collections::BTreeSet::new();
            for (f, v) in pairs {
                if model.insert(f.bytes(), v.bytes()).is_none() {
                    added.insert(f.bytes());
                }
            }
            assert_eq!(reply.int(), added.len() as i64);
        }
        Op::SetNx(f, v) => {
            let reply = run.call(&[b"HSETNX".as_slice(), KEY, &f.bytes(), &v.bytes()]);
            let fresh = !model.contains_key(&f.bytes());
            if fresh {
                model.insert(f.bytes(), v.bytes());
            }
            assert_eq!(reply.int(), i64::from(fresh));
        }
        Op::Del(fields) => {
            let mut argv = vec![b"HDEL".to_vec(), KEY.to_vec()];
            argv.extend(fields.iter().map(|f| f.bytes()));
            let reply = run.call(&argv);
            if fields.is_empty() {
                return assert!(reply.is_error());
            }
            let removed = fields
                .iter()
                .filter(|f| model.remove(&f.bytes()).is_some())
                .count();
            assert_eq!(reply.int(), removed as i64);
        }
        Op::IncrBy(f, by) => {
            let reply = run.call(&[
                b"HINCRBY".as_slice(),
                KEY,
                &f.bytes(),
                by.to_string().as_bytes(),
            ]);
            let current = model
                .get(&f.bytes())
                .map_or(Some(0), |v| ruvio_resp::string2ll(v));
            match current.and_then(|n| n.checked_add(i64::from(*by))) {
                Some(n) => {
                    assert_eq!(reply.int(), n);
                    model.insert(f.bytes(), n.to_string().into_bytes());
                }
                None => assert!(reply.is_error()),
            }
        }
        Op::Get(f) => {
            let reply = run.call(&[b"HGET".as_slice(), KEY, &f.bytes()]);
            assert_eq!(
                reply.bulk().map(<[u8]>::to_vec),
                model.get(&f.bytes()).cloned()
            );
        }
        Op::Config(t) => t.apply(run.engine.config_mut()),
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let mut run = EngineRun::default();
    let mut model = BTreeMap::new();
    for op in &ops {
        step(&mut run, &mut model, op);
        let flat = run.call(&[b"HGETALL".as_slice(), KEY]).strings();
        let got: BTreeMap<Vec<u8>, Vec<u8>> = flat
            .chunks(2)
            .map(|p| (p[0].clone(), p[1].clone()))
            .collect();
        assert_eq!(got.len() * 2, flat.len(), "fields repeat after {op:?}");
        assert_eq!(got, model, "after {op:?}");
        assert_eq!(
            run.call(&[b"HLEN".as_slice(), KEY]),
            Value::Int(model.len() as i64)
        );
        assert_eq!(run.encoding(KEY).is_some(), !model.is_empty());
    }
});
