//! Blocked clients are served when Redis serves them: after the whole command,
//! transaction or script that made a key ready, with the key looked at again then.
//! Each scenario runs against redis-server and against Ruvio in forward mode with
//! 1 and 2 shards (the blocked key and the writer's connection on either shard);
//! what the blocked client receives (or that it still waits) must be the same.

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// How long a blocked client is watched for a reply it should not get.
const QUIET: Duration = Duration::from_millis(300);

/// A client that sends a blocking command and is then watched.
struct Waiter {
    stream: TcpStream,
}

impl Waiter {
    fn connect(port: u16) -> Waiter {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        Waiter { stream }
    }

    fn send(&mut self, args: &[&str]) {
        self.stream.write_all(&encode(args)).expect("send");
    }

    /// What arrived within `wait`: the bytes, or `waiting` when nothing did.
    fn received(&mut self, wait: Duration) -> String {
        self.stream.set_read_timeout(Some(wait)).expect("timeout");
        let mut buf = [0u8; 4096];
        match self.stream.read(&mut buf) {
            Ok(n) if n > 0 => show(&buf[..n]),
            _ => "waiting".to_string(),
        }
    }
}

/// One scenario: `setup` by the writer, the waiter's blocking command, the
/// writer's commands, then what the waiter got; then `after` by the writer and
/// what the waiter got then. The transcript lists every reply.
struct Scenario {
    name: &'static str,
    /// The waiter's SELECT first, if any.
    waiter_db: Option<&'static str>,
    blocking: &'static [&'static str],
    writes: &'static [&'static [&'static str]],
    after: &'static [&'static [&'static str]],
}

/// The blocking command of the XREADGROUP scenarios: consumer `c` of group `g`
/// (which `run` creates) waits forever for a new entry of `{k}group`.
const XREADGROUP_NEW: &[&str] = &[
    "xreadgroup",
    "group",
    "g",
    "c",
    "block",
    "0",
    "streams",
    "{k}group",
    ">",
];

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "LPUSH then DEL in one EXEC wakes nobody",
        waiter_db: None,
        blocking: &["blpop", "{k}list", "0"],
        writes: &[
            &["multi"],
            &["lpush", "{k}list", "x"],
            &["del", "{k}list"],
            &["exec"],
        ],
        after: &[&["lpush", "{k}list", "later"]],
    },
    Scenario {
        name: "LPUSH, DEL, SET in one EXEC keeps BLPOP waiting",
        waiter_db: None,
        blocking: &["blpop", "{k}list", "0"],
        writes: &[
            &["multi"],
            &["lpush", "{k}list", "x"],
            &["del", "{k}list"],
            &["set", "{k}list", "str"],
            &["exec"],
        ],
        after: &[&["del", "{k}list"], &["rpush", "{k}list", "later"]],
    },
    Scenario {
        name: "LPUSH then DEL in one script wakes nobody",
        waiter_db: None,
        blocking: &["blpop", "{k}list", "0"],
        writes: &[&[
            "eval",
            "redis.call('lpush', KEYS[1], 'x') redis.call('del', KEYS[1]) return 1",
            "1",
            "{k}list",
        ]],
        after: &[&["lpush", "{k}list", "later"]],
    },
    Scenario {
        name: "the blocked client sees the state after EXEC",
        waiter_db: None,
        blocking: &["blpop", "{k}list", "0"],
        writes: &[
            &["multi"],
            &["lpush", "{k}list", "a"],
            &["lpush", "{k}list", "b"],
            &["lrange", "{k}list", "0", "-1"],
            &["exec"],
        ],
        after: &[&["lrange", "{k}list", "0", "-1"]],
    },
    Scenario {
        name: "BLMPOP after a transaction that pushed several",
        waiter_db: None,
        blocking: &["blmpop", "0", "1", "{k}list", "left", "count", "5"],
        writes: &[
            &["multi"],
            &["rpush", "{k}list", "a", "b", "c"],
            &["lpop", "{k}list"],
            &["exec"],
        ],
        after: &[&["exists", "{k}list"]],
    },
    Scenario {
        name: "LPUSH then DEL in one EXEC keeps BLMPOP waiting",
        waiter_db: None,
        blocking: &["blmpop", "0", "1", "{k}list", "right", "count", "2"],
        writes: &[
            &["multi"],
            &["lpush", "{k}list", "x"],
            &["del", "{k}list"],
            &["exec"],
        ],
        after: &[&["rpush", "{k}list", "p", "q", "r"]],
    },
    Scenario {
        name: "XADD then DEL in one EXEC answers XREADGROUP as Redis",
        waiter_db: None,
        blocking: XREADGROUP_NEW,
        writes: &[
            &["multi"],
            &["xadd", "{k}group", "1-1", "f", "v"],
            &["del", "{k}group"],
            &["exec"],
        ],
        after: &[&["exists", "{k}group"]],
    },
    Scenario {
        name: "ZADD then DEL in one EXEC keeps BZPOPMIN waiting",
        waiter_db: None,
        blocking: &["bzpopmin", "{k}zset", "0"],
        writes: &[
            &["multi"],
            &["zadd", "{k}zset", "1", "a"],
            &["del", "{k}zset"],
            &["exec"],
        ],
        after: &[&["zadd", "{k}zset", "2", "b"]],
    },
    Scenario {
        name: "BZMPOP after ZADD and ZREM in one EXEC",
        waiter_db: None,
        blocking: &["bzmpop", "0", "1", "{k}zset", "max"],
        writes: &[
            &["multi"],
            &["zadd", "{k}zset", "1", "a", "2", "b"],
            &["zrem", "{k}zset", "b"],
            &["exec"],
        ],
        after: &[&["zcard", "{k}zset"]],
    },
    Scenario {
        name: "XADD then DEL in one EXEC keeps XREAD waiting",
        waiter_db: None,
        blocking: &["xread", "block", "0", "streams", "{k}stream", "$"],
        writes: &[
            &["multi"],
            &["xadd", "{k}stream", "1-1", "f", "v"],
            &["del", "{k}stream"],
            &["exec"],
        ],
        after: &[&["xadd", "{k}stream", "2-1", "f", "w"]],
    },
    Scenario {
        name: "XREAD woken by several XADDs in one EXEC gets them all",
        waiter_db: None,
        blocking: &["xread", "block", "0", "streams", "{k}stream", "$"],
        writes: &[
            &["multi"],
            &["xadd", "{k}stream", "1-1", "f", "v"],
            &["xadd", "{k}stream", "2-1", "f", "w"],
            &["exec"],
        ],
        after: &[&["xlen", "{k}stream"]],
    },
    Scenario {
        name: "XREADGROUP whose stream becomes a string in one EXEC",
        waiter_db: None,
        blocking: XREADGROUP_NEW,
        writes: &[
            &["multi"],
            &["del", "{k}group"],
            &["set", "{k}group", "str"],
            &["exec"],
        ],
        after: &[&["get", "{k}group"]],
    },
    Scenario {
        name: "SWAPDB wakes a client blocked on a key it brings in",
        waiter_db: Some("1"),
        blocking: &["blpop", "{k}list", "0"],
        writes: &[&["lpush", "{k}list", "v"], &["swapdb", "0", "1"]],
        after: &[&["swapdb", "0", "1"]],
    },
];

/// Run `scenario` against the server on `port`: the transcript of replies.
fn run(port: u16, scenario: &Scenario) -> Vec<String> {
    let mut writer = RawConn::connect(port);
    let mut transcript = Vec::new();
    writer.cmd(&["flushall"]);
    // The group XREADGROUP scenarios wait in.
    writer.cmd(&["xgroup", "create", "{k}group", "g", "$", "mkstream"]);
    let mut waiter = Waiter::connect(port);
    if let Some(db) = scenario.waiter_db {
        waiter.send(&["select", db]);
        transcript.push(format!(
            "select: {}",
            waiter.received(Duration::from_secs(5))
        ));
    }
    waiter.send(scenario.blocking);
    // The waiter is parked before anything is written.
    std::thread::sleep(Duration::from_millis(100));
    for args in scenario.writes {
        transcript.push(format!("{args:?}: {}", show(&writer.cmd(args))));
    }
    transcript.push(format!("waiter: {}", waiter.received(QUIET)));
    for args in scenario.after {
        transcript.push(format!("{args:?}: {}", show(&writer.cmd(args))));
    }
    transcript.push(format!("waiter then: {}", waiter.received(QUIET)));
    transcript
}

#[test]
fn blocked_clients_are_served_after_the_whole_transaction_as_redis() {
    let Some(_) = require_redis_server("blocked_wake") else {
        return;
    };
    let redis = Server::redis();
    let ruvio_one = Server::ruvio(PortMode::Forward, 1);
    let ruvio_two = Server::ruvio(PortMode::Forward, 2);
    for scenario in SCENARIOS {
        let expected = run(redis.port(), scenario);
        for (label, server) in [("1 shard", &ruvio_one), ("2 shards", &ruvio_two)] {
            // Two shards: the writer and the waiter land on either shard; a few
            // runs put the waiter's key owner and the connections apart.
            let runs = if label == "2 shards" { 4 } else { 1 };
            for _ in 0..runs {
                let got = run(server.port(), scenario);
                assert_eq!(
                    got, expected,
                    "{}: Ruvio {label} differs from Redis",
                    scenario.name
                );
            }
        }
    }
}
