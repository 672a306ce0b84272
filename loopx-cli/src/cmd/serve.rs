//! `loopx serve`: the service over the store, on one address, until SIGTERM or SIGINT — health,
//! metrics, the board (`/`, `/goals/GOAL`, `/inbox`, `/events`), loopx's MCP tools over
//! streamable HTTP (`/mcp`) for the actors given a token, GitHub's deliveries
//! (`/github/webhook`) when given the webhook's secret, and the poller of every goal's watches
//! when given a GitHub token.

use std::net::SocketAddr;
use std::sync::Arc;

use clap::Args;
use loopx_kernel::Keyring;
use loopx_kernel::seams::Store;
use loopx_kernel::{Duration, SourceId};
use loopx_provider::clock::SystemClock;
use loopx_provider::github::rest::{GITHUB_API, GitHubClient, Token};
use loopx_provider::github::webhook::WebhookVerifier;
use loopx_server::capabilities::{GITHUB_PROVIDER, Registry};
use loopx_server::github::Deliveries;
use loopx_server::mcp::{Acting, LoopxMcp, TokenError, Tokens, http};
use loopx_server::schedule::Poller;
use loopx_server::{Bounds, Service, Site, serve_with, shutdown_signal};
use loopx_server::{board, gates};
use serde_json::json;
use tokio::net::TcpListener;

use crate::context::{Ctx, parse_duration};
use crate::error::{CliError, Exit};

/// Flags of `loopx serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on (port 0: any free port, printed on start).
    #[arg(long, default_value = "127.0.0.1:7468", value_name = "ADDR:PORT")]
    listen: SocketAddr,
    /// Serve the MCP tools at `/mcp`, gate answers at `POST /goals/GOAL/gates/GATE/answer` and
    /// the board's inbox (signed in at `/inbox` with the token) to ACTOR, who presents the bearer token held in the
    /// environment variable ENV (never the token itself on the command line, where `ps` shows
    /// it); its commands are signed with ACTOR's key from the key directory. A token has at
    /// least 32 characters (`openssl rand -hex 32`) and one actor; only a person's signs in to
    /// the inbox. Repeatable.
    #[arg(long = "mcp-token", value_name = "ACTOR=ENV")]
    mcp_tokens: Vec<String>,
    /// Receive GitHub's deliveries at `POST /github/webhook`, verified with the webhook secret
    /// held in the environment variable NAME (never the secret itself on the command line).
    /// Facts are recorded as `provider:github` and judged by each goal's capability, signed
    /// with those actors' keys from the key directory.
    #[arg(long = "webhook-secret-env", value_name = "NAME")]
    webhook_secret_env: Option<String>,
    /// Poll every watch of the goals bound to a capability when it falls due, through
    /// GitHub's REST API with the token held in the environment variable NAME (never the
    /// token itself on the command line). Without it nothing is polled.
    #[arg(long = "github-token-env", value_name = "NAME")]
    github_token_env: Option<String>,
    /// The GitHub REST API the poller reads (a GitHub Enterprise `https://HOST/api/v3`).
    #[arg(long = "github-api-url", value_name = "URL", default_value = GITHUB_API)]
    github_api_url: String,
    /// How often each watched stream is polled: once its last observation is this old.
    #[arg(long = "poll-every", value_parser = parse_duration, default_value = "1m", value_name = "DURATION")]
    poll_every: Duration,
    /// The URL people reach the service at (e.g. through a proxy): its host is answered to, and
    /// the inbox's cookie is `Secure` when it is https. Every request must name `localhost`,
    /// the listen address or one of these hosts, or it is refused (421).
    #[arg(long = "public-url", value_name = "URL")]
    public_url: Option<String>,
    /// Also answer to requests for host NAME (without a port). Repeatable.
    #[arg(long = "allow-host", value_name = "NAME")]
    allow_hosts: Vec<String>,
    #[command(flatten)]
    bounds: BoundsArgs,
}

/// What one client may hold of the service (see the server's `bounds`).
#[derive(Debug, Args)]
pub struct BoundsArgs {
    /// Connections open at once; past it the service stops accepting until one closes.
    #[arg(long = "max-connections", default_value_t = 512, value_name = "N")]
    max_connections: usize,
    /// How long a request's headers may take to arrive, counted from when the connection waits
    /// for them (so also how long a connection may stay open without a request).
    #[arg(long = "header-timeout", value_parser = parse_duration, default_value = "10s", value_name = "DURATION")]
    header_timeout: Duration,
    /// How long a request's whole body may take to arrive.
    #[arg(long = "body-timeout", value_parser = parse_duration, default_value = "30s", value_name = "DURATION")]
    body_timeout: Duration,
    /// How long a connection may go without a byte moving either way.
    #[arg(long = "idle-timeout", value_parser = parse_duration, default_value = "60s", value_name = "DURATION")]
    idle_timeout: Duration,
    /// Bytes of request bodies read at once (e.g. 64MiB), at least the largest body (25 MiB);
    /// a body that does not fit waits up to the body timeout, then is refused (503).
    #[arg(long = "body-budget", value_parser = parse_bytes, default_value = "64MiB", value_name = "BYTES")]
    body_budget: usize,
}

impl BoundsArgs {
    /// The bounds these flags give, checked.
    fn bounds(&self) -> Result<Bounds, CliError> {
        let time = |duration: Duration| {
            std::time::Duration::from_millis(duration.as_millis().try_into().unwrap_or(0))
        };
        let bounds = Bounds {
            max_connections: self.max_connections,
            header_timeout: time(self.header_timeout),
            body_timeout: time(self.body_timeout),
            idle_timeout: time(self.idle_timeout),
            body_budget: self.body_budget,
            ..Bounds::default()
        };
        bounds.check().map_err(|error| {
            CliError::usage(
                "bounds_invalid",
                format!("the service cannot be served so: {error}"),
                "give positive timeouts and connections, and --body-budget of at least 25MiB",
            )
        })?;
        Ok(bounds)
    }
}

/// Parses a size in bytes, with an optional `KiB`, `MiB` or `GiB` (clap value parser).
fn parse_bytes(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let (digits, unit) = text
        .find(|c: char| !c.is_ascii_digit())
        .map_or((text, ""), |i| text.split_at(i));
    let value: usize = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a size (e.g. 64MiB)"))?;
    let scale: usize = match unit {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => return Err(format!("`{text}` has an unknown unit: use KiB, MiB or GiB")),
    };
    value
        .checked_mul(scale)
        .ok_or_else(|| format!("`{text}` is too large"))
}

/// How long one request to GitHub may take.
const REQUEST_TIMEOUT: Duration = Duration::seconds(30);

/// The variable that filters the service's log (`tracing`'s directives, e.g. `debug` or
/// `loopx_server=debug,info`); `info` when unset.
const LOG_FILTER: &str = "LOOPX_LOG";

pub async fn run(ctx: &Ctx, args: &ServeArgs) -> Result<Exit, CliError> {
    init_log();
    let tokens = mcp_tokens(ctx, &args.mcp_tokens)?;
    let verifier = webhook_verifier(args.webhook_secret_env.as_deref())?;
    let github_token = github_token(args.github_token_env.as_deref())?;
    if args.poll_every.as_millis() <= 0 {
        return Err(CliError::usage(
            "poll_every_invalid",
            format!("--poll-every {} polls without pause", args.poll_every),
            "give a positive interval, e.g. --poll-every 1m",
        ));
    }
    let bounds = args.bounds.bounds()?;
    let store = ctx.open().await?.into_store();
    let client = match github_token {
        Some(token) => Some(github_client(args, token)?),
        None => None,
    };
    let listener = TcpListener::bind(args.listen).await.map_err(|error| {
        CliError::new(
            Exit::Other,
            "listen_failed",
            format!("cannot listen on {}: {error}", args.listen),
            "choose another address with --listen (port 0 picks a free one)",
        )
    })?;
    let address = listener.local_addr().map_or(args.listen, |address| address);
    let site = site(args, address)?;
    let (service, poller) = routes(ctx, args, &store, client.as_ref(), verifier, tokens, &site)?;
    let router = service.site(site).bounds(bounds.clone()).router();
    let shutdown = shutdown_signal().map_err(|error| {
        CliError::new(
            Exit::Other,
            "signals_unavailable",
            format!("cannot listen for SIGTERM and SIGINT, so the service could not stop cleanly: {error}"),
            "",
        )
    })?;
    let polling = poller
        .as_ref()
        .map(|_| format!("polling {} every {}", args.github_api_url, args.poll_every));
    // The first line says where the service is, so a supervisor (or a test) that asked for
    // port 0 can reach it, and whether it polls.
    let document = json!({
        "listening": format!("http://{address}"),
        "polling": polling.as_ref().map(|_| json!({
            "api": args.github_api_url,
            "every_ms": args.poll_every.as_millis(),
        })),
    });
    ctx.out.emit(&document, |_| match &polling {
        Some(polling) => format!("listening on http://{address}; {polling}\n"),
        None => format!("listening on http://{address}; not polling (no --github-token-env)\n"),
    });
    match &polling {
        Some(polling) => tracing::info!("{polling}"),
        None => {
            tracing::info!("not polling: no --github-token-env, so watches wait for deliveries");
        }
    }
    // One signal stops both: the server drains its requests, the poller stops between commits.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let polling = poller.map(|poller| {
        let mut stopped = stopped.clone();
        tokio::spawn(poller.run(async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        }))
    });
    let signalled = async move {
        shutdown.await;
        let _ = stop.send(true);
    };
    let served = serve_with(listener, router, &bounds, signalled).await;
    if let Some(polling) = polling {
        let _ = polling.await;
    }
    served.map_err(|error| {
        CliError::new(
            Exit::Other,
            "serve_failed",
            format!("the service stopped: {error}"),
            "",
        )
    })?;
    Ok(Exit::Ok)
}

/// The service's routes over `store` (the webhook, the board, the MCP tools and gate answers as
/// configured) and the poller, when a GitHub client polls.
fn routes(
    ctx: &Ctx,
    args: &ServeArgs,
    store: &Arc<dyn Store>,
    client: Option<&Arc<GitHubClient>>,
    verifier: Option<WebhookVerifier>,
    tokens: Option<Tokens>,
    site: &Site,
) -> Result<(Service, Option<Poller>), CliError> {
    let mut service = Service::new(Arc::clone(store), Arc::new(SystemClock));
    if let Some(verifier) = verifier {
        let mut deliveries = Deliveries::new(Arc::clone(store), Arc::new(SystemClock), verifier)
            .keyring(delivery_keyring(ctx)?);
        // With a GitHub token, each pending gate of an owner whose login is mapped is noticed
        // once in the goal's pull request.
        if let Some(client) = client {
            deliveries = deliveries.notifier(client.clone());
        }
        service = service.mount(deliveries.router());
    }
    let inbox = tokens.clone().unwrap_or_default();
    service = service.mount(board::router(
        Arc::clone(store),
        Arc::new(SystemClock),
        inbox,
        site,
    ));
    let poller = match client {
        Some(client) => Some(github_poller(ctx, args, store, client)?),
        None => None,
    };
    if let Some(poller) = &poller {
        service = service.poller(poller);
    }
    if let Some(tokens) = tokens {
        let answers = gates::router(Arc::clone(store), Arc::new(SystemClock), tokens.clone());
        let tools = LoopxMcp::new(Arc::clone(store), Arc::new(SystemClock));
        service = service
            .mount(http::router_at(tools, tokens, site))
            .mount(answers);
    }
    Ok((service, poller))
}

/// Where the service listening at `address` is served: `localhost`, the address, the host of
/// `--public-url` and each `--allow-host`.
fn site(args: &ServeArgs, address: SocketAddr) -> Result<Site, CliError> {
    let invalid = |flag: &str, error: loopx_server::site::SiteError| {
        CliError::usage(
            "site_invalid",
            format!("{flag}: {error}"),
            "e.g. --public-url https://loopx.example.com, --allow-host loopx.internal",
        )
    };
    let mut site = Site::local(address);
    if let Some(url) = &args.public_url {
        site = site
            .public_url(url)
            .map_err(|e| invalid("--public-url", e))?;
    }
    for host in &args.allow_hosts {
        site = site
            .allow_host(host)
            .map_err(|e| invalid("--allow-host", e))?;
    }
    Ok(site)
}

/// The verifier of `--webhook-secret-env NAME`, its secret read from NAME; `None` without the
/// flag (no webhook route). A missing or empty variable is an error naming it, never a value.
fn webhook_verifier(variable: Option<&str>) -> Result<Option<WebhookVerifier>, CliError> {
    let Some(variable) = variable else {
        return Ok(None);
    };
    let secret = std::env::var(variable)
        .ok()
        .filter(|secret| !secret.is_empty())
        .ok_or_else(|| {
            CliError::usage(
                "webhook_secret_missing",
                format!(
                    "--webhook-secret-env: the environment variable {variable} holds no secret"
                ),
                format!(
                    "export {variable} with the secret the repository's webhook is configured with"
                ),
            )
        })?;
    Ok(Some(WebhookVerifier::new(secret)))
}

/// The token of `--github-token-env NAME`, read from NAME; `None` without the flag (nothing
/// polled). A missing or empty variable is an error naming it, never a value.
fn github_token(variable: Option<&str>) -> Result<Option<Token>, CliError> {
    let Some(variable) = variable else {
        return Ok(None);
    };
    Token::from_env(variable).map(Some).ok_or_else(|| {
        CliError::usage(
            "github_token_missing",
            format!("--github-token-env: the environment variable {variable} holds no token"),
            format!("export {variable} with a GitHub token that can read the pull requests"),
        )
    })
}

/// GitHub's REST API at `--github-api-url` as the provider `github`.
fn github_client(args: &ServeArgs, token: Token) -> Result<Arc<GitHubClient>, CliError> {
    let source = SourceId::new(GITHUB_PROVIDER)
        .map_err(|error| CliError::new(Exit::Other, "github_unavailable", error.to_string(), ""))?;
    let client = GitHubClient::new(
        source,
        args.github_api_url.as_str(),
        Some(token),
        REQUEST_TIMEOUT,
        Arc::new(SystemClock),
    )
    .map_err(|error| {
        CliError::new(
            Exit::Other,
            "github_unavailable",
            format!("cannot build the GitHub client: {error}"),
            "",
        )
    })?;
    Ok(Arc::new(client))
}

/// The poller of the goals' watches through `client`, each stream polled `--poll-every`,
/// signed as deliveries are, noticing gates through it as deliveries do.
fn github_poller(
    ctx: &Ctx,
    args: &ServeArgs,
    store: &Arc<dyn Store>,
    client: &Arc<GitHubClient>,
) -> Result<Poller, CliError> {
    Ok(Poller::new(Arc::clone(store), Arc::new(SystemClock))
        .provider(client.clone())
        .notifier(client.clone())
        .every(args.poll_every)
        .keyring(delivery_keyring(ctx)?))
}

/// The keys deliveries are signed with: `provider:github`'s and each shipped capability's that
/// the service's key directory holds (a goal created here with `--capability` registered them).
pub(crate) fn delivery_keyring(ctx: &Ctx) -> Result<Keyring, CliError> {
    let mut actors = vec![crate::context::parse_actor("provider:github")?];
    for name in Registry::shipped().names() {
        actors.push(crate::context::parse_actor(&format!("capability:{name}"))?);
    }
    let mut keyring = Keyring::new();
    for actor in actors {
        if let Some(key) = ctx.key_dir(&actor).get(&actor)? {
            keyring = keyring.with(actor, Arc::new(key.secret));
        }
    }
    Ok(keyring)
}

/// The MCP tokens of `--mcp-token ACTOR=ENV`, each read from its variable and paired with its
/// actor's key; `None` when none is given (no `/mcp` route). A missing variable or key is an
/// error naming the variable, never its value.
fn mcp_tokens(ctx: &Ctx, given: &[String]) -> Result<Option<Tokens>, CliError> {
    if given.is_empty() {
        return Ok(None);
    }
    let mut tokens = Tokens::new();
    for pair in given {
        let Some((actor, variable)) = pair.split_once('=') else {
            return Err(CliError::usage(
                "mcp_token_invalid",
                format!("--mcp-token `{pair}` is not ACTOR=ENV"),
                "e.g. --mcp-token agent:agent-a=AGENT_A_TOKEN, with the token in $AGENT_A_TOKEN",
            ));
        };
        let actor = crate::context::parse_actor(actor)?;
        let token = std::env::var(variable)
            .ok()
            .filter(|token| !token.trim().is_empty())
            .ok_or_else(|| {
                CliError::usage(
                    "mcp_token_missing",
                    format!("--mcp-token: the environment variable {variable} holds no token for {actor}"),
                    format!("export {variable} with the token {actor}'s runtime presents"),
                )
            })?;
        let acting = match ctx.key_of(&actor)? {
            Some(key) => Acting::signed(actor, Arc::new(key.secret)),
            None => Acting::unsigned(actor),
        };
        tokens = tokens.with(&token, acting).map_err(|e| token_refused(&e))?;
    }
    Ok(Some(tokens))
}

/// A token the service will not serve with, naming the actors and never the token.
fn token_refused(error: &TokenError) -> CliError {
    let (code, hint) = match error {
        TokenError::TooShort { .. } => (
            "mcp_token_weak",
            "make each token with `openssl rand -hex 32` (or another generator of at least 128 random bits)",
        ),
        TokenError::Shared { .. } => (
            "mcp_token_shared",
            "give each actor a token of its own, each in its own variable",
        ),
    };
    CliError::usage(code, format!("--mcp-token: {error}"), hint)
}

/// The log goes to standard error, filtered by `LOOPX_LOG`; standard output keeps the one line
/// (or document) that says where the service listens.
fn init_log() {
    let filter = tracing_subscriber::EnvFilter::try_from_env(LOG_FILTER)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}
