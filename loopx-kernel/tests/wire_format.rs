//! The durable wire format: events and state snapshots as JSON.
//!
//! One representative history, built through commands only, produces every `Event` variant. Its
//! JSON is snapshotted exactly as `serde_json` writes it, so any change to the stored shape shows
//! up as a snapshot diff. Around it: round trips, replay equals the live state, newer schemas and
//! revision gaps fail closed, malformed input is a serde error rather than a panic, and a state
//! read back from JSON decides exactly like the original.

mod world;

use loopx_kernel::{
    Amendment, Amounts, Command, Continuation, Decision, Duration, EffectId, EffectIntent,
    EffectOutcome, Event, GateAnswer, GoalSpec, GoalState, GrantedAction, HandoffNote, Limits,
    ObligationId, ObligationKind, OutcomeResolution, PlanChange, RecordedEvent, ReplayError,
    ResumeCondition, SCHEMA_VERSION, Transition, VerdictOutcome, check_invariants, decide, execute,
    frontier,
};
use world::{
    EvidenceExt, GateExt, TodoExt, World, ag, agent, capability, criterion, ev, gate, gid, key,
    obs, owner, provider, tid, todo, ts, turn, ws,
};

/// Every stored variant, by an exhaustive match: a new variant does not compile until the
/// history below produces it and this list names it.
fn variant(event: &Event) -> usize {
    match event {
        Event::GoalCreated { .. } => 0,
        Event::GoalAmended { .. } => 1,
        Event::GoalAbandoned { .. } => 2,
        Event::ClosureDeclared { .. } => 3,
        Event::TodoAdded { .. } => 4,
        Event::TodoReassigned { .. } => 5,
        Event::TodoDeferred { .. } => 6,
        Event::TodoBlocked { .. } => 7,
        Event::TodoUnblocked { .. } => 8,
        Event::TodoSuperseded { .. } => 9,
        Event::LeaseAcquired { .. } => 10,
        Event::LeaseRenewed { .. } => 11,
        Event::LeaseReleased { .. } => 12,
        Event::LeaseHandedOff { .. } => 13,
        Event::TurnBegun { .. } => 14,
        Event::TurnSettled { .. } => 15,
        Event::OutcomeAbsent { .. } => 16,
        Event::GateOpened { .. } => 17,
        Event::GateResolved { .. } => 18,
        Event::GateRejected { .. } => 19,
        Event::GateWithdrawn { .. } => 20,
        Event::ObservationRecorded { .. } => 21,
        Event::EvidenceRecorded { .. } => 22,
        Event::ObligationRaised { .. } => 23,
        Event::ObligationDischarged { .. } => 24,
        Event::WorkspaceReported { .. } => 25,
        Event::TurnTakenOver { .. } => 26,
        Event::EffectIntended { .. } => 27,
        Event::EffectRecorded { .. } => 28,
        Event::GateAnswerRelayed { .. } => 29,
        Event::GateNoticeIntended { .. } => 30,
        Event::GateNoticeRecorded { .. } => 31,
        Event::Retired(_) => 32,
        Event::HistoryImported { .. } => 33,
    }
}
const VARIANTS: usize = 34;

fn run_turn(
    w: &mut World,
    who: &str,
    todo: &str,
    turn_id: &str,
    edit: impl FnOnce(&mut loopx_kernel::Settlement),
) {
    w.claim(who, todo);
    w.begin(who, todo, turn_id);
    w.settle(who, todo, turn_id, edit);
}

/// The seed's goal two hours in, with every kind of fact recorded once or more; the goal is
/// still live, so decisions on it differ by agent and time.
#[allow(clippy::too_many_lines)]
fn history() -> World {
    let mut w = World::with(|s| {
        s.criteria = vec![
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
        ];
        s.budget = Limits {
            turns: Some(40),
            tokens: Some(500_000),
            ..Limits::UNLIMITED
        };
        s.grants
            .insert(agent("b"), [GrantedAction::Reassign].into());
    });
    w.amend(vec![
        Amendment::SetObjective {
            objective: "add --format json to the CLI without changing the default output".into(),
        },
        Amendment::Grant {
            agent: agent("b"),
            action: GrantedAction::TakeOver,
        },
        Amendment::MapLogin {
            person: loopx_kernel::PersonId::new("maintainer").unwrap(),
            provider: loopx_kernel::SourceId::new("github").unwrap(),
            login: "Maintainer-GH".into(),
        },
    ]);
    w.report("a", ws("/src/cli", "/src/cli/.git"));
    w.report("b", ws("/src/cli-b", "/src/cli/.git"));
    w.add(todo("edit", "change the output layer and add tests").writes(&["src/format"]));
    w.add(
        todo("contract", "publish the JSON contract")
            .needs("api:error_code")
            .after(&["edit"]),
    );
    w.add(
        todo("watch-ci", "watch CI on the pull request")
            .monitor("ci:acme/cli#12", Duration::minutes(30)),
    );
    w.add(todo("bench", "benchmark the JSON writer").assigned("a"));
    w.add(todo("regen", "regenerate the schema fixtures").idempotent());
    w.add(todo("publish", "publish the release notes"));
    w.add(todo("old-docs", "update the old docs page"));
    w.add(todo("rerun", "rerun the flaky job"));
    w.observe(obs("ci:acme/cli#12", "git:abc123", "pending"));
    w.run(
        &ag("b"),
        Command::Reassign {
            todo: tid("bench"),
            to: Some(agent("b")),
            grant_reason: Some("a is busy with the output layer".into()),
        },
    );
    w.run(
        &ag("a"),
        Command::Defer {
            todo: tid("rerun"),
            until: ResumeCondition::ObservationChanged {
                key: key("ci:acme/cli#12"),
            },
            grant_reason: None,
        },
    );
    w.run(
        &ag("a"),
        Command::Block {
            todo: tid("regen"),
            reason: "the fixture generator is broken".into(),
            grant_reason: None,
        },
    );
    w.run(
        &ag("a"),
        Command::Unblock {
            todo: tid("regen"),
            grant_reason: None,
        },
    );
    w.run(
        &owner(),
        Command::Supersede {
            todo: tid("old-docs"),
            reason: "the docs moved to the book".into(),
            replacement: Some(todo("book", "document --format json in the book")),
            grant_reason: None,
        },
    );
    w.gate(
        gate("error-code", "is error_code acceptable as a stable field?")
            .on_decision("api:error_code")
            .due("30 17:00")
            .keep_asking(),
    );
    w.gate(gate("yaml", "should --format yaml ship too?").on_decision("scope:yaml"));
    w.gate(gate("rename", "may the flag become --output?").on_decision("api:flag-name"));
    w.gate(gate("fields", "are the field names final?").on_decision("api:fields"));

    w.at("10:05");
    w.claim("a", "edit");
    w.run(
        &ag("a"),
        Command::Renew {
            todo: tid("edit"),
            epoch: 1,
            ttl: Some(Duration::minutes(30)),
        },
    );
    w.begin("a", "edit", "t1");
    w.at("10:11");
    w.settle("a", "edit", "t1", |s| {
        s.verdict.summary = "42 tests passed".into();
        s.evidence = vec![
            ev("ev-text", "tests.text_output", "git:abc123"),
            ev("ev-json", "tests.json_schema", "git:abc123"),
        ];
        s.transition = Transition::Complete {
            continuation: Continuation::Successors(vec![
                todo("review-edit", "review the output layer change").review_of("edit"),
            ]),
        };
        s.usage = Amounts {
            turns: 1,
            tokens: 18_000,
            cost_micros: 240_000,
            wall_ms: 480_000,
        };
    });
    run_turn(&mut w, "c", "watch-ci", "poll-1", |s| {
        s.transition = Transition::KeepOpen;
        s.observations = vec![obs("ci:acme/cli#12", "git:abc123", "running")];
        s.usage = Amounts::ZERO;
    });
    run_turn(&mut w, "b", "bench", "bench-1", |s| {
        s.verdict.outcome = VerdictOutcome::Progress;
        s.transition = Transition::Block {
            reason: "no quiet benchmark runner".into(),
        };
    });
    w.claim("a", "regen");
    w.run(
        &ag("a"),
        Command::Release {
            todo: tid("regen"),
            epoch: 1,
        },
    );
    run_turn(&mut w, "a", "regen", "regen-1", |s| {
        s.verdict.outcome = VerdictOutcome::Progress;
        s.transition = Transition::Defer {
            until: ResumeCondition::At { at: ts("12:00") },
        };
    });
    w.claim("a", "book");
    w.begin("a", "book", "book-1");
    w.run(
        &ag("a"),
        Command::Handoff {
            todo: tid("book"),
            epoch: 1,
            to: agent("b"),
            note: HandoffNote {
                next_action: "write the JSON chapter".into(),
                stop_condition: "the book builds with the new chapter".into(),
                evidence: vec![world::eid("ev-json")],
            },
            grant_reason: None,
        },
    );

    w.at("10:12");
    w.claim_for("c", "publish", Some(Duration::minutes(5)));
    w.begin("c", "publish", "publish-1");
    w.at("10:20");
    w.run(
        &ag("c"),
        Command::ResolveOutcome {
            todo: tid("publish"),
            turn: turn("publish-1"),
            resolution: OutcomeResolution::Absent {
                note: "no release notes on the release page".into(),
            },
            grant_reason: None,
        },
    );
    w.answer("error-code", "yes, keep error_code");
    w.run(
        &owner(),
        Command::AnswerGate {
            gate: gid("yaml"),
            answer: GateAnswer::Reject {
                reason: "not in this release".into(),
            },
        },
    );
    w.run(
        &provider(),
        Command::IntendGateNotice {
            gate: gid("fields"),
            effect: loopx_kernel::EffectIntent::new(
                loopx_kernel::EffectId::new("notice-fields").unwrap(),
                "github.comment",
                "acme/cli#12",
                "g/gate-notice/fields",
                [
                    ("repo".to_owned(), "acme/cli".to_owned()),
                    ("number".to_owned(), "12".to_owned()),
                    ("body".to_owned(), "gate `fields` waits for you".to_owned()),
                ]
                .into_iter()
                .collect(),
            ),
        },
    );
    w.run(
        &provider(),
        Command::RecordGateNotice {
            gate: gid("fields"),
            outcome: loopx_kernel::EffectOutcome::Performed,
            note: Some("performed".into()),
        },
    );
    w.run(
        &provider(),
        Command::RelayGateAnswer {
            gate: gid("fields"),
            answer: GateAnswer::Resolve {
                answer: "yes, they are final".into(),
            },
            relay: loopx_kernel::Relay {
                login: "maintainer-gh".into(),
                delivery: "72d3162e-cc78-11e3-81ab-4c9367dc0958".into(),
                message: Some("1984".into()),
            },
        },
    );
    w.run(
        &ag("a"),
        Command::WithdrawGate {
            gate: gid("rename"),
            reason: "the flag keeps its name".into(),
        },
    );
    w.at("10:25");
    w.evidence(ev("ev-unit", "tests.unit", "git:abc123").ttl(Duration::hours(24)));
    w.run(
        &capability(),
        Command::RaiseObligation {
            id: ObligationId::new("split-writer").unwrap(),
            kind: ObligationKind::Replan,
            detail: "the writer and the formatter change together too often".into(),
            owner: Some(agent("a")),
        },
    );
    w.run(
        &ag("a"),
        Command::Discharge {
            obligation: ObligationId::new("split-writer").unwrap(),
            changes: vec![PlanChange::AddTodo {
                todo: todo("split", "split the writer from the formatter"),
            }],
        },
    );
    w.run(
        &ag("a"),
        Command::DeclareClosure {
            reason: "the contract is the last open item".into(),
        },
    );
    // An effect through the outbox: intended under the lease, recorded, and the lease given up.
    w.claim("a", "split");
    w.begin("a", "split", "split-1");
    let params = [
        ("repo", "acme/cli"),
        ("number", "12"),
        ("body", "split done"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let effect = EffectIntent::new(
        EffectId::new("split-1-e1-x0").unwrap(),
        "github.comment",
        "acme/cli#12",
        "g/split-1/0",
        params,
    );
    w.run(
        &ag("a"),
        Command::IntendEffect {
            todo: tid("split"),
            epoch: 1,
            effect,
        },
    );
    w.run(
        &ag("a"),
        Command::RecordEffect {
            id: EffectId::new("split-1-e1-x0").unwrap(),
            outcome: EffectOutcome::Performed,
            note: Some("posted".into()),
            grant_reason: None,
        },
    );
    w.run(
        &ag("a"),
        Command::Release {
            todo: tid("split"),
            epoch: 1,
        },
    );
    w
}

/// The history, then abandoned by the owner: the only variant a live goal cannot show. Just
/// before, a second session of agent `a` takes a prepared turn over, fencing the first, and
/// settles it under the new epoch, and the owner shortens the retirement horizon to a quarter
/// of an hour; after it, the owner retires what the abandoned goal holds beyond that horizon.
fn abandoned_history() -> World {
    let mut w = history();
    w.at("10:28");
    w.claim("a", "split");
    w.begin("a", "split", "split-2");
    w.run(
        &ag("a"),
        Command::TakeOverTurn {
            todo: tid("split"),
            epoch: 2,
            turn: turn("split-2"),
            ttl: None,
        },
    );
    w.settle("a", "split", "split-2", |_| {});
    let mut policy = w.goal.spec.policy.clone();
    policy.retire_after = Some(Duration::minutes(15));
    w.run(
        &owner(),
        Command::AmendGoal {
            expected_revision: w.goal.goal_revision,
            amendments: vec![Amendment::SetPolicy { policy }],
        },
    );
    w.at("10:30");
    w.run(
        &owner(),
        Command::AbandonGoal {
            reason: "upstream shipped JSON output".into(),
        },
    );
    w.at("10:31");
    w.run(&owner(), Command::Retire {});
    // An import that accepted unverified commits ends the history it took with this event; no
    // command makes it.
    let imported = RecordedEvent {
        schema: SCHEMA_VERSION,
        revision: w.goal.revision + 1,
        at: w.now,
        actor: owner(),
        event: Event::HistoryImported {
            verified: 40,
            unverified: 1,
            first_unverified: 12,
        },
    };
    w.goal.apply(&imported).unwrap();
    w.log.push(imported);
    w
}

fn pretty(value: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(value).unwrap()
}

#[test]
fn history_produces_every_event_variant() {
    let w = abandoned_history();
    let mut seen = [false; VARIANTS];
    for recorded in &w.log {
        seen[variant(&recorded.event)] = true;
    }
    let missing: Vec<usize> = (0..VARIANTS).filter(|i| !seen[*i]).collect();
    assert!(
        missing.is_empty(),
        "variants the history never produces: {missing:?}"
    );
    assert!(check_invariants(&w.goal, w.now).is_empty());
}

#[test]
fn events_json() {
    let w = abandoned_history();
    insta::assert_snapshot!(pretty(&w.log));
}

#[test]
fn state_json() {
    let w = history();
    insta::assert_snapshot!(pretty(&w.goal));
}

#[test]
fn every_event_round_trips() {
    for recorded in &abandoned_history().log {
        let json = serde_json::to_string(recorded).unwrap();
        let back: RecordedEvent = serde_json::from_str(&json).unwrap();
        assert_eq!(&back, recorded, "{json}");
    }
}

/// Events and snapshots written before turns were classified (no `result` on `turn_settled`, no
/// `retry`, `stall_turns` or `stall_goal_turns` in the policy) still decode and fold to the same state.
#[test]
fn histories_from_before_the_retry_policy_still_decode() {
    let w = abandoned_history();
    let mut old: serde_json::Value = serde_json::from_str(&pretty(&w.log)).unwrap();
    let mut stripped = 0;
    for event in old.as_array_mut().unwrap() {
        let body = event["event"].as_object_mut().unwrap();
        stripped += usize::from(body.remove("result").is_some());
        if let Some(policy) = body.get_mut("spec").and_then(|s| s.get_mut("policy")) {
            let policy = policy.as_object_mut().unwrap();
            policy.remove("retry").unwrap();
            policy.remove("stall_turns").unwrap();
            policy.remove("stall_goal_turns").unwrap();
        }
    }
    assert!(stripped > 0, "the history settles turns");
    let old: Vec<RecordedEvent> = serde_json::from_value(old).unwrap();
    assert_eq!(GoalState::replay(&old).unwrap(), w.goal);
    let mut snapshot: serde_json::Value = serde_json::from_str(&pretty(&w.goal)).unwrap();
    let policy = snapshot["spec"]["policy"].as_object_mut().unwrap();
    policy.remove("retry");
    policy.remove("stall_turns");
    policy.remove("stall_goal_turns");
    let loaded: GoalState = serde_json::from_value(snapshot).unwrap();
    assert_eq!(loaded, w.goal);
}

/// Snapshots written while the goal kept every turn id it ever began (`used_turns`) still
/// load, to the state their history folds to now: the list is read and dropped.
#[test]
fn snapshots_that_list_every_used_turn_still_load() {
    for w in [history(), abandoned_history()] {
        let mut snapshot: serde_json::Value = serde_json::from_str(&pretty(&w.goal)).unwrap();
        let turns = serde_json::json!(["bench-1", "book-1", "poll-1"]);
        snapshot
            .as_object_mut()
            .unwrap()
            .insert("used_turns".into(), turns);
        let loaded: GoalState = serde_json::from_value(snapshot).unwrap();
        assert_eq!(loaded, w.goal);
        assert!(!pretty(&loaded).contains("used_turns"));
    }
}

/// A turn begun under event schema 1 knows no epoch it began under (0), so the outbox keeps
/// the keys its effects were first intended with, and its state is the same whether folded
/// from its events or read from a snapshot written then; under the current schema the run
/// records its epoch.
#[test]
fn a_turn_begun_under_schema_1_keeps_its_first_keys_from_events_and_from_snapshots() {
    let mut w = World::new();
    w.add(todo("edit", "edit the parser"));
    let epoch = w.claim("a", "edit");
    w.begin("a", "edit", "edit.t1");
    let began_under = |state: &GoalState| {
        state.todos[&tid("edit")]
            .turn_in_flight()
            .map(|turn| turn.began_under)
    };
    assert_eq!(
        began_under(&GoalState::replay(&w.log).unwrap()),
        Some(epoch)
    );
    let mut old = w.log.clone();
    for event in &mut old {
        event.schema = 1;
    }
    let folded = GoalState::replay(&old).unwrap();
    assert_eq!(began_under(&folded), Some(0));
    let mut snapshot: serde_json::Value = serde_json::from_str(&pretty(&w.goal)).unwrap();
    let turn = &mut snapshot["todos"]["edit"]["lease"]["turn"];
    assert_eq!(turn["began_under"], serde_json::json!(epoch));
    turn.as_object_mut().unwrap().remove("began_under");
    let loaded: GoalState = serde_json::from_value(snapshot).unwrap();
    assert_eq!(loaded, folded);
}

#[test]
fn state_round_trips_with_its_index() {
    for w in [history(), abandoned_history()] {
        let back: GoalState = serde_json::from_str(&pretty(&w.goal)).unwrap();
        // Equality covers the derived index, which is rebuilt on load, never stored.
        assert_eq!(back, w.goal);
    }
}

#[test]
fn replay_equals_the_live_state() {
    for w in [history(), abandoned_history()] {
        assert_eq!(GoalState::replay(&w.log).unwrap(), w.goal);
        let stored: Vec<RecordedEvent> = serde_json::from_str(&pretty(&w.log)).unwrap();
        assert_eq!(GoalState::replay(&stored).unwrap(), w.goal);
    }
}

#[test]
fn decisions_round_trip() {
    let w = history();
    for who in ["a", "b", "c", "z"] {
        let decision = w.decide(who);
        let back: Decision = serde_json::from_str(&pretty(&decision)).unwrap();
        assert_eq!(back, decision);
    }
}

/// A goal where a question and other agents' leases hold everything up.
fn held_up() -> World {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));
    w.add(todo("docs", "document the error_code field").excluding("c"));
    w.add(todo("bench", "benchmark the JSON writer").assigned("b"));
    w.gate(
        gate("naming", "is error_code acceptable as a stable field?")
            .on_todos(&["docs"])
            .due("12:00"),
    );
    w.claim_for("b", "edit", Some(Duration::hours(3)));
    w
}

/// A store loads the snapshot, not the history: at every point of a history, the loaded state
/// must decide like the live one for every agent and at times where leases expire, deferrals
/// resume, evidence outlives its time-to-live and gates pass their deadlines.
#[test]
fn snapshot_decides_like_the_original() {
    let times = [
        "10:20", "10:41", "11:00", "12:00", "30 10:25", "30 17:00", "30 18:00",
    ];
    let mut kinds = std::collections::BTreeSet::new();
    for log in [abandoned_history().log, held_up().log] {
        for end in 1..=log.len() {
            let live = GoalState::replay(&log[..end]).unwrap();
            let loaded: GoalState = serde_json::from_str(&pretty(&live)).unwrap();
            assert_eq!(loaded, live, "state after revision {end}");
            for clock in times {
                let now = ts(clock);
                for who in ["a", "b", "c", "z"] {
                    let id = agent(who);
                    let decision = decide(&live, &id, now);
                    assert_eq!(
                        decide(&loaded, &id, now),
                        decision,
                        "{who} at {clock}, revision {end}"
                    );
                    assert_eq!(frontier(&loaded, &id, now), frontier(&live, &id, now));
                    kinds.insert(decision.kind());
                }
            }
        }
    }
    // The comparison is only as strong as the variety of decisions it covers.
    assert_eq!(kinds.len(), 6, "kinds of decision compared: {kinds:?}");
}

#[test]
fn newer_schema_fails_closed() {
    let mut log = history().log;
    log[3].schema = SCHEMA_VERSION + 1;
    assert_eq!(
        GoalState::replay(&log),
        Err(ReplayError::NewerSchema {
            revision: 4,
            found: SCHEMA_VERSION + 1,
        })
    );
    log[0].schema = SCHEMA_VERSION + 1;
    assert!(matches!(
        GoalState::replay(&log),
        Err(ReplayError::NewerSchema { revision: 1, .. })
    ));
}

#[test]
fn newer_schema_in_stored_json_fails_closed() {
    let log = history().log;
    let json = serde_json::to_string(&log[5]).unwrap();
    let newer = json.replacen(
        &format!("\"schema\":{SCHEMA_VERSION}"),
        &format!("\"schema\":{}", SCHEMA_VERSION + 1),
        1,
    );
    assert_ne!(newer, json);
    let event: RecordedEvent = serde_json::from_str(&newer).unwrap();
    let mut state = GoalState::replay(&log[..5]).unwrap();
    let before = state.clone();
    assert!(matches!(
        state.apply(&event),
        Err(ReplayError::NewerSchema { revision: 6, .. })
    ));
    assert_eq!(state, before);
}

#[test]
fn revision_gap_fails_closed() {
    let mut log = history().log;
    log.remove(4);
    assert_eq!(
        GoalState::replay(&log),
        Err(ReplayError::RevisionGap {
            previous: 4,
            found: 6,
        })
    );
}

#[test]
fn duplicated_event_fails_closed() {
    let mut log = history().log;
    log.insert(4, log[3].clone());
    assert_eq!(
        GoalState::replay(&log),
        Err(ReplayError::RevisionGap {
            previous: 4,
            found: 4,
        })
    );
}

#[test]
fn history_must_start_with_the_goal() {
    let log = history().log;
    assert_eq!(GoalState::replay(&[]), Err(ReplayError::Empty));
    assert!(matches!(
        GoalState::replay(&log[1..]),
        Err(ReplayError::NotGenesis { .. })
    ));
}

/// A hand-edited log that is well-formed JSON but contradicts itself is an error, not a panic.
#[test]
fn contradictory_history_is_inconsistent() {
    let mut log = history().log;
    let added = log
        .iter()
        .position(|r| matches!(&r.event, Event::TodoAdded { .. }))
        .unwrap();
    let mut twice = log[added].clone();
    twice.revision = log.last().unwrap().revision + 1;
    log.push(twice);
    assert!(matches!(
        GoalState::replay(&log),
        Err(ReplayError::Inconsistent {
            event: "todo_added",
            ..
        })
    ));
}

fn event_json(index: usize) -> serde_json::Value {
    serde_json::to_value(&history().log[index]).unwrap()
}

fn parse_error(json: &str) -> String {
    serde_json::from_str::<RecordedEvent>(json)
        .unwrap_err()
        .to_string()
}

#[test]
fn malformed_json_is_an_error() {
    assert!(parse_error("{").contains("EOF"));
    assert!(parse_error("[]").contains("expected struct RecordedEvent"));
    assert!(serde_json::from_str::<GoalState>("{\"spec\": 3}").is_err());
    assert!(serde_json::from_str::<Vec<RecordedEvent>>("[{\"schema\": \"one\"}]").is_err());
}

#[test]
fn unknown_fields_are_errors() {
    let mut outer = event_json(1);
    outer["stored_by"] = "a newer kernel".into();
    assert!(parse_error(&outer.to_string()).contains("unknown field `stored_by`"));

    let mut inner = event_json(1);
    inner["event"]["priority"] = "P0".into();
    assert!(parse_error(&inner.to_string()).contains("unknown field `priority`"));

    let mut kind = event_json(1);
    kind["event"]["type"] = "goal_renamed".into();
    assert!(parse_error(&kind.to_string()).contains("unknown variant `goal_renamed`"));
}

#[test]
fn unknown_fields_in_a_state_snapshot_are_errors() {
    let w = history();
    let mut top = serde_json::to_value(&w.goal).unwrap();
    top["written_by"] = "a newer kernel".into();
    assert!(serde_json::from_value::<GoalState>(top).is_err());

    let mut todo = serde_json::to_value(&w.goal).unwrap();
    todo["todos"]["edit"]["urgency"] = 3.into();
    assert!(serde_json::from_value::<GoalState>(todo).is_err());
}

#[test]
fn invalid_ids_and_times_are_errors() {
    let mut id = serde_json::to_value(&history().log[5]).unwrap();
    assert_eq!(id["event"]["type"], "todo_added");
    id["event"]["todo"]["id"] = "has space".into();
    assert!(parse_error(&id.to_string()).contains("invalid todo id `has space`"));

    let mut long = serde_json::to_value(&history().log[5]).unwrap();
    long["event"]["todo"]["id"] = "x".repeat(loopx_kernel::MAX_ID_LEN + 1).into();
    assert!(parse_error(&long.to_string()).contains("invalid todo id"));

    let mut time = serde_json::to_value(&history().log[5]).unwrap();
    time["at"] = "2026-11-29T10:00:00".into();
    assert!(parse_error(&time.to_string()).contains("RFC 3339"));

    let mut actor = serde_json::to_value(&history().log[5]).unwrap();
    actor["actor"] = serde_json::json!({ "kind": "robot", "id": "r2" });
    assert!(parse_error(&actor.to_string()).contains("unknown variant `robot`"));
}

#[test]
fn stored_snapshot_round_trips_and_refuses_newer_schemas() {
    let w = history();
    let stored = pretty(&w.goal.snapshot());
    let loaded: loopx_kernel::Snapshot = serde_json::from_str(&stored).unwrap();
    assert_eq!(loaded.clone().into_state().unwrap(), w.goal);

    let mut newer = loaded;
    newer.schema = SCHEMA_VERSION + 1;
    assert_eq!(
        newer.into_state(),
        Err(ReplayError::NewerSchema {
            revision: w.goal.revision,
            found: SCHEMA_VERSION + 1,
        })
    );
}

/// A goal with 29 plain todos, `t100` to `t128`, and its stored snapshot text.
fn twenty_nine_todos() -> (World, String) {
    let mut w = World::with(|_| {});
    for n in 100..129 {
        w.add(todo(&format!("t{n}"), &format!("step {n}")));
    }
    let text = serde_json::to_string(&w.goal.snapshot()).unwrap();
    (w, text)
}

#[test]
fn a_todo_filed_under_another_todos_key_is_refused() {
    // Found by fuzzing a stored snapshot: the todo stored under key `t112` says it is `t113`.
    // Read as it was, the arena held 29 slots and 28 ids, and listing the todos showed `t113`
    // twice and `t112` not at all.
    let (_, text) = twenty_nine_todos();
    let changed = text.replacen(r#""id":"t112""#, r#""id":"t113""#, 1);
    assert_ne!(changed, text);
    let read = serde_json::from_str::<loopx_kernel::Snapshot>(&changed);
    let error = read.expect_err("a todo under another's key must not decode");
    assert!(
        error
            .to_string()
            .contains("todo under key `t112` has id `t113`"),
        "{error}"
    );
    assert!(matches!(
        loopx_kernel::Snapshot::decode(&changed),
        Err(loopx_kernel::SnapshotError::Malformed { .. })
    ));
}

#[test]
fn a_snapshot_decodes_only_from_the_text_the_kernel_writes() {
    let (w, text) = twenty_nine_todos();
    let decoded = loopx_kernel::Snapshot::decode(&text).unwrap();
    assert_eq!(decoded.state, w.goal);
    assert_eq!(serde_json::to_string(&decoded).unwrap(), text);
    let full = serde_json::to_string(&history().goal.snapshot()).unwrap();
    assert_eq!(
        loopx_kernel::Snapshot::decode(&full).unwrap().state,
        history().goal
    );

    // The same state, written otherwise: pretty, re-escaped, with a key moved or repeated.
    let pretty_text = pretty(&w.goal.snapshot());
    let escaped = text.replacen(r#""t100""#, r#""\u0074100""#, 1);
    let head = format!(r#"{{"schema":{SCHEMA_VERSION},"state":"#);
    let moved = text.replacen(&head, r#"{"state":"#, 1);
    let moved = format!(
        r#"{},"schema":{SCHEMA_VERSION}}}"#,
        &moved[..moved.len() - 1]
    );
    for other in [&pretty_text, &escaped, &moved] {
        let ok = serde_json::from_str::<loopx_kernel::Snapshot>(other);
        assert_eq!(ok.ok().map(|s| s.state).as_ref(), Some(&w.goal), "{other}");
        assert!(
            matches!(
                loopx_kernel::Snapshot::decode(other),
                Err(loopx_kernel::SnapshotError::NotCanonical { .. })
            ),
            "{other}"
        );
    }

    // What no history folds: a repeated todo, a gate filed under another id, a dependency on
    // nothing, two todos created at once.
    let repeated = text.replacen(r#""t101":{"id":"t101""#, r#""t100":{"id":"t100""#, 1);
    let first = text.find(r#""t100":{"#).unwrap();
    let at = first + text[first..].find(r#""created_by":"#).unwrap();
    let dangling = format!(r#"{}"depends_on":["nobody"],{}"#, &text[..at], &text[at..]);
    let twice = text.replacen(r#""seq":1,"#, r#""seq":0,"#, 1);
    let ahead = text.replacen(r#""next_seq":29"#, r#""next_seq":28"#, 1);
    for (changed, problem) in [
        (&repeated, "out of order or repeated"),
        (&dangling, "depends on `nobody`, which does not exist"),
        (&twice, "share creation sequence number 0"),
        (&ahead, "is not below the next one, 28"),
    ] {
        assert_ne!(changed, &text, "{problem}");
        let error = loopx_kernel::Snapshot::decode(changed).unwrap_err();
        assert!(error.to_string().contains(problem), "{error}");
    }
    let gates = serde_json::to_value(history().goal.snapshot()).unwrap();
    let (key, _) = gates["state"]["gates"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
    let mut misfiled = gates.clone();
    misfiled["state"]["gates"][key]["id"] = "elsewhere".into();
    let error = serde_json::from_value::<loopx_kernel::Snapshot>(misfiled).unwrap_err();
    assert!(
        error
            .to_string()
            .contains(&format!("the gate under key `{key}` has id `elsewhere`")),
        "{error}"
    );
}

#[test]
fn a_history_adding_a_todo_on_a_missing_dependency_is_inconsistent() {
    // Found by fuzzing a stored history: a changed byte left `contract` depending on a todo
    // that was never added, the history still folded, and its own snapshot was refused.
    let mut log = history().log;
    let added = log
        .iter()
        .position(|r| matches!(&r.event, Event::TodoAdded { todo } if !todo.depends_on.is_empty()))
        .unwrap();
    let Event::TodoAdded { todo } = &mut log[added].event else {
        unreachable!()
    };
    todo.depends_on = [tid("never-added")].into();
    let error = GoalState::replay(&log).unwrap_err();
    assert!(
        matches!(&error, ReplayError::Inconsistent { event: "todo_added", problem, .. }
            if problem.contains("depends on `never-added`, which does not exist")),
        "{error}"
    );
}

/// A snapshot written before the goal's last commit time was recorded (no `last_commit_at`)
/// still decodes byte-exactly; its state knows the goal's time from its creation until the
/// next event, which records it again. A policy at the default clock skew writes no
/// `clock_skew`, so specs written before it keep their bytes; another skew is written.
#[test]
fn snapshots_from_before_the_last_commit_time_keep_their_bytes() {
    let (w, text) = twenty_nine_todos();
    let stamp = format!(r#","last_commit_at":"{}""#, w.goal.last_commit());
    assert!(text.contains(&stamp), "a new snapshot records it: {text}");
    assert!(!text.contains("clock_skew"), "the default skew is left out");
    let old = text.replacen(&stamp, "", 1);
    let decoded = loopx_kernel::Snapshot::decode(&old).expect("an old snapshot decodes");
    assert_eq!(serde_json::to_string(&decoded).unwrap(), old);
    let mut state = decoded.into_state().unwrap();
    assert_eq!(state.last_commit_at, None);
    assert_eq!(state.last_commit(), state.created_at);
    let later = ts("11:00");
    let events = execute(
        Some(&state),
        &ag("a"),
        later,
        &Command::AddTodo {
            todo: todo("t200", "one more"),
        },
    )
    .unwrap();
    for event in loopx_kernel::write::stamp(state.revision, &ag("a"), later, events) {
        state.apply(&event).unwrap();
    }
    assert_eq!(state.last_commit_at, Some(later));

    let mut skewed = w.goal.spec.clone();
    skewed.policy.clock_skew = Duration::seconds(30);
    let json = serde_json::to_string(&skewed).unwrap();
    assert!(json.contains(r#""clock_skew":30000"#), "{json}");
    assert_eq!(serde_json::from_str::<GoalSpec>(&json).unwrap(), skewed);
}
