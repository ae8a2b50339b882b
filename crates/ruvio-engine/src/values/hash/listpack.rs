//! `Packed`: a small hash as ONE heap block of length-prefixed field/value pairs
//! (Redis's `listpack` and `listpackex` encodings).
//!
//! ```text
//!  +-----------+---------+---------------------------------------------------+
//!  | count<<1  | bytes   | entries: [flen][field][vlen][value]([ttl])  ...     |
//!  |  | ttl    |         |                                                     |
//!  +-----------+---------+---------------------------------------------------+
//!  every number: a LEB128 varint
//! ```
//!
//! Why this shape:
//! - One block with an exact-size reallocation on every write is what makes a small
//!   hash cheap: `f1 f2 f3` with `value-1 value-2 value-3` is 2 + 33 = 35 bytes, one
//!   48-byte glibc chunk, against Redis's 16-byte robj + listpack. Every operation is
//!   O(block size), like Redis's listpack; the conversion thresholds keep blocks small.
//! - The header is two varints (the field count shifted left by one with the ttl
//!   flag in bit 0, then the entries' bytes): 2 bytes for a hash of fewer than 64
//!   fields and 128 entry bytes, where a fixed `u32 u16 u8` header took 7. Three
//!   fields of unique 16-byte names and values (2 + 3 x 34 = 104 bytes) fit a
//!   112-byte chunk instead of a 128-byte one (memory_shapes.py --values unique16,
//!   issue 36 item 4). Reading it is two varint decodes, 1 byte each in that case.
//!   A 1-byte varint covers the lengths below 128, which is every length the default
//!   `hash-max-listpack-value` (64) lets in; longer ones (a raised limit) cost more.
//! - `flags & FLAG_TTL` switches the entries to triples (Redis's `listpackex`): a hash
//!   pays for TTLs only once a field expiry command has touched it. A ttl of 0 means
//!   "none" (one byte); a time is 6-7 bytes. As in Redis, the triples are kept
//!   ordered by expiry time with the fields without one at the end, so the next
//!   field to expire is the first one, and active expiry removes a prefix.
//!
//! Limits: a block holds at most [`PACKED_FIELDS_MAX`] fields (`u16::MAX`) and
//! [`PACKED_BYTES_MAX`] bytes of entries (Redis's listpack safety size). The hash
//! converts to a table before it would exceed either, whatever the configuration
//! says (see `HashValue` for every conversion rule).

use std::alloc::{alloc, dealloc, handle_alloc_error, realloc, Layout};
use std::ptr::NonNull;

use crate::memsize::malloc_chunk_bytes;
use crate::varint;

/// Bytes of entries one block may hold: Redis's `LISTPACK_MAX_SAFETY_SIZE` (1 GiB).
/// Far below `u32::MAX`, so the length arithmetic never overflows.
pub const PACKED_BYTES_MAX: usize = 1 << 30;

/// Fields one block may hold: `u16::MAX`, so the header's count varint (with its
/// flag bit) takes at most 3 bytes. Redis's default `hash-max-listpack-entries` is
/// 128; a configuration above this converts here.
pub const PACKED_FIELDS_MAX: usize = u16::MAX as usize;

/// Longest header: the count with its flag (below 2^17: 3 varint bytes) and the
/// entries' bytes (at most [`PACKED_BYTES_MAX`], below 2^35: 5 bytes).
const HEADER_BYTES_MAX: usize = 8;
const _: () = assert!((PACKED_FIELDS_MAX << 1) + FLAG_TTL < 1 << 21 && PACKED_BYTES_MAX < 1 << 35);

/// Bit 0 of the header's first varint: entries are triples with an expiry time
/// (`listpackex`).
const FLAG_TTL: usize = 1;

/// A decoded header.
#[derive(Clone, Copy)]
struct Header {
    /// Fields stored.
    count: usize,
    /// Entries are triples (`listpackex`).
    ttl: bool,
    /// Bytes of the entries.
    data_len: usize,
    /// Bytes of the header itself (where the entries start).
    bytes: usize,
}

impl Header {
    /// The header's encoding: its bytes and their number.
    fn encode(data_len: usize, count: usize, ttl: bool) -> ([u8; HEADER_BYTES_MAX], usize) {
        debug_assert!(data_len <= PACKED_BYTES_MAX && count <= PACKED_FIELDS_MAX);
        let first = varint::encode(((count << 1) | if ttl { FLAG_TTL } else { 0 }) as u64);
        let second = varint::encode(data_len as u64);
        let mut out = [0u8; HEADER_BYTES_MAX];
        let (a, b) = (first.bytes(), second.bytes());
        out[..a.len()].copy_from_slice(a);
        out[a.len()..a.len() + b.len()].copy_from_slice(b);
        (out, a.len() + b.len())
    }
}

/// Alignment of the block: 2, so the low pointer bit is free for `HashValue`'s tag.
pub const BLOCK_ALIGN: usize = 2;

/// Largest entry overhead besides the field and value bytes: three varints.
pub const ENTRY_OVERHEAD_MAX: usize = 3 * varint::BYTES_MAX;

const _: () = assert!(PACKED_BYTES_MAX + ENTRY_OVERHEAD_MAX < u32::MAX as usize);

/// Bytes the entry for `field`/`value` takes (with a ttl slot of `ttl` when `with_ttl`).
pub fn entry_bytes(field: usize, value: usize, ttl: Option<u64>, with_ttl: bool) -> usize {
    let mut n = varint::len(field as u64) + field + varint::len(value as u64) + value;
    if with_ttl {
        n += varint::len(ttl.unwrap_or(0));
    }
    n
}

/// Where one entry lies in the data (offsets from the start of the entries).
#[derive(Clone, Copy, Debug)]
pub struct Located {
    /// First byte of the entry.
    pub start: usize,
    /// First byte of the value's length prefix.
    value_len_at: usize,
    /// One past the entry's last byte.
    pub end: usize,
    /// The entry's expiry time (`None` without one or without triples).
    pub expire_at: Option<u64>,
    /// Position among the entries (0-based).
    pub index: usize,
}

/// One decoded entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackedEntry<'a> {
    /// The field.
    pub field: &'a [u8],
    /// The value.
    pub value: &'a [u8],
    /// The absolute expiry time in Unix ms, if any.
    pub expire_at: Option<u64>,
}

/// A small hash in one block. `repr(transparent)` over a 2-aligned pointer, so a
/// `HashValue` word with a clear tag bit *is* a `Packed`.
#[repr(transparent)]
pub struct Packed {
    ptr: NonNull<u8>,
}

// SAFETY: a Packed uniquely owns its block, like a Box<[u8]>.
unsafe impl Send for Packed {}

/// The layout of a block of `block_bytes` (header and entries).
fn layout_for(block_bytes: usize) -> Layout {
    // Cannot fail: the size is far below isize::MAX and the alignment is 2.
    Layout::from_size_align(block_bytes, BLOCK_ALIGN).expect("packed hash layout")
}

impl Packed {
    /// An empty hash; with `with_ttl` its entries are triples (`listpackex`).
    pub fn new(with_ttl: bool) -> Packed {
        Self::from_data(&[], 0, with_ttl)
    }

    /// A block holding `data` (well-formed entries) and `count` fields.
    fn from_data(data: &[u8], count: usize, with_ttl: bool) -> Packed {
        assert!(data.len() <= PACKED_BYTES_MAX && count <= PACKED_FIELDS_MAX);
        let (head, head_len) = Header::encode(data.len(), count, with_ttl);
        let layout = layout_for(head_len + data.len());
        // SAFETY: the layout has a non-zero size (the header).
        let raw = unsafe { alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        // SAFETY: the block is fresh and `head_len + data.len()` long.
        unsafe {
            std::ptr::copy_nonoverlapping(head.as_ptr(), ptr.as_ptr(), head_len);
            std::ptr::copy_nonoverlapping(data.as_ptr(), ptr.as_ptr().add(head_len), data.len());
        }
        Packed { ptr }
    }

    /// The header, decoded.
    fn header(&self) -> Header {
        // SAFETY: every block starts with its whole header, two varints.
        let (first, data_len, at) = unsafe { varint::read_raw_pair(self.ptr.as_ptr()) };
        Header {
            count: first >> 1,
            ttl: first & FLAG_TTL != 0,
            data_len,
            bytes: at,
        }
    }

    /// Bytes of entries.
    pub fn data_len(&self) -> usize {
        self.header().data_len
    }

    /// Number of fields stored (expired ones included).
    pub fn len(&self) -> usize {
        self.header().count
    }

    /// True when entries are triples with an expiry time (`listpackex`).
    pub fn has_ttl(&self) -> bool {
        self.header().ttl
    }

    /// Size of the block requested from the allocator.
    pub fn block_bytes(&self) -> usize {
        let h = self.header();
        h.bytes + h.data_len
    }

    /// Heap bytes as a glibc chunk.
    pub fn heap_bytes(&self) -> usize {
        malloc_chunk_bytes(self.block_bytes())
    }

    /// Where the block starts (for prefetching).
    pub fn block_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// The entries' bytes.
    fn data(&self) -> &[u8] {
        let h = self.header();
        // SAFETY: `data_len` initialised bytes follow the header.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(h.bytes), h.data_len) }
    }

    /// Give up ownership of the block without freeing it (`HashValue` adopts it).
    pub fn into_raw(self) -> NonNull<u8> {
        std::mem::ManuallyDrop::new(self).ptr
    }

    /// Decode the entry starting at `at`.
    fn decode(&self, at: usize, index: usize) -> (Located, PackedEntry<'_>) {
        let data = self.data();
        let (flen, f_at) = varint::read(data, at);
        let field = &data[f_at..f_at + flen as usize];
        let value_len_at = f_at + flen as usize;
        let (vlen, v_at) = varint::read(data, value_len_at);
        let value = &data[v_at..v_at + vlen as usize];
        let mut end = v_at + vlen as usize;
        let mut expire_at = None;
        if self.has_ttl() {
            let (ttl, after) = varint::read(data, end);
            end = after;
            expire_at = (ttl != 0).then_some(ttl);
        }
        let loc = Located {
            start: at,
            value_len_at,
            end,
            expire_at,
            index,
        };
        (
            loc,
            PackedEntry {
                field,
                value,
                expire_at,
            },
        )
    }

    /// Every entry in order, expired ones included.
    pub fn iter(&self) -> PackedIter<'_> {
        PackedIter {
            packed: self,
            at: 0,
            index: 0,
        }
    }

    /// The entry of `field`, expired or not.
    pub fn find(&self, field: &[u8]) -> Option<(Located, PackedEntry<'_>)> {
        // A tight walk over the lengths (HGET is mostly this loop): an entry is
        // decoded in full only once its field matches.
        let data = self.data();
        let ttl = self.has_ttl();
        let (mut at, mut index) = (0, 0);
        while at < data.len() {
            let (flen, f_at) = varint::read(data, at);
            let f_end = f_at + flen as usize;
            let (vlen, v_at) = varint::read(data, f_end);
            let mut end = v_at + vlen as usize;
            if ttl {
                end = varint::read(data, end).1;
            }
            if &data[f_at..f_end] == field {
                return Some(self.decode(at, index));
            }
            at = end;
            index += 1;
        }
        None
    }

    /// The entry at position `index` (O(index)).
    pub fn nth(&self, index: usize) -> Option<PackedEntry<'_>> {
        self.iter().nth(index)
    }

    /// Replace `data[at..at + remove]` with the concatenation of `pieces`, reallocating
    /// the block to the exact new size, and set the field count to `count`.
    ///
    /// The caller guarantees the result stays within [`PACKED_BYTES_MAX`] and
    /// [`PACKED_FIELDS_MAX`] and that the pieces do not point into this block (they
    /// cannot: the block is borrowed mutably).
    fn splice(&mut self, at: usize, remove: usize, pieces: &[&[u8]], count: usize) {
        let h = self.header();
        let old_len = h.data_len;
        debug_assert!(at + remove <= old_len);
        let insert: usize = pieces.iter().map(|p| p.len()).sum();
        let new_len = old_len - remove + insert;
        assert!(new_len <= PACKED_BYTES_MAX && count <= PACKED_FIELDS_MAX);
        let (head, head_len) = Header::encode(new_len, count, h.ttl);
        if head_len != h.bytes {
            // The header's own length changes (the count passes 63 or the entries
            // 127 bytes, either way): build the block anew, still O(block size).
            let old = self.data();
            let mut data = Vec::with_capacity(new_len);
            data.extend_from_slice(&old[..at]);
            for p in pieces {
                data.extend_from_slice(p);
            }
            data.extend_from_slice(&old[at + remove..]);
            *self = Self::from_data(&data, count, h.ttl);
            return;
        }
        let tail = old_len - at - remove;
        if new_len > old_len {
            self.resize_block(head_len + old_len, head_len + new_len);
        }
        // SAFETY: the block holds max(old_len, new_len) data bytes after the
        // header, whose length stays; the tail moves within it (`copy` allows
        // overlap); the pieces are outside the block.
        unsafe {
            let base = self.ptr.as_ptr().add(head_len);
            std::ptr::copy(base.add(at + remove), base.add(at + insert), tail);
            let mut w = base.add(at);
            for p in pieces {
                std::ptr::copy_nonoverlapping(p.as_ptr(), w, p.len());
                w = w.add(p.len());
            }
        }
        if new_len < old_len {
            self.resize_block(head_len + old_len, head_len + new_len);
        }
        // SAFETY: the block starts with `head_len` header bytes we own uniquely.
        unsafe { std::ptr::copy_nonoverlapping(head.as_ptr(), self.ptr.as_ptr(), head_len) }
    }

    /// Reallocate the block from `old_bytes` to `new_bytes` (headers included).
    fn resize_block(&mut self, old_bytes: usize, new_bytes: usize) {
        // SAFETY: the block was allocated with `layout_for(old_bytes)`; the new size
        // is non-zero (the header).
        let raw = unsafe { realloc(self.ptr.as_ptr(), layout_for(old_bytes), new_bytes) };
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(layout_for(new_bytes))
        };
        self.ptr = ptr;
    }

    /// Offset where a new entry with expiry `at` goes: before the first entry whose
    /// time is later or equal, or which has none (Redis's `listpackExAddInternal`);
    /// the end for `None` or without triples.
    fn insert_offset(&self, expire_at: Option<u64>) -> usize {
        let Some(at) = expire_at.filter(|_| self.has_ttl()) else {
            return self.data_len();
        };
        let mut it = self.iter();
        while let Some((loc, e)) = it.next_located() {
            if e.expire_at.is_none_or(|t| t >= at) {
                return loc.start;
            }
        }
        self.data_len()
    }

    /// Add a field known to be absent, at its ordered position. The caller checked
    /// the size limits ([`Packed::fits`]).
    pub fn insert(&mut self, field: &[u8], value: &[u8], expire_at: Option<u64>) {
        debug_assert!(expire_at.is_none() || self.has_ttl());
        let at = self.insert_offset(expire_at);
        let with_ttl = self.has_ttl();
        let (fl, vl) = (
            varint::encode(field.len() as u64),
            varint::encode(value.len() as u64),
        );
        let ttl = varint::encode(expire_at.unwrap_or(0));
        let ttl_bytes: &[u8] = if with_ttl { ttl.bytes() } else { &[] };
        let count = self.len() + 1;
        self.splice(
            at,
            0,
            &[fl.bytes(), field, vl.bytes(), value, ttl_bytes],
            count,
        );
    }

    /// True when one more entry of these sizes keeps the block within its limits.
    pub fn fits(&self, field: usize, value: usize, grows_by_one: bool) -> bool {
        let extra = entry_bytes(field, value, Some(u64::MAX), self.has_ttl());
        self.data_len() + extra <= PACKED_BYTES_MAX
            && (!grows_by_one || self.len() < PACKED_FIELDS_MAX)
    }

    /// Replace the value of the entry at `loc` in place (its position and ttl stay).
    pub fn replace_value(&mut self, loc: Located, value: &[u8]) {
        let vl = varint::encode(value.len() as u64);
        let ttl = varint::encode(loc.expire_at.unwrap_or(0));
        let ttl_bytes: &[u8] = if self.has_ttl() { ttl.bytes() } else { &[] };
        let count = self.len();
        self.splice(
            loc.value_len_at,
            loc.end - loc.value_len_at,
            &[vl.bytes(), value, ttl_bytes],
            count,
        );
    }

    /// Remove the entry at `loc`.
    pub fn remove(&mut self, loc: Located) {
        let count = self.len() - 1;
        self.splice(loc.start, loc.end - loc.start, &[], count);
    }

    /// Give the entry at `loc` a new value and expiry and move it to the position
    /// the new expiry calls for (Redis deletes and re-adds it the same way).
    pub fn reinsert(&mut self, loc: Located, value: &[u8], expire_at: Option<u64>) {
        debug_assert!(self.has_ttl());
        let field = self.decode(loc.start, loc.index).1.field.to_vec();
        self.remove(loc);
        self.insert(&field, value, expire_at);
    }

    /// Remove the first `n` entries in one move (active expiry of a sorted prefix).
    pub fn remove_prefix(&mut self, n: usize) {
        let mut it = self.iter();
        let mut end = 0;
        for _ in 0..n {
            match it.next_located() {
                Some((loc, _)) => end = loc.end,
                None => break,
            }
        }
        let count = self.len() - it.index;
        self.splice(0, end, &[], count);
    }

    /// The same entries as triples with no expiry (`listpack` -> `listpackex`).
    pub fn with_ttl_slots(&self) -> Packed {
        debug_assert!(!self.has_ttl());
        let mut data = Vec::with_capacity(self.data_len() + self.len());
        let mut it = self.iter();
        while let Some((loc, _)) = it.next_located() {
            data.extend_from_slice(&self.data()[loc.start..loc.end]);
            data.push(0);
        }
        Packed::from_data(&data, self.len(), true)
    }

    /// An independent copy.
    pub fn deep_clone(&self) -> Packed {
        Packed::from_data(self.data(), self.len(), self.has_ttl())
    }
}

impl Drop for Packed {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout and not freed before.
        unsafe { dealloc(self.ptr.as_ptr(), layout_for(self.block_bytes())) }
    }
}

impl std::fmt::Debug for Packed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Iterator over the entries of a [`Packed`] in order.
pub struct PackedIter<'a> {
    packed: &'a Packed,
    at: usize,
    index: usize,
}

impl<'a> PackedIter<'a> {
    /// The next entry with its location.
    pub fn next_located(&mut self) -> Option<(Located, PackedEntry<'a>)> {
        if self.at >= self.packed.data_len() {
            return None;
        }
        let (loc, e) = self.packed.decode(self.at, self.index);
        self.at = loc.end;
        self.index += 1;
        Some((loc, e))
    }
}

impl<'a> Iterator for PackedIter<'a> {
    type Item = PackedEntry<'a>;

    fn next(&mut self) -> Option<PackedEntry<'a>> {
        self.next_located().map(|(_, e)| e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(p: &Packed) -> Vec<(Vec<u8>, Vec<u8>, Option<u64>)> {
        p.iter()
            .map(|e| (e.field.to_vec(), e.value.to_vec(), e.expire_at))
            .collect()
    }

    #[test]
    fn varints_round_trip() {
        for v in [
            0,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u32::MAX as u64,
            u64::MAX,
        ] {
            let enc = varint::encode(v);
            assert_eq!(varint::read(enc.bytes(), 0), (v, enc.bytes().len()));
        }
        assert_eq!(varint::encode(127).bytes().len(), 1);
        assert_eq!(varint::encode(128).bytes().len(), 2);
        assert_eq!(varint::encode(u64::MAX).bytes().len(), varint::BYTES_MAX);
    }

    #[test]
    fn three_fields_fit_a_48_byte_chunk() {
        let mut p = Packed::new(false);
        assert_eq!(p.heap_bytes(), 32);
        for (f, v) in [("f1", "value-1"), ("f2", "value-2"), ("f3", "value-3")] {
            p.insert(f.as_bytes(), v.as_bytes(), None);
        }
        assert_eq!(p.block_bytes(), 2 + 33);
        assert_eq!(p.heap_bytes(), 48);
        assert_eq!(p.len(), 3);
    }

    #[test]
    fn three_unique_16_byte_fields_fit_a_112_byte_chunk() {
        let mut p = Packed::new(false);
        for j in 0..3 {
            let field = format!("v0000012.{:03}.xxx", 2 * j);
            let value = format!("v0000012.{:03}.xxx", 2 * j + 1);
            p.insert(field.as_bytes(), value.as_bytes(), None);
        }
        assert_eq!(p.block_bytes(), 2 + 3 * (1 + 16 + 1 + 16));
        assert_eq!(p.heap_bytes(), 112);
    }

    /// The header's varints grow past 63 fields and 127 entry bytes and shrink
    /// back, in place and by rebuilding, with and without ttl slots.
    #[test]
    fn header_length_changes_keep_every_entry() {
        for with_ttl in [false, true] {
            let mut p = Packed::new(with_ttl);
            let mut model: Vec<(Vec<u8>, Vec<u8>, Option<u64>)> = Vec::new();
            for i in 0..100u64 {
                let (f, v) = (format!("f{i}").into_bytes(), format!("v{i}").into_bytes());
                p.insert(&f, &v, None);
                model.push((f, v, None));
                assert_eq!(fields(&p), model);
                assert_eq!(p.len(), model.len());
                assert_eq!(p.has_ttl(), with_ttl);
                let data: usize = model
                    .iter()
                    .map(|(f, v, t)| entry_bytes(f.len(), v.len(), *t, with_ttl))
                    .sum();
                assert_eq!(p.data_len(), data);
                let head = varint::len(((model.len() << 1) | usize::from(with_ttl)) as u64)
                    + varint::len(data as u64);
                assert_eq!(p.block_bytes(), head + data);
            }
            while let Some((f, _, _)) = model.pop() {
                let (loc, _) = p.find(&f).unwrap();
                p.remove(loc);
                assert_eq!(fields(&p), model);
                assert_eq!(p.has_ttl(), with_ttl);
            }
            assert_eq!(p.block_bytes(), 2);
        }
    }

    #[test]
    fn ttl_entries_stay_ordered() {
        let mut p = Packed::new(false).with_ttl_slots();
        p.insert(b"none", b"1", None);
        p.insert(b"late", b"2", Some(300));
        p.insert(b"early", b"3", Some(100));
        p.insert(b"mid", b"4", Some(200));
        p.insert(b"mid2", b"5", Some(200));
        let order: Vec<_> = p.iter().map(|e| e.field.to_vec()).collect();
        assert_eq!(
            order,
            [&b"early"[..], b"mid2", b"mid", b"late", b"none"].map(|s| s.to_vec())
        );
        let (loc, _) = p.find(b"late").unwrap();
        p.reinsert(loc, b"22", None);
        assert_eq!(
            fields(&p).last().unwrap(),
            &(b"late".to_vec(), b"22".to_vec(), None)
        );
        p.remove_prefix(2);
        assert_eq!(p.len(), 3);
        assert_eq!(fields(&p)[0].0, b"mid");
        let (loc, _) = p.find(b"mid").unwrap();
        p.replace_value(loc, &[b'x'; 300]);
        assert_eq!(p.find(b"mid").unwrap().1.value, &[b'x'; 300][..]);
        assert_eq!(p.find(b"mid").unwrap().1.expire_at, Some(200));
        let c = p.deep_clone();
        assert_eq!(fields(&c), fields(&p));
    }
}
