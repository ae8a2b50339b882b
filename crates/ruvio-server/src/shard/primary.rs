//! The shard's part of being a primary (see `replication::primary`), once per
//! loop iteration: record or stop recording writes, cut for a full sync, hand the
//! iteration's records to the backlog, write a slice of this shard's RDB part,
//! move RDB bytes and then the stream into the connections of the replicas this
//! shard hosts (the stream in batches while the loop has more work waiting:
//! each send to a replica costs kernel time, [`STREAM_BATCH_MIN_BYTES`]), and
//! answer WAIT. The tick of the shard that keeps a history
//! (shard 0 for the server's; in per-shard mode each shard for its own node's)
//! pings the replicas, frees a backlog nobody used for `repl-backlog-ttl`, and
//! judges `min-replicas-to-write`. Every step goes through the shard's
//! [`History`] (`replication::history`), whichever of the two it is.
//!
//! Here rather than in `replication` because it moves bytes into connections
//! and drives the engine's snapshot, which only the shard owns.

use super::Shard;
use crate::config::change::ConfigChange;
use crate::config::PortMode;
use crate::net::conn::Conn;
use crate::net::slab::Slab;
use crate::replication::history::History;
use crate::replication::primary::{Primary, PART_CHUNKS_MAX};
use crate::replication::serve::{log_synced, Hosted, Phase, RdbSend, SyncSnapshot, WaitFor};
use crate::replication::state::FailoverPhase;
use crate::shard::ShardCore;
use ruvio_engine::rdb::file::{header, Checksum, END_OF_KEYS};
use ruvio_engine::snapshot::Snapshot;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// Time a loop iteration spends writing its RDB part (as a BGSAVE slice).
const SLICE: Duration = Duration::from_micros(250);
/// Keys written between two looks at the clock.
const KEYS_PER_STEP: usize = 256;
/// Bytes of one chunk of a part.
const CHUNK_BYTES: usize = 1 << 20;
/// A replica's connection takes more RDB bytes only while less than this waits
/// to be sent to it (the shards make the RDB as fast as it leaves).
const UNSENT_MAX: usize = 8 << 20;
/// Stream bytes moved into one replica's connection per iteration at most.
const STREAM_STEP_BYTES: usize = 4 << 20;
/// While more completions wait for the loop (it goes round again at once),
/// stream bytes stay in the backlog until this many are there for a replica:
/// each send to a replica's socket costs the shard a few microseconds of
/// kernel time (the loopback or network stack, and waking the replica), so
/// under load one send of 16 KiB (some 150 SETs) replaces one per iteration.
/// Below the limit of [`STREAM_HOLD_ITERATIONS_MAX`] and never while the loop
/// would wait: an idle or lightly loaded server sends at once (the lag).
const STREAM_BATCH_MIN_BYTES: u64 = 16 << 10;
/// Loop iterations in a row stream bytes may wait for [`STREAM_BATCH_MIN_BYTES`]
/// to gather: a trickle of writes among many reads still reaches the replicas
/// within a few iterations (tens of microseconds at full load).
const STREAM_HOLD_ITERATIONS_MAX: u32 = 8;
const _: () = assert!(STREAM_BATCH_MIN_BYTES < STREAM_STEP_BYTES as u64);

impl Shard {
    /// Replication's step of the loop iteration: a few loads and branches
    /// while no backlog exists and this shard serves no replica and no WAIT.
    pub(super) fn primary_step(&mut self) {
        // Completions wait for this ring (the kernel flags them under
        // DEFER_TASKRUN): the loop goes round again at once.
        let more_waiting = self.ring.submission().taskrun();
        let state = &self.core.shared.replication;
        let mode = self.core.cfg.port_mode;
        let history = state.history(self.core.id, mode);
        // In forward mode this shard's own history exists while a Ruvio
        // replica's link for this shard follows it (`REPLCONF ruvio-shard`).
        let link = mode == PortMode::Forward && state.node_history(self.core.id).primary.active();
        // A replica's backlog takes its primary's stream, not its own
        // records; but on shard links the server's history is made of what
        // its shards apply (its shards' own histories take their links').
        let follows = state.follows_a_primary();
        let records_applied = follows && state.records_applied();
        // A cluster replica node (per-shard mode): its history is its link's
        // bytes (`History::link_processed`), never its own records.
        let relays = history.is_following();
        let active = !relays
            && ((history.primary.active() && (!follows || records_applied)) || (link && !follows));
        // A replica's shards cut for a replica of its own (and record only
        // on shard links).
        let cutting = history.primary.cutting();
        if state.feed_awaited(self.core.id) {
            // A promotion: writes are taken once every shard records them.
            let shared = self.core.shared.clone();
            if self.core.replication.feed.on() != active {
                set_feeding(&mut self.core, active);
            }
            shared.replication.feed_ready(self.core.id);
        }
        if !cutting {
            self.core.replication.stream_cut = false;
        }
        if !active && !cutting && self.core.replication.idle() {
            if self.core.replication.feed.on() {
                set_feeding(&mut self.core, false);
            }
            return;
        }
        let shared = self.core.shared.clone();
        let history = shared.replication.history(self.core.id, mode);
        let node = shared.replication.node_history(self.core.id);
        let link = link.then_some(node);
        let records_link = link.filter(|_| !follows);
        // A replica on shard links cuts its shard for a link of its own
        // replica between two whole commands of its link's stream.
        let link_at_rest = self.shard_link_at_rest();
        let primary = history.primary;
        let core = &mut self.core;
        let part = history.part_of(core.id);
        if core.replication.feed.on() != active {
            set_feeding(core, active);
        }
        // Every shard runs FLUSHALL, FLUSHDB and SWAPDB: the server's stream
        // takes them once (`replication::primary`'s barriers).
        let barriers = history.count > 1 && history.primary.active();
        core.replication.feed.set_barriers(barriers);
        if barriers {
            // Numbered by the engine's count (one that ran while marks were
            // off is not waited for); this shard's first numbered step joins.
            let run = core.engine.every_shard_writes();
            core.replication.feed.sync_seq(run);
            let generation = history.primary.generation();
            if core.replication.feed.joined != generation {
                core.replication.feed.joined = generation;
                history
                    .primary
                    .join((part, history.count), run, history.offset_counter());
            }
        }
        let mut appended = false;
        // A replica's shard cuts where shard 0 paused the stream (see
        // `shard::replica`): its data then is the stream's up to the offset.
        // On shard links its shards cut as a primary's (they record).
        // A replica node's cuts between two whole commands of its link's
        // stream (its offset then is what its data holds).
        let may_cut = match relays {
            true => link_at_rest,
            false => !follows || records_applied || core.replication.stream_cut,
        };
        if primary.cutting()
            && may_cut
            && core.replication.snapshot.is_none()
            && !core.background_save.busy()
        {
            // What is recorded goes to every history first, so the cut finds
            // nothing pending.
            appended |= flush_records(core, history, records_link);
            let (engine, now_ms) = (&mut core.engine, core.now_ms);
            let mut begun = None;
            let job = primary.cut(
                part,
                &mut core.replication.feed,
                history.offset_counter(),
                || begun = Some(Snapshot::begin(engine, now_ms)),
            );
            if let (Some(job), Some(snapshot)) = (job, begun) {
                core.lending.snapshot_taken();
                core.replication.stream_cut = false;
                core.replication.snapshot = Some(SyncSnapshot {
                    job,
                    part,
                    snapshot,
                });
            }
        }
        if let Some(link) = link {
            // A shard link's full sync cuts this shard alone, once the
            // server's cut holds none of its records (they would land after
            // the link's cut although its snapshot has their writes).
            let free = core.replication.snapshot.is_none()
                && !core.background_save.busy()
                && !primary.holding(part)
                && link_at_rest;
            if link.primary.cutting() && free {
                appended |= flush_records(core, history, records_link);
                let (engine, now_ms) = (&mut core.engine, core.now_ms);
                let mut begun = None;
                let job =
                    link.primary
                        .cut(0, &mut core.replication.feed, link.offset_counter(), || {
                            begun = Some(Snapshot::begin(engine, now_ms))
                        });
                if let (Some(job), Some(snapshot)) = (job, begun) {
                    core.lending.snapshot_taken();
                    core.replication.snapshot = Some(SyncSnapshot {
                        job,
                        part: 0,
                        snapshot,
                    });
                    if !shared.replication.follows_a_primary() {
                        // The link's stream after its RDB says at once where
                        // the server's history stands (an idle primary
                        // sends no other mark). A replica's own histories
                        // carry its primary's marks only, at its offsets.
                        let server_offset = history.offset();
                        link.mark_server_offset(server_offset);
                        core.replication.link_marked = Some(server_offset);
                    }
                }
            }
            if link.primary.take_getack() {
                link.primary
                    .append_command(&[b"REPLCONF", b"GETACK", b"*"], link.offset_counter());
            }
        }
        appended |= flush_records(core, history, records_link);
        // A replica node relays its master's GETACKs, sends none of its own.
        if !relays && primary.take_getack() {
            primary.append_command(&[b"REPLCONF", b"GETACK", b"*"], history.offset_counter());
            appended = true;
        }
        if appended {
            wake_hosts(primary, Some(core.id));
        }
        write_part(core);
        serve_replicas(core, &mut self.conns, (history, node), more_waiting);
        answer_waits(core, &mut self.conns, history);
    }

    /// Hand this shard's records to the backlog now (before replies leave it).
    pub(super) fn flush_feed(&mut self) {
        flush_feed(&mut self.core);
    }

    /// A replica here has stream bytes still to get: the loop must not sleep.
    pub(super) fn replica_behind(&self) -> bool {
        let hosted = &self.core.replication.hosted;
        !hosted.is_empty() && {
            let state = &self.core.shared.replication;
            let offset = state
                .history(self.core.id, self.core.cfg.port_mode)
                .offset();
            let link_offset = state.node_history(self.core.id).offset();
            hosted.iter().any(|h| {
                let offset = if h.shard_link { link_offset } else { offset };
                matches!(h.phase, Phase::Online { sent, after_ack: None } if sent < offset)
            })
        }
    }

    /// The once-a-tick duties of a history's shard: shard 0 for the server's,
    /// each shard for its own node's in per-shard mode.
    pub(super) fn primary_tick(&mut self) {
        let per_shard = self.core.cfg.port_mode == PortMode::PerShard;
        if !per_shard {
            self.shard_link_tick();
        }
        if self.core.id != 0 && !per_shard {
            return;
        }
        let shared = self.core.shared.clone();
        let state = &shared.replication;
        let history = state.history(self.core.id, self.core.cfg.port_mode);
        let primary = history.primary;
        let now = self.core.now_ms;
        if state.take_failover_unpause() {
            crate::shard::end_pause(&mut self.core, &mut self.conns);
            self.core.outbox.broadcast(ConfigChange::Unpause);
        }
        let param = |name: &str| self.core.cfg.param(name).parse::<u64>().unwrap_or(0);
        if primary.active() {
            primary.resize(param("repl-backlog-size") as usize);
            if !per_shard && primary.give_up_barriers(history.offset_counter()) {
                wake_hosts(primary, Some(self.core.id));
            }
        }
        if history.is_following() {
            // A cluster replica node relays its master's stream, PINGs
            // included, and keeps it for after a promotion (Redis's
            // replicationCron pings from masters only).
            self.next_replica_ping_ms = 0;
            return;
        }
        if state.follows_a_primary() {
            // A replica keeps its primary's stream in its backlog, for its
            // own replicas and for after a promotion: they get the primary's
            // PINGs, and writes are its primary's to refuse. On shard links
            // its server history is its own: its replicas get its PINGs.
            if state.records_applied() && primary.connected() > 0 {
                let period_s = param("repl-ping-replica-period");
                let me = self.core.id;
                ping_replicas(&mut self.next_replica_ping_ms, (now, me), history, period_s);
            } else {
                self.next_replica_ping_ms = 0;
            }
            return;
        }
        // A cluster node's manual failover holds its PINGs too: one would
        // move the offset its replica waits for (Redis's replicationCron).
        let takes_links = self.core.cfg.takes_shard_links();
        let failing_over = update_failover(state, now, takes_links)
            || self
                .core
                .cluster_node
                .as_deref()
                .is_some_and(|node| node.cluster.pausing_for_failover());
        if primary.connected() > 0 && !failing_over {
            let period_s = param("repl-ping-replica-period");
            let me = self.core.id;
            ping_replicas(&mut self.next_replica_ping_ms, (now, me), history, period_s);
        } else {
            self.next_replica_ping_ms = 0;
            let ttl_ms = param("repl-backlog-ttl") * 1000;
            let alone = primary.alone_since_ms();
            // The server's history lives while a shard's own does: its
            // offset is the one the links' marks name.
            let links = !per_shard && state.shard_histories_active();
            if primary.active()
                && ttl_ms > 0
                && alone != 0
                && now.saturating_sub(alone) > ttl_ms
                && !links
            {
                primary.free_backlog();
            }
        }
        let (min_to_write, max_lag) = (
            param("min-replicas-to-write"),
            param("min-replicas-max-lag"),
        );
        let refused = min_to_write > 0
            && max_lag > 0
            && (history.good_replicas(now, max_lag) as u64) < min_to_write;
        history.set_writes_refused(refused);
    }
}

/// A PING into `history`'s stream every `period_s` seconds (Redis's
/// replicationCron), the first a period after its replicas came; shard `me`
/// sends it at `now` (ms), `next_ping_ms` its schedule.
fn ping_replicas(
    next_ping_ms: &mut u64,
    (now, me): (u64, usize),
    history: History<'_>,
    period_s: u64,
) {
    if now >= *next_ping_ms {
        if *next_ping_ms != 0 {
            let primary = history.primary;
            primary.append_command(&[b"PING"], history.offset_counter());
            wake_hosts(primary, Some(me));
        }
        *next_ping_ms = now + period_s.max(1) * 1000;
    }
}

impl Shard {
    /// Forward mode: this shard's own history while a Ruvio replica's link for
    /// this shard follows it, bounded by `repl-backlog-size`, pinged every
    /// `repl-ping-replica-period`, and dropped once no link was attached for
    /// `repl-backlog-ttl` (then the shard records for the server's history
    /// alone, or nothing).
    fn shard_link_tick(&mut self) {
        let shared = self.core.shared.clone();
        let node = shared.replication.node_history(self.core.id);
        let primary = node.primary;
        if !primary.active() {
            return;
        }
        let param = |name: &str| self.core.cfg.param(name).parse::<u64>().unwrap_or(0);
        primary.resize(param("repl-backlog-size") as usize);
        if shared.replication.follows_a_primary() {
            // A replica on shard links keeps its link's stream here, for its
            // own replicas and after a promotion: they get the primary's
            // PINGs, and the backlog lives on.
            return;
        }
        let now = self.core.now_ms;
        // Where the server's history stands, once a tick when it moved
        // (`replication::link_barrier`'s server offset marks): the
        // replica's offset follows the server's, never more than a tick
        // behind its links' streams.
        let server_offset = shared.replication.offset();
        if self.core.replication.link_marked != Some(server_offset) {
            node.mark_server_offset(server_offset);
            self.core.replication.link_marked = Some(server_offset);
        }
        if primary.connected() > 0 {
            let period_ms = param("repl-ping-replica-period").max(1) * 1000;
            if now >= self.next_link_ping_ms {
                if self.next_link_ping_ms != 0 {
                    primary.append_command(&[b"PING"], node.offset_counter());
                    // Again on the ping period: a replica on links of a
                    // replica of this one, synced meanwhile, learns it.
                    node.mark_server_offset(server_offset);
                }
                self.next_link_ping_ms = now + period_ms;
            }
        } else {
            self.next_link_ping_ms = 0;
            let ttl_ms = param("repl-backlog-ttl") * 1000;
            let alone = primary.alone_since_ms();
            if ttl_ms > 0 && alone != 0 && now.saturating_sub(alone) > ttl_ms {
                primary.free_backlog();
            }
        }
    }
}

/// FAILOVER waiting for its replica (Redis's updateFailoverStatus): at the
/// timeout, fail over anyway (FORCE) or give up; once the target (or any
/// replica) acknowledged every byte, follow it and ask it to take over. No
/// GETACK or PING goes out meanwhile: they would move the offset it must reach.
/// Replicas on shard links count when this server follows on links
/// (`takes_links`). Returns true while a failover is under way.
fn update_failover(state: &crate::replication::State, now: u64, takes_links: bool) -> bool {
    let failover = state.ids().failover;
    if failover.phase != FailoverPhase::WaitForSync {
        return failover.phase != FailoverPhase::None;
    }
    if failover.end_ms != 0 && now >= failover.end_ms {
        match (failover.force, failover.target) {
            (true, Some((host, port))) => {
                crate::serverlog::log(
                    crate::serverlog::Level::Notice,
                    &format!("FAILOVER to {host}:{port} time out exceeded, failing over."),
                );
                state.failover_to(&host, port, failover.on_links);
            }
            _ => state.end_failover(Some("Replica never caught up before timeout")),
        }
        return true;
    }
    // A replica on shard links shows the server offset its links
    // acknowledged (`link_replicas`), comparable with this one.
    let offset = state.offset();
    let single = state.primary.replicas().into_iter().map(|r| (r, false));
    let linked = match takes_links {
        true => crate::replication::link_replicas::linked_replicas(state),
        false => Vec::new(),
    };
    let linked = linked.iter().map(|r| (r.as_info(), true));
    let caught_up = single.chain(linked).find(|(r, _)| {
        let named = failover
            .target
            .as_ref()
            .is_none_or(|(host, port)| r.ip.eq_ignore_ascii_case(host) && r.port == *port);
        named && r.state == "online" && r.ack_offset == offset
    });
    if let Some((r, on_links)) = caught_up {
        crate::serverlog::log(
            crate::serverlog::Level::Notice,
            &format!(
                "Failover target {}:{} is synced, failing over.",
                r.ip, r.port
            ),
        );
        state.failover_to(&r.ip, r.port, on_links);
    }
    true
}

/// Record writes for the backlog, or stop; expired keys are reported by the
/// engine while recording (replicas get their DELs) or notifications want them.
fn set_feeding(core: &mut ShardCore, on: bool) {
    core.replication.feed.set_on(on);
    // The old master client's commands still on their way here are in the
    // backlog already (a promoted replica's history is its primary's bytes).
    let old_master = core.shared.replication.master_client();
    core.replication.feed.skip_client(old_master);
    let flags = core.cfg.notify_keyspace_events;
    core.engine
        .record_expired(crate::messaging::notify::expiry_wanted(flags) || on);
}

/// Hand the feed's records to the histories that take them: the server's (a
/// node's in per-shard mode) and, while a Ruvio replica's link for this shard
/// follows it, this shard's own (`link`, forward mode). While the server's cut
/// holds this shard's records both wait, so each history gets every record
/// once and in order. True when bytes were appended.
fn flush_records(core: &mut ShardCore, history: History<'_>, link: Option<History<'_>>) -> bool {
    if core.replication.feed.is_empty() || history.primary.holding(history.part_of(core.id)) {
        return false;
    }
    let Some(mut flushed) = core.replication.feed.take() else {
        return false;
    };
    let mut appended = false;
    if let Some(link) = link {
        // A shard link's stream is this shard's records, its FLUSHALLs and
        // its barrier records too.
        appended |= link
            .primary
            .append(flushed.inlined(), link.offset_counter());
    }
    // Ruvio's own records: never in the stream a redis-server replica reads.
    flushed.link_only.clear();
    let shard = (history.part_of(core.id), history.count);
    history
        .primary
        .append_shard(shard, flushed, history.offset_counter())
        || appended
}

/// Hand this shard's records to every history that takes them now: before
/// its replies leave it, and before a WAIT reads the offsets its client's
/// writes reached.
pub(crate) fn flush_feed(core: &mut ShardCore) {
    if core.replication.feed.is_empty() {
        return;
    }
    let shared = core.shared.clone();
    let mode = core.cfg.port_mode;
    let history = shared.replication.history(core.id, mode);
    let node = shared.replication.node_history(core.id);
    // A replica's shards' own histories take their links' bytes only.
    let follows = shared.replication.follows_a_primary();
    let link = (mode == PortMode::Forward && node.primary.active() && !follows).then_some(node);
    // This shard's own replicas need no ring: their unsent bytes keep its
    // loop from sleeping (`replica_behind`).
    if flush_records(core, history, link) {
        wake_hosts(history.primary, Some(core.id));
        if let Some(link) = link {
            wake_hosts(link.primary, Some(core.id));
        }
    }
}

/// A replica applied bytes of its primary's stream (into its backlog): the
/// shards hosting replicas of its own copy them on (this one at its step).
pub(crate) fn wake_stream_hosts(core: &ShardCore) {
    let primary = &core.shared.replication.primary;
    if primary.hosts() != 0 {
        wake_hosts(primary, Some(core.id));
    }
}

/// Wake the shards hosting replicas (but `me`, whose own step comes next),
/// each once until it next looks at the backlog (`Primary::hosts_to_ring`).
fn wake_hosts(primary: &Primary, me: Option<usize>) {
    let me = me.map_or(0, |me| 1u64 << (me % 64));
    let hosts = primary.hosts_to_ring(me);
    if hosts == 0 {
        return;
    }
    for shard in 0..64 {
        if hosts & (1 << shard) != 0 {
            crate::mesh::forward::ring(shard);
        }
    }
}

/// A slice of this shard's RDB part for the sync under way.
fn write_part(core: &mut ShardCore) {
    let Some(mut sync) = core.replication.snapshot.take() else {
        return;
    };
    let part = sync.part;
    if sync.job.abandoned.load(Relaxed) {
        let _ = sync.snapshot.end(&mut core.engine);
        return;
    }
    let began = Instant::now();
    loop {
        if sync.job.part(part).chunks.len() >= PART_CHUNKS_MAX {
            break;
        }
        let mut chunk = Vec::with_capacity(CHUNK_BYTES);
        let mut done = false;
        while chunk.len() < CHUNK_BYTES && began.elapsed() < SLICE {
            if sync
                .snapshot
                .step(&mut core.engine, &mut chunk, KEYS_PER_STEP)
            {
                done = true;
                break;
            }
        }
        let job = sync.job.clone();
        let mut mine = job.part(part);
        if !chunk.is_empty() {
            mine.chunks.push_back(chunk);
        }
        if done {
            if let Err(e) = sync.snapshot.end(&mut core.engine) {
                mine.failed = Some(e);
            }
            mine.done = true;
            return;
        }
        if began.elapsed() >= SLICE {
            break;
        }
    }
    core.replication.snapshot = Some(sync);
}

/// Move RDB bytes and stream bytes into the connections of this shard's
/// replicas: each follows `history`, or `node` (this shard's own) for a Ruvio
/// replica's shard link. While `more_waiting` (completions wait for the
/// loop), stream bytes may gather in the backlog ([`STREAM_BATCH_MIN_BYTES`]).
fn serve_replicas(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    (history, node): (History<'_>, History<'_>),
    more_waiting: bool,
) {
    // What other shards append from now on rings this shard again (the
    // server's primary too: a replica's shard 0 rings its hosts through it,
    // `wake_stream_hosts`, whichever history they follow).
    history.primary.ring_answered(core.id);
    node.primary.ring_answered(core.id);
    core.shared.replication.primary.ring_answered(core.id);
    if core.replication.hosted.is_empty() {
        let gauge = &core.shared.shards[core.id].replica_output_bytes;
        if gauge.load(Relaxed) != 0 {
            gauge.store(0, Relaxed);
        }
        return;
    }
    // Replicas attached before the history changed connect again.
    let hold = more_waiting && core.replication.stream_held < STREAM_HOLD_ITERATIONS_MAX;
    let mut held = false;
    let mut hosted = std::mem::take(&mut core.replication.hosted);
    hosted.retain_mut(|h| {
        let history = if h.shard_link { node } else { history };
        let primary = history.primary;
        let Some(conn) = conns.get_mut(h.who.0, h.who.1) else {
            gone(primary, h, core.now_ms);
            return false;
        };
        let dropped = h.generation != history.replicas_generation();
        if conn.client.closing || conn.client.killed || dropped {
            conn.client.closing = true;
            core.dirty.push(h.who);
            gone(primary, h, core.now_ms);
            return false;
        }
        let kept = step_replica(core, conn, h, history, hold, &mut held);
        if !kept {
            conn.client.closing = true;
            conn.client.killed = true;
            gone(primary, h, core.now_ms);
        }
        core.dirty.push(h.who);
        kept
    });
    let output: usize = hosted
        .iter()
        .filter_map(|h| conns.get_mut(h.who.0, h.who.1).map(|c| unsent(c)))
        .sum();
    core.shared.shards[core.id]
        .replica_output_bytes
        .store(output as u64, Relaxed);
    core.replication.hosted = hosted;
    core.replication.stream_held = match held {
        true => core.replication.stream_held + 1,
        false => 0,
    };
}

/// A replica's connection went away: the server forgets it, and its sync.
fn gone(primary: &Primary, h: &Hosted, now_ms: u64) {
    primary.detach(h.client_id, now_ms);
    match &h.phase {
        Phase::Cut(Some(job)) => primary.sync_ended(job.id),
        Phase::Rdb(send) => primary.sync_ended(send.job.id),
        _ => {}
    }
}

fn unsent(conn: &Conn) -> usize {
    conn.replies.pending_bytes() + conn.sending.len().saturating_sub(conn.send_offset)
}

/// One replica's step; false when its connection must close. With `hold`,
/// fewer than [`STREAM_BATCH_MIN_BYTES`] of new stream bytes stay in the
/// backlog (`held` says some did).
fn step_replica(
    core: &mut ShardCore,
    conn: &mut Conn,
    h: &mut Hosted,
    history: History<'_>,
    hold: bool,
    held: &mut bool,
) -> bool {
    let (primary, shards, offset) = (history.primary, history.count, history.offset());
    let now = core.now_ms;
    loop {
        match &mut h.phase {
            Phase::Cut(None) => match primary.request_sync(shards) {
                Some(job) => h.phase = Phase::Cut(Some(job)),
                None => return true,
            },
            Phase::Cut(Some(job)) => {
                if job.abandoned.load(Relaxed) {
                    // A FLUSHALL, FLUSHDB or SWAPDB crossed the cut.
                    primary.sync_ended(job.id);
                    return false;
                }
                let Some(at) = job.offset() else {
                    return true;
                };
                let replid = history.ids().replid;
                let mark = crate::replication::state::new_replid();
                let out = conn.replies.sink();
                if !h.old_sync {
                    out.extend_from_slice(format!("+FULLRESYNC {replid} {at}\r\n").as_bytes());
                }
                crate::serverlog::log(
                    crate::serverlog::Level::Notice,
                    &format!(
                        "Starting BGSAVE for SYNC with target: replicas sockets (offset {at})"
                    ),
                );
                let mut send = RdbSend {
                    job: job.clone(),
                    part: 0,
                    checksum: Checksum::default(),
                    mark,
                    whole: Vec::new(),
                };
                if h.eof {
                    out.extend_from_slice(format!("$EOF:{}\r\n", send.mark).as_bytes());
                }
                let mut head = header(ruvio_engine::rdb::RDB_VERSION);
                head.extend_from_slice(&ruvio_engine::scripting::functions::rdb_records());
                rdb_bytes(conn, h.eof, &mut send, &head);
                // The stream after the cut waits in the backlog for this replica.
                primary.pin_from_sync(job.id, h.client_id, at);
                primary.set_state(h.client_id, "send_bulk", now);
                h.phase = Phase::Rdb(Box::new(send));
            }
            Phase::Rdb(send) => {
                while unsent(conn) < UNSENT_MAX {
                    let job = send.job.clone();
                    if send.part == shards {
                        let mut tail = vec![END_OF_KEYS];
                        rdb_bytes(conn, h.eof, send, &tail);
                        tail = std::mem::take(&mut send.checksum).finish().to_vec();
                        let out = conn.replies.sink();
                        if h.eof {
                            out.extend_from_slice(&tail);
                            out.extend_from_slice(send.mark.as_bytes());
                        } else {
                            send.whole.extend_from_slice(&tail);
                            out.extend_from_slice(format!("${}\r\n", send.whole.len()).as_bytes());
                            out.append(&mut send.whole);
                        }
                        let at = job.offset().unwrap_or(offset);
                        primary.sync_ended(job.id);
                        primary.set_state(h.client_id, "online", now);
                        crate::serverlog::log(
                            crate::serverlog::Level::Notice,
                            "Synchronization with replica succeeded",
                        );
                        // A diskless RDB's stream waits for the first ACK.
                        let after_ack = h.eof.then(|| primary.acks_of(h.client_id));
                        h.phase = Phase::Online {
                            sent: at,
                            after_ack,
                        };
                        break;
                    }
                    let mut part = job.part(send.part);
                    if let Some(e) = part.failed.take() {
                        crate::serverlog::log(
                            crate::serverlog::Level::Warning,
                            &format!(
                                "SYNC failed: shard {} could not write its keys: {e}",
                                send.part
                            ),
                        );
                        drop(part);
                        primary.sync_ended(job.id);
                        return false;
                    }
                    match part.chunks.pop_front() {
                        Some(chunk) => {
                            drop(part);
                            rdb_bytes(conn, h.eof, send, &chunk);
                        }
                        None if part.done => send.part += 1,
                        None => return true,
                    }
                }
                if !matches!(h.phase, Phase::Online { .. }) {
                    return true;
                }
            }
            Phase::Online { sent, after_ack } => {
                if let Some(acks) = *after_ack {
                    if primary.acks_of(h.client_id) <= acks {
                        return true;
                    }
                    *after_ack = None;
                }
                // The stream waits in the replica's output, bounded by
                // `client-output-buffer-limit replica` as in Redis (a replica
                // loading its RDB reads nothing for a while).
                if *sent >= offset {
                    return true;
                }
                if hold && offset - *sent < STREAM_BATCH_MIN_BYTES {
                    *held = true;
                    return true;
                }
                let out = conn.replies.sink();
                let hard = core.cfg.client_output_buffer_limit.replica.hard;
                if hard != 0 && offset - *sent >= hard {
                    crate::serverlog::log(
                        crate::serverlog::Level::Warning,
                        "Client output buffer limit (replica) reached: closing the replica",
                    );
                    return false;
                }
                match primary.copy_since(h.client_id, *sent, out, STREAM_STEP_BYTES) {
                    Some(now_sent) => *sent = now_sent,
                    None => {
                        crate::serverlog::log(
                            crate::serverlog::Level::Warning,
                            "Replica fell behind the replication backlog: disconnecting it",
                        );
                        return false;
                    }
                }
                let limits = &core.cfg.client_output_buffer_limit;
                let closed =
                    crate::net::outlimit::enforce(limits, now, &mut core.dirty, conn, h.who);
                return !closed;
            }
        }
    }
}

/// RDB bytes for the replica: into its connection (diskless form) or gathered.
fn rdb_bytes(conn: &mut Conn, eof: bool, send: &mut RdbSend, bytes: &[u8]) {
    send.checksum.update(bytes);
    match eof {
        true => conn.replies.sink().extend_from_slice(bytes),
        false => send.whole.extend_from_slice(bytes),
    }
}

/// Answer the WAIT calls that have their replicas or ran out of time.
fn answer_waits(core: &mut ShardCore, conns: &mut Slab<Conn>, history: History<'_>) {
    if core.replication.waiters.is_empty() {
        return;
    }
    let now = core.now_ms;
    let waiters = std::mem::take(&mut core.replication.waiters);
    let mut left = Vec::new();
    for w in waiters {
        let (acked, local) = match &w.aof {
            None => (history.acked_at_least(w.offset, &w.link_offsets), None),
            Some(aof) => {
                let own = core.wal.as_ref().map(|w| w.synced_bytes());
                let synced = log_synced(&aof.targets, core.id, own, &core.shared.shards);
                (
                    history.fsynced_at_least(w.offset, &w.link_offsets),
                    Some((aof.local, synced)),
                )
            }
        };
        let local_ok = local.is_none_or(|(wanted, synced)| synced || !wanted);
        if (acked >= w.replicas && local_ok) || (w.deadline_ms != 0 && now >= w.deadline_ms) {
            let reply = match local {
                None => format!(":{acked}\r\n"),
                Some((_, synced)) => format!("*2\r\n:{}\r\n:{acked}\r\n", u8::from(synced)),
            };
            let reply = (reply.into_bytes(), 0);
            crate::mesh::gather::deliver(core, conns, w.who, w.seq, 0, reply);
        } else {
            left.push(w);
        }
    }
    core.replication.waiters.append(&mut left);
}

/// WAIT that must wait: hold the client's reply until enough replicas
/// acknowledged `offset` (asked for at once with `REPLCONF GETACK`, in the
/// shards' own histories too when a replica on shard links waits to count:
/// each shard sends it into its link's stream at its next step).
pub fn wait(core: &mut ShardCore, wait: WaitFor) {
    let state = &core.shared.replication;
    state
        .history(core.id, core.cfg.port_mode)
        .primary
        .request_getack();
    for shard in 0..wait.link_offsets.len() {
        let link = state.node_history(shard).primary;
        if link.connected() > 0 {
            link.request_getack();
            if shard != core.id {
                crate::mesh::forward::ring(shard);
            }
        }
    }
    core.replication.waiters.push(wait);
}
