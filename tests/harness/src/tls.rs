//! Throwaway certificates for TLS servers ([`TlsCerts`]), made with the
//! `openssl` command-line tool.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::server::TempDir;

/// The `openssl` binary to run.
///
/// ```
/// assert!(!keylatch_harness::openssl_binary().is_empty());
/// ```
pub fn openssl_binary() -> String {
    std::env::var("KEYLATCH_OPENSSL").unwrap_or_else(|_| "openssl".to_owned())
}

/// A test CA and two certificates it signed, in a temp dir removed on
/// `Drop`: a server certificate for `IP:127.0.0.1` only (no DNS name, so
/// connecting as `localhost` is a name mismatch) that may also act as a
/// client (Redis nodes use it towards each other), and a client
/// certificate for mutual TLS. Keys are ECDSA P-256 (fast to generate),
/// PEM, unencrypted; everything is valid for two days.
///
/// ```no_run
/// let certs = keylatch_harness::TlsCerts::generate().unwrap();
/// assert!(certs.ca_file().exists());
/// assert!(certs.client_key().exists());
/// ```
#[derive(Debug)]
pub struct TlsCerts {
    dir: TempDir,
}

const CA: &str = "ca.pem";
const CA_KEY: &str = "ca.key";
const SERVER: &str = "server.pem";
const SERVER_KEY: &str = "server.key";
const CLIENT: &str = "client.pem";
const CLIENT_KEY: &str = "client.key";

impl TlsCerts {
    /// Generates a fresh CA, server and client certificate.
    ///
    /// ```no_run
    /// let certs = keylatch_harness::TlsCerts::generate().unwrap();
    /// ```
    ///
    /// # Errors
    /// `openssl` is missing (install Debian's `openssl` package or set
    /// `KEYLATCH_OPENSSL`) or fails; the message has its stderr.
    pub fn generate() -> io::Result<Self> {
        let dir = TempDir::new("tls")?;
        let d = dir.path();
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
        openssl(
            d,
            &[
                &["req", "-x509", "-nodes", "-days", "2"][..],
                &ec,
                &[
                    "-keyout",
                    CA_KEY,
                    "-out",
                    CA,
                    "-subj",
                    "/CN=keylatch test CA",
                ],
                &["-addext", "basicConstraints=critical,CA:TRUE"],
                &["-addext", "keyUsage=critical,keyCertSign,cRLSign"],
            ]
            .concat(),
        )?;
        leaf(
            d,
            "server",
            SERVER,
            SERVER_KEY,
            "/CN=127.0.0.1",
            "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n",
        )?;
        leaf(
            d,
            "client",
            CLIENT,
            CLIENT_KEY,
            "/CN=keylatch test client",
            "extendedKeyUsage=clientAuth\n",
        )?;
        Ok(Self { dir })
    }

    /// The CA certificate (PEM): what a client must trust.
    ///
    /// ```no_run
    /// let certs = keylatch_harness::TlsCerts::generate().unwrap();
    /// assert!(certs.ca_file().ends_with("ca.pem"));
    /// ```
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join(CA)
    }

    /// The server certificate (PEM; SAN `IP:127.0.0.1`).
    ///
    /// ```no_run
    /// let certs = keylatch_harness::TlsCerts::generate().unwrap();
    /// assert!(certs.server_cert().exists());
    /// ```
    pub fn server_cert(&self) -> PathBuf {
        self.dir.path().join(SERVER)
    }

    /// The server certificate's private key (PEM).
    ///
    /// ```no_run
    /// let certs = keylatch_harness::TlsCerts::generate().unwrap();
    /// assert!(certs.server_key().exists());
    /// ```
    pub fn server_key(&self) -> PathBuf {
        self.dir.path().join(SERVER_KEY)
    }

    /// The client certificate (PEM), for mutual TLS.
    ///
    /// ```no_run
    /// let certs = keylatch_harness::TlsCerts::generate().unwrap();
    /// assert!(certs.client_cert().exists());
    /// ```
    pub fn client_cert(&self) -> PathBuf {
        self.dir.path().join(CLIENT)
    }

    /// The client certificate's private key (PEM).
    ///
    /// ```no_run
    /// let certs = keylatch_harness::TlsCerts::generate().unwrap();
    /// assert!(certs.client_key().exists());
    /// ```
    pub fn client_key(&self) -> PathBuf {
        self.dir.path().join(CLIENT_KEY)
    }

    /// The directory holding the files.
    ///
    /// ```no_run
    /// let certs = keylatch_harness::TlsCerts::generate().unwrap();
    /// assert!(certs.dir().is_dir());
    /// ```
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `redis-cli` options for a TLS connection to a server using these
    /// certificates (the client certificate included, so it works with
    /// `--tls-auth-clients yes`).
    pub(crate) fn cli_args(&self) -> Vec<String> {
        let path = |p: PathBuf| p.to_string_lossy().into_owned();
        vec![
            "--tls".to_owned(),
            "--cacert".to_owned(),
            path(self.ca_file()),
            "--cert".to_owned(),
            path(self.client_cert()),
            "--key".to_owned(),
            path(self.client_key()),
        ]
    }
}

/// A key and a certificate signed by the CA, with these extensions.
fn leaf(dir: &Path, name: &str, cert: &str, key: &str, subject: &str, ext: &str) -> io::Result<()> {
    let csr = format!("{name}.csr");
    let ext_file = format!("{name}.ext");
    std::fs::write(
        dir.join(&ext_file),
        format!("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n{ext}"),
    )?;
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-nodes",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-keyout",
            key,
            "-out",
            &csr,
            "-subj",
            subject,
        ],
    )?;
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            CA,
            "-CAkey",
            CA_KEY,
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            cert,
            "-extfile",
            &ext_file,
        ],
    )
}

fn openssl(dir: &Path, args: &[&str]) -> io::Result<()> {
    let out = Command::new(openssl_binary())
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "`{}` not found: install Debian's openssl package or set KEYLATCH_OPENSSL",
                        openssl_binary()
                    ),
                )
            } else {
                e
            }
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "openssl {args:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_a_chain_openssl_verifies() {
        let certs = TlsCerts::generate().unwrap();
        for (cert, purpose) in [
            (certs.server_cert(), "sslserver"),
            (certs.client_cert(), "sslclient"),
        ] {
            let out = Command::new(openssl_binary())
                .args(["verify", "-purpose", purpose, "-CAfile"])
                .arg(certs.ca_file())
                .arg(&cert)
                .output()
                .unwrap();
            assert!(out.status.success(), "{cert:?}: {out:?}");
        }
        let dir = certs.dir().to_owned();
        drop(certs);
        assert!(!dir.exists());
    }
}
