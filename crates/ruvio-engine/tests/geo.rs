//! The geo family against the engine, request bytes in and reply bytes out: each
//! command with the exact reply redis-server 7.0.15 gave (raw RESP, captured from
//! it), including positions of scores that are no geohash, points on the limits,
//! the antimeridian, every error in Redis's order of checks; then RESP3 replies and
//! the write-ahead log records of the writing commands.

mod common;

use common::*;

/// (command, Redis's reply), run in order on one engine.
const REDIS_SESSION: &[(&str, &str)] = &[
    ("GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania", ":2\r\n"),
    ("GEOADD Sicily NX 13.361389 38.115556 Palermo 12 37 Trapani", ":1\r\n"),
    ("GEOADD Sicily XX CH 13.5 38.1 Palermo 1 1 nope", ":1\r\n"),
    ("GEOADD Sicily xx nx 1 2 a", "-ERR syntax error\r\n"),
    ("GEOADD Sicily ch ch ch", "-ERR syntax error\r\n"),
    ("GEOADD Sicily 181 10 a", "-ERR invalid longitude,latitude pair 181.000000,10.000000\r\n"),
    ("GEOADD Sicily 1 x a", "-ERR value is not a valid float\r\n"),
    ("GEOADD Sicily inf 10 a", "-ERR invalid longitude,latitude pair inf,10.000000\r\n"),
    ("GEOADD Sicily 10 -85.06 a", "-ERR invalid longitude,latitude pair 10.000000,-85.060000\r\n"),
    ("ZRANGE Sicily 0 -1 WITHSCORES", "*6\r\n$7\r\nTrapani\r\n$16\r\n3475952690022668\r\n$7\r\nPalermo\r\n$16\r\n3479100566894653\r\n$7\r\nCatania\r\n$16\r\n3479447370796909\r\n"),
    ("GEOPOS Sicily Palermo Catania nope", "*3\r\n*2\r\n$20\r\n13.50000053644180298\r\n$20\r\n38.10000081174143105\r\n*2\r\n$20\r\n15.08726745843887329\r\n$20\r\n37.50266842333162032\r\n*-1\r\n"),
    ("GEOPOS nokey a", "*1\r\n*-1\r\n"),
    ("GEOHASH Sicily Palermo Catania Trapani nope", "*4\r\n$11\r\nsqc8epyksf0\r\n$11\r\nsqdtr74hyu0\r\n$11\r\nsq8d3pdhs70\r\n$-1\r\n"),
    ("GEODIST Sicily Palermo Catania", "$11\r\n154506.7508\r\n"),
    ("GEODIST Sicily Palermo Catania km", "$8\r\n154.5068\r\n"),
    ("GEODIST Sicily Palermo Catania MI", "$7\r\n96.0063\r\n"),
    ("GEODIST Sicily Palermo Catania ft", "$11\r\n506911.9122\r\n"),
    ("GEODIST Sicily Palermo nope", "$-1\r\n"),
    ("GEODIST Sicily Palermo Catania furlong", "-ERR unsupported unit provided. please use M, KM, FT, MI\r\n"),
    ("GEODIST Sicily Palermo Catania km x", "-ERR syntax error\r\n"),
    ("GEORADIUS Sicily 15 37 200 km WITHDIST WITHCOORD", "*2\r\n*3\r\n$7\r\nPalermo\r\n$8\r\n180.1772\r\n*2\r\n$20\r\n13.50000053644180298\r\n$20\r\n38.10000081174143105\r\n*3\r\n$7\r\nCatania\r\n$7\r\n56.4413\r\n*2\r\n$20\r\n15.08726745843887329\r\n$20\r\n37.50266842333162032\r\n"),
    ("GEORADIUS Sicily 15 37 200 km WITHDIST ASC", "*2\r\n*2\r\n$7\r\nCatania\r\n$7\r\n56.4413\r\n*2\r\n$7\r\nPalermo\r\n$8\r\n180.1772\r\n"),
    ("GEORADIUS Sicily 15 37 200 km DESC COUNT 1", "*1\r\n$7\r\nPalermo\r\n"),
    ("GEORADIUS Sicily 15 37 500 km COUNT 2 ANY", "*2\r\n$7\r\nTrapani\r\n$7\r\nPalermo\r\n"),
    ("GEORADIUS Sicily 15 37 500 km WITHHASH", "*3\r\n*2\r\n$7\r\nTrapani\r\n:3475952690022668\r\n*2\r\n$7\r\nPalermo\r\n:3479100566894653\r\n*2\r\n$7\r\nCatania\r\n:3479447370796909\r\n"),
    ("GEORADIUSBYMEMBER Sicily Palermo 200 km WITHDIST", "*3\r\n*2\r\n$7\r\nPalermo\r\n$6\r\n0.0000\r\n*2\r\n$7\r\nCatania\r\n$8\r\n154.5068\r\n*2\r\n$7\r\nTrapani\r\n$8\r\n180.1771\r\n"),
    ("GEORADIUSBYMEMBER_RO Sicily Palermo 200 km STORE x", "-ERR syntax error\r\n"),
    ("GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 400 400 km ASC WITHCOORD WITHDIST WITHHASH", "*2\r\n*4\r\n$7\r\nCatania\r\n$7\r\n56.4413\r\n:3479447370796909\r\n*2\r\n$20\r\n15.08726745843887329\r\n$20\r\n37.50266842333162032\r\n*4\r\n$7\r\nPalermo\r\n$8\r\n180.1772\r\n:3479100566894653\r\n*2\r\n$20\r\n13.50000053644180298\r\n$20\r\n38.10000081174143105\r\n"),
    ("GEOSEARCH Sicily FROMMEMBER Palermo BYRADIUS 100 km", "*1\r\n$7\r\nPalermo\r\n"),
    ("GEOSEARCH Sicily FROMMEMBER nope BYRADIUS 100 km", "-ERR could not decode requested zset member\r\n"),
    ("GEOSEARCH Sicily fromlonlat 15 37 frommember Palermo byradius 1 km", "-ERR syntax error\r\n"),
    ("GEOSEARCH Sicily bybox 1 1 km byradius 1 km fromlonlat 1 1", "-ERR syntax error\r\n"),
    ("GEOSEARCH Sicily fromlonlat 1 1 withdist count 1", "-ERR exactly one of BYRADIUS and BYBOX can be specified for GEOSEARCH\r\n"),
    ("GEOSEARCH Sicily byradius 1 km withdist count 1", "-ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for GEOSEARCH\r\n"),
    ("GEOSEARCH Sicily fromlonlat 1 1 byradius 1 km any", "-ERR the ANY argument requires COUNT argument\r\n"),
    ("GEOSEARCH Sicily fromlonlat 1 1 byradius 1 km count 0", "-ERR COUNT must be > 0\r\n"),
    ("GEOSEARCH Sicily fromlonlat 1 1 byradius 1 km count x", "-ERR value is not an integer or out of range\r\n"),
    ("GEOSEARCH Sicily fromlonlat 200 1 byradius 1 km", "-ERR invalid longitude,latitude pair 200.000000,1.000000\r\n"),
    ("GEOSEARCH Sicily fromlonlat 1 1 byradius -1 km", "-ERR radius cannot be negative\r\n"),
    ("GEOSEARCH Sicily fromlonlat 1 1 byradius x km", "-ERR need numeric radius\r\n"),
    ("GEOSEARCH Sicily fromlonlat 1 1 byradius 1 parsec", "-ERR unsupported unit provided. please use M, KM, FT, MI\r\n"),
    ("GEOSEARCH Sicily fromlonlat 1 1 bybox 1 x km", "-ERR need numeric height\r\n"),
    ("GEOSEARCH Sicily fromlonlat 1 1 bybox 1 -1 km", "-ERR height or width cannot be negative\r\n"),
    ("GEOSEARCH Sicily fromlonlat 1 1 byradius 1 km storedist", "-ERR syntax error\r\n"),
    ("GEOSEARCHSTORE dst Sicily fromlonlat 15 37 byradius 200 km storedist", ":2\r\n"),
    ("ZRANGE dst 0 -1 WITHSCORES", "*4\r\n$7\r\nCatania\r\n$18\r\n56.441257870158204\r\n$7\r\nPalermo\r\n$18\r\n180.17715473684564\r\n"),
    ("GEOSEARCHSTORE dst Sicily fromlonlat 15 37 byradius 200 km count 1", ":1\r\n"),
    ("ZRANGE dst 0 -1 WITHSCORES", "*2\r\n$7\r\nCatania\r\n$16\r\n3479447370796909\r\n"),
    ("GEOSEARCHSTORE dst Sicily fromlonlat 15 37 byradius 200 km withdist", "-ERR GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options\r\n"),
    ("GEOSEARCHSTORE dst Sicily fromlonlat 0 0 byradius 1 km", ":0\r\n"),
    ("EXISTS dst", ":0\r\n"),
    ("GEORADIUS Sicily 15 37 200 km STORE d2 STOREDIST d3", ":2\r\n"),
    ("ZRANGE d3 0 -1 WITHSCORES", "*4\r\n$7\r\nCatania\r\n$18\r\n56.441257870158204\r\n$7\r\nPalermo\r\n$18\r\n180.17715473684564\r\n"),
    ("GEORADIUS Sicily 15 37 200 km STORE d2 WITHHASH", "-ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options\r\n"),
    ("GEORADIUS nokey 15 37 200 km STORE d3", ":0\r\n"),
    ("EXISTS d3", ":0\r\n"),
    ("GEORADIUSBYMEMBER nokey x y z", "*0\r\n"),
    ("GEORADIUSBYMEMBER Sicily nope 1 km", "-ERR could not decode requested zset member\r\n"),
    ("SET str v", "+OK\r\n"),
    ("GEOSEARCH str FROMLONLAT 500 500 BYRADIUS 1 km", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("GEOPOS str a", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("GEOADD str 1 1 a", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("GEOADD str 1 x a", "-ERR value is not a valid float\r\n"),
    ("GEODIST str a b x", "-ERR unsupported unit provided. please use M, KM, FT, MI\r\n"),
    ("GEODIST str a b", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("GEOSEARCHSTORE dst str fromlonlat 1 1 byradius 1 km", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("GEOSEARCHSTORE str Sicily fromlonlat 15 37 byradius 200 km", ":2\r\n"),
    ("TYPE str", "+zset\r\n"),
    ("ZADD odd -1 neg 1e300 big inf pinf -inf ninf 4503599627370496 p52 1.5 frac", ":6\r\n"),
    ("GEOPOS odd neg big pinf ninf p52 frac", "*6\r\n*2\r\n$3\r\n180\r\n$19\r\n85.0511287799999991\r\n*2\r\n$22\r\n-179.99999731779098511\r\n$21\r\n-85.05112751263942528\r\n*2\r\n$22\r\n-179.99999731779098511\r\n$21\r\n-85.05112751263942528\r\n*2\r\n$3\r\n180\r\n$21\r\n-85.05112751263942528\r\n*2\r\n$22\r\n-179.99999731779098511\r\n$19\r\n85.0511287799999991\r\n*2\r\n$22\r\n-179.99999731779098511\r\n$21\r\n-85.05112497791824921\r\n"),
    ("GEOHASH odd neg big pinf ninf p52 frac", "*6\r\n$11\r\nbp05b5048p0\r\n$11\r\n00bh0hbj200\r\n$11\r\n00bh0hbj200\r\n$11\r\n00bh0hbj200\r\n$11\r\nbp05b5048p0\r\n$11\r\n00bh0hbj210\r\n"),
    ("GEOADD edge 180 85.05112878 top -180 -85.05112878 bot 180 0 east -180 0 west", ":4\r\n"),
    ("GEOSEARCH edge FROMLONLAT 180 0 BYRADIUS 100 km WITHCOORD ASC", "*1\r\n*2\r\n$4\r\neast\r\n*2\r\n$3\r\n180\r\n$19\r\n0.00000126736058093\r\n"),
    ("GEOSEARCH edge FROMLONLAT 180 85.05112878 BYRADIUS 1000 km WITHCOORD WITHHASH", "*1\r\n*3\r\n$3\r\ntop\r\n:13510798882111488\r\n*2\r\n$3\r\n180\r\n$19\r\n85.0511287799999991\r\n"),
    ("GEOSEARCH edge FROMLONLAT -179.5 0 BYBOX 200 200 km WITHDIST", "*1\r\n*2\r\n$4\r\nwest\r\n$7\r\n55.6129\r\n"),
    ("GEORADIUS edge 0 0 30000 km WITHDIST", "*2\r\n*2\r\n$4\r\nwest\r\n$10\r\n20020.7337\r\n*2\r\n$3\r\nbot\r\n$10\r\n10560.8118\r\n"),
];

#[test]
fn replies_equal_redis() {
    let mut h = Harness::default();
    for (command, expected) in REDIS_SESSION {
        assert_eq!(&h.run(command), expected, "{command}");
    }
}

/// `%f` of the pair as glibc prints it (the exact decimal expansion, the sign of
/// zero), captured from redis-server 7.0.15.
#[test]
fn invalid_pairs_print_as_c() {
    let mut h = Harness::default();
    assert_eq!(
        h.run("GEOADD k 1e300 0 a"),
        err("ERR invalid longitude,latitude pair 1000000000000000052504760255204420248704468581108159154915854115511802457988908195786371375080447864043704443832883878176942523235360430575644792184786706982848387200926575803737830233794788090059368953234970799945081119038967640880074652742780142494579258788820056842838115669472196386865459400540160.000000,0.000000")
    );
    assert_eq!(
        h.run("GEOADD k -0 100 a"),
        err("ERR invalid longitude,latitude pair -0.000000,100.000000")
    );
    assert_eq!(
        h.run("GEOADD k 0x10 100 a"),
        err("ERR invalid longitude,latitude pair 16.000000,100.000000")
    );
    assert_eq!(h.run("GEOADD k 1 -1e-7 a"), int(1));
    assert_eq!(
        h.run("GEOSEARCH k FROMLONLAT 1e-320 86 BYRADIUS 1 m"),
        err("ERR invalid longitude,latitude pair 0.000000,86.000000")
    );
}

#[test]
fn resp3_positions_are_doubles() {
    let mut h = Harness::resp3();
    h.run("GEOADD g 13.361389 38.115556 Palermo 15.087269 37.502669 Catania");
    assert_eq!(
        h.run("GEOPOS g Palermo nope"),
        "*2\r\n*2\r\n,13.36138933897018433\r\n,38.11555639549629859\r\n_\r\n"
    );
    assert_eq!(h.run("GEODIST g Palermo Catania"), "$11\r\n166274.1516\r\n");
    assert_eq!(h.run("GEODIST g Palermo nope"), "_\r\n");
    assert_eq!(h.run("GEOHASH g nope"), "*1\r\n_\r\n");
    assert_eq!(
        h.run("GEOSEARCH g FROMLONLAT 15 37 BYRADIUS 200 km WITHDIST WITHCOORD WITHHASH ASC"),
        "*2\r\n*4\r\n$7\r\nCatania\r\n$7\r\n56.4413\r\n:3479447370796909\r\n*2\r\n\
         ,15.08726745843887329\r\n,37.50266842333162032\r\n*4\r\n$7\r\nPalermo\r\n$8\r\n\
         190.4424\r\n:3479099956230698\r\n*2\r\n,13.36138933897018433\r\n,38.11555639549629859\r\n"
    );
}

#[test]
fn writes_log_as_themselves_with_zset_events() {
    let mut h = Harness::default();
    assert_eq!(h.log_of("GEOADD g 1 2 a 3 4 b"), ["GEOADD g 1 2 a 3 4 b"]);
    let events: Vec<&str> = h.effects.events().map(|(e, _, _)| e.name).collect();
    assert_eq!(events, ["zadd"]);
    assert!(h.log_of("GEOADD g NX 5 5 a").is_empty());
    assert_eq!(h.log_of("GEOADD g XX CH 5 5 a"), ["GEOADD g XX CH 5 5 a"]);
    assert_eq!(
        h.log_of("GEOSEARCHSTORE d g FROMLONLAT 1 2 BYRADIUS 1000 km"),
        ["GEOSEARCHSTORE d g FROMLONLAT 1 2 BYRADIUS 1000 km"]
    );
    let events: Vec<&str> = h.effects.events().map(|(e, _, _)| e.name).collect();
    assert_eq!(events, ["geosearchstore"]);
    assert_eq!(
        h.log_of("GEORADIUS g 1 2 1000 km STOREDIST d"),
        ["GEORADIUS g 1 2 1000 km STOREDIST d"]
    );
    let events: Vec<&str> = h.effects.events().map(|(e, _, _)| e.name).collect();
    assert_eq!(events, ["georadiusstore"]);
    // An empty result deletes the destination (a `del`), or does nothing.
    assert_eq!(
        h.log_of("GEORADIUS g 100 2 1 km STORE d"),
        ["GEORADIUS g 100 2 1 km STORE d"]
    );
    let events: Vec<&str> = h.effects.events().map(|(e, _, _)| e.name).collect();
    assert_eq!(events, ["del"]);
    assert!(h.log_of("GEORADIUS g 100 2 1 km STORE d").is_empty());
    assert!(h
        .log_of("GEOSEARCH g FROMLONLAT 1 2 BYRADIUS 1000 km")
        .is_empty());
}

/// A dense grid, searched in every form: the pruned and best-first searches must
/// answer what a plain scan of every member (Redis's walk without shortcuts)
/// answers. The grid is big enough for a skiplist and for cells to be split.
#[test]
fn searches_match_a_full_scan() {
    let mut h = Harness::default();
    for row in 0..40 {
        let mut line = String::from("GEOADD grid");
        for col in 0..40 {
            let lon = 13.0 + f64::from(col) * 0.013 + f64::from(row) * 0.0007;
            let lat = 38.0 + f64::from(row) * 0.011 - f64::from(col) * 0.0003;
            line.push_str(&format!(" {lon} {lat} p{row}_{col}"));
        }
        h.run(&line);
    }
    for (shape, count) in [
        ("BYRADIUS 5 km", ""),
        ("BYRADIUS 5 km", "COUNT 7"),
        ("BYRADIUS 20000 m", "COUNT 30"),
        ("BYBOX 10 6 km", "COUNT 12"),
        ("BYBOX 10 6 km", ""),
        ("BYRADIUS 0 m", ""),
    ] {
        let asc = h.run(&format!(
            "GEOSEARCH grid FROMLONLAT 13.2 38.2 {shape} ASC WITHDIST {count}"
        ));
        let mut all = h.run(&format!(
            "GEOSEARCH grid FROMLONLAT 13.2 38.2 {shape} WITHDIST"
        ));
        let n = count
            .strip_prefix("COUNT ")
            .map(|c| c.parse::<usize>().unwrap());
        let sorted = sorted_prefix(&all, n);
        assert_eq!(asc, sorted, "{shape} {count}");
        all.clear();
    }
}

/// The replies' items sorted by their distance text (stable), the first `n` of
/// them, as a reply again.
fn sorted_prefix(reply: &str, n: Option<usize>) -> String {
    let body = reply.split_once("\r\n").unwrap().1;
    let mut items: Vec<(f64, String)> = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        // *2 $len member $len dist
        let mut parts = Vec::new();
        for _ in 0..5 {
            let (line, tail) = rest.split_once("\r\n").unwrap();
            parts.push(line.to_string());
            rest = tail;
        }
        let dist: f64 = parts[4].parse().unwrap();
        items.push((dist, parts.join("\r\n") + "\r\n"));
    }
    items.sort_by(|a, b| a.0.total_cmp(&b.0));
    items.truncate(n.unwrap_or(usize::MAX));
    let mut out = format!("*{}\r\n", items.len());
    for (_, text) in items {
        out.push_str(&text);
    }
    out
}
