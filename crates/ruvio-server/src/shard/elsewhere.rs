//! A command that does not simply run on the client's shard: redirected
//! (`MOVED`, `ASK`, `CROSSSLOT` and the cluster's other answers), forwarded
//! whole to its keys' owner, split over the owners of its keys, run on keys
//! borrowed from them, run on every shard, or a SCAN continued on the shard in
//! its cursor. Apart from `dispatch` because the usual call never comes here:
//! dispatch keeps the path of a local command short and inlined, and this is
//! where the held reply slots, parts and merges of the other routes live.

use super::dispatch::run_local;
use crate::cmd::registry::{registry, Command};
use crate::mesh::forward::Tag;
use crate::mesh::lending;
use crate::net::conn::{BlockedOn, ClientState, Conn, Merge, ReplyQueue};
use crate::net::slab::Slab;
use crate::persistence::durable;
use crate::shard::blocking::Waiter;
use crate::shard::exec::{self, run_engine, Caller};
use crate::shard::route::{busy_refusal, Route};
use crate::shard::ShardCore;
use ruvio_engine::command::flags::{ALLOW_BUSY, BLOCKING, WRITE};
use ruvio_engine::CmdError;
use ruvio_resp::{Args, OwnedArgs};

/// Run `cmd` where `route` says, when that is not simply here.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    cmd: &'static Command,
    args: Args<'_>,
    route: Route,
) -> Result<(), CmdError> {
    if !cmd.meta.has(ALLOW_BUSY) {
        if let Some(busy) = busy_refusal(core, &route) {
            return Err(busy);
        }
    }
    if !core.lending.kept.is_empty() && may_touch_kept(core, client.db, cmd, args, &route) {
        super::lending::send_kept_home(core, conns);
    }
    match route {
        Route::Local => run_local(core, conns, client, replies, who, cmd, args),
        Route::Moved(slot, shard) => Err(CmdError::Moved {
            slot,
            host: core
                .topo
                .announced_host(&core.cfg.cluster_announce_ip, &client.local)
                .to_string(),
            port: core
                .cfg
                .client_port(shard, core.topo.nodes[shard].port, client.tls),
        }),
        Route::MovedToNode(slot, target) => {
            Err(super::route::moved_to_node(core, slot, target, client.tls))
        }
        Route::Ask(slot) => Err(super::route::ask(core, slot, client.tls)),
        Route::TryAgain => Err(CmdError::TryAgain),
        Route::SlotNotServed => Err(CmdError::SlotNotServed),
        Route::ClusterDown => Err(CmdError::ClusterDown),
        Route::ClusterDownReadOnly => Err(CmdError::ClusterDownReadOnly),
        Route::CrossSlot => Err(CmdError::CrossSlot),
        Route::Remote(shard) => {
            let seq = replies.hold_one();
            // The owner times and logs it (see `observability`).
            core.timing.hand_off();
            let mut tag = Tag {
                whole: true,
                // The owner runs this row without looking it up again.
                row: u16::try_from(cmd.stat + 1).unwrap_or(0),
                ..Tag::for_command(client, who, seq, 0)
            };
            if tag.tracking != 0 {
                tag.tracking |= crate::net::conn::tracking_command::WHOLE;
            }
            if core.replication.feed.on() {
                core.outbox.request_whole(shard, core.id, tag, args);
            } else {
                core.outbox.request(shard, core.id, tag, args.iter());
            }
            if cmd.meta.has(BLOCKING) {
                // It may park on the owner: run nothing else until it answers.
                client.blocked = Some(BlockedOn {
                    seq,
                    remote: Some(shard),
                    command_bytes: Some(args.byte_len() as u32),
                });
            }
            Ok(())
        }
        Route::AskShard(shard) => {
            let asked = crate::mesh::queries::AskedCommand::of(client, args);
            let query = crate::mesh::queries::ClientQuery::Run(Box::new(asked));
            let gather = crate::mesh::gather::Gather::Ask { shard, query };
            if let Some(seq) = crate::mesh::gather::start(core, client, replies, who, gather) {
                // Recorded once answered (`run_command`).
                core.timing.await_reply(seq);
                if cmd.meta.has(BLOCKING) && !client.in_exec {
                    // It may park there, as a forwarded one: that shard is
                    // told if the client goes away.
                    client.blocked = Some(BlockedOn {
                        seq,
                        remote: Some(shard),
                        command_bytes: Some(args.byte_len() as u32),
                    });
                }
            }
            Ok(())
        }
        // A split command's arguments are checked here: no shard sees them whole.
        Route::Split(_) if !whole_key_steps(cmd, args) => Err(CmdError::WrongArity(cmd.meta.name)),
        Route::Split(groups) => {
            let gate = durable::open_parts_gate(core.wal.as_ref(), replies, cmd.meta.has(WRITE));
            split(core, client, replies, who, cmd, args, groups);
            if let Some(gate) = gate {
                durable::close_gate(&mut core.gated, core.wal.as_ref(), replies, who, gate);
            }
            Ok(())
        }
        Route::Lend(_)
            if super::lending::run_on_kept_now(
                core,
                client,
                !replies.is_holding(),
                cmd,
                args,
                replies.sink(),
            ) =>
        {
            Ok(())
        }
        Route::Lend(groups) => {
            // It runs once the keys are here, timed then (`mesh::lending`).
            core.timing.hand_off();
            borrow_and_run(core, conns, client, replies, who, cmd, args, groups);
            Ok(())
        }
        // A shard link's stream holds its own shard's FLUSHALL, FLUSHDB and
        // SWAPDB (each primary shard's in place): each acts on its shard only.
        Route::AllShards if client.shard_link => {
            run_local(core, conns, client, replies, who, cmd, args)
        }
        Route::AllShards => {
            let shards = core.topo.nodes.len();
            if cmd.merge == Some(Merge::FirstNonNull) {
                // RANDOMKEY: each shard's key count with its key, weighed at merge.
                let pick = core.engine.next_random() as u32;
                let seq = replies.hold(Merge::WeightedPick { pick }, 2 * shards);
                for shard in 0..shards {
                    let count = [b"DBSIZE".as_slice()].into_iter();
                    send_part(core, client, replies, who, seq, 2 * shard, shard, count);
                    send_part(
                        core,
                        client,
                        replies,
                        who,
                        seq,
                        2 * shard + 1,
                        shard,
                        args.iter(),
                    );
                }
                await_parts(core, replies, seq);
                return Ok(());
            }
            let gate = durable::open_parts_gate(core.wal.as_ref(), replies, cmd.meta.has(WRITE));
            let seq = replies.hold(cmd.merge.unwrap_or(Merge::Single), shards);
            for shard in 0..shards {
                send_part(core, client, replies, who, seq, shard, shard, args.iter());
            }
            await_parts(core, replies, seq);
            if let Some(gate) = gate {
                durable::close_gate(&mut core.gated, core.wal.as_ref(), replies, who, gate);
            }
            Ok(())
        }
        Route::Scan(shard, inner) => {
            // The shard in the cursor continues from its position, every later shard
            // from its start: the merge keeps what a single Redis would return.
            let shards = core.topo.nodes.len();
            let merge = Merge::Scan {
                shard: shard as u16,
            };
            let seq = replies.hold(merge, shards - shard);
            for (part, owner) in (shard..shards).enumerate() {
                let cursor = if part == 0 { inner } else { 0 }.to_string();
                let rewritten =
                    args.iter()
                        .enumerate()
                        .map(|(i, a)| if i == 1 { cursor.as_bytes() } else { a });
                send_part(
                    core,
                    client,
                    replies,
                    who,
                    seq,
                    part,
                    owner,
                    rewritten.collect::<Vec<_>>().into_iter(),
                );
            }
            await_parts(core, replies, seq);
            Ok(())
        }
    }
}

/// A command whose parts other shards answer (split, every shard, SCAN) is
/// recorded once they all did, with their times and its whole reply (see
/// `observability::Awaited`), when anything records commands.
fn await_parts(core: &mut ShardCore, replies: &ReplyQueue, seq: u64) {
    if core.timing.active() && !replies.is_released(seq) {
        core.timing.await_reply(seq);
    }
}

/// Send part `part` of held slot `seq` to `shard`, or run it here when `shard` is this one.
/// True when it ran here and its reply is in.
#[allow(clippy::too_many_arguments)]
fn send_part<'a>(
    core: &mut ShardCore,
    client: &ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    seq: u64,
    part: usize,
    shard: usize,
    args: impl ExactSizeIterator<Item = &'a [u8]>,
) -> bool {
    let tag = Tag::for_command(client, who, seq, part as u16);
    if shard != core.id {
        core.outbox.request(shard, core.id, tag, args);
        return false;
    }
    let owned: OwnedArgs = args.collect();
    let mut out = Vec::new();
    let Some(cmd) = registry().lookup(owned.args().get(0)) else {
        replies.fill(seq, part, out);
        return true;
    };
    let caller = Caller {
        may_block: false,
        ..Caller::of(client, core.id)
    };
    match run_engine(core, cmd, caller, owned.args(), &mut out).block {
        // A key of this part is lent to another shard: the part waits for it.
        Some(block) => {
            let waiter = Waiter::Local {
                index: who.0,
                gen: who.1,
                seq,
                part: part as u16,
            };
            exec::park(core, waiter, caller, owned.args(), block);
            false
        }
        None => {
            replies.fill(seq, part, out);
            true
        }
    }
}

/// True when the arguments after the first key come in whole key steps (MSET's
/// key/value pairs), as the command's own arity check would demand.
fn whole_key_steps(cmd: &Command, args: Args<'_>) -> bool {
    let (first, _, step) = cmd.meta.keys.legacy_range();
    let (first, step) = (first.max(1) as usize, step.max(1) as usize);
    args.len() >= first && (args.len() - first).is_multiple_of(step)
}

/// Split a multi-key command by shard: each shard gets its keys (with the arguments
/// that follow each key up to the key step, e.g. MSET's values).
fn split(
    core: &mut ShardCore,
    client: &ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    cmd: &Command,
    args: Args<'_>,
    groups: Vec<(usize, Vec<usize>)>,
) {
    let merge = cmd.merge.unwrap_or(Merge::Single);
    // A write while some client tracks: its parts' invalidations are gathered
    // here and delivered in key order (see `tracking`).
    let tracked = cmd.meta.has(WRITE) && core.shared.tracking.anyone_tracks();
    let order: Vec<u16> = if merge == Merge::Scatter || tracked {
        let mut order = Vec::new();
        for pos in cmd.meta.keys.positions(args) {
            let owner = core.topo.key_owner(args.get(pos));
            order.push(groups.iter().position(|(s, _)| *s == owner).unwrap_or(0) as u16);
        }
        order
    } else {
        Vec::new()
    };
    let seq = replies.next_seq();
    if tracked {
        core.tracking
            .split_started(who, seq, groups.len(), order.clone());
    }
    let order = if merge == Merge::Scatter {
        order
    } else {
        Vec::new()
    };
    let held = replies.hold_ordered(merge, groups.len(), order);
    debug_assert_eq!(held, seq);
    let step = cmd.meta.keys.legacy_range().2.max(1) as usize;
    for (part, (shard, positions)) in groups.iter().enumerate() {
        let mut sub: Vec<&[u8]> = vec![args.get(0)];
        for &p in positions {
            sub.extend((p..(p + step).min(args.len())).map(|i| args.get(i)));
        }
        let keys: Vec<&[u8]> = match tracked && *shard == core.id {
            true => positions.iter().map(|&p| args.get(p)).collect(),
            false => Vec::new(),
        };
        let since = core.tracking.owed_len();
        let here = send_part(
            core,
            client,
            replies,
            who,
            seq,
            part,
            *shard,
            sub.into_iter(),
        );
        if !tracked || *shard != core.id {
            continue;
        }
        match here {
            true => {
                let owed = core
                    .tracking
                    .take_part_owed(since, core.id, &keys, &core.outbox);
                core.tracking
                    .split_owed(who, seq, part as u16, owed.into_iter());
                core.tracking.split_answered_here(who, seq);
            }
            false => core.tracking.split_abandoned(who, seq),
        }
    }
    await_parts(core, replies, seq);
}

/// Run `cmd` on keys borrowed from their owners `groups` (see [`lending`]); like a
/// blocked client, the connection runs nothing after it until it is answered.
#[allow(clippy::too_many_arguments)]
pub(super) fn borrow_and_run(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    cmd: &'static Command,
    args: Args<'_>,
    groups: Vec<(usize, Vec<usize>)>,
) {
    let first_in_line = !replies.is_holding();
    let seq = replies.hold(Merge::Single, 1);
    client.blocked = Some(BlockedOn::waiting(seq));
    let to = super::lending::ReplyTo {
        conn: who,
        seq,
        first_in_line,
    };
    let at_once = super::lending::start(
        core,
        conns,
        to,
        Caller::of(client, core.id),
        cmd,
        args,
        groups,
    );
    // Run while its connection was out of the slab, its writer's slot waits
    // for its invalidations (see `tracking`).
    if lending::keep_answered_at_once(&mut core.lending) {
        replies.keep(seq);
    }
    if let Some(reply) = at_once {
        replies.fill(seq, 0, reply);
        client.blocked = None;
    }
}

/// Whether `cmd`, going to run elsewhere by `route`, may touch a key a batch of
/// borrowing commands keeps here (`shard/lending/batch.rs`): a forwarded or split
/// command naming one, or any command of every shard or answered by another
/// (they would count or miss it). A borrowing command decides for itself.
fn may_touch_kept(
    core: &ShardCore,
    db: usize,
    cmd: &Command,
    args: Args<'_>,
    route: &Route,
) -> bool {
    match route {
        Route::Local | Route::Lend(_) => false,
        Route::Remote(_) | Route::Split(_) => cmd.meta.keys.keys(args).any(|key| {
            core.lending
                .kept
                .iter()
                .any(|(kept_db, kept)| *kept_db == db && kept == key)
        }),
        _ => true,
    }
}
