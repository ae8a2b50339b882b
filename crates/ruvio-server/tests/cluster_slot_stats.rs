//! CLUSTER SLOT-STATS (Redis 8.0), which the redis-server 7.0 installed here
//! lacks: exact reply bytes from the real binary against Redis 8.0's
//! `clusterSlotStatsCommand` (src/cluster_slot_stats.c) with its default
//! `cluster-slot-stats-enabled no`, so `key-count` is the one metric. In per-shard
//! mode each shard answers for the slots it serves, as one node of a cluster; in
//! forward mode Ruvio is standalone and answers "cluster support disabled".

mod common;

use common::*;

/// One `[slot, {key-count: n}]` element in RESP2 (the map as a flat array).
fn stat(slot: u16, keys: u64) -> String {
    format!("*2\r\n:{slot}\r\n*2\r\n$9\r\nkey-count\r\n:{keys}\r\n")
}

fn stats(entries: &[(u16, u64)]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", entries.len());
    entries.iter().for_each(|&(s, n)| out.push_str(&stat(s, n)));
    out.into_bytes()
}

/// `count` keys hashing to `slot` (hash tag `{tag}`), set through `c`.
fn fill_slot(c: &mut RawConn, tag: &str, count: usize) -> u16 {
    for i in 0..count {
        assert_eq!(c.cmd(&["SET", &format!("{{{tag}}}k{i}"), "v"]), b"+OK\r\n");
    }
    key_slot(format!("{{{tag}}}").as_bytes())
}

/// A one-letter-or-more tag whose slot is served by `shard` of `n` and is not slot
/// `lo` or `lo + 1` of that shard (those stay empty for the ASC checks).
fn tag_on_shard(shard: usize, n: usize, skip: &[&str]) -> String {
    let (lo, _) = shard_slot_range(shard, n);
    (0..10_000)
        .map(|i| format!("t{i}"))
        .find(|t| {
            let slot = key_slot(format!("{{{t}}}").as_bytes());
            shard_of_slot(slot, n) == shard
                && slot > lo + 1
                && !skip
                    .iter()
                    .any(|s| key_slot(format!("{{{s}}}").as_bytes()) == slot)
        })
        .expect("a tag on every shard")
}

#[test]
fn forward_mode_has_cluster_support_disabled() {
    let server = Server::forward(2);
    let mut c = server.raw();
    assert_eq!(
        c.cmd(&["CLUSTER", "SLOT-STATS", "ORDERBY", "key-count"]),
        b"-ERR This instance has cluster support disabled\r\n"
    );
}

#[test]
fn per_shard_mode_reports_each_shards_own_slots() {
    let server = Server::per_shard(2);
    let (lo0, hi0) = shard_slot_range(0, 2);
    let mut c = RawConn::connect(server.shard_port(0));
    let busy_tag = tag_on_shard(0, 2, &[]);
    let quiet_tag = tag_on_shard(0, 2, &[&busy_tag]);
    let busy = fill_slot(&mut c, &busy_tag, 3);
    let quiet = fill_slot(&mut c, &quiet_tag, 1);
    assert_eq!(
        c.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &busy.to_string()]),
        b":3\r\n"
    );

    // SLOTSRANGE: the served slots of the range, in slot order.
    let one = c.cmd(&[
        "CLUSTER",
        "SLOT-STATS",
        "SLOTSRANGE",
        &busy.to_string(),
        &busy.to_string(),
    ]);
    assert_eq!(one, stats(&[(busy, 3)]));
    let all = c.cmd(&["cluster", "slot-stats", "slotsrange", "0", "16383"]);
    let expected: Vec<(u16, u64)> = (lo0..hi0)
        .map(|s| {
            (
                s,
                [(busy, 3), (quiet, 1)]
                    .iter()
                    .find(|e| e.0 == s)
                    .map_or(0, |e| e.1),
            )
        })
        .collect();
    assert_eq!(all, stats(&expected));
    let straddling = c.cmd(&[
        "CLUSTER",
        "SLOT-STATS",
        "SLOTSRANGE",
        &(hi0 - 2).to_string(),
        &(hi0 + 5).to_string(),
    ]);
    assert_eq!(straddling, stats(&[(hi0 - 2, 0), (hi0 - 1, 0)]));

    // ORDERBY: by key-count, descending by default, ties by ascending slot.
    let top = c.cmd(&[
        "CLUSTER",
        "SLOT-STATS",
        "ORDERBY",
        "key-count",
        "LIMIT",
        "3",
    ]);
    assert_eq!(top, stats(&[(busy, 3), (quiet, 1), (lo0, 0)]));
    let top = c.cmd(&[
        "CLUSTER",
        "SLOT-STATS",
        "ORDERBY",
        "KEY-COUNT",
        "DESC",
        "LIMIT",
        "2",
    ]);
    assert_eq!(top, stats(&[(busy, 3), (quiet, 1)]));
    let bottom = c.cmd(&[
        "CLUSTER",
        "SLOT-STATS",
        "ORDERBY",
        "key-count",
        "LIMIT",
        "2",
        "asc",
    ]);
    assert_eq!(bottom, stats(&[(lo0, 0), (lo0 + 1, 0)]));
    // Without LIMIT: every served slot (16384 caps it at the shard's count).
    let every = c.cmd(&["CLUSTER", "SLOT-STATS", "ORDERBY", "key-count", "ASC"]);
    assert!(every.starts_with(format!("*{}\r\n", hi0 - lo0).as_bytes()));
    assert!(every.ends_with(format!("{}{}", stat(quiet, 1), stat(busy, 3)).as_bytes()));

    // RESP3: the statistics are a map.
    c.cmd(&["HELLO", "3"]);
    let one = c.cmd(&[
        "CLUSTER",
        "SLOT-STATS",
        "SLOTSRANGE",
        &busy.to_string(),
        &busy.to_string(),
    ]);
    assert_eq!(
        one,
        format!("*1\r\n*2\r\n:{busy}\r\n%1\r\n$9\r\nkey-count\r\n:3\r\n").into_bytes()
    );
    c.cmd(&["HELLO", "2"]);

    // The other shard serves none of shard 0's slots and sees none of its keys.
    let mut other = RawConn::connect(server.shard_port(1));
    assert_eq!(
        other.cmd(&[
            "CLUSTER",
            "SLOT-STATS",
            "SLOTSRANGE",
            "0",
            &(hi0 - 1).to_string()
        ]),
        b"*0\r\n"
    );
    let (lo1, _) = shard_slot_range(1, 2);
    assert_eq!(
        other.cmd(&[
            "CLUSTER",
            "SLOT-STATS",
            "ORDERBY",
            "key-count",
            "LIMIT",
            "1"
        ]),
        stats(&[(lo1, 0)])
    );
}

#[test]
fn errors_are_redis_8_0s() {
    let server = Server::per_shard(1);
    let mut c = RawConn::connect(server.shard_port(0));
    let cases: &[(&[&str], &str)] = &[
        (&["CLUSTER", "SLOT-STATS"], "ERR wrong number of arguments for 'cluster|slot-stats' command"),
        (&["CLUSTER", "SLOT-STATS", "SLOTSRANGE"], "ERR wrong number of arguments for 'cluster|slot-stats' command"),
        (&["CLUSTER", "slot-stats", "SLOTSRANGE", "1"],
            "ERR unknown subcommand or wrong number of arguments for 'slot-stats'. Try CLUSTER HELP."),
        (&["CLUSTER", "SLOT-STATS", "SLOTSRANGE", "1", "2", "3"],
            "ERR unknown subcommand or wrong number of arguments for 'SLOT-STATS'. Try CLUSTER HELP."),
        (&["CLUSTER", "SLOT-STATS", "SLOTS", "1", "2"],
            "ERR unknown subcommand or wrong number of arguments for 'SLOT-STATS'. Try CLUSTER HELP."),
        (&["CLUSTER", "SLOT-STATS", "SLOTSRANGE", "5", "3"], "ERR Start slot number 5 is greater than end slot number 3"),
        (&["CLUSTER", "SLOT-STATS", "SLOTSRANGE", "-1", "3"], "ERR Invalid or out of range slot"),
        (&["CLUSTER", "SLOT-STATS", "SLOTSRANGE", "0", "16384"], "ERR Invalid or out of range slot"),
        (&["CLUSTER", "SLOT-STATS", "SLOTSRANGE", "x", "1"], "ERR Invalid or out of range slot"),
        (&["CLUSTER", "SLOT-STATS", "ORDERBY", "cpu-usec"], "ERR Unrecognized sort metric for ORDERBY."),
        (&["CLUSTER", "SLOT-STATS", "ORDERBY", "network-bytes-in"], "ERR Unrecognized sort metric for ORDERBY."),
        (&["CLUSTER", "SLOT-STATS", "ORDERBY", "nope", "LIMIT", "0"], "ERR Unrecognized sort metric for ORDERBY."),
        (&["CLUSTER", "SLOT-STATS", "ORDERBY", "key-count", "LIMIT", "0"],
            "ERR Limit has to lie in between 1 and 16384 (maximum number of slots)."),
        (&["CLUSTER", "SLOT-STATS", "ORDERBY", "key-count", "LIMIT", "16385"],
            "ERR Limit has to lie in between 1 and 16384 (maximum number of slots)."),
        (&["CLUSTER", "SLOT-STATS", "ORDERBY", "key-count", "LIMIT", "ten"],
            "ERR Limit has to lie in between 1 and 16384 (maximum number of slots)."),
        (&["CLUSTER", "SLOT-STATS", "ORDERBY", "key-count", "LIMIT", "1", "LIMIT", "2"],
            "ERR Multiple filters of the same type are disallowed."),
        (&["CLUSTER", "SLOT-STATS", "ORDERBY", "key-count", "ASC", "DESC"],
            "ERR Multiple filters of the same type are disallowed."),
        (&["CLUSTER", "SLOT-STATS", "ORDERBY", "key-count", "LIMIT"], "ERR syntax error"),
        (&["CLUSTER", "SLOT-STATS", "ORDERBY", "key-count", "UP"], "ERR syntax error"),
    ];
    for (argv, error) in cases {
        assert_eq!(
            show(&c.cmd(argv)),
            show(format!("-{error}\r\n").as_bytes()),
            "{argv:?}"
        );
    }
    // One shard serves every slot.
    let every = c.cmd(&["CLUSTER", "SLOT-STATS", "ORDERBY", "key-count"]);
    assert!(every.starts_with(b"*16384\r\n"), "{}", show(&every[..20]));
    let last = c.cmd(&["CLUSTER", "SLOT-STATS", "SLOTSRANGE", "16383", "16383"]);
    assert_eq!(last, stats(&[(16383, 0)]));
}
