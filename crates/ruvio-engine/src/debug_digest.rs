//! Redis's DEBUG DIGEST and DEBUG DIGEST-VALUE (debug.c's `computeDatasetDigest`
//! and `xorObjectDigest`): a SHA1-based digest of the data, equal for equal data
//! whatever the encodings and internal orders, so that test suites can compare a
//! dataset before and after a reload, a replication or a migration — and compare
//! Ruvio's with redis-server's. The digest must be Redis's bit for bit, so every
//! step follows debug.c: elements of ordered types (lists, streams) are mixed in
//! order, elements of unordered types (sets, hashes, sorted sets) are XORed in,
//! and keys are XORed into their database's part.

use crate::keyspace::Entry;
use crate::value::{StrRef, ValueRef};

/// A digest: SHA1's 20 bytes.
pub type Digest = [u8; 20];

/// Redis's object type codes (`OBJ_STRING` ...), which the digest mixes in.
fn type_code(value: &ValueRef<'_>) -> u32 {
    match value {
        ValueRef::Str(_) => 0,
        ValueRef::List(_) => 1,
        ValueRef::Set(_) => 2,
        ValueRef::ZSet(_) => 3,
        ValueRef::Hash(_) => 4,
        ValueRef::Stream(_) => 6,
    }
}

/// debug.c's `xorDigest`: XOR SHA1(`bytes`) into `digest`.
pub fn xor_digest(digest: &mut Digest, bytes: &[u8]) {
    let hash = sha1_smol::Sha1::from(bytes).digest().bytes();
    digest.iter_mut().zip(hash).for_each(|(d, h)| *d ^= h);
}

/// debug.c's `mixDigest`: XOR SHA1(`bytes`) in, then replace the digest by its own
/// SHA1 (so the order of mixed items matters).
pub fn mix_digest(digest: &mut Digest, bytes: &[u8]) {
    xor_digest(digest, bytes);
    *digest = sha1_smol::Sha1::from(&digest[..]).digest().bytes();
}

fn mix_str(digest: &mut Digest, s: StrRef<'_>) {
    let mut buf = itoa::Buffer::new();
    mix_digest(digest, s.bytes(&mut buf));
}

/// A score as Redis 7.0's digest prints it (`%.17g`).
fn mix_score(digest: &mut Digest, score: f64, scratch: &mut Vec<u8>) {
    scratch.clear();
    ruvio_resp::format_double_g17(score, scratch);
    mix_digest(digest, scratch);
}

/// debug.c's `xorObjectDigest`: the value's type and contents (and whether the
/// key expires) mixed into `digest`.
pub fn mix_value(digest: &mut Digest, value: ValueRef<'_>, expires: bool) {
    mix_digest(digest, &type_code(&value).to_be_bytes());
    let mut scratch = Vec::new();
    match value {
        ValueRef::Str(s) => mix_str(digest, s),
        ValueRef::List(list) => list.iter().for_each(|e| mix_digest(digest, e)),
        ValueRef::Set(set) => {
            let mut buf = itoa::Buffer::new();
            set.iter()
                .for_each(|m| xor_digest(digest, m.bytes(&mut buf)));
        }
        ValueRef::ZSet(zset) => {
            for (member, score) in zset.iter() {
                let mut element = [0u8; 20];
                mix_digest(&mut element, member);
                mix_score(&mut element, score, &mut scratch);
                xor_digest(digest, &element);
            }
        }
        ValueRef::Hash(hash) => {
            for f in hash.entries() {
                let mut element = [0u8; 20];
                mix_digest(&mut element, f.field);
                mix_digest(&mut element, f.value);
                xor_digest(digest, &element);
            }
        }
        ValueRef::Stream(stream) => {
            use crate::values::stream::id::StreamId;
            for entry in stream.range(StreamId::MIN, StreamId::MAX) {
                scratch.clear();
                scratch.extend_from_slice(format!("{}.{}", entry.id.ms, entry.id.seq).as_bytes());
                mix_digest(digest, &scratch);
                entry.fields().for_each(|f| mix_digest(digest, f));
            }
        }
    }
    if expires {
        xor_digest(digest, b"!!expire!!");
    }
}

/// DEBUG DIGEST-VALUE's digest of one key's value (all zeros when missing).
pub fn value_digest(entry: Option<&Entry>) -> Digest {
    let mut digest = [0u8; 20];
    if let Some(e) = entry {
        mix_value(&mut digest, e.value(), e.expire_at().is_some());
    }
    digest
}

/// One key's part of the dataset digest: its name mixed, then its value.
pub fn key_digest(entry: &Entry) -> Digest {
    let mut digest = [0u8; 20];
    mix_digest(&mut digest, entry.key());
    mix_value(&mut digest, entry.value(), entry.expire_at().is_some());
    digest
}

/// The part of the dataset digest one database contributes, before databases are
/// combined: each key's digest [`xor_digest`]ed in (`None` when it has no keys,
/// which Redis skips). XOR is commutative, so the parts of several shards XOR
/// together plainly.
pub fn database_part(entries: impl Iterator<Item = Digest>) -> Option<Digest> {
    let mut part: Option<Digest> = None;
    for d in entries {
        xor_digest(part.get_or_insert([0u8; 20]), &d);
    }
    part
}

/// debug.c's `computeDatasetDigest` from every database's part, in database order:
/// the database index mixed in, then its keys XORed in; empty databases skipped.
pub fn combine_databases(parts: impl Iterator<Item = (usize, Digest)>) -> Digest {
    let mut total = [0u8; 20];
    for (db, part) in parts {
        mix_digest(&mut total, &(db as u32).to_be_bytes());
        total.iter_mut().zip(part).for_each(|(a, b)| *a ^= b);
    }
    total
}

/// A digest as DEBUG prints it: 40 lower-case hex digits.
pub fn hex(digest: &Digest) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

impl crate::Engine {
    /// Every non-empty database's part of DEBUG DIGEST, in database order.
    pub fn digest_parts(&self) -> Vec<(usize, Digest)> {
        (0..self.db_count())
            .filter_map(|db| {
                database_part(self.db(db).iter().map(|(_, e)| key_digest(e))).map(|p| (db, p))
            })
            .collect()
    }

    /// DEBUG DIGEST-VALUE of `key` in database `db`, read without expiring it (as
    /// Redis reads the dict directly: a logically expired key still has a value).
    pub fn debug_value_digest(&self, db: usize, key: &[u8]) -> Digest {
        let d = self.db(db);
        value_digest(d.find(key).map(|id| d.entry(id)))
    }
}

/// What DEBUG says about one key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyReport {
    /// DEBUG OBJECT: the facts line.
    Object,
    /// DEBUG LISTPACK: a listpack's layout, printed to the server's output.
    Listpack,
    /// DEBUG QUICKLIST: a quicklist's nodes, printed to the server's output.
    Quicklist,
}

/// DEBUG OBJECT / LISTPACK / QUICKLIST on `key`: `None` when the key is not there
/// (OBJECT reads it without expiring it, as Redis reads its dict; the others skip
/// a logically expired key, as `objectCommandLookup` does), else the status reply
/// and what to print on the server's output, or Redis's error.
pub fn debug_key_report(
    engine: &crate::Engine,
    db: usize,
    key: &[u8],
    now_ms: u64,
    report: KeyReport,
) -> Option<Result<(String, Option<String>), &'static str>> {
    if report == KeyReport::Object {
        return debug_object_line(engine, db, key, now_ms).map(|line| Ok((line, None)));
    }
    let d = engine.db(db);
    let entry = d.entry(d.find(key)?);
    if entry.expire_at().is_some_and(|at| at <= now_ms) {
        return None;
    }
    let encoding = entry.encoding().name();
    let shown = String::from_utf8_lossy(key);
    Some(match report {
        KeyReport::Listpack if encoding != "listpack" => Err("ERR Not a listpack encoded object."),
        KeyReport::Listpack => {
            let text = format!(
                "{{listpack of key '{shown}', {} entries}}",
                listpack_entries(entry)
            );
            Ok((
                "Listpack structure printed on stdout".to_string(),
                Some(text),
            ))
        }
        KeyReport::Quicklist => match entry.value() {
            ValueRef::List(list) if encoding == "quicklist" => {
                let mut text = format!("{{quicklist of key '{shown}'}}");
                for (i, (count, bytes)) in list.node_shape().into_iter().enumerate() {
                    text.push_str(&format!(
                        "\n{{quicklist node {i}}} {{container : PACKED, count: {count}, sz: {bytes}}}"
                    ));
                }
                Ok((
                    "Quicklist structure printed on stdout".to_string(),
                    Some(text),
                ))
            }
            _ => Err("ERR Not a quicklist encoded object."),
        },
        KeyReport::Object => unreachable!("answered above"),
    })
}

/// Entries of a listpack-encoded value (elements, members with scores, fields
/// with values), for DEBUG LISTPACK's printout.
fn listpack_entries(entry: &Entry) -> usize {
    match entry.value() {
        ValueRef::List(l) => l.len(),
        ValueRef::Set(s) => s.len(),
        ValueRef::ZSet(z) => z.len() * 2,
        ValueRef::Hash(h) => h.len() * 2,
        ValueRef::Str(_) | ValueRef::Stream(_) => 0,
    }
}

/// DEBUG OBJECT's line for `key` of database `db` (Redis 7.0's fields, in its
/// order): where the value is, its refcount, encoding, the length of its RDB
/// serialization (without the type byte, as `rdbSavedObjectLen`), its LRU clock
/// and idle seconds, and for a quicklist its node figures. `None` when the key is
/// not there (read without expiring it, as Redis reads its dict).
fn debug_object_line(engine: &crate::Engine, db: usize, key: &[u8], now_ms: u64) -> Option<String> {
    let d = engine.db(db);
    let entry = d.entry(d.find(key)?);
    let value = entry.value();
    let mut serialized = Vec::new();
    crate::values::rdb::encode::write_object(&mut serialized, value);
    let address = match value {
        ValueRef::Str(_) => entry as *const Entry as usize,
        ValueRef::List(v) => v as *const _ as usize,
        ValueRef::Set(v) => v as *const _ as usize,
        ValueRef::ZSet(v) => v as *const _ as usize,
        ValueRef::Hash(v) => v as *const _ as usize,
        ValueRef::Stream(v) => v as *const _ as usize,
    };
    let clock = entry.clock();
    let idle = crate::clock::idle_seconds(crate::clock::clock_of(now_ms), clock);
    let mut line = format!(
        "Value at:{address:#x} refcount:{} encoding:{} serializedlength:{} lru:{clock} lru_seconds_idle:{idle}",
        entry.refcount(),
        entry.encoding().name(),
        serialized.len() - 1,
    );
    if let ValueRef::List(list) = value {
        let nodes = list.node_shape();
        if !nodes.is_empty() {
            let elements: usize = nodes.iter().map(|&(n, _)| n).sum();
            let bytes: usize = nodes.iter().map(|&(_, b)| b).sum();
            line.push_str(&format!(
                " ql_nodes:{} ql_avg_node:{:.2} ql_listpack_max:{} ql_compressed:0 ql_uncompressed_size:{bytes}",
                nodes.len(),
                elements as f64 / nodes.len() as f64,
                engine.config().list_max_listpack_size,
            ));
        }
    }
    Some(line)
}

impl crate::Engine {
    /// DEBUG RELOAD: every database written in its RDB form and read back into
    /// fresh databases, which replace these (as Redis saves, empties and loads its
    /// dump): encodings become what loading chooses, keys already expired are
    /// dropped, access clocks restart. Configuration, statistics, leases and the
    /// rest of the engine's state stay. Returns the keys loaded back.
    pub fn reload_through_rdb(&mut self, now_ms: u64) -> Result<usize, String> {
        let (section, version) = crate::rdb::file::write_section(self, now_ms)?;
        let file = crate::rdb::file::assemble([section.as_slice()], version);
        let mut fresh = crate::Engine::new(self.db_count());
        *fresh.config_mut() = *self.config();
        let loaded = crate::rdb::file::load(&mut fresh, &file, now_ms, |_| true)?;
        self.adopt_databases(fresh);
        Ok(loaded.keys)
    }
}

/// Longest key or value text DEBUG POPULATE formats: Redis formats into a
/// 128-byte buffer, so the text is cut at 127 bytes.
const POPULATE_TEXT_BYTES_MAX: usize = 127;

impl crate::Engine {
    /// DEBUG POPULATE: string keys `prefix:j` for j in `0..count` (those `keep`
    /// accepts: the shard's own in forward mode), each holding `value:j`, or with
    /// `value_bytes` that text cut or zero-padded to that length; a key that exists
    /// is left alone, as Redis's `debugCommand` does. Returns the keys added.
    pub fn debug_populate(
        &mut self,
        db: usize,
        now_ms: u64,
        count: u64,
        prefix: &[u8],
        value_bytes: usize,
        keep: impl Fn(&[u8]) -> bool,
    ) -> usize {
        let ctx = crate::command::ExecCtx::new(db, now_ms);
        let mut key = Vec::new();
        let mut value = Vec::new();
        let mut added = 0;
        for j in 0..count {
            let number = itoa::Buffer::new().format(j).to_owned();
            key.clear();
            key.extend_from_slice(prefix);
            key.push(b':');
            key.extend_from_slice(number.as_bytes());
            key.truncate(POPULATE_TEXT_BYTES_MAX);
            if !keep(&key) || self.lookup_write(&ctx, &key).is_some() {
                continue;
            }
            value.clear();
            value.extend_from_slice(b"value:");
            value.extend_from_slice(number.as_bytes());
            if value_bytes > 0 {
                value.resize(value_bytes, 0);
            }
            let stored = crate::keyspace::NewValue::Str {
                bytes: &value,
                raw: false,
            };
            self.set_key(&ctx, &key, None, stored, false);
            added += 1;
        }
        added
    }
}
