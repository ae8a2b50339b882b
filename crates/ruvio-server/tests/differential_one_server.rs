//! Differential test of the keyspace walks and the server-wide views in forward mode
//! with 2 and 4 shards: a seeded random sequence of writes (SET, DEL, EXPIRE in the
//! past, SELECT, FLUSHDB, SWAPDB, lists and hashes for TYPE) goes to a real
//! `redis-server` and to Ruvio; after every few steps both answer the same questions,
//! compared as below.
//!
//! # Comparison rules (the whole allowlist)
//!
//! 1. DBSIZE and INFO keyspace's `db<n>:keys=..,expires=..` must be equal (avg_ttl is
//!    left out: no key here has a TTL in the future).
//! 2. KEYS (with a pattern or `*`): the same keys, compared as sorted lists (Redis does
//!    not define the order).
//! 3. SCAN: iterated to cursor 0 on each server (cursors are each server's own) with
//!    the same MATCH, TYPE and COUNT; the sorted, deduplicated keys must be equal. With
//!    COUNT at least the database's size, both must finish in one call (cursor 0), as
//!    a single Redis does for a small database.
//! 4. RANDOMKEY: both nil on an empty database, else a key the database holds.
//! 5. CLIENT LIST: the connections the test opened (named `c0` ...), whichever shard
//!    they landed on, with the same `name`, `db` and `resp` fields, compared sorted
//!    (Redis' clientsCron rotates its client list, so its order moves); CLIENT LIST ID of one of them: one line with its name. `id`, `addr`,
//!    `fd`, ages and the other fields are each server's own.
//!
//! Reproduce a failure with `RUVIO_DIFF_SEED=<seed> RUVIO_DIFF_COMMANDS=<n>`.

mod common;

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Steps per sequence unless `RUVIO_DIFF_COMMANDS` says otherwise.
const STEPS_PER_SEED: usize = 400;
/// Seeds per configuration unless `RUVIO_DIFF_SEED` picks one.
const SEEDS: &[u64] = &[1, 2];
/// Keys of the key space: few enough that databases empty out now and then.
const KEYS: usize = 40;
/// Extra connections whose CLIENT LIST lines are compared.
const NAMED_CLIENTS: usize = 6;

/// The two servers and one connection to each.
struct Pair {
    reference: RawConn,
    target: RawConn,
    seed: u64,
    step: usize,
}

impl Pair {
    fn both(&mut self, args: &[&str]) -> (Vec<u8>, Vec<u8>) {
        (self.reference.cmd(args), self.target.cmd(args))
    }

    fn fail(&self, what: &str, reference: &dyn std::fmt::Debug, target: &dyn std::fmt::Debug) -> ! {
        panic!(
            "seed {} step {}: {what}\n  redis: {reference:?}\n  ruvio: {target:?}",
            self.seed, self.step
        )
    }

    /// Both servers must answer exactly the same bytes.
    fn same(&mut self, args: &[&str]) {
        let (r, t) = self.both(args);
        if r != t {
            self.fail(&show_cmd_words(args), &show(&r), &show(&t));
        }
    }
}

fn show_cmd_words(args: &[&str]) -> String {
    args.join(" ")
}

/// The elements of a flat RESP array of bulk strings (or a RESP3 set).
fn bulk_items(reply: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(reply);
    let mut lines = text.split("\r\n");
    let mut items = Vec::new();
    let _header = lines.next();
    while let Some(line) = lines.next() {
        if line.starts_with('$') {
            if let Some(item) = lines.next() {
                items.push(item.to_string());
            }
        }
    }
    items
}

/// SCAN's reply: the cursor and the keys.
fn scan_reply(reply: &[u8]) -> (String, Vec<String>) {
    let items = bulk_items(reply);
    let cursor = items.first().cloned().unwrap_or_default();
    (cursor, items.into_iter().skip(1).collect())
}

/// Every key SCAN returns from cursor 0 with `options`, sorted and deduplicated; and
/// whether the first call already finished.
fn full_scan(conn: &mut RawConn, options: &[&str]) -> (Vec<String>, bool) {
    let mut cursor = "0".to_string();
    let mut keys = Vec::new();
    let mut calls = 0;
    loop {
        let mut args = vec!["SCAN", cursor.as_str()];
        args.extend_from_slice(options);
        let (next, batch) = scan_reply(&conn.cmd(&args));
        keys.extend(batch);
        calls += 1;
        assert!(calls < 10_000, "SCAN does not end");
        if next == "0" {
            break;
        }
        cursor = next;
    }
    keys.sort();
    keys.dedup();
    (keys, calls == 1)
}

/// The `db<n>` lines of INFO keyspace without avg_ttl.
fn keyspace_lines(conn: &mut RawConn) -> Vec<String> {
    let reply = conn.cmd(&["INFO", "keyspace"]);
    String::from_utf8_lossy(&reply)
        .lines()
        .filter(|l| l.starts_with("db"))
        .map(|l| l.split(",avg_ttl").next().unwrap_or(l).to_string())
        .collect()
}

/// name, db and resp of the named clients' CLIENT LIST lines, sorted.
fn named_lines(conn: &mut RawConn) -> Vec<String> {
    let reply = conn.cmd(&["CLIENT", "LIST"]);
    let mut lines: Vec<String> = String::from_utf8_lossy(&reply)
        .lines()
        .filter(|l| l.contains(" name=c"))
        .map(|l| {
            let field = |f: &str| {
                l.split(' ')
                    .find_map(|kv| kv.strip_prefix(&format!("{f}=")))
                    .unwrap_or("?")
                    .to_string()
            };
            format!(
                "name={} db={} resp={}",
                field("name"),
                field("db"),
                field("resp")
            )
        })
        .collect();
    lines.sort();
    lines
}

/// One random write or database switch.
fn random_write(rng: &mut StdRng) -> Vec<String> {
    let key = format!("k{}", rng.random_range(0..KEYS));
    let words: Vec<String> = match rng.random_range(0..100) {
        0..=39 => vec!["SET".into(), key, "v".into()],
        40..=54 => vec!["DEL".into(), key],
        55..=62 => vec!["RPUSH".into(), key, "a".into()],
        63..=70 => vec!["HSET".into(), key, "f".into(), "v".into()],
        71..=75 => vec!["EXPIRE".into(), key, "-1".into()],
        76..=85 => vec!["SELECT".into(), rng.random_range(0..2).to_string()],
        86..=87 => vec!["FLUSHDB".into()],
        88..=89 => vec!["SWAPDB".into(), "0".into(), "1".into()],
        _ => vec![
            "MSET".into(),
            key,
            "1".into(),
            format!("k{}", rng.random_range(0..KEYS)),
            "2".into(),
        ],
    };
    words
}

/// The questions, asked of both servers and compared by the rules above.
fn compare_views(pair: &mut Pair, rng: &mut StdRng) {
    pair.same(&["DBSIZE"]);
    let (r, t) = (
        keyspace_lines(&mut pair.reference),
        keyspace_lines(&mut pair.target),
    );
    if r != t {
        pair.fail("INFO keyspace", &r, &t);
    }
    let pattern = ["*", "k1*", "k?", "*3"][rng.random_range(0..4)];
    let (mut r, mut t) = pair.both(&["KEYS", pattern]);
    let (mut rk, mut tk) = (bulk_items(&r), bulk_items(&t));
    rk.sort();
    tk.sort();
    if rk != tk {
        pair.fail(&format!("KEYS {pattern}"), &rk, &tk);
    }
    let size: usize = String::from_utf8_lossy(&pair.reference.cmd(&["DBSIZE"]))[1..]
        .trim()
        .parse()
        .unwrap_or(0);
    let count = [1, 3, 10, 1000][rng.random_range(0..4)].to_string();
    let mut options = vec!["COUNT", count.as_str()];
    match rng.random_range(0..3) {
        0 => options.extend(["MATCH", pattern]),
        1 => options.extend(["TYPE", ["string", "list", "hash"][rng.random_range(0..3)]]),
        _ => {}
    }
    let (rs, _) = full_scan(&mut pair.reference, &options);
    let (ts, t_one_call) = full_scan(&mut pair.target, &options);
    if rs != ts {
        pair.fail(&format!("SCAN {options:?}"), &rs, &ts);
    }
    if count == "1000" && size < 1000 && !t_one_call {
        pair.fail(
            "SCAN 0 COUNT 1000 on a small database ends in one call",
            &rs,
            &ts,
        );
    }
    r = pair.reference.cmd(&["RANDOMKEY"]);
    t = pair.target.cmd(&["RANDOMKEY"]);
    let r_nil = r.starts_with(b"$-1");
    let t_nil = t.starts_with(b"$-1");
    if r_nil != t_nil {
        pair.fail("RANDOMKEY nil on both or neither", &show(&r), &show(&t));
    }
    if !t_nil {
        let key = bulk_items(&[b"*1\r\n".as_slice(), &t].concat())
            .pop()
            .unwrap_or_default();
        if !rs.is_empty() && pair.reference.cmd(&["EXISTS", &key]) != b":1\r\n" {
            pair.fail("RANDOMKEY names a key of the database", &show(&r), &key);
        }
    }
}

fn run(label: &str, shards: usize) {
    let Some(servers) = DiffServers::forward(label, shards) else {
        return;
    };
    let settings = DiffSettings::from_env(SEEDS, STEPS_PER_SEED);
    // Named connections on both servers (each lands on some shard of Ruvio).
    let mut named: Vec<(RawConn, RawConn)> = Vec::new();
    for i in 0..NAMED_CLIENTS {
        let mut r = servers.reference.raw();
        let mut t = servers.target.raw();
        for conn in [&mut r, &mut t] {
            assert_eq!(
                conn.cmd(&["CLIENT", "SETNAME", &format!("c{i}")]),
                b"+OK\r\n"
            );
            assert_eq!(conn.cmd(&["SELECT", &(i % 3).to_string()]), b"+OK\r\n");
            if i % 2 == 1 {
                assert!(conn.cmd(&["HELLO", "3"]).starts_with(b"%"));
            }
        }
        named.push((r, t));
    }
    for seed in settings.seeds.iter().copied() {
        let mut pair = Pair {
            reference: servers.reference.raw(),
            target: servers.target.raw(),
            seed,
            step: 0,
        };
        pair.same(&["FLUSHALL"]);
        let mut rng = StdRng::seed_from_u64(seed);
        for step in 0..settings.commands {
            pair.step = step;
            let words = random_write(&mut rng);
            let args: Vec<&str> = words.iter().map(String::as_str).collect();
            pair.same(&args);
            if rng.random_range(0..4) == 0 {
                compare_views(&mut pair, &mut rng);
            }
        }
        compare_views(&mut pair, &mut rng);
        let (r, t) = (
            named_lines(&mut pair.reference),
            named_lines(&mut pair.target),
        );
        if r != t {
            pair.fail("CLIENT LIST of the named clients", &r, &t);
        }
        let which = rng.random_range(0..NAMED_CLIENTS);
        let (named_r, named_t) = &mut named[which];
        for (conn, list) in [(named_r, &mut pair.reference), (named_t, &mut pair.target)] {
            let id = String::from_utf8_lossy(&conn.cmd(&["CLIENT", "ID"]))[1..]
                .trim()
                .to_string();
            let one = list.cmd(&["CLIENT", "LIST", "ID", &id]);
            let text = String::from_utf8_lossy(&one);
            assert_eq!(text.matches("id=").count(), 1, "seed {seed}: {text}");
            assert!(
                text.contains(&format!(" name=c{which} ")),
                "seed {seed}: {text}"
            );
        }
    }
}

#[test]
fn differential_one_server_2_shards() {
    run("differential_one_server_2_shards", 2);
}

#[test]
fn differential_one_server_4_shards() {
    run("differential_one_server_4_shards", 4);
}
