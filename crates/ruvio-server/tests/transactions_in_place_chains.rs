//! Contended EXECs in place passing their keys down a coordinator's chain
//! (forward mode, 2 and 4 shards: docs/cross-shard.md, "Lock passing"): many
//! clients on every shard pipeline transactions over the same few keys, so a
//! shard's held keys are joined by the later transactions of the same
//! coordinator over the same shards instead of waiting a round trip each.
//!
//! What must hold, with the real binary:
//! - transactions that move units between keys of several shards, pipelined
//!   sixteen at a time from clients of every shard (over two shards, and with
//!   4 shards over varying sets of shards, so chains of one coordinator differ),
//!   never show a reader summing in its own pipelined EXECs a sum other than
//!   the total;
//! - with every transaction adding 1 to every key, a reader reading key by key
//!   never reads less after more: no half transaction is seen, though a key is
//!   held by several transactions at once;
//! - the chains did pass keys (`cross_shard_exec_parts_joined` > 0), nothing
//!   borrowed, and every pipeline is answered (a deadlock would hang the test).

mod common;

use common::*;
use std::thread;

const UNITS_PER_KEY: i64 = 1_000;
/// Writing clients per shard (each lands on that shard).
const WRITERS_PER_SHARD: usize = 2;
/// EXECs each writer sends in one write, as scripts/transactions_bench.py does.
const PIPELINE: usize = 16;
const BATCHES: usize = 25;

/// Ten keys over the shards (as the benchmark's contended row), each shard's
/// in turn.
fn keys(prefix: &str, shards: usize) -> Vec<String> {
    (0..10)
        .map(|i| key_on_shard(&format!("{prefix}{i}-"), i % shards, shards))
        .collect()
}

/// Send `transactions` (each a queue of commands) in one write; return each
/// EXEC's reply, after checking MULTI and every QUEUED.
fn pipelined_execs(c: &mut RawConn, transactions: &[Vec<Vec<String>>]) -> Vec<Value> {
    let mut request = Vec::new();
    for queue in transactions {
        request.extend(encode(&["MULTI"]));
        for command in queue {
            request.extend(encode(command));
        }
        request.extend(encode(&["EXEC"]));
    }
    c.send(&request);
    transactions
        .iter()
        .map(|queue| {
            assert_eq!(c.read_reply(), b"+OK\r\n");
            for _ in queue {
                assert_eq!(c.read_reply(), b"+QUEUED\r\n");
            }
            let reply = c.read_reply();
            let value = decode(&reply);
            assert!(
                matches!(&value, Value::Array(items) if items.len() == queue.len()),
                "{}",
                show(&reply)
            );
            value
        })
        .collect()
}

fn command(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// Writers on every shard move units between keys of different shards; the
/// 4-shard run also picks a third key anywhere, so its transactions span two
/// or three shards (different chains of one coordinator). Readers on every
/// shard sum all keys in pipelined EXECs of their own.
fn chains_move_units(shards: usize) {
    let server = Server::forward(shards);
    let keys = keys("chain-units", shards);
    let total = UNITS_PER_KEY * keys.len() as i64;
    let mut setup = server.raw();
    for key in &keys {
        assert_eq!(
            setup.cmd(&["SET", key, &UNITS_PER_KEY.to_string()]),
            b"+OK\r\n"
        );
    }
    let mut writers = Vec::new();
    for (w, shard) in (0..WRITERS_PER_SHARD * shards).map(|w| (w, w % shards)) {
        let (keys, mut c) = (keys.clone(), conn_on_shard(&server, shard));
        writers.push(thread::spawn(move || {
            let mut seed = w as u64 + 11;
            let shard = |k: usize| shard_of_key(&keys[k], shards);
            for _ in 0..BATCHES {
                let batch: Vec<Vec<Vec<String>>> = (0..PIPELINE)
                    .map(|_| {
                        let from = next_random(&mut seed) % keys.len();
                        let others: Vec<usize> = (0..keys.len())
                            .filter(|&k| shard(k) != shard(from))
                            .collect();
                        let to = others[next_random(&mut seed) % others.len()];
                        let units = (1 + next_random(&mut seed) % 5).to_string();
                        let mut queue = vec![
                            command(&["DECRBY", &keys[from], &units]),
                            command(&["INCRBY", &keys[to], &units]),
                        ];
                        if shards > 2 && next_random(&mut seed).is_multiple_of(2) {
                            let third = &keys[next_random(&mut seed) % keys.len()];
                            queue.push(command(&["INCRBY", third, "7"]));
                            queue.push(command(&["DECRBY", third, "7"]));
                        }
                        queue
                    })
                    .collect();
                pipelined_execs(&mut c, &batch);
            }
        }));
    }
    let readers: Vec<_> = (0..shards)
        .map(|shard| {
            let (keys, mut c) = (keys.clone(), conn_on_shard(&server, shard));
            thread::spawn(move || {
                let sum_all: Vec<Vec<String>> = keys.iter().map(|k| command(&["GET", k])).collect();
                for _ in 0..BATCHES {
                    for reply in pipelined_execs(&mut c, &vec![sum_all.clone(); 4]) {
                        let Value::Array(items) = reply else {
                            unreachable!("checked an array")
                        };
                        let sum: i64 = items
                            .iter()
                            .map(|v| v.text().parse::<i64>().expect("a number"))
                            .sum();
                        assert_eq!(sum, total, "half a transaction seen");
                    }
                }
            })
        })
        .collect();
    for handle in writers.into_iter().chain(readers) {
        handle.join().expect("a client");
    }
    let by_get = sum_by_get(&mut setup, &keys);
    assert_eq!(by_get, total);
    assert_eq!(info_stat(&mut setup, "cross_shard_exec_borrowed"), 0);
    let joined = info_stat(&mut setup, "cross_shard_exec_parts_joined");
    assert!(joined > 0, "no part joined its chain's hold");
}

/// Writers on every shard pipeline transactions adding 1 to every key; readers
/// on every shard GET the keys one at a time in a shuffled order: a later GET
/// never returns less than an earlier one did.
fn chains_show_no_half_transaction(shards: usize) {
    let server = Server::forward(shards);
    let keys = keys("chain-count", shards);
    let every_key: Vec<Vec<String>> = keys.iter().map(|k| command(&["INCR", k])).collect();
    let writer_count = WRITERS_PER_SHARD * shards;
    let writers: Vec<_> = (0..writer_count)
        .map(|w| {
            let (queue, mut c) = (every_key.clone(), conn_on_shard(&server, w % shards));
            thread::spawn(move || {
                for _ in 0..BATCHES {
                    pipelined_execs(&mut c, &vec![queue.clone(); PIPELINE]);
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..shards)
        .map(|shard| {
            let (keys, mut c) = (keys.clone(), conn_on_shard(&server, shard));
            thread::spawn(move || {
                let mut seed = 99 + shard as u64;
                for _ in 0..BATCHES * 4 {
                    let mut seen = 0i64;
                    let mut order: Vec<usize> = (0..keys.len()).collect();
                    for i in (1..order.len()).rev() {
                        order.swap(i, next_random(&mut seed) % (i + 1));
                    }
                    for &k in &order {
                        let value = match decode(&c.cmd(&["GET", &keys[k]])) {
                            Value::Nil => 0,
                            v => v.text().parse::<i64>().expect("a number"),
                        };
                        assert!(
                            value >= seen,
                            "{} read {value} after another key read {seen}: half a transaction",
                            keys[k]
                        );
                        seen = value;
                    }
                }
            })
        })
        .collect();
    for handle in writers.into_iter().chain(readers) {
        handle.join().expect("a client");
    }
    let mut c = server.raw();
    let expected = (writer_count * BATCHES * PIPELINE).to_string();
    for key in &keys {
        assert_eq!(decode(&c.cmd(&["GET", key])).text(), expected, "{key}");
    }
    assert_eq!(info_stat(&mut c, "cross_shard_exec_borrowed"), 0);
    assert!(info_stat(&mut c, "cross_shard_exec_parts_joined") > 0);
}

#[test]
fn two_shards_chains_move_units() {
    chains_move_units(2);
}

#[test]
fn four_shards_chains_move_units() {
    chains_move_units(4);
}

#[test]
fn two_shards_chains_show_no_half_transaction() {
    chains_show_no_half_transaction(2);
}

#[test]
fn four_shards_chains_show_no_half_transaction() {
    chains_show_no_half_transaction(4);
}
