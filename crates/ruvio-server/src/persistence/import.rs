//! `--import-rdb FILE`: a Redis dump.rdb loaded at start. Every shard reads the
//! file and keeps the keys whose slot it owns (ruvio_engine::rdb::file), before
//! it serves any client; a file that does not load stops the server with the
//! reason (a module type, a stream, corruption, a database beyond `databases`).
//!
//! With a log (`--durability everysec|always`) the file seeds an empty data
//! directory once, as Redis 7 with `appendonly yes` loads dump.rdb only when it
//! has no AOF yet and then writes its AOF base from it: a shard whose directory
//! holds no snapshot and no logged record loads the file and writes what it loaded
//! as its first snapshot, covering the empty log ([`snapshot_imported`], on the
//! loading thread while the shard answers -LOADING), so the keys outlive the file
//! and a crash; a shard whose directory holds its data does not load the file
//! again (that would bring back keys deleted since, and records logged after the
//! import would replay against the file's keys twice). Without a log the file is
//! loaded at every start.

use std::path::Path;

use ruvio_engine::Engine;
use ruvio_wal::segment::{list_segments, segment_name, shard_dir};

use crate::persistence::wal::{make_current, snapshot_name};

use crate::cluster::topology::Topology;
use crate::config::Config;

/// What a shard's import brought that its thread must take over once loaded.
#[derive(Debug, Default)]
pub struct Imported {
    /// The file's function libraries as a FUNCTION DUMP payload (`None`: it had none).
    pub libraries: Option<Vec<u8>>,
}

/// Shard `shard` loads the file to import, if there is one and, with a log, its
/// data directory holds nothing yet (the log says why when it does not).
pub fn wanted(cfg: &Config, shard: usize) -> bool {
    let Some(path) = &cfg.import_rdb else {
        return false;
    };
    if !cfg.durability.logs() {
        return true;
    }
    let dir = shard_dir(&cfg.dir, shard);
    if !holds_data(&dir) {
        return true;
    }
    eprintln!(
        "ruvio: shard {shard}: {} holds this shard's data: {} is not imported again",
        dir.display(),
        path.display()
    );
    false
}

/// A snapshot, or a log segment with anything in it (an empty one is what a start
/// that ended before its import's snapshot leaves).
fn holds_data(dir: &Path) -> bool {
    let segment_written =
        |n: &u64| std::fs::metadata(dir.join(segment_name(*n))).is_ok_and(|m| m.len() > 0);
    crate::persistence::wal::has_snapshot(dir)
        || list_segments(dir)
            .unwrap_or_default()
            .iter()
            .any(segment_written)
}

/// With a log, on the loading thread: the keyspace just imported into shard
/// `shard`'s empty directory becomes its snapshot covering the empty log
/// (position 1/0, where the log then starts; temp file, fsync, rename, directory
/// sync). Empty segments a start that ended before this left are removed first,
/// so the log starts afresh. Once this returns there is nothing else to recover.
pub fn snapshot_imported(engine: &Engine, cfg: &Config, shard: usize) -> Result<(), String> {
    let dir = shard_dir(&cfg.dir, shard);
    let failed = |e: std::io::Error| {
        format!(
            "the snapshot of the imported file in {}: {e}",
            dir.display()
        )
    };
    std::fs::create_dir_all(&dir).map_err(failed)?;
    for n in list_segments(&dir).map_err(failed)? {
        std::fs::remove_file(dir.join(segment_name(n))).map_err(failed)?;
    }
    let (section, version) =
        ruvio_engine::rdb::file::write_section(engine, crate::clock::unix_ms())?;
    let file = ruvio_engine::rdb::file::assemble([section.as_slice()], version);
    let tmp = dir.join(format!("{}.tmp", snapshot_name(1, 0)));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        std::io::Write::write_all(&mut f, &file)?;
        f.sync_all()?;
        make_current(&tmp, &dir, (1, 0))
    };
    write().map_err(failed)
}

/// Load `path` into shard `shard`'s `engine`.
pub fn load_rdb(
    engine: &mut Engine,
    path: &Path,
    shard: usize,
    topo: &Topology,
) -> std::io::Result<()> {
    let bytes = std::fs::read(path).map_err(|e| {
        std::io::Error::new(e.kind(), format!("--import-rdb {}: {e}", path.display()))
    })?;
    let now_ms = crate::clock::unix_ms();
    let loaded =
        ruvio_engine::rdb::file::load(engine, &bytes, now_ms, |key| topo.key_owner(key) == shard)
            .map_err(|e| std::io::Error::other(format!("--import-rdb {}: {e}", path.display())))?;
    eprintln!(
        "shard {shard}: loaded {} keys from {} ({} already expired)",
        loaded.keys,
        path.display(),
        loaded.expired
    );
    Ok(())
}

/// After [`load_rdb`] on this thread: what the shard's thread must take over. The
/// engine keeps one set of function libraries per thread, so a file loaded on a
/// loading thread hands its libraries to the shard's thread this way.
pub fn imported() -> Imported {
    use ruvio_engine::scripting::functions;
    Imported {
        libraries: (functions::counts().0 > 0).then(functions::dump),
    }
}
