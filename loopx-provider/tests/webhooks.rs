//! Webhook ingestion over GitHub's real example payloads.

use std::path::PathBuf;

use loopx_kernel::Timestamp;
use loopx_kernel::facts::github::subject_of;
use loopx_provider::github::webhook::{
    Delivery, MAX_BODY_BYTES, SUPPORTED_EVENTS, WebhookError, WebhookVerifier, parse_delivery,
    parse_event,
};
use loopx_provider::github::{CiVerdict, GitHubEvent, check_run_verdict};

/// GitHub's example payloads (octokit/webhooks, MIT).
fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/github-webhooks")
}

/// Deliveries written for these tests, for the events and actions the examples lack.
fn deliveries() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/github-deliveries")
}

fn now() -> Timestamp {
    Timestamp::parse("2026-11-29T10:00:00Z").expect("timestamp")
}

/// Every fixture of both folders as (event, file stem, body), sorted.
fn payloads() -> Vec<(String, String, Vec<u8>)> {
    let mut out = Vec::new();
    for event in SUPPORTED_EVENTS {
        let mut files: Vec<PathBuf> = [fixtures(), deliveries()]
            .iter()
            .map(|root| root.join(event))
            .filter(|dir| dir.is_dir())
            .flat_map(|dir| std::fs::read_dir(dir).expect("fixture folder"))
            .map(|e| e.expect("entry").path())
            .collect();
        assert!(!files.is_empty(), "no fixture of `{event}`");
        files.sort();
        for file in files {
            let name = file
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            let stem = name
                .trim_end_matches(".json")
                .trim_end_matches(".payload")
                .to_owned();
            out.push((event.to_owned(), stem, std::fs::read(&file).expect("read")));
        }
    }
    out
}

/// What a delivery without a fact was answered with, as its snapshot shows it.
fn shown(delivery: &Delivery<loopx_kernel::Observation>) -> serde_json::Value {
    match delivery {
        Delivery::Ping { hook_id } => serde_json::json!({ "ping": { "hook_id": hook_id } }),
        Delivery::Ignored { event, action } => {
            serde_json::json!({ "ignored": { "event": event, "action": action } })
        }
        other => panic!("an unexpected delivery: {other:?}"),
    }
}

#[test]
fn every_fixture_parses_into_an_observation_and_matches_its_snapshot() {
    let payloads = payloads();
    assert_eq!(payloads.len(), 41, "every fixture is read");
    let verifier = WebhookVerifier::new("It's a Secret to Everybody");
    let mut answered = Vec::new();
    for (event, stem, body) in payloads {
        let signature = verifier.sign(&body);
        let delivery = verifier
            .receive(&event, Some(&signature), &body, now())
            .unwrap_or_else(|e| panic!("{event}/{stem}: {e}"));
        if !matches!(delivery, Delivery::Fact(_)) {
            answered.push(format!("{event}/{stem}"));
        }
        match &delivery {
            Delivery::Fact(observation) => {
                // What a goal follows before it observed the stream is what it is about.
                assert_eq!(
                    subject_of(observation.key.as_str()),
                    observation.subject.as_str(),
                    "{event}/{stem}"
                );
                insta::assert_json_snapshot!(format!("{event}.{stem}"), observation);
            }
            other => insta::assert_json_snapshot!(format!("{event}.{stem}"), shown(other)),
        }
    }
    assert_eq!(answered, ["issues/pinned", "ping/payload"]);
}

/// GitHub sends `issues`/`pinned` with an issue that has no `state`: an action the provider
/// does not need is accepted and ignored, never malformed.
#[test]
fn an_issue_pinned_is_ignored_not_malformed() {
    let body = std::fs::read(deliveries().join("issues/pinned.payload.json")).expect("read");
    assert_eq!(
        parse_delivery("issues", &body),
        Ok(Delivery::Ignored {
            event: "issues".into(),
            action: "pinned".into()
        })
    );
    assert_eq!(
        parse_event("issues", &body),
        Err(WebhookError::NoFact {
            event: "issues".into(),
            action: "pinned".into()
        })
    );
    // Any action GitHub may add later is ignored the same way; a needed one is still read.
    let mut value: serde_json::Value = serde_json::from_slice(&body).expect("json");
    value["action"] = "typed".into();
    let typed = serde_json::to_vec(&value).expect("json");
    assert!(matches!(
        parse_delivery("issues", &typed),
        Ok(Delivery::Ignored { .. })
    ));
    value["action"] = "edited".into();
    let edited = serde_json::to_vec(&value).expect("json");
    let Ok(Delivery::Fact(GitHubEvent::Issue { issue, .. })) = parse_delivery("issues", &edited)
    else {
        panic!("an edited issue is a fact");
    };
    assert_eq!(
        issue.state, "unknown",
        "a missing state is said, not guessed"
    );
}

#[test]
fn a_ping_is_answered_and_records_nothing() {
    let body = std::fs::read(deliveries().join("ping/payload.json")).expect("read");
    let verifier = WebhookVerifier::new("k");
    assert_eq!(
        verifier.receive("ping", Some(&verifier.sign(&body)), &body, now()),
        Ok(Delivery::Ping {
            hook_id: Some(109_948_940)
        })
    );
    assert!(matches!(
        verifier.ingest("ping", Some(&verifier.sign(&body)), &body, now()),
        Err(WebhookError::NoFact { .. })
    ));
}

/// Every fixture, cut short, signed wrongly or unsigned: a typed error each, whatever the event.
#[test]
fn truncated_wrongly_signed_and_unsigned_deliveries_are_typed_errors() {
    let verifier = WebhookVerifier::new("It's a Secret to Everybody");
    for (event, stem, body) in payloads() {
        let truncated = &body[..body.len() / 2];
        assert!(
            matches!(
                verifier.receive(&event, Some(&verifier.sign(truncated)), truncated, now()),
                Err(WebhookError::Malformed { .. })
            ),
            "{event}/{stem} truncated"
        );
        let wrong = WebhookVerifier::new("another secret").sign(&body);
        assert_eq!(
            verifier.receive(&event, Some(&wrong), &body, now()),
            Err(WebhookError::BadSignature),
            "{event}/{stem} wrongly signed"
        );
        assert_eq!(
            verifier.receive(&event, None, &body, now()),
            Err(WebhookError::MissingSignature),
            "{event}/{stem} unsigned"
        );
        // No event header: nothing says what the body is.
        assert!(matches!(
            verifier.receive("", Some(&verifier.sign(&body)), &body, now()),
            Err(WebhookError::UnknownEvent { .. })
        ));
    }
}

#[test]
fn the_head_sha_binds_pull_request_and_check_observations() {
    let body = std::fs::read(fixtures().join("pull_request/opened.payload.json")).expect("read");
    let pull = parse_event("pull_request", &body).expect("parses");
    let GitHubEvent::PullRequest { pull: pr, .. } = &pull else {
        panic!("not a pull request: {pull:?}");
    };
    let observation = pull.observation(now()).expect("observation");
    assert_eq!(
        observation.revision.as_str(),
        format!("git:{}", pr.head.sha)
    );
    assert_eq!(observation.key.as_str(), "pr:Codertocat/Hello-World#2");

    let failing =
        std::fs::read(fixtures().join("check_run/completed.1.payload.json")).expect("read");
    let GitHubEvent::CheckRun { run, .. } = parse_event("check_run", &failing).expect("parses")
    else {
        panic!("not a check run");
    };
    assert_eq!(check_run_verdict(&run), CiVerdict::Failing);
}

#[test]
fn the_same_fact_fingerprints_alike_and_a_changed_one_does_not() {
    let body = std::fs::read(fixtures().join("pull_request/opened.payload.json")).expect("read");
    let a = parse_event("pull_request", &body).expect("parses");
    let later = Timestamp::parse("2026-11-30T10:00:00Z").expect("timestamp");
    let first = a.observation(now()).expect("observation");
    assert_eq!(
        first.fingerprint,
        a.observation(later).expect("observation").fingerprint
    );

    let mut value: serde_json::Value = serde_json::from_slice(&body).expect("json");
    value["pull_request"]["head"]["sha"] = "0123456789abcdef0123456789abcdef01234567".into();
    let moved = parse_event("pull_request", &serde_json::to_vec(&value).expect("json"))
        .expect("parses")
        .observation(now())
        .expect("observation");
    assert_ne!(first.fingerprint, moved.fingerprint);
    assert_eq!(
        moved.revision.as_str(),
        "git:0123456789abcdef0123456789abcdef01234567"
    );
    // Volatile fields are not facts: a new `updated_at` changes nothing.
    value["pull_request"]["head"]["sha"] = first.facts["head_sha"].clone().into();
    value["pull_request"]["updated_at"] = "2030-01-01T00:00:00Z".into();
    let touched = parse_event("pull_request", &serde_json::to_vec(&value).expect("json"))
        .expect("parses")
        .observation(now())
        .expect("observation");
    assert_eq!(first.fingerprint, touched.fingerprint);
}

#[test]
fn a_correct_signature_is_accepted_and_tampering_is_refused() {
    let verifier = WebhookVerifier::new("It's a Secret to Everybody");
    // GitHub's documented example: this body and secret give this signature.
    let body = b"Hello, World!";
    let documented = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
    assert_eq!(verifier.sign(body), documented);
    assert_eq!(verifier.verify(Some(documented), body), Ok(()));

    assert_eq!(
        verifier.verify(Some(documented), b"Hello, World?"),
        Err(WebhookError::BadSignature)
    );
    let other = WebhookVerifier::new("another secret");
    assert_eq!(
        other.verify(Some(documented), body),
        Err(WebhookError::BadSignature)
    );
    assert_eq!(
        verifier.verify(None, body),
        Err(WebhookError::MissingSignature)
    );
    for malformed in [
        "757107ea",
        "sha1=757107ea0eb2509fc211221cce984b8a37570b6d",
        "sha256=zz",
        "sha256=757107ea",
    ] {
        assert_eq!(
            verifier.verify(Some(malformed), body),
            Err(WebhookError::MalformedSignature),
            "{malformed}"
        );
    }

    let payload = std::fs::read(fixtures().join("push/payload.json")).expect("read");
    let signature = verifier.sign(&payload);
    let mut tampered = payload.clone();
    let at = tampered.iter().position(|b| *b == b'f').expect("an f");
    tampered[at] = b'e';
    assert!(
        verifier
            .ingest("push", Some(&signature), &payload, now())
            .is_ok()
    );
    assert_eq!(
        verifier.ingest("push", Some(&signature), &tampered, now()),
        Err(WebhookError::BadSignature)
    );
}

#[test]
fn the_secret_never_appears_in_debug_or_errors() {
    let secret = "s3cr3t-value-never-shown";
    let verifier = WebhookVerifier::new(secret);
    assert!(!format!("{verifier:?}").contains(secret));
    let errors = [
        verifier.verify(Some("sha256=00"), b"x"),
        verifier.verify(Some(&format!("sha256={}", "0".repeat(64))), b"x"),
        verifier
            .ingest("nope", Some(&verifier.sign(b"{}")), b"{}", now())
            .map(|_| ()),
    ];
    for error in errors {
        let error = error.expect_err("refused");
        assert!(!error.to_string().contains(secret));
        assert!(!format!("{error:?}").contains(secret));
    }
}

#[test]
fn unknown_events_and_malformed_bodies_are_typed_errors() {
    assert_eq!(
        parse_event("deployment", b"{}"),
        Err(WebhookError::UnknownEvent {
            event: "deployment".into()
        })
    );
    let body = std::fs::read(fixtures().join("pull_request/opened.payload.json")).expect("read");
    let truncated = &body[..body.len() / 2];
    assert!(matches!(
        parse_event("pull_request", truncated),
        Err(WebhookError::Malformed { .. })
    ));
    // A payload of another event is missing the fields this one needs.
    let push = std::fs::read(fixtures().join("push/payload.json")).expect("read");
    assert!(matches!(
        parse_event("pull_request", &push),
        Err(WebhookError::Malformed { .. })
    ));
    // Wrong types.
    let mut value: serde_json::Value = serde_json::from_slice(&body).expect("json");
    value["pull_request"]["number"] = "two".into();
    assert!(matches!(
        parse_event("pull_request", &serde_json::to_vec(&value).expect("json")),
        Err(WebhookError::Malformed { .. })
    ));
    // Missing fields.
    let mut value: serde_json::Value = serde_json::from_slice(&body).expect("json");
    value["pull_request"]
        .as_object_mut()
        .expect("object")
        .remove("head");
    assert!(matches!(
        parse_event("pull_request", &serde_json::to_vec(&value).expect("json")),
        Err(WebhookError::Malformed { .. })
    ));
    for garbage in [
        &b""[..],
        b"null",
        b"[]",
        b"\xff\xfe",
        b"{\"repository\": 5}",
    ] {
        for event in SUPPORTED_EVENTS {
            assert!(
                matches!(
                    parse_event(event, garbage),
                    Err(WebhookError::Malformed { .. })
                ),
                "{event} accepted {garbage:?}"
            );
        }
    }
}

#[test]
fn huge_bodies_are_refused_before_parsing_or_hashing() {
    let huge = vec![b' '; MAX_BODY_BYTES + 1];
    let verifier = WebhookVerifier::new("k");
    let expected = WebhookError::TooLarge {
        size: MAX_BODY_BYTES + 1,
        limit: MAX_BODY_BYTES,
    };
    assert_eq!(parse_event("push", &huge), Err(expected.clone()));
    assert_eq!(
        verifier.verify(Some(&verifier.sign(b"")), &huge),
        Err(expected)
    );
}

#[test]
fn ids_from_odd_external_text_stay_valid() {
    let body = std::fs::read(fixtures().join("check_run/completed.payload.json")).expect("read");
    let mut value: serde_json::Value = serde_json::from_slice(&body).expect("json");
    value["check_run"]["name"] = "build (ubuntu, 1.89) ✓ [matrix]".repeat(10).into();
    let observation = parse_event("check_run", &serde_json::to_vec(&value).expect("json"))
        .expect("parses")
        .observation(now())
        .expect("a valid observation");
    assert!(observation.key.as_str().len() <= loopx_kernel::MAX_ID_LEN);
    assert!(observation.facts["name"].starts_with("build (ubuntu"));
}
