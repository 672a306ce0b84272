//! People answer where they are: the goal's owner maps a person to a provider login, and a
//! provider relays that login's answer to the gates the person owns. Nobody else's words
//! answer a gate, through a relay or not.

mod world;

use loopx_kernel::{
    Actor, Amendment, Command, Event, GateAnswer, GateStatus, PersonId, Relay, SourceId, decide,
};
use world::{GateExt, World, ag, gate, gid, owner, provider};

fn person(name: &str) -> PersonId {
    PersonId::new(name).unwrap()
}

fn github() -> SourceId {
    SourceId::new("github").unwrap()
}

fn map(name: &str, login: &str) -> Amendment {
    Amendment::MapLogin {
        person: person(name),
        provider: github(),
        login: login.into(),
    }
}

fn relay(gate: &str, login: &str, answer: GateAnswer) -> Command {
    Command::RelayGateAnswer {
        gate: gid(gate),
        answer,
        relay: Relay {
            login: login.into(),
            delivery: "72d3162e-cc78-11e3-81ab-4c9367dc0958".into(),
            message: Some("comment:1984".into()),
        },
    }
}

fn yes() -> GateAnswer {
    GateAnswer::Resolve {
        answer: "error_code is fine".into(),
    }
}

/// A goal whose owner (`maintainer`) mapped their GitHub login, with a pending gate of theirs.
fn mapped() -> World {
    let mut w = World::new();
    w.amend(vec![map("maintainer", "Maintainer-GH")]);
    w.gate(gate("naming", "is error_code acceptable as a stable field?").whole_goal());
    w
}

#[test]
fn the_owners_mapped_login_answers_their_gate_and_the_log_says_who_and_where() {
    let mut w = mapped();
    assert_eq!(
        w.goal.person_of_login(&github(), "maintainer-gh"),
        Some(&person("maintainer"))
    );
    assert_eq!(
        w.goal.login_of(&person("maintainer"), &github()),
        Some("maintainer-gh")
    );
    // GitHub's logins compare case-insensitively.
    let events = w.run(&provider(), relay("naming", "MAINTAINER-gh", yes()));
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].actor, provider());
    let Event::GateAnswerRelayed {
        gate,
        answer,
        person: answered_for,
        relay,
    } = &events[0].event
    else {
        panic!("not a relayed answer: {:?}", events[0].event);
    };
    assert_eq!((gate, answer), (&gid("naming"), &yes()));
    assert_eq!(answered_for, &person("maintainer"));
    assert_eq!(relay.login, "MAINTAINER-gh");
    assert_eq!(relay.message.as_deref(), Some("comment:1984"));
    let GateStatus::Resolved { by, answer, .. } = &w.goal.gates[&gid("naming")].status else {
        panic!("gate not resolved");
    };
    assert_eq!((by, answer.as_str()), (&owner(), "error_code is fine"));
    // The gate no longer holds the goal: nothing asks the owner any more.
    let decision = decide(&w.goal, &world::agent("a"), w.now);
    assert_ne!(decision.kind(), "ask", "{decision:?}");
}

#[test]
fn a_relayed_rejection_rejects_the_gate_as_its_owner() {
    let mut w = mapped();
    w.run(
        &provider(),
        relay(
            "naming",
            "maintainer-gh",
            GateAnswer::Reject {
                reason: "call it code".into(),
            },
        ),
    );
    let GateStatus::Rejected { by, .. } = &w.goal.gates[&gid("naming")].status else {
        panic!("gate not rejected");
    };
    assert_eq!(by, &owner());
}

#[test]
fn someone_elses_login_cannot_answer_and_changes_nothing() {
    let mut w = mapped();
    w.amend(vec![map("reviewer", "reviewer-gh")]);
    for login in ["reviewer-gh", "stranger-gh"] {
        let refusal = w.refuse(&provider(), relay("naming", login, yes()));
        assert_eq!(refusal.code(), "relay_not_gate_owner");
        let text = refusal.to_string();
        assert!(
            text.contains(login) && text.contains("person:maintainer"),
            "{text}"
        );
        let (_, hint) = loopx_kernel::words::refusal_words(&refusal);
        assert!(
            hint.contains(&format!(
                "loopx goal amend --map-login maintainer=github:{login}"
            )),
            "{hint}"
        );
    }
    // Only a provider relays; the owner answers with `answer_gate` as ever.
    assert_eq!(
        w.refuse(&ag("a"), relay("naming", "maintainer-gh", yes()))
            .code(),
        "actor_not_permitted"
    );
    let owner_relaying = w.refuse(&owner(), relay("naming", "maintainer-gh", yes()));
    assert_eq!(owner_relaying.code(), "actor_not_permitted");
}

#[test]
fn a_login_relayed_by_another_provider_speaks_for_nobody() {
    let mut w = mapped();
    let gitlab = Actor::Provider(SourceId::new("gitlab").unwrap());
    let refusal = w.refuse(&gitlab, relay("naming", "maintainer-gh", yes()));
    assert_eq!(refusal.code(), "relay_not_gate_owner");
}

#[test]
fn an_unmapped_login_answers_nothing_any_more() {
    let mut w = mapped();
    w.amend(vec![Amendment::UnmapLogin {
        provider: github(),
        login: "maintainer-GH".into(),
    }]);
    assert!(w.goal.logins.is_empty());
    let refusal = w.refuse(&provider(), relay("naming", "maintainer-gh", yes()));
    assert_eq!(refusal.code(), "relay_not_gate_owner");
}

#[test]
fn login_mappings_are_refused_with_the_verb_that_fixes_them() {
    let mut w = mapped();
    let amend = |amendments| Command::AmendGoal {
        expected_revision: 1,
        amendments,
    };
    let taken = w.refuse(&owner(), amend(vec![map("reviewer", "maintainer-gh")]));
    assert_eq!(taken.code(), "login_taken");
    let (_, hint) = loopx_kernel::words::refusal_words(&taken);
    assert!(
        hint.contains("loopx goal amend --unmap-login github:maintainer-gh"),
        "{hint}"
    );
    let malformed = w.refuse(&owner(), amend(vec![map("reviewer", "@reviewer")]));
    assert_eq!(malformed.code(), "login_malformed");
    let (_, hint) = loopx_kernel::words::refusal_words(&malformed);
    assert!(hint.contains("--map-login PERSON=github:LOGIN"), "{hint}");
    let twice = w.refuse(&owner(), amend(vec![map("maintainer", "maintainer-gh")]));
    assert_eq!(twice.code(), "duplicate_id");
    let never = w.refuse(
        &owner(),
        amend(vec![Amendment::UnmapLogin {
            provider: github(),
            login: "nobody".into(),
        }]),
    );
    assert_eq!(never.code(), "unknown_reference");
    // Within one amendment, a login is taken as soon as an earlier change maps it.
    let in_one = w.refuse(
        &owner(),
        amend(vec![map("reviewer", "shared"), map("maintainer", "shared")]),
    );
    assert_eq!(in_one.code(), "login_taken");
    let not_owner = w.refuse(&ag("a"), amend(vec![map("reviewer", "reviewer-gh")]));
    assert_eq!(not_owner.code(), "not_goal_owner");
}

#[test]
fn the_mappings_survive_a_snapshot_and_a_replay() {
    let w = mapped();
    let json = serde_json::to_string(&w.goal).unwrap();
    assert!(
        json.contains("\"logins\":{\"github\":{\"maintainer-gh\":\"maintainer\"}}"),
        "{json}"
    );
    let back: loopx_kernel::GoalState = serde_json::from_str(&json).unwrap();
    assert_eq!(back, w.goal);
    let replayed = loopx_kernel::GoalState::replay(&w.log).unwrap();
    assert_eq!(replayed.logins, w.goal.logins);
}
