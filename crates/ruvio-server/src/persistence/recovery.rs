//! Rebuilding a shard's keyspace at start: its newest snapshot loaded, then
//! the log's segments after it replayed in order through the engine's own
//! handlers ([`recover`]: a torn tail cut, damage in the middle refused unless
//! `--wal-truncate-corrupt`), and the snapshot files of the shard's directory
//! (their names, sealing one as current, the unfinished ones dropped). Apart
//! from `wal.rs` (appending and writing the log while the shard serves)
//! because it runs once, before the shard takes clients, and reads what the
//! running log and the snapshots wrote.

use crate::config::Config;
use crate::persistence::stream_mark::{Found, StreamMark};
use ruvio_engine::command::ExecCtx;
use ruvio_engine::{DistinctEstimate, Engine, EngineFn};
use ruvio_resp::{Args, OwnedArgs, Protocol, Reply};
use ruvio_wal::segment::{list_segments, segment_name, shard_dir};
use ruvio_wal::{read_log, record_keys, LogEnd, Record};
use std::fs::File;
use std::path::Path;

/// Replay reads this many records, starts the lookups of all their keys
/// (`Engine::prefetch`, back to back), then runs them: the index's and entries'
/// cache misses of a batch overlap instead of coming one after another, as for a
/// pipelined batch of requests.
const REPLAY_BATCH: usize = 16;

/// A snapshot written and synced as `tmp` becomes the shard's snapshot covering
/// the log up to `(segment, offset)` (rename, directory sync); then the older
/// snapshots and the log segments before its segment are deleted.
pub(crate) fn make_current(
    tmp: &Path,
    dir: &Path,
    (segment, offset): (u64, u64),
) -> std::io::Result<()> {
    std::fs::rename(tmp, dir.join(snapshot_name(segment, offset)))?;
    File::open(dir)?.sync_all()?;
    for (seg, off) in list_snapshots(dir) {
        if (seg, off) < (segment, offset) {
            let _ = std::fs::remove_file(dir.join(snapshot_name(seg, off)));
        }
    }
    for old in list_segments(dir).unwrap_or_default() {
        if old < segment {
            let _ = std::fs::remove_file(dir.join(segment_name(old)));
        }
    }
    Ok(())
}

/// Snapshots a save left half written (`.tmp`: the process ended before it was
/// sealed) are never loaded: delete them.
fn remove_unfinished_snapshots(dir: &Path) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("snapshot-") && name.ends_with(".rdb.tmp") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The file name of a snapshot covering the log up to `(segment, offset)`.
pub(crate) fn snapshot_name(segment: u64, offset: u64) -> String {
    format!("snapshot-{segment:010}-{offset:012}.rdb")
}

/// `dir` holds a snapshot.
pub(crate) fn has_snapshot(dir: &Path) -> bool {
    !list_snapshots(dir).is_empty()
}

/// The snapshots in `dir` as `(segment, offset)`, oldest first.
fn list_snapshots(dir: &Path) -> Vec<(u64, u64)> {
    let mut found: Vec<(u64, u64)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let (seg, off) = name
                .strip_prefix("snapshot-")?
                .strip_suffix(".rdb")?
                .split_once('-')?;
            Some((seg.parse().ok()?, off.parse().ok()?))
        })
        .collect();
    found.sort_unstable();
    found
}

/// How replay finds the keyspace handler of a logged command line (`None`: the
/// line names no keyspace command). The command table sits above persistence,
/// so the layer that owns it hands its lookup down (`cmd::registry::logged_handler`).
pub type HandlerOf = fn(Args<'_>) -> Option<EngineFn>;

/// Where the recovered log ends: the segment to append to and its good length.
pub enum RecoveredEnd {
    Empty,
    Segment { number: u64, valid_bytes: u64 },
}

/// Replay shard `shard`'s log into `engine`, each record through the handler
/// `handler_of` finds. Returns where appending resumes, or why the shard cannot
/// start.
pub fn recover(
    engine: &mut Engine,
    cfg: &Config,
    shard: usize,
    now_ms: u64,
    handler_of: HandlerOf,
) -> Result<RecoveredEnd, String> {
    recover_marked(engine, cfg, shard, now_ms, handler_of).map(|(end, _)| end)
}

/// [`recover`], and the replica's stream marks it replayed (see `stream_mark`).
pub fn recover_marked(
    engine: &mut Engine,
    cfg: &Config,
    shard: usize,
    now_ms: u64,
    handler_of: HandlerOf,
) -> Result<(RecoveredEnd, Found), String> {
    let mut found = Found::default();
    let end = replay_segments(engine, cfg, shard, now_ms, handler_of, &mut found)?;
    Ok((end, found))
}

fn replay_segments(
    engine: &mut Engine,
    cfg: &Config,
    shard: usize,
    now_ms: u64,
    handler_of: HandlerOf,
    found: &mut Found,
) -> Result<RecoveredEnd, String> {
    let dir = shard_dir(&cfg.dir, shard);
    let from = load_snapshot(engine, &dir, shard, now_ms, found)?;
    let segments: Vec<u64> = list_segments(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .into_iter()
        .filter(|&n| n >= from.0)
        .collect();
    // One buffer for every segment read: a fresh 64 MiB each time would be
    // page-faulted and zeroed again.
    let mut bytes = Vec::new();
    size_index_for_replay(engine, &dir, &segments, from, &mut bytes);
    let mut end = RecoveredEnd::Empty;
    let mut records = 0u64;
    let mut scratch = Vec::new();
    for (i, &number) in segments.iter().enumerate() {
        let path = dir.join(segment_name(number));
        read_segment(&path, &mut bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        // The snapshot covers its segment up to its offset.
        let skip = if number == from.0 {
            (from.1 as usize).min(bytes.len())
        } else {
            0
        };
        let (valid, how, replayed) = replay_log(
            engine,
            &bytes[skip..],
            now_ms,
            handler_of,
            &mut scratch,
            found,
        );
        records += replayed;
        let valid = valid + skip;
        let how = match how {
            LogEnd::TornTail { at } => LogEnd::TornTail { at: at + skip },
            LogEnd::Corrupt { at, reason } => LogEnd::Corrupt {
                at: at + skip,
                reason,
            },
            clean => clean,
        };
        let last = i + 1 == segments.len();
        match how {
            LogEnd::Clean => {}
            LogEnd::TornTail { at } if last => eprintln!(
                "ruvio: shard {shard}: {} ends in a partly written record at byte {at}; cut there",
                path.display()
            ),
            LogEnd::TornTail { at } | LogEnd::Corrupt { at, .. } if cfg.wal_truncate_corrupt => {
                eprintln!(
                    "ruvio: shard {shard}: {} is damaged at byte {at}; cut there as --wal-truncate-corrupt says (later records and segments are dropped)",
                    path.display()
                );
                for &later in &segments[i + 1..] {
                    let _ = std::fs::remove_file(dir.join(segment_name(later)));
                }
                return Ok(RecoveredEnd::Segment { number, valid_bytes: valid as u64 });
            }
            LogEnd::TornTail { at } | LogEnd::Corrupt { at, .. } => {
                return Err(format!(
                    "{} is damaged at byte {at} and good records follow; refusing to start (--wal-truncate-corrupt cuts the log there, losing what follows)",
                    path.display()
                ))
            }
        }
        end = RecoveredEnd::Segment {
            number,
            valid_bytes: valid as u64,
        };
    }
    if records > 0 {
        eprintln!("ruvio: shard {shard}: replayed {records} log records");
    }
    Ok(end)
}

/// Replay the good records of `log` through the engine in batches of
/// [`REPLAY_BATCH`]: where the good records end, how the log ends there
/// ([`read_log`]), and how many records ran.
fn replay_log(
    engine: &mut Engine,
    log: &[u8],
    now_ms: u64,
    handler_of: HandlerOf,
    scratch: &mut Vec<u8>,
    found: &mut Found,
) -> (usize, LogEnd, u64) {
    let mut records = 0;
    let mut batch = Vec::with_capacity(REPLAY_BATCH);
    let mut run_batch = |engine: &mut Engine, batch: &mut Vec<Record<'_>>| {
        for record in batch.iter() {
            if let Some(key) = record.args.get(1) {
                engine.prefetch(record.db, key);
            }
        }
        for record in batch.drain(..) {
            if StreamMark::is_mark(&record.args) {
                // A replica's place in its primary's stream, not a command.
                found.saw(StreamMark::parse(&record.args));
                continue;
            }
            found.saw(None);
            crate::persistence::loading::slow_replay();
            replay(engine, handler_of, record.db, &record.args, now_ms, scratch);
            records += 1;
        }
    };
    let (valid, how) = read_log(log, |record| {
        batch.push(record);
        if batch.len() == REPLAY_BATCH {
            run_batch(engine, &mut batch);
        }
    });
    run_batch(engine, &mut batch);
    (valid, how, records)
}

/// Size the key index of each database the snapshot left empty for the keys the
/// log's records name (their distinct count, estimated as PFCOUNT does: repeats
/// and overwrites count once), so a replay of millions of new keys grows no index
/// by splits (docs/durability.md, Recovery, has the measurements). A first pass
/// over the segments, reading each once more (about 5 % of a replay's time); a
/// segment that cannot be read is left to the replay to report.
fn size_index_for_replay(
    engine: &mut Engine,
    dir: &Path,
    segments: &[u64],
    from: (u64, u64),
    bytes: &mut Vec<u8>,
) {
    let empty: Vec<bool> = (0..engine.db_count())
        .map(|db| engine.key_count(db) == 0)
        .collect();
    if !empty.contains(&true) || segments.is_empty() {
        return;
    }
    let mut keys: Vec<Option<DistinctEstimate>> = empty.iter().map(|_| None).collect();
    for &number in segments {
        if read_segment(&dir.join(segment_name(number)), bytes).is_err() {
            return;
        }
        let skip = if number == from.0 { from.1 as usize } else { 0 };
        record_keys(bytes.get(skip..).unwrap_or_default(), |db, key| {
            if empty.get(db) == Some(&true) {
                keys[db]
                    .get_or_insert_with(DistinctEstimate::default)
                    .add(key);
            }
        });
    }
    for (db, estimate) in keys.iter().enumerate() {
        if let Some(estimate) = estimate {
            engine.reserve_keys(db, estimate.estimate() as usize);
        }
    }
}

/// The whole of segment file `path` in `bytes` (its previous contents replaced,
/// its capacity kept).
fn read_segment(path: &Path, bytes: &mut Vec<u8>) -> std::io::Result<()> {
    use std::io::Read;
    bytes.clear();
    File::open(path)?.read_to_end(bytes)?;
    Ok(())
}

/// Load the newest snapshot of the shard, if any; returns the log position it
/// covers (`(0, 0)`: none, replay the whole log). The stream mark it carries
/// goes to `found`.
fn load_snapshot(
    engine: &mut Engine,
    dir: &Path,
    shard: usize,
    now_ms: u64,
    found: &mut Found,
) -> Result<(u64, u64), String> {
    remove_unfinished_snapshots(dir);
    let Some(&(segment, offset)) = list_snapshots(dir).last() else {
        return Ok((0, 0));
    };
    let path = dir.join(snapshot_name(segment, offset));
    let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let loaded = ruvio_engine::rdb::file::load(engine, &bytes, now_ms, |_| true)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    // A replica's snapshot carries its place in the primary's stream.
    if let Some(mark) = StreamMark::from_aux(&loaded.repl_aux) {
        found.saw(Some(mark));
    }
    eprintln!(
        "ruvio: shard {shard}: loaded {} keys from {}",
        loaded.keys,
        path.display()
    );
    Ok((segment, offset))
}

/// Run one logged command through the engine (its reply is dropped). Only engine
/// commands are ever logged (`exec::run_engine` is the one place that appends).
fn replay(
    engine: &mut Engine,
    handler_of: HandlerOf,
    db: usize,
    args: &[&[u8]],
    now_ms: u64,
    scratch: &mut Vec<u8>,
) {
    if args.is_empty() {
        return;
    }
    let argv: OwnedArgs = args.iter().copied().collect();
    let argv = argv.args();
    let Some(handler) = handler_of(argv) else {
        eprintln!(
            "ruvio: a log record names no keyspace command: {:?}",
            String::from_utf8_lossy(argv.get(0))
        );
        return;
    };
    let mut ctx = ExecCtx::new(db, now_ms);
    ctx.may_block = false;
    scratch.clear();
    let _ = handler(
        engine,
        &mut ctx,
        argv,
        &mut Reply::new(scratch, Protocol::Resp2),
    );
}
