//! `ZTree`: a big sorted set (OBJECT ENCODING `skiplist`), an order-statistic
//! treap in one arena plus a member index.
//!
//! Why a treap and not Redis's skip list: it gives the same O(log n) insert,
//! delete, rank (ZRANK) and select by rank (ZRANGE offsets) with every node the
//! same size in one `Vec` (no pointer per level, u32 links), and its split/merge
//! make range removal (ZREMRANGEBY*, ZPOPMIN n) one cut instead of n deletions.
//! Priorities come from a private xorshift stream, independent of the data, so no
//! input sequence can unbalance it. See docs/zsets.md for the costs.
//!
//! - `nodes`: the arena; a node is (score, member, left, right, subtree size,
//!   priority), 40 bytes. Freed slots go on `free` and are reused.
//! - `index`: a `hashbrown::HashTable<u32>` of node slots keyed by the member's
//!   hash, so ZSCORE and the "is it there" check of ZADD are O(1) and the member
//!   bytes are stored once (in the node).

use hashbrown::HashTable;

use super::packed::less;
use crate::keyspace::malloc_chunk_bytes;

/// "No node".
const NIL: u32 = u32::MAX;

/// Most members a tree holds: slots are u32 and NIL is reserved. Far above what a
/// shard's memory holds (4 G nodes of 40 bytes).
pub const TREE_MEMBERS_MAX: usize = (u32::MAX - 1) as usize;

struct Node {
    score: f64,
    member: Box<[u8]>,
    left: u32,
    right: u32,
    size: u32,
    prio: u32,
}

const NODE_BYTES: usize = std::mem::size_of::<Node>();
const _: () = assert!(NODE_BYTES == 40);

/// A big sorted set (see the module docs).
pub struct ZTree {
    nodes: Vec<Node>,
    free: Vec<u32>,
    root: u32,
    index: HashTable<u32>,
    hasher: ahash::RandomState,
    rng: u32,
    /// Heap bytes of the members' boxes, kept so `heap_bytes` is O(1).
    member_heap_bytes: usize,
}

impl Default for ZTree {
    fn default() -> Self {
        ZTree::new()
    }
}

impl ZTree {
    /// An empty tree.
    pub fn new() -> ZTree {
        let hasher = ahash::RandomState::new();
        let seed = hasher.hash_one(0x0005_a5e7_u32) as u32;
        ZTree {
            nodes: Vec::new(),
            free: Vec::new(),
            root: NIL,
            index: HashTable::new(),
            hasher,
            rng: seed | 1,
            member_heap_bytes: 0,
        }
    }

    fn size(&self, t: u32) -> usize {
        if t == NIL {
            0
        } else {
            self.nodes[t as usize].size as usize
        }
    }

    fn fix(&mut self, t: u32) {
        let n = &self.nodes[t as usize];
        let size = 1 + self.size(n.left) + self.size(n.right);
        self.nodes[t as usize].size = size as u32;
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.size(self.root)
    }

    /// True with no member.
    pub fn is_empty(&self) -> bool {
        self.root == NIL
    }

    /// Heap bytes: the tree box, the arena, the free list, the index and the
    /// members, as glibc chunks; O(1).
    pub fn heap_bytes(&self) -> usize {
        let vec_bytes = |bytes: usize| {
            if bytes == 0 {
                0
            } else {
                malloc_chunk_bytes(bytes)
            }
        };
        let buckets = if self.index.capacity() == 0 {
            0
        } else {
            (self.index.capacity() * 8 / 7).next_power_of_two()
        };
        malloc_chunk_bytes(std::mem::size_of::<ZTree>())
            + vec_bytes(self.nodes.capacity() * NODE_BYTES)
            + vec_bytes(self.free.capacity() * 4)
            + vec_bytes(if buckets == 0 { 0 } else { buckets * 5 + 16 })
            + self.member_heap_bytes
    }

    fn next_prio(&mut self) -> u32 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 17;
        self.rng ^= self.rng << 5;
        self.rng
    }

    /// Split `t` into its first `k` nodes and the rest.
    fn split(&mut self, t: u32, k: usize) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        let left = self.nodes[t as usize].left;
        let left_size = self.size(left);
        if k <= left_size {
            let (a, b) = self.split(left, k);
            self.nodes[t as usize].left = b;
            self.fix(t);
            (a, t)
        } else {
            let right = self.nodes[t as usize].right;
            let (a, b) = self.split(right, k - left_size - 1);
            self.nodes[t as usize].right = a;
            self.fix(t);
            (t, b)
        }
    }

    /// Join `a` and `b` (every node of `a` before every node of `b`).
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if self.nodes[a as usize].prio > self.nodes[b as usize].prio {
            let r = self.nodes[a as usize].right;
            let m = self.merge(r, b);
            self.nodes[a as usize].right = m;
            self.fix(a);
            a
        } else {
            let l = self.nodes[b as usize].left;
            let m = self.merge(a, l);
            self.nodes[b as usize].left = m;
            self.fix(b);
            b
        }
    }

    /// How many leading members satisfy `before` (which must hold for a prefix of
    /// the order and fail after it): a lower bound, O(log n).
    pub fn count_while(&self, before: impl Fn(&[u8], f64) -> bool) -> usize {
        let mut t = self.root;
        let mut count = 0;
        while t != NIL {
            let n = &self.nodes[t as usize];
            if before(&n.member, n.score) {
                count += self.size(n.left) + 1;
                t = n.right;
            } else {
                t = n.left;
            }
        }
        count
    }

    fn slot_of(&self, member: &[u8]) -> Option<u32> {
        let hash = self.hasher.hash_one(member);
        self.index
            .find(hash, |&slot| &*self.nodes[slot as usize].member == member)
            .copied()
    }

    /// The score of `member`.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.slot_of(member).map(|s| self.nodes[s as usize].score)
    }

    /// The 0-based rank of a member with `score`.
    pub fn rank(&self, member: &[u8], score: f64) -> usize {
        self.count_while(|m, s| less(s, m, score, member))
    }

    /// Member and score at rank `k` (< len).
    pub fn select(&self, mut k: usize) -> (&[u8], f64) {
        let mut t = self.root;
        loop {
            let n = &self.nodes[t as usize];
            let left = self.size(n.left);
            if k < left {
                t = n.left;
            } else if k == left {
                return (&n.member, n.score);
            } else {
                k -= left + 1;
                t = n.right;
            }
        }
    }

    /// Insert a member known to be absent.
    pub fn insert(&mut self, member: &[u8], score: f64) {
        debug_assert!(self.len() < TREE_MEMBERS_MAX);
        let rank = self.rank(member, score);
        let prio = self.next_prio();
        let node = Node {
            score,
            member: member.into(),
            left: NIL,
            right: NIL,
            size: 1,
            prio,
        };
        if !member.is_empty() {
            self.member_heap_bytes += malloc_chunk_bytes(member.len());
        }
        let slot = match self.free.pop() {
            Some(s) => {
                self.nodes[s as usize] = node;
                s
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        let hash = self.hasher.hash_one(member);
        let (nodes, hasher) = (&self.nodes, &self.hasher);
        self.index
            .insert_unique(hash, slot, |&s| hasher.hash_one(&*nodes[s as usize].member));
        let (a, b) = self.split(self.root, rank);
        let a = self.merge(a, slot);
        self.root = self.merge(a, b);
    }

    /// Forget node `slot` (already cut out of the tree): index, member, slot.
    fn release(&mut self, slot: u32) {
        let member = std::mem::take(&mut self.nodes[slot as usize].member);
        let hash = self.hasher.hash_one(&*member);
        if let Ok(entry) = self.index.find_entry(hash, |&s| s == slot) {
            entry.remove();
        }
        if !member.is_empty() {
            self.member_heap_bytes -= malloc_chunk_bytes(member.len());
        }
        self.free.push(slot);
    }

    /// Remove `member`; its score if it was there.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let slot = self.slot_of(member)?;
        let score = self.nodes[slot as usize].score;
        let rank = self.rank(member, score);
        self.remove_ranks(rank, rank + 1);
        Some(score)
    }

    /// Remove the members of ranks `lo..hi`.
    pub fn remove_ranks(&mut self, lo: usize, hi: usize) {
        if lo >= hi {
            return;
        }
        let (a, rest) = self.split(self.root, lo);
        let (mid, c) = self.split(rest, hi - lo);
        self.root = self.merge(a, c);
        let mut stack = vec![mid];
        while let Some(t) = stack.pop() {
            if t == NIL {
                continue;
            }
            stack.push(self.nodes[t as usize].left);
            stack.push(self.nodes[t as usize].right);
            self.release(t);
        }
        if self.root == NIL {
            self.nodes.clear();
            self.free.clear();
        }
    }

    /// An independent copy.
    pub fn deep_clone(&self) -> ZTree {
        let mut copy = ZTree::new();
        for k in 0..self.len() {
            let (m, s) = self.select(k);
            copy.insert(m, s);
        }
        copy
    }

    /// Free up to `nodes_max` members of a tree about to be dropped (lazy free):
    /// the tree is emptied first, so what is left stays a valid empty set. True
    /// when nothing is left to free.
    pub fn free_some(&mut self, nodes_max: usize) -> bool {
        self.root = NIL;
        self.index = HashTable::new();
        self.free = Vec::new();
        let keep = self.nodes.len().saturating_sub(nodes_max);
        self.nodes.truncate(keep);
        self.member_heap_bytes = self
            .nodes
            .iter()
            .filter(|n| !n.member.is_empty())
            .map(|n| malloc_chunk_bytes(n.member.len()))
            .sum();
        self.nodes.is_empty()
    }

    /// Check sizes, order and the index (tests).
    #[cfg(test)]
    pub fn check_invariants(&self) {
        fn walk(t: &ZTree, n: u32) -> usize {
            if n == NIL {
                return 0;
            }
            let node = &t.nodes[n as usize];
            let size = 1 + walk(t, node.left) + walk(t, node.right);
            assert_eq!(size, node.size as usize);
            size
        }
        walk(self, self.root);
        for k in 1..self.len() {
            let (m0, s0) = self.select(k - 1);
            let (m1, s1) = self.select(k);
            assert!(less(s0, m0, s1, m1));
        }
        assert_eq!(self.index.len(), self.len());
    }
}
