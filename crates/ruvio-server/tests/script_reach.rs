//! Scripts that touch keys they did not declare, on both shards, in forward mode
//! (crates/ruvio-server/src/mesh/script_lock.rs, docs/scripting.md): one Redis allows it,
//! so Ruvio must too. Replies are compared with a real redis-server byte for byte
//! (reads, writes, new keys, inner multi-key commands between shards, errors after
//! a write, pcall, EVALSHA, FCALL, undeclared keys of a declared key's slot, a
//! script known from a previous run), and under concurrent clients such scripts stay atomic (a reader
//! script always sees the same total while writer scripts move units between keys
//! of both shards) without deadlocking against borrowing commands and transactions.

mod common;

use common::*;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// `(a0, a1)` on shard 0 and `(b0, b1)` on shard 1 of 2.
fn keys() -> [String; 4] {
    [
        key_on_shard("sa", 0, 2),
        key_on_shard("sb", 0, 2),
        key_on_shard("sc", 1, 2),
        key_on_shard("sd", 1, 2),
    ]
}

const LIBRARY: &str = "#!lua name=reach
redis.register_function('move', function(keys, args)
  redis.call('decrby', args[1], args[3])
  return redis.call('incrby', args[2], args[3])
end)";

#[test]
fn undeclared_keys_of_both_shards_answer_as_one_redis() {
    let Some(servers) = DiffServers::forward("script_reach", 2) else {
        return;
    };
    let [a0, a1, b0, b1] = keys();
    let read_all = "local r = {} for i, k in ipairs(ARGV) do r[i] = redis.call('get', k) or false end return r";
    let incr_both = "redis.call('incr', KEYS[1]) redis.call('incr', ARGV[1]) \
                     return {redis.call('get', KEYS[1]), redis.call('get', ARGV[1])}";
    let new_keys = "for i = 1, 6 do redis.call('hset', 'job:' .. ARGV[1] .. i, 'n', i) end \
                    return redis.call('hgetall', 'job:' .. ARGV[1] .. '4')";
    let moves = "redis.call('rpush', ARGV[1], 'x', 'y', 'z') \
                 redis.call('lmove', ARGV[1], ARGV[2], 'LEFT', 'RIGHT') \
                 redis.call('rename', ARGV[2], ARGV[3]) \
                 redis.call('sadd', ARGV[4] .. 's', 'm1', 'm2') \
                 redis.call('sunionstore', ARGV[1] .. 'u', ARGV[4] .. 's', ARGV[3] .. 'none') \
                 return {redis.call('lrange', ARGV[1], 0, -1), redis.call('lrange', ARGV[3], 0, -1), \
                         redis.call('sort', ARGV[1] .. 'u', 'alpha')}";
    let fails_after_write = "redis.call('set', ARGV[1], 'text') return redis.call('incr', ARGV[1])";
    let caught = "local ok = redis.pcall('incr', ARGV[1]) \
                  redis.call('set', ARGV[2], 'after') return {ok['err'], redis.call('get', ARGV[2])}";
    // Undeclared keys of a declared key's slot: on its shard, wherever the script runs.
    let same_slot = "redis.call('set', KEYS[1] .. ':x', ARGV[1]) redis.call('rpush', KEYS[1] .. ':l', ARGV[1]) \
                     return {redis.call('incr', KEYS[1] .. ':x'), redis.call('lrange', KEYS[1] .. ':l', 0, -1)}";
    let (t0, t1) = (
        format!("{{{}}}", key_on_shard("tg", 0, 2)),
        format!("{{{}}}", key_on_shard("tg", 1, 2)),
    );
    let deletes = "return {redis.call('del', ARGV[1], ARGV[2], ARGV[3]), redis.call('exists', ARGV[1], ARGV[2])}";
    let sorted_keys = "local k = redis.call('keys', ARGV[1]) table.sort(k) return k";
    let (al, bl, b1l) = (format!("{a0}l"), format!("{b0}l"), format!("{b1}l"));
    let steps: Vec<Vec<&str>> = vec![
        vec!["mset", &a0, "1", &a1, "2", &b0, "3", &b1, "4"],
        // No keys: it runs on the client's shard and starts over if it must.
        vec!["eval", read_all, "0", &a0, &a1, &b0, &b1],
        // A declared key of each shard, and an undeclared one of the other, twice
        // (the second run is known to need the script lock).
        vec!["eval", incr_both, "1", &a0, &b0],
        vec!["eval", incr_both, "1", &a0, &b0],
        vec!["eval", incr_both, "1", &b1, &a1],
        vec!["eval", incr_both, "1", &b1, &a1],
        vec!["script", "load", incr_both],
        vec!["evalsha", "", "1", &a1, &b1],
        vec!["eval", new_keys, "0", "7"],
        vec!["eval", moves, "0", &al, &bl, &b1l, &a1],
        vec!["eval", fails_after_write, "0", &b0],
        vec!["get", &b0],
        vec!["eval", caught, "0", &b0, &a0],
        vec!["function", "load", LIBRARY],
        vec!["fcall", "move", "0", &a1, &b1, "5"],
        vec!["fcall", "move", "0", &b1, &a1, "2"],
        vec!["eval", read_all, "0", &a0, &a1, &b0, &b1],
        vec!["eval", deletes, "1", &b0, &b0, &a0, "job:71"],
        vec!["eval", same_slot, "1", &t0, "5"],
        vec!["eval", same_slot, "1", &t1, "6"],
        vec!["eval", same_slot, "1", &t0, "7"],
        vec!["eval", same_slot, "1", &t1, "8"],
        vec!["mget", &a0, &a1, &b0, &b1],
        vec!["hgetall", "job:76"],
        vec!["dbsize"],
        // KEYS and FLUSHDB from a script answer for every shard.
        vec!["eval", sorted_keys, "0", "*"],
        vec!["eval", sorted_keys, "0", "job:*"],
        vec!["eval", "return redis.call('flushdb')", "0"],
        vec!["dbsize"],
        vec!["eval", sorted_keys, "0", "*"],
    ];
    let mut redis = servers.reference.raw();
    let mut ruvio = servers.target.raw();
    for conn in [&mut redis, &mut ruvio] {
        assert_eq!(conn.cmd(&["flushall"]), b"+OK\r\n");
        assert_eq!(conn.cmd(&["function", "flush"]), b"+OK\r\n");
    }
    let sha = String::from_utf8(redis.cmd(&["script", "load", incr_both])[5..45].to_vec()).unwrap();
    for round in 0..2 {
        for step in &steps {
            let mut step = step.clone();
            if step[0] == "evalsha" {
                step[1] = &sha;
            }
            if step[0] == "function" && round == 1 {
                step.insert(2, "replace");
            }
            let expected = redis.cmd(&step);
            let got = ruvio.cmd(&step);
            assert_eq!(
                show(&got),
                show(&expected),
                "round {round}: {:?}",
                &step[..2]
            );
        }
    }
}

/// Wait for `workers`; fail the test if one has not finished after `limit` (a
/// deadlock would hang the test otherwise).
fn bounded(limit: Duration, workers: Vec<thread::JoinHandle<()>>) {
    let (done, finished) = mpsc::channel();
    let count = workers.len();
    for worker in workers {
        let done = done.clone();
        thread::spawn(move || {
            let result = worker.join();
            let _ = done.send(result.is_ok());
        });
    }
    for _ in 0..count {
        match finished.recv_timeout(limit) {
            Ok(true) => {}
            Ok(false) => panic!("a client failed"),
            Err(_) => panic!("clients still running after {limit:?}: deadlock"),
        }
    }
}

const TOTAL_PER_KEY: i64 = 100;

#[test]
fn scripts_on_undeclared_keys_stay_atomic_under_load() {
    let server = Server::forward(2);
    let counters: Vec<String> = (0..8)
        .map(|i| key_on_shard(&format!("ct{i}x"), i % 2, 2))
        .collect();
    let total = TOTAL_PER_KEY * counters.len() as i64;
    let mut c = server.raw();
    for key in &counters {
        assert_eq!(c.cmd(&["set", key, &TOTAL_PER_KEY.to_string()]), b"+OK\r\n");
    }
    let (r0, r1) = (key_on_shard("rn", 0, 2), key_on_shard("rn", 1, 2));
    assert_eq!(c.cmd(&["set", &r0, "v"]), b"+OK\r\n");
    let mover = "local n = tonumber(redis.call('get', ARGV[1])) \
                 if n > 0 then redis.call('decr', ARGV[1]) redis.call('incr', ARGV[2]) end return n";
    let declared_mover = "local n = tonumber(redis.call('get', KEYS[1])) \
                 if n > 0 then redis.call('decr', KEYS[1]) redis.call('incr', ARGV[1]) end return n";
    let sum = "local s = 0 for _, k in ipairs(ARGV) do s = s + tonumber(redis.call('get', k)) end return s";
    let rounds = 200;
    let mut workers = Vec::new();
    for w in 0..3 {
        let (port, counters) = (server.port(), counters.clone());
        workers.push(thread::spawn(move || {
            let mut c = RawConn::connect(port);
            for i in 0..rounds {
                let from = &counters[(i * 3 + w) % counters.len()];
                let to = &counters[(i * 5 + w + 1) % counters.len()];
                let reply = match (i + w) % 3 {
                    0 => c.cmd(&["eval", mover, "0", from, to]),
                    1 => c.cmd(&["eval", declared_mover, "1", from, to]),
                    _ => c.cmd(&["eval", mover, "2", from, to, from, to]),
                };
                assert_eq!(reply[0], b':', "{}", show(&reply));
            }
        }));
    }
    for w in 0..2 {
        let (port, counters) = (server.port(), counters.clone());
        workers.push(thread::spawn(move || {
            let mut c = RawConn::connect(port);
            for i in 0..rounds {
                let mut args = vec!["eval", sum, "0"];
                args.extend(counters.iter().map(String::as_str));
                let expected = format!(":{total}\r\n");
                assert_eq!(show(&c.cmd(&args)), show(expected.as_bytes()), "reader {w}");
                if i % 10 == 0 {
                    // A transaction over keys of both shards borrows them all.
                    assert_eq!(c.cmd(&["multi"]), b"+OK\r\n");
                    for key in &counters {
                        assert_eq!(c.cmd(&["get", key]), b"+QUEUED\r\n");
                    }
                    let reply = c.cmd(&["exec"]);
                    let values = parse_ints(&reply);
                    assert_eq!(values.iter().sum::<i64>(), total, "{}", show(&reply));
                }
            }
        }));
    }
    // Borrowing commands between the shards meanwhile.
    let port = server.port();
    workers.push(thread::spawn(move || {
        let mut c = RawConn::connect(port);
        for i in 0..rounds {
            let (from, to) = if i % 2 == 0 { (&r0, &r1) } else { (&r1, &r0) };
            assert_eq!(c.cmd(&["rename", from, to]), b"+OK\r\n");
            let list = c.cmd(&["lmove", from, to, "left", "right"]);
            assert!(
                list.starts_with(b"$-1") || list.starts_with(b"-WRONGTYPE"),
                "{}",
                show(&list)
            );
        }
    }));
    bounded(Duration::from_secs(120), workers);
    let mut args = vec!["eval", sum, "0"];
    args.extend(counters.iter().map(String::as_str));
    assert_eq!(c.cmd(&args), format!(":{total}\r\n").as_bytes());
}

/// The integers of a RESP2 array of bulk strings.
fn parse_ints(reply: &[u8]) -> Vec<i64> {
    let text = String::from_utf8_lossy(reply);
    text.split("\r\n")
        .filter(|line| !line.starts_with('*') && !line.starts_with('$') && !line.is_empty())
        .map(|n| {
            n.parse()
                .unwrap_or_else(|_| panic!("not a number in {text:?}"))
        })
        .collect()
}

/// Reaches keys outside its declared slots only when ARGV[1] says so: its
/// probation (its first run on a shard, under the script lock) reaches none, so
/// later runs go without the lock until one reaches.
const SOMETIMES: &str = "if ARGV[1] == 'reach' then \
                         return {redis.call('incr', ARGV[2]), redis.call('incr', ARGV[3])} end \
                         return 'stayed'";
const SOMETIMES_READS: &str = "if ARGV[1] == 'reach' then \
                               return {redis.call('get', ARGV[2]), redis.call('get', ARGV[3])} end \
                               return 'stayed'";

/// On a new connection (on either shard): SOMETIMES staying (its probation there,
/// when the shard is new to it), then reaching the two keys `keys`, in turns of
/// order by `round`; the second reply.
fn stay_then_reach(server: &Server, round: usize, keys: (&String, &String)) -> Vec<u8> {
    let mut c = server.raw();
    assert_eq!(
        c.cmd(&["eval", SOMETIMES, "0", "stay"]),
        b"$6\r\nstayed\r\n"
    );
    let (first, second) = if round.is_multiple_of(2) {
        keys
    } else {
        (keys.1, keys.0)
    };
    c.cmd(&["eval", SOMETIMES, "0", "reach", first, second])
}

#[test]
fn a_script_that_reaches_only_sometimes_takes_the_lock_when_it_does() {
    // Without a log the run takes the script lock where it reaches the key.
    let server = Server::forward(2);
    let [a0, _, b0, _] = keys();
    // Each connection lands on some shard: several, to run on both.
    for round in 1..=4 {
        let reply = stay_then_reach(&server, round, (&a0, &b0));
        let expected = format!("*2\r\n:{round}\r\n:{round}\r\n");
        assert_eq!(show(&reply), show(expected.as_bytes()));
    }
}

#[test]
fn a_forwarded_script_that_reaches_takes_the_lock_on_the_owner() {
    // Its declared key is on shard 1, the client on shard 0: after its probation
    // (borrowed to shard 0 under the lock) it runs forwarded on shard 1, where a
    // run that reaches a key of shard 0 takes the lock there.
    let server = Server::forward(2);
    let mut c = conn_on_shard(&server, 0);
    let [a0, _, b0, _] = keys();
    let script = "if ARGV[1] == 'reach' then redis.call('incr', ARGV[2]) end \
                  return redis.call('incr', KEYS[1])";
    assert_eq!(c.cmd(&["eval", script, "1", &b0, "stay"]), b":1\r\n");
    assert_eq!(c.cmd(&["eval", script, "1", &b0, "stay"]), b":2\r\n");
    assert_eq!(c.cmd(&["eval", script, "1", &b0, "reach", &a0]), b":3\r\n");
    assert_eq!(c.cmd(&["eval", script, "1", &b0, "reach", &a0]), b":4\r\n");
    assert_eq!(c.cmd(&["mget", &a0, &b0]), b"*2\r\n$1\r\n2\r\n$1\r\n4\r\n");
}

fn data_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ruvio-script-reach-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn with_a_log_a_script_that_reaches_starts_over_and_its_writes_last() {
    let dir = data_dir("everysec");
    let args = ["--dir", dir.to_str().unwrap(), "--durability", "everysec"];
    let server = Server::ruvio_with(PortMode::Forward, 2, &args);
    let [a0, a1, b0, b1] = keys();
    // A read-only run reaching another shard's key starts over under the lock.
    let mut c = server.raw();
    assert_eq!(c.cmd(&["mset", &a0, "1", &b0, "2"]), b"+OK\r\n");
    assert_eq!(
        c.cmd(&["eval", SOMETIMES_READS, "0", "stay"]),
        b"$6\r\nstayed\r\n"
    );
    for (first, second) in [(&a0, &b0), (&b0, &a0)] {
        let reply = c.cmd(&["eval", SOMETIMES_READS, "0", "reach", first, second]);
        let value = |k: &String| if *k == a0 { "1" } else { "2" };
        let expected = format!(
            "*2\r\n$1\r\n{}\r\n$1\r\n{}\r\n",
            value(first),
            value(second)
        );
        assert_eq!(show(&reply), show(expected.as_bytes()));
    }
    // One that wrote before it reached cannot start over: a log keeps its runs
    // from taking the lock midway, so that run gets Redis Cluster's error (its
    // first write stays, as after any script error) and the script is known from
    // then on (docs/scripting.md). Run from both shards' connections.
    let mut refused = 0;
    for round in 0..4 {
        let reply = stay_then_reach(&server, round, (&a1, &b1));
        if reply.starts_with(b"-ERR Script attempted to access a non local key in a cluster node") {
            refused += 1;
            continue;
        }
        assert!(reply.starts_with(b"*2\r\n:"), "{}", show(&reply));
    }
    assert!(
        refused <= 1,
        "refused {refused} times: the script is known after the first"
    );
    // Keys written through a script's loans are in their owners' logs.
    let mut c = server.raw();
    let script = "redis.call('set', ARGV[1], 'x') redis.call('set', ARGV[2], 'y') return 1";
    assert_eq!(c.cmd(&["eval", script, "0", "{w}0", "{w}7"]), b":1\r\n");
    let (w0, w1) = (key_on_shard("w", 0, 2), key_on_shard("w", 1, 2));
    assert_eq!(c.cmd(&["eval", script, "0", &w0, &w1]), b":1\r\n");
    let before = c.cmd(&["mget", &a0, &a1, &b0, &b1, &w0, &w1]);
    std::thread::sleep(Duration::from_millis(1600));
    drop(server); // SIGKILL
    let server = Server::ruvio_with(PortMode::Forward, 2, &args);
    let mut c = server.raw();
    wait_loaded(&mut c);
    assert_eq!(
        show(&c.cmd(&["mget", &a0, &a1, &b0, &b1, &w0, &w1])),
        show(&before)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Wait until the restarted server answers without -LOADING.
fn wait_loaded(c: &mut RawConn) {
    for _ in 0..500 {
        if !c.cmd(&["ping"]).starts_with(b"-LOADING") {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("still loading");
}

/// SCAN, RANDOMKEY and SWAPDB from a script see (and change) every shard, as from
/// one Redis: a scan loop inside the script, RANDOMKEY when every key is on the
/// other shard, SWAPDB then DBSIZE of both databases.
#[test]
fn scan_randomkey_and_swapdb_from_scripts_see_every_shard() {
    let Some(servers) = DiffServers::forward("script_reach_spread", 2) else {
        return;
    };
    let [a0, a1, b0, b1] = keys();
    let scan_all = "local seen, c = {}, '0' \
                    repeat local r = redis.call('scan', c, 'count', ARGV[1]) c = r[1] \
                    for _, k in ipairs(r[2]) do seen[#seen + 1] = k end until c == '0' \
                    table.sort(seen) return seen";
    let scan_once = "local r = redis.call('scan', '0', 'count', 1000) table.sort(r[2]) return r";
    let random = "local k = redis.call('randomkey') \
                  if not k then return 'none' end return redis.call('exists', k)";
    let swap = "redis.call('swapdb', 0, 1) local n0 = redis.call('dbsize') \
                redis.call('select', 1) return {n0, redis.call('dbsize'), redis.call('get', ARGV[1])}";
    let bad_cursor = "return redis.call('scan', 'x')";
    let steps: Vec<Vec<&str>> = vec![
        vec!["eval", random, "0"],
        vec!["set", &b0, "only"],
        vec!["eval", random, "0"],
        vec!["mset", &a0, "1", &a1, "2", &b1, "4"],
        vec!["eval", scan_all, "0", "1"],
        vec!["eval", scan_all, "0", "3"],
        vec!["eval", scan_once, "0"],
        vec!["eval", random, "0"],
        vec!["eval", swap, "0", &b0],
        vec!["dbsize"],
        vec!["eval", "return redis.call('dbsize')", "0"],
        vec!["eval", swap, "0", &a1],
        vec!["eval", scan_all, "0", "2"],
        vec!["eval", bad_cursor, "0"],
    ];
    let mut redis = servers.reference.raw();
    let mut ruvio = servers.target.raw();
    for conn in [&mut redis, &mut ruvio] {
        assert_eq!(conn.cmd(&["flushall"]), b"+OK\r\n");
    }
    for client_shard in 0..2 {
        let mut ruvio = conn_on_shard(&servers.target, client_shard);
        for step in &steps {
            let expected = redis.cmd(step);
            let got = ruvio.cmd(step);
            assert_eq!(
                show(&got),
                show(&expected),
                "client on shard {client_shard}: {step:?}"
            );
        }
        for conn in [&mut redis, &mut ruvio] {
            assert_eq!(conn.cmd(&["flushall"]), b"+OK\r\n");
        }
    }
    // A script holding a key of another shard may not swap databases (its key
    // would go home to the wrong one).
    let hold_then_swap = "redis.call('get', ARGV[1]) return redis.call('swapdb', 0, 1)";
    let mut on_0 = conn_on_shard(&servers.target, 0);
    let reply = on_0.cmd(&["eval", hold_then_swap, "0", &b0]);
    assert!(
        reply.starts_with(
            b"-ERR SWAPDB is not supported in a script that holds keys of other shards"
        ),
        "{}",
        show(&reply)
    );
    drop(ruvio);
}

/// Scripts on shard 0 that increment a key of shard 1 they did not declare run in
/// batches under the script lock (the key stays on shard 0 between them), while a
/// client of shard 1 increments the same key in a WATCH / MULTI / EXEC retry loop:
/// every write of a batch touches the watch on the key's owner, so no increment of
/// either side is lost.
#[test]
fn watches_see_the_writes_of_batched_scripts() {
    let server = Server::forward(2);
    let (declared, counter) = (key_on_shard("bw", 0, 2), key_on_shard("bc", 1, 2));
    let bump = "redis.call('incr', KEYS[1]) return redis.call('incr', ARGV[1])";
    let (scripters, per_scripter, watched_increments) = (4, 150, 60);
    let mut workers = Vec::new();
    for _ in 0..scripters {
        let (declared, counter) = (declared.clone(), counter.clone());
        let mut c = conn_on_shard(&server, 0);
        workers.push(thread::spawn(move || {
            let batch: Vec<u8> = (0..per_scripter)
                .flat_map(|_| encode(&["eval", bump, "1", &declared, &counter]))
                .collect();
            // Pipelined: many scripts wait for the lock at once, so they batch.
            c.send(&batch);
            for _ in 0..per_scripter {
                let reply = c.read_reply();
                assert_eq!(reply[0], b':', "{}", show(&reply));
            }
        }));
    }
    let counter_key = counter.clone();
    let mut c = conn_on_shard(&server, 1);
    workers.push(thread::spawn(move || {
        let mut done = 0;
        while done < watched_increments {
            assert_eq!(c.cmd(&["watch", &counter_key]), b"+OK\r\n");
            let now = parse_ints(&c.cmd(&["get", &counter_key]))
                .first()
                .copied()
                .unwrap_or(0);
            assert_eq!(c.cmd(&["multi"]), b"+OK\r\n");
            let value = (now + 1).to_string();
            assert_eq!(c.cmd(&["set", &counter_key, &value]), b"+QUEUED\r\n");
            if c.cmd(&["exec"]).starts_with(b"*1\r\n") {
                done += 1;
            }
        }
    }));
    bounded(Duration::from_secs(120), workers);
    let mut c = server.raw();
    let total = (scripters * per_scripter + watched_increments) as i64;
    let expected = format!("${}\r\n{total}\r\n", total.to_string().len());
    let got = c.cmd(&["get", &counter]);
    assert_eq!(
        show(&got),
        show(expected.as_bytes()),
        "an increment was lost"
    );
}

/// A confined script (its probation passed: it reaches only keys of its declared
/// key's slot) runs on its owner while another shard holds one of those undeclared
/// keys on loan: it waits for the key to come home, as one Redis would have run it
/// after the borrower's script, instead of seeing the key missing and writing a
/// fresh one that the loan's return would then overwrite (the BullMQ retry flake of
/// issue 37: a worker's moveToActive read a job hash with no `opts` while the
/// producer's first addJob run still held the hash on the other shard).
#[test]
fn a_confined_script_waits_for_an_undeclared_key_out_on_loan() {
    let server = Server::forward(2);
    let tag = format!("{{{}}}", hash_tag_on_shard(0, 2));
    let (declared, job) = (format!("{tag}:d"), format!("{tag}:d:job"));
    let mut owner_side = conn_on_shard(&server, 0);
    assert_eq!(owner_side.cmd(&["hset", &job, "f", "v"]), b":1\r\n");
    // The reader-writer: declares `declared`, reaches `<declared>:job`, confined
    // after its probation on shard 0.
    let touch = "redis.call('hset', KEYS[1] .. ':job', 'g', ARGV[1]) \
                 return redis.call('hgetall', KEYS[1] .. ':job')";
    for _ in 0..2 {
        let reply = owner_side.cmd(&["eval", touch, "1", &declared, "0"]);
        assert_eq!(
            show(&reply),
            show(b"*4\r\n$1\r\nf\r\n$1\r\nv\r\n$1\r\ng\r\n$1\r\n0\r\n")
        );
    }
    // A client of shard 1 runs a first-seen script on the job key (its probation:
    // under the script lock, the key borrowed to shard 1) for 400 ms.
    let slow = "redis.call('hset', KEYS[1], 'f', 'w') \
                local t = redis.call('time') local start = t[1] * 1000000 + t[2] \
                repeat t = redis.call('time') until t[1] * 1000000 + t[2] - start > 400000 \
                return 1";
    let mut borrower = conn_on_shard(&server, 1);
    borrower.send(&encode(&["eval", slow, "1", &job]));
    thread::sleep(Duration::from_millis(150));
    let reply = owner_side.cmd(&["eval", touch, "1", &declared, "1"]);
    assert_eq!(borrower.read_reply(), b":1\r\n");
    assert_eq!(
        show(&reply),
        show(b"*4\r\n$1\r\nf\r\n$1\r\nw\r\n$1\r\ng\r\n$1\r\n1\r\n"),
        "the confined script ran while its undeclared key was out on loan"
    );
    let after = owner_side.cmd(&["hgetall", &job]);
    assert_eq!(
        show(&after),
        show(b"*4\r\n$1\r\nf\r\n$1\r\nw\r\n$1\r\ng\r\n$1\r\n1\r\n")
    );
    // The same inside MULTI/EXEC on the owner.
    let slow_again = slow.replace("'w'", "'x'");
    borrower.send(&encode(&["eval", &slow_again, "1", &job]));
    thread::sleep(Duration::from_millis(150));
    assert_eq!(owner_side.cmd(&["multi"]), b"+OK\r\n");
    let queued = owner_side.cmd(&["eval", touch, "1", &declared, "2"]);
    assert_eq!(queued, b"+QUEUED\r\n");
    let reply = owner_side.cmd(&["exec"]);
    assert_eq!(borrower.read_reply(), b":1\r\n");
    assert_eq!(
        show(&reply),
        show(b"*1\r\n*4\r\n$1\r\nf\r\n$1\r\nx\r\n$1\r\ng\r\n$1\r\n2\r\n"),
        "the transaction's script ran while its undeclared key was out on loan"
    );
}
