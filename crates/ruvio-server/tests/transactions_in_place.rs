//! EXEC over keys of several shards run in place (forward mode, 2 and 4 shards:
//! docs/transactions.md, "In place"): each shard runs its part where its keys
//! live, the keys of every part but the last held until the last ran.
//!
//! What must hold, with the real binary and several clients at once:
//! - transactions that move units between keys of different shards never show a
//!   reader a sum other than the total, whether the reader reads in a transaction
//!   (itself run in place) or key by key;
//! - no reader ever sees part of a transaction: with every transaction adding 1
//!   to every key, a GET after another GET never returns less than the first did
//!   (a key whose part ran is invisible until every part ran);
//! - the path is the in-place one: INFO stats counts the EXECs as
//!   `cross_shard_exec_in_place` and none as `cross_shard_exec_borrowed`;
//! - with a log the same transactions borrow (the log sees a borrowed group);
//! - beside transactions that borrow (WATCH) and that run on one other owner,
//!   every kind waits for the others' keys and none deadlocks.

mod common;

use common::*;
use std::thread;

const UNITS_PER_KEY: i64 = 1_000;
const WRITERS: usize = 3;
const ROUNDS: usize = 300;

/// One key on each shard (two on each with fewer than 4 shards, so a queue can
/// also name two keys of one shard).
fn keys(prefix: &str, shards: usize) -> Vec<String> {
    let per_shard = if shards < 4 { 2 } else { 1 };
    (0..shards)
        .flat_map(|s| (0..per_shard).map(move |i| (s, i)))
        .map(|(s, i)| key_on_shard(&format!("{prefix}{i}-"), s, shards))
        .collect()
}

fn ok(c: &mut RawConn, args: &[&str]) {
    assert_eq!(c.cmd(args), b"+OK\r\n", "{args:?}");
}

fn queued(c: &mut RawConn, args: &[&str]) {
    assert_eq!(c.cmd(args), b"+QUEUED\r\n", "{args:?}");
}

/// Sum of `keys` read in one transaction.
fn sum_in_exec(c: &mut RawConn, keys: &[String]) -> i64 {
    ok(c, &["MULTI"]);
    for key in keys {
        queued(c, &["GET", key]);
    }
    let reply = c.cmd(&["EXEC"]);
    let Value::Array(items) = decode(&reply) else {
        panic!("not an array: {}", show(&reply));
    };
    items
        .iter()
        .map(|v| v.text().parse::<i64>().expect("a number"))
        .sum()
}

fn moves_units_between_shards(shards: usize) {
    let server = Server::forward(shards);
    let keys = keys("ip-units", shards);
    let total = UNITS_PER_KEY * keys.len() as i64;
    let mut setup = server.raw();
    for key in &keys {
        ok(&mut setup, &["SET", key, &UNITS_PER_KEY.to_string()]);
    }
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (keys, mut c) = (keys.clone(), server.raw());
            thread::spawn(move || {
                let mut seed = w as u64 + 1;
                let shard = |k: usize| shard_of_key(&keys[k], shards);
                for _ in 0..ROUNDS {
                    // Two or three keys, in any order, on at least two shards.
                    let from = next_random(&mut seed) % keys.len();
                    let others: Vec<usize> = (0..keys.len())
                        .filter(|&k| shard(k) != shard(from))
                        .collect();
                    let to = others[next_random(&mut seed) % others.len()];
                    let third = next_random(&mut seed) % keys.len();
                    let units = (1 + next_random(&mut seed) % 5).to_string();
                    ok(&mut c, &["MULTI"]);
                    queued(&mut c, &["DECRBY", &keys[from], &units]);
                    queued(&mut c, &["INCRBY", &keys[third], "1"]);
                    queued(&mut c, &["INCRBY", &keys[to], &units]);
                    queued(&mut c, &["DECR", &keys[third]]);
                    let reply = c.cmd(&["EXEC"]);
                    assert!(reply.starts_with(b"*4\r\n:"), "{}", show(&reply));
                }
            })
        })
        .collect();
    let in_exec = {
        let (keys, mut c) = (keys.clone(), server.raw());
        thread::spawn(move || {
            for _ in 0..ROUNDS {
                assert_eq!(sum_in_exec(&mut c, &keys), total, "half a transaction seen");
            }
        })
    };
    for writer in writers {
        writer.join().expect("writer");
    }
    in_exec.join().expect("reader");
    // Once the writers are done, GETs key by key see the total too.
    let by_get = sum_by_get(&mut setup, &keys);
    assert_eq!(by_get, total);
    assert_eq!(info_stat(&mut setup, "cross_shard_exec_borrowed"), 0);
    let in_place = info_stat(&mut setup, "cross_shard_exec_in_place");
    assert!(
        in_place >= (WRITERS * ROUNDS) as u64,
        "{in_place} EXECs ran in place"
    );
}

/// Every transaction adds one to every key; readers GET the keys one at a time
/// in a shuffled order: a later GET never returns less than an earlier one did.
fn no_half_transaction_seen_by_gets(shards: usize) {
    let server = Server::forward(shards);
    let keys = keys("ip-count", shards);
    let writers: Vec<_> = (0..WRITERS)
        .map(|_| {
            let (keys, mut c) = (keys.clone(), server.raw());
            thread::spawn(move || {
                for _ in 0..ROUNDS {
                    ok(&mut c, &["MULTI"]);
                    for key in &keys {
                        queued(&mut c, &["INCR", key]);
                    }
                    let reply = c.cmd(&["EXEC"]);
                    assert!(reply.starts_with(b"*"), "{}", show(&reply));
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (keys, mut c) = (keys.clone(), server.raw());
            thread::spawn(move || {
                let mut seed = 99 + r as u64;
                let mut read = 0;
                while read < ROUNDS * 4 {
                    let mut seen = 0i64;
                    let mut order: Vec<usize> = (0..keys.len()).collect();
                    for i in (1..order.len()).rev() {
                        order.swap(i, next_random(&mut seed) % (i + 1));
                    }
                    for &k in &order {
                        let reply = c.cmd(&["GET", &keys[k]]);
                        let value = match decode(&reply) {
                            Value::Nil => 0,
                            v => v.text().parse::<i64>().expect("a number"),
                        };
                        assert!(
                            value >= seen,
                            "{} read {value} after another key read {seen}: half a transaction",
                            keys[k]
                        );
                        seen = value;
                        read += 1;
                    }
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().expect("writer");
    }
    for reader in readers {
        reader.join().expect("reader");
    }
    let mut c = server.raw();
    for key in &keys {
        let count = decode(&c.cmd(&["GET", key])).text();
        assert_eq!(count, (WRITERS * ROUNDS).to_string(), "{key}");
    }
    assert_eq!(info_stat(&mut c, "cross_shard_exec_borrowed"), 0);
}

/// Transactions in place, borrowed ones (with WATCH, retried when touched) and
/// ones whose keys are all on one other shard (run on that owner) move units
/// between the same keys at once; readers in place see the total throughout,
/// and every writer finishes (a deadlock would hang the test).
fn in_place_beside_borrowed_and_owner_transactions(shards: usize) {
    let server = Server::forward(shards);
    let keys = keys("ip-mixed", shards);
    let total = UNITS_PER_KEY * keys.len() as i64;
    let mut setup = server.raw();
    for key in &keys {
        ok(&mut setup, &["SET", key, &UNITS_PER_KEY.to_string()]);
    }
    let shard = |k: &String| shard_of_key(k, shards);
    // Two keys of the last shard: a queue on them runs on that owner.
    let last: Vec<String> = keys
        .iter()
        .filter(|k| shard(k) == shards - 1)
        .cloned()
        .collect();
    let last_pair = match last.len() {
        1 => (last[0].clone(), last[0].clone()),
        _ => (last[0].clone(), last[1].clone()),
    };
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let (keys, mut c) = (keys.clone(), server.raw());
        writers.push(thread::spawn(move || {
            let mut seed = 7 + w as u64;
            for _ in 0..ROUNDS {
                let (a, b) = (
                    next_random(&mut seed) % keys.len(),
                    next_random(&mut seed) % keys.len(),
                );
                ok(&mut c, &["MULTI"]);
                queued(&mut c, &["DECR", &keys[a]]);
                queued(&mut c, &["INCR", &keys[b]]);
                assert!(c.cmd(&["EXEC"]).starts_with(b"*2\r\n"));
            }
        }));
    }
    {
        // Borrowed: WATCH keeps the transaction off the in-place path.
        let (keys, mut c) = (keys.clone(), server.raw());
        writers.push(thread::spawn(move || {
            let (first, last) = (&keys[0], &keys[keys.len() - 1]);
            for _ in 0..ROUNDS / 3 {
                loop {
                    ok(&mut c, &["WATCH", first]);
                    ok(&mut c, &["MULTI"]);
                    queued(&mut c, &["INCRBY", first, "3"]);
                    queued(&mut c, &["DECRBY", last, "3"]);
                    if c.cmd(&["EXEC"]).starts_with(b"*2\r\n") {
                        break;
                    }
                }
            }
        }));
    }
    {
        // On one owner: both keys on the last shard, the client on any shard.
        let ((x, y), mut c) = (last_pair, server.raw());
        writers.push(thread::spawn(move || {
            for _ in 0..ROUNDS {
                ok(&mut c, &["MULTI"]);
                queued(&mut c, &["DECRBY", &x, "2"]);
                queued(&mut c, &["INCRBY", &y, "2"]);
                assert!(c.cmd(&["EXEC"]).starts_with(b"*2\r\n"));
            }
        }));
    }
    let reader = {
        let (keys, mut c) = (keys.clone(), server.raw());
        thread::spawn(move || {
            for _ in 0..ROUNDS {
                assert_eq!(sum_in_exec(&mut c, &keys), total, "half a transaction seen");
            }
        })
    };
    for writer in writers {
        writer.join().expect("writer");
    }
    reader.join().expect("reader");
    assert_eq!(sum_in_exec(&mut setup, &keys), total);
    assert!(info_stat(&mut setup, "cross_shard_exec_borrowed") >= (ROUNDS / 3) as u64);
    assert!(info_stat(&mut setup, "cross_shard_exec_in_place") > 0);
}

/// With a log kept, a transaction across shards borrows its keys, as the log
/// records it (docs/durability.md), and answers the same.
#[test]
fn with_a_log_it_borrows() {
    let dir = unique_dir("in-place-log");
    let dir = dir.to_str().expect("a path");
    let server = Server::ruvio_with(
        PortMode::Forward,
        2,
        &["--dir", dir, "--durability", "everysec"],
    );
    let keys = keys("ip-log", 2);
    let mut c = server.raw();
    ok(&mut c, &["MULTI"]);
    for key in &keys {
        queued(&mut c, &["INCR", key]);
    }
    assert_eq!(c.cmd(&["EXEC"]), b"*4\r\n:1\r\n:1\r\n:1\r\n:1\r\n");
    assert_eq!(info_stat(&mut c, "cross_shard_exec_in_place"), 0);
    assert_eq!(info_stat(&mut c, "cross_shard_exec_borrowed"), 1);
}

#[test]
fn two_shards_beside_borrowed_and_owner_transactions() {
    in_place_beside_borrowed_and_owner_transactions(2);
}

#[test]
fn four_shards_beside_borrowed_and_owner_transactions() {
    in_place_beside_borrowed_and_owner_transactions(4);
}

#[test]
fn two_shards_move_units() {
    moves_units_between_shards(2);
}

#[test]
fn four_shards_move_units() {
    moves_units_between_shards(4);
}

#[test]
fn two_shards_no_half_transaction() {
    no_half_transaction_seen_by_gets(2);
}

#[test]
fn four_shards_no_half_transaction() {
    no_half_transaction_seen_by_gets(4);
}
