//! Forward mode as one node of a Redis Cluster (`--port-mode forward
//! --cluster-enabled yes`): the process is one node (one name, one bus port,
//! one nodes.conf) whose slots its shards hold inside it (docs/cluster.md).
//!
//! - Three Ruvio processes of two shards each and a redis-server node, built
//!   into one cluster by `redis-cli --cluster create`: every Ruvio process
//!   answers with one name and one bus port whichever shard a connection
//!   lands on, writes one nodes.conf, and all four agree on CLUSTER NODES;
//!   redis-py's RedisCluster writes and reads 2,000 keys over every slot
//!   range; a plain client gets `-MOVED` and `-CROSSSLOT` byte for byte as
//!   from the redis-server, on either shard (a MULTI's queued command, a shard
//!   channel's SSUBSCRIBE and SPUBLISH too,
//!   EXEC then aborting; a queue of two slots' commands at EXEC, WATCH of
//!   another node's key and of two slots); COUNTKEYSINSLOT and
//!   GETKEYSINSLOT find a slot's keys from either shard; PUBLISH on either
//!   shard reaches every node's subscribers over the bus, once.
//! - CLUSTER subcommands that change the node, sent to either shard, change
//!   the one node, and a key of the new slots is served at once on both; a
//!   script reaches undeclared keys of the node's slots from either shard and
//!   is refused a slot the node does not serve; the node restarted is the same
//!   node from its nodes.conf.
//! - SETSLOT's walk of a slot out of a forward-mode node and one into it
//!   (`-ASK`, `-TRYAGAIN`, ASKING, the errors), sent to either shard, answers
//!   as a redis-server node's.
//! - SETSLOT NODE giving away a slot the node still holds keys of, on
//!   either shard, is refused with redis-server's error, from either shard,
//!   and passes right after MIGRATE moved the slot's last key.
//! - `redis-cli --cluster reshard` out of a forward-mode node into another and
//!   back while redis-py's RedisCluster writes: every acknowledged write reads
//!   back, every key of a moved slot is on its new owner alone, and `redis-cli
//!   --cluster check` finds the cluster whole.
//! - A command asked of the shard holding an importing slot's keys: under
//!   `always` a write answers once synced there; a BLPOP parks there and
//!   waits as on redis-server (served, timed out, its client gone).

mod common;

use common::bus_node::wait_for;
use common::cluster_process::{agree, cluster_nodes, ok, text, Node};
use common::cluster_tools::{
    all_written_present, check_whole, myid, redis_cli, reshard, setslot_walk, start_writer,
    stop_writer,
};
use common::*;

/// Connections to `port`, one on each of the process's two shards (CLIENT
/// INFO's `io-thread` names the shard a connection landed on).
fn one_on_each_shard(port: u16) -> [RawConn; 2] {
    try_one_on_each_shard(port)
        .unwrap_or_else(|| panic!("no connection landed on each shard of {port}"))
}

/// [`one_on_each_shard`], or `None` when 200 connections did not reach both
/// (a shard of a process just started may not listen yet).
fn try_one_on_each_shard(port: u16) -> Option<[RawConn; 2]> {
    let mut found: [Option<RawConn>; 2] = [None, None];
    for _ in 0..200 {
        let mut conn = RawConn::connect(port);
        let info = text(&conn.cmd(&["CLIENT", "INFO"]));
        let shard = info
            .split_whitespace()
            .find_map(|field| field.strip_prefix("io-thread="))
            .and_then(|n| n.parse::<usize>().ok());
        if let Some(slot) = shard.and_then(|s| found.get_mut(s)) {
            slot.get_or_insert(conn);
        }
        if let [Some(_), Some(_)] = &found {
            let [a, b] = found;
            return Some([a?, b?]);
        }
    }
    None
}

/// A key whose slot `port` serves (CLUSTER NODES's slot ranges of the node).
fn key_served_by(port: u16, tag: &str) -> String {
    let view = cluster_nodes(port);
    let me = view.iter().find(|l| l.has_flag("myself")).expect("myself");
    (0..)
        .map(|i| format!("{tag}:{i}"))
        .find(|key| {
            let slot = text(&RawConn::connect(port).cmd(&["CLUSTER", "KEYSLOT", key]));
            let slot: u16 = slot.parse().expect("a slot");
            me.slots.iter().any(|&(a, b)| (a..=b).contains(&slot))
        })
        .expect("a key")
}

#[test]
fn forward_mode_processes_are_one_node_each_in_a_cluster_with_redis_server() {
    let Some(cli) = redis_cli("cluster_forward_node") else {
        return;
    };
    let redis = Server::redis_cluster_node();
    let ruvio_ports: Vec<u16> = (0..3).map(|_| free_ports(2, true)).collect();
    let _nodes: Vec<Node> = ruvio_ports
        .iter()
        .map(|&port| Node::start_forward(port, 2, &unique_dir("fwd-node")))
        .collect();
    let mut ports = ruvio_ports.clone();
    ports.push(redis.port());

    // One node per process: one name whichever shard answers, one bus port,
    // one nodes.conf.
    for (node, &port) in _nodes.iter().zip(&ruvio_ports) {
        let [mut first, mut second] = one_on_each_shard(port);
        let name = text(&first.cmd(&["CLUSTER", "MYID"]));
        assert_eq!(text(&second.cmd(&["CLUSTER", "MYID"])), name);
        assert!(std::net::TcpStream::connect(("127.0.0.1", port + 10000)).is_ok());
        assert!(std::net::TcpStream::connect(("127.0.0.1", port + 10001)).is_err());
        let files: Vec<String> = std::fs::read_dir(&node.dir)
            .expect("the node's directory")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|name| name.ends_with(".conf"))
            .collect();
        assert_eq!(files, [format!("nodes-{port}.conf")]);
        let saved = std::fs::read_to_string(node.dir.join(&files[0])).expect("nodes.conf");
        assert!(saved.contains(&name), "{saved}");
        let info = text(&first.cmd(&["INFO", "cluster"]));
        assert!(info.contains("cluster_enabled:1"), "{info}");
        let hello = show(&second.cmd(&["HELLO", "2"]));
        assert!(
            hello.contains("$4\\r\\nmode\\r\\n$7\\r\\ncluster"),
            "{hello}"
        );
    }

    let addresses: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    common::cluster_tools::create(&cli, &addresses, &[]);
    wait_for("the created cluster", || agree(&ports, 4));
    check_whole(&cli, ruvio_ports[1]).unwrap_or_else(|e| panic!("{e}"));
    // Each shard of a process shows the same view of the cluster.
    for &port in &ruvio_ports {
        let [mut first, mut second] = one_on_each_shard(port);
        let lines = |conn: &mut RawConn| {
            let mut lines: Vec<String> = text(&conn.cmd(&["CLUSTER", "NODES"]))
                .lines()
                .map(|l| {
                    l.split(' ')
                        .filter(|w| !w.chars().all(|c| c.is_ascii_digit()))
                        .collect()
                })
                .collect();
            lines.sort();
            lines
        };
        assert_eq!(lines(&mut first), lines(&mut second), "{port}");
    }

    // redis-py's RedisCluster over every slot range, from a Ruvio node.
    let script = format!(
        "from redis.cluster import RedisCluster\n\
         rc = RedisCluster(host='127.0.0.1', port={})\n\
         for i in range(2000): rc.set('key:%d' % i, 'v%d' % i)\n\
         bad = [i for i in range(2000) if rc.get('key:%d' % i) != b'v%d' % i]\n\
         assert not bad, bad[:10]\n\
         print(len(rc.get_nodes()))\n",
        ruvio_ports[0]
    );
    assert_eq!(python(&script), "4");
    let total: i64 = ports
        .iter()
        .map(|&p| {
            text(&RawConn::connect(p).cmd(&["DBSIZE"]))
                .parse::<i64>()
                .unwrap_or(-1)
        })
        .sum();
    assert_eq!(total, 2000);

    // A plain client: -MOVED and -CROSSSLOT as the redis-server answers them,
    // from either shard of a Ruvio node.
    let owner = ruvio_ports[0];
    let key = key_served_by(owner, "moved");
    let from_redis = RawConn::connect(redis.port()).cmd(&["GET", &key]);
    assert!(from_redis.starts_with(b"-MOVED "), "{}", show(&from_redis));
    let crossing = ["MSET", "a", "1", "b", "2"];
    let crossing_redis = RawConn::connect(redis.port()).cmd(&crossing);
    let shard_channel = ["SPUBLISH", key.as_str(), "hello"];
    let shard_channel_redis = RawConn::connect(redis.port()).cmd(&shard_channel);
    let ssubscribe = ["SSUBSCRIBE", key.as_str()];
    let ssubscribe_redis = RawConn::connect(redis.port()).cmd(&ssubscribe);
    assert!(ssubscribe_redis.starts_with(b"-MOVED "));
    for mut conn in one_on_each_shard(ruvio_ports[1]) {
        assert_eq!(conn.cmd(&["GET", &key]), from_redis);
        assert_eq!(conn.cmd(&crossing), crossing_redis);
        assert_eq!(show(&conn.cmd(&shard_channel)), show(&shard_channel_redis));
        assert_eq!(show(&conn.cmd(&ssubscribe)), show(&ssubscribe_redis));
    }
    // MULTI: a queued command of another node's slot is redirected and EXEC
    // aborts, as on the redis-server.
    let transaction = |conn: &mut RawConn| -> Vec<String> {
        let words: [&[&str]; 3] = [&["MULTI"], &["SET", &key, "1"], &["EXEC"]];
        words.iter().map(|w| show(&conn.cmd(w))).collect()
    };
    let expected = transaction(&mut RawConn::connect(redis.port()));
    assert!(expected[2].contains("EXECABORT"), "{expected:?}");
    for mut conn in one_on_each_shard(ruvio_ports[1]) {
        assert_eq!(transaction(&mut conn), expected);
    }
    // The queue as a whole: commands of two slots of the node make EXEC
    // answer -CROSSSLOT (the keys on two shards of the process or one); WATCH
    // of another node's key is redirected, of two slots refused; as on the
    // redis-server with two slots of its own.
    let whole_queue = |port: u16, conn: &mut RawConn| -> Vec<String> {
        let (a, b) = (key_served_by(port, "p"), key_served_by(port, "q"));
        assert_ne!(slot_of(&a), slot_of(&b));
        let words: [&[&str]; 5] = [
            &["MULTI"],
            &["SET", &a, "1"],
            &["SET", &b, "2"],
            &["EXEC"],
            &["WATCH", &a, &b],
        ];
        words.iter().map(|w| show(&conn.cmd(w))).collect()
    };
    let expected = whole_queue(redis.port(), &mut RawConn::connect(redis.port()));
    assert!(expected[3].contains("CROSSSLOT"), "{expected:?}");
    let watch_moved = RawConn::connect(redis.port()).cmd(&["WATCH", &key]);
    assert!(
        watch_moved.starts_with(b"-MOVED "),
        "{}",
        show(&watch_moved)
    );
    for mut conn in one_on_each_shard(ruvio_ports[1]) {
        assert_eq!(whole_queue(ruvio_ports[1], &mut conn), expected);
        assert_eq!(show(&conn.cmd(&["WATCH", &key])), show(&watch_moved));
    }
    // The redis-server's keys are sent there too.
    let theirs = key_served_by(redis.port(), "theirs");
    let moved = RawConn::connect(ruvio_ports[2]).cmd(&["SET", &theirs, "x"]);
    let expected = format!("-MOVED {} 127.0.0.1:{}\r\n", slot_of(&theirs), redis.port());
    assert_eq!(show(&moved), show(expected.as_bytes()));

    // PUBLISH travels the bus: from either shard of a Ruvio node to the
    // subscribers of every shard of another and of the redis-server, once
    // each, and back from the redis-server.
    let mut subscribers: Vec<RawConn> = one_on_each_shard(ruvio_ports[2]).into();
    subscribers.push(RawConn::connect(redis.port()));
    for conn in &mut subscribers {
        conn.cmd(&["SUBSCRIBE", "news"]);
    }
    let message = |text: &str| {
        format!(
            "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n${}\r\n{text}\r\n",
            text.len()
        )
    };
    for (i, mut publisher) in one_on_each_shard(ruvio_ports[1]).into_iter().enumerate() {
        let text = format!("from-shard-{i}");
        assert_eq!(publisher.cmd(&["PUBLISH", "news", &text]), b":0\r\n");
        for conn in &mut subscribers {
            assert_eq!(show(&conn.read_reply()), show(message(&text).as_bytes()));
        }
        // A script's PUBLISH travels the bus too, as redis-server's does.
        let text = format!("script-on-shard-{i}");
        let script = format!("return redis.call('publish', 'news', '{text}')");
        assert_eq!(publisher.cmd(&["EVAL", &script, "0"]), b":0\r\n");
        for conn in &mut subscribers {
            assert_eq!(show(&conn.read_reply()), show(message(&text).as_bytes()));
        }
    }
    let reply = RawConn::connect(redis.port()).cmd(&["PUBLISH", "news", "from-r"]);
    assert_eq!(reply, b":1\r\n");
    for conn in &mut subscribers {
        assert_eq!(show(&conn.read_reply()), show(message("from-r").as_bytes()));
    }
    for conn in &mut subscribers {
        conn.expect_silence(std::time::Duration::from_millis(300));
    }
    drop(subscribers);

    // A slot's keys, counted and listed from either shard of their node.
    for &port in &ruvio_ports {
        let key = key_served_by(port, "counted");
        let slot = slot_of(&key).to_string();
        ok(port, &["SET", &key, "1"]);
        for mut conn in one_on_each_shard(port) {
            let count = conn.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot]);
            assert_ne!(count, b":0\r\n", "{port} slot {slot}");
            let listed = show(&conn.cmd(&["CLUSTER", "GETKEYSINSLOT", &slot, "1000"]));
            assert!(listed.contains(&key), "{port}: {listed}");
        }
    }
}

/// The slot of `key` (Redis's CRC16 rule).
fn slot_of(key: &str) -> u16 {
    ruvio_engine::slot::key_slot(key.as_bytes())
}

#[test]
fn cluster_changes_sent_to_either_shard_change_the_one_node() {
    if redis_cli("cluster_forward_node").is_none() {
        return;
    }
    let port = free_ports(2, true);
    let node = Node::start_forward(port, 2, &unique_dir("fwd-admin"));
    let [mut first, mut second] = one_on_each_shard(port);
    // No slots yet: not served, on either shard.
    for conn in [&mut first, &mut second] {
        assert_eq!(
            conn.cmd(&["GET", "foo"]),
            b"-CLUSTERDOWN Hash slot not served\r\n"
        );
    }
    // Half the slots from one shard, the other half from the other: one node
    // holds them all and serves keys of both shards' ranges at once.
    assert_eq!(
        first.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "8191"]),
        b"+OK\r\n"
    );
    assert_eq!(
        second.cmd(&["CLUSTER", "ADDSLOTSRANGE", "8192", "16383"]),
        b"+OK\r\n"
    );
    let view = cluster_nodes(port);
    assert_eq!(view.len(), 1, "{view:?}");
    assert_eq!(view[0].slots, vec![(0, 16383)]);
    assert_eq!(view[0].name, myid(port));
    for (i, conn) in [&mut first, &mut second].into_iter().enumerate() {
        for key in ["foo", "bar", "{a}", "{b}", "zap"] {
            let value = format!("{key}-{i}");
            assert_eq!(conn.cmd(&["SET", key, &value]), b"+OK\r\n", "{key}");
            assert_eq!(text(&conn.cmd(&["GET", key])), value);
        }
    }
    // DELSLOTS from one shard: the other answers by it from its next command.
    let slot = slot_of("foo").to_string();
    assert_eq!(first.cmd(&["CLUSTER", "DELSLOTS", &slot]), b"+OK\r\n");
    wait_for("the other shard routes by the change", || {
        match second.cmd(&["GET", "foo"]) {
            reply if reply == b"-CLUSTERDOWN Hash slot not served\r\n" => Ok(()),
            reply => Err(show(&reply)),
        }
    });
    // A script's undeclared key: one of the node's slots is served from
    // either shard, wherever inside the node it lives; one of a slot the
    // node does not serve is refused, as by a redis-server node.
    for conn in [&mut first, &mut second] {
        let reply = conn.cmd(&["EVAL", "return redis.call('GET', 'bar')", "0"]);
        assert_eq!(text(&reply), "bar-1");
        let reply = conn.cmd(&["EVAL", "return redis.call('GET', 'foo')", "0"]);
        assert!(
            reply.starts_with(b"-ERR Script attempted to access a non local key in a cluster node"),
            "{}",
            show(&reply)
        );
    }
    // The errors of a subcommand asked of shard 0 come back as its own.
    for conn in [&mut first, &mut second] {
        let reply = conn.cmd(&["CLUSTER", "ADDSLOTS", "0"]);
        assert_eq!(show(&reply), show(b"-ERR Slot 0 is already busy\r\n"));
        let reply = conn.cmd(&["CLUSTER", "SETSLOT", "x", "STABLE"]);
        assert_eq!(show(&reply), show(b"-ERR Invalid or out of range slot\r\n"));
        let reply = conn.cmd(&["CLUSTER", "REPLICATE", &myid(port)]);
        assert_eq!(show(&reply), show(b"-ERR Can't replicate myself\r\n"));
    }
    // Whole again, then restarted: the same node from its nodes.conf, and
    // both shards route by its slots.
    assert_eq!(second.cmd(&["CLUSTER", "ADDSLOTS", &slot]), b"+OK\r\n");
    let (name, slots) = (myid(port), cluster_nodes(port)[0].slots.clone());
    assert_eq!(slots, vec![(0, 16383)]);
    drop((first, second));
    let mut node = node;
    node.restart();
    assert_eq!(myid(port), name);
    assert_eq!(cluster_nodes(port)[0].slots, slots);
    wait_for("both shards route by the node's slots", || {
        let Some(mut conns) = try_one_on_each_shard(port) else {
            return Err("a shard does not listen yet".into());
        };
        let replies: Vec<Vec<u8>> = conns
            .iter_mut()
            .map(|conn| conn.cmd(&["SET", "bar", "1"]))
            .collect();
        match replies.iter().all(|r| r == b"+OK\r\n") {
            true => Ok(()),
            false => Err(format!(
                "{:?}",
                replies.iter().map(|r| show(r)).collect::<Vec<_>>()
            )),
        }
    });
}

/// The slot ranges `port`'s node serves, from its own CLUSTER NODES line.
fn own_slots(port: u16) -> Vec<(u16, u16)> {
    let view = cluster_nodes(port);
    view.into_iter()
        .find(|l| l.has_flag("myself"))
        .map(|l| l.slots)
        .unwrap_or_default()
}

#[test]
fn redis_cli_reshards_between_forward_mode_nodes_while_a_client_writes() {
    let Some(cli) = redis_cli("cluster_forward_node") else {
        return;
    };
    let (port_a, port_b) = (free_ports(2, true), free_ports(2, true));
    let _a = Node::start_forward(port_a, 2, &unique_dir("fwd-reshard-a"));
    let _b = Node::start_forward(port_b, 2, &unique_dir("fwd-reshard-b"));
    common::cluster_process::halves(port_a, port_b);
    let seeded = format!(
        "from redis.cluster import RedisCluster\n\
         rc = RedisCluster(host='127.0.0.1', port={port_a})\n\
         for i in range(2000): rc.set('seed:%d' % i, 's%d' % i)\n"
    );
    python(&seeded);
    let stop = unique_dir("fwd-reshard-writer").join("stop");
    let writer = start_writer(port_a, &stop);
    // Out of A (slots held by A's shard 0) into B (where its shard 0 takes
    // them), then part of them back: both directions, both nodes' shards.
    reshard(&cli, port_a, port_b, 300);
    reshard(&cli, port_b, port_a, 120);
    let written = stop_writer(writer, &stop);
    all_written_present(port_b, written);
    let read_back = format!(
        "from redis.cluster import RedisCluster\n\
         rc = RedisCluster(host='127.0.0.1', port={port_b})\n\
         bad = [i for i in range(2000) if rc.get('seed:%d' % i) != b's%d' % i]\n\
         assert not bad, bad[:10]\n"
    );
    python(&read_back);
    wait_for("the cluster whole", || check_whole(&cli, port_a));
    check_whole(&cli, port_b).unwrap_or_else(|e| panic!("{e}"));
    // Every key of the slots that moved is on its owner alone, whichever
    // shard of the other node is asked.
    let (slots_a, slots_b) = (own_slots(port_a), own_slots(port_b));
    let serves =
        |ranges: &[(u16, u16)], slot: u16| ranges.iter().any(|&(x, y)| (x..=y).contains(&slot));
    assert!(
        serves(&slots_b, 299) && !serves(&slots_a, 299),
        "{slots_a:?} {slots_b:?}"
    );
    let [mut a0, mut a1] = one_on_each_shard(port_a);
    let [mut b0, mut b1] = one_on_each_shard(port_b);
    let mut total = 0;
    for slot in 0..300u16 {
        let slot_text = slot.to_string();
        let count = |conn: &mut RawConn| -> i64 {
            text(&conn.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot_text]))
                .parse()
                .expect("a count")
        };
        let (on_a, on_a_too) = (count(&mut a0), count(&mut a1));
        let (on_b, on_b_too) = (count(&mut b0), count(&mut b1));
        assert_eq!((on_a, on_b), (on_a_too, on_b_too), "slot {slot}");
        match serves(&slots_a, slot) {
            true => assert_eq!(on_b, 0, "slot {slot} left on B"),
            false => assert_eq!(on_a, 0, "slot {slot} left on A"),
        }
        total += on_a + on_b;
    }
    assert!(total > 0);
    let sizes: i64 = [port_a, port_b]
        .iter()
        .map(|&p| {
            text(&RawConn::connect(p).cmd(&["DBSIZE"]))
                .parse::<i64>()
                .unwrap_or(-1)
        })
        .sum();
    assert_eq!(sizes, 2000 + written as i64);
}

/// Slot 0 held by shard 0 and slot 12182 (importing) by shard 1 of the
/// forward-mode node: each walk runs on a connection to one shard, on a node
/// of its own, against one redis-server node's answers.
#[test]
fn slots_in_flight_answer_as_redis_server_from_either_shard() {
    if require_redis_server("cluster_forward_node").is_none() {
        return;
    }
    let (redis, redis_peer) = (Server::redis_cluster_node(), Server::redis_cluster_node());
    common::cluster_process::halves(redis.port(), redis_peer.port());
    let expected = setslot_walk(
        &mut RawConn::connect(redis.port()),
        redis.port(),
        redis_peer.port(),
    );
    for shard in 0..2 {
        let peer = Server::redis_cluster_node();
        let port = free_ports(2, true);
        let _node = Node::start_forward(port, 2, &unique_dir("fwd-in-flight"));
        common::cluster_process::halves(port, peer.port());
        let mut conn = one_on_each_shard(port)
            .into_iter()
            .nth(shard)
            .expect("a shard");
        let walked = setslot_walk(&mut conn, port, peer.port());
        assert_eq!(walked.0, expected.0, "from shard {shard}");
        assert_eq!((&walked.1, &walked.2), (&expected.1, &expected.2));
    }
}

/// SETSLOT NODE of a slot with keys, `tested` serving 0-11999 beside `peer`
/// (a forward-mode node of two shards holds 0-8191 on shard 0, 8192-11999 on
/// shard 1): slots 10 and 9000 each refused while it holds a key (MIGRATING
/// or not) and given away once the key is deleted; slot 9001 given away
/// right after MIGRATE moved its key (as `redis-cli --cluster reshard` does).
/// Each line with its reply, the peer read as PEER and PEERID.
fn setslot_node_with_keys(conn: &mut RawConn, tested: u16, peer: u16) -> Vec<String> {
    let (me, them) = (myid(tested), myid(peer));
    let mut on_peer = RawConn::connect(peer);
    let mut seen = Vec::new();
    for slot in [10u16, 9000, 9001] {
        let key = (0u32..)
            .map(|n| format!("{{{n}}}k"))
            .find(|key| key_slot(key.as_bytes()) == slot)
            .unwrap();
        let (slot, port) = (slot.to_string(), peer.to_string());
        let mut lines = vec![
            vec!["SET", key.as_str(), "x"],
            vec!["CLUSTER", "SETSLOT", &slot, "NODE", &them],
            vec!["CLUSTER", "SETSLOT", &slot, "MIGRATING", &them],
            vec!["CLUSTER", "SETSLOT", &slot, "NODE", &them],
        ];
        match slot.as_str() {
            "9001" => lines.extend([
                vec!["@peer", "CLUSTER", "SETSLOT", &slot, "IMPORTING", &me],
                vec!["MIGRATE", "127.0.0.1", &port, key.as_str(), "0", "5000"],
                vec!["CLUSTER", "SETSLOT", &slot, "NODE", &them, "at once"],
            ]),
            _ => lines.extend([
                vec!["DEL", key.as_str()],
                vec!["CLUSTER", "SETSLOT", &slot, "NODE", &them],
            ]),
        }
        for mut line in lines {
            let at_once = line.last() == Some(&"at once");
            if at_once {
                line.pop();
            } else if line[0] == "CLUSTER" {
                // Another shard's keys as it published them on its last tick
                // (10 ms); MIGRATE publishes its slot at once.
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            let reply = match line[0] {
                "@peer" => on_peer.cmd(&line[1..]),
                _ => conn.cmd(&line),
            };
            let reply = show(&reply).replace(&port, "PEER");
            let line = line.join(" ").replace(&them, "PEERID").replace(&me, "MYID");
            seen.push(format!("{} -> {reply}", line.replace(&port, "PEER")));
        }
    }
    seen
}

/// Redis refuses SETSLOT NODE to another node while the node holds keys of
/// the slot (MIGRATING or not): a forward-mode node does too for a slot
/// whose keys are on shard 1, whichever shard the client is on.
#[test]
fn setslot_node_refuses_a_slot_with_keys_on_either_shard() {
    if require_redis_server("cluster_forward_node").is_none() {
        return;
    }
    let (redis, redis_peer) = (Server::redis_cluster_node(), Server::redis_cluster_node());
    common::cluster_process::split_at(redis.port(), redis_peer.port(), 12000);
    let expected = setslot_node_with_keys(
        &mut RawConn::connect(redis.port()),
        redis.port(),
        redis_peer.port(),
    );
    assert!(
        expected[1].contains("while I still hold keys for this hash slot"),
        "{expected:?}"
    );
    for shard in 0..2 {
        let peer = Server::redis_cluster_node();
        let port = free_ports(2, true);
        let _node = Node::start_forward(port, 2, &unique_dir("fwd-setslot-keys"));
        common::cluster_process::split_at(port, peer.port(), 12000);
        let mut conn = one_on_each_shard(port)
            .into_iter()
            .nth(shard)
            .expect("a shard");
        let seen = setslot_node_with_keys(&mut conn, port, peer.port());
        assert_eq!(seen, expected, "from shard {shard}");
    }
}

/// A hash tag (`t<n>`) whose slot is `slot`, as `port`'s CLUSTER KEYSLOT says.
fn tag_of_slot(port: u16, slot: &str) -> String {
    (0..)
        .map(|i| format!("t{i}"))
        .find(|t| text(&RawConn::connect(port).cmd(&["CLUSTER", "KEYSLOT", t])) == slot)
        .expect("a tag of the slot")
}

/// Under `--durability always` a write to a slot importing into the node,
/// sent after ASKING to the shard that does not hold the slot's keys (so it
/// is asked of the other shard), is answered only once its record is synced:
/// with shard 1's fdatasyncs held 200 ms (`RUVIO_FAULT=wal:slow-fsync-1`,
/// debug builds) each such answer takes that long, while a write of shard 0's
/// own key answers at once; after a SIGKILL every key is there again.
#[test]
fn an_asked_write_under_always_is_answered_once_synced() {
    if require_redis_server("cluster_forward_node").is_none() || !cfg!(debug_assertions) {
        return;
    }
    let peer = Server::redis_cluster_node();
    let dir = unique_dir("fwd-asked-always");
    let dir_text = dir.to_str().expect("a UTF-8 path").to_string();
    let bus = free_ports(1, false).to_string();
    let start = |fault: &str| {
        let flags = [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-port",
            bus.as_str(),
            "--dir",
            dir_text.as_str(),
            "--durability",
            "always",
        ];
        Server::ruvio_with_env(PortMode::Forward, 2, &flags, &[("RUVIO_FAULT", fault)])
    };
    let node = start("wal:slow-fsync-1");
    common::cluster_process::halves(node.port(), peer.port());
    // 12182 is the peer's, and its keys would be shard 1's in this node.
    let slot = "12182";
    ok(
        node.port(),
        &["CLUSTER", "SETSLOT", slot, "IMPORTING", &myid(peer.port())],
    );
    let tag = tag_of_slot(node.port(), slot);
    let [mut on_shard_0, _] = one_on_each_shard(node.port());
    let own = key_served_by(node.port(), "own");
    let timed = |conn: &mut RawConn, words: &[&str]| {
        let started = std::time::Instant::now();
        assert_eq!(conn.cmd(words), b"+OK\r\n");
        started.elapsed()
    };
    for i in 0..3 {
        let key = format!("{{{tag}}}:{i}");
        assert_eq!(on_shard_0.cmd(&["ASKING"]), b"+OK\r\n");
        let took = timed(&mut on_shard_0, &["SET", &key, "v"]);
        assert!(
            took.as_millis() >= 150,
            "answered before the sync: {took:?}"
        );
    }
    let took = timed(&mut on_shard_0, &["SET", &own, "v"]);
    assert!(
        took.as_millis() < 150,
        "shard 0's own write waited: {took:?}"
    );
    drop(node); // SIGKILL right after the last answer
    let node = start("");
    wait_for("the node is back with the slot's keys", || {
        let reply = RawConn::connect(node.port()).cmd(&["CLUSTER", "COUNTKEYSINSLOT", slot]);
        match text(&reply).as_str() {
            "3" => Ok(()),
            other => Err(other.to_string()),
        }
    });
}

/// What a BLPOP after ASKING on a slot importing into `port` (from `peer`)
/// answers, from `waiter`: one served by a later RPUSH (after ASKING, from
/// another connection), and one that times out after 300 ms (whether it
/// waited for it); then a BLPOP from `gone`, which
/// closes while it waits: the next push stays in the list.
fn blocking_while_importing(
    port: u16,
    peer: u16,
    (mut waiter, mut gone): (RawConn, RawConn),
) -> Vec<String> {
    let slot = "12182";
    ok(
        port,
        &["CLUSTER", "SETSLOT", slot, "IMPORTING", &myid(peer)],
    );
    let tag = tag_of_slot(port, slot);
    let key = format!("{{{tag}}}:queue");
    let mut told = Vec::new();
    assert_eq!(waiter.cmd(&["ASKING"]), b"+OK\r\n");
    waiter.send(&encode(&["BLPOP", &key, "0"]));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut pusher = RawConn::connect(port);
    assert_eq!(pusher.cmd(&["ASKING"]), b"+OK\r\n");
    told.push(show(&pusher.cmd(&["RPUSH", &key, "job"])));
    told.push(show(&waiter.read_reply()));
    assert_eq!(waiter.cmd(&["ASKING"]), b"+OK\r\n");
    let started = std::time::Instant::now();
    told.push(show(&waiter.cmd(&["BLPOP", &key, "0.3"])));
    let waited = started.elapsed() >= std::time::Duration::from_millis(250);
    told.push(format!("waited its timeout: {waited}"));
    assert_eq!(gone.cmd(&["ASKING"]), b"+OK\r\n");
    gone.send(&encode(&["BLPOP", &key, "0"]));
    std::thread::sleep(std::time::Duration::from_millis(200));
    drop(gone);
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(pusher.cmd(&["ASKING"]), b"+OK\r\n");
    told.push(show(&pusher.cmd(&["RPUSH", &key, "kept"])));
    assert_eq!(pusher.cmd(&["ASKING"]), b"+OK\r\n");
    told.push(show(&pusher.cmd(&["LRANGE", &key, "0", "-1"])));
    told
}

/// A blocking command asked of the shard that holds an importing slot's keys
/// parks there, as on redis-server: served by a later push, or timing out.
#[test]
fn a_blocking_command_on_an_importing_slot_waits_as_on_redis_server() {
    if require_redis_server("cluster_forward_node").is_none() {
        return;
    }
    let (redis, redis_peer) = (Server::redis_cluster_node(), Server::redis_cluster_node());
    common::cluster_process::halves(redis.port(), redis_peer.port());
    let conns = (
        RawConn::connect(redis.port()),
        RawConn::connect(redis.port()),
    );
    let expected = blocking_while_importing(redis.port(), redis_peer.port(), conns);
    assert_eq!(expected[3], "waited its timeout: true", "{expected:?}");
    let peer = Server::redis_cluster_node();
    let port = free_ports(1, true);
    let _node = Node::start_forward(port, 2, &unique_dir("fwd-asked-blocking"));
    common::cluster_process::halves(port, peer.port());
    // Shard 0's connections: the slot's keys are shard 1's.
    let ([waiter, _], [gone, _]) = (one_on_each_shard(port), one_on_each_shard(port));
    assert_eq!(
        blocking_while_importing(port, peer.port(), (waiter, gone)),
        expected
    );
}
