//! What the SLOWLOG and LATENCY tests (`slowlog_latency`, `slowlog_recording`)
//! both read out of replies: SLOWLOG entries' fields and argv, LATENCY
//! HISTOGRAM's calls per command, a connection's own address as the log shows it.

use super::*;

pub fn local_addr(conn: &mut RawConn) -> String {
    conn.stream().local_addr().unwrap().to_string()
}

/// Calls by command name.
pub type Calls = Vec<(String, i64)>;

/// LATENCY HISTOGRAM of `commands` decoded: each command's calls, after checking
/// the buckets are cumulative and end at the calls.
pub fn histogram_calls(reply: &[u8]) -> Calls {
    let pairs: Vec<(Value, Value)> = match decode(reply) {
        Value::Map(pairs) => pairs,
        Value::Array(flat) => flat
            .chunks(2)
            .map(|p| (p[0].clone(), p[1].clone()))
            .collect(),
        other => panic!("not a map: {other:?}"),
    };
    let mut out: Vec<(String, i64)> = pairs
        .iter()
        .map(|(name, v)| {
            let calls: i64 = v.get("calls").unwrap().text().parse().unwrap();
            let buckets = match v.get("histogram_usec").unwrap() {
                Value::Map(p) => p.iter().map(|(k, v)| (k.text(), v.text())).collect(),
                Value::Array(f) => f.chunks(2).map(|p| (p[0].text(), p[1].text())).collect(),
                other => panic!("buckets: {other:?}"),
            };
            let buckets: Vec<(i64, i64)> = Vec::<(String, String)>::into_iter(buckets)
                .map(|(k, v)| (k.parse().unwrap(), v.parse().unwrap()))
                .collect();
            assert!(
                buckets
                    .windows(2)
                    .all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1),
                "{buckets:?}"
            );
            assert_eq!(buckets.last().map(|b| b.1), Some(calls), "{buckets:?}");
            (name.text(), calls)
        })
        .collect();
    out.sort();
    out
}

/// An argument list of `args`, as SLOWLOG shows it.
pub fn argv(entry: &Value) -> Vec<String> {
    let Value::Array(fields) = entry else {
        panic!("{entry:?}");
    };
    let Value::Array(args) = &fields[3] else {
        panic!("{entry:?}");
    };
    args.iter().map(Value::text).collect()
}

pub fn fields(entry: &Value) -> &[Value] {
    match entry {
        Value::Array(f) => f,
        other => panic!("{other:?}"),
    }
}
