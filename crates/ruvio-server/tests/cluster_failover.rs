//! Failover by election between Ruvio's membership code
//! (`ruvio_server::cluster::membership`, each node driven over TCP by the test:
//! tests/common/bus_node.rs) and real redis-server 7.0 cluster nodes, both ways:
//!
//! - a Ruvio replica of a redis-server master takes over when that master is
//!   killed: the redis-server masters FAIL it, vote for the Ruvio replica's
//!   FAILOVER_AUTH_REQUEST, and then list the Ruvio node as the master of the
//!   dead master's slots (its new config epoch wins them);
//! - two Ruvio masters and a redis-server master with a redis-server replica: the
//!   master killed, the Ruvio masters FAIL it and vote, and the redis-server
//!   replica is promoted with the slots, as every node sees.
//!
//! The data side of a Ruvio replica (replication) is issue 31's; these tests are
//! the bus's part: failure detection, the votes, the epochs and the slots.

mod common;

use common::bus_node::*;
use common::*;
use ruvio_server::cluster::nodes_file::{parse_line, NodeLine};

fn text(conn: &mut RawConn, args: &[&str]) -> String {
    decode(&conn.cmd(args)).text()
}

fn redis_view(conn: &mut RawConn) -> Vec<NodeLine> {
    let text = text(conn, &["CLUSTER", "NODES"]);
    text.lines()
        .map(|l| parse_line(l).expect("a node line"))
        .collect()
}

fn line<'a>(view: &'a [NodeLine], name: &str) -> Result<&'a NodeLine, String> {
    view.iter()
        .find(|l| l.name == name)
        .ok_or_else(|| format!("{name} not in {view:?}"))
}

fn ok(reply: Vec<u8>) {
    assert_eq!(reply, b"+OK\r\n", "{}", String::from_utf8_lossy(&reply));
}

#[test]
fn a_ruvio_replica_takes_over_a_failed_redis_master() {
    if require_redis_server("cluster_failover").is_none() {
        return;
    }
    let masters: Vec<Server> = (0..3).map(|_| Server::redis_cluster_node()).collect();
    let mut conns: Vec<RawConn> = masters.iter().map(Server::raw).collect();
    for (conn, (first, last)) in conns
        .iter_mut()
        .zip([(0, 5460), (5461, 10922), (10923, 16383)])
    {
        ok(conn.cmd(&[
            "CLUSTER",
            "ADDSLOTSRANGE",
            &first.to_string(),
            &last.to_string(),
        ]));
    }
    for other in &masters[1..] {
        ok(conns[0].cmd(&["CLUSTER", "MEET", "127.0.0.1", &other.port().to_string()]));
    }
    let ids: Vec<String> = conns
        .iter_mut()
        .map(|c| text(c, &["CLUSTER", "MYID"]))
        .collect();
    let port = free_ports(1, true);
    let ruvio = Driver::start(name(u64::from(port) + 1), port, 0..0);
    let ruvio_name = String::from_utf8(name(u64::from(port) + 1).to_vec()).unwrap();
    ruvio.meet(masters[0].port());
    wait_for("four nodes everywhere", || {
        let seen = ruvio.nodes().len();
        let redis_seen = redis_view(&mut conns[1]).len();
        if seen == 4 && redis_seen == 4 {
            Ok(())
        } else {
            Err(format!("ruvio sees {seen}, redis-server {redis_seen}"))
        }
    });
    ruvio.replicate(&ids[0]).expect("CLUSTER REPLICATE");
    wait_for("the Ruvio node a replica of master 0", || {
        let view = redis_view(&mut conns[1]);
        let me = line(&view, &ruvio_name)?;
        if me.has_flag("slave") && me.master.as_deref() == Some(ids[0].as_str()) {
            Ok(())
        } else {
            Err(format!("{me:?}"))
        }
    });

    let mut masters = masters;
    drop(conns.remove(0));
    drop(masters.remove(0));
    wait_for("the Ruvio replica promoted with master 0's slots", || {
        for conn in &mut conns {
            let view = redis_view(conn);
            let me = line(&view, &ruvio_name)?;
            if !me.has_flag("master") || me.slots != vec![(0, 5460)] {
                return Err(format!("{me:?}"));
            }
            if !line(&view, &ids[0])?.has_flag("fail") {
                return Err(format!("master 0 not failed in {view:?}"));
            }
            let info = text(conn, &["CLUSTER", "INFO"]);
            if !info.lines().any(|l| l == "cluster_state:ok") {
                return Err(info);
            }
        }
        let own = ruvio.nodes();
        let me = own.iter().find(|l| l.has_flag("myself")).unwrap();
        if me.has_flag("master") && me.slots == vec![(0, 5460)] {
            Ok(())
        } else {
            Err(format!("own view {me:?}"))
        }
    });
}

#[test]
fn ruvio_masters_elect_a_redis_replica() {
    if require_redis_server("cluster_failover").is_none() {
        return;
    }
    let master = Server::redis_cluster_node();
    let replica = Server::redis_cluster_node();
    let mut master_conn = master.raw();
    let mut replica_conn = replica.raw();
    ok(master_conn.cmd(&["CLUSTER", "ADDSLOTSRANGE", "10923", "16383"]));
    let master_id = text(&mut master_conn, &["CLUSTER", "MYID"]);
    let replica_id = text(&mut replica_conn, &["CLUSTER", "MYID"]);
    let (port_a, port_b) = (free_ports(1, true), free_ports(1, true));
    let a = Driver::start(name(u64::from(port_a) + 2), port_a, 0..5461);
    let b = Driver::start(name(u64::from(port_b) + 2), port_b, 5461..10923);
    a.meet(master.port());
    b.meet(port_a);
    ok(replica_conn.cmd(&["CLUSTER", "MEET", "127.0.0.1", &master.port().to_string()]));
    wait_for("four nodes everywhere", || {
        let counts = [
            a.nodes().len(),
            b.nodes().len(),
            redis_view(&mut replica_conn).len(),
        ];
        if counts == [4, 4, 4] {
            Ok(())
        } else {
            Err(format!("{counts:?}"))
        }
    });
    ok(replica_conn.cmd(&["CLUSTER", "REPLICATE", &master_id]));
    wait_for("the redis-server replica known as one", || {
        for view in [a.nodes(), b.nodes()] {
            let r = line(&view, &replica_id)?;
            if !r.has_flag("slave") || r.master.as_deref() != Some(master_id.as_str()) {
                return Err(format!("{r:?}"));
            }
        }
        Ok(())
    });
    // A replica that never synced may not take over (its data age is unknown).
    wait_for("the replica's link up", || {
        let info = text(&mut replica_conn, &["INFO", "replication"]);
        if info.contains("master_link_status:up") {
            Ok(())
        } else {
            Err(info)
        }
    });

    drop(master_conn);
    drop(master);
    wait_for(
        "the redis-server replica promoted by the Ruvio masters' votes",
        || {
            let view = redis_view(&mut replica_conn);
            let me = line(&view, &replica_id)?;
            if !me.has_flag("myself") || !me.has_flag("master") || me.slots != vec![(10923, 16383)]
            {
                return Err(format!("replica's own view: {me:?}"));
            }
            for view in [a.nodes(), b.nodes()] {
                let r = line(&view, &replica_id)?;
                if !r.has_flag("master") || r.slots != vec![(10923, 16383)] {
                    return Err(format!("a Ruvio node sees {r:?}"));
                }
                if !line(&view, &master_id)?.has_flag("fail") {
                    return Err("the old master not failed".into());
                }
            }
            Ok(())
        },
    );
}
