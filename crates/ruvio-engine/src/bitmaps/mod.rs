//! Bitmaps and bit fields (Redis' bitops.c): SETBIT, GETBIT, BITCOUNT, BITPOS,
//! BITOP and BITFIELD over string values.
//!
//! Why no type of their own: in Redis a bitmap *is* a string (bit 0 is the most
//! significant bit of byte 0), so GET, SETRANGE, APPEND, DUMP and every client's
//! code see the same bytes; a separate encoding would have to be converted back on
//! every one of those. So this family reads values through the string paths
//! ([`crate::strings::string_of`], an `int` read as its decimal text as Redis'
//! `getObjectReadOnlyString` does) and writes through one entry primitive,
//! [`Entry::edit_bytes`](crate::keyspace::Entry::edit_bytes): grow zero-filled,
//! mark `raw` (Redis unshares the object before writing bits, so `int` and
//! `embstr` become `raw`), edit in place. A short bitmap (a BITFIELD u16 counter)
//! stays inline in its 48-byte entry; a new far-out SETBIT takes zeroed pages from
//! the allocator instead of writing half a gigabyte of zeros.
//!
//! - [`ops`]: the word-at-a-time kernels: population count (POPCNT when the CPU
//!   has it), first set or clear bit, BITOP's combinations.
//! - [`bitfield`]: BITFIELD and BITFIELD_RO: field types, offsets, overflow.
//! - `commands`: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP.
//!
//! Redis 7.2's rules throughout, with BITOP's DIFF, DIFF1, ANDOR and ONE as Redis
//! 8.2 defines them. One deliberate difference from 7.2: a BITFIELD whose writes
//! all fail (OVERFLOW FAIL) but which created or grew the string counts as one
//! change, so it is logged and seen (7.2 counts none and loses the growth on
//! replicas; redis/redis#15699 fixes it the same way).

pub(crate) mod bitfield;
pub(crate) mod ops;

mod commands;

#[cfg(test)]
mod tests;

use crate::command::{command, flags::*, EngineCommand, ExecCtx, KeyShape, KeySpec};
use crate::error::CmdError;
use crate::keyspace::{EntryId, NewValue, STRING_BYTES_MAX};
use crate::Engine;

/// The family's keyspace event (BITOP reports `set` and `del` like SET and DEL).
pub(crate) mod events {
    use crate::command::{Event, EventClass::String};
    pub const SETBIT: Event = Event::new(String, "setbit");
}

/// BITOP's keys: the destination, then every source (Redis' legacy `2 -1 1`).
const DEST_AND_SOURCES: KeySpec = KeySpec(&[KeyShape::Range {
    first: 2,
    last: -1,
    step: 1,
}]);

const BITFIELD_COMPLEXITY: &str = "O(1) for each subcommand specified";

/// The bitmap family's command table (Redis 7's arity, flags, keys, ACL categories
/// and docs).
#[rustfmt::skip]
pub const COMMANDS: &[EngineCommand] = &[
    command!("setbit", 4, WRITE | DENYOOM, KeySpec::ONE, ["write", "bitmap", "slow"], "bitmap", "2.2.0",
        "Sets or clears the bit at offset in the string value stored at key", "O(1)", commands::setbit),
    command!("getbit", 3, READONLY | FAST, KeySpec::ONE, ["read", "bitmap", "fast"], "bitmap", "2.2.0",
        "Returns the bit value at offset in the string value stored at key", "O(1)", commands::getbit),
    command!("bitcount", -2, READONLY, KeySpec::ONE, ["read", "bitmap", "slow"], "bitmap", "2.6.0",
        "Count set bits in a string", "O(N)", commands::bitcount),
    command!("bitpos", -3, READONLY, KeySpec::ONE, ["read", "bitmap", "slow"], "bitmap", "2.8.7",
        "Find first bit set or clear in a string", "O(N)", commands::bitpos),
    command!("bitop", -4, WRITE | DENYOOM, DEST_AND_SOURCES, ["write", "bitmap", "slow"], "bitmap", "2.6.0",
        "Perform bitwise operations between strings", "O(N)", commands::bitop),
    command!("bitfield", -2, WRITE | DENYOOM, KeySpec::ONE, ["write", "bitmap", "slow"], "bitmap", "3.2.0",
        "Perform arbitrary bitfield integer operations on strings", BITFIELD_COMPLEXITY, bitfield::bitfield),
    command!("bitfield_ro", -2, READONLY | FAST, KeySpec::ONE, ["read", "bitmap", "fast"], "bitmap", "6.0.0",
        "Perform arbitrary bitfield integer operations on strings. Read-only variant of BITFIELD",
        BITFIELD_COMPLEXITY, bitfield::bitfield_ro),
];

/// Redis' `getBitOffsetFromArgument`: a bit offset, or `#n` (n fields of
/// `field_bits` bits; BITFIELD only, `field_bits > 0`). Refused when not an
/// integer, negative, or when its byte is not below `proto-max-bulk-len` (capped
/// at the longest string Ruvio stores).
fn bit_offset(engine: &Engine, arg: &[u8], field_bits: u32) -> Result<u64, CmdError> {
    let (digits, scale) = match arg.split_first() {
        Some((b'#', rest)) if field_bits > 0 => (rest, i64::from(field_bits)),
        _ => (arg, 1),
    };
    // Redis multiplies in 64 bits and checks the sign after, so a `#n` so large
    // that the product wraps is refused or taken as what it wraps to; the same
    // here, for the same answers.
    let offset = crate::args::parse_i64(digits)
        .map(|n| n.wrapping_mul(scale))
        .and_then(|n| u64::try_from(n).ok())
        .ok_or(CmdError::BitOffset)?;
    let bytes_max = engine.config().proto_max_bulk_len.min(STRING_BYTES_MAX) as u64;
    if offset >> 3 >= bytes_max {
        return Err(CmdError::BitOffset);
    }
    Ok(offset)
}

/// The string at `key` about to have bits written (Redis'
/// `lookupStringForBitCommand` before it grows the string): its id and its length
/// now, `None` when it was missing and has just been created empty (and `raw`, as
/// Redis' `createObject` makes it). WRONGTYPE for other types.
fn string_for_write(
    engine: &mut Engine,
    ctx: &ExecCtx,
    key: &[u8],
) -> Result<(EntryId, Option<usize>), CmdError> {
    match engine.lookup_write(ctx, key) {
        Some(id) => {
            let len = crate::strings::string_of(engine.db(ctx.db).entry(id))?.len();
            Ok((id, Some(len)))
        }
        None => {
            let empty = NewValue::Str {
                bytes: b"",
                raw: true,
            };
            Ok((engine.set_key(ctx, key, None, empty, false), None))
        }
    }
}

/// True when writing up to byte `bytes_needed` made the string longer (or it was
/// just created): Redis then counts the write as a change even if no bit flipped.
fn grows(old_len: Option<usize>, bytes_needed: usize) -> bool {
    old_len.is_none_or(|len| bytes_needed > len)
}
