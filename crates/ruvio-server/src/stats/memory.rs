//! MEMORY STATS' reply: Redis 7.0's fields in its order and types, from the
//! figures the shard collects (`shard::memory_figures`; the command's row is
//! `cmd::memory`). The derived figures use Redis's formulas
//! (`getMemoryOverheadData`): the overhead is the sum of the parts, the dataset
//! what the allocator counts beyond it, percentages and ratios single-precision
//! as Redis computes them.

use ruvio_resp::Reply;

/// What MEMORY STATS reports, in bytes.
#[derive(Debug, Default)]
pub struct MemoryFigures {
    /// The allocator counter now, its sampled peak, its value at the first tick.
    pub total: u64,
    pub peak: u64,
    pub startup: u64,
    /// The connections' buffers and state; the logs' groups being filled.
    pub clients: u64,
    pub log_buffer: u64,
    /// The script cache's and the function libraries' bytes.
    pub lua: u64,
    pub functions: u64,
    /// Per database with keys: (db, table bytes, TTL mark bytes).
    pub dbs: Vec<(usize, u64, u64)>,
    pub keys: u64,
    pub rss: u64,
    /// glibc's account: bytes in use, bytes held from the system.
    pub allocator_in_use: u64,
    pub allocator_held: u64,
}

/// glibc's account of its heap: bytes in use by the program, bytes it holds
/// from the system (arenas and mapped blocks).
pub fn allocator_bytes() -> (u64, u64) {
    // SAFETY: mallinfo2 only reads the allocator's statistics.
    let info = unsafe { libc::mallinfo2() };
    let in_use = info.uordblks + info.hblkhd;
    let held = info.arena + info.hblkhd;
    (in_use as u64, held as u64)
}

/// Write MEMORY STATS' reply for `f`. Fields Ruvio has no part for yet
/// (`replication.backlog`, `clients.slaves`, `cluster.links`: no replicas nor
/// cluster bus; `overhead.hashtable.slot-to-keys`: no slot-to-keys index) are 0.
pub fn write_memory_stats(f: &MemoryFigures, reply: &mut Reply<'_>) {
    let overhead = f.startup
        + f.clients
        + f.log_buffer
        + f.lua
        + f.functions
        + f.dbs.iter().map(|(_, table, ttl)| table + ttl).sum::<u64>();
    let net = if f.total > f.startup {
        f.total - f.startup
    } else {
        1
    };
    let dataset = f.total.saturating_sub(overhead);
    let (in_use, held, rss) = (f.allocator_in_use, f.allocator_held, f.rss);
    let ratio = |a: u64, b: u64| (a as f32 / b.max(1) as f32) as f64;
    let diff = |a: u64, b: u64| a as i64 - b as i64;
    let int = |reply: &mut Reply<'_>, name: &str, value: i64| {
        reply.bulk(name.as_bytes());
        reply.int(value);
    };
    let double = |reply: &mut Reply<'_>, name: &str, value: f64| {
        reply.bulk(name.as_bytes());
        reply.double(value);
    };

    reply.map(27 + f.dbs.len());
    int(reply, "peak.allocated", f.peak as i64);
    int(reply, "total.allocated", f.total as i64);
    int(reply, "startup.allocated", f.startup as i64);
    int(reply, "replication.backlog", 0);
    int(reply, "clients.slaves", 0);
    int(reply, "clients.normal", f.clients as i64);
    int(reply, "cluster.links", 0);
    int(reply, "aof.buffer", f.log_buffer as i64);
    int(reply, "lua.caches", f.lua as i64);
    int(reply, "functions.caches", f.functions as i64);
    for (db, table, ttl) in &f.dbs {
        reply.bulk(format!("db.{db}").as_bytes());
        reply.map(3);
        int(reply, "overhead.hashtable.main", *table as i64);
        int(reply, "overhead.hashtable.expires", *ttl as i64);
        int(reply, "overhead.hashtable.slot-to-keys", 0);
    }
    int(reply, "overhead.total", overhead as i64);
    int(reply, "keys.count", f.keys as i64);
    int(
        reply,
        "keys.bytes-per-key",
        net.checked_div(f.keys).unwrap_or(0) as i64,
    );
    int(reply, "dataset.bytes", dataset as i64);
    double(
        reply,
        "dataset.percentage",
        (dataset as f32 * 100.0 / net as f32) as f64,
    );
    let peak_percentage = f.total as f32 * 100.0 / f.peak.max(1) as f32;
    double(reply, "peak.percentage", peak_percentage as f64);
    int(reply, "allocator.allocated", in_use as i64);
    int(reply, "allocator.active", held as i64);
    int(reply, "allocator.resident", rss as i64);
    double(reply, "allocator-fragmentation.ratio", ratio(held, in_use));
    int(reply, "allocator-fragmentation.bytes", diff(held, in_use));
    double(reply, "allocator-rss.ratio", ratio(rss, held));
    int(reply, "allocator-rss.bytes", diff(rss, held));
    // Redis's allocator resident is jemalloc's; glibc's resident is the RSS.
    double(reply, "rss-overhead.ratio", ratio(rss, rss));
    int(reply, "rss-overhead.bytes", 0);
    double(reply, "fragmentation", ratio(rss, f.total));
    int(reply, "fragmentation.bytes", diff(rss, f.total));
}
