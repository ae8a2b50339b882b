//! A Ruvio cluster across hosts (issue 35, "Tests across hosts"): three
//! network namespaces joined by a bridge, each a host running one `ruvio`
//! process of two shards in per-shard mode (two nodes per host, bound to the
//! host's own address). `redis-cli --cluster create ... --cluster-replicas 1`
//! builds the cluster (it puts each master's replica on another host),
//! redis-py's RedisCluster writes while `redis-cli --cluster reshard` moves
//! half of a master's slots to a master on another host, then one host's
//! process is killed with `kill -9` (a master and a replica of another
//! master). The killed master's replica, on another host, is promoted; every
//! write acknowledged before the kill (and replicated: `WAIT 1`) reads back,
//! and the client writes again, the promoted node's slots included.
//!
//! What it shows that the loopback tests do not: the nodes announce and are
//! reached at addresses other than 127.0.0.1, the bus and the replication
//! links cross hosts, and the tools and the client follow the announced
//! addresses. scripts/cluster_hosts.py runs the long version (rounds of
//! reshard, kill, failover and the host's return) and writes a record.
//!
//! Needs root (`ip netns add`); skipped with a message otherwise.

mod common;

use common::cluster_process::text;
use common::cluster_tools::{
    all_written_present_at, check_whole_at, redis_cli, reshard_at, start_writer_at, stop_writer,
};
use common::replication::wait_all_by;
use common::*;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Hosts in the test's network: the nodes' cluster of three masters and
/// three replicas, two per host.
const HOST_COUNT: usize = 3;

/// The failover's bound: `cluster-node-timeout` is 1000 ms, PFAIL after it,
/// FAIL from the majority, 500-1000 ms before the votes (2-3 s); a missed
/// election is retried after twice the 2 s auth timeout, as Redis's.
const FAILOVER_MAX: Duration = Duration::from_secs(9);

/// `cmd` run as a command line; its stderr when it fails.
fn run(cmd: &[&str]) -> Result<(), String> {
    let out = Command::new(cmd[0])
        .args(&cmd[1..])
        .output()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!(
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

/// Three network namespaces ("hosts") on one bridge, the root namespace on
/// the bridge too (the test's tools and clients reach the hosts from it).
/// Dropping it kills whatever still runs in them and removes them all.
struct Network {
    namespaces: Vec<String>,
    /// The veth pairs' ends on the bridge, one per host.
    veths: Vec<String>,
    bridge: String,
    /// The /24's first three octets: host i is `<subnet>.<i + 1>`.
    subnet: String,
}

impl Network {
    /// Names and the subnet unique to this test process (its pid), so runs
    /// side by side do not meet; `Err` when namespaces are not permitted.
    fn create() -> Result<Network, String> {
        let pid = std::process::id();
        let network = Network {
            namespaces: Vec::new(),
            veths: Vec::new(),
            bridge: format!("rvbr{pid}"),
            subnet: format!("10.213.{}", pid % 250),
        };
        let mut network = network;
        run(&["ip", "link", "add", &network.bridge, "type", "bridge"])?;
        let root_address = format!("{}.254/24", network.subnet);
        run(&["ip", "addr", "add", &root_address, "dev", &network.bridge])?;
        run(&["ip", "link", "set", &network.bridge, "up"])?;
        for i in 0..HOST_COUNT {
            let ns = format!("rvh{pid}-{i}");
            run(&["ip", "netns", "add", &ns])?;
            network.namespaces.push(ns.clone());
            let outside = format!("rvv{pid}-{i}");
            let veth = ["ip", "link", "add", &outside, "type", "veth"];
            run(&[&veth[..], &["peer", "name", "eth0", "netns", &ns]].concat())?;
            network.veths.push(outside.clone());
            run(&["ip", "link", "set", &outside, "master", &network.bridge])?;
            run(&["ip", "link", "set", &outside, "up"])?;
            let address = format!("{}/24", network.host(i));
            run(&["ip", "-n", &ns, "addr", "add", &address, "dev", "eth0"])?;
            run(&["ip", "-n", &ns, "link", "set", "eth0", "up"])?;
            run(&["ip", "-n", &ns, "link", "set", "lo", "up"])?;
        }
        Ok(network)
    }

    fn host(&self, i: usize) -> String {
        format!("{}.{}", self.subnet, i + 1)
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        for ns in &self.namespaces {
            // The processes this test started in the namespace, should a
            // panic have left one running.
            if let Ok(out) = Command::new("ip").args(["netns", "pids", ns]).output() {
                for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                    let _ = run(&["kill", "-9", pid]);
                }
            }
            let _ = run(&["ip", "netns", "del", ns]);
        }
        // Deleted by name: the namespace (and the veth's inner end with it)
        // may outlive its name while the kernel still holds it.
        for outside in &self.veths {
            let _ = run(&["ip", "link", "del", outside]);
        }
        let _ = run(&["ip", "link", "del", &self.bridge]);
    }
}

/// One host's `ruvio` process: two shards, two nodes, bound to the host's
/// address; killed when dropped.
struct Host {
    child: Child,
    address: String,
    dir: std::path::PathBuf,
}

impl Host {
    fn start(network: &Network, i: usize, port: u16) -> Host {
        let dir = unique_dir(&format!("hosts-{i}"));
        let log = std::fs::File::create(dir.join("ruvio.log")).expect("log file");
        let address = network.host(i);
        let child = Command::new("ip")
            .args(["netns", "exec", &network.namespaces[i]])
            .arg(ruvio_bin())
            .args(["--bind", &address, "--port", &port.to_string()])
            .args(["--shards", "2", "--durability", "memory"])
            .args(["--dir", dir.to_str().expect("a UTF-8 path")])
            .args(["--cluster-enabled", "yes", "--cluster-node-timeout", "1000"])
            // As redis-server's: without a password only loopback clients
            // are served unless protected mode is off.
            .args(["--protected-mode", "no"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("ip netns exec ruvio");
        let host = Host {
            child,
            address,
            dir,
        };
        for port in [port, port + 1] {
            wait_until("the host's nodes answer", || {
                let stream = std::net::TcpStream::connect((host.address.as_str(), port));
                match stream.map(|s| RawConn::from_stream(s).cmd(&["PING"])) {
                    Ok(pong) if pong == b"+PONG\r\n" => Ok(()),
                    _ => {
                        Err(std::fs::read_to_string(host.dir.join("ruvio.log")).unwrap_or_default())
                    }
                }
            });
        }
        host
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(self.dir.join("ruvio.log")).unwrap_or_default();
            eprintln!("ruvio on {}:\n{log}", self.address);
        }
    }
}

/// Retries `check` every 100 ms for up to 30 s.
fn wait_until(what: &str, mut check: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match check() {
            Ok(()) => return,
            Err(why) if Instant::now() > deadline => panic!("{what}: {why}"),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// CLUSTER NODES of the node at `host`:`port`, one line of words per node.
fn nodes(host: &str, port: u16) -> Vec<Vec<String>> {
    text(&RawConn::connect_to(host, port).cmd(&["CLUSTER", "NODES"]))
        .lines()
        .map(|l| l.split(' ').map(str::to_string).collect())
        .collect()
}

/// A node's line of CLUSTER NODES, the words the test reads.
#[derive(Debug)]
struct Node {
    id: String,
    host: String,
    port: u16,
    flags: String,
    /// The master's id of a replica, `-` for a master.
    master: String,
}

impl Node {
    fn of(words: &[String]) -> Node {
        let address = words[1].split('@').next().unwrap_or_default();
        let (host, port) = address.rsplit_once(':').expect("host:port");
        Node {
            id: words[0].clone(),
            host: host.to_string(),
            port: port.parse().expect("a port"),
            flags: words[2].clone(),
            master: words[3].clone(),
        }
    }
}

/// The slot ranges (words 8 on) of node `id` as `host`:`port` sees it.
fn slots_of(host: &str, port: u16, id: &str) -> Vec<String> {
    let view = nodes(host, port);
    let line = view.iter().find(|l| l[0] == id);
    line.map(|l| l[8..].to_vec()).unwrap_or_default()
}

fn info_field(host: &str, port: u16, name: &str) -> String {
    let info = text(&RawConn::connect_to(host, port).cmd(&["INFO", "replication"]));
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

#[test]
fn a_cluster_across_three_hosts_reshards_and_survives_a_host_s_kill_9() {
    let Some(cli) = redis_cli("cluster_hosts") else {
        return;
    };
    let network = match Network::create() {
        Ok(network) => network,
        Err(why) => {
            eprintln!("SKIPPED cluster_hosts: network namespaces not permitted ({why})");
            return;
        }
    };
    // Each host has its own ports; one pair serves all three.
    let port = free_ports(2, true);
    let mut hosts: Vec<Host> = (0..HOST_COUNT)
        .map(|i| Host::start(&network, i, port))
        .collect();
    let addresses: Vec<String> = hosts
        .iter()
        .flat_map(|h| {
            [
                format!("{}:{port}", h.address),
                format!("{}:{}", h.address, port + 1),
            ]
        })
        .collect();
    common::cluster_tools::create(&cli, &addresses, &["--cluster-replicas", "1"]);
    let (first, second) = (hosts[0].address.clone(), hosts[1].address.clone());
    wait_until("the cluster whole", || check_whole_at(&cli, &first, port));

    // The nodes as the first host's first node sees them: every master has
    // its replica on another host, its link up.
    wait_until("three replicas", || {
        let view = text(&RawConn::connect_to(&first, port).cmd(&["CLUSTER", "NODES"]));
        match view.matches("slave").count() {
            3 => Ok(()),
            _ => Err(view),
        }
    });
    let view: Vec<Node> = nodes(&first, port).iter().map(|l| Node::of(l)).collect();
    let masters: Vec<&Node> = view.iter().filter(|n| n.flags.contains("master")).collect();
    assert_eq!(masters.len(), HOST_COUNT, "{view:?}");
    for replica in view.iter().filter(|n| n.flags.contains("slave")) {
        let master = view
            .iter()
            .find(|n| n.id == replica.master)
            .expect("its master");
        assert_ne!(replica.host, master.host, "{view:?}");
        wait_until("the replica's link up", || {
            match info_field(&replica.host, replica.port, "master_link_status").as_str() {
                "up" => Ok(()),
                other => Err(other.to_string()),
            }
        });
    }
    // The first host's master is the one killed; half of the second host's
    // master's slots move to it first (so the promoted replica takes over
    // slots that moved across hosts).
    let on = |host: &str| {
        *masters
            .iter()
            .find(|n| n.host == host)
            .expect("a master per host")
    };
    let (killed, giver) = (on(&first), on(&second));

    let marks = unique_dir("hosts-marks");
    let stop = marks.join("stop");
    let writer = start_writer_at(&second, giver.port, &stop);
    std::thread::sleep(Duration::from_millis(500));
    let half = slots_count(&slots_of(&second, giver.port, &giver.id)) / 2;
    reshard_at(
        &cli,
        (&second, giver.port),
        (&first, killed.port),
        half as u16,
    );
    wait_until("the cluster whole after the reshard", || {
        check_whole_at(&cli, &second, giver.port)
    });
    std::thread::sleep(Duration::from_millis(500));
    let written = stop_writer(writer, &stop);
    // Every acknowledged write is on a replica too before the kill: a write
    // of the master's own slots and WAIT (which counts the connection's
    // writes, as Redis's; this one's offset is past the writer's).
    for master in &masters {
        let mut conn = RawConn::connect_to(&master.host, master.port);
        let marker = key_in(&slots_of(&master.host, master.port, &master.id));
        let acked = wait_all_by(&mut conn, &marker, "1", "1000");
        assert_eq!(acked, b":1\r\n", "{master:?}");
    }
    let killed_slots = slots_of(&first, killed.port, &killed.id);
    let heir = view
        .iter()
        .find(|n| n.master == killed.id)
        .expect("its replica");
    assert_ne!(heir.host, first);

    // kill -9 of the first host's process: its master and a replica.
    hosts[0].kill();
    let t0 = Instant::now();
    let third = hosts[2].address.clone();
    wait_until("the killed master's replica promoted", || {
        let view = nodes(&second, port);
        let promoted = view
            .iter()
            .find(|l| l[0] == heir.id && l[2].contains("master") && l[8..] == killed_slots[..]);
        match promoted {
            Some(_) => Ok(()),
            None => Err(format!("{view:?}")),
        }
    });
    let took = t0.elapsed();
    eprintln!("the replica on another host took over {took:?} after the kill");
    assert!(took < FAILOVER_MAX, "failover took {took:?}");
    for host in [&second, &third] {
        for p in [port, port + 1] {
            wait_until("the cluster ok without the first host", || {
                let info = text(&RawConn::connect_to(host, p).cmd(&["CLUSTER", "INFO"]));
                match info.contains("cluster_state:ok") {
                    true => Ok(()),
                    false => Err(info),
                }
            });
        }
    }

    all_written_present_at(&third, port, written);
    // The client writes again, the promoted node's slots included.
    let again = format!(
        "from redis.cluster import RedisCluster\n\
         rc = RedisCluster(host='{third}', port={port})\n\
         for i in range(300):\n\
         \x20   assert rc.set('again:%d' % i, i)\n\
         assert all(rc.get('again:%d' % i) == b'%d' % i for i in range(300))\n\
         owners = {{rc.get_node_from_key('again:%d' % i).name for i in range(300)}}\n\
         print(len(owners))\n"
    );
    assert_eq!(python(&again), HOST_COUNT.to_string());
    drop(hosts);
}

/// How many slots the ranges (`0-5460`, `7`) hold; importing and migrating
/// marks (`[...]`) are not slots held.
/// A key of a slot in `ranges` (CLUSTER NODES' `lo-hi` and `slot` words).
fn key_in(ranges: &[String]) -> String {
    let owned = |slot: u16| {
        ranges.iter().filter(|r| !r.starts_with('[')).any(|r| {
            let (lo, hi) = r.split_once('-').unwrap_or((r, r));
            let bound = |s: &str| s.parse::<u16>().expect("a slot number");
            (bound(lo)..=bound(hi)).contains(&slot)
        })
    };
    (0..)
        .map(|i| format!("wait-marker:{i}"))
        .find(|key| owned(key_slot(key.as_bytes())))
        .expect("a key of its slots")
}

fn slots_count(ranges: &[String]) -> usize {
    ranges
        .iter()
        .filter(|r| !r.starts_with('['))
        .map(|r| match r.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum()
}
