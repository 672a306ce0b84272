//! One outcome vocabulary: evidence outcomes are written `passed` and `failed`, the words a
//! turn's verdict uses, and the earlier spellings `pass` and `fail` are still read, so stored
//! histories and files written before keep their meaning.

use loopx_kernel::{NewEvidence, Outcome, VerdictOutcome};

#[test]
fn evidence_outcomes_use_the_verdicts_words() {
    assert_eq!(
        serde_json::to_value(Outcome::Pass).ok(),
        Some("passed".into())
    );
    assert_eq!(
        serde_json::to_value(Outcome::Fail).ok(),
        Some("failed".into())
    );
    assert_eq!(
        serde_json::to_value(VerdictOutcome::Passed).ok(),
        Some("passed".into())
    );
    assert_eq!(
        serde_json::to_value(VerdictOutcome::Failed).ok(),
        Some("failed".into())
    );
}

#[test]
fn the_earlier_spellings_are_still_read() {
    for (text, outcome) in [
        ("\"pass\"", Outcome::Pass),
        ("\"passed\"", Outcome::Pass),
        ("\"fail\"", Outcome::Fail),
        ("\"failed\"", Outcome::Fail),
    ] {
        let read: Outcome = serde_json::from_str(text).expect("a known spelling");
        assert_eq!(read, outcome, "{text}");
    }
    assert!(serde_json::from_str::<Outcome>("\"progress\"").is_err());
    let old: NewEvidence = serde_json::from_value(serde_json::json!({
        "id": "e", "check": "tests", "subject": "repo:acme/cli", "revision": "git:abc",
        "outcome": "pass", "summary": "", "observed_at": "2026-11-29T10:00:00Z",
        "ttl": null, "inputs": {}
    }))
    .expect("evidence written with the earlier spelling");
    assert_eq!(old.outcome, Outcome::Pass);
}
