//! The kernels and the field arithmetic against one-bit-at-a-time models.
//!
//! Why models: the kernels skip words, mask edge bytes and read 16-byte windows;
//! each of those is a place for an off-by-one that only some lengths and offsets
//! show. The models read one bit at a time, straight from the definition (bit `n`
//! is bit `7 - n % 8` of byte `n / 8`), and proptest walks the lengths, offsets,
//! widths and overflow modes.

use proptest::prelude::*;

use super::bitfield::{Field, Overflow};
use super::ops::{self, BitOp};

fn bit(bytes: &[u8], n: u64) -> bool {
    bytes
        .get((n / 8) as usize)
        .is_some_and(|b| b & (0x80 >> (n % 8)) != 0)
}

fn set_bit(bytes: &mut [u8], n: u64, on: bool) {
    let mask = 0x80 >> (n % 8);
    let b = &mut bytes[(n / 8) as usize];
    *b = if on { *b | mask } else { *b & !mask };
}

/// Bytes that are mostly runs of 0x00 or 0xff (so the word skipping matters), of
/// every length around a few words.
fn bitmap() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![Just(0u8), Just(0xff), any::<u8>(), Just(0x80), Just(0x01)],
        0..80,
    )
}

/// The field model: `bits` bits from `offset`, one at a time.
fn model_get(bytes: &[u8], f: Field) -> u64 {
    (0..u64::from(f.bits)).fold(0, |v, i| (v << 1) | u64::from(bit(bytes, f.offset + i)))
}

fn model_put(bytes: &mut [u8], f: Field, raw: u64) {
    for i in 0..u64::from(f.bits) {
        let on = raw >> (u64::from(f.bits) - 1 - i) & 1 == 1;
        set_bit(bytes, f.offset + i, on);
    }
}

/// The overflow model: the value counted around the type's range one modulus at a
/// time, or clamped.
fn model_fit(f: Field, target: i128, overflow: Overflow) -> Option<i128> {
    let (min, max) = if f.signed {
        (-(1i128 << (f.bits - 1)), (1i128 << (f.bits - 1)) - 1)
    } else {
        (0, (1i128 << f.bits) - 1)
    };
    if (min..=max).contains(&target) {
        return Some(target);
    }
    let span = max - min + 1;
    match overflow {
        Overflow::Fail => None,
        Overflow::Sat => Some(target.clamp(min, max)),
        Overflow::Wrap => {
            let mut v = target % span;
            while v > max {
                v -= span;
            }
            while v < min {
                v += span;
            }
            Some(v)
        }
    }
}

/// A BITOP operation's definition: the result bit from one bit of each source.
type Rule = fn(&[bool]) -> bool;

fn field() -> impl Strategy<Value = Field> {
    (any::<bool>(), 1u32..=64, 0u64..200).prop_map(|(signed, bits, offset)| Field {
        signed,
        bits: if signed { bits } else { bits.min(63) },
        offset,
    })
}

fn overflow() -> impl Strategy<Value = Overflow> {
    prop_oneof![
        Just(Overflow::Wrap),
        Just(Overflow::Sat),
        Just(Overflow::Fail)
    ]
}

proptest! {
    #[test]
    fn popcount_counts_every_bit(bytes in bitmap()) {
        let model = (0..bytes.len() as u64 * 8).filter(|&n| bit(&bytes, n)).count() as u64;
        prop_assert_eq!(ops::popcount(&bytes), model);
    }

    #[test]
    fn ranges_count_and_find_like_the_model(bytes in bitmap(), a in 0u64..640, b in 0u64..640, on: bool) {
        prop_assume!(!bytes.is_empty());
        let bits = bytes.len() as u64 * 8;
        let (first, last) = (a.min(b) % bits, a.max(b) % bits);
        prop_assume!(first <= last);
        let count = (first..=last).filter(|&n| bit(&bytes, n)).count() as u64;
        prop_assert_eq!(ops::count_range(&bytes, first, last), count);
        let found = (first..=last).find(|&n| bit(&bytes, n) == on);
        prop_assert_eq!(ops::find_in_range(&bytes, on, first, last), found);
        let anywhere = (0..bits).find(|&n| bit(&bytes, n) == on);
        prop_assert_eq!(ops::first_bit(&bytes, on), anywhere);
    }

    #[test]
    fn bitop_matches_per_bit_definitions(sources in prop::collection::vec(bitmap(), 1..5)) {
        let len = sources.iter().map(Vec::len).max().unwrap_or(0);
        let slices: Vec<&[u8]> = sources.iter().map(Vec::as_slice).collect();
        let ops_and_rules: [(BitOp, Rule); 8] = [
            (BitOp::And, |v| v.iter().all(|&b| b)),
            (BitOp::Or, |v| v.iter().any(|&b| b)),
            (BitOp::Xor, |v| v.iter().filter(|&&b| b).count() % 2 == 1),
            (BitOp::Not, |v| !v[0]),
            (BitOp::Diff, |v| v[0] && !v[1..].iter().any(|&b| b)),
            (BitOp::Diff1, |v| !v[0] && v[1..].iter().any(|&b| b)),
            (BitOp::AndOr, |v| v[0] && v[1..].iter().any(|&b| b)),
            (BitOp::One, |v| v.iter().filter(|&&b| b).count() == 1),
        ];
        for (op, rule) in ops_and_rules {
            let used = if op == BitOp::Not { &slices[..1] } else { &slices[..] };
            let used_len = used.iter().map(|s| s.len()).max().unwrap_or(0);
            let got = ops::combine(op, used);
            prop_assert_eq!(got.len(), used_len, "{:?}", op);
            for n in 0..used_len as u64 * 8 {
                let column: Vec<bool> = used.iter().map(|s| bit(s, n)).collect();
                prop_assert_eq!(bit(&got, n), rule(&column), "{:?} bit {}", op, n);
            }
        }
        prop_assert!(len == 0 || !ops::combine(BitOp::Or, &slices).is_empty());
    }

    #[test]
    fn fields_match_the_bit_model(bytes in prop::collection::vec(any::<u8>(), 0..40), f in field(), raw: u64) {
        prop_assert_eq!(f.get_raw(&bytes), model_get(&bytes, f));
        let needed = ((f.offset + u64::from(f.bits) - 1) / 8 + 1) as usize;
        let mut ours = bytes.clone();
        ours.resize(ours.len().max(needed), 0);
        let mut model = ours.clone();
        f.put_raw(&mut ours, raw);
        let low = if f.bits == 64 { raw } else { raw & ((1u64 << f.bits) - 1) };
        model_put(&mut model, f, low);
        prop_assert_eq!(&ours, &model);
        let expected = if f.signed && f.bits < 64 && low >> (f.bits - 1) == 1 {
            (low | (u64::MAX << f.bits)) as i64
        } else {
            low as i64
        };
        prop_assert_eq!(f.get(&ours), expected);
    }

    #[test]
    fn overflow_matches_the_model(f in field(), old: i64, by: i64, mode in overflow()) {
        let target = i128::from(old) + i128::from(by);
        prop_assert_eq!(f.fit(target, mode).map(i128::from), model_fit(f, target, mode));
    }
}
