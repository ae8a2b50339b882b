//! ruvio-bench's transports end to end: `--tls` (with and without a client
//! certificate) against Ruvio's `tls-port` and redis-server 7's `--tls-port`,
//! and `--tracking` against both with a writer invalidating the keys it reads,
//! so the speed records' command lines (docs/tls.md, docs/tracking.md) are known
//! to run. Certificates are made by the test with openssl, as tests/tls.rs does.
//!
//! The bench binary is the workspace's (`target/<profile>/ruvio-bench`), built
//! here with cargo once per run (a no-op when it is up to date): `cargo test -p
//! ruvio-server` builds only this crate's binaries, and one left from an older
//! checkout lacks newer tests (`get_set`).

mod common;

use common::certs::{certificates, path};
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The bench binary, built once per run of this file's tests.
static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

fn bench_bin() -> PathBuf {
    BUILT
        .get_or_init(|| {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let mut build = Command::new(cargo);
            build.args(["build", "-p", "ruvio-bench"]);
            if ruvio_bin().parent().and_then(Path::file_name) == Some("release".as_ref()) {
                build.arg("--release");
            }
            assert!(
                build.status().expect("cargo").success(),
                "building ruvio-bench"
            );
            ruvio_bin().with_file_name("ruvio-bench")
        })
        .clone()
}

/// Run ruvio-bench with `args` and `--json`; its report, or its error text.
fn bench(args: &[&str]) -> Result<serde_json::Value, String> {
    let out = Command::new(bench_bin())
        .args(args)
        .arg("--json")
        .output()
        .expect("ruvio-bench");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
}

/// Every test of a report ran `requests` requests without an error reply.
fn assert_clean(report: &serde_json::Value, requests: u64, label: &str) {
    let tests = report["tests"].as_array().expect("tests");
    assert!(!tests.is_empty(), "{label}: {report}");
    for t in tests {
        assert_eq!(t["requests"].as_u64(), Some(requests), "{label}: {t}");
        assert_eq!(t["errors"].as_u64(), Some(0), "{label}: {t}");
    }
}

/// TLS arguments for a server on `port` with the test CA.
fn tls_load(port: u16, dir: &Path, pipeline: &str) -> Vec<String> {
    [
        "-p",
        &port.to_string(),
        "--tls",
        "--cacert",
        &path(dir, "ca.crt"),
        "-c",
        "8",
        "--threads",
        "2",
        "-P",
        pipeline,
        "-n",
        "4000",
        "-r",
        "1000",
        "-d",
        "100",
        "-t",
        "set,get",
    ]
    .map(String::from)
    .to_vec()
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

#[test]
fn bench_over_tls_against_ruvio_and_redis() {
    let Some(dir) = certificates("bench") else {
        return;
    };
    let (cert, key, ca) = (
        path(&dir, "server.crt"),
        path(&dir, "server.key"),
        path(&dir, "ca.crt"),
    );
    let tls_port = free_ports(1, false);
    let tls_port_text = tls_port.to_string();
    let server_tls = [
        "--tls-port",
        &tls_port_text,
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--tls-ca-cert-file",
        &ca,
    ];
    let mut ruvio_args = server_tls.to_vec();
    ruvio_args.extend(["--tls-auth-clients", "yes"]);
    let ruvio = Server::ruvio_with(PortMode::Forward, 2, &ruvio_args);
    // Pipeline 1 and 16 (the speed record's shapes), large values spanning records.
    for pipeline in ["1", "16"] {
        let mut args = tls_load(tls_port, &dir, pipeline);
        args.extend(["--cert", &path(&dir, "client.crt")].map(String::from));
        args.extend(["--key", &path(&dir, "client.key")].map(String::from));
        let report = bench(&strs(&args)).unwrap_or_else(|e| panic!("ruvio -P {pipeline}: {e}"));
        assert_clean(&report, 4000, &format!("ruvio over TLS, -P {pipeline}"));
        assert_eq!(report["generator"]["tls"], true);
    }
    // tls-auth-clients yes: without a client certificate the session fails
    // (TLS 1.3: the server's alert comes with the first reply).
    let refused = bench(&strs(&tls_load(tls_port, &dir, "1"))).expect_err("no client certificate");
    assert!(refused.contains("CertificateRequired"), "{refused}");
    // A server certificate of another CA is refused by the bench.
    let mut other_ca = tls_load(tls_port, &dir, "1");
    other_ca[4] = path(&dir, "other-ca.crt");
    assert!(bench(&strs(&other_ca)).is_err());
    drop(ruvio);

    if require_redis_server("bench_over_tls_against_ruvio_and_redis").is_none() {
        return;
    }
    // Its own port: Ruvio's may still be closing.
    let tls_port = free_ports(1, false);
    let tls_port_text = tls_port.to_string();
    let mut redis_args = server_tls.to_vec();
    redis_args[1] = &tls_port_text;
    redis_args.extend(["--tls-auth-clients", "no"]);
    let _redis = Server::redis_with(&redis_args);
    for pipeline in ["1", "16"] {
        let report = bench(&strs(&tls_load(tls_port, &dir, pipeline)))
            .unwrap_or_else(|e| panic!("redis -P {pipeline}: {e}"));
        assert_clean(&report, 4000, &format!("redis over TLS, -P {pipeline}"));
    }
    // --sni names the certificate's DNS name; --insecure skips the check.
    let mut sni = tls_load(tls_port, &dir, "1");
    sni.extend(["--sni", "localhost"].map(String::from));
    assert_clean(&bench(&strs(&sni)).expect("--sni"), 4000, "--sni");
    let mut insecure = tls_load(tls_port, &dir, "1");
    insecure[3] = "--insecure".into();
    insecure.remove(4);
    assert_clean(
        &bench(&strs(&insecure)).expect("--insecure"),
        4000,
        "--insecure",
    );
}

/// `--tracking` while another client writes the keys the load reads: every
/// reply is counted as a reply, the pushes between them as invalidations.
fn tracked_gets(port: u16, server: &Server) -> serde_json::Value {
    let mut writer = server.raw();
    for i in 0..10 {
        writer.cmd(&["set", &format!("key:{i:012}"), "v"]);
    }
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut i = 0u64;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                writer.cmd(&["set", &format!("key:{:012}", i % 10), "w"]);
                i += 1;
                std::thread::sleep(Duration::from_micros(200));
            }
        });
        let report = bench(&[
            "-p",
            &port.to_string(),
            "--tracking",
            "-c",
            "4",
            "-P",
            "4",
            "-r",
            "10",
            "--duration",
            "1",
            "-t",
            "get",
        ]);
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        report.expect("ruvio-bench --tracking")
    })
}

#[test]
fn bench_tracking_counts_invalidations_against_ruvio_and_redis() {
    let ruvio = Server::ruvio_with(PortMode::Forward, 2, &[]);
    let mut servers = vec![("ruvio", ruvio)];
    if require_redis_server("bench_tracking_counts_invalidations").is_some() {
        servers.push(("redis", Server::redis()));
    }
    for (label, server) in &servers {
        let report = tracked_gets(server.port(), server);
        let test = &report["tests"][0];
        assert_eq!(test["errors"].as_u64(), Some(0), "{label}: {test}");
        assert!(test["requests"].as_u64() > Some(0), "{label}: {test}");
        assert!(
            test["invalidations"].as_u64() > Some(0),
            "{label}: no invalidation counted: {test}"
        );
        assert_eq!(report["generator"]["tracking"], true);
    }
}

/// `--tracking -t get_set`: the load itself writes keys it read (nobody else
/// writes), so every invalidation counted was owed by a SET of the load, each
/// request's two replies counted as one request and the pushes not as replies;
/// without `--tracking` the same load gets none.
#[test]
fn bench_get_set_delivers_invalidations_against_ruvio_and_redis() {
    let ruvio = Server::ruvio_with(PortMode::Forward, 2, &[]);
    let mut servers = vec![("ruvio", ruvio)];
    if require_redis_server("bench_get_set_delivers_invalidations").is_some() {
        servers.push(("redis", Server::redis()));
    }
    for (label, server) in &servers {
        let port = server.port().to_string();
        let load = |tracking: bool| {
            let mut args = vec![
                "-p", &port, "-c", "4", "-P", "8", "-r", "50", "-n", "4000", "-t", "get_set",
            ];
            if tracking {
                args.push("--tracking");
            }
            bench(&args).unwrap_or_else(|e| panic!("{label} get_set: {e}"))
        };
        let report = load(true);
        assert_clean(&report, 4000, label);
        let test = &report["tests"][0];
        assert_eq!(test["name"], "GET then SET", "{label}: {test}");
        assert_eq!(report["generator"]["tracking"], true);
        // 4,000 SETs over 50 keys that the 4 connections keep reading: most
        // SETs find their key read since its last write by some connection.
        let invalidations = test["invalidations"].as_u64().unwrap_or(0);
        assert!(
            invalidations >= 1000,
            "{label}: {invalidations} invalidations counted: {test}"
        );
        // A SET owes at most one push to each of the 4 connections.
        assert!(invalidations <= 4 * 4000, "{label}: {test}");
        let plain = load(false);
        assert_clean(&plain, 4000, label);
        assert_eq!(
            plain["tests"][0]["invalidations"].as_u64(),
            Some(0),
            "{label}"
        );
    }
}
