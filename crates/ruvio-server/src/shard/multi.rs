//! MULTI/EXEC transactions and WATCH, as the dispatcher runs them (the command
//! rows are in [`crate::cmd::transactions`]; the design and its cost are in
//! docs/transactions.md).
//!
//! Inside MULTI every command but EXEC, DISCARD, MULTI, WATCH, QUIT and RESET is
//! checked and queued (`+QUEUED`); a refusal (unknown command, arity, `no-multi`,
//! MOVED/CROSSSLOT in per-shard mode) flags the transaction and EXEC answers
//! `EXECABORT`. EXEC runs the queue in one of four ways:
//!
//! - **here**: every key is this shard's and free (always in per-shard mode and
//!   with one shard): each command runs through the ordinary dispatcher, one after
//!   the other in this loop iteration, so nothing else runs in between (an answer
//!   a server command gathers from every shard holds its place in the replies);
//! - **on the owner** (forward mode, every key on one other shard, no WATCH):
//!   the queue runs there in one message ([`crate::mesh::owner_tx`]);
//! - **in place** (forward mode, each command on one shard's keys, the queue on
//!   several, no WATCH, no records kept): each shard runs its part where its keys
//!   live, in shard order, holding its keys until the last part ran
//!   ([`crate::mesh::in_place`]);
//! - **borrowed** (forward mode, keys on several shards otherwise): the keys of every queued
//!   command and every watched key are borrowed from their owners
//!   ([`crate::mesh::lending`]), the queue runs here on them ([`run_borrowed`]), and they
//!   go back: no client of any shard sees a partial transaction. SELECT, PING,
//!   ECHO, TIME and PUBLISH are answered in place (keys after a SELECT are
//!   borrowed in its database); other server commands (CLIENT, CONFIG, INFO ...)
//!   run with the client's connection in hand ([`ConnAccess`]). With a script, a
//!   command each shard answers (DBSIZE, KEYS, SCAN, RANDOMKEY, FLUSHDB,
//!   FLUSHALL, SWAPDB) or SORT BY/GET in the queue it runs under the script lock:
//!   the script may borrow the keys it did not declare as it runs, SORT the keys
//!   its patterns name, the other shards answer such a command at once
//!   ([`crate::mesh::script_lock`]). A SWAPDB moves the keys held for the queue: the
//!   coordinator and the owners rename them as it goes ([`swapped_in_queue`]).
//!
//! Files: queueing, WATCH and the EXEC plan (run here, on one other owner, in
//! place, or over borrowed keys) are here; running a queue in place is
//! [`super::in_place`]; running the queue, in turn or over borrowed keys, is
//! [`super::exec_run`] (re-exported here), which shares the `Queued` type and the
//! ordering rules of docs/transactions.md. Both are the shard's because they run
//! commands on its core and answer its connections; what a transaction is as
//! data, and forgetting a client's watches, are [`crate::transactions::multi`]'s
//! (the [`Unwatching`] parts are implemented here). The queue itself is the
//! connection's plain data ([`crate::net::queued`]): each command names its row
//! by statistics slot, and [`QueuedRows`] finds the rows again.

use crate::cluster::node::SlotRoute;
use crate::cluster::topology::Topology;
use crate::cmd::registry::{registry, Command, Handler};
use crate::config::PortMode;
use crate::mesh::forward::Outbox;
use crate::mesh::in_place::PlannedPart;
use crate::mesh::lending::{self, DbKey};
use crate::net::conn::{BlockedOn, ClientState, Conn, Merge, ReplyQueue};
use crate::net::slab::Slab;
use crate::shard::ShardCore;
use crate::transactions::multi::{by_owner, runs_in_multi, unwatch, Transaction, Unwatching};
use crate::transactions::watch::{Watches, WatchingClient};
use ahash::AHashSet;
use ruvio_engine::command::flags::{ALL_SHARDS, ASKING, NO_MULTI, WRITE};
use ruvio_engine::command::CommandTree;
use ruvio_engine::slot::key_slot;
use ruvio_engine::CmdError;
use ruvio_resp::{Args, Reply};

use super::exec_run::run_in_turn;
pub use super::exec_run::{continue_exec, every_shard_now, run_borrowed, ConnAccess, RanBorrowed};
use crate::net::queued::{Commands, Queued};

impl Unwatching for ShardCore {
    #[inline]
    fn unwatch_parts(&mut self) -> (&mut Watches, &mut Outbox, usize, &Topology) {
        (&mut self.watches, &mut self.outbox, self.id, &self.topo)
    }
}

/// A queued command's row, found again from the statistics slot the queue holds
/// (the connection holds the queue and does not know the table: `net::queued`).
pub trait QueuedRows {
    /// Command `i`: its row and arguments.
    fn row_at(&self, i: usize) -> Option<(&'static Command, Args<'_>)>;
    /// Every command in order: its row and arguments.
    fn rows(&self) -> impl Iterator<Item = (&'static Command, Args<'_>)>;
}

/// The row of statistics slot `stat`, which a queued command's row gave.
fn row_of(stat: usize) -> &'static Command {
    registry()
        .row(stat)
        .expect("a queued command names the statistics slot of its row")
}

impl QueuedRows for Commands {
    #[inline]
    fn row_at(&self, i: usize) -> Option<(&'static Command, Args<'_>)> {
        self.get(i).map(|(stat, args)| (row_of(stat), args))
    }

    #[inline]
    fn rows(&self) -> impl Iterator<Item = (&'static Command, Args<'_>)> {
        self.iter().map(|(stat, args)| (row_of(stat), args))
    }
}

/// A command refused before it runs (arity, NOAUTH, OOM) inside MULTI flags the
/// transaction; EXEC itself refused discards it, with Redis' `EXECABORT
/// Transaction discarded because of: <error>` as the error.
pub fn refused(
    core: &mut ShardCore,
    client: &mut ClientState,
    cmd: &Command,
    error: CmdError,
) -> CmdError {
    let is_exec = cmd.meta.name == "exec";
    match client.multi.as_mut() {
        // Redis's rejectCommand aborts on EXEC whether a transaction is open
        // or not (execCommandAbort: `EXEC` alone while NOAUTH or BUSY).
        None if !is_exec => return error,
        Some(queued) if !is_exec => {
            queued.failed = true;
            return error;
        }
        _ => {}
    }
    client.multi = None;
    unwatch(core, client);
    let message = error.message();
    let reason = message.strip_prefix("ERR ").unwrap_or(&message);
    CmdError::quoted(
        "EXECABORT Transaction discarded because of: ",
        reason.as_bytes(),
        "",
    )
}

/// Inside MULTI: check and queue `cmd` (answering `+QUEUED` or the refusal) and
/// return true; outside MULTI, or for a command that runs at once, return false.
pub fn queue(
    core: &mut ShardCore,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    cmd: &'static Command,
    args: Args<'_>,
) -> bool {
    if client.multi.is_none() || runs_in_multi(cmd.meta.name) {
        return false;
    }
    let checked = cmd.resolve(args).and_then(|sub| {
        if sub.meta.has(NO_MULTI) {
            return Err(CmdError::NotAllowedInMulti);
        }
        cluster_slot(core, sub, args, client)?;
        Ok(sub)
    });
    let mut reply = Reply::new(replies.sink(), client.proto);
    let Some(queued) = client.multi.as_mut() else {
        return false;
    };
    match checked {
        Ok(sub) => {
            client.last_cmd = sub.meta.name;
            queued.commands.push(sub.stat, args);
            reply.simple("QUEUED");
        }
        Err(e) => {
            queued.failed = true;
            core.counters().count_rejected(cmd.stat, &e);
            e.write(&mut reply);
        }
    }
    true
}

/// Queue keyless command `sub` in the client's open transaction, answering
/// `+QUEUED`, or refuse it (NO_MULTI) and flag the transaction: what a busy
/// script's shard does for the commands Redis lets through while busy and then
/// queues (AUTH, HELLO, UNWATCH, FUNCTION STATS, SCRIPT KILL ...; see
/// `shard::busy`), which need neither the keyspace nor a slot check.
pub fn queue_keyless(
    client: &mut ClientState,
    sub: &'static Command,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) {
    let Some(queued) = client.multi.as_mut() else {
        return;
    };
    if sub.meta.has(NO_MULTI) {
        queued.failed = true;
        return CmdError::NotAllowedInMulti.write(reply);
    }
    client.last_cmd = sub.meta.name;
    queued.commands.push(sub.stat, args);
    reply.simple("QUEUED");
}

/// Per-shard mode: MOVED / CROSSSLOT / CLUSTERDOWN / ASK / TRYAGAIN as Redis
/// Cluster answers (`getNodeByQuery`) for keys not in one slot this node
/// serves: each command alone when queued or watched (the whole queue again
/// at EXEC). The client's TLS port is the port MOVED names
/// (`Config::client_port`).
fn cluster_slot(
    core: &ShardCore,
    cmd: &Command,
    args: Args<'_>,
    client: &ClientState,
) -> Result<(), CmdError> {
    if client.master && core.node_routes().is_some() {
        // The master node's stream, as Redis's `mustObeyClient`.
        return Ok(());
    }
    let slot = join_slot(core, cmd, args, None)?;
    if forward_node(core) {
        return forward_node_owner(core, slot, || cmd.meta.has(WRITE), client);
    }
    let keys = || cmd.meta.keys.keys(args).collect();
    let asking = client.asking || cmd.meta.has(ASKING);
    transaction_owner(core, slot, keys, || cmd.meta.has(WRITE), (asking, client))
}

/// Keys of `slot` (`None`: no key) of a transaction run here, or the
/// redirection: a slot in flight's first (`-ASK`, `-TRYAGAIN`, or served after
/// ASKING, `route::in_flight_keys`), then the owner's ([`check_owner`]).
fn transaction_owner<'a>(
    core: &ShardCore,
    slot: Option<u16>,
    keys: impl FnOnce() -> Vec<&'a [u8]>,
    write: impl FnOnce() -> bool,
    (asking, client): (bool, &ClientState),
) -> Result<(), CmdError> {
    if let Some(decided) =
        slot.and_then(|s| super::route::in_flight_keys(core, s, keys, (asking, client.tls)))
    {
        return decided;
    }
    check_owner(core, slot, write, client)
}

/// Forward mode as one node (`shard::node_forward`): the process is the node.
fn forward_node(core: &ShardCore) -> bool {
    core.topo.mode == PortMode::Forward && core.node_routes().is_some()
}

/// [`check_owner`] for a forward-mode node, whose slot in flight only the
/// shard holding its keys can decide (`-ASK`, `-TRYAGAIN`: a queued command's
/// `route::node_refusal` asks it, and EXEC runs where the keys are).
fn forward_node_owner(
    core: &ShardCore,
    slot: Option<u16>,
    write: impl FnOnce() -> bool,
    client: &ClientState,
) -> Result<(), CmdError> {
    let in_flight = |slot: u16| {
        core.node_routes().is_some_and(|routes| {
            let map = routes.map();
            map.slots_in_flight() && (map.migrating(slot) || map.importing(slot))
        })
    };
    match slot {
        Some(slot) if in_flight(slot) => Ok(()),
        slot => check_owner(core, slot, write, client),
    }
}

/// The slot of `cmd`'s keys joined to `slot` (the keys seen so far), or
/// CROSSSLOT; on a node of the bus, the first key's slot without an owner
/// answers `not served` first, in Redis's order. Forward mode without the
/// bus: no restriction (the process is one Redis).
fn join_slot(
    core: &ShardCore,
    cmd: &Command,
    args: Args<'_>,
    mut slot: Option<u16>,
) -> Result<Option<u16>, CmdError> {
    if core.topo.mode == PortMode::Forward && core.node_routes().is_none() {
        return Ok(slot);
    }
    for p in cmd.meta.keys.positions(args) {
        let key_slot = key_slot(args.get(p));
        match slot {
            Some(s) if s != key_slot => return Err(CmdError::CrossSlot),
            Some(_) => {}
            None => {
                let node = core.node_routes();
                if node.is_some_and(|n| n.slot_route(key_slot) == SlotRoute::Unbound) {
                    return Err(CmdError::SlotNotServed);
                }
                slot = Some(key_slot);
            }
        }
    }
    Ok(slot)
}

/// Keys of `slot` (`None`: no key) run here, or the redirection: by the
/// node's slot map on a node of the bus (`write`: the keys are written, which
/// a cluster down refuses even with `cluster-allow-reads-when-down yes`; a
/// replica node runs its master's stream, and a READONLY client's reads of
/// its master's slots), by the fixed topology otherwise (the port MOVED
/// names is the client's: TLS or not, `Config::client_port`).
fn check_owner(
    core: &ShardCore,
    slot: Option<u16>,
    write: impl FnOnce() -> bool,
    client: &ClientState,
) -> Result<(), CmdError> {
    let Some(slot) = slot else {
        return Ok(());
    };
    let client_tls = client.tls;
    if let Some(node) = core.node_routes() {
        let who = crate::cluster::slot_map::ClientSide {
            master: client.master,
            readonly: client.readonly,
            tls: client_tls,
        };
        return node.redirect_client(slot, write(), who);
    }
    match core.topo.owner(slot) {
        owner if owner == core.id => Ok(()),
        owner => Err(CmdError::Moved {
            slot,
            host: core.topo.host.clone(),
            port: core
                .cfg
                .client_port(owner, core.topo.nodes[owner].port, client_tls),
        }),
    }
}

/// `WATCH key [key ...]`: register the keys with their owners; the reply waits
/// for every owner (a held slot) so a write after `+OK` is always seen.
pub fn watch_keys(
    core: &mut ShardCore,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    args: Args<'_>,
) -> Result<(), CmdError> {
    if client.multi.is_some() {
        return Err(CmdError::WatchInMulti);
    }
    let cmd = registry().lookup(b"watch").expect("WATCH is in the table");
    cluster_slot(core, cmd, args, client)?;
    let db = client.db;
    let mut seen: AHashSet<(usize, &[u8])> = client
        .watching
        .iter()
        .map(|(d, k)| (*d, k.as_slice()))
        .collect();
    let mut fresh: Vec<DbKey> = Vec::new();
    for key in args.iter().skip(1) {
        if seen.insert((db, key)) {
            fresh.push((db, key.to_vec()));
        }
    }
    let groups = by_owner(&core.topo, core.id, fresh.clone());
    client.watching.extend(fresh);
    let mut remote: Vec<(usize, Vec<Vec<u8>>)> = Vec::new();
    for (owner, keys) in groups {
        let keys: Vec<Vec<u8>> = keys.into_iter().map(|(_, k)| k).collect();
        if owner == core.id {
            let watcher = WatchingClient {
                shard: core.id,
                client_id: client.id,
                epoch: client.watch_epoch,
            };
            core.register_watch(watcher, db, &keys);
            continue;
        }
        // An owner busy with a script past the threshold registers the keys when
        // its script command ends, and `+OK` goes now, as Redis answers WATCH
        // while a script is busy (see `ScriptWatches::watch_while_busy`).
        let busy = ruvio_engine::scripting::WatchWhileBusy {
            shard: core.id,
            client_id: client.id,
            epoch: client.watch_epoch,
            db,
            keys,
            writes_at: 0,
        };
        if let Err(back) = core.shared.scripts.watch_while_busy(owner, busy) {
            remote.push((owner, back.keys));
        }
    }
    if remote.is_empty() {
        Reply::new(replies.sink(), client.proto).ok();
        return Ok(());
    }
    let seq = replies.hold(Merge::AllOk, remote.len());
    for (part, (owner, keys)) in remote.into_iter().enumerate() {
        let tag = crate::mesh::forward::Tag::for_command(client, who, seq, part as u16);
        core.outbox
            .watch_keys(owner, core.id, tag, client.watch_epoch, keys);
    }
    Ok(())
}

/// The owner's side of a WATCH from shard `from`: register, then answer `+OK`.
pub fn watched_by(
    core: &mut ShardCore,
    from: usize,
    tag: crate::mesh::forward::Tag,
    epoch: u64,
    keys: Vec<Vec<u8>>,
) {
    core.register_watch(
        WatchingClient {
            shard: from,
            client_id: tag.client_id,
            epoch,
        },
        tag.db as usize,
        &keys,
    );
    core.outbox.reply(from, tag, b"+OK\r\n");
}

/// How EXEC runs the queue (see the module doc).
enum Plan {
    /// Through the dispatcher, one command after the other (here, or in order).
    InTurn,
    /// On these keys, borrowed from their owners; under the script lock when
    /// `locked` (a script of the queue may borrow more while it runs, a command
    /// each shard answers asks them then). `selects`: the database the queue's
    /// SELECTs leave the connection in.
    Borrowed {
        keys: Vec<DbKey>,
        locked: bool,
        selects: Option<usize>,
        with_conn: bool,
    },
    /// On shard `0`, which owns every key ([`crate::mesh::owner_tx`]).
    OnOwner(usize, Vec<DbKey>),
    /// Each shard's part where its keys live, in shard order
    /// ([`crate::mesh::in_place`]); the queue's length.
    InPlace(Vec<PlannedPart>, usize),
}

/// `EXEC` inside MULTI. Errors (EXECABORT) come back to be written once.
pub fn exec(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
) -> Result<(), CmdError> {
    let Some(queued) = client.multi.take() else {
        return Err(CmdError::ExecWithoutMulti);
    };
    if queued.failed {
        unwatch(core, client);
        return Err(CmdError::ExecAbort);
    }
    let one_slot = queued
        .commands
        .rows()
        .try_fold(None, |slot, (cmd, args)| join_slot(core, cmd, args, slot));
    let writes = || queued.commands.rows().any(|(cmd, _)| cmd.meta.has(WRITE));
    let keys = || {
        queued
            .commands
            .rows()
            .flat_map(|(cmd, args)| cmd.meta.keys.keys(args))
            .collect()
    };
    let asking = client.asking || queued.commands.rows().any(|(cmd, _)| cmd.meta.has(ASKING));
    let owned = one_slot.and_then(|slot| match forward_node(core) {
        true => forward_node_owner(core, slot, writes, client),
        false => transaction_owner(core, slot, keys, writes, (asking, client)),
    });
    if let Err(e) = owned {
        unwatch(core, client);
        return Err(e);
    }
    // The user's rules changed since a command was queued: the queue runs in
    // turn, where each command is checked again and a refused one answers
    // Redis's EXEC-time `-NOPERM` (see `shard::dispatch`).
    let refused_now = client.acl.restricted
        && queued.commands.rows().any(|(cmd, args)| {
            crate::acl::check::check(&client.acl.user, cmd.stat, cmd.meta, args).is_err()
        });
    if refused_now {
        run_in_turn(core, conns, client, replies, who, queued);
        return Ok(());
    }
    let mut plan = plan(core, client, &queued, true);
    if matches!(plan, Plan::InPlace(..))
        && !crate::mesh::script_lock::begin_borrowing(core.script_server())
    {
        // A script took the lock meanwhile: borrowing waits for it.
        plan = self::plan(core, client, &queued, false);
    }
    if !matches!(plan, Plan::InTurn) && crate::observability::monitor::attached() {
        feed_monitors(core, client, &queued);
    }
    match plan {
        Plan::InTurn => run_in_turn(core, conns, client, replies, who, queued),
        Plan::OnOwner(owner, keys) => crate::mesh::owner_tx::send(
            core.owner_tx_parts(),
            client,
            replies,
            who,
            owner,
            queued.commands,
            keys,
        ),
        Plan::InPlace(parts, len) => {
            super::in_place::start(core, conns, (client, replies, who), parts, len)
        }
        Plan::Borrowed {
            keys,
            locked,
            selects,
            with_conn,
        } => run_borrowing(
            core,
            conns,
            client,
            replies,
            who,
            queued,
            keys,
            (locked, selects, with_conn),
        ),
    }
    Ok(())
}

/// MONITOR's lines for a queue that runs on other shards (one owner, or borrowed
/// keys), fed as it starts: a queue run in turn here goes through the dispatcher,
/// which feeds each command as it runs. A watch touched on another shard and not
/// yet known here still shows the queue.
fn feed_monitors(core: &ShardCore, client: &ClientState, queued: &Queued) {
    use crate::observability::monitor::{feed, Source};
    let mut db = client.db;
    for (cmd, args) in queued.commands.rows() {
        let Ok(sub) = cmd.resolve(args) else {
            continue;
        };
        if sub.meta.has(ruvio_engine::command::flags::ADMIN) {
            continue;
        }
        if sub.meta.name == "select" {
            db = db_index(core, args.get(1)).unwrap_or(db);
        }
        feed(db, Source::Client(&client.peer), args);
    }
}

/// Start the EXEC of `queued` on `keys` borrowed from their owners. Without WATCH
/// the client goes on meanwhile (later commands that may touch the keys wait:
/// [`super::lending::must_wait_for_transaction`]), and the transaction rides on an EXEC
/// already borrowing its keys here if there is one (not one under the script
/// lock); with WATCH the client waits.
#[allow(clippy::too_many_arguments)]
fn run_borrowing(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    queued: Queued,
    keys: Vec<DbKey>,
    (locked, selects, with_conn): (bool, Option<usize>, bool),
) {
    // A client whose queue SELECTs waits for the EXEC: its next commands run in
    // the database the queue left it in (set when it ran: `lending::finish`); so
    // does one whose queue needs its connection (the state it leaves is its).
    let unwatched = client.watching.is_empty() && selects.is_none() && !with_conn;
    core.stats.exec_borrowed += 1;
    let after = client.borrowing_tx.map(|(ticket, _)| ticket);
    let swaps_dbs = queued
        .commands
        .rows()
        .any(|(cmd, _)| lending::swaps_dbs(cmd.meta));
    let transaction = Box::new(Transaction {
        commands: queued.commands,
        epoch: client.watch_epoch,
        watched: std::mem::take(&mut client.watching),
        locked,
        selects,
        with_conn,
        swaps_dbs,
    });
    // A new epoch now; the owners forget the old watches once it ran.
    client.watch_epoch += 1;
    let seq = replies.hold(Merge::Single, 1);
    let caller = crate::net::caller::Caller::of(client, core.id);
    let transaction = match unwatched && !locked {
        true => {
            match super::lending::join_transaction(
                core,
                after,
                who,
                seq,
                caller,
                transaction,
                &keys,
            ) {
                Ok(ticket) => {
                    client.borrowing_tx = Some((ticket, seq));
                    return;
                }
                Err(transaction) => transaction,
            }
        }
        false => transaction,
    };
    let ticket = core.lending.next_ticket();
    match unwatched {
        true => client.borrowing_tx = Some((ticket, seq)),
        false => client.blocked = Some(BlockedOn::waiting(seq)),
    }
    let to = super::lending::ReplyTo {
        conn: who,
        seq,
        first_in_line: false,
    };
    let mut at_once = super::lending::start_transaction(core, conns, to, caller, transaction, keys);
    if at_once.is_none() {
        // Every key was here: one that needs the connection runs now, with it.
        let access = ConnAccess {
            client: &mut *client,
            replies: &mut *replies,
            conns: &mut *conns,
            who,
        };
        at_once = super::lending::finish_starting_with_conn(core, access);
    }
    // Run while its connection was out of the slab, its writer's slot waits
    // for its invalidations (see `tracking`).
    if lending::keep_answered_at_once(&mut core.lending) {
        replies.keep(seq);
    }
    if let Some(reply) = at_once {
        let ran = !(reply.starts_with(b"*-1") || reply.starts_with(b"_"));
        if let Some(db) = selects.filter(|_| ran) {
            client.db = db;
        }
        replies.fill(seq, 0, reply);
        // (A gathered answer of its queue may hold the client still.)
        if client.blocked.is_some_and(|b| b.seq == seq) {
            client.blocked = None;
        }
        client.borrowing_tx = None;
    }
}

/// The keys an EXEC of `queued` would borrow (no WATCH, keys on several shards,
/// keyspace commands only), if that is how it would run.
pub fn borrowed_keys(
    core: &ShardCore,
    client: &ClientState,
    queued: &Queued,
) -> Option<Vec<DbKey>> {
    if queued.failed || !client.watching.is_empty() {
        return None;
    }
    match plan(core, client, queued, true) {
        Plan::Borrowed {
            keys,
            locked: false,
            selects: None,
            with_conn: false,
        } => Some(keys),
        _ => None,
    }
}

/// Decide how the queue runs: in turn when every key (queued or watched) is this
/// shard's and free; on the owner when every key is one other shard's, nothing
/// is watched, every command is a keyspace command and every script passed its
/// probation here (see [`crate::mesh::script_lock::must_lock`]);
/// in place when `in_place` allows it and [`in_place_parts`] finds each command
/// on one shard's keys; borrowed otherwise (with the connection in hand when a
/// command needs it: CLIENT, CONFIG, INFO ...), under the script lock when a
/// script or a command each shard answers (DBSIZE, KEYS, FLUSHALL ...) is in the
/// queue.
fn plan(core: &ShardCore, client: &ClientState, queued: &Queued, in_place: bool) -> Plan {
    if core.topo.mode != PortMode::Forward || core.topo.nodes.len() == 1 {
        return Plan::InTurn;
    }
    let mut db = client.db;
    let mut selects = None;
    // Borrowed from the queue and the watch list: copied only for a queue that
    // leaves this shard (the usual transaction runs in turn, here).
    let mut keys: smallvec::SmallVec<[(usize, &[u8]); 16]> = client
        .watching
        .iter()
        .map(|(db, key)| (*db, key.as_slice()))
        .collect();
    let (mut has_script, mut must_lock) = (false, false);
    let (mut every_shard, mut inline, mut with_conn) = (false, false, false);
    // After a SWAPDB the queue's keys name what was in the other database: each
    // database's place before the queue ran (SWAPDB only).
    let mut before_swaps: Option<Vec<usize>> = None;
    for (cmd, args) in queued.commands.rows() {
        match on_borrowed(cmd) {
            OnBorrowed::Conn => with_conn = true,
            OnBorrowed::Select => {
                if let Some(index) = db_index(core, args.get(1)) {
                    (db, selects) = (index, Some(index));
                }
                inline = true;
                continue;
            }
            OnBorrowed::Inline => {
                inline = true;
                continue;
            }
            OnBorrowed::EveryShard => every_shard = true,
            OnBorrowed::Keys => {}
        }
        if lending::swaps_dbs(cmd.meta) {
            if let (Some(a), Some(b)) = (db_index(core, args.get(1)), db_index(core, args.get(2))) {
                let dbs = core.engine.db_count();
                before_swaps
                    .get_or_insert_with(|| (0..dbs).collect())
                    .swap(a, b);
            }
            continue;
        }
        if crate::mesh::script_lock::is_script(cmd.meta) {
            has_script = true;
            must_lock |= crate::mesh::script_lock::must_lock(&core.shared.script_lock, args);
        }
        let named_from = keys.len();
        queued_keys(core, cmd, args, db, &mut keys);
        if let Some(places) = &before_swaps {
            keys[named_from..]
                .iter_mut()
                .for_each(|(db, _)| *db = places[*db]);
        }
    }
    let all_here = keys
        .iter()
        .all(|&(d, k)| core.topo.key_owner(k) == core.id && !core.lending.is_lent(d, k));
    // A script may reach undeclared keys of this shard that are out on loan
    // (`shard::exec::loans_out`): then the queue runs under the lock, which waits for them.
    let loans_out = has_script && core.lending.any_lent();
    if all_here && !must_lock && !every_shard && !loans_out {
        return Plan::InTurn;
    }
    // Before the keys are copied: a queue run in place plans its own parts (a
    // queue of one other shard's keys runs on that owner, below).
    let first_owner = keys.first().map(|&(_, k)| core.topo.key_owner(k));
    let spread = keys
        .iter()
        .any(|&(_, k)| Some(core.topo.key_owner(k)) != first_owner);
    if in_place && !has_script && spread {
        if let Some(parts) = in_place_parts(core, client, queued) {
            return Plan::InPlace(parts, queued.commands.len());
        }
    }
    keys.sort_unstable();
    keys.dedup();
    let keys: Vec<DbKey> = keys.iter().map(|&(db, key)| (db, key.to_vec())).collect();
    // On the owner only with scripts known to stay in their slots: a script's
    // first run there could reach a third shard's key while the lock is taken and
    // have to refuse it (Redis Cluster's error); here it runs its probation.
    if !must_lock && !all_here && !every_shard && !inline && !with_conn {
        if let Some(owner) = single_other_owner(core, client, &keys) {
            return Plan::OnOwner(owner, keys);
        }
    }
    Plan::Borrowed {
        keys,
        locked: has_script || every_shard,
        selects,
        with_conn,
    }
}

/// The shards, ascending, of the parts an EXEC of `queued` would run in place
/// now (None when it would not run in place): a client's EXEC over the same
/// shards as its transactions in flight is of their chain and goes on behind
/// them (`shard::in_place::must_wait`). The rules are [`plan`]'s: forward mode,
/// no script, keys of several shards, and [`in_place_parts`]'s own; a queue the
/// user's changed rules may refuse runs in turn (`exec`), so it is not one.
/// Nothing is copied (it runs for every such EXEC, before `plan`).
pub(super) fn in_place_shards(
    core: &ShardCore,
    client: &ClientState,
    queued: &Queued,
) -> Option<Vec<usize>> {
    let forward = core.topo.mode == PortMode::Forward && core.topo.nodes.len() > 1;
    if !forward || client.acl.restricted || !may_run_in_place(core, client) {
        return None;
    }
    let mut shards = Vec::new();
    for (cmd, args) in queued.commands.rows() {
        if crate::mesh::script_lock::is_script(cmd.meta) {
            return None;
        }
        let shard = in_place_shard(core, client, cmd, args, &mut smallvec::SmallVec::new())?;
        if !shards.contains(&shard) {
            shards.push(shard);
        }
    }
    shards.sort_unstable();
    (shards.len() > 1).then_some(shards)
}

/// Whether the client's and the server's state let an EXEC run in place:
/// nothing watched, no record kept (no log, no replication feed: they see a
/// borrowed transaction as one group, which parts on their owners do not
/// reproduce yet), nobody hearing of writes as they happen (keyspace
/// notifications, CLIENT TRACKING: a part's message would come before the next
/// part ran), the script lock free.
fn may_run_in_place(core: &ShardCore, client: &ClientState) -> bool {
    let lock_free = core.shared.script_lock.holder().is_none();
    let heard = crate::messaging::notify::wanted(core.cfg.notify_keyspace_events)
        || core.shared.tracking.anyone_tracks();
    client.watching.is_empty() && !core.logs() && !heard && lock_free
}

/// The shard whose keys a queued command of an EXEC run in place names (into
/// `keys`); None when it may not run in place: not a keyspace command, SWAPDB,
/// no key, or keys of several shards.
fn in_place_shard<'a>(
    core: &ShardCore,
    client: &ClientState,
    cmd: &Command,
    args: Args<'a>,
    keys: &mut smallvec::SmallVec<[(usize, &'a [u8]); 16]>,
) -> Option<usize> {
    if !matches!(on_borrowed(cmd), OnBorrowed::Keys) || lending::swaps_dbs(cmd.meta) {
        return None;
    }
    queued_keys(core, cmd, args, client.db, keys);
    let shard = core.topo.key_owner(keys.first()?.1);
    let one_shard = keys.iter().all(|(_, k)| core.topo.key_owner(k) == shard);
    one_shard.then_some(shard)
}

/// The parts of a queue that runs in place ([`crate::mesh::in_place`]), in
/// shard order: when [`may_run_in_place`] and every queued command is a
/// keyspace command naming keys of one shard only ([`in_place_shard`]).
fn in_place_parts(
    core: &ShardCore,
    client: &ClientState,
    queued: &Queued,
) -> Option<Vec<PlannedPart>> {
    if !may_run_in_place(core, client) {
        return None;
    }
    let mut parts: Vec<PlannedPart> = Vec::new();
    for (position, (stat, args)) in queued.commands.iter().enumerate() {
        let cmd = row_of(stat);
        let mut keys = smallvec::SmallVec::new();
        let shard = in_place_shard(core, client, cmd, args, &mut keys)?;
        let at = match parts.iter().position(|p| p.shard == shard) {
            Some(at) => at,
            None => {
                parts.push(PlannedPart {
                    shard,
                    commands: Some(queued.commands.empty_like()),
                    keys: Vec::new(),
                    positions: Vec::new(),
                    replies: Vec::new(),
                    ends: Vec::new(),
                });
                parts.len() - 1
            }
        };
        let part = &mut parts[at];
        if let Some(commands) = part.commands.as_mut() {
            commands.push(stat, args);
        }
        part.keys
            .extend(keys.iter().map(|&(db, key)| (db, key.to_vec())));
        part.positions.push(position);
    }
    if parts.len() < 2 {
        return None;
    }
    parts.sort_unstable_by_key(|p| p.shard);
    for part in &mut parts {
        part.keys.sort_unstable();
        part.keys.dedup();
    }
    Some(parts)
}

/// How a queued command runs in an EXEC on borrowed keys ([`run_borrowed`]).
pub(super) enum OnBorrowed {
    /// On the keys it names, here.
    Keys,
    /// SELECT: the next commands' database.
    Select,
    /// PING, ECHO, TIME, PUBLISH, SPUBLISH: answered here, touching no key (a
    /// publication is counted now and delivered after the loop iteration, as a
    /// script's).
    Inline,
    /// A keyspace command each shard answers for its part (DBSIZE, KEYS, SCAN,
    /// RANDOMKEY, FLUSHDB, FLUSHALL, SWAPDB): here and, under the script lock, on
    /// every other shard at once; or one reading keys named in a value (SORT
    /// BY/GET), which borrows them under the lock when it runs.
    EveryShard,
    /// A server command that needs the connection or the server (CLIENT, CONFIG,
    /// INFO ...): run with the connection in hand ([`ConnAccess`]); an answer it
    /// gathers from every shard holds a slot of the connection's replies of its
    /// own, and the queue goes on.
    Conn,
}

pub(super) fn on_borrowed(cmd: &Command) -> OnBorrowed {
    match cmd.handler {
        Some(Handler::Engine(_)) => {
            if cmd.meta.has(ALL_SHARDS) || cmd.meta.keys.reads_keys_from_value() {
                OnBorrowed::EveryShard
            } else {
                OnBorrowed::Keys
            }
        }
        _ => match cmd.meta.name {
            "select" => OnBorrowed::Select,
            "ping" | "echo" | "time" | "publish" | "spublish" => OnBorrowed::Inline,
            _ => OnBorrowed::Conn,
        },
    }
}

/// The database `index` names, or `None` for one SELECT refuses (its error is the
/// reply; the database stays): a queued SELECT's or MOVE's.
pub(super) fn db_index(core: &ShardCore, index: &[u8]) -> Option<usize> {
    crate::cmd::connection::select_index(&core.engine, index).ok()
}

/// The `(db, key)`s command `cmd` of the queue names in database `db`, with a
/// MOVE's or COPY ... DB's target in its database, into `keys`.
fn queued_keys<'a>(
    core: &ShardCore,
    cmd: &Command,
    args: Args<'a>,
    db: usize,
    keys: &mut smallvec::SmallVec<[(usize, &'a [u8]); 16]>,
) {
    let positions = cmd.meta.keys.positions(args);
    keys.extend(positions.iter().map(|&p| (db, args.get(p))));
    let target = match cmd.meta.name {
        "move" => db_index(core, args.get(2)),
        _ => super::lending::other_db(core, cmd, args),
    };
    if let (Some(target), Some(&last)) = (target, positions.last()) {
        keys.push((target, args.get(last)));
    }
}

/// The shard that owns every one of `keys` when it is another one, nothing is
/// watched and this shard coordinates no cross-shard command (see
/// [`crate::mesh::owner_tx::is_claimed`]).
fn single_other_owner(core: &ShardCore, client: &ClientState, keys: &[DbKey]) -> Option<usize> {
    if !client.watching.is_empty() || core.lending.coordinating() {
        return None;
    }
    let owner = core.topo.key_owner(&keys.first()?.1);
    let one_owner = keys.iter().all(|(_, k)| core.topo.key_owner(k) == owner);
    (one_owner && owner != core.id).then_some(owner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ruvio_resp::OwnedArgs;

    /// The queue holds statistics slots; each comes back as the very row it was
    /// resolved to, a container's subcommand included, with its arguments.
    #[test]
    fn queued_commands_find_their_rows_again() {
        let lines: [&[&[u8]]; 3] = [
            &[b"SET", b"k", b"v"],
            &[b"client", b"LIST"],
            &[b"object", b"encoding", b"k"],
        ];
        let mut commands = Commands::default();
        let mut resolved = Vec::new();
        for line in lines {
            let args: OwnedArgs = line.iter().copied().collect();
            let row = registry()
                .lookup(line[0])
                .and_then(|c| c.resolve(args.args()).ok())
                .unwrap();
            commands.push(row.stat, args.args());
            resolved.push(row);
        }
        let names: Vec<_> = commands.rows().map(|(row, _)| row.meta.name).collect();
        assert_eq!(names, ["set", "client|list", "object|encoding"]);
        for (i, (line, row)) in lines.iter().zip(&resolved).enumerate() {
            let (found, args) = commands.row_at(i).unwrap();
            assert!(std::ptr::eq(found, *row), "row {i}");
            assert!(args.iter().eq(line.iter().copied()), "arguments {i}");
        }
        assert!(commands.row_at(lines.len()).is_none());
    }
}
