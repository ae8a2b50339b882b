//! `maxmemory` and every `maxmemory-policy` with a real client, in forward mode with
//! 1 and 2 shards: the server fills past the limit, stays at it (INFO used_memory,
//! which counts allocations), and evicts what the policy says; noeviction refuses
//! writes with Redis' `-OOM` and goes on serving reads.

mod common;

use common::*;
use redis::{Connection, FromRedisValue, Value};

/// The limit the tests run under.
const LIMIT_BYTES: u64 = 8 << 20;
/// Keys written: 1 KiB values, about four times the limit.
const KEYS: usize = 32_000;
const VALUE_BYTES: usize = 1000;

fn q<T: FromRedisValue>(con: &mut Connection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query(con).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn info_u64(con: &mut Connection, section: &str, field: &str) -> u64 {
    let text: String = q(con, &["INFO", section]);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("{field} in {text}"))
        .parse()
        .unwrap()
}

fn start(shards: usize, policy: &str) -> (Server, Connection) {
    let limit = LIMIT_BYTES.to_string();
    let args = ["--maxmemory", &limit, "--maxmemory-policy", policy];
    let server = Server::ruvio_with(PortMode::Forward, shards, &args);
    let con = server.client();
    (server, con)
}

/// SET keys `prefix0..` (with a TTL when `ttl_s` is given), pipelined; returns the
/// replies that were errors.
fn fill(
    con: &mut Connection,
    prefix: &str,
    keys: std::ops::Range<usize>,
    ttl_s: Option<u64>,
) -> Vec<String> {
    let value = "v".repeat(VALUE_BYTES);
    let mut errors = Vec::new();
    let keys: Vec<usize> = keys.collect();
    for chunk in keys.chunks(500) {
        let mut pipe = redis::pipe();
        for i in chunk {
            let cmd = pipe.cmd("SET").arg(format!("{prefix}{i}")).arg(&value);
            if let Some(ttl) = ttl_s {
                cmd.arg("EX").arg(ttl + *i as u64);
            }
        }
        let replies: Vec<redis::RedisResult<Value>> = match pipe.query::<Vec<Value>>(con) {
            Ok(values) => values.into_iter().map(Ok).collect(),
            Err(e) => vec![Err(e)],
        };
        for reply in replies {
            match reply {
                Ok(Value::ServerError(e)) => errors.push(format!("{e:?}")),
                Err(e) => errors.push(e.to_string()),
                Ok(_) => {}
            }
        }
    }
    errors
}

fn stays_at_the_limit(con: &mut Connection) {
    let used = info_u64(con, "memory", "used_memory");
    assert!(used <= LIMIT_BYTES + LIMIT_BYTES / 10, "used_memory {used}");
    assert_eq!(info_u64(con, "memory", "maxmemory"), LIMIT_BYTES);
    assert!(info_u64(con, "stats", "evicted_keys") > 0);
}

fn allkeys(shards: usize, policy: &str) {
    let (_server, mut con) = start(shards, policy);
    let idle_rss = info_u64(&mut con, "memory", "used_memory_rss");
    assert!(fill(&mut con, "k", 0..KEYS, None).is_empty());
    stays_at_the_limit(&mut con);
    // Resident memory comes back within a tenth of the limit plus the idle process
    // (the shards return their arenas' free pages once a second).
    let bound = (LIMIT_BYTES + idle_rss) * 11 / 10;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let rss = info_u64(&mut con, "memory", "used_memory_rss");
        if rss <= bound {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "resident {rss} above {bound}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let (left, evicted) = keys_and_evictions(&mut con);
    assert!(left > 1000 && left < KEYS, "{left} keys left");
    assert_eq!(left + evicted, KEYS, "every key is there or was evicted");
}

/// DBSIZE and INFO's evicted_keys from one moment: a shard checks the limit on every
/// loop turn, not only before writes (Redis checks before every command), and the
/// first INFO or DBSIZE on a shard allocates its latency histogram, so a shard may
/// evict between the two reads; the pair is read again until DBSIZE is the same on
/// both sides of the INFO.
fn keys_and_evictions(con: &mut Connection) -> (usize, usize) {
    let mut before: usize = q(con, &["DBSIZE"]);
    for _ in 0..50 {
        let evicted = info_u64(con, "stats", "evicted_keys") as usize;
        let after: usize = q(con, &["DBSIZE"]);
        if after == before {
            return (after, evicted);
        }
        before = after;
    }
    panic!("DBSIZE never settled");
}

#[test]
fn allkeys_lru_1_shard() {
    allkeys(1, "allkeys-lru");
}

#[test]
fn allkeys_lru_2_shards() {
    allkeys(2, "allkeys-lru");
}

#[test]
fn allkeys_lfu_2_shards() {
    allkeys(2, "allkeys-lfu");
}

#[test]
fn allkeys_random_2_shards() {
    allkeys(2, "allkeys-random");
}

/// A hot set read between writes survives fills of twice the limit: LRU by idle
/// time (whole seconds, as Redis' clock: each round starts a second after the last,
/// and writes less than half the limit, so older keys are there to go first), LFU
/// by access count.
fn hot_set_stays(policy: &str) {
    let (_server, mut con) = start(2, policy);
    let hot: Vec<String> = (0..200).map(|i| format!("hot{i}")).collect();
    for key in &hot {
        let _: () = q(&mut con, &["SET", key, "h"]);
    }
    const ROUND_KEYS: usize = 3000;
    for round in 0..6 {
        if policy.ends_with("lru") && round > 0 {
            std::thread::sleep(std::time::Duration::from_millis(1100));
        }
        for _ in 0..3 {
            for key in &hot {
                let _: Option<String> = q(&mut con, &["GET", key]);
            }
        }
        let keys = round * ROUND_KEYS..(round + 1) * ROUND_KEYS;
        assert!(fill(&mut con, "cold", keys, None).is_empty());
    }
    stays_at_the_limit(&mut con);
    let present: usize = hot
        .iter()
        .filter(|k| q::<i64>(&mut con, &["EXISTS", k]) == 1)
        .count();
    assert!(
        present >= 190,
        "{present} of 200 hot keys left under {policy}"
    );
}

#[test]
fn allkeys_lru_keeps_a_hot_set() {
    hot_set_stays("allkeys-lru");
}

#[test]
fn allkeys_lfu_keeps_a_hot_set() {
    hot_set_stays("allkeys-lfu");
}

/// The volatile policies evict only keys with a TTL; with none left, writes fail.
fn volatile(policy: &str) {
    let (_server, mut con) = start(2, policy);
    let errors = fill(&mut con, "keep", 0..2000, None);
    assert!(errors.is_empty(), "{errors:?}");
    let errors = fill(&mut con, "ttl", 0..KEYS, Some(10_000));
    assert!(
        errors.is_empty(),
        "{} errors, first {:?}",
        errors.len(),
        errors.first()
    );
    stays_at_the_limit(&mut con);
    for i in (0..2000).step_by(97) {
        assert_eq!(q::<i64>(&mut con, &["EXISTS", &format!("keep{i}")]), 1);
    }
    if policy == "volatile-ttl" {
        // The nearest deadlines went first: the last keys written (longest TTL) stay.
        let last = format!("ttl{}", KEYS - 1);
        assert_eq!(q::<i64>(&mut con, &["EXISTS", &last]), 1);
        assert_eq!(q::<i64>(&mut con, &["EXISTS", "ttl0"]), 0);
    }
    // Without keys that have a TTL, nothing can go: -OOM.
    let _: () = q(&mut con, &["PERSIST", "nothing"]);
    let errors = fill(&mut con, "more", 0..KEYS, None);
    assert!(
        !errors.is_empty(),
        "writes fail once only keys without TTL are left"
    );
    assert!(errors[0].contains("OOM"), "{errors:?}");
}

#[test]
fn volatile_lru() {
    volatile("volatile-lru");
}

#[test]
fn volatile_lfu() {
    volatile("volatile-lfu");
}

#[test]
fn volatile_random() {
    volatile("volatile-random");
}

#[test]
fn volatile_ttl() {
    volatile("volatile-ttl");
}

/// noeviction: writes get `-OOM`, reads and deletes go on, nothing is evicted.
#[test]
fn noeviction_refuses_writes() {
    let (_server, mut con) = start(2, "noeviction");
    let errors = fill(&mut con, "k", 0..KEYS, None);
    assert!(!errors.is_empty());
    let e = redis::cmd("SET")
        .arg("one")
        .arg("more")
        .query::<Value>(&mut con)
        .unwrap_err();
    assert_eq!(e.code(), Some("OOM"));
    assert_eq!(
        e.detail(),
        Some("command not allowed when used memory > 'maxmemory'.")
    );
    assert_eq!(
        q::<Option<String>>(&mut con, &["GET", "k0"]).map(|v| v.len()),
        Some(VALUE_BYTES)
    );
    assert_eq!(info_u64(&mut con, "stats", "evicted_keys"), 0);
    let errorstats: String = q(&mut con, &["INFO", "errorstats"]);
    assert!(errorstats.contains("errorstat_OOM:count="), "{errorstats}");
    // Deleting makes room again.
    let deleted: i64 = q(
        &mut con,
        &["DEL", "k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"],
    );
    assert_eq!(deleted, 8);
    let _: () = q(&mut con, &["CONFIG", "SET", "maxmemory", "0"]);
    let _: () = q(&mut con, &["SET", "one", "more"]);
}

/// OBJECT FREQ and IDLETIME follow the policy; CONFIG SET checks the names.
#[test]
fn object_freq_and_policy_names() {
    let (_server, mut con) = start(1, "allkeys-lfu");
    let _: () = q(&mut con, &["SET", "f", "v"]);
    for _ in 0..50 {
        let _: Option<String> = q(&mut con, &["GET", "f"]);
    }
    let freq: i64 = q(&mut con, &["OBJECT", "FREQ", "f"]);
    assert!(freq > 5, "{freq}");
    let e = redis::cmd("OBJECT")
        .arg("IDLETIME")
        .arg("f")
        .query::<Value>(&mut con)
        .unwrap_err();
    assert!(
        e.detail()
            .unwrap()
            .starts_with("An LRU maxmemory policy is not selected"),
        "{e}"
    );
    let _: () = q(
        &mut con,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
    );
    let idle: i64 = q(&mut con, &["OBJECT", "IDLETIME", "f"]);
    assert!(idle >= 0);
    let e = redis::cmd("CONFIG")
        .arg(&["SET", "maxmemory-policy", "lru"])
        .query::<Value>(&mut con)
        .unwrap_err();
    assert_eq!(
        e.detail(),
        Some("CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction")
    );
    let _: () = q(&mut con, &["CONFIG", "SET", "maxmemory", "100mb"]);
    let got: Vec<String> = q(&mut con, &["CONFIG", "GET", "maxmemory"]);
    assert_eq!(got[1], (100u64 << 20).to_string());
}
