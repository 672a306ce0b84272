//! The pull-request lifecycle: what one pull request's facts at its exact head call for, in a
//! fixed precedence.

use serde::{Deserialize, Serialize};

use crate::facts::{CiItem, CiVerdict, PullStatus, Review, ReviewState, Threads};

/// Everything the precedence looks at, read from one pull request's observations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullFacts {
    /// Open, draft, merged, closed or unknown.
    pub status: PullStatus,
    /// The exact head sha (the pull request observation's revision), if readable.
    pub head: Option<String>,
    /// `mergeable_state` is `behind` or `dirty`.
    pub branch_blocked: bool,
    /// CI at the exact head.
    pub ci: CiVerdict,
    /// Reviews at the head.
    pub reviews: ReviewStanding,
}

/// Where the reviews stand against the exact head.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ReviewStanding {
    /// Some reviewer's latest review requests changes.
    pub changes_requested: bool,
    /// Every change request is on an older commit than the head and every review thread read
    /// at the head is resolved.
    pub changes_addressed: bool,
    /// Approvals whose reviewed commit is exactly the head.
    pub approvals_at_head: u32,
}

/// What the pull request calls for. The variants are listed in precedence order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Merged or closed: end the line of work.
    Closed,
    /// CI fails at the head: a P0 repair successor.
    CiFailing,
    /// Changes requested and not addressed: a P0 successor.
    ChangesRequested,
    /// Changes addressed (newer head, threads resolved): a quiet monitor for the re-review.
    ChangesAddressed,
    /// Behind its base or conflicting: a P1 successor.
    BranchBlocked,
    /// A draft: a gate for its owner.
    Draft,
    /// Checks pending (or not reported, or unreadable) at the head: a quiet monitor.
    ChecksPending,
    /// Green and approved at the exact head: a merge gate owned by a person.
    ReadyToMerge,
    /// Green, not yet approved at the head: a quiet monitor for the review.
    AwaitingReview,
    /// The facts cannot be read (unknown status, no exact head): nothing is proposed.
    Unreadable,
}

impl Phase {
    /// The stable name used in todo and gate ids.
    pub fn slug(self) -> &'static str {
        match self {
            Phase::Closed => "closed",
            Phase::CiFailing => "ci-fix",
            Phase::ChangesRequested => "review-fix",
            Phase::ChangesAddressed => "await-rereview",
            Phase::BranchBlocked => "update-branch",
            Phase::Draft => "mark-ready",
            Phase::ChecksPending => "await-checks",
            Phase::ReadyToMerge => "await-merge",
            Phase::AwaitingReview => "await-review",
            Phase::Unreadable => "unreadable",
        }
    }
}

/// The phase the facts call for, in the fixed precedence: closed or merged; failing CI at the
/// head; unaddressed change requests; addressed change requests; a blocked branch; a draft;
/// pending checks; green and approved at the exact head; awaiting review.
pub fn phase(facts: &PullFacts, required_approvals: u32) -> Phase {
    match facts.status {
        PullStatus::Merged | PullStatus::Closed => return Phase::Closed,
        PullStatus::Unknown => return Phase::Unreadable,
        PullStatus::Open | PullStatus::Draft => {}
    }
    if facts.head.is_none() {
        return Phase::Unreadable;
    }
    let reviews = facts.reviews;
    if facts.ci == CiVerdict::Failing {
        Phase::CiFailing
    } else if reviews.changes_requested && !reviews.changes_addressed {
        Phase::ChangesRequested
    } else if reviews.changes_requested {
        Phase::ChangesAddressed
    } else if facts.branch_blocked {
        Phase::BranchBlocked
    } else if facts.status == PullStatus::Draft {
        Phase::Draft
    } else if facts.ci != CiVerdict::Passing {
        Phase::ChecksPending
    } else if reviews.approvals_at_head >= required_approvals {
        Phase::ReadyToMerge
    } else {
        Phase::AwaitingReview
    }
}

/// CI at one head: any failing item fails it; any pending or unreadable one, or a required
/// check that has not reported, keeps it pending; no item at all is absent; otherwise passing.
pub fn ci_at_head<'a>(
    items: impl IntoIterator<Item = &'a CiItem>,
    required: &std::collections::BTreeSet<String>,
) -> CiVerdict {
    let items: Vec<&CiItem> = items
        .into_iter()
        .filter(|i| i.verdict != CiVerdict::Absent)
        .collect();
    let any = |v: CiVerdict| items.iter().any(|i| i.verdict == v);
    let reported = |name: &String| {
        items
            .iter()
            .any(|i| &i.name == name && i.verdict == CiVerdict::Passing)
    };
    if any(CiVerdict::Failing) {
        CiVerdict::Failing
    } else if any(CiVerdict::Pending) || any(CiVerdict::Unknown) || !required.iter().all(reported) {
        CiVerdict::Pending
    } else if items.is_empty() {
        CiVerdict::Absent
    } else {
        CiVerdict::Passing
    }
}

/// Where reviews stand at `head`, given each reviewer's latest review and the review threads.
pub fn review_standing<'a>(
    reviews: impl IntoIterator<Item = &'a Review>,
    threads: Option<&Threads>,
    head: &str,
) -> ReviewStanding {
    let mut standing = ReviewStanding::default();
    let mut requests_all_older = true;
    for review in reviews {
        let at_head = review.commit.as_deref() == Some(head);
        match review.state {
            ReviewState::Approved if at_head => standing.approvals_at_head += 1,
            ReviewState::ChangesRequested => {
                standing.changes_requested = true;
                requests_all_older &= review.commit.is_some() && !at_head;
            }
            ReviewState::Approved | ReviewState::Neutral => {}
        }
    }
    let resolved_at_head =
        threads.is_some_and(|t| t.all_resolved && t.sha.as_deref() == Some(head));
    standing.changes_addressed =
        standing.changes_requested && requests_all_older && resolved_at_head;
    standing
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "abcdef1";

    fn facts(status: PullStatus, ci: CiVerdict) -> PullFacts {
        PullFacts {
            status,
            head: Some(HEAD.into()),
            branch_blocked: false,
            ci,
            reviews: ReviewStanding::default(),
        }
    }

    fn approved(mut f: PullFacts) -> PullFacts {
        f.reviews.approvals_at_head = 1;
        f
    }

    #[test]
    fn closure_outranks_everything() {
        let mut f = approved(facts(PullStatus::Merged, CiVerdict::Failing));
        f.reviews.changes_requested = true;
        assert_eq!(phase(&f, 1), Phase::Closed);
        assert_eq!(
            phase(&facts(PullStatus::Closed, CiVerdict::Passing), 1),
            Phase::Closed
        );
    }

    #[test]
    fn the_precedence_is_fixed() {
        let mut f = facts(PullStatus::Draft, CiVerdict::Failing);
        f.branch_blocked = true;
        f.reviews.changes_requested = true;
        assert_eq!(phase(&f, 1), Phase::CiFailing);
        f.ci = CiVerdict::Pending;
        assert_eq!(phase(&f, 1), Phase::ChangesRequested);
        f.reviews.changes_addressed = true;
        assert_eq!(phase(&f, 1), Phase::ChangesAddressed);
        f.reviews = ReviewStanding::default();
        assert_eq!(phase(&f, 1), Phase::BranchBlocked);
        f.branch_blocked = false;
        assert_eq!(phase(&f, 1), Phase::Draft);
        f.status = PullStatus::Open;
        assert_eq!(phase(&f, 1), Phase::ChecksPending);
        f.ci = CiVerdict::Passing;
        assert_eq!(phase(&f, 1), Phase::AwaitingReview);
        assert_eq!(phase(&approved(f), 1), Phase::ReadyToMerge);
    }

    #[test]
    fn no_merge_phase_without_green_ci_and_enough_approvals_at_head() {
        for ci in [CiVerdict::Pending, CiVerdict::Absent, CiVerdict::Unknown] {
            assert_eq!(
                phase(&approved(facts(PullStatus::Open, ci)), 1),
                Phase::ChecksPending
            );
        }
        assert_eq!(
            phase(&approved(facts(PullStatus::Open, CiVerdict::Passing)), 2),
            Phase::AwaitingReview
        );
    }

    #[test]
    fn unreadable_facts_propose_nothing() {
        assert_eq!(
            phase(&facts(PullStatus::Unknown, CiVerdict::Passing), 1),
            Phase::Unreadable
        );
        let mut f = facts(PullStatus::Open, CiVerdict::Passing);
        f.head = None;
        assert_eq!(phase(&f, 1), Phase::Unreadable);
    }

    fn item(name: &str, verdict: CiVerdict) -> CiItem {
        CiItem {
            source: crate::facts::CiSource::CheckRun,
            name: name.into(),
            sha: HEAD.into(),
            verdict,
        }
    }

    #[test]
    fn ci_rolls_up_failing_first_and_waits_for_required_checks() {
        let none = std::collections::BTreeSet::new();
        let build: std::collections::BTreeSet<String> = ["build".to_owned()].into();
        let pass = item("lint", CiVerdict::Passing);
        let fail = item("test", CiVerdict::Failing);
        let odd = item("x", CiVerdict::Unknown);
        assert_eq!(ci_at_head([&pass, &fail, &odd], &none), CiVerdict::Failing);
        assert_eq!(ci_at_head([&pass, &odd], &none), CiVerdict::Pending);
        assert_eq!(ci_at_head([&pass], &none), CiVerdict::Passing);
        assert_eq!(ci_at_head([&pass], &build), CiVerdict::Pending);
        assert_eq!(
            ci_at_head([&pass, &item("build", CiVerdict::Passing)], &build),
            CiVerdict::Passing
        );
        assert_eq!(
            ci_at_head([&item("rollup", CiVerdict::Absent)], &none),
            CiVerdict::Absent
        );
    }

    #[test]
    fn approvals_count_only_at_the_exact_head_and_addressing_needs_resolved_threads() {
        let at = |state, sha: &str| Review {
            state,
            commit: Some(sha.into()),
        };
        let old = at(ReviewState::Approved, "1234567");
        let now = at(ReviewState::Approved, HEAD);
        assert_eq!(
            review_standing([&old, &now], None, HEAD).approvals_at_head,
            1
        );
        let request = at(ReviewState::ChangesRequested, "1234567");
        let resolved = Threads {
            sha: Some(HEAD.into()),
            all_resolved: true,
        };
        let stale = Threads {
            sha: Some("1234567".into()),
            all_resolved: true,
        };
        assert!(review_standing([&request], Some(&resolved), HEAD).changes_addressed);
        assert!(!review_standing([&request], Some(&stale), HEAD).changes_addressed);
        assert!(!review_standing([&request], None, HEAD).changes_addressed);
        let fresh_request = at(ReviewState::ChangesRequested, HEAD);
        assert!(!review_standing([&fresh_request], Some(&resolved), HEAD).changes_addressed);
    }
}
