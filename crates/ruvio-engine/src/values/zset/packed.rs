//! `ZPacked`: a small sorted set as ONE heap block behind a thin pointer (OBJECT
//! ENCODING `listpack`).
//!
//! Why this layout: the common sorted set is tiny (a leaderboard per user, a few
//! timestamps per session), and one exact-size block per set is what keeps 50,000
//! sets of 3 members well under 100 bytes per key. The block is
//!
//! ```text
//! [data bytes][count] [score | len varint | member] ...
//!  varint      varint
//! ```
//!
//! in score order (ties by member bytes, as Redis's `zslInsert` orders them).
//! A score is one varint `u`: an even `u` is an integral score (`u / 2`
//! zigzag-decoded, |score| < 2^53 so the integer is the double exactly), an odd
//! `u` (1) says the 8 raw bytes of the double follow (fractions, infinities,
//! integers from 2^53 on). Either way a read gives back the exact double with no
//! text parsing. Three 1-byte members with scores 1, 2, 3 take 2 + 3 x 3 = 11
//! bytes: one 32-byte glibc chunk (24 usable bytes).
//!
//! The header is two LEB128 varints rather than two `u32`: a set of fewer than
//! 128 entry bytes spends 2 bytes on it, not 8, which is what puts three unique
//! 16-byte members with small integral scores (2 + 3 x 18 = 56 bytes) in a
//! 64-byte chunk instead of an 80-byte one (memory_shapes.py --values unique16,
//! issue 36 item 4). Reading it costs two one-byte varint decodes in the common
//! case instead of two loads.
//!
//! Every change builds the new block from the old one ([`ZPacked::splice`]): one
//! allocation and two copies, what Redis's `lpInsert`/`lpDelete` cost with their
//! `realloc` and `memmove`. Blocks are 8-aligned, leaving low pointer bits free for
//! [`super::ZSetValue`]'s encoding tag.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;

use crate::memsize::malloc_chunk_bytes;
use crate::varint;

/// Alignment of every block (the header words; also frees the tag bit).
pub const BLOCK_ALIGN: usize = 8;
/// Longest header: the data bytes and the member count, two varints of at most
/// [`PACKED_BYTES_MAX`] (a count is never above the data bytes).
const HEADER_BYTES_MAX: usize = 2 * VARINT_U32_BYTES_MAX;
/// Bytes of a LEB128 varint of a value below 2^32.
const VARINT_U32_BYTES_MAX: usize = 5;
/// Most bytes a stored score takes: the tag varint and the raw double.
const SCORE_BYTES_MAX: usize = 9;
/// Bytes of a raw double.
const F64_BYTES: usize = 8;
/// The score varint that says a raw double follows.
const SCORE_F64_TAG: u64 = 1;
/// Integral scores below this magnitude are stored as integers: every integer
/// up to 2^53 is exactly a double, and its zigzag form shifted left by one fits
/// a u64.
const SCORE_INT_LIMIT: f64 = 9_007_199_254_740_992.0;
/// Largest block. Redis converts a listpack that would pass 1 GiB
/// (`LISTPACK_MAX_SAFETY_SIZE`); the `u32` header fits it with room to spare.
pub const PACKED_BYTES_MAX: usize = 1 << 30;
const _: () = assert!(PACKED_BYTES_MAX + HEADER_BYTES_MAX <= u32::MAX as usize);

/// Most bytes one entry of a member of `member_len` bytes takes (the limit
/// checks use this bound; the actual entry may be up to 8 bytes shorter).
pub fn entry_bytes(member_len: usize) -> usize {
    SCORE_BYTES_MAX + varint::len(member_len as u64) + member_len
}

/// The varint at `bytes[*at..]`; moves `at` past it.
#[inline]
fn get_varint(bytes: &[u8], at: &mut usize) -> u64 {
    let (v, next) = varint::read(bytes, *at);
    *at = next;
    v
}

/// Append a score (see the module docs).
fn put_score(out: &mut Vec<u8>, score: f64) {
    if score.fract() == 0.0 && score.abs() < SCORE_INT_LIMIT {
        let i = score as i64;
        let zigzag = ((i << 1) ^ (i >> 63)) as u64;
        varint::push(out, zigzag << 1);
    } else {
        varint::push(out, SCORE_F64_TAG);
        out.extend_from_slice(&score.to_le_bytes());
    }
}

/// The score at `bytes[*at..]`; moves `at` past it.
fn get_score(bytes: &[u8], at: &mut usize) -> f64 {
    let u = get_varint(bytes, at);
    if u == SCORE_F64_TAG {
        let mut raw = [0u8; F64_BYTES];
        raw.copy_from_slice(&bytes[*at..*at + F64_BYTES]);
        *at += F64_BYTES;
        return f64::from_le_bytes(raw);
    }
    let zigzag = u >> 1;
    (((zigzag >> 1) as i64) ^ -((zigzag & 1) as i64)) as f64
}

/// Append one entry to `out`.
///
/// A score of -0 is stored as 0: Redis keeps listpack scores as text written by
/// `d2string`, which prints an integral double through `ll2string`, and
/// `(long long)-0.0` is 0; so `ZADD k -0 m` on a listpack answers `ZSCORE` 0
/// (checked against redis-server 7.0), while a skiplist keeps the double's sign.
fn encode_entry(out: &mut Vec<u8>, member: &[u8], score: f64) {
    // `+ 0.0` turns -0.0 into 0.0 and leaves every other value as it is.
    put_score(out, score + 0.0);
    varint::push(out, member.len() as u64);
    out.extend_from_slice(member);
}

/// Decode the entry at the start of `bytes`: (member, score, entry length).
fn decode_entry(bytes: &[u8]) -> (&[u8], f64, usize) {
    let mut at = 0;
    let score = get_score(bytes, &mut at);
    let len = get_varint(bytes, &mut at) as usize;
    (&bytes[at..at + len], score, at + len)
}

/// Redis's order of sorted-set elements: by score, then by member bytes.
pub fn less(a_score: f64, a_member: &[u8], b_score: f64, b_member: &[u8]) -> bool {
    a_score < b_score || (a_score == b_score && a_member < b_member)
}

/// A small sorted set in one block (see the module docs).
#[repr(transparent)]
pub struct ZPacked {
    ptr: NonNull<u8>,
}

// SAFETY: a ZPacked uniquely owns its block, like a Box<[u8]>.
unsafe impl Send for ZPacked {}

impl ZPacked {
    fn layout(block_bytes: usize) -> Layout {
        // Sizes are capped at PACKED_BYTES_MAX + header, far below isize::MAX.
        Layout::from_size_align(block_bytes, BLOCK_ALIGN).unwrap_or(Layout::new::<u64>())
    }

    /// A block holding `count` entries whose encoded bytes are `data`.
    fn from_data(data: &[u8], count: usize) -> ZPacked {
        assert!(data.len() <= PACKED_BYTES_MAX && count <= data.len().max(1));
        let mut head = Vec::with_capacity(HEADER_BYTES_MAX);
        varint::push(&mut head, data.len() as u64);
        varint::push(&mut head, count as u64);
        debug_assert!(head.len() <= HEADER_BYTES_MAX);
        let size = head.len() + data.len();
        let layout = Self::layout(size);
        // SAFETY: the layout has a non-zero size (the header).
        let raw = unsafe { alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        // SAFETY: the block is `size` bytes: header then data.
        unsafe {
            std::ptr::copy_nonoverlapping(head.as_ptr(), raw, head.len());
            std::ptr::copy_nonoverlapping(data.as_ptr(), raw.add(head.len()), data.len());
        }
        ZPacked { ptr }
    }

    /// An empty set.
    pub fn new() -> ZPacked {
        Self::from_data(&[], 0)
    }

    /// A set of `entries`, already in order.
    pub fn from_sorted<'a>(entries: impl IntoIterator<Item = (&'a [u8], f64)>) -> ZPacked {
        let mut data = Vec::new();
        let mut count = 0;
        for (member, score) in entries {
            encode_entry(&mut data, member, score);
            count += 1;
        }
        Self::from_data(&data, count)
    }

    /// Take the block back from [`into_raw`](Self::into_raw).
    ///
    /// # Safety
    /// `ptr` must come from `into_raw` and not be used again.
    pub unsafe fn from_raw(ptr: NonNull<u8>) -> ZPacked {
        ZPacked { ptr }
    }

    /// Give up ownership of the block as its pointer.
    pub fn into_raw(self) -> NonNull<u8> {
        let ptr = self.ptr;
        std::mem::forget(self);
        ptr
    }

    /// The header: (data bytes, member count, header bytes).
    fn header(&self) -> (usize, usize, usize) {
        // SAFETY: every block starts with its whole header, two varints.
        unsafe { varint::read_raw_pair(self.ptr.as_ptr()) }
    }

    /// The encoded entries.
    pub fn data(&self) -> &[u8] {
        let (len, _, head) = self.header();
        // SAFETY: the header's length is the data bytes after it.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(head), len) }
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.header().1
    }

    /// True with no member.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of the whole block.
    pub fn block_bytes(&self) -> usize {
        let (data, _, head) = self.header();
        head + data
    }

    /// Heap bytes, as a glibc chunk.
    pub fn heap_bytes(&self) -> usize {
        malloc_chunk_bytes(self.block_bytes())
    }

    /// Members in order with their scores and byte offsets.
    pub fn iter(&self) -> PackedIter<'_> {
        PackedIter {
            data: self.data(),
            at: 0,
        }
    }

    /// Offset and score of `member` (linear, as `zzlFind`).
    pub fn find(&self, member: &[u8]) -> Option<(usize, usize, f64)> {
        self.iter()
            .enumerate()
            .find(|(_, (_, m, _))| *m == member)
            .map(|(rank, (off, _, s))| (rank, off, s))
    }

    /// Replace data bytes `start..end` with `insert` (whose entries number
    /// `added`, while `removed` entries go).
    fn splice(&mut self, start: usize, end: usize, insert: &[u8], added: usize, removed: usize) {
        let old = self.data();
        let mut data = Vec::with_capacity(old.len() - (end - start) + insert.len());
        data.extend_from_slice(&old[..start]);
        data.extend_from_slice(insert);
        data.extend_from_slice(&old[end..]);
        let count = self.len() + added - removed;
        *self = Self::from_data(&data, count);
    }

    /// Insert a member known to be absent at its place in the order.
    pub fn insert(&mut self, member: &[u8], score: f64) {
        let at = self
            .iter()
            .find(|&(_, m, s)| less(score, member, s, m))
            .map_or(self.data().len(), |(off, _, _)| off);
        let mut entry = Vec::with_capacity(entry_bytes(member.len()));
        encode_entry(&mut entry, member, score);
        self.splice(at, at, &entry, 1, 0);
    }

    /// Remove the entry at byte offset `off`.
    pub fn remove_at(&mut self, off: usize) {
        let (_, _, len) = decode_entry(&self.data()[off..]);
        self.splice(off, off + len, &[], 0, 1);
    }

    /// Remove entries of ranks `lo..hi`.
    pub fn remove_ranks(&mut self, lo: usize, hi: usize) {
        if lo >= hi {
            return;
        }
        let data_len = self.data().len();
        let mut start = data_len;
        let mut end = data_len;
        for (rank, (off, _, _)) in self.iter().enumerate() {
            if rank == lo {
                start = off;
            }
            if rank == hi {
                end = off;
                break;
            }
        }
        self.splice(start, end, &[], 0, hi - lo);
    }

    /// An independent copy.
    pub fn deep_clone(&self) -> ZPacked {
        Self::from_data(self.data(), self.len())
    }
}

impl Drop for ZPacked {
    fn drop(&mut self) {
        let layout = Self::layout(self.block_bytes());
        // SAFETY: the block was allocated with this layout and is freed once.
        unsafe { dealloc(self.ptr.as_ptr(), layout) };
    }
}

/// Entries of a packed set in order: (byte offset, member, score).
pub struct PackedIter<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Iterator for PackedIter<'a> {
    type Item = (usize, &'a [u8], f64);

    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.data.len() {
            return None;
        }
        let off = self.at;
        let (member, score, len) = decode_entry(&self.data[off..]);
        self.at += len;
        Some((off, member, score))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_small_members_fit_a_32_byte_chunk() {
        let p = ZPacked::from_sorted([(&b"a"[..], 1.0), (b"b", 2.0), (b"c", 3.0)]);
        assert_eq!(p.block_bytes(), 11);
        assert_eq!(p.heap_bytes(), 32);
        let all: Vec<_> = p.iter().map(|(_, m, s)| (m.to_vec(), s)).collect();
        assert_eq!(all.len(), 3);
        assert_eq!(varint::len(0), 1);
        assert_eq!(varint::len(127), 1);
        assert_eq!(varint::len(128), 2);
    }

    #[test]
    fn three_unique_16_byte_members_fit_a_64_byte_chunk() {
        let members = [
            b"v0000012.000.xxx",
            b"v0000012.001.xxx",
            b"v0000012.002.xxx",
        ];
        let p = ZPacked::from_sorted(members.iter().zip(1..).map(|(m, s)| (&m[..], f64::from(s))));
        assert_eq!(p.block_bytes(), 2 + 3 * (1 + 1 + 16));
        assert_eq!(p.heap_bytes(), 64);
    }

    #[test]
    fn header_grows_past_127_entry_bytes_and_shrinks_back() {
        let mut p = ZPacked::new();
        assert_eq!((p.len(), p.block_bytes()), (0, 2));
        let members: Vec<Vec<u8>> = (0..200)
            .map(|i| format!("member-{i:04}").into_bytes())
            .collect();
        for (i, m) in members.iter().enumerate() {
            p.insert(m, i as f64);
            let data: usize = p
                .iter()
                .map(|(_, m, s)| {
                    let mut e = Vec::new();
                    encode_entry(&mut e, m, s);
                    e.len()
                })
                .sum();
            assert_eq!(p.len(), i + 1);
            assert_eq!(p.data().len(), data);
            assert_eq!(
                p.block_bytes(),
                varint::len(data as u64) + varint::len(i as u64 + 1) + data
            );
        }
        let all: Vec<_> = p.iter().map(|(_, m, s)| (m.to_vec(), s)).collect();
        assert_eq!(
            all,
            members
                .iter()
                .cloned()
                .zip((0..200).map(f64::from))
                .collect::<Vec<_>>()
        );
        p.remove_ranks(1, 200);
        assert_eq!((p.len(), p.block_bytes()), (1, 2 + 2 + 11));
        assert_eq!(
            p.iter().next().map(|(_, m, s)| (m.to_vec(), s)),
            Some((members[0].clone(), 0.0))
        );
    }

    #[test]
    fn scores_round_trip_exactly() {
        let two53 = SCORE_INT_LIMIT;
        let scores = [
            0.0,
            1.0,
            -1.0,
            63.0,
            -64.0,
            1e15,
            -1e15,
            two53 - 1.0,
            -(two53 - 1.0),
            two53,
            -two53,
            two53 * 2.0,
            0.5,
            -2.25,
            f64::MIN_POSITIVE,
            f64::MAX,
            f64::MIN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        for s in scores {
            let mut out = Vec::new();
            put_score(&mut out, s);
            let mut at = 0;
            assert_eq!(get_score(&out, &mut at).to_bits(), s.to_bits(), "{s}");
            assert_eq!(at, out.len());
            assert!(out.len() <= SCORE_BYTES_MAX);
        }
        // -0 becomes 0 in a listpack, as Redis's text form does.
        let p = ZPacked::from_sorted([(&b"z"[..], -0.0)]);
        assert_eq!(p.iter().next().map(|(_, _, s)| s.to_bits()), Some(0));
        let mut out = Vec::new();
        put_score(&mut out, 5.0);
        assert_eq!(out.len(), 1);
    }
}
