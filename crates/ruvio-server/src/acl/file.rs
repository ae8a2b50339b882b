//! The ACL file (`aclfile`): one `user <name> <rules>` line per user, as Redis's
//! `ACLLoadFromFile` reads and `ACLSaveToFile` writes it.
//!
//! Loading builds a whole new table and reports every bad line; with any error
//! nothing changes (the caller keeps the old table), with Redis's texts.

use super::describe::user_line;
use super::rules::{has_spaces, merge_selector_args};
use super::{Acl, Users};
use std::io::Write;
use std::sync::Arc;

/// Read the users of the ACL file at `path`: the new table, or Redis's error text.
/// `all_channels`: `acl-pubsub-default allchannels`.
pub fn load(acl: &Acl, path: &str, all_channels: bool) -> Result<Users, String> {
    let text = std::fs::read(path).map_err(|e| {
        format!(
            "Error loading ACLs, opening file '{path}': {}",
            crate::config::params::io_reason(&e)
        )
    })?;
    let mut users = Users::new();
    let mut errors = String::new();
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        let line_no = i + 1;
        let line = trim(line, b" \t\r\n");
        if line.is_empty() {
            continue;
        }
        let argv: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
        if argv[0] != b"user" || argv.len() < 2 {
            errors.push_str(&format!(
                "{path}:{line_no} should start with user keyword followed by the username. "
            ));
            continue;
        }
        let name = argv[1];
        if has_spaces(name) {
            errors.push_str(&format!(
                "'{path}:{line_no}: username '{}' contains invalid characters. ",
                String::from_utf8_lossy(name)
            ));
            continue;
        }
        if users.contains_key(name) {
            errors.push_str(&format!(
                "WARNING: Duplicate user '{}' found on line {line_no}. ",
                String::from_utf8_lossy(name)
            ));
            continue;
        }
        let mut user = acl.new_user(name, all_channels);
        let rules = merge_selector_args(&argv[2..]).unwrap_or_else(|_| {
            errors.push_str(&format!(
                "{path}:{line_no}: Unmatched parenthesis in selector definition."
            ));
            Vec::new()
        });
        for rule in &rules {
            let rule = trim(rule, b"\t\r\n");
            if let Err(e) = user.apply(acl.catalog(), rule, all_channels) {
                errors.push_str(&format!(
                    "{path}:{line_no}: Error in applying operation '{}': {}. ",
                    super::rules::shown_rule(rule),
                    e.text()
                ));
                break;
            }
        }
        users.insert(name.to_vec(), Arc::new(user));
    }
    if errors.is_empty() {
        Ok(users)
    } else {
        errors.push_str(
            "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
        );
        Err(errors)
    }
}

/// Write every user to `path` (a temporary file renamed over it).
pub fn save(acl: &Acl, path: &str) -> std::io::Result<()> {
    let mut text = Vec::new();
    for user in acl.users().values() {
        text.extend_from_slice(&user_line(acl.catalog(), user));
        text.push(b'\n');
    }
    let tmp = format!(
        "{path}.tmp-{}-{}",
        std::process::id(),
        crate::clock::unix_ms()
    );
    let written = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(&text))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

fn trim<'a>(mut s: &'a [u8], set: &[u8]) -> &'a [u8] {
    while let Some((first, rest)) = s.split_first() {
        if !set.contains(first) {
            break;
        }
        s = rest;
    }
    while let Some((last, rest)) = s.split_last() {
        if !set.contains(last) {
            break;
        }
        s = rest;
    }
    s
}
