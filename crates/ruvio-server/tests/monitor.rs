//! MONITOR against redis-server 7.0: the same clients send the same commands to
//! each server while a monitor listens, and the monitor's lines (timestamps and
//! client ports aside) must be the same, in the same order: which commands are
//! shown (rejected and admin ones are not), when (after the call, EVAL before its
//! `lua` calls, EXEC after its queue), the database, the quoting and the
//! redaction of secrets. Ruvio runs with 1 and 2 shards in forward mode, the
//! monitor and the clients on every combination of shards, so lines travel
//! between shards.

mod common;

use common::*;
use std::collections::HashMap;

/// The monitor's lines up to the one that shows `ECHO marker`, each as
/// `[db client] args` with the timestamp dropped and each client address
/// replaced by its label (in order of appearance: c1, c2 ...).
fn lines_until(
    monitor: &mut RawConn,
    labels: &mut HashMap<String, String>,
    marker: &str,
) -> Vec<String> {
    let mut lines = Vec::new();
    loop {
        let reply = monitor.read_reply();
        let text = String::from_utf8_lossy(&reply).into_owned();
        let line = text
            .strip_prefix('+')
            .and_then(|l| l.strip_suffix("\r\n"))
            .unwrap_or_else(|| panic!("not a monitor line: {text:?}"));
        let (stamp, rest) = line.split_once(' ').expect("timestamp");
        let (secs, micros) = stamp.split_once('.').expect("seconds.micros");
        assert!(secs.parse::<u64>().is_ok() && micros.len() == 6, "{line}");
        let (source, args) = rest.split_once("] ").expect("source");
        let (db, client) = source.trim_start_matches('[').split_once(' ').expect("db");
        let client = match client {
            "lua" => "lua".to_string(),
            addr => {
                let next = format!("c{}", labels.len() + 1);
                labels.entry(addr.to_string()).or_insert(next).clone()
            }
        };
        if args == format!("\"echo\" \"{marker}\"") {
            return lines;
        }
        lines.push(format!("[{db} {client}] {args}"));
    }
}

/// The commands the clients send, with the client index sending each.
fn script(key_a: &str, key_b: &str) -> Vec<(usize, Vec<Vec<u8>>)> {
    let c = |client: usize, words: &[&[u8]]| (client, words.iter().map(|w| w.to_vec()).collect());
    let eval_body = "redis.call('set', KEYS[1], ARGV[1]) redis.call('select', 2) \
                     redis.call('ping') return redis.call('get', KEYS[1])";
    vec![
        c(0, &[b"set", key_a.as_bytes(), b"x y\n\"z\\"]),
        c(0, &[b"set", key_b.as_bytes(), b"\x01\xff\t\r\x07\x08"]),
        c(1, &[b"get", key_a.as_bytes()]),
        c(0, &[b"nosuchcommand", b"1"]),
        c(0, &[b"get"]),
        c(0, &[b"client", b"nosuchsub"]),
        c(1, &[b"multi"]),
        c(1, &[b"set", key_b.as_bytes(), b"v"]),
        c(1, &[b"get", key_a.as_bytes()]),
        c(1, &[b"config", b"get", b"maxmemory"]),
        c(1, &[b"exec"]),
        c(
            0,
            &[
                b"eval",
                eval_body.as_bytes(),
                b"1",
                key_b.as_bytes(),
                b"arg",
            ],
        ),
        c(0, &[b"auth", b"nopass"]),
        c(0, &[b"auth", b"someone", b"nopass"]),
        c(
            1,
            &[
                b"hello", b"2", b"auth", b"default", b"secret", b"setname", b"nm",
            ],
        ),
        c(1, &[b"hello", b"3"]),
        c(1, &[b"hget", key_a.as_bytes(), b"f"]),
        c(1, &[b"hello", b"2"]),
        c(0, &[b"config", b"set", b"maxmemory", b"0"]),
        c(0, &[b"debug", b"sleep", b"0"]),
        c(0, &[b"blpop", b"{nothing}", b"0.05"]),
        c(0, &[b"client", b"setname", b"alice"]),
        c(0, &[b"client", b"kill", b"id", b"999999"]),
        c(0, &[b"select", b"3"]),
        c(0, &[b"rpush", key_a.as_bytes(), b"a", b"b"]),
        c(0, &[b"select", b"0"]),
        c(1, &[b"mget", key_a.as_bytes(), key_b.as_bytes()]),
        c(1, &[b"del", key_a.as_bytes(), key_b.as_bytes()]),
        c(
            0,
            &[b"script", b"load", b"return redis.call('incr', KEYS[1])"],
        ),
        c(
            0,
            &[
                b"evalsha",
                b"2bab3b661081db58bd2341920e0ba7cf5dc77b25",
                b"1",
                key_a.as_bytes(),
            ],
        ),
        c(1, &[b"monitor"]),
    ]
}

/// Run [`script`] on a server whose monitor is `monitor` and clients `clients`:
/// the lines each command made. After each command its client sends `ECHO
/// step-N` and the monitor is read up to that line, so each command's lines are
/// known whatever the shards (lines of clients on different shards reach a
/// monitor in no set order, as from different Redis Cluster nodes).
fn record(
    monitor: &mut RawConn,
    clients: &mut [RawConn],
    key_a: &str,
    key_b: &str,
) -> Vec<Vec<String>> {
    assert_eq!(monitor.cmd(&["monitor"]), b"+OK\r\n");
    let mut labels = HashMap::new();
    let mut steps = Vec::new();
    let mut in_multi = [false, false];
    for (step, (who, command)) in script(key_a, key_b).into_iter().enumerate() {
        let reply = clients[who].cmd(&command);
        if command[0] == b"monitor" {
            assert_eq!(reply, b"+OK\r\n");
        }
        if command == [b"hello".to_vec(), b"3".to_vec()] {
            assert!(reply.starts_with(b"%"), "{}", show(&reply));
        }
        // Inside MULTI the ECHO would be queued: the queue's lines come with EXEC's.
        in_multi[who] = match command[0].to_ascii_lowercase().as_slice() {
            b"multi" => true,
            b"exec" | b"discard" => false,
            _ => in_multi[who],
        };
        if !in_multi[who] {
            let marker = format!("step-{step}");
            clients[who].cmd(&["echo", &marker]);
            steps.push(lines_until(monitor, &mut labels, &marker));
        }
    }
    steps
}

/// Ruvio's lines for every placement of the monitor and the two clients on
/// `shards` shards, each equal to Redis's.
fn compare_with_redis(shards: usize) {
    let Some(_) = require_redis_server("monitor") else {
        return;
    };
    let redis = Server::redis();
    let key_a = key_on_shard("ka", 0, 2);
    let key_b = key_on_shard("kb", 1, 2);
    let mut clients = [redis.raw(), redis.raw()];
    let expected = record(&mut redis.raw(), &mut clients, &key_a, &key_b);
    assert!(expected.iter().flatten().count() > 20, "{expected:#?}");

    for monitor_shard in 0..shards {
        for client_shard in 0..shards {
            let ruvio = Server::forward(shards);
            let mut clients = [conn_on_shard(&ruvio, client_shard), ruvio.raw()];
            let mut monitor = conn_on_shard(&ruvio, monitor_shard);
            let got = record(&mut monitor, &mut clients, &key_a, &key_b);
            assert_eq!(
                got, expected,
                "{shards} shards, monitor on shard {monitor_shard}, client on {client_shard}"
            );
        }
    }
}

#[test]
fn one_shard_monitors_as_redis() {
    compare_with_redis(1);
}

#[test]
fn two_shards_monitor_as_one_redis() {
    compare_with_redis(2);
}

/// A monitor's own commands are answered and then shown; RESET leaves MONITOR
/// mode; MONITOR inside a transaction fails at EXEC; CLIENT LIST flags it `O`.
#[test]
fn monitor_mode_comes_and_goes() {
    let ruvio = Server::forward(2);
    let mut monitor = ruvio.raw();
    let mut other = ruvio.raw();
    assert_eq!(monitor.cmd(&["monitor"]), b"+OK\r\n");
    let listed = other.cmd(&["client", "list"]);
    assert!(contains(&listed, b"flags=O "), "{}", show(&listed));
    assert!(contains(&listed, b"cmd=monitor "), "{}", show(&listed));
    assert_eq!(monitor.cmd(&["ping"]), b"+PONG\r\n");
    let line = monitor.read_reply();
    assert!(line.ends_with(b"\"ping\"\r\n"), "{}", show(&line));
    assert_eq!(monitor.cmd(&["reset"]), b"+RESET\r\n");
    other.cmd(&["set", "k", "v"]);
    assert_eq!(monitor.cmd(&["ping"]), b"+PONG\r\n");
    monitor.expect_silence(std::time::Duration::from_millis(100));

    assert_eq!(other.cmd(&["multi"]), b"+OK\r\n");
    assert_eq!(other.cmd(&["monitor"]), b"+QUEUED\r\n");
    assert_eq!(
        other.cmd(&["exec"]),
        b"*1\r\n-ERR MONITOR isn't allowed for DENY BLOCKING client\r\n"
    );
}

/// A monitor that does not read is closed by the normal class of
/// `client-output-buffer-limit`, as Redis 7.0 classes monitors, and the server
/// goes on.
#[test]
fn a_monitor_that_does_not_read_is_closed_by_the_normal_limit() {
    let ruvio = Server::forward(2);
    let mut admin = ruvio.raw();
    admin.cmd(&[
        "config",
        "set",
        "client-output-buffer-limit",
        "normal 64kb 64kb 0 replica 0 0 0 pubsub 0 0 0",
    ]);
    let stream = std::net::TcpStream::connect(("127.0.0.1", ruvio.port())).unwrap();
    let mut monitor = RawConn::from_stream(stream);
    assert_eq!(monitor.cmd(&["monitor"]), b"+OK\r\n");
    let value = "v".repeat(1000);
    let mut writer = ruvio.raw();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        for _ in 0..200 {
            writer.cmd(&["set", "k", &value]);
        }
        let listed = admin.cmd(&["client", "list"]);
        if !contains(&listed, b"flags=O ") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", show(&listed));
    }
    assert_eq!(writer.cmd(&["get", "k"]), bulk(&value).into_bytes());
}
