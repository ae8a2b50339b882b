//! The settings a Ruvio replica node's automatic failover obeys, as
//! redis-server's (docs/cluster.md, "Replicas of nodes and failover"): with
//! `cluster-replica-no-failover yes` the replica of a `kill -9`ed master never
//! starts an election (it stays a replica, flagged `nofailover`, and the
//! cluster stays down) until CONFIG SET turns it `no`; a manual CLUSTER
//! FAILOVER still runs with it. The data-age check: a replica whose link to
//! its master has been down longer than `repl-ping-replica-period` +
//! `cluster-node-timeout` x `cluster-replica-validity-factor` does not run,
//! says why in Redis's words, and runs once the factor is 0. Three masters
//! and a replica of the first, each its own `ruvio --cluster-enabled yes`
//! process.

mod common;

use common::cluster_process::{info_field, ok, own_line, text, three_masters_and_a_replica, Node};
use common::cluster_tools::myid;
use common::replication::wait_for;
use common::*;
use std::sync::Mutex;
use std::time::Duration;

/// Each test runs four server processes and times a failover that must not
/// happen: one at a time, so they do not slow each other.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn cluster_state(port: u16) -> String {
    let info = text(&RawConn::connect(port).cmd(&["CLUSTER", "INFO"]));
    info.lines()
        .find_map(|l| l.strip_prefix("cluster_state:"))
        .unwrap_or_default()
        .to_string()
}

/// Node `id`'s line in `port`'s CLUSTER NODES.
fn line_of(port: u16, id: &str) -> String {
    let nodes = text(&RawConn::connect(port).cmd(&["CLUSTER", "NODES"]));
    nodes
        .lines()
        .find(|l| l.starts_with(id))
        .unwrap_or_default()
        .to_string()
}

fn start(replica_flags: &[&str]) -> (Vec<Node>, Node) {
    three_masters_and_a_replica("rules", replica_flags)
}

#[test]
fn a_replica_with_no_failover_waits_for_the_operator() {
    let _serial = one_at_a_time();
    // Factor 0: the data-age check (the other test) never stops this one's
    // election once allowed, however long the failure detection and the wait
    // below took on a loaded machine (CI once took 21 s from the kill to the
    // CONFIG SET, past the 20 s a factor of 10 allows).
    let no_failover = [
        "--cluster-replica-no-failover",
        "yes",
        "--cluster-replica-validity-factor",
        "0",
    ];
    let (mut masters, replica) = start(&no_failover);
    let (master, other, r) = (masters[0].port, masters[1].port, replica.port);
    let (master_id, replica_id) = (myid(master), myid(r));
    // It says so in its flags, and the others see them (Redis's
    // `myself,slave,nofailover`).
    assert!(
        own_line(r).contains(" myself,slave,nofailover "),
        "{}",
        own_line(r)
    );
    wait_for("the masters see the flag", || {
        line_of(other, &replica_id).contains(" slave,nofailover ")
    });

    masters[0].kill();
    wait_for("the master FAILed in the others' views", || {
        line_of(other, &master_id).contains(" master,fail ")
    });
    // A replica free to fail over is voted in within 2-3 s of the kill
    // (tests/cluster_node_failover.rs); this one does not even ask.
    std::thread::sleep(Duration::from_secs(5));
    assert!(own_line(r).contains("slave"), "{}", own_line(r));
    assert_eq!(cluster_state(other), "fail");
    assert_eq!(cluster_state(r), "fail");
    assert!(line_of(other, &master_id).ends_with(" 0-5460"));

    ok(r, &["CONFIG", "SET", "cluster-replica-no-failover", "no"]);
    wait_for("the replica took over", || {
        let me = own_line(r);
        me.contains("master") && me.ends_with(" 0-5460") && !me.contains("nofailover")
    });
    wait_for("the cluster ok again", || cluster_state(other) == "ok");

    // A manual CLUSTER FAILOVER runs whatever the setting: the old master,
    // back as the new one's replica, takes its slots back with it set.
    masters[0].restart();
    wait_for("the old master follows the new", || {
        let me = own_line(master);
        me.contains("slave") && me.contains(&replica_id)
    });
    wait_for("its link up", || {
        info_field(master, "master_link_status") == "up"
    });
    ok(
        master,
        &["CONFIG", "SET", "cluster-replica-no-failover", "yes"],
    );
    wait_for("the new master knows its replica", || {
        line_of(r, &master_id).contains(&format!("slave,nofailover {replica_id}"))
    });
    ok(master, &["CLUSTER", "FAILOVER"]);
    wait_for("the manual failover done", || {
        let me = own_line(master);
        me.contains("master") && me.ends_with(" 0-5460")
    });
}

#[test]
fn a_replica_cut_off_from_its_master_too_long_does_not_fail_over() {
    let _serial = one_at_a_time();
    // Allowed: 1 s + 1 s x 1 of a link down past the 1 s node timeout.
    let flags = [
        "--cluster-replica-validity-factor",
        "1",
        "--repl-ping-replica-period",
        "1",
    ];
    let (mut masters, replica) = start(&flags);
    let (master, other, r) = (masters[0].port, masters[1].port, replica.port);
    let master_id = myid(master);
    // The replication link cut and kept down (the master now wants a
    // password the replica does not have); the bus goes on.
    let mut conn = RawConn::connect(master);
    assert_eq!(
        conn.cmd(&["CONFIG", "SET", "requirepass", "not-the-replica-s"]),
        b"+OK\r\n"
    );
    let laddr = format!("127.0.0.1:{master}");
    conn.cmd(&["CLIENT", "KILL", "LADDR", &laddr]);
    wait_for("the replica's link down", || {
        info_field(r, "master_link_status") == "down"
    });
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(info_field(r, "master_link_status"), "down");
    assert_eq!(cluster_state(other), "ok");

    masters[0].kill();
    wait_for("the master FAILed in the others' views", || {
        line_of(other, &master_id).contains(" master,fail ")
    });
    // Redis says why only once the master has failed for the node timeout
    // and 5 s more (`clusterLogCantFailover`).
    let log = replica.dir.join("ruvio.log");
    let said = "Currently unable to failover: Disconnected from master for longer than \
                allowed. Please check the 'cluster-replica-validity-factor' configuration \
                option.";
    wait_for("the replica says why it does not fail over", || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains(said)
    });
    assert!(own_line(r).contains("slave"), "{}", own_line(r));
    assert_eq!(cluster_state(other), "fail");

    ok(
        r,
        &["CONFIG", "SET", "cluster-replica-validity-factor", "0"],
    );
    wait_for("the replica took over", || {
        let me = own_line(r);
        me.contains("master") && me.ends_with(" 0-5460")
    });
    wait_for("the cluster ok again", || cluster_state(other) == "ok");
}
