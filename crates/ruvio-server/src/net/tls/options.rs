//! The TLS settings that shape the handshake rather than name its certificate:
//! `tls-protocols`, `tls-ciphersuites`, `tls-ciphers`, `tls-key-file-pass`,
//! `tls-ca-cert-dir` and the session cache, each read into what rustls takes.
//!
//! Why a translation and not OpenSSL's strings as they are: configurations are
//! written for Redis, whose TLS is OpenSSL, so the names are OpenSSL's
//! (`TLSv1.2`, `TLS_AES_128_GCM_SHA256`, `ECDHE-RSA-AES128-GCM-SHA256`). Each
//! name rustls has a suite or version for is mapped to it; a name it has none for
//! (TLSv1.1, a CBC or CCM suite) is refused with the setting and the names that
//! are offered, as Redis refuses a cipher list OpenSSL cannot use, rather than
//! accepted and silently not honoured.

use rustls::crypto::ring::cipher_suite as suite;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{NoServerSessionStorage, ServerSessionMemoryCache, StoresServerSessions};
use rustls::{SupportedCipherSuite, SupportedProtocolVersion};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// The TLS 1.3 suites by their OpenSSL (and RFC 8446) names, in rustls's order
/// of preference.
fn tls13_table() -> [(&'static str, SupportedCipherSuite); 3] {
    [
        ("TLS_AES_256_GCM_SHA384", suite::TLS13_AES_256_GCM_SHA384),
        ("TLS_AES_128_GCM_SHA256", suite::TLS13_AES_128_GCM_SHA256),
        (
            "TLS_CHACHA20_POLY1305_SHA256",
            suite::TLS13_CHACHA20_POLY1305_SHA256,
        ),
    ]
}

/// The TLS 1.2 suites by their OpenSSL names, in rustls's order of preference.
fn tls12_table() -> [(&'static str, SupportedCipherSuite); 6] {
    [
        (
            "ECDHE-ECDSA-AES256-GCM-SHA384",
            suite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        ),
        (
            "ECDHE-ECDSA-AES128-GCM-SHA256",
            suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        ),
        (
            "ECDHE-ECDSA-CHACHA20-POLY1305",
            suite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        ),
        (
            "ECDHE-RSA-AES256-GCM-SHA384",
            suite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        ),
        (
            "ECDHE-RSA-AES128-GCM-SHA256",
            suite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        ),
        (
            "ECDHE-RSA-CHACHA20-POLY1305",
            suite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        ),
    ]
}

/// OpenSSL cipher-list words that select every TLS 1.2 suite rustls has (all of
/// them are ECDHE with an AEAD, so each of these classes holds them all).
const TLS12_ALL_WORDS: [&str; 6] = ["DEFAULT", "ALL", "HIGH", "ECDHE", "EECDH", "AESGCM"];

/// OpenSSL classes a `!` or `-` may exclude that rustls never offers: excluding
/// them changes nothing (`HIGH:!aNULL:!MD5` is the list most configurations copy).
const TLS12_NEVER_OFFERED: [&str; 16] = [
    "aNULL", "eNULL", "NULL", "MD5", "RC4", "DES", "3DES", "EXPORT", "EXP", "PSK", "SRP",
    "CAMELLIA", "IDEA", "SEED", "DSS", "kRSA",
];

/// The bound of the session cache when `tls-session-cache-size` is 0 (OpenSSL's
/// "no limit"): a resumable session costs a few hundred bytes, so a million of
/// them stay within a few hundred MB (one cache serves every shard).
pub const SESSION_CACHE_ENTRIES_MAX: usize = 1 << 20;

/// `tls-protocols`: a space-separated list of `TLSv1.2` and `TLSv1.3` (any
/// case, as Redis reads it); empty: both.
pub fn protocol_versions(text: &str) -> Result<Vec<&'static SupportedProtocolVersion>, String> {
    let mut versions: Vec<&'static SupportedProtocolVersion> = Vec::new();
    for word in text.split_ascii_whitespace() {
        let version = match word.to_ascii_lowercase().as_str() {
            "tlsv1.2" => &rustls::version::TLS12,
            "tlsv1.3" => &rustls::version::TLS13,
            "tlsv1" | "tlsv1.1" => {
                return Err(format!(
                    "tls-protocols: {word} is not offered (Ruvio's TLS speaks TLSv1.2 and TLSv1.3)"
                ))
            }
            _ => {
                return Err(format!(
                    "Invalid tls-protocols specified: {word}. Use a combination of 'TLSv1.2' and 'TLSv1.3'."
                ))
            }
        };
        if !versions.contains(&version) {
            versions.push(version);
        }
    }
    if versions.is_empty() {
        versions = vec![&rustls::version::TLS13, &rustls::version::TLS12];
    }
    Ok(versions)
}

/// The ring provider with the suites `tls-ciphersuites` (TLS 1.3, OpenSSL's
/// colon-separated names) and `tls-ciphers` (TLS 1.2, an OpenSSL cipher list)
/// allow, in the order given (the server's preference when
/// `tls-prefer-server-ciphers` is on); an empty setting keeps every suite of its
/// version.
pub fn crypto_provider(ciphersuites: &str, ciphers: &str) -> Result<CryptoProvider, String> {
    let mut suites = tls13_suites(ciphersuites)?;
    suites.extend(tls12_suites(ciphers)?);
    Ok(CryptoProvider {
        cipher_suites: suites,
        ..rustls::crypto::ring::default_provider()
    })
}

fn tls13_suites(text: &str) -> Result<Vec<SupportedCipherSuite>, String> {
    let table = tls13_table();
    if text.trim().is_empty() {
        return Ok(table.iter().map(|(_, s)| *s).collect());
    }
    let mut suites = Vec::new();
    for name in text.split(':').map(str::trim).filter(|n| !n.is_empty()) {
        let Some((_, found)) = table.iter().find(|(n, _)| *n == name) else {
            return Err(format!(
                "tls-ciphersuites: unknown or unsupported suite {name} (offered: {})",
                names(&table)
            ));
        };
        if !suites.contains(found) {
            suites.push(*found);
        }
    }
    Ok(suites)
}

fn tls12_suites(text: &str) -> Result<Vec<SupportedCipherSuite>, String> {
    let table = tls12_table();
    let all = || table.iter().map(|(_, s)| *s);
    if text.trim().is_empty() {
        return Ok(all().collect());
    }
    let mut suites: Vec<SupportedCipherSuite> = Vec::new();
    let mut excluded: Vec<SupportedCipherSuite> = Vec::new();
    // OpenSSL separates a list's words with colons, spaces or commas.
    for word in text
        .split([':', ' ', ',', ';'])
        .map(str::trim)
        .filter(|w| !w.is_empty())
    {
        let (exclude, name) = match word.strip_prefix(['!', '-']) {
            Some(name) => (true, name),
            None => (false, word.strip_prefix('+').unwrap_or(word)),
        };
        let selected: Vec<SupportedCipherSuite> = if TLS12_ALL_WORDS.contains(&name) {
            all().collect()
        } else if let Some((_, s)) = table.iter().find(|(n, _)| *n == name) {
            vec![*s]
        } else if exclude && TLS12_NEVER_OFFERED.contains(&name) {
            Vec::new()
        } else if name == "@STRENGTH" {
            // Ordering by strength: rustls's own order already is.
            Vec::new()
        } else {
            return Err(format!(
                "tls-ciphers: unknown or unsupported cipher {word} (offered: {}; or DEFAULT, HIGH)",
                names(&table)
            ));
        };
        for s in selected {
            match exclude {
                true => excluded.push(s),
                false if !suites.contains(&s) => suites.push(s),
                false => {}
            }
        }
    }
    suites.retain(|s| !excluded.contains(s));
    if suites.is_empty() {
        return Err(format!("tls-ciphers: {text} selects no cipher"));
    }
    Ok(suites)
}

fn names(table: &[(&str, SupportedCipherSuite)]) -> String {
    table.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(":")
}

/// `tls-key-file` with `tls-key-file-pass`: a PEM key, which must be an
/// encrypted PKCS#8 key (`ENCRYPTED PRIVATE KEY`, what `openssl pkcs8 -topk8`
/// writes) when a passphrase is given.
pub fn private_key(path: &str, pass: &str) -> Result<PrivateKeyDer<'static>, String> {
    use rustls::pki_types::pem::PemObject;
    if pass.is_empty() {
        return PrivateKeyDer::from_pem_file(path).map_err(|e| format!("tls-key-file {path}: {e}"));
    }
    let text = std::fs::read(path).map_err(|e| format!("tls-key-file {path}: {e}"))?;
    let (label, der) = pkcs8::der::pem::decode_vec(&text)
        .map_err(|e| format!("tls-key-file {path}: not a PEM key ({e})"))?;
    if label != "ENCRYPTED PRIVATE KEY" {
        // A key that is not encrypted needs no passphrase (OpenSSL reads it so too).
        return PrivateKeyDer::from_pem_file(path).map_err(|e| format!("tls-key-file {path}: {e}"));
    }
    let encrypted = pkcs8::EncryptedPrivateKeyInfo::try_from(der.as_slice())
        .map_err(|e| format!("tls-key-file {path}: {e}"))?;
    let plain = encrypted
        .decrypt(pass.as_bytes())
        .map_err(|_| format!("tls-key-file {path}: cannot decrypt it with tls-key-file-pass"))?;
    Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        plain.as_bytes().to_vec(),
    )))
}

/// Every certificate in the PEM files of `tls-ca-cert-dir` (OpenSSL's CApath
/// holds one CA per file, named by hash, often as links to the same files: a
/// certificate met twice is added once). A file with no certificate is skipped;
/// an unreadable directory is an error.
pub fn dir_certificates(dir: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    use rustls::pki_types::pem::PemObject;
    let entries = std::fs::read_dir(dir).map_err(|e| format!("tls-ca-cert-dir {dir}: {e}"))?;
    let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    let mut certs: Vec<CertificateDer<'static>> = Vec::new();
    for path in paths.iter().filter(|p| p.is_file()) {
        let Ok(found) = CertificateDer::pem_file_iter(path) else {
            continue;
        };
        for cert in found.flatten() {
            if !certs.contains(&cert) {
                certs.push(cert);
            }
        }
    }
    if certs.is_empty() {
        return Err(format!("tls-ca-cert-dir {dir}: no certificate found"));
    }
    Ok(certs)
}

/// The session store `tls-session-caching`, `tls-session-cache-size` and
/// `tls-session-cache-timeout` describe.
pub fn session_storage(
    caching: bool,
    size: usize,
    timeout_s: u64,
) -> Arc<dyn StoresServerSessions> {
    if !caching {
        return Arc::new(NoServerSessionStorage {});
    }
    let size = match size {
        0 => SESSION_CACHE_ENTRIES_MAX,
        n => n.min(SESSION_CACHE_ENTRIES_MAX),
    };
    Arc::new(TimedSessions {
        inner: ServerSessionMemoryCache::new(size),
        timeout_s,
    })
}

/// The session cache every shard's sessions share, so a client resumes
/// whichever shard SO_REUSEPORT hands its next connection to (each shard's own
/// cache would resume it one time in N). A CONFIG SET of the TLS settings starts
/// a new one, as Redis's new SSL_CTX does; the other shards, reloading the same
/// settings after it, join that one.
#[derive(Default)]
pub struct SessionCaches {
    current: std::sync::Mutex<Option<Arc<dyn StoresServerSessions>>>,
}

impl std::fmt::Debug for SessionCaches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionCaches")
    }
}

impl SessionCaches {
    /// The cache in use, made from the settings if there is none yet.
    pub fn current(
        &self,
        caching: bool,
        size: usize,
        timeout_s: u64,
    ) -> Arc<dyn StoresServerSessions> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        current
            .get_or_insert_with(|| session_storage(caching, size, timeout_s))
            .clone()
    }

    /// A new cache from the settings, in use from now on.
    pub fn renew(
        &self,
        caching: bool,
        size: usize,
        timeout_s: u64,
    ) -> Arc<dyn StoresServerSessions> {
        let fresh = session_storage(caching, size, timeout_s);
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Some(fresh.clone());
        fresh
    }
}

/// rustls's bounded session cache with OpenSSL's session timeout: each value is
/// stored behind the second it was stored at, and one older than the timeout is
/// not resumed (rustls's cache has a size, not an age).
#[derive(Debug)]
struct TimedSessions {
    inner: Arc<ServerSessionMemoryCache>,
    timeout_s: u64,
}

/// The stamp's bytes before each stored value.
const STAMP_BYTES: usize = 8;

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl TimedSessions {
    fn fresh(&self, stored: Option<Vec<u8>>) -> Option<Vec<u8>> {
        let stored = stored?;
        let (stamp, value) = stored.split_at_checked(STAMP_BYTES)?;
        let at_s = u64::from_le_bytes(stamp.try_into().ok()?);
        (now_s().saturating_sub(at_s) <= self.timeout_s).then(|| value.to_vec())
    }
}

impl StoresServerSessions for TimedSessions {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        let mut stamped = Vec::with_capacity(STAMP_BYTES + value.len());
        stamped.extend_from_slice(&now_s().to_le_bytes());
        stamped.extend_from_slice(&value);
        self.inner.put(key, stamped)
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.fresh(self.inner.get(key))
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.fresh(self.inner.take(key))
    }

    fn can_cache(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols() {
        assert_eq!(protocol_versions("").unwrap().len(), 2);
        let only13 = protocol_versions("TLSv1.3").unwrap();
        assert_eq!(only13, vec![&rustls::version::TLS13]);
        assert_eq!(protocol_versions("tlsv1.2 TLSv1.3").unwrap().len(), 2);
        assert!(protocol_versions("TLSv1.1")
            .unwrap_err()
            .contains("TLSv1.1"));
        assert!(protocol_versions("SSLv3").unwrap_err().contains("Invalid"));
    }

    #[test]
    fn suites_by_openssl_names() {
        let p = crypto_provider("TLS_CHACHA20_POLY1305_SHA256", "").unwrap();
        assert_eq!(p.cipher_suites[0], suite::TLS13_CHACHA20_POLY1305_SHA256);
        assert_eq!(p.cipher_suites.len(), 1 + 6);
        let p = crypto_provider(
            "",
            "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384",
        )
        .unwrap();
        assert_eq!(p.cipher_suites.len(), 3 + 2);
        assert_eq!(
            p.cipher_suites[3],
            suite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
        );
        let p = crypto_provider("", "HIGH:!aNULL:!MD5").unwrap();
        assert_eq!(p.cipher_suites.len(), 3 + 6);
        let p = crypto_provider("", "DEFAULT:!ECDHE-RSA-CHACHA20-POLY1305").unwrap();
        assert_eq!(p.cipher_suites.len(), 3 + 5);
        assert!(crypto_provider("TLS_AES_128_CCM_SHA256", "").is_err());
        assert!(crypto_provider("", "AES128-SHA")
            .unwrap_err()
            .contains("AES128-SHA"));
        assert!(crypto_provider("", "!HIGH").is_err());
    }

    #[test]
    fn sessions_expire() {
        let store = session_storage(true, 4, 300);
        assert!(store.put(b"k".to_vec(), b"v".to_vec()));
        assert_eq!(store.get(b"k").as_deref(), Some(&b"v"[..]));
        let stale = TimedSessions {
            inner: ServerSessionMemoryCache::new(4),
            timeout_s: 0,
        };
        let mut old = (now_s() - 10).to_le_bytes().to_vec();
        old.extend_from_slice(b"v");
        stale.inner.put(b"k".to_vec(), old);
        assert_eq!(stale.get(b"k"), None);
        assert!(!session_storage(false, 4, 300).can_cache());
    }

    #[test]
    fn shards_share_the_cache_until_it_is_renewed() {
        let caches = SessionCaches::default();
        let first = caches.current(true, 4, 300);
        first.put(b"k".to_vec(), b"v".to_vec());
        assert!(caches.current(true, 4, 300).get(b"k").is_some());
        let renewed = caches.renew(true, 4, 300);
        assert!(renewed.get(b"k").is_none());
        assert!(caches.current(true, 4, 300).get(b"k").is_none());
    }
}
