//! Shared test support: the real webhook payloads as observations, and a readable summary of
//! what the kernel accepted.

#![allow(dead_code)] // each test binary uses part of it

use std::path::PathBuf;

use loopx_capability_prfix::{PrFix, PrFixConfig, ci_evidence};
use loopx_kernel::facts::git;
use loopx_kernel::facts::github::{Reproduction, ReviewThreads, Thread, Triage};
use loopx_kernel::testkit::roster;
use loopx_kernel::testkit::scenario::{self, JudgedProposal, ScenarioStep};
use loopx_kernel::{Command, Observation, SourceId};
use serde_json::Value;

/// The head sha of pull request #2 in every fixture.
pub const HEAD: &str = "ec26c3e57ca3a959ca5aad62de7213c562f8c821";
/// A head no fixture has: tests move the pull request to it by editing a payload.
pub const NEW_HEAD: &str = "5c7a9b1e0f2d4c6a8e1b3d5f7a9c0e2b4d6f8a1c";
/// An older commit, for reviews of something other than the head.
pub const OLD_SHA: &str = "d6fde92930d4715a2b49857d24b940956b26d2d3";
/// The repository of every fixture.
pub const REPO: &str = "Codertocat/Hello-World";
/// The pull request's subject and observation key.
pub const PR: &str = "pr:Codertocat/Hello-World#2";

/// The capability under test.
pub fn capability(config: PrFixConfig) -> PrFix {
    PrFix::new(SourceId::new("prfix").expect("valid id"), config).expect("valid config")
}

/// The GitHub provider's name, the actor that records observations and CI evidence.
pub fn github() -> SourceId {
    SourceId::new("github").expect("valid id")
}

/// A real payload from the provider's fixtures, as JSON to read or edit.
pub fn payload(event: &str, file: &str) -> Value {
    let path: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "..",
        "loopx-provider",
        "tests",
        "fixtures",
        "github-webhooks",
        event,
        file,
    ]
    .iter()
    .collect();
    let text = std::fs::read_to_string(&path).expect("fixture exists");
    serde_json::from_str(&text).expect("fixture is JSON")
}

/// `payload` with the value at each JSON pointer replaced.
pub fn edited(mut payload: Value, edits: &[(&str, Value)]) -> Value {
    for (pointer, value) in edits {
        *payload
            .pointer_mut(pointer)
            .expect("the fixture has this field") = value.clone();
    }
    payload
}

/// The provider's observation of a webhook delivery of `event` with `payload`.
pub fn seen(event: &str, payload: &Value) -> Observation {
    let body = serde_json::to_vec(payload).expect("serializes");
    loopx_provider::github::webhook::parse_event(event, &body)
        .expect("the provider reads the payload")
        .observation(roster::start())
        .expect("the provider builds an observation")
}

/// A `pull_request` delivery from `file`, edited.
pub fn pull(file: &str, edits: &[(&str, Value)]) -> Observation {
    seen(
        "pull_request",
        &edited(payload("pull_request", file), edits),
    )
}

/// `pull_request/opened`: pull request #2 open at [`HEAD`].
pub fn opened() -> Observation {
    pull("opened.payload.json", &[])
}

/// The synchronize delivery, edited so the push moves the head to `sha`.
pub fn pushed(sha: &str) -> Observation {
    pull(
        "synchronize.payload.json",
        &[("/pull_request/head/sha", sha.into())],
    )
}

/// A `check_run` delivery from `file`, edited.
pub fn check(file: &str, edits: &[(&str, Value)]) -> Observation {
    seen("check_run", &edited(payload("check_run", file), edits))
}

/// `check_run/completed.1`: the linter failed at the head.
pub fn check_failed() -> Observation {
    check("completed.1.payload.json", &[])
}

/// `check_run/completed`: the linter succeeded at the head.
pub fn check_passed() -> Observation {
    check("completed.payload.json", &[])
}

/// The review delivery, edited to `state` on commit `sha`.
pub fn review(state: &str, sha: &str) -> Observation {
    seen(
        "pull_request_review",
        &edited(
            payload("pull_request_review", "submitted.payload.json"),
            &[
                ("/review/state", state.into()),
                ("/review/commit_id", sha.into()),
            ],
        ),
    )
}

/// Review threads read at `sha` (recorded by whoever reads them: an agent or a provider).
pub fn threads(sha: &str, unresolved: u64) -> Observation {
    let key = ReviewThreads::key(&Thread::new(REPO, 2));
    let threads = ReviewThreads {
        unresolved,
        complete: true,
    };
    scenario::observed(&key, &key, &git::revision(sha), &threads).expect("valid ids")
}

/// Feasibility facts for issue #1.
pub fn triage(facts: &Triage) -> Observation {
    let key = Triage::key(&Thread::new(REPO, 1));
    scenario::observed(&key, &key, "content:triage", facts).expect("valid ids")
}

/// Triage facts with nothing known yet.
pub fn untriaged() -> Triage {
    Triage {
        reproduction: None,
        failing_test: None,
        scope: None,
        validation: None,
    }
}

/// Triage facts with only `reproduction` known.
pub fn reproduced(reproduction: Reproduction) -> Triage {
    Triage {
        reproduction: Some(reproduction),
        failing_test: None,
        scope: None,
        validation: None,
    }
}

/// `issues/opened` (issue #1), edited.
pub fn issue(edits: &[(&str, Value)]) -> Observation {
    seen(
        "issues",
        &edited(payload("issues", "opened.payload.json"), edits),
    )
}

/// The GitHub provider records the CI evidence built from `ci` at the head of `pull`.
pub fn evidence(ci: &Observation, pull: &Observation) -> ScenarioStep {
    ScenarioStep::Evidence(ci_evidence(ci, pull).expect("CI concluded at the head"))
}

/// One accepted proposal as `command target`, the point of a case at a glance; a supersession
/// names its replacement too.
pub fn summary(proposal: &JudgedProposal) -> String {
    match &proposal.detail {
        Command::Supersede {
            todo, replacement, ..
        } => format!(
            "{} {todo} -> {}",
            proposal.command,
            replacement
                .as_ref()
                .map_or("none".to_owned(), |r| r.id.to_string())
        ),
        _ => proposal.label(),
    }
}
