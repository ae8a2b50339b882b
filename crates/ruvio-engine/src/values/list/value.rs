//! `ListValue`: a Redis list in ONE machine word.
//!
//! Why one word: the keyspace entry keeps a value pointer in one 8-byte word and
//! lends out `&ListValue` / `&mut ListValue` borrowed from that word, so the list
//! must be exactly a pointer and must never depend on its own address.
//!
//! The low pointer bit tags the encoding (blocks are 2-aligned, boxes 8-aligned):
//! - `0`: a [`Packed`] block, the whole list (`listpack`);
//! - `1`: a `Box<Quicklist>` (`quicklist`).
//!
//! The methods that change the list do what the Redis 7.2 command does around the
//! change, conversion checks included, in the same order (t_list.c): growing
//! commands check a listpack against the node limit first, with the *raw* lengths
//! of the new elements added to the current Redis listpack bytes
//! (`listTypeTryConvertListpack`), and shrinking ones let a one-node quicklist
//! below half the limits become a listpack (`listTypeTryConvertQuicklist`). `fill`
//! is the current `list-max-listpack-size`.

use std::ptr::NonNull;

use smallvec::SmallVec;

use super::listpack::{Packed, PackedIter, PackedRevIter};
use super::quicklist::{QuickIter, QuickRevIter, Quicklist};
use super::rules;
use super::rules::ListShape;

/// Tag bit of a quicklist pointer.
const QUICKLIST_TAG: usize = 1;

// A Packed block and a Quicklist box both leave the tag bit free.
const _: () = assert!(super::listpack::BLOCK_ALIGN > QUICKLIST_TAG);
const _: () = assert!(std::mem::align_of::<Quicklist>() > QUICKLIST_TAG);

/// Elements up to this many bytes pop without a heap allocation.
pub const POPPED_INLINE_BYTES: usize = 32;

/// A popped element.
pub type Popped = SmallVec<[u8; POPPED_INLINE_BYTES]>;

/// An end of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// The first element (LEFT).
    Head,
    /// The last element (RIGHT).
    Tail,
}

/// The encoding OBJECT ENCODING reports for a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListEncoding {
    /// One packed block.
    Listpack,
    /// A chain of packed blocks.
    Quicklist,
}

impl ListEncoding {
    /// The name OBJECT ENCODING replies with.
    pub fn name(self) -> &'static str {
        match self {
            ListEncoding::Listpack => "listpack",
            ListEncoding::Quicklist => "quicklist",
        }
    }
}

/// A list value: one tagged pointer (see the module docs).
#[repr(transparent)]
pub struct ListValue {
    ptr: NonNull<u8>,
}

const _: () = assert!(std::mem::size_of::<ListValue>() == 8);
const _: () = assert!(std::mem::size_of::<Option<ListValue>>() == 8);

// SAFETY: a ListValue uniquely owns its block or box, like a Box.
unsafe impl Send for ListValue {}

enum Repr<'a> {
    Listpack(&'a Packed),
    Quicklist(&'a Quicklist),
}

enum ReprMut<'a> {
    Listpack(&'a mut Packed),
    Quicklist(&'a mut Quicklist),
}

impl Default for ListValue {
    fn default() -> Self {
        ListValue::new()
    }
}

impl ListValue {
    /// An empty list (an empty listpack).
    pub fn new() -> ListValue {
        ListValue {
            ptr: Packed::new().into_raw(),
        }
    }

    fn is_quicklist(&self) -> bool {
        self.ptr.as_ptr().addr() & QUICKLIST_TAG != 0
    }

    fn quicklist_ptr(&self) -> *mut Quicklist {
        self.ptr.as_ptr().map_addr(|a| a & !QUICKLIST_TAG) as *mut Quicklist
    }

    fn repr(&self) -> Repr<'_> {
        if self.is_quicklist() {
            // SAFETY: a tagged word is a live Box<Quicklist> owned by self.
            Repr::Quicklist(unsafe { &*self.quicklist_ptr() })
        } else {
            // SAFETY: an untagged word is a Packed's pointer, and Packed is a
            // repr(transparent) NonNull<u8> like ListValue, so the word is one.
            Repr::Listpack(unsafe { &*(self as *const ListValue as *const Packed) })
        }
    }

    fn repr_mut(&mut self) -> ReprMut<'_> {
        if self.is_quicklist() {
            // SAFETY: as in `repr`; `&mut self` makes the access unique.
            ReprMut::Quicklist(unsafe { &mut *self.quicklist_ptr() })
        } else {
            // SAFETY: as in `repr`; a Packed that reallocates writes its new
            // pointer into this very word, which stays untagged (2-aligned).
            ReprMut::Listpack(unsafe { &mut *(self as *mut ListValue as *mut Packed) })
        }
    }

    /// Number of elements (LLEN).
    pub fn len(&self) -> usize {
        match self.repr() {
            Repr::Listpack(p) => p.len(),
            Repr::Quicklist(q) => q.len(),
        }
    }

    /// True when the list has no element (the keyspace deletes such keys).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What OBJECT ENCODING reports.
    pub fn encoding(&self) -> ListEncoding {
        match self.repr() {
            Repr::Listpack(_) => ListEncoding::Listpack,
            Repr::Quicklist(_) => ListEncoding::Quicklist,
        }
    }

    /// Heap bytes owned, estimated as glibc chunks; O(1).
    pub fn heap_bytes(&self) -> usize {
        match self.repr() {
            Repr::Listpack(p) => p.heap_bytes(),
            Repr::Quicklist(q) => q.heap_bytes(),
        }
    }

    /// The one heap block that holds the whole value in a compact encoding, as
    /// (bytes, alignment): plain bytes, no pointer inside and nothing depending on
    /// its address, so a byte copy at another address is the same value (the undo
    /// journal's copies, `keyspace::entry::FlatCopy`). None for a big encoding.
    pub(crate) fn flat_block(&self) -> Option<(usize, usize)> {
        match self.repr() {
            Repr::Listpack(p) => Some((p.block_bytes(), super::listpack::BLOCK_ALIGN)),
            Repr::Quicklist(_) => None,
        }
    }

    /// Redis's listpack bytes: `lpBytes` of the listpack, or the sum over the
    /// quicklist's nodes.
    pub fn redis_lp_bytes(&self) -> usize {
        match self.repr() {
            Repr::Listpack(p) => p.redis_bytes(),
            Repr::Quicklist(q) => q.nodes().iter().map(|n| n.redis_bytes()).sum(),
        }
    }

    /// The quicklist's nodes as (elements, Redis bytes), head first; empty for a
    /// listpack. For tests and DEBUG-style introspection.
    pub fn node_shape(&self) -> Vec<(usize, usize)> {
        match self.repr() {
            Repr::Listpack(_) => Vec::new(),
            Repr::Quicklist(q) => q
                .nodes()
                .iter()
                .map(|n| (n.len(), n.redis_bytes()))
                .collect(),
        }
    }

    /// Whether each quicklist node is held compressed, head first; empty for a
    /// listpack (tests and DEBUG-style introspection).
    pub fn compressed_nodes(&self) -> Vec<bool> {
        match self.repr() {
            Repr::Listpack(_) => Vec::new(),
            Repr::Quicklist(q) => q.nodes().iter().map(|n| n.is_compressed()).collect(),
        }
    }

    // ---- conversions -------------------------------------------------------

    /// `listTypeTryConvertListpack`: a listpack becomes a quicklist when adding
    /// `add_count` elements of `add_bytes` raw bytes would exceed the node limit.
    fn grow_check(&mut self, add_bytes: usize, add_count: usize, shape: ListShape) {
        let ReprMut::Listpack(p) = self.repr_mut() else {
            return;
        };
        if !rules::exceeds_limit(shape.fill, p.redis_bytes() + add_bytes, p.len() + add_count) {
            return;
        }
        self.make_quicklist(shape);
    }

    /// Make a listpack a quicklist of one node (no-op for a quicklist).
    fn make_quicklist(&mut self, shape: ListShape) {
        if self.is_quicklist() {
            return;
        }
        // SAFETY: the untagged word is a Packed (see `repr`); it is taken out and
        // the word overwritten below before anything can observe it. Nothing in
        // between unwinds (allocation failure aborts).
        let block = unsafe { Packed::from_raw(self.ptr) };
        let boxed = Box::new(Quicklist::from_block(
            block,
            shape.fill,
            shape.compress_depth,
        ));
        let raw = Box::into_raw(boxed).map_addr(|a| a | QUICKLIST_TAG) as *mut u8;
        // SAFETY: a Box pointer is non-null, and so is it with a bit set.
        self.ptr = unsafe { NonNull::new_unchecked(raw) };
    }

    /// `listTypeTryConvertQuicklist` with `shrinking`: a quicklist whose only node
    /// is below half the limits becomes a listpack.
    fn shrink_check(&mut self, shape: ListShape) {
        let ReprMut::Quicklist(q) = self.repr_mut() else {
            return;
        };
        let Some(block) = q.single_block() else {
            return;
        };
        if !rules::may_shrink_to_listpack(shape.fill, block.redis_bytes(), q.len()) {
            return;
        }
        let kept = ListShape {
            fill: q.fill(),
            compress_depth: q.compress_depth(),
        };
        // SAFETY: the tagged word is a Box<Quicklist> owned by self; it is taken
        // out and the word overwritten below. Nothing in between unwinds.
        let boxed = unsafe { Box::from_raw(self.quicklist_ptr()) };
        self.ptr = boxed.into_single_block().into_raw();
        let inverse = crate::undo::Inverse::ListToQuicklist { shape: kept };
        crate::undo::record_inverse(|_| inverse);
    }

    // ---- growing -----------------------------------------------------------

    /// Add `elem` at `end` (LPUSH/RPUSH of one element).
    pub fn push(&mut self, end: End, elem: &[u8], shape: ListShape) {
        self.push_many(end, [elem], shape);
    }

    /// Add every element at `end` in order (LPUSH k a b c leaves c b a), after one
    /// conversion check for all of them, as `pushGenericCommand`.
    pub fn push_many<'a, I>(&mut self, end: End, elems: I, shape: ListShape)
    where
        I: IntoIterator<Item = &'a [u8]> + Clone,
    {
        let (bytes, count) = elems
            .clone()
            .into_iter()
            .fold((0, 0), |(b, c), e| (b + e.len(), c + 1));
        self.grow_check(bytes, count, shape);
        for elem in elems {
            self.push_unchecked(end, elem);
        }
    }

    /// Add an element popped from a list that had encoding `source` (LMOVE's
    /// destination side). Redis's conversion check does not count the bytes of an
    /// element that came out of a quicklist as an integer.
    pub fn push_moved(&mut self, end: End, elem: &[u8], source: ListEncoding, shape: ListShape) {
        let counted = match source {
            ListEncoding::Quicklist if rules::listpack_int(elem).is_some() => 0,
            _ => elem.len(),
        };
        self.grow_check(counted, 1, shape);
        self.push_unchecked(end, elem);
    }

    fn push_unchecked(&mut self, end: End, elem: &[u8]) {
        match (self.repr_mut(), end) {
            (ReprMut::Listpack(p), End::Head) => p.push_front(elem),
            (ReprMut::Listpack(p), End::Tail) => p.push_back(elem),
            (ReprMut::Quicklist(q), end) => q.push(end, elem),
        }
    }

    /// Replace element `index` (LSET); false when out of range. As Redis, the
    /// conversion check for the new element runs first, even out of range.
    pub fn set(&mut self, index: usize, elem: &[u8], shape: ListShape) -> bool {
        self.grow_check(elem.len(), 1, shape);
        let replaced = match self.repr_mut() {
            ReprMut::Listpack(p) => {
                let found = index < p.len();
                if found {
                    let off = p.offset_of(index);
                    p.replace_at(off, elem);
                }
                found
            }
            ReprMut::Quicklist(q) => q.set(index, elem),
        };
        if replaced {
            self.shrink_check(shape);
        }
        replaced
    }

    /// Insert `elem` before or after the first `pivot` (LINSERT): the new length,
    /// or None without a pivot. As Redis, the conversion check runs first, so a
    /// missing pivot can still leave a listpack converted.
    pub fn insert(
        &mut self,
        pivot: &[u8],
        after: bool,
        elem: &[u8],
        shape: ListShape,
    ) -> Option<usize> {
        self.grow_check(elem.len(), 1, shape);
        let inserted = match self.repr_mut() {
            ReprMut::Listpack(p) => {
                let found = p
                    .iter()
                    .scan(0usize, |off, e| {
                        let here = *off;
                        *off += super::listpack::entry_size(e.len());
                        Some((here, *off, e))
                    })
                    .find(|&(_, _, e)| e == pivot);
                match found {
                    Some((start, next, _)) => {
                        p.insert_at(if after { next } else { start }, elem);
                        true
                    }
                    None => false,
                }
            }
            ReprMut::Quicklist(q) => q.insert(pivot, after, elem),
        };
        inserted.then(|| self.len())
    }

    // ---- shrinking ---------------------------------------------------------

    /// Remove and return the element at `end` (LPOP/RPOP without count).
    pub fn pop(&mut self, end: End, shape: ListShape) -> Option<Popped> {
        let popped = self.pop_unchecked(end)?;
        if !self.is_empty() {
            self.shrink_check(shape);
        }
        Some(popped)
    }

    fn pop_unchecked(&mut self, end: End) -> Option<Popped> {
        match self.repr_mut() {
            ReprMut::Listpack(p) => {
                if p.is_empty() {
                    return None;
                }
                let (off, elem) = match end {
                    End::Head => (0, p.entry_at(0).0),
                    End::Tail => p.entry_before(p.data_bytes()),
                };
                let out = Popped::from_slice(elem);
                p.remove_at(off);
                Some(out)
            }
            ReprMut::Quicklist(q) => q.pop(end),
        }
    }

    /// LMOVE with the same source and destination: pop at `from`, push at `to`
    /// (with the destination's conversion check), then the source's shrink check,
    /// in Redis's order. Returns the moved element.
    pub fn move_within(&mut self, from: End, to: End, shape: ListShape) -> Option<Popped> {
        let source = self.encoding();
        let elem = self.pop_unchecked(from)?;
        self.push_moved(to, &elem, source, shape);
        self.shrink_check(shape);
        Some(elem)
    }

    /// Remove `n` elements at `end` (LPOP/RPOP with a count, after the reply was
    /// read with the iterators), then the shrink check.
    pub fn drop_end(&mut self, end: End, n: usize, shape: ListShape) {
        self.drop_end_unchecked(end, n);
        if !self.is_empty() {
            self.shrink_check(shape);
        }
    }

    fn drop_end_unchecked(&mut self, end: End, n: usize) {
        match self.repr_mut() {
            ReprMut::Listpack(p) => {
                let n = n.min(p.len());
                let (start, stop) = match end {
                    End::Head => (0, p.offset_of(n)),
                    End::Tail => (p.offset_of(p.len() - n), p.data_bytes()),
                };
                p.remove_range(start, stop);
            }
            ReprMut::Quicklist(q) => q.drop_end(end, n),
        }
    }

    /// Remove elements equal to `elem` (LREM): `count > 0` the first `count`,
    /// `count < 0` the last `-count`, `0` all. Returns how many went.
    pub fn remove(&mut self, elem: &[u8], count: i64, shape: ListShape) -> usize {
        let from_back = count < 0;
        let limit = match count {
            0 => usize::MAX,
            n => usize::try_from(n.unsigned_abs()).unwrap_or(usize::MAX),
        };
        let removed = match self.repr_mut() {
            ReprMut::Listpack(p) => p.remove_matches(elem, limit, from_back),
            ReprMut::Quicklist(q) => q.remove(elem, limit, from_back),
        };
        if removed > 0 && !self.is_empty() {
            self.shrink_check(shape);
        }
        removed
    }

    /// Keep only `[start, stop]` (LTRIM, Redis's negative-index rules; an empty
    /// range empties the list), then the shrink check.
    pub fn trim(&mut self, start: i64, stop: i64, shape: ListShape) {
        let len = i64::try_from(self.len()).unwrap_or(i64::MAX);
        let (ltrim, rtrim) = match clamp_range(start, stop, len) {
            Some((start, stop)) => (start, len - stop - 1),
            None => (len, 0),
        };
        // Both are within 0..=len here.
        self.drop_end_unchecked(End::Head, ltrim as usize);
        self.drop_end_unchecked(End::Tail, rtrim as usize);
        if !self.is_empty() {
            self.shrink_check(shape);
        }
    }

    // ---- reading -----------------------------------------------------------

    /// Element `index` (0 is the head).
    pub fn get(&self, index: usize) -> Option<&[u8]> {
        match self.repr() {
            Repr::Listpack(p) => p.get(index),
            Repr::Quicklist(q) => q.get(index),
        }
    }

    /// Elements from `index` towards the tail (nothing when out of range).
    pub fn iter_from(&self, index: usize) -> Iter<'_> {
        Iter(match self.repr() {
            Repr::Listpack(p) if index < p.len() => {
                IterInner::Packed(p.iter_at(p.offset_of(index)))
            }
            Repr::Listpack(_) => IterInner::Empty,
            Repr::Quicklist(q) => IterInner::Quick(q.iter_from(index)),
        })
    }

    /// Elements from `index` towards the head (nothing when out of range).
    pub fn iter_rev_from(&self, index: usize) -> RevIter<'_> {
        RevIter(match self.repr() {
            Repr::Listpack(p) if index < p.len() => {
                RevIterInner::Packed(p.rev_iter_at(p.offset_of(index + 1)))
            }
            Repr::Listpack(_) => RevIterInner::Empty,
            Repr::Quicklist(q) => RevIterInner::Quick(q.iter_rev_from(index)),
        })
    }

    /// Every element, head to tail.
    pub fn iter(&self) -> Iter<'_> {
        self.iter_from(0)
    }

    /// LPOS: positions of elements equal to `elem`, starting at the `rank`-th
    /// match (negative: counting from the tail, scanning backwards), at most
    /// `count` of them (0: all), scanning at most `maxlen` elements (0: all).
    /// `rank` must not be 0 (the command rejects it).
    pub fn positions(&self, elem: &[u8], rank: i64, count: usize, maxlen: usize) -> Vec<usize> {
        let len = self.len();
        let backwards = rank < 0;
        let rank = usize::try_from(rank.unsigned_abs()).unwrap_or(usize::MAX);
        let scan_max = if maxlen == 0 { len } else { maxlen.min(len) };
        let mut out = Vec::new();
        let mut matches = 0usize;
        let mut visit = |scanned: usize, e: &[u8]| -> bool {
            if e == elem {
                matches += 1;
                if matches >= rank {
                    out.push(if backwards {
                        len - scanned - 1
                    } else {
                        scanned
                    });
                    if count != 0 && matches - rank + 1 >= count {
                        return false;
                    }
                }
            }
            true
        };
        if backwards {
            let start = len.saturating_sub(1);
            for (scanned, e) in self.iter_rev_from(start).take(scan_max).enumerate() {
                if !visit(scanned, e) {
                    break;
                }
            }
        } else {
            for (scanned, e) in self.iter().take(scan_max).enumerate() {
                if !visit(scanned, e) {
                    break;
                }
            }
        }
        out
    }

    // ---- whole value -------------------------------------------------------

    /// An independent copy with the same encoding and node layout (COPY; Redis's
    /// `listTypeDup` keeps the quicklist's shape).
    pub fn deep_clone(&self) -> ListValue {
        match self.repr() {
            Repr::Listpack(p) => ListValue {
                ptr: p.deep_clone().into_raw(),
            },
            Repr::Quicklist(q) => {
                let raw = Box::into_raw(Box::new(q.deep_clone())).map_addr(|a| a | QUICKLIST_TAG);
                // SAFETY: a Box pointer is non-null, and so is it with a bit set.
                ListValue {
                    ptr: unsafe { NonNull::new_unchecked(raw as *mut u8) },
                }
            }
        }
    }

    /// Reverse one change of a big list (the undo journal's roll-back).
    pub(crate) fn reverse(&mut self, inverse: crate::undo::Inverse, arena: &[u8]) {
        use crate::undo::Inverse;
        if let Inverse::ListToQuicklist { shape } = inverse {
            return self.make_quicklist(shape);
        }
        let ReprMut::Quicklist(q) = self.repr_mut() else {
            unreachable!("{inverse:?} for a listpack: it turned back into a quicklist first")
        };
        match inverse {
            Inverse::ListPop(end) => drop(q.pop(end)),
            Inverse::ListUnpop {
                end,
                elem,
                own_node,
            } => q.unpop(end, elem.get(arena), own_node),
            Inverse::ListSet { index, old } => drop(q.set(index as usize, old.get(arena))),
            Inverse::ListRemoveAt(index) => q.remove_at(index as usize),
            Inverse::ListNodeBack { at, block } => q.node_back(at as usize, block.get(arena)),
            Inverse::ListNodesOut { at, count } => q.nodes_out(at as usize, count as usize),
            Inverse::ListReinsert {
                node,
                pos,
                own_node,
                elem,
            } => q.reinsert(node as usize, pos as usize, elem.get(arena), own_node),
            other => unreachable!("{other:?} recorded for a list"),
        }
    }

    /// Free up to `nodes_max` nodes of a big list so a huge value can be released
    /// in slices; true when what is left is one block (dropping it is O(1)).
    pub fn free_some(&mut self, nodes_max: usize) -> bool {
        match self.repr_mut() {
            ReprMut::Listpack(_) => true,
            ReprMut::Quicklist(q) => q.free_nodes(nodes_max),
        }
    }

    /// Recompute every total from scratch and compare (tests).
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        if let Repr::Quicklist(q) = self.repr() {
            q.check_invariants();
        }
        let from_scratch: usize = match self.repr() {
            Repr::Listpack(p) => crate::memsize::malloc_chunk_bytes(p.block_bytes()),
            Repr::Quicklist(q) => {
                let slots = q.nodes().capacity();
                crate::memsize::malloc_chunk_bytes(std::mem::size_of::<Quicklist>())
                    + if slots == 0 {
                        0
                    } else {
                        crate::memsize::malloc_chunk_bytes(
                            slots * std::mem::size_of::<super::quicklist::Node>(),
                        )
                    }
                    + q.nodes()
                        .iter()
                        .map(super::quicklist::Node::heap_bytes)
                        .sum::<usize>()
            }
        };
        assert_eq!(self.heap_bytes(), from_scratch);
        let redis: usize = match self.repr() {
            Repr::Listpack(p) => {
                rules::LP_EMPTY_BYTES + p.iter().map(rules::entry_bytes).sum::<usize>()
            }
            Repr::Quicklist(q) => q
                .nodes()
                .iter()
                .enumerate()
                .map(|(at, _)| {
                    rules::LP_EMPTY_BYTES
                        + q.block_of(at).iter().map(rules::entry_bytes).sum::<usize>()
                })
                .sum(),
        };
        assert_eq!(self.redis_lp_bytes(), redis);
        assert_eq!(self.iter().count(), self.len());
    }
}

/// Redis's range normalisation (LRANGE, LTRIM): negative indexes count from the
/// end, start is clamped at 0, stop at len - 1; None when the range is empty.
pub fn clamp_range(start: i64, stop: i64, len: i64) -> Option<(i64, i64)> {
    let start = if start < 0 {
        len.saturating_add(start)
    } else {
        start
    }
    .max(0);
    let stop = if stop < 0 {
        len.saturating_add(stop)
    } else {
        stop
    };
    if start > stop || start >= len {
        return None;
    }
    Some((start, stop.min(len - 1)))
}

impl Drop for ListValue {
    fn drop(&mut self) {
        if self.is_quicklist() {
            // SAFETY: a tagged word is a Box<Quicklist> owned by self, freed once.
            drop(unsafe { Box::from_raw(self.quicklist_ptr()) });
        } else {
            // SAFETY: an untagged word is a Packed owned by self, freed once.
            drop(unsafe { Packed::from_raw(self.ptr) });
        }
    }
}

impl std::fmt::Debug for ListValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.encoding().name())?;
        f.debug_list()
            .entries(self.iter().map(String::from_utf8_lossy))
            .finish()
    }
}

enum IterInner<'a> {
    Empty,
    Packed(PackedIter<'a>),
    Quick(QuickIter<'a>),
}

/// Elements of a list towards the tail; no allocation per element.
pub struct Iter<'a>(IterInner<'a>);

impl<'a> Iterator for Iter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        match &mut self.0 {
            IterInner::Empty => None,
            IterInner::Packed(it) => it.next(),
            IterInner::Quick(it) => it.next(),
        }
    }
}

enum RevIterInner<'a> {
    Empty,
    Packed(PackedRevIter<'a>),
    Quick(QuickRevIter<'a>),
}

/// Elements of a list towards the head; no allocation per element.
pub struct RevIter<'a>(RevIterInner<'a>);

impl<'a> Iterator for RevIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        match &mut self.0 {
            RevIterInner::Empty => None,
            RevIterInner::Packed(it) => it.next(),
            RevIterInner::Quick(it) => it.next(),
        }
    }
}
