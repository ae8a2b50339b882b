//! Who runs a command and how ([`Caller`]), as it travels with the command: to
//! the shard that owns its keys, to a parked retry, into a transaction's queue
//! or a borrowing. Plain data read off the client's connection, kept here with
//! the connection so that every floor that carries a command (the mesh,
//! transactions, the shard's execution) can name it.

use ruvio_resp::Protocol;

/// Who runs a command and how.
#[derive(Clone, Copy, Debug)]
pub struct Caller {
    pub client_id: u64,
    pub db: usize,
    pub proto: Protocol,
    pub no_touch: bool,
    /// False inside a context that must not block (a timed-out retry, later MULTI).
    pub may_block: bool,
    /// Running a cross-shard command on borrowed keys (see `mesh::lending`):
    /// lent keys are not waited for, and the keys written are reported.
    pub borrowing: bool,
    /// CLIENT TRACKING as the command carries it (bits 0: not tracking).
    pub tracking: Tracked,
}

impl Caller {
    /// How `client` (connected to shard `client_shard`) runs engine commands.
    #[inline(always)]
    pub fn of(client: &crate::net::conn::ClientState, client_shard: usize) -> Caller {
        Caller {
            client_id: client.id,
            db: client.db,
            proto: client.proto,
            no_touch: client.no_touch,
            may_block: !client.in_exec,
            borrowing: false,
            tracking: Tracked {
                bits: client.tracking.command_bits(),
                shard: client_shard,
            },
        }
    }
}

/// CLIENT TRACKING as a command carries it to the shard that runs it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tracked {
    /// `net::conn::tracking_command` bits.
    pub bits: u8,
    /// The client's shard: where its invalidations go.
    pub shard: usize,
}
