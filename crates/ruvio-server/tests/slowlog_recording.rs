//! When SLOWLOG, INFO commandstats and LATENCY HISTOGRAM record a command that
//! does not answer at once, against a real redis-server 7.0 where it can: a
//! blocking command is logged when it is served (never when it timed out or was
//! unblocked), a command gathered from every shard is counted after it answers,
//! CLIENT UNBLOCK answers what the owner did, and a split command is recorded
//! once, when every part answered. Apart from `slowlog_latency` (the logs'
//! entries, texts and shapes) because these follow a command across shards.

mod common;

use common::slowlog::*;
use common::*;

/// Waits until `n` clients are blocked (INFO `blocked_clients`), asking on `conn`.
fn wait_blocked(conn: &mut RawConn, n: usize) {
    let want = format!("blocked_clients:{n}\r\n");
    for _ in 0..500 {
        if decode(&conn.cmd(&["INFO", "clients"]))
            .text()
            .contains(&want)
        {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    panic!("never {n} blocked clients");
}

/// The slow log as a blocking session leaves it (Redis 7.0 logs a blocking
/// command when it is served, after the write that served it, and never one
/// that timed out or was unblocked), the calls INFO commandstats counts and the
/// calls LATENCY HISTOGRAM counts. `o` writes and reads the log, `w` waits;
/// `key` names the keys (on one shard or another).
fn blocking_session(
    mut o: RawConn,
    mut w: RawConn,
    key: impl Fn(&str) -> String,
) -> (Vec<Value>, Vec<String>, Calls) {
    let peers = [
        (local_addr(&mut o), "OBSERVER"),
        (local_addr(&mut w), "WAITER"),
    ];
    o.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    o.cmd(&["CONFIG", "RESETSTAT"]);
    w.cmd(&["CLIENT", "SETNAME", "waiter"]);
    let waiter_id = decode(&w.cmd(&["CLIENT", "ID"])).text();
    let (list, zset, stream) = (key("blk-list"), key("blk-zset"), key("blk-stream"));
    o.cmd(&["SLOWLOG", "RESET"]);
    // Served by a write: logged then, after it.
    w.send(&encode(&["BLPOP", &list, &key("blk-list-b"), "0"]));
    wait_blocked(&mut o, 1);
    o.cmd(&["RPUSH", &list, "a", "b"]);
    assert_eq!(
        w.read_reply(),
        format!("*2\r\n{}{}", bulk(&list), bulk("a")).as_bytes()
    );
    w.send(&encode(&["BZPOPMIN", &zset, &key("blk-zset-b"), "0"]));
    wait_blocked(&mut o, 1);
    o.cmd(&["ZADD", &zset, "1", "m"]);
    assert!(w.read_reply().starts_with(b"*3\r\n"));
    o.cmd(&["XADD", &stream, "1-1", "f", "v"]);
    // XREAD's `$` is logged as sent, not as the ID it stood for.
    w.send(&encode(&[
        "XREAD",
        "COUNT",
        "1",
        "BLOCK",
        "0",
        "STREAMS",
        &stream,
        &key("blk-stream-b"),
        "$",
        "$",
    ]));
    wait_blocked(&mut o, 1);
    o.cmd(&["XADD", &stream, "2-1", "f", "v"]);
    assert!(w.read_reply().starts_with(b"*1\r\n"));
    // Timed out: not logged again. Unblocked by CLIENT UNBLOCK: logged by Redis
    // 7.0 as a failed call with no arguments (it freed them first), before the
    // CLIENT UNBLOCK; with ERROR too.
    let none = [key("blk-none"), key("blk-none-b")];
    assert_eq!(w.cmd(&["BLPOP", &none[0], &none[1], "0.05"]), b"*-1\r\n");
    w.send(&encode(&["BLPOP", &none[0], &none[1], "0"]));
    wait_blocked(&mut o, 1);
    assert_eq!(o.cmd(&["CLIENT", "UNBLOCK", &waiter_id]), b":1\r\n");
    assert_eq!(w.read_reply(), b"*-1\r\n");
    w.send(&encode(&["BZPOPMIN", &none[0], &none[1], "0"]));
    wait_blocked(&mut o, 1);
    assert_eq!(
        o.cmd(&["CLIENT", "UNBLOCK", &waiter_id, "ERROR"]),
        b":1\r\n"
    );
    assert_eq!(
        w.read_reply(),
        b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
    );
    // Served at once: logged as any command.
    assert_eq!(
        w.cmd(&["BLPOP", &list, "0"]),
        format!("*2\r\n{}{}", bulk(&list), bulk("b")).as_bytes()
    );
    let Value::Array(list) = decode(&o.cmd(&["SLOWLOG", "GET", "100"])) else {
        panic!("SLOWLOG GET");
    };
    let mut last_id = i64::MAX;
    let log = list
        .into_iter()
        .filter_map(|entry| {
            let Value::Array(mut fields) = entry else {
                panic!("not an entry");
            };
            // Newest first; the polls of INFO are left out (their number varies).
            let id: i64 = fields[0].text().parse().unwrap();
            assert!(id < last_id, "ids out of order");
            last_id = id;
            let args = argv(&Value::Array(fields.clone()));
            if args.first().is_some_and(|a| a.eq_ignore_ascii_case("info")) {
                return None;
            }
            let peer = fields[4].text();
            let (_, who) = peers
                .iter()
                .find(|(p, _)| *p == peer)
                .expect("a known peer");
            if args[..2.min(args.len())] == ["CLIENT", "UNBLOCK"] {
                // The client's id differs between the servers.
                if let Value::Array(a) = &mut fields[3] {
                    a[2] = Value::Simple("CLIENT-ID".into());
                }
            }
            fields[0] = Value::Simple("ID".into());
            fields[1] = Value::Simple("T".into());
            fields[2] = Value::Simple("D".into());
            fields[4] = Value::Simple(who.to_string());
            Some(Value::Array(fields))
        })
        .collect();
    let stats = decode(&o.cmd(&["INFO", "commandstats"])).text();
    let calls = ["blpop", "bzpopmin", "xread"]
        .iter()
        .map(|name| {
            let line = stats
                .lines()
                .find(|l| l.starts_with(&format!("cmdstat_{name}:")))
                .unwrap_or_else(|| panic!("{name} in {stats}"));
            // Calls, rejected and failed calls (the times vary).
            line.split(',')
                .filter(|f| !f.starts_with("usec"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    let histogram =
        histogram_calls(&o.cmd(&["LATENCY", "HISTOGRAM", "blpop", "bzpopmin", "xread"]));
    (log, calls, histogram)
}

#[test]
fn blocking_commands_are_logged_when_served_as_redis_does() {
    if require_redis_server("blocking_commands_are_logged_when_served_as_redis_does").is_none() {
        return;
    }
    // One shard; two in forward mode with the keys on the waiter's shard, on
    // the other (the command then runs, parks and is served there) and on both
    // (`mesh::lending` coordinates it); a node of two in per-shard mode. Each
    // blocking command names two keys: `-b` the second.
    for (shards, mode, waiter_shard, key_shard, b_shard) in [
        (1, PortMode::Forward, 0, 0, 0),
        (2, PortMode::Forward, 0, 0, 0),
        (2, PortMode::Forward, 0, 1, 1),
        (2, PortMode::Forward, 0, 0, 1),
        (2, PortMode::PerShard, 1, 1, 1),
    ] {
        // A second key on the first one's shard shares its slot (a node in
        // per-shard mode refuses keys of two slots).
        let key = |p: &str| match p.strip_suffix("-b") {
            Some(first) if b_shard == key_shard => {
                format!("{{{}}}-b", key_on_shard(first, key_shard, 2))
            }
            Some(_) => key_on_shard(p, b_shard, 2),
            None => key_on_shard(p, key_shard, 2),
        };
        eprintln!("case: {shards} shard(s) {mode:?}, keys on shards {key_shard} {b_shard}");
        let redis = Server::redis();
        let expected = blocking_session(redis.raw(), redis.raw(), key);
        assert_eq!(expected.0.len(), 13, "{:?}", expected.0);
        let ruvio = Server::ruvio(mode, shards);
        let (o, w) = match mode {
            PortMode::Forward => (
                conn_on_shard(&ruvio, waiter_shard),
                conn_on_shard(&ruvio, waiter_shard),
            ),
            PortMode::PerShard => {
                let port = ruvio.shard_port(waiter_shard);
                (RawConn::connect(port), RawConn::connect(port))
            }
        };
        // A command parked on another shard too: CLIENT UNBLOCK waits for
        // that shard, which logs the unblocked command first.
        let got = blocking_session(o, w, key);
        let case = format!("{shards} shard(s) {mode:?}, keys on shards {key_shard} {b_shard}");
        assert_eq!(got.0, expected.0, "{case}: SLOWLOG GET");
        assert_eq!(got.1, expected.1, "{case}: INFO commandstats calls");
        assert_eq!(got.2, expected.2, "{case}: LATENCY HISTOGRAM calls");
    }
}

/// INFO commandstats' lines without their times, sorted:
/// `name:calls=N,rejected_calls=N,failed_calls=N`.
fn commandstats(reply: &[u8]) -> Vec<String> {
    let text = decode(reply).text();
    let mut lines: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("cmdstat_"))
        .map(|l| {
            l.split(',')
                .filter(|f| !f.starts_with("usec"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    lines.sort();
    lines
}

/// What INFO commandstats, LATENCY HISTOGRAM and INFO stats count along a
/// session of gathered (INFO, LATENCY HISTOGRAM, CLIENT LIST) and split (MSET,
/// MGET, DEL over `keys`) commands: each counts what answered before it, never
/// itself.
fn gathered_session(server: &Server, keys: &[String]) -> Vec<Vec<String>> {
    let mut c = server.raw();
    c.cmd(&["CONFIG", "RESETSTAT"]);
    let mut seen = vec![commandstats(&c.cmd(&["INFO", "commandstats"]))];
    seen.push(commandstats(&c.cmd(&["INFO", "commandstats"])));
    c.cmd(&["CLIENT", "LIST"]);
    c.cmd(&["MSET", &keys[0], "1", &keys[1], "2"]);
    c.cmd(&["MGET", &keys[0], &keys[1]]);
    c.cmd(&["DEL", &keys[0], &keys[1]]);
    for _ in 0..2 {
        let calls = histogram_calls(&c.cmd(&["LATENCY", "HISTOGRAM"]));
        seen.push(calls.iter().map(|(n, k)| format!("{n}={k}")).collect());
    }
    let stats = decode(&c.cmd(&["INFO", "stats"])).text();
    seen.push(
        stats
            .lines()
            .filter(|l| l.starts_with("total_commands_processed:"))
            .map(String::from)
            .collect(),
    );
    seen.push(commandstats(&c.cmd(&["INFO", "commandstats"])));
    seen
}

#[test]
fn gathered_commands_are_counted_after_they_answer_as_redis_does() {
    if require_redis_server("gathered_commands_are_counted_after_they_answer_as_redis_does")
        .is_none()
    {
        return;
    }
    for shards in [1, 2] {
        let redis = Server::redis();
        let ruvio = Server::ruvio(PortMode::Forward, shards);
        let keys = keys_per_shard("gathered", 2);
        let expected = gathered_session(&redis, &keys);
        assert!(expected[0]
            .iter()
            .any(|l| l.starts_with("config|resetstat:calls=1")));
        let got = gathered_session(&ruvio, &keys);
        for (i, (e, g)) in expected.iter().zip(&got).enumerate() {
            assert_eq!(g, e, "{shards} shard(s), answer #{i}");
        }
        assert_eq!(got.len(), expected.len());
    }
}

/// CLIENT UNBLOCK's answers and the slow log it leaves (arguments only, INFO
/// left out, the client id and `key` replaced): `o` unblocks `w`, blocked on
/// `key`.
fn unblock_session(mut o: RawConn, mut w: RawConn, key: &str) -> (Vec<Vec<u8>>, Vec<Vec<String>>) {
    o.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    let id = decode(&w.cmd(&["CLIENT", "ID"])).text();
    let mut replies = Vec::new();
    // A write serves the waiter and CLIENT UNBLOCK follows it in one pipeline:
    // nothing is blocked any more when it runs, so 0.
    w.send(&encode(&["BLPOP", key, "0"]));
    wait_blocked(&mut o, 1);
    o.cmd(&["SLOWLOG", "RESET"]);
    let mut pipeline = encode(&["RPUSH", key, "a"]);
    pipeline.extend(encode(&["CLIENT", "UNBLOCK", &id]));
    o.send(&pipeline);
    replies.push(o.read_reply());
    replies.push(o.read_reply());
    let served = format!("*2\r\n{}{}", bulk(key), bulk("a"));
    assert_eq!(show(&w.read_reply()), show(served.as_bytes()));
    // Parked again: 1, with the unblocked command logged before CLIENT UNBLOCK.
    w.send(&encode(&["BLPOP", key, "0"]));
    wait_blocked(&mut o, 1);
    replies.push(o.cmd(&["CLIENT", "UNBLOCK", &id, "ERROR"]));
    replies.push(w.read_reply());
    replies.push(o.cmd(&["CLIENT", "UNBLOCK", &id]));
    let Value::Array(list) = decode(&o.cmd(&["SLOWLOG", "GET", "-1"])) else {
        panic!("SLOWLOG GET");
    };
    let log = list
        .iter()
        .map(argv)
        .filter(|a| !a.first().is_some_and(|n| n.eq_ignore_ascii_case("info")))
        .map(|mut a| {
            if a.len() > 2 && a[..2] == ["CLIENT", "UNBLOCK"] {
                a[2] = "ID".into();
            }
            for arg in a.iter_mut().filter(|arg| arg.as_str() == key) {
                *arg = "KEY".into();
            }
            a
        })
        .collect();
    (replies, log)
}

#[test]
fn client_unblock_answers_what_the_owner_did_as_redis_does() {
    if require_redis_server("client_unblock_answers_what_the_owner_did_as_redis_does").is_none() {
        return;
    }
    let redis = Server::redis();
    let expected = unblock_session(redis.raw(), redis.raw(), "unblock-list");
    assert_eq!(expected.0[1], b":0\r\n");
    assert_eq!(expected.0[2], b":1\r\n");
    // (observer's shard, waiter's shard, key's shard): the command parked on
    // the observer's shard or on another one, forwarded there or not.
    for (o_shard, w_shard, key_shard) in [(0, 0, 1), (1, 0, 0), (0, 0, 0), (1, 0, 1)] {
        let ruvio = Server::ruvio(PortMode::Forward, 2);
        let key = key_on_shard("unblock-list", key_shard, 2);
        let (o, w) = (
            conn_on_shard(&ruvio, o_shard),
            conn_on_shard(&ruvio, w_shard),
        );
        let (replies, log) = unblock_session(o, w, &key);
        let case = format!("observer on {o_shard}, waiter on {w_shard}, key on {key_shard}");
        let shown = |r: &[Vec<u8>]| r.iter().map(|b| show(b)).collect::<Vec<_>>();
        assert_eq!(shown(&replies), shown(&expected.0), "{case}: replies");
        assert_eq!(log, expected.1, "{case}: SLOWLOG GET");
    }
}

/// A command split over two shards' keys is recorded once every part answered:
/// its time has each part's run where it ran (shard 1 runs each part 100 ms
/// longer, from a debug fault point), its reply size is the whole reply.
#[test]
fn a_split_command_is_recorded_once_every_part_answered() {
    let server = Server::ruvio_with_env(
        PortMode::Forward,
        2,
        &[],
        &[("RUVIO_FAULT", "mesh:slow-part-1")],
    );
    let mut c = conn_on_shard(&server, 0);
    let peer = local_addr(&mut c);
    let (mine, theirs) = (key_on_shard("split", 0, 2), key_on_shard("split", 1, 2));
    let value = "v".repeat(150);
    for key in [&mine, &theirs] {
        assert_eq!(c.cmd(&["SET", key, &value]), b"+OK\r\n");
    }
    for (name, value) in [
        ("slowlog-log-slower-than", "50000"),
        ("commandlog-reply-larger-than", "300"),
    ] {
        assert_eq!(c.cmd(&["CONFIG", "SET", name, value]), b"+OK\r\n");
    }
    c.cmd(&["CONFIG", "RESETSTAT"]);
    c.cmd(&["SLOWLOG", "RESET"]);
    c.cmd(&["COMMANDLOG", "RESET", "large-reply"]);
    let reply = c.cmd(&["MGET", &mine, &theirs]);
    // *2\r\n, then $150\r\n v... \r\n twice.
    assert_eq!(reply.len(), 4 + 2 * (6 + 150 + 2), "{}", show(&reply));
    assert_eq!(c.cmd(&["MSET", &mine, "a", &theirs, "b"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["DEL", &mine, &theirs]), b":2\r\n");
    let large = decode(&c.cmd(&["COMMANDLOG", "GET", "-1", "large-reply"]));
    let Value::Array(large) = &large else {
        panic!("{large:?}")
    };
    assert_eq!(large.len(), 1, "{large:?}");
    assert_eq!(argv(&large[0]), ["MGET", mine.as_str(), theirs.as_str()]);
    assert_eq!(fields(&large[0])[2].text(), "320");
    let log = decode(&c.cmd(&["SLOWLOG", "GET", "-1"]));
    let Value::Array(list) = &log else {
        panic!("{log:?}")
    };
    // Only the split commands (another may be slow on a loaded host).
    let split = |e: &&Value| ["MGET", "MSET", "DEL"].contains(&argv(e)[0].as_str());
    let list: Vec<&Value> = list.iter().filter(split).collect();
    let shown: Vec<Vec<String>> = list.iter().map(|e| argv(e)).collect();
    let expected: Vec<Vec<String>> = [
        vec!["DEL", mine.as_str(), theirs.as_str()],
        vec!["MSET", mine.as_str(), "a", theirs.as_str(), "b"],
        vec!["MGET", mine.as_str(), theirs.as_str()],
    ]
    .iter()
    .map(|a| a.iter().map(|s| s.to_string()).collect())
    .collect();
    assert_eq!(shown, expected);
    for entry in &list {
        let f = fields(entry);
        assert!(f[2].text().parse::<u64>().unwrap() >= 100_000, "{entry:?}");
        assert_eq!(f[4].text(), peer);
    }
    assert_eq!(
        histogram_calls(&c.cmd(&["LATENCY", "HISTOGRAM", "mget", "mset", "del"])),
        [("del", 1), ("mget", 1), ("mset", 1)].map(|(n, k)| (n.to_string(), k))
    );
    let stats = decode(&c.cmd(&["INFO", "commandstats"])).text();
    let mget = stats
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_mget:calls=1,usec="))
        .unwrap_or_else(|| panic!("{stats}"));
    let usec: u64 = mget.split(',').next().unwrap().parse().unwrap();
    assert!(usec >= 100_000, "{mget}");
}
