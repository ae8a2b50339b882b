//! CONFIG GET and CONFIG SET of every parameter redis-server 7.0 has, against a
//! real redis-server: for each name of its `CONFIG GET *`,
//!
//! 1. Ruvio's CONFIG GET answers the name, with Redis's value unless the default
//!    differs on purpose (`DEFAULTS_DIFFER`, each with its reason);
//! 2. CONFIG SET with Redis's own running value (a valid value) gets the same raw
//!    reply from both (`+OK`, or the same immutable / protected refusal), except
//!    where Ruvio deliberately refuses a change (`SET_DIFFERS`);
//! 3. CONFIG SET with invalid values gets the same raw reply (the same error text:
//!    Redis's reason for the value's type, or the refusal), except `SET_DIFFERS`
//!    and where Redis's answer depends on what it tries (binding, TLS files:
//!    `INVALID_DIFFERS`);
//!
//! then both servers get the parameter's old value back. Both protocols: the
//! replies under RESP3 are compared too. docs/config.md has the table of what takes
//! effect.

mod common;

use common::*;
use std::collections::BTreeMap;

/// Parameters whose value differs from Redis's on purpose (name, why).
const DEFAULTS_DIFFER: &[(&str, &str)] = &[
    ("port", "each test server has its own port"),
    ("dir", "each server has its own data directory"),
    (
        "save",
        "Redis is started with --save \"\"; Ruvio keeps Redis's default rules",
    ),
    (
        "hash-max-listpack-entries",
        "Ruvio packs hashes up to 128 fields (Redis 7.2+)",
    ),
    (
        "hash-max-ziplist-entries",
        "alias of hash-max-listpack-entries",
    ),
];

/// Parameters Ruvio refuses to change at run time although Redis allows it (name,
/// why); both valid and invalid CONFIG SET answers may differ.
const SET_DIFFERS: &[(&str, &str)] = &[
    ("port", "the shards listen on the port they started with"),
    ("bind", "the shards listen on the address they started with"),
    (
        "appendonly",
        "Ruvio chooses its log at start (--durability)",
    ),
    (
        "appendfsync",
        "Ruvio chooses its log at start (--durability)",
    ),
];

/// Invalid values whose Redis error depends on what Redis then tries.
const INVALID_DIFFERS: &[(&str, &str)] = &[
    (
        "tls-port",
        "Redis tries to load the TLS files and fails; Ruvio has no TLS",
    ),
    ("tls-cert-file", "Redis reloads its TLS context"),
    ("tls-key-file", "Redis reloads its TLS context"),
    ("tls-key-file-pass", "Redis reloads its TLS context"),
    ("tls-client-cert-file", "Redis reloads its TLS context"),
    ("tls-client-key-file", "Redis reloads its TLS context"),
    ("tls-client-key-file-pass", "Redis reloads its TLS context"),
    ("tls-dh-params-file", "Redis reloads its TLS context"),
    ("tls-ca-cert-file", "Redis reloads its TLS context"),
    ("tls-ca-cert-dir", "Redis reloads its TLS context"),
    ("tls-protocols", "Redis reloads its TLS context"),
    ("tls-ciphers", "Redis reloads its TLS context"),
    ("tls-ciphersuites", "Redis reloads its TLS context"),
    ("tls-session-cache-size", "Redis reloads its TLS context"),
    ("tls-session-cache-timeout", "Redis reloads its TLS context"),
    ("tls-cluster", "Redis reloads its TLS context"),
    ("tls-replication", "Redis reloads its TLS context"),
    ("tls-prefer-server-ciphers", "Redis reloads its TLS context"),
    ("tls-session-caching", "Redis reloads its TLS context"),
];

/// Values no parameter of any type takes, and values only some types take: each
/// is tried on every parameter (a text parameter takes most of them, on both).
const INVALID_VALUES: &[&str] = &["not-a-value", "-1", "99999999999", "yes", "1kb", "5%"];

/// Parameters the invalid-value pass leaves alone: a value they take would lock
/// the test's own connection out (a password) or stop the server answering.
const NOT_PROBED: &[&str] = &["requirepass", "masterauth", "maxclients", "timeout"];

fn listed(table: &[(&str, &str)], name: &str) -> bool {
    table.iter().any(|(n, _)| *n == name)
}

/// `CONFIG GET *` of a server as name -> value.
fn all_params(conn: &mut redis::Connection) -> BTreeMap<String, String> {
    let flat: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("*")
        .query(conn)
        .unwrap();
    flat.chunks(2)
        .map(|pair| (pair[0].clone(), pair[1].clone()))
        .collect()
}

fn ok(reply: &[u8]) -> bool {
    reply == b"+OK\r\n"
}

#[test]
fn every_redis_parameter_answers_as_redis() {
    if require_redis_server("every_redis_parameter_answers_as_redis").is_none() {
        return;
    }
    let redis = Server::redis();
    let ruvio = Server::forward(2);
    let redis_params = all_params(&mut redis.client());
    assert!(redis_params.len() > 150, "{}", redis_params.len());
    let ruvio_params = all_params(&mut ruvio.client());
    for (name, value) in &redis_params {
        let shown = ruvio_params
            .get(name)
            .unwrap_or_else(|| panic!("Ruvio's CONFIG GET * lacks {name}"));
        if !listed(DEFAULTS_DIFFER, name) {
            assert_eq!(shown, value, "default of {name}");
        }
    }
    let extras: Vec<&String> = ruvio_params
        .keys()
        .filter(|n| !redis_params.contains_key(*n))
        .collect();
    assert_eq!(
        extras,
        [
            "cluster-announce-human-nodename",
            "commandlog-execution-slower-than",
            "commandlog-large-reply-max-len",
            "commandlog-large-request-max-len",
            "commandlog-reply-larger-than",
            "commandlog-request-larger-than",
            "commandlog-slow-execution-max-len",
            "durability",
            "locale-collate",
            "metrics-bind",
            "metrics-port",
            "port-mode",
            "replica-shard-links",
            "set-max-listpack-entries",
            "set-max-listpack-value",
            "shards"
        ],
        "Ruvio's parameters beyond Redis 7.0's"
    );

    for resp3 in [false, true] {
        let mut reference = redis.raw();
        let mut target = ruvio.raw();
        if resp3 {
            reference.cmd(&["HELLO", "3"]);
            target.cmd(&["HELLO", "3"]);
        }
        for (name, value) in &redis_params {
            let get = ["CONFIG", "GET", name.as_str()];
            let (expected, got) = (reference.cmd(&get), target.cmd(&get));
            if !listed(DEFAULTS_DIFFER, name) {
                assert_eq!(
                    String::from_utf8_lossy(&got),
                    String::from_utf8_lossy(&expected),
                    "CONFIG GET {name}"
                );
            }
            if listed(SET_DIFFERS, name) {
                continue;
            }
            let ruvio_value = ruvio_params[name].clone();
            let set = ["CONFIG", "SET", name.as_str(), value.as_str()];
            let expected = reference.cmd(&set);
            // Ruvio's own running value where the defaults differ on purpose.
            let got = target.cmd(&["CONFIG", "SET", name.as_str(), ruvio_value.as_str()]);
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&expected),
                "CONFIG SET {name} (a valid value)"
            );
            if NOT_PROBED.contains(&name.as_str()) || listed(INVALID_DIFFERS, name) {
                continue;
            }
            for bad in INVALID_VALUES {
                let set = ["CONFIG", "SET", name.as_str(), bad];
                let (expected, got) = (reference.cmd(&set), target.cmd(&set));
                assert_eq!(
                    String::from_utf8_lossy(&got),
                    String::from_utf8_lossy(&expected),
                    "CONFIG SET {name} {bad}"
                );
                if ok(&expected) {
                    reference.cmd(&["CONFIG", "SET", name.as_str(), value.as_str()]);
                    target.cmd(&["CONFIG", "SET", name.as_str(), ruvio_value.as_str()]);
                }
            }
        }
    }
}

/// Names are looked up without case; an alias shares its parameter's value; an
/// unknown name is Redis's "Unknown option"; several pairs are all or nothing.
#[test]
fn names_aliases_and_pairs_answer_as_redis() {
    if require_redis_server("names_aliases_and_pairs_answer_as_redis").is_none() {
        return;
    }
    let redis = Server::redis();
    let ruvio = Server::forward(2);
    let mut reference = redis.raw();
    let mut target = ruvio.raw();
    let script: &[&[&str]] = &[
        &["CONFIG", "SET", "SLAVE-PRIORITY", "7"],
        &["CONFIG", "GET", "replica-priority"],
        &["CONFIG", "GET", "slave-priority"],
        &["CONFIG", "SET", "slave-priority", "x"],
        &[
            "CONFIG",
            "SET",
            "replica-priority",
            "8",
            "slave-priority",
            "9",
        ],
        &["CONFIG", "SET", "no-such-parameter", "1"],
        &["CONFIG", "SET", "activerehashing", "no", "hz", "bad"],
        &["CONFIG", "GET", "activerehashing"],
        &[
            "CONFIG",
            "SET",
            "activerehashing",
            "NO",
            "lfu-log-factor",
            "3",
        ],
        // (Several names in one GET come in Redis's hash order: one at a time.)
        &["CONFIG", "GET", "activerehashing"],
        &["CONFIG", "GET", "lfu-log-factor"],
        &[
            "CONFIG",
            "SET",
            "activerehashing",
            "yes",
            "rdbchecksum",
            "no",
        ],
        &["CONFIG", "SET", "dbfilename", "other.rdb"],
        &["CONFIG", "SET", "stream-node-max-bytes", "2kb"],
        &["CONFIG", "GET", "stream-node-max-bytes"],
        &["CONFIG", "SET", "maxmemory-clients", "101%"],
        &["CONFIG", "SET", "loglevel", "WARNING"],
        &["CONFIG", "GET", "loglevel"],
        &["CONFIG", "SET", "loglevel", "notice"],
        &["CONFIG", "SET", "activedefrag", "yes"],
        &["CONFIG", "SET", "proc-title-template", "{nope}"],
        &["CONFIG", "SET", "oom-score-adj-values", "1 2"],
        &[
            "CONFIG",
            "SET",
            "latency-tracking-info-percentiles",
            "50 101",
        ],
        &[
            "CONFIG",
            "SET",
            "latency-tracking-info-percentiles",
            "50 99.90",
        ],
        &["CONFIG", "GET", "latency-tracking-info-percentiles"],
        &["CONFIG", "GET", "use-exit-on-panic"],
        &["CONFIG", "GET", "use-exit-*"],
        &["CONFIG", "SET", "list-compress-depth", "2"],
        &["CONFIG", "GET", "list-compress-depth"],
    ];
    for args in script {
        let (expected, got) = (reference.cmd(args), target.cmd(args));
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&expected),
            "{args:?}"
        );
    }
}

/// Parameters from the config file: any Redis parameter (TOML keys with `_`),
/// checked as CONFIG SET checks it; a misspelt one refuses the start.
#[test]
fn config_file_takes_every_redis_parameter() {
    let dir = std::env::temp_dir().join(format!("ruvio-params-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ruvio.toml");
    std::fs::write(
        &path,
        "activerehashing = false\nslowlog_max_len = 64\nlist_compress_depth = 1\n\
         dbfilename = \"snap.rdb\"\nloglevel = \"warning\"\nrepl-backlog-size = \"2mb\"\n\
         lua_replicate_commands = true\n",
    )
    .unwrap();
    let config = path.to_str().unwrap();
    let ruvio = Server::ruvio_with(PortMode::Forward, 1, &["--config", config]);
    let mut con = ruvio.client();
    let shown: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("activerehashing")
        .arg("slowlog-max-len")
        .arg("list-compress-depth")
        .arg("dbfilename")
        .arg("loglevel")
        .arg("repl-backlog-size")
        .query(&mut con)
        .unwrap();
    let shown: BTreeMap<String, String> = shown
        .chunks(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect();
    assert_eq!(shown["activerehashing"], "no");
    assert_eq!(shown["slowlog-max-len"], "64");
    assert_eq!(shown["list-compress-depth"], "1");
    assert_eq!(shown["dbfilename"], "snap.rdb");
    assert_eq!(shown["loglevel"], "warning");
    assert_eq!(shown["repl-backlog-size"], "2097152");
    // CONFIG REWRITE keeps a parameter set away from its default; a restart from
    // the file has it.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("tcp-keepalive")
        .arg("77")
        .arg("activerehashing")
        .arg("yes")
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("CONFIG").arg("REWRITE").query(&mut con).unwrap();
    drop(ruvio);
    let rewritten = std::fs::read_to_string(&path).unwrap();
    assert!(rewritten.contains("tcp_keepalive = 77"), "{rewritten}");
    let ruvio = Server::ruvio_with(PortMode::Forward, 1, &["--config", config]);
    let shown: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("tcp-keepalive")
        .query(&mut ruvio.client())
        .unwrap();
    assert_eq!(shown, ["tcp-keepalive", "77"]);
    drop(ruvio);

    for bad in [
        "no_such_setting = 1\n",
        "hz_typo = 3\n",
        "active_expire_effort = 11\n",
    ] {
        std::fs::write(&path, bad).unwrap();
        let out = std::process::Command::new(ruvio_bin())
            .args(["--config", config, "--port", "0"])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{bad}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("unknown setting") || stderr.contains("between 1 and 10"),
            "{bad}: {stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `dir` and `dbfilename` take effect: with `enable-protected-configs yes` (from
/// the file, as Redis takes it only at start) CONFIG SET moves where SAVE writes
/// its dump; a directory that does not exist is Redis's error.
#[test]
fn protected_dir_and_dbfilename_take_effect() {
    let base = std::env::temp_dir().join(format!("ruvio-protected-{}", std::process::id()));
    let (first, second) = (base.join("first"), base.join("second"));
    std::fs::create_dir_all(&first).unwrap();
    std::fs::create_dir_all(&second).unwrap();
    let path = base.join("ruvio.toml");
    std::fs::write(&path, "enable_protected_configs = \"yes\"\n").unwrap();
    let ruvio = Server::ruvio_with(
        PortMode::Forward,
        2,
        &[
            "--config",
            path.to_str().unwrap(),
            "--dir",
            first.to_str().unwrap(),
        ],
    );
    let mut c = ruvio.raw();
    assert_eq!(c.cmd(&["SET", "k", "v"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    assert!(first.join("dump.rdb").is_file());
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "dir",
            second.to_str().unwrap(),
            "dbfilename",
            "other.rdb"
        ]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    assert!(second.join("other.rdb").is_file());
    let shown = String::from_utf8(c.cmd(&["CONFIG", "GET", "dir"])).unwrap();
    assert!(
        shown.ends_with(&format!("{}\r\n", second.canonicalize().unwrap().display())),
        "{shown}"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "dir", base.join("missing").to_str().unwrap()]),
        b"-ERR CONFIG SET failed (possibly related to argument 'dir') - No such file or directory\r\n"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "dbfilename", "a/b.rdb"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'dbfilename') - dbfilename can't be a path, just a filename\r\n"
    );
    drop(ruvio);
    let _ = std::fs::remove_dir_all(&base);
}

/// Every Redis parameter is also a command-line flag of its name, as
/// redis-server takes directives (`--name value` or `--name=value`), checked
/// as CONFIG SET checks it; a bad value stops the start with the flag's name.
#[test]
fn redis_parameters_are_flags() {
    let args = [
        "--repl-backlog-size",
        "2mb",
        "--min-replicas-to-write=1",
        "--hash-max-listpack-entries",
        "64",
    ];
    let ruvio = Server::ruvio_with(PortMode::Forward, 2, &args);
    let mut c = ruvio.raw();
    for (name, value) in [
        ("repl-backlog-size", "2097152"),
        ("min-replicas-to-write", "1"),
        ("hash-max-listpack-entries", "64"),
    ] {
        let got = c.cmd(&["CONFIG", "GET", name]);
        assert_eq!(show(&got), show(&encode(&[name, value])), "{name}");
    }
    // In force: no replica, so writes are refused.
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(
        c.cmd(&["SET", "k", "v"]),
        b"-NOREPLICAS Not enough good replicas to write.\r\n"
    );
    drop(ruvio);
    let out = std::process::Command::new(ruvio_bin())
        .args(["--port", "0", "--repl-backlog-size", "-5"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--repl-backlog-size"), "{stderr}");
}
