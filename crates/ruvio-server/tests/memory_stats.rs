//! MEMORY STATS: Redis 7.0's fields, in its order and with its reply types
//! (integers, doubles, a map per database with keys), in RESP2 and RESP3, against
//! redis-server; and figures that follow the data, on 1 and 2 shards (every
//! shard's keys and tables counted).

mod common;

use common::*;

/// The reply's shape: each field's name and kind (`int`, `double`, `map` with its
/// fields' shape), in order.
fn shape(conn: &mut RawConn) -> Vec<String> {
    let reply = decode(&conn.cmd(&["memory", "stats"]));
    fields(&reply)
}

fn fields(value: &Value) -> Vec<String> {
    let pairs: Vec<(Value, Value)> = match value {
        Value::Map(pairs) => pairs.clone(),
        Value::Array(items) => items
            .chunks(2)
            .map(|p| (p[0].clone(), p[1].clone()))
            .collect(),
        other => panic!("not a map: {other:?}"),
    };
    pairs
        .iter()
        .map(|(k, v)| {
            let name = k.text();
            let kind = match v {
                Value::Int(_) => "int".to_string(),
                Value::Double(_) => "double".to_string(),
                // RESP2 doubles are bulk strings (`100` for a round one).
                Value::Bulk(b)
                    if std::str::from_utf8(b).is_ok_and(|t| t.parse::<f64>().is_ok()) =>
                {
                    "double".to_string()
                }
                Value::Map(_) | Value::Array(_) => format!("map {:?}", fields(v)),
                other => format!("{other:?}"),
            };
            format!("{name}: {kind}")
        })
        .collect()
}

/// The integer field `name` of the reply.
fn figure(conn: &mut RawConn, name: &str) -> i64 {
    let reply = decode(&conn.cmd(&["memory", "stats"]));
    let Value::Array(items) = reply else {
        panic!("RESP2 MEMORY STATS: {reply:?}")
    };
    let at = items
        .iter()
        .position(|v| matches!(v, Value::Bulk(b) if b == name.as_bytes()))
        .unwrap_or_else(|| panic!("no {name}"));
    match &items[at + 1] {
        Value::Int(n) => *n,
        other => panic!("{name}: {other:?}"),
    }
}

/// Keys, some with a TTL, in databases 0 and 2.
fn fill(conn: &mut RawConn, keys: usize) {
    for i in 0..keys {
        conn.cmd(&["set", &format!("key:{i}"), &"v".repeat(40)]);
    }
    conn.cmd(&["expire", "key:1", "1000"]);
    conn.cmd(&["select", "2"]);
    conn.cmd(&["set", "other", "1"]);
    conn.cmd(&["select", "0"]);
}

#[test]
fn memory_stats_has_redis_fields_types_and_order() {
    let Some(_) = require_redis_server("memory_stats") else {
        return;
    };
    let redis = Server::redis();
    let mut theirs = redis.raw();
    fill(&mut theirs, 20);
    for shards in [1, 2] {
        let ruvio = Server::forward(shards);
        let mut ours = ruvio.raw();
        fill(&mut ours, 20);
        assert_eq!(
            shape(&mut ours),
            shape(&mut theirs),
            "RESP2, {shards} shards"
        );
        ours.cmd(&["hello", "3"]);
        theirs.cmd(&["hello", "3"]);
        assert_eq!(
            shape(&mut ours),
            shape(&mut theirs),
            "RESP3, {shards} shards"
        );
        theirs.cmd(&["hello", "2"]);
    }
}

#[test]
fn memory_stats_follows_the_data() {
    for shards in [1, 2] {
        let ruvio = Server::forward(shards);
        let mut conn = ruvio.raw();
        let before = figure(&mut conn, "total.allocated");
        let overhead_before = figure(&mut conn, "overhead.total");
        fill(&mut conn, 5000);
        assert_eq!(figure(&mut conn, "keys.count"), 5001, "{shards} shards");
        let total = figure(&mut conn, "total.allocated");
        assert!(total > before + 5000 * 48, "{before} -> {total}");
        assert!(figure(&mut conn, "peak.allocated") >= total);
        let startup = figure(&mut conn, "startup.allocated");
        assert!(startup > 0 && startup <= total, "startup {startup}");
        let overhead = figure(&mut conn, "overhead.total");
        assert!(
            overhead > overhead_before + 5000 * 48,
            "{overhead_before} -> {overhead}"
        );
        assert!(figure(&mut conn, "dataset.bytes") > 0);
        assert_eq!(
            figure(&mut conn, "keys.bytes-per-key"),
            (total - startup) / 5001,
            "{shards} shards"
        );
        // A loaded script shows in lua.caches.
        let lua = figure(&mut conn, "lua.caches");
        conn.cmd(&["script", "load", &format!("return '{}'", "x".repeat(1000))]);
        assert!(figure(&mut conn, "lua.caches") >= lua + 1000);
    }
}
