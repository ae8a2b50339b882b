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

use crate::varint;

/// The layout of a block of `prefix` bytes (aligned to `align`) and `len` bytes.
pub(crate) fn layout(prefix: usize, align: usize, len: usize) -> Layout {
    // Lengths are bounded by the protocol's bulk limit, far below isize::MAX.
    Layout::from_size_align(prefix + varint::len(len as u64) + len, align)
        .unwrap_or(Layout::new::<u64>())
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
    let len = varint::encode(bytes.len() as u64);
    let len = len.bytes();
    // SAFETY: the block holds the prefix, the varint's bytes and the bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(len.as_ptr(), raw.add(prefix), len.len());
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), raw.add(prefix + len.len()), bytes.len());
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
    // SAFETY: the caller's block holds a complete varint after the prefix.
    let (len, at) = unsafe { varint::read_raw(p, prefix) };
    // SAFETY: the `len` bytes follow the varint inside the block.
    unsafe { std::slice::from_raw_parts(p.add(at), len as usize) }
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
                    prefix + varint::len(len as u64) + len
                );
            }
        }
    }
}
