//! Shard discovery and key placement for cluster-aware runs.
//!
//! `CLUSTER SLOTS` tells which port owns which slot ranges (Ruvio in per-shard
//! mode answers it the same way a Redis Cluster does). A connection is bound to
//! one shard, and either its keys carry a hash tag that shard owns, or it only
//! draws key numbers whose keys hash to that shard, so no request is redirected.

use crate::reply::Value;
use crate::transport::Connector;

/// Hash slots in a Redis Cluster.
const SLOTS: usize = 16384;

/// Redis Cluster's hash slot of a key, shared with the server so the two can
/// never disagree about where a key lives.
pub use ruvio_engine::slot::key_slot;

/// One shard: where to connect and which slots it owns (inclusive ranges).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    /// Host as reported (empty means the host we asked).
    pub host: String,
    /// Port of the shard's primary.
    pub port: u16,
    /// Owned slot ranges.
    pub ranges: Vec<(u16, u16)>,
}

impl Shard {
    /// True when `slot` belongs to this shard.
    pub fn owns(&self, slot: u16) -> bool {
        self.ranges.iter().any(|&(lo, hi)| lo <= slot && slot <= hi)
    }
}

/// Send one command on a fresh blocking connection (plain or TLS, as the load's)
/// and decode its reply.
pub fn command(
    connector: &Connector,
    host: &str,
    port: u16,
    args: &[&str],
) -> Result<Value, String> {
    connector.open(host, port)?.command(args)
}

/// Shards of the cluster `host:port` belongs to, sorted by port, primaries only.
pub fn discover(connector: &Connector, host: &str, port: u16) -> Result<Vec<Shard>, String> {
    let reply = command(connector, host, port, &["CLUSTER", "SLOTS"])?;
    let entries = match reply {
        Value::Array(entries) => entries,
        Value::Error(e) => return Err(format!("CLUSTER SLOTS: {e}")),
        other => return Err(format!("CLUSTER SLOTS: unexpected {other:?}")),
    };
    let mut shards: Vec<Shard> = Vec::new();
    for entry in entries {
        let (lo, hi, node_host, node_port) = parse_slot_entry(&entry)?;
        match shards
            .iter_mut()
            .find(|s| s.port == node_port && s.host == node_host)
        {
            Some(s) => s.ranges.push((lo, hi)),
            None => shards.push(Shard {
                host: node_host,
                port: node_port,
                ranges: vec![(lo, hi)],
            }),
        }
    }
    if shards.is_empty() {
        return Err("CLUSTER SLOTS returned no slots".into());
    }
    shards.sort_by_key(|s| s.port);
    Ok(shards)
}

/// One `[lo, hi, [host, port, id, ...], replicas...]` entry.
fn parse_slot_entry(entry: &Value) -> Result<(u16, u16, String, u16), String> {
    let bad = || format!("CLUSTER SLOTS: malformed entry {entry:?}");
    let Value::Array(items) = entry else {
        return Err(bad());
    };
    let (Some(lo), Some(hi), Some(Value::Array(node))) = (
        items.first().and_then(Value::as_int),
        items.get(1).and_then(Value::as_int),
        items.get(2),
    ) else {
        return Err(bad());
    };
    let host = match node.first() {
        Some(Value::Bytes(h)) => String::from_utf8_lossy(h).into_owned(),
        _ => String::new(),
    };
    let port = node.get(1).and_then(Value::as_int).ok_or_else(bad)?;
    Ok((lo as u16, hi as u16, host, port as u16))
}

/// The shortest decimal hash tag whose slot the shard owns.
pub fn tag_for(shard: &Shard) -> String {
    (0u32..)
        .map(|n| n.to_string())
        .find(|t| shard.owns(key_slot(t.as_bytes())))
        .expect("every shard owns at least one slot")
}

/// For each shard, the key numbers in `0..keyspace` whose key (built by `key_of`)
/// hashes into it: computed once so the hot path never hashes.
pub fn owned_numbers(
    shards: &[Shard],
    keyspace: u64,
    key_of: impl Fn(u64) -> Vec<u8>,
) -> Vec<Vec<u32>> {
    let mut owner = vec![usize::MAX; SLOTS];
    for (i, s) in shards.iter().enumerate() {
        for &(lo, hi) in &s.ranges {
            owner[lo as usize..=hi as usize].fill(i);
        }
    }
    let mut out = vec![Vec::new(); shards.len()];
    for n in 0..keyspace {
        let o = owner[key_slot(&key_of(n)) as usize];
        if o != usize::MAX {
            out[o].push(n as u32);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_shards() -> Vec<Shard> {
        vec![
            Shard {
                host: String::new(),
                port: 1,
                ranges: vec![(0, 8191)],
            },
            Shard {
                host: String::new(),
                port: 2,
                ranges: vec![(8192, 16383)],
            },
        ]
    }

    #[test]
    fn slots_match_redis_cluster() {
        // Reference values: CLUSTER KEYSLOT on a Redis 7.0 cluster node.
        let reference: [(&[u8], u16); 6] = [
            (b"key:000000000000", 13053),
            (b"{42}x", 8000),
            (b"user:1000", 1649),
            (b"somekey", 11058),
            (b"a{b}c", 3300),
            (b"{}x", 10595),
        ];
        for (key, slot) in reference {
            assert_eq!(key_slot(key), slot, "{}", String::from_utf8_lossy(key));
        }
    }

    #[test]
    fn tags_land_on_their_shard() {
        for s in two_shards() {
            assert!(s.owns(key_slot(format!("{{{}}}key:1", tag_for(&s)).as_bytes())));
        }
    }

    #[test]
    fn owned_numbers_partition_the_space() {
        let shards = two_shards();
        let key = |n: u64| format!("key:{n:012}").into_bytes();
        let owned = owned_numbers(&shards, 1000, key);
        assert_eq!(owned[0].len() + owned[1].len(), 1000);
        for (i, nums) in owned.iter().enumerate() {
            for &n in nums {
                assert!(shards[i].owns(key_slot(&key(n as u64))));
            }
        }
    }

    #[test]
    fn parses_slot_entries() {
        let e = Value::Array(vec![
            Value::Int(0),
            Value::Int(5460),
            Value::Array(vec![Value::Bytes(b"127.0.0.1".to_vec()), Value::Int(7000)]),
        ]);
        assert_eq!(
            parse_slot_entry(&e).unwrap(),
            (0, 5460, "127.0.0.1".into(), 7000)
        );
    }
}
