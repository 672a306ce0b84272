//! The capability's behaviour as a table: each case is a list of steps, ends in a kernel
//! decision, is snapshot-tested in full and asserts its point (decision kind and the
//! proposals the kernel accepted, by command and id without the digest).

mod common;

use common::*;
use loopx_capability_automl::scoped_id;
use loopx_kernel::facts::metrics::RunStatus;
use loopx_kernel::testkit::scenario::{JudgedProposal, ScenarioStep};
use loopx_kernel::{
    Actor, AgentId, Command, Duration, GateAnswer, GateId, MonitorSpec, NewTodo, ObservationKey,
    PersonId, TodoClass, TodoId,
};

/// What a passing holdout leads to: the gate and the promotion todo, the holdout todo retired.
const PROMOTED: &[&str] = &[
    "add_todo holdout:exp-a",
    "open_gate promote:exp-a",
    "add_todo promote:exp-a",
    "supersede holdout:exp-a",
];

struct Case {
    name: &'static str,
    contract: loopx_capability_automl::ExperimentContract,
    steps: Vec<Step>,
    decision: &'static str,
    accepted: &'static [&'static str],
}

fn case(
    name: &'static str,
    steps: Vec<Step>,
    decision: &'static str,
    accepted: &'static [&'static str],
) -> Case {
    Case {
        name,
        contract: contract(),
        steps,
        decision,
        accepted,
    }
}

fn dev(accuracy: &str, latency: &str) -> Step {
    let mut observations = baseline();
    observations.extend(finished("exp-a", R1, accuracy, latency));
    observe(observations)
}

fn holdout(accuracy: &str) -> Step {
    let mut observations = baseline_holdout();
    observations.extend(finished("exp-a@holdout", R1, accuracy, "20"));
    observe(observations)
}

fn with_run(run: &RunFacts, accuracy: &str) -> Step {
    let mut observations = baseline();
    observations.push(run.obs());
    observations.push(metric("exp-a", "accuracy", R1, accuracy));
    observations.push(metric("exp-a", "latency_ms", R1, "20"));
    observe(observations)
}

fn owner() -> Actor {
    Actor::Person(PersonId::new("olivia").expect("valid person"))
}

fn alice() -> Actor {
    Actor::Agent(AgentId::new("alice").expect("valid agent"))
}

fn answer(answer: GateAnswer) -> Step {
    let gate = GateId::new(scoped_id("promote", "exp-a", &[R1])).expect("valid gate");
    ScenarioStep::Command(owner(), Command::AnswerGate { gate, answer })
}

/// The agent's own monitor of the candidate's run stream.
fn watch() -> Step {
    let mut todo = NewTodo::advance(TodoId::new("watch-exp-a").expect("id"), "watch exp-a");
    todo.class = TodoClass::Monitor(MonitorSpec {
        watches: ObservationKey::new("run:exp-a").expect("key"),
        cadence: Duration::from_millis(600_000),
    });
    ScenarioStep::Command(alice(), Command::AddTodo { todo })
}

fn promoted_to_gate() -> Vec<Step> {
    vec![
        dev("0.85", "20"),
        holdout("0.83"),
        record_holdout("exp-a"),
        ScenarioStep::Judge,
    ]
}

#[allow(clippy::too_many_lines)] // one table, read top to bottom
fn cases() -> Vec<Case> {
    let mut cases = vec![
        case(
            "candidate_needs_holdout",
            vec![dev("0.85", "20")],
            "continue",
            &["add_todo holdout:exp-a"],
        ),
        case(
            "running_run_proposes_nothing",
            vec![
                watch(),
                with_run(&run("exp-a", R1).with(RunStatus::state, "running"), "0.99"),
            ],
            "continue",
            &[],
        ),
        case(
            "regressed_raises_replan",
            vec![dev("0.70", "20")],
            "replan",
            &["raise_obligation regressed:exp-a"],
        ),
        case(
            "within_noise_is_inconclusive",
            vec![watch(), dev("0.805", "20")],
            "continue",
            &[],
        ),
        case(
            "crash_retries",
            vec![with_run(&run("exp-a", R1).failed("crash"), "0.10")],
            "continue",
            &["add_todo retry:exp-a"],
        ),
        case(
            "oom_is_not_a_regression",
            vec![with_run(&run("exp-a", R1).failed("oom"), "0.01")],
            "continue",
            &["add_todo retry:exp-a"],
        ),
        case(
            "preempted_retry_is_idempotent",
            vec![
                with_run(&run("exp-a", R1).failed("preempted"), "0.5"),
                ScenarioStep::Judge,
                ScenarioStep::Advance(Duration::from_millis(60_000)),
            ],
            "continue",
            &["add_todo retry:exp-a"],
        ),
        case(
            "missing_metrics_file_retries",
            vec![with_run(
                &run("exp-a", R1).with(RunStatus::exit_reason, "missing_metrics"),
                "0.5",
            )],
            "continue",
            &["add_todo retry:exp-a"],
        ),
        case(
            "unattributed_failure_retries",
            vec![with_run(&run("exp-a", R1).failed("exit code 137"), "0.2")],
            "continue",
            &["add_todo retry:exp-a"],
        ),
        case(
            "attempts_exhausted_asks_for_repair",
            vec![with_run(
                &run("exp-a", R1).failed("oom").with(RunStatus::attempt, "3"),
                "0.2",
            )],
            "repair",
            &["raise_obligation infra:exp-a"],
        ),
        case(
            "diverged_run_is_blocked",
            vec![with_run(&run("exp-a", R1).failed("diverged"), "NaN")],
            "replan",
            &["raise_obligation guardrail:exp-a"],
        ),
        case(
            "nan_primary_is_blocked",
            vec![dev("NaN", "20")],
            "replan",
            &["raise_obligation guardrail:exp-a"],
        ),
        case(
            "cost_cap_exceeded_is_blocked",
            vec![with_run(
                &run("exp-a", R1).with(RunStatus::cost, "250"),
                "0.9",
            )],
            "replan",
            &["raise_obligation guardrail:exp-a"],
        ),
        case(
            "time_cap_exceeded_is_blocked",
            vec![with_run(
                &run("exp-a", R1).with(RunStatus::wall_time_secs, "9000"),
                "0.9",
            )],
            "replan",
            &["raise_obligation guardrail:exp-a"],
        ),
        case(
            "secondary_regression_beyond_tolerance_is_blocked",
            vec![dev("0.9", "31")],
            "replan",
            &["raise_obligation guardrail:exp-a"],
        ),
        case(
            "secondary_within_tolerance_warns_but_stays_candidate",
            vec![dev("0.9", "24")],
            "continue",
            &["add_todo holdout:exp-a"],
        ),
        case(
            "missing_cost_needs_evaluation",
            vec![with_run(&run("exp-a", R1).without(RunStatus::cost), "0.9")],
            "continue",
            &["add_todo evaluate:exp-a"],
        ),
        case(
            "unreadable_cost_needs_evaluation",
            vec![with_run(
                &run("exp-a", R1).with(RunStatus::cost, "ten dollars"),
                "0.9",
            )],
            "continue",
            &["add_todo evaluate:exp-a"],
        ),
        case(
            "late_metrics_retire_the_evaluation",
            vec![
                observe({
                    let mut o = baseline();
                    o.push(run("exp-a", R1).obs());
                    o
                }),
                dev("0.85", "20"),
            ],
            "continue",
            &[
                "add_todo evaluate:exp-a",
                "add_todo holdout:exp-a",
                "supersede evaluate:exp-a",
            ],
        ),
        case(
            "dataset_mismatch_is_invalid",
            vec![with_run(
                &run("exp-a", R1).with(RunStatus::dataset, "ds2"),
                "0.95",
            )],
            "replan",
            &["raise_obligation invalid:exp-a"],
        ),
        case(
            "window_mismatch_is_invalid",
            vec![with_run(
                &run("exp-a", R1).with(RunStatus::eval_window, "2026-11"),
                "0.95",
            )],
            "replan",
            &["raise_obligation invalid:exp-a"],
        ),
        case(
            "budget_mismatch_is_invalid",
            vec![with_run(
                &run("exp-a", R1).with(RunStatus::budget, "steps=5000"),
                "0.95",
            )],
            "replan",
            &["raise_obligation invalid:exp-a"],
        ),
        case(
            "mislabelled_split_is_invalid",
            vec![with_run(
                &run("exp-a", R1).with(RunStatus::split, "holdout"),
                "0.95",
            )],
            "replan",
            &["raise_obligation invalid:exp-a"],
        ),
        case(
            "no_baseline_proposes_nothing",
            vec![watch(), observe(finished("exp-a", R1, "0.99", "20"))],
            "continue",
            &[],
        ),
        case(
            "baseline_failure_retries_the_baseline",
            vec![observe(vec![
                run("base", BASE).failed("preempted").obs(),
                run("exp-a", R1).obs(),
                metric("exp-a", "accuracy", R1, "0.99"),
                metric("exp-a", "latency_ms", R1, "20"),
            ])],
            "continue",
            &["add_todo retry:base"],
        ),
        case(
            "holdout_pass_asks_the_owner",
            promoted_to_gate(),
            "ask",
            PROMOTED,
        ),
        case(
            "holdout_fail_raises_replan",
            vec![
                dev("0.85", "20"),
                holdout("0.77"),
                record_holdout("exp-a"),
                ScenarioStep::Judge,
            ],
            "replan",
            &[
                "add_todo holdout:exp-a",
                "raise_obligation holdout-failed:exp-a",
                "supersede holdout:exp-a",
            ],
        ),
        case(
            "holdout_crash_retries_the_holdout_evaluation",
            vec![
                dev("0.85", "20"),
                observe({
                    let mut o = baseline_holdout();
                    o.push(run("exp-a@holdout", R1).failed("crash").obs());
                    o
                }),
            ],
            "continue",
            &["add_todo holdout:exp-a", "add_todo retry:exp-a@holdout"],
        ),
        case(
            "approval_unblocks_the_promotion",
            [
                promoted_to_gate(),
                vec![answer(GateAnswer::Resolve {
                    answer: "ship it".into(),
                })],
            ]
            .concat(),
            "continue",
            PROMOTED,
        ),
        case(
            "rejection_leaves_a_replan",
            [
                promoted_to_gate(),
                vec![answer(GateAnswer::Reject {
                    reason: "not this quarter".into(),
                })],
            ]
            .concat(),
            "replan",
            PROMOTED,
        ),
        case(
            "config_change_withdraws_a_stale_promotion",
            [
                promoted_to_gate(),
                vec![
                    watch(),
                    observe(vec![
                        run("exp-a", R2).with(RunStatus::state, "running").obs(),
                    ]),
                ],
            ]
            .concat(),
            "continue",
            &[
                "add_todo holdout:exp-a",
                "open_gate promote:exp-a",
                "add_todo promote:exp-a",
                "supersede holdout:exp-a",
                "supersede promote:exp-a",
                "withdraw_gate promote:exp-a",
            ],
        ),
        case(
            "new_revision_invalidates_holdout_evidence",
            [
                promoted_to_gate(),
                vec![observe({
                    let mut o = vec![run("exp-a", R2).obs()];
                    o.push(metric("exp-a", "accuracy", R2, "0.86"));
                    o.push(metric("exp-a", "latency_ms", R2, "20"));
                    o
                })],
            ]
            .concat(),
            "continue",
            &[
                "add_todo holdout:exp-a",
                "open_gate promote:exp-a",
                "add_todo promote:exp-a",
                "supersede holdout:exp-a",
                "add_todo holdout:exp-a",
                "supersede promote:exp-a",
                "withdraw_gate promote:exp-a",
            ],
        ),
        case(
            "repeated_judgement_converges",
            vec![
                dev("0.85", "20"),
                ScenarioStep::Judge,
                ScenarioStep::Advance(Duration::from_millis(3_600_000)),
            ],
            "continue",
            &["add_todo holdout:exp-a"],
        ),
    ];
    cases.push(Case {
        contract: {
            let mut c = contract();
            c.direction = loopx_capability_automl::Direction::LowerIsBetter;
            c.primary = "accuracy".into();
            c
        },
        ..case(
            "lower_is_better_reads_a_drop_as_a_gain",
            vec![dev("0.70", "20")],
            "continue",
            &["add_todo holdout:exp-a"],
        )
    });
    cases.push(case(
        "real_metrics_file_from_the_provider",
        vec![observe(provider_observations())],
        "continue",
        &["add_todo holdout:exp-a"],
    ));
    cases
}

/// The baseline and the candidate as the metrics provider reads them from metrics files.
fn provider_observations() -> Vec<loopx_kernel::Observation> {
    use loopx_provider::metrics::{MetricsFormat, RunRevision, observations, parse_metrics};
    let dir = tempfile::tempdir().expect("temp dir");
    let read = |experiment: &str, file: &str, body: &str, run: RunRevision| {
        let path = dir.path().join(file);
        std::fs::write(&path, body).expect("metrics file written");
        let bytes = std::fs::read(&path).expect("metrics file read");
        let points = parse_metrics(&bytes, MetricsFormat::from_path(&path)).expect("parsed");
        observations(
            experiment,
            &run,
            &points,
            loopx_kernel::testkit::roster::start(),
        )
        .expect("observations")
    };
    let base = RunRevision {
        code_sha: "base000".into(),
        config_hash: "cfg0".into(),
        dataset: "ds1".into(),
    };
    let cand = RunRevision {
        code_sha: "abc1234".into(),
        config_hash: "cfg1".into(),
        dataset: "ds1".into(),
    };
    assert_eq!(base.revision(), BASE);
    assert_eq!(cand.revision(), R1);
    let mut all = vec![run("base", BASE).obs(), run("exp-a", R1).obs()];
    all.extend(read(
        "base",
        "base.jsonl",
        "{\"step\":1,\"name\":\"accuracy\",\"value\":0.7}\n{\"step\":2,\"name\":\"accuracy\",\"value\":0.8}\n{\"step\":2,\"name\":\"latency_ms\",\"value\":20}\n",
        base,
    ));
    all.extend(read(
        "exp-a",
        "exp-a.csv",
        "step,name,value\n1,accuracy,0.75\n2,accuracy,0.86\n2,latency_ms,21\n",
        cand,
    ));
    all
}

/// `command id` without the digest, for the proposals the kernel accepted.
fn label(proposal: &JudgedProposal) -> String {
    let label = proposal.label();
    label.split('#').next().unwrap_or_default().to_owned()
}

#[test]
fn scenario_table() {
    let cases = cases();
    assert!(cases.len() >= 25, "the table holds {} cases", cases.len());
    for case in cases {
        let capability = capability(case.contract.clone());
        let transcript = play(&capability, case.steps);
        insta::assert_json_snapshot!(case.name, transcript);
        transcript.assert_case(case.name, case.decision, case.accepted, label);
    }
}
