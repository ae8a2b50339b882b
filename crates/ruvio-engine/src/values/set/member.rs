//! `Member`: one member of a big set (`hashtable` encoding) in one exact-size heap
//! block (`crate::block`: `[length varint][bytes]`) behind an 8-byte pointer, where a
//! `Box<[u8]>` takes 16 bytes of the members vector. One set of 1,000,000 short
//! members costs about 8 bytes less per member (memory_shapes.py --extra-shapes).

use std::ptr::NonNull;

use crate::block;

/// The block has no prefix and byte alignment.
const PREFIX_BYTES: usize = 0;
const ALIGN: usize = 1;

/// An owned member. Invariant: the pointer is a live block made by `block::new`
/// with no prefix, freed only by `Drop`.
pub struct Member(NonNull<u8>);

// SAFETY: a `Member` owns its block outright, as a `Box<[u8]>` does; nothing is
// shared or mutated through `&Member`.
unsafe impl Send for Member {}
// SAFETY: as above: `&Member` only reads.
unsafe impl Sync for Member {}

impl Member {
    /// A copy of `bytes`.
    pub fn new(bytes: &[u8]) -> Member {
        Member(block::new(PREFIX_BYTES, ALIGN, bytes))
    }

    /// The member's bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: live while `self` is (type invariant).
        unsafe { block::bytes(self.0, PREFIX_BYTES) }
    }

    /// Bytes the block asks the allocator for.
    pub fn block_bytes(&self) -> usize {
        block::layout(PREFIX_BYTES, ALIGN, self.bytes().len()).size()
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
        // SAFETY: live (type invariant) and dropped once.
        unsafe { block::free(self.0, PREFIX_BYTES, ALIGN) }
    }
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Member({:?})", String::from_utf8_lossy(self.bytes()))
    }
}
