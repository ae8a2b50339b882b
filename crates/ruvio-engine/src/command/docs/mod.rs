//! What COMMAND INFO and COMMAND DOCS say beyond the command table's rows: key
//! specs, command tips, doc flags, history and argument trees.
//!
//! Why a data table beside the rows rather than more fields in every `command!`
//! row: these values are large trees (SET's arguments alone are 30 nodes) that no
//! handler reads; in the rows they would bury arity, flags and keys, the facts a
//! reader of a family looks for. So they live here, keyed by the command's full
//! name (`config|get`), and COMMAND joins them to the rows by name. The rows stay
//! the one source of what Ruvio runs (name, arity, flags, ACL categories, summary,
//! since, group, complexity, subcommands); this table only carries what Redis
//! publishes about the interface itself. A test in the server's registry checks
//! that every row has an entry here and every entry a row.
//!
//! The data is two files embedded in the binary and parsed once, on the first
//! COMMAND that needs them (never on the request path of other commands):
//! - `redis-7.0.txt`, written by `scripts/command_docs_from_redis.py` from a
//!   running redis-server 7.0's own COMMAND INFO / COMMAND DOCS replies, so the
//!   values are Redis' interface as it answers it (regenerate, do not edit);
//! - `ruvio-only.txt`, written by hand: commands Redis 7.0 lacks (Redis 7.2+'s and
//!   Ruvio's own FILLGET/FILLSET), and newer Redis' entries for commands whose
//!   newer form Ruvio implements (ZRANK's WITHSCORE; SET's 8.4 IFEQ/IFNE/IFDEQ/
//!   IFDNE; XADD's and XTRIM's 8.2 KEEPREF/DELREF/ACKED); an entry here replaces
//!   the generated one. A newer form is 7.0's entry with arguments and history
//!   lines added, each argument carrying its `since`, so that 7.0's entry is what
//!   is left once everything newer than 7.0 is taken out (the server's
//!   `tests/command_table.rs` compares exactly that with redis-server 7.0).
//!
//! Line format: `full-name tips key-specs docs`, each value in a typed notation
//! that keeps RESP3's types, so one value renders as Redis renders it under RESP2
//! and RESP3: `"bulk"` (`\\ \" \n` escapes), `+simple`, `123`, `[array]`,
//! `~[set]`, `{map key value ...}`. `docs` holds the COMMAND DOCS fields that
//! follow `complexity` (doc_flags, deprecated_since, replaced_by, history,
//! arguments).

use ruvio_resp::{Args, Reply};
use std::collections::HashMap;
use std::sync::OnceLock;

/// The generated table (see the module docs).
const FROM_REDIS_7_0: &str = include_str!("redis-7.0.txt");
/// The hand-written entries (see the module docs).
const RUVIO_ONLY: &str = include_str!("ruvio-only.txt");

/// A value with its RESP3 type, rendered through [`Reply`] (which writes the
/// RESP2 form of maps and sets when the connection speaks RESP2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Typed {
    /// `$` bulk string.
    Bulk(String),
    /// `+` status string.
    Simple(String),
    /// `:` integer.
    Int(i64),
    /// `*` array.
    Array(Vec<Typed>),
    /// `~` set.
    Set(Vec<Typed>),
    /// `%` map, pairs in order.
    Map(Vec<(Typed, Typed)>),
}

impl Typed {
    /// Writes the value as a reply.
    pub fn write(&self, reply: &mut Reply<'_>) {
        match self {
            Typed::Bulk(s) => reply.bulk(s.as_bytes()),
            Typed::Simple(s) => reply.simple(s),
            Typed::Int(n) => reply.int(*n),
            Typed::Array(items) => {
                reply.array(items.len());
                items.iter().for_each(|v| v.write(reply));
            }
            Typed::Set(items) => {
                reply.set(items.len());
                items.iter().for_each(|v| v.write(reply));
            }
            Typed::Map(pairs) => {
                reply.map(pairs.len());
                for (k, v) in pairs {
                    k.write(reply);
                    v.write(reply);
                }
            }
        }
    }

    /// The text of a bulk or simple string.
    fn text(&self) -> Option<&str> {
        match self {
            Typed::Bulk(s) | Typed::Simple(s) => Some(s),
            _ => None,
        }
    }

    /// The value under `key` of a map whose keys are strings.
    fn get(&self, key: &str) -> Option<&Typed> {
        match self {
            Typed::Map(pairs) => pairs
                .iter()
                .find(|(k, _)| k.text() == Some(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    fn int(&self, key: &str) -> Option<i64> {
        match self.get(key) {
            Some(Typed::Int(n)) => Some(*n),
            _ => None,
        }
    }

    /// The elements of an array or a set.
    fn items(&self) -> &[Typed] {
        match self {
            Typed::Array(items) | Typed::Set(items) => items,
            _ => &[],
        }
    }
}

/// Where one key spec starts looking (Redis' `begin_search`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum BeginSearch {
    /// At a fixed argument index.
    Index(i64),
    /// After the first `keyword` found from `startfrom` (negative: from the end,
    /// searching backwards).
    Keyword { keyword: String, startfrom: i64 },
    /// Only a command's own code knows (Redis' `unknown`).
    Unknown,
}

/// Which arguments after the start are keys (Redis' `find_keys`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum FindKeys {
    /// `lastkey` relative to the start (negative: from the end), every
    /// `keystep`-th; `limit` divides what is left (XREAD's STREAMS half).
    Range {
        lastkey: i64,
        keystep: i64,
        limit: i64,
    },
    /// A count at `keynumidx` after the start, keys from `firstkey`.
    Keynum {
        keynumidx: i64,
        firstkey: i64,
        keystep: i64,
    },
    /// Only a command's own code knows.
    Unknown,
}

/// One of Redis' key specs, read from the data to tell a key's flags (COMMAND
/// GETKEYSANDFLAGS).
#[derive(Debug, Clone)]
struct KeySpecDoc {
    /// The flags as Redis names them (`RW`, `access` ...).
    flags: Vec<String>,
    begin: BeginSearch,
    find: FindKeys,
}

impl KeySpecDoc {
    fn from_typed(spec: &Typed) -> KeySpecDoc {
        let flags = spec
            .get("flags")
            .map(|f| {
                f.items()
                    .iter()
                    .filter_map(Typed::text)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default();
        let begin = spec.get("begin_search");
        let begin_spec = begin.and_then(|b| b.get("spec"));
        let begin = match begin.and_then(|b| b.get("type")).and_then(Typed::text) {
            Some("index") => {
                BeginSearch::Index(begin_spec.and_then(|s| s.int("index")).unwrap_or(0))
            }
            Some("keyword") => BeginSearch::Keyword {
                keyword: begin_spec
                    .and_then(|s| s.get("keyword"))
                    .and_then(Typed::text)
                    .unwrap_or_default()
                    .to_string(),
                startfrom: begin_spec.and_then(|s| s.int("startfrom")).unwrap_or(0),
            },
            _ => BeginSearch::Unknown,
        };
        let find = spec.get("find_keys");
        let find_spec = find.and_then(|f| f.get("spec"));
        let field = |name| find_spec.and_then(|s| s.int(name)).unwrap_or(0);
        let find = match find.and_then(|f| f.get("type")).and_then(Typed::text) {
            Some("range") => FindKeys::Range {
                lastkey: field("lastkey"),
                keystep: field("keystep"),
                limit: field("limit"),
            },
            Some("keynum") => FindKeys::Keynum {
                keynumidx: field("keynumidx"),
                firstkey: field("firstkey"),
                keystep: field("keystep"),
            },
            _ => FindKeys::Unknown,
        };
        KeySpecDoc { flags, begin, find }
    }

    /// The argument indexes this spec names in `args` (Redis'
    /// `getKeysUsingKeySpecs` for one spec); empty when it names none or the
    /// arguments do not fit it.
    fn positions(&self, args: Args<'_>) -> Vec<usize> {
        let argc = args.len() as i64;
        let first = match &self.begin {
            BeginSearch::Index(i) => *i,
            BeginSearch::Keyword { keyword, startfrom } => {
                let found = if *startfrom > 0 {
                    (*startfrom..argc).find(|&i| {
                        args.get(i as usize)
                            .eq_ignore_ascii_case(keyword.as_bytes())
                    })
                } else {
                    (1..=argc + startfrom).rev().find(|&i| {
                        i < argc
                            && args
                                .get(i as usize)
                                .eq_ignore_ascii_case(keyword.as_bytes())
                    })
                };
                match found {
                    Some(i) => i + 1,
                    None => return Vec::new(),
                }
            }
            BeginSearch::Unknown => return Vec::new(),
        };
        let (first, last, step) = match self.find {
            FindKeys::Range {
                lastkey,
                keystep,
                limit,
            } => {
                let last = if lastkey >= 0 {
                    first + lastkey
                } else if limit == 0 {
                    argc + lastkey
                } else {
                    first + ((argc - first) / limit + lastkey)
                };
                (first, last, keystep)
            }
            FindKeys::Keynum {
                keynumidx,
                firstkey,
                keystep,
            } => {
                let at = first + keynumidx;
                if at < 1 || at >= argc {
                    return Vec::new();
                }
                let Some(count) = crate::args::parse_i64(args.get(at as usize)).filter(|&n| n >= 0)
                else {
                    return Vec::new();
                };
                let first = first + firstkey;
                (first, first.saturating_add(count) - 1, keystep)
            }
            FindKeys::Unknown => return Vec::new(),
        };
        if first < 1 || last >= argc || last < first || step < 1 {
            return Vec::new();
        }
        (first..=last)
            .step_by(step as usize)
            .map(|i| i as usize)
            .collect()
    }
}

/// What the table holds for one command or subcommand.
#[derive(Debug)]
pub struct CommandDocs {
    /// COMMAND INFO's tips (a set of bulk strings).
    pub tips: Typed,
    /// COMMAND INFO's key specs (a set of maps).
    pub key_specs: Typed,
    /// COMMAND DOCS' fields after `complexity`, in Redis' order.
    pub docs: Vec<(Typed, Typed)>,
    /// The key specs, read for GETKEYSANDFLAGS.
    specs: Vec<KeySpecDoc>,
}

impl CommandDocs {
    /// The argument indexes Redis' key specs name in `args`, in spec order
    /// (specs flagged `not_key`, shard channels, left out): what a client that
    /// routes by COMMAND INFO's key specs takes for the keys.
    pub fn spec_positions(&self, args: Args<'_>) -> Vec<usize> {
        self.specs
            .iter()
            .filter(|s| !s.flags.iter().any(|f| f == "not_key"))
            .flat_map(|s| s.positions(args))
            .collect()
    }

    /// The flags Redis gives the key at argument `position` of `args` (COMMAND
    /// GETKEYSANDFLAGS): those of the first key spec that names it; a key only a
    /// command's own code finds (SORT ... STORE, the last of GEORADIUS' stores)
    /// takes the last spec's, MIGRATE's keys the first's. Specs marked `variable_flags` are decided by the
    /// arguments as Redis' `setGetKeys` and `bitfieldGetKeys` decide them.
    pub fn key_flags(&self, name: &str, args: Args<'_>, position: usize) -> Vec<&str> {
        let spec = match name {
            // Redis' migrateGetKeys gives the KEYS list the first spec's flags.
            "migrate" => self.specs.first(),
            _ => self
                .specs
                .iter()
                .find(|s| s.positions(args).contains(&position))
                .or(self.specs.last()),
        };
        let Some(spec) = spec else {
            return Vec::new();
        };
        if !spec.flags.iter().any(|f| f == "variable_flags") {
            return spec.flags.iter().map(String::as_str).collect();
        }
        let has = |word: &str| {
            args.iter()
                .skip(1)
                .any(|a| a.eq_ignore_ascii_case(word.as_bytes()))
        };
        match name {
            // SET writes over the key unless GET also reads it.
            "set" if !has("get") => vec!["OW", "update"],
            // BITFIELD with GET subcommands only reads.
            "bitfield" if !bitfield_writes(args) => vec!["RO", "access"],
            _ => spec
                .flags
                .iter()
                .map(String::as_str)
                .filter(|&f| f != "variable_flags")
                .collect(),
        }
    }
}

/// True when a BITFIELD call has a SET, INCRBY or OVERFLOW subcommand (Redis'
/// `bitfieldGetKeys` counts OVERFLOW as a write too).
fn bitfield_writes(args: Args<'_>) -> bool {
    args.iter().skip(2).any(|a| {
        ["set", "incrby", "overflow"]
            .iter()
            .any(|w| a.eq_ignore_ascii_case(w.as_bytes()))
    })
}

/// The whole table: full command name to its entry.
pub fn table() -> &'static HashMap<String, CommandDocs> {
    static TABLE: OnceLock<HashMap<String, CommandDocs>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = HashMap::new();
        for (file, text) in [
            ("redis-7.0.txt", FROM_REDIS_7_0),
            ("ruvio-only.txt", RUVIO_ONLY),
        ] {
            for (line_no, line) in text.lines().enumerate() {
                match parse_line(line) {
                    Ok(Some((name, docs))) => {
                        table.insert(name, docs);
                    }
                    Ok(None) => {}
                    // The files are part of the build and a unit test parses them.
                    Err(e) => panic!("{file}:{}: {e}", line_no + 1),
                }
            }
        }
        table
    })
}

/// The entry of a command by its full name (`get`, `config|get`).
pub fn lookup(full_name: &str) -> Option<&'static CommandDocs> {
    table().get(full_name)
}

/// One line of a data file; `None` for blank lines and `#` comments.
fn parse_line(line: &str) -> Result<Option<(String, CommandDocs)>, String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let (name, rest) = line.split_once(' ').ok_or("no values after the name")?;
    let mut parser = Parser {
        text: rest.as_bytes(),
        at: 0,
    };
    let tips = parser.value()?;
    let key_specs = parser.value()?;
    let Typed::Map(docs) = parser.value()? else {
        return Err("docs is not a map".into());
    };
    parser.skip_space();
    if parser.at != parser.text.len() {
        return Err(format!("trailing text at byte {}", parser.at));
    }
    let specs = key_specs
        .items()
        .iter()
        .map(KeySpecDoc::from_typed)
        .collect();
    Ok(Some((
        name.to_string(),
        CommandDocs {
            tips,
            key_specs,
            docs,
            specs,
        },
    )))
}

/// Reads the typed notation of the module docs.
struct Parser<'a> {
    text: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn skip_space(&mut self) {
        while self.text.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.text.get(self.at).copied()
    }

    fn value(&mut self) -> Result<Typed, String> {
        match self.peek().ok_or("a value is missing")? {
            b'"' => self.quoted().map(Typed::Bulk),
            b'+' => {
                self.at += 1;
                Ok(Typed::Simple(self.word()?.to_string()))
            }
            b'[' => {
                self.at += 1;
                self.items().map(Typed::Array)
            }
            b'~' if self.text.get(self.at + 1) == Some(&b'[') => {
                self.at += 2;
                self.items().map(Typed::Set)
            }
            b'{' => {
                self.at += 1;
                let mut pairs = Vec::new();
                while self.peek() != Some(b'}') {
                    pairs.push((self.value()?, self.value()?));
                }
                self.at += 1;
                Ok(Typed::Map(pairs))
            }
            _ => {
                let word = self.word()?;
                word.parse()
                    .map(Typed::Int)
                    .map_err(|_| format!("bad value {word:?}"))
            }
        }
    }

    /// Values up to the closing `]`.
    fn items(&mut self) -> Result<Vec<Typed>, String> {
        let mut items = Vec::new();
        loop {
            match self.peek() {
                Some(b']') => {
                    self.at += 1;
                    return Ok(items);
                }
                Some(_) => items.push(self.value()?),
                None => return Err("unclosed [".into()),
            }
        }
    }

    /// Text up to the next space or closing bracket.
    fn word(&mut self) -> Result<&str, String> {
        let start = self.at;
        while self
            .text
            .get(self.at)
            .is_some_and(|b| !b.is_ascii_whitespace() && !b"]}".contains(b))
        {
            self.at += 1;
        }
        std::str::from_utf8(&self.text[start..self.at])
            .ok()
            .filter(|w| !w.is_empty())
            .ok_or_else(|| format!("empty or invalid word at byte {start}"))
    }

    /// A `"..."` string with `\\`, `\"` and `\n` escapes.
    fn quoted(&mut self) -> Result<String, String> {
        self.at += 1;
        let mut out = Vec::new();
        loop {
            match self.text.get(self.at) {
                None => return Err("unclosed string".into()),
                Some(b'"') => break,
                Some(b'\\') => {
                    out.push(match self.text.get(self.at + 1) {
                        Some(b'n') => b'\n',
                        Some(&c @ (b'\\' | b'"')) => c,
                        _ => return Err("bad escape".into()),
                    });
                    self.at += 2;
                }
                Some(&c) => {
                    out.push(c);
                    self.at += 1;
                }
            }
        }
        self.at += 1;
        String::from_utf8(out).map_err(|_| "string is not UTF-8".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ruvio_resp::{OwnedArgs, Protocol};

    #[test]
    fn both_files_parse() {
        assert!(table().len() > 300);
        assert!(lookup("config|get").is_some());
        assert!(lookup("fillget").is_some());
    }

    #[test]
    fn a_value_renders_as_resp3_and_resp2() {
        let (_, docs) =
            parse_line(r#"x ~[] ~[{"flags" ~[+RO] "n" 1}] {"history" ~[["1.0" "a \"b\""]]}"#)
                .unwrap()
                .unwrap();
        let mut out = Vec::new();
        docs.key_specs
            .write(&mut Reply::new(&mut out, Protocol::Resp3));
        assert_eq!(
            out,
            b"~1\r\n%2\r\n$5\r\nflags\r\n~1\r\n+RO\r\n$1\r\nn\r\n:1\r\n"
        );
        out.clear();
        docs.key_specs
            .write(&mut Reply::new(&mut out, Protocol::Resp2));
        assert_eq!(
            out,
            b"*1\r\n*4\r\n$5\r\nflags\r\n*1\r\n+RO\r\n$1\r\nn\r\n:1\r\n"
        );
        assert_eq!(
            docs.docs[0].1,
            Typed::Set(vec![Typed::Array(vec![
                Typed::Bulk("1.0".into()),
                Typed::Bulk("a \"b\"".into())
            ])])
        );
    }

    #[test]
    fn malformed_lines_are_errors() {
        for line in [
            "x",
            "x ~[",
            "x ~[] ~[] [1]",
            "x ~[] ~[] {} extra",
            r#"x ~[] ~[] {"a}"#,
        ] {
            assert!(parse_line(line).is_err(), "{line}");
        }
    }

    fn flags(name: &str, call: &[&str], position: usize) -> Vec<String> {
        let args: OwnedArgs = call.iter().map(|a| a.as_bytes()).collect();
        lookup(name)
            .unwrap()
            .key_flags(name, args.args(), position)
            .into_iter()
            .map(String::from)
            .collect()
    }

    #[test]
    fn key_flags_follow_the_specs() {
        assert_eq!(
            flags("lmove", &["lmove", "a", "b", "left", "right"], 2),
            ["RW", "insert"]
        );
        assert_eq!(flags("set", &["set", "k", "v"], 1), ["OW", "update"]);
        assert_eq!(
            flags("set", &["set", "k", "v", "GET"], 1),
            ["RW", "access", "update"]
        );
        assert_eq!(
            flags("bitfield", &["bitfield", "k", "get", "u8", "0"], 1),
            ["RO", "access"]
        );
        assert_eq!(
            flags("zunionstore", &["zunionstore", "d", "2", "a", "b"], 4),
            ["RO", "access"]
        );
        assert_eq!(
            flags("sort", &["sort", "k", "store", "d"], 3),
            ["OW", "update"]
        );
    }
}
