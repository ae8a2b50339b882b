//! A replication history as a value: an ID, an offset, and the backlog with its
//! replicas and full syncs ([`Primary`]), together with the shards whose
//! records make it.
//!
//! Why a value: in forward mode the server is one Redis node and has one
//! history, made by every shard (`State`'s own `primary`, offset and IDs); in
//! per-shard mode each shard is a Redis Cluster node on its own port, so each
//! shard is a primary of its own, with its own replid, offset, backlog, replicas,
//! WAIT and `min-replicas-to-write` ([`Node`], one per shard). The code that
//! records, cuts, serves and answers (`shard::primary`, `cmd::replication`,
//! ROLE, INFO) takes a [`History`] and does not know which of the two it is.

use super::primary::Primary;
use super::state::{new_replid, State, NO_REPLID};
use crate::config::PortMode;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Mutex, MutexGuard};

/// One shard's own history (per-shard mode: the shard is a node of its own).
#[derive(Debug)]
pub struct Node {
    pub primary: Primary,
    /// `master_repl_offset` of the node.
    offset: AtomicU64,
    replid: Mutex<String>,
    /// `min-replicas-to-write` is not met on this node.
    writes_refused: AtomicBool,
}

impl Default for Node {
    fn default() -> Node {
        Node {
            primary: Primary::default(),
            offset: AtomicU64::new(0),
            replid: Mutex::new(new_replid()),
            writes_refused: AtomicBool::new(false),
        }
    }
}

impl Node {
    fn replid(&self) -> MutexGuard<'_, String> {
        self.replid.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The IDs INFO and PSYNC compare: `master_replid`, `master_replid2` and
/// `second_repl_offset`.
#[derive(Clone, Debug)]
pub struct HistoryIds {
    pub replid: String,
    pub replid2: String,
    pub second_offset: i64,
}

/// A history: the server's (forward mode) or one shard node's (per-shard mode).
#[derive(Clone, Copy)]
pub struct History<'a> {
    state: &'a State,
    /// `None`: the server-wide history (the IDs are `State`'s).
    node: Option<&'a Node>,
    pub primary: &'a Primary,
    offset: &'a AtomicU64,
    /// The shards whose records it takes: `first..first + count`, each one's
    /// part of a full sync at its index from `first`.
    pub first: usize,
    pub count: usize,
}

impl State {
    /// The history shard `shard` records into and serves replicas from.
    #[inline]
    pub fn history(&self, shard: usize, mode: PortMode) -> History<'_> {
        match mode {
            PortMode::Forward => History {
                state: self,
                node: None,
                primary: &self.primary,
                offset: self.offset_counter(),
                first: 0,
                count: self.nodes.len(),
            },
            PortMode::PerShard => self.node_history(shard),
        }
    }

    /// Shard `shard`'s own history: the node's in per-shard mode; in forward
    /// mode the one a Ruvio replica's link for this shard follows (it exists
    /// while such a link does: `REPLCONF ruvio-shard`).
    #[inline]
    pub fn node_history(&self, shard: usize) -> History<'_> {
        let node = &self.nodes[shard];
        History {
            state: self,
            node: Some(node),
            primary: &node.primary,
            offset: &node.offset,
            first: shard,
            count: 1,
        }
    }

    /// The history a replica's connection on shard `shard` follows: the
    /// server's (each node's in per-shard mode), or the shard's own for a Ruvio
    /// replica's shard link (`shard_link`, forward mode).
    pub fn followed(&self, shard: usize, mode: PortMode, shard_link: bool) -> History<'_> {
        match shard_link {
            true => self.node_history(shard),
            false => self.history(shard, mode),
        }
    }

    /// Bytes every backlog holds (not counted against `maxmemory`).
    pub fn backlog_bytes(&self) -> u64 {
        self.primary.backlog_bytes()
            + self
                .nodes
                .iter()
                .map(|n| n.primary.backlog_bytes())
                .sum::<u64>()
    }
}

impl<'a> History<'a> {
    /// `master_repl_offset`.
    pub fn offset(&self) -> u64 {
        self.offset.load(Relaxed)
    }

    /// The offset itself, which the backlog moves under its lock.
    pub fn offset_counter(&self) -> &'a AtomicU64 {
        self.offset
    }

    /// A shard node (per-shard mode), not the whole server.
    pub fn is_node(&self) -> bool {
        self.node.is_some()
    }

    pub fn ids(&self) -> HistoryIds {
        match self.node {
            None => {
                let ids = self.state.ids();
                HistoryIds {
                    replid: ids.replid,
                    replid2: ids.replid2,
                    second_offset: ids.second_offset,
                }
            }
            // A node is never a replica (REPLICAOF is refused in cluster mode),
            // so it has no second ID.
            Some(node) => HistoryIds {
                replid: node.replid().clone(),
                replid2: NO_REPLID.to_string(),
                second_offset: -1,
            },
        }
    }

    /// A new history begins (Redis's changeReplicationId and clearReplicationId2).
    pub fn new_history(&self) {
        match self.node {
            None => self.state.new_history(),
            Some(node) => *node.replid() = new_replid(),
        }
    }

    /// The index of `shard`'s part in a full sync of this history.
    pub fn part_of(&self, shard: usize) -> usize {
        debug_assert!(shard >= self.first && shard < self.first + self.count);
        shard - self.first
    }

    /// Writes are refused for want of replicas (`min-replicas-to-write`).
    pub fn writes_refused(&self) -> bool {
        match self.node {
            None => self.state.writes_refused(),
            Some(node) => node.writes_refused.load(Relaxed),
        }
    }

    /// Judged by the tick. The server-wide flag the request path reads is set
    /// while any node refuses; the node's own flag then decides.
    pub fn set_writes_refused(&self, refused: bool) {
        match self.node {
            None => self.state.set_writes_refused(refused),
            Some(node) => {
                node.writes_refused.store(refused, Relaxed);
                let any = self
                    .state
                    .nodes
                    .iter()
                    .any(|n| n.writes_refused.load(Relaxed));
                self.state.set_writes_refused(any);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forward_mode_has_one_history_per_shard_mode_one_per_node() {
        let state = State::new(3);
        let (a, b) = (
            state.history(0, PortMode::Forward),
            state.history(2, PortMode::Forward),
        );
        assert!(
            std::ptr::eq(a.primary, b.primary),
            "one server-wide history"
        );
        assert_eq!((a.first, a.count, b.part_of(2)), (0, 3, 2));
        assert_eq!(a.ids().replid, state.ids().replid);
        let nodes: Vec<History<'_>> = (0..3)
            .map(|shard| state.history(shard, PortMode::PerShard))
            .collect();
        for (shard, node) in nodes.iter().enumerate() {
            assert!(!std::ptr::eq(node.primary, a.primary));
            assert_eq!((node.first, node.count, node.part_of(shard)), (shard, 1, 0));
            assert_eq!(node.ids().second_offset, -1);
        }
        let replids: std::collections::BTreeSet<String> =
            nodes.iter().map(|n| n.ids().replid).collect();
        assert_eq!(replids.len(), 3, "each node its own replid");
        let before = nodes[0].ids().replid;
        nodes[1].new_history();
        assert_eq!(
            nodes[0].ids().replid,
            before,
            "a node's new history is its own"
        );
        assert_eq!(a.ids().replid, state.ids().replid);
    }

    #[test]
    fn a_node_refusing_writes_refuses_only_its_own() {
        let state = State::new(2);
        let (n0, n1) = (
            state.history(0, PortMode::PerShard),
            state.history(1, PortMode::PerShard),
        );
        n1.set_writes_refused(true);
        // The request path's one flag is up, and the node's own decides.
        assert!(state.writes_refused());
        assert!(n1.writes_refused() && !n0.writes_refused());
        n0.set_writes_refused(false);
        assert!(state.writes_refused(), "node 1 still refuses");
        n1.set_writes_refused(false);
        assert!(!state.writes_refused());
    }
}
