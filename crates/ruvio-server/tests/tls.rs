//! TLS on `tls-port` with the real clients: `redis-cli --tls` (with and without a
//! client certificate) and redis-py `ssl=True`, beside the plain port on the same
//! keyspace, 1 and 2 shards; a client certificate from another CA refused (and
//! logged) while the shard serves the others; plain RESP sent to the TLS port and
//! a TLS hello sent to the plain port close that connection and nothing else.
//! The certificates are made by the test with openssl.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A directory with a CA, a server certificate for 127.0.0.1 signed by it, a
/// client certificate signed by it, and a client and a server certificate of
/// another CA.
fn certificates(test: &str) -> Option<PathBuf> {
    if Command::new("openssl").arg("version").output().is_err() {
        eprintln!("tls: openssl not installed; skipped");
        return None;
    }
    // One directory per test: the tests run at once.
    let dir = std::env::temp_dir().join(format!("ruvio-tls-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("certificate directory");
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    std::fs::write(
        dir.join("san.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
    for ca in ["ca", "other-ca"] {
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN={ca}"),
            "-keyout",
            &format!("{ca}.key"),
            "-out",
            &format!("{ca}.crt"),
        ]);
    }
    for (name, ca) in [
        ("server", "ca"),
        ("client", "ca"),
        ("stranger", "other-ca"),
        ("server2", "other-ca"),
    ] {
        openssl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
        ]);
        openssl(&[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{ca}.crt"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "san.cnf",
            "-out",
            &format!("{name}.crt"),
        ]);
    }
    Some(dir)
}

fn path(dir: &Path, file: &str) -> String {
    dir.join(file).to_string_lossy().into_owned()
}

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
        let out = Command::new("python3")
            .args(["-c", &script])
            .output()
            .expect("python3");
        assert_eq!(
            stdout(&out),
            "ok",
            "{shards} shards: {}",
            String::from_utf8_lossy(&out.stderr)
        );
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
    let out = Command::new("python3")
        .args(["-c", &script])
        .output()
        .expect("python3");
    assert_eq!(
        stdout(&out),
        "ok",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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
    let out = Command::new("python3")
        .args(["-c", &script])
        .output()
        .expect("python3");
    assert_eq!(
        stdout(&out),
        "ok",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
