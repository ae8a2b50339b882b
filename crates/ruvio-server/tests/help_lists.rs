//! Every container's HELP lists only subcommands the server has: for each command
//! of COMMAND LIST whose `HELP` answers Redis' help array, each subcommand it names
//! is called, and none may answer "unknown subcommand" (a wrong argument count is
//! fine: the subcommand exists). HELP tells the truth about what runs.

mod common;

use common::*;

/// Commands whose HELP is not asked for here (they end or change the connection),
/// and subcommands not called (they act on the server or the connection).
const NOT_ASKED: &[&str] = &[
    "shutdown", "monitor", "quit", "reset", "multi", "exec", "debug",
];
const NOT_CALLED: &[&str] = &[
    "kill", "pause", "reset", "flush", "no-evict", "reply", "restore",
];

/// The subcommand names a HELP array lists: its lines that do not start with a space
/// (after the first, the usage line) and name one, first word each.
fn listed(help: &[Value]) -> Vec<String> {
    help.iter()
        .skip(1)
        .map(Value::text)
        // `(no subcommand)` describes the command alone.
        .filter(|text| !text.is_empty() && !text.starts_with(' ') && !text.starts_with('('))
        .filter_map(|text| text.split_whitespace().next().map(str::to_ascii_lowercase))
        .collect()
}

#[test]
fn every_help_lists_only_subcommands_that_exist() {
    let server = Server::ruvio(PortMode::Forward, 1);
    let mut conn = server.raw();
    let Value::Array(names) = decode(&conn.cmd(&["command", "list"])) else {
        panic!("COMMAND LIST is an array");
    };
    let mut containers = 0;
    for name in names.iter().map(Value::text) {
        if NOT_ASKED.contains(&name.as_str()) {
            continue;
        }
        let Value::Array(help) = decode(&conn.cmd(&[&name, "help"])) else {
            continue;
        };
        containers += 1;
        for sub in listed(&help) {
            if NOT_CALLED.contains(&sub.as_str()) {
                continue;
            }
            let reply = conn.cmd(&[&name, &sub]);
            assert!(
                !reply.starts_with(b"-ERR unknown subcommand '"),
                "{name} HELP lists {sub}, which answers {}",
                show(&reply)
            );
        }
    }
    assert!(
        containers >= 8,
        "only {containers} containers answered HELP"
    );
}
