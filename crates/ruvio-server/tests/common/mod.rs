//! Shared harness of the end-to-end tests: start a server on fresh free ports, wait until
//! it answers PING, talk raw RESP to it, and kill it when the handle drops.
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
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub mod busy;
pub mod certs;
mod diff;
pub mod replication;
pub mod slowlog;
pub mod tracking;
// Each test binary compiles this module; the ones without a differential run leave
// these unused.
#[allow(unused_imports)]
pub use diff::*;

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

static NEXT_PORT: Mutex<Option<u16>> = Mutex::new(None);

fn port_is_free(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok() && TcpListener::bind(("0.0.0.0", port)).is_ok()
}

/// Reserves `count` consecutive free ports (and, with `with_bus`, their cluster bus ports)
/// that this process has never handed out before; returns the first.
pub fn free_ports(count: u16, with_bus: bool) -> u16 {
    assert!(count > 0 && count < 100);
    let mut next = NEXT_PORT.lock().unwrap_or_else(|e| e.into_inner());
    let mut port = next.unwrap_or_else(|| {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let seed = (std::process::id()).wrapping_mul(7919).wrapping_add(nanos);
        PORT_FIRST + (seed % u32::from(PORT_END - PORT_FIRST - 1000)) as u16
    });
    for _ in 0..(PORT_END - PORT_FIRST) {
        if port + count >= PORT_END {
            port = PORT_FIRST;
        }
        let all_free = (port..port + count)
            .all(|p| port_is_free(p) && (!with_bus || port_is_free(p + REDIS_BUS_PORT_OFFSET)));
        if all_free {
            *next = Some(port + count);
            return port;
        }
        port += 1;
    }
    panic!("no {count} consecutive free ports in {PORT_FIRST}..{PORT_END}");
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
        let port = free_ports(1, false);
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

/// Slots `[lo, hi)` owned by shard `i` of `n`: `[i*16384/n, (i+1)*16384/n)`.
pub fn shard_slot_range(i: usize, n: usize) -> (u16, u16) {
    let lo = i * SLOT_COUNT as usize / n;
    let hi = (i + 1) * SLOT_COUNT as usize / n;
    (lo as u16, hi as u16)
}

/// Shard of `n` that owns `slot`.
pub fn shard_of_slot(slot: u16, n: usize) -> usize {
    (0..n)
        .find(|&i| {
            let (lo, hi) = shard_slot_range(i, n);
            lo <= slot && slot < hi
        })
        .expect("slot below 16384")
}

/// CRC16 (XMODEM), written here independently of the server's.
pub fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// Hash slot of a key, honouring `{hash tags}`.
pub fn key_slot(key: &[u8]) -> u16 {
    let mut hashed = key;
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                hashed = &key[open + 1..open + 1 + len];
            }
        }
    }
    crc16(hashed) % SLOT_COUNT
}

/// Shard (of `n`) that owns `key`.
pub fn shard_of_key(key: &str, n: usize) -> usize {
    shard_of_slot(key_slot(key.as_bytes()), n)
}

/// The first key `prefix0`, `prefix1`, ... that lands on `shard` of `n`.
pub fn key_on_shard(prefix: &str, shard: usize, n: usize) -> String {
    (0..100_000)
        .map(|i| format!("{prefix}{i}"))
        .find(|k| shard_of_key(k, n) == shard)
        .expect("some key lands on every shard")
}

/// The first one-letter hash tag (`a` for `{a}`) whose keys land on `shard` of `n`.
pub fn hash_tag_on_shard(shard: usize, n: usize) -> String {
    (b'a'..=b'z')
        .map(|c| (c as char).to_string())
        .find(|t| shard_of_key(&format!("{{{t}}}"), n) == shard)
        .expect("a tag for every shard")
}

/// A new connection served by shard `shard` of a forward-mode `server` (which
/// spreads connections over its shards): connections are opened until DEBUG
/// SHARD (Ruvio's own) names it.
pub fn conn_on_shard(server: &Server, shard: usize) -> RawConn {
    let wanted = format!(":{shard}\r\n");
    for _ in 0..200 {
        let mut conn = server.raw();
        if conn.cmd(&["debug", "shard"]) == wanted.as_bytes() {
            return conn;
        }
    }
    panic!("no connection landed on shard {shard} in 200 tries");
}

/// One key per shard of `n`, named from `prefix` (`prefix0`, `prefix1` ...).
pub fn keys_per_shard(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|shard| key_on_shard(prefix, shard, n)).collect()
}

/// A bulk string's RESP bytes, as text.
pub fn bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

/// XREAD's and XREADGROUP's RESP2 reply for one stream and one entry with one
/// field.
pub fn stream_entry_reply(key: &str, id: &str, field: &str, value: &str) -> Vec<u8> {
    format!(
        "*1\r\n*2\r\n{}*1\r\n*2\r\n{}*2\r\n{}{}",
        bulk(key),
        bulk(id),
        bulk(field),
        bulk(value)
    )
    .into_bytes()
}

/// `needle` occurs in `haystack`.
/// Where the records of a log segment end: the space after them is zero-filled
/// (direct writes fill ahead) or absent.
pub fn records_end(log: &[u8]) -> usize {
    log.iter().rposition(|&b| b != 0).map_or(0, |last| last + 1)
}

pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Bytes shown like a Rust byte string literal, for assertion messages.
pub fn show(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 2);
    out.push('"');
    for &b in bytes.iter().take(2000) {
        match b {
            b'\r' => out.push_str("\\r"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    if bytes.len() > 2000 {
        let _ = write!(out, "...({} bytes)", bytes.len());
    }
    out.push('"');
    out
}

/// One command of a differential sequence: its arguments as bytes.
pub type Cmd = Vec<Vec<u8>>;

/// A [`Cmd`] from string arguments.
pub fn cmd(words: &[&str]) -> Cmd {
    words.iter().map(|w| w.as_bytes().to_vec()).collect()
}

/// A command shown for failure messages and traces, each argument as [`show`] prints it.
pub fn show_cmd(command: &[Vec<u8>]) -> String {
    command
        .iter()
        .map(|a| show(a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// MULTI, each command of `queue`, EXEC on `reference` and on `target`: every
/// reply of each, concatenated, `(reference's, target's)`.
pub fn transaction_on_both<S: AsRef<[u8]>>(
    reference: &mut RawConn,
    target: &mut RawConn,
    queue: &[Vec<S>],
) -> (Vec<u8>, Vec<u8>) {
    let mut replies = (reference.cmd(&["multi"]), target.cmd(&["multi"]));
    for command in queue {
        replies.0.extend(reference.cmd(command));
        replies.1.extend(target.cmd(command));
    }
    replies.0.extend(reference.cmd(&["exec"]));
    replies.1.extend(target.cmd(&["exec"]));
    replies
}

/// Encodes a command as a RESP multibulk request.
pub fn encode<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        let arg = arg.as_ref();
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A plain TCP connection that sends bytes and reads whole RESP replies as raw bytes.
pub struct RawConn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl RawConn {
    /// Connects to 127.0.0.1:`port` with [`IO_TIMEOUT`] reads.
    pub fn connect(port: u16) -> RawConn {
        let stream = TcpStream::connect(("127.0.0.1", port))
            .unwrap_or_else(|e| panic!("connect to 127.0.0.1:{port}: {e}"));
        stream
            .set_read_timeout(Some(IO_TIMEOUT))
            .expect("set_read_timeout");
        stream.set_nodelay(true).expect("set_nodelay");
        RawConn {
            stream,
            buf: Vec::new(),
        }
    }

    /// Wraps a connected stream (any address), with [`IO_TIMEOUT`] reads.
    pub fn from_stream(stream: TcpStream) -> RawConn {
        stream
            .set_read_timeout(Some(IO_TIMEOUT))
            .expect("set_read_timeout");
        stream.set_nodelay(true).expect("set_nodelay");
        RawConn {
            stream,
            buf: Vec::new(),
        }
    }

    /// Writes `bytes` in one write.
    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write to server");
    }

    fn fill(&mut self) -> usize {
        let mut chunk = [0u8; 65536];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return n;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    panic!("timed out waiting for the server; have {}", show(&self.buf))
                }
                // A reset after the server closed counts as end of stream.
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return 0,
                Err(e) => panic!("read from server: {e}"),
            }
        }
    }

    /// Reads until `needle` arrives; returns every byte up to and including it.
    pub fn read_until(&mut self, needle: &[u8]) -> Vec<u8> {
        loop {
            if let Some(at) = self.buf.windows(needle.len()).position(|w| w == needle) {
                return self.buf.drain(..at + needle.len()).collect();
            }
            if self.fill() == 0 {
                panic!("connection closed before {}", show(needle));
            }
        }
    }

    /// Reads one complete RESP2/RESP3 reply and returns its raw bytes.
    pub fn read_reply(&mut self) -> Vec<u8> {
        loop {
            match frame_len(&self.buf) {
                Ok(Some(len)) => return self.buf.drain(..len).collect(),
                Ok(None) => {
                    if self.fill() == 0 {
                        panic!("connection closed mid-reply; have {}", show(&self.buf));
                    }
                }
                Err(e) => panic!("malformed reply from server ({e}): {}", show(&self.buf)),
            }
        }
    }

    /// Sends one command and returns its raw reply.
    pub fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Vec<u8> {
        self.send(&encode(args));
        self.read_reply()
    }

    /// Reads exactly `expected.len()` bytes and asserts they are `expected`.
    pub fn expect(&mut self, expected: &[u8]) {
        while self.buf.len() < expected.len() {
            if self.fill() == 0 {
                panic!(
                    "connection closed; expected {}, got {}",
                    show(expected),
                    show(&self.buf)
                );
            }
            if !expected.starts_with(&self.buf[..self.buf.len().min(expected.len())]) {
                break;
            }
        }
        if self.buf.starts_with(expected) {
            self.buf.drain(..expected.len());
            return;
        }
        // Show the whole unexpected reply, not just as many bytes as were expected.
        self.stream
            .set_read_timeout(Some(Duration::from_millis(300)))
            .expect("set_read_timeout");
        let mut chunk = [0u8; 65536];
        while frame_len(&self.buf).ok().flatten().is_none() {
            match self.stream.read(&mut chunk) {
                Ok(n) if n > 0 => self.buf.extend_from_slice(&chunk[..n]),
                _ => break,
            }
        }
        panic!(
            "\nexpected {}\n     got {}",
            show(expected),
            show(&self.buf)
        );
    }

    /// Sends `request` and asserts the reply bytes are exactly `expected`.
    pub fn roundtrip(&mut self, request: &[u8], expected: &[u8]) {
        self.send(request);
        self.expect(expected);
    }

    /// Asserts the server closes the connection with nothing more to read.
    pub fn expect_closed(&mut self) {
        loop {
            if !self.buf.is_empty() {
                panic!("expected the connection to close, got {}", show(&self.buf));
            }
            if self.fill() == 0 {
                return;
            }
        }
    }

    /// Asserts nothing arrives within `wait` (the server is waiting for more input).
    pub fn expect_silence(&mut self, wait: Duration) {
        self.stream
            .set_read_timeout(Some(wait))
            .expect("set_read_timeout");
        let mut chunk = [0u8; 4096];
        let got = match self.stream.read(&mut chunk) {
            Ok(0) => Some(b"<connection closed>".to_vec()),
            Ok(n) => Some(chunk[..n].to_vec()),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => None,
            Err(e) => Some(format!("<error {e}>").into_bytes()),
        };
        self.stream
            .set_read_timeout(Some(IO_TIMEOUT))
            .expect("set_read_timeout");
        if let Some(got) = got {
            panic!("expected no reply yet, got {}", show(&got));
        }
    }

    /// The underlying stream (for half-closes and the like).
    pub fn stream(&mut self) -> &mut TcpStream {
        &mut self.stream
    }
}

fn line_end(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|p| from + p)
}

fn parse_int(bytes: &[u8]) -> Result<i64, String> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad length {}", show(bytes)))
}

/// Length of the complete RESP2/RESP3 frame at the start of `buf`, `None` if more bytes
/// are needed.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, String> {
    frame_len_at(buf, 0)
}

fn frame_len_at(buf: &[u8], at: usize) -> Result<Option<usize>, String> {
    let Some(&kind) = buf.get(at) else {
        return Ok(None);
    };
    let Some(eol) = line_end(buf, at + 1) else {
        return Ok(None);
    };
    let header = &buf[at + 1..eol];
    let after = eol + 2;
    match kind {
        b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => Ok(Some(after)),
        b'$' | b'=' | b'!' => {
            let len = parse_int(header)?;
            if len < 0 {
                return Ok(Some(after));
            }
            let end = after + len as usize + 2;
            if buf.len() < end {
                return Ok(None);
            }
            if &buf[end - 2..end] != b"\r\n" {
                return Err("bulk not terminated by CRLF".into());
            }
            Ok(Some(end))
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let count = parse_int(header)?;
            if count < 0 {
                return Ok(Some(after));
            }
            let elements = if kind == b'%' || kind == b'|' {
                count * 2
            } else {
                count
            };
            let mut pos = after;
            for _ in 0..elements {
                match frame_len_at(buf, pos)? {
                    Some(next) => pos = next,
                    None => return Ok(None),
                }
            }
            if kind == b'|' {
                // An attribute is followed by the reply it annotates.
                return frame_len_at(buf, pos);
            }
            Ok(Some(pos))
        }
        other => Err(format!("unknown RESP type byte {:?}", other as char)),
    }
}

/// A decoded RESP2/RESP3 value, for tests that check structure rather than bytes.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `+...`
    Simple(String),
    /// `-...`
    Error(String),
    /// `:n`
    Int(i64),
    /// `$n` (RESP2 null bulk is `Nil`)
    Bulk(Vec<u8>),
    /// `$-1`, `*-1`, `_`
    Nil,
    /// `*n`
    Array(Vec<Value>),
    /// `~n`
    Set(Vec<Value>),
    /// `>n`
    Push(Vec<Value>),
    /// `%n`
    Map(Vec<(Value, Value)>),
    /// `,x` kept as text
    Double(String),
    /// `#t` / `#f`
    Bool(bool),
    /// `(n` kept as text
    BigNumber(String),
    /// `=n` format and text
    Verbatim(String, Vec<u8>),
}

impl Value {
    /// Bulk or simple string contents as text.
    pub fn text(&self) -> String {
        match self {
            Value::Simple(s) | Value::Error(s) | Value::Double(s) | Value::BigNumber(s) => {
                s.clone()
            }
            Value::Bulk(b) | Value::Verbatim(_, b) => String::from_utf8_lossy(b).into_owned(),
            Value::Int(n) => n.to_string(),
            other => panic!("not a string: {other:?}"),
        }
    }

    /// Looks `key` up in a map (RESP3) or a flat key/value array (RESP2).
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Map(pairs) => pairs.iter().find(|(k, _)| k.text() == key).map(|(_, v)| v),
            Value::Array(items) => items
                .chunks(2)
                .find(|pair| pair[0].text() == key)
                .map(|pair| &pair[1]),
            _ => None,
        }
    }
}

/// Decodes one complete frame (as returned by [`RawConn::read_reply`]).
pub fn decode(frame: &[u8]) -> Value {
    let (value, used) = decode_at(frame, 0);
    assert_eq!(
        used,
        frame.len(),
        "trailing bytes after frame {}",
        show(frame)
    );
    value
}

fn decode_at(buf: &[u8], at: usize) -> (Value, usize) {
    let eol = line_end(buf, at + 1).expect("complete frame");
    let header = &buf[at + 1..eol];
    let text = || String::from_utf8_lossy(header).into_owned();
    let after = eol + 2;
    let kind = buf[at];
    match kind {
        b'+' => (Value::Simple(text()), after),
        b'-' => (Value::Error(text()), after),
        b':' => (Value::Int(parse_int(header).expect("integer")), after),
        b'_' => (Value::Nil, after),
        b',' => (Value::Double(text()), after),
        b'#' => (Value::Bool(header == b"t"), after),
        b'(' => (Value::BigNumber(text()), after),
        b'$' | b'=' | b'!' => {
            let len = parse_int(header).expect("length");
            if len < 0 {
                return (Value::Nil, after);
            }
            let body = buf[after..after + len as usize].to_vec();
            let end = after + len as usize + 2;
            match kind {
                b'$' => (Value::Bulk(body), end),
                b'!' => (
                    Value::Error(String::from_utf8_lossy(&body).into_owned()),
                    end,
                ),
                _ => {
                    let format = String::from_utf8_lossy(&body[..3]).into_owned();
                    (Value::Verbatim(format, body[4..].to_vec()), end)
                }
            }
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let count = parse_int(header).expect("count");
            if count < 0 {
                return (Value::Nil, after);
            }
            let mut pos = after;
            let mut items = Vec::new();
            let elements = if kind == b'%' || kind == b'|' {
                count * 2
            } else {
                count
            };
            for _ in 0..elements {
                let (v, next) = decode_at(buf, pos);
                items.push(v);
                pos = next;
            }
            let value = match kind {
                b'*' => Value::Array(items),
                b'~' => Value::Set(items),
                b'>' => Value::Push(items),
                _ => {
                    let mut pairs = Vec::new();
                    let mut it = items.into_iter();
                    while let (Some(k), Some(v)) = (it.next(), it.next()) {
                        pairs.push((k, v));
                    }
                    Value::Map(pairs)
                }
            };
            if kind == b'|' {
                return decode_at(buf, pos);
            }
            (value, pos)
        }
        other => panic!("unknown RESP type byte {:?}", other as char),
    }
}
