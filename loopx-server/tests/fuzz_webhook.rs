//! The webhook route's checks as a property over arbitrary deliveries: whatever the headers
//! and body, `Deliveries::receive` (what `POST /github/webhook` runs after the size checks)
//! answers a typed outcome or refusal and never panics; a delivery without GitHub's valid
//! signature is refused with 400 or 401 before anything is parsed, and writes nothing.
//!
//! 256 cases by default; run longer with `PROPTEST_CASES=20000 cargo test -p loopx-server
//! --release --test fuzz_webhook`.

use std::sync::Arc;

use loopx_kernel::prelude::*;
use loopx_provider::clock::SystemClock;
use loopx_provider::github::webhook::WebhookVerifier;
use loopx_server::github::Deliveries;
use loopx_store::MemoryStore;
use proptest::prelude::*;

const SECRET: &str = "it's a secret to everybody";

fn config(default_cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

fn event() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "ping",
            "push",
            "pull_request",
            "pull_request_review",
            "issue_comment",
            "check_run",
            "check_suite",
            "status",
            "deployment",
        ])
        .prop_map(str::to_owned),
        any::<String>(),
    ]
}

fn delivery() -> impl Strategy<Value = String> {
    prop_oneof!["[a-f0-9-]{1,40}", "[a-zA-Z0-9./-]{0,80}", any::<String>()]
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..512),
        "\\{\"action\": \"(created|opened|submitted|completed)\"[ -~]{0,200}\\}"
            .prop_map(String::into_bytes),
    ]
}

/// A delivery's answer on a fresh memory store, and whether the store was written.
fn receive(
    runtime: &tokio::runtime::Runtime,
    event: &str,
    delivery: &str,
    signature: Option<&str>,
    body: &[u8],
) -> (Result<u16, u16>, bool) {
    runtime.block_on(async {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let deliveries = Deliveries::new(
            store.clone(),
            Arc::new(SystemClock),
            WebhookVerifier::new(SECRET),
        );
        let answer = deliveries
            .receive(event, delivery, signature, body)
            .await
            .map(|_| 200)
            .map_err(|error| error.status().as_u16());
        let now = SystemClock.now();
        let written = !store.goals(now).await.expect("listed").is_empty()
            || store.dead_letters(1).await.expect("listed").total > 0;
        (answer, written)
    })
}

proptest! {
    #![proptest_config(config(256))]

    /// Unsigned, or signed with another secret: refused, typed, before parsing; nothing written.
    #[test]
    fn a_delivery_without_githubs_signature_is_refused_and_writes_nothing(
        event in event(),
        delivery in delivery(),
        body in body(),
        forged in any::<bool>(),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
        let signature = forged.then(|| WebhookVerifier::new("another secret").sign(&body));
        let (answer, written) = receive(&runtime, &event, &delivery, signature.as_deref(), &body);
        prop_assert!(matches!(answer, Err(400 | 401)), "{answer:?}");
        prop_assert!(!written);
    }

    /// Signed by GitHub's secret, any headers and body: a typed answer, never a panic or a
    /// server error.
    #[test]
    fn a_signed_delivery_is_answered_with_a_typed_outcome(
        event in event(),
        delivery in delivery(),
        body in body(),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
        let signature = WebhookVerifier::new(SECRET).sign(&body);
        let (answer, _) = receive(&runtime, &event, &delivery, Some(&signature), &body);
        prop_assert!(matches!(answer, Ok(200) | Err(400 | 401)), "{answer:?}");
    }
}
