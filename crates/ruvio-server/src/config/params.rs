//! Every configuration parameter Redis 7 has, as data: its value type (which
//! decides how CONFIG SET and the config file check a value, with Redis's exact
//! reason text), whether CONFIG SET may change it, and Redis's default.
//!
//! Why a table of parameters Ruvio does not use: a Redis config file, a client
//! library or a tool (redis-cli, BullMQ, sentinel-style health checks) sets and
//! reads them, and Redis answers every one of them. Ruvio answers the same way:
//! a parameter either takes effect (the bindings in `cmd::config`) or is kept with
//! its value and shown by CONFIG GET, so that `CONFIG SET activerehashing no`
//! answers `+OK`, never "Unknown option". docs/config.md says which is which.
//!
//! The checks follow Redis 7.0's config.c: integers as `string2ll` (no `+`, no
//! leading zeros), memory values as `memtoull` (`1kb`, `5gb`, digits only
//! otherwise), booleans `yes`/`no` in any case, enums by name in any case. A
//! checked value is kept in the form CONFIG GET shows (`1k` is shown `1000`,
//! `YES` is shown `yes`).

use super::{keyspace_events, output_limits, save};

/// A text parameter's check: `Err` with Redis's reason.
pub type TextCheck = fn(&str) -> Result<(), &'static str>;

/// How a value of a parameter is read and checked.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// `yes` or `no`.
    Bool,
    /// A decimal integer within the bounds.
    Int { min: i64, max: i64 },
    /// Bytes, with Redis's units, within the bounds.
    Memory { min: u64, max: u64 },
    /// Bytes or a percentage of `maxmemory` (`maxmemory-clients`).
    MemoryOrPercent,
    /// A file mode in octal (`unixsocketperm`).
    Octal { max: u32 },
    /// One of these names.
    Enum(&'static [&'static str]),
    /// Any text the check accepts (`None`: any text).
    Text(Option<TextCheck>),
    /// Its own syntax: checked and brought to CONFIG GET's form by the function.
    Special(fn(&str) -> Result<String, String>),
}

/// Whether CONFIG SET may change a parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Mutable,
    /// Set at start only (the config file, flags): `can't set immutable config`.
    Immutable,
    /// Redis's PROTECTED_CONFIG (`dir`, `dbfilename`): CONFIG SET refuses it with
    /// `can't set protected config` unless `enable-protected-configs` allows it.
    Protected,
}

/// One parameter.
#[derive(Clone, Copy, Debug)]
pub struct ParamSpec {
    pub name: &'static str,
    pub kind: Kind,
    pub access: Access,
    /// The value before anything sets it (Redis's, or Ruvio's where it differs on
    /// purpose: docs/config.md lists those).
    pub default: &'static str,
    /// Redis's HIDDEN_CONFIG: settable, but `CONFIG GET *` does not list it.
    pub hidden: bool,
}

const INT_MAX: i64 = i32::MAX as i64;
const INT_MIN: i64 = i32::MIN as i64;
const UINT_MAX: i64 = u32::MAX as i64;
const LONG_MAX: i64 = i64::MAX;

const LOGLEVELS: &[&str] = &["debug", "verbose", "notice", "warning"];
const POLICIES: &[&str] = &[
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];
const SYSLOG_FACILITIES: &[&str] = &[
    "user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
];
const SUPERVISED: &[&str] = &["upstart", "systemd", "auto", "no"];
const FSYNC: &[&str] = &["everysec", "always", "no"];
const DISKLESS_LOAD: &[&str] = &["disabled", "on-empty-db", "swapdb"];
const TLS_AUTH: &[&str] = &["no", "yes", "optional"];
const OOM_SCORE_ADJ: &[&str] = &["no", "yes", "relative", "absolute"];
const ACL_PUBSUB: &[&str] = &["allchannels", "resetchannels"];
const SANITIZE: &[&str] = &["no", "yes", "clients"];
const PROTECTED_ACTION: &[&str] = &["no", "yes", "local"];
const ENDPOINT_TYPE: &[&str] = &["ip", "hostname", "unknown-endpoint"];
const PROPAGATION_ERROR: &[&str] = &["ignore", "panic", "panic-on-replicas"];

const fn p(name: &'static str, kind: Kind, access: Access, default: &'static str) -> ParamSpec {
    ParamSpec {
        name,
        kind,
        access,
        default,
        hidden: false,
    }
}

const fn hidden(name: &'static str, kind: Kind, default: &'static str) -> ParamSpec {
    ParamSpec {
        name,
        kind,
        access: Access::Mutable,
        default,
        hidden: true,
    }
}

const fn int(min: i64, max: i64) -> Kind {
    Kind::Int { min, max }
}

const fn mem(min: u64, max: u64) -> Kind {
    Kind::Memory { min, max }
}

const B: Kind = Kind::Bool;
const TEXT: Kind = Kind::Text(None);
const M: Access = Access::Mutable;
const I: Access = Access::Immutable;
const P: Access = Access::Protected;
const LONG_MAX_U: u64 = i64::MAX as u64;

/// Every parameter of Redis 7.0 (its `CONFIG GET *`, the TLS ones included, and
/// the hidden ones a config file may set), Redis 7.2's (`set-max-listpack-*`,
/// `locale-collate`, `cluster-announce-human-nodename`), and Ruvio's own (`shards`, `port-mode`, `durability`, `metrics-port`, `metrics-bind`). An alias is a row of its
/// own (Redis lists both names); `cmd::config` keeps them one value.
#[rustfmt::skip]
pub const PARAMS: &[ParamSpec] = &[
    // yes/no
    p("rdbchecksum", B, I, "yes"),
    p("daemonize", B, I, "no"),
    p("io-threads-do-reads", B, I, "no"),
    p("always-show-logo", B, I, "no"),
    p("protected-mode", B, M, "yes"),
    p("rdbcompression", B, M, "yes"),
    p("rdb-del-sync-files", B, M, "no"),
    p("activerehashing", B, M, "yes"),
    p("stop-writes-on-bgsave-error", B, M, "yes"),
    p("set-proc-title", B, I, "yes"),
    p("dynamic-hz", B, M, "yes"),
    p("lazyfree-lazy-eviction", B, M, "no"),
    p("lazyfree-lazy-expire", B, M, "no"),
    p("lazyfree-lazy-server-del", B, M, "no"),
    p("lazyfree-lazy-user-del", B, M, "no"),
    p("lazyfree-lazy-user-flush", B, M, "no"),
    p("repl-disable-tcp-nodelay", B, M, "no"),
    p("repl-diskless-sync", B, M, "yes"),
    p("aof-rewrite-incremental-fsync", B, M, "yes"),
    p("no-appendfsync-on-rewrite", B, M, "no"),
    p("cluster-require-full-coverage", B, M, "yes"),
    p("rdb-save-incremental-fsync", B, M, "yes"),
    p("aof-load-truncated", B, M, "yes"),
    p("aof-use-rdb-preamble", B, M, "yes"),
    p("aof-timestamp-enabled", B, M, "no"),
    p("cluster-replica-no-failover", B, M, "no"),
    p("cluster-slave-no-failover", B, M, "no"),
    p("replica-lazy-flush", B, M, "no"),
    p("slave-lazy-flush", B, M, "no"),
    p("replica-serve-stale-data", B, M, "yes"),
    p("slave-serve-stale-data", B, M, "yes"),
    p("replica-read-only", B, M, "yes"),
    p("slave-read-only", B, M, "yes"),
    p("replica-ignore-maxmemory", B, M, "yes"),
    p("slave-ignore-maxmemory", B, M, "yes"),
    p("jemalloc-bg-thread", B, M, "yes"),
    p("activedefrag", Kind::Special(active_defrag), M, "no"),
    p("syslog-enabled", B, I, "no"),
    p("cluster-enabled", B, I, "no"),
    p("appendonly", B, M, "no"),
    p("cluster-allow-reads-when-down", B, M, "no"),
    p("cluster-allow-pubsubshard-when-down", B, M, "yes"),
    p("crash-log-enabled", B, M, "yes"),
    p("crash-memcheck-enabled", B, M, "yes"),
    hidden("use-exit-on-panic", B, "no"),
    p("disable-thp", B, I, "yes"),
    p("cluster-allow-replica-migration", B, M, "yes"),
    p("replica-announced", B, M, "yes"),
    p("latency-tracking", B, M, "yes"),
    p("aof-disable-auto-gc", B, M, "no"),
    p("replica-ignore-disk-write-errors", B, M, "no"),
    p("tls-cluster", B, M, "no"),
    p("tls-replication", B, M, "no"),
    p("tls-prefer-server-ciphers", B, M, "no"),
    p("tls-session-caching", B, M, "yes"),
    // text
    p("aclfile", TEXT, I, ""),
    p("unixsocket", TEXT, I, ""),
    p("pidfile", TEXT, I, ""),
    p("replica-announce-ip", TEXT, M, ""),
    p("slave-announce-ip", TEXT, M, ""),
    p("masteruser", TEXT, M, ""),
    p("masterauth", TEXT, M, ""),
    p("requirepass", TEXT, M, ""),
    p("cluster-announce-ip", TEXT, M, ""),
    p("cluster-config-file", TEXT, I, "nodes.conf"),
    p("cluster-announce-hostname", Kind::Text(Some(announced_hostname)), M, ""),
    // Redis 7.2's.
    p("cluster-announce-human-nodename", TEXT, M, ""),
    p("locale-collate", TEXT, M, ""),
    p("syslog-ident", TEXT, I, "redis"),
    p("dbfilename", Kind::Text(Some(db_filename)), P, "dump.rdb"),
    p("appendfilename", Kind::Text(Some(aof_filename)), I, "appendonly.aof"),
    p("appenddirname", Kind::Text(Some(aof_dirname)), I, "appendonlydir"),
    p("server_cpulist", TEXT, I, ""),
    p("bio_cpulist", TEXT, I, ""),
    p("aof_rewrite_cpulist", TEXT, I, ""),
    p("bgsave_cpulist", TEXT, I, ""),
    p("ignore-warnings", TEXT, M, ""),
    p("proc-title-template", Kind::Text(Some(proc_title_template)), M, "{title} {listen-addr} {server-mode}"),
    p("bind-source-addr", TEXT, M, ""),
    p("logfile", TEXT, I, ""),
    p("tls-cert-file", TEXT, M, ""),
    p("tls-key-file", TEXT, M, ""),
    p("tls-key-file-pass", TEXT, M, ""),
    p("tls-client-cert-file", TEXT, M, ""),
    p("tls-client-key-file", TEXT, M, ""),
    p("tls-client-key-file-pass", TEXT, M, ""),
    p("tls-dh-params-file", TEXT, M, ""),
    p("tls-ca-cert-file", TEXT, M, ""),
    p("tls-ca-cert-dir", TEXT, M, ""),
    p("tls-protocols", TEXT, M, ""),
    p("tls-ciphers", TEXT, M, ""),
    p("tls-ciphersuites", TEXT, M, ""),
    // enums
    p("supervised", Kind::Enum(SUPERVISED), I, "no"),
    p("syslog-facility", Kind::Enum(SYSLOG_FACILITIES), I, "local0"),
    p("repl-diskless-load", Kind::Enum(DISKLESS_LOAD), M, "disabled"),
    p("loglevel", Kind::Enum(LOGLEVELS), M, "notice"),
    p("maxmemory-policy", Kind::Enum(POLICIES), M, "noeviction"),
    p("appendfsync", Kind::Enum(FSYNC), M, "everysec"),
    p("oom-score-adj", Kind::Enum(OOM_SCORE_ADJ), M, "no"),
    p("acl-pubsub-default", Kind::Enum(ACL_PUBSUB), M, "resetchannels"),
    p("sanitize-dump-payload", Kind::Enum(SANITIZE), M, "no"),
    p("enable-protected-configs", Kind::Enum(PROTECTED_ACTION), I, "no"),
    p("enable-debug-command", Kind::Enum(PROTECTED_ACTION), I, "yes"),
    p("enable-module-command", Kind::Enum(PROTECTED_ACTION), I, "no"),
    p("cluster-preferred-endpoint-type", Kind::Enum(ENDPOINT_TYPE), M, "ip"),
    p("tls-auth-clients", Kind::Enum(TLS_AUTH), M, "yes"),
    p("propagation-error-behavior", Kind::Enum(PROPAGATION_ERROR), M, "ignore"),
    p("shutdown-on-sigint", Kind::Special(shutdown_flags), M, "default"),
    p("shutdown-on-sigterm", Kind::Special(shutdown_flags), M, "default"),
    // integers
    p("databases", int(1, INT_MAX), I, "16"),
    p("port", int(0, 65535), I, "6379"),
    p("io-threads", int(1, 128), I, "1"),
    p("auto-aof-rewrite-percentage", int(0, INT_MAX), M, "100"),
    p("cluster-replica-validity-factor", int(0, INT_MAX), M, "10"),
    p("cluster-slave-validity-factor", int(0, INT_MAX), M, "10"),
    p("list-max-listpack-size", int(INT_MIN, INT_MAX), M, "-2"),
    p("list-max-ziplist-size", int(INT_MIN, INT_MAX), M, "-2"),
    p("tcp-keepalive", int(0, INT_MAX), M, "300"),
    p("cluster-migration-barrier", int(0, INT_MAX), M, "1"),
    p("active-defrag-cycle-min", int(1, 99), M, "1"),
    p("active-defrag-cycle-max", int(1, 99), M, "25"),
    p("active-defrag-threshold-lower", int(0, 1000), M, "10"),
    p("active-defrag-threshold-upper", int(0, 1000), M, "100"),
    p("lfu-log-factor", int(0, INT_MAX), M, "10"),
    p("lfu-decay-time", int(0, INT_MAX), M, "1"),
    p("replica-priority", int(0, INT_MAX), M, "100"),
    p("slave-priority", int(0, INT_MAX), M, "100"),
    p("repl-diskless-sync-delay", int(0, INT_MAX), M, "5"),
    p("maxmemory-samples", int(1, INT_MAX), M, "5"),
    p("maxmemory-eviction-tenacity", int(0, 100), M, "10"),
    p("timeout", int(0, INT_MAX), M, "0"),
    p("replica-announce-port", int(0, 65535), M, "0"),
    p("slave-announce-port", int(0, 65535), M, "0"),
    p("tcp-backlog", int(0, INT_MAX), I, "511"),
    p("cluster-port", int(0, 65535), I, "0"),
    p("cluster-announce-bus-port", int(0, 65535), M, "0"),
    p("cluster-announce-port", int(0, 65535), M, "0"),
    p("cluster-announce-tls-port", int(0, 65535), M, "0"),
    p("repl-timeout", int(1, INT_MAX), M, "60"),
    p("repl-ping-replica-period", int(1, INT_MAX), M, "10"),
    p("repl-ping-slave-period", int(1, INT_MAX), M, "10"),
    p("list-compress-depth", int(0, INT_MAX), M, "0"),
    hidden("rdb-key-save-delay", int(INT_MIN, INT_MAX), "0"),
    hidden("key-load-delay", int(INT_MIN, INT_MAX), "0"),
    p("active-expire-effort", int(1, 10), M, "1"),
    p("hz", int(0, INT_MAX), M, "10"),
    p("min-replicas-to-write", int(0, INT_MAX), M, "0"),
    p("min-slaves-to-write", int(0, INT_MAX), M, "0"),
    p("min-replicas-max-lag", int(0, INT_MAX), M, "10"),
    p("min-slaves-max-lag", int(0, INT_MAX), M, "10"),
    hidden("watchdog-period", int(0, INT_MAX), "0"),
    p("shutdown-timeout", int(0, INT_MAX), M, "10"),
    p("repl-diskless-sync-max-replicas", int(0, INT_MAX), M, "0"),
    p("maxclients", int(1, UINT_MAX), M, "10000"),
    p("socket-mark-id", int(0, UINT_MAX), I, "0"),
    p("unixsocketperm", Kind::Octal { max: 0o777 }, I, "0"),
    p("active-defrag-max-scan-fields", int(1, LONG_MAX), M, "1000"),
    p("slowlog-max-len", int(0, LONG_MAX), M, "128"),
    p("acllog-max-len", int(0, LONG_MAX), M, "128"),
    p("busy-reply-threshold", int(0, LONG_MAX), M, "5000"),
    p("lua-time-limit", int(0, LONG_MAX), M, "5000"),
    p("cluster-node-timeout", int(0, LONG_MAX), M, "15000"),
    p("slowlog-log-slower-than", int(-1, LONG_MAX), M, "10000"),
    p("latency-monitor-threshold", int(0, LONG_MAX), M, "0"),
    p("stream-node-max-entries", int(0, LONG_MAX), M, "100"),
    p("set-max-intset-entries", int(0, LONG_MAX), M, "512"),
    p("set-max-listpack-entries", int(0, LONG_MAX), M, "128"),
    p("hash-max-listpack-entries", int(0, LONG_MAX), M, "128"),
    p("hash-max-ziplist-entries", int(0, LONG_MAX), M, "128"),
    p("zset-max-listpack-entries", int(0, LONG_MAX), M, "128"),
    p("zset-max-ziplist-entries", int(0, LONG_MAX), M, "128"),
    p("tracking-table-max-keys", int(0, LONG_MAX), M, "1000000"),
    p("repl-backlog-ttl", int(0, LONG_MAX), M, "3600"),
    hidden("loading-process-events-interval-bytes", int(1024, INT_MAX), "2097152"),
    p("tls-port", int(0, 65535), M, "0"),
    p("tls-session-cache-size", int(0, INT_MAX), M, "20480"),
    p("tls-session-cache-timeout", int(0, INT_MAX), M, "300"),
    // memory
    p("proto-max-bulk-len", mem(1 << 20, LONG_MAX_U), M, "536870912"),
    p("repl-backlog-size", mem(1, LONG_MAX_U), M, "1048576"),
    p("maxmemory", mem(0, u64::MAX), M, "0"),
    p("cluster-link-sendbuf-limit", mem(0, u64::MAX), M, "0"),
    p("active-defrag-ignore-bytes", mem(1, LONG_MAX_U), M, "104857600"),
    p("hash-max-listpack-value", mem(0, LONG_MAX_U), M, "64"),
    p("hash-max-ziplist-value", mem(0, LONG_MAX_U), M, "64"),
    p("set-max-listpack-value", mem(0, LONG_MAX_U), M, "64"),
    p("stream-node-max-bytes", mem(0, LONG_MAX_U), M, "4096"),
    p("zset-max-listpack-value", mem(0, LONG_MAX_U), M, "64"),
    p("zset-max-ziplist-value", mem(0, LONG_MAX_U), M, "64"),
    p("hll-sparse-max-bytes", mem(0, LONG_MAX_U), M, "3000"),
    p("client-query-buffer-limit", mem(1 << 20, LONG_MAX_U), M, "1073741824"),
    p("auto-aof-rewrite-min-size", mem(0, LONG_MAX_U), M, "67108864"),
    p("maxmemory-clients", Kind::MemoryOrPercent, M, "0"),
    // their own syntax
    p("dir", Kind::Special(directory), P, "./data"),
    p("save", Kind::Special(save_rules), M, save::DEFAULT),
    p("client-output-buffer-limit", Kind::Special(output_buffer_limits), M,
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"),
    p("oom-score-adj-values", Kind::Special(oom_score_adj_values), M, "0 200 800"),
    p("notify-keyspace-events", Kind::Special(keyspace_event_flags), M, ""),
    p("bind", TEXT, I, "127.0.0.1"),
    p("replicaof", TEXT, I, ""),
    p("slaveof", TEXT, I, ""),
    p("latency-tracking-info-percentiles", Kind::Special(percentiles), M, "50 99 99.9"),
    // Valkey 8.1's command logs (COMMANDLOG); the first two are second names of
    // slowlog-log-slower-than and slowlog-max-len, as in Valkey.
    p("commandlog-execution-slower-than", int(-1, LONG_MAX), M, "10000"),
    p("commandlog-slow-execution-max-len", int(0, LONG_MAX), M, "128"),
    p("commandlog-request-larger-than", int(-1, LONG_MAX), M, "1048576"),
    p("commandlog-reply-larger-than", int(-1, LONG_MAX), M, "1048576"),
    p("commandlog-large-request-max-len", int(0, LONG_MAX), M, "128"),
    p("commandlog-large-reply-max-len", int(0, LONG_MAX), M, "128"),
    // Ruvio's own
    p("shards", TEXT, I, ""),
    p("port-mode", TEXT, I, "forward"),
    p("durability", TEXT, I, "memory"),
    p("replica-shard-links", B, M, "yes"),
    p("metrics-port", int(0, 65535), I, "0"),
    p("metrics-bind", TEXT, I, "127.0.0.1"),
];

/// Names Redis 7 still reads from a config file and ignores (`deprecated_configs`
/// in its config.c): a file may hold them; CONFIG SET does not know them, as in
/// Redis.
pub const DEPRECATED: &[&str] = &[
    "list-max-ziplist-entries",
    "list-max-ziplist-value",
    "lua-replicate-commands",
];

/// Redis's second names (alias, the name it stands for): one value under both.
pub const ALIASES: &[(&str, &str)] = &[
    ("cluster-slave-no-failover", "cluster-replica-no-failover"),
    ("slave-lazy-flush", "replica-lazy-flush"),
    ("slave-serve-stale-data", "replica-serve-stale-data"),
    ("slave-read-only", "replica-read-only"),
    ("slave-ignore-maxmemory", "replica-ignore-maxmemory"),
    ("slave-announce-ip", "replica-announce-ip"),
    (
        "cluster-slave-validity-factor",
        "cluster-replica-validity-factor",
    ),
    ("list-max-ziplist-size", "list-max-listpack-size"),
    ("slave-priority", "replica-priority"),
    ("slave-announce-port", "replica-announce-port"),
    ("repl-ping-slave-period", "repl-ping-replica-period"),
    ("min-slaves-to-write", "min-replicas-to-write"),
    ("min-slaves-max-lag", "min-replicas-max-lag"),
    ("lua-time-limit", "busy-reply-threshold"),
    (
        "commandlog-execution-slower-than",
        "slowlog-log-slower-than",
    ),
    ("commandlog-slow-execution-max-len", "slowlog-max-len"),
    ("hash-max-ziplist-entries", "hash-max-listpack-entries"),
    ("hash-max-ziplist-value", "hash-max-listpack-value"),
    ("zset-max-ziplist-entries", "zset-max-listpack-entries"),
    ("zset-max-ziplist-value", "zset-max-listpack-value"),
    ("slaveof", "replicaof"),
];

/// The name a parameter's value is kept under: its own, or for an alias the
/// name it stands for.
pub fn storage_name(name: &'static str) -> &'static str {
    ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |(_, canonical)| canonical)
}

/// The parameter named `name` (any case; `_` as `-` for the TOML file's keys,
/// except in the few Redis names that are spelt with `_`).
pub fn find(name: &str) -> Option<&'static ParamSpec> {
    PARAMS
        .iter()
        .find(|p| p.name.eq_ignore_ascii_case(name))
        .or_else(|| {
            let dashed = name.replace('_', "-");
            PARAMS.iter().find(|p| p.name.eq_ignore_ascii_case(&dashed))
        })
}

/// `value` checked as `spec` takes it: `Ok` with the form CONFIG GET shows, or
/// `Err` with Redis's reason (the text after `- ` in CONFIG SET's error).
pub fn check(spec: &ParamSpec, value: &str) -> Result<String, String> {
    match spec.kind {
        Kind::Bool => match value.to_ascii_lowercase().as_str() {
            v @ ("yes" | "no") => Ok(v.to_string()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        },
        Kind::Int { min, max } => {
            let n = redis_integer(value)
                .ok_or_else(|| "argument couldn't be parsed into an integer".to_string())?;
            in_bounds(n as i128, min as i128, max as i128)?;
            Ok(n.to_string())
        }
        Kind::Memory { min, max } => {
            let n =
                redis_memory(value).ok_or_else(|| "argument must be a memory value".to_string())?;
            in_bounds(n as i128, min as i128, max as i128)?;
            Ok(n.to_string())
        }
        Kind::MemoryOrPercent => memory_or_percent(value),
        Kind::Octal { max } => {
            let n = u32::from_str_radix(value, 8)
                .ok()
                .filter(|_| !value.is_empty())
                .ok_or_else(|| "argument couldn't be parsed into an integer".to_string())?;
            in_bounds(n as i128, 0, max as i128)?;
            Ok(format!("{n:o}"))
        }
        Kind::Enum(names) => names
            .iter()
            .find(|n| n.eq_ignore_ascii_case(value))
            .map(|n| n.to_string())
            .ok_or_else(|| {
                format!(
                    "argument(s) must be one of the following: {}",
                    names.join(", ")
                )
            }),
        Kind::Text(None) => Ok(value.to_string()),
        Kind::Text(Some(valid)) => valid(value).map(|()| value.to_string()).map_err(Into::into),
        Kind::Special(check) => check(value),
    }
}

fn in_bounds(n: i128, min: i128, max: i128) -> Result<(), String> {
    if n < min || n > max {
        return Err(format!(
            "argument must be between {min} and {max} inclusive"
        ));
    }
    Ok(())
}

/// Redis's `string2ll`: an optional `-`, digits without a leading zero (`0` alone
/// is fine), nothing else.
pub fn redis_integer(v: &str) -> Option<i64> {
    let digits = v.strip_prefix('-').unwrap_or(v);
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && v != "-0";
    canonical.then(|| v.parse().ok()).flatten()
}

/// Redis's `memtoull`: digits (none is 0; too many saturate, as `strtoull`) and
/// an optional unit `b k kb m mb g gb` in any case.
pub fn redis_memory(v: &str) -> Option<u64> {
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (digits, unit) = v.split_at(split);
    let multiplier = memory_unit(unit)?;
    let number = if digits.is_empty() {
        0
    } else {
        digits.parse::<u64>().unwrap_or(u64::MAX)
    };
    Some(number.wrapping_mul(multiplier))
}

/// Bytes in one `unit` of a memory value (`b k kb m mb g gb`, any case; none is
/// bytes).
pub fn memory_unit(unit: &str) -> Option<u64> {
    Some(match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1 << 20,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1 << 30,
        _ => return None,
    })
}

fn memory_or_percent(v: &str) -> Result<String, String> {
    const BAD: &str = "argument must be a memory or percent value";
    if let Some(percent) = v.strip_suffix('%') {
        let n = redis_integer(percent)
            .filter(|&n| n >= 0)
            .ok_or_else(|| BAD.to_string())?;
        if n > 100 {
            return Err("percentage argument must be less or equal to 100".into());
        }
        return Ok(format!("{n}%"));
    }
    let n = redis_memory(v).ok_or_else(|| BAD.to_string())?;
    in_bounds(n as i128, -100, isize::MAX as i128)?;
    Ok(n.to_string())
}

/// Redis refuses `activedefrag yes` when its allocator cannot move allocations,
/// with this text; Ruvio's cannot (it has no defragmenter), so it answers the same.
fn active_defrag(v: &str) -> Result<String, String> {
    match v.to_ascii_lowercase().as_str() {
        "no" => Ok("no".into()),
        "yes" => Err(
            "Active defragmentation cannot be enabled: it requires a Redis server \
                      compiled with a modified Jemalloc like the one shipped by default with \
                      the Redis source distribution"
                .into(),
        ),
        _ => Err("argument must be 'yes' or 'no'".into()),
    }
}

fn db_filename(v: &str) -> Result<(), &'static str> {
    if v.contains('/') {
        return Err("dbfilename can't be a path, just a filename");
    }
    Ok(())
}

fn aof_filename(v: &str) -> Result<(), &'static str> {
    if v.is_empty() || v.contains('/') || v == "." || v == ".." {
        return Err("appendfilename can't be a path, just a filename");
    }
    Ok(())
}

fn aof_dirname(v: &str) -> Result<(), &'static str> {
    if v.is_empty() || v.contains('/') || v == "." || v == ".." {
        return Err("appenddirname can't be a path, just a dirname");
    }
    Ok(())
}

pub(crate) fn announced_hostname(v: &str) -> Result<(), &'static str> {
    if v.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
    {
        Ok(())
    } else {
        Err("Hostnames may only contain alphanumeric characters, hyphens or dots")
    }
}

/// Redis's process title template: `{name}` variables of a known set only, and
/// at least `{title}` or `{listen-addr}`... as `validateProcTitleTemplate`
/// requires: non-empty, balanced braces, known variables.
fn proc_title_template(v: &str) -> Result<(), &'static str> {
    const BAD: &str = "template format is invalid or contains unknown variables";
    const VARIABLES: &[&str] = &[
        "title",
        "listen-addr",
        "server-mode",
        "port",
        "tls-port",
        "unixsocket",
        "config-file",
    ];
    if v.trim().is_empty() {
        return Err(BAD);
    }
    let mut rest = v;
    while let Some(open) = rest.find(['{', '}']) {
        if rest.as_bytes()[open] == b'}' {
            return Err(BAD);
        }
        let after = &rest[open + 1..];
        let close = after.find('}').ok_or(BAD)?;
        if !VARIABLES.contains(&&after[..close]) {
            return Err(BAD);
        }
        rest = &after[close + 1..];
    }
    Ok(())
}

/// `dir`: any directory that exists (Redis changes into it; Ruvio keeps its
/// snapshots there). Shown as given.
fn directory(v: &str) -> Result<String, String> {
    match std::fs::metadata(v) {
        Ok(m) if m.is_dir() => Ok(v.to_string()),
        Ok(_) => Err("Not a directory".into()),
        Err(e) => Err(io_reason(&e)),
    }
}

/// The `strerror` text Redis quotes for an I/O error.
pub fn io_reason(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

fn save_rules(v: &str) -> Result<String, String> {
    save::parse(v).map(|rules| save::format(&rules))
}

/// Checked only: a value names some classes and leaves the others as they are,
/// so it is applied to the running limits as given (`cmd::config`).
fn output_buffer_limits(v: &str) -> Result<String, String> {
    output_limits::OutputLimits::default()
        .updated(v)
        .map(|_| v.to_string())
        .map_err(Into::into)
}

/// Checked only, and kept as given: Redis's shown form drops `n` beside `A`
/// (`AKEm` for `KEAnm`), so it cannot stand for the flags set.
fn keyspace_event_flags(v: &str) -> Result<String, String> {
    keyspace_events::parse(v)
        .map(|_| v.to_string())
        .ok_or_else(|| keyspace_events::INVALID.to_string())
}

/// `shutdown-on-sigint` / `-sigterm`: SHUTDOWN's flags as words (`default`:
/// none), shown in Redis's order.
fn shutdown_flags(v: &str) -> Result<String, String> {
    const NAMES: [&str; 4] = ["save", "nosave", "now", "force"];
    let words: Vec<&str> = v.split_whitespace().collect();
    let unknown = || "argument(s) must be one of the following: default, save, nosave, now, force";
    if words.is_empty() {
        return Err(unknown().into());
    }
    let mut set = [false; 4];
    for word in words {
        if word.eq_ignore_ascii_case("default") {
            continue;
        }
        let at = NAMES
            .iter()
            .position(|n| n.eq_ignore_ascii_case(word))
            .ok_or_else(|| unknown().to_string())?;
        set[at] = true;
    }
    if set[0] && set[1] {
        return Err("shutdown options SAVE and NOSAVE can't be used simultaneously".into());
    }
    let shown: Vec<&str> = NAMES
        .iter()
        .zip(set)
        .filter(|(_, on)| *on)
        .map(|(n, _)| *n)
        .collect();
    Ok(if shown.is_empty() {
        "default".into()
    } else {
        shown.join(" ")
    })
}

/// Three integers, each within -2000..=2000 (Redis's `oom-score-adj-values`).
fn oom_score_adj_values(v: &str) -> Result<String, String> {
    let words: Vec<&str> = v.split_whitespace().collect();
    if words.len() != 3 {
        return Err("wrong number of arguments".into());
    }
    let values: Option<Vec<i64>> = words
        .iter()
        .map(|w| w.parse::<i64>().ok().filter(|n| (-2000..=2000).contains(n)))
        .collect();
    let values = values.ok_or_else(|| {
        "Invalid oom-score-adj-values, elements must be between -2000 and 2000.".to_string()
    })?;
    Ok(values
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(" "))
}

/// Percentiles between 0 and 100, shown as Redis prints them (`%f`, trailing
/// zeros cut).
fn percentiles(v: &str) -> Result<String, String> {
    let mut shown = Vec::new();
    for word in v.split_whitespace() {
        let p: f64 = word
            .parse()
            .ok()
            .filter(|p: &f64| p.is_finite())
            .ok_or_else(|| "Invalid latency-tracking-info-percentiles parameters".to_string())?;
        if !(0.0..=100.0).contains(&p) {
            return Err(
                "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
                    .into(),
            );
        }
        let text = format!("{p:.6}");
        shown.push(text.trim_end_matches('0').trim_end_matches('.').to_string());
    }
    Ok(shown.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_and_memory_read_as_redis_reads_them() {
        assert_eq!(redis_integer("-5"), Some(-5));
        for bad in [
            "",
            "+5",
            "-0",
            "007",
            " 5",
            "1e3",
            "0x10",
            "99999999999999999999",
        ] {
            assert_eq!(redis_integer(bad), None, "{bad:?}");
        }
        assert_eq!(redis_memory("1KB"), Some(1024));
        assert_eq!(redis_memory(""), Some(0));
        assert_eq!(redis_memory("kb"), Some(0));
        for bad in ["+5", "-0", "1.5", "1x"] {
            assert_eq!(redis_memory(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn names_are_unique_and_defaults_pass_their_own_check() {
        let mut names: Vec<&str> = PARAMS.iter().map(|p| p.name).collect();
        names.sort_unstable();
        let count = names.len();
        names.dedup();
        assert_eq!(names.len(), count, "a parameter is listed twice");
        for spec in PARAMS.iter().filter(|p| p.name != "dir") {
            assert_eq!(
                check(spec, spec.default).as_deref(),
                Ok(spec.default),
                "{}",
                spec.name
            );
        }
    }

    #[test]
    fn docs_config_md_lists_every_parameter() {
        let doc = include_str!("../../../../docs/config.md");
        for spec in PARAMS {
            assert!(
                doc.contains(&format!("| `{}` |", spec.name)),
                "docs/config.md lacks {}",
                spec.name
            );
        }
    }

    #[test]
    fn values_are_kept_in_config_gets_form() {
        let spec = |n| find(n).unwrap();
        assert_eq!(check(spec("rdbcompression"), "YES").unwrap(), "yes");
        assert_eq!(check(spec("stream-node-max-bytes"), "1k").unwrap(), "1000");
        assert_eq!(check(spec("loglevel"), "WARNING").unwrap(), "warning");
        assert_eq!(
            check(spec("hz"), "-1").unwrap_err(),
            "argument must be between 0 and 2147483647 inclusive"
        );
        assert_eq!(check(spec("maxmemory-clients"), "10%").unwrap(), "10%");
        assert_eq!(
            check(spec("latency-tracking-info-percentiles"), "50 99.90").unwrap(),
            "50 99.9"
        );
        assert!(check(spec("proc-title-template"), "{bad}").is_err());
        assert!(find("list_compress_depth").is_some());
        assert!(find("server_cpulist").is_some());
    }
}
