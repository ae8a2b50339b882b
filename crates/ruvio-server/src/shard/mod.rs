//! One shard: a pinned thread running a glommio executor whose single task drives
//! the shard's sockets through an io_uring ring of its own (see docs/runtime.md
//! for why the sockets are not on glommio's ring).
//!
//! The loop: wait for completions (one `io_uring_enter` that also submits), handle
//! them (accept, receive → parse → execute → replies, send done), take messages
//! from the other shards, ship forwarded work, start one send per connection with
//! new replies, run the background tick. Everything the shard owns (keyspace,
//! connections) is touched only by this thread.
//!
//! The folder is the shard as a whole, the top floor of docs/architecture.md: the
//! loop (here: completions, accepting, the tick), a connection's receives and
//! sends on the ring (`conn_io.rs`), the log's writes and fsyncs on it
//! (`log_io.rs`), its state ([`ShardCore`], in `state.rs`; [`Shared`], what every
//! shard reads), the path from bytes to a routed command ([`dispatch`]), running a
//! command on the keyspace and consuming its effects ([`exec`]; what it did recorded
//! for the logs: `observe.rs`), clients blocked on keys ([`blocking`]; parked,
//! served and released: `parked.rs`), CLIENT PAUSE ([`pause`]), the other clients answered while
//! a script is busy ([`busy`]), the metrics endpoint's sockets (`metrics.rs`) and
//! two shards in one thread for the fuzz targets ([`inproc`]). What lower layers
//! ask of the shard through interfaces they define is implemented here, one file
//! each: `maxmemory` ([`eviction`]), SHUTDOWN (`exit.rs`), snapshots (`save.rs`),
//! replies released by the log (`release.rs`), the server families (`families.rs`),
//! CONFIG's parameters and broadcast changes (`settings.rs`) and gathered answers
//! (`gathered.rs`).

pub mod blocking;
pub mod busy;
pub mod busy_routes;
mod conn_io;
pub mod dispatch;
mod elsewhere;
pub mod eviction;
pub mod exec;
pub mod exec_run;
mod exit;
mod families;
mod gathered;
pub mod in_place;
pub mod inproc;
mod lending;
mod log_io;
pub mod messages;
mod metrics;
pub mod monitor;
pub mod multi;
mod node_forward;
mod node_replica;
mod observe;
mod parked;
pub mod pause;
mod prefetch;
mod primary;
mod refusals;
mod release;
mod replica;
mod route;
mod save;
mod settings;
mod shared;
mod slot_export;
mod slot_import;
mod state;
mod tls;

pub use shared::Shared;
pub use state::{
    blocked_here, end_pause, memory_figures, publish_gauges, publish_memory, ShardCore,
};

use crate::clock::unix_ms;
use crate::cluster::topology::Topology;
use crate::config::Config;
use crate::mesh::forward::{self, Mesh};
use crate::net::conn::{ClientState, Conn};
use crate::net::slab::Slab;
use io_uring::{cqueue, opcode, types, IoUring};
use prefetch::KeyWindow;
use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

/// Submission queue entries; completions get twice as many (kernel default).
const RING_ENTRIES: u32 = 4096;
/// A declared bulk's buffer grows by at most what has arrived, or this much: memory
/// follows the bytes a client really sent, not the length it announced.
const INPUT_GROWTH_MIN_BYTES: usize = 1 << 20;
/// A connection's input or output buffer above this capacity is given back once it
/// is empty: one 512 MB SET or GET must not pin its buffer for the connection's life.
const BUFFER_KEEP_BYTES: usize = 1 << 20;
/// How often `timeout` looks for idle clients (Redis checks each client about once
/// a second too).
const IDLE_SWEEP_EVERY_MS: u64 = 1000;
/// How often a shard publishes its memory figures (`publish_memory`).
const MEMORY_PUBLISH_EVERY_MS: u64 = 1000;
/// How long a shard waits before retrying when the kernel could not take its ring's
/// submissions (EAGAIN, ENOMEM): long enough not to spin, short for clients.
const RING_BACKOFF: Duration = Duration::from_millis(1);
/// The background tick (gauges, active expiry).
const TICK: Duration = Duration::from_millis(10);
/// Keys examined by active expiry per tick, so a tick never pauses the shard.
const EXPIRE_KEYS_PER_TICK: usize = 500;

/// `IORING_RECVSEND_POLL_FIRST`: a receive is re-armed right after its connection's
/// replies were produced, when the client has not answered yet; trying the socket
/// first would fail every time at pipeline 1, so wait for readiness straight away.
const RECV_POLL_FIRST: u16 = 1 << 0;

/// Slots of the ring's registered file table: connections with a lower slab index
/// use fixed files, the rest plain descriptors.
const FIXED_FILES: u32 = 4096;

/// Operation kinds carried in the top byte of a completion's user data.
const OP_ACCEPT: u64 = 1;
const OP_RECV: u64 = 2;
const OP_SEND: u64 = 3;
const OP_DOORBELL: u64 = 4;
const OP_WAL_WRITE: u64 = 5;
const OP_WAL_FSYNC: u64 = 6;
const OP_WAL_FSYNC_DELAY: u64 = 7;
const OP_WAL_ZERO_FILL: u64 = 8;
const OP_WAL_WRITE_LATE: u64 = 9;
/// The metrics endpoint's listener and HTTP connections (`metrics.rs`, shard 0).
const OP_METRICS_ACCEPT: u64 = 10;
const OP_METRICS_RECV: u64 = 11;
const OP_METRICS_SEND: u64 = 12;
/// Redis 7's answer to a client from outside loopback in protected mode.
const PROTECTED_MODE_DENIED: &[u8] = b"-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";
/// An accept on the TLS listener (`tls.rs`).
const OP_TLS_ACCEPT: u64 = 13;

fn token(op: u64, gen: u32, index: u32) -> u64 {
    (op << 56) | ((gen as u64) << 32) | index as u64
}

fn untoken(data: u64) -> (u64, u32, u32) {
    (data >> 56, ((data >> 32) & 0x00ff_ffff) as u32, data as u32)
}

/// A log group number (56 bits are plenty) in the `gen` and `index` of a token.
fn token_group(group: u64) -> (u32, u32) {
    (((group >> 32) & 0x00ff_ffff) as u32, group as u32)
}

fn untoken_group(gen: u32, index: u32) -> u64 {
    ((gen as u64) << 32) | index as u64
}

/// A shard with its sockets.
pub struct Shard {
    pub core: ShardCore,
    pub conns: Slab<Conn>,
    ring: IoUring,
    listener: socket2::Socket,
    doorbell_value: Box<u64>,
    next_tick_ms: u64,
    /// The last accept failed (out of descriptors ...): accept again at the next tick.
    accept_failed: bool,
    /// When `timeout` next looks for idle clients.
    next_idle_sweep_ms: u64,
    /// When this shard next publishes its memory figures (0: at the first tick).
    next_memory_publish_ms: u64,
    /// The ring has a registered file table (kernels since 5.19).
    fixed_files: bool,
    /// This iteration's receiving connections, in completion order, with the first
    /// keys of their batches (see [`Shard::take_received`]).
    windows: Vec<(u32, u32, KeyWindow)>,
    /// The window of the batch that runs next.
    window_cursor: usize,
    /// Submissions that found the ring's queue full, in order; they go in as room
    /// appears (before each wait), never by spinning on a full queue.
    overflow: VecDeque<io_uring::squeue::Entry>,
    /// Connections with input left unread while the mesh was congested.
    deferred: Vec<(u32, u32)>,
    /// The metrics endpoint (`metrics-port`), on shard 0 only.
    metrics: Option<metrics::MetricsServer>,
    /// The TLS port (`tls-port`), when TLS is on.
    tls: Option<tls::TlsPort>,
    /// Shard 0 of a replica: the link to the primary (see `replica.rs`).
    replica: Option<replica::Follower>,
    /// This shard's part of a full sync, built and waiting for every other
    /// shard's before it goes in place (`replication::load`).
    full_sync_part: Option<crate::replication::load::Built>,
    /// Shard 0: when the replicas get their next PING (0: none attached).
    next_replica_ping_ms: u64,
    /// The next PING into this shard's own history while a Ruvio replica's
    /// link for this shard follows it (forward mode; `shard/primary.rs`).
    next_link_ping_ms: u64,
}

impl Shard {
    /// Set up shard `id`: its keyspace, ring and listening socket.
    pub fn new(
        id: usize,
        cfg: Config,
        topo: Arc<Topology>,
        shared: Arc<Shared>,
    ) -> std::io::Result<Shard> {
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_coop_taskrun()
            .setup_taskrun_flag()
            .build(RING_ENTRIES)?;
        let fixed_files = ring.submitter().register_files_sparse(FIXED_FILES).is_ok();
        let listener = crate::net::socket::listen(
            &cfg.bind,
            cfg.shard_port(id),
            cfg.shards > 1 && cfg.port_mode == crate::config::PortMode::Forward,
        )?;
        let metrics = metrics::MetricsServer::open(&cfg, id)?;
        let (tls, tls_settings) = tls::TlsPort::open(&cfg, id, &shared.tls_sessions)?.unzip();
        if id == 0 {
            replica::follow_configured(&cfg, &shared.replication);
        }
        let mut core = ShardCore::new(id, cfg, topo, shared)?;
        core.tls_settings = tls_settings;
        Ok(Shard {
            core,
            conns: Slab::default(),
            ring,
            listener,
            doorbell_value: Box::new(0),
            next_tick_ms: 0,
            accept_failed: false,
            next_idle_sweep_ms: 0,
            next_memory_publish_ms: 0,
            fixed_files,
            windows: Vec::new(),
            window_cursor: 0,
            overflow: VecDeque::new(),
            deferred: Vec::new(),
            metrics,
            tls,
            replica: None,
            full_sync_part: None,
            next_replica_ping_ms: 0,
            next_link_ping_ms: 0,
        })
    }

    /// Run the shard until the process exits.
    pub async fn run(mut self) {
        let settings = busy::Settings {
            shard: self.core.id,
            topo: self.core.topo.clone(),
            announce_ip: self.core.cfg.cluster_announce_ip.clone(),
            cluster_bus: self.core.cfg.cluster_bus(),
            acl: self.core.shared.acl.clone(),
            shared: self.core.shared.clone(),
        };
        busy::install(std::os::fd::AsRawFd::as_raw_fd(&self.listener), settings);
        self.arm_accept();
        self.arm_doorbell();
        self.arm_metrics_accept();
        self.arm_tls_accept();
        let mut completions: Vec<(u64, i32, u32)> = Vec::with_capacity(RING_ENTRIES as usize);
        loop {
            self.wait_for_completions();
            self.core.now_ms = unix_ms();
            completions.clear();
            completions.extend(
                self.ring
                    .completion()
                    .map(|c| (c.user_data(), c.result(), c.flags())),
            );
            self.take_received(&completions);
            for &(data, result, flags) in &completions {
                self.complete(data, result, flags);
            }
            self.take_mesh_messages();
            if self.core.blocking.has_ready() {
                // Keys written by another shard's run here (a SWAPDB or a script
                // under the script lock, run from its spin) wake their waiters now.
                crate::shard::exec::serve_ready(&mut self.core, &mut self.conns);
            }
            lending::resume_parked_for_lock(&mut self.core, &mut self.conns);
            crate::shard::exec::expire_blocked(&mut self.core, &mut self.conns);
            crate::shard::exec::expire_fill_leases(&mut self.core, &mut self.conns);
            lending::expire(&mut self.core, &mut self.conns);
            slot_export::turn(&mut self.core, &mut self.conns);
            self.run_waiting_imports();
            crate::shard::parked::redirect_blocked(&mut self.core, &mut self.conns);
            self.shard_link_step();
            self.resume_unblocked();
            self.resume_backed_up();
            lending::end_batch_if_done(&mut self.core, &mut self.conns);
            lending::send_kept_home(&mut self.core, &mut self.conns);
            // The latency monitor's `eviction-cycle`.
            let timed = (self.core.cfg.maxmemory != 0)
                .then(|| self.core.timing.monitor_start())
                .flatten();
            crate::memory::limit::enforce(&mut self.core);
            let (timing, now_ms) = (&self.core.timing, self.core.now_ms);
            timing.sample(
                &self.core.shared.observatory,
                "eviction-cycle",
                timed,
                now_ms,
            );
            self.core.deliver_notifications(&mut self.conns);
            if self.core.tracking.owes() || self.core.tracking.active() {
                let (tracking, mut to) = self.core.tracking_parts();
                tracking.deliver_owed(&mut to, &mut self.conns);
            }
            self.primary_step();
            self.ship_outbox();
            self.run_deferred();
            crate::persistence::snapshot::run_slice(&mut self.core);
            self.core.poll_loading();
            self.submit_wal_write();
            self.flush_dirty();
            if self.core.now_ms >= self.next_tick_ms {
                self.tick();
            }
            // Never yield to glommio's executor (docs/runtime.md, "Timers"):
            // the shard's I/O is on its own ring, this is glommio's only task,
            // and glommio 0.9 can park for good after a yield whose preemption
            // timer had fired before the task ran again.
        }
    }

    /// Submit queued operations and wait for at least one completion or the next tick.
    /// A transient failure (the kernel out of memory for the ring's work) backs off
    /// for a millisecond; a failure that says the ring itself is unusable ends the
    /// process with a message, since this shard cannot go on.
    fn wait_for_completions(&mut self) {
        self.submit_overflow();
        let wait_ms = self
            .next_tick_ms
            .saturating_sub(unix_ms())
            .min(TICK.as_millis() as u64);
        // A slot migration's stream is a plain socket, not on the ring, and
        // its slices are earned by the clock: an idle shard would sleep to
        // its tick with a handover's writes held, or its keys unsent. Wake
        // every millisecond while one works (FINISH's answer then waits a
        // round trip or so), or at once while its clients are idle.
        let wait_ms = match slot_export::sleep_ms_max(&self.core) {
            Some(max) => wait_ms.min(max),
            None => wait_ms,
        };
        // A background save writes a slice per iteration, and this shard's next
        // locked command of a batch goes on at once (`script_lock`): do not sleep
        // meanwhile. (A shard does sleep while another shard's script holds the
        // lock: the holder's requests ring its doorbell. Polling instead took the
        // CPU from whatever shares it: the load generator, or, with two shards on
        // one CPU, the holder itself, which then waited out whole time slices.)
        let busy = self.core.background_save.busy()
            || self.core.lending.holding_batch()
            || self.core.replication.busy()
            || self.replica_behind();
        let wait_ms = if busy { 0 } else { wait_ms };
        let ts = types::Timespec::new().nsec((wait_ms as u32) * 1_000_000);
        let args = types::SubmitArgs::new().timespec(&ts);
        let Err(e) = self.ring.submitter().submit_with_args(1, &args) else {
            return;
        };
        match e.raw_os_error() {
            Some(libc::ETIME | libc::EINTR | libc::EBUSY) => {}
            Some(libc::EAGAIN | libc::ENOMEM) => {
                std::thread::sleep(RING_BACKOFF);
            }
            _ => {
                eprintln!(
                    "ruvio: shard {}: io_uring_enter failed: {e}; exiting",
                    self.core.id
                );
                std::process::exit(crate::EXIT_SHARD_FAILED);
            }
        }
    }

    /// Queue one submission; if the ring's queue is full even after submitting what
    /// it holds, keep it in `overflow` (order kept) for the next wait.
    fn push(&mut self, entry: io_uring::squeue::Entry) {
        if self.overflow.is_empty() && self.try_push(&entry) {
            return;
        }
        self.overflow.push_back(entry);
    }

    /// Move waiting submissions into the ring while it has room.
    fn submit_overflow(&mut self) {
        while let Some(entry) = self.overflow.pop_front() {
            if !self.try_push(&entry) {
                self.overflow.push_front(entry);
                return;
            }
        }
    }

    fn try_push(&mut self, entry: &io_uring::squeue::Entry) -> bool {
        // SAFETY: every buffer referenced by an entry lives in a connection (or the
        // shard) that is not freed or resized until the operation completes; an entry
        // waiting in `overflow` counts as in flight for that rule.
        unsafe {
            if self.ring.submission().push(entry).is_ok() {
                return true;
            }
            let _ = self.ring.submit();
            self.ring.submission().push(entry).is_ok()
        }
    }

    fn arm_accept(&mut self) {
        use std::os::fd::AsRawFd;
        let fd = self.listener.as_raw_fd();
        self.push(
            opcode::AcceptMulti::new(types::Fd(fd))
                .flags(libc::SOCK_CLOEXEC)
                .build()
                .user_data(token(OP_ACCEPT, 0, 0)),
        );
    }

    fn arm_doorbell(&mut self) {
        let Some(fd) = forward::with_mesh(|m| m.my_doorbell()) else {
            return;
        };
        let buf = &mut *self.doorbell_value as *mut u64 as *mut u8;
        self.push(
            opcode::Read::new(types::Fd(fd), buf, 8)
                .build()
                .user_data(token(OP_DOORBELL, 0, 0)),
        );
    }

    fn complete(&mut self, data: u64, result: i32, flags: u32) {
        let (op, gen, index) = untoken(data);
        match op {
            OP_ACCEPT => {
                if result >= 0 {
                    self.accepted(result);
                } else {
                    // EMFILE, ENFILE, ENOMEM ...: try again at the next tick rather
                    // than spin on a failing accept.
                    self.accept_failed = true;
                }
                if !cqueue::more(flags) && !self.accept_failed {
                    self.arm_accept();
                }
            }
            OP_RECV => {
                if result > 0 {
                    self.prefetch_ahead();
                }
                self.received(index, gen, result)
            }
            OP_SEND => self.sent(index, gen, result),
            OP_DOORBELL => self.arm_doorbell(),
            OP_METRICS_ACCEPT..=OP_METRICS_SEND => self.metrics_io(op, gen, index, result, flags),
            OP_TLS_ACCEPT => self.tls_accepted(result, flags),
            OP_WAL_WRITE if crate::persistence::wal::write_reported_late(self.core.id) => {
                self.push_late_write_report(result)
            }
            OP_WAL_WRITE => self.wal_written(result),
            OP_WAL_WRITE_LATE => self.wal_written(index as i32),
            OP_WAL_FSYNC_DELAY => self.push_fsync(gen as RawFd, index as u64),
            OP_WAL_ZERO_FILL => {
                if let Some(wal) = self.core.wal.as_mut() {
                    wal.zero_fill_done(result);
                }
                self.sample_log_latencies();
                self.exit_flush_if_waiting();
                self.submit_wal_write();
            }
            OP_WAL_FSYNC => {
                if let Some(wal) = self.core.wal.as_mut() {
                    wal.fsync_done(result, untoken_group(gen, index));
                    let gauges = &self.core.shared.shards[self.core.id];
                    gauges.log_synced_bytes.store(wal.synced_bytes(), Relaxed);
                }
                self.sample_log_latencies();
                crate::persistence::durable::release(&mut self.core, &mut self.conns);
                self.submit_wal_write();
            }
            _ => {}
        }
    }

    /// Take a new connection (its slab index and generation; None when refused).
    fn accepted(&mut self, fd: RawFd) -> Option<(u32, u32)> {
        self.accepted_with(fd, None, None)
    }

    /// A connection accepted on descriptor `fd`, with its TLS session when it
    /// came in on the TLS port.
    fn accepted_with(
        &mut self,
        fd: RawFd,
        tls: Option<Box<crate::net::tls::TlsConn>>,
        client: Option<Box<ClientState>>,
    ) -> Option<(u32, u32)> {
        if !self.core.shared.admit_client(self.core.cfg.maxclients) {
            // Redis answers, then closes: the client sees why.
            const FULL: &[u8] = b"-ERR max number of clients reached\r\n";
            // SAFETY: a write and a close on the descriptor accept just gave us.
            unsafe {
                libc::write(fd, FULL.as_ptr().cast(), FULL.len());
                libc::close(fd);
            }
            self.core.stats.rejected_connections += 1;
            return None;
        }
        let sock = crate::net::socket::adopt(fd);
        if self.protected_mode_denies(&sock.0) {
            // SAFETY: a write and a close on the descriptor accept just gave us.
            unsafe {
                libc::write(
                    fd,
                    PROTECTED_MODE_DENIED.as_ptr().cast(),
                    PROTECTED_MODE_DENIED.len(),
                );
                libc::close(fd);
            }
            self.core.shared.client_gone();
            return None;
        }
        // A connection the busy-script hook accepted comes with its state.
        let client_id = match &client {
            Some(client) => client.id,
            None => self.core.shared.next_client_id(),
        };
        let now = self.core.now_ms;
        let session = self.core.shared.acl.new_session();
        let mut conn_gen = 0;
        let index = self.conns.insert_with(|_, gen| {
            conn_gen = gen;
            let mut conn = Conn::new(gen, client_id, fd, sock, now, session);
            if let Some(client) = client {
                conn.client = *client;
            }
            conn.client.tls = tls.is_some();
            conn.tls = tls;
            conn
        });
        self.core.stats.connections_received += 1;
        let directory = &self.core.shared.tracking;
        self.core
            .tracking
            .connected(directory, client_id, (index, conn_gen));
        if let Some(conn) = self.conns.get(index, conn_gen) {
            let observatory = &self.core.shared.observatory;
            observatory.client_connected(client_id, &conn.client.peer);
        }
        self.register_fixed_file(index, conn_gen, fd);
        self.arm_recv(index, conn_gen);
        Some((index, conn_gen))
    }

    /// `protected-mode yes` (the default) and no password for the default user: a
    /// client from outside the loopback interface is told why and closed, as Redis
    /// 7 does at accept.
    fn protected_mode_denies(&self, peer: &str) -> bool {
        let cfg = &self.core.cfg;
        !self.core.shared.acl.auth_required()
            && cfg.param("protected-mode") == "yes"
            && !crate::net::socket::is_loopback(peer)
    }

    /// Take over what the busy-script hook left ([`busy`]): the connections it
    /// accepted, the replies their sockets did not take whole (queued first), its
    /// `-BUSY` answers in the error statistics. Cold: only after a busy script.
    #[cold]
    #[inline(never)]
    fn adopt_busy_leftovers(&mut self) {
        let left = busy::take_leftovers();
        for ended in left.unwatched {
            crate::transactions::multi::forget_unwatched(
                &mut self.core,
                ended.client_id,
                ended.epoch + 1,
                ended.keys,
            );
        }
        // WATCHes left by a script that did not end through `run_engine`: a
        // write of the script after the `+OK`, of any key, touches them.
        let writes_now = ruvio_engine::scripting::script_writes();
        for watch in left.watches {
            let who = crate::transactions::watch::WatchingClient {
                shard: self.core.id,
                client_id: watch.client_id,
                epoch: watch.epoch,
            };
            let core = &mut self.core;
            core.watches
                .register(&core.engine, core.now_ms, who, watch.db, &watch.keys);
            if writes_now > watch.writes_at {
                core.watches.mark_touched(watch.client_id, watch.epoch);
            }
        }
        let refused = ruvio_engine::CmdError::Line(b"BUSY".to_vec());
        for _ in 0..left.refused_busy {
            self.core.stats.count_error(&refused);
        }
        let mut adopted = Vec::with_capacity(left.accepted.len());
        for fresh in left.accepted {
            adopted.push((
                fresh.fd,
                self.accepted_with(fresh.fd, None, Some(fresh.client)),
            ));
        }
        for (target, bytes) in left.unsent {
            let who = match target {
                busy::Target::Conn(index, gen) => Some((index, gen)),
                busy::Target::Fresh(fd) => adopted.iter().find(|a| a.0 == fd).and_then(|a| a.1),
            };
            let Some((index, gen)) = who else {
                continue;
            };
            if let Some(conn) = self.conns.get_mut(index, gen) {
                conn.replies.sink().extend_from_slice(&bytes);
                self.core.dirty.push((index, gen));
            }
        }
        // WATCHes of other shards' keys the hook answered: `+OK` once every owner
        // registered them, in a held slot until then (after what was unsent).
        for awaiting in left.awaiting {
            let who = match awaiting.target {
                busy::Target::Conn(index, gen) => Some((index, gen)),
                busy::Target::Fresh(fd) => adopted.iter().find(|a| a.0 == fd).and_then(|a| a.1),
            };
            let Some((index, gen)) = who else {
                continue;
            };
            let Some(conn) = self.conns.get_mut(index, gen) else {
                continue;
            };
            let seq = conn.replies.hold(crate::net::conn::Merge::AllOk, 1);
            busy::hold_awaited((index, gen), seq, awaiting.left);
        }
        for ((index, gen), seq) in busy::ready_held() {
            if let Some(conn) = self.conns.get_mut(index, gen) {
                conn.replies.fill(seq, 0, b"+OK\r\n".to_vec());
                self.core.dirty.push((index, gen));
            }
        }
    }

    /// Put the socket in the ring's file table at the connection's index, so its
    /// operations skip the per-operation file lookup and reference counting.
    fn register_fixed_file(&mut self, index: u32, gen: u32, fd: RawFd) {
        let registered = self.fixed_files
            && index < FIXED_FILES
            && self
                .ring
                .submitter()
                .register_files_update(index, &[fd])
                .is_ok();
        if let Some(conn) = self.conns.get_mut(index, gen) {
            conn.fixed = registered;
        }
    }

    fn take_mesh_messages(&mut self) {
        let Some((answered, messages)) = forward::with_mesh(Mesh::receive_all) else {
            return;
        };
        for (from, message) in messages {
            messages::take(&mut self.core, &mut self.conns, from, message);
        }
        messages::answers_taken(&mut self.core, &mut self.conns, answered);
        if busy::has_leftovers() {
            self.adopt_busy_leftovers();
        }
    }

    fn ship_outbox(&mut self) {
        // A write's records reach the backlog before its reply leaves the shard,
        // so a WAIT after the reply counts them (and WAITAOF its log bytes).
        self.flush_feed();
        if let Some(wal) = self.core.wal.as_ref() {
            let gauges = &self.core.shared.shards[self.core.id];
            gauges
                .log_appended_bytes
                .store(wal.appended_bytes(), Relaxed);
        }
        // Lines fed by commands run for other shards, blocked clients, scripts.
        monitor::hand_out(&mut self.core, &mut self.conns, None);
        // A lone shard has no mesh and its outbox stays empty.
        forward::with_mesh(|mesh| mesh.ship(&mut self.core.outbox));
    }

    /// New requests wait while a peer shard is behind or the log's disk is.
    fn input_must_wait(&self) -> bool {
        forward::with_mesh(|m| m.congested()).unwrap_or(false)
            || self
                .core
                .wal
                .as_ref()
                .is_some_and(crate::persistence::wal::Wal::backed_up)
    }

    /// Run the input left waiting while the mesh was congested, once it is not.
    fn run_deferred(&mut self) {
        if self.deferred.is_empty() || self.input_must_wait() {
            return;
        }
        for (index, gen) in std::mem::take(&mut self.deferred) {
            self.run_input(index, gen);
        }
        self.ship_outbox();
    }

    /// Background work: publish gauges, expire keys in a small slice.
    fn tick(&mut self) {
        self.next_tick_ms = self.core.now_ms + TICK.as_millis() as u64;
        if std::mem::take(&mut self.accept_failed) {
            self.arm_accept();
        }
        if self.core.shared.active_expire[self.core.id].load(Relaxed) {
            let timed = self.core.timing.monitor_start();
            self.core
                .engine
                .active_expire_cycle(self.core.now_ms, EXPIRE_KEYS_PER_TICK);
            let (timing, now_ms) = (&self.core.timing, self.core.now_ms);
            timing.sample(&self.core.shared.observatory, "expire-cycle", timed, now_ms);
        }
        crate::shard::exec::take_expired(&mut self.core);
        let stats = &mut self.core.stats;
        stats.ops.tick(self.core.now_ms, stats.commands);
        if self.core.pause.expired(self.core.now_ms) {
            end_pause(&mut self.core, &mut self.conns);
        }
        let core = &mut self.core;
        crate::memory::limit::give_back_free_pages(
            core.cfg.maxmemory,
            core.now_ms,
            &mut core.next_trim_ms,
        );
        self.sync_wal_if_due();
        if self.core.id == 0 && self.core.wal.is_some() {
            let shared = &self.core.shared;
            let changes = shared
                .sum(|g| &g.dirty)
                .saturating_sub(shared.sum(|g| &g.dirty_at_save));
            let last_save_s = shared.last_save_unix_s.load(Relaxed);
            let rules = &self.core.cfg.save;
            let saves = &shared.background_save;
            if crate::persistence::save_rules::due(
                rules,
                saves,
                changes,
                last_save_s,
                self.core.now_ms,
            )
            .is_some()
            {
                crate::persistence::snapshot::start(
                    &mut self.core,
                    crate::persistence::snapshot::Kind::Rdb,
                );
            }
        }
        crate::persistence::shutdown::on_tick(&mut self.core);
        crate::mesh::gather::on_tick(&mut self.core, &mut self.conns);
        self.close_idle_clients();
        crate::cmd::migrate::close_idle_targets();
        // The bus first: a role the membership changed (a replica elected,
        // a master turned replica) reaches the replication link in this
        // tick, before any client's command sees the new slot map.
        self.cluster_tick();
        node_forward::publish_node_map(&mut self.core);
        node_forward::publish_slots_with_keys(&mut self.core);
        self.replica_tick();
        self.primary_tick();
        self.metrics_tick();
        self.tls_tick();
        self.publish_gauges();
    }
    /// `cluster-enabled yes`: a step of this shard's node on the bus; what
    /// other nodes published reaches this shard's subscribers (each node
    /// delivers to its own, as Redis Cluster's nodes do).
    fn cluster_tick(&mut self) {
        let Some(node) = self.core.cluster_node.as_mut() else {
            return;
        };
        // The offset its bus messages carry, as of now: what a replica
        // applied (its rank in an election), what a master wrote (the offset
        // a replica's manual failover waits for). In forward mode the node
        // is the process: the server's history.
        let mode = self.core.topo.mode;
        let history = self.core.shared.replication.history(self.core.id, mode);
        node.cluster.set_repl_offset(history.offset());
        // How fresh a replica's data is (the data-age check of its election).
        let following = history.following();
        node.cluster
            .set_master_link((!following.up).then_some(following.down_since_ms));
        let published = node.tick(self.core.now_ms);
        let forward = mode == crate::config::PortMode::Forward;
        // Forward mode: the node's clients are on every shard.
        match node.take_pause_writes() {
            None => {}
            // A replica's manual failover is over: writes go on.
            Some(0) => {
                end_pause(&mut self.core, &mut self.conns);
                if forward {
                    self.core
                        .outbox
                        .broadcast(crate::config::change::ConfigChange::Unpause);
                }
            }
            // A replica's manual failover: its master's writes wait.
            Some(until) => {
                self.core.pause.start(until, false);
                if forward {
                    let pause = crate::config::change::ConfigChange::Pause {
                        until_ms: until,
                        all: false,
                    };
                    self.core.outbox.broadcast(pause);
                }
            }
        }
        let (me, shards) = (self.core.id, self.core.topo.nodes.len());
        let shared = self.core.shared.clone();
        for (channel, message) in published {
            let (mut to, outbox) = self.core.delivery();
            let kind = crate::messaging::pubsub::Kind::Channel;
            if forward {
                // Forward mode as one node: the node's subscribers are on
                // every shard.
                let subscribers = &shared.pubsub.shards;
                for shard in (0..shards).filter(|&s| s != me && subscribers[s].may_receive(kind)) {
                    outbox.message(shard, None, kind, &channel, &message);
                }
            }
            crate::messaging::pubsub::deliver_here(
                &mut to,
                &mut self.conns,
                kind,
                &channel,
                &message,
                None,
            );
        }
        slot_export::tick(&mut self.core, &mut self.conns);
    }

    /// `timeout`: once a second, close the clients idle longer than it (Redis'
    /// clientsCronHandleTimeout). A blocked client waits by its own timeout instead.
    fn close_idle_clients(&mut self) {
        let timeout_ms = self.core.cfg.timeout_s.saturating_mul(1000);
        if timeout_ms == 0 || self.core.now_ms < self.next_idle_sweep_ms {
            return;
        }
        self.next_idle_sweep_ms = self.core.now_ms + IDLE_SWEEP_EVERY_MS;
        let now = self.core.now_ms;
        for (index, conn) in self.conns.iter_mut() {
            let c = &mut conn.client;
            let last = c.last_cmd_ms.max(c.created_ms);
            // The primary's link has repl-timeout instead (`replica.rs`), as in Redis.
            let idle = now.saturating_sub(last) > timeout_ms;
            if c.blocked.is_none() && !c.paused && !c.master && !c.replica.attached && idle {
                c.closing = true;
                c.killed = true;
                self.core.dirty.push((index, conn.gen));
            }
        }
    }

    fn publish_gauges(&mut self) {
        publish_gauges(&self.core, self.conns.len());
        if self.core.now_ms >= self.next_memory_publish_ms {
            if self.next_memory_publish_ms == 0 {
                // The first tick: start-up is over (MEMORY STATS' startup.allocated).
                crate::memory::alloc::note_startup();
            }
            self.next_memory_publish_ms = self.core.now_ms + MEMORY_PUBLISH_EVERY_MS;
            publish_memory(&self.core, &self.conns);
            if self.core.cfg.metrics_addr().is_some() {
                // The endpoint's latency series read every shard's histograms.
                let core = &self.core;
                core.shared
                    .observatory
                    .publish_histograms(core.id, core.timing.histograms());
            }
        }
    }
}
