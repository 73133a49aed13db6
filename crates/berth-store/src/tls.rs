//! TLS to PostgreSQL with libpq's meaning of `sslmode`, over rustls (no
//! OpenSSL to install).
//!
//! A database URL may carry libpq's `sslmode`, `sslrootcert`, `sslcert` and
//! `sslkey`; tokio-postgres knows only the first three modes, so these are
//! taken out of the URL here and the rest is parsed as before. The modes:
//!
//! - `disable`: plain TCP only.
//! - `prefer` (libpq's default, and so Berth's): TLS when the server offers
//!   it, else plain; the certificate is not checked.
//! - `require`: TLS or no connection; the certificate is not checked, unless
//!   `sslrootcert` is given, when it is checked as `verify-ca` (as libpq does).
//! - `verify-ca`: TLS, the server's chain checked against `sslrootcert`.
//! - `verify-full`: `verify-ca`, and the certificate names the host connected
//!   to (each host of a multi-host URL in turn).
//!
//! `sslrootcert=system` takes the operating system's roots. `sslcert` and
//! `sslkey` (PEM) are a client certificate, sent when the server asks.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres::config::SslMode as WireMode;
use tokio_postgres_rustls::MakeRustlsConnect;

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(s: &str) -> Result<SslMode, String> {
        Ok(match s {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            // libpq's `allow` tries plain first; Berth would rather not
            // offer a mode that prefers no encryption over encryption.
            other => {
                return Err(format!("sslmode {other:?} is not one of disable, prefer, require, verify-ca, verify-full"))
            }
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// libpq's TLS parameters as a URL or the configuration names them; what
/// is not named is `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsParams {
    pub mode: Option<SslMode>,
    /// A PEM file of the certificates to trust, or `system`.
    pub root_cert: Option<String>,
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
}

impl TlsParams {
    /// Sets `key` (`sslmode`, `sslrootcert`, `sslcert` or `sslkey`); false
    /// for any other key.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, String> {
        match key {
            "sslmode" => self.mode = Some(SslMode::parse(value)?),
            "sslrootcert" => self.root_cert = Some(value.to_string()),
            "sslcert" => self.client_cert = Some(PathBuf::from(value)),
            "sslkey" => self.client_key = Some(PathBuf::from(value)),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// These, each left unnamed taken from `defaults`; checked whole.
    pub fn or(&self, defaults: &TlsParams) -> Result<TlsSettings, String> {
        let settings = TlsSettings {
            mode: self.mode.or(defaults.mode).unwrap_or(SslMode::Prefer),
            root_cert: self.root_cert.clone().or_else(|| defaults.root_cert.clone()),
            client_cert: self.client_cert.clone().or_else(|| defaults.client_cert.clone()),
            client_key: self.client_key.clone().or_else(|| defaults.client_key.clone()),
        };
        if settings.client_cert.is_some() != settings.client_key.is_some() {
            return Err("sslcert and sslkey go together: name both or neither".into());
        }
        if matches!(settings.mode, SslMode::VerifyCa | SslMode::VerifyFull) && settings.root_cert.is_none() {
            return Err(format!(
                "sslmode={} checks the server against root certificates: name them with sslrootcert \
                 (a PEM file, or system)",
                settings.mode.as_str()
            ));
        }
        Ok(settings)
    }
}

/// The TLS a connection is made with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    pub mode: SslMode,
    pub root_cert: Option<String>,
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
}

impl TlsSettings {
    /// Whether the server's certificate is checked, and how far.
    fn checks(&self) -> Check {
        match (self.mode, &self.root_cert) {
            (SslMode::VerifyFull, _) => Check::Full,
            (SslMode::VerifyCa, _) | (SslMode::Require, Some(_)) => Check::Chain,
            _ => Check::Nothing,
        }
    }

    /// What will be verified, in a line, for `berthd check-config`.
    pub fn describe(&self) -> String {
        let roots = self.root_cert.as_deref().map_or("no root certificates".to_string(), |r| {
            if r == "system" {
                "the system's root certificates".into()
            } else {
                format!("the root certificates in {r}")
            }
        });
        let what = match (self.mode, self.checks()) {
            (SslMode::Disable, _) => "no TLS".to_string(),
            (SslMode::Prefer, _) => "TLS when the server offers it, its certificate not checked".into(),
            (_, Check::Nothing) => "TLS required, the server's certificate not checked".into(),
            (_, Check::Chain) => format!("TLS required, the server's certificate checked against {roots}"),
            (_, Check::Full) => {
                format!("TLS required, the server's certificate checked against {roots} and for the host's name")
            }
        };
        match &self.client_cert {
            Some(c) => format!("sslmode={}: {what}; client certificate {}", self.mode.as_str(), c.display()),
            None => format!("sslmode={}: {what}", self.mode.as_str()),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    Nothing,
    Chain,
    Full,
}

/// Takes libpq's TLS parameters out of a `postgresql://` URL: the URL
/// tokio-postgres parses, and what it named. A `key=value` connection
/// string is left as it is (tokio-postgres reads its `sslmode`, and the
/// configuration's `[database]` gives the rest).
pub fn split_url(url: &str) -> Result<(String, TlsParams), String> {
    let mut params = TlsParams::default();
    let is_url = url.starts_with("postgresql://") || url.starts_with("postgres://");
    let Some((base, query)) = url.split_once('?').filter(|_| is_url) else { return Ok((url.to_string(), params)) };
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if !params.set(key, &percent_decode(value)?)? {
            kept.push(pair);
        }
    }
    let url = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
    Ok((url, params))
}

fn percent_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3).ok_or_else(|| format!("a bad %-escape in {s:?}"))?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| format!("a bad %-escape in {s:?}"))?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{s:?} is not UTF-8 once decoded"))
}

/// tokio-postgres' own mode for `mode`: it negotiates, rustls checks.
pub(crate) fn wire_mode(mode: SslMode) -> WireMode {
    match mode {
        SslMode::Disable => WireMode::Disable,
        SslMode::Prefer => WireMode::Prefer,
        SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => WireMode::Require,
    }
}

/// The connector for `settings`, its files read now (so a missing or bad
/// file stops berthd at start, not at the first connection).
pub(crate) fn connector(settings: &TlsSettings) -> Result<MakeRustlsConnect, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match settings.checks() {
        Check::Nothing => builder.dangerous().with_custom_certificate_verifier(Arc::new(NoCheck(provider))),
        check => {
            let roots = Arc::new(roots(settings.root_cert.as_deref().unwrap_or("system"))?);
            let webpki =
                WebPkiServerVerifier::builder_with_provider(roots, provider).build().map_err(|e| e.to_string())?;
            if check == Check::Full {
                builder.with_webpki_verifier(webpki)
            } else {
                builder.dangerous().with_custom_certificate_verifier(Arc::new(ChainOnly(webpki)))
            }
        }
    };
    let config = match (&settings.client_cert, &settings.client_key) {
        (Some(cert), Some(key)) => {
            let chain = certificates(cert)?;
            let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("sslkey {}: {e}", key.display()))?;
            builder.with_client_auth_cert(chain, key).map_err(|e| format!("sslcert and sslkey: {e}"))?
        }
        _ => builder.with_no_client_auth(),
    };
    Ok(MakeRustlsConnect::new(config))
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate in it", path.display()));
    }
    Ok(certs)
}

fn roots(root_cert: &str) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    if root_cert == "system" {
        let found = rustls_native_certs::load_native_certs();
        store.add_parsable_certificates(found.certs);
    } else {
        for cert in certificates(Path::new(root_cert)).map_err(|e| format!("sslrootcert {e}"))? {
            store.add(cert).map_err(|e| format!("sslrootcert {root_cert}: {e}"))?;
        }
    }
    if store.is_empty() {
        return Err(format!("sslrootcert {root_cert}: no root certificate found"));
    }
    Ok(store)
}

/// `verify-ca`: the chain up to a trusted root, whatever name it carries.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
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

/// `prefer` and `require` without roots: encryption, not authentication,
/// as libpq gives them. The handshake's signatures are still checked, so
/// the session is with whoever holds the certificate's key.
#[derive(Debug)]
struct NoCheck(Arc<CryptoProvider>);

impl ServerCertVerifier for NoCheck {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
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
        verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libpq_parameters_leave_the_url_and_the_rest_stays() {
        let none = TlsParams::default();
        let (url, p) = split_url(
            "postgresql://u@h1:5432,h2:5433/berth?target_session_attrs=read-write&sslmode=verify-full\
             &sslrootcert=%2Fetc%2Fca.pem&sslcert=/c.pem&sslkey=/k.pem",
        )
        .unwrap();
        let s = p.or(&none).unwrap();
        assert_eq!(url, "postgresql://u@h1:5432,h2:5433/berth?target_session_attrs=read-write");
        assert_eq!(s.mode, SslMode::VerifyFull);
        assert_eq!(s.root_cert.as_deref(), Some("/etc/ca.pem"));
        assert_eq!(s.client_cert, Some(PathBuf::from("/c.pem")));
        assert_eq!(s.checks(), Check::Full);
        let (url, p) = split_url("postgresql://u@h/db").unwrap();
        let s = p.or(&none).unwrap();
        assert_eq!((url.as_str(), s.mode, s.checks()), ("postgresql://u@h/db", SslMode::Prefer, Check::Nothing));
        let (url, p) = split_url("postgresql://u@h/db?sslmode=require&sslrootcert=system").unwrap();
        let s = p.or(&none).unwrap();
        assert_eq!(
            (url.as_str(), s.checks()),
            ("postgresql://u@h/db", Check::Chain),
            "require with roots is verify-ca"
        );
        // The configuration fills what the URL leaves out; the URL wins.
        let config = TlsParams { mode: Some(SslMode::VerifyFull), root_cert: Some("/ca.pem".into()), ..none.clone() };
        let (_, p) = split_url("postgres://u@h/db?sslmode=verify-ca").unwrap();
        let s = p.or(&config).unwrap();
        assert_eq!((s.mode, s.root_cert.as_deref()), (SslMode::VerifyCa, Some("/ca.pem")));
        let (kv, p) = split_url("host=h dbname=db sslmode=require").unwrap();
        assert_eq!((kv.as_str(), p), ("host=h dbname=db sslmode=require", none.clone()), "key=value strings pass");
    }

    #[test]
    fn bad_tls_parameters_are_named() {
        for (url, says) in [
            ("postgresql://h/db?sslmode=allow", "sslmode \"allow\""),
            ("postgresql://h/db?sslmode=verify-ca", "sslrootcert"),
            ("postgresql://h/db?sslcert=/c.pem", "sslcert and sslkey go together"),
            ("postgresql://h/db?sslrootcert=%zz", "%-escape"),
        ] {
            let err = split_url(url).and_then(|(_, p)| p.or(&TlsParams::default())).unwrap_err();
            assert!(err.contains(says), "{url}: {err}");
        }
        let s = TlsSettings {
            mode: SslMode::VerifyCa,
            root_cert: Some("/nonexistent/ca.pem".into()),
            client_cert: None,
            client_key: None,
        };
        let err = connector(&s).err().unwrap();
        assert!(err.contains("/nonexistent/ca.pem"), "{err}");
    }
}
