//! TLS on `tls-port`: rustls as a state machine between a connection's socket
//! and its plain buffers, on the shard's own core.
//!
//! Why this shape: the shard reads and writes sockets through its io_uring ring
//! (`shard/mod.rs`), not through streams, so TLS cannot be a stream wrapper.
//! Instead a TLS connection's receive lands in [`TlsConn`]'s ciphertext buffer,
//! and [`TlsConn::decrypt`] turns it into the same plain `input` a plain
//! connection's receive fills; its replies are encrypted by [`TlsConn::encrypt`]
//! into the buffer the ring sends. Everything between (parsing, dispatch, the
//! reply queue, output limits) is the plain connection's path unchanged. The
//! handshake is the same two calls: the client's records decrypt to nothing and
//! leave rustls wanting to write, which the shard sends as it sends replies.
//!
//! What the settings mean (Redis's names): `tls-cert-file` / `tls-key-file` (PEM,
//! the chain and its key), `tls-ca-cert-file` (PEM, the CAs client certificates
//! must chain to), `tls-auth-clients` (`yes`: a client certificate is required,
//! `optional`: checked if given, `no`: not asked for), `tls-ca-cert-dir` (every
//! certificate of a directory's files, beside or instead of the file),
//! `tls-key-file-pass` (the passphrase of an encrypted PKCS#8 key),
//! `tls-protocols`, `tls-ciphersuites` (TLS 1.3), `tls-ciphers` (TLS 1.2),
//! `tls-prefer-server-ciphers` (the server's suite order wins) and
//! `tls-session-caching` / `-size` / `-timeout` (resumption by session id and
//! TLS 1.3 tickets, one cache for every shard). OpenSSL's names are read in
//! [`options`]. CONFIG SET of any of them loads the whole set again.

pub mod bus;
mod options;
pub use options::{SessionCaches, SESSION_CACHE_ENTRIES_MAX};

/// Which session cache a load takes: the one the shards share (a start, or a
/// shard following another's CONFIG SET), or a new one (the shard that took the
/// CONFIG SET).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sessions {
    Current,
    Renew,
}

use crate::config::TlsFiles;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection};
use std::io::{Read, Write};

use std::sync::Arc;

/// The TLS settings of the server, from which each connection's session starts.
#[derive(Clone)]
pub struct TlsSettings {
    config: Arc<ServerConfig>,
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsSettings")
    }
}

impl TlsSettings {
    /// Load the certificate, key and CAs; an error names the file or setting at fault.
    pub fn load(
        files: &TlsFiles<'_>,
        caches: &SessionCaches,
        sessions: Sessions,
    ) -> Result<TlsSettings, String> {
        if files.cert_file.is_empty() || files.key_file.is_empty() {
            return Err("tls-port needs tls-cert-file and tls-key-file".into());
        }
        let provider = Arc::new(options::crypto_provider(files.ciphersuites, files.ciphers)?);
        let versions = options::protocol_versions(files.protocols)?;
        let chain = certificate_chain("tls-cert-file", files.cert_file)?;
        let key = options::private_key(files.key_file, files.key_file_pass)?;
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| format!("tls-protocols / tls-ciphers / tls-ciphersuites: {e}"))?;
        let builder = match files.auth_clients {
            "no" => builder.with_no_client_auth(),
            mode => {
                let roots = client_roots(files)?;
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
                let verifier = match mode {
                    "optional" => verifier.allow_unauthenticated(),
                    _ => verifier,
                };
                let verifier = verifier
                    .build()
                    .map_err(|e| format!("TLS client verifier: {e}"))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder
            .with_single_cert(chain, key)
            .map_err(|e| format!("tls-cert-file / tls-key-file: {e}"))?;
        config.ignore_client_order = files.prefer_server_ciphers;
        let (caching, size, timeout_s) = (
            files.session_caching,
            files.session_cache_size,
            files.session_cache_timeout_s,
        );
        config.session_storage = match sessions {
            Sessions::Current => caches.current(caching, size, timeout_s),
            Sessions::Renew => caches.renew(caching, size, timeout_s),
        };
        if !files.session_caching {
            // No cache: no TLS 1.3 ticket either (they would name nothing).
            config.send_tls13_tickets = 0;
        }
        Ok(TlsSettings {
            config: Arc::new(config),
        })
    }

    /// A new server session for an accepted connection.
    pub fn session(&self) -> Result<TlsConn, String> {
        let conn = ServerConnection::new(self.config.clone()).map_err(|e| e.to_string())?;
        Ok(TlsConn {
            conn,
            cipher_in: Vec::with_capacity(CIPHER_IN_BYTES),
        })
    }
}

/// The certificates of PEM file `path`, setting `name`'s (a chain, leaf first).
fn certificate_chain(name: &str, path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| format!("{name} {path}: {e}"))
}

/// The CAs client certificates must chain to: `tls-ca-cert-file`'s and those of
/// `tls-ca-cert-dir`'s files (one of them at least, as Redis asks).
fn client_roots(files: &TlsFiles<'_>) -> Result<RootCertStore, String> {
    if files.ca_cert_file.is_empty() && files.ca_cert_dir.is_empty() {
        return Err(format!(
            "tls-auth-clients {} needs tls-ca-cert-file or tls-ca-cert-dir (or set tls-auth-clients no)",
            files.auth_clients
        ));
    }
    let mut roots = RootCertStore::empty();
    if !files.ca_cert_file.is_empty() {
        for cert in CertificateDer::pem_file_iter(files.ca_cert_file)
            .map_err(|e| format!("tls-ca-cert-file {}: {e}", files.ca_cert_file))?
        {
            let cert = cert.map_err(|e| format!("tls-ca-cert-file {}: {e}", files.ca_cert_file))?;
            roots
                .add(cert)
                .map_err(|e| format!("tls-ca-cert-file {}: {e}", files.ca_cert_file))?;
        }
    }
    if !files.ca_cert_dir.is_empty() {
        for cert in options::dir_certificates(files.ca_cert_dir)? {
            roots
                .add(cert)
                .map_err(|e| format!("tls-ca-cert-dir {}: {e}", files.ca_cert_dir))?;
        }
    }
    Ok(roots)
}

/// Bytes a TLS connection's receive asks for at once: one full TLS record and
/// its framing.
pub const CIPHER_IN_BYTES: usize = 16 * 1024 + 512;

/// One connection's TLS session and the ciphertext received but not yet read.
pub struct TlsConn {
    conn: ServerConnection,
    /// Where the ring's receive writes (its spare capacity) and rustls reads.
    pub cipher_in: Vec<u8>,
}

impl std::fmt::Debug for TlsConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConn")
            .field("cipher_in", &self.cipher_in.len())
            .finish()
    }
}

/// The session failed (a bad record, a refused certificate, a closed stream):
/// the connection closes. The text is for the log.
#[derive(Debug)]
pub struct TlsFailed(pub String);

impl TlsConn {
    /// Feed the ciphertext received into the session and append what it
    /// decrypts to `plain`. A handshake record decrypts to nothing and leaves the
    /// session wanting to write ([`TlsConn::wants_write`]).
    pub fn decrypt(&mut self, plain: &mut Vec<u8>) -> Result<(), TlsFailed> {
        let mut at = 0;
        while at < self.cipher_in.len() {
            let mut rest = &self.cipher_in[at..];
            let read = self
                .conn
                .read_tls(&mut rest)
                .map_err(|e| TlsFailed(e.to_string()))?;
            at += read;
            let state = self
                .conn
                .process_new_packets()
                .map_err(|e| TlsFailed(e.to_string()))?;
            let mut want = state.plaintext_bytes_to_read();
            if want > 0 {
                plain.reserve(want);
                while want > 0 {
                    let start = plain.len();
                    plain.resize(start + want, 0);
                    let got = self
                        .conn
                        .reader()
                        .read(&mut plain[start..])
                        .map_err(|e| TlsFailed(e.to_string()))?;
                    plain.truncate(start + got);
                    if got == 0 {
                        break;
                    }
                    want -= got;
                }
            }
            if read == 0 {
                break;
            }
        }
        self.cipher_in.drain(..at);
        Ok(())
    }

    /// Encrypt `plain` and append every record the session has to send
    /// (handshake ones included) to `out`.
    pub fn encrypt(&mut self, plain: &[u8], out: &mut Vec<u8>) -> Result<(), TlsFailed> {
        let mut rest = plain;
        loop {
            // The session takes a bounded amount of plaintext at a time: write,
            // move its records out, write the rest.
            let taken = match rest.is_empty() {
                true => 0,
                false => self
                    .conn
                    .writer()
                    .write(rest)
                    .map_err(|e| TlsFailed(e.to_string()))?,
            };
            rest = &rest[taken..];
            let mut moved = false;
            while self.conn.wants_write() {
                self.conn
                    .write_tls(out)
                    .map_err(|e| TlsFailed(e.to_string()))?;
                moved = true;
            }
            if rest.is_empty() {
                return Ok(());
            }
            if taken == 0 && !moved {
                return Err(TlsFailed("the session takes no more plaintext".into()));
            }
        }
    }

    /// The session has records to send (the handshake's, or an alert).
    pub fn wants_write(&self) -> bool {
        self.conn.wants_write()
    }
}
