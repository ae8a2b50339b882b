//! The wall clock every expiry decision compares against: Unix milliseconds, as
//! the engine's `ExecCtx::now_ms` takes them. A shard reads it once per loop
//! iteration and keeps the value (`ShardCore::now_ms`); start-up work (loading,
//! import, resharding) and scripts read it here.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
