//! The command table against a real redis-server: for every command both servers
//! know, COMMAND INFO's arity, flags, legacy key range and ACL categories must be
//! equal, and COMMAND GETKEYS must name the same keys (or fail the same way) for
//! representative calls of every keyed command, including the shapes whose keys
//! move (numkeys, all-but-last).

mod common;

use common::*;

/// Representative calls; every keyed command Ruvio has should appear here.
const CALLS: &[&[&str]] = &[
    &["GET", "k"],
    &["SET", "k", "v", "EX", "10"],
    &["MSET", "a", "1", "b", "2"],
    &["MGET", "a", "b", "c"],
    &["DEL", "a", "b"],
    &["RENAME", "a", "b"],
    &["COPY", "a", "b", "REPLACE"],
    &["LCS", "a", "b"],
    &["OBJECT", "ENCODING", "k"],
    &["MEMORY", "USAGE", "k", "SAMPLES", "5"],
    &["OBJECT", "HELP"],
    &["OBJECT", "NOPE", "k"],
    &["OBJECT", "ENCODING"],
    &["LPUSH", "l", "a", "b"],
    &["RPUSHX", "l", "a"],
    &["LPOP", "l", "2"],
    &["LRANGE", "l", "0", "-1"],
    &["LINSERT", "l", "BEFORE", "p", "v"],
    &["LPOS", "l", "v", "RANK", "2"],
    &["LMOVE", "a", "b", "LEFT", "RIGHT"],
    &["RPOPLPUSH", "a", "b"],
    &["LMPOP", "2", "a", "b", "LEFT"],
    &["LMPOP", "1", "a", "b", "LEFT"],
    &["LMPOP", "0", "a", "LEFT"],
    &["LMPOP", "x", "a", "LEFT"],
    &["LMPOP", "5", "a", "LEFT"],
    &["BLPOP", "a", "b", "c", "0"],
    &["BRPOP", "a", "0"],
    &["BLMOVE", "a", "b", "LEFT", "RIGHT", "0"],
    &["BRPOPLPUSH", "a", "b", "0"],
    &["BLMPOP", "0", "2", "a", "b", "LEFT", "COUNT", "2"],
    &["BLMPOP", "0", "3", "a", "b", "LEFT"],
    &["HSET", "h", "f", "v", "g", "w"],
    &["HGETALL", "h"],
    &["HMGET", "h", "f", "g"],
    &["HSCAN", "h", "0", "COUNT", "5"],
    &["HRANDFIELD", "h", "2", "WITHVALUES"],
    &["HINCRBYFLOAT", "h", "f", "1.5"],
    &["ZADD", "z", "1", "a"],
    &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
    &["ZRANGESTORE", "d", "z", "0", "-1"],
    &["ZUNIONSTORE", "d", "2", "a", "b", "WEIGHTS", "1", "2"],
    &["ZINTERSTORE", "d", "1", "a"],
    &["ZDIFFSTORE", "d", "2", "a", "b"],
    &["ZUNION", "2", "a", "b"],
    &["ZINTERCARD", "2", "a", "b", "LIMIT", "1"],
    &["ZMPOP", "2", "a", "b", "MIN"],
    &["BZPOPMIN", "a", "b", "0"],
    &["BZMPOP", "0", "2", "a", "b", "MAX", "COUNT", "2"],
    &["ZSCAN", "z", "0"],
    &["ZRANDMEMBER", "z", "2", "WITHSCORES"],
    &["SINTERCARD", "2", "a", "b", "LIMIT", "1"],
    &["SINTERCARD", "1", "a", "b"],
    &["SMOVE", "a", "b", "m"],
    &["SUNIONSTORE", "d", "a", "b", "c"],
    &["SETBIT", "k", "7", "1"],
    &["BITCOUNT", "k", "0", "-1", "BIT"],
    &["BITPOS", "k", "1"],
    &["BITOP", "AND", "d", "a", "b"],
    &["BITOP", "NOT", "d", "a"],
    &["BITFIELD", "k", "INCRBY", "u8", "0", "1"],
    &["BITFIELD_RO", "k", "GET", "u8", "0"],
    &["GEOADD", "g", "1", "2", "m"],
    &[
        "GEOSEARCH",
        "g",
        "FROMLONLAT",
        "1",
        "2",
        "BYRADIUS",
        "1",
        "km",
    ],
    &[
        "GEOSEARCHSTORE",
        "d",
        "g",
        "FROMLONLAT",
        "1",
        "2",
        "BYRADIUS",
        "1",
        "km",
    ],
    &["GEORADIUS", "g", "1", "2", "3", "km"],
    &["GEORADIUS", "g", "1", "2", "3", "km", "STORE", "d"],
    &[
        "GEORADIUS",
        "g",
        "1",
        "2",
        "3",
        "km",
        "STORE",
        "d",
        "STOREDIST",
        "e",
    ],
    &["GEORADIUS", "g", "1", "2", "3", "km", "STORE"],
    &["GEORADIUS", "g", "1", "2", "3", "store", "x"],
    &[
        "GEORADIUSBYMEMBER",
        "g",
        "m",
        "3",
        "km",
        "COUNT",
        "2",
        "STOREDIST",
        "d",
    ],
    &["GEORADIUSBYMEMBER", "g", "m", "3", "STORE", "d"],
    &[
        "GEORADIUS",
        "g",
        "1",
        "2",
        "3",
        "km",
        "STOREDIST",
        "d",
        "STORE",
        "e",
    ],
    &["GEORADIUS_RO", "g", "1", "2", "3", "km", "STORE", "d"],
    &["GEODIST", "g", "a", "b", "km"],
    &["SORT", "k"],
    &[
        "SORT", "k", "BY", "w", "GET", "#", "STORE", "d", "LIMIT", "0", "1",
    ],
    &["SORT", "k", "STORE", "d", "STORE", "e"],
    &["SORT", "k", "LIMIT", "STORE", "d"],
    &["SORT", "k", "STORE", "limit", "a", "b"],
    &["SORT", "k", "STORE"],
    &["SORT_RO", "k", "STORE", "d"],
    &["PFADD", "h", "a", "b"],
    &["PFCOUNT", "a", "b", "c"],
    &["PFMERGE", "d", "a", "b"],
    &["PFDEBUG", "ENCODING", "h"],
    &["PING"],
    &["SPUBLISH", "ch", "m"],
    &["SSUBSCRIBE", "a", "b"],
    &["SUNSUBSCRIBE", "a"],
    &[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "STREAMS",
        "a",
        "b",
        ">",
        ">",
    ],
    &[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "COUNT",
        "1",
        "BLOCK",
        "0",
        "NOACK",
        "STREAMS",
        "a",
        ">",
    ],
    &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"],
    &["XGROUP", "DESTROY", "s", "g"],
    &["XGROUP", "HELP"],
    &["XINFO", "STREAM", "s", "FULL"],
    &["XINFO", "CONSUMERS", "s", "g"],
    &["XACK", "s", "g", "1-1"],
    &["XPENDING", "s", "g"],
    &["XCLAIM", "s", "g", "c", "0", "1-1"],
    &["XAUTOCLAIM", "s", "g", "c", "0", "0"],
];

fn info_fields(reply: &Value) -> Option<Vec<String>> {
    let Value::Array(items) = reply else {
        return None;
    };
    let Some(Value::Array(fields)) = items.first() else {
        return None;
    };
    let sorted = |v: &Value| {
        let Value::Array(xs) = v else {
            return format!("{v:?}");
        };
        let mut names: Vec<String> = xs.iter().map(|x| format!("{x:?}")).collect();
        names.sort();
        names.join(",")
    };
    Some(vec![
        format!("{:?}", fields[1]),
        sorted(&fields[2]),
        format!("{:?} {:?} {:?}", fields[3], fields[4], fields[5]),
        sorted(&fields[6]),
    ])
}

#[test]
fn command_info_and_getkeys_match_redis() {
    let Some(_) = require_redis_server("command_info_and_getkeys_match_redis") else {
        return;
    };
    let redis = Server::redis();
    let ruvio = Server::ruvio(PortMode::Forward, 1);
    let (mut theirs, mut ours) = (redis.raw(), ruvio.raw());
    let Value::Array(all) = decode(&ours.cmd(&["COMMAND"])) else {
        panic!("COMMAND is not an array");
    };
    let mut compared = 0;
    let mut differences = Vec::new();
    for row in &all {
        let Value::Array(fields) = row else { continue };
        let name = fields[0].text();
        let reference = decode(&theirs.cmd(&["COMMAND", "INFO", &name]));
        let Some(expected) = info_fields(&reference) else {
            continue; // Redis 7.0 lacks it (newer commands are checked against the docs).
        };
        // ZRANK/ZREVRANK: Redis 7.2's row (arity -3, optional WITHSCORE).
        if name == "zrank" || name == "zrevrank" {
            continue;
        }
        let actual = info_fields(&decode(&ours.cmd(&["COMMAND", "INFO", &name]))).unwrap();
        compared += 1;
        if actual != expected {
            differences.push(format!("{name}: ruvio {actual:?}\n     redis {expected:?}"));
        }
    }
    assert!(compared > 80, "only {compared} commands compared");
    assert!(differences.is_empty(), "\n{}", differences.join("\n"));

    for call in CALLS {
        let mut request = vec!["COMMAND", "GETKEYS"];
        request.extend_from_slice(call);
        let expected = theirs.cmd(&request);
        if show(&expected).contains("Invalid command specified") {
            continue; // Redis 7.0 lacks the command.
        }
        assert_eq!(
            show(&ours.cmd(&request)),
            show(&expected),
            "COMMAND GETKEYS {call:?}"
        );
    }
}

/// The names a COMMAND LIST reply holds.
fn listed_names(conn: &mut RawConn, args: &[&str]) -> std::collections::BTreeSet<String> {
    let mut call = vec!["command", "list"];
    call.extend_from_slice(args);
    match decode(&conn.cmd(&call)) {
        Value::Array(names) => names.iter().map(Value::text).collect(),
        other => panic!("COMMAND LIST {args:?}: {other:?}"),
    }
}

/// COMMAND LIST lists subcommands by their full names, and FILTERBY keeps the same
/// ones as Redis' among the commands and subcommands both servers have.
#[test]
fn command_list_and_its_filters_match_redis() {
    let Some(_) = require_redis_server("command_list_and_its_filters_match_redis") else {
        return;
    };
    let redis = Server::redis();
    let ruvio = Server::ruvio(PortMode::Forward, 1);
    let (mut r, mut o) = (redis.raw(), ruvio.raw());
    let both: std::collections::BTreeSet<String> = listed_names(&mut r, &[])
        .intersection(&listed_names(&mut o, &[]))
        .cloned()
        .collect();
    assert!(
        both.contains("client|list") && both.contains("config|get"),
        "{both:?}"
    );
    for filter in [
        &["filterby", "pattern", "client*"][..],
        &["filterby", "pattern", "CONFIG|*"],
        &["filterby", "pattern", "*get*"],
        &["filterby", "aclcat", "admin"],
        &["filterby", "aclcat", "pubsub"],
        &["filterby", "aclcat", "STRING"],
        &["filterby", "aclcat", "nosuchcategory"],
        &["filterby", "module", "nosuchmodule"],
    ] {
        let (in_redis, in_ruvio) = (listed_names(&mut r, filter), listed_names(&mut o, filter));
        for name in &both {
            assert_eq!(
                in_ruvio.contains(name),
                in_redis.contains(name),
                "COMMAND LIST {filter:?}: {name}"
            );
        }
    }
    assert_eq!(
        o.cmd(&["command", "list", "filterby", "nosuch", "x"]),
        r.cmd(&["command", "list", "filterby", "nosuch", "x"])
    );
}
