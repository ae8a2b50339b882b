//! The primary's side of Ruvio-to-Ruvio replication shard by shard (issue 31
//! case 3, forward mode): a link that says `REPLCONF ruvio-shard <i>/<n>` on a
//! connection that landed on shard i follows shard i's own history
//! (`replication::history`): its full sync holds shard i's keys only, its stream
//! shard i's writes only, and it continues with `+CONTINUE` from shard i's
//! backlog. A connection on another shard is told where it is (the replica
//! connects again), a replica of another shard count and per-shard mode are
//! refused (the replica keeps the single stream), and a redis-server replica
//! attached at the same time keeps the whole server's stream.

mod common;

use common::replication::*;
use common::*;
use std::collections::BTreeSet;

/// `count` keys of equal length on each of `n` shards (no name inside another,
/// so the RDB's bytes can be searched for them).
fn names(prefix: &str, n: usize, count: usize) -> Vec<Vec<String>> {
    let mut per_shard = vec![Vec::new(); n];
    for i in 0.. {
        let key = format!("{prefix}{i:06}");
        let shard = shard_of_key(&key, n);
        if per_shard[shard].len() < count {
            per_shard[shard].push(key);
        }
        if per_shard.iter().all(|keys| keys.len() == count) {
            return per_shard;
        }
    }
    unreachable!()
}

/// A connection that became the link for `shard` of `n` (opened again until
/// one lands on that shard, as the replica does).
fn link_for(primary: &Server, shard: usize, n: usize) -> RawConn {
    for _ in 0..500 {
        let mut r = primary.raw();
        let reply = r.cmd(&["REPLCONF", "ruvio-shard", &format!("{shard}/{n}")]);
        if reply == b"+OK\r\n" {
            return r;
        }
        let text = String::from_utf8_lossy(&reply);
        assert!(
            text.starts_with("-ERR ruvio-shard: this connection is on shard "),
            "{text}"
        );
    }
    panic!("no connection landed on shard {shard}");
}

/// PSYNC ? -1 on a link: its replid, the sync's offset and the RDB's bytes.
fn full_sync(r: &mut RawConn) -> (String, u64, Vec<u8>) {
    assert_eq!(
        r.cmd(&["REPLCONF", "capa", "eof", "capa", "psync2"]),
        b"+OK\r\n"
    );
    r.send(&encode(&["PSYNC", "?", "-1"]));
    let line = String::from_utf8(r.read_until(b"\r\n")).unwrap();
    let words: Vec<&str> = line.trim_end().split(' ').collect();
    assert_eq!(words[0], "+FULLRESYNC", "{line}");
    let eof = r.read_until(b"\r\n");
    let mark = eof[5..eof.len() - 2].to_vec();
    let rdb = r.read_until(&mark);
    // As a replica does once its RDB is loaded: the stream starts after it.
    r.send(&encode(&["REPLCONF", "ACK", words[2]]));
    (words[1].to_string(), words[2].parse().unwrap(), rdb)
}

/// The keys the stream's SETs name, read until `want` were all seen (`offset`
/// counts every byte read); a SET of a key not in `want` fails.
fn read_sets(r: &mut RawConn, want: &[String], offset: &mut u64, shard: usize) {
    let mut seen = BTreeSet::new();
    while seen.len() < want.len() {
        let frame = r.read_reply();
        *offset += frame.len() as u64;
        let Value::Array(words) = decode(&frame) else {
            panic!("not a command: {}", show(&frame));
        };
        let words: Vec<String> = words.iter().map(Value::text).collect();
        if words[0].eq_ignore_ascii_case("set") {
            assert!(
                want.contains(&words[1]),
                "shard {shard}'s link got {words:?}"
            );
            seen.insert(words[1].clone());
        }
    }
}

fn shard_links(n: usize) {
    let primary = Server::ruvio(PortMode::Forward, n);
    let mut c = primary.raw();
    let before = names("old", n, 20);
    for keys in &before {
        for key in keys {
            assert_eq!(c.cmd(&["SET", key, "v"]), b"+OK\r\n");
        }
    }
    // A redis-server replica of the whole server, beside the links.
    let replica = Server::redis();
    follow(&replica, &primary);

    let mut links = Vec::new();
    for (shard, keys) in before.iter().enumerate() {
        let mut link = link_for(&primary, shard, n);
        let (replid, offset, rdb) = full_sync(&mut link);
        for (other, others) in before.iter().enumerate() {
            for key in others {
                assert_eq!(
                    contains(&rdb, key.as_bytes()),
                    other == shard,
                    "shard {shard}'s RDB and {key} of shard {other}"
                );
            }
        }
        assert!(keys.iter().all(|k| contains(&rdb, k.as_bytes())));
        links.push((link, replid, offset));
    }
    let replids: BTreeSet<&String> = links.iter().map(|(_, id, _)| id).collect();
    assert_eq!(replids.len(), n, "a history per shard");

    // Writes to every shard: each link gets its shard's only.
    let after = names("new", n, 30);
    for i in 0..30 {
        for keys in &after {
            assert_eq!(c.cmd(&["SET", &keys[i], "w"]), b"+OK\r\n");
        }
    }
    for (shard, (link, _, offset)) in links.iter_mut().enumerate() {
        read_sets(link, &after[shard], offset, shard);
    }

    // Shard 0's link lost: a new one continues from shard 0's backlog.
    let (old, replid, offset) = links.remove(0);
    drop(old);
    let mut link = link_for(&primary, 0, n);
    link.send(&encode(&["PSYNC", &replid, &(offset + 1).to_string()]));
    let line = String::from_utf8(link.read_until(b"\r\n")).unwrap();
    assert!(line.starts_with("+CONTINUE"), "{line}");
    let more = names("more", n, 3);
    for keys in &more {
        for key in keys {
            c.cmd(&["SET", key, "x"]);
        }
    }
    let mut offset = offset;
    read_sets(&mut link, &more[0], &mut offset, 0);

    // The whole server's replica has everything.
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), b":1\r\n");
    compare_all(&primary, &replica, "beside the shard links");
}

#[test]
fn shard_links_of_2_shards() {
    if require_redis_server("shard_links_of_2_shards").is_none() {
        return;
    }
    shard_links(2);
}

#[test]
fn shard_links_of_4_shards() {
    if require_redis_server("shard_links_of_4_shards").is_none() {
        return;
    }
    shard_links(4);
}

/// Who may not have a shard link keeps the single stream: another shard count,
/// a per-shard mode node (each node is a primary of its own already), and a
/// redis-server, which does not know the option.
#[test]
fn shard_links_are_refused_elsewhere() {
    let primary = Server::ruvio(PortMode::Forward, 2);
    let mut c = primary.raw();
    assert_eq!(
        c.cmd(&["REPLCONF", "ruvio-shard", "0/3"]),
        b"-ERR ruvio-shard needs a forward-mode primary of 2 shards\r\n".to_vec()
    );
    assert_eq!(
        c.cmd(&["REPLCONF", "ruvio-shard", "2/2"]),
        b"-ERR ruvio-shard needs a forward-mode primary of 2 shards\r\n".to_vec()
    );
    let nodes = Server::ruvio(PortMode::PerShard, 2);
    assert_eq!(
        nodes.raw().cmd(&["REPLCONF", "ruvio-shard", "0/2"]),
        b"-ERR ruvio-shard needs a forward-mode primary of 2 shards\r\n".to_vec()
    );
    if require_redis_server("shard_links_are_refused_elsewhere").is_some() {
        let redis = Server::redis();
        assert_eq!(
            redis.raw().cmd(&["REPLCONF", "ruvio-shard", "0/2"]),
            b"-ERR Unrecognized REPLCONF option: ruvio-shard\r\n".to_vec()
        );
    }
}

/// A link for each of the `n` shards of `primary`, full-synced: each with
/// its stream's offset.
fn synced_links(primary: &Server, n: usize) -> Vec<(RawConn, u64)> {
    (0..n)
        .map(|shard| {
            let mut link = link_for(primary, shard, n);
            let (_, offset, _) = full_sync(&mut link);
            (link, offset)
        })
        .collect()
}

/// The commands of a stream up to and including the first that `last`
/// matches, each with the stream's offset at its end.
fn read_commands(
    r: &mut RawConn,
    offset: &mut u64,
    mut last: impl FnMut(&[String]) -> bool,
) -> Vec<(Vec<String>, u64)> {
    let mut commands = Vec::new();
    loop {
        let frame = r.read_reply();
        *offset += frame.len() as u64;
        let Value::Array(words) = decode(&frame) else {
            panic!("not a command: {}", show(&frame));
        };
        let words: Vec<String> = words.iter().map(Value::text).collect();
        let done = last(&words);
        commands.push((words, *offset));
        if done {
            return commands;
        }
    }
}

/// Where `name` (with arguments `args`) ends in `commands`.
fn end_of(commands: &[(Vec<String>, u64)], words: &[&str]) -> (usize, u64) {
    let at = commands
        .iter()
        .position(|(c, _)| c.iter().map(String::as_str).eq(words.iter().copied()))
        .unwrap_or_else(|| panic!("{words:?} in {commands:?}"));
    (at, commands[at].1)
}

/// Barrier records (docs/replication.md, "Ruvio to Ruvio shard by shard"):
/// shard 0 runs a transaction on its key and one of shard 1, between two
/// writes of shard 1's key by its owner. Shard 0's link gets `RUVIO BARRIER
/// 1 X` before the group's MULTI, X past shard 1's write before it; shard 1's
/// link gets `RUVIO BARRIER 0 Y` and the key's state (`RESTORE`) before its
/// write after the group, Y past the group's EXEC in shard 0's stream. The
/// server's one stream, which a redis-server replica reads, has neither.
#[test]
fn barrier_records_order_a_cross_shard_group() {
    let primary = Server::ruvio(PortMode::Forward, 2);
    let mut links = synced_links(&primary, 2);
    let mut single = primary.raw();
    let (_, mut single_offset, _) = full_sync(&mut single);
    let keys = keys_per_shard("barrier:", 2);
    let mut on_0 = conn_on_shard(&primary, 0);
    assert_eq!(on_0.cmd(&["SET", &keys[1], "1"]), b"+OK\r\n");
    on_0.cmd(&["MULTI"]);
    on_0.cmd(&["INCR", &keys[0]]);
    on_0.cmd(&["INCR", &keys[1]]);
    assert_eq!(on_0.cmd(&["EXEC"]), b"*2\r\n:1\r\n:2\r\n");
    assert_eq!(on_0.cmd(&["SET", &keys[1], "after"]), b"+OK\r\n");

    let (link_0, offset_0) = &mut links[0];
    let stream_0 = read_commands(link_0, offset_0, |c| c[0] == "EXEC");
    let (link_1, offset_1) = &mut links[1];
    let stream_1 = read_commands(link_1, offset_1, |c| c.len() > 2 && c[2] == "after");
    let barrier = |stream: &[(Vec<String>, u64)], shard: &str| -> (usize, u64) {
        let at = stream
            .iter()
            .position(|(c, _)| c[0] == "RUVIO" && c[1] == "BARRIER")
            .unwrap_or_else(|| panic!("no barrier in {stream:?}"));
        let words = &stream[at].0;
        assert_eq!(&words[..3], ["RUVIO", "BARRIER", shard], "{stream:?}");
        (at, words[3].parse().expect("an offset"))
    };
    let (at_0, x_1) = barrier(&stream_0, "1");
    let (multi, _) = end_of(&stream_0, &["MULTI"]);
    let (_, after_exec) = end_of(&stream_0, &["EXEC"]);
    assert!(at_0 < multi, "{stream_0:?}");
    let (at_1, x_0) = barrier(&stream_1, "0");
    let (_, after_before) = end_of(&stream_1, &["SET", &keys[1], "1"]);
    let (set_after, _) = end_of(&stream_1, &["SET", &keys[1], "after"]);
    assert!(at_1 < set_after, "{stream_1:?}");
    // The group's state of shard 1's key comes home with it: shard 1's link
    // applies it again after the barrier (a full sync of shard 0's link,
    // whose data is shard 0's keys only, cannot lose it).
    let restored = stream_1[at_1..set_after]
        .iter()
        .any(|(c, _)| c[0] == "RESTORE" && c[1] == keys[1]);
    assert!(restored, "{stream_1:?}");
    assert!(x_1 >= after_before, "{x_1} {after_before}: {stream_1:?}");
    assert!(x_0 >= after_exec, "{x_0} {after_exec}: {stream_0:?}");
    // The link's stream opens with where the server's stood at its cut
    // (`RUVIO OFFSET`, docs: "One offset"): nothing written yet.
    assert_eq!(stream_0[0].0, ["RUVIO", "OFFSET", "0"], "{stream_0:?}");

    let whole = read_commands(&mut single, &mut single_offset, |c| {
        c.len() > 2 && c[2] == "after"
    });
    assert!(
        whole.iter().all(|(c, _)| c[0] != "RUVIO"),
        "the server's stream: {whole:?}"
    );
    let restores = whole.iter().filter(|(c, _)| c[0] == "RESTORE").count();
    assert_eq!(restores, 2, "the group's only: {whole:?}");
    assert!(whole.iter().any(|(c, _)| c[0] == "EXEC"), "{whole:?}");
}

/// INFO's `master_sync_*` while both shard links receive their RDBs (a fake
/// primary that takes the links, starts a 1,000-byte RDB on each and sends
/// 10 bytes of it): one transfer of both, 2,000 bytes, 20 read, not the last
/// link's size with both links' bytes.
#[test]
fn a_transfer_on_shard_links_shows_in_info_as_one() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = listener.local_addr().expect("its address").port();
    let (primary, done) = fake_primary_starting_rdbs(listener, 2);
    let ruvio = Server::ruvio(PortMode::Forward, 2);
    let mut r = ruvio.raw();
    let port = port.to_string();
    assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", &port]), b"+OK\r\n");
    wait_for("10 bytes of each link's RDB", || {
        field(&mut r, "master_sync_read_bytes") == "20"
    });
    for (name, want) in [
        ("master_sync_in_progress", "1"),
        ("master_sync_total_bytes", "2000"),
        ("master_sync_left_bytes", "1980"),
        ("master_sync_perc", "1.00"),
    ] {
        assert_eq!(field(&mut r, name), want, "{name}");
    }
    drop(done);
    primary.join().expect("the fake primary");
}

/// The next command of a stream, its arguments as bytes (`offset` counts it).
fn read_args(r: &mut RawConn, offset: &mut u64) -> Vec<Vec<u8>> {
    let frame = r.read_reply();
    *offset += frame.len() as u64;
    let Value::Array(words) = decode(&frame) else {
        panic!("not a command: {}", show(&frame));
    };
    words
        .into_iter()
        .map(|word| match word {
            Value::Bulk(bytes) => bytes,
            other => panic!("not a bulk string: {other:?}"),
        })
        .collect()
}

/// A stream's commands up to and including the first that `last` matches.
fn read_args_until(
    r: &mut RawConn,
    offset: &mut u64,
    last: impl Fn(&[Vec<u8>]) -> bool,
) -> Vec<Vec<Vec<u8>>> {
    let mut commands = Vec::new();
    loop {
        let args = read_args(r, offset);
        let done = last(&args);
        commands.push(args);
        if done {
            return commands;
        }
    }
}

fn is_functions_record(args: &[Vec<u8>]) -> bool {
    args.len() == 3 && args[0] == b"RUVIO" && args[1] == b"FUNCTIONS"
}

fn function_dump(conn: &mut RawConn) -> Vec<u8> {
    match decode(&conn.cmd(&["FUNCTION", "DUMP"])) {
        Value::Bulk(payload) => payload,
        other => panic!("FUNCTION DUMP: {other:?}"),
    }
}

/// Function libraries on shard links (docs/replication.md, "Function
/// libraries on shard links"): a FUNCTION LOAD by a client of shard 0 is in
/// shard 0's link as it came, and shard 1's link gets the set shard 1 took,
/// `RUVIO FUNCTIONS <its FUNCTION DUMP>`, so each link carries its own
/// shard's libraries after its cut; a FUNCTION DELETE by a client of shard 1
/// the other way round. The server's one stream has each change once and no
/// `RUVIO` record.
#[test]
fn a_function_change_reaches_each_link_as_its_shards_libraries() {
    let primary = Server::ruvio(PortMode::Forward, 2);
    let mut links = synced_links(&primary, 2);
    let mut single = primary.raw();
    let (_, mut single_offset, _) = full_sync(&mut single);
    let code = "#!lua name=linklib\nredis.register_function('one', function() return 1 end)";
    let mut on_0 = conn_on_shard(&primary, 0);
    assert_eq!(on_0.cmd(&["FUNCTION", "LOAD", code]), b"$7\r\nlinklib\r\n");
    let loaded = function_dump(&mut on_0);
    let mut on_1 = conn_on_shard(&primary, 1);
    assert_eq!(function_dump(&mut on_1), loaded, "shard 1 took the set");

    let is_function = |args: &[Vec<u8>]| args[0] == b"FUNCTION";
    let (link_0, offset_0) = &mut links[0];
    let stream_0 = read_args_until(link_0, offset_0, is_function);
    assert_eq!(
        stream_0.last().unwrap(),
        &[&b"FUNCTION"[..], b"LOAD", code.as_bytes()]
    );
    assert!(!stream_0.iter().any(|a| is_functions_record(a)));
    let (link_1, offset_1) = &mut links[1];
    let stream_1 = read_args_until(link_1, offset_1, is_functions_record);
    assert_eq!(stream_1.last().unwrap()[2], loaded);
    assert!(!stream_1.iter().any(|a| is_function(a)));

    assert_eq!(on_1.cmd(&["FUNCTION", "DELETE", "linklib"]), b"+OK\r\n");
    let emptied = function_dump(&mut on_1);
    assert_eq!(function_dump(&mut on_0), emptied);
    let stream_1 = read_args_until(link_1, offset_1, is_function);
    assert_eq!(
        stream_1.last().unwrap(),
        &[&b"FUNCTION"[..], b"DELETE", b"linklib"]
    );
    let (link_0, offset_0) = &mut links[0];
    let stream_0 = read_args_until(link_0, offset_0, is_functions_record);
    assert_eq!(stream_0.last().unwrap()[2], emptied);

    let whole = read_args_until(&mut single, &mut single_offset, |a| {
        a[0] == b"FUNCTION" && a[1] == b"DELETE"
    });
    let functions: Vec<&Vec<Vec<u8>>> = whole.iter().filter(|a| is_function(a)).collect();
    assert_eq!(functions.len(), 2, "each change once: {whole:?}");
    assert_eq!(functions[0][1], b"LOAD");
    assert!(whole.iter().all(|a| a[0] != b"RUVIO"), "{whole:?}");
}

/// A script that reaches a key of another shard it did not declare, on a run
/// after one that reached none (the script is then known to stay on its
/// shard and runs without the script lock): with a replica attached it may
/// not take the lock mid-run (`may_lock_now` is off while a feed records), so
/// it starts over under the lock and borrows as a cross-shard group does.
/// Its records are ordered by barriers on both links as the group's in
/// `barrier_records_order_a_cross_shard_group` (docs/replication.md,
/// "Barrier records").
#[test]
fn a_script_reaching_an_undeclared_key_is_ordered_by_barriers() {
    let primary = Server::ruvio(PortMode::Forward, 2);
    let mut links = synced_links(&primary, 2);
    let keys = keys_per_shard("reach:", 2);
    let script = "return redis.call('INCR', ARGV[1])";
    let mut on_0 = conn_on_shard(&primary, 0);
    // Its first run reaches its own shard's key only.
    assert_eq!(
        on_0.cmd(&["EVAL", script, "1", &keys[0], &keys[0]]),
        b":1\r\n"
    );
    assert_eq!(on_0.cmd(&["SET", &keys[1], "1"]), b"+OK\r\n");
    assert_eq!(
        on_0.cmd(&["EVAL", script, "1", &keys[0], &keys[1]]),
        b":2\r\n"
    );
    assert_eq!(on_0.cmd(&["SET", &keys[1], "after"]), b"+OK\r\n");

    let (link_0, offset_0) = &mut links[0];
    let names_key_1 = |c: &[String]| c.len() > 1 && c[1] == keys[1];
    let stream_0 = read_commands(link_0, offset_0, names_key_1);
    let barrier_0 = stream_0
        .iter()
        .position(|(c, _)| c[..2] == ["RUVIO", "BARRIER"] && c[2] == "1");
    assert!(
        barrier_0.is_some_and(|at| at < stream_0.len() - 1),
        "{stream_0:?}"
    );
    let (link_1, offset_1) = &mut links[1];
    let stream_1 = read_commands(link_1, offset_1, |c| c.len() > 2 && c[2] == "after");
    let barrier_1 = stream_1
        .iter()
        .position(|(c, _)| c[..2] == ["RUVIO", "BARRIER"] && c[2] == "0")
        .unwrap_or_else(|| panic!("no barrier: {stream_1:?}"));
    let (set_before, _) = end_of(&stream_1, &["SET", &keys[1], "1"]);
    let (set_after, _) = end_of(&stream_1, &["SET", &keys[1], "after"]);
    assert!(
        set_before < barrier_1 && barrier_1 < set_after,
        "{stream_1:?}"
    );
    let restored = stream_1[barrier_1..set_after]
        .iter()
        .any(|(c, _)| c[0] == "RESTORE" && c[1] == keys[1]);
    assert!(restored, "{stream_1:?}");
}

/// The names of a link's commands up to and including its `count`-th `last`,
/// lower case, without the stream's own (SELECT, PING, REPLCONF, RUVIO ...);
/// fails after 10 s.
fn writes_until(r: &mut RawConn, offset: &mut u64, last: &str, count: usize) -> Vec<String> {
    let (mut seen, started) = (0, std::time::Instant::now());
    let commands = read_commands(r, offset, |words| {
        // The stream's own PINGs and marks never let a read time out.
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{count} {last} not in 10 s"
        );
        seen += usize::from(words[0].eq_ignore_ascii_case(last));
        seen == count
    });
    let own = ["select", "ping", "replconf", "ruvio"];
    commands
        .into_iter()
        .map(|(words, _)| words[0].to_ascii_lowercase())
        .filter(|name| !own.contains(&name.as_str()))
        .collect()
}

/// A FLUSHDB and, in the same loop iteration, a transaction of its shard:
/// the shard's link gets the FLUSHDB before the transaction's MULTI. (Its
/// mark stood where the group began and moved into it with the MULTI: a
/// replica on links ran the FLUSHDB at the EXEC, on every shard, and flushed
/// what its other links had applied since; seen as a lost key in
/// single_stream_beneath_shard_links.) A FLUSHDB inside a MULTI reaches
/// every shard's link (the other shards ran their parts as the server's own
/// client, whose commands were not recorded: the replica on links kept the
/// other shards' keys, and the single stream waited 2 s for the barrier).
#[test]
fn a_flushdb_next_to_a_transaction_reaches_every_link_in_its_place() {
    let primary = Server::ruvio(PortMode::Forward, 2);
    let mut links = synced_links(&primary, 2);
    let mut on_0 = conn_on_shard(&primary, 0);
    let (list, hash) = (key_on_shard("l:", 0, 2), key_on_shard("h:", 0, 2));
    // One write: shard 0 reads it in one loop iteration.
    let pipeline: Vec<u8> = [
        vec!["SELECT", "3"],
        vec!["FLUSHDB"],
        vec!["MULTI"],
        vec!["RPUSH", &list, "1"],
        vec!["HSET", &hash, "f", "1"],
        vec!["EXEC"],
    ]
    .iter()
    .flat_map(|words| encode(words))
    .collect();
    on_0.send(&pipeline);
    for _ in 0..6 {
        let reply = on_0.read_reply();
        assert!(!reply.starts_with(b"-"), "{}", show(&reply));
    }
    let (link, offset) = &mut links[0];
    assert_eq!(
        writes_until(link, offset, "exec", 1),
        ["flushdb", "multi", "rpush", "hset", "exec"]
    );
    // FLUSHDB inside a transaction: every shard runs it, every link gets it.
    let started = std::time::Instant::now();
    assert_eq!(on_0.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(on_0.cmd(&["RPUSH", &list, "2"]), b"+QUEUED\r\n");
    assert_eq!(on_0.cmd(&["FLUSHDB"]), b"+QUEUED\r\n");
    assert_eq!(on_0.cmd(&["HSET", &hash, "f", "2"]), b"+QUEUED\r\n");
    assert_eq!(on_0.cmd(&["EXEC"]), b"*3\r\n:2\r\n+OK\r\n:1\r\n");
    // It ran on the keys' states (the script lock's path): the FLUSHDB,
    // then the keys' new states as one group.
    let (link, offset) = &mut links[0];
    let names = writes_until(link, offset, "exec", 1);
    assert_eq!(names.len(), 5, "{names:?}");
    assert_eq!(names[..2], ["flushdb", "multi"], "{names:?}");
    assert!(names.contains(&"restore".into()) && names.contains(&"del".into()));
    let (link, offset) = &mut links[1];
    assert_eq!(
        writes_until(link, offset, "flushdb", 2),
        ["flushdb", "flushdb"]
    );
    // A single-stream replica got it without the barrier's 2 s give-up.
    let mut single = primary.raw();
    let (_, mut single_offset, _) = full_sync(&mut single);
    assert_eq!(on_0.cmd(&["SET", &list, "after"]), b"+OK\r\n");
    let names = writes_until(&mut single, &mut single_offset, "set", 1);
    assert_eq!(names, ["set"]);
    assert!(
        started.elapsed() < std::time::Duration::from_millis(1500),
        "{:?}: {}",
        started.elapsed(),
        primary.logs()
    );
    assert!(!primary.logs().contains("did not reach every shard"));
}
