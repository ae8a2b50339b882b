//! Long scripts in forward mode with 2 shards: past `busy-reply-threshold` a command
//! that needs the busy shard answers `-BUSY` on the other shard's connections,
//! SCRIPT KILL from there stops the script (its caller gets Redis' error, `pcall`
//! cannot swallow it, a loop inside a coroutine is stopped too), a script that wrote is `-UNKILLABLE`, SHUTDOWN without NOSAVE
//! is refused and SHUTDOWN NOSAVE ends the server. FUNCTION STATS from another
//! shard shows a running function (name, command, duration) and answers -BUSY while
//! an EVAL script is busy. WATCH across the two shards while one is busy is
//! answered during the script, as Redis answers WATCH while busy, and keeps
//! WATCH's promise (a write after `+OK` fails the EXEC). The replies are the same with
//! `RUVIO_TEST_TARGET=redis` (one redis-server: every connection is "another
//! shard"), which checks them against Redis.

mod common;

use common::busy::*;
use common::*;
use std::time::Duration;

const SHARDS: usize = 2;

/// Start `body` on shard 0 from `runner` (its reply is read later) and wait past the
/// threshold.
fn start_busy_script(server: &Server, body: &str) -> (RawConn, RawConn, String) {
    let mut other = conn_on_shard(server, 1);
    set_busy_threshold(&mut other);
    let mut runner = conn_on_shard(server, 0);
    let key = key_on_shard("busy", 0, SHARDS);
    runner.send(&encode(&["eval", body, "1", &key]));
    std::thread::sleep(Duration::from_millis(THRESHOLD_MS * 4));
    (runner, other, key)
}

#[test]
fn script_kill_stops_a_busy_script_and_others_see_busy() {
    let server = Server::forward(SHARDS);
    let (mut runner, mut other, key) = start_busy_script(&server, "while true do end");
    assert_eq!(other.cmd(&["get", &key]), BUSY, "a key of the busy shard");
    assert_eq!(other.cmd(&["ping"]), BUSY, "a server command");
    if server.kind == Target::Ruvio {
        // Ruvio only: the other shard's own keys are served (Redis is busy for all).
        let free = key_on_shard("free", 1, SHARDS);
        assert_eq!(other.cmd(&["get", &free]), b"$-1\r\n");
    }
    assert_eq!(other.cmd(&["multi"]), b"+OK\r\n");
    assert_eq!(other.cmd(&["get", "any"]), BUSY, "a command inside MULTI");
    let mut discarded = b"-EXECABORT Transaction discarded because of: ".to_vec();
    discarded.extend_from_slice(&BUSY[1..]);
    assert_eq!(other.cmd(&["exec"]), discarded, "EXEC");
    // Without MULTI too: Redis refuses EXEC by aborting the transaction.
    assert_eq!(other.cmd(&["exec"]), discarded, "EXEC without MULTI");
    assert_eq!(other.cmd(&["script", "kill"]), b"+OK\r\n");
    let reply = runner.read_reply();
    assert!(
        reply.starts_with(KILLED) && contains(&reply, b"on @user_script:1.\r\n"),
        "the killed script's caller: {}",
        show(&reply)
    );
    assert_eq!(until_not_busy(&mut other, &["get", &key], BUSY), b"$-1\r\n");
    assert_eq!(other.cmd(&["exec"]), b"-ERR EXEC without MULTI\r\n");
    assert_eq!(
        other.cmd(&["script", "kill"]),
        b"-NOTBUSY No scripts in execution right now.\r\n"
    );
    assert_eq!(runner.cmd(&["ping"]), b"+PONG\r\n");
}

#[test]
fn pcall_cannot_swallow_script_kill() {
    let server = Server::forward(SHARDS);
    let body = "local ok = pcall(function() while true do end end) while true do end";
    let (mut runner, mut other, _) = start_busy_script(&server, body);
    assert_eq!(other.cmd(&["script", "kill"]), b"+OK\r\n");
    let reply = runner.read_reply();
    assert!(reply.starts_with(KILLED), "{}", show(&reply));
}

#[test]
fn a_killed_script_that_caught_the_error_writes_nothing() {
    let server = Server::forward(SHARDS);
    let body = "local ok = pcall(function() while true do end end)\n\
                redis.call('set', KEYS[1], 'x')\n\
                return 1";
    let (mut runner, mut other, key) = start_busy_script(&server, body);
    assert_eq!(other.cmd(&["script", "kill"]), b"+OK\r\n");
    let reply = runner.read_reply();
    assert!(
        reply.starts_with(KILLED) && contains(&reply, b"on @user_script:2.\r\n"),
        "{}",
        show(&reply)
    );
    assert_eq!(until_not_busy(&mut other, &["get", &key], BUSY), b"$-1\r\n");
}

#[test]
fn a_loop_inside_a_coroutine_is_killed_too() {
    let server = Server::forward(SHARDS);
    let body = "coroutine.wrap(function() while true do end end)() return 1";
    let (mut runner, mut other, _) = start_busy_script(&server, body);
    assert_eq!(other.cmd(&["script", "kill"]), b"+OK\r\n");
    let reply = runner.read_reply();
    assert!(reply.starts_with(KILLED), "{}", show(&reply));
}

#[test]
fn a_script_that_wrote_is_unkillable_and_shutdown_nosave_ends_the_server() {
    let mut server = Server::forward(SHARDS);
    let body = "redis.call('set', KEYS[1], 'x') while true do end";
    let (_runner, mut other, _) = start_busy_script(&server, body);
    assert_eq!(other.cmd(&["script", "kill"]), UNKILLABLE);
    assert_eq!(other.cmd(&["shutdown"]), BUSY);
    other.send(&encode(&["shutdown", "nosave"]));
    assert!(
        server.wait_exit(Duration::from_secs(10)).is_some(),
        "SHUTDOWN NOSAVE ended the server"
    );
}

#[test]
fn busy_reply_threshold_is_a_config_parameter() {
    let server = Server::forward(SHARDS);
    let mut conn = server.raw();
    let pair = |name: &str, value: &str| {
        format!(
            "*2\r\n${}\r\n{name}\r\n${}\r\n{value}\r\n",
            name.len(),
            value.len()
        )
        .into_bytes()
    };
    assert_eq!(
        conn.cmd(&["config", "get", "busy-reply-threshold"]),
        pair("busy-reply-threshold", "5000")
    );
    assert_eq!(
        conn.cmd(&["config", "set", "lua-time-limit", "250"]),
        b"+OK\r\n"
    );
    assert_eq!(
        conn.cmd(&["config", "get", "busy-reply-threshold"]),
        pair("busy-reply-threshold", "250")
    );
    assert_eq!(
        conn.cmd(&["config", "get", "lua-time-limit"]),
        pair("lua-time-limit", "250")
    );
}

/// FUNCTION STATS' engines part for one library of one function.
const ENGINES: &[u8] =
    b"$7\r\nengines\r\n*2\r\n$3\r\nLUA\r\n*4\r\n$15\r\nlibraries_count\r\n:1\r\n$15\r\nfunctions_count\r\n:1\r\n";

/// FUNCTION STATS with no script running.
fn stats_idle() -> Vec<u8> {
    [&b"*4\r\n$14\r\nrunning_script\r\n$-1\r\n"[..], ENGINES].concat()
}

#[test]
fn function_stats_shows_the_running_function() {
    let server = Server::forward(SHARDS);
    let mut other = conn_on_shard(&server, 1);
    let library = "#!lua name=spinlib\n\
                   redis.register_function('spin', function(keys, args) while true do end end)";
    assert_eq!(
        other.cmd(&["function", "load", library]),
        b"$7\r\nspinlib\r\n"
    );
    assert_eq!(other.cmd(&["function", "stats"]), stats_idle());
    set_busy_threshold(&mut other);
    let mut resp3 = conn_on_shard(&server, 1);
    resp3.cmd(&["hello", "3"]);
    let mut runner = conn_on_shard(&server, 0);
    let key = key_on_shard("busy", 0, SHARDS);
    runner.send(&encode(&["FCALL", "spin", "1", &key, "an arg"]));
    std::thread::sleep(Duration::from_millis(THRESHOLD_MS * 4));
    let stats = other.cmd(&["function", "stats"]);
    let running = format!(
        "*4\r\n$14\r\nrunning_script\r\n*6\r\n$4\r\nname\r\n$4\r\nspin\r\n\
         $7\r\ncommand\r\n*5\r\n$5\r\nFCALL\r\n$4\r\nspin\r\n$1\r\n1\r\n${}\r\n{key}\r\n\
         $6\r\nan arg\r\n$11\r\nduration_ms\r\n:",
        key.len()
    );
    assert!(
        stats.starts_with(running.as_bytes()) && stats.ends_with(ENGINES),
        "{}",
        show(&stats)
    );
    let duration = &stats[running.len()..stats.len() - ENGINES.len()];
    let duration: u64 = std::str::from_utf8(duration)
        .ok()
        .and_then(|d| d.strip_suffix("\r\n"))
        .and_then(|d| d.parse().ok())
        .unwrap_or_else(|| panic!("duration_ms in {}", show(&stats)));
    assert!(
        (THRESHOLD_MS..60_000).contains(&duration),
        "duration_ms {duration}"
    );
    // RESP3: maps.
    let stats = resp3.cmd(&["function", "stats"]);
    let running = b"%2\r\n$14\r\nrunning_script\r\n%3\r\n$4\r\nname\r\n$4\r\nspin\r\n\
                    $7\r\ncommand\r\n*5\r\n$5\r\nFCALL\r\n";
    let engines = b"$7\r\nengines\r\n%1\r\n$3\r\nLUA\r\n%2\r\n$15\r\nlibraries_count\r\n:1\r\n\
                    $15\r\nfunctions_count\r\n:1\r\n";
    assert!(
        stats.starts_with(running) && stats.ends_with(engines),
        "{}",
        show(&stats)
    );
    assert_eq!(other.cmd(&["function", "kill"]), b"+OK\r\n");
    let reply = runner.read_reply();
    assert!(
        reply.starts_with(b"-ERR Script killed by user with"),
        "{}",
        show(&reply)
    );
    assert_eq!(
        until_not_busy(&mut other, &["function", "stats"], BUSY),
        stats_idle()
    );
}

#[test]
fn function_stats_is_busy_while_an_eval_script_is() {
    let server = Server::forward(SHARDS);
    let (mut runner, mut other, _) = start_busy_script(&server, "while true do end");
    assert_eq!(other.cmd(&["function", "stats"]), BUSY);
    assert_eq!(other.cmd(&["script", "kill"]), b"+OK\r\n");
    assert!(runner.read_reply().starts_with(KILLED));
    let idle = b"*4\r\n$14\r\nrunning_script\r\n$-1\r\n$7\r\nengines\r\n*2\r\n$3\r\nLUA\r\n\
                 *4\r\n$15\r\nlibraries_count\r\n:0\r\n$15\r\nfunctions_count\r\n:0\r\n";
    assert_eq!(
        until_not_busy(&mut other, &["function", "stats"], BUSY),
        idle
    );
}

/// WATCH from the other shard's connection of keys the busy shard owns is
/// answered `+OK` at once, as Redis answers WATCH while a script is busy (an
/// allow-busy command; checked against redis-server 7.0 by
/// `script_busy_shard.rs`'s `watch_while_a_script_is_busy`, where every
/// connection of a Redis is such a client), without waiting for the script. The
/// busy shard registers the keys when the script ends: the script's write of a
/// key after that `+OK` fails the EXEC, a key it leaves alone does not, a later
/// write by another client fails it too, and an UNWATCH during the script
/// unwatches.
#[test]
fn watch_from_the_other_shard_while_a_script_is_busy() {
    let server = Server::forward(SHARDS);
    let (a, b) = (
        key_on_shard("owa", 0, SHARDS),
        key_on_shard("owb", 0, SHARDS),
    );
    let own = key_on_shard("owc", 1, SHARDS);
    let mut watcher = conn_on_shard(&server, 1);
    let mut calm = conn_on_shard(&server, 1);
    let mut later = conn_on_shard(&server, 1);
    let mut unwatcher = conn_on_shard(&server, 1);
    set_busy_threshold(&mut watcher);
    let mut runner = conn_on_shard(&server, 0);
    start_spin(&mut runner, THRESHOLD_MS * 25, &a);
    assert_eq!(watcher.cmd(&["get", &a]), BUSY, "busy");
    assert_eq!(watcher.cmd(&["watch", &a]), b"+OK\r\n");
    // With a key of its own shard too, and one already watched.
    assert_eq!(calm.cmd(&["watch", &b, &own, &b]), b"+OK\r\n");
    assert_eq!(later.cmd(&["watch", &b]), b"+OK\r\n");
    assert_eq!(unwatcher.cmd(&["watch", &a]), b"+OK\r\n");
    assert_eq!(unwatcher.cmd(&["unwatch"]), b"+OK\r\n");
    assert_still_busy(
        &mut [&mut watcher, &mut calm, &mut later, &mut unwatcher],
        &a,
        "the WATCHes were answered during the script",
    );
    assert_eq!(runner.read_reply(), b":1\r\n", "the script");
    let wrote = "the script wrote the watched key after WATCH";
    assert_exec(&mut watcher, &[&["set", &a, "mine"]], b"*-1\r\n", wrote);
    assert_eq!(watcher.cmd(&["get", &a]), bulk("script").as_bytes());
    let calm_queue: &[&[&str]] = &[&["set", &b, "calm"], &["set", &own, "calm"]];
    let both_ok = b"*2\r\n+OK\r\n+OK\r\n";
    assert_exec(&mut calm, calm_queue, both_ok, "keys the script left alone");
    // `later`'s watch of b was registered on the busy shard: calm's write of b
    // (after the script) fails its EXEC.
    let after = "a write after the script";
    assert_exec(&mut later, &[&["get", &b]], b"*-1\r\n", after);
    let unwatched = "UNWATCH during the script unwatched";
    assert_exec(
        &mut unwatcher,
        &[&["set", &a, "free"]],
        b"*1\r\n+OK\r\n",
        unwatched,
    );
}

/// WATCH on the busy shard's own connections of keys the other shard owns is
/// answered `+OK` during the script, as Redis answers WATCH while busy, once the
/// owner has registered them (by a message; the busy shard does not wait for
/// its script): a write of such a key on its owner after that `+OK`, while the
/// script still runs, fails the EXEC; a key nobody writes does not; a WATCH of
/// keys of both shards waits for both (the script's write of its own key after
/// the `+OK` fails that EXEC).
#[test]
fn watch_on_the_busy_shard_of_the_other_shards_keys() {
    let server = Server::forward(SHARDS);
    let (far, quiet) = (key_on_shard("fw", 1, SHARDS), key_on_shard("fq", 1, SHARDS));
    let near = key_on_shard("fn", 0, SHARDS);
    let mut watcher = conn_on_shard(&server, 0);
    let mut calm = conn_on_shard(&server, 0);
    let mut both = conn_on_shard(&server, 0);
    let mut writer = conn_on_shard(&server, 1);
    set_busy_threshold(&mut writer);
    let mut runner = conn_on_shard(&server, 0);
    start_spin(&mut runner, THRESHOLD_MS * 25, &near);
    assert_eq!(watcher.cmd(&["get", &near]), BUSY, "busy");
    assert_eq!(watcher.cmd(&["watch", &far]), b"+OK\r\n");
    assert_eq!(calm.cmd(&["watch", &quiet]), b"+OK\r\n");
    assert_eq!(both.cmd(&["watch", &far, &near]), b"+OK\r\n");
    assert_still_busy(
        &mut [&mut watcher, &mut calm, &mut both],
        &near,
        "the WATCHes were answered during the script",
    );
    // The owner is not busy: a write there now comes after the +OK.
    assert_eq!(writer.cmd(&["set", &far, "written"]), b"+OK\r\n");
    assert_eq!(
        watcher.cmd(&["get", &near]),
        BUSY,
        "still during the script"
    );
    assert_eq!(runner.read_reply(), b":1\r\n", "the script");
    let written = "written on its owner after WATCH";
    assert_exec(&mut watcher, &[&["get", &far]], b"*-1\r\n", written);
    let nobody = "a key nobody wrote";
    assert_exec(
        &mut calm,
        &[&["set", &quiet, "calm"]],
        b"*1\r\n+OK\r\n",
        nobody,
    );
    assert_exec(
        &mut both,
        &[&["get", &near]],
        b"*-1\r\n",
        "both shards' keys",
    );
}

/// Both shards busy (Ruvio only: one Redis runs one script): a WATCH on shard
/// 0's connection of a key of shard 1 waits for shard 1 to register it, after
/// its own script, even when shard 0's script ends first; the `+OK` comes then,
/// before the replies to what the client sent after it, and the script of
/// shard 1 wrote the key before the registration: no change after `+OK`.
#[test]
fn watch_of_a_key_whose_owner_is_busy_too_keeps_its_place() {
    let server = Server::forward(SHARDS);
    let (far, near) = (key_on_shard("hz", 1, SHARDS), key_on_shard("hn", 0, SHARDS));
    let mut watcher = conn_on_shard(&server, 0);
    let mut far_runner = conn_on_shard(&server, 1);
    let mut near_runner = conn_on_shard(&server, 0);
    set_busy_threshold(&mut watcher);
    // One body, its spin in ARGV[1] ms: a first run on each shard (a script's
    // probation takes the script lock, which would run the two one after the
    // other) lets the two runs below go at once.
    let body = "local t = redis.call('time') local start = t[1] * 1000000 + t[2] \
         while true do for i = 1, 20000 do end local n = redis.call('time') \
         if n[1] * 1000000 + n[2] - start > tonumber(ARGV[1]) * 1000 then break end end \
         redis.call('set', KEYS[1], 'script') return 1";
    for (runner, key) in [(&mut far_runner, &far), (&mut near_runner, &near)] {
        assert_eq!(runner.cmd(&["eval", body, "1", key, "0"]), b":1\r\n");
    }
    let far_ms = (THRESHOLD_MS * 20).to_string();
    far_runner.send(&encode(&["eval", body, "1", &far, &far_ms]));
    let near_ms = (THRESHOLD_MS * 8).to_string();
    near_runner.send(&encode(&["eval", body, "1", &near, &near_ms]));
    std::thread::sleep(Duration::from_millis(THRESHOLD_MS * 4));
    assert_eq!(watcher.cmd(&["get", &near]), BUSY, "busy");
    let mut pipeline = encode(&["watch", &far]);
    // A key of shard 0: run by its loop once its script ends (shard 1's still
    // running), its reply queued behind the WATCH's.
    pipeline.extend(encode(&["get", &near]));
    watcher.send(&pipeline);
    assert_eq!(near_runner.read_reply(), b":1\r\n", "shard 0's script");
    assert_eq!(far_runner.read_reply(), b":1\r\n", "shard 1's script");
    assert_eq!(watcher.read_reply(), b"+OK\r\n", "WATCH");
    assert_eq!(
        watcher.read_reply(),
        bulk("script").as_bytes(),
        "then what followed it"
    );
    let ran = format!("*1\r\n{}", bulk("script"));
    let unchanged = "no change after +OK";
    assert_exec(&mut watcher, &[&["get", &far]], ran.as_bytes(), unchanged);
    // The registration holds: a write now fails the next EXEC.
    assert_eq!(watcher.cmd(&["watch", &far]), b"+OK\r\n");
    assert_eq!(far_runner.cmd(&["set", &far, "later"]), b"+OK\r\n");
    let later = "a write after the registration";
    assert_exec(&mut watcher, &[&["get", &far]], b"*-1\r\n", later);
}

/// UNWATCH then WATCH of the same key during the script, across the shards (a
/// client of shard 1 watching a key of busy shard 0, and a client of shard 0
/// watching a key of shard 1): the owner may see the new WATCH before the
/// UNWATCH's message, and the UNWATCH forgets only the older watch, so a write
/// after the script still fails the EXEC.
#[test]
fn unwatch_then_watch_during_the_script_keeps_the_new_watch() {
    let server = Server::forward(SHARDS);
    let (busy_key, busy_written) = (key_on_shard("uk", 0, SHARDS), key_on_shard("uw", 0, SHARDS));
    let far_key = key_on_shard("uf", 1, SHARDS);
    let mut on_far = conn_on_shard(&server, 1);
    let mut on_busy = conn_on_shard(&server, 0);
    let mut writer = conn_on_shard(&server, 1);
    set_busy_threshold(&mut writer);
    assert_eq!(on_far.cmd(&["watch", &busy_key]), b"+OK\r\n");
    assert_eq!(on_busy.cmd(&["watch", &far_key]), b"+OK\r\n");
    let mut runner = conn_on_shard(&server, 0);
    start_spin(&mut runner, THRESHOLD_MS * 15, &busy_written);
    for (conn, key) in [(&mut on_far, &busy_key), (&mut on_busy, &far_key)] {
        assert_eq!(conn.cmd(&["get", &busy_written]), BUSY, "busy");
        assert_eq!(conn.cmd(&["unwatch"]), b"+OK\r\n");
        assert_eq!(conn.cmd(&["watch", key]), b"+OK\r\n");
    }
    assert_eq!(runner.read_reply(), b":1\r\n", "the script");
    for (conn, key) in [(&mut on_far, &busy_key), (&mut on_busy, &far_key)] {
        // A command on the key's owner: the UNWATCH's message got there first.
        assert_eq!(conn.cmd(&["exists", key]), b":0\r\n");
        assert_eq!(writer.cmd(&["set", key, "after"]), b"+OK\r\n");
        let kept = "the WATCH after UNWATCH is still registered";
        assert_exec(conn, &[&["get", key]], b"*-1\r\n", kept);
    }
}
