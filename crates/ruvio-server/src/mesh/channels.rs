//! The channels between shards: one bounded lock-free SPSC ring per ordered
//! pair of shards and a doorbell eventfd per shard ([`MeshPlan`], made before
//! the shards start), each shard's ends ([`Mesh`], a thread-local of its
//! thread), the backlog of messages that found their channel full, and the
//! waits on this thread for another shard's answer ([`request_now`],
//! [`lend_now`]) that a script's call makes from inside the engine. Apart from
//! `forward.rs` (the message types and the [`Outbox`] that batches them)
//! because this is the transport: it moves any [`ShardMsg`] and knows nothing
//! of what one carries.

use crate::mesh::forward::{Outbox, ShardMsg, CHANNEL_MESSAGES_MAX, MESH_BACKLOG_MESSAGES_MAX};
use crate::mesh::lending::{LendRequest, Lent};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::os::fd::RawFd;

/// The sending end of the channel from one shard to another.
type Sender = rtrb::Producer<ShardMsg>;
/// The receiving end of the channel from one shard to another.
type Receiver = rtrb::Consumer<ShardMsg>;

/// The ends of every channel, made before the shards start.
///
/// A channel is a bounded lock-free single-producer single-consumer ring
/// (`rtrb`): a send is a push that fails when the ring is full, a receive a pop
/// that fails when it is empty, and neither registers anything anywhere. (glommio's
/// shared channels, used before, register a waker with the receiving executor on
/// every receive that finds the channel empty and free them only as messages
/// arrive; a shard looks at its channels every loop iteration without awaiting
/// them, so those wakers piled up: 900 MB after a million locked scripts.) The
/// receiver learns of mail from its doorbell.
pub struct MeshPlan {
    /// `senders[from][to]`
    senders: Vec<Vec<Option<Sender>>>,
    /// `receivers[to][from]`
    receivers: Vec<Vec<Option<Receiver>>>,
    doorbells: Vec<RawFd>,
}

impl MeshPlan {
    /// Channels between every ordered pair of `shards` shards, and their doorbells.
    pub fn new(shards: usize) -> std::io::Result<MeshPlan> {
        let mut senders: Vec<Vec<Option<Sender>>> = (0..shards)
            .map(|_| (0..shards).map(|_| None).collect())
            .collect();
        let mut receivers: Vec<Vec<Option<Receiver>>> = (0..shards)
            .map(|_| (0..shards).map(|_| None).collect())
            .collect();
        for from in 0..shards {
            for to in (0..shards).filter(|&to| to != from) {
                let (tx, rx) = rtrb::RingBuffer::new(CHANNEL_MESSAGES_MAX);
                senders[from][to] = Some(tx);
                receivers[to][from] = Some(rx);
            }
        }
        let doorbells = (0..shards)
            .map(|_| {
                // SAFETY: plain syscall; the descriptor lives as long as the process.
                let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
                if fd < 0 {
                    Err(std::io::Error::last_os_error())
                } else {
                    Ok(fd)
                }
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(MeshPlan {
            senders,
            receivers,
            doorbells,
        })
    }

    /// The ends shard `shard` owns (moved to its thread).
    pub fn take(&mut self, shard: usize) -> Mesh {
        Mesh {
            me: shard,
            senders: std::mem::take(&mut self.senders[shard]),
            receivers: std::mem::take(&mut self.receivers[shard]),
            doorbells: self.doorbells.clone(),
            backlog: VecDeque::new(),
            set_aside: Vec::new(),
            sent_messages: 0,
            received_messages: 0,
            positions: self.doorbells.len() >= POSITIONS_SHARDS_MIN,
            requested: vec![0; self.doorbells.len()],
            answered: Vec::new(),
        }
    }
}

/// A shard's channels.
pub struct Mesh {
    me: usize,
    senders: Vec<Option<Sender>>,
    receivers: Vec<Option<Receiver>>,
    doorbells: Vec<RawFd>,
    /// Messages that found their channel full; retried every loop iteration.
    backlog: VecDeque<(usize, ShardMsg)>,
    /// Messages received while a script waited for keys ([`lend_now`]), handled
    /// first at the next [`Mesh::receive_all`] (each peer's stay in order: they
    /// came before anything still in its channel).
    set_aside: Vec<(usize, ShardMsg)>,
    /// Messages (each a batch of requests, replies or one control) put into the
    /// other shards' channels, and taken from this shard's: the metrics endpoint's.
    sent_messages: u64,
    received_messages: u64,
    /// Channels' positions are counted ([`POSITIONS_SHARDS_MIN`] shards or more).
    positions: bool,
    /// Per shard: the messages [`request_now`] queued for it (not through an
    /// outbox), counted while `positions`.
    requested: Vec<u64>,
    /// The shards whose answers [`request_now`] took off their channels since
    /// the last [`Mesh::receive_all`] (while `positions`): taken messages too.
    answered: Vec<usize>,
}

/// From this many shards on, a shard counts the messages it queues on each
/// channel and takes from each (CLIENT TRACKING's relayed invalidations for a
/// third shard wait on them, [`After`](crate::mesh::forward::After)); with fewer there is no third shard,
/// and nothing is counted.
pub const POSITIONS_SHARDS_MIN: usize = 3;

/// The position `shard`'s channel from this shard will have reached once
/// everything queued for it so far (in the mesh's backlog or in `outbox`) is
/// in it: what a relayed invalidation for `shard` waits on ([`After`](crate::mesh::forward::After)).
pub fn position_for(outbox: &Outbox, shard: usize) -> u64 {
    let requested = MESH.with(|m| {
        let mesh = m.try_borrow().ok()?;
        mesh.as_ref().map(|mesh| mesh.requested[shard])
    });
    requested.unwrap_or(0) + outbox.position_for(shard)
}

thread_local! {
    /// This shard thread's channels (none for a lone shard). A thread-local, not a
    /// field of the shard, because a script's call reaches them from inside the
    /// engine ([`lend_now`]).
    static MESH: RefCell<Option<Mesh>> = const { RefCell::new(None) };
}

/// Give this shard thread its connected channels (at shard start).
pub fn install_mesh(mesh: Mesh) {
    MESH.with(|m| *m.borrow_mut() = Some(mesh));
}

/// `f` of this thread's channels; `None` for a lone shard.
pub fn with_mesh<R>(f: impl FnOnce(&mut Mesh) -> R) -> Option<R> {
    MESH.with(|m| m.borrow_mut().as_mut().map(f))
}

/// This shard's messages sent to and received from the other shards (none for a
/// lone shard, or while the channels are in use further up the stack).
pub fn message_counts() -> Option<(u64, u64)> {
    MESH.with(|m| {
        let mesh = m.try_borrow().ok()?;
        mesh.as_ref()
            .map(|mesh| (mesh.sent_messages, mesh.received_messages))
    })
}

/// Wake shard `to` (its ring reads its doorbell), for instance to look at the
/// script lock again.
pub fn ring(to: usize) {
    with_mesh(|mesh| mesh.ring(to));
}

/// Borrow keys from `owner` now, waiting for them on this thread: what a script
/// holding the script lock does for keys it did not declare (see
/// [`crate::mesh::script_lock`]).
pub fn lend_now(owner: usize, request: LendRequest) -> Lent {
    let ticket = request.ticket;
    request_now(owner, ShardMsg::Lend(request), |msg| match msg {
        ShardMsg::Lent {
            ticket: t, entries, ..
        } if t == ticket => Ok(entries),
        other => Err(other),
    })
    .unwrap_or_default()
}

/// True when [`send_now`] can reach the channels from here (they are not in use
/// further up this thread's stack).
pub fn can_send_now() -> bool {
    MESH.with(|m| m.try_borrow_mut().is_ok_and(|mesh| mesh.is_some()))
}

/// Send `message` to shard `to` now, without waiting for anything: behind what
/// this thread already put in the channels (a full channel keeps it in the
/// backlog for the loop's next send). For the busy-script hook, which runs
/// while the shard's outbox is out of reach.
pub fn send_now(to: usize, message: ShardMsg) {
    with_mesh(|mesh| {
        mesh.backlog.push_back((to, message));
        mesh.send_backlog();
    });
}

/// Send `message` to shard `to` now and wait on this thread for the answer `take`
/// picks (`None` when `to` is gone: the process is exiting). The message goes
/// behind everything already waiting for `to`; what else arrives from `to`
/// meanwhile is set aside, in order, for the shard's loop.
pub fn request_now<T>(
    to: usize,
    message: ShardMsg,
    mut take: impl FnMut(ShardMsg) -> Result<T, ShardMsg>,
) -> Option<T> {
    with_mesh(|mesh| {
        mesh.backlog.push_back((to, message));
        if mesh.positions {
            mesh.requested[to] += 1;
        }
        let mut spins = 0u32;
        loop {
            mesh.send_backlog();
            if !mesh.backlog.iter().any(|(shard, _)| *shard == to) {
                break;
            }
            pause(&mut spins);
        }
        loop {
            let Some(Some(rx)) = mesh.receivers.get_mut(to) else {
                return None;
            };
            let popped = rx.pop();
            if popped.is_ok() {
                mesh.received_messages += 1;
            }
            match popped {
                Ok(msg) => match take(msg) {
                    Ok(answer) => {
                        if mesh.positions {
                            mesh.answered.push(to);
                        }
                        return Some(answer);
                    }
                    Err(other) => mesh.set_aside.push((to, other)),
                },
                Err(_) if rx.is_abandoned() => return None,
                Err(_) => pause(&mut spins),
            }
        }
    })
    .flatten()
}

/// Spins of a wait for another shard before each step yields the CPU.
const SPINS_BEFORE_YIELD: u32 = 100;

/// One step of a wait for another shard: spin a moment, then yield the CPU at each
/// step (the other shard may share it: with shards pinned to one CPU, spinning
/// longer only delays the answer it waits for; on a CPU of its own, a yield with
/// nothing else to run comes straight back).
fn pause(spins: &mut u32) {
    *spins += 1;
    if *spins < SPINS_BEFORE_YIELD {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

impl Mesh {
    /// Too many messages wait for full channels: take no new client input.
    pub fn congested(&self) -> bool {
        self.backlog.len() > MESH_BACKLOG_MESSAGES_MAX
    }

    /// The eventfd this shard's ring reads to wake up for messages.
    pub fn my_doorbell(&self) -> RawFd {
        self.doorbells[self.me]
    }

    /// Everything waiting in the incoming channels, each with its sender, and
    /// the senders of the answers [`request_now`] took since the last call
    /// (counted while channels' positions are: [`POSITIONS_SHARDS_MIN`]).
    pub fn receive_all(&mut self) -> (Vec<usize>, Vec<(usize, ShardMsg)>) {
        let mut messages = std::mem::take(&mut self.set_aside);
        for (from, rx) in self.receivers.iter_mut().enumerate() {
            let Some(rx) = rx else { continue };
            while let Ok(msg) = rx.pop() {
                messages.push((from, msg));
                self.received_messages += 1;
            }
        }
        (std::mem::take(&mut self.answered), messages)
    }

    /// Send every non-empty batch of the outbox, then ring the doorbells of the shards that got mail.
    pub fn ship(&mut self, outbox: &mut Outbox) {
        outbox.take_messages(&mut self.backlog);
        self.send_backlog();
    }

    /// Ring shard `to`'s doorbell.
    fn ring(&self, to: usize) {
        if let Some(&fd) = self.doorbells.get(to) {
            let one: u64 = 1;
            // SAFETY: writing 8 bytes from a local to an eventfd we created.
            unsafe { libc::write(fd, &one as *const u64 as *const libc::c_void, 8) };
        }
    }

    /// Send what waits in the backlog, in order, as far as the channels take it,
    /// then ring the doorbells of the shards that got mail.
    fn send_backlog(&mut self) {
        let mut woken = 0u64;
        // Shards (modulo 64) whose channel was found full: their later
        // messages wait too, so a channel's order is the order queued (the
        // receiver may free room meanwhile).
        let mut full = 0u64;
        let mut retry = VecDeque::new();
        while let Some((to, msg)) = self.backlog.pop_front() {
            let Some(Some(tx)) = self.senders.get_mut(to) else {
                continue;
            };
            if full & (1 << (to % 64)) != 0 {
                retry.push_back((to, msg));
                continue;
            }
            match tx.push(msg) {
                Ok(()) => {
                    woken |= 1 << (to % 64);
                    self.sent_messages += 1;
                }
                // The other shard is gone: the process is exiting.
                Err(_) if tx.is_abandoned() => {}
                Err(rtrb::PushError::Full(msg)) => {
                    full |= 1 << (to % 64);
                    retry.push_back((to, msg));
                }
            }
        }
        self.backlog = retry;
        for to in 0..self.doorbells.len() {
            if woken & (1 << (to % 64)) != 0 {
                self.ring(to);
            }
        }
    }
}
