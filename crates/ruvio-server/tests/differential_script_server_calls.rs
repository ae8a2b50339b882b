//! Server commands called from scripts, against a real `redis-server` 7.0 and Ruvio
//! (forward mode, 2 shards), RESP2 and RESP3, byte for byte: TIME, PING, ECHO and
//! SELECT (scoped to the script: the caller's database is unchanged after it), their
//! arity errors, `noscript` commands (`This Redis command is not allowed from
//! script`), unknown subcommands, and read-only scripts calling them.

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
    "ping",
];

fn run_corpus(reference: &mut RawConn, target: &mut RawConn, label: &str) {
    for line in CORPUS {
        let words: Vec<&str> = line.split('|').collect();
        let want = reference.cmd(&words);
        let got = target.cmd(&words);
        assert_eq!(
            show(&got),
            show(&want),
            "{label}: {line:?}: Ruvio's reply differs from Redis's"
        );
    }
}

#[test]
fn server_commands_from_scripts_answer_as_redis() {
    if require_redis_server("server_commands_from_scripts_answer_as_redis").is_none() {
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
        run_corpus(&mut reference, &mut target, label);
    }
}
