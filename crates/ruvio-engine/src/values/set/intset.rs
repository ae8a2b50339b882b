//! `Intset`: a sorted array of distinct integers in ONE heap block behind a thin
//! pointer (OBJECT ENCODING `intset`).
//!
//! As Redis's intset.c (read, not copied), every integer has the same width, the
//! smallest of 16, 32 or 64 bits that holds all of them, so a set of small ids
//! costs 2 bytes a member; adding a wider integer widens the whole array once
//! (Redis "upgrades", never downgrades). Sorted order gives O(log n) membership
//! and is the order SMEMBERS replies in, as Redis's.
//!
//! ```text
//! [len: u32][width: u8][pad: 3] [v0][v1]...   little-endian, width bytes each
//! ```
//!
//! The block is reallocated to its exact size on every change (small sets are
//! the common case; the memory is the point) and aligned to [`BLOCK_ALIGN`] so
//! [`super::SetValue`] can tag the pointer's low bits. The tag travels *inside*
//! the `Intset`: every access masks the low [`OWNER_BITS`] off, and a
//! reallocation keeps them, so the owner's tagged word is itself a valid
//! `Intset` and can be lent as `&mut Intset` without untagging.

use std::alloc::{alloc, dealloc, handle_alloc_error, realloc, Layout};
use std::ptr::NonNull;

use crate::memsize::malloc_chunk_bytes;

/// Alignment of the block: 8 leaves three low pointer bits free for tags.
pub const BLOCK_ALIGN: usize = 8;

/// Low pointer bits that belong to the owner (a tag), never to the address.
pub const OWNER_BITS: usize = BLOCK_ALIGN - 1;

/// Header bytes: the length, the width, padding to keep the values aligned.
const HEADER_BYTES: usize = 8;

/// Most members an intset can hold: its length is a `u32`, and Redis caps
/// `set-max-intset-entries` at 2^30 for the same reason (`intsetMaxEntries`).
pub const INTSET_LEN_MAX: usize = 1 << 30;

/// The narrowest width (in bytes) that holds `v` (`_intsetValueEncoding`).
fn width_of(v: i64) -> usize {
    if i16::try_from(v).is_ok() {
        2
    } else if i32::try_from(v).is_ok() {
        4
    } else {
        8
    }
}

fn layout(bytes: usize) -> Layout {
    // Sizes are at most 8 + 8 * INTSET_LEN_MAX, far below isize::MAX.
    Layout::from_size_align(bytes, BLOCK_ALIGN).expect("intset layout")
}

/// A sorted set of distinct `i64` (see the module docs).
#[repr(transparent)]
pub struct Intset {
    ptr: NonNull<u8>,
}

// SAFETY: an Intset uniquely owns its block, like a Box.
unsafe impl Send for Intset {}

impl Intset {
    /// An empty intset of 16-bit width.
    pub fn new() -> Intset {
        let lay = layout(HEADER_BYTES);
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc(lay) };
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(lay)
        };
        let mut set = Intset { ptr };
        set.write_header(0, 2);
        set
    }

    /// Give up ownership of the block (see [`from_raw`](Self::from_raw)); the
    /// pointer's [`OWNER_BITS`] are clear.
    pub fn into_raw(self) -> NonNull<u8> {
        let ptr = self.ptr;
        std::mem::forget(self);
        ptr
    }

    /// Take back a block given up by [`into_raw`](Self::into_raw).
    ///
    /// # Safety
    /// `ptr` must come from `into_raw` and not be owned by anything else.
    pub unsafe fn from_raw(ptr: NonNull<u8>) -> Intset {
        Intset { ptr }
    }

    /// The block's address, without the owner's tag.
    fn base(&self) -> *mut u8 {
        self.ptr.as_ptr().map_addr(|a| a & !OWNER_BITS)
    }

    fn header(&self) -> (usize, usize) {
        // SAFETY: the block always holds its 8-byte header.
        let head = unsafe { std::slice::from_raw_parts(self.base(), HEADER_BYTES) };
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
        (len, head[4] as usize)
    }

    fn write_header(&mut self, len: usize, width: usize) {
        debug_assert!(len <= INTSET_LEN_MAX && matches!(width, 2 | 4 | 8));
        let mut head = [0u8; HEADER_BYTES];
        head[..4].copy_from_slice(&(len as u32).to_le_bytes());
        head[4] = width as u8;
        // SAFETY: the block always holds its 8-byte header.
        unsafe { std::ptr::copy_nonoverlapping(head.as_ptr(), self.base(), HEADER_BYTES) }
    }

    fn data(&self) -> &[u8] {
        let (len, width) = self.header();
        // SAFETY: the block is HEADER_BYTES + len * width bytes.
        unsafe { std::slice::from_raw_parts(self.base().add(HEADER_BYTES), len * width) }
    }

    fn data_mut(&mut self) -> &mut [u8] {
        let (len, width) = self.header();
        // SAFETY: as in `data`; `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.base().add(HEADER_BYTES), len * width) }
    }

    /// Resize the block to hold `len` values of `width` bytes (contents kept up
    /// to the smaller size; the header is the caller's to rewrite).
    fn resize(&mut self, old_bytes: usize, new_bytes: usize) {
        // SAFETY: the block was allocated with layout(old_bytes); the new size is
        // non-zero and within isize::MAX.
        let raw = unsafe { realloc(self.base(), layout(old_bytes), new_bytes) };
        if raw.is_null() {
            handle_alloc_error(layout(new_bytes));
        }
        let tag = self.ptr.as_ptr().addr() & OWNER_BITS;
        // SAFETY: a non-null pointer with low bits set is non-null.
        self.ptr = unsafe { NonNull::new_unchecked(raw.map_addr(|a| a | tag)) };
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.header().0
    }

    /// True without members.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of the block.
    pub fn block_bytes(&self) -> usize {
        let (len, width) = self.header();
        HEADER_BYTES + len * width
    }

    /// Heap bytes owned, as a glibc chunk.
    pub fn heap_bytes(&self) -> usize {
        malloc_chunk_bytes(self.block_bytes())
    }

    /// Member `i` in ascending order.
    pub fn get(&self, i: usize) -> Option<i64> {
        let (len, width) = self.header();
        (i < len).then(|| read_value(self.data(), i, width))
    }

    /// The smallest member.
    pub fn min(&self) -> Option<i64> {
        self.get(0)
    }

    /// The largest member.
    pub fn max(&self) -> Option<i64> {
        self.len().checked_sub(1).and_then(|i| self.get(i))
    }

    /// Where `v` is (Ok) or would go (Err).
    fn search(&self, v: i64) -> Result<usize, usize> {
        let (len, width) = self.header();
        if width_of(v) > width {
            // Wider than every member: it belongs at one end.
            return Err(if v < 0 { 0 } else { len });
        }
        let data = self.data();
        let (mut lo, mut hi) = (0, len);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match read_value(data, mid, width).cmp(&v) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    /// True when `v` is a member.
    pub fn contains(&self, v: i64) -> bool {
        self.search(v).is_ok()
    }

    /// Add `v`; false when already there. The caller keeps the length within
    /// [`INTSET_LEN_MAX`] (the set converts long before).
    pub fn insert(&mut self, v: i64) -> bool {
        let Err(at) = self.search(v) else {
            return false;
        };
        let (len, width) = self.header();
        let new_width = width.max(width_of(v));
        let old_bytes = HEADER_BYTES + len * width;
        let new_bytes = HEADER_BYTES + (len + 1) * new_width;
        if new_width != width {
            // Widen: read the old values out, then rewrite them all.
            let old: Vec<i64> = (0..len)
                .map(|i| read_value(self.data(), i, width))
                .collect();
            self.resize(old_bytes, new_bytes);
            self.write_header(len + 1, new_width);
            let data = self.data_mut();
            let values = old[..at].iter().chain([&v]).chain(&old[at..]);
            for (i, &x) in values.enumerate() {
                write_value(data, i, new_width, x);
            }
        } else {
            self.resize(old_bytes, new_bytes);
            self.write_header(len + 1, width);
            let data = self.data_mut();
            data.copy_within(at * width..len * width, (at + 1) * width);
            write_value(data, at, width, v);
        }
        true
    }

    /// Remove `v`; false when absent. The width never shrinks (as Redis).
    pub fn remove(&mut self, v: i64) -> bool {
        let Ok(at) = self.search(v) else {
            return false;
        };
        self.remove_at(at);
        true
    }

    /// Remove member `i` (in ascending order).
    pub fn remove_at(&mut self, at: usize) {
        let (len, width) = self.header();
        debug_assert!(at < len);
        let data = self.data_mut();
        data.copy_within((at + 1) * width..len * width, at * width);
        self.write_header(len - 1, width);
        self.resize(HEADER_BYTES + len * width, HEADER_BYTES + (len - 1) * width);
    }

    /// Members in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = i64> + '_ {
        let (len, width) = self.header();
        let data = self.data();
        (0..len).map(move |i| read_value(data, i, width))
    }

    /// An independent copy (same width).
    pub fn deep_clone(&self) -> Intset {
        let bytes = self.block_bytes();
        let lay = layout(bytes);
        // SAFETY: non-zero size; the copy reads `bytes` bytes of our block.
        unsafe {
            let raw = alloc(lay);
            let Some(ptr) = NonNull::new(raw) else {
                handle_alloc_error(lay)
            };
            std::ptr::copy_nonoverlapping(self.base(), ptr.as_ptr(), bytes);
            Intset { ptr }
        }
    }
}

impl Default for Intset {
    fn default() -> Self {
        Intset::new()
    }
}

impl Drop for Intset {
    fn drop(&mut self) {
        // SAFETY: the block was allocated with this layout and is freed once.
        unsafe { dealloc(self.base(), layout(self.block_bytes())) }
    }
}

fn read_value(data: &[u8], i: usize, width: usize) -> i64 {
    let b = &data[i * width..(i + 1) * width];
    match width {
        2 => i16::from_le_bytes([b[0], b[1]]) as i64,
        4 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64,
        _ => i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
    }
}

fn write_value(data: &mut [u8], i: usize, width: usize, v: i64) {
    let out = &mut data[i * width..(i + 1) * width];
    // `v` fits `width` (the set is at least as wide as width_of(v)).
    match width {
        2 => out.copy_from_slice(&(v as i16).to_le_bytes()),
        4 => out.copy_from_slice(&(v as i32).to_le_bytes()),
        _ => out.copy_from_slice(&v.to_le_bytes()),
    }
}
