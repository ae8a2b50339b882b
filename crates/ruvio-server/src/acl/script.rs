//! The user a script runs as: a restricted client's EVAL / FCALL installs the
//! engine's check of each `redis.call` ([`ruvio_engine::scripting::set_acl_check`])
//! for the length of its run ([`enter`]); an unrestricted client installs none,
//! so its scripts' calls are not checked at all.
//!
//! A script runs where its keys are (another shard, borrowed keys, an EXEC), so
//! the caller is found by client id ([`super::Acl::script_caller`]), noted when
//! the restricted client sent the script.
//!
//! Why a copy per shard: that lookup takes the table's locks and builds the
//! caller's session, which cost a restricted client's EVALSHA a tenth of its
//! time when done per script. Each shard keeps what it looked up, by client id,
//! and starts over when the table or the noted callers change
//! ([`super::Acl::script_callers_stamp`]), so a script of a known client finds
//! its caller in one map lookup.

use super::check::{check_row, CheckRow, Denied};
use super::log::Entry;
use super::{Acl, Session};
use ahash::AHashMap;
use ruvio_engine::CommandMeta;
use ruvio_resp::Args;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

/// A restricted script caller.
struct Caller {
    session: Session,
    acl: Arc<Acl>,
    /// The caller's CLIENT LIST line (ACL LOG's `client-info`).
    client_info: String,
    /// The row called last, by the address of its meta, with what the check
    /// reads of it: a script calls the same few commands over and over, and
    /// the catalog's lookup by name hashes and compares the name on every
    /// call. Every row a script reaches is a static table's (the engine's
    /// families and the server's rows), never freed, so an equal address is
    /// the same row.
    last_row: Cell<Option<(*const CommandMeta, CheckRow)>>,
}

impl Caller {
    /// What the check reads of the row `meta` (`None`: not in the catalog).
    #[inline]
    fn row_of(&self, meta: &CommandMeta) -> Option<CheckRow> {
        match self.last_row.get() {
            Some((at, row)) if std::ptr::eq(at, meta) => Some(row),
            _ => {
                let row = CheckRow::new(meta, self.acl.catalog().bit_of(meta.name)?);
                self.last_row.set(Some((meta, row)));
                Some(row)
            }
        }
    }
}

/// This shard's copy of the callers it looked up (`None`: not restricted).
#[derive(Default)]
struct Known {
    stamp: (u64, u64),
    by_client: AHashMap<u64, Option<Rc<Caller>>>,
    /// The client whose script started here last, with its entry: a client
    /// sends its scripts in runs (a pipeline), and the map's hash cost a
    /// restricted EVALSHA a tenth of the check's instructions.
    last: Option<(u64, Option<Rc<Caller>>)>,
}

thread_local! {
    static KNOWN: RefCell<Known> = RefCell::default();
    /// The running script's caller.
    static CURRENT: RefCell<Option<Rc<Caller>>> = const { RefCell::new(None) };
}

/// The check is installed until this is dropped.
pub struct Entered(Option<ruvio_engine::scripting::AclCheck>);

impl Drop for Entered {
    fn drop(&mut self) {
        ruvio_engine::scripting::set_acl_check(self.0.take());
        CURRENT.with_borrow_mut(|c| *c = None);
    }
}

/// Client `client_id` starts a script here: when it was noted as restricted,
/// check the script's calls until the guard drops.
pub fn enter(client_id: u64, acl: &Arc<Acl>) -> Option<Entered> {
    if !acl.has_script_callers() {
        return None;
    }
    let stamp = acl.script_callers_stamp();
    let caller = KNOWN.with_borrow_mut(|known| {
        if known.stamp != stamp {
            known.by_client.clear();
            known.last = None;
            known.stamp = stamp;
        }
        if let Some((id, caller)) = &known.last {
            if *id == client_id {
                return caller.clone();
            }
        }
        let caller = known
            .by_client
            .entry(client_id)
            .or_insert_with(|| {
                let (session, client_info) = acl.script_caller(client_id)?;
                session.restricted.then(|| {
                    Rc::new(Caller {
                        session,
                        acl: acl.clone(),
                        client_info,
                        last_row: Cell::new(None),
                    })
                })
            })
            .clone();
        known.last = Some((client_id, caller.clone()));
        caller
    })?;
    CURRENT.with_borrow_mut(|c| *c = Some(caller));
    Some(Entered(ruvio_engine::scripting::set_acl_check(Some(
        check_call,
    ))))
}

/// The engine's check of one call.
fn check_call(meta: &CommandMeta, args: Args<'_>, log: bool) -> Result<(), &'static str> {
    CURRENT.with_borrow(|caller| {
        let Some(caller) = caller else {
            return Ok(());
        };
        let Some(row) = caller.row_of(meta) else {
            return Ok(());
        };
        let denied = match check_row(&caller.session.user, &row, meta, args) {
            Ok(()) => return Ok(()),
            Err(d) => d,
        };
        if log {
            let object = match denied {
                Denied::Command => meta.name.as_bytes(),
                Denied::Key(i) | Denied::Channel(i) => args.get(i),
            };
            let entry = Entry {
                count: 1,
                reason: denied.log_reason(),
                context: "lua",
                object: object.to_vec(),
                username: caller.session.name().to_vec(),
                at_ms: crate::clock::unix_ms(),
                client_info: caller.client_info.clone(),
            };
            caller.acl.log(entry);
        }
        Err(denied.script_line())
    })
}
