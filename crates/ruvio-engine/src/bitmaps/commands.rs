//! SETBIT, GETBIT, BITCOUNT, BITPOS and BITOP: parse, look up, run a kernel of
//! [`ops`](super::ops), reply.

use ruvio_resp::{Args, Reply};

use super::ops::{self, BitOp};
use super::{bit_offset, events, grows, string_for_write};
use crate::args::{eq_ci, int_arg, parse_i64};
use crate::command::{CmdResult, ExecCtx, Outcome::Done};
use crate::error::CmdError;
use crate::keyspace::NewValue;
use crate::strings::string_of;
use crate::value::StrRef;
use crate::Engine;

/// `SETBIT key offset value`: the bit's old value; creates or zero-extends the
/// string as needed.
pub(super) fn setbit(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let key = args.get(1);
    let offset = bit_offset(engine, args.get(2), 0)?;
    let on = match parse_i64(args.get(3)) {
        Some(0) => false,
        Some(1) => true,
        _ => return Err(CmdError::BitValue),
    };
    let (id, old_len) = string_for_write(engine, ctx, key)?;
    let byte = (offset / 8) as usize;
    let mask = 0x80u8 >> (offset % 8);
    let was = engine.db_mut(ctx.db).modify(id, |e| {
        e.edit_bytes(byte + 1, byte..byte + 1, |bytes| {
            let was = bytes[byte] & mask != 0;
            if on {
                bytes[byte] |= mask;
            } else {
                bytes[byte] &= !mask;
            }
            was
        })
    });
    // Redis counts a write only when the bit flipped or the string grew.
    if was != on || grows(old_len, byte + 1) {
        ctx.changed(key, events::SETBIT, 1);
    }
    reply.int(i64::from(was));
    Ok(Done)
}

/// `GETBIT key offset`: 0 past the end of the string or for a missing key.
pub(super) fn getbit(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let offset = bit_offset(engine, args.get(2), 0)?;
    let Some(id) = engine.lookup_read(ctx, args.get(1)) else {
        reply.int(0);
        return Ok(Done);
    };
    let value = string_of(engine.db(ctx.db).entry(id))?;
    let mut buf = itoa::Buffer::new();
    let bytes = value.bytes(&mut buf);
    let bit = usize::try_from(offset / 8)
        .ok()
        .and_then(|i| bytes.get(i))
        .is_some_and(|b| b & (0x80 >> (offset % 8)) != 0);
    reply.int(i64::from(bit));
    Ok(Done)
}

/// A range argument's unit: `BIT`, or `BYTE` (the default).
fn in_bits(arg: &[u8]) -> Result<bool, CmdError> {
    if eq_ci(arg, "BIT") {
        Ok(true)
    } else if eq_ci(arg, "BYTE") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

/// BITCOUNT's and BITPOS's `start end` over a string of `len` bytes, in bytes or
/// bits, as inclusive bit positions; `None` when the range is empty. Redis'
/// arithmetic: negative indexes count from the end, then both ends are clamped to
/// the string.
fn resolve(start: i64, end: i64, len: usize, bits: bool) -> Option<(u64, u64)> {
    let total = len as i64 * if bits { 8 } else { 1 };
    let from_end = |i: i64| if i < 0 { (i + total).max(0) } else { i };
    let (start, end) = (from_end(start), from_end(end).min(total - 1));
    if start > end {
        return None;
    }
    let (first, last) = if bits {
        (start, end)
    } else {
        (start * 8, end * 8 + 7)
    };
    Some((first as u64, last as u64))
}

/// `BITCOUNT key [start end [BYTE | BIT]]`: set bits in the string or the range.
pub(super) fn bitcount(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let range = match args.len() {
        2 => None,
        4 | 5 => {
            let (start, end) = (int_arg(args.get(2))?, int_arg(args.get(3))?);
            let bits = args.len() == 5 && in_bits(args.get(4))?;
            Some((start, end, bits))
        }
        _ => return Err(CmdError::Syntax),
    };
    let Some(id) = engine.lookup_read(ctx, args.get(1)) else {
        reply.int(0);
        return Ok(Done);
    };
    let value = string_of(engine.db(ctx.db).entry(id))?;
    let mut buf = itoa::Buffer::new();
    let bytes = value.bytes(&mut buf);
    let count = match range {
        None => ops::popcount(bytes),
        // Both from the end and crossed: empty before any clamping (Redis).
        Some((start, end, _)) if start < 0 && end < 0 && start > end => 0,
        Some((start, end, bits)) => resolve(start, end, bytes.len(), bits)
            .map_or(0, |(first, last)| ops::count_range(bytes, first, last)),
    };
    reply.int(count as i64);
    Ok(Done)
}

/// `BITPOS key bit [start [end [BYTE | BIT]]]`: the first bit equal to `bit` in the
/// range, or -1. Without an explicit end the string reads as followed by zeros, so
/// a clear bit not found in it is the first one past its end (Redis).
pub(super) fn bitpos(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let bit = match parse_i64(args.get(2)).ok_or(CmdError::NotInteger)? {
        0 => false,
        1 => true,
        _ => return Err(CmdError::BitArgument),
    };
    // (start, end if given, unit); Redis reads the unit before the end.
    let range = match args.len() {
        3 => None,
        4..=6 => {
            let start = int_arg(args.get(3))?;
            let bits = args.len() == 6 && in_bits(args.get(5))?;
            let end = if args.len() >= 5 {
                Some(int_arg(args.get(4))?)
            } else {
                None
            };
            Some((start, end, bits))
        }
        _ => return Err(CmdError::Syntax),
    };
    let Some(id) = engine.lookup_read(ctx, args.get(1)) else {
        // A missing key is an endless run of zeros.
        reply.int(if bit { -1 } else { 0 });
        return Ok(Done);
    };
    let value = string_of(engine.db(ctx.db).entry(id))?;
    let mut buf = itoa::Buffer::new();
    let bytes = value.bytes(&mut buf);
    let (start, end, bits) = range.unwrap_or((0, None, false));
    let last_byte = bytes.len() as i64 - 1;
    let pos = match resolve(start, end.unwrap_or(last_byte), bytes.len(), bits) {
        None => -1,
        Some((first, last)) => match ops::find_in_range(bytes, bit, first, last) {
            Some(p) => p as i64,
            None if !bit && end.is_none() => last as i64 + 1,
            None => -1,
        },
    };
    reply.int(pos);
    Ok(Done)
}

/// `BITOP <AND | OR | XOR | NOT | DIFF | DIFF1 | ANDOR | ONE> destkey key [key ...]`:
/// stores the result (deleting `destkey` when every source is empty) and replies
/// its length.
pub(super) fn bitop(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let op = BitOp::parse(args.get(1)).ok_or(CmdError::Syntax)?;
    if op == BitOp::Not && args.len() != 4 {
        return Err(CmdError::BitopNotOneSource);
    }
    if let Some(name) = op.first_against_rest().filter(|_| args.len() < 5) {
        return Err(CmdError::BitopTwoSources(name));
    }
    let mut ids = Vec::with_capacity(args.len() - 3);
    for key in args.iter().skip(3) {
        let id = engine.lookup_read(ctx, key);
        if let Some(id) = id {
            string_of(engine.db(ctx.db).entry(id))?;
        }
        ids.push(id);
    }
    let result = {
        let db = engine.db(ctx.db);
        let values: Vec<StrRef<'_>> = ids
            .iter()
            .map(|id| id.map_or(StrRef::Bytes(b""), |id| db.entry(id).str_value()))
            .collect();
        let mut bufs = vec![itoa::Buffer::new(); values.len()];
        let sources: Vec<&[u8]> = values
            .iter()
            .zip(bufs.iter_mut())
            .map(|(v, buf)| v.bytes(buf))
            .collect();
        ops::combine(op, &sources)
    };
    let dest = args.get(2);
    let existing = engine.lookup_write(ctx, dest);
    if !result.is_empty() {
        let value = NewValue::Str {
            bytes: &result,
            raw: true,
        };
        engine.set_key(ctx, dest, existing, value, false);
        ctx.changed(dest, crate::strings::events::SET, 1);
    } else if let Some(id) = existing {
        engine.delete(ctx.db, id);
        ctx.changed(dest, crate::keys::events::DEL, 1);
    }
    reply.int(result.len() as i64);
    Ok(Done)
}

#[cfg(test)]
mod tests {
    use super::resolve;

    #[test]
    fn ranges_follow_redis_arithmetic() {
        // Bytes: whole string, from the end, clamped, empty.
        assert_eq!(resolve(0, -1, 4, false), Some((0, 31)));
        assert_eq!(resolve(-2, -1, 4, false), Some((16, 31)));
        assert_eq!(resolve(-100, 100, 4, false), Some((0, 31)));
        assert_eq!(resolve(3, 1, 4, false), None);
        assert_eq!(resolve(4, 10, 4, false), None);
        assert_eq!(resolve(0, -1, 0, false), None);
        // Bits.
        assert_eq!(resolve(5, 9, 4, true), Some((5, 9)));
        assert_eq!(resolve(-3, -1, 4, true), Some((29, 31)));
        assert_eq!(resolve(i64::MIN, i64::MAX, 4, true), Some((0, 31)));
        assert_eq!(resolve(i64::MIN, i64::MIN, 4, false), Some((0, 7)));
    }
}
