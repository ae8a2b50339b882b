//! Stream behaviour newer than the redis-server 7.0 the differential tests run
//! against, checked against the replies Redis documents and its source gives
//! (t_stream.c and the commands' JSON of 7.4 to 8.2):
//!
//! - XREAD with `+` (7.4): the stream's last entry, alone whatever COUNT says;
//!   an empty or missing stream waits (BLOCK) or answers nil, and a woken client
//!   reads `+` afresh; XREADGROUP refuses `+`.
//! - XSETID (7.4) refuses a last ID below the stream's max-deleted-entry-id.
//! - XINFO's consumer `active-time` / `inactive` (7.2).
//! - XDELEX and XACKDEL with KEEPREF / DELREF / ACKED, and XADD / XTRIM with
//!   KEEPREF / DELREF / ACKED (8.2), as the command docs and Redis's tests give
//!   them.
//!
//! Exact reply bytes, real clients, 2 shards (keys on both).

mod common;

use common::*;
use std::thread::sleep;
use std::time::Duration;

/// How long a client must stay silent to count as blocked.
const STILL_BLOCKED: Duration = Duration::from_millis(150);

/// One stream's part of an XREAD reply (RESP2): the key and its entries, each
/// entry `(id, field, value)`.
fn stream_part(key: &str, entries: &[(&str, &str, &str)]) -> String {
    let mut out = format!("*2\r\n{}*{}\r\n", bulk(key), entries.len());
    for (id, field, value) in entries {
        out += &format!("*2\r\n{}*2\r\n{}{}", bulk(id), bulk(field), bulk(value));
    }
    out
}

/// An XREAD reply (RESP2) of several streams' parts.
fn xread_reply(parts: &[String]) -> Vec<u8> {
    format!("*{}\r\n{}", parts.len(), parts.concat()).into_bytes()
}

#[test]
fn xread_plus_reads_the_last_entry() {
    let server = Server::forward(2);
    let keys = keys_per_shard("plus", 2);
    let (s, t) = (&keys[0], &keys[1]);
    let mut c = server.raw();
    for (key, id, field) in [(s, "1-0", "a"), (s, "2-0", "b"), (t, "5-0", "x")] {
        c.cmd(&["XADD", key, id, field, "v"]);
    }
    c.cmd(&["XADD", t, "6-0", "y", "w"]);
    let s_last = stream_part(s, &[("2-0", "b", "v")]);
    let t_last = stream_part(t, &[("6-0", "y", "w")]);
    // Only the last entry, with or without COUNT.
    c.roundtrip(
        &encode(&["XREAD", "STREAMS", s, "+"]),
        &xread_reply(std::slice::from_ref(&s_last)),
    );
    c.roundtrip(
        &encode(&["XREAD", "COUNT", "10", "STREAMS", s, "+"]),
        &xread_reply(std::slice::from_ref(&s_last)),
    );
    // Several streams, each its own last entry; `+` beside a plain ID.
    c.roundtrip(
        &encode(&["XREAD", "COUNT", "5", "STREAMS", s, t, "+", "+"]),
        &xread_reply(&[s_last.clone(), t_last.clone()]),
    );
    c.roundtrip(
        &encode(&["XREAD", "STREAMS", s, t, "+", "0"]),
        &xread_reply(&[
            s_last.clone(),
            stream_part(t, &[("5-0", "x", "v"), ("6-0", "y", "w")]),
        ]),
    );
    // A missing stream has no last entry: left out, or nil when alone.
    c.roundtrip(
        &encode(&["XREAD", "STREAMS", "plus-missing", s, "+", "+"]),
        &xread_reply(std::slice::from_ref(&s_last)),
    );
    c.roundtrip(
        &encode(&["XREAD", "STREAMS", "plus-missing", "+"]),
        b"*-1\r\n",
    );
    // The last live entry: a deleted last one is skipped.
    c.roundtrip(&encode(&["XDEL", s, "2-0"]), b":1\r\n");
    c.roundtrip(
        &encode(&["XREAD", "STREAMS", s, "+"]),
        &xread_reply(&[stream_part(s, &[("1-0", "a", "v")])]),
    );
    // RESP3: a map of stream to entries.
    let mut resp3 = server.raw();
    assert!(resp3.cmd(&["HELLO", "3"]).starts_with(b"%"));
    resp3.roundtrip(
        &encode(&["XREAD", "STREAMS", t, "+"]),
        format!(
            "%1\r\n{}*1\r\n*2\r\n{}*2\r\n{}{}",
            bulk(t),
            bulk("6-0"),
            bulk("y"),
            bulk("w")
        )
        .as_bytes(),
    );
    // Errors as for any ID.
    c.cmd(&["SET", "plus-string", "x"]);
    c.roundtrip(
        &encode(&["XREAD", "STREAMS", "plus-string", "+"]),
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    c.cmd(&["XGROUP", "CREATE", s, "g", "0"]);
    c.roundtrip(
        &encode(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", s, "+"]),
        b"-ERR The + ID is meaningless in the context of XREADGROUP: you want to read the \
          history of this consumer by specifying a proper ID, or use the > ID to get new \
          messages. The + ID would just return an empty result set.\r\n",
    );
    c.cmd(&["DEL", s, t, "plus-string"]);
}

/// BLOCK with `+`: a stream with entries answers at once; an empty or missing
/// one waits, and the client, woken after a transaction added several entries,
/// reads the last of them (it is not rewritten as `$` is).
#[test]
fn xread_plus_blocks_until_there_is_a_last_entry() {
    let server = Server::forward(2);
    let keys = keys_per_shard("plusblock", 2);
    let mut writer = server.raw();
    writer.cmd(&["XADD", &keys[0], "3-0", "f", "v"]);
    let mut at_once = server.raw();
    at_once.roundtrip(
        &encode(&["XREAD", "BLOCK", "0", "STREAMS", &keys[0], "+"]),
        &stream_entry_reply(&keys[0], "3-0", "f", "v"),
    );
    for key in &keys {
        // An empty stream (XGROUP CREATE MKSTREAM) waits as a missing one does.
        let empty = key == &keys[0];
        if empty {
            writer.cmd(&["DEL", key]);
            writer.cmd(&["XGROUP", "CREATE", key, "g", "$", "MKSTREAM"]);
        }
        let mut waiter = server.raw();
        waiter.send(&encode(&[
            "XREAD", "COUNT", "5", "BLOCK", "0", "STREAMS", key, "+",
        ]));
        waiter.expect_silence(STILL_BLOCKED);
        writer.roundtrip(&encode(&["MULTI"]), b"+OK\r\n");
        for id in ["7-0", "8-0", "9-0"] {
            writer.roundtrip(&encode(&["XADD", key, id, "n", id]), b"+QUEUED\r\n");
        }
        writer.roundtrip(
            &encode(&["EXEC"]),
            format!("*3\r\n{}{}{}", bulk("7-0"), bulk("8-0"), bulk("9-0")).as_bytes(),
        );
        waiter.expect(&stream_entry_reply(key, "9-0", "n", "9-0"));
    }
    // A timeout answers nil as for any ID.
    let mut late = server.raw();
    late.roundtrip(
        &encode(&["XREAD", "BLOCK", "50", "STREAMS", "plusblock-missing", "+"]),
        b"*-1\r\n",
    );
    writer.cmd(&["DEL", &keys[0], &keys[1]]);
    sleep(Duration::from_millis(10));
}

/// XSETID below max-deleted-entry-id: Redis 7.4's error (7.0 accepted it and a
/// later XADD could bring a deleted ID back); at or above it, OK.
#[test]
fn xsetid_stays_at_or_above_the_max_deleted_id() {
    let server = Server::forward(1);
    let mut c = server.raw();
    c.cmd(&["XADD", "setid", "1-0", "f", "v"]);
    c.cmd(&["XADD", "setid", "5-0", "f", "v"]);
    c.roundtrip(&encode(&["XDEL", "setid", "5-0"]), b":1\r\n");
    c.roundtrip(
        &encode(&["XSETID", "setid", "4-0"]),
        b"-ERR The ID specified in XSETID is smaller than current max_deleted_entry_id\r\n",
    );
    // The argument checks come first: MAXDELETEDID above the ID is refused
    // before the key is looked at.
    c.roundtrip(
        &encode(&["XSETID", "setid", "4-0", "MAXDELETEDID", "4-5"]),
        b"-ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id\r\n",
    );
    c.roundtrip(&encode(&["XSETID", "setid", "5-0"]), b"+OK\r\n");
    c.roundtrip(
        &encode(&["XADD", "setid", "5-0", "f", "v"]),
        b"-ERR The ID specified in XADD is equal or smaller than the target stream top item\r\n",
    );
    // MAXDELETEDID raises the bound a later XSETID is held to.
    c.roundtrip(
        &encode(&["XSETID", "setid", "9-0", "MAXDELETEDID", "8-0"]),
        b"+OK\r\n",
    );
    c.roundtrip(
        &encode(&["XSETID", "setid", "7-0"]),
        b"-ERR The ID specified in XSETID is smaller than current max_deleted_entry_id\r\n",
    );
    c.roundtrip(
        &encode(&["XADD", "setid", "9-*", "f", "v"]),
        bulk("9-1").as_bytes(),
    );
}

/// XINFO CONSUMERS in RESP3, as `(name, pending, idle, inactive)` per consumer
/// (the map's keys checked in Redis 7.2's order).
fn consumers(conn: &mut RawConn, key: &str) -> Vec<(Vec<u8>, i64, i64, i64)> {
    let Value::Array(items) = decode(&conn.cmd(&["XINFO", "CONSUMERS", key, "g"])) else {
        panic!("XINFO CONSUMERS: not an array");
    };
    items
        .into_iter()
        .map(|item| {
            let Value::Map(pairs) = item else {
                panic!("a consumer is not a map: {item:?}");
            };
            let keys: Vec<Value> = pairs.iter().map(|(k, _)| k.clone()).collect();
            let expected: Vec<Value> = ["name", "pending", "idle", "inactive"]
                .iter()
                .map(|k| Value::Bulk(k.as_bytes().to_vec()))
                .collect();
            assert_eq!(keys, expected);
            match &pairs[..] {
                [(_, Value::Bulk(name)), (_, Value::Int(pending)), (_, Value::Int(idle)), (_, Value::Int(inactive))] => {
                    (name.clone(), *pending, *idle, *inactive)
                }
                other => panic!("consumer fields: {other:?}"),
            }
        })
        .collect()
}

/// A consumer's XINFO STREAM FULL entry in RESP3, as `(seen-time,
/// active-time)`, its map's keys checked in Redis 7.2's order.
fn full_consumer_times(conn: &mut RawConn, key: &str, name: &str) -> (i64, i64) {
    let Value::Map(stream) = decode(&conn.cmd(&["XINFO", "STREAM", key, "FULL"])) else {
        panic!("XINFO STREAM FULL: not a map");
    };
    let groups = stream
        .iter()
        .find(|(k, _)| *k == Value::Bulk(b"groups".to_vec()))
        .map(|(_, v)| v.clone());
    let Some(Value::Array(groups)) = groups else {
        panic!("no groups");
    };
    let Value::Map(group) = &groups[0] else {
        panic!("group not a map");
    };
    let Some((_, Value::Array(consumers))) = group
        .iter()
        .find(|(k, _)| *k == Value::Bulk(b"consumers".to_vec()))
    else {
        panic!("no consumers");
    };
    for consumer in consumers {
        let Value::Map(fields) = consumer else {
            panic!("consumer not a map");
        };
        let keys: Vec<&Value> = fields.iter().map(|(k, _)| k).collect();
        let expected: Vec<Value> = ["name", "seen-time", "active-time", "pel-count", "pending"]
            .iter()
            .map(|k| Value::Bulk(k.as_bytes().to_vec()))
            .collect();
        assert_eq!(keys, expected.iter().collect::<Vec<_>>());
        if fields[0].1 == Value::Bulk(name.as_bytes().to_vec()) {
            let (Value::Int(seen), Value::Int(active)) = (&fields[1].1, &fields[2].1) else {
                panic!("times: {fields:?}");
            };
            return (*seen, *active);
        }
    }
    panic!("no consumer {name}");
}

/// Redis 7.2's consumer times: `seen-time` moves whenever a command names the
/// consumer, `active-time` only when it is given an entry to own (XREADGROUP
/// `>` without NOACK, XCLAIM, XAUTOCLAIM), -1 before. XINFO CONSUMERS shows the
/// latter as `inactive` (ms since, or -1) after `idle`.
#[test]
fn consumers_report_seen_and_active_times() {
    let server = Server::forward(2);
    let key = &keys_per_shard("active", 2)[1];
    let mut c = server.raw();
    assert!(c.cmd(&["HELLO", "3"]).starts_with(b"%"));
    for id in ["1-0", "2-0", "3-0"] {
        c.cmd(&["XADD", key, id, "f", "v"]);
    }
    c.cmd(&["XGROUP", "CREATE", key, "g", "0"]);
    c.cmd(&["XGROUP", "CREATECONSUMER", key, "g", "idler"]);
    c.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "reader",
        "COUNT",
        "1",
        "STREAMS",
        key,
        ">",
    ]);
    c.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "noack",
        "NOACK",
        "COUNT",
        "1",
        "STREAMS",
        key,
        ">",
    ]);
    // A claim with min-idle-time an hour moves nothing: no active-time.
    c.cmd(&["XCLAIM", key, "g", "idler", "3600000", "1-0"]);
    let got = consumers(&mut c, key);
    let names: Vec<&[u8]> = got.iter().map(|c| c.0.as_slice()).collect();
    assert_eq!(names, [&b"idler"[..], b"noack", b"reader"]);
    let inactive: Vec<i64> = got.iter().map(|c| c.3).collect();
    assert_eq!(inactive[..2], [-1, -1], "{got:?}");
    assert!((0..1000).contains(&inactive[2]), "{got:?}");
    let (seen, active) = full_consumer_times(&mut c, key, "idler");
    assert!(seen > 1_600_000_000_000 && active == -1, "{seen} {active}");
    let (seen, active) = full_consumer_times(&mut c, key, "reader");
    assert!(active >= seen - 1000 && active <= seen, "{seen} {active}");

    // Time passes; a history read moves seen-time (idle) but not active-time.
    sleep(Duration::from_millis(120));
    c.cmd(&["XREADGROUP", "GROUP", "g", "reader", "STREAMS", key, "0"]);
    let reader = consumers(&mut c, key).pop().expect("reader");
    assert!(reader.2 < 100 && reader.3 >= 120, "{reader:?}");
    let (seen, active) = full_consumer_times(&mut c, key, "reader");
    assert!(seen - active >= 120, "{seen} {active}");

    // XCLAIM and XAUTOCLAIM that move an entry make their consumer active.
    c.cmd(&["XCLAIM", key, "g", "late", "0", "1-0"]);
    c.cmd(&["XREADGROUP", "GROUP", "g", "reader", "STREAMS", key, ">"]);
    c.cmd(&["XAUTOCLAIM", key, "g", "idler", "0", "0", "COUNT", "1"]);
    let got = consumers(&mut c, key);
    for (name, _, _, inactive) in &got[..2] {
        assert!(
            (0..100).contains(inactive),
            "{}: {got:?}",
            String::from_utf8_lossy(name)
        );
    }
    // An XAUTOCLAIM that finds nothing to move leaves active-time alone.
    c.cmd(&["XAUTOCLAIM", key, "g", "noack", "3600000", "0"]);
    assert_eq!(consumers(&mut c, key)[2].3, -1);
    c.cmd(&["DEL", key]);
}

/// An array of integers, as XDELEX and XACKDEL answer.
fn codes(values: &[i64]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", values.len());
    for v in values {
        out += &format!(":{v}\r\n");
    }
    out.into_bytes()
}

/// A stream of five entries `0-1` .. `4-1` with group `g` that has read them
/// all (pending with alice), and group `late` created at `$` when the stream
/// held `first` entries of them.
fn stream_with_groups(c: &mut RawConn, key: &str) {
    c.cmd(&["DEL", key]);
    for j in 0..5 {
        c.cmd(&["XADD", key, &format!("{j}-1"), "item", &j.to_string()]);
    }
    c.cmd(&["XGROUP", "CREATE", key, "g", "0"]);
    c.cmd(&["XREADGROUP", "GROUP", "g", "alice", "STREAMS", key, ">"]);
}

/// XDELEX under each policy: KEEPREF deletes and leaves the PEL; DELREF
/// deletes and empties the PEL; ACKED keeps (2) what a group still has pending
/// or has not had delivered, and deletes once nothing needs it (Redis's test
/// "XGROUP DESTROY removes all consumer group references"). Missing entries
/// answer -1, a missing key -1 for every ID.
#[test]
fn xdelex_follows_its_reference_policy() {
    let server = Server::forward(2);
    let key = &keys_per_shard("delex", 2)[1];
    let mut c = server.raw();
    stream_with_groups(&mut c, key);
    c.roundtrip(
        &encode(&[
            "XDELEX", key, "ACKED", "IDS", "5", "0-1", "1-1", "2-1", "3-1", "4-1",
        ]),
        &codes(&[2, 2, 2, 2, 2]),
    );
    // KEEPREF (the default): deleted, still pending.
    c.roundtrip(
        &encode(&["XDELEX", key, "IDS", "2", "0-1", "9-9"]),
        &codes(&[1, -1]),
    );
    c.roundtrip(&encode(&["XLEN", key]), b":4\r\n");
    c.roundtrip(
        &encode(&["XPENDING", key, "g"]),
        format!(
            "*4\r\n:5\r\n{}{}*1\r\n*2\r\n{}{}",
            bulk("0-1"),
            bulk("4-1"),
            bulk("alice"),
            bulk("5")
        )
        .as_bytes(),
    );
    // DELREF: deleted and dropped from the PEL.
    c.roundtrip(
        &encode(&["XDELEX", key, "DELREF", "IDS", "1", "1-1"]),
        &codes(&[1]),
    );
    c.roundtrip(&encode(&["XLEN", key]), b":3\r\n");
    assert!(c.cmd(&["XPENDING", key, "g"]).starts_with(b"*4\r\n:4\r\n"));
    // ACKED: acknowledged entries go; an entry a group has not been given yet
    // stays.
    c.roundtrip(&encode(&["XACK", key, "g", "2-1", "3-1"]), b":2\r\n");
    c.roundtrip(
        &encode(&["XADD", key, "5-1", "item", "5"]),
        bulk("5-1").as_bytes(),
    );
    c.roundtrip(
        &encode(&["XDELEX", key, "ACKED", "IDS", "3", "2-1", "5-1", "4-1"]),
        &codes(&[1, 2, 2]),
    );
    c.cmd(&["XGROUP", "DESTROY", key, "g"]);
    c.roundtrip(
        &encode(&["XDELEX", key, "ACKED", "IDS", "3", "3-1", "4-1", "5-1"]),
        &codes(&[1, 1, 1]),
    );
    c.roundtrip(&encode(&["XLEN", key]), b":0\r\n");
    // A missing key: -1 for every ID, before the IDs are read.
    c.roundtrip(
        &encode(&["XDELEX", "delex-missing", "IDS", "2", "1-1", "bad"]),
        &codes(&[-1, -1]),
    );
    c.cmd(&["DEL", key]);
}

/// XACKDEL acknowledges in its group and deletes under the policy: 1 acked
/// and deleted, 2 acked but kept (ACKED, another group needs it), -1 not
/// pending in the group; a missing group or key answers -1 for every ID.
#[test]
fn xackdel_acknowledges_then_deletes() {
    let server = Server::forward(2);
    let key = &keys_per_shard("ackdel", 2)[0];
    let mut c = server.raw();
    stream_with_groups(&mut c, key);
    c.cmd(&["XGROUP", "CREATE", key, "other", "0"]);
    c.cmd(&[
        "XREADGROUP",
        "GROUP",
        "other",
        "bob",
        "COUNT",
        "2",
        "STREAMS",
        key,
        ">",
    ]);
    // `other` has 0-1 and 1-1 pending and has not been given 2-1 .. 4-1.
    c.roundtrip(
        &encode(&[
            "XACKDEL", key, "g", "ACKED", "IDS", "3", "0-1", "3-1", "7-7",
        ]),
        &codes(&[2, 2, -1]),
    );
    c.roundtrip(&encode(&["XLEN", key]), b":5\r\n");
    // KEEPREF: acked in `g`, deleted, still pending in `other`.
    c.roundtrip(
        &encode(&["XACKDEL", key, "g", "IDS", "1", "1-1"]),
        &codes(&[1]),
    );
    c.roundtrip(&encode(&["XLEN", key]), b":4\r\n");
    assert!(c
        .cmd(&["XPENDING", key, "other"])
        .starts_with(b"*4\r\n:2\r\n"));
    // Acked already: not pending any more.
    c.roundtrip(
        &encode(&["XACKDEL", key, "g", "IDS", "1", "1-1"]),
        &codes(&[-1]),
    );
    // DELREF: gone from `other` too.
    c.roundtrip(
        &encode(&["XACKDEL", key, "g", "DELREF", "IDS", "1", "2-1"]),
        &codes(&[1]),
    );
    c.roundtrip(
        &encode(&["XACKDEL", key, "other", "DELREF", "IDS", "1", "0-1"]),
        &codes(&[1]),
    );
    assert!(c
        .cmd(&["XPENDING", key, "other"])
        .starts_with(b"*4\r\n:1\r\n"));
    assert!(c.cmd(&["XPENDING", key, "g"]).starts_with(b"*4\r\n:1\r\n"));
    c.roundtrip(&encode(&["XLEN", key]), b":2\r\n");
    c.roundtrip(
        &encode(&["XACKDEL", key, "nogroup", "IDS", "2", "1-1", "2-1"]),
        &codes(&[-1, -1]),
    );
    c.roundtrip(
        &encode(&["XACKDEL", "ackdel-missing", "g", "IDS", "1", "1-1"]),
        &codes(&[-1]),
    );
    c.cmd(&["DEL", key]);
}

/// The IDS block and the policy are read as Redis reads them: one policy at
/// most, numids a positive integer no larger than what follows, options may
/// follow the IDs; IDs are checked before anything changes; arity and
/// WRONGTYPE as for any command.
#[test]
fn xdelex_and_xackdel_refuse_bad_arguments() {
    let server = Server::forward(1);
    let mut c = server.raw();
    c.cmd(&["XADD", "args", "1-1", "f", "v"]);
    c.cmd(&["XGROUP", "CREATE", "args", "g", "0"]);
    c.cmd(&["SET", "args-string", "x"]);
    let cases: &[(&[&str], &[u8])] = &[
        (
            &["XDELEX", "args", "IDS", "0", "1-1"],
            b"-ERR Number of IDs must be a positive integer\r\n",
        ),
        (
            &["XDELEX", "args", "IDS", "x", "1-1"],
            b"-ERR Number of IDs must be a positive integer\r\n",
        ),
        (
            &["XDELEX", "args", "IDS", "3", "1-1", "2-1"],
            b"-ERR The `numids` parameter must match the number of arguments\r\n",
        ),
        (
            &["XDELEX", "args", "KEEPREF", "DELREF", "IDS", "1", "1-1"],
            b"-ERR syntax error\r\n",
        ),
        (
            &["XDELEX", "args", "IDS", "1", "1-1", "extra"],
            b"-ERR syntax error\r\n",
        ),
        (
            &["XDELEX", "args", "KEEPREF", "x", "y"],
            b"-ERR syntax error\r\n",
        ),
        (
            &["XDELEX", "args", "IDS", "2", "1-1", "nope"],
            b"-ERR Invalid stream ID specified as stream command argument\r\n",
        ),
        (
            &["XDELEX", "args", "IDS", "1"],
            b"-ERR wrong number of arguments for 'xdelex' command\r\n",
        ),
        (
            &["XACKDEL", "args", "g", "IDS", "1"],
            b"-ERR wrong number of arguments for 'xackdel' command\r\n",
        ),
        (
            &["XDELEX", "args-string", "IDS", "1", "1-1"],
            b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ),
        (
            &["XACKDEL", "args-string", "g", "IDS", "1", "1-1"],
            b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ),
        (
            &["XACKDEL", "args", "g", "IDS", "-1", "1-1"],
            b"-ERR Number of IDs must be a positive integer\r\n",
        ),
        // The policy may come after the IDs (group g has not been given 1-1).
        (
            &["XDELEX", "args", "IDS", "1", "1-1", "ACKED"],
            b"*1\r\n:2\r\n",
        ),
    ];
    for (command, want) in cases {
        c.roundtrip(&encode(command), want);
    }
    c.roundtrip(&encode(&["XLEN", "args"]), b":1\r\n");
}

/// XADD and XTRIM with DELREF drop what they trim from every PEL; KEEPREF
/// (the default) leaves it pending.
#[test]
fn trims_with_delref_drop_references() {
    let server = Server::forward(1);
    let mut c = server.raw();
    stream_with_groups(&mut c, "trimref");
    c.roundtrip(
        &encode(&["XTRIM", "trimref", "MAXLEN", "4", "KEEPREF"]),
        b":1\r\n",
    );
    assert!(c
        .cmd(&["XPENDING", "trimref", "g"])
        .starts_with(b"*4\r\n:5\r\n"));
    c.roundtrip(
        &encode(&["XTRIM", "trimref", "MAXLEN", "3", "DELREF"]),
        b":1\r\n",
    );
    assert!(c
        .cmd(&["XPENDING", "trimref", "g"])
        .starts_with(b"*4\r\n:4\r\n"));
    c.roundtrip(
        &encode(&["XADD", "trimref", "DELREF", "MINID", "4", "9-1", "f", "v"]),
        bulk("9-1").as_bytes(),
    );
    c.roundtrip(&encode(&["XLEN", "trimref"]), b":2\r\n");
    // 0-1 stays pending (KEEPREF dropped it before), 2-1 and 3-1 went with DELREF.
    c.roundtrip(
        &encode(&["XPENDING", "trimref", "g"]),
        format!(
            "*4\r\n:2\r\n{}{}*1\r\n*2\r\n{}{}",
            bulk("0-1"),
            bulk("4-1"),
            bulk("alice"),
            bulk("2")
        )
        .as_bytes(),
    );
}

/// The RESP2 bytes of an XRANGE over entries `(id, field, value)`.
fn entries_reply(entries: &[(&str, &str, &str)]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", entries.len());
    for (id, field, value) in entries {
        out += &format!("*2\r\n{}*2\r\n{}{}", bulk(id), bulk(field), bulk(value));
    }
    out.into_bytes()
}

/// XADD and XTRIM with ACKED (8.2) drop only entries no group needs: an entry
/// one group still has pending, or has not had delivered, stays and the trim
/// goes on past it; the PELs are left as they are; with no group left ACKED
/// trims as KEEPREF does (the command pages of XADD and XTRIM).
#[test]
fn trims_with_acked_keep_what_a_group_needs() {
    let server = Server::forward(2);
    let key = &keys_per_shard("trimacked", 2)[1];
    let mut c = server.raw();
    stream_with_groups(&mut c, key);
    // `late` was delivered up to 2-1 and has nothing pending.
    c.roundtrip(
        &encode(&["XGROUP", "CREATE", key, "late", "2-1"]),
        b"+OK\r\n",
    );
    // Everything is pending in `g`: nothing goes.
    c.roundtrip(&encode(&["XTRIM", key, "MAXLEN", "0", "ACKED"]), b":0\r\n");
    c.roundtrip(&encode(&["XLEN", key]), b":5\r\n");
    c.roundtrip(&encode(&["XACK", key, "g", "0-1", "1-1", "3-1"]), b":3\r\n");
    // 0-1 and 1-1 are acknowledged and delivered to both; 3-1 is past `late`.
    c.roundtrip(&encode(&["XTRIM", key, "MAXLEN", "0", "ACKED"]), b":2\r\n");
    c.roundtrip(
        &encode(&["XRANGE", key, "-", "+"]),
        &entries_reply(&[
            ("2-1", "item", "2"),
            ("3-1", "item", "3"),
            ("4-1", "item", "4"),
        ]),
    );
    // XADD's trim: the new entry and every older one are needed.
    c.roundtrip(
        &encode(&["XADD", key, "ACKED", "MAXLEN", "1", "5-1", "f", "v"]),
        bulk("5-1").as_bytes(),
    );
    c.roundtrip(&encode(&["XLEN", key]), b":4\r\n");
    // `late` delivered past everything: 3-1 is free, 2-1 and 4-1 still pending
    // in `g`; MINID goes on past the pending 2-1.
    c.roundtrip(&encode(&["XGROUP", "SETID", key, "late", "$"]), b"+OK\r\n");
    c.roundtrip(&encode(&["XTRIM", key, "MINID", "5", "ACKED"]), b":1\r\n");
    c.roundtrip(
        &encode(&["XRANGE", key, "-", "+"]),
        &entries_reply(&[
            ("2-1", "item", "2"),
            ("4-1", "item", "4"),
            ("5-1", "f", "v"),
        ]),
    );
    // MAXLEN cannot be reached: 5-1 was never delivered to `g`, 2-1 is pending.
    c.roundtrip(&encode(&["XACK", key, "g", "4-1"]), b":1\r\n");
    c.roundtrip(&encode(&["XTRIM", key, "MAXLEN", "1", "ACKED"]), b":1\r\n");
    c.roundtrip(&encode(&["XLEN", key]), b":2\r\n");
    // An approximate trim drops whole nodes only: this one holds 2-1.
    c.roundtrip(
        &encode(&["XTRIM", key, "MAXLEN", "~", "0", "ACKED"]),
        b":0\r\n",
    );
    // The PEL is untouched: 2-1 is still alice's.
    c.roundtrip(
        &encode(&["XPENDING", key, "g"]),
        format!(
            "*4\r\n:1\r\n{}{}*1\r\n*2\r\n{}{}",
            bulk("2-1"),
            bulk("2-1"),
            bulk("alice"),
            bulk("1")
        )
        .as_bytes(),
    );
    // No group left: nothing is needed.
    c.roundtrip(&encode(&["XGROUP", "DESTROY", key, "g"]), b":1\r\n");
    c.roundtrip(&encode(&["XGROUP", "DESTROY", key, "late"]), b":1\r\n");
    c.roundtrip(&encode(&["XTRIM", key, "MAXLEN", "0", "ACKED"]), b":2\r\n");
    c.roundtrip(&encode(&["XLEN", key]), b":0\r\n");
}

/// An approximate ACKED trim drops a node whole when none of its entries is
/// needed and stops at the first node that holds one (nodes of two entries
/// under `stream-node-max-entries 2`).
#[test]
fn approximate_acked_trims_drop_free_nodes() {
    let server = Server::forward(1);
    let mut c = server.raw();
    c.roundtrip(
        &encode(&["CONFIG", "SET", "stream-node-max-entries", "2"]),
        b"+OK\r\n",
    );
    let key = "ackednodes";
    for j in 1..=6 {
        c.cmd(&["XADD", key, &format!("{j}-1"), "f", "v"]);
    }
    c.roundtrip(&encode(&["XGROUP", "CREATE", key, "g", "0"]), b"+OK\r\n");
    assert!(c
        .cmd(&["XREADGROUP", "GROUP", "g", "bob", "STREAMS", key, ">"])
        .starts_with(b"*1\r\n"));
    c.roundtrip(&encode(&["XACK", key, "g", "1-1", "2-1", "4-1"]), b":3\r\n");
    // Node [1-1 2-1] is free, node [3-1 4-1] holds the pending 3-1.
    c.roundtrip(
        &encode(&["XTRIM", key, "MAXLEN", "~", "0", "ACKED"]),
        b":2\r\n",
    );
    c.roundtrip(&encode(&["XLEN", key]), b":4\r\n");
    // Exact: 4-1 goes alone.
    c.roundtrip(&encode(&["XTRIM", key, "MAXLEN", "0", "ACKED"]), b":1\r\n");
    c.roundtrip(&encode(&["XLEN", key]), b":3\r\n");
}
