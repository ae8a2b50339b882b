//! Moving slots live on a node of the cluster bus in the `ruvio` binary
//! (`--cluster-enabled yes`), compared with redis-server 7.0: CLUSTER SETSLOT
//! MIGRATING / IMPORTING / NODE / STABLE with their errors, `-ASK` for a
//! migrating slot's missing keys, ASKING for an importing slot's, `-TRYAGAIN`
//! for several keys of a slot in flight not all on one node, the slots in
//! flight in CLUSTER NODES, and COUNTKEYSINSLOT / GETKEYSINSLOT meanwhile.
//! Then `redis-cli --cluster reshard` into a Ruvio node while a client writes.

mod common;

use common::bus_node::wait_for;
use common::cluster_process::{halves, text, Node, SideBySide};
use common::cluster_tools::*;
use common::*;

/// The slots in flight on `port`'s own CLUSTER NODES line (`[slot->-id]`,
/// `[slot-<-id]`), the node names read as `ME` and `PEER`.
fn in_flight(port: u16, peer: u16) -> Vec<String> {
    let nodes = text(&RawConn::connect(port).cmd(&["CLUSTER", "NODES"]));
    let own = nodes.lines().find(|l| l.contains("myself")).unwrap_or("");
    own.split(' ')
        .filter(|word| word.starts_with('['))
        .map(|word| word.replace(&myid(peer), "PEER").replace(&myid(port), "ME"))
        .collect()
}

#[test]
fn setslot_ask_and_tryagain_as_redis_server() {
    if require_redis_server("cluster_reshard").is_none() {
        return;
    }
    let side = SideBySide::start(&unique_dir("reshard-setslot"));
    let pairs = side.pairs();
    // `{06S}...` are slot 0 (the tested node's), `foo` 12182 (the peer's).
    let replies = |(tested, peer): (u16, u16)| {
        let (me, them) = (myid(tested), myid(peer));
        let mut conn = RawConn::connect(tested);
        let mut seen = Vec::new();
        let mut run = |line: &str| {
            let line = line.replace("$ME", &me).replace("$PEER", &them);
            let words: Vec<&str> = line.split(' ').collect();
            let reply = show(&conn.cmd(&words))
                .replace(&peer.to_string(), "PEER")
                .replace(&them, "PEERID");
            let line = line.replace(&them, "PEERID").replace(&me, "MYID");
            seen.push(format!("{line} -> {reply}"));
        };
        for line in [
            "SET {06S}a 1",
            "CLUSTER SETSLOT 0 MIGRATING $PEER",
            "GET {06S}a",
            "GET {06S}b",
            "SET {06S}b 1",
            "MGET {06S}a {06S}b",
            "EXISTS {06S}b",
            "CLUSTER SETSLOT 9000 MIGRATING $PEER",
            "CLUSTER SETSLOT 0 MIGRATING 0123456789012345678901234567890123456789",
            "CLUSTER SETSLOT 0 IMPORTING $PEER",
            "CLUSTER SETSLOT 0 FOO",
            "CLUSTER SETSLOT 0 STABLE extra",
            "CLUSTER SETSLOT 0 NODE",
            "CLUSTER SETSLOT 16384 STABLE",
            "CLUSTER SETSLOT x STABLE",
            "CLUSTER SETSLOT 0 NODE nobody",
            "CLUSTER SETSLOT 0 NODE $PEER",
            "CLUSTER SETSLOT 12182 IMPORTING nobody",
            "CLUSTER SETSLOT 12182 IMPORTING $PEER",
            "GET foo",
            "ASKING",
            "GET foo",
            "GET foo",
            "ASKING",
            "SET foo 1",
            "CLUSTER COUNTKEYSINSLOT 12182",
            "CLUSTER GETKEYSINSLOT 12182 10",
            "CLUSTER COUNTKEYSINSLOT 0",
            "CLUSTER GETKEYSINSLOT 0 10",
            "CLUSTER GETKEYSINSLOT 0 -1",
            "ASKING",
            "MGET foo {foo}x",
            "ASKING",
            "MGET foo foo",
            "ASKING",
            "PING",
            "GET foo",
        ] {
            run(line);
        }
        let during = in_flight(tested, peer);
        for line in [
            "CLUSTER SETSLOT 0 STABLE",
            "GET {06S}b",
            "CLUSTER SETSLOT 12182 NODE $ME",
            "GET foo",
            "CLUSTER SETSLOT 12182 STABLE",
        ] {
            run(line);
        }
        (seen, during, in_flight(tested, peer))
    };
    let (ruvio, redis) = (replies(pairs[0]), replies(pairs[1]));
    assert_eq!(ruvio.0, redis.0);
    assert_eq!(ruvio.1, redis.1);
    assert_eq!(ruvio.1, ["[0->-PEER]", "[12182-<-PEER]"]);
    assert_eq!(ruvio.2, redis.2);
}

/// `redis-cli --cluster reshard` moves slots from a redis-server node to a
/// Ruvio node while redis-py's RedisCluster writes (following `-ASK` and
/// `-MOVED`): every acknowledged write reads back, and `redis-cli --cluster
/// check` finds the cluster whole, from either node.
#[test]
fn redis_cli_reshards_from_redis_server_to_ruvio_while_a_client_writes() {
    let Some(cli) = redis_cli("cluster_reshard") else {
        return;
    };
    let port = free_ports(1, true);
    let _node = Node::start(port, 1, &unique_dir("reshard-in"));
    let redis = Server::redis_cluster_node();
    halves(port, redis.port());
    let stop = unique_dir("reshard-in-stop").join("stop");
    let writer = start_writer(port, &stop);
    std::thread::sleep(std::time::Duration::from_millis(500));
    reshard(&cli, redis.port(), port, 200);
    let written = stop_writer(writer, &stop);
    assert_eq!(slots_of(port), 8192 + 200);
    wait_for("the cluster whole", || {
        check_whole(&cli, port)?;
        check_whole(&cli, redis.port())
    });
    all_written_present(port, written);
}
