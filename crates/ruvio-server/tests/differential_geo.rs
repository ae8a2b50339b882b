//! Differential test of the geo family: seeded random sequences of every geo command
//! go to a real `redis-server` 7.0 and to Ruvio (forward mode, 1 and 2 shards); the raw
//! RESP replies must be identical, command by command. Modelled on
//! differential_zsets.rs.
//!
//! # Key space
//!
//! Two groups of keys, each sharing a hash tag (one group per shard when there are 2):
//! per group three geo keys, a string key (WRONGTYPE) and two STORE destinations.
//! GEOSEARCHSTORE and GEORADIUS ... STORE mix the groups freely: forward mode borrows
//! the keys across shards.
//!
//! # Points
//!
//! Members `m0`..`m299` (so GEOADD also moves members), placed:
//! - in clusters of ±0.3° around Palermo, the equator at 0°, both sides of the
//!   antimeridian (±179.9°), and near the latitude limits (±84.9°), dense enough for
//!   sets past `zset-max-listpack-entries` and cells with many members;
//! - anywhere (sparse points over the whole range);
//! - exactly on the limits (±180, ±85.05112878, whose hash has a 53rd bit);
//! - now and then out of range or not a number (Redis's errors), and a ZADD of
//!   scores that are no geohash (-1, 1.5, 1e300, inf), which GEOPOS and GEOHASH decode
//!   as Redis's build does.
//!
//! No two members of a key share a position, so no two search distances tie (with
//! ties, a sorted reply's order, and which member COUNT keeps, would be the sort
//! algorithm's: Redis's partial `pqsort` is not stable): random coordinates have 7
//! decimals; each limit point and each odd score belongs to one member of its own
//! (`edge<i>`, `odd<i>`); STOREDIST results (distances as scores, which decode to
//! positions near one corner) go to keys of their own that are never searched,
//! only compared (after the STORE and at the end).
//!
//! # Searches
//!
//! Every form (GEORADIUS, GEORADIUS_RO, GEORADIUSBYMEMBER, GEORADIUSBYMEMBER_RO,
//! GEOSEARCH, GEOSEARCHSTORE) with centres from the clusters, members (present or
//! not), radii and boxes from 0 to `inf` in every unit, ASC/DESC or none, COUNT with
//! and without ANY, WITHCOORD/WITHDIST/WITHHASH, STORE/STOREDIST (and their errors).
//! A STORE is followed by `ZRANGE dst 0 -1 WITHSCORES`, so the stored scores (the
//! geohash, or STOREDIST's distance as a double) are compared exactly too.
//!
//! # Comparison rules (the whole allowlist)
//!
//! None: every reply must be byte-equal. Even a search without ASC/DESC, whose order
//! Redis leaves undefined, must come in Redis's order (the nine cells in Redis's
//! order, each by score): Ruvio walks the same cells in the same order, which also
//! decides which members COUNT ... ANY returns. Redis 7.0.15 formats distances with
//! `fixedpoint_d2string` as 7.2 does (since 7.0.6), so WITHDIST and GEODIST need no
//! rule either.
//!
//! At the end the state is compared: DBSIZE, and TYPE, ZRANGE 0 -1 WITHSCORES and
//! OBJECT ENCODING of every key.
//!
//! Reproduce a failure with `RUVIO_DIFF_SEED=<seed> RUVIO_DIFF_COMMANDS=<n>`;
//! `RUVIO_DIFF_TRACE=1` prints every command with Redis's reply.

mod common;

use common::*;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};

/// Commands per sequence unless `RUVIO_DIFF_COMMANDS` says otherwise: 8 seeds of
/// this many take about 5 s per shard count in a debug build.
const COMMANDS_PER_SEED: usize = 4000;
/// Odd seeds one step at a time, even ones pipelined; those with `seed % 4` of 2
/// or 3 in RESP3.
const SEEDS: &[u64] = &[1, 2, 3, 4, 5, 6, 7, 8];
/// Largest pipeline sent in one write.
const PIPELINE_MAX: usize = 40;
/// Distinct members.
const MEMBERS: u32 = 300;

/// Cluster centres: Palermo, the equator, both sides of the antimeridian, near
/// the latitude limits.
const CLUSTERS: &[(f64, f64)] = &[
    (13.361389, 38.115556),
    (0.0, 0.0),
    (179.9, 10.0),
    (-179.9, -10.0),
    (30.0, 84.9),
    (-60.0, -84.9),
];
const LIMIT_POINTS: &[(&str, &str)] = &[
    ("180", "85.05112878"),
    ("-180", "-85.05112878"),
    ("180", "0"),
    ("-180", "0"),
    ("0", "85.05112878"),
    ("0", "-85.05112878"),
    ("179.9999999", "85.0511287"),
];
const BAD_COORDS: &[(&str, &str)] = &[
    ("180.0000001", "0"),
    ("0", "85.05112879"),
    ("-181", "-86"),
    ("inf", "0"),
    ("0", "-inf"),
    ("x", "0"),
    ("0", ""),
    ("nan", "1"),
    ("1e400", "0"),
];
const RADII: &[&str] = &[
    "0", "1", "50", "500", "5000", "30000", "200000", "2000000", "20000000", "inf",
];
const BAD_RADII: &[&str] = &["-1", "x", "", "1e400", "nan"];
const UNITS: &[&str] = &["m", "m", "km", "ft", "mi", "KM", "Mi"];
const BAD_UNITS: &[&str] = &["cm", "", "meters"];
const COUNTS: &[&str] = &["1", "2", "3", "10", "50", "1000"];
const BAD_COUNTS: &[&str] = &["0", "-1", "x"];
const ODD_SCORES: &[&str] = &["-1", "1.5", "1e300", "inf", "-inf", "4503599627370496", "2"];

struct Group {
    geos: Vec<String>,
    string: String,
    dsts: Vec<String>,
    /// STOREDIST destinations (never searched, see the module doc).
    dists: Vec<String>,
}

/// Random geo commands over a small key space.
struct Generator {
    rng: StdRng,
    groups: Vec<Group>,
}

impl Generator {
    fn new(seed: u64) -> Generator {
        let mut groups = Vec::new();
        for shard in 0..2 {
            let tag = hash_tag_on_shard(shard, 2);
            groups.push(Group {
                geos: (0..3).map(|i| format!("{{{tag}}}g{i}")).collect(),
                string: format!("{{{tag}}}s"),
                dsts: (0..2).map(|i| format!("{{{tag}}}d{i}")).collect(),
                dists: (0..2).map(|i| format!("{{{tag}}}dist{i}")).collect(),
            });
        }
        Generator {
            rng: StdRng::seed_from_u64(seed),
            groups,
        }
    }

    fn pick<'a>(&mut self, items: &'a [&'a str]) -> &'a str {
        items.choose(&mut self.rng).expect("non-empty")
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    fn all_keys(&self) -> Vec<String> {
        self.groups
            .iter()
            .flat_map(|g| {
                let mut keys = g.geos.clone();
                keys.push(g.string.clone());
                keys.extend(g.dsts.iter().cloned());
                keys.extend(g.dists.iter().cloned());
                keys
            })
            .collect()
    }

    /// A source key: a geo key mostly, else a destination, the string or a missing key.
    fn key(&mut self) -> String {
        let g = self.rng.random_range(0..self.groups.len());
        match self.rng.random_range(0..100) {
            0..88 => {
                let i = self.rng.random_range(0..3);
                self.groups[g].geos[i].clone()
            }
            88..93 => {
                let i = self.rng.random_range(0..2);
                self.groups[g].dsts[i].clone()
            }
            93..97 => self.groups[g].string.clone(),
            _ => format!("{{{}}}missing", g),
        }
    }

    /// A STORE destination: a destination key mostly, sometimes a geo key or the
    /// string (STORE replaces any type); a key of its own for STOREDIST.
    fn dst(&mut self, storedist: bool) -> String {
        let g = self.rng.random_range(0..self.groups.len());
        if storedist {
            let i = self.rng.random_range(0..2);
            return self.groups[g].dists[i].clone();
        }
        match self.rng.random_range(0..10) {
            0..7 => {
                let i = self.rng.random_range(0..2);
                self.groups[g].dsts[i].clone()
            }
            7..9 => {
                let i = self.rng.random_range(0..3);
                self.groups[g].geos[i].clone()
            }
            _ => self.groups[g].string.clone(),
        }
    }

    fn member(&mut self) -> String {
        match self.rng.random_range(0..100) {
            0..3 => "absent".into(),
            3..6 => format!("edge{}", self.rng.random_range(0..LIMIT_POINTS.len())),
            6..8 => format!("odd{}", self.rng.random_range(0..ODD_SCORES.len())),
            _ => format!("m{}", self.rng.random_range(0..MEMBERS)),
        }
    }

    /// `longitude latitude` text with 7 decimals near a cluster.
    fn near(&mut self, spread: f64) -> (String, String) {
        let &(lon, lat) = CLUSTERS.choose(&mut self.rng).expect("clusters");
        let lon = lon + self.rng.random_range(-spread..spread);
        let lat = lat + self.rng.random_range(-spread..spread);
        let lon = if lon > 180.0 {
            lon - 360.0
        } else if lon < -180.0 {
            lon + 360.0
        } else {
            lon
        };
        let lat = lat.clamp(-85.05, 85.05);
        (format!("{lon:.7}"), format!("{lat:.7}"))
    }

    /// A point for GEOADD and its member: mostly clustered, some sparse, a few on
    /// the limits (each with its own member).
    fn point(&mut self) -> (String, String, String) {
        let (lon, lat) = match self.rng.random_range(0..100) {
            0..75 => self.near(0.3),
            75..92 => (
                format!("{:.7}", self.rng.random_range(-180.0..180.0)),
                format!("{:.7}", self.rng.random_range(-85.05..85.05)),
            ),
            92..97 => {
                let i = self.rng.random_range(0..LIMIT_POINTS.len());
                let (a, b) = LIMIT_POINTS[i];
                return (a.into(), b.into(), format!("edge{i}"));
            }
            _ => {
                let &(a, b) = BAD_COORDS.choose(&mut self.rng).expect("coords");
                (a.into(), b.into())
            }
        };
        let mut member = self.member();
        if member.starts_with("edge") || member.starts_with("odd") {
            member = "absent".into();
        }
        (lon, lat, member)
    }

    /// A search centre: near a cluster, sometimes a limit point or bad.
    fn centre(&mut self) -> (String, String) {
        match self.rng.random_range(0..100) {
            0..88 => self.near(0.4),
            88..96 => {
                let &(a, b) = LIMIT_POINTS.choose(&mut self.rng).expect("points");
                (a.into(), b.into())
            }
            _ => {
                let &(a, b) = BAD_COORDS.choose(&mut self.rng).expect("coords");
                (a.into(), b.into())
            }
        }
    }

    fn radius(&mut self) -> String {
        if self.chance(0.03) {
            self.pick(BAD_RADII).into()
        } else if self.chance(0.2) {
            format!("{:.3}", self.rng.random_range(0.0..100_000.0))
        } else {
            self.pick(RADII).into()
        }
    }

    fn unit(&mut self) -> String {
        if self.chance(0.02) {
            self.pick(BAD_UNITS).into()
        } else {
            self.pick(UNITS).into()
        }
    }

    fn geoadd(&mut self) -> Cmd {
        let mut out = vec!["GEOADD".to_string(), self.key()];
        if self.chance(0.2) {
            for _ in 0..self.rng.random_range(1..=2) {
                out.push(self.pick(&["NX", "XX", "CH", "ch"]).into());
            }
        }
        let n = match self.rng.random_range(0..10) {
            0 => self.rng.random_range(10..=40),
            _ => self.rng.random_range(1..=5),
        };
        for _ in 0..n {
            let (lon, lat, member) = self.point();
            out.extend([lon, lat, member]);
        }
        if self.chance(0.02) {
            out.push("1".into());
        }
        words(out)
    }

    /// The options every search form shares.
    fn options(&mut self, out: &mut Vec<String>, with: bool) {
        let mut opts: Vec<Vec<String>> = Vec::new();
        if self.chance(0.6) {
            opts.push(vec![self.pick(&["ASC", "DESC", "asc", "desc"]).into()]);
        }
        if self.chance(0.5) {
            let count = if self.chance(0.05) {
                self.pick(BAD_COUNTS)
            } else {
                self.pick(COUNTS)
            };
            let mut c = vec!["COUNT".to_string(), count.to_string()];
            if self.chance(0.3) {
                c.push("ANY".into());
            }
            opts.push(c);
        } else if self.chance(0.02) {
            opts.push(vec!["ANY".into()]);
        }
        if with || self.chance(0.03) {
            for w in ["WITHCOORD", "WITHDIST", "WITHHASH"] {
                if self.chance(0.4) {
                    opts.push(vec![w.into()]);
                }
            }
        }
        // Redis reads options in any order.
        for i in (1..opts.len()).rev() {
            let j = self.rng.random_range(0..=i);
            opts.swap(i, j);
        }
        out.extend(opts.into_iter().flatten());
    }

    fn centre_and_shape(&mut self, out: &mut Vec<String>) {
        let mut parts: Vec<Vec<String>> = Vec::new();
        if self.chance(0.97) {
            if self.chance(0.3) {
                parts.push(vec!["FROMMEMBER".into(), self.member()]);
            } else {
                let (lon, lat) = self.centre();
                parts.push(vec!["FROMLONLAT".into(), lon, lat]);
            }
        }
        if self.chance(0.97) {
            if self.chance(0.5) {
                parts.push(vec!["BYRADIUS".into(), self.radius(), self.unit()]);
            } else {
                parts.push(vec![
                    "BYBOX".into(),
                    self.radius(),
                    self.radius(),
                    self.unit(),
                ]);
            }
        }
        if self.chance(0.02) {
            parts.push(vec!["FROMMEMBER".into(), self.member()]);
        }
        if parts.len() > 1 && self.chance(0.3) {
            let last = parts.len() - 1;
            parts.swap(0, last);
        }
        out.extend(parts.into_iter().flatten());
    }

    /// A search command, then (after a STORE) the destination's contents.
    fn search(&mut self) -> Vec<Cmd> {
        let form = self.pick(&[
            "GEOSEARCH",
            "GEOSEARCH",
            "GEOSEARCH",
            "GEOSEARCHSTORE",
            "GEORADIUS",
            "GEORADIUS_RO",
            "GEORADIUSBYMEMBER",
            "GEORADIUSBYMEMBER_RO",
        ]);
        let mut out = vec![form.to_string()];
        let mut dst = None;
        let storedist = self.chance(0.4);
        if form == "GEOSEARCHSTORE" {
            let d = self.dst(storedist);
            out.push(d.clone());
            dst = Some(d);
        }
        out.push(self.key());
        match form {
            "GEOSEARCH" | "GEOSEARCHSTORE" => self.centre_and_shape(&mut out),
            "GEORADIUS" | "GEORADIUS_RO" => {
                let (lon, lat) = self.centre();
                out.extend([lon, lat, self.radius(), self.unit()]);
            }
            _ => {
                let m = self.member();
                out.extend([m, self.radius(), self.unit()]);
            }
        }
        let store_form = form == "GEOSEARCHSTORE";
        let with = !store_form && self.chance(0.5);
        self.options(&mut out, with);
        if store_form && storedist {
            out.push("STOREDIST".into());
        }
        if form.starts_with("GEORADIUS") && self.chance(0.25) {
            let d = self.dst(storedist);
            out.push(if storedist { "STOREDIST" } else { "STORE" }.into());
            out.push(d.clone());
            if !form.ends_with("_RO") {
                dst = Some(d);
            }
        }
        let mut steps = vec![words(out)];
        if let Some(d) = dst {
            steps.push(cmd(&["ZRANGE", &d, "0", "-1", "WITHSCORES"]));
        }
        steps
    }

    fn next(&mut self) -> Vec<Cmd> {
        let key = self.key();
        let w = |s: &str| s.to_string();
        let out: Vec<String> = match self.rng.random_range(0..100) {
            0..30 => return vec![self.geoadd()],
            30..36 => {
                let mut out = vec![w("GEOPOS"), key];
                for _ in 0..self.rng.random_range(1..=4) {
                    out.push(self.member());
                }
                out
            }
            36..40 => {
                let mut out = vec![w("GEOHASH"), key];
                for _ in 0..self.rng.random_range(1..=4) {
                    out.push(self.member());
                }
                out
            }
            40..46 => {
                let mut out = vec![w("GEODIST"), key, self.member(), self.member()];
                if self.chance(0.7) {
                    out.push(self.unit());
                }
                if self.chance(0.02) {
                    out.push(w("x"));
                }
                out
            }
            46..88 => return self.search(),
            88..90 => {
                let i = self.rng.random_range(0..ODD_SCORES.len());
                vec![w("ZADD"), key, w(ODD_SCORES[i]), format!("odd{i}")]
            }
            90..93 => vec![w("ZREM"), key, self.member(), self.member()],
            93..94 => vec![w("DEL"), key],
            94..96 => vec![w("TYPE"), key],
            96..98 => {
                let g = self.rng.random_range(0..2);
                vec![w("SET"), self.groups[g].string.clone(), w("v")]
            }
            _ => vec![w("ZCARD"), key],
        };
        vec![words(out)]
    }

    fn state_dump(&self) -> Vec<Cmd> {
        let mut steps = vec![cmd(&["DBSIZE"])];
        for key in self.all_keys() {
            steps.push(cmd(&["TYPE", &key]));
            steps.push(cmd(&["ZRANGE", &key, "0", "-1", "WITHSCORES"]));
            steps.push(cmd(&["OBJECT", "ENCODING", &key]));
        }
        steps
    }
}

fn words(out: Vec<String>) -> Cmd {
    out.into_iter().map(String::into_bytes).collect()
}

fn run_differential(label: &str, shards: usize) {
    let Some(servers) = DiffServers::forward(label, shards) else {
        return;
    };
    let settings = DiffSettings::from_env(SEEDS, COMMANDS_PER_SEED);
    let total = servers.each_seed(label, &settings, true, |run| {
        run.commands = settings.commands;
        let mut generator = Generator::new(run.seed);
        let mut index = 0;
        while index < settings.commands {
            let size = batch_size(&mut generator.rng, run.pipelined, PIPELINE_MAX);
            let mut batch: Vec<Cmd> = Vec::new();
            while batch.len() < size && index + batch.len() < settings.commands {
                batch.extend(generator.next());
            }
            run.batch(&batch, index, identical);
            index += batch.len();
        }
        let dump = generator.state_dump();
        run.batch(&dump, index, identical);
    });
    eprintln!("{label}: {total} replies equal");
}

#[test]
fn differential_geo_forward_1_shard() {
    run_differential("differential_geo_forward_1_shard", 1);
}

#[test]
fn differential_geo_forward_2_shards() {
    run_differential("differential_geo_forward_2_shards", 2);
}

/// GEORADIUS ... STORE a STORE b writes b, a key Redis's key specs do not name:
/// with the three keys on different shards, Ruvio still borrows b and the result
/// lands where Redis has it.
#[test]
fn repeated_store_writes_the_last_key_across_shards() {
    let label = "repeated_store_writes_the_last_key_across_shards";
    if require_redis_server(label).is_none() {
        return;
    }
    let (redis, ruvio) = (Server::redis(), Server::forward(2));
    let (mut theirs, mut ours) = (redis.raw(), ruvio.raw());
    let src = key_on_shard("src", 0, 2);
    let first = key_on_shard("first", 1, 2);
    let last = key_on_shard("last", 1, 2);
    let other = key_on_shard("other", 0, 2);
    let steps: Vec<Vec<&str>> = vec![
        vec![
            "GEOADD",
            &src,
            "13.361389",
            "38.115556",
            "Palermo",
            "15.087269",
            "37.502669",
            "Catania",
        ],
        vec![
            "GEORADIUS",
            &src,
            "15",
            "37",
            "200",
            "km",
            "STORE",
            &first,
            "STORE",
            &last,
        ],
        vec![
            "GEORADIUS",
            &src,
            "15",
            "37",
            "200",
            "km",
            "STORE",
            &first,
            "STOREDIST",
            &other,
        ],
        vec!["EXISTS", &first],
        vec!["ZRANGE", &last, "0", "-1", "WITHSCORES"],
        vec!["ZRANGE", &other, "0", "-1", "WITHSCORES"],
        vec![
            "GEOSEARCHSTORE",
            &first,
            &src,
            "FROMMEMBER",
            "Palermo",
            "BYRADIUS",
            "1",
            "km",
        ],
        vec!["ZRANGE", &first, "0", "-1", "WITHSCORES"],
    ];
    for step in &steps {
        assert_eq!(show(&ours.cmd(step)), show(&theirs.cmd(step)), "{step:?}");
    }
}
