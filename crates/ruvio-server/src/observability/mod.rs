//! Observability (not built yet; issue "Observability: SLOWLOG, LATENCY, MONITOR").
//!
//! Will own: SLOWLOG and LATENCY per shard, merged on read; per-command latency
//! histograms (INFO latencystats); MONITOR's feed; the Prometheus endpoint and the
//! live page. It will sit beside `stats` (counters it extends) and below
//! `shard::exec`, which hands it each command's timing.
