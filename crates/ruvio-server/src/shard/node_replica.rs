//! A cluster node that replicates another (CLUSTER REPLICATE, per-shard mode),
//! as a redis-server cluster replica does: the shard follows the master node's
//! client address with Redis's plain handshake (`PSYNC replid offset`), loads
//! its whole RDB into this shard (every key: they are the master's slots,
//! which this node serves once promoted), applies the stream here, refuses
//! clients' writes (keyed ones are `-MOVED` to the master first, keyless ones
//! `-READONLY`) and serves a READONLY client's reads of the master's slots.
//! When the membership makes it a master again (an election won, a
//! failover), the link stops and the node keeps the data, as REPLICAOF NO
//! ONE: the history it followed becomes its `replid2`.
//!
//! Why the shard link's machinery (`replication::link`, the shard's book in
//! `replication::shard_links`): it is already one shard's own link, stepped
//! by its shard, loading its RDB into that shard alone; only the handshake
//! (no `REPLCONF ruvio-shard`) and the keys kept differ. Why here, beside
//! `replica`: adopting the master's socket takes the loop's connections,
//! which only the shard owns; and what the node follows is the membership's,
//! which only the shard reads.

use super::replica::Follower;
use super::route::Route;
use super::Shard;
use crate::cmd::registry::Command;
use crate::net::conn::ClientState;
use crate::replication::link::Link;
use crate::serverlog::{log, Level};
use ruvio_engine::command::flags::WRITE;

impl Shard {
    /// Follow the master the membership names now: a new link when it
    /// changed, the link dropped and the node promoted when it names none.
    pub(super) fn follow_node_master(&mut self) {
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
}

/// A node that replicates a master: clients' writes are refused.
#[inline]
pub(super) fn following(core: &super::ShardCore) -> bool {
    core.cluster_node.is_some() && core.shared.replication.node_history(core.id).is_following()
}

/// A replica node refuses what Redis's processCommand refuses after the
/// cluster's redirection: a keyless write (`-READONLY`), or a command without
/// the `stale` flag while the link is down and `replica-serve-stale-data no`.
/// A keyed command goes on to its route, which redirects it.
#[cold]
pub(super) fn refusal(
    core: &super::ShardCore,
    meta: &ruvio_engine::CommandMeta,
    args: ruvio_resp::Args<'_>,
) -> Option<ruvio_engine::CmdError> {
    if !meta.keys.positions(args).is_empty() {
        return None;
    }
    let history = core.shared.replication.node_history(core.id);
    crate::replication::refusal(history.following().up, &core.cfg, meta, args)
}

/// A route a cluster node's client gets, past the slot map: the master's
/// stream and a whole-slot migration's source run here whatever the slot
/// (Redis's `mustObeyClient`), and a
/// READONLY client's read of a slot of the master this node replicates runs
/// here (`getNodeByQuery`). Every other route is left as it is; a local one
/// costs one match.
#[inline]
pub(super) fn route_for_client(
    core: &super::ShardCore,
    client: &ClientState,
    cmd: &Command,
    route: Route,
) -> Route {
    match route {
        Route::MovedToNode(..)
        | Route::Ask(_)
        | Route::TryAgain
        | Route::SlotNotServed
        | Route::ClusterDown
        | Route::ClusterDownReadOnly
        | Route::CrossSlot
            if (client.master || client.slot_import) && core.cluster_node.is_some() =>
        {
            Route::Local
        }
        Route::MovedToNode(slot, _)
            if client.readonly
                && !cmd.meta.has(WRITE)
                && core
                    .node_routes()
                    .is_some_and(|routes| routes.map().my_master_serves(slot)) =>
        {
            Route::Local
        }
        route => route,
    }
}
