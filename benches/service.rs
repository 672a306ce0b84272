//! The service's figures, through `POST /github/webhook` over loopback HTTP, printed as a table:
//!
//! - deliveries per second into SQLite (`synchronous=FULL`) and PostgreSQL (`fsync` on): each a
//!   signed `check_run` of its own name, so each is verified, routed to the goal that follows
//!   its pull request, committed and answered;
//! - wake latency: from the moment a delivery is sent to the moment a waiter on the goal (its
//!   own store handle, as a waiting engine in another process has) sees the commit
//!   (`Store::changed`), p50 and p99.
//!
//! Run with `cargo bench -p loopx-benches --bench service`. PostgreSQL runs as a throwaway
//! cluster (`loopx_store::test_cluster`) from the `initdb` and `pg_ctl` on `PATH` or in
//! `LOOPX_PG_BIN`; without them the benchmark says so and exits with a failure.

use std::sync::Arc;
use std::time::{Duration as StdDuration, Instant};

use loopx_benches::percentile;

use loopx_kernel::seams::{Clock, Store};
use loopx_kernel::{Criterion, Duration, GoalId, GoalSpec, Limits, StoreExt};
use loopx_provider::clock::SystemClock;
use loopx_provider::github::webhook::WebhookVerifier;
use loopx_server::Service;
use loopx_server::github::Deliveries;
use loopx_store::test_cluster::Cluster;
use loopx_store::{PostgresStore, SqliteStore};
use serde_json::Value;

type Failure = Box<dyn std::error::Error>;

const SECRET: &str = "bench secret";
/// Deliveries timed for the throughput figure, after `WARM` untimed ones.
const DELIVERIES: usize = 300;
const WARM: usize = 30;
/// Deliveries whose wake latency is measured.
const WAKES: usize = 60;
const GOAL: &str = "bench";

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Failure> {
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    let cluster = match Cluster::start_durable() {
        Ok(cluster) => cluster,
        Err(error) => {
            eprintln!("the service benchmark cannot start its PostgreSQL cluster: {error}");
            std::process::exit(1);
        }
    };
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("loopx.db");
    let sqlite: Arc<dyn Store> = Arc::new(SqliteStore::create(&path)?);
    let sqlite_waiter: Arc<dyn Store> = Arc::new(SqliteStore::open(&path)?);
    let url = cluster.create_database("service")?;
    let postgres: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url).await?);
    let postgres_waiter: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url).await?);

    println!("| store | deliveries/s | median delivery | wake p50 | wake p99 |");
    println!("| --- | --- | --- | --- | --- |");
    for (name, store, waiter) in [
        ("SQLite (FULL)", sqlite, sqlite_waiter),
        ("PostgreSQL (loopback)", postgres, postgres_waiter),
    ] {
        let figures = measure(store, waiter).await?;
        println!(
            "| {name} | {:.0} | {:.2} ms | {:.2} ms | {:.2} ms |",
            figures.per_second,
            ms(figures.median),
            ms(figures.wake_p50),
            ms(figures.wake_p99)
        );
    }
    Ok(())
}

struct Figures {
    per_second: f64,
    median: StdDuration,
    wake_p50: StdDuration,
    wake_p99: StdDuration,
}

async fn measure(store: Arc<dyn Store>, waiter: Arc<dyn Store>) -> Result<Figures, Failure> {
    let spec = GoalSpec::builder(GOAL, "CI of acme/cli#42 is green", "olivia")
        .agent("agent-a")
        .budget(Limits::turns(10))
        .declared_identity()
        .criterion(Criterion::new(
            "green",
            "CI is green",
            "ci.green",
            "pr:acme/cli#42",
        )?)
        .build()?;
    store
        .goal(&spec.id)
        .create(&spec, SystemClock.now())
        .await?;
    let base = serve(store.clone()).await?;
    let client = reqwest::Client::new();
    let mut next = 0usize;
    for _ in 0..WARM {
        deliver(&client, &base, next).await?;
        next += 1;
    }

    let mut latencies = Vec::with_capacity(DELIVERIES);
    let start = Instant::now();
    for _ in 0..DELIVERIES {
        let sent = Instant::now();
        deliver(&client, &base, next).await?;
        latencies.push(sent.elapsed());
        next += 1;
    }
    #[allow(clippy::cast_precision_loss, reason = "a few hundred deliveries")]
    let per_second = DELIVERIES as f64 / start.elapsed().as_secs_f64();

    let goal: GoalId = GOAL.parse()?;
    let mut wakes = Vec::with_capacity(WAKES);
    for _ in 0..WAKES {
        let revision = waiter.load(&goal).await?.map_or(0, |s| s.revision);
        let watching = waiter.clone();
        let watch = goal.clone();
        let woken = tokio::spawn(async move {
            let moved = watching
                .changed(&[(watch, revision)], Duration::seconds(10))
                .await;
            (moved, Instant::now())
        });
        // The waiter is asleep before the delivery is sent.
        tokio::time::sleep(StdDuration::from_millis(30)).await;
        let sent = Instant::now();
        deliver(&client, &base, next).await?;
        next += 1;
        let (moved, at) = woken.await?;
        if moved?.is_empty() {
            return Err("the waiter was not woken within 10 s".into());
        }
        wakes.push(at.saturating_duration_since(sent));
    }
    latencies.sort_unstable();
    wakes.sort_unstable();
    Ok(Figures {
        per_second,
        median: percentile(&latencies, 50),
        wake_p50: percentile(&wakes, 50),
        wake_p99: percentile(&wakes, 99),
    })
}

/// The service with the webhook route on a loopback port; its base URL.
async fn serve(store: Arc<dyn Store>) -> Result<String, Failure> {
    let deliveries = Deliveries::new(
        store.clone(),
        Arc::new(SystemClock),
        WebhookVerifier::new(SECRET),
    );
    let router = Service::new(store, Arc::new(SystemClock))
        .mount(deliveries.router())
        .router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(base)
}

/// Delivery `n`: a completed check run named `check-n` on acme/cli#42, signed.
async fn deliver(client: &reqwest::Client, base: &str, n: usize) -> Result<(), Failure> {
    let body: Value = serde_json::json!({
        "action": "completed",
        "repository": {"full_name": "acme/cli"},
        "check_run": {
            "id": n, "name": format!("check-{n}"), "head_sha": "0123456789abcdef0123456789abcdef01234567",
            "status": "completed", "conclusion": "success",
            "started_at": "2026-11-29T09:31:00Z", "completed_at": "2026-11-29T09:40:00Z",
            "app": {"slug": "ci"}, "pull_requests": [{"number": 42}],
        },
    });
    let body = serde_json::to_vec(&body)?;
    let response = client
        .post(format!("{base}/github/webhook"))
        .header("X-GitHub-Event", "check_run")
        .header("X-GitHub-Delivery", format!("bench-{n}"))
        .header(
            "X-Hub-Signature-256",
            WebhookVerifier::new(SECRET).sign(&body),
        )
        .body(body)
        .send()
        .await?;
    if !response.status().is_success() {
        return Err(format!("delivery {n} answered {}", response.status()).into());
    }
    Ok(())
}

fn ms(span: StdDuration) -> f64 {
    span.as_secs_f64() * 1000.0
}
