//! `decide` as data: each scenario builds a goal through commands only, then snapshots the
//! decision of one or more agents as JSON.
//!
//! `check!(world, "agent" => "kind", …)` asserts each decision's kind, checks that a `continue`
//! is legal right now (the claim or the turn it names is accepted by the kernel), and snapshots
//! the decisions. Stories that decide several times snapshot the list of steps.

mod world;

use loopx_kernel::CheckId;
use loopx_kernel::{
    Amendment, Amounts, BudgetExhaustion, Command, Continuation, Criterion, CriterionId, Decision,
    Duration, GateAnswer, GrantedAction, HandoffNote, LeaseStep, Limits, ObligationId,
    ObligationKind, PlanChange, Priority, ResumeCondition, Subject, Transition,
};
use world::{
    EvidenceExt, GateExt, TodoExt, World, ag, agent, capability, criterion, eid, ev, gate, gid,
    key, obs, owner, tid, todo, turn, ws,
};

/// Asserts that a `continue` decision names a step the kernel accepts now: the claim of an
/// offered todo, or the turn on a held lease. `decide` and command validation share their rules,
/// so they must never disagree.
fn assert_legal(w: &World, who: &str, decision: &Decision) {
    let Decision::Continue(assignment) = decision else {
        return;
    };
    let command = match &assignment.lease {
        LeaseStep::Claim => Command::Claim {
            todo: assignment.todo.clone(),
            ttl: None,
            workspace: None,
            grant_reason: None,
        },
        LeaseStep::Held { epoch, .. } => Command::BeginTurn {
            todo: assignment.todo.clone(),
            epoch: *epoch,
            turn: turn("probe"),
            reserve: None,
        },
        LeaseStep::Resume { .. } => return,
    };
    if let Err(refusal) = loopx_kernel::execute(Some(&w.goal), &ag(who), w.now, &command) {
        panic!(
            "decide told `{who}` to continue with `{}` but `{}` is refused: {refusal}",
            assignment.todo,
            command.name()
        );
    }
}

macro_rules! check {
    ($world:expr, $($who:literal => $kind:literal),+ $(,)?) => {{
        let world = &$world;
        let mut seen = Vec::new();
        $(
            let decision = world.decide($who);
            assert_eq!(decision.kind(), $kind, "decision for `{}`: {decision:#?}", $who);
            assert_legal(world, $who, &decision);
            seen.push(world.seen($who));
        )+
        let value = if seen.len() == 1 {
            seen.remove(0)
        } else {
            serde_json::Value::Array(seen)
        };
        insta::assert_json_snapshot!(value);
    }};
}

/// One step of a story: the decision's kind is asserted, the decision recorded.
fn step(w: &World, story: &mut Vec<serde_json::Value>, who: &str, kind: &str) {
    let decision = w.decide(who);
    assert_eq!(
        decision.kind(),
        kind,
        "at {} for `{who}`: {decision:#?}",
        w.now
    );
    assert_legal(w, who, &decision);
    story.push(w.seen(who));
}

fn met_criteria() -> Vec<Criterion> {
    vec![
        criterion(
            "text-unchanged",
            "default text output unchanged",
            "tests.text_output",
        ),
        criterion(
            "json-schema-tested",
            "JSON schema has tests",
            "tests.json_schema",
        ),
    ]
}

fn both_criteria_at(w: &mut World, revision: &str) {
    w.evidence(ev(
        &format!("text@{revision}"),
        "tests.text_output",
        revision,
    ));
    w.evidence(ev(
        &format!("json@{revision}"),
        "tests.json_schema",
        revision,
    ));
}

fn closure(w: &mut World) {
    w.run(
        &ag("a"),
        Command::DeclareClosure {
            reason: "both criteria shown at the head".into(),
        },
    );
}

fn obligation(w: &mut World, id: &str, kind: ObligationKind, owner: Option<&str>) {
    w.run(
        &capability(),
        Command::RaiseObligation {
            id: ObligationId::new(id).unwrap(),
            kind,
            detail: format!("{id}: look at the plan again"),
            owner: owner.map(agent),
        },
    );
}

fn defer(w: &mut World, who: &str, todo: &str, until: ResumeCondition) {
    w.run(
        &ag(who),
        Command::Defer {
            todo: tid(todo),
            until,
            grant_reason: None,
        },
    );
}

// ----- the lease step --------------------------------------------------------------------------

#[test]
fn fresh_todo_is_offered_to_claim() {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));
    check!(w, "a" => "continue");
}

#[test]
fn held_lease_continues_with_its_epoch() {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));
    w.claim("a", "edit");
    w.at("10:05");
    check!(w, "a" => "continue");
}

#[test]
fn turn_in_flight_resumes() {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));
    w.claim("a", "edit");
    w.begin("a", "edit", "t1");
    check!(w, "a" => "continue");
}

/// A begun turn must be settled before the agent starts anything else, even more urgent work
/// it also holds.
#[test]
fn turn_in_flight_comes_before_other_held_leases() {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));
    w.add(todo("hotfix", "fix the crash on empty input").priority(Priority::P0));
    w.claim("a", "edit");
    w.begin("a", "edit", "t1");
    w.claim("a", "hotfix");
    check!(w, "a" => "continue");
}

#[test]
fn more_urgent_todo_is_offered_first() {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));
    w.add(todo("hotfix", "fix the crash on empty input").priority(Priority::P0));
    check!(w, "a" => "continue");
}

#[test]
fn expired_lease_without_turn_is_offered_to_others() {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));
    w.claim("b", "edit");
    w.at("10:20");
    check!(w, "a" => "continue");
}

#[test]
fn unregistered_agent_is_told_to_register() {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));
    check!(w, "z" => "repair");
}

// ----- waits -----------------------------------------------------------------------------------

#[test]
fn lease_held_by_another_agent_waits_until_it_expires() {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));
    w.claim("b", "edit");
    check!(w, "a" => "wait");
}

#[test]
fn todo_assigned_to_another_agent_waits() {
    let mut w = World::new();
    w.add(todo("bench", "benchmark the JSON writer").assigned("b"));
    check!(w, "a" => "wait", "b" => "continue");
}

#[test]
fn unfinished_dependencies_wait() {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));
    w.add(todo("docs", "document --format json").after(&["edit"]));
    w.claim("b", "edit");
    check!(w, "a" => "wait");
}

#[test]
fn overlapping_write_scope_waits_for_the_other_lease() {
    let mut w = World::new();
    w.report("a", ws("/src/cli", "/src/cli/.git"));
    w.report("b", ws("/src/cli-render", "/src/cli/.git"));
    w.add(todo("format", "add the format flag").writes(&["src"]));
    w.add(todo("render", "render JSON").writes(&["src/render"]));
    w.claim("a", "format");
    check!(w, "b" => "wait");
}

#[test]
fn todo_budget_spent_waits() {
    let mut w = World::new();
    w.add(todo("tune", "tune the JSON writer").turn_budget(1));
    w.turn("a", "tune", |s| s.transition = Transition::KeepOpen);
    check!(w, "a" => "wait");
}

/// `begin_turn` always reserves one turn, so a todo's own turn budget is checked for one turn
/// even when the policy's default reservation names none.
#[test]
fn todo_budget_counts_the_turn_even_when_the_policy_reserves_none() {
    let mut w = World::with(|s| s.policy.default_reservation = Amounts::ZERO);
    w.add(todo("tune", "tune the JSON writer").turn_budget(1));
    w.turn("a", "tune", |s| s.transition = Transition::KeepOpen);
    check!(w, "a" => "wait");
}

/// Only eight reasons are listed, but the wake time accounts for all of them: the earliest
/// expiry belongs to the tenth todo.
#[test]
fn wait_lists_eight_reasons_but_wakes_for_all() {
    let mut w = World::new();
    for i in 1..=10 {
        let id = format!("t{i:02}");
        w.add(todo(&id, "parallel chunk"));
        w.claim_for("b", &id, Some(Duration::minutes(60 - i)));
    }
    check!(w, "a" => "wait");
}

// ----- questions -------------------------------------------------------------------------------

/// The seed chapter's story: two acceptance criteria, evidence at `git:abc123`, a todo held by
/// the maintainer's naming question, the next wake at its deadline, then the answer and the end.
#[test]
fn seed_story() {
    let mut w = World::with(|s| {
        s.objective = "add --format json to the CLI without changing the default output".into();
        s.criteria = met_criteria();
        s.agents = [agent("a")].into();
        s.budget = Limits {
            turns: Some(20),
            ..Limits::UNLIMITED
        };
    });
    let mut story = Vec::new();
    w.at("10:02");
    w.add(todo("edit", "change the output layer and add tests"));
    w.add(todo("contract", "publish the JSON contract").needs("api:error_code"));
    step(&w, &mut story, "a", "continue");

    w.at("10:03");
    w.claim("a", "edit");
    w.begin("a", "edit", "t1");
    step(&w, &mut story, "a", "continue");

    w.at("10:11");
    w.settle("a", "edit", "t1", |s| {
        s.evidence = vec![
            ev("ev-text", "tests.text_output", "git:abc123"),
            ev("ev-json", "tests.json_schema", "git:abc123"),
        ];
    });
    w.gate(
        gate("error-code", "is error_code acceptable as a stable field?")
            .on_decision("api:error_code")
            .due("30 17:00")
            .keep_asking(),
    );
    step(&w, &mut story, "a", "ask");

    // The window closes; the next executor reads the same state and gets the same answer.
    w.at("30 09:30");
    step(&w, &mut story, "a", "ask");
    w.answer("error-code", "yes, keep error_code");
    step(&w, &mut story, "a", "continue");

    w.turn("a", "contract", |s| {
        s.transition = Transition::Complete {
            continuation: Continuation::NoFollowUp,
        };
    });
    step(&w, &mut story, "a", "terminal");
    insta::assert_json_snapshot!(story);
}

#[test]
fn gate_blocks_one_todo_while_independent_work_continues() {
    let mut w = World::new();
    w.add(todo("docs", "document the error_code field"));
    w.add(todo("bench", "benchmark the JSON writer"));
    w.gate(gate("naming", "is error_code acceptable as a stable field?").on_todos(&["docs"]));
    check!(w, "a" => "continue");
}

#[test]
fn gate_question_once_independent_work_is_taken() {
    let mut w = World::new();
    w.add(todo("docs", "document the error_code field"));
    w.add(todo("bench", "benchmark the JSON writer"));
    w.gate(gate("naming", "is error_code acceptable as a stable field?").on_todos(&["docs"]));
    w.claim("a", "bench");
    check!(w, "b" => "ask");
}

#[test]
fn gates_are_asked_most_urgent_first() {
    let mut w = World::new();
    w.add(todo("x", "rename the flag"));
    w.add(todo("y", "drop the legacy output"));
    w.add(todo("z", "publish the schema"));
    w.gate(
        gate("late", "may the flag be renamed?")
            .on_todos(&["x"])
            .due("18:00"),
    );
    w.gate(
        gate("soon", "may the legacy output go?")
            .on_todos(&["y"])
            .due("12:00"),
    );
    w.gate(gate("undated", "where is the schema published?").on_todos(&["z"]));
    check!(w, "a" => "ask");
}

#[test]
fn gate_keep_asking_past_its_deadline_asks_overdue() {
    let mut w = World::new();
    w.add(todo("docs", "document the error_code field"));
    w.gate(
        gate("naming", "is error_code acceptable as a stable field?")
            .on_todos(&["docs"])
            .due("12:00")
            .keep_asking(),
    );
    w.at("12:30");
    check!(w, "a" => "ask");
}

#[test]
fn pending_gate_is_asked_when_nothing_else_is_left() {
    let mut w = World::new();
    w.gate(gate("release", "may this ship in 2.4?").on_decision("release:date"));
    check!(w, "a" => "ask");
}

#[test]
fn exhausted_budget_asks_the_owner() {
    let mut w = World::with(|s| {
        s.budget = Limits {
            turns: Some(1),
            ..Limits::UNLIMITED
        };
    });
    w.add(todo("edit", "change the output layer"));
    w.add(todo("docs", "document --format json"));
    w.finish("a", "edit");
    check!(w, "a" => "ask");
}

#[test]
fn exhausted_budget_waits_under_the_wait_policy() {
    let mut w = World::with(|s| {
        s.budget = Limits {
            tokens: Some(10_000),
            ..Limits::UNLIMITED
        };
        s.policy.on_budget_exhausted = BudgetExhaustion::Wait;
        s.policy.default_reservation = Amounts {
            tokens: 4_000,
            ..Amounts::ONE_TURN
        };
    });
    w.add(todo("edit", "change the output layer"));
    w.add(todo("docs", "document --format json"));
    w.turn("a", "edit", |s| {
        s.usage = Amounts {
            tokens: 7_000,
            ..Amounts::ONE_TURN
        };
    });
    check!(w, "a" => "wait");
}

#[test]
fn raising_the_budget_resumes_work() {
    let mut w = World::with(|s| {
        s.budget = Limits {
            turns: Some(1),
            ..Limits::UNLIMITED
        };
    });
    w.add(todo("edit", "change the output layer"));
    w.add(todo("docs", "document --format json"));
    w.finish("a", "edit");
    let mut story = Vec::new();
    step(&w, &mut story, "a", "ask");
    w.amend(vec![Amendment::SetBudget {
        limits: Limits {
            turns: Some(2),
            ..Limits::UNLIMITED
        },
    }]);
    step(&w, &mut story, "a", "continue");
    insta::assert_json_snapshot!(story);
}

/// The question is asked, but the wake time is the earlier lease expiry: at 10:15 the other
/// todo may become free for this agent, and no store event announces that.
#[test]
fn ask_wakes_when_a_waited_lease_expires() {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));
    w.add(todo("docs", "document the error_code field"));
    w.claim("b", "edit");
    w.gate(
        gate("naming", "is error_code acceptable as a stable field?")
            .on_todos(&["docs"])
            .due("30 17:00"),
    );
    check!(w, "a" => "ask");
}

// ----- replans ---------------------------------------------------------------------------------

#[test]
fn expired_gate_refuses_the_route() {
    let mut w = World::new();
    w.add(todo("docs", "document the error_code field"));
    w.gate(
        gate("naming", "is error_code acceptable as a stable field?")
            .on_todos(&["docs"])
            .due("12:00"),
    );
    w.at("12:30");
    check!(w, "a" => "replan");
}

#[test]
fn rejected_gate_refuses_the_route() {
    let mut w = World::new();
    w.add(todo("docs", "document the error_code field"));
    w.gate(gate("naming", "is error_code acceptable as a stable field?").on_todos(&["docs"]));
    w.run(
        &owner(),
        Command::AnswerGate {
            gate: gid("naming"),
            answer: GateAnswer::Reject {
                reason: "call it `code`".into(),
            },
        },
    );
    check!(w, "a" => "replan");
}

#[test]
fn withdrawn_gate_lets_covered_work_run() {
    let mut w = World::new();
    w.add(todo("docs", "document the error_code field"));
    w.gate(gate("naming", "is error_code acceptable as a stable field?").on_todos(&["docs"]));
    w.run(
        &ag("a"),
        Command::WithdrawGate {
            gate: gid("naming"),
            reason: "the field was dropped".into(),
        },
    );
    check!(w, "a" => "continue");
}

#[test]
fn blocked_todo_needs_a_replan() {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));
    w.run(
        &ag("a"),
        Command::Block {
            todo: tid("edit"),
            reason: "serde_json pinned below 1.0 by a dependency".into(),
            grant_reason: None,
        },
    );
    check!(w, "a" => "replan");
}

#[test]
fn superseded_dependency_needs_a_replan() {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));
    w.add(todo("docs", "document --format json").after(&["edit"]));
    w.run(
        &owner(),
        Command::Supersede {
            todo: tid("edit"),
            reason: "the output layer is being rewritten".into(),
            replacement: None,
            grant_reason: None,
        },
    );
    check!(w, "a" => "replan");
}

#[test]
fn replan_obligation_comes_before_new_work() {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));
    obligation(&mut w, "rethink", ObligationKind::Replan, None);
    check!(w, "a" => "replan");
}

#[test]
fn obligation_of_another_agent_does_not_stop_this_one() {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));
    obligation(&mut w, "rethink-b", ObligationKind::Replan, Some("b"));
    check!(w, "a" => "continue", "b" => "replan");
}

#[test]
fn discharged_obligation_frees_the_agent() {
    let mut w = World::new();
    obligation(&mut w, "rethink", ObligationKind::Replan, None);
    w.run(
        &ag("a"),
        Command::Discharge {
            obligation: ObligationId::new("rethink").unwrap(),
            changes: vec![PlanChange::AddTodo {
                todo: todo("split", "split the writer from the formatter"),
            }],
        },
    );
    check!(w, "a" => "continue");
}

#[test]
fn acceptance_gap_without_evidence() {
    let mut w = World::with(|s| s.criteria = met_criteria());
    closure(&mut w);
    check!(w, "a" => "replan");
}

#[test]
fn acceptance_gap_on_failing_evidence() {
    let mut w = World::with(|s| s.criteria = met_criteria());
    w.evidence(ev("text-1", "tests.text_output", "git:abc123"));
    w.evidence(ev("json-1", "tests.json_schema", "git:abc123").failing());
    closure(&mut w);
    check!(w, "a" => "replan");
}

#[test]
fn closure_intent_missing_once_everything_is_met() {
    let mut w = World::with(|s| s.criteria = met_criteria());
    both_criteria_at(&mut w, "git:abc123");
    check!(w, "a" => "replan");
}

#[test]
fn newer_revision_unmeets_a_criterion() {
    let mut w = World::with(|s| s.criteria = met_criteria());
    let mut story = Vec::new();
    w.at("10:11");
    both_criteria_at(&mut w, "git:abc123");
    closure(&mut w);
    step(&w, &mut story, "a", "terminal");
    w.at("10:20");
    w.observe(obs("head:acme/cli", "git:def456", "def456"));
    step(&w, &mut story, "a", "replan");
    w.at("10:40");
    both_criteria_at(&mut w, "git:def456");
    step(&w, &mut story, "a", "terminal");
    insta::assert_json_snapshot!(story);
}

/// Evidence observed before the subject's head was recorded proves nothing about the head,
/// even when it is recorded later.
#[test]
fn late_evidence_for_an_old_revision_does_not_count() {
    let mut w = World::with(|s| s.criteria = met_criteria());
    w.at("10:20");
    w.observe(obs("head:acme/cli", "git:def456", "def456"));
    w.at("10:30");
    w.evidence(ev("text-old", "tests.text_output", "git:abc123").seen_at("10:11"));
    w.evidence(ev("json-new", "tests.json_schema", "git:def456"));
    closure(&mut w);
    check!(w, "a" => "replan");
}

#[test]
fn evidence_past_its_ttl_unmeets_a_criterion() {
    let mut w = World::with(|s| s.criteria = met_criteria());
    let mut story = Vec::new();
    w.at("10:11");
    w.evidence(ev("text", "tests.text_output", "git:abc123").ttl(Duration::hours(1)));
    w.evidence(ev("json", "tests.json_schema", "git:abc123"));
    closure(&mut w);
    w.at("11:10");
    step(&w, &mut story, "a", "terminal");
    w.at("11:11");
    step(&w, &mut story, "a", "replan");
    insta::assert_json_snapshot!(story);
}

fn bench_criterion() -> Criterion {
    Criterion {
        id: CriterionId::new("bench-reported").unwrap(),
        text: "the JSON writer benchmark is reported".into(),
        check: CheckId::new("bench.report").unwrap(),
        subject: Subject::new("report:bench").unwrap(),
    }
}

/// The report is about another subject; only its lineage ties it to the repository head.
#[test]
fn stale_input_makes_derived_evidence_stale() {
    let mut w = World::with(|s| s.criteria = vec![bench_criterion()]);
    let mut story = Vec::new();
    w.at("10:11");
    w.evidence(ev("unit", "tests.unit", "git:abc123"));
    w.evidence(
        ev("bench", "bench.report", "bench:r1")
            .about("report:bench")
            .derived_from(&["unit"]),
    );
    closure(&mut w);
    step(&w, &mut story, "a", "terminal");
    w.at("10:20");
    w.observe(obs("head:acme/cli", "git:def456", "def456"));
    step(&w, &mut story, "a", "replan");
    insta::assert_json_snapshot!(story);
}

#[test]
fn changed_observation_makes_derived_evidence_stale() {
    let mut w = World::with(|s| s.criteria = vec![bench_criterion()]);
    let mut story = Vec::new();
    w.at("10:11");
    w.observe(obs("bench:runner", "git:abc123", "quiet"));
    w.evidence(
        ev("bench", "bench.report", "bench:r1")
            .about("report:bench")
            .reads("bench:runner", "quiet"),
    );
    closure(&mut w);
    step(&w, &mut story, "a", "terminal");
    w.at("10:20");
    w.observe(obs("bench:runner", "git:abc123", "noisy"));
    step(&w, &mut story, "a", "replan");
    insta::assert_json_snapshot!(story);
}

// ----- repairs ---------------------------------------------------------------------------------

#[test]
fn repair_obligation_comes_before_replan_and_work() {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));
    obligation(&mut w, "rethink", ObligationKind::Replan, None);
    obligation(&mut w, "fix-ledger", ObligationKind::Repair, None);
    check!(w, "a" => "repair");
}

#[test]
fn decision_without_a_gate_needs_a_repair() {
    let mut w = World::new();
    w.add(todo("contract", "publish the JSON contract").needs("api:error_code"));
    check!(w, "a" => "repair");
}

/// The holder must read back what happened; another agent without a take-over grant waits.
#[test]
fn lease_expired_mid_turn_on_non_idempotent_work_is_outcome_unknown() {
    let mut w = World::new();
    w.add(todo("publish", "publish the release notes"));
    w.claim("a", "publish");
    w.begin("a", "publish", "t1");
    w.at("10:20");
    check!(w, "a" => "repair", "b" => "wait");
}

#[test]
fn take_over_grant_lets_another_agent_repair_an_unknown_outcome() {
    let mut w = World::with(|s| {
        s.grants
            .insert(agent("b"), [GrantedAction::TakeOver].into());
    });
    w.add(todo("publish", "publish the release notes"));
    w.claim("a", "publish");
    w.begin("a", "publish", "t1");
    w.at("10:20");
    check!(w, "b" => "repair");
}

#[test]
fn lease_expired_mid_turn_on_idempotent_work_is_offered_for_takeover() {
    let mut w = World::new();
    w.add(todo("regen", "regenerate the schema fixtures").idempotent());
    w.claim("a", "regen");
    w.begin("a", "regen", "t1");
    w.at("10:20");
    check!(w, "b" => "continue");
}

#[test]
fn unknown_outcome_resolved_absent_reopens_the_todo() {
    let mut w = World::new();
    w.add(todo("publish", "publish the release notes"));
    w.claim("a", "publish");
    w.begin("a", "publish", "t1");
    w.at("10:20");
    w.run(
        &ag("a"),
        Command::ResolveOutcome {
            todo: tid("publish"),
            turn: turn("t1"),
            resolution: loopx_kernel::OutcomeResolution::Absent {
                note: "no release notes on the release page".into(),
            },
            grant_reason: None,
        },
    );
    check!(w, "a" => "continue");
}

#[test]
fn shared_checkout_is_repaired_not_assigned() {
    let mut w = World::new();
    w.report("a", ws("/src/cli", "/src/cli/.git"));
    w.report("b", ws("/src/cli", "/src/cli/.git"));
    w.add(todo("format", "add the format flag").writes(&["src/format"]));
    w.add(todo("docs", "document --format json").writes(&["docs"]));
    w.claim("a", "format");
    check!(w, "b" => "repair");
}

#[test]
fn independent_worktrees_with_disjoint_scopes_both_continue() {
    let mut w = World::new();
    w.report("a", ws("/src/cli", "/src/cli/.git"));
    w.report("b", ws("/src/cli-docs", "/src/cli/.git"));
    w.add(todo("format", "add the format flag").writes(&["src/format"]));
    w.add(todo("docs", "document --format json").writes(&["docs"]));
    w.claim("a", "format");
    check!(w, "a" => "continue", "b" => "continue");
}

// ----- several agents --------------------------------------------------------------------------

/// The handoff moves the lease under a new epoch: the old holder's late settlement is fenced
/// off, and the receiver continues from the note alone.
#[test]
fn handoff_mid_turn_fences_the_old_holder() {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));
    w.claim("a", "edit");
    w.begin("a", "edit", "t1");
    w.evidence(ev("unit", "tests.unit", "git:abc123"));
    w.at("10:05");
    w.run(
        &ag("a"),
        Command::Handoff {
            todo: tid("edit"),
            epoch: 1,
            to: agent("b"),
            note: HandoffNote {
                next_action: "add the JSON schema tests".into(),
                stop_condition: "tests.json_schema passes at the head".into(),
                evidence: vec![eid("unit")],
            },
            grant_reason: None,
        },
    );
    w.at("10:06");
    let late = w.refuse(
        &ag("a"),
        Command::SettleTurn(world::settlement("edit", 1, "t1")),
    );
    assert_eq!(late.code(), "stale_lease_epoch");
    let seen = serde_json::json!({
        "old_holder_settlement": { "code": late.code(), "message": late.to_string() },
        "decisions": [w.seen("b"), w.seen("a")],
    });
    assert_eq!(w.decide("b").kind(), "continue");
    assert_legal(&w, "b", &w.decide("b"));
    insta::assert_json_snapshot!(seen);
}

/// Work no live lease holds is handed over too: a capability hands the todo it planned for
/// an agent whose lease expired mid-turn (idempotent work, so nothing is lost) to another agent,
/// who becomes its assignee and holder under a new epoch and continues from the note; the old
/// holder's late settlement is fenced off.
#[test]
fn work_whose_lease_expired_is_handed_over_under_a_new_epoch() {
    let mut w = World::new();
    w.run(
        &world::capability(),
        Command::AddTodo {
            todo: todo("edit", "change the output layer")
                .assigned("a")
                .idempotent(),
        },
    );
    w.claim("a", "edit");
    w.begin("a", "edit", "t1");
    w.evidence(ev("unit", "tests.unit", "git:abc123"));
    w.at("10:20");
    let events = w.run(
        &world::capability(),
        Command::Handoff {
            todo: tid("edit"),
            epoch: 1,
            to: agent("b"),
            note: HandoffNote {
                next_action: "run the JSON schema tests again".into(),
                stop_condition: "tests.json_schema passes at the head".into(),
                evidence: vec![eid("unit")],
            },
            grant_reason: None,
        },
    );
    let names: Vec<&str> = events.iter().map(|e| e.event.name()).collect();
    assert_eq!(names, ["todo_reassigned", "lease_handed_off"]);
    let edit = &w.goal.todos[&tid("edit")];
    assert_eq!(edit.assignee.as_ref(), Some(&agent("b")));
    assert_eq!(
        edit.lease.as_ref().map(|l| (&l.holder, l.epoch)),
        Some((&agent("b"), 2))
    );
    assert_eq!(w.goal.ledger.reserved, loopx_kernel::Amounts::ZERO);
    let late = w.refuse(
        &ag("a"),
        Command::SettleTurn(world::settlement("edit", 1, "t1")),
    );
    assert_eq!(late.code(), "stale_lease_epoch");
    let Decision::Continue(assignment) = w.decide("b") else {
        panic!("the receiver continues, not {:?}", w.decide("b"));
    };
    assert_eq!(
        assignment.handoff.as_ref().map(|n| n.evidence.clone()),
        Some(vec![eid("unit")])
    );
    assert_legal(&w, "b", &w.decide("b"));
    insta::assert_json_snapshot!(serde_json::json!({
        "events": events.iter().map(|e| &e.event).collect::<Vec<_>>(),
        "decisions": [w.seen("b"), w.seen("a")],
    }));
}

/// Handoffs are a fixed point: passing the lease back and forth without new evidence changes
/// who holds it (under a new epoch each time) and nothing else — objective, criteria, gates,
/// budget, evidence, the other todos and every other agent's decision stay exactly as they were.
#[test]
fn repeated_handoffs_without_new_evidence_change_nothing_else() {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));
    w.add(todo("docs", "document the JSON output").needs("api:error_code"));
    w.gate(
        gate("naming", "is error_code acceptable as a stable field?").on_decision("api:error_code"),
    );
    w.evidence(ev("unit", "tests.unit", "git:abc123"));
    w.claim("a", "edit");
    let note = HandoffNote {
        next_action: "add the JSON schema tests".into(),
        stop_condition: "tests.json_schema passes at the head".into(),
        evidence: vec![eid("unit")],
    };
    let hand = |w: &mut World, from: &str, to: &str| {
        let epoch = w.epoch("edit");
        w.run(
            &ag(from),
            Command::Handoff {
                todo: tid("edit"),
                epoch,
                to: agent(to),
                note: note.clone(),
                grant_reason: None,
            },
        );
    };
    hand(&mut w, "a", "b");
    let once = w.goal.clone();
    let seen_once = ["a", "b", "c"].map(|who| w.decide(who));
    for (from, to) in [("b", "a"), ("a", "b"), ("b", "a"), ("a", "b")] {
        hand(&mut w, from, to);
    }
    let again = &w.goal;
    // Only the lease moved: same holder as after the first handoff, four epochs later.
    let (first, last) = (&once.todos[&tid("edit")], &again.todos[&tid("edit")]);
    assert_eq!(last.last_epoch, first.last_epoch + 4);
    assert_eq!(
        last.lease.as_ref().map(|l| &l.holder),
        first.lease.as_ref().map(|l| &l.holder)
    );
    assert_eq!(last.handoff, first.handoff);
    assert_eq!(again.spec, once.spec);
    assert_eq!(again.gates, once.gates);
    assert_eq!(again.evidence, once.evidence);
    assert_eq!(again.ledger, once.ledger);
    assert_eq!(again.todos[&tid("docs")], once.todos[&tid("docs")]);
    let seen_again = ["a", "b", "c"].map(|who| w.decide(who));
    for (before, after) in seen_once.iter().zip(&seen_again) {
        let strip = |d: &Decision| match d {
            Decision::Continue(a) => {
                let mut a = a.clone();
                a.lease = LeaseStep::Claim; // the epoch is the one thing a handoff changes
                Decision::Continue(a)
            }
            other => other.clone(),
        };
        assert_eq!(strip(before), strip(after));
    }
}

#[test]
fn review_is_never_offered_to_its_author() {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));
    w.finish("a", "edit");
    w.add(todo("review-edit", "review the output layer change").review_of("edit"));
    check!(w, "a" => "wait", "b" => "continue");
}

/// The author is only known once the reviewed todo is done; a review planned up front must
/// still never reach its author.
#[test]
fn review_planned_before_the_work_still_skips_its_author() {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));
    w.add(
        todo("review-edit", "review the output layer change")
            .review_of("edit")
            .after(&["edit"]),
    );
    w.finish("a", "edit");
    check!(w, "a" => "wait", "b" => "continue");
}

#[test]
fn excluded_agent_is_never_offered_the_todo() {
    let mut w = World::new();
    w.add(todo("bench", "benchmark the JSON writer").excluding("b"));
    check!(w, "a" => "continue", "b" => "wait");
}

#[test]
fn successor_named_for_an_agent_goes_to_that_agent() {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));
    w.turn("a", "edit", |s| {
        s.transition = Transition::Complete {
            continuation: Continuation::Successors(vec![
                todo("verify", "verify the JSON output on Windows").assigned("b"),
            ]),
        };
    });
    check!(w, "a" => "wait", "b" => "continue");
}

// ----- monitors --------------------------------------------------------------------------------

fn ci_monitor() -> loopx_kernel::NewTodo {
    todo("watch-ci", "watch CI on the pull request")
        .monitor("ci:acme/cli#12", Duration::minutes(30))
}

fn poll(w: &mut World, fingerprint: &str) {
    let observation = obs("ci:acme/cli#12", "git:abc123", fingerprint);
    w.turn("a", "watch-ci", |s| {
        s.transition = Transition::KeepOpen;
        s.observations = vec![observation];
        s.usage = Amounts::ZERO;
    });
}

#[test]
fn monitor_is_due_when_added() {
    let mut w = World::new();
    w.add(ci_monitor());
    check!(w, "a" => "continue");
}

#[test]
fn monitor_not_due_waits_until_due() {
    let mut w = World::new();
    w.add(ci_monitor());
    poll(&mut w, "pending");
    w.at("10:10");
    check!(w, "a" => "wait");
}

#[test]
fn monitor_due_again_continues() {
    let mut w = World::new();
    w.add(ci_monitor());
    poll(&mut w, "pending");
    w.at("10:30");
    check!(w, "a" => "continue");
}

#[test]
fn monitor_without_change_raises_a_replan_obligation() {
    let mut w = World::new();
    w.add(ci_monitor());
    poll(&mut w, "pending");
    for clock in ["10:30", "11:00", "11:30"] {
        w.at(clock);
        poll(&mut w, "pending");
    }
    w.at("11:35");
    check!(w, "a" => "replan", "b" => "wait");
}

// ----- deferred work ---------------------------------------------------------------------------

#[test]
fn deferred_until_a_time() {
    let mut w = World::new();
    let mut story = Vec::new();
    w.add(todo("retry", "retry the flaky upload"));
    defer(
        &mut w,
        "a",
        "retry",
        ResumeCondition::At {
            at: world::ts("12:00"),
        },
    );
    step(&w, &mut story, "a", "wait");
    w.at("12:00");
    step(&w, &mut story, "a", "continue");
    insta::assert_json_snapshot!(story);
}

#[test]
fn deferred_until_a_todo_is_done() {
    let mut w = World::new();
    let mut story = Vec::new();
    w.add(todo("release", "cut the release"));
    w.add(todo("notes", "write the release notes"));
    w.claim("b", "release");
    defer(
        &mut w,
        "a",
        "notes",
        ResumeCondition::TodoDone {
            todo: tid("release"),
        },
    );
    step(&w, &mut story, "a", "wait");
    w.begin("b", "release", "t1");
    w.settle("b", "release", "t1", |_| {});
    step(&w, &mut story, "a", "continue");
    insta::assert_json_snapshot!(story);
}

#[test]
fn deferred_until_a_gate_settles() {
    let mut w = World::new();
    let mut story = Vec::new();
    w.add(todo("announce", "announce the JSON output"));
    w.gate(gate("release", "may this ship in 2.4?").on_decision("release:date"));
    defer(
        &mut w,
        "a",
        "announce",
        ResumeCondition::GateSettled {
            gate: gid("release"),
        },
    );
    step(&w, &mut story, "a", "wait");
    w.answer("release", "yes, 2.4");
    step(&w, &mut story, "a", "continue");
    insta::assert_json_snapshot!(story);
}

#[test]
fn deferred_until_an_observation_changes() {
    let mut w = World::new();
    let mut story = Vec::new();
    w.observe(obs("ci:acme/cli#12", "git:abc123", "pending"));
    w.add(todo("rerun", "rerun the failed job"));
    defer(
        &mut w,
        "a",
        "rerun",
        ResumeCondition::ObservationChanged {
            key: key("ci:acme/cli#12"),
        },
    );
    step(&w, &mut story, "a", "wait");
    w.at("10:40");
    w.observe(obs("ci:acme/cli#12", "git:abc123", "failed"));
    step(&w, &mut story, "a", "continue");
    insta::assert_json_snapshot!(story);
}

/// A deferral until a gate settles wakes at the gate's deadline: an expiring gate settles by
/// time alone, and no store event announces it.
#[test]
fn deferred_until_an_expiring_gate_wakes_at_its_deadline() {
    let mut w = World::new();
    w.add(todo("announce", "announce the JSON output"));
    w.gate(
        gate("release", "may this ship in 2.4?")
            .on_decision("release:date")
            .due("12:00"),
    );
    defer(
        &mut w,
        "a",
        "announce",
        ResumeCondition::GateSettled {
            gate: gid("release"),
        },
    );
    check!(w, "a" => "wait");
}

// ----- leases that meet new facts --------------------------------------------------------------

/// A gate opened over a held todo stops its next turn; the holder is asked, not told to begin a
/// turn the kernel would refuse.
#[test]
fn held_lease_under_a_new_gate_asks() {
    let mut w = World::new();
    w.add(todo("docs", "document the error_code field"));
    w.claim("a", "docs");
    w.gate(gate("naming", "is error_code acceptable as a stable field?").on_todos(&["docs"]));
    check!(w, "a" => "ask");
}

#[test]
fn held_lease_with_an_exhausted_budget_asks() {
    let mut w = World::with(|s| {
        s.budget = Limits {
            turns: Some(1),
            ..Limits::UNLIMITED
        };
    });
    w.add(todo("edit", "change the output layer"));
    w.add(todo("docs", "document --format json"));
    w.finish("a", "edit");
    w.claim("a", "docs");
    check!(w, "a" => "ask");
}

// ----- terminal --------------------------------------------------------------------------------

#[test]
fn terminal_accepted_after_no_follow_up() {
    let mut w = World::with(|s| s.criteria = met_criteria());
    w.add(todo("edit", "change the output layer and add tests"));
    w.turn("a", "edit", |s| {
        s.evidence = vec![
            ev("text", "tests.text_output", "git:abc123"),
            ev("json", "tests.json_schema", "git:abc123"),
        ];
        s.transition = Transition::Complete {
            continuation: Continuation::NoFollowUp,
        };
    });
    check!(w, "a" => "terminal", "b" => "terminal");
}

#[test]
fn terminal_abandoned() {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));
    w.run(
        &owner(),
        Command::AbandonGoal {
            reason: "upstream shipped JSON output".into(),
        },
    );
    check!(w, "a" => "terminal");
}

#[test]
fn abandoned_goal_waits_for_the_turn_in_flight() {
    let mut w = World::new();
    let mut story = Vec::new();
    w.add(todo("edit", "change the output layer"));
    w.claim("a", "edit");
    w.begin("a", "edit", "t1");
    w.run(
        &owner(),
        Command::AbandonGoal {
            reason: "upstream shipped JSON output".into(),
        },
    );
    step(&w, &mut story, "a", "continue");
    step(&w, &mut story, "b", "wait");
    w.settle("a", "edit", "t1", |s| s.transition = Transition::KeepOpen);
    step(&w, &mut story, "a", "terminal");
    insta::assert_json_snapshot!(story);
}

/// Re-running idempotent work is safe, so an expired turn on it holds nothing up once the goal
/// is abandoned.
#[test]
fn abandoned_goal_with_an_expired_idempotent_turn_ends() {
    let mut w = World::new();
    w.add(todo("regen", "regenerate the schema fixtures").idempotent());
    w.claim("a", "regen");
    w.begin("a", "regen", "t1");
    w.run(
        &owner(),
        Command::AbandonGoal {
            reason: "upstream shipped JSON output".into(),
        },
    );
    w.at("10:20");
    check!(w, "a" => "terminal");
}

#[test]
fn decisions_are_the_same_for_the_same_inputs() {
    let mut w = World::with(|s| s.criteria = met_criteria());
    w.add(todo("edit", "change the output layer"));
    w.claim("b", "edit");
    let first = w.decide("a");
    let copy = w.goal.clone();
    assert_eq!(loopx_kernel::decide(&copy, &agent("a"), w.now), first);
    assert_eq!(w.decide("a"), first);
}
