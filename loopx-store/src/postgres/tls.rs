//! TLS to PostgreSQL, configured the way libpq users configure it: `sslmode` and `sslrootcert`
//! in the connection string (a URL's query or a key-value string), or `PGSSLMODE` and
//! `PGSSLROOTCERT` in the environment when the string names none; spoken with rustls.
//!
//! | `sslmode` | TLS | the server's certificate |
//! | --- | --- | --- |
//! | `disable` | never | — |
//! | `allow`, `prefer` (libpq's default) | when the server offers it, else plain | not checked, unless a root certificate is given: then as `verify-ca` |
//! | `require` | always | not checked, unless a root certificate is given: then as `verify-ca` |
//! | `verify-ca` | always | signed by a root of `sslrootcert` |
//! | `verify-full` | always | signed by a root of `sslrootcert` and issued for the host connected to |
//!
//! `sslrootcert` is a PEM file of root certificates, or `system` for the operating system's
//! store; without it, `verify-ca` and `verify-full` read `~/.postgresql/root.crt` as libpq does,
//! and refuse to connect when there is none. (libpq treats `allow` as "plain first"; tokio-postgres
//! cannot, so here it is `prefer`.)

use std::path::{Path, PathBuf};
use std::sync::Arc;

use loopx_kernel::seams::StoreError;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres_rustls::MakeRustlsConnect;

/// How much TLS a connection asks for (`sslmode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(text: &str) -> Result<SslMode, StoreError> {
        Ok(match text {
            "disable" => SslMode::Disable,
            "allow" | "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(unavailable(format!(
                    "sslmode `{other}` is not one of disable, allow, prefer, require, verify-ca, verify-full"
                )));
            }
        })
    }

    /// The mode as tokio-postgres reads it: it negotiates, the connector below verifies.
    fn negotiated(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => "require",
        }
    }
}

/// Where the roots that sign the server's certificate come from (`sslrootcert`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Roots {
    File(PathBuf),
    System,
}

/// The TLS settings read from a connection string and the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TlsSettings {
    pub(super) mode: SslMode,
    roots: Option<Roots>,
}

/// Reads `sslmode` and `sslrootcert` out of `url` (falling back on `env`, which reads
/// `PGSSLMODE` and `PGSSLROOTCERT`): the connection string as tokio-postgres reads it (its
/// `sslmode` one it knows, `sslrootcert` removed) and the settings.
pub(super) fn split(
    url: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(String, TlsSettings), StoreError> {
    let uri = url.starts_with("postgres://") || url.starts_with("postgresql://");
    let mut params = if uri {
        uri_params(url)?
    } else {
        key_values(url)?
    };
    let take = |params: &mut Vec<(String, String)>, key: &str| {
        let found = params.iter().rposition(|(k, _)| k == key);
        found.map(|i| params.remove(i).1)
    };
    let mode = take(&mut params, "sslmode").or_else(|| env("PGSSLMODE"));
    let roots = take(&mut params, "sslrootcert").or_else(|| env("PGSSLROOTCERT"));
    let mode = mode
        .as_deref()
        .map_or(Ok(SslMode::Prefer), SslMode::parse)?;
    let roots = roots.map(|r| match r.as_str() {
        "system" => Roots::System,
        _ => Roots::File(PathBuf::from(r)),
    });
    params.push(("sslmode".to_owned(), mode.negotiated().to_owned()));
    let rebuilt = if uri {
        rebuild_uri(url, &params)
    } else {
        rebuild_key_values(&params)
    };
    Ok((rebuilt, TlsSettings { mode, roots }))
}

/// The rustls connector for `settings`.
pub(super) fn connector(settings: &TlsSettings) -> Result<MakeRustlsConnect, StoreError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = match (&settings.roots, settings.mode) {
        (Some(roots), _) => Some(load_roots(roots)?),
        (None, SslMode::VerifyCa | SslMode::VerifyFull) => Some(load_roots(&default_roots()?)?),
        (None, _) => None,
    };
    let verifier: Arc<dyn ServerCertVerifier> = match roots {
        None => Arc::new(Unchecked(provider.clone())),
        Some(roots) => {
            let webpki =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()
                    .map_err(|error| {
                        unavailable(format!("the root certificates cannot be used: {error}"))
                    })?;
            match settings.mode {
                SslMode::VerifyFull => webpki,
                _ => Arc::new(ChainOnly(webpki)),
            }
        }
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| unavailable(format!("TLS cannot be set up: {error}")))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// libpq's default root file, `~/.postgresql/root.crt`, when it exists.
fn default_roots() -> Result<Roots, StoreError> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    match home.map(|h| h.join(".postgresql/root.crt")) {
        Some(path) if path.is_file() => Ok(Roots::File(path)),
        _ => Err(unavailable(
            "sslmode verify-ca and verify-full check the server's certificate against root certificates: set sslrootcert=/path/to/ca.pem in the URL (or PGSSLROOTCERT), sslrootcert=system for the system's store, or put them in ~/.postgresql/root.crt".to_owned(),
        )),
    }
}

fn load_roots(roots: &Roots) -> Result<RootCertStore, StoreError> {
    let mut store = RootCertStore::empty();
    match roots {
        Roots::File(path) => {
            for cert in read_pem(path)? {
                store.add(cert).map_err(|error| {
                    unavailable(format!(
                        "a root certificate in {} cannot be used: {error}",
                        path.display()
                    ))
                })?;
            }
        }
        Roots::System => {
            let found = rustls_native_certs::load_native_certs();
            store.add_parsable_certificates(found.certs);
        }
    }
    if store.is_empty() {
        return Err(unavailable(format!(
            "sslrootcert ({}) holds no root certificate",
            describe(roots)
        )));
    }
    Ok(store)
}

fn read_pem(path: &Path) -> Result<Vec<CertificateDer<'static>>, StoreError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|error| {
            unavailable(format!(
                "sslrootcert {} cannot be read: {error}",
                path.display()
            ))
        })?;
    Ok(certs)
}

fn describe(roots: &Roots) -> String {
    match roots {
        Roots::File(path) => path.display().to_string(),
        Roots::System => "the system's store".to_owned(),
    }
}

fn unavailable(detail: String) -> StoreError {
    StoreError::Unavailable { detail }
}

/// `sslmode=require` (or `prefer`) without roots: encrypted, the certificate not checked, the
/// handshake's signatures still are.
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
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

/// `sslmode=verify-ca`: the chain must lead to a root, the name need not match the host.
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
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
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

/// The query parameters of a URL, each decoded.
fn uri_params(url: &str) -> Result<Vec<(String, String)>, StoreError> {
    let Some((_, query)) = url.split_once('?') else {
        return Ok(Vec::new());
    };
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            Ok((decode(key)?, decode(value)?))
        })
        .collect()
}

fn rebuild_uri(url: &str, params: &[(String, String)]) -> String {
    let base = url.split_once('?').map_or(url, |(base, _)| base);
    let query: Vec<String> = params
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect();
    format!("{base}?{}", query.join("&"))
}

/// Percent-decoding of a URL's query part.
fn decode(text: &str) -> Result<String, StoreError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| {
                    unavailable("the PostgreSQL URL's query has a malformed %-escape".to_owned())
                })?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out)
        .map_err(|_| unavailable("the PostgreSQL URL's query is not UTF-8".to_owned()))
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The `key=value` pairs of a libpq key-value string (values may be single-quoted, with `\'`
/// and `\\` escapes), each unquoted.
fn key_values(text: &str) -> Result<Vec<(String, String)>, StoreError> {
    let malformed = || {
        unavailable("the PostgreSQL connection string is not of the form key=value ...".to_owned())
    };
    let mut pairs = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Ok(pairs);
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next() != Some('=') || key.is_empty() {
            return Err(malformed());
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next() {
                    Some('\'') => break,
                    Some('\\') => value.push(chars.next().ok_or_else(malformed)?),
                    Some(c) => value.push(c),
                    None => return Err(malformed()),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                value.push(c);
            }
        }
        pairs.push((key, value));
    }
}

fn rebuild_key_values(params: &[(String, String)]) -> String {
    params
        .iter()
        .map(|(k, v)| format!("{k}='{}'", v.replace('\\', "\\\\").replace('\'', "\\'")))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn a_url_keeps_its_other_parameters_and_loses_sslrootcert() {
        let (url, settings) = split(
            "postgres://u:p@db.example:5432/loopx?application_name=fleet&sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem",
            &no_env,
        )
        .unwrap();
        assert_eq!(
            url,
            "postgres://u:p@db.example:5432/loopx?application_name=fleet&sslmode=require"
        );
        assert_eq!(settings.mode, SslMode::VerifyFull);
        assert_eq!(
            settings.roots,
            Some(Roots::File(PathBuf::from("/etc/ca.pem")))
        );
    }

    #[test]
    fn the_environment_fills_in_what_the_string_does_not_say() {
        let env = |name: &str| match name {
            "PGSSLMODE" => Some("verify-ca".to_owned()),
            "PGSSLROOTCERT" => Some("system".to_owned()),
            _ => None,
        };
        let (url, settings) = split("host=db user=loopx dbname='a b'", &env).unwrap();
        assert_eq!(url, "host='db' user='loopx' dbname='a b' sslmode='require'");
        assert_eq!(settings.mode, SslMode::VerifyCa);
        assert_eq!(settings.roots, Some(Roots::System));
        let (_, settings) = split("postgres://db/x?sslmode=disable", &env).unwrap();
        assert_eq!(
            settings.mode,
            SslMode::Disable,
            "the string wins over the environment"
        );
    }

    #[test]
    fn libpq_defaults_to_prefer() {
        let (url, settings) = split("postgres://db/x", &no_env).unwrap();
        assert_eq!(url, "postgres://db/x?sslmode=prefer");
        assert_eq!(settings.mode, SslMode::Prefer);
    }

    #[test]
    fn bad_settings_are_typed_errors() {
        for bad in [
            "postgres://db/x?sslmode=always",
            "postgres://db/x?sslrootcert=%zz",
            "host=db user",
            "host='db",
        ] {
            assert!(
                matches!(split(bad, &no_env), Err(StoreError::Unavailable { .. })),
                "{bad}"
            );
        }
        let settings = TlsSettings {
            mode: SslMode::VerifyFull,
            roots: Some(Roots::File(PathBuf::from("/nonexistent/ca.pem"))),
        };
        let error = connector(&settings).err().expect("no such file");
        assert!(error.to_string().contains("/nonexistent/ca.pem"), "{error}");
    }
}
