//! What one client may hold of the service: connections, time and memory.
//!
//! The service faces clients it does not know (GitHub's deliveries, browsers, anyone who can
//! reach its port), so everything a client can make it hold is bounded:
//!
//! - **connections**: at most [`Bounds::max_connections`] at once; past it the service stops
//!   accepting until one closes (the rest wait in the listener's backlog);
//! - **headers**: a request's headers must arrive within [`Bounds::header_timeout`], counted from
//!   when the connection starts waiting for them — so a connection that opens and sends
//!   nothing, one that trickles its headers, and a kept-alive one that sends no next request
//!   are all closed then (hyper's `header_read_timeout`);
//! - **bodies**: a request's whole body must arrive within [`Bounds::body_timeout`]
//!   (tower-http's `RequestBodyDeadlineLayer`), and the bodies being read at once may hold at
//!   most [`Bounds::body_budget`] bytes, reserved by their declared `Content-Length` (a chunked
//!   body reserves [`Bounds::max_body`]) before a byte is read; a body that does not fit waits
//!   up to the body timeout for room and is then refused (`503`), and one declared over
//!   [`Bounds::max_body`] is refused at once (`413`);
//! - **stalls**: a connection on which no byte moves either way for [`Bounds::idle_timeout`]
//!   is closed (a client that stops reading its answer, a handler that never answers).
//!
//! The connection-level bounds live in [`serve_with`], the accept loop; the request-level ones
//! in [`Service::bounds`](crate::Service::bounds), so a host that merges the service's router
//! into its own server keeps them. The accept loop is hyper's own connection builder under a
//! semaphore, because `axum::serve` exposes neither the header timeout nor a connection cap; the
//! idle watch is a small I/O wrapper, because neither hyper nor tower has one.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower_http::timeout::RequestBodyDeadlineLayer;

/// The largest body any of the service's routes takes: GitHub's cap on a delivery.
pub const MAX_BODY: usize = loopx_provider::github::webhook::MAX_BODY_BYTES;

/// The body budget is counted in these units, so that a semaphore's `u32` permits span
/// terabytes.
const BUDGET_UNIT: usize = 1024;

/// How much of the service one client can hold: see the [module](self).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bounds {
    /// Connections open at once.
    pub max_connections: usize,
    /// How long a request's headers may take to arrive, from when the connection waits for them.
    pub header_timeout: Duration,
    /// How long a request's whole body may take to arrive.
    pub body_timeout: Duration,
    /// How long a connection may go without a byte moving either way.
    pub idle_timeout: Duration,
    /// Bytes of request bodies being read at once.
    pub body_budget: usize,
    /// The largest body a request may declare; a chunked body reserves this much.
    pub max_body: usize,
}

impl Default for Bounds {
    /// 512 connections; headers within 10 s, a body within 30 s, no stall over 60 s; 64 MiB of
    /// bodies in flight, none over GitHub's 25 MiB.
    fn default() -> Bounds {
        Bounds {
            max_connections: 512,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            body_budget: 64 * 1024 * 1024,
            max_body: MAX_BODY,
        }
    }
}

/// Why a [`Bounds`] cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BoundsError {
    /// A bound that must be positive is zero.
    #[error("{0} must be more than zero")]
    Zero(&'static str),
    /// The body budget cannot hold even one largest body, which would then wait forever.
    #[error("the body budget ({budget} bytes) is smaller than the largest body ({max_body} bytes)")]
    BudgetTooSmall {
        /// The budget.
        budget: usize,
        /// The largest body.
        max_body: usize,
    },
}

impl Bounds {
    /// Checks that every bound can be served.
    ///
    /// # Errors
    /// [`BoundsError`] naming the bound that cannot.
    pub fn check(&self) -> Result<(), BoundsError> {
        let zero = [
            ("max_connections", self.max_connections == 0),
            ("header_timeout", self.header_timeout.is_zero()),
            ("body_timeout", self.body_timeout.is_zero()),
            ("idle_timeout", self.idle_timeout.is_zero()),
            ("max_body", self.max_body == 0),
        ];
        if let Some((name, _)) = zero.into_iter().find(|(_, zero)| *zero) {
            return Err(BoundsError::Zero(name));
        }
        if self.body_budget < self.max_body {
            return Err(BoundsError::BudgetTooSmall {
                budget: self.body_budget,
                max_body: self.max_body,
            });
        }
        Ok(())
    }

    /// `router` under the request-level bounds: the body deadline and the body budget.
    pub(crate) fn around(&self, router: Router) -> Router {
        let budget = Budget {
            permits: Arc::new(Semaphore::new(units(self.body_budget))),
            max_body: self.max_body,
            wait: self.body_timeout,
        };
        router
            .layer(RequestBodyDeadlineLayer::new(self.body_timeout))
            .layer(middleware::from_fn_with_state(budget, budgeted))
    }
}

/// Bytes in budget units, rounded up and saturating at what a semaphore can count.
fn units(bytes: usize) -> usize {
    bytes.div_ceil(BUDGET_UNIT).min(Semaphore::MAX_PERMITS)
}

/// The memory request bodies may hold at once.
#[derive(Clone)]
struct Budget {
    permits: Arc<Semaphore>,
    max_body: usize,
    wait: Duration,
}

/// What a request's body may hold once read: its declared length, [`Budget::max_body`] when
/// chunked, nothing when it has no body.
fn declared_body(headers: &HeaderMap, max_body: usize) -> Option<Result<usize, ()>> {
    if let Some(length) = headers.get(header::CONTENT_LENGTH) {
        let length = length.to_str().ok().and_then(|l| l.parse::<usize>().ok());
        return Some(length.ok_or(()));
    }
    headers
        .contains_key(header::TRANSFER_ENCODING)
        .then_some(Ok(max_body))
}

/// Reserves room for the request's body before anything reads it; refuses a body declared over
/// the cap, and one that found no room within the body timeout.
async fn budgeted(State(budget): State<Budget>, request: Request, next: Next) -> Response {
    let bytes = match declared_body(request.headers(), budget.max_body) {
        None | Some(Ok(0)) => return next.run(request).await,
        Some(Ok(bytes)) if bytes <= budget.max_body => bytes,
        Some(Ok(_)) => return too_large(budget.max_body),
        Some(Err(())) => {
            return refusal(
                StatusCode::BAD_REQUEST,
                "bad_content_length",
                "the Content-Length header is not a length",
            );
        }
    };
    let Some(_room) = reserve(&budget, bytes).await else {
        return busy();
    };
    next.run(request).await
}

/// Room for `bytes` in the budget, waiting at most the body timeout for it.
async fn reserve(budget: &Budget, bytes: usize) -> Option<OwnedSemaphorePermit> {
    let units = u32::try_from(units(bytes)).ok()?;
    let acquire = Arc::clone(&budget.permits).acquire_many_owned(units);
    tokio::time::timeout(budget.wait, acquire).await.ok()?.ok()
}

/// `413` for a body declared over `max_body`, before it is read.
pub(crate) fn too_large(max_body: usize) -> Response {
    refusal(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
        &format!("the request body is larger than {max_body} bytes; nothing was read"),
    )
}

fn busy() -> Response {
    let mut response = refusal(
        StatusCode::SERVICE_UNAVAILABLE,
        "busy",
        "the service is reading as many request bodies as it holds at once; retry shortly",
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, header::HeaderValue::from_static("5"));
    response
}

/// A refusal in the service's typed shape, `{code, message}`.
pub(crate) fn refusal(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        axum::Json(json!({"code": code, "message": message})),
    )
        .into_response()
}

/// Serves `router` on `listener` under `bounds` until `shutdown` completes, then stops
/// accepting and lets the connections open finish their requests, for at most the idle
/// timeout.
///
/// # Errors
/// The bound that cannot be served, as an `InvalidInput` I/O error.
pub async fn serve_with(
    listener: TcpListener,
    router: Router,
    bounds: &Bounds,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    bounds
        .check()
        .map_err(|error| io::Error::new(io::ErrorKind::InvalidInput, error))?;
    let open = Arc::new(Semaphore::new(bounds.max_connections));
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(bounds.header_timeout);
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = accept(&listener, &open) => accepted,
        };
        let (stream, permit) = accepted;
        let activity = Activity::new();
        let io = TokioIo::new(Watched {
            inner: stream,
            activity: Arc::clone(&activity),
        });
        let connection =
            graceful.watch(http.serve_connection(io, TowerToHyperService::new(router.clone())));
        let idle = bounds.idle_timeout;
        tokio::spawn(async move {
            tokio::select! {
                _ = connection => {}
                () = activity.stalled(idle) => tracing::debug!("connection idle: closed"),
            }
            drop(permit);
        });
    }
    drop(listener);
    // An event stream never finishes on its own: the drain is bounded too.
    if tokio::time::timeout(bounds.idle_timeout, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::info!("connections still open after the drain were closed");
    }
    Ok(())
}

/// The next connection, once one of the `open` slots is free.
async fn accept(
    listener: &TcpListener,
    open: &Arc<Semaphore>,
) -> (TcpStream, OwnedSemaphorePermit) {
    loop {
        let Ok(permit) = Arc::clone(open).acquire_owned().await else {
            unreachable!("the connection semaphore is never closed");
        };
        match listener.accept().await {
            Ok((stream, _)) => return (stream, permit),
            // Out of file descriptors or memory: back off instead of spinning; a connection
            // that failed before it was accepted is simply gone.
            Err(error) => {
                tracing::warn!(error = %error, "accept failed");
                drop(permit);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// When a byte last moved on a connection, in milliseconds since it opened.
struct Activity {
    opened: Instant,
    last: AtomicU64,
}

impl Activity {
    fn new() -> Arc<Activity> {
        Arc::new(Activity {
            opened: Instant::now(),
            last: AtomicU64::new(0),
        })
    }

    fn touch(&self) {
        let now = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(now, Ordering::Relaxed);
    }

    /// Completes once no byte moved for `idle`.
    async fn stalled(&self, idle: Duration) {
        loop {
            let last = Duration::from_millis(self.last.load(Ordering::Relaxed));
            let deadline = self.opened + last + idle;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline.into()).await;
        }
    }
}

/// A stream that notes when a byte last moved through it.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl Watched {
    fn moved<T>(&self, polled: Poll<io::Result<T>>, moved: bool) -> Poll<io::Result<T>> {
        if moved {
            self.activity.touch();
        }
        polled
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let moved = buf.filled().len() > before;
        self.moved(polled, moved)
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        let moved = matches!(polled, Poll::Ready(Ok(n)) if n > 0);
        self.moved(polled, moved)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        let moved = matches!(polled, Poll::Ready(Ok(n)) if n > 0);
        self.moved(polled, moved)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
