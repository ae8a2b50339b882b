//! The encodings against a model: a `BTreeMap` member -> score, with random adds,
//! score updates, removals and range removals, across the listpack/skiplist
//! conversion.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::{ZLimits, ZSetEncoding, ZSetValue};

#[derive(Debug, Clone)]
enum Op {
    Set(u8, i8),
    Remove(u8),
    RemoveRanks(u8, u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (any::<u8>(), any::<i8>()).prop_map(|(m, s)| Op::Set(m, s)),
        2 => any::<u8>().prop_map(Op::Remove),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Op::RemoveRanks(a, b)),
    ]
}

fn member(m: u8) -> Vec<u8> {
    // Some members pass the value limit, forcing a conversion.
    if m.is_multiple_of(53) {
        vec![b'L'; 20 + m as usize]
    } else {
        format!("m{}", m % 40).into_bytes()
    }
}

fn sorted_model(model: &BTreeMap<Vec<u8>, f64>) -> Vec<(Vec<u8>, f64)> {
    let mut v: Vec<_> = model.iter().map(|(m, s)| (m.clone(), *s)).collect();
    v.sort_by(super::redis_order);
    v
}

proptest! {
    #[test]
    fn encodings_match_a_model(ops in proptest::collection::vec(op(), 1..200), entries in 1usize..20) {
        let limits = ZLimits { entries, value: 64 };
        let mut z = ZSetValue::new();
        let mut model: BTreeMap<Vec<u8>, f64> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Set(m, s) => {
                    let m = member(m);
                    let s = f64::from(s) / 4.0;
                    match model.insert(m.clone(), s) {
                        Some(_) => z.update(&m, s),
                        None => z.insert(&m, s, limits),
                    }
                }
                Op::Remove(m) => {
                    let m = member(m);
                    prop_assert_eq!(z.remove(&m), model.remove(&m).is_some());
                }
                Op::RemoveRanks(a, b) => {
                    let len = model.len();
                    let (lo, hi) = ((a as usize).min(len), (b as usize).min(len));
                    let sorted = sorted_model(&model);
                    if lo < hi {
                        for (m, _) in &sorted[lo..hi] {
                            model.remove(m);
                        }
                    }
                    z.remove_ranks(lo, hi);
                }
            }
            z.check_invariants();
            prop_assert_eq!(z.len(), model.len());
            let sorted = sorted_model(&model);
            let got: Vec<_> = z.iter().map(|(m, s)| (m.to_vec(), s)).collect();
            prop_assert_eq!(&got, &sorted);
            let rev: Vec<_> = z.iter_from(0, true).map(|(m, s)| (m.to_vec(), s)).collect();
            let mut want_rev = sorted.clone();
            want_rev.reverse();
            prop_assert_eq!(rev, want_rev);
            for (k, (m, s)) in sorted.iter().enumerate() {
                prop_assert_eq!(z.rank(m), Some((k, *s)));
            }
            if model.len() > entries || model.keys().any(|m| m.len() > 64) {
                prop_assert_eq!(z.encoding(), ZSetEncoding::Skiplist);
            }
            let copy = z.deep_clone();
            prop_assert_eq!(copy.encoding(), z.encoding());
            prop_assert_eq!(copy.len(), z.len());
        }
        let stored = ZSetValue::from_sorted(&sorted_model(&model), limits);
        stored.check_invariants();
        let fits = model.len() <= entries && model.keys().all(|m| m.len() <= 64);
        prop_assert_eq!(stored.encoding() == ZSetEncoding::Listpack, fits);
    }
}
