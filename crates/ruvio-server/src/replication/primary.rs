//! Ruvio as a primary, the server-wide part: the backlog (the stream's last
//! `repl-backlog-size` bytes, whose end is `master_repl_offset`, kept as the
//! shards' buffers came: [`super::backlog`]),
//! the replicas attached (for INFO, ROLE, WAIT and `min-replicas-to-write`), and
//! the cut a full sync starts from.
//!
//! Why one backlog for the server: a Redis replica follows one stream with one
//! offset, and a forward-mode Ruvio is one server. Each shard records its writes
//! into its own [`super::feed::Feed`] and appends them here once per loop
//! iteration under one lock, so the lock is taken once per iteration, not per
//! command; the shard hosting a replica's connection copies the new bytes to it
//! on its own loop (woken by the shards that appended, once until it looks
//! again: [`Primary::hosts_to_ring`]; under load in batches, `shard::primary`).
//!
//! **The cut.** A full sync's RDB must hold exactly what the stream before its
//! offset did. Shards snapshot at different moments, so each shard, when it
//! sees a sync requested, appends its pending records, begins its snapshot
//! (copy-on-write, `ruvio_engine::snapshot`) and marks its cut, all under the
//! backlog's lock; from then until every shard has cut, it keeps its new records
//! to itself. The sync's offset is the backlog's end when the last shard cuts:
//! every record before it is in some shard's snapshot, none after it is.
//!
//! **Barriers.** FLUSHALL, FLUSHDB and SWAPDB run on every shard, each at its
//! own moment, so the replica must get them once, after every shard's records
//! from before its run and before every record from after it (otherwise a
//! write on shard j between shard i's flush and shard j's is flushed on the
//! replica, or kept when it should not be). A shard's feed marks where the
//! command ran ([`super::feed::Mark`]); appending, a shard passes its marks in
//! order: its records before a mark go in, and its records after it wait here
//! ([`Barriers::held`]) until every shard has passed that barrier; the last to
//! pass appends the command once and the held records of every shard follow.
//! Barriers are numbered by the engine's count of such commands
//! (`Engine::every_shard_writes`): every shard runs every one (the client's
//! shard sends it to each), so the n-th of every shard is the same command,
//! except for two clients' flushes crossing (shard 0 runs A then B, shard 1 B
//! then A), where the stream has the first passer's. A shard joins a new
//! backlog's barriers with its count at its first step with the feed on
//! (having passed every barrier up to it): one it ran before is not waited
//! for, one it runs after is marked.
//! A barrier and a full sync's cut cannot both hold a shard: a shard waiting at
//! a barrier does not cut (its held records are not in the stream yet), and
//! when a shard that cut has to pass a barrier that others wait at, the cut is
//! abandoned (the replica connects again, as Redis's FLUSHALL kills the sync's
//! child). A barrier still open after [`BARRIER_WAIT_MAX`] (a shard that will
//! never pass it: should not happen) is given up: its command goes in as is,
//! and a warning says so.

use super::backlog::Backlog;
use super::feed::{self, Flushed};
use std::collections::VecDeque;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex, MutexGuard};

/// `repl-backlog-size`'s default, until shard 0's tick sets the configured one.
const DEFAULT_BACKLOG_BYTES: usize = 1 << 20;

/// The longest a barrier waits for every shard to pass it: each runs its part
/// within a loop iteration of its turn (milliseconds), so a barrier this old
/// waits for a shard that will never pass it (a safety net: a command of the
/// three that some shard ran without recording it).
pub const BARRIER_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(2);

/// Chunks of its RDB part a shard may queue before the host takes them.
pub const PART_CHUNKS_MAX: usize = 8;

/// One replica as INFO, ROLE and WAIT see it.
#[derive(Clone, Debug)]
pub struct ReplicaInfo {
    pub client_id: u64,
    /// The shard whose connection it is.
    pub host: usize,
    pub ip: String,
    pub port: u16,
    /// `wait_bgsave`, `send_bulk` or `online` (Redis's names).
    pub state: &'static str,
    pub ack_offset: u64,
    /// `REPLCONF ACK <offset> FACK <offset>`: what its own log has synced (0:
    /// never said).
    pub aof_offset: u64,
    pub last_ack_ms: u64,
    /// REPLCONF ACKs received (a diskless sync's stream starts after one).
    pub acks: u64,
}

/// One shard's part of a full sync's RDB, handed to the host shard in chunks.
#[derive(Debug, Default)]
pub struct Part {
    pub chunks: VecDeque<Vec<u8>>,
    /// Every key of the shard is in `chunks`.
    pub done: bool,
    pub failed: Option<String>,
}

/// A full sync in progress: the cut's offset once every shard cut, and each
/// shard's RDB part.
#[derive(Debug)]
pub struct SyncJob {
    pub id: u64,
    offset: AtomicU64,
    cut_done: AtomicBool,
    pub parts: Vec<Mutex<Part>>,
    /// The replica went away: the shards end their snapshots.
    pub abandoned: AtomicBool,
}

impl SyncJob {
    /// The offset the replica starts from, once every shard has cut.
    pub fn offset(&self) -> Option<u64> {
        self.cut_done
            .load(Acquire)
            .then(|| self.offset.load(Relaxed))
    }

    pub fn part(&self, shard: usize) -> MutexGuard<'_, Part> {
        self.parts[shard].lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[derive(Debug)]
struct Cut {
    job: Arc<SyncJob>,
    by: Vec<bool>,
    count: usize,
}

/// The barriers of the server's stream (see the module's docs). A barrier is
/// numbered by the engine's count of FLUSHALL, FLUSHDB and SWAPDB once it ran
/// (`Engine::every_shard_writes`): the n-th of every shard is the same
/// command, and a shard whose records start later (its feed was off) joins
/// with its count, having passed every barrier up to it.
#[derive(Debug, Default)]
struct Barriers {
    /// The last barrier each shard passed.
    passed: Vec<u64>,
    /// Barriers up to this one are in the stream (or were passed by every shard
    /// without a record: before any feed was on).
    done: u64,
    /// The commands of barriers after `done` (the first passer's, or the
    /// one that ran inside a transaction, which carries its start), with
    /// their database and that transaction's shard.
    records: std::collections::BTreeMap<u64, (usize, Vec<u8>, Option<usize>)>,
    /// A barrier that opened a shard's transaction went in: that shard's
    /// records after it (the rest of the transaction) go in first.
    first: Option<usize>,
    /// Each shard's records after the barrier it waits at.
    held: Vec<Option<Flushed>>,
    /// When the oldest open barrier opened.
    since: Option<std::time::Instant>,
}

impl Barriers {
    fn sized(&mut self, shards: usize) {
        if self.passed.len() != shards {
            *self = Barriers {
                passed: vec![self.done; shards],
                done: self.done,
                held: (0..shards).map(|_| None).collect(),
                ..Barriers::default()
            };
        }
    }

    /// Shard `shard` passed a barrier that is not in the stream yet.
    fn waiting(&self, shard: usize) -> bool {
        self.passed.get(shard).is_some_and(|&p| p > self.done)
    }

    /// Some shard waits at a barrier (see [`Primary::barrier_open`]).
    fn any_waiting(&self) -> bool {
        self.passed.iter().any(|&p| p > self.done)
    }
}

#[derive(Debug, Default)]
struct Inner {
    /// The stream's last bytes, and the offset of the first of them.
    backlog: Backlog,
    size: usize,
    /// The database the stream is in (`None`: the next record selects one).
    db: Option<usize>,
    replicas: Vec<ReplicaInfo>,
    cut: Option<Cut>,
    /// The sync under way (one at a time).
    sync: Option<Arc<SyncJob>>,
    next_sync_id: u64,
    /// Unix ms the last replica went away (for `repl-backlog-ttl`).
    alone_since_ms: u64,
    /// The stream bytes each replica (by client id) or sync (by [`sync_pin`])
    /// has taken so far: the backlog keeps every byte after the lowest, beyond
    /// `repl-backlog-size` if it must, as Redis's replication buffer is shared by
    /// the backlog and the replicas' outputs (each bounded by
    /// `client-output-buffer-limit replica`, which the host shard checks).
    pins: Vec<(u64, u64)>,
    barriers: Barriers,
}

/// The pin of a full sync, from its cut until its replica goes online.
fn sync_pin(job: u64) -> u64 {
    u64::MAX - job
}

/// The primary's shared state (in `replication::State`).
#[derive(Debug, Default)]
pub struct Primary {
    /// A backlog exists: shards record their writes.
    active: AtomicBool,
    /// A cut is under way: shards look for their part of it.
    cutting: AtomicBool,
    /// A shard passed a barrier not in the stream yet: records wait
    /// ([`barrier_open`](Self::barrier_open)).
    barrier_open: AtomicBool,
    /// Shards hosting a replica's connection (bit per shard): woken after an append.
    hosts: AtomicU64,
    /// Hosts whose doorbell was rung since they last looked at the backlog (bit
    /// per shard): one ring wakes a host for every append until its step, so a
    /// shard appending every loop iteration does not write the host's eventfd
    /// every iteration ([`hosts_to_ring`](Self::hosts_to_ring)).
    rung: AtomicU64,
    /// WAIT asked for acknowledgements: the next step sends `REPLCONF GETACK *`.
    getack: AtomicBool,
    /// Replicas attached, and those in touch within `min-replicas-max-lag`.
    connected: AtomicUsize,
    /// INFO stats' `sync_full`, `sync_partial_ok`, `sync_partial_err`.
    pub sync_full: AtomicU64,
    pub sync_partial_ok: AtomicU64,
    pub sync_partial_err: AtomicU64,
    /// Bytes the backlog holds (not counted against `maxmemory`).
    backlog_bytes: AtomicUsize,
    /// Backlogs created so far: a shard joins each one's barriers once.
    generation: AtomicU64,
    inner: Mutex<Inner>,
}

impl Primary {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Shards must record their writes.
    #[inline]
    pub fn active(&self) -> bool {
        self.active.load(Relaxed)
    }

    pub fn cutting(&self) -> bool {
        self.cutting.load(Acquire)
    }

    /// A shard passed a FLUSHALL, FLUSHDB or SWAPDB that others have not yet:
    /// its records after it wait, and are released shard by shard once every
    /// shard passed it, so a record made by one shard of another's key may
    /// land after that shard's later write of it (`shard::lending::home`'s
    /// `log_local_changes` sends such records home with the keys meanwhile).
    /// Set under the backlog's lock before a barrier's passer goes on, so a
    /// shard that learns of the barrier from a message sees it.
    pub fn barrier_open(&self) -> bool {
        self.barrier_open.load(Acquire)
    }

    /// What the request path reads without the lock, after a change under it.
    fn publish(&self, inner: &Inner) {
        self.backlog_bytes
            .store(inner.backlog.bytes_held(), Relaxed);
        self.barrier_open
            .store(inner.barriers.any_waiting(), Release);
    }

    /// Shards to wake after bytes were appended.
    pub fn hosts(&self) -> u64 {
        self.hosts.load(Relaxed)
    }

    /// The hosts (but those in `except`) to ring after bytes were appended:
    /// those not rung since their last look at the backlog
    /// ([`ring_answered`](Self::ring_answered)), now marked rung. Called after
    /// the append's lock is released: a host that answered before this call is
    /// rung again, one that answers after it reads the bytes.
    pub fn hosts_to_ring(&self, except: u64) -> u64 {
        let hosts = self.hosts() & !except;
        if hosts == 0 {
            return 0;
        }
        let rung_before = self.rung.fetch_or(hosts, AcqRel);
        hosts & !rung_before
    }

    /// Shard `shard` is about to copy the backlog to its replicas: the next
    /// append rings it again (before the copy, so no append is missed).
    pub fn ring_answered(&self, shard: usize) {
        let bit = 1u64 << (shard % 64);
        if self.rung.load(Acquire) & bit != 0 {
            self.rung.fetch_and(!bit, AcqRel);
        }
    }

    pub fn connected(&self) -> usize {
        self.connected.load(Relaxed)
    }

    /// Bytes the backlog holds.
    pub fn backlog_bytes(&self) -> u64 {
        self.backlog_bytes.load(Relaxed) as u64
    }

    /// Create the backlog (the first replica attaches, or this replica syncs), its
    /// first byte the one after `offset`, as Redis's createReplicationBacklog.
    /// `size` 0 keeps the size set last (`repl-backlog-size`, 1 MiB at first).
    pub fn create_backlog(&self, offset: u64, size: usize) {
        let mut inner = self.lock();
        if !self.active() {
            inner.backlog = Backlog::starting_at(offset + 1);
            inner.db = None;
            inner.barriers = Barriers::default();
            self.publish(&inner);
            self.generation.fetch_add(1, Relaxed);
            inner.size = match (size, inner.size) {
                (0, 0) => DEFAULT_BACKLOG_BYTES,
                (0, kept) => kept,
                (size, _) => size,
            };
            self.active.store(true, Release);
        }
    }

    /// A replica's stream, byte for byte as its primary sent it: the backlog
    /// keeps it and the offset counts it (the replica's own records are not
    /// kept meanwhile: its feed is off).
    pub fn append_stream(&self, bytes: &[u8], offset: &AtomicU64) {
        if !self.active() {
            offset.fetch_add(bytes.len() as u64, Relaxed);
            return;
        }
        let mut inner = self.lock();
        push(&mut inner, bytes, offset);
        self.backlog_bytes
            .store(inner.backlog.bytes_held(), Relaxed);
    }

    /// The stream's database is unknown (a promoted replica): the next record
    /// selects one.
    pub fn forget_db(&self) {
        self.lock().db = None;
    }

    /// `repl-backlog-size` changed.
    pub fn resize(&self, size: usize) {
        let mut inner = self.lock();
        inner.size = size.max(1);
        trim(&mut inner);
        self.backlog_bytes
            .store(inner.backlog.bytes_held(), Relaxed);
    }

    /// Drop the backlog (REPLICAOF makes this server a replica, or its TTL ran
    /// out with no replica): shards stop recording.
    pub fn free_backlog(&self) {
        let mut inner = self.lock();
        self.active.store(false, Release);
        inner.backlog = Backlog::starting_at(inner.backlog.first_offset());
        inner.db = None;
        inner.barriers = Barriers::default();
        self.publish(&inner);
    }

    /// Append a shard's records; `offset` is `master_repl_offset`, moved under
    /// the lock. Returns false when nothing was appended.
    pub fn append(&self, flushed: Flushed, offset: &AtomicU64) -> bool {
        if !self.active() {
            return false;
        }
        let mut inner = self.lock();
        append_locked(&mut inner, flushed, offset);
        self.backlog_bytes
            .store(inner.backlog.bytes_held(), Relaxed);
        true
    }

    /// Append shard `shard`'s records (of `shards`, the server's history in
    /// forward mode), passing the barriers among them: records after a barrier
    /// other shards have not passed yet wait here. Returns false when nothing
    /// was appended.
    pub fn append_shard(
        &self,
        (shard, shards): (usize, usize),
        flushed: Flushed,
        offset: &AtomicU64,
    ) -> bool {
        if !self.active() {
            return false;
        }
        let mut inner = self.lock();
        let before = offset.load(Relaxed);
        pass_barriers(&mut inner, (shard, shards), flushed, offset);
        self.publish(&inner);
        offset.load(Relaxed) != before
    }

    /// The backlog's number (see [`join`](Self::join)).
    pub fn generation(&self) -> u64 {
        self.generation.load(Relaxed)
    }

    /// Shard `shard` (of `shards`) records barriers from now on, having run
    /// `run` of them: it passed every barrier up to `run` (at its first step
    /// with the feed on, for each backlog).
    pub fn join(&self, (shard, shards): (usize, usize), run: u64, offset: &AtomicU64) {
        let mut inner = self.lock();
        inner.barriers.sized(shards);
        let passed = &mut inner.barriers.passed[shard];
        *passed = (*passed).max(run);
        drain_held(&mut inner, shards, offset);
        self.publish(&inner);
    }

    /// Shard `shard` waits at a barrier: records of its wait here (the
    /// tests' view; the request path reads [`barrier_open`](Self::barrier_open)).
    #[cfg(test)]
    pub fn at_barrier(&self, shard: usize) -> bool {
        self.lock().barriers.waiting(shard)
    }

    /// Barriers open longer than [`BARRIER_WAIT_MAX`] go in as they are (a
    /// shard will never pass them): true when some did.
    pub fn give_up_barriers(&self, offset: &AtomicU64) -> bool {
        let mut inner = self.lock();
        let overdue = inner
            .barriers
            .since
            .is_some_and(|since| since.elapsed() >= BARRIER_WAIT_MAX);
        if !overdue {
            return false;
        }
        crate::serverlog::log(
            crate::serverlog::Level::Warning,
            "A FLUSHALL, FLUSHDB or SWAPDB did not reach every shard's records: \
             replicated without waiting for the others",
        );
        let inner = &mut *inner;
        let shards = inner.barriers.passed.len();
        let last = inner.barriers.passed.iter().copied().max().unwrap_or(0);
        complete_barriers(inner, last, offset);
        for p in &mut inner.barriers.passed {
            *p = inner.barriers.done;
        }
        inner.barriers.since = None;
        drain_held(inner, shards, offset);
        self.publish(inner);
        true
    }

    /// A command of the server itself (PING to replicas, REPLCONF GETACK), in
    /// whatever database the stream is in.
    pub fn append_command(&self, args: &[&[u8]], offset: &AtomicU64) {
        if !self.active() {
            return;
        }
        let mut inner = self.lock();
        let mut bytes = Vec::new();
        feed::encode(&mut bytes, args);
        push(&mut inner, &bytes, offset);
        self.backlog_bytes
            .store(inner.backlog.bytes_held(), Relaxed);
    }

    /// WAIT wants acknowledgements now.
    pub fn request_getack(&self) {
        self.getack.store(true, Relaxed);
    }

    pub fn take_getack(&self) -> bool {
        self.getack.swap(false, Relaxed)
    }

    /// The bytes after `sent` up to the end, appended to `out` (at most
    /// `max_bytes`); the new `sent`. `None`: `sent` fell out of the backlog.
    pub fn copy_since(
        &self,
        client_id: u64,
        sent: u64,
        out: &mut Vec<u8>,
        max_bytes: usize,
    ) -> Option<u64> {
        let mut inner = self.lock();
        let copied = copy_locked(&inner, sent, out, max_bytes)?;
        set_pin(&mut inner, client_id, copied);
        trim(&mut inner);
        self.backlog_bytes
            .store(inner.backlog.bytes_held(), Relaxed);
        Some(copied)
    }

    /// A replica continuing from `sent`: the bytes after it stay until it has
    /// taken them.
    pub fn pin(&self, client_id: u64, sent: u64) {
        set_pin(&mut self.lock(), client_id, sent);
    }

    /// A full sync's replica starts from the cut: the bytes after it stay until
    /// the replica has taken them.
    pub fn pin_from_sync(&self, job: u64, client_id: u64, sent: u64) {
        let mut inner = self.lock();
        inner.pins.retain(|(id, _)| *id != sync_pin(job));
        set_pin(&mut inner, client_id, sent);
    }

    /// A partial resync from `next` (the first byte the replica needs) is
    /// possible: the backlog holds it (or it is the next byte to come).
    pub fn can_continue(&self, next: u64, offset: u64) -> bool {
        if !self.active() {
            return false;
        }
        let inner = self.lock();
        next >= inner.backlog.first_offset() && next <= offset + 1
    }

    /// INFO's backlog figures: active, first byte's offset, bytes held.
    pub fn backlog_info(&self) -> (bool, u64, usize) {
        let inner = self.lock();
        (
            self.active(),
            inner.backlog.first_offset(),
            inner.backlog.bytes_held(),
        )
    }

    /// A replica attached on shard `host`.
    pub fn attach(&self, info: ReplicaInfo) {
        let mut inner = self.lock();
        let host = info.host;
        inner.replicas.retain(|r| r.client_id != info.client_id);
        inner.replicas.push(info);
        self.hosts.fetch_or(1u64 << (host % 64), Relaxed);
        // Called on the host: it looks at the backlog from its next step.
        self.ring_answered(host);
        self.connected.store(inner.replicas.len(), Relaxed);
    }

    /// A replica went away.
    pub fn detach(&self, client_id: u64, now_ms: u64) {
        let mut inner = self.lock();
        inner.replicas.retain(|r| r.client_id != client_id);
        inner.pins.retain(|(id, _)| *id != client_id);
        trim(&mut inner);
        self.backlog_bytes
            .store(inner.backlog.bytes_held(), Relaxed);
        let mut hosts = 0;
        for r in &inner.replicas {
            hosts |= 1u64 << (r.host % 64);
        }
        self.hosts.store(hosts, Relaxed);
        self.connected.store(inner.replicas.len(), Relaxed);
        if inner.replicas.is_empty() {
            inner.alone_since_ms = now_ms;
        }
    }

    /// A replica's state changed (`online` after its RDB).
    pub fn set_state(&self, client_id: u64, state: &'static str, now_ms: u64) {
        let mut inner = self.lock();
        if let Some(r) = inner.replicas.iter_mut().find(|r| r.client_id == client_id) {
            r.state = state;
            r.last_ack_ms = now_ms;
        }
    }

    /// `REPLCONF ACK <offset> [FACK <aof offset>]` from a replica.
    pub fn acked(&self, client_id: u64, offset: u64, fack: Option<u64>, now_ms: u64) {
        let mut inner = self.lock();
        if let Some(r) = inner.replicas.iter_mut().find(|r| r.client_id == client_id) {
            r.ack_offset = r.ack_offset.max(offset);
            if let Some(fack) = fack {
                r.aof_offset = r.aof_offset.max(fack);
            }
            r.last_ack_ms = now_ms;
            r.acks += 1;
        }
    }

    /// REPLCONF ACKs replica `client_id` has sent.
    pub fn acks_of(&self, client_id: u64) -> u64 {
        let inner = self.lock();
        inner
            .replicas
            .iter()
            .find(|r| r.client_id == client_id)
            .map_or(0, |r| r.acks)
    }

    /// Replicas whose own log synced `offset` or more (WAITAOF).
    pub fn fsynced_at_least(&self, offset: u64) -> usize {
        let inner = self.lock();
        inner
            .replicas
            .iter()
            .filter(|r| r.state == "online" && r.aof_offset >= offset && r.aof_offset > 0)
            .count()
    }

    /// Replicas that acknowledged `offset` or more (WAIT).
    pub fn acked_at_least(&self, offset: u64) -> usize {
        let inner = self.lock();
        inner
            .replicas
            .iter()
            .filter(|r| r.state == "online" && r.ack_offset >= offset)
            .count()
    }

    /// Online replicas heard from within `max_lag_s` seconds (min-replicas).
    pub fn good_replicas(&self, now_ms: u64, max_lag_s: u64) -> usize {
        let inner = self.lock();
        inner
            .replicas
            .iter()
            .filter(|r| {
                r.state == "online" && now_ms.saturating_sub(r.last_ack_ms) / 1000 <= max_lag_s
            })
            .count()
    }

    /// A copy of the replicas (INFO, ROLE).
    pub fn replicas(&self) -> Vec<ReplicaInfo> {
        self.lock().replicas.clone()
    }

    /// How long no replica has been attached (0 while one is).
    pub fn alone_since_ms(&self) -> u64 {
        let inner = self.lock();
        match inner.replicas.is_empty() {
            true => inner.alone_since_ms,
            false => 0,
        }
    }

    /// Ask every shard to cut for a full sync; `None` while another sync runs.
    pub fn request_sync(&self, shards: usize) -> Option<Arc<SyncJob>> {
        let mut inner = self.lock();
        if inner.sync.is_some() {
            return None;
        }
        inner.next_sync_id += 1;
        let job = Arc::new(SyncJob {
            id: inner.next_sync_id,
            offset: AtomicU64::new(0),
            cut_done: AtomicBool::new(false),
            parts: (0..shards).map(|_| Mutex::default()).collect(),
            abandoned: AtomicBool::new(false),
        });
        inner.sync = Some(job.clone());
        inner.cut = Some(Cut {
            job: job.clone(),
            by: vec![false; shards],
            count: 0,
        });
        self.cutting.store(true, Release);
        Some(job)
    }

    /// The sync `id` ended (sent, failed or abandoned): the next may start.
    pub fn sync_ended(&self, id: u64) {
        let mut inner = self.lock();
        inner.pins.retain(|(pin, _)| *pin != sync_pin(id));
        if inner.sync.as_ref().is_some_and(|j| j.id == id) {
            if let Some(job) = inner.sync.take() {
                job.abandoned.store(true, Relaxed);
            }
            if inner.cut.as_ref().is_some_and(|c| c.job.id == id) {
                inner.cut = None;
                self.cutting.store(false, Release);
            }
        }
    }

    /// Shard `shard`'s cut, if a cut waits for it: its pending records are
    /// appended and `begin` (its snapshot) runs under the lock. Returns the job
    /// it cut for.
    pub fn cut(
        &self,
        shard: usize,
        feed: &mut super::feed::Feed,
        offset: &AtomicU64,
        begin: impl FnOnce(),
    ) -> Option<Arc<SyncJob>> {
        let mut inner = self.lock();
        let cut = inner.cut.as_ref()?;
        if cut.by[shard] {
            return None;
        }
        let shards = cut.by.len();
        if let Some(flushed) = feed.take() {
            pass_barriers(&mut inner, (shard, shards), flushed, offset);
            self.publish(&inner);
        }
        if inner.barriers.waiting(shard) {
            // Its held records are not in the stream: it cuts once the barrier
            // is passed, unless a shard that cut already has yet to pass it
            // (its records wait for the cut): then the cut gives way.
            let cut = inner.cut.as_ref().expect("checked above");
            let done = inner.barriers.done;
            let stuck = (0..shards).any(|s| cut.by[s] && inner.barriers.passed[s] <= done);
            if stuck {
                let job = cut.job.clone();
                crate::serverlog::log(
                    crate::serverlog::Level::Warning,
                    "A FLUSHALL, FLUSHDB or SWAPDB ran during a full sync's cut: \
                     the sync starts over",
                );
                job.abandoned.store(true, Relaxed);
                inner.cut = None;
                if inner.sync.as_ref().is_some_and(|j| j.id == job.id) {
                    inner.sync = None;
                }
                self.cutting.store(false, Release);
            }
            return None;
        }
        begin();
        let cut = inner.cut.as_mut().expect("checked above");
        cut.by[shard] = true;
        cut.count += 1;
        let job = cut.job.clone();
        if cut.count == cut.by.len() {
            let at = offset.load(Relaxed);
            job.offset.store(at, Relaxed);
            // The stream after the cut stays until the replica takes it.
            inner.pins.push((sync_pin(job.id), at));
            job.cut_done.store(true, Release);
            inner.cut = None;
            // A replica that loads an RDB starts in no database.
            inner.db = None;
            self.cutting.store(false, Release);
        }
        Some(job)
    }

    /// This shard cut already and others have not: its records must wait.
    pub fn holding(&self, shard: usize) -> bool {
        if !self.cutting() {
            return false;
        }
        let inner = self.lock();
        inner.cut.as_ref().is_some_and(|c| c.by[shard])
    }
}

/// Shard `shard`'s records into the stream up to the first barrier it cannot
/// pass yet; the rest waits in [`Barriers::held`].
fn pass_barriers(
    inner: &mut Inner,
    (shard, shards): (usize, usize),
    flushed: Flushed,
    offset: &AtomicU64,
) {
    let barriers = &mut inner.barriers;
    if flushed.marks.is_empty()
        && barriers.records.is_empty()
        && barriers.held.iter().all(Option::is_none)
    {
        // No barrier anywhere: the common case.
        append_locked(inner, flushed, offset);
        return;
    }
    barriers.sized(shards);
    match barriers.held[shard].as_mut() {
        Some(held) => held.extend(flushed),
        None => barriers.held[shard] = Some(flushed),
    }
    drain_held(inner, shards, offset);
}

/// Append every shard's held records up to the barriers they wait at, and
/// each barrier every shard has passed, until nothing moves.
fn drain_held(inner: &mut Inner, shards: usize, offset: &AtomicU64) {
    loop {
        let mut moved = false;
        let first = inner.barriers.first.take();
        let others = (0..shards).filter(|&shard| Some(shard) != first);
        for shard in first.into_iter().chain(others) {
            while !inner.barriers.waiting(shard) {
                let Some(held) = inner.barriers.held[shard].take() else {
                    break;
                };
                let (first_db, last_db) = (held.first_db, held.last_db);
                let (bytes, rest) = held.split_first();
                if !bytes.is_empty() {
                    append_locked(inner, Flushed::plain(bytes, first_db, last_db), offset);
                    if rest.is_some() {
                        // Its last record's database is not kept: the next
                        // record selects one.
                        inner.db = None;
                    }
                }
                moved = true;
                let Some((mark, rest)) = rest else {
                    break;
                };
                let barriers = &mut inner.barriers;
                barriers.passed[shard] = barriers.passed[shard].max(mark.seq);
                if mark.seq > barriers.done {
                    // A transaction's barrier carries its start: it is the
                    // one that goes in, whoever passed first.
                    let grouped = mark.group.map(|_| shard);
                    let entry = barriers.records.entry(mark.seq);
                    let record = (mark.db, mark.record, grouped);
                    match entry {
                        std::collections::btree_map::Entry::Vacant(e) => {
                            e.insert(record);
                        }
                        std::collections::btree_map::Entry::Occupied(mut e) => {
                            if grouped.is_some() && e.get().2.is_none() {
                                e.insert(record);
                            }
                        }
                    }
                    barriers.since.get_or_insert_with(std::time::Instant::now);
                }
                if !rest.bytes.is_empty() || !rest.marks.is_empty() {
                    barriers.held[shard] = Some(rest);
                }
            }
        }
        let everyone = inner.barriers.passed.iter().copied().min().unwrap_or(0);
        if inner.barriers.done < everyone {
            complete_barriers(inner, everyone, offset);
            moved = true;
        }
        if !moved {
            return;
        }
    }
}

/// Every barrier up to `upto` is passed: their commands go into the stream,
/// in order (a barrier nobody recorded, run before any feed was on, has none).
fn complete_barriers(inner: &mut Inner, upto: u64, offset: &AtomicU64) {
    while let Some(entry) = inner.barriers.records.first_entry() {
        if *entry.key() > upto {
            break;
        }
        let (db, record, grouped) = entry.remove();
        if grouped.is_some() {
            inner.barriers.first = grouped;
        }
        if inner.db != Some(db) {
            let mut select = Vec::new();
            let digits = db.to_string();
            feed::encode(&mut select, &[b"SELECT", digits.as_bytes()]);
            push(inner, &select, offset);
            inner.db = Some(db);
        }
        push(inner, &record, offset);
    }
    let barriers = &mut inner.barriers;
    barriers.done = barriers.done.max(upto);
    barriers.since = (!barriers.records.is_empty()).then(std::time::Instant::now);
}

fn set_pin(inner: &mut Inner, id: u64, sent: u64) {
    match inner.pins.iter_mut().find(|(pin, _)| *pin == id) {
        Some(pin) => pin.1 = sent,
        None => inner.pins.push((id, sent)),
    }
}

/// The bytes after `sent` up to the end (at most `max_bytes`) appended to `out`;
/// the new `sent`, or `None` when `sent` fell out of the backlog.
fn copy_locked(inner: &Inner, sent: u64, out: &mut Vec<u8>, max_bytes: usize) -> Option<u64> {
    let first = inner.backlog.first_offset();
    let end = first + inner.backlog.bytes_held() as u64;
    // `end` is one past the last byte's offset; `sent` counts bytes.
    let from = sent + 1;
    if from < first || from > end {
        return None;
    }
    let take = ((end - from) as usize).min(max_bytes);
    inner.backlog.copy_range((from - first) as usize, take, out);
    Some(sent + take as u64)
}

fn append_locked(inner: &mut Inner, flushed: Flushed, offset: &AtomicU64) {
    if inner.db != Some(flushed.first_db) {
        let db = flushed.first_db.to_string();
        let mut select = Vec::new();
        feed::encode(&mut select, &[b"SELECT", db.as_bytes()]);
        push(inner, &select, offset);
    }
    // The shard's buffer itself goes in: no copy under the lock.
    let len = flushed.bytes.len() as u64;
    inner.backlog.push(flushed.bytes);
    offset.fetch_add(len, Relaxed);
    trim(inner);
    inner.db = Some(flushed.last_db);
}

fn push(inner: &mut Inner, bytes: &[u8], offset: &AtomicU64) {
    inner.backlog.push_slice(bytes);
    offset.fetch_add(bytes.len() as u64, Relaxed);
    trim(inner);
}

fn trim(inner: &mut Inner) {
    let mut over = inner.backlog.bytes_held().saturating_sub(inner.size);
    // Never a byte a replica or a sync has not taken yet.
    if let Some(lowest) = inner.pins.iter().map(|(_, sent)| *sent).min() {
        let taken = (lowest + 1).saturating_sub(inner.backlog.first_offset()) as usize;
        over = over.min(taken);
    }
    if over > 0 {
        inner.backlog.drop_front(over);
    }
}

#[cfg(test)]
#[path = "primary_tests.rs"]
mod tests;
