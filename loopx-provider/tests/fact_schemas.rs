//! The facts each provider writes read back through the kernel's schemas, the definition the
//! capabilities read them with: strictly (every required fact known, every recorded one
//! readable) and byte for byte (writing the read value again gives the same facts). A fact
//! renamed or retyped on the writing side fails here.

use std::collections::BTreeMap;
use std::path::PathBuf;

use loopx_kernel::facts::FactSchema;
use loopx_kernel::facts::github::{
    CheckRun, CheckSuite, CiRollup, CommitStatus, Issue, IssueComment, PullRequest, Push, Review,
    ReviewComment, ReviewThread, WorkflowJob, WorkflowRun,
};
use loopx_kernel::facts::metrics::Metric;
use loopx_kernel::{Observation, Timestamp};
use loopx_provider::github::webhook::{Delivery, SUPPORTED_EVENTS, parse_delivery};
use loopx_provider::github::{CiItem, CiRollup as Rollup, CiVerdict, GitHubEvent};
use loopx_provider::metrics::{MetricPoint, RunRevision, observations};

fn now() -> Timestamp {
    Timestamp::parse("2026-11-29T10:00:00Z").expect("timestamp")
}

/// Reads `facts` strictly as `S` and writes them again.
fn round_trip<S: FactSchema>(facts: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    match S::parse(facts) {
        Ok(value) => value.to_facts(),
        Err(error) => panic!("{}: {error}", S::KIND),
    }
}

/// The schema an observation's key names, and what it reads back as; `None` for none.
fn through_its_schema(
    observation: &Observation,
) -> Option<(&'static str, BTreeMap<String, String>)> {
    let key = observation.key.as_str();
    let facts = &observation.facts;
    macro_rules! by_prefix {
        ($($schema:ty),+) => {
            $( if key.starts_with(<$schema>::PREFIX) {
                return Some((<$schema as FactSchema>::KIND, round_trip::<$schema>(facts)));
            } )+
        };
    }
    by_prefix!(
        PullRequest,
        CiRollup,
        CheckRun,
        CheckSuite,
        CommitStatus,
        Review,
        Issue,
        IssueComment,
        Push,
        ReviewComment,
        ReviewThread,
        WorkflowRun,
        WorkflowJob,
        Metric
    );
    None
}

#[test]
fn every_webhook_observation_reads_back_through_its_schema() {
    let mut kinds = Vec::new();
    let folders = [
        "tests/fixtures/github-webhooks",
        "tests/fixtures/github-deliveries",
    ];
    for (event, folder) in SUPPORTED_EVENTS
        .iter()
        .flat_map(|event| folders.iter().map(move |folder| (*event, *folder)))
    {
        let dir: PathBuf = [env!("CARGO_MANIFEST_DIR"), folder, event].iter().collect();
        if !dir.is_dir() {
            continue;
        }
        for entry in std::fs::read_dir(&dir).expect("fixture folder") {
            let path = entry.expect("entry").path();
            let body = std::fs::read(&path).expect("read");
            let Delivery::Fact(fact) = parse_delivery(event, &body).expect("a supported payload")
            else {
                continue;
            };
            let observation = fact.observation(now()).expect("valid ids");
            let (kind, facts) = through_its_schema(&observation)
                .unwrap_or_else(|| panic!("{}: no schema for {}", path.display(), observation.key));
            assert_eq!(facts, observation.facts, "{} as {kind}", path.display());
            kinds.push(kind);
        }
    }
    kinds.sort_unstable();
    kinds.dedup();
    assert_eq!(
        kinds,
        [
            "check_run",
            "check_suite",
            "commit_status",
            "issue",
            "issue_comment",
            "pull_request",
            "push",
            "review",
            "review_comment",
            "review_thread",
            "workflow_job",
            "workflow_run"
        ]
    );
}

#[test]
fn a_ci_rollup_and_metrics_read_back_through_their_schemas() {
    let rollup = GitHubEvent::Ci(Rollup {
        repo: "acme/cli".into(),
        number: 7,
        sha: "ec26c3e57ca3a959ca5aad62de7213c562f8c821".into(),
        verdict: CiVerdict::Failing,
        items: vec![
            CiItem {
                name: "check:lint".into(),
                verdict: CiVerdict::Failing,
            },
            CiItem {
                name: "status:ci/build".into(),
                verdict: CiVerdict::Passing,
            },
        ],
    })
    .observation(now())
    .expect("valid ids");
    let (kind, facts) = through_its_schema(&rollup).expect("the roll-up's schema");
    assert_eq!((kind, &facts), ("ci_rollup", &rollup.facts));
    let read = CiRollup::parse(&rollup.facts).expect("strict");
    assert_eq!(read.item.len(), 2);

    let run = RunRevision {
        code_sha: "7a1c0de".into(),
        config_hash: "cfg1".into(),
        dataset: "digits-v1".into(),
    };
    let points = [
        MetricPoint {
            step: 1,
            name: "loss".into(),
            value: 0.9,
        },
        MetricPoint {
            step: 2,
            name: "loss".into(),
            value: f64::NAN,
        },
    ];
    let metrics = observations("exp a", &run, &points, now()).expect("observations");
    assert_eq!(metrics.len(), 1);
    let (kind, facts) = through_its_schema(&metrics[0]).expect("the metric's schema");
    assert_eq!((kind, &facts), ("metric", &metrics[0].facts));
    assert_eq!(metrics[0].key.as_str(), Metric::key("exp=20a", "loss"));
}
