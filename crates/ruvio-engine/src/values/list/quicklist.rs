//! `Quicklist`: a big list as a chain of [`Packed`] nodes (OBJECT ENCODING
//! `quicklist`).
//!
//! Why a chain: a list of a million elements in one block would make every push
//! at the head move megabytes, and every realloc copy them. Bounded nodes keep
//! each change O(node) while the elements stay densely packed.
//!
//! Why these exact node rules: whether a list becomes a `listpack` again depends
//! on it having exactly one node (see [`super::ListValue`]), so nodes are created,
//! split and merged exactly where Redis 7.2's quicklist.c does it (push at an end
//! fills the end node until `_quicklistNodeAllowInsert` refuses, LINSERT follows
//! `_quicklistInsert` including its split and `_quicklistMergeNodes`, deletions
//! drop a node only when it is empty and never merge). Node decisions use the fill
//! the quicklist was created with, as Redis's `quicklist->fill` (later CONFIG SETs
//! only affect the listpack/quicklist conversions).
//!
//! Redis keeps an element of 1 GiB or more in a "plain" node of its own; Ruvio's
//! elements are at most 512 MiB, so as in Redis 7.2 every node is packed. An
//! element bigger than the node limit still ends up alone in its node, because no
//! node accepts it and no node accepts anything next to it.
//!
//! The nodes sit in a `VecDeque` with each node's element count beside its pointer,
//! so finding position `i` skips whole nodes by reading one contiguous array, from
//! whichever end is nearer, and touches only the block that holds `i`.
//!
//! `list-compress-depth` (fixed at creation, as Redis's `quicklist->compress`)
//! keeps that many nodes at each end plain and compresses the inner ones with LZF,
//! as `__quicklistCompress` does: after each change the end nodes are made plain,
//! the nodes the change touched and the first inner node from each end are
//! compressed (a node under 48 bytes, or one LZF shrinks by 8 bytes or less, stays
//! plain). A change decompresses the node it changes; a read takes `&self`, so it
//! decompresses into the node's read copy ([`Node::block`]), which the next change
//! of the list drops: the list is compressed again by its next write, where Redis
//! recompresses after each read. Elements, node layout and every reply are the
//! same at any depth; only memory differs.

use std::cell::{Cell, OnceCell};
use std::collections::VecDeque;

use super::listpack::{Packed, PackedIter, PackedRevIter};
use super::rules;
use super::End;
use crate::memsize::malloc_chunk_bytes;
use crate::undo::{self, Inverse, Kept};
use crate::values::rdb::lzf;

/// Once the node array has at least this many slots, it shrinks when three
/// quarters of them are unused (so a list that grew and shrank gives memory back,
/// and a steady queue does not reallocate back and forth).
const NODE_SLOTS_SHRINK_MIN: usize = 64;

/// A node under this many block bytes is not compressed (Redis'
/// `MIN_COMPRESS_BYTES`).
const COMPRESS_BYTES_MIN: usize = 48;
/// A node is kept compressed only if LZF saves more than this many bytes
/// (Redis' `MIN_COMPRESS_IMPROVE`).
const COMPRESS_IMPROVE_MIN: usize = 8;

/// One node: its block (plain or compressed) and, beside it, its element count
/// (a copy of the block's, kept here so index seeks never touch the blocks they
/// skip).
pub struct Node {
    stored: Stored,
    count: u32,
}

const _: () = assert!(std::mem::size_of::<Node>() == 24);

/// How a node holds its block.
enum Stored {
    Plain(Packed),
    /// An inner node under `list-compress-depth`.
    Compressed(Box<Compressed>),
}

/// A block compressed with LZF, with what the node rules read of it.
struct Compressed {
    lzf: Box<[u8]>,
    /// [`Packed::block_bytes`] of the block, to decompress it.
    block_bytes: u32,
    /// [`Packed::redis_bytes`] of the block (the insert and merge rules).
    redis_bytes: u32,
    /// The block decompressed by a read, until the list's next change.
    read: OnceCell<Packed>,
}

impl Compressed {
    fn decompress(&self) -> Packed {
        let bytes = lzf::decompress(&self.lzf, self.block_bytes as usize)
            .expect("a list node decompresses to the block it was compressed from");
        Packed::from_block(&bytes)
    }
}

impl Node {
    fn new(block: Packed) -> Node {
        let count = count_u32(block.len());
        Node {
            stored: Stored::Plain(block),
            count,
        }
    }

    /// The node's elements (a compressed node is decompressed into its read copy).
    pub fn block(&self) -> &Packed {
        match &self.stored {
            Stored::Plain(block) => block,
            Stored::Compressed(c) => c.read.get_or_init(|| c.decompress()),
        }
    }

    /// Elements in the node.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Redis' listpack size of the node's block, without decompressing it.
    pub fn redis_bytes(&self) -> usize {
        match &self.stored {
            Stored::Plain(block) => block.redis_bytes(),
            Stored::Compressed(c) => c.redis_bytes as usize,
        }
    }

    /// The node is held compressed (OBJECT's view of `list-compress-depth`).
    pub fn is_compressed(&self) -> bool {
        matches!(self.stored, Stored::Compressed(_))
    }

    /// Heap bytes of what the node holds (a read copy is not counted: it goes
    /// with the list's next change).
    pub fn heap_bytes(&self) -> usize {
        match &self.stored {
            Stored::Plain(block) => block.heap_bytes(),
            Stored::Compressed(c) => {
                malloc_chunk_bytes(std::mem::size_of::<Compressed>())
                    + malloc_chunk_bytes(c.lzf.len())
            }
        }
    }

    /// The block, made plain to be changed.
    fn plain_mut(&mut self) -> &mut Packed {
        if let Stored::Compressed(c) = &mut self.stored {
            let block = c.read.take().unwrap_or_else(|| c.decompress());
            self.stored = Stored::Plain(block);
        }
        match &mut self.stored {
            Stored::Plain(block) => block,
            Stored::Compressed(_) => unreachable!("made plain above"),
        }
    }

    fn into_block(mut self) -> Packed {
        self.plain_mut();
        match self.stored {
            Stored::Plain(block) => block,
            Stored::Compressed(_) => unreachable!("made plain above"),
        }
    }

    /// Compress a plain node when LZF pays (`__quicklistCompressNode`); drop a
    /// compressed node's read copy.
    fn compress(&mut self) {
        let block = match &mut self.stored {
            Stored::Plain(block) => block,
            Stored::Compressed(c) => {
                c.read.take();
                return;
            }
        };
        let bytes = block.block_bytes();
        if bytes < COMPRESS_BYTES_MIN {
            return;
        }
        let Some(packed) = lzf::compress(block.block(), bytes - COMPRESS_IMPROVE_MIN - 1) else {
            return;
        };
        let compressed = Compressed {
            // A copy of exactly its size: shrinking the compressor's block (sized
            // for the whole node) in place would leave a hole beside each node.
            lzf: Box::from(&packed[..]),
            block_bytes: bytes as u32,
            redis_bytes: block.redis_bytes() as u32,
            read: OnceCell::new(),
        };
        self.stored = Stored::Compressed(Box::new(compressed));
    }

    /// Drop a compressed node's read copy.
    fn forget_read(&mut self) {
        if let Stored::Compressed(c) = &mut self.stored {
            c.read.take();
        }
    }

    fn deep_clone(&self) -> Node {
        let stored = match &self.stored {
            Stored::Plain(block) => Stored::Plain(block.deep_clone()),
            Stored::Compressed(c) => Stored::Compressed(Box::new(Compressed {
                lzf: c.lzf.clone(),
                block_bytes: c.block_bytes,
                redis_bytes: c.redis_bytes,
                read: OnceCell::new(),
            })),
        };
        Node {
            stored,
            count: self.count,
        }
    }
}

/// Node counts fit a `u32`: a node grows past its limit only through one command's
/// arguments (at most `MULTIBULK_LEN_MAX`, 2^30) on top of a node within limits.
fn count_u32(n: usize) -> u32 {
    u32::try_from(n).expect("list node count fits u32")
}

/// The chain of nodes and its totals.
pub struct Quicklist {
    nodes: VecDeque<Node>,
    /// Elements in all nodes.
    len: usize,
    /// Sum of the nodes' block chunks (so `heap_bytes` is O(1)).
    blocks_heap_bytes: usize,
    /// Redis's `quicklist->fill`, fixed at creation.
    fill: i16,
    /// `list-compress-depth` at creation (Redis's `quicklist->compress`): plain
    /// nodes at each end; 0 compresses nothing.
    compress_depth: u16,
    /// A read decompressed some node into its read copy: the next change drops them.
    read_copies: Cell<bool>,
}

impl Quicklist {
    /// A quicklist holding `block` (if it has elements), with node fill `fill`
    /// and `compress_depth` plain nodes at each end.
    pub fn from_block(block: Packed, fill: i32, compress_depth: u16) -> Quicklist {
        let mut ql = Quicklist {
            nodes: VecDeque::new(),
            len: 0,
            blocks_heap_bytes: 0,
            fill: rules::quicklist_fill(fill),
            compress_depth,
            read_copies: Cell::new(false),
        };
        if !block.is_empty() {
            ql.insert_node(0, block);
        }
        ql
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The nodes, head first.
    pub fn nodes(&self) -> &VecDeque<Node> {
        &self.nodes
    }

    /// Node `at`'s block, decompressed into its read copy if need be.
    pub fn block_of(&self, at: usize) -> &Packed {
        let node = &self.nodes[at];
        if node.is_compressed() {
            self.read_copies.set(true);
        }
        node.block()
    }

    /// `list-compress-depth` the list was created with.
    pub fn compress_depth(&self) -> u16 {
        self.compress_depth
    }

    /// The fill the node decisions use.
    pub fn fill(&self) -> i32 {
        i32::from(self.fill)
    }

    /// Heap bytes: this struct's box, the node array and every block.
    pub fn heap_bytes(&self) -> usize {
        let array = match self.nodes.capacity() {
            0 => 0,
            slots => malloc_chunk_bytes(slots * std::mem::size_of::<Node>()),
        };
        malloc_chunk_bytes(std::mem::size_of::<Quicklist>()) + array + self.blocks_heap_bytes
    }

    /// The only block, when there is exactly one node (the shrink check).
    pub fn single_block(&self) -> Option<&Packed> {
        match self.nodes.len() {
            1 => Some(self.block_of(0)),
            _ => None,
        }
    }

    /// Give up the only node's block (there must be exactly one node).
    pub fn into_single_block(mut self) -> Packed {
        assert_eq!(
            self.nodes.len(),
            1,
            "only a one-node quicklist becomes a listpack"
        );
        self.nodes
            .pop_front()
            .map(Node::into_block)
            .expect("one node")
    }

    fn insert_node(&mut self, at: usize, block: Packed) {
        self.len += block.len();
        self.blocks_heap_bytes += block.heap_bytes();
        self.nodes.insert(at, Node::new(block));
    }

    fn remove_node(&mut self, at: usize) -> Packed {
        let node = self.nodes.remove(at).expect("node index in range");
        self.len -= node.count as usize;
        self.blocks_heap_bytes -= node.heap_bytes();
        let slots = self.nodes.capacity();
        if slots >= NODE_SLOTS_SHRINK_MIN && self.nodes.len() * 4 <= slots {
            self.nodes.shrink_to(self.nodes.len() * 2);
        }
        node.into_block()
    }

    /// Change node `at` through `change` (made plain first), keeping the totals
    /// right.
    fn with_node<R>(&mut self, at: usize, change: impl FnOnce(&mut Packed) -> R) -> R {
        let node = &mut self.nodes[at];
        let heap_before = node.heap_bytes();
        let block = node.plain_mut();
        let result = change(block);
        let count = block.len();
        self.len = self.len + count - node.count as usize;
        self.blocks_heap_bytes = self.blocks_heap_bytes + node.heap_bytes() - heap_before;
        node.count = count_u32(count);
        result
    }

    /// Node `at` changes how it is held (`compress` or made plain), totals kept.
    fn restore_node(&mut self, at: usize, compress: bool) {
        let node = &mut self.nodes[at];
        let heap_before = node.heap_bytes();
        match compress {
            true => node.compress(),
            false => {
                node.plain_mut();
            }
        }
        self.blocks_heap_bytes = self.blocks_heap_bytes + node.heap_bytes() - heap_before;
    }

    /// After a change that touched nodes `touched` (a range of indexes now):
    /// `__quicklistCompress` for each. The `compress_depth` nodes at each end
    /// are made plain, the touched nodes between them compressed, and so is the
    /// first inner node from each end (a change at an end pushes one inward).
    /// Nothing is compressed while the list has fewer than twice the depth in
    /// nodes (what is compressed stays so, as in Redis). Read copies go first.
    fn settle(&mut self, touched: std::ops::Range<usize>) {
        if self.read_copies.replace(false) {
            self.nodes.iter_mut().for_each(Node::forget_read);
        }
        let depth = usize::from(self.compress_depth);
        let n = self.nodes.len();
        if depth == 0 || n < depth * 2 {
            return;
        }
        for k in 0..depth {
            self.restore_node(k, false);
            self.restore_node(n - 1 - k, false);
            if k == n - 1 - k || k + 1 == n - 1 - k {
                return;
            }
        }
        for at in touched.start.max(depth)..touched.end.min(n - depth) {
            self.restore_node(at, true);
        }
        self.restore_node(depth, true);
        self.restore_node(n - 1 - depth, true);
    }

    /// Drop node `at` if it has no element left.
    fn drop_if_empty(&mut self, at: usize) -> bool {
        let empty = self.nodes[at].count == 0;
        if empty {
            self.remove_node(at);
        }
        empty
    }

    /// `_quicklistNodeAllowInsert` for node `at` and an element of `len` bytes.
    fn allows_insert(&self, at: usize, len: usize) -> bool {
        self.nodes.get(at).is_some_and(|n| {
            rules::node_allows_insert(self.fill(), n.redis_bytes(), n.count as usize, len)
        })
    }

    /// `quicklistPushHead` / `quicklistPushTail`.
    pub fn push(&mut self, end: End, elem: &[u8]) {
        let at = match end {
            End::Head => 0,
            End::Tail => self.nodes.len().saturating_sub(1),
        };
        if self.allows_insert(at, elem.len()) {
            self.with_node(at, |b| match end {
                End::Head => b.push_front(elem),
                End::Tail => b.push_back(elem),
            });
        } else {
            let mut block = Packed::new();
            block.push_back(elem);
            let at = match end {
                End::Head => 0,
                End::Tail => self.nodes.len(),
            };
            self.insert_node(at, block);
        }
        self.settle_end(end);
        undo::record_inverse(|_| Inverse::ListPop(end));
    }

    /// [`settle`](Self::settle) after a change at `end`.
    fn settle_end(&mut self, end: End) {
        if self.compress_depth == 0 && !self.read_copies.get() {
            return;
        }
        let at = match end {
            End::Head => 0,
            End::Tail => self.nodes.len().saturating_sub(1),
        };
        self.settle(at..at + 1);
    }

    /// Remove and return the element at `end`.
    pub fn pop(&mut self, end: End) -> Option<super::Popped> {
        let at = match end {
            End::Head => 0,
            End::Tail => self.nodes.len().checked_sub(1)?,
        };
        let nodes = self.nodes.len();
        let popped = self.with_node(at, |b| {
            let (off, elem) = match end {
                End::Head => (0, b.entry_at(0).0),
                End::Tail => {
                    let (start, elem) = b.entry_before(b.data_bytes());
                    (start, elem)
                }
            };
            let out = super::Popped::from_slice(elem);
            b.remove_at(off);
            out
        });
        self.drop_if_empty(at);
        self.settle_end(end);
        if undo::inverses_wanted() {
            let own_node = self.nodes.len() < nodes;
            undo::record_inverse(|arena| Inverse::ListUnpop {
                end,
                elem: Kept::of(arena, &popped),
                own_node,
            });
        }
        Some(popped)
    }

    /// Put back `elem`, popped off `end` (the undo journal's [`Inverse::ListUnpop`]):
    /// into the end node, or a node of its own when the pop dropped one.
    pub(crate) fn unpop(&mut self, end: End, elem: &[u8], own_node: bool) {
        if own_node || self.nodes.is_empty() {
            let mut block = Packed::new();
            block.push_back(elem);
            let at = match end {
                End::Head => 0,
                End::Tail => self.nodes.len(),
            };
            self.insert_node(at, block);
            return self.settle_end(end);
        }
        let at = match end {
            End::Head => 0,
            End::Tail => self.nodes.len() - 1,
        };
        self.with_node(at, |b| match end {
            End::Head => b.push_front(elem),
            End::Tail => b.push_back(elem),
        });
        self.settle_end(end);
    }

    /// Remove `n` elements at `end` (`quicklistDelRange` from an end).
    pub fn drop_end(&mut self, end: End, mut n: usize) {
        if undo::inverses_wanted() {
            // One pop at a time leaves the nodes as this loop does, and records
            // each element for the undo journal.
            while n > 0 && self.pop(end).is_some() {
                n -= 1;
            }
            return;
        }
        while n > 0 && !self.nodes.is_empty() {
            let at = match end {
                End::Head => 0,
                End::Tail => self.nodes.len() - 1,
            };
            let count = self.nodes[at].count as usize;
            if count <= n {
                self.remove_node(at);
                n -= count;
            } else {
                self.with_node(at, |b| match end {
                    End::Head => {
                        let off = b.offset_of(n);
                        b.remove_range(0, off);
                    }
                    End::Tail => {
                        let off = b.offset_of(count - n);
                        let stop = b.data_bytes();
                        b.remove_range(off, stop);
                    }
                });
                n = 0;
            }
        }
        self.settle_end(end);
    }

    /// Node and position inside it of element `index` (< len), skipping whole
    /// nodes from the nearer end.
    pub fn locate(&self, index: usize) -> (usize, usize) {
        debug_assert!(index < self.len);
        if index < self.len / 2 {
            let mut before = 0;
            for (at, node) in self.nodes.iter().enumerate() {
                let count = node.count as usize;
                if index < before + count {
                    return (at, index - before);
                }
                before += count;
            }
        } else {
            let mut after = self.len;
            for (at, node) in self.nodes.iter().enumerate().rev() {
                let count = node.count as usize;
                after -= count;
                if index >= after {
                    return (at, index - after);
                }
            }
        }
        unreachable!("index below len lies in a node")
    }

    /// Element `index`.
    pub fn get(&self, index: usize) -> Option<&[u8]> {
        if index >= self.len {
            return None;
        }
        let (at, i) = self.locate(index);
        self.block_of(at).get(i)
    }

    /// Replace element `index` in place (`quicklistReplaceEntry`: the node may end
    /// up over its limit, as in Redis).
    pub fn set(&mut self, index: usize, elem: &[u8]) -> bool {
        if index >= self.len {
            return false;
        }
        let (at, i) = self.locate(index);
        if undo::inverses_wanted() {
            // Recorded first: setting back an element still there changes nothing.
            let old = self.block_of(at).get(i).unwrap_or_default();
            undo::record_inverse(|arena| Inverse::ListSet {
                index: index as u64,
                old: Kept::of(arena, old),
            });
        }
        self.with_node(at, |b| {
            let off = b.offset_of(i);
            b.replace_at(off, elem);
        });
        self.settle(at..at + 1);
        true
    }

    /// For the undo journal, before a split of node `at` and the merges around
    /// it (which reach two nodes either side): the first of those nodes and a
    /// copy of each one's block in the arena.
    fn keep_nodes_around(&self, at: usize) -> Option<(usize, Vec<Kept>)> {
        if !undo::inverses_wanted() {
            return None;
        }
        let (lo, hi) = (at.saturating_sub(2), (at + 3).min(self.nodes.len()));
        let blocks = (lo..hi).map(|k| undo::keep_bytes(self.block_of(k).block()));
        Some((lo, blocks.collect::<Option<Vec<Kept>>>()?))
    }

    /// After the split and merges (the list had `nodes_before` nodes): the nodes
    /// now from `lo` (as many as were kept, give or take what the split added
    /// and the merges took) come out on a roll-back, then the kept ones go back,
    /// first node first.
    fn record_split(&self, lo: usize, blocks: Vec<Kept>, nodes_before: usize) {
        for (k, &block) in blocks.iter().enumerate().rev() {
            let at = (lo + k) as u32;
            undo::record_inverse(|_| Inverse::ListNodeBack { at, block });
        }
        let count = (blocks.len() + self.nodes.len() - nodes_before) as u32;
        undo::record_inverse(|_| Inverse::ListNodesOut {
            at: lo as u32,
            count,
        });
    }

    /// Put back a node copied by `keep_nodes_around` (a roll-back).
    pub(crate) fn node_back(&mut self, at: usize, block: &[u8]) {
        self.insert_node(at, Packed::from_block(block));
        self.settle(at..at + 1);
    }

    /// Take out `count` nodes from `at` (a roll-back).
    pub(crate) fn nodes_out(&mut self, at: usize, count: usize) {
        for _ in 0..count {
            self.remove_node(at);
        }
        self.settle(at..at);
    }

    /// Remove element `index` (< len; the undo journal's roll-back of LINSERT),
    /// dropping its node if that empties it.
    pub(crate) fn remove_at(&mut self, index: usize) {
        let (at, i) = self.locate(index);
        self.with_node(at, |b| {
            let off = b.offset_of(i);
            b.remove_at(off);
        });
        self.drop_if_empty(at);
        self.settle(at..at + 1);
    }

    /// Insert `elem` before or after the first element equal to `pivot`
    /// (`_quicklistInsert`); false when there is none.
    pub fn insert(&mut self, pivot: &[u8], after: bool, elem: &[u8]) -> bool {
        let Some((at, i, off)) = self.find(pivot) else {
            return false;
        };
        self.insert_found(at, i, off, after, elem);
        // The new element's node, its neighbours, and the split's parts.
        self.settle(at.saturating_sub(2)..at + 3);
        true
    }

    /// [`insert`](Self::insert) once the pivot is found: element `i` of node
    /// `at`, at byte offset `off`.
    fn insert_found(&mut self, at: usize, i: usize, off: usize, after: bool, elem: &[u8]) {
        let count = self.nodes[at].count as usize;
        let nodes_before = self.nodes.len();
        // Where the new element lands, whichever node takes it (for the undo
        // journal only).
        let index = undo::inverses_wanted().then(|| {
            let before: usize = self.nodes.iter().take(at).map(|n| n.count as usize).sum();
            before + i + usize::from(after)
        });
        let full = !self.allows_insert(at, elem.len());
        let at_tail = after && i == count - 1;
        let at_head = !after && i == 0;
        let avail_next = at_tail && self.allows_insert(at + 1, elem.len());
        let avail_prev = at_head && at > 0 && self.allows_insert(at - 1, elem.len());
        if !full {
            self.with_node(at, |b| {
                let off = if after { b.entry_at(off).1 } else { off };
                b.insert_at(off, elem);
            });
        } else if avail_next {
            self.with_node(at + 1, |b| b.push_front(elem));
        } else if avail_prev {
            self.with_node(at - 1, |b| b.push_back(elem));
        } else if at_tail || at_head {
            let mut block = Packed::new();
            block.push_back(elem);
            self.insert_node(if after { at + 1 } else { at }, block);
        } else {
            // Split the full node around the pivot; the new element starts the
            // part after it (or ends the part before it), then neighbours merge.
            let kept = self.keep_nodes_around(at);
            let center = if after {
                let mut tail = self.with_node(at, |b| {
                    let cut = b.entry_at(off).1;
                    b.split_off(cut)
                });
                tail.push_front(elem);
                self.insert_node(at + 1, tail);
                at
            } else {
                let mut front = self.with_node(at, |b| {
                    let back = b.split_off(off);
                    std::mem::replace(b, back)
                });
                front.push_back(elem);
                self.insert_node(at, front);
                at + 1
            };
            self.merge_around(center);
            match kept {
                Some((lo, blocks)) => self.record_split(lo, blocks, nodes_before),
                None => undo::no_inverse(),
            }
            return;
        }
        if let Some(index) = index {
            undo::record_inverse(|_| Inverse::ListRemoveAt(index as u64));
        }
    }

    /// The first element equal to `elem`: node, position in it, byte offset.
    fn find(&self, elem: &[u8]) -> Option<(usize, usize, usize)> {
        for (at, node) in self.nodes.iter().enumerate() {
            let block = self.block_of(at);
            let mut off = 0;
            for i in 0..node.count as usize {
                let (e, next) = block.entry_at(off);
                if e == elem {
                    return Some((at, i, off));
                }
                off = next;
            }
        }
        None
    }

    /// `_quicklistNodeAllowMerge` for nodes `a` and `a + 1`.
    fn allows_merge(&self, a: usize) -> bool {
        match (self.nodes.get(a), self.nodes.get(a + 1)) {
            (Some(x), Some(y)) => rules::nodes_allow_merge(
                self.fill(),
                (x.redis_bytes(), x.count as usize),
                (y.redis_bytes(), y.count as usize),
            ),
            _ => false,
        }
    }

    /// Merge node `a + 1` into node `a`.
    fn merge(&mut self, a: usize) {
        let right = self.remove_node(a + 1);
        self.with_node(a, |b| b.append(&right));
    }

    /// `_quicklistMergeNodes(center)`: try (prev_prev, prev), (next, next_next),
    /// (prev, center), then (center or the merge result, next), in that order.
    fn merge_around(&mut self, mut center: usize) {
        if center >= 2 && self.allows_merge(center - 2) {
            self.merge(center - 2);
            center -= 1;
        }
        if self.allows_merge(center + 1) {
            self.merge(center + 1);
        }
        let target = if center >= 1 && self.allows_merge(center - 1) {
            self.merge(center - 1);
            center - 1
        } else {
            center
        };
        if self.allows_merge(target) {
            self.merge(target);
        }
    }

    /// Remove elements equal to `elem`, at most `limit`, from the head (or from
    /// the tail when `from_back`); emptied nodes go, nothing merges (as
    /// `quicklistDelIndex`). Returns how many went.
    pub fn remove(&mut self, elem: &[u8], limit: usize, from_back: bool) -> usize {
        let removed = self.remove_matching(elem, limit, from_back);
        if removed > 0 {
            self.settle(0..self.nodes.len());
        }
        removed
    }

    /// [`remove`](Self::remove) without the compression pass.
    fn remove_matching(&mut self, elem: &[u8], limit: usize, from_back: bool) -> usize {
        let mut removed = 0;
        if from_back {
            let mut at = self.nodes.len();
            while at > 0 && removed < limit {
                at -= 1;
                removed += self.remove_in_node(at, elem, limit - removed, true);
            }
        } else {
            let mut at = 0;
            while at < self.nodes.len() && removed < limit {
                let before = self.nodes.len();
                removed += self.remove_in_node(at, elem, limit - removed, false);
                if self.nodes.len() == before {
                    at += 1;
                }
            }
        }
        removed
    }

    /// LREM's part in node `at`: remove up to `limit` elements equal to `elem`
    /// (the last ones when `from_back`), dropping the node if that empties it.
    /// For the undo journal, each removal is recorded, highest position first, as
    /// an [`Inverse::ListReinsert`] (played back lowest first, they put the node
    /// back as it was; the lowest recreates the node if it went).
    fn remove_in_node(&mut self, at: usize, elem: &[u8], limit: usize, from_back: bool) -> usize {
        let positions = match undo::inverses_wanted() {
            true => self.match_positions(at, elem, limit, from_back),
            false => Vec::new(),
        };
        let removed = self.with_node(at, |b| b.remove_matches(elem, limit, from_back));
        let dropped = self.drop_if_empty(at);
        for (k, &pos) in positions.iter().enumerate().rev() {
            undo::record_inverse(|arena| Inverse::ListReinsert {
                node: at as u32,
                pos: pos as u32,
                own_node: dropped && k == 0,
                elem: Kept::of(arena, elem),
            });
        }
        removed
    }

    /// Positions in node `at` of the elements LREM removes there: the first
    /// `limit` equal to `elem`, or the last `limit` when `from_back`; ascending.
    fn match_positions(&self, at: usize, elem: &[u8], limit: usize, from_back: bool) -> Vec<usize> {
        let block = self.block_of(at);
        let mut off = 0;
        let mut found = Vec::new();
        for i in 0..self.nodes[at].count as usize {
            let (e, next) = block.entry_at(off);
            if e == elem {
                found.push(i);
            }
            off = next;
        }
        let keep = found.len().min(limit);
        match from_back {
            true => found.split_off(found.len() - keep),
            false => {
                found.truncate(keep);
                found
            }
        }
    }

    /// Put `elem` back at position `pos` of node `node` (the undo journal's
    /// roll-back of LREM), or into a new node there when `own_node`.
    pub(crate) fn reinsert(&mut self, node: usize, pos: usize, elem: &[u8], own_node: bool) {
        if own_node {
            let mut block = Packed::new();
            block.push_back(elem);
            self.insert_node(node, block);
        } else {
            self.with_node(node, |b| {
                let off = b.offset_of(pos);
                b.insert_at(off, elem);
            });
        }
        self.settle(node..node + 1);
    }

    /// Elements from `index` forwards.
    pub fn iter_from(&self, index: usize) -> QuickIter<'_> {
        if index >= self.len {
            return QuickIter {
                list: self,
                at: self.nodes.len(),
                inner: None,
            };
        }
        let (at, i) = self.locate(index);
        let block = self.block_of(at);
        QuickIter {
            list: self,
            at,
            inner: Some(block.iter_at(block.offset_of(i))),
        }
    }

    /// Elements from `index` backwards.
    pub fn iter_rev_from(&self, index: usize) -> QuickRevIter<'_> {
        if index >= self.len {
            return QuickRevIter {
                list: self,
                at: 0,
                inner: None,
            };
        }
        let (at, i) = self.locate(index);
        let block = self.block_of(at);
        QuickRevIter {
            list: self,
            at,
            inner: Some(block.rev_iter_at(block.offset_of(i + 1))),
        }
    }

    /// Free up to `nodes_max` whole nodes from the tail; true when at most one is
    /// left (dropping the rest is then O(1)).
    pub fn free_nodes(&mut self, nodes_max: usize) -> bool {
        for _ in 0..nodes_max {
            if self.nodes.len() <= 1 {
                break;
            }
            let last = self.nodes.len() - 1;
            drop(self.remove_node(last));
        }
        let left = self.nodes.len();
        self.settle(left..left);
        self.nodes.len() <= 1
    }

    /// An independent copy (same fill, same nodes).
    pub fn deep_clone(&self) -> Quicklist {
        let mut nodes = VecDeque::with_capacity(self.nodes.len());
        nodes.extend(self.nodes.iter().map(Node::deep_clone));
        Quicklist {
            nodes,
            len: self.len,
            blocks_heap_bytes: self.blocks_heap_bytes,
            fill: self.fill,
            compress_depth: self.compress_depth,
            read_copies: Cell::new(false),
        }
    }

    /// Recompute every total from scratch and compare (tests).
    #[cfg(test)]
    pub fn check_invariants(&self) {
        let mut len = 0;
        let mut heap = 0;
        for node in &self.nodes {
            assert_eq!(node.count as usize, node.block().len());
            assert_eq!(node.block().iter().count(), node.block().len());
            assert_eq!(node.redis_bytes(), node.block().redis_bytes());
            assert!(node.count > 0, "empty node left in the chain");
            len += node.count as usize;
            heap += node.heap_bytes();
        }
        assert_eq!(len, self.len);
        assert_eq!(heap, self.blocks_heap_bytes);
    }
}

/// Elements of a quicklist from some index forwards.
pub struct QuickIter<'a> {
    list: &'a Quicklist,
    at: usize,
    inner: Option<PackedIter<'a>>,
}

impl<'a> Iterator for QuickIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        loop {
            if let Some(e) = self.inner.as_mut()?.next() {
                return Some(e);
            }
            self.at += 1;
            self.inner =
                (self.at < self.list.nodes.len()).then(|| self.list.block_of(self.at).iter());
        }
    }
}

/// Elements of a quicklist from some index backwards.
pub struct QuickRevIter<'a> {
    list: &'a Quicklist,
    at: usize,
    inner: Option<PackedRevIter<'a>>,
}

impl<'a> Iterator for QuickRevIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        loop {
            if let Some(e) = self.inner.as_mut()?.next() {
                return Some(e);
            }
            self.inner = match self.at.checked_sub(1) {
                Some(prev) => {
                    self.at = prev;
                    let block = self.list.block_of(prev);
                    Some(block.rev_iter_at(block.data_bytes()))
                }
                None => None,
            };
        }
    }
}
