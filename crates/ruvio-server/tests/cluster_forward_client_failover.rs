//! The `redis` crate's `ClusterClient` (redis-rs) through a reshard and a
//! failover of forward-mode nodes (docs/cluster.md, "In the binary: forward
//! mode as one node"; issue 35 asks it of cluster clients): six processes of
//! two shards, three masters and a replica of each, built by `redis-cli
//! --cluster create --cluster-replicas 1`. A client thread INCRs 200 counters
//! spread over every slot while `redis-cli --cluster reshard` moves 1,000
//! slots (and their keys, from either shard of the source into either shard
//! of the target) from one master to another, and then the master that took
//! them is killed (`kill -9`, once its replica has every write acknowledged
//! so far: replication is asynchronous, as Redis's): its replica, which
//! received the moved keys over the stream, takes the slots and the client
//! goes on writing. Every counter holds at least its acknowledged INCRs at
//! the end, the moved slots' and the failed master's counters took INCRs
//! after each step, and the killed node restarted follows its replacement
//! with the cluster whole. Per-shard mode: tests/cluster_client_failover.rs.

mod common;

use common::cluster_process::{info_field, text};
use common::cluster_tools::{check_whole, redis_cli, reshard};
use common::counter_writer::{counter_slot, every_acknowledged_incr_present, CounterWriter};
use common::forward_cluster::{follows, own_ranges, SixNodes};
use common::replication::wait_for;
use common::RawConn;

const COUNTERS: usize = 200;
const RESHARD_SLOTS: u16 = 1000;

/// `slot` is in one of `ranges`.
fn within(ranges: &[(i64, i64)], slot: u16) -> bool {
    let slot = i64::from(slot);
    ranges.iter().any(|&(a, b)| (a..=b).contains(&slot))
}

/// The counters whose slot `pick` accepts.
fn counters_where(pick: impl Fn(u16) -> bool) -> Vec<usize> {
    (0..COUNTERS).filter(|&i| pick(counter_slot(i))).collect()
}

/// Waits until each of `counters` took an acknowledged INCR since the mark.
fn each_written_since_mark(writer: &CounterWriter, counters: &[usize], what: &str) {
    wait_for(what, || {
        let since = writer.acked_since_mark();
        counters.iter().all(|&i| since[i] > 0)
    });
}

#[test]
fn cluster_client_writes_through_a_reshard_and_a_failover_of_forward_mode_nodes() {
    let Some(cli) = redis_cli("cluster_forward_client_failover") else {
        return;
    };
    let mut six = SixNodes::create(&cli, "fwdcl");
    let replicas = six.replicas();
    assert_eq!(replicas.len(), 3, "{replicas:?}");
    let (replica, target) = replicas[0];
    let source = replicas[1].1;
    let urls: Vec<String> = six
        .ports()
        .iter()
        .map(|p| format!("redis://127.0.0.1:{p}/"))
        .collect();
    let writer = CounterWriter::start(urls, COUNTERS);
    wait_for("the client writing", || writer.acked_total() > 2 * COUNTERS);

    // The reshard: the source's first slots, keys and all, to the target
    // while the client writes.
    let source_before = own_ranges(source);
    reshard(&cli, source, target, RESHARD_SLOTS);
    let source_after = own_ranges(source);
    let target_ranges = own_ranges(target);
    let moved = counters_where(|s| within(&source_before, s) && !within(&source_after, s));
    assert!(
        moved.len() >= 5,
        "{} counters in the moved slots",
        moved.len()
    );
    assert!(moved
        .iter()
        .all(|&i| within(&target_ranges, counter_slot(i))));
    writer.mark();
    each_written_since_mark(&writer, &moved, "INCRs of every moved counter");

    // The failover: the target dies once its replica has what it
    // acknowledged, the moved keys included.
    writer.pause();
    wait_for("the replica caught up", || {
        info_field(replica, "slave_repl_offset") == info_field(target, "master_repl_offset")
    });
    six.node(target).kill();
    writer.mark();
    writer.resume();
    wait_for("the replica serves the killed master's slots", || {
        own_ranges(replica) == target_ranges
    });
    let failed_over = counters_where(|s| within(&target_ranges, s));
    each_written_since_mark(&writer, &failed_over, "INCRs of every failed-over counter");
    let acked = writer.stop();
    let live: Vec<u16> = six.ports().into_iter().filter(|&p| p != target).collect();
    for &port in &live {
        wait_for("the cluster ok without the killed master", || {
            text(&RawConn::connect(port).cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok")
        });
    }
    every_acknowledged_incr_present(&live, &acked);

    // The killed node back: a replica of the node that took its place.
    six.node(target).restart();
    wait_for("the old master follows its replacement", || {
        follows(target, replica)
    });
    every_acknowledged_incr_present(&six.ports(), &acked);
    check_whole(&cli, replica).unwrap_or_else(|e| panic!("{e}"));
}
