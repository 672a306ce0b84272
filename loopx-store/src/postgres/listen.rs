//! `LISTEN`/`NOTIFY`: every commit that moves a goal sends a notification on [`CHANNEL`] from
//! inside its transaction (PostgreSQL delivers it only if, and when, the transaction commits);
//! each store handle keeps one dedicated connection listening on it, shared by all its waiters.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use loopx_kernel::GoalId;
use loopx_kernel::seams::StoreError;
use tokio::sync::broadcast;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::{AsyncMessage, Socket};

use super::schema::pg;

/// The notification channel. Its payload is `<revision> <goal>`.
pub(super) const CHANNEL: &str = "loopx_goal_changed";

/// How many notifications a slow waiter may fall behind before it re-reads the revisions.
const BACKLOG: usize = 1024;

/// What the listening connection reports to waiters.
#[derive(Debug, Clone)]
pub(super) enum Signal {
    /// A commit moved `goal` to `revision`.
    Changed(GoalId, u64),
    /// The listening connection was lost: notifications may have been missed.
    Lost,
}

/// The listening connection of one store handle.
pub(super) struct Listener {
    /// Subscribe here, then re-read the revisions, then wait.
    pub signals: broadcast::Sender<Signal>,
    /// False once the connection is gone (set before [`Signal::Lost`] is sent).
    pub alive: Arc<AtomicBool>,
    /// Keeps the connection open.
    _client: tokio_postgres::Client,
}

impl Listener {
    pub(super) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }
}

type Connecting = Pin<Box<dyn Future<Output = Result<Listener, StoreError>> + Send>>;

/// Opens a new listening connection.
pub(super) type Connector = Arc<dyn Fn() -> Connecting + Send + Sync>;

/// A connector for `config` over `tls`; `target` names the server in messages.
pub(super) fn connector<T>(config: tokio_postgres::Config, tls: T, target: String) -> Connector
where
    T: MakeTlsConnect<Socket> + Clone + Sync + Send + 'static,
    T::Stream: Sync + Send,
    T::TlsConnect: Sync + Send,
    <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    Arc::new(move || {
        let config = config.clone();
        let tls = tls.clone();
        let target = target.clone();
        Box::pin(async move { listen(config, tls, target).await })
    })
}

async fn listen<T>(
    config: tokio_postgres::Config,
    tls: T,
    target: String,
) -> Result<Listener, StoreError>
where
    T: MakeTlsConnect<Socket> + Send + 'static,
    T::Stream: Sync + Send,
    T::TlsConnect: Sync + Send,
    <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    let (client, mut connection) =
        config
            .connect(tls)
            .await
            .map_err(|error| StoreError::Unavailable {
                detail: format!(
                    "cannot open the notification connection to PostgreSQL ({target}): {error}"
                ),
            })?;
    let (signals, _) = broadcast::channel(BACKLOG);
    let alive = Arc::new(AtomicBool::new(true));
    let sender = signals.clone();
    let flag = Arc::clone(&alive);
    tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(note))) => {
                    if let Some(signal) = parse(note.payload()) {
                        // No receiver is not an error: nobody waits right now.
                        let _ = sender.send(signal);
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => break,
            }
        }
        flag.store(false, Ordering::SeqCst);
        let _ = sender.send(Signal::Lost);
    });
    // The channel name is a constant of this module, never input.
    client
        .batch_execute(&format!("LISTEN {CHANNEL}"))
        .await
        .map_err(|error| pg(&target, &error))?;
    Ok(Listener {
        signals,
        alive,
        _client: client,
    })
}

/// The payload a commit sends.
pub(super) fn payload(goal: &GoalId, revision: u64) -> String {
    format!("{revision} {goal}")
}

fn parse(payload: &str) -> Option<Signal> {
    let (revision, goal) = payload.split_once(' ')?;
    Some(Signal::Changed(
        GoalId::new(goal).ok()?,
        revision.parse().ok()?,
    ))
}
