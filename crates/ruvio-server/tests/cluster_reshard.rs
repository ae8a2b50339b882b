//! Moving slots live on a node of the cluster bus in the `ruvio` binary
//! (`--cluster-enabled yes`), compared with redis-server 7.0: CLUSTER SETSLOT
//! MIGRATING / IMPORTING / NODE / STABLE with their errors, `-ASK` for a
//! migrating slot's missing keys, ASKING for an importing slot's, `-TRYAGAIN`
//! for several keys of a slot in flight not all on one node, the slots in
//! flight in CLUSTER NODES, and COUNTKEYSINSLOT / GETKEYSINSLOT meanwhile.
//! Then `redis-cli --cluster reshard` into a Ruvio node while a client writes.

mod common;

use common::bus_node::wait_for;
use common::cluster_process::{halves, Node, SideBySide};
use common::cluster_tools::*;
use common::*;

#[test]
fn setslot_ask_and_tryagain_as_redis_server() {
    if require_redis_server("cluster_reshard").is_none() {
        return;
    }
    let side = SideBySide::start(&unique_dir("reshard-setslot"));
    let pairs = side.pairs();
    let replies =
        |(tested, peer): (u16, u16)| setslot_walk(&mut RawConn::connect(tested), tested, peer);
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
