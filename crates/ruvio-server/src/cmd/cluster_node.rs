//! CLUSTER on a node of the cluster bus (`cluster-enabled yes`): the views of
//! the whole cluster as the shard's membership knows it (INFO, NODES, SLOTS,
//! SHARDS, MYID, MYSHARDID) and what an operator changes (MEET, ADDSLOTS, ADDSLOTSRANGE,
//! DELSLOTS, DELSLOTSRANGE, FLUSHSLOTS, FORGET, RESET, SAVECONFIG, SET-CONFIG-EPOCH,
//! BUMPEPOCH, REPLICATE, FAILOVER, COUNT-FAILURE-REPORTS) and its bus links (LINKS), with redis-server 7.0's
//! replies and error strings (tests/cluster_binary.rs compares them).
//!
//! Apart from `cluster.rs` because the fixed topology's answers stay as they
//! were: these run only where the shard owns a `ShardNode`; without one the
//! subcommands that change the cluster do not exist (`unknown subcommand`).

use super::{parse_i64, Ctx, Server, ServerResult, SharedReads};
use crate::cluster::bus::links::KINDS;
use crate::cluster::membership::{SetSlot, State};
use crate::cluster::node::ShardNode;
use crate::cluster::nodes_file::{render_line, NodeLine};
use crate::config::cluster::Endpoint;
use ruvio_engine::slot::SLOT_COUNT;
use ruvio_engine::CmdError;
use ruvio_resp::{Args, Reply};
use std::net::IpAddr;

/// What redis-server's `clusterGetMessageTypeString` calls each type, by
/// wire number (CLUSTER INFO's `cluster_stats_messages_<type>_*`).
const KIND_NAMES: [&str; KINDS] = [
    "ping",
    "pong",
    "meet",
    "fail",
    "publish",
    "auth-req",
    "auth-ack",
    "update",
    "mfstart",
    "module",
    "publishshard",
];

/// CLUSTER HELP on a node of the bus: redis-server 7.0's lines, in its order,
/// for the subcommands there are.
pub(super) const HELP: &[&str] = &[
    "ADDSLOTS <slot> [<slot> ...]",
    "    Assign slots to current node.",
    "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Assign slots which are between <start-slot> and <end-slot> to current node.",
    "BUMPEPOCH",
    "    Advance the cluster config epoch.",
    "COUNT-FAILURE-REPORTS <node-id>",
    "    Return number of failure reports for <node-id>.",
    "COUNTKEYSINSLOT <slot>",
    "    Return the number of keys in <slot>.",
    "DELSLOTS <slot> [<slot> ...]",
    "    Delete slots information from current node.",
    "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Delete slots information which are between <start-slot> and <end-slot> from current node.",
    "FAILOVER [FORCE|TAKEOVER]",
    "    Promote current replica node to being a master.",
    "FORGET <node-id>",
    "    Remove a node from the cluster.",
    "GETKEYSINSLOT <slot> <count>",
    "    Return key names stored by current node in a slot.",
    "FLUSHSLOTS",
    "    Delete current node own slots information.",
    "INFO",
    "    Return information about the cluster.",
    "KEYSLOT <key>",
    "    Return the hash slot for <key>.",
    "MEET <ip> <port> [<bus-port>]",
    "    Connect nodes into a working cluster.",
    "MYID",
    "    Return the node id.",
    "MYSHARDID",
    "    Return the node's shard id.",
    "NODES",
    "    Return cluster configuration seen by node. Output format:",
    "    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
    "REPLICATE <node-id>",
    "    Configure current node as replica to <node-id>.",
    "RESET [HARD|SOFT]",
    "    Reset current node (default: soft).",
    "SET-CONFIG-EPOCH <epoch>",
    "    Set config epoch of current node.",
    "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
    "    Set slot state.",
    "REPLICAS <node-id>",
    "    Return <node-id> replicas.",
    "SAVECONFIG",
    "    Force saving cluster configuration on disk.",
    "SLOTS",
    "    Return information about slots range mappings. Each range is made of:",
    "    start, end, master and replicas IP addresses, ports and ids",
    "SHARDS",
    "    Return information about slot range mappings and the nodes associated with them.",
    "LINKS",
    "    Return information about all network links between this node and its peers.",
    "    Output format is an array where each array element is a map containing attributes of a link",
    "MIGRATESLOTS SLOTSRANGE start-slot end-slot [start-slot end-slot ...] NODE node-id [SLOTSRANGE start-slot end-slot [start-slot end-slot ...] NODE node-id ...]",
    "    Migrate the specified slot ranges from this node to the specified node.",
    "CANCELSLOTMIGRATIONS",
    "    Cancel all migrations.",
    "GETSLOTMIGRATIONS",
    "    Get information about ongoing and recently finished slot imports and exports.",
];

/// The shard's node, or Redis's answer to a subcommand it does not have.
fn node<'a, S: Server>(
    ctx: &'a mut Ctx<'_, S>,
    args: Args<'_>,
) -> Result<&'a mut ShardNode, CmdError> {
    match ctx.core.cluster_node_mut() {
        Some(node) => Ok(node),
        None => Err(CmdError::unknown_subcommand(args.get(1), "cluster")),
    }
}

/// An error line of Redis's text (`ERR ...`).
fn error(text: String) -> CmdError {
    CmdError::Line(text.into_bytes())
}

/// CLUSTER INFO.
pub(super) fn info(node: &ShardNode, reply: &mut Reply<'_>) -> ServerResult {
    let cluster = &node.cluster;
    let (assigned, pfail, fail) = cluster.slot_health();
    let (current_epoch, my_epoch) = cluster.epochs();
    let state = match cluster.state {
        State::Ok => "ok",
        State::Fail => "fail",
    };
    let mut text = format!(
        "cluster_state:{state}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{}\r\n\
         cluster_slots_pfail:{pfail}\r\ncluster_slots_fail:{fail}\r\ncluster_known_nodes:{}\r\n\
         cluster_size:{}\r\ncluster_current_epoch:{current_epoch}\r\ncluster_my_epoch:{my_epoch}\r\n",
        assigned - pfail - fail,
        cluster.known_nodes(),
        cluster.size(),
    );
    for (direction, counts) in [
        ("sent", &node.links.sent),
        ("received", &node.links.received),
    ] {
        for (name, count) in KIND_NAMES.iter().zip(counts.iter()) {
            if *count != 0 {
                text.push_str(&format!(
                    "cluster_stats_messages_{name}_{direction}:{count}\r\n"
                ));
            }
        }
        let total: u64 = counts.iter().sum();
        text.push_str(&format!("cluster_stats_messages_{direction}:{total}\r\n"));
    }
    text.push_str("total_cluster_links_buffer_limit_exceeded:0\r\n");
    reply.verbatim("txt", text.as_bytes());
    Ok(())
}

/// Who asks for the node table, for what they are told of its addresses.
pub(super) struct Asker<'a> {
    /// This node's host as the client is told it (`Topology::announced_host`).
    pub own_ip: &'a str,
    /// `tls-cluster yes`: a node's `port` is its TLS port, its `pport` the
    /// plain one.
    pub tls_cluster: bool,
    /// The client came in on a TLS port.
    pub tls: bool,
    /// `cluster-preferred-endpoint-type`: what SLOTS and SHARDS name a node by.
    pub endpoint: Endpoint,
}

impl Asker<'_> {
    /// Redis's `use_pport`: a plain client under `tls-cluster` is told the
    /// nodes' plain ports.
    fn wants_plain_ports(&self) -> bool {
        self.tls_cluster && !self.tls
    }
}

/// CLUSTER NODES.
pub(super) fn nodes(node: &ShardNode, asker: &Asker<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let mut text = String::new();
    for line in seen_by_client(node, asker) {
        render_line(&line, &mut text);
        text.push('\n');
    }
    reply.verbatim("txt", text.as_bytes());
    Ok(())
}

/// The node table as this client is told it: this node at `own_ip`, the
/// address the client reached it on when bound to every interface (as the fixed
/// topology answers: `Topology::announced_host`); the other nodes where the bus
/// found them; each at its plain port when the client wants those and the node
/// announced one.
fn seen_by_client(node: &ShardNode, asker: &Asker<'_>) -> Vec<NodeLine> {
    let mut lines = own_at_its_host(node, asker);
    if asker.wants_plain_ports() {
        for line in lines.iter_mut().filter(|l| l.pport != 0) {
            line.port = line.pport;
        }
    }
    lines
}

/// The node table with this node at the host the client is told.
fn own_at_its_host(node: &ShardNode, asker: &Asker<'_>) -> Vec<NodeLine> {
    let mut lines = node.cluster.nodes_file().nodes;
    for line in &mut lines {
        // nodes.conf's aux fields are not shown to clients (Redis 7.2).
        line.shard_id = None;
        if line.has_flag("myself") {
            line.ip = asker.own_ip.to_string();
        }
    }
    lines
}

/// CLUSTER REPLICAS / SLAVES `name` on a node of the bus: the lines of the
/// nodes that replicate it, in Redis's errors' order (an unknown node, then one
/// that is itself a replica).
pub(super) fn replicas(
    node: &ShardNode,
    asker: &Asker<'_>,
    name: &[u8],
    reply: &mut Reply<'_>,
) -> ServerResult {
    let lines = seen_by_client(node, asker);
    let Some(master) = lines.iter().find(|l| l.name.as_bytes() == name) else {
        return Err(unknown_node(name));
    };
    if master.has_flag("slave") {
        return Err(CmdError::Line(
            b"ERR The specified node is not a master".to_vec(),
        ));
    }
    let replicas: Vec<&NodeLine> = lines
        .iter()
        .filter(|l| l.master.as_deref().map(str::as_bytes) == Some(name))
        .collect();
    reply.array(replicas.len());
    for line in replicas {
        let mut text = String::new();
        render_line(line, &mut text);
        reply.bulk(text.as_bytes());
    }
    Ok(())
}

/// Redis's `Unknown node <name>`.
pub(super) fn unknown_node(name: &[u8]) -> CmdError {
    error(format!("ERR Unknown node {}", quoted(name)))
}

/// CLUSTER MYID.
pub(super) fn myid(node: &ShardNode, reply: &mut Reply<'_>) -> ServerResult {
    reply.bulk(&node.cluster.myself());
    Ok(())
}

/// CLUSTER MYSHARDID.
pub(super) fn myshardid(node: &ShardNode, reply: &mut Reply<'_>) -> ServerResult {
    reply.bulk(&node.cluster.my_shard_id());
    Ok(())
}

/// The nodes as CLUSTER NODES lists them, without those in a handshake or
/// without an address (Redis leaves them out of SLOTS and SHARDS).
fn listed(mut lines: Vec<NodeLine>) -> Vec<NodeLine> {
    lines.retain(|l| !l.has_flag("handshake") && !l.has_flag("noaddr"));
    lines
}

/// One node as CLUSTER SLOTS shows it (Redis 7.0's `addNodeToNodeReply`):
/// the preferred endpoint (a null for `unknown-endpoint`), port, id, and the
/// addresses that are not the endpoint (`ip`, a `hostname` it announced).
fn slots_entry(reply: &mut Reply<'_>, line: &NodeLine, endpoint: Endpoint) {
    let hostname = line.hostname.as_deref().unwrap_or_default();
    reply.array(4);
    match endpoint {
        Endpoint::Unknown => reply.null(),
        endpoint => reply.bulk(endpoint.of(&line.ip, hostname).as_bytes()),
    }
    reply.int(i64::from(line.port));
    reply.bulk(line.name.as_bytes());
    let ip = endpoint != Endpoint::Ip;
    let host = endpoint != Endpoint::Hostname && !hostname.is_empty();
    reply.map(usize::from(ip) + usize::from(host));
    if ip {
        reply.bulk(b"ip");
        reply.bulk(line.ip.as_bytes());
    }
    if host {
        reply.bulk(b"hostname");
        reply.bulk(hostname.as_bytes());
    }
}

/// CLUSTER SLOTS: each master's slot ranges in slot order, with its replicas
/// that are not failing.
pub(super) fn slots(node: &ShardNode, asker: &Asker<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let lines = listed(seen_by_client(node, asker));
    let mut ranges: Vec<(u16, u16, &NodeLine)> = lines
        .iter()
        .flat_map(|l| l.slots.iter().map(move |&(first, last)| (first, last, l)))
        .collect();
    ranges.sort_by_key(|(first, _, _)| *first);
    reply.array(ranges.len());
    for (first, last, master) in ranges {
        let replicas: Vec<&NodeLine> = lines
            .iter()
            .filter(|l| l.master.as_deref() == Some(master.name.as_str()) && !l.has_flag("fail"))
            .collect();
        reply.array(3 + replicas.len());
        reply.int(i64::from(first));
        reply.int(i64::from(last));
        slots_entry(reply, master, asker.endpoint);
        replicas
            .iter()
            .for_each(|r| slots_entry(reply, r, asker.endpoint));
    }
    Ok(())
}

/// CLUSTER SHARDS: each master with its slots and nodes (itself, replicas).
/// Under `tls-cluster` a node's `port` is its plain port (left out when it
/// announced none) and `tls-port` its TLS one, whoever asks, as Redis 7.0.
pub(super) fn shards(node: &ShardNode, asker: &Asker<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let lines = listed(own_at_its_host(node, asker));
    let masters: Vec<&NodeLine> = lines.iter().filter(|l| l.has_flag("master")).collect();
    reply.array(masters.len());
    for master in masters {
        reply.map(2);
        reply.bulk(b"slots");
        reply.array(master.slots.len() * 2);
        for &(first, last) in &master.slots {
            reply.int(i64::from(first));
            reply.int(i64::from(last));
        }
        reply.bulk(b"nodes");
        let members: Vec<&NodeLine> = std::iter::once(master)
            .chain(
                lines
                    .iter()
                    .filter(|l| l.master.as_deref() == Some(master.name.as_str())),
            )
            .collect();
        reply.array(members.len());
        for member in members {
            let role: &[u8] = if member.has_flag("master") {
                b"master"
            } else {
                b"replica"
            };
            let health: &[u8] = if member.has_flag("fail") {
                b"fail"
            } else {
                b"online"
            };
            let (port, tls_port) = match asker.tls_cluster {
                true => (member.pport, Some(member.port)),
                false => (member.port, None),
            };
            let hostname = member.hostname.as_deref().unwrap_or_default();
            let fields = 6 + usize::from(!hostname.is_empty());
            reply.map(fields + usize::from(port != 0) + usize::from(tls_port.is_some()));
            reply.bulk(b"id");
            reply.bulk(member.name.as_bytes());
            if port != 0 {
                reply.bulk(b"port");
                reply.int(i64::from(port));
            }
            if let Some(tls_port) = tls_port {
                reply.bulk(b"tls-port");
                reply.int(i64::from(tls_port));
            }
            reply.bulk(b"ip");
            reply.bulk(member.ip.as_bytes());
            reply.bulk(b"endpoint");
            reply.bulk(asker.endpoint.of(&member.ip, hostname).as_bytes());
            if !hostname.is_empty() {
                reply.bulk(b"hostname");
                reply.bulk(hostname.as_bytes());
            }
            reply.bulk(b"role");
            reply.bulk(role);
            reply.bulk(b"replication-offset");
            reply.int(0);
            reply.bulk(b"health");
            reply.bulk(health);
        }
    }
    Ok(())
}

/// A slot argument (`getSlotOrReply`).
fn slot_arg(arg: &[u8]) -> Result<u16, CmdError> {
    parse_i64(arg)
        .filter(|s| (0..i64::from(SLOT_COUNT)).contains(s))
        .map(|s| s as u16)
        .ok_or(CmdError::InvalidOrOutOfRangeSlot)
}

/// `checkSlotAssignmentsOrReply`: each slot of `first..=last` is free to add
/// (or assigned, to delete) and named once in the command.
fn check_slots(
    node: &ShardNode,
    seen: &mut [bool],
    delete: bool,
    first: u16,
    last: u16,
) -> ServerResult {
    for slot in first..=last {
        let assigned = node.cluster.slot_assigned(slot);
        if delete && !assigned {
            return Err(error(format!("ERR Slot {slot} is already unassigned")));
        }
        if !delete && assigned {
            return Err(error(format!("ERR Slot {slot} is already busy")));
        }
        if std::mem::replace(&mut seen[usize::from(slot)], true) {
            return Err(error(format!("ERR Slot {slot} specified multiple times")));
        }
    }
    Ok(())
}

/// Applies checked slots and saves.
fn assign(
    node: &mut ShardNode,
    seen: &[bool],
    delete: bool,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let slots = (0..SLOT_COUNT).filter(|s| seen[usize::from(*s)]);
    if delete {
        node.cluster.del_slots(slots);
    } else {
        node.cluster.add_slots(slots);
    }
    node.changed();
    reply.ok();
    Ok(())
}

/// CLUSTER ADDSLOTS / DELSLOTS slot [slot ...]: every slot parsed first, then
/// checked, as Redis.
fn slots_command<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
    delete: bool,
) -> ServerResult {
    let node = node(ctx, args)?;
    let slots = (2..args.len())
        .map(|i| slot_arg(args.get(i)))
        .collect::<Result<Vec<u16>, CmdError>>()?;
    let mut seen = vec![false; usize::from(SLOT_COUNT)];
    for slot in slots {
        check_slots(node, &mut seen, delete, slot, slot)?;
    }
    assign(node, &seen, delete, reply)
}

pub(super) fn addslots<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    slots_command(ctx, args, reply, false)
}

pub(super) fn delslots<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    slots_command(ctx, args, reply, true)
}

/// CLUSTER ADDSLOTSRANGE / DELSLOTSRANGE start end [start end ...]: each pair
/// parsed and checked in turn, as Redis.
fn ranges_command<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
    delete: bool,
) -> ServerResult {
    let node = node(ctx, args)?;
    if args.len() % 2 == 1 {
        let name = match delete {
            true => "cluster|delslotsrange",
            false => "cluster|addslotsrange",
        };
        return Err(CmdError::WrongArity(name));
    }
    let mut seen = vec![false; usize::from(SLOT_COUNT)];
    for pair in (2..args.len()).step_by(2) {
        let first = slot_arg(args.get(pair))?;
        let last = slot_arg(args.get(pair + 1))?;
        if first > last {
            return Err(error(format!(
                "ERR start slot number {first} is greater than end slot number {last}"
            )));
        }
        check_slots(node, &mut seen, delete, first, last)?;
    }
    assign(node, &seen, delete, reply)
}

pub(super) fn addslotsrange<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    ranges_command(ctx, args, reply, false)
}

pub(super) fn delslotsrange<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    ranges_command(ctx, args, reply, true)
}

/// CLUSTER MEET ip port [bus-port]: a handshake starts at the next cron.
pub(super) fn meet<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let now = ctx.core.now_ms();
    let node = node(ctx, args)?;
    if args.len() > 5 {
        return Err(CmdError::subcommand_syntax(args.get(1), "cluster"));
    }
    let text = |i: usize| String::from_utf8_lossy(args.get(i)).into_owned();
    let port = parse_i64(args.get(3))
        .ok_or_else(|| error(format!("ERR Invalid TCP base port specified: {}", text(3))))?;
    let cport = match args.len() {
        5 => parse_i64(args.get(4))
            .ok_or_else(|| error(format!("ERR Invalid TCP bus port specified: {}", text(4))))?,
        _ => port + i64::from(crate::config::cluster::BUS_PORT_OFFSET),
    };
    let ip = std::str::from_utf8(args.get(2))
        .ok()
        .and_then(|ip| ip.parse::<IpAddr>().ok());
    let valid = |p: i64| u16::try_from(p).ok().filter(|p| *p != 0);
    let started = match (ip, valid(port), valid(cport)) {
        (Some(ip), Some(port), Some(cport)) => node.cluster.meet(&ip.to_string(), port, cport, now),
        _ => false,
    };
    if !started {
        return Err(error(format!(
            "ERR Invalid node address specified: {}:{}",
            text(2),
            text(3)
        )));
    }
    node.changed();
    reply.ok();
    Ok(())
}

/// A node name argument as given.
fn quoted(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).into_owned()
}

/// CLUSTER FORGET node-id.
pub(super) fn forget<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let now = ctx.core.now_ms();
    let node = node(ctx, args)?;
    node.cluster.forget(args.get(2), now).map_err(error)?;
    node.changed();
    reply.ok();
    Ok(())
}

/// CLUSTER COUNT-FAILURE-REPORTS node-id.
pub(super) fn count_failure_reports<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let now = ctx.core.now_ms();
    let node = node(ctx, args)?;
    match node.cluster.failure_reports(args.get(2), now) {
        Some(count) => reply.int(count as i64),
        None => return Err(unknown_node(args.get(2))),
    }
    Ok(())
}

/// CLUSTER SET-CONFIG-EPOCH epoch.
pub(super) fn set_config_epoch<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let node = node(ctx, args)?;
    let epoch = parse_i64(args.get(2)).ok_or(CmdError::NotInteger)?;
    if epoch < 0 {
        return Err(error(format!(
            "ERR Invalid config epoch specified: {epoch}"
        )));
    }
    node.cluster
        .set_config_epoch(epoch as u64)
        .map_err(|e| error(e.to_string()))?;
    node.changed_durably();
    reply.ok();
    Ok(())
}

/// CLUSTER SETSLOT slot IMPORTING node-id | MIGRATING node-id | NODE node-id |
/// STABLE: a slot in flight, as `redis-cli --cluster reshard` moves it
/// (`cluster/membership_migration.rs`); Redis 7.0's checks in its order.
pub(super) fn setslot<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    if ctx
        .core
        .cluster_node()
        .is_some_and(|n| n.cluster.is_replica())
    {
        return Err(error("ERR Please use SETSLOT only with masters.".into()));
    }
    let slot = slot_arg(args.get(2))?;
    let holds_keys = slot_holds_keys(ctx, slot);
    let node = node(ctx, args)?;
    let word = args.get(3);
    let action = match args.len() {
        5 if word.eq_ignore_ascii_case(b"MIGRATING") => SetSlot::Migrating(args.get(4)),
        5 if word.eq_ignore_ascii_case(b"IMPORTING") => SetSlot::Importing(args.get(4)),
        5 if word.eq_ignore_ascii_case(b"NODE") => SetSlot::Node(args.get(4), holds_keys),
        4 if word.eq_ignore_ascii_case(b"STABLE") => SetSlot::Stable,
        _ => {
            return Err(error(
                "ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP"
                    .into(),
            ))
        }
    };
    node.cluster
        .set_slot(slot, action, crate::clock::unix_ms())
        .map_err(error)?;
    node.changed();
    reply.ok();
    Ok(())
}

/// CLUSTER BUMPEPOCH: `BUMPED <epoch>` or `STILL <epoch>`.
pub(super) fn bumpepoch<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let node = node(ctx, args)?;
    let (bumped, epoch) = node.cluster.bump_epoch();
    node.changed_durably();
    let word = if bumped { "BUMPED" } else { "STILL" };
    reply.simple(&format!("{word} {epoch}"));
    Ok(())
}

/// The node holds keys of `slot`: this shard's count, or in forward mode for
/// a slot another shard holds, that shard's as it published it on its last
/// tick (`shard::node_forward::publish_slots_with_keys`).
fn slot_holds_keys<S: Server>(ctx: &mut Ctx<'_, S>, slot: u16) -> bool {
    let holder = ctx.core.topology().owner(slot);
    let forward = ctx.core.topology().mode == crate::config::PortMode::Forward;
    if !forward || holder == ctx.core.shard_id() {
        return ctx.core.engine_mut().count_keys_in_slot(0, slot) != 0;
    }
    ctx.core
        .shared()
        .shards()
        .get(holder)
        .is_some_and(|gauges| crate::stats::slot_bit(&gauges.slots_with_keys, slot))
}

/// The keys of database 0 (the only one in cluster mode) the node holds:
/// this shard's, and in forward mode (the node is the process) the other
/// shards' as they last published them (every tick).
fn node_key_count<S: Server>(ctx: &Ctx<'_, S>) -> u64 {
    let own = ctx.core.engine().key_count(0) as u64;
    if ctx.core.topology().mode != crate::config::PortMode::Forward {
        return own;
    }
    let me = ctx.core.shard_id();
    let gauges = ctx.core.shared().shards().iter().enumerate();
    let others = gauges.filter(|&(shard, _)| shard != me);
    own + others
        .filter_map(|(_, g)| g.keys.first())
        .map(|(keys, _)| keys.load(std::sync::atomic::Ordering::Relaxed))
        .sum::<u64>()
}

/// CLUSTER REPLICATE node-id: the membership's role; the shard (in forward
/// mode the process) then follows the master's data (`shard::node_replica`).
pub(super) fn replicate<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let holds_keys = node_key_count(ctx) != 0;
    let node = node(ctx, args)?;
    let name = args.get(2);
    let Ok(master) = <[u8; crate::cluster::bus::message::NAME_LEN]>::try_from(name) else {
        return Err(unknown_node(name));
    };
    match node.cluster.replicate_holding(&master, holds_keys) {
        Ok(()) => {}
        Err("ERR Unknown node") => return Err(unknown_node(name)),
        Err(why) => return Err(error(why.to_string())),
    }
    node.changed();
    reply.ok();
    Ok(())
}

/// CLUSTER FAILOVER [FORCE | TAKEOVER]: this replica takes its master's
/// place (with the master's help, without it, or without the votes).
pub(super) fn failover<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    use crate::cluster::membership::FailoverMode;
    let now = ctx.core.now_ms();
    let node = node(ctx, args)?;
    let mode = match args.len() {
        2 => FailoverMode::Default,
        3 if args.get(2).eq_ignore_ascii_case(b"force") => FailoverMode::Force,
        3 if args.get(2).eq_ignore_ascii_case(b"takeover") => FailoverMode::Takeover,
        3 => return Err(CmdError::Syntax),
        _ => return Err(CmdError::subcommand_syntax(args.get(1), "cluster")),
    };
    let actions = node
        .cluster
        .failover(mode, now)
        .map_err(|why| error(why.to_string()))?;
    node.perform(actions);
    reply.ok();
    Ok(())
}

/// CLUSTER RESET [HARD | SOFT]: refused to a master holding keys (cluster
/// mode has database 0 only).
pub(super) fn reset<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let hard = match args.len() {
        2 => false,
        3 if args.get(2).eq_ignore_ascii_case(b"hard") => true,
        3 if args.get(2).eq_ignore_ascii_case(b"soft") => false,
        3 => return Err(CmdError::Syntax),
        _ => return Err(CmdError::subcommand_syntax(args.get(1), "cluster")),
    };
    let keys = node_key_count(ctx);
    let now = ctx.core.now_ms();
    let node = node(ctx, args)?;
    if !node.cluster.is_replica() && keys != 0 {
        return Err(error(
            "ERR CLUSTER RESET can't be called with master nodes containing keys".into(),
        ));
    }
    node.cluster.reset(hard, now);
    node.changed_durably();
    reply.ok();
    Ok(())
}

/// CLUSTER FLUSHSLOTS: this node gives up every slot it serves, when it holds
/// no key.
pub(super) fn flushslots<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let keys = node_key_count(ctx);
    let node = node(ctx, args)?;
    if keys != 0 {
        return Err(error(
            "ERR DB must be empty to perform CLUSTER FLUSHSLOTS.".into(),
        ));
    }
    let mine: Vec<u16> = (0..SLOT_COUNT).filter(|&s| node.serves(s)).collect();
    node.cluster.del_slots(mine);
    node.changed();
    reply.ok();
    Ok(())
}

/// CLUSTER LINKS: each bus link to or from a known node.
pub(super) fn links<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let node = node(ctx, args)?;
    let links: Vec<_> = node
        .cluster
        .node_links()
        .into_iter()
        .filter_map(|(name, link, outbound)| Some((name, outbound, node.links.view(link)?)))
        .collect();
    reply.array(links.len());
    for (name, outbound, view) in links {
        reply.map(6);
        reply.bulk(b"direction");
        reply.bulk(if outbound { b"to" } else { b"from" });
        reply.bulk(b"node");
        reply.bulk(&name);
        reply.bulk(b"create-time");
        reply.int(view.created as i64);
        reply.bulk(b"events");
        reply.bulk(if view.pending > 0 { b"rw" } else { b"r" });
        reply.bulk(b"send-buffer-allocated");
        reply.int(view.allocated as i64);
        reply.bulk(b"send-buffer-used");
        reply.int(view.pending as i64);
    }
    Ok(())
}

/// CLUSTER SAVECONFIG: nodes.conf written now.
pub(super) fn saveconfig<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let node = node(ctx, args)?;
    node.save()
        .map_err(|e| error(format!("ERR error saving the cluster node config: {e}")))?;
    reply.ok();
    Ok(())
}
