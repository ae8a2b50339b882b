//! CLIENT TRACKING with three shards (forward mode) against redis-server 7: a
//! tracking reader on a third shard (neither the write's origin nor an owner
//! of its keys) reads keys of two other shards A and B; a writer on A writes
//! them over both (MSET, DEL, UNLINK split per owner; MULTI/EXEC, MSETNX and
//! scripts run on borrowed keys). Redis sends one message per key in the
//! order the command writes them; Ruvio's owner B sends the invalidations it
//! owes the reader back to the origin A, tagged with where its channel to
//! the reader's shard stood, A relays them in key order, and the reader's
//! shard holds one until it took B's messages up to the tag
//! (docs/tracking.md). The reader's pushes (RESP3) and its REDIRECT target's
//! messages (RESP2) are compared byte for byte, step by step, as in
//! `differential_tracking.rs` (the sessions are `common::tracking`'s).

mod common;

use common::tracking::*;
use common::*;

/// Shards of the server under test.
const SHARDS: usize = 3;

/// Each assignment of the roles to the shards, as `(A, B, C, target)`: the
/// writer and the `a` keys on A, the `b` keys on B, the reader on C, its RESP2
/// target on `target`. Rotations, so B's channel to C is read before A's
/// (the receiver reads its channels in shard order) in some and after in
/// others.
const ROLES: [(usize, usize, usize, usize); 3] = [(0, 1, 2, 2), (1, 2, 0, 1), (2, 0, 1, 0)];

fn layout((a, b, c, target): (usize, usize, usize, usize)) -> Layout {
    Layout {
        keys: [
            key_on_shard("xw", b, SHARDS),
            key_on_shard("xx", a, SHARDS),
            key_on_shard("xy", b, SHARDS),
            key_on_shard("xz", a, SHARDS),
        ],
        reader: c,
        writer: a,
        target,
    }
}

/// Runs every session of `lending`'s kind on Redis and Ruvio and compares
/// them step by step; `check` holds Redis's transcript to not being vacuous.
fn compare(lending: bool, check: impl Fn(&Layout, bool, &Transcript)) {
    let Some(servers) = DiffServers::forward("differential_tracking_3shards", SHARDS) else {
        return;
    };
    for resp3 in [true, false] {
        for roles in ROLES {
            let layout = layout(roles);
            let label = format!("resp3 {resp3}, (A, B, C, target) {roles:?}");
            compare_session(&servers, &layout, (resp3, lending), &label, |expected| {
                check(&layout, resp3, expected)
            });
        }
    }
}

/// MSET, DEL, MSET, UNLINK over keys of A and B by a writer on A: the third
/// shard's reader gets one message per key in the command's key order.
#[test]
fn a_third_shard_reader_gets_split_writes_in_key_order_as_redis() {
    compare(false, |layout, resp3, expected| {
        let [b0, a0, b1, a1] = &layout.keys;
        let orders = [
            ("MSET", [b0, a0, b1, a1]),
            ("DEL", [a1, b1, a0, b0]),
            ("UNLINK", [b1, a0, a1, b0]),
        ];
        for (write, keys) in orders {
            let pushes = step(expected, &format!("{write}: reader's pushes"));
            in_order(pushes, &keys, resp3);
        }
    });
}

/// MULTI/EXEC, DEL, MSETNX, EVAL and a pipelined pair of scripts over keys of
/// A and B by a writer on A (the lending path: A borrows B's keys): the third
/// shard's reader gets one message per key in write order.
#[test]
fn a_third_shard_reader_gets_lending_writes_in_write_order_as_redis() {
    compare(true, |layout, resp3, expected| {
        let [b0, a0, b1, a1] = &layout.keys;
        let orders = [
            ("MULTI/EXEC", [b0, a0, b1, a1]),
            ("EVAL", [a1, b0, a0, b1]),
            ("EVAL batch", [b1, a0, b0, a1]),
        ];
        for (write, keys) in orders {
            let pushes = step(expected, &format!("{write}: reader's pushes"));
            in_order(pushes, &keys, resp3);
        }
    });
}
