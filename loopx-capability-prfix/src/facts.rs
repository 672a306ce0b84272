//! Typed readings of the observations this capability judges. The facts and keys are the
//! kernel's GitHub schemas ([`loopx_kernel::facts::github`]), the same definition the GitHub
//! provider writes them with; this module decides what they mean. Observation facts are outside
//! input: a value the capability does not recognise becomes a typed "unknown", never a panic.

use loopx_kernel::Observation;
use loopx_kernel::facts::github::{
    self, CheckRun, CheckSuite, CiRollup, CommitStatus, PullRequest, PullState,
    Reproduction as Reproduced, ReviewThreads,
};
use loopx_kernel::facts::{Fact, FactSchema};
use serde::{Deserialize, Serialize};

/// A pull request or issue named the way the GitHub provider names them: the repository as it
/// appears in observation keys (`owner/name`, encoded for ids) and the number.
pub use loopx_kernel::facts::github::Thread;

/// The exact commit a fact is bound to (`git:<sha>`), and what counts as a sha.
pub use loopx_kernel::facts::git::{is_sha, sha_of_revision};

/// Where a pull request stands on GitHub (`status` fact of a `pr:` observation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PullStatus {
    /// Open and ready for review.
    Open,
    /// Open as a draft.
    Draft,
    /// Merged.
    Merged,
    /// Closed without merging.
    Closed,
    /// A value the capability does not know.
    Unknown,
}

impl PullStatus {
    /// Reads the `status` fact, with the `draft` fact making an open pull request a draft.
    pub fn read(observation: &Observation) -> PullStatus {
        let pull = PullRequest::read(&observation.facts);
        let draft = pull.draft == Fact::Known(true);
        match pull.status {
            Fact::Known(PullState::Merged) => PullStatus::Merged,
            Fact::Known(PullState::Closed) => PullStatus::Closed,
            Fact::Known(PullState::Draft) => PullStatus::Draft,
            Fact::Known(PullState::Open) if draft => PullStatus::Draft,
            Fact::Known(PullState::Open) => PullStatus::Open,
            Fact::Missing | Fact::Invalid(_) => PullStatus::Unknown,
        }
    }
}

/// True when GitHub reports the branch behind its base or in conflict (`mergeable_state`).
pub fn branch_blocked(observation: &Observation) -> bool {
    matches!(
        PullRequest::read(&observation.facts)
            .mergeable_state
            .known()
            .map(String::as_str),
        Some("behind" | "dirty")
    )
}

/// The verdict of CI, one item or a whole head.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CiVerdict {
    /// Succeeded (or neutral, or skipped).
    Passing,
    /// Failed, errored, was cancelled or timed out.
    Failing,
    /// Queued or running, or a required check has not reported.
    Pending,
    /// No check or status reported for the head.
    Absent,
    /// Facts the capability cannot read; never counts as green.
    Unknown,
}

impl CiVerdict {
    fn from_verdict_fact(value: &Fact<github::CiVerdict>) -> CiVerdict {
        match value {
            Fact::Known(github::CiVerdict::Passing) => CiVerdict::Passing,
            Fact::Known(github::CiVerdict::Failing) => CiVerdict::Failing,
            Fact::Known(github::CiVerdict::Pending) => CiVerdict::Pending,
            Fact::Known(github::CiVerdict::None) => CiVerdict::Absent,
            Fact::Missing | Fact::Invalid(_) => CiVerdict::Unknown,
        }
    }

    fn from_conclusion(status: &Fact<String>, conclusion: &Fact<String>) -> CiVerdict {
        let status = status.known().map(String::as_str);
        match conclusion.known().map(String::as_str) {
            Some("success" | "neutral" | "skipped") => CiVerdict::Passing,
            Some(
                "failure" | "cancelled" | "timed_out" | "action_required" | "stale"
                | "startup_failure" | "error",
            ) => CiVerdict::Failing,
            Some("none") | None if status != Some("completed") => CiVerdict::Pending,
            _ => CiVerdict::Unknown,
        }
    }
}

/// What kind of CI fact an observation is, by its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CiSource {
    /// A check run: `check:<repo>@<sha>/<name>`.
    CheckRun,
    /// A check suite: `suite:<repo>@<sha>/<app>`.
    CheckSuite,
    /// A commit status: `status:<repo>@<sha>/<context>`.
    Status,
    /// The REST roll-up of a pull request's head: `ci:<repo>#<n>`.
    Rollup,
}

/// One CI fact about one commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CiItem {
    /// Its kind.
    pub source: CiSource,
    /// The check-run name, status context or suite app; `rollup` for the roll-up.
    pub name: String,
    /// The commit it is about.
    pub sha: String,
    /// Its verdict.
    pub verdict: CiVerdict,
}

impl CiItem {
    /// Reads a check-run, check-suite, status or roll-up observation; `None` for anything else
    /// or for one not bound to an exact commit.
    pub fn read(observation: &Observation) -> Option<CiItem> {
        let sha = sha_of_revision(observation.revision.as_str())?.to_owned();
        let (source, name, verdict) = if let Some(run) = observation.read_facts::<CheckRun>() {
            let verdict = match CiVerdict::from_verdict_fact(&run.verdict) {
                CiVerdict::Unknown => CiVerdict::from_conclusion(&run.status, &run.conclusion),
                known => known,
            };
            (CiSource::CheckRun, run.name.into_known()?, verdict)
        } else if let Some(suite) = observation.read_facts::<CheckSuite>() {
            let verdict = CiVerdict::from_conclusion(&suite.status, &suite.conclusion);
            (CiSource::CheckSuite, suite.app.into_known()?, verdict)
        } else if let Some(status) = observation.read_facts::<CommitStatus>() {
            let verdict = CiVerdict::from_verdict_fact(&status.verdict);
            (CiSource::Status, status.context.into_known()?, verdict)
        } else if let Some(rollup) = observation.read_facts::<CiRollup>() {
            let verdict = CiVerdict::from_verdict_fact(&rollup.verdict);
            (CiSource::Rollup, "rollup".to_owned(), verdict)
        } else {
            return None;
        };
        Some(CiItem {
            source,
            name,
            sha,
            verdict,
        })
    }
}

impl CiItem {
    /// The check runs and statuses a roll-up observation lists (`check:<name>`,
    /// `status:<context>`), each as an item of its own at the roll-up's commit; empty for any
    /// other observation.
    pub fn rolled_up(observation: &Observation) -> Vec<CiItem> {
        let (Some(sha), Some(rollup)) = (
            sha_of_revision(observation.revision.as_str()),
            observation.read_facts::<CiRollup>(),
        ) else {
            return Vec::new();
        };
        rollup
            .item
            .iter()
            .filter_map(|(name, verdict)| {
                let (source, name) = match name.split_once(':') {
                    Some(("check", name)) => (CiSource::CheckRun, name),
                    Some(("status", context)) => (CiSource::Status, context),
                    _ => return None,
                };
                Some(CiItem {
                    source,
                    name: name.to_owned(),
                    sha: sha.to_owned(),
                    verdict: CiVerdict::from_verdict_fact(verdict),
                })
            })
            .collect()
    }
}

/// A reviewer's latest review state (`state` fact of a `review:` observation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewState {
    /// Approved.
    Approved,
    /// Changes requested.
    ChangesRequested,
    /// Commented, dismissed, pending, or a value the capability does not know: neither
    /// approves nor requests changes.
    Neutral,
}

/// One reviewer's latest review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Review {
    /// Its state.
    pub state: ReviewState,
    /// The exact commit reviewed, if readable.
    pub commit: Option<String>,
}

impl Review {
    /// Reads a `review:` observation.
    pub fn read(observation: &Observation) -> Review {
        let review = github::Review::read(&observation.facts);
        let state = match review.state.known().map(String::as_str) {
            Some("approved") => ReviewState::Approved,
            Some("changes_requested") => ReviewState::ChangesRequested,
            _ => ReviewState::Neutral,
        };
        let commit = review.commit_id.into_known().filter(|sha| is_sha(sha));
        Review { state, commit }
    }
}

/// Review threads of a pull request as read at one head (a `threads:<repo>#<n>` observation
/// with revision `git:<sha>`; the kernel's [`ReviewThreads`] facts).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Threads {
    /// The head the threads were read at.
    pub sha: Option<String>,
    /// True when every thread was read and none is unresolved.
    pub all_resolved: bool,
}

impl Threads {
    /// Reads a `threads:` observation; an unreadable count or an incomplete read is "not all
    /// resolved".
    pub fn read(observation: &Observation) -> Threads {
        let threads = ReviewThreads::read(&observation.facts);
        let complete = threads.complete == Fact::Known(true);
        let none_open = threads.unresolved == Fact::Known(0);
        Threads {
            sha: sha_of_revision(observation.revision.as_str()).map(str::to_owned),
            all_resolved: complete && none_open,
        }
    }
}

/// What reproducing an issue showed (`reproduction` fact of a `triage:` observation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reproduction {
    /// A bug in the product, reproduced.
    ProductBug,
    /// A bug in a test or fixture, reproduced.
    TestBug,
    /// The failure comes from the reporter's environment.
    Environment,
    /// The report does not say enough to reproduce.
    UnderSpecified,
    /// Not reproduced (yet), or a value the capability does not know.
    None,
}

/// Feasibility facts about one issue, from its `triage:<repo>#<n>` observation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Triage {
    /// What reproducing it showed.
    pub reproduction: Reproduction,
    /// A test fails because of it (`failing_test` = `true`).
    pub failing_test: bool,
    /// Repository-relative path prefixes a fix would write (`scope`, comma-separated); `None`
    /// when absent or unusable (a `..` component).
    pub scope: Option<Vec<String>>,
    /// The focused command that validates a fix (`validation`); `None` when absent or blank.
    pub validation: Option<String>,
}

impl Triage {
    /// Reads a `triage:` observation.
    pub fn read(observation: &Observation) -> Triage {
        let triage = github::Triage::read(&observation.facts);
        let reproduction = match triage.reproduction {
            Fact::Known(Reproduced::ProductBug) => Reproduction::ProductBug,
            Fact::Known(Reproduced::TestBug) => Reproduction::TestBug,
            Fact::Known(Reproduced::Environment) => Reproduction::Environment,
            Fact::Known(Reproduced::UnderSpecified) => Reproduction::UnderSpecified,
            _ => Reproduction::None,
        };
        Triage {
            reproduction,
            failing_test: triage.failing_test == Fact::Known(true),
            scope: triage.scope.into_known().and_then(scope_paths),
            validation: triage
                .validation
                .known()
                .map(|command| command.trim())
                .filter(|command| !command.is_empty())
                .map(str::to_owned),
        }
    }
}

/// Path prefixes; `None` when there are none or when one escapes the repository.
fn scope_paths(paths: Vec<String>) -> Option<Vec<String>> {
    let escapes = paths.iter().any(|p| p.split('/').any(|c| c == ".."));
    (!paths.is_empty() && !escapes).then_some(paths)
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopx_kernel::testkit::scenario::observation;

    fn seen(key: &str, revision: &str, facts: &[(&str, &str)]) -> Observation {
        observation(key, "s", revision, facts).expect("valid test ids")
    }

    #[test]
    fn pull_status_reads_draft_and_refuses_nonsense() {
        let read =
            |facts: &[(&str, &str)]| PullStatus::read(&seen("pr:a/b#1", "git:abcdef1", facts));
        assert_eq!(
            read(&[("status", "open"), ("draft", "true")]),
            PullStatus::Draft
        );
        assert_eq!(read(&[("status", "merged")]), PullStatus::Merged);
        assert_eq!(read(&[("status", "banana")]), PullStatus::Unknown);
        assert_eq!(read(&[]), PullStatus::Unknown);
    }

    #[test]
    fn ci_items_read_each_source_and_fall_back_to_conclusions() {
        let check = seen(
            "check:a/b@abcdef1/lint",
            "git:abcdef1",
            &[
                ("name", "lint"),
                ("status", "completed"),
                ("conclusion", "timed_out"),
            ],
        );
        let item = CiItem::read(&check).expect("a check run");
        assert_eq!(
            (item.source, item.verdict),
            (CiSource::CheckRun, CiVerdict::Failing)
        );
        let queued = seen(
            "suite:a/b@abcdef1/app",
            "git:abcdef1",
            &[("app", "app"), ("status", "queued"), ("conclusion", "none")],
        );
        assert_eq!(
            CiItem::read(&queued).map(|i| i.verdict),
            Some(CiVerdict::Pending)
        );
        let odd = seen(
            "status:a/b@abcdef1/ci",
            "git:abcdef1",
            &[("context", "ci"), ("verdict", "green?")],
        );
        assert_eq!(
            CiItem::read(&odd).map(|i| i.verdict),
            Some(CiVerdict::Unknown)
        );
        let unbound = seen("check:a/b@x/lint", "git:not-a-sha", &[("name", "lint")]);
        assert_eq!(CiItem::read(&unbound), None);
        let nameless = seen(
            "check:a/b@abcdef1/lint",
            "git:abcdef1",
            &[("verdict", "passing")],
        );
        assert_eq!(CiItem::read(&nameless), None);
    }

    #[test]
    fn a_rollup_lists_each_check_and_status_as_its_own_item() {
        let rollup = seen(
            "ci:a/b#1",
            "git:abcdef1",
            &[
                ("verdict", "pending"),
                ("head_sha", "abcdef1"),
                ("items", "3"),
                ("item.check:test", "pending"),
                ("item.status:deploy", "passing"),
                ("item.other:x", "failing"),
            ],
        );
        let listed: Vec<(CiSource, String, CiVerdict)> = CiItem::rolled_up(&rollup)
            .into_iter()
            .map(|i| (i.source, i.name, i.verdict))
            .collect();
        assert_eq!(
            listed,
            [
                (CiSource::CheckRun, "test".to_owned(), CiVerdict::Pending),
                (CiSource::Status, "deploy".to_owned(), CiVerdict::Passing),
            ],
            "what is neither a check run nor a status is not listed"
        );
        let check = seen("check:a/b@abcdef1/test", "git:abcdef1", &[("name", "test")]);
        assert!(CiItem::rolled_up(&check).is_empty());
    }

    #[test]
    fn reviews_and_threads_read_conservatively() {
        let review = Review::read(&seen(
            "review:a/b#1/x",
            "git:abcdef1",
            &[("state", "approved"), ("commit_id", "zzz")],
        ));
        assert_eq!(
            review,
            Review {
                state: ReviewState::Approved,
                commit: None
            }
        );
        let threads = Threads::read(&seen(
            "threads:a/b#1",
            "git:abcdef1",
            &[("unresolved", "0")],
        ));
        assert!(
            !threads.all_resolved,
            "an incomplete read never counts as resolved"
        );
    }

    #[test]
    fn triage_scope_must_stay_inside_the_repository() {
        let triage = Triage::read(&seen(
            "triage:a/b#1",
            "content:1",
            &[("scope", "src/, ../etc"), ("validation", "  ")],
        ));
        assert_eq!((triage.scope, triage.validation), (None, None));
        let triage = Triage::read(&seen(
            "triage:a/b#1",
            "content:1",
            &[("scope", "src/a, tests"), ("reproduction", "test_bug")],
        ));
        assert_eq!(
            triage.scope,
            Some(vec!["src/a".to_owned(), "tests".to_owned()])
        );
        assert_eq!(triage.reproduction, Reproduction::TestBug);
    }
}
