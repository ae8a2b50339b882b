//! A Ruvio replica of a Ruvio primary with the same shard count, shard by
//! shard (docs/replication.md, "Ruvio to Ruvio shard by shard"): each replica
//! shard i follows the primary's shard i over a link of its own (`REPLCONF
//! ruvio-shard i/n`), so the sync and the stream of each shard run on its own
//! core. Each link follows a history of its own (the primary's shard i's
//! replid and offset): its book is kept here, one per shard.
//!
//! A cross-shard group (a MULTI/EXEC or script on keys borrowed from another
//! shard) is ordered against its keys' owner by barrier records
//! ([`super::link_barrier`]): a link waits until its sibling has *applied*
//! an offset, which is why a book keeps two: the offset of the stream
//! dispatched (ACKs, PSYNC, INFO) and the one applied (every command up to
//! it ran, its forwarded parts answered).
//!
//! What the server shows as one replica (INFO, ROLE, `State::offset`) is the
//! rule the docs name: the offset is the primary's server offset that every
//! link reached (the least of the links' last applied server offset marks,
//! [`super::link_barrier`]'s `RUVIO OFFSET`), the link state the worst of
//! the links' states.

use super::state::LinkState;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Mutex;

/// One link's history: the primary shard's replid and offset, and how the
/// link stands.
#[derive(Debug)]
pub struct LinkBook {
    replid: Mutex<String>,
    offset: AtomicU64,
    /// The offset up to which every command ran to the end (its parts on
    /// other shards answered): what a sibling link's barrier waits for.
    applied: AtomicU64,
    /// Shards whose link waits at a barrier for this link's applied offset
    /// (a bit each): rung when it moves.
    waiting: AtomicU64,
    /// The offset of the last full sync: the data loaded was cut there.
    synced_at: AtomicU64,
    /// The primary's server offset of the last `RUVIO OFFSET` mark the link
    /// applied (0 since its last full sync until one came).
    server_offset: AtomicU64,
    state: Mutex<LinkState>,
    /// The stream is applied: the link's master client runs.
    up: AtomicBool,
    /// The database the link's stream was in, for `+CONTINUE`.
    db: AtomicU64,
    /// Unix ms the stream stopped (0: it never ran).
    down_since_ms: AtomicU64,
    /// The RDB this link receives (INFO's `master_sync_*` sum the links').
    pub(super) transfer: super::transfer::TransferCount,
}

impl Default for LinkBook {
    fn default() -> LinkBook {
        LinkBook {
            replid: Mutex::new(String::new()),
            offset: AtomicU64::new(0),
            applied: AtomicU64::new(0),
            waiting: AtomicU64::new(0),
            synced_at: AtomicU64::new(0),
            server_offset: AtomicU64::new(0),
            state: Mutex::new(LinkState::Connect),
            up: AtomicBool::new(false),
            db: AtomicU64::new(0),
            down_since_ms: AtomicU64::new(0),
            transfer: Default::default(),
        }
    }
}

impl LinkBook {
    pub fn replid(&self) -> String {
        self.replid
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn offset(&self) -> u64 {
        self.offset.load(Relaxed)
    }

    /// The offset of the last full sync (0: none): the link's shard holds
    /// its primary shard's data as of that offset, and what it applied after.
    pub fn synced_at(&self) -> u64 {
        self.synced_at.load(Acquire)
    }

    /// The primary's server offset this link's stream reached: every
    /// record of its shard up to it was dispatched here.
    pub fn server_offset(&self) -> u64 {
        self.server_offset.load(Relaxed)
    }

    /// The link's master client met a `RUVIO OFFSET` mark.
    pub(super) fn marked(&self, server_offset: u64) {
        self.server_offset.store(server_offset, Relaxed);
    }

    /// The offset up to which every command of the stream ran to the end.
    pub fn applied(&self) -> u64 {
        self.applied.load(Acquire)
    }

    /// Every command dispatched so far ran to the end: the applied offset
    /// reaches the offset, and the shards whose link waits on it are rung.
    pub fn settle(&self) {
        let offset = self.offset();
        if self.applied.swap(offset, Release) == offset {
            return;
        }
        let waiting = self.waiting.swap(0, AcqRel);
        for shard in (0..64).filter(|s| waiting & (1 << s) != 0) {
            crate::mesh::forward::ring(shard);
        }
    }

    /// Shard `shard`'s link waits for this link's applied offset: ring it
    /// when the offset next moves.
    pub fn ring_when_applied(&self, shard: usize) {
        self.waiting.fetch_or(1 << (shard % 64), AcqRel);
    }

    pub fn state(&self) -> LinkState {
        *self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The link's master client runs (read once per command of its stream).
    #[inline]
    pub fn up(&self) -> bool {
        self.up.load(Relaxed)
    }

    pub fn db(&self) -> usize {
        self.db.load(Relaxed) as usize
    }

    /// Unix ms the stream stopped (0: it never ran).
    pub fn down_since_ms(&self) -> u64 {
        self.down_since_ms.load(Relaxed)
    }

    /// The link's state changed at `now_ms`.
    pub(super) fn set_state_at(&self, link: LinkState, now_ms: u64) {
        if self.up() && link != LinkState::Connected {
            self.down_since_ms.store(now_ms, Relaxed);
        }
        self.set_state(link);
    }

    pub(super) fn set_state(&self, link: LinkState) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = link;
        self.up.store(link == LinkState::Connected, Relaxed);
    }

    pub(super) fn full_sync(&self, replid: &str, offset: u64) {
        *self.replid.lock().unwrap_or_else(|e| e.into_inner()) = replid.to_string();
        self.offset.store(offset, Relaxed);
        self.synced_at.store(offset, Release);
        // Another cut: the first mark after it says where it stands.
        self.server_offset.store(0, Relaxed);
        self.settle();
        self.db.store(0, Relaxed);
    }

    /// A new link asks to continue `replid` from `offset` (the shard's own
    /// history, which moved on since a promotion): the book follows it
    /// from there, its data not cut anew.
    pub(super) fn resume_at(&self, replid: &str, offset: u64) {
        *self.replid.lock().unwrap_or_else(|e| e.into_inner()) = replid.to_string();
        self.offset.store(offset, Relaxed);
        self.settle();
    }

    /// `+CONTINUE <replid>`: the primary's shard may name a new ID.
    pub(super) fn continued(&self, replid: Option<&str>) {
        if let Some(id) = replid {
            *self.replid.lock().unwrap_or_else(|e| e.into_inner()) = id.to_string();
        }
    }

    /// `bytes` of the link's stream applied, leaving its client in `db`.
    #[inline]
    pub(super) fn processed(&self, bytes: u64, db: usize) {
        self.offset.fetch_add(bytes, Relaxed);
        self.db.store(db as u64, Relaxed);
    }

    /// `REPLCONF ACK <offset>` of this link, with `FACK <fsynced>` when its
    /// shard keeps a log ([`super::State::link_ack`]).
    pub(super) fn ack(&self, fsynced: Option<u64>) -> Vec<u8> {
        super::ack_command(self.offset(), fsynced)
    }
}

/// Every shard's link book, and the REPLICAOF epoch whose primary refused
/// shard links (a redis-server, another shard count): that epoch follows the
/// single stream.
#[derive(Debug)]
pub struct ShardLinks {
    books: Vec<LinkBook>,
    refused_epoch: AtomicU64,
    /// The REPLICAOF epoch whose primary this server follows on shard links
    /// (0: none): its shards serve replicas on links of their own.
    links_epoch: AtomicU64,
}

impl ShardLinks {
    pub fn new(shards: usize) -> ShardLinks {
        ShardLinks {
            books: (0..shards).map(|_| LinkBook::default()).collect(),
            refused_epoch: AtomicU64::new(0),
            links_epoch: AtomicU64::new(0),
        }
    }

    pub fn book(&self, shard: usize) -> &LinkBook {
        &self.books[shard]
    }

    pub fn books(&self) -> &[LinkBook] {
        &self.books
    }

    /// REPLICAOF changed the primary (or NO ONE): every link's master client
    /// stops at once, before its shard's tick drops it.
    pub(super) fn stop_all(&self) {
        for book in &self.books {
            book.set_state(LinkState::Connect);
        }
    }

    /// Some shard follows its primary over its own link (none on the single
    /// stream, nor on a primary).
    pub fn in_use(&self) -> bool {
        self.books.iter().any(|b| b.state() != LinkState::Connect)
    }

    /// The single stream follows the primary now: what it applies is in no
    /// link's history, so each link's next PSYNC must be a full sync.
    pub fn forget_all(&self) {
        self.links_epoch.store(0, Relaxed);
        for book in &self.books {
            book.full_sync("", 0);
            book.set_state(LinkState::Connect);
        }
    }

    /// Shard `shard` dropped its link (its follower changed): the server's
    /// link state is left to the link that follows now.
    pub fn dropped(&self, shard: usize) {
        self.books[shard].set_state(LinkState::Connect);
    }

    /// Some link follows a history of its primary shard (it synced, or
    /// continued one): the server's offset is the links' then.
    pub fn followed(&self) -> bool {
        self.books.iter().any(|b| !b.replid().is_empty())
    }

    /// REPLICAOF epoch `epoch` follows its primary on shard links.
    pub fn follow_on_links(&self, epoch: u64) {
        self.links_epoch.store(epoch, Relaxed);
    }

    /// REPLICAOF epoch `epoch` follows on shard links: each shard's own
    /// history is its link's, which a replica's link of this shard follows.
    pub fn following(&self, epoch: u64) -> bool {
        epoch != 0 && self.links_epoch.load(Relaxed) == epoch
    }

    /// The primary of REPLICAOF epoch `epoch` refused `REPLCONF ruvio-shard`.
    pub fn refuse(&self, epoch: u64) {
        self.refused_epoch.store(epoch, Relaxed);
        let _ = self
            .links_epoch
            .compare_exchange(epoch, 0, Relaxed, Relaxed);
    }

    pub fn refused(&self, epoch: u64) -> bool {
        self.refused_epoch.load(Relaxed) == epoch
    }

    /// The worst of the links' states (the order of [`LinkState`]'s
    /// variants, from not connected to applying the stream) and the
    /// server offset every link reached ([`Self::server_offset`]).
    pub fn overall(&self) -> (LinkState, u64) {
        let worst = self
            .books
            .iter()
            .map(LinkBook::state)
            .min_by_key(|s| rank(*s));
        (worst.unwrap_or(LinkState::Connect), self.server_offset())
    }

    /// The primary's server offset every link reached: the least of their
    /// last marks (`RUVIO OFFSET`). Each mark covers its shard's records up
    /// to it, so every record of the primary's server history up to this
    /// offset was dispatched here: the primary's `master_repl_offset` once
    /// each link applied what it was sent.
    pub fn server_offset(&self) -> u64 {
        self.books
            .iter()
            .map(LinkBook::server_offset)
            .min()
            .unwrap_or(0)
    }
}

fn rank(link: LinkState) -> u8 {
    match link {
        LinkState::Connect => 0,
        LinkState::Connecting => 1,
        LinkState::Handshake => 2,
        LinkState::Sync => 3,
        LinkState::Connected => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overall_is_the_worst_state_and_the_least_server_offset() {
        let links = ShardLinks::new(3);
        assert!(!links.followed(), "no link has a history yet");
        links.book(0).full_sync(&"a".repeat(40), 100);
        assert!(links.followed());
        links.book(1).full_sync(&"b".repeat(40), 50);
        links.book(2).full_sync(&"c".repeat(40), 7);
        for book in links.books() {
            book.set_state(LinkState::Connected);
        }
        links.book(1).set_state(LinkState::Sync);
        links.book(2).processed(3, 4);
        assert_eq!(links.overall(), (LinkState::Sync, 0), "no mark yet");
        links.book(0).marked(900);
        links.book(1).marked(700);
        links.book(2).marked(800);
        assert_eq!(links.overall(), (LinkState::Sync, 700));
        // A link's full sync: unknown until its first mark.
        links.book(1).full_sync(&"b".repeat(40), 60);
        assert_eq!(links.server_offset(), 0);
        links.book(1).marked(950);
        assert_eq!(links.server_offset(), 800);
        assert!(links.book(0).up() && !links.book(1).up());
        assert_eq!(links.book(2).db(), 4);
        links.book(1).set_state(LinkState::Connected);
        assert_eq!(links.overall().0, LinkState::Connected);
        links.book(0).set_state(LinkState::Connect);
        assert_eq!(links.overall().0, LinkState::Connect);
        // The single stream took over: every link's next PSYNC is `? -1`.
        links.forget_all();
        assert_eq!(links.overall(), (LinkState::Connect, 0));
        assert!(links.books().iter().all(|b| b.replid().is_empty()));
        assert!(!links.followed());
    }
}
