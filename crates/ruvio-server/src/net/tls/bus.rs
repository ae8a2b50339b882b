//! The cluster bus's TLS configurations under `tls-cluster yes`, from the same
//! settings as the TLS port, with redis-server's rules for the bus: the side
//! that accepts a link always asks for a client certificate of the CAs
//! (`tls-ca-cert-file` / `-dir`, whatever `tls-auth-clients` says), the side
//! that opens one shows `tls-client-cert-file` / `-key-file` (or, without
//! them, `tls-cert-file` / `-key-file`) and checks the peer's chain against the
//! CAs without matching its name (OpenSSL's `SSL_VERIFY_PEER` without a host
//! check, as Redis sets it: nodes are reached at whatever address gossip
//! gives). The links run the sessions (`cluster::bus::tls`).

use super::{certificate_chain, client_roots, options};
use crate::cluster::bus::tls::BusTls;
use crate::config::TlsFiles;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, ServerConfig, SignatureScheme,
};
use std::sync::Arc;

/// The bus's configurations; an error names the setting at fault.
pub fn bus_tls(files: &TlsFiles<'_>) -> Result<BusTls, String> {
    if files.cert_file.is_empty() || files.key_file.is_empty() {
        return Err("tls-cluster needs tls-cert-file and tls-key-file".into());
    }
    if files.ca_cert_file.is_empty() && files.ca_cert_dir.is_empty() {
        return Err("tls-cluster needs tls-ca-cert-file or tls-ca-cert-dir".into());
    }
    let provider = Arc::new(options::crypto_provider(files.ciphersuites, files.ciphers)?);
    let versions = options::protocol_versions(files.protocols)?;
    let roots = Arc::new(client_roots(files)?);
    let settings_error =
        |e: rustls::Error| format!("tls-protocols / tls-ciphers / tls-ciphersuites: {e}");

    let clients = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
        .build()
        .map_err(|e| format!("TLS client verifier: {e}"))?;
    let server = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(settings_error)?
        .with_client_cert_verifier(clients)
        .with_single_cert(
            certificate_chain("tls-cert-file", files.cert_file)?,
            options::private_key(files.key_file, files.key_file_pass)?,
        )
        .map_err(|e| format!("tls-cert-file / tls-key-file: {e}"))?;

    let (cert_name, cert, key, pass) = match files.client_cert_file {
        "" => (
            "tls-cert-file",
            files.cert_file,
            files.key_file,
            files.key_file_pass,
        ),
        client => (
            "tls-client-cert-file",
            client,
            files.client_key_file,
            files.client_key_file_pass,
        ),
    };
    let peers = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
        .build()
        .map_err(|e| format!("TLS server verifier: {e}"))?;
    let client = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(settings_error)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(ChainOnly(peers)))
        .with_client_auth_cert(
            certificate_chain(cert_name, cert)?,
            options::private_key(key, pass)?,
        )
        .map_err(|e| format!("{cert_name} / its key: {e}"))?;
    Ok(BusTls {
        server: Arc::new(server),
        client: Arc::new(client),
    })
}

/// A peer's certificate is good when its chain is: WebPKI's checks, less the
/// name's (which WebPKI makes last, once the chain stands).
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let checked =
            self.0
                .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now);
        match checked {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
