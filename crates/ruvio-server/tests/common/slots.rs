//! Which shard owns a key: hash slots as Redis Cluster computes them (CRC16,
//! `{hash tags}`), Ruvio's contiguous slot ranges per shard, keys and tags
//! picked to land on a given shard, and a connection served by a given shard.
//! Apart from the server harness (`mod.rs`) because it is arithmetic over
//! keys that the tests of cross-shard paths share, written independently of
//! the server's own.

use super::{RawConn, Server, SLOT_COUNT};

/// Slots `[lo, hi)` owned by shard `i` of `n`: `[i*16384/n, (i+1)*16384/n)`.
pub fn shard_slot_range(i: usize, n: usize) -> (u16, u16) {
    let lo = i * SLOT_COUNT as usize / n;
    let hi = (i + 1) * SLOT_COUNT as usize / n;
    (lo as u16, hi as u16)
}

/// Shard of `n` that owns `slot`.
pub fn shard_of_slot(slot: u16, n: usize) -> usize {
    (0..n)
        .find(|&i| {
            let (lo, hi) = shard_slot_range(i, n);
            lo <= slot && slot < hi
        })
        .expect("slot below 16384")
}

/// CRC16 (XMODEM), written here independently of the server's.
pub fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// Hash slot of a key, honouring `{hash tags}`.
pub fn key_slot(key: &[u8]) -> u16 {
    let mut hashed = key;
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                hashed = &key[open + 1..open + 1 + len];
            }
        }
    }
    crc16(hashed) % SLOT_COUNT
}

/// Shard (of `n`) that owns `key`.
pub fn shard_of_key(key: &str, n: usize) -> usize {
    shard_of_slot(key_slot(key.as_bytes()), n)
}

/// The first key `prefix0`, `prefix1`, ... that lands on `shard` of `n`.
pub fn key_on_shard(prefix: &str, shard: usize, n: usize) -> String {
    (0..100_000)
        .map(|i| format!("{prefix}{i}"))
        .find(|k| shard_of_key(k, n) == shard)
        .expect("some key lands on every shard")
}

/// The first one-letter hash tag (`a` for `{a}`) whose keys land on `shard` of `n`.
pub fn hash_tag_on_shard(shard: usize, n: usize) -> String {
    (b'a'..=b'z')
        .map(|c| (c as char).to_string())
        .find(|t| shard_of_key(&format!("{{{t}}}"), n) == shard)
        .expect("a tag for every shard")
}

/// A new connection served by shard `shard` of a forward-mode `server` (which
/// spreads connections over its shards): connections are opened until DEBUG
/// SHARD (Ruvio's own) names it. After the first 50 misses each try waits a
/// little: on a loaded machine a shard may not listen yet when the first one
/// answers, and every connection goes to the others meanwhile (seen once in
/// tests/info_cpu.rs: 200 quick tries, none on shard 0).
pub fn conn_on_shard(server: &Server, shard: usize) -> RawConn {
    let wanted = format!(":{shard}\r\n");
    for attempt in 0..200 {
        let mut conn = server.raw();
        if conn.cmd(&["debug", "shard"]) == wanted.as_bytes() {
            return conn;
        }
        if attempt >= 50 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    panic!("no connection landed on shard {shard} in 200 tries");
}

/// One key per shard of `n`, named from `prefix` (`prefix0`, `prefix1` ...).
pub fn keys_per_shard(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|shard| key_on_shard(prefix, shard, n)).collect()
}

/// `per_shard` keys of each of 2 shards, `prefix0`, `prefix1` ... in order
/// (fresh when the prefix was never used).
pub fn fresh_keys(prefix: &str, per_shard: usize) -> [Vec<String>; 2] {
    fresh_keys_of(prefix, per_shard, 2)
        .try_into()
        .expect("two shards' keys")
}

/// `per_shard` keys `{prefix}{i}` on each of `shards` shards.
pub fn fresh_keys_of(prefix: &str, per_shard: usize, shards: usize) -> Vec<Vec<String>> {
    let mut fresh = vec![Vec::new(); shards];
    for i in 0.. {
        let key = format!("{prefix}{i}");
        let shard = shard_of_key(&key, shards);
        if fresh[shard].len() < per_shard {
            fresh[shard].push(key);
        }
        if fresh.iter().all(|keys| keys.len() == per_shard) {
            break;
        }
    }
    fresh
}
