//! Certificates for TLS tests, made with rcgen in a fresh directory: a CA,
//! a server certificate for 127.0.0.1 and localhost, client certificates
//! named after users, and ones no test should be served with (another
//! CA's, an expired one). Shared by the TLS tests of the transport, client,
//! devices and command line (each includes this file with `#[path = "..."]`).
//! Dropping the [`Certs`] removes the directory.

// Each including test uses only part of this.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    date_time_ymd,
};

/// A directory of PEM files; removed when dropped.
#[derive(Debug)]
pub struct Certs {
    pub dir: PathBuf,
}

impl Drop for Certs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A CA that signs.
struct Ca {
    params: CertificateParams,
    key: KeyPair,
}

impl Ca {
    fn new(name: &str) -> (Ca, String) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let pem = params.self_signed(&key).unwrap().pem();
        (Ca { params, key }, pem)
    }

    /// A certificate named `name` for `sans`, valid from `from` to `to`
    /// (years), and its key.
    fn sign(&self, name: &str, sans: &[&str], years: (i32, i32)) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let sans: Vec<String> = sans.iter().map(|s| s.to_string()).collect();
        let mut params = CertificateParams::new(sans).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.not_before = date_time_ymd(years.0, 1, 1);
        params.not_after = date_time_ymd(years.1, 1, 1);
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

impl Certs {
    /// Makes, in a fresh directory named after `tag`: `ca.pem`;
    /// `server.pem`/`server.key`; `NAME.pem`/`NAME.key` for each of
    /// `users`; `stranger.pem`/`.key` (named alice, signed by another CA);
    /// `expired.pem`/`.key` (named alice, expired in 2001).
    pub fn make(tag: &str, users: &[&str]) -> Certs {
        let dir = std::env::temp_dir().join(format!("ninep-certs-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let certs = Certs { dir };
        let (ca, pem) = Ca::new("ninep test CA");
        std::fs::write(certs.dir.join("ca.pem"), pem).unwrap();
        let now = (2000, 2100);
        certs.write(
            "server",
            ca.sign("server", &["127.0.0.1", "localhost"], now),
        );
        for user in users {
            certs.write(user, ca.sign(user, &[], now));
        }
        certs.write("expired", ca.sign("alice", &[], (2000, 2001)));
        let (other, _) = Ca::new("another CA");
        certs.write("stranger", other.sign("alice", &[], now));
        certs
    }

    fn write(&self, name: &str, (cert, key): (String, String)) {
        std::fs::write(self.dir.join(format!("{name}.pem")), cert).unwrap();
        std::fs::write(self.dir.join(format!("{name}.key")), key).unwrap();
    }

    /// The path of file `name` here.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The CA's certificate.
    pub fn ca(&self) -> PathBuf {
        self.path("ca.pem")
    }

    /// The certificate and key called `name`.
    pub fn pair(&self, name: &str) -> (PathBuf, PathBuf) {
        (
            self.path(&format!("{name}.pem")),
            self.path(&format!("{name}.key")),
        )
    }

    /// A string of a path, for command lines.
    pub fn arg(path: &Path) -> &str {
        path.to_str().expect("temp paths are UTF-8")
    }
}
