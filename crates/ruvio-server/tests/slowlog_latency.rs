//! SLOWLOG, LATENCY, INFO latencystats and COMMANDLOG, against a real
//! redis-server 7.0 where the answer is deterministic: the slow log's entries with
//! `slowlog-log-slower-than 0` (ids, argv as Redis trims and redacts it, client
//! name; times replaced, the client address checked against the connection), its
//! LEN, RESET and GET counts, the help texts and errors byte for byte in both
//! protocols, LATENCY HISTOGRAM's and INFO latencystats' shapes; on 1 shard and
//! on 2 in forward mode (commands run by both shards appear in one log, with
//! Redis's ids). Then Ruvio alone: a slow command in SLOWLOG and the latency
//! monitor, a forwarded one counted once by its owner, and Valkey's COMMANDLOG.
//! When a command that does not answer at once (blocked, gathered, unblocked,
//! split) is recorded: `slowlog_recording.rs`.

mod common;

use common::slowlog::*;
use common::*;
use std::collections::BTreeSet;

/// `reply` decoded, each SLOWLOG entry with its time and duration replaced, its
/// id made relative to the oldest id shown, and its address checked to be
/// `peer`.
fn entries(reply: &[u8], peer: &str) -> Value {
    let Value::Array(list) = decode(reply) else {
        panic!("not an array: {}", show(reply));
    };
    let min_id = list
        .iter()
        .filter_map(|e| match e {
            Value::Array(f) => Some(f[0].text().parse::<i64>().unwrap()),
            _ => None,
        })
        .min()
        .unwrap_or(0);
    Value::Array(
        list.into_iter()
            .map(|entry| {
                let Value::Array(mut fields) = entry else {
                    panic!("not an entry: {entry:?}");
                };
                assert_eq!(fields.len(), 6, "{fields:?}");
                assert_eq!(fields[4].text(), peer, "client address of {fields:?}");
                let id: i64 = fields[0].text().parse().unwrap();
                fields[0] = Value::Int(id - min_id);
                let unix_s: i64 = fields[1].text().parse().unwrap();
                assert!(unix_s > 1_600_000_000, "{unix_s}");
                assert!(fields[2].text().parse::<i64>().unwrap() >= 0);
                fields[1] = Value::Simple("T".into());
                fields[2] = Value::Simple("D".into());
                fields[4] = Value::Simple("PEER".into());
                Value::Array(fields)
            })
            .collect(),
    )
}

/// The commands both servers log, then what SLOWLOG answers about them.
fn slowlog_session(server: &Server, keys: &[String]) -> (Vec<Value>, Vec<Vec<u8>>) {
    let mut c = server.raw();
    let peer = local_addr(&mut c);
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd(&["SLOWLOG", "RESET"]), b"+OK\r\n");
    for key in keys {
        c.cmd(&["SET", key, "v"]);
        c.cmd(&["GET", key]);
    }
    // Split over both shards (two shards): each recorded once, when every
    // part answered.
    c.cmd(&["MSET", &keys[0], "1", &keys[1], "2"]);
    c.cmd(&["MGET", &keys[0], &keys[1]]);
    c.cmd(&["DEL", &keys[0], &keys[1]]);
    let mut push: Vec<String> = vec!["RPUSH".into(), keys[0].clone() + "-list"];
    push.extend((0..40).map(|i| format!("e{i}")));
    c.cmd(&push);
    let big = "x".repeat(200);
    c.cmd(&["SET", &keys[0], &big]);
    c.cmd(&["CLIENT", "SETNAME", "observer"]);
    c.cmd(&["GET", keys.last().unwrap()]);
    c.cmd(&["AUTH", "secret"]);
    c.cmd(&["AUTH", "someone", "secret"]);
    c.cmd(&["HELLO", "2", "AUTH", "default", "secret"]);
    c.cmd(&["CONFIG", "SET", "requirepass", ""]);
    // EXEC's commands are logged one by one, not EXEC: on one shard, on the
    // keys' owner, on keys borrowed from two.
    for (a, b) in [
        (&keys[0], &keys[0]),
        (&keys[1], &keys[1]),
        (&keys[0], &keys[1]),
    ] {
        c.cmd(&["MULTI"]);
        c.cmd(&["SET", a, "1"]);
        c.cmd(&["INCR", b]);
        assert!(c.cmd(&["EXEC"]).starts_with(b"*2\r\n"));
    }
    let mut shown = vec![entries(&c.cmd(&["SLOWLOG", "GET", "100"]), &peer)];
    shown.push(entries(&c.cmd(&["SLOWLOG", "GET", "2"]), &peer));
    shown.push(entries(&c.cmd(&["SLOWLOG", "GET"]), &peer));
    shown.push(entries(&c.cmd(&["SLOWLOG", "GET", "-1"]), &peer));
    let mut raw = vec![c.cmd(&["SLOWLOG", "LEN"]), c.cmd(&["SLOWLOG", "GET", "0"])];
    c.cmd(&["HELLO", "3"]);
    shown.push(entries(&c.cmd(&["SLOWLOG", "GET", "3"]), &peer));
    raw.push(c.cmd(&["SLOWLOG", "RESET"]));
    raw.push(c.cmd(&["SLOWLOG", "LEN"]));
    // A shorter log keeps the newest entries.
    c.cmd(&["CONFIG", "SET", "slowlog-max-len", "3"]);
    c.cmd(&["PING"]);
    raw.push(c.cmd(&["SLOWLOG", "LEN"]));
    shown.push(entries(&c.cmd(&["SLOWLOG", "GET", "-1"]), &peer));
    c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]);
    c.cmd(&["SLOWLOG", "RESET"]);
    c.cmd(&["GET", &keys[0]]);
    raw.push(c.cmd(&["SLOWLOG", "LEN"]));
    (shown, raw)
}

#[test]
fn slowlog_entries_match_redis_on_one_and_two_shards() {
    if require_redis_server("slowlog_entries_match_redis_on_one_and_two_shards").is_none() {
        return;
    }
    for shards in [1, 2] {
        let redis = Server::redis();
        let ruvio = Server::ruvio(PortMode::Forward, shards);
        // Two shards: the keys of both, so the log is written by both.
        let keys = keys_per_shard("slow", 2);
        let expected = slowlog_session(&redis, &keys);
        let got = slowlog_session(&ruvio, &keys);
        assert_eq!(
            (got.0.len(), got.1.len()),
            (expected.0.len(), expected.1.len())
        );
        assert!(
            matches!(&expected.0[0], Value::Array(e) if e.len() > 10),
            "{:?}",
            expected.0[0]
        );
        for (i, (e, g)) in expected.0.iter().zip(&got.0).enumerate() {
            assert_eq!(g, e, "{shards} shard(s), SLOWLOG GET #{i}");
        }
        for (i, (e, g)) in expected.1.iter().zip(&got.1).enumerate() {
            assert_eq!(show(g), show(e), "{shards} shard(s), reply #{i}");
        }
    }
}

/// Replies that do not depend on timing, byte for byte in both protocols.
const FIXED: &[&[&str]] = &[
    &["SLOWLOG", "HELP"],
    &["SLOWLOG", "help"],
    &["SLOWLOG"],
    &["SLOWLOG", "FOO"],
    &["SLOWLOG", "GET", "-2"],
    &["SLOWLOG", "GET", "x"],
    &["SLOWLOG", "GET", "1.5"],
    &["SLOWLOG", "GET", "99999999999999999999"],
    &["SLOWLOG", "GET", "1", "2"],
    &["SLOWLOG", "LEN", "x"],
    &["SLOWLOG", "RESET", "x"],
    &["SLOWLOG", "HELP", "x"],
    &["LATENCY", "HELP"],
    &["LATENCY"],
    &["LATENCY", "FOO"],
    &["LATENCY", "LATEST"],
    &["LATENCY", "LATEST", "x"],
    &["LATENCY", "HISTORY"],
    &["LATENCY", "HISTORY", "command"],
    &["LATENCY", "HISTORY", "command", "x"],
    &["LATENCY", "GRAPH", "command"],
    &["LATENCY", "GRAPH", "no\r\nsuch"],
    &["LATENCY", "DOCTOR"],
    &["LATENCY", "RESET"],
    &["LATENCY", "RESET", "command", "nothing"],
    &["LATENCY", "HISTOGRAM", "nosuchcommand"],
    &["LATENCY", "HISTOGRAM", "config|nosuch"],
    &["CONFIG", "SET", "slowlog-log-slower-than", "-2"],
    &["CONFIG", "SET", "slowlog-max-len", "-1"],
    &["CONFIG", "SET", "latency-monitor-threshold", "-1"],
    &["CONFIG", "SET", "latency-tracking", "maybe"],
    &[
        "CONFIG",
        "SET",
        "latency-tracking-info-percentiles",
        "50 101",
    ],
];

#[test]
fn help_texts_and_errors_match_redis() {
    if require_redis_server("help_texts_and_errors_match_redis").is_none() {
        return;
    }
    let redis = Server::redis();
    let ruvio = Server::ruvio(PortMode::Forward, 2);
    for resp3 in [false, true] {
        let (mut r, mut v) = (redis.raw(), ruvio.raw());
        if resp3 {
            r.cmd(&["HELLO", "3"]);
            v.cmd(&["HELLO", "3"]);
        }
        for command in FIXED {
            let (expected, got) = (r.cmd(command), v.cmd(command));
            assert_eq!(show(&got), show(&expected), "{command:?}, RESP3 {resp3}");
        }
    }
}

/// The types of LATENCY HISTOGRAM's reply, without its numbers: a map (RESP3) or
/// a flat array (RESP2) at each of its three levels.
fn histogram_shape(reply: &[u8]) -> Vec<String> {
    fn kind(v: &Value) -> String {
        match v {
            Value::Map(p) => format!("map {}", p.len()),
            Value::Array(a) => format!("array {}", a.len()),
            other => format!("{other:?}"),
        }
    }
    let top = decode(reply);
    let mut shape = vec![kind(&top)];
    let values: Vec<Value> = match &top {
        Value::Map(p) => p.iter().map(|(_, v)| v.clone()).collect(),
        Value::Array(a) => a.iter().skip(1).step_by(2).cloned().collect(),
        _ => Vec::new(),
    };
    for v in &values {
        let buckets = v.get("histogram_usec").map(|b| match b {
            Value::Map(_) => "map",
            Value::Array(_) => "array",
            _ => "other",
        });
        shape.push(format!("{} {buckets:?}", kind(v)));
    }
    shape
}

/// INFO latencystats' command names, each line checked for Redis's format with
/// the percentile names `names`.
fn latencystats(reply: &[u8], names: &[&str]) -> BTreeSet<String> {
    let text = decode(reply).text();
    let mut lines = text.split("\r\n").filter(|l| !l.is_empty());
    assert_eq!(lines.next(), Some("# Latencystats"), "{text}");
    lines
        .map(|line| {
            let (name, values) = line
                .strip_prefix("latency_percentiles_usec_")
                .and_then(|l| l.split_once(':'))
                .unwrap_or_else(|| panic!("{line}"));
            let shown: Vec<&str> = values.split(',').collect();
            assert_eq!(shown.len(), names.len(), "{line}");
            for (value, name) in shown.iter().zip(names) {
                let (p, number) = value.split_once('=').unwrap();
                assert_eq!(p, format!("p{name}"), "{line}");
                let (whole, frac) = number.split_once('.').unwrap();
                assert!(whole.parse::<u64>().is_ok() && frac.len() == 3, "{line}");
            }
            name.to_string()
        })
        .collect()
}

/// What [`histogram_session`] saw: LATENCY HISTOGRAM's calls, INFO latencystats'
/// commands, LATENCY HISTOGRAM's types in RESP2 and RESP3.
type Seen = (Vec<Calls>, Vec<BTreeSet<String>>, Vec<Vec<String>>);

fn histogram_session(server: &Server, keys: &[String]) -> Seen {
    let mut c = server.raw();
    c.cmd(&["CONFIG", "RESETSTAT"]);
    for key in keys {
        for _ in 0..5 {
            c.cmd(&["SET", key, "v"]);
        }
        c.cmd(&["GET", key]);
    }
    c.cmd(&["CONFIG", "GET", "maxmemory"]);
    let mut calls = vec![histogram_calls(&c.cmd(&[
        "LATENCY",
        "HISTOGRAM",
        "set",
        "GET",
        "config",
    ]))];
    let mut stats = vec![latencystats(
        &c.cmd(&["INFO", "latencystats"]),
        &["50", "99", "99.9"],
    )];
    c.cmd(&[
        "CONFIG",
        "SET",
        "latency-tracking-info-percentiles",
        "0 50 99.99999 100",
    ]);
    stats.push(latencystats(
        &c.cmd(&["INFO", "LATENCYSTATS"]),
        &["0", "50", "99.99999", "100"],
    ));
    let resp2 = c.cmd(&["LATENCY", "HISTOGRAM", "set", "get"]);
    c.cmd(&["HELLO", "3"]);
    let resp3 = c.cmd(&["LATENCY", "HISTOGRAM", "set", "get"]);
    let shapes = vec![histogram_shape(&resp2), histogram_shape(&resp3)];
    calls.push(histogram_calls(&c.cmd(&[
        "LATENCY",
        "HISTOGRAM",
        "config|get",
        "set",
    ])));
    c.cmd(&["CONFIG", "SET", "latency-tracking", "no"]);
    c.cmd(&["GET", &keys[0]]);
    stats.push(latencystats(&c.cmd(&["INFO", "latencystats"]), &[]));
    c.cmd(&["CONFIG", "SET", "latency-tracking", "yes"]);
    c.cmd(&[
        "CONFIG",
        "SET",
        "latency-tracking-info-percentiles",
        "50 99 99.9",
    ]);
    // CONFIG RESETSTAT forgets the histograms, on every shard.
    c.cmd(&["CONFIG", "RESETSTAT"]);
    calls.push(histogram_calls(&c.cmd(&[
        "LATENCY",
        "HISTOGRAM",
        "set",
        "get",
    ])));
    (calls, stats, shapes)
}

#[test]
fn latency_histogram_and_latencystats_have_redis_shapes() {
    if require_redis_server("latency_histogram_and_latencystats_have_redis_shapes").is_none() {
        return;
    }
    for shards in [1, 2] {
        let redis = Server::redis();
        let ruvio = Server::ruvio(PortMode::Forward, shards);
        let keys = keys_per_shard("hist", 2);
        let expected = histogram_session(&redis, &keys);
        let got = histogram_session(&ruvio, &keys);
        assert_eq!(
            got.0, expected.0,
            "{shards} shard(s): LATENCY HISTOGRAM calls"
        );
        assert_eq!(
            got.1, expected.1,
            "{shards} shard(s): INFO latencystats commands"
        );
        assert_eq!(
            got.2, expected.2,
            "{shards} shard(s): LATENCY HISTOGRAM's types"
        );
        assert_eq!((&*got.2[0][0], &*got.2[1][0]), ("array 4", "map 2"));
        // INFO everything has the section between errorstats and cluster.
        let text = decode(&ruvio.raw().cmd(&["INFO", "everything"])).text();
        let at = |s: &str| text.find(s).unwrap_or_else(|| panic!("{s} missing"));
        assert!(
            at("# Errorstats") < at("# Latencystats") && at("# Latencystats") < at("# Cluster")
        );
        assert!(!decode(&ruvio.raw().cmd(&["INFO"]))
            .text()
            .contains("Latencystats"));
    }
}

#[test]
fn a_slow_command_reaches_slowlog_and_the_latency_monitor() {
    let server = Server::ruvio(PortMode::Forward, 2);
    let mut c = conn_on_shard(&server, 0);
    let peer = local_addr(&mut c);
    c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "40000"]);
    c.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "30"]);
    assert_eq!(c.cmd(&["LATENCY", "LATEST"]), b"*0\r\n");
    c.cmd(&["DEBUG", "SLEEP", "0.05"]);
    c.cmd(&["GET", "fast"]);
    let log = decode(&c.cmd(&["SLOWLOG", "GET"]));
    let Value::Array(list) = &log else {
        panic!("{log:?}")
    };
    assert_eq!(list.len(), 1, "{log:?}");
    assert_eq!(argv(&list[0]), ["DEBUG", "SLEEP", "0.05"]);
    let slow = fields(&list[0]);
    assert!(slow[2].text().parse::<u64>().unwrap() >= 50_000, "{slow:?}");
    assert_eq!(slow[4].text(), peer);

    let latest = decode(&c.cmd(&["LATENCY", "LATEST"]));
    let Value::Array(events) = &latest else {
        panic!("{latest:?}")
    };
    assert_eq!(events.len(), 1, "{latest:?}");
    let event = fields(&events[0]);
    assert_eq!(event[0].text(), "command");
    let ms: u64 = event[2].text().parse().unwrap();
    assert!(
        ms >= 50 && event[3].text().parse::<u64>().unwrap() == ms,
        "{latest:?}"
    );
    let history = decode(&c.cmd(&["LATENCY", "HISTORY", "command"]));
    assert!(
        matches!(&history, Value::Array(s) if s.len() == 1),
        "{history:?}"
    );
    let graph = decode(&c.cmd(&["LATENCY", "GRAPH", "command"])).text();
    assert!(
        graph.starts_with(&format!(
            "command - high {ms} ms, low {ms} ms (all time high {ms} ms)\n"
        )),
        "{graph}"
    );
    let doctor = decode(&c.cmd(&["LATENCY", "DOCTOR"])).text();
    assert!(doctor.contains("1. command: 1 latency spikes"), "{doctor}");

    // A script run whole by the other shard: logged and counted once, there,
    // with this client's address.
    let key = key_on_shard("busy", 1, 2);
    let script = "local t = redis.call('TIME') local s = t[1] * 1000000 + t[2] \
                  repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - s > 60000 \
                  return redis.call('SET', KEYS[1], 'done')";
    c.cmd(&["CONFIG", "RESETSTAT"]);
    c.cmd(&["SLOWLOG", "RESET"]);
    assert_eq!(c.cmd(&["EVAL", script, "1", &key]), b"+OK\r\n");
    let log = decode(&c.cmd(&["SLOWLOG", "GET"]));
    let Value::Array(list) = &log else {
        panic!("{log:?}")
    };
    assert_eq!(list.len(), 1, "{log:?}");
    assert_eq!(
        argv(&list[0]),
        ["EVAL", script, "1", key.as_str()].map(|a| {
            if a.len() > 128 {
                format!("{}... ({} more bytes)", &a[..128], a.len() - 128)
            } else {
                a.to_string()
            }
        })
    );
    assert_eq!(fields(&list[0])[4].text(), peer);
    assert_eq!(
        histogram_calls(&c.cmd(&["LATENCY", "HISTOGRAM", "eval"])),
        [("eval".to_string(), 1)]
    );
    assert_eq!(c.cmd(&["LATENCY", "RESET"]), b":1\r\n");
    assert_eq!(c.cmd(&["LATENCY", "LATEST"]), b"*0\r\n");
}

#[test]
fn commandlog_logs_large_requests_and_replies() {
    let server = Server::ruvio(PortMode::Forward, 2);
    let mut c = server.raw();
    let peer = local_addr(&mut c);
    let get = |c: &mut RawConn, kind: &str| decode(&c.cmd(&["COMMANDLOG", "GET", "-1", kind]));
    c.cmd(&["CONFIG", "SET", "commandlog-request-larger-than", "100"]);
    c.cmd(&["CONFIG", "SET", "commandlog-reply-larger-than", "100"]);
    let value = "v".repeat(150);
    for key in keys_per_shard("big", 2) {
        c.cmd(&["SET", &key, &value]);
        c.cmd(&["GET", &key]);
    }
    let replies = get(&mut c, "LARGE-REPLY");
    let Value::Array(list) = &replies else {
        panic!("{replies:?}")
    };
    assert_eq!(list.len(), 2, "{replies:?}");
    for entry in list {
        assert_eq!(fields(entry)[2].text(), "158", "{entry:?}");
        assert_eq!(argv(entry)[0], "GET");
    }
    let ids: Vec<String> = list.iter().map(|e| fields(e)[0].text()).collect();
    assert_eq!(ids, ["1", "0"]);
    // That read answered more than 100 bytes: it is logged now, after it.
    let requests = get(&mut c, "large-request");
    let Value::Array(list) = &requests else {
        panic!("{requests:?}")
    };
    assert_eq!(list.len(), 2, "{requests:?}");
    for entry in list {
        let f = fields(entry);
        // *3\r\n $3\r\nSET\r\n $4\r\nbig0\r\n $150\r\nv...\r\n
        let key = &argv(entry)[1];
        assert_eq!(
            f[2].text(),
            (4 + 9 + (6 + key.len()) + 158).to_string(),
            "{entry:?}"
        );
        assert_eq!(argv(entry)[0], "SET");
        assert_eq!(f[4].text(), peer);
    }
    assert_eq!(c.cmd(&["COMMANDLOG", "LEN", "large-reply"]), b":4\r\n");
    assert_eq!(
        c.cmd(&["COMMANDLOG", "GET", "1", "large-reply"])[..4],
        *b"*1\r\n"
    );
    assert_eq!(c.cmd(&["COMMANDLOG", "RESET", "large-reply"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["COMMANDLOG", "LEN", "large-reply"]), b":0\r\n");
    // The slow log is SLOWLOG's, under Valkey's second names of its settings.
    c.cmd(&["CONFIG", "SET", "commandlog-execution-slower-than", "0"]);
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "slowlog-log-slower-than"]),
        b"*2\r\n$23\r\nslowlog-log-slower-than\r\n$1\r\n0\r\n"
    );
    c.cmd(&["PING"]);
    // Each read is logged itself, after it answered.
    let len = |reply: Vec<u8>| decode(&reply).text().parse::<u64>().unwrap();
    let commandlog_len = len(c.cmd(&["COMMANDLOG", "LEN", "slow"]));
    assert_eq!(len(c.cmd(&["SLOWLOG", "LEN"])), commandlog_len + 1);
    for (args, error) in [
        (
            &["COMMANDLOG", "GET", "-2", "slow"][..],
            "-ERR count should be greater than or equal to -1\r\n",
        ),
        (
            &["COMMANDLOG", "GET", "1", "slowest"],
            "-ERR type should be one of the following: slow, large-request, large-reply\r\n",
        ),
        (
            &["COMMANDLOG", "LEN", "x"],
            "-ERR type should be one of the following: slow, large-request, large-reply\r\n",
        ),
        (
            &["COMMANDLOG", "GET", "1"],
            "-ERR wrong number of arguments for 'commandlog|get' command\r\n",
        ),
    ] {
        assert_eq!(show(&c.cmd(args)), show(error.as_bytes()), "{args:?}");
    }
    let help = decode(&c.cmd(&["COMMANDLOG", "HELP"]));
    let Value::Array(lines) = &help else {
        panic!("{help:?}")
    };
    assert_eq!(
        lines[0].text(),
        "COMMANDLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    );
}

#[test]
fn per_shard_mode_nodes_keep_their_own_logs() {
    let server = Server::ruvio(PortMode::PerShard, 2);
    let mut nodes: Vec<RawConn> = (0..2)
        .map(|i| RawConn::connect(server.shard_port(i)))
        .collect();
    for node in nodes.iter_mut() {
        node.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
        node.cmd(&["SLOWLOG", "RESET"]);
    }
    for (i, node) in nodes.iter_mut().enumerate() {
        let key = key_on_shard("node", i, 2);
        assert_eq!(node.cmd(&["SET", &key, "v"]), b"+OK\r\n");
    }
    for (i, node) in nodes.iter_mut().enumerate() {
        let log = decode(&node.cmd(&["SLOWLOG", "GET", "-1"]));
        let Value::Array(list) = &log else {
            panic!("{log:?}")
        };
        let shown: Vec<Vec<String>> = list.iter().map(argv).collect();
        let key = key_on_shard("node", i, 2);
        assert_eq!(
            shown,
            [
                vec!["SET".to_string(), key, "v".into()],
                vec!["SLOWLOG".into(), "RESET".into()]
            ],
            "node {i}"
        );
        node.cmd(&["SLOWLOG", "RESET"]);
    }
    // RESET on one node leaves the other's log.
    nodes[1].cmd(&["PING"]);
    nodes[0].cmd(&["SLOWLOG", "RESET"]);
    assert_eq!(nodes[0].cmd(&["SLOWLOG", "LEN"]), b":1\r\n");
    assert_eq!(nodes[1].cmd(&["SLOWLOG", "LEN"]), b":2\r\n");
}

/// `text` with every number written `N` (times and counts vary between runs).
fn numbers_out(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            if !out.ends_with('N') {
                out.push('N');
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// LATENCY DOCTOR's reports along one event history: before any spike, after
/// slow commands under three slow log settings (the advice differs), and after
/// the threshold is set back to 0 with the events kept.
fn doctor_session(server: &Server) -> Vec<String> {
    let mut c = server.raw();
    let doctor = |c: &mut RawConn| decode(&c.cmd(&["LATENCY", "DOCTOR"])).text();
    let mut reports = vec![doctor(&mut c)];
    c.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "5"]);
    reports.push(doctor(&mut c));
    c.cmd(&["DEBUG", "SLEEP", "0.02"]);
    for slower_than in ["10000", "-1", "0", "5000"] {
        c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", slower_than]);
        reports.push(doctor(&mut c));
    }
    c.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "0"]);
    reports.push(doctor(&mut c));
    c.cmd(&["LATENCY", "RESET"]);
    reports.push(doctor(&mut c));
    reports.iter().map(|r| numbers_out(r)).collect()
}

#[test]
fn latency_doctor_writes_redis_report_and_advice() {
    if require_redis_server("latency_doctor_writes_redis_report_and_advice").is_none() {
        return;
    }
    let redis = Server::redis();
    let ruvio = Server::ruvio(PortMode::Forward, 2);
    let expected = doctor_session(&redis);
    assert!(
        expected[2].contains("I have a few advices for you:"),
        "{}",
        expected[2]
    );
    let got = doctor_session(&ruvio);
    for (i, (e, g)) in expected.iter().zip(&got).enumerate() {
        assert_eq!(g, e, "report #{i}");
    }
    assert_eq!(got.len(), expected.len());
}

/// The latency monitor's events of the log, `(event, latest ms)`, once `want`
/// are all there (asked on `c` while writing keys: each write is a log write).
fn log_events(c: &mut RawConn, want: &[&str]) -> Vec<(String, u64)> {
    for i in 0..100 {
        c.cmd(&["SET", &format!("k{i}"), "v"]);
        let Value::Array(rows) = decode(&c.cmd(&["LATENCY", "LATEST"])) else {
            panic!("LATENCY LATEST");
        };
        let events: Vec<(String, u64)> = rows
            .iter()
            .map(|row| {
                let f = fields(row);
                (f[0].text(), f[2].text().parse().unwrap())
            })
            .collect();
        if want.iter().all(|w| events.iter().any(|(e, _)| e == w)) {
            return events;
        }
    }
    panic!("never all of {want:?}");
}

#[test]
fn log_writes_and_syncs_reach_the_latency_monitor() {
    // A slow disk, from Ruvio's debug fault points: each write's completion
    // reaches the shard 200 ms late; then each `always` group's fdatasync starts
    // 200 ms late. Both are the disk's time as the shard sees it.
    let dir = unique_dir("log-latency");
    let dir = dir.to_str().unwrap();
    let always = ["--durability", "always", "--dir", dir];
    let late_write = Server::ruvio_with_env(
        PortMode::Forward,
        1,
        &always,
        &[("RUVIO_FAULT", "wal:late-write-0")],
    );
    let mut c = late_write.raw();
    c.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "100"]);
    let events = log_events(&mut c, &["aof-write", "aof-write-alone"]);
    for (event, ms) in &events {
        assert!(*ms >= 200, "{events:?}");
        assert!(event.starts_with("aof-write"), "{events:?}");
    }
    let doctor = decode(&c.cmd(&["LATENCY", "DOCTOR"])).text();
    assert!(
        doctor.contains("aof-write-alone: ")
            && doctor.contains("- It is strongly advised to use local disks"),
        "{doctor}"
    );
    drop(late_write);

    let dir = unique_dir("log-latency-sync");
    let always = ["--durability", "always", "--dir", dir.to_str().unwrap()];
    let slow_sync = Server::ruvio_with_env(
        PortMode::Forward,
        1,
        &always,
        &[("RUVIO_FAULT", "wal:slow-fsync-0")],
    );
    let mut c = slow_sync.raw();
    c.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "100"]);
    let events = log_events(&mut c, &["aof-fsync-always"]);
    let (_, ms) = events
        .iter()
        .find(|(e, _)| e == "aof-fsync-always")
        .unwrap();
    assert!(*ms >= 200, "{events:?}");
    let doctor = decode(&c.cmd(&["LATENCY", "DOCTOR"])).text();
    assert!(
        doctor.contains("- Your fsync policy is set to 'always'."),
        "{doctor}"
    );
}

/// Ruvio's own `mesh-round-trip` event: a script reaching a key of another
/// shard it did not declare waits for that shard to lend it; with the owner
/// busy (DEBUG SLEEP) the wait is long enough to be kept.
#[test]
fn a_script_waiting_for_another_shard_is_a_latency_event() {
    let server = Server::ruvio(PortMode::Forward, 2);
    let (mine, theirs) = (key_on_shard("m", 0, 2), key_on_shard("t", 1, 2));
    let mut here = conn_on_shard(&server, 0);
    assert_eq!(
        here.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "50"]),
        b"+OK\r\n"
    );
    let mut owner = conn_on_shard(&server, 1);
    owner.send(&encode(&["DEBUG", "SLEEP", "0.3"]));
    std::thread::sleep(std::time::Duration::from_millis(50));
    let script = format!("redis.call('set', KEYS[1], '1'); return redis.call('get', '{theirs}')");
    let reply = here.cmd(&["EVAL", &script, "1", &mine]);
    assert_eq!(reply, b"$-1\r\n");
    assert_eq!(owner.read_reply(), b"+OK\r\n");
    let latest = decode(&here.cmd(&["LATENCY", "LATEST"]));
    let Value::Array(events) = latest else {
        panic!("LATENCY LATEST: {latest:?}")
    };
    let round_trip = events.iter().find_map(|e| match e {
        Value::Array(fields) if fields[0].text() == "mesh-round-trip" => Some(fields.clone()),
        _ => None,
    });
    let fields = round_trip.unwrap_or_else(|| panic!("no mesh-round-trip in {events:?}"));
    let Value::Int(ms) = fields[2] else {
        panic!("{fields:?}")
    };
    assert!(ms >= 150, "waited {ms} ms");
}
