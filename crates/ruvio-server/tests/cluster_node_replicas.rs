//! Replicas of cluster nodes that carry the data (docs/cluster.md, "Replicas
//! of nodes"): a `ruvio --cluster-enabled yes` node told CLUSTER REPLICATE
//! <master> follows the master node over Redis's plain replication protocol,
//! whether the master is a Ruvio node or a redis-server cluster node. Keys
//! written before and during the sync end on the replica with equal DUMP
//! payloads and TTLs; the replica answers ROLE and INFO replication as a
//! redis-server replica does, sends keyed commands to the master with
//! `-MOVED` (READONLY reads served here), refuses keyless writes with
//! `-READONLY`, and the master counts it in WAIT.

mod common;

use common::cluster_process::{ok, text, Node};
use common::replication::{same_keys_dumped, wait_for, write_keys};
use common::*;

fn items(reply: &[u8]) -> Vec<Value> {
    match decode(reply) {
        Value::Array(items) => items,
        other => panic!("not an array: {other:?}"),
    }
}

fn int(reply: &[u8]) -> i64 {
    match decode(reply) {
        Value::Int(n) => n,
        other => panic!("not an integer: {other:?}"),
    }
}

fn info_field(conn: &mut RawConn, name: &str) -> String {
    let info = text(&conn.cmd(&["INFO", "replication"]));
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

/// Every key of the master is on the replica with the same DUMP payload and
/// a TTL within a second of the master's (READONLY: the replica serves its
/// master's slots to this connection).
fn same_keys(master: u16, replica: u16) -> Result<usize, String> {
    let mut r = RawConn::connect(replica);
    assert_eq!(r.cmd(&["READONLY"]), b"+OK\r\n");
    same_keys_dumped(&mut RawConn::connect(master), &mut r)
}

/// The replica node of `master_port` (node id `master_id`): follows it with
/// every key written before and during the sync, and answers as a
/// redis-server cluster replica.
fn replicate_and_check(master_port: u16, master_id: &str, replica: u16) {
    let mut master = RawConn::connect(master_port);
    wait_for("the master's cluster up", || {
        text(&master.cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok")
    });
    write_keys(&mut master, "before", 300);
    ok(
        replica,
        &["CLUSTER", "MEET", "127.0.0.1", &master_port.to_string()],
    );
    wait_for("the replica knows the master", || {
        text(&RawConn::connect(replica).cmd(&["CLUSTER", "NODES"])).contains(master_id)
    });
    // Writes while the replica syncs.
    let writer = std::thread::spawn(move || {
        let mut conn = RawConn::connect(master_port);
        write_keys(&mut conn, "during", 300);
    });
    ok(replica, &["CLUSTER", "REPLICATE", master_id]);
    writer.join().unwrap();
    let mut r = RawConn::connect(replica);
    wait_for("the link up", || {
        info_field(&mut r, "master_link_status") == "up"
    });
    write_keys(&mut master, "after", 30);
    // The master counts the replica's acknowledgement.
    assert_eq!(int(&master.cmd(&["WAIT", "1", "5000"])), 1);
    let mut compared = Ok(0);
    wait_for("the replica holds every key", || {
        compared = same_keys(master_port, replica);
        compared.is_ok()
    });
    assert_eq!(compared, Ok(630));

    // ROLE and INFO as a redis-server replica's.
    let role = items(&r.cmd(&["ROLE"]));
    assert_eq!(role.len(), 5, "{role:?}");
    assert_eq!(role[0].text(), "slave");
    assert_eq!(role[1].text(), "127.0.0.1");
    assert_eq!(role[2], Value::Int(i64::from(master_port)));
    assert_eq!(role[3].text(), "connected");
    let master_offset: i64 = info_field(&mut master, "master_repl_offset")
        .parse()
        .unwrap();
    wait_for("the replica's offset is the master's", || {
        info_field(&mut r, "slave_repl_offset").parse::<i64>().ok() == Some(master_offset)
    });
    assert_eq!(info_field(&mut r, "role"), "slave");
    assert_eq!(info_field(&mut r, "master_port"), master_port.to_string());
    assert_eq!(
        info_field(&mut r, "master_replid"),
        info_field(&mut master, "master_replid")
    );
    assert_eq!(
        info_field(&mut r, "master_repl_offset"),
        master_offset.to_string()
    );

    // Keyed commands go to the master, READONLY reads are served here,
    // keyless writes are refused.
    let slot = int(&r.cmd(&["CLUSTER", "KEYSLOT", "before:0"]));
    let moved = format!("-MOVED {slot} 127.0.0.1:{master_port}\r\n");
    let mut plain = RawConn::connect(replica);
    assert_eq!(
        show(&plain.cmd(&["GET", "before:0"])),
        show(moved.as_bytes())
    );
    assert_eq!(
        show(&plain.cmd(&["SET", "before:0", "x"])),
        show(moved.as_bytes())
    );
    assert_eq!(plain.cmd(&["READONLY"]), b"+OK\r\n");
    assert_eq!(plain.cmd(&["GET", "before:0"]), b"$7\r\nvalue-0\r\n");
    assert_eq!(
        show(&plain.cmd(&["SET", "before:0", "x"])),
        show(moved.as_bytes())
    );
    // A script's write call is refused as on a redis-server replica.
    let script = "return redis.call('SET', KEYS[1], 'x')";
    let refused = plain.cmd(&["EVAL", script, "1", "before:0"]);
    assert!(
        refused.starts_with(b"-READONLY You can't write against a read only replica."),
        "{}",
        show(&refused)
    );
    assert_eq!(plain.cmd(&["GET", "before:0"]), b"$7\r\nvalue-0\r\n");
    assert_eq!(
        show(&plain.cmd(&["FLUSHALL"])),
        show(b"-READONLY You can't write against a read only replica.\r\n")
    );
    // The master's writes keep arriving.
    assert_eq!(master.cmd(&["SET", "before:0", "new"]), b"+OK\r\n");
    wait_for("the write applied", || {
        plain.cmd(&["GET", "before:0"]) == b"$3\r\nnew\r\n"
    });
    assert_eq!(master.cmd(&["DEL", "after:1"]), b":1\r\n");
    wait_for("the delete applied", || {
        plain.cmd(&["EXISTS", "after:1"]) == b":0\r\n"
    });
}

#[test]
fn a_ruvio_node_replicates_a_ruvio_master_node_with_its_data() {
    let master = Node::start(free_ports(1, true), 1, &unique_dir("node-master"));
    let replica = Node::start(free_ports(1, true), 1, &unique_dir("node-replica"));
    ok(master.port, &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
    let id = text(&RawConn::connect(master.port).cmd(&["CLUSTER", "MYID"]));
    replicate_and_check(master.port, &id, replica.port);
}

/// Shard 1 of a 2-shard process replicates shard 0, another node of the same
/// process: every key of the master loads into shard 1 alone, whatever the
/// process's own split of the slots between its shards.
#[test]
fn a_shard_node_replicates_another_shard_of_its_process() {
    let nodes = Node::start(free_ports(2, true), 2, &unique_dir("node-shards"));
    ok(nodes.port, &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
    let id = text(&RawConn::connect(nodes.port).cmd(&["CLUSTER", "MYID"]));
    replicate_and_check(nodes.port, &id, nodes.port + 1);
}

#[test]
fn a_ruvio_node_replicates_a_redis_server_master_node_with_its_data() {
    if require_redis_server("cluster_node_replicas").is_none() {
        return;
    }
    let master = Server::redis_cluster_node();
    let replica = Node::start(free_ports(1, true), 1, &unique_dir("node-replica"));
    ok(master.port(), &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
    let id = text(&master.raw().cmd(&["CLUSTER", "MYID"]));
    replicate_and_check(master.port(), &id, replica.port);
}

/// `redis-cli --cluster add-node NEW EXISTING --cluster-slave
/// --cluster-master-id ID` (CLUSTER MEET, then CLUSTER REPLICATE) adds a
/// Ruvio node as the replica of a Ruvio master, which it then follows with
/// the master's keys.
#[test]
fn redis_cli_adds_a_ruvio_replica_node() {
    let Some(cli) = common::cluster_tools::redis_cli("cluster_node_replicas") else {
        return;
    };
    let master = Node::start(free_ports(1, true), 1, &unique_dir("add-master"));
    let replica = Node::start(free_ports(1, true), 1, &unique_dir("add-replica"));
    ok(master.port, &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
    let mut conn = RawConn::connect(master.port);
    wait_for("the master's cluster up", || {
        text(&conn.cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok")
    });
    write_keys(&mut conn, "k", 90);
    let id = text(&conn.cmd(&["CLUSTER", "MYID"]));
    let out = std::process::Command::new(&cli)
        .args(["--cluster", "add-node"])
        .arg(format!("127.0.0.1:{}", replica.port))
        .arg(format!("127.0.0.1:{}", master.port))
        .args(["--cluster-slave", "--cluster-master-id", &id])
        .output()
        .expect("redis-cli");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("[OK] New node added correctly."),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut r = RawConn::connect(replica.port);
    wait_for("the link up", || {
        info_field(&mut r, "master_link_status") == "up"
    });
    let mut compared = Ok(0);
    wait_for("the replica holds every key", || {
        compared = same_keys(master.port, replica.port);
        compared.is_ok()
    });
    assert_eq!(compared, Ok(90));
}

/// A replica node with a log (`--durability everysec`) killed and started
/// again continues its master's stream from the place its log holds, as a
/// redis-server replica continues from its RDB's: the master answers
/// `+CONTINUE` (`sync_partial_ok` 1, `sync_full` still 1) and the replica
/// ends with every key, those written while it was down too. `flags`: the
/// replica's besides the log (forward mode: the process one node).
fn a_replica_node_continues_from_its_log(shards: usize, flags: &[&str]) {
    let master = Node::start(free_ports(1, true), 1, &unique_dir("log-master"));
    let mut flags = flags.to_vec();
    flags.extend(["--durability", "everysec"]);
    let port = free_ports(shards as u16, true);
    let mut replica = Node::start_bound(
        port,
        shards,
        &unique_dir("log-replica"),
        "127.0.0.1",
        &flags,
    );
    ok(master.port, &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
    let mut m = RawConn::connect(master.port);
    let id = text(&m.cmd(&["CLUSTER", "MYID"]));
    ok(
        replica.port,
        &["CLUSTER", "MEET", "127.0.0.1", &master.port.to_string()],
    );
    wait_for("the replica knows the master", || {
        text(&RawConn::connect(replica.port).cmd(&["CLUSTER", "NODES"])).contains(&id)
    });
    ok(replica.port, &["CLUSTER", "REPLICATE", &id]);
    let link_up = |port: u16| {
        wait_for("the link up", || {
            info_field(&mut RawConn::connect(port), "master_link_status") == "up"
        })
    };
    link_up(replica.port);
    write_keys(&mut m, "before", 300);
    // The replica's log fsynced the stream up to here (its ACKs say so).
    assert_eq!(
        show(&m.cmd(&["WAITAOF", "0", "1", "5000"])),
        show(b"*2\r\n:0\r\n:1\r\n")
    );
    replica.kill();
    write_keys(&mut m, "down", 90);
    replica.restart();
    link_up(replica.port);
    let mut compared = Ok(0);
    wait_for("the replica holds every key", || {
        compared = same_keys(master.port, replica.port);
        compared.is_ok()
    });
    assert_eq!(compared, Ok(390));
    assert_eq!(info_stat(&mut m, "sync_full"), 1);
    assert_eq!(info_stat(&mut m, "sync_partial_ok"), 1);
    let log = std::fs::read_to_string(replica.dir.join("ruvio.log")).unwrap_or_default();
    assert!(
        log.contains("Successful partial resynchronization"),
        "{log}"
    );
    assert_eq!(
        info_field(&mut RawConn::connect(replica.port), "master_replid"),
        info_field(&mut m, "master_replid")
    );
}

#[test]
fn a_replica_node_with_a_log_continues_after_a_restart() {
    a_replica_node_continues_from_its_log(1, &[]);
}

/// The same with the process one node of 2 shards (forward mode): it follows
/// its master as REPLICAOF does, each shard's log marking the stream.
#[test]
fn a_forward_mode_replica_node_with_a_log_continues_after_a_restart() {
    a_replica_node_continues_from_its_log(2, &["--port-mode", "forward"]);
}
