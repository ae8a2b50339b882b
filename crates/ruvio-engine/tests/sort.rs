//! SORT and SORT_RO against the engine, request bytes in and reply bytes out. The
//! expected replies were taken from redis-server 7.0 (`redis-cli`, raw RESP), whose
//! SORT is 7.2's apart from cluster mode (checked here against 7.2's texts).

mod common;

use common::*;
use ruvio_engine::command::EventClass;
use ruvio_engine::Engine;
use ruvio_resp::OwnedArgs;

fn err(text: &str) -> String {
    format!("-{text}\r\n")
}

fn with(lines: &[&str]) -> Harness {
    let mut h = Harness::default();
    for line in lines {
        h.run(line);
    }
    h
}

#[test]
fn numbers_sort_as_strtod_reads_them() {
    let mut h = with(&[r#"RPUSH n 3 1 2 10 -5 1.5 0x10 " 7" "" inf -inf"#]);
    assert_eq!(
        h.run("SORT n"),
        arr(&["-inf", "-5", "", "1", "1.5", "2", "3", " 7", "10", "0x10", "inf"])
    );
    assert_eq!(h.run("SORT n DESC LIMIT 0 3"), arr(&["inf", "0x10", "10"]));
    // Equal numbers compare as bytes; -0 equals 0.
    h.run("RPUSH z 0 -0 00 0.0");
    assert_eq!(h.run("SORT z"), arr(&["-0", "0", "0.0", "00"]));
    assert_eq!(h.run("SORT z DESC"), arr(&["00", "0.0", "0", "-0"]));
}

#[test]
fn bad_numbers_fail_after_every_lookup() {
    let mut h = with(&["RPUSH l 1 abc 2"]);
    let bad = err("ERR One or more scores can't be converted into double");
    assert_eq!(h.run("SORT l"), bad);
    for weight in ["1e-310", "1.8e308", "nan", "1e", "0x", "   ", "4 "] {
        h.run("DEL x");
        h.run_args(&[b"RPUSH".as_slice(), b"x", weight.as_bytes(), b"1"]);
        assert_eq!(h.run("SORT x"), bad, "{weight:?}");
    }
    for weight in [
        "0x1p-1070",
        "2.2250738585072014e-308",
        "1e308",
        "+5",
        ".5",
        "5.",
        "-0",
    ] {
        h.run("DEL x");
        h.run_args(&[b"RPUSH".as_slice(), b"x", weight.as_bytes()]);
        assert_eq!(h.run("SORT x"), arr(&[weight]), "{weight:?}");
    }
    // An embedded NUL ends the number, as for strtod.
    h.run("DEL x");
    h.run_args(&[b"RPUSH".as_slice(), b"x", b"7\x00junk"]);
    assert_eq!(
        h.run_args(&[b"SORT".as_slice(), b"x"]),
        b"*1\r\n$6\r\n7\x00junk\r\n"
    );
    // ALPHA and BY a constant never read numbers; STORE stores nothing on error.
    assert_eq!(h.run("SORT l ALPHA"), arr(&["1", "2", "abc"]));
    assert_eq!(h.run("SORT l BY nosort"), arr(&["1", "abc", "2"]));
    assert_eq!(h.run("SORT l STORE d"), bad);
    assert_eq!(h.run("EXISTS d"), int(0));
    assert!(h
        .effects
        .log_records(OwnedArgs::default().args())
        .is_empty());
}

#[test]
fn limit_clamps_as_redis() {
    let mut h = with(&["RPUSH n 5 4 3 2 1"]);
    assert_eq!(h.run("SORT n LIMIT 1 3"), arr(&["2", "3", "4"]));
    assert_eq!(h.run("SORT n LIMIT -1 2"), arr(&["1", "2"]));
    assert_eq!(h.run("SORT n LIMIT 2 -1"), arr(&["3", "4", "5"]));
    assert_eq!(h.run("SORT n LIMIT 100 2"), arr(&[]));
    assert_eq!(h.run("SORT n LIMIT 0 0"), arr(&[]));
    assert_eq!(
        h.run("SORT n LIMIT 3 9223372036854775807"),
        arr(&["4", "5"])
    );
    assert_eq!(h.run("SORT n LIMIT -9223372036854775808 1"), arr(&["1"]));
    assert_eq!(
        h.run("SORT n LIMIT x 1"),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(h.run("SORT n LIMIT 1"), err("ERR syntax error"));
    assert_eq!(h.run("SORT n LIMIT 1 2 3"), err("ERR syntax error"));
}

#[test]
fn constant_by_keeps_the_own_order() {
    let mut h = with(&["RPUSH l c a b d e", "ZADD z 3 a 1 b 2 c 0 d"]);
    assert_eq!(h.run("SORT l BY nosort"), arr(&["c", "a", "b", "d", "e"]));
    assert_eq!(
        h.run("SORT l BY nosort DESC"),
        arr(&["e", "d", "b", "a", "c"])
    );
    assert_eq!(h.run("SORT l BY nosort LIMIT 1 2"), arr(&["a", "b"]));
    assert_eq!(h.run("SORT l BY nosort DESC LIMIT 1 2"), arr(&["d", "b"]));
    assert_eq!(h.run("SORT l BY nosort DESC LIMIT 20 3"), arr(&[]));
    // A later BY with a star does not undo it.
    assert_eq!(h.run("SORT l BY nosort BY w_* LIMIT 0 2"), arr(&["c", "a"]));
    assert_eq!(h.run("OBJECT ENCODING z"), bulk("listpack"));
    assert_eq!(h.run("SORT z BY nosort"), arr(&["d", "b", "c", "a"]));
    // Redis turns a sorted set it sorts into a skiplist for good.
    assert_eq!(h.run("OBJECT ENCODING z"), bulk("skiplist"));
    assert_eq!(h.run("SORT z BY nosort DESC LIMIT 1 2"), arr(&["c", "b"]));
    assert_eq!(h.run("SORT z BY nosort LIMIT 1 2"), arr(&["b", "c"]));
    assert_eq!(h.run("SORT z ALPHA"), arr(&["a", "b", "c", "d"]));
}

#[test]
fn sets_sort_and_store_sorted() {
    let mut h = with(&["SADD s 5 3 9 1", "SADD t b a c 10 2"]);
    assert_eq!(h.run("SORT s"), arr(&["1", "3", "5", "9"]));
    assert_eq!(h.run("SORT t ALPHA"), arr(&["10", "2", "a", "b", "c"]));
    assert_eq!(
        h.run("SORT t"),
        err("ERR One or more scores can't be converted into double")
    );
    // BY a constant with STORE sorts a set as ALPHA (its own order is undefined).
    assert_eq!(h.run("SORT t BY nosort STORE d"), int(5));
    assert_eq!(h.run("LRANGE d 0 -1"), arr(&["10", "2", "a", "b", "c"]));
    assert_eq!(h.run("SORT t BY nosort DESC STORE d"), int(5));
    assert_eq!(h.run("LRANGE d 0 -1"), arr(&["c", "b", "a", "2", "10"]));
}

#[test]
fn by_and_get_read_strings_and_hash_fields() {
    let mut h = with(&[
        "RPUSH m 3 1 2 10 -5",
        "MSET w_3 30 w_1 10 w_2 20 w_10 -1 w_-5 5",
        "HSET h_1 f one",
        "HSET h_2 x a",
        "HSET h_3 f three",
        "SADD w_2x a",
    ]);
    assert_eq!(h.run("SORT m BY w_*"), arr(&["10", "-5", "1", "2", "3"]));
    assert_eq!(
        h.run("SORT m BY w_* DESC"),
        arr(&["3", "2", "1", "-5", "10"])
    );
    assert_eq!(
        h.run("SORT m BY w_* GET # GET w_*"),
        arr(&["10", "-1", "-5", "5", "1", "10", "2", "20", "3", "30"])
    );
    // A missing key, a field missing, a key of another type: nil.
    assert_eq!(
        h.run("SORT m LIMIT 0 3 GET h_*->f GET w_*x GET nokey"),
        "*9\r\n$-1\r\n$-1\r\n$-1\r\n$3\r\none\r\n$-1\r\n$-1\r\n$-1\r\n$-1\r\n$-1\r\n"
    );
    // Missing weights are 0 numerically and sort first with ALPHA; ties keep the
    // list's order.
    h.run("HSET n_3 v 1.5");
    h.run("HSET n_1 v -2");
    assert_eq!(h.run("SORT m BY n_*->v"), arr(&["1", "-5", "10", "2", "3"]));
    assert_eq!(
        h.run("SORT m BY h_*->f ALPHA"),
        arr(&["2", "10", "-5", "1", "3"])
    );
    assert_eq!(
        h.run("SORT m BY h_*->f ALPHA DESC LIMIT 0 2 GET h_*->f GET #"),
        arr(&["three", "3", "one", "1"])
    );
    // RESP3: nil is `_`.
    h.proto = ruvio_resp::Protocol::Resp3;
    assert_eq!(h.run("SORT m LIMIT 0 1 GET nokey_*"), "*1\r\n_\r\n");
    // A GET pattern without a star names no key.
    assert_eq!(h.run("SORT m LIMIT 0 1 GET w_1"), "*1\r\n_\r\n");
}

#[test]
fn patterns_follow_lookup_key_by_pattern() {
    let mut h = with(&[
        "RPUSH l a",
        "SET k_a->x string",
        "SET k_a-> arrow-end",
        "HSET k_a x field",
        "SET p_a_s suffix",
    ]);
    assert_eq!(h.run("SORT l BY nosort GET k_*->x"), arr(&["field"]));
    assert_eq!(h.run("SORT l BY nosort GET k_*->"), arr(&["arrow-end"]));
    assert_eq!(h.run("SORT l BY nosort GET p_*_s"), arr(&["suffix"]));
    assert_eq!(h.run("SORT l ALPHA GET #"), arr(&["a"]));
    // Only the first star is replaced.
    h.run("SET q_a_* two-stars");
    assert_eq!(h.run("SORT l ALPHA GET q_*_*"), arr(&["two-stars"]));
}

#[test]
fn store_writes_a_list_and_logs_it() {
    let mut h = with(&["RPUSH m 3 1 2", "MSET w_1 c w_2 b w_3 a", "SET d old"]);
    assert_eq!(h.log_of("SORT m STORE d"), ["DEL d", "RPUSH d 1 2 3"]);
    assert_eq!(events(&h), [(EventClass::List, "sortstore")]);
    assert_eq!(h.effects.dirty, 3);
    assert_eq!(h.run("LRANGE d 0 -1"), arr(&["1", "2", "3"]));
    assert_eq!(h.run("OBJECT ENCODING d"), bulk("listpack"));
    assert_eq!(
        h.log_of("SORT m BY w_* ALPHA GET w_* GET nokey STORE e"),
        ["RPUSH e a  b  c "]
    );
    assert_eq!(h.run("LLEN e"), int(6));
    // An empty result deletes the destination.
    assert_eq!(h.log_of("SORT m LIMIT 0 0 STORE d"), ["DEL d"]);
    assert_eq!(events(&h), [(EventClass::Generic, "del")]);
    assert_eq!(h.run("EXISTS d"), int(0));
    assert!(h.log_of("SORT nolist STORE d").is_empty());
    assert_eq!(h.effects.dirty, 0);
    // The last STORE wins; a TTL on the destination goes.
    h.run("SET f x EX 100");
    assert_eq!(h.run("SORT m STORE d STORE f"), int(3));
    assert_eq!(h.run("TTL f"), int(-1));
    assert_eq!(h.run("EXISTS d"), int(0));
    // Storing onto the sorted key itself.
    assert_eq!(h.run("SORT m DESC STORE m"), int(3));
    assert_eq!(h.run("LRANGE m 0 -1"), arr(&["3", "2", "1"]));
}

#[test]
fn big_store_results_log_in_batches() {
    let mut h = Harness::default();
    let mut push: Vec<Vec<u8>> = vec![b"RPUSH".to_vec(), b"big".to_vec()];
    push.extend((0..2500).map(|i| i.to_string().into_bytes()));
    let refs: Vec<&[u8]> = push.iter().map(Vec::as_slice).collect();
    h.run_args(&refs);
    let records = h.log_of("SORT big STORE out");
    assert_eq!(records.len(), 3);
    assert!(records.iter().all(|r| r.starts_with("RPUSH out ")));
    let stored: usize = records.iter().map(|r| r.split(' ').count() - 2).sum();
    assert_eq!(stored, 2500);
    assert_eq!(h.run("OBJECT ENCODING out"), bulk("quicklist"));
}

#[test]
fn errors_in_redis_order() {
    let mut h = with(&["SET str x", "RPUSH l 1"]);
    let wrongtype = err("WRONGTYPE Operation against a key holding the wrong kind of value");
    assert_eq!(h.run("SORT str"), wrongtype);
    // Option errors come before the type check.
    assert_eq!(h.run("SORT str foo"), err("ERR syntax error"));
    assert_eq!(h.run("SORT l BY"), err("ERR syntax error"));
    assert_eq!(h.run("SORT l GET"), err("ERR syntax error"));
    assert_eq!(h.run("SORT l STORE"), err("ERR syntax error"));
    assert_eq!(h.run("SORT_RO l STORE d"), err("ERR syntax error"));
    assert_eq!(h.run("SORT_RO l DESC"), arr(&["1"]));
    assert_eq!(
        h.run("SORT"),
        err("ERR wrong number of arguments for 'sort' command")
    );
    assert_eq!(h.run("SORT nolist"), arr(&[]));
    assert_eq!(h.run("SORT nolist STORE d"), int(0));
    assert_eq!(h.run("HSET h f v"), int(1));
    assert_eq!(h.run("SORT h"), wrongtype);
}

#[test]
fn cluster_mode_refuses_patterns() {
    let mut h = with(&["RPUSH l 2 1"]);
    h.engine.config_mut().cluster_enabled = true;
    assert_eq!(
        h.run("SORT l BY w_*"),
        err("ERR BY option of SORT denied in Cluster mode.")
    );
    assert_eq!(
        h.run("SORT l ALPHA GET #"),
        err("ERR GET option of SORT denied in Cluster mode.")
    );
    assert_eq!(
        h.run("SORT_RO l GET x"),
        err("ERR GET option of SORT denied in Cluster mode.")
    );
    // Left to right: an earlier syntax error wins.
    assert_eq!(h.run("SORT l foo BY w_*"), err("ERR syntax error"));
    assert_eq!(h.run("SORT l BY nosort"), arr(&["2", "1"]));
    assert_eq!(h.run("SORT l"), arr(&["1", "2"]));
}

#[test]
fn alpha_collates_as_the_c_locale() {
    let mut h = Harness::default();
    h.run_args(&[
        b"RPUSH".as_slice(),
        b"l",
        b"b",
        b"a\x00z",
        b"a\x00y",
        b"B",
        b"a",
    ]);
    // Without STORE the strings compare up to a NUL (strcoll), ties keep their order.
    assert_eq!(
        h.run_args(&[b"SORT".as_slice(), b"l", b"ALPHA"]),
        b"*5\r\n$1\r\nB\r\n$3\r\na\x00z\r\n$3\r\na\x00y\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
    // With STORE they compare whole.
    h.run("SORT l ALPHA STORE d");
    assert_eq!(
        h.run_args(&[b"LRANGE".as_slice(), b"d", b"0", b"-1"]),
        b"*5\r\n$1\r\nB\r\n$1\r\na\r\n$3\r\na\x00y\r\n$3\r\na\x00z\r\n$1\r\nb\r\n"
    );
}

#[test]
fn pattern_keys_for_forward_mode() {
    let args = |line: &str| -> OwnedArgs { line.split(' ').map(str::as_bytes).collect() };
    let wanted = |line: &str| ruvio_engine::value_keys_wanted(args(line).args());
    assert!(wanted("SORT l BY w_*"));
    assert!(wanted("SORT l GET h_*->f"));
    assert!(wanted("SORT_RO l BY nosort GET x_*"));
    assert!(!wanted("SORT l"));
    assert!(!wanted("SORT l BY nosort GET # GET constant"));
    assert!(!wanted("SORT l BY nosort BY w_*"));
    assert!(!wanted("SORT l BY w_* foo"));
    assert!(!wanted("SORT_RO l BY w_* STORE d"));

    let mut h = with(&["RPUSH l b a b", "SADD s 1 2", "SET str x"]);
    let keys = |engine: &Engine, line: &str| -> Vec<String> {
        engine
            .value_keys(0, args(line).args(), NOW_MS)
            .iter()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect()
    };
    assert_eq!(
        keys(&h.engine, "SORT l BY w_* GET h_*->f GET # LIMIT 0 1"),
        ["h_a", "h_b", "w_a", "w_b"]
    );
    assert_eq!(keys(&h.engine, "SORT s GET o_*"), ["o_1", "o_2"]);
    assert!(keys(&h.engine, "SORT missing BY w_*").is_empty());
    assert!(keys(&h.engine, "SORT str BY w_*").is_empty());
    assert!(keys(&h.engine, "SORT l").is_empty());
    h.run("DEL l");
    assert!(keys(&h.engine, "SORT l BY w_*").is_empty());
}

#[test]
fn every_pattern_lookup_is_a_read() {
    // Redis: the sorted key, every BY key, the GET keys of the rows kept (the
    // destination is a write lookup and counts nothing).
    let mut h = with(&["RPUSH m 1 2 3", "SET w_1 1"]);
    h.engine.reset_stats();
    h.run("SORT m BY w_* GET w_*");
    let stats = h.engine.stats();
    assert_eq!((stats.keyspace_hits, stats.keyspace_misses), (3, 4));
    h.engine.reset_stats();
    h.run("SORT m BY w_* GET w_* LIMIT 0 1 STORE d");
    let stats = h.engine.stats();
    assert_eq!((stats.keyspace_hits, stats.keyspace_misses), (2, 3));
}
