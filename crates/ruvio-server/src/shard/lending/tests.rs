//! The lending module's tests on two in-process shards.

use crate::shard::inproc::{pipeline, TwoShards};

// "b" and "c" live on shard 0, "a" and "d" on shard 1; client c is on shard c.

/// Transactions pipelined on the same keys of both shards ride on the first
/// one's loan; a command on other keys runs meanwhile, one on their keys waits
/// for them: every reply in order, each seeing what came before it.
#[test]
fn pipelined_transactions_ride_on_one_loan() {
    let mut server = TwoShards::new();
    let tx: &[&[&str]] = &[&["MULTI"], &["INCR", "a"], &["INCR", "b"], &["EXEC"]];
    let mut request = Vec::new();
    for _ in 0..3 {
        request.extend(pipeline(tx));
    }
    request.extend(pipeline(&[&["SET", "d", "x"], &["MGET", "a", "b", "d"]]));
    server.receive_unsettled(1, &request);
    // The first EXEC borrows; the other two joined it; SET d (another key) ran;
    // MGET of their keys waits for them.
    assert!(server.view(1).blocked);
    server.settle();
    let mut expected = Vec::new();
    for n in 1..=3 {
        expected.extend_from_slice(b"+OK\r\n+QUEUED\r\n+QUEUED\r\n");
        expected.extend_from_slice(format!("*2\r\n:{n}\r\n:{n}\r\n").as_bytes());
    }
    expected.extend_from_slice(b"+OK\r\n*3\r\n$1\r\n3\r\n$1\r\n3\r\n$1\r\nx\r\n");
    assert_eq!(
        String::from_utf8_lossy(server.view(1).replies),
        String::from_utf8_lossy(&expected)
    );
    assert!(!server.view(1).holding && !server.view(1).blocked);
}

/// A transaction sharing a key with the one before it, both run in place over
/// the same shards, goes on behind it without waiting for its reply (it is of
/// its chain: `mesh::lending::HeldKeys`), and still sees its writes: a client's
/// transactions run in its order.
#[test]
fn a_transaction_of_the_same_chain_goes_on_behind_the_one_before() {
    let mut server = TwoShards::new();
    server.receive_unsettled(
        1,
        &pipeline(&[
            &["MULTI"],
            &["SET", "a", "1"],
            &["SET", "b", "1"],
            &["EXEC"],
            &["MULTI"],
            &["GET", "b"],
            &["SET", "c", "2"],
            &["SET", "d", "2"],
            &["EXEC"],
        ]),
    );
    assert!(!server.view(1).blocked);
    server.settle();
    assert_eq!(
        String::from_utf8_lossy(server.view(1).replies),
        "+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n+OK\r\n\
         +OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*3\r\n$1\r\n1\r\n+OK\r\n+OK\r\n"
    );
}

/// Moves pipelined between the same keys of two shards: the first borrows, the
/// others run at once on the key it kept, which goes home at the end of the
/// loop iteration; a client of its owner then reads it, and a move after a
/// forwarded command on the kept key waits for that one (its connection's order).
#[test]
fn pipelined_moves_run_on_kept_keys() {
    let mut server = TwoShards::new();
    server.receive(1, &pipeline(&[&["SET", "a", "v"]]));
    server.clear_replies(1);
    let there: &[&str] = &["RENAME", "a", "b"];
    let back: &[&str] = &["RENAME", "b", "a"];
    let mut moves: Vec<&[&str]> = (0..8).flat_map(|_| [there, back]).collect();
    moves.push(there);
    server.receive(1, &pipeline(&moves));
    assert_eq!(
        String::from_utf8_lossy(server.view(1).replies),
        "+OK\r\n".repeat(17)
    );
    assert_eq!(server.ran_on_kept(1), 16);
    // "b" is home on shard 0, where a client of its own reads it.
    server.receive(0, &pipeline(&[&["GET", "b"], &["EXISTS", "a"]]));
    assert_eq!(
        String::from_utf8_lossy(server.view(0).replies),
        "$1\r\nv\r\n:0\r\n"
    );
    server.clear_replies(1);
    server.receive(
        1,
        &pipeline(&[
            &["RENAME", "b", "a"],
            &["APPEND", "a", "1"],
            &["RENAME", "a", "b"],
            &["SET", "b", "w"],
            &["RENAME", "b", "a"],
            &["GET", "a"],
        ]),
    );
    assert_eq!(
        String::from_utf8_lossy(server.view(1).replies),
        "+OK\r\n:2\r\n+OK\r\n+OK\r\n+OK\r\n$1\r\nw\r\n"
    );
}
