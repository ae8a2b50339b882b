//! Scripts inside MULTI/EXEC in forward mode with 2 shards: a script may use keys it
//! did not declare, of its declared keys' slot (what BullMQ's FlowProducer does in a
//! MULTI) or of any shard (as one Redis allows). EXEC runs such a queue on borrowed
//! keys under the script lock (docs/transactions.md), so the scripts borrow what
//! they reach as they run and the transaction stays isolated: replies compared with
//! a real redis-server, and other clients never see part of one under load.

mod common;

use common::*;

const SHARDS: usize = 2;

/// Sets an undeclared key of KEYS[1]'s hash tag and answers it with KEYS[1]'s value.
const SIBLING: &str = "
local sibling = '{' .. ARGV[1] .. '}sibling'
redis.call('set', sibling, ARGV[2])
return {redis.call('incr', KEYS[1]), redis.call('get', sibling)}";

#[test]
fn a_script_in_exec_uses_undeclared_keys_of_its_slot_from_either_shard() {
    let server = Server::forward(SHARDS);
    for (round, client_shard) in [0, 1, 0, 1].into_iter().enumerate() {
        let mut c = conn_on_shard(&server, client_shard);
        for key_shard in 0..SHARDS {
            let tag = key_on_shard("tag", key_shard, SHARDS);
            let key = format!("{{{tag}}}counter");
            let value = format!("v{round}");
            let sibling = format!("{{{tag}}}sibling");
            assert_eq!(c.cmd(&["multi"]), b"+OK\r\n");
            let queued = c.cmd(&["eval", SIBLING, "1", &key, &tag, &value]);
            assert_eq!(queued, b"+QUEUED\r\n");
            assert_eq!(c.cmd(&["get", &sibling]), b"+QUEUED\r\n");
            let reply = c.cmd(&["exec"]);
            let expected = format!(
                "*2\r\n*2\r\n:{}\r\n${}\r\n{value}\r\n${}\r\n{value}\r\n",
                round + 1,
                value.len(),
                value.len()
            );
            assert_eq!(
                show(&reply),
                show(expected.as_bytes()),
                "client on shard {client_shard}, keys on shard {key_shard}"
            );
        }
    }
}

/// Moves one unit from ARGV[1] to ARGV[2], keys it does not declare, wherever they live.
const MOVE_UNDECLARED: &str = "redis.call('decr', ARGV[1]) return redis.call('incr', ARGV[2])";

#[test]
fn a_transaction_with_scripts_reaching_other_shards_answers_as_one_redis() {
    let Some(servers) = DiffServers::forward("transaction_scripts", SHARDS) else {
        return;
    };
    let (a, b) = (key_on_shard("ta", 0, SHARDS), key_on_shard("tb", 1, SHARDS));
    let (c, d) = (key_on_shard("tc", 1, SHARDS), key_on_shard("td", 0, SHARDS));
    let job = "for i = 1, 4 do redis.call('hset', 'job:' .. ARGV[1] .. i, 'n', i) end \
               return redis.call('hgetall', 'job:' .. ARGV[1] .. '3')";
    let sorted_keys = "local k = redis.call('keys', ARGV[1]) table.sort(k) return k";
    let transactions: Vec<Vec<Vec<&str>>> = vec![
        vec![vec!["mset", &a, "10", &b, "10", &c, "10", &d, "10"]],
        vec![
            vec!["eval", MOVE_UNDECLARED, "0", &a, &b],
            vec!["incr", &c],
            vec!["eval", MOVE_UNDECLARED, "1", &d, &c, &a],
            vec!["mget", &a, &b, &c, &d],
        ],
        // Again: the scripts are known to reach other shards now.
        vec![
            vec!["eval", MOVE_UNDECLARED, "0", &b, &a],
            vec!["eval", MOVE_UNDECLARED, "0", &c, &d],
            vec!["get", &a],
        ],
        // A key one command of the queue names and a script reaches.
        vec![
            vec!["set", &b, "text"],
            vec!["eval", MOVE_UNDECLARED, "0", &a, &b],
            vec!["get", &a],
        ],
        vec![vec!["eval", job, "0", "5"], vec!["hget", "job:52", "n"]],
        vec![
            vec!["eval", sorted_keys, "0", "*"],
            vec!["eval", MOVE_UNDECLARED, "0", &c, &d],
            vec!["eval", "return redis.call('dbsize')", "0"],
        ],
    ];
    let mut redis = servers.reference.raw();
    let mut ruvio = conn_on_shard(&servers.target, 1);
    for conn in [&mut redis, &mut ruvio] {
        assert_eq!(conn.cmd(&["flushall"]), b"+OK\r\n");
    }
    for round in 0..2 {
        for queue in &transactions {
            let (expected, got) = transaction_on_both(&mut redis, &mut ruvio, queue);
            assert_eq!(show(&got), show(&expected), "round {round}: {queue:?}");
        }
    }
}

/// A transaction moving units between keys of both shards, with scripts that name
/// keys they did not declare between its other commands, or with commands each
/// shard answers and connection commands: no other client ever sees a total that
/// is off (a transaction seen half run).
#[test]
fn transactions_with_scripts_across_shards_stay_isolated_under_load() {
    let server = Server::forward(SHARDS);
    let counters: Vec<String> = (0..6)
        .map(|i| key_on_shard(&format!("iso{i}x"), i % SHARDS, SHARDS))
        .collect();
    const PER_KEY: i64 = 1000;
    let total = PER_KEY * counters.len() as i64;
    let mut c = server.raw();
    for key in &counters {
        assert_eq!(c.cmd(&["set", key, &PER_KEY.to_string()]), b"+OK\r\n");
    }
    // The mover's first runs, outside MULTI: it is known to reach other shards from
    // then on.
    for (from, to) in [(&counters[0], &counters[1]), (&counters[1], &counters[0])] {
        assert_eq!(c.cmd(&["eval", MOVE_UNDECLARED, "0", from, to])[0], b':');
    }
    let sum = "local s = 0 for _, k in ipairs(ARGV) do s = s + tonumber(redis.call('get', k)) end return s";
    let rounds = 150;
    let mut workers = Vec::new();
    for w in 0..3 {
        let (port, counters) = (server.port(), counters.clone());
        workers.push(std::thread::spawn(move || {
            let mut c = RawConn::connect(port);
            for i in 0..rounds {
                let n = counters.len();
                let (x, y, z) = (
                    &counters[(i + w) % n],
                    &counters[(i * 5 + w + 1) % n],
                    &counters[(i * 7 + w + 2) % n],
                );
                assert_eq!(c.cmd(&["multi"]), b"+OK\r\n");
                assert_eq!(c.cmd(&["decr", x]), b"+QUEUED\r\n");
                let queued = c.cmd(&["eval", MOVE_UNDECLARED, "0", z, y]);
                assert_eq!(queued, b"+QUEUED\r\n");
                assert_eq!(c.cmd(&["incr", z]), b"+QUEUED\r\n");
                let queued = c.cmd(&["eval", MOVE_UNDECLARED, "0", y, x]);
                assert_eq!(queued, b"+QUEUED\r\n");
                let reply = c.cmd(&["exec"]);
                let error = reply.windows(3).any(|w| w == b"\n-E" || w == b"\n-T");
                assert!(reply.starts_with(b"*4\r\n") && !error, "{}", show(&reply));
            }
        }));
    }
    // Transactions with commands each shard answers (DBSIZE, KEYS) and connection
    // commands (SELECT, PING, ECHO) between their moves: isolated as well.
    for w in 0..2 {
        let (port, counters) = (server.port(), counters.clone());
        workers.push(std::thread::spawn(move || {
            let mut c = RawConn::connect(port);
            for i in 0..rounds {
                let n = counters.len();
                let (x, y) = (&counters[(i + w) % n], &counters[(i * 5 + w + 1) % n]);
                let queue: [&[&str]; 8] = [
                    &["decr", x],
                    &["ping"],
                    &["dbsize"],
                    &["select", "1"],
                    &["keys", "iso*"],
                    &["select", "0"],
                    &["echo", "e"],
                    &["incr", y],
                ];
                assert_eq!(c.cmd(&["multi"]), b"+OK\r\n");
                for command in queue {
                    assert_eq!(c.cmd(command), b"+QUEUED\r\n");
                }
                let reply = c.cmd(&["exec"]);
                let error = reply.windows(2).any(|w| w == b"\n-");
                assert!(reply.starts_with(b"*8\r\n") && !error, "{}", show(&reply));
            }
        }));
    }
    for w in 0..2 {
        let (port, counters) = (server.port(), counters.clone());
        workers.push(std::thread::spawn(move || {
            let mut c = RawConn::connect(port);
            for i in 0..rounds * 2 {
                let reply = match i % 2 {
                    0 => {
                        let mut args = vec!["eval", sum, "0"];
                        args.extend(counters.iter().map(String::as_str));
                        c.cmd(&args)
                    }
                    _ => {
                        // A transaction of GETs borrows every key at once (an MGET
                        // across shards is split: not atomic, docs/cross-shard.md).
                        assert_eq!(c.cmd(&["multi"]), b"+OK\r\n");
                        for key in &counters {
                            assert_eq!(c.cmd(&["get", key]), b"+QUEUED\r\n");
                        }
                        let values = c.cmd(&["exec"]);
                        let text = String::from_utf8_lossy(&values).to_string();
                        let s: i64 = text
                            .split("\r\n")
                            .filter(|l| !l.is_empty() && !l.starts_with('*') && !l.starts_with('$'))
                            .map(|v| v.parse::<i64>().expect("a number"))
                            .sum();
                        format!(":{s}\r\n").into_bytes()
                    }
                };
                let expected = format!(":{total}\r\n");
                assert_eq!(
                    show(&reply),
                    show(expected.as_bytes()),
                    "reader {w} round {i}"
                );
            }
        }));
    }
    for worker in workers {
        worker.join().expect("a client failed");
    }
    let mut args = vec!["eval", sum, "0"];
    args.extend(counters.iter().map(String::as_str));
    assert_eq!(c.cmd(&args), format!(":{total}\r\n").as_bytes());
}

/// PUBLISH inside a transaction over keys of both shards counts the subscribers
/// of every shard (as one Redis) and reaches them; TIME answers its two numbers.
#[test]
fn publish_and_time_in_a_transaction_across_shards() {
    let server = Server::forward(SHARDS);
    let mut subscribers: Vec<RawConn> = (0..SHARDS)
        .map(|shard| {
            let mut s = conn_on_shard(&server, shard);
            let reply = s.cmd(&["subscribe", "txch"]);
            assert!(
                reply.starts_with(b"*3\r\n$9\r\nsubscribe"),
                "{}",
                show(&reply)
            );
            s
        })
        .collect();
    let (a, b) = (key_on_shard("pa", 0, SHARDS), key_on_shard("pb", 1, SHARDS));
    for client_shard in 0..SHARDS {
        let mut c = conn_on_shard(&server, client_shard);
        assert_eq!(c.cmd(&["multi"]), b"+OK\r\n");
        for command in [
            vec!["set", a.as_str(), "1"],
            vec!["publish", "txch", "hello"],
            vec!["time"],
            vec!["set", b.as_str(), "2"],
        ] {
            assert_eq!(c.cmd(&command), b"+QUEUED\r\n");
        }
        let reply = c.cmd(&["exec"]);
        let text = show(&reply);
        assert!(reply.starts_with(b"*4\r\n+OK\r\n:2\r\n*2\r\n$"), "{text}");
        assert!(reply.ends_with(b"+OK\r\n"), "{text}");
        for s in subscribers.iter_mut() {
            let message = s.read_reply();
            assert_eq!(
                show(&message),
                show(b"*3\r\n$7\r\nmessage\r\n$4\r\ntxch\r\n$5\r\nhello\r\n")
            );
        }
    }
}

/// A script never run before, queued alone over one other shard's key, that reaches
/// a key of the client's shard while other clients' scripts keep the script lock
/// busy: its first run is its probation under the lock (never Redis Cluster's
/// `non local key` error, which a run on the owner without the lock would meet).
#[test]
fn a_new_script_in_exec_reaching_another_shard_never_meets_the_cluster_error() {
    let server = Server::forward(SHARDS);
    let (mine, theirs) = (key_on_shard("nw", 0, SHARDS), key_on_shard("nt", 1, SHARDS));
    let busy: Vec<String> = (0..4)
        .map(|i| key_on_shard(&format!("busy{i}"), i % SHARDS, SHARDS))
        .collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut lockers = Vec::new();
    for w in 0..2 {
        let (port, busy, stop) = (server.port(), busy.clone(), stop.clone());
        lockers.push(std::thread::spawn(move || {
            let mut c = RawConn::connect(port);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let reply = c.cmd(&["eval", MOVE_UNDECLARED, "0", &busy[w], &busy[w + 1]]);
                assert_eq!(reply[0], b':', "{}", show(&reply));
            }
        }));
    }
    let mut c = conn_on_shard(&server, 0);
    for round in 0..300 {
        // A new script each round (its text differs), declaring a key of shard 1 and
        // reaching one of shard 0.
        let script =
            format!("-- {round}\nredis.call('incr', ARGV[1]) return redis.call('incr', KEYS[1])");
        assert_eq!(c.cmd(&["multi"]), b"+OK\r\n");
        assert_eq!(
            c.cmd(&["eval", &script, "1", &theirs, &mine]),
            b"+QUEUED\r\n"
        );
        let reply = c.cmd(&["exec"]);
        let expected = format!("*1\r\n:{}\r\n", round + 1);
        assert_eq!(show(&reply), show(expected.as_bytes()), "round {round}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for locker in lockers {
        locker.join().expect("a locking client failed");
    }
    assert_eq!(c.cmd(&["get", &mine]), b"$3\r\n300\r\n");
}

/// With a log (a script may not take the lock in the middle of a run then): a
/// script that passed its probation on its keys' shard and reaches another shard's
/// key on a branch its probation did not take, inside a transaction run in turn,
/// gets Redis Cluster's error for that call instead of borrowing, which would
/// leave the queue half run while it waits; the transaction's other commands are
/// applied, and the script is known from then on: the next such transaction runs
/// borrowed and reaches the key.
#[test]
fn a_confined_script_reaching_another_shard_in_exec_under_a_log_gets_the_cluster_error() {
    let dir = std::env::temp_dir().join(format!("ruvio-tx-branch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let server = Server::ruvio_with(
        PortMode::Forward,
        SHARDS,
        &["--dir", dir.to_str().unwrap(), "--durability", "everysec"],
    );
    let (mine, other, theirs) = (
        key_on_shard("branch-mine", 0, SHARDS),
        key_on_shard("branch-other", 0, SHARDS),
        key_on_shard("branch-theirs", 1, SHARDS),
    );
    let script = "if ARGV[1] == '1' then return redis.call('incr', ARGV[2]) end \
                  return redis.call('incr', KEYS[1])";
    let mut c = conn_on_shard(&server, 0);
    assert_eq!(c.cmd(&["eval", script, "1", &mine, "0"]), b":1\r\n");
    let in_exec = |c: &mut RawConn| {
        assert_eq!(c.cmd(&["multi"]), b"+OK\r\n");
        assert_eq!(c.cmd(&["incr", &other]), b"+QUEUED\r\n");
        assert_eq!(
            c.cmd(&["eval", script, "1", &mine, "1", &theirs]),
            b"+QUEUED\r\n"
        );
        c.cmd(&["exec"])
    };
    let refused = in_exec(&mut c);
    assert!(
        refused.starts_with(b"*2\r\n:1\r\n-ERR Script attempted to access a non local key"),
        "{}",
        show(&refused)
    );
    assert_eq!(show(&in_exec(&mut c)), show(b"*2\r\n:2\r\n:1\r\n"));
    assert_eq!(
        c.cmd(&["mget", &mine, &other, &theirs]),
        b"*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n1\r\n"
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
