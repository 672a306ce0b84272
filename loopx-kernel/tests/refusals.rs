//! Refusals as data: each case drives a goal through commands into a position where one more
//! command must be refused, and checks the refusal's code. Every refusal is also checked to
//! change nothing: validation yields no event and the whole state compares equal before and
//! after (see `World::refuse`).
//!
//! The cases form one table, so a test can require that every code in `Refusal::CODES` is
//! produced by at least one real command: a new code without a case fails the suite.

mod world;

use std::collections::BTreeSet;

use loopx_kernel::{
    Amendment, Amounts, Command, Continuation, Duration, Event, GateAnswer, GrantedAction,
    HandoffNote, NewTodo, ObligationId, ObligationKind, OutcomeResolution, Refusal,
    ResumeCondition, Transition, VerdictOutcome, execute,
};
use world::{
    EvidenceExt, GateExt, TodoExt, World, ag, agent, capability, ev, gate, gid, obs,
    other_capability, owner, provider, settlement, tid, todo, ts, turn, ws,
};

macro_rules! refusals {
    ($($(#[$meta:meta])* $name:ident => $code:literal $body:block)*) => {
        mod case {
            use super::*;
            $($(#[$meta])* pub fn $name() -> Refusal $body)*
        }
        $(
            #[test]
            fn $name() {
                let refusal = case::$name();
                assert_eq!(refusal.code(), $code, "{refusal}");
            }
        )*
        /// Every case: its name, the code it must produce, and how to produce it.
        const CASES: &[(&str, &str, fn() -> Refusal)] =
            &[$((stringify!($name), $code, case::$name as fn() -> Refusal)),*];
    };
}

fn edit() -> NewTodo {
    todo("edit", "change the output layer")
}

fn claim(todo: &str) -> Command {
    Command::Claim {
        todo: tid(todo),
        ttl: None,
        workspace: None,
        grant_reason: None,
    }
}

fn begin(todo: &str, epoch: u64, turn_id: &str) -> Command {
    Command::BeginTurn {
        todo: tid(todo),
        epoch,
        turn: turn(turn_id),
        reserve: None,
    }
}

fn settle(edit: impl FnOnce(&mut loopx_kernel::Settlement)) -> Command {
    let mut s = settlement("edit", 1, "t1");
    edit(&mut s);
    Command::SettleTurn(s)
}

fn reassign(todo: &str, to: &str, grant_reason: Option<&str>) -> Command {
    Command::Reassign {
        todo: tid(todo),
        to: Some(agent(to)),
        grant_reason: grant_reason.map(Into::into),
    }
}

fn supersede(todo: &str, grant_reason: Option<&str>) -> Command {
    Command::Supersede {
        todo: tid(todo),
        reason: "covered by the new writer".into(),
        replacement: None,
        grant_reason: grant_reason.map(Into::into),
    }
}

fn map_login(person: &str, login: &str) -> loopx_kernel::Amendment {
    loopx_kernel::Amendment::MapLogin {
        person: loopx_kernel::PersonId::new(person).unwrap(),
        provider: loopx_kernel::SourceId::new("github").unwrap(),
        login: login.into(),
    }
}

fn relay(gate: &str, login: &str) -> Command {
    Command::RelayGateAnswer {
        gate: gid(gate),
        answer: GateAnswer::Resolve {
            answer: "yes".into(),
        },
        relay: loopx_kernel::Relay {
            login: login.into(),
            delivery: "delivery-1".into(),
            message: None,
        },
    }
}

fn notice(gate: &str, id: &str) -> Command {
    Command::IntendGateNotice {
        gate: gid(gate),
        effect: loopx_kernel::EffectIntent::new(
            loopx_kernel::EffectId::new(id).unwrap(),
            "github.comment",
            "acme/cli#12",
            format!("g/gate-notice/{gate}"),
            std::collections::BTreeMap::new(),
        ),
    }
}

fn record_notice(gate: &str) -> Command {
    Command::RecordGateNotice {
        gate: gid(gate),
        outcome: loopx_kernel::EffectOutcome::Performed,
        note: None,
    }
}

fn answer(gate: &str) -> Command {
    Command::AnswerGate {
        gate: gid(gate),
        answer: GateAnswer::Resolve {
            answer: "yes".into(),
        },
    }
}

fn discharge(changes: Vec<loopx_kernel::PlanChange>) -> Command {
    Command::Discharge {
        obligation: ObligationId::new("rethink").unwrap(),
        changes,
    }
}

fn raise(w: &mut World) {
    w.run(
        &capability(),
        Command::RaiseObligation {
            id: ObligationId::new("rethink").unwrap(),
            kind: ObligationKind::Replan,
            detail: "the writer needs a different shape".into(),
            owner: None,
        },
    );
}

/// `edit` with agent `a` holding the lease and turn `t1` in flight.
fn turn_in_flight(new: NewTodo) -> World {
    let mut w = World::new();
    w.add(new);
    w.claim("a", "edit");
    w.begin("a", "edit", "t1");
    w
}

/// `edit` assigned to agent `a`; `b` holds `grants`.
fn assigned_to_a(grants: &[GrantedAction]) -> World {
    let mut w = World::with(|s| {
        if !grants.is_empty() {
            s.grants
                .insert(agent("b"), grants.iter().copied().collect());
        }
    });
    w.add(edit().assigned("a"));
    w
}

fn with_turn_budget(turns: u64) -> World {
    World::with(|s| s.budget.turns = Some(turns))
}

refusals! {
    // ----- the goal ------------------------------------------------------------------------------

    goal_created_twice => "goal_exists" {
        let mut w = World::new();
        w.refuse(&owner(), Command::CreateGoal { spec: world::spec() })
    }

    /// Nothing exists before `create_goal`, so there is no state to change.
    command_before_the_goal_exists => "unknown_goal" {
        let command = Command::AddTodo { todo: edit() };
        execute(None, &ag("a"), ts("10:00"), &command).unwrap_err()
    }

    todo_added_to_an_abandoned_goal => "goal_abandoned" {
        let mut w = World::new();
        w.run(&owner(), Command::AbandonGoal { reason: "upstream shipped it".into() });
        w.refuse(&owner(), Command::AddTodo { todo: edit() })
    }

    amendment_against_an_old_goal_revision => "stale_revision" {
        let mut w = World::new();
        w.amend(vec![Amendment::SetObjective { objective: "JSON and YAML output".into() }]);
        w.refuse(
            &owner(),
            Command::AmendGoal {
                expected_revision: 0,
                amendments: vec![Amendment::RegisterAgent { agent: agent("d") }],
            },
        )
    }

    goal_amended_by_an_agent => "not_goal_owner" {
        let mut w = World::new();
        w.refuse(
            &ag("a"),
            Command::AmendGoal {
                expected_revision: 0,
                amendments: vec![Amendment::RegisterAgent { agent: agent("d") }],
            },
        )
    }

    goal_amended_by_another_person => "not_goal_owner" {
        let mut w = World::new();
        let stranger = loopx_kernel::Actor::Person(loopx_kernel::PersonId::new("stranger").unwrap());
        w.refuse(
            &stranger,
            Command::AmendGoal {
                expected_revision: 0,
                amendments: vec![Amendment::Grant { agent: agent("a"), action: GrantedAction::TakeOver }],
            },
        )
    }

    empty_amendment => "no_visible_change" {
        let mut w = World::new();
        w.refuse(&owner(), Command::AmendGoal { expected_revision: 0, amendments: vec![] })
    }

    // ----- plan ----------------------------------------------------------------------------------

    claim_of_an_unknown_todo => "unknown_todo" {
        let mut w = World::new();
        w.refuse(&ag("a"), claim("ghost"))
    }

    dependency_on_an_unknown_todo => "unknown_reference" {
        let mut w = World::new();
        w.refuse(&ag("a"), Command::AddTodo { todo: edit().after(&["ghost"]) })
    }

    todo_id_reused => "duplicate_id" {
        let mut w = World::new();
        w.add(edit());
        w.refuse(&ag("a"), Command::AddTodo { todo: edit() })
    }

    blank_todo_title => "invalid_input" {
        let mut w = World::new();
        w.refuse(&ag("a"), Command::AddTodo { todo: todo("edit", "   ") })
    }

    todo_added_by_a_provider => "actor_not_permitted" {
        let mut w = World::new();
        w.refuse(&provider(), Command::AddTodo { todo: edit() })
    }

    todo_added_by_an_unregistered_agent => "unregistered_agent" {
        let mut w = World::new();
        w.refuse(&ag("z"), Command::AddTodo { todo: edit() })
    }

    review_assigned_to_its_author => "excluded_agent" {
        let mut w = World::new();
        w.add(edit());
        w.finish("a", "edit");
        w.refuse(
            &owner(),
            Command::AddTodo {
                todo: todo("review", "review the change").review_of("edit").assigned("a"),
            },
        )
    }

    // ----- authority over other agents' todos ----------------------------------------------------

    reassigned_without_a_grant => "grant_required" {
        let mut w = assigned_to_a(&[]);
        w.refuse(&ag("b"), reassign("edit", "b", Some("a is on leave")))
    }

    superseded_without_a_grant => "grant_required" {
        let mut w = assigned_to_a(&[]);
        w.refuse(&ag("b"), supersede("edit", Some("a is on leave")))
    }

    /// A capability proposes; it never acts on a todo that belongs to an agent.
    leased_todo_blocked_by_a_capability => "grant_required" {
        let mut w = World::new();
        w.add(edit());
        w.claim("a", "edit");
        w.refuse(
            &capability(),
            Command::Block { todo: tid("edit"), reason: "CI is red".into(), grant_reason: None },
        )
    }

    /// A capability acts on its own todos only: one another capability created is the other's.
    assigned_todo_of_another_capability_superseded => "grant_required" {
        let mut w = World::new();
        w.run(&capability(), Command::AddTodo { todo: edit().assigned("a") });
        w.refuse(&other_capability(), supersede("edit", None))
    }

    /// Its own todo stops being the capability's to change while an agent holds a live lease.
    own_todo_deferred_by_its_capability_under_a_live_lease => "grant_required" {
        let mut w = World::new();
        w.run(&capability(), Command::AddTodo { todo: edit().assigned("a") });
        w.claim("a", "edit");
        w.refuse(
            &capability(),
            Command::Defer {
                todo: tid("edit"),
                until: ResumeCondition::At { at: ts("11:00") },
                grant_reason: None,
            },
        )
    }

    /// A todo the owner planned for an agent is not the capability's to change.
    assigned_todo_of_the_owner_blocked_by_a_capability => "grant_required" {
        let mut w = assigned_to_a(&[]);
        w.refuse(
            &capability(),
            Command::Block { todo: tid("edit"), reason: "CI is red".into(), grant_reason: None },
        )
    }

    reassigned_under_a_grant_without_a_reason => "grant_reason_required" {
        let mut w = assigned_to_a(&[GrantedAction::Reassign]);
        w.refuse(&ag("b"), reassign("edit", "b", None))
    }

    superseded_under_a_grant_with_a_blank_reason => "grant_reason_required" {
        let mut w = assigned_to_a(&[GrantedAction::Supersede]);
        w.refuse(&ag("b"), supersede("edit", Some("  ")))
    }

    /// A grant for one action does not cover another.
    superseded_under_a_reassign_grant => "grant_required" {
        let mut w = assigned_to_a(&[GrantedAction::Reassign]);
        w.refuse(&ag("b"), supersede("edit", Some("a is on leave")))
    }

    // ----- claims --------------------------------------------------------------------------------

    claim_by_an_unregistered_agent => "unregistered_agent" {
        let mut w = World::new();
        w.add(edit());
        w.refuse(&ag("z"), claim("edit"))
    }

    claim_by_an_excluded_agent => "excluded_agent" {
        let mut w = World::new();
        w.add(edit().excluding("b"));
        w.refuse(&ag("b"), claim("edit"))
    }

    /// The review was planned before the work, so the author was unknown when it was added.
    claim_of_a_review_by_its_author => "excluded_agent" {
        let mut w = World::new();
        w.add(edit());
        w.add(todo("review", "review the change").review_of("edit").after(&["edit"]));
        w.finish("a", "edit");
        w.refuse(&ag("a"), claim("review"))
    }

    claim_by_a_person => "actor_not_permitted" {
        let mut w = World::new();
        w.add(edit());
        w.refuse(&owner(), claim("edit"))
    }

    claim_of_a_leased_todo => "lease_held" {
        let mut w = World::new();
        w.add(edit());
        w.claim("a", "edit");
        w.refuse(&ag("b"), claim("edit"))
    }

    claim_of_a_done_todo => "todo_not_open" {
        let mut w = World::new();
        w.add(edit());
        w.finish("a", "edit");
        w.refuse(&ag("b"), claim("edit"))
    }

    claim_before_dependencies_are_done => "dependencies_unmet" {
        let mut w = World::new();
        w.add(edit());
        w.add(todo("docs", "document --format json").after(&["edit"]));
        w.refuse(&ag("a"), claim("docs"))
    }

    claim_of_a_deferred_todo => "resume_condition_unmet" {
        let mut w = World::new();
        w.add(edit());
        w.run(
            &ag("a"),
            Command::Defer {
                todo: tid("edit"),
                until: ResumeCondition::At { at: ts("12:00") },
                grant_reason: None,
            },
        );
        w.refuse(&ag("a"), claim("edit"))
    }

    claim_of_a_monitor_before_it_is_due => "monitor_not_due" {
        let mut w = World::new();
        w.add(todo("watch-ci", "watch CI").monitor("ci:acme/cli#12", Duration::minutes(30)));
        w.turn("a", "watch-ci", |s| s.transition = Transition::KeepOpen);
        w.at("10:10");
        w.refuse(&ag("a"), claim("watch-ci"))
    }

    claim_before_a_failed_todo_s_pause_ends => "backing_off" {
        let mut w = World::new();
        w.add(edit());
        w.turn("a", "edit", |s| {
            s.transition = Transition::KeepOpen;
            s.verdict.outcome = VerdictOutcome::Failed;
        });
        w.refuse(&ag("b"), claim("edit"))
    }

    claim_under_a_pending_gate => "gate_blocks" {
        let mut w = World::new();
        w.add(edit());
        w.gate(gate("naming", "is error_code acceptable as a stable field?").on_todos(&["edit"]));
        w.refuse(&ag("a"), claim("edit"))
    }

    claim_without_the_decision_it_needs => "decision_missing" {
        let mut w = World::new();
        w.add(edit().needs("api:error_code"));
        w.refuse(&ag("a"), claim("edit"))
    }

    claim_of_writing_work_without_a_workspace => "workspace_required" {
        let mut w = World::new();
        w.add(edit().writes(&["src"]));
        w.refuse(&ag("a"), claim("edit"))
    }

    claim_from_a_checkout_another_agent_uses => "workspace_shared" {
        let mut w = World::new();
        w.report("a", ws("/src/cli", "/src/cli/.git"));
        w.report("b", ws("/src/cli", "/src/cli/.git"));
        w.add(edit().writes(&["src/format"]));
        w.add(todo("docs", "document --format json").writes(&["docs"]));
        w.claim("a", "edit");
        w.refuse(&ag("b"), claim("docs"))
    }

    claim_of_an_overlapping_write_scope => "write_scope_conflict" {
        let mut w = World::new();
        w.report("a", ws("/src/cli", "/src/cli/.git"));
        w.report("b", ws("/src/cli-b", "/src/cli/.git"));
        w.add(edit().writes(&["src"]));
        w.add(todo("render", "render JSON").writes(&["src/render"]));
        w.claim("a", "edit");
        w.refuse(&ag("b"), claim("render"))
    }

    claim_after_a_turn_expired_with_its_outcome_unknown => "outcome_unknown" {
        let mut w = turn_in_flight(edit());
        w.at("10:20");
        w.refuse(&ag("b"), claim("edit"))
    }

    claim_of_a_lease_already_held => "no_visible_change" {
        let mut w = World::new();
        w.add(edit());
        w.claim("a", "edit");
        w.refuse(&ag("a"), claim("edit"))
    }

    // ----- leases and turns ----------------------------------------------------------------------

    renewal_after_expiry => "no_live_lease" {
        let mut w = World::new();
        w.add(edit());
        w.claim("a", "edit");
        w.at("10:20");
        w.refuse(&ag("a"), Command::Renew { todo: tid("edit"), epoch: 1, ttl: None })
    }

    turn_begun_on_a_lost_lease => "stale_lease_epoch" {
        let mut w = World::new();
        w.add(edit());
        w.claim("a", "edit");
        w.at("10:20");
        w.claim("b", "edit");
        w.refuse(&ag("a"), begin("edit", 1, "t1"))
    }

    settlement_by_a_non_holder => "not_lease_holder" {
        let mut w = turn_in_flight(edit());
        w.refuse(&ag("b"), settle(|_| {}))
    }

    /// The lease expired and another agent took the idempotent work over: the first holder's
    /// late settlement carries a dead epoch.
    settlement_with_an_old_epoch => "stale_lease_epoch" {
        let mut w = turn_in_flight(edit().idempotent());
        w.at("10:20");
        w.claim("b", "edit");
        w.refuse(&ag("a"), settle(|_| {}))
    }

    /// An expired lease over a turn that may have had effects leaves its outcome unknown: even
    /// its holder settles it only by a readback (`resolve_outcome`), never a plain settlement.
    settlement_by_the_holder_of_an_expired_lease => "outcome_unknown" {
        let mut w = turn_in_flight(edit());
        w.at("10:20");
        w.refuse(&ag("a"), settle(|_| {}))
    }

    /// On idempotent work an expired lease is simply gone: the todo may be claimed and run
    /// again, and the old holder's late settlement needs the lease claimed anew.
    settlement_by_the_holder_of_an_expired_idempotent_lease => "no_live_lease" {
        let mut w = turn_in_flight(edit().idempotent());
        w.at("10:20");
        w.refuse(&ag("a"), settle(|_| {}))
    }

    settlement_after_a_handoff => "stale_lease_epoch" {
        let mut w = turn_in_flight(edit());
        w.run(
            &ag("a"),
            Command::Handoff {
                todo: tid("edit"),
                epoch: 1,
                to: agent("b"),
                note: HandoffNote {
                    next_action: "finish the schema tests".into(),
                    stop_condition: "tests.json_schema passes".into(),
                    evidence: vec![],
                },
                grant_reason: None,
            },
        );
        w.refuse(&ag("a"), settle(|_| {}))
    }

    /// Work whose lease expired mid-turn, on a todo not safe to repeat, is read back before
    /// anyone hands it over: the handover would hide a possible effect.
    handover_of_a_turn_whose_outcome_is_unknown => "outcome_unknown" {
        let mut w = turn_in_flight(edit());
        w.at("10:20");
        w.refuse(&owner(), Command::Handoff {
            todo: tid("edit"),
            epoch: 1,
            to: agent("b"),
            note: HandoffNote {
                next_action: "finish the schema tests".into(),
                stop_condition: "tests.json_schema passes".into(),
                evidence: vec![],
            },
            grant_reason: None,
        })
    }

    /// A capability hands over only the work it planned: another's todo needs a grant.
    handover_of_someone_elses_work_by_a_capability => "grant_required" {
        let mut w = World::new();
        w.add(edit().assigned("a"));
        w.refuse(&capability(), Command::Handoff {
            todo: tid("edit"),
            epoch: 0,
            to: agent("b"),
            note: HandoffNote {
                next_action: "change the output layer".into(),
                stop_condition: "the tests pass".into(),
                evidence: vec![],
            },
            grant_reason: None,
        })
    }

    second_turn_under_one_lease => "turn_in_flight" {
        let mut w = turn_in_flight(edit());
        w.refuse(&ag("a"), begin("edit", 1, "t2"))
    }

    settlement_of_a_turn_never_begun => "turn_not_begun" {
        let mut w = World::new();
        w.add(edit());
        w.claim("a", "edit");
        w.refuse(&ag("a"), settle(|_| {}))
    }

    settlement_repeated => "turn_already_used" {
        let mut w = turn_in_flight(edit());
        w.settle("a", "edit", "t1", |s| s.transition = Transition::KeepOpen);
        w.refuse(&ag("a"), settle(|s| s.transition = Transition::KeepOpen))
    }

    turn_beyond_the_budget => "budget_exhausted" {
        let mut w = with_turn_budget(1);
        w.add(edit());
        w.add(todo("docs", "document --format json"));
        w.finish("a", "edit");
        w.claim("a", "docs");
        w.refuse(&ag("a"), begin("docs", 1, "t9"))
    }

    turn_beyond_the_todo_budget => "budget_exhausted" {
        let mut w = World::new();
        w.add(edit().turn_budget(1));
        w.turn("a", "edit", |s| s.transition = Transition::KeepOpen);
        let epoch = w.claim("a", "edit");
        w.refuse(&ag("a"), begin("edit", epoch, "t9"))
    }

    turn_under_a_gate_opened_after_the_claim => "gate_blocks" {
        let mut w = World::new();
        w.add(edit());
        w.claim("a", "edit");
        w.gate(gate("naming", "is error_code acceptable as a stable field?").on_todos(&["edit"]));
        w.refuse(&ag("a"), begin("edit", 1, "t1"))
    }

    self_validated_settlement => "validation_not_independent" {
        let mut w = turn_in_flight(edit());
        w.refuse(&ag("a"), settle(|s| s.verdict.validator = ag("a")))
    }

    completion_on_a_failed_verdict => "validation_insufficient" {
        let mut w = turn_in_flight(edit());
        w.refuse(&ag("a"), settle(|s| s.verdict.outcome = VerdictOutcome::Failed))
    }

    completion_with_no_successors => "invalid_continuation" {
        let mut w = turn_in_flight(edit());
        w.refuse(
            &ag("a"),
            settle(|s| {
                s.transition = Transition::Complete {
                    continuation: Continuation::Successors(vec![]),
                };
            }),
        )
    }

    settlement_with_evidence_citing_nothing_known => "unknown_reference" {
        let mut w = turn_in_flight(edit());
        w.refuse(
            &ag("a"),
            settle(|s| {
                s.evidence = vec![ev("json", "tests.json_schema", "git:abc123").derived_from(&["ghost"])];
            }),
        )
    }

    outcome_resolved_while_the_lease_is_live => "turn_in_flight" {
        let mut w = turn_in_flight(edit());
        w.refuse(
            &ag("a"),
            Command::ResolveOutcome {
                todo: tid("edit"),
                turn: turn("t1"),
                resolution: OutcomeResolution::Absent { note: "nothing pushed".into() },
                grant_reason: None,
            },
        )
    }

    // ----- gates ---------------------------------------------------------------------------------

    answer_to_an_unknown_gate => "unknown_gate" {
        let mut w = World::new();
        w.refuse(&owner(), answer("ghost"))
    }

    gate_answered_by_an_agent => "not_gate_owner" {
        let mut w = World::new();
        w.gate(gate("naming", "is error_code acceptable as a stable field?").whole_goal());
        w.refuse(&ag("a"), answer("naming"))
    }

    gate_answered_by_another_person => "not_gate_owner" {
        let mut w = World::new();
        w.gate(gate("naming", "is error_code acceptable as a stable field?").whole_goal());
        let stranger = loopx_kernel::Actor::Person(loopx_kernel::PersonId::new("stranger").unwrap());
        w.refuse(&stranger, answer("naming"))
    }

    relayed_answer_from_a_login_mapped_to_someone_else => "relay_not_gate_owner" {
        let mut w = World::new();
        w.amend(vec![map_login("stranger", "stranger-gh")]);
        w.gate(gate("naming", "is error_code acceptable as a stable field?").whole_goal());
        w.refuse(&provider(), relay("naming", "Stranger-GH"))
    }

    relayed_answer_from_an_unmapped_login => "relay_not_gate_owner" {
        let mut w = World::new();
        w.gate(gate("naming", "is error_code acceptable as a stable field?").whole_goal());
        w.refuse(&provider(), relay("naming", "maintainer-gh"))
    }

    relayed_answer_by_an_agent => "actor_not_permitted" {
        let mut w = World::new();
        w.amend(vec![map_login("maintainer", "maintainer-gh")]);
        w.gate(gate("naming", "is error_code acceptable as a stable field?").whole_goal());
        w.refuse(&ag("a"), relay("naming", "maintainer-gh"))
    }

    gate_notice_for_an_owner_with_no_login => "gate_notice_unmapped" {
        let mut w = World::new();
        w.gate(gate("naming", "is error_code acceptable as a stable field?").whole_goal());
        w.refuse(&provider(), notice("naming", "notice-naming"))
    }

    gate_noticed_twice => "gate_notice_exists" {
        let mut w = World::new();
        w.amend(vec![map_login("maintainer", "maintainer-gh")]);
        w.gate(gate("naming", "is error_code acceptable as a stable field?").whole_goal());
        w.run(&provider(), notice("naming", "notice-naming"));
        w.refuse(&provider(), notice("naming", "notice-naming-2"))
    }

    gate_notice_recorded_twice => "gate_notice_not_pending" {
        let mut w = World::new();
        w.amend(vec![map_login("maintainer", "maintainer-gh")]);
        w.gate(gate("naming", "is error_code acceptable as a stable field?").whole_goal());
        w.run(&provider(), notice("naming", "notice-naming"));
        w.run(&provider(), record_notice("naming"));
        w.refuse(&provider(), record_notice("naming"))
    }

    login_mapped_by_someone_other_than_the_owner => "not_goal_owner" {
        let mut w = World::new();
        let stranger = loopx_kernel::Actor::Person(loopx_kernel::PersonId::new("stranger").unwrap());
        w.refuse(
            &stranger,
            Command::AmendGoal { expected_revision: 0, amendments: vec![map_login("stranger", "stranger-gh")] },
        )
    }

    login_that_does_not_read_as_one => "login_malformed" {
        let mut w = World::new();
        w.refuse(
            &owner(),
            Command::AmendGoal { expected_revision: 0, amendments: vec![map_login("maintainer", "@maintainer")] },
        )
    }

    login_mapped_to_someone_else_already => "login_taken" {
        let mut w = World::new();
        w.amend(vec![map_login("stranger", "shared-gh")]);
        w.refuse(
            &owner(),
            Command::AmendGoal { expected_revision: 1, amendments: vec![map_login("maintainer", "Shared-GH")] },
        )
    }

    gate_answered_twice => "gate_not_pending" {
        let mut w = World::new();
        w.gate(gate("naming", "is error_code acceptable as a stable field?").whole_goal());
        w.answer("naming", "yes");
        w.refuse(&owner(), answer("naming"))
    }

    gate_answered_after_it_expired => "gate_not_pending" {
        let mut w = World::new();
        w.gate(gate("naming", "is error_code acceptable as a stable field?").whole_goal().due("12:00"));
        w.at("12:00");
        w.refuse(&owner(), answer("naming"))
    }

    gate_withdrawn_by_someone_else => "actor_not_permitted" {
        let mut w = World::new();
        w.gate(gate("naming", "is error_code acceptable as a stable field?").whole_goal());
        w.refuse(&ag("b"), Command::WithdrawGate { gate: gid("naming"), reason: "moot".into() })
    }

    gate_without_a_scope => "invalid_input" {
        let mut w = World::new();
        w.refuse(&ag("a"), Command::OpenGate { gate: gate("naming", "is error_code acceptable?") })
    }

    // ----- facts ---------------------------------------------------------------------------------

    evidence_recorded_by_an_agent => "actor_not_permitted" {
        let mut w = World::new();
        let mut evidence = ev("json", "tests.json_schema", "git:abc123");
        evidence.observed_at = ts("10:00");
        w.refuse(&ag("a"), Command::RecordEvidence { evidence })
    }

    observation_recorded_by_a_person => "actor_not_permitted" {
        let mut w = World::new();
        let mut observation = obs("ci:acme/cli#12", "git:abc123", "green");
        observation.observed_at = ts("10:00");
        w.refuse(&owner(), Command::RecordObservation { observation })
    }

    // ----- obligations ---------------------------------------------------------------------------

    discharge_of_an_unknown_obligation => "unknown_obligation" {
        let mut w = World::new();
        w.refuse(&ag("a"), discharge(vec![loopx_kernel::PlanChange::AddTodo { todo: edit() }]))
    }

    discharge_without_a_change => "no_visible_change" {
        let mut w = World::new();
        raise(&mut w);
        w.refuse(&ag("a"), discharge(vec![]))
    }

    discharge_repeated => "obligation_closed" {
        let mut w = World::new();
        raise(&mut w);
        w.run(&ag("a"), discharge(vec![loopx_kernel::PlanChange::AddTodo { todo: edit() }]));
        w.refuse(
            &ag("a"),
            discharge(vec![loopx_kernel::PlanChange::AddTodo {
                todo: todo("docs", "document --format json"),
            }]),
        )
    }

    /// Authentication runs in the write path before validation; these cases call it as the
    /// write path does, on a signed spec whose owner registered one key.
    unsigned_command_on_a_signed_goal => "signature_missing" {
        authenticate(&add_edit(), None)
    }

    command_of_an_actor_with_no_key => "key_unregistered" {
        let signature = signed(9, &add_edit());
        authenticate_as(&ag("a"), &add_edit(), Some(&signature))
    }

    command_signed_with_another_key => "signature_invalid" {
        let signature = signed(9, &add_edit());
        authenticate(&add_edit(), Some(&signature))
    }

    // ----- signed verdicts ------------------------------------------------------------------
    //
    // On a signed goal (keys for the owner, `validator:ci`, `validator:lint`, agents `a` and
    // `b`; check `tests.json_schema` registered for `validator:ci` only) a settlement carries
    // its validator's signature over the verdict, the turn and its evidence.

    unsigned_verdict_on_a_signed_goal => "verdict_unsigned" {
        let mut w = signed_turn_in_flight();
        w.refuse(&ag("a"), Command::SettleTurn(schema_settlement()))
    }

    verdict_signed_by_the_agent_itself => "verdict_self_signed" {
        let mut w = signed_turn_in_flight();
        w.refuse(&ag("a"), Command::SettleTurn(world::sign(schema_settlement(), 3)))
    }

    verdict_of_a_validator_with_no_key => "validator_unregistered" {
        let mut w = signed_turn_in_flight();
        let mut s = schema_settlement();
        s.verdict.validator = provider();
        w.refuse(&ag("a"), Command::SettleTurn(world::sign(s, 6)))
    }

    verdict_of_a_validator_not_registered_for_the_check => "validator_not_registered_for_check" {
        let mut w = signed_turn_in_flight();
        let mut s = schema_settlement();
        s.verdict.validator = world::lint();
        w.refuse(&ag("a"), Command::SettleTurn(world::sign(s, 4)))
    }

    /// The validator signed a `progress` verdict; the agent turned it into `passed`.
    verdict_altered_after_signing => "verdict_signature_invalid" {
        let mut w = signed_turn_in_flight();
        let mut s = schema_settlement();
        s.verdict.outcome = VerdictOutcome::Progress;
        s.transition = Transition::KeepOpen;
        let mut s = world::sign(s, 2);
        s.verdict.outcome = VerdictOutcome::Passed;
        w.refuse(&ag("a"), Command::SettleTurn(s))
    }

    /// The changes are validated one after another; a bad one refuses the whole discharge.
    discharge_with_an_invalid_change => "duplicate_id" {
        let mut w = World::new();
        raise(&mut w);
        w.refuse(
            &ag("a"),
            discharge(vec![
                loopx_kernel::PlanChange::AddTodo { todo: edit() },
                loopx_kernel::PlanChange::AddTodo { todo: edit() },
            ]),
        )
    }

    /// A claim stamped centuries ahead of the store's clock would expire any lease; the store
    /// refuses it (its clock plus the goal's skew is the bound) and writes nothing. Through the
    /// write path on a real store, since the store's clock is what bounds it.
    claim_far_ahead_of_the_store_clock => "clock_ahead" {
        use loopx_kernel::StoreExt as _;
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let store = loopx_store::MemoryStore::new();
        let goal = world::spec();
        let handle = store.goal(&goal.id);
        let submit = |actor: &loopx_kernel::Actor, now, command: Command| {
            runtime.block_on(handle.submit(actor, now, &command))
        };
        submit(&owner(), ts("10:00"), Command::CreateGoal { spec: goal.clone() }).unwrap();
        submit(&ag("a"), ts("10:01"), Command::AddTodo { todo: edit() }).unwrap();
        submit(&ag("a"), ts("10:02"), claim("edit")).unwrap();
        let before = runtime.block_on(handle.state()).unwrap();
        let ahead = loopx_kernel::Timestamp::parse("2999-01-01T00:00:00Z").unwrap();
        let refused = submit(&ag("b"), ahead, claim("edit"));
        assert_eq!(runtime.block_on(handle.state()).unwrap(), before);
        match refused {
            // The store's time is its clock's: read, checked, then fixed for the snapshot.
            Err(loopx_kernel::SubmitError::Refused(Refusal::ClockAhead { at, store_time, skew })) => {
                assert!(at == ahead && store_time > ts("10:02") && at > store_time.plus(skew));
                Refusal::ClockAhead { at, store_time: ts("10:02"), skew }
            }
            other => panic!("a claim far ahead is refused, got {other:?}"),
        }
    }
}

/// A signed goal ([`world::signed_spec`]) with `edit` leased by agent `a`, turn `t1` in flight.
fn signed_turn_in_flight() -> World {
    let mut w = World::with(world::signed_spec);
    w.add(edit());
    w.claim("a", "edit");
    w.begin("a", "edit", "t1");
    w
}

/// `edit`'s settlement carrying a passing `tests.json_schema` evidence, its verdict unsigned.
fn schema_settlement() -> loopx_kernel::Settlement {
    let mut s = settlement("edit", 1, "t1");
    let mut evidence = ev("t1.schema", "tests.json_schema", "git:abc123");
    evidence.observed_at = ts("10:00");
    s.evidence = vec![evidence];
    s
}

fn add_edit() -> Command {
    Command::AddTodo { todo: edit() }
}

fn signed_spec() -> loopx_kernel::GoalSpec {
    let mut spec = world::spec();
    spec.identity = loopx_kernel::Identity::Signed;
    spec.keys = vec![loopx_kernel::RegisteredKey {
        actor: owner(),
        key: loopx_kernel::Signer::public_key(&loopx_kernel::SecretKey::from_seed([1; 32])),
    }];
    spec
}

fn operation() -> loopx_kernel::OperationId {
    "op-1".parse().expect("a valid id")
}

fn signed(seed: u8, command: &Command) -> loopx_kernel::Signature {
    let spec = signed_spec();
    let digest = loopx_kernel::write::digest(&owner(), command);
    let message = loopx_kernel::identity::command_message(&spec.id, &operation(), &digest);
    loopx_kernel::Signer::sign(&loopx_kernel::SecretKey::from_seed([seed; 32]), &message)
}

fn authenticate(command: &Command, signature: Option<&loopx_kernel::Signature>) -> Refusal {
    authenticate_as(&owner(), command, signature)
}

fn authenticate_as(
    actor: &loopx_kernel::Actor,
    command: &Command,
    signature: Option<&loopx_kernel::Signature>,
) -> Refusal {
    let spec = signed_spec();
    let digest = loopx_kernel::write::digest(actor, command);
    match loopx_kernel::identity::authenticate(
        Some(&spec),
        &spec.id,
        actor,
        command,
        &operation(),
        &digest,
        signature,
    ) {
        Err(refusal) => refusal,
        Ok(()) => panic!("accepted"),
    }
}

#[test]
fn every_refusal_code_is_exercised() {
    let declared: BTreeSet<&str> = Refusal::CODES.iter().copied().collect();
    assert_eq!(
        declared.len(),
        Refusal::CODES.len(),
        "Refusal::CODES lists a code twice"
    );
    let mut exercised = BTreeSet::new();
    for (name, code, case) in CASES {
        let refusal = case();
        assert_eq!(refusal.code(), *code, "case `{name}`: {refusal}");
        exercised.insert(refusal.code());
    }
    let missing: Vec<_> = declared.difference(&exercised).collect();
    let unknown: Vec<_> = exercised.difference(&declared).collect();
    assert!(missing.is_empty(), "codes no case produces: {missing:?}");
    assert!(
        unknown.is_empty(),
        "codes missing from Refusal::CODES: {unknown:?}"
    );
}

/// The messages are what an agent reads when a command fails: each must say what to do next.
#[test]
fn refusal_messages() {
    let lines: Vec<String> = CASES
        .iter()
        .map(|(name, _, case)| {
            let refusal = case();
            format!("{} ({name}): {refusal}", refusal.code())
        })
        .collect();
    insta::assert_snapshot!(lines.join("\n"));
}

#[test]
fn refusals_serialize_with_their_code() {
    let refusal = case::claim_of_a_leased_todo();
    insta::assert_json_snapshot!(refusal);
}

// ----- grants used with a reason ---------------------------------------------------------------

#[test]
fn reassignment_under_a_grant_records_the_reason() {
    let mut w = assigned_to_a(&[GrantedAction::Reassign]);
    let events = w.run(
        &ag("b"),
        reassign("edit", "b", Some("a is on leave until Monday")),
    );
    assert_eq!(events.len(), 1);
    assert_eq!(
        events[0].event,
        Event::TodoReassigned {
            todo: tid("edit"),
            to: Some(agent("b")),
            grant_reason: Some("a is on leave until Monday".into()),
        }
    );
    assert_eq!(w.goal.todos[&tid("edit")].assignee, Some(agent("b")));
}

#[test]
fn supersession_under_a_grant_records_the_reason() {
    let mut w = assigned_to_a(&[GrantedAction::Supersede]);
    let events = w.run(
        &ag("b"),
        supersede("edit", Some("the writer was replaced upstream")),
    );
    let [recorded] = events.as_slice() else {
        panic!("one event expected: {events:?}");
    };
    let Event::TodoSuperseded { grant_reason, .. } = &recorded.event else {
        panic!("not a supersession: {recorded:?}");
    };
    assert_eq!(
        grant_reason.as_deref(),
        Some("the writer was replaced upstream")
    );
    assert_eq!(w.goal.todos[&tid("edit")].status.name(), "superseded");
}

#[test]
fn the_owner_needs_no_grant() {
    let mut w = assigned_to_a(&[]);
    let events = w.run(&owner(), reassign("edit", "b", None));
    assert!(matches!(
        &events[0].event,
        Event::TodoReassigned {
            grant_reason: None,
            ..
        }
    ));
}

#[test]
fn a_refused_turn_charges_nothing() {
    let mut w = with_turn_budget(1);
    w.add(edit());
    w.add(todo("docs", "document --format json"));
    w.finish("a", "edit");
    let spent = w.goal.ledger.spent;
    w.claim("a", "docs");
    w.refuse(&ag("a"), begin("docs", 1, "t9"));
    assert_eq!(w.goal.ledger.spent, spent);
    assert_eq!(w.goal.ledger.reserved, Amounts::ZERO);
}
