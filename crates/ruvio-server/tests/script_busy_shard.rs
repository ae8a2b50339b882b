//! A long script never freezes its own shard: past `busy-reply-threshold` the busy
//! shard's other connections (open before the script, or new) get `-BUSY`, their
//! MULTI is flagged and EXEC aborts, SCRIPT KILL / FUNCTION KILL from them stop
//! the script, SHUTDOWN NOSAVE from them ends the server, WATCH outside MULTI is
//! answered at once and a later write of the script fails the EXEC, UNWATCH /
//! DISCARD / EXEC / RESET of a client that watches keys are answered at once and
//! unwatch, RESET of subscribers, monitors and tracking clients is answered at
//! once and leaves nothing to deliver after it, a partial command is left for
//! after the script. With 1 and 2 shards in forward mode and 2 in
//! per-shard mode. The replies are the same with `RUVIO_TEST_TARGET=redis` (one
//! redis-server, or a Redis cluster for per-shard mode), which checks them against
//! Redis.

mod common;

use common::busy::*;
use common::*;
use std::time::Duration;

/// A connection served by the shard that will run the script (shard 0; any
/// connection of a Redis).
fn on_busy_shard(server: &Server, mode: PortMode) -> RawConn {
    match (server.kind, mode) {
        (Target::Ruvio, PortMode::Forward) => conn_on_shard(server, 0),
        _ => RawConn::connect(server.shard_port(0)),
    }
}

/// Set the threshold, start `body` (no keys) on the busy shard from a connection
/// of its own, and wait past the threshold. Gives the runner back.
fn start_busy(server: &Server, mode: PortMode, body: &str) -> RawConn {
    let mut runner = on_busy_shard(server, mode);
    set_busy_threshold(&mut runner);
    runner.send(&encode(&["eval", body, "0"]));
    std::thread::sleep(Duration::from_millis(THRESHOLD_MS * 4));
    runner
}

/// The servers each test runs against: forward mode with 1 and 2 shards, per-shard
/// mode with 2 (for Redis: one server, then a cluster).
fn servers() -> Vec<(Server, PortMode)> {
    match target() {
        Target::Ruvio => vec![
            (Server::ruvio(PortMode::Forward, 1), PortMode::Forward),
            (Server::ruvio(PortMode::Forward, 2), PortMode::Forward),
            (Server::ruvio(PortMode::PerShard, 2), PortMode::PerShard),
        ],
        Target::Redis => vec![
            (Server::forward(1), PortMode::Forward),
            (Server::per_shard(2), PortMode::PerShard),
        ],
    }
}

#[test]
fn the_busy_shards_own_clients_are_answered_and_can_kill_the_script() {
    for (server, mode) in servers() {
        let mut witness = on_busy_shard(&server, mode);
        let mut in_multi = on_busy_shard(&server, mode);
        let mut later = on_busy_shard(&server, mode);
        let (a, b) = (key_on_shard("a", 0, 2), key_on_shard("b", 0, 2));
        assert_eq!(in_multi.cmd(&["multi"]), b"+OK\r\n");
        assert_eq!(in_multi.cmd(&["set", &a, "1"]), b"+QUEUED\r\n");
        let mut runner = start_busy(&server, mode, "while true do end");
        assert_eq!(
            witness.cmd(&["ping"]),
            BUSY,
            "{mode:?}: a client of the busy shard"
        );
        // Pipelined: every command answered, in order.
        let mut pipeline = encode(&["ping"]);
        pipeline.extend(encode(&["get", &a]));
        witness.send(&pipeline);
        assert_eq!(witness.read_reply(), BUSY);
        assert_eq!(witness.read_reply(), BUSY);
        if mode == PortMode::PerShard {
            // Redis Cluster's redirection comes before -BUSY.
            let elsewhere = key_on_shard("x", 1, 2);
            let moved = witness.cmd(&["get", &elsewhere]);
            assert!(moved.starts_with(b"-MOVED "), "{}", show(&moved));
            assert_eq!(
                witness.cmd(&["mget", &a, &elsewhere]),
                b"-CROSSSLOT Keys in request don't hash to the same slot\r\n"
            );
        }
        // Redis' checks before -BUSY.
        assert_eq!(
            witness.cmd(&["nosuch"]),
            b"-ERR unknown command 'nosuch', with args beginning with: \r\n"
        );
        assert_eq!(
            witness.cmd(&["get"]),
            b"-ERR wrong number of arguments for 'get' command\r\n"
        );
        // A new connection is served too.
        let mut fresh = RawConn::connect(server.shard_port(0));
        assert_eq!(fresh.cmd(&["ping"]), BUSY, "{mode:?}: a new connection");
        // MULTI: the command refused flags it, EXEC discards it.
        assert_eq!(in_multi.cmd(&["set", &b, "2"]), BUSY);
        let mut discarded = b"-EXECABORT Transaction discarded because of: ".to_vec();
        discarded.extend_from_slice(&BUSY[1..]);
        assert_eq!(in_multi.cmd(&["exec"]), discarded, "{mode:?}: EXEC");
        // MULTI, DISCARD and WATCH inside MULTI are answered while busy, as Redis
        // runs them; a refused command flags the transaction.
        assert_eq!(later.cmd(&["multi"]), b"+OK\r\n", "{mode:?}: MULTI");
        assert_eq!(
            later.cmd(&["multi"]),
            b"-ERR MULTI calls can not be nested\r\n"
        );
        assert_eq!(
            later.cmd(&["watch", &a]),
            b"-ERR WATCH inside MULTI is not allowed\r\n"
        );
        assert_eq!(later.cmd(&["set", &b, "3"]), BUSY);
        assert_eq!(later.cmd(&["discard"]), b"+OK\r\n");
        assert_eq!(later.cmd(&["discard"]), b"-ERR DISCARD without MULTI\r\n");
        // Half a command waits for the end of the script.
        fresh.send(b"*1\r\n$4\r\nPI");
        later.send(&encode(&["multi"]));
        assert_eq!(witness.cmd(&["script", "kill"]), b"+OK\r\n");
        let reply = runner.read_reply();
        assert!(
            reply.starts_with(KILLED) && contains(&reply, b"on @user_script:1.\r\n"),
            "{mode:?}: the killed script's caller: {}",
            show(&reply)
        );
        assert_eq!(until_not_busy(&mut witness, &["ping"], BUSY), b"+PONG\r\n");
        fresh.send(b"NG\r\n");
        assert_eq!(fresh.read_reply(), b"+PONG\r\n");
        assert_eq!(in_multi.cmd(&["exec"]), b"-ERR EXEC without MULTI\r\n");
        assert_eq!(in_multi.cmd(&["get", &a]), b"$-1\r\n");
        assert_eq!(later.read_reply(), b"+OK\r\n");
        assert_eq!(later.cmd(&["discard"]), b"+OK\r\n");
        assert_eq!(runner.cmd(&["ping"]), b"+PONG\r\n");
        // The next busy script: the connections stopped before are answered again.
        runner.send(&encode(&["eval", "while true do end", "0"]));
        std::thread::sleep(Duration::from_millis(THRESHOLD_MS * 4));
        assert_eq!(later.cmd(&["ping"]), BUSY, "{mode:?}: a second script");
        assert_eq!(fresh.cmd(&["script", "kill"]), b"+OK\r\n");
        assert!(runner.read_reply().starts_with(KILLED));
    }
}

#[test]
fn function_kill_from_the_busy_shard() {
    for (server, mode) in servers() {
        let spin =
            "#!lua name=spin\nredis.register_function('spin', function()\n  while true do end\nend)";
        let ports: Vec<u16> = match mode {
            PortMode::Forward => vec![server.port()],
            PortMode::PerShard => (0..2).map(|i| server.shard_port(i)).collect(),
        };
        for port in ports {
            // Per-shard mode: every node holds the library, as a cluster client loads it.
            let mut c = RawConn::connect(port);
            assert_eq!(c.cmd(&["function", "load", spin]), bulk("spin").as_bytes());
        }
        let mut witness = on_busy_shard(&server, mode);
        let mut runner = on_busy_shard(&server, mode);
        set_busy_threshold(&mut runner);
        runner.send(&encode(&["fcall", "spin", "0"]));
        std::thread::sleep(Duration::from_millis(THRESHOLD_MS * 4));
        assert_eq!(witness.cmd(&["ping"]), BUSY_FUNCTION, "{mode:?}");
        assert_eq!(witness.cmd(&["script", "kill"]), BUSY_FUNCTION);
        assert_eq!(witness.cmd(&["function", "kill"]), b"+OK\r\n");
        assert_eq!(
            runner.read_reply(),
            b"-ERR Script killed by user with SCRIPT KILL... script: spin, on @user_function:3.\r\n"
        );
        assert_eq!(
            until_not_busy(&mut witness, &["ping"], BUSY_FUNCTION),
            b"+PONG\r\n"
        );
    }
}

#[test]
fn a_script_that_wrote_is_unkillable_and_shutdown_nosave_from_its_shard_ends_the_server() {
    for (mut server, mode) in servers() {
        if mode == PortMode::PerShard && server.kind == Target::Redis {
            // One node of a cluster would end; the others go on.
            continue;
        }
        let mut witness = on_busy_shard(&server, mode);
        let body = format!(
            "redis.call('set', '{}', 'x') while true do end",
            key_on_shard("written", 0, 2)
        );
        let _runner = start_busy(&server, mode, &body);
        assert_eq!(witness.cmd(&["script", "kill"]), UNKILLABLE);
        assert_eq!(witness.cmd(&["shutdown"]), BUSY);
        witness.send(&encode(&["shutdown", "nosave"]));
        assert!(
            server.wait_exit(Duration::from_secs(10)).is_some(),
            "{mode:?}: SHUTDOWN NOSAVE ended the server"
        );
    }
}

/// AUTH on the busy shard: a client that must authenticate gets NOAUTH, then
/// WRONGPASS or OK for its AUTH while the script runs (as Redis, which runs AUTH
/// while busy), and -BUSY once authenticated; it can then kill the script.
#[test]
fn auth_on_the_busy_shard() {
    for (server, mode) in servers() {
        let mut runner = on_busy_shard(&server, mode);
        set_busy_threshold(&mut runner);
        // Connections made before the password stay authenticated, as in Redis.
        assert_eq!(
            runner.cmd(&["config", "set", "requirepass", "secret"]),
            b"+OK\r\n"
        );
        let mut locked = match (server.kind, mode) {
            // DEBUG SHARD needs authentication now: open connections until CLIENT
            // LIST (from an authenticated one) shows one served by shard 0.
            (Target::Ruvio, PortMode::Forward) => {
                let mut probe = server.raw();
                assert_eq!(probe.cmd(&["auth", "secret"]), b"+OK\r\n");
                let mut found = None;
                for _ in 0..200 {
                    let mut conn = server.raw();
                    let port = conn.stream().local_addr().expect("local address").port();
                    let listed = decode(&probe.cmd(&["client", "list"])).text();
                    let addr = format!(" addr=127.0.0.1:{port} ");
                    if listed
                        .lines()
                        .any(|l| l.contains(&addr) && l.ends_with(" io-thread=0"))
                    {
                        found = Some(conn);
                        break;
                    }
                }
                found.expect("a connection on shard 0")
            }
            _ => RawConn::connect(server.shard_port(0)),
        };
        runner.send(&encode(&["eval", "while true do end", "0"]));
        std::thread::sleep(Duration::from_millis(THRESHOLD_MS * 4));
        assert_eq!(
            locked.cmd(&["get", "k"]),
            b"-NOAUTH Authentication required.\r\n",
            "{mode:?}"
        );
        assert_eq!(
            locked.cmd(&["auth", "wrong"]),
            b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
        );
        // AUTH and the next command in one write: the second sees the first.
        locked.send(&[encode(&["auth", "secret"]), encode(&["get", "k"])].concat());
        assert_eq!(locked.read_reply(), b"+OK\r\n", "{mode:?}: AUTH while busy");
        assert_eq!(locked.read_reply(), BUSY, "{mode:?}");
        assert_eq!(locked.cmd(&["script", "kill"]), b"+OK\r\n");
        assert!(runner.read_reply().starts_with(KILLED));
        assert_eq!(until_not_busy(&mut runner, &["ping"], BUSY), b"+PONG\r\n");
        // The failed AUTH answered while busy is in ACL LOG, as Redis logs it.
        let log = runner.cmd(&["acl", "log", "1"]);
        assert!(
            contains(&log, b"$6\r\nreason\r\n$4\r\nauth\r\n")
                && contains(&log, b"$8\r\nusername\r\n$7\r\ndefault\r\n"),
            "{mode:?}: {}",
            show(&log)
        );
        assert_eq!(
            runner.cmd(&["config", "set", "requirepass", ""]),
            b"+OK\r\n"
        );
    }
}

/// The connection commands Redis runs while a script is busy, on the busy
/// shard's own clients: HELLO (both protocols), UNWATCH, RESET and QUIT answered
/// at once; inside MULTI, AUTH, HELLO, UNWATCH, FUNCTION STATS and SCRIPT KILL
/// are queued (Redis lets them past the busy check, then MULTI takes them) and
/// SHUTDOWN is refused; FUNCTION STATS outside MULTI is `-BUSY` under an EVAL.
#[test]
fn connection_commands_on_the_busy_shard() {
    for (server, mode) in servers() {
        let mut witness = on_busy_shard(&server, mode);
        let mut quitter = on_busy_shard(&server, mode);
        let mut runner = start_busy(&server, mode, "while true do end");

        let hello = witness.cmd(&["hello", "3", "setname", "seen"]);
        assert!(
            hello.starts_with(b"%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n"),
            "{mode:?}: {}",
            show(&hello)
        );
        assert!(
            contains(&hello, b"$5\r\nproto\r\n:3\r\n"),
            "{}",
            show(&hello)
        );
        assert_eq!(witness.cmd(&["ping"]), BUSY, "{mode:?}");
        let hello = witness.cmd(&["hello", "2"]);
        assert!(
            hello.starts_with(b"*14\r\n$6\r\nserver\r\n"),
            "{}",
            show(&hello)
        );
        assert_eq!(witness.cmd(&["unwatch"]), b"+OK\r\n", "{mode:?}");
        assert_eq!(witness.cmd(&["function", "stats"]), BUSY, "{mode:?}");

        assert_eq!(witness.cmd(&["multi"]), b"+OK\r\n");
        for queued in [
            &["auth", "nopass"][..],
            &["hello", "2"],
            &["unwatch"],
            &["function", "stats"],
            &["script", "kill"],
        ] {
            assert_eq!(witness.cmd(queued), b"+QUEUED\r\n", "{mode:?}: {queued:?}");
        }
        assert_eq!(
            witness.cmd(&["shutdown", "nosave"]),
            b"-ERR Command not allowed inside a transaction\r\n",
            "{mode:?}"
        );
        assert_eq!(witness.cmd(&["discard"]), b"+OK\r\n", "{mode:?}");

        assert_eq!(witness.cmd(&["reset"]), b"+RESET\r\n", "{mode:?}");
        assert_eq!(witness.cmd(&["ping"]), BUSY, "{mode:?}: after RESET");
        assert_eq!(quitter.cmd(&["quit"]), b"+OK\r\n", "{mode:?}");
        quitter.expect_closed();

        assert_eq!(witness.cmd(&["script", "kill"]), b"+OK\r\n", "{mode:?}");
        assert!(runner.read_reply().starts_with(KILLED));
        assert_eq!(until_not_busy(&mut witness, &["ping"], BUSY), b"+PONG\r\n");
        let name = witness.cmd(&["client", "getname"]);
        assert_eq!(name, b"$-1\r\n", "{mode:?}: RESET cleared the name");
    }
}

/// WATCH outside MULTI on the busy shard is answered at once, as Redis runs it
/// while busy (it is an allow-busy command); a write the script makes after it
/// fails that client's EXEC, a key the script leaves alone does not.
#[test]
fn watch_while_a_script_is_busy() {
    for (server, mode) in servers() {
        let (a, b) = (key_on_shard("wa", 0, 2), key_on_shard("wb", 0, 2));
        let mut watcher = on_busy_shard(&server, mode);
        let mut calm = on_busy_shard(&server, mode);
        let mut runner = on_busy_shard(&server, mode);
        set_busy_threshold(&mut runner);
        assert_eq!(calm.cmd(&["set", &b, "before"]), b"+OK\r\n");
        start_spin(&mut runner, THRESHOLD_MS * 25, &a);
        assert_eq!(watcher.cmd(&["ping"]), BUSY, "{mode:?}: busy");
        assert_eq!(watcher.cmd(&["watch", &a]), b"+OK\r\n", "{mode:?}");
        assert_eq!(calm.cmd(&["watch", &b]), b"+OK\r\n", "{mode:?}");
        // Watching again, and a key already watched, changes nothing.
        assert_eq!(calm.cmd(&["watch", &b, &b]), b"+OK\r\n", "{mode:?}");
        if mode == PortMode::PerShard {
            // Another node's key: Redis Cluster's redirection, before -BUSY.
            let moved = calm.cmd(&["watch", &key_on_shard("wm", 1, 2)]);
            assert!(moved.starts_with(b"-MOVED "), "{}", show(&moved));
            let cross = calm.cmd(&["watch", &b, &key_on_shard("wn", 0, 2)]);
            assert_eq!(
                cross, b"-CROSSSLOT Keys in request don't hash to the same slot\r\n",
                "{mode:?}"
            );
        }
        assert_eq!(
            watcher.cmd(&["get", &a]),
            BUSY,
            "{mode:?}: WATCH was answered during the script"
        );
        assert_eq!(runner.read_reply(), b":1\r\n", "{mode:?}: the script");
        let wrote = format!("{mode:?}: the script wrote the watched key after WATCH");
        assert_exec(&mut watcher, &[&["set", &a, "mine"]], b"*-1\r\n", &wrote);
        assert_eq!(watcher.cmd(&["get", &a]), bulk("script").as_bytes());
        let alone = format!("{mode:?}: a key the script left alone");
        assert_exec(
            &mut calm,
            &[&["set", &b, "after"]],
            b"*1\r\n+OK\r\n",
            &alone,
        );
        // The watches were registered: a later write still fails an EXEC.
        assert_eq!(watcher.cmd(&["watch", &a]), b"+OK\r\n");
        assert_eq!(calm.cmd(&["set", &a, "other"]), b"+OK\r\n");
        let later = format!("{mode:?}: a later write");
        assert_exec(&mut watcher, &[&["get", &a]], b"*-1\r\n", &later);
    }
}

/// UNWATCH, DISCARD, EXEC and RESET of clients that watch keys (the busy shard's,
/// and in forward mode one of the other shard too) are answered at once, as
/// Redis runs them while busy, and unwatch as Redis's do: the script's later
/// write of the watched key fails none of their next EXECs; a WATCH sent after
/// the UNWATCH is kept, and that write fails its EXEC.
#[test]
fn unwatch_discard_exec_and_reset_of_watchers_while_a_script_is_busy() {
    for (server, mode) in servers() {
        let a = key_on_shard("ua", 0, 2);
        let mut watched = vec!["watch".to_string(), a.clone()];
        if mode == PortMode::Forward {
            watched.push(key_on_shard("ub", 1, 2));
        }
        let mut unwatcher = on_busy_shard(&server, mode);
        let mut discarder = on_busy_shard(&server, mode);
        let mut execer = on_busy_shard(&server, mode);
        let mut resetter = on_busy_shard(&server, mode);
        for conn in [&mut unwatcher, &mut discarder, &mut execer, &mut resetter] {
            assert_eq!(conn.cmd(&watched), b"+OK\r\n", "{mode:?}");
        }
        assert_eq!(discarder.cmd(&["multi"]), b"+OK\r\n");
        assert_eq!(execer.cmd(&["multi"]), b"+OK\r\n");
        assert_eq!(execer.cmd(&["set", &a, "queued"]), b"+QUEUED\r\n");
        let mut lone = on_busy_shard(&server, mode);
        let mut runner = on_busy_shard(&server, mode);
        set_busy_threshold(&mut runner);
        start_spin(&mut runner, THRESHOLD_MS * 25, &a);
        assert_eq!(unwatcher.cmd(&["ping"]), BUSY, "{mode:?}: busy");
        let mut discarded = b"-EXECABORT Transaction discarded because of: ".to_vec();
        discarded.extend_from_slice(&BUSY[1..]);
        // Outside MULTI too: Redis refuses EXEC by aborting the transaction.
        assert_eq!(
            lone.cmd(&["exec"]),
            discarded,
            "{mode:?}: EXEC without MULTI"
        );
        assert_eq!(unwatcher.cmd(&["unwatch"]), b"+OK\r\n", "{mode:?}");
        assert_eq!(unwatcher.cmd(&["watch", &a]), b"+OK\r\n", "{mode:?}");
        assert_eq!(discarder.cmd(&["discard"]), b"+OK\r\n", "{mode:?}");
        assert_eq!(execer.cmd(&["exec"]), discarded, "{mode:?}: EXEC");
        assert_eq!(resetter.cmd(&["reset"]), b"+RESET\r\n", "{mode:?}");
        assert_still_busy(
            &mut [&mut unwatcher, &mut discarder, &mut execer, &mut resetter],
            &a,
            &format!("{mode:?}: answered during the script"),
        );
        assert_eq!(runner.read_reply(), b":1\r\n", "{mode:?}: the script");
        assert_eq!(
            execer.cmd(&["get", &a]),
            bulk("script").as_bytes(),
            "{mode:?}: the aborted transaction did not run"
        );
        let saw = format!("{mode:?}: the WATCH after UNWATCH saw the script's write");
        assert_exec(&mut unwatcher, &[&["get", &a]], b"*-1\r\n", &saw);
        let unwatched = format!("{mode:?}: nothing watched any more");
        for conn in [&mut discarder, &mut execer, &mut resetter] {
            assert_exec(conn, &[&["set", &a, "mine"]], b"*1\r\n+OK\r\n", &unwatched);
        }
    }
}

/// A connection opened while the script is busy is served with a state of its
/// own, kept after the script as Redis keeps it: HELLO's protocol and name, a
/// failed AUTH, WATCH of a key the script then writes (its EXEC fails); CLIENT
/// SETNAME is refused with -BUSY, as Redis refuses it.
#[test]
fn a_connection_opened_while_busy_keeps_its_state() {
    for (server, mode) in servers() {
        let a = key_on_shard("na", 0, 2);
        let mut runner = on_busy_shard(&server, mode);
        set_busy_threshold(&mut runner);
        start_spin(&mut runner, THRESHOLD_MS * 25, &a);
        let mut fresh = RawConn::connect(server.shard_port(0));
        // Forward mode with 2 shards may serve it on the other shard, whose WATCH
        // of the busy shard's key still waits for the script (docs/scripting.md).
        let on_busy =
            !(server.kind == Target::Ruvio && mode == PortMode::Forward && server.shards > 1);
        let hello = fresh.cmd(&["hello", "3", "setname", "early"]);
        assert!(
            hello.starts_with(b"%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n"),
            "{mode:?}: {}",
            show(&hello)
        );
        assert!(
            contains(&hello, b"$5\r\nproto\r\n:3\r\n"),
            "{}",
            show(&hello)
        );
        assert_eq!(
            fresh.cmd(&["auth", "nopass"]),
            b"-ERR AUTH <password> called without any password configured for the default user. \
              Are you sure your configuration is correct?\r\n",
            "{mode:?}"
        );
        if on_busy {
            assert_eq!(fresh.cmd(&["watch", &a]), b"+OK\r\n", "{mode:?}");
        }
        assert_eq!(fresh.cmd(&["client", "setname", "later"]), BUSY, "{mode:?}");
        assert_eq!(fresh.cmd(&["ping"]), BUSY, "{mode:?}: still busy");
        assert_eq!(runner.read_reply(), b":1\r\n", "{mode:?}: the script");
        assert_eq!(fresh.cmd(&["client", "getname"]), bulk("early").as_bytes());
        // RESP3 still: an empty map.
        assert_eq!(fresh.cmd(&["hgetall", "nosuchkey"]), b"%0\r\n", "{mode:?}");
        if on_busy {
            let wrote = format!("{mode:?}: the script wrote the key watched after it started");
            assert_exec(&mut fresh, &[&["get", &a]], b"_\r\n", &wrote);
        }
    }
}

/// RESET of a RESP2 and a RESP3 subscriber, a monitor and a tracking client of
/// the busy shard is answered `+RESET` at once, as Redis runs it while busy (an
/// allow-busy command), and leaves them as Redis does: no subscription (PUBLISH
/// reaches nobody), no MONITOR line and no invalidation after `+RESET` (the
/// script's write of the tracked key comes after it). A RESP2 subscriber's
/// other commands meanwhile get Redis's answers in Redis's order: the
/// subscribed-mode error for a command it may not send, `-BUSY` for PING.
#[test]
fn reset_of_subscribers_monitors_and_trackers_while_a_script_is_busy() {
    for (server, mode) in servers() {
        let k = key_on_shard("rk", 0, 2);
        let mut sub2 = on_busy_shard(&server, mode);
        let subscribed = sub2.cmd(&["subscribe", "rch"]);
        assert!(
            subscribed.starts_with(b"*3\r\n$9\r\nsubscribe"),
            "{}",
            show(&subscribed)
        );
        let mut sub3 = on_busy_shard(&server, mode);
        sub3.cmd(&["hello", "3"]);
        let subscribed = sub3.cmd(&["subscribe", "rch"]);
        assert!(
            subscribed.starts_with(b">3\r\n$9\r\nsubscribe"),
            "{}",
            show(&subscribed)
        );
        let mut mon = on_busy_shard(&server, mode);
        assert_eq!(mon.cmd(&["monitor"]), b"+OK\r\n");
        let mut trk = on_busy_shard(&server, mode);
        trk.cmd(&["hello", "3"]);
        assert_eq!(trk.cmd(&["client", "tracking", "on"]), b"+OK\r\n");
        assert_eq!(trk.cmd(&["get", &k]), b"_\r\n");
        // In forward mode with 2 shards, a subscriber of the other shard too.
        let mut far =
            (server.kind == Target::Ruvio && server.shards == 2 && mode == PortMode::Forward)
                .then(|| conn_on_shard(&server, 1));
        if let Some(far) = far.as_mut() {
            far.cmd(&["subscribe", "rch"]);
        }
        let mut runner = on_busy_shard(&server, mode);
        set_busy_threshold(&mut runner);
        // Drop the monitor lines so far (CONFIG SET's).
        std::thread::sleep(Duration::from_millis(50));
        mon.send(&encode(&["reset"]));
        mon.read_until(b"+RESET\r\n");
        assert_eq!(mon.cmd(&["monitor"]), b"+OK\r\n");
        start_spin(&mut runner, THRESHOLD_MS * 25, &k);
        // RESET first on the monitor: Redis feeds it every command it runs while
        // busy; Ruvio hands out a script command's lines when it ends.
        mon.send(&encode(&["reset"]));
        let before = mon.read_until(b"+RESET\r\n");
        let lines = &before[..before.len() - b"+RESET\r\n".len()];
        for line in lines.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            assert!(
                line.starts_with(b"+") && contains(line, b" ["),
                "{mode:?}: only MONITOR lines before +RESET: {}",
                show(&before)
            );
        }
        let get_refused = b"-ERR Can't execute 'get': only (P|S)SUBSCRIBE / \
            (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n";
        assert_eq!(sub2.cmd(&["get", &k]), get_refused, "{mode:?}");
        assert_eq!(sub2.cmd(&["ping"]), BUSY, "{mode:?}: subscribed PING");
        assert_eq!(sub2.cmd(&["reset"]), b"+RESET\r\n", "{mode:?}");
        assert_eq!(sub3.cmd(&["reset"]), b"+RESET\r\n", "{mode:?}");
        assert_eq!(trk.cmd(&["reset"]), b"+RESET\r\n", "{mode:?}");
        if let Some(far) = far.as_mut() {
            assert_eq!(far.cmd(&["reset"]), b"+RESET\r\n", "the other shard's");
        }
        assert_still_busy(
            &mut [&mut sub2, &mut sub3, &mut mon, &mut trk],
            &k,
            &format!("{mode:?}: RESET was answered during the script"),
        );
        assert_eq!(runner.read_reply(), b":1\r\n", "{mode:?}: the script");
        assert_eq!(
            runner.cmd(&["publish", "rch", "m"]),
            b":0\r\n",
            "{mode:?}: no subscriber left"
        );
        // The next reply is each one's first byte after +RESET: no message, no
        // MONITOR line, no invalidation of the key the script wrote.
        for conn in [&mut sub2, &mut sub3, &mut mon, &mut trk] {
            assert_eq!(conn.cmd(&["ping"]), b"+PONG\r\n", "{mode:?}");
        }
        if let Some(far) = far.as_mut() {
            assert_eq!(far.cmd(&["ping"]), b"+PONG\r\n");
        }
    }
}
