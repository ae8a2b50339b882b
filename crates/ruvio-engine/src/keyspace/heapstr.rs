//! `HeapStr`: a byte string on the heap behind a *thin* pointer.
//!
//! The block is `[len: u32][cap: u32][cap bytes]`, so the entry that owns it spends
//! one word on it instead of the two or three a `Box<[u8]>` or `Vec<u8>` would take.
//! That word is what lets a 16-byte key stay inline next to a heap value in a 48-byte
//! entry. The 8-byte header costs nothing extra with glibc for the common sizes:
//! `malloc(128)` and `malloc(136)` both take a 144-byte chunk.
//!
//! Lengths are `u32`: every constructor is only reached with at most
//! [`STRING_BYTES_MAX`] bytes (the command layer checks Redis's
//! `proto-max-bulk-len` limit first; a BITFIELD write at the last bit offset
//! reaches up to 8 bytes further, as in Redis), and the conversions below assert it.

use std::alloc::{alloc, alloc_zeroed, dealloc, handle_alloc_error, realloc, Layout};
use std::ptr::NonNull;

/// Largest string the engine stores (Redis's default `proto-max-bulk-len`, 512 MiB).
/// Kept far below `u32::MAX` so header arithmetic never overflows.
pub const STRING_BYTES_MAX: usize = 512 * 1024 * 1024;

/// Below this length a growing string doubles its capacity (Redis's `SDS_MAX_PREALLOC`);
/// above it the capacity grows by this much at a time.
const GREEDY_GROWTH_BYTES_MAX: usize = 1024 * 1024;

/// Header in front of the bytes.
#[repr(C)]
struct Header {
    len: u32,
    cap: u32,
}

const HEADER_BYTES: usize = std::mem::size_of::<Header>();
const _: () = assert!(HEADER_BYTES == 8);
// Twice the largest string plus slack still fits the u32 capacity field.
const _: () = assert!(2 * STRING_BYTES_MAX + GREEDY_GROWTH_BYTES_MAX < u32::MAX as usize);

/// An owned, growable byte string behind one thin pointer. `repr(transparent)`: the
/// entry stores it as one pointer-sized word and borrows it in place.
#[repr(transparent)]
pub struct HeapStr {
    ptr: NonNull<Header>,
}

// SAFETY: a HeapStr uniquely owns its block, exactly like a Box<[u8]>.
unsafe impl Send for HeapStr {}

fn layout_for(cap: usize) -> Layout {
    // Cannot fail: cap <= u32::MAX and the alignment is 4.
    Layout::from_size_align(HEADER_BYTES + cap, std::mem::align_of::<Header>())
        .expect("heap string layout")
}

fn to_u32(n: usize) -> u32 {
    assert!(n <= u32::MAX as usize, "heap string larger than u32");
    n as u32
}

impl HeapStr {
    /// A copy of `bytes` with exactly `bytes.len()` capacity.
    pub fn from_slice(bytes: &[u8]) -> HeapStr {
        Self::with_capacity_from(bytes, bytes.len())
    }

    /// A copy of `bytes` with room for `cap` bytes (`cap >= bytes.len()`).
    pub fn with_capacity_from(bytes: &[u8], cap: usize) -> HeapStr {
        debug_assert!(cap >= bytes.len());
        let cap = cap.max(bytes.len());
        let layout = layout_for(cap);
        // SAFETY: the layout has a non-zero size (the header).
        let raw = unsafe { alloc(layout) } as *mut Header;
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        // SAFETY: the block is fresh, big enough for the header and `cap >= len` bytes.
        unsafe {
            ptr.as_ptr().write(Header {
                len: to_u32(bytes.len()),
                cap: to_u32(cap),
            });
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), Self::data_ptr(ptr), bytes.len());
        }
        HeapStr { ptr }
    }

    /// `len` zero bytes with exactly that capacity, from the allocator's zeroed
    /// memory (for a big block glibc's `calloc` maps fresh pages and writes nothing).
    pub fn zeroed(len: usize) -> HeapStr {
        let layout = layout_for(len);
        // SAFETY: the layout has a non-zero size (the header).
        let raw = unsafe { alloc_zeroed(layout) } as *mut Header;
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        // SAFETY: the block is fresh and big enough for the header; the `len` bytes
        // after it are already zero.
        unsafe {
            ptr.as_ptr().write(Header {
                len: to_u32(len),
                cap: to_u32(len),
            })
        };
        HeapStr { ptr }
    }

    fn data_ptr(ptr: NonNull<Header>) -> *mut u8 {
        // SAFETY: the data follows the header inside the same allocation.
        unsafe { (ptr.as_ptr() as *mut u8).add(HEADER_BYTES) }
    }

    fn header(&self) -> &Header {
        // SAFETY: the pointer is valid and owned for as long as self lives.
        unsafe { self.ptr.as_ref() }
    }

    /// Number of bytes stored.
    pub fn len(&self) -> usize {
        self.header().len as usize
    }

    /// Bytes the block can hold without reallocating.
    pub fn capacity(&self) -> usize {
        self.header().cap as usize
    }

    /// Size of the heap block requested from the allocator.
    pub fn block_bytes(&self) -> usize {
        HEADER_BYTES + self.capacity()
    }

    /// The block as (initialized bytes from its start, allocation size, alignment):
    /// the header and the string, plain bytes a copy at another address keeps as
    /// they are (the undo journal's copies, `keyspace::entry::FlatCopy`).
    pub(crate) fn flat_block(&self) -> (usize, usize, usize) {
        (
            HEADER_BYTES + self.len(),
            self.block_bytes(),
            std::mem::align_of::<Header>(),
        )
    }

    /// Where the block starts, for prefetching: reading it is the caller's business.
    pub fn block_ptr(&self) -> *const u8 {
        self.ptr.as_ptr() as *const u8
    }

    /// The stored bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `len` initialised bytes follow the header.
        unsafe { std::slice::from_raw_parts(Self::data_ptr(self.ptr), self.len()) }
    }

    /// The stored bytes, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(Self::data_ptr(self.ptr), self.len()) }
    }

    /// Grow the block so it holds at least `needed` bytes, with Redis's greedy policy
    /// (double below 1 MiB, +1 MiB above) so repeated APPENDs are amortised O(1).
    fn reserve_greedy(&mut self, needed: usize) {
        if needed <= self.capacity() {
            return;
        }
        let new_cap = greedy_capacity(needed);
        let old_layout = layout_for(self.capacity());
        // SAFETY: the block was allocated with `old_layout`; the new size is non-zero.
        let raw = unsafe {
            realloc(
                self.ptr.as_ptr() as *mut u8,
                old_layout,
                HEADER_BYTES + new_cap,
            )
        };
        let Some(ptr) = NonNull::new(raw as *mut Header) else {
            handle_alloc_error(layout_for(new_cap))
        };
        self.ptr = ptr;
        // SAFETY: the header moved with the block and is valid.
        unsafe { (*self.ptr.as_ptr()).cap = to_u32(new_cap) };
    }

    /// Append `bytes`, growing greedily.
    pub fn append(&mut self, bytes: &[u8]) {
        let len = self.len();
        let new_len = len + bytes.len();
        self.reserve_greedy(new_len);
        // SAFETY: capacity >= new_len; the source is not inside our block (it is borrowed
        // elsewhere while we hold `&mut self`).
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                Self::data_ptr(self.ptr).add(len),
                bytes.len(),
            );
            (*self.ptr.as_ptr()).len = to_u32(new_len);
        }
    }

    /// Extend with zero bytes to `new_len` (no-op when already that long), growing greedily.
    pub fn grow_zeroed(&mut self, new_len: usize) {
        let len = self.len();
        if new_len <= len {
            return;
        }
        self.reserve_greedy(new_len);
        // SAFETY: capacity >= new_len.
        unsafe {
            std::ptr::write_bytes(Self::data_ptr(self.ptr).add(len), 0, new_len - len);
            (*self.ptr.as_ptr()).len = to_u32(new_len);
        }
    }

    /// Cut the string to its first `len` bytes (no-op when not longer); the
    /// block keeps its capacity (the undo journal's roll-back of a growth).
    pub(crate) fn truncate(&mut self, len: usize) {
        if len < self.len() {
            // SAFETY: a shorter length keeps every byte below it initialised.
            unsafe { (*self.ptr.as_ptr()).len = to_u32(len) };
        }
    }

    /// Replace the contents with `bytes` when the block is a good fit (big enough, and
    /// not more than twice too big); returns false, unchanged, otherwise.
    pub fn try_overwrite(&mut self, bytes: &[u8]) -> bool {
        let cap = self.capacity();
        if bytes.len() > cap || cap > 2 * bytes.len().max(16) {
            return false;
        }
        // SAFETY: capacity >= bytes.len(); the source is borrowed elsewhere.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), Self::data_ptr(self.ptr), bytes.len());
            (*self.ptr.as_ptr()).len = to_u32(bytes.len());
        }
        true
    }
}

/// The capacity a string growing to `needed` bytes gets.
pub fn greedy_capacity(needed: usize) -> usize {
    if needed < GREEDY_GROWTH_BYTES_MAX {
        (needed * 2).max(16)
    } else {
        needed + GREEDY_GROWTH_BYTES_MAX
    }
}

impl Drop for HeapStr {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout and not freed before.
        unsafe { dealloc(self.ptr.as_ptr() as *mut u8, layout_for(self.capacity())) }
    }
}

impl std::fmt::Debug for HeapStr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HeapStr({:?})", String::from_utf8_lossy(self.as_slice()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_appends_and_grows() {
        let mut s = HeapStr::from_slice(b"hello");
        assert_eq!(s.as_slice(), b"hello");
        assert_eq!(s.capacity(), 5);
        s.append(b" world");
        assert_eq!(s.as_slice(), b"hello world");
        assert!(s.capacity() >= 22);
        s.grow_zeroed(14);
        assert_eq!(s.as_slice(), b"hello world\0\0\0");
        s.as_mut_slice()[0] = b'H';
        assert_eq!(&s.as_slice()[..5], b"Hello");
        assert!(s.try_overwrite(b"short"));
        assert_eq!(s.as_slice(), b"short");
        let empty = HeapStr::from_slice(b"");
        assert_eq!(empty.len(), 0);
        let zeros = HeapStr::zeroed(1000);
        assert_eq!((zeros.len(), zeros.capacity()), (1000, 1000));
        assert!(zeros.as_slice().iter().all(|&b| b == 0));
    }

    #[test]
    fn many_appends_stay_amortised() {
        let mut s = HeapStr::from_slice(b"");
        for i in 0..10_000u32 {
            s.append(&i.to_le_bytes());
        }
        assert_eq!(s.len(), 40_000);
        assert_eq!(&s.as_slice()[4..8], &1u32.to_le_bytes());
    }
}
