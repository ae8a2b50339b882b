//! HyperLogLog (Redis's hyperloglog.c): PFADD, PFCOUNT, PFMERGE, PFSELFTEST and
//! PFDEBUG on string values in Redis's own HLL format.
//!
//! Why Redis's format rather than a type of Ruvio's own: an HLL *is* a string in
//! Redis. GET returns its bytes, SET (or RESTORE) of bytes made by Redis must count
//! the same here, APPEND or SETRANGE may corrupt it and the next PFCOUNT must say
//! so as Redis does. So the value is the string Redis would hold, byte for byte:
//!
//! ```text
//!  0      4   5      8                      16
//!  | HYLL | E | 0 0 0 | cached cardinality  | registers ...
//!                      u64 LE, bit 63 = stale
//! ```
//!
//! - `E` = 0: [`dense`], 16384 six-bit registers (12288 bytes).
//! - `E` = 1: [`sparse`], a run-length code, usually a few hundred bytes; promoted
//!   to dense past `hll-sparse-max-bytes` or when a register passes 32.
//! - The cached cardinality is what PFCOUNT last answered; any change to the
//!   registers sets bit 63 (stale), and the next single-key PFCOUNT recomputes and
//!   stores it (a write, as in Redis).
//!
//! The element hash ([`hash`]: MurmurHash64A with Redis's seed) and the estimator
//! ([`estimate`]: Ertl's, as Redis 7) are Redis's, so PFCOUNT answers equal Redis's
//! for the same elements. Dense values are changed in place in the keyspace (PFADD
//! into a dense HLL writes one register); sparse ones, at most a few KiB, are
//! rebuilt in a scratch buffer and stored back at their exact size.
//!
//! - `commands`: the handlers, in Redis's order of checks.
//! - `tests`: register access, opcode edge cases, promotion, Redis's own values.

mod commands;
pub(crate) mod dense;
mod estimate;
mod hash;
pub(crate) mod sparse;

#[cfg(test)]
mod tests;

use crate::command::{command, flags::*, EngineCommand, KeySpec};
use crate::error::CmdError;
use crate::value::StrRef;

/// Register index bits: 2^14 = 16384 registers (Redis's `HLL_P`).
pub(crate) const P: u32 = 14;
/// Hash bits left for the pattern (`HLL_Q`).
pub(crate) const Q: usize = 64 - P as usize;
/// Number of registers.
pub(crate) const REGISTERS: usize = 1 << P;
/// Bits per dense register.
pub(crate) const REGISTER_BITS: usize = 6;
/// Largest register value (`HLL_REGISTER_MAX`).
pub(crate) const REGISTER_MAX: u8 = (1 << REGISTER_BITS) - 1;
/// Header bytes (`HLL_HDR_SIZE`).
pub(crate) const HEADER_BYTES: usize = 16;
/// A dense value's exact length (`HLL_DENSE_SIZE`).
pub(crate) const DENSE_BYTES: usize = HEADER_BYTES + dense::REGISTER_BYTES;
/// Where the encoding byte is.
pub(crate) const ENCODING_AT: usize = 4;
/// Encoding byte of the dense representation.
pub(crate) const DENSE: u8 = 0;
/// Encoding byte of the sparse representation.
pub(crate) const SPARSE: u8 = 1;
/// Where the cached cardinality is (8 bytes, little endian).
const CARD_AT: usize = 8;
/// The stale flag: the top bit of the cached cardinality's last byte.
const CARD_STALE: u8 = 0x80;
const MAGIC: &[u8; 4] = b"HYLL";

const _: () = assert!(DENSE_BYTES == 12304 && Q + 1 < 64);

/// How many registers hold each value 0..=63.
pub(crate) type Histogram = [u64; 64];

/// The HyperLogLog family's keyspace events: PFADD and PFMERGE both say `pfadd`.
pub(crate) mod events {
    use crate::command::{Event, EventClass::String};
    pub const PFADD: Event = Event::new(String, "pfadd");
}

/// Which representation a valid HLL value uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Repr {
    /// [`dense`].
    Dense,
    /// [`sparse`].
    Sparse,
}

/// A new header of `encoding`, cardinality 0 and not stale.
pub(crate) fn new_header(encoding: u8) -> [u8; HEADER_BYTES] {
    let mut header = [0u8; HEADER_BYTES];
    header[..4].copy_from_slice(MAGIC);
    header[ENCODING_AT] = encoding;
    header
}

/// Redis's `isHLLObjectOrReply` after the type check: the bytes of a string value
/// that looks like an HLL (magic, a known encoding, a dense one of exact length)
/// and its representation; anything else, an integer included, is WRONGTYPE's
/// "not a valid HyperLogLog". The sparse code itself is checked where it is read.
pub(crate) fn parse(value: StrRef<'_>) -> Result<(&[u8], Repr), CmdError> {
    let StrRef::Bytes(bytes) = value else {
        return Err(CmdError::NotHll);
    };
    if bytes.len() < HEADER_BYTES || &bytes[..4] != MAGIC {
        return Err(CmdError::NotHll);
    }
    match bytes[ENCODING_AT] {
        DENSE if bytes.len() == DENSE_BYTES => Ok((bytes, Repr::Dense)),
        SPARSE => Ok((bytes, Repr::Sparse)),
        _ => Err(CmdError::NotHll),
    }
}

/// The representation a value built here has now (its encoding byte).
pub(crate) fn repr_of(value: &[u8]) -> Repr {
    if value[ENCODING_AT] == DENSE {
        Repr::Dense
    } else {
        Repr::Sparse
    }
}

/// The cached cardinality, unless stale.
pub(crate) fn cached_card(value: &[u8]) -> Option<u64> {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&value[CARD_AT..HEADER_BYTES]);
    (raw[7] & CARD_STALE == 0).then(|| u64::from_le_bytes(raw))
}

/// Store `card` as the cached cardinality (valid).
pub(crate) fn store_card(value: &mut [u8], card: u64) {
    value[CARD_AT..HEADER_BYTES].copy_from_slice(&card.to_le_bytes());
}

/// Mark the cached cardinality stale (`HLL_INVALIDATE_CACHE`).
pub(crate) fn invalidate_cache(value: &mut [u8]) {
    value[HEADER_BYTES - 1] |= CARD_STALE;
}

/// Redis's `hllAdd` on a value being rebuilt (sparse, or dense once promoted):
/// true when a register grew.
pub(crate) fn add(
    value: &mut Vec<u8>,
    element: &[u8],
    sparse_bytes_max: usize,
) -> Result<bool, CmdError> {
    let (index, count) = hash::pattern(element);
    raise(value, index, count, sparse_bytes_max)
}

/// Raise register `index` of a valid value to `count` in whichever representation
/// it has now.
pub(crate) fn raise(
    value: &mut Vec<u8>,
    index: usize,
    count: u8,
    sparse_bytes_max: usize,
) -> Result<bool, CmdError> {
    if repr_of(value) == Repr::Dense {
        Ok(dense::raise(&mut value[HEADER_BYTES..], index, count))
    } else {
        sparse::set(value, index, count, sparse_bytes_max)
    }
}

/// The registers' histogram of a valid value; `INVALIDOBJ` for a corrupt sparse one.
pub(crate) fn histogram(value: &[u8], repr: Repr) -> Result<Histogram, CmdError> {
    let mut histogram = [0u64; 64];
    match repr {
        Repr::Dense => dense::histogram(&value[HEADER_BYTES..], &mut histogram),
        Repr::Sparse => sparse::histogram(value, &mut histogram)?,
    }
    Ok(histogram)
}

/// Raise each of `max` to the matching register of a valid value (Redis's
/// `hllMerge`).
pub(crate) fn merge_into(
    value: &[u8],
    repr: Repr,
    max: &mut [u8; REGISTERS],
) -> Result<(), CmdError> {
    match repr {
        Repr::Dense => {
            dense::merge_into(&value[HEADER_BYTES..], max);
            Ok(())
        }
        Repr::Sparse => sparse::merge_into(value, max),
    }
}

/// The cardinality of registers given one byte each (PFCOUNT of several keys).
pub(crate) fn count_registers(registers: &[u8; REGISTERS]) -> u64 {
    let mut histogram = [0u64; 64];
    for &r in registers {
        histogram[usize::from(r & REGISTER_MAX)] += 1;
    }
    estimate::cardinality(&histogram)
}

/// How many distinct byte strings were added, estimated as PFCOUNT would (one
/// byte per register, 16 KiB): a log replay sizes each database's key index with
/// the count of the keys its records name, so millions of inserts split no index
/// segment (docs/durability.md, Recovery).
pub struct DistinctEstimate {
    registers: Box<[u8; REGISTERS]>,
    added: u64,
}

impl Default for DistinctEstimate {
    fn default() -> Self {
        DistinctEstimate {
            registers: Box::new([0; REGISTERS]),
            added: 0,
        }
    }
}

impl DistinctEstimate {
    /// Count `element` (again: a repeat changes nothing).
    pub fn add(&mut self, element: &[u8]) {
        let (index, run) = hash::pattern(element);
        let register = &mut self.registers[index];
        *register = (*register).max(run);
        self.added += 1;
    }

    /// The estimate: never more than the elements added.
    pub fn estimate(&self) -> u64 {
        count_registers(&self.registers).min(self.added)
    }
}

/// The cardinality of a valid value, computed (not the cache).
pub(crate) fn count(value: &[u8], repr: Repr) -> Result<u64, CmdError> {
    Ok(estimate::cardinality(&histogram(value, repr)?))
}

/// The HyperLogLog family's command table (Redis 7's arity, flags, keys, ACL
/// categories and docs).
#[rustfmt::skip]
pub const COMMANDS: &[EngineCommand] = &[
    command!("pfadd", -2, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "hyperloglog", "fast"], "hyperloglog",
        "2.8.9", "Adds the specified elements to the specified HyperLogLog.",
        "O(1) to add every element.", commands::pfadd),
    command!("pfcount", -2, READONLY, KeySpec::ALL, ["read", "hyperloglog", "slow"], "hyperloglog", "2.8.9",
        "Return the approximated cardinality of the set(s) observed by the HyperLogLog at key(s).",
        "O(1) with a very small average constant time when called with a single key. O(N) with N being the number of keys, and much bigger constant times, when called with multiple keys.",
        commands::pfcount),
    command!("pfmerge", -2, WRITE | DENYOOM, KeySpec::ALL, ["write", "hyperloglog", "slow"], "hyperloglog",
        "2.8.9", "Merge N different HyperLogLogs into a single one.",
        "O(N) to merge N HyperLogLogs, but with high constant times.", commands::pfmerge),
    command!("pfselftest", 1, ADMIN, KeySpec::NONE, ["hyperloglog", "admin", "slow", "dangerous"], "hyperloglog",
        "2.8.9", "An internal command for testing HyperLogLog values", "N/A", commands::pfselftest),
    command!("pfdebug", 3, WRITE | DENYOOM | ADMIN, KeySpec::SECOND, ["write", "hyperloglog", "admin", "slow", "dangerous"],
        "hyperloglog", "2.8.9", "Internal commands for debugging HyperLogLog values", "N/A", commands::pfdebug),
];
