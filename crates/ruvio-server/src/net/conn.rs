//! One client connection: its read buffer and its client-visible state. Its replies
//! go through the reply queue ([`super::reply_queue`]), re-exported here so a
//! connection's users name one module.

use ruvio_resp::{CommandParser, Protocol};

pub use super::reply_queue::{
    merge_into, Merge, ReplyQueue, HELD_BYTES_BUDGET, HELD_REPLIES_MAX, SCAN_SHARD_SHIFT,
};
pub(crate) use super::reply_queue::{merge_scan, scan_cursor, scan_parts, weighted_pick};

/// Bytes a connection's input buffer starts with and grows by.
pub const INPUT_CHUNK_BYTES: usize = 16 * 1024;
/// Stop reading from a client whose unsent replies exceed this (it is not reading);
/// the commands of a read that are not run yet wait too (see `dispatch::process_input`).
pub const OUTPUT_PAUSE_BYTES: usize = 64 << 20;

/// What the client can see and change about its connection (CLIENT, HELLO, SELECT).
#[derive(Debug)]
pub struct ClientState {
    pub id: u64,
    pub name: Vec<u8>,
    pub lib_name: Vec<u8>,
    pub lib_ver: Vec<u8>,
    pub db: usize,
    pub proto: Protocol,
    pub authenticated: bool,
    /// The ACL user it runs as (see [`crate::acl::Session`]).
    pub acl: crate::acl::Session,
    pub no_evict: bool,
    pub no_touch: bool,
    pub reply_mode: ReplyMode,
    /// Pub/Sub frames (confirmations, the client's own messages) that the running
    /// command wrote while [`ReplyMode::silences`] drops its reply: Redis sends them
    /// all the same, so the dispatcher appends them after dropping the rest.
    pub pushes: Vec<u8>,
    pub readonly: bool,
    /// ASKING: the next command may use a slot this node is importing
    /// (`cluster-enabled yes`; cleared after it, outside MULTI).
    pub asking: bool,
    pub peer: String,
    pub local: String,
    pub created_ms: u64,
    pub last_cmd_ms: u64,
    pub last_cmd: &'static str,
    /// A command that may write ran since the last WAIT read the offset.
    pub wrote: bool,
    /// The replication offset its writes reached, and each shard's own for
    /// replicas on shard links, as the first WAIT after them read it (Redis's
    /// `c->woff`: later WAITs wait for no one else's writes); `None` before
    /// its first write.
    pub woff: Option<(u64, Vec<u64>)>,
    pub fd: i32,
    /// Set by QUIT, protocol errors and CLIENT KILL: flush, then close.
    pub closing: bool,
    /// Killed by another client (CLIENT KILL): close without waiting for replies
    /// still outstanding (a blocked command's), as Redis frees such a client.
    pub killed: bool,
    /// Holds a command that waits for the end of CLIENT PAUSE (see [`crate::shard::pause`]).
    pub paused: bool,
    /// Waiting for a blocking command's answer: no later command runs until then.
    pub blocked: Option<BlockedOn>,
    /// Pub/Sub subscriptions (see [`crate::messaging::pubsub`]).
    pub subs: crate::net::subscriptions::Subscriptions,
    /// Since when the output has been over the soft `client-output-buffer-limit`
    /// (0: it is not); see [`crate::net::outlimit`].
    pub obuf_soft_since_ms: u64,
    /// Between MULTI and EXEC: the queued commands (see [`crate::transactions::multi`]).
    pub multi: Option<crate::net::queued::Queued>,
    /// Its buffers at the start of its current read batch (see [`BufferUse`]).
    pub batch_buffers: BufferUse,
    /// Keys this client watches, `(db, key)`, and the epoch of those watches.
    pub watching: Vec<(usize, Vec<u8>)>,
    pub watch_epoch: u64,
    /// Running EXEC's queue: commands do not block.
    pub in_exec: bool,
    /// The commands of an EXEC still to run after a command that waits for
    /// another shard (see `shard::exec_run::continue_exec`).
    pub exec_rest: Option<crate::net::queued::InTurn>,
    /// A transaction of this client runs on borrowed keys without blocking it:
    /// the coordinating op's ticket and the held slot of the client's last
    /// transaction on it (see [`crate::shard::lending::must_wait_for_transaction`]).
    pub borrowing_tx: Option<(u64, u64)>,
    /// This client's transactions running in place, oldest first: each
    /// coordinating op's ticket and its EXEC's held slot (see
    /// [`crate::shard::in_place::must_wait`]).
    pub in_place_txs: Vec<(u64, u64)>,
    /// Came in on the TLS port (CLUSTER SLOTS and MOVED name TLS ports to it
    /// under `tls-cluster yes`).
    pub tls: bool,
    /// In MONITOR mode: it receives a line for every command the server runs
    /// (see [`crate::observability::monitor`]).
    pub monitor: bool,
    /// The primary's replication stream (see `replication`): its replies are
    /// dropped, its writes allowed, the bytes it consumed counted as the offset.
    pub master: bool,
    /// The source's connection of a whole-slot migration into this node
    /// (CLUSTER SYNCSLOTS START, `cluster/slot_migration.rs`): its commands
    /// run here whatever their slot, until FINISH.
    pub slot_import: bool,
    /// The master client of one shard's own link (`replication::shard_links`):
    /// its offset is its link's, and commands for every shard run on its own.
    pub shard_link: bool,
    /// A replica of this server: what its handshake said, and whether PSYNC or
    /// SYNC made the connection a replica's (see `replication::primary`).
    pub replica: ReplicaPeer,
    /// CLIENT TRACKING: the mode and redirection (the tracking subsystem acts on it).
    pub tracking: TrackingMode,
}

/// What a replica told its primary before PSYNC (REPLCONF), and that it is one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplicaPeer {
    /// PSYNC or SYNC made this connection a replica's (flag `S`, TYPE replica).
    pub attached: bool,
    /// `REPLCONF listening-port`.
    pub listening_port: u16,
    /// `REPLCONF ip-address` (its `replica-announce-ip`): the address INFO
    /// and ROLE show for it instead of the connection's.
    pub announced_ip: Option<Box<str>>,
    /// `REPLCONF capa eof`: it takes the diskless `$EOF:` form.
    pub capa_eof: bool,
    /// `REPLCONF capa psync2`: `+CONTINUE` names the replication ID.
    pub capa_psync2: bool,
    /// `REPLCONF ruvio-shard <i>/<n>` (Ruvio's own, forward mode): this is a
    /// Ruvio replica's link for shard i, the shard this connection is on, and
    /// follows that shard's own history (`replication::history`).
    pub shard_link: bool,
}

/// A client's CLIENT TRACKING mode, as Redis' `CLIENT_TRACKING*` flags and its
/// redirection. Kept on the connection (not in the tracking subsystem) because every
/// command reads it: [`TrackingMode::command_bits`] is what a command carries to the
/// shard that runs it, and a client that does not track carries 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrackingMode {
    /// [`tracking_flags`] bits.
    pub flags: u8,
    /// The client id invalidations go to (0: this connection).
    pub redirect: u64,
}

/// The bits of [`TrackingMode::flags`].
pub mod tracking_flags {
    /// Tracking is on.
    pub const ON: u8 = 1;
    /// BCAST: invalidations by prefix, nothing remembered.
    pub const BCAST: u8 = 1 << 1;
    /// OPTIN: only reads after CLIENT CACHING YES are remembered.
    pub const OPTIN: u8 = 1 << 2;
    /// OPTOUT: reads are remembered unless after CLIENT CACHING NO.
    pub const OPTOUT: u8 = 1 << 3;
    /// CLIENT CACHING was given for the next command.
    pub const CACHING: u8 = 1 << 4;
    /// NOLOOP: no invalidation for keys the client wrote itself.
    pub const NOLOOP: u8 = 1 << 5;
    /// The redirection target was gone when an invalidation was due (flag `R`).
    pub const BROKEN_REDIR: u8 = 1 << 6;
}

/// The bits a command carries to the shard that runs it ([`TrackingMode::command_bits`]).
pub mod tracking_command {
    /// Remember the keys this command reads for the client.
    pub const REMEMBER: u8 = 1;
    /// The client is in NOLOOP mode.
    pub const NOLOOP: u8 = 1 << 1;
    /// Its invalidations go to another connection: none is written after its reply.
    pub const REDIRECTED: u8 = 1 << 2;
    /// The client tracks (in any mode): a write of it may owe it an invalidation.
    pub const TRACKING: u8 = 1 << 3;
    /// Forwarded whole (not a part of a split command): its own invalidations may
    /// follow its reply bytes, which no merge rewrites.
    pub const WHOLE: u8 = 1 << 4;
}

impl TrackingMode {
    /// Tracking is on.
    pub fn on(&self) -> bool {
        self.flags & tracking_flags::ON != 0
    }

    /// What a command of this client carries: whether its reads are remembered
    /// (default mode, with OPTIN/OPTOUT decided by CLIENT CACHING, as Redis'
    /// trackingRememberKeys), NOLOOP, and whether invalidations are redirected.
    pub fn command_bits(&self) -> u8 {
        use tracking_command::*;
        use tracking_flags as f;
        let flags = self.flags;
        if flags & f::ON == 0 {
            return 0;
        }
        let caching = flags & f::CACHING != 0;
        let skip = (flags & f::OPTIN != 0 && !caching) || (flags & f::OPTOUT != 0 && caching);
        let mut bits = TRACKING;
        if flags & f::BCAST == 0 && !skip {
            bits |= REMEMBER;
        }
        if flags & f::NOLOOP != 0 {
            bits |= NOLOOP;
        }
        if self.redirect != 0 {
            bits |= REDIRECTED;
        }
        bits
    }
}

/// What CLIENT LIST shows of a connection's buffers and memory (Redis' `qbuf` ...
/// `tot-mem` and `events`), read from the connection ([`Conn::buffer_use`]).
/// The connection running CLIENT LIST or INFO itself is taken out of the slab
/// while it runs, so its figures are those kept at the start of its read batch
/// ([`ClientState::batch_buffers`]): Redis shows the same moment, its query
/// buffer still holding the batch the running command came in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BufferUse {
    /// Received bytes not yet consumed: the read batch (`qbuf`).
    pub query_bytes: usize,
    /// Room left in the input buffer (`qbuf-free`).
    pub query_free_bytes: usize,
    /// The reply buffer's size (`rbs`) and the bytes it holds or is sending now
    /// (`rbp`: Ruvio keeps no peak history, so the current use).
    pub reply_buffer_bytes: usize,
    pub reply_peak_bytes: usize,
    /// Reply bytes built and not handed to the kernel yet (`obl`).
    pub ready_bytes: usize,
    /// Replies awaited from other shards, the others queued behind them (`oll`).
    pub held_replies: usize,
    /// Every byte of output not sent yet: what `client-output-buffer-limit`
    /// measures (`omem`).
    pub unsent_bytes: usize,
    /// The connection's allocations: its buffers and its own struct (part of `tot-mem`).
    pub allocated_bytes: usize,
    /// Output waits for the socket (`events=rw`).
    pub writing: bool,
}

/// What the server knows of a client beside its [`ClientState`] when it writes
/// its CLIENT LIST line.
#[derive(Clone, Copy, Debug, Default)]
pub struct Described {
    pub buffers: BufferUse,
    /// A key it watches was changed: its EXEC will fail (flag `d`).
    pub dirty_cas: bool,
    /// Bytes of the arguments of the command it runs now (`argv-mem`): the
    /// caller's own CLIENT LIST, or a blocking command it waits in.
    pub argv_bytes: usize,
    /// The shard whose thread serves it (`io-thread`: Redis 8.0 names the I/O
    /// thread of a client; each of Ruvio's shards is one).
    pub thread: usize,
}

/// Bytes Redis counts per argument of a queued command beside its text (one
/// object pointer): `multi-mem` is the arguments' bytes plus this per argument.
const QUEUED_ARG_OVERHEAD_BYTES: usize = 8;

impl ClientState {
    /// One CLIENT LIST line (without the trailing newline), in Redis 8.0's field
    /// order (7.2's, `watch` from 7.4, `io-thread` from 8.0).
    pub fn describe(&self, now_ms: u64, seen: &Described) -> String {
        let c = self;
        let b = &seen.buffers;
        let blocked_argv = c.blocked.and_then(|b| b.command_bytes).map(|n| n as usize);
        let mut flags = String::new();
        for (set, flag) in [
            (c.monitor, 'O'),
            (c.replica.attached, 'S'),
            (c.master, 'M'),
            (c.slot_import, 'o'),
            (c.subs.active(), 'P'),
            (c.multi.is_some(), 'x'),
            (blocked_argv.is_some(), 'b'),
            (c.tracking.on(), 't'),
            (c.tracking.flags & tracking_flags::BROKEN_REDIR != 0, 'R'),
            (c.tracking.flags & tracking_flags::BCAST != 0, 'B'),
            (seen.dirty_cas, 'd'),
            (c.closing && !c.killed, 'c'),
            (c.killed, 'A'),
            (c.readonly, 'r'),
            (c.no_evict, 'e'),
            (c.no_touch, 'T'),
        ] {
            if set {
                flags.push(flag);
            }
        }
        if flags.is_empty() {
            flags.push('N');
        }
        let sub = |kind| c.subs.of(kind).len();
        let multi = c.multi.as_ref().map_or(-1, |q| q.len() as i64);
        let multi_mem = c.multi.as_ref().map_or(0, |q| {
            q.argument_bytes() + q.argument_count() * QUEUED_ARG_OVERHEAD_BYTES
        });
        let argv_mem = blocked_argv.unwrap_or(seen.argv_bytes);
        let tot_mem = b.allocated_bytes + argv_mem + multi_mem;
        format!(
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} watch={} qbuf={} qbuf-free={} argv-mem={} multi-mem={} rbs={} rbp={} obl={} oll={} omem={} tot-mem={} events={} cmd={} user={} redir={} resp={} lib-name={} lib-ver={} io-thread={}",
            c.id,
            c.peer,
            c.local,
            c.fd,
            String::from_utf8_lossy(&c.name),
            now_ms.saturating_sub(c.created_ms) / 1000,
            now_ms.saturating_sub(c.last_cmd_ms) / 1000,
            flags,
            c.db,
            sub(crate::net::subscriptions::Kind::Channel),
            sub(crate::net::subscriptions::Kind::Pattern),
            sub(crate::net::subscriptions::Kind::Shard),
            multi,
            c.watching.len(),
            b.query_bytes,
            b.query_free_bytes,
            argv_mem,
            multi_mem,
            b.reply_buffer_bytes,
            b.reply_peak_bytes,
            b.ready_bytes,
            b.held_replies,
            b.unsent_bytes,
            tot_mem,
            if b.writing { "rw" } else { "r" },
            c.last_cmd,
            String::from_utf8_lossy(c.acl.name()),
            match c.tracking.on() {
                true => c.tracking.redirect as i64,
                false => -1,
            },
            if c.proto == Protocol::Resp3 { 3 } else { 2 },
            String::from_utf8_lossy(&c.lib_name),
            String::from_utf8_lossy(&c.lib_ver),
            seen.thread,
        )
    }
}

/// The blocking command a client waits on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockedOn {
    /// Its held reply slot.
    pub seq: u64,
    /// The shard it was sent to, when another shard owns its keys (told if the
    /// client goes away).
    pub remote: Option<usize>,
    /// A blocking command (BLPOP ...: Redis' `b` flag) and its arguments' bytes;
    /// `None` while the client waits for a transaction, a gather or another shard.
    pub command_bytes: Option<u32>,
}

impl BlockedOn {
    /// Waiting for held slot `seq` (a transaction, a gather, another shard's
    /// answer), not in a blocking command.
    pub fn waiting(seq: u64) -> BlockedOn {
        BlockedOn {
            seq,
            remote: None,
            command_bytes: None,
        }
    }
}

/// CLIENT REPLY ON|OFF|SKIP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyMode {
    On,
    Off,
    /// Drop the reply of the next command only.
    SkipNext,
    /// Drop the reply of this command (SKIP was the previous command).
    Skip,
}

impl ReplyMode {
    /// The running command's ordinary reply is dropped. Its Pub/Sub frames are not:
    /// Redis 7.0 writes each of them as a push (`CLIENT_PUSHING`), which CLIENT REPLY
    /// OFF and SKIP let through, RESP2 arrays included.
    pub fn silences(self) -> bool {
        matches!(self, ReplyMode::Off | ReplyMode::Skip)
    }
}

/// A connection: socket, input, parser, client state and replies.
#[derive(Debug)]
pub struct Conn {
    /// Generation of the slab slot, so completions of a closed connection are ignored.
    pub gen: u32,
    /// Received bytes not yet parsed (a partial command at most, between batches).
    pub input: Vec<u8>,
    /// Bytes at the front of `input` already run (kept while a receive is in flight,
    /// since the kernel writes at the end the receive was armed with).
    pub input_start: usize,
    /// Don't parse again until `input` holds this many bytes past `input_start`
    /// (a large bulk arriving).
    pub input_need: usize,
    pub parser: CommandParser,
    pub client: ClientState,
    pub replies: ReplyQueue,
    /// Bytes handed to the kernel in the in-flight send.
    pub sending: Vec<u8>,
    pub send_offset: usize,
    pub recv_in_flight: bool,
    pub send_in_flight: bool,
    /// The socket was shut down; free the slot once no operation is in flight.
    pub shut: bool,
    /// The socket is in the ring's file table at the connection's slab index.
    pub fixed: bool,
    /// Commands at the front of the pending input whose keyspace lines are already prefetched.
    pub prefetched: usize,
    /// Accepted on `tls-port`: its session, between the socket and `input` /
    /// `sending` (then ciphertext; see [`crate::net::tls`]).
    pub tls: Option<Box<crate::net::tls::TlsConn>>,
}

impl Conn {
    /// A connection just accepted on descriptor `fd` (`sock`: peer and local
    /// address), as client `client_id`, in slab generation `gen`.
    pub fn new(
        gen: u32,
        client_id: u64,
        fd: i32,
        (peer, local): (String, String),
        now_ms: u64,
        (authenticated, acl): (bool, crate::acl::Session),
    ) -> Conn {
        Conn {
            gen,
            input: Vec::with_capacity(INPUT_CHUNK_BYTES),
            input_start: 0,
            input_need: 0,
            parser: Default::default(),
            client: ClientState {
                id: client_id,
                name: Vec::new(),
                lib_name: Vec::new(),
                lib_ver: Vec::new(),
                db: 0,
                proto: Protocol::Resp2,
                authenticated,
                acl,
                no_evict: false,
                no_touch: false,
                reply_mode: ReplyMode::On,
                pushes: Vec::new(),
                readonly: false,
                asking: false,
                peer,
                local,
                created_ms: now_ms,
                last_cmd_ms: now_ms,
                last_cmd: "NULL",
                wrote: false,
                woff: None,
                fd,
                closing: false,
                killed: false,
                paused: false,
                blocked: None,
                subs: Default::default(),
                obuf_soft_since_ms: 0,
                multi: None,
                batch_buffers: BufferUse::default(),
                watching: Vec::new(),
                watch_epoch: 0,
                in_exec: false,
                exec_rest: Default::default(),
                borrowing_tx: None,
                in_place_txs: Vec::new(),
                tls: false,
                monitor: false,
                tracking: TrackingMode::default(),
                master: false,
                slot_import: false,
                shard_link: false,
                replica: ReplicaPeer::default(),
            },
            replies: ReplyQueue::default(),
            sending: Vec::new(),
            send_offset: 0,
            recv_in_flight: false,
            send_in_flight: false,
            shut: false,
            fixed: false,
            prefetched: 0,
            tls: None,
        }
    }

    /// What CLIENT LIST shows of this connection's buffers now.
    pub fn buffer_use(&self) -> BufferUse {
        let in_flight = self.sending.len().saturating_sub(self.send_offset);
        let ready = self.replies.ready.len();
        let unsent = self.replies.pending_bytes() + in_flight;
        BufferUse {
            query_bytes: self.input.len() - self.input_start,
            query_free_bytes: self.input.capacity() - self.input.len(),
            reply_buffer_bytes: self.replies.ready.capacity().max(self.sending.capacity()),
            reply_peak_bytes: ready.max(self.sending.len()),
            ready_bytes: ready,
            held_replies: self.replies.parked_replies(),
            unsent_bytes: unsent,
            allocated_bytes: std::mem::size_of::<Conn>()
                + self.input.capacity()
                + self.replies.ready.capacity()
                + self.sending.capacity()
                + (unsent - ready - in_flight),
            writing: unsent > 0,
        }
    }

    /// The reply of held slot `seq` has arrived: if the client was waiting on it
    /// (a blocked or cross-shard command), it may run its next commands (queued
    /// in `resume`). A part of a split command answered late leaves a client that
    /// waits on something else waiting.
    pub fn unblock_if_waiting_on(
        &mut self,
        seq: u64,
        resume: &mut Vec<(u32, u32)>,
        who: (u32, u32),
    ) {
        if self.client.blocked.is_some_and(|b| b.seq == seq) {
            self.client.blocked = None;
            resume.push(who);
        }
    }
}
