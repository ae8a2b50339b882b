//! The busy shard's other clients, answered while its script runs past
//! `busy-reply-threshold`, as Redis answers them from inside its Lua hook.
//!
//! A shard serves its connections from its loop, and the loop does not run while
//! Lua does: without this, every client of the busy shard would hang until the
//! script ends, SCRIPT KILL and SHUTDOWN NOSAVE included. So the engine's count
//! hook calls [`serve`] past the threshold, and it answers them without entering
//! the loop and without touching the keyspace:
//! - `-BUSY` (the EVAL or the function text) to every command Redis refuses so,
//!   after the checks Redis makes first (unknown command, arity, NOAUTH, in
//!   per-shard mode and on a node of the bus `-MOVED` / `-CROSSSLOT`, RESP2
//!   subscribed mode's error);
//!   inside MULTI the transaction is flagged, and EXEC discards it as Redis'
//!   does;
//! - SCRIPT KILL and FUNCTION KILL act at once (the hook raises the kill right
//!   after), SHUTDOWN NOSAVE ends the process, SHUTDOWN without it is `-BUSY`;
//! - the connection commands Redis runs while busy: AUTH, HELLO, MULTI, DISCARD,
//!   WATCH, UNWATCH, RESET, QUIT, FUNCTION STATS (a function's run, or `-BUSY`
//!   under an EVAL); inside MULTI those Redis lets past the busy check are queued,
//!   as its MULTI then takes them;
//! - WATCH outside MULTI of keys this shard owns: `+OK` at once, the keys added to
//!   the client's list, and their registration in the shard's watch table left
//!   ([`PendingWatch`]) for the end of the script command, which registers them
//!   and touches the watch when the script wrote one of the keys after this WATCH
//!   (`shard::exec::adopt_pending_watches`); so a write of the script after the
//!   `+OK` fails the client's EXEC, as in Redis. Keys other shards own go to
//!   them by a message sent from here (`ShardMsg::WatchKeysNow`), and `+OK`
//!   waits for every owner's registration ([`Awaiting`]: a write after `+OK`
//!   must be seen), within about a millisecond when the owners are not busy
//!   themselves; the connection is not served until then, and the loop holds
//!   the reply in its place if the script ends first;
//! - UNWATCH, DISCARD, EXEC (`-EXECABORT`) and RESET of a client that watches
//!   keys, as Redis unwatches them: the client's watch epoch moves on at once (a
//!   touch of the old watches can no longer fail its EXEC), its WATCHes answered
//!   here are dropped, and the keys it watched are left ([`Unwatched`]) for the
//!   shard to unregister after the script, before the WATCHes answered later
//!   are registered;
//! - RESET of a subscriber, a monitor or a tracking client too: its
//!   subscriptions are dropped at once (the subscriber tables every shard reads,
//!   under their lock, as the loop drops them), the monitor count every shard
//!   reads goes down at once, and this shard's monitor list and tracking table
//!   forget it ([`Reset`]) when the script command ends, before the script's
//!   writes owe invalidations and its MONITOR lines are handed out: nothing
//!   reaches the client after its `+RESET`.
//!
//! What it may touch, and why it is safe:
//! - The connections: while a script command runs, the shard lends its slab
//!   (`net::lent`; the running connection is already out of it), so the hook
//!   reaches them without a second reference to the shard. It serves only a connection
//!   that is quiet: nothing unparsed in its input, no reply queued, held or being
//!   sent, not blocked, paused or silenced by CLIENT REPLY, no push waiting.
//!   Then what it writes cannot overtake an earlier reply, and what it reads
//!   cannot overtake earlier input.
//! - The sockets, by plain non-blocking system calls, not the shard's ring: the
//!   ring's receive armed on a connection copies nothing until the loop next
//!   enters the ring (its task work is deferred, `DEFER_TASKRUN`), and a receive
//!   woken for bytes taken here finds none and waits again. Commands are peeked
//!   first and only the whole ones answered here are taken off the socket; the
//!   first command it may not answer (a partial command, an `allow_busy` one
//!   that needs the loop) stops it there for that connection: it and what
//!   follows wait for the loop.
//! - New connections: accepted from the shard's listener directly (the ring's
//!   accept is deferred the same way), each given its client state (and id) at
//!   once ([`Fresh`]) and served as the others, so what HELLO, AUTH, MULTI or
//!   WATCH set is kept; the loop adopts them, with that state, after the script
//!   ([`take_leftovers`]).
//!
//! A reply the socket would not take whole is kept for the loop, which queues it
//! before anything else of that connection; the connection is then not served
//! again until the script ends.
//!
//! Why one file of about a thousand lines: everything here runs inside the
//! engine's Lua hook and shares one thread-local [`Pump`] (the lent connections,
//! the listener, what is held for the loop); its contract (touch no keyspace,
//! overtake no reply, leave the rest to the loop) is checked in one place, and
//! `answer`, the one long function, is a table of Redis's busy-time answers
//! read top to bottom.

use crate::cluster::slot_map::ClientSide;
use crate::cluster::topology::Topology;
use crate::cmd::registry::{registry, Command, Handler};
use crate::config::PortMode;
use crate::net::conn::{ClientState, Conn, ReplyMode};
use ruvio_engine::command::flags::{ALLOW_BUSY, NO_AUTH, WRITE};
use ruvio_engine::command::CommandTree;
use ruvio_engine::slot::key_slot;
use ruvio_engine::CmdError;
use ruvio_resp::{Args, CommandParser, Limits, Parsed, Protocol, Reply};
use std::cell::{Cell, RefCell};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Bytes of one connection's input looked at per hook call: a client's commands
/// while a script is busy are short (PING, SCRIPT KILL); a longer one waits.
const PEEK_BYTES_MAX: usize = 16 << 10;
/// Reply bytes one hook call writes to one connection, at most: the socket takes
/// them whole (its send buffer is larger), the rest of the input waits a call.
const OUT_BYTES_MAX: usize = 4 << 10;

/// New connections taken per hook call, so a flood of connects cannot hold the
/// script (the hook runs again within about a millisecond).
const ACCEPTS_PER_CALL_MAX: usize = 16;
/// Connections accepted here before the loop adopts them, at most: past it new
/// clients wait in the listen queue, as they would for the loop.
const ACCEPTED_MAX: usize = 1024;

/// Where a reply the socket did not take whole goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// A connection of the slab: index and generation.
    Conn(u32, u32),
    /// A connection accepted here, by its descriptor.
    Fresh(RawFd),
}

/// A WATCH answered while the script ran: what its registration needs.
#[derive(Debug)]
pub struct PendingWatch {
    pub client_id: u64,
    pub epoch: u64,
    pub db: usize,
    /// The keys new to the client's watch list (all this shard's).
    pub keys: Vec<Vec<u8>>,
    /// `ruvio_engine::scripting::script_writes()` when `+OK` was sent: a write
    /// counted after it may have changed a key.
    pub writes_at: u64,
}

/// A client whose watches UNWATCH, DISCARD, EXEC or RESET ended while the script
/// ran: its watch epoch moved on at once (no touch of the old watches can fail a
/// later EXEC, see `transactions::watch`), and the watch tables forget its keys
/// after the script (the busy shard's table cannot be reached from the hook).
#[derive(Debug)]
pub struct Unwatched {
    pub client_id: u64,
    /// Its watch epoch that ended (watches of later epochs stay).
    pub epoch: u64,
    /// The keys the client watched (registered before the script, or by a
    /// [`PendingWatch`] dropped here).
    pub keys: Vec<crate::mesh::lending::DbKey>,
}

/// A RESET answered while the script ran, of a client that tracked keys or was a
/// monitor: the shard tables the hook cannot reach (this shard's tracking table
/// and monitor list are the loop's) forget it when the script command ends,
/// before the script's writes owe invalidations or its lines are handed out.
/// (Its subscriptions are gone at once: the subscriber tables every shard reads
/// are taken under their lock, as the loop takes them.)
#[derive(Debug)]
pub struct Reset {
    /// The connection (slab index and generation).
    pub who: (u32, u32),
    pub client_id: u64,
    /// It was a monitor.
    pub monitor: bool,
    /// Its tracking before the RESET (off when it did not track).
    pub tracking: crate::net::conn::TrackingMode,
}

/// A WATCH answered here of keys other shards own: each owner registers them by
/// a message (`ShardMsg::WatchKeysNow`), counts itself off `left` and rings this
/// shard; `+OK` goes once `left` is 0 (from the hook, or from the loop when the
/// script ended first), and the connection is not served until then.
#[derive(Debug)]
pub struct Awaiting {
    pub target: Target,
    pub fd: RawFd,
    /// Owners that have not registered the keys yet.
    pub left: Arc<AtomicUsize>,
}

/// An [`Awaiting`] WATCH the loop took over: its held reply slot, filled with
/// `+OK` once `left` is 0.
struct Held {
    who: (u32, u32),
    seq: u64,
    left: Arc<AtomicUsize>,
}

/// A connection accepted while the script was busy: its descriptor and its
/// client's state from the start (its id included), so that what its commands
/// answered here set (HELLO's protocol and name, AUTH, MULTI, WATCH ...) is
/// the connection's when the loop adopts it.
pub struct Fresh {
    pub fd: RawFd,
    pub client: Box<ClientState>,
}

/// What the loop takes over once the script command is done.
#[derive(Default)]
pub struct Leftovers {
    /// Connections accepted while the script was busy, to adopt with the state
    /// their commands answered here gave them.
    pub accepted: Vec<Fresh>,
    /// Replies the socket did not take whole, queued before anything else.
    pub unsent: Vec<(Target, Vec<u8>)>,
    /// Commands answered `-BUSY` here (the shard's error statistics count them).
    pub refused_busy: u64,
    /// WATCHes answered here, to register ([`take_watches`] takes them first).
    pub watches: Vec<PendingWatch>,
    /// Watches ended here, to forget before the WATCHes above are registered (a
    /// client may watch again after it unwatched).
    pub unwatched: Vec<Unwatched>,
    /// RESETs of tracking clients and monitors answered here ([`take_resets`]).
    pub resets: Vec<Reset>,
    /// WATCHes still waiting for other shards when the script ended: the loop
    /// holds their reply ([`hold_awaited`]).
    pub awaiting: Vec<Awaiting>,
}

/// The shard's part: its listener, what its answers depend on, and the buffers of
/// one hook call.
struct Pump {
    listener: RawFd,
    settings: Settings,
    parser: CommandParser,
    peeked: Vec<u8>,
    out: Vec<u8>,
    /// Connections not to serve again while this script runs: their next command
    /// is for the loop, or the loop holds part of a reply for them.
    stopped: Vec<Target>,
    /// WATCHes waiting for other shards to register their keys.
    awaiting: Vec<Awaiting>,
    /// Those the loop took over, by their held reply slots.
    held: Vec<Held>,
    leftovers: Leftovers,
}

thread_local! {
    static PUMP: RefCell<Option<Pump>> = const { RefCell::new(None) };
    /// Something is in [`Leftovers`] (one read per loop step to know).
    static HAS_LEFTOVERS: Cell<bool> = const { Cell::new(false) };
}

/// What the answers depend on besides the command.
pub struct Settings {
    /// Which shard this is among `topo`'s (MOVED and CROSSSLOT in per-shard mode).
    pub shard: usize,
    pub topo: Arc<Topology>,
    /// `cluster-announce-ip` (the host MOVED names).
    pub announce_ip: String,
    /// `cluster-enabled yes`: the slots are the bus's, read from the copy kept
    /// at the script's start (`busy_routes`).
    pub cluster_bus: bool,
    /// The ACL users: whether new clients must authenticate, and AUTH's check.
    pub acl: Arc<crate::acl::Acl>,
    /// What every shard reads: a new connection's client id.
    pub shared: Arc<crate::shard::Shared>,
}

/// Set this shard thread up (at shard start): its listener and settings.
pub fn install(listener: RawFd, settings: Settings) {
    PUMP.with_borrow_mut(|p| {
        *p = Some(Pump {
            listener,
            settings,
            parser: CommandParser::new(),
            peeked: Vec::new(),
            out: Vec::new(),
            stopped: Vec::new(),
            awaiting: Vec::new(),
            held: Vec::new(),
            leftovers: Leftovers::default(),
        })
    });
    ruvio_engine::scripting::set_serve_while_busy(serve);
}

/// True when the hook left something for the loop ([`take_leftovers`]).
#[inline]
pub fn has_leftovers() -> bool {
    HAS_LEFTOVERS.with(Cell::get)
}

/// What the hook left for the loop; the next script starts with every connection
/// served again.
pub fn take_leftovers() -> Leftovers {
    HAS_LEFTOVERS.with(|h| h.set(false));
    PUMP.with_borrow_mut(|p| {
        let Some(pump) = p.as_mut() else {
            return Leftovers::default();
        };
        pump.stopped.clear();
        let mut left = std::mem::take(&mut pump.leftovers);
        left.awaiting = std::mem::take(&mut pump.awaiting);
        if !pump.held.is_empty() {
            HAS_LEFTOVERS.with(|h| h.set(true));
        }
        left
    })
}

/// The loop took over an [`Awaiting`] WATCH of connection `who` with reply slot
/// `seq` held: [`ready_held`] gives it back once every owner registered.
pub fn hold_awaited(who: (u32, u32), seq: u64, left: Arc<AtomicUsize>) {
    PUMP.with_borrow_mut(|p| {
        if let Some(pump) = p.as_mut() {
            pump.held.push(Held { who, seq, left });
            HAS_LEFTOVERS.with(|h| h.set(true));
        }
    });
}

/// The held WATCH replies whose owners have all registered the keys now (the
/// loop fills each with `+OK`); the loop keeps looking while any still waits
/// (each owner rings this shard when it is done).
pub fn ready_held() -> Vec<((u32, u32), u64)> {
    PUMP.with_borrow_mut(|p| {
        let Some(pump) = p.as_mut() else {
            return Vec::new();
        };
        let mut ready = Vec::new();
        pump.held.retain(|h| {
            let done = h.left.load(Ordering::Acquire) == 0;
            if done {
                ready.push((h.who, h.seq));
            }
            !done
        });
        if !pump.held.is_empty() {
            HAS_LEFTOVERS.with(|h| h.set(true));
        }
        ready
    })
}

/// The WATCHes answered while a script ran, to register now (the end of the
/// script command); empty, and cheap, in every other case.
/// The watches ended while it ran come first, to forget before those WATCHes
/// are registered.
pub fn take_watches() -> (Vec<Unwatched>, Vec<PendingWatch>) {
    if !has_leftovers() {
        return Default::default();
    }
    PUMP.with_borrow_mut(|p| {
        p.as_mut()
            .map(|pump| {
                let left = &mut pump.leftovers;
                (
                    std::mem::take(&mut left.unwatched),
                    std::mem::take(&mut left.watches),
                )
            })
            .unwrap_or_default()
    })
}

/// The RESETs of tracking clients and monitors answered while the script ran, for
/// the shard to finish now (the end of the script command, before its writes owe
/// invalidations); empty, and cheap, in every other case.
pub fn take_resets() -> Vec<Reset> {
    if !has_leftovers() {
        return Vec::new();
    }
    PUMP.with_borrow_mut(|p| {
        p.as_mut()
            .map(|pump| std::mem::take(&mut pump.leftovers.resets))
            .unwrap_or_default()
    })
}

/// The engine's hook, past the threshold (`busy`: the running script's `-BUSY`):
/// answer what the shard's other clients sent since the last call.
fn serve(busy: &CmdError) {
    let left = PUMP.with_borrow_mut(|p| {
        let pump = p.as_mut()?;
        pump.accept_new();
        pump.answer_awaited();
        crate::net::lent::with_lent(|conns| {
            for (index, conn) in conns.iter_mut() {
                let target = Target::Conn(index, conn.gen);
                if is_quiet(conn) && !pump.stopped.contains(&target) {
                    pump.serve_one(conn.client.fd, Some(&mut conn.client), target, busy);
                }
            }
        });
        let mut accepted = std::mem::take(&mut pump.leftovers.accepted);
        for fresh in &mut accepted {
            let target = Target::Fresh(fresh.fd);
            if !pump.stopped.contains(&target) {
                pump.serve_one(fresh.fd, Some(&mut fresh.client), target, busy);
            }
        }
        pump.leftovers.accepted = accepted;
        let l = &pump.leftovers;
        let any = !l.accepted.is_empty()
            || !l.unsent.is_empty()
            || l.refused_busy > 0
            || !l.watches.is_empty()
            || !l.unwatched.is_empty()
            || !l.resets.is_empty()
            || !pump.awaiting.is_empty();
        // The stopped list is cleared with the leftovers, for the next script.
        Some(any || !pump.stopped.is_empty())
    });
    if left == Some(true) {
        HAS_LEFTOVERS.with(|h| h.set(true));
    }
}

/// A connection whose next bytes may be answered here (see the module doc).
fn is_quiet(conn: &Conn) -> bool {
    let client = &conn.client;
    // A TLS connection's bytes are records for its session, not commands.
    conn.tls.is_none()
        && conn.recv_in_flight
        && !conn.send_in_flight
        && !conn.shut
        && conn.sending.len() == conn.send_offset
        && conn.input.len() == conn.input_start
        && conn.replies.pending_bytes() == 0
        && !conn.replies.is_holding()
        && !client.closing
        && !client.paused
        && client.blocked.is_none()
        && client.exec_rest.is_none()
        && client.borrowing_tx.is_none()
        && client.in_place_txs.is_empty()
        && client.reply_mode == ReplyMode::On
        && client.pushes.is_empty()
}

/// What became of one command read while the script is busy.
enum Answer {
    /// Answered (its reply written).
    Replied,
    /// Answered `-BUSY`.
    Busy,
    /// Left, with what follows, for the loop.
    Stop,
    /// Answered, and the connection closes (QUIT): what follows is not read.
    Close,
    /// A WATCH that other shards register first: `+OK` once `left` is 0, and
    /// nothing more of the connection is read until then.
    Awaiting(Arc<AtomicUsize>),
}

impl Pump {
    /// `+OK` to the WATCHes whose keys every owner has registered now; their
    /// connections are served again.
    fn answer_awaited(&mut self) {
        let mut i = 0;
        while i < self.awaiting.len() {
            if self.awaiting[i].left.load(Ordering::Acquire) != 0 {
                i += 1;
                continue;
            }
            let done = self.awaiting.swap_remove(i);
            self.stopped.retain(|t| *t != done.target);
            self.out.clear();
            self.out.extend_from_slice(b"+OK\r\n");
            self.send(done.fd, done.target);
        }
    }

    /// Accept the connections waiting on the shard's listener (a few per call).
    fn accept_new(&mut self) {
        for _ in 0..ACCEPTS_PER_CALL_MAX {
            if self.leftovers.accepted.len() >= ACCEPTED_MAX || !readable(self.listener) {
                return;
            }
            // SAFETY: accept4 on the shard's listening socket, with no address out.
            let fd = unsafe {
                libc::accept4(
                    self.listener,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_CLOEXEC,
                )
            };
            if fd < 0 {
                return;
            }
            let client_id = self.settings.shared.next_client_id();
            let now = crate::clock::unix_ms();
            let ends = crate::net::socket::adopt(fd);
            let session = self.settings.acl.new_session();
            let conn = Conn::new(0, client_id, fd, ends, now, session);
            self.leftovers.accepted.push(Fresh {
                fd,
                client: Box::new(conn.client),
            });
        }
    }

    /// Answer the whole commands waiting on `fd`, up to the first that must wait for
    /// the loop. `client` is the connection's state (None: none to keep, a fresh
    /// client).
    fn serve_one(
        &mut self,
        fd: RawFd,
        mut client: Option<&mut ClientState>,
        target: Target,
        busy: &CmdError,
    ) {
        self.peeked.resize(PEEK_BYTES_MAX, 0);
        // SAFETY: a peek into our own buffer of that length.
        let n = unsafe {
            libc::recv(
                fd,
                self.peeked.as_mut_ptr().cast(),
                self.peeked.len(),
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        if n <= 0 {
            // Nothing yet, or the client is gone: the loop sees its end.
            return;
        }
        self.peeked.truncate(n as usize);
        self.out.clear();
        let proto = client.as_ref().map_or(Protocol::Resp2, |c| c.proto);
        let limits = Limits::default();
        let mut consumed = 0;
        let mut closing = false;
        while consumed < self.peeked.len() && self.out.len() < OUT_BYTES_MAX {
            self.parser.reset();
            let Ok(Parsed::Complete {
                args,
                consumed: used,
            }) = self.parser.peek(&self.peeked[consumed..], &limits)
            else {
                // Partial, or a protocol error: the loop reads it as before.
                self.stopped.push(target);
                break;
            };
            if !args.is_empty() {
                // Read per command: an AUTH before it in the batch counts.
                let authenticated = client
                    .as_ref()
                    .map_or(!self.settings.acl.auth_required(), |c| c.authenticated);
                let mut reply = Reply::new(&mut self.out, proto);
                let asked = Asked {
                    args,
                    authenticated,
                    settings: &self.settings,
                    target,
                    watches: &mut self.leftovers.watches,
                    unwatched: &mut self.leftovers.unwatched,
                    resets: &mut self.leftovers.resets,
                };
                match answer(asked, client.as_deref_mut(), busy, &mut reply) {
                    Answer::Replied => {}
                    Answer::Busy => self.leftovers.refused_busy += 1,
                    Answer::Stop => {
                        self.stopped.push(target);
                        break;
                    }
                    Answer::Close => {
                        closing = true;
                        consumed += used;
                        self.stopped.push(target);
                        break;
                    }
                    Answer::Awaiting(left) => {
                        consumed += used;
                        self.awaiting.push(Awaiting { target, fd, left });
                        self.stopped.push(target);
                        break;
                    }
                }
            }
            consumed += used;
        }
        if consumed > 0 {
            discard(fd, consumed);
            self.send(fd, target);
        }
        if closing {
            // The shard's armed receive then ends with the stream, and the loop
            // closes the connection as for a client that went away.
            // SAFETY: plain syscall on the client's socket.
            unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
        }
    }

    /// Write the replies to `fd`; what the socket does not take is left for the
    /// loop, and the connection is not served again while this script runs.
    fn send(&mut self, fd: RawFd, target: Target) {
        let mut sent = 0;
        while sent < self.out.len() {
            // SAFETY: writing bytes of our own buffer to the client's socket.
            let n = unsafe {
                libc::send(
                    fd,
                    self.out[sent..].as_ptr().cast(),
                    self.out.len() - sent,
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                )
            };
            if n <= 0 {
                break;
            }
            sent += n as usize;
        }
        if sent < self.out.len() {
            let rest = self.out[sent..].to_vec();
            self.leftovers.unsent.push((target, rest));
            self.stopped.push(target);
        }
    }
}

/// Take `bytes` already peeked off the socket.
fn discard(fd: RawFd, bytes: usize) {
    let mut scratch = [0u8; 1024];
    let mut left = bytes;
    while left > 0 {
        let take = left.min(scratch.len());
        // SAFETY: bytes we peeked are there to be taken; into our own buffer.
        let got = unsafe { libc::recv(fd, scratch.as_mut_ptr().cast(), take, libc::MSG_DONTWAIT) };
        if got <= 0 {
            return;
        }
        left -= got as usize;
    }
}

/// One command read while the script is busy, with what its answer depends on.
struct Asked<'a> {
    args: Args<'a>,
    authenticated: bool,
    settings: &'a Settings,
    /// The connection it came on.
    target: Target,
    /// Where a WATCH answered here leaves its registration.
    watches: &'a mut Vec<PendingWatch>,
    /// Where UNWATCH, DISCARD, EXEC or RESET answered here leave the keys to forget.
    unwatched: &'a mut Vec<Unwatched>,
    /// Where a RESET answered here leaves what the shard's tables must forget.
    resets: &'a mut Vec<Reset>,
}

/// Redis's unwatchAllKeys for a client served here: a new watch epoch now, its
/// WATCHes answered during this script dropped (never registered), and every
/// key it watched left for the loop to unregister ([`Unwatched`]).
fn unwatch_now(
    client: &mut ClientState,
    watches: &mut Vec<PendingWatch>,
    unwatched: &mut Vec<Unwatched>,
) {
    if client.watching.is_empty() {
        return;
    }
    watches.retain(|w| w.client_id != client.id);
    unwatched.push(Unwatched {
        client_id: client.id,
        epoch: client.watch_epoch,
        keys: std::mem::take(&mut client.watching),
    });
    client.watch_epoch += 1;
}

/// Redis' answer to a command while a script is busy (its checks in its order:
/// unknown command, arity, NOAUTH, cluster redirection, then -BUSY unless the
/// command is allowed then), written to `reply`.
fn answer(
    asked: Asked<'_>,
    client: Option<&mut ClientState>,
    busy: &CmdError,
    reply: &mut Reply<'_>,
) -> Answer {
    let Asked {
        args,
        authenticated,
        settings,
        target,
        watches,
        unwatched,
        resets,
    } = asked;
    let refuse = |client: Option<&mut ClientState>, e: &CmdError, reply: &mut Reply<'_>| {
        if let Some(client) = client {
            crate::transactions::multi::flag_refused(client);
        }
        e.write(reply);
        Answer::Replied
    };
    let Some(cmd) = registry().lookup(args.get(0)) else {
        return refuse(client, &CmdError::unknown_command(args), reply);
    };
    if !cmd.meta.arity_ok(args.len()) {
        return refuse(client, &CmdError::WrongArity(cmd.meta.name), reply);
    }
    if !authenticated && !cmd.meta.has(NO_AUTH) {
        return refuse(client, &CmdError::NoAuth, reply);
    }
    let row: &Command = match cmd.resolve(args) {
        Ok(row) => row,
        Err(e) => return refuse(client, &e, reply),
    };
    if let Some(e) = redirection(settings, row, args, client.as_deref()) {
        return refuse(client, &e, reply);
    }
    // RESP2 subscribed mode, checked before -BUSY as Redis' processCommand does.
    let subscribed = client
        .as_ref()
        .is_some_and(|c| c.proto == Protocol::Resp2 && c.subs.active());
    if subscribed && !crate::cmd::pubsub::allowed_while_subscribed(row.meta.name) {
        let e = crate::cmd::pubsub::not_allowed_while_subscribed(row.meta.name);
        return refuse(client, &e, reply);
    }
    let in_multi = client.as_ref().is_some_and(|c| c.multi.is_some());
    if in_multi
        && row.meta.has(ALLOW_BUSY)
        && !crate::transactions::multi::runs_in_multi(row.meta.name)
    {
        // Redis lets it past the busy check, then MULTI queues it (SCRIPT KILL
        // and AUTH included); none of these has keys.
        let client = client.expect("in MULTI");
        super::multi::queue_keyless(client, row, args, reply);
        return Answer::Replied;
    }
    match row.meta.name {
        "script|kill" | "function|kill" => {
            match ruvio_engine::scripting::kill(row.meta.name == "function|kill") {
                Ok(()) => reply.ok(),
                Err(e) => e.write(reply),
            }
            Answer::Replied
        }
        "shutdown" => {
            // Redis' shutdownCommand: its flags parsed, then only NOSAVE ends it.
            let known = [&b"nosave"[..], b"save", b"now", b"force", b"abort"];
            let flags = args.tail(1);
            if !flags
                .iter()
                .all(|a| known.iter().any(|k| a.eq_ignore_ascii_case(k)))
            {
                CmdError::Syntax.write(reply);
                return Answer::Replied;
            }
            if !flags.iter().any(|a| a.eq_ignore_ascii_case(b"nosave")) {
                busy.write(reply);
                return Answer::Busy;
            }
            eprintln!("ruvio: SHUTDOWN NOSAVE while a script is busy, exiting");
            std::process::exit(0);
        }
        "exec" => {
            // Redis refuses EXEC while busy (in MULTI or not) by its
            // execCommandAbort: the transaction is discarded, the keys unwatched.
            if let Some(client) = client {
                client.multi = None;
                unwatch_now(client, watches, unwatched);
            }
            let message = busy.message();
            CmdError::quoted(
                "EXECABORT Transaction discarded because of: ",
                message.as_bytes(),
                "",
            )
            .write(reply);
            Answer::Busy
        }
        // The transaction commands that need only the connection, as Redis
        // runs them while busy (those that touch the watch tables wait).
        "multi" if client.is_some() => {
            let client = client.expect("checked");
            match client.multi {
                Some(_) => CmdError::MultiNested.write(reply),
                None => {
                    client.multi = Some(Default::default());
                    reply.ok();
                }
            }
            Answer::Replied
        }
        "discard" if client.is_some() => {
            let client = client.expect("checked");
            match client.multi.take() {
                Some(_) => {
                    unwatch_now(client, watches, unwatched);
                    reply.ok()
                }
                None => CmdError::DiscardWithoutMulti.write(reply),
            }
            Answer::Replied
        }
        // AUTH outside MULTI needs only the connection and the users.
        "auth" if client.as_ref().is_some_and(|c| c.multi.is_none()) => {
            let client = client.expect("checked");
            match crate::cmd::connection::authenticate(&settings.acl, args) {
                Ok(user) => {
                    client.authenticated = true;
                    client.acl = crate::acl::Session::new(user);
                    settings.acl.forget_client(client.id);
                    reply.ok();
                }
                Err(CmdError::WrongPass) => {
                    let now = crate::clock::unix_ms();
                    let seen = crate::net::conn::Described {
                        buffers: client.batch_buffers,
                        thread: settings.shard,
                        ..Default::default()
                    };
                    let user = if args.len() == 2 {
                        b"default".as_slice()
                    } else {
                        args.get(1)
                    };
                    settings.acl.log(crate::acl::log::Entry {
                        count: 1,
                        reason: "auth",
                        context: "toplevel",
                        object: args.get(0).to_vec(),
                        username: user.to_vec(),
                        at_ms: now,
                        client_info: client.describe(now, &seen),
                    });
                    CmdError::WrongPass.write(reply);
                }
                Err(e) => e.write(reply),
            }
            Answer::Replied
        }
        "watch" if in_multi => {
            CmdError::WatchInMulti.write(reply);
            Answer::Replied
        }
        // WATCH outside MULTI: the keys join the client's list now; this shard's
        // are registered after the script ([`PendingWatch`]), another owner's by
        // a message, and `+OK` goes once every owner has them (see
        // `transactions::watch`: a write after `+OK` must be seen).
        "watch" if client.is_some() => {
            let client = client.expect("checked");
            let db = client.db;
            let mut keys: Vec<Vec<u8>> = Vec::new();
            for key in args.iter().skip(1) {
                let known = client.watching.iter().any(|(d, k)| *d == db && k == key)
                    || keys.iter().any(|k| k == key);
                if !known {
                    keys.push(key.to_vec());
                }
            }
            let topo = &settings.topo;
            let mut elsewhere: Vec<(usize, Vec<Vec<u8>>)> = Vec::new();
            let mut here = Vec::new();
            for key in keys {
                // Per-shard mode: another slot's key was refused above (MOVED).
                let owner = match topo.mode {
                    PortMode::Forward => topo.key_owner(&key),
                    _ => settings.shard,
                };
                if owner == settings.shard {
                    here.push(key);
                } else if let Some((_, ks)) = elsewhere.iter_mut().find(|(o, _)| *o == owner) {
                    ks.push(key);
                } else {
                    elsewhere.push((owner, vec![key]));
                }
            }
            if !elsewhere.is_empty() && !crate::mesh::forward::can_send_now() {
                // Left for the loop, which registers them by its outbox.
                return Answer::Stop;
            }
            client.watching.extend(
                here.iter()
                    .chain(elsewhere.iter().flat_map(|(_, ks)| ks))
                    .map(|k| (db, k.clone())),
            );
            if !here.is_empty() {
                watches.push(PendingWatch {
                    client_id: client.id,
                    epoch: client.watch_epoch,
                    db,
                    keys: here,
                    writes_at: ruvio_engine::scripting::script_writes(),
                });
            }
            if elsewhere.is_empty() {
                reply.ok();
                return Answer::Replied;
            }
            let left = Arc::new(AtomicUsize::new(elsewhere.len()));
            for (owner, keys) in elsewhere {
                let message = crate::mesh::forward::ShardMsg::WatchKeysNow {
                    from: settings.shard,
                    client_id: client.id,
                    epoch: client.watch_epoch,
                    db,
                    keys,
                    left: left.clone(),
                };
                crate::mesh::forward::send_now(owner, message);
            }
            Answer::Awaiting(left)
        }
        "unwatch" if client.is_some() => {
            unwatch_now(client.expect("checked"), watches, unwatched);
            reply.ok();
            Answer::Replied
        }
        "hello" if client.is_some() => {
            let client = client.expect("checked");
            let acl = &settings.acl;
            let cluster = settings.topo.mode == PortMode::PerShard || settings.cluster_bus;
            if let Err(e) = crate::cmd::connection::hello_reply(client, acl, cluster, args, reply) {
                e.write(reply);
            }
            Answer::Replied
        }
        // RESET, as Redis runs it while busy: the connection's state now, its
        // subscriptions dropped now (the subscriber tables every shard reads), and
        // what this shard's own tables hold of it (watches, tracking, the monitor
        // list) forgotten after the script (`Unwatched`, `Reset`).
        "reset" if client.is_some() => {
            let client = client.expect("checked");
            unwatch_now(client, watches, unwatched);
            let who = match target {
                Target::Conn(index, gen) => Some((index, gen)),
                // Accepted during the script: it could not subscribe, track or
                // monitor (all refused with -BUSY).
                Target::Fresh(_) => None,
            };
            if let Some(who) = who {
                if client.subs.active() {
                    crate::messaging::pubsub::forget_all(
                        &settings.shared.pubsub,
                        settings.shard,
                        &mut client.subs,
                        who,
                    );
                }
                let monitor = std::mem::take(&mut client.monitor);
                if monitor {
                    settings.shared.monitors.detach(settings.shard);
                }
                let tracking = std::mem::take(&mut client.tracking);
                if monitor || tracking.on() {
                    resets.push(Reset {
                        who,
                        client_id: client.id,
                        monitor,
                        tracking,
                    });
                }
            }
            crate::cmd::connection::reset_connection(client, &settings.acl);
            reply.proto = Protocol::Resp2;
            reply.simple("RESET");
            Answer::Replied
        }
        "quit" => {
            reply.ok();
            if let Some(client) = client {
                client.closing = true;
            }
            Answer::Close
        }
        "function|stats" => match ruvio_engine::scripting::functions::stats(reply) {
            Ok(()) => Answer::Replied,
            Err(e) => {
                e.write(reply);
                Answer::Busy
            }
        },
        _ if row.meta.has(ALLOW_BUSY) => Answer::Stop,
        _ => {
            refuse(client, busy, reply);
            Answer::Busy
        }
    }
}

/// Per-shard mode or a node of the bus: Redis Cluster's `-CROSSSLOT`, and for
/// a key another shard (node) serves its `-MOVED` (a node's `-CLUSTERDOWN`
/// too), as `shard::route::route` decides them.
fn redirection(
    settings: &Settings,
    row: &Command,
    args: Args<'_>,
    client: Option<&ClientState>,
) -> Option<CmdError> {
    let topo = &settings.topo;
    // WATCH is a server command with keys: redirected as the loop's
    // `transactions::multi` redirects it.
    let keyed = matches!(row.handler, Some(Handler::Engine(_))) || row.meta.name == "watch";
    if (topo.mode != PortMode::PerShard && !settings.cluster_bus) || !keyed {
        return None;
    }
    let mut positions = row.meta.keys.positions(args).into_iter();
    let slot = key_slot(args.get(positions.next()?));
    if positions.any(|p| key_slot(args.get(p)) != slot) {
        return Some(CmdError::CrossSlot);
    }
    if settings.cluster_bus {
        let who = ClientSide {
            master: client.is_some_and(|c| c.master),
            readonly: client.is_some_and(|c| c.readonly),
            tls: client.is_some_and(|c| c.tls),
        };
        return super::busy_routes::node_redirection(slot, row.meta.has(WRITE), who);
    }
    let local = client.map_or("", |c| c.local.as_str());
    let owner = topo.owner(slot);
    (owner != settings.shard).then(|| CmdError::Moved {
        slot,
        host: topo
            .announced_host(&settings.announce_ip, local)
            .to_string(),
        port: topo.nodes[owner].port,
    })
}

/// True when the listening socket has a connection waiting (without waiting).
fn readable(fd: RawFd) -> bool {
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd of our own, no timeout.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    ready > 0 && poll.revents & libc::POLLIN != 0
}
