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

use super::link_replicas::{self, LinkedReplica};
use super::primary::{Primary, ReplicaInfo};
use super::state::{new_replid, State, NO_REPLID};
use crate::config::PortMode;
use std::collections::VecDeque;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};
use std::sync::{Mutex, MutexGuard};

/// Server offset marks a shard's own history remembers, for the primary's
/// view of a replica on links ([`History::server_offset_at`]): marks go at
/// most once a tick (10 ms) and links acknowledge once a second, so this
/// covers some 40 s of acknowledgements.
const MARKS_MAX: usize = 4096;

/// One shard's own history (per-shard mode: the shard is a node of its own).
#[derive(Debug)]
pub struct Node {
    pub primary: Primary,
    /// `master_repl_offset` of the node.
    offset: AtomicU64,
    replid: Mutex<String>,
    /// `min-replicas-to-write` is not met on this node.
    writes_refused: AtomicBool,
    /// The master this node replicates (CLUSTER REPLICATE), its client
    /// address; the link's history is the shard's book
    /// (`State::shard_links`).
    master: Mutex<Option<(String, u16)>>,
    /// `master` is set (read where a lock would cost: the offset).
    following: AtomicBool,
    /// The history followed before the last promotion, and the first offset
    /// that is not its (`master_replid2`, `second_repl_offset`).
    replid2: Mutex<String>,
    second_offset: AtomicI64,
    /// Forward mode: the `RUVIO OFFSET` marks in this history's stream,
    /// oldest first: (the offset the record starts after, the server
    /// offset it names).
    marks: Mutex<VecDeque<(u64, u64)>>,
    /// Bumped when this node's own replicas must connect again (a replica
    /// node's link full-synced or took a new ID, or it was promoted): the
    /// server's count drops every replica of the process, this one only the
    /// node's (another shard node of the process may be its master, its
    /// link one of that node's replicas).
    replicas_generation: AtomicU64,
}

impl Default for Node {
    fn default() -> Node {
        Node {
            primary: Primary::default(),
            offset: AtomicU64::new(0),
            replid: Mutex::new(new_replid()),
            writes_refused: AtomicBool::new(false),
            master: Mutex::new(None),
            following: AtomicBool::new(false),
            replid2: Mutex::new(NO_REPLID.to_string()),
            second_offset: AtomicI64::new(-1),
            marks: Mutex::new(VecDeque::new()),
            replicas_generation: AtomicU64::new(0),
        }
    }
}

impl Node {
    fn replid(&self) -> MutexGuard<'_, String> {
        self.replid.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn master(&self) -> MutexGuard<'_, Option<(String, u16)>> {
        self.master.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn marks(&self) -> MutexGuard<'_, VecDeque<(u64, u64)>> {
        self.marks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A mark starting after `at` names `server_offset`.
    fn note_mark(&self, at: u64, server_offset: u64) {
        let mut marks = self.marks();
        if marks.back().is_some_and(|&(last, _)| last > at) {
            // Another history since (a new backlog, a full sync): its marks
            // say nothing of this one's offsets.
            marks.clear();
        }
        if marks.len() == MARKS_MAX {
            marks.pop_front();
        }
        marks.push_back((at, server_offset));
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

/// How the link to a followed master stands.
#[derive(Clone, Copy, Debug)]
pub struct Following {
    pub link: super::state::LinkState,
    /// The stream runs.
    pub up: bool,
    /// The offset applied.
    pub offset: u64,
    /// Unix ms the stream stopped (0: it never ran).
    pub down_since_ms: u64,
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

    /// Forward mode: some shard's own history exists (a Ruvio replica's
    /// link follows it, or did within `repl-backlog-ttl`).
    pub fn shard_histories_active(&self) -> bool {
        self.nodes.iter().any(|n| n.primary.active())
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
        match self.node {
            // A replica node's offset is its link's: what it applied.
            Some(node) if node.following.load(Relaxed) => {
                self.state.shard_links.book(self.first).offset()
            }
            _ => self.offset.load(Relaxed),
        }
    }

    /// The offset INFO and ROLE show: the server's on shard links is its
    /// primary's server offset the links reached (`State::shown_offset`),
    /// not its own history's.
    pub fn shown_offset(&self) -> u64 {
        match self.node {
            None => self.state.shown_offset(),
            Some(_) => self.offset(),
        }
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
            // A replica node shows its master's history, as Redis's replica
            // does (the shard's book: its link's replid).
            Some(node) => HistoryIds {
                replid: match node.following.load(Relaxed) {
                    true => self.state.shard_links.book(self.first).replid(),
                    false => node.replid().clone(),
                },
                replid2: node
                    .replid2
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone(),
                second_offset: node.second_offset.load(Relaxed),
            },
        }
    }

    /// A node that replicates a master (CLUSTER REPLICATE): one load.
    #[inline]
    pub fn is_following(&self) -> bool {
        self.node.is_some_and(|node| node.following.load(Relaxed))
    }

    /// The master this history follows: REPLICAOF's for the server, CLUSTER
    /// REPLICATE's for a node.
    pub fn master(&self) -> Option<(String, u16)> {
        match self.node {
            None => self.state.ids().master,
            Some(node) => node.master().clone(),
        }
    }

    /// The link to the master this history follows ([`Self::master`]): the
    /// server's (REPLICAOF), or the node's shard's book (CLUSTER REPLICATE).
    pub fn following(&self) -> Following {
        match self.node {
            None => {
                let ids = self.state.ids();
                Following {
                    link: ids.link,
                    up: self.state.link_up(),
                    offset: self.state.shown_offset(),
                    down_since_ms: ids.down_since_ms,
                }
            }
            Some(_) => {
                let book = self.state.shard_links.book(self.first);
                Following {
                    link: book.state(),
                    up: book.up(),
                    offset: book.offset(),
                    down_since_ms: book.down_since_ms(),
                }
            }
        }
    }

    /// The RDB this history's link receives (INFO's `master_sync_*`): the
    /// server's (the single stream, or its shard links' as one), or the
    /// node's shard's link's.
    pub fn transfer(&self) -> super::transfer::Transfer {
        match self.node {
            None => self.state.transfer(),
            Some(_) => self.state.shard_links.book(self.first).transfer.get(),
        }
    }

    /// A node replicates `master` from now on (its shard's link follows it).
    /// A master turned replica asks to continue its own history (Redis's
    /// `replicationCacheMasterUsingMyself`): a replica it had, promoted with
    /// that history as its `replid2`, answers `+CONTINUE` when nothing was
    /// written here after it took over; anyone else answers with a full sync.
    /// Its own records stop (`shard::primary` records nothing for a
    /// following node) and its backlog stays: from here it takes the link's
    /// bytes verbatim ([`Self::link_processed`]), so its sub-replicas go on
    /// in the master's history, as a Redis replica relays its master's.
    pub fn follow_node(&self, master: (String, u16)) {
        if let Some(node) = self.node {
            *node.master() = Some(master);
            if !node.following.load(Relaxed) {
                let own = node.replid().clone();
                let book = self.state.shard_links.book(self.first);
                book.full_sync(&own, node.offset.load(Relaxed));
            }
            node.following.store(true, Relaxed);
        }
    }

    /// A replica node is a master again, keeping the data (as REPLICAOF NO
    /// ONE, Redis's `shiftReplicationId`): the history its link followed
    /// becomes `replid2` up to the next offset, under a new ID that continues
    /// from the link's offset. False when it followed nobody.
    pub fn promote_node(&self) -> bool {
        let Some(node) = self.node else {
            return false;
        };
        if node.master().take().is_none() {
            return false;
        }
        let book = self.state.shard_links.book(self.first);
        let followed = book.replid();
        let offset = book.offset();
        *node.replid2.lock().unwrap_or_else(|e| e.into_inner()) = match followed.is_empty() {
            true => NO_REPLID.to_string(),
            false => followed,
        };
        node.second_offset.store(offset as i64 + 1, Relaxed);
        // Its backlog, the link's bytes at the master's offsets, stays as a
        // promoted Redis replica keeps it: the old master, its other
        // replicas and this node's sub-replicas, asking for a byte of it
        // under `replid2`, continue. (A backlog that is not the link's
        // starts again, empty, at the offset taken over at.)
        if node.offset.load(Relaxed) != offset {
            node.primary.free_backlog();
            node.offset.store(offset, Relaxed);
        }
        node.primary.create_backlog(offset, 0);
        *node.replid() = new_replid();
        node.following.store(false, Relaxed);
        node.primary.forget_db();
        // Its sub-replicas learn the new ID by connecting again (Redis's
        // replicationUnsetMaster: `+CONTINUE <new replid>`).
        self.drop_replicas();
        // The followed history is `replid2` now; following a master again
        // asks to continue this node's own (`follow_node`).
        book.full_sync("", 0);
        book.set_state(super::state::LinkState::Connect);
        true
    }

    /// A replica on shard links (forward mode), or a cluster replica node
    /// (per-shard mode): this shard's link began a full sync of its primary
    /// shard's (its master node's) `replid` at `offset`. The shard's own
    /// history becomes that one (same ID, same offsets, an empty backlog
    /// from there), so a replica of this replica follows it as it would the
    /// primary's shard, and a promotion keeps it as `replid2`.
    pub fn link_full_sync(&self, replid: &str, offset: u64) {
        let Some(node) = self.node else {
            return;
        };
        *node.replid() = replid.to_string();
        *node.replid2.lock().unwrap_or_else(|e| e.into_inner()) = NO_REPLID.to_string();
        node.second_offset.store(-1, Relaxed);
        node.offset.store(offset, Relaxed);
        node.marks().clear();
        node.primary.free_backlog();
        node.primary.create_backlog(offset, 0);
    }

    /// The shard's link continued (`+CONTINUE [replid]`): a new ID of the
    /// primary shard's shifts this shard's own history as Redis's replica
    /// does (the old one `replid2` up to here). False when the ID stayed.
    pub fn link_continued(&self, replid: Option<&str>) -> bool {
        let Some(node) = self.node else {
            return false;
        };
        let offset = node.offset.load(Relaxed);
        // A backlog from here on, if the shard kept none.
        node.primary.create_backlog(offset, 0);
        let mut own = node.replid();
        match replid.filter(|id| *id != own.as_str()) {
            Some(id) => {
                let old = std::mem::replace(&mut *own, id.to_string());
                *node.replid2.lock().unwrap_or_else(|e| e.into_inner()) = old;
                node.second_offset.store(offset as i64 + 1, Relaxed);
                true
            }
            None => false,
        }
    }

    /// `bytes` of the shard's link stream were applied: the shard's own
    /// history takes them verbatim (Redis's replica feeds its replicas what
    /// its master sent), barrier records included.
    #[inline]
    pub fn link_processed(&self, bytes: &[u8]) {
        self.primary.append_stream(bytes, self.offset);
    }

    /// Forward mode, a primary: a `RUVIO OFFSET` mark of the server's
    /// offset `server_offset` goes into this shard's own history
    /// ([`super::link_barrier`]: every record of the shard up to it is in
    /// this history already, its records going here before the server's).
    pub fn mark_server_offset(&self, server_offset: u64) {
        let Some(node) = self.node else {
            return;
        };
        if !self.primary.active() {
            return;
        }
        let at = self.offset.load(Relaxed);
        let record = super::link_barrier::offset_record(server_offset);
        self.primary.append_stream(&record, self.offset);
        node.note_mark(at, server_offset);
    }

    /// Forward mode, a replica on shard links: its link's stream has a
    /// mark of `server_offset` at this history's end, which the next
    /// `link_processed` takes (the primary's view of this replica's own
    /// replicas on links reads it, [`Self::server_offset_at`]).
    pub fn link_marked(&self, server_offset: u64) {
        if let Some(node) = self.node {
            node.note_mark(self.offset.load(Relaxed), server_offset);
        }
    }

    /// The server offset a link that acknowledged `acked` of this history
    /// reached: the last mark it had applied by then (0 before any this
    /// history remembers).
    pub fn server_offset_at(&self, acked: u64) -> u64 {
        let Some(node) = self.node else {
            return 0;
        };
        let marks = node.marks();
        let past = marks.partition_point(|&(at, _)| at < acked);
        match past {
            0 => 0,
            n => marks[n - 1].1,
        }
    }

    /// REPLICAOF NO ONE of a replica on shard links: the shard's history,
    /// its link's so far, becomes `replid2` up to the next offset under a new
    /// ID continuing from it (Redis's `shiftReplicationId`); the backlog
    /// stays, so the old primary's other replicas on links continue here.
    /// False when the shard's history was no link's.
    pub fn promote_link(&self) -> bool {
        let Some(node) = self.node else {
            return false;
        };
        if !node.primary.active() {
            return false;
        }
        let offset = node.offset.load(Relaxed);
        let old = std::mem::replace(&mut *node.replid(), new_replid());
        *node.replid2.lock().unwrap_or_else(|e| e.into_inner()) = old;
        node.second_offset.store(offset as i64 + 1, Relaxed);
        // The stream's database is not known to this shard's own records.
        node.primary.forget_db();
        true
    }

    /// This history's replicas as of now: each compares the count it
    /// attached under (`Hosted::generation`) with this one.
    pub fn replicas_generation(&self) -> u64 {
        let own = self
            .node
            .map_or(0, |node| node.replicas_generation.load(Relaxed));
        self.state.replicas_generation() + own
    }

    /// Every replica of this history connects again (Redis's
    /// `disconnectSlaves`): a node's alone, or the server's all.
    pub fn drop_replicas(&self) {
        match self.node {
            None => self.state.drop_replicas(),
            Some(node) => {
                node.replicas_generation.fetch_add(1, Relaxed);
            }
        }
    }

    /// A new history begins (Redis's changeReplicationId and clearReplicationId2).
    pub fn new_history(&self) {
        match self.node {
            None => self.state.new_history(),
            Some(node) => {
                *node.replid() = new_replid();
                node.marks().clear();
            }
        }
    }

    /// INFO's `sync_full`, `sync_partial_ok` and `sync_partial_err`: the
    /// server's history counts its shards' too in forward mode (each shard
    /// link of a Ruvio replica syncs with its shard's history, one count
    /// per link).
    pub fn sync_counts(&self) -> [u64; 3] {
        let of = |p: &Primary| {
            [
                p.sync_full.load(Relaxed),
                p.sync_partial_ok.load(Relaxed),
                p.sync_partial_err.load(Relaxed),
            ]
        };
        let mut counts = of(self.primary);
        if self.node.is_none() {
            for node in &self.state.nodes {
                let more = of(&node.primary);
                for (count, more) in counts.iter_mut().zip(more) {
                    *count += more;
                }
            }
        }
        counts
    }

    /// The index of `shard`'s part in a full sync of this history.
    pub fn part_of(&self, shard: usize) -> usize {
        debug_assert!(shard >= self.first && shard < self.first + self.count);
        shard - self.first
    }

    /// The replicas of this history as INFO and ROLE list them: its own
    /// connections and, for the server's history, one per Ruvio replica on
    /// shard links (its links follow the shards' own histories:
    /// [`super::link_replicas`]).
    pub fn replicas(&self) -> Vec<ReplicaInfo> {
        let mut replicas = self.primary.replicas();
        if self.node.is_none() {
            let linked = link_replicas::linked_replicas(self.state);
            replicas.extend(linked.iter().map(LinkedReplica::as_info));
        }
        replicas
    }

    /// What a WAIT called now waits for on each shard link: each shard's own
    /// history's offset (none for a shard node's history).
    pub fn link_offsets(&self) -> Vec<u64> {
        match self.node {
            None => link_replicas::link_offsets(self.state),
            Some(_) => Vec::new(),
        }
    }

    /// Replicas that acknowledged `offset` of this history, those on shard
    /// links each of their links its shard's `link_offsets` (WAIT).
    pub fn acked_at_least(&self, offset: u64, link_offsets: &[u64]) -> usize {
        let own = self.primary.acked_at_least(offset);
        own + self.linked_reaching(link_offsets, LinkedReplica::acked)
    }

    /// Replicas whose logs fsynced `offset` of this history, those on shard
    /// links each of their links its shard's `link_offsets` (WAITAOF).
    pub fn fsynced_at_least(&self, offset: u64, link_offsets: &[u64]) -> usize {
        let own = self.primary.fsynced_at_least(offset);
        own + self.linked_reaching(link_offsets, LinkedReplica::fsynced)
    }

    /// Replicas on shard links of the server's history whose every link
    /// `reached` its shard's `link_offsets` (none for a shard node's).
    fn linked_reaching(
        &self,
        link_offsets: &[u64],
        reached: fn(&LinkedReplica, &[u64]) -> bool,
    ) -> usize {
        if self.node.is_some() || link_offsets.is_empty() {
            return 0;
        }
        let linked = link_replicas::linked_replicas(self.state);
        linked.iter().filter(|r| reached(r, link_offsets)).count()
    }

    /// Online replicas heard from within `max_lag_s` seconds, one on shard
    /// links counting when every link was (`min-replicas-to-write`).
    pub fn good_replicas(&self, now_ms: u64, max_lag_s: u64) -> usize {
        let own = self.primary.good_replicas(now_ms, max_lag_s);
        match self.node {
            None => {
                let linked = link_replicas::linked_replicas(self.state);
                own + linked.iter().filter(|r| r.good(now_ms, max_lag_s)).count()
            }
            Some(_) => own,
        }
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
    fn a_shard_history_continues_its_links_and_shifts_on_promotion() {
        let state = State::new(2);
        let shard = state.node_history(1);
        let theirs = "a".repeat(40);
        shard.link_full_sync(&theirs, 100);
        assert_eq!((shard.ids().replid, shard.offset()), (theirs.clone(), 100));
        assert!(shard.primary.active(), "a backlog from the sync's offset");
        // The link's bytes go in verbatim: same offsets as the primary's shard.
        shard.link_processed(b"*1\r\n$4\r\nPING\r\n");
        assert_eq!(shard.offset(), 114);
        assert!(shard.primary.can_continue(101, 114));
        assert!(!shard.link_continued(Some(&theirs)), "the same ID");
        let newer = "b".repeat(40);
        assert!(shard.link_continued(Some(&newer)));
        let ids = shard.ids();
        assert_eq!((ids.replid, ids.replid2), (newer.clone(), theirs));
        assert_eq!(ids.second_offset, 115);
        // Promoted: a new ID, the link's the second up to the next byte,
        // the backlog kept for the old primary's other replicas.
        assert!(shard.promote_link());
        let ids = shard.ids();
        assert_ne!(ids.replid, newer);
        assert_eq!((ids.replid2, ids.second_offset), (newer, 115));
        assert!(shard.primary.can_continue(101, shard.offset()));
        assert!(!state.node_history(0).promote_link(), "no link's history");
    }

    /// A cluster replica node relays its link: its own history is the
    /// master's bytes at the master's offsets, kept as `replid2` promoted.
    #[test]
    fn a_replica_node_relays_its_link_and_keeps_it_when_promoted() {
        let state = State::new(2);
        let node = state.node_history(0);
        node.follow_node(("127.0.0.1".to_string(), 7000));
        let theirs = "a".repeat(40);
        state.shard_link_full_sync(0, &theirs, 100);
        state.shard_link_processed(0, b"*1\r\n$4\r\nPING\r\n", (0, true), 0);
        assert_eq!((node.ids().replid, node.offset()), (theirs.clone(), 114));
        assert_eq!(node.offset_counter().load(Relaxed), 114, "its own offset");
        assert!(node.primary.can_continue(101, 114), "the bytes relayed");
        let (before, other) = (node.replicas_generation(), state.node_history(1));
        let others = other.replicas_generation();
        assert!(node.promote_node());
        assert!(
            node.replicas_generation() > before,
            "sub-replicas reconnect"
        );
        assert_eq!(other.replicas_generation(), others, "another node's stay");
        let ids = node.ids();
        assert_ne!(ids.replid, theirs);
        assert_eq!((ids.replid2, ids.second_offset), (theirs, 115));
        assert!(node.primary.can_continue(101, node.offset()), "kept");
    }

    #[test]
    fn marks_read_back_as_the_server_offset_an_ack_reached() {
        let state = State::new(2);
        let shard = state.node_history(0);
        shard.mark_server_offset(10);
        assert_eq!(shard.offset(), 0, "no history yet: no mark");
        shard.primary.create_backlog(0, 0);
        shard.mark_server_offset(10);
        let first_end = shard.offset();
        assert!(first_end > 0, "the mark is in the shard's stream");
        shard
            .primary
            .append_stream(&[b'x'; 7], shard.offset_counter());
        let second_at = shard.offset();
        shard.mark_server_offset(25);
        assert_eq!(shard.server_offset_at(0), 0, "nothing applied");
        assert_eq!(shard.server_offset_at(first_end), 10);
        assert_eq!(shard.server_offset_at(second_at), 10, "before the second");
        assert_eq!(shard.server_offset_at(shard.offset()), 25);
        // A replica's link: the primary's marks at this history's offsets.
        let linked = state.node_history(1);
        linked.link_full_sync(&"a".repeat(40), 100);
        linked.link_marked(40);
        linked.link_processed(&super::super::link_barrier::offset_record(40));
        assert_eq!(linked.server_offset_at(100), 0);
        assert_eq!(linked.server_offset_at(linked.offset()), 40);
        // Another full sync: the old marks say nothing of its offsets.
        linked.link_full_sync(&"b".repeat(40), 500);
        assert_eq!(linked.server_offset_at(600), 0);
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
