//! `list-compress-depth`: inner quicklist nodes compressed with LZF, as Redis
//! does. Every reply stays what it is without compression, so the same commands
//! on long compressible lists (reads and in-place changes in the middle: LINDEX,
//! LRANGE, LPOS, LSET, LINSERT, LREM, LTRIM, pops, DUMP/RESTORE) are compared with
//! redis-server at depths 1 and 2, Ruvio on 1 and 2 shards (keys on each shard).
//! CONFIG SET's errors for the parameter are Redis's too, and the compressed list
//! takes less memory than the same list uncompressed (MEMORY USAGE).

mod common;

use common::*;

/// Elements that compress (repeated text) and a few that do not.
fn element(i: usize) -> String {
    match i % 7 {
        0 => format!("{:x}", (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        _ => format!("job:{:06}:payload-payload-payload-payload", i % 300),
    }
}

/// Runs `args` and notes its reply.
fn say(out: &mut Vec<String>, conn: &mut RawConn, args: &[&str]) {
    let reply = conn.cmd(args);
    out.push(format!("{args:?}: {}", show(&reply)));
}

/// The transcript of the scenario on `conn`, with the lists at `keys`.
fn run(conn: &mut RawConn, keys: &[String], depth: &str) -> Vec<String> {
    let mut out = Vec::new();
    conn.cmd(&["flushall"]);
    say(
        &mut out,
        conn,
        &["config", "set", "list-compress-depth", depth],
    );
    say(&mut out, conn, &["config", "get", "list-compress-depth"]);
    for key in keys {
        let key = key.as_str();
        for chunk in (0..6000).collect::<Vec<usize>>().chunks(500) {
            let mut args = vec!["rpush".to_string(), key.to_string()];
            args.extend(chunk.iter().map(|&i| element(i)));
            let reply = conn.cmd(&args);
            out.push(format!("rpush {key} ..: {}", show(&reply)));
        }
        say(&mut out, conn, &["object", "encoding", key]);
        for index in ["0", "1", "2500", "3001", "-2", "-1", "5999"] {
            say(&mut out, conn, &["lindex", key, index]);
        }
        say(&mut out, conn, &["lrange", key, "2990", "3010"]);
        say(&mut out, conn, &["lrange", key, "-30", "-20"]);
        say(
            &mut out,
            conn,
            &[
                "lpos",
                key,
                "job:000150:payload-payload-payload-payload",
                "count",
                "5",
            ],
        );
        say(
            &mut out,
            conn,
            &["lset", key, "3000", "changed-in-the-middle"],
        );
        say(&mut out, conn, &["lindex", key, "3000"]);
        say(
            &mut out,
            conn,
            &[
                "linsert",
                key,
                "before",
                "changed-in-the-middle",
                "inserted",
            ],
        );
        say(
            &mut out,
            conn,
            &["linsert", key, "after", &element(4000), "after-4000"],
        );
        say(
            &mut out,
            conn,
            &[
                "lrem",
                key,
                "4",
                "job:000200:payload-payload-payload-payload",
            ],
        );
        say(
            &mut out,
            conn,
            &[
                "lrem",
                key,
                "-2",
                "job:000100:payload-payload-payload-payload",
            ],
        );
        say(&mut out, conn, &["lrange", key, "2995", "3005"]);
        say(&mut out, conn, &["llen", key]);
        say(&mut out, conn, &["lpop", key, "700"]);
        say(&mut out, conn, &["rpop", key, "700"]);
        say(&mut out, conn, &["ltrim", key, "100", "-100"]);
        say(&mut out, conn, &["lrange", key, "1000", "1010"]);
        let dump = conn.cmd(&["dump", key]);
        out.push(format!("dump: {}", show(&dump)));
        let restored = format!("{key}:restored");
        let Value::Bulk(payload) = decode(&dump) else {
            panic!("DUMP: {}", show(&dump));
        };
        let args: Vec<Vec<u8>> = vec![
            b"restore".to_vec(),
            restored.clone().into_bytes(),
            b"0".to_vec(),
            payload,
        ];
        let reply = conn.cmd(&args);
        out.push(format!("restore: {}", show(&reply)));
        say(&mut out, conn, &["lrange", &restored, "0", "20"]);
        say(&mut out, conn, &["llen", &restored]);
        say(&mut out, conn, &["lindex", &restored, "2000"]);
    }
    for bad in ["-1", "abc", "2147483648"] {
        say(
            &mut out,
            conn,
            &["config", "set", "list-compress-depth", bad],
        );
    }
    say(
        &mut out,
        conn,
        &["config", "set", "list-compress-depth", "0"],
    );
    out
}

#[test]
fn compressed_lists_answer_as_redis() {
    let Some(_) = require_redis_server("list_compression") else {
        return;
    };
    let redis = Server::redis();
    for depth in ["1", "2"] {
        let keys = vec!["list:a".to_string(), "list:b".to_string()];
        let expected = run(&mut redis.raw(), &keys, depth);
        for shards in [1, 2] {
            let ruvio = Server::ruvio(PortMode::Forward, shards);
            let keys: Vec<String> = (0..2)
                .map(|i| key_on_shard(&format!("list{i}:"), i % shards, shards))
                .collect();
            // The transcript names the keys: compare with Redis's under the same names.
            let mut named = run(&mut ruvio.raw(), &keys, depth);
            for line in named.iter_mut() {
                for (ours, theirs) in keys.iter().zip(["list:a", "list:b"]) {
                    *line = line.replace(ours.as_str(), theirs);
                }
            }
            assert_eq!(named, expected, "depth {depth}, {shards} shard(s)");
        }
    }
}

/// MEMORY USAGE of a compressible list: compressed at depth 1, about a third of
/// what it is uncompressed (or less).
#[test]
fn a_compressed_list_takes_less_memory() {
    let server = Server::ruvio(PortMode::Forward, 1);
    let mut conn = server.raw();
    let usage = |conn: &mut RawConn, depth: &str, key: &str| -> i64 {
        conn.cmd(&["config", "set", "list-compress-depth", depth]);
        for chunk in (0..20_000).collect::<Vec<usize>>().chunks(1000) {
            let mut args = vec!["rpush".to_string(), key.to_string()];
            args.extend(
                chunk
                    .iter()
                    .map(|&i| format!("job:{:06}:payload-payload", i % 300)),
            );
            conn.cmd(&args);
        }
        let reply = conn.cmd(&["memory", "usage", key, "samples", "0"]);
        String::from_utf8_lossy(&reply[1..reply.len() - 2])
            .parse()
            .unwrap()
    };
    let plain = usage(&mut conn, "0", "plain");
    let compressed = usage(&mut conn, "1", "compressed");
    assert!(
        compressed * 3 < plain,
        "compressed {compressed} bytes, plain {plain} bytes"
    );
}
