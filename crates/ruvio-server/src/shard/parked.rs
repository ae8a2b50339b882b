//! Blocked clients on this shard's side of running a command: a command that
//! returned [`Outcome::Block`](ruvio_engine::command::Outcome::Block) is parked ([`park`]), served when a key it waits
//! for is written ([`serve_ready`]), timed out ([`expire_blocked`]), woken when
//! a FILLGET lease ends ([`expire_fill_leases`]), answered by CLIENT UNBLOCK
//! ([`unblock`]), and its reply handed to its client ([`deliver`]). The
//! bookkeeping of who waits on which key is [`crate::shard::blocking`]; this file
//! is apart from `exec.rs` because it decides when a parked command runs again,
//! not how a command runs.

use crate::cluster::slot_map::SlotRoute;
use crate::cmd::registry::{registry, Command};
use crate::net::conn::Conn;
use crate::net::slab::Slab;
use crate::shard::blocking::{Blocked, Waiter};
use crate::shard::exec::{run_engine, Caller, Tracked};
use crate::shard::observe::{observe_answered, observe_unblocked};
use crate::shard::ShardCore;
use ruvio_engine::command::flags::WRITE;
use ruvio_engine::command::Block;
use ruvio_engine::slot::key_slot;
use ruvio_engine::CmdError;
use ruvio_resp::{Args, OwnedArgs, Protocol, Reply};

/// The keys a parked command waits on: its block's key arguments, or with none
/// (`exec::loans_out`: a script waiting for this shard's keys out on loan) this
/// shard's keys of `db` out on loan.
fn wait_keys(core: &ShardCore, db: usize, args: Args<'_>, block: &Block) -> Vec<Vec<u8>> {
    match block.keys.is_empty() {
        true => core.lending.lent_in(db),
        false => block.keys.iter().map(|&i| args.get(i).to_vec()).collect(),
    }
}

/// Park a command that returned [`Outcome::Block`](ruvio_engine::command::Outcome::Block); its ticket.
pub fn park(
    core: &mut ShardCore,
    waiter: Waiter,
    caller: Caller,
    args: Args<'_>,
    block: Block,
) -> u64 {
    let keys = wait_keys(core, caller.db, args, &block);
    core.shared.note_blocked(caller.client_id, Some(core.id));
    core.blocking.park(Blocked {
        waiter,
        client_id: caller.client_id,
        db: caller.db,
        proto: caller.proto,
        no_touch: caller.no_touch,
        argv: parked_argv(args, &block.rewrite),
        keys,
        deadline_ms: block.deadline_ms,
        first_run_ns: None,
        sent_argv: (!block.rewrite.is_empty()).then(|| OwnedArgs::from_args(args)),
    })
}

/// Park an owner's watch over `keys` of `db` for a client blocked on another
/// shard (`waiter`, a [`Waiter::Watch`]): a write to one of them wakes it.
pub fn park_watch(core: &mut ShardCore, waiter: Waiter, db: usize, keys: Vec<Vec<u8>>) {
    core.blocking.park(Blocked {
        waiter,
        client_id: 0,
        db,
        proto: ruvio_resp::Protocol::Resp2,
        no_touch: true,
        argv: OwnedArgs::default(),
        keys,
        deadline_ms: None,
        first_run_ns: None,
        sent_argv: None,
    });
}

/// The arguments a parked command runs with again: its own, with the handler's
/// replacements (XREAD's `$` as the ID it stood for).
pub(crate) fn parked_argv(args: Args<'_>, rewrite: &[(usize, Vec<u8>)]) -> OwnedArgs {
    if rewrite.is_empty() {
        return OwnedArgs::from_args(args);
    }
    OwnedArgs::from_iter((0..args.len()).map(|i| {
        rewrite
            .iter()
            .find(|(at, _)| *at == i)
            .map_or(args.get(i), |(_, new)| new.as_slice())
    }))
}

/// Serve the clients blocked on every key written since the last call, oldest
/// first per key, until no written key has a waiter that can be served. A served
/// command may write keys itself (BLMOVE pushes): those are served in turn. Each
/// round removes a client, so this ends.
/// Inlined up to the test for written keys with waiters: every command asks.
#[inline]
pub fn serve_ready(core: &mut ShardCore, conns: &mut Slab<Conn>) {
    if core.blocking.has_ready() {
        serve_written(core, conns);
    }
}

/// [`serve_ready`] when a key with waiters was written.
#[inline(never)]
fn serve_written(core: &mut ShardCore, conns: &mut Slab<Conn>) {
    while let Some((db, key)) = core.blocking.take_ready() {
        // The value types a pop waiter found nothing to take from this round:
        // the later pop waiters of that type would find nothing either. Other
        // waiters of the key still run (XREADGROUP's on a deleted stream is
        // answered its error while BLPOP waiters on the name keep waiting).
        let mut starved: Vec<&'static str> = Vec::new();
        for ticket in core.blocking.waiting_on(db, &key) {
            let Some(blocked) = core.blocking.get(ticket) else {
                continue;
            };
            if let Waiter::Watch { shard, ticket: op } = blocked.waiter {
                // Only a key that exists can serve a blocking command. A key given
                // back unchanged by a borrower still counts as written; waking on
                // it would let two cross-shard blocking commands on absent keys
                // wake each other forever.
                if !core.engine.exists(db, &key, core.now_ms) {
                    continue;
                }
                // A coordinator elsewhere retries; whoever is next here may still
                // take the element first (fairness across shards is approximate).
                core.blocking.remove(ticket);
                super::lending::wake(core, conns, shard, op);
                continue;
            }
            let argv = blocked.argv.clone();
            let caller = caller_of(blocked);
            // A container's subcommand (OBJECT ENCODING, waiting for a lent
            // key) runs as its own row.
            let row = registry().lookup(argv.args().get(0));
            let resolved =
                row.and_then(|c| ruvio_engine::CommandTree::resolve(c, argv.args()).ok());
            let Some(cmd) = resolved else {
                continue;
            };
            let pops = pops_from(cmd);
            if pops.is_some_and(|t| starved.contains(&t)) || !serves_waiter(core, cmd, db, &key) {
                // A list written over by a string (LPUSH, DEL, SET in one EXEC)
                // keeps its BLPOP waiting, as Redis 7.0 serves only the waiters
                // of the type the key holds.
                continue;
            }
            let mut out = Vec::new();
            let filling_before = core.wal.as_ref().map_or(0, |w| w.filling_bytes());
            let timed = core.timing.start();
            if let Some(block) = run_engine(core, cmd, caller, argv.args(), &mut out).block {
                // Nothing to serve after all (another waiter took it, or a key is
                // lent out): keep waiting, on the keys it waits for now.
                let keys = wait_keys(core, caller.db, argv.args(), &block);
                core.blocking.rearm(ticket, keys, block.deadline_ms);
                starved.extend(pops);
                continue;
            }
            let ns = timed.map(|t| core.timing.elapsed_ns(t));
            observe_unblocked(core, cmd, ticket, Some(&argv), (ns, out.len()));
            release_served(core, conns, ticket, out, filling_before);
        }
    }
}

/// Whether `key` of `db` holds the type blocked command `cmd` waits for (or
/// nothing: the command then finds it missing and waits again).
fn serves_waiter(core: &ShardCore, cmd: &Command, db: usize, key: &[u8]) -> bool {
    let Some(entry) = core.engine.peek_entry(db, key, core.now_ms) else {
        return true;
    };
    let waits_for = match (pops_from(cmd), cmd.meta.name) {
        (Some(value_type), _) => value_type,
        // XREADGROUP runs again whatever the key holds: Redis 7.0 answers its
        // blocked client `-UNBLOCKED the stream key no longer exists` then.
        (None, "xread") => "stream",
        _ => return true,
    };
    entry.value().value_type().name() == waits_for
}

/// The value type a blocking pop takes from (list or sorted set): when one such
/// waiter of a key finds nothing, every later one of the same type would not.
fn pops_from(cmd: &Command) -> Option<&'static str> {
    match cmd.meta.name {
        "blpop" | "brpop" | "blmove" | "brpoplpush" | "blmpop" => Some("list"),
        "bzpopmin" | "bzpopmax" | "bzmpop" => Some("zset"),
        _ => None,
    }
}

/// Answer every blocked client whose deadline has passed with a null array.
pub fn expire_blocked(core: &mut ShardCore, conns: &mut Slab<Conn>) {
    if core
        .blocking
        .next_deadline()
        .is_none_or(|at| at >= core.now_ms)
    {
        return;
    }
    for ticket in core.blocking.timed_out(core.now_ms) {
        answer_early(core, conns, ticket, false);
    }
}

/// End the fill leases past their time (FILLGET): the clients blocked on their
/// keys run again, and the oldest receives the next lease.
pub fn expire_fill_leases(core: &mut ShardCore, conns: &mut Slab<Conn>) {
    let mut ended = false;
    let blocking = &mut core.blocking;
    core.engine.expire_fill_leases(core.now_ms, |db, key| {
        blocking.signal(db, key);
        ended = true;
    });
    if ended {
        serve_ready(core, conns);
    }
}

/// CLIENT UNBLOCK on this shard: answer `client_id`'s blocked command now with a
/// null array (`error = false`) or `-UNBLOCKED`. False when it is not parked here.
pub fn unblock(core: &mut ShardCore, conns: &mut Slab<Conn>, client_id: u64, error: bool) -> bool {
    let parked =
        |b: &Blocked| b.client_id == client_id && !matches!(b.waiter, Waiter::Watch { .. });
    match core.blocking.find(parked) {
        Some(ticket) => {
            let name = core
                .blocking
                .get(ticket)
                .map(|b| b.argv.args().get(0).to_vec());
            if let Some(cmd) = name.and_then(|name| registry().lookup(&name)) {
                observe_unblocked(core, cmd, ticket, None, (Some(0), 0));
            }
            answer_early(core, conns, ticket, error);
            true
        }
        None => super::lending::unblock(core, conns, client_id, error),
    }
}

/// Clients blocked on keys of a slot this node no longer serves, answered as
/// Redis 7's `clusterRedirectBlockedClientIfNeeded` answers them, once the
/// node's slot map changed (a slot handed over by MIGRATESLOTS, given away by
/// SETSLOT NODE, lost to a newer claim on the bus, the cluster down):
/// `-CLUSTERDOWN The cluster is down` while the cluster is `fail`, else for a
/// slot (of the command's first key) without owner `-CLUSTERDOWN Hash slot not
/// served`, and for one owned by another node and not IMPORTING here `-MOVED`
/// to it. A MIGRATING slot is still this node's: its waiters stay (no `-ASK`).
/// A replica's READONLY client blocked on a read of its master's slot stays
/// too (a client of another shard, in forward mode, is taken to be READONLY:
/// it could not have blocked there otherwise). Redis checks in its clients'
/// cron, within a second; here on the loop turn after the map changed.
pub fn redirect_blocked(core: &mut ShardCore, conns: &mut Slab<Conn>) {
    if core.blocking.is_empty() {
        return;
    }
    let Some(generation) = core.node_routes().map(|routes| routes.map().generation()) else {
        return;
    };
    if !core.blocking.routes_changed(generation) {
        return;
    }
    let Some(routes) = core.node_routes() else {
        return;
    };
    let map = routes.map();
    let refusal = |blocked: &Blocked| -> Option<CmdError> {
        if matches!(blocked.waiter, Waiter::Watch { .. }) {
            return None;
        }
        let slot = key_slot(blocked.keys.first()?);
        if map.down() {
            return Some(CmdError::ClusterDown);
        }
        let target = match map.owner_route(slot) {
            SlotRoute::Here => return None,
            SlotRoute::Unbound => return Some(CmdError::SlotNotServed),
            SlotRoute::Moved(_) if map.importing(slot) => return None,
            SlotRoute::Moved(target) => target,
            SlotRoute::Down => return Some(CmdError::ClusterDown),
        };
        if map.my_master_serves(slot) && reads_as_readonly(conns, blocked) {
            return None;
        }
        Some(routes.moved(slot, target, came_in_tls(conns, blocked)))
    };
    let refused: Vec<(u64, CmdError)> = core
        .blocking
        .parked()
        .filter_map(|(ticket, blocked)| Some((ticket, refusal(blocked)?)))
        .collect();
    for (ticket, error) in refused {
        let Some(blocked) = core.blocking.get(ticket) else {
            continue;
        };
        let mut out = Vec::new();
        Reply::new(&mut out, blocked.proto).error(&error.message());
        let name = blocked.argv.args().get(0).to_vec();
        if let Some(cmd) = registry().lookup(&name) {
            observe_unblocked(core, cmd, ticket, None, (Some(0), 0));
        }
        release(core, conns, ticket, out);
    }
}

/// The blocked client came in on the TLS port (a client of another shard: as
/// its command's tag says).
fn came_in_tls(conns: &Slab<Conn>, blocked: &Blocked) -> bool {
    match blocked.waiter {
        Waiter::Local { index, gen, .. } => conns.get(index, gen).is_some_and(|c| c.client.tls),
        Waiter::Remote { tag, .. } => tag.tls,
        Waiter::Watch { .. } => false,
    }
}

/// A blocked command that only reads, from a READONLY client (or a client of
/// another shard, whose flags this shard does not see).
fn reads_as_readonly(conns: &Slab<Conn>, blocked: &Blocked) -> bool {
    let writes = registry()
        .lookup(blocked.argv.args().get(0))
        .is_none_or(|cmd| cmd.meta.has(WRITE));
    match blocked.waiter {
        _ if writes => false,
        Waiter::Local { index, gen, .. } => conns
            .get(index, gen)
            .is_some_and(|conn| conn.client.readonly),
        Waiter::Remote { .. } | Waiter::Watch { .. } => true,
    }
}

/// The reply a client unblocked without data gets: a null array (timeout), or
/// `-UNBLOCKED` (CLIENT UNBLOCK ... ERROR).
pub fn early_reply(proto: Protocol, error: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut reply = Reply::new(&mut out, proto);
    if error {
        reply.error("UNBLOCKED client unblocked via CLIENT UNBLOCK");
    } else {
        reply.null_array();
    }
    out
}

/// Forget the commands a departed client left parked here.
pub fn drop_waiter(core: &mut ShardCore, gone: impl Fn(&Waiter) -> bool) {
    while let Some(ticket) = core.blocking.find(|b| gone(&b.waiter)) {
        if let Some(b) = core.blocking.remove(ticket) {
            core.shared.note_blocked(b.client_id, None);
        }
    }
}

fn caller_of(blocked: &Blocked) -> Caller {
    Caller {
        client_id: blocked.client_id,
        db: blocked.db,
        proto: blocked.proto,
        no_touch: blocked.no_touch,
        may_block: true,
        borrowing: false,
        tracking: Tracked::default(),
    }
}

/// Timeout or CLIENT UNBLOCK: the reply Redis gives a client unblocked without data.
fn answer_early(core: &mut ShardCore, conns: &mut Slab<Conn>, ticket: u64, error: bool) {
    let Some(blocked) = core.blocking.get(ticket) else {
        return;
    };
    let out = early_reply(blocked.proto, error);
    release(core, conns, ticket, out);
}

/// Remove `ticket` and deliver `reply` to its client.
fn release(core: &mut ShardCore, conns: &mut Slab<Conn>, ticket: u64, reply: Vec<u8>) {
    let Some(blocked) = core.blocking.remove(ticket) else {
        return;
    };
    core.shared.note_blocked(blocked.client_id, None);
    deliver(core, conns, blocked.waiter, reply);
}

/// [`release`] for a command served now, whose write may have been logged since
/// the log held `filling_before` bytes: under `always` the reply waits for the
/// write's group ([`crate::persistence::durable::hold_served`]).
fn release_served(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    ticket: u64,
    reply: Vec<u8>,
    filling_before: usize,
) {
    let Some(blocked) = core.blocking.remove(ticket) else {
        return;
    };
    core.shared.note_blocked(blocked.client_id, None);
    if let Some((waiter, reply)) =
        crate::persistence::durable::hold_served(core, blocked.waiter, reply, filling_before)
    {
        deliver(core, conns, waiter, reply);
    }
}

/// Hand `reply` to the client `waiter` names.
pub fn deliver(core: &mut ShardCore, conns: &mut Slab<Conn>, waiter: Waiter, reply: Vec<u8>) {
    match waiter {
        Waiter::Local {
            index,
            gen,
            seq,
            part,
        } => {
            if let Some(conn) = conns.get_mut(index, gen) {
                // A part of a split command that waited for a lent key may be
                // its last: the command is recorded then.
                if let Some(record) = conn.replies.fill_part(seq, part as usize, reply, 0) {
                    observe_answered(core, &conn.client, &record);
                }
                core.reply_filled(conn, (index, gen), seq);
            }
        }
        Waiter::Remote { shard, tag } => core.outbox.reply(shard, tag, &reply),
        Waiter::Watch { .. } => {}
    }
}

#[cfg(test)]
mod tests {
    use crate::shard::inproc::TwoShards;

    /// Found by fuzz/dispatch_2shards: two cross-shard blocking commands on absent
    /// keys. Each try borrows the keys and gives them back unchanged, which marks
    /// them written on their owner; that woke the other command's watch, whose try
    /// woke the first again, forever (the shards never went quiet). The settle of
    /// the harness panics on such a livelock.
    #[test]
    fn cross_shard_blocking_commands_on_absent_keys_stay_parked() {
        let mut server = TwoShards::new();
        // "b" and "c" live on shard 0, "a" and "d" on shard 1.
        server.send(1, &["BRPOP", "b", "a", "100"]);
        server.send(0, &["BLPOP", "a", "b", "c", "d", "100"]);
        assert!(server.view(0).blocked && server.view(1).blocked);
        server.send(1, &["PING"]);
        server.advance(101_000);
        for c in 0..2 {
            let view = server.view(c);
            assert!(!view.blocked && !view.holding, "client {c}: {view:?}");
        }
        assert_eq!(server.view(0).replies, b"*-1\r\n");
        assert_eq!(server.view(1).replies, b"*-1\r\n+PONG\r\n");
    }

    /// A watched key that comes back with data still wakes the waiting command.
    #[test]
    fn cross_shard_blocking_command_is_served_by_a_push() {
        let mut server = TwoShards::new();
        server.send(0, &["BLPOP", "a", "b", "0"]);
        server.send(1, &["RPUSH", "b", "v"]);
        assert_eq!(server.view(0).replies, b"*2\r\n$1\r\nb\r\n$1\r\nv\r\n");
        assert_eq!(server.view(1).replies, b":1\r\n");
    }
}
