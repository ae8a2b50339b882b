//! MULTI/EXEC's own data and the steps that touch only it: opening a
//! transaction, flagging it refused, a transaction on borrowed keys as the mesh
//! carries it ([`Transaction`]), and forgetting a client's watches (UNWATCH,
//! DISCARD, EXEC, a closed connection).
//!
//! Running a queue is the shard's (`shard/multi.rs`: queueing with its checks,
//! WATCH, the EXEC plan; `shard/exec_run.rs`: the queue run in turn or over
//! borrowed keys), because it runs commands on the shard's core and replies to
//! its connections; the queue itself is the connection's plain data
//! ([`crate::net::queued`], re-exported here). What forgetting watches touches of
//! the shard is [`Unwatching`], which the shard implements.

use crate::cluster::topology::Topology;
use crate::config::PortMode;
use crate::mesh::forward::Outbox;
use crate::mesh::lending::DbKey;
use crate::net::conn::ClientState;
use crate::transactions::watch::Watches;
use ruvio_engine::CmdError;

pub use crate::net::queued::{Commands, InTurn, Queued};

/// A transaction running on borrowed keys (see [`crate::mesh::lending`]).
#[derive(Debug)]
pub struct Transaction {
    pub commands: Commands,
    /// The watch epoch EXEC checks, and the watched keys to forget afterwards.
    pub epoch: u64,
    pub watched: Vec<DbKey>,
    /// It runs under the script lock: its scripts may borrow keys they did not
    /// declare while they run ([`crate::mesh::script_lock`]).
    pub locked: bool,
    /// The database its SELECTs leave the connection in, once it ran (a touched
    /// watch leaves it where it was).
    pub selects: Option<usize>,
    /// It holds a server command that needs the connection (CLIENT, CONFIG, INFO
    /// ...): it runs with the connection in hand (`shard::exec_run::ConnAccess`).
    pub with_conn: bool,
    /// It holds a SWAPDB: the keys it borrowed move between databases as it runs.
    pub swaps_dbs: bool,
}

/// Commands that run at once inside MULTI instead of being queued (Redis'
/// processCommand list).
pub(crate) fn runs_in_multi(name: &str) -> bool {
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

/// `MULTI`
pub fn multi(client: &mut ClientState) -> Result<(), CmdError> {
    if client.multi.is_some() {
        return Err(CmdError::MultiNested);
    }
    client.multi = Some(Queued::default());
    Ok(())
}

/// What forgetting a client's watches touches on its shard: the WATCH table,
/// the outbox to the owners of the others, the shard's id and the topology
/// (which shard owns a key). The shard implements it (`shard/multi.rs`).
pub trait Unwatching {
    fn unwatch_parts(&mut self) -> (&mut Watches, &mut Outbox, usize, &Topology);
}

/// `DISCARD`
pub fn discard(core: &mut impl Unwatching, client: &mut ClientState) -> Result<(), CmdError> {
    if client.multi.take().is_none() {
        return Err(CmdError::DiscardWithoutMulti);
    }
    unwatch(core, client);
    Ok(())
}

/// Forget every key the client watches and start a new watch epoch (UNWATCH,
/// DISCARD, EXEC, RESET, a closed connection).
pub fn unwatch(core: &mut impl Unwatching, client: &mut ClientState) {
    let watched = std::mem::take(&mut client.watching);
    client.watch_epoch += 1;
    forget_watches(core, client.id, client.watch_epoch, watched);
    core.unwatch_parts().0.clear_touched(client.id);
}

/// The watches client `client_id` ended while a script kept this shard busy
/// (its epoch moved on then, `shard::busy`): the owners forget `watched`, and
/// the touch of its old epoch goes.
pub fn forget_unwatched(
    core: &mut impl Unwatching,
    client_id: u64,
    below_epoch: u64,
    watched: Vec<DbKey>,
) {
    forget_watches(core, client_id, below_epoch, watched);
    core.unwatch_parts().0.clear_touched(client_id);
}

/// Tell the owners of `watched` to forget `client_id`'s watches of epochs below
/// `below_epoch`.
pub fn forget_watches(
    core: &mut impl Unwatching,
    client_id: u64,
    below_epoch: u64,
    watched: Vec<DbKey>,
) {
    let (watches, outbox, me, topo) = core.unwatch_parts();
    for (owner, keys) in by_owner(topo, me, watched) {
        if owner == me {
            watches.unregister(client_id, below_epoch, &keys);
        } else {
            outbox.unwatch_keys(owner, client_id, below_epoch, keys);
        }
    }
}

/// Group keys by the shard that owns them (all shard `me`'s unless forward mode).
pub fn by_owner(topo: &Topology, me: usize, keys: Vec<DbKey>) -> Vec<(usize, Vec<DbKey>)> {
    let mut groups: Vec<(usize, Vec<DbKey>)> = Vec::new();
    for (db, key) in keys {
        let owner = owner_of(topo, me, &key);
        match groups.iter_mut().find(|(o, _)| *o == owner) {
            Some((_, ks)) => ks.push((db, key)),
            None => groups.push((owner, vec![(db, key)])),
        }
    }
    groups
}

/// The shard whose keyspace holds `key`: its owner in forward mode, shard `me`
/// in per-shard mode (a key of another slot was refused before).
fn owner_of(topo: &Topology, me: usize, key: &[u8]) -> usize {
    match topo.mode {
        PortMode::Forward => topo.key_owner(key),
        _ => me,
    }
}
