//! MIGRATE from a script (`redis.call('MIGRATE', host, port, key, db, timeout
//! ...)`), which redis-server allows: the command is the server's, but the keys
//! it moves are the script's to delete.
//!
//! The host sends the keys as a client's MIGRATE does
//! ([`server_cmds::ScriptHost::migrate`]: the server's own connection to the
//! target, blocking the shard as the script already does); the keys the target
//! accepted are then deleted here by the engine's DEL inside the script, so they
//! are logged, replicated, seen by WATCH and keyspace events as that DEL, which
//! is how Redis propagates a MIGRATE. The keys are checked as any call's first:
//! a replica refuses the write, a cluster node keys outside its slots, and in
//! forward mode undeclared keys of other shards are brought here.

use super::{every_slot_is_local, Runner};
use crate::command::{CommandMeta, CommandTree};
use crate::scripting::{busy, server_cmds};
use crate::Engine;
use ruvio_resp::{Args, OwnedArgs, Protocol, Reply};

impl Runner<'_> {
    /// MIGRATE, its row `meta` checked ([`server_cmds::checked`]): its reply, or
    /// the error the call gets, in `self.out`.
    pub(super) fn migrate(&mut self, resp: Protocol, meta: &'static CommandMeta, args: Args<'_>) {
        if server_cmds::refuses_writes() {
            return self.fail(server_cmds::READONLY_REPLICA);
        }
        if !every_slot_is_local() {
            if let Err(text) = self.reach_foreign_keys(&meta.keys, args) {
                return self.fail(text);
            }
        }
        if self.one_slot {
            if let Err(text) = self.keep_one_slot(&meta.keys, args) {
                return self.fail(text);
            }
        }
        // A write, as for the engine's write commands (Redis's
        // SCRIPT_WRITE_DIRTY): not killable from here on, and never started
        // over, which would send the keys again.
        busy::note_write();
        self.wrote = true;
        let Some(migrated) = server_cmds::migrate(self.engine, self.ctx.db, self.ctx.now_ms, args)
        else {
            return self.fail(server_cmds::UNKNOWN.as_bytes());
        };
        server_cmds::monitor(self.ctx.db, args);
        if !migrated.moved.is_empty() {
            self.delete(resp, &migrated.moved);
        }
        self.out.clear();
        let mut reply = Reply::new(&mut self.out, resp);
        match migrated.reply {
            Ok(status) => reply.simple(status),
            Err(e) => e.write(&mut reply),
        }
    }

    /// `DEL keys...` run by the script (its reply dropped: the call answers
    /// MIGRATE's).
    fn delete(&mut self, resp: Protocol, keys: &[Vec<u8>]) {
        let del = OwnedArgs::from_iter(
            std::iter::once(&b"DEL"[..]).chain(keys.iter().map(Vec::as_slice)),
        );
        let handler = Engine::find_command(b"del")
            .and_then(|top| top.resolve(del.args()).ok())
            .and_then(|row| row.handler)
            .expect("DEL is a command of the engine's table");
        let engine = &mut *self.engine;
        let mut dropped = Vec::new();
        let mut reply = Reply::new(&mut dropped, resp);
        // DEL of existing keys cannot fail.
        let _ = self.ctx.run_inner(del.args(), |ctx| {
            handler(engine, ctx, del.args(), &mut reply)
        });
    }
}
