//! What the long-script tests share (`script_busy.rs`, `script_busy_shard.rs`):
//! Redis' replies while a script is busy, the threshold they set, starting a
//! script that spins past it, the checks that a client was answered during the
//! script, the transactions that show what its WATCH saw, and waiting for the
//! script's end.

use super::{encode, RawConn};
use std::time::{Duration, Instant};

/// The threshold the tests set, ms (short, so the tests are quick).
pub const THRESHOLD_MS: u64 = 100;

/// `-BUSY` while an EVAL script runs past `busy-reply-threshold`.
pub const BUSY: &[u8] =
    b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
/// `-BUSY` while a function runs past the threshold.
pub const BUSY_FUNCTION: &[u8] =
    b"-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n";
/// The start of the killed script's caller's error.
pub const KILLED: &[u8] = b"-ERR Script killed by user with SCRIPT KILL...";
/// SCRIPT KILL of a script that wrote.
pub const UNKILLABLE: &[u8] =
    b"-UNKILLABLE Sorry the script already executed write commands against the dataset. \
      You can either wait the script termination or kill the server in a hard way using \
      the SHUTDOWN NOSAVE command.\r\n";

/// Ask with `conn` until the reply is not `busy` (the script has ended), within 5 s.
pub fn until_not_busy(conn: &mut RawConn, args: &[&str], busy: &[u8]) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let reply = conn.cmd(args);
        if reply != busy || Instant::now() > deadline {
            return reply;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A script that spins for `ms`, then writes KEYS[1]. It reads TIME only
/// between runs of plain Lua, so the busy hook (every 100,000 Lua instructions)
/// comes round often even in a debug build on a loaded machine.
pub fn spin_then_write(ms: u64) -> String {
    format!(
        "local t = redis.call('time') local start = t[1] * 1000000 + t[2] \
         while true do for i = 1, 20000 do end local n = redis.call('time') \
         if n[1] * 1000000 + n[2] - start > {} then break end end \
         redis.call('set', KEYS[1], 'script') return 1",
        ms * 1000
    )
}

/// CONFIG SET busy-reply-threshold to [`THRESHOLD_MS`] through `conn`.
pub fn set_busy_threshold(conn: &mut RawConn) {
    let ms = THRESHOLD_MS.to_string();
    assert_eq!(
        conn.cmd(&["config", "set", "busy-reply-threshold", &ms]),
        b"+OK\r\n"
    );
}

/// Send [`spin_then_write`] of `spin_ms` on KEYS[1] `key` from `runner` (its
/// reply is read later) and wait past the threshold (four of them).
pub fn start_spin(runner: &mut RawConn, spin_ms: u64, key: &str) {
    runner.send(&encode(&["eval", &spin_then_write(spin_ms), "1", key]));
    std::thread::sleep(Duration::from_millis(THRESHOLD_MS * 4));
}

/// Every one of `conns` is answered `-BUSY` for GET `key`: the script still
/// runs, so what each sent before was answered during it (`what` says which
/// case in a failure).
pub fn assert_still_busy(conns: &mut [&mut RawConn], key: &str, what: &str) {
    for conn in conns.iter_mut() {
        assert_eq!(conn.cmd(&["get", key]), BUSY, "{what}");
    }
}

/// A transaction through `conn`: MULTI answered `+OK`, each of `queued`
/// answered `+QUEUED`, then EXEC answered exactly `exec` (`*-1` or `_`: a
/// watched key changed; `what` says which case in a failure).
pub fn assert_exec(conn: &mut RawConn, queued: &[&[&str]], exec: &[u8], what: &str) {
    assert_eq!(conn.cmd(&["multi"]), b"+OK\r\n", "{what}: MULTI");
    for command in queued {
        assert_eq!(conn.cmd(command), b"+QUEUED\r\n", "{what}: {command:?}");
    }
    assert_eq!(conn.cmd(&["exec"]), exec, "{what}");
}
