//! Sorted sets (listpack and skiplist encodings): ZADD/ZINCRBY/ZREM/ZPOPMIN/
//! ZPOPMAX/ZREMRANGEBYRANK/ZRANK sequences against a map of scores, with
//! `zset-max-listpack-*` changing between steps; after every step
//! `ZRANGE 0 -1 WITHSCORES` must list the model in (score, member) order.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use ruvio_fuzz::engine::{Elem, EngineRun, Thresholds, Value};
use std::collections::BTreeMap;

const KEY: &[u8] = b"zset";

/// Scores in halves, so every one prints exactly.
#[derive(Arbitrary, Clone, Copy, Debug)]
struct Score(i8);

impl Score {
    fn value(self) -> f64 {
        f64::from(self.0) / 2.0
    }
}

#[derive(Arbitrary, Debug)]
enum Op {
    Add(Vec<(Score, Elem)>),
    IncrBy(Score, Elem),
    Rem(Vec<Elem>),
    PopMin(u8),
    PopMax(u8),
    RemRangeByRank(i8, i8),
    Rank(Elem),
    Config(Thresholds),
}

type Model = BTreeMap<Vec<u8>, f64>;

/// Members in Redis' order: by score, then by member bytes.
fn ordered(model: &Model) -> Vec<(Vec<u8>, f64)> {
    let mut items: Vec<(Vec<u8>, f64)> = model.iter().map(|(m, s)| (m.clone(), *s)).collect();
    items.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    items
}

fn score_of(bytes: &[u8]) -> f64 {
    std::str::from_utf8(bytes).unwrap().parse().unwrap()
}

fn pairs(reply: &Value) -> Vec<(Vec<u8>, f64)> {
    reply
        .strings()
        .chunks(2)
        .map(|p| (p[0].clone(), score_of(&p[1])))
        .collect()
}

fn step(run: &mut EngineRun, model: &mut Model, op: &Op) {
    match op {
        Op::Add(items) => {
            let mut argv = vec![b"ZADD".to_vec(), KEY.to_vec()];
            for (s, m) in items {
                argv.push(s.value().to_string().into_bytes());
                argv.push(m.bytes());
            }
            let reply = run.call(&argv);
            if items.is_empty() {
                return assert!(reply.is_error());
            }
            let before = model.len();
            for (s, m) in items {
                model.insert(m.bytes(), s.value());
            }
            assert_eq!(reply.int(), (model.len() - before) as i64);
        }
        Op::IncrBy(by, m) => {
            let reply = run.call(&[
                b"ZINCRBY".as_slice(),
                KEY,
                by.value().to_string().as_bytes(),
                &m.bytes(),
            ]);
            let score = model.entry(m.bytes()).or_insert(0.0);
            *score += by.value();
            assert_eq!(score_of(reply.bulk().unwrap()), *score);
        }
        Op::Rem(members) => {
            let mut argv = vec![b"ZREM".to_vec(), KEY.to_vec()];
            argv.extend(members.iter().map(|m| m.bytes()));
            let reply = run.call(&argv);
            if members.is_empty() {
                return assert!(reply.is_error());
            }
            let removed = members
                .iter()
                .filter(|m| model.remove(&m.bytes()).is_some())
                .count();
            assert_eq!(reply.int(), removed as i64);
        }
        Op::PopMin(count) | Op::PopMax(count) => {
            let max = matches!(op, Op::PopMax(_));
            let name: &[u8] = if max { b"ZPOPMAX" } else { b"ZPOPMIN" };
            let count = count % 8 + 1;
            let reply = run.call(&[name, KEY, count.to_string().as_bytes()]);
            let mut order = ordered(model);
            if max {
                order.reverse();
            }
            order.truncate(usize::from(count));
            for (m, _) in &order {
                model.remove(m);
            }
            assert_eq!(pairs(&reply), order);
        }
        Op::RemRangeByRank(start, stop) => {
            let reply = run.call(&[
                b"ZREMRANGEBYRANK".as_slice(),
                KEY,
                start.to_string().as_bytes(),
                stop.to_string().as_bytes(),
            ]);
            let order = ordered(model);
            let len = order.len() as i64;
            let at = |i: i8| {
                if i < 0 {
                    len + i64::from(i)
                } else {
                    i64::from(i)
                }
            };
            let (s, e) = (at(*start).max(0), at(*stop).min(len - 1));
            let gone: Vec<&Vec<u8>> = if s <= e && s < len {
                order[s as usize..=e as usize]
                    .iter()
                    .map(|(m, _)| m)
                    .collect()
            } else {
                Vec::new()
            };
            assert_eq!(reply.int(), gone.len() as i64);
            for m in gone {
                model.remove(m);
            }
        }
        Op::Rank(m) => {
            let reply = run.call(&[b"ZRANK".as_slice(), KEY, &m.bytes()]);
            let rank = ordered(model).iter().position(|(x, _)| *x == m.bytes());
            match rank {
                Some(r) => assert_eq!(reply.int(), r as i64),
                None => assert_eq!(reply, Value::Nil),
            }
        }
        Op::Config(t) => t.apply(run.engine.config_mut()),
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let mut run = EngineRun::default();
    let mut model = Model::new();
    for op in &ops {
        step(&mut run, &mut model, op);
        let all = run.call(&[b"ZRANGE".as_slice(), KEY, b"0", b"-1", b"WITHSCORES"]);
        assert_eq!(pairs(&all), ordered(&model), "after {op:?}");
        assert_eq!(
            run.call(&[b"ZCARD".as_slice(), KEY]),
            Value::Int(model.len() as i64)
        );
        assert_eq!(run.encoding(KEY).is_some(), !model.is_empty());
    }
});
