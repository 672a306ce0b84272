//! The service's HTTP house: the routes every deployment has (`/healthz`, `/metrics`), the
//! routes a host mounts beside them, a request-count and latency metric and a `tracing` span on
//! every request, and graceful shutdown.
//!
//! Every request is checked against where the service is served ([`Site`]: its host, and a
//! browser's origin on posts) and bounded in the body it may send ([`Bounds`]); the connections
//! themselves are bounded by [`serve_with`].
//!
//! A host that has its own server merges [`Service::router`] into it; `loopx serve` runs it with
//! [`serve_with`] until SIGTERM or SIGINT ([`shutdown_signal`]).

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration as StdDuration, Instant};

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use loopx_kernel::seams::{Clock, GoalStatus, Store};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use serde_json::json;
use tokio::net::TcpListener;
use tower_http::trace::TraceLayer;

use crate::bounds::{Bounds, serve_with};
use crate::site::Site;

/// How long `/healthz` waits for the store before it calls it unavailable.
const HEALTH_TIMEOUT: StdDuration = StdDuration::from_secs(2);

/// The labels of a request metric: the route as mounted (never the raw path, which would carry
/// ids and grow without bound), the method and the status.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestLabels {
    route: String,
    method: String,
    status: u16,
}

/// The labels of the goal gauge: a goal's standing.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StatusLabels {
    status: &'static str,
}

/// The service's metrics, registered once and shared by every request.
struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RequestLabels, Histogram>,
    goals: Family<StatusLabels, Gauge>,
    dead_letters: Gauge,
}

fn latency_histogram() -> Histogram {
    // 1 ms to about 16 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

impl Metrics {
    fn new() -> Metrics {
        let mut registry = Registry::with_prefix("loopx");
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = Family::<RequestLabels, Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        let goals = Family::<StatusLabels, Gauge>::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by route, method and status",
            requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "Time to answer an HTTP request, by route, method and status",
            latency.clone(),
        );
        registry.register(
            "goals",
            "Goals in the store by standing, as of the last scrape",
            goals.clone(),
        );
        let dead_letters = Gauge::default();
        registry.register(
            "dead_letters",
            "Provider facts a goal refused to record, kept until re-applied or dismissed, as of the last scrape",
            dead_letters.clone(),
        );
        Metrics {
            registry,
            requests,
            latency,
            goals,
            dead_letters,
        }
    }
}

/// What every route shares.
#[derive(Clone)]
struct Shared {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    metrics: Arc<Metrics>,
    // Scrapes are serialized, so two at once cannot interleave their gauge updates.
    scrape: Arc<Mutex<()>>,
}

/// The service over one store: the house routes and whatever a host mounts beside them.
pub struct Service {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    metrics: Metrics,
    mounted: Router,
    site: Site,
    bounds: Bounds,
}

impl Service {
    /// The service over `store`, reading time from `clock` (the system clock in a deployment).
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Service {
        Service {
            store,
            clock,
            metrics: Metrics::new(),
            mounted: Router::new(),
            site: Site::default(),
            bounds: Bounds::default(),
        }
    }

    /// Answers only to `site`'s hosts, and refuses a browser's post from another origin (by
    /// default: the loopback names, any port).
    #[must_use]
    pub fn site(mut self, site: Site) -> Service {
        self.site = site;
        self
    }

    /// Bounds each request's body by `bounds`: its deadline, its size and the budget of bodies
    /// in flight (by default [`Bounds::default`]). The connection-level bounds are
    /// [`serve_with`]'s.
    #[must_use]
    pub fn bounds(mut self, bounds: Bounds) -> Service {
        self.bounds = bounds;
        self
    }

    /// Counts `poller`'s polls on `/metrics`: `loopx_polls_total` by provider source and
    /// outcome (`changed`, `unchanged`, `error`, `backed_off`, `refused`). The poller runs
    /// beside the service ([`Poller::run`](crate::schedule::Poller::run)), stopped by the same
    /// signal.
    #[must_use]
    pub fn poller(mut self, poller: &crate::schedule::Poller) -> Service {
        poller.metrics().register(&mut self.metrics.registry);
        self
    }

    /// Mounts `router`'s routes beside the house routes (an MCP endpoint, GitHub's deliveries,
    /// the board). Its requests are counted and traced like the house's.
    #[must_use]
    pub fn mount(mut self, router: Router) -> Service {
        self.mounted = self.mounted.merge(router);
        self
    }

    /// The whole service as one router, ready to serve or to merge into a host's own.
    pub fn router(self) -> Router {
        let shared = Shared {
            store: self.store,
            clock: self.clock,
            metrics: Arc::new(self.metrics),
            scrape: Arc::new(Mutex::new(())),
        };
        let routes = Router::new()
            .route("/healthz", get(healthz))
            .route("/metrics", get(metrics))
            .with_state(shared.clone())
            .merge(self.mounted);
        // The host is checked before a body is reserved for, so a foreign one costs nothing.
        self.site
            .around(self.bounds.around(routes))
            .layer(middleware::from_fn_with_state(shared, count))
            .layer(TraceLayer::new_for_http())
    }
}

/// `GET /healthz`: 200 when the store answers a cross-goal query in time, 503 otherwise. The
/// body never carries the store's own error text, which may name a host or a path.
async fn healthz(State(shared): State<Shared>) -> Response {
    let now = shared.clock.now();
    match tokio::time::timeout(HEALTH_TIMEOUT, shared.store.next_wake(now)).await {
        Ok(Ok(_)) => (StatusCode::OK, axum::Json(json!({"status": "ok"}))).into_response(),
        Ok(Err(error)) => {
            tracing::warn!(error = %error, "health check: the store failed");
            unavailable("the store failed")
        }
        Err(_) => unavailable("the store did not answer in time"),
    }
}

fn unavailable(why: &str) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        axum::Json(json!({"status": "unavailable", "reason": why})),
    )
        .into_response()
}

/// `GET /metrics`: the Prometheus text exposition of the service's metrics, with the goals
/// and dead-letter gauges brought up to date from the store first.
async fn metrics(State(shared): State<Shared>) -> Response {
    let now = shared.clock.now();
    let counts = match tokio::time::timeout(HEALTH_TIMEOUT, shared.store.goals(now)).await {
        Ok(Ok(goals)) => Some(goals.iter().fold([0i64; 3], |mut counts, goal| {
            counts[status_index(goal.status)] += 1;
            counts
        })),
        _ => None,
    };
    let dead_letters =
        match tokio::time::timeout(HEALTH_TIMEOUT, shared.store.dead_letters(0)).await {
            Ok(Ok(kept)) => Some(i64::try_from(kept.total).unwrap_or(i64::MAX)),
            _ => None,
        };
    let _serial = shared.scrape.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(total) = dead_letters {
        shared.metrics.dead_letters.set(total);
    }
    if let Some(counts) = counts {
        for (status, count) in ["active", "accepted", "abandoned"].into_iter().zip(counts) {
            shared
                .metrics
                .goals
                .get_or_create(&StatusLabels { status })
                .set(count);
        }
    }
    let mut text = String::new();
    match prometheus_client::encoding::text::encode(&mut text, &shared.metrics.registry) {
        Ok(()) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

fn status_index(status: GoalStatus) -> usize {
    match status {
        GoalStatus::Active => 0,
        GoalStatus::Accepted => 1,
        GoalStatus::Abandoned => 2,
    }
}

/// Counts and times every request by its matched route.
async fn count(State(shared): State<Shared>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |path| path.as_str().to_owned());
    let method = request.method().as_str().to_owned();
    let start = Instant::now();
    let response = next.run(request).await;
    let labels = RequestLabels {
        route,
        method,
        status: response.status().as_u16(),
    };
    shared.metrics.requests.get_or_create(&labels).inc();
    shared
        .metrics
        .latency
        .get_or_create(&labels)
        .observe(start.elapsed().as_secs_f64());
    response
}

/// Serves `router` on `listener` under the default [`Bounds`] until `shutdown` completes, then
/// stops accepting and lets the requests in flight finish (a delivery being handled is either
/// answered or never acknowledged, so its sender retries it). [`serve_with`] takes the bounds.
///
/// # Errors
/// The listener's I/O error.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, router, &Bounds::default(), shutdown).await
}

/// Completes on the first SIGTERM or SIGINT (on platforms without them, on Ctrl-C).
///
/// # Errors
/// When the signals cannot be listened to.
pub fn shutdown_signal() -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut terminate = signal(SignalKind::terminate())?;
        let mut interrupt = signal(SignalKind::interrupt())?;
        Ok(async move {
            tokio::select! {
                _ = terminate.recv() => tracing::info!("SIGTERM: shutting down"),
                _ = interrupt.recv() => tracing::info!("SIGINT: shutting down"),
            }
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async move {
            let _ = tokio::signal::ctrl_c().await;
        })
    }
}
