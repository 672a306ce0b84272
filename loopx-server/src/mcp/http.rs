//! The tools over streamable HTTP, as an axum router a service mounts (`loopx serve`, or a
//! host's own server). Every request presents `Authorization: Bearer TOKEN`; the token names
//! the actor the request acts for and the key its commands are signed with ([`Tokens`]). A
//! missing or unknown token is `401 Unauthorized` before anything is read; the token is never
//! logged, echoed or stored. Identity is per request, never per session: a session id reused
//! with another token acts for that token's actor.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse as _, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;

use super::{Acting, LoopxMcp, Tokens};
use crate::site::Site;

/// Where the router serves the MCP endpoint.
pub const PATH: &str = "/mcp";

/// The router serving `tools` at [`PATH`] to the holders of `tokens`, with the SDK's default
/// transport settings (which accept requests for loopback hosts only: a service reachable
/// under another name passes its own [`StreamableHttpServerConfig`] to [`router_with`]).
pub fn router(tools: LoopxMcp, tokens: Tokens) -> Router {
    router_with(tools, tokens, StreamableHttpServerConfig::default())
}

/// [`router`] answering to `site`'s hosts, the list the service checks every request's host
/// against ([`crate::Service::site`]), so the transport and the service agree.
pub fn router_at(tools: LoopxMcp, tokens: Tokens, site: &Site) -> Router {
    let config = StreamableHttpServerConfig::default().with_allowed_hosts(site.hosts().to_vec());
    router_with(tools, tokens, config)
}

/// [`router`] with the transport's settings given (allowed hosts, keep-alive, cancellation).
pub fn router_with(tools: LoopxMcp, tokens: Tokens, config: StreamableHttpServerConfig) -> Router {
    // Each session gets its own copy, acting per request (the instance names no actor).
    let tools = LoopxMcp {
        acting: None,
        ..tools
    };
    let service = StreamableHttpService::new(
        move || Ok(tools.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    authenticated(Router::new().nest_service(PATH, service), tokens)
}

/// `router` behind bearer tokens: each request acts for its token's [`Acting`] (an extension
/// its handler reads), and one without a known token is `401` before anything is read.
pub(crate) fn authenticated(router: Router, tokens: Tokens) -> Router {
    router.layer(middleware::from_fn_with_state(
        Arc::new(tokens),
        authenticate,
    ))
}

/// The bearer token of a request, if it presents one.
fn bearer(request: &Request) -> Option<&str> {
    let value = request
        .headers()
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Lets a request through acting for its token's actor, or answers 401.
async fn authenticate(
    State(tokens): State<Arc<Tokens>>,
    mut request: Request,
    next: Next,
) -> Response {
    let acting: Option<Acting> = bearer(&request).and_then(|t| tokens.find(t)).cloned();
    match acting {
        Some(acting) => {
            request.extensions_mut().insert(acting);
            next.run(request).await
        }
        None => unauthorized(),
    }
}

fn unauthorized() -> Response {
    let body = json!({
        "code": "unauthorized",
        "message": "this request presents no token the server knows",
        "hint": "send `Authorization: Bearer TOKEN` with the token issued for your actor",
    });
    let mut response = (StatusCode::UNAUTHORIZED, body.to_string()).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"loopx\""),
    );
    response
}
