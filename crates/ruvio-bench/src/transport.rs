//! How a connection reaches the server: a plain TCP socket, or TLS over it
//! (`--tls`), and what it says before the load starts (`--tracking`).
//!
//! Why TLS is a state machine here and not a stream wrapper: the load loop polls
//! non-blocking sockets with epoll and must never block or spin on a socket that
//! has no room. rustls's [`ClientConnection`] is driven explicitly: plaintext in
//! through `writer()`, records out with `write_tls` until the socket would block
//! (what is left stays in the session and makes the connection watch for
//! writability, [`Transport::wants_write`]), records in with `read_tls` and
//! `process_new_packets`, plaintext out through `reader()`. The handshake and the
//! setup commands run before the socket turns non-blocking, so the measured loop
//! only ever moves application data, as the server's does.
//!
//! `--tracking` sends `HELLO 3` and `CLIENT TRACKING ON` on every connection,
//! so the server keeps a tracking table entry per key read and answers in RESP3;
//! the invalidation pushes that arrive between replies are counted by the reply
//! scanner.

use std::io::{self, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, SignatureScheme,
};

use crate::reply::{decode, Value};

/// How long a setup step (connect, handshake, a setup reply) may take.
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

/// Largest setup reply accepted (CLUSTER SLOTS of a big cluster fits easily).
const SETUP_REPLY_BYTES_MAX: usize = 16 * 1024 * 1024;

/// The TLS options of the command line (redis-benchmark's names).
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    /// `--cacert`: PEM file of the CAs the server's certificate must chain to.
    pub ca_cert: Option<String>,
    /// `--cert` / `--key`: a client certificate (PEM) and its key.
    pub cert: Option<String>,
    pub key: Option<String>,
    /// `--sni`: the name to ask for and verify (default: the host).
    pub sni: Option<String>,
    /// `--insecure`: accept any server certificate.
    pub insecure: bool,
}

/// Opens connections the same way for every thread.
pub struct Connector {
    tls: Option<(Arc<ClientConfig>, Option<String>)>,
    /// Commands each load connection sends (and sees succeed) before the load.
    setup: Vec<Vec<String>>,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connector")
            .field("tls", &self.tls.is_some())
            .field("setup", &self.setup)
            .finish()
    }
}

impl Connector {
    /// TLS when `tls` is given, and tracking setup when `tracking` is set.
    pub fn new(tls: Option<&TlsOptions>, tracking: bool) -> Result<Connector, String> {
        let tls = match tls {
            Some(options) => Some((Arc::new(client_config(options)?), options.sni.clone())),
            None => None,
        };
        let setup = match tracking {
            true => vec![
                vec!["HELLO".into(), "3".into()],
                vec!["CLIENT".into(), "TRACKING".into(), "ON".into()],
            ],
            false => Vec::new(),
        };
        Ok(Connector { tls, setup })
    }

    /// A blocking connection (handshake done, no setup), for setup commands.
    pub fn open(&self, host: &str, port: u16) -> Result<Transport, String> {
        let stream =
            TcpStream::connect((host, port)).map_err(|e| format!("connect {host}:{port}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let set_timeouts = |s: &TcpStream, t: Option<Duration>| {
            s.set_read_timeout(t)
                .and_then(|_| s.set_write_timeout(t))
                .map_err(|e| e.to_string())
        };
        set_timeouts(&stream, Some(SETUP_TIMEOUT))?;
        let mut transport = match &self.tls {
            None => Transport::Plain(stream),
            Some((config, sni)) => {
                let name = sni.as_deref().unwrap_or(host);
                let name = ServerName::try_from(name.to_string())
                    .map_err(|e| format!("TLS server name {name:?}: {e}"))?;
                let conn = ClientConnection::new(config.clone(), name)
                    .map_err(|e| format!("TLS {host}:{port}: {e}"))?;
                Transport::Tls(Box::new(TlsStream { sock: stream, conn }))
            }
        };
        if let Transport::Tls(t) = &mut transport {
            while t.conn.is_handshaking() {
                t.conn
                    .complete_io(&mut t.sock)
                    .map_err(|e| format!("TLS handshake with {host}:{port}: {e}"))?;
            }
        }
        Ok(transport)
    }

    /// A connection for the load loop: opened, set up, then non-blocking.
    pub fn connect(&self, host: &str, port: u16) -> Result<Transport, String> {
        let mut transport = self.open(host, port)?;
        for args in &self.setup {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            if let Value::Error(e) = transport.command(&args)? {
                return Err(format!("{} on {host}:{port}: {e}", args.join(" ")));
            }
        }
        let sock = transport.socket();
        sock.set_read_timeout(None)
            .and_then(|_| sock.set_write_timeout(None))
            .and_then(|_| sock.set_nonblocking(true))
            .map_err(|e| e.to_string())?;
        Ok(transport)
    }
}

/// A client configuration from the options: the CAs (or none checked), and the
/// client certificate when given.
fn client_config(options: &TlsOptions) -> Result<ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let builder = if options.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServer(provider)))
    } else {
        let Some(path) = &options.ca_cert else {
            return Err("--tls needs --cacert FILE (or --insecure)".into());
        };
        let mut roots = RootCertStore::empty();
        for cert in
            CertificateDer::pem_file_iter(path).map_err(|e| format!("--cacert {path}: {e}"))?
        {
            let cert = cert.map_err(|e| format!("--cacert {path}: {e}"))?;
            roots
                .add(cert)
                .map_err(|e| format!("--cacert {path}: {e}"))?;
        }
        builder.with_root_certificates(roots)
    };
    match (&options.cert, &options.key) {
        (None, None) => Ok(builder.with_no_client_auth()),
        (Some(cert), Some(key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("--cert {cert}: {e}"))?;
            let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("--key {key}: {e}"))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("--cert / --key: {e}"))
        }
        _ => Err("--cert and --key go together".into()),
    }
}

/// `--insecure`: any certificate is accepted, but the handshake's signatures
/// are still checked (the session is encrypted, just not authenticated).
#[derive(Debug)]
struct AnyServer(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// One TLS session over its socket.
pub struct TlsStream {
    sock: TcpStream,
    conn: ClientConnection,
}

/// A connection's byte stream, plain or TLS; `read` and `write` move plaintext
/// and report `WouldBlock` as a non-blocking socket does.
pub enum Transport {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

impl Transport {
    /// The socket (for epoll and socket options).
    pub fn socket(&self) -> &TcpStream {
        match self {
            Transport::Plain(s) => s,
            Transport::Tls(t) => &t.sock,
        }
    }

    pub fn fd(&self) -> RawFd {
        self.socket().as_raw_fd()
    }

    /// TLS records are waiting for room in the socket.
    pub fn wants_write(&self) -> bool {
        match self {
            Transport::Plain(_) => false,
            Transport::Tls(t) => t.conn.wants_write(),
        }
    }

    /// Send what the session holds; `WouldBlock` leaves the rest for later.
    pub fn flush_records(&mut self) -> io::Result<()> {
        let Transport::Tls(t) = self else {
            return Ok(());
        };
        while t.conn.wants_write() {
            match t.conn.write_tls(&mut t.sock) {
                Ok(0) => {
                    return Err(io::Error::new(
                        ErrorKind::WriteZero,
                        "server stopped reading",
                    ))
                }
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Write plaintext: the bytes taken, or `WouldBlock` when none could be.
    pub fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => s.write(buf),
            Transport::Tls(_) => {
                self.flush_records()?;
                let Transport::Tls(t) = self else {
                    unreachable!("matched above")
                };
                if t.conn.wants_write() {
                    // Records from before are still queued: take no more plaintext
                    // until they are out, as a full socket buffer would.
                    return Err(ErrorKind::WouldBlock.into());
                }
                let taken = t.conn.writer().write(buf)?;
                self.flush_records()?;
                match taken {
                    0 if !buf.is_empty() => Err(ErrorKind::WouldBlock.into()),
                    n => Ok(n),
                }
            }
        }
    }

    /// Read plaintext: 0 at the end of the stream, `WouldBlock` when nothing
    /// has arrived. A TLS read fills `buf` as far as the session has plaintext,
    /// so a short read means the session holds none (what is left is in the
    /// socket, and epoll reports it), as a short read of a plain socket does.
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let t = match self {
            Transport::Plain(s) => return s.read(buf),
            Transport::Tls(t) => t,
        };
        let mut got = 0;
        while got < buf.len() {
            match t.conn.reader().read(&mut buf[got..]) {
                // The server's close_notify.
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock && got > 0 => break,
                Err(e) if e.kind() == ErrorKind::WouldBlock => match t.conn.read_tls(&mut t.sock) {
                    Ok(0) => return Ok(0),
                    Ok(_) => {
                        t.conn
                            .process_new_packets()
                            .map_err(|e| io::Error::new(ErrorKind::InvalidData, e))?;
                    }
                    Err(e) => return Err(e),
                },
                Err(e) => return Err(e),
            }
        }
        Ok(got)
    }

    /// Send one command and wait for its reply (blocking connections only).
    pub fn command(&mut self, args: &[&str]) -> Result<Value, String> {
        let mut req = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            req.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        let mut at = 0;
        while at < req.len() {
            at += self.write(&req[at..]).map_err(|e| e.to_string())?;
        }
        loop {
            self.flush_records().map_err(|e| e.to_string())?;
            if !self.wants_write() {
                break;
            }
        }
        let mut buf = Vec::new();
        let mut chunk = [0u8; 65536];
        loop {
            if let Some((value, _)) = decode(&buf).map_err(|e| e.0)? {
                return Ok(value);
            }
            let n = self.read(&mut chunk).map_err(|e| e.to_string())?;
            if n == 0 || buf.len() > SETUP_REPLY_BYTES_MAX {
                return Err("the server closed or sent too much during setup".into());
            }
            buf.extend_from_slice(&chunk[..n]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_options_are_checked_before_connecting() {
        let err = |o: TlsOptions| client_config(&o).err().unwrap_or_default();
        assert!(err(TlsOptions::default()).contains("--cacert"));
        assert!(client_config(&TlsOptions {
            insecure: true,
            ..TlsOptions::default()
        })
        .is_ok());
        let half = TlsOptions {
            insecure: true,
            cert: Some("client.crt".into()),
            ..TlsOptions::default()
        };
        assert!(err(half).contains("go together"));
        let missing = TlsOptions {
            ca_cert: Some("/nonexistent/ca.crt".into()),
            ..TlsOptions::default()
        };
        assert!(err(missing).contains("/nonexistent/ca.crt"));
    }

    #[test]
    fn tracking_sets_up_resp3_first() {
        let c = Connector::new(None, true).unwrap();
        assert_eq!(c.setup[0], ["HELLO", "3"]);
        assert_eq!(c.setup[1], ["CLIENT", "TRACKING", "ON"]);
        assert!(Connector::new(None, false).unwrap().setup.is_empty());
    }
}
