//! `ruvio-bench`: a RESP load generator that outruns redis-benchmark.
//!
//! redis-benchmark tops out near 3.5M requests per second on one core and so
//! hides differences between fast servers. This generator runs one epoll loop per
//! thread, writes each pipeline with one syscall, scans replies without parsing
//! their content, and allocates nothing per request. It accepts
//! redis-benchmark's main flags (`-h -p -c -n -d -r -P -t -q --csv --threads`)
//! so scripts can swap one for the other, and adds what comparisons need:
//! pinned threads, per-request latency percentiles from HdrHistogram, an open
//! loop at a target rate without coordinated omission, a preload step, a
//! duration, and cluster-aware routing; `--tls` (rustls, redis-benchmark's
//! `--cacert`/`--cert`/`--key`/`--sni` and redis-cli's `--insecure`) and
//! `--tracking` (HELLO 3 and CLIENT TRACKING ON per connection, invalidation
//! pushes counted) measure those paths too ([`transport`]).
//!
//! ```text
//! ruvio-bench -p 6379 -c 50 -P 16 -n 2000000 -r 100000 -d 64 -t set,get
//! ruvio-bench -p 6379 --cpus 1 --duration 10 --rate 100000 -c 50 -- GET key:__rand_int__
//! ruvio-bench -p 7000 --cluster --shard 1 --hash-tag -P 16 -t set --json
//! ruvio-bench -p 6380 --tls --cacert ca.crt -c 50 -P 16 -t set,get --json
//! ruvio-bench -p 6379 --tracking -c 50 -r 100000 -t get --json
//! ruvio-bench -p 6379 --tracking -c 50 -P 16 -r 100000 -t get_set --json
//! ruvio-bench -p 6379 --tracking -- GET key:__rand_int__ ';' SET key:__rand_int__ __data__
//! ```

mod cluster;
mod keys;
mod poll;
mod reply;
mod report;
mod run;
mod template;
mod transport;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use serde_json::json;

use keys::{KeyOrder, Space};
use report::TestReport;
use run::{Amount, Phase, Shape, Target};
use template::{Stamp, Template};

/// Pipeline depth used by the preload when the measured pipeline is shallower:
/// loading is not measured, so it may as well be quick.
const PRELOAD_PIPELINE_MIN: usize = 64;

/// Default preload: one value per key of the key space.
const PRELOAD_DEFAULT: &str = "SET key:__rand_int__ __data__";

/// Command line. Short flags follow redis-benchmark (so `-h` is the host;
/// help is `--help`).
#[derive(Parser, Debug)]
#[command(name = "ruvio-bench", version, disable_help_flag = true, about, long_about = None)]
struct Cli {
    /// Print help.
    #[arg(long, action = clap::ArgAction::Help)]
    help: Option<bool>,
    /// Server host.
    #[arg(short = 'h', long, default_value = "127.0.0.1")]
    host: String,
    /// Server port (with --cluster: any node of the cluster).
    #[arg(short = 'p', long, default_value_t = 6379)]
    port: u16,
    /// Connections in total.
    #[arg(short = 'c', long, default_value_t = 50)]
    clients: usize,
    /// Threads, each an event loop over its share of the connections.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// CPUs to pin the threads to, e.g. `1` or `1,3` or `2-5` (thread i on the i-th).
    #[arg(long)]
    cpus: Option<String>,
    /// Requests per pipeline (closed loop) or in flight per connection (open loop).
    #[arg(short = 'P', long, default_value_t = 1)]
    pipeline: usize,
    /// Requests per test.
    #[arg(short = 'n', long, default_value_t = 100_000)]
    requests: u64,
    /// Run each test for this many seconds instead of a request count.
    #[arg(long)]
    duration: Option<f64>,
    /// Open loop: total requests per second to send on schedule (latency from the
    /// intended send time). Without it the loop is closed (maximum throughput).
    #[arg(long)]
    rate: Option<f64>,
    /// Key space: `__rand_int__` takes values in 0..N (1 means one fixed key).
    #[arg(short = 'r', long, default_value_t = 1)]
    keyspace: u64,
    /// Take key numbers in sequence instead of at random.
    #[arg(long)]
    sequential: bool,
    /// Value size in bytes for `__data__`.
    #[arg(short = 'd', long, default_value_t = 3)]
    datasize: usize,
    /// Built-in tests, comma separated (redis-benchmark names: set,get,incr,lpush,...;
    /// and get_set: GET of a random key then SET of another, one request, for
    /// --tracking's writes of tracked keys).
    #[arg(short = 't', long)]
    tests: Option<String>,
    /// A command template to measure; repeat for several tests. A word `;`
    /// separates the commands of one request (`GET k ; SET k v`).
    #[arg(long = "command")]
    commands: Vec<String>,
    /// Fill the key space once before measuring (SET of every key by default).
    #[arg(long)]
    preload: bool,
    /// Template for the preload (implies --preload).
    #[arg(long)]
    preload_command: Option<String>,
    /// Discover shards with CLUSTER SLOTS and send each key to its owner.
    #[arg(long)]
    cluster: bool,
    /// With --cluster: load only this shard (index in port order).
    #[arg(long)]
    shard: Option<usize>,
    /// With --cluster: wrap keys in a hash tag the target shard owns (`__tag__`
    /// in a template is replaced by the tag text too).
    #[arg(long)]
    hash_tag: bool,
    /// Send each request as a transaction: MULTI, this many copies of the command
    /// (each with its own keys) and EXEC; rates and latencies count transactions.
    #[arg(long)]
    transaction: Option<usize>,
    /// Seed for the key streams.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Connect over TLS (redis-benchmark's flag); needs --cacert or --insecure.
    #[arg(long)]
    tls: bool,
    /// With --tls: PEM file of the CAs the server's certificate must chain to.
    #[arg(long)]
    cacert: Option<String>,
    /// With --tls: a client certificate (PEM), with --key.
    #[arg(long)]
    cert: Option<String>,
    /// With --tls: the client certificate's private key (PEM).
    #[arg(long)]
    key: Option<String>,
    /// With --tls: the server name to send and verify (default: the host).
    #[arg(long)]
    sni: Option<String>,
    /// With --tls: accept any server certificate (the session is still encrypted).
    #[arg(long)]
    insecure: bool,
    /// Each connection sends HELLO 3 and CLIENT TRACKING ON before the load
    /// (client-side caching); invalidation pushes are counted in the report.
    #[arg(long)]
    tracking: bool,
    /// Print a JSON report.
    #[arg(long)]
    json: bool,
    /// Print redis-benchmark's CSV.
    #[arg(long)]
    csv: bool,
    /// Print one line per test, like redis-benchmark -q.
    #[arg(short = 'q', long)]
    quiet: bool,
    /// A command to measure, as redis-benchmark takes it (`SET key:__rand_int__ __data__`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ruvio-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &Cli) -> Result<(), String> {
    validate(cli)?;
    let shape = Shape {
        clients: cli.clients,
        threads: cli.threads,
        pipeline: cli.pipeline,
        cpus: parse_cpus(cli.cpus.as_deref().unwrap_or(""))?,
        seed: cli.seed,
        connector: Arc::new(connector(cli)?),
    };
    let shards = shards(cli, &shape.connector)?;
    let data = vec![b'x'; cli.datasize];
    let preload = match preload_template(cli) {
        Some(args) => {
            let phase = build_phase(cli, &shards, &data, "preload".into(), &args, true)?;
            let preload_shape = Shape {
                pipeline: shape.pipeline.max(PRELOAD_PIPELINE_MIN),
                ..shape.clone()
            };
            Some(measure(&preload_shape, phase, cli)?)
        }
        None => None,
    };
    let mut reports = Vec::new();
    for (name, args) in tests(cli)? {
        let phase = build_phase(cli, &shards, &data, name, &args, false)?;
        reports.push(measure(&shape, phase, cli)?);
    }
    print!(
        "{}",
        render(cli, &shape, &shards, preload.as_ref(), &reports)
    );
    Ok(())
}

/// How connections are opened: TLS from `--tls` and its files, tracking from
/// `--tracking`.
fn connector(cli: &Cli) -> Result<transport::Connector, String> {
    let tls = cli.tls.then(|| transport::TlsOptions {
        ca_cert: cli.cacert.clone(),
        cert: cli.cert.clone(),
        key: cli.key.clone(),
        sni: cli.sni.clone(),
        insecure: cli.insecure,
    });
    transport::Connector::new(tls.as_ref(), cli.tracking)
}

fn validate(cli: &Cli) -> Result<(), String> {
    let tls_flags = cli.cacert.is_some()
        || cli.cert.is_some()
        || cli.key.is_some()
        || cli.sni.is_some()
        || cli.insecure;
    if tls_flags && !cli.tls {
        return Err("--cacert, --cert, --key, --sni and --insecure need --tls".into());
    }
    if cli.clients == 0 || cli.threads == 0 || cli.pipeline == 0 {
        return Err("clients, threads and pipeline must be at least 1".into());
    }
    if cli.transaction.is_some_and(|n| n == 0 || cli.cluster) {
        return Err("--transaction takes at least 1 command, and not with --cluster".into());
    }
    if cli.keyspace == 0 || cli.keyspace > template::KEYSPACE_MAX {
        return Err(format!("key space must be 1..={}", template::KEYSPACE_MAX));
    }
    if (cli.shard.is_some() || cli.hash_tag) && !cli.cluster {
        return Err("--shard and --hash-tag need --cluster".into());
    }
    if cli.rate.is_some_and(|r| r <= 0.0) || cli.duration.is_some_and(|d| d <= 0.0) {
        return Err("--rate and --duration must be positive".into());
    }
    Ok(())
}

/// `"1,3,5-7"` to `[1, 3, 5, 6, 7]`.
fn parse_cpus(list: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("bad CPU list {list:?}");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) =
                    (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().map_err(|_| bad())?),
        }
    }
    Ok(cpus)
}

/// The shards to load: the one port, or what CLUSTER SLOTS reports.
fn shards(cli: &Cli, connector: &transport::Connector) -> Result<Vec<cluster::Shard>, String> {
    if !cli.cluster {
        return Ok(vec![cluster::Shard {
            host: cli.host.clone(),
            port: cli.port,
            ranges: vec![(0, 16383)],
        }]);
    }
    let mut all = cluster::discover(connector, &cli.host, cli.port)?;
    for s in &mut all {
        if s.host.is_empty() || s.host == "?" {
            s.host = cli.host.clone();
        }
    }
    match cli.shard {
        None => Ok(all),
        Some(i) if i < all.len() => Ok(vec![all.swap_remove(i)]),
        Some(i) => Err(format!("--shard {i}: the cluster has {} shards", all.len())),
    }
}

fn preload_template(cli: &Cli) -> Option<Vec<String>> {
    match &cli.preload_command {
        Some(t) => Some(template::split_words(t)),
        None if cli.preload => Some(template::split_words(PRELOAD_DEFAULT)),
        None => None,
    }
}

/// (name, arguments) for every test, in the order given.
fn tests(cli: &Cli) -> Result<Vec<(String, Vec<String>)>, String> {
    let mut out = Vec::new();
    if !cli.command.is_empty() {
        out.push((cli.command.join(" "), cli.command.clone()));
    }
    for c in &cli.commands {
        out.push((c.clone(), template::split_words(c)));
    }
    if let Some(list) = &cli.tests {
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            out.push(template::builtin(name).ok_or_else(|| format!("unknown test {name:?}"))?);
        }
    }
    if out.is_empty() {
        for name in ["set", "get"] {
            out.push(template::builtin(name).expect("built-in"));
        }
    }
    Ok(out)
}

/// One phase: the command compiled per shard with that shard's keys.
fn build_phase(
    cli: &Cli,
    shards: &[cluster::Shard],
    data: &[u8],
    name: String,
    args: &[String],
    preload: bool,
) -> Result<Phase, String> {
    let route_by_key = cli.cluster && !cli.hash_tag;
    let plain = Template::compile(
        args,
        &Stamp {
            data,
            tag: None,
            auto_tag: false,
        },
    );
    let owned = if route_by_key && plain.key_count() > 0 {
        let all = cluster::discover(&connector(cli)?, &cli.host, cli.port)?;
        let numbers = cluster::owned_numbers(&all, cli.keyspace, |n| plain.key_bytes(0, n));
        Some(
            shards
                .iter()
                .map(|s| {
                    let i = all
                        .iter()
                        .position(|a| a.port == s.port && a.host == s.host)
                        .unwrap_or(0);
                    Arc::new(numbers[i].clone())
                })
                .collect::<Vec<_>>(),
        )
    } else {
        None
    };
    let mut targets = Vec::new();
    for (i, shard) in shards.iter().enumerate() {
        let tag = cli.hash_tag.then(|| cluster::tag_for(shard));
        let mut template = Template::compile(
            args,
            &Stamp {
                data,
                tag: tag.as_deref(),
                auto_tag: cli.hash_tag,
            },
        );
        if let Some(n) = cli.transaction.filter(|_| !preload) {
            template = template.in_transaction(n);
        }
        let space = match &owned {
            Some(o) if o[i].is_empty() => {
                return Err(format!(
                    "shard on port {} owns none of the keys",
                    shard.port
                ))
            }
            Some(o) => Space::Owned(o[i].clone()),
            None => Space::Range(cli.keyspace),
        };
        targets.push(Target {
            host: shard.host.clone(),
            port: shard.port,
            space,
            template,
        });
    }
    Ok(Phase {
        name,
        targets,
        amount: if preload {
            Amount::EveryKeyOnce
        } else if let Some(d) = cli.duration {
            Amount::Duration(Duration::from_secs_f64(d))
        } else {
            Amount::Requests(cli.requests)
        },
        order: if preload || cli.sequential {
            KeyOrder::Sequential
        } else {
            KeyOrder::Random
        },
        rate: if preload { None } else { cli.rate },
        one_key_per_request: route_by_key,
    })
}

fn measure(shape: &Shape, phase: Phase, cli: &Cli) -> Result<TestReport, String> {
    if !cli.json && !cli.csv && !cli.quiet {
        eprintln!("{}: running", phase.name);
    }
    let command = phase.targets[0].template.text.clone();
    let result = run::run_phase(shape, &phase)?;
    Ok(TestReport {
        name: phase.name,
        command,
        result,
    })
}

fn render(
    cli: &Cli,
    shape: &Shape,
    shards: &[cluster::Shard],
    preload: Option<&TestReport>,
    reports: &[TestReport],
) -> String {
    if cli.json {
        let settings = json!({
            "name": "ruvio-bench",
            "version": env!("CARGO_PKG_VERSION"),
            "host": cli.host,
            "ports": shards.iter().map(|s| s.port).collect::<Vec<_>>(),
            "clients": shape.clients,
            "threads": shape.threads,
            "cpus": shape.cpus,
            "pipeline": shape.pipeline,
            "requests": cli.requests,
            "duration_s": cli.duration,
            "rate": cli.rate,
            "loop": if cli.rate.is_some() { "open" } else { "closed" },
            "keyspace": cli.keyspace,
            "key_order": if cli.sequential { "sequential" } else { "random" },
            "datasize": cli.datasize,
            "cluster": cli.cluster,
            "shard": cli.shard,
            "hash_tag": cli.hash_tag,
            "tls": cli.tls,
            "tracking": cli.tracking,
        });
        return report::json_report(settings, preload, reports) + "\n";
    }
    if cli.csv {
        return report::csv_report(reports);
    }
    if cli.quiet {
        return report::quiet_report(reports);
    }
    let mut out = String::new();
    if let Some(p) = preload {
        out += &format!(
            "preload: {} requests in {:.2} s\n",
            p.result.requests,
            p.result.elapsed.as_secs_f64()
        );
    }
    out + &report::human_report(reports)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpus("1,3,5-7").unwrap(), vec![1, 3, 5, 6, 7]);
        assert_eq!(parse_cpus("").unwrap(), Vec::<usize>::new());
        assert!(parse_cpus("a").is_err());
    }

    #[test]
    fn redis_benchmark_flags_parse() {
        let cli = Cli::try_parse_from([
            "ruvio-bench",
            "-h",
            "localhost",
            "-p",
            "7000",
            "-c",
            "50",
            "-P",
            "16",
            "-n",
            "1000",
            "-r",
            "100",
            "-d",
            "64",
            "-t",
            "set,get",
            "-q",
        ])
        .unwrap();
        assert_eq!(
            (cli.port, cli.clients, cli.pipeline, cli.keyspace),
            (7000, 50, 16, 100)
        );
        assert_eq!(tests(&cli).unwrap().len(), 2);
        let cli =
            Cli::try_parse_from(["ruvio-bench", "--", "SET", "k:__rand_int__", "-1"]).unwrap();
        assert_eq!(
            tests(&cli).unwrap()[0].1,
            vec!["SET", "k:__rand_int__", "-1"]
        );
    }
}
