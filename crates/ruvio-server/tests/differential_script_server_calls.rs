//! Server commands called from scripts, against a real `redis-server` 7.0 and Ruvio
//! (forward mode, 2 shards), RESP2 and RESP3, byte for byte: TIME, PING, ECHO and
//! SELECT (scoped to the script: the caller's database is unchanged after it), their
//! arity errors, `noscript` commands (`This Redis command is not allowed from
//! script`), unknown subcommands, and read-only scripts calling them; LASTSAVE;
//! DBSIZE and INFO keyspace counting every shard's keys; INFO's text and its RESP3
//! verbatim string as a Lua table; PUBLISH and SPUBLISH from scripts and
//! functions reaching subscribers on both shards (channels, patterns, shard
//! channels) with Redis' receiver counts and messages, and PUBSUB's counts seen
//! from a script. Per-shard mode (Redis
//! Cluster's rules, checked against a Redis cluster with `RUVIO_TEST_TARGET=redis`):
//! a script's PUBLISH counts the node's subscribers and reaches every node's,
//! SPUBLISH to another node's shard channel is refused.

mod common;

use common::*;

/// The corpus: one command per line, words split on `|`.
const CORPUS: &[&str] = &[
    "eval|return redis.call('ping')|0",
    "eval|return redis.call('PING', 'hi')|0",
    "eval|return redis.pcall('ping', 'a', 'b')|0",
    "eval|return redis.call('ping', 'a', 'b')|0",
    "eval|return redis.call('echo', 'x')|0",
    "eval|return redis.call('echo')|0",
    "eval|return #redis.call('time')|0",
    "eval|local t = redis.call('time') return {tonumber(t[1]) > 1600000000, tonumber(t[2]) < 1000000, type(t[1])}|0",
    "eval|return redis.call('time', 1)|0",
    "eval_ro|return redis.call('ping')|0",
    "eval_ro|return #redis.call('time')|0",
    // SELECT lasts until the script ends.
    "set|{s}k|in0",
    "eval|return redis.call('select', 1)|0",
    "eval|redis.call('select', 1) redis.call('set', KEYS[1], 'in1') return redis.call('get', KEYS[1])|1|{s}k",
    "get|{s}k",
    "select|1",
    "get|{s}k",
    "eval|redis.call('select', 0) return redis.call('get', KEYS[1])|1|{s}k",
    "get|{s}k",
    "del|{s}k",
    "select|0",
    "eval|return redis.call('select', 'x')|0",
    "eval|return redis.call('select', 99)|0",
    "eval|return redis.call('select', -1)|0",
    "eval|return redis.pcall('select', 99)|0",
    // Commands scripts may not call.
    "eval|return redis.call('multi')|0",
    "eval|return redis.call('exec')|0",
    "eval|return redis.call('watch', KEYS[1])|1|{s}k",
    "eval|return redis.call('subscribe', 'c')|0",
    "eval|return redis.call('auth', 'x')|0",
    "eval|return redis.call('hello')|0",
    "eval|return redis.call('client', 'list')|0",
    "eval|return redis.call('client', 'setname')|0",
    "eval|return redis.call('client', 'nosuch')|0",
    "eval|return redis.call('config', 'get', 'hz')|0",
    "eval|return redis.call('config', 'get')|0",
    "eval|return redis.call('script', 'kill')|0",
    "eval|return redis.call('save')|0",
    "eval|return redis.pcall('multi')|0",
    "eval|return redis.call('nosuchcommand')|0",
    // Publishing with nobody subscribed; arity; read-only scripts may not publish.
    "eval|return redis.call('publish', 'nobody', 'm')|0",
    "eval|return redis.call('spublish', 'nobody', 'm')|0",
    "eval|return redis.call('publish', 'c')|0",
    "eval|return redis.pcall('spublish', 'c', 'm', 'x')|0",
    "eval_ro|return redis.call('publish', 'c', 'm')|0",
    "eval_ro|return redis.call('spublish', 'c', 'm')|0",
    "eval_ro|return redis.pcall('publish', 'c', 'm')|0",
    // LASTSAVE (the values differ: checked as a recent time).
    "eval|return type(redis.call('lastsave'))|0",
    "eval_ro|return redis.call('lastsave') > 1600000000|0",
    "eval|return redis.call('lastsave', 1)|0",
    "eval|return redis.call('dbsize', 1)|0",
    // INFO: a section that is the same text on both, RESP3's verbatim string as
    // a Lua table, a section nobody has, the first line.
    "eval|return redis.call('info', 'cluster')|0",
    "eval_ro|return redis.call('INFO', 'Cluster')|0",
    "eval|redis.setresp(3) local r = redis.call('info', 'cluster') return {type(r), r.verbatim_string.format, r.verbatim_string.string}|0",
    "eval|redis.setresp(3) return redis.call('info', 'cluster')|0",
    "eval|return redis.call('info', 'nosuchsection')|0",
    "eval|return string.sub(redis.call('info'), 1, 10)|0",
    "eval|return string.sub(redis.call('info', 'everything'), 1, 10)|0",
    "ping",
];

#[test]
fn server_commands_from_scripts_answer_as_redis() {
    if require_redis_server("server_commands_from_scripts_answer_as_redis").is_none() {
        return;
    }
    let servers = (&Server::redis(), &Server::forward(2));
    for resp3 in [false, true] {
        run_corpus(CORPUS, servers, resp3, protocol_name(resp3));
    }
}

/// DBSIZE and INFO keyspace from a script count the keys of every shard (the other
/// shards' as they last published them, on their 10 ms tick: the test waits past it).
#[test]
fn dbsize_from_a_script_counts_every_shard() {
    if require_redis_server("dbsize_from_a_script_counts_every_shard").is_none() {
        return;
    }
    let redis = Server::redis();
    let ruvio = Server::forward(2);
    for resp3 in [false, true] {
        let mut reference = redis.raw();
        let mut target = ruvio.raw();
        if resp3 {
            reference.cmd(&["hello", "3"]);
            target.cmd(&["hello", "3"]);
        }
        let label = if resp3 { "RESP3" } else { "RESP2" };
        let mut both = |words: &[&str]| {
            let want = reference.cmd(words);
            let got = target.cmd(words);
            assert_eq!(show(&got), show(&want), "{label}: {words:?}");
        };
        both(&["flushall"]);
        for i in 0..20 {
            both(&["set", &format!("key:{i}"), "v"]);
        }
        both(&["select", "1"]);
        for i in 0..3 {
            both(&["set", &format!("other:{i}"), "v"]);
        }
        both(&["select", "0"]);
        std::thread::sleep(std::time::Duration::from_millis(200));
        both(&["eval", "return redis.call('dbsize')", "0"]);
        both(&["eval_ro", "return redis.call('DBSIZE')", "0"]);
        both(&["eval", "return redis.call('dbsize')", "1", "key:3"]);
        both(&["eval", "return redis.call('dbsize')", "1", "key:4"]);
        both(&[
            "eval",
            "redis.call('select', 1) return redis.call('dbsize')",
            "0",
        ]);
        both(&["eval", "return redis.call('dbsize')", "0"]);
        // INFO keyspace from a script: every shard's keys, every database.
        both(&["eval", "return redis.call('info', 'keyspace')", "0"]);
        both(&[
            "eval",
            "return redis.call('info', 'keyspace')",
            "1",
            "key:4",
        ]);
    }
}

/// A publisher and three subscribers: on Ruvio the publisher and the first
/// subscriber on shard 0, the others on shard 1.
struct PubSubSide {
    publisher: RawConn,
    subscribers: Vec<RawConn>,
    resp3: bool,
}

/// What each subscriber subscribes to.
const SUBSCRIPTIONS: &[&[&str]] = &[
    &["subscribe", "news"],
    &["psubscribe", "n*"],
    &["ssubscribe", "{s}sc"],
];

impl PubSubSide {
    fn new(server: &Server, on_shards: bool, resp3: bool) -> PubSubSide {
        let conn = |shard| match on_shards {
            true => conn_on_shard(server, shard),
            false => server.raw(),
        };
        let publisher = conn(0);
        let mut subscribers = vec![conn(0), conn(1), conn(1)];
        if resp3 {
            subscribers
                .iter_mut()
                .for_each(|c| drop(c.cmd(&["hello", "3"])));
        }
        let mut side = PubSubSide {
            publisher,
            subscribers,
            resp3,
        };
        if resp3 {
            side.publisher.cmd(&["hello", "3"]);
        }
        // The second subscriber also takes the channel itself (a message and a
        // pmessage), the third a plain channel besides its shard channel.
        side.subscribers[0].cmd(SUBSCRIPTIONS[0]);
        side.subscribers[1].cmd(SUBSCRIPTIONS[0]);
        side.subscribers[1].cmd(SUBSCRIPTIONS[1]);
        side.subscribers[2].cmd(SUBSCRIPTIONS[2]);
        side.subscribers[2].cmd(&["subscribe", "other"]);
        side
    }

    /// Everything each subscriber received, up to the reply of a PING sent after
    /// the deliveries had time to cross shards.
    fn received(&mut self) -> Vec<String> {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let pong: &[u8] = if self.resp3 {
            b"+PONG\r\n"
        } else {
            b"*2\r\n$4\r\npong\r\n$0\r\n\r\n"
        };
        self.subscribers
            .iter_mut()
            .map(|sub| {
                sub.send(&encode(&["ping"]));
                let mut got = String::new();
                loop {
                    let frame = sub.read_reply();
                    if frame == pong {
                        return got;
                    }
                    got.push_str(&show(&frame));
                }
            })
            .collect()
    }
}

/// Scripts and functions that publish or ask PUBSUB, with the subscribers' view of
/// each.
const PUBLISHING: &[&[&str]] = &[
    &["eval", "return redis.call('publish', 'news', 'hello')", "0"],
    &[
        "eval",
        "return {redis.call('publish', 'news', 'a'), redis.call('publish', 'nothing', 'b'), \
         redis.call('publish', 'nx', 'c'), redis.call('publish', 'other', 'd')}",
        "0",
    ],
    &[
        "eval",
        "return redis.call('spublish', '{s}sc', 'to the shard channel')",
        "0",
    ],
    &[
        "eval",
        "return redis.call('spublish', 'news', 'not a shard channel')",
        "0",
    ],
    &[
        "eval",
        "redis.call('set', KEYS[1], 'v') return redis.call('publish', 'news', KEYS[1])",
        "1",
        "{s}k",
    ],
    &["eval", "return redis.pcall('publish', 'news')", "0"],
    &[
        "eval_ro",
        "return redis.pcall('publish', 'news', 'ro')",
        "0",
    ],
    &[
        "function",
        "load",
        "#!lua name=publib\nredis.register_function('announce', \
         function(keys, args) return redis.call('publish', args[1], args[2]) end)",
    ],
    &["fcall", "announce", "0", "news", "from a function"],
    &["function", "delete", "publib"],
    // Inside a transaction.
    &["multi"],
    &[
        "eval",
        "return redis.call('publish', 'news', 'in a transaction')",
        "0",
    ],
    &["publish", "news", "a client's, after it"],
    &["exec"],
    &[
        "eval",
        "return redis.call('pubsub', 'numsub', 'news', 'other', 'none')",
        "0",
    ],
    &["eval_ro", "return redis.call('pubsub', 'numpat')", "0"],
    &[
        "eval",
        "return redis.call('pubsub', 'channels', 'ne*')",
        "0",
    ],
    &["eval", "return redis.call('pubsub', 'shardchannels')", "0"],
    &[
        "eval",
        "return redis.call('pubsub', 'shardnumsub', '{s}sc', 'x')",
        "0",
    ],
    &[
        "eval",
        "return redis.pcall('pubsub', 'channels', 'a', 'b')",
        "0",
    ],
    &["eval", "return redis.pcall('pubsub', 'nosuch')", "0"],
    &["eval", "return redis.call('pubsub')", "0"],
];

/// PUBLISH / SPUBLISH from scripts and functions, with subscribers on both shards:
/// the receiver counts and every subscriber's messages are Redis'.
#[test]
fn publish_from_a_script_reaches_every_shard_and_counts_as_redis() {
    if require_redis_server("publish_from_a_script_reaches_every_shard_and_counts_as_redis")
        .is_none()
    {
        return;
    }
    let redis = Server::redis();
    let ruvio = Server::forward(2);
    for resp3 in [false, true] {
        let label = if resp3 { "RESP3" } else { "RESP2" };
        let mut reference = PubSubSide::new(&redis, false, resp3);
        let mut target = PubSubSide::new(&ruvio, true, resp3);
        for words in PUBLISHING {
            let want = reference.publisher.cmd(words);
            let got = target.publisher.cmd(words);
            assert_eq!(show(&got), show(&want), "{label}: {words:?}: the reply");
            if words == &PUBLISHING[0] {
                // The setup reaches three subscriptions (a message, a pmessage).
                assert_eq!(want, b":3\r\n", "{label}: the reference's count");
            }
            let want = reference.received();
            let got = target.received();
            assert_eq!(got, want, "{label}: {words:?}: what the subscribers got");
        }
    }
}

/// Per-shard mode, as Redis Cluster: a script's PUBLISH (and PUBSUB NUMSUB) counts
/// the node's own subscribers and reaches every node's (the cluster bus); SPUBLISH
/// to a shard channel of another node is refused as a non-local key, of its own
/// node is delivered there. Passes against a Redis 7.0 cluster too
/// (`RUVIO_TEST_TARGET=redis`).
#[test]
fn publish_from_a_script_in_per_shard_mode_counts_the_node() {
    let server = Server::per_shard(2);
    let node = |i: usize| RawConn::connect(server.shard_port(i));
    let (mut publisher, mut here, mut there) = (node(0), node(0), node(1));
    let confirm = b"*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n";
    assert_eq!(here.cmd(&["subscribe", "news"]), confirm);
    assert_eq!(there.cmd(&["subscribe", "news"]), confirm);
    let publish = ["eval", "return redis.call('publish', 'news', 'm')", "0"];
    assert_eq!(
        publisher.cmd(&publish),
        b":1\r\n",
        "the node's own subscribers"
    );
    let message = b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$1\r\nm\r\n";
    assert_eq!(here.read_reply(), message);
    assert_eq!(there.read_reply(), message, "the other node's subscriber");
    let numsub = ["eval", "return redis.call('pubsub', 'numsub', 'news')", "0"];
    assert_eq!(
        publisher.cmd(&numsub),
        b"*2\r\n$4\r\nnews\r\n:1\r\n",
        "PUBSUB counts the node's"
    );
    let local = key_on_shard("sc", 0, 2);
    let foreign = key_on_shard("sc", 1, 2);
    let spublish = "return redis.call('spublish', ARGV[1], 'm')";
    assert_eq!(publisher.cmd(&["eval", spublish, "0", &local]), b":0\r\n");
    let refused = publisher.cmd(&["eval", spublish, "0", &foreign]);
    assert!(
        refused.starts_with(b"-ERR Script attempted to access a non local key in a cluster node"),
        "{}",
        show(&refused)
    );
}
