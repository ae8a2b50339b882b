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
//! slots.

mod common;

use common::cluster_process::{info_field, own_line, three_masters_and_a_replica};
use common::cluster_tools::{redis_cli, reshard};
use common::replication::wait_for;
use redis::cluster::ClusterClient;
use redis::Commands;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const COUNTERS: usize = 200;

/// Acknowledged INCRs per counter, and those acknowledged after `killed`.
struct Counts {
    acked: Vec<AtomicUsize>,
    after_kill_low_slots: AtomicUsize,
}

fn counter(i: usize) -> String {
    format!("counter:{i}")
}

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
    let counts = Arc::new(Counts {
        acked: (0..COUNTERS).map(|_| AtomicUsize::new(0)).collect(),
        after_kill_low_slots: AtomicUsize::new(0),
    });
    let flag = || Arc::new(AtomicBool::new(false));
    let (stop, paused, killed) = (flag(), flag(), flag());
    let writer = {
        let (counts, urls) = (counts.clone(), urls.clone());
        let (stop, paused, killed) = (stop.clone(), paused.clone(), killed.clone());
        std::thread::spawn(move || {
            let client = ClusterClient::builder(urls)
                .connection_timeout(Duration::from_secs(1))
                .response_timeout(Duration::from_secs(1))
                .retries(2)
                .build()
                .expect("ClusterClient");
            let mut conn = None;
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                if paused.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
                let c = match conn.as_mut() {
                    Some(c) => c,
                    None => match client.get_connection() {
                        Ok(c) => conn.insert(c),
                        Err(_) => {
                            std::thread::sleep(Duration::from_millis(100));
                            continue;
                        }
                    },
                };
                let key = counter(i % COUNTERS);
                let was_killed = killed.load(Ordering::SeqCst);
                match c.incr::<_, _, i64>(&key, 1) {
                    Ok(_) => {
                        counts.acked[i % COUNTERS].fetch_add(1, Ordering::SeqCst);
                        if was_killed && ruvio_engine::slot::key_slot(key.as_bytes()) <= 5460 {
                            counts.after_kill_low_slots.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    // The failover's errors: a new connection refreshes the
                    // slot map as well as the client's own retries do.
                    Err(_) => {
                        conn = None;
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
                i += 1;
            }
        })
    };
    let (first, second, third) = (masters[0].port, masters[1].port, masters[2].port);
    let acked =
        |counts: &Counts| -> usize { counts.acked.iter().map(|a| a.load(Ordering::SeqCst)).sum() };
    wait_for("the client writing", || {
        counts
            .acked
            .iter()
            .map(|a| a.load(Ordering::SeqCst))
            .sum::<usize>()
            > 2 * COUNTERS
    });
    // Keys move with their slots while the client writes.
    reshard(&cli, second, third, 1000);
    let before = acked(&counts);
    wait_for("writes after the reshard", || {
        acked(&counts) > before + COUNTERS
    });
    // The first master dies once its replica has what it acknowledged: the
    // replica takes its slots.
    paused.store(true, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(100));
    wait_for("the replica caught up", || {
        info_field(replica.port, "slave_repl_offset") == info_field(first, "master_repl_offset")
    });
    masters[0].kill();
    killed.store(true, Ordering::SeqCst);
    paused.store(false, Ordering::SeqCst);
    wait_for("the replica serves the first master's slots", || {
        own_line(replica.port).contains("master") && own_line(replica.port).contains(" 0-5460")
    });
    wait_for("acknowledged writes on the failed master's slots", || {
        counts.after_kill_low_slots.load(Ordering::SeqCst) >= 50
    });
    stop.store(true, Ordering::SeqCst);
    writer.join().expect("the writer thread");

    let urls: Vec<String> = [second, third, replica.port]
        .iter()
        .map(|p| format!("redis://127.0.0.1:{p}/"))
        .collect();
    let mut check = ClusterClient::new(urls).unwrap().get_connection().unwrap();
    for i in 0..COUNTERS {
        let acked = counts.acked[i].load(Ordering::SeqCst);
        let value: Option<usize> = check.get(counter(i)).unwrap();
        let value = value.unwrap_or(0);
        assert!(
            value >= acked,
            "{}: {value} < {acked} acknowledged",
            counter(i)
        );
    }
}
