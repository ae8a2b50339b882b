//! `ZTree`: a big sorted set (OBJECT ENCODING `skiplist`), a counted B+tree of
//! member handles plus a dense slot vector and a member index.
//!
//! Why a counted B+tree and not Redis's skip list or a binary tree: a descent
//! touches ~log64(n) nodes of contiguous keys instead of ~2 log2(n) scattered
//! nodes, so ZADD into a million members costs a handful of cache misses, not
//! forty; each inner node keeps its children's member counts, so rank (ZRANK),
//! select (ZRANGE offsets) and the two lookups of ZCOUNT are O(log n); and a
//! cursor down one path walks a range in O(log n + m), either way. See
//! docs/zsets.md for the numbers.
//!
//! - [`Member`]: each member is ONE allocation, `[score f64][len varint][bytes]`,
//!   and everything else holds its 8-byte handle.
//! - Leaves hold [`Key`]s, (score, handle) pairs ordered by (score, member
//!   bytes) as `zslInsert` orders them: a search compares the scores in the leaf
//!   and reads a member block only on a tie. Inner nodes keep, per child, the
//!   member count and the largest key.
//! - `slots`: every member's handle in a dense vector; removal moves the last slot
//!   into the hole. ZSCAN walks the slots from the end down (as the sets'
//!   `Table` does): a removal only moves the last member, which the walk has
//!   passed, and additions land there too, so every member present for the whole
//!   scan is returned, Redis's guarantee.
//! - `index`: a `hashbrown::HashTable<u32>` of slots keyed by the member's hash:
//!   ZSCORE and ZADD's "is it there" are O(1), at 5 bytes per bucket.
//!
//! Every node but a root leaf is allocated at its full capacity ([`LEAF_CAP`],
//! [`INNER_CAP`]), so heap accounting is a count of nodes (a root leaf grows from
//! [`ROOT_LEAF_MIN`] keys, so a skiplist of a few long members stays small). A split of the last leaf on an append
//! leaves the old leaf full, so sets built in score order (timestamps, ranks,
//! ZADD of m0..mN) keep full leaves; a full leaf with a neighbour that has room
//! passes one key over instead of splitting. A node that drops below a quarter
//! merges with a neighbour that has room.

use std::ptr::NonNull;

use hashbrown::HashTable;
use smallvec::SmallVec;

use crate::block;
use crate::memsize::malloc_chunk_bytes;
use crate::undo::{self, Inverse, Kept};

/// Keys per leaf: 1 KiB of (score, handle) pairs; a binary search reads ~5 of
/// its cache lines.
const LEAF_CAP: usize = 64;
/// Children per inner node (a child is 56 bytes: ~1.8 KiB per node); one more
/// slot is allocated for the moment between an insert and the split.
const INNER_CAP: usize = 32;
/// A node with fewer entries than this tries to merge with a neighbour.
const LEAF_MIN: usize = LEAF_CAP / 4;
const INNER_MIN: usize = INNER_CAP / 4;
/// First capacity of a root leaf that grows from empty.
const ROOT_LEAF_MIN: usize = 4;
/// Path depth kept inline by iterators (64 * 32^7 members: far beyond memory).
const DEPTH_INLINE: usize = 8;

/// Most members a tree holds: slots are `u32`.
pub const TREE_MEMBERS_MAX: usize = u32::MAX as usize;

/// Bytes of the score at the start of a member block.
const SCORE_BYTES: usize = 8;
/// Alignment of member blocks (the score is read in place).
const MEMBER_ALIGN: usize = 8;

/// A handle to one member block: `[score f64][len varint][bytes]`.
///
/// Invariant: a `Member` is only held by the `ZTree` that allocated it (in its
/// slots, one leaf, and possibly inner nodes' `max`), and is freed only after it
/// has left all of them, so reading through a handle taken from the tree is
/// reading live memory.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Member(NonNull<u8>);

impl Member {
    fn new(bytes: &[u8], score: f64) -> Member {
        let ptr = block::new(SCORE_BYTES, MEMBER_ALIGN, bytes);
        // SAFETY: the block starts with SCORE_BYTES left for the score, 8-aligned.
        unsafe { ptr.as_ptr().cast::<f64>().write(score) };
        Member(ptr)
    }

    fn score(&self) -> f64 {
        // SAFETY: a live block (type invariant) starts with its 8-aligned score.
        unsafe { self.0.as_ptr().cast::<f64>().read() }
    }

    fn set_score(self, score: f64) {
        // SAFETY: as in `score`; the tree owns the block and is borrowed mutably.
        unsafe { self.0.as_ptr().cast::<f64>().write(score) }
    }

    /// The member's bytes, borrowed as long as the handle is.
    fn bytes(&self) -> &[u8] {
        // SAFETY: a live block (type invariant) made with the score prefix.
        unsafe { block::bytes(self.0, SCORE_BYTES) }
    }

    fn chunk_bytes(&self) -> usize {
        malloc_chunk_bytes(block::layout(SCORE_BYTES, MEMBER_ALIGN, self.bytes().len()).size())
    }

    /// Free the block.
    ///
    /// # Safety
    /// The handle must be live and held nowhere any more.
    unsafe fn free(self) {
        // SAFETY: live and held nowhere, per the caller.
        unsafe { block::free(self.0, SCORE_BYTES, MEMBER_ALIGN) }
    }
}

/// A member in the order: its score (kept beside the handle so a search reads
/// the leaf, not the member blocks) and its handle.
#[derive(Clone, Copy)]
struct Key {
    score: f64,
    member: Member,
}

impl Key {
    /// True when this key sorts before (`score`, `member`).
    fn before(&self, score: f64, member: &[u8]) -> bool {
        self.score < score || (self.score == score && self.member.bytes() < member)
    }
}

/// One child of an inner node: its member count and largest key.
struct Child {
    count: usize,
    max: Key,
    node: Node,
}

impl Child {
    fn of(node: Node) -> Child {
        Child {
            count: node.count(),
            max: node.last(),
            node,
        }
    }

    /// Recompute the count and max from the node (after a split).
    fn refresh(&mut self) {
        self.count = self.node.count();
        self.max = self.node.last();
    }
}

enum Node {
    Leaf(Vec<Key>),
    Inner(Vec<Child>),
}

impl Node {
    fn new_leaf() -> Vec<Key> {
        Vec::with_capacity(LEAF_CAP)
    }

    fn new_inner() -> Vec<Child> {
        Vec::with_capacity(INNER_CAP + 1)
    }

    /// Members below this node.
    fn count(&self) -> usize {
        match self {
            Node::Leaf(keys) => keys.len(),
            Node::Inner(children) => children.iter().map(|c| c.count).sum(),
        }
    }

    /// Entries of this node itself (members or children).
    fn width(&self) -> usize {
        match self {
            Node::Leaf(keys) => keys.len(),
            Node::Inner(children) => children.len(),
        }
    }

    fn is_small(&self) -> bool {
        match self {
            Node::Leaf(keys) => keys.len() < LEAF_MIN,
            Node::Inner(children) => children.len() < INNER_MIN,
        }
    }

    /// The largest key (the node is not empty).
    fn last(&self) -> Key {
        match self {
            Node::Leaf(keys) => keys[keys.len() - 1],
            Node::Inner(children) => children[children.len() - 1].max,
        }
    }
}

/// Nodes allocated, for O(1) heap accounting.
#[derive(Default)]
struct NodeCounts {
    leaves: usize,
    inners: usize,
}

impl NodeCounts {
    fn dropped(&mut self, node: &Node) {
        match node {
            Node::Leaf(_) => self.leaves -= 1,
            Node::Inner(_) => self.inners -= 1,
        }
    }
}

/// A big sorted set (see the module docs).
pub struct ZTree {
    root: Node,
    slots: Vec<Member>,
    index: HashTable<u32>,
    hasher: ahash::RandomState,
    nodes: NodeCounts,
    /// Heap bytes of the member blocks, kept so `heap_bytes` is O(1).
    member_heap_bytes: usize,
    /// Nodes detached by `free_some`, freed a few per call.
    dying: Vec<Node>,
    /// True once `free_some` has detached the order and index.
    detached: bool,
}

// SAFETY: a ZTree uniquely owns its member blocks, like a Vec<Box<[u8]>>.
unsafe impl Send for ZTree {}

impl Default for ZTree {
    fn default() -> Self {
        ZTree::new()
    }
}

// ---- node operations (free functions over one subtree) -----------------------

/// Insert `m` (sorting as (`score`, `member`)) below `node`; the new right
/// sibling when the node split.
fn insert_in(
    node: &mut Node,
    m: Member,
    score: f64,
    member: &[u8],
    nodes: &mut NodeCounts,
) -> Option<Node> {
    match node {
        Node::Leaf(keys) => {
            let pos = keys.partition_point(|k| k.before(score, member));
            let key = Key { score, member: m };
            if keys.len() == keys.capacity() && keys.len() < LEAF_CAP {
                // Only a root leaf starts small (a skiplist of one long member
                // stays small): it doubles up to a full leaf before any split.
                let grown = (keys.capacity() * 2).clamp(ROOT_LEAF_MIN, LEAF_CAP);
                keys.reserve_exact(grown - keys.len());
            }
            if keys.len() < LEAF_CAP {
                keys.insert(pos, key);
                return None;
            }
            // An append splits off a leaf of one: score-ordered loads stay full.
            let at = if pos == keys.len() { pos } else { LEAF_CAP / 2 };
            let mut right = Node::new_leaf();
            right.extend(keys.drain(at..));
            if pos < at {
                keys.insert(pos, key);
            } else {
                right.insert(pos - at, key);
            }
            nodes.leaves += 1;
            Some(Node::Leaf(right))
        }
        Node::Inner(children) => {
            let last = children.len() - 1;
            let i = children[..last].partition_point(|c| c.max.before(score, member));
            if spill(children, i, Key { score, member: m }, member) {
                return None;
            }
            let split = insert_in(&mut children[i].node, m, score, member, nodes);
            match split {
                None => {
                    let c = &mut children[i];
                    c.count += 1;
                    if c.max.before(score, member) {
                        c.max = Key { score, member: m };
                    }
                    None
                }
                Some(right) => {
                    children[i].refresh();
                    children.insert(i + 1, Child::of(right));
                    if children.len() <= INNER_CAP {
                        return None;
                    }
                    let at = if i + 1 == last + 1 {
                        INNER_CAP
                    } else {
                        INNER_CAP / 2
                    };
                    let mut right = Node::new_inner();
                    right.extend(children.drain(at..));
                    nodes.inners += 1;
                    Some(Node::Inner(right))
                }
            }
        }
    }
}

/// Insert `key` into child `i`, a full leaf, by moving one key of it to a
/// neighbour leaf with room instead of splitting (B*-tree style): random-order
/// loads then fill leaves to ~80% instead of ~70%. False when it does not apply
/// (not a full leaf, an append to the last leaf, or no neighbour with room).
fn spill(children: &mut [Child], i: usize, key: Key, member: &[u8]) -> bool {
    let Node::Leaf(keys) = &children[i].node else {
        return false;
    };
    if keys.len() < LEAF_CAP {
        return false;
    }
    let pos = keys.partition_point(|k| k.before(key.score, member));
    if pos == keys.len() {
        return false;
    }
    if i + 1 < children.len() && children[i + 1].node.width() < LEAF_CAP {
        let (a, b) = children.split_at_mut(i + 1);
        let (Node::Leaf(keys), Node::Leaf(next)) = (&mut a[i].node, &mut b[0].node) else {
            return false;
        };
        if let Some(moved) = keys.pop() {
            next.insert(0, moved);
        }
        keys.insert(pos, key);
        a[i].max = keys[keys.len() - 1];
        b[0].count += 1;
        return true;
    }
    if i > 0 && children[i - 1].node.width() < LEAF_CAP {
        let (a, b) = children.split_at_mut(i);
        let (Node::Leaf(prev), Node::Leaf(keys)) = (&mut a[i - 1].node, &mut b[0].node) else {
            return false;
        };
        if pos == 0 {
            prev.push(key);
        } else {
            prev.push(keys.remove(0));
            keys.insert(pos - 1, key);
        }
        a[i - 1].max = prev[prev.len() - 1];
        a[i - 1].count += 1;
        return true;
    }
    false
}

/// Remove ranks `lo..hi` (relative to `node`), pushing the removed handles.
fn remove_in(
    node: &mut Node,
    lo: usize,
    hi: usize,
    gone: &mut Vec<Member>,
    nodes: &mut NodeCounts,
) {
    match node {
        Node::Leaf(keys) => gone.extend(keys.drain(lo..hi).map(|k| k.member)),
        Node::Inner(children) => {
            let (mut base, mut i) = (0, 0);
            let mut touched = SmallVec::<[usize; 2]>::new();
            while i < children.len() && base < hi {
                let count = children[i].count;
                let (a, b) = (lo.max(base), hi.min(base + count));
                if a == base && b == base + count {
                    let child = children.remove(i);
                    drop_subtree(child.node, gone, nodes);
                    base += count;
                    continue;
                }
                if a < b {
                    remove_in(&mut children[i].node, a - base, b - base, gone, nodes);
                    children[i].count -= b - a;
                    children[i].max = children[i].node.last();
                    touched.push(i);
                }
                base += count;
                i += 1;
            }
            // Partly emptied children sit at the ends of the cut; fix the right
            // one first so the left one's index stays valid.
            for &i in touched.iter().rev() {
                fix_child(children, i, nodes);
            }
        }
    }
}

/// Merge child `i` into a neighbour when it is small and one has room.
fn fix_child(children: &mut Vec<Child>, i: usize, nodes: &mut NodeCounts) {
    if i >= children.len() || !children[i].node.is_small() {
        return;
    }
    let cap = match children[i].node {
        Node::Leaf(_) => LEAF_CAP,
        Node::Inner(_) => INNER_CAP,
    };
    let width = children[i].node.width();
    let (left, right) = if i + 1 < children.len() && children[i + 1].node.width() + width <= cap {
        (i, i + 1)
    } else if i > 0 && children[i - 1].node.width() + width <= cap {
        (i - 1, i)
    } else {
        return;
    };
    let gone = children.remove(right);
    nodes.dropped(&gone.node);
    match (&mut children[left].node, gone.node) {
        (Node::Leaf(a), Node::Leaf(mut b)) => a.append(&mut b),
        (Node::Inner(a), Node::Inner(mut b)) => a.append(&mut b),
        // Siblings are always of one kind (every leaf is at the same depth).
        (_, other) => drop(other),
    }
    children[left].count += gone.count;
    children[left].max = gone.max;
}

/// Push every handle below `node` to `gone` and free the nodes.
fn drop_subtree(node: Node, gone: &mut Vec<Member>, nodes: &mut NodeCounts) {
    nodes.dropped(&node);
    match node {
        Node::Leaf(keys) => gone.extend(keys.iter().map(|k| k.member)),
        Node::Inner(children) => {
            for c in children {
                drop_subtree(c.node, gone, nodes);
            }
        }
    }
}

// ---- the tree -------------------------------------------------------------------

impl ZTree {
    /// An empty tree.
    pub fn new() -> ZTree {
        ZTree {
            root: Node::Leaf(Vec::new()),
            slots: Vec::new(),
            index: HashTable::new(),
            hasher: ahash::RandomState::new(),
            nodes: NodeCounts {
                leaves: 1,
                inners: 0,
            },
            member_heap_bytes: 0,
            dying: Vec::new(),
            detached: false,
        }
    }

    /// A tree of `entries`, already in order and distinct: full leaves, built
    /// bottom-up in O(n).
    pub fn from_sorted<'a>(entries: impl IntoIterator<Item = (&'a [u8], f64)>) -> ZTree {
        let mut tree = ZTree::new();
        let entries = entries.into_iter();
        let hint = entries.size_hint().0;
        tree.slots.reserve_exact(hint);
        let (slots, hasher) = (&tree.slots, &tree.hasher);
        tree.index
            .reserve(hint, |&s| hasher.hash_one(slots[s as usize].bytes()));
        let mut level: Vec<Node> = Vec::new();
        let mut leaf = Node::new_leaf();
        for (member, score) in entries {
            let m = tree.adopt(member, score);
            if leaf.len() == LEAF_CAP {
                level.push(Node::Leaf(std::mem::replace(&mut leaf, Node::new_leaf())));
            }
            leaf.push(Key { score, member: m });
        }
        if level.is_empty() {
            // A root leaf may be small (see `insert_in`).
            leaf.shrink_to_fit();
        }
        level.push(Node::Leaf(leaf));
        let mut counts = NodeCounts {
            leaves: level.len(),
            inners: 0,
        };
        while level.len() > 1 {
            let mut up = Vec::with_capacity(level.len().div_ceil(INNER_CAP));
            let mut inner = Node::new_inner();
            for node in level {
                if inner.len() == INNER_CAP {
                    up.push(Node::Inner(std::mem::replace(
                        &mut inner,
                        Node::new_inner(),
                    )));
                }
                inner.push(Child::of(node));
            }
            up.push(Node::Inner(inner));
            counts.inners += up.len();
            level = up;
        }
        tree.root = level.pop().unwrap_or(Node::Leaf(Node::new_leaf()));
        tree.nodes = counts;
        tree
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True with no member.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Heap bytes: the tree box, nodes, slots, index and member blocks, as glibc
    /// chunks; O(1).
    pub fn heap_bytes(&self) -> usize {
        let vec_bytes = |bytes: usize| {
            if bytes == 0 {
                0
            } else {
                malloc_chunk_bytes(bytes)
            }
        };
        let leaf = malloc_chunk_bytes(LEAF_CAP * std::mem::size_of::<Key>());
        let inner = malloc_chunk_bytes((INNER_CAP + 1) * std::mem::size_of::<Child>());
        // Every leaf is full-size but a root leaf, which grows (see `insert_in`).
        let leaves = match &self.root {
            Node::Leaf(keys) => {
                vec_bytes(keys.capacity() * std::mem::size_of::<Key>())
                    + (self.nodes.leaves - 1) * leaf
            }
            Node::Inner(_) => self.nodes.leaves * leaf,
        };
        malloc_chunk_bytes(std::mem::size_of::<ZTree>())
            + leaves
            + self.nodes.inners * inner
            + vec_bytes(self.slots.capacity() * std::mem::size_of::<Member>())
            + vec_bytes(self.dying.capacity() * std::mem::size_of::<Node>())
            + self.index.allocation_size()
            + self.member_heap_bytes
    }

    /// Allocate a member block and enter it in the slots and index.
    fn adopt(&mut self, member: &[u8], score: f64) -> Member {
        debug_assert!(self.slots.len() < TREE_MEMBERS_MAX);
        let m = Member::new(member, score);
        self.member_heap_bytes += m.chunk_bytes();
        let hash = self.hasher.hash_one(member);
        let slot = self.slots.len() as u32;
        let (slots, hasher) = (&self.slots, &self.hasher);
        self.index
            .insert_unique(hash, slot, |&s| hasher.hash_one(slots[s as usize].bytes()));
        self.slots.push(m);
        m
    }

    /// Take `m` out of the slots and index and free its block.
    fn release(&mut self, m: Member) {
        let hash = self.hasher.hash_one(m.bytes());
        let slots = &self.slots;
        let Ok(entry) = self.index.find_entry(hash, |&s| slots[s as usize] == m) else {
            return;
        };
        let (at, _) = entry.remove();
        let at = at as usize;
        let last = self.slots.len() - 1;
        if at != last {
            let moved = self.slots[last];
            let hash = self.hasher.hash_one(moved.bytes());
            if let Some(s) = self.index.find_mut(hash, |&s| s as usize == last) {
                *s = at as u32;
            }
        }
        self.slots.swap_remove(at);
        self.member_heap_bytes -= m.chunk_bytes();
        // SAFETY: `m` has left the tree (the caller cut it out), the index and
        // the slots.
        unsafe { m.free() };
    }

    fn find(&self, member: &[u8]) -> Option<Member> {
        let hash = self.hasher.hash_one(member);
        self.index
            .find(hash, |&s| self.slots[s as usize].bytes() == member)
            .map(|&s| self.slots[s as usize])
    }

    /// The score of `member`.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.find(member).map(|m| m.score())
    }

    /// How many leading members satisfy `before` (which must hold for a prefix of
    /// the order and fail after it): a lower bound, O(log n).
    pub fn count_while(&self, before: impl Fn(&[u8], f64) -> bool) -> usize {
        self.count_by(
            |c| before(c.max.member.bytes(), c.max.score),
            |k| before(k.member.bytes(), k.score),
        )
    }

    /// [`count_while`](Self::count_while) for a predicate on the score alone:
    /// inner nodes answer from their cached scores, with no member read.
    pub fn count_score_while(&self, before: impl Fn(f64) -> bool) -> usize {
        self.count_by(|c| before(c.max.score), |k| before(k.score))
    }

    /// The lower bound where `child_before` / `key_before` turn false.
    fn count_by(
        &self,
        child_before: impl Fn(&Child) -> bool,
        key_before: impl Fn(&Key) -> bool,
    ) -> usize {
        let mut node = &self.root;
        let mut count = 0;
        loop {
            match node {
                Node::Leaf(keys) => return count + keys.partition_point(&key_before),
                Node::Inner(children) => {
                    let i = children.partition_point(&child_before);
                    count += children[..i].iter().map(|c| c.count).sum::<usize>();
                    match children.get(i) {
                        Some(c) => node = &c.node,
                        None => return count,
                    }
                }
            }
        }
    }

    /// The 0-based rank of a member with `score`.
    pub fn rank(&self, member: &[u8], score: f64) -> usize {
        self.count_by(|c| c.max.before(score, member), |k| k.before(score, member))
    }

    /// Insert a member known to be absent.
    pub fn insert(&mut self, member: &[u8], score: f64) {
        let m = self.adopt(member, score);
        self.place(m, score, member);
        undo::record_inverse(|arena| Inverse::ZRemove(Kept::of(arena, member)));
    }

    /// Put the live handle `m` into the order.
    fn place(&mut self, m: Member, score: f64, member: &[u8]) {
        if let Some(right) = insert_in(&mut self.root, m, score, member, &mut self.nodes) {
            let left = std::mem::replace(&mut self.root, Node::Inner(Node::new_inner()));
            if let Node::Inner(children) = &mut self.root {
                children.push(Child::of(left));
                children.push(Child::of(right));
            }
            self.nodes.inners += 1;
        }
    }

    /// Cut ranks `lo..hi` out of the order; the handles, still allocated.
    fn cut(&mut self, lo: usize, hi: usize) -> Vec<Member> {
        let mut gone = Vec::with_capacity(hi - lo);
        remove_in(&mut self.root, lo, hi, &mut gone, &mut self.nodes);
        // A root with one child gives way to it; an emptied inner root to a leaf.
        while let Node::Inner(children) = &mut self.root {
            if children.len() > 1 {
                break;
            }
            let next = match children.pop() {
                Some(only) => only.node,
                None => {
                    self.nodes.leaves += 1;
                    Node::Leaf(Vec::new())
                }
            };
            self.nodes.inners -= 1;
            self.root = next;
        }
        gone
    }

    /// Change the score of a present member; false when absent.
    pub fn update(&mut self, member: &[u8], score: f64) -> bool {
        let Some(m) = self.find(member) else {
            return false;
        };
        undo::record_inverse(|arena| Inverse::ZScore {
            member: Kept::of(arena, member),
            score: m.score(),
        });
        let rank = self.rank(member, m.score());
        self.cut(rank, rank + 1);
        m.set_score(score);
        self.place(m, score, member);
        true
    }

    /// Remove `member`; its score if it was there.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let m = self.find(member)?;
        let score = m.score();
        let rank = self.rank(member, score);
        self.remove_ranks(rank, rank + 1);
        Some(score)
    }

    /// Remove the members of ranks `lo..hi`.
    pub fn remove_ranks(&mut self, lo: usize, hi: usize) {
        let hi = hi.min(self.len());
        if lo >= hi {
            return;
        }
        if undo::inverses_wanted() {
            for (member, score) in self.iter_at(lo, false).take(hi - lo) {
                undo::record_inverse(|arena| Inverse::ZInsert {
                    member: Kept::of(arena, member),
                    score,
                });
            }
        }
        for m in self.cut(lo, hi) {
            self.release(m);
        }
    }

    /// Reverse one change (the undo journal's roll-back); safe whether or not
    /// the change went through.
    pub(crate) fn reverse(&mut self, inverse: Inverse, arena: &[u8]) {
        match inverse {
            Inverse::ZRemove(member) => drop(self.remove(member.get(arena))),
            Inverse::ZInsert { member, score } | Inverse::ZScore { member, score } => {
                let member = member.get(arena);
                if !self.update(member, score) {
                    self.insert(member, score);
                }
            }
            other => unreachable!("{other:?} recorded for a sorted set"),
        }
    }

    /// Members from ascending rank `at` on, upwards or (`rev`) downwards.
    pub fn iter_at(&self, at: usize, rev: bool) -> TreeIter<'_> {
        let mut it = TreeIter {
            path: SmallVec::new(),
            leaf: &[],
            pos: 0,
            left: 0,
            rev,
        };
        if at >= self.len() {
            return it;
        }
        it.left = if rev { at + 1 } else { self.len() - at };
        let mut k = at;
        let mut node = &self.root;
        loop {
            match node {
                Node::Leaf(keys) => {
                    it.leaf = keys;
                    it.pos = k;
                    return it;
                }
                Node::Inner(children) => {
                    let mut i = 0;
                    while k >= children[i].count {
                        k -= children[i].count;
                        i += 1;
                    }
                    it.path.push((&children[..], i));
                    node = &children[i].node;
                }
            }
        }
    }

    /// One ZSCAN step: calls `f` for the members of up to `count` slots below
    /// `cursor` (0 starts at the top) and returns the next cursor, 0 at the end.
    pub fn scan<'a>(&'a self, cursor: u64, count: usize, mut f: impl FnMut(&'a [u8], f64)) -> u64 {
        let len = self.len();
        let start = match usize::try_from(cursor) {
            Ok(0) | Err(_) => len,
            Ok(c) => c.min(len),
        };
        let stop = start.saturating_sub(count.max(1));
        for m in self.slots[stop..start].iter().rev() {
            f(m.bytes(), m.score());
        }
        stop as u64
    }

    /// An independent copy.
    pub fn deep_clone(&self) -> ZTree {
        ZTree::from_sorted(self.iter_at(0, false))
    }

    /// Free up to `nodes_max` members and nodes of a tree about to be dropped
    /// (lazy free): the order and index go first, so what is left stays a valid
    /// empty set. True when nothing is left to free.
    pub fn free_some(&mut self, nodes_max: usize) -> bool {
        if !self.detached {
            self.detached = true;
            self.index = HashTable::new();
            // The new root leaf owns nothing but is counted like any root.
            let root = std::mem::replace(&mut self.root, Node::Leaf(Vec::new()));
            self.nodes.leaves += 1;
            self.dying.push(root);
        }
        let keep = self.slots.len().saturating_sub(nodes_max);
        for m in self.slots.drain(keep..) {
            self.member_heap_bytes -= m.chunk_bytes();
            // SAFETY: the order and index are gone; the slot was the last holder.
            unsafe { m.free() };
        }
        for _ in 0..nodes_max {
            let Some(node) = self.dying.pop() else {
                break;
            };
            self.nodes.dropped(&node);
            if let Node::Inner(children) = node {
                self.dying.extend(children.into_iter().map(|c| c.node));
            }
        }
        let done = self.slots.is_empty() && self.dying.is_empty();
        if done {
            self.dying = Vec::new();
            self.slots = Vec::new();
        }
        done
    }

    /// Check counts, maxes, order, node accounting, slots and index (tests).
    #[cfg(test)]
    pub fn check_invariants(&self) {
        fn walk(node: &Node, depth: usize, leaf_depth: &mut Option<usize>, n: &mut NodeCounts) {
            match node {
                Node::Leaf(keys) => {
                    n.leaves += 1;
                    if depth > 0 {
                        assert_eq!(keys.capacity(), LEAF_CAP);
                    }
                    for k in keys {
                        assert_eq!(k.score.to_bits(), k.member.score().to_bits());
                    }
                    assert!(keys.len() <= LEAF_CAP);
                    assert_eq!(*leaf_depth.get_or_insert(depth), depth);
                }
                Node::Inner(children) => {
                    n.inners += 1;
                    assert_eq!(children.capacity(), INNER_CAP + 1);
                    assert!(!children.is_empty() && children.len() <= INNER_CAP);
                    for c in children {
                        assert!(c.node.width() > 0, "empty child");
                        assert_eq!(c.count, c.node.count());
                        let last = c.node.last();
                        assert!(c.max.member == last.member);
                        assert_eq!(c.max.score.to_bits(), last.score.to_bits());
                        walk(&c.node, depth + 1, leaf_depth, n);
                    }
                }
            }
        }
        let mut n = NodeCounts::default();
        walk(&self.root, 0, &mut None, &mut n);
        assert_eq!((n.leaves, n.inners), (self.nodes.leaves, self.nodes.inners));
        assert_eq!(self.root.count(), self.len());
        let all: Vec<_> = self.iter_at(0, false).collect();
        assert_eq!(all.len(), self.len());
        for w in all.windows(2) {
            assert!(super::packed::less(w[0].1, w[0].0, w[1].1, w[1].0));
        }
        assert_eq!(self.index.len(), self.len());
        for (at, m) in self.slots.iter().enumerate() {
            let found = self.find(m.bytes()).expect("indexed");
            assert!(found == *m);
            let hash = self.hasher.hash_one(m.bytes());
            assert_eq!(
                self.index.find(hash, |&s| s as usize == at).copied(),
                Some(at as u32)
            );
        }
        let blocks: usize = self.slots.iter().map(Member::chunk_bytes).sum();
        assert_eq!(blocks, self.member_heap_bytes);
    }
}

impl Drop for ZTree {
    fn drop(&mut self) {
        for m in self.slots.drain(..) {
            // SAFETY: the tree is going away; each block is held once in slots.
            unsafe { m.free() };
        }
    }
}

/// Members of a tree from one rank, one way, as (member, score): a path of
/// (children, index) from the root and a position in the current leaf, so each
/// step is O(1) amortized.
pub struct TreeIter<'a> {
    path: SmallVec<[(&'a [Child], usize); DEPTH_INLINE]>,
    leaf: &'a [Key],
    pos: usize,
    left: usize,
    rev: bool,
}

impl<'a> TreeIter<'a> {
    /// Move to the next leaf in the direction of travel.
    fn next_leaf(&mut self) {
        let mut depth = self.path.len();
        while depth > 0 {
            let (children, i) = self.path[depth - 1];
            let next = if self.rev {
                i.checked_sub(1)
            } else {
                Some(i + 1)
            };
            if let Some(j) = next.filter(|&j| j < children.len()) {
                self.path[depth - 1].1 = j;
                let mut node = &children[j].node;
                self.path.truncate(depth);
                loop {
                    match node {
                        Node::Leaf(keys) => {
                            self.leaf = keys;
                            self.pos = if self.rev { keys.len() - 1 } else { 0 };
                            return;
                        }
                        Node::Inner(cs) => {
                            let k = if self.rev { cs.len() - 1 } else { 0 };
                            self.path.push((&cs[..], k));
                            node = &cs[k].node;
                        }
                    }
                }
            }
            depth -= 1;
        }
    }
}

impl<'a> Iterator for TreeIter<'a> {
    type Item = (&'a [u8], f64);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let leaf: &'a [Key] = self.leaf;
        let k = &leaf[self.pos];
        if self.left > 0 {
            let at_end = if self.rev {
                self.pos == 0
            } else {
                self.pos + 1 == leaf.len()
            };
            if at_end {
                self.next_leaf();
            } else if self.rev {
                self.pos -= 1;
            } else {
                self.pos += 1;
            }
        }
        Some((k.member.bytes(), k.score))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for TreeIter<'_> {}
