//! LOADING: while the shards rebuild their keyspaces at start (an RDB file to
//! import, then each shard's snapshot and log), the server already takes
//! connections and answers `-LOADING Redis is loading the dataset in memory` to
//! every command Redis would refuse then (those without the `loading` flag: PING,
//! GET, SET ... but not INFO, which says `loading:1`).
//!
//! Each shard loads on a helper thread of its own (the shards load in parallel)
//! into an engine of its own; the shard's loop serves meanwhile with an empty
//! stand-in engine and, once the thread hands the loaded one back, puts it in
//! place (keeping what CONFIG SET changed meanwhile) and opens its log. Commands
//! are refused until *every* shard has loaded: a shard that is done would
//! otherwise forward commands to one that is not.

use crate::cluster::topology::Topology;
use crate::config::Config;
use crate::persistence::import::Imported;
use crate::persistence::stream_mark::Found;
use crate::persistence::wal::{HandlerOf, RecoveredEnd};
use ruvio_engine::Engine;
use std::sync::atomic::{AtomicU64, Ordering::AcqRel, Ordering::Acquire};
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::sync::Arc;

/// Shards still loading (in `Shared`).
#[derive(Debug)]
pub struct LoadingState {
    shards: AtomicU64,
}

impl LoadingState {
    /// Every one of `shards` counts as loading until it says otherwise.
    pub fn new(shards: usize) -> LoadingState {
        LoadingState {
            shards: AtomicU64::new(shards as u64),
        }
    }

    /// Some shard is still loading (INFO `loading`).
    pub fn any(&self) -> bool {
        self.shards.load(Acquire) > 0
    }

    pub fn shard_loaded(&self) {
        self.shards.fetch_sub(1, AcqRel);
    }
}

/// What a loading thread hands back: the keyspace, where its log ended, and what
/// an imported RDB file brought, and the replica's stream marks its log held.
pub type Loaded = Result<(Engine, Option<RecoveredEnd>, Option<Imported>, Found), String>;

/// One shard's view of the loading.
#[derive(Default)]
pub struct ShardLoading {
    /// This shard's loading thread, until it is done.
    thread: Option<Receiver<Loaded>>,
    /// Some shard of the server is still loading: commands are refused.
    refusing: bool,
}

impl ShardLoading {
    /// Once per loop iteration while refusing: this shard's loaded keyspace, when
    /// its thread is done (an error if the thread died).
    pub fn take_loaded(&mut self) -> Option<Loaded> {
        let done = match self.thread.as_ref().map(Receiver::try_recv) {
            None | Some(Err(TryRecvError::Empty)) => None,
            Some(Ok(loaded)) => Some(loaded),
            Some(Err(TryRecvError::Disconnected)) => Some(Err("the loading thread died".into())),
        };
        if done.is_some() {
            self.thread = None;
        }
        done
    }

    /// Refuse commands while `any_loading` (some shard of the server still loads).
    pub fn set_refusing(&mut self, any_loading: bool) {
        self.refusing = any_loading;
    }

    /// Commands without the `loading` flag get `-LOADING` now.
    pub fn refuses(&self) -> bool {
        self.refusing
    }
}

/// The error every refused command gets.
pub const LOADING_ERROR: &[u8] = b"LOADING Redis is loading the dataset in memory";

/// A fresh engine for shard `id` from `cfg`.
pub fn empty_engine(cfg: &Config) -> Engine {
    let mut engine = Engine::new(cfg.databases);
    *engine.config_mut() = cfg.engine;
    engine
}

/// Load shard `id`'s keyspace: the RDB file to import (see `import` for when),
/// then its snapshot and log (`None` as the log's end: no log is kept). What the
/// file brought beyond keys (its function libraries, loaded into this thread's
/// set) travels back for the shard's thread to take (`ShardCore::install_loaded`).
pub fn load(cfg: &Config, id: usize, topo: &Topology, handler_of: HandlerOf) -> Loaded {
    let mut engine = empty_engine(cfg);
    let mut imported = None;
    if let Some(path) = cfg
        .import_rdb
        .as_ref()
        .filter(|_| crate::persistence::import::wanted(cfg, id))
    {
        crate::persistence::import::load_rdb(&mut engine, path, id, topo)
            .map_err(|e| e.to_string())?;
        imported = Some(crate::persistence::import::imported());
        if cfg.durability.logs() {
            // The directory held nothing: this snapshot is all there is to recover.
            crate::persistence::import::snapshot_imported(&engine, cfg, id)?;
            return Ok((
                engine,
                Some(RecoveredEnd::Empty),
                imported,
                Found::default(),
            ));
        }
    }
    if !cfg.durability.logs() {
        return Ok((engine, None, imported, Found::default()));
    }
    let now_ms = crate::clock::unix_ms();
    let (end, found) =
        crate::persistence::wal::recover_marked(&mut engine, cfg, id, now_ms, handler_of)?;
    Ok((engine, Some(end), imported, found))
}

/// Start loading shard `id` on a thread of its own.
pub fn start(
    cfg: &Config,
    id: usize,
    topo: &Arc<Topology>,
    handler_of: HandlerOf,
) -> std::io::Result<ShardLoading> {
    let (tx, rx) = mpsc::channel();
    let (cfg, topo) = (cfg.clone(), topo.clone());
    std::thread::Builder::new()
        .name(format!("ruvio-load-{id}"))
        .spawn(move || {
            let _ = tx.send(load(&cfg, id, &topo, handler_of));
        })?;
    Ok(ShardLoading {
        thread: Some(rx),
        refusing: true,
    })
}

/// Debug builds: `RUVIO_REPLAY_DELAY_US` microseconds of sleep per replayed log
/// record, so a test can watch a server load (release builds: nothing).
pub fn slow_replay() {
    #[cfg(debug_assertions)]
    {
        static DELAY: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        let us = *DELAY.get_or_init(|| {
            std::env::var("RUVIO_REPLAY_DELAY_US")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        });
        if us > 0 {
            std::thread::sleep(std::time::Duration::from_micros(us));
        }
    }
}
