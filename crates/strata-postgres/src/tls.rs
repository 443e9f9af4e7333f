//! TLS to the server: the URL's `sslmode` and `sslrootcert`, with libpq's meanings.
//!
//! | `sslmode` | with feature `tls` | without it |
//! |---|---|---|
//! | `disable`, `allow` | plain | plain |
//! | `prefer` (the default) | TLS when the server offers it, else plain; the certificate is not checked | plain |
//! | `require` | TLS or no connection; the certificate is checked against `sslrootcert` when given, else not checked | refused |
//! | `verify-ca` | TLS; the certificate must chain to `sslrootcert` | refused |
//! | `verify-full` | as `verify-ca`, and it must name the host connected to | refused |
//!
//! `sslrootcert=PATH` is a PEM file of the CA certificates to trust; `verify-ca` and
//! `verify-full` need it (strata does not read `~/.postgresql/root.crt` or a system
//! store). The TLS stack is rustls with the ring provider, through
//! `tokio-postgres-rustls`.

use crate::error::PgError;
use std::path::PathBuf;

/// What the connection string asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SslMode {
    /// `disable` or `allow`: plain connections.
    Disable,
    /// `prefer`: TLS when the server offers it, unchecked.
    Prefer,
    /// `require`: TLS, checked against the root certificates when given.
    Require,
    /// `verify-ca`: TLS, the chain checked, not the host name.
    VerifyCa,
    /// `verify-full`: TLS, the chain and the host name checked.
    VerifyFull,
}

impl SslMode {
    /// Parses an `sslmode` value.
    pub(crate) fn parse(value: &str) -> Result<Self, PgError> {
        Ok(match value {
            "disable" | "allow" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(PgError::InvalidUrl {
                    reason: format!("unknown `sslmode={other}`; use disable, allow, prefer, require, verify-ca or verify-full"),
                })
            }
        })
    }

    fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// The TLS part of a connection string.
#[derive(Debug, Clone)]
pub(crate) struct TlsParams {
    /// `sslmode` (default `prefer`).
    pub(crate) mode: SslMode,
    /// `sslrootcert`, if given (only read with feature `tls`).
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    pub(crate) root_cert: Option<PathBuf>,
}

/// How a store's connections are opened.
#[derive(Clone)]
pub(crate) enum Connector {
    /// Plain connections.
    Plain,
    /// TLS through rustls (the driver's `sslmode` says whether plain is acceptable).
    #[cfg(feature = "tls")]
    Rustls(tokio_postgres_rustls::MakeRustlsConnect),
}

impl TlsParams {
    /// The driver's `sslmode` and the connector for these parameters; an error names
    /// what is missing or unreadable.
    pub(crate) fn connector(
        &self,
    ) -> Result<(tokio_postgres::config::SslMode, Connector), PgError> {
        use tokio_postgres::config::SslMode as Driver;
        match self.mode {
            SslMode::Disable => Ok((Driver::Disable, Connector::Plain)),
            #[cfg(not(feature = "tls"))]
            SslMode::Prefer => Ok((Driver::Disable, Connector::Plain)),
            #[cfg(not(feature = "tls"))]
            mode => Err(PgError::InvalidUrl {
                reason: format!(
                    "`sslmode={}` needs TLS, which this build of strata-postgres does not have (cargo feature `tls`); build with it, or use `sslmode=disable` over a private network or a tunnel",
                    mode.name()
                ),
            }),
            #[cfg(feature = "tls")]
            mode => {
                let driver = if mode == SslMode::Prefer {
                    Driver::Prefer
                } else {
                    Driver::Require
                };
                Ok((driver, Connector::Rustls(rustls_tls::connector(mode, self.root_cert.as_deref())?)))
            }
        }
    }
}

#[cfg(feature = "tls")]
mod rustls_tls {
    use super::SslMode;
    use crate::error::PgError;
    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::client::WebPkiServerVerifier;
    use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    use rustls::{
        CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
    };
    use std::path::Path;
    use std::sync::Arc;

    /// The rustls connector for `mode` (never [`SslMode::Disable`]).
    pub(super) fn connector(
        mode: SslMode,
        root_cert: Option<&Path>,
    ) -> Result<tokio_postgres_rustls::MakeRustlsConnect, PgError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid(format!("the TLS stack cannot be set up: {e}")))?;
        let roots = match root_cert {
            Some(path) => Some(load_roots(path)?),
            None if matches!(mode, SslMode::VerifyCa | SslMode::VerifyFull) => {
                return Err(invalid(format!(
                    "`sslmode={}` checks the server's certificate and needs the CA to trust: add `sslrootcert=PATH` (a PEM file)",
                    mode.name()
                )))
            }
            None => None,
        };
        let verifier: Arc<dyn ServerCertVerifier> = match roots {
            // `prefer`, and `require` without root certificates: encrypted, not checked
            // (libpq's meaning).
            None => Arc::new(Unchecked(provider)),
            Some(roots) => {
                let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .map_err(|e| invalid(format!("the root certificates cannot be used: {e}")))?;
                if mode == SslMode::VerifyFull {
                    webpki
                } else {
                    // `verify-ca` (and `require`/`prefer` with `sslrootcert`): the chain,
                    // not the host name.
                    Arc::new(ChainOnly(webpki))
                }
            }
        };
        let config = builder
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
    }

    fn invalid(reason: String) -> PgError {
        PgError::InvalidUrl { reason }
    }

    /// The certificates of a PEM file (at least one).
    fn load_roots(path: &Path) -> Result<RootCertStore, PgError> {
        let shown = path.display();
        let unreadable = |e: &dyn std::fmt::Display| {
            invalid(format!(
                "`sslrootcert={shown}` cannot be read ({e}); give a PEM file holding the CA certificate that signed the server's"
            ))
        };
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(path).map_err(|e| unreadable(&e))? {
            let cert = cert.map_err(|e| unreadable(&e))?;
            roots.add(cert).map_err(|e| unreadable(&e))?;
        }
        if roots.is_empty() {
            return Err(unreadable(&"no certificate in it"));
        }
        Ok(roots)
    }

    /// Accepts any certificate (the handshake signatures are still verified).
    #[derive(Debug)]
    struct Unchecked(Arc<CryptoProvider>);

    impl ServerCertVerifier for Unchecked {
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
            verify_tls12_signature(
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
            verify_tls13_signature(
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

    /// The web PKI checks without the host name check (`verify-ca`).
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
            match self.0.verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp_response,
                now,
            ) {
                Err(rustls::Error::InvalidCertificate(
                    CertificateError::NotValidForName
                    | CertificateError::NotValidForNameContext { .. },
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
}
