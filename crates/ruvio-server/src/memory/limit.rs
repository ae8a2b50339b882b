//! `maxmemory`: when the process's allocated bytes ([`crate::memory::alloc`]) less what the
//! keyspaces will reuse before allocating again (free entry slots, values being
//! freed) pass the limit, shards evict keys by `maxmemory-policy`, or refuse
//! commands that may grow memory (`-OOM`) when nothing can be evicted. The
//! replication backlog and replicas' output are not counted, as in Redis.
//!
//! The limit is the server's, not split per shard: every shard sees the same total
//! and evicts from its own keyspace, but only while its dataset is at least its
//! share of all the shards' datasets (each publishes its size), so the shard that
//! checks most often (the one the writing clients are connected to) does not empty
//! itself while the others keep their cold keys. A shard checks once per loop
//! iteration (at least every tick) and before a command flagged `denyoom`, evicting
//! at most [`EVICT_PER_CHECK_MAX`] keys per check so one check never stalls its
//! clients.

use crate::memory::alloc::allocated_bytes;
use crate::shard::ShardCore;
use crate::shard::Shared;
use ruvio_engine::EvictionPolicy;
use std::sync::atomic::Ordering::Relaxed;

/// Keys one check may evict (Redis bounds an eviction cycle by time instead).
const EVICT_PER_CHECK_MAX: usize = 256;

/// Bytes counted against `maxmemory`: what the keyspaces will not reuse, less
/// the replication backlog and the replicas' output (Redis does not count them
/// either: evicting keys cannot free them).
pub fn used_for_limit(shared: &Shared) -> u64 {
    let reusable = shared.sum(|g| &g.reusable_bytes);
    allocated_bytes().saturating_sub(reusable + not_counted(shared))
}

/// The backlog and the replicas' output bytes (INFO `mem_not_counted_for_evict`).
pub fn not_counted(shared: &Shared) -> u64 {
    shared.sum(|g| &g.replica_output_bytes) + shared.replication.primary.backlog_bytes()
}

/// Publish this shard's reusable bytes and evict while the server is over the
/// limit. Returns true when it is (still) over.
pub fn enforce(core: &mut ShardCore) -> bool {
    let limit = core.cfg.maxmemory;
    if limit == 0 {
        return false;
    }
    publish_sizes(core);
    let mut evicted = 0;
    while used_for_limit(&core.shared) > limit {
        if evicted == EVICT_PER_CHECK_MAX || !my_turn(core) {
            return true;
        }
        let Some((db, key)) = core.engine.evict_one(core.now_ms) else {
            return true;
        };
        // Redis propagates an eviction as a DEL: a restart must not bring it back.
        core.log_record(db, [&b"DEL"[..], &key].into_iter());
        let flags = core.cfg.notify_keyspace_events;
        core.notifications.queue(
            flags,
            crate::config::keyspace_events::EVICTED,
            "evicted",
            db,
            &key,
        );
        // Its readers (CLIENT TRACKING) drop it from their caches, as after a write.
        if core.tracking.active() {
            core.tracking.written(0, false, &key);
        }
        evicted += 1;
        core.stats.dirty += 1;
        publish_sizes(core);
    }
    false
}

/// Publish what this shard's keyspace will reuse and how big its dataset is (on
/// every check, and with the shard's other gauges).
pub fn publish_sizes(core: &ShardCore) {
    let gauges = &core.shared.shards[core.id];
    let reusable = core.engine.reusable_bytes() as u64;
    gauges.reusable_bytes.store(reusable, Relaxed);
    let dataset = core.engine.used_memory_bytes() as u64;
    gauges
        .dataset_bytes
        .store(dataset.saturating_sub(reusable), Relaxed);
}

/// This shard holds about its share of the server's data or more (within an
/// eighth): it evicts. Shards near the mean all evict at once; one far below waits.
fn my_turn(core: &ShardCore) -> bool {
    let shards = core.shared.shards.len() as u64;
    let mine = core.shared.shards[core.id].dataset_bytes.load(Relaxed);
    mine * shards * 8 >= core.shared.sum(|g| &g.dataset_bytes) * 7
}

/// Whether a `denyoom` command must be refused now: over the limit after this
/// shard evicted what it could, and no other shard holds a key the policy could
/// evict (they evict on their next loop iteration: refusing then would be an
/// `-OOM` Redis would not give).
pub fn must_refuse(core: &mut ShardCore) -> bool {
    if !enforce(core) {
        return false;
    }
    let policy = core.engine.config().maxmemory_policy;
    if policy == EvictionPolicy::NoEviction {
        return true;
    }
    let volatile = policy.volatile_only();
    let me = core.id;
    !core.shared.shards.iter().enumerate().any(|(id, g)| {
        id != me
            && g.keys.iter().any(|(keys, expires)| {
                let n = if volatile { expires } else { keys };
                n.load(Relaxed) > 0
            })
    })
}

/// How often a shard under `maxmemory` hands its allocator's free pages back.
const TRIM_EVERY_MS: u64 = 1000;

/// Under `maxmemory`, at most once a second per shard and only while resident
/// memory exceeds the allocated bytes by more than a tenth, return the free pages
/// of the allocator's arenas to the system (`malloc_trim`): evicted values leave
/// holes in each shard's arena (glibc keeps one per thread) that resident memory
/// would otherwise keep counting. Measured: 2 shards filled far past a 20 MB limit
/// hold 30 MB resident with this, 43 MB without (6.7 MB idle).
pub fn give_back_free_pages(core: &mut ShardCore) {
    if core.cfg.maxmemory == 0 || core.now_ms < core.next_trim_ms {
        return;
    }
    core.next_trim_ms = core.now_ms + TRIM_EVERY_MS;
    let allocated = allocated_bytes();
    if crate::memory::alloc::rss_bytes() <= allocated + allocated / 10 {
        return;
    }
    // SAFETY: malloc_trim has no preconditions.
    unsafe { libc::malloc_trim(0) };
}
