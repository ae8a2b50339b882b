//! What one shard holds of being a primary: its [`Feed`], its snapshot for a full
//! sync in progress, the replicas whose connections it hosts, and the WAIT calls
//! of its clients. The loop's step over them is `shard::primary`, which owns the
//! connections; the server-wide part is [`super::primary`].

use super::feed::Feed;
use super::primary::SyncJob;
use ruvio_engine::rdb::file::Checksum;
use ruvio_engine::snapshot::Snapshot;
use std::sync::Arc;

/// A shard's part (in `ShardCore`).
#[derive(Default)]
pub struct ShardPart {
    pub feed: Feed,
    /// This shard's snapshot for the full sync under way.
    pub snapshot: Option<SyncSnapshot>,
    /// Replicas connected to this shard.
    pub hosted: Vec<Hosted>,
    /// Clients in WAIT.
    pub waiters: Vec<WaitFor>,
    /// A replica's shard, for a full sync of a replica of its own: shard 0
    /// paused the stream and every command of it before the pause ran here
    /// (`Control::ChainCut` came behind them), so this shard may cut.
    pub stream_cut: bool,
    /// Loop iterations in a row that left stream bytes unsent to this shard's
    /// replicas while more work waited (`shard::primary`'s batching).
    pub stream_held: u32,
    /// A replica on shard links: this shard's link waits at a barrier for
    /// another link ([`super::link_barrier`]).
    pub link_wait: Option<super::link_barrier::Wait>,
    /// Shards (a bit each) whose keys the next group of this shard's link
    /// leaves alone: their links loaded data cut after the group's barrier
    /// (`shard::replica::skipped_by_barrier`).
    pub link_skip: u64,
    /// Forward mode, a primary: the server offset of the last `RUVIO
    /// OFFSET` mark this shard put in its own history (`None`: one is due).
    pub link_marked: Option<u64>,
}

impl ShardPart {
    /// Nothing to step: no replica here, no snapshot, no WAIT.
    pub fn idle(&self) -> bool {
        self.snapshot.is_none() && self.hosted.is_empty() && self.waiters.is_empty()
    }

    /// The loop must not sleep: RDB bytes are being made or sent.
    pub fn busy(&self) -> bool {
        self.snapshot.is_some()
            || self
                .hosted
                .iter()
                .any(|h| !matches!(h.phase, Phase::Online { .. }))
    }
}

/// A shard's snapshot for a full sync: its keys go to the job's part.
pub struct SyncSnapshot {
    pub job: Arc<SyncJob>,
    /// The index of this shard's part in the job.
    pub part: usize,
    pub snapshot: Snapshot,
}

/// A replica whose connection this shard serves.
pub struct Hosted {
    /// Its connection (slab index, generation).
    pub who: (u32, u32),
    pub client_id: u64,
    /// It takes the diskless form `$EOF:<mark>` (REPLCONF capa eof); otherwise
    /// the RDB is gathered whole and sent as `$<length>`.
    pub eof: bool,
    /// SYNC (not PSYNC): no `+FULLRESYNC` line before the RDB.
    pub old_sync: bool,
    /// A Ruvio replica's link for this shard (forward mode): it follows the
    /// shard's own history, not the server's.
    pub shard_link: bool,
    /// `History::replicas_generation` of the history it follows when it
    /// attached: a later one closes it.
    pub generation: u64,
    pub phase: Phase,
}

/// Where a replica is.
pub enum Phase {
    /// Waiting for a sync to start (another one runs) or for every shard's cut.
    Cut(Option<Arc<SyncJob>>),
    /// Sending the RDB: the shards' parts in order.
    Rdb(Box<RdbSend>),
    /// Following the stream: `sent` bytes of it are in its connection. After a
    /// diskless RDB the stream waits for the replica's first REPLCONF ACK
    /// (`after_ack`: the ACKs it had sent by then), as Redis's does: a replica
    /// finds the RDB's end mark only at the end of what it read.
    Online { sent: u64, after_ack: Option<u64> },
}

/// An RDB on its way to a replica.
pub struct RdbSend {
    pub job: Arc<SyncJob>,
    /// The part being sent.
    pub part: usize,
    pub checksum: Checksum,
    /// The `$EOF:` mark, or the whole RDB gathered for the `$<length>` form.
    pub mark: String,
    pub whole: Vec<u8>,
}

/// WAITAOF's part of a wait: the log bytes of each shard that must be synced
/// (`local`: numlocal 1), and the replicas count their own logs' acks (FACK).
#[derive(Clone, Debug)]
pub struct AofWait {
    pub local: bool,
    /// `(shard, log bytes appended when WAITAOF ran)`; empty without a log.
    pub targets: Vec<(usize, u64)>,
}

/// A client in `WAIT numreplicas timeout` or `WAITAOF numlocal numreplicas timeout`.
pub struct WaitFor {
    pub who: (u32, u32),
    pub seq: u64,
    /// The offset its writes reached.
    pub offset: u64,
    /// Each shard's own history's offset then, for replicas on shard links
    /// (`replication::link_replicas`; empty: none counts).
    pub link_offsets: Vec<u64>,
    pub replicas: usize,
    /// Unix ms it gives up at (0: never).
    pub deadline_ms: u64,
    /// WAITAOF (its reply is `[numlocal, numreplicas]`).
    pub aof: Option<AofWait>,
}

/// Every shard's log synced the bytes it had appended when WAITAOF ran (`own`:
/// this shard's synced bytes, read from its log; the others' from their
/// gauges). False without a log.
pub fn log_synced(
    targets: &[(usize, u64)],
    me: usize,
    own: Option<u64>,
    gauges: &[crate::stats::ShardGauges],
) -> bool {
    !targets.is_empty()
        && targets.iter().all(|&(shard, target)| {
            let synced = match (shard == me, own) {
                (true, Some(own)) => own,
                _ => gauges[shard]
                    .log_synced_bytes
                    .load(std::sync::atomic::Ordering::Relaxed),
            };
            synced >= target
        })
}
