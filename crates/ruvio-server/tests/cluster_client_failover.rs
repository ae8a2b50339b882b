//! The `redis` crate's `ClusterClient` (redis-rs) through a reshard and a
//! failover of Ruvio nodes, as issue 35 asks of cluster clients: three
//! masters and a replica of the first, each its own `ruvio --cluster-enabled
//! yes` process; a client thread INCRs 200 counters spread over every slot and
//! counts each acknowledged INCR, while `redis-cli --cluster reshard` moves
//! 1,000 slots (and their keys) from the second master to the third (`-ASK`,
//! then `-MOVED`, followed by the client) and then the first master is killed
//! (`kill -9`, once the replica has every write acknowledged so far:
//! replication is asynchronous, as Redis's): its replica takes the slots and
//! the client, refreshing its slot map, goes on writing. At the end every counter holds at least its
//! acknowledged INCRs (one that failed may still have been applied), and
//! INCRs were acknowledged after the failover on keys of the failed master's
//! slots. Forward mode as one node: tests/cluster_forward_client_failover.rs.

mod common;

use common::cluster_process::{info_field, own_line, three_masters_and_a_replica};
use common::cluster_tools::{redis_cli, reshard};
use common::counter_writer::{counter_slot, every_acknowledged_incr_present, CounterWriter};
use common::replication::wait_for;

const COUNTERS: usize = 200;

#[test]
fn cluster_client_writes_through_a_reshard_and_a_failover() {
    let Some(cli) = redis_cli("cluster_client_failover") else {
        return;
    };
    let (mut masters, replica) = three_masters_and_a_replica("rs-client", &[]);
    let urls: Vec<String> = masters
        .iter()
        .chain([&replica])
        .map(|n| format!("redis://127.0.0.1:{}/", n.port))
        .collect();
    let writer = CounterWriter::start(urls, COUNTERS);
    let (first, second, third) = (masters[0].port, masters[1].port, masters[2].port);
    wait_for("the client writing", || writer.acked_total() > 2 * COUNTERS);
    // Keys move with their slots while the client writes.
    reshard(&cli, second, third, 1000);
    let before = writer.acked_total();
    wait_for("writes after the reshard", || {
        writer.acked_total() > before + COUNTERS
    });
    // The first master dies once its replica has what it acknowledged: the
    // replica takes its slots.
    writer.pause();
    wait_for("the replica caught up", || {
        info_field(replica.port, "slave_repl_offset") == info_field(first, "master_repl_offset")
    });
    masters[0].kill();
    writer.mark();
    writer.resume();
    wait_for("the replica serves the first master's slots", || {
        own_line(replica.port).contains("master") && own_line(replica.port).contains(" 0-5460")
    });
    wait_for("acknowledged writes on the failed master's slots", || {
        let since = writer.acked_since_mark();
        let low: usize = (0..COUNTERS)
            .filter(|&i| counter_slot(i) <= 5460)
            .map(|i| since[i])
            .sum();
        low >= 50
    });
    let acked = writer.stop();
    every_acknowledged_incr_present(&[second, third, replica.port], &acked);
}
