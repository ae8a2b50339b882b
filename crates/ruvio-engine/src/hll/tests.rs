//! Unit tests of the HLL representations: register access, the sparse opcodes'
//! edge cases, promotion, corrupt values, and values and counts taken from
//! redis-server 7.0 (`PFADD`, then `GET`/`PFCOUNT`), which Ruvio must reproduce
//! byte for byte.

use super::*;

const MAX: usize = crate::engine::HLL_SPARSE_BYTES_MAX_DEFAULT;

/// A value holding `elements` added in order, as PFADD of them on a new key.
fn made_of<'a>(elements: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut value = sparse::empty();
    for e in elements {
        add(&mut value, e, MAX).expect("valid");
    }
    invalidate_cache(&mut value);
    value
}

fn numbered(prefix: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("{prefix}{i}").into_bytes())
        .collect()
}

fn made_of_numbered(prefix: &str, n: usize) -> Vec<u8> {
    let elements = numbered(prefix, n);
    made_of(elements.iter().map(Vec::as_slice))
}

fn card(value: &[u8]) -> u64 {
    count(value, repr_of(value)).expect("valid")
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// A sparse value of the header and these opcode bytes.
fn sparse_of(ops: &[u8]) -> Vec<u8> {
    let mut value = new_header(SPARSE).to_vec();
    value.extend_from_slice(ops);
    value
}

#[test]
fn dense_registers_round_trip_without_touching_neighbours() {
    let mut registers = vec![0u8; dense::REGISTER_BYTES];
    for index in [0, 1, 2, 3, 4, 1000, REGISTERS - 2, REGISTERS - 1] {
        dense::set(&mut registers, index, REGISTER_MAX);
        assert_eq!(dense::get(&registers, index), REGISTER_MAX);
        if index > 0 {
            assert_eq!(dense::get(&registers, index - 1), 0, "{index}");
        }
        if index + 1 < REGISTERS {
            assert_eq!(dense::get(&registers, index + 1), 0, "{index}");
        }
        dense::set(&mut registers, index, 0);
    }
    assert!(registers.iter().all(|&b| b == 0));
    let mut x = 12345u64;
    let values: Vec<u8> = (0..REGISTERS)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            (x >> 33) as u8 & REGISTER_MAX
        })
        .collect();
    for (i, &v) in values.iter().enumerate() {
        dense::set(&mut registers, i, v);
    }
    let mut histogram = [0u64; 64];
    dense::histogram(&registers, &mut histogram);
    let mut max = [0u8; REGISTERS];
    dense::merge_into(&registers, &mut max);
    for (i, &v) in values.iter().enumerate() {
        assert_eq!(dense::get(&registers, i), v);
        assert_eq!(max[i], v);
    }
    assert_eq!(histogram.iter().sum::<u64>(), REGISTERS as u64);
    assert!(dense::raise(&mut registers, 7, REGISTER_MAX) || values[7] == REGISTER_MAX);
    assert!(!dense::raise(&mut registers, 7, 1));
}

#[test]
fn hash_and_sparse_bytes_equal_redis() {
    // redis-server 7.0: PFADD k1 a b c; GET k1.
    let mut expected = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80".to_vec();
    expected.extend_from_slice(b"\x60\xf3\x80\x50\xb1\x84\x4b\xfb\x80\x42\x5a");
    assert_eq!(made_of([&b"a"[..], b"b", b"c"]), expected);
    assert_eq!(
        sparse::decode(&expected),
        b"Z:8436 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603"
    );
    // PFADD s200 e0 .. e199 (one call); GET s200.
    let s200 = hex(include_str!("testdata/s200.hex").trim());
    assert_eq!(made_of_numbered("e", 200), s200);
    assert_eq!(sparse::empty(), b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0\x7f\xff");
}

#[test]
fn counts_equal_redis() {
    // redis-server 7.0: PFADD n<N> e0 .. e<N-1> in batches of 1000; PFCOUNT, PFDEBUG ENCODING.
    for (n, want, repr) in [
        (1, 1, Repr::Sparse),
        (10, 10, Repr::Sparse),
        (100, 100, Repr::Sparse),
        (1000, 1008, Repr::Sparse),
        (10000, 9973, Repr::Dense),
        (100_000, 100_853, Repr::Dense),
    ] {
        let value = made_of_numbered("e", n);
        assert_eq!(repr_of(&value), repr, "{n}");
        assert_eq!(card(&value), want, "{n}");
        if repr == Repr::Sparse {
            assert_eq!(card(&sparse::to_dense(&value).expect("valid")), want);
        }
    }
    assert_eq!(made_of_numbered("e", 1000).len(), 1906);
    // PFCOUNT u1 u2 (a0..a499, b0..b4999) and PFCOUNT u1 n100 n10000.
    let union = |values: &[Vec<u8>]| {
        let mut max = [0u8; REGISTERS];
        for v in values {
            merge_into(v, repr_of(v), &mut max).expect("valid");
        }
        count_registers(&max)
    };
    let (u1, u2) = (made_of_numbered("a", 500), made_of_numbered("b", 5000));
    assert_eq!(union(&[u1.clone(), u2]), 5563);
    let (n100, n10000) = (made_of_numbered("e", 100), made_of_numbered("e", 10000));
    assert_eq!(union(&[u1, n100, n10000]), 10454);
    assert_eq!(union(&[]), 0);
}

#[test]
fn sparse_splits_and_merges_opcodes() {
    let set =
        |value: &mut Vec<u8>, index, count| sparse::set(value, index, count, MAX).expect("valid");
    // The first register: VAL then XZERO; the last: XZERO then VAL.
    let mut v = sparse::empty();
    assert!(set(&mut v, 0, 3));
    assert_eq!(sparse::decode(&v), b"v:3,1 Z:16383");
    assert!(set(&mut v, REGISTERS - 1, 2));
    assert_eq!(sparse::decode(&v), b"v:3,1 Z:16382 v:2,1");
    assert_eq!(cached_card(&v), None, "a change makes the cache stale");
    // A split in the middle of an XZERO, then ZEROs on either side of short gaps.
    assert!(set(&mut v, 100, 1));
    assert_eq!(sparse::decode(&v), b"v:3,1 Z:99 v:1,1 Z:16282 v:2,1");
    assert!(set(&mut v, 102, 1));
    assert_eq!(
        sparse::decode(&v),
        b"v:3,1 Z:99 v:1,1 z:1 v:1,1 Z:16280 v:2,1"
    );
    // ZERO of one register becomes a VAL in place, and equal VALs merge.
    assert!(set(&mut v, 101, 1));
    assert_eq!(sparse::decode(&v), b"v:3,1 Z:99 v:1,3 Z:16280 v:2,1");
    assert!(set(&mut v, 103, 1));
    assert_eq!(sparse::decode(&v), b"v:3,1 Z:99 v:1,4 Z:16279 v:2,1");
    // A VAL run never passes 4 registers.
    assert!(set(&mut v, 104, 1));
    assert_eq!(sparse::decode(&v), b"v:3,1 Z:99 v:1,4 v:1,1 Z:16278 v:2,1");
    // Raising one register of a run splits the VAL; lower or equal changes nothing.
    assert!(set(&mut v, 101, 5));
    assert_eq!(
        sparse::decode(&v),
        b"v:3,1 Z:99 v:1,1 v:5,1 v:1,3 Z:16278 v:2,1"
    );
    assert!(!set(&mut v, 101, 5));
    assert!(!set(&mut v, 0, 2));
    let mut histogram = [0u64; 64];
    sparse::histogram(&v, &mut histogram).expect("valid");
    assert_eq!(
        (histogram[0], histogram[1], histogram[5]),
        (REGISTERS as u64 - 7, 4, 1)
    );
}

#[test]
fn sparse_promotes_to_dense() {
    // A register above 32.
    let mut v = sparse::empty();
    sparse::set(&mut v, 10, 2, MAX).expect("valid");
    store_card(&mut v, 1);
    assert!(sparse::set(&mut v, 20, 33, MAX).expect("valid"));
    assert_eq!((v.len(), repr_of(&v)), (DENSE_BYTES, Repr::Dense));
    assert_eq!(cached_card(&v), Some(1), "promotion keeps the header");
    assert_eq!(
        (
            dense::get(&v[HEADER_BYTES..], 10),
            dense::get(&v[HEADER_BYTES..], 20)
        ),
        (2, 33)
    );
    // A value that would outgrow hll-sparse-max-bytes (here 30 bytes).
    let mut v = sparse::empty();
    for i in 0..20 {
        raise(&mut v, i * 100, 1, 30).expect("valid");
        assert!(v.len() <= 30 || repr_of(&v) == Repr::Dense);
    }
    assert_eq!(repr_of(&v), Repr::Dense);
    assert!((0..20).all(|i| dense::get(&v[HEADER_BYTES..], i * 100) == 1));
    // PFSELFTEST's rule: small sets stay sparse with the default limit.
    assert_eq!(repr_of(&made_of_numbered("x", 1000)), Repr::Sparse);
}

#[test]
fn corrupt_values_are_refused_not_panicked_on() {
    use crate::value::StrRef;
    for bad in [
        &b"HYLL"[..],
        b"HYLZ\x01\0\0\0\0\0\0\0\0\0\0\0\x7f\xff",
        b"HYLL\x02\0\0\0\0\0\0\0\0\0\0\0",
    ] {
        assert_eq!(parse(StrRef::Bytes(bad)), Err(CmdError::NotHll));
    }
    assert_eq!(parse(StrRef::Int(5)), Err(CmdError::NotHll));
    let mut short_dense = new_header(DENSE).to_vec();
    short_dense.resize(DENSE_BYTES - 1, 0);
    assert_eq!(parse(StrRef::Bytes(&short_dense)), Err(CmdError::NotHll));
    // Too few registers, a header alone, an XZERO cut short at the end, a VAL
    // after the last register.
    let corrupt = [
        sparse_of(&[0x7f, 0xfe]),
        sparse_of(&[]),
        sparse_of(&[0x7f]),
        sparse_of(&[0x7f, 0xff, 0x80]),
    ];
    for v in &corrupt {
        assert_eq!(parse(StrRef::Bytes(v)).map(|(_, r)| r), Ok(Repr::Sparse));
        assert_eq!(count(v, Repr::Sparse), Err(CmdError::HllCorrupted));
        assert_eq!(sparse::to_dense(v), Err(CmdError::HllCorrupted));
        let mut max = [0u8; REGISTERS];
        assert_eq!(sparse::merge_into(v, &mut max), Err(CmdError::HllCorrupted));
    }
    // Setting a register past the covered ones fails; inside them it works.
    let mut v = sparse_of(&[0x7f, 0xfe]);
    assert_eq!(
        sparse::set(&mut v, REGISTERS - 1, 1, MAX),
        Err(CmdError::HllCorrupted)
    );
    assert_eq!(sparse::set(&mut v, 0, 1, MAX), Ok(true));
    // The cut XZERO reads its missing byte as 0 (covers 16129 registers), and the
    // split that replaces it loses its last byte, as Redis's does: the new XZERO
    // is cut in turn, or the VAL after it is gone.
    let mut v = sparse_of(&[0x7f]);
    assert_eq!(sparse::set(&mut v, 5, 1, MAX), Ok(true));
    assert_eq!(sparse::decode(&v), b"z:5 v:1,1 Z:15873");
    let mut v = sparse_of(&[0x7f]);
    assert_eq!(sparse::set(&mut v, 16128, 1, MAX), Ok(true));
    assert_eq!(sparse::decode(&v), b"Z:16128");
}

#[test]
fn estimator_edges() {
    let mut histogram = [0u64; 64];
    histogram[0] = REGISTERS as u64;
    assert_eq!(estimate::cardinality(&histogram), 0);
    let mut full = [0u64; 64];
    full[Q + 1] = REGISTERS as u64;
    assert!(estimate::cardinality(&full) > 0);
    let mut max = [REGISTER_MAX; REGISTERS];
    assert!(count_registers(&max) > 0);
    max.fill(0);
    assert_eq!(count_registers(&max), 0);
}

/// The registers of a valid value, one byte each.
fn registers_of(value: &[u8]) -> Vec<u8> {
    let dense = match repr_of(value) {
        Repr::Dense => value.to_vec(),
        Repr::Sparse => sparse::to_dense(value).expect("valid"),
    };
    (0..REGISTERS)
        .map(|i| dense::get(&dense[HEADER_BYTES..], i))
        .collect()
}

mod props {
    use super::*;
    use proptest::prelude::*;

    /// A register update: clustered indexes (so runs split and merge), values
    /// mostly below 33 (sparse) and sometimes above (promotion).
    fn update() -> impl Strategy<Value = (usize, u8)> {
        let index = prop_oneof![0usize..80, (0usize..REGISTERS), REGISTERS - 80..REGISTERS];
        let count = prop_oneof![8 => 1u8..=6, 2 => 1u8..=32, 1 => 33u8..=51];
        (index, count)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Raising registers through the sparse code keeps exactly the registers
        /// a plain array keeps, reports a change exactly when the array changed,
        /// and stays within hll-sparse-max-bytes while sparse.
        #[test]
        fn raise_follows_a_register_array(
            updates in proptest::collection::vec(update(), 1..150),
            sparse_max in prop_oneof![Just(40usize), Just(300), Just(3000)],
        ) {
            let mut value = sparse::empty();
            let mut model = vec![0u8; REGISTERS];
            for (index, count) in updates {
                let grew = raise(&mut value, index, count, sparse_max).expect("valid");
                prop_assert_eq!(grew, count > model[index]);
                model[index] = model[index].max(count);
                if repr_of(&value) == Repr::Sparse {
                    prop_assert!(value.len() <= sparse_max.max(18));
                    let mut histogram = [0u64; 64];
                    prop_assert!(sparse::histogram(&value, &mut histogram).is_ok());
                }
            }
            prop_assert_eq!(registers_of(&value), model);
        }

        /// Whatever follows a sparse header, reading and writing it never panics.
        #[test]
        fn corrupt_sparse_never_panics(
            ops in proptest::collection::vec(any::<u8>(), 0..40),
            index in 0usize..REGISTERS,
            count in 1u8..=51,
        ) {
            let value = sparse_of(&ops);
            let _ = count_registers(&[0; REGISTERS]);
            let _ = super::count(&value, Repr::Sparse);
            let _ = sparse::to_dense(&value);
            let _ = sparse::decode(&value);
            let mut max = [0u8; REGISTERS];
            let _ = sparse::merge_into(&value, &mut max);
            let mut changed = value.clone();
            if sparse::set(&mut changed, index, count, 3000).is_ok() {
                prop_assert!(changed.len() >= HEADER_BYTES);
            }
        }
    }
}

#[test]
fn a_distinct_estimate_counts_as_pfcount_and_ignores_repeats() {
    let keys = numbered("key:", 100_000);
    let mut estimate = DistinctEstimate::default();
    for round in 0..3 {
        for key in &keys[..if round == 0 { 100_000 } else { 50_000 }] {
            estimate.add(key);
        }
    }
    let hll = made_of(keys.iter().map(|k| k.as_slice()));
    assert_eq!(estimate.estimate(), card(&hll));
    let off = estimate.estimate().abs_diff(100_000);
    assert!(off < 2_000, "estimate {} for 100000", estimate.estimate());
}

#[test]
fn a_distinct_estimate_never_passes_what_was_added() {
    let mut estimate = DistinctEstimate::default();
    assert_eq!(estimate.estimate(), 0);
    estimate.add(b"only");
    assert_eq!(estimate.estimate(), 1);
}
