//! The shards' mesh holds nothing per message or per look at its channels: a long
//! stretch of cross-shard work (scripts under the script lock, which wait for
//! another shard's keys by polling its channel, and forwarded commands) leaves the
//! server's resident memory where the first stretch left it. Before the mesh's
//! channels were `rtrb` rings, each empty receive left a waker behind in glommio's
//! reactor: 900 MB after a million locked scripts (docs/cross-shard.md).

mod common;

use common::*;

const MIB: u64 = 1 << 20;

/// Growth allowed between the warm-up and the end of the long stretch: allocator
/// noise, far below what one leaked byte per poll adds up to.
const GROWTH_MAX: u64 = 8 * MIB;

/// Takes one unit from ARGV[1] (undeclared) into KEYS[1].
const MOVE: &str = "redis.call('decr', ARGV[1]) return redis.call('incr', KEYS[1])";

/// `rounds` pipelines of locked scripts and forwarded GETs from clients on both
/// shards.
fn cross_shard_stretch(server: &Server, rounds: usize) {
    let (a, b) = (key_on_shard("mm", 0, 2), key_on_shard("mm", 1, 2));
    let workers: Vec<_> = (0..2)
        .map(|shard| {
            let mut c = conn_on_shard(server, shard);
            let (a, b) = (a.clone(), b.clone());
            std::thread::spawn(move || {
                let (mine, theirs) = if shard == 0 { (&a, &b) } else { (&b, &a) };
                for _ in 0..rounds {
                    let mut request = Vec::new();
                    for _ in 0..16 {
                        request.extend(encode(&["eval", MOVE, "1", mine, theirs]));
                        request.extend(encode(&["get", theirs]));
                    }
                    c.send(&request);
                    for _ in 0..32 {
                        let reply = c.read_reply();
                        assert!(matches!(reply[0], b':' | b'$'), "{}", show(&reply));
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("a client failed");
    }
}

#[test]
fn memory_stays_flat_under_long_cross_shard_work() {
    if target() == Target::Redis {
        return;
    }
    let server = Server::forward(2);
    cross_shard_stretch(&server, 200);
    let warm = rss_bytes(server.pid());
    cross_shard_stretch(&server, 600);
    let after = rss_bytes(server.pid());
    let growth = after.saturating_sub(warm);
    println!(
        "resident memory: {} KiB after warm-up, {} KiB after",
        warm >> 10,
        after >> 10
    );
    assert!(
        growth < GROWTH_MAX,
        "grew {} KiB over the long stretch",
        growth >> 10
    );
}
