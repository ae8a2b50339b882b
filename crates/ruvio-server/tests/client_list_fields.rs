//! CLIENT LIST and CLIENT INFO tell the truth about each connection: its query
//! buffer, the arguments it runs or blocks in, its MULTI queue, its output, and
//! the flags Redis sets (`x`, `b`, `d`, `e`, `c` ...). The fields whose values do
//! not depend on the server's allocator (flags, multi, qbuf of the caller,
//! argv-mem, multi-mem, obl, oll, omem when nothing waits, events, cmd) are
//! compared with redis-server; Ruvio with 1 and 2 shards in forward mode, with
//! blocked and watched keys on each shard. The ones that do depend on it (a
//! partial command in the query buffer, output a client does not read) are
//! checked for what they must show.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The fields of one CLIENT LIST line.
fn fields(line: &str) -> BTreeMap<String, String> {
    line.split(' ')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The text of a bulk or verbatim reply.
fn text(reply: &[u8]) -> String {
    decode(reply).text()
}

/// The CLIENT LIST line of client `id`, seen from `observer`.
fn line_of(observer: &mut RawConn, id: &str) -> BTreeMap<String, String> {
    let reply = observer.cmd(&["client", "list", "id", id]);
    let listed = text(&reply);
    let line = listed
        .lines()
        .next()
        .unwrap_or_else(|| panic!("no client {id}: {listed}"));
    fields(line)
}

/// The line of client `id` once `ready` holds for it (waits up to 3 s).
fn line_when(
    observer: &mut RawConn,
    id: &str,
    ready: impl Fn(&BTreeMap<String, String>) -> bool,
) -> BTreeMap<String, String> {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let line = line_of(observer, id);
        if ready(&line) || Instant::now() > deadline {
            return line;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The fields that mean the same on every server, as `name=value` words.
fn comparable(line: &BTreeMap<String, String>) -> String {
    [
        "flags",
        "multi",
        "argv-mem",
        "multi-mem",
        "obl",
        "oll",
        "omem",
        "events",
        "cmd",
    ]
    .iter()
    .map(|k| format!("{k}={}", line.get(*k).map_or("?", String::as_str)))
    .collect::<Vec<_>>()
    .join(" ")
}

/// The client id of `conn`.
fn id_of(conn: &mut RawConn) -> String {
    let reply = conn.cmd(&["client", "id"]);
    String::from_utf8_lossy(&reply[1..reply.len() - 2]).into_owned()
}

/// What the scenario shows on the server at `port`; `keys` are the blocked and
/// watched keys (one per shard on Ruvio).
fn observe(port: u16, keys: &[String]) -> Vec<String> {
    let mut seen = Vec::new();
    let mut observer = RawConn::connect(port);
    observer.cmd(&["flushall"]);

    // The caller: its own command in the query buffer and in argv-mem.
    let info = fields(text(&observer.cmd(&["client", "info"])).trim_end());
    seen.push(format!(
        "caller info: {} qbuf={}",
        comparable(&info),
        info["qbuf"]
    ));
    let me = id_of(&mut observer);
    let listed = line_of(&mut observer, &me);
    seen.push(format!(
        "caller list: {} qbuf={}",
        comparable(&listed),
        listed["qbuf"]
    ));

    // A MULTI queue: multi=2 and the queued arguments' memory.
    let mut queued = RawConn::connect(port);
    let queued_id = id_of(&mut queued);
    queued.cmd(&["multi"]);
    queued.cmd(&["set", "a", "b"]);
    queued.cmd(&["set", "c", "dddd"]);
    seen.push(format!(
        "multi: {} qbuf={}",
        comparable(&line_of(&mut observer, &queued_id)),
        line_of(&mut observer, &queued_id)["qbuf"]
    ));
    queued.cmd(&["discard"]);
    seen.push(format!(
        "after discard: {}",
        comparable(&line_of(&mut observer, &queued_id))
    ));

    // Blocked in BLPOP, on each key: flag b, the command's arguments.
    let mut blocked = Vec::new();
    for key in keys {
        let mut conn = RawConn::connect(port);
        let id = id_of(&mut conn);
        conn.send(&encode(&["blpop", key.as_str(), "0"]));
        let line = line_when(&mut observer, &id, |l| l["flags"].contains('b'));
        seen.push(format!("blocked: {}", comparable(&line)));
        blocked.push((conn, id));
    }
    for (key, (conn, id)) in keys.iter().zip(&mut blocked) {
        observer.cmd(&["rpush", key.as_str(), "x"]);
        conn.read_reply();
        let line = line_when(&mut observer, id, |l| !l["flags"].contains('b'));
        seen.push(format!("served: {}", comparable(&line)));
    }

    // A watched key changed by another client: flag d.
    for key in keys {
        let mut watcher = RawConn::connect(port);
        let id = id_of(&mut watcher);
        watcher.cmd(&["watch", key.as_str()]);
        seen.push(format!(
            "watching: {}",
            comparable(&line_of(&mut observer, &id))
        ));
        observer.cmd(&["set", key.as_str(), "changed"]);
        let line = line_when(&mut observer, &id, |l| l["flags"].contains('d'));
        seen.push(format!("watched key changed: {}", comparable(&line)));
        watcher.cmd(&["unwatch"]);
        seen.push(format!(
            "unwatched: {}",
            comparable(&line_of(&mut observer, &id))
        ));
    }

    // CLIENT NO-EVICT: flag e.
    let mut no_evict = RawConn::connect(port);
    let id = id_of(&mut no_evict);
    no_evict.cmd(&["client", "no-evict", "on"]);
    seen.push(format!(
        "no-evict: {}",
        comparable(&line_of(&mut observer, &id))
    ));
    seen
}

#[test]
fn client_list_fields_as_redis() {
    let Some(_) = require_redis_server("client_list_fields") else {
        return;
    };
    let redis = Server::redis();
    let expected = observe(redis.port(), &["q0".into(), "q1".into()]);
    assert!(
        expected
            .iter()
            .any(|l| l.starts_with("multi: flags=x multi=2")),
        "{expected:#?}"
    );
    for shards in [1, 2] {
        let ruvio = Server::ruvio(PortMode::Forward, shards);
        let keys: Vec<String> = (0..2)
            .map(|i| key_on_shard("q", i % shards, shards))
            .collect();
        let seen = observe(ruvio.port(), &keys);
        assert_eq!(seen, expected, "{shards} shard(s)");
    }
}

/// A partial command waits in the query buffer (`qbuf`) until it is whole; a
/// client that does not read its replies shows them as unsent output (`omem`,
/// `events=rw`); the line also counts the keys a client watches (`watch=`).
#[test]
fn client_list_shows_pending_input_and_output() {
    for shards in [1, 2] {
        let server = Server::ruvio(PortMode::Forward, shards);
        let mut observer = server.raw();
        let partial = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nva";
        let mut writer = server.raw();
        let id = id_of(&mut writer);
        writer.send(partial);
        let line = line_when(&mut observer, &id, |l| l["qbuf"] != "0");
        assert_eq!(
            line["qbuf"],
            partial.len().to_string(),
            "{shards}: {line:?}"
        );
        assert!(line["qbuf-free"].parse::<usize>().unwrap() > 0, "{line:?}");
        writer.send(b"lue\r\n");
        assert_eq!(writer.read_reply(), b"+OK\r\n");
        let line = line_of(&mut observer, &id);
        assert_eq!(line["qbuf"], "0", "{shards}: {line:?}");
        assert_eq!(line["cmd"], "set", "{line:?}");

        writer.cmd(&["watch", "w1", "w2", "w3"]);
        let line = line_of(&mut observer, &id);
        assert_eq!(line["watch"], "3", "{line:?}");
        let thread: usize = line["io-thread"].parse().unwrap();
        assert!(
            thread < shards,
            "io-thread names the client's shard: {line:?}"
        );
        writer.cmd(&["unwatch"]);
        assert_eq!(line_of(&mut observer, &id)["watch"], "0");

        // 40 replies of 1 MB that the client does not read.
        observer.cmd(&["set", "big", &"x".repeat(1 << 20)]);
        let mut reader = server.raw();
        let id = id_of(&mut reader);
        let mut gets = Vec::new();
        for _ in 0..40 {
            gets.extend_from_slice(&encode(&["get", "big"]));
        }
        reader.send(&gets);
        let line = line_when(&mut observer, &id, |l| l["omem"] != "0");
        let omem: usize = line["omem"].parse().unwrap();
        let total: usize = line["tot-mem"].parse().unwrap();
        assert!(omem > 1 << 20, "{shards}: {line:?}");
        assert!(total >= omem, "tot-mem counts the output: {line:?}");
        assert_eq!(line["events"], "rw", "{line:?}");
        drop(reader);
    }
}
