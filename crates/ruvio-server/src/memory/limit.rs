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
//!
//! The rules are here; what they read and do on a shard (its gauges, its keyspace,
//! the log and notifications of an eviction) is the shard's, behind [`Evicting`],
//! implemented in `shard/eviction.rs`: this floor names nothing above it.

use crate::memory::alloc::allocated_bytes;
use ruvio_engine::EvictionPolicy;

/// Keys one check may evict (Redis bounds an eviction cycle by time instead).
const EVICT_PER_CHECK_MAX: usize = 256;

/// What the limit needs of a shard: the shard implements it (`shard/eviction.rs`);
/// generic, so a check costs what it did as a function of the shard.
pub trait Evicting {
    /// `maxmemory` in bytes (0: no limit).
    fn maxmemory_bytes(&self) -> u64;
    /// `maxmemory-policy`.
    fn policy(&self) -> EvictionPolicy;
    /// Publish what this shard's keyspace will reuse and how big its dataset is.
    fn publish_sizes(&self);
    /// Every shard's reusable bytes and the bytes the limit does not count (the
    /// replication backlog, the replicas' output), as published.
    fn uncounted_bytes(&self) -> u64;
    /// This shard's dataset bytes, every shard's together, and how many shards.
    fn datasets(&self) -> (u64, u64, u64);
    /// Evict one key by the policy, with all an eviction implies (the log's DEL,
    /// the `evicted` event, tracking, the dirty count); false when none can be.
    fn evict_one(&mut self) -> bool;
    /// Another shard holds a key the policy could evict (`volatile`: one with a TTL).
    fn others_hold_keys(&self, volatile: bool) -> bool;
}

/// Bytes counted against `maxmemory`: what the keyspaces will not reuse, less
/// the replication backlog and the replicas' output (Redis does not count them
/// either: evicting keys cannot free them). `uncounted`: see
/// [`Evicting::uncounted_bytes`].
pub fn used_for_limit(uncounted: u64) -> u64 {
    allocated_bytes().saturating_sub(uncounted)
}

/// Publish this shard's reusable bytes and evict while the server is over the
/// limit. Returns true when it is (still) over.
pub fn enforce(shard: &mut impl Evicting) -> bool {
    let limit = shard.maxmemory_bytes();
    if limit == 0 {
        return false;
    }
    shard.publish_sizes();
    let mut evicted = 0;
    while used_for_limit(shard.uncounted_bytes()) > limit {
        if evicted == EVICT_PER_CHECK_MAX || !my_turn(shard.datasets()) {
            return true;
        }
        if !shard.evict_one() {
            return true;
        }
        evicted += 1;
        shard.publish_sizes();
    }
    false
}

/// This shard holds about its share of the server's data or more (within an
/// eighth): it evicts. Shards near the mean all evict at once; one far below waits.
fn my_turn((mine, all, shards): (u64, u64, u64)) -> bool {
    mine * shards * 8 >= all * 7
}

/// Whether a `denyoom` command must be refused now: over the limit after this
/// shard evicted what it could, and no other shard holds a key the policy could
/// evict (they evict on their next loop iteration: refusing then would be an
/// `-OOM` Redis would not give).
pub fn must_refuse(shard: &mut impl Evicting) -> bool {
    if !enforce(shard) {
        return false;
    }
    let policy = shard.policy();
    if policy == EvictionPolicy::NoEviction {
        return true;
    }
    !shard.others_hold_keys(policy.volatile_only())
}

/// How often a shard under `maxmemory` hands its allocator's free pages back.
const TRIM_EVERY_MS: u64 = 1000;

/// Under `maxmemory` (`maxmemory_bytes`), at most once a second per shard (its
/// `next_trim_ms`) and only while resident memory exceeds the allocated bytes by
/// more than a tenth, return the free pages of the allocator's arenas to the
/// system (`malloc_trim`): evicted values leave holes in each shard's arena (glibc
/// keeps one per thread) that resident memory would otherwise keep counting.
/// Measured: 2 shards filled far past a 20 MB limit hold 30 MB resident with
/// this, 43 MB without (6.7 MB idle).
pub fn give_back_free_pages(maxmemory_bytes: u64, now_ms: u64, next_trim_ms: &mut u64) {
    if maxmemory_bytes == 0 || now_ms < *next_trim_ms {
        return;
    }
    *next_trim_ms = now_ms + TRIM_EVERY_MS;
    let allocated = allocated_bytes();
    if crate::memory::alloc::rss_bytes() <= allocated + allocated / 10 {
        return;
    }
    // SAFETY: malloc_trim has no preconditions.
    unsafe { libc::malloc_trim(0) };
}
