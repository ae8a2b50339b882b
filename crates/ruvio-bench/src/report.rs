//! Turning phase results into a human table, JSON, or redis-benchmark's CSV.
//!
//! The CSV form matches redis-benchmark's `--csv` columns so a script that parses
//! one generator's output can parse the other's.

use serde_json::{json, Value};

use crate::run::PhaseResult;

/// One reported test.
pub struct TestReport {
    /// Test name (`SET`, or the command text).
    pub name: String,
    /// The template as written.
    pub command: String,
    /// The measurement.
    pub result: PhaseResult,
}

impl TestReport {
    /// Completed requests per second.
    pub fn rps(&self) -> f64 {
        self.result.requests as f64 / self.result.elapsed.as_secs_f64().max(1e-9)
    }

    /// Latency quantile in milliseconds.
    fn ms(&self, q: f64) -> f64 {
        self.result.latency_ns.value_at_quantile(q) as f64 / 1e6
    }

    /// Every latency figure the reports show, in milliseconds.
    fn latency_ms(&self) -> Value {
        let h = &self.result.latency_ns;
        json!({
            "min": h.min() as f64 / 1e6,
            "mean": h.mean() / 1e6,
            "p50": self.ms(0.50),
            "p90": self.ms(0.90),
            "p95": self.ms(0.95),
            "p99": self.ms(0.99),
            "p999": self.ms(0.999),
            "max": h.max() as f64 / 1e6,
        })
    }

    /// The JSON object for this test.
    pub fn to_json(&self) -> Value {
        let cpu_s = self.result.cpu.as_secs_f64();
        json!({
            "name": self.name,
            "command": self.command,
            "requests": self.result.requests,
            "seconds": self.result.elapsed.as_secs_f64(),
            "rps": self.rps(),
            "errors": self.result.errors,
            "first_error": self.result.first_error,
            "invalidations": self.result.invalidations,
            "latency_ms": self.latency_ms(),
            "client_cpu_s": cpu_s,
            "client_cpu_us_per_request": cpu_s * 1e6 / (self.result.requests.max(1) as f64),
        })
    }
}

/// The whole run as JSON: settings first, then each test.
pub fn json_report(settings: Value, preload: Option<&TestReport>, tests: &[TestReport]) -> String {
    let doc = json!({
        "generator": settings,
        "preload": preload.map(TestReport::to_json),
        "tests": tests.iter().map(TestReport::to_json).collect::<Vec<_>>(),
    });
    serde_json::to_string_pretty(&doc).expect("JSON values serialize")
}

/// redis-benchmark's `--csv` layout.
pub fn csv_report(tests: &[TestReport]) -> String {
    let mut out = String::from(
        "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\
         \"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n",
    );
    for t in tests {
        let h = &t.result.latency_ns;
        out += &format!(
            "\"{}\",\"{:.2}\",\"{:.3}\",\"{:.3}\",\"{:.3}\",\"{:.3}\",\"{:.3}\",\"{:.3}\"\n",
            t.name.replace('"', "'"),
            t.rps(),
            h.mean() / 1e6,
            h.min() as f64 / 1e6,
            t.ms(0.5),
            t.ms(0.95),
            t.ms(0.99),
            h.max() as f64 / 1e6
        );
    }
    out
}

/// A table for people: one line per test.
pub fn human_report(tests: &[TestReport]) -> String {
    let name_w = tests
        .iter()
        .map(|t| t.name.len())
        .max()
        .unwrap_or(4)
        .clamp(4, 48);
    let mut out = format!(
        "{:<name_w$}  {:>12} {:>10} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>8} {:>9}\n",
        "test",
        "rps",
        "requests",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms",
        "errors",
        "cpu us",
        "cpu us/rq"
    );
    for t in tests {
        let cpu_us = t.result.cpu.as_secs_f64() * 1e6;
        out += &format!(
            "{:<name_w$}  {:>12.0} {:>10} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>9.3} {:>9} {:>8.0} {:>9.3}\n",
            truncate(&t.name, name_w),
            t.rps(),
            t.result.requests,
            t.ms(0.5),
            t.ms(0.9),
            t.ms(0.99),
            t.ms(0.999),
            t.result.latency_ns.max() as f64 / 1e6,
            t.result.errors,
            cpu_us,
            cpu_us / t.result.requests.max(1) as f64
        );
        if let Some(e) = &t.result.first_error {
            out += &format!("  first error: {e}\n");
        }
    }
    out
}

/// redis-benchmark's quiet line: `SET: 123456.78 requests per second, p50=0.123 msec`.
pub fn quiet_report(tests: &[TestReport]) -> String {
    tests
        .iter()
        .map(|t| {
            format!(
                "{}: {:.2} requests per second, p50={:.3} msec\n",
                t.name,
                t.rps(),
                t.ms(0.5)
            )
        })
        .collect()
}

fn truncate(s: &str, width: usize) -> &str {
    match s.char_indices().nth(width) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}
