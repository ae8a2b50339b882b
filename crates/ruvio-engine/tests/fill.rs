//! FILLGET and FILLSET, command by command: request in, exact RESP bytes out, the
//! block requests, and the log records.

mod common;

use common::*;
use ruvio_engine::{CmdError, Engine, ExecCtx, LEASE_MS_DEFAULT, LEASE_MS_MAX};

/// The lease reply under RESP2 for `token` and `lease_ms`.
fn lease2(token: &str, lease_ms: u64) -> String {
    format!(
        "*4\r\n{}{}{}{}",
        bulk("token"),
        bulk(token),
        bulk("lease"),
        int(lease_ms as i64)
    )
}

/// The token of a RESP2 or RESP3 lease reply.
fn token_of(reply: &str) -> String {
    let lines: Vec<&str> = reply.split("\r\n").collect();
    assert_eq!(lines[2], "token", "not a lease: {reply:?}");
    lines[4].to_owned()
}

const PENDING2: &str = "*-1\r\n";

#[test]
fn a_present_key_answers_exactly_as_get() {
    let mut h = Harness::default();
    h.run("SET s hello");
    h.run("SET n 12345");
    h.run("RPUSH l a");
    for key in ["s", "n", "l"] {
        assert_eq!(
            h.run(&format!("FILLGET {key}")),
            h.run(&format!("GET {key}"))
        );
    }
    assert_eq!(h.run("FILLGET l"), WRONGTYPE);
    assert_eq!(h.run("FILLGET s LEASE 5 WAIT 0"), bulk("hello"));
    let mut h3 = Harness::resp3();
    h3.run("SET s hello");
    assert_eq!(h3.run("FILLGET s"), bulk("hello"));
    assert_eq!(h.effects.dirty, 0);
}

#[test]
fn the_first_miss_gets_a_lease_the_others_wait() {
    let mut h = Harness::default();
    let reply = h.run("FILLGET k");
    let token = token_of(&reply);
    assert_eq!(token.len(), 32);
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(reply, lease2(&token, LEASE_MS_DEFAULT));
    assert_eq!(h.blocked, None);
    assert!(
        h.log_of("FILLGET other").is_empty(),
        "a lease is not logged"
    );
    assert_eq!(h.effects.dirty, 0);
    assert!(h.effects.modified_keys().next().is_none());

    // Another caller blocks on the key, WAIT defaulting to the lease time.
    assert_eq!(h.run("FILLGET k"), "");
    let block = h.blocked.take().expect("blocked");
    assert_eq!(block.keys.as_slice(), [1]);
    assert_eq!(block.deadline_ms, Some(NOW_MS + LEASE_MS_DEFAULT));
    assert_eq!(h.run("FILLGET k LEASE 300"), "");
    assert_eq!(h.blocked.take().unwrap().deadline_ms, Some(NOW_MS + 300));
    assert_eq!(h.run("FILLGET k WAIT 50 LEASE 300"), "");
    assert_eq!(h.blocked.take().unwrap().deadline_ms, Some(NOW_MS + 50));
    // WAIT 0: at once, "someone is filling".
    assert_eq!(h.run("FILLGET k WAIT 0"), PENDING2);
    assert_eq!(h.blocked, None);

    // FILLSET stores it (logged as SET), then everyone reads it.
    assert_eq!(
        h.log_of(&format!("FILLSET k {token} v1")),
        ["SET k v1".to_owned()]
    );
    let events: Vec<&str> = h.effects.events().map(|(e, _, _)| e.name).collect();
    assert_eq!(events, ["set"]);
    assert_eq!(h.effects.dirty, 1);
    assert_eq!(h.run("FILLGET k"), bulk("v1"));
    assert_eq!(h.run("TTL k"), int(-1));
}

#[test]
fn resp3_leases_are_maps_and_pending_is_null() {
    let mut h = Harness::resp3();
    let reply = h.run("FILLGET k LEASE 1500");
    let token = token_of(&reply);
    assert_eq!(
        reply,
        format!(
            "%2\r\n{}{}{}:1500\r\n",
            bulk("token"),
            bulk(&token),
            bulk("lease")
        )
    );
    assert_eq!(h.run("FILLGET k WAIT 0"), NIL3);
}

#[test]
fn stale_tokens_store_nothing() {
    let mut h = Harness::default();
    let stale = err("ERR fill token is stale or unknown (the lease ended or was never granted)");
    assert_eq!(h.run("FILLSET k nonsense v"), stale, "never granted");
    assert_eq!(h.run(&format!("FILLSET k {} v", "0".repeat(32))), stale);
    let token = token_of(&h.run("FILLGET k LEASE 100"));
    assert_eq!(
        h.run(&format!("FILLSET other {token} v")),
        stale,
        "other key"
    );
    h.db = 1;
    assert_eq!(h.run(&format!("FILLSET k {token} v")), stale, "other db");
    h.db = 0;
    // Expired: the next caller gets a new lease, the old token is refused.
    h.now_ms += 100;
    let next = token_of(&h.run("FILLGET k"));
    assert_ne!(next, token);
    assert_eq!(
        h.log_of(&format!("FILLSET k {token} old")),
        Vec::<String>::new()
    );
    assert_eq!(h.run("EXISTS k"), int(0));
    assert_eq!(h.run(&format!("FILLSET k {next} new")), OK);
    assert_eq!(h.run(&format!("FILLSET k {next} again")), stale, "used");
    assert_eq!(h.run("GET k"), bulk("new"));
    // Upper-case hex is the same token.
    h.run("DEL k");
    let token = token_of(&h.run("FILLGET k"));
    assert_eq!(
        h.run(&format!("FILLSET k {} v", token.to_ascii_uppercase())),
        OK
    );
}

#[test]
fn another_write_ends_the_lease() {
    let mut h = Harness::default();
    let token = token_of(&h.run("FILLGET k"));
    assert_eq!(h.run("SET k from-set"), OK);
    assert_eq!(h.run("FILLGET k"), bulk("from-set"));
    assert_eq!(
        h.run(&format!("FILLSET k {token} from-fill")),
        err("ERR fill token is stale or unknown (the lease ended or was never granted)")
    );
    assert_eq!(h.run("GET k"), bulk("from-set"));
    // The lease is gone with the refusal: after a DEL the next miss gets a lease.
    h.run("DEL k");
    assert!(h.run("FILLGET k").starts_with("*4\r\n"));
}

#[test]
fn fillset_expiry_is_logged_as_an_absolute_time() {
    let mut h = Harness::default();
    let token = token_of(&h.run("FILLGET a"));
    assert_eq!(
        h.log_of(&format!("FILLSET a {token} v EX 10")),
        [format!("SET a v PXAT {}", NOW_MS + 10_000)]
    );
    assert_eq!(h.run("PTTL a"), int(10_000));
    let token = token_of(&h.run("FILLGET b"));
    assert_eq!(
        h.log_of(&format!("FILLSET b {token} v px 1500")),
        [format!("SET b v PXAT {}", NOW_MS + 1500)]
    );
    assert_eq!(h.run("PTTL b"), int(1500));
    let token = token_of(&h.run("FILLGET c"));
    let line = |rest: &str| format!("FILLSET c {token} v {rest}");
    assert_eq!(h.run(&line("EX")), SYNTAX);
    assert_eq!(h.run(&line("KEEPTTL")), SYNTAX);
    assert_eq!(h.run(&line("EX 1 PX 1")), SYNTAX);
    assert_eq!(h.run(&line("EXAT 1")), SYNTAX);
    assert_eq!(h.run(&line("EX x")), NOT_INT);
    assert_eq!(
        h.run(&line("EX 0")),
        err("ERR invalid expire time in 'fillset' command")
    );
    // Option errors leave the lease in place.
    assert_eq!(h.run(&line("PX 5")), OK);
    assert_eq!(h.run("GET c"), bulk("v"));
}

#[test]
fn option_errors() {
    let mut h = Harness::default();
    let lease = err("ERR LEASE must be between 1 and 3600000 milliseconds");
    let wait = err("ERR WAIT must be between 0 and 3600000 milliseconds");
    assert_eq!(
        CmdError::FillLeaseRange.message(),
        &lease[1..lease.len() - 2]
    );
    assert!(lease.contains(&LEASE_MS_MAX.to_string()));
    assert_eq!(h.run("FILLGET k LEASE 0"), lease);
    assert_eq!(h.run("FILLGET k LEASE -1"), lease);
    assert_eq!(h.run("FILLGET k LEASE 3600001"), lease);
    assert_eq!(h.run("FILLGET k WAIT -1"), wait);
    assert_eq!(h.run("FILLGET k WAIT 3600001"), wait);
    assert_eq!(h.run("FILLGET k LEASE x"), NOT_INT);
    assert_eq!(h.run("FILLGET k LEASE"), SYNTAX);
    assert_eq!(h.run("FILLGET k NOPE 1"), SYNTAX);
    assert_eq!(
        h.run("FILLGET"),
        err("ERR wrong number of arguments for 'fillget' command")
    );
    assert_eq!(
        h.run("FILLSET k t"),
        err("ERR wrong number of arguments for 'fillset' command")
    );
    // Nothing was granted by the failed calls.
    assert!(h.run("FILLGET k LEASE 3600000").starts_with("*4\r\n"));
}

#[test]
fn expired_leases_are_reported_once_for_waking() {
    let mut h = Harness::default();
    token_of(&h.run("FILLGET a LEASE 100"));
    let b = token_of(&h.run("FILLGET b LEASE 200"));
    h.db = 2;
    token_of(&h.run("FILLGET a LEASE 100"));
    let mut ended = Vec::new();
    h.engine
        .expire_fill_leases(NOW_MS + 99, |db, k| ended.push((db, k.to_vec())));
    assert!(ended.is_empty());
    h.engine
        .expire_fill_leases(NOW_MS + 100, |db, k| ended.push((db, k.to_vec())));
    ended.sort();
    assert_eq!(ended, [(0, b"a".to_vec()), (2, b"a".to_vec())]);
    h.db = 0;
    h.now_ms = NOW_MS + 150;
    assert_eq!(h.run(&format!("FILLSET b {b} v")), OK);
    // A lease ended by FILLSET is not reported again.
    h.engine
        .expire_fill_leases(u64::MAX, |_, k| panic!("{k:?} reported"));
}

#[test]
fn no_blocking_where_not_allowed() {
    let mut engine = Engine::new(1);
    assert!(run(&mut engine, "FILLGET k").starts_with("*4\r\n"));
    let row = Engine::find_command(b"fillget").unwrap();
    let args: ruvio_resp::OwnedArgs = [&b"fillget"[..], b"k"].into_iter().collect();
    let mut out = Vec::new();
    let mut ctx = ExecCtx::new(0, NOW_MS);
    ctx.may_block = false;
    let mut reply = ruvio_resp::Reply::new(&mut out, ruvio_resp::Protocol::Resp2);
    let outcome = (row.handler.unwrap())(&mut engine, &mut ctx, args.args(), &mut reply);
    assert_eq!(outcome, Ok(ruvio_engine::command::Outcome::Done));
    assert_eq!(out, PENDING2.as_bytes());
}
