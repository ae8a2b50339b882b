//! What every shard reads of replication: the role, the primary REPLICAOF named,
//! the link's state, the replication IDs and the offset, and the dataset a full
//! sync brought for each shard to load.
//!
//! One struct in `Shared` because REPLICAOF, ROLE and INFO run on whichever shard
//! the client is on while only shard 0 drives the link: the link publishes here,
//! the commands read and change the target here, and the write path reads one
//! flag ([`State::is_replica`]) per command.

use super::transfer::{Transfer, TransferCount};
use crate::persistence::stream_mark::{Exact, Place, StreamMark};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8};
use std::sync::{Arc, Mutex, MutexGuard};

/// The replica's link, as ROLE names it (Redis's `repl_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// Waiting to connect (again).
    Connect,
    /// The TCP connection is being made.
    Connecting,
    /// PING, REPLCONF and PSYNC exchanged.
    Handshake,
    /// Receiving or loading the primary's RDB.
    Sync,
    /// Applying the primary's command stream.
    Connected,
}

impl LinkState {
    /// ROLE's name of the state.
    pub fn name(self) -> &'static str {
        match self {
            LinkState::Connect => "connect",
            LinkState::Connecting => "connecting",
            LinkState::Handshake => "handshake",
            LinkState::Sync => "sync",
            LinkState::Connected => "connected",
        }
    }
}

/// The replication IDs and the primary, changed by REPLICAOF and the link.
#[derive(Clone, Debug)]
pub struct Ids {
    /// The primary REPLICAOF named (`None`: this server is a primary).
    pub master: Option<(String, u16)>,
    /// Bumped by every REPLICAOF that changes the primary: shard 0 starts over.
    pub epoch: u64,
    /// `master_replid`: this server's history (the primary's once synced).
    pub replid: String,
    /// `master_replid2` and `second_repl_offset` (-1: none).
    pub replid2: String,
    pub second_offset: i64,
    /// The link's state.
    pub link: LinkState,
    /// Unix milliseconds the link went down (0: it never was up).
    pub down_since_ms: u64,
    /// FAILOVER in progress on this primary, if any.
    pub failover: Failover,
    /// A promotion under way: the shards whose feed is not on yet.
    pub feeds_awaited: usize,
}

/// [`State`]'s role as the request path reads it: writes are refused unless
/// it is [`ROLE_PRIMARY`].
const ROLE_PRIMARY: u8 = 0;
/// REPLICAOF NO ONE (or a FAILOVER's end) stopped the link, and ROLE says
/// `master`, but some shard's feed is not on yet: a write it ran now would
/// be in no replica's stream, so writes are still refused (see
/// [`State::promote`]).
const ROLE_PROMOTING: u8 = 1;
/// Following a primary: its stream is the only writer.
const ROLE_REPLICA: u8 = 2;

/// A coordinated FAILOVER (Redis's `failover_state` and its target).
#[derive(Clone, Debug, Default)]
pub struct Failover {
    pub phase: FailoverPhase,
    /// `TO host port`, or the replica found caught up.
    pub target: Option<(String, u16)>,
    /// Unix ms the wait for the replica ends (0: never).
    pub end_ms: u64,
    pub force: bool,
    /// The target is a Ruvio replica on shard links: the hand-over goes
    /// link by link (each shard continues its own history; shard 0's link
    /// asks the target to take over).
    pub on_links: bool,
}

/// INFO's `master_failover_state`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FailoverPhase {
    #[default]
    None,
    /// Writes paused, waiting for the target to acknowledge every byte.
    WaitForSync,
    /// This server follows the target and sent it `PSYNC ... FAILOVER`.
    InProgress,
}

impl FailoverPhase {
    pub fn name(self) -> &'static str {
        match self {
            FailoverPhase::None => "no-failover",
            FailoverPhase::WaitForSync => "waiting-for-sync",
            FailoverPhase::InProgress => "failover-in-progress",
        }
    }
}

/// A full sync's dataset for every shard to load: shard 0 publishes it, each
/// shard loads its keys and notes `id`, and the stream starts once all did.
#[derive(Clone, Debug)]
pub struct Dataset {
    pub id: u64,
    pub rdb: Arc<Vec<u8>>,
}

/// The replication state every shard reads (in `Shared`).
#[derive(Debug)]
pub struct State {
    ids: Mutex<Ids>,
    /// The role (`ROLE_*`): the only thing the request path reads.
    role: AtomicU8,
    /// Per shard, during a promotion: its feed is not on yet.
    feed_awaited: Vec<AtomicBool>,
    /// The master client's id: its commands still on their way between
    /// shards when the link stops are in the backlog already, as the stream's
    /// bytes, and are not recorded again.
    master_client: AtomicU64,
    /// Bumped when this server's replicas must connect again: a full sync
    /// from its primary, a partial one under a new replid, a promotion
    /// (Redis's `disconnectSlaves` in each).
    replicas_generation: AtomicU64,
    /// The stream is applied (master_link_status:up).
    link_up: AtomicBool,
    /// Bytes of the server's history: the primary's stream processed
    /// (`slave_repl_offset`, `master_repl_offset`), as Redis counts them,
    /// on a primary or the single stream; on shard links the bytes of the
    /// replica's own history, made of what its shards apply (its links'
    /// streams are n other byte sequences).
    offset: AtomicU64,
    /// On shard links: the primary's server offset every link reached (the
    /// least `RUVIO OFFSET` mark applied), which INFO, ROLE and the primary
    /// compare ([`Self::shown_offset`]).
    links_server_offset: AtomicU64,
    /// The links' server offset is the one shown (set by a link's sync,
    /// cleared when the single stream follows or on promotion).
    shows_links_offset: AtomicBool,
    /// Unix milliseconds of the last bytes from the primary (0: none yet).
    last_io_ms: AtomicU64,
    /// The database the stream's last command ran in: a partial resync goes on
    /// in it, as Redis's cached master client keeps its database.
    stream_db: AtomicU64,
    dataset: Mutex<Option<Dataset>>,
    /// The id of the last dataset published (0: none), read by every shard's tick.
    published: AtomicU64,
    /// Per shard: the last dataset id it built its part of (or failed to).
    built: Vec<AtomicU64>,
    /// Per shard: the last dataset id it put in place (or gave up).
    loaded: Vec<AtomicU64>,
    /// The last dataset id a shard could not load (0: none).
    failed: AtomicU64,
    /// The RDB being received on the single stream (each shard link counts
    /// its own: `LinkBook::transfer`).
    transfer: TransferCount,
    /// Ruvio as a primary: the backlog, its replicas, a full sync's cut.
    pub primary: super::primary::Primary,
    /// Each shard's own history, a primary of its own in per-shard mode
    /// (`super::history`).
    pub(super) nodes: Vec<super::history::Node>,
    /// `min-replicas-to-write` is not met: writes answer `-NOREPLICAS`.
    writes_refused: AtomicBool,
    /// A FAILOVER ended: shard 0 lifts the write pause it put on every shard.
    failover_unpause: AtomicBool,
    /// A replica with a log, at start: each shard's exact stream mark (see
    /// `persistence::stream_mark`), taken once by shard 0's first link.
    recovered: Mutex<Option<Vec<Option<Exact>>>>,
    /// Started as a replica: the recovered places may be continued.
    continue_from_logs: AtomicBool,
    /// After a restart whose shards' logs end at different places: until the
    /// stream passes `catch_up_end`, each shard skips the master client's
    /// commands up to its own place (`catch_up`, per shard).
    catch_up: Mutex<Vec<u64>>,
    catch_up_end: AtomicU64,
    /// Per shard: the stream offset its log's fsyncs covered (-1: none), for
    /// `REPLCONF ACK ... FACK` (WAITAOF on the primary).
    fsynced: Vec<AtomicI64>,
    /// Each shard's own link to a Ruvio primary's shard (`super::shard_links`).
    pub shard_links: super::shard_links::ShardLinks,
}

/// A new 40 hex digit replication ID (Redis's `changeReplicationId`).
pub fn new_replid() -> String {
    let mut bytes = [0u8; 20];
    // SAFETY: getrandom writes at most `bytes.len()` bytes into the buffer.
    let got = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if got != bytes.len() as isize {
        // No entropy source: the clock and the pid still make a fresh ID.
        let seed = crate::clock::unix_ms() ^ u64::from(std::process::id()) << 40;
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (seed.rotate_left(i as u32 * 7) as u8) ^ i as u8;
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Redis's empty ID (`master_replid2` before any promotion).
pub const NO_REPLID: &str = "0000000000000000000000000000000000000000";

impl State {
    pub fn new(shards: usize) -> State {
        State {
            ids: Mutex::new(Ids {
                master: None,
                epoch: 0,
                replid: new_replid(),
                replid2: NO_REPLID.to_string(),
                second_offset: -1,
                link: LinkState::Connect,
                down_since_ms: 0,
                failover: Failover::default(),
                feeds_awaited: 0,
            }),
            role: AtomicU8::new(ROLE_PRIMARY),
            feed_awaited: (0..shards).map(|_| AtomicBool::new(false)).collect(),
            master_client: AtomicU64::new(0),
            replicas_generation: AtomicU64::new(0),
            link_up: AtomicBool::new(false),
            offset: AtomicU64::new(0),
            links_server_offset: AtomicU64::new(0),
            shows_links_offset: AtomicBool::new(false),
            last_io_ms: AtomicU64::new(0),
            stream_db: AtomicU64::new(0),
            dataset: Mutex::new(None),
            published: AtomicU64::new(0),
            built: (0..shards).map(|_| AtomicU64::new(0)).collect(),
            loaded: (0..shards).map(|_| AtomicU64::new(0)).collect(),
            failed: AtomicU64::new(0),
            transfer: TransferCount::default(),
            primary: Default::default(),
            nodes: (0..shards).map(|_| Default::default()).collect(),
            writes_refused: AtomicBool::new(false),
            failover_unpause: AtomicBool::new(false),
            recovered: Mutex::new(Some(vec![None; shards])),
            continue_from_logs: AtomicBool::new(false),
            catch_up: Mutex::new(Vec::new()),
            catch_up_end: AtomicU64::new(0),
            fsynced: (0..shards).map(|_| AtomicI64::new(-1)).collect(),
            shard_links: super::shard_links::ShardLinks::new(shards),
        }
    }

    /// The IDs and the primary (a copy: INFO and ROLE format it unlocked).
    pub fn ids(&self) -> Ids {
        self.lock().clone()
    }

    fn lock(&self) -> MutexGuard<'_, Ids> {
        self.ids.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// This server refuses its clients' writes: it follows a primary, or a
    /// promotion waits for every shard's feed (the request path's one load).
    #[inline]
    pub fn is_replica(&self) -> bool {
        self.role.load(Relaxed) != ROLE_PRIMARY
    }

    /// This server follows a primary: the stream is its only writer and its
    /// shards record nothing (its replicas get the stream's bytes), but on
    /// shard links ([`Self::records_applied`]).
    pub fn follows_a_primary(&self) -> bool {
        self.role.load(Relaxed) == ROLE_REPLICA
    }

    /// A promotion waits for some shard's feed (REPLICAOF NO ONE's reply
    /// waits for its end).
    pub fn promoting(&self) -> bool {
        self.role.load(Relaxed) == ROLE_PROMOTING
    }

    /// A promotion waits for shard `shard`'s feed (one load per loop iteration).
    #[inline]
    pub fn feed_awaited(&self, shard: usize) -> bool {
        self.feed_awaited[shard].load(Relaxed)
    }

    /// Shard `shard`'s feed is as the promotion wants it (on while a backlog
    /// exists): once every shard's is, writes are taken (Redis promotes in one
    /// step; here no write is accepted before every shard records it).
    pub fn feed_ready(&self, shard: usize) {
        let mut ids = self.lock();
        if !self.feed_awaited[shard].swap(false, Relaxed) {
            return;
        }
        ids.feeds_awaited = ids.feeds_awaited.saturating_sub(1);
        if ids.feeds_awaited == 0 && ids.master.is_none() {
            self.role.store(ROLE_PRIMARY, Relaxed);
        }
    }

    /// This server's replicas as of now (see [`drop_replicas`](Self::drop_replicas)).
    pub fn replicas_generation(&self) -> u64 {
        self.replicas_generation.load(Relaxed)
    }

    /// Every replica of this server connects again (a chained replica learns
    /// the new history, as Redis's `disconnectSlaves`).
    pub(super) fn drop_replicas(&self) {
        self.replicas_generation.fetch_add(1, Relaxed);
    }

    /// The master client's id (see [`master_client`](Self::master_client)).
    pub fn set_master_client(&self, id: u64) {
        self.master_client.store(id, Relaxed);
    }

    /// The id of the last master client (0: none): records of its commands
    /// are not made, its bytes went to the backlog as they came.
    pub fn master_client(&self) -> u64 {
        self.master_client.load(Relaxed)
    }

    pub fn link_up(&self) -> bool {
        self.link_up.load(Relaxed)
    }

    /// The server history's offset (the one its replicas' PSYNC names).
    pub fn offset(&self) -> u64 {
        self.offset.load(Relaxed)
    }

    /// A replica on shard links: its shards record what they apply for the
    /// server's own history (its single-stream replicas'), as a primary's
    /// shards record their clients' writes.
    #[inline]
    pub fn records_applied(&self) -> bool {
        self.shows_links_offset.load(Relaxed)
    }

    /// The offset INFO (`master_repl_offset`, `slave_repl_offset`) and ROLE
    /// show: on shard links the primary's server offset the links reached,
    /// comparable with the primary's own, as Sentinel and FAILOVER compare
    /// them; else the server history's.
    pub fn shown_offset(&self) -> u64 {
        match self.shows_links_offset.load(Relaxed) {
            true => self.links_server_offset.load(Relaxed),
            false => self.offset(),
        }
    }

    /// `master_repl_offset` itself, which the primary's backlog moves under its lock.
    pub fn offset_counter(&self) -> &AtomicU64 {
        &self.offset
    }

    /// Writes are refused for want of replicas (`min-replicas-to-write`).
    #[inline]
    pub fn writes_refused(&self) -> bool {
        self.writes_refused.load(Relaxed)
    }

    pub fn set_writes_refused(&self, refused: bool) {
        self.writes_refused.store(refused, Relaxed);
    }

    /// FAILOVER began: writes are paused until it ends.
    pub fn start_failover(&self, failover: Failover) {
        self.lock().failover = failover;
    }

    /// FAILOVER's target caught up (or FORCE at the timeout): follow it, and ask
    /// it with `PSYNC <replid> <offset+1> FAILOVER` to take over.
    pub fn failover_to(&self, host: &str, port: u16, on_links: bool) {
        let mut ids = self.lock();
        ids.failover.phase = FailoverPhase::InProgress;
        ids.failover.target = Some((host.to_string(), port));
        ids.failover.on_links = on_links;
        self.follow_locked(&mut ids, host, port);
    }

    /// FAILOVER ended (done, or aborted: then a primary again, as Redis's
    /// abortFailover, if it was following the target already).
    pub fn end_failover(&self, aborted: Option<&str>) {
        let phase = self.lock().failover.phase;
        if phase == FailoverPhase::None {
            return;
        }
        if let Some(why) = aborted {
            let target = self.lock().failover.target.clone();
            let to = target.map_or("any replica".to_string(), |(h, p)| format!("{h}:{p}"));
            crate::serverlog::log(
                crate::serverlog::Level::Notice,
                &format!("FAILOVER to {to} aborted: {why}"),
            );
            if phase == FailoverPhase::InProgress {
                self.promote();
            }
        }
        self.lock().failover = Failover::default();
        self.failover_unpause.store(true, Relaxed);
    }

    /// The write pause of an ended FAILOVER is to be lifted (shard 0 takes it).
    pub fn take_failover_unpause(&self) -> bool {
        self.failover_unpause.swap(false, Relaxed)
    }

    /// A new history begins (the first replica of a server without a backlog,
    /// as Redis's changeReplicationId and clearReplicationId2).
    pub fn new_history(&self) {
        let mut ids = self.lock();
        ids.replid = new_replid();
        ids.replid2 = NO_REPLID.to_string();
        ids.second_offset = -1;
    }

    pub fn last_io_ms(&self) -> u64 {
        self.last_io_ms.load(Relaxed)
    }

    /// `REPLICAOF host port`: false when it already follows that primary (the
    /// host compared without case, as Redis does).
    pub fn follow(&self, host: &str, port: u16) -> bool {
        let mut ids = self.lock();
        let same = |(h, p): &(String, u16)| h.eq_ignore_ascii_case(host) && *p == port;
        if ids.master.as_ref().is_some_and(same) {
            return false;
        }
        self.follow_locked(&mut ids, host, port);
        true
    }

    /// Follow `host:port` from now on (shard 0 starts a new link).
    fn follow_locked(&self, ids: &mut Ids, host: &str, port: u16) {
        crate::serverlog::set_replica_role(true);
        ids.master = Some((host.to_string(), port));
        ids.epoch += 1;
        ids.link = LinkState::Connect;
        ids.down_since_ms = 0;
        ids.feeds_awaited = 0;
        for awaited in &self.feed_awaited {
            awaited.store(false, Relaxed);
        }
        self.role.store(ROLE_REPLICA, Relaxed);
        self.link_up.store(false, Relaxed);
        self.shard_links.stop_all();
    }

    /// `REPLICAOF NO ONE`: a primary again, keeping the data. The history followed
    /// so far becomes `replid2` up to the next offset, under a new ID (Redis's
    /// `shiftReplicationId`). False when it was a primary already.
    ///
    /// In two steps: the link stops at once (the master client runs nothing
    /// more) and ROLE says `master`, but writes are taken only once every
    /// shard turned its feed on at its loop's step ([`feed_ready`]): a shard
    /// that took a write before would leave it out of the stream its replicas
    /// continue with. REPLICAOF NO ONE answers then ([`promoting`]).
    ///
    /// [`feed_ready`]: Self::feed_ready
    /// [`promoting`]: Self::promoting
    pub fn promote(&self) -> bool {
        let mut ids = self.lock();
        if ids.master.take().is_none() {
            return false;
        }
        crate::serverlog::set_replica_role(false);
        ids.epoch += 1;
        // A replica on links with a server history of its own (single-stream
        // replicas of it) goes on with it: they continue under `replid2`.
        // Without one the server's history starts at the primary's server
        // offset its links reached (below).
        let own_history = self.primary.active();
        if self.shows_links_offset.swap(false, Relaxed) && !own_history {
            self.offset
                .store(self.links_server_offset.load(Relaxed), Relaxed);
        }
        ids.replid2 = std::mem::replace(&mut ids.replid, new_replid());
        ids.second_offset = self.offset() as i64 + 1;
        ids.link = LinkState::Connect;
        ids.feeds_awaited = self.feed_awaited.len();
        for awaited in &self.feed_awaited {
            awaited.store(true, Relaxed);
        }
        self.role.store(ROLE_PROMOTING, Relaxed);
        self.link_up.store(false, Relaxed);
        self.shard_links.stop_all();
        // Each shard's own history, its link's so far, goes on under a new ID
        // (the old primary's other replicas on links continue from it).
        let mut on_links = false;
        for shard in 0..self.nodes.len() {
            if !self.shard_links.book(shard).replid().is_empty() {
                on_links |= self.node_history(shard).promote_link();
            }
        }
        if on_links && !own_history {
            // The server's history goes on from the primary's server offset
            // its links reached, so the marks it sends its replicas on
            // links continue theirs (`link_barrier`'s server offset marks).
            // A backlog kept from before (a FAILOVER's old primary) ends
            // where this server stopped being a primary, not here.
            self.primary.free_backlog();
            self.primary.create_backlog(self.offset(), 0);
        }
        // They continue from the new ID's history (Redis's replicationUnsetMaster).
        self.drop_replicas();
        // The stream's database is not known to this server's own records.
        self.primary.forget_db();
        true
    }

    /// The link's state changed (shard 0).
    pub fn set_link(&self, link: LinkState, now_ms: u64) {
        let mut ids = self.lock();
        if ids.link == LinkState::Connected && link != LinkState::Connected {
            ids.down_since_ms = now_ms;
        }
        ids.link = link;
        self.link_up.store(link == LinkState::Connected, Relaxed);
    }

    /// A full sync began with the primary's `replid` at `offset`.
    pub fn full_sync(&self, replid: &str, offset: u64) {
        self.lock().replid = replid.to_string();
        // Its replicas follow a history that ends here (Redis's
        // replicationAttachToNewMaster): a full sync from this server again.
        self.drop_replicas();
        self.offset.store(offset, Relaxed);
        // The backlog follows the new history from its offset.
        self.primary.free_backlog();
        self.primary.create_backlog(offset, 0);
        // The primary selects a database before its first command after the RDB.
        self.stream_db.store(0, Relaxed);
    }

    /// The RDB's size is known (`None`: before its header), or more of it was
    /// read: on the single stream (`link` `None`) or shard `link`'s own link.
    pub fn transfer_started(&self, link: Option<usize>, total_bytes: Option<i64>, now_ms: u64) {
        self.transfer_count(link).started(total_bytes, now_ms);
    }

    pub fn transfer_read(&self, link: Option<usize>, bytes: usize, now_ms: u64) {
        self.transfer_count(link).read(bytes, now_ms);
    }

    fn transfer_count(&self, link: Option<usize>) -> &TransferCount {
        match link {
            Some(shard) => &self.shard_links.book(shard).transfer,
            None => &self.transfer,
        }
    }

    /// The transfer INFO shows: the single stream's, or with shard links the
    /// RDBs of every link still receiving one, as one (each link receives
    /// its shard's part of the primary's data).
    pub(super) fn transfer(&self) -> Transfer {
        if !self.shard_links.in_use() {
            return self.transfer.get();
        }
        let books = self.shard_links.books().iter();
        books
            .filter(|b| b.state() == LinkState::Sync)
            .map(|b| b.transfer.get())
            .reduce(Transfer::and)
            .unwrap_or_else(|| self.transfer.get())
    }

    /// A partial sync continues under `replid` (the primary's new one, if it
    /// changed: the old one becomes `replid2` as Redis does).
    pub fn continued(&self, replid: Option<&str>) {
        // A backlog from here on, if this replica kept none (a restart).
        self.primary.create_backlog(self.offset(), 0);
        let mut ids = self.lock();
        if let Some(id) = replid {
            if id != ids.replid {
                ids.replid2 = std::mem::replace(&mut ids.replid, id.to_string());
                ids.second_offset = self.offset() as i64 + 1;
                // They learn the new ID by connecting again (and continue).
                self.drop_replicas();
            }
        }
    }

    /// `bytes` of the stream were applied (the master client's commands, one
    /// or more whole ones, which left the client in database `db`).
    /// The bytes also go to this server's backlog, byte for byte as the primary
    /// sent them, so once promoted it continues its replicas from the same
    /// offsets (`replid2`).
    #[inline]
    pub fn processed(&self, bytes: &[u8], db: usize, now_ms: u64) {
        self.primary.append_stream(bytes, &self.offset);
        self.stream_db.store(db as u64, Relaxed);
        self.last_io_ms.store(now_ms, Relaxed);
    }

    /// The database the stream was in when it stopped.
    pub fn stream_db(&self) -> usize {
        self.stream_db.load(Relaxed) as usize
    }

    /// Bytes arrived from the primary (a ping included).
    pub fn heard(&self, now_ms: u64) {
        self.last_io_ms.store(now_ms, Relaxed);
    }

    /// Shard 0 publishes a full sync's dataset for every shard.
    pub fn publish_dataset(&self, rdb: Vec<u8>) -> u64 {
        let mut slot = self.dataset.lock().unwrap_or_else(|e| e.into_inner());
        let id = slot.as_ref().map_or(1, |d| d.id + 1);
        *slot = Some(Dataset {
            id,
            rdb: Arc::new(rdb),
        });
        self.published.store(id, Relaxed);
        id
    }

    /// The dataset shard `shard` has not built its part of yet, if any.
    pub fn dataset_for(&self, shard: usize) -> Option<Dataset> {
        if self.published.load(Relaxed) == self.built[shard].load(Relaxed) {
            return None;
        }
        let slot = self.dataset.lock().unwrap_or_else(|e| e.into_inner());
        let d = slot.as_ref()?;
        (self.built[shard].load(Relaxed) != d.id).then(|| d.clone())
    }

    /// The id of the last dataset published (0: none).
    pub fn published(&self) -> u64 {
        self.published.load(Relaxed)
    }

    /// Shard `shard` built its part of dataset `id` (`ok`), or could not.
    pub fn built(&self, shard: usize, id: u64, ok: bool) {
        if !ok {
            self.failed.store(id, Relaxed);
        }
        self.built[shard].store(id, Relaxed);
    }

    /// Every shard built its part of dataset `id` (or failed to: see
    /// [`load_failed`](Self::load_failed)).
    pub fn all_built(&self, id: u64) -> bool {
        self.built.iter().all(|b| b.load(Relaxed) == id)
    }

    /// Shard `shard` is done with dataset `id` (`ok`: its part is in place).
    pub fn loaded(&self, shard: usize, id: u64, ok: bool) {
        if !ok {
            self.failed.store(id, Relaxed);
        }
        self.loaded[shard].store(id, Relaxed);
    }

    /// A shard could not load dataset `id`.
    pub fn load_failed(&self, id: u64) -> bool {
        self.failed.load(Relaxed) == id
    }

    /// Every shard loaded dataset `id`.
    pub fn all_loaded(&self, id: u64) -> bool {
        self.loaded.iter().all(|l| l.load(Relaxed) == id)
    }

    /// Drop the published dataset once every shard loaded it (its bytes are big).
    pub fn drop_dataset(&self) {
        let mut slot = self.dataset.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(d) = slot.as_mut() {
            d.rdb = Arc::new(Vec::new());
        }
    }

    /// Shard `shard` recovered its log ending exactly on a mark (`None`: no
    /// mark, or records after it).
    pub fn recovered_mark(&self, shard: usize, end: Option<Exact>) {
        let mut slot = self.recovered.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(ends) = slot.as_mut() {
            ends[shard] = end;
        }
    }

    /// Once, when shard 0 first follows a primary after a start as a replica
    /// (`replicaof` set): the place every shard's data is at
    /// (`stream_mark::common_place`) made this server's replid, offset and
    /// stream database (as Redis restores them from its RDB's aux fields), so
    /// the link asks `PSYNC <replid> <offset+1>`. `Err`: the shards' logs do
    /// not meet (why, for the log): a full sync; `Ok(None)`: no shard had a
    /// mark, or the server started as a primary.
    pub fn restore_recovered(&self) -> Result<Option<Place>, String> {
        let taken = self
            .recovered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let Some(ends) = taken.filter(|_| self.continue_from_logs.load(Relaxed)) else {
            return Ok(None);
        };
        if ends.iter().all(Option::is_none) {
            return Ok(None);
        }
        if ends.iter().flatten().any(|end| end.mark.link) {
            return Err(
                "The shards' logs hold the places of shard links, which the single stream cannot continue: a full sync".to_string(),
            );
        }
        let place = crate::persistence::stream_mark::common_place(&ends)?;
        let mark = &place.mark;
        self.lock().replid = mark.replid.clone();
        self.offset.store(mark.offset, Relaxed);
        self.stream_db.store(mark.db as u64, Relaxed);
        for f in &self.fsynced {
            f.store(mark.offset as i64, Relaxed);
        }
        if let Some(targets) = &place.catch_up {
            let end = targets.iter().copied().max().unwrap_or(0);
            *self.catch_up.lock().unwrap_or_else(|e| e.into_inner()) = targets.clone();
            self.catch_up_end.store(end, Relaxed);
        }
        Ok(Some(place))
    }

    /// A primary answered a PSYNC (a full sync, or a continuation of a
    /// place): the data moves on from here, so the places the logs held at
    /// start no longer describe it, and no later link may restore one (a
    /// shard whose link has not asked yet full-syncs: correct, only slower).
    pub fn forget_recovered(&self) {
        *self.recovered.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Once, when shard `shard` of a replica on shard links first follows
    /// its primary after a start as a replica: the link's place its log
    /// ended exactly on (`None`: no link's mark, or records after it; the
    /// link full-syncs). Each link continues on its own: the shards' places
    /// need not meet, as each link's full sync is cut on its own.
    /// The link's book and the shard's own history then stand at the mark,
    /// as after a full sync cut there (`Link::for_shard` asks to continue
    /// from it; a sibling link's barrier before it skips the group's writes
    /// to this shard's keys, as after a full sync).
    pub fn restore_recovered_link(&self, shard: usize) -> Option<StreamMark> {
        if !self.continue_from_logs.load(Relaxed) {
            return None;
        }
        let mark = {
            let mut slot = self.recovered.lock().unwrap_or_else(|e| e.into_inner());
            let end = slot.as_mut()?.get_mut(shard)?;
            match end {
                Some(exact) if exact.mark.link => end.take().map(|exact| exact.mark)?,
                _ => return None,
            }
        };
        self.shard_link_full_sync(shard, &mark.replid, mark.offset);
        self.shard_links.book(shard).processed(0, mark.db);
        Some(mark)
    }

    /// The master client's command ending at stream offset `end` falls in a
    /// catch-up (see [`restore_recovered`](Self::restore_recovered)).
    #[inline]
    pub fn catching_up(&self, end: u64) -> bool {
        end <= self.catch_up_end.load(Relaxed)
    }

    /// A catch-up is under way (one load: the master client's commands check it).
    #[inline]
    pub fn in_catch_up(&self) -> bool {
        self.catch_up_end.load(Relaxed) > 0
    }

    /// Per shard, the offset up to which it already holds the stream's effects
    /// (empty: no catch-up).
    pub fn catch_up_targets(&self) -> Vec<u64> {
        self.catch_up
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The catch-up is over (passed, or given up for a full sync).
    pub fn end_catch_up(&self) {
        self.catch_up_end.store(0, Relaxed);
        self.catch_up
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// The server starts as a replica (`replicaof` set): its logs' place in the
    /// stream may be continued. A server started as a primary may take writes,
    /// so its logs' place no longer describes its data (Redis, too, continues
    /// from its own history then, not its old primary's).
    pub fn may_continue_from_logs(&self) {
        self.continue_from_logs.store(true, Relaxed);
    }

    /// Shard `shard`'s log fsynced the stream up to `offset`.
    pub fn set_fsynced(&self, shard: usize, offset: Option<u64>) {
        let offset = offset.map_or(-1, |o| o as i64);
        self.fsynced[shard].store(offset, Relaxed);
    }

    /// `REPLCONF ACK <offset>`, with `FACK <offset>` (what every shard's log
    /// fsynced, as Redis 7.2's replica with an AOF) when `logs`.
    pub fn ack(&self, logs: bool) -> Vec<u8> {
        let fack = self.fsynced.iter().map(|f| f.load(Relaxed)).min();
        let fack = fack.filter(|&f| logs && f >= 0).map(|f| f as u64);
        super::ack_command(self.offset(), fack)
    }

    /// Shard `shard`'s link's `REPLCONF ACK <offset>`, with `FACK <offset>`
    /// when `logs` (the last of the link's marks the shard's log fsynced:
    /// WAITAOF on the primary counts the replica once every link's did).
    pub fn link_ack(&self, shard: usize, logs: bool) -> Vec<u8> {
        let fack = self.fsynced[shard].load(Relaxed);
        let fack = (logs && fack >= 0).then_some(fack as u64);
        self.shard_links.book(shard).ack(fack)
    }

    /// Shard `shard`'s link changed state: the server's link is the worst
    /// of its links' (see `shard_links`).
    ///
    /// The offset becomes the links' sum only once they have a history (a
    /// link synced or continued one): until then it is the server's own
    /// history's, which the single stream continues if the primary refuses
    /// the links (a sum of 0 there asked a redis-server to send its whole
    /// backlog again, every command of it applied twice).
    pub fn shard_link_state(&self, shard: usize, link: LinkState, now_ms: u64) {
        self.shard_links.book(shard).set_state_at(link, now_ms);
        let (worst, offset) = self.shard_links.overall();
        self.set_link(worst, now_ms);
        if self.shard_links.followed() {
            self.links_server_offset.store(offset, Relaxed);
        }
    }

    /// Shard `shard`'s link began a full sync of its primary shard's
    /// `replid` at `offset`.
    pub fn shard_link_full_sync(&self, shard: usize, replid: &str, offset: u64) {
        // The server's own history (the single stream's primary's, if it
        // followed one) does not hold what the links apply: a single stream
        // later must not continue it.
        self.new_history();
        // Nor does its backlog: its single-stream replicas sync again.
        if self.primary.active() {
            self.primary.free_backlog();
            self.drop_replicas();
        }
        self.shows_links_offset.store(true, Relaxed);
        self.shard_links.book(shard).full_sync(replid, offset);
        self.links_server_offset
            .store(self.shard_links.overall().1, Relaxed);
        // The shard's own history becomes its link's: replicas of this
        // replica followed a history that ends here (Redis's
        // replicationAttachToNewMaster), a full sync of that shard again.
        // A cluster replica node's too: its sub-replicas get its master's
        // bytes at its master's offsets, as a Redis replica relays them
        // (its own replicas dropped: its master may be a shard node of this
        // process, whose replicas include this link).
        let node = self.node_history(shard);
        node.link_full_sync(replid, offset);
        match node.is_following() {
            true => node.drop_replicas(),
            false => self.drop_replicas(),
        }
    }

    /// The single stream follows the primary now: no link's history goes
    /// on, neither in the books nor in the shards' own histories that
    /// continued them (what the single stream applies is in none of them:
    /// a replica on links of this server, or after its promotion, must not
    /// continue one).
    pub fn forget_shard_links(&self) {
        for shard in 0..self.nodes.len() {
            let node = self.node_history(shard);
            if !self.shard_links.book(shard).replid().is_empty() && !node.is_following() {
                node.primary.free_backlog();
                node.new_history();
            }
        }
        self.shard_links.forget_all();
        self.shows_links_offset.store(false, Relaxed);
    }

    /// Shard `shard`'s link continued (`+CONTINUE [replid]`): the book and
    /// the shard's own history take the primary shard's new ID, if any;
    /// replicas of this replica learn it by connecting again.
    pub fn shard_link_continued(&self, shard: usize, replid: Option<&str>) {
        if !self.shows_links_offset.swap(true, Relaxed) {
            // The links take over from the single stream or from this
            // server's own stream (a FAILOVER's old primary): the server's
            // history starts again, made of what the shards apply from now.
            self.new_history();
            if self.primary.active() {
                self.primary.free_backlog();
                self.drop_replicas();
            }
        }
        self.shard_links.book(shard).continued(replid);
        let node = self.node_history(shard);
        if node.link_continued(replid) {
            match node.is_following() {
                true => node.drop_replicas(),
                false => self.drop_replicas(),
            }
        }
    }

    /// `bytes` of shard `shard`'s link stream were dispatched (the link's
    /// book and the shard's own history count them; the server's offset
    /// moves with the links' marks, [`Self::shard_link_marked`]). With
    /// `settled` (nothing of the link waits for another shard's answer)
    /// they are applied too (`LinkBook::applied`).
    #[inline]
    pub fn shard_link_processed(
        &self,
        shard: usize,
        bytes: &[u8],
        (db, settled): (usize, bool),
        now_ms: u64,
    ) {
        let n = bytes.len() as u64;
        let book = self.shard_links.book(shard);
        book.processed(n, db);
        self.node_history(shard).link_processed(bytes);
        if settled {
            book.settle();
        }
        self.last_io_ms.store(now_ms, Relaxed);
    }

    /// Shard `shard`'s link met a `RUVIO OFFSET` mark: the server's offset
    /// is the primary's server offset every link reached
    /// (`ShardLinks::server_offset`).
    pub fn shard_link_marked(&self, shard: usize, server_offset: u64) {
        self.shard_links.book(shard).marked(server_offset);
        self.node_history(shard).link_marked(server_offset);
        self.links_server_offset
            .store(self.shard_links.server_offset(), Relaxed);
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
