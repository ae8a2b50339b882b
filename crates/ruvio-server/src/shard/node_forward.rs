//! Forward mode as one node of the cluster bus (`--port-mode forward
//! --cluster-enabled yes`): shard 0 owns the node (its membership, bus port,
//! nodes.conf), every shard routes by the node's slots.
//!
//! Why so: the node is one name, one config epoch and one set of bus links,
//! which only one thread may step; but a client's keyed command lands on any
//! shard, which must answer `-MOVED`/`-ASK`/`-CLUSTERDOWN` as the node would
//! before sending the key to the shard that holds it. So shard 0 hands the
//! others a copy of its slot map whenever it changed ([`publish_node_map`]),
//! and a CLUSTER subcommand received elsewhere is asked of shard 0
//! (`cmd::cluster`, `ClientQuery::Cluster`) and run here ([`run_asked`]).

use super::ShardCore;
use crate::cmd::registry::{registry, Handler};
use crate::config::change::ConfigChange;
use crate::config::PortMode;
use crate::mesh::queries::ClusterAsked;
use crate::net::conn::Conn;
use crate::net::slab::Slab;
use ruvio_engine::CommandTree;
use ruvio_resp::{OwnedArgs, Reply};

/// Shard 0 of a forward-mode node: when its slot map changed since it was
/// last handed out, leave it in `Shared` and tell every other shard, whose
/// routes take it before anything queued for them after this.
pub(super) fn publish_node_map(core: &mut ShardCore) {
    if core.topo.mode != PortMode::Forward {
        return;
    }
    let Some(map) = core.cluster_node.as_mut().and_then(|n| n.map_to_publish()) else {
        return;
    };
    if let Ok(mut shared) = core.shared.node_slots.lock() {
        *shared = Some(map);
    }
    core.outbox.broadcast(ConfigChange::NodeSlots);
}

/// A CLUSTER subcommand another shard of the node asked ([`ClusterAsked`]):
/// run by its row's handler for a client of the asker's protocol, database and
/// address (not ACL-checked again: the asking shard admitted it); its reply,
/// or its error, as that client reads it.
pub(super) fn run_asked(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    asked: &ClusterAsked,
) -> Vec<u8> {
    let mut out = Vec::new();
    let args: OwnedArgs = asked.args.iter().map(Vec::as_slice).collect();
    let args = args.args();
    let row = registry()
        .lookup(args.get(0))
        .and_then(|cmd| cmd.resolve(args).ok());
    let mut reply = Reply::new(&mut out, asked.proto);
    let Some(Handler::Server(handler)) = row.and_then(|r| r.handler) else {
        reply.error("ERR internal: not a CLUSTER subcommand");
        return out;
    };
    let (_, mut session) = core.shared.acl.new_session();
    session.restricted = false;
    let ends = (String::new(), asked.local.clone());
    let mut conn = Conn::new(0, 0, -1, ends, core.now_ms, (true, session));
    conn.client.proto = asked.proto;
    conn.client.db = asked.db;
    let mut ctx = crate::cmd::Ctx {
        core,
        client: &mut conn.client,
        conns,
        gather: None,
        who: (u32::MAX, u32::MAX),
        wait: None,
    };
    if let Err(error) = handler(&mut ctx, args, &mut reply) {
        error.write(&mut reply);
    }
    out
}
