//! Length-prefixed byte blocks behind thin pointers: `[prefix][len varint][bytes]`,
//! one exact-size allocation each. Big sets keep a member per block, big sorted
//! sets a member with its score as the prefix: 8 bytes of handle instead of a
//! `Box<[u8]>`'s 16, and the length's varint (one byte below 128 bytes) mostly fits
//! in the slack glibc leaves in a chunk anyway.
//!
//! The callers own the blocks (a type per use holds the pointer and frees it);
//! these functions only lay them out.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;

/// Payload bits per varint byte, and the continuation bit (LEB128).
const VARINT_PAYLOAD_BITS: u32 = 7;
const VARINT_MORE: u8 = 0x80;

/// Bytes the LEB128 varint of `len` takes.
pub(crate) fn varint_len(mut len: usize) -> usize {
    let mut bytes = 1;
    while len >> VARINT_PAYLOAD_BITS != 0 {
        len >>= VARINT_PAYLOAD_BITS;
        bytes += 1;
    }
    bytes
}

/// The layout of a block of `prefix` bytes (aligned to `align`) and `len` bytes.
pub(crate) fn layout(prefix: usize, align: usize, len: usize) -> Layout {
    // Lengths are bounded by the protocol's bulk limit, far below isize::MAX.
    Layout::from_size_align(prefix + varint_len(len) + len, align).unwrap_or(Layout::new::<u64>())
}

/// A new block holding `bytes` after `prefix` bytes left for the caller (not
/// initialized).
pub(crate) fn new(prefix: usize, align: usize, bytes: &[u8]) -> NonNull<u8> {
    let layout = layout(prefix, align, bytes.len());
    // SAFETY: the layout is at least one byte (the varint).
    let raw = unsafe { alloc(layout) };
    let Some(ptr) = NonNull::new(raw) else {
        handle_alloc_error(layout)
    };
    let (mut len, mut at) = (bytes.len(), prefix);
    // SAFETY: the block holds the prefix, `varint_len` varint bytes and the bytes.
    unsafe {
        loop {
            let low = (len as u8) & !VARINT_MORE;
            len >>= VARINT_PAYLOAD_BITS;
            let more = if len == 0 { 0 } else { VARINT_MORE };
            raw.add(at).write(low | more);
            at += 1;
            if len == 0 {
                break;
            }
        }
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), raw.add(at), bytes.len());
    }
    ptr
}

/// The bytes of the block at `ptr` with a `prefix`-byte prefix.
///
/// # Safety
/// `ptr` is a live block made by [`new`] with the same `prefix`, and stays live
/// for `'a`.
pub(crate) unsafe fn bytes<'a>(ptr: NonNull<u8>, prefix: usize) -> &'a [u8] {
    let p = ptr.as_ptr();
    let (mut len, mut shift, mut at) = (0usize, 0, prefix);
    loop {
        // SAFETY: the caller's block holds a complete varint here.
        let b = unsafe { p.add(at).read() };
        at += 1;
        len |= usize::from(b & !VARINT_MORE) << shift;
        if b & VARINT_MORE == 0 {
            break;
        }
        shift += VARINT_PAYLOAD_BITS;
    }
    // SAFETY: the `len` bytes follow the varint inside the block.
    unsafe { std::slice::from_raw_parts(p.add(at), len) }
}

/// Free the block at `ptr`.
///
/// # Safety
/// `ptr` is a live block made by [`new`] with the same `prefix` and `align`, held
/// nowhere any more.
pub(crate) unsafe fn free(ptr: NonNull<u8>, prefix: usize, align: usize) {
    // SAFETY: live, per the caller.
    let len = unsafe { bytes(ptr, prefix) }.len();
    // SAFETY: allocated with this layout by `new`.
    unsafe { dealloc(ptr.as_ptr(), layout(prefix, align, len)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_length_class() {
        for prefix in [0, 8] {
            for len in [0usize, 1, 7, 127, 128, 300, 16_383, 16_384, 70_000] {
                let data: Vec<u8> = (0..len).map(|i| (i * 31) as u8).collect();
                let block = new(prefix, 8, &data);
                // SAFETY: made just above with this prefix, freed right after.
                unsafe {
                    assert_eq!(bytes(block, prefix), &data[..]);
                    free(block, prefix, 8);
                }
                assert_eq!(
                    layout(prefix, 8, len).size(),
                    prefix + varint_len(len) + len
                );
            }
        }
    }
}
