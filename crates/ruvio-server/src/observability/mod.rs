//! Observability: what an operator reads to see what the server does.
//!
//! Built: MONITOR's feed ([`monitor`]: the line format and the per-thread buffer
//! of lines; the shard hands them to connections in `shard::monitor`).
//! To come (issue "Observability: SLOWLOG, LATENCY, MONITOR"): SLOWLOG and
//! LATENCY per shard, merged on read; per-command latency histograms (INFO
//! latencystats); the Prometheus endpoint and the live page. It sits beside
//! `stats` (counters it extends) and below `shard::exec`, which hands it each
//! command's timing.

pub mod monitor;
