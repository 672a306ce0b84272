//! The service's house over real HTTP on loopback and a real SQLite store: health, metrics by
//! route, a mounted router, and graceful shutdown that lets a request in flight finish.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use loopx_kernel::prelude::*;
use loopx_provider::clock::SystemClock;
use loopx_server::{Service, serve};
use loopx_store::SqliteStore;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// One `GET` over a fresh connection: the status and the body.
async fn get_path(addr: std::net::SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(addr).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await?;
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

struct Running {
    addr: std::net::SocketAddr,
    stop: oneshot::Sender<()>,
    served: tokio::task::JoinHandle<std::io::Result<()>>,
    _dir: tempfile::TempDir,
}

/// The service over a new SQLite store holding one goal, with `mounted` beside the house.
async fn start(mounted: Router) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::create(dir.path().join("loopx.db")).unwrap();
    let spec = GoalSpec::builder("g1", "serve a goal", "olivia")
        .declared_identity()
        .build()
        .unwrap();
    store
        .goal(&spec.id.clone())
        .create(&spec, SystemClock.now())
        .await
        .unwrap();
    let router = Service::new(Arc::new(store), Arc::new(SystemClock))
        .mount(mounted)
        .router();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let served = tokio::spawn(serve(listener, router, async move {
        let _ = stopped.await;
    }));
    Running {
        addr,
        stop,
        served,
        _dir: dir,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_metrics_answer_and_count_each_route() {
    let running = start(Router::new()).await;
    let (status, body) = get_path(running.addr, "/healthz").await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""status":"ok""#), "{body}");
    let (status, _) = get_path(running.addr, "/no/such/route").await.unwrap();
    assert_eq!(status, 404);

    let (status, metrics) = get_path(running.addr, "/metrics").await.unwrap();
    assert_eq!(status, 200, "{metrics}");
    assert!(
        metrics
            .contains(r#"loopx_http_requests_total{route="/healthz",method="GET",status="200"} 1"#),
        "{metrics}"
    );
    // A path that matched no route is counted under one label, never under its raw text.
    assert!(
        metrics.contains(
            r#"loopx_http_requests_total{route="unmatched",method="GET",status="404"} 1"#
        ),
        "{metrics}"
    );
    assert!(!metrics.contains("/no/such/route"), "{metrics}");
    assert!(
        metrics.contains(r#"loopx_goals{status="active"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains("loopx_http_request_duration_seconds_bucket"),
        "{metrics}"
    );
    running.stop.send(()).unwrap();
    running.served.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_the_request_in_flight_finish_and_then_accepts_no_more() {
    let slow = Router::new().route(
        "/slow",
        get(|| async {
            tokio::time::sleep(Duration::from_millis(400)).await;
            "done"
        }),
    );
    let running = start(slow).await;
    let addr = running.addr;
    let in_flight = tokio::spawn(async move { get_path(addr, "/slow").await });
    // The request is being handled when the shutdown begins.
    tokio::time::sleep(Duration::from_millis(100)).await;
    running.stop.send(()).unwrap();
    let (status, body) = in_flight.await.unwrap().unwrap();
    assert_eq!((status, body.as_str()), (200, "done"));
    running.served.await.unwrap().unwrap();
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "the listener is closed after shutdown"
    );
}
