//! Work that crosses shards (forward mode): requests travel to the shard that owns
//! their keys and replies come back, over glommio's lock-free SPSC channels.
//!
//! Messages are batched: everything one loop iteration produced for a shard goes
//! as one message (one message per pipeline batch, not per command: a message
//! costs about as much as a GET). Each message is followed by a write to the
//! target's doorbell eventfd, which the target's ring is always reading, so a shard
//! blocked in `io_uring_enter` wakes up for it.
//!
//! A request carries its commands as parsed arguments (an [`ArgsBatch`], never
//! re-encoded as RESP and parsed again; while replicas are fed, a command that
//! came as a canonical multibulk carries its request's bytes with them, which
//! the owner's replication stream copies whole: [`Outbox::request_whole`]) and a
//! [`Tag`] per command naming the connection, the held reply slot, the part it
//! fills and the client context the command runs with (database, protocol,
//! no-touch, client id). The owner may defer an answer (a blocked command); the
//! origin's held slot is released by the answer, and a departed client's parked
//! command is dropped by a [`Control::Cancel`]. Channels never lose a message: a
//! full channel keeps the message in the sender's backlog until the next loop
//! iteration.
//!
//! The channels themselves (their ends, the doorbells, the backlog, a wait on
//! this thread for another shard's answer) are `channels.rs`, re-exported here,
//! so callers name `mesh::forward::...` as before.

use crate::config::change::ConfigChange;
use crate::mesh::lending::{self, LendRequest, Lent, WatchRequest};
use crate::mesh::queries::ClientQuery;
use crate::messaging::pubsub::{Kind, MessageBatch};
use ruvio_resp::{Args, ArgsBatch};

pub use super::channels::{
    can_send_now, install_mesh, lend_now, message_counts, position_for, request_now, ring,
    send_now, with_mesh, Mesh, MeshPlan, POSITIONS_SHARDS_MIN,
};

/// Messages in flight between two shards.
pub const CHANNEL_MESSAGES_MAX: usize = 1024;

/// Messages a shard may hold back for full channels before it stops taking new
/// client input: a channel full means its receiver is behind, and reading more
/// requests would only grow the backlog. Replies and control messages keep flowing
/// (nothing is dropped), clients' unread bytes wait in their sockets (TCP
/// back-pressure), and input is taken again once the backlog is below this. Each
/// loop iteration adds at most a few messages per peer, so a quarter of a channel
/// is several iterations of slack.
pub const MESH_BACKLOG_MESSAGES_MAX: usize = CHANNEL_MESSAGES_MAX / 4;

/// A reply batch this large is sent at once: 64 forwarded GETs of 1 MiB values made
/// one 64 MiB batch, held by the receiver until it had copied every reply out.
pub const REPLY_BATCH_BYTES: usize = 256 << 10;

/// A new batch's bytes start at most this large: sized for the last one's small
/// commands or replies, not for a past batch of large ones (those grow as they come).
const PRESIZE_BYTES_MAX: usize = 16 << 10;

/// Who a forwarded command's reply belongs to, and the client context it runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tag {
    pub conn: u32,
    pub gen: u32,
    pub seq: u64,
    pub part: u16,
    pub db: u16,
    pub resp3: bool,
    pub no_touch: bool,
    /// The client came in on the TLS port (a parked command's `-MOVED` when
    /// its slot leaves the node names the port its transport is told).
    pub tls: bool,
    pub client_id: u64,
    /// False for a command of EXEC's queue: it answers at once instead of blocking.
    pub may_block: bool,
    /// The client's CLIENT TRACKING bits for this command (`net::conn::tracking_command`).
    pub tracking: u8,
    /// The command travels whole (not a part of a split or gathered one): its
    /// owner times it and logs it (see `observability`).
    pub whole: bool,
    /// On the way back, for a part of a split or gathered command: the time the
    /// shard that ran it took (ns, at most `u32::MAX`), added to the command's
    /// record at its origin (`observability::Awaited`); 0 on the way out.
    pub ran_ns: u32,
    /// The command's row as its origin resolved it, by its statistics slot
    /// plus one (`Registry::row`), so the owner does not look it up and resolve
    /// it again; 0 when the origin did not resolve it (a part of a split or
    /// every-shard command: the owner looks its name up).
    pub row: u16,
}

// The part's time, the row and the transport fill the tag's padding: a tag is
// still 40 bytes.
const _: () = assert!(std::mem::size_of::<Tag>() <= 40);

impl Tag {
    /// The tag of part `part` of held reply `seq` of `client` (connection `who`):
    /// it does not block and carries no tracking bits (a forwarded command of
    /// the client sets those: [`Tag::for_command`]).
    pub fn for_client(
        client: &crate::net::conn::ClientState,
        who: (u32, u32),
        seq: u64,
        part: u16,
    ) -> Tag {
        Tag {
            conn: who.0,
            gen: who.1,
            seq,
            part,
            db: client.db as u16,
            resp3: client.proto == ruvio_resp::Protocol::Resp3,
            no_touch: client.no_touch,
            tls: client.tls,
            client_id: client.id,
            may_block: false,
            tracking: 0,
            whole: false,
            ran_ns: 0,
            row: 0,
        }
    }

    /// The tag of a command of `client` (connection `who`) forwarded as part
    /// `part` of held reply `seq`: it may block unless it is in EXEC's queue,
    /// and carries the client's CLIENT TRACKING bits for it.
    #[inline]
    pub fn for_command(
        client: &crate::net::conn::ClientState,
        who: (u32, u32),
        seq: u64,
        part: u16,
    ) -> Tag {
        Tag {
            may_block: !client.in_exec,
            tracking: client.tracking.command_bits(),
            ..Tag::for_client(client, who, seq, part)
        }
    }

    /// The client context a forwarded command of a client of shard `from` runs
    /// with, read off its tag.
    #[inline]
    pub fn caller(&self, from: usize) -> crate::net::caller::Caller {
        crate::net::caller::Caller {
            client_id: self.client_id,
            db: self.db as usize,
            proto: if self.resp3 {
                ruvio_resp::Protocol::Resp3
            } else {
                ruvio_resp::Protocol::Resp2
            },
            no_touch: self.no_touch,
            may_block: self.may_block,
            borrowing: false,
            tracking: crate::net::caller::Tracked {
                bits: self.tracking,
                shard: from,
            },
        }
    }

    /// This tag on its way back from a part that ran `ns` (when timed).
    pub fn ran(self, ns: Option<u64>) -> Tag {
        Tag {
            ran_ns: ns.map_or(0, |ns| ns.min(u64::from(u32::MAX)) as u32),
            ..self
        }
    }
}

/// Commands for one shard, from one shard.
#[derive(Debug, Default)]
pub struct RequestBatch {
    pub from: usize,
    /// The commands, one per tag.
    pub commands: ArgsBatch,
    pub tags: Vec<Tag>,
    /// The buffers of a reply batch the receiver sent and this batch's sender
    /// emptied, going back for the receiver's next reply batch to it (see
    /// [`Spare`]).
    pub spare: Option<Box<Spare>>,
}

/// A reply batch's buffers, emptied: its bytes and its tags.
pub type ReplyBuffers = (Vec<u8>, Vec<(Tag, u32)>);

/// Emptied buffers going back to the shard that sent them, in one box that shuttles
/// between two shards with their batches: a request batch's buffers ride back with the
/// replies to it, a reply batch's with the next requests, and the box itself goes back
/// and forth, so that a steady exchange between two shards allocates nothing per round
/// trip (`Outbox::send_back`, `recycle`, `keep_spare`). Boxed, as a batch inline made
/// every message 80 bytes larger and each move of one a `memcpy` (435 instructions a
/// forwarded GET more, more than the allocations it saved).
#[derive(Debug, Default)]
pub struct Spare {
    /// The shard at the other end, set where the box arrives.
    pub shard: usize,
    /// A request batch the other shard ran, emptied.
    pub requests: Option<RequestBatch>,
    /// A reply batch's bytes and tags the other shard delivered, emptied.
    pub replies: Option<ReplyBuffers>,
}

/// Replies going back; `tags[i].1` is the length of reply i in `replies`.
#[derive(Debug, Default)]
pub struct ReplyBatch {
    pub replies: Vec<u8>,
    pub tags: Vec<(Tag, u32)>,
    /// CLIENT TRACKING: invalidations parts of split writes owe, for their
    /// origin to deliver in key order (see `tracking`); they travel with or
    /// before their part's reply. Empty (no allocation) unless someone tracks.
    pub owed: Vec<PartOwed>,
    /// A request batch the sender of these replies ran, emptied, going back to
    /// the shard that sent it for its next batch, in the box that shuttles
    /// between the two ([`Spare`]). Rides along, never sent alone.
    pub spare: Option<Box<Spare>>,
}

impl ReplyBatch {
    fn is_empty(&self) -> bool {
        self.tags.is_empty() && self.owed.is_empty()
    }
}

/// An invalidation a part of a split write (MSET, DEL, UNLINK over several
/// shards) owes, sent to the command's origin: part `tag.part` of reply slot
/// `tag.seq` of connection `(tag.conn, tag.gen)`, the `index`-th key of that
/// part, for a client of `shard`.
#[derive(Debug)]
pub struct PartOwed {
    pub tag: Tag,
    pub index: u16,
    pub shard: usize,
    pub invalidation: Invalidation,
}

/// One message between shards.
#[derive(Debug)]
pub enum ShardMsg {
    Requests(RequestBatch),
    Replies(ReplyBatch),
    Config(ConfigChange),
    Control(Control),
    /// A coordinator asks for keys (see [`crate::mesh::lending`]).
    Lend(LendRequest),
    /// An owner lends them; `waited`: a command is parked on one of them there
    /// (a blocked client), so they go home after the command rather than stay
    /// in a batch (see `shard/lending/batch.rs`).
    Lent {
        ticket: u64,
        entries: Lent,
        waited: bool,
    },
    /// Coordinator `from` gives them back.
    GiveBack {
        from: usize,
        entries: Lent,
        records: lending::KeyRecords,
    },
    /// A coordinator's blocking command waits on these keys.
    Watch(WatchRequest),
    /// A watched key was written: try command `ticket` again.
    Wake {
        ticket: u64,
    },
    /// Stop watching for coordinator `from`'s command `ticket`.
    Unwatch {
        from: usize,
        ticket: u64,
    },
    /// Shard `from`'s INFO call `ticket` wants fresh counters (see [`crate::mesh::gather`]).
    Publish {
        from: usize,
        ticket: u64,
    },
    /// They are published.
    Published {
        ticket: u64,
    },
    /// CLIENT LIST or KILL from shard `from`: answer part `tag.part` of its reply.
    Clients {
        from: usize,
        tag: Tag,
        query: Box<ClientQuery>,
    },
    /// Pub/Sub messages to deliver (see [`crate::messaging::pubsub`]).
    Messages(MessageBatch<Tag>),
    /// MONITOR lines for this shard's monitors (see `crate::observability::monitor`).
    MonitorLines(Vec<u8>),
    /// WATCH from shard `from`: register the keys (db, client in `tag`) for watch
    /// epoch `epoch`, then answer `+OK` to `tag` (see [`crate::transactions::watch`]).
    WatchKeys {
        from: usize,
        tag: Tag,
        epoch: u64,
        keys: Vec<Vec<u8>>,
    },
    /// WATCH from a client of shard `from` answered by its busy hook (its script
    /// runs past the threshold, see `shard::busy`): register the keys of `db` for
    /// `client_id`'s watch epoch `epoch`, then count this owner off `left` and
    /// ring `from`, which answers `+OK` once every owner did.
    WatchKeysNow {
        from: usize,
        client_id: u64,
        epoch: u64,
        db: usize,
        keys: Vec<Vec<u8>>,
        left: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    },
    /// UNWATCH (or EXEC, DISCARD, a closed client): forget `client_id`'s watches
    /// of epochs below `below_epoch` (a WATCH of a later epoch registered first
    /// stays: see `transactions::watch::Watches::unregister`).
    UnwatchKeys {
        client_id: u64,
        below_epoch: u64,
        keys: Vec<lending::DbKey>,
    },
    /// A key client `client_id` watches in `epoch` was written.
    Touched {
        client_id: u64,
        epoch: u64,
    },
    /// Borrowed keys a coordinator wrote: touch their watchers, invalidate their
    /// readers (CLIENT TRACKING; not the writer's own reads when it is in NOLOOP
    /// mode: `noloop_writer`).
    Written {
        keys: Vec<lending::DbKey>,
        noloop_writer: Option<u64>,
        /// CLIENT TRACKING: the coordinator gathers the invalidations of its
        /// command `.1` (shard `.0`) to send them in write order: each key's
        /// place among the command's written keys is in `.2` (see `tracking`).
        gather: Option<Box<(usize, u64, Vec<u32>)>>,
    },
    /// CLIENT TRACKING: the invalidations a [`ShardMsg::Written`] with a
    /// gather owed, for coordinator command `ticket`: (the key's place among
    /// the command's written keys, the client's shard, the message).
    WrittenOwed {
        ticket: u64,
        owed: Vec<(u32, usize, Invalidation)>,
    },
    /// A transaction whose keys are all this shard's (see [`crate::mesh::owner_tx`]).
    Transaction(Box<crate::mesh::owner_tx::OwnerTx>),
    /// This shard's part of a transaction run in place (see [`crate::mesh::in_place`]),
    /// its answer, and the end of its hold.
    Part(Box<crate::mesh::in_place::Part>),
    PartRan(Box<crate::mesh::in_place::PartRan>),
    Release(crate::mesh::in_place::Release),
    /// A coordinator gives keys back under `always`: acknowledge its command
    /// `ticket` with [`ShardMsg::Durable`] once the records are on disk.
    GiveBackAcked {
        entries: Lent,
        records: lending::KeyRecords,
        from: usize,
        ticket: u64,
    },
    /// The records of command `ticket`'s keys are on this owner's disk.
    Durable {
        ticket: u64,
    },
    /// A script holding the script lock on shard `from` runs a command of every
    /// shard (KEYS, FLUSHALL ...): run it here and answer `ticket` with its reply
    /// (see [`crate::mesh::script_lock`]).
    RunNow {
        from: usize,
        ticket: u64,
        db: usize,
        resp3: bool,
        args: ruvio_resp::OwnedArgs,
    },
    /// The reply to a [`ShardMsg::RunNow`].
    RanNow {
        ticket: u64,
        reply: Vec<u8>,
    },
    /// CLIENT TRACKING: an invalidation for a client of the receiving shard (see
    /// `tracking`).
    Invalidate(Invalidation),
    /// CLIENT TRACKING: client `client_id` of shard `shard` read these keys of the
    /// receiving shard while they were lent out: remember them there.
    Remember {
        shard: usize,
        client_id: u64,
        keys: Vec<Vec<u8>>,
    },
    /// CLIENT TRACKING BCAST: client `client_id` of shard `shard` subscribes to
    /// `prefixes` (NOLOOP when `noloop`), or, with `None`, to nothing any more.
    BcastPrefixes {
        shard: usize,
        client_id: u64,
        noloop: bool,
        prefixes: Option<Vec<Vec<u8>>>,
    },
}

/// One invalidation message owed to a client (CLIENT TRACKING).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Invalidation {
    /// The client it is for: the tracking client, or, once [`redirected`](Self::redirected)
    /// is set, its redirection target.
    pub client_id: u64,
    /// The keys of one message; `None`: every key (a flush).
    pub keys: Option<Vec<Vec<u8>>>,
    /// From the table of keys read (default mode), not a BCAST prefix or a flush:
    /// a client now in BCAST mode ignores it, as Redis does.
    pub from_table: bool,
    /// Passed on by the tracking client's shard to its redirection target: the
    /// message's last element as RESP (the keys, or the tracking client's null).
    pub redirected: Option<Vec<u8>>,
    /// Relayed by a split write's origin (or a coordinator) for a client of a
    /// third shard: when its reader's shard may deliver it (see [`After`]).
    pub after: Option<After>,
}

/// Where an owner's channel to a third shard stood when the owner's part of a split
/// write (or its share of a coordinated write) caused an invalidation it sends back to
/// the command's origin for that shard (three shards or more): `sent` messages queued
/// on the channel from `owner`, counting a batch still being filled, so every reply of
/// a read it answered for that shard before the part is at or below it. The reader's
/// shard delivers the relayed message once it has taken `sent` messages from `owner` (a
/// channel is FIFO, so a count is a position in it); until then it waits, with every
/// message from the same origin behind it (see `tracking`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct After {
    pub owner: usize,
    pub sent: u64,
}

/// Requests about blocked clients.
#[derive(Clone, Debug)]
pub enum Control {
    /// Connection `(conn, gen)` of shard `from` went away: drop what it left parked.
    Cancel { from: usize, conn: u32, gen: u32 },
    /// A replica with a log: shard `from` (0) applied the stream up to `mark`;
    /// the commands it forwarded before are ahead of this in the channel (see
    /// `persistence::stream_mark`).
    StreamMark {
        from: usize,
        mark: Box<crate::persistence::stream_mark::StreamMark>,
    },
    /// A replica's shard `from` (0) paused its primary's stream for a full
    /// sync of a replica of its own: the commands it forwarded before are
    /// ahead of this in the channel, so this shard may cut now.
    ChainCut { from: usize },
}

/// What this shard will send to each other shard at the end of the loop iteration.
#[derive(Debug, Default)]
pub struct Outbox {
    /// This shard, and how many there are (a broadcast goes to every other one).
    me: usize,
    shards: usize,
    requests: Vec<RequestBatch>,
    replies: Vec<ReplyBatch>,
    /// Messages for one shard each (configuration, control, lending), each queued
    /// behind the batches built for that shard before it.
    direct: Vec<(usize, ShardMsg)>,
    /// Pub/Sub messages for each shard (see [`crate::messaging::pubsub`]).
    messages: Vec<MessageBatch<Tag>>,
    /// MONITOR lines for each shard, shipped ahead of the rest: a script's EVAL
    /// line reaches a monitor before the lines of the calls it makes there.
    monitor_lines: Vec<Vec<u8>>,
    /// Per shard: the messages in `direct` for it (each flushed batch
    /// counted), from [`POSITIONS_SHARDS_MIN`] shards on.
    direct_queued: Vec<u64>,
    /// Per shard, from [`POSITIONS_SHARDS_MIN`] shards on: the messages ever
    /// taken out of this outbox for it (where its channel stands, but for
    /// [`request_now`]'s, counted by the mesh).
    shipped: Vec<u64>,
    /// Per shard: an emptied request batch it sent back, for the next batch to it.
    spare_requests: Vec<Option<RequestBatch>>,
    /// Per shard: an emptied reply batch's buffers it sent back, for the next
    /// reply batch to it.
    spare_replies: Vec<Option<ReplyBuffers>>,
    /// Per shard: the box ([`Spare`]) that goes to it with the next request batch.
    spare_boxes: Vec<Option<Box<Spare>>>,
}

impl Outbox {
    /// The outbox of shard `me` of `shards`.
    pub fn new(me: usize, shards: usize) -> Outbox {
        Outbox {
            me,
            shards,
            ..Outbox::default()
        }
    }

    /// Room for batches to `shards` shards. Checked on every queued request
    /// and reply, so the check is inlined and the growth (once per shard) is
    /// not: the growth inlined made each call save and restore a large frame
    /// (about 25 instructions a call, four calls a forwarded command).
    #[inline(always)]
    fn ensure(&mut self, shards: usize) {
        if self.requests.len() < shards {
            self.grow(shards);
        }
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, shards: usize) {
        self.requests.resize_with(shards, Default::default);
        self.replies.resize_with(shards, Default::default);
        self.direct_queued.resize(shards, 0);
        self.shipped.resize(shards, 0);
        self.spare_requests.resize_with(shards, Default::default);
        self.spare_replies.resize_with(shards, Default::default);
        self.spare_boxes.resize_with(shards, Default::default);
    }

    /// How many shards there are.
    pub fn shards(&self) -> usize {
        self.shards
    }

    /// The messages for `shard` taken out of this outbox so far and those
    /// queued here: the direct ones and each batch being filled (each
    /// becomes one message).
    pub fn position_for(&self, shard: usize) -> u64 {
        let non_empty = |b: bool| u64::from(b);
        self.shipped.get(shard).copied().unwrap_or(0)
            + self.direct_queued.get(shard).copied().unwrap_or(0)
            + non_empty(self.requests.get(shard).is_some_and(|b| !b.tags.is_empty()))
            + non_empty(self.replies.get(shard).is_some_and(|b| !b.is_empty()))
            + non_empty(self.messages.get(shard).is_some_and(|b| !b.is_empty()))
            + non_empty(self.monitor_lines.get(shard).is_some_and(|l| !l.is_empty()))
    }

    /// Queue a command (given as its arguments) for `shard`.
    #[inline(always)]
    pub fn request<'a>(
        &mut self,
        shard: usize,
        from: usize,
        tag: Tag,
        args: impl ExactSizeIterator<Item = &'a [u8]>,
    ) {
        self.ensure(shard + 1);
        let batch = &mut self.requests[shard];
        batch.from = from;
        batch.commands.push(args);
        batch.tags.push(tag);
    }

    /// [`request`](Self::request) of a command as its client sent it: its
    /// request's bytes travel whole when it came as a canonical multibulk, so
    /// that the owner's replication stream copies them instead of encoding
    /// each argument again (`Feed::record_request`). Only while there are
    /// replicas to feed: the bytes are some longer than the arguments alone.
    pub fn request_whole(&mut self, shard: usize, from: usize, tag: Tag, args: Args<'_>) {
        self.ensure(shard + 1);
        let batch = &mut self.requests[shard];
        batch.from = from;
        batch.commands.push_request(args);
        batch.tags.push(tag);
    }

    /// Queue a configuration change for every other shard, behind the commands
    /// already queued for it (a pipelined command sent before CONFIG SET runs under
    /// the old value everywhere, as on one Redis).
    pub fn broadcast(&mut self, change: ConfigChange) {
        let me = self.me;
        for to in (0..self.shards).filter(|&to| to != me) {
            self.direct(to, ShardMsg::Config(change.clone()));
        }
    }

    /// Queue a control message for `shard`.
    pub fn control(&mut self, shard: usize, control: Control) {
        self.direct(shard, ShardMsg::Control(control));
    }

    /// Ask `shard` to lend keys.
    pub fn lend(&mut self, shard: usize, request: LendRequest) {
        self.direct(shard, ShardMsg::Lend(request));
    }

    /// Lend keys to coordinator `shard` (`waited`: see [`ShardMsg::Lent`]).
    pub fn lent(&mut self, shard: usize, ticket: u64, entries: Lent, waited: bool) {
        let message = ShardMsg::Lent {
            ticket,
            entries,
            waited,
        };
        self.direct(shard, message);
    }

    /// Give borrowed keys back to `shard`.
    pub fn give_back(&mut self, shard: usize, entries: Lent, records: lending::KeyRecords) {
        let from = self.me;
        let message = ShardMsg::GiveBack {
            from,
            entries,
            records,
        };
        self.direct(shard, message);
    }

    /// Ask `shard` to watch keys for a blocking command.
    pub fn watch(&mut self, shard: usize, request: WatchRequest) {
        self.direct(shard, ShardMsg::Watch(request));
    }

    /// Tell coordinator `shard` to try command `ticket` again.
    pub fn wake(&mut self, shard: usize, ticket: u64) {
        self.direct(shard, ShardMsg::Wake { ticket });
    }

    /// Tell `shard` to stop watching for command `ticket` of coordinator `from`.
    pub fn unwatch(&mut self, shard: usize, from: usize, ticket: u64) {
        self.direct(shard, ShardMsg::Unwatch { from, ticket });
    }

    /// Ask `shard` to publish its counters for INFO call `ticket` of shard `from`.
    pub fn publish(&mut self, shard: usize, from: usize, ticket: u64) {
        self.direct(shard, ShardMsg::Publish { from, ticket });
    }

    /// Tell `shard` its INFO call `ticket` has this shard's counters.
    pub fn published(&mut self, shard: usize, ticket: u64) {
        self.direct(shard, ShardMsg::Published { ticket });
    }

    /// Ask `shard` about its clients for shard `from`'s CLIENT LIST or KILL.
    pub fn clients(&mut self, shard: usize, from: usize, tag: Tag, query: ClientQuery) {
        let query = Box::new(query);
        self.direct(shard, ShardMsg::Clients { from, tag, query });
    }

    /// Register a WATCH with `shard`, the owner of `keys` (see [`crate::transactions::watch`]).
    pub fn watch_keys(
        &mut self,
        shard: usize,
        from: usize,
        tag: Tag,
        epoch: u64,
        keys: Vec<Vec<u8>>,
    ) {
        self.direct(
            shard,
            ShardMsg::WatchKeys {
                from,
                tag,
                epoch,
                keys,
            },
        );
    }

    /// Tell owner `shard` to forget `client_id`'s watches of `keys`.
    pub fn unwatch_keys(
        &mut self,
        shard: usize,
        client_id: u64,
        below_epoch: u64,
        keys: Vec<lending::DbKey>,
    ) {
        let message = ShardMsg::UnwatchKeys {
            client_id,
            below_epoch,
            keys,
        };
        self.direct(shard, message);
    }

    /// Tell `shard` that a key its client `client_id` watches was written.
    pub fn touched(&mut self, shard: usize, client_id: u64, epoch: u64) {
        self.direct(shard, ShardMsg::Touched { client_id, epoch });
    }

    /// Tell owner `shard` which of its borrowed keys were written (by a client in
    /// NOLOOP mode: `noloop_writer`).
    pub fn written(
        &mut self,
        shard: usize,
        keys: Vec<lending::DbKey>,
        noloop_writer: Option<u64>,
        gather: Option<Box<(usize, u64, Vec<u32>)>>,
    ) {
        let message = ShardMsg::Written {
            keys,
            noloop_writer,
            gather,
        };
        self.direct(shard, message);
    }

    /// Answer coordinator `shard`'s gathering [`ShardMsg::Written`] for its
    /// command `ticket`.
    pub fn written_owed(
        &mut self,
        shard: usize,
        ticket: u64,
        owed: Vec<(u32, usize, Invalidation)>,
    ) {
        self.direct(shard, ShardMsg::WrittenOwed { ticket, owed });
    }

    /// Give borrowed keys back to `shard`, which acknowledges command `ticket` of
    /// shard `from` once their records are on disk.
    pub fn give_back_acked(
        &mut self,
        shard: usize,
        entries: Lent,
        records: lending::KeyRecords,
        from: usize,
        ticket: u64,
    ) {
        let message = ShardMsg::GiveBackAcked {
            entries,
            records,
            from,
            ticket,
        };
        self.direct(shard, message);
    }

    /// Tell coordinator `shard` that the records of its command `ticket` are on disk.
    pub fn durable(&mut self, shard: usize, ticket: u64) {
        self.direct(shard, ShardMsg::Durable { ticket });
    }

    /// Send `invalidation` to its client on `shard`, behind the replies queued for
    /// that shard so far (a read's reply never comes after the invalidation of
    /// what it read).
    pub fn invalidate(&mut self, shard: usize, invalidation: Invalidation) {
        self.direct(shard, ShardMsg::Invalidate(invalidation));
    }

    /// Ask owner `owner` to remember that client `client_id` of `shard` read
    /// `keys` (borrowed from it): sent before the keys go home, so no write of
    /// the owner comes between the read and the remembering.
    pub fn remember(&mut self, owner: usize, shard: usize, client_id: u64, keys: Vec<Vec<u8>>) {
        let message = ShardMsg::Remember {
            shard,
            client_id,
            keys,
        };
        self.direct(owner, message);
    }

    /// Tell every other shard of a client's BCAST prefixes (`None`: it has none
    /// any more).
    pub fn bcast_prefixes(&mut self, client_id: u64, noloop: bool, prefixes: Option<&[Vec<u8>]>) {
        let me = self.me;
        for to in (0..self.shards).filter(|&to| to != me) {
            let message = ShardMsg::BcastPrefixes {
                shard: me,
                client_id,
                noloop,
                prefixes: prefixes.map(<[Vec<u8>]>::to_vec),
            };
            self.direct(to, message);
        }
    }

    /// Answer shard `shard`'s [`ShardMsg::RunNow`] `ticket` with `reply`.
    pub fn ran_now(&mut self, shard: usize, ticket: u64, reply: Vec<u8>) {
        self.direct(shard, ShardMsg::RanNow { ticket, reply });
    }

    /// Queue `message` for `shard` after everything queued for it so far: the
    /// batches built until now go first, so a lend request never overtakes the
    /// commands a client sent before its cross-shard command.
    fn direct(&mut self, shard: usize, message: ShardMsg) {
        self.ensure(shard + 1);
        let before = self.direct.len();
        if !self.requests[shard].tags.is_empty() {
            let batch = std::mem::take(&mut self.requests[shard]);
            self.direct.push((shard, ShardMsg::Requests(batch)));
        }
        if !self.replies[shard].is_empty() {
            let batch = std::mem::take(&mut self.replies[shard]);
            self.direct.push((shard, ShardMsg::Replies(batch)));
        }
        self.direct.push((shard, message));
        if self.shards >= POSITIONS_SHARDS_MIN {
            self.direct_queued[shard] += (self.direct.len() - before) as u64;
        }
    }

    /// Queue transaction `tx` for its owner `shard`, behind the commands queued for
    /// it so far.
    pub fn transaction(&mut self, shard: usize, tx: crate::mesh::owner_tx::OwnerTx) {
        self.direct(shard, ShardMsg::Transaction(Box::new(tx)));
    }

    /// Send `shard` a message of a transaction run in place ([`crate::mesh::in_place`]).
    pub fn in_place(&mut self, shard: usize, message: ShardMsg) {
        self.direct(shard, message);
    }

    /// Queue a Pub/Sub message for `shard`'s subscribers; with a tag, `shard`
    /// answers how many received it.
    pub fn message(
        &mut self,
        shard: usize,
        tag: Option<Tag>,
        kind: Kind,
        channel: &[u8],
        message: &[u8],
    ) {
        if self.messages.len() <= shard {
            self.messages.resize_with(shard + 1, Default::default);
        }
        let batch = &mut self.messages[shard];
        batch.from = self.me;
        batch.push(tag, kind, channel, message);
    }

    /// Queue MONITOR lines for `shard`'s monitors.
    pub fn monitor_lines(&mut self, shard: usize, lines: &[u8]) {
        if self.monitor_lines.len() <= shard {
            self.monitor_lines.resize_with(shard + 1, Vec::new);
        }
        self.monitor_lines[shard].extend_from_slice(lines);
    }

    /// Move everything queued into `messages`, in the order it must arrive:
    /// MONITOR lines, the direct messages (each behind the batches built before
    /// it), then each shard's pending request and reply batches.
    pub fn take_messages(&mut self, messages: &mut impl Extend<(usize, ShardMsg)>) {
        if self.shards >= POSITIONS_SHARDS_MIN {
            self.count_shipped();
        }
        for (to, lines) in self.monitor_lines.iter_mut().enumerate() {
            if !lines.is_empty() {
                messages.extend([(to, ShardMsg::MonitorLines(std::mem::take(lines)))]);
            }
        }
        messages.extend(self.direct.drain(..));
        self.direct_queued.fill(0);
        // The next batches start at the size of these (a pipeline tends to be
        // followed by one like it): one allocation each instead of a run of
        // doublings per loop iteration (the buffers leave with their message).
        for to in 0..self.requests.len() {
            if !self.requests[to].tags.is_empty() {
                let last = &self.requests[to];
                let next = match self.spare_requests[to].take() {
                    Some(spare) => spare,
                    None => RequestBatch {
                        from: last.from,
                        commands: last.commands.empty_like(PRESIZE_BYTES_MAX),
                        tags: Vec::with_capacity(last.tags.len()),
                        spare: None,
                    },
                };
                let mut batch = std::mem::replace(&mut self.requests[to], next);
                if batch.spare.is_none() {
                    batch.spare = self.spare_boxes[to].take();
                }
                messages.extend([(to, ShardMsg::Requests(batch))]);
            }
            if !self.replies[to].is_empty() {
                let last = &self.replies[to];
                let (replies, tags) = match self.spare_replies[to].take() {
                    Some(spare) => spare,
                    None => (
                        Vec::with_capacity(last.replies.len().min(PRESIZE_BYTES_MAX)),
                        Vec::with_capacity(last.tags.len()),
                    ),
                };
                let next = ReplyBatch {
                    replies,
                    tags,
                    owed: Vec::new(),
                    spare: None,
                };
                let batch = std::mem::replace(&mut self.replies[to], next);
                messages.extend([(to, ShardMsg::Replies(batch))]);
            }
        }
        for (to, batch) in self.messages.iter_mut().enumerate() {
            if !batch.is_empty() {
                messages.extend([(to, ShardMsg::Messages(std::mem::take(batch)))]);
            }
        }
    }

    /// Count what [`take_messages`](Self::take_messages) is about to take.
    fn count_shipped(&mut self) {
        self.ensure(self.shards);
        for to in 0..self.shards {
            self.shipped[to] = self.position_for(to);
        }
    }

    /// Send request batch `batch`, run, back to the shard that sent it, emptied, with
    /// the next replies to it (nothing is sent for it alone). A batch that grew past
    /// [`PRESIZE_BYTES_MAX`] is dropped here: one pipeline of large values does not
    /// stay allocated between two shards for good. The box that came with it (`spare`,
    /// [`Spare`]) carries the batch back, or a new one when none came.
    pub fn send_back(&mut self, mut batch: RequestBatch, spare: Option<Box<Spare>>) {
        let shard = batch.from;
        if shard >= self.shards {
            return;
        }
        let kept =
            batch.tags.capacity() > 0 && batch.commands.capacity_bytes() <= PRESIZE_BYTES_MAX;
        if !kept && spare.is_none() {
            return;
        }
        let mut spare = spare.unwrap_or_default();
        if kept {
            batch.commands.clear();
            batch.tags.clear();
            batch.spare = None;
            spare.requests = Some(batch);
        }
        self.ensure(shard + 1);
        self.replies[shard].spare = Some(spare);
    }

    /// The box ([`Spare`]) shard `shard` sent, as it arrives: the next batches
    /// for `shard` reuse the buffers in it (a request batch's on the origin, a
    /// reply batch's on the owner); the box stays where it is for the buffers
    /// going back ([`keep_spare`](Self::keep_spare), [`send_back`](Self::send_back)).
    pub fn recycle(&mut self, shard: usize, spare: &mut Spare) {
        self.ensure(shard + 1);
        spare.shard = shard;
        if let Some(requests) = spare.requests.take() {
            let filling = &mut self.requests[shard];
            if filling.tags.is_empty() && filling.tags.capacity() == 0 {
                *filling = requests;
            } else {
                self.spare_requests[shard] = Some(requests);
            }
        }
        if let Some((bytes, tags)) = spare.replies.take() {
            let filling = &mut self.replies[shard];
            if filling.is_empty() && filling.tags.capacity() == 0 && filling.spare.is_none() {
                filling.replies = bytes;
                filling.tags = tags;
            } else {
                self.spare_replies[shard] = Some((bytes, tags));
            }
        }
    }

    /// The origin delivered reply batch `bytes`, `tags` that came in box `spare`: the
    /// buffers, emptied, go back to its sender with the next request batch to it, in
    /// the same box. Buffers past [`PRESIZE_BYTES_MAX`] are dropped (a pipeline of
    /// large replies does not stay allocated).
    pub fn keep_spare(
        &mut self,
        mut spare: Box<Spare>,
        mut bytes: Vec<u8>,
        mut tags: Vec<(Tag, u32)>,
    ) {
        let shard = spare.shard;
        if shard >= self.shards {
            return;
        }
        self.ensure(shard + 1);
        if bytes.capacity() > 0 && bytes.capacity() <= PRESIZE_BYTES_MAX && tags.capacity() > 0 {
            bytes.clear();
            tags.clear();
            spare.replies = Some((bytes, tags));
        }
        if self.spare_boxes[shard].is_none() {
            self.spare_boxes[shard] = Some(spare);
        }
    }

    /// Queue invalidations parts of split writes owe for their origin `shard`,
    /// ahead of (or with) the parts' replies.
    pub fn part_owed(&mut self, shard: usize, owed: impl Iterator<Item = PartOwed>) {
        self.ensure(shard + 1);
        self.replies[shard].owed.extend(owed);
    }

    /// Queue a reply for `shard`. A batch that has grown past [`REPLY_BATCH_BYTES`]
    /// goes out as a message of its own, so the receiver frees large replies as it
    /// takes them instead of holding the whole batch beside the copies it made. Inlined
    /// up to that test: every forwarded command's reply comes here.
    #[inline(always)]
    pub fn reply(&mut self, shard: usize, tag: Tag, bytes: &[u8]) {
        self.ensure(shard + 1);
        let batch = &mut self.replies[shard];
        if batch.replies.is_empty() && bytes.len() >= REPLY_BATCH_BYTES {
            // A large reply travels alone, in a buffer of its size (no doubling).
            batch.replies.reserve_exact(bytes.len());
        }
        batch.replies.extend_from_slice(bytes);
        batch.tags.push((tag, bytes.len() as u32));
        if batch.replies.len() >= REPLY_BATCH_BYTES {
            self.send_replies_now(shard);
        }
    }

    /// The reply batch for `shard` goes out now, ahead of the loop's end.
    #[cold]
    #[inline(never)]
    fn send_replies_now(&mut self, shard: usize) {
        let batch = std::mem::take(&mut self.replies[shard]);
        self.direct(shard, ShardMsg::Replies(batch));
    }
}

#[cfg(test)]
#[path = "forward_tests.rs"]
mod tests;
