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
//! (`cmd::cluster`, `ClientQuery::Run`) and run there ([`run_asked`]); so is
//! MIGRATE of the shard holding its keys, and a keyed command of a slot in
//! flight, whose `-ASK` depends on the keys that shard holds.

use super::exec::run_engine;
use super::route::{refusal, route, InFlight, Route};
use super::ShardCore;
use crate::cmd::registry::{registry, Handler};
use crate::config::change::ConfigChange;
use crate::config::PortMode;
use crate::mesh::forward::Tag;
use crate::mesh::queries::AskedCommand;
use crate::net::conn::Conn;
use crate::net::slab::Slab;
use ruvio_engine::CommandTree;
use ruvio_resp::{OwnedArgs, Reply};
use std::sync::atomic::Ordering;

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
    let generation = map.generation();
    if let Ok(mut shared) = core.shared.node_slots.lock() {
        *shared = Some(map);
    }
    core.shared
        .node_slots_generation
        .store(generation, Ordering::Release);
    core.outbox.broadcast(ConfigChange::NodeSlots);
}

/// Another shard of a forward-mode node: route by shard 0's latest slot map
/// when it is newer than this shard's (on the broadcast, and before each
/// connection's input: shard 0's `+OK` to a client may outrun its broadcast).
pub(super) fn follow_node_map(core: &mut ShardCore) {
    let Some(routes) = core.node_follower.as_mut() else {
        return;
    };
    let latest = core.shared.node_slots_generation.load(Ordering::Acquire);
    if routes.map().generation() == latest {
        return;
    }
    let map = core.shared.node_slots.lock().ok().and_then(|m| m.clone());
    if let Some(map) = map {
        routes.adopt(map);
    }
}

/// Another shard of a forward-mode node, on its tick: which of the slots it
/// holds have keys, one bit a slot in `Shared` (`ShardGauges::slots_with_keys`),
/// read by shard 0's CLUSTER SETSLOT NODE, which Redis refuses while the node
/// holds keys of the slot. Each slot's count comes from the engine's slot
/// index (built on the first call by one walk, then kept by every write, 8
/// bytes a key: a cluster node keeps it, as Redis keeps its slot lists);
/// a shard without keys publishes zeros without building it.
pub(super) fn publish_slots_with_keys(core: &mut ShardCore) {
    if core.topo.mode != PortMode::Forward || core.node_follower.is_none() {
        return;
    }
    let empty = core.engine.key_count(0) == 0;
    let words = &core.shared.shards[core.id].slots_with_keys;
    for (w, word) in words.iter().enumerate() {
        let mut bits = 0u64;
        for bit in 0..64u16 {
            let slot = (w * 64) as u16 + bit;
            let holds = !empty
                && core.topo.owner(slot) == core.id
                && core.engine.count_keys_in_slot(0, slot) != 0;
            bits |= u64::from(holds) << bit;
        }
        word.store(bits, Ordering::Relaxed);
    }
}

/// [`publish_slots_with_keys`] for `slot` alone, at once: after MIGRATE
/// deleted keys the target took, so `redis-cli --cluster reshard`'s SETSLOT
/// NODE right after it does not find the slot's keys still published.
pub(super) fn publish_slot_keys(core: &mut ShardCore, slot: u16) {
    if core.topo.mode != PortMode::Forward || core.node_follower.is_none() {
        return;
    }
    let holds = core.engine.count_keys_in_slot(0, slot) != 0;
    let words = &core.shared.shards[core.id].slots_with_keys;
    if let Some(word) = words.get(usize::from(slot) / 64) {
        let bit = 1u64 << (slot % 64);
        match holds {
            true => word.fetch_or(bit, Ordering::Relaxed),
            false => word.fetch_and(!bit, Ordering::Relaxed),
        };
    }
}

/// A command another shard asked of this one ([`AskedCommand`]): a server
/// command (CLUSTER of the node, MIGRATE) run by its row's handler for a
/// client of the asker's protocol, database and address (not ACL-checked
/// again: the asking shard admitted it); a keyed command of a slot in flight
/// routed again here, where its keys are (`-ASK`, `-TRYAGAIN`, or run). Its
/// reply, or its error, as that client reads it; `None` when it parked here (a
/// blocking command on keys not there yet, as a forwarded one parks: its reply
/// goes to the asking shard when it is served or times out).
pub(super) fn run_asked(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    (from, tag): (usize, Tag),
    asked: &AskedCommand,
) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let args: OwnedArgs = asked.args.iter().map(Vec::as_slice).collect();
    let args = args.args();
    let row = registry()
        .lookup(args.get(0))
        .and_then(|cmd| cmd.resolve(args).ok());
    let Some(cmd) = row else {
        Reply::new(&mut out, asked.proto).error("ERR internal: an unknown command asked");
        return Some(out);
    };
    match cmd.handler {
        Some(Handler::Server(handler)) => {
            let mut reply = Reply::new(&mut out, asked.proto);
            let (_, mut session) = core.shared.acl.new_session();
            session.restricted = false;
            let ends = (String::new(), asked.local.clone());
            let mut conn = Conn::new(0, 0, -1, ends, core.now_ms, (true, session));
            conn.client.proto = asked.proto;
            conn.client.tls = asked.tls;
            conn.client.db = asked.db;
            conn.client.asking = asked.asking;
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
        }
        Some(Handler::Engine(_)) => {
            // Routed by the map the asking shard routed by, or a newer one.
            follow_node_map(core);
            let in_flight = match asked.asking {
                true => InFlight::Asking,
                false => InFlight::Plain,
            };
            match route(core, cmd, args, in_flight) {
                Route::Local => {
                    let mut caller = tag.caller(from);
                    caller.may_block = asked.may_block;
                    let ran = run_engine(core, cmd, caller, args, &mut out);
                    if let Some(block) = ran.block {
                        let waiter = super::blocking::Waiter::Remote { shard: from, tag };
                        super::exec::park(core, waiter, caller, args, block);
                        return None;
                    }
                    // The clients blocked on the keys it wrote, as after a
                    // forwarded command.
                    super::exec::serve_ready(core, conns);
                }
                refused => {
                    let error = refusal(core, refused, asked.tls);
                    error.write(&mut Reply::new(&mut out, asked.proto));
                }
            }
        }
        None => Reply::new(&mut out, asked.proto).error("ERR internal: a container asked"),
    }
    Some(out)
}
