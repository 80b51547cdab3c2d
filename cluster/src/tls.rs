//! TLS settings for `rediss://` connections ([`TlsConfig`]) and, with the
//! `tls` feature, the rustls client configuration built from them.
//!
//! Certificate files are read and parsed when they are set (a bad file is an
//! error there, not at the first connect). The rustls configuration is built
//! at the first connect and shared by every clone of the settings, so the
//! nodes of a cluster and every reconnect reuse one (the system roots are
//! loaded once). The server name checked against the certificate is always
//! the host being connected to: a cluster node's own host, not the seed's.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

#[cfg(feature = "tls")]
use std::sync::{Arc, OnceLock};

#[cfg(feature = "tls")]
use tokio_rustls::rustls::{
    self,
    client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    crypto::{ring, CryptoProvider},
    pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer, ServerName, UnixTime},
    ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};

/// The error when TLS is asked for in a build without the `tls` feature.
#[cfg(not(feature = "tls"))]
pub(crate) const NO_TLS: &str =
    "rediss:// (TLS) is not supported by this build of keylatch (cargo feature `tls` is off)";

/// TLS settings of a [`ConnectionConfig`](crate::ConnectionConfig): which
/// certificates to trust and which client certificate to present.
///
/// Set through the `ConnectionConfig` builder methods
/// ([`tls_ca_file`](crate::ConnectionConfig::tls_ca_file),
/// [`tls_client_cert`](crate::ConnectionConfig::tls_client_cert),
/// [`tls_system_roots`](crate::ConnectionConfig::tls_system_roots),
/// [`danger_accept_invalid_certs`](crate::ConnectionConfig::danger_accept_invalid_certs))
/// or a `rediss://` URL. By default the server's certificate must chain to
/// a root of the system store (`/etc/ssl/certs` on Debian) and name the host
/// connected to (a DNS name or an IP address SAN).
///
/// ```
/// use keylatch_cluster::ConnectionConfig;
/// let cfg = ConnectionConfig::from_url("rediss://cache.example.com:6380")?;
/// let tls = cfg.tls.as_ref().expect("rediss:// turns TLS on");
/// assert!(tls.ca_files().is_empty());
/// assert!(tls.uses_system_roots());
/// assert!(!tls.accepts_invalid_certs());
/// # Ok::<(), keylatch_cluster::Error>(())
/// ```
#[derive(Clone, Default)]
pub struct TlsConfig {
    ca_files: Vec<PathBuf>,
    /// `None`: the system roots only when no CA file is given.
    system_roots: Option<bool>,
    client_cert: Option<(PathBuf, PathBuf)>,
    accept_invalid_certs: bool,
    #[cfg(feature = "tls")]
    material: Material,
}

/// What was parsed from the files, and the built rustls configuration.
#[cfg(feature = "tls")]
#[derive(Clone)]
struct Material {
    roots: Arc<RootCertStore>,
    client: Option<Arc<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>>,
    /// Built at the first connect; replaced (emptied) by every change.
    built: Arc<OnceLock<Arc<ClientConfig>>>,
}

#[cfg(feature = "tls")]
impl Default for Material {
    fn default() -> Self {
        Self {
            roots: Arc::new(RootCertStore::empty()),
            client: None,
            built: Arc::default(),
        }
    }
}

impl TlsConfig {
    /// The CA bundles (PEM) trusted, in the order given.
    ///
    /// ```
    /// assert!(keylatch_cluster::TlsConfig::default().ca_files().is_empty());
    /// ```
    pub fn ca_files(&self) -> &[PathBuf] {
        &self.ca_files
    }

    /// Whether the system's root certificates are trusted: by default only
    /// when no CA file is given; see
    /// [`tls_system_roots`](crate::ConnectionConfig::tls_system_roots).
    ///
    /// ```
    /// assert!(keylatch_cluster::TlsConfig::default().uses_system_roots());
    /// ```
    pub fn uses_system_roots(&self) -> bool {
        self.system_roots.unwrap_or(self.ca_files.is_empty())
    }

    /// The client certificate chain and key files (mutual TLS), if set.
    ///
    /// ```
    /// assert!(keylatch_cluster::TlsConfig::default().client_cert().is_none());
    /// ```
    pub fn client_cert(&self) -> Option<(&Path, &Path)> {
        self.client_cert
            .as_ref()
            .map(|(c, k)| (c.as_path(), k.as_path()))
    }

    /// Whether server certificates go unchecked (test setups only; see
    /// [`danger_accept_invalid_certs`](crate::ConnectionConfig::danger_accept_invalid_certs)).
    ///
    /// ```
    /// assert!(!keylatch_cluster::TlsConfig::default().accepts_invalid_certs());
    /// ```
    pub fn accepts_invalid_certs(&self) -> bool {
        self.accept_invalid_certs
    }

    /// Adds the certificates of a PEM bundle to the trusted roots.
    pub(crate) fn add_ca_file(&mut self, path: &Path) -> Result<()> {
        #[cfg(feature = "tls")]
        {
            let certs = read_certs(path, "CA bundle")?;
            let mut roots = (*self.material.roots).clone();
            for cert in certs {
                roots.add(cert).map_err(|e| {
                    Error::Tls(format!(
                        "CA bundle {}: bad certificate: {e}",
                        path.display()
                    ))
                })?;
            }
            self.material.roots = Arc::new(roots);
            self.ca_files.push(path.to_owned());
            self.changed();
            Ok(())
        }
        #[cfg(not(feature = "tls"))]
        {
            let _ = path;
            Err(Error::Config(NO_TLS.to_owned()))
        }
    }

    /// Sets the client certificate chain and its private key (PEM files).
    pub(crate) fn set_client_cert(&mut self, cert: &Path, key: &Path) -> Result<()> {
        #[cfg(feature = "tls")]
        {
            let chain = read_certs(cert, "client certificate")?;
            let key_der = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| pem_error(key, "client private key", e))?;
            // Refuse a key rustls cannot sign with now, not at the handshake.
            ring::default_provider()
                .key_provider
                .load_private_key(key_der.clone_key())
                .map_err(|e| Error::Tls(format!("client private key {}: {e}", key.display())))?;
            self.material.client = Some(Arc::new((chain, key_der)));
            self.client_cert = Some((cert.to_owned(), key.to_owned()));
            self.changed();
            Ok(())
        }
        #[cfg(not(feature = "tls"))]
        {
            let _ = (cert, key);
            Err(Error::Config(NO_TLS.to_owned()))
        }
    }

    pub(crate) fn set_system_roots(&mut self, on: bool) {
        self.system_roots = Some(on);
        #[cfg(feature = "tls")]
        self.changed();
    }

    pub(crate) fn set_accept_invalid_certs(&mut self, on: bool) {
        self.accept_invalid_certs = on;
        #[cfg(feature = "tls")]
        self.changed();
    }

    /// Forgets the built rustls configuration: clones made before the
    /// change keep theirs.
    #[cfg(feature = "tls")]
    fn changed(&mut self) {
        self.material.built = Arc::new(OnceLock::new());
    }

    /// The rustls configuration, built once per settings value.
    #[cfg(feature = "tls")]
    pub(crate) fn client_config(&self) -> Result<Arc<ClientConfig>> {
        if let Some(built) = self.material.built.get() {
            return Ok(Arc::clone(built));
        }
        let provider = Arc::new(ring::default_provider());
        let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Tls(format!("TLS setup: {e}")))?;
        let builder = if self.accept_invalid_certs {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnyCert(provider)))
        } else {
            let mut roots = (*self.material.roots).clone();
            if self.uses_system_roots() {
                // Unreadable entries of the system store are skipped, as
                // openssl does; an empty store is reported below.
                let native = rustls_native_certs::load_native_certs();
                roots.add_parsable_certificates(native.certs);
            }
            if roots.is_empty() {
                return Err(Error::Tls(
                    "no trusted root certificates (no CA file given and none found in the \
                     system store): set a CA file (ConnectionConfig::tls_ca_file, ?ca=FILE) \
                     or install ca-certificates"
                        .to_owned(),
                ));
            }
            builder.with_root_certificates(roots)
        };
        let config = match &self.material.client {
            Some(client) => builder
                .with_client_auth_cert(client.0.clone(), client.1.clone_key())
                .map_err(|e| Error::Tls(format!("client certificate: {e}")))?,
            None => builder.with_no_client_auth(),
        };
        let config = Arc::new(config);
        // Another connect may have built one meanwhile; either is fine.
        let _ = self.material.built.set(Arc::clone(&config));
        Ok(config)
    }
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Paths only: never key material.
        f.debug_struct("TlsConfig")
            .field("ca_files", &self.ca_files)
            .field("system_roots", &self.uses_system_roots())
            .field("client_cert", &self.client_cert)
            .field("accept_invalid_certs", &self.accept_invalid_certs)
            .finish()
    }
}

impl PartialEq for TlsConfig {
    fn eq(&self, other: &Self) -> bool {
        self.ca_files == other.ca_files
            && self.system_roots == other.system_roots
            && self.client_cert == other.client_cert
            && self.accept_invalid_certs == other.accept_invalid_certs
    }
}

impl Eq for TlsConfig {}

/// The server name to verify (and send as SNI) for `host`: a DNS name or an
/// IP address.
#[cfg(feature = "tls")]
pub(crate) fn server_name(host: &str) -> Result<ServerName<'static>> {
    ServerName::try_from(host.to_owned())
        .map_err(|_| Error::Tls(format!("{host:?} is not a valid TLS server name")))
}

/// An I/O error of a TLS stream as keylatch's error: rustls' own errors
/// (certificate checks, alerts from the server) become [`Error::Tls`], one
/// line naming the address; socket errors stay [`Error::Io`].
#[cfg(feature = "tls")]
pub(crate) fn io_error(addr: &str, e: std::io::Error) -> Error {
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(tls) => Error::Tls(format!("handshake with {addr} failed: {tls}")),
        None => Error::io(e),
    }
}

#[cfg(feature = "tls")]
fn read_certs(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| pem_error(path, what, e))?
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| pem_error(path, what, e))?;
    if certs.is_empty() {
        return Err(Error::Tls(format!(
            "{what} {}: no CERTIFICATE in the file",
            path.display()
        )));
    }
    Ok(certs)
}

#[cfg(feature = "tls")]
fn pem_error(path: &Path, what: &str, e: rustls::pki_types::pem::Error) -> Error {
    use rustls::pki_types::pem::Error as Pem;
    let cause = match e {
        Pem::Io(io) => io.to_string(),
        Pem::NoItemsFound => "no PEM section of the expected kind".to_owned(),
        other => format!("bad PEM: {other}"),
    };
    Error::Tls(format!("{what} {}: {cause}", path.display()))
}

/// The verifier of [`danger_accept_invalid_certs`]: any certificate, any
/// name. Handshake signatures are still checked (they prove the peer holds
/// the key of the certificate it sent, whatever that is).
///
/// [`danger_accept_invalid_certs`]: crate::ConnectionConfig::danger_accept_invalid_certs
#[cfg(feature = "tls")]
#[derive(Debug)]
struct AcceptAnyCert(Arc<CryptoProvider>);

#[cfg(feature = "tls")]
impl ServerCertVerifier for AcceptAnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
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
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
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

#[cfg(all(test, feature = "tls"))]
mod tests {
    use super::*;

    #[test]
    fn bad_files_are_typed_one_line_errors() {
        let dir = std::env::temp_dir().join(format!("keylatch-tls-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let junk = dir.join("junk.pem");
        std::fs::write(&junk, "not a certificate\n").unwrap();
        let broken = dir.join("broken.pem");
        std::fs::write(&broken, "-----BEGIN CERTIFICATE-----\n!!!!\n").unwrap();
        let missing = dir.join("missing.pem");
        for path in [&junk, &broken, &missing] {
            let mut tls = TlsConfig::default();
            let err = tls.add_ca_file(path).unwrap_err();
            assert!(matches!(err, Error::Tls(_)), "{err:?}");
            let line = err.to_string();
            assert!(!line.contains('\n'), "{line}");
            assert!(line.contains(&path.display().to_string()), "{line}");
            let err = tls.set_client_cert(path, path).unwrap_err();
            assert!(matches!(err, Error::Tls(_)), "{err:?}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn server_names_are_dns_names_or_ip_addresses() {
        assert!(matches!(
            server_name("127.0.0.1"),
            Ok(ServerName::IpAddress(_))
        ));
        assert!(matches!(server_name("::1"), Ok(ServerName::IpAddress(_))));
        assert!(matches!(
            server_name("redis.example.com"),
            Ok(ServerName::DnsName(_))
        ));
        assert!(matches!(server_name("bad name"), Err(Error::Tls(_))));
    }

    #[test]
    fn changes_rebuild_and_equality_ignores_the_cache() {
        let mut a = TlsConfig::default();
        a.set_accept_invalid_certs(true);
        let built = a.client_config().unwrap();
        let b = a.clone();
        assert!(Arc::ptr_eq(&built, &b.client_config().unwrap()));
        assert_eq!(a, b);
        let mut c = b.clone();
        c.set_system_roots(false);
        assert_ne!(b, c);
        assert!(!Arc::ptr_eq(&built, &c.client_config().unwrap()));
    }
}
