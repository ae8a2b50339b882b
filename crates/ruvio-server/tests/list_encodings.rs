//! Redis 7.2's list encodings as exact replies. differential_collections.rs compares
//! Ruvio with Redis 7.0, which always answers `quicklist` for a list, so the listpack /
//! quicklist conversions Ruvio follows (those of 7.2) are checked here instead, with
//! expected replies written out. A file of its own because it starts its own server and
//! shares nothing with the random sequences but the family probe.

// Only `supported_families` of the collections modules is used here.
#[allow(dead_code)]
mod collections;
mod common;

use collections::generator::{supported_families, Family};
use common::*;

/// OBJECT ENCODING of lists as Redis 7.2 converts them (src/t_list.c), which Redis 7.0
/// cannot check (it always answers quicklist). A list is a listpack until a write would
/// take it past `list-max-listpack-size`: a count (1..=5; 0 means 1) or, for -1..=-5, a
/// size of 4, 8, 16, 32 or 64 KB (a count limit also converts past 8 KB). The check uses
/// the listpack's bytes plus the raw length of the new elements, and runs before the write
/// (LINSERT converts even when the pivot is missing). It becomes a listpack again after a
/// removal (pops, LREM, LTRIM, LMOVE's source, LSET) only when it is a single quicklist
/// node within half the limit, so that a list at the boundary does not flip on every
/// write. COPY and RENAME keep the encoding, and CONFIG SET acts on the next write only.
///
/// The expected replies were checked against Valkey 9.1 (forked from Redis 7.2, same
/// rules): `RUVIO_TEST_TARGET=redis REDIS_SERVER_BIN=<valkey-server>`. With a real Redis
/// older than 7.2 as the target the test is skipped.
#[test]
fn list_encoding_transitions() {
    let server = Server::forward(1);
    let mut conn = server.raw();
    if !supported_families(&mut conn).contains(&Family::Lists) {
        eprintln!("SKIPPED list_encoding_transitions: the target has no list commands yet");
        return;
    }
    assert_eq!(conn.cmd(&["RPUSH", "probe", "a"]), b":1\r\n");
    if target() == Target::Redis
        && conn.cmd(&["OBJECT", "ENCODING", "probe"]) != b"$8\r\nlistpack\r\n"
    {
        eprintln!(
            "SKIPPED list_encoding_transitions: this redis-server predates 7.2's list \
             encodings (set REDIS_SERVER_BIN to a 7.2+ server)"
        );
        return;
    }
    const LISTPACK: &[u8] = b"$8\r\nlistpack\r\n";
    const QUICKLIST: &[u8] = b"$9\r\nquicklist\r\n";
    let mut check = |args: &[&str], expected: &[u8]| {
        let reply = conn.cmd(args);
        assert_eq!(
            reply,
            expected,
            "{}: expected {}, got {}",
            args.join(" ").chars().take(80).collect::<String>(),
            show(expected),
            show(&reply)
        );
    };
    let encoding = |key: &'static str| -> [&'static str; 3] { ["OBJECT", "ENCODING", key] };
    let bulk = |s: &str| format!("${}\r\n{s}\r\n", s.len()).into_bytes();

    // Count limit 4: the fifth element converts; popping back needs <= 2 elements.
    check(
        &["CONFIG", "SET", "list-max-listpack-size", "4"],
        b"+OK\r\n",
    );
    check(&["RPUSH", "l", "a", "b", "c", "d"], b":4\r\n");
    check(&encoding("l"), LISTPACK);
    check(&["RPUSH", "l", "e"], b":5\r\n");
    check(&encoding("l"), QUICKLIST);
    check(&["RPOP", "l"], b"$1\r\ne\r\n");
    check(&encoding("l"), QUICKLIST);
    check(&["RPOP", "l"], b"$1\r\nd\r\n");
    check(&encoding("l"), QUICKLIST);
    check(&["RPOP", "l"], b"$1\r\nc\r\n");
    check(&encoding("l"), LISTPACK);

    // Only a single-node quicklist converts back: five pushes make nodes [a b c d] [e];
    // after three LPOPs two elements remain, but in two nodes.
    check(&["DEL", "l"], b":1\r\n");
    check(&["RPUSH", "l", "a", "b", "c", "d", "e"], b":5\r\n");
    check(&encoding("l"), QUICKLIST);
    for popped in ["a", "b", "c"] {
        check(&["LPOP", "l"], &bulk(popped));
    }
    check(&encoding("l"), QUICKLIST);
    check(&["LPOP", "l"], b"$1\r\nd\r\n");
    check(&encoding("l"), LISTPACK);

    // LINSERT checks the limit before it looks for the pivot.
    check(&["DEL", "l"], b":1\r\n");
    check(&["RPUSH", "l", "a", "b", "c", "d"], b":4\r\n");
    check(&["LINSERT", "l", "BEFORE", "nosuchpivot", "x"], b":-1\r\n");
    check(&encoding("l"), QUICKLIST);

    // LTRIM and LREM shrink: what is left is one node within half the limit.
    check(&["RPUSH", "t", "a", "b", "c", "d", "e", "f"], b":6\r\n");
    check(&encoding("t"), QUICKLIST);
    check(&["LTRIM", "t", "0", "1"], b"+OK\r\n");
    check(&encoding("t"), LISTPACK);
    check(&["RPUSH", "r", "a", "x", "x", "x", "x"], b":5\r\n");
    check(&encoding("r"), QUICKLIST);
    check(&["LREM", "r", "0", "x"], b":4\r\n");
    check(&encoding("r"), LISTPACK);

    // COPY and RENAME keep the encoding; CONFIG SET changes nothing until the next write.
    check(&["RPUSH", "c", "a", "b", "c"], b":3\r\n");
    check(&["COPY", "c", "c2"], b":1\r\n");
    check(&encoding("c2"), LISTPACK);
    check(
        &["CONFIG", "SET", "list-max-listpack-size", "2"],
        b"+OK\r\n",
    );
    check(&encoding("c"), LISTPACK);
    check(&["RPUSH", "c", "d"], b":4\r\n");
    check(&encoding("c"), QUICKLIST);
    check(&["COPY", "c", "c3"], b":1\r\n");
    check(&encoding("c3"), QUICKLIST);
    check(&["RENAME", "c3", "c4"], b"+OK\r\n");
    check(&encoding("c4"), QUICKLIST);

    // LMOVE: the source shrinks (count limit 2, so back at 1) and the destination grows.
    check(&["RPUSH", "s", "a", "b", "c"], b":3\r\n");
    check(&encoding("s"), QUICKLIST);
    check(&["LMOVE", "s", "d", "RIGHT", "LEFT"], b"$1\r\nc\r\n");
    check(&encoding("s"), QUICKLIST);
    check(&encoding("d"), LISTPACK);
    check(&["LMOVE", "s", "d", "RIGHT", "LEFT"], b"$1\r\nb\r\n");
    check(&encoding("s"), LISTPACK);
    check(&encoding("d"), LISTPACK);
    check(&["LMOVE", "s", "d", "RIGHT", "LEFT"], b"$1\r\na\r\n");
    check(&["EXISTS", "s"], b":0\r\n");
    check(&encoding("d"), QUICKLIST);

    // Count limit 0 means 1, and half of it is 0: such a quicklist never converts back.
    check(
        &["CONFIG", "SET", "list-max-listpack-size", "0"],
        b"+OK\r\n",
    );
    check(&["RPUSH", "z", "a"], b":1\r\n");
    check(&encoding("z"), LISTPACK);
    check(&["RPUSH", "z", "b"], b":2\r\n");
    check(&encoding("z"), QUICKLIST);
    check(&["RPOP", "z"], b"$1\r\nb\r\n");
    check(&encoding("z"), QUICKLIST);

    // A count limit still converts past 8 KB; going back only looks at the count.
    let z3000 = "z".repeat(3000);
    check(
        &["CONFIG", "SET", "list-max-listpack-size", "5"],
        b"+OK\r\n",
    );
    check(&["RPUSH", "big", &z3000, &z3000, &z3000], b":3\r\n");
    check(&encoding("big"), QUICKLIST);
    check(&["RPOP", "big"], &bulk(&z3000));
    check(&encoding("big"), LISTPACK);

    // Size limit 4 KB with 900-byte elements (904 bytes each in a listpack): four fit,
    // the fifth converts; back to a listpack at two (1815 bytes <= 2048), not at three.
    check(
        &["CONFIG", "SET", "list-max-listpack-size", "-1"],
        b"+OK\r\n",
    );
    let elements: Vec<String> = (0..5).map(|i| format!("{i}{}", "x".repeat(899))).collect();
    for (i, element) in elements.iter().enumerate().take(4) {
        check(
            &["RPUSH", "b", element],
            format!(":{}\r\n", i + 1).as_bytes(),
        );
    }
    check(&encoding("b"), LISTPACK);
    check(&["RPUSH", "b", &elements[4]], b":5\r\n");
    check(&encoding("b"), QUICKLIST);
    check(&["RPOP", "b"], &bulk(&elements[4]));
    check(&encoding("b"), QUICKLIST);
    check(&["RPOP", "b"], &bulk(&elements[3]));
    check(&encoding("b"), QUICKLIST);
    check(&["RPOP", "b"], &bulk(&elements[2]));
    check(&encoding("b"), LISTPACK);

    // LSET grows (a 5000-byte element) and shrinks (a one-element list is one node).
    check(&["RPUSH", "e", "a"], b":1\r\n");
    check(&["LSET", "e", "0", &"y".repeat(5000)], b"+OK\r\n");
    check(&encoding("e"), QUICKLIST);
    check(&["LSET", "e", "0", "a"], b"+OK\r\n");
    check(&encoding("e"), LISTPACK);

    // The default -2 (8 KB): one 9000-byte element converts, popping it converts back.
    check(
        &["CONFIG", "SET", "list-max-listpack-size", "-2"],
        b"+OK\r\n",
    );
    check(&["RPUSH", "n", "1", "2", "3"], b":3\r\n");
    check(&encoding("n"), LISTPACK);
    let w9000 = "w".repeat(9000);
    check(&["LPUSH", "n", &w9000], b":4\r\n");
    check(&encoding("n"), QUICKLIST);
    check(&["LPOP", "n"], &bulk(&w9000));
    check(&encoding("n"), LISTPACK);
}
