//! CLUSTER (INFO, SLOTS, SHARDS, NODES, KEYSLOT, MYID, MYSHARDID, COUNTKEYSINSLOT,
//! GETKEYSINSLOT, SLOT-STATS, HELP), READONLY, READWRITE and ASKING.
//!
//! In per-shard mode every shard answers as one master node of a cluster that is
//! the whole server; in forward mode Ruvio is a standalone server and answers as
//! Redis does with cluster support disabled. With `cluster-enabled yes` each
//! shard is a node of the cluster bus: the views and the operator's subcommands
//! (MEET, ADDSLOTS ...) are `cluster_node`'s. In forward mode with
//! `cluster-enabled yes` the process is one node whose membership shard 0
//! owns: another shard asks shard 0 ([`on_node_shard`]).

use super::cluster_node as bus;
use super::cluster_slot_migration as slot_migration;
use super::{parse_i64, Ctx, Server, ServerCommand, ServerResult};
use crate::cluster::topology::Node;
use crate::config::PortMode;
use crate::mesh::gather::Gather;
use crate::mesh::queries::{AskedCommand, ClientQuery};
use ruvio_engine::command::{command, flags::*, reply_help};
use ruvio_engine::slot::{key_slot, SLOT_COUNT};
use ruvio_engine::{CmdError, KeySpec};
use ruvio_resp::{Args, Reply};

/// A row's handler that reads or changes a forward-mode node's membership: on
/// another shard than the one that owns it (shard 0) the subcommand is asked
/// there ([`on_membership_shard`]) and the handler does not run here. The rows
/// say which subcommands those are.
macro_rules! on_membership {
    ($handler:path) => {
        |ctx, args, reply| {
            if on_membership_shard(ctx, args) {
                return Ok(());
            }
            $handler(ctx, args, reply)
        }
    };
}

/// The cluster family's table.
#[rustfmt::skip]
pub const COMMANDS: &[ServerCommand] = &[
    command!("cluster", -2, 0, KeySpec::NONE, ["slow"], "cluster", "3.0.0",
        "A container for cluster commands", "Depends on subcommand.", subcommands = SUBCOMMANDS),
    command!("readonly", 1, LOADING | STALE | FAST, KeySpec::NONE, ["fast", "connection"], "cluster", "3.0.0",
        "Enables read queries for a connection to a cluster replica node", "O(1)", readonly),
    command!("readwrite", 1, LOADING | STALE | FAST, KeySpec::NONE, ["fast", "connection"], "cluster", "3.0.0",
        "Disables read queries for a connection to a cluster replica node", "O(1)", readwrite),
    command!("asking", 1, FAST, KeySpec::NONE, ["fast", "connection"], "cluster", "3.0.0",
        "Sent by cluster clients after an -ASK redirect", "O(1)", asking),
];

/// CLUSTER's subcommands, with Redis' arity, flags and ACL categories.
#[rustfmt::skip]
const SUBCOMMANDS: &[ServerCommand] = &[
    command!("cluster|info", 2, STALE, KeySpec::NONE, ["slow"], "cluster", "3.0.0",
        "Provides info about Redis Cluster node state", "O(1)", on_membership!(info)),
    command!("cluster|slots", 2, STALE, KeySpec::NONE, ["slow"], "cluster", "3.0.0",
        "Get array of Cluster slot to node mappings", "O(N) where N is the total number of Cluster nodes", on_membership!(slots)),
    command!("cluster|shards", 2, STALE, KeySpec::NONE, ["slow"], "cluster", "7.0.0",
        "Get array of cluster slots to node mappings", "O(N) where N is the total number of cluster nodes", on_membership!(shards)),
    command!("cluster|nodes", 2, STALE, KeySpec::NONE, ["slow"], "cluster", "3.0.0",
        "Get Cluster config for the node", "O(N) where N is the total number of Cluster nodes", on_membership!(nodes)),
    command!("cluster|keyslot", 3, STALE, KeySpec::NONE, ["slow"], "cluster", "3.0.0",
        "Returns the hash slot of the specified key", "O(N) where N is the number of bytes in the key", keyslot),
    command!("cluster|myid", 2, STALE, KeySpec::NONE, ["slow"], "cluster", "3.0.0",
        "Return the node id", "O(1)", on_membership!(myid)),
    command!("cluster|myshardid", 2, STALE, KeySpec::NONE, ["slow"], "cluster", "7.2.0",
        "Returns the shard ID of a node.", "O(1)", on_membership!(myshardid)),
    command!("cluster|countkeysinslot", 3, STALE, KeySpec::NONE, ["slow"], "cluster", "3.0.0",
        "Return the number of local keys in the specified hash slot", "O(1)", countkeysinslot),
    command!("cluster|getkeysinslot", 4, STALE, KeySpec::NONE, ["slow"], "cluster", "3.0.0",
        "Return local key names in the specified hash slot",
        "O(log(N)) where N is the number of requested keys", getkeysinslot),
    command!("cluster|slot-stats", -4, STALE | LOADING, KeySpec::NONE, ["slow"], "cluster", "8.0.0",
        "Return an array of slot usage statistics for slots assigned to the current node.",
        "O(N) where N is the total number of slots based on arguments. O(N*log(N)) with ORDERBY subcommand.",
        slot_stats),
    command!("cluster|help", 2, LOADING | STALE, KeySpec::NONE, ["slow"], "cluster", "5.0.0",
        "Show helpful text about the different subcommands", "O(1)", help),
    command!("cluster|meet", -4, NODE_ADMIN, KeySpec::NONE, ["admin", "slow", "dangerous"], "cluster", "3.0.0",
        "Force a node cluster to handshake with another node", "O(1)", on_membership!(bus::meet)),
    command!("cluster|addslots", -3, NODE_ADMIN, KeySpec::NONE, ["admin", "slow", "dangerous"], "cluster", "3.0.0",
        "Assign new hash slots to receiving node", "O(N) where N is the total number of hash slot arguments", on_membership!(bus::addslots)),
    command!("cluster|addslotsrange", -4, NODE_ADMIN, KeySpec::NONE, ["admin", "slow", "dangerous"], "cluster", "7.0.0",
        "Assign new hash slots to receiving node",
        "O(N) where N is the total number of the slots between the start slot and end slot arguments.", on_membership!(bus::addslotsrange)),
    command!("cluster|delslots", -3, NODE_ADMIN, KeySpec::NONE, ["admin", "slow", "dangerous"], "cluster", "3.0.0",
        "Set hash slots as unbound in receiving node", "O(N) where N is the total number of hash slot arguments", on_membership!(bus::delslots)),
    command!("cluster|delslotsrange", -4, NODE_ADMIN, KeySpec::NONE, ["admin", "slow", "dangerous"], "cluster", "7.0.0",
        "Set hash slots as unbound in receiving node",
        "O(N) where N is the total number of the slots between the start slot and end slot arguments.", on_membership!(bus::delslotsrange)),
    command!("cluster|forget", 3, NODE_ADMIN, KeySpec::NONE, ["admin", "slow", "dangerous"], "cluster", "3.0.0",
        "Remove a node from the nodes table", "O(1)", on_membership!(bus::forget)),
    command!("cluster|reset", -2, ADMIN | NOSCRIPT | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"], "cluster", "3.0.0",
        "Reset a Redis Cluster node",
        "O(N) where N is the number of known nodes. The command may execute a FLUSHALL as a side effect.", on_membership!(bus::reset)),
    command!("cluster|saveconfig", 2, NODE_ADMIN, KeySpec::NONE, ["admin", "slow", "dangerous"], "cluster", "3.0.0",
        "Forces the node to save cluster state on disk", "O(1)", on_membership!(bus::saveconfig)),
    command!("cluster|set-config-epoch", 3, NODE_ADMIN, KeySpec::NONE, ["admin", "slow", "dangerous"], "cluster", "3.0.0",
        "Set the configuration epoch in a new node", "O(1)", on_membership!(bus::set_config_epoch)),
    command!("cluster|setslot", -4, NODE_ADMIN, KeySpec::NONE, ["admin", "slow", "dangerous"], "cluster", "3.0.0",
        "Bind a hash slot to a specific node", "O(1)", on_membership!(bus::setslot)),
    command!("cluster|bumpepoch", 2, NODE_ADMIN, KeySpec::NONE, ["admin", "slow", "dangerous"], "cluster", "3.0.0",
        "Advance the cluster config epoch", "O(1)", on_membership!(bus::bumpepoch)),
    command!("cluster|failover", -2, NODE_ADMIN, KeySpec::NONE, ["admin", "slow", "dangerous"], "cluster", "3.0.0",
        "Forces a replica to perform a manual failover of its master.", "O(1)", on_membership!(bus::failover)),
    command!("cluster|replicate", 3, NODE_ADMIN, KeySpec::NONE, ["admin", "slow", "dangerous"], "cluster", "3.0.0",
        "Reconfigure a node as a replica of the specified master node", "O(1)", on_membership!(bus::replicate)),
    command!("cluster|count-failure-reports", 3, ADMIN | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"], "cluster", "3.0.0",
        "Return the number of failure reports active for a given node",
        "O(N) where N is the number of failure reports", on_membership!(bus::count_failure_reports)),
    command!("cluster|replicas", 3, ADMIN | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"], "cluster", "5.0.0",
        "List replica nodes of the specified master node", "O(1)", on_membership!(replicas)),
    command!("cluster|slaves", 3, ADMIN | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"], "cluster", "3.0.0",
        "List replica nodes of the specified master node", "O(1)", on_membership!(replicas)),
    command!("cluster|flushslots", 2, NODE_ADMIN, KeySpec::NONE, ["admin", "slow", "dangerous"], "cluster", "3.0.0",
        "Delete a node's own slots information", "O(1)", on_membership!(bus::flushslots)),
    command!("cluster|links", 2, STALE, KeySpec::NONE, ["slow"], "cluster", "7.0.0",
        "Returns a list of all TCP links to and from peer nodes in cluster",
        "O(N) where N is the total number of Cluster nodes", on_membership!(bus::links)),
    command!("cluster|migrateslots", -4, NODE_ADMIN, KeySpec::NONE, ["admin", "slow", "dangerous"], "cluster", "9.0.0",
        "Migrate the specified slot ranges from this node to the specified node.",
        "O(N) where N is the total number of the slots between the start slot and end slot arguments.", slot_migration::migrateslots),
    command!("cluster|getslotmigrations", 2, NODE_ADMIN, KeySpec::NONE, ["admin", "slow", "dangerous"], "cluster", "9.0.0",
        "Get information about ongoing and recently finished slot imports and exports.",
        "O(N), where N is the number of active slot import and export jobs.", slot_migration::getslotmigrations),
    command!("cluster|cancelslotmigrations", 2, NODE_ADMIN, KeySpec::NONE, ["admin", "slow", "dangerous"], "cluster", "9.0.0",
        "Cancel all current ongoing slot migration operations.",
        "O(N), where N is the number of active slot migration jobs.", slot_migration::cancelslotmigrations),
    command!("cluster|syncslots", -3, NODE_ADMIN, KeySpec::NONE, ["admin", "slow", "dangerous"], "cluster", "9.0.0",
        "A whole-slot migration's source speaking to its target.", "O(N) where N is the number of keys dropped from the slots.",
        slot_migration::syncslots),
];

/// The flags of the subcommands that change a node of the bus (Redis's).
const NODE_ADMIN: u32 = ADMIN | STALE | NO_ASYNC_LOADING;

/// Every cluster command answers Redis' "cluster support disabled" in forward
/// mode without `cluster-enabled yes`, as Redis' `clusterCommand` does before
/// looking at its subcommand.
fn require_cluster<S: Server>(ctx: &Ctx<'_, S>) -> ServerResult {
    match ctx.core.topology().mode {
        PortMode::Forward if !ctx.core.settings().cluster_bus() => Err(CmdError::ClusterDisabled),
        _ => Ok(()),
    }
}

/// The shard that owns a forward-mode node's membership.
const NODE_SHARD: usize = 0;

/// Forward mode as one node: a subcommand that reads or changes the node runs
/// on shard 0, which owns it, and one that reads a slot's keys on the shard
/// holding them (`shard`). Elsewhere it is asked of that shard (the reply
/// waits for its answer, `Gather::Ask`) and true comes back.
pub(super) fn on_node_shard<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, shard: usize) -> bool {
    let core = &ctx.core;
    let elsewhere = core.topology().mode == PortMode::Forward
        && core.settings().cluster_bus()
        && core.shard_id() != shard;
    if elsewhere {
        let query = ClientQuery::Run(Box::new(AskedCommand::of(ctx.client, args)));
        ctx.gather = Some(Gather::Ask { shard, query });
    }
    elsewhere
}

/// [`on_node_shard`] for the node's membership (shard 0).
fn on_membership_shard<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>) -> bool {
    on_node_shard(ctx, args, NODE_SHARD)
}

fn readonly<S: Server>(
    ctx: &mut Ctx<'_, S>,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    require_cluster(ctx)?;
    ctx.client.readonly = true;
    reply.ok();
    Ok(())
}

fn readwrite<S: Server>(
    ctx: &mut Ctx<'_, S>,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    require_cluster(ctx)?;
    ctx.client.readonly = false;
    reply.ok();
    Ok(())
}

fn asking<S: Server>(ctx: &mut Ctx<'_, S>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    require_cluster(ctx)?;
    ctx.client.asking = true;
    reply.ok();
    Ok(())
}

fn info<S: Server>(ctx: &mut Ctx<'_, S>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    require_cluster(ctx)?;
    if let Some(node) = ctx.core.cluster_node() {
        return bus::info(node, reply);
    }
    let n = ctx.core.topology().nodes.len();
    let text = format!(
        "cluster_state:ok\r\ncluster_slots_assigned:{SLOT_COUNT}\r\ncluster_slots_ok:{SLOT_COUNT}\r\ncluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:{n}\r\ncluster_size:{n}\r\ncluster_current_epoch:{n}\r\ncluster_my_epoch:{}\r\ncluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\ntotal_cluster_links_buffer_limit_exceeded:0\r\n",
        ctx.core.shard_id() + 1
    );
    reply.verbatim("txt", text.as_bytes());
    Ok(())
}

/// The node triple CLUSTER SLOTS lists: host, port (as this client is told it:
/// `Config::client_port`), id, metadata (none).
fn reply_node(reply: &mut Reply<'_>, host: &str, node: &Node, port: u16) {
    reply.array(4);
    reply.bulk(host.as_bytes());
    reply.int(port as i64);
    reply.bulk(node.id.as_bytes());
    reply.map(0);
}

fn slots<S: Server>(ctx: &mut Ctx<'_, S>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    require_cluster(ctx)?;
    if let Some(node) = ctx.core.cluster_node() {
        return bus::slots(node, &asker(ctx), reply);
    }
    let topo = &ctx.core.topology();
    let host = announced_host(ctx);
    reply.array(topo.nodes.len());
    for (i, node) in topo.nodes.iter().enumerate() {
        reply.array(3);
        reply.int(node.first_slot as i64);
        reply.int(node.last_slot as i64);
        let port = ctx
            .core
            .settings()
            .client_port(i, node.port, ctx.client.tls);
        reply_node(reply, host, node, port);
    }
    Ok(())
}

fn shards<S: Server>(ctx: &mut Ctx<'_, S>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    require_cluster(ctx)?;
    if let Some(node) = ctx.core.cluster_node() {
        return bus::shards(node, &asker(ctx), reply);
    }
    let topo = &ctx.core.topology();
    let host = announced_host(ctx);
    reply.array(topo.nodes.len());
    for (i, node) in topo.nodes.iter().enumerate() {
        // Redis: with tls-cluster, `port` is the plain port and `tls-port` the TLS one.
        let tls_port = ctx
            .core
            .settings()
            .tls_port(i)
            .filter(|_| ctx.core.settings().param("tls-cluster") == "yes");
        reply.map(2);
        reply.bulk(b"slots");
        reply.array(2);
        reply.int(node.first_slot as i64);
        reply.int(node.last_slot as i64);
        reply.bulk(b"nodes");
        reply.array(1);
        reply.map(7 + usize::from(tls_port.is_some()));
        reply.bulk(b"id");
        reply.bulk(node.id.as_bytes());
        reply.bulk(b"port");
        reply.int(node.port as i64);
        if let Some(port) = tls_port {
            reply.bulk(b"tls-port");
            reply.int(port as i64);
        }
        reply.bulk(b"ip");
        reply.bulk(host.as_bytes());
        reply.bulk(b"endpoint");
        reply.bulk(host.as_bytes());
        reply.bulk(b"role");
        reply.bulk(b"master");
        reply.bulk(b"replication-offset");
        reply.int(0);
        reply.bulk(b"health");
        reply.bulk(b"online");
    }
    Ok(())
}

fn nodes<S: Server>(ctx: &mut Ctx<'_, S>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    require_cluster(ctx)?;
    if let Some(node) = ctx.core.cluster_node() {
        return bus::nodes(node, &asker(ctx), reply);
    }
    let topo = &ctx.core.topology();
    let host = announced_host(ctx);
    let mut text = String::new();
    for (i, node) in topo.nodes.iter().enumerate() {
        let flags = if i == ctx.core.shard_id() {
            "myself,master"
        } else {
            "master"
        };
        let port = ctx
            .core
            .settings()
            .client_port(i, node.port, ctx.client.tls);
        text.push_str(&format!(
            "{} {}:{}@{} {} - 0 0 {} connected {}-{}\n",
            node.id,
            host,
            port,
            node.port as u32 + 10000,
            flags,
            i + 1,
            node.first_slot,
            node.last_slot
        ));
    }
    reply.verbatim("txt", text.as_bytes());
    Ok(())
}

/// CLUSTER REPLICAS / SLAVES node-id: the replicas' lines, as CLUSTER NODES
/// writes them. The shards of a process without the bus are masters with no
/// replicas in the table (a replica of one is a replica of that shard alone,
/// which CLUSTER NODES does not list either).
fn replicas<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    require_cluster(ctx)?;
    if let Some(node) = ctx.core.cluster_node() {
        return bus::replicas(node, &asker(ctx), args.get(2), reply);
    }
    if !ctx
        .core
        .topology()
        .nodes
        .iter()
        .any(|n| n.id.as_bytes() == args.get(2))
    {
        return Err(bus::unknown_node(args.get(2)));
    }
    reply.array(0);
    Ok(())
}

/// This client, for what a node of the bus tells it of the nodes' addresses.
fn asker<'a, S: Server>(ctx: &'a Ctx<'_, S>) -> bus::Asker<'a> {
    bus::Asker {
        own_ip: announced_host(ctx),
        tls_cluster: ctx.core.settings().param("tls-cluster") == "yes",
        tls: ctx.client.tls,
        endpoint: ctx.core.settings().preferred_endpoint(),
    }
}

/// The host this client is told to connect to (see `Topology::announced_host`).
fn announced_host<'a, S: Server>(ctx: &'a Ctx<'_, S>) -> &'a str {
    let core = &ctx.core;
    core.topology()
        .announced_host(&core.settings().cluster_announce_ip, &ctx.client.local)
}

fn keyslot<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    require_cluster(ctx)?;
    reply.int(key_slot(args.get(2)) as i64);
    Ok(())
}

fn myid<S: Server>(ctx: &mut Ctx<'_, S>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    require_cluster(ctx)?;
    if let Some(node) = ctx.core.cluster_node() {
        return bus::myid(node, reply);
    }
    let id = ctx.core.topology().nodes[ctx.core.shard_id()].id.clone();
    reply.bulk(id.as_bytes());
    Ok(())
}

/// CLUSTER MYSHARDID: the node's shard id (Redis 7.2). Without the bus each
/// shard is a master alone in its shard, under an id as stable as its name.
fn myshardid<S: Server>(
    ctx: &mut Ctx<'_, S>,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    require_cluster(ctx)?;
    if let Some(node) = ctx.core.cluster_node() {
        return bus::myshardid(node, reply);
    }
    let id = ctx.core.topology().nodes[ctx.core.shard_id()]
        .shard_id
        .clone();
    reply.bulk(id.as_bytes());
    Ok(())
}

/// A slot argument, if it is an integer in 0..16384.
fn parse_slot(arg: &[u8]) -> Option<u16> {
    parse_i64(arg)
        .filter(|s| (0..SLOT_COUNT as i64).contains(s))
        .map(|s| s as u16)
}

fn countkeysinslot<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    require_cluster(ctx)?;
    // An integer first, then a slot, as Redis' getLongLongFromObjectOrReply.
    parse_i64(args.get(2)).ok_or(CmdError::NotInteger)?;
    let slot = parse_slot(args.get(2)).ok_or(CmdError::InvalidSlot)?;
    if on_node_shard(ctx, args, ctx.core.topology().owner(slot)) {
        return Ok(());
    }
    reply.int(
        ctx.core
            .engine_mut()
            .count_keys_in_slot(ctx.client.db, slot) as i64,
    );
    Ok(())
}

fn getkeysinslot<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    require_cluster(ctx)?;
    // Both integers first, then in range, as Redis' getLongLongFromObjectOrReply.
    let slot = parse_i64(args.get(2)).ok_or(CmdError::NotInteger)?;
    let count = parse_i64(args.get(3)).ok_or(CmdError::NotInteger)?;
    let slot = (0..SLOT_COUNT as i64)
        .contains(&slot)
        .then_some(slot as u16);
    let count = usize::try_from(count).ok();
    let (Some(slot), Some(count)) = (slot, count) else {
        return Err(CmdError::InvalidSlotOrCount);
    };
    if on_node_shard(ctx, args, ctx.core.topology().owner(slot)) {
        return Ok(());
    }
    let keys = ctx
        .core
        .engine_mut()
        .keys_in_slot(ctx.client.db, slot, count);
    reply.array(keys.len());
    keys.iter().for_each(|k| reply.bulk(k));
    Ok(())
}

/// A slot argument of SLOT-STATS (Redis' `getSlotOrReply`).
fn slot_arg(arg: &[u8]) -> Result<u16, CmdError> {
    parse_slot(arg).ok_or(CmdError::InvalidOrOutOfRangeSlot)
}

/// The metrics SLOT-STATS ORDERBY sorts by. Ruvio keeps no per-slot CPU or network
/// counters, so it answers as Redis does with `cluster-slot-stats-enabled no` (its
/// default): `key-count` is the only metric, in the reply and in ORDERBY.
const SLOT_STATS_METRICS: &[&str] = &["key-count"];

/// `CLUSTER SLOT-STATS SLOTSRANGE start end | ORDERBY metric [LIMIT n] [ASC | DESC]`
/// (Redis 8.0): `[slot, {key-count: n}]` for each slot this shard serves, in slot
/// order for SLOTSRANGE, by the metric (ties by slot) for ORDERBY, descending
/// unless ASC. Errors and their order as Redis's `clusterSlotStatsCommand`.
fn slot_stats<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    require_cluster(ctx)?;
    let served: Vec<u16> = match ctx.core.cluster_node() {
        Some(node) => (0..SLOT_COUNT).filter(|&s| node.serves(s)).collect(),
        None => {
            let node = &ctx.core.topology().nodes[ctx.core.shard_id()];
            (node.first_slot..=node.last_slot).collect()
        }
    };
    // One walk of the keyspace for every slot (Redis keeps one dict per slot; Ruvio
    // one per database). Cluster mode has database 0 only, as Redis counts.
    let counts = ctx.core.engine_mut().key_counts_by_slot(0);
    let variant = args.get(2);
    let slots: Vec<u16> = if args.len() == 5 && variant.eq_ignore_ascii_case(b"SLOTSRANGE") {
        let start = slot_arg(args.get(3))?;
        let end = slot_arg(args.get(4))?;
        if start > end {
            return Err(CmdError::SlotRangeReversed(start, end));
        }
        (start..=end)
            .filter(|s| served.binary_search(s).is_ok())
            .collect()
    } else if args.len() >= 4 && variant.eq_ignore_ascii_case(b"ORDERBY") {
        let metric = args.get(3);
        if !SLOT_STATS_METRICS
            .iter()
            .any(|m| metric.eq_ignore_ascii_case(m.as_bytes()))
        {
            return Err(CmdError::SlotStatsMetric);
        }
        let (limit, descending) = orderby_options(args)?;
        let mut slots = served;
        // Stable sort over slots in order: ties stay by ascending slot, as Redis's
        // comparators order them.
        if descending {
            slots.sort_by_key(|&s| std::cmp::Reverse(counts[s as usize]));
        } else {
            slots.sort_by_key(|&s| counts[s as usize]);
        }
        slots.truncate(limit);
        slots
    } else {
        return Err(CmdError::subcommand_syntax(args.get(1), "cluster"));
    };
    reply.array(slots.len());
    for slot in slots {
        reply.array(2);
        reply.int(slot as i64);
        reply.map(1);
        reply.bulk(b"key-count");
        reply.int(counts[slot as usize] as i64);
    }
    Ok(())
}

/// ORDERBY's `[LIMIT n] [ASC | DESC]` after the metric: the limit (16384 when
/// absent) and whether the order descends (the default).
fn orderby_options(args: Args<'_>) -> Result<(usize, bool), CmdError> {
    let (mut limit, mut descending) = (SLOT_COUNT as usize, true);
    let (mut limits, mut orders) = (0, 0);
    let mut i = 4;
    while i < args.len() {
        let arg = args.get(i);
        if arg.eq_ignore_ascii_case(b"LIMIT") && i + 1 < args.len() {
            limit = parse_i64(args.get(i + 1))
                .filter(|n| (1..=SLOT_COUNT as i64).contains(n))
                .ok_or(CmdError::SlotStatsLimit)? as usize;
            limits += 1;
            i += 1;
        } else if arg.eq_ignore_ascii_case(b"ASC") {
            descending = false;
            orders += 1;
        } else if arg.eq_ignore_ascii_case(b"DESC") {
            descending = true;
            orders += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        if limits > 1 || orders > 1 {
            return Err(CmdError::SlotStatsRepeatedFilter);
        }
        i += 1;
    }
    Ok((limit, descending))
}

fn help<S: Server>(ctx: &mut Ctx<'_, S>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    require_cluster(ctx)?;
    if ctx.core.settings().cluster_bus() {
        reply_help(reply, b"cluster", bus::HELP);
        return Ok(());
    }
    reply_help(
        reply,
        b"cluster",
        &[
            "COUNTKEYSINSLOT <slot>",
            "    Return the number of keys in <slot>.",
            "GETKEYSINSLOT <slot> <count>",
            "    Return key names stored by current node in a slot.",
            "INFO",
            "    Return information about the cluster.",
            "KEYSLOT <key>",
            "    Return the hash slot for <key>.",
            "MYID",
            "    Return the node id.",
            "MYSHARDID",
            "    Return the node's shard id.",
            "NODES",
            "    Return cluster configuration seen by node. Output format:",
            "    <id> <ip:port@bus-port[,hostname]> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
            "REPLICAS <node-id>",
            "    Return <node-id> replicas.",
            "SHARDS",
            "    Return information about slot range mappings and the nodes associated with them.",
            "SLOTS",
            "    Return information about slots range mappings. Each range is made of:",
            "    start, end, master and replicas IP addresses, ports and ids",
        ],
    );
    Ok(())
}
