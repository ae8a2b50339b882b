//! Shared harness of the end-to-end tests: start a server on fresh free ports, wait until
//! it answers PING, talk raw RESP to it (`resp.rs`), and kill it when the handle drops.
//! Which shard owns a key is `slots.rs`; the helpers of one topic are a file each
//! (`busy.rs`, `tracking.rs`, `replication.rs`, `slowlog.rs`, `certs.rs`, `diff.rs`).
//!
//! Every test starts its own server. A glommio listener can outlive its process for a
//! moment, so ports are never reused within one test process: they come from a counter
//! that starts at a per-process random offset and only moves forward, and each candidate
//! is checked by binding it first.
//!
//! `RUVIO_TEST_TARGET=redis` points the same tests at a real `redis-server` (forward mode:
//! one standalone redis-server; per-shard mode: a real Redis Cluster of N masters with the
//! same contiguous slot ranges Ruvio uses). That is how the expected bytes in these tests
//! were checked; without the variable the tests run the `ruvio` binary of this crate.
//!
//! `RUVIO_REQUIRE_REDIS=1` (set by scripts/test.sh) turns "redis-server is not installed,
//! skipping" into a failure, so CI cannot pass by skipping the differential tests.
#![allow(dead_code)]

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub mod bus_node;
pub mod busy;
pub mod certs;
pub mod cluster_process;
pub mod cluster_tools;
pub mod counter_writer;
mod diff;
pub mod forward_cluster;
pub mod replication;
mod resp;
mod slots;
pub mod slowlog;
pub mod tracking;
// Each test binary compiles this module; the ones without a differential run leave
// these unused.
#[allow(unused_imports)]
pub use diff::*;
// The client side and the slot arithmetic, re-exported so tests name
// `common::RawConn`, `common::key_on_shard` ... as before.
#[allow(unused_imports)]
pub use resp::*;
#[allow(unused_imports)]
pub use slots::*;

/// How long a server may take to answer its first PING.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long any single read from a server may block before the test fails.
pub const IO_TIMEOUT: Duration = Duration::from_secs(20);
/// Number of hash slots of Redis Cluster.
pub const SLOT_COUNT: u16 = 16384;

/// Lowest port handed out; below the Linux ephemeral range so outgoing connections do
/// not take them, and with room for Redis Cluster bus ports at +10000.
const PORT_FIRST: u16 = 10_000;
/// One past the highest port handed out (bus ports then stay below 30000).
const PORT_END: u16 = 20_000;
/// Cluster bus port offset of redis-server in cluster mode.
const REDIS_BUS_PORT_OFFSET: u16 = 10_000;

/// The server the tests talk to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The `ruvio` binary built from this crate (the default).
    Ruvio,
    /// A real redis-server (`RUVIO_TEST_TARGET=redis`): checks the tests themselves.
    Redis,
}

/// The target selected by `RUVIO_TEST_TARGET`.
pub fn target() -> Target {
    match std::env::var("RUVIO_TEST_TARGET").as_deref() {
        Ok("redis") => Target::Redis,
        Ok("ruvio") | Ok("") | Err(_) => Target::Ruvio,
        Ok(other) => panic!("RUVIO_TEST_TARGET must be 'ruvio' or 'redis', not {other:?}"),
    }
}

/// Resident memory of process `pid` in bytes (VmRSS of /proc/<pid>/status);
/// `None` once the process is gone.
pub fn try_rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line["VmRSS:".len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// Resident memory of the live process `pid` in bytes.
pub fn rss_bytes(pid: u32) -> u64 {
    try_rss_bytes(pid).unwrap_or_else(|| panic!("no VmRSS for process {pid}"))
}

/// How the shards of one server are reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortMode {
    /// One port; keys of other shards are forwarded.
    Forward,
    /// Shard i listens on port + i and presents itself as a cluster master.
    PerShard,
}

impl PortMode {
    fn flag(self) -> &'static str {
        match self {
            PortMode::Forward => "forward",
            PortMode::PerShard => "per-shard",
        }
    }
}

/// Path of the `ruvio` binary under test.
pub fn ruvio_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_ruvio"))
}

/// Path of `redis-server` when it is installed.
pub fn redis_server_bin() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("REDIS_SERVER_BIN") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("redis-server"))
        .find(|candidate| candidate.is_file())
}

/// `redis-server` for a differential test, or `None` after printing why the test is
/// skipped. Panics instead when `RUVIO_REQUIRE_REDIS=1`.
pub fn require_redis_server(test: &str) -> Option<PathBuf> {
    match redis_server_bin() {
        Some(path) => Some(path),
        None if std::env::var("RUVIO_REQUIRE_REDIS").as_deref() == Ok("1") => {
            panic!("{test}: redis-server is not installed but RUVIO_REQUIRE_REDIS=1")
        }
        None => {
            eprintln!(
                "SKIPPED {test}: redis-server is not installed \
                 (apt-get install -y redis-server, or run scripts/test.sh)"
            );
            None
        }
    }
}

/// Runs `script` with `python3 -c`; its stdout, trimmed. Panics with its stderr
/// when it fails (a client test's assertion written in Python, as redis-py's).
pub fn python(script: &str) -> String {
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "python3 failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// redis-py (with its RedisCluster) is importable, or `false` after printing why
/// `test` skips its redis-py part. Panics instead when `RUVIO_REQUIRE_REDIS=1`
/// (scripts/test.sh installs redis-py).
pub fn require_redis_py(test: &str) -> bool {
    let found = std::process::Command::new("python3")
        .args(["-c", "import redis.cluster"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("RUVIO_REQUIRE_REDIS").as_deref() != Ok("1"),
            "{test}: redis-py is not installed but RUVIO_REQUIRE_REDIS=1"
        );
        eprintln!("SKIPPED the redis-py part of {test}: redis-py is not installed");
    }
    found
}

static NEXT_PORT: Mutex<Option<u16>> = Mutex::new(None);

fn port_is_free(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok() && TcpListener::bind(("0.0.0.0", port)).is_ok()
}

/// The ports this process may hand out: `RUVIO_TEST_PORTS=first-end` when
/// scripts/run_tests.py runs several test binaries at once (each worker its own
/// range, so two binaries never race for a port), else all of
/// `PORT_FIRST..PORT_END`.
fn port_range() -> (u16, u16) {
    let given = std::env::var("RUVIO_TEST_PORTS").ok().and_then(|range| {
        let (first, end) = range.split_once('-')?;
        let (first, end) = (first.parse::<u16>().ok()?, end.parse::<u16>().ok()?);
        let fits =
            PORT_FIRST <= first && u32::from(first) + 200 <= u32::from(end) && end <= PORT_END;
        fits.then_some((first, end))
    });
    given.unwrap_or((PORT_FIRST, PORT_END))
}

/// Reserves `count` consecutive free ports (and, with `with_bus`, their cluster bus ports)
/// that this process has never handed out before; returns the first.
pub fn free_ports(count: u16, with_bus: bool) -> u16 {
    assert!(count > 0 && count < 100);
    let (first, end) = port_range();
    let mut next = NEXT_PORT.lock().unwrap_or_else(|e| e.into_inner());
    let mut port = next.unwrap_or_else(|| {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let seed = (std::process::id()).wrapping_mul(7919).wrapping_add(nanos);
        first + (seed % u32::from((end - first) / 2)) as u16
    });
    for _ in 0..(end - first) {
        if port + count >= end {
            port = first;
        }
        let all_free = (port..port + count)
            .all(|p| port_is_free(p) && (!with_bus || port_is_free(p + REDIS_BUS_PORT_OFFSET)));
        if all_free {
            *next = Some(port + count);
            return port;
        }
        port += 1;
    }
    panic!("no {count} consecutive free ports in {first}..{end}");
}

/// A fresh temporary directory for one server or test.
pub fn unique_dir(tag: &str) -> PathBuf {
    static COUNTER: Mutex<u32> = Mutex::new(0);
    let mut n = COUNTER.lock().unwrap_or_else(|e| e.into_inner());
    *n += 1;
    let dir = std::env::temp_dir().join(format!("ruvio-test-{}-{}-{}", std::process::id(), tag, n));
    std::fs::create_dir_all(&dir).expect("create test temp dir");
    dir
}

/// One running server (ruvio, a redis-server, or a Redis Cluster of redis-servers).
/// Dropping it kills the processes and removes their temporary directory.
pub struct Server {
    children: Vec<Child>,
    /// Listening ports: one for forward mode, one per shard for per-shard mode.
    pub ports: Vec<u16>,
    /// Port mode the server runs in.
    pub mode: PortMode,
    /// Number of shards (ruvio) or cluster masters (Redis Cluster).
    pub shards: usize,
    /// What kind of server this is.
    pub kind: Target,
    dir: PathBuf,
    logs: Vec<PathBuf>,
}

impl Server {
    /// Starts the test target in `mode` with `shards` shards and waits until every port
    /// answers PING.
    pub fn start(mode: PortMode, shards: usize) -> Server {
        match target() {
            Target::Ruvio => Server::ruvio(mode, shards),
            Target::Redis => match mode {
                PortMode::Forward => Server::redis(),
                PortMode::PerShard => Server::redis_cluster(shards),
            },
        }
    }

    /// The target in forward mode.
    pub fn forward(shards: usize) -> Server {
        Server::start(PortMode::Forward, shards)
    }

    /// The target in per-shard (cluster) mode.
    pub fn per_shard(shards: usize) -> Server {
        Server::start(PortMode::PerShard, shards)
    }

    /// Starts the `ruvio` binary regardless of `RUVIO_TEST_TARGET`.
    pub fn ruvio(mode: PortMode, shards: usize) -> Server {
        Server::ruvio_with(mode, shards, &[])
    }

    /// Starts the `ruvio` binary with `extra` arguments after the test's own.
    pub fn ruvio_with(mode: PortMode, shards: usize, extra: &[&str]) -> Server {
        Server::ruvio_with_env(mode, shards, extra, &[])
    }

    /// As [`Server::ruvio_with`], with `env` added to the server's environment.
    pub fn ruvio_with_env(
        mode: PortMode,
        shards: usize,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        assert!(shards >= 1);
        let port_count = match mode {
            PortMode::Forward => 1,
            PortMode::PerShard => shards as u16,
        };
        let first = free_ports(port_count, false);
        let dir = unique_dir("ruvio");
        let log = dir.join("ruvio.log");
        let child = spawn_logged(
            Command::new(ruvio_bin())
                // 127.0.0.1 unless the test binds elsewhere itself.
                .args(
                    ["--bind", "127.0.0.1"]
                        .iter()
                        .filter(|_| !extra.contains(&"--bind")),
                )
                .args([
                    "--port",
                    &first.to_string(),
                    "--shards",
                    &shards.to_string(),
                    "--port-mode",
                    mode.flag(),
                ])
                // In memory unless the test says otherwise.
                .args(
                    ["--durability", "memory"]
                        .iter()
                        .filter(|_| !extra.contains(&"--durability")),
                )
                .args(extra)
                .envs(env.iter().copied()),
            &log,
        );
        let mut server = Server {
            children: vec![child],
            ports: (first..first + port_count).collect(),
            mode,
            shards,
            kind: Target::Ruvio,
            dir,
            logs: vec![log],
        };
        server.wait_ready();
        server
    }

    /// Starts one standalone `redis-server --save "" --appendonly no` (DEBUG enabled so
    /// that `DEBUG PROTOCOL` can be compared).
    pub fn redis() -> Server {
        Server::redis_with(&[])
    }

    /// As [`Server::redis`], with `extra` arguments after the usual ones (a later
    /// option wins in redis-server's command line).
    pub fn redis_with(extra: &[&str]) -> Server {
        let bin = redis_server_bin().expect("redis-server is not installed");
        // A cluster node also listens on its bus port (port + 10000).
        let port = free_ports(1, extra.contains(&"--cluster-enabled"));
        let dir = unique_dir("redis");
        let log = dir.join("redis.log");
        let child = spawn_logged(
            Command::new(bin)
                .args(redis_args(port, &dir))
                .args(["--enable-debug-command", "yes"])
                .args(extra),
            &log,
        );
        let mut server = Server {
            children: vec![child],
            ports: vec![port],
            mode: PortMode::Forward,
            shards: 1,
            kind: Target::Redis,
            dir,
            logs: vec![log],
        };
        server.wait_ready();
        server
    }

    /// Starts one redis-server as a lone Redis Cluster node (`cluster-enabled yes`,
    /// `cluster-node-timeout 1000`, no slots): for tests that put it in a cluster
    /// with other nodes themselves.
    pub fn redis_cluster_node() -> Server {
        Server::redis_cluster_node_with(&[])
    }

    /// [`Server::redis_cluster_node`] with `extra` arguments.
    pub fn redis_cluster_node_with(extra: &[&str]) -> Server {
        let mut args = vec![
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            "1000",
        ];
        args.extend_from_slice(extra);
        Server::redis_with(&args)
    }

    /// Starts a Redis Cluster of `masters` redis-servers on consecutive ports, master i
    /// owning the same slot range as Ruvio's shard i, and waits until it is `ok`.
    pub fn redis_cluster(masters: usize) -> Server {
        let bin = redis_server_bin().expect("redis-server is not installed");
        let first = free_ports(masters as u16, true);
        let dir = unique_dir("redis-cluster");
        let mut server = Server {
            children: Vec::new(),
            ports: (first..first + masters as u16).collect(),
            mode: PortMode::PerShard,
            shards: masters,
            kind: Target::Redis,
            dir: dir.clone(),
            logs: Vec::new(),
        };
        for &port in &server.ports.clone() {
            let log = dir.join(format!("redis-{port}.log"));
            let child = spawn_logged(
                Command::new(&bin).args(redis_args(port, &dir)).args([
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    &format!("nodes-{port}.conf"),
                    "--enable-debug-command",
                    "yes",
                ]),
                &log,
            );
            server.children.push(child);
            server.logs.push(log);
        }
        server.wait_ready();
        for (i, &port) in server.ports.iter().enumerate() {
            let (lo, hi) = shard_slot_range(i, masters);
            let mut conn = RawConn::connect(port);
            let reply = conn.cmd(&[
                "CLUSTER",
                "ADDSLOTSRANGE",
                &lo.to_string(),
                &(hi - 1).to_string(),
            ]);
            assert_eq!(reply, b"+OK\r\n", "ADDSLOTSRANGE: {}", show(&reply));
        }
        let mut first_conn = RawConn::connect(server.ports[0]);
        for &port in &server.ports[1..] {
            let reply = first_conn.cmd(&["CLUSTER", "MEET", "127.0.0.1", &port.to_string()]);
            assert_eq!(reply, b"+OK\r\n", "CLUSTER MEET: {}", show(&reply));
        }
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        for &port in &server.ports {
            loop {
                let mut conn = RawConn::connect(port);
                let info = conn.cmd(&["CLUSTER", "INFO"]);
                let slots = conn.cmd(&["CLUSTER", "SLOTS"]);
                let ok = contains(&info, b"cluster_state:ok")
                    && contains(&info, format!("cluster_known_nodes:{masters}").as_bytes())
                    && slots.starts_with(format!("*{masters}\r\n").as_bytes());
                if ok {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "Redis Cluster on {port} not ok: {}",
                    show(&info)
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        server
    }

    /// First (or only) port.
    pub fn port(&self) -> u16 {
        self.ports[0]
    }

    /// Port of shard `i` (per-shard mode) or the only port (forward mode).
    pub fn shard_port(&self, i: usize) -> u16 {
        match self.mode {
            PortMode::Forward => self.ports[0],
            PortMode::PerShard => self.ports[i],
        }
    }

    /// `redis://127.0.0.1:PORT/` of the first port.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port())
    }

    /// URLs of every port.
    pub fn urls(&self) -> Vec<String> {
        self.ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}/"))
            .collect()
    }

    /// A raw RESP connection to the first port.
    pub fn raw(&self) -> RawConn {
        RawConn::connect(self.port())
    }

    /// A `redis` crate connection to the first port, with timeouts.
    pub fn client(&self) -> redis::Connection {
        let client = redis::Client::open(self.url()).expect("redis::Client::open");
        let conn = client
            .get_connection_with_timeout(IO_TIMEOUT)
            .expect("redis crate connection");
        conn.set_read_timeout(Some(IO_TIMEOUT))
            .expect("set_read_timeout");
        conn.set_write_timeout(Some(IO_TIMEOUT))
            .expect("set_write_timeout");
        conn
    }

    /// Whether the first process is still running.
    pub fn is_running(&mut self) -> bool {
        self.children
            .iter_mut()
            .all(|child| matches!(child.try_wait(), Ok(None)))
    }

    /// Waits up to `timeout` for the (first) process to exit; its exit code, or
    /// `None` if it is still running.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.children[0].try_wait() {
                return Some(status.code().unwrap_or(-1));
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Process id of the first (or only) server process: its /proc entry gives the
    /// resident memory the hostile-client tests bound.
    pub fn pid(&self) -> u32 {
        self.children[0].id()
    }

    /// Every line the server logged so far (its whole log files).
    pub fn full_logs(&self) -> String {
        let read =
            |log| String::from_utf8_lossy(&std::fs::read(log).unwrap_or_default()).into_owned();
        self.logs.iter().map(read).collect()
    }

    /// Server logs so far (for failure messages).
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for log in &self.logs {
            let text = std::fs::read(log).unwrap_or_default();
            let text = String::from_utf8_lossy(&text);
            let tail: String = text
                .chars()
                .rev()
                .take(4000)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            let _ = writeln!(out, "--- {} ---\n{tail}", log.display());
        }
        out
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        for port in self.ports.clone() {
            loop {
                if !self.is_running() {
                    panic!(
                        "server exited before answering PING on {port}\n{}",
                        self.logs()
                    );
                }
                if ping_once(port) {
                    break;
                }
                if Instant::now() > deadline {
                    panic!(
                        "server did not answer PING on {port} within {STARTUP_TIMEOUT:?}\n{}",
                        self.logs()
                    );
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let mut died = false;
        for child in &mut self.children {
            if let Ok(Some(status)) = child.try_wait() {
                died = true;
                eprintln!("server process exited during the test: {status}");
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        if died || std::thread::panicking() {
            eprintln!("{}", self.logs());
        }
        if std::env::var_os("RUVIO_TEST_KEEP_LOGS").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn redis_args(port: u16, dir: &Path) -> Vec<String> {
    [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--daemonize",
        "no",
        "--dir",
        &dir.to_string_lossy(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn spawn_logged(cmd: &mut Command, log: &Path) -> Child {
    let out = std::fs::File::create(log).expect("create server log");
    let err = out.try_clone().expect("clone log handle");
    cmd.stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {:?}: {e}", cmd.get_program()))
}

fn ping_once(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(500),
    ) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(1000)));
    if stream.write_all(b"*1\r\n$4\r\nPING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 7];
    stream.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

/// A count from INFO stats (`name:value`), read over `c`.
pub fn info_stat(c: &mut RawConn, name: &str) -> u64 {
    let info = decode(&c.cmd(&["INFO", "stats"])).text();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in INFO stats"))
        .trim()
        .parse()
        .expect("a count")
}

/// A small deterministic generator (an LCG step): each thread its own sequence.
pub fn next_random(state: &mut u64) -> usize {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (*state >> 33) as usize
}

/// The sum of `keys`' integer values, read one GET at a time.
pub fn sum_by_get(c: &mut RawConn, keys: &[String]) -> i64 {
    keys.iter()
        .map(|k| {
            decode(&c.cmd(&["GET", k]))
                .text()
                .parse::<i64>()
                .expect("a number")
        })
        .sum()
}
