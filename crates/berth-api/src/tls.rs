//! TLS on berthd's own listener, for a deployment with no proxy in front: a
//! certificate chain and its key (PEM files), read at start and read again
//! when asked ([`ListenerTls::reload`], on SIGHUP), so a renewed
//! certificate is served without a restart. A reload that fails keeps the
//! certificate being served. Every route follows the listener, `/readyz`
//! and `/metrics` included.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

/// The listener's certificate, as last read.
#[derive(Clone)]
pub struct ListenerTls {
    cert: PathBuf,
    key: PathBuf,
    current: Arc<RwLock<Arc<ServerConfig>>>,
}

impl ListenerTls {
    /// Reads `cert` (the chain, leaf first) and `key`.
    pub fn load(cert: &Path, key: &Path) -> Result<ListenerTls, String> {
        let config = server_config(cert, key)?;
        Ok(ListenerTls { cert: cert.into(), key: key.into(), current: Arc::new(RwLock::new(Arc::new(config))) })
    }

    /// Reads the files again; new connections get what they hold. On an
    /// error the certificate served stays as it was.
    pub fn reload(&self) -> Result<(), String> {
        let config = server_config(&self.cert, &self.key)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(config);
        Ok(())
    }

    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.current.read().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

fn server_config(cert: &Path, key: &Path) -> Result<ServerConfig, String> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("tls_cert_file {}: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!("tls_cert_file {}: no certificate in it", cert.display()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("tls_key_file {}: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| format!("tls_cert_file and tls_key_file: {e}"))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

    /// A CA's certificate, and a certificate for localhost it signed with its key.
    fn issue() -> (String, String, String) {
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, "Berth test CA");
        let ca_key = KeyPair::generate().unwrap();
        let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
        let issuer = Issuer::new(ca, ca_key);
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["localhost".to_string()]).unwrap().signed_by(&key, &issuer).unwrap();
        (ca_pem, cert.pem(), key.serialize_pem())
    }

    /// What `url` answers to a client that trusts only `ca`.
    async fn get_trusting(ca: &str, url: &str) -> Result<String, String> {
        let client = reqwest::Client::builder()
            .tls_built_in_root_certs(false)
            .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).unwrap())
            .build()
            .unwrap();
        let answer = client.get(url).send().await.map_err(|e| format!("{e:?}"))?;
        answer.text().await.map_err(|e| e.to_string())
    }

    #[tokio::test]
    async fn the_listener_serves_its_certificate_and_a_renewed_one_after_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let (cert_file, key_file) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        let (ca1, cert1, key1) = issue();
        std::fs::write(&cert_file, &cert1).unwrap();
        std::fs::write(&key_file, &key1).unwrap();
        let tls = ListenerTls::load(&cert_file, &key_file).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let app = axum::Router::new().route("/", get(|| async { "berth" }));
        let config = crate::ApiConfig::default();
        let served = tls.clone();
        tokio::spawn(async move { crate::serve(listener, app, &config, Some(served), std::future::pending()).await });
        let url = format!("https://localhost:{port}/");

        assert_eq!(get_trusting(&ca1, &url).await, Ok("berth".into()));
        let plain = reqwest::get(format!("http://localhost:{port}/")).await;
        assert!(plain.is_err() || !plain.unwrap().status().is_success(), "plain HTTP is not served");

        // A renewed certificate, from another CA: served once read again.
        let (ca2, cert2, key2) = issue();
        std::fs::write(&cert_file, &cert2).unwrap();
        std::fs::write(&key_file, &key2).unwrap();
        assert!(get_trusting(&ca2, &url).await.is_err(), "not before the reload");
        tls.reload().unwrap();
        assert_eq!(get_trusting(&ca2, &url).await, Ok("berth".into()));
        assert!(get_trusting(&ca1, &url).await.is_err(), "the old certificate is gone");

        // A reload of a broken key keeps serving the certificate before it.
        std::fs::write(&key_file, "not a key").unwrap();
        let err = tls.reload().unwrap_err();
        assert!(err.contains("tls_key_file"), "{err}");
        assert_eq!(get_trusting(&ca2, &url).await, Ok("berth".into()));
    }
}
