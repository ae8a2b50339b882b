//! Two shards of the real server in one thread, without sockets or io_uring, for
//! the fuzz targets (fuzz/, docs/fuzzing.md) and for tests of cross-shard paths:
//! each shard is a [`ShardCore`] with its connections, the messages their outboxes
//! fill are handed to the other shard's [`messages::handle`](crate::shard::messages::handle) by hand, and time moves
//! only when the caller says. This is the shard loop of `shard.rs` minus the ring:
//! the same `dispatch::process_input`, routing, forwarding, lending, gathering and
//! blocking code runs, in a deterministic order. A panic is not caught here (the
//! shard loop's net would hide it from a fuzzer).

use crate::cluster::topology::Topology;
use crate::config::{Cli, Config, PortMode};
use crate::memory;
use crate::mesh::forward::ShardMsg;
use crate::mesh::lending;
use crate::net::conn::Conn;
use crate::net::slab::Slab;
use crate::shard::Shared;
use crate::shard::{dispatch, exec};
use crate::shard::{end_pause, ShardCore};
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

/// Two shards with one client each.
pub struct TwoShards {
    nodes: Vec<Node>,
    pub clients: Vec<Client>,
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
        let cli = Cli {
            shards: Some(2),
            port_mode: Some(mode),
            cpus: Some("0".into()),
            ..Cli::default()
        };
        let cfg = Config::load(cli).expect("a two-shard configuration");
        let topo = Arc::new(Topology::new(&cfg));
        let shared = Arc::new(Shared::new(cfg.shards, cfg.databases, START_MS));
        let mut nodes: Vec<Node> = (0..cfg.shards)
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
        let clients = (0..nodes.len())
            .map(|shard| {
                let id = shared.next_client_id();
                let peer = (
                    format!("127.0.0.1:{}", 40000 + shard),
                    "127.0.0.1:6379".into(),
                );
                let mut gen = 0;
                let index = nodes[shard].conns.insert_with(|_, g| {
                    gen = g;
                    // No socket: descriptor -1 makes a stray syscall fail harmlessly.
                    Conn::new(g, id, -1, peer, START_MS, shared.acl.new_session())
                });
                Client {
                    shard,
                    index,
                    gen,
                    id,
                }
            })
            .collect();
        TwoShards { nodes, clients }
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
        let mut messages: Vec<(usize, ShardMsg)> = Vec::new();
        self.nodes[from].core.outbox.take_messages(&mut messages);
        for (to, message) in messages {
            let node = &mut self.nodes[to];
            crate::shard::messages::handle(&mut node.core, &mut node.conns, message);
        }
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
                let mut messages: Vec<(usize, ShardMsg)> = Vec::new();
                self.nodes[from].core.outbox.take_messages(&mut messages);
                for (to, message) in messages {
                    moved = true;
                    let node = &mut self.nodes[to];
                    crate::shard::messages::handle(&mut node.core, &mut node.conns, message);
                }
            }
            for shard in 0..self.nodes.len() {
                // Every loop iteration lets the commands parked for the script
                // lock try again, and enforces maxmemory (it counts only when the
                // counting allocator is the global one, as in the binary).
                let node = &mut self.nodes[shard];
                crate::mesh::lending::resume_parked_for_lock(&mut node.core, &mut node.conns);
                memory::limit::enforce(&mut self.nodes[shard].core);
                for (index, gen) in std::mem::take(&mut self.nodes[shard].core.resume) {
                    moved = true;
                    self.run_input(shard, index, gen);
                }
            }
            if !moved {
                return;
            }
        }
        panic!("the shards still exchange messages after {SETTLE_ROUNDS_MAX} rounds");
    }

    /// Let `ms` pass: blocked commands, fill leases, loans and CLIENT PAUSE time
    /// out as the shard loop and its tick would do.
    pub fn advance(&mut self, ms: u64) {
        for node in &mut self.nodes {
            let core = &mut node.core;
            core.now_ms += ms;
            exec::expire_blocked(core, &mut node.conns);
            exec::expire_fill_leases(core, &mut node.conns);
            lending::expire(core, &mut node.conns);
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
