//! Pipelines of commands from the command table, on two clients of a two-shard
//! server in forward or per-shard mode, through the real dispatch path (routing,
//! MOVED and CROSSSLOT, forwarding, split and merged replies, key lending,
//! transactions on their keys' owner or riding on a loan, blocking, CLIENT PAUSE),
//! as multibulk or inline requests with empty lines between them,
//! with the reads cut at arbitrary points and some reads run while the other
//! shard's messages are still in flight. See `ruvio_server::shard::inproc` for the harness.
//!
//! Checks: no panic, no hang (the shards go quiet; every blocked or paused client
//! is answered once time passes or it is unblocked); every reply is well-formed
//! RESP; exactly one reply per request, in order: each request is followed by
//! `ECHO <n>`, and reply 2n+1 must be that echo (or `+QUEUED` inside MULTI).

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use ruvio_fuzz::commands::Request;
use ruvio_fuzz::resp::{encode_inline, encode_request};
use ruvio_server::config::PortMode;
use ruvio_server::shard::inproc::TwoShards;

#[derive(Arbitrary, Debug)]
struct Input {
    /// Per-shard mode (MOVED, CROSSSLOT, cluster replies) instead of forward mode.
    per_shard: bool,
    /// Each request with the client (0 or 1) that sends it.
    requests: Vec<(bool, Request)>,
    /// Where each client's reads end (offsets into its bytes, modulo their length).
    cuts: Vec<u16>,
    /// Per read (cycled): the shards keep their messages after it instead of
    /// exchanging them until quiet, so the other client's next read runs while a
    /// cross-shard command, a loan or a forwarded transaction is in flight.
    unsettled: Vec<bool>,
    /// Per request (cycled): sent as an inline line instead of a multibulk.
    inline: Vec<bool>,
    /// Per request (cycled): an empty line before it (skipped, no reply).
    blank_lines: Vec<bool>,
}

/// Inline lines are kept under the server's inline limit (64 KiB).
const INLINE_LINE_MAX: usize = 16 * 1024;

/// Whether the `n`th request takes the option `flags` (cycled; none when empty).
fn cycled(flags: &[bool], n: usize) -> bool {
    !flags.is_empty() && flags[n % flags.len()]
}

/// Allocations are counted as in the binary, so CONFIG SET maxmemory evicts and
/// refuses for real.
#[global_allocator]
static ALLOCATOR: ruvio_server::memory::alloc::CountingAlloc =
    ruvio_server::memory::alloc::CountingAlloc;

/// Time steps tried before everyone is released: a blocked command's timeout or a
/// pause may run out within one of them.
const TIME_STEPS_MS: [u64; 3] = [1_000, 60_000, 3_600_000];

fuzz_target!(|input: Input| {
    let mode = if input.per_shard {
        PortMode::PerShard
    } else {
        PortMode::Forward
    };
    let mut server = TwoShards::with_mode(mode);
    let clients = server.clients.len();
    let mut streams: Vec<Vec<u8>> = vec![Vec::new(); clients];
    let mut sent = vec![0usize; clients];
    let show = std::env::var_os("RUVIO_FUZZ_SHOW").is_some();
    for (second, request) in &input.requests {
        let c = usize::from(*second);
        if show {
            eprintln!(
                "client {c}: {}",
                ruvio_fuzz::commands::show(&request.argv())
            );
        }
        let n = sent.iter().sum::<usize>();
        if cycled(&input.blank_lines, n) {
            streams[c].extend_from_slice(b"\r\n");
        }
        let argv = request.argv();
        let inline = cycled(&input.inline, n)
            .then(|| encode_inline(&argv, INLINE_LINE_MAX))
            .flatten();
        streams[c].extend_from_slice(&inline.unwrap_or_else(|| encode_request(&argv)));
        let marker = sent[c].to_string();
        streams[c].extend_from_slice(&encode_request(&[b"ECHO".as_slice(), marker.as_bytes()]));
        sent[c] += 1;
    }
    let reads: Vec<Vec<&[u8]>> = streams
        .iter()
        .map(|s| split_at_cuts(s, &input.cuts))
        .collect();
    let rounds = reads.iter().map(Vec::len).max().unwrap_or(0);
    let mut read = 0;
    for round in 0..rounds {
        for (c, pieces) in reads.iter().enumerate() {
            if let Some(piece) = pieces.get(round) {
                let hold = cycled(&input.unsettled, read);
                read += 1;
                match hold {
                    true => server.receive_unsettled(c, piece),
                    false => server.receive(c, piece),
                }
            }
        }
    }
    server.settle();
    // Each round answers at least one waiting command, or nothing ever will.
    loop {
        for step in TIME_STEPS_MS {
            server.advance(step);
        }
        if !server.anyone_waits() {
            break;
        }
        assert!(
            server.release_everyone(),
            "clients wait and nothing releases them"
        );
    }
    for c in 0..clients {
        check_replies(&server, c, sent[c]);
    }
});

/// `bytes` cut at the given offsets (modulo its length), in order.
fn split_at_cuts<'a>(bytes: &'a [u8], cuts: &[u16]) -> Vec<&'a [u8]> {
    let mut ends: Vec<usize> = cuts
        .iter()
        .map(|&c| usize::from(c) % (bytes.len() + 1))
        .collect();
    ends.push(bytes.len());
    ends.sort_unstable();
    ends.dedup();
    let mut start = 0;
    ends.into_iter()
        .map(|end| {
            let piece = &bytes[start..end];
            start = end;
            piece
        })
        .collect()
}

/// Client `c` sent `requests` requests, each followed by its marker.
fn check_replies(server: &TwoShards, c: usize, requests: usize) {
    let view = server.view(c);
    assert!(
        !view.blocked && !view.paused && !view.holding,
        "client {c} still waits: {view:?}"
    );
    let frames = frames(view.replies);
    if view.closing {
        assert!(
            frames.len() <= 2 * requests,
            "client {c}: more replies than requests"
        );
    } else {
        assert_eq!(view.unparsed, 0, "client {c}: input left unparsed");
        assert_eq!(
            frames.len(),
            2 * requests,
            "client {c}: one reply per request"
        );
    }
    for (n, pair) in frames.chunks(2).enumerate() {
        if let [_, marker] = pair {
            let echo = encode_bulk(n.to_string().as_bytes());
            assert!(
                *marker == echo.as_slice() || *marker == b"+QUEUED\r\n",
                "client {c}: reply {} is not marker {n}: {:?}",
                2 * n + 1,
                String::from_utf8_lossy(marker)
            );
        }
    }
}

fn encode_bulk(bytes: &[u8]) -> Vec<u8> {
    let mut out = format!("${}\r\n", bytes.len()).into_bytes();
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
    out
}

/// The replies in `bytes`, each whole; push messages (RESP3 `>`) are not replies.
fn frames(mut bytes: &[u8]) -> Vec<&[u8]> {
    let mut frames = Vec::new();
    while !bytes.is_empty() {
        let len = match ruvio_resp::scan_reply(bytes) {
            Ok(Some(len)) => len,
            other => panic!(
                "malformed reply ({other:?}): {:?}",
                String::from_utf8_lossy(bytes)
            ),
        };
        if bytes[0] != b'>' {
            frames.push(&bytes[..len]);
        }
        bytes = &bytes[len..];
    }
    frames
}
