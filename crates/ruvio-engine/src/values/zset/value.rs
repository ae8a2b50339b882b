//! `ZSetValue`: a Redis sorted set in ONE machine word.
//!
//! Why one word: the keyspace entry keeps a value pointer in word 3 and lends out
//! `&ZSetValue` / `&mut ZSetValue` borrowed from that word (as lists do), so the
//! set must be exactly a pointer that never depends on its own address.
//!
//! The low pointer bit tags the encoding (blocks and boxes are 8-aligned):
//! - `0`: a [`ZPacked`] block (`listpack`);
//! - `1`: a `Box<ZTree>` (`skiplist`).
//!
//! Conversions happen where Redis 7.2's t_zset.c does them: a new member that
//! would pass `zset-max-listpack-entries`, or is longer than
//! `zset-max-listpack-value`, turns a listpack into a skiplist before it is added
//! (`zsetAdd`); ZADD of many elements converts up front (`zsetTypeMaybeConvert`);
//! a skiplist never turns back except when a STORE command builds its result
//! ([`ZSetValue::from_sorted`], `zsetConvertToListpackIfNeeded`).

use std::ptr::NonNull;

use super::packed::{self, PackedIter, ZPacked, PACKED_BYTES_MAX};
use super::tree::{TreeIter, ZTree};

/// Tag bit of a tree pointer.
const TREE_TAG: usize = 1;

const _: () = assert!(packed::BLOCK_ALIGN > TREE_TAG);
const _: () = assert!(std::mem::align_of::<ZTree>() > TREE_TAG);

/// The thresholds that choose an encoding (`zset-max-listpack-*`).
#[derive(Clone, Copy, Debug)]
pub struct ZLimits {
    /// `zset-max-listpack-entries`.
    pub entries: usize,
    /// `zset-max-listpack-value`.
    pub value: usize,
}

impl ZLimits {
    /// True when a set of `len` members, the longest `max_member` bytes and all of
    /// them `total_bytes`, may be a listpack (`zsetTypeCreate`'s test, plus the
    /// 1 GiB safety limit).
    pub fn fits_packed(&self, len: usize, max_member: usize, total_bytes: usize) -> bool {
        len <= self.entries && max_member <= self.value && total_bytes <= PACKED_BYTES_MAX
    }
}

/// The encoding OBJECT ENCODING reports for a sorted set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZSetEncoding {
    /// One packed block.
    Listpack,
    /// The ordered tree with its member index.
    Skiplist,
}

/// A sorted-set value: one tagged pointer (see the module docs).
#[repr(transparent)]
pub struct ZSetValue {
    ptr: NonNull<u8>,
}

const _: () = assert!(std::mem::size_of::<ZSetValue>() == 8);
const _: () = assert!(std::mem::size_of::<Option<ZSetValue>>() == 8);

// SAFETY: a ZSetValue uniquely owns its block or box, like a Box.
unsafe impl Send for ZSetValue {}

enum Repr<'a> {
    Packed(&'a ZPacked),
    Tree(&'a ZTree),
}

enum ReprMut<'a> {
    Packed(&'a mut ZPacked),
    Tree(&'a mut ZTree),
}

impl Default for ZSetValue {
    fn default() -> Self {
        ZSetValue::new()
    }
}

impl ZSetValue {
    /// An empty listpack set.
    pub fn new() -> ZSetValue {
        ZSetValue {
            ptr: ZPacked::new().into_raw(),
        }
    }

    /// `zsetTypeCreate(size_hint, value_len_hint)`: a listpack unless the hints
    /// pass the limits.
    pub fn create(size_hint: usize, value_len_hint: usize, limits: ZLimits) -> ZSetValue {
        if size_hint <= limits.entries && value_len_hint <= limits.value {
            ZSetValue::new()
        } else {
            ZSetValue::from_tree(ZTree::new())
        }
    }

    fn from_tree(tree: ZTree) -> ZSetValue {
        let raw = Box::into_raw(Box::new(tree)).map_addr(|a| a | TREE_TAG) as *mut u8;
        // SAFETY: a Box pointer is non-null, and so is it with a bit set.
        ZSetValue {
            ptr: unsafe { NonNull::new_unchecked(raw) },
        }
    }

    /// A STORE command's result from members already in order: a listpack when it
    /// fits the limits (`zsetConvertToListpackIfNeeded`), else a skiplist.
    pub fn from_sorted(entries: &[(Vec<u8>, f64)], limits: ZLimits) -> ZSetValue {
        let max_member = entries.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
        let total: usize = entries
            .iter()
            .map(|(m, _)| packed::entry_bytes(m.len()))
            .sum();
        if limits.fits_packed(entries.len(), max_member, total) {
            ZSetValue {
                ptr: ZPacked::from_sorted(entries.iter().map(|(m, s)| (&m[..], *s))).into_raw(),
            }
        } else {
            ZSetValue::from_tree(ZTree::from_sorted(
                entries.iter().map(|(m, s)| (&m[..], *s)),
            ))
        }
    }

    fn is_tree(&self) -> bool {
        self.ptr.as_ptr().addr() & TREE_TAG != 0
    }

    fn tree_ptr(&self) -> *mut ZTree {
        self.ptr.as_ptr().map_addr(|a| a & !TREE_TAG) as *mut ZTree
    }

    fn repr(&self) -> Repr<'_> {
        if self.is_tree() {
            // SAFETY: a tagged word is a live Box<ZTree> owned by self.
            Repr::Tree(unsafe { &*self.tree_ptr() })
        } else {
            // SAFETY: an untagged word is a ZPacked's pointer, and ZPacked is a
            // repr(transparent) NonNull<u8> like ZSetValue.
            Repr::Packed(unsafe { &*(self as *const ZSetValue as *const ZPacked) })
        }
    }

    fn repr_mut(&mut self) -> ReprMut<'_> {
        if self.is_tree() {
            // SAFETY: as in `repr`; `&mut self` makes the access unique.
            ReprMut::Tree(unsafe { &mut *self.tree_ptr() })
        } else {
            // SAFETY: as in `repr`; a ZPacked that rebuilds writes its new pointer
            // into this very word, which stays untagged (8-aligned).
            ReprMut::Packed(unsafe { &mut *(self as *mut ZSetValue as *mut ZPacked) })
        }
    }

    /// Number of members (ZCARD).
    pub fn len(&self) -> usize {
        match self.repr() {
            Repr::Packed(p) => p.len(),
            Repr::Tree(t) => t.len(),
        }
    }

    /// True with no member (the keyspace deletes such keys).
    pub fn is_empty(&self) -> bool {
        match self.repr() {
            Repr::Packed(p) => p.is_empty(),
            Repr::Tree(t) => t.is_empty(),
        }
    }

    /// What OBJECT ENCODING reports.
    pub fn encoding(&self) -> ZSetEncoding {
        match self.repr() {
            Repr::Packed(_) => ZSetEncoding::Listpack,
            Repr::Tree(_) => ZSetEncoding::Skiplist,
        }
    }

    /// Heap bytes owned, as glibc chunks; O(1).
    pub fn heap_bytes(&self) -> usize {
        match self.repr() {
            Repr::Packed(p) => p.heap_bytes(),
            Repr::Tree(t) => t.heap_bytes(),
        }
    }

    /// The one heap block that holds the whole value in a compact encoding, as
    /// (bytes, alignment): plain bytes, no pointer inside and nothing depending on
    /// its address, so a byte copy at another address is the same value (the undo
    /// journal's copies, `keyspace::entry::FlatCopy`). None for a big encoding.
    pub(crate) fn flat_block(&self) -> Option<(usize, usize)> {
        match self.repr() {
            Repr::Packed(p) => Some((p.block_bytes(), super::packed::BLOCK_ALIGN)),
            Repr::Tree(_) => None,
        }
    }

    /// Turn a listpack into a skiplist (`zsetConvert`).
    pub fn convert_to_tree(&mut self) {
        if self.is_tree() {
            return;
        }
        // SAFETY: the untagged word is a ZPacked; it is taken out here and the word
        // overwritten below before anything can observe it.
        let block = unsafe { ZPacked::from_raw(self.ptr) };
        let tree = ZTree::from_sorted(block.iter().map(|(_, m, s)| (m, s)));
        drop(block);
        let raw = Box::into_raw(Box::new(tree)).map_addr(|a| a | TREE_TAG) as *mut u8;
        // SAFETY: a Box pointer is non-null, and so is it with a bit set.
        self.ptr = unsafe { NonNull::new_unchecked(raw) };
    }

    /// `zsetTypeMaybeConvert`: a listpack about to receive `size_hint` elements
    /// that pass the entries limit becomes a skiplist first.
    pub fn maybe_convert(&mut self, size_hint: usize, limits: ZLimits) {
        if !self.is_tree() && size_hint > limits.entries {
            self.convert_to_tree();
        }
    }

    /// The score of `member` (ZSCORE).
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match self.repr() {
            Repr::Packed(p) => p.find(member).map(|(_, _, s)| s),
            Repr::Tree(t) => t.score(member),
        }
    }

    /// 0-based rank of `member` in ascending order, with its score.
    pub fn rank(&self, member: &[u8]) -> Option<(usize, f64)> {
        match self.repr() {
            Repr::Packed(p) => p.find(member).map(|(r, _, s)| (r, s)),
            Repr::Tree(t) => t.score(member).map(|s| (t.rank(member, s), s)),
        }
    }

    /// Add a member known to be absent, converting first where `zsetAdd` does.
    pub fn insert(&mut self, member: &[u8], score: f64, limits: ZLimits) {
        if let Repr::Packed(p) = self.repr() {
            let grown = p.block_bytes() + packed::entry_bytes(member.len());
            if p.len() + 1 > limits.entries
                || member.len() > limits.value
                || grown > PACKED_BYTES_MAX
            {
                self.convert_to_tree();
            }
        }
        match self.repr_mut() {
            ReprMut::Packed(p) => p.insert(member, score),
            ReprMut::Tree(t) => t.insert(member, score),
        }
    }

    /// Change the score of a present member (never converts, as `zsetAdd`).
    pub fn update(&mut self, member: &[u8], score: f64) {
        match self.repr_mut() {
            ReprMut::Packed(p) => {
                if let Some((_, off, _)) = p.find(member) {
                    p.remove_at(off);
                    p.insert(member, score);
                }
            }
            ReprMut::Tree(t) => {
                t.update(member, score);
            }
        }
    }

    /// Remove `member`; true when it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self.repr_mut() {
            ReprMut::Packed(p) => match p.find(member) {
                Some((_, off, _)) => {
                    p.remove_at(off);
                    true
                }
                None => false,
            },
            ReprMut::Tree(t) => t.remove(member).is_some(),
        }
    }

    /// Remove the members of ranks `lo..hi` (ascending order).
    pub fn remove_ranks(&mut self, lo: usize, hi: usize) {
        let hi = hi.min(self.len());
        match self.repr_mut() {
            ReprMut::Packed(p) => p.remove_ranks(lo, hi),
            ReprMut::Tree(t) => t.remove_ranks(lo, hi),
        }
    }

    /// How many leading members (ascending) satisfy `before`, a predicate true on
    /// a prefix of the order: the rank where a score or lex range starts or ends.
    pub fn count_while(&self, before: impl Fn(&[u8], f64) -> bool) -> usize {
        match self.repr() {
            Repr::Packed(p) => p.iter().take_while(|&(_, m, s)| before(m, s)).count(),
            Repr::Tree(t) => t.count_while(before),
        }
    }

    /// [`count_while`](Self::count_while) for a predicate on the score alone
    /// (score ranges): a skiplist answers it without reading member bytes in
    /// its inner nodes.
    pub fn count_score_while(&self, before: impl Fn(f64) -> bool) -> usize {
        match self.repr() {
            Repr::Packed(p) => p.iter().take_while(|&(_, _, s)| before(s)).count(),
            Repr::Tree(t) => t.count_score_while(before),
        }
    }

    /// Members from rank `start` upwards (`rev` false) or downwards from rank
    /// `start` counted from the top (`rev` true), as (member, score).
    pub fn iter_from(&self, start: usize, rev: bool) -> Iter<'_> {
        let len = self.len();
        let inner = match self.repr() {
            Repr::Packed(p) if !rev => {
                let mut it = p.iter();
                if start > 0 {
                    it.nth(start - 1);
                }
                Inner::Packed(it)
            }
            Repr::Packed(p) => {
                let mut all: Vec<(&[u8], f64)> = p.iter().map(|(_, m, s)| (m, s)).collect();
                all.truncate(len.saturating_sub(start));
                Inner::PackedRev(all)
            }
            Repr::Tree(t) => {
                let at = if rev {
                    len.checked_sub(start + 1).unwrap_or(len)
                } else {
                    start
                };
                Inner::Tree(t.iter_at(at, rev))
            }
        };
        Iter { inner }
    }

    /// One ZSCAN step over a skiplist from `cursor`, calling `f` for about
    /// `count` members; the next cursor (0 when done). Every member present for
    /// the whole scan is returned (see [`ZTree::scan`]). A listpack answers whole
    /// with cursor 0, as Redis.
    pub fn scan<'a>(&'a self, cursor: u64, count: usize, mut f: impl FnMut(&'a [u8], f64)) -> u64 {
        match self.repr() {
            Repr::Packed(p) => {
                p.iter().for_each(|(_, m, s)| f(m, s));
                0
            }
            Repr::Tree(t) => t.scan(cursor, count, f),
        }
    }

    /// Every member in ascending order.
    pub fn iter(&self) -> Iter<'_> {
        self.iter_from(0, false)
    }

    /// An independent copy with the same encoding (COPY).
    pub fn deep_clone(&self) -> ZSetValue {
        match self.repr() {
            Repr::Packed(p) => ZSetValue {
                ptr: p.deep_clone().into_raw(),
            },
            Repr::Tree(t) => ZSetValue::from_tree(t.deep_clone()),
        }
    }

    /// Reverse one change of a big sorted set (the undo journal's roll-back).
    pub(crate) fn reverse(&mut self, inverse: crate::undo::Inverse, arena: &[u8]) {
        match self.repr_mut() {
            ReprMut::Tree(t) => t.reverse(inverse, arena),
            ReprMut::Packed(_) => unreachable!("a skiplist never becomes packed"),
        }
    }

    /// Free up to `nodes_max` members of a big set being released in slices; true
    /// when what is left is cheap to drop.
    pub fn free_some(&mut self, nodes_max: usize) -> bool {
        match self.repr_mut() {
            ReprMut::Packed(_) => true,
            ReprMut::Tree(t) => t.free_some(nodes_max),
        }
    }

    /// Check the encoding's invariants (tests).
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        if let Repr::Tree(t) = self.repr() {
            t.check_invariants();
        }
        let all: Vec<_> = self.iter().collect();
        assert_eq!(all.len(), self.len());
        for w in all.windows(2) {
            assert!(packed::less(w[0].1, w[0].0, w[1].1, w[1].0));
        }
    }
}

impl Drop for ZSetValue {
    fn drop(&mut self) {
        if self.is_tree() {
            // SAFETY: a tagged word is a Box<ZTree> owned by self, freed once.
            drop(unsafe { Box::from_raw(self.tree_ptr()) });
        } else {
            // SAFETY: an untagged word is a ZPacked owned by self, freed once.
            drop(unsafe { ZPacked::from_raw(self.ptr) });
        }
    }
}

impl std::fmt::Debug for ZSetValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.encoding())?;
        f.debug_list()
            .entries(self.iter().map(|(m, s)| (String::from_utf8_lossy(m), s)))
            .finish()
    }
}

// An iterator lives on the stack for one command: boxing the tree's path would
// allocate per call (ZRANDMEMBER starts one per pick).
#[allow(clippy::large_enum_variant)]
enum Inner<'a> {
    Packed(PackedIter<'a>),
    PackedRev(Vec<(&'a [u8], f64)>),
    Tree(TreeIter<'a>),
}

/// Members of a sorted set in one direction, as (member, score).
pub struct Iter<'a> {
    inner: Inner<'a>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], f64);

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.inner {
            Inner::Packed(it) => it.next().map(|(_, m, s)| (m, s)),
            Inner::PackedRev(all) => all.pop(),
            Inner::Tree(it) => it.next(),
        }
    }
}
