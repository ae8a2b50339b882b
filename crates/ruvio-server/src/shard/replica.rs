//! The shard's part of being a replica (see `replication`): every shard loads a
//! full sync's dataset on its tick (its part built, then put in place once
//! every shard's built); shard 0 also steps the link to the primary, adopts its
//! socket as the master client's connection once the stream starts,
//! acknowledges the offset once a second, notices when the link is lost, and
//! holds the stream still while the shards cut for a replica of this replica.
//! On shard links (`replication::shard_links`, `replica-shard-links yes`)
//! every shard does the same with its own link to the primary's same shard,
//! loading its link's RDB itself.
//!
//! Here rather than in `replication` because adopting a socket takes the loop's
//! ring and connection slab, which only the shard owns.

use super::Shard;
use crate::net::conn::{Conn, ReplyMode};
use crate::replication::link::{Handover, Link};
use crate::replication::load::{Built, Keep};
use crate::replication::state::{FailoverPhase, LinkState};
use std::os::fd::IntoRawFd;

/// Redis's replica sends REPLCONF ACK once a second (replicationCron).
const ACK_EVERY_MS: u64 = 1000;

/// Shard 0's link and the master client's connection once the stream runs.
pub struct Follower {
    link: Link,
    /// The master client's connection (slab index, generation).
    conn: Option<(u32, u32)>,
    next_ack_ms: u64,
    /// A full sync of a replica of this server cuts: the stream stands still
    /// and every shard was told to cut (`Control::ChainCut`).
    cut_ordered: bool,
    /// This shard's own link to the primary's same shard.
    shard_link: bool,
    /// A cluster node's link to the master node it replicates
    /// (`node_replica`): a shard link that keeps every key.
    node: bool,
}

impl Follower {
    /// A cluster node's link to the master node it replicates.
    pub(super) fn of_node(link: Link) -> Follower {
        Follower {
            link,
            conn: None,
            next_ack_ms: 0,
            cut_ordered: false,
            shard_link: true,
            node: true,
        }
    }

    /// The primary's address.
    pub(super) fn target(&self) -> (&str, u16) {
        self.link.target()
    }
}

/// `replicaof host port` in the config file: shard 0 follows it from the start,
/// as REPLICAOF would (a value that is not `host port` is logged and ignored).
pub(super) fn follow_configured(cfg: &crate::config::Config, state: &crate::replication::State) {
    let value = cfg.param("replicaof");
    if value.is_empty() {
        return;
    }
    let mut words = value.split_whitespace();
    let (host, port) = (
        words.next(),
        words.next().and_then(|p| p.parse::<u16>().ok()),
    );
    match (host, port, words.next()) {
        (Some(host), Some(port), None) => {
            state.follow(host, port);
            // A replica from the start: the logs' place in the stream stands.
            state.may_continue_from_logs();
        }
        _ => crate::serverlog::log(
            crate::serverlog::Level::Warning,
            &format!("replicaof {value:?}: not `host port`, ignored"),
        ),
    }
}

impl Shard {
    /// Replication's step of the background tick: one atomic load on a shard that
    /// has nothing to load, one lock of the state on shard 0.
    pub(super) fn replica_tick(&mut self) {
        self.load_dataset();
        if let Some(wal) = self.core.wal.as_ref() {
            // What this shard's log fsynced of the stream (FACK).
            let synced = self.core.stream_marks.synced(wal);
            self.core
                .shared
                .replication
                .set_fsynced(self.core.id, synced);
        }
        if self.core.cluster_node.is_some() {
            // A node follows the master CLUSTER REPLICATE names (REPLICAOF
            // is refused in cluster mode).
            self.follow_node_master();
        } else if self.core.id == 0 || self.replica.is_some() || self.on_shard_links() {
            self.follow_primary();
        }
    }

    /// A full sync's dataset, in two steps (`replication::load`): build this
    /// shard's part of a dataset just published, and put a built part in
    /// place once every shard built its own, or drop it when one could not.
    fn load_dataset(&mut self) {
        let state = self.core.shared.replication.clone();
        if self.core.writing_snapshot() {
            // The save reads the keyspace (and libraries) a load replaces: after it.
            return;
        }
        if let Some(part) = self.full_sync_part.take() {
            return self.install_part(&state, part);
        }
        let Some(dataset) = state.dataset_for(self.core.id) else {
            return;
        };
        let core = &mut self.core;
        let built = crate::replication::load::build(
            &core.engine,
            &core.cfg,
            (dataset.id, &dataset.rdb),
            Keep::Owned(core.id, &core.topo),
            core.now_ms,
        );
        match built {
            Ok(part) => {
                state.built(core.id, dataset.id, true);
                // Every shard may have built by now: in place at once if so.
                self.install_part(&state, part);
            }
            Err(e) => {
                crate::serverlog::log(
                    crate::serverlog::Level::Warning,
                    &format!(
                        "shard {}: the MASTER's RDB did not load: {e}; every shard keeps its data",
                        core.id
                    ),
                );
                state.built(core.id, dataset.id, false);
                state.loaded(core.id, dataset.id, false);
            }
        }
    }

    /// This shard's built part goes in place once every shard built its own;
    /// it is dropped when a shard could not, or a newer full sync began.
    fn install_part(&mut self, state: &crate::replication::State, part: Built) {
        let (id, core) = (part.dataset, &mut self.core);
        if state.published() != id || state.load_failed(id) {
            let why = match state.published() != id {
                true => "a newer full sync began",
                false => "the MASTER's RDB did not load on every shard",
            };
            crate::serverlog::log(
                crate::serverlog::Level::Notice,
                &format!("shard {}: keeps its data: {why}", core.id),
            );
            state.loaded(core.id, id, false);
            return;
        }
        if !state.all_built(id) {
            self.full_sync_part = Some(part);
            return;
        }
        // Redis empties its databases before it loads the primary's RDB, which
        // fails the transactions of the clients watching a key that existed.
        let every_db: Vec<usize> = (0..core.engine.db_count()).collect();
        core.touch_watched_in(&every_db);
        let loaded = crate::replication::load::install(&mut core.engine, part);
        let mark = crate::persistence::stream_mark::StreamMark {
            replid: state.ids().replid,
            offset: state.offset(),
            db: 0,
            link: false,
        };
        let loaded = loaded.and_then(|keys| durable_full_sync(core, mark).map(|()| keys));
        match &loaded {
            Ok(keys) => crate::serverlog::log(
                crate::serverlog::Level::Notice,
                &format!(
                    "shard {}: loaded {keys} keys from the MASTER's RDB",
                    core.id
                ),
            ),
            Err(e) => crate::serverlog::log(
                crate::serverlog::Level::Warning,
                &format!("shard {}: the MASTER's RDB did not load: {e}", core.id),
            ),
        }
        state.loaded(core.id, id, loaded.is_ok());
    }

    /// Whether this server follows its primary over shard links: it takes
    /// them (`Config::takes_shard_links`), and this primary did not refuse.
    fn on_shard_links(&self) -> bool {
        let core = &self.core;
        let state = &core.shared.replication;
        state.follows_a_primary()
            && core.cfg.takes_shard_links()
            && !state.shard_links.refused(state.ids().epoch)
    }

    /// Shard 0 (every shard on shard links): follow the primary REPLICAOF
    /// names now.
    pub(super) fn follow_primary(&mut self) {
        let state = self.core.shared.replication.clone();
        let epoch = self.replica.as_ref().map(|f| f.link.epoch);
        if epoch.is_none() && state.is_replica() && self.core.shared.loading.any() {
            // Every shard's log says where the stream stopped: wait for all.
            return;
        }
        let ids = state.ids();
        let taking_over = ids.failover.phase == FailoverPhase::InProgress;
        // A hand-over to a replica on shard links goes link by link; to a
        // replica of the single stream, on the single stream.
        let per_shard = (!taking_over || ids.failover.on_links) && self.on_shard_links();
        let mine = self.replica.as_ref().map(|f| (f.link.epoch, f.shard_link));
        if mine != Some((ids.epoch, per_shard)) {
            self.drop_master_conn();
            if mine.is_some_and(|(_, shard_link)| shard_link) {
                state.shard_links.dropped(self.core.id);
            }
            let (shard, shards) = (self.core.id, self.core.outbox.shards());
            let single = shard == 0 && !per_shard;
            // A hand-over on links: shard 0's link asks the target to take
            // over; the others connect once it did (before, the target,
            // still this server's replica, would serve them and drop them
            // again at its promotion: a second partial sync each).
            let waits_for_take_over = taking_over && shard != 0;
            self.replica = ids
                .master
                .filter(|_| (per_shard && !waits_for_take_over) || single)
                .map(|(host, port)| {
                    if per_shard {
                        restore_link_place(&state, shard);
                        state.shard_links.follow_on_links(ids.epoch);
                        let mut link =
                            Link::for_shard(ids.epoch, host, port, (shard, shards), &state);
                        if taking_over && shard == 0 {
                            // The other links' PSYNCs wait for the target's
                            // promotion (NOMASTERLINK meanwhile) and continue.
                            link.take_over();
                        }
                        return Follower {
                            link,
                            conn: None,
                            next_ack_ms: 0,
                            cut_ordered: false,
                            shard_link: true,
                            node: false,
                        };
                    }
                    restore_stream_place(&state);
                    // What the single stream applies is in no link's history.
                    state.forget_shard_links();
                    let mut link = Link::new(ids.epoch, host, port);
                    // Its history so far (its own as a primary, its old
                    // primary's, or its logs'): the new primary may continue
                    // it (Redis's cached master).
                    let (replid, next) = (state.ids().replid, state.offset() + 1);
                    match taking_over {
                        true => link.ask_to_take_over(replid, next),
                        false => link.resume_from(replid, next),
                    }
                    Follower {
                        link,
                        conn: None,
                        next_ack_ms: 0,
                        cut_ordered: false,
                        shard_link: false,
                        node: false,
                    }
                });
        }
        self.step_follower(&state);
    }

    /// Step the link until the stream starts, then watch the master client's
    /// connection: its timeout, its acknowledgements, a cut of this
    /// replica's own replica's full sync.
    pub(super) fn step_follower(&mut self, state: &crate::replication::State) {
        let now = self.core.now_ms;
        let Some(follower) = self.replica.as_mut() else {
            return;
        };
        if !follower.link.streaming() {
            if let Some(mut handover) = follower.link.step(state, &self.core.cfg, now) {
                if let Some(rdb) = handover.rdb.take() {
                    if let Err(why) = load_link_rdb(&mut self.core, &rdb, follower.node) {
                        if let Some(follower) = self.replica.as_mut() {
                            follower.link.load_failed(state, &why, now);
                        }
                        return;
                    }
                }
                self.adopt_master(handover);
            }
            return;
        }
        let shard_link = follower.shard_link;
        let Some((index, gen)) = follower.conn else {
            return;
        };
        let timeout_ms = self
            .core
            .cfg
            .param("repl-timeout")
            .parse::<u64>()
            .unwrap_or(60)
            .saturating_mul(1000);
        let Some(conn) = self.conns.get_mut(index, gen) else {
            crate::serverlog::log(
                crate::serverlog::Level::Warning,
                "Connection with master lost.",
            );
            follower.conn = None;
            follower.link.lost(state, now);
            return;
        };
        let last_io_ms = match shard_link {
            true => conn.client.last_cmd_ms,
            false => conn.client.last_cmd_ms.max(state.last_io_ms()),
        };
        if now.saturating_sub(last_io_ms) > timeout_ms {
            crate::serverlog::log(
                crate::serverlog::Level::Warning,
                "MASTER timeout: no data nor PING received...",
            );
            conn.client.closing = true;
            conn.client.killed = true;
            self.core.dirty.push((index, gen));
            return;
        }
        if now >= follower.next_ack_ms {
            follower.next_ack_ms = now + ACK_EVERY_MS;
            let ack = match shard_link {
                true => state.link_ack(self.core.id, self.core.wal.is_some()),
                false => state.ack(self.core.wal.is_some()),
            };
            conn.replies.sink().extend_from_slice(&ack);
            self.core.dirty.push((index, gen));
        }
        if shard_link {
            // On shard links the shards record what they apply: a full sync
            // of a single-stream replica cuts them as a primary's
            // (`shard::primary`), and a link of its own replica cuts this
            // shard alone, between whole commands of this link
            // (`shard_link_at_rest`): no stream to hold still across shards.
            return;
        }
        if self.core.wal.is_some() && !conn.replies.is_holding() {
            // Every command of the stream so far ran to the end: the marks
            // go again, behind what its cross-shard groups logged since.
            mark_stream(&mut self.core, &conn.client, true);
        }
        // A full sync of a replica of this server: its RDB must hold exactly
        // the stream up to the offset it names, so every shard cuts while the
        // stream stands still (the master client stops before its next
        // command, `dispatch`), once nothing of it is still on its way to
        // another shard: the order to cut follows the forwarded commands.
        let cutting = state.primary.cutting();
        let client = &conn.client;
        let at_rest = client.multi.is_none() && client.blocked.is_none();
        if cutting && !follower.cut_ordered && at_rest {
            follower.cut_ordered = true;
            self.core.replication.stream_cut = true;
            for shard in (0..self.core.outbox.shards()).filter(|&s| s != self.core.id) {
                let from = self.core.id;
                let order = crate::mesh::forward::Control::ChainCut { from };
                self.core.outbox.control(shard, order);
            }
        } else if !cutting && follower.cut_ordered {
            // Every shard cut: the stream goes on.
            follower.cut_ordered = false;
            self.run_input(index, gen);
        }
    }

    /// A replica on shard links, each loop iteration: this shard's link's
    /// applied offset reaches its offset once its forwarded parts answered,
    /// and its master client goes on past a barrier once the other link
    /// applied what it names (rung when it moves: `LinkBook::settle`).
    pub(super) fn shard_link_step(&mut self) {
        let Some(follower) = self.replica.as_ref().filter(|f| f.shard_link) else {
            return;
        };
        if let Some(conn) = follower.conn.and_then(|(i, g)| self.conns.get(i, g)) {
            let book = self.core.shared.replication.shard_links.book(self.core.id);
            let settled = conn.client.blocked.is_none() && !conn.replies.is_holding();
            if settled && book.applied() != book.offset() {
                book.settle();
            }
            mark_link(&mut self.core, &conn.client, settled);
        }
        let state = &self.core.shared.replication;
        let Some(wait) = self.core.replication.link_wait.as_mut() else {
            return;
        };
        let gone = self.conns.get(wait.conn.0, wait.conn.1).is_none();
        if gone || wait.passed(&state.shard_links, self.core.id) {
            let conn = wait.conn;
            self.core.replication.link_wait = None;
            self.core.resume.push(conn);
        }
    }

    /// Nothing of this shard's link stream is half applied: its master
    /// client is in no MULTI (the offset counts the commands queued, the
    /// data has none of them), not blocked, waits for no other shard's part
    /// of a command (an EXEC over keys of several shards counts in the
    /// offset before its writes land), and none of its keys is out
    /// on loan to another link's group (a snapshot would miss it, and the
    /// stream this replica keeps is its primary's: no key state of its own
    /// follows, as `missed_by_snapshot` records on a primary). True off
    /// shard links.
    pub(super) fn shard_link_at_rest(&self) -> bool {
        let Some(follower) = self.replica.as_ref().filter(|f| f.shard_link) else {
            return true;
        };
        if self.core.lending.any_lent() {
            return false;
        }
        let Some(conn) = follower.conn.and_then(|(i, g)| self.conns.get(i, g)) else {
            return true;
        };
        conn.client.multi.is_none() && conn.client.blocked.is_none() && !conn.replies.is_holding()
    }

    /// REPLICAOF changed the primary: the old one's stream stops here.
    pub(super) fn drop_master_conn(&mut self) {
        let Some((index, gen)) = self.replica.as_mut().and_then(|f| f.conn.take()) else {
            return;
        };
        if let Some(conn) = self.conns.get_mut(index, gen) {
            conn.client.closing = true;
            conn.client.killed = true;
            self.core.dirty.push((index, gen));
        }
    }

    /// The stream starts: the socket becomes the master client's connection (no
    /// replies but its acknowledgements, writes allowed), the bytes read with the
    /// RDB its first input, and the first ACK goes out (a diskless primary starts
    /// the stream once it has it).
    fn adopt_master(&mut self, handover: Handover) {
        let state = self.core.shared.replication.clone();
        let now = self.core.now_ms;
        let fd = handover.socket.into_raw_fd();
        let ends = crate::net::socket::adopt(fd);
        // Counted as a client (CLIENT LIST shows it); `close` gives it back.
        self.core.shared.admit_client(u64::MAX);
        let client_id = self.core.shared.next_client_id();
        let shard_link = self.replica.as_ref().is_some_and(|f| f.shard_link);
        if !shard_link {
            state.set_master_client(client_id);
        }
        // The primary's stream is not checked against ACL rules (Redis runs its
        // master client as the superuser).
        let (_, mut session) = self.core.shared.acl.new_session();
        session.restricted = false;
        let mut conn_gen = 0;
        let index = self.conns.insert_with(|_, gen| {
            conn_gen = gen;
            Conn::new(gen, client_id, fd, ends, now, (true, session))
        });
        self.register_fixed_file(index, conn_gen, fd);
        if let Some(conn) = self.conns.get_mut(index, conn_gen) {
            conn.client.master = true;
            conn.client.shard_link = shard_link;
            conn.client.reply_mode = ReplyMode::Off;
            let book = state.shard_links.book(self.core.id);
            if handover.continued {
                conn.client.db = match shard_link {
                    true => book.db(),
                    false => state.stream_db(),
                };
            }
            conn.input.extend_from_slice(&handover.leftover);
            let ack = match shard_link {
                true => state.link_ack(self.core.id, self.core.wal.is_some()),
                false => state.ack(self.core.wal.is_some()),
            };
            conn.replies.sink().extend_from_slice(&ack);
        }
        if let Some(follower) = self.replica.as_mut() {
            follower.conn = Some((index, conn_gen));
            follower.next_ack_ms = now + ACK_EVERY_MS;
        }
        state.heard(now);
        match shard_link {
            true => state.shard_link_state(self.core.id, LinkState::Connected, now),
            false => state.set_link(LinkState::Connected, now),
        }
        let how = match handover.continued {
            true => "MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization.",
            false => "MASTER <-> REPLICA sync: Finished with success",
        };
        crate::serverlog::log(crate::serverlog::Level::Notice, how);
        self.run_input(index, conn_gen);
    }
}

/// Once after a start as a replica, as the single stream's link is made:
/// the place every shard's log holds (`State::restore_recovered`) becomes the
/// server's history, so the link asks to continue it.
fn restore_stream_place(state: &crate::replication::State) {
    match state.restore_recovered() {
        Ok(Some(place)) => crate::serverlog::log(
            crate::serverlog::Level::Notice,
            &format!(
                "The shards' logs hold the MASTER's stream {} up to offset {}{}: asking to continue from there",
                place.mark.replid,
                place.mark.offset,
                match &place.catch_up {
                    Some(each) => format!(" (each shard up to {each:?}, skipping what it holds)"),
                    None => String::new(),
                }
            ),
        ),
        Ok(None) => {}
        // This server's own fresh ID then: the primary answers a full sync.
        Err(why) => crate::serverlog::log(crate::serverlog::Level::Notice, &why),
    }
}

/// Once after a start as a replica, as shard `shard`'s link is made: the
/// place of its link its log holds (`State::restore_recovered_link`) becomes
/// the link's, so the link asks to continue it.
pub(super) fn restore_link_place(state: &crate::replication::State, shard: usize) {
    if let Some(mark) = state.restore_recovered_link(shard) {
        crate::serverlog::log(
            crate::serverlog::Level::Notice,
            &format!(
                "shard {shard}: its log holds its link's stream {} up to offset {}: asking to continue from there",
                mark.replid, mark.offset
            ),
        );
    }
}

/// A shard link's full sync: this shard's keys alone (`every`: a replica
/// node's, every key of its master node), built and put in place on its own
/// (the other shards load their links' RDBs meanwhile).
fn load_link_rdb(core: &mut super::ShardCore, rdb: &[u8], every: bool) -> Result<(), String> {
    let keep = match every {
        true => Keep::Every,
        false => Keep::Owned(core.id, &core.topo),
    };
    let built =
        crate::replication::load::build(&core.engine, &core.cfg, (0, rdb), keep, core.now_ms)
            .map_err(|e| format!("shard {}: the MASTER's RDB did not load: {e}", core.id))?;
    let every_db: Vec<usize> = (0..core.engine.db_count()).collect();
    core.touch_watched_in(&every_db);
    let keys = crate::replication::load::install(&mut core.engine, built)
        .map_err(|e| format!("shard {}: the MASTER's RDB did not load: {e}", core.id))?;
    // With a log, the link's data and its place in its primary shard's
    // history (a cluster replica node's: its master's) go to disk together.
    let book = core.shared.replication.shard_links.book(core.id);
    let mark = crate::persistence::stream_mark::StreamMark {
        replid: book.replid(),
        offset: book.offset(),
        db: 0,
        link: true,
    };
    durable_full_sync(core, mark)
        .map_err(|e| format!("shard {}: the MASTER's RDB did not load: {e}", core.id))?;
    crate::serverlog::log(
        crate::serverlog::Level::Notice,
        &format!(
            "shard {}: loaded {keys} keys from the MASTER's RDB",
            core.id
        ),
    );
    Ok(())
}

/// With a log, a full sync's data just loaded into `core` becomes the shard's
/// snapshot, carrying the sync's place in the stream (see `stream_mark`),
/// before anything of the stream is logged over it: one rename puts the new
/// data and its place on disk, so the old log never replays under the new data
/// and the old data never claims the new place. Then the primary's libraries
/// are saved (a crash before leaves the old ones with the new data: the next
/// full sync's libraries replace them). Blocking, as the load is.
fn durable_full_sync(
    core: &mut super::ShardCore,
    mark: crate::persistence::stream_mark::StreamMark,
) -> Result<(), String> {
    let Some(wal) = core.wal.as_ref() else {
        return Ok(());
    };
    core.stream_marks.replaced(mark, wal);
    if let Err(e) = crate::persistence::snapshot::save(core) {
        core.stream_marks.forget();
        return Err(format!("the snapshot of the MASTER's data failed: {e}"));
    }
    core.stream_marks.snapshot_synced();
    // The primary's libraries replaced the shard's: they are the saved set now.
    crate::cmd::functions::keep_current(crate::cmd::functions::Keeper {
        cfg: &core.cfg,
        id: core.id,
        logs: true,
    });
    Ok(())
}

/// Shard 0, after the master client's input of this loop iteration ran: mark
/// the stream's offset in every shard's log, behind the commands it forwarded
/// (see `stream_mark`). Not inside a MULTI (a continuation would start in the
/// middle of it) nor while a command waits on other shards (its effects there
/// are not in their logs yet).
///
/// `again` (each tick, once every command dispatched was answered): the same
/// mark once more, so a log whose last records came after its mark (a
/// cross-shard group's keys sent home, a transaction's part run in place,
/// logged once the iteration's mark had gone) ends on a mark again; a shard
/// whose log has nothing after its mark appends nothing (`ShardMarks::
/// append`). Without it such a log ended on records until the primary's next
/// PING (10 s), and a restart meanwhile meant a full sync.
pub(super) fn mark_stream(
    core: &mut super::ShardCore,
    client: &crate::net::conn::ClientState,
    again: bool,
) {
    if core.wal.is_none() || client.multi.is_some() || client.blocked.is_some() {
        return;
    }
    if client.shard_link {
        // Each shard marks its own link's place (`mark_link`).
        return;
    }
    let state = &core.shared.replication;
    if !state.link_up() {
        return;
    }
    let mark = crate::persistence::stream_mark::StreamMark {
        replid: state.ids().replid,
        offset: state.offset(),
        db: client.db,
        link: false,
    };
    if !again && core.stream_marks.is_last(&mark) {
        return;
    }
    // In a catch-up, a shard whose data is ahead of the stream gets no mark
    // until the stream reaches its place (its log would claim less than it holds).
    let ahead = match state.catching_up(mark.offset) {
        true => state.catch_up_targets(),
        false => Vec::new(),
    };
    let behind = |shard: usize| ahead.get(shard).is_none_or(|&own| own <= mark.offset);
    for shard in (0..core.outbox.shards()).filter(|&s| s != core.id && behind(s)) {
        let mark = Box::new(mark.clone());
        let from = core.id;
        core.outbox.control(
            shard,
            crate::mesh::forward::Control::StreamMark { from, mark },
        );
    }
    if !behind(core.id) {
        return;
    }
    if let Some(wal) = core.wal.as_mut() {
        core.stream_marks.append(wal, mark);
    }
}

/// A replica on shard links with a log, once per loop iteration: mark where
/// this shard's link stands in its primary shard's history in this shard's
/// log (`stream_mark`, a link's mark), when the link's stream is at rest
/// (`settled`: every command dispatched ran to the end, its parts on other
/// shards answered; the master client in no MULTI) and the log holds
/// something since the last mark. Records another link's group wrote here
/// after it are covered by the next one: a restart from a mark is a full
/// sync cut there, which the barriers already order (`link_barrier`). Two
/// loads and a compare while nothing moved.
fn mark_link(core: &mut super::ShardCore, client: &crate::net::conn::ClientState, settled: bool) {
    let Some(wal) = core.wal.as_mut() else {
        return;
    };
    let book = core.shared.replication.shard_links.book(core.id);
    let offset = book.offset();
    if !settled || client.multi.is_some() || !book.up() || core.stream_marks.stands_at(offset, wal)
    {
        return;
    }
    let mark = crate::persistence::stream_mark::StreamMark {
        replid: book.replid(),
        offset,
        db: client.db,
        link: true,
    };
    core.stream_marks.append(wal, mark);
}

/// What a catch-up does with one command of the master client.
pub(super) enum CatchUp {
    /// Run it: every shard it touches lacks its effect.
    Run,
    /// Only count its bytes: every shard it touches holds its effect.
    Skip,
    /// It touches shards of both kinds, or it is a transaction or a script,
    /// which a shard cannot skip alone: give up, a full sync.
    GiveUp,
}

/// The catch-up after a restart whose shards' logs ended at different places
/// (see `stream_mark::Place::catch_up`): the master client's command `args`,
/// ending at stream offset `end`, runs where the shards it touches lack it and
/// is skipped where they hold it (the commands before it, routed in order, are
/// ahead of it on every shard). Keyless connection commands (SELECT, PING,
/// REPLCONF) always run.
pub(super) fn catch_up(core: &super::ShardCore, args: ruvio_resp::Args<'_>, end: u64) -> CatchUp {
    let targets = core.shared.replication.catch_up_targets();
    use ruvio_engine::CommandTree;
    let Some(cmd) = crate::cmd::registry::registry()
        .lookup(args.get(0))
        .and_then(|c| c.resolve(args).ok())
    else {
        return CatchUp::Run;
    };
    let shards: Vec<usize> =
        match super::route::route(core, cmd, args, super::route::InFlight::Plain) {
            _ if !matches!(cmd.handler, Some(crate::cmd::registry::Handler::Engine(_))) => {
                return match cmd.meta.name {
                    "select" | "ping" | "replconf" | "publish" => CatchUp::Run,
                    _ => CatchUp::GiveUp,
                }
            }
            super::route::Route::Local => vec![core.id],
            super::route::Route::Remote(owner) => vec![owner],
            super::route::Route::Split(groups) => groups.iter().map(|(s, _)| *s).collect(),
            super::route::Route::AllShards => (0..targets.len()).collect(),
            _ => return CatchUp::GiveUp,
        };
    let holds = |s: &usize| targets.get(*s).is_some_and(|&own| end <= own);
    if shards.iter().all(holds) {
        CatchUp::Skip
    } else if !shards.iter().any(holds) {
        CatchUp::Run
    } else {
        CatchUp::GiveUp
    }
}

/// A catch-up met a command it cannot split between shards that hold it and
/// shards that lack it: drop the stream and take a new replid, so the link's
/// next PSYNC gets a full sync, which replaces every shard's data.
pub(super) fn give_up_catch_up(core: &super::ShardCore, args: ruvio_resp::Args<'_>) {
    crate::serverlog::log(
        crate::serverlog::Level::Warning,
        &format!(
            "Catching up the shards' logs: {:?} touches shards that hold it and shards that lack it: a full sync",
            String::from_utf8_lossy(args.get(0))
        ),
    );
    let state = &core.shared.replication;
    state.end_catch_up();
    state.new_history();
}

/// Another shard's stream mark (see [`mark_stream`]): into this shard's log.
pub(crate) fn note_stream_mark(
    core: &mut super::ShardCore,
    mark: crate::persistence::stream_mark::StreamMark,
) {
    if let Some(wal) = core.wal.as_mut() {
        core.stream_marks.append(wal, mark);
    }
}

/// What a shard link's master client does with a command of its stream.
pub(super) enum AtBarrier {
    /// Not a barrier: run it.
    Run,
    /// A barrier passed (or one this replica does not know): count its
    /// bytes, run nothing.
    Passed,
    /// A barrier whose other link is behind: stop before it, until
    /// [`Shard::shard_link_step`] sees that link applied its offset.
    Wait,
}

/// The shard link's master client on connection `conn` reads `args`: a
/// barrier (`replication::link_barrier`) is passed at once when the other
/// link applied its offset, else the client waits. One length test for
/// nearly every command.
#[inline]
pub(super) fn link_barrier(
    core: &mut super::ShardCore,
    args: ruvio_resp::Args<'_>,
    conn: (u32, u32),
) -> AtBarrier {
    use crate::replication::link_barrier::{parse, Barrier, Wait};
    match parse(args) {
        Barrier::NotOne => AtBarrier::Run,
        Barrier::Unknown => AtBarrier::Passed,
        Barrier::ServerOffset(server_offset) => {
            // Counted in the link's offset and passed on to replicas of
            // this one as it came (`dispatch` after this).
            core.shared
                .replication
                .shard_link_marked(core.id, server_offset);
            AtBarrier::Passed
        }
        Barrier::Functions(payload) => {
            // This shard's libraries as its primary shard had them here;
            // passed on to replicas of this one as it came.
            crate::cmd::functions::apply(core.functions_keeper(), payload);
            AtBarrier::Passed
        }
        Barrier::Until { shard, offset } => {
            let mut wait = Wait::new(conn, shard, offset);
            let links = &core.shared.replication.shard_links;
            if shard == core.id {
                return AtBarrier::Passed;
            }
            if !wait.passed(links, core.id) {
                core.replication.link_wait = Some(wait);
                return AtBarrier::Wait;
            }
            // (A shard this replica does not have passed above: no book.)
            let book = links.books().get(shard);
            if book.is_some_and(|book| book.synced_at() > offset) {
                // That link loaded data cut after the barrier: the group's
                // writes to its keys are in it (or in its stream after the
                // cut), and newer writes may be: they are not applied here.
                core.replication.link_skip |= 1 << (shard % 64);
            }
            AtBarrier::Passed
        }
    }
}

/// With shards to skip after a barrier ([`link_barrier`]): whether the
/// link's command `args` is a group's write to one of their keys (a state
/// record, `RESTORE` or `DEL`, inside the MULTI that follows the barriers,
/// or the one record that does). The skip ends with that group.
#[cold]
pub(super) fn skipped_by_barrier(
    core: &mut super::ShardCore,
    client: &crate::net::conn::ClientState,
    args: ruvio_resp::Args<'_>,
) -> bool {
    let name = args.get(0);
    let opens = client.multi.is_none() && name.eq_ignore_ascii_case(b"multi");
    if opens || name.eq_ignore_ascii_case(b"select") {
        // The group's MULTI, or the database of its one record.
        return false;
    }
    let state_record = name.eq_ignore_ascii_case(b"restore") || name.eq_ignore_ascii_case(b"del");
    let skipped = state_record
        && args.len() >= 2
        && core.replication.link_skip & (1 << (core.topo.key_owner(args.get(1)) % 64)) != 0;
    let in_group = client.multi.is_some()
        && !name.eq_ignore_ascii_case(b"exec")
        && !name.eq_ignore_ascii_case(b"discard");
    if !in_group {
        core.replication.link_skip = 0;
    }
    skipped
}

/// The master client `client`'s stream still runs: REPLICAOF did not change
/// the primary, and a shard link's own link is up (one load each).
#[inline]
pub(super) fn stream_runs(core: &super::ShardCore, client: &crate::net::conn::ClientState) -> bool {
    let state = &core.shared.replication;
    match client.shard_link {
        true => state.shard_links.book(core.id).up(),
        false => state.link_up(),
    }
}
