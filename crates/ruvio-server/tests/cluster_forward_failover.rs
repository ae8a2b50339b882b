//! Forward mode as one node is a full cluster replica and failover target
//! (docs/cluster.md, "In the binary: forward mode as one node"): the process
//! follows the master the membership names through REPLICAOF's path (the
//! single stream on shard 0, its keys routed to their shards) and stops
//! following as REPLICAOF NO ONE does when the membership promotes it.
//!
//! - Three forward-mode masters and three forward-mode replicas of two
//!   shards each, built by `redis-cli --cluster create --cluster-replicas 1`;
//!   redis-py's RedisCluster writes keys over every slot, acknowledged by
//!   `WAIT 1`; a replica answers `-MOVED` to its master for keyed commands
//!   (`-READONLY` for a keyless write; a queued write redirected, EXEC
//!   aborting) and serves a READONLY client's reads on either shard, as a
//!   redis-server cluster replica answers. A `kill -9` of a master gets its replica elected: it
//!   serves the slots with the master's history as its `master_replid2`,
//!   CLUSTER INFO says ok, every acknowledged write reads back; the killed
//!   node restarted follows it with the data, and CLUSTER FAILOVER (the
//!   default one, FORCE, TAKEOVER) hands the slots back and forth, each old
//!   master continuing its own history on the node that took over (partial
//!   resyncs); `redis-cli --cluster check` finds the cluster whole.
//! - A forward-mode replica of a redis-server master: the default CLUSTER
//!   FAILOVER both ways, the redis-server continuing the Ruvio node's
//!   history; CLUSTER RESET and REPLICATE refused to a node holding a key on
//!   shard 1 alone, as redis-server refuses a node holding keys.
//! - A forward-mode master that gives its last slot away by SETSLOT NODE
//!   becomes the new owner's replica with its data, as redis-server does.

mod common;

use common::cluster_process::{
    agree, holds_tagged, info_field, ok, own_line, text, write_tagged, Node,
};
use common::cluster_tools::{all_written_present, check_whole, myid, redis_cli};
use common::forward_cluster::{follows, own_ranges, SixNodes};
use common::replication::wait_for;
use common::*;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The tests here each run several server processes, one of them timing a
/// failover: one at a time, so they do not slow each other.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Connections to `port` until one lands on shard `shard` (CLIENT INFO's
/// `io-thread` names the shard a connection landed on).
fn conn_on_shard(port: u16, shard: usize) -> RawConn {
    for _ in 0..200 {
        let mut conn = RawConn::connect(port);
        let info = text(&conn.cmd(&["CLIENT", "INFO"]));
        let on = info
            .split_whitespace()
            .find_map(|field| field.strip_prefix("io-thread="));
        if on == Some(shard.to_string().as_str()) {
            return conn;
        }
    }
    panic!("no connection of {port} landed on shard {shard}");
}

/// A hash tag whose slot is one of `port`'s own.
fn own_tag(port: u16) -> String {
    let ranges = own_ranges(port);
    assert!(!ranges.is_empty(), "{port} serves no slot");
    let mut conn = RawConn::connect(port);
    (0..)
        .map(|i| format!("t{i}"))
        .find(
            |tag| match decode(&conn.cmd(&["CLUSTER", "KEYSLOT", tag])) {
                Value::Int(slot) => ranges.iter().any(|&(a, b)| (a..=b).contains(&slot)),
                other => panic!("{other:?}"),
            },
        )
        .unwrap()
}

/// A write on master `port` then `WAIT 1`: its replica acknowledged it and
/// every write the master took before.
fn acknowledged(port: u16) {
    let mut conn = RawConn::connect(port);
    let key = format!("{{{}}}:ack", own_tag(port));
    assert_eq!(conn.cmd(&["SET", &key, "1"]), b"+OK\r\n");
    assert_eq!(conn.cmd(&["WAIT", "1", "2000"]), b":1\r\n", "{port}");
}

/// `port` is a master serving `ranges` (as its own line shows them).
fn serves(port: u16, ranges: &[(i64, i64)]) -> bool {
    own_line(port).contains("master") && own_ranges(port) == ranges
}

/// Keys `{tag}:0..count` hold their index on `port`, read by a READONLY
/// client on each of its two shards (a replica serves them too).
fn holds(port: u16, tag: &str, count: usize) -> bool {
    (0..2).all(|shard| holds_tagged(conn_on_shard(port, shard), tag, count))
}

/// What a forward-mode replica answers its clients, on either shard, as a
/// redis-server cluster replica: keyed commands `-MOVED` to the master (a
/// write even after READONLY), READONLY reads served, a keyless write
/// `-READONLY`.
fn answers_as_a_replica(replica: u16, master: u16, tag: &str) {
    let key = format!("{{{tag}}}:0");
    let slot = match decode(&RawConn::connect(master).cmd(&["CLUSTER", "KEYSLOT", &key])) {
        Value::Int(slot) => slot,
        other => panic!("{other:?}"),
    };
    let moved = format!("-MOVED {slot} 127.0.0.1:{master}\r\n");
    for shard in 0..2 {
        let mut conn = conn_on_shard(replica, shard);
        assert_eq!(show(&conn.cmd(&["GET", &key])), show(moved.as_bytes()));
        assert_eq!(show(&conn.cmd(&["SET", &key, "x"])), show(moved.as_bytes()));
        assert_eq!(conn.cmd(&["READONLY"]), b"+OK\r\n");
        assert_eq!(conn.cmd(&["GET", &key]), b"$1\r\n0\r\n", "shard {shard}");
        assert_eq!(show(&conn.cmd(&["SET", &key, "x"])), show(moved.as_bytes()));
        assert_eq!(
            show(&conn.cmd(&["FLUSHALL"])),
            show(b"-READONLY You can't write against a read only replica.\r\n")
        );
        // In a transaction too: the write redirected, EXEC aborting.
        assert_eq!(conn.cmd(&["MULTI"]), b"+OK\r\n");
        assert_eq!(conn.cmd(&["GET", &key]), b"+QUEUED\r\n");
        assert_eq!(show(&conn.cmd(&["SET", &key, "y"])), show(moved.as_bytes()));
        assert_eq!(
            show(&conn.cmd(&["EXEC"])),
            show(b"-EXECABORT Transaction discarded because of previous errors.\r\n")
        );
    }
}

#[test]
fn a_killed_forward_mode_master_s_replica_takes_over_and_the_slots_go_back_and_forth() {
    let _serial = one_at_a_time();
    let Some(cli) = redis_cli("cluster_forward_failover") else {
        return;
    };
    let mut six = SixNodes::create(&cli, "fwdfo");
    let replicas = six.replicas();
    assert_eq!(replicas.len(), 3, "{replicas:?}");
    let (replica, master) = replicas[0];
    let ranges = own_ranges(master);
    let old_replid = info_field(master, "master_replid");

    // redis-py's RedisCluster over every slot, and keys of the first
    // master's slots; every master's replica acknowledged them.
    let count = 3000;
    python(&format!(
        "from redis.cluster import RedisCluster\n\
         rc = RedisCluster(host='127.0.0.1', port={master})\n\
         for i in range({count}): rc.set('w:%d' % i, 'v%d' % i)\n"
    ));
    let tag = own_tag(master);
    write_tagged(master, &tag, 0..300);
    for &(_, m) in &replicas {
        acknowledged(m);
    }
    assert!(holds(replica, &tag, 300));
    answers_as_a_replica(replica, master, &tag);
    let acked_offset: u64 = info_field(master, "master_repl_offset").parse().unwrap();

    six.node(master).kill();
    let t0 = Instant::now();
    wait_for("the replica promoted with the slots", || {
        serves(replica, &ranges)
    });
    let took = t0.elapsed();
    eprintln!("the forward-mode replica took over {took:?} after the kill");
    // As tests/cluster_node_failover.rs: cluster-node-timeout 1000 ms, PFAIL
    // after it, FAIL by the majority, the votes 500-1000 ms later (2-3 s);
    // an election that misses its votes is retried after 4 s.
    assert!(took < Duration::from_millis(9000), "failover took {took:?}");
    // Stopped following as REPLICAOF NO ONE: the master's history second.
    assert_eq!(info_field(replica, "role"), "master");
    assert_eq!(info_field(replica, "master_replid2"), old_replid);
    let second: u64 = info_field(replica, "second_repl_offset").parse().unwrap();
    assert!(second > acked_offset, "{second} <= {acked_offset}");
    let live: Vec<u16> = six.ports().into_iter().filter(|&p| p != master).collect();
    for &port in &live {
        wait_for("the cluster ok without the killed master", || {
            text(&RawConn::connect(port).cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok")
        });
    }
    all_written_present(replica, count);
    assert!(holds(replica, &tag, 300));
    // It takes writes, on either shard.
    for shard in 0..2 {
        let mut conn = conn_on_shard(replica, shard);
        let key = format!("{{{tag}}}:new{shard}");
        assert_eq!(conn.cmd(&["SET", &key, "x"]), b"+OK\r\n");
    }

    // The killed node restarted claims its slots under the old epoch: it
    // follows the node that took them, with the data.
    six.node(master).restart();
    wait_for("the old master follows the new", || {
        follows(master, replica)
    });
    write_tagged(replica, &tag, 300..400);
    assert!(holds(master, &tag, 400));
    answers_as_a_replica(master, replica, &tag);

    // The slots back and forth: the default failover (MFSTART, the master
    // pauses on both shards, the replica catches up), FORCE, TAKEOVER.
    ok(master, &["CLUSTER", "FAILOVER"]);
    wait_for("the manual failover done", || serves(master, &ranges));
    wait_for("the other follows it", || follows(replica, master));
    assert!(holds(master, &tag, 400));
    write_tagged(master, &tag, 400..500);

    ok(replica, &["CLUSTER", "FAILOVER", "FORCE"]);
    wait_for("FORCE: the replica voted in", || serves(replica, &ranges));
    wait_for("the old master follows it", || follows(master, replica));
    assert!(holds(replica, &tag, 500));
    write_tagged(replica, &tag, 500..600);

    ok(master, &["CLUSTER", "FAILOVER", "TAKEOVER"]);
    wait_for("TAKEOVER: the replica serves the slots", || {
        serves(master, &ranges)
    });
    wait_for("the old master follows it", || follows(replica, master));
    assert!(holds(master, &tag, 600));
    assert!(holds(replica, &tag, 600));
    // Each old master continued its own history on the node that took over
    // (its replid2): after the restarted node's full sync, partial resyncs
    // only.
    wait_for("the partial resyncs counted", || {
        info_field(master, "sync_partial_ok") == "2"
            && info_field(replica, "sync_partial_ok") == "1"
    });
    assert_eq!(info_field(master, "sync_full"), "0");
    let ports = six.ports();
    wait_for("six nodes agree", || agree(&ports, 6).is_ok());
    all_written_present(master, count);
    check_whole(&cli, replica).unwrap_or_else(|e| panic!("{e}"));
}

/// A forward-mode replica of a redis-server master, the default CLUSTER
/// FAILOVER both ways: it follows the redis-server with every key (on both
/// shards), takes over, and the redis-server, its replica then, takes back
/// continuing the Ruvio node's history (a partial resync). Before, a node
/// holding a key on shard 1 alone is refused CLUSTER RESET and REPLICATE as
/// redis-server refuses a node holding keys.
#[test]
fn a_forward_mode_replica_of_a_redis_server_master_fails_over_both_ways() {
    let _serial = one_at_a_time();
    if require_redis_server("cluster_forward_failover").is_none() {
        return;
    }
    let redis = Server::redis_cluster_node();
    let x = redis.port();
    let node = Node::start_forward(free_ports(1, true), 2, &unique_dir("fwdfo-mixed"));
    let r = node.port;

    // A key on shard 1 alone (slot 12182 of 8192-16383), then no slot.
    ok(r, &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
    wait_for("the node alone is up", || {
        RawConn::connect(r).cmd(&["SET", "foo", "1"]) == b"+OK\r\n"
    });
    ok(r, &["CLUSTER", "DELSLOTSRANGE", "0", "16383"]);
    let mut shard0 = conn_on_shard(r, 0);
    // Shard 0 reads the other shards' key counts as they publish them each
    // tick (docs/cluster.md): a tick after the write, not before.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        show(&shard0.cmd(&["CLUSTER", "RESET"])),
        show(b"-ERR CLUSTER RESET can't be called with master nodes containing keys\r\n")
    );
    ok(x, &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
    ok(x, &["CLUSTER", "MEET", "127.0.0.1", &r.to_string()]);
    wait_for("two nodes agree", || agree(&[x, r], 2).is_ok());
    let x_id = myid(x);
    assert_eq!(
        show(&shard0.cmd(&["CLUSTER", "REPLICATE", &x_id])),
        show(b"-ERR To set a master the node must be empty and without assigned slots.\r\n")
    );
    assert_eq!(shard0.cmd(&["FLUSHALL"]), b"+OK\r\n");
    // Shard 1's count is as it published it on its last tick (10 ms).
    wait_for("empty on every shard: REPLICATE taken", || {
        shard0.cmd(&["CLUSTER", "REPLICATE", &x_id]) == b"+OK\r\n"
    });
    wait_for("the Ruvio node follows the redis-server", || follows(r, x));

    // `{}` hashes the whole key: keys over every slot, both shards.
    write_tagged(x, "", 0..200);
    assert!(holds(r, "", 200));
    ok(r, &["CLUSTER", "FAILOVER"]);
    wait_for("the Ruvio node took over", || serves(r, &[(0, 16383)]));
    wait_for("the redis-server follows it", || follows(x, r));
    assert!(holds(r, "", 200));
    write_tagged(r, "", 200..300);
    assert!(holds_tagged(RawConn::connect(x), "", 300));

    let full_syncs = info_field(x, "sync_full");
    ok(x, &["CLUSTER", "FAILOVER"]);
    wait_for("the redis-server took back", || serves(x, &[(0, 16383)]));
    wait_for("the Ruvio node follows it", || follows(r, x));
    assert!(holds(r, "", 300));
    // The Ruvio node, a master until the handover, continued its own
    // history on the redis-server (its replid2): a partial resync.
    wait_for("the partial resync counted", || {
        info_field(x, "sync_partial_ok") != "0"
    });
    assert_eq!(info_field(x, "sync_full"), full_syncs);
}

/// A forward-mode master that gives its last slot away (SETSLOT NODE)
/// becomes the new owner's replica and follows its data, as a redis-server
/// node does with `cluster-allow-replica-migration yes` (the default): the
/// membership deciding to follow starts the process's replication.
#[test]
fn a_forward_mode_master_emptied_by_setslot_node_follows_the_new_owner() {
    let _serial = one_at_a_time();
    if require_redis_server("cluster_forward_failover").is_none() {
        return;
    }
    let peer = Server::redis_cluster_node();
    let node = Node::start_forward(free_ports(1, true), 2, &unique_dir("fwdfo-emptied"));
    let (tested, p) = (node.port, peer.port());
    common::cluster_process::halves(tested, p);
    // `{x}` is slot 16287: the peer's, on the tested node's shard 1.
    let mut conn = RawConn::connect(p);
    assert_eq!(conn.cmd(&["SET", "{x}", "on the peer"]), b"+OK\r\n");
    ok(tested, &["CLUSTER", "DELSLOTSRANGE", "1", "8191"]);
    let peer_id = myid(p);
    ok(tested, &["CLUSTER", "SETSLOT", "0", "NODE", &peer_id]);
    let expected = format!(" myself,slave {peer_id} ");
    wait_for("a replica of the new owner", || {
        own_line(tested).contains(&expected)
    });
    wait_for("its link up", || {
        info_field(tested, "master_link_status") == "up"
    });
    // Every slot served again (the peer takes the ones given up), the
    // cluster up: a READONLY read of the master's slot served on either shard.
    ok(p, &["CLUSTER", "ADDSLOTSRANGE", "1", "8191"]);
    wait_for("the cluster up again", || {
        text(&RawConn::connect(tested).cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok")
    });
    for shard in 0..2 {
        let mut replica = conn_on_shard(tested, shard);
        assert_eq!(replica.cmd(&["READONLY"]), b"+OK\r\n");
        let got = replica.cmd(&["GET", "{x}"]);
        assert_eq!(show(&got), show(b"$11\r\non the peer\r\n"), "shard {shard}");
    }
}
