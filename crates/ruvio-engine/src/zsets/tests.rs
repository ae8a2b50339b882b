//! The encodings against a model: a `BTreeMap` member -> score, with random adds,
//! score updates, removals and range removals, across the listpack/skiplist
//! conversion.

use std::collections::BTreeMap;

use proptest::prelude::*;

use crate::values::zset::{packed, ZLimits, ZSetEncoding, ZSetValue};

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
            check_ranks(&z, &sorted, &[0, 1, 7, sorted.len().saturating_sub(1), sorted.len()]);
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

/// Every rank read both ways from `z` matches the model's order.
fn check_ranks(z: &ZSetValue, sorted: &[(Vec<u8>, f64)], probes: &[usize]) {
    let len = sorted.len();
    for &p in probes {
        let k = p % (len + 1);
        let fwd: Vec<_> = z
            .iter_from(k, false)
            .map(|(m, s)| (m.to_vec(), s))
            .collect();
        assert_eq!(&fwd[..], &sorted[k.min(len)..], "forward from {k}");
        let rev: Vec<_> = z.iter_from(k, true).map(|(m, s)| (m.to_vec(), s)).collect();
        let want: Vec<_> = sorted[..len - k.min(len)].iter().rev().cloned().collect();
        assert_eq!(rev, want, "backward from {k}");
        if k < len {
            let below = z.count_while(|m, s| packed::less(s, m, sorted[k].1, &sorted[k].0));
            assert_eq!(below, k);
            let s = sorted[k].1;
            let first = sorted.iter().position(|e| e.1 >= s).unwrap_or(len);
            assert_eq!(z.count_score_while(|x| x < s), first);
        }
    }
    assert_eq!(z.iter_from(len, false).next(), None);
    assert_eq!(z.iter_from(len + 3, true).next(), None);
}

#[derive(Debug, Clone)]
enum BigOp {
    Set(u16, i16),
    Remove(u16),
    RemoveRanks(u16, u16),
    Check(Vec<u16>),
}

fn big_op() -> impl Strategy<Value = BigOp> {
    prop_oneof![
        12 => (any::<u16>(), any::<i16>()).prop_map(|(m, s)| BigOp::Set(m, s)),
        5 => any::<u16>().prop_map(BigOp::Remove),
        1 => (any::<u16>(), 0u16..300).prop_map(|(a, n)| BigOp::RemoveRanks(a, n)),
        1 => proptest::collection::vec(any::<u16>(), 1..4).prop_map(BigOp::Check),
    ]
}

/// A member of the big test: some share a score, some are long.
fn big_member(m: u16) -> Vec<u8> {
    let m = m % 4000;
    if m.is_multiple_of(97) {
        format!("{m}{}", "x".repeat(150)).into_bytes()
    } else {
        format!("m{m}").into_bytes()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// The tree alone, big enough for three levels: splits, merges, range cuts,
    /// rank and iteration from random ranks both ways.
    #[test]
    fn tree_matches_a_model(ops in proptest::collection::vec(big_op(), 1..6000)) {
        let limits = ZLimits { entries: 0, value: 0 };
        let mut z = ZSetValue::create(1, 1, limits);
        prop_assert_eq!(z.encoding(), ZSetEncoding::Skiplist);
        let mut model: BTreeMap<Vec<u8>, f64> = BTreeMap::new();
        for op in ops {
            match op {
                BigOp::Set(m, s) => {
                    let m = big_member(m);
                    // Few distinct scores: long runs of ties ordered by member.
                    let s = f64::from(s % 64) / 2.0;
                    match model.insert(m.clone(), s) {
                        Some(_) => z.update(&m, s),
                        None => z.insert(&m, s, limits),
                    }
                    prop_assert_eq!(z.score(&m), Some(s));
                }
                BigOp::Remove(m) => {
                    let m = big_member(m);
                    prop_assert_eq!(z.remove(&m), model.remove(&m).is_some());
                    prop_assert_eq!(z.score(&m), None);
                }
                BigOp::RemoveRanks(a, n) => {
                    let len = model.len();
                    let lo = (a as usize) % (len + 1);
                    let hi = (lo + n as usize).min(len);
                    for (m, _) in &sorted_model(&model)[lo..hi] {
                        model.remove(m);
                    }
                    z.remove_ranks(lo, hi);
                }
                BigOp::Check(probes) => {
                    z.check_invariants();
                    let sorted = sorted_model(&model);
                    let probes: Vec<usize> = probes.iter().map(|&p| p as usize).collect();
                    check_ranks(&z, &sorted, &probes);
                    for (k, (m, s)) in sorted.iter().enumerate().step_by(37) {
                        prop_assert_eq!(z.rank(m), Some((k, *s)));
                    }
                }
            }
            prop_assert_eq!(z.len(), model.len());
        }
        z.check_invariants();
        let sorted = sorted_model(&model);
        check_ranks(&z, &sorted, &[0, 1, sorted.len() / 2, sorted.len().saturating_sub(1)]);
        let copy = z.deep_clone();
        copy.check_invariants();
        let got: Vec<_> = copy.iter().map(|(m, s)| (m.to_vec(), s)).collect();
        prop_assert_eq!(got, sorted);
    }

    /// ZSCAN's guarantee on a skiplist: members present for the whole scan are
    /// all returned, whatever is added and removed between the calls.
    #[test]
    fn scan_returns_every_member_present_throughout(
        seed in proptest::collection::vec(any::<u16>(), 200..1500),
        churn in proptest::collection::vec((any::<bool>(), any::<u16>()), 0..3000),
        count in 1usize..40,
    ) {
        let limits = ZLimits { entries: 0, value: 0 };
        let mut z = ZSetValue::create(1, 1, limits);
        for m in &seed {
            let m = big_member(*m);
            if z.score(&m).is_none() {
                z.insert(&m, 1.0, limits);
            }
        }
        // Stable members: the seed's members with an even number; churn touches
        // only the others (odd seed members and fresh ones).
        let stable: std::collections::BTreeSet<Vec<u8>> = seed
            .iter()
            .filter(|m| **m % 2 == 0)
            .map(|m| big_member(*m))
            .collect();
        let mut seen = std::collections::BTreeSet::new();
        let mut churn = churn.into_iter();
        let mut cursor = 0;
        loop {
            cursor = z.scan(cursor, count, |m, _| {
                seen.insert(m.to_vec());
            });
            if cursor == 0 {
                break;
            }
            for (add, m) in churn.by_ref().take(3) {
                let m = big_member(m | 1);
                if add && z.score(&m).is_none() {
                    z.insert(&m, f64::from(m.len() as u32), limits);
                } else if !add {
                    z.remove(&m);
                }
            }
        }
        for m in &stable {
            prop_assert!(seen.contains(m), "missed {:?}", String::from_utf8_lossy(m));
        }
    }
}

#[test]
fn free_some_releases_a_big_set_in_slices() {
    let limits = ZLimits {
        entries: 0,
        value: 0,
    };
    let mut z = ZSetValue::create(1, 1, limits);
    for i in 0..20_000u32 {
        z.insert(format!("member:{i}").as_bytes(), f64::from(i % 977), limits);
    }
    z.check_invariants();
    let full = z.heap_bytes();
    let mut calls = 0;
    let mut last = full;
    while !z.free_some(64) {
        calls += 1;
        assert!(z.heap_bytes() < last);
        last = z.heap_bytes();
        assert!(calls < 20_000);
    }
    assert!(calls > 100, "freed in slices, not at once");
    assert!(z.heap_bytes() < 1024);
    // What is left drops cleanly.
    drop(z);
}

#[test]
fn packed_three_members_take_one_small_chunk() {
    let limits = ZLimits {
        entries: 128,
        value: 64,
    };
    let mut z = ZSetValue::new();
    for (m, s) in [(&b"a"[..], 1.0), (b"b", 2.0), (b"c", 3.0)] {
        z.insert(m, s, limits);
    }
    assert_eq!(z.encoding(), ZSetEncoding::Listpack);
    assert_eq!(z.heap_bytes(), 32);
}

/// A small deterministic generator for the big tests (xorshift64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Two levels of inner nodes and back: random inserts, updates, single and
/// range removals down to a few members, against the model at checkpoints.
#[test]
fn deep_tree_grows_and_shrinks() {
    let limits = ZLimits {
        entries: 0,
        value: 0,
    };
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut z = ZSetValue::create(1, 1, limits);
    let mut model: BTreeMap<Vec<u8>, f64> = BTreeMap::new();
    let check = |z: &ZSetValue, model: &BTreeMap<Vec<u8>, f64>, rng: &mut Rng| {
        z.check_invariants();
        let sorted = sorted_model(model);
        let got: Vec<_> = z.iter().map(|(m, s)| (m.to_vec(), s)).collect();
        assert_eq!(got, sorted);
        let probes: Vec<usize> = (0..4).map(|_| rng.below(sorted.len() + 1)).collect();
        for &k in &probes {
            let fwd: Vec<_> = z
                .iter_from(k, false)
                .take(300)
                .map(|(m, s)| (m.to_vec(), s))
                .collect();
            assert_eq!(&fwd[..], &sorted[k..(k + 300).min(sorted.len())]);
            let rev: Vec<_> = z
                .iter_from(k, true)
                .take(300)
                .map(|(m, s)| (m.to_vec(), s))
                .collect();
            let top = sorted.len() - k;
            let want: Vec<_> = sorted[top.saturating_sub(300)..top]
                .iter()
                .rev()
                .cloned()
                .collect();
            assert_eq!(rev, want);
        }
    };
    for _ in 0..40_000 {
        let m = format!("k{}", rng.below(1 << 20)).into_bytes();
        let s = (rng.below(2000) as f64) - 1000.0;
        match model.insert(m.clone(), s) {
            Some(_) => z.update(&m, s),
            None => z.insert(&m, s, limits),
        }
    }
    check(&z, &model, &mut rng);
    let mut step = 0;
    while model.len() > 50 {
        step += 1;
        let len = model.len();
        match rng.below(4) {
            0 => {
                let lo = rng.below(len);
                let hi = (lo + rng.below(len / 8 + 2)).min(len);
                for (m, _) in &sorted_model(&model)[lo..hi] {
                    model.remove(m);
                }
                z.remove_ranks(lo, hi);
            }
            1 => {
                // Update a run of existing members' scores.
                let sorted = sorted_model(&model);
                for _ in 0..200 {
                    let (m, _) = &sorted[rng.below(sorted.len())];
                    let s = rng.below(50) as f64 * 0.5;
                    model.insert(m.clone(), s);
                    z.update(m, s);
                }
            }
            _ => {
                let sorted = sorted_model(&model);
                for _ in 0..(len / 20 + 1) {
                    let (m, _) = &sorted[rng.below(sorted.len())];
                    assert_eq!(z.remove(m), model.remove(m).is_some());
                }
            }
        }
        assert_eq!(z.len(), model.len());
        if step % 5 == 0 {
            check(&z, &model, &mut rng);
        }
    }
    check(&z, &model, &mut rng);
}

/// In-process micro benchmark of the skiplist encoding (docs/zsets.md has the
/// numbers): `cargo test --release -p ruvio-engine --lib zset_micro_bench --
/// --ignored --nocapture`.
#[test]
#[ignore = "a benchmark: run by hand in release"]
fn zset_micro_bench() {
    use std::hint::black_box;
    use std::time::Instant;
    let limits = ZLimits {
        entries: 128,
        value: 64,
    };
    let ns = |t: Instant, n: usize| t.elapsed().as_nanos() as f64 / n as f64;
    // The feature benchmark's seed: m0..m999999 with score i, in order.
    let n = 1_000_000;
    let mut big = ZSetValue::new();
    let t = Instant::now();
    for i in 0..n {
        big.insert(format!("m{i}").as_bytes(), i as f64, limits);
    }
    println!("seed 1M in order: {:.0} ns/insert", ns(t, n));
    println!(
        "1M members (m<i>, score i): {:.1} heap B/member",
        big.heap_bytes() as f64 / n as f64
    );
    // ZADD zset:1m __rand_int__ n:__rand_int__ : new members, random places.
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let adds = 200_000;
    let new: Vec<(Vec<u8>, f64)> = (0..adds)
        .map(|_| {
            let r = rng.next() % 1_000_000_000_000;
            (
                format!("n:{r:012}").into_bytes(),
                (rng.next() % n as u64) as f64,
            )
        })
        .collect();
    let t = Instant::now();
    for (m, s) in &new {
        if big.score(m).is_none() {
            big.insert(m, *s, limits);
        }
    }
    println!("ZADD new member into 1M: {:.0} ns/op", ns(t, adds));
    println!(
        "1.2M members after random adds: {:.1} heap B/member",
        big.heap_bytes() as f64 / big.len() as f64
    );
    let t = Instant::now();
    let mut hits = 0;
    for (m, _) in &new {
        hits += usize::from(big.score(m).is_some());
    }
    black_box(hits);
    println!("ZSCORE in 1.2M: {:.0} ns/op", ns(t, adds));
    let t = Instant::now();
    for (m, _) in new.iter().take(50_000) {
        black_box(big.rank(m));
    }
    println!("ZRANK in 1.2M: {:.0} ns/op", ns(t, 50_000));
    let t = Instant::now();
    for (m, s) in new.iter().take(50_000) {
        big.update(m, s + 0.5);
    }
    println!("ZADD score update in 1.2M: {:.0} ns/op", ns(t, 50_000));
    let t = Instant::now();
    for (m, _) in new.iter().take(50_000) {
        big.remove(m);
    }
    println!("ZREM in 1.2M: {:.0} ns/op", ns(t, 50_000));
    // ZRANGEBYSCORE zset:10k 5000 5099 (two rank lookups, 100 steps).
    let mut small = ZSetValue::new();
    for i in 0..10_000 {
        small.insert(format!("m{i}").as_bytes(), i as f64, limits);
    }
    let reps = 20_000;
    let t = Instant::now();
    for r in 0..reps {
        let a = (5000 + r % 7) as f64;
        let lo = small.count_score_while(|s| s < a);
        let hi = small.count_score_while(|s| s <= a + 99.0);
        // What the reply reads: each member's bytes and score.
        let mut bytes = 0;
        for (m, s) in small.iter_from(lo, false).take(hi - lo) {
            bytes += m.len() + usize::from(s > 0.0);
        }
        black_box(bytes);
    }
    println!("ZRANGEBYSCORE 100 of 10k: {:.0} ns/op", ns(t, reps));
    let t = Instant::now();
    for r in 0..reps {
        let mut bytes = 0;
        for (m, s) in small.iter_from(4900 + r % 7, true).take(100) {
            bytes += m.len() + usize::from(s > 0.0);
        }
        black_box(bytes);
    }
    println!("ZREVRANGE 100 of 10k: {:.0} ns/op", ns(t, reps));
    let len = big.len();
    let t = Instant::now();
    for r in 0..reps {
        let mut bytes = 0;
        for (m, s) in big.iter_from((r * 7919) % (len - 100), false).take(100) {
            bytes += m.len() + usize::from(s > 0.0);
        }
        black_box(bytes);
    }
    println!("ZRANGE 100 from a rank of 1.15M: {:.0} ns/op", ns(t, reps));
    let t = Instant::now();
    let mut cursor = 0;
    let mut seen = 0;
    loop {
        cursor = big.scan(cursor, 10, |_, _| seen += 1);
        if cursor == 0 {
            break;
        }
    }
    println!("ZSCAN whole 1.15M by 10: {:.0} ns/member", ns(t, seen));
}

/// A skiplist of one long member (ZADD k 1 <100 bytes>) stays small: its root
/// leaf grows from a few keys, not a full 1 KiB leaf.
#[test]
fn a_one_member_skiplist_is_small() {
    let limits = ZLimits {
        entries: 128,
        value: 64,
    };
    let mut z = ZSetValue::new();
    z.insert(&[b'x'; 100], 1.0, limits);
    assert_eq!(z.encoding(), ZSetEncoding::Skiplist);
    z.check_invariants();
    assert!(z.heap_bytes() < 640, "{}", z.heap_bytes());
    let stored = ZSetValue::from_sorted(&[(vec![b'y'; 100], 2.0)], limits);
    stored.check_invariants();
    assert!(stored.heap_bytes() < 640, "{}", stored.heap_bytes());
}
