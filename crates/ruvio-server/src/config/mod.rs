//! Server configuration: defaults, the TOML file, and command-line overrides.
//!
//! Precedence is CLI > file > default. Every setting is documented in
//! `config/ruvio.toml`; CONFIG GET/SET read and write the runtime copy that
//! each shard keeps (see `cmd::config`).

pub mod change;
pub mod cluster;
pub mod keyspace_events;
pub mod output_limits;
pub mod params;
pub mod save;

use clap::{Parser, ValueEnum};
use serde::Deserialize;
use std::path::PathBuf;

/// How clients reach the shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum PortMode {
    /// Shard i listens on `port + i`; cluster-aware clients route by slot (MOVED).
    PerShard,
    /// Every shard accepts on `port` (SO_REUSEPORT); keys of other shards are forwarded.
    Forward,
}

impl PortMode {
    pub fn name(self) -> &'static str {
        match self {
            PortMode::PerShard => "per-shard",
            PortMode::Forward => "forward",
        }
    }
}

/// When a write is acknowledged (docs/durability.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Durability {
    /// No persistence: writes live in memory only.
    Memory,
    /// Every write is logged and acknowledged at once; the log is fsynced once a
    /// second (Redis' `appendonly yes`, `appendfsync everysec`).
    Everysec,
    /// A write's reply, and every later reply of its connection, is sent once the
    /// log group holding it is on disk (Redis' `appendfsync always`).
    Always,
}

impl Durability {
    pub fn name(self) -> &'static str {
        match self {
            Durability::Memory => "memory",
            Durability::Everysec => "everysec",
            Durability::Always => "always",
        }
    }

    /// Writes go to a log.
    pub fn logs(self) -> bool {
        self != Durability::Memory
    }
}

/// Command-line flags; each overrides the same setting from the config file.
#[derive(Parser, Debug, Default)]
#[command(
    name = "ruvio",
    version,
    about = "Ruvio: a thread-per-core, Redis-compatible in-memory store"
)]
pub struct Cli {
    /// TOML configuration file (see config/ruvio.toml).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Address to listen on.
    #[arg(long)]
    pub bind: Option<String>,
    /// TCP port (per-shard mode: the port of shard 0).
    #[arg(long)]
    pub port: Option<u16>,
    /// Number of shards (default: one per CPU).
    #[arg(long)]
    pub shards: Option<usize>,
    /// per-shard or forward.
    #[arg(long, value_enum)]
    pub port_mode: Option<PortMode>,
    /// CPUs to pin shards to, e.g. `0,1` or `0-3` (shard i runs on the i-th CPU listed).
    #[arg(long)]
    pub cpus: Option<String>,
    /// memory (no log), everysec (a log per shard, fsynced once a second) or always
    /// (replies wait until their writes are on disk).
    #[arg(long, value_enum)]
    pub durability: Option<Durability>,
    /// Data directory: the shards' logs (default ./data).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Start even if a log is damaged in the middle: cut it at the damage (the
    /// records after it are lost). Without it such a start is refused.
    #[arg(long)]
    pub wal_truncate_corrupt: bool,
    /// Require clients to AUTH with this password.
    #[arg(long)]
    pub requirepass: Option<String>,
    /// Memory limit in bytes, with Redis' units (100mb, 2gb); 0: no limit.
    #[arg(long)]
    pub maxmemory: Option<String>,
    /// What goes past maxmemory: noeviction, allkeys-lru, allkeys-lfu, allkeys-random,
    /// volatile-lru, volatile-lfu, volatile-random or volatile-ttl.
    #[arg(long)]
    pub maxmemory_policy: Option<String>,
    /// Address announced in MOVED and CLUSTER replies (Redis' cluster-announce-ip);
    /// by default the bind address, or, bound to every interface, the address each
    /// client connected to.
    #[arg(long)]
    pub cluster_announce_ip: Option<String>,
    /// Load this Redis RDB file (dump.rdb) at start; each shard keeps its keys.
    #[arg(long)]
    pub import_rdb: Option<PathBuf>,
    /// Redis' save rules, e.g. "3600 1 300 100 60 10000" ("": none); they take
    /// background snapshots when a log is kept.
    #[arg(long)]
    pub save: Option<String>,
    /// Redis's `dbfilename`: the snapshot SAVE and BGSAVE write under `--durability
    /// memory`, in `--dir` (default dump.rdb).
    #[arg(long)]
    pub dbfilename: Option<String>,
    /// Redis's `logfile`: the server log's file ("" or absent: standard error).
    #[arg(long)]
    pub logfile: Option<String>,
    /// Redis's `loglevel`: debug, verbose, notice (default) or warning.
    #[arg(long)]
    pub loglevel: Option<String>,
    /// Port of the HTTP metrics endpoint (`GET /metrics`, the live page at `/`);
    /// 0 (the default): off.
    #[arg(long)]
    pub metrics_port: Option<u16>,
    /// Address the metrics endpoint listens on (default 127.0.0.1).
    #[arg(long)]
    pub metrics_bind: Option<String>,
    /// Redis's `tls-port`: a port for TLS clients beside the plain one (per-shard
    /// mode: shard i's is `tls-port + i`); 0 (the default): none.
    #[arg(long)]
    pub tls_port: Option<u16>,
    /// Redis's `tls-cert-file`: the server's certificate chain (PEM).
    #[arg(long)]
    pub tls_cert_file: Option<String>,
    /// Redis's `tls-key-file`: its private key (PEM).
    #[arg(long)]
    pub tls_key_file: Option<String>,
    /// Redis's `tls-ca-cert-file`: the CAs client certificates must chain to (PEM).
    #[arg(long)]
    pub tls_ca_cert_file: Option<String>,
    /// Redis's `tls-auth-clients`: yes (the default), optional or no.
    #[arg(long)]
    pub tls_auth_clients: Option<String>,
    /// Redis's `tls-key-file-pass`: the passphrase of an encrypted `tls-key-file`.
    #[arg(long)]
    pub tls_key_file_pass: Option<String>,
    /// Redis's `tls-ca-cert-dir`: a directory of CA certificates (PEM files).
    #[arg(long)]
    pub tls_ca_cert_dir: Option<String>,
    /// Redis's `tls-protocols`: e.g. "TLSv1.2 TLSv1.3" (the default: both).
    #[arg(long)]
    pub tls_protocols: Option<String>,
    /// Redis's `tls-ciphersuites`: TLS 1.3 suites (OpenSSL names, colon-separated).
    #[arg(long)]
    pub tls_ciphersuites: Option<String>,
    /// Redis's `tls-ciphers`: TLS 1.2 ciphers (an OpenSSL cipher list).
    #[arg(long)]
    pub tls_ciphers: Option<String>,
    /// Redis's `tls-prefer-server-ciphers`: yes or no.
    #[arg(long)]
    pub tls_prefer_server_ciphers: Option<String>,
    /// Redis's `tls-session-caching`: yes (the default) or no.
    #[arg(long)]
    pub tls_session_caching: Option<String>,
    /// Redis's `tls-session-cache-size`: sessions kept (one cache for every shard).
    #[arg(long)]
    pub tls_session_cache_size: Option<String>,
    /// Redis's `tls-session-cache-timeout`: seconds a session can be resumed.
    #[arg(long)]
    pub tls_session_cache_timeout: Option<String>,
    /// Redis's `tls-cluster`: yes tells TLS clients the shards' TLS ports (per-shard
    /// mode's CLUSTER SLOTS / NODES / SHARDS and MOVED).
    #[arg(long)]
    pub tls_cluster: Option<String>,
    /// Redis's `replicaof`: start as a replica of the primary at HOST PORT.
    #[arg(long, num_args = 2, value_names = ["HOST", "PORT"])]
    pub replicaof: Option<Vec<String>>,
    /// Redis's `masterauth`: the password a replica authenticates with.
    #[arg(long)]
    pub masterauth: Option<String>,
    /// Redis's `masteruser`: the user a replica authenticates as.
    #[arg(long)]
    pub masteruser: Option<String>,
    /// Any other Redis parameter given as `--<name> <value>` (as redis-server
    /// takes every directive on its command line): see [`parse_args`].
    #[arg(skip)]
    pub redis: Vec<(String, String)>,
}

/// The command line: Ruvio's own flags, and any Redis parameter of the table
/// (`params::PARAMS`) as `--<name> <value>` or `--<name>=<value>`, which
/// overrides the config file and is checked as CONFIG SET checks it
/// (`ruvio --repl-backlog-size 10mb --min-replicas-to-write 1`).
pub fn parse_args(args: impl IntoIterator<Item = String>) -> Cli {
    use clap::CommandFactory;
    let command = Cli::command();
    let own: std::collections::HashSet<&str> = command
        .get_arguments()
        .filter_map(|a| a.get_long())
        .chain(["help", "version"])
        .collect();
    let (mut rest, mut redis) = (Vec::new(), Vec::new());
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let Some(flag) = arg.strip_prefix("--") else {
            rest.push(arg);
            continue;
        };
        let (name, inline) = match flag.split_once('=') {
            Some((name, value)) => (name, Some(value.to_string())),
            None => (flag, None),
        };
        if own.contains(name) || params::find(name).is_none() {
            rest.push(arg);
            continue;
        }
        let name = name.to_string();
        match inline.or_else(|| args.next()) {
            Some(value) => redis.push((name, value)),
            // No value: clap reports the flag as it reports any bad one.
            None => rest.push(arg),
        }
    }
    let mut cli = Cli::parse_from(rest);
    cli.redis = redis;
    cli
}

/// A size in the config file: bytes, or text with Redis' units ("100mb").
#[derive(Deserialize, Debug, Clone)]
#[serde(untagged)]
enum MemorySize {
    Bytes(u64),
    Text(String),
}

/// Shards one server may run: each is a thread pinned to a CPU, so this is far
/// above any machine's count; compact per-shard encodings (a tracking table's
/// readers keep the shard in 16 bits) rely on it.
pub const SHARDS_MAX: usize = 4096;

/// The config file's shape: every field optional, missing ones take the default.
/// Any other key must name a Redis parameter (`params::PARAMS`, `_` for `-`):
/// it lands in `redis` and is checked as CONFIG SET checks it.
#[derive(Deserialize, Debug, Default)]
struct FileConfig {
    bind: Option<String>,
    port: Option<u16>,
    shards: Option<usize>,
    port_mode: Option<PortMode>,
    cpus: Option<String>,
    durability: Option<Durability>,
    databases: Option<usize>,
    requirepass: Option<String>,
    proto_max_bulk_len: Option<usize>,
    client_query_buffer_limit: Option<usize>,
    hz: Option<u32>,
    list_max_listpack_size: Option<i32>,
    hash_max_listpack_entries: Option<usize>,
    hash_max_listpack_value: Option<usize>,
    zset_max_listpack_entries: Option<usize>,
    zset_max_listpack_value: Option<usize>,
    set_max_intset_entries: Option<usize>,
    set_max_listpack_entries: Option<usize>,
    set_max_listpack_value: Option<usize>,
    hll_sparse_max_bytes: Option<usize>,
    maxmemory: Option<MemorySize>,
    maxclients: Option<u64>,
    timeout: Option<u64>,
    maxmemory_policy: Option<String>,
    maxmemory_samples: Option<usize>,
    lfu_log_factor: Option<u32>,
    lfu_decay_time: Option<u32>,
    cluster_announce_ip: Option<String>,
    dir: Option<PathBuf>,
    client_output_buffer_limit: Option<String>,
    notify_keyspace_events: Option<String>,
    save: Option<String>,
    /// ACL users as Redis's `user` lines without the word `user`
    /// (`user = ["alice on >pw ~* +@all"]`).
    user: Option<Vec<String>>,
    #[serde(flatten)]
    redis: toml::Table,
}

/// The resolved configuration every shard starts from.
#[derive(Clone, Debug)]
pub struct Config {
    pub bind: String,
    pub port: u16,
    pub shards: usize,
    pub port_mode: PortMode,
    /// CPU of each shard, `cpus[i]` for shard i.
    pub cpus: Vec<usize>,
    pub durability: Durability,
    pub databases: usize,
    pub requirepass: Option<String>,
    /// Largest bulk string a client may send (Redis: 512 MiB).
    pub proto_max_bulk_len: usize,
    /// A client whose unparsed input grows past this is closed (Redis: 1 GiB).
    pub client_query_buffer_limit: usize,
    /// Background tasks (active expiry) run this many times per second.
    pub hz: u32,
    /// `maxmemory` in bytes; 0: no limit.
    pub maxmemory: u64,
    /// `maxclients`: connections the server accepts at once (Redis: 10000).
    pub maxclients: u64,
    /// `timeout`: close a client idle this many seconds (0: never).
    pub timeout_s: u64,
    /// `cluster-announce-ip`: empty for none.
    pub cluster_announce_ip: String,
    /// Where the shards' logs live.
    pub dir: PathBuf,
    /// Cut a log damaged in the middle instead of refusing to start.
    pub wal_truncate_corrupt: bool,
    /// Where the config was loaded from, for INFO's `config_file`.
    pub config_file: Option<PathBuf>,
    /// Encoding thresholds of the data types (list-max-listpack-size ...).
    pub engine: ruvio_engine::EngineConfig,
    /// `client-output-buffer-limit` (see [`crate::net::outlimit`]).
    pub client_output_buffer_limit: output_limits::OutputLimits,
    /// `notify-keyspace-events` as Redis' flag bits (see [`crate::messaging::notify`]).
    pub notify_keyspace_events: u32,
    /// A Redis RDB file to load at start (`--import-rdb`).
    pub import_rdb: Option<PathBuf>,
    /// `save` rules (see [`crate::persistence::save_rules`]).
    pub save: Vec<save::SaveRule>,
    /// The config file's ACL `user` lines, each `<name> <rules ...>` (see
    /// [`crate::acl::start`]).
    pub users: Vec<String>,
    /// The values of the other parameters (`params::PARAMS`) set by the file, a
    /// flag or CONFIG SET, under their storage names; a missing one has its default.
    pub params: std::collections::BTreeMap<&'static str, String>,
}

impl Config {
    /// As a replica, this server follows a Ruvio primary of its shard count
    /// over shard links (docs/replication.md): asked for, a forward-mode
    /// server of several shards (with a log, each shard's marks its own
    /// link's place), outside a cluster bus (a promoted cluster replica
    /// must hold its master's stream byte for byte: its sibling replicas,
    /// redis-server nodes among them, continue from it under `replid2`).
    pub fn takes_shard_links(&self) -> bool {
        self.shards > 1
            && self.port_mode == PortMode::Forward
            && !cluster::bus_enabled(&self.params)
            && self.param("replica-shard-links") == "yes"
    }

    /// Resolve the configuration from the command line and the optional file.
    pub fn load(cli: Cli) -> Result<Config, String> {
        let file = match &cli.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                toml::from_str::<FileConfig>(&text)
                    .map_err(|e| format!("invalid config {}: {e}", path.display()))?
            }
            None => FileConfig::default(),
        };
        let mut port_mode = cli
            .port_mode
            .or(file.port_mode)
            .unwrap_or(PortMode::Forward);
        // Per-shard mode answers as Redis Cluster nodes do (`cluster-enabled yes`).
        let mut engine = ruvio_engine::EngineConfig {
            cluster_enabled: port_mode == PortMode::PerShard,
            ..engine_config(&file)
        };
        if let Some(name) = cli
            .maxmemory_policy
            .as_deref()
            .or(file.maxmemory_policy.as_deref())
        {
            engine.maxmemory_policy = ruvio_engine::EvictionPolicy::parse(name)
                .ok_or_else(|| format!("maxmemory-policy: unknown policy {name:?}"))?;
        }
        let maxmemory = match cli
            .maxmemory
            .map(MemorySize::Text)
            .or(file.maxmemory.clone())
        {
            None => 0,
            Some(MemorySize::Bytes(n)) => n,
            Some(MemorySize::Text(text)) => parse_memory(&text)
                .ok_or_else(|| format!("maxmemory: not a memory size: {text:?}"))?
                as u64,
        };
        let online = available_cpus();
        let shards = cli.shards.or(file.shards).unwrap_or(online.len()).max(1);
        if shards > SHARDS_MAX {
            return Err(format!("shards: at most {SHARDS_MAX}, not {shards}"));
        }
        let cpus = match cli.cpus.as_deref().or(file.cpus.as_deref()) {
            Some(list) => parse_cpu_list(list)?,
            None => online,
        };
        if cpus.is_empty() {
            return Err("cpus: the list is empty".into());
        }
        let cpus = (0..shards).map(|i| cpus[i % cpus.len()]).collect();
        let output_limits = output_limits::OutputLimits::default();
        let client_output_buffer_limit = match file.client_output_buffer_limit.as_deref() {
            Some(text) => output_limits
                .updated(text)
                .map_err(|why| format!("client_output_buffer_limit: {why}"))?,
            None => output_limits,
        };
        let notify_keyspace_events = match file.notify_keyspace_events.as_deref() {
            Some(text) => keyspace_events::parse(text)
                .ok_or_else(|| format!("notify_keyspace_events: {}", keyspace_events::INVALID))?,
            None => 0,
        };
        let mut params = redis_params(&file.redis)?;
        let metrics_port = cli.metrics_port.map(|port| port.to_string());
        let tls_port = cli.tls_port.map(|port| port.to_string());
        let replicaof = cli.replicaof.map(|words| words.join(" "));
        for (name, value) in [
            ("tls-port", &tls_port),
            ("tls-cert-file", &cli.tls_cert_file),
            ("tls-key-file", &cli.tls_key_file),
            ("tls-ca-cert-file", &cli.tls_ca_cert_file),
            ("tls-auth-clients", &cli.tls_auth_clients),
            ("tls-cluster", &cli.tls_cluster),
            ("tls-key-file-pass", &cli.tls_key_file_pass),
            ("tls-ca-cert-dir", &cli.tls_ca_cert_dir),
            ("tls-protocols", &cli.tls_protocols),
            ("tls-ciphersuites", &cli.tls_ciphersuites),
            ("tls-ciphers", &cli.tls_ciphers),
            ("tls-prefer-server-ciphers", &cli.tls_prefer_server_ciphers),
            ("tls-session-caching", &cli.tls_session_caching),
            ("tls-session-cache-size", &cli.tls_session_cache_size),
            ("tls-session-cache-timeout", &cli.tls_session_cache_timeout),
            ("dbfilename", &cli.dbfilename),
            ("logfile", &cli.logfile),
            ("loglevel", &cli.loglevel),
            ("metrics-port", &metrics_port),
            ("metrics-bind", &cli.metrics_bind),
            ("replicaof", &replicaof),
            ("masterauth", &cli.masterauth),
            ("masteruser", &cli.masteruser),
        ] {
            if let Some(value) = value {
                let spec = params::find(name).expect("a parameter of the table");
                let shown = params::check(spec, value).map_err(|why| format!("{name}: {why}"))?;
                params.insert(spec.name, shown);
            }
        }
        for (name, value) in &cli.redis {
            let spec = params::find(name).expect("taken from the table");
            let shown = params::check(spec, value).map_err(|why| format!("--{name}: {why}"))?;
            params.insert(params::storage_name(spec.name), shown);
        }
        if cluster::bus_enabled(&params) {
            port_mode = cluster::bus_port_mode(cli.port_mode.or(file.port_mode));
            engine.cluster_enabled = true;
        }
        let cluster_mode = port_mode == PortMode::PerShard || cluster::bus_enabled(&params);
        if cluster_mode && params.contains_key("replicaof") {
            // Redis refuses the directive in cluster mode too.
            return Err("replicaof directive not allowed in cluster mode".into());
        }
        let durability = cli
            .durability
            .or(file.durability)
            .unwrap_or(Durability::Memory);
        apply_engine_params(&mut engine, &params);
        let save_text = cli.save.or(file.save);
        let save = save::parse(save_text.as_deref().unwrap_or(save::DEFAULT))
            .map_err(|e| format!("save: {e}"))?;
        Ok(Config {
            bind: cli.bind.or(file.bind).unwrap_or_else(|| "127.0.0.1".into()),
            port: cli.port.or(file.port).unwrap_or(6379),
            shards,
            port_mode,
            cpus,
            durability,
            databases: file.databases.unwrap_or(16).clamp(1, 1 << 16),
            requirepass: cli
                .requirepass
                .or(file.requirepass)
                .filter(|p| !p.is_empty()),
            proto_max_bulk_len: file.proto_max_bulk_len.unwrap_or(512 << 20),
            client_query_buffer_limit: file.client_query_buffer_limit.unwrap_or(1 << 30),
            hz: file.hz.unwrap_or(10).clamp(1, 500),
            maxmemory,
            maxclients: file.maxclients.unwrap_or(10_000).max(1),
            timeout_s: file.timeout.unwrap_or(0),
            cluster_announce_ip: cli
                .cluster_announce_ip
                .or(file.cluster_announce_ip)
                .unwrap_or_default(),
            dir: cli
                .dir
                .or(file.dir)
                .unwrap_or_else(|| PathBuf::from("./data")),
            wal_truncate_corrupt: cli.wal_truncate_corrupt,
            config_file: cli.config,
            engine,
            client_output_buffer_limit,
            notify_keyspace_events,
            import_rdb: cli.import_rdb,
            users: file.user.unwrap_or_default(),
            save,
            params,
        })
    }

    /// The value of parameter `name` (its storage name) kept in `params`, or its
    /// default.
    pub fn param(&self, name: &str) -> &str {
        match self.params.get(name) {
            Some(value) => value,
            None => params::find(name).map_or("", |spec| spec.default),
        }
    }

    /// The TLS port of shard `id` (`tls-port`, plus `id` in per-shard mode), if
    /// TLS is on.
    pub fn tls_port(&self, id: usize) -> Option<u16> {
        let port: u16 = self.param("tls-port").parse().unwrap_or(0);
        let offset = match self.port_mode {
            PortMode::PerShard => id as u16,
            PortMode::Forward => 0,
        };
        (port != 0).then(|| port + offset)
    }

    /// The port a client is told for shard `shard` whose plain port is `plain`
    /// (CLUSTER SLOTS / NODES, MOVED): with `tls-cluster yes`, a TLS client is
    /// told the shard's TLS port, a plain one the plain port (Redis's
    /// `clusterNodeClientPort`).
    pub fn client_port(&self, shard: usize, plain: u16, client_tls: bool) -> u16 {
        match client_tls && self.param("tls-cluster") == "yes" {
            true => self.tls_port(shard).unwrap_or(plain),
            false => plain,
        }
    }

    /// `cluster-preferred-endpoint-type`.
    pub fn preferred_endpoint(&self) -> cluster::Endpoint {
        cluster::Endpoint::parse(self.param("cluster-preferred-endpoint-type"))
    }

    /// The TLS files and client-certificate rule the TLS port uses.
    pub fn tls_files(&self) -> TlsFiles<'_> {
        TlsFiles {
            cert_file: self.param("tls-cert-file"),
            key_file: self.param("tls-key-file"),
            key_file_pass: self.param("tls-key-file-pass"),
            ca_cert_file: self.param("tls-ca-cert-file"),
            ca_cert_dir: self.param("tls-ca-cert-dir"),
            auth_clients: self.param("tls-auth-clients"),
            protocols: self.param("tls-protocols"),
            ciphersuites: self.param("tls-ciphersuites"),
            ciphers: self.param("tls-ciphers"),
            prefer_server_ciphers: self.param("tls-prefer-server-ciphers") == "yes",
            session_caching: self.param("tls-session-caching") == "yes",
            session_cache_size: self.param("tls-session-cache-size").parse().unwrap_or(0),
            session_cache_timeout_s: self.param("tls-session-cache-timeout").parse().unwrap_or(0),
            client_cert_file: self.param("tls-client-cert-file"),
            client_key_file: self.param("tls-client-key-file"),
            client_key_file_pass: self.param("tls-client-key-file-pass"),
        }
    }

    /// Where the metrics endpoint listens (`metrics-bind`, `metrics-port`), if it is on.
    pub fn metrics_addr(&self) -> Option<(&str, u16)> {
        let port = self.param("metrics-port").parse().unwrap_or(0);
        (port != 0).then(|| (self.param("metrics-bind"), port))
    }

    /// Open the server log as `logfile` and `loglevel` say.
    pub fn start_log(&self) -> Result<(), String> {
        let level = crate::serverlog::Level::parse(self.param("loglevel"))
            .unwrap_or(crate::serverlog::Level::Notice);
        crate::serverlog::set_level(level);
        let path = self.param("logfile");
        crate::serverlog::set_file(path).map_err(|e| format!("logfile {path}: {e}"))
    }

    /// The port shard `shard` listens on.
    pub fn shard_port(&self, shard: usize) -> u16 {
        match self.port_mode {
            PortMode::PerShard => self.port + shard as u16,
            PortMode::Forward => self.port,
        }
    }
}

/// The file's keys that name Redis parameters, checked as CONFIG SET checks them
/// (an immutable one is fine here: a file is where it is set) and kept in CONFIG
/// GET's form under their storage names. A key that names nothing is an error, as
/// a misspelt setting should be.
fn redis_params(
    table: &toml::Table,
) -> Result<std::collections::BTreeMap<&'static str, String>, String> {
    let mut kept = std::collections::BTreeMap::new();
    for (key, value) in table {
        if params::DEPRECATED
            .iter()
            .any(|d| d.eq_ignore_ascii_case(&key.replace('_', "-")))
        {
            continue;
        }
        let spec = params::find(key).ok_or_else(|| format!("unknown setting {key:?}"))?;
        let text = match value {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(n) => n.to_string(),
            toml::Value::Boolean(b) => if *b { "yes" } else { "no" }.to_string(),
            toml::Value::Float(f) => f.to_string(),
            other => return Err(format!("{key}: not a single value: {other}")),
        };
        let shown = params::check(spec, &text).map_err(|why| format!("{key}: {why}"))?;
        kept.insert(params::storage_name(spec.name), shown);
    }
    Ok(kept)
}

/// The engine's fields that come from parameters without a typed file key.
fn apply_engine_params(
    engine: &mut ruvio_engine::EngineConfig,
    params: &std::collections::BTreeMap<&'static str, String>,
) {
    let number = |name: &str| params.get(name).and_then(|v| v.parse::<i64>().ok());
    if let Some(v) = params.get("lazyfree-lazy-user-flush") {
        engine.lazyfree_lazy_user_flush = v == "yes";
    }
    // Checked against the parameter table already: within range.
    if let Some(n) = number("stream-node-max-entries") {
        engine.stream_node_max_entries = n as usize;
    }
    if let Some(n) = number("stream-node-max-bytes") {
        engine.stream_node_max_bytes = n as usize;
    }
    if let Some(n) = number("list-compress-depth") {
        engine.list_compress_depth = n as u32;
    }
}

/// The data types' thresholds from the file, Redis' defaults for the rest.
fn engine_config(file: &FileConfig) -> ruvio_engine::EngineConfig {
    let default = ruvio_engine::EngineConfig::default();
    ruvio_engine::EngineConfig {
        list_max_listpack_size: file
            .list_max_listpack_size
            .unwrap_or(default.list_max_listpack_size),
        hash_max_listpack_entries: file
            .hash_max_listpack_entries
            .unwrap_or(default.hash_max_listpack_entries),
        hash_max_listpack_value: file
            .hash_max_listpack_value
            .unwrap_or(default.hash_max_listpack_value),
        zset_max_listpack_entries: file
            .zset_max_listpack_entries
            .unwrap_or(default.zset_max_listpack_entries),
        zset_max_listpack_value: file
            .zset_max_listpack_value
            .unwrap_or(default.zset_max_listpack_value),
        set_max_intset_entries: file
            .set_max_intset_entries
            .unwrap_or(default.set_max_intset_entries),
        set_max_listpack_entries: file
            .set_max_listpack_entries
            .unwrap_or(default.set_max_listpack_entries),
        set_max_listpack_value: file
            .set_max_listpack_value
            .unwrap_or(default.set_max_listpack_value),
        hll_sparse_max_bytes: file
            .hll_sparse_max_bytes
            .unwrap_or(default.hll_sparse_max_bytes),
        cluster_enabled: default.cluster_enabled,
        skip_checksum_validation: default.skip_checksum_validation,
        proto_max_bulk_len: file
            .proto_max_bulk_len
            .unwrap_or(default.proto_max_bulk_len),
        maxmemory_samples: file
            .maxmemory_samples
            .unwrap_or(default.maxmemory_samples)
            .clamp(1, 64),
        lfu_log_factor: file.lfu_log_factor.unwrap_or(default.lfu_log_factor),
        lfu_decay_time: file.lfu_decay_time.unwrap_or(default.lfu_decay_time),
        ..default
    }
}

/// CPUs this process may run on, in order.
fn available_cpus() -> Vec<usize> {
    let ids: Vec<usize> = core_ids();
    if ids.is_empty() {
        vec![0]
    } else {
        ids
    }
}

fn core_ids() -> Vec<usize> {
    // SAFETY: sched_getaffinity writes into the zeroed set we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Parse `0,2,4-7` into a list of CPU numbers.
pub fn parse_cpu_list(list: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("cpus: cannot parse '{part}'");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) =
                    (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b {
                    return Err(bad());
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().map_err(|_| bad())?),
        }
    }
    Ok(cpus)
}

/// A size with Redis' units ([`params::memory_unit`]); stricter than Redis's
/// `memtoull` ([`params::redis_memory`]) where Ruvio reads its own settings:
/// digits must come first and the size must fit.
pub fn parse_memory(v: &str) -> Option<usize> {
    let digits = v.bytes().take_while(u8::is_ascii_digit).count();
    let number = v[..digits].parse::<u64>().ok()?;
    let bytes = number.checked_mul(params::memory_unit(&v[digits..])?)?;
    usize::try_from(bytes).ok()
}

/// CONFIG REWRITE: give `settings` (TOML key, running value) their values in the
/// config file at `path`, keeping everything else in it. A key the file format does
/// not know is skipped; one the file lacks is appended.
pub fn rewrite(
    path: &std::path::Path,
    settings: &[(String, String)],
    users: Option<&[String]>,
) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e| format!("{e}"))?;
    if let Some(users) = users {
        // The ACL users as `user` lines (without `aclfile`, as Redis writes them).
        let lines: toml_edit::Array = users.iter().map(String::as_str).collect();
        doc.insert("user", toml_edit::value(lines));
    }
    for (key, value) in settings {
        let item = match value.parse::<i64>() {
            Ok(n) => toml_edit::value(n),
            Err(_) => toml_edit::value(value.as_str()),
        };
        // Only keys the file format takes, with a value of the right type.
        let alone = format!("{key} = {item}");
        if toml::from_str::<FileConfig>(&alone).is_err() {
            continue;
        }
        match doc.get_mut(key) {
            Some(old) if old.is_value() => {
                let decor = old.as_value().map(|v| v.decor().clone());
                *old = item;
                if let (Some(decor), Some(v)) = (decor, old.as_value_mut()) {
                    *v.decor_mut() = decor;
                }
            }
            _ => {
                doc.insert(key, item);
            }
        }
    }
    let new_text = doc.to_string();
    let temp = path.with_extension("rewrite.tmp");
    std::fs::write(&temp, new_text).map_err(|e| e.to_string())?;
    std::fs::rename(&temp, path).map_err(|e| e.to_string())
}

/// The TLS port's settings as the parameters hold them (`net::tls` loads them).
pub struct TlsFiles<'a> {
    pub cert_file: &'a str,
    pub key_file: &'a str,
    /// `tls-key-file-pass`: the passphrase of an encrypted key ("": none).
    pub key_file_pass: &'a str,
    pub ca_cert_file: &'a str,
    /// `tls-ca-cert-dir`: a directory of CA certificate files ("": none).
    pub ca_cert_dir: &'a str,
    /// `tls-auth-clients`: yes, optional or no.
    pub auth_clients: &'a str,
    /// `tls-protocols`: `TLSv1.2` and/or `TLSv1.3` ("": both).
    pub protocols: &'a str,
    /// `tls-ciphersuites`: TLS 1.3 suites, OpenSSL's names ("": all).
    pub ciphersuites: &'a str,
    /// `tls-ciphers`: TLS 1.2 suites, an OpenSSL cipher list ("": all).
    pub ciphers: &'a str,
    pub prefer_server_ciphers: bool,
    pub session_caching: bool,
    /// `tls-session-cache-size` entries (0: OpenSSL's no limit, bounded here).
    pub session_cache_size: usize,
    pub session_cache_timeout_s: u64,
    /// `tls-client-cert-file` / `-key-file` / `-key-file-pass`: the certificate
    /// this server shows when it connects out (the cluster bus under
    /// `tls-cluster yes`); "": the server's own.
    pub client_cert_file: &'a str,
    pub client_key_file: &'a str,
    pub client_key_file_pass: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0,2,4-6").unwrap(), vec![0, 2, 4, 5, 6]);
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
    }

    #[test]
    fn cli_overrides_file() {
        let dir = std::env::temp_dir().join(format!("ruvio-cfg-{}", std::process::id()));
        std::fs::write(&dir, "port = 7000\nshards = 3\nport_mode = \"per-shard\"\n").unwrap();
        let cli = Cli {
            config: Some(dir.clone()),
            port: Some(7100),
            ..Cli::default()
        };
        let cfg = Config::load(cli).unwrap();
        assert_eq!(
            (cfg.port, cfg.shards, cfg.port_mode),
            (7100, 3, PortMode::PerShard)
        );
        assert_eq!(cfg.shard_port(2), 7102);
        std::fs::remove_file(dir).unwrap();
    }
}
