//! `[database]`: how berthd reaches PostgreSQL beyond its URLs: libpq's TLS
//! parameters for every URL that does not name its own (the primary's and
//! the standbys'), and the password from a file.

use std::path::PathBuf;

use anyhow::{Context, Result};
use berth_store::tls::TlsParams;
use berth_store::Password;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseConfig {
    /// `disable`, `prefer` (the default), `require`, `verify-ca` or
    /// `verify-full`, as libpq means them.
    pub sslmode: Option<String>,
    /// A PEM file of the certificates to trust, or `system`.
    pub sslrootcert: Option<String>,
    /// A client certificate (PEM), with its key.
    pub sslcert: Option<PathBuf>,
    pub sslkey: Option<PathBuf>,
    /// A file holding the password (its first line), where the URL names
    /// none: a secret kept out of the configuration and the environment.
    pub password_file: Option<PathBuf>,
}

impl DatabaseConfig {
    /// The TLS parameters named here.
    pub fn tls(&self) -> Result<TlsParams> {
        let mut params = TlsParams::default();
        let named = [
            ("sslmode", self.sslmode.clone()),
            ("sslrootcert", self.sslrootcert.clone()),
            ("sslcert", self.sslcert.as_ref().map(|p| p.display().to_string())),
            ("sslkey", self.sslkey.as_ref().map(|p| p.display().to_string())),
        ];
        for (key, value) in named {
            if let Some(v) = value {
                params.set(key, &v).map_err(anyhow::Error::msg).with_context(|| format!("[database] {key}"))?;
            }
        }
        Ok(params)
    }

    /// The password file's first line, read now.
    pub fn password(&self) -> Result<Option<Password>> {
        let Some(file) = &self.password_file else { return Ok(None) };
        let text =
            std::fs::read_to_string(file).with_context(|| format!("[database] password_file {}", file.display()))?;
        let line = text.lines().next().unwrap_or("").to_string();
        anyhow::ensure!(!line.is_empty(), "[database] password_file {} is empty", file.display());
        Ok(Some(Password(line)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn the_database_section_fills_what_each_url_leaves_out() {
        let dir = tempfile::tempdir().unwrap();
        let password = dir.path().join("password");
        std::fs::write(&password, "s3cret\nignored\n").unwrap();
        let cfg = Config {
            database_url: "postgresql://berth@db1:5432,db2:5432/berth?target_session_attrs=read-write".into(),
            read_database_urls: vec!["postgresql://berth@db3/berth?sslmode=disable".into()],
            database: DatabaseConfig {
                sslmode: Some("require".into()),
                password_file: Some(password.clone()),
                ..DatabaseConfig::default()
            },
            ..Config::default()
        };
        assert_eq!(cfg.pool().unwrap().password, Some(Password("s3cret".into())));
        let lines = cfg.describe_tls().unwrap();
        assert_eq!(
            lines,
            [
                "database_url: sslmode=require: TLS required, the server's certificate not checked",
                "read_database_urls: sslmode=disable: no TLS",
            ]
        );
        std::fs::write(&password, "").unwrap();
        assert!(cfg.pool().unwrap_err().to_string().contains("is empty"));
        let bad = Config {
            database: DatabaseConfig { sslmode: Some("verify-full".into()), ..DatabaseConfig::default() },
            ..Config::default()
        };
        let err = format!("{:#}", bad.describe_tls().unwrap_err());
        assert!(err.contains("sslrootcert"), "{err}");
    }
}
