//! INFO cpu: Redis 7.0's fields in its order (the process's time, the children's,
//! the main thread's: here the thread of the shard that answers), then each shard
//! thread's own time, which grows on the shard that does the work.

mod common;

use common::*;
use std::collections::BTreeMap;

/// INFO cpu's `field: value` lines, in order.
fn cpu_lines(conn: &mut RawConn) -> Vec<(String, String)> {
    decode(&conn.cmd(&["info", "cpu"]))
        .text()
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn seconds(fields: &BTreeMap<String, String>, name: &str) -> f64 {
    fields
        .get(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} in {fields:?}"))
}

#[test]
fn info_cpu_has_redis_fields_and_one_pair_per_shard() {
    let ruvio = Server::forward(2);
    let mut on_zero = conn_on_shard(&ruvio, 0);
    let names: Vec<String> = cpu_lines(&mut on_zero)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    let redis_names = [
        "used_cpu_sys",
        "used_cpu_user",
        "used_cpu_sys_children",
        "used_cpu_user_children",
        "used_cpu_sys_main_thread",
        "used_cpu_user_main_thread",
    ];
    if require_redis_server("info_cpu").is_some() {
        let redis = Server::redis();
        let theirs: Vec<String> = cpu_lines(&mut redis.raw())
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(theirs, redis_names, "Redis 7.0's INFO cpu");
    }
    let shard_names = [
        "used_cpu_sys_shard_0",
        "used_cpu_user_shard_0",
        "used_cpu_sys_shard_1",
        "used_cpu_user_shard_1",
    ];
    assert_eq!(names, [&redis_names[..], &shard_names[..]].concat());

    // Half a second of Lua from a client of shard 1 on a key of shard 1 shows
    // in shard 1's time.
    let mut on_one = conn_on_shard(&ruvio, 1);
    let before: BTreeMap<_, _> = cpu_lines(&mut on_zero).into_iter().collect();
    let key = key_on_shard("spin", 1, 2);
    let spin = "local t = redis.call('time') local start = t[1] * 1e6 + t[2] \
                while true do t = redis.call('time') \
                if t[1] * 1e6 + t[2] - start > 500000 then return 1 end end";
    assert_eq!(on_one.cmd(&["eval", spin, "1", &key]), b":1\r\n");
    let after: BTreeMap<_, _> = cpu_lines(&mut on_zero).into_iter().collect();
    let grew = |name: &str| seconds(&after, name) - seconds(&before, name);
    let shard_1 = grew("used_cpu_user_shard_1") + grew("used_cpu_sys_shard_1");
    // (At least a tenth of the spin's wall time: the machine's other work may
    // take the CPU meanwhile.)
    assert!(
        shard_1 >= 0.05,
        "shard 1 worked {shard_1} s: {before:?} -> {after:?}"
    );
    let shard_0 = grew("used_cpu_user_shard_0") + grew("used_cpu_sys_shard_0");
    assert!(
        shard_0 < shard_1,
        "shard 0 {shard_0} s, shard 1 {shard_1} s"
    );
    // The thread that answered is shard 0's.
    let main = seconds(&after, "used_cpu_user_main_thread");
    assert!(
        (main - seconds(&after, "used_cpu_user_shard_0")).abs() < 0.05,
        "{after:?}"
    );
}
