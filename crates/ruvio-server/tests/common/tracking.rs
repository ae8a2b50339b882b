//! The cross-shard CLIENT TRACKING sessions `differential_tracking` (two
//! shards) and `differential_tracking_3shards` (a reader on a third shard) run
//! on Redis and on Ruvio: a tracking reader reads keys of two shards, a
//! writer (or the reader itself) writes them, and each step's bytes are kept
//! to be compared byte for byte.

use super::*;
use std::io::{ErrorKind, Read};
use std::time::Duration;

/// How long Redis's bytes for one step are collected after the reply.
pub const SETTLE: Duration = Duration::from_millis(40);

/// Whatever arrives on `conn` within `wait`.
pub fn drain(conn: &mut RawConn, wait: Duration) -> Vec<u8> {
    let stream = conn.stream();
    stream.set_read_timeout(Some(wait)).expect("timeout");
    let mut got = Vec::new();
    let mut chunk = [0u8; 65536];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
            Err(e) => panic!("read: {e}"),
        }
    }
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    got
}

/// At least one byte from `conn` (waiting up to its read timeout).
pub fn read_some(conn: &mut RawConn) -> Vec<u8> {
    let mut chunk = [0u8; 65536];
    match conn.stream().read(&mut chunk) {
        Ok(n) => chunk[..n].to_vec(),
        Err(e) => panic!("read: {e}"),
    }
}

/// Exactly `n` bytes from `conn` (waiting up to its read timeout).
pub fn take(conn: &mut RawConn, n: usize) -> Vec<u8> {
    let mut got = vec![0u8; n];
    let mut have = 0;
    while have < n {
        match conn.stream().read(&mut got[have..]) {
            Ok(0) => break,
            Ok(k) => have += k,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
            Err(e) => panic!("read: {e}"),
        }
    }
    got.truncate(have);
    got
}

/// The id CLIENT ID gives `conn`.
pub fn client_id(conn: &mut RawConn) -> String {
    let reply = conn.cmd(&["CLIENT", "ID"]);
    String::from_utf8_lossy(&reply[1..reply.len() - 2]).into_owned()
}

/// A connection of `server` on `shard` (Redis: any).
pub fn conn_on(server: &Server, shard: usize) -> RawConn {
    match server.kind {
        Target::Redis => server.raw(),
        Target::Ruvio => conn_on_shard(server, shard),
    }
}

/// What one cross-shard session observed: each step's bytes, named.
pub type Transcript = Vec<(String, Vec<u8>)>;

/// Where a session's bytes are read: Redis's arrive within [`SETTLE`]; Ruvio
/// must deliver as many as Redis did (`expected`), waiting for them.
pub fn observe(
    conn: &mut RawConn,
    name: String,
    expected: Option<&Transcript>,
    out: &mut Transcript,
) {
    let got = match expected.and_then(|e| e.get(out.len())) {
        None => {
            // Something is due (a reply or a push): at least one read.
            let mut got = read_some(conn);
            got.extend(drain(conn, SETTLE));
            got
        }
        Some((_, bytes)) => {
            let mut got = take(conn, bytes.len());
            if got != *bytes {
                got.extend(drain(conn, Duration::from_millis(200)));
            }
            got
        }
    };
    out.push((name, got));
}

/// Who sends a step of [`cross_shard_session`], and how.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum By {
    /// The writer, one command at a time.
    Writer,
    /// The writer, every command in one write (scripts over keys of both
    /// shards run in one batch under the script lock, docs/scripting.md).
    WriterPipelined,
    /// The tracking reader itself, every command in one write.
    Reader,
}

/// Where a cross-shard session's keys and connections are on Ruvio: `keys`
/// are `[b0, a0, b1, a1]`, the `a`s of one shard and the `b`s of another;
/// the tracking reader, the writer and the reader's RESP2 redirection target
/// are on shards `reader`, `writer` and `target`.
pub struct Layout {
    pub keys: [String; 4],
    pub reader: usize,
    pub writer: usize,
    pub target: usize,
}

/// A write of keys of two shards by the writer, after the tracking reader
/// read every key (see [`Layout`]): the
/// reader's invalidations, one push per key in the order the command writes
/// them (in RESP2 as `message`s to a subscriber the reader redirects to).
/// With `own` the reader writes itself: its pushes come after the reply,
/// before the replies of the commands it pipelined behind (in RESP2 its
/// replies, then its target's messages).
/// Each step's reply and pushes are kept; `expected` is Redis's transcript.
pub fn cross_shard_session(
    server: &Server,
    layout: &Layout,
    (resp3, lending): (bool, bool),
    expected: Option<&Transcript>,
) -> Transcript {
    let keys = &layout.keys;
    let [b0, a0, b1, a1] = keys.each_ref().map(String::as_str);
    assert_eq!(server.raw().cmd(&["FLUSHALL"]), b"+OK\r\n");
    let mut reader = conn_on(server, layout.reader);
    let mut writer = conn_on(server, layout.writer);
    let mut target = None;
    if resp3 {
        reader.cmd(&["HELLO", "3"]);
        assert_eq!(reader.cmd(&["CLIENT", "TRACKING", "ON"]), b"+OK\r\n");
    } else {
        let mut t = conn_on(server, layout.target);
        let id = client_id(&mut t);
        t.cmd(&["SUBSCRIBE", "__redis__:invalidate"]);
        let on = reader.cmd(&["CLIENT", "TRACKING", "ON", "REDIRECT", &id]);
        assert_eq!(on, b"+OK\r\n");
        target = Some(t);
    }
    let (own, by_writer) = (By::Reader, By::Writer);
    let mut steps: Vec<(&str, Vec<Vec<&str>>, By)> = Vec::new();
    if !lending {
        steps.extend([
            (
                "MSET",
                vec![vec!["MSET", b0, "1", a0, "2", b1, "3", a1, "4"]],
                by_writer,
            ),
            ("DEL", vec![vec!["DEL", a1, b1, a0, b0]], by_writer),
            (
                "MSET again",
                vec![vec!["MSET", a1, "1", b0, "2", a0, "3", b1, "4"]],
                by_writer,
            ),
            ("UNLINK", vec![vec!["UNLINK", b1, a0, a1, b0]], by_writer),
        ]);
        steps.push((
            "own MSET",
            vec![vec!["MSET", b0, "x", a0, "y", b1, "z", a1, "w"]],
            own,
        ));
        steps.push(("own DEL", vec![vec!["DEL", a0, b1, b0, a1]], own));
        // Pipelined: its pushes come between its reply and the next ones
        // (answered here while the parts were out).
        let pipeline = vec![
            vec!["MSET", a1, "p", b1, "q", a0, "r", b0, "s"],
            vec!["PING"],
            vec!["GET", a0],
        ];
        steps.push(("own MSET, PING, GET", pipeline, own));
    } else {
        let sets = |value| [b0, a0, b1, a1].map(|k| vec!["SET", k, value]);
        let multi = |by| {
            let mut commands = vec![vec!["MULTI"]];
            commands.extend(sets("m"));
            commands.push(vec!["EXEC"]);
            ("MULTI/EXEC", commands, by)
        };
        steps.push(multi(by_writer));
        steps.push(("DEL", vec![vec!["DEL", a1, b1, a0, b0]], by_writer));
        steps.push((
            "MSETNX",
            vec![vec!["MSETNX", b0, "1", a0, "2", b1, "3", a1, "4"]],
            by_writer,
        ));
        let script = "for i, k in ipairs(KEYS) do redis.call('set', k, i) end";
        steps.push((
            "EVAL",
            vec![vec!["EVAL", script, "4", a1, b0, a0, b1]],
            by_writer,
        ));
        steps.push(multi(own));
        steps.push((
            "own EVAL",
            vec![vec!["EVAL", script, "4", b1, a0, b0, a1]],
            own,
        ));
        let own_msetnx = vec!["MSETNX", a0, "1", b1, "2", a1, "3", b0, "4"];
        steps.push(("own DEL", vec![vec!["DEL", b1, a1, b0, a0]], own));
        steps.push(("own MSETNX", vec![own_msetnx], own));
        // Pipelined behind a transaction or MSETNX over both shards: its
        // pushes come right after the EXEC's (MSETNX's) reply, before PONG.
        let mut pipeline = vec![vec!["MULTI"]];
        pipeline.extend(sets("p"));
        pipeline.extend([vec!["EXEC"], vec!["PING"], vec!["GET", a0]]);
        steps.push(("own MULTI/EXEC, PING, GET", pipeline, own));
        // Reading the other shard's key, writing the first shard's only.
        let pipeline = vec![
            vec!["MULTI"],
            vec!["GET", b0],
            vec!["SET", a1, "r"],
            vec!["SET", a0, "r"],
            vec!["EXEC"],
            vec!["PING"],
        ];
        steps.push(("own MULTI/EXEC reading both shards, PING", pipeline, own));
        steps.push(("own DEL again", vec![vec!["DEL", a0, b0, a1, b1]], own));
        let pipeline = vec![
            vec!["MSETNX", b1, "5", a0, "6", b0, "7", a1, "8"],
            vec!["PING"],
            vec!["GET", b1],
        ];
        steps.push(("own MSETNX, PING, GET", pipeline, own));
        // Two scripts pipelined: the first borrows every key of the other
        // shard, the second writes them all (each script's writes in order,
        // scripts in the order they ran, as Redis). Whether they share a
        // batch of the script lock depends on what else waits for it: see
        // `scripts_batched_under_the_script_lock_invalidate_in_write_order`.
        let read =
            "local r = {} for i, k in ipairs(KEYS) do r[i] = redis.call('get', k) end return r";
        let mut pipeline = vec![vec!["EVAL", read, "4", b0, a0, b1, a1]];
        pipeline.push(vec!["EVAL", script, "4", b1, a0, b0, a1]);
        steps.push(("EVAL batch", pipeline, By::WriterPipelined));
        let mut pipeline = vec![vec!["EVAL", read, "4", b0, a0, b1, a1]];
        pipeline.push(vec!["EVAL", script, "4", a1, b0, a0, b1]);
        pipeline.push(vec!["PING"]);
        steps.push(("own EVAL batch, PING", pipeline, own));
    }
    let mut out = Transcript::new();
    for (name, commands, by) in &steps {
        for k in keys {
            let reply = reader.cmd(&["GET", k]);
            out.push((format!("{name}: GET {k}"), reply));
        }
        let request: Vec<u8> = commands.iter().flat_map(|c| encode(c)).collect();
        if *by == By::Reader {
            // Its own pushes follow the reply, before the next reply (read
            // off the socket: a reply read would buffer what follows).
            reader.send(&request);
            let replies = format!("{name}: replies and own pushes");
            observe(&mut reader, replies, expected, &mut out);
            if let Some(target) = target.as_mut() {
                let messages = format!("{name}: target's messages");
                observe(target, messages, expected, &mut out);
            }
            continue;
        }
        let replies: Vec<u8> = match by {
            By::WriterPipelined => {
                writer.send(&request);
                commands.iter().flat_map(|_| writer.read_reply()).collect()
            }
            _ => commands.iter().flat_map(|c| writer.cmd(c)).collect(),
        };
        out.push((format!("{name}: replies"), replies));
        let stream = target.as_mut().unwrap_or(&mut reader);
        observe(
            stream,
            format!("{name}: reader's pushes"),
            expected,
            &mut out,
        );
    }
    out
}

pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

pub fn count(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).filter(|w| *w == needle).count()
}

/// Runs [`cross_shard_session`] of `layout` in `modes` on the reference (Redis),
/// hands its transcript to `check` (which holds it to not being vacuous), then
/// on the target, and compares the two step by step, byte for byte; `label`
/// names the case in a failure.
pub fn compare_session(
    servers: &DiffServers,
    layout: &Layout,
    modes: (bool, bool),
    label: &str,
    check: impl FnOnce(&Transcript),
) {
    let expected = cross_shard_session(&servers.reference, layout, modes, None);
    check(&expected);
    let got = cross_shard_session(&servers.target, layout, modes, Some(&expected));
    for ((name, e), (_, g)) in expected.iter().zip(&got) {
        assert_eq!(show(g), show(e), "{label}, {name}");
    }
    assert_eq!(got.len(), expected.len());
}

/// The bytes of step `name` of `transcript`.
pub fn step<'a>(transcript: &'a Transcript, name: &str) -> &'a [u8] {
    let found = transcript.iter().find(|(n, _)| n == name);
    found.map(|(_, bytes)| bytes.as_slice()).expect(name)
}

/// `pushes` names `keys` in that order, one message each.
pub fn in_order(pushes: &[u8], keys: &[&String], resp3: bool) {
    let at: Vec<usize> = keys
        .iter()
        .map(|k| find(pushes, k.as_bytes()).expect("each key invalidated"))
        .collect();
    assert!(at.is_sorted(), "{}", show(pushes));
    let messages = if resp3 {
        b">2\r\n".as_slice()
    } else {
        b"*3\r\n"
    };
    assert_eq!(count(pushes, messages), keys.len(), "{}", show(pushes));
}
