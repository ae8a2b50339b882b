//! Property test of dispatch and forwarding: arbitrary pipelines of the commands that
//! exist (blocking ones with tiny timeouts, multi-key ones spanning both shards,
//! wrong arities, unknown commands, CLIENT REPLY switches, database changes) go to a
//! two-shard server in forward mode. Every request must get exactly one reply, in
//! order (a unique ECHO after the pipeline must come back right after the last
//! reply), the connection must stay usable, and no shard may die (a fresh
//! connection to each shard answers PING afterwards).

mod common;

use common::*;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

/// Keys on both shards, and a hash-tagged pair that stays on one.
const KEYS: &[&str] = &["a", "b", "c", "d", "e", "{t}x", "{t}y"];

fn key() -> impl Strategy<Value = String> {
    prop::sample::select(KEYS).prop_map(str::to_string)
}

fn keys(max: usize) -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(key(), 1..=max)
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{0,6}",
        (-5i64..50).prop_map(|n| n.to_string()),
        Just("x".repeat(100)),
    ]
}

fn words(w: &[&str]) -> Vec<String> {
    w.iter().map(|s| s.to_string()).collect()
}

fn with(head: &[&str], rest: Vec<String>) -> Vec<String> {
    let mut v = words(head);
    v.extend(rest);
    v
}

/// One request (CLIENT REPLY SKIP makes the next reply vanish, which the checker
/// models).
fn command() -> impl Strategy<Value = Vec<String>> {
    prop_oneof![
        (key(), value()).prop_map(|(k, v)| with(&["SET"], vec![k, v])),
        key().prop_map(|k| with(&["GET"], vec![k])),
        keys(4).prop_map(|ks| with(&["MGET"], ks)),
        (keys(3), value()).prop_map(|(ks, v)| {
            with(
                &["MSET"],
                ks.into_iter().flat_map(|k| [k, v.clone()]).collect(),
            )
        }),
        keys(3).prop_map(|ks| with(&["DEL"], ks)),
        keys(3).prop_map(|ks| with(&["EXISTS"], ks)),
        key().prop_map(|k| with(&["INCR"], vec![k])),
        (key(), value()).prop_map(|(k, v)| with(&["LPUSH"], vec![k, v])),
        (key(), value()).prop_map(|(k, v)| with(&["RPUSH"], vec![k, v])),
        key().prop_map(|k| with(&["RPOP"], vec![k])),
        key().prop_map(|k| with(&["LRANGE"], vec![k, "0".into(), "-1".into()])),
        key().prop_map(|k| with(&["BLPOP"], vec![k, "0.01".into()])),
        (key(), key())
            .prop_map(|(a, b)| with(&["LMOVE"], vec![a, b, "LEFT".into(), "RIGHT".into()])),
        Just(words(&["BLMOVE", "{t}x", "{t}y", "RIGHT", "LEFT", "0.01"])),
        (key(), value(), value()).prop_map(|(k, f, v)| with(&["HSET"], vec![k, f, v])),
        key().prop_map(|k| with(&["HGETALL"], vec![k])),
        key().prop_map(|k| with(&["TYPE"], vec![k])),
        (key(), key()).prop_map(|(a, b)| with(&["RENAME"], vec![a, b])),
        Just(words(&["DBSIZE"])),
        Just(words(&["KEYS", "*"])),
        Just(words(&["SCAN", "0", "COUNT", "3"])),
        Just(words(&["PING"])),
        Just(words(&["SELECT", "1"])),
        Just(words(&["SELECT", "0"])),
        Just(words(&["GET"])),
        Just(words(&["NOSUCHCOMMAND", "x"])),
        Just(words(&["CLIENT", "REPLY", "SKIP"])),
    ]
}

/// Replies the pipeline must produce: CLIENT REPLY SKIP hides itself and the next.
fn expected_replies(commands: &[Vec<String>]) -> usize {
    let mut expected = 0;
    let mut skip_next = false;
    for c in commands {
        let is_skip = c.len() == 3 && c[0] == "CLIENT" && c[2] == "SKIP";
        if is_skip {
            skip_next = true;
            continue;
        }
        if skip_next {
            skip_next = false;
        } else {
            expected += 1;
        }
    }
    expected
}

/// One generated pipeline against `server`: exactly one reply per request, then the
/// closing ECHO; the connection and every shard still answer.
fn check_pipeline(server: &Server, mut commands: Vec<Vec<String>>) -> Result<(), TestCaseError> {
    // A trailing SKIP would hide the closing ECHO; give it a command to hide.
    if commands
        .last()
        .is_some_and(|c| c.len() == 3 && c[2] == "SKIP")
    {
        commands.push(vec!["PING".to_string()]);
    }
    let mut conn = server.raw();
    let mut request = Vec::new();
    for c in &commands {
        request.extend(encode(c));
    }
    request.extend(encode(&["ECHO", "end-of-pipeline"]));
    conn.send(&request);
    for _ in 0..expected_replies(&commands) {
        conn.read_reply();
    }
    let last = conn.read_reply();
    prop_assert!(
        last == b"$15\r\nend-of-pipeline\r\n",
        "expected the closing ECHO, got {}",
        show(&last)
    );
    conn.roundtrip(&encode(&["PING"]), b"+PONG\r\n");
    for _ in 0..4 {
        server.raw().roundtrip(&encode(&["PING"]), b"+PONG\r\n");
    }
    Ok(())
}

#[test]
fn every_request_gets_exactly_one_reply() {
    // One server for every case, stopped when the test ends (a static would
    // outlive the test process's cleanup and leak the server).
    let server = Server::ruvio(PortMode::Forward, 2);
    let config = ProptestConfig {
        cases: 48,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let pipelines = prop::collection::vec(command(), 1..60);
    if let Err(e) = runner.run(&pipelines, |commands| check_pipeline(&server, commands)) {
        panic!("{e}");
    }
}
