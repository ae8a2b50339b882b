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
