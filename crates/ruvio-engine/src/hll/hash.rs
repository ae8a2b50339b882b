//! The element hash: MurmurHash64A (Austin Appleby's MurmurHash2, 64-bit version)
//! with Redis's seed, reading the input as little-endian words on every machine,
//! as Redis's endian-neutral variant does. The hash decides which register an
//! element lands in and what it writes there, so it must be Redis's bit for bit:
//! a value made by Redis and one made here count the same only then.

use super::{P, Q, REGISTERS};

/// Redis's seed for `hllPatLen` (`0xadc83b19`).
const SEED: u64 = 0xadc8_3b19;
/// MurmurHash64A's multiplier and shift.
const M: u64 = 0xc6a4_a793_5bd1_e995;
const R: u32 = 47;

/// MurmurHash64A of `key` with `seed`.
pub(crate) fn murmur64a(key: &[u8], seed: u64) -> u64 {
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut words = key.chunks_exact(8);
    for word in &mut words {
        let mut raw = [0u8; 8];
        raw.copy_from_slice(word);
        let mut k = u64::from_le_bytes(raw).wrapping_mul(M);
        k ^= k >> R;
        h ^= k.wrapping_mul(M);
        h = h.wrapping_mul(M);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^ (h >> R)
}

/// Redis's `hllPatLen`: the register `element` belongs to (the hash's low `P`
/// bits) and the length of the `0...01` pattern in the remaining bits, counting
/// the final 1 (1 ..= Q + 1: a 1 is forced above the last bit so the count ends).
pub(crate) fn pattern(element: &[u8]) -> (usize, u8) {
    let hash = murmur64a(element, SEED);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}
