//! A snapshot taken in slices (`ruvio_engine::snapshot`) while commands change the
//! keyspace between slices is the keyspace as it was when it began: loaded into a
//! fresh engine, every key of every database dumps exactly as in a snapshot taken
//! all at once at the start. The commands touch keys the scan has passed and keys
//! it has not reached, delete, add, swap databases and flush one.

mod common;

use common::{Harness, NOW_MS};
use ruvio_engine::rdb::file::{assemble, load, write_section};
use ruvio_engine::snapshot::Snapshot;
use ruvio_engine::Engine;

const KEYS: usize = 3000;

fn seeded() -> Harness {
    let mut h = Harness::default();
    for db in 0..3 {
        h.db = db;
        for i in 0..KEYS {
            match i % 5 {
                0 => h.run(&format!("SET s{i} v{i}")),
                1 => h.run(&format!("RPUSH l{i} a b {i}")),
                2 => h.run(&format!("HSET h{i} f {i}")),
                3 => h.run(&format!("ZADD z{i} 1 a {i} b")),
                _ => h.run(&format!("SET t{i} v PX 100000")),
            };
        }
    }
    h.db = 0;
    h
}

/// Every key of every database with its DUMP payload and PTTL.
fn contents(engine: Engine) -> Vec<(usize, String, String, String)> {
    let mut h = Harness::default();
    h.engine = engine;
    let mut out = Vec::new();
    for db in 0..16 {
        h.db = db;
        let keys = h.run("KEYS *");
        for key in keys
            .split("\r\n")
            .filter(|l| !l.is_empty() && !l.starts_with(['*', '$']))
        {
            let dump = h.run(&format!("DUMP {key}"));
            let ttl = h.run(&format!("PEXPIRETIME {key}"));
            out.push((db, key.to_string(), dump, ttl));
        }
    }
    out.sort();
    out
}

fn loaded(file: &[u8]) -> Engine {
    let mut engine = Engine::new(16);
    load(&mut engine, file, NOW_MS, |_| true).expect("the file loads");
    engine
}

#[test]
fn a_sliced_snapshot_is_the_keyspace_at_its_start() {
    let mut h = seeded();
    let (section, version) = write_section(&h.engine, NOW_MS).unwrap();
    let expected = contents(loaded(&assemble([section.as_slice()], version)));
    assert_eq!(expected.len(), 3 * KEYS);

    let mut snapshot = Snapshot::begin(&mut h.engine, NOW_MS);
    let mut body = Vec::new();
    let mut step = 0;
    while !snapshot.step(&mut h.engine, &mut body, 50) {
        let i = (step * 7919) % KEYS;
        match step % 9 {
            0 => h.run(&format!("SET s{i} changed")),
            1 => h.run(&format!("DEL l{i} h{i} z{i}")),
            2 => h.run(&format!("RPUSH l{i} more")),
            3 => h.run(&format!("SET new{step} n")),
            4 => h.run(&format!("EXPIRE s{i} 5")),
            5 => h.run(&format!("PERSIST t{i}")),
            6 if step == 60 => h.run("SWAPDB 0 1"),
            7 if step == 70 => {
                h.db = 2;
                String::new()
            }
            8 if step == 80 => h.run("FLUSHDB"),
            _ => h.run(&format!("HSET h{i} g {step}")),
        };
        step += 1;
    }
    let version = snapshot.end(&mut h.engine).unwrap();
    assert!(
        step > 80,
        "the commands ran during the snapshot ({step} steps)"
    );
    let got = contents(loaded(&assemble([body.as_slice()], version)));
    assert_eq!(got.len(), expected.len(), "no key lost or doubled");
    assert!(
        got == expected,
        "the snapshot differs from the keyspace at its start"
    );
}
