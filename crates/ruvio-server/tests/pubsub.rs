//! Pub/Sub: confirmations, messages and subscribed mode byte for byte (RESP2 and
//! RESP3), delivery and receiver counts across shards in both port modes, PUBSUB
//! and INFO server-wide, a publisher's order kept, the `redis` crate's PubSub,
//! Pub/Sub frames and tracking invalidations still sent under CLIENT REPLY OFF
//! and SKIP, and a differential run of subscribed-mode replies against
//! redis-server.

mod common;

use common::*;
use std::time::Duration;

/// `[word, name, count]` as a RESP2 array.
fn confirmation(word: &str, name: &str, count: i64) -> Vec<u8> {
    format!(
        "*3\r\n${}\r\n{word}\r\n${}\r\n{name}\r\n:{count}\r\n",
        word.len(),
        name.len()
    )
    .into_bytes()
}

fn message(channel: &str, payload: &str) -> Vec<u8> {
    encode(&["message", channel, payload])
}

fn pmessage(pattern: &str, channel: &str, payload: &str) -> Vec<u8> {
    encode(&["pmessage", pattern, channel, payload])
}

/// A RESP2 subscriber's whole session, on 1 and 2 shards (against Redis too).
fn resp2_session(server: &Server) {
    let mut sub = server.raw();
    sub.send(&encode(&["SUBSCRIBE", "news", "sport"]));
    sub.expect(&confirmation("subscribe", "news", 1));
    sub.expect(&confirmation("subscribe", "sport", 2));
    sub.send(&encode(&["PSUBSCRIBE", "n*"]));
    sub.expect(&confirmation("psubscribe", "n*", 3));
    // Subscribed: only (un)subscribing, PING, QUIT and RESET.
    sub.roundtrip(
        &encode(&["GET", "k"]),
        b"-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n",
    );
    sub.roundtrip(
        &encode(&["CLIENT", "ID"]),
        b"-ERR Can't execute 'client|id': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n",
    );
    sub.roundtrip(&encode(&["PING"]), b"*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    sub.roundtrip(
        &encode(&["PING", "hi"]),
        b"*2\r\n$4\r\npong\r\n$2\r\nhi\r\n",
    );
    let mut publisher = server.raw();
    assert_eq!(publisher.cmd(&["PUBLISH", "news", "rain"]), b":2\r\n");
    assert_eq!(publisher.cmd(&["PUBLISH", "nothing", "x"]), b":1\r\n");
    assert_eq!(publisher.cmd(&["PUBLISH", "other", "x"]), b":0\r\n");
    sub.expect(&message("news", "rain"));
    sub.expect(&pmessage("n*", "news", "rain"));
    sub.expect(&pmessage("n*", "nothing", "x"));
    sub.send(&encode(&["UNSUBSCRIBE", "news", "never"]));
    sub.expect(&confirmation("unsubscribe", "news", 2));
    sub.expect(&confirmation("unsubscribe", "never", 2));
    sub.send(&encode(&["PUNSUBSCRIBE"]));
    sub.expect(&confirmation("punsubscribe", "n*", 1));
    sub.send(&encode(&["UNSUBSCRIBE"]));
    sub.expect(&confirmation("unsubscribe", "sport", 0));
    // Nothing left: one confirmation with a null name.
    sub.roundtrip(
        &encode(&["UNSUBSCRIBE"]),
        b"*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n",
    );
    // Out of subscribed mode.
    sub.roundtrip(&encode(&["PING"]), b"+PONG\r\n");
    sub.roundtrip(&encode(&["GET", "k"]), b"$-1\r\n");
}

#[test]
fn resp2_subscribed_mode_one_shard() {
    resp2_session(&Server::forward(1));
}

#[test]
fn resp2_subscribed_mode_two_shards() {
    resp2_session(&Server::forward(2));
}

/// RESP3: confirmations and messages are pushes, mixed with ordinary replies; a
/// client receives what it publishes itself, before PUBLISH's count.
fn resp3_session(server: &Server) {
    let mut c = server.raw();
    c.cmd(&["HELLO", "3"]);
    c.send(&encode(&["SUBSCRIBE", "ch"]));
    c.expect(b">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n");
    c.roundtrip(&encode(&["SET", "k", "v"]), b"+OK\r\n");
    c.roundtrip(&encode(&["GET", "k"]), b"$1\r\nv\r\n");
    c.roundtrip(&encode(&["PING"]), b"+PONG\r\n");
    c.send(&encode(&["PUBLISH", "ch", "self"]));
    c.expect(b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$4\r\nself\r\n:1\r\n");
    let mut other = server.raw();
    assert_eq!(other.cmd(&["PUBLISH", "ch", "hi"]), b":1\r\n");
    c.expect(b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n");
    c.send(&encode(&["UNSUBSCRIBE", "ch"]));
    c.expect(b">3\r\n$11\r\nunsubscribe\r\n$2\r\nch\r\n:0\r\n");
    c.roundtrip(
        &encode(&["UNSUBSCRIBE"]),
        b">3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n",
    );
}

#[test]
fn resp3_pushes_one_shard() {
    resp3_session(&Server::forward(1));
}

#[test]
fn resp3_pushes_two_shards() {
    resp3_session(&Server::forward(2));
}

/// A RESP3 push frame of bulk strings.
fn push(parts: &[&str]) -> Vec<u8> {
    let mut frame = encode(parts);
    frame[0] = b'>';
    frame
}

/// A RESP3 confirmation push `[word, name, count]`.
fn push_confirmation(word: &str, name: &str, count: i64) -> Vec<u8> {
    let mut frame = confirmation(word, name, count);
    frame[0] = b'>';
    frame
}

/// CLIENT REPLY OFF and SKIP drop ordinary replies but not Pub/Sub's: confirmations
/// and messages still arrive, RESP3 pushes and RESP2 arrays alike, as Redis 7.0
/// sends every Pub/Sub frame as a push (`CLIENT_PUSHING`). Each dropped reply is
/// shown dropped by the next bytes being the following frame.
fn silenced_session(server: &Server) {
    let mut publisher = server.raw();
    let mut c = server.raw();
    c.cmd(&["HELLO", "3"]);
    c.send(&encode(&["CLIENT", "REPLY", "OFF"]));
    c.send(&encode(&["UNSUBSCRIBE"]));
    c.expect(b">3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n");
    c.send(&encode(&["SUBSCRIBE", "ch", "ch2"]));
    c.expect(&push_confirmation("subscribe", "ch", 1));
    c.expect(&push_confirmation("subscribe", "ch2", 2));
    assert_eq!(publisher.cmd(&["PUBLISH", "ch", "hi"]), b":1\r\n");
    c.expect(&push(&["message", "ch", "hi"]));
    c.send(&encode(&["PSUBSCRIBE", "c*"]));
    c.expect(&push_confirmation("psubscribe", "c*", 3));
    assert_eq!(publisher.cmd(&["PUBLISH", "ch", "hi2"]), b":2\r\n");
    c.expect(&push(&["message", "ch", "hi2"]));
    c.expect(&push(&["pmessage", "c*", "ch", "hi2"]));
    c.send(&encode(&["SSUBSCRIBE", "sch"]));
    c.expect(&push_confirmation("ssubscribe", "sch", 1));
    assert_eq!(publisher.cmd(&["SPUBLISH", "sch", "shi"]), b":1\r\n");
    c.expect(&push(&["smessage", "sch", "shi"]));
    // Its own publication arrives, PUBLISH's count does not; nor does PONG.
    c.send(&encode(&["PUBLISH", "ch", "self"]));
    c.send(&encode(&["PING"]));
    c.expect(&push(&["message", "ch", "self"]));
    c.expect(&push(&["pmessage", "c*", "ch", "self"]));
    c.send(&encode(&["UNSUBSCRIBE", "ch"]));
    c.expect(&push_confirmation("unsubscribe", "ch", 2));
    c.send(&encode(&["PUNSUBSCRIBE"]));
    c.expect(&push_confirmation("punsubscribe", "c*", 1));
    c.send(&encode(&["SUNSUBSCRIBE"]));
    c.expect(&push_confirmation("sunsubscribe", "sch", 0));
    c.send(&encode(&["GET", "k"]));
    c.roundtrip(&encode(&["CLIENT", "REPLY", "ON"]), b"+OK\r\n");
    // SKIP hides the next command's reply only, never its pushes.
    c.send(&encode(&["CLIENT", "REPLY", "SKIP"]));
    c.send(&encode(&["SUBSCRIBE", "me"]));
    c.expect(&push_confirmation("subscribe", "me", 2));
    c.roundtrip(&encode(&["PING"]), b"+PONG\r\n");
    c.send(&encode(&["CLIENT", "REPLY", "SKIP"]));
    c.send(&encode(&["PUBLISH", "me", "x"]));
    c.expect(&push(&["message", "me", "x"]));
    c.roundtrip(&encode(&["PING"]), b"+PONG\r\n");

    // RESP2: the same, and subscribed mode's PONG is dropped like any reply.
    let mut c = server.raw();
    c.send(&encode(&["CLIENT", "REPLY", "OFF"]));
    c.send(&encode(&["SUBSCRIBE", "r2"]));
    c.expect(&confirmation("subscribe", "r2", 1));
    c.send(&encode(&["PING"]));
    assert_eq!(publisher.cmd(&["PUBLISH", "r2", "m"]), b":1\r\n");
    c.expect(&message("r2", "m"));
    // Refused while subscribed, and the refusal dropped too.
    c.send(&encode(&["CLIENT", "REPLY", "ON"]));
    c.send(&encode(&["UNSUBSCRIBE"]));
    c.expect(&confirmation("unsubscribe", "r2", 0));
    c.send(&encode(&["UNSUBSCRIBE"]));
    c.expect(b"*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n");
    c.roundtrip(&encode(&["CLIENT", "REPLY", "ON"]), b"+OK\r\n");
    c.send(&encode(&["CLIENT", "REPLY", "SKIP"]));
    c.send(&encode(&["SUBSCRIBE", "r2"]));
    c.expect(&confirmation("subscribe", "r2", 1));
    c.roundtrip(&encode(&["PING"]), b"*2\r\n$4\r\npong\r\n$0\r\n\r\n");
}

/// A RESP3 tracking client under CLIENT REPLY OFF and SKIP still gets its
/// invalidations (keys on both shards), as Redis 7 delivers them; its replies
/// come back with REPLY ON.
fn silenced_invalidations(server: &Server) {
    let keys = keys_per_shard("silent-inv", server.shards.max(2));
    let (k, j) = (&keys[0], &keys[1]);
    let invalidate = |key: &str| format!(">2\r\n$10\r\ninvalidate\r\n*1\r\n{}", bulk(key));
    let mut writer = server.raw();
    writer.cmd(&["DEL", k, j]);
    let mut c = server.raw();
    c.cmd(&["HELLO", "3"]);
    c.roundtrip(&encode(&["CLIENT", "TRACKING", "ON"]), b"+OK\r\n");
    c.roundtrip(&encode(&["GET", k]), b"_\r\n");
    c.roundtrip(&encode(&["GET", j]), b"_\r\n");
    c.send(&encode(&["CLIENT", "REPLY", "OFF"]));
    writer.roundtrip(&encode(&["SET", k, "v"]), b"+OK\r\n");
    c.expect(invalidate(k).as_bytes());
    c.send(&encode(&["CLIENT", "REPLY", "SKIP"]));
    c.send(&encode(&["GET", j]));
    c.expect_silence(Duration::from_millis(150));
    c.roundtrip(&encode(&["CLIENT", "REPLY", "ON"]), b"+OK\r\n");
    c.roundtrip(&encode(&["GET", j]), b"_\r\n");
    writer.roundtrip(&encode(&["SET", j, "w"]), b"+OK\r\n");
    c.expect(invalidate(j).as_bytes());
}

#[test]
fn silenced_replies_keep_pushes_one_shard() {
    let server = Server::forward(1);
    silenced_session(&server);
    silenced_invalidations(&server);
}

#[test]
fn silenced_replies_keep_pushes_two_shards() {
    let server = Server::forward(2);
    silenced_session(&server);
    silenced_invalidations(&server);
}

/// RESET leaves subscribed mode and drops the subscriptions without a message.
#[test]
fn reset_drops_subscriptions() {
    let server = Server::forward(2);
    let mut sub = server.raw();
    sub.send(&encode(&["SUBSCRIBE", "a"]));
    sub.expect(&confirmation("subscribe", "a", 1));
    sub.roundtrip(&encode(&["RESET"]), b"+RESET\r\n");
    sub.roundtrip(&encode(&["GET", "k"]), b"$-1\r\n");
    let mut publisher = server.raw();
    assert_eq!(publisher.cmd(&["PUBLISH", "a", "x"]), b":0\r\n");
    assert_eq!(
        publisher.cmd(&["PUBSUB", "NUMSUB", "a"]),
        encode_numsub(&[("a", 0)])
    );
}

fn encode_numsub(pairs: &[(&str, i64)]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", pairs.len() * 2).into_bytes();
    for (name, n) in pairs {
        out.extend_from_slice(format!("${}\r\n{name}\r\n:{n}\r\n", name.len()).as_bytes());
    }
    out
}

/// Forward mode is one server: subscribers on every shard receive, PUBLISH counts
/// them all, PUBSUB, INFO and CLIENT LIST see them all; a closed subscriber is gone.
#[test]
fn forward_mode_counts_every_shard() {
    let server = Server::forward(2);
    // Connections spread over the shards by the kernel: sixteen land on both.
    let mut subs: Vec<RawConn> = (0..16).map(|_| server.raw()).collect();
    for s in subs.iter_mut() {
        s.send(&encode(&["SUBSCRIBE", "fan"]));
        s.expect(&confirmation("subscribe", "fan", 1));
    }
    subs[0].send(&encode(&["PSUBSCRIBE", "f*", "x*"]));
    subs[0].expect(&confirmation("psubscribe", "f*", 2));
    subs[0].expect(&confirmation("psubscribe", "x*", 3));
    subs[1].send(&encode(&["SSUBSCRIBE", "shardy"]));
    subs[1].expect(&confirmation("ssubscribe", "shardy", 1));
    let mut p = server.raw();
    assert_eq!(p.cmd(&["PUBLISH", "fan", "m"]), b":17\r\n");
    for s in subs.iter_mut() {
        s.expect(&message("fan", "m"));
    }
    subs[0].expect(&pmessage("f*", "fan", "m"));
    assert_eq!(p.cmd(&["SPUBLISH", "shardy", "s"]), b":1\r\n");
    subs[1].expect(&encode(&["smessage", "shardy", "s"]));
    assert_eq!(
        p.cmd(&["PUBSUB", "NUMSUB", "fan", "none"]),
        encode_numsub(&[("fan", 16), ("none", 0)])
    );
    assert_eq!(p.cmd(&["PUBSUB", "NUMPAT"]), b":2\r\n");
    assert_eq!(p.cmd(&["PUBSUB", "CHANNELS"]), encode(&["fan"]));
    assert_eq!(p.cmd(&["PUBSUB", "CHANNELS", "z*"]), b"*0\r\n");
    assert_eq!(p.cmd(&["PUBSUB", "SHARDCHANNELS"]), encode(&["shardy"]));
    assert_eq!(
        p.cmd(&["PUBSUB", "SHARDNUMSUB", "shardy"]),
        encode_numsub(&[("shardy", 1)])
    );
    assert_eq!(
        p.cmd(&["PUBSUB", "channels", "a", "b"]),
        b"-ERR unknown subcommand or wrong number of arguments for 'channels'. Try PUBSUB HELP.\r\n"
    );
    let info = p.cmd(&["INFO", "stats"]);
    for field in [
        &b"pubsub_channels:1\r\n"[..],
        b"pubsub_patterns:2\r\n",
        b"pubsubshard_channels:1\r\n",
    ] {
        assert!(contains(&info, field), "{}", show(&info));
    }
    let clients = p.cmd(&["CLIENT", "LIST"]);
    assert!(
        contains(&clients, b"flags=P db=0 sub=1 psub=2 ssub=0"),
        "{}",
        show(&clients)
    );
    assert!(
        contains(&clients, b"flags=P db=0 sub=1 psub=0 ssub=1"),
        "{}",
        show(&clients)
    );
    let pubsub_clients = p.cmd(&["CLIENT", "LIST", "TYPE", "pubsub"]);
    assert_eq!(
        String::from_utf8_lossy(&pubsub_clients)
            .matches("flags=P")
            .count(),
        16,
        "{}",
        show(&pubsub_clients)
    );
    let normal_clients = p.cmd(&["CLIENT", "LIST", "TYPE", "normal"]);
    assert!(
        !contains(&normal_clients, b"flags=P"),
        "{}",
        show(&normal_clients)
    );
    assert!(
        contains(&normal_clients, b"cmd=client|list"),
        "{}",
        show(&normal_clients)
    );
    // Only the publisher is a normal client, and it is skipped.
    assert_eq!(
        p.cmd(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]),
        b":0\r\n"
    );
    // Subscribers that go away leave no count behind.
    subs.truncate(8);
    wait_for_receivers(&mut p, 9);
    // CLIENT KILL TYPE pubsub reaches the subscribers of every shard.
    assert_eq!(p.cmd(&["CLIENT", "KILL", "TYPE", "pubsub"]), b":8\r\n");
    wait_for_receivers(&mut p, 0);
}

/// Publish to `fan` until `n` subscriptions receive it (closes are seen a moment later).
fn wait_for_receivers(p: &mut RawConn, n: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while p.cmd(&["PUBLISH", "fan", "later"]) != format!(":{n}\r\n").into_bytes() {
        assert!(
            std::time::Instant::now() < deadline,
            "still not {n} receivers"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One publisher's pipelined messages reach a subscriber in order, whichever
/// shard each is on.
#[test]
fn publisher_order_kept() {
    let server = Server::forward(2);
    let mut subs: Vec<RawConn> = (0..4).map(|_| server.raw()).collect();
    for s in subs.iter_mut() {
        s.send(&encode(&["SUBSCRIBE", "seq"]));
        s.expect(&confirmation("subscribe", "seq", 1));
    }
    let mut p = server.raw();
    let mut pipeline = Vec::new();
    for i in 0..500 {
        pipeline.extend_from_slice(&encode(&["PUBLISH", "seq", &i.to_string()]));
    }
    p.send(&pipeline);
    for _ in 0..500 {
        assert_eq!(p.read_reply(), b":4\r\n");
    }
    for s in subs.iter_mut() {
        for i in 0..500 {
            s.expect(&message("seq", &i.to_string()));
        }
    }
}

/// Per-shard mode is a Redis Cluster: PUBLISH reaches every node's subscribers and
/// counts the receiving node's; shard channels live on their slot's owner.
#[test]
fn per_shard_mode_as_a_cluster() {
    let server = Server::per_shard(2);
    let mut on0 = RawConn::connect(server.shard_port(0));
    let mut on1 = RawConn::connect(server.shard_port(1));
    on1.send(&encode(&["SUBSCRIBE", "bus"]));
    on1.expect(&confirmation("subscribe", "bus", 1));
    let mut p = RawConn::connect(server.shard_port(0));
    assert_eq!(p.cmd(&["PUBLISH", "bus", "hello"]), b":0\r\n");
    on1.expect(&message("bus", "hello"));
    on0.send(&encode(&["SUBSCRIBE", "bus"]));
    on0.expect(&confirmation("subscribe", "bus", 1));
    assert_eq!(p.cmd(&["PUBLISH", "bus", "again"]), b":1\r\n");
    on0.expect(&message("bus", "again"));
    on1.expect(&message("bus", "again"));
    // Shard channels: MOVED off their owner, CROSSSLOT across slots.
    let ch0 = key_on_shard("sc", 0, 2);
    let ch1 = key_on_shard("sc", 1, 2);
    let moved = on0.cmd(&["SSUBSCRIBE", &ch1]);
    let slot = key_slot(ch1.as_bytes());
    assert_eq!(
        moved,
        format!("-MOVED {slot} 127.0.0.1:{}\r\n", server.shard_port(1)).into_bytes()
    );
    assert_eq!(
        on0.cmd(&["SSUBSCRIBE", "{a}x", "{b}x"]),
        b"-CROSSSLOT Keys in request don't hash to the same slot\r\n"
    );
    on0.send(&encode(&["SSUBSCRIBE", &ch0]));
    on0.expect(&confirmation("ssubscribe", &ch0, 1));
    assert_eq!(p.cmd(&["SPUBLISH", &ch0, "s"]), b":1\r\n");
    on0.expect(&encode(&["smessage", &ch0, "s"]));
    let spub = p.cmd(&["SPUBLISH", &ch1, "s"]);
    assert!(spub.starts_with(b"-MOVED "), "{}", show(&spub));
}

/// The `redis` crate's PubSub over both shards.
#[test]
fn redis_crate_pubsub() {
    let server = Server::forward(2);
    let mut subscriber = server.client();
    let mut publisher = server.client();
    let mut pubsub = subscriber.as_pubsub();
    pubsub.subscribe("crate").unwrap();
    pubsub.psubscribe("cr*").unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let n: i64 = redis::cmd("PUBLISH")
        .arg("crate")
        .arg("payload")
        .query(&mut publisher)
        .unwrap();
    assert_eq!(n, 2);
    let first = pubsub.get_message().unwrap();
    assert_eq!(first.get_channel_name(), "crate");
    assert_eq!(first.get_payload::<String>().unwrap(), "payload");
    assert!(!first.from_pattern());
    let second = pubsub.get_message().unwrap();
    assert!(second.from_pattern());
    assert_eq!(second.get_pattern::<String>().unwrap(), "cr*");
}

/// The same subscribed-mode session on redis-server and on Ruvio (2 shards),
/// reply for reply. (PUBSUB HELP is left out: its last line is Redis 7.2's
/// "Print this help.", 7.0 says "Prints".)
#[test]
fn differential_subscribed_mode() {
    if require_redis_server("differential_subscribed_mode").is_none() {
        return;
    }
    let redis = Server::redis();
    let ruvio = Server::ruvio(PortMode::Forward, 2);
    // (connection, command, replies to read)
    let script: &[(usize, &[&str], usize)] = &[
        (0, &["SUBSCRIBE", "a", "b", "a"], 3),
        (0, &["PSUBSCRIBE", "a*", "c?"], 2),
        (0, &["SSUBSCRIBE", "s"], 1),
        (0, &["SET", "k", "v"], 1),
        (0, &["CONFIG", "GET", "port"], 1),
        (0, &["PUBSUB", "NUMPAT"], 1),
        (0, &["PING"], 1),
        (0, &["PING", "x"], 1),
        (0, &["PING", "x", "y"], 1),
        (0, &["SUBSCRIBE"], 1),
        (0, &["NOSUCH"], 1),
        (1, &["PUBLISH", "a", "1"], 1),
        (0, &[], 2),
        (1, &["PUBLISH", "b", "2"], 1),
        (0, &[], 1),
        (1, &["PUBLISH", "cd", "2"], 1),
        (0, &[], 1),
        (1, &["SPUBLISH", "s", "3"], 1),
        (0, &[], 1),
        (1, &["PUBSUB", "NUMSUB", "a", "b", "c"], 1),
        (1, &["PUBSUB", "SHARDNUMSUB", "s"], 1),
        (1, &["PUBSUB", "NUMPAT"], 1),
        (1, &["PUBSUB", "NOPE"], 1),
        (1, &["PUBLISH", "a"], 1),
        (0, &["SUNSUBSCRIBE", "s", "t"], 2),
        (0, &["PUNSUBSCRIBE", "a*"], 1),
        (0, &["PUNSUBSCRIBE", "c?"], 1),
        (0, &["UNSUBSCRIBE", "a"], 1),
        (0, &["UNSUBSCRIBE", "b"], 1),
        (0, &["UNSUBSCRIBE"], 1),
        (0, &["PUNSUBSCRIBE"], 1),
        (0, &["SUNSUBSCRIBE"], 1),
        (0, &["PING"], 1),
        (2, &["HELLO", "3"], 1),
        (2, &["SSUBSCRIBE", "s"], 1),
        (2, &["PSUBSCRIBE", "*"], 1),
        (2, &["PUBLISH", "z", "3"], 2),
        (2, &["SPUBLISH", "s", "4"], 2),
        (2, &["GET", "k"], 1),
        (2, &["PING"], 1),
        (2, &["PUNSUBSCRIBE", "*"], 1),
        (2, &["SUNSUBSCRIBE"], 1),
        (2, &["SUNSUBSCRIBE"], 1),
    ];
    let run = |server: &Server| -> Vec<(String, Vec<u8>)> {
        let mut conns: Vec<RawConn> = (0..3).map(|_| server.raw()).collect();
        let mut out = Vec::new();
        for &(c, command, replies) in script {
            if !command.is_empty() {
                conns[c].send(&encode(command));
            }
            for _ in 0..replies {
                let reply = conns[c].read_reply();
                // HELLO's reply carries the client id, which differs.
                if command.first() != Some(&"HELLO") {
                    out.push((format!("{c}: {command:?}"), reply));
                }
            }
        }
        out
    };
    let expected = run(&redis);
    let got = run(&ruvio);
    for ((command, want), (_, have)) in expected.iter().zip(&got) {
        assert_eq!(show(have), show(want), "after {command}");
    }
}
