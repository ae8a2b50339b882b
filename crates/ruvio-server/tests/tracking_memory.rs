//! CLIENT TRACKING at scale: 10,000 tracking connections each reading 1,000 keys
//! (issue 34) hold the tables within the bound docs/tracking.md states, and a
//! write still reaches every reader of its key.
//!
//! Why these numbers: the load, spread so the tables hold 10,000,000
//! reader entries over 100,000 keys (each key read by 100 clients), below the
//! default `tracking-table-max-keys` of 1,000,000, so no key leaves the table and
//! the figures are exact. Nothing dedups: each (key, client) pair is one entry.
//! The keys do not exist (a read of a missing key is remembered as any read), so
//! `used_memory`'s growth over the reads is the tables' alone, beside whatever
//! the connections keep of their requests (warmed up before the first figure).
//!
//! Forward mode with 2 shards: the connections land on both shards and each
//! MGET's keys are on both, so most entries are remembered on another shard than
//! the reader's, and the invalidations of the spot check cross the mesh.

mod common;

use common::*;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Tracking connections.
const CLIENTS: usize = 10_000;
/// Keys each connection reads.
const READS_PER_CLIENT: usize = 1_000;
/// Distinct keys; each is read by `CLIENTS * READS_PER_CLIENT / KEYS` clients.
const KEYS: usize = 100_000;
/// Keys per MGET: ten MGETs a connection, pipelined.
const MGET_KEYS: usize = 100;
/// Connections opened, and served, at a time (below the listen backlog).
const WAVE: usize = 500;
/// Reader entries the tables hold once every read is remembered.
const ITEMS: usize = CLIENTS * READS_PER_CLIENT;
/// Readers of each key.
const READERS_PER_KEY: usize = ITEMS / KEYS;
/// Where client c's window of keys starts: `c * STRIDE`.
const STRIDE: usize = KEYS / CLIENTS;
const _: () = assert!(READS_PER_CLIENT.is_multiple_of(MGET_KEYS));
const _: () = assert!(KEYS.is_multiple_of(CLIENTS) && ITEMS.is_multiple_of(KEYS));

/// docs/tracking.md's bound, in bytes of `used_memory` per remembered key beside
/// its readers: its hash-table slot (48 bytes and a control byte) at the table's
/// lowest load (7/8 of a power of two, just grown: 2 x 8/7 slots a key, 112
/// bytes), and its bytes' heap block (at most 32 bytes for a key of up to 24).
const KEY_BYTES_MAX: u64 = 112 + 32;
/// ... of which the key's block.
const KEY_BLOCK_BYTES_MAX: u64 = 32;
/// ... and per reader entry: 8 bytes, doubled by the vector's growth at worst.
const ITEM_BYTES_MAX: u64 = 2 * 8;
/// What else `used_memory` may gain over the reads beside the tables: the
/// mesh's queues and batches and the connections' reply queues, grown by 10,000
/// pipelines at once (measured: about 46 MiB, left after FLUSHALL empties the
/// tables; docs/tracking.md).
const OTHER_BYTES_MAX: u64 = 64 << 20;

/// Key number `i`.
fn key(i: usize) -> String {
    format!("tm:{i:06}")
}

/// The keys client `c` reads: a window of `READS_PER_CLIENT` from `c * STRIDE`.
fn window(c: usize) -> impl Iterator<Item = usize> {
    (0..READS_PER_CLIENT).map(move |j| (c * STRIDE + j) % KEYS)
}

/// Whether client `c` reads key number `i`.
fn reads(c: usize, i: usize) -> bool {
    (i + KEYS - c * STRIDE) % KEYS < READS_PER_CLIENT
}

/// Field `name` of INFO `section` as a number.
fn info(admin: &mut RawConn, section: &str, name: &str) -> u64 {
    let reply = admin.cmd(&["INFO", section]);
    let text = String::from_utf8_lossy(&reply).into_owned();
    let prefix = format!("{name}:");
    let line = text
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no {name} in INFO {section}: {text}"));
    line[prefix.len()..]
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{line}"))
}

/// Let this process hold `wanted` descriptors (its soft limit up to the hard one).
fn raise_nofile(wanted: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit write and read the one struct given.
    let got = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    assert_eq!(got, 0, "getrlimit");
    assert!(
        limit.rlim_max >= wanted,
        "this test needs {wanted} open files; the hard limit is {}",
        limit.rlim_max
    );
    if limit.rlim_cur < wanted {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: as above.
        let set = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
        assert_eq!(set, 0, "setrlimit");
    }
}

/// The MGETs of client `c` in one write (from the keys encoded once: ten
/// million `format!`s would be much of the test's time in a debug build).
fn mgets(c: usize) -> Vec<u8> {
    static ENCODED: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    let encoded = ENCODED.get_or_init(|| {
        (0..KEYS)
            .map(|i| {
                let k = key(i);
                format!("${}\r\n{k}\r\n", k.len()).into_bytes()
            })
            .collect()
    });
    let keys: Vec<usize> = window(c).collect();
    let mut out = Vec::new();
    for part in keys.chunks(MGET_KEYS) {
        out.extend(format!("*{}\r\n$4\r\nMGET\r\n", part.len() + 1).into_bytes());
        part.iter()
            .for_each(|&i| out.extend_from_slice(&encoded[i]));
    }
    out
}

/// The first key number from `from` that shard `shard` (of 2) owns.
fn first_key_on(from: usize, shard: usize) -> usize {
    (from..KEYS)
        .find(|&i| shard_of_key(&key(i), 2) == shard)
        .expect("a key of each shard")
}

/// Before tracking: each connection sends a pipeline shaped as its reads (ten
/// MGETs over both shards, as many bytes), so its input buffer and reply queue
/// have grown before the first figure; two keys an MGET, not a hundred, to
/// keep the test short.
fn warm_up(conns: &mut [RawConn]) {
    let pair = [key_on_shard("tw", 0, 2), key_on_shard("tw", 1, 2)];
    let mget = encode(&["MGET", &pair[0], &pair[1]]);
    let pad = "x".repeat(mgets(0).len());
    let request = [mget.repeat(10), encode(&["ECHO", &pad])].concat();
    for wave in conns.chunks_mut(WAVE * 4) {
        wave.iter_mut().for_each(|c| c.send(&request));
        for c in wave.iter_mut() {
            for _ in 0..10 {
                assert_eq!(c.read_reply(), b"*2\r\n_\r\n_\r\n");
            }
            assert_eq!(c.read_reply()[0], b'$');
        }
    }
}

/// Each connection reads its window of keys: ten MGETs of 100 keys, pipelined,
/// a few waves of connections at a time.
fn read_windows(conns: &mut [RawConn]) {
    // Every key is missing: each MGET answers 100 nulls (compared as bytes, not
    // parsed: the parser would be much of the test's time in a debug build).
    let nulls = [
        format!("*{MGET_KEYS}\r\n").into_bytes(),
        b"_\r\n".repeat(MGET_KEYS),
    ]
    .concat()
    .repeat(READS_PER_CLIENT / MGET_KEYS);
    for (w, wave) in conns.chunks_mut(WAVE * 4).enumerate() {
        for (i, c) in wave.iter_mut().enumerate() {
            c.send(&mgets(w * WAVE * 4 + i));
        }
        wave.iter_mut().for_each(|c| c.expect(&nulls));
    }
}

/// `>2 invalidate [key]`.
fn push(key: &str) -> Vec<u8> {
    format!(
        ">2\r\n$10\r\ninvalidate\r\n*1\r\n${}\r\n{key}\r\n",
        key.len()
    )
    .into_bytes()
}

/// Wait until INFO counts `items` reader entries over `keys` keys.
fn await_tables(admin: &mut RawConn, keys: u64, items: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = (
            info(admin, "stats", "tracking_total_keys"),
            info(admin, "stats", "tracking_total_items"),
        );
        if got == (keys, items) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "tables hold {got:?}, not {:?}",
            (keys, items)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn ten_thousand_tracking_clients_stay_within_the_stated_bound() {
    if target() == Target::Redis {
        return;
    }
    let started = Instant::now();
    raise_nofile(CLIENTS as u64 + 256);
    let server = Server::ruvio(PortMode::Forward, 2);
    let mut admin = server.raw();
    let maxclients = (CLIENTS + 100).to_string();
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "maxclients", &maxclients]),
        b"+OK\r\n"
    );
    // Every connection speaks RESP3 and reads its keys once before tracking (so
    // its buffers and reply queue have grown before the first figure), then
    // turns tracking on.
    let mut conns: Vec<RawConn> = Vec::with_capacity(CLIENTS);
    while conns.len() < CLIENTS {
        let wave: Vec<RawConn> = (0..WAVE).map(|_| RawConn::connect(server.port())).collect();
        let first = conns.len();
        conns.extend(wave);
        for c in &mut conns[first..] {
            c.send(&encode(&["HELLO", "3"]));
        }
        for c in &mut conns[first..] {
            let greeting = c.read_reply();
            assert!(greeting.starts_with(b"%7\r\n"), "{}", show(&greeting));
        }
    }
    assert_eq!(
        info(&mut admin, "clients", "connected_clients"),
        CLIENTS as u64 + 1
    );
    warm_up(&mut conns);
    let tracking_on = encode(&["CLIENT", "TRACKING", "ON"]);
    for wave in conns.chunks_mut(WAVE) {
        wave.iter_mut().for_each(|c| c.send(&tracking_on));
        wave.iter_mut()
            .for_each(|c| assert_eq!(c.read_reply(), b"+OK\r\n"));
    }
    assert_eq!(info(&mut admin, "stats", "tracking_total_items"), 0);
    println!("connected: {:?}", started.elapsed());
    let used_before = info(&mut admin, "memory", "used_memory");
    let rss_before = rss_bytes(server.pid());

    read_windows(&mut conns);
    await_tables(&mut admin, KEYS as u64, ITEMS as u64);
    let used_after = info(&mut admin, "memory", "used_memory");
    let rss_after = rss_bytes(server.pid());
    println!("read: {:?}", started.elapsed());

    // Writes at that scale: each reader of a written key (on either shard) gets
    // exactly its push; a client next to the window gets nothing.
    let written = [first_key_on(0, 0), first_key_on(KEYS / 3, 1), 2 * KEYS / 3];
    for &i in &written {
        assert_eq!(admin.cmd(&["SET", &key(i), "v"]), b"+OK\r\n");
    }
    for &i in &written {
        let readers: Vec<usize> = (0..CLIENTS).filter(|&c| reads(c, i)).collect();
        assert_eq!(readers.len(), READERS_PER_KEY);
        for c in readers {
            assert_eq!(
                show(&conns[c].read_reply()),
                show(&push(&key(i))),
                "client {c}"
            );
        }
    }
    let outside = (0..CLIENTS).filter(|&c| written.iter().all(|&i| !reads(c, i)));
    for c in outside.step_by(997) {
        conns[c].expect_silence(Duration::from_millis(20));
    }
    let (keys_left, items_left) = (
        KEYS - written.len(),
        ITEMS - written.len() * READERS_PER_KEY,
    );
    await_tables(&mut admin, keys_left as u64, items_left as u64);
    // Every reader still answers, in order after its push.
    for &i in &written {
        let c = (0..CLIENTS).find(|&c| reads(c, i)).expect("a reader");
        assert_eq!(conns[c].cmd(&["PING"]), b"+PONG\r\n");
    }

    // The tables' own blocks (keys' bytes and readers' vectors): what FLUSHALL
    // frees (it empties the tables; the keyspace holds only the three keys
    // written). Each connection gets its null.
    let used_full = info(&mut admin, "memory", "used_memory");
    assert_eq!(admin.cmd(&["FLUSHALL"]), b"+OK\r\n");
    await_tables(&mut admin, 0, 0);
    for c in (0..CLIENTS).step_by(1009) {
        let null = b">2\r\n$10\r\ninvalidate\r\n_\r\n";
        assert_eq!(show(&conns[c].read_reply()), show(null), "client {c}");
    }
    let used_flushed = info(&mut admin, "memory", "used_memory");
    let blocks = used_full.saturating_sub(used_flushed);
    let used = used_after.saturating_sub(used_before);
    let rss = rss_after.saturating_sub(rss_before);
    let bound = KEYS as u64 * KEY_BYTES_MAX + ITEMS as u64 * ITEM_BYTES_MAX;
    let blocks_max = keys_left as u64 * KEY_BLOCK_BYTES_MAX + items_left as u64 * ITEM_BYTES_MAX;
    println!(
        "{CLIENTS} clients x {READS_PER_CLIENT} keys = {ITEMS} entries over {KEYS} keys: \
         used_memory +{} MiB ({} bytes an entry), the tables' blocks {} MiB ({} bytes \
         an entry), RSS +{} MiB; bound {} MiB, blocks' bound {} MiB",
        used >> 20,
        used / ITEMS as u64,
        blocks >> 20,
        blocks / items_left as u64,
        rss >> 20,
        bound >> 20,
        blocks_max >> 20,
    );
    assert!(
        blocks <= blocks_max,
        "the tables' blocks take {blocks} bytes, past their bound of {blocks_max}"
    );
    // Each entry is there: 8 bytes at least.
    assert!(blocks >= items_left as u64 * 8, "{blocks} bytes");
    assert!(
        used <= bound + OTHER_BYTES_MAX,
        "used_memory grew {used} bytes, past the bound of {bound} (+ {OTHER_BYTES_MAX})"
    );
    // Resident memory follows (the allocator's slack on top).
    assert!(
        rss <= bound + OTHER_BYTES_MAX + bound / 2,
        "RSS grew {rss} bytes, past 1.5 x the bound of {bound}"
    );
    println!("done in {:?}", started.elapsed());
}
