//! A full sync's RDB loaded into one shard: the keys whose slot the shard owns,
//! in a fresh keyspace that replaces the old one whole, and the file's function
//! libraries in place of the shard's (Redis empties its databases and functions
//! before it loads the primary's RDB).
//!
//! Each shard loads on its own thread, from the one copy shard 0 received
//! ([`super::State::publish_dataset`]), with the same loader as `--import-rdb`
//! (`ruvio_engine::rdb::file`), so the two accept and refuse the same files.

use crate::cluster::topology::Topology;
use crate::config::Config;
use ruvio_engine::scripting::functions;
use ruvio_engine::Engine;

/// Load `rdb` into a new keyspace configured as `engine` and put it in place.
/// On an error the old keyspace stays and the reason comes back.
pub fn replace(
    engine: &mut Engine,
    cfg: &Config,
    rdb: &[u8],
    shard: usize,
    topo: &Topology,
    now_ms: u64,
) -> Result<u64, String> {
    let mut fresh = Engine::new(cfg.databases);
    *fresh.config_mut() = *engine.config();
    let notify = cfg.notify_keyspace_events;
    fresh.record_expired(crate::messaging::notify::expiry_wanted(notify));
    let (added, missed) = crate::messaging::notify::key_notes_wanted(notify);
    fresh.record_key_notes(added, missed);
    // The primary's function libraries replace the replica's, as Redis's; the
    // loader adds the file's to this thread's set, so it starts empty (and gets
    // its old set back when the file does not load).
    let kept = functions::dump();
    functions::flush();
    let loaded =
        ruvio_engine::rdb::file::load(&mut fresh, rdb, now_ms, |key| topo.key_owner(key) == shard);
    match loaded {
        Ok(loaded) => {
            *engine = fresh;
            Ok(loaded.keys as u64)
        }
        Err(e) => {
            if let Err(back) = functions::replace_all(&kept) {
                return Err(format!(
                    "{e}; the old function libraries: {}",
                    back.message()
                ));
            }
            Err(e)
        }
    }
}
