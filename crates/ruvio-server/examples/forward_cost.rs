//! The forwarding tax in instructions (issue 36 item 3, docs/runtime.md "The
//! forwarding tax"): two shards of the real server in one thread (the in-process
//! harness, `shard::inproc`), no sockets, no thread switch; a client of shard 0
//! sends `reps` pipelines of `pipeline` commands whose keys all live on shard 0
//! (`local`) or all on shard 1 (`forwarded`: each command is tagged, pushed to the
//! outbox, carried over the channel, run by shard 1, and its reply copied back into
//! the held slot of the client's queue). `exec` is a transaction of 10 SETs
//! (MULTI ... EXEC counts as one command): `forwarded` spreads its keys over both
//! shards, so each shard runs its half in place (before 2026-12-05-4 the EXEC
//! borrowed half of them: docs/cross-shard.md). Only [`measured_pipelines`] is meant to be
//! counted: `scripts/forward_cost.py` runs this under
//! `valgrind --tool=callgrind --toggle-collect='*measured_pipelines*'` with `reps`
//! and `2 * reps` and takes the difference, so whatever is paid once per run
//! (the first allocations, table growth) cancels and what is left is the cost of
//! `reps` pipelines in steady state.
//!
//! `cargo run --release -p ruvio-server --example forward_cost -- get forwarded 16 100`

use ruvio_server::config::PortMode;
use ruvio_server::shard::inproc::{pipeline, TwoShards};
use std::hint::black_box;
use std::time::Instant;

/// Keys per shard the commands cycle through: enough that a pipeline never
/// repeats a key, few enough that the keyspace stays in cache.
const KEYS_PER_SHARD: usize = 1024;

/// Keys of one MGET (the "MGET of 10").
const MGET_KEYS: usize = 10;

/// SETs in one transaction (the "EXEC of 10 SETs").
const EXEC_SETS: usize = 10;

/// Every value stored: 16 bytes, as the load (ruvio-bench's default size).
const VALUE: &str = "vvvvvvvvvvvvvvvv";

/// The client of shard 0 that sends everything.
const CLIENT: usize = 0;

/// `count` keys owned by `shard`.
fn keys_of(s: &TwoShards, shard: usize, count: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("key:{i:06}"))
        .filter(|k| s.key_owner(k.as_bytes()) == shard)
        .take(count)
        .collect()
}

/// Keys of both shards in turn: a transaction's SETs spread over both (the
/// `forwarded` place of `exec`, where each shard runs its half in place).
fn spread(s: &TwoShards) -> Vec<String> {
    let (mine, theirs) = (keys_of(s, 0, KEYS_PER_SHARD), keys_of(s, 1, KEYS_PER_SHARD));
    mine.into_iter()
        .zip(theirs)
        .flat_map(|(a, b)| [a, b])
        .collect()
}

/// The pipelines to send, encoded ahead (the client's encoding is not the
/// server's cost): `reps` of them, each `pipeline` commands of `command`.
fn pipelines(command: &str, keys: &[String], pipeline_len: usize, reps: usize) -> Vec<Vec<u8>> {
    let mut next = 0usize;
    let mut key = || {
        let k = keys[next % keys.len()].clone();
        next += 1;
        k
    };
    (0..reps)
        .map(|_| {
            let commands: Vec<Vec<String>> = (0..pipeline_len)
                .flat_map(|_| match command {
                    "get" => vec![vec!["GET".to_string(), key()]],
                    "set" => vec![vec!["SET".to_string(), key(), VALUE.to_string()]],
                    "mget" => vec![std::iter::once("MGET".to_string())
                        .chain((0..MGET_KEYS).map(|_| key()))
                        .collect()],
                    "exec" => std::iter::once(vec!["MULTI".to_string()])
                        .chain((0..EXEC_SETS).map(|_| vec!["SET".into(), key(), VALUE.into()]))
                        .chain(std::iter::once(vec!["EXEC".to_string()]))
                        .collect(),
                    other => panic!("unknown command {other}: get, set, mget or exec"),
                })
                .collect();
            let refs: Vec<Vec<&str>> = commands
                .iter()
                .map(|c| c.iter().map(String::as_str).collect())
                .collect();
            let slices: Vec<&[&str]> = refs.iter().map(Vec::as_slice).collect();
            pipeline(&slices)
        })
        .collect()
}

/// The one part callgrind counts: every pipeline arrives, runs, its messages
/// are exchanged until the shards are quiet, and its replies are sent.
#[inline(never)]
fn measured_pipelines(s: &mut TwoShards, inputs: &[Vec<u8>]) {
    for input in inputs {
        s.receive(CLIENT, black_box(input));
        s.clear_replies(CLIENT);
    }
}

/// The reply bytes one pipeline must produce (checked before measuring).
fn expected_reply(command: &str, pipeline_len: usize) -> Vec<u8> {
    let one = match command {
        "get" => format!("${}\r\n{VALUE}\r\n", VALUE.len()),
        "set" => "+OK\r\n".to_string(),
        "exec" => format!(
            "+OK\r\n{}*{EXEC_SETS}\r\n{}",
            "+QUEUED\r\n".repeat(EXEC_SETS),
            "+OK\r\n".repeat(EXEC_SETS)
        ),
        _ => {
            let element = format!("${}\r\n{VALUE}\r\n", VALUE.len());
            format!("*{MGET_KEYS}\r\n{}", element.repeat(MGET_KEYS))
        }
    };
    one.repeat(pipeline_len).into_bytes()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [command, place, pipeline_len, reps] = args.as_slice() else {
        eprintln!("usage: forward_cost get|set|mget|exec local|forwarded PIPELINE REPS");
        std::process::exit(2);
    };
    let pipeline_len: usize = pipeline_len.parse().expect("PIPELINE is a number");
    let reps: usize = reps.parse().expect("REPS is a number");
    let mut s = TwoShards::with_mode(PortMode::Forward);
    let keys = match (command.as_str(), place.as_str()) {
        ("exec", "forwarded") => spread(&s),
        (_, "local") => keys_of(&s, 0, KEYS_PER_SHARD),
        (_, "forwarded") => keys_of(&s, 1, KEYS_PER_SHARD),
        (_, other) => panic!("unknown place {other}: local or forwarded"),
    };
    // Every key exists with its value before anything is counted.
    for chunk in keys.chunks(64) {
        let sets: Vec<Vec<&str>> = chunk
            .iter()
            .map(|k| vec!["SET", k.as_str(), VALUE])
            .collect();
        let slices: Vec<&[&str]> = sets.iter().map(Vec::as_slice).collect();
        s.receive(CLIENT, &pipeline(&slices));
        s.clear_replies(CLIENT);
    }
    let inputs = pipelines(command, &keys, pipeline_len, reps);
    // One pipeline outside the count, checked: the replies are Redis's and whole.
    s.receive(CLIENT, &inputs[0]);
    assert_eq!(
        s.view(CLIENT).replies,
        expected_reply(command, pipeline_len).as_slice()
    );
    s.clear_replies(CLIENT);
    let started = Instant::now();
    measured_pipelines(&mut s, &inputs);
    let elapsed = started.elapsed();
    let view = s.view(CLIENT);
    assert!(!view.holding && view.unparsed == 0, "every reply released");
    println!(
        "{command} {place} pipeline {pipeline_len}: {reps} pipelines, {:.0} ns a command",
        elapsed.as_nanos() as f64 / (reps * pipeline_len) as f64
    );
}
