//! Scenario tables: each case is a list of steps run through the testkit `Scenario` with the
//! research capability, ending in the kernel's decision for one agent. Each case asserts its
//! decision kind and the proposals the kernel accepted, and snapshots the transcript together
//! with the final ledger and the evidence recorded.

mod common;

use common::{
    Step, agent_id, answer, begin, complete_held, discharge_by_superseding, finding, holdout_step,
    hypothesis, judge, observe, owner_answers, settle_with_holdout_evidence, unregister,
};
use loopx_capability_research::{FactError, Research, ResearchConfig, Status, ledger};
use loopx_kernel::testkit::roster;
use loopx_kernel::testkit::scenario::{self, JudgedProposal, Scenario, ScenarioStep};
use loopx_kernel::{
    Actor, Command, Decision, Duration, EvidenceId, LeaseStep, Observation, PersonId, TodoId,
    decide,
};

/// `agent` claims `todo`.
fn claim(agent: &str, todo: &str) -> Step {
    ScenarioStep::Command(
        Actor::Agent(agent_id(agent)),
        Command::Claim {
            todo: TodoId::new(todo).expect("valid todo"),
            ttl: None,
            workspace: None,
            grant_reason: None,
        },
    )
}

struct Case {
    name: &'static str,
    /// The agent the decisions are made for.
    agent: &'static str,
    config: ResearchConfig,
    steps: Vec<Step>,
    /// The final decision's kind.
    decision: &'static str,
    /// Every accepted proposal, in order, as `<command> <id>`.
    accepted: &'static [&'static str],
}

impl Case {
    fn new(name: &'static str, agent: &'static str, steps: Vec<Step>) -> Self {
        Case {
            name,
            agent,
            config: ResearchConfig::default(),
            steps,
            decision: "",
            accepted: &[],
        }
    }

    fn expect(mut self, decision: &'static str, accepted: &'static [&'static str]) -> Self {
        self.decision = decision;
        self.accepted = accepted;
        self
    }

    fn with_config(mut self, config: ResearchConfig) -> Self {
        self.config = config;
        self
    }
}

fn h1() -> Observation {
    hypothesis("h1", "alice", "", "v1")
}

fn dev_lift(id: &str, h: &str, evaluator: &str) -> Observation {
    finding(id, h, "dev", "supports", evaluator, None, "0.04")
}

fn holdout(id: &str, h: &str, edge: &str, evaluator: &str) -> Observation {
    let lift = if edge == "supports" { "0.03" } else { "-0.02" };
    finding(id, h, "holdout", edge, evaluator, None, lift)
}

fn with(mut steps: Vec<Step>, more: Vec<Step>) -> Vec<Step> {
    steps.extend(more);
    steps
}

/// h1 (alice) supported on holdout by bob's independent evaluation.
fn supported_h1() -> Vec<Step> {
    vec![observe(vec![
        h1(),
        dev_lift("f1", "h1", "alice"),
        holdout("f2", "h1", "supports", "bob"),
    ])]
}

/// h1 (alice) with its first experiment planned, then refuted on holdout by bob.
fn refuted_h1() -> Vec<Step> {
    vec![
        observe(vec![h1()]),
        observe(vec![holdout("f1", "h1", "refutes", "bob")]),
    ]
}

/// h1 (alice) with a self-evaluated holdout support.
fn self_evaluated_h1() -> Vec<Step> {
    vec![observe(vec![
        h1(),
        dev_lift("f1", "h1", "alice"),
        holdout("f2", "h1", "supports", "alice"),
    ])]
}

/// h1 (alice) and h2 (bob), h2 depending on h1, then h1 refuted on holdout.
fn dependency_refuted() -> Vec<Step> {
    vec![
        observe(vec![h1(), hypothesis("h2", "bob", "h1", "v1")]),
        observe(vec![holdout("f1", "h1", "refutes", "carol")]),
    ]
}

/// h1 (alice) with a dev lift: its holdout is handed to an evaluator.
fn dev_lift_h1() -> Vec<Step> {
    vec![observe(vec![h1(), dev_lift("f1", "h1", "alice")])]
}

/// What a dev lift alone leads to: the holdout todo, and its handoff to an evaluator.
const HOLDOUT_HANDED_OFF: &[&str] = &["add_todo holdout:h1", "handoff holdout:h1"];

fn two_lines() -> Vec<Step> {
    vec![observe(vec![h1(), hypothesis("h2", "bob", "", "v1")])]
}

#[allow(clippy::too_many_lines)] // the table is data
fn cases() -> Vec<Case> {
    vec![
        Case::new(
            "hypothesis_without_experiment",
            "alice",
            vec![observe(vec![h1()])],
        )
        .expect("continue", &["add_todo experiment:h1"]),
        Case::new(
            "unregistered_owner_line_goes_to_anyone",
            "alice",
            vec![observe(vec![hypothesis("h9", "mallory", "", "v1")])],
        )
        .expect("continue", &["add_todo experiment:h9"]),
        Case::new(
            "dev_lift_alone_asks_for_holdout",
            "alice",
            vec![observe(vec![h1(), dev_lift("f1", "h1", "alice")])],
        )
        .expect("wait", HOLDOUT_HANDED_OFF),
        Case::new(
            "dev_lift_by_independent_evaluator_still_needs_holdout",
            "alice",
            vec![observe(vec![h1(), dev_lift("f1", "h1", "bob")])],
        )
        .expect("wait", HOLDOUT_HANDED_OFF),
        Case::new(
            "evaluator_continues_with_the_handoff_note",
            "bob",
            dev_lift_h1(),
        )
        .expect("continue", HOLDOUT_HANDED_OFF),
        Case::new(
            "configured_evaluator_receives_the_holdout",
            "carol",
            dev_lift_h1(),
        )
        .with_config(ResearchConfig {
            evaluator: Some(agent_id("carol")),
            ..ResearchConfig::default()
        })
        .expect("continue", HOLDOUT_HANDED_OFF),
        Case::new(
            "owner_as_configured_evaluator_is_passed_over",
            "bob",
            dev_lift_h1(),
        )
        .with_config(ResearchConfig {
            evaluator: Some(agent_id("alice")),
            ..ResearchConfig::default()
        })
        .expect("continue", HOLDOUT_HANDED_OFF),
        Case::new(
            "owners_own_holdout_evidence_is_ignored",
            "alice",
            with(
                dev_lift_h1(),
                vec![
                    begin("bob", "holdout:h1", "t1", 1),
                    observe(vec![finding(
                        "f2",
                        "h1",
                        "holdout",
                        "supports",
                        "bob",
                        Some("bob"),
                        "0.03",
                    )]),
                    settle_with_holdout_evidence(
                        "bob",
                        "holdout:h1",
                        "t1",
                        1,
                        Actor::Agent(agent_id("alice")),
                        "finding:f2",
                    ),
                    judge(),
                ],
            ),
        )
        .expect(
            "wait",
            &[
                "add_todo holdout:h1",
                "handoff holdout:h1",
                "add_todo confirm:h1",
            ],
        ),
        Case::new(
            "holdout_evaluated_by_the_owner_is_not_independent",
            "alice",
            vec![observe(vec![
                h1(),
                finding(
                    "f2",
                    "h1",
                    "holdout",
                    "supports",
                    "alice",
                    Some("bob"),
                    "0.03",
                ),
            ])],
        )
        .expect("wait", &["add_todo confirm:h1"]),
        Case::new(
            "line_changes_hands_when_its_owner_is_unregistered",
            "bob",
            vec![observe(vec![h1()]), unregister("alice"), judge()],
        )
        .expect(
            "continue",
            &["add_todo experiment:h1", "handoff experiment:h1"],
        ),
        Case::new(
            "line_changes_hands_when_its_lease_expires_mid_turn",
            "bob",
            vec![
                observe(vec![h1()]),
                claim("alice", "experiment:h1"),
                begin("alice", "experiment:h1", "t1", 1),
                ScenarioStep::Advance(Duration::minutes(20)),
            ],
        )
        .expect(
            "continue",
            &["add_todo experiment:h1", "handoff experiment:h1"],
        ),
        Case::new(
            "unknown_outcome_of_the_writeup_is_repair_not_a_handoff",
            "alice",
            with(
                supported_h1(),
                vec![
                    owner_answers("promote:h1", true),
                    claim("alice", "writeup:h1"),
                    begin("alice", "writeup:h1", "t1", 1),
                    ScenarioStep::Advance(Duration::minutes(20)),
                ],
            ),
        )
        .expect("repair", &["open_gate promote:h1", "add_todo writeup:h1"]),
        Case::new(
            "handed_over_line_keeps_its_lineage",
            "bob",
            with(
                dev_lift_h1(),
                vec![
                    begin("bob", "holdout:h1", "t1", 1),
                    observe(vec![finding(
                        "f2",
                        "h1",
                        "holdout",
                        "supports",
                        "bob",
                        Some("bob"),
                        "0.03",
                    )]),
                    settle_with_holdout_evidence(
                        "bob",
                        "holdout:h1",
                        "t1",
                        1,
                        Actor::Validator(roster::validator()),
                        "finding:f2",
                    ),
                    judge(),
                    owner_answers("promote:h1", true),
                    unregister("alice"),
                    judge(),
                ],
            ),
        )
        .expect(
            "continue",
            &[
                "add_todo holdout:h1",
                "handoff holdout:h1",
                "add_todo confirm:h1",
                "supersede confirm:h1",
                "open_gate promote:h1",
                "add_todo writeup:h1",
                "handoff writeup:h1",
            ],
        ),
        Case::new(
            "self_evaluated_holdout_waits_for_independent_confirmation",
            "alice",
            self_evaluated_h1(),
        )
        .expect("wait", &["add_todo confirm:h1"]),
        Case::new(
            "independent_confirmation_is_another_agents_frontier",
            "bob",
            self_evaluated_h1(),
        )
        .expect("continue", &["add_todo confirm:h1"]),
        Case::new(
            "holdout_evidence_confirms_and_asks_promotion",
            "alice",
            with(
                self_evaluated_h1(),
                vec![holdout_step("finding:f2"), judge()],
            ),
        )
        .expect(
            "ask",
            &[
                "add_todo confirm:h1",
                "supersede confirm:h1",
                "open_gate promote:h1",
                "add_todo writeup:h1",
            ],
        ),
        Case::new(
            "dev_finding_cannot_become_evidence",
            "alice",
            vec![
                observe(vec![h1(), dev_lift("f1", "h1", "alice")]),
                holdout_step("finding:f1"),
                judge(),
            ],
        )
        .expect("wait", HOLDOUT_HANDED_OFF),
        Case::new(
            "independent_holdout_support_asks_promotion",
            "alice",
            supported_h1(),
        )
        .expect("ask", &["open_gate promote:h1", "add_todo writeup:h1"]),
        Case::new(
            "promotion_resolved_unlocks_writeup",
            "alice",
            with(
                supported_h1(),
                vec![owner_answers("promote:h1", true), judge()],
            ),
        )
        .expect("continue", &["open_gate promote:h1", "add_todo writeup:h1"]),
        Case::new(
            "promotion_declined_is_a_replan",
            "alice",
            with(
                supported_h1(),
                vec![owner_answers("promote:h1", false), judge()],
            ),
        )
        .expect("replan", &["open_gate promote:h1", "add_todo writeup:h1"]),
        Case::new(
            "holdout_refutation_proposes_retirement",
            "alice",
            refuted_h1(),
        )
        .expect(
            "replan",
            &[
                "add_todo experiment:h1",
                "raise_obligation research:refuted:h1",
                "open_gate retire:h1",
            ],
        ),
        Case::new("refutation_seen_by_another_agent", "bob", refuted_h1()).expect(
            "wait",
            &[
                "add_todo experiment:h1",
                "raise_obligation research:refuted:h1",
                "open_gate retire:h1",
            ],
        ),
        Case::new(
            "owner_replans_then_person_retires",
            "alice",
            with(
                refuted_h1(),
                vec![
                    discharge_by_superseding("alice", "research:refuted:h1", "experiment:h1"),
                    owner_answers("retire:h1", true),
                    judge(),
                ],
            ),
        )
        .expect(
            "replan",
            &[
                "add_todo experiment:h1",
                "raise_obligation research:refuted:h1",
                "open_gate retire:h1",
            ],
        ),
        Case::new(
            "retired_line_supersedes_its_open_work",
            "alice",
            with(
                refuted_h1(),
                vec![owner_answers("retire:h1", true), judge()],
            ),
        )
        .expect(
            "replan",
            &[
                "add_todo experiment:h1",
                "raise_obligation research:refuted:h1",
                "open_gate retire:h1",
                "supersede experiment:h1",
            ],
        ),
        Case::new(
            "retirement_declined_stays_refuted",
            "alice",
            with(
                refuted_h1(),
                vec![owner_answers("retire:h1", false), judge()],
            ),
        )
        .expect(
            "replan",
            &[
                "add_todo experiment:h1",
                "raise_obligation research:refuted:h1",
                "open_gate retire:h1",
            ],
        ),
        Case::new(
            "dev_refutation_only_weakens",
            "alice",
            vec![observe(vec![
                h1(),
                finding("f1", "h1", "dev", "refutes", "bob", None, "-0.05"),
            ])],
        )
        .expect("wait", HOLDOUT_HANDED_OFF),
        Case::new(
            "self_evaluated_holdout_refutation_does_not_retire",
            "alice",
            vec![observe(vec![h1(), holdout("f1", "h1", "refutes", "alice")])],
        )
        .expect("wait", &["add_todo confirm:h1"]),
        Case::new(
            "refuting_evidence_confirms_the_refutation",
            "alice",
            vec![
                observe(vec![h1(), holdout("f1", "h1", "refutes", "alice")]),
                holdout_step("finding:f1"),
                judge(),
            ],
        )
        .expect(
            "replan",
            &[
                "add_todo confirm:h1",
                "raise_obligation research:refuted:h1",
                "supersede confirm:h1",
                "open_gate retire:h1",
            ],
        ),
        Case::new(
            "supported_then_refuted_withdraws_promotion",
            "alice",
            with(
                supported_h1(),
                vec![observe(vec![holdout("f3", "h1", "refutes", "carol")])],
            ),
        )
        .expect(
            "replan",
            &[
                "open_gate promote:h1",
                "add_todo writeup:h1",
                "raise_obligation research:refuted:h1",
                "open_gate retire:h1",
                "withdraw_gate promote:h1",
            ],
        ),
        Case::new(
            "dependency_refuted_replans_the_dependants_owner",
            "bob",
            dependency_refuted(),
        )
        .expect(
            "replan",
            &[
                "add_todo experiment:h1",
                "add_todo experiment:h2",
                "raise_obligation research:refuted:h1",
                "open_gate retire:h1",
                "raise_obligation research:dependency:h2:h1",
            ],
        ),
        Case::new(
            "dependency_refuted_seen_by_the_refuted_lines_owner",
            "alice",
            dependency_refuted(),
        )
        .expect(
            "replan",
            &[
                "add_todo experiment:h1",
                "add_todo experiment:h2",
                "raise_obligation research:refuted:h1",
                "open_gate retire:h1",
                "raise_obligation research:dependency:h2:h1",
            ],
        ),
        Case::new("two_lines_alice_frontier", "alice", two_lines()).expect(
            "continue",
            &["add_todo experiment:h1", "add_todo experiment:h2"],
        ),
        Case::new("two_lines_bob_frontier", "bob", two_lines()).expect(
            "continue",
            &["add_todo experiment:h1", "add_todo experiment:h2"],
        ),
        Case::new("two_lines_carol_owns_nothing", "carol", two_lines()).expect(
            "wait",
            &["add_todo experiment:h1", "add_todo experiment:h2"],
        ),
        Case::new(
            "holdout_done_without_finding_replans",
            "alice",
            with(
                dev_lift_h1(),
                with(complete_held("bob", "holdout:h1", "t1", 1), vec![judge()]),
            ),
        )
        .expect(
            "replan",
            &[
                "add_todo holdout:h1",
                "handoff holdout:h1",
                "raise_obligation research:no-holdout:h1",
            ],
        ),
        Case::new(
            "revised_hypothesis_makes_holdout_evidence_stale",
            "alice",
            with(
                self_evaluated_h1(),
                vec![
                    holdout_step("finding:f2"),
                    judge(),
                    observe(vec![hypothesis("h1", "alice", "", "v2")]),
                ],
            ),
        )
        .expect(
            "replan",
            &[
                "add_todo confirm:h1",
                "supersede confirm:h1",
                "open_gate promote:h1",
                "add_todo writeup:h1",
                "raise_obligation research:unconfirmed:h1",
                "withdraw_gate promote:h1",
            ],
        ),
        Case::new(
            "judging_again_converges",
            "alice",
            with(supported_h1(), vec![judge(), judge()]),
        )
        .expect("ask", &["open_gate promote:h1", "add_todo writeup:h1"]),
        Case::new(
            "malformed_facts_are_problems_not_proposals",
            "alice",
            vec![observe(vec![
                h1(),
                scenario::observation("hypothesis:h2", "research/h2", "v1", &[]).expect("valid"),
                finding("f1", "h1", "DEV", "supports", "alice", None, "0.1"),
                finding("f2", "h1", "holdout", "supports", "bob", None, "nan"),
                finding("f3", "h1", "holdout", "supports", "bob", None, "-0.2"),
                finding("f4", "h7", "holdout", "supports", "bob", None, "0.2"),
            ])],
        )
        .expect("continue", &["add_todo experiment:h1"]),
        Case::new(
            "decision_window_makes_the_gate_overdue_not_expired",
            "alice",
            with(
                supported_h1(),
                vec![ScenarioStep::Advance(Duration::hours(3))],
            ),
        )
        .with_config(ResearchConfig {
            decision_window: Some(Duration::hours(2)),
            ..ResearchConfig::default()
        })
        .expect("ask", &["open_gate promote:h1", "add_todo writeup:h1"]),
        Case::new(
            "configured_decider_answers_not_the_goal_owner",
            "alice",
            with(
                supported_h1(),
                vec![
                    owner_answers("promote:h1", true),
                    answer("pat", "promote:h1", true),
                ],
            ),
        )
        .with_config(ResearchConfig {
            decider: Some(PersonId::new("pat").expect("valid person")),
            ..ResearchConfig::default()
        })
        .expect("continue", &["open_gate promote:h1", "add_todo writeup:h1"]),
    ]
}

#[test]
fn research_scenarios() {
    let cases = cases();
    assert!(cases.len() >= 25, "the table holds {} cases", cases.len());
    for case in cases {
        let capability = Research::new(case.config.clone()).expect("valid config");
        let spec = scenario::spec("research").expect("valid spec");
        let mut scenario = Scenario::new(&capability, &spec)
            .expect("the spec is accepted")
            .for_agent(agent_id(case.agent));
        let transcript = scenario.run(case.steps);
        transcript.assert_case(
            case.name,
            case.decision,
            case.accepted,
            JudgedProposal::label,
        );
        let snapshot = serde_json::json!({
            "agent": case.agent,
            "transcript": transcript,
            "ledger": ledger(scenario.state()),
            "evidence": scenario.state().evidence.values().collect::<Vec<_>>(),
        });
        insta::assert_json_snapshot!(case.name, snapshot);
        let ledger = ledger(scenario.state());
        let agent = agent_id(case.agent);
        assert!(
            ledger.lines_of(&agent).all(|h| h.owner() == &agent),
            "case {}",
            case.name
        );
    }
}

#[test]
fn each_agent_sees_its_own_lines() {
    let capability = Research::new(ResearchConfig::default()).expect("valid config");
    let spec = scenario::spec("research").expect("valid spec");
    let mut scenario = Scenario::new(&capability, &spec).expect("the spec is accepted");
    scenario.run(dependency_refuted());
    let ledger = ledger(scenario.state());
    let lines = |agent: &str| -> Vec<(String, String)> {
        ledger
            .lines_of(&agent_id(agent))
            .map(|h| (h.facts.id.clone(), h.status.name().to_owned()))
            .collect()
    };
    assert_eq!(lines("alice"), [("h1".to_owned(), "refuted".to_owned())]);
    assert_eq!(lines("bob"), [("h2".to_owned(), "weakened".to_owned())]);
    assert!(lines("carol").is_empty());
}

/// Runs `steps` for `agent` with the default configuration and returns the scenario.
fn run_for<'c>(capability: &'c Research, agent: &str, steps: Vec<Step>) -> Scenario<'c, Research> {
    let spec = scenario::spec("research").expect("valid spec");
    let mut scenario = Scenario::new(capability, &spec)
        .expect("the spec is accepted")
        .for_agent(agent_id(agent));
    scenario.run(steps);
    scenario
}

#[test]
fn the_owner_never_receives_the_holdout_and_the_evaluator_gets_the_note() {
    let capability = Research::new(ResearchConfig::default()).expect("valid config");
    let scenario = run_for(&capability, "bob", dev_lift_h1());
    let state = scenario.state();
    let holdout = &state.todos[&TodoId::new("holdout:h1").expect("valid id")];
    assert!(holdout.excluded_agents.contains(&agent_id("alice")));
    assert_eq!(holdout.assignee, Some(agent_id("bob")));
    assert_eq!(
        holdout.live_lease(scenario.now()).map(|l| &l.holder),
        Some(&agent_id("bob"))
    );
    let for_alice = decide(state, &agent_id("alice"), scenario.now());
    assert_eq!(for_alice.kind(), "wait", "{for_alice:?}");
    let Decision::Continue(next) = decide(state, &agent_id("bob"), scenario.now()) else {
        panic!("the evaluator continues");
    };
    assert_eq!(next.todo.as_str(), "holdout:h1");
    assert!(matches!(next.lease, LeaseStep::Held { epoch: 1, .. }));
    let note = next.handoff.expect("the decision carries the handoff note");
    assert!(
        note.next_action.contains("finding:f1"),
        "{}",
        note.next_action
    );
    assert!(note.next_action.contains("alice may not run it"));
    assert!(note.stop_condition.contains("holdout finding on h1"));
}

#[test]
fn the_owners_own_holdout_evidence_is_a_typed_problem() {
    let capability = Research::new(ResearchConfig::default()).expect("valid config");
    let case = cases()
        .into_iter()
        .find(|c| c.name == "owners_own_holdout_evidence_is_ignored")
        .expect("the case exists");
    let scenario = run_for(&capability, "alice", case.steps);
    let ledger = ledger(scenario.state());
    assert_eq!(ledger.status("h1"), Some(Status::Active));
    assert!(
        ledger.problems.iter().any(|p| matches!(
            &p.error,
            FactError::OwnHoldoutEvidence { by, role: "owns the hypothesis", .. } if by == "alice"
        )),
        "{:?}",
        ledger.problems
    );
}

#[test]
fn a_handed_over_line_keeps_its_lineage() {
    let capability = Research::new(ResearchConfig::default()).expect("valid config");
    let case = cases()
        .into_iter()
        .find(|c| c.name == "handed_over_line_keeps_its_lineage")
        .expect("the case exists");
    let scenario = run_for(&capability, "bob", case.steps);
    let state = scenario.state();
    let ledger = ledger(state);
    let h1 = ledger.get("h1").expect("h1 is declared");
    assert_eq!(h1.status, Status::Supported);
    let findings: Vec<&str> = h1.findings.iter().map(|f| f.facts.id.as_str()).collect();
    assert_eq!(findings, ["f1", "f2"]);
    let evidence = EvidenceId::new("holdout:f2").expect("valid id");
    assert!(state.freshness(&evidence, scenario.now()).is_fresh());
    let Decision::Continue(next) = decide(state, &agent_id("bob"), scenario.now()) else {
        panic!("the receiver continues the line");
    };
    assert_eq!(next.todo.as_str(), "writeup:h1");
    let note = next.handoff.expect("the decision carries the handoff note");
    assert_eq!(note.evidence, [evidence]);
    assert!(note.next_action.contains("taken over from alice"));
}
