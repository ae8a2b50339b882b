//! FILLGET and FILLSET with real clients, in both port modes (two shards each):
//! fifty clients miss the same key at once and exactly one of them computes it,
//! the others all read its value; an expired lease goes to the oldest waiter; a
//! lease holder that disconnects is replaced when its lease expires; a stale
//! token is refused and stores nothing; WAIT 0 answers at once; the reply shapes
//! of RESP2 and RESP3; COMMAND DOCS. Each case runs on a key of every shard, so
//! in forward mode every connection also reaches a key another shard owns (its
//! FILLGET parks there as a remote waiter).
//!
//! Ruvio's own commands: no redis-server comparison.

mod common;

use common::*;
use std::sync::{Arc, Barrier};
use std::thread::{self, sleep};
use std::time::{Duration, Instant};

/// Clients missing the same key at once.
const STAMPEDE_CLIENTS: usize = 50;
/// How long the stampede's filler "computes" the value: every other client is
/// parked by then.
const COMPUTE: Duration = Duration::from_millis(300);
/// How long a client must stay silent to count as blocked.
const STILL_BLOCKED: Duration = Duration::from_millis(150);
/// Pause that lets the server park one client before the next one blocks.
const LET_IT_PARK: Duration = Duration::from_millis(60);

fn both_modes(case: fn(&Server)) {
    for mode in [PortMode::Forward, PortMode::PerShard] {
        let server = Server::ruvio(mode, 2);
        case(&server);
    }
}

/// A raw connection to the shard that owns `key` (any port in forward mode).
fn conn_for(server: &Server, key: &str) -> RawConn {
    RawConn::connect(port_for(server, key))
}

fn port_for(server: &Server, key: &str) -> u16 {
    server.shard_port(shard_of_key(key, server.shards))
}

/// The token of a lease reply (RESP2 array or RESP3 map), or a panic naming it.
fn token_of(reply: &[u8]) -> String {
    let value = decode(reply);
    match value.get("token") {
        Some(token) => token.text(),
        None => panic!("not a lease: {}", show(reply)),
    }
}

fn bulk(s: &str) -> Vec<u8> {
    format!("${}\r\n{s}\r\n", s.len()).into_bytes()
}

const STALE: &[u8] =
    b"-ERR fill token is stale or unknown (the lease ended or was never granted)\r\n";

/// What one stampede client saw.
enum Outcome {
    Computed,
    Read(Vec<u8>),
}

/// One client of the stampede: FILLGET; with the lease, compute and FILLSET.
fn stampede_client(port: u16, key: &str, start: &Barrier) -> Outcome {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let mut con = client.get_connection_with_timeout(IO_TIMEOUT).unwrap();
    con.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    start.wait();
    let reply: redis::Value = redis::cmd("FILLGET")
        .arg(key)
        .arg("LEASE")
        .arg(10_000)
        .query(&mut con)
        .unwrap();
    match reply {
        redis::Value::BulkString(value) => Outcome::Read(value),
        redis::Value::Array(items) => {
            let token = match &items[1] {
                redis::Value::BulkString(t) => String::from_utf8(t.clone()).unwrap(),
                other => panic!("token {other:?}"),
            };
            sleep(COMPUTE);
            let stored: String = redis::cmd("FILLSET")
                .arg(key)
                .arg(token)
                .arg("computed")
                .arg("EX")
                .arg(60)
                .query(&mut con)
                .unwrap();
            assert_eq!(stored, "OK");
            Outcome::Computed
        }
        other => panic!("FILLGET answered {other:?}"),
    }
}

fn fifty_clients_miss_and_one_computes(server: &Server) {
    for key in keys_per_shard("stampede", server.shards) {
        let start = Arc::new(Barrier::new(STAMPEDE_CLIENTS));
        let port = port_for(server, &key);
        let clients: Vec<_> = (0..STAMPEDE_CLIENTS)
            .map(|_| {
                let (start, key) = (start.clone(), key.clone());
                thread::spawn(move || stampede_client(port, &key, &start))
            })
            .collect();
        let outcomes: Vec<Outcome> = clients.into_iter().map(|c| c.join().unwrap()).collect();
        let computed = outcomes
            .iter()
            .filter(|o| matches!(o, Outcome::Computed))
            .count();
        assert_eq!(
            computed, 1,
            "{:?}: exactly one client computes",
            server.mode
        );
        for o in &outcomes {
            if let Outcome::Read(value) = o {
                assert_eq!(value, b"computed");
            }
        }
        let mut c = conn_for(server, &key);
        assert_eq!(c.cmd(&["TTL", &key]), b":60\r\n");
    }
}

#[test]
fn stampede_of_fifty_clients() {
    both_modes(fifty_clients_miss_and_one_computes);
}

fn an_expired_lease_goes_to_the_oldest_waiter(server: &Server) {
    for key in keys_per_shard("handoff", server.shards) {
        let mut holder = conn_for(server, &key);
        let first = token_of(&holder.cmd(&["FILLGET", &key, "LEASE", "400"]));
        let mut second = conn_for(server, &key);
        let mut third = conn_for(server, &key);
        second.send(&encode(&["FILLGET", &key, "WAIT", "5000"]));
        sleep(LET_IT_PARK);
        third.send(&encode(&["FILLGET", &key, "WAIT", "5000"]));
        third.expect_silence(STILL_BLOCKED);
        // The lease runs out: the oldest waiter gets the next one.
        let began = Instant::now();
        let next = token_of(&second.read_reply());
        assert!(began.elapsed() < Duration::from_secs(2));
        assert_ne!(next, first);
        third.expect_silence(STILL_BLOCKED);
        // The first holder is late: refused, nothing stored.
        assert_eq!(holder.cmd(&["FILLSET", &key, &first, "late"]), STALE);
        assert_eq!(holder.cmd(&["EXISTS", &key]), b":0\r\n");
        assert_eq!(second.cmd(&["FILLSET", &key, &next, "fresh"]), b"+OK\r\n");
        third.expect(&bulk("fresh"));
        assert_eq!(holder.cmd(&["FILLGET", &key]), bulk("fresh"));
    }
}

#[test]
fn lease_expiry_hands_the_lease_to_the_next_waiter() {
    both_modes(an_expired_lease_goes_to_the_oldest_waiter);
}

fn a_departed_holder_is_replaced_at_expiry(server: &Server) {
    for key in keys_per_shard("gone", server.shards) {
        let mut holder = conn_for(server, &key);
        let token = token_of(&holder.cmd(&["FILLGET", &key, "LEASE", "300"]));
        let mut waiter = conn_for(server, &key);
        waiter.send(&encode(&["FILLGET", &key, "LEASE", "300", "WAIT", "5000"]));
        waiter.expect_silence(STILL_BLOCKED);
        drop(holder);
        let next = token_of(&waiter.read_reply());
        assert_ne!(next, token);
        // A waiter that disconnects is forgotten: the next lease skips it.
        let mut leaving = conn_for(server, &key);
        leaving.send(&encode(&["FILLGET", &key]));
        sleep(LET_IT_PARK);
        let mut staying = conn_for(server, &key);
        staying.send(&encode(&["FILLGET", &key]));
        staying.expect_silence(STILL_BLOCKED);
        drop(leaving);
        sleep(LET_IT_PARK);
        let _ = token_of(&staying.read_reply());
        assert_eq!(waiter.cmd(&["FILLSET", &key, &next, "v"]), STALE);
        assert_eq!(waiter.cmd(&["DEL", &key]), b":0\r\n");
    }
}

#[test]
fn lease_holder_disconnects() {
    both_modes(a_departed_holder_is_replaced_at_expiry);
}

fn stale_tokens_and_other_writers(server: &Server) {
    for key in keys_per_shard("stale", server.shards) {
        let mut c = conn_for(server, &key);
        let made_up = "0123456789abcdef0123456789abcdef";
        assert_eq!(c.cmd(&["FILLSET", &key, made_up, "v"]), STALE);
        assert_eq!(c.cmd(&["FILLSET", &key, "x", "v"]), STALE);
        assert_eq!(c.cmd(&["EXISTS", &key]), b":0\r\n");
        let token = token_of(&c.cmd(&["FILLGET", &key]));
        assert_eq!(c.cmd(&["FILLSET", &key, made_up, "v"]), STALE);
        // A waiter is answered by any write of the key; the lease ends with it.
        let mut waiter = conn_for(server, &key);
        waiter.send(&encode(&["FILLGET", &key]));
        waiter.expect_silence(STILL_BLOCKED);
        let mut writer = conn_for(server, &key);
        assert_eq!(writer.cmd(&["SET", &key, "by-set"]), b"+OK\r\n");
        waiter.expect(&bulk("by-set"));
        assert_eq!(c.cmd(&["FILLSET", &key, &token, "v"]), STALE);
        assert_eq!(c.cmd(&["GET", &key]), bulk("by-set"));
        assert_eq!(c.cmd(&["DEL", &key]), b":1\r\n");
    }
}

#[test]
fn a_stale_token_is_rejected_and_stores_nothing() {
    both_modes(stale_tokens_and_other_writers);
}

fn reply_shapes(server: &Server) {
    for key in keys_per_shard("shape", server.shards) {
        let mut two = conn_for(server, &key);
        let mut three = conn_for(server, &key);
        let hello = three.cmd(&["HELLO", "3"]);
        assert!(hello.starts_with(b"%"), "{}", show(&hello));

        let lease = two.cmd(&["FILLGET", &key, "LEASE", "2500"]);
        let token = token_of(&lease);
        assert_eq!(token.len(), 32);
        let expected2 = [
            &b"*4\r\n$5\r\ntoken\r\n"[..],
            &bulk(&token),
            b"$5\r\nlease\r\n:2500\r\n",
        ]
        .concat();
        assert_eq!(lease, expected2);
        // WAIT 0: at once, "someone is filling": a null array.
        assert_eq!(two.cmd(&["FILLGET", &key, "WAIT", "0"]), b"*-1\r\n");
        assert_eq!(three.cmd(&["FILLGET", &key, "WAIT", "0"]), b"_\r\n");
        // A wait that runs out gets the same answer.
        let began = Instant::now();
        assert_eq!(two.cmd(&["FILLGET", &key, "WAIT", "200"]), b"*-1\r\n");
        assert!(began.elapsed() >= Duration::from_millis(190));
        assert_eq!(two.cmd(&["FILLSET", &key, &token, "v"]), b"+OK\r\n");
        assert_eq!(three.cmd(&["FILLGET", &key]), bulk("v"));
        assert_eq!(two.cmd(&["DEL", &key]), b":1\r\n");

        let lease = three.cmd(&["FILLGET", &key]);
        let token = token_of(&lease);
        let expected3 = [
            &b"%2\r\n$5\r\ntoken\r\n"[..],
            &bulk(&token),
            b"$5\r\nlease\r\n:10000\r\n",
        ]
        .concat();
        assert_eq!(lease, expected3);
        assert_eq!(
            three.cmd(&["FILLSET", &key, &token, "v", "PX", "5000"]),
            b"+OK\r\n"
        );
        assert_eq!(two.cmd(&["DEL", &key]), b":1\r\n");
    }
}

#[test]
fn wait_zero_and_reply_shapes_in_resp2_and_resp3() {
    both_modes(reply_shapes);
}

#[test]
fn command_docs_describe_both_commands() {
    let server = Server::ruvio(PortMode::Forward, 1);
    let mut c = server.raw();
    let docs = decode(&c.cmd(&["COMMAND", "DOCS", "fillget", "fillset"]));
    for name in ["fillget", "fillset"] {
        let doc = docs
            .get(name)
            .unwrap_or_else(|| panic!("{name} documented"));
        let summary = doc.get("summary").unwrap().text();
        assert!(summary.contains(&name.to_ascii_uppercase()), "{summary}");
        assert_eq!(doc.get("group").unwrap().text(), "string");
    }
    let info = c.cmd(&["COMMAND", "INFO", "fillget"]);
    assert!(contains(&info, b"blocking"), "{}", show(&info));
}
