//! Transactions on a slot in flight, as Redis Cluster 7.0 answers them: a
//! queued command whose keys a migrating slot no longer holds is refused at
//! once (`-ASK`, `-TRYAGAIN`) and EXEC then aborts; EXEC checks its whole
//! queue's keys together, once, and its commands are not redirected one by
//! one (a key the transaction deletes and reads again reads as gone, not as
//! `-ASK`); WATCH of a key gone elsewhere answers `-ASK`; on the importing
//! node ASKING lasts through MULTI ... EXEC. A Ruvio node and a redis-server
//! node, each beside a redis-server peer, get the same lines and must answer
//! the same bytes.

mod common;

use common::*;

/// `{06S}...` keys are in slot 0 (the tested node's, migrating to the peer);
/// `{foo}...` in slot 12182 (the peer's, migrating to the tested node).
/// `@peer` sends a line to the peer; `--` starts a fresh connection.
const LINES: &[&str] = &[
    "SET {06S}here 1",
    "@peer SET {foo}there 1",
    "CLUSTER SETSLOT 0 MIGRATING $PEERID",
    "@peer CLUSTER SETSLOT 0 IMPORTING $MYID",
    "@peer CLUSTER SETSLOT 12182 MIGRATING $MYID",
    "CLUSTER SETSLOT 12182 IMPORTING $PEERID",
    // The migrating node: a key gone, queued alone or beside one still here.
    "MULTI",
    "SET {06S}gone 1",
    "EXEC",
    "--",
    "MULTI",
    "GET {06S}here",
    "GET {06S}gone",
    "EXEC",
    "--",
    "MULTI",
    "MGET {06S}here {06S}gone",
    "EXEC",
    "--",
    "MULTI",
    "GET {06S}here",
    "EXEC",
    "--",
    "WATCH {06S}gone",
    "WATCH {06S}here",
    "MULTI",
    "GET {06S}here",
    "EXEC",
    "--",
    // Checked when queued and at EXEC, never again inside it.
    "MULTI",
    "SET {06S}here 2",
    "DEL {06S}here",
    "GET {06S}here",
    "EXEC",
    "--",
    "SET {06S}here 1",
    "ASKING",
    "MULTI",
    "SET {06S}gone 1",
    "EXEC",
    "--",
    // The importing node: ASKING lasts through the transaction, one command
    // alone does not hold it.
    "MULTI",
    "SET {foo}new 1",
    "EXEC",
    "--",
    "ASKING",
    "MULTI",
    "SET {foo}new 1",
    "GET {foo}new",
    "EXEC",
    "GET {foo}new",
    "--",
    "ASKING",
    "MULTI",
    "MGET {foo}new {foo}absent",
    "EXEC",
    "--",
    "ASKING",
    "MULTI",
    "GET {foo}new",
    "DISCARD",
    "GET {foo}new",
    "--",
    "MULTI",
    "ASKING",
    "GET {foo}new",
    "EXEC",
    "--",
    "ASKING",
    "WATCH {foo}new",
    "GET {foo}new",
];

#[test]
fn transactions_on_a_slot_in_flight_answer_as_redis_server() {
    if require_redis_server("cluster_transactions_in_flight").is_none() {
        return;
    }
    let side = common::cluster_process::SideBySide::start(&unique_dir("tx-in-flight"));
    let [ruvio, redis] = side.replay(LINES);
    assert_eq!(ruvio, redis);
    // The lines did reach the cases they name (not, say, MOVED everywhere).
    let all = ruvio.join("\n");
    for expected in ["-ASK 0 ", "-TRYAGAIN", "-EXECABORT", "+QUEUED"] {
        assert!(all.contains(expected), "no {expected} in\n{all}");
    }
}
