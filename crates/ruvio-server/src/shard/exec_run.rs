//! Running an EXEC's queue, once [`super::multi`] chose where: in turn through the
//! ordinary dispatcher when every key is this shard's ([`continue_exec`]), or over
//! keys borrowed from their owners ([`run_borrowed`]), with the server commands,
//! SELECTs and SWAPDBs a queue may hold and the replies it writes. Apart from
//! `multi.rs` (queueing, WATCH, the EXEC plan) because it is the execution side,
//! the part that splits off when multi-shard transactions stop borrowing.

use super::multi::{db_index, on_borrowed, OnBorrowed, QueuedRows};
use crate::cmd::registry::{Command, Handler};
use crate::mesh::lending::{self, DbKey};
use crate::net::caller::Caller;
use crate::net::conn::{ClientState, Conn, Merge, ReplyQueue};
use crate::net::queued::{InTurn, Queued};
use crate::net::slab::Slab;
use crate::shard::exec::run_engine;
use crate::shard::ShardCore;
use crate::transactions::multi::{forget_watches, Transaction};
use ruvio_engine::command::flags::ALL_SHARDS;
use ruvio_engine::CmdError;
use ruvio_resp::{Args, Reply};

/// Run the queue through the ordinary dispatcher, in turn (blocking commands do
/// not block). Every key of the queue and of the watches is this shard's
/// ([`plan`]): the watches are checked first (an expired one touches its
/// watchers).
pub(super) fn run_in_turn(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    queued: Queued,
) {
    let watched = std::mem::take(&mut client.watching);
    for (db, key) in &watched {
        core.touch_watched_if_expired(*db, key);
    }
    client.exec_rest = Some(InTurn {
        commands: queued.commands,
        next: 0,
        check_epoch: Some(client.watch_epoch),
    });
    forget_watches(core, client.id, client.watch_epoch + 1, watched);
    continue_exec(core, conns, client, replies, who);
}

/// Run the rest of an EXEC queue, in turn, until it is done or a command waits
/// for another shard: then the connection waits as for a blocked command, and
/// this goes on when the answer is in, before any later input (the dispatcher
/// calls it first). No command should wait so (every key is here, a script may
/// not start over under the lock inside EXEC): this keeps the replies in order
/// if one ever does. A server command's answer
/// gathered from every shard (INFO, CONFIG SET ...) holds its place in the
/// replies and the queue goes on, so every key of the queue is written in this
/// loop iteration; the connection waits for the answer after the queue.
pub fn continue_exec(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
) {
    if client.blocked.is_some() {
        return;
    }
    let Some(mut rest) = client.exec_rest.take() else {
        return;
    };
    if let Some(epoch) = rest.check_epoch.take() {
        let touched = core.watches_mut().is_touched(client.id, epoch);
        core.watches_mut().clear_touched(client.id);
        client.watch_epoch += 1;
        let mut reply = Reply::new(replies.sink(), client.proto);
        if touched {
            return reply.null_array();
        }
        reply.array(rest.commands.len());
    }
    client.in_exec = true;
    // What runs here before the queue waits (all of it, when every key is this
    // shard's) is one log group: replayed whole or not at all.
    core.log_begin();
    let mut gathering = None;
    while client.blocked.is_none() {
        let Some((cmd, args)) = rest.commands.row_at(rest.next) else {
            break;
        };
        rest.next += 1;
        crate::shard::dispatch::run_command(core, conns, client, replies, who, args);
        if matches!(cmd.handler, Some(Handler::Server(_))) {
            gathering = client.blocked.take().or(gathering);
        }
    }
    if client.blocked.is_none() {
        client.blocked = gathering;
    }
    core.log_end();
    client.in_exec = false;
    // Clients blocked on the keys it wrote see the state after the queue, never
    // one in between: an LPUSH then a DEL of the key wakes nobody.
    crate::shard::exec::serve_ready(core, conns);
    if rest.next < rest.commands.len() {
        client.exec_rest = Some(rest);
    }
}

/// What a transaction on borrowed keys did ([`run_borrowed`]).
#[derive(Debug, Default)]
pub struct RanBorrowed {
    /// `(db, key)` its commands wrote.
    pub modified: Vec<DbKey>,
    /// Keys its scripts borrowed while they ran (under the script lock): here
    /// until they are sent home with the others.
    pub loans: Vec<DbKey>,
    /// It ran (no touched watch) and its SELECTs leave the connection in this
    /// database.
    pub selected: Option<usize>,
    /// The databases its SWAPDBs swapped, in order: a borrowed key is in the
    /// database these moved it to ([`lending::after_swaps`]).
    pub swaps: Vec<(usize, usize)>,
}

/// The client's connection, in hand while its transaction runs on borrowed keys
/// (taken out of the slab, or the one whose EXEC is starting).
pub struct ConnAccess<'a> {
    pub client: &'a mut ClientState,
    pub replies: &'a mut ReplyQueue,
    /// The shard's other connections.
    pub conns: &'a mut Slab<Conn>,
    pub who: (u32, u32),
}

/// Where a transaction on borrowed keys writes its replies: the EXEC's held slot
/// (`slot`), until a server command of the queue holds a slot of its own for an
/// answer gathered from every shard; then what follows (`after`) goes to the
/// connection's replies behind that slot.
struct QueueOutput<'o> {
    slot: &'o mut Vec<u8>,
    after: Option<Vec<u8>>,
}

impl QueueOutput<'_> {
    fn buf(&mut self) -> &mut Vec<u8> {
        match self.after.as_mut() {
            Some(after) => after,
            None => self.slot,
        }
    }

    /// The bytes written since the last gathered answer go behind it.
    fn flush_after(&mut self, replies: &mut ReplyQueue) {
        if let Some(after) = self.after.as_mut() {
            replies.sink().append(after);
        }
    }
}

/// Run a transaction on keys borrowed from their owners (the coordinator's side
/// of [`lending`]): the reply goes to `out` (and, after an answer a server command
/// gathers, to the connection: [`QueueOutput`]). The watches are checked here,
/// where every watched key is held. Under the script lock, each script may borrow
/// keys it did not declare as it runs; the caller sends them home too. A server
/// command runs with `conn`; without it (the client has gone) it is skipped.
pub fn run_borrowed(
    core: &mut ShardCore,
    transaction: &Transaction,
    caller: Caller,
    out: &mut Vec<u8>,
    mut conn: Option<ConnAccess<'_>>,
) -> RanBorrowed {
    let mut ran = RanBorrowed::default();
    let touched = core
        .watches_mut()
        .is_touched(caller.client_id, transaction.epoch);
    let below = transaction.epoch + 1;
    forget_watches(core, caller.client_id, below, transaction.watched.clone());
    core.watches_mut().clear_touched(caller.client_id);
    if touched {
        Reply::new(out, caller.proto).null_array();
        return ran;
    }
    Reply::new(out, caller.proto).array(transaction.commands.len());
    ran.selected = transaction.selects;
    let mut caller = Caller {
        may_block: false,
        ..caller
    };
    let mut out = QueueOutput {
        slot: out,
        after: None,
    };
    for (cmd, args) in transaction.commands.rows() {
        // Each queued command is timed and logged here, as Redis logs EXEC's.
        let (timed, reply_start) = (core.command_timing().start(), out.buf().len());
        match on_borrowed(cmd) {
            OnBorrowed::Select => select_in_queue(core, cmd, &mut caller, args, out.buf()),
            OnBorrowed::Inline => answer_inline(core, cmd, caller, args, out.buf()),
            OnBorrowed::EveryShard if transaction.locked && cmd.meta.has(ALL_SHARDS) => {
                let from = out.buf().len();
                every_shard_now(core, cmd, caller, args, out.buf());
                if lending::swaps_dbs(cmd.meta) && out.buf()[from..] == *b"+OK\r\n" {
                    swapped_in_queue(core, args, &mut ran);
                }
            }
            OnBorrowed::Conn => match conn.as_mut() {
                Some(conn) => server_in_queue(core, conn, cmd, &mut caller, args, &mut out),
                None => continue,
            },
            _ => {
                let command = run_in_queue(core, transaction.locked, cmd, caller, args, out.buf());
                ran.modified.extend(command.modified);
                ran.loans.extend(command.loans);
            }
        }
        if core.command_timing().active() {
            let ns = timed.map(|t| core.command_timing().elapsed_ns(t));
            let who = crate::observability::Who::Id(caller.client_id);
            let reply_bytes = out.buf().len().saturating_sub(reply_start);
            crate::shard::exec::observe(core, cmd, who, args, (ns, reply_bytes));
        }
        core.counters().count_call(cmd.stat);
    }
    if let Some(conn) = conn {
        out.flush_after(conn.replies);
        // CLIENT CACHING in the queue lasted until the end of the transaction.
        conn.client.tracking.flags &= !crate::net::conn::tracking_flags::CACHING;
    }
    ran
}

/// A queued SWAPDB swapped two databases on every shard: the keys the queue wrote
/// so far are in the other one now, and so are the keys held here for it. Those
/// its scripts (or SORT) borrowed so far are renamed now, as their owners rename
/// them ([`crate::mesh::lending::Lending::swap_dbs`]); those borrowed before the
/// queue are renamed by `ran.swaps` when it is over.
fn swapped_in_queue(core: &mut ShardCore, args: Args<'_>, ran: &mut RanBorrowed) {
    let (Some(a), Some(b)) = (db_index(core, args.get(1)), db_index(core, args.get(2))) else {
        return;
    };
    ran.swaps.push((a, b));
    for (db, _) in ran.modified.iter_mut().chain(ran.loans.iter_mut()) {
        *db = lending::swapped(*db, (a, b));
    }
    crate::mesh::script_lock::swapped_in_transaction((a, b));
}

/// A queued server command, run with the connection in hand as the dispatcher
/// runs it (in the queue's database; a SELECT it makes moves the queue). An
/// answer it gathers from every shard holds a slot of the connection's replies
/// of its own ([`crate::mesh::gather::start`]), which the queue's later replies follow;
/// the connection waits for it after the transaction.
fn server_in_queue(
    core: &mut ShardCore,
    conn: &mut ConnAccess<'_>,
    cmd: &Command,
    caller: &mut Caller,
    args: Args<'_>,
    out: &mut QueueOutput<'_>,
) {
    let Some(Handler::Server(handler)) = cmd.handler else {
        return;
    };
    conn.client.db = caller.db;
    conn.client.in_exec = true;
    let mut ctx = crate::cmd::Ctx {
        core,
        client: &mut *conn.client,
        conns: &mut *conn.conns,
        gather: None,
        who: conn.who,
        wait: None,
    };
    let mut reply = Reply::new(out.buf(), caller.proto);
    // A panic closes the connection, as under the dispatcher's net (its state may
    // be half-changed); the borrowed keys still go home.
    let run = std::panic::AssertUnwindSafe(|| handler(&mut ctx, args, &mut reply));
    let result = std::panic::catch_unwind(run).unwrap_or_else(|_| {
        ctx.client.closing = true;
        Err(CmdError::Line(
            b"-ERR internal error, closing the connection\r\n".to_vec(),
        ))
    });
    let gather = ctx.gather.take();
    if let Err(error) = result {
        fail_in_queue(core, cmd, error, &mut reply);
    }
    if let Some(gather) = gather {
        out.flush_after(conn.replies);
        crate::mesh::gather::start(core, conn.client, conn.replies, conn.who, gather);
        out.after = Some(Vec::new());
    }
    conn.client.in_exec = false;
    caller.db = conn.client.db;
    // CLIENT TRACKING or CACHING in the queue governs the reads after it.
    caller.tracking.bits = conn.client.tracking.command_bits();
}

/// A keyspace command of a transaction on borrowed keys (a script under the lock
/// may borrow keys it did not declare as it runs).
fn run_in_queue(
    core: &mut ShardCore,
    locked: bool,
    cmd: &Command,
    caller: Caller,
    args: Args<'_>,
    out: &mut Vec<u8>,
) -> crate::shard::exec::Ran {
    if locked && crate::mesh::script_lock::is_script(cmd.meta) {
        crate::mesh::script_lock::begin_run(crate::mesh::script_lock::Run {
            holds_lock: true,
            probation: !crate::mesh::script_lock::known_to_reach(&core.shared.script_lock, args)
                && declared_on_one_shard(core, cmd, args),
            ..Default::default()
        });
    }
    if locked && cmd.meta.keys.reads_keys_from_value() {
        // SORT BY/GET: the keys its patterns name, given the sorted key as the
        // queue left it, borrowed now from their owners.
        let named = core.engine.value_keys(caller.db, args, core.now_ms);
        let named: Vec<&[u8]> = named.iter().map(Vec::as_slice).collect();
        let (shared, topo) = (core.shared.clone(), core.topo.clone());
        let reaching = ruvio_engine::scripting::Reaching {
            db: caller.db,
            keys: &named,
            outside: false,
            wrote: true,
        };
        crate::mesh::script_lock::reach(
            shared.script_server(&topo, core.id),
            &mut core.engine,
            reaching,
        );
    }
    run_engine(core, cmd, caller, args, out)
}

/// A queued SELECT: the next commands run in its database (the connection is
/// left in it when EXEC ran: [`plan`]).
fn select_in_queue(
    core: &mut ShardCore,
    cmd: &Command,
    caller: &mut Caller,
    args: Args<'_>,
    out: &mut Vec<u8>,
) {
    let mut reply = Reply::new(out, caller.proto);
    match crate::cmd::connection::select_index(&core.engine, args.get(1)) {
        Ok(db) => {
            caller.db = db;
            reply.ok();
        }
        Err(error) => fail_in_queue(core, cmd, error, &mut reply),
    }
}

/// A queued PING, ECHO, TIME, PUBLISH or SPUBLISH, answered as the connection's
/// handlers answer them (forward mode: every shard's subscribers count).
fn answer_inline(
    core: &mut ShardCore,
    cmd: &Command,
    caller: Caller,
    args: Args<'_>,
    out: &mut Vec<u8>,
) {
    let mut reply = Reply::new(out, caller.proto);
    match (cmd.meta.name, args.len()) {
        ("ping", 1) => reply.simple("PONG"),
        ("ping" | "echo", 2) => reply.bulk(args.get(1)),
        ("ping", _) => fail_in_queue(core, cmd, CmdError::WrongArity("ping"), &mut reply),
        ("time", _) => crate::cmd::server::time_reply(&mut reply),
        (name, _) => {
            let (channel, message) = (args.get(1), args.get(2));
            let shard_channel = name == "spublish";
            let shards = 0..core.shared.pubsub.shards.len();
            let count = crate::scripting::host::receivers(
                &core.shared.pubsub,
                shards,
                shard_channel,
                channel,
            );
            reply.int(count as i64);
            let published = ruvio_engine::command::Published {
                shard_channel,
                channel: channel.to_vec(),
                message: message.to_vec(),
            };
            core.queue_published(std::iter::once(published));
        }
    }
}

fn fail_in_queue(core: &mut ShardCore, cmd: &Command, error: CmdError, reply: &mut Reply<'_>) {
    core.counters().count_failed(cmd.stat, &error);
    error.write(reply);
}

/// A command each shard answers for its part, run by a transaction holding the
/// script lock (or a SWAPDB, which always takes it: `lending`): this shard's part
/// (its own keys and those borrowed here), every other shard's at once over the
/// mesh, merged as a client's (SCAN and RANDOMKEY ask the shards a client's would).
pub fn every_shard_now(
    core: &mut ShardCore,
    cmd: &Command,
    caller: Caller,
    args: Args<'_>,
    out: &mut Vec<u8>,
) {
    // Not as a borrower: a FLUSHALL is logged here for this shard's keys.
    let caller = Caller {
        borrowing: false,
        ..caller
    };
    let resp3 = caller.proto == ruvio_resp::Protocol::Resp3;
    if matches!(cmd.meta.name, "scan" | "randomkey") {
        let (shared, topo, me) = (core.shared.clone(), core.topo.clone(), core.id);
        let spreading = ruvio_engine::scripting::Spreading {
            call: ruvio_engine::scripting::Elsewhere {
                db: caller.db,
                args,
                resp3,
                wrote: true,
            },
            here_keys: core.engine.key_count(caller.db) as u64,
            pick: core.engine.next_random() as u32,
        };
        let mut here = |args: Args<'_>| {
            let mut part = Vec::new();
            run_engine(core, cmd, caller, args, &mut part);
            part
        };
        let reply =
            crate::mesh::script_lock::spread(shared.script_server(&topo, me), spreading, &mut here);
        out.extend_from_slice(&reply.unwrap_or_default());
        return;
    }
    let mut parts = vec![Vec::new()];
    run_engine(core, cmd, caller, args, &mut parts[0]);
    let shard = (core.id, core.topo.nodes.len());
    parts.extend(crate::mesh::script_lock::run_on_others(
        &mut core.outbox,
        shard,
        caller.db,
        resp3,
        args,
    ));
    crate::net::conn::merge_into(cmd.merge.unwrap_or(Merge::Single), &parts, &[], out);
}

/// The keys script `cmd` declares are all of one shard: a run of it under the lock
/// that reaches no other key is its probation (see [`crate::mesh::script_lock::must_lock`]).
fn declared_on_one_shard(core: &ShardCore, cmd: &Command, args: Args<'_>) -> bool {
    let mut owners = cmd.meta.keys.keys(args).map(|key| core.topo.key_owner(key));
    let first = owners.next();
    owners.all(|o| Some(o) == first)
}
