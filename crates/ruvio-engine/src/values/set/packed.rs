//! `SPacked`: a small set (OBJECT ENCODING `listpack`) as ONE heap block behind a
//! thin pointer.
//!
//! ```text
//! [data bytes][count] [len|member] [len|member] ...
//!  varint      varint  varint
//! ```
//!
//! Why its own block rather than the lists' `Packed`: a list entry mirrors its
//! length after the bytes so RPOP and LINDEX -1 walk from the tail, and its header
//! tracks how far Redis's listpack would differ in size (a list's encoding changes
//! on Redis's byte sizes). A set needs neither: every set operation on a listpack
//! is a walk from the front (SISMEMBER, SADD's duplicate check, SREM, SPOP and
//! SRANDMEMBER's pick by index), and only `set-max-listpack-entries` / `-value`
//! and the 1 GiB safety size decide its conversion, the last computed in the walk
//! SADD already makes. Four unique 16-byte members take 2 + 4 x 17 = 70 bytes, an
//! 80-byte glibc chunk, where the lists' block took 3 + 4 x 18 = 75, a 96-byte
//! one (memory_shapes.py --values unique16, issue 36 item 4).
//!
//! Every change goes through [`SPacked::splice`]: the block is reallocated to its
//! exact size and the bytes after the change move, as Redis's `lpInsert` /
//! `lpDelete` do; when the header's own length changes (the entries pass 127
//! bytes or the count 127) the block is built anew, still O(block size).

use std::alloc::{alloc, dealloc, handle_alloc_error, realloc, Layout};
use std::ptr::NonNull;

use crate::memsize::malloc_chunk_bytes;
use crate::values::list::rules;
use crate::varint;

/// Alignment of every block: 2, leaving the low pointer bit free for
/// `SetValue`'s tag (a packed block is the untagged `_0` case).
pub const BLOCK_ALIGN: usize = 2;

/// Most entry bytes one block holds: Redis converts a listpack that would pass
/// 1 GiB (`LISTPACK_MAX_SAFETY_SIZE`), and the header's varints stay 5 bytes.
pub const PACKED_BYTES_MAX: usize = 1 << 30;

/// Bytes of a LEB128 varint of a value below 2^35.
const VARINT_HEADER_BYTES_MAX: usize = 5;
/// Longest header: two varints of at most [`PACKED_BYTES_MAX`] (the count is
/// never above the entry bytes: each entry takes at least one).
const HEADER_BYTES_MAX: usize = 2 * VARINT_HEADER_BYTES_MAX;
const _: () = assert!(PACKED_BYTES_MAX < 1 << (7 * VARINT_HEADER_BYTES_MAX));

/// The header's encoding for `data` entry bytes and `count` members.
fn encode_header(data: usize, count: usize) -> ([u8; HEADER_BYTES_MAX], usize) {
    let (a, b) = (varint::encode(data as u64), varint::encode(count as u64));
    let (a, b) = (a.bytes(), b.bytes());
    let mut out = [0u8; HEADER_BYTES_MAX];
    out[..a.len()].copy_from_slice(a);
    out[a.len()..a.len() + b.len()].copy_from_slice(b);
    (out, a.len() + b.len())
}

/// The layout of a block of `block_bytes` (header and entries).
fn layout_for(block_bytes: usize) -> Layout {
    // Cannot fail: sizes stay below PACKED_BYTES_MAX + HEADER_BYTES_MAX.
    Layout::from_size_align(block_bytes, BLOCK_ALIGN).expect("packed set layout")
}

/// A small set in one block (see the module docs). `repr(transparent)` over the
/// block's pointer, so a `SetValue` word with no tag *is* an `SPacked`.
#[repr(transparent)]
pub struct SPacked {
    ptr: NonNull<u8>,
}

// SAFETY: an SPacked uniquely owns its block, like a Box<[u8]>.
unsafe impl Send for SPacked {}

/// A decoded header.
#[derive(Clone, Copy)]
struct Header {
    /// Bytes of the entries.
    data: usize,
    /// Members.
    count: usize,
    /// Bytes of the header (where the entries start).
    bytes: usize,
}

impl SPacked {
    /// A block holding `count` members whose entries are `data`.
    fn from_data(data: &[u8], count: usize) -> SPacked {
        assert!(data.len() <= PACKED_BYTES_MAX && count <= data.len());
        let (head, head_len) = encode_header(data.len(), count);
        let layout = layout_for(head_len + data.len());
        // SAFETY: the layout has a non-zero size (the header).
        let raw = unsafe { alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        // SAFETY: the block is fresh and `head_len + data.len()` bytes long.
        unsafe {
            std::ptr::copy_nonoverlapping(head.as_ptr(), raw, head_len);
            std::ptr::copy_nonoverlapping(data.as_ptr(), raw.add(head_len), data.len());
        }
        SPacked { ptr }
    }

    /// An empty set.
    pub fn new() -> SPacked {
        Self::from_data(&[], 0)
    }

    /// Take the block back from [`into_raw`](Self::into_raw).
    ///
    /// # Safety
    /// `ptr` must come from `into_raw` and not be used again.
    pub unsafe fn from_raw(ptr: NonNull<u8>) -> SPacked {
        SPacked { ptr }
    }

    /// Give up ownership of the block as its pointer.
    pub fn into_raw(self) -> NonNull<u8> {
        std::mem::ManuallyDrop::new(self).ptr
    }

    fn header(&self) -> Header {
        // SAFETY: every block starts with its whole header, two varints.
        let (data, count, at) = unsafe { varint::read_raw_pair(self.ptr.as_ptr()) };
        Header {
            data,
            count,
            bytes: at,
        }
    }

    /// The entries.
    fn data(&self) -> &[u8] {
        let h = self.header();
        // SAFETY: `h.data` initialised bytes follow the header.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(h.bytes), h.data) }
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.header().count
    }

    /// True with no member.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of the whole block.
    pub fn block_bytes(&self) -> usize {
        let h = self.header();
        h.bytes + h.data
    }

    /// Heap bytes, as a glibc chunk.
    pub fn heap_bytes(&self) -> usize {
        malloc_chunk_bytes(self.block_bytes())
    }

    /// Members in order (insertion order, as Redis's listpack set).
    pub fn iter(&self) -> SPackedIter<'_> {
        SPackedIter {
            data: self.data(),
            at: 0,
        }
    }

    /// Member number `index` (O(index)).
    pub fn get(&self, index: usize) -> Option<&[u8]> {
        self.iter().nth(index)
    }

    /// True when `member` is in the set (O(n), as Redis's `lpFind`).
    pub fn contains(&self, member: &[u8]) -> bool {
        self.iter().any(|m| m == member)
    }

    /// Bytes Redis's own listpack of these members takes (`lpBytes`), for the
    /// 1 GiB safety check (`lpSafeToAdd`); O(n).
    pub fn redis_bytes(&self) -> usize {
        rules::LP_EMPTY_BYTES + self.iter().map(rules::entry_bytes).sum::<usize>()
    }

    /// Append a member known to be absent (the caller checked the limits).
    pub fn push_back(&mut self, member: &[u8]) {
        let len = varint::encode(member.len() as u64);
        let end = self.header().data;
        let count = self.len() + 1;
        self.splice(end, end, &[len.bytes(), member], count);
    }

    /// Remove `member`; false when absent.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        let found = self.entries().find(|&(_, _, m)| m == member);
        match found {
            Some((start, end, _)) => {
                let count = self.len() - 1;
                self.splice(start, end, &[], count);
                true
            }
            None => false,
        }
    }

    /// Remove member number `index` and return a copy of it (SPOP).
    pub fn remove_index(&mut self, index: usize) -> Option<Vec<u8>> {
        let (start, end, member) = self.entries().nth(index)?;
        let out = member.to_vec();
        let count = self.len() - 1;
        self.splice(start, end, &[], count);
        Some(out)
    }

    /// Entries as (start, end, member) byte offsets into the data.
    fn entries(&self) -> impl Iterator<Item = (usize, usize, &[u8])> + '_ {
        let data = self.data();
        let mut at = 0;
        std::iter::from_fn(move || {
            if at >= data.len() {
                return None;
            }
            let start = at;
            let (len, from) = varint::read(data, at);
            at = from + len as usize;
            Some((start, at, &data[from..at]))
        })
    }

    /// Replace entry bytes `start..end` with the concatenation of `pieces`, and
    /// set the count to `count`; the block is reallocated to its exact size.
    fn splice(&mut self, start: usize, end: usize, pieces: &[&[u8]], count: usize) {
        let h = self.header();
        debug_assert!(start <= end && end <= h.data);
        let insert: usize = pieces.iter().map(|p| p.len()).sum();
        let new_len = h.data - (end - start) + insert;
        assert!(new_len <= PACKED_BYTES_MAX && count <= new_len);
        let (head, head_len) = encode_header(new_len, count);
        if head_len != h.bytes {
            let old = self.data();
            let mut data = Vec::with_capacity(new_len);
            data.extend_from_slice(&old[..start]);
            for p in pieces {
                data.extend_from_slice(p);
            }
            data.extend_from_slice(&old[end..]);
            *self = Self::from_data(&data, count);
            return;
        }
        let tail = h.data - end;
        if new_len > h.data {
            self.resize(head_len + h.data, head_len + new_len);
        }
        // SAFETY: the block holds max(old, new) entry bytes after a header whose
        // length stays; the tail moves within it (`copy` allows overlap); the
        // pieces are outside the block (it is borrowed mutably).
        unsafe {
            let base = self.ptr.as_ptr().add(head_len);
            std::ptr::copy(base.add(end), base.add(start + insert), tail);
            let mut w = base.add(start);
            for p in pieces {
                std::ptr::copy_nonoverlapping(p.as_ptr(), w, p.len());
                w = w.add(p.len());
            }
        }
        if new_len < h.data {
            self.resize(head_len + h.data, head_len + new_len);
        }
        // SAFETY: the block starts with `head_len` header bytes owned uniquely.
        unsafe { std::ptr::copy_nonoverlapping(head.as_ptr(), self.ptr.as_ptr(), head_len) }
    }

    /// Reallocate the block from `old_bytes` to `new_bytes` (headers included).
    fn resize(&mut self, old_bytes: usize, new_bytes: usize) {
        // SAFETY: the block was allocated with `layout_for(old_bytes)`; the new
        // size is non-zero (the header).
        let raw = unsafe { realloc(self.ptr.as_ptr(), layout_for(old_bytes), new_bytes) };
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(layout_for(new_bytes))
        };
        self.ptr = ptr;
    }

    /// An independent copy.
    pub fn deep_clone(&self) -> SPacked {
        Self::from_data(self.data(), self.len())
    }
}

impl Drop for SPacked {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout and freed once.
        unsafe { dealloc(self.ptr.as_ptr(), layout_for(self.block_bytes())) }
    }
}

/// Members of an [`SPacked`] in order.
pub struct SPackedIter<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Iterator for SPackedIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.at >= self.data.len() {
            return None;
        }
        let (len, from) = varint::read(self.data, self.at);
        self.at = from + len as usize;
        Some(&self.data[from..self.at])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes one member of `len` bytes takes in a block.
    fn entry_bytes(len: usize) -> usize {
        varint::len(len as u64) + len
    }

    #[test]
    fn four_unique_16_byte_members_fit_an_80_byte_chunk() {
        let mut p = SPacked::new();
        assert_eq!(p.block_bytes(), 2);
        for j in 0..4 {
            p.push_back(format!("v0000012.{j:03}.xxx").as_bytes());
        }
        assert_eq!(p.block_bytes(), 2 + 4 * 17);
        assert_eq!(p.heap_bytes(), 80);
        assert_eq!(p.len(), 4);
    }

    /// Adds and removals across the header's growth (past 127 entry bytes and
    /// 127 members) and back, against a vector, with Redis's listpack size.
    #[test]
    fn matches_a_vector_across_header_lengths() {
        let mut p = SPacked::new();
        let mut model: Vec<Vec<u8>> = Vec::new();
        let check = |p: &SPacked, model: &Vec<Vec<u8>>| {
            assert_eq!(p.iter().collect::<Vec<_>>(), *model);
            assert_eq!(p.len(), model.len());
            let data: usize = model.iter().map(|m| entry_bytes(m.len())).sum();
            assert_eq!(
                p.block_bytes(),
                varint::len(data as u64) + varint::len(model.len() as u64) + data
            );
            let redis: usize = model.iter().map(|m| rules::entry_bytes(m)).sum();
            assert_eq!(p.redis_bytes(), rules::LP_EMPTY_BYTES + redis);
            for (i, m) in model.iter().enumerate() {
                assert_eq!(p.get(i), Some(&m[..]));
                assert!(p.contains(m));
            }
            assert_eq!(p.get(model.len()), None);
        };
        for i in 0..200 {
            let m = if i % 3 == 0 {
                vec![b'x'; i % 150]
            } else {
                format!("m{i}").into_bytes()
            };
            if model.contains(&m) {
                continue;
            }
            p.push_back(&m);
            model.push(m);
            check(&p, &model);
        }
        assert!(!p.remove(b"absent"));
        let mut k = 0;
        while !model.is_empty() {
            k = (k + 7) % model.len();
            if k % 2 == 0 {
                let m = model.remove(k);
                assert!(p.remove(&m));
            } else {
                assert_eq!(p.remove_index(k), Some(model.remove(k)));
            }
            check(&p, &model);
        }
        assert_eq!(p.remove_index(0), None);
        assert_eq!(p.block_bytes(), 2);
        let q = p.deep_clone();
        assert!(q.is_empty());
    }
}
