//! `Packed`: a run of list elements in ONE heap block behind a thin pointer.
//!
//! It is both a whole small list (OBJECT ENCODING `listpack`) and one node of a big
//! one (`quicklist`). Memory is the goal, as in Redis's listpack: the block is
//! always reallocated to its exact size, and it holds
//!
//! ```text
//! [count][data bytes][redis delta] [len|bytes|len] [len|bytes|len] ...
//!  varint  varint     zigzag varint  one entry       the next entry
//! ```
//!
//! - The header is three LEB128 varints: the element count (LLEN in O(1)), the
//!   bytes of the entries (so the end is found in O(1) and the block size is
//!   known for `realloc`/`dealloc`), and how many bytes Redis's own listpack for
//!   the same elements would differ from ours (see [`super::rules`]; usually 0,
//!   negative for integers, so one byte). A one-element list of a 16-byte
//!   element is 3 + 1 + 16 + 1 = 21 bytes: one 32-byte glibc chunk.
//! - Each entry is its length as a LEB128 varint, the bytes, and the same varint
//!   mirrored (the "backlen"), so the last element and every element before it is
//!   found from the end in O(1): RPOP and LINDEX -1 cost no scan. The backlen
//!   costs 1 byte per element below 128 bytes (20 elements of 10 bytes: 4 + 240 =
//!   244 bytes instead of 225), a price paid for O(1) tail access.
//! - Elements are stored as bytes, never re-encoded as integers: a reply copies
//!   them out without formatting, and the Redis sizes are tracked separately.
//!
//! Every change goes through one primitive, [`Packed::splice`], which replaces a
//! byte range of the entries with room for new bytes and rewrites the header
//! (whose own length may change), moving bytes so nothing is clobbered.
//!
//! Blocks are allocated with an alignment of [`BLOCK_ALIGN`] so a pointer to one has
//! a free low bit, which [`super::ListValue`] uses to tag its encoding.

use std::alloc::{alloc, dealloc, handle_alloc_error, realloc, Layout};
use std::ptr::NonNull;

use super::rules;
use crate::memsize::malloc_chunk_bytes;
use crate::varint;

/// Alignment of every block: 2 leaves the low pointer bit free for a tag, and glibc
/// hands out 16-aligned chunks anyway, so it costs nothing.
pub const BLOCK_ALIGN: usize = 2;

/// Longest header: three varints.
const HEADER_BYTES_MAX: usize = 3 * varint::BYTES_MAX;

/// The offset after the entry at `off`: a one-byte length (every element below 128
/// bytes) is read without the varint loop.
#[inline]
fn skip_forward(data: &[u8], off: usize) -> usize {
    let first = data[off];
    if first & varint::MORE == 0 {
        return off + 2 + first as usize;
    }
    let (len, start) = varint::read(data, off);
    start + (start - off) + len as usize
}

/// The offset of the entry that ends at `end`.
#[inline]
fn skip_backward(data: &[u8], end: usize) -> usize {
    let last = data[end - 1];
    if last & varint::MORE == 0 {
        return end - 2 - last as usize;
    }
    let (len, used) = read_backlen(data, end);
    end - 2 * used - len as usize
}

/// Read a mirrored varint that ends just before `end`: (value, bytes used).
fn read_backlen(bytes: &[u8], end: usize) -> (u64, usize) {
    let mut v = 0u64;
    let mut shift = 0;
    let mut i = 0;
    loop {
        let b = bytes[end - 1 - i];
        v |= u64::from(b & varint::PAYLOAD_MASK) << shift;
        i += 1;
        if b & varint::MORE == 0 {
            return (v, i);
        }
        shift += varint::PAYLOAD_BITS;
    }
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Bytes one element of `len` bytes takes in a block: prefix, data, backlen.
pub fn entry_size(len: usize) -> usize {
    2 * varint::len(len as u64) + len
}

/// How many bytes more (or fewer) Redis's listpack spends on `elem` than a block.
fn redis_extra(elem: &[u8]) -> i64 {
    rules::entry_bytes(elem) as i64 - entry_size(elem.len()) as i64
}

/// The decoded header.
#[derive(Clone, Copy, Debug)]
struct Header {
    count: usize,
    data_bytes: usize,
    redis_delta: i64,
    /// Bytes the header itself takes.
    len: usize,
}

fn header_len(count: usize, data_bytes: usize, redis_delta: i64) -> usize {
    varint::len(count as u64) + varint::len(data_bytes as u64) + varint::len(zigzag(redis_delta))
}

fn layout(bytes: usize) -> Layout {
    // Cannot fail: the alignment is a small power of two and blocks stay far below
    // isize::MAX (their elements passed the protocol's bulk limit).
    Layout::from_size_align(bytes, BLOCK_ALIGN).expect("list block layout")
}

/// A run of elements in one exact-size heap block (see the module docs).
/// `repr(transparent)`: [`super::ListValue`] stores it as its pointer word.
#[repr(transparent)]
pub struct Packed {
    ptr: NonNull<u8>,
}

// SAFETY: a Packed uniquely owns its block, like a Box<[u8]>.
unsafe impl Send for Packed {}

impl Packed {
    /// An empty block (its header only).
    pub fn new() -> Packed {
        Self::from_entries(&[], 0, 0)
    }

    /// A block holding `data` (well-formed entries) with its totals.
    fn from_entries(data: &[u8], count: usize, redis_delta: i64) -> Packed {
        let mut head = [0u8; HEADER_BYTES_MAX];
        let hlen = encode_header(&mut head, count, data.len(), redis_delta);
        let total = hlen + data.len();
        let lay = layout(total);
        // SAFETY: the size is non-zero (a header is at least 3 bytes).
        let raw = unsafe { alloc(lay) };
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(lay)
        };
        // SAFETY: the fresh block has `total` bytes; the sources are outside it.
        unsafe {
            std::ptr::copy_nonoverlapping(head.as_ptr(), ptr.as_ptr(), hlen);
            std::ptr::copy_nonoverlapping(data.as_ptr(), ptr.as_ptr().add(hlen), data.len());
        }
        Packed { ptr }
    }

    /// The pointer word, to be stored by an owner that will rebuild the block
    /// with [`Packed::from_raw`] (it stays allocated).
    pub fn into_raw(self) -> NonNull<u8> {
        let ptr = self.ptr;
        std::mem::forget(self);
        ptr
    }

    /// Take back ownership of a block released by [`Packed::into_raw`].
    ///
    /// # Safety
    /// `ptr` must come from `into_raw` and not be owned by anything else.
    pub unsafe fn from_raw(ptr: NonNull<u8>) -> Packed {
        Packed { ptr }
    }

    /// The whole block (header and entries), for the undo journal's copies.
    pub(crate) fn block(&self) -> &[u8] {
        // SAFETY: the block holds `block_bytes` initialised bytes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.block_bytes()) }
    }

    /// A block with the bytes [`Packed::block`] gave.
    pub(crate) fn from_block(bytes: &[u8]) -> Packed {
        let layout = layout(bytes.len());
        // SAFETY: a block is never empty (its header has at least three bytes).
        let raw = unsafe { alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        // SAFETY: the fresh block has `bytes.len()` bytes; the source is outside it.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr.as_ptr(), bytes.len()) };
        Packed { ptr }
    }

    fn header(&self) -> Header {
        let raw = self.ptr.as_ptr();
        // SAFETY: every block starts with its whole header, three varints.
        let (count, a) = unsafe { varint::read_raw(raw, 0) };
        // SAFETY: as above.
        let (data_bytes, b) = unsafe { varint::read_raw(raw, a) };
        // SAFETY: as above.
        let (delta, c) = unsafe { varint::read_raw(raw, b) };
        Header {
            count: count as usize,
            data_bytes: data_bytes as usize,
            redis_delta: unzigzag(delta),
            len: c,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        // SAFETY: every block starts with its whole header, the count first.
        unsafe { varint::read_raw(self.ptr.as_ptr(), 0) }.0 as usize
    }

    /// True when the block holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the entries take.
    pub fn data_bytes(&self) -> usize {
        self.header().data_bytes
    }

    /// Size of the block requested from the allocator.
    pub fn block_bytes(&self) -> usize {
        let h = self.header();
        h.len + h.data_bytes
    }

    /// The block's glibc chunk.
    pub fn heap_bytes(&self) -> usize {
        malloc_chunk_bytes(self.block_bytes())
    }

    /// What Redis's `lpBytes` would say for the same elements.
    pub fn redis_bytes(&self) -> usize {
        let h = self.header();
        (rules::LP_EMPTY_BYTES as i64 + h.data_bytes as i64 + h.redis_delta) as usize
    }

    /// The entries.
    fn data(&self) -> &[u8] {
        let h = self.header();
        // SAFETY: `data_bytes` initialised bytes follow the header.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(h.len), h.data_bytes) }
    }

    /// The element at byte offset `off` of the entries and the offset after it.
    pub fn entry_at(&self, off: usize) -> (&[u8], usize) {
        let data = self.data();
        let (len, start) = varint::read(data, off);
        let end = start + len as usize;
        (&data[start..end], end + (start - off))
    }

    /// The element ending at byte offset `end` and its starting offset.
    pub fn entry_before(&self, end: usize) -> (usize, &[u8]) {
        let data = self.data();
        let (len, used) = read_backlen(data, end);
        let stop = end - used;
        let begin = stop - len as usize;
        (begin - used, &data[begin..stop])
    }

    /// Byte offset of element `index` (`<= len`; `len` gives the end), walking
    /// from whichever end is nearer.
    pub fn offset_of(&self, index: usize) -> usize {
        let h = self.header();
        debug_assert!(index <= h.count);
        // The header is decoded once and the walk reads only the length bytes
        // (LSET/LINDEX in the middle of a 100-element list walk 50 of them).
        let data = self.data();
        if index <= h.count / 2 {
            (0..index).fold(0, |off, _| skip_forward(data, off))
        } else {
            (index..h.count).fold(h.data_bytes, |off, _| skip_backward(data, off))
        }
    }

    /// Element `index`, if there is one.
    pub fn get(&self, index: usize) -> Option<&[u8]> {
        (index < self.len()).then(|| self.entry_at(self.offset_of(index)).0)
    }

    /// Elements from byte offset `off` forwards.
    pub fn iter_at(&self, off: usize) -> PackedIter<'_> {
        PackedIter {
            data: self.data(),
            off,
        }
    }

    /// Elements ending at byte offset `end`, backwards.
    pub fn rev_iter_at(&self, end: usize) -> PackedRevIter<'_> {
        PackedRevIter {
            data: self.data(),
            end,
        }
    }

    /// Elements front to back.
    pub fn iter(&self) -> PackedIter<'_> {
        self.iter_at(0)
    }

    /// Replace the entry bytes `[at, at + removed)` with `inserted` bytes of room,
    /// set the header to `count` and `redis_delta`, keep the block exact-size, and
    /// return where the room starts. The caller fills the room with entries.
    fn splice(
        &mut self,
        at: usize,
        removed: usize,
        inserted: usize,
        count: usize,
        redis_delta: i64,
    ) -> *mut u8 {
        let old = self.header();
        assert!(at + removed <= old.data_bytes, "splice outside the entries");
        let data_bytes = old.data_bytes - removed + inserted;
        let mut head = [0u8; HEADER_BYTES_MAX];
        let hlen = encode_header(&mut head, count, data_bytes, redis_delta);
        let old_total = old.len + old.data_bytes;
        let new_total = hlen + data_bytes;
        let tail = old.data_bytes - at - removed;
        let (head_src, head_dst) = (old.len, hlen);
        let (tail_src, tail_dst) = (old.len + at + removed, hlen + at + inserted);
        if new_total > old_total {
            self.resize(old_total, new_total);
        }
        let base = self.ptr.as_ptr();
        // SAFETY: every source lies in the old size and every destination in the
        // new one, and the block is at least as big as both right now (grown
        // before, shrunk after). Order matters when both parts move: a tail that
        // moves right goes first (it then cannot reach the head's source, since
        // hlen + inserted > old.len + removed), otherwise the head goes first (its
        // destination then ends before the tail's source). `copy` is memmove.
        unsafe {
            if tail_dst > tail_src {
                std::ptr::copy(base.add(tail_src), base.add(tail_dst), tail);
                std::ptr::copy(base.add(head_src), base.add(head_dst), at);
            } else {
                std::ptr::copy(base.add(head_src), base.add(head_dst), at);
                std::ptr::copy(base.add(tail_src), base.add(tail_dst), tail);
            }
        }
        if new_total < old_total {
            self.resize(old_total, new_total);
        }
        let base = self.ptr.as_ptr();
        // SAFETY: the block holds `new_total >= hlen` bytes; `head` is a local.
        unsafe {
            std::ptr::copy_nonoverlapping(head.as_ptr(), base, hlen);
            base.add(hlen + at)
        }
    }

    /// Reallocate from `old` to `new` bytes (both non-zero).
    fn resize(&mut self, old: usize, new: usize) {
        // SAFETY: the block was allocated with `layout(old)`; `new` is non-zero.
        let raw = unsafe { realloc(self.ptr.as_ptr(), layout(old), new) };
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(layout(new))
        };
        self.ptr = ptr;
    }

    /// Insert `elem` at byte offset `off` (an entry boundary).
    pub fn insert_at(&mut self, off: usize, elem: &[u8]) {
        let h = self.header();
        let size = entry_size(elem.len());
        let room = self.splice(off, 0, size, h.count + 1, h.redis_delta + redis_extra(elem));
        // SAFETY: `room` has `size` bytes, exactly what one entry of `elem` takes;
        // `elem` cannot alias the block (`&mut self` is held).
        unsafe { write_entry(room, elem) };
    }

    /// Add `elem` before the first element.
    pub fn push_front(&mut self, elem: &[u8]) {
        self.insert_at(0, elem);
    }

    /// Add `elem` after the last element.
    pub fn push_back(&mut self, elem: &[u8]) {
        let end = self.data_bytes();
        self.insert_at(end, elem);
    }

    /// Replace the element at byte offset `off`.
    pub fn replace_at(&mut self, off: usize, elem: &[u8]) {
        let h = self.header();
        let (old, next) = self.entry_at(off);
        let delta = h.redis_delta - redis_extra(old) + redis_extra(elem);
        let size = entry_size(elem.len());
        let room = self.splice(off, next - off, size, h.count, delta);
        // SAFETY: as in `insert_at`.
        unsafe { write_entry(room, elem) };
    }

    /// Remove the entries in byte range `[start, end)` (entry boundaries); returns
    /// how many elements went.
    pub fn remove_range(&mut self, start: usize, end: usize) -> usize {
        if start == end {
            return 0;
        }
        let h = self.header();
        let (gone, extra) = self.tally(start, end);
        self.splice(start, end - start, 0, h.count - gone, h.redis_delta - extra);
        gone
    }

    /// Remove the element at byte offset `off`.
    pub fn remove_at(&mut self, off: usize) {
        let next = self.entry_at(off).1;
        self.remove_range(off, next);
    }

    /// Count and Redis extra bytes of the entries in `[start, end)`.
    fn tally(&self, start: usize, end: usize) -> (usize, i64) {
        let mut count = 0;
        let mut extra = 0;
        let mut off = start;
        while off < end {
            let (elem, next) = self.entry_at(off);
            count += 1;
            extra += redis_extra(elem);
            off = next;
        }
        (count, extra)
    }

    /// Move the elements from byte offset `off` on into a new block.
    pub fn split_off(&mut self, off: usize) -> Packed {
        let end = self.data_bytes();
        let (count, extra) = self.tally(off, end);
        let moved = Packed::from_entries(&self.data()[off..end], count, extra);
        let h = self.header();
        self.splice(off, end - off, 0, h.count - count, h.redis_delta - extra);
        moved
    }

    /// Append all elements of `other` after ours (a node merge).
    pub fn append(&mut self, other: &Packed) {
        let h = self.header();
        let o = other.header();
        let end = h.data_bytes;
        let room = self.splice(
            end,
            0,
            o.data_bytes,
            h.count + o.count,
            h.redis_delta + o.redis_delta,
        );
        // SAFETY: `room` has `o.data_bytes` bytes; `other` is a different block.
        unsafe { std::ptr::copy_nonoverlapping(other.data().as_ptr(), room, o.data_bytes) };
    }

    /// Remove the elements equal to `elem`, at most `limit` of them (the first
    /// ones, or the last ones when `from_back`), compacting the block in one pass
    /// and reallocating once. Returns how many went.
    pub fn remove_matches(&mut self, elem: &[u8], limit: usize, from_back: bool) -> usize {
        if limit == 0 {
            return 0;
        }
        let h = self.header();
        // Where matches may start going: with a budget from the back, the start of
        // the earliest of the last `limit` matches.
        let mut from = 0;
        if from_back {
            let mut seen = 0;
            let mut end = h.data_bytes;
            while end > 0 && seen < limit {
                let (start, e) = self.entry_before(end);
                if e == elem {
                    seen += 1;
                    from = start;
                }
                end = start;
            }
            if seen == 0 {
                return 0;
            }
        }
        // One forward pass copying kept entries down over removed ones.
        let mut removed = 0;
        let mut write = from;
        let mut off = from;
        while off < h.data_bytes {
            let (e, next) = self.entry_at(off);
            let matches = removed < limit && e == elem;
            let size = next - off;
            if matches {
                removed += 1;
            } else {
                if write != off {
                    // SAFETY: both ranges lie in the entries and write < off: a
                    // forward memmove over bytes already consumed. The pointer comes
                    // from the owned block, not from a shared borrow.
                    unsafe {
                        let data = self.ptr.as_ptr().add(h.len);
                        std::ptr::copy(data.add(off), data.add(write), size);
                    }
                }
                write += size;
            }
            off = next;
        }
        if removed == 0 {
            return 0;
        }
        let extra = redis_extra(elem) * removed as i64;
        self.splice(
            write,
            h.data_bytes - write,
            0,
            h.count - removed,
            h.redis_delta - extra,
        );
        removed
    }

    /// An independent copy.
    pub fn deep_clone(&self) -> Packed {
        let h = self.header();
        Packed::from_entries(self.data(), h.count, h.redis_delta)
    }
}

impl Default for Packed {
    fn default() -> Self {
        Packed::new()
    }
}

fn encode_header(out: &mut [u8; HEADER_BYTES_MAX], count: usize, data: usize, delta: i64) -> usize {
    let mut n = varint::write(out, count as u64);
    n += varint::write(&mut out[n..], data as u64);
    n += varint::write(&mut out[n..], zigzag(delta));
    debug_assert_eq!(n, header_len(count, data, delta));
    n
}

/// Write one entry of `elem` at `dst`.
///
/// # Safety
/// `dst` must have room for `entry_size(elem.len())` bytes and not overlap `elem`.
unsafe fn write_entry(dst: *mut u8, elem: &[u8]) {
    let prefix = varint::encode(elem.len() as u64);
    let prefix = prefix.bytes();
    let n = prefix.len();
    // SAFETY: per the contract, `dst` has n + len + n bytes of room.
    unsafe {
        std::ptr::copy_nonoverlapping(prefix.as_ptr(), dst, n);
        std::ptr::copy_nonoverlapping(elem.as_ptr(), dst.add(n), elem.len());
        let back = dst.add(n + elem.len());
        for i in 0..n {
            *back.add(i) = prefix[n - 1 - i];
        }
    }
}

impl Drop for Packed {
    fn drop(&mut self) {
        let total = self.block_bytes();
        // SAFETY: allocated with this layout and not freed before.
        unsafe { dealloc(self.ptr.as_ptr(), layout(total)) }
    }
}

impl std::fmt::Debug for Packed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.iter().map(String::from_utf8_lossy))
            .finish()
    }
}

/// Elements of a block, front to back.
#[derive(Clone)]
pub struct PackedIter<'a> {
    data: &'a [u8],
    off: usize,
}

impl<'a> Iterator for PackedIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.off >= self.data.len() {
            return None;
        }
        let (len, start) = varint::read(self.data, self.off);
        let end = start + len as usize;
        self.off = end + (start - self.off);
        Some(&self.data[start..end])
    }
}

/// Elements of a block, back to front.
#[derive(Clone)]
pub struct PackedRevIter<'a> {
    data: &'a [u8],
    end: usize,
}

impl<'a> Iterator for PackedRevIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.end == 0 {
            return None;
        }
        let (len, used) = read_backlen(self.data, self.end);
        let stop = self.end - used;
        let begin = stop - len as usize;
        self.end = begin - used;
        Some(&self.data[begin..stop])
    }
}
