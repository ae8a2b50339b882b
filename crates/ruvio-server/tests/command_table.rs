//! The command table against a real redis-server: for every command both servers
//! know, COMMAND INFO's arity, flags, legacy key range and ACL categories must be
//! equal, and COMMAND GETKEYS must name the same keys (or fail the same way) for
//! representative calls of every keyed command, including the shapes whose keys
//! move (numkeys, all-but-last). COMMAND INFO and COMMAND DOCS of every command and
//! subcommand, and COMMAND GETKEYSANDFLAGS of those calls, are compared as raw
//! bytes under RESP2 and RESP3 (`info_and_docs_match_redis_byte_for_byte`).

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
    &["MIGRATE", "h", "1", "k", "0", "5", "COPY"],
    &[
        "MIGRATE", "h", "1", "", "0", "5", "REPLACE", "KEYS", "a", "b",
    ],
    &["MIGRATE", "h", "1", "", "0", "5", "AUTH2", "u", "KEYS", "a"],
    &["MIGRATE", "h", "1", "k", "0", "5", "KEYS", "a"],
    &["MIGRATE", "h", "1", "", "0", "5", "KEYS"],
    &["MIGRATE", "h", "1", "k", "0", "5", "KEYS"],
    &["MIGRATE", "h", "1", "", "0", "5", "KEYS", "a", "KEYS"],
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
        getkeys_and_flags_agree(&mut theirs, &mut ours, call);
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

/// COMMAND GETKEYSANDFLAGS of one call, raw bytes, RESP2 then RESP3 (the
/// connections are left in RESP2). Calls Redis 7.0 cannot run are skipped.
fn getkeys_and_flags_agree(theirs: &mut RawConn, ours: &mut RawConn, call: &[&str]) {
    let mut request = vec!["COMMAND", "GETKEYSANDFLAGS"];
    request.extend_from_slice(call);
    for proto in ["3", "2"] {
        theirs.cmd(&["HELLO", proto]);
        ours.cmd(&["HELLO", proto]);
        let expected = theirs.cmd(&request);
        if show(&expected).contains("Invalid command specified") {
            continue;
        }
        assert_eq!(
            show(&ours.cmd(&request)),
            show(&expected),
            "RESP{proto} COMMAND GETKEYSANDFLAGS {call:?}"
        );
    }
}

/// Where Ruvio's COMMAND INFO / DOCS deliberately differ from Redis 7.0's, and
/// why; these are checked for shape only, as the commands Redis 7.0 lacks.
const DELIBERATE_DIFFERENCES: &[(&str, &str)] = &[
    (
        "zrank",
        "Redis 7.2's ZRANK: arity -3 with the optional WITHSCORE, its history and argument",
    ),
    (
        "zrevrank",
        "Redis 7.2's ZREVRANK: arity -3 with the optional WITHSCORE, its history and argument",
    ),
];

/// Commands whose entry is Redis 7.0's with newer arguments layered on (see
/// `command/docs/mod.rs`): COMMAND INFO is compared byte for byte, COMMAND DOCS
/// once everything newer than 7.0 is taken out of both replies
/// ([`without_newer`]), so the rest must still be 7.0's to the byte.
const NEWER_ARGUMENTS: &[(&str, &str)] = &[
    ("set", "Redis 8.4's IFEQ / IFNE / IFDEQ / IFDNE"),
    ("xadd", "Redis 8.2's KEEPREF / DELREF / ACKED"),
    ("xtrim", "Redis 8.2's KEEPREF / DELREF / ACKED"),
];

/// True for a version string above 7.0 (`7.2.0`, `8.4.0`).
fn version_after_7_0(value: &Value) -> bool {
    let Value::Bulk(bytes) = value else {
        return false;
    };
    let text = String::from_utf8_lossy(bytes);
    let mut parts = text.split('.').map(str::parse::<u32>);
    match (parts.next(), parts.next()) {
        (Some(Ok(major)), Some(Ok(minor))) => (major, minor) > (7, 0),
        _ => false,
    }
}

/// A map's field (RESP3 map, or RESP2's flat array of pairs).
fn field<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    let key = Value::Bulk(key.as_bytes().to_vec());
    match value {
        Value::Map(pairs) => pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| v),
        Value::Array(items) if items.len() % 2 == 0 => items
            .chunks(2)
            .find(|pair| pair[0] == key)
            .map(|pair| &pair[1]),
        _ => None,
    }
}

/// An argument added after 7.0 (it has a name and a later `since`), or a
/// history line of a later version.
fn newer_than_7_0(item: &Value) -> bool {
    let argument =
        field(item, "name").is_some() && field(item, "since").is_some_and(version_after_7_0);
    let history = matches!(item, Value::Array(entry)
        if entry.len() == 2 && version_after_7_0(&entry[0]) && matches!(entry[1], Value::Bulk(_)));
    argument || history
}

/// A COMMAND DOCS reply with every argument and history line newer than Redis
/// 7.0 left out.
fn without_newer(value: Value) -> Value {
    let keep = |items: Vec<Value>| -> Vec<Value> {
        items
            .into_iter()
            .filter(|item| !newer_than_7_0(item))
            .map(without_newer)
            .collect()
    };
    match value {
        Value::Array(items) => Value::Array(keep(items)),
        Value::Set(items) => Value::Set(keep(items)),
        Value::Map(pairs) => Value::Map(
            pairs
                .into_iter()
                .map(|(k, v)| (k, without_newer(v)))
                .collect(),
        ),
        other => other,
    }
}

/// A reply with a container's subcommands left out: Redis keeps subcommands in a
/// dict seeded at random on every start, so their order in COMMAND INFO (field
/// 10) and COMMAND DOCS (`subcommands`) is no contract, and Ruvio lacks some of
/// Redis' (CLIENT CACHING, CLUSTER ADDSLOTS ...). Each subcommand both servers
/// have is compared on its own, by its full name.
fn without_subcommands(value: Value) -> Value {
    let subcommands = Value::Bulk(b"subcommands".to_vec());
    match value {
        // A COMMAND INFO row: name, arity, flags, first, last, step, ACL
        // categories, tips, key specs, subcommands.
        Value::Array(mut items) if items.len() == 10 && matches!(items[1], Value::Int(_)) => {
            items[9] = Value::Nil;
            Value::Array(items)
        }
        // A RESP2 COMMAND DOCS map: `subcommands` followed by its pairs.
        Value::Array(items) if items.contains(&subcommands) => {
            let at = items.iter().position(|v| *v == subcommands).unwrap_or(0);
            Value::Array(
                items
                    .into_iter()
                    .take(at)
                    .map(without_subcommands)
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(without_subcommands).collect()),
        Value::Map(pairs) => Value::Map(
            pairs
                .into_iter()
                .filter(|(k, _)| *k != subcommands)
                .map(|(k, v)| (k, without_subcommands(v)))
                .collect(),
        ),
        other => other,
    }
}

/// COMMAND INFO and COMMAND DOCS of every command and subcommand Ruvio lists, raw
/// bytes against redis-server 7.0 under RESP2 and RESP3 (a container's
/// subcommands each on its own, see [`without_subcommands`]); what Redis 7.0
/// lacks, and [`DELIBERATE_DIFFERENCES`], only for shape.
#[test]
fn info_and_docs_match_redis_byte_for_byte() {
    let Some(_) = require_redis_server("info_and_docs_match_redis_byte_for_byte") else {
        return;
    };
    let redis = Server::redis();
    let ruvio = Server::ruvio(PortMode::Forward, 1);
    let (mut theirs, mut ours) = (redis.raw(), ruvio.raw());
    let names = listed_names(&mut ours, &[]);
    let mut compared = 0;
    let mut shape_only = Vec::new();
    let mut differences = Vec::new();
    for proto in ["2", "3"] {
        theirs.cmd(&["HELLO", proto]);
        ours.cmd(&["HELLO", proto]);
        for name in &names {
            let info = ["COMMAND", "INFO", name.as_str()];
            let docs = ["COMMAND", "DOCS", name.as_str()];
            let (our_info, our_docs) = (ours.cmd(&info), ours.cmd(&docs));
            assert_shape(name, &decode(&our_info), &decode(&our_docs));
            let their_info = theirs.cmd(&info);
            let redis_lacks = matches!(decode(&their_info), Value::Array(v) if v == [Value::Nil]);
            if redis_lacks || DELIBERATE_DIFFERENCES.iter().any(|(n, _)| n == name) {
                shape_only.push(name.clone());
                continue;
            }
            compared += 1;
            let layered = NEWER_ARGUMENTS.iter().any(|(n, _)| n == name);
            for (request, ours, theirs) in [
                (&info, our_info, their_info),
                (&docs, our_docs, theirs.cmd(&docs)),
            ] {
                let same = if layered && request[1] == "DOCS" {
                    assert_ne!(ours, theirs, "{name}: its newer arguments are missing");
                    without_newer(decode(&ours)) == without_newer(decode(&theirs))
                } else {
                    ours == theirs
                        || without_subcommands(decode(&ours))
                            == without_subcommands(decode(&theirs))
                };
                if !same {
                    differences.push(format!(
                        "RESP{proto} {request:?}\n  ruvio {}\n  redis {}",
                        show(&ours),
                        show(&theirs)
                    ));
                }
            }
        }
    }
    // Names that are no command, or name one by an odd spelling.
    for proto in ["2", "3"] {
        theirs.cmd(&["HELLO", proto]);
        ours.cmd(&["HELLO", proto]);
        for odd in [
            "CLIENT|LIST",
            "a|b|c",
            "client|list|x",
            "debug|sleep",
            "get|x",
            "client|",
            "|",
            "nosuch",
        ] {
            for sub in ["INFO", "DOCS"] {
                let request = ["COMMAND", sub, "get", odd];
                assert_eq!(
                    show(&ours.cmd(&request)),
                    show(&theirs.cmd(&request)),
                    "RESP{proto} {request:?}"
                );
            }
        }
    }
    assert!(compared > 2 * 280, "only {compared} compared");
    assert!(
        differences.is_empty(),
        "{} differences (shape only: {shape_only:?}):\n{}",
        differences.len(),
        differences.join("\n")
    );
}

/// A COMMAND INFO reply of one command is its ten fields (tips, key specs and
/// subcommands aggregates), and its COMMAND DOCS a map naming it with the three
/// fields every command has (complexity too, but MONITOR has none in Redis).
fn assert_shape(name: &str, info: &Value, docs: &Value) {
    let Value::Array(rows) = info else {
        panic!("COMMAND INFO {name}: {info:?}")
    };
    let [Value::Array(fields)] = rows.as_slice() else {
        panic!("COMMAND INFO {name}: {info:?}")
    };
    assert_eq!(fields.len(), 10, "COMMAND INFO {name}");
    assert_eq!(fields[0].text(), *name);
    for field in &fields[7..] {
        assert!(
            matches!(field, Value::Array(_) | Value::Set(_)),
            "COMMAND INFO {name}: {field:?}"
        );
    }
    let text = format!("{docs:?}");
    for field in ["summary", "since", "group"] {
        assert!(
            text.contains(&format!("{:?}", field.as_bytes())),
            "COMMAND DOCS {name}: no {field}"
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

/// COMMAND DOCS of SET, XADD and XTRIM name the Redis 8.x arguments Ruvio
/// accepts, each with the version that added it, and a history line for it.
#[test]
fn docs_list_the_newer_arguments_ruvio_accepts() {
    let ruvio = Server::ruvio(PortMode::Forward, 1);
    let mut c = ruvio.raw();
    for (name, since, tokens) in [
        ("set", "8.4.0", &["IFEQ", "IFNE", "IFDEQ", "IFDNE"][..]),
        ("xadd", "8.2.0", &["KEEPREF", "DELREF", "ACKED"]),
        ("xtrim", "8.2.0", &["KEEPREF", "DELREF", "ACKED"]),
    ] {
        for proto in ["2", "3"] {
            c.cmd(&["HELLO", proto]);
            let docs = c.cmd(&["COMMAND", "DOCS", name]);
            for token in tokens.iter().chain([&since]) {
                assert!(
                    contains(&docs, bulk(token).as_bytes()),
                    "{name} RESP{proto}: no {token} in {}",
                    String::from_utf8_lossy(&docs)
                );
            }
            let decoded = decode(&c.cmd(&["COMMAND", "DOCS", name]));
            assert_ne!(
                without_newer(decoded.clone()),
                decoded,
                "{name} RESP{proto}: nothing newer than 7.0"
            );
        }
    }
}
