//! CONFIG on a shard: [`Configured`] for `ShardCore`, the table of the
//! parameters that take effect in Ruvio (`LIVE`: where each one's running value
//! lives and what a change does here), and what the server-wide changes
//! CONFIG SET, RESETSTAT, DEBUG RELOAD and SAVE's dump broadcast do on this shard
//! ([`apply_config_change`]). The commands themselves, and the table of every
//! parameter with its checks, are below (`cmd::config`, `config::params`).

use crate::cluster::membership::FailoverRules;
use crate::cmd::config::{is_tls_file, Configured};
use crate::config::change::{ConfigChange, ReloadOutcome};
use crate::config::params::{self, ParamSpec};
use crate::config::PortMode;
use crate::net::conn::Conn;
use crate::net::slab::Slab;
use crate::net::tls::Sessions;
use crate::shard::ShardCore;
use crate::stats::ShardStats;
use ruvio_engine::EvictionPolicy;

impl Configured for ShardCore {
    #[inline]
    fn settings_changed(&self) {
        install_script_host(self);
    }

    #[inline]
    fn param_value(&self, spec: &ParamSpec) -> String {
        value_of(self, spec)
    }

    #[inline]
    fn apply_param(&mut self, spec: &ParamSpec, shown: &str) -> Result<(), String> {
        apply(self, spec, shown)
    }

    fn param_is_live(&self, spec: &ParamSpec) -> bool {
        live_row(spec).is_some_and(|l| l.get.is_some() && l.set.is_some())
    }

    #[inline]
    fn reload_tls(&mut self, sessions: Sessions) -> Result<(), String> {
        reload_tls(self, sessions)
    }

    #[inline]
    fn reset_stats(&mut self, epoch: u64) {
        reset_stats(self, epoch);
    }

    #[inline]
    fn reload_keyspace(&mut self, outcome: &ReloadOutcome) {
        reload_shard(self, outcome);
    }

    #[inline]
    fn write_dump_part(&mut self, path: &str) -> std::io::Result<()> {
        write_dump_part(self, path)
    }

    #[inline]
    fn finish_dump(&mut self, path: &str, answer: &[u8]) -> Vec<u8> {
        finish_dump(self, path, answer)
    }
}

/// Applies a checked CONFIG SET value (in CONFIG GET's form, see
/// `config::params::check`); `Err` with the reason when Ruvio cannot take it.
type LiveSetter = fn(&mut ShardCore, &str) -> Result<(), String>;

/// A parameter that takes effect in Ruvio: where its value lives and what setting
/// it changes. Every other parameter of `config::params::PARAMS` is kept in
/// `Config::params` and shown by CONFIG GET, without effect (docs/config.md).
struct Live {
    /// Its storage name (an alias finds the row of the name it stands for).
    name: &'static str,
    /// Its value from the running state; `None`: the kept value is the state
    /// (`dbfilename`, read where it is used).
    get: Option<fn(&ShardCore) -> String>,
    /// What a change does beyond keeping the value.
    set: Option<LiveSetter>,
}

const fn live(name: &'static str, get: fn(&ShardCore) -> String, set: LiveSetter) -> Live {
    Live {
        name,
        get: Some(get),
        set: Some(set),
    }
}

/// A parameter whose running value is a fixed fact of how Ruvio was started.
const fn fact(name: &'static str, get: fn(&ShardCore) -> String) -> Live {
    Live {
        name,
        get: Some(get),
        set: None,
    }
}

/// A parameter whose kept value is read where it takes effect, and changes
/// something when set.
const fn applied(name: &'static str, set: LiveSetter) -> Live {
    Live {
        name,
        get: None,
        set: Some(set),
    }
}

/// A parameter whose kept value is read where it takes effect, and changes
/// nothing else when set (the replication settings: `replication`).
const fn read_where_used(name: &'static str) -> Live {
    Live {
        name,
        get: None,
        set: None,
    }
}

fn number<T: std::str::FromStr>(v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| "argument couldn't be parsed into an integer".to_string())
}

fn yes(v: &str) -> bool {
    v == "yes"
}

/// One of the settings a cluster node's failover and replica migration obey,
/// changed in its membership (nothing without `cluster-enabled`).
fn set_failover_rule(core: &mut ShardCore, change: impl FnOnce(&mut FailoverRules)) {
    if let Some(node) = core.cluster_node.as_mut() {
        let mut rules = node.cluster.failover_rules();
        change(&mut rules);
        node.cluster.set_failover_rules(rules);
    }
}

/// `cluster-announce-port`, `-bus-port`, `-tls-port`, `tls-cluster`: the
/// node's announced ports derive from all four, so the new value is kept
/// before they are worked out again (the caller keeps it too, the same).
/// Applied at once, as Redis's `clusterUpdateMyselfAnnouncedPorts`.
fn set_announced_port(core: &mut ShardCore, name: &'static str, v: &str) -> Result<(), String> {
    core.cfg.params.insert(name, v.to_string());
    if let Some(node) = core.cluster_node.as_mut() {
        node.announce_ports(&core.cfg, core.id);
    }
    Ok(())
}

fn set_hz(core: &mut ShardCore, v: &str) -> Result<(), String> {
    // Redis clamps to 1..=500 too, and shows the clamped value.
    core.cfg.hz = number::<u64>(v)?.clamp(1, 500) as u32;
    Ok(())
}

fn set_requirepass(core: &mut ShardCore, v: &str) -> Result<(), String> {
    core.cfg.requirepass = (!v.is_empty()).then(|| v.to_string());
    // The `default` user's password, as Redis (every shard applies it again:
    // the same password, the same user).
    core.shared
        .acl
        .set_default_password(core.cfg.requirepass.as_deref());
    Ok(())
}

fn set_bulk_len(core: &mut ShardCore, v: &str) -> Result<(), String> {
    let n = number::<usize>(v)?;
    core.cfg.proto_max_bulk_len = n;
    core.limits.bulk_bytes_max = n;
    core.engine.config_mut().proto_max_bulk_len = n;
    Ok(())
}

/// `save` rules (see `save_rules`).
fn set_save_rules(core: &mut ShardCore, v: &str) -> Result<(), String> {
    core.cfg.save = crate::config::save::parse(v)?;
    Ok(())
}

/// `appendonly` / `appendfsync`: the log is chosen at start (`--durability`);
/// CONFIG SET accepts the running value only.
fn set_durability_word(
    core: &ShardCore,
    v: &str,
    running: fn(&ShardCore) -> String,
) -> Result<(), String> {
    if v == running(core) {
        Ok(())
    } else {
        Err("Ruvio chooses its log at start (--durability memory, everysec or always)".into())
    }
}

fn appendonly(core: &ShardCore) -> String {
    if core.cfg.durability.logs() {
        "yes"
    } else {
        "no"
    }
    .into()
}

fn appendfsync(core: &ShardCore) -> String {
    match core.cfg.durability {
        crate::config::Durability::Always => "always",
        _ => "everysec",
    }
    .into()
}

/// `busy-reply-threshold` (alias `lua-time-limit`), ms: one value for every shard.
fn set_busy_reply_threshold(core: &mut ShardCore, v: &str) -> Result<(), String> {
    core.shared.scripts.set_threshold_ms(number(v)?);
    Ok(())
}

fn set_notify_keyspace_events(core: &mut ShardCore, v: &str) -> Result<(), String> {
    let flags =
        crate::config::keyspace_events::parse(v).ok_or(crate::config::keyspace_events::INVALID)?;
    core.cfg.notify_keyspace_events = flags;
    core.engine.record_expired(
        crate::messaging::notify::expiry_wanted(flags) || core.replication.feed.on(),
    );
    let (added, missed) = crate::messaging::notify::key_notes_wanted(flags);
    core.engine.record_key_notes(added, missed);
    Ok(())
}

/// `dir`: where snapshots go. With a log, the log and the snapshots it depends on
/// stay where the server started.
fn set_dir(core: &mut ShardCore, v: &str) -> Result<(), String> {
    if core.cfg.durability.logs() {
        return Err("Ruvio keeps its log in the dir it started with".into());
    }
    core.cfg.dir = std::path::PathBuf::from(v);
    Ok(())
}

fn show_dir(core: &ShardCore) -> String {
    // Redis shows its working directory, an absolute path.
    std::fs::canonicalize(&core.cfg.dir)
        .unwrap_or_else(|_| core.cfg.dir.clone())
        .display()
        .to_string()
}

/// The parameters that take effect, by storage name.
const LIVE: &[Live] = &[
    fact("bind", |c| c.cfg.bind.clone()),
    fact("port", |c| c.cfg.port.to_string()),
    fact("databases", |c| c.cfg.databases.to_string()),
    fact("cluster-enabled", |c| {
        if c.cfg.port_mode == PortMode::PerShard {
            "yes"
        } else {
            "no"
        }
        .into()
    }),
    // DEBUG is always there (admin-only), as in a Redis started with it enabled.
    fact("enable-debug-command", |_| "yes".into()),
    fact("shards", |c| c.cfg.shards.to_string()),
    fact("port-mode", |c| c.cfg.port_mode.name().into()),
    fact("durability", |c| c.cfg.durability.name().into()),
    live("dir", show_dir, set_dir),
    fact("replicaof", |c| {
        let ids = c.shared.replication.ids();
        ids.master
            .map_or_else(String::new, |(host, port)| format!("{host} {port}"))
    }),
    read_where_used("replica-read-only"),
    read_where_used("replica-serve-stale-data"),
    read_where_used("masterauth"),
    read_where_used("masteruser"),
    read_where_used("repl-timeout"),
    read_where_used("replica-shard-links"),
    read_where_used("replica-priority"),
    read_where_used("replica-announced"),
    read_where_used("repl-backlog-size"),
    live(
        "save",
        |c| crate::config::save::format(&c.cfg.save),
        set_save_rules,
    ),
    live("appendonly", appendonly, |c, v| {
        set_durability_word(c, v, appendonly)
    }),
    live("appendfsync", appendfsync, |c, v| {
        set_durability_word(c, v, appendfsync)
    }),
    live(
        "requirepass",
        |c| c.cfg.requirepass.clone().unwrap_or_default(),
        set_requirepass,
    ),
    live("hz", |c| c.cfg.hz.to_string(), set_hz),
    live(
        "proto-max-bulk-len",
        |c| c.cfg.proto_max_bulk_len.to_string(),
        set_bulk_len,
    ),
    live(
        "client-query-buffer-limit",
        |c| c.cfg.client_query_buffer_limit.to_string(),
        |c, v| {
            c.cfg.client_query_buffer_limit = number(v)?;
            Ok(())
        },
    ),
    live(
        "list-max-listpack-size",
        |c| c.engine.config().list_max_listpack_size.to_string(),
        |c, v| {
            c.engine.config_mut().list_max_listpack_size = number(v)?;
            Ok(())
        },
    ),
    live(
        "hash-max-listpack-entries",
        |c| c.engine.config().hash_max_listpack_entries.to_string(),
        |c, v| {
            c.engine.config_mut().hash_max_listpack_entries = number(v)?;
            Ok(())
        },
    ),
    live(
        "hash-max-listpack-value",
        |c| c.engine.config().hash_max_listpack_value.to_string(),
        |c, v| {
            c.engine.config_mut().hash_max_listpack_value = number(v)?;
            Ok(())
        },
    ),
    live(
        "zset-max-listpack-entries",
        |c| c.engine.config().zset_max_listpack_entries.to_string(),
        |c, v| {
            c.engine.config_mut().zset_max_listpack_entries = number(v)?;
            Ok(())
        },
    ),
    live(
        "zset-max-listpack-value",
        |c| c.engine.config().zset_max_listpack_value.to_string(),
        |c, v| {
            c.engine.config_mut().zset_max_listpack_value = number(v)?;
            Ok(())
        },
    ),
    live(
        "set-max-intset-entries",
        |c| c.engine.config().set_max_intset_entries.to_string(),
        |c, v| {
            c.engine.config_mut().set_max_intset_entries = number(v)?;
            Ok(())
        },
    ),
    live(
        "set-max-listpack-entries",
        |c| c.engine.config().set_max_listpack_entries.to_string(),
        |c, v| {
            c.engine.config_mut().set_max_listpack_entries = number(v)?;
            Ok(())
        },
    ),
    live(
        "set-max-listpack-value",
        |c| c.engine.config().set_max_listpack_value.to_string(),
        |c, v| {
            c.engine.config_mut().set_max_listpack_value = number(v)?;
            Ok(())
        },
    ),
    live(
        "hll-sparse-max-bytes",
        |c| c.engine.config().hll_sparse_max_bytes.to_string(),
        |c, v| {
            c.engine.config_mut().hll_sparse_max_bytes = number(v)?;
            Ok(())
        },
    ),
    live(
        "maxmemory",
        |c| c.cfg.maxmemory.to_string(),
        |c, v| {
            c.cfg.maxmemory = number(v)?;
            Ok(())
        },
    ),
    live(
        "maxmemory-policy",
        |c| c.engine.config().maxmemory_policy.name().into(),
        |c, v| {
            c.engine.config_mut().maxmemory_policy =
                EvictionPolicy::parse(v).ok_or("not an eviction policy")?;
            Ok(())
        },
    ),
    // Redis takes any positive count; the eviction pool samples at most 64.
    applied("maxmemory-samples", |c, v| {
        c.engine.config_mut().maxmemory_samples = number::<usize>(v)?.clamp(1, 64);
        Ok(())
    }),
    live(
        "lfu-log-factor",
        |c| c.engine.config().lfu_log_factor.to_string(),
        |c, v| {
            c.engine.config_mut().lfu_log_factor = number(v)?;
            Ok(())
        },
    ),
    live(
        "lfu-decay-time",
        |c| c.engine.config().lfu_decay_time.to_string(),
        |c, v| {
            c.engine.config_mut().lfu_decay_time = number(v)?;
            Ok(())
        },
    ),
    live(
        "maxclients",
        |c| c.cfg.maxclients.to_string(),
        |c, v| {
            c.cfg.maxclients = number(v)?;
            Ok(())
        },
    ),
    live(
        "notify-keyspace-events",
        |c| crate::config::keyspace_events::render(c.cfg.notify_keyspace_events),
        set_notify_keyspace_events,
    ),
    live(
        "client-output-buffer-limit",
        |c| c.cfg.client_output_buffer_limit.render(),
        |c, v| {
            c.cfg.client_output_buffer_limit = c.cfg.client_output_buffer_limit.updated(v)?;
            Ok(())
        },
    ),
    live(
        "timeout",
        |c| c.cfg.timeout_s.to_string(),
        |c, v| {
            c.cfg.timeout_s = number(v)?;
            Ok(())
        },
    ),
    live(
        "cluster-announce-ip",
        |c| c.cfg.cluster_announce_ip.clone(),
        |c, v| {
            c.cfg.cluster_announce_ip = v.to_string();
            if let Some(node) = c.cluster_node.as_mut() {
                node.announce_ip(v);
            }
            Ok(())
        },
    ),
    live(
        "busy-reply-threshold",
        |c| c.shared.scripts.threshold_ms().to_string(),
        set_busy_reply_threshold,
    ),
    applied("loglevel", |_, v| {
        let level = crate::serverlog::Level::parse(v).ok_or("not a log level")?;
        crate::serverlog::set_level(level);
        Ok(())
    }),
    applied("cluster-allow-reads-when-down", |c, v| {
        if let Some(node) = c.cluster_node.as_mut() {
            node.set_reads_when_down(yes(v));
        }
        if let Some(routes) = c.node_follower.as_mut() {
            routes.set_reads_when_down(yes(v));
        }
        Ok(())
    }),
    applied("cluster-preferred-endpoint-type", |c, v| {
        let endpoint = crate::config::cluster::Endpoint::parse(v);
        if let Some(node) = c.cluster_node.as_mut() {
            node.set_endpoint(endpoint);
        }
        if let Some(routes) = c.node_follower.as_mut() {
            routes.set_endpoint(endpoint);
        }
        Ok(())
    }),
    applied("cluster-announce-hostname", |c, v| {
        if let Some(node) = c.cluster_node.as_mut() {
            node.announce_hostname(v);
        }
        Ok(())
    }),
    applied("cluster-require-full-coverage", |c, v| {
        if let Some(node) = c.cluster_node.as_mut() {
            node.set_require_full_coverage(yes(v));
        }
        Ok(())
    }),
    applied("cluster-announce-port", |c, v| {
        set_announced_port(c, "cluster-announce-port", v)
    }),
    applied("cluster-announce-bus-port", |c, v| {
        set_announced_port(c, "cluster-announce-bus-port", v)
    }),
    applied("cluster-announce-tls-port", |c, v| {
        set_announced_port(c, "cluster-announce-tls-port", v)
    }),
    applied("tls-cluster", |c, v| {
        if let Some(node) = c.cluster_node.as_mut() {
            node.set_tls_cluster(yes(v));
        }
        if let Some(routes) = c.node_follower.as_mut() {
            routes.set_tls_cluster(yes(v));
        }
        set_announced_port(c, "tls-cluster", v)?;
        load_bus_tls(c)
    }),
    applied("cluster-node-timeout", |c, v| {
        if let Some(node) = c.cluster_node.as_mut() {
            node.cluster.set_node_timeout(number(v)?);
        }
        Ok(())
    }),
    applied("cluster-replica-no-failover", |c, v| {
        set_failover_rule(c, |rules| rules.no_failover = yes(v));
        Ok(())
    }),
    applied("cluster-replica-validity-factor", |c, v| {
        let factor = number(v)?;
        set_failover_rule(c, |rules| rules.validity_factor = factor);
        Ok(())
    }),
    applied("repl-ping-replica-period", |c, v| {
        let seconds: u64 = number(v)?;
        set_failover_rule(c, |rules| {
            rules.ping_period_ms = seconds.saturating_mul(1000)
        });
        Ok(())
    }),
    applied("cluster-migration-barrier", |c, v| {
        let barrier = number(v)?;
        set_failover_rule(c, |rules| rules.migration_barrier = barrier);
        Ok(())
    }),
    applied("cluster-allow-replica-migration", |c, v| {
        set_failover_rule(c, |rules| rules.allow_migration = yes(v));
        Ok(())
    }),
    applied("lazyfree-lazy-user-flush", |c, v| {
        c.engine.config_mut().lazyfree_lazy_user_flush = yes(v);
        Ok(())
    }),
    applied("stream-node-max-entries", |c, v| {
        c.engine.config_mut().stream_node_max_entries = number(v)?;
        Ok(())
    }),
    applied("stream-node-max-bytes", |c, v| {
        c.engine.config_mut().stream_node_max_bytes = number(v)?;
        Ok(())
    }),
    applied("tracking-table-max-keys", |c, v| {
        let shards = c.topo.nodes.len();
        c.tracking.set_max_keys(number(v)?, shards);
        Ok(())
    }),
    applied("acllog-max-len", |c, v| {
        c.shared.acl.set_log_max(number(v)?);
        Ok(())
    }),
    applied("list-compress-depth", |c, v| {
        c.engine.config_mut().list_compress_depth = number(v)?;
        Ok(())
    }),
    // Observability's settings (see `observability::Settings`).
    applied("slowlog-log-slower-than", |c, v| {
        let n = number(v)?;
        c.timing.change(|s| s.slow_us = n);
        Ok(())
    }),
    applied("slowlog-max-len", |c, v| {
        let n = number(v)?;
        c.timing.change(|s| s.slow_len_max = n);
        Ok(())
    }),
    applied("commandlog-request-larger-than", |c, v| {
        let n = number(v)?;
        c.timing.change(|s| s.request_bytes = n);
        Ok(())
    }),
    applied("commandlog-reply-larger-than", |c, v| {
        let n = number(v)?;
        c.timing.change(|s| s.reply_bytes = n);
        Ok(())
    }),
    applied("commandlog-large-request-max-len", |c, v| {
        let n = number(v)?;
        c.timing.change(|s| s.request_len_max = n);
        Ok(())
    }),
    applied("commandlog-large-reply-max-len", |c, v| {
        let n = number(v)?;
        c.timing.change(|s| s.reply_len_max = n);
        Ok(())
    }),
    applied("latency-monitor-threshold", |c, v| {
        let n = number(v)?;
        c.timing.change(|s| s.monitor_ms = n);
        Ok(())
    }),
    applied("latency-tracking", |c, v| {
        let on = yes(v);
        c.timing.change(|s| s.tracking = on);
        Ok(())
    }),
    applied("latency-tracking-info-percentiles", |c, v| {
        // Checked already (`params::percentiles`): numbers between 0 and 100.
        let list = v
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        c.timing.change(|s| s.percentiles = list);
        Ok(())
    }),
];

fn live_row(spec: &ParamSpec) -> Option<&'static Live> {
    let name = params::storage_name(spec.name);
    LIVE.iter().find(|l| l.name == name)
}

/// Parameter `spec`'s value as CONFIG GET shows it.
fn value_of(core: &ShardCore, spec: &ParamSpec) -> String {
    match live_row(spec).and_then(|l| l.get) {
        Some(get) => get(core),
        None => core.cfg.param(params::storage_name(spec.name)).to_string(),
    }
}

/// Give parameter `spec` the checked value `shown`: kept, then applied.
fn apply(core: &mut ShardCore, spec: &ParamSpec, shown: &str) -> Result<(), String> {
    if let Some(set) = live_row(spec).and_then(|l| l.set) {
        set(core, shown)?;
    }
    core.cfg
        .params
        .insert(params::storage_name(spec.name), shown.to_string());
    Ok(())
}

/// At a shard's start: apply the parameters the config file or a flag set that
/// take effect through a setter (the typed file keys are in place already).
pub fn apply_params_at_start(core: &mut ShardCore) {
    let given: Vec<(&'static str, String)> = core
        .cfg
        .params
        .iter()
        .map(|(name, value)| (*name, value.clone()))
        .collect();
    for (name, value) in given {
        if let Some(spec) = params::find(name) {
            if let Err(why) = apply(core, spec, &value) {
                crate::serverlog::log(
                    crate::serverlog::Level::Warning,
                    &format!("config {name} {value}: {why}"),
                );
            }
        }
    }
}

/// The bus's links opened from now on run TLS under `tls-cluster yes` (with a
/// TLS port), with the TLS settings as they are now; plain otherwise. The
/// links open already keep theirs, as redis-server's do.
fn load_bus_tls(core: &mut ShardCore) -> Result<(), String> {
    let Some(node) = core.cluster_node.as_mut() else {
        return Ok(());
    };
    let tls = match core.cfg.bus_tls() {
        true => Some(crate::net::tls::bus::bus_tls(&core.cfg.tls_files())?),
        false => None,
    };
    node.links.set_tls(tls);
    Ok(())
}

/// Load the TLS settings again from the parameters, when TLS is on: the
/// sessions started from now on use them, the open ones keep theirs. The shard
/// that took the CONFIG SET starts a new session cache (`Sessions::Renew`), the
/// others join it.
fn reload_tls(core: &mut ShardCore, sessions: Sessions) -> Result<(), String> {
    if core.tls_settings.is_none() {
        return Ok(());
    }
    let settings = crate::net::tls::TlsSettings::load(
        &core.cfg.tls_files(),
        &core.shared.tls_sessions,
        sessions,
    )?;
    core.tls_settings = Some(settings);
    load_bus_tls(core)
}

/// Give this shard thread's scripts the server around them, with `cmd`'s
/// answers to their INFO and PUBSUB (at shard start, and after CONFIG SET).
pub(super) fn install_script_host(core: &ShardCore) {
    crate::scripting::host::install(
        &core.cfg,
        core.shared.clone(),
        core.topo.clone(),
        core.id,
        crate::cmd::script_commands(),
        core.node_routes().map(|routes| routes.served_slots()),
    );
}

/// Apply a change another shard broadcast.
pub fn apply_config_change(core: &mut ShardCore, conns: &mut Slab<Conn>, change: &ConfigChange) {
    match change {
        ConfigChange::Set(pairs) => {
            for (name, value) in pairs {
                if let Some(spec) = params::find(name) {
                    let _ = apply(core, spec, value);
                }
            }
            if pairs.iter().any(|(name, _)| is_tls_file(name)) {
                // The shard that took the CONFIG SET loaded the same files.
                if let Err(why) = reload_tls(core, Sessions::Current) {
                    crate::serverlog::log(
                        crate::serverlog::Level::Warning,
                        &format!("shard {}: TLS settings not reloaded: {why}", core.id),
                    );
                }
            }
            install_script_host(core);
        }
        ConfigChange::ResetStats { epoch } => reset_stats(core, *epoch),
        ConfigChange::Pause { until_ms, all } => core.pause.start(*until_ms, *all),
        ConfigChange::Unpause => super::end_pause(core, conns),
        ConfigChange::ExportRdb(path) => {
            if let Err(e) =
                crate::persistence::export::write_part(&core.engine, core.now_ms, core.id, path)
            {
                eprintln!("shard {}: DEBUG EXPORT-RDB {path}: {e}", core.id);
            }
        }
        ConfigChange::DumpPart(path) => {
            if let Err(e) = write_dump_part(core, path) {
                crate::serverlog::log(
                    crate::serverlog::Level::Warning,
                    &format!("shard {}: writing {path} failed: {e}", core.id),
                );
            }
        }
        ConfigChange::Snapshot => {
            if let Err(e) = crate::persistence::snapshot::save(core) {
                eprintln!("ruvio: shard {}: SAVE failed: {e}", core.id);
            }
        }
        ConfigChange::BackgroundSave => crate::persistence::snapshot::request(core),
        ConfigChange::Exit { save } => crate::persistence::shutdown::prepare(core, *save),
        ConfigChange::Functions(payload) => {
            crate::cmd::functions::apply(core.functions_keeper(), payload);
            if super::lending::links_follow(core) {
                // A Ruvio replica's link for this shard takes the set here
                // (`replication::link_barrier`, "Function libraries").
                let record = crate::replication::link_barrier::functions_record(payload);
                core.replication.feed.record_link_only(record);
            }
        }
        ConfigChange::SkipChecksumValidation(skip) => {
            core.engine.config_mut().skip_checksum_validation = *skip
        }
        ConfigChange::AclUsers => {
            let acl = core.shared.acl.clone();
            crate::cmd::acl::refresh_connections(&acl, conns, |who| core.dirty.push(who));
        }
        ConfigChange::Reload(outcome) => reload_shard(core, outcome),
        ConfigChange::NodeSlots => super::node_forward::follow_node_map(core),
        ConfigChange::BusPublish { channel, message } => {
            if let Some(node) = core.cluster_node.as_mut() {
                node.publish(channel, message);
            }
        }
    }
}

/// This shard's part of DEBUG RELOAD: its keyspace through the RDB form and back
/// (`Engine::reload_through_rdb`), noted in `outcome`. Before it, as Redis's
/// reload empties its databases (`emptyData`, which signals a flush): the
/// watched keys that exist touch their watchers, and every tracking client of
/// the shard is owed a null. Not while the shard writes a snapshot (a background
/// save's part, a replica's full sync): the snapshot's state lives in the
/// databases the reload replaces. The reload changes no key's value or TTL, so
/// it logs and feeds nothing.
fn reload_shard(core: &mut ShardCore, outcome: &ReloadOutcome) {
    if core.writing_snapshot() {
        return outcome.refused_while_saving();
    }
    if core.watches.any() {
        // Database by database: a watched key is touched when it exists in its own.
        for db in 0..core.engine.db_count() {
            core.touch_watched_in(&[db]);
        }
    }
    core.tracking.flushed();
    match core.engine.reload_through_rdb(core.now_ms) {
        Ok(keys) => outcome.reloaded(keys),
        Err(e) => {
            eprintln!("shard {}: DEBUG RELOAD failed: {e}", core.id);
            outcome.failed();
        }
    }
}

/// This shard's part of the dump at `path`; its changes count as saved.
fn write_dump_part(core: &mut ShardCore, path: &str) -> std::io::Result<()> {
    crate::persistence::export::write_part(&core.engine, core.now_ms, core.id, path)?;
    crate::persistence::snapshot::mark_saved(core);
    Ok(())
}

/// Every shard wrote its part: put the dump together and move LASTSAVE; the
/// reply (`answer`, or the error).
fn finish_dump(core: &mut ShardCore, path: &str, answer: &[u8]) -> Vec<u8> {
    match crate::persistence::export::assemble(path, 0..core.topo.nodes.len()) {
        Ok(()) => {
            core.shared.last_save_unix_s.fetch_max(
                crate::clock::unix_ms() / 1000,
                std::sync::atomic::Ordering::Relaxed,
            );
            crate::serverlog::log(
                crate::serverlog::Level::Notice,
                &format!("DB saved on disk ({path})"),
            );
            answer.to_vec()
        }
        Err(e) => {
            crate::serverlog::log(
                crate::serverlog::Level::Warning,
                &format!("save failed: {e}"),
            );
            format!("-ERR save failed: {e}\r\n").into_bytes()
        }
    }
}

/// Zero the counters Redis' CONFIG RESETSTAT zeroes (not the dataset's change count)
/// and move to statistics epoch `epoch`.
fn reset_stats(core: &mut ShardCore, epoch: u64) {
    let stats = &mut core.stats;
    *stats = ShardStats {
        per_command: vec![Default::default(); stats.per_command.len()],
        dirty: stats.dirty,
        epoch,
        ..Default::default()
    };
    core.engine.reset_stats();
    core.timing.reset_histograms();
    core.shared.observatory.reset_histograms(core.id);
}
