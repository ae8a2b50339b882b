//! What a command on borrowed keys wrote, told to the keys' owners before the keys
//! go back (they touch the clients watching them and invalidate their readers),
//! and the tracking writers whose reply slots wait for the invalidations it owes
//! ([`HeldWriter`]). Apart from `mod.rs` because it is the tracking and WATCH side
//! of a borrowing, not its protocol.

use super::{DbKey, Lending};
use crate::cluster::topology::Topology;
use crate::mesh::forward::Outbox;
use crate::net::caller::Caller;
use crate::net::conn::Conn;
use crate::net::slab::Slab;
use ahash::AHashMap;

/// What telling the owners about written keys asks of the shard: its id, the
/// topology (whose keys), its outbox, and CLIENT TRACKING's side of a gathered
/// write (the invalidations the shard owes itself for the keys, then the gather
/// started with them). Defined here and implemented by the shard
/// (`shard/lending/mod.rs`), as tracking sits above the mesh; called on the
/// concrete core, never through `dyn`.
pub trait Reporting {
    /// This shard's index.
    fn shard_id(&self) -> usize;
    /// Which shard owns which key.
    fn topology(&self) -> &Topology;
    /// The messages to the other shards.
    fn outbox(&mut self) -> &mut Outbox;
    /// How many invalidations this shard owes now (a gathered write's `since`).
    fn invalidations_owed(&self) -> usize;
    /// Command `ticket` of this shard, while some client tracks, wrote `keys`
    /// (in the order written), `owners` of them other shards': take what this
    /// shard owes for them since `since` (the owed list's length before the
    /// command ran) and start the write's gather with it and the tracking
    /// writers `held` (see `tracking::split`).
    fn gather_invalidations(
        &mut self,
        conns: &mut Slab<Conn>,
        ticket_since: (u64, usize),
        keys: &[&[u8]],
        owners: usize,
        held: Vec<HeldWriter>,
    );
}

/// The client whose own reads its writes do not invalidate (CLIENT TRACKING NOLOOP).
pub fn noloop_writer(caller: &Caller) -> Option<u64> {
    let noloop = caller.tracking.bits & crate::net::conn::tracking_command::NOLOOP != 0;
    noloop.then_some(caller.client_id)
}

/// A tracking writer's reply slot kept until its write's gather ends, so that
/// what the write owes it goes right after its reply, before the replies of
/// the commands it pipelined behind (`places`: where its writes stand among
/// the write's keys). Not for a client that does not track or redirects (its
/// stream has no invalidations), nor for a command that wrote nothing. A
/// command answered at once (`conns`: `None`, its connection is out of the
/// slab) is kept by its dispatcher if the gather waits for owners
/// ([`keep_answered_at_once`]).
pub fn hold_writer(
    conns: Option<&mut Slab<Conn>>,
    (conn, seq): ((u32, u32), u64),
    caller: &Caller,
    places: std::ops::Range<u32>,
) -> Option<HeldWriter> {
    use crate::net::conn::tracking_command::{REDIRECTED, TRACKING};
    if caller.tracking.bits & (TRACKING | REDIRECTED) != TRACKING || places.is_empty() {
        return None;
    }
    if let Some(conns) = conns {
        if !conns.get_mut(conn.0, conn.1)?.replies.keep(seq) {
            return None;
        }
    }
    Some(HeldWriter {
        who: conn,
        seq,
        client_id: caller.client_id,
        places,
    })
}

/// The command just answered at once (its reply is for the caller of
/// [`start`] or [`start_transaction`] to fill in) wrote keys whose owners
/// have not said yet what it owes its tracking client: the caller keeps the
/// slot ([`ReplyQueue::keep`]) before it fills it, and `tracking` lets it go.
pub fn keep_answered_at_once(lending: &mut Lending) -> bool {
    std::mem::take(&mut lending.keep_at_once)
}

/// A tracking writer of a coordinated write (the command, or a transaction
/// that rode on its keys) whose reply slot is kept held (an extra part,
/// [`ReplyQueue::keep`]) until the write's gather ends (`tracking`): what the write owes the
/// writer then goes right after its reply, before the replies of the commands
/// it pipelined behind it, as Redis 7's `tracking_pending_keys`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldWriter {
    /// Its connection and reply slot.
    pub who: (u32, u32),
    pub seq: u64,
    pub client_id: u64,
    /// Its writes' places among the gather's written keys.
    pub places: std::ops::Range<u32>,
}

/// A command on borrowed keys gathering its invalidations (see
/// [`report_written`]).
pub struct Gathering<'a> {
    /// The command's ticket.
    pub ticket: u64,
    /// The owed list's length before it ran.
    pub since: usize,
    /// Its tracking writers whose reply slots wait for the gather.
    pub held: Vec<HeldWriter>,
    pub conns: &'a mut Slab<Conn>,
}

/// Tell the owners of borrowed keys that were written, so they touch the clients
/// watching them and invalidate their readers (before the keys go back:
/// messages arrive in order). Without `gather`, a key the shard's batch of
/// locked commands keeps is reported when the batch ends instead (once).
///
/// With `gather` (a command of this shard while some client tracks: the
/// invalidations this shard owed since `since` for the keys it wrote itself
/// and those the owners owe) the invalidations go out in the order the keys
/// were written, once every owner answered (see `tracking`); a key a batch
/// keeps is reported now too (one message per command instead of one per
/// batch), so that its invalidations take their place among the others.
/// Returns whether the gather waits for owners.
pub fn report_written(
    core: &mut impl Reporting,
    modified: &[DbKey],
    noloop_writer: Option<u64>,
    gather: Option<Gathering<'_>>,
) -> bool {
    let gathering = gather.is_some();
    let mut written: AHashMap<usize, (Vec<DbKey>, Vec<u32>)> = AHashMap::new();
    for (at, (db, key)) in modified.iter().enumerate() {
        let owner = core.topology().key_owner(key);
        let report = owner != core.shard_id()
            && (gathering || !crate::mesh::script_lock::defer_written(*db, key, noloop_writer));
        if report {
            let (keys, places) = written.entry(owner).or_default();
            keys.push((*db, key.clone()));
            if gathering {
                places.push(at as u32);
            }
        }
    }
    let ticket = gather.as_ref().map(|g| g.ticket);
    if let Some(g) = gather {
        let keys: Vec<&[u8]> = modified.iter().map(|(_, k)| k.as_slice()).collect();
        let owners = written.len();
        core.gather_invalidations(g.conns, (g.ticket, g.since), &keys, owners, g.held);
    }
    let me = core.shard_id();
    let waits = ticket.is_some() && !written.is_empty();
    for (owner, (keys, places)) in written {
        let gather = ticket.map(|ticket| Box::new((me, ticket, places)));
        core.outbox().written(owner, keys, noloop_writer, gather);
    }
    waits
}
