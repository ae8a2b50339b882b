//! Streams (a radix tree of listpack nodes: new nodes past 100 entries or 4 KiB,
//! entries marked deleted in place, nodes cut and dropped by trims): XADD with
//! explicit and half-explicit IDs, XDEL, XTRIM MAXLEN and MINID, XRANGE and
//! XREVRANGE with COUNT, against a map of ID -> fields. After every step
//! `XRANGE - +` must list the model in ID order, XLEN count it, and the key exist
//! once an XADD succeeded (an emptied stream stays).

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use ruvio_fuzz::engine::{Elem, EngineRun, Value};
use std::collections::BTreeMap;

const KEY: &[u8] = b"stream";

type Id = (u64, u64);
type Fields = Vec<(Vec<u8>, Vec<u8>)>;

#[derive(Default)]
struct Model {
    entries: BTreeMap<Id, Fields>,
    /// The top ID ever added (XADD must go past it; deletes and trims keep it).
    last: Id,
    exists: bool,
}

impl Model {
    /// An ID to name in a command: entry `pick` of the stream, or one between
    /// entries (or past them) when `pick` says so or the stream is empty.
    fn id(&self, pick: u8) -> Id {
        let keys: Vec<&Id> = self.entries.keys().collect();
        if keys.is_empty() || pick % 4 == 3 {
            return (u64::from(pick % 8), u64::from(pick / 8 % 3));
        }
        *keys[usize::from(pick) % keys.len()]
    }
}

#[derive(Arbitrary, Debug)]
enum Op {
    /// XADD with the ID `ms-seq`, ms a step past the top ID's.
    Add {
        ms_step: u8,
        seq: u8,
        fields: Vec<(Elem, Elem)>,
    },
    /// XADD with the ID `ms-*` (the next sequence number of that millisecond).
    AddSeqAuto {
        ms_step: u8,
        fields: Vec<(Elem, Elem)>,
    },
    Del(Vec<u8>),
    TrimMaxLen(u8),
    TrimMinId(u8),
    Range {
        from: u8,
        to: u8,
        count: u8,
    },
    RevRange {
        from: u8,
        to: u8,
        count: u8,
    },
}

fn id_text((ms, seq): Id) -> Vec<u8> {
    format!("{ms}-{seq}").into_bytes()
}

fn parse_id(bytes: &[u8]) -> Id {
    let text = std::str::from_utf8(bytes).unwrap();
    let (ms, seq) = text.split_once('-').unwrap();
    (ms.parse().unwrap(), seq.parse().unwrap())
}

/// An XRANGE reply as (ID, fields) pairs.
fn entries_of(reply: &Value) -> Vec<(Id, Fields)> {
    reply
        .array()
        .iter()
        .map(|entry| {
            let [id, fields] = entry.array() else {
                panic!("an entry is [id, fields]: {entry:?}")
            };
            let flat = fields.strings();
            let pairs = flat
                .chunks(2)
                .map(|p| (p[0].clone(), p[1].clone()))
                .collect();
            (parse_id(id.bulk().unwrap()), pairs)
        })
        .collect()
}

fn field_pairs(fields: &[(Elem, Elem)]) -> Fields {
    fields.iter().map(|(f, v)| (f.bytes(), v.bytes())).collect()
}

fn add(
    run: &mut EngineRun,
    model: &mut Model,
    id_arg: Vec<u8>,
    id: Option<Id>,
    fields: &[(Elem, Elem)],
) {
    let mut argv = vec![b"XADD".to_vec(), KEY.to_vec(), id_arg];
    for (f, v) in field_pairs(fields) {
        argv.push(f);
        argv.push(v);
    }
    let reply = run.call(&argv);
    match id.filter(|&id| id > model.last && !fields.is_empty()) {
        Some(id) => {
            assert_eq!(parse_id(reply.bulk().unwrap()), id);
            model.entries.insert(id, field_pairs(fields));
            model.last = id;
            model.exists = true;
        }
        None => assert!(reply.is_error(), "{reply:?}"),
    }
}

fn step(run: &mut EngineRun, model: &mut Model, op: &Op) {
    match op {
        Op::Add {
            ms_step,
            seq,
            fields,
        } => {
            let id = (model.last.0 + u64::from(ms_step % 3), u64::from(seq % 3));
            add(run, model, id_text(id), Some(id), fields);
        }
        Op::AddSeqAuto { ms_step, fields } => {
            let ms =
                (model.last.0 + u64::from(ms_step % 3)).saturating_sub(u64::from(ms_step / 128));
            let id = match ms.cmp(&model.last.0) {
                std::cmp::Ordering::Greater => Some((ms, 0)),
                std::cmp::Ordering::Equal => Some((ms, model.last.1 + 1)),
                std::cmp::Ordering::Less => None,
            };
            // (`0-*` on a new stream is 0-1: the top ID of a new stream is 0-0.)
            add(run, model, format!("{ms}-*").into_bytes(), id, fields);
        }
        Op::Del(picks) => {
            let ids: Vec<Id> = picks.iter().map(|&p| model.id(p)).collect();
            let mut argv = vec![b"XDEL".to_vec(), KEY.to_vec()];
            argv.extend(ids.iter().map(|&id| id_text(id)));
            let reply = run.call(&argv);
            if ids.is_empty() {
                return assert!(reply.is_error());
            }
            let deleted = ids
                .iter()
                .filter(|id| model.entries.remove(id).is_some())
                .count();
            assert_eq!(reply.int(), deleted as i64);
        }
        Op::TrimMaxLen(max) => {
            let max = usize::from(*max % 40);
            let reply = run.call(&[
                b"XTRIM".as_slice(),
                KEY,
                b"MAXLEN",
                max.to_string().as_bytes(),
            ]);
            let gone = model.entries.len().saturating_sub(max);
            for _ in 0..gone {
                model.entries.pop_first();
            }
            assert_eq!(reply.int(), gone as i64);
        }
        Op::TrimMinId(pick) => {
            let min = model.id(*pick);
            let reply = run.call(&[b"XTRIM".as_slice(), KEY, b"MINID", &id_text(min)]);
            let before = model.entries.len();
            model.entries.retain(|id, _| *id >= min);
            assert_eq!(reply.int(), (before - model.entries.len()) as i64);
        }
        Op::Range { from, to, count } | Op::RevRange { from, to, count } => {
            let rev = matches!(op, Op::RevRange { .. });
            let (from, to) = (model.id(*from), model.id(*to));
            let count = usize::from(*count % 12);
            let (name, first, second): (&[u8], Id, Id) = if rev {
                (b"XREVRANGE", to, from)
            } else {
                (b"XRANGE", from, to)
            };
            let reply = run.call(&[
                name,
                KEY,
                &id_text(first),
                &id_text(second),
                b"COUNT",
                count.to_string().as_bytes(),
            ]);
            let mut want: Vec<(Id, Fields)> = model
                .entries
                .iter()
                .filter(|(id, _)| from <= **id && **id <= to)
                .map(|(id, f)| (*id, f.clone()))
                .collect();
            if rev {
                want.reverse();
            }
            // COUNT 0 answers a null array, as in Redis: no entries.
            want.truncate(count);
            assert_eq!(entries_of(&reply), want);
        }
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let mut run = EngineRun::default();
    let mut model = Model::default();
    for op in &ops {
        step(&mut run, &mut model, op);
        let all = run.call(&[b"XRANGE".as_slice(), KEY, b"-", b"+"]);
        let want: Vec<(Id, Fields)> = model.entries.iter().map(|(i, f)| (*i, f.clone())).collect();
        assert_eq!(entries_of(&all), want, "after {op:?}");
        let len = run.call(&[b"XLEN".as_slice(), KEY]);
        assert_eq!(len, Value::Int(model.entries.len() as i64));
        assert_eq!(run.encoding(KEY).is_some(), model.exists);
    }
});
