//! The comparison rules of differential_collections.rs (its module doc lists them): when
//! a reply of Ruvio counts as equal to Redis's although the bytes differ, how an HSCAN is
//! iterated to the end on each server before comparing, and the reply kinds the histogram
//! counts. Apart from the generator so that the allowlist is one short file.

use crate::common::*;
use std::collections::BTreeSet;

pub(crate) fn name_of(command: &Cmd) -> String {
    String::from_utf8_lossy(&command[0]).to_ascii_uppercase()
}

fn arg_is(command: &Cmd, i: usize, word: &str) -> bool {
    command
        .get(i)
        .is_some_and(|a| a.eq_ignore_ascii_case(word.as_bytes()))
}

/// A value with the contents of its strings erased: what comparison rule 3 compares when
/// the elements themselves are random.
fn shape(value: &Value) -> String {
    match value {
        Value::Bulk(_) => "$".into(),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(shape).collect();
            format!("*[{}]", inner.join(","))
        }
        other => format!("{other:?}"),
    }
}

/// The elements of an aggregate reply, sorted, and its type byte; `pairs`: a flat RESP2
/// array of field/value pairs counts each pair as one element (a RESP3 map always does).
fn unordered(reply: &[u8], pairs: bool) -> Option<(u8, Vec<String>)> {
    let (kind, mut items): (u8, Vec<String>) = match decode(reply) {
        Value::Map(entries) => (
            b'%',
            entries
                .iter()
                .map(|(k, v)| format!("{k:?} {v:?}"))
                .collect(),
        ),
        Value::Array(items) if pairs && !matches!(items.first(), Some(Value::Array(_))) => {
            if items.len() % 2 != 0 {
                return None;
            }
            (
                b'*',
                items.chunks(2).map(|pair| format!("{pair:?}")).collect(),
            )
        }
        Value::Array(items) => (b'*', items.iter().map(|v| format!("{v:?}")).collect()),
        _ => return None,
    };
    items.sort();
    Some((kind, items))
}

/// Comparison rule 3 (HRANDFIELD), for two replies that are not byte-equal.
fn random_fields_equivalent(command: &Cmd, expected: &[u8], got: &[u8]) -> bool {
    let count: Option<i64> = command
        .get(2)
        .and_then(|c| std::str::from_utf8(c).ok()?.parse().ok());
    let with_values = arg_is(command, 3, "WITHVALUES");
    let (e, g) = (decode(expected), decode(got));
    let Some(count) = count else {
        return matches!((e, g), (Value::Bulk(_), Value::Bulk(_)));
    };
    let (Some((_, e_items)), Some((_, g_items))) = (
        unordered(expected, with_values),
        unordered(got, with_values),
    ) else {
        return false;
    };
    if count > 0 && (e_items.len() as i64) < count {
        // The whole hash: the same elements in any order.
        return e_items == g_items;
    }
    let distinct = count < 0 || g_items.windows(2).all(|w| w[0] != w[1]);
    shape(&e) == shape(&g) && distinct
}

/// Whether two replies to `command` count as equal (the module's comparison rules).
/// `probe` is Redis's reply to the command after it (the OBJECT ENCODING that follows a
/// hash read).
pub(crate) fn equivalent(command: &Cmd, expected: &[u8], got: &[u8], probe: Option<&[u8]>) -> bool {
    if expected == got {
        return true;
    }
    if expected.starts_with(b"-") || got.starts_with(b"-") {
        return false;
    }
    match name_of(command).as_str() {
        "OBJECT" if arg_is(command, 1, "ENCODING") => {
            expected == b"$9\r\nquicklist\r\n" && got == b"$8\r\nlistpack\r\n"
        }
        name @ ("HKEYS" | "HVALS" | "HGETALL") => {
            probe == Some(b"$9\r\nhashtable\r\n".as_slice()) && {
                let pairs = name == "HGETALL";
                let (e, g) = (unordered(expected, pairs), unordered(got, pairs));
                e.is_some() && e == g
            }
        }
        "HRANDFIELD" => random_fields_equivalent(command, expected, got),
        _ => false,
    }
}

/// HSCAN iterated to cursor 0 on `conn`, from its first reply: the union of field/value
/// pairs as one RESP array (sorted, deduplicated), or the first reply when it is not a
/// scan reply (an error).
pub(crate) fn scan_union(conn: &mut RawConn, command: &Cmd, first: &[u8]) -> Vec<u8> {
    let Some(items) = scan_items(conn, command, first) else {
        return first.to_vec();
    };
    assert!(items.len() % 2 == 0, "HSCAN items: {items:?}");
    let mut pairs = BTreeSet::new();
    for pair in items.chunks(2) {
        let (Value::Bulk(field), Value::Bulk(value)) = (&pair[0], &pair[1]) else {
            panic!("HSCAN items: {items:?}");
        };
        pairs.insert((field.clone(), value.clone()));
    }
    let mut out = Vec::new();
    out.extend_from_slice(format!("*{}\r\n", pairs.len() * 2).as_bytes());
    for (field, value) in &pairs {
        for part in [field, value] {
            out.extend_from_slice(format!("${}\r\n", part.len()).as_bytes());
            out.extend_from_slice(part);
            out.extend_from_slice(b"\r\n");
        }
    }
    out
}

/// The kind of a reply, for the histogram: errors by their text.
pub(crate) fn reply_kind(reply: &[u8]) -> String {
    match reply {
        b"$-1\r\n" | b"*-1\r\n" | b"_\r\n" => "nil".into(),
        b"*0\r\n" => "empty array".into(),
        [b'-', text @ ..] => {
            let text = String::from_utf8_lossy(text);
            let text = text.trim_end();
            let mut cut = text.len().min(60);
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            format!("error {}", &text[..cut])
        }
        [b'+', ..] => "status".into(),
        [b':', ..] => "integer".into(),
        [b'$', ..] => "bulk".into(),
        [b'*', ..] => "array".into(),
        [b'%', ..] => "map".into(),
        [b',', ..] => "double".into(),
        _ => "other".into(),
    }
}
