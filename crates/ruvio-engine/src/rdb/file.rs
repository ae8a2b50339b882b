//! Loading a Redis RDB file (`dump.rdb`, versions 1 to 12) into one shard's
//! keyspace: the header, the opcodes around the keys (aux fields, SELECTDB,
//! RESIZEDB, expiry in seconds and milliseconds, LRU/LFU hints (kept as the
//! key's access clock under a matching policy, as Redis), Redis 7.4's slot
//! info; Redis 7 function libraries, loaded as FUNCTION LOAD would), each key's
//! object through [`super::decode`], and the CRC-64 trailer.
//!
//! Writing is split the same way: each shard writes its keys as a *section*
//! ([`write_section`]: SELECTDB, then per key its expiry opcode, type, key and
//! object), and [`assemble`] puts the header, the sections and the EOF/CRC-64
//! trailer together into one file Redis loads (a database may appear in several
//! sections; Redis's loader just switches database at each SELECTDB).
//!
//! Each shard reads the whole file and keeps the keys whose slot it owns (`keep`):
//! no keys cross threads at start, the shards load in parallel, and a file is
//! read once per shard (its bytes shared through the page cache).

use super::decode::{read_object, LoadError, Reader};
use super::encode::write_string;
use super::{build, CRC64, RDB_VERSION, RDB_VERSION_MAX};
use crate::keyspace::{write_entry, Entry};
use crate::values::rdb::{opcode, write_resize_db, write_select_db};
use crate::Engine;

/// What a load did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Loaded {
    /// Keys stored in this keyspace.
    pub keys: usize,
    /// Keys skipped as already expired.
    pub expired: usize,
    /// The file's replication aux fields (`repl-id`, `repl-offset`,
    /// `repl-stream-db`: where in its primary's stream the data is), as
    /// (name, value).
    pub repl_aux: Vec<(Vec<u8>, Vec<u8>)>,
}

fn corrupt(what: &str) -> String {
    format!("RDB file is corrupt: {what}")
}

fn explain(e: LoadError) -> String {
    match e {
        LoadError::Corrupt => corrupt("bad or truncated data"),
        LoadError::Module => "RDB file holds a module type, which Ruvio does not support".into(),
        LoadError::UnknownType(t) => corrupt(&format!("unknown object type {t}")),
    }
}

/// Keys read before they are stored: their index lookups start together
/// (`Db::prefetch`), so a load's cache misses overlap instead of coming one
/// after another (as the server's log replay batches its records).
const LOAD_BATCH: usize = 16;

/// Store the keys read so far (database, entry, expiry), each replacing a key of
/// the same name; returns how many.
fn store_batch(engine: &mut Engine, batch: &mut Vec<(usize, Entry, Option<u64>)>) -> usize {
    for (db, entry, _) in batch.iter() {
        engine.db(*db).prefetch(entry.key());
    }
    let stored = batch.len();
    for (db, entry, at) in batch.drain(..) {
        let keyspace = engine.db_mut(db);
        if let Some(old) = keyspace.find(entry.key()) {
            keyspace.remove(old);
        }
        let id = keyspace.insert(entry);
        if at.is_some() {
            keyspace.set_expire(id, at);
        }
    }
    stored
}

/// Load `file` into `engine`, storing only keys for which `keep(key)` is true.
/// Keys already expired at `now_ms` are skipped; a key in a database beyond the
/// configured count is an error, as in Redis.
pub fn load(
    engine: &mut Engine,
    file: &[u8],
    now_ms: u64,
    keep: impl Fn(&[u8]) -> bool,
) -> Result<Loaded, String> {
    if file.len() < 9 || &file[..5] != b"REDIS" {
        return Err("not an RDB file (no REDIS signature)".into());
    }
    let version: u16 = std::str::from_utf8(&file[5..9])
        .ok()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| corrupt("bad version"))?;
    if !(1..=RDB_VERSION_MAX).contains(&version) {
        return Err(format!(
            "RDB version {version} is not supported (at most {RDB_VERSION_MAX})"
        ));
    }
    let mut r = Reader::new(&file[9..]);
    let mut out = Loaded::default();
    let mut db = 0usize;
    let mut expire_at: Option<u64> = None;
    let (mut idle, mut freq): (Option<i64>, Option<i64>) = (None, None);
    let policy = engine.config().maxmemory_policy;
    let mut batch = Vec::with_capacity(LOAD_BATCH);
    loop {
        let op = r.u8().map_err(explain)?;
        match op {
            opcode::EOF => break,
            opcode::AUX => {
                let name = r.string().map_err(explain)?;
                let value = r.string().map_err(explain)?;
                if name.starts_with(b"repl-") {
                    out.repl_aux.push((name.into_owned(), value.into_owned()));
                }
            }
            opcode::RESIZEDB => {
                out.keys += store_batch(engine, &mut batch);
                let keys = r.len().map_err(explain)?;
                r.len().map_err(explain)?;
                // A hint: never more keys than the bytes left could hold (a key
                // takes at least 4), so a corrupt count reserves nothing absurd.
                let keys = usize::try_from(keys).unwrap_or(usize::MAX).min(r.remaining() / 4);
                engine.reserve_keys(db, keys);
            }
            opcode::SELECTDB => {
                let n = r.len().map_err(explain)?;
                db = usize::try_from(n)
                    .ok()
                    .filter(|&d| d < engine.db_count())
                    .ok_or_else(|| {
                        format!(
                            "RDB file uses database {n}, beyond the {} configured",
                            engine.db_count()
                        )
                    })?;
            }
            opcode::EXPIRETIME_MS => expire_at = Some(r.u64_le().map_err(explain)?),
            opcode::EXPIRETIME => {
                let secs = u32::from_le_bytes(r.take(4).map_err(explain)?.try_into().expect("4"));
                expire_at = Some(u64::from(secs) * 1000);
            }
            opcode::FREQ => freq = Some(i64::from(r.u8().map_err(explain)?)),
            opcode::IDLE => idle = Some(r.len().map_err(explain)?.min(i64::MAX as u64) as i64),
            opcode::SLOT_INFO => {
                // Redis 7.4 cluster nodes: slot id, keys, keys with expiry.
                for _ in 0..3 {
                    r.len().map_err(explain)?;
                }
            }
            opcode::FUNCTION2 => {
                let code = r.string().map_err(explain)?;
                crate::scripting::functions::load(&code, false).map_err(|e| {
                    format!("a function library does not load: {}", e.message())
                })?;
            }
            opcode::FUNCTION_PRE_GA => {
                return Err(
                    "RDB file holds function libraries of a Redis 7.0 release candidate, which Ruvio does not read".into(),
                )
            }
            opcode::MODULE_AUX => return Err(explain(LoadError::Module)),
            kind => {
                let key = r.string().map_err(explain)?;
                let value = read_object(&mut r, kind).map_err(explain)?;
                let at = expire_at.take();
                let clock = build::access_clock(policy, now_ms, idle.take(), freq.take());
                if !keep(&key) {
                    continue;
                }
                if at.is_some_and(|at| at <= now_ms) {
                    out.expired += 1;
                    continue;
                }
                let entry = build::entry(engine.config(), &key, value, clock).map_err(|_| {
                    corrupt(&format!(
                        "key {:?} does not load",
                        String::from_utf8_lossy(&key)
                    ))
                })?;
                batch.push((db, entry, at));
                if batch.len() == LOAD_BATCH {
                    out.keys += store_batch(engine, &mut batch);
                }
            }
        }
    }
    out.keys += store_batch(engine, &mut batch);
    let body_end = file.len() - r.remaining();
    if version >= 5 {
        let sum = r.take(8).map_err(|_| corrupt("missing checksum"))?;
        let sum = u64::from_le_bytes(sum.try_into().expect("8"));
        if sum != 0 && sum != CRC64.checksum(&file[..body_end]) {
            return Err(corrupt("checksum mismatch"));
        }
    }
    Ok(out)
}

/// This shard's keys as one section of an RDB file (keys already expired at
/// `now_ms` left out), and the RDB version its objects need; an error naming a key
/// whose type cannot be written yet (a stream).
pub fn write_section(engine: &Engine, now_ms: u64) -> Result<(Vec<u8>, u16), String> {
    write_section_where(engine, now_ms, |_| true)
}

/// As [`write_section`], with only the keys for which `keep(key)` is true (a
/// shard's keys sorted out to new owners when the shard count changes).
pub fn write_section_where(
    engine: &Engine,
    now_ms: u64,
    keep: impl Fn(&[u8]) -> bool,
) -> Result<(Vec<u8>, u16), String> {
    let mut out = Vec::new();
    let mut version = RDB_VERSION;
    let clock = engine.config().clock_rules();
    for db in 0..engine.db_count() {
        let keyspace = engine.db(db);
        if keyspace.is_empty() {
            continue;
        }
        let mark = out.len();
        write_select_db(&mut out, db);
        write_resize_db(&mut out, keyspace.len(), keyspace.volatile_len());
        let keys_at = out.len();
        for (_, entry) in keyspace.iter().filter(|(_, e)| keep(e.key())) {
            version = version.max(write_entry(&mut out, entry, clock, now_ms)?);
        }
        if out.len() == keys_at {
            out.truncate(mark);
        }
    }
    Ok((out, version))
}

/// A whole RDB file from sections made by [`write_section`] (`version`: the
/// highest any of them needs).
pub fn assemble<'a>(sections: impl IntoIterator<Item = &'a [u8]>, version: u16) -> Vec<u8> {
    assemble_with_aux(sections, version, &[])
}

/// [`assemble`] with `aux` fields after the header ([`header_with_aux`]).
pub fn assemble_with_aux<'a>(
    sections: impl IntoIterator<Item = &'a [u8]>,
    version: u16,
    aux: &[(&[u8], &[u8])],
) -> Vec<u8> {
    let mut out = header_with_aux(version, aux);
    for section in sections {
        out.extend_from_slice(section);
    }
    out.push(opcode::EOF);
    let crc = CRC64.checksum(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The bytes an RDB file of `version` starts with: the signature and version
/// (at [`VERSION_AT`]), and Ruvio's version as an aux field.
pub fn header(version: u16) -> Vec<u8> {
    let mut out = format!("REDIS{version:04}").into_bytes();
    out.push(opcode::AUX);
    write_string(&mut out, b"ruvio-ver");
    write_string(&mut out, env!("CARGO_PKG_VERSION").as_bytes());
    out
}

/// [`header`], then `aux` fields (name, value), as Redis's replication fields
/// (`repl-id`, `repl-offset`, `repl-stream-db`) that say where in a primary's
/// stream the file's data is.
pub fn header_with_aux(version: u16, aux: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut out = header(version);
    for (name, value) in aux {
        out.push(opcode::AUX);
        write_string(&mut out, name);
        write_string(&mut out, value);
    }
    out
}

/// Where the four version digits sit in an RDB file.
pub const VERSION_AT: usize = 5;

/// The version digits of an RDB file (for a header written before the keys said
/// which version they need).
pub fn version_digits(version: u16) -> [u8; 4] {
    let digits = format!("{version:04}");
    digits.as_bytes().try_into().expect("four digits")
}

/// The `EOF` opcode that ends the keys; the checksum of everything up to and
/// including it follows as 8 bytes LE ([`Checksum`]).
pub const END_OF_KEYS: u8 = opcode::EOF;

/// Redis' CRC-64 of a file written piece by piece.
pub struct Checksum(crc::Digest<'static, u64, crc::Table<16>>);

impl Default for Checksum {
    fn default() -> Self {
        Checksum(CRC64.digest())
    }
}

impl Checksum {
    /// Account `bytes`, the next ones of the file.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The checksum of every byte accounted, as the file's trailer stores it.
    pub fn finish(self) -> [u8; 8] {
        self.0.finalize().to_le_bytes()
    }
}
