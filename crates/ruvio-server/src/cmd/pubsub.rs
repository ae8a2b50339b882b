//! Pub/Sub commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH,
//! SSUBSCRIBE, SUNSUBSCRIBE, SPUBLISH and PUBSUB's subcommands. Delivery across
//! shards is [`crate::messaging::pubsub`]'s.
//!
//! Confirmations are push messages (RESP3 `>`, RESP2 arrays), one per name, sent
//! under CLIENT REPLY OFF and SKIP too, as is a client's own message (see
//! [`pubsub::push_sink`]). In
//! per-shard mode the shard-channel commands are routed as Redis Cluster routes
//! them: `MOVED` to the slot's owner, `CROSSSLOT` for names in several slots.

use super::{Ctx, Server, ServerCommand, ServerResult, SharedReads};
use crate::config::PortMode;
use crate::mesh::gather::Gather;
use crate::messaging::pubsub::{self, Caller, Kind, Publication, Subscribers};
use ruvio_engine::command::{command, flags::*, reply_help};
use ruvio_engine::slot::key_slot;
use ruvio_engine::{glob_match, CmdError, KeySpec};
use ruvio_resp::{Args, Reply};
use std::ops::Range;

/// The Pub/Sub family's table, with Redis' arity, flags and ACL categories.
#[rustfmt::skip]
pub const COMMANDS: &[ServerCommand] = &[
    command!("subscribe", -2, PUBSUB | NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["pubsub", "slow"], "pubsub",
        "2.0.0", "Listen for messages published to the given channels",
        "O(N) where N is the number of channels to subscribe to.", subscribe),
    command!("unsubscribe", -1, PUBSUB | NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["pubsub", "slow"], "pubsub",
        "2.0.0", "Stop listening for messages posted to the given channels",
        "O(N) where N is the number of clients already subscribed to a channel.", unsubscribe),
    command!("psubscribe", -2, PUBSUB | NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["pubsub", "slow"], "pubsub",
        "2.0.0", "Listen for messages published to channels matching the given patterns",
        "O(N) where N is the number of patterns the client is already subscribed to.", psubscribe),
    command!("punsubscribe", -1, PUBSUB | NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["pubsub", "slow"], "pubsub",
        "2.0.0", "Stop listening for messages posted to channels matching the given patterns",
        "O(N+M) where N is the number of patterns the client is already subscribed and M is the number of total patterns subscribed in the system (by any client).", punsubscribe),
    command!("publish", 3, PUBSUB | LOADING | STALE | FAST, KeySpec::NONE, ["pubsub", "fast"], "pubsub",
        "2.0.0", "Post a message to a channel",
        "O(N+M) where N is the number of clients subscribed to the receiving channel and M is the total number of subscribed patterns (by any client).",
        publish),
    command!("ssubscribe", -2, PUBSUB | NOSCRIPT | LOADING | STALE, KeySpec::ALL, ["pubsub", "slow"], "pubsub",
        "7.0.0", "Listen for messages published to the given shard channels",
        "O(N) where N is the number of shard channels to subscribe to.", ssubscribe),
    command!("sunsubscribe", -1, PUBSUB | NOSCRIPT | LOADING | STALE, KeySpec::ALL, ["pubsub", "slow"], "pubsub",
        "7.0.0", "Stop listening for messages posted to the given shard channels",
        "O(N) where N is the number of clients already subscribed to a shard channel.", sunsubscribe),
    command!("spublish", 3, PUBSUB | LOADING | STALE | FAST, KeySpec::ONE, ["pubsub", "fast"], "pubsub",
        "7.0.0", "Post a message to a shard channel",
        "O(N) where N is the number of clients subscribed to the receiving shard channel.", spublish),
    command!("pubsub", -2, 0, KeySpec::NONE, ["slow"], "pubsub", "2.8.0",
        "A container for Pub/Sub commands", "Depends on subcommand.", subcommands = SUBCOMMANDS),
];

/// PUBSUB's subcommands.
#[rustfmt::skip]
const SUBCOMMANDS: &[ServerCommand] = &[
    command!("pubsub|channels", -2, PUBSUB | LOADING | STALE, KeySpec::NONE, ["pubsub", "slow"], "pubsub",
        "2.8.0", "List active channels",
        "O(N) where N is the number of active channels, and assuming constant time pattern matching (relatively short channels and patterns)",
        channels),
    command!("pubsub|numpat", 2, PUBSUB | LOADING | STALE, KeySpec::NONE, ["pubsub", "slow"], "pubsub",
        "2.8.0", "Get the count of unique patterns pattern subscriptions", "O(1)", numpat),
    command!("pubsub|numsub", -2, PUBSUB | LOADING | STALE, KeySpec::NONE, ["pubsub", "slow"], "pubsub",
        "2.8.0", "Get the count of subscribers for channels",
        "O(N) for the NUMSUB subcommand, where N is the number of requested channels", numsub),
    command!("pubsub|shardchannels", -2, PUBSUB | LOADING | STALE, KeySpec::NONE, ["pubsub", "slow"], "pubsub",
        "7.0.0", "List active shard channels",
        "O(N) where N is the number of active shard channels, and assuming constant time pattern matching (relatively short shard channels).",
        shardchannels),
    command!("pubsub|shardnumsub", -2, PUBSUB | LOADING | STALE, KeySpec::NONE, ["pubsub", "slow"], "pubsub",
        "7.0.0", "Get the count of subscribers for shard channels",
        "O(N) for the SHARDNUMSUB subcommand, where N is the number of requested shard channels",
        shardnumsub),
    command!("pubsub|help", 2, LOADING | STALE, KeySpec::NONE, ["slow"], "pubsub", "6.2.0",
        "Show helpful text about the different subcommands", "O(1)", help),
];

/// The commands a RESP2 client may send while subscribed (Redis' list).
pub fn allowed_while_subscribed(name: &str) -> bool {
    matches!(
        name,
        "ping"
            | "subscribe"
            | "ssubscribe"
            | "unsubscribe"
            | "sunsubscribe"
            | "psubscribe"
            | "punsubscribe"
            | "quit"
            | "reset"
    )
}

/// Redis' error for any other command then.
pub fn not_allowed_while_subscribed(name: &str) -> CmdError {
    CmdError::quoted(
        "ERR Can't execute '",
        name.as_bytes(),
        "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
    )
}

fn subscribe<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    subscribe_to(ctx, args, reply, Kind::Channel)
}

fn psubscribe<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    subscribe_to(ctx, args, reply, Kind::Pattern)
}

fn ssubscribe<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    check_slot(ctx, args.iter().skip(1))?;
    subscribe_to(ctx, args, reply, Kind::Shard)
}

fn unsubscribe<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    unsubscribe_from(ctx, args, reply, Kind::Channel)
}

fn punsubscribe<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    unsubscribe_from(ctx, args, reply, Kind::Pattern)
}

fn sunsubscribe<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    check_slot(ctx, args.iter().skip(1))?;
    unsubscribe_from(ctx, args, reply, Kind::Shard)
}

/// One confirmation: `[word, name or null, the client's count]`.
fn confirm<S: Server>(
    ctx: &mut Ctx<'_, S>,
    reply: &mut Reply<'_>,
    word: &[u8],
    name: Option<&[u8]>,
    count: usize,
) {
    let proto = reply.proto;
    let mut reply = Reply::new(pubsub::push_sink(ctx.client, reply.out), proto);
    reply.push(3);
    reply.bulk(word);
    match name {
        Some(name) => reply.bulk(name),
        None => reply.null(),
    }
    reply.int(count as i64);
}

fn subscribe_to<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
    kind: Kind,
) -> ServerResult {
    for name in args.iter().skip(1) {
        let core = &*ctx.core;
        pubsub::subscribe(
            core.shared().pubsub(),
            core.shard_id(),
            ctx.client,
            ctx.who,
            kind,
            name,
        );
        let count = ctx.client.subs.count(kind);
        confirm(ctx, reply, kind.subscribe_word(), Some(name), count);
    }
    Ok(())
}

/// Unsubscribe from the names given, or from every name of the kind; with none to
/// leave, one confirmation with a null name.
fn unsubscribe_from<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
    kind: Kind,
) -> ServerResult {
    let names: Vec<Vec<u8>> = match args.len() {
        1 => ctx.client.subs.of(kind).iter().cloned().collect(),
        _ => args.iter().skip(1).map(<[u8]>::to_vec).collect(),
    };
    if names.is_empty() {
        let count = ctx.client.subs.count(kind);
        confirm(ctx, reply, kind.unsubscribe_word(), None, count);
    }
    for name in names {
        let core = &*ctx.core;
        pubsub::unsubscribe(
            core.shared().pubsub(),
            core.shard_id(),
            ctx.client,
            ctx.who,
            kind,
            &name,
        );
        let count = ctx.client.subs.count(kind);
        confirm(ctx, reply, kind.unsubscribe_word(), Some(&name), count);
    }
    Ok(())
}

/// Per-shard mode, or a node of the bus: shard channels must share one slot,
/// owned by this shard (this node).
fn check_slot<'a, S: Server>(
    ctx: &Ctx<'_, S>,
    mut names: impl Iterator<Item = &'a [u8]>,
) -> ServerResult {
    let topo = ctx.core.topology();
    let node = ctx.core.node_routes();
    if topo.mode != PortMode::PerShard && node.is_none() {
        return Ok(());
    }
    let Some(first) = names.next() else {
        return Ok(());
    };
    let slot = key_slot(first);
    if names.any(|n| key_slot(n) != slot) {
        return Err(CmdError::CrossSlot);
    }
    if let Some(routes) = node {
        return routes.redirect_ignoring_state(slot, ctx.client.tls);
    }
    let owner = topo.owner(slot);
    if owner != ctx.core.shard_id() {
        return Err(CmdError::Moved {
            slot,
            host: topo.host.clone(),
            port: ctx
                .core
                .settings()
                .client_port(owner, topo.nodes[owner].port, ctx.client.tls),
        });
    }
    Ok(())
}

/// `PUBLISH channel message`
fn publish<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    deliver_scripts_first(ctx, reply);
    publish_to(ctx, args, reply, Kind::Channel);
    Ok(())
}

/// `SPUBLISH shardchannel message`: in per-shard mode only the slot's owner
/// delivers (a cluster node's subscribers of its own slots).
fn spublish<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    deliver_scripts_first(ctx, reply);
    // Per-shard mode or a node of the bus: the slot's owner delivers.
    check_slot(ctx, std::iter::once(args.get(1)))?;
    if ctx.core.topology().mode == PortMode::PerShard {
        let caller = Caller {
            out: pubsub::push_sink(ctx.client, reply.out),
            proto: reply.proto,
        };
        let (channel, message) = (args.get(1), args.get(2));
        let (mut to, _) = ctx.core.delivery();
        let n = pubsub::deliver_here(
            &mut to,
            ctx.conns,
            Kind::Shard,
            channel,
            message,
            Some(caller),
        );
        reply.int(n as i64);
        return Ok(());
    }
    publish_to(ctx, args, reply, Kind::Shard);
    Ok(())
}

/// What scripts on this shard published earlier in this loop iteration goes out
/// before a client's publication (see `script_host`): one publisher's messages stay
/// in order.
fn deliver_scripts_first<S: Server>(ctx: &mut Ctx<'_, S>, reply: &mut Reply<'_>) {
    let caller = Caller {
        out: pubsub::push_sink(ctx.client, reply.out),
        proto: reply.proto,
    };
    ctx.core.deliver_published(ctx.conns, Some(caller));
}

/// Deliver here, then to the other shards with subscribers (see [`crate::messaging::pubsub`]).
fn publish_to<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>, kind: Kind) {
    let (channel, message) = (args.get(1), args.get(2));
    let caller = Caller {
        out: pubsub::push_sink(ctx.client, reply.out),
        proto: reply.proto,
    };
    let (mut to, _) = ctx.core.delivery();
    let local = pubsub::deliver_here(&mut to, ctx.conns, kind, channel, message, Some(caller));
    let core = &mut *ctx.core;
    let me = core.shard_id();
    if core.topology().mode == PortMode::Forward && kind == Kind::Channel {
        publish_on_forward_node(core, channel, message);
    }
    let subscribers = &core.shared().pubsub().shards;
    let others = (0..subscribers.len()).filter(|&s| s != me && subscribers[s].may_receive(kind));
    match core.topology().mode {
        PortMode::Forward => {
            let shards: Vec<usize> = others.collect();
            if shards.is_empty() {
                reply.int(local as i64);
            } else {
                ctx.gather = Some(Gather::Publish(Box::new(Publication {
                    kind,
                    channel: channel.to_vec(),
                    message: message.to_vec(),
                    local,
                    shards,
                })));
            }
        }
        // A node of the bus: to every other node over the bus, the process's
        // other shards included (they are nodes like any other).
        PortMode::PerShard if core.cluster_node().is_some() && kind == Kind::Channel => {
            if let Some(node) = core.cluster_node_mut() {
                node.publish(channel, message);
            }
            reply.int(local as i64);
        }
        PortMode::PerShard => {
            let shards: Vec<usize> = others.collect();
            let (_, outbox) = core.delivery();
            for to in shards {
                outbox.message(to, None, kind, channel, message);
            }
            reply.int(local as i64);
        }
    }
}

/// Forward mode as one node of the bus (`cluster-enabled yes`): a PUBLISH
/// goes to every other node over the bus too, sent by shard 0, which holds
/// the node's links (asked by a broadcast from another shard). The process's
/// own shards get it over the mesh, as without the bus.
fn publish_on_forward_node<S: Server>(core: &mut S, channel: &[u8], message: &[u8]) {
    if !core.settings().cluster_bus() {
        return;
    }
    match core.cluster_node_mut() {
        Some(node) => node.publish(channel, message),
        None => core.broadcast(crate::config::change::ConfigChange::BusPublish {
            channel: channel.to_vec(),
            message: message.to_vec(),
        }),
    }
}

/// The subscriptions a PUBSUB call sees: every shard's, and which shards count
/// ([`pubsub::visible_shards_of`]). A client's PUBSUB and a script's share the code.
pub struct View<'a> {
    pub subscribers: &'a Subscribers,
    pub shards: Range<usize>,
}

impl<'a> View<'a> {
    fn of<S: Server>(ctx: &'a Ctx<'_, S>) -> View<'a> {
        View {
            subscribers: ctx.core.shared().pubsub(),
            shards: ctx.core.visible_shards(),
        }
    }
}

/// A script's PUBSUB (`scripting::host`): subcommand `name` over the
/// subscriptions of `shards`.
pub fn script_answer(
    subscribers: &Subscribers,
    shards: Range<usize>,
    name: &str,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> Option<ServerResult> {
    answer(
        &View {
            subscribers,
            shards,
        },
        name,
        args,
        reply,
    )
}

/// PUBSUB subcommand `name` (its row's name, `pubsub|numsub` ...) over `view`;
/// `None` for a name that is not one (a script's call goes on to other commands).
pub fn answer(
    view: &View<'_>,
    name: &str,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> Option<ServerResult> {
    Some(match name {
        "pubsub|channels" => list_names(view, args, reply, Kind::Channel),
        "pubsub|shardchannels" => list_names(view, args, reply, Kind::Shard),
        "pubsub|numsub" => count_subscribers(view, args, reply, Kind::Channel),
        "pubsub|shardnumsub" => count_subscribers(view, args, reply, Kind::Shard),
        "pubsub|numpat" => {
            let patterns =
                pubsub::distinct_in(view.subscribers, view.shards.clone(), Kind::Pattern);
            reply.int(patterns as i64);
            Ok(())
        }
        "pubsub|help" => {
            write_help(args, reply);
            Ok(())
        }
        _ => return None,
    })
}

/// `PUBSUB CHANNELS [pattern]`
fn channels<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    list_names(&View::of(ctx), args, reply, Kind::Channel)
}

/// `PUBSUB SHARDCHANNELS [pattern]`
fn shardchannels<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    list_names(&View::of(ctx), args, reply, Kind::Shard)
}

/// The distinct names with subscribers on the visible shards, matching the pattern.
fn list_names(view: &View<'_>, args: Args<'_>, reply: &mut Reply<'_>, kind: Kind) -> ServerResult {
    if args.len() > 3 {
        return Err(CmdError::subcommand_syntax(args.get(1), "pubsub"));
    }
    let pattern = (args.len() == 3).then(|| args.get(2));
    let mut names: Vec<Vec<u8>> = Vec::new();
    let shards = &view.subscribers.shards;
    for s in view.shards.clone() {
        let registry = shards[s].registry();
        let matching = registry
            .of(kind)
            .keys()
            .filter(|name| pattern.is_none_or(|p| glob_match(p, name)));
        names.extend(matching.cloned());
    }
    names.sort_unstable();
    names.dedup();
    reply.array(names.len());
    names.iter().for_each(|n| reply.bulk(n));
    Ok(())
}

/// `PUBSUB NUMSUB [channel ...]`
fn numsub<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    count_subscribers(&View::of(ctx), args, reply, Kind::Channel)
}

/// `PUBSUB SHARDNUMSUB [shardchannel ...]`
fn shardnumsub<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    count_subscribers(&View::of(ctx), args, reply, Kind::Shard)
}

/// Each name with its subscriber count over the visible shards.
fn count_subscribers(
    view: &View<'_>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
    kind: Kind,
) -> ServerResult {
    let shards = &view.subscribers.shards;
    reply.array((args.len() - 2) * 2);
    for name in args.iter().skip(2) {
        let count: usize = view
            .shards
            .clone()
            .map(|s| shards[s].registry().of(kind).get(name).map_or(0, Vec::len))
            .sum();
        reply.bulk(name);
        reply.int(count as i64);
    }
    Ok(())
}

/// `PUBSUB NUMPAT`: distinct patterns subscribed to.
fn numpat<S: Server>(ctx: &mut Ctx<'_, S>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let view = View::of(ctx);
    reply.int(pubsub::distinct_in(view.subscribers, view.shards, Kind::Pattern) as i64);
    Ok(())
}

/// `PUBSUB HELP`
fn help<S: Server>(_ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    write_help(args, reply);
    Ok(())
}

fn write_help(args: Args<'_>, reply: &mut Reply<'_>) {
    reply_help(
        reply,
        args.get(0),
        &[
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: '*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
        ],
    );
}
