//! CI evidence bound to a pull request's exact head.
//!
//! The capability may not record evidence (the kernel refuses it): the GitHub provider actor
//! records what [`ci_evidence`] builds, right after recording the two observations it cites.
//! A new push moves the pull request subject's revision (the provider's pull-request
//! observation), so evidence about an older head becomes stale by the kernel's revision rule;
//! nothing here tracks staleness.

use loopx_kernel::ids::bounded_id;
use loopx_kernel::{
    CheckId, EvidenceId, GoalState, Lineage, NewEvidence, Observation, ObservedInput, Outcome,
    Revision, Subject,
};

use loopx_kernel::facts::git;
use loopx_kernel::facts::github::{CiRollup, Commit, PullRequest};

use crate::facts::{CiItem, CiSource, CiVerdict, Thread, sha_of_revision};
use crate::ids::short;

/// Why no evidence can be built from a pair of observations.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CiEvidenceError {
    /// The second observation is not a pull request (`pr:<repo>#<n>` at `git:<sha>`).
    #[error("`{key}` is not a pull request observation bound to an exact head")]
    NotAPullRequest {
        /// The observation's key.
        key: String,
    },
    /// The first observation is not a check run, check suite, status or roll-up at a commit.
    #[error("`{key}` is not a CI observation bound to an exact commit")]
    NotCi {
        /// The observation's key.
        key: String,
    },
    /// The CI fact is about another repository or pull request.
    #[error("`{ci}` is not about `{pull}`")]
    OtherPullRequest {
        /// The CI observation's key.
        ci: String,
        /// The pull request observation's key.
        pull: String,
    },
    /// The CI fact is about another commit than the pull request's head.
    #[error("CI ran at `{ci}` but the pull request's head is `{head}`: no evidence about the head")]
    NotAtHead {
        /// The commit CI ran at.
        ci: String,
        /// The pull request's head.
        head: String,
    },
    /// CI has not concluded (pending, absent or unreadable): there is nothing to bind yet.
    #[error("CI `{name}` has not concluded ({verdict:?})")]
    NotConcluded {
        /// The check, context, app or `rollup`.
        name: String,
        /// Its verdict.
        verdict: CiVerdict,
    },
}

/// Evidence that CI `ci` passed or failed for the pull request `pull` at its exact head.
///
/// The evidence is about subject `pr:<repo>#<n>` at revision `git:<sha>`; its check is
/// `ci/<name>` for a check run, `ci/suite/<app>` for a suite, `ci/status/<context>` for a
/// commit status and `ci/rollup` for the REST roll-up, so a goal criterion names the check it
/// needs. Its lineage cites the CI observation's fingerprint, so a re-run at the same commit
/// (a new fingerprint on the same stream) makes it stale too. The pull request observation is
/// deliberately not cited: it changes on edits that do not touch the code (a title, the merge
/// itself), and the head binding is already the revision.
///
/// # Errors
/// [`CiEvidenceError`] when the observations are not a concluded CI fact at the pull
/// request's exact head.
pub fn ci_evidence(ci: &Observation, pull: &Observation) -> Result<NewEvidence, CiEvidenceError> {
    let thread = Thread::parse(pull.key.as_str(), PullRequest::PREFIX)
        .filter(|_| pull.subject.as_str() == pull.key.as_str())
        .ok_or_else(|| CiEvidenceError::NotAPullRequest {
            key: pull.key.to_string(),
        })?;
    let head = sha_of_revision(pull.revision.as_str()).ok_or_else(|| {
        CiEvidenceError::NotAPullRequest {
            key: pull.key.to_string(),
        }
    })?;
    let item = CiItem::read(ci).ok_or_else(|| CiEvidenceError::NotCi {
        key: ci.key.to_string(),
    })?;
    if !is_about(ci, &item, &thread) {
        return Err(CiEvidenceError::OtherPullRequest {
            ci: ci.key.to_string(),
            pull: pull.key.to_string(),
        });
    }
    if item.sha != head {
        return Err(CiEvidenceError::NotAtHead {
            ci: item.sha,
            head: head.to_owned(),
        });
    }
    let outcome = match item.verdict {
        CiVerdict::Passing => Outcome::Pass,
        CiVerdict::Failing => Outcome::Fail,
        verdict => {
            return Err(CiEvidenceError::NotConcluded {
                name: item.name,
                verdict,
            });
        }
    };
    build(ci, &thread, &item, outcome).ok_or_else(|| CiEvidenceError::NotCi {
        key: ci.key.to_string(),
    })
}

/// The evidence the GitHub provider records for a goal right after it recorded `ci`: CI that
/// concluded at the exact head of a pull request the goal has observed ([`ci_evidence`] with
/// that pull request's observation), unless the goal already holds it. `None` for anything
/// else (not CI, not concluded, another commit, a pull request the goal never observed).
///
/// A host calls it after each CI fact it records (`loopx serve` does, through its capability
/// registry), so that CI at the head meets the criterion that names its check on GitHub's
/// word, never an agent's.
pub fn head_ci_evidence(state: &GoalState, ci: &Observation) -> Option<NewEvidence> {
    CiItem::read(ci)?;
    state
        .observations
        .iter()
        .filter(|(key, _)| key.as_str().starts_with(PullRequest::PREFIX))
        .find_map(|(_, pull)| ci_evidence(ci, pull).ok())
        .filter(|evidence| !state.evidence.contains_key(&evidence.id))
}

/// True when the CI observation belongs to the pull request's repository (and, for the
/// roll-up, to the pull request itself).
fn is_about(ci: &Observation, item: &CiItem, thread: &Thread) -> bool {
    match item.source {
        CiSource::Rollup => ci.key.as_str() == CiRollup::key(thread),
        _ => ci.subject.as_str() == Commit::of(thread, &item.sha).subject(),
    }
}

/// The check id for one CI item.
pub fn check_name(item: &CiItem) -> String {
    match item.source {
        CiSource::CheckRun => format!("ci/{}", item.name),
        CiSource::CheckSuite => format!("ci/suite/{}", item.name),
        CiSource::Status => format!("ci/status/{}", item.name),
        CiSource::Rollup => "ci/rollup".to_owned(),
    }
}

/// The last `n` characters of an ASCII digest (its most distinctive part).
fn tail(text: &str, n: usize) -> &str {
    text.get(text.len().saturating_sub(n)..).unwrap_or(text)
}

fn build(
    ci: &Observation,
    thread: &Thread,
    item: &CiItem,
    outcome: Outcome,
) -> Option<NewEvidence> {
    let check = bounded_id(&check_name(item));
    let pull = PullRequest::key(thread);
    let summary = format!(
        "{} {} at {}",
        check,
        if outcome == Outcome::Pass {
            "passed"
        } else {
            "failed"
        },
        item.sha
    );
    Some(NewEvidence {
        id: EvidenceId::new(bounded_id(&format!(
            "{pull}@{}/{check}/{}",
            short(&item.sha),
            tail(ci.fingerprint.as_str(), 12)
        )))
        .ok()?,
        check: CheckId::new(check).ok()?,
        subject: Subject::new(pull).ok()?,
        revision: Revision::new(git::revision(&item.sha)).ok()?,
        outcome,
        summary,
        observed_at: ci.observed_at,
        ttl: None,
        inputs: Lineage {
            evidence: vec![],
            observations: vec![ObservedInput {
                key: ci.key.clone(),
                fingerprint: ci.fingerprint.clone(),
            }],
        },
    })
}
