//! The layer order of docs/architecture.md, checked: every `crate::...` path in a
//! crate's sources must name a subsystem on the importing file's floor or below.
//!
//! The floors are read from the doc itself (its tables `| floor | subsystem | ...`
//! under a heading naming the crate), so the picture a newcomer reads and the rule
//! this test enforces cannot drift apart. A file's subsystem is the first folder
//! under `src/` (or the file's name for a top-level file); the target's is the
//! first segment after `crate::`. Test code (from a file's first `#[cfg(test)]`
//! on, and files named `tests.rs`) may reach anything: it is not part of the
//! product's dependency graph. Comments are skipped.
//!
//! Imports that still run upward are listed in `KNOWN_UPWARD` (file, target
//! subsystem), each one a debt written down in docs/architecture.md: the test fails
//! on any upward import not in the list, and on a listed one that is gone (so the
//! list only shrinks, and stays true).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// One import against the order: `file` (relative to `src/`) names `target`, a
/// subsystem above the file's own.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Upward {
    file: String,
    from: String,
    target: String,
}

/// The floors of one crate: subsystem name -> floor number (0 is the ground).
type Floors = BTreeMap<String, u32>;

/// Reads the floor table that follows the heading containing `heading` in the
/// architecture doc: rows `| N | name | ...` (a name may be written `name/` or
/// `` `name` ``); the table ends at the first line that is not a row.
fn floors_from_doc(doc: &str, heading: &str) -> Floors {
    let mut floors = Floors::new();
    let mut lines = doc
        .lines()
        .skip_while(|l| !(l.starts_with('#') && l.contains(heading)));
    lines.next();
    let mut in_table = false;
    for line in lines {
        let line = line.trim();
        if line.starts_with('#') {
            break;
        }
        if !line.starts_with('|') {
            if in_table {
                break;
            }
            continue;
        }
        in_table = true;
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let (Some(floor), Some(names)) = (cells.first(), cells.get(1)) else {
            continue;
        };
        let Ok(floor) = floor.parse::<u32>() else {
            continue; // the header and its --- row
        };
        for name in names.split(',') {
            let name = name.trim().trim_matches('`').trim_end_matches('/');
            if !name.is_empty() {
                floors.insert(name.to_string(), floor);
            }
        }
    }
    floors
}

/// The code of a source file without comments and without its test code: a
/// `#[cfg(test)]` item of one line (`mod tests;`) is skipped, a `#[cfg(test)]`
/// block (`mod tests { ... }`, by convention last) ends the product code.
fn product_code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            match lines.next() {
                Some(item) if item.trim_end().ends_with(';') => continue,
                _ => break,
            }
        }
        let code = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// The subsystems named by `crate::` paths in `code`: `crate::a::b` gives `a`,
/// `use crate::{a, b::c}` gives `a` and `b`.
fn crate_targets(code: &str) -> BTreeSet<String> {
    let mut targets = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `ruvio_crate::` or the like, not this crate's root
        }
        if let Some(group) = rest.strip_prefix('{') {
            // `{a, b::{c, d}, e}`: the names at depth 0, up to the group's own `}`.
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        insert_first_segment(&mut targets, &item);
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            insert_first_segment(&mut targets, &item);
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                targets.insert(name);
            }
        }
    }
    targets
}

fn insert_first_segment(targets: &mut BTreeSet<String>, item: &str) {
    let name = item.trim().split("::").next().unwrap_or("").trim();
    if !name.is_empty() && name != "self" {
        targets.insert(name.to_string());
    }
}

/// What the crate root re-exports (`pub use module::{A, B as C};` in lib.rs): each
/// name reachable as `crate::Name`, with the module it comes from, so an import of
/// `crate::Engine` is judged as one of `engine`.
fn root_reexports(lib_rs: &str) -> BTreeMap<String, String> {
    let code = product_code(lib_rs);
    let mut names = BTreeMap::new();
    for statement in code.split(';') {
        let statement = statement.trim();
        let Some(path) = statement
            .rsplit("pub use ")
            .next()
            .filter(|_| statement.contains("pub use "))
        else {
            continue;
        };
        let Some((module, items)) = path.split_once("::") else {
            continue;
        };
        let items = items.trim().trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let item = item.trim();
            let name = match item.split_once(" as ") {
                Some((_, alias)) => alias.trim(),
                None => item.rsplit("::").next().unwrap_or("").trim(),
            };
            if !name.is_empty() {
                names.insert(name.to_string(), module.trim().to_string());
            }
        }
    }
    names
}

/// The subsystem a file belongs to: its first folder under `src/`, or its stem.
fn subsystem_of(rel: &Path) -> String {
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// Every upward import among `files` (path relative to `src/`, contents). A file
/// or target whose subsystem has no floor is reported as its own error by
/// [`unplaced`]; it is not judged here.
fn upward_imports(files: &[(PathBuf, String)], floors: &Floors) -> Vec<Upward> {
    let reexports = files
        .iter()
        .find(|(rel, _)| rel == Path::new("lib.rs"))
        .map(|(_, text)| root_reexports(text))
        .unwrap_or_default();
    let mut found = Vec::new();
    for (rel, text) in files {
        if rel.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let from = subsystem_of(rel);
        let Some(&from_floor) = floors.get(&from) else {
            continue;
        };
        let targets: BTreeSet<String> = crate_targets(&product_code(text))
            .into_iter()
            .map(|t| reexports.get(&t).cloned().unwrap_or(t))
            .collect();
        for target in targets {
            if floors.get(&target).is_some_and(|&floor| floor > from_floor) {
                found.push(Upward {
                    file: rel.to_string_lossy().into_owned(),
                    from: from.clone(),
                    target,
                });
            }
        }
    }
    found.sort();
    found
}

/// Subsystems (folders or top-level files, crate roots aside) without a floor.
fn unplaced(files: &[(PathBuf, String)], floors: &Floors) -> BTreeSet<String> {
    files
        .iter()
        .map(|(rel, _)| subsystem_of(rel))
        .filter(|s| !matches!(s.as_str(), "lib" | "main") && !floors.contains_key(s))
        .collect()
}

fn sources(src: &Path) -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<(PathBuf, String)>) {
        let mut entries: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(root).unwrap().to_path_buf();
                out.push((rel, fs::read_to_string(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(src, src, &mut out);
    out
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Checks one crate against its table in docs/architecture.md and the known debt.
fn check_crate(crate_dir: &str, heading: &str, known: &[(&str, &str)]) {
    let doc = fs::read_to_string(repo().join("docs/architecture.md")).unwrap();
    let floors = floors_from_doc(&doc, heading);
    assert!(
        !floors.is_empty(),
        "no floor table under a heading with {heading:?}"
    );
    let files = sources(&repo().join(crate_dir).join("src"));
    let missing = unplaced(&files, &floors);
    assert!(
        missing.is_empty(),
        "{crate_dir}: subsystems with no floor in docs/architecture.md: {missing:?}"
    );
    let found: BTreeSet<(String, String)> = upward_imports(&files, &floors)
        .into_iter()
        .map(|u| (u.file, u.target))
        .collect();
    let known: BTreeSet<(String, String)> = known
        .iter()
        .map(|(f, t)| (f.to_string(), t.to_string()))
        .collect();
    let new: Vec<_> = found.difference(&known).collect();
    let gone: Vec<_> = known.difference(&found).collect();
    assert!(
        new.is_empty(),
        "{crate_dir}: imports against the layer order of docs/architecture.md (file, subsystem above it): {new:#?}\n\
         A lower layer that must reach up does it through an interface it defines (a trait, a callback, a returned event)."
    );
    assert!(
        gone.is_empty(),
        "{crate_dir}: KNOWN_UPWARD lists imports that are gone; remove them: {gone:#?}"
    );
}

/// Upward imports of the server crate that remain: none. The list stays so that a
/// debt taken on knowingly is written down here and in docs/architecture.md,
/// never left implicit.
const SERVER_KNOWN_UPWARD: &[(&str, &str)] = &[];

#[test]
fn the_server_imports_follow_the_layer_order() {
    check_crate(
        "crates/ruvio-server",
        "ruvio-server floors",
        SERVER_KNOWN_UPWARD,
    );
}

/// The names that reach the shard's concrete type from `cmd`: the type itself,
/// and the hook through which the shard says which type the rows run on
/// (`cmd::RowsFor`, read once by `cmd/mod.rs`'s `ServerFn`). A handler written
/// over either could read the core's fields past `cmd::Server`.
const THE_CONCRETE_CORE: &[&str] = &["ShardCore", "RowCore", "RowsFor"];

/// Files (relative to `cmd/`) whose product code, comments aside, names the
/// concrete core: every name of [`THE_CONCRETE_CORE`] anywhere, the hook's
/// outside `mod.rs`'s one reading of it.
fn naming_the_concrete_core(files: &[(PathBuf, String)]) -> BTreeSet<String> {
    files
        .iter()
        .filter(|(rel, text)| {
            let code = product_code(text);
            THE_CONCRETE_CORE.iter().any(|name| match *name {
                "ShardCore" => code.contains(name),
                hook => rel != Path::new("mod.rs") && code.contains(hook),
            })
        })
        .map(|(rel, _)| rel.to_string_lossy().into_owned())
        .collect()
}

#[test]
fn no_family_names_the_concrete_core() {
    let files = sources(&repo().join("crates/ruvio-server/src/cmd"));
    let found = naming_the_concrete_core(&files);
    assert!(
        found.is_empty(),
        "cmd files that name the concrete core: {found:?}\n\
         Write the handler over the shard (`fn h<S: Server>(ctx: &mut Ctx<'_, S>, ..)`) and \
         read what it needs through `cmd::Server` (add a method there if it lacks one)."
    );
}

#[test]
fn a_handler_on_the_concrete_core_is_caught() {
    let files = |rel: &str, text: &str| vec![(PathBuf::from(rel), text.to_string())];
    let generic = "fn role<S: Server>(ctx: &mut Ctx<'_, S>) {}\n";
    assert!(naming_the_concrete_core(&files("replication.rs", generic)).is_empty());
    let hook = "type RowCore = <Rows as RowsFor>::Core;\n";
    assert!(naming_the_concrete_core(&files("mod.rs", hook)).is_empty());
    for text in [
        "fn role(ctx: &mut Ctx<'_, RowCore>) {}\n",
        "fn role(ctx: &mut Ctx<'_, <Rows as RowsFor>::Core>) {}\n",
        "fn role(ctx: &mut Ctx<'_, crate::shard::ShardCore>) {}\n",
    ] {
        let found = naming_the_concrete_core(&files("replication.rs", text));
        assert_eq!(
            found,
            BTreeSet::from(["replication.rs".to_string()]),
            "{text}"
        );
    }
    let commented = "// once ShardCore's fields\nfn role<S: Server>(ctx: &mut Ctx<'_, S>) {}\n";
    assert!(naming_the_concrete_core(&files("replication.rs", commented)).is_empty());
}

/// The engine's floors hold with no exception.
#[test]
fn the_engine_imports_follow_the_layer_order() {
    check_crate("crates/ruvio-engine", "ruvio-engine floors", &[]);
}

// --- the checker's own tests ----------------------------------------------------------

const DOC: &str = "# Architecture\n\n## demo floors\n\n| floor | subsystem | owns |\n|---|---|---|\n\
                   | 0 | `base` | the floor |\n| 1 | mid/, side | middle |\n| 2 | top | the loop |\n\n\
                   After the table.\n\n## other floors\n\n| 0 | elsewhere | - |\n";

fn demo(files: &[(&str, &str)]) -> Vec<Upward> {
    let files: Vec<_> = files
        .iter()
        .map(|(p, t)| (PathBuf::from(p), t.to_string()))
        .collect();
    upward_imports(&files, &floors_from_doc(DOC, "demo floors"))
}

#[test]
fn the_floors_are_read_from_the_table_under_the_heading() {
    let floors = floors_from_doc(DOC, "demo floors");
    let expected: Floors = [("base", 0), ("mid", 1), ("side", 1), ("top", 2)]
        .map(|(n, f)| (n.to_string(), f))
        .into();
    assert_eq!(floors, expected);
}

#[test]
fn an_upward_import_added_on_purpose_is_caught() {
    let files = [
        (
            "top/mod.rs",
            "use crate::mid::thing;\nuse crate::base::Cfg;\n",
        ),
        ("mid/a.rs", "use crate::side::b;\nuse crate::base;\n"),
        ("base/mod.rs", "pub struct Cfg;\n"),
    ];
    assert_eq!(
        demo(&files),
        vec![],
        "downward and same-floor imports are fine"
    );

    let mut with_upward = files.to_vec();
    with_upward[2] = (
        "base/mod.rs",
        "use crate::top::Loop; // the loop, from the floor\n",
    );
    assert_eq!(
        demo(&with_upward),
        vec![Upward {
            file: "base/mod.rs".into(),
            from: "base".into(),
            target: "top".into()
        }]
    );
}

#[test]
fn groups_inline_paths_comments_and_tests_are_read_as_written() {
    let grouped = [("base/x.rs", "use crate::{mid::{a, b}, base::c};\n")];
    assert_eq!(
        demo(&grouped).len(),
        1,
        "`use crate::{{mid::..}}` names mid"
    );
    let inline = [("mid/x.rs", "fn f() { crate::top::run(); }\n")];
    assert_eq!(demo(&inline)[0].target, "top");
    let commented = [(
        "base/x.rs",
        "//! see [`Loop`](crate::top::Loop)\n// crate::top\nfn f() {}\n",
    )];
    assert_eq!(demo(&commented), vec![], "comments are not imports");
    let test_code = [
        (
            "base/x.rs",
            "fn f() {}\n#[cfg(test)]\nmod tests { use crate::top::Loop; }\n",
        ),
        ("base/tests.rs", "use crate::top::Loop;\n"),
    ];
    assert_eq!(demo(&test_code), vec![], "test code may reach anything");
    let after_test_mod = [(
        "base/x.rs",
        "#[cfg(test)]\nmod tests;\nuse crate::top::Loop;\n",
    )];
    assert_eq!(
        demo(&after_test_mod).len(),
        1,
        "code after `mod tests;` is product code"
    );
    let other_crate = [("base/x.rs", "use ruvio_crate::top;\n")];
    assert_eq!(demo(&other_crate), vec![]);
}

#[test]
fn a_root_reexport_is_judged_as_its_module() {
    let files = [
        (
            "lib.rs",
            "pub mod top;\npub use top::{Loop, Other as Alias};\npub use mid::Thing;\n",
        ),
        (
            "base/x.rs",
            "use crate::Loop;\nfn f() { crate::Alias::new(); }\n",
        ),
        ("mid/y.rs", "use crate::Thing;\n"),
    ];
    let found = demo(&files);
    assert_eq!(
        found.len(),
        1,
        "base names top twice through the root: one upward import"
    );
    assert_eq!(
        (found[0].file.as_str(), found[0].target.as_str()),
        ("base/x.rs", "top")
    );
}

#[test]
fn a_subsystem_missing_from_the_table_is_reported() {
    let files = vec![
        (PathBuf::from("stray/mod.rs"), String::new()),
        (PathBuf::from("lib.rs"), String::new()),
    ];
    let missing = unplaced(&files, &floors_from_doc(DOC, "demo floors"));
    assert_eq!(missing, BTreeSet::from(["stray".to_string()]));
}

/// Lines past which a source file must say at its top why it is one file.
const FILE_LINES_MAX: usize = 1_000;

/// The files of `src` longer than [`FILE_LINES_MAX`] whose leading module doc
/// (`//!` lines) gives no reason, written as a line containing "Why one file".
fn long_files_without_a_reason(files: &[(PathBuf, String)]) -> Vec<String> {
    files
        .iter()
        .filter(|(_, text)| text.lines().count() > FILE_LINES_MAX)
        .filter(|(_, text)| {
            !text
                .lines()
                .take_while(|l| l.starts_with("//!"))
                .any(|l| l.contains("Why one file"))
        })
        .map(|(path, text)| format!("{} ({} lines)", path.display(), text.lines().count()))
        .collect()
}

/// Issue 30's rule of names: no source file over about 1,000 lines unless its
/// top says why (one unsafe contract, one table read top to bottom ...); a long
/// file otherwise splits along its parts (its tests first, as
/// `cluster/membership_tests.rs`).
#[test]
fn a_long_file_says_why_at_its_top() {
    for krate in ["ruvio-server", "ruvio-engine", "ruvio-resp"] {
        let src = repo().join("crates").join(krate).join("src");
        let long = long_files_without_a_reason(&sources(&src));
        assert!(
            long.is_empty(),
            "{krate}: files over {FILE_LINES_MAX} lines with no \"Why one file\" line in \
             their module doc; split them or say why: {long:#?}"
        );
    }
}

#[test]
fn a_long_file_without_a_reason_is_caught() {
    let long: String = "fn f() {}\n".repeat(FILE_LINES_MAX + 1);
    let reasoned = format!("//! A part.\n//! Why one file of this size: a reason.\n{long}");
    let files = [
        (PathBuf::from("short.rs"), "fn f() {}\n".to_string()),
        (PathBuf::from("long.rs"), long.clone()),
        (PathBuf::from("reasoned.rs"), reasoned),
    ];
    let found = long_files_without_a_reason(&files);
    assert_eq!(
        found,
        vec![format!("long.rs ({} lines)", FILE_LINES_MAX + 1)]
    );
}
