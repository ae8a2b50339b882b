//! `--import-rdb FILE`: a Redis dump.rdb loaded at start. Every shard reads the
//! file and keeps the keys whose slot it owns (ruvio_engine::rdb::file), before
//! it serves any client; a file that does not load stops the server with the
//! reason (a module type, a stream, corruption, a database beyond `databases`).

use std::path::Path;

use ruvio_engine::Engine;

use crate::topology::Topology;

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
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
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

/// After [`load_rdb`] on this thread: the function libraries the file brought, as a
/// FUNCTION DUMP payload (`None` when it had none). The engine keeps one set of
/// libraries per thread, so a file loaded on a loading thread hands its libraries
/// to the shard's thread this way.
pub fn libraries_loaded() -> Option<Vec<u8>> {
    use ruvio_engine::scripting::functions;
    (functions::counts().0 > 0).then(functions::dump)
}
