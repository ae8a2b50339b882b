//! Access control: Redis 7's ACL users, server-wide across the shards.
//!
//! Owns the user table ([`Acl`], one per process, in `Shared`), the rule
//! compiler ([`rules`]: SETUSER's arguments to a command bitmap over the
//! [`catalog`] plus key and channel patterns), the rules written back
//! ([`describe`]), the check before a command runs ([`check`]) and of a
//! script's calls ([`script`]), ACL LOG ([`log`]) and the ACL file ([`file`]).
//!
//! Why shaped so: a connection holds its user as an `Arc` ([`Session`]) and a
//! flag saying whether the user is restricted at all, so the request path of an
//! unrestricted user (the `default` user as it starts) pays one predictable
//! branch, and a restricted one a bit test plus pattern matches; nothing on the
//! request path takes a lock. A change (SETUSER, DELUSER, LOAD, `requirepass`)
//! swaps the table under its lock and is then applied by every shard to its
//! connections (`cmd::acl` broadcasts it and answers once all shards did, as
//! CONFIG SET), which is also where a deleted user's connections are closed.
//! A connection the broadcast could not reach (out of its slab at that moment)
//! sees the table's [`Acl::epoch`] moved at its next read batch and catches up.
//!
//! It sits on the `net` floor: it knows users and rules, not shards; the command
//! table is above it, so `cmd::registry` hands it a [`catalog::Catalog`].

pub mod catalog;
pub mod check;
pub mod describe;
pub mod file;
pub mod log;
pub mod rules;
pub mod script;

use catalog::Catalog;
use rules::{has_spaces, merge_selector_args, RuleError, User};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{
    AtomicBool, AtomicU64, AtomicUsize,
    Ordering::{Acquire, Relaxed, Release},
};
use std::sync::{Arc, Mutex, RwLock};

/// `acllog-max-len`'s default (Redis's).
const LOG_MAX_DEFAULT: usize = 128;

/// The users by name, in byte order (ACL LIST's and USERS' order, as Redis's rax).
pub type Users = BTreeMap<Vec<u8>, Arc<User>>;

/// A restricted client that sent a script: its user's name and id, and its
/// CLIENT LIST line (ACL LOG's `client-info`).
#[derive(Debug)]
struct ScriptCaller {
    user: Vec<u8>,
    user_id: u64,
    client_info: String,
}

/// Why ACL SETUSER refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetUserError {
    /// `ERR Usernames can't contain spaces or null characters`
    BadName,
    /// A `(` never closed: the argument (index among the rules) it opens at.
    Unmatched(usize),
    /// The rule (selectors merged) and why.
    Rule(Vec<u8>, RuleError),
}

/// The server's users and ACL LOG.
#[derive(Debug)]
pub struct Acl {
    catalog: &'static Catalog,
    users: RwLock<Arc<Users>>,
    /// The `default` user is on and needs no password: connections start
    /// authenticated (read per connection and per command of one that is not).
    default_open: AtomicBool,
    next_id: AtomicU64,
    /// `acllog-max-len`: ACL LOG's entries at most.
    log_max: AtomicUsize,
    /// Changes made to the table so far: a connection whose session is older
    /// takes the change at its next read (those the broadcast did not reach).
    epoch: AtomicU64,
    log: Mutex<log::Log>,
    /// Restricted clients whose scripts may run on any shard (forwarded, on
    /// borrowed keys, in an EXEC), by client id: the user and the client's
    /// CLIENT LIST line (see [`script`]).
    script_callers: Mutex<HashMap<u64, ScriptCaller>>,
    /// `script_callers` is not empty: a script's run looks there.
    any_script_callers: AtomicBool,
    /// Changes to `script_callers` so far: a shard's copy of what it looked up
    /// there ([`script`]) is good while this and [`Acl::epoch`] stand still.
    script_callers_changes: AtomicU64,
}

/// Set the users up at start, as Redis's `ACLLoadUsersAtStartup`: `requirepass`,
/// then the config file's `user` lines or the ACL file (not both). An error is
/// Redis's text, and the server must not start.
pub fn start(acl: &Acl, cfg: &crate::config::Config) -> Result<(), String> {
    acl.set_default_password(cfg.requirepass.as_deref());
    acl.set_log_max(
        cfg.param("acllog-max-len")
            .parse()
            .unwrap_or(LOG_MAX_DEFAULT),
    );
    let aclfile = cfg.param("aclfile");
    let all_channels = cfg
        .param("acl-pubsub-default")
        .eq_ignore_ascii_case("allchannels");
    if !aclfile.is_empty() && !cfg.users.is_empty() {
        return Err(
            "Configuring Redis with users defined in redis.conf and at the same setting \
                    an ACL file path is invalid. This setup is very likely to lead to \
                    configuration errors and security holes, please define either an ACL file \
                    or declare users directly in your redis.conf, but not both."
                .into(),
        );
    }
    for line in &cfg.users {
        let mut words = line.split(' ').filter(|w| !w.is_empty());
        let name = words.next().unwrap_or_default();
        if name.is_empty() || has_spaces(name.as_bytes()) {
            return Err("Spaces not allowed in ACL usernames".into());
        }
        let mut rules: Vec<&[u8]> = words.map(str::as_bytes).collect();
        if name == "default" {
            rules.insert(0, b"reset");
        }
        acl.set_user(name.as_bytes(), &rules, all_channels)
            .map_err(|e| match e {
                SetUserError::Rule(rule, why) => format!(
                    "Error loading ACL rule '{}' for the user named '{name}': {}",
                    rules::shown_rule(&rule),
                    why.text()
                ),
                SetUserError::Unmatched(_) | SetUserError::BadName => {
                    format!("Unmatched parenthesis in the ACL rules of the user named '{name}'")
                }
            })?;
    }
    if !aclfile.is_empty() {
        let users = file::load(acl, aclfile, all_channels)
            .map_err(|e| format!("Aborting Redis startup because of ACL errors: {e}"))?;
        acl.replace_all(users);
    }
    Ok(())
}

/// Which user a connection runs as.
#[derive(Debug, Clone)]
pub struct Session {
    pub user: Arc<User>,
    /// The user's rules restrict something: commands are checked.
    pub restricted: bool,
    /// The table's [`Acl::epoch`] this session was taken from (0: not known).
    pub epoch: u64,
    /// [`Acl::note_script_caller`] noted this session already: a script or an
    /// EXEC of a restricted client takes no lock to say who runs it.
    pub script_caller_noted: std::cell::Cell<bool>,
}

impl Session {
    pub fn new(user: Arc<User>) -> Session {
        Session {
            restricted: !user.unrestricted(),
            user,
            epoch: 0,
            script_caller_noted: std::cell::Cell::new(false),
        }
    }

    /// Take the user's rules as they are now. False when the user is gone
    /// (deleted, or replaced by ACL LOAD): the connection must close.
    pub fn refresh(&mut self, acl: &Acl) -> bool {
        let epoch = acl.epoch();
        match acl.user(&self.user.name) {
            Some(now) if now.id == self.user.id => {
                *self = Session {
                    epoch,
                    ..Session::new(now)
                };
                true
            }
            _ => false,
        }
    }

    pub fn name(&self) -> &[u8] {
        &self.user.name
    }
}

impl Acl {
    /// A table with only the `default` user.
    pub fn new(catalog: &'static Catalog) -> Acl {
        let mut users = Users::new();
        users.insert(
            b"default".to_vec(),
            Arc::new(User::default_user(catalog, 0)),
        );
        Acl {
            catalog,
            users: RwLock::new(Arc::new(users)),
            default_open: AtomicBool::new(true),
            next_id: AtomicU64::new(1),
            epoch: AtomicU64::new(1),
            log_max: AtomicUsize::new(LOG_MAX_DEFAULT),
            log: Mutex::default(),
            script_callers: Mutex::default(),
            any_script_callers: AtomicBool::new(false),
            script_callers_changes: AtomicU64::new(0),
        }
    }

    pub fn catalog(&self) -> &'static Catalog {
        self.catalog
    }

    /// The table as it is now.
    pub fn users(&self) -> Arc<Users> {
        self.users.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn user(&self, name: &[u8]) -> Option<Arc<User>> {
        self.users().get(name).cloned()
    }

    /// A new connection: its session (the `default` user) and whether it is
    /// authenticated already (`default` is on and needs no password).
    pub fn new_session(&self) -> (bool, Session) {
        let epoch = self.epoch();
        let user = self
            .user(b"default")
            .expect("the default user always exists");
        let session = Session {
            epoch,
            ..Session::new(user)
        };
        (self.default_open.load(Relaxed), session)
    }

    /// Changes made to the table so far (read once per read batch of a
    /// connection).
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Acquire)
    }

    /// Commands need AUTH first (Redis's `authRequired`, for a connection not
    /// authenticated).
    pub fn auth_required(&self) -> bool {
        !self.default_open.load(Relaxed)
    }

    /// The user, when `password` is right and the user is on.
    pub fn authenticate(&self, name: &[u8], password: &[u8]) -> Option<Arc<User>> {
        let user = self.user(name)?;
        (user.enabled && user.password_ok(password)).then_some(user)
    }

    /// Change the table under its lock; `f` sees a copy it may edit.
    fn edit<T>(&self, f: impl FnOnce(&mut Users) -> T) -> T {
        let mut guard = self.users.write().unwrap_or_else(|e| e.into_inner());
        let mut users = (**guard).clone();
        let out = f(&mut users);
        let open = users
            .get(b"default".as_slice())
            .is_some_and(|d| d.enabled && d.nopass);
        self.default_open.store(open, Relaxed);
        *guard = Arc::new(users);
        self.epoch.fetch_add(1, Release);
        out
    }

    /// A user id not given before.
    fn fresh_id(&self) -> u64 {
        self.next_id.fetch_add(1, Relaxed)
    }

    /// ACL SETUSER: every rule applies, or none (`all_channels`:
    /// `acl-pubsub-default allchannels`, what a new selector starts with).
    pub fn set_user(
        &self,
        name: &[u8],
        rules: &[&[u8]],
        all_channels: bool,
    ) -> Result<(), SetUserError> {
        if has_spaces(name) {
            return Err(SetUserError::BadName);
        }
        let rules = merge_selector_args(rules).map_err(SetUserError::Unmatched)?;
        let id = self.fresh_id();
        self.edit(|users| {
            let mut user = match users.get(name) {
                Some(u) => (**u).clone(),
                None => User::new(self.catalog, name, id, all_channels),
            };
            for rule in &rules {
                user.apply(self.catalog, rule, all_channels)
                    .map_err(|e| SetUserError::Rule(rule.clone(), e))?;
            }
            users.insert(name.to_vec(), Arc::new(user));
            Ok(())
        })
    }

    /// ACL DELUSER (without `default`, which the caller refuses): how many were
    /// deleted.
    pub fn delete_users(&self, names: &[&[u8]]) -> usize {
        self.edit(|users| names.iter().filter(|n| users.remove(**n).is_some()).count())
    }

    /// `requirepass`: the `default` user's one password, or `nopass` when empty
    /// (Redis's `ACLUpdateDefaultUserPassword`).
    pub fn set_default_password(&self, password: Option<&str>) {
        self.edit(|users| {
            let Some(current) = users.get(b"default".as_slice()) else {
                return;
            };
            let mut user = (**current).clone();
            let _ = user.apply(self.catalog, b"resetpass", false);
            let rule = match password {
                Some(p) => [b">".as_slice(), p.as_bytes()].concat(),
                None => b"nopass".to_vec(),
            };
            let _ = user.apply(self.catalog, &rule, false);
            users.insert(b"default".to_vec(), Arc::new(user));
        });
    }

    /// ACL LOAD / the ACL file at start: the new table (`default` keeps its id,
    /// so its connections stay; every other user is new).
    pub fn replace_all(&self, mut new: Users) {
        self.edit(|users| {
            let default_id = users.get(b"default".as_slice()).map_or(0, |d| d.id);
            let default = match new.remove(b"default".as_slice()) {
                Some(d) => d,
                None => Arc::new(User::default_user(self.catalog, default_id)),
            };
            let mut default = (*default).clone();
            default.id = default_id;
            new.insert(b"default".to_vec(), Arc::new(default));
            *users = new;
        });
    }

    /// A new user for a loaded table.
    pub fn new_user(&self, name: &[u8], all_channels: bool) -> User {
        User::new(self.catalog, name, self.fresh_id(), all_channels)
    }

    /// A restricted client is about to run a script (or EXEC, which may hold
    /// one) wherever its keys are: note who it runs as. The client's line
    /// (`client_info`) is taken when it is first noted as this user, not on
    /// every script (ACL LOG shows it for a refused call).
    pub fn note_script_caller(
        &self,
        client_id: u64,
        session: &Session,
        client_info: impl FnOnce() -> String,
    ) {
        let mut callers = self
            .script_callers
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let user = &session.user;
        let noted = callers
            .get(&client_id)
            .is_some_and(|c| c.user_id == user.id && c.user == user.name);
        if !noted {
            let caller = ScriptCaller {
                user: user.name.clone(),
                user_id: user.id,
                client_info: client_info(),
            };
            callers.insert(client_id, caller);
            self.any_script_callers.store(true, Relaxed);
            self.script_callers_changes.fetch_add(1, Release);
        }
        session.script_caller_noted.set(true);
    }

    /// The client closed, or runs as another user now.
    pub fn forget_client(&self, client_id: u64) {
        if !self.any_script_callers.load(Relaxed) {
            return;
        }
        let mut callers = self
            .script_callers
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if callers.remove(&client_id).is_some() {
            self.script_callers_changes.fetch_add(1, Release);
        }
        self.any_script_callers.store(!callers.is_empty(), Relaxed);
    }

    /// Some restricted client was noted: scripts must look up who runs them.
    pub fn has_script_callers(&self) -> bool {
        self.any_script_callers.load(Relaxed)
    }

    /// What a shard's copy of the script callers was taken at: the table's
    /// epoch and the callers' changes.
    pub fn script_callers_stamp(&self) -> (u64, u64) {
        (self.epoch(), self.script_callers_changes.load(Acquire))
    }

    /// Who the script of client `client_id` runs as, with the user's rules as
    /// they are now, when it was noted as restricted; a user that is gone
    /// leaves an empty user (no command allowed).
    pub fn script_caller(&self, client_id: u64) -> Option<(Session, String)> {
        if !self.any_script_callers.load(Relaxed) {
            return None;
        }
        let callers = self
            .script_callers
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let caller = callers.get(&client_id)?;
        let user = match self.user(&caller.user) {
            Some(user) if user.id == caller.user_id => user,
            _ => Arc::new(User::new(self.catalog, &caller.user, caller.user_id, false)),
        };
        Some((Session::new(user), caller.client_info.clone()))
    }

    /// `acllog-max-len` (the log is cut to it at its next entry, as Redis's).
    pub fn set_log_max(&self, max: usize) {
        self.log_max.store(max, Relaxed);
    }

    /// Record a refused command or failed AUTH, keeping at most
    /// `acllog-max-len` entries.
    pub fn log(&self, entry: log::Entry) {
        let max = self.log_max.load(Relaxed);
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        log.add(entry, max);
    }

    /// ACL LOG count.
    pub fn log_entries(&self, count: usize) -> Vec<log::Logged> {
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .newest(count)
    }

    /// ACL LOG RESET.
    pub fn log_reset(&self) {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl() -> Acl {
        Acl::new(Box::leak(Box::new(catalog::sample())))
    }

    #[test]
    fn setuser_applies_every_rule_or_none() {
        let acl = acl();
        let epoch = acl.epoch();
        assert!(acl.set_user(b"u", &[b"on", b">pw", b"+get"], false).is_ok());
        assert!(acl.epoch() > epoch);
        let before = acl.user(b"u").unwrap();
        let refused = acl.set_user(b"u", &[b"off", b"+nosuch"], false);
        assert_eq!(
            refused,
            Err(SetUserError::Rule(
                b"+nosuch".to_vec(),
                RuleError::UnknownCommand
            ))
        );
        assert_eq!(acl.user(b"u").unwrap(), before);
        assert_eq!(acl.set_user(b"a b", &[], false), Err(SetUserError::BadName));
        assert_eq!(
            acl.set_user(b"v", &[b"on", b"(+get"], false),
            Err(SetUserError::Unmatched(1))
        );
    }

    #[test]
    fn authentication_follows_the_users() {
        let acl = acl();
        assert!(!acl.auth_required());
        acl.set_default_password(Some("secret"));
        assert!(acl.auth_required());
        assert!(acl.authenticate(b"default", b"secret").is_some());
        assert!(acl.authenticate(b"default", b"other").is_none());
        acl.set_user(b"off", &[b"nopass"], false).unwrap();
        assert!(
            acl.authenticate(b"off", b"any").is_none(),
            "a user that is off"
        );
        acl.set_default_password(None);
        assert!(!acl.auth_required());
    }

    #[test]
    fn sessions_catch_up_and_end_with_their_user() {
        let acl = acl();
        acl.set_user(b"u", &[b"on", b"nopass", b"+get"], false)
            .unwrap();
        let mut session = Session::new(acl.user(b"u").unwrap());
        assert!(session.restricted);
        acl.set_user(b"u", &[b"+@all", b"allkeys", b"allchannels"], false)
            .unwrap();
        assert!(session.refresh(&acl));
        assert!(!session.restricted);
        assert_eq!(session.epoch, acl.epoch());
        assert_eq!(acl.delete_users(&[b"u", b"nobody"]), 1);
        assert!(!session.refresh(&acl), "its user is gone");
        // A user made again under the name is another user.
        acl.set_user(b"u", &[b"on"], false).unwrap();
        assert!(!session.refresh(&acl));
    }

    #[test]
    fn a_new_table_keeps_the_default_users_connections() {
        let acl = acl();
        let (_, mut default) = acl.new_session();
        acl.set_user(b"u", &[b"on"], false).unwrap();
        let mut other = Session::new(acl.user(b"u").unwrap());
        let mut loaded = Users::new();
        loaded.insert(b"u".to_vec(), Arc::new(acl.new_user(b"u", false)));
        acl.replace_all(loaded);
        assert!(default.refresh(&acl), "the default user stays itself");
        assert!(!other.refresh(&acl), "every other user is new");
        assert!(acl.user(b"default").unwrap().nopass);
    }

    #[test]
    fn script_callers_are_noted_once_and_forgotten() {
        let acl = acl();
        acl.set_user(b"u", &[b"on", b"+get"], false).unwrap();
        let session = Session::new(acl.user(b"u").unwrap());
        assert!(acl.script_caller(7).is_none());
        acl.note_script_caller(7, &session, || "first".into());
        acl.note_script_caller(7, &session, || unreachable!("noted already"));
        let (found, info) = acl.script_caller(7).unwrap();
        assert_eq!((found.name(), info.as_str()), (&b"u"[..], "first"));
        acl.forget_client(7);
        assert!(acl.script_caller(7).is_none());
    }
}
