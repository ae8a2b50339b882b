//! Observability: what an operator reads about the running server.
//!
//! Owns MONITOR's feed ([`monitor`]: the line format and the per-thread buffer
//! of lines; the shard hands them to connections in `shard::monitor`), and the
//! Prometheus endpoint and the live page: [`metrics`] (the numbers a scrape
//! reports and their text exposition), [`http`] (the endpoint's HTTP/1.1,
//! without sockets) and [`page`] (the HTML of `GET /`). The shard layer serves
//! them on shard 0's own ring and fills [`metrics::Snapshot`] from the gauges
//! every shard publishes (`shard/metrics.rs`), so this floor names no shard.
//!
//! Still to come (issue "Observability: SLOWLOG, LATENCY, MONITOR"): SLOWLOG and
//! LATENCY per shard, merged on read; per-command latency histograms (INFO
//! latencystats). They sit beside `stats` (counters they extend) and below
//! `shard::exec`, which hands them each command's timing.

pub mod http;
pub mod metrics;
pub mod monitor;
pub mod page;
