//! Where the service is served: the host names it answers to, the port of its listener and
//! whether people reach it over https — so that a page another site serves cannot use it.
//!
//! - **Host**: every request must name one of the [`Site`]'s hosts in its `Host` header, or it
//!   is answered `421` before any route sees it. A web page on a name its attacker controls that
//!   resolves to the service's address (DNS rebinding) therefore reads nothing. The names are
//!   matched as the MCP transport matches its allowed hosts (a name matches on any port), and
//!   `loopx serve` hands that transport the same list, so the two cannot disagree.
//! - **Origin**: a request that may change something (any method but `GET`, `HEAD`, `OPTIONS`)
//!   is refused (`403`) when a browser says it came from elsewhere: an `Origin` that is not the
//!   request's own scheme, host and port, or `Sec-Fetch-Site` other than `same-origin` or
//!   `none`. Browsers treat every port of a host as the same site, so `SameSite=Strict`
//!   cookies alone do not stop a page on another port from posting a form here; this does.
//!   Clients that are not browsers send neither header and are not affected.
//! - **Cookies**: [`Site::cookie`] names a cookie after the listener's port (cookies are not
//!   kept apart by port, so two services on one host would otherwise share them), and
//!   [`Site::secure`] says it must carry `Secure` — with the `__Host-` prefix, which binds it
//!   to this exact host — when the site's public URL is https.
//!
//! A cookie is still sent by the browser to every port of its host; a server on another port
//! that the person visits receives it. Only https on a name of the site's own
//! (`--public-url https://…`) keeps it from such a server.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::Response;

use crate::bounds::refusal;

/// Where the service is served: see the [module](self).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    hosts: Vec<String>,
    port: Option<u16>,
    secure: bool,
}

/// A host name or URL the site cannot be served under.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SiteError {
    /// The public URL is not an absolute `http` or `https` URL with a host.
    #[error("the public URL `{0}` is not an http:// or https:// URL with a host")]
    PublicUrl(String),
    /// The host is not a host name or address.
    #[error("`{0}` is not a host name or address")]
    Host(String),
}

impl Default for Site {
    /// The loopback names, no port of its own, plain http.
    fn default() -> Site {
        Site {
            hosts: ["localhost", "127.0.0.1", "::1"]
                .map(str::to_owned)
                .to_vec(),
            port: None,
            secure: false,
        }
    }
}

impl Site {
    /// The site of a listener bound at `listen`: `localhost` and the listen address (every
    /// loopback name when it listens on all addresses), its cookies named after its port.
    pub fn local(listen: SocketAddr) -> Site {
        let mut site = Site {
            hosts: vec!["localhost".to_owned()],
            port: Some(listen.port()),
            secure: false,
        };
        if listen.ip().is_unspecified() {
            site.hosts
                .extend(["127.0.0.1".to_owned(), "::1".to_owned()]);
        } else {
            site.add(&listen.ip().to_string());
        }
        site
    }

    /// The same, also served at `url` (how people reach it, e.g. through a proxy): its host is
    /// allowed, and its cookies are `Secure` when it is https.
    ///
    /// # Errors
    /// [`SiteError::PublicUrl`] when `url` is not an absolute http(s) URL with a host.
    pub fn public_url(mut self, url: &str) -> Result<Site, SiteError> {
        let invalid = || SiteError::PublicUrl(url.to_owned());
        let uri: Uri = url.parse().map_err(|_| invalid())?;
        let secure = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(invalid()),
        };
        let host = uri.host().filter(|h| !h.is_empty()).ok_or_else(invalid)?;
        self.add(host);
        self.secure |= secure;
        Ok(self)
    }

    /// The same, also answering to `host` (a name or address, without a port).
    ///
    /// # Errors
    /// [`SiteError::Host`] when `host` is not a host name or address.
    pub fn allow_host(mut self, host: &str) -> Result<Site, SiteError> {
        let parsed: Option<axum::http::uri::Authority> = host.parse().ok();
        match parsed {
            Some(authority) if authority.port().is_none() && !host.contains('@') => {
                self.add(authority.host());
                Ok(self)
            }
            _ => Err(SiteError::Host(host.to_owned())),
        }
    }

    fn add(&mut self, host: &str) {
        let host = normalized(host);
        if !self.hosts.contains(&host) {
            self.hosts.push(host);
        }
    }

    /// The host names it answers to, lower-case, IPv6 addresses without brackets.
    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    /// Whether its cookies must be `Secure` (its public URL is https).
    pub fn secure(&self) -> bool {
        self.secure
    }

    /// The name of the cookie `base` on this site: after the listener's port, and with the
    /// `__Host-` prefix when it is `Secure`.
    pub fn cookie(&self, base: &str) -> String {
        let prefix = if self.secure { "__Host-" } else { "" };
        match self.port {
            Some(port) => format!("{prefix}{base}_{port}"),
            None => format!("{prefix}{base}"),
        }
    }

    /// `router` behind the Host and Origin checks.
    pub(crate) fn around(self, router: Router) -> Router {
        router.layer(middleware::from_fn_with_state(Arc::new(self), guard))
    }

    /// Whether a request names one of the site's hosts.
    fn names_host(&self, host: Option<&Authority>) -> bool {
        host.is_some_and(|host| self.hosts.contains(&host.host))
    }
}

/// A host and port as a request names them.
#[derive(Debug, PartialEq, Eq)]
struct Authority {
    host: String,
    port: Option<u16>,
}

fn normalized(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

fn authority(text: &str) -> Option<Authority> {
    let parsed: axum::http::uri::Authority = text.parse().ok()?;
    Some(Authority {
        host: normalized(parsed.host()),
        port: parsed.port_u16(),
    })
}

/// The host the request is addressed to: its `Host` header, or the request target's authority.
fn request_host(request: &Request) -> Option<Authority> {
    match request.headers().get(header::HOST) {
        Some(value) => authority(value.to_str().ok()?),
        None => authority(request.uri().authority()?.as_str()),
    }
}

/// Refuses a request addressed to a host the site does not answer to, and a browser's post
/// from another origin.
async fn guard(State(site): State<Arc<Site>>, request: Request, next: Next) -> Response {
    let host = request_host(&request);
    if !site.names_host(host.as_ref()) {
        return refusal(
            StatusCode::MISDIRECTED_REQUEST,
            "host_not_allowed",
            &format!(
                "this service answers only to {}; serve it under another name with --allow-host NAME or --public-url URL",
                site.hosts.join(", ")
            ),
        );
    }
    let safe = matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    if !safe && !same_origin(request.headers(), host.as_ref()) {
        return refusal(
            StatusCode::FORBIDDEN,
            "cross_origin",
            "the browser says this request comes from another site or origin; nothing was changed",
        );
    }
    next.run(request).await
}

/// Whether what a browser says of the request's origin is this very host: no `Origin` or
/// `Sec-Fetch-Site` (not a browser), or both naming the same origin.
fn same_origin(headers: &HeaderMap, host: Option<&Authority>) -> bool {
    let fetch_site = headers
        .get("sec-fetch-site")
        .map(|v| v.to_str().unwrap_or_default());
    if fetch_site.is_some_and(|site| !matches!(site, "same-origin" | "none")) {
        return false;
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let (Ok(origin), Some(host)) = (origin.to_str(), host) else {
        return false;
    };
    origin_is(origin, host)
}

/// Whether `origin` (`scheme://host[:port]`) is `host`, a missing port being the scheme's.
fn origin_is(origin: &str, host: &Authority) -> bool {
    let Some((scheme, rest)) = origin.split_once("://") else {
        return false;
    };
    let default = match scheme.to_ascii_lowercase().as_str() {
        "http" => 80,
        "https" => 443,
        _ => return false,
    };
    let Some(origin) = authority(rest) else {
        return false;
    };
    origin.host == host.host && origin.port.unwrap_or(default) == host.port.unwrap_or(default)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(text: &str) -> Authority {
        authority(text).expect("an authority")
    }

    #[test]
    fn a_local_site_answers_to_localhost_and_its_address_and_names_cookies_by_port() {
        let site = Site::local("127.0.0.1:7468".parse().expect("an address"));
        assert_eq!(site.hosts(), ["localhost", "127.0.0.1"]);
        assert_eq!(site.cookie("loopx_session"), "loopx_session_7468");
        let everywhere = Site::local("0.0.0.0:80".parse().expect("an address"));
        assert_eq!(everywhere.hosts(), ["localhost", "127.0.0.1", "::1"]);
    }

    #[test]
    fn a_public_https_url_adds_its_host_and_makes_cookies_secure() {
        let site = Site::local("127.0.0.1:7468".parse().expect("an address"))
            .public_url("https://Loopx.Example.com/board")
            .expect("a URL");
        assert!(site.hosts().contains(&"loopx.example.com".to_owned()));
        assert!(site.secure());
        assert_eq!(site.cookie("loopx_session"), "__Host-loopx_session_7468");
        for bad in ["loopx.example.com", "ftp://x", "https://", "not a url"] {
            assert!(Site::default().public_url(bad).is_err(), "{bad}");
        }
        for bad in ["a b", "x:80", "user@x", ""] {
            assert!(Site::default().allow_host(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_origin_is_the_same_only_with_the_same_host_and_port() {
        let here = host("127.0.0.1:7468");
        assert!(origin_is("http://127.0.0.1:7468", &here));
        assert!(!origin_is("http://127.0.0.1:3000", &here));
        assert!(!origin_is("http://evil.example:7468", &here));
        assert!(!origin_is("null", &here));
        assert!(origin_is("https://loopx.example", &host("loopx.example")));
        assert!(origin_is(
            "https://loopx.example",
            &host("loopx.example:443")
        ));
        assert!(!origin_is(
            "http://loopx.example",
            &host("loopx.example:443")
        ));
    }
}
