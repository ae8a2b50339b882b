//! Differential test of the list and hash families: seeded random sequences of every
//! list and hash command (and the generic and string commands that meet those types) go
//! to a real `redis-server` 7.0 and to Ruvio (forward mode, 1 and 2 shards); the raw RESP
//! replies must be identical, command by command, except where Redis itself does not
//! promise an order (the rules below).
//!
//! # Key space
//!
//! Two groups of keys, each sharing a hash tag (so each group lives on one shard, and the
//! two groups on different shards when there are 2): per group three list keys, two hash
//! keys and one string key. A command gets a key of its own type most of the time, so
//! that lists and hashes grow past the encoding thresholds, and another key of the group
//! otherwise, which brings WRONGTYPE and missing-key replies. Multi-key commands
//! (LMOVE, RPOPLPUSH, LMPOP, RENAME, RENAMENX, COPY, DEL, EXISTS, MGET and the
//! blocking BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP) take keys of any group: forward
//! mode runs them across shards by borrowing the keys (docs/cross-shard.md).
//!
//! # Sequences
//!
//! Seeds 2 and 4 send pipelines of up to 40 commands in one write, 1 and 3 one step at a
//! time. Seeds 2 and 3 switch the connection to RESP3 (`HELLO 3`) first, so maps
//! (HGETALL), nested arrays (HRANDFIELD WITHVALUES, LMPOP) and RESP3 nulls are compared
//! too. Each sequence starts from empty databases with randomly chosen encoding
//! thresholds (`list-max-listpack-size` in -5..=5, small `hash-max-listpack-entries` and
//! `hash-max-listpack-value`, or the defaults) and changes them again now and then, so
//! that lists and hashes cross their thresholds in both directions. At the end every
//! command is sent once with a wrong number of arguments, and the whole state is
//! compared: DBSIZE, and TYPE, LRANGE 0 -1, HGETALL, OBJECT ENCODING and GET of every key.
//!
//! Blocking commands get a timeout of 0.01 s (or an invalid one): on a key with data they
//! answer at once; on an empty key they answer a nil array after the timeout. The
//! reference Redis runs with `hz 100` so that such a timeout fires within about 20 ms
//! (its default hz of 10 rounds it up to 100 ms).
//!
//! # Comparison rules (the whole allowlist)
//!
//! 1. OBJECT ENCODING of a list: Redis 7.0 always answers `quicklist`; Ruvio follows
//!    Redis 7.2 (`listpack` for small lists, `quicklist` for large ones), so when Redis
//!    says `quicklist`, `listpack` is accepted too. Hash encodings (`listpack` /
//!    `hashtable`, same thresholds in 7.0 and 7.2) and string encodings must be equal.
//!    `list_encoding_transitions` (list_encodings.rs) checks the 7.2 list rules exactly
//!    instead.
//! 2. HKEYS, HVALS, HGETALL: a listpack hash keeps insertion order, so the replies must
//!    be equal; a hashtable's order is its own (Redis seeds its hash function at random),
//!    so there the elements (HGETALL: the field/value pairs) are compared as multisets.
//!    The generator follows each of these commands with `OBJECT ENCODING key`, whose
//!    reply (compared exactly on its own) says which rule applies.
//! 3. HRANDFIELD: without a count, both must answer a field (or both nil); with a
//!    positive count that returned fewer elements than asked, the reply is the whole hash
//!    and is compared as a set; otherwise (a random subset, or a negative count with
//!    repetitions) only the shape is compared: reply types, lengths, nesting, and for a
//!    positive count that the fields are distinct.
//! 4. HSCAN: cursors and batch sizes are each server's own; every HSCAN is iterated to
//!    cursor 0 on each server and the union of field/value pairs (deduplicated, sorted)
//!    is compared. Errors (bad cursor, bad options, WRONGTYPE) must be equal.
//!
//! # Not generated
//!
//! - `LPOS ... RANK -9223372036854775808`: Redis 7.0.15 negates it with signed overflow
//!   and answers as if it were a valid rank; 7.2 rejects it ("value is out of range").
//! - HRANDFIELD with a huge negative count without WITHVALUES (Redis would build a reply
//!   of that many elements), and any cursor but 0 or an invalid one for HSCAN.
//! - Blocking commands that could block for long (timeout 0 or more than 0.02 s).
//!
//! # Families
//!
//! The test asks the target (COMMAND INFO) which of three families it implements: lists,
//! blocking lists, hashes. A family the target lacks entirely is not generated (and the
//! test says so); a family the target implements only in part fails the test. With no
//! family at all the test is skipped.
//!
//! # Coverage
//!
//! The full run (no `RUVIO_DIFF_SEED` / `RUVIO_DIFF_COMMANDS`) checks, on Redis's replies,
//! that every generated command got at least one success and every error case listed in
//! `REQUIRED_REPLIES` (collections/coverage.rs), so that the generator cannot quietly stop
//! reaching a path.
//!
//! Reproduce a failure with `RUVIO_DIFF_SEED=<seed> RUVIO_DIFF_COMMANDS=<n>`.
//! `RUVIO_DIFF_TRACE=1` prints every command with Redis's reply and, at the end, a
//! histogram of Redis's reply kinds per command; `RUVIO_DIFF_TRACE=histogram` only the
//! histogram.
//!
//! The generator, the comparison rules and the coverage accounting live in
//! `collections/`; this file holds the run driver and the tests.

mod collections;
mod common;

use collections::compare::{equivalent, name_of, reply_kind, scan_union};
use collections::coverage::{check_coverage, histogram_key, print_histogram, Histogram};
use collections::generator::{supported_families, Family, Generator};
use common::*;

/// Commands per sequence unless `RUVIO_DIFF_COMMANDS` says otherwise (as differential.rs).
const COMMANDS_PER_SEED: usize = 2500;
/// Seeds per configuration unless `RUVIO_DIFF_SEED` picks one: odd ones one step at a
/// time, even ones pipelined; 2 and 3 in RESP3, so every mix of the two occurs.
const SEEDS: &[u64] = &[1, 2, 3, 4];
/// Largest pipeline sent in one write.
const PIPELINE_MAX: usize = 40;
/// `hz` of the reference Redis: blocked clients time out in its event loop, which wakes
/// every 1000/hz ms, so hz 100 answers a 0.01 s timeout in about 20 ms instead of 100.
const REDIS_HZ: &str = "100";

/// One sequence against both servers: the two connections, what a failure message
/// needs, and the histogram the sequences of one configuration share.
/// Send `batch` to both servers in one write each, then compare the replies in
/// order, counting each reply's kind in `histogram`. An HSCAN may only come last: it
/// is iterated to the end on each server.
fn compare_batch(
    run: &mut DiffRun<'_>,
    histogram: &mut Histogram,
    batch: &[Cmd],
    start_index: usize,
) {
    let (mut expected, mut got) = run.send(batch);
    for (i, command) in batch.iter().enumerate() {
        *histogram
            .entry(histogram_key(command))
            .or_default()
            .entry(reply_kind(&expected[i]))
            .or_default() += 1;
        if name_of(command) == "HSCAN" {
            if i + 1 == batch.len() {
                expected[i] = scan_union(&mut run.reference, command, &expected[i]);
                got[i] = scan_union(&mut run.target, command, &got[i]);
            } else {
                // Only the arity cases of the state dump: they cannot iterate.
                assert!(
                    expected[i].starts_with(b"-"),
                    "a successful HSCAN must end its batch"
                );
            }
        }
    }
    run.compare_probing(batch, start_index, &expected, &got, equivalent);
}

fn run_differential(label: &str, shards: usize) {
    let Some(servers) = DiffServers::forward(label, shards) else {
        return;
    };
    let settings = DiffSettings::from_env(SEEDS, COMMANDS_PER_SEED);
    let families = supported_families(&mut servers.target.raw());
    if families.is_empty() {
        eprintln!("SKIPPED {label}: the target implements no list or hash commands yet");
        return;
    }
    if families.len() < Family::ALL.len() {
        eprintln!("{label}: the target implements only {families:?}; generating those");
    }
    servers.set_redis_hz(REDIS_HZ);
    let mut histogram = Histogram::new();
    // The HELLO 3 reply names the server and its version: not compared.
    let total = servers.each_seed(label, &settings, true, |run| {
        run.commands = settings.commands;
        let mut generator = Generator::new(run.seed, &families);
        let initial = generator.initial_config();
        compare_batch(run, &mut histogram, &initial, 0);
        let mut index = 0;
        while index < settings.commands {
            let size = batch_size(&mut generator.rng, run.pipelined, PIPELINE_MAX);
            let mut batch: Vec<Cmd> = Vec::new();
            while batch.len() < size && index + batch.len() < settings.commands {
                let step = generator.next();
                let scan = step.iter().any(|c| name_of(c) == "HSCAN");
                batch.extend(step);
                if scan {
                    break;
                }
            }
            compare_batch(run, &mut histogram, &batch, index);
            index += batch.len();
        }
        let dump = generator.state_dump();
        compare_batch(run, &mut histogram, &dump, index);
    });
    if settings.trace_summary {
        print_histogram(label, &histogram);
    }
    if settings.full_run {
        check_coverage(label, &histogram, &families);
    }
    eprintln!("{label}: {total} replies equivalent");
}

#[test]
fn differential_collections_forward_1_shard() {
    run_differential("differential_collections_forward_1_shard", 1);
}

#[test]
fn differential_collections_forward_2_shards() {
    run_differential("differential_collections_forward_2_shards", 2);
}

/// The comparison rules themselves: what they forgive and what they do not.
#[test]
fn comparison_rules_are_narrow() {
    let encoding = cmd(&["OBJECT", "ENCODING", "k"]);
    let quicklist = b"$9\r\nquicklist\r\n";
    let listpack = b"$8\r\nlistpack\r\n";
    let hashtable = b"$9\r\nhashtable\r\n";
    assert!(equivalent(&encoding, quicklist, listpack, None));
    assert!(!equivalent(&encoding, listpack, quicklist, None));
    assert!(!equivalent(&encoding, hashtable, listpack, None));
    assert!(!equivalent(&encoding, b"$6\r\nembstr\r\n", listpack, None));

    let hgetall = cmd(&["HGETALL", "h"]);
    let ab = b"*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n";
    let ba = b"*4\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\na\r\n$1\r\n1\r\n";
    let swapped = b"*4\r\n$1\r\na\r\n$1\r\n2\r\n$1\r\nb\r\n$1\r\n1\r\n";
    assert!(equivalent(&hgetall, ab, ba, Some(hashtable)));
    assert!(!equivalent(&hgetall, ab, ba, Some(listpack)));
    assert!(!equivalent(&hgetall, ab, swapped, Some(hashtable)));
    let map_ab = b"%2\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n";
    let map_ba = b"%2\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\na\r\n$1\r\n1\r\n";
    assert!(equivalent(&hgetall, map_ab, map_ba, Some(hashtable)));
    assert!(!equivalent(&hgetall, map_ab, ba, Some(hashtable)));
    let hkeys = cmd(&["HKEYS", "h"]);
    assert!(equivalent(
        &hkeys,
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        b"*2\r\n$1\r\nb\r\n$1\r\na\r\n",
        Some(hashtable)
    ));
    assert!(!equivalent(
        &hkeys,
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        b"*2\r\n$1\r\na\r\n$1\r\nc\r\n",
        Some(hashtable)
    ));

    // HRANDFIELD: a whole hash as a set, a subset or repetitions by shape only.
    let whole = cmd(&["HRANDFIELD", "h", "100", "WITHVALUES"]);
    assert!(equivalent(&whole, ab, ba, None));
    assert!(!equivalent(&whole, ab, swapped, None));
    let nested_ab = b"*2\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n";
    let nested_ba = b"*2\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n";
    assert!(equivalent(&whole, nested_ab, nested_ba, None));
    assert!(!equivalent(&whole, nested_ab, ba, None));
    let subset = cmd(&["HRANDFIELD", "h", "1"]);
    assert!(equivalent(
        &subset,
        b"*1\r\n$1\r\na\r\n",
        b"*1\r\n$2\r\nbb\r\n",
        None
    ));
    assert!(!equivalent(
        &subset,
        b"*1\r\n$1\r\na\r\n",
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        None
    ));
    let two = cmd(&["HRANDFIELD", "h", "2"]);
    assert!(!equivalent(
        &two,
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        b"*2\r\n$1\r\na\r\n$1\r\na\r\n",
        None
    ));
    let repeated = cmd(&["HRANDFIELD", "h", "-2"]);
    assert!(equivalent(
        &repeated,
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        b"*2\r\n$1\r\na\r\n$1\r\na\r\n",
        None
    ));
    let single = cmd(&["HRANDFIELD", "h"]);
    assert!(equivalent(&single, b"$1\r\na\r\n", b"$1\r\nb\r\n", None));
    assert!(!equivalent(&single, b"$1\r\na\r\n", b"$-1\r\n", None));
    assert!(!equivalent(
        &single,
        b"-ERR syntax error\r\n",
        b"$1\r\na\r\n",
        None
    ));

    // Everything else must be byte-equal.
    assert!(!equivalent(
        &cmd(&["LRANGE", "l", "0", "-1"]),
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        b"*2\r\n$1\r\nb\r\n$1\r\na\r\n",
        Some(hashtable)
    ));
}
