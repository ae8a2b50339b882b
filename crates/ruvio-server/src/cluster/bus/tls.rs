//! The bus under `tls-cluster yes`: each link a rustls session between its
//! socket and its plain buffers, as redis-server runs it (every link TLS, the
//! accepting side asking the connecting side for a certificate of the CA).
//!
//! Why here and so small: the links poll their sockets on the shard's tick
//! (`links.rs`), so a session is a state machine the same pass feeds and
//! drains; the configurations come from the TLS settings, which the network
//! layer reads (`net::tls::bus`), and reach the links ready made.

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, Connection, ServerConfig, ServerConnection};
use std::sync::Arc;

/// What a TLS bus starts its links' sessions from.
#[derive(Clone)]
pub struct BusTls {
    /// For links other nodes open: a client certificate is required.
    pub server: Arc<ServerConfig>,
    /// For links this node opens: the peer's chain is checked against the
    /// CAs, its name is not (OpenSSL's `SSL_VERIFY_PEER`, as Redis sets it).
    pub client: Arc<ClientConfig>,
}

impl std::fmt::Debug for BusTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BusTls")
    }
}

impl BusTls {
    /// The session of a link another node opened.
    pub fn accepted(&self) -> Result<Connection, String> {
        ServerConnection::new(self.server.clone())
            .map(Connection::from)
            .map_err(|e| e.to_string())
    }

    /// The session of a link this node opens to `ip`.
    pub fn connecting(&self, ip: &str) -> Result<Connection, String> {
        let name = ServerName::try_from(ip.to_string()).map_err(|e| e.to_string())?;
        ClientConnection::new(self.client.clone(), name)
            .map(Connection::from)
            .map_err(|e| e.to_string())
    }
}
