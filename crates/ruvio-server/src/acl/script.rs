//! The user a script runs as: a restricted client's EVAL / FCALL installs the
//! engine's check of each `redis.call` ([`ruvio_engine::scripting::set_acl_check`])
//! for the length of its run ([`enter`]); an unrestricted client installs none,
//! so its scripts' calls are not checked at all.
//!
//! A script runs where its keys are (another shard, borrowed keys, an EXEC), so
//! the caller is found by client id ([`super::Acl::script_caller`]), noted when
//! the restricted client sent the script.

use super::check::{check, Denied};
use super::log::Entry;
use super::{Acl, Session};
use ruvio_engine::CommandMeta;
use ruvio_resp::Args;
use std::cell::RefCell;
use std::sync::Arc;

/// The running script's caller.
struct Caller {
    session: Session,
    acl: Arc<Acl>,
    /// The caller's CLIENT LIST line (ACL LOG's `client-info`).
    client_info: String,
}

thread_local! {
    static CALLER: RefCell<Option<Caller>> = const { RefCell::new(None) };
}

/// The check is installed until this is dropped.
pub struct Entered(Option<ruvio_engine::scripting::AclCheck>);

impl Drop for Entered {
    fn drop(&mut self) {
        ruvio_engine::scripting::set_acl_check(self.0.take());
        CALLER.with_borrow_mut(|c| *c = None);
    }
}

/// A restricted `session` starts a script: check its calls until the guard
/// drops. `client_info` is asked only then.
pub fn enter(
    session: &Session,
    acl: &Arc<Acl>,
    client_info: impl FnOnce() -> String,
) -> Option<Entered> {
    if !session.restricted {
        return None;
    }
    CALLER.with_borrow_mut(|c| {
        *c = Some(Caller {
            session: session.clone(),
            acl: acl.clone(),
            client_info: client_info(),
        })
    });
    Some(Entered(ruvio_engine::scripting::set_acl_check(Some(
        check_call,
    ))))
}

/// The engine's check of one call.
fn check_call(meta: &CommandMeta, args: Args<'_>, log: bool) -> Result<(), &'static str> {
    CALLER.with_borrow(|caller| {
        let Some(caller) = caller else {
            return Ok(());
        };
        let Some(bit) = caller.acl.catalog().bit_of(meta.name) else {
            return Ok(());
        };
        let denied = match check(&caller.session.user, bit, meta, args) {
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
