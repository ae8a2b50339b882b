//! The Prometheus text exposition of the server's numbers (`GET /metrics`).
//!
//! Owns two things: [`Snapshot`], the plain numbers a scrape reports (the shard
//! layer fills it from the gauges every shard publishes, the same ones INFO
//! reads, so this floor never names a shard), and [`render`], which writes them in
//! the text format version 0.0.4.
//!
//! Why the `redis_` names are the exporter's: the names, labels and help texts of
//! the series that come from INFO fields are those `prometheus-redis-exporter`
//! (redis_exporter 1.45) writes for the same fields (`redis_commands_total{cmd=..}`,
//! `redis_db_keys{db="db0"}` ...), so a dashboard built for that exporter reads
//! Ruvio's endpoint unchanged; `tests/metrics_endpoint.rs` compares the two. What
//! only a sharded server has is under `ruvio_` with a `shard` label.
//!
//! The endpoint reports the whole process: in per-shard mode too, where each port
//! is one cluster node, the `redis_` series sum every shard (the `ruvio_` series
//! tell them apart).
//!
//! Shaped for histograms to come: [`Writer`] writes a family's `# HELP` and
//! `# TYPE` once and then any number of samples, each under a full series name,
//! so a per-command latency histogram merged from the shards' hdrhistograms is a
//! `Type::Histogram` family whose samples are `<name>_bucket{cmd,le}`, `<name>_sum`
//! and `<name>_count` (`le` written with [`Writer::sample`]'s float form, `+Inf`
//! last).

use std::fmt::Write;

/// What one scrape reports: the whole server's INFO numbers and each shard's own.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    pub version: &'static str,
    pub redis_version: &'static str,
    /// `standalone` or `cluster`, as INFO `redis_mode`.
    pub redis_mode: &'static str,
    pub port_mode: &'static str,
    pub os: String,
    pub run_id: String,
    pub process_id: u32,
    pub tcp_port: u16,
    pub maxmemory_policy: &'static str,
    pub uptime_s: u64,
    pub start_time_unix_s: u64,
    pub maxclients: u64,
    pub maxmemory_bytes: u64,
    pub used_memory_bytes: u64,
    pub used_memory_rss_bytes: u64,
    /// Process CPU time in seconds: system, user (INFO `used_cpu_sys`, `used_cpu_user`).
    pub cpu_sys_s: f64,
    pub cpu_user_s: f64,
    pub aof_enabled: bool,
    pub loading: bool,
    pub rdb_changes_since_last_save: u64,
    /// Unix seconds of the last completed SAVE (the start time before one).
    pub rdb_last_save_unix_s: u64,
    /// Distinct channels and patterns subscribed to.
    pub pubsub_channels: u64,
    pub pubsub_patterns: u64,
    /// The whole server's counters, summed over the shards.
    pub total: ShardNumbers,
    /// Per database: keys and keys with a TTL, summed over the shards.
    pub dbs: Vec<(u64, u64)>,
    /// Per command with calls: its INFO commandstats numbers.
    pub commands: Vec<CommandNumbers>,
    /// Error replies by code (INFO errorstats).
    pub errors: Vec<(Box<str>, u64)>,
    /// Each shard's numbers, index = shard id.
    pub shards: Vec<ShardNumbers>,
    /// Per command with a latency histogram (`latency-tracking yes`): its
    /// percentiles and buckets, merged over the shards.
    pub latency: Vec<CommandLatency>,
}

/// One command's latency, from the histograms the shards keep (INFO
/// latencystats' source).
#[derive(Debug, Default, Clone)]
pub struct CommandLatency {
    /// As INFO writes it (`get`, `config|get`).
    pub name: String,
    /// INFO commandstats' calls and total µs (the exporter's summary `_count`
    /// and `_sum`).
    pub calls: u64,
    pub usec: u64,
    /// Calls the histograms counted and their total ns (the histogram's own
    /// `_count` and `_sum`; the other shards' as last published).
    pub histogram_calls: u64,
    pub histogram_ns: u64,
    /// `latency-tracking-info-percentiles` as INFO names them (`50`, `99.9`) with
    /// their values in µs.
    pub percentiles: Vec<(String, f64)>,
    /// Cumulative buckets: upper bound in µs, calls at or below it (LATENCY
    /// HISTOGRAM's powers of two).
    pub buckets: Vec<(u64, u64)>,
}

/// The counters and gauges of one shard (or of the whole server).
#[derive(Debug, Default, Clone, Copy)]
pub struct ShardNumbers {
    pub commands: u64,
    pub ops_per_sec: u64,
    pub connected_clients: u64,
    pub blocked_clients: u64,
    pub connections_received: u64,
    pub rejected_connections: u64,
    pub net_input_bytes: u64,
    pub net_output_bytes: u64,
    pub expired_keys: u64,
    pub evicted_keys: u64,
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    pub keys: u64,
    pub expiring_keys: u64,
    /// The shard's dataset as its engine estimates it.
    pub dataset_bytes: u64,
    /// Its log: record bytes written, fsyncs and their total microseconds.
    pub log_written_bytes: u64,
    pub log_fsyncs: u64,
    pub log_fsync_usec: u64,
    /// Messages to and from the other shards (each a batch, or one control).
    pub mesh_sent: u64,
    pub mesh_received: u64,
}

impl ShardNumbers {
    /// Add `other`'s numbers to these.
    pub fn add(&mut self, other: &ShardNumbers) {
        self.commands += other.commands;
        self.ops_per_sec += other.ops_per_sec;
        self.connected_clients += other.connected_clients;
        self.blocked_clients += other.blocked_clients;
        self.connections_received += other.connections_received;
        self.rejected_connections += other.rejected_connections;
        self.net_input_bytes += other.net_input_bytes;
        self.net_output_bytes += other.net_output_bytes;
        self.expired_keys += other.expired_keys;
        self.evicted_keys += other.evicted_keys;
        self.keyspace_hits += other.keyspace_hits;
        self.keyspace_misses += other.keyspace_misses;
        self.keys += other.keys;
        self.expiring_keys += other.expiring_keys;
        self.dataset_bytes += other.dataset_bytes;
        self.log_written_bytes += other.log_written_bytes;
        self.log_fsyncs += other.log_fsyncs;
        self.log_fsync_usec += other.log_fsync_usec;
        self.mesh_sent += other.mesh_sent;
        self.mesh_received += other.mesh_received;
    }
}

/// One command's INFO commandstats line.
#[derive(Debug, Default, Clone)]
pub struct CommandNumbers {
    /// As INFO writes it after `cmdstat_` (`get`, `config|get`).
    pub name: String,
    pub calls: u64,
    pub usec: u64,
    pub failed: u64,
    pub rejected: u64,
}

/// A family's `# TYPE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Gauge,
    Counter,
    Summary,
    Histogram,
}

impl Type {
    fn name(self) -> &'static str {
        match self {
            Type::Gauge => "gauge",
            Type::Counter => "counter",
            Type::Summary => "summary",
            Type::Histogram => "histogram",
        }
    }
}

/// A value as the text format writes it.
#[derive(Debug, Clone, Copy)]
pub enum Value {
    Int(u64),
    Float(f64),
}

/// Writes families into a text buffer: a family's header once, then its samples.
#[derive(Debug, Default)]
pub struct Writer {
    out: String,
}

impl Writer {
    /// Start family `name` with its help text and type.
    pub fn family(&mut self, name: &str, help: &str, kind: Type) {
        let _ = write!(self.out, "# HELP {name} ");
        escape_help(&mut self.out, help);
        let _ = writeln!(self.out, "\n# TYPE {name} {}", kind.name());
    }

    /// One sample of series `name` (the family's name, or it with a suffix such as
    /// `_bucket`), its label values escaped.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: Value) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (label, text)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{label}=\"");
                escape_label(&mut self.out, text);
                self.out.push('"');
            }
            self.out.push('}');
        }
        self.out.push(' ');
        match value {
            Value::Int(n) => {
                let _ = write!(self.out, "{n}");
            }
            Value::Float(f) if f.is_nan() => self.out.push_str("NaN"),
            Value::Float(f) if f.is_infinite() => {
                self.out.push_str(if f > 0.0 { "+Inf" } else { "-Inf" })
            }
            Value::Float(f) => {
                let _ = write!(self.out, "{f}");
            }
        }
        self.out.push('\n');
    }

    /// A family of one unlabelled sample.
    pub fn single(&mut self, name: &str, help: &str, kind: Type, value: u64) {
        self.family(name, help, kind);
        self.sample(name, &[], Value::Int(value));
    }

    /// The text written so far.
    pub fn finish(self) -> String {
        self.out
    }
}

/// Label values escape backslash, double quote and line feed.
fn escape_label(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Help texts escape backslash and line feed.
fn escape_help(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// The exporter's help text for a field it has no own text for: `<name> metric`
/// without the `redis_` prefix.
fn field_help(name: &str) -> String {
    format!("{} metric", name.trim_start_matches("redis_"))
}

/// The exposition of `snap`.
pub fn render(snap: &Snapshot) -> String {
    let mut w = Writer::default();
    redis_series(&mut w, snap);
    ruvio_series(&mut w, snap);
    w.finish()
}

/// The series named as the exporter names them for the same INFO fields.
fn redis_series(w: &mut Writer, snap: &Snapshot) {
    use Type::{Counter, Gauge};
    let t = &snap.total;
    w.single("redis_up", "Information about the Redis instance", Gauge, 1);
    w.family(
        "redis_instance_info",
        "Information about the Redis instance",
        Gauge,
    );
    let (pid, port) = (snap.process_id.to_string(), snap.tcp_port.to_string());
    w.sample(
        "redis_instance_info",
        &[
            ("maxmemory_policy", snap.maxmemory_policy),
            ("os", &snap.os),
            ("process_id", &pid),
            ("redis_build_id", "0"),
            ("redis_mode", snap.redis_mode),
            ("redis_version", snap.redis_version),
            ("role", "master"),
            ("run_id", &snap.run_id),
            ("tcp_port", &port),
        ],
        Value::Int(1),
    );
    w.single(
        "redis_start_time_seconds",
        "Start time of the Redis instance since unix epoch in seconds.",
        Gauge,
        snap.start_time_unix_s,
    );
    let fields: [(&str, Type, u64); 26] = [
        (
            "redis_rdb_last_save_timestamp_seconds",
            Gauge,
            snap.rdb_last_save_unix_s,
        ),
        ("redis_pubsub_channels", Gauge, snap.pubsub_channels),
        ("redis_pubsub_patterns", Gauge, snap.pubsub_patterns),
        ("redis_process_id", Gauge, u64::from(snap.process_id)),
        (
            "redis_cluster_enabled",
            Gauge,
            u64::from(snap.redis_mode == "cluster"),
        ),
        ("redis_aof_enabled", Gauge, u64::from(snap.aof_enabled)),
        ("redis_loading_dump_file", Gauge, u64::from(snap.loading)),
        (
            "redis_rdb_changes_since_last_save",
            Gauge,
            snap.rdb_changes_since_last_save,
        ),
        ("redis_connected_slaves", Gauge, 0),
        ("redis_uptime_in_seconds", Gauge, snap.uptime_s),
        ("redis_connected_clients", Gauge, t.connected_clients),
        ("redis_blocked_clients", Gauge, t.blocked_clients),
        ("redis_config_maxclients", Gauge, snap.maxclients),
        ("redis_memory_used_bytes", Gauge, snap.used_memory_bytes),
        (
            "redis_memory_used_rss_bytes",
            Gauge,
            snap.used_memory_rss_bytes,
        ),
        ("redis_memory_max_bytes", Gauge, snap.maxmemory_bytes),
        ("redis_commands_processed_total", Counter, t.commands),
        (
            "redis_connections_received_total",
            Counter,
            t.connections_received,
        ),
        (
            "redis_rejected_connections_total",
            Counter,
            t.rejected_connections,
        ),
        ("redis_net_input_bytes_total", Counter, t.net_input_bytes),
        ("redis_net_output_bytes_total", Counter, t.net_output_bytes),
        ("redis_expired_keys_total", Counter, t.expired_keys),
        ("redis_evicted_keys_total", Counter, t.evicted_keys),
        ("redis_keyspace_hits_total", Counter, t.keyspace_hits),
        ("redis_keyspace_misses_total", Counter, t.keyspace_misses),
        (
            "redis_total_error_replies",
            Counter,
            snap.errors.iter().map(|(_, n)| n).sum(),
        ),
    ];
    for (name, kind, value) in fields {
        w.single(name, &field_help(name), kind, value);
    }
    let ratio = snap.used_memory_rss_bytes as f64 / snap.used_memory_bytes.max(1) as f64;
    for (name, kind, value) in [
        ("redis_mem_fragmentation_ratio", Gauge, ratio),
        ("redis_cpu_sys_seconds_total", Counter, snap.cpu_sys_s),
        ("redis_cpu_user_seconds_total", Counter, snap.cpu_user_s),
    ] {
        w.family(name, &field_help(name), kind);
        w.sample(name, &[], Value::Float(value));
    }
    let db_names: Vec<String> = (0..snap.dbs.len()).map(|db| format!("db{db}")).collect();
    w.family("redis_db_keys", "Total number of keys by DB", Gauge);
    for (name, (keys, _)) in db_names.iter().zip(&snap.dbs) {
        w.sample("redis_db_keys", &[("db", name)], Value::Int(*keys));
    }
    w.family(
        "redis_db_keys_expiring",
        "Total number of expiring keys by DB",
        Gauge,
    );
    for (name, (_, expiring)) in db_names.iter().zip(&snap.dbs) {
        w.sample(
            "redis_db_keys_expiring",
            &[("db", name)],
            Value::Int(*expiring),
        );
    }
    command_series(w, snap);
    if !snap.errors.is_empty() {
        w.family(
            "redis_errors_total",
            "Total number of errors per error type",
            Counter,
        );
        for (code, n) in &snap.errors {
            w.sample("redis_errors_total", &[("err", code)], Value::Int(*n));
        }
    }
}

/// INFO commandstats as the exporter writes it (its help texts included).
fn command_series(w: &mut Writer, snap: &Snapshot) {
    if snap.commands.is_empty() {
        return;
    }
    type Field = fn(&CommandNumbers) -> Value;
    let families: [(&str, &str, Field); 4] = [
        (
            "redis_commands_total",
            "Total number of calls per command",
            |c| Value::Int(c.calls),
        ),
        (
            "redis_commands_duration_seconds_total",
            "Total amount of time in seconds spent per command",
            |c| Value::Float(c.usec as f64 / 1e6),
        ),
        (
            "redis_commands_rejected_calls_total",
            "Total number of errors within command execution per command",
            |c| Value::Int(c.rejected),
        ),
        (
            "redis_commands_failed_calls_total",
            "Total number of errors prior command execution per command",
            |c| Value::Int(c.failed),
        ),
    ];
    for (name, help, field) in families {
        w.family(name, help, Type::Counter);
        for c in &snap.commands {
            w.sample(name, &[("cmd", &c.name)], field(c));
        }
    }
    latency_series(w, snap);
}

/// Per-command latency: the exporter's summary of INFO latencystats
/// (`redis_latency_percentiles_usec{cmd,quantile}`, its `_sum` INFO
/// commandstats' µs and `_count` the calls), and Ruvio's histogram of the same
/// calls in seconds (`ruvio_command_latency_seconds_bucket{cmd,le}`), which
/// PromQL's `histogram_quantile` reads.
fn latency_series(w: &mut Writer, snap: &Snapshot) {
    if snap.latency.is_empty() {
        return;
    }
    let name = "redis_latency_percentiles_usec";
    w.family(
        name,
        "A summary of latency percentile distribution per command",
        Type::Summary,
    );
    for c in &snap.latency {
        for (quantile, usec) in &c.percentiles {
            w.sample(
                name,
                &[("cmd", &c.name), ("quantile", quantile)],
                Value::Float(*usec),
            );
        }
        w.sample(
            &format!("{name}_sum"),
            &[("cmd", &c.name)],
            Value::Int(c.usec),
        );
        w.sample(
            &format!("{name}_count"),
            &[("cmd", &c.name)],
            Value::Int(c.calls),
        );
    }
    let name = "ruvio_command_latency_seconds";
    w.family(
        name,
        "Per-command execution time on its shard (the histograms of INFO latencystats)",
        Type::Histogram,
    );
    let bucket = format!("{name}_bucket");
    for c in &snap.latency {
        for (usec, calls) in &c.buckets {
            let le = format!("{}", *usec as f64 / 1e6);
            w.sample(
                &bucket,
                &[("cmd", &c.name), ("le", &le)],
                Value::Int(*calls),
            );
        }
        w.sample(
            &bucket,
            &[("cmd", &c.name), ("le", "+Inf")],
            Value::Int(c.histogram_calls),
        );
        let sum = Value::Float(c.histogram_ns as f64 / 1e9);
        w.sample(&format!("{name}_sum"), &[("cmd", &c.name)], sum);
        w.sample(
            &format!("{name}_count"),
            &[("cmd", &c.name)],
            Value::Int(c.histogram_calls),
        );
    }
}

/// Ruvio's own series: the build and each shard's numbers.
fn ruvio_series(w: &mut Writer, snap: &Snapshot) {
    use Type::{Counter, Gauge};
    w.family("ruvio_info", "The Ruvio build and layout", Gauge);
    let shards = snap.shards.len().to_string();
    w.sample(
        "ruvio_info",
        &[
            ("version", snap.version),
            ("port_mode", snap.port_mode),
            ("shards", &shards),
        ],
        Value::Int(1),
    );
    type Field = fn(&ShardNumbers) -> u64;
    let families: [(&str, &str, Type, Field); 13] = [
        (
            "ruvio_commands_processed_total",
            "Commands the shard ran",
            Counter,
            |s| s.commands,
        ),
        (
            "ruvio_ops_per_second",
            "The shard's instantaneous_ops_per_sec",
            Gauge,
            |s| s.ops_per_sec,
        ),
        (
            "ruvio_keys",
            "Keys the shard owns, over its databases",
            Gauge,
            |s| s.keys,
        ),
        (
            "ruvio_keys_expiring",
            "Keys with a TTL the shard owns",
            Gauge,
            |s| s.expiring_keys,
        ),
        (
            "ruvio_dataset_bytes",
            "Bytes of the shard's dataset, as its engine estimates them",
            Gauge,
            |s| s.dataset_bytes,
        ),
        (
            "ruvio_connected_clients",
            "Client connections on the shard",
            Gauge,
            |s| s.connected_clients,
        ),
        (
            "ruvio_blocked_clients",
            "Clients blocked on the shard",
            Gauge,
            |s| s.blocked_clients,
        ),
        (
            "ruvio_connections_received_total",
            "Connections the shard accepted",
            Counter,
            |s| s.connections_received,
        ),
        (
            "ruvio_net_input_bytes_total",
            "Bytes the shard read from clients",
            Counter,
            |s| s.net_input_bytes,
        ),
        (
            "ruvio_net_output_bytes_total",
            "Bytes the shard wrote to clients",
            Counter,
            |s| s.net_output_bytes,
        ),
        (
            "ruvio_keyspace_hits_total",
            "Key lookups on the shard that found the key",
            Counter,
            |s| s.keyspace_hits,
        ),
        (
            "ruvio_keyspace_misses_total",
            "Key lookups on the shard that did not",
            Counter,
            |s| s.keyspace_misses,
        ),
        (
            "ruvio_expired_keys_total",
            "Keys the shard expired",
            Counter,
            |s| s.expired_keys,
        ),
    ];
    let ids: Vec<String> = (0..snap.shards.len()).map(|id| id.to_string()).collect();
    for (name, help, kind, field) in families {
        w.family(name, help, kind);
        for (id, shard) in ids.iter().zip(&snap.shards) {
            w.sample(name, &[("shard", id)], Value::Int(field(shard)));
        }
    }
    if snap.shards.len() > 1 {
        let mesh: [(&str, &str, Field); 2] = [
            (
                "ruvio_mesh_messages_sent_total",
                "Messages (request or reply batches, controls) the shard sent to the other shards",
                |s| s.mesh_sent,
            ),
            (
                "ruvio_mesh_messages_received_total",
                "Messages the shard received from the other shards",
                |s| s.mesh_received,
            ),
        ];
        for (name, help, field) in mesh {
            w.family(name, help, Counter);
            for (id, shard) in ids.iter().zip(&snap.shards) {
                w.sample(name, &[("shard", id)], Value::Int(field(shard)));
            }
        }
    }
    if !snap.aof_enabled {
        return;
    }
    type Sample = fn(&ShardNumbers) -> Value;
    let log: [(&str, &str, Sample); 3] = [
        (
            "ruvio_log_written_bytes_total",
            "Record bytes the shard's log wrote",
            |s| Value::Int(s.log_written_bytes),
        ),
        ("ruvio_log_fsyncs_total", "Fsyncs of the shard's log", |s| {
            Value::Int(s.log_fsyncs)
        }),
        (
            "ruvio_log_fsync_seconds_total",
            "Time the shard's log fsyncs took, submission to completion",
            |s| Value::Float(s.log_fsync_usec as f64 / 1e6),
        ),
    ];
    for (name, help, field) in log {
        w.family(name, help, Counter);
        for (id, shard) in ids.iter().zip(&snap.shards) {
            w.sample(name, &[("shard", id)], field(shard));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_and_help_are_escaped() {
        let mut w = Writer::default();
        w.family("x", "a \\ b\nc \"q\"", Type::Counter);
        w.sample("x", &[("cmd", "a\"b\\c\nd"), ("z", "")], Value::Int(3));
        assert_eq!(
            w.finish(),
            "# HELP x a \\\\ b\\nc \"q\"\n# TYPE x counter\nx{cmd=\"a\\\"b\\\\c\\nd\",z=\"\"} 3\n"
        );
    }

    #[test]
    fn floats_use_the_formats_words_for_what_is_not_a_number() {
        let mut w = Writer::default();
        w.sample("a", &[], Value::Float(0.000021));
        w.sample("b", &[("le", "+Inf")], Value::Float(f64::INFINITY));
        w.sample("c", &[], Value::Float(f64::NAN));
        assert_eq!(w.finish(), "a 0.000021\nb{le=\"+Inf\"} +Inf\nc NaN\n");
    }

    #[test]
    fn every_database_and_shard_has_a_sample() {
        let snap = Snapshot {
            dbs: vec![(3, 1), (0, 0)],
            shards: vec![
                ShardNumbers {
                    keys: 2,
                    ..Default::default()
                },
                ShardNumbers {
                    keys: 1,
                    ..Default::default()
                },
            ],
            commands: vec![CommandNumbers {
                name: "config|get".into(),
                calls: 2,
                usec: 1500,
                ..Default::default()
            }],
            ..Default::default()
        };
        let text = render(&snap);
        assert!(text.contains("redis_db_keys{db=\"db0\"} 3\n"));
        assert!(text.contains("redis_db_keys_expiring{db=\"db1\"} 0\n"));
        assert!(text.contains("redis_commands_total{cmd=\"config|get\"} 2\n"));
        assert!(text.contains("redis_commands_duration_seconds_total{cmd=\"config|get\"} 0.0015\n"));
        assert!(text.contains("ruvio_keys{shard=\"0\"} 2\nruvio_keys{shard=\"1\"} 1\n"));
        assert!(!text.contains("redis_errors_total"));
    }
}
