//! The metrics endpoint and live page (issue 33), tested with the real consumers:
//!
//! - `prometheus-redis-exporter` (redis_exporter 1.45) scrapes Ruvio over RESP
//!   without errors, and every `redis_` family Ruvio's own endpoint serves is one
//!   the exporter produces from Ruvio's INFO, with the same type and label names;
//! - the endpoint's text parsed by `prometheus_client`'s parser (python), escaped
//!   label values included (an error code made up by a script);
//! - a real `prometheus` server scraping the endpoint every second answers a
//!   PromQL `rate()` of Ruvio's per-shard command counter;
//! - the page loaded in headless Chromium draws every chart (screenshot kept in
//!   `target/tmp/metrics-page.png`);
//! - per-shard mode reports every shard; the mesh and log series count each shard's
//!   messages, written bytes and fsyncs;
//! - bad HTTP (garbage, huge heads, wrong methods, slow and too many clients)
//!   gets its 4xx answer or a closed socket while the shard goes on serving.
//!
//! A tool that is not installed skips its test with a message (`RUVIO_REQUIRE_REDIS=1`
//! makes that a failure, as for redis-server).

mod common;

use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A Ruvio in forward mode with two shards and the endpoint on a free port.
fn server_with_endpoint() -> (Server, u16) {
    let metrics_port = free_ports(1, false);
    let server = Server::ruvio_with(
        PortMode::Forward,
        2,
        &["--metrics-port", &metrics_port.to_string()],
    );
    (server, metrics_port)
}

/// The installed tool `name`, or `None` after saying the test is skipped.
fn require_tool(test: &str, name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    let found = std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file());
    if found.is_none() {
        if std::env::var("RUVIO_REQUIRE_REDIS").as_deref() == Ok("1") {
            panic!("{test}: {name} is not installed but RUVIO_REQUIRE_REDIS=1");
        }
        eprintln!("SKIPPED {test}: {name} is not installed");
    }
    found
}

/// A child process killed when the test ends, however it ends.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One HTTP/1.1 request with `Connection: close`: (status code, head, body).
fn http_get(port: u16, path: &str) -> (u16, String, Vec<u8>) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).expect("read response");
    split_response(&response)
}

fn split_response(response: &[u8]) -> (u16, String, Vec<u8>) {
    let end = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in {}", show(response)));
    let head = String::from_utf8_lossy(&response[..end]).to_string();
    let status = head[9..12].parse().expect("status code");
    (status, head, response[end + 4..].to_vec())
}

/// GET `path`'s body as text, retried until it answers (a tool starting up).
/// HTTP/1.0, so that the tool's answer is not chunked.
fn fetch_when_up(port: u16, path: &str, what: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) {
            let request = format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n");
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let mut response = Vec::new();
            if stream.write_all(request.as_bytes()).is_ok()
                && stream.read_to_end(&mut response).is_ok()
                && response.get(8..13) == Some(b" 200 ")
            {
                return String::from_utf8_lossy(&split_response(&response).2).to_string();
            }
        }
        assert!(Instant::now() < deadline, "{what} did not come up");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Family name -> (type, label names, samples as series text -> value), from the
/// text format (a small reader for comparing two expositions; the real parser's
/// verdict is `prometheus_client_parses_the_text`).
type Families = BTreeMap<String, (String, BTreeSet<String>, BTreeMap<String, String>)>;

fn families(text: &str) -> Families {
    let mut out = Families::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            out.entry(name.into()).or_default().0 = kind.into();
        } else if !line.starts_with('#') && !line.is_empty() {
            let (series, value) = line
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("not a sample line: {line:?}"));
            let name = series.split('{').next().unwrap();
            let entry = out.entry(name.into()).or_default();
            if let Some(labels) = series.split_once('{').map(|(_, l)| l) {
                for pair in labels.trim_end_matches('}').split("\",") {
                    if let Some((label, _)) = pair.split_once('=') {
                        entry.1.insert(label.into());
                    }
                }
            }
            entry.2.insert(series.into(), value.into());
        }
    }
    out
}

#[test]
fn exporter_scrapes_ruvio_with_the_names_the_endpoint_serves() {
    const TEST: &str = "exporter_scrapes_ruvio_with_the_names_the_endpoint_serves";
    let Some(exporter) = require_tool(TEST, "prometheus-redis-exporter") else {
        return;
    };
    let (server, metrics_port) = server_with_endpoint();
    let mut conn = server.raw();
    for (key, expiring) in keys_per_shard("m", 2).iter().zip(keys_per_shard("t", 2)) {
        conn.cmd(&["SET", key, "v"]);
        conn.cmd(&["SET", &expiring, "v", "EX", "100"]);
        conn.cmd(&["GET", key]);
    }
    conn.cmd(&["GET", "missing"]);
    conn.cmd(&["CONFIG", "GET", "maxclients"]);
    conn.cmd(&["NOSUCHCOMMAND"]);
    let mut subscriber = server.raw();
    subscriber.cmd(&["SUBSCRIBE", "news"]);
    subscriber.cmd(&["PSUBSCRIBE", "news.*"]);
    let exporter_port = free_ports(1, false);
    let _exporter = Guard(
        Command::new(exporter)
            .arg(format!("--redis.addr=redis://127.0.0.1:{}", server.port()))
            .arg(format!("--web.listen-address=127.0.0.1:{exporter_port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus-redis-exporter"),
    );
    // Two scrapes: the second sees the errors the exporter's own probes caused.
    fetch_when_up(exporter_port, "/metrics", "the exporter");
    let exported_text = fetch_when_up(exporter_port, "/metrics", "the exporter");
    let own_text = String::from_utf8_lossy(&http_get(metrics_port, "/metrics").2).to_string();
    let (exported, own) = (families(&exported_text), families(&own_text));
    // The help texts too: a dashboard's tooltips read the same.
    for help in own_text.lines().filter(|l| l.starts_with("# HELP redis_")) {
        assert!(
            exported_text.lines().any(|l| l == help),
            "the exporter has no {help:?}"
        );
    }
    let value = |f: &Families, name: &str, series: &str| {
        f.get(name).and_then(|fam| fam.2.get(series)).cloned()
    };
    assert_eq!(
        value(&exported, "redis_up", "redis_up").as_deref(),
        Some("1")
    );
    assert_eq!(
        value(
            &exported,
            "redis_exporter_last_scrape_error",
            "redis_exporter_last_scrape_error{err=\"\"}"
        )
        .as_deref(),
        Some("0"),
        "the exporter's scrape of Ruvio failed"
    );
    for required in [
        "redis_up",
        "redis_instance_info",
        "redis_connected_clients",
        "redis_blocked_clients",
        "redis_commands_total",
        "redis_commands_duration_seconds_total",
        "redis_commands_processed_total",
        "redis_memory_used_bytes",
        "redis_db_keys",
        "redis_db_keys_expiring",
        "redis_keyspace_hits_total",
        "redis_keyspace_misses_total",
        "redis_uptime_in_seconds",
        "redis_expired_keys_total",
        "redis_evicted_keys_total",
        "redis_net_input_bytes_total",
        "redis_errors_total",
        "redis_pubsub_channels",
        "redis_mem_fragmentation_ratio",
        "redis_rdb_last_save_timestamp_seconds",
        "redis_latency_percentiles_usec",
    ] {
        assert!(own.contains_key(required), "the endpoint lacks {required}");
    }
    // The latency histogram: SET's +Inf bucket counts every SET the histograms saw.
    let count = value(
        &own,
        "ruvio_command_latency_seconds_count",
        "ruvio_command_latency_seconds_count{cmd=\"set\"}",
    );
    let inf = value(
        &own,
        "ruvio_command_latency_seconds_bucket",
        "ruvio_command_latency_seconds_bucket{cmd=\"set\",le=\"+Inf\"}",
    );
    assert!(count.is_some() && count == inf, "{count:?} {inf:?}");
    for (name, (kind, labels, _)) in own.iter().filter(|(n, _)| n.starts_with("redis_")) {
        let Some((exported_kind, exported_labels, _)) = exported.get(name) else {
            panic!("the endpoint serves {name}, which the exporter does not produce");
        };
        assert_eq!(kind, exported_kind, "type of {name}");
        assert_eq!(labels, exported_labels, "label names of {name}");
    }
    // Values nothing changes between the two scrapes agree.
    for (name, series) in [
        ("redis_db_keys", "redis_db_keys{db=\"db0\"}"),
        (
            "redis_db_keys_expiring",
            "redis_db_keys_expiring{db=\"db0\"}",
        ),
        ("redis_db_keys", "redis_db_keys{db=\"db15\"}"),
        ("redis_commands_total", "redis_commands_total{cmd=\"set\"}"),
        ("redis_keyspace_misses_total", "redis_keyspace_misses_total"),
        ("redis_config_maxclients", "redis_config_maxclients"),
        ("redis_pubsub_channels", "redis_pubsub_channels"),
        ("redis_pubsub_patterns", "redis_pubsub_patterns"),
        (
            "redis_rdb_last_save_timestamp_seconds",
            "redis_rdb_last_save_timestamp_seconds",
        ),
    ] {
        // Go writes large values in exponent form (1.796377456e+09): compare numbers.
        let number = |f: &Families| value(f, name, series).map(|v| v.parse::<f64>().unwrap());
        let ours = number(&own);
        assert!(ours.is_some(), "the endpoint lacks {series}");
        assert_eq!(ours, number(&exported), "{series}");
    }
    assert_eq!(
        value(&own, "redis_pubsub_channels", "redis_pubsub_channels").as_deref(),
        Some("1")
    );
    assert_eq!(
        value(&own, "redis_db_keys", "redis_db_keys{db=\"db0\"}").as_deref(),
        Some("4")
    );
    for shard in ["0", "1"] {
        let series = format!("ruvio_keys{{shard=\"{shard}\"}}");
        assert_eq!(
            value(&own, "ruvio_keys", &series).as_deref(),
            Some("2"),
            "{series}"
        );
    }
}

/// Parses the text with `prometheus_client` and prints each sample as JSON lines.
const PARSE_PY: &str = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        print(json.dumps([family.name, family.type, s.name, s.labels, s.value]))
"#;

#[test]
fn prometheus_client_parses_the_text() {
    const TEST: &str = "prometheus_client_parses_the_text";
    let Some(python) = require_tool(TEST, "python3") else {
        return;
    };
    let (server, metrics_port) = server_with_endpoint();
    let mut conn = server.raw();
    conn.cmd(&["SET", "k", "v"]);
    // An error code with a quote and a backslash: a label value to escape.
    let reply = conn.cmd(&["EVAL", "error({err='MY\"CO\\\\DE oops'})", "0"]);
    assert!(reply.starts_with(b"-MY\"CO\\DE oops"), "{}", show(&reply));
    // The shard the client is on publishes its tables on its next tick (10 ms).
    let deadline = Instant::now() + Duration::from_secs(5);
    let (status, head, body) = loop {
        let (status, head, body) = http_get(metrics_port, "/metrics");
        let text = String::from_utf8_lossy(&body);
        let ready = text.contains("redis_commands_total{cmd=\"set\"} 1\n")
            && text.contains("redis_errors_total{err=");
        if ready || Instant::now() > deadline {
            break (status, head, body);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status, 200);
    assert!(
        head.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8"),
        "{head}"
    );
    let mut child = Command::new(python)
        .args(["-c", PARSE_PY])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    child.stdin.take().unwrap().write_all(&body).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "prometheus_client: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let samples: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let find = |sample: &str, label: &str, value: &str| {
        samples
            .iter()
            .find(|s| s[2] == sample && s[3][label] == value)
            .unwrap_or_else(|| panic!("no {sample}{{{label}={value:?}}} in the parse"))
            .clone()
    };
    let calls = find("redis_commands_total", "cmd", "set");
    assert_eq!(
        (calls[1].as_str(), calls[4].as_f64()),
        (Some("counter"), Some(1.0))
    );
    let errors = find("redis_errors_total", "err", "MY\"CO\\DE");
    assert_eq!(errors[4].as_f64(), Some(1.0));
    let keys = find("ruvio_keys", "shard", "0");
    assert_eq!(keys[1], "gauge");
    let total_keys: f64 = samples
        .iter()
        .filter(|s| s[2] == "ruvio_keys")
        .map(|s| s[4].as_f64().unwrap())
        .sum();
    assert_eq!(total_keys, 1.0);
    let up = samples
        .iter()
        .find(|s| s[2] == "redis_up")
        .expect("redis_up");
    assert_eq!(up[4].as_f64(), Some(1.0));
}

#[test]
fn prometheus_scrapes_the_endpoint_and_answers_promql() {
    const TEST: &str = "prometheus_scrapes_the_endpoint_and_answers_promql";
    let Some(prometheus) = require_tool(TEST, "prometheus") else {
        return;
    };
    let (server, metrics_port) = server_with_endpoint();
    let dir = std::env::temp_dir().join(format!(
        "ruvio-prometheus-{}-{metrics_port}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: ruvio\n    static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n"
        ),
    )
    .unwrap();
    let prometheus_port = free_ports(1, false);
    let _prometheus = Guard(
        Command::new(prometheus)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{prometheus_port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus"),
    );
    // Load on both shards while Prometheus scrapes.
    let stop = Arc::new(AtomicBool::new(false));
    let server = Arc::new(server);
    let load = {
        let (stop, server) = (stop.clone(), server.clone());
        std::thread::spawn(move || {
            // A connection on each shard: a shard counts the commands its
            // clients send.
            let mut conns = [conn_on_shard(&server, 0), conn_on_shard(&server, 1)];
            while !stop.load(Ordering::Relaxed) {
                for conn in &mut conns {
                    conn.cmd(&["SET", "k", "v"]);
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let query = "/api/v1/query?query=rate%28ruvio_commands_processed_total%5B5s%5D%29";
    let deadline = Instant::now() + Duration::from_secs(25);
    let rates = loop {
        let body = fetch_when_up(prometheus_port, query, "prometheus");
        let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(answer["status"], "success", "{body}");
        let result = answer["data"]["result"].as_array().unwrap().clone();
        let rates: BTreeMap<String, f64> = result
            .iter()
            .map(|r| {
                let shard = r["metric"]["shard"].as_str().unwrap().to_string();
                (shard, r["value"][1].as_str().unwrap().parse().unwrap())
            })
            .collect();
        if rates.len() == 2 && rates.values().all(|&r| r > 0.0) {
            break rates;
        }
        assert!(
            Instant::now() < deadline,
            "no rate of both shards yet: {body}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    stop.store(true, Ordering::Relaxed);
    load.join().unwrap();
    eprintln!("rate(ruvio_commands_processed_total[5s]) by shard: {rates:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_page_draws_every_chart_in_chromium() {
    const TEST: &str = "the_page_draws_every_chart_in_chromium";
    let Some(chromium) = require_tool(TEST, "chromium") else {
        return;
    };
    let (server, metrics_port) = server_with_endpoint();
    let (status, head, body) = http_get(metrics_port, "/");
    assert_eq!(status, 200);
    assert!(head.contains("Content-Type: text/html"), "{head}");
    let page = String::from_utf8(body).unwrap();
    // Self-contained: no resource from anywhere but this server.
    let elsewhere = page.replace("http://www.w3.org/2000/svg", "");
    assert!(
        !elsewhere.contains("http://")
            && !elsewhere.contains("https://")
            && !elsewhere.contains("//cdn")
    );
    assert!(
        !page.contains("<script src") && !page.contains("<link"),
        "an external resource"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (stop, port) = (stop.clone(), server.port());
        std::thread::spawn(move || {
            let mut conn = RawConn::connect(port);
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                conn.cmd(&["SET", &format!("page:{}", n % 500), "v"]);
                conn.cmd(&["GET", "page:1"]);
                n += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let profile = std::env::temp_dir().join(format!(
        "ruvio-chromium-{}-{metrics_port}",
        std::process::id()
    ));
    let url = format!("http://127.0.0.1:{metrics_port}/");
    let chromium_run = |extra: &[&str]| {
        Command::new(&chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--virtual-time-budget=6000",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(extra)
            .arg(&url)
            .stderr(Stdio::null())
            .output()
            .expect("run chromium")
    };
    let dom = String::from_utf8_lossy(&chromium_run(&["--dump-dom"]).stdout).to_string();
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("metrics-page.png");
    let _ = std::fs::remove_file(&shot);
    chromium_run(&[
        &format!("--screenshot={}", shot.display()),
        "--window-size=1280,900",
    ]);
    stop.store(true, Ordering::Relaxed);
    load.join().unwrap();
    let _ = std::fs::remove_dir_all(&profile);
    assert!(
        dom.contains("2 shard(s), forward mode"),
        "the status line: {dom}"
    );
    for chart in ["ops", "memory", "clients", "keys", "commands", "latency"] {
        let start = dom
            .find(&format!("id=\"chart-{chart}\""))
            .unwrap_or_else(|| panic!("no chart {chart} in {dom}"));
        let section = &dom[start..];
        let section = &section[..section[1..]
            .find("id=\"chart-")
            .map_or(section.len(), |e| e + 1)];
        let drawn = section
            .split("<polyline points=\"")
            .skip(1)
            .map(|p| {
                p.split('"')
                    .next()
                    .unwrap()
                    .split(' ')
                    .filter(|s| !s.is_empty())
                    .count()
            })
            .max()
            .unwrap_or(0);
        assert!(
            drawn >= 2,
            "chart {chart} drew no line of two points: {section}"
        );
    }
    for series in [
        "data-series=\"shard 0\"",
        "data-series=\"shard 1\"",
        "data-series=\"set\"",
    ] {
        assert!(dom.contains(series), "no {series} drawn");
    }
    let png = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
    assert!(
        png > 10_000,
        "the screenshot {} is missing or blank ({png} bytes)",
        shot.display()
    );
}

/// Sends `bytes` on a fresh connection and reads until the server closes it.
fn exchange(port: u16, bytes: &[u8]) -> Vec<u8> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let _ = stream.write_all(bytes);
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    response
}

#[test]
fn bad_http_gets_an_answer_and_the_shard_goes_on() {
    let (server, port) = server_with_endpoint();
    let mut conn = server.raw();
    conn.cmd(&["SET", "k", "v"]);
    assert_eq!(
        conn.cmd(&["CONFIG", "GET", "metrics-port"]),
        encode(&["metrics-port".to_string(), port.to_string()])
    );
    // A slow client: half a request, held (its deadline closes it later).
    let mut slow = TcpStream::connect(("127.0.0.1", port)).unwrap();
    slow.write_all(b"GET /metr").unwrap();
    let slow_since = Instant::now();

    let starts = |response: &[u8], head: &str| {
        assert!(
            response.starts_with(head.as_bytes()),
            "expected {head}, got {}",
            show(response)
        );
    };
    starts(
        &exchange(port, b"\x00\x01garbage\r\n\r\n"),
        "HTTP/1.1 400 Bad Request\r\n",
    );
    starts(
        &exchange(port, b"POST /metrics HTTP/1.1\r\n\r\n"),
        "HTTP/1.1 405 Method Not Allowed\r\n",
    );
    starts(
        &exchange(port, b"GET /metrics HTTP/3\r\n\r\n"),
        "HTTP/1.1 505 ",
    );
    starts(
        &exchange(
            port,
            b"GET /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
        ),
        "HTTP/1.1 400 ",
    );
    let huge = format!(
        "GET /metrics HTTP/1.1\r\nX-Big: {}\r\n\r\n",
        "a".repeat(64 << 10)
    );
    starts(&exchange(port, huge.as_bytes()), "HTTP/1.1 431 ");
    assert_eq!(http_get(port, "/nowhere").0, 404);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..100 {
        let len = (rng % 300) as usize;
        let junk: Vec<u8> = (0..len)
            .map(|_| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                (rng >> 24) as u8
            })
            .chain(*b"\r\n\r\n")
            .collect();
        let response = exchange(port, &junk);
        assert!(
            response.starts_with(b"HTTP/1.1 4") || response.starts_with(b"HTTP/1.1 505"),
            "{}",
            show(&response)
        );
    }

    // Keep-alive and pipelining: three requests on one connection, answered in order.
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\n\r\nHEAD / HTTP/1.1\r\n\r\nGET /x HTTP/1.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut all = Vec::new();
    stream.read_to_end(&mut all).unwrap();
    let text = String::from_utf8_lossy(&all);
    let statuses: Vec<&str> = text
        .match_indices("HTTP/1.1 ")
        .map(|(i, _)| &text[i + 9..i + 12])
        .collect();
    assert_eq!(statuses, ["200", "200", "404"], "{text}");
    assert!(!text.contains("<html"), "HEAD sent a body");

    // More connections than the endpoint keeps: the extra ones are closed, the
    // rest still answer.
    let many: Vec<TcpStream> = (0..40)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut closed = 0;
    for mut s in many {
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut byte = [0u8; 1];
        if matches!(s.read(&mut byte), Ok(0)) {
            closed += 1;
        }
    }
    assert!(
        closed >= 40 - 32,
        "only {closed} of 40 connections were refused"
    );
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(http_get(port, "/metrics").0, 200);
    assert_eq!(conn.cmd(&["GET", "k"]), b"$1\r\nv\r\n");

    // The slow client's request never completed: its deadline closed it.
    slow.set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    let mut rest = Vec::new();
    let _ = slow.read_to_end(&mut rest);
    let held = slow_since.elapsed();
    assert!(rest.is_empty(), "the slow client got {}", show(&rest));
    assert!(
        held >= Duration::from_secs(5) && held < Duration::from_secs(12),
        "held {held:?}"
    );
    assert_eq!(conn.cmd(&["PING"]), b"+PONG\r\n");
}

#[test]
fn per_shard_mode_reports_the_whole_process() {
    let metrics_port = free_ports(1, false);
    let server = Server::ruvio_with(
        PortMode::PerShard,
        2,
        &["--metrics-port", &metrics_port.to_string()],
    );
    for (shard, key) in keys_per_shard("ps", 2).iter().enumerate() {
        let mut conn = RawConn::connect(server.ports[shard]);
        assert_eq!(conn.cmd(&["SET", key, "v"]), b"+OK\r\n");
    }
    // The other shard publishes on its next tick (10 ms; longer on a busy host).
    let deadline = Instant::now() + Duration::from_secs(5);
    let own = loop {
        let own = families(&String::from_utf8_lossy(
            &http_get(metrics_port, "/metrics").2,
        ));
        let keys = own
            .get("redis_db_keys")
            .and_then(|f| f.2.get("redis_db_keys{db=\"db0\"}").cloned());
        if keys.as_deref() == Some("2") || Instant::now() > deadline {
            break own;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let value = |name: &str, series: &str| own.get(name).and_then(|f| f.2.get(series)).cloned();
    assert_eq!(
        value("redis_cluster_enabled", "redis_cluster_enabled").as_deref(),
        Some("1")
    );
    assert_eq!(
        value("redis_db_keys", "redis_db_keys{db=\"db0\"}").as_deref(),
        Some("2")
    );
    for shard in ["0", "1"] {
        let keys = format!("ruvio_keys{{shard=\"{shard}\"}}");
        assert_eq!(value("ruvio_keys", &keys).as_deref(), Some("1"), "{keys}");
        let calls = format!("ruvio_commands_processed_total{{shard=\"{shard}\"}}");
        assert_ne!(
            value("ruvio_commands_processed_total", &calls).as_deref(),
            Some("0"),
            "{calls}"
        );
    }
}

#[test]
fn log_series_count_each_shards_writes_and_fsyncs() {
    let metrics_port = free_ports(1, false);
    let dir = std::env::temp_dir().join(format!(
        "ruvio-metrics-log-{}-{metrics_port}",
        std::process::id()
    ));
    let server = Server::ruvio_with(
        PortMode::Forward,
        2,
        &[
            "--metrics-port",
            &metrics_port.to_string(),
            "--durability",
            "everysec",
            "--dir",
            dir.to_str().unwrap(),
        ],
    );
    let mut conn = server.raw();
    for key in keys_per_shard("log", 2) {
        assert_eq!(conn.cmd(&["SET", &key, "a value to log"]), b"+OK\r\n");
    }
    let series = |name: &str, shard: usize| format!("{name}{{shard=\"{shard}\"}}");
    // everysec: each shard's fsync comes within about a second of its write.
    let deadline = Instant::now() + Duration::from_secs(8);
    let own = loop {
        let own = families(&String::from_utf8_lossy(
            &http_get(metrics_port, "/metrics").2,
        ));
        let synced = (0..2).all(|shard| {
            let fsyncs = own
                .get("ruvio_log_fsyncs_total")
                .and_then(|f| f.2.get(&series("ruvio_log_fsyncs_total", shard)));
            fsyncs.is_some_and(|n| n != "0")
        });
        if synced || Instant::now() > deadline {
            break own;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    for shard in 0..2 {
        let value = |name: &str| -> f64 {
            own.get(name)
                .and_then(|f| f.2.get(&series(name, shard)))
                .unwrap_or_else(|| panic!("no {name} of shard {shard}"))
                .parse()
                .unwrap()
        };
        assert!(
            value("ruvio_log_written_bytes_total") >= 14.0,
            "shard {shard}"
        );
        assert!(
            value("ruvio_log_fsyncs_total") >= 1.0,
            "shard {shard}: no fsync counted"
        );
        assert!(
            value("ruvio_log_fsync_seconds_total") > 0.0,
            "shard {shard}"
        );
    }
    assert_eq!(
        own.get("redis_aof_enabled")
            .and_then(|f| f.2.get("redis_aof_enabled"))
            .map(String::as_str),
        Some("1")
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mesh_series_count_forwarded_work() {
    let (server, metrics_port) = server_with_endpoint();
    let mut conn = conn_on_shard(&server, 0);
    let key = key_on_shard("far", 1, 2);
    for _ in 0..10 {
        assert_eq!(conn.cmd(&["GET", &key]), b"$-1\r\n");
    }
    let value = |own: &Families, name: &str, shard: usize| -> u64 {
        own.get(name)
            .and_then(|f| f.2.get(&format!("{name}{{shard=\"{shard}\"}}")))
            .unwrap_or_else(|| panic!("no {name} of shard {shard}"))
            .parse()
            .unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let own = families(&String::from_utf8_lossy(
            &http_get(metrics_port, "/metrics").2,
        ));
        let sent = value(&own, "ruvio_mesh_messages_sent_total", 0);
        let received = value(&own, "ruvio_mesh_messages_received_total", 1);
        // At least one batch there, and its replies back (ten GETs, maybe batched).
        if sent >= 1 && received >= 1 && value(&own, "ruvio_mesh_messages_received_total", 0) >= 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "sent {sent}, received {received}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
