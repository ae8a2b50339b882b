//! FAILOVER to a Ruvio replica on shard links (issue 31; docs/replication.md,
//! "Ruvio as a primary", FAILOVER): the primary pauses writes, waits until
//! the replica's offset (the server offset its links acknowledged,
//! `tests/shard_links_offset.rs`) reaches its own, then follows it link by
//! link: shard 0's link asks it to take over (`PSYNC <shard 0's replid>
//! <offset> FAILOVER`), and every link continues its shard's history with
//! `+CONTINUE` (no full sync on either side). Then writes on the new
//! primary reach the old one, whose offset meets the new primary's; a
//! FAILOVER without a target hands back the same way.

mod common;

use common::replication::*;
use common::*;

const SHARD_LINKS: [&str; 2] = ["--replica-shard-links", "yes"];
const CONTINUED: &str = "Master accepted a Partial Resynchronization.";

fn role(server: &Server) -> String {
    let Value::Array(role) = decode(&server.raw().cmd(&["ROLE"])) else {
        panic!("ROLE")
    };
    role[0].text()
}

fn count(text: &str, line: &str) -> usize {
    text.lines().filter(|l| l.contains(line)).count()
}

/// `from` hands over to `to` (FAILOVER with `args`): roles swapped, the old
/// primary follows on links, every link continued, nothing full-synced.
fn hand_over(from: &Server, to: &Server, args: &[&str], shards: usize) {
    let (mut f, mut t) = (from.raw(), to.raw());
    let (full_from, partial_from) = sync_counts(&mut f);
    let (full_to, partial_to) = sync_counts(&mut t);
    let continued_before = count(&from.full_logs(), CONTINUED);
    assert_eq!(f.cmd(args), b"+OK\r\n", "{args:?}");
    wait_for("the replica took over", || role(to) == "master");
    wait_for("the old primary follows it", || {
        let mut c = from.raw();
        field(&mut c, "master_port") == to.port().to_string()
            && field(&mut c, "master_link_status") == "up"
            && field(&mut c, "master_failover_state") == "no-failover"
    });
    assert_eq!(
        f.cmd(&["SET", "k", "v"]),
        b"-READONLY You can't write against a read only replica.\r\n"
    );
    // Each old primary's link continued the new primary's shard history.
    assert_eq!(
        sync_counts(&mut t),
        (full_to, partial_to + shards as u64),
        "the new primary's syncs"
    );
    assert_eq!(sync_counts(&mut f), (full_from, partial_from));
    let logs = from.full_logs();
    assert_eq!(count(&logs, CONTINUED), continued_before + shards, "{logs}");
}

/// Writes on `primary` reach `replica`, and its offset meets the primary's.
fn writes_reach(primary: &Server, replica: &Server, shards: usize, round: &str) {
    let mut p = primary.raw();
    for shard in 0..shards {
        let key = key_on_shard(&format!("failover:{round}:"), shard, shards);
        assert_eq!(p.cmd(&["SET", &key, round]), b"+OK\r\n");
    }
    p.cmd(&["INCR", &format!("failover:{round}:counter")]);
    let target = field(&mut p, "master_repl_offset");
    let mut r = replica.raw();
    wait_for(&format!("{round}: the offsets meet at {target}"), || {
        field(&mut r, "slave_repl_offset") == target
    });
    compare_all(primary, replica, round);
}

fn failover_on_links(shards: usize) {
    let primary = Server::ruvio_with(PortMode::Forward, shards, &SHARD_LINKS);
    let replica = Server::ruvio_with(PortMode::Forward, shards, &SHARD_LINKS);
    let mut p = primary.raw();
    fill(&mut p);
    follow(&replica, &primary);
    write_load(&primary, 3, 40);
    let port = replica.port().to_string();
    hand_over(
        &primary,
        &replica,
        &["FAILOVER", "TO", "127.0.0.1", &port, "TIMEOUT", "10000"],
        shards,
    );
    writes_reach(&replica, &primary, shards, "after");
    // And back, to any replica.
    hand_over(&replica, &primary, &["FAILOVER"], shards);
    writes_reach(&primary, &replica, shards, "back");
}

#[test]
fn failover_to_a_replica_on_2_links() {
    failover_on_links(2);
}

#[test]
fn failover_to_a_replica_on_4_links() {
    failover_on_links(4);
}

/// A primary with `replica-shard-links no` would hand over on the single
/// stream, which a replica on links refuses after writes paused: FAILOVER
/// to it is refused at once, nothing pauses.
#[test]
fn failover_from_a_primary_without_links_is_refused() {
    let primary = Server::ruvio_with(PortMode::Forward, 2, &["--replica-shard-links", "no"]);
    let replica = Server::ruvio_with(PortMode::Forward, 2, &SHARD_LINKS);
    let mut p = primary.raw();
    follow(&replica, &primary);
    assert_eq!(field(&mut p, "connected_slaves"), "1");
    let refused =
        b"-ERR FAILOVER to a replica on shard links needs replica-shard-links yes here\r\n";
    let port = replica.port().to_string();
    assert_eq!(p.cmd(&["FAILOVER", "TO", "127.0.0.1", &port]), refused);
    assert_eq!(p.cmd(&["FAILOVER"]), refused);
    assert_eq!(field(&mut p, "master_failover_state"), "no-failover");
    assert_eq!(p.cmd(&["SET", "still", "writable"]), b"+OK\r\n");
    // Once it takes links, the same FAILOVER hands over.
    assert_eq!(
        p.cmd(&["CONFIG", "SET", "replica-shard-links", "yes"]),
        b"+OK\r\n"
    );
    hand_over(
        &primary,
        &replica,
        &["FAILOVER", "TO", "127.0.0.1", &port, "TIMEOUT", "10000"],
        2,
    );
}
