//! The live page `GET /` serves: one self-contained HTML file (`page.html`, inline
//! script and SVG, no network resource but this server's `/metrics`) that polls
//! `/metrics` every second and draws ops/s per shard, memory, clients, keys per
//! shard and the busiest commands' call rates.
//!
//! Why it parses the Prometheus text instead of a JSON twin: one endpoint to keep
//! right, and the page shows exactly what a scraper sees. Where a chart is added
//! (per-command p50/p99 from the latency histograms) is written in the page's
//! `CHARTS` list.

/// The page, compiled into the binary.
pub const PAGE_HTML: &str = include_str!("page.html");
