//! CLIENT TRACKING against redis-server 7: the same scripted sessions of
//! tracking and non-tracking connections (default mode, OPTIN/OPTOUT with
//! CLIENT CACHING, BCAST with prefixes, NOLOOP, REDIRECT to a RESP2 subscriber,
//! flushes, expiries, transactions and scripts, the table's limit) run on Redis
//! and on Ruvio with 1 and 2 shards (forward mode; the keys are spread over both
//! shards), in RESP3 and RESP2.
//!
//! How it compares: each step is sent to both servers; on Redis the step's
//! connection's reply is read, then every connection's bytes that arrived with
//! it (Redis writes the invalidations of a command in the same event-loop
//! iteration as its reply). On Ruvio each connection must then deliver exactly
//! those bytes, waiting as long as they take (an invalidation crosses shards).
//! So each connection's stream is compared byte for byte, its invalidations in
//! order with its own replies; only the moment another connection's push
//! arrives may differ.

mod common;

use common::tracking::*;
use common::*;
use std::time::Duration;

/// One step of a session.
enum Step {
    /// Connection `.0` sends the command; its reply and every connection's
    /// pushes are compared.
    Cmd(usize, &'static [&'static str]),
    /// As `Cmd`, but the reply differs between the servers by design (HELLO's
    /// version and id): read, not compared.
    Quiet(usize, &'static [&'static str]),
    /// Connection `.0` turns tracking on redirected to connection `.1`'s id,
    /// with the further options `.2`.
    Redirect(usize, usize, &'static [&'static str]),
    /// Wait (expiries).
    Sleep(u64),
    /// Close connection `.0`.
    Close(usize),
    /// Connection `.0` sends the commands in one write (a pipeline); every
    /// reply and push is compared as with `Cmd`.
    Pipe(usize, &'static [&'static [&'static str]]),
}

use Step::*;

/// `bytes` with the client ids the servers number apart (a redirection
/// target's, in TRACKINGINFO and `tracking-redir-broken`) as `:ID`.
fn mask_ids(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let after = [b"redirect\r\n:".as_slice(), b"tracking-redir-broken\r\n:"]
            .iter()
            .find(|m| bytes[i..].starts_with(m))
            .map(|m| i + m.len());
        match after {
            Some(at) => {
                out.extend_from_slice(&bytes[i..at]);
                out.extend_from_slice(b"ID");
                i = at;
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    out
}

/// Read one whole reply from `conn` byte by byte (nothing after it is taken),
/// shown for a message.
fn frame_len_of_target(conn: &mut RawConn) -> String {
    let mut got = Vec::new();
    while frame_len(&got).ok().flatten().is_none() {
        let byte = take(conn, 1);
        assert_eq!(byte.len(), 1, "connection closed mid-reply: {}", show(&got));
        got.extend(byte);
    }
    show(&got)
}

/// Run `steps` with `conns` connections on both servers, comparing as the
/// module says.
fn session(label: &str, redis: &Server, ruvio: &Server, conns: usize, steps: &[Step]) {
    assert_eq!(redis.raw().cmd(&["FLUSHALL"]), b"+OK\r\n");
    assert_eq!(ruvio.raw().cmd(&["FLUSHALL"]), b"+OK\r\n");
    let mut r: Vec<Option<RawConn>> = (0..conns).map(|_| Some(redis.raw())).collect();
    let mut t: Vec<Option<RawConn>> = (0..conns).map(|_| Some(ruvio.raw())).collect();
    for (i, step) in steps.iter().enumerate() {
        let (from, args): (usize, Vec<String>) = match step {
            Sleep(ms) => {
                std::thread::sleep(Duration::from_millis(*ms));
                continue;
            }
            Close(c) => {
                r[*c] = None;
                t[*c] = None;
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            Cmd(c, a) | Quiet(c, a) => (*c, a.iter().map(|s| s.to_string()).collect()),
            Redirect(c, ..) | Pipe(c, _) => (*c, Vec::new()),
        };
        let (r_args, t_args) = match step {
            Redirect(_, to, more) => {
                let with = |ids: &mut Vec<Option<RawConn>>| {
                    let id = client_id(ids[*to].as_mut().expect("open"));
                    let mut a: Vec<String> = ["CLIENT", "TRACKING", "ON", "REDIRECT"]
                        .iter()
                        .map(|s| s.to_string())
                        .collect();
                    a.push(id);
                    a.extend(more.iter().map(|s| s.to_string()));
                    a
                };
                (with(&mut r), with(&mut t))
            }
            _ => (args.clone(), args.clone()),
        };
        let (shown, request) = match step {
            Pipe(_, commands) => {
                let shown: Vec<String> = commands.iter().map(|c| c.join(" ")).collect();
                let shown = format!("{label} step {i}: [{from}] {}", shown.join(" | "));
                (shown, commands.iter().flat_map(|c| encode(c)).collect())
            }
            _ => {
                let shown = format!("{label} step {i}: [{from}] {}", t_args.join(" "));
                (shown, Vec::new())
            }
        };
        let (r_request, t_request) = match step {
            Pipe(..) => (request.clone(), request),
            _ => (encode(&r_args), encode(&t_args)),
        };
        let rc = r[from].as_mut().expect("open");
        rc.send(&r_request);
        let mut first = read_some(rc);
        t[from].as_mut().expect("open").send(&t_request);
        first.extend(drain(rc, SETTLE));
        let quiet = matches!(step, Quiet(..));
        for c in 0..conns {
            let (Some(rc), Some(tc)) = (r[c].as_mut(), t[c].as_mut()) else {
                continue;
            };
            let expected = match c == from {
                true => std::mem::take(&mut first),
                false => drain(rc, SETTLE),
            };
            if c == from && quiet {
                // The reply differs by design; what follows it may not.
                let reply_len = frame_len(&expected).ok().flatten().expect("a whole reply");
                let own = frame_len_of_target(tc);
                let rest = take(tc, expected.len() - reply_len);
                assert_eq!(
                    show(&rest),
                    show(&expected[reply_len..]),
                    "{shown}: after {own}"
                );
                continue;
            }
            let mut got = take(tc, expected.len());
            if got != expected {
                got.extend(drain(tc, Duration::from_millis(200)));
            }
            if std::env::var_os("RUVIO_DIFF_TRACE").is_some() {
                eprintln!("{shown}: connection {c}: {}", show(&got));
            }
            let (got, expected) = (mask_ids(&got), mask_ids(&expected));
            assert_eq!(show(&got), show(&expected), "{shown}: connection {c}");
        }
    }
    for (c, tc) in t.iter_mut().enumerate() {
        if let Some(tc) = tc.as_mut() {
            let extra = drain(tc, Duration::from_millis(100));
            assert!(
                extra.is_empty(),
                "{label}: connection {c} got more: {}",
                show(&extra)
            );
        }
    }
}

/// Default mode for a RESP3 client: reads remembered, another client's writes,
/// its own writes (the invalidation after the reply), pipelines, MULTI, a
/// script, flushes, expiries, CLIENT TRACKINGINFO and errors.
const DEFAULT_RESP3: &[Step] = &[
    Quiet(0, &["HELLO", "3"]),
    Cmd(0, &["CLIENT", "TRACKING", "ON"]),
    Cmd(0, &["CLIENT", "TRACKINGINFO"]),
    Cmd(0, &["GET", "k1"]),
    Cmd(0, &["GET", "k2"]),
    Cmd(0, &["HGET", "h1", "f"]),
    Cmd(0, &["MGET", "k3", "k4", "k5"]),
    // Keys of both shards read in one command (borrowed by one shard).
    Cmd(0, &["SUNION", "u1", "u2", "u3", "u4"]),
    Cmd(1, &["SADD", "u3", "x"]),
    Cmd(1, &["SADD", "u1", "x"]),
    Cmd(1, &["SET", "k1", "a"]),
    Cmd(1, &["SET", "k1", "b"]),
    Cmd(1, &["HSET", "h1", "f", "v"]),
    Cmd(1, &["INCR", "k4"]),
    Cmd(1, &["DEL", "k5"]),
    Cmd(0, &["GET", "k1"]),
    Cmd(0, &["SET", "k1", "c"]),
    Cmd(0, &["GET", "k2"]),
    Cmd(0, &["APPEND", "k2", "x"]),
    Cmd(0, &["GET", "k6"]),
    Cmd(1, &["RENAME", "k1", "k6"]),
    Cmd(0, &["GET", "k6"]),
    // COPY's and MOVE's targets and sources.
    Cmd(0, &["GET", "c1"]),
    Cmd(1, &["COPY", "k2", "c1"]),
    Cmd(1, &["SET", "mv", "1"]),
    Cmd(0, &["GET", "mv"]),
    Cmd(1, &["MOVE", "mv", "1"]),
    Cmd(0, &["MULTI"]),
    Cmd(0, &["SET", "k6", "1"]),
    Cmd(0, &["GET", "k6"]),
    Cmd(0, &["EXEC"]),
    Cmd(0, &["GET", "k7"]),
    Cmd(
        0,
        &[
            "EVAL",
            "redis.call('set', KEYS[1], 'x') return 1",
            "1",
            "k7",
        ],
    ),
    // Keys a script reads are remembered for its caller.
    Cmd(
        0,
        &["EVAL", "return redis.call('get', KEYS[1])", "1", "k10"],
    ),
    Cmd(
        0,
        &[
            "EVAL_RO",
            "return redis.call('exists', KEYS[1], KEYS[2])",
            "2",
            "k11",
            "k12",
        ],
    ),
    Cmd(1, &["MSET", "k10", "1"]),
    Cmd(1, &["SET", "k11", "1"]),
    Cmd(1, &["SET", "k12", "1"]),
    Cmd(0, &["GET", "k8"]),
    Cmd(1, &["SET", "k8", "v", "PX", "50"]),
    Sleep(300),
    Cmd(1, &["GET", "k8"]),
    Cmd(0, &["GET", "k9"]),
    Cmd(1, &["FLUSHDB"]),
    Cmd(0, &["GET", "k9"]),
    Cmd(0, &["FLUSHALL"]),
    Cmd(0, &["CLIENT", "TRACKING", "ON", "BCAST"]),
    Cmd(0, &["CLIENT", "TRACKING", "ON", "PREFIX", "a"]),
    Cmd(0, &["CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"]),
    Cmd(
        0,
        &["CLIENT", "TRACKING", "ON", "REDIRECT", "0", "REDIRECT", "1"],
    ),
    Cmd(0, &["CLIENT", "TRACKING", "ON", "FOO"]),
    Cmd(0, &["CLIENT", "TRACKING", "MAYBE"]),
    Cmd(0, &["CLIENT", "CACHING", "YES"]),
    Cmd(0, &["CLIENT", "GETREDIR"]),
    Cmd(0, &["CLIENT", "TRACKING", "OFF"]),
    Cmd(0, &["CLIENT", "GETREDIR"]),
    Cmd(0, &["CLIENT", "TRACKINGINFO"]),
    Cmd(1, &["SET", "k2", "after off"]),
    Cmd(0, &["GET", "k2"]),
];

/// CLIENT TRACKING and CACHING queued in MULTI govern the reads after them in
/// the transaction; CACHING lasts until EXEC; SWAPDB invalidates nothing (Redis 7.0).
const IN_MULTI: &[Step] = &[
    Quiet(0, &["HELLO", "3"]),
    Cmd(0, &["MULTI"]),
    Cmd(0, &["CLIENT", "TRACKING", "ON"]),
    Cmd(0, &["GET", "m1"]),
    Cmd(0, &["EXEC"]),
    Cmd(1, &["SET", "m1", "x"]),
    Cmd(0, &["GET", "m2"]),
    Cmd(1, &["SWAPDB", "0", "1"]),
    Cmd(1, &["SWAPDB", "0", "1"]),
    Cmd(0, &["CLIENT", "TRACKING", "OFF"]),
    Cmd(0, &["CLIENT", "TRACKING", "ON", "OPTIN"]),
    Cmd(0, &["MULTI"]),
    Cmd(0, &["CLIENT", "CACHING", "YES"]),
    Cmd(0, &["GET", "m5"]),
    Cmd(0, &["GET", "m6"]),
    Cmd(0, &["EXEC"]),
    Cmd(0, &["GET", "m7"]),
    Cmd(1, &["SET", "m5", "1"]),
    Cmd(1, &["SET", "m6", "1"]),
    Cmd(1, &["SET", "m7", "1"]),
    Cmd(0, &["CLIENT", "CACHING", "YES"]),
    Cmd(0, &["MULTI"]),
    Cmd(0, &["GET", "m8"]),
    Cmd(0, &["GET", "m9"]),
    Cmd(0, &["EXEC"]),
    Cmd(1, &["SET", "m8", "1"]),
    Cmd(1, &["SET", "m9", "1"]),
];

/// Writes KEYS[1] and KEYS[2] (of both shards: under the script lock).
const SET_BOTH: &[&str] = &[
    "EVAL",
    "return {redis.call('set', KEYS[1], 'p'), redis.call('set', KEYS[2], 'p')}",
    "2",
    "n1",
    "n2",
];
/// Reads them (remembered for the caller).
const GET_BOTH: &[&str] = &[
    "EVAL",
    "return {redis.call('get', KEYS[1]), redis.call('get', KEYS[2])}",
    "2",
    "n1",
    "n2",
];

/// NOLOOP: a client's own writes owe it nothing, another's do.
const NOLOOP: &[Step] = &[
    Quiet(0, &["HELLO", "3"]),
    Cmd(0, &["CLIENT", "TRACKING", "ON", "NOLOOP"]),
    Cmd(0, &["CLIENT", "TRACKINGINFO"]),
    Cmd(0, &["GET", "n1"]),
    Cmd(0, &["GET", "n2"]),
    Cmd(0, &["SET", "n1", "mine"]),
    Cmd(1, &["SET", "n2", "theirs"]),
    Cmd(0, &["GET", "n1"]),
    Cmd(1, &["SET", "n1", "theirs"]),
    // A transaction over both shards' keys (run on borrowed keys).
    Cmd(0, &["GET", "n1"]),
    Cmd(0, &["GET", "n2"]),
    Cmd(0, &["MULTI"]),
    Cmd(0, &["SET", "n1", "a"]),
    Cmd(0, &["SET", "n2", "b"]),
    Cmd(0, &["EXEC"]),
    Cmd(1, &["SET", "n1", "theirs"]),
    Cmd(1, &["SET", "n2", "theirs"]),
    Cmd(0, &["GET", "n1"]),
    Cmd(
        0,
        &[
            "EVAL",
            "redis.call('set', KEYS[1], 'x') redis.call('set', KEYS[2], 'y')",
            "2",
            "n1",
            "n2",
        ],
    ),
    Cmd(0, &["GET", "n2"]),
    Cmd(1, &["SET", "n1", "theirs"]),
    Cmd(1, &["SET", "n2", "theirs"]),
    // Scripts over both shards' keys run under the script lock, their borrowed
    // keys' writes reported to the owners when the batch ends: the NOLOOP
    // caller's own reads are still not invalidated by its own writes.
    Cmd(0, &["GET", "n1"]),
    Cmd(0, &["GET", "n2"]),
    Cmd(0, &["GET", "n3"]),
    Cmd(0, &["GET", "n4"]),
    Cmd(
        0,
        &[
            "EVAL",
            "redis.call('set', KEYS[1], 'x') redis.call('set', KEYS[2], 'y')",
            "2",
            "n1",
            "n2",
        ],
    ),
    // An undeclared key of the other shard, reached under the lock.
    Cmd(
        0,
        &[
            "EVAL",
            "redis.call('set', ARGV[1], 'x') return 1",
            "1",
            "n4",
            "n3",
        ],
    ),
    Cmd(1, &["SET", "n1", "theirs"]),
    Cmd(1, &["SET", "n2", "theirs"]),
    Cmd(1, &["SET", "n3", "theirs"]),
    Cmd(1, &["SET", "n4", "theirs"]),
    // A pipeline of scripts that write, read again (remembered on the key's
    // owner for the caller) and write again keys of both shards. (A batch of
    // several scripts needs other clients' scripts waiting for the lock:
    // `noloop_holds_for_scripts_batched_under_the_script_lock`.)
    Cmd(0, &["GET", "n1"]),
    Cmd(0, &["GET", "n2"]),
    Pipe(0, &[SET_BOTH, GET_BOTH, SET_BOTH, GET_BOTH, SET_BOTH]),
    Cmd(1, &["SET", "n1", "theirs"]),
    Cmd(1, &["SET", "n2", "theirs"]),
    // Another client's script writes the NOLOOP client's keys: invalidated.
    Cmd(0, &["GET", "n2"]),
    Cmd(0, &["GET", "n3"]),
    Cmd(
        1,
        &[
            "EVAL",
            "redis.call('set', KEYS[1], 'x') redis.call('set', KEYS[2], 'y')",
            "2",
            "n2",
            "n3",
        ],
    ),
];

/// OPTIN and OPTOUT with CLIENT CACHING: which reads are remembered.
const OPTIN_OPTOUT: &[Step] = &[
    Quiet(0, &["HELLO", "3"]),
    Quiet(2, &["HELLO", "3"]),
    Cmd(0, &["CLIENT", "TRACKING", "ON", "OPTIN"]),
    Cmd(0, &["CLIENT", "CACHING", "NO"]),
    Cmd(0, &["CLIENT", "CACHING", "MAYBE"]),
    Cmd(0, &["GET", "o1"]),
    Cmd(0, &["CLIENT", "CACHING", "YES"]),
    Cmd(0, &["CLIENT", "TRACKINGINFO"]),
    Cmd(0, &["GET", "o2"]),
    Cmd(0, &["GET", "o3"]),
    Cmd(0, &["CLIENT", "TRACKING", "ON", "OPTOUT"]),
    Cmd(2, &["CLIENT", "TRACKING", "ON", "OPTOUT"]),
    Cmd(2, &["GET", "o1"]),
    Cmd(2, &["CLIENT", "CACHING", "NO"]),
    Cmd(2, &["GET", "o3"]),
    Cmd(2, &["GET", "o4"]),
    Cmd(1, &["SET", "o1", "1"]),
    Cmd(1, &["SET", "o2", "2"]),
    Cmd(1, &["SET", "o3", "3"]),
    Cmd(1, &["SET", "o4", "4"]),
];

/// BCAST with prefixes (and one without), NOLOOP, overlaps refused.
const BCAST: &[Step] = &[
    Quiet(0, &["HELLO", "3"]),
    Quiet(2, &["HELLO", "3"]),
    Cmd(
        0,
        &[
            "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "user:", "PREFIX", "obj:",
        ],
    ),
    Cmd(0, &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "us"]),
    Cmd(
        0,
        &[
            "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "x", "PREFIX", "xy",
        ],
    ),
    Cmd(0, &["CLIENT", "TRACKING", "ON", "BCAST", "OPTIN"]),
    Cmd(0, &["CLIENT", "TRACKING", "ON"]),
    Cmd(0, &["CLIENT", "TRACKINGINFO"]),
    Cmd(2, &["CLIENT", "TRACKING", "ON", "BCAST", "NOLOOP"]),
    Cmd(1, &["SET", "user:1", "a"]),
    Cmd(1, &["SET", "obj:1", "a"]),
    Cmd(1, &["SET", "other", "a"]),
    Cmd(2, &["SET", "user:2", "mine"]),
    Cmd(1, &["DEL", "user:1", "nothing"]),
    Cmd(0, &["SET", "obj:2", "own"]),
    Cmd(1, &["FLUSHALL"]),
    Cmd(2, &["CLIENT", "TRACKING", "OFF"]),
    Cmd(1, &["SET", "user:3", "a"]),
];

/// RESP2: invalidations redirected to a connection subscribed to
/// `__redis__:invalidate`; flushes; the target gone (flag `R`).
const REDIRECT_RESP2: &[Step] = &[
    Cmd(1, &["SUBSCRIBE", "__redis__:invalidate"]),
    Cmd(0, &["CLIENT", "TRACKING", "ON", "REDIRECT", "99999"]),
    Redirect(0, 1, &[]),
    Cmd(0, &["GET", "r1"]),
    Cmd(0, &["GET", "r2"]),
    Cmd(2, &["SET", "r1", "x"]),
    Cmd(0, &["SET", "r2", "own"]),
    Cmd(0, &["GET", "r1"]),
    Cmd(2, &["FLUSHALL"]),
    Cmd(0, &["GET", "r3"]),
    Close(1),
    Cmd(2, &["SET", "r3", "x"]),
    Cmd(0, &["GET", "r3"]),
];

/// RESP3 client redirected to a RESP3 connection; the target gone:
/// `tracking-redir-broken`.
const REDIRECT_RESP3: &[Step] = &[
    Quiet(0, &["HELLO", "3"]),
    Quiet(1, &["HELLO", "3"]),
    Redirect(0, 1, &["NOLOOP"]),
    Cmd(0, &["GET", "s1"]),
    Cmd(2, &["SET", "s1", "x"]),
    Cmd(0, &["GET", "s1"]),
    Close(1),
    Cmd(2, &["SET", "s1", "y"]),
    Cmd(0, &["CLIENT", "TRACKINGINFO"]),
];

fn all_sessions(redis: &Server, ruvio: &Server, label: &str) {
    session(&format!("{label} default"), redis, ruvio, 2, DEFAULT_RESP3);
    session(&format!("{label} noloop"), redis, ruvio, 2, NOLOOP);
    session(&format!("{label} in multi"), redis, ruvio, 2, IN_MULTI);
    session(
        &format!("{label} optin/optout"),
        redis,
        ruvio,
        3,
        OPTIN_OPTOUT,
    );
    session(&format!("{label} bcast"), redis, ruvio, 3, BCAST);
    session(
        &format!("{label} redirect resp2"),
        redis,
        ruvio,
        3,
        REDIRECT_RESP2,
    );
    session(
        &format!("{label} redirect resp3"),
        redis,
        ruvio,
        3,
        REDIRECT_RESP3,
    );
}

#[test]
fn tracking_matches_redis_on_one_shard() {
    let Some(servers) = DiffServers::forward("differential_tracking", 1) else {
        return;
    };
    all_sessions(&servers.reference, &servers.target, "1 shard");
    full_table(&servers.reference);
    full_table(&servers.target);
}

/// `tracking-table-max-keys 1`: reading a second key drops one of the two from
/// the table with an invalidation (which one is Redis' random pick), before the
/// next reply at the latest; INFO then counts one key.
fn full_table(server: &Server) {
    let mut admin = server.raw();
    let set = |admin: &mut RawConn, n: &str| {
        let reply = admin.cmd(&["CONFIG", "SET", "tracking-table-max-keys", n]);
        assert_eq!(reply, b"+OK\r\n");
    };
    set(&mut admin, "1");
    let mut c = server.raw();
    c.cmd(&["HELLO", "3"]);
    assert_eq!(c.cmd(&["CLIENT", "TRACKING", "ON"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["GET", "t1"]), b"_\r\n");
    assert_eq!(c.cmd(&["GET", "t2"]), b"_\r\n");
    c.send(&encode(&["PING"]));
    let push = c.read_reply();
    let one_of = [b"t1", b"t2"].map(|k| {
        let mut p = b">2\r\n$10\r\ninvalidate\r\n*1\r\n$2\r\n".to_vec();
        p.extend_from_slice(k);
        p.extend_from_slice(b"\r\n");
        p
    });
    assert!(one_of.contains(&push), "{}", show(&push));
    assert_eq!(c.read_reply(), b"+PONG\r\n");
    let info = String::from_utf8_lossy(&admin.cmd(&["INFO", "stats"])).into_owned();
    assert!(info.contains("tracking_total_keys:1\r\n"), "{info}");
    assert!(info.contains("tracking_total_items:1\r\n"), "{info}");
    set(&mut admin, "1000000");
}

#[test]
fn tracking_matches_redis_on_two_shards() {
    let Some(servers) = DiffServers::forward("differential_tracking", 2) else {
        return;
    };
    all_sessions(&servers.reference, &servers.target, "2 shards");
}

/// A tracking client that never reads is closed by `client-output-buffer-limit`
/// once its invalidations pass the limit, as any client's output is (Redis
/// does the same).
fn output_limit(server: &Server) {
    let mut admin = server.raw();
    let limit = [
        "CONFIG",
        "SET",
        "client-output-buffer-limit",
        "normal 1mb 0 0",
    ];
    assert_eq!(admin.cmd(&limit), b"+OK\r\n");
    let mut c = server.raw();
    c.cmd(&["HELLO", "3"]);
    assert_eq!(c.cmd(&["CLIENT", "TRACKING", "ON"]), b"+OK\r\n");
    let id = client_id(&mut c);
    // Past the socket buffers too: 4,000 invalidations of 4 kB keys.
    let pad = "k".repeat(4000);
    let keys: Vec<String> = (0..4000).map(|i| format!("{i:04}{pad}")).collect();
    let mut mget = vec!["MGET".to_string()];
    mget.extend(keys.iter().cloned());
    c.cmd(&mget);
    // c reads nothing more.
    let sets: Vec<u8> = keys
        .iter()
        .flat_map(|key| encode(&["SET", key.as_str(), "v"]))
        .collect();
    admin.send(&sets);
    for _ in &keys {
        assert_eq!(admin.read_reply(), b"+OK\r\n");
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let list = admin.cmd(&["CLIENT", "LIST", "ID", id.as_str()]);
        if list.starts_with(b"$0\r\n") || list.starts_with(b"=4\r\ntxt:") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still connected: {}",
            show(&list)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let reset = [
        "CONFIG",
        "SET",
        "client-output-buffer-limit",
        "normal 0 0 0",
    ];
    assert_eq!(admin.cmd(&reset), b"+OK\r\n");
}

#[test]
fn a_tracking_client_that_does_not_read_is_bounded() {
    let Some(servers) = DiffServers::forward("differential_tracking", 2) else {
        return;
    };
    output_limit(&servers.reference);
    output_limit(&servers.target);
}

/// NOLOOP under the script lock's batches: a NOLOOP tracking client pipelines
/// scripts that read and write a key of the other shard (borrowed, kept in its
/// shard's batch between scripts, its writes reported to its owner when the
/// batch ends), while other clients of its shard pipeline scripts over other
/// keys of both shards (so the batches hold many scripts). Its own writes owe it
/// nothing, as in Redis: its stream is its replies alone, byte for byte
/// Redis's. Returns that stream.
fn noloop_in_batches(server: &Server) -> Vec<u8> {
    let rounds = 150;
    let (declared, borrowed) = (key_on_shard("nbd", 0, 2), key_on_shard("nbb", 1, 2));
    let mut tracker = conn_on(server, 0);
    tracker.cmd(&["HELLO", "3"]);
    let on = tracker.cmd(&["CLIENT", "TRACKING", "ON", "NOLOOP"]);
    assert_eq!(on, b"+OK\r\n");
    let helpers: Vec<_> = (0..3)
        .map(|h| {
            let mut c = conn_on(server, 0);
            let (mine, theirs) = (
                key_on_shard("nbh", 0, 2),
                key_on_shard(&format!("nbo{h}"), 1, 2),
            );
            std::thread::spawn(move || {
                let bump = "redis.call('incr', KEYS[1]) return redis.call('incr', KEYS[2])";
                let pipeline: Vec<u8> = (0..rounds * 2)
                    .flat_map(|_| encode(&["EVAL", bump, "2", &mine, &theirs]))
                    .collect();
                c.send(&pipeline);
                for _ in 0..rounds * 2 {
                    let reply = c.read_reply();
                    assert_eq!(reply[0], b':', "{}", show(&reply));
                }
            })
        })
        .collect();
    let read = "return redis.call('get', KEYS[2])";
    let write = "return redis.call('set', KEYS[2], ARGV[1])";
    let mut pipeline = Vec::new();
    for i in 0..rounds {
        let value = i.to_string();
        pipeline.extend(encode(&["EVAL", read, "2", &declared, &borrowed]));
        pipeline.extend(encode(&["EVAL", write, "2", &declared, &borrowed, &value]));
    }
    tracker.send(&pipeline);
    let mut stream = Vec::new();
    for _ in 0..rounds * 2 {
        stream.extend(tracker.read_reply());
    }
    for h in helpers {
        h.join().expect("a helper failed");
    }
    // A push the last batch's end owes would come before PONG.
    std::thread::sleep(Duration::from_millis(200));
    stream.extend(tracker.cmd(&["PING"]));
    stream
}

#[test]
fn noloop_holds_for_scripts_batched_under_the_script_lock() {
    let Some(servers) = DiffServers::forward("differential_tracking", 2) else {
        return;
    };
    let expected = noloop_in_batches(&servers.reference);
    let got = noloop_in_batches(&servers.target);
    assert!(!contains(&expected, b">2\r\n"), "{}", show(&expected));
    assert_eq!(show(&got), show(&expected));
}

/// Reader on shard `reader`, writer (and the reader's RESP2 target) on
/// `writer`, of two: keys of both in the order a write names them.
fn two_shards((reader, writer): (usize, usize)) -> Layout {
    Layout {
        keys: interleaved_keys(),
        reader,
        writer,
        target: writer,
    }
}

/// Keys of both shards in the order a write names them: shard 1, 0, 1, 0.
fn interleaved_keys() -> [String; 4] {
    [
        key_on_shard("xw", 1, 2),
        key_on_shard("xx", 0, 2),
        key_on_shard("xy", 1, 2),
        key_on_shard("xz", 0, 2),
    ]
}

#[test]
fn cross_shard_writes_invalidate_in_key_order_as_redis() {
    let Some(servers) = DiffServers::forward("differential_tracking", 2) else {
        return;
    };
    for resp3 in [true, false] {
        for shards in [(0, 0), (0, 1), (1, 0), (1, 1)] {
            let modes = (resp3, false);
            let label = format!("resp3 {resp3}, reader/writer shards {shards:?}");
            let layout = two_shards(shards);
            compare_session(&servers, &layout, modes, &label, |expected| {
                // Redis sends one message per key, in the command's key order:
                // what Ruvio is held to is not a vacuous stream.
                let (name, pushes) = &expected[5];
                assert_eq!(name, "MSET: reader's pushes");
                let keys = interleaved_keys();
                in_order(pushes, &keys.iter().collect::<Vec<_>>(), resp3);
            });
        }
    }
}

/// As [`cross_shard_writes_invalidate_in_key_order_as_redis`], for writes of
/// keys of both shards the lending path runs (borrowed by the writer's shard):
/// MULTI/EXEC, MSETNX and a script, by another client and by the reader itself.
#[test]
fn lending_writes_invalidate_in_key_order_as_redis() {
    let Some(servers) = DiffServers::forward("differential_tracking", 2) else {
        return;
    };
    for resp3 in [true, false] {
        for shards in [(0, 0), (0, 1), (1, 0), (1, 1)] {
            let modes = (resp3, true);
            let label = format!("resp3 {resp3}, reader/writer shards {shards:?}");
            let layout = two_shards(shards);
            compare_session(&servers, &layout, modes, &label, |expected| {
                // What Ruvio is held to is not vacuous: Redis invalidates a batch's
                // keys in write order, one message each, and the writer's own pushes
                // come right after the EXEC's (MSETNX's, the script's) reply, before
                // PONG.
                let pushes = step(expected, "EVAL batch: reader's pushes");
                let [b0, a0, b1, a1] = interleaved_keys();
                in_order(pushes, &[&b1, &a0, &b0, &a1], resp3);
                if resp3 {
                    for name in [
                        "own MULTI/EXEC, PING, GET",
                        "own MULTI/EXEC reading both shards, PING",
                        "own MSETNX, PING, GET",
                        "own EVAL batch, PING",
                    ] {
                        let stream = step(expected, &format!("{name}: replies and own pushes"));
                        let pong = find(stream, b"+PONG\r\n").expect("PONG");
                        let pushes = count(&stream[..pong], b">2\r\n");
                        let want = if name.contains("reading") { 2 } else { 4 };
                        assert_eq!(pushes, want, "{name}: {}", show(stream));
                    }
                }
            });
        }
    }
}

/// Three shards: a reader on each shard in turn reads a key of every shard,
/// then a client of another shard writes them all in one MSET, then one DEL:
/// every key invalidated exactly once, in the command's key order (the key of
/// the shard that is neither the reader's nor the writer's relayed through
/// the writer's shard, docs/tracking.md), and nothing more.
/// `differential_tracking_3shards.rs` compares such sessions with Redis.
#[test]
fn three_shards_invalidate_every_key_once_in_key_order() {
    let server = Server::ruvio_with(PortMode::Forward, 3, &[]);
    // Connections kept open until two of each shard are among them (the
    // server spreads them by load).
    let mut by_shard: Vec<Vec<RawConn>> = (0..3).map(|_| Vec::new()).collect();
    for _ in 0..300 {
        if by_shard.iter().all(|c| c.len() >= 2) {
            break;
        }
        let mut c = server.raw();
        let shard = c.cmd(&["DEBUG", "SHARD"]);
        let shard: usize = String::from_utf8_lossy(&shard[1..shard.len() - 2])
            .parse()
            .unwrap();
        by_shard[shard].push(c);
    }
    assert!(
        by_shard.iter().all(|c| c.len() >= 2),
        "a connection per shard"
    );
    let keys = keys_per_shard("three", 3);
    for reader_shard in 0..3 {
        let writer_shard = (reader_shard + 1) % 3;
        let mut reader = by_shard[reader_shard].pop().expect("a connection");
        reader.cmd(&["HELLO", "3"]);
        assert_eq!(reader.cmd(&["CLIENT", "TRACKING", "ON"]), b"+OK\r\n");
        let mut writer = by_shard[writer_shard].pop().expect("a connection");
        for write in ["MSET", "DEL"] {
            for k in &keys {
                let reply = reader.cmd(&["GET", k]);
                assert!(reply[0] == b'$' || reply[0] == b'_', "{}", show(&reply));
            }
            let mut args: Vec<&str> = vec![write];
            for k in keys.iter().rev() {
                args.push(k);
                if write == "MSET" {
                    args.push("v");
                }
            }
            writer.cmd(&args);
            let got: Vec<Vec<u8>> = (0..keys.len()).map(|_| reader.read_reply()).collect();
            let expected: Vec<Vec<u8>> = keys
                .iter()
                .rev()
                .map(|k| {
                    let mut push = b">2\r\n$10\r\ninvalidate\r\n*1\r\n".to_vec();
                    push.extend_from_slice(bulk(k).as_bytes());
                    push
                })
                .collect();
            let label = format!("reader on {reader_shard}, writer on {writer_shard}, {write}");
            assert_eq!(got, expected, "{label}");
            reader.send(&encode(&["PING"]));
            assert_eq!(reader.read_reply(), b"+PONG\r\n", "{label}: no more pushes");
        }
    }
}

/// A tracking reader on shard 0 reads keys of both shards; a writer of its
/// shard pipelines a script that borrows them all and one that writes them
/// all, while other clients of the shard pipeline scripts over other keys of
/// both shards, so that the two run in one batch under the script lock (the
/// second writes keys the batch holds already). Each round the reader's
/// pushes, one per key in the order written (as Redis): returns them all.
fn batched_writes(server: &Server) -> Vec<u8> {
    let rounds = 40;
    let [b0, a0, b1, a1] = interleaved_keys();
    assert_eq!(server.raw().cmd(&["FLUSHALL"]), b"+OK\r\n");
    let mut reader = conn_on(server, 0);
    reader.cmd(&["HELLO", "3"]);
    assert_eq!(reader.cmd(&["CLIENT", "TRACKING", "ON"]), b"+OK\r\n");
    let mut writer = conn_on(server, 0);
    let helpers: Vec<_> = (0..2)
        .map(|h| {
            let mut c = conn_on(server, 0);
            let (mine, theirs) = (
                key_on_shard(&format!("bwh{h}"), 0, 2),
                key_on_shard(&format!("bwo{h}"), 1, 2),
            );
            std::thread::spawn(move || {
                let bump = "redis.call('incr', KEYS[1]) return redis.call('incr', KEYS[2])";
                let pipeline: Vec<u8> = (0..rounds * 20)
                    .flat_map(|_| encode(&["EVAL", bump, "2", &mine, &theirs]))
                    .collect();
                c.send(&pipeline);
                for _ in 0..rounds * 20 {
                    let reply = c.read_reply();
                    assert_eq!(reply[0], b':', "{}", show(&reply));
                }
            })
        })
        .collect();
    let read = "local r = {} for i, k in ipairs(KEYS) do r[i] = redis.call('get', k) end return r";
    let write = "for i, k in ipairs(KEYS) do redis.call('set', k, i) end";
    let mut stream = Vec::new();
    for _ in 0..rounds {
        for k in [&b0, &a0, &b1, &a1] {
            reader.cmd(&["GET", k]);
        }
        let mut pipeline = encode(&["EVAL", read, "4", &b0, &a0, &b1, &a1]);
        pipeline.extend(encode(&["EVAL", write, "4", &b1, &a0, &b0, &a1]));
        writer.send(&pipeline);
        writer.read_reply();
        writer.read_reply();
        for _ in 0..4 {
            stream.extend(reader.read_reply());
        }
    }
    for h in helpers {
        h.join().expect("a helper failed");
    }
    stream
}

#[test]
fn scripts_batched_under_the_script_lock_invalidate_in_write_order() {
    let Some(servers) = DiffServers::forward("differential_tracking", 2) else {
        return;
    };
    let expected = batched_writes(&servers.reference);
    let [b0, a0, b1, a1] = interleaved_keys();
    let round: Vec<u8> = [&b1, &a0, &b0, &a1]
        .iter()
        .flat_map(|k| {
            let mut push = b">2\r\n$10\r\ninvalidate\r\n*1\r\n".to_vec();
            push.extend_from_slice(bulk(k).as_bytes());
            push
        })
        .collect();
    assert_eq!(show(&expected[..round.len()]), show(&round));
    let got = batched_writes(&servers.target);
    assert_eq!(show(&got), show(&expected));
}
