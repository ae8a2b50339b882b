//! CLUSTER (INFO, SLOTS, SHARDS, NODES, KEYSLOT, MYID, COUNTKEYSINSLOT,
//! GETKEYSINSLOT, HELP), READONLY, READWRITE and ASKING.
//!
//! In per-shard mode every shard answers as one master node of a cluster that is
//! the whole server; in forward mode Ruvio is a standalone server and answers as
//! Redis does with cluster support disabled.

use super::{dispatch_sub, meta, parse_i64, Ctx, ServerCommand, ServerResult, SubCommand};
use crate::config::PortMode;
use crate::topology::Node;
use ruvio_engine::command::flags::*;
use ruvio_engine::command::reply_help;
use ruvio_engine::slot::{key_slot, SLOT_COUNT};
use ruvio_engine::CmdError;
use ruvio_resp::{Args, Reply};

/// The cluster family's table.
pub const COMMANDS: &[ServerCommand] = &[
    ServerCommand {
        meta: meta(
            "cluster",
            -2,
            0,
            &["slow"],
            "cluster",
            "A container for Redis Cluster commands.",
            "3.0.0",
            "Depends on subcommand.",
        ),
        handler: cluster,
    },
    ServerCommand {
        meta: meta(
            "readonly",
            1,
            LOADING | STALE | FAST,
            &["fast", "connection"],
            "cluster",
            "Enables read-only queries for a connection to a Redis Cluster replica node.",
            "3.0.0",
            "O(1)",
        ),
        handler: readonly,
    },
    ServerCommand {
        meta: meta(
            "readwrite",
            1,
            LOADING | STALE | FAST,
            &["fast", "connection"],
            "cluster",
            "Enables read-write queries for a connection to a Reids Cluster replica node.",
            "3.0.0",
            "O(1)",
        ),
        handler: readwrite,
    },
    ServerCommand {
        meta: meta(
            "asking",
            1,
            FAST,
            &["fast", "connection"],
            "cluster",
            "Signals that a cluster client is following an -ASK redirect.",
            "3.0.0",
            "O(1)",
        ),
        handler: asking,
    },
];

const SUBCOMMANDS: &[SubCommand] = &[
    SubCommand {
        name: "cluster|info",
        arity: 2,
        handler: info,
    },
    SubCommand {
        name: "cluster|slots",
        arity: 2,
        handler: slots,
    },
    SubCommand {
        name: "cluster|shards",
        arity: 2,
        handler: shards,
    },
    SubCommand {
        name: "cluster|nodes",
        arity: 2,
        handler: nodes,
    },
    SubCommand {
        name: "cluster|keyslot",
        arity: 3,
        handler: keyslot,
    },
    SubCommand {
        name: "cluster|myid",
        arity: 2,
        handler: myid,
    },
    SubCommand {
        name: "cluster|countkeysinslot",
        arity: 3,
        handler: countkeysinslot,
    },
    SubCommand {
        name: "cluster|getkeysinslot",
        arity: 4,
        handler: getkeysinslot,
    },
    SubCommand {
        name: "cluster|help",
        arity: 2,
        handler: help,
    },
];

/// Cluster commands answer Redis' "cluster support disabled" in forward mode.
fn require_cluster(ctx: &Ctx<'_>) -> ServerResult {
    match ctx.core.topo.mode {
        PortMode::PerShard => Ok(()),
        PortMode::Forward => Err(CmdError::ClusterDisabled),
    }
}

/// `CLUSTER <subcommand> [args]`
fn cluster(ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    require_cluster(ctx)?;
    dispatch_sub(ctx, args, reply, "cluster", SUBCOMMANDS)
}

fn readonly(ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    require_cluster(ctx)?;
    ctx.client.readonly = true;
    reply.ok();
    Ok(())
}

fn readwrite(ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    require_cluster(ctx)?;
    ctx.client.readonly = false;
    reply.ok();
    Ok(())
}

fn asking(ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    require_cluster(ctx)?;
    reply.ok();
    Ok(())
}

fn info(ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let n = ctx.core.topo.nodes.len();
    let text = format!(
        "cluster_state:ok\r\ncluster_slots_assigned:{SLOT_COUNT}\r\ncluster_slots_ok:{SLOT_COUNT}\r\ncluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:{n}\r\ncluster_size:{n}\r\ncluster_current_epoch:{n}\r\ncluster_my_epoch:{}\r\ncluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\ntotal_cluster_links_buffer_limit_exceeded:0\r\n",
        ctx.core.id + 1
    );
    reply.verbatim("txt", text.as_bytes());
    Ok(())
}

/// The node triple CLUSTER SLOTS lists: host, port, id, metadata (none).
fn reply_node(reply: &mut Reply<'_>, host: &str, node: &Node) {
    reply.array(4);
    reply.bulk(host.as_bytes());
    reply.int(node.port as i64);
    reply.bulk(node.id.as_bytes());
    reply.map(0);
}

fn slots(ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let topo = &ctx.core.topo;
    reply.array(topo.nodes.len());
    for node in &topo.nodes {
        reply.array(3);
        reply.int(node.first_slot as i64);
        reply.int(node.last_slot as i64);
        reply_node(reply, &topo.host, node);
    }
    Ok(())
}

fn shards(ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let topo = &ctx.core.topo;
    reply.array(topo.nodes.len());
    for node in &topo.nodes {
        reply.map(2);
        reply.bulk(b"slots");
        reply.array(2);
        reply.int(node.first_slot as i64);
        reply.int(node.last_slot as i64);
        reply.bulk(b"nodes");
        reply.array(1);
        reply.map(7);
        reply.bulk(b"id");
        reply.bulk(node.id.as_bytes());
        reply.bulk(b"port");
        reply.int(node.port as i64);
        reply.bulk(b"ip");
        reply.bulk(topo.host.as_bytes());
        reply.bulk(b"endpoint");
        reply.bulk(topo.host.as_bytes());
        reply.bulk(b"role");
        reply.bulk(b"master");
        reply.bulk(b"replication-offset");
        reply.int(0);
        reply.bulk(b"health");
        reply.bulk(b"online");
    }
    Ok(())
}

fn nodes(ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let topo = &ctx.core.topo;
    let mut text = String::new();
    for (i, node) in topo.nodes.iter().enumerate() {
        let flags = if i == ctx.core.id {
            "myself,master"
        } else {
            "master"
        };
        text.push_str(&format!(
            "{} {}:{}@{} {} - 0 0 {} connected {}-{}\n",
            node.id,
            topo.host,
            node.port,
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

fn keyslot(_ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    reply.int(key_slot(args.get(2)) as i64);
    Ok(())
}

fn myid(ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let id = ctx.core.topo.nodes[ctx.core.id].id.clone();
    reply.bulk(id.as_bytes());
    Ok(())
}

/// A slot argument, if it is an integer in 0..16384.
fn parse_slot(arg: &[u8]) -> Option<u16> {
    parse_i64(arg)
        .filter(|s| (0..SLOT_COUNT as i64).contains(s))
        .map(|s| s as u16)
}

fn countkeysinslot(ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let slot = parse_slot(args.get(2)).ok_or(CmdError::InvalidSlot)?;
    reply.int(ctx.core.engine.count_keys_in_slot(ctx.client.db, slot) as i64);
    Ok(())
}

fn getkeysinslot(ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let slot = parse_slot(args.get(2));
    let count = parse_i64(args.get(3)).and_then(|n| usize::try_from(n).ok());
    let (Some(slot), Some(count)) = (slot, count) else {
        return Err(CmdError::InvalidSlotOrCount);
    };
    let keys = ctx.core.engine.keys_in_slot(ctx.client.db, slot, count);
    reply.array(keys.len());
    keys.iter().for_each(|k| reply.bulk(k));
    Ok(())
}

fn help(_ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
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
            "NODES",
            "    Return cluster configuration seen by node. Output format:",
            "    <id> <ip:port@bus-port[,hostname]> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
            "SHARDS",
            "    Return information about slot range mappings and the nodes associated with them.",
            "SLOTS",
            "    Return information about slots range mappings. Each range is made of:",
            "    start, end, master and replicas IP addresses, ports and ids",
        ],
    );
    Ok(())
}
