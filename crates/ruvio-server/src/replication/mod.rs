//! Replication on Redis's own protocol, both ways: Ruvio as a replica of a Redis
//! (or Ruvio) primary, and Ruvio as the primary of Redis (or Ruvio) replicas.
//!
//! Owns: the replication state every shard reads ([`State`]: role, primary,
//! replication IDs, offset, the link's state, a FAILOVER), the link to the
//! primary that shard 0 steps on its tick ([`link`]), loading a full sync's RDB
//! into each shard ([`load`]); as a primary, each shard's records for the stream
//! ([`feed`]), a history's backlog ([`backlog`], its bytes), replicas and a
//! full sync's cut ([`primary`]; the server's one history in forward mode,
//! each shard node's own in per-shard mode: [`history`]; a Ruvio replica's
//! shard links seen as one replica: [`link_replicas`]) and what one shard
//! holds of it ([`serve`]); and the replies and refusals the commands give
//! from that state ([`refusal`], [`too_few_replicas`], [`info`], [`role`]).
//! The commands themselves (REPLICAOF, SLAVEOF, ROLE,
//! REPLCONF, PSYNC, SYNC, WAIT, WAITAOF, FAILOVER) are rows of
//! `cmd::replication`, a floor above; the loop's steps over connections are
//! `shard::replica` and `shard::primary`, which own them.
//!
//! Why so: as a replica, the primary's stream is an ordinary connection of shard
//! 0 (the master client: no replies, writes allowed), parsed, routed to the
//! owning shard and run exactly as a client's commands are; only the bytes it
//! consumed are counted (the offset, as Redis counts it) and kept in the backlog.
//! As a primary, the stream is what the write-ahead log takes (the engine's
//! deterministic records), made where each write runs and merged once per loop
//! iteration: no second path for replication, and no per-command lock.

pub mod backlog;
pub mod feed;
pub mod history;
pub mod link;
pub mod link_barrier;
pub mod link_replicas;
pub mod load;
pub mod primary;
pub mod serve;
pub mod shard_links;
pub mod state;
pub mod transfer;

pub use state::State;

use crate::config::Config;
use ruvio_engine::command::flags::{STALE, WRITE};
use ruvio_engine::{CmdError, CommandMeta};
use ruvio_resp::{Args, Reply};

/// Redis's `shared.roslaveerr` (the engine's, which a script's write call answers).
pub const READONLY_ERROR: &[u8] = ruvio_engine::scripting::READONLY_REPLICA;
/// Redis's `shared.masterdownerr`.
pub const MASTERDOWN_ERROR: &[u8] =
    b"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";

/// What a replica refuses a client (never the master client), as Redis's
/// processCommand: a write while `replica-read-only yes`, and a command without
/// the `stale` flag while the link is down (`link_up` false) and
/// `replica-serve-stale-data no`. The caller checks [`State::is_replica`]
/// first: a primary pays one branch.
#[cold]
pub fn refusal(
    link_up: bool,
    cfg: &Config,
    meta: &CommandMeta,
    args: Args<'_>,
) -> Option<CmdError> {
    if writes(meta, args) && cfg.param("replica-read-only") == "yes" {
        return Some(CmdError::Line(READONLY_ERROR.to_vec()));
    }
    let stale_refused = cfg.param("replica-serve-stale-data") == "no";
    if stale_refused && !link_up && !runs_stale(meta, args) {
        return Some(CmdError::Line(MASTERDOWN_ERROR.to_vec()));
    }
    None
}

/// The command may run on a stale replica, as Redis's processCommand judges it:
/// a script's or function's declared flags decide for EVAL and FCALL
/// (`allow-stale`; a script without a shebang passes here and is refused as it
/// starts), every other command by its `stale` flag.
fn runs_stale(meta: &CommandMeta, args: Args<'_>) -> bool {
    use ruvio_engine::scripting;
    match meta.name {
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" => scripting::runs_stale(args),
        "fcall" | "fcall_ro" => scripting::functions::runs_stale(args),
        _ => meta.has(STALE),
    }
}

/// Redis's `shared.noreplicaserr`.
pub const NOREPLICAS_ERROR: &[u8] = b"NOREPLICAS Not enough good replicas to write.";

/// What a primary refuses while fewer replicas than `min-replicas-to-write` are
/// in touch (the caller checks [`State::writes_refused`] first): writes.
#[cold]
pub fn too_few_replicas(meta: &CommandMeta, args: Args<'_>) -> Option<CmdError> {
    writes(meta, args).then(|| CmdError::Line(NOREPLICAS_ERROR.to_vec()))
}

/// The command writes, as Redis's processCommand judges it before running: a
/// script's or function's declared flags decide for EVAL and FCALL (a write
/// unless `no-writes`; a script without a shebang is not a write up front, its
/// write calls are refused as it runs: `ScriptHost::refuses_writes`).
fn writes(meta: &CommandMeta, args: Args<'_>) -> bool {
    use ruvio_engine::scripting;
    match meta.name {
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" => scripting::may_write(args),
        "fcall" | "fcall_ro" => scripting::functions::may_write(args),
        _ => meta.has(WRITE),
    }
}

/// `ROLE`: `master`, its offset and its online replicas (a Ruvio replica on
/// shard links once: [`link_replicas`]), or `slave`, the
/// primary, the link's state and the offset applied (-1 before the stream).
/// A primary answers for `history` (a shard node's own, in per-shard mode).
pub fn role(history: history::History<'_>, reply: &mut Reply<'_>) {
    match history.master() {
        None => {
            let replicas = history.replicas();
            reply.array(3);
            reply.bulk(b"master");
            reply.int(history.offset() as i64);
            let online: Vec<_> = replicas.iter().filter(|r| r.state == "online").collect();
            reply.array(online.len());
            for r in online {
                reply.array(3);
                reply.bulk(r.ip.as_bytes());
                reply.bulk(r.port.to_string().as_bytes());
                reply.bulk(r.ack_offset.to_string().as_bytes());
            }
        }
        Some((host, port)) => {
            let following = history.following();
            reply.array(5);
            reply.bulk(b"slave");
            reply.bulk(host.as_bytes());
            reply.int(i64::from(port));
            reply.bulk(following.link.name().as_bytes());
            let offset = match following.up {
                true => following.offset as i64,
                false => -1,
            };
            reply.int(offset);
        }
    }
}

/// INFO's replication section, Redis 7.0's fields in its order: a replica's
/// link, then the replicas of this server and its backlog: those of `history`
/// (a shard node's own, in per-shard mode).
pub fn info(
    state: &State,
    history: history::History<'_>,
    cfg: &Config,
    now_ms: u64,
    line: &mut dyn FnMut(&str, &dyn std::fmt::Display),
) {
    let ids = state.ids();
    let offset = history.shown_offset();
    let seconds_since = |ms: u64| match ms {
        0 => -1,
        ms => (now_ms.saturating_sub(ms) / 1000) as i64,
    };
    match history.master() {
        None => line("role", &"master"),
        Some((host, port)) => {
            let following = history.following();
            let up = following.up;
            line("role", &"slave");
            line("master_host", &host);
            line("master_port", &port);
            line("master_link_status", &if up { "up" } else { "down" });
            let last_io = match up {
                true => seconds_since(state.last_io_ms()),
                false => -1,
            };
            line("master_last_io_seconds_ago", &last_io);
            let syncing = following.link == state::LinkState::Sync;
            line("master_sync_in_progress", &u8::from(syncing));
            line("slave_read_repl_offset", &offset);
            line("slave_repl_offset", &offset);
            if syncing {
                let t = history.transfer();
                let perc = match t.total_bytes {
                    0 => 0.0,
                    total => t.read_bytes as f64 / total as f64 * 100.0,
                };
                line("master_sync_total_bytes", &t.total_bytes);
                line("master_sync_read_bytes", &t.read_bytes);
                line("master_sync_left_bytes", &(t.total_bytes - t.read_bytes));
                line("master_sync_perc", &format!("{perc:.2}"));
                line(
                    "master_sync_last_io_seconds_ago",
                    &seconds_since(t.last_io_ms),
                );
            }
            if !up {
                line(
                    "master_link_down_since_seconds",
                    &seconds_since(following.down_since_ms),
                );
            }
            line("slave_priority", &cfg.param("replica-priority"));
            let read_only = cfg.param("replica-read-only") == "yes";
            line("slave_read_only", &u8::from(read_only));
            let announced = cfg.param("replica-announced") == "yes";
            line("replica_announced", &u8::from(announced));
        }
    }
    let primary = history.primary;
    let replicas = history.replicas();
    line("connected_slaves", &replicas.len());
    let max_lag = cfg_u64(cfg, "min-replicas-max-lag");
    if cfg_u64(cfg, "min-replicas-to-write") > 0 && max_lag > 0 {
        let good = history.good_replicas(now_ms, max_lag);
        line("min_slaves_good_slaves", &good);
    }
    for (i, r) in replicas.iter().enumerate() {
        let lag = now_ms.saturating_sub(r.last_ack_ms) / 1000;
        line(
            &format!("slave{i}"),
            &format_args!(
                "ip={},port={},state={},offset={},lag={}",
                r.ip, r.port, r.state, r.ack_offset, lag
            ),
        );
    }
    let (active, first, histlen) = primary.backlog_info();
    let hist = history.ids();
    line("master_failover_state", &ids.failover.phase.name());
    line("master_replid", &hist.replid);
    line("master_replid2", &hist.replid2);
    line("master_repl_offset", &offset);
    line("second_repl_offset", &hist.second_offset);
    line("repl_backlog_active", &u8::from(active));
    line("repl_backlog_size", &cfg.param("repl-backlog-size"));
    line(
        "repl_backlog_first_byte_offset",
        &if active { first } else { 0 },
    );
    line("repl_backlog_histlen", &histlen);
}

fn cfg_u64(cfg: &Config, name: &str) -> u64 {
    cfg.param(name).parse().unwrap_or(0)
}

/// `REPLCONF ACK <offset> [FACK <fsynced offset>]`, as the replica sends it
/// (Redis 7.2's replica adds FACK when it keeps an AOF).
pub fn ack_command(offset: u64, fack: Option<u64>) -> Vec<u8> {
    let offset = offset.to_string();
    let Some(fack) = fack else {
        return format!(
            "*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n${}\r\n{offset}\r\n",
            offset.len()
        )
        .into_bytes();
    };
    let fack = fack.to_string();
    format!(
        "*5\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n${}\r\n{offset}\r\n$4\r\nFACK\r\n${}\r\n{fack}\r\n",
        offset.len(),
        fack.len()
    )
    .into_bytes()
}
