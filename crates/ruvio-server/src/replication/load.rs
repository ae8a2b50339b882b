//! A full sync's RDB loaded into one shard: the keys whose slot the shard owns,
//! in a fresh keyspace that replaces the old one whole, and the file's function
//! libraries in place of the shard's (Redis empties its databases and functions
//! before it loads the primary's RDB).
//!
//! In two steps, so that the load is checked as a whole before any shard
//! serves it: every shard [`build`]s its part beside its keyspace, and only
//! once every shard's part built does each [`install`] its own (a value one
//! shard cannot build leaves every shard on its old data; the stream is never
//! applied over a load that failed anywhere). Redis loads on one thread, so
//! for it a file loads whole or not at all; a server of shards must agree.
//!
//! Each shard builds on its own thread, from the one copy shard 0 received
//! ([`super::State::publish_dataset`]), with the same loader as `--import-rdb`
//! (`ruvio_engine::rdb::file`), so the two accept and refuse the same files.

use crate::cluster::topology::Topology;
use crate::config::Config;
use ruvio_engine::scripting::functions;
use ruvio_engine::Engine;

/// A shard's part of a full sync, built and not yet in place.
pub struct Built {
    /// The dataset it was built from (`State::publish_dataset`).
    pub dataset: u64,
    engine: Engine,
    keys: u64,
    /// The file's function libraries, as a FUNCTION DUMP payload.
    libraries: Vec<u8>,
}

/// Which keys of a full sync's RDB a shard keeps.
#[derive(Clone, Copy)]
pub enum Keep<'a> {
    /// Those whose slot this shard owns in the process's topology.
    Owned(usize, &'a Topology),
    /// Every key: a replica node keeps its master's whole dataset (the
    /// master's slots, which it serves once promoted).
    Every,
}

/// Build this shard's part of `rdb` (dataset `dataset`) into a new keyspace
/// configured as `engine`, which stays as it is; the reason on an error.
pub fn build(
    engine: &Engine,
    cfg: &Config,
    (dataset, rdb): (u64, &[u8]),
    keep: Keep<'_>,
    now_ms: u64,
) -> Result<Built, String> {
    let mut fresh = Engine::new(cfg.databases);
    *fresh.config_mut() = *engine.config();
    let notify = cfg.notify_keyspace_events;
    fresh.record_expired(crate::messaging::notify::expiry_wanted(notify));
    let (added, missed) = crate::messaging::notify::key_notes_wanted(notify);
    fresh.record_key_notes(added, missed);
    // The loader adds the file's libraries to this thread's set: it starts
    // empty, and the shard's own set is back once the file's is taken.
    let kept = functions::dump();
    functions::flush();
    let loaded = ruvio_engine::rdb::file::load(&mut fresh, rdb, now_ms, |key| match keep {
        Keep::Owned(shard, topo) => topo.key_owner(key) == shard,
        Keep::Every => true,
    });
    let libraries = functions::dump();
    if let Err(back) = functions::replace_all(&kept) {
        return Err(format!(
            "the shard's own function libraries did not come back: {}",
            back.message()
        ));
    }
    let loaded = loaded?;
    Ok(Built {
        dataset,
        engine: fresh,
        keys: loaded.keys as u64,
        libraries,
    })
}

/// Put `built` in place of `engine` and the shard's function libraries (the
/// primary's replace the replica's, as Redis's); its key count. On an error
/// the old keyspace and libraries stay.
pub fn install(engine: &mut Engine, built: Built) -> Result<u64, String> {
    functions::replace_all(&built.libraries).map_err(|e| {
        format!(
            "the MASTER's function libraries did not load: {}",
            e.message()
        )
    })?;
    *engine = built.engine;
    Ok(built.keys)
}
