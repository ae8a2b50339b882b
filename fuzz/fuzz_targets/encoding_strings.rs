//! Strings and bitmaps (int, embstr and raw encodings): SET/APPEND/SETRANGE/
//! SETBIT/GETBIT/GETRANGE/INCRBY/BITCOUNT sequences against a `Vec<u8>`; after
//! every step GET and STRLEN must agree with the model.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use ruvio_fuzz::engine::{Elem, EngineRun, Value};

const KEY: &[u8] = b"str";

#[derive(Arbitrary, Debug)]
enum Op {
    Set(Elem),
    SetBytes(Vec<u8>),
    Append(Vec<u8>),
    SetRange(u16, Vec<u8>),
    SetBit(u16, bool),
    GetBit(u16),
    GetRange(i16, i16),
    IncrBy(i32),
    BitCount,
}

/// Offsets stay small enough that a run stays fast.
fn offset(o: u16) -> usize {
    usize::from(o % 4096)
}

fn get_range(v: &[u8], start: i16, end: i16) -> Vec<u8> {
    let len = v.len() as i64;
    let (mut s, mut e) = (i64::from(start), i64::from(end));
    if s < 0 && e < 0 && s > e {
        return Vec::new();
    }
    if s < 0 {
        s += len;
    }
    if e < 0 {
        e += len;
    }
    s = s.max(0);
    e = e.max(0);
    if e >= len {
        e = len - 1;
    }
    if s > e || len == 0 {
        return Vec::new();
    }
    v[s as usize..=e as usize].to_vec()
}

fn step(run: &mut EngineRun, model: &mut Option<Vec<u8>>, op: &Op) {
    match op {
        Op::Set(_) | Op::SetBytes(_) => {
            let value = match op {
                Op::Set(e) => e.bytes(),
                Op::SetBytes(b) => b.clone(),
                _ => unreachable!(),
            };
            assert_eq!(
                run.call(&[b"SET".as_slice(), KEY, &value]),
                Value::Status("OK".into())
            );
            *model = Some(value);
        }
        Op::Append(tail) => {
            let reply = run.call(&[b"APPEND".as_slice(), KEY, tail]);
            let v = model.get_or_insert_with(Vec::new);
            v.extend_from_slice(tail);
            assert_eq!(reply.int(), v.len() as i64);
        }
        Op::SetRange(at, bytes) => {
            let at = offset(*at);
            let reply = run.call(&[
                b"SETRANGE".as_slice(),
                KEY,
                at.to_string().as_bytes(),
                bytes,
            ]);
            if bytes.is_empty() {
                let len = model.as_ref().map_or(0, Vec::len);
                return assert_eq!(reply.int(), len as i64);
            }
            let v = model.get_or_insert_with(Vec::new);
            if v.len() < at + bytes.len() {
                v.resize(at + bytes.len(), 0);
            }
            v[at..at + bytes.len()].copy_from_slice(bytes);
            assert_eq!(reply.int(), v.len() as i64);
        }
        Op::SetBit(bit, on) => {
            let bit = offset(*bit) * 8 + usize::from(*bit % 8);
            let reply = run.call(&[
                b"SETBIT".as_slice(),
                KEY,
                bit.to_string().as_bytes(),
                if *on { b"1" } else { b"0" },
            ]);
            let v = model.get_or_insert_with(Vec::new);
            if v.len() <= bit / 8 {
                v.resize(bit / 8 + 1, 0);
            }
            let mask = 0x80u8 >> (bit % 8);
            let old = v[bit / 8] & mask != 0;
            if *on {
                v[bit / 8] |= mask;
            } else {
                v[bit / 8] &= !mask;
            }
            assert_eq!(reply.int(), i64::from(old));
        }
        Op::GetBit(bit) => {
            let bit = offset(*bit) * 8 + usize::from(*bit % 8);
            let reply = run.call(&[b"GETBIT".as_slice(), KEY, bit.to_string().as_bytes()]);
            let set = model
                .as_ref()
                .and_then(|v| v.get(bit / 8))
                .is_some_and(|b| b & (0x80 >> (bit % 8)) != 0);
            assert_eq!(reply.int(), i64::from(set));
        }
        Op::GetRange(start, end) => {
            let reply = run.call(&[
                b"GETRANGE".as_slice(),
                KEY,
                start.to_string().as_bytes(),
                end.to_string().as_bytes(),
            ]);
            let expected = model
                .as_deref()
                .map_or(Vec::new(), |v| get_range(v, *start, *end));
            assert_eq!(reply.bulk().unwrap_or_default(), expected.as_slice());
        }
        Op::IncrBy(by) => {
            let reply = run.call(&[b"INCRBY".as_slice(), KEY, by.to_string().as_bytes()]);
            let current = model.as_deref().map_or(Some(0), ruvio_resp::string2ll);
            match current.and_then(|n| n.checked_add(i64::from(*by))) {
                Some(n) => {
                    assert_eq!(reply.int(), n);
                    *model = Some(n.to_string().into_bytes());
                }
                None => assert!(reply.is_error(), "INCRBY on {model:?}: {reply:?}"),
            }
        }
        Op::BitCount => {
            let reply = run.call(&[b"BITCOUNT".as_slice(), KEY]);
            let ones: u32 = model.iter().flatten().map(|b| b.count_ones()).sum();
            assert_eq!(reply.int(), i64::from(ones));
        }
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let mut run = EngineRun::default();
    let mut model = None;
    for op in &ops {
        step(&mut run, &mut model, op);
        let got = run.call(&[b"GET".as_slice(), KEY]);
        assert_eq!(got.bulk(), model.as_deref(), "after {op:?}");
        let len = model.as_ref().map_or(0, Vec::len);
        assert_eq!(run.call(&[b"STRLEN".as_slice(), KEY]).int(), len as i64);
    }
});
