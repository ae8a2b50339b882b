//! The metrics endpoint on shard 0's ring: its listener and HTTP connections
//! driven through the shard's own io_uring (as the client sockets are, see
//! docs/runtime.md), and the [`Snapshot`] a scrape renders, gathered from what
//! every shard publishes.
//!
//! Why shard 0 and no thread of its own: the shard loop is the only task of its
//! executor and sleeps in its own ring, so a glommio task beside it would run
//! only when the loop yields; an operation on the same ring completes in the same
//! wait as the clients'. A scrape costs the shard one bounded piece of work
//! between two batches: reading the shards' published gauges (atomics, and one
//! short lock per shard on its command table, as INFO takes) and writing a few
//! hundred lines; it never waits for another shard, so it cannot stall one.
//! HTTP connections are few ([`http::CONNECTIONS_MAX`]) and each has exactly one
//! operation in flight, so their buffers never move under the kernel.
//!
//! The snapshot reports the whole process: the other shards' numbers as they last
//! published them (at most one tick, 10 ms, old), shard 0's published just before.
//! With the endpoint off none of this exists: no listener, no operation, no branch
//! on the request path.

use super::{token, Shard, ShardCore, OP_METRICS_ACCEPT, OP_METRICS_RECV, OP_METRICS_SEND};
use crate::config::Config;
use crate::messaging::pubsub::{self, Kind};
use crate::net::slab::Slab;
use crate::observability::histograms;
use crate::observability::http::{self, HttpConn, Step};
use crate::observability::metrics::{self, CommandLatency, CommandNumbers, ShardNumbers, Snapshot};
use io_uring::{cqueue, opcode, types};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Shard 0's metrics listener and its HTTP connections.
pub struct MetricsServer {
    listener: socket2::Socket,
    conns: Slab<HttpConn>,
    /// The last accept failed (out of descriptors ...): accept again at the next tick.
    accept_failed: bool,
}

impl MetricsServer {
    /// Shard 0's listener when `metrics-port` is set; none elsewhere or when off.
    pub fn open(cfg: &Config, shard: usize) -> std::io::Result<Option<MetricsServer>> {
        let Some((bind, port)) = cfg.metrics_addr().filter(|_| shard == 0) else {
            return Ok(None);
        };
        let listener = crate::net::socket::listen(bind, port, false).map_err(|e| {
            std::io::Error::new(e.kind(), format!("metrics endpoint {bind}:{port}: {e}"))
        })?;
        Ok(Some(MetricsServer {
            listener,
            conns: Slab::default(),
            accept_failed: false,
        }))
    }
}

impl Shard {
    /// Start accepting on the metrics listener (if the endpoint is on).
    pub(super) fn arm_metrics_accept(&mut self) {
        let Some(server) = self.metrics.as_ref() else {
            return;
        };
        let fd = server.listener.as_raw_fd();
        self.push(
            opcode::AcceptMulti::new(types::Fd(fd))
                .flags(libc::SOCK_CLOEXEC)
                .build()
                .user_data(token(OP_METRICS_ACCEPT, 0, 0)),
        );
    }

    /// A completion of one of the endpoint's operations.
    pub(super) fn metrics_io(&mut self, op: u64, gen: u32, index: u32, result: i32, flags: u32) {
        if op == OP_METRICS_ACCEPT {
            self.metrics_accepted(result, flags);
            return;
        }
        let now_ms = self.core.now_ms;
        let Some(server) = self.metrics.as_mut() else {
            return;
        };
        let step = match op {
            OP_METRICS_RECV | OP_METRICS_SEND => {
                let Some(conn) = server.conns.get_mut(index, gen) else {
                    return;
                };
                if result <= 0 || conn.shut {
                    Step::Close
                } else {
                    let core = &self.core;
                    let clients = self.conns.len();
                    let mut render = || metrics::render(&snapshot(core, clients));
                    if op == OP_METRICS_RECV {
                        conn.received(result as usize, now_ms, &mut render)
                    } else {
                        conn.sent(result as usize, now_ms, &mut render)
                    }
                }
            }
            _ => return,
        };
        self.metrics_next(index, gen, step);
    }

    /// A completion of the listener's accept: a new connection (closed at once
    /// past [`http::CONNECTIONS_MAX`]) or a failed accept, retried at the tick.
    fn metrics_accepted(&mut self, result: i32, flags: u32) {
        let now_ms = self.core.now_ms;
        let Some(server) = self.metrics.as_mut() else {
            return;
        };
        if result < 0 {
            server.accept_failed = true;
        } else if server.conns.len() >= http::CONNECTIONS_MAX {
            // SAFETY: closing the descriptor accept just gave us.
            unsafe { libc::close(result) };
        } else {
            let mut conn_gen = 0;
            let index = server.conns.insert_with(|_, gen| {
                conn_gen = gen;
                HttpConn::new(result, now_ms)
            });
            self.metrics_next(index, conn_gen, Step::Receive);
        }
        let failed = self.metrics.as_ref().is_some_and(|s| s.accept_failed);
        if !cqueue::more(flags) && !failed {
            self.arm_metrics_accept();
        }
    }

    /// Start the connection's next operation, or close it.
    fn metrics_next(&mut self, index: u32, gen: u32, step: Step) {
        let Some(server) = self.metrics.as_mut() else {
            return;
        };
        let Some(conn) = server.conns.get_mut(index, gen) else {
            return;
        };
        let fd = types::Fd(conn.fd);
        let entry = match step {
            Step::Receive => {
                let (ptr, room) = conn.spare();
                opcode::Recv::new(fd, ptr, room as u32)
                    .build()
                    .user_data(token(OP_METRICS_RECV, gen, index))
            }
            Step::Send => {
                let unsent = conn.unsent();
                opcode::Send::new(
                    fd,
                    unsent.as_ptr(),
                    unsent.len().min(u32::MAX as usize) as u32,
                )
                .flags(libc::MSG_NOSIGNAL)
                .build()
                .user_data(token(OP_METRICS_SEND, gen, index))
            }
            Step::Close => {
                let fd = conn.fd;
                server.conns.remove(index);
                // SAFETY: no operation on the descriptor is in flight (its last one
                // just completed) and the connection owning it is gone.
                unsafe { libc::close(fd) };
                return;
            }
        };
        self.push(entry);
    }

    /// On the tick: re-arm a failed accept, and shut the connections whose
    /// deadline passed (their operation then completes and they close).
    pub(super) fn metrics_tick(&mut self) {
        let now_ms = self.core.now_ms;
        let Some(server) = self.metrics.as_mut() else {
            return;
        };
        for (_, conn) in server.conns.iter_mut() {
            if !conn.shut && conn.expired(now_ms) {
                conn.shut = true;
                // SAFETY: a plain syscall on a descriptor the connection owns.
                unsafe { libc::shutdown(conn.fd, libc::SHUT_RDWR) };
            }
        }
        if std::mem::take(&mut server.accept_failed) {
            self.arm_metrics_accept();
        }
    }
}

/// What a scrape reports now: shard 0 (`core`, with `clients` connections)
/// publishes its own numbers first, the others' are as they last published them.
pub fn snapshot(core: &ShardCore, clients: usize) -> Snapshot {
    super::publish_gauges(core, clients);
    let (shared, cfg) = (&core.shared, &core.cfg);
    let epoch = shared.stats_epoch();
    let mut dbs = vec![(0u64, 0u64); cfg.databases];
    let mut shards = Vec::with_capacity(shared.shards.len());
    for g in &shared.shards {
        // Counters of a shard that has not published since CONFIG RESETSTAT count
        // as zero, as in INFO.
        let current = g.epoch.load(Relaxed) >= epoch;
        let counter = |a: &AtomicU64| if current { a.load(Relaxed) } else { 0 };
        let mut numbers = ShardNumbers {
            commands: counter(&g.commands),
            ops_per_sec: counter(&g.ops_per_sec),
            connected_clients: g.clients.load(Relaxed),
            blocked_clients: g.blocked_clients.load(Relaxed),
            connections_received: counter(&g.connections_received),
            rejected_connections: counter(&g.rejected_connections),
            net_input_bytes: counter(&g.net_input_bytes),
            net_output_bytes: counter(&g.net_output_bytes),
            expired_keys: counter(&g.expired_keys),
            evicted_keys: counter(&g.evicted_keys),
            keyspace_hits: counter(&g.keyspace_hits),
            keyspace_misses: counter(&g.keyspace_misses),
            dataset_bytes: g.dataset_bytes.load(Relaxed),
            log_written_bytes: g.log_written_bytes.load(Relaxed),
            log_fsyncs: g.log_fsyncs.load(Relaxed),
            log_fsync_usec: g.log_fsync_usec.load(Relaxed),
            mesh_sent: g.mesh_sent.load(Relaxed),
            mesh_received: g.mesh_received.load(Relaxed),
            ..Default::default()
        };
        for (sum, (keys, expiring)) in dbs.iter_mut().zip(&g.keys) {
            let (keys, expiring) = (keys.load(Relaxed), expiring.load(Relaxed));
            numbers.keys += keys;
            numbers.expiring_keys += expiring;
            sum.0 += keys;
            sum.1 += expiring;
        }
        shards.push(numbers);
    }
    let mut total = ShardNumbers::default();
    for shard in &shards {
        total.add(shard);
    }
    let registry = crate::cmd::registry::registry();
    let mut per_command = vec![crate::stats::CommandStat::default(); registry.stat_slots];
    let mut errors: Vec<(Box<str>, u64)> = Vec::new();
    shared.for_tables(0..shared.shards.len(), None, |tables| {
        for (sum, s) in per_command.iter_mut().zip(&tables.per_command) {
            sum.calls += s.calls;
            sum.usec += s.usec;
            sum.failed += s.failed;
            sum.rejected += s.rejected;
        }
        for (code, n) in &tables.errors {
            match errors.iter_mut().find(|(c, _)| c == code) {
                Some((_, sum)) => *sum += n,
                None => errors.push((code.clone(), *n)),
            }
        }
    });
    errors.sort();
    let commands = registry
        .all_rows()
        .filter_map(|row| {
            let s = per_command[row.stat];
            (s.calls > 0 || s.failed > 0 || s.rejected > 0).then(|| CommandNumbers {
                name: row.meta.name.to_string(),
                calls: s.calls,
                usec: s.usec,
                failed: s.failed,
                rejected: s.rejected,
            })
        })
        .collect();
    let latency = latency_of(core, |stat| {
        (per_command[stat].calls, per_command[stat].usec)
    });
    let uptime_s = shared.started.elapsed().as_secs();
    let (cpu_sys_s, cpu_user_s) = crate::cmd::info::cpu_seconds();
    let saved = shared.sum(|g| &g.dirty_at_save);
    let distinct = |kind| pubsub::distinct_in(&shared.pubsub, 0..shared.shards.len(), kind);
    Snapshot {
        version: env!("CARGO_PKG_VERSION"),
        redis_version: crate::cmd::connection::REDIS_VERSION,
        redis_mode: match cfg.cluster_mode() {
            true => "cluster",
            false => "standalone",
        },
        port_mode: cfg.port_mode.name(),
        os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
        run_id: shared.run_id.clone(),
        process_id: std::process::id(),
        tcp_port: cfg.port,
        maxmemory_policy: core.engine.config().maxmemory_policy.name(),
        uptime_s,
        start_time_unix_s: (core.now_ms / 1000).saturating_sub(uptime_s),
        maxclients: cfg.maxclients,
        maxmemory_bytes: cfg.maxmemory,
        used_memory_bytes: crate::memory::alloc::allocated_bytes(),
        used_memory_rss_bytes: crate::memory::alloc::rss_bytes(),
        cpu_sys_s,
        cpu_user_s,
        aof_enabled: cfg.durability.logs(),
        loading: shared.loading.any(),
        rdb_changes_since_last_save: shared.sum(|g| &g.dirty).saturating_sub(saved),
        rdb_last_save_unix_s: shared.last_save_unix_s.load(Relaxed),
        pubsub_channels: distinct(Kind::Channel),
        pubsub_patterns: distinct(Kind::Pattern),
        total,
        dbs,
        commands,
        errors,
        shards,
        latency,
    }
}

/// Each command's latency from the shards' histograms: this shard's as of now,
/// the others' as they last published them (once a second while the endpoint is
/// on, see `Shard::publish_gauges`); `stats` gives a command's INFO commandstats
/// calls and microseconds by statistics slot.
fn latency_of(core: &ShardCore, stats: impl Fn(usize) -> (u64, u64)) -> Vec<CommandLatency> {
    let cfg = &core.cfg;
    if cfg.param("latency-tracking") != "yes" {
        return Vec::new();
    }
    let observatory = &core.shared.observatory;
    observatory.publish_histograms(core.id, core.timing.histograms());
    let merged = observatory.merged_histograms(0..core.shared.shards.len());
    let percentiles: Vec<(&str, f64)> = cfg
        .param("latency-tracking-info-percentiles")
        .split_whitespace()
        .filter_map(|w| Some((w, w.parse().ok()?)))
        .collect();
    crate::cmd::registry::registry()
        .all_rows()
        .filter_map(|row| {
            let h = merged.get(row.stat)?;
            Some(CommandLatency {
                name: row.meta.name.to_string(),
                calls: stats(row.stat).0,
                usec: stats(row.stat).1,
                histogram_calls: h.len(),
                histogram_ns: (h.mean() * h.len() as f64) as u64,
                percentiles: percentiles
                    .iter()
                    .map(|(shown, p)| (shown.to_string(), histograms::percentile_usec(&h, *p)))
                    .collect(),
                buckets: histograms::cumulative_buckets(&h),
            })
        })
        .collect()
}
