//! A `ruvio --cluster-enabled yes` process for the tests of the cluster bus in
//! the binary (tests/cluster_binary.rs, tests/cluster_reshard.rs), and what
//! they ask of every node: CLUSTER NODES parsed, the nodes agreeing, `+OK`.

use super::bus_node::{agreed, wait_for};
use super::cluster_tools::myid;
use super::*;
use ruvio_server::cluster::nodes_file::{parse_line, NodeLine};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A `ruvio --cluster-enabled yes` process whose port and data directory
/// outlive it, so the test can restart it; killed when dropped.
pub struct Node {
    child: Child,
    pub port: u16,
    shards: usize,
    /// `--port-mode forward`: the process is one node on one port.
    forward: bool,
    /// The address and flags it started with (a restart keeps them).
    bind: String,
    extra: Vec<String>,
    pub dir: PathBuf,
}

impl Node {
    pub fn start(port: u16, shards: usize, dir: &Path) -> Node {
        Node::start_bound(port, shards, dir, "127.0.0.1", &[])
    }

    /// A forward-mode process of `shards` shards: one node, on `port` alone.
    pub fn start_forward(port: u16, shards: usize, dir: &Path) -> Node {
        Node::start_bound(port, shards, dir, "127.0.0.1", &["--port-mode", "forward"])
    }

    /// `extra` flags after the defaults; a `--durability` there replaces
    /// the default `memory`.
    pub fn start_bound(port: u16, shards: usize, dir: &Path, bind: &str, extra: &[&str]) -> Node {
        let forward = extra.windows(2).any(|w| w == ["--port-mode", "forward"]);
        let durability = match extra.contains(&"--durability") {
            true => &[][..],
            false => &["--durability", "memory"][..],
        };
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("ruvio.log"))
            .expect("log file");
        let child = Command::new(ruvio_bin())
            .args(["--bind", bind, "--port", &port.to_string()])
            .args(["--shards", &shards.to_string()])
            .args(durability)
            .args(["--dir", dir.to_str().expect("a UTF-8 path")])
            .args(["--cluster-enabled", "yes", "--cluster-node-timeout", "1000"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start ruvio");
        let node = Node {
            child,
            port,
            shards,
            forward,
            bind: bind.to_string(),
            extra: extra.iter().map(|flag| flag.to_string()).collect(),
            dir: dir.to_path_buf(),
        };
        let ports = if forward { 1 } else { shards };
        for shard in 0..ports {
            let port = port + shard as u16;
            wait_for("the node answers", || {
                match std::net::TcpStream::connect(("127.0.0.1", port)) {
                    Ok(_) if RawConn::connect(port).cmd(&["PING"]) == b"+PONG\r\n" => Ok(()),
                    _ => Err(std::fs::read_to_string(dir.join("ruvio.log")).unwrap_or_default()),
                }
            });
        }
        node
    }

    /// Kills the process (SIGKILL, as `kill -9`).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Kills the process and starts it again on the same port and directory.
    pub fn restart(&mut self) {
        self.kill();
        // The kernel tears an exited process's io_uring down after it is reaped:
        // its listening sockets may be bound a moment longer.
        wait_for("the old process's ports are free", || {
            let free = |port: u16| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
            match free(self.port) && free(self.port + 10000) {
                true => Ok(()),
                false => Err("still bound".into()),
            }
        });
        let extra: Vec<&str> = self.extra.iter().map(String::as_str).collect();
        let again = Node::start_bound(self.port, self.shards, &self.dir, &self.bind, &extra);
        let old = std::mem::replace(self, again);
        std::mem::forget(old);
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(self.dir.join("ruvio.log")).unwrap_or_default();
            eprintln!("ruvio on {}:\n{log}", self.port);
        }
    }
}

pub fn text(reply: &[u8]) -> String {
    decode(reply).text()
}

/// A key (`key:<n>`) whose slot is in `range`, and its slot, as `port`'s
/// CLUSTER KEYSLOT says.
pub fn key_in(port: u16, range: std::ops::Range<u16>) -> (String, u16) {
    (0..)
        .map(|i| format!("key:{i}"))
        .find_map(|key| {
            let reply = RawConn::connect(port).cmd(&["CLUSTER", "KEYSLOT", &key]);
            let slot: u16 = text(&reply).parse().ok()?;
            range.contains(&slot).then_some((key, slot))
        })
        .expect("a key of the range")
}

pub fn cluster_nodes(port: u16) -> Vec<NodeLine> {
    text(&RawConn::connect(port).cmd(&["CLUSTER", "NODES"]))
        .lines()
        .map(|l| parse_line(l).expect("a node line"))
        .collect()
}

/// Every port's CLUSTER NODES agrees with the first's on `count` nodes, all
/// connected, and every CLUSTER INFO says `ok`.
pub fn agree(ports: &[u16], count: usize) -> Result<(), String> {
    let first = cluster_nodes(ports[0]);
    let expected = agreed(&first);
    if expected.len() != count {
        return Err(format!("{} sees {first:?}", ports[0]));
    }
    for &port in ports {
        let view = cluster_nodes(port);
        if agreed(&view) != expected || view.iter().any(|l| !l.connected) {
            return Err(format!("{port} sees {view:?}, {} sees {first:?}", ports[0]));
        }
        let info = text(&RawConn::connect(port).cmd(&["CLUSTER", "INFO"]));
        if !info.lines().any(|l| l == "cluster_state:ok") {
            return Err(format!("{port}: {info}"));
        }
    }
    Ok(())
}

/// `words` on `port` answers `+OK`.
pub fn ok(port: u16, words: &[&str]) {
    let reply = RawConn::connect(port).cmd(words);
    assert_eq!(reply, b"+OK\r\n", "{words:?} on {port}: {}", show(&reply));
}

/// CLUSTER MIGRATESLOTS of slots `first` to `last` from `port` to node
/// `target` is accepted (the job runs on; GETSLOTMIGRATIONS follows it).
pub fn migrate_slots(port: u16, first: u16, last: u16, target: &str) {
    let (first, last) = (first.to_string(), last.to_string());
    let words = [
        "CLUSTER",
        "MIGRATESLOTS",
        "SLOTSRANGE",
        &first,
        &last,
        "NODE",
        target,
    ];
    ok(port, &words);
}

/// `tested` serves 0-8191 and `peer` 8192-16383, in one cluster, up: both
/// agree on it and `tested` says `cluster_state:ok`.
pub fn halves(tested: u16, peer: u16) {
    split_at(tested, peer, 8192);
}

/// `tested` serves the slots below `peer_from` and `peer` the rest, in one
/// cluster, up (as [`halves`]).
pub fn split_at(tested: u16, peer: u16, peer_from: u16) {
    let last = (peer_from - 1).to_string();
    ok(tested, &["CLUSTER", "ADDSLOTSRANGE", "0", &last]);
    ok(
        peer,
        &["CLUSTER", "ADDSLOTSRANGE", &peer_from.to_string(), "16383"],
    );
    ok(tested, &["CLUSTER", "MEET", "127.0.0.1", &peer.to_string()]);
    wait_for("a cluster of two, up", || {
        agree(&[tested, peer], 2)?;
        let info = text(&RawConn::connect(tested).cmd(&["CLUSTER", "INFO"]));
        match info.lines().any(|l| l == "cluster_state:ok") {
            true => Ok(()),
            false => Err(info),
        }
    });
}

/// A Ruvio node and a redis-server node side by side, each serving 0-8191 in a
/// cluster of its own with a redis-server peer serving 8192-16383: the
/// differential tests send both the same commands and compare the replies.
pub struct SideBySide {
    pub node: Node,
    pub redis: Server,
    peers: [Server; 2],
}

impl SideBySide {
    pub fn start(dir: &Path) -> SideBySide {
        let side = SideBySide {
            node: Node::start(free_ports(1, true), 1, dir),
            redis: Server::redis_cluster_node(),
            peers: [Server::redis_cluster_node(), Server::redis_cluster_node()],
        };
        for (tested, peer) in side.pairs() {
            halves(tested, peer);
        }
        side
    }

    /// (tested, its peer): the Ruvio node's pair, then the redis-server's.
    pub fn pairs(&self) -> [(u16, u16); 2] {
        [
            (self.node.port, self.peers[0].port()),
            (self.redis.port(), self.peers[1].port()),
        ]
    }

    /// Each pair's transcript of `lines`, one `line -> reply` per line, with
    /// ports and node ids written as ME, PEER, MYID and PEERID so the Ruvio
    /// pair's and the redis-server pair's compare. In a line `$MYID`,
    /// `$PEERID` and `$P` (the peer's port) are filled in, `@peer ` sends it
    /// to the peer, `--` starts a fresh connection to the tested node, and two
    /// spaces make an empty argument (MIGRATE's key with KEYS).
    pub fn replay(&self, lines: &[&str]) -> [Vec<String>; 2] {
        self.pairs().map(|pair| replay_lines(pair, lines))
    }
}

fn replay_lines((tested, peer): (u16, u16), lines: &[&str]) -> Vec<String> {
    let (me, them) = (myid(tested), myid(peer));
    let (mut here, mut there) = (RawConn::connect(tested), RawConn::connect(peer));
    let mut seen = Vec::new();
    for line in lines {
        if *line == "--" {
            here = RawConn::connect(tested);
            continue;
        }
        let line = line
            .replace("$PEERID", &them)
            .replace("$MYID", &me)
            .replace("$P", &peer.to_string());
        let (conn, words) = match line.strip_prefix("@peer ") {
            Some(rest) => (&mut there, rest),
            None => (&mut here, line.as_str()),
        };
        let words: Vec<&str> = words.split(' ').collect();
        let reply = show(&conn.cmd(&words))
            .replace(&peer.to_string(), "PEER")
            .replace(&tested.to_string(), "ME");
        let line = line
            .replace(&them, "PEERID")
            .replace(&me, "MYID")
            .replace(&peer.to_string(), "PEER");
        seen.push(format!("{line} -> {reply}"));
    }
    seen
}

/// A node's INFO field `name` (every section's; the names are unique).
pub fn info_field(port: u16, name: &str) -> String {
    let info = text(&RawConn::connect(port).cmd(&["INFO"]));
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

/// This node's own line of its CLUSTER NODES.
pub fn own_line(port: u16) -> String {
    let nodes = text(&RawConn::connect(port).cmd(&["CLUSTER", "NODES"]));
    nodes
        .lines()
        .find(|l| l.contains("myself"))
        .unwrap_or_default()
        .to_string()
}

/// Every node has the same current epoch and the three masters with slots
/// have distinct config epochs (the collisions of a new cluster resolved), so
/// every vote can be granted.
pub fn epochs_settled(ports: &[u16]) -> bool {
    let current: std::collections::BTreeSet<String> = ports
        .iter()
        .map(|&p| {
            let info = text(&RawConn::connect(p).cmd(&["CLUSTER", "INFO"]));
            let line = info
                .lines()
                .find(|l| l.starts_with("cluster_current_epoch:"));
            line.unwrap_or_default().to_string()
        })
        .collect();
    let nodes = text(&RawConn::connect(ports[0]).cmd(&["CLUSTER", "NODES"]));
    let epochs: std::collections::BTreeSet<&str> = nodes
        .lines()
        .filter(|l| l.split(' ').count() > 8)
        .filter_map(|l| l.split(' ').nth(6))
        .collect();
    current.len() == 1 && epochs.len() == 3
}

/// Three masters (a third of the slots each) and a replica of the first
/// started with `replica_flags`, every node its own process (data
/// directories named after `name`), the replica's link up.
pub fn three_masters_and_a_replica(name: &str, replica_flags: &[&str]) -> (Vec<Node>, Node) {
    let masters: Vec<Node> = (0..3)
        .map(|i| Node::start(free_ports(1, true), 1, &unique_dir(&format!("{name}-m{i}"))))
        .collect();
    let dir = unique_dir(&format!("{name}-r"));
    let replica = Node::start_bound(free_ports(1, true), 1, &dir, "127.0.0.1", replica_flags);
    for (node, (first, last)) in
        masters
            .iter()
            .zip([("0", "5460"), ("5461", "10922"), ("10923", "16383")])
    {
        ok(node.port, &["CLUSTER", "ADDSLOTSRANGE", first, last]);
    }
    let first = masters[0].port;
    for other in masters[1..].iter().map(|n| n.port).chain([replica.port]) {
        ok(first, &["CLUSTER", "MEET", "127.0.0.1", &other.to_string()]);
    }
    let ports: Vec<u16> = masters
        .iter()
        .map(|n| n.port)
        .chain([replica.port])
        .collect();
    super::replication::wait_for("four nodes agree", || agree(&ports, 4).is_ok());
    super::replication::wait_for("the epochs settled", || epochs_settled(&ports));
    ok(replica.port, &["CLUSTER", "REPLICATE", &myid(first)]);
    super::replication::wait_for("the replica's link up", || {
        info_field(replica.port, "master_link_status") == "up"
    });
    (masters, replica)
}

/// Keys `{tag}:0..count` hold their index, read by `conn` as a READONLY
/// client (a replica serves them too).
pub fn holds_tagged(mut conn: RawConn, tag: &str, count: usize) -> bool {
    conn.cmd(&["READONLY"]);
    (0..count).all(|i| {
        let want = format!("${}\r\n{i}\r\n", i.to_string().len());
        conn.cmd(&["GET", &format!("{{{tag}}}:{i}")]) == want.as_bytes()
    })
}

/// `{tag}:i` for `i` in `range` written on `port` (holding `i`), acknowledged
/// by a replica (`WAIT 1`).
pub fn write_tagged(port: u16, tag: &str, range: std::ops::Range<usize>) {
    let mut conn = RawConn::connect(port);
    for i in range {
        let key = format!("{{{tag}}}:{i}");
        assert_eq!(conn.cmd(&["SET", &key, &i.to_string()]), b"+OK\r\n");
    }
    assert_eq!(conn.cmd(&["WAIT", "1", "2000"]), b":1\r\n");
}
