//! The HyperLogLog family against the engine, request bytes in and reply bytes out.
//! The expected replies and values were taken from redis-server 7.0 (`redis-cli
//! --no-raw`), where 7.0 and 7.2 agree.

mod common;

use common::*;
use ruvio_engine::command::EventClass;

const NOT_HLL: &str = "-WRONGTYPE Key is not a valid HyperLogLog string value.\r\n";
const CORRUPT: &str = "-INVALIDOBJ Corrupted HLL object detected\r\n";
/// An empty HLL as PFADD makes it: sparse, cache stale, XZERO 16384.
const EMPTY: &str = r#""HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xff""#;

fn value(h: &mut Harness, key: &str) -> Vec<u8> {
    let reply = h.run_args(&[b"GET", key.as_bytes()]);
    let start = reply.iter().position(|&b| b == b'\n').expect("bulk") + 1;
    reply[start..reply.len() - 2].to_vec()
}

#[test]
fn pfadd_creates_and_counts() {
    let mut h = Harness::default();
    assert_eq!(h.run("PFADD e"), int(1));
    assert_eq!(events(&h), [(EventClass::String, "pfadd")]);
    assert_eq!(h.effects.dirty, 1);
    assert_eq!(h.run("PFADD e"), int(0));
    assert_eq!(h.effects.dirty, 0);
    assert_eq!(h.run("OBJECT ENCODING e"), bulk("raw"));
    let mut empty = Harness::default();
    empty.run(&format!("SET x {EMPTY}"));
    assert_eq!(value(&mut h, "e"), value(&mut empty, "x"));
    assert_eq!(h.run("PFADD k a b c a"), int(1));
    assert_eq!(h.effects.dirty, 4, "the key and three registers");
    assert_eq!(h.run("PFADD k a b"), int(0));
    assert_eq!(h.run("PFCOUNT k"), int(3));
    assert_eq!(h.effects.dirty, 1, "the cache was stored");
    assert!(events(&h).is_empty(), "no keyspace event for the cache");
    assert_eq!(h.effects.modified_keys().count(), 1);
    assert_eq!(h.run("PFCOUNT k"), int(3));
    assert_eq!(h.effects.dirty, 0, "served from the cache");
    assert_eq!(h.run("PFCOUNT missing"), int(0));
    // The log: PFADD that changed a register as itself, a no-op not at all; a
    // PFCOUNT that stored its cache as itself (its replay stores the same bytes).
    assert_eq!(h.log_of("PFADD k d"), ["PFADD k d"]);
    assert_eq!(h.log_of("PFADD k d"), Vec::<String>::new());
    assert_eq!(h.log_of("PFCOUNT k"), ["PFCOUNT k"]);
    assert_eq!(h.log_of("PFCOUNT k"), Vec::<String>::new());
    assert_eq!(h.log_of("PFDEBUG TODENSE k"), ["PFDEBUG TODENSE k"]);
    assert_eq!(h.run("PFCOUNT k"), int(4));
    assert_eq!(h.run("PFCOUNT k e missing"), int(4));
    assert_eq!(h.effects.dirty, 0);
}

#[test]
fn wrong_values_get_redis_errors() {
    let mut h = Harness::default();
    h.run("SET s foo");
    h.run("SET n 12345678901234567");
    h.run("RPUSH l a");
    h.run("PFADD e");
    for cmd in [
        "PFCOUNT s",
        "PFADD s a",
        "PFMERGE d s",
        "PFCOUNT n",
        "PFCOUNT e s",
        "PFDEBUG getreg s",
    ] {
        assert_eq!(h.run(cmd), NOT_HLL, "{cmd}");
    }
    assert_eq!(h.run("EXISTS d"), int(0));
    assert_eq!(h.run("PFCOUNT l"), WRONGTYPE);
    assert_eq!(h.run("PFADD l x"), WRONGTYPE);
    assert_eq!(
        h.run("PFDEBUG getreg nokey"),
        err("ERR The specified key does not exist")
    );
    assert_eq!(
        h.run("PFDEBUG foo e"),
        err("ERR Unknown PFDEBUG subcommand 'foo'")
    );
    assert_eq!(
        h.run("PFADD"),
        err("ERR wrong number of arguments for 'pfadd' command")
    );
    assert_eq!(
        h.run("PFDEBUG getreg"),
        err("ERR wrong number of arguments for 'pfdebug' command")
    );
}

#[test]
fn corrupt_sparse_values() {
    let mut h = Harness::default();
    // 16383 registers only, cache stale: counting fails, adding below works.
    let short = r#""HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xfe""#;
    h.run(&format!("SET v {short}"));
    assert_eq!(h.run("OBJECT ENCODING v"), bulk("embstr"));
    assert_eq!(h.run("PFCOUNT v"), CORRUPT);
    assert_eq!(h.run("OBJECT ENCODING v"), bulk("raw"));
    assert_eq!(h.run("PFCOUNT v v"), CORRUPT);
    assert_eq!(h.run("PFMERGE d v"), CORRUPT);
    assert_eq!(h.run("PFDEBUG todense v"), CORRUPT);
    assert_eq!(h.run("PFADD v a"), int(1));
    // The same with a valid cache: PFCOUNT answers the cache, as Redis does.
    let cached = r#""HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x7f\xfe""#;
    h.run(&format!("SET v {cached}"));
    assert_eq!(h.run("PFCOUNT v"), int(0));
}

#[test]
fn pfmerge_unions_into_the_destination() {
    let mut h = Harness::default();
    assert_eq!(h.run("PFMERGE d"), OK);
    assert_eq!(events(&h), [(EventClass::String, "pfadd")]);
    assert_eq!(h.effects.dirty, 1);
    let mut empty = Harness::default();
    empty.run(&format!("SET x {EMPTY}"));
    assert_eq!(value(&mut h, "d"), value(&mut empty, "x"));
    h.run("PFADD a 1 2 3");
    h.run("PFADD b 3 4 5");
    assert_eq!(h.run("PFMERGE d a b missing"), OK);
    assert_eq!(h.run("PFCOUNT d"), int(5));
    assert_eq!(h.run("PFDEBUG encoding d"), "+sparse\r\n");
    // A dense source makes the destination dense.
    assert_eq!(h.run("PFDEBUG todense b"), int(1));
    assert_eq!(h.effects.dirty, 1);
    assert_eq!(h.run("PFDEBUG todense b"), int(0));
    assert_eq!(
        h.run("PFDEBUG decode b"),
        err("ERR HLL encoding is not sparse")
    );
    assert_eq!(h.run("PFMERGE d2 a b"), OK);
    assert_eq!(h.run("PFDEBUG encoding d2"), "+dense\r\n");
    assert_eq!(h.run("PFCOUNT d2"), int(5));
    // Merging into an existing dense destination keeps its registers.
    h.run("PFADD c 9");
    assert_eq!(h.run("PFMERGE d2 c"), OK);
    assert_eq!(h.run("PFCOUNT d2"), int(6));
    assert_eq!(
        h.run("PFDEBUG decode a"),
        bulk("Z:7527 v:1,1 Z:3445 v:1,1 Z:4397 v:4,1 Z:1012")
    );
    assert_eq!(h.log_of("PFMERGE d a"), ["PFMERGE d a"]);
    assert_eq!(h.log_of("PFADD a 1"), Vec::<String>::new());
}

#[test]
fn pfdebug_getreg_answers_every_register() {
    let mut h = Harness::resp3();
    h.run("PFADD k a");
    let reply = h.run("PFDEBUG GETREG k");
    assert!(reply.starts_with("*16384\r\n"), "{}", &reply[..20]);
    assert_eq!(reply.matches(":0\r\n").count(), 16383);
    assert_eq!(h.run("PFDEBUG ENCODING k"), "+dense\r\n");
}

#[test]
fn promotion_follows_hll_sparse_max_bytes() {
    let mut h = Harness::default();
    h.engine.config_mut().hll_sparse_max_bytes = 40;
    let elements: Vec<String> = (0..20).map(|i| format!("e{i}")).collect();
    h.run(&format!("PFADD k {}", elements.join(" ")));
    assert_eq!(h.run("PFDEBUG ENCODING k"), "+dense\r\n");
    assert_eq!(h.run("PFCOUNT k"), int(20));
    assert_eq!(h.run("STRLEN k"), int(12304));
}

#[test]
fn pfselftest_passes() {
    let mut h = Harness::default();
    assert_eq!(h.run("PFSELFTEST"), OK);
}
