//! The kernels under BITCOUNT, BITPOS and BITOP, a word (or a vector) at a time.
//!
//! Bit numbering is Redis': bit `n` of a string is bit `7 - n % 8` of byte `n / 8`,
//! so bit 0 is the most significant bit of the first byte.
//!
//! Why the POPCNT switch: the build targets baseline x86-64, where
//! `u64::count_ones` is a dozen shift-and-mask instructions; nearly every x86-64
//! CPU in service has the POPCNT instruction, which does it in one. As Redis'
//! `redisPopcount` does, the count checks the CPU once (the standard library caches
//! the answer) and runs a copy of the same loop compiled for POPCNT. The loop keeps
//! four independent sums so consecutive counts do not wait on each other.

/// Bytes per step of the counting loop: four words, four independent sums.
const COUNT_STEP_BYTES: usize = 32;
const WORD_BYTES: usize = 8;

/// Number of set bits in `bytes`.
pub(crate) fn popcount(bytes: &[u8]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU has POPCNT (checked just above), the only feature the
        // function is compiled for beyond the baseline.
        return unsafe { popcount_with_popcnt(bytes) };
    }
    popcount_words(bytes)
}

/// [`popcount_words`] compiled for the POPCNT instruction.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn popcount_with_popcnt(bytes: &[u8]) -> u64 {
    popcount_words(bytes)
}

#[inline(always)]
fn popcount_words(bytes: &[u8]) -> u64 {
    let word =
        |b: &[u8]| u64::from(u64::from_ne_bytes(b.try_into().unwrap_or([0; 8])).count_ones());
    let mut sums = [0u64; 4];
    let mut steps = bytes.chunks_exact(COUNT_STEP_BYTES);
    for step in &mut steps {
        for (sum, w) in sums.iter_mut().zip(step.chunks_exact(WORD_BYTES)) {
            *sum += word(w);
        }
    }
    let rest = steps.remainder();
    let mut words = rest.chunks_exact(WORD_BYTES);
    let mut total: u64 = sums.iter().sum();
    for w in &mut words {
        total += word(w);
    }
    total
        + words
            .remainder()
            .iter()
            .map(|b| u64::from(b.count_ones()))
            .sum::<u64>()
}

/// Set bits among bits `first..=last` of `bytes` (both inside it).
pub(crate) fn count_range(bytes: &[u8], first: u64, last: u64) -> u64 {
    debug_assert!(first <= last && last / 8 < bytes.len() as u64);
    let (first_byte, last_byte) = ((first / 8) as usize, (last / 8) as usize);
    let whole = popcount(&bytes[first_byte..=last_byte]);
    // Take off the bits of the edge bytes that lie outside the range.
    let before = u64::from((bytes[first_byte] & !(0xff >> (first % 8))).count_ones());
    let after = u64::from((bytes[last_byte] & (0x7f >> (last % 8))).count_ones());
    whole - before - after
}

/// The first bit equal to `bit` among bits `first..=last` of `bytes` (both inside
/// it), or `None`.
pub(crate) fn find_in_range(bytes: &[u8], bit: bool, first: u64, last: u64) -> Option<u64> {
    debug_assert!(first <= last && last / 8 < bytes.len() as u64);
    let (first_byte, last_byte) = ((first / 8) as usize, (last / 8) as usize);
    // Bits outside the range are forced to the value not searched for.
    let outside = |b: u8, mask: u8| if bit { b & !mask } else { b | mask };
    let head_mask = !(0xff >> (first % 8));
    let tail_mask = 0x7f >> (last % 8);
    let head = outside(bytes[first_byte], head_mask);
    if first_byte == last_byte {
        let only = outside(head, tail_mask);
        return first_in_byte(only, bit).map(|i| first_byte as u64 * 8 + i);
    }
    if let Some(i) = first_in_byte(head, bit) {
        return Some(first_byte as u64 * 8 + i);
    }
    let middle = &bytes[first_byte + 1..last_byte];
    if let Some(i) = first_bit(middle, bit) {
        return Some((first_byte as u64 + 1) * 8 + i);
    }
    let tail = outside(bytes[last_byte], tail_mask);
    first_in_byte(tail, bit).map(|i| last_byte as u64 * 8 + i)
}

/// The first bit equal to `bit` in `bytes`, skipping whole words that cannot hold
/// it.
pub(crate) fn first_bit(bytes: &[u8], bit: bool) -> Option<u64> {
    let skip_word = if bit { 0 } else { u64::MAX };
    let mut words = bytes.chunks_exact(WORD_BYTES);
    let mut at = 0u64;
    for w in &mut words {
        if u64::from_ne_bytes(w.try_into().unwrap_or([0; 8])) != skip_word {
            break;
        }
        at += WORD_BYTES as u64;
    }
    bytes[at as usize..]
        .iter()
        .enumerate()
        .find_map(|(i, &b)| first_in_byte(b, bit).map(|j| (at + i as u64) * 8 + j))
}

/// The first bit (from the most significant) of `b` equal to `bit`.
fn first_in_byte(b: u8, bit: bool) -> Option<u64> {
    let b = if bit { b } else { !b };
    (b != 0).then(|| u64::from(b.leading_zeros()))
}

/// BITOP's operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BitOp {
    /// Bits set in every source.
    And,
    /// Bits set in any source.
    Or,
    /// Bits set in an odd number of sources.
    Xor,
    /// The one source's bits inverted.
    Not,
    /// Bits of the first source set in none of the others (Redis 8.2).
    Diff,
    /// Bits set in one of the others but not in the first source (Redis 8.2).
    Diff1,
    /// Bits of the first source set in at least one of the others (Redis 8.2).
    AndOr,
    /// Bits set in exactly one source (Redis 8.2).
    One,
}

impl BitOp {
    /// The operation named `name` (any case).
    pub(crate) fn parse(name: &[u8]) -> Option<BitOp> {
        const NAMES: [(&str, BitOp); 8] = [
            ("and", BitOp::And),
            ("or", BitOp::Or),
            ("xor", BitOp::Xor),
            ("not", BitOp::Not),
            ("diff", BitOp::Diff),
            ("diff1", BitOp::Diff1),
            ("andor", BitOp::AndOr),
            ("one", BitOp::One),
        ];
        NAMES
            .iter()
            .find(|(n, _)| crate::args::eq_ci(name, n))
            .map(|&(_, op)| op)
    }

    /// The name in upper case (for the "at least two source keys" error), for the
    /// operations that compare the first source with the others.
    pub(crate) fn first_against_rest(self) -> Option<&'static str> {
        match self {
            BitOp::Diff => Some("DIFF"),
            BitOp::Diff1 => Some("DIFF1"),
            BitOp::AndOr => Some("ANDOR"),
            _ => None,
        }
    }
}

/// `op` over `sources`, each read as zero-padded to the longest: the bytes BITOP
/// stores (empty when every source is empty). `sources` is never empty, and NOT
/// has exactly one.
pub(crate) fn combine(op: BitOp, sources: &[&[u8]]) -> Vec<u8> {
    let len = sources.iter().map(|s| s.len()).max().unwrap_or(0);
    let Some((first, rest)) = sources.split_first() else {
        return Vec::new();
    };
    if len == 0 {
        return Vec::new();
    }
    let padded = |s: &[u8]| {
        let mut out = Vec::with_capacity(len);
        out.extend_from_slice(s);
        out.resize(len, 0);
        out
    };
    match op {
        BitOp::And => {
            let mut out = padded(first);
            for s in rest {
                merge(&mut out, s, |a, b| a & b);
                out[s.len()..].fill(0);
            }
            out
        }
        BitOp::Or => {
            let mut out = padded(first);
            for s in rest {
                merge(&mut out, s, |a, b| a | b);
            }
            out
        }
        BitOp::Xor => {
            let mut out = padded(first);
            for s in rest {
                merge(&mut out, s, |a, b| a ^ b);
            }
            out
        }
        BitOp::Not => {
            let mut out = padded(first);
            out.iter_mut().for_each(|b| *b = !*b);
            out
        }
        BitOp::Diff | BitOp::Diff1 | BitOp::AndOr => {
            let mut out = vec![0; len];
            for s in rest {
                merge(&mut out, s, |a, b| a | b);
            }
            let with_first: fn(u8, u8) -> u8 = match op {
                BitOp::Diff => |any, x| x & !any,
                BitOp::Diff1 => |any, x| !x & any,
                _ => |any, x| x & any,
            };
            merge(&mut out, first, with_first);
            // Past the first source it reads as zeros.
            out[first.len()..]
                .iter_mut()
                .for_each(|b| *b = with_first(*b, 0));
            out
        }
        BitOp::One => {
            // Bits seen in at least one source, and in at least two.
            let mut once = padded(first);
            let mut more = vec![0; len];
            for s in rest {
                for ((o, m), &b) in once.iter_mut().zip(more.iter_mut()).zip(*s) {
                    *m |= *o & b;
                    *o |= b;
                }
            }
            merge(&mut once, &more, |o, m| o & !m);
            once
        }
    }
}

/// `out[i] = f(out[i], src[i])` over the bytes both have: a plain loop the compiler
/// turns into vector instructions.
fn merge(out: &mut [u8], src: &[u8], f: impl Fn(u8, u8) -> u8) {
    for (o, &s) in out.iter_mut().zip(src) {
        *o = f(*o, s);
    }
}
