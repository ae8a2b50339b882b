//! Two shards (or more: [`TwoShards::with_shards`]) of the real server in one
//! thread, without sockets or io_uring, for
//! the fuzz targets (fuzz/, docs/fuzzing.md) and for tests of cross-shard paths:
//! each shard is a [`ShardCore`] with its connections, the messages their outboxes
//! fill go into one queue per pair of shards (a channel) and are handed to the
//! receiver's [`messages::take`](crate::shard::messages::take) by hand, and time moves
//! only when the caller says. This is the shard loop of `shard.rs` minus the ring:
//! the same `dispatch::process_input`, routing, forwarding, lending, gathering and
//! blocking code runs, in a deterministic order. A panic is not caught here (the
//! shard loop's net would hide it from a fuzzer).

use crate::cluster::topology::Topology;
use crate::config::{Cli, Config, PortMode};
use crate::memory;
use crate::mesh::forward::ShardMsg;
use crate::net::conn::Conn;
use crate::net::slab::Slab;
use crate::shard::Shared;
use crate::shard::{dispatch, exec};
use crate::shard::{end_pause, ShardCore};
use std::collections::VecDeque;
use std::sync::Arc;

/// The harness's wall clock starts here (any fixed time: runs are reproducible).
pub const START_MS: u64 = 1_700_000_000_000;

/// Message exchanges without the shards going quiet before it counts as a
/// livelock (the settle panics).
const SETTLE_ROUNDS_MAX: usize = 10_000;

/// RESP for a pipeline of commands (what a client writes in one go).
pub fn pipeline(commands: &[&[&str]]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for args in commands {
        bytes.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in *args {
            bytes.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
    }
    bytes
}

/// One shard with its connections.
struct Node {
    core: ShardCore,
    conns: Slab<Conn>,
}

/// A connected client: its shard and slab slot.
#[derive(Clone, Copy, Debug)]
pub struct Client {
    pub shard: usize,
    index: u32,
    gen: u32,
    id: u64,
}

/// What a client has seen so far.
#[derive(Debug)]
pub struct ClientView<'a> {
    /// Every reply released to it, in order.
    pub replies: &'a [u8],
    /// Some reply is still held (forwarded, blocked, split).
    pub holding: bool,
    pub blocked: bool,
    pub paused: bool,
    /// Closing (QUIT, CLIENT KILL): commands after that point are not run.
    pub closing: bool,
    /// Received bytes not parsed yet.
    pub unparsed: usize,
}

/// Two shards (or more) with one client each, and more on demand.
pub struct TwoShards {
    nodes: Vec<Node>,
    pub clients: Vec<Client>,
    /// `channels[from][to]`: messages shipped, not taken yet.
    channels: Vec<Vec<VecDeque<ShardMsg>>>,
    /// Reused by [`ship`](Self::ship) and [`take`](Self::take), as the shard
    /// loop reuses its backlog and channels: the harness allocates nothing per
    /// exchange (examples/forward_cost.rs counts the shards' work, not the harness's).
    shipping: Vec<(usize, ShardMsg)>,
    taking: VecDeque<ShardMsg>,
    shared: Arc<Shared>,
}

impl Default for TwoShards {
    fn default() -> Self {
        Self::new()
    }
}

impl TwoShards {
    /// Two shards in forward mode.
    pub fn new() -> TwoShards {
        Self::with_mode(PortMode::Forward)
    }

    /// Two shards in `mode` (per-shard mode: each answers as a cluster node).
    pub fn with_mode(mode: PortMode) -> TwoShards {
        Self::with_shards(mode, 2)
    }

    /// `shards` shards in `mode`.
    pub fn with_shards(mode: PortMode, shards: usize) -> TwoShards {
        let cli = Cli {
            shards: Some(shards),
            port_mode: Some(mode),
            cpus: Some("0".into()),
            ..Cli::default()
        };
        let cfg = Config::load(cli).expect("a configuration of several shards");
        let topo = Arc::new(Topology::new(&cfg));
        let shared = Arc::new(Shared::new(cfg.shards, cfg.databases, START_MS));
        let nodes: Vec<Node> = (0..cfg.shards)
            .map(|id| {
                let mut core = ShardCore::new(id, cfg.clone(), topo.clone(), shared.clone())
                    .expect("an in-memory shard starts");
                core.now_ms = START_MS;
                Node {
                    core,
                    conns: Slab::default(),
                }
            })
            .collect();
        let n = nodes.len();
        let mut harness = TwoShards {
            nodes,
            clients: Vec::new(),
            channels: (0..n)
                .map(|_| (0..n).map(|_| VecDeque::new()).collect())
                .collect(),
            shipping: Vec::new(),
            taking: VecDeque::new(),
            shared,
        };
        for shard in 0..n {
            harness.connect(shard);
        }
        harness
    }

    /// A new client of `shard`: its index among the clients.
    pub fn connect(&mut self, shard: usize) -> usize {
        let id = self.shared.next_client_id();
        let c = self.clients.len();
        let peer = (format!("127.0.0.1:{}", 40000 + c), "127.0.0.1:6379".into());
        let mut gen = 0;
        let acl = self.shared.acl.new_session();
        let node = &mut self.nodes[shard];
        let index = node.conns.insert_with(|_, g| {
            gen = g;
            // No socket: descriptor -1 makes a stray syscall fail harmlessly.
            Conn::new(g, id, -1, peer, START_MS, acl)
        });
        let who = (index, gen);
        node.core.tracking.connected(&self.shared.tracking, id, who);
        self.clients.push(Client {
            shard,
            index,
            gen,
            id,
        });
        c
    }

    /// Bytes arrive on client `c`'s connection: run them, then let the shards
    /// exchange messages until they are quiet.
    pub fn receive(&mut self, c: usize, bytes: &[u8]) {
        self.receive_unsettled(c, bytes);
        self.settle();
    }

    /// Bytes arrive on client `c`'s connection and run, but the shards keep their
    /// messages until [`deliver_from`](Self::deliver_from) or [`settle`](Self::settle):
    /// for tests of what arrives in which order.
    pub fn receive_unsettled(&mut self, c: usize, bytes: &[u8]) {
        let client = self.clients[c];
        if let Some(conn) = self.nodes[client.shard]
            .conns
            .get_mut(client.index, client.gen)
        {
            conn.input.extend_from_slice(bytes);
        }
        self.run_input(client.shard, client.index, client.gen);
    }

    /// Hand the messages shard `from` has queued so far to their shards, once.
    pub fn deliver_from(&mut self, from: usize) {
        self.ship(from);
        for to in 0..self.nodes.len() {
            self.take(from, to);
        }
    }

    /// Move what shard `from` queued into its channels (its loop's end).
    pub fn ship(&mut self, from: usize) {
        let mut messages = std::mem::take(&mut self.shipping);
        self.nodes[from].core.outbox.take_messages(&mut messages);
        for (to, message) in messages.drain(..) {
            self.channels[from][to].push_back(message);
        }
        self.shipping = messages;
    }

    /// Shard `to` takes everything in the channel from `from`; false when
    /// it was empty.
    pub fn take(&mut self, from: usize, to: usize) -> bool {
        if self.channels[from][to].is_empty() {
            return false;
        }
        let mut messages = std::mem::take(&mut self.taking);
        std::mem::swap(&mut messages, &mut self.channels[from][to]);
        let node = &mut self.nodes[to];
        for message in messages.drain(..) {
            crate::shard::messages::take(&mut node.core, &mut node.conns, from, message);
        }
        self.taking = messages;
        true
    }

    /// Client `c` sends one command (encoded as RESP).
    pub fn send(&mut self, c: usize, args: &[&str]) {
        self.receive(c, &pipeline(&[args]));
    }

    /// What `shard.rs`'s `run_input` does, without the panic net (a panic is a finding).
    fn run_input(&mut self, shard: usize, index: u32, gen: u32) {
        let node = &mut self.nodes[shard];
        let Some(mut conn) = node.conns.take(index, gen) else {
            return;
        };
        dispatch::process_input(&mut node.core, &mut node.conns, &mut conn, index);
        node.conns.restore(index, conn);
    }

    /// Deliver messages and run unblocked connections until nothing moves.
    pub fn settle(&mut self) {
        for _ in 0..SETTLE_ROUNDS_MAX {
            let mut moved = false;
            for from in 0..self.nodes.len() {
                self.ship(from);
                for to in 0..self.nodes.len() {
                    moved |= self.take(from, to);
                }
            }
            for shard in 0..self.nodes.len() {
                // Every loop iteration lets the commands parked for the script
                // lock try again, and enforces maxmemory (it counts only when the
                // counting allocator is the global one, as in the binary).
                let node = &mut self.nodes[shard];
                super::lending::resume_parked_for_lock(&mut node.core, &mut node.conns);
                memory::limit::enforce(&mut self.nodes[shard].core);
                for (index, gen) in std::mem::take(&mut self.nodes[shard].core.resume) {
                    moved = true;
                    self.run_input(shard, index, gen);
                }
                // The end of the loop iteration: a batch of borrowing commands
                // sends its keys home.
                let node = &mut self.nodes[shard];
                moved |= !node.core.lending.kept.is_empty();
                super::lending::send_kept_home(&mut node.core, &mut node.conns);
            }
            if !moved {
                return;
            }
        }
        panic!("the shards still exchange messages after {SETTLE_ROUNDS_MAX} rounds");
    }

    /// Borrowing commands of shard `shard` that ran on keys a batch kept there
    /// (INFO's `cross_shard_ran_on_kept_keys`, that shard's part).
    pub fn ran_on_kept(&self, shard: usize) -> u64 {
        self.nodes[shard].core.stats.ran_on_kept
    }

    /// Let `ms` pass: blocked commands, fill leases, loans and CLIENT PAUSE time
    /// out as the shard loop and its tick would do.
    pub fn advance(&mut self, ms: u64) {
        for node in &mut self.nodes {
            let core = &mut node.core;
            core.now_ms += ms;
            exec::expire_blocked(core, &mut node.conns);
            exec::expire_fill_leases(core, &mut node.conns);
            super::lending::expire(core, &mut node.conns);
            if core.pause.expired(core.now_ms) {
                end_pause(core, &mut node.conns);
            }
        }
        self.settle();
    }

    /// CLIENT UNBLOCK for every client on every shard, and the end of any pause;
    /// false when there was nothing to release.
    pub fn release_everyone(&mut self) -> bool {
        let ids: Vec<u64> = self.clients.iter().map(|c| c.id).collect();
        let mut released = false;
        for node in &mut self.nodes {
            for &id in &ids {
                released |= exec::unblock(&mut node.core, &mut node.conns, id, false);
            }
            released |= node.core.pause.is_active();
            end_pause(&mut node.core, &mut node.conns);
        }
        self.settle();
        released
    }

    /// Some client waits (blocked, paused, or for a reply still held).
    pub fn anyone_waits(&self) -> bool {
        (0..self.clients.len()).any(|c| {
            let view = self.view(c);
            view.blocked || view.paused || view.holding
        })
    }

    /// The shard that owns `key` (forward mode's routing).
    pub fn key_owner(&self, key: &[u8]) -> usize {
        self.nodes[0].core.topo.key_owner(key)
    }

    /// Client `c`'s released replies are sent: the queue's ready bytes are
    /// dropped, as the shard loop's send empties them (a long measurement
    /// would otherwise grow one buffer without bound).
    pub fn clear_replies(&mut self, c: usize) {
        let client = self.clients[c];
        if let Some(conn) = self.nodes[client.shard]
            .conns
            .get_mut(client.index, client.gen)
        {
            conn.replies.ready.clear();
        }
    }

    /// Client `c` as it stands.
    pub fn view(&self, c: usize) -> ClientView<'_> {
        let client = self.clients[c];
        let conn = self.nodes[client.shard]
            .conns
            .get(client.index, client.gen)
            .expect("the harness never closes a connection");
        ClientView {
            replies: &conn.replies.ready,
            holding: conn.replies.is_holding(),
            blocked: conn.client.blocked.is_some(),
            paused: conn.client.paused,
            closing: conn.client.closing,
            unparsed: conn.input.len() - conn.input_start,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn has(hay: &[u8], needle: &[u8]) -> bool {
        hay.windows(needle.len()).any(|w| w == needle)
    }

    /// A key of `shard`.
    fn key_of(harness: &TwoShards, prefix: &str, shard: usize) -> String {
        let topo = &harness.nodes[0].core.topo;
        (0..)
            .map(|i| format!("{prefix}{i}"))
            .find(|k| topo.key_owner(k.as_bytes()) == shard)
            .expect("a key of every shard")
    }

    /// Three shards: a reader on shard 2 (redirecting to a RESP2 subscriber
    /// of its shard) reads a key of shard 1; before shard 1's reply reaches
    /// shard 2, a writer on shard 0 writes that key and one of shard 0 in one
    /// MSET. Shard 1 sends the invalidation back to the origin, shard 0, which
    /// relays it to shard 2: there it waits until shard 2 took shard 1's
    /// message with the read's reply, so the target never hears of the write
    /// before the reader has the value it replaced.
    #[test]
    fn a_relayed_invalidation_waits_for_the_owner_channel() {
        let mut s = TwoShards::with_shards(PortMode::Forward, 3);
        let (ka, kb) = (key_of(&s, "a", 0), key_of(&s, "b", 1));
        let (writer, target) = (0, 2);
        let reader = s.connect(2);
        s.send(target, &["SUBSCRIBE", "__redis__:invalidate"]);
        let id = s.clients[target].id.to_string();
        s.send(reader, &["CLIENT", "TRACKING", "ON", "REDIRECT", &id]);
        assert_eq!(s.view(reader).replies, b"+OK\r\n");
        s.send(writer, &["SET", &kb, "old"]);
        // The read runs on shard 1; its reply waits in shard 1's channel to 2.
        s.receive_unsettled(reader, &pipeline(&[&["GET", &kb]]));
        s.ship(2);
        assert!(s.take(2, 1));
        s.ship(1);
        // The write: shard 1's part, its reply (and the invalidation) to
        // shard 0, shard 0's relay to shard 2.
        s.receive_unsettled(writer, &pipeline(&[&["MSET", &ka, "new", &kb, "new"]]));
        s.ship(0);
        assert!(s.take(0, 1));
        s.ship(1);
        assert!(s.take(1, 0));
        assert!(has(s.view(writer).replies, b"+OK\r\n+OK\r\n"));
        s.ship(0);
        assert!(s.take(0, 2), "the relayed invalidation");
        assert!(s.view(reader).holding);
        let message = format!(
            "$20\r\n__redis__:invalidate\r\n*1\r\n${}\r\n{kb}\r\n",
            kb.len()
        );
        assert!(
            !has(s.view(target).replies, message.as_bytes()),
            "the write is heard of before the read's reply is in"
        );
        // Shard 2 takes the read's reply: the invalidation follows it.
        assert!(s.take(1, 2));
        assert_eq!(s.view(reader).replies, b"+OK\r\n$3\r\nold\r\n");
        assert!(has(s.view(target).replies, message.as_bytes()));
        s.settle();
        assert!(!s.anyone_waits());
    }
}
