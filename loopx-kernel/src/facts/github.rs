//! GitHub: pull requests, CI, reviews, issues, comments and pushes as the GitHub provider
//! records them, and the feasibility and review-thread facts recorded by whoever reads them (an
//! agent, a host).
//!
//! Keys name the repository `owner/name` as encoded by [`id_component`] ([`Thread`],
//! [`Commit`]). GitHub's own words (a review's state, a check's conclusion, a mergeable state)
//! pass through as texts; what the provider computes (a pull request's status, a verdict) is
//! typed.

use crate::facts::git;
use crate::ids::id_component;

/// A pull request or issue as keys name it: `<prefix><repo>#<n>`.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct Thread {
    /// The repository as written in keys (`owner/name`, encoded for ids).
    pub repo: String,
    /// The pull request or issue number.
    pub number: u64,
}

impl Thread {
    /// The thread of `repo` (external text, encoded here) and `number`.
    pub fn new(repo: &str, number: u64) -> Thread {
        Thread {
            repo: id_component(repo),
            number,
        }
    }

    /// Reads `<prefix><repo>#<n>` (e.g. `pr:acme/cli#12`); `None` for any other shape.
    pub fn parse(key: &str, prefix: &str) -> Option<Thread> {
        let (repo, number) = key.strip_prefix(prefix)?.rsplit_once('#')?;
        let number = number.parse().ok()?;
        (!repo.is_empty() && !repo.contains('#')).then(|| Thread {
            repo: repo.to_owned(),
            number,
        })
    }

    /// `<prefix><repo>#<n>`.
    pub fn key(&self, prefix: &str) -> String {
        format!("{prefix}{}#{}", self.repo, self.number)
    }
}

/// The subject the observations of the GitHub stream `key` are about, as the GitHub provider
/// records them: a CI roll-up (`ci:<repo>#<n>`) is about its pull request (`pr:<repo>#<n>`);
/// a check run, check suite, commit status, workflow run or job
/// (`<kind>:<repo>@<sha>/…`) about its commit (`commit:<repo>@<sha>`); every other stream
/// (a pull request, review, issue, comment, push, thread) about itself. A host that asks a
/// goal to follow what a stream is about before anything was observed on it
/// (`CapabilityBinding::follows`) follows this subject, so that the first fact about it
/// reaches the goal.
pub fn subject_of(key: &str) -> String {
    if let Some(thread) = Thread::parse(key, CiRollup::PREFIX) {
        return PullRequest::key(&thread);
    }
    let per_commit = [
        CheckRun::PREFIX,
        CheckSuite::PREFIX,
        CommitStatus::PREFIX,
        WorkflowRun::PREFIX,
        WorkflowJob::PREFIX,
    ];
    for prefix in per_commit {
        // `<repo>@<sha>/<name>`: a repository has no `@`, a sha no `/`.
        if let Some((repo, rest)) = key.strip_prefix(prefix).and_then(|r| r.split_once('@'))
            && let Some((sha, _)) = rest.split_once('/')
        {
            return Commit {
                repo: repo.to_owned(),
                sha: sha.to_owned(),
            }
            .subject();
        }
    }
    key.to_owned()
}

/// One commit of a repository as keys name it: `<repo>@<sha>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Commit {
    /// The repository as written in keys (encoded for ids).
    pub repo: String,
    /// The sha as written in keys (encoded for ids).
    pub sha: String,
}

/// The prefix of a commit subject: `commit:<repo>@<sha>`.
pub const COMMIT_PREFIX: &str = "commit:";

impl Commit {
    /// The commit `sha` of `repo` (external texts, encoded here).
    pub fn new(repo: &str, sha: &str) -> Commit {
        Commit {
            repo: id_component(repo),
            sha: id_component(sha),
        }
    }

    /// The commit `sha` of the repository a [`Thread`] names (the sha encoded here).
    pub fn of(thread: &Thread, sha: &str) -> Commit {
        Commit {
            repo: thread.repo.clone(),
            sha: id_component(sha),
        }
    }

    /// The subject every check, suite and status of this commit is about:
    /// `commit:<repo>@<sha>`.
    pub fn subject(&self) -> String {
        format!("{COMMIT_PREFIX}{}@{}", self.repo, self.sha)
    }

    /// Its revision, `git:<sha>`.
    pub fn revision(&self) -> String {
        format!("{}{}", git::REVISION_PREFIX, self.sha)
    }

    /// `<prefix><repo>@<sha>/`: the start of every key of that kind about this commit.
    pub fn streams(&self, prefix: &str) -> String {
        format!("{prefix}{}@{}/", self.repo, self.sha)
    }
}

fact_enum! {
    /// Where a pull request stands.
    pub enum PullState {
        /// Open and ready for review.
        Open = "open",
        /// Open as a draft.
        Draft = "draft",
        /// Merged.
        Merged = "merged",
        /// Closed without merging.
        Closed = "closed",
    }
}

fact_enum! {
    /// The verdict of one check or status, or the roll-up of a commit's.
    pub enum CiVerdict {
        /// Succeeded (or was neutral or skipped).
        Passing = "passing",
        /// Failed, errored, was cancelled or timed out.
        Failing = "failing",
        /// Still running or queued.
        Pending = "pending",
        /// No check and no status exists (roll-ups only).
        None = "none",
    }
}

fact_schema! {
    /// A pull request's state, on stream and subject `pr:<repo>#<n>` at revision
    /// `git:<head sha>`.
    pub struct PullRequest, read as PullRequestRead, kind "pull_request", prefix "pr:" {
        /// Open, draft, merged or closed.
        req status: PullState,
        /// Draft or ready.
        req draft: bool,
        /// The exact head sha.
        req head_sha: String,
        /// The head branch.
        req head_ref: String,
        /// The base branch.
        req base_ref: String,
        /// Its title.
        req title: String,
        /// The author's login.
        req author: String,
        /// GitHub's mergeability summary (`clean`, `dirty`, `behind`, `blocked`, `unknown`…).
        opt mergeable_state: String,
        /// Commits on the pull request.
        opt commits: u64,
    }
}

impl PullRequest {
    /// The stream `pr:<repo>#<n>`.
    pub fn key(thread: &Thread) -> String {
        thread.key(Self::PREFIX)
    }
}

fact_schema! {
    /// The CI roll-up of a pull request's head (REST polls), on stream `ci:<repo>#<n>` about
    /// subject `pr:<repo>#<n>` at revision `git:<head sha>`.
    pub struct CiRollup, read as CiRollupRead, kind "ci_rollup", prefix "ci:" {
        /// The roll-up of every item.
        req verdict: CiVerdict,
        /// The exact head sha the checks were read for.
        req head_sha: String,
        /// How many checks and statuses were rolled up.
        req items: u64,
        /// Each item's verdict, by `check:<name>` or `status:<context>`.
        map item["item."]: CiVerdict,
    }
}

impl CiRollup {
    /// The stream `ci:<repo>#<n>`.
    pub fn key(thread: &Thread) -> String {
        thread.key(Self::PREFIX)
    }
}

fact_schema! {
    /// A check run, on stream `check:<repo>@<sha>/<name>` about subject `commit:<repo>@<sha>`
    /// at revision `git:<sha>`.
    pub struct CheckRun, read as CheckRunRead, kind "check_run", prefix "check:" {
        /// Its name.
        req name: String,
        /// `queued`, `in_progress`, `completed`…
        req status: String,
        /// GitHub's conclusion, `none` until completed.
        req conclusion: String,
        /// Pending until completed, then by conclusion.
        req verdict: CiVerdict,
        /// The app that runs it.
        req app: String,
        /// Pull requests whose head is this commit, by number.
        req pulls: Vec<u64>,
    }
}

impl CheckRun {
    /// The stream `check:<repo>@<sha>/<name>` (the name encoded here).
    pub fn key(commit: &Commit, name: &str) -> String {
        format!("{}{}", commit.streams(Self::PREFIX), id_component(name))
    }
}

fact_schema! {
    /// A check suite, on stream `suite:<repo>@<sha>/<app>` about subject `commit:<repo>@<sha>`
    /// at revision `git:<sha>`.
    pub struct CheckSuite, read as CheckSuiteRead, kind "check_suite", prefix "suite:" {
        /// The app that runs it.
        req app: String,
        /// `queued`, `in_progress`, `completed`…, `unknown` when not sent.
        req status: String,
        /// GitHub's conclusion, `none` until completed.
        req conclusion: String,
        /// The branch, when known.
        opt head_branch: String,
        /// Pull requests whose head is this commit, by number.
        req pulls: Vec<u64>,
    }
}

impl CheckSuite {
    /// The stream `suite:<repo>@<sha>/<app>` (the app encoded here).
    pub fn key(commit: &Commit, app: &str) -> String {
        format!("{}{}", commit.streams(Self::PREFIX), id_component(app))
    }
}

fact_schema! {
    /// A commit status, on stream `status:<repo>@<sha>/<context>` about subject
    /// `commit:<repo>@<sha>` at revision `git:<sha>`.
    pub struct CommitStatus, read as CommitStatusRead, kind "commit_status", prefix "status:" {
        /// Its context, e.g. `ci/build`.
        req context: String,
        /// GitHub's state: `pending`, `success`, `failure`, `error`.
        req state: String,
        /// Its verdict.
        req verdict: CiVerdict,
        /// Its description.
        opt description: String,
    }
}

impl CommitStatus {
    /// The stream `status:<repo>@<sha>/<context>` (the context encoded here).
    pub fn key(commit: &Commit, context: &str) -> String {
        format!("{}{}", commit.streams(Self::PREFIX), id_component(context))
    }
}

fact_schema! {
    /// A reviewer's latest review, on stream and subject `review:<repo>#<n>/<login>` at revision
    /// `git:<reviewed sha>`.
    pub struct Review, read as ReviewRead, kind "review", prefix "review:" {
        /// The reviewer's login.
        req reviewer: String,
        /// GitHub's state in lower case: `approved`, `changes_requested`, `commented`,
        /// `dismissed`, `pending`.
        req state: String,
        /// The commit reviewed, `unknown` when GitHub did not say.
        req commit_id: String,
        /// The pull request number.
        req pull: u64,
        /// GitHub's id of the review, when the provider read it.
        opt review_id: u64,
        /// What the reviewer wrote with it, when anything.
        opt body: String,
        /// GitHub's `author_association` of its author with the repository, in lower case
        /// (`owner`, `member`, `collaborator`, `contributor`, `first_time_contributor`,
        /// `first_timer`, `mannequin`, `none`), when GitHub said it.
        opt association: String,
    }
}

impl Review {
    /// The stream `review:<repo>#<n>/<login>` (the login encoded here).
    pub fn key(thread: &Thread, login: &str) -> String {
        format!("{}{}", Self::streams(thread), id_component(login))
    }

    /// `review:<repo>#<n>/`: the start of every review stream of the pull request.
    pub fn streams(thread: &Thread) -> String {
        format!("{}/", thread.key(Self::PREFIX))
    }
}

fact_schema! {
    /// The review threads of a pull request as read at one head, on stream and subject
    /// `threads:<repo>#<n>` at revision `git:<sha>`; recorded by whoever reads them.
    pub struct ReviewThreads, read as ReviewThreadsRead, kind "review_threads", prefix "threads:" {
        /// Threads not resolved.
        req unresolved: u64,
        /// Every thread was read (no page was left out).
        req complete: bool,
    }
}

impl ReviewThreads {
    /// The stream `threads:<repo>#<n>`.
    pub fn key(thread: &Thread) -> String {
        thread.key(Self::PREFIX)
    }
}

fact_schema! {
    /// An issue's state, on stream and subject `issue:<repo>#<n>` at revision
    /// `content:<digest of its facts>`.
    pub struct Issue, read as IssueRead, kind "issue", prefix "issue:" {
        /// `open` or `closed`.
        req state: String,
        /// Its title.
        req title: String,
        /// Its label names, sorted.
        req labels: Vec<String>,
        /// Its assignees' logins, sorted.
        req assignees: Vec<String>,
        /// Locked for comments.
        req locked: bool,
        /// The issue is a pull request.
        req pull_request: bool,
    }
}

impl Issue {
    /// The stream `issue:<repo>#<n>`.
    pub fn key(thread: &Thread) -> String {
        thread.key(Self::PREFIX)
    }
}

fact_schema! {
    /// A comment on an issue or pull request, on stream and subject `comment:<repo>/<id>` at
    /// revision `content:<digest of its body>`.
    pub struct IssueComment, read as IssueCommentRead, kind "issue_comment", prefix "comment:" {
        /// The author's login.
        req author: String,
        /// The issue or pull request number.
        req number: u64,
        /// Commenting on a pull request.
        req on_pull_request: bool,
        /// The comment was deleted (its body is then empty).
        req deleted: bool,
        /// Its text.
        req body: String,
        /// The SHA-256 of its text.
        req body_sha256: String,
        /// The length of its text, in bytes.
        req body_bytes: u64,
        /// GitHub's `author_association` of its author with the repository, in lower case
        /// (`owner`, `member`, `collaborator`, `contributor`, `first_time_contributor`,
        /// `first_timer`, `mannequin`, `none`), when GitHub said it.
        opt association: String,
    }
}

impl IssueComment {
    /// The stream `comment:<repo>/<id>` (the repository encoded here).
    pub fn key(repo: &str, id: u64) -> String {
        format!("{}{}/{id}", Self::PREFIX, id_component(repo))
    }

    /// `comment:<repo>/`: the start of every comment stream of the thread's repository.
    pub fn streams(thread: &Thread) -> String {
        format!("{}{}/", Self::PREFIX, thread.repo)
    }

    /// The comment's id, from its stream's key.
    pub fn id_of(key: &str) -> Option<u64> {
        key.strip_prefix(Self::PREFIX)?
            .rsplit_once('/')?
            .1
            .parse()
            .ok()
    }
}

fact_schema! {
    /// A push to a ref, on stream and subject `ref:<repo>:<ref>` at revision `git:<after>`.
    pub struct Push, read as PushRead, kind "push", prefix "ref:" {
        /// The full ref, e.g. `refs/heads/main`.
        req git_ref["ref"]: String,
        /// The sha before.
        req before: String,
        /// The sha after (all zeros when deleted).
        req after: String,
        /// The ref was created.
        req created: bool,
        /// The ref was deleted.
        req deleted: bool,
        /// The push was forced.
        req forced: bool,
    }
}

impl Push {
    /// The stream `ref:<repo>:<ref>` (both encoded here).
    pub fn key(repo: &str, git_ref: &str) -> String {
        format!(
            "{}{}:{}",
            Self::PREFIX,
            id_component(repo),
            id_component(git_ref)
        )
    }
}

fact_schema! {
    /// A comment on a pull request's diff, on stream and subject
    /// `review-comment:<repo>/<id>` at revision `content:<digest of its body>`.
    pub struct ReviewComment, read as ReviewCommentRead, kind "review_comment", prefix "review-comment:" {
        /// The author's login.
        req author: String,
        /// The pull request number.
        req pull: u64,
        /// The file it comments on.
        req path: String,
        /// The commit it comments on.
        req commit_id: String,
        /// The comment it answers, when it answers one.
        opt in_reply_to: u64,
        /// The comment was deleted (its body is then empty).
        req deleted: bool,
        /// Its text.
        req body: String,
        /// The SHA-256 of its text.
        req body_sha256: String,
        /// The length of its text, in bytes.
        req body_bytes: u64,
        /// GitHub's `author_association` of its author with the repository, in lower case
        /// (`owner`, `member`, `collaborator`, `contributor`, `first_time_contributor`,
        /// `first_timer`, `mannequin`, `none`), when GitHub said it.
        opt association: String,
    }
}

impl ReviewComment {
    /// The stream `review-comment:<repo>/<id>` (the repository encoded here).
    pub fn key(repo: &str, id: u64) -> String {
        format!("{}{}/{id}", Self::PREFIX, id_component(repo))
    }

    /// `review-comment:<repo>/`: the start of every review comment stream of the thread's
    /// repository.
    pub fn streams(thread: &Thread) -> String {
        format!("{}{}/", Self::PREFIX, thread.repo)
    }

    /// The comment's id, from its stream's key.
    pub fn id_of(key: &str) -> Option<u64> {
        key.strip_prefix(Self::PREFIX)?
            .rsplit_once('/')?
            .1
            .parse()
            .ok()
    }
}

fact_schema! {
    /// One review thread as a `pull_request_review_thread` delivery shows it, on stream and
    /// subject `review-thread:<repo>#<n>/<node id>`. The count of a pull request's unresolved
    /// threads is [`ReviewThreads`], read from GitHub's GraphQL API.
    pub struct ReviewThread, read as ReviewThreadRead, kind "review_thread", prefix "review-thread:" {
        /// The pull request number.
        req pull: u64,
        /// The thread was resolved.
        req resolved: bool,
        /// The comments the delivery carried.
        req comments: u64,
        /// The file the thread is about, when the delivery names it.
        opt path: String,
    }
}

impl ReviewThread {
    /// The stream `review-thread:<repo>#<n>/<node id>` (the node id encoded here).
    pub fn key(thread: &Thread, node_id: &str) -> String {
        format!("{}/{}", thread.key(Self::PREFIX), id_component(node_id))
    }
}

fact_schema! {
    /// A GitHub Actions workflow run, on stream `workflow:<repo>@<sha>/<workflow>` about subject
    /// `commit:<repo>@<sha>` at revision `git:<sha>`.
    pub struct WorkflowRun, read as WorkflowRunRead, kind "workflow_run", prefix "workflow:" {
        /// The workflow's name.
        req name: String,
        /// `requested`, `queued`, `in_progress`, `completed`…
        req status: String,
        /// GitHub's conclusion, `none` until completed.
        req conclusion: String,
        /// Pending until completed, then by conclusion.
        req verdict: CiVerdict,
        /// What triggered it (`push`, `pull_request`…).
        req event: String,
        /// Which attempt of the run (1 for the first, more after a re-run).
        req attempt: u64,
        /// Pull requests whose head is this commit, by number.
        req pulls: Vec<u64>,
    }
}

impl WorkflowRun {
    /// The stream `workflow:<repo>@<sha>/<workflow>` (the workflow's name encoded here).
    pub fn key(commit: &Commit, workflow: &str) -> String {
        format!("{}{}", commit.streams(Self::PREFIX), id_component(workflow))
    }
}

fact_schema! {
    /// One job of a workflow run, on stream `job:<repo>@<sha>/<workflow>/<job>` about subject
    /// `commit:<repo>@<sha>` at revision `git:<sha>`.
    pub struct WorkflowJob, read as WorkflowJobRead, kind "workflow_job", prefix "job:" {
        /// The job's name.
        req name: String,
        /// The workflow's name.
        req workflow: String,
        /// `queued`, `waiting`, `in_progress`, `completed`…
        req status: String,
        /// GitHub's conclusion, `none` until completed.
        req conclusion: String,
        /// Pending until completed, then by conclusion.
        req verdict: CiVerdict,
        /// Which attempt of its run.
        req attempt: u64,
    }
}

impl WorkflowJob {
    /// The stream `job:<repo>@<sha>/<workflow>/<job>` (both names encoded here).
    pub fn key(commit: &Commit, workflow: &str, job: &str) -> String {
        format!(
            "{}{}/{}",
            commit.streams(Self::PREFIX),
            id_component(workflow),
            id_component(job)
        )
    }
}

fact_enum! {
    /// What reproducing an issue showed.
    pub enum Reproduction {
        /// A bug in the product, reproduced.
        ProductBug = "product_bug",
        /// A bug in a test or fixture, reproduced.
        TestBug = "test_bug",
        /// The failure comes from the reporter's environment.
        Environment = "environment",
        /// The report does not say enough to reproduce.
        UnderSpecified = "under_specified",
        /// Not reproduced (yet).
        NotReproduced = "none",
    }
}

fact_schema! {
    /// Feasibility facts about one issue, on stream and subject `triage:<repo>#<n>`; recorded by
    /// whoever triages it, each fact once it is known.
    pub struct Triage, read as TriageRead, kind "triage", prefix "triage:" {
        /// What reproducing it showed.
        opt reproduction: Reproduction,
        /// A test fails because of it.
        opt failing_test: bool,
        /// Repository-relative path prefixes a fix would write.
        opt scope: Vec<String>,
        /// The focused command that validates a fix.
        opt validation: String,
    }
}

impl Triage {
    /// The stream `triage:<repo>#<n>`.
    pub fn key(thread: &Thread) -> String {
        thread.key(Self::PREFIX)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::facts::{Fact, FactError, FactSchema};

    #[test]
    fn threads_parse_only_their_own_shape() {
        let pr = Thread::parse("pr:acme/cli#12", PullRequest::PREFIX).expect("a pull request key");
        assert_eq!((pr.repo.as_str(), pr.number), ("acme/cli", 12));
        assert_eq!(CiRollup::key(&pr), "ci:acme/cli#12");
        assert_eq!(Thread::parse("pr:acme/cli#x", "pr:"), None);
        assert_eq!(Thread::parse("pr:#3", "pr:"), None);
        assert_eq!(Thread::parse("issue:acme/cli#3", "pr:"), None);
        assert_eq!(Thread::new("a b/c", 1).key("pr:"), "pr:a=20b/c#1");
    }

    #[test]
    fn keys_of_commits_encode_external_text() {
        let commit = Commit::new("acme/cli", "abc1234");
        assert_eq!(commit.subject(), "commit:acme/cli@abc1234");
        assert_eq!(commit.revision(), "git:abc1234");
        assert_eq!(
            CheckRun::key(&commit, "lint / unit"),
            "check:acme/cli@abc1234/lint=20/=20unit"
        );
        assert_eq!(
            commit.streams(CheckSuite::PREFIX),
            "suite:acme/cli@abc1234/"
        );
        assert_eq!(
            Review::key(&Thread::new("acme/cli", 2), "bot[bot]"),
            "review:acme/cli#2/bot=5Bbot=5D"
        );
        assert_eq!(
            Push::key("a/b", "refs/heads/main"),
            "ref:a/b:refs/heads/main"
        );
        assert_eq!(IssueComment::key("a/b", 7), "comment:a/b/7");
    }

    fn pull() -> PullRequest {
        PullRequest {
            status: PullState::Draft,
            draft: true,
            head_sha: "ec26c3e5".into(),
            head_ref: "feature".into(),
            base_ref: "main".into(),
            title: "Fix it".into(),
            author: "octocat".into(),
            mergeable_state: None,
            commits: Some(3),
        }
    }

    #[test]
    fn a_pull_request_round_trips_with_its_wire_names() {
        let facts = pull().to_facts();
        assert_eq!(facts.get("status").map(String::as_str), Some("draft"));
        assert_eq!(facts.get("draft").map(String::as_str), Some("true"));
        assert_eq!(facts.get("commits").map(String::as_str), Some("3"));
        assert!(
            !facts.contains_key("mergeable_state"),
            "absent options write nothing"
        );
        assert_eq!(PullRequest::parse(&facts), Ok(pull()));
        let read = PullRequest::read(&facts);
        assert_eq!(read.status, Fact::Known(PullState::Draft));
        assert_eq!(read.head_sha, Fact::Known("ec26c3e5".to_owned()));
        assert_eq!(read.mergeable_state, Fact::Missing);
        assert_eq!(read.commits, Fact::Known(3));
    }

    #[test]
    fn nonsense_reads_as_invalid_never_as_a_value() {
        let facts: BTreeMap<String, String> = [
            ("status", "banana"),
            ("draft", "yes"),
            ("commits", "many"),
            ("title", "  "),
            ("mergeable_state", ""),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        let read = PullRequest::read(&facts);
        assert_eq!(read.status, Fact::Invalid("banana".into()));
        assert_eq!(read.draft, Fact::Invalid("yes".into()));
        assert_eq!(read.commits, Fact::Invalid("many".into()));
        assert_eq!(
            read.title,
            Fact::Known("  ".into()),
            "a text is kept, blank included"
        );
        assert_eq!(read.head_sha, Fact::Missing);
        assert_eq!(read.mergeable_state, Fact::Known(String::new()));
        assert_eq!(
            PullRequest::parse(&facts),
            Err(FactError::Invalid {
                fact: "status".into(),
                value: "banana".into()
            })
        );
        assert_eq!(
            Fact::<u64>::read(Some(" ")),
            Fact::Missing,
            "a blank number is missing"
        );
    }

    #[test]
    fn a_rollup_keeps_each_item_under_its_prefix() {
        let rollup = CiRollup {
            verdict: CiVerdict::Failing,
            head_sha: "abc1234".into(),
            items: 2,
            item: BTreeMap::from([
                ("check:lint".to_owned(), CiVerdict::Failing),
                ("status:ci".to_owned(), CiVerdict::Passing),
            ]),
        };
        let facts = rollup.to_facts();
        assert_eq!(
            facts.get("item.check:lint").map(String::as_str),
            Some("failing")
        );
        assert_eq!(CiRollup::parse(&facts), Ok(rollup));
        let read = CiRollup::read(&facts);
        assert_eq!(read.verdict, Fact::Known(CiVerdict::Failing));
        assert_eq!(read.items, Fact::Known(2));
        assert_eq!(read.item.len(), 2);
        assert_eq!(
            read.item.get("status:ci"),
            Some(&Fact::Known(CiVerdict::Passing))
        );
    }

    #[test]
    fn lists_and_renamed_fields_round_trip() {
        let push = Push {
            git_ref: "refs/heads/main".into(),
            before: "a".into(),
            after: "b".into(),
            created: false,
            deleted: false,
            forced: true,
        };
        let facts = push.to_facts();
        assert_eq!(Push::git_ref, "ref");
        assert_eq!(
            Push::read(&facts).git_ref,
            Fact::Known("refs/heads/main".into())
        );
        let check = CheckRun {
            name: "lint".into(),
            status: "completed".into(),
            conclusion: "success".into(),
            verdict: CiVerdict::Passing,
            app: "ci".into(),
            pulls: vec![1, 2],
        };
        let facts = check.to_facts();
        assert_eq!(facts.get("pulls").map(String::as_str), Some("1,2"));
        assert_eq!(CheckRun::read(&facts).pulls, Fact::Known(vec![1, 2]));
        let triage = Triage {
            reproduction: Some(Reproduction::NotReproduced),
            failing_test: None,
            scope: Some(vec!["src/a".into(), "tests".into()]),
            validation: None,
        };
        let read = Triage::read(&triage.to_facts());
        assert_eq!(read.reproduction, Fact::Known(Reproduction::NotReproduced));
        assert_eq!(
            read.scope,
            Fact::Known(vec!["src/a".to_owned(), "tests".to_owned()])
        );
    }
}
