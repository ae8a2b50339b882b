//! Multi-key commands across shards in forward mode (keys borrowed from their
//! owners, see crates/ruvio-server/src/lending.rs), under concurrency: several real
//! clients move list elements and rename keys between shards at the same time. No
//! element may be lost or duplicated, no command may deadlock (every client
//! finishes), and a key being renamed is never seen half-moved by a single-key read.

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
