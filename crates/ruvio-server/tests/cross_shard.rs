//! Multi-key commands across shards in forward mode (keys borrowed from their
//! owners, see crates/ruvio-server/src/shard/lending/coordinate.rs), under concurrency: several real
//! clients move list elements and rename keys between shards at the same time. No
//! element may be lost or duplicated, no command may deadlock (every client
//! finishes), and a key being renamed is never seen half-moved by a single-key read;
//! SORT with BY/GET patterns sees its keys of both shards at one moment.

mod common;

use common::*;
use redis::Commands;
use std::thread;

const CLIENTS: usize = 4;
const ROUNDS: usize = 300;

fn two_shard_keys(prefix: &str) -> (String, String) {
    (key_on_shard(prefix, 0, 2), key_on_shard(prefix, 1, 2))
}

#[test]
fn lmove_between_shards_loses_nothing() {
    let server = Server::forward(2);
    let (a, b) = two_shard_keys("lm");
    let mut con = server.client();
    let elements: Vec<String> = (0..100).map(|i| format!("e{i:03}")).collect();
    let _: () = con.rpush(&a, &elements).unwrap();
    let workers: Vec<_> = (0..CLIENTS)
        .map(|w| {
            let (mut con, a, b) = (server.client(), a.clone(), b.clone());
            thread::spawn(move || {
                for i in 0..ROUNDS {
                    let (from, to) = if (i + w) % 2 == 0 { (&a, &b) } else { (&b, &a) };
                    let cmd = if i % 3 == 0 { "RPOPLPUSH" } else { "LMOVE" };
                    let mut c = redis::cmd(cmd);
                    c.arg(from).arg(to);
                    if cmd == "LMOVE" {
                        c.arg("LEFT").arg("RIGHT");
                    }
                    let _: Option<String> = c.query(&mut con).unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    let mut all: Vec<String> = con.lrange(&a, 0, -1).unwrap();
    all.extend(con.lrange::<_, Vec<String>>(&b, 0, -1).unwrap());
    all.sort();
    assert_eq!(all, elements);
}

#[test]
fn renames_and_msetnx_across_shards_never_deadlock() {
    let server = Server::forward(2);
    let (x, y) = two_shard_keys("rn");
    let (p, q) = two_shard_keys("nx");
    let mut con = server.client();
    let _: () = con.set(&x, "payload").unwrap();
    let workers: Vec<_> = (0..CLIENTS)
        .map(|w| {
            let mut con = server.client();
            let (x, y, p, q) = (x.clone(), y.clone(), p.clone(), q.clone());
            thread::spawn(move || {
                for i in 0..ROUNDS {
                    match (i + w) % 3 {
                        // Whichever name holds it now: RENAME answers "no such key"
                        // when another client moved it first.
                        0 => {
                            let _: redis::RedisResult<()> = con.rename(&x, &y);
                        }
                        1 => {
                            let _: redis::RedisResult<()> = con.rename(&y, &x);
                        }
                        _ => {
                            let _: bool = redis::cmd("MSETNX")
                                .arg(&p)
                                .arg(i)
                                .arg(&q)
                                .arg(i)
                                .query(&mut con)
                                .unwrap();
                            let _: () = con.del((&p, &q)).unwrap();
                        }
                    }
                    // A single-key read sees the value whole or not at all.
                    for key in [&x, &y] {
                        let seen: Option<String> = con.get(key).unwrap();
                        assert!(seen.is_none() || seen.as_deref() == Some("payload"));
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    let there: Vec<Option<String>> = redis::cmd("MGET").arg(&x).arg(&y).query(&mut con).unwrap();
    let held: Vec<&Option<String>> = there.iter().filter(|v| v.is_some()).collect();
    assert_eq!(held, [&Some("payload".to_string())], "{there:?}");
}

/// Elements the SORT test's writer adds, one per `SORT_WRITE_PAUSE`: slower than a
/// SORT's borrowing round, so the rounds converge (docs/cross-shard.md).
const SORT_ELEMENTS: usize = 150;
const SORT_WRITE_PAUSE: std::time::Duration = std::time::Duration::from_millis(1);

/// SORT BY/GET across shards while a writer adds elements (each after its weight
/// key): the sorted list, its weight keys on both shards and STORE's destination
/// are held together, so every reply shows one moment, with every weight present
/// and in order (docs/cross-shard.md, "SORT with BY and GET patterns").
#[test]
fn sort_by_patterns_sees_one_moment() {
    let server = Server::forward(2);
    let (list, dst) = (key_on_shard("srt", 0, 2), key_on_shard("srtdst", 1, 2));
    let writer = {
        let (mut con, list) = (server.client(), list.clone());
        thread::spawn(move || {
            for i in 0..SORT_ELEMENTS {
                let _: () = con.set(format!("w_e{i}"), SORT_ELEMENTS - i).unwrap();
                let _: () = con.rpush(&list, format!("e{i}")).unwrap();
                thread::sleep(SORT_WRITE_PAUSE);
            }
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (mut con, list, dst) = (server.client(), list.clone(), dst.clone());
            thread::spawn(move || {
                for _ in 0..SORT_ELEMENTS {
                    let rows: Vec<Option<String>> = if r == 0 {
                        redis::cmd("SORT")
                            .arg(&list)
                            .arg("BY")
                            .arg("w_*")
                            .arg("GET")
                            .arg("w_*")
                            .query(&mut con)
                            .unwrap()
                    } else {
                        let _: usize = redis::cmd("SORT")
                            .arg(&list)
                            .arg("BY")
                            .arg("w_*")
                            .arg("GET")
                            .arg("w_*")
                            .arg("STORE")
                            .arg(&dst)
                            .query(&mut con)
                            .unwrap();
                        let stored: Vec<String> = con.lrange(&dst, 0, -1).unwrap();
                        stored.into_iter().map(Some).collect()
                    };
                    let weights: Vec<usize> = rows
                        .iter()
                        .map(|w| w.as_deref().expect("every weight").parse().unwrap())
                        .collect();
                    // Elements are added with falling weights: sorted, they are the
                    // newest first, without gaps.
                    let newest = SORT_ELEMENTS - weights.len() + 1;
                    let expected: Vec<usize> = (newest..=SORT_ELEMENTS).collect();
                    assert_eq!(weights, expected);
                }
            })
        })
        .collect();
    writer.join().expect("writer");
    for r in readers {
        r.join().expect("reader");
    }
}
