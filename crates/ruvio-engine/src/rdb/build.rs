//! Decoded elements made into Ruvio values under the engine's encoding
//! thresholds, as Redis converts a loaded object that is too big for its encoding.
//! Duplicates (set members, hash fields, sorted-set members) and NaN scores are
//! corrupt data, as in Redis's loader; so is an empty collection.

use super::decode::{HashField, LoadError, Loaded};
use crate::clock::{new_clock, EvictionPolicy, CLOCK_MASK};
use crate::engine::EngineConfig;
use crate::hashes::{HashLimits, HashValue, FIELD_EXPIRE_AT_MS_MAX};
use crate::keyspace::{Collection, Entry, NewValue};
use crate::lists::{End, ListValue};
use crate::sets::{SetLimits, SetValue};
use crate::zsets::{ZLimits, ZSetValue};

/// Longest text `tryObjectEncoding` turns into an integer.
const INT_TEXT_BYTES_MAX: usize = 20;

/// An entry for `key` holding `loaded` (no expiry; access clock `clock`).
pub fn entry(
    config: &EngineConfig,
    key: &[u8],
    loaded: Loaded,
    clock: u32,
) -> Result<Entry, LoadError> {
    let collection = match loaded {
        Loaded::Str(bytes) => {
            let value =
                match ruvio_resp::string2ll(&bytes).filter(|_| bytes.len() <= INT_TEXT_BYTES_MAX) {
                    Some(n) => NewValue::Int(n),
                    None => NewValue::Str {
                        bytes: &bytes,
                        raw: false,
                    },
                };
            return Ok(Entry::new(key, value, clock));
        }
        Loaded::List(elems) => Collection::List(list(config, &elems)?),
        Loaded::Set(members) => Collection::Set(set(config, &members)?),
        Loaded::ZSet(members) => Collection::ZSet(zset(config, &members)?),
        Loaded::Hash(fields) => Collection::Hash(hash(config, &fields)?),
        Loaded::Stream(stream) => Collection::Stream(super::stream::build_stream(*stream)?),
    };
    Ok(Entry::new_collection(key, collection, clock))
}

fn list(config: &EngineConfig, elems: &[Vec<u8>]) -> Result<ListValue, LoadError> {
    if elems.is_empty() {
        return Err(LoadError::Corrupt);
    }
    let mut list = ListValue::new();
    list.push_many(End::Tail, elems.iter().map(|e| &e[..]), config.list_shape());
    Ok(list)
}

fn set(config: &EngineConfig, members: &[Vec<u8>]) -> Result<SetValue, LoadError> {
    let first = members.first().ok_or(LoadError::Corrupt)?;
    let limits = SetLimits {
        intset_entries: config.set_max_intset_entries,
        listpack_entries: config.set_max_listpack_entries,
        listpack_value: config.set_max_listpack_value,
    };
    // Redis's loader (7.0 and 7.2 alike): more members than
    // `set-max-intset-entries` is a table from the start, whatever they are.
    let mut set = if members.len() > limits.intset_entries {
        SetValue::new_hashtable(members.len())
    } else {
        SetValue::create(first, members.len(), &limits)
    };
    for m in members {
        if !set.add(m, &limits) {
            return Err(LoadError::Corrupt);
        }
    }
    Ok(set)
}

fn zset(config: &EngineConfig, members: &[(Vec<u8>, f64)]) -> Result<ZSetValue, LoadError> {
    if members.is_empty() {
        return Err(LoadError::Corrupt);
    }
    let limits = ZLimits {
        entries: config.zset_max_listpack_entries,
        value: config.zset_max_listpack_value,
    };
    let longest = members.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
    let mut zset = ZSetValue::create(members.len(), longest, limits);
    for (member, score) in members {
        if score.is_nan() || zset.score(member).is_some() {
            return Err(LoadError::Corrupt);
        }
        zset.insert(member, *score, limits);
    }
    Ok(zset)
}

fn hash(config: &EngineConfig, fields: &[HashField]) -> Result<HashValue, LoadError> {
    if fields.is_empty() {
        return Err(LoadError::Corrupt);
    }
    let limits = HashLimits {
        listpack_entries_max: config.hash_max_listpack_entries,
        listpack_value_bytes_max: config.hash_max_listpack_value,
    };
    let mut hash = HashValue::new();
    for (field, value, expire_at) in fields {
        // Redis's loader refuses times past `EB_EXPIRE_TIME_MAX` (2^48 - 1); Ruvio
        // keeps to what its commands can set (2^46 - 1, the year 4199).
        if *expire_at > FIELD_EXPIRE_AT_MS_MAX as u64 {
            return Err(LoadError::Corrupt);
        }
        hash.convert_for_args([field, value], limits);
        if !hash.set(field, value, limits) {
            return Err(LoadError::Corrupt);
        }
        if *expire_at != 0 {
            hash.set_field_expire(field, *expire_at);
        }
    }
    Ok(hash)
}

/// A loaded key's access clock (`objectSetLRUOrLFU`): a FREQ counter under an LFU
/// policy, an IDLE time in seconds under an LRU one (RESTORE's options, an RDB
/// file's opcodes); otherwise a new key's clock.
pub fn access_clock(
    policy: EvictionPolicy,
    now_ms: u64,
    idle_seconds: Option<i64>,
    freq: Option<i64>,
) -> u32 {
    let fresh = new_clock(policy, now_ms);
    match (policy.is_lfu(), freq, idle_seconds) {
        (true, Some(freq), _) => (fresh & !0xff) | (freq as u32 & 0xff),
        (false, _, Some(idle)) => match u32::try_from(idle).ok().and_then(|i| fresh.checked_sub(i))
        {
            Some(at) => at,
            // An idle time past the clock's start: Redis's fallback.
            None => (fresh + CLOCK_MASK / 2) % CLOCK_MASK,
        },
        _ => fresh,
    }
}
