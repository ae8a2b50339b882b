//! The dense representation: 16384 registers of 6 bits packed from the least
//! significant bit of each byte up, 12288 bytes after the header (Redis's
//! `HLL_DENSE_GET_REGISTER`/`HLL_DENSE_SET_REGISTER` layout, so a dense value made
//! by Redis is read and written here as it is). Every function takes the register
//! bytes only (the value without its 16-byte header).
//!
//! Four registers fill three bytes exactly, so whole-array passes (the histogram,
//! merging) read three bytes at a time instead of addressing each register.

use super::{Histogram, REGISTERS, REGISTER_BITS, REGISTER_MAX};

/// Bytes of the packed registers.
pub(crate) const REGISTER_BYTES: usize = (REGISTERS * REGISTER_BITS).div_ceil(8);
const _: () = assert!(REGISTER_BYTES == 12288 && REGISTER_BYTES.is_multiple_of(3));

/// Byte offset and bit shift of register `index`.
fn position(index: usize) -> (usize, u32) {
    let bit = index * REGISTER_BITS;
    (bit / 8, (bit % 8) as u32)
}

/// The two bytes holding register `index` as one little-endian word. The last
/// register fits in its first byte; Redis reads the string's terminating zero as
/// the second, here it is 0 as well.
fn word_at(registers: &[u8], byte: usize) -> u16 {
    let high = registers.get(byte + 1).copied().unwrap_or(0);
    u16::from(registers[byte]) | (u16::from(high) << 8)
}

/// Register `index`.
pub(crate) fn get(registers: &[u8], index: usize) -> u8 {
    let (byte, shift) = position(index);
    ((word_at(registers, byte) >> shift) & u16::from(REGISTER_MAX)) as u8
}

/// Set register `index` to `value` (at most [`REGISTER_MAX`]).
pub(crate) fn set(registers: &mut [u8], index: usize, value: u8) {
    debug_assert!(value <= REGISTER_MAX);
    let (byte, shift) = position(index);
    let mask = u16::from(REGISTER_MAX) << shift;
    let word = (word_at(registers, byte) & !mask) | (u16::from(value & REGISTER_MAX) << shift);
    let [low, high] = word.to_le_bytes();
    registers[byte] = low;
    if let Some(next) = registers.get_mut(byte + 1) {
        *next = high;
    }
}

/// Redis's `hllDenseSet`: raise register `index` to `count`; true when it grew.
pub(crate) fn raise(registers: &mut [u8], index: usize, count: u8) -> bool {
    if count > get(registers, index) {
        set(registers, index, count);
        true
    } else {
        false
    }
}

/// The four registers packed in three bytes.
fn unpack(c: &[u8]) -> [u8; 4] {
    let m = REGISTER_MAX;
    [
        c[0] & m,
        ((c[0] >> 6) | (c[1] << 2)) & m,
        ((c[1] >> 4) | (c[2] << 4)) & m,
        c[2] >> 2,
    ]
}

/// Count the registers of each value into `histogram` (Redis's `hllDenseRegHisto`).
pub(crate) fn histogram(registers: &[u8], histogram: &mut Histogram) {
    for chunk in registers[..REGISTER_BYTES].chunks_exact(3) {
        for r in unpack(chunk) {
            histogram[r as usize] += 1;
        }
    }
}

/// Raise each of `max` to the matching register (Redis's `hllMerge`, dense side).
pub(crate) fn merge_into(registers: &[u8], max: &mut [u8; REGISTERS]) {
    let chunks = registers[..REGISTER_BYTES].chunks_exact(3);
    for (chunk, out) in chunks.zip(max.chunks_exact_mut(4)) {
        for (r, m) in unpack(chunk).into_iter().zip(out) {
            *m = (*m).max(r);
        }
    }
}
