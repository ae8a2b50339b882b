//! Changing the shard count between runs (docs/durability.md): a data directory
//! written by N' shards, started with N, has its keys moved to their new owners
//! before any shard starts.
//!
//! 1. **Stage**: for each old shard in turn, its keyspace is rebuilt as recovery
//!    does (its snapshot, then its log tail: a logged command may name several
//!    keys of that shard, so records cannot be sorted out one by one), and each
//!    key is appended to the staged snapshot of the new shard owning its slot,
//!    `<dir>/reshard-<N>/shard-<i>/snapshot-...rdb`, covering an empty log. One
//!    old shard's keyspace is in memory at a time; the staged files are written as
//!    they go (their checksums follow), then synced.
//! 2. **Mark**: `<dir>/reshard-<N>/complete` is written and synced last.
//! 3. **Swap**: each new shard's directory replaces the old one of the same
//!    number, the old shards beyond N are removed, the staging directory goes.
//!
//! A crash before the mark leaves the old files untouched (the next start drops
//! the staging directory and begins again); after it, the next start finishes
//! the swap, every step of which can be repeated.

use crate::cluster::topology::Topology;
use crate::config::Config;
use crate::persistence::wal::HandlerOf;
use ruvio_engine::rdb::file::{header, write_section_where, Checksum, END_OF_KEYS};
use ruvio_engine::rdb::RDB_VERSION;
use ruvio_wal::segment::{list_segments, shard_dir, shard_dirs};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The marker of a fully staged new layout.
const COMPLETE: &str = "complete";

/// Before the shards start: finish a swap a crash interrupted, then move the keys
/// when the directory holds another shard count than `cfg.shards` (each old
/// shard's log replayed through the handlers `handler_of` finds).
pub fn prepare(cfg: &Config, handler_of: HandlerOf) -> Result<(), String> {
    if !cfg.durability.logs() {
        return Ok(());
    }
    let dir = &cfg.dir;
    finish_interrupted(dir).map_err(|e| format!("data directory {}: {e}", dir.display()))?;
    let Some(stored) = stored_shards(dir)? else {
        return Ok(());
    };
    if stored == cfg.shards {
        return Ok(());
    }
    eprintln!(
        "ruvio: {} holds the data of {stored} shards; moving the keys to {} shards",
        dir.display(),
        cfg.shards
    );
    let staging = staging_dir(dir, cfg.shards);
    remove_dir_if_any(&staging).map_err(|e| format!("{}: {e}", staging.display()))?;
    stage(cfg, stored, &staging, handler_of)?;
    mark_complete(&staging).map_err(|e| format!("{}: {e}", staging.display()))?;
    swap(dir, &staging, cfg.shards).map_err(|e| format!("{}: {e}", dir.display()))?;
    eprintln!("ruvio: keys moved to {} shards", cfg.shards);
    Ok(())
}

fn staging_dir(dir: &Path, shards: usize) -> PathBuf {
    dir.join(format!("reshard-{shards}"))
}

/// How many shards wrote the data in `dir`: one past the highest shard directory
/// holding a log segment or a snapshot; `None` for a fresh directory.
fn stored_shards(dir: &Path) -> Result<Option<usize>, String> {
    let found = shard_dirs(dir).map_err(|e| format!("data directory {}: {e}", dir.display()))?;
    let holds_data = |i: &usize| {
        let shard = shard_dir(dir, *i);
        let segments = list_segments(&shard).is_ok_and(|s| !s.is_empty());
        segments || crate::persistence::wal::has_snapshot(&shard)
    };
    Ok(found.into_iter().filter(holds_data).max().map(|i| i + 1))
}

/// A new shard's staged snapshot, written as the old shards are read.
struct Staged {
    file: File,
    path: PathBuf,
    checksum: Checksum,
    version: u16,
}

impl Staged {
    fn create(staging: &Path, shard: usize) -> std::io::Result<Staged> {
        let dir = shard_dir(staging, shard);
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(crate::persistence::wal::snapshot_name(1, 0));
        let mut staged = Staged {
            file: File::create(&path)?,
            path,
            checksum: Checksum::default(),
            version: RDB_VERSION,
        };
        staged.append(&header(RDB_VERSION), RDB_VERSION)?;
        Ok(staged)
    }

    fn append(&mut self, bytes: &[u8], version: u16) -> std::io::Result<()> {
        self.checksum.update(bytes);
        self.version = self.version.max(version);
        self.file.write_all(bytes)
    }

    /// End of keys, checksum, fsync (file and directory).
    fn seal(mut self) -> std::io::Result<()> {
        self.append(&[END_OF_KEYS], RDB_VERSION)?;
        crate::persistence::snapshot::seal(&self.file, &self.path, self.version, self.checksum)?;
        let dir = self.path.parent().unwrap_or(Path::new("."));
        File::open(dir)?.sync_all()
    }
}

/// Write every new shard's snapshot from the old shards' data.
fn stage(
    cfg: &Config,
    old_shards: usize,
    staging: &Path,
    handler_of: HandlerOf,
) -> Result<(), String> {
    let io = |e: std::io::Error| format!("{}: {e}", staging.display());
    let topo = Topology::new(cfg);
    let mut staged: Vec<Staged> = (0..cfg.shards)
        .map(|i| Staged::create(staging, i))
        .collect::<Result<_, _>>()
        .map_err(io)?;
    let now = crate::clock::unix_ms();
    for old in 0..old_shards {
        let mut engine = crate::persistence::loading::empty_engine(cfg);
        crate::persistence::wal::recover(&mut engine, cfg, old, now, handler_of)?;
        for (new, out) in staged.iter_mut().enumerate() {
            let (section, version) =
                write_section_where(&engine, now, |key| topo.key_owner(key) == new)?;
            out.append(&section, version).map_err(io)?;
        }
    }
    for out in staged {
        out.seal().map_err(io)?;
    }
    File::open(staging).and_then(|d| d.sync_all()).map_err(io)
}

fn mark_complete(staging: &Path) -> std::io::Result<()> {
    let mut marker = File::create(staging.join(COMPLETE))?;
    marker.write_all(b"staged\n")?;
    marker.sync_all()?;
    File::open(staging)?.sync_all()
}

/// Put the staged layout of `shards` shards in place; every step can be repeated
/// after a crash.
fn swap(dir: &Path, staging: &Path, shards: usize) -> std::io::Result<()> {
    for i in 0..shards {
        let staged = shard_dir(staging, i);
        if staged.exists() {
            remove_dir_if_any(&shard_dir(dir, i))?;
            std::fs::rename(&staged, shard_dir(dir, i))?;
        }
    }
    for old in shard_dirs(dir)? {
        if old >= shards {
            remove_dir_if_any(&shard_dir(dir, old))?;
        }
    }
    File::open(dir)?.sync_all()?;
    remove_dir_if_any(staging)
}

/// Staging directories a crash left: complete ones are swapped in, others dropped
/// (the old files are still whole then).
fn finish_interrupted(dir: &Path) -> std::io::Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(shards) = name
            .to_str()
            .and_then(|n| n.strip_prefix("reshard-"))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        let staging = entry.path();
        if staging.join(COMPLETE).exists() {
            eprintln!("ruvio: finishing the move to {shards} shards an earlier start began");
            swap(dir, &staging, shards)?;
        } else {
            remove_dir_if_any(&staging)?;
        }
    }
    Ok(())
}

fn remove_dir_if_any(dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// A crash after the mark: the next start puts the staged layout in place,
    /// whichever swap steps had run (here: the first shard already moved).
    #[test]
    fn a_marked_staging_is_swapped_in_after_a_crash() {
        let dir = std::env::temp_dir().join(format!("ruvio-reshard-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let staging = staging_dir(&dir, 2);
        for old in 0..3 {
            std::fs::create_dir_all(shard_dir(&dir, old)).unwrap();
            std::fs::write(shard_dir(&dir, old).join("wal-0000000001.log"), b"old").unwrap();
        }
        // Shard 0 was swapped in before the crash; shard 1 still waits.
        std::fs::remove_dir_all(shard_dir(&dir, 0)).unwrap();
        std::fs::create_dir_all(shard_dir(&dir, 0)).unwrap();
        std::fs::write(shard_dir(&dir, 0).join("new"), b"").unwrap();
        std::fs::create_dir_all(shard_dir(&staging, 1)).unwrap();
        std::fs::write(shard_dir(&staging, 1).join("new"), b"").unwrap();
        mark_complete(&staging).unwrap();
        finish_interrupted(&dir).unwrap();
        assert_eq!(files(&dir), ["shard-0", "shard-1"]);
        assert_eq!(files(&shard_dir(&dir, 0)), ["new"]);
        assert_eq!(files(&shard_dir(&dir, 1)), ["new"]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
