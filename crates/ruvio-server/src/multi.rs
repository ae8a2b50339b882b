//! MULTI/EXEC transactions and WATCH, as the dispatcher runs them (the command
//! rows are in [`crate::cmd::transactions`]; the design and its cost are in
//! docs/transactions.md).
//!
//! Inside MULTI every command but EXEC, DISCARD, MULTI, WATCH, QUIT and RESET is
//! checked and queued (`+QUEUED`); a refusal (unknown command, arity, `no-multi`,
//! MOVED/CROSSSLOT in per-shard mode) flags the transaction and EXEC answers
//! `EXECABORT`. EXEC runs the queue in one of three ways:
//!
//! - **here**: every key is this shard's and free (always in per-shard mode and
//!   with one shard): each command runs through the ordinary dispatcher, one after
//!   the other in this loop iteration, so nothing else runs in between;
//! - **borrowed** (forward mode, keys on several shards): the keys of every queued
//!   command and every watched key are borrowed from their owners
//!   ([`crate::lending`]), the queue runs here on them ([`run_borrowed`]), and they
//!   go back: no client of any shard sees a partial transaction;
//! - **in order** (forward mode, a transaction mixing keys of other shards with
//!   commands that need every shard or the connection, as DBSIZE or SELECT): each
//!   command runs as it would outside MULTI, replies in one array, without
//!   isolation (documented as a limit).

use crate::config::PortMode;
use crate::conn::{BlockedOn, ClientState, Conn, Merge, ReplyQueue};
use crate::exec::{run_engine, Caller};
use crate::lending::{self, DbKey};
use crate::registry::{registry, Command, Handler};
use crate::shard::ShardCore;
use crate::slab::Slab;
use crate::watch;
use ruvio_engine::command::flags::{ALL_SHARDS, DB_OPTION, NO_MULTI};
use ruvio_engine::command::CommandTree;
use ruvio_engine::slot::key_slot;
use ruvio_engine::CmdError;
use ruvio_resp::{Args, OwnedArgs, Reply};

/// A client's open transaction (between MULTI and EXEC or DISCARD).
#[derive(Debug, Default)]
pub struct Queued {
    /// The commands, resolved to the row that runs them, with their arguments.
    commands: Vec<(&'static Command, OwnedArgs)>,
    /// A command was refused while queueing: EXEC aborts.
    failed: bool,
}

impl Queued {
    /// Commands queued (CLIENT LIST `multi=`).
    pub fn len(&self) -> usize {
        self.commands.len()
    }
}

/// A transaction running on borrowed keys (see [`crate::lending`]).
#[derive(Debug)]
pub struct Transaction {
    commands: Vec<(&'static Command, OwnedArgs)>,
    /// The watch epoch EXEC checks, and the watched keys to forget afterwards.
    epoch: u64,
    watched: Vec<DbKey>,
}

/// Commands that run at once inside MULTI instead of being queued (Redis'
/// processCommand list).
fn runs_in_multi(name: &str) -> bool {
    matches!(
        name,
        "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
    )
}

/// Mark the client's open transaction as failed (a command refused before it
/// could be queued: unknown, wrong arity, not authenticated, out of memory).
pub fn flag_refused(client: &mut ClientState) {
    if let Some(queued) = client.multi.as_mut() {
        queued.failed = true;
    }
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
        cluster_slot(core, sub, args, None)?;
        Ok(sub)
    });
    let mut reply = Reply::new(replies.sink(), client.proto);
    let Some(queued) = client.multi.as_mut() else {
        return false;
    };
    match checked {
        Ok(sub) => {
            queued.commands.push((sub, OwnedArgs::from_args(args)));
            reply.simple("QUEUED");
        }
        Err(e) => {
            queued.failed = true;
            core.stats.per_command[cmd.stat].rejected += 1;
            core.stats.count_error(&e);
            e.write(&mut reply);
        }
    }
    true
}

/// Per-shard mode: the slot of `cmd`'s keys joined to `slot` (the keys seen so
/// far), or MOVED / CROSSSLOT as Redis Cluster answers for keys not in one slot of
/// this node: for each command when queued, for the whole queue at EXEC.
/// Forward mode: no restriction.
fn cluster_slot(
    core: &ShardCore,
    cmd: &Command,
    args: Args<'_>,
    mut slot: Option<u16>,
) -> Result<Option<u16>, CmdError> {
    if core.topo.mode == PortMode::Forward {
        return Ok(slot);
    }
    for p in cmd.meta.keys.positions(args) {
        let key_slot = key_slot(args.get(p));
        match slot {
            Some(s) if s != key_slot => return Err(CmdError::CrossSlot),
            _ => slot = Some(key_slot),
        }
    }
    match slot {
        Some(s) if core.topo.owner(s) != core.id => Err(CmdError::Moved {
            slot: s,
            host: core.topo.host.clone(),
            port: core.topo.nodes[core.topo.owner(s)].port,
        }),
        _ => Ok(slot),
    }
}

/// `MULTI`
pub fn multi(client: &mut ClientState) -> Result<(), CmdError> {
    if client.multi.is_some() {
        return Err(CmdError::MultiNested);
    }
    client.multi = Some(Queued::default());
    Ok(())
}

/// `DISCARD`
pub fn discard(core: &mut ShardCore, client: &mut ClientState) -> Result<(), CmdError> {
    if client.multi.take().is_none() {
        return Err(CmdError::DiscardWithoutMulti);
    }
    unwatch(core, client);
    Ok(())
}

/// Forget every key the client watches and start a new watch epoch (UNWATCH,
/// DISCARD, EXEC, RESET, a closed connection).
pub fn unwatch(core: &mut ShardCore, client: &mut ClientState) {
    let watched = std::mem::take(&mut client.watching);
    forget_watches(core, client.id, watched);
    client.watch_epoch += 1;
    core.watches.clear_touched(client.id);
}

/// Tell the owners of `watched` to forget `client_id`'s watches.
fn forget_watches(core: &mut ShardCore, client_id: u64, watched: Vec<DbKey>) {
    for (owner, keys) in by_owner(core, watched) {
        if owner == core.id {
            watch::unregister(core, client_id, &keys);
        } else {
            core.outbox.unwatch_keys(owner, client_id, keys);
        }
    }
}

/// Group keys by the shard that owns them (all this shard's unless forward mode).
fn by_owner(core: &ShardCore, keys: Vec<DbKey>) -> Vec<(usize, Vec<DbKey>)> {
    let mut groups: Vec<(usize, Vec<DbKey>)> = Vec::new();
    for (db, key) in keys {
        let owner = owner_of(core, &key);
        match groups.iter_mut().find(|(o, _)| *o == owner) {
            Some((_, ks)) => ks.push((db, key)),
            None => groups.push((owner, vec![(db, key)])),
        }
    }
    groups
}

/// The shard whose keyspace holds `key`: its owner in forward mode, this shard
/// in per-shard mode (a key of another slot was refused before).
fn owner_of(core: &ShardCore, key: &[u8]) -> usize {
    match core.topo.mode {
        PortMode::Forward => core.topo.key_owner(key),
        _ => core.id,
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
    cluster_slot(core, cmd, args, None)?;
    let db = client.db;
    let mut fresh: Vec<DbKey> = Vec::new();
    for key in args.iter().skip(1) {
        let dk = (db, key.to_vec());
        if !client.watching.contains(&dk) && !fresh.contains(&dk) {
            fresh.push(dk);
        }
    }
    let groups = by_owner(core, fresh.clone());
    client.watching.extend(fresh);
    let remote = groups.iter().filter(|(o, _)| *o != core.id).count();
    let seq = (remote > 0).then(|| replies.hold(Merge::AllOk, remote));
    let mut part = 0;
    for (owner, keys) in groups {
        let keys: Vec<Vec<u8>> = keys.into_iter().map(|(_, k)| k).collect();
        if owner == core.id {
            watch::register(core, core.id, client.id, client.watch_epoch, db, &keys);
        } else if let Some(seq) = seq {
            let tag = crate::dispatch::tag(client, who, seq, part);
            core.outbox
                .watch_keys(owner, core.id, tag, client.watch_epoch, keys);
            part += 1;
        }
    }
    if seq.is_none() {
        Reply::new(replies.sink(), client.proto).ok();
    }
    Ok(())
}

/// The owner's side of a WATCH from shard `from`: register, then answer `+OK`.
pub fn watched_by(
    core: &mut ShardCore,
    from: usize,
    tag: crate::forward::Tag,
    epoch: u64,
    keys: Vec<Vec<u8>>,
) {
    watch::register(core, from, tag.client_id, epoch, tag.db as usize, &keys);
    core.outbox.reply(from, tag, b"+OK\r\n");
}

/// How EXEC runs the queue (see the module doc).
enum Plan {
    /// Through the dispatcher, one command after the other (here, or in order).
    InTurn,
    /// On these keys, borrowed from their owners.
    Borrowed(Vec<DbKey>),
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
    let one_slot = queued.commands.iter().try_fold(None, |slot, (cmd, args)| {
        cluster_slot(core, cmd, args.args(), slot)
    });
    if let Err(e) = one_slot {
        unwatch(core, client);
        return Err(e);
    }
    match plan(core, client, &queued) {
        Plan::InTurn => {
            let intact = watches_intact_here(core, client);
            unwatch(core, client);
            if intact {
                run_in_turn(core, conns, client, replies, who, queued);
            } else {
                Reply::new(replies.sink(), client.proto).null_array();
            }
        }
        Plan::Borrowed(keys) => {
            let transaction = Transaction {
                commands: queued.commands,
                epoch: client.watch_epoch,
                watched: std::mem::take(&mut client.watching),
            };
            // A new epoch now; the owners forget the old watches once it ran.
            client.watch_epoch += 1;
            let seq = replies.hold(Merge::Single, 1);
            client.blocked = Some(BlockedOn { seq, remote: None });
            let caller = crate::dispatch::caller(client);
            let at_once =
                lending::start_transaction(core, conns, who, seq, caller, transaction, keys);
            if let Some(reply) = at_once {
                replies.fill(seq, 0, reply);
                client.blocked = None;
            }
        }
    }
    Ok(())
}

/// Check the watches of this shard's keys (an expired key touches its watchers)
/// and say whether the client's epoch is untouched. With keys on other shards
/// (the in-order plan) a touch still on its way is not seen.
fn watches_intact_here(core: &mut ShardCore, client: &ClientState) -> bool {
    for (db, key) in &client.watching {
        if owner_of(core, key) == core.id {
            watch::check_expired(core, *db, key);
        }
    }
    !core.watches.is_touched(client.id, client.watch_epoch)
}

/// Decide how the queue runs: in turn when every key (queued or watched) is this
/// shard's and free, or when a command needs the connection or every shard;
/// borrowed otherwise.
fn plan(core: &ShardCore, client: &ClientState, queued: &Queued) -> Plan {
    if core.topo.mode != PortMode::Forward || core.topo.nodes.len() == 1 {
        return Plan::InTurn;
    }
    let db = client.db;
    let mut keys: Vec<DbKey> = client.watching.clone();
    let mut needs_more = false;
    for (cmd, args) in &queued.commands {
        let args = args.args();
        let engine = matches!(cmd.handler, Some(Handler::Engine(_)));
        needs_more |= !engine
            || cmd.meta.has(ALL_SHARDS)
            || cmd.meta.keys.reads_keys_from_value()
            || names_other_db(cmd);
        keys.extend(
            cmd.meta
                .keys
                .positions(args)
                .into_iter()
                .map(|p| (db, args.get(p).to_vec())),
        );
    }
    let all_here = keys
        .iter()
        .all(|(d, k)| core.topo.key_owner(k) == core.id && !core.lending.is_lent(*d, k));
    if all_here || needs_more {
        return Plan::InTurn;
    }
    keys.sort();
    keys.dedup();
    Plan::Borrowed(keys)
}

/// A command that writes a key of another database (COPY ... DB, MOVE): its
/// target is not among the borrowed keys, so it runs in turn (its own borrowing
/// knows the target database).
fn names_other_db(cmd: &Command) -> bool {
    cmd.meta.has(DB_OPTION) || cmd.meta.name == "move"
}

/// Answer an array of the queued commands' replies, each run through the
/// ordinary dispatcher in turn (blocking commands do not block).
fn run_in_turn(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    queued: Queued,
) {
    Reply::new(replies.sink(), client.proto).array(queued.commands.len());
    client.in_exec = true;
    for (_, args) in &queued.commands {
        crate::dispatch::run_command(core, conns, client, replies, who, args.args());
        // A part answered later (another shard, borrowed keys) fills its held slot
        // in order; the queue goes on without waiting for it.
        client.blocked = None;
    }
    client.in_exec = false;
}

/// Run a transaction on keys borrowed from their owners (the coordinator's side
/// of [`lending`]): the whole reply goes to `out`; the keys it wrote come back.
/// The watches are checked here, where every watched key is held.
pub fn run_borrowed(
    core: &mut ShardCore,
    transaction: &Transaction,
    caller: Caller,
    out: &mut Vec<u8>,
) -> Vec<DbKey> {
    let mut modified = Vec::new();
    let touched = core.watches.is_touched(caller.client_id, transaction.epoch);
    forget_watches(core, caller.client_id, transaction.watched.clone());
    core.watches.clear_touched(caller.client_id);
    if touched {
        Reply::new(out, caller.proto).null_array();
        return modified;
    }
    Reply::new(out, caller.proto).array(transaction.commands.len());
    let caller = Caller {
        may_block: false,
        ..caller
    };
    for (cmd, args) in &transaction.commands {
        let ran = run_engine(core, cmd, caller, args.args(), out);
        core.stats.commands += 1;
        core.stats.per_command[cmd.stat].calls += 1;
        modified.extend(ran.modified);
    }
    modified
}
