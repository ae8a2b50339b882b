//! A cluster node that replicates another (CLUSTER REPLICATE, an election,
//! replica migration), as a redis-server cluster replica does.
//!
//! Per-shard mode (each shard a node): the shard follows the master node's
//! client address with Redis's plain handshake (`PSYNC replid offset`), loads
//! its whole RDB into this shard (every key: they are the master's slots,
//! which this node serves once promoted), applies the stream here, refuses
//! clients' writes (keyed ones are `-MOVED` to the master first, keyless ones
//! `-READONLY`) and serves a READONLY client's reads of the master's slots.
//! When the membership makes it a master again (an election won, a
//! failover), the link stops and the node keeps the data, as REPLICAOF NO
//! ONE: the history it followed becomes its `replid2`. Meanwhile it serves
//! replicas of its own (plain servers), relaying the link's bytes as a Redis
//! replica does (`History::link_processed`): they follow the master's
//! history through it, and continue it after the promotion.
//!
//! Why the shard link's machinery (`replication::link`, the shard's book in
//! `replication::shard_links`): it is already one shard's own link, stepped
//! by its shard, loading its RDB into that shard alone; only the handshake
//! (no `REPLCONF ruvio-shard`) and the keys kept differ. Why here, beside
//! `replica`: adopting the master's socket takes the loop's connections,
//! which only the shard owns; and what the node follows is the membership's,
//! which only the shard reads.
//!
//! Forward mode (the process one node, its membership on shard 0): the
//! process follows the master as REPLICAOF does (`State::follow`: the single
//! stream on shard 0, its keys routed to their shards; shard links if asked
//! for), and a promotion is REPLICAOF NO ONE's (`State::promote`, writes
//! taken once every shard's feed is on). Why REPLICAOF's path rather than a
//! link per shard: the master may be any node (a redis-server, a per-shard
//! Ruvio node) whose stream is one history, and the server-wide history is
//! the one its own replicas, WAIT and INFO already read. The refusals and
//! the READONLY reads are the same; "here" is then the shard holding the
//! keys ([`route_for_client`]).

use super::replica::{restore_link_place, Follower};
use super::route::{placement, InFlight, Route};
use super::Shard;
use crate::cmd::registry::Command;
use crate::config::PortMode;
use crate::net::conn::ClientState;
use crate::replication::link::Link;
use crate::serverlog::{log, Level};
use ruvio_engine::command::flags::WRITE;
use ruvio_resp::Args;

impl Shard {
    /// Follow the master the membership names now: a new link when it
    /// changed, the link dropped and the node promoted when it names none.
    pub(super) fn follow_node_master(&mut self) {
        if self.core.topo.mode == PortMode::Forward {
            return self.follow_node_master_as_process();
        }
        let state = self.core.shared.replication.clone();
        let history = state.node_history(self.core.id);
        let Some(cluster) = self.core.cluster_node.as_deref().map(|node| &node.cluster) else {
            return;
        };
        let wanted = cluster.master_address();
        if wanted.is_none() && cluster.master_name().is_some() {
            // A replica whose master's address is not known yet (its first
            // PONG brings it): nothing changes meanwhile.
            return self.step_follower(&state);
        }
        let followed = self.replica.as_ref().map(Follower::target);
        if followed.is_none() && wanted.is_some() && self.core.shared.loading.any() {
            // Every shard's log says where its link stopped: wait for all.
            return;
        }
        if wanted != followed {
            let wanted = wanted.map(|(host, port)| (host.to_string(), port));
            self.drop_master_conn();
            self.replica = None;
            state.shard_links.dropped(self.core.id);
            match wanted {
                Some((host, port)) => {
                    log(
                        Level::Notice,
                        &format!("Connecting to MASTER {host}:{port} (CLUSTER REPLICATE)"),
                    );
                    history.follow_node((host.clone(), port));
                    // A replica since the start: its log's place continues.
                    restore_link_place(&state, self.core.id);
                    let link = Link::for_node(0, host, port, self.core.id, &state);
                    self.replica = Some(Follower::of_node(link));
                }
                None => {
                    if history.promote_node() {
                        let ids = history.ids();
                        log(
                            Level::Notice,
                            &format!(
                                "Setting secondary replication ID to {}, valid up to offset: {}. New replication ID is {}",
                                ids.replid2, ids.second_offset, ids.replid
                            ),
                        );
                        log(Level::Notice, "MASTER MODE enabled (failover)");
                    }
                }
            }
        }
        self.step_follower(&state);
    }

    /// Forward mode, shard 0: the process is the node, so it follows the
    /// master the membership names as REPLICAOF would (the single stream on
    /// this shard, its keys routed to their shards; shard links if asked
    /// for), and a node the membership made a master again stops following
    /// as REPLICAOF NO ONE does (the followed history becomes `replid2`).
    /// Either way it is `State`'s, which then steps as for REPLICAOF.
    fn follow_node_master_as_process(&mut self) {
        let state = self.core.shared.replication.clone();
        if let Some(cluster) = self.core.cluster_node.as_deref().map(|node| &node.cluster) {
            match cluster.master_address() {
                Some((host, port)) => {
                    if state.follow(host, port) {
                        log(
                            Level::Notice,
                            &format!("Connecting to MASTER {host}:{port} (CLUSTER REPLICATE)"),
                        );
                    }
                }
                // A replica whose master's address is not known yet (its
                // first PONG brings it): nothing changes meanwhile.
                None if cluster.master_name().is_some() => {}
                None => {
                    if state.promote() {
                        log(Level::Notice, "MASTER MODE enabled (failover)");
                    }
                }
            }
        }
        self.follow_primary();
    }
}

/// A node that replicates a master: clients' writes are refused. In forward
/// mode the node is the process, on every shard: its server-wide link.
#[inline]
pub(super) fn following(core: &super::ShardCore) -> bool {
    let replication = &core.shared.replication;
    match core.topo.mode {
        PortMode::PerShard => {
            core.cluster_node.is_some() && replication.node_history(core.id).is_following()
        }
        PortMode::Forward => core.node_routes().is_some() && replication.is_replica(),
    }
}

/// A replica node refuses what Redis's processCommand refuses after the
/// cluster's redirection: a keyless write (`-READONLY`), or a command without
/// the `stale` flag while the link is down and `replica-serve-stale-data no`.
/// A keyed command goes on to its route, which redirects it, unless a
/// forward-mode node is being promoted: its slot map serves the slots already,
/// but writes wait for every shard's feed (`State::promote`).
#[cold]
pub(super) fn refusal(
    core: &super::ShardCore,
    meta: &ruvio_engine::CommandMeta,
    args: ruvio_resp::Args<'_>,
) -> Option<ruvio_engine::CmdError> {
    let state = &core.shared.replication;
    if !meta.keys.positions(args).is_empty() && !state.promoting() {
        return None;
    }
    let history = state.history(core.id, core.topo.mode);
    crate::replication::refusal(history.following().up, &core.cfg, meta, args)
}

/// A route a cluster node's client gets, past the slot map: the master's
/// stream and a whole-slot migration's source run here whatever the slot
/// (Redis's `mustObeyClient`), and a
/// READONLY client's read of a slot of the master this node replicates runs
/// here (`getNodeByQuery`). "Here" is the node: in forward mode the shard
/// holding the keys ([`placement`]). Every other route is left as it is; a
/// local one costs one match.
#[inline]
pub(super) fn route_for_client(
    core: &super::ShardCore,
    client: &ClientState,
    (cmd, args): (&Command, Args<'_>),
    route: Route,
) -> Route {
    let served = match route {
        Route::MovedToNode(slot, _) => obeyed(core, client) || serves_read(core, client, cmd, slot),
        Route::Ask(_)
        | Route::TryAgain
        | Route::SlotNotServed
        | Route::ClusterDown
        | Route::ClusterDownReadOnly
        | Route::CrossSlot => obeyed(core, client),
        route => return route,
    };
    match (served, core.topo.mode) {
        (false, _) => route,
        (true, PortMode::Forward) => placement(core, cmd, args, InFlight::of(client)),
        (true, PortMode::PerShard) => Route::Local,
    }
}

/// A client whose commands run whatever the slot: the master's stream, a
/// whole-slot migration's source (Redis's `mustObeyClient`).
#[inline]
fn obeyed(core: &super::ShardCore, client: &ClientState) -> bool {
    (client.master || client.slot_import) && core.node_routes().is_some()
}

/// A READONLY client's read of a slot of the master this node replicates,
/// which the node serves (`getNodeByQuery`).
#[inline]
fn serves_read(core: &super::ShardCore, client: &ClientState, cmd: &Command, slot: u16) -> bool {
    client.readonly
        && !cmd.meta.has(WRITE)
        && core
            .node_routes()
            .is_some_and(|routes| routes.map().my_master_serves(slot))
}

/// A forward-mode node's refusal of a command queued in MULTI
/// ([`route::node_refusal`](super::route::node_refusal)), unless the node
/// serves it for this client: the master's stream, a READONLY client's read
/// of its master's slot.
pub(super) fn queued_refusal(
    core: &super::ShardCore,
    client: &ClientState,
    cmd: &Command,
    args: Args<'_>,
) -> Option<ruvio_engine::CmdError> {
    if obeyed(core, client) {
        return None;
    }
    match super::route::node_refusal(core, cmd, args, client.tls)? {
        ruvio_engine::CmdError::Moved { slot, .. } if serves_read(core, client, cmd, slot) => None,
        refused => Some(refused),
    }
}
