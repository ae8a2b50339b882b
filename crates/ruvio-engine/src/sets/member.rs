//! `Member`: one member of a big set (`hashtable` encoding) in one exact-size heap
//! block, `[length varint][bytes]`, behind a thin pointer.
//!
//! Why not `Box<[u8]>`: its fat pointer takes 16 bytes of the members vector, this
//! handle 8, and the length's varint (one byte below 128 bytes) mostly fits in the
//! slack glibc leaves in a chunk anyway. One set of 1,000,000 short members costs
//! about 8 bytes less per member (scripts/memory_shapes.py --extra-shapes).

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;

/// The bits of a length varint byte, and its continuation bit.
const VARINT_PAYLOAD_BITS: u32 = 7;
const VARINT_MORE: u8 = 0x80;

/// An owned member (see the module docs). Invariant: the pointer is a live block
/// of `Member::layout(len)` holding the varint of `len` and then `len` bytes.
pub struct Member(NonNull<u8>);

// SAFETY: a `Member` owns its block outright, as a `Box<[u8]>` does; nothing is
// shared or mutated through `&Member`.
unsafe impl Send for Member {}
// SAFETY: as above: `&Member` only reads.
unsafe impl Sync for Member {}

fn varint_len(mut len: usize) -> usize {
    let mut bytes = 1;
    while len >> VARINT_PAYLOAD_BITS != 0 {
        len >>= VARINT_PAYLOAD_BITS;
        bytes += 1;
    }
    bytes
}

impl Member {
    fn layout(len: usize) -> Layout {
        // Members are bounded by the protocol's bulk limit, far below isize::MAX.
        Layout::from_size_align(varint_len(len) + len, 1).unwrap_or(Layout::new::<u8>())
    }

    /// A copy of `bytes`.
    pub fn new(bytes: &[u8]) -> Member {
        let layout = Self::layout(bytes.len());
        // SAFETY: the layout is at least one byte (the varint).
        let raw = unsafe { alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        let (mut len, mut at) = (bytes.len(), 0);
        // SAFETY: the block holds `varint_len` varint bytes and then the bytes.
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
        Member(ptr)
    }

    /// The member's bytes.
    pub fn bytes(&self) -> &[u8] {
        let p = self.0.as_ptr();
        let (mut len, mut shift, mut at) = (0usize, 0, 0);
        loop {
            // SAFETY: a live block (type invariant) starts with a complete varint.
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

    /// Bytes the block asks the allocator for.
    pub fn block_bytes(&self) -> usize {
        Self::layout(self.bytes().len()).size()
    }
}

impl std::ops::Deref for Member {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.bytes()
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        let layout = Self::layout(self.bytes().len());
        // SAFETY: allocated with this layout in `new` and freed only here.
        unsafe { dealloc(self.0.as_ptr(), layout) }
    }
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Member({:?})", String::from_utf8_lossy(self.bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_length_class() {
        for len in [0usize, 1, 7, 127, 128, 300, 16_383, 16_384, 70_000] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 31) as u8).collect();
            let m = Member::new(&bytes);
            assert_eq!(m.bytes(), &bytes[..]);
            assert_eq!(m.block_bytes(), varint_len(len) + len);
        }
        assert_eq!(std::mem::size_of::<Member>(), 8);
    }
}
