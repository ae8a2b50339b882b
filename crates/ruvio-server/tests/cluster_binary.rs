//! The cluster bus in the `ruvio` binary (`--cluster-enabled yes`, per-shard
//! mode: each shard is a node), with a real `redis-server --cluster-enabled yes`
//! in one cluster.
//!
//! - Two Ruvio processes (one shard each) and a redis-server take a third of the
//!   slots each by CLUSTER ADDSLOTSRANGE and meet by CLUSTER MEET; all three
//!   agree on CLUSTER NODES (names, addresses, roles, slots) and say
//!   `cluster_state:ok`; a key of another node answers `-MOVED`, and redis-py's
//!   RedisCluster writes and reads keys of every slot range through each of
//!   them. A Ruvio node restarted keeps its name and slots from its nodes.conf
//!   and the cluster is `ok` again; the redis-server killed, the Ruvio nodes
//!   fail it and answer `-CLUSTERDOWN The cluster is down`.
//! - The replies of the operator's subcommands, errors included, are
//!   redis-server 7.0's byte for byte.
//! - A Ruvio process of two shards is two nodes that join each other, and
//!   `redis-cli --cluster create` makes a cluster of a process's three shards.

mod common;

use common::bus_node::wait_for;
use common::cluster_process::{agree, cluster_nodes, ok, text, Node, SideBySide};
use common::*;
use ruvio_server::cluster::nodes_file::NodeLine;
use std::path::PathBuf;
use std::process::Command;

/// CLUSTER LINKS as (node, direction) pairs.
fn cluster_links(port: u16) -> std::collections::BTreeSet<(String, String)> {
    let reply = RawConn::connect(port).cmd(&["CLUSTER", "LINKS"]);
    let Value::Array(links) = decode(&reply) else {
        panic!("CLUSTER LINKS: {}", show(&reply));
    };
    let field = |fields: &[Value], name: &str| {
        let at = fields
            .iter()
            .position(|f| matches!(f, Value::Bulk(b) if b == name.as_bytes()))?;
        match fields.get(at + 1) {
            Some(Value::Bulk(value)) => Some(String::from_utf8_lossy(value).into_owned()),
            _ => None,
        }
    };
    links
        .iter()
        .filter_map(|link| match link {
            Value::Array(fields) => Some((field(fields, "node")?, field(fields, "direction")?)),
            _ => None,
        })
        .collect()
}

/// redis-py's RedisCluster, started from `port`, writes `count` keys and reads
/// them back (following MOVED to whichever node owns each).
fn redis_py_round_trip(port: u16, count: usize) {
    let script = format!(
        "from redis.cluster import RedisCluster\n\
         rc = RedisCluster(host='127.0.0.1', port={port})\n\
         for i in range({count}): rc.set('key:%d' % i, 'v%d' % i)\n\
         bad = [i for i in range({count}) if rc.get('key:%d' % i) != b'v%d' % i]\n\
         assert not bad, bad[:10]\n\
         print(len(rc.get_nodes()))\n"
    );
    assert_eq!(python(&script), "3", "redis-py from {port}");
}

fn dbsize(port: u16) -> i64 {
    let reply = RawConn::connect(port).cmd(&["DBSIZE"]);
    text(&reply).parse().unwrap_or(-1)
}

#[test]
fn two_ruvio_processes_and_a_redis_server_form_one_cluster() {
    if require_redis_server("cluster_binary").is_none() {
        return;
    }
    let redis = Server::redis_cluster_node();
    let (port_a, port_b) = (free_ports(1, true), free_ports(1, true));
    let (dir_a, dir_b) = (unique_dir("node-a"), unique_dir("node-b"));
    let mut a = Node::start(port_a, 1, &dir_a);
    let b = Node::start(port_b, 1, &dir_b);
    let port_r = redis.port();
    ok(port_a, &["CLUSTER", "ADDSLOTSRANGE", "0", "5460"]);
    ok(port_b, &["CLUSTER", "ADDSLOTSRANGE", "5461", "10922"]);
    ok(port_r, &["CLUSTER", "ADDSLOTSRANGE", "10923", "16383"]);
    // Before meeting, a slot of no node is not served.
    let reply = RawConn::connect(port_a).cmd(&["GET", "foo"]);
    assert_eq!(reply, b"-CLUSTERDOWN Hash slot not served\r\n");
    ok(
        port_a,
        &["CLUSTER", "MEET", "127.0.0.1", &port_r.to_string()],
    );
    ok(
        port_b,
        &["CLUSTER", "MEET", "127.0.0.1", &port_a.to_string()],
    );
    let ports = [port_a, port_b, port_r];
    wait_for("one cluster of three", || agree(&ports, 3));

    let view = cluster_nodes(port_r);
    let address = |port: u16| format!("127.0.0.1:{port}@{}", port + 10000);
    for (port, first, last) in [
        (port_a, 0, 5460),
        (port_b, 5461, 10922),
        (port_r, 10923, 16383),
    ] {
        let line = view
            .iter()
            .find(|l| format!("{}:{}@{}", l.ip, l.port, l.cport) == address(port))
            .unwrap_or_else(|| panic!("{port} in {view:?}"));
        assert!(line.has_flag("master"), "{line:?}");
        assert_eq!(line.slots, vec![(first, last)]);
        let myid = text(&RawConn::connect(port).cmd(&["CLUSTER", "MYID"]));
        assert_eq!(line.name, myid);
    }
    // CLUSTER LINKS: a link to and a link from each other node, on Ruvio's
    // nodes as on the redis-server.
    let names: Vec<String> = ports
        .iter()
        .map(|&p| text(&RawConn::connect(p).cmd(&["CLUSTER", "MYID"])))
        .collect();
    for (i, &port) in ports.iter().enumerate() {
        let mut expected = std::collections::BTreeSet::new();
        for (_, name) in names.iter().enumerate().filter(|(j, _)| *j != i) {
            expected.insert((name.clone(), "to".to_string()));
            expected.insert((name.clone(), "from".to_string()));
        }
        wait_for("each node's links", || {
            let links = cluster_links(port);
            match links == expected {
                true => Ok(()),
                false => Err(format!("{port}: {links:?}")),
            }
        });
    }
    // PUBLISH travels the bus: from a Ruvio node to the redis-server's and the
    // other Ruvio node's subscribers, and back from the redis-server.
    let mut subscribers: Vec<RawConn> = [port_a, port_r]
        .iter()
        .map(|&p| {
            let mut conn = RawConn::connect(p);
            conn.cmd(&["SUBSCRIBE", "news"]);
            conn
        })
        .collect();
    assert_eq!(
        RawConn::connect(port_b).cmd(&["PUBLISH", "news", "from-b"]),
        b":0\r\n"
    );
    let from_b = b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$6\r\nfrom-b\r\n";
    for conn in &mut subscribers {
        assert_eq!(conn.read_reply(), from_b);
    }
    // A script's PUBLISH travels it too, as redis-server's does.
    let script = "return redis.call('publish', 'news', 'script')";
    assert_eq!(
        RawConn::connect(port_b).cmd(&["EVAL", script, "0"]),
        b":0\r\n"
    );
    let from_script = b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$6\r\nscript\r\n";
    for conn in &mut subscribers {
        assert_eq!(conn.read_reply(), from_script);
    }
    assert_eq!(
        RawConn::connect(port_r).cmd(&["EVAL", script, "0"]),
        b":1\r\n"
    );
    for conn in &mut subscribers {
        assert_eq!(conn.read_reply(), from_script);
    }
    assert_eq!(
        RawConn::connect(port_r).cmd(&["PUBLISH", "news", "from-r"]),
        b":1\r\n"
    );
    let from_r = b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$6\r\nfrom-r\r\n";
    assert_eq!(subscribers[0].read_reply(), from_r);
    drop(subscribers);
    // `foo` is slot 12182, the redis-server's; `a` is slot 15495, `b` 3300.
    let reply = RawConn::connect(port_a).cmd(&["GET", "foo"]);
    assert_eq!(
        reply,
        format!("-MOVED 12182 127.0.0.1:{port_r}\r\n").as_bytes()
    );
    let reply = RawConn::connect(port_r).cmd(&["SET", "{b}x", "1"]);
    assert_eq!(
        reply,
        format!("-MOVED 3300 127.0.0.1:{port_a}\r\n").as_bytes()
    );
    let reply = RawConn::connect(port_a).cmd(&["MSET", "{b}x", "1", "{a}y", "2"]);
    assert_eq!(
        reply,
        b"-CROSSSLOT Keys in request don't hash to the same slot\r\n"
    );

    if require_redis_py("cluster_binary") {
        for port in ports {
            redis_py_round_trip(port, 600);
        }
        let sizes: Vec<i64> = ports.iter().map(|&p| dbsize(p)).collect();
        assert!(sizes.iter().all(|&n| n > 100), "keys per node: {sizes:?}");
        assert_eq!(sizes.iter().sum::<i64>(), 600, "keys per node: {sizes:?}");
    }

    // A restarted node keeps its name, epoch and slots (nodes.conf) and rejoins.
    let id_a = text(&RawConn::connect(port_a).cmd(&["CLUSTER", "MYID"]));
    let saved = std::fs::read_to_string(dir_a.join(format!("nodes-{port_a}.conf")))
        .expect("nodes.conf written");
    assert!(
        saved.contains(&format!("{id_a} 127.0.0.1:{port_a}@")),
        "{saved}"
    );
    a.restart();
    assert_eq!(
        text(&RawConn::connect(port_a).cmd(&["CLUSTER", "MYID"])),
        id_a
    );
    let mine = cluster_nodes(port_a);
    let me = mine.iter().find(|l| l.has_flag("myself")).expect("myself");
    assert_eq!(me.slots, vec![(0, 5460)]);
    wait_for("the cluster after a restart", || agree(&ports, 3));

    // The redis-server dies: both Ruvio nodes fail it, the cluster is down, and
    // keyed commands say so (even for the slots they still serve).
    drop(redis);
    for port in [port_a, port_b] {
        wait_for("the cluster down", || {
            let info = text(&RawConn::connect(port).cmd(&["CLUSTER", "INFO"]));
            let failed = cluster_nodes(port)
                .iter()
                .any(|l| l.port == port_r && l.has_flag("fail"));
            match info.lines().any(|l| l == "cluster_state:fail") && failed {
                true => Ok(()),
                false => Err(info),
            }
        });
    }
    let reply = RawConn::connect(port_a).cmd(&["GET", "{b}x"]);
    assert_eq!(reply, b"-CLUSTERDOWN The cluster is down\r\n");
    drop(b);
}

/// The operator's subcommands answer as redis-server 7.0's, errors included
/// (the node's own name written `NODE-ID` on both sides).
#[test]
fn operator_subcommands_reply_as_redis_server() {
    if require_redis_server("cluster_binary").is_none() {
        return;
    }
    let redis = Server::redis_cluster_node();
    let port = free_ports(1, true);
    let _node = Node::start(port, 1, &unique_dir("node"));
    let replies = |port: u16| {
        let mut conn = RawConn::connect(port);
        let myid = text(&conn.cmd(&["CLUSTER", "MYID"]));
        let commands: Vec<Vec<String>> = [
            "GET foo",
            "CLUSTER ADDSLOTS",
            "CLUSTER ADDSLOTS abc",
            "CLUSTER ADDSLOTS 1 1",
            "CLUSTER ADDSLOTS 16384",
            "CLUSTER ADDSLOTS 5",
            "CLUSTER ADDSLOTS 5",
            "CLUSTER ADDSLOTS 5 abc",
            "CLUSTER ADDSLOTSRANGE 1",
            "CLUSTER ADDSLOTSRANGE 3 2",
            "CLUSTER ADDSLOTSRANGE 10 12 11 13",
            "CLUSTER ADDSLOTSRANGE 10 12 11",
            "CLUSTER ADDSLOTSRANGE 5 6 x 7",
            "CLUSTER ADDSLOTSRANGE 10 12",
            "CLUSTER DELSLOTS 100",
            "CLUSTER DELSLOTS 5 5",
            "CLUSTER DELSLOTSRANGE 200 300",
            "CLUSTER DELSLOTSRANGE 10 11",
            "CLUSTER MEET 1.2.3",
            "CLUSTER MEET 127.0.0.1 abc",
            "CLUSTER MEET 127.0.0.1 70000",
            "CLUSTER MEET 127.0.0.1 5000 abc",
            "CLUSTER MEET a b c d",
            "CLUSTER MEET 1.2.3.4 -1",
            "CLUSTER FORGET abc",
            "CLUSTER FORGET NODE-ID",
            "CLUSTER COUNT-FAILURE-REPORTS abc",
            "CLUSTER COUNT-FAILURE-REPORTS NODE-ID",
            "CLUSTER SET-CONFIG-EPOCH -1",
            "CLUSTER SET-CONFIG-EPOCH abc",
            "CLUSTER SET-CONFIG-EPOCH 5",
            "CLUSTER SET-CONFIG-EPOCH 6",
            "CLUSTER BUMPEPOCH",
            "CLUSTER BUMPEPOCH x",
            "CLUSTER REPLICATE abc",
            "CLUSTER REPLICATE NODE-ID",
            "CLUSTER RESET foo",
            "CLUSTER RESET soft x",
            "CLUSTER SAVECONFIG",
            "CLUSTER SAVECONFIG x",
            "CLUSTER MYID x",
            "CLUSTER REPLICAS",
            "CLUSTER REPLICAS abc",
            "CLUSTER REPLICAS NODE-ID",
            "CLUSTER SLAVES NODE-ID",
            "CLUSTER SLAVES NODE-ID x",
            "CLUSTER COUNTKEYSINSLOT abc",
            "CLUSTER COUNTKEYSINSLOT -1",
            "CLUSTER COUNTKEYSINSLOT 16384",
            "CLUSTER COUNTKEYSINSLOT 99999999999999999999",
            "CLUSTER GETKEYSINSLOT abc 1",
            "CLUSTER GETKEYSINSLOT 1 abc",
            "CLUSTER GETKEYSINSLOT -1 1",
            "CLUSTER GETKEYSINSLOT 1 -1",
            "CLUSTER GETKEYSINSLOT 16384 abc",
            "SET foo bar",
            "CLUSTER INFO",
            "CLUSTER FLUSHSLOTS x",
            "CLUSTER FLUSHSLOTS",
            // (not INFO: redis-server recounts cluster_size lazily, in its cron)
            "CLUSTER SLOTS",
            "CLUSTER RESET HARD",
        ]
        .iter()
        .map(|c| c.split(' ').map(|w| w.replace("NODE-ID", &myid)).collect())
        .collect();
        let replies: Vec<(String, String)> = commands
            .iter()
            .map(|words| {
                let reply = conn.cmd(words);
                let shown = String::from_utf8_lossy(&reply).replace(&myid, "NODE-ID");
                (words.join(" ").replace(&myid, "NODE-ID"), shown)
            })
            .collect();
        // RESET HARD took a new name.
        let renamed = text(&conn.cmd(&["CLUSTER", "MYID"]));
        assert!(
            renamed.len() == 40 && renamed != myid,
            "{renamed} after {myid}"
        );
        replies
    };
    let theirs = replies(redis.port());
    let ours = replies(port);
    for (mine, redis) in ours.iter().zip(&theirs) {
        assert_eq!(mine, redis);
    }
}

/// A process of two shards is two nodes: they meet like any others, split the
/// slots and send each other's keys to the other with MOVED.
#[test]
fn two_shards_of_one_process_are_two_nodes() {
    let first = free_ports(2, true);
    let node = Node::start(first, 2, &unique_dir("two-shards"));
    let second = first + 1;
    ok(first, &["CLUSTER", "ADDSLOTSRANGE", "0", "8191"]);
    ok(second, &["CLUSTER", "ADDSLOTSRANGE", "8192", "16383"]);
    ok(
        second,
        &["CLUSTER", "MEET", "127.0.0.1", &first.to_string()],
    );
    wait_for("two shards, one cluster", || agree(&[first, second], 2));
    let names: Vec<String> = [first, second]
        .iter()
        .map(|&p| text(&RawConn::connect(p).cmd(&["CLUSTER", "MYID"])))
        .collect();
    assert_ne!(names[0], names[1]);
    // `foo` is slot 12182 (the second shard's), `{b}x` 3300 (the first's).
    let reply = RawConn::connect(first).cmd(&["SET", "foo", "1"]);
    assert_eq!(
        reply,
        format!("-MOVED 12182 127.0.0.1:{second}\r\n").as_bytes()
    );
    ok(second, &["SET", "foo", "1"]);
    let reply = RawConn::connect(second).cmd(&["GET", "{b}x"]);
    assert_eq!(
        reply,
        format!("-MOVED 3300 127.0.0.1:{first}\r\n").as_bytes()
    );
    // A PUBLISH reaches the other shard's subscribers once, over the bus.
    let mut subscriber = RawConn::connect(second);
    subscriber.cmd(&["SUBSCRIBE", "news"]);
    assert_eq!(
        RawConn::connect(first).cmd(&["PUBLISH", "news", "m"]),
        b":0\r\n"
    );
    assert_eq!(
        subscriber.read_reply(),
        b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$1\r\nm\r\n"
    );
    // A script's too, once.
    let script = "return redis.call('publish', 'news', 's')";
    assert_eq!(
        RawConn::connect(first).cmd(&["EVAL", script, "0"]),
        b":0\r\n"
    );
    assert_eq!(
        subscriber.read_reply(),
        b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$1\r\ns\r\n"
    );
    subscriber.expect_silence(std::time::Duration::from_millis(300));
    // Shard channels live on the slot's node too.
    let reply = RawConn::connect(first).cmd(&["SPUBLISH", "foo", "m"]);
    assert_eq!(
        reply,
        format!("-MOVED 12182 127.0.0.1:{second}\r\n").as_bytes()
    );
    assert_eq!(
        RawConn::connect(second).cmd(&["SPUBLISH", "foo", "m"]),
        b":0\r\n"
    );
    // SLOT-STATS and HELP speak of the node's slots and subcommands.
    let stats =
        RawConn::connect(first).cmd(&["CLUSTER", "SLOT-STATS", "SLOTSRANGE", "8190", "8193"]);
    let counted: Vec<i64> = match decode(&stats) {
        Value::Array(rows) => rows
            .iter()
            .map(|row| match row {
                Value::Array(pair) => match pair.first() {
                    Some(Value::Int(slot)) => *slot,
                    _ => -1,
                },
                _ => -1,
            })
            .collect(),
        other => panic!("{other:?}"),
    };
    assert_eq!(counted, vec![8190, 8191]);
    let help = RawConn::connect(first).cmd(&["CLUSTER", "HELP"]);
    assert!(
        show(&help).contains("MEET <ip> <port> [<bus-port>]"),
        "{}",
        show(&help)
    );
    for (port, shard) in [(first, 0), (second, 1)] {
        let file = node.dir.join(format!("nodes-{port}.conf"));
        let saved = std::fs::read_to_string(&file).expect("each shard's nodes.conf");
        assert!(saved.contains(&names[shard]), "{saved}");
    }
}

/// `redis-cli --cluster create` builds a cluster of the shards of one Ruvio
/// process as it builds one of redis-servers (ADDSLOTS, SET-CONFIG-EPOCH,
/// MEET, then its checks), and `redis-cli --cluster check` finds it whole.
#[test]
fn redis_cli_cluster_create_builds_a_cluster_of_shard_nodes() {
    let Some(cli) = require_redis_cli() else {
        return;
    };
    let first = free_ports(3, true);
    let _node = Node::start(first, 3, &unique_dir("create"));
    let ports = [first, first + 1, first + 2];
    let addresses: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    common::cluster_tools::create(&cli, &addresses, &[]);
    wait_for("the created cluster", || agree(&ports, 3));
    let epochs: std::collections::BTreeSet<u64> = cluster_nodes(first)
        .iter()
        .map(|l| l.config_epoch)
        .collect();
    assert_eq!(epochs.len(), 3, "a config epoch of its own for each node");
    let out = Command::new(&cli)
        .args(["--cluster", "check", &addresses[1]])
        .output()
        .expect("redis-cli");
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("[OK] All nodes agree about slots configuration."),
        "{said}"
    );
}

/// `redis-cli`, when installed (a run that requires the real Redis tools fails
/// without it).
fn require_redis_cli() -> Option<PathBuf> {
    let bin = require_redis_server("cluster_binary")?.with_file_name("redis-cli");
    if bin.is_file() {
        return Some(bin);
    }
    assert!(
        std::env::var("RUVIO_REQUIRE_REDIS").as_deref() != Ok("1"),
        "redis-cli is not installed but RUVIO_REQUIRE_REDIS=1"
    );
    eprintln!("SKIPPED a cluster_binary test: redis-cli is not installed");
    None
}

/// Bound to every interface, a node tells each client the address the client
/// reached it on (as the fixed topology does), not 127.0.0.1: a client of
/// another host must be able to follow CLUSTER SLOTS. Linux answers on all of
/// 127.0.0.0/8, so 127.0.0.2 stands for another interface.
#[test]
fn bound_to_every_interface_a_node_shows_the_address_a_client_reached() {
    let port = free_ports(1, true);
    let _node = Node::start_bound(port, 1, &unique_dir("wildcard"), "0.0.0.0", &[]);
    ok(port, &["CLUSTER", "ADDSLOTS", "7"]);
    let stream = std::net::TcpStream::connect(("127.0.0.2", port)).expect("127.0.0.2");
    let mut conn = RawConn::from_stream(stream);
    let nodes = text(&conn.cmd(&["CLUSTER", "NODES"]));
    assert!(
        nodes.starts_with(&format!(
            "{} 127.0.0.2:{port}@",
            text(&conn.cmd(&["CLUSTER", "MYID"]))
        )),
        "{nodes}"
    );
    let slots = conn.cmd(&["CLUSTER", "SLOTS"]);
    assert!(show(&slots).contains("127.0.0.2"), "{}", show(&slots));
    let nodes = text(&RawConn::connect(port).cmd(&["CLUSTER", "NODES"]));
    assert!(nodes.contains(&format!(" 127.0.0.1:{port}@")), "{nodes}");
}

/// With `cluster-announce-ip`, the other nodes reach a node at that address:
/// it goes in the bus messages' header, as redis-server sends it. (Linux
/// answers on all of 127.0.0.0/8: 127.0.0.2 stands for another address of a
/// node bound to every interface.)
#[test]
fn other_nodes_reach_a_node_at_its_announced_ip() {
    if require_redis_server("cluster_binary").is_none() {
        return;
    }
    let redis = Server::redis_cluster_node();
    let port = free_ports(1, true);
    let extra = ["--cluster-announce-ip", "127.0.0.2"];
    let _node = Node::start_bound(port, 1, &unique_dir("announce"), "0.0.0.0", &extra);
    ok(
        port,
        &["CLUSTER", "MEET", "127.0.0.1", &redis.port().to_string()],
    );
    let name = text(&RawConn::connect(port).cmd(&["CLUSTER", "MYID"]));
    wait_for("the redis-server reaches the node at 127.0.0.2", || {
        let view = cluster_nodes(redis.port());
        match view.iter().find(|l| l.name == name) {
            Some(l) if l.ip == "127.0.0.2" && l.connected && !l.has_flag("handshake") => Ok(()),
            _ => Err(format!("{view:?}")),
        }
    });
}

/// `cluster-allow-reads-when-down` and `cluster-require-full-coverage` as
/// redis-server applies them (CONFIG SET), on a node serving slot 0 alone.
#[test]
fn reads_when_down_and_partial_coverage_as_redis_server() {
    if require_redis_server("cluster_binary").is_none() {
        return;
    }
    let redis = Server::redis_cluster_node();
    let port = free_ports(1, true);
    let _node = Node::start(port, 1, &unique_dir("coverage"));
    // `{06S}` is slot 0; `foo` 12182, served by no node.
    let replies = |port: u16| {
        let mut conn = RawConn::connect(port);
        let mut run = |words: &str| {
            let words: Vec<&str> = words.split(' ').collect();
            (words.join(" "), show(&conn.cmd(&words)))
        };
        let mut seen = vec![
            run("CLUSTER ADDSLOTS 0"),
            run("GET {06S}"),
            run("CONFIG SET cluster-allow-reads-when-down yes"),
            run("GET {06S}"),
            run("SET {06S} 1"),
            run("CONFIG SET cluster-require-full-coverage no"),
        ];
        // redis-server recounts its state in its cron (and not in its first
        // two seconds).
        wait_for("the cluster up without full coverage", || {
            let info = text(&RawConn::connect(port).cmd(&["CLUSTER", "INFO"]));
            match info.lines().any(|l| l == "cluster_state:ok") {
                true => Ok(()),
                false => Err(info),
            }
        });
        let run = |words: &str| {
            let words: Vec<&str> = words.split(' ').collect();
            (words.join(" "), show(&RawConn::connect(port).cmd(&words)))
        };
        seen.extend([
            run("SET {06S} 1"),
            run("GET {06S}"),
            run("GET foo"),
            run("SET foo 1"),
        ]);
        seen
    };
    assert_eq!(replies(port), replies(redis.port()));
}

/// MULTI's queued commands, WATCH and a script's undeclared keys are checked
/// against the node's slots as the bus gave them, with redis-server's replies:
/// a Ruvio node and a redis-server node, each serving 0-8191 in a cluster with
/// a redis-server serving 8192-16383, answer the same commands alike (the
/// other node's port read as `PEER`).
#[test]
fn transactions_and_scripts_follow_the_node_slots_as_redis_server() {
    if require_redis_server("cluster_binary").is_none() {
        return;
    }
    let side = SideBySide::start(&unique_dir("multi"));
    let pairs = side.pairs();
    // `{06S}` and `bar` (5061) are the tested node's, `foo` (12182) the peer's.
    let script = [
        "MULTI",
        "SET foo 1",
        "SET {06S} 1",
        "EXEC",
        "MULTI",
        "MSET {06S} 1 foo 2",
        "EXEC",
        "MULTI",
        "SET {06S}a 1",
        "GET {06S}a",
        "EXEC",
        "MULTI",
        "SET {06S}a 1",
        "SET bar 1",
        "EXEC",
        "MULTI",
        "PING",
        "EXEC",
        "WATCH foo",
        "WATCH {06S}a",
        "UNWATCH",
        "EVAL return(redis.call('get',KEYS[1])) 1 foo",
        "EVAL return(redis.call('set','foo','1')) 0",
        "EVAL return(redis.call('set','{06S}z','1')) 0",
        "EVAL return(redis.call('get','foo')) 1 {06S}",
        "EVAL return(redis.call('get','bar')) 1 {06S}",
    ];
    let replies = |(tested, peer): (u16, u16)| {
        let mut conn = RawConn::connect(tested);
        script
            .iter()
            .map(|line| {
                let words: Vec<&str> = line.split(' ').collect();
                let reply = show(&conn.cmd(&words)).replace(&peer.to_string(), "PEER");
                format!("{line} -> {reply}")
            })
            .collect::<Vec<String>>()
    };
    assert_eq!(replies(pairs[0]), replies(pairs[1]));
}

/// CLUSTER REPLICAS / SLAVES of a Ruvio node that a redis-server node replicates
/// (CLUSTER REPLICATE), asked of both: the same one line (the replica's name,
/// flags, master and slots; the times and link state are each node's own), and
/// Redis's error for a node that is itself a replica.
#[test]
fn replicas_of_a_node_are_listed_as_redis_server_lists_them() {
    if require_redis_server("cluster_binary").is_none() {
        return;
    }
    let redis = Server::redis_cluster_node();
    let port = free_ports(1, true);
    let _node = Node::start(port, 1, &unique_dir("replicated"));
    let port_r = redis.port();
    ok(port, &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
    ok(port, &["CLUSTER", "MEET", "127.0.0.1", &port_r.to_string()]);
    wait_for("one cluster of two", || agree(&[port, port_r], 2));
    let ruvio_id = text(&RawConn::connect(port).cmd(&["CLUSTER", "MYID"]));
    let redis_id = text(&RawConn::connect(port_r).cmd(&["CLUSTER", "MYID"]));
    ok(port_r, &["CLUSTER", "REPLICATE", &ruvio_id]);
    let listed = |asked: u16, verb: &str| -> Result<Vec<NodeLine>, String> {
        let reply = RawConn::connect(asked).cmd(&["CLUSTER", verb, &ruvio_id]);
        let lines: Vec<NodeLine> = String::from_utf8_lossy(&reply)
            .split("\r\n")
            .filter(|l| l.len() > 40 && !l.starts_with('$') && !l.starts_with('*'))
            .filter_map(|l| ruvio_server::cluster::nodes_file::parse_line(l).ok())
            .collect();
        match lines.as_slice() {
            [one] if one.has_flag("slave") && one.master.as_deref() == Some(ruvio_id.as_str()) => {
                Ok(lines)
            }
            _ => Err(format!(
                "{verb} from {asked}: {}",
                String::from_utf8_lossy(&reply)
            )),
        }
    };
    wait_for("both nodes list the replica", || {
        listed(port, "REPLICAS")?;
        listed(port_r, "REPLICAS").map(|_| ())
    });
    for verb in ["REPLICAS", "SLAVES"] {
        let (ours, theirs) = (listed(port, verb).unwrap(), listed(port_r, verb).unwrap());
        let shown = |l: &NodeLine| {
            let flags: Vec<&str> = l.flags.iter().copied().filter(|f| *f != "myself").collect();
            (
                l.name.clone(),
                flags,
                l.master.clone(),
                l.slots.clone(),
                l.port,
            )
        };
        assert_eq!(shown(&ours[0]), shown(&theirs[0]), "{verb}");
        assert_eq!(ours[0].name, redis_id);
    }
    for asked in [port, port_r] {
        assert_eq!(
            RawConn::connect(asked).cmd(&["CLUSTER", "REPLICAS", &redis_id]),
            b"-ERR The specified node is not a master\r\n"
        );
    }
}
