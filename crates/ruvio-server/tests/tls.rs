//! TLS on `tls-port` with the real clients: `redis-cli --tls` (with and without a
//! client certificate) and redis-py `ssl=True`, beside the plain port on the same
//! keyspace, 1 and 2 shards; a client certificate from another CA refused (and
//! logged) while the shard serves the others; plain RESP sent to the TLS port and
//! a TLS hello sent to the plain port close that connection and nothing else.
//! The certificates are made by the test with openssl. The settings that shape
//! the handshake (`tls-protocols`, `tls-ciphers`, `tls-ciphersuites`,
//! `tls-prefer-server-ciphers`, the session cache, `tls-key-file-pass`,
//! `tls-ca-cert-dir`) are checked with `openssl s_client`, at the start and after
//! CONFIG SET.

mod common;

use common::certs::{certificates, path};
use common::*;
use std::path::Path;
use std::process::{Command, Output};

/// A Ruvio with a TLS port beside its plain one; the TLS port.
fn with_tls(shards: usize, dir: &Path, auth_clients: &str) -> (Server, u16) {
    let tls_port = free_ports(1, false);
    let tls_port_text = tls_port.to_string();
    let (cert, key, ca) = (
        path(dir, "server.crt"),
        path(dir, "server.key"),
        path(dir, "ca.crt"),
    );
    let server = Server::ruvio_with(
        PortMode::Forward,
        shards,
        &[
            "--tls-port",
            &tls_port_text,
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
            "--tls-ca-cert-file",
            &ca,
            "--tls-auth-clients",
            auth_clients,
        ],
    );
    (server, tls_port)
}

/// redis-cli over TLS with the CA, and `client` ("client", "stranger" or none)'s
/// certificate.
fn cli(port: u16, dir: &Path, client: Option<&str>, command: &[&str]) -> Output {
    let mut cmd = Command::new("redis-cli");
    cmd.args([
        "-p",
        &port.to_string(),
        "--tls",
        "--cacert",
        &path(dir, "ca.crt"),
    ]);
    if let Some(name) = client {
        cmd.args(["--cert", &path(dir, &format!("{name}.crt"))]);
        cmd.args(["--key", &path(dir, &format!("{name}.key"))]);
    }
    cmd.args(command).output().expect("redis-cli")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn redis_cli_and_redis_py_over_tls_beside_the_plain_port() {
    let Some(dir) = certificates("redis_cli_an") else {
        return;
    };
    for shards in [1, 2] {
        let (server, tls_port) = with_tls(shards, &dir, "no");
        assert_eq!(
            stdout(&cli(tls_port, &dir, None, &["set", "k", "over tls"])),
            "OK"
        );
        // The same keyspace from the plain port.
        assert_eq!(
            server.raw().cmd(&["get", "k"]),
            bulk("over tls").into_bytes()
        );
        assert_eq!(
            stdout(&cli(tls_port, &dir, None, &["get", "k"])),
            "over tls"
        );
        // redis-py: a 1 MB value both ways (many records) and a 10,000-command pipeline.
        let script = format!(
            "import redis\n\
             r = redis.Redis(port={tls_port}, ssl=True, ssl_ca_certs='{ca}')\n\
             r.set('big', 'x' * 1000000)\n\
             assert len(r.get('big')) == 1000000\n\
             p = r.pipeline(transaction=False)\n\
             for i in range(10000): p.incr('n')\n\
             assert p.execute()[-1] == 10000\n\
             print('ok')\n",
            ca = path(&dir, "ca.crt")
        );
        assert_eq!(python(&script), "ok", "{shards} shards");
        assert_eq!(server.raw().cmd(&["get", "n"]), bulk("10000").into_bytes());
    }
}

#[test]
fn client_certificates_are_checked_against_the_ca() {
    let Some(dir) = certificates("client_certi") else {
        return;
    };
    let (server, tls_port) = with_tls(2, &dir, "yes");
    assert_eq!(
        stdout(&cli(tls_port, &dir, Some("client"), &["ping"])),
        "PONG"
    );
    // No certificate, or one of another CA: refused, and the server goes on.
    let out = cli(tls_port, &dir, None, &["ping"]);
    assert_ne!(stdout(&out), "PONG", "no client certificate was accepted");
    let out = cli(tls_port, &dir, Some("stranger"), &["ping"]);
    assert_ne!(
        stdout(&out),
        "PONG",
        "another CA's certificate was accepted"
    );
    assert_eq!(
        stdout(&cli(tls_port, &dir, Some("client"), &["ping"])),
        "PONG"
    );
    assert_eq!(server.raw().cmd(&["ping"]), b"+PONG\r\n");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    while !server
        .logs()
        .contains("Error accepting a client connection")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no log line:\n{}",
            server.logs()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // optional: no certificate is fine, a stranger's is not.
    let (_server, tls_port) = with_tls(1, &dir, "optional");
    assert_eq!(stdout(&cli(tls_port, &dir, None, &["ping"])), "PONG");
    assert_ne!(
        stdout(&cli(tls_port, &dir, Some("stranger"), &["ping"])),
        "PONG"
    );
}

#[test]
fn the_wrong_protocol_on_either_port_closes_only_that_connection() {
    let Some(dir) = certificates("the_wrong_pr") else {
        return;
    };
    let (server, tls_port) = with_tls(2, &dir, "no");
    let mut bystander = server.raw();
    assert_eq!(bystander.cmd(&["set", "k", "v"]), b"+OK\r\n");
    // Plain RESP to the TLS port: not a TLS record; the connection closes.
    let mut plain_to_tls = RawConn::connect(tls_port);
    plain_to_tls.send(b"*1\r\n$4\r\nPING\r\n");
    let mut rest = Vec::new();
    let _ = std::io::Read::read_to_end(plain_to_tls.stream(), &mut rest);
    assert!(!rest.starts_with(b"+PONG"), "{}", show(&rest));
    // A TLS client on the plain port: the hello is a protocol error there.
    let out = cli(server.port(), &dir, None, &["ping"]);
    assert_ne!(stdout(&out), "PONG");
    assert_eq!(bystander.cmd(&["get", "k"]), bulk("v").into_bytes());
    assert_eq!(stdout(&cli(tls_port, &dir, None, &["get", "k"])), "v");
}

#[test]
fn a_bad_certificate_file_stops_the_start_with_its_name() {
    let ruvio = ruvio_bin();
    let out = Command::new(ruvio)
        .args([
            "--port",
            &free_ports(1, false).to_string(),
            "--tls-port",
            &free_ports(1, false).to_string(),
            "--tls-cert-file",
            "/nonexistent/server.crt",
            "--tls-key-file",
            "/nonexistent/server.key",
            "--tls-auth-clients",
            "no",
        ])
        .output()
        .expect("ruvio");
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("/nonexistent/server.crt"), "{text}");
}

/// Per-shard mode with `tls-cluster yes`: a TLS client is told the shards' TLS
/// ports (CLUSTER SLOTS, MOVED), so redis-py's RedisCluster over TLS reaches every
/// shard; a plain RedisCluster on the plain ports is told the plain ones.
#[test]
fn redis_cluster_over_tls_in_per_shard_mode() {
    let Some(dir) = certificates("cluster_tls") else {
        return;
    };
    let tls_port = free_ports(2, false);
    let (cert, key) = (path(&dir, "server.crt"), path(&dir, "server.key"));
    let server = Server::ruvio_with(
        PortMode::PerShard,
        2,
        &[
            "--tls-port",
            &tls_port.to_string(),
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
            "--tls-auth-clients",
            "no",
            "--tls-cluster",
            "yes",
        ],
    );
    let script = format!(
        "import redis\n\
         from redis.cluster import RedisCluster\n\
         tls = RedisCluster(host='127.0.0.1', port={tls_port}, ssl=True, ssl_ca_certs='{ca}')\n\
         ports = sorted(n.port for n in tls.get_nodes())\n\
         assert ports == [{tls_port}, {tls_port} + 1], ports\n\
         for i in range(50): tls.set(f'key{{i}}', i)\n\
         assert [int(tls.get(f'key{{i}}')) for i in range(50)] == list(range(50))\n\
         plain = RedisCluster(host='127.0.0.1', port={plain})\n\
         assert sorted(n.port for n in plain.get_nodes()) == [{plain}, {plain} + 1]\n\
         assert int(plain.get('key49')) == 49\n\
         print('ok')\n",
        ca = path(&dir, "ca.crt"),
        plain = server.port(),
    );
    assert_eq!(python(&script), "ok");
    // MOVED names the TLS port to a TLS client.
    let key = key_on_shard("moved", 1, 2);
    let out = cli(tls_port, &dir, None, &["get", &key]);
    let expected = format!(
        "MOVED {} 127.0.0.1:{}",
        key_slot(key.as_bytes()),
        tls_port + 1
    );
    assert!(stdout(&out).contains(&expected), "{}", stdout(&out));
}

/// CONFIG SET of the certificate and key: sessions started afterwards use the
/// new ones, a connection open before goes on with its own; a file that does not
/// load is refused with Redis's text and the old certificate still serves.
#[test]
fn config_set_reloads_the_certificate_without_dropping_connections() {
    let Some(dir) = certificates("reload") else {
        return;
    };
    let (server, tls_port) = with_tls(2, &dir, "no");
    let mut admin = server.raw();
    let bad = admin.cmd(&["config", "set", "tls-cert-file", "/nonexistent/server.crt"]);
    assert_eq!(
        bad,
        b"-ERR CONFIG SET failed (possibly related to argument 'tls-cert-file') - Unable to update TLS configuration. Check server logs.\r\n"
    );
    assert_eq!(stdout(&cli(tls_port, &dir, None, &["ping"])), "PONG");
    let script = format!(
        "import redis, subprocess\n\
         old = redis.Redis(port={tls_port}, ssl=True, ssl_ca_certs='{ca}')\n\
         assert old.set('k', 'before')\n\
         admin = redis.Redis(port={plain})\n\
         admin.execute_command('CONFIG', 'SET', 'tls-cert-file', '{cert2}', 'tls-key-file', '{key2}')\n\
         assert old.get('k') == b'before'\n\
         try:\n\
         \x20   redis.Redis(port={tls_port}, ssl=True, ssl_ca_certs='{ca}').ping()\n\
         \x20   raise SystemExit('the old CA still verifies a new session')\n\
         except redis.exceptions.ConnectionError:\n\
         \x20   pass\n\
         new = redis.Redis(port={tls_port}, ssl=True, ssl_ca_certs='{other_ca}')\n\
         assert new.get('k') == b'before'\n\
         print('ok')\n",
        ca = path(&dir, "ca.crt"),
        other_ca = path(&dir, "other-ca.crt"),
        cert2 = path(&dir, "server2.crt"),
        key2 = path(&dir, "server2.key"),
        plain = server.port(),
    );
    assert_eq!(python(&script), "ok");
}

/// `openssl s_client` to `port` trusting the test CA, with `args`; its output
/// (stdout and stderr).
fn s_client(port: u16, dir: &Path, args: &[&str]) -> String {
    let out = Command::new("openssl")
        .args(["s_client", "-connect", &format!("127.0.0.1:{port}")])
        .args(["-CAfile", &path(dir, "ca.crt")])
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("openssl s_client");
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// The cipher the handshake agreed on (`None`: no session), and whether the
/// session was resumed, from s_client's `New, TLSv1.3, Cipher is X` line.
fn negotiated(output: &str) -> Option<(String, bool)> {
    let line = output
        .lines()
        .find(|l| l.starts_with("New, ") || l.starts_with("Reused, "))?;
    let cipher = line.split("Cipher is ").nth(1)?.trim().to_string();
    (cipher != "(NONE)").then(|| (cipher, line.starts_with("Reused")))
}

fn cipher(port: u16, dir: &Path, args: &[&str]) -> Option<String> {
    negotiated(&s_client(port, dir, args)).map(|(c, _)| c)
}

/// A Ruvio on 1 shard (a resumed session must land on the shard whose cache
/// holds it) with a TLS port and `extra` settings (which replace the defaults
/// of the same name); the TLS port.
fn with_tls_settings(dir: &Path, extra: &[&str]) -> (Server, u16) {
    with_tls_settings_on(1, dir, extra)
}

fn with_tls_settings_on(shards: usize, dir: &Path, extra: &[&str]) -> (Server, u16) {
    let tls_port = free_ports(1, false).to_string();
    let (cert, key) = (path(dir, "server.crt"), path(dir, "server.key"));
    let defaults = [
        ("--tls-port", tls_port.as_str()),
        ("--tls-cert-file", &cert),
        ("--tls-key-file", &key),
        ("--tls-auth-clients", "no"),
    ];
    let mut args: Vec<&str> = Vec::new();
    for (flag, value) in defaults {
        if !extra.contains(&flag) {
            args.extend([flag, value]);
        }
    }
    args.extend_from_slice(extra);
    let server = Server::ruvio_with(PortMode::Forward, shards, &args);
    (server, tls_port.parse().unwrap())
}

fn config_set(server: &Server, args: &[&str]) -> Vec<u8> {
    let mut words = vec!["config", "set"];
    words.extend_from_slice(args);
    server.raw().cmd(&words)
}

const TLS_CONFIG_REFUSED: &str = "Unable to update TLS configuration. Check server logs.";

#[test]
fn tls_protocols_allow_only_the_versions_named() {
    let Some(dir) = certificates("protocols") else {
        return;
    };
    let (server, port) = with_tls_settings(&dir, &["--tls-protocols", "TLSv1.3"]);
    assert!(cipher(port, &dir, &["-tls1_3"]).is_some());
    assert_eq!(
        cipher(port, &dir, &["-tls1_2"]),
        None,
        "TLSv1.2 was accepted"
    );
    // CONFIG SET turns it around for new sessions.
    assert_eq!(
        config_set(&server, &["tls-protocols", "TLSv1.2"]),
        b"+OK\r\n"
    );
    assert!(cipher(port, &dir, &["-tls1_2"]).is_some());
    assert_eq!(
        cipher(port, &dir, &["-tls1_3"]),
        None,
        "TLSv1.3 was accepted"
    );
    assert_eq!(
        config_set(&server, &["tls-protocols", "TLSv1.2 TLSv1.3"]),
        b"+OK\r\n"
    );
    assert!(cipher(port, &dir, &["-tls1_3"]).is_some());
    // A version rustls does not speak, or no version at all, is refused.
    for bad in ["TLSv1.1", "SSLv3"] {
        let reply = config_set(&server, &["tls-protocols", bad]);
        assert!(
            String::from_utf8_lossy(&reply).contains(TLS_CONFIG_REFUSED),
            "{bad}: {}",
            show(&reply)
        );
    }
    assert!(server.logs().contains("tls-protocols"), "{}", server.logs());
    assert!(cipher(port, &dir, &["-tls1_3"]).is_some());
    // At the start: the process stops with the setting's name.
    let out = Command::new(ruvio_bin())
        .args(["--port", &free_ports(1, false).to_string()])
        .args(["--tls-port", &free_ports(1, false).to_string()])
        .args(["--tls-cert-file", &path(&dir, "server.crt")])
        .args(["--tls-key-file", &path(&dir, "server.key")])
        .args(["--tls-auth-clients", "no", "--tls-protocols", "TLSv1"])
        .output()
        .expect("ruvio");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("tls-protocols"));
}

#[test]
fn tls_ciphers_and_ciphersuites_take_openssl_names() {
    let Some(dir) = certificates("ciphers") else {
        return;
    };
    let (server, port) = with_tls_settings(
        &dir,
        &[
            "--tls-ciphers",
            "ECDHE-RSA-AES128-GCM-SHA256",
            "--tls-ciphersuites",
            "TLS_CHACHA20_POLY1305_SHA256",
        ],
    );
    assert_eq!(
        cipher(port, &dir, &["-tls1_2"]).as_deref(),
        Some("ECDHE-RSA-AES128-GCM-SHA256")
    );
    assert_eq!(
        cipher(
            port,
            &dir,
            &["-tls1_2", "-cipher", "ECDHE-RSA-AES256-GCM-SHA384"]
        ),
        None
    );
    assert_eq!(
        cipher(port, &dir, &["-tls1_3"]).as_deref(),
        Some("TLS_CHACHA20_POLY1305_SHA256")
    );
    assert_eq!(
        cipher(
            port,
            &dir,
            &["-tls1_3", "-ciphersuites", "TLS_AES_128_GCM_SHA256"]
        ),
        None
    );
    // The list most Redis configurations copy.
    assert_eq!(
        config_set(&server, &["tls-ciphers", "HIGH:!aNULL:!MD5"]),
        b"+OK\r\n"
    );
    assert!(cipher(
        port,
        &dir,
        &["-tls1_2", "-cipher", "ECDHE-RSA-AES256-GCM-SHA384"]
    )
    .is_some());
    // A cipher rustls does not have is refused, and the old settings stay.
    for (name, value) in [
        ("tls-ciphers", "AES128-SHA"),
        ("tls-ciphers", "nonsense"),
        ("tls-ciphersuites", "TLS_AES_128_CCM_SHA256"),
    ] {
        let reply = config_set(&server, &[name, value]);
        assert_eq!(
            String::from_utf8_lossy(&reply),
            format!("-ERR CONFIG SET failed (possibly related to argument '{name}') - {TLS_CONFIG_REFUSED}\r\n")
        );
        assert!(server.logs().contains(value), "{}", server.logs());
    }
    assert_eq!(
        server.raw().cmd(&["config", "get", "tls-ciphers"]),
        b"*2\r\n$11\r\ntls-ciphers\r\n$16\r\nHIGH:!aNULL:!MD5\r\n"
    );
    assert!(cipher(port, &dir, &["-tls1_2"]).is_some());
}

#[test]
fn tls_prefer_server_ciphers_picks_the_servers_order() {
    let Some(dir) = certificates("prefer") else {
        return;
    };
    let servers_order = "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-GCM-SHA256";
    let clients_order = [
        "-tls1_2",
        "-cipher",
        "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384",
    ];
    let (server, port) = with_tls_settings(&dir, &["--tls-ciphers", servers_order]);
    assert_eq!(
        cipher(port, &dir, &clients_order).as_deref(),
        Some("ECDHE-RSA-AES128-GCM-SHA256")
    );
    assert_eq!(
        config_set(&server, &["tls-prefer-server-ciphers", "yes"]),
        b"+OK\r\n"
    );
    assert_eq!(
        cipher(port, &dir, &clients_order).as_deref(),
        Some("ECDHE-RSA-AES256-GCM-SHA384")
    );
}

#[test]
fn tls_session_caching_resumes_within_the_timeout() {
    let Some(dir) = certificates("sessions") else {
        return;
    };
    let session = dir.join("session.pem").to_string_lossy().into_owned();
    let resumed = |port: u16| {
        let first = s_client(port, &dir, &["-tls1_2", "-sess_out", &session]);
        assert!(negotiated(&first).is_some(), "{first}");
        let second = s_client(port, &dir, &["-tls1_2", "-sess_in", &session]);
        negotiated(&second).expect("a session").1
    };
    let (server, port) = with_tls_settings(&dir, &[]);
    assert!(resumed(port), "the default caches sessions");
    assert_eq!(
        config_set(&server, &["tls-session-caching", "no"]),
        b"+OK\r\n"
    );
    assert!(!resumed(port), "resumed with tls-session-caching no");
    assert_eq!(
        config_set(
            &server,
            &[
                "tls-session-caching",
                "yes",
                "tls-session-cache-timeout",
                "1"
            ]
        ),
        b"+OK\r\n"
    );
    let first = s_client(port, &dir, &["-tls1_2", "-sess_out", &session]);
    assert!(negotiated(&first).is_some());
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let late = s_client(port, &dir, &["-tls1_2", "-sess_in", &session]);
    assert!(
        !negotiated(&late).expect("a session").1,
        "resumed after the timeout"
    );
    // tls-session-cache-size 1: a second session pushes the first out.
    assert_eq!(
        config_set(
            &server,
            &[
                "tls-session-cache-timeout",
                "300",
                "tls-session-cache-size",
                "1"
            ]
        ),
        b"+OK\r\n"
    );
    let other = dir.join("other.pem").to_string_lossy().into_owned();
    s_client(port, &dir, &["-tls1_2", "-sess_out", &session]);
    s_client(port, &dir, &["-tls1_2", "-sess_out", &other]);
    // The newest first: a handshake that does not resume caches a new session.
    let kept = s_client(port, &dir, &["-tls1_2", "-sess_in", &other]);
    assert!(
        negotiated(&kept).expect("a session").1,
        "the newest session did not resume: {kept}"
    );
    let evicted = s_client(port, &dir, &["-tls1_2", "-sess_in", &session]);
    assert!(
        !negotiated(&evicted).expect("a session").1,
        "an evicted session resumed"
    );
    // A CONFIG SET of the TLS settings starts a new cache, as Redis's new context.
    assert_eq!(
        config_set(&server, &["tls-session-cache-size", "100"]),
        b"+OK\r\n"
    );
    let after = s_client(port, &dir, &["-tls1_2", "-sess_in", &other]);
    assert!(
        !negotiated(&after).expect("a session").1,
        "resumed across a reload"
    );
}

/// In forward mode the shards share one cache: SO_REUSEPORT hands each
/// connection to any shard, and every one of them resumes the session.
#[test]
fn tls_sessions_resume_on_every_shard() {
    let Some(dir) = certificates("sessions4") else {
        return;
    };
    let session = dir.join("session.pem").to_string_lossy().into_owned();
    let (_server, port) = with_tls_settings_on(4, &dir, &[]);
    let first = s_client(port, &dir, &["-tls1_2", "-sess_out", &session]);
    assert!(negotiated(&first).is_some(), "{first}");
    for attempt in 0..12 {
        let again = s_client(port, &dir, &["-tls1_2", "-sess_in", &session]);
        assert!(
            negotiated(&again).expect("a session").1,
            "attempt {attempt} was not resumed"
        );
    }
}

#[test]
fn an_encrypted_key_loads_with_tls_key_file_pass() {
    let Some(dir) = certificates("keypass") else {
        return;
    };
    let status = Command::new("openssl")
        .args([
            "pkcs8",
            "-topk8",
            "-v2",
            "aes-256-cbc",
            "-passout",
            "pass:s3cret",
        ])
        .args([
            "-in",
            &path(&dir, "server.key"),
            "-out",
            &path(&dir, "server-enc.key"),
        ])
        .status()
        .expect("openssl pkcs8");
    assert!(status.success());
    let enc = path(&dir, "server-enc.key");
    let start = |pass: &str| {
        Command::new(ruvio_bin())
            .args(["--port", &free_ports(1, false).to_string()])
            .args(["--tls-port", &free_ports(1, false).to_string()])
            .args(["--tls-cert-file", &path(&dir, "server.crt")])
            .args(["--tls-key-file", &enc, "--tls-key-file-pass", pass])
            .args(["--tls-auth-clients", "no", "--shards", "1"])
            .output()
            .expect("ruvio")
    };
    // A wrong passphrase stops the start, naming the key file.
    let out = start("wrong");
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && text.contains("server-enc.key"),
        "{text}"
    );
    let (server, port) = with_tls_settings(
        &dir,
        &["--tls-key-file", &enc, "--tls-key-file-pass", "s3cret"],
    );
    assert!(cipher(port, &dir, &[]).is_some());
    assert_eq!(stdout(&cli(port, &dir, None, &["ping"])), "PONG");
    // CONFIG SET: the wrong passphrase is refused, the right one keeps serving.
    let reply = config_set(&server, &["tls-key-file-pass", "wrong"]);
    assert!(String::from_utf8_lossy(&reply).contains(TLS_CONFIG_REFUSED));
    assert_eq!(stdout(&cli(port, &dir, None, &["ping"])), "PONG");
}

#[test]
fn tls_ca_cert_dir_holds_the_client_cas() {
    let Some(dir) = certificates("cadir") else {
        return;
    };
    let cas = dir.join("cas");
    std::fs::create_dir_all(&cas).unwrap();
    std::fs::copy(dir.join("ca.crt"), cas.join("ca.pem")).unwrap();
    std::fs::write(cas.join("README"), "not a certificate\n").unwrap();
    let cas_text = cas.to_string_lossy().into_owned();
    let (server, port) = with_tls_settings(
        &dir,
        &["--tls-auth-clients", "yes", "--tls-ca-cert-dir", &cas_text],
    );
    assert_eq!(stdout(&cli(port, &dir, Some("client"), &["ping"])), "PONG");
    assert_ne!(
        stdout(&cli(port, &dir, Some("stranger"), &["ping"])),
        "PONG"
    );
    // Another directory, holding the other CA: now the stranger is the client.
    let other = dir.join("other-cas");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::copy(dir.join("other-ca.crt"), other.join("other.pem")).unwrap();
    let other_text = other.to_string_lossy().into_owned();
    assert_eq!(
        config_set(&server, &["tls-ca-cert-dir", &other_text]),
        b"+OK\r\n"
    );
    assert_eq!(
        stdout(&cli(port, &dir, Some("stranger"), &["ping"])),
        "PONG"
    );
    assert_ne!(stdout(&cli(port, &dir, Some("client"), &["ping"])), "PONG");
    // A directory with no certificate is refused.
    let empty = dir.join("empty-cas");
    std::fs::create_dir_all(&empty).unwrap();
    let reply = config_set(&server, &["tls-ca-cert-dir", &empty.to_string_lossy()]);
    assert!(String::from_utf8_lossy(&reply).contains(TLS_CONFIG_REFUSED));
}
