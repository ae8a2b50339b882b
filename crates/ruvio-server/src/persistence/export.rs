//! `DEBUG EXPORT-RDB path`: the keyspace written as one Redis RDB file that
//! redis-server 7 loads.
//!
//! Forward mode with several shards: the shard that received the command removes
//! stale parts, writes its own keys as `path.part-N` (ruvio_engine's
//! `rdb::file::write_section`), broadcasts the request (every other shard writes
//! its part when the broadcast reaches it), and once every shard has answered
//! (crate::mesh::gather's `AfterAll`, ordered behind the broadcast) it assembles header,
//! parts and the CRC-64 trailer into `path` (written as `path.tmp`, then renamed)
//! and removes the parts; the function libraries come first, from the assembling
//! shard. Per-shard mode writes the node's own keys, as a Redis
//! Cluster node saves its own dump. Like Redis's SAVE, each shard blocks while it
//! writes its part.

use std::path::PathBuf;

use ruvio_engine::Engine;

fn part_path(path: &str, shard: usize) -> PathBuf {
    PathBuf::from(format!("{path}.part-{shard}"))
}

/// Remove parts a failed earlier export may have left.
pub fn remove_parts(path: &str, shards: usize) {
    for shard in 0..shards {
        let _ = std::fs::remove_file(part_path(path, shard));
    }
}

/// Write this shard's keys as its part: the RDB version they need (u16 LE), then
/// the section.
pub fn write_part(engine: &Engine, now_ms: u64, shard: usize, path: &str) -> std::io::Result<()> {
    let (section, version) =
        ruvio_engine::rdb::file::write_section(engine, now_ms).map_err(std::io::Error::other)?;
    let mut bytes = Vec::with_capacity(section.len() + 2);
    bytes.extend_from_slice(&version.to_le_bytes());
    bytes.extend_from_slice(&section);
    std::fs::write(part_path(path, shard), bytes)
}

/// Put the parts of `shards` together into `path`, then remove them.
pub fn assemble(path: &str, shards: impl IntoIterator<Item = usize> + Clone) -> Result<(), String> {
    let mut parts = Vec::new();
    for shard in shards.clone() {
        let bytes = std::fs::read(part_path(path, shard))
            .map_err(|e| format!("shard {shard} wrote no part: {e}"))?;
        if bytes.len() < 2 {
            return Err(format!("shard {shard} wrote a truncated part"));
        }
        parts.push(bytes);
    }
    let version = parts
        .iter()
        .map(|p| u16::from_le_bytes([p[0], p[1]]))
        .max()
        .unwrap_or(ruvio_engine::rdb::RDB_VERSION);
    // The function libraries (every shard holds the same) before the keys, as Redis.
    let functions = ruvio_engine::scripting::functions::rdb_records();
    let sections = std::iter::once(functions.as_slice()).chain(parts.iter().map(|p| &p[2..]));
    let file = ruvio_engine::rdb::file::assemble(sections, version);
    let tmp = format!("{path}.tmp");
    std::fs::write(&tmp, &file)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("cannot write {path}: {e}"))?;
    for shard in shards {
        let _ = std::fs::remove_file(part_path(path, shard));
    }
    Ok(())
}
