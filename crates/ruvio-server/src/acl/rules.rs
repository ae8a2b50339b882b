//! Users and their selectors, and the rules that change them (ACL SETUSER's
//! arguments, `user` lines of the config and ACL files), as Redis's
//! `ACLSetUser` / `ACLSetSelector`.
//!
//! A selector's command rules compile to a bitmap over the [`Catalog`]'s rows, so
//! the check before a command is one bit test; key and channel rules stay a short
//! list of glob patterns, matched only for a user that has them.

use super::catalog::Catalog;
use sha2::{Digest, Sha256};

/// Key pattern permissions (`%R~`, `%W~`, `~` = both).
pub const KEY_READ: u8 = 1;
pub const KEY_WRITE: u8 = 2;
pub const KEY_ALL: u8 = KEY_READ | KEY_WRITE;

/// A key pattern and what it allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPattern {
    pub pattern: Vec<u8>,
    /// The pattern looked at once: the check runs per key of every command.
    pub matcher: ruvio_engine::GlobMatcher,
    /// [`KEY_READ`], [`KEY_WRITE`] or both.
    pub perms: u8,
}

/// What a rule can get wrong: Redis's `ACLSetUserStringError` reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleError {
    /// ENOENT
    UnknownCommand,
    /// EINVAL
    Syntax,
    /// EEXIST
    KeyAfterAll,
    /// EISDIR
    ChannelAfterAll,
    /// ENODEV
    NoSuchPassword,
    /// EBADMSG
    BadHash,
    /// ECHILD
    SubcommandFirstArg,
}

impl RuleError {
    /// Redis's text for the reason.
    pub fn text(self) -> &'static str {
        match self {
            RuleError::UnknownCommand => "Unknown command or category name in ACL",
            RuleError::Syntax => "Syntax error",
            RuleError::KeyAfterAll => {
                "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and \
                 does not have any effect. Try 'resetkeys' to start with an empty list of patterns"
            }
            RuleError::ChannelAfterAll => {
                "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid \
                 and does not have any effect. Try 'resetchannels' to start with an empty list \
                 of channels"
            }
            RuleError::NoSuchPassword => {
                "The password you are trying to remove from the user does not exist"
            }
            RuleError::BadHash => {
                "The password hash must be exactly 64 characters and contain only lowercase \
                 hexadecimal characters"
            }
            RuleError::SubcommandFirstArg => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

/// One set of permissions: the root selector (the user's own rules) or one in
/// parentheses. A user may run a command when any of its selectors allows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    /// One bit per catalog row.
    pub allowed: Vec<u64>,
    /// `+@all` was the last of `+@all`/`-@all`: commands added later are allowed
    /// too (Redis's reserved bit; ACL LIST starts from `+@all` then).
    pub future: bool,
    /// Every bit is set and none was cleared since `+@all` (the check skips the
    /// bitmap).
    pub all_commands: bool,
    pub all_keys: bool,
    pub all_channels: bool,
    /// `+cmd|arg` of a command without subcommands: first arguments allowed
    /// while the command itself is not, per row.
    pub firstargs: Vec<(usize, Vec<Vec<u8>>)>,
    pub keys: Vec<KeyPattern>,
    /// Some key pattern is `%R~` or `%W~`: the check then asks whether the
    /// command reads or writes each key (kept by [`Selector::apply`]).
    pub keys_by_perm: bool,
    /// Every key pattern is a prefix of at most 8 bytes then `*`s, with read
    /// and write: each as (word, mask) ([`ruvio_engine::GlobMatcher::prefix_word`]),
    /// for the check of keys of 8 bytes or more (kept by [`Selector::apply`]).
    pub prefix_words: Option<Vec<(u64, u64)>>,
    pub channels: Vec<Vec<u8>>,
}

impl Selector {
    /// An empty selector (`all_channels`: `acl-pubsub-default allchannels`).
    pub fn new(catalog: &Catalog, all_channels: bool) -> Selector {
        Selector {
            allowed: vec![0; catalog.bits().div_ceil(64)],
            future: false,
            all_commands: false,
            all_keys: false,
            all_channels,
            firstargs: Vec::new(),
            keys: Vec::new(),
            keys_by_perm: false,
            prefix_words: None,
            channels: Vec::new(),
        }
    }

    pub fn bit(&self, bit: usize) -> bool {
        self.allowed[bit / 64] & (1 << (bit % 64)) != 0
    }

    fn set_bit(&mut self, bit: usize, on: bool) {
        if on {
            self.allowed[bit / 64] |= 1 << (bit % 64);
        } else {
            self.allowed[bit / 64] &= !(1 << (bit % 64));
            self.all_commands = false;
        }
    }

    /// Allow or deny a command and, for a container, every subcommand
    /// (`ACLChangeSelectorPerm`).
    pub fn change(&mut self, catalog: &Catalog, bit: usize, on: bool) {
        self.set_bit(bit, on);
        self.firstargs.retain(|(b, _)| *b != bit);
        for &sub in &catalog.row(bit).subs {
            self.set_bit(sub, on);
        }
    }

    /// `+@cat` / `-@cat`: every row of the category, as Redis walks them.
    pub fn change_category(&mut self, catalog: &Catalog, category: u32, on: bool) {
        for bit in catalog.walk().collect::<Vec<_>>() {
            if catalog.row(bit).categories & category != 0 {
                self.change(catalog, bit, on);
            }
        }
    }

    fn set_all(&mut self, on: bool) {
        let fill = if on { u64::MAX } else { 0 };
        self.allowed.iter_mut().for_each(|w| *w = fill);
        self.all_commands = on;
        self.future = on;
        self.firstargs.clear();
    }

    /// Apply one selector rule (`ACLSetSelector`).
    pub fn apply(&mut self, catalog: &Catalog, op: &[u8]) -> Result<(), RuleError> {
        let applied = self.apply_rule(catalog, op);
        self.keys_by_perm = self.keys.iter().any(|k| k.perms != KEY_ALL);
        self.prefix_words = match self.keys.is_empty() || self.keys_by_perm {
            true => None,
            false => self.keys.iter().map(|k| k.matcher.prefix_word()).collect(),
        };
        applied
    }

    fn apply_rule(&mut self, catalog: &Catalog, op: &[u8]) -> Result<(), RuleError> {
        let is = |word: &str| op.eq_ignore_ascii_case(word.as_bytes());
        if is("allkeys") || op == b"~*" {
            self.all_keys = true;
            self.keys.clear();
        } else if is("resetkeys") {
            self.all_keys = false;
            self.keys.clear();
        } else if is("allchannels") || op == b"&*" {
            self.all_channels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.all_channels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.set_all(true);
        } else if is("nocommands") || is("-@all") {
            self.set_all(false);
        } else if op[0] == b'~' || op[0] == b'%' {
            self.add_key_pattern(op)?;
        } else if op[0] == b'&' {
            if self.all_channels {
                return Err(RuleError::ChannelAfterAll);
            }
            let pattern = &op[1..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|c| c == pattern) {
                self.channels.push(pattern.to_vec());
            }
        } else if op.len() >= 2 && (op[0] == b'+' || op[0] == b'-') && op[1] == b'@' {
            let category =
                super::catalog::category_bit(&op[2..]).ok_or(RuleError::UnknownCommand)?;
            self.change_category(catalog, category, op[0] == b'+');
        } else if op[0] == b'+' {
            self.allow_command(catalog, &op[1..])?;
        } else if op[0] == b'-' {
            let bit = catalog.lookup(&op[1..]).ok_or(RuleError::UnknownCommand)?;
            self.change(catalog, bit, false);
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    /// `~pattern`, `%R~pattern`, `%W~pattern`, `%RW~pattern`.
    fn add_key_pattern(&mut self, op: &[u8]) -> Result<(), RuleError> {
        if self.all_keys {
            return Err(RuleError::KeyAfterAll);
        }
        let mut perms = 0;
        let mut offset = 1;
        if op[0] == b'%' {
            while offset < op.len() {
                match op[offset].to_ascii_uppercase() {
                    b'R' if perms & KEY_READ == 0 => perms |= KEY_READ,
                    b'W' if perms & KEY_WRITE == 0 => perms |= KEY_WRITE,
                    b'~' => {
                        offset += 1;
                        break;
                    }
                    _ => return Err(RuleError::Syntax),
                }
                offset += 1;
            }
            // `%~pattern`: no permission named (`%R` alone is an empty pattern).
            if perms == 0 {
                return Err(RuleError::Syntax);
            }
        } else {
            perms = KEY_ALL;
        }
        let pattern = &op[offset.min(op.len())..];
        if has_spaces(pattern) {
            return Err(RuleError::Syntax);
        }
        match self.keys.iter_mut().find(|k| k.pattern == pattern) {
            Some(existing) => existing.perms |= perms,
            None => self.keys.push(KeyPattern {
                pattern: pattern.to_vec(),
                matcher: ruvio_engine::GlobMatcher::new(pattern),
                perms,
            }),
        }
        self.all_keys = false;
        Ok(())
    }

    /// `+cmd`, `+container|sub`, or `+cmd|first-arg`.
    fn allow_command(&mut self, catalog: &Catalog, name: &[u8]) -> Result<(), RuleError> {
        let Some(split) = name.iter().rposition(|&b| b == b'|') else {
            let bit = catalog.lookup(name).ok_or(RuleError::UnknownCommand)?;
            self.change(catalog, bit, true);
            return Ok(());
        };
        let (base, sub) = (&name[..split], &name[split + 1..]);
        let bit = catalog.lookup(base).ok_or(RuleError::UnknownCommand)?;
        if catalog.row(bit).parent.is_some() {
            return Err(RuleError::SubcommandFirstArg);
        }
        if sub.is_empty() {
            return Err(RuleError::Syntax);
        }
        if !catalog.row(bit).subs.is_empty() {
            let sub_bit = catalog.lookup(name).ok_or(RuleError::UnknownCommand)?;
            self.change(catalog, sub_bit, true);
            return Ok(());
        }
        match self.firstargs.iter_mut().find(|(b, _)| *b == bit) {
            Some((_, args)) => {
                if !args.iter().any(|a| a.eq_ignore_ascii_case(sub)) {
                    args.push(sub.to_vec());
                }
            }
            None => self.firstargs.push((bit, vec![sub.to_vec()])),
        }
        Ok(())
    }
}

/// A rule as a message that may reach the server log shows it: a password to
/// remove (`<pass`, the one rule that fails with a plain password in it) is
/// not written out.
pub fn shown_rule(rule: &[u8]) -> String {
    match rule.first() {
        Some(b'<') => "<(password)".to_string(),
        _ => String::from_utf8_lossy(rule).into_owned(),
    }
}

/// Redis's `ACLStringHasSpaces`: whitespace or NUL.
pub fn has_spaces(s: &[u8]) -> bool {
    s.iter()
        .any(|&b| b == 0 || b == b' ' || (b'\t'..=b'\r').contains(&b))
}

/// `skip-sanitize-payload` / `sanitize-payload`, when either was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sanitize {
    Skip,
    Sanitize,
}

/// One user: flags, password hashes, selectors (the first is the root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: Vec<u8>,
    /// Which incarnation: a user deleted and made again (or reloaded from the ACL
    /// file) is another, and the connections of the old one are closed.
    pub id: u64,
    /// `on` (true), `off` (false).
    pub enabled: bool,
    pub nopass: bool,
    pub sanitize: Option<Sanitize>,
    /// SHA-256 hashes, lower-case hex.
    pub passwords: Vec<String>,
    pub selectors: Vec<Selector>,
}

impl User {
    /// A new user as Redis's `ACLCreateUser`: off, no password, no permissions.
    pub fn new(catalog: &Catalog, name: &[u8], id: u64, all_channels: bool) -> User {
        User {
            name: name.to_vec(),
            id,
            enabled: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            selectors: vec![Selector::new(catalog, all_channels)],
        }
    }

    /// The `default` user a server starts with (`+@all ~* &* on nopass`).
    pub fn default_user(catalog: &Catalog, id: u64) -> User {
        let mut user = User::new(catalog, b"default", id, false);
        for op in ["+@all", "~*", "&*", "on", "nopass"] {
            user.apply(catalog, op.as_bytes(), false)
                .expect("the default user's rules are valid");
        }
        user
    }

    pub fn root(&self) -> &Selector {
        &self.selectors[0]
    }

    /// May run every command on every key and channel: the check is skipped.
    pub fn unrestricted(&self) -> bool {
        let root = self.root();
        root.all_commands && root.all_keys && root.all_channels
    }

    /// Apply one rule (`ACLSetUser`); `all_channels` is `acl-pubsub-default`.
    pub fn apply(
        &mut self,
        catalog: &Catalog,
        op: &[u8],
        all_channels: bool,
    ) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let is = |word: &str| op.eq_ignore_ascii_case(word.as_bytes());
        if is("on") {
            self.enabled = true;
        } else if is("off") {
            self.enabled = false;
        } else if is("skip-sanitize-payload") {
            self.sanitize = Some(Sanitize::Skip);
        } else if is("sanitize-payload") {
            self.sanitize = Some(Sanitize::Sanitize);
        } else if is("nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if is("resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let hash = if op[0] == b'>' {
                hash_password(&op[1..])
            } else {
                valid_hash(&op[1..])?
            };
            if !self.passwords.contains(&hash) {
                self.passwords.push(hash);
            }
            self.nopass = false;
        } else if op[0] == b'<' || op[0] == b'!' {
            let hash = if op[0] == b'<' {
                hash_password(&op[1..])
            } else {
                valid_hash(&op[1..])?
            };
            let at = self.passwords.iter().position(|p| *p == hash);
            self.passwords.remove(at.ok_or(RuleError::NoSuchPassword)?);
        } else if op[0] == b'(' && op[op.len() - 1] == b')' {
            let mut selector = Selector::new(catalog, all_channels);
            let inner = &op[1..op.len() - 1];
            for rule in inner
                .split(|b| b.is_ascii_whitespace())
                .filter(|r| !r.is_empty())
            {
                selector.apply(catalog, rule)?;
            }
            self.selectors.push(selector);
        } else if is("clearselectors") {
            self.selectors.truncate(1);
        } else if is("reset") {
            self.nopass = false;
            self.passwords.clear();
            let root = &mut self.selectors[0];
            root.all_keys = false;
            root.keys.clear();
            root.keys_by_perm = false;
            root.prefix_words = None;
            root.all_channels = all_channels;
            root.channels.clear();
            self.enabled = false;
            self.sanitize = Some(Sanitize::Sanitize);
            self.selectors.truncate(1);
            self.selectors[0].set_all(false);
        } else {
            self.selectors[0].apply(catalog, op)?;
        }
        Ok(())
    }

    /// True when `password` is one of the user's (or the user needs none).
    /// Compares every stored hash in full, whatever matches first.
    pub fn password_ok(&self, password: &[u8]) -> bool {
        if self.nopass {
            return true;
        }
        let hashed = hash_password(password);
        self.passwords.iter().fold(false, |found, p| {
            found | constant_time_eq(p.as_bytes(), hashed.as_bytes())
        })
    }
}

/// Lower-case hex SHA-256 of a password (`ACLHashPassword`).
pub fn hash_password(password: &[u8]) -> String {
    let digest = Sha256::digest(password);
    let mut hex = String::with_capacity(64);
    for b in digest {
        hex.push_str(&format!("{b:02x}"));
    }
    hex
}

/// A `#hash` / `!hash` argument: 64 lower-case hex characters.
fn valid_hash(hash: &[u8]) -> Result<String, RuleError> {
    let ok = hash.len() == 64 && hash.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    ok.then(|| String::from_utf8_lossy(hash).into_owned())
        .ok_or(RuleError::BadHash)
}

/// Equal bytes, in time that depends only on the lengths.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// ACL SETUSER's arguments with selectors spread over several arguments joined
/// into one (`ACLMergeSelectorArguments`); `Err(i)`: argument `i` opens a
/// parenthesis that never closes.
pub fn merge_selector_args(args: &[&[u8]]) -> Result<Vec<Vec<u8>>, usize> {
    let mut merged = Vec::new();
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (i, &op) in args.iter().enumerate() {
        if let Some((_, selector)) = open.as_mut() {
            selector.push(b' ');
            selector.extend_from_slice(op);
            if op.last() == Some(&b')') {
                merged.push(open.take().expect("open").1);
            }
            continue;
        }
        if op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((i, op.to_vec()));
            continue;
        }
        merged.push(op.to_vec());
    }
    match open {
        Some((i, _)) => Err(i),
        None => Ok(merged),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::catalog::sample;

    #[test]
    fn passwords_hash_and_compare() {
        let c = sample();
        let mut u = User::new(&c, b"u", 1, false);
        u.apply(&c, b">secret", false).unwrap();
        assert!(u.password_ok(b"secret"));
        assert!(!u.password_ok(b"secreT"));
        assert_eq!(u.apply(&c, b"<nope", false), Err(RuleError::NoSuchPassword));
        assert_eq!(u.apply(&c, b"#ABC", false), Err(RuleError::BadHash));
        u.apply(&c, b"<secret", false).unwrap();
        assert!(!u.password_ok(b"secret"));
        assert_eq!(
            hash_password(b"x"),
            "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"
        );
    }

    #[test]
    fn command_rules_compile_to_bits() {
        let c = sample();
        let mut s = Selector::new(&c, false);
        s.apply(&c, b"+config").unwrap();
        assert!(s.bit(2) && s.bit(3) && s.bit(4));
        s.apply(&c, b"-config|set").unwrap();
        assert!(s.bit(3) && !s.bit(4));
        s.apply(&c, b"+@read").unwrap();
        assert!(s.bit(0) && !s.bit(1));
        assert_eq!(
            s.apply(&c, b"+config|get|x"),
            Err(RuleError::SubcommandFirstArg)
        );
        assert_eq!(
            s.apply(&c, b"-config|get|x"),
            Err(RuleError::UnknownCommand)
        );
        assert_eq!(
            s.apply(&c, b"+config|get|"),
            Err(RuleError::SubcommandFirstArg)
        );
        assert_eq!(s.apply(&c, b"+get|"), Err(RuleError::Syntax));
        s.apply(&c, b"+select|0").unwrap();
        assert_eq!(s.firstargs, vec![(5, vec![b"0".to_vec()])]);
        assert_eq!(s.apply(&c, b"%X~a"), Err(RuleError::Syntax));
        s.apply(&c, b"%R~a").unwrap();
        s.apply(&c, b"%W~a").unwrap();
        assert_eq!(s.keys[0].perms, KEY_ALL);
        s.apply(&c, b"allkeys").unwrap();
        assert_eq!(s.apply(&c, b"~b"), Err(RuleError::KeyAfterAll));
    }

    proptest::proptest! {
        /// Any bytes as rules: an answer (applied or refused), never a panic, and
        /// the user can still be written back as rules.
        #[test]
        fn any_rule_bytes_never_panic(
            rules in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..12), 0..8)
        ) {
            let c = sample();
            let mut u = User::new(&c, b"u", 1, false);
            let args: Vec<&[u8]> = rules.iter().map(Vec::as_slice).collect();
            if let Ok(merged) = merge_selector_args(&args) {
                for rule in &merged {
                    let _ = u.apply(&c, rule, false);
                }
            }
            let _ = crate::acl::describe::user_line(&c, &u);
        }
    }

    #[test]
    fn selectors_merge_across_arguments() {
        let args: Vec<&[u8]> = vec![b"on", b"(+get", b"~x)", b"(~y)"];
        assert_eq!(
            merge_selector_args(&args).unwrap(),
            vec![b"on".to_vec(), b"(+get ~x)".to_vec(), b"(~y)".to_vec()]
        );
        assert_eq!(merge_selector_args(&[b"on", b"(+get"]), Err(1));
    }
}
