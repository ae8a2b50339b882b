//! BITFIELD and BITFIELD_RO: integers of 1 to 64 bits at any bit offset of a
//! string, read, written and incremented with a choice of overflow handling.
//!
//! A field is read through a 16-byte big-endian window (a field of 64 bits that
//! starts at bit 7 of a byte spans 9 bytes), so any width and alignment is one
//! shift and one mask. Values are checked and wrapped in `i128`, where no width's
//! range or sum can overflow, so each overflow rule is its plain definition:
//! WRAP is arithmetic modulo 2^bits into the type's range, SAT clamps to it, FAIL
//! leaves the field alone and answers nil.
//!
//! The whole command is parsed before anything runs, as Redis does: an error in
//! the last subcommand means no subcommand runs. A command that only reads does
//! not create the key; one that writes grows the string to its farthest written bit
//! first, even if every write then fails.

use ruvio_resp::{Args, Reply};
use smallvec::SmallVec;

use super::{bit_offset, events, grows, string_for_write};
use crate::args::{eq_ci, int_arg, parse_i64};
use crate::command::{CmdResult, ExecCtx, Outcome::Done};
use crate::error::CmdError;
use crate::strings::string_of;
use crate::Engine;

/// Widest signed field.
const SIGNED_BITS_MAX: u32 = 64;
/// Widest unsigned field: a u64 could not be replied as a (signed) RESP integer.
const UNSIGNED_BITS_MAX: u32 = 63;
/// Bytes a field can touch: 64 bits starting at the last bit of a byte.
const FIELD_SPAN_BYTES: usize = 9;
/// The read window (a `u128`).
const WINDOW_BYTES: usize = 16;
const _: () = assert!(FIELD_SPAN_BYTES * 8 >= SIGNED_BITS_MAX as usize + 7);
const _: () = assert!(FIELD_SPAN_BYTES <= WINDOW_BYTES);

/// A field: `i<bits>` or `u<bits>` at a bit offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Field {
    /// Two's complement (`i`) or unsigned (`u`).
    pub(crate) signed: bool,
    /// Width, 1..=64 signed, 1..=63 unsigned.
    pub(crate) bits: u32,
    /// Bit offset of the most significant bit.
    pub(crate) offset: u64,
}

/// What a SET or INCRBY does with a value outside the field's range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Overflow {
    /// Modulo 2^bits, into the type's range (the default).
    Wrap,
    /// Clamp to the type's minimum or maximum.
    Sat,
    /// Write nothing, answer nil.
    Fail,
}

/// One subcommand.
#[derive(Clone, Copy, Debug)]
enum Action {
    Get,
    Set(i64),
    IncrBy(i64),
}

#[derive(Clone, Copy, Debug)]
struct FieldOp {
    field: Field,
    action: Action,
    overflow: Overflow,
}

impl Field {
    /// The field's bits as an unsigned number; bytes past the end of `bytes` read
    /// as zeros.
    pub(crate) fn get_raw(self, bytes: &[u8]) -> u64 {
        let (window, _) = self.window(bytes);
        ((u128::from_be_bytes(window) >> self.shift()) & self.mask()) as u64
    }

    /// Store the low `bits` bits of `raw` into the field. The field must lie inside
    /// `bytes` (a write grows the string first).
    pub(crate) fn put_raw(self, bytes: &mut [u8], raw: u64) {
        let (window, first) = self.window(bytes);
        let mask = self.mask() << self.shift();
        let value = (u128::from(raw) << self.shift()) & mask;
        let window = ((u128::from_be_bytes(window) & !mask) | value).to_be_bytes();
        let n = (bytes.len() - first).min(FIELD_SPAN_BYTES);
        bytes[first..first + n].copy_from_slice(&window[..n]);
    }

    /// The field's value: sign-extended for a signed field.
    pub(crate) fn get(self, bytes: &[u8]) -> i64 {
        self.value_of(self.get_raw(bytes))
    }

    fn value_of(self, raw: u64) -> i64 {
        if self.signed {
            // Move the sign bit to bit 63 and back, arithmetically.
            let unused = 64 - self.bits;
            ((raw << unused) as i64) >> unused
        } else {
            raw as i64
        }
    }

    /// The bytes from the field's first byte (zeros past the end of `bytes`), and
    /// that byte's index.
    fn window(self, bytes: &[u8]) -> ([u8; WINDOW_BYTES], usize) {
        let first = usize::try_from(self.offset / 8).unwrap_or(usize::MAX);
        let mut window = [0u8; WINDOW_BYTES];
        let available = bytes.get(first..).unwrap_or_default();
        let n = available.len().min(FIELD_SPAN_BYTES);
        window[..n].copy_from_slice(&available[..n]);
        (window, first)
    }

    /// How far right the field's lowest bit is from bit 0 of the window.
    fn shift(self) -> u32 {
        128 - (self.offset % 8) as u32 - self.bits
    }

    fn mask(self) -> u128 {
        (1u128 << self.bits) - 1
    }

    /// The smallest and largest value the field holds.
    fn range(self) -> (i128, i128) {
        if self.signed {
            let half = 1i128 << (self.bits - 1);
            (-half, half - 1)
        } else {
            (0, (1i128 << self.bits) - 1)
        }
    }

    /// True for a signed SET value that Redis' overflow check takes as too big
    /// although it is far below the range: `checkSignedBitfieldOverflow` computes
    /// `max - value` in 64 bits, which wraps negative for such values, so SAT
    /// stores the maximum (WRAP and FAIL do not care which side it overflowed).
    fn set_wraps_to_too_big(self, value: i64) -> bool {
        self.signed && self.bits < 64 && self.range().1 - i128::from(value) > i128::from(i64::MAX)
    }

    /// `target` as the field stores it under `overflow`, or `None` (FAIL).
    pub(crate) fn fit(self, target: i128, overflow: Overflow) -> Option<i64> {
        let (min, max) = self.range();
        let value = if (min..=max).contains(&target) {
            target
        } else {
            match overflow {
                Overflow::Wrap => (target - min).rem_euclid(1i128 << self.bits) + min,
                Overflow::Sat if target > max => max,
                Overflow::Sat => min,
                Overflow::Fail => return None,
            }
        };
        // In range of a field of at most 64 bits: fits an i64.
        i64::try_from(value).ok()
    }
}

impl FieldOp {
    /// Run the subcommand on `bytes`: its reply (the value for GET, the old value
    /// for SET, the new one for INCRBY) and whether the stored value changed;
    /// `None` when OVERFLOW FAIL refused a write.
    fn run(&self, bytes: &mut [u8]) -> Option<(i64, bool)> {
        let field = self.field;
        let old = field.get(bytes);
        let (new, answer_new) = match self.action {
            // An unsigned SET reads its argument as a u64 (Redis' cast): -1 is
            // 2^64 - 1, which saturates to the maximum.
            Action::Set(v) if !field.signed => {
                (field.fit(i128::from(v as u64), self.overflow)?, false)
            }
            Action::Set(v) if self.overflow == Overflow::Sat && field.set_wraps_to_too_big(v) => {
                (field.fit(field.range().1, self.overflow)?, false)
            }
            Action::Set(v) => (field.fit(i128::from(v), self.overflow)?, false),
            Action::IncrBy(by) => {
                let target = i128::from(old) + i128::from(by);
                (field.fit(target, self.overflow)?, true)
            }
            Action::Get => return Some((old, false)),
        };
        field.put_raw(bytes, new as u64);
        Some((if answer_new { new } else { old }, new != old))
    }
}

/// `i<bits>` or `u<bits>` (lower-case only, as Redis).
fn field_type(arg: &[u8]) -> Result<(bool, u32), CmdError> {
    let (signed, digits) = match arg.split_first() {
        Some((b'i', digits)) => (true, digits),
        Some((b'u', digits)) => (false, digits),
        _ => return Err(CmdError::BitfieldType),
    };
    let max = if signed {
        SIGNED_BITS_MAX
    } else {
        UNSIGNED_BITS_MAX
    };
    parse_i64(digits)
        .filter(|&n| n >= 1 && n <= i64::from(max))
        .map(|n| (signed, n as u32))
        .ok_or(CmdError::BitfieldType)
}

fn overflow_kind(arg: &[u8]) -> Result<Overflow, CmdError> {
    if eq_ci(arg, "WRAP") {
        Ok(Overflow::Wrap)
    } else if eq_ci(arg, "SAT") {
        Ok(Overflow::Sat)
    } else if eq_ci(arg, "FAIL") {
        Ok(Overflow::Fail)
    } else {
        Err(CmdError::BitfieldOverflow)
    }
}

/// Subcommands kept without a heap allocation: the usual BITFIELD has one or two.
const OPS_INLINE: usize = 4;
type FieldOps = SmallVec<[FieldOp; OPS_INLINE]>;

/// Every subcommand, in order, each with the OVERFLOW in force where it stands.
fn parse_ops(engine: &Engine, args: Args<'_>) -> Result<FieldOps, CmdError> {
    // A GET takes three arguments, so this bounds the list by the input.
    let mut ops = FieldOps::with_capacity((args.len() - 2) / 3);
    let mut overflow = Overflow::Wrap;
    let mut j = 2;
    while j < args.len() {
        let (sub, rest) = (args.get(j), args.len() - j - 1);
        let takes_value = if eq_ci(sub, "GET") && rest >= 2 {
            false
        } else if (eq_ci(sub, "SET") || eq_ci(sub, "INCRBY")) && rest >= 3 {
            true
        } else if eq_ci(sub, "OVERFLOW") && rest >= 1 {
            overflow = overflow_kind(args.get(j + 1))?;
            j += 2;
            continue;
        } else {
            return Err(CmdError::Syntax);
        };
        let (signed, bits) = field_type(args.get(j + 1))?;
        let offset = bit_offset(engine, args.get(j + 2), bits)?;
        let action = if !takes_value {
            Action::Get
        } else if eq_ci(sub, "SET") {
            Action::Set(int_arg(args.get(j + 3))?)
        } else {
            Action::IncrBy(int_arg(args.get(j + 3))?)
        };
        let field = Field {
            signed,
            bits,
            offset,
        };
        ops.push(FieldOp {
            field,
            action,
            overflow,
        });
        j += if takes_value { 4 } else { 3 };
    }
    Ok(ops)
}

/// `BITFIELD key [GET encoding offset | [OVERFLOW <WRAP | SAT | FAIL>]
/// <SET encoding offset value | INCRBY encoding offset increment> ...]`: one reply
/// per GET, SET and INCRBY.
pub(super) fn bitfield(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    bitfield_generic(engine, ctx, args, reply, false)
}

/// `BITFIELD_RO key [GET encoding offset ...]`: BITFIELD that refuses writes.
pub(super) fn bitfield_ro(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    bitfield_generic(engine, ctx, args, reply, true)
}

/// Redis' `bitfieldGeneric`.
fn bitfield_generic(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
    read_only: bool,
) -> CmdResult {
    let ops = parse_ops(engine, args)?;
    let key = args.get(1);
    let writes = || ops.iter().filter(|op| !matches!(op.action, Action::Get));
    let farthest_written = writes()
        .map(|op| op.field.offset + u64::from(op.field.bits) - 1)
        .max();
    // The first byte a write touches (the undo journal keeps the bytes from it).
    let nearest_written = writes().map(|op| op.field.offset / 8).min().unwrap_or(0);
    let Some(farthest) = farthest_written else {
        read_fields(engine, ctx, key, &ops, reply)?;
        return Ok(Done);
    };
    if read_only {
        return Err(CmdError::BitfieldReadOnly);
    }
    let (id, old_len) = string_for_write(engine, ctx, key)?;
    let needed = usize::try_from(farthest / 8 + 1).map_err(|_| CmdError::BitOffset)?;
    let grew = grows(old_len, needed);
    reply.array(ops.len());
    let changes = engine.db_mut(ctx.db).modify(id, |e| {
        let first = usize::try_from(nearest_written)
            .unwrap_or(needed)
            .min(needed);
        e.edit_bytes(needed, first..needed, |bytes| {
            let mut changes = 0;
            for op in &ops {
                match op.run(bytes) {
                    Some((answer, changed)) => {
                        reply.int(answer);
                        // Redis counts every write to a string that grew.
                        if (changed || grew) && !matches!(op.action, Action::Get) {
                            changes += 1;
                        }
                    }
                    None => reply.null(),
                }
            }
            changes
        })
    });
    // Growth alone is a change too, so it is logged (see the module docs).
    let changes = if grew { changes.max(1) } else { changes };
    if changes > 0 {
        ctx.changed(key, events::SETBIT, changes);
    }
    Ok(Done)
}

/// The GET-only form: a read that creates nothing.
fn read_fields(
    engine: &mut Engine,
    ctx: &ExecCtx,
    key: &[u8],
    ops: &[FieldOp],
    reply: &mut Reply<'_>,
) -> Result<(), CmdError> {
    let value = match engine.lookup_read(ctx, key) {
        Some(id) => Some(string_of(engine.db(ctx.db).entry(id))?),
        None => None,
    };
    let mut buf = itoa::Buffer::new();
    let bytes = value.as_ref().map_or(&[][..], |v| v.bytes(&mut buf));
    reply.array(ops.len());
    for op in ops {
        reply.int(op.field.get(bytes));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(signed: bool, bits: u32, offset: u64) -> Field {
        Field {
            signed,
            bits,
            offset,
        }
    }

    #[test]
    fn fields_read_and_write_across_bytes() {
        // Redis' doc example: u5 = 23 at offset 7 is 00000001 01110000.
        let mut bytes = [0u8; 2];
        field(false, 5, 7).put_raw(&mut bytes, 23);
        assert_eq!(bytes, [0b0000_0001, 0b0111_0000]);
        assert_eq!(field(false, 5, 7).get(&bytes), 23);
        assert_eq!(field(true, 5, 7).get(&bytes), 23 - 32);
        // A 64-bit field at bit 7 spans nine bytes and keeps its neighbours.
        let mut wide = [0xffu8; 10];
        field(true, 64, 7).put_raw(&mut wide, 0);
        assert_eq!(wide, [0xfe, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff]);
        field(true, 64, 7).put_raw(&mut wide, u64::MAX);
        assert_eq!(wide, [0xff; 10]);
        assert_eq!(field(true, 64, 7).get(&wide), -1);
        assert_eq!(field(false, 63, 8).get(&wide), i64::MAX);
        // Past the end reads zeros.
        assert_eq!(field(false, 8, 76).get(&wide), 0xf0);
        assert_eq!(field(false, 8, 1_000).get(&wide), 0);
        assert_eq!(field(true, 1, 0).get(&[0x80]), -1);
        assert_eq!(field(false, 1, 0).get(&[0x80]), 1);
    }

    #[test]
    fn overflow_rules() {
        let u8f = field(false, 8, 0);
        let i8f = field(true, 8, 0);
        assert_eq!(u8f.fit(256, Overflow::Wrap), Some(0));
        assert_eq!(u8f.fit(-1, Overflow::Wrap), Some(255));
        assert_eq!(u8f.fit(300, Overflow::Sat), Some(255));
        assert_eq!(u8f.fit(-5, Overflow::Sat), Some(0));
        assert_eq!(u8f.fit(256, Overflow::Fail), None);
        assert_eq!(i8f.fit(128, Overflow::Wrap), Some(-128));
        assert_eq!(i8f.fit(-129, Overflow::Wrap), Some(127));
        assert_eq!(i8f.fit(1000, Overflow::Sat), Some(127));
        assert_eq!(i8f.fit(-1000, Overflow::Sat), Some(-128));
        let i64f = field(true, 64, 0);
        let max = i128::from(i64::MAX);
        assert_eq!(i64f.fit(max + 1, Overflow::Wrap), Some(i64::MIN));
        assert_eq!(i64f.fit(max + 1, Overflow::Sat), Some(i64::MAX));
        assert_eq!(i64f.fit(-max - 2, Overflow::Sat), Some(i64::MIN));
        let u63 = field(false, 63, 0);
        assert_eq!(u63.fit(max + 1, Overflow::Wrap), Some(0));
        let i1 = field(true, 1, 0);
        assert_eq!(i1.fit(1, Overflow::Wrap), Some(-1));
        assert_eq!(i1.fit(1, Overflow::Sat), Some(0));
        assert_eq!(i1.fit(-2, Overflow::Sat), Some(-1));
    }

    #[test]
    fn types_parse_as_redis() {
        assert_eq!(field_type(b"i64"), Ok((true, 64)));
        assert_eq!(field_type(b"u63"), Ok((false, 63)));
        assert_eq!(field_type(b"u1"), Ok((false, 1)));
        for bad in [
            &b"u64"[..],
            b"i65",
            b"i0",
            b"u",
            b"I8",
            b"i08",
            b"i+8",
            b"",
            b"x8",
            b"i8 ",
        ] {
            assert_eq!(field_type(bad), Err(CmdError::BitfieldType), "{bad:?}");
        }
    }
}
