//! Certificates made by a test with openssl (apt's), for the TLS tests
//! (tests/tls.rs, tests/bench_transport.rs).

use std::path::{Path, PathBuf};
use std::process::Command;

/// A directory with a CA, a server certificate for 127.0.0.1 signed by it, a
/// client certificate signed by it, and a client and a server certificate of
/// another CA.
pub fn certificates(test: &str) -> Option<PathBuf> {
    if Command::new("openssl").arg("version").output().is_err() {
        eprintln!("tls: openssl not installed; skipped");
        return None;
    }
    // One directory per test: the tests run at once.
    let dir = std::env::temp_dir().join(format!("ruvio-tls-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("certificate directory");
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    std::fs::write(
        dir.join("san.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
    for ca in ["ca", "other-ca"] {
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN={ca}"),
            "-keyout",
            &format!("{ca}.key"),
            "-out",
            &format!("{ca}.crt"),
        ]);
    }
    for (name, ca) in [
        ("server", "ca"),
        ("client", "ca"),
        ("stranger", "other-ca"),
        ("server2", "other-ca"),
    ] {
        openssl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
        ]);
        openssl(&[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{ca}.crt"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "san.cnf",
            "-out",
            &format!("{name}.crt"),
        ]);
    }
    Some(dir)
}

pub fn path(dir: &Path, file: &str) -> String {
    dir.join(file).to_string_lossy().into_owned()
}
