//! `ruvio_server::cluster::membership` with a real redis-server 7.0 in one
//! cluster. Two nodes of Ruvio's membership code (each driven over real TCP by a
//! thread of this test: the code is sans I/O) and a `redis-server
//! --cluster-enabled yes` each take a third of the slots; one Ruvio node MEETs
//! the redis-server, the other MEETs the first, and gossip does the rest: all
//! three end with the same nodes, addresses, roles and slots (CLUSTER NODES of
//! the redis-server, the nodes' own tables), and the redis-server's cluster is
//! `ok` with 3 known nodes. Then the redis-server is killed: both Ruvio nodes
//! mark it `fail?`, exchange failure reports, and one of them marks it `fail`
//! and tells the other (a majority of the masters: FAIL by the rules of
//! `markNodeAsFailingIfNeeded`).

mod common;

use common::bus_node::*;
use common::*;
use ruvio_server::cluster::nodes_file::{parse_line, NodeLine};

#[test]
fn ruvio_nodes_and_a_redis_server_form_one_cluster() {
    if require_redis_server("cluster_membership").is_none() {
        return;
    }
    let redis = Server::redis_cluster_node();
    let mut conn = redis.raw();
    assert_eq!(
        conn.cmd(&["CLUSTER", "ADDSLOTSRANGE", "10923", "16383"]),
        b"+OK\r\n"
    );
    let (port_a, port_b) = (free_ports(1, true), free_ports(1, true));
    let a = Driver::start(name(u64::from(port_a)), port_a, 0..5461);
    let b = Driver::start(name(u64::from(port_b)), port_b, 5461..10923);
    a.meet(redis.port());
    b.meet(port_a);

    wait_for("one cluster of three", || {
        let text = decode(&conn.cmd(&["CLUSTER", "NODES"])).text();
        let redis_view: Vec<NodeLine> = text.lines().map(|l| parse_line(l).unwrap()).collect();
        let (view_a, view_b) = (a.nodes(), b.nodes());
        let expected = agreed(&redis_view);
        if expected.len() != 3 || redis_view.iter().any(|l| !l.connected) {
            return Err(format!("redis-server sees:\n{text}"));
        }
        if agreed(&view_a) != expected || agreed(&view_b) != expected {
            return Err(format!("views differ:\n{text}\n{view_a:?}\n{view_b:?}"));
        }
        let info = decode(&conn.cmd(&["CLUSTER", "INFO"])).text();
        for field in [
            "cluster_state:ok",
            "cluster_known_nodes:3",
            "cluster_size:3",
        ] {
            if !info.lines().any(|l| l == field) {
                return Err(format!("no {field} in\n{info}"));
            }
        }
        Ok(())
    });
    let redis_id = decode(&conn.cmd(&["CLUSTER", "MYID"])).text();
    let slots_a = a
        .nodes()
        .into_iter()
        .find(|l| l.has_flag("myself"))
        .map(|l| l.slots);
    assert_eq!(slots_a, Some(vec![(0, 5460)]));
    drop(conn);
    drop(redis);

    wait_for("the killed redis-server marked fail by both", || {
        for (who, view) in [("a", a.nodes()), ("b", b.nodes())] {
            let line = view
                .iter()
                .find(|l| l.name == redis_id)
                .expect("still known");
            if !line.has_flag("fail") || line.has_flag("fail?") {
                return Err(format!("{who} sees {line:?}"));
            }
        }
        Ok(())
    });
}
