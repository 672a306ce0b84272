//! A goal's capability binding is data the spec carries: it round-trips through JSON with and
//! without a binding, a spec written before bindings existed decodes and writes back as it did,
//! the owner may change or remove it, and no one else may.

mod world;

use loopx_kernel::{
    Amendment, CapabilityBinding, Command, GoalSpec, GoalState, RecordedEvent, Refusal,
};
use serde_json::json;
use world::{World, ag, spec};

fn prfix() -> CapabilityBinding {
    CapabilityBinding::new(
        "prfix",
        json!({ "pulls": ["acme/cli#42"], "required_checks": ["build"] }),
    )
    .expect("a valid name")
}

#[test]
fn a_spec_round_trips_with_and_without_a_binding() {
    let plain = spec();
    let text = serde_json::to_string(&plain).unwrap();
    assert!(!text.contains("capability"), "no binding, no field: {text}");
    assert_eq!(serde_json::from_str::<GoalSpec>(&text).unwrap(), plain);

    let mut bound = spec();
    bound.capability = Some(Box::new(prfix()));
    let value = serde_json::to_value(&bound).unwrap();
    assert_eq!(
        value["capability"],
        json!({ "name": "prfix", "config": { "pulls": ["acme/cli#42"], "required_checks": ["build"] } })
    );
    assert_eq!(serde_json::from_value::<GoalSpec>(value).unwrap(), bound);
}

#[test]
fn the_builder_binds_a_capability_and_refuses_an_invalid_name() {
    let spec = GoalSpec::builder("g", "fix the PR", "olivia")
        .capability("prfix", json!({ "pulls": ["acme/cli#42"] }))
        .build()
        .unwrap();
    assert_eq!(
        spec.capability.as_ref().map(|b| b.name.as_str()),
        Some("prfix")
    );
    assert!(
        GoalSpec::builder("g", "fix the PR", "olivia")
            .capability("not a name", json!({}))
            .build()
            .is_err()
    );
}

#[test]
fn a_binding_without_config_reads_as_an_empty_one_and_unknown_fields_are_refused() {
    let binding: CapabilityBinding = serde_json::from_str(r#"{"name": "research"}"#).unwrap();
    assert_eq!(binding, CapabilityBinding::named("research").unwrap());
    assert_eq!(binding.config, json!({}));
    assert!(serde_json::from_str::<CapabilityBinding>(r#"{"name": "x", "cfg": {}}"#).is_err());
    assert!(serde_json::from_str::<CapabilityBinding>(r#"{"name": "no spaces"}"#).is_err());
}

/// A history recorded before bindings existed: its `goal_created` event has no `capability`.
#[test]
fn an_old_history_decodes_writes_back_byte_for_byte_and_binds_nothing() {
    let w = World::new();
    let text = serde_json::to_string(&w.log).unwrap();
    assert!(!text.contains("capability"), "{text}");
    let old: Vec<RecordedEvent> = serde_json::from_str(&text).unwrap();
    assert_eq!(serde_json::to_string(&old).unwrap(), text);
    let state = GoalState::replay(&old).unwrap();
    assert_eq!(state.spec.capability, None);
    assert_eq!(state, w.goal);
}

#[test]
fn the_owner_binds_changes_and_removes_the_capability() {
    let mut w = World::new();
    w.amend(vec![Amendment::SetCapability {
        capability: Some(prfix()),
    }]);
    assert_eq!(w.goal.spec.capability.as_deref(), Some(&prfix()));
    let replayed = GoalState::replay(&w.log).unwrap();
    assert_eq!(replayed.spec.capability.as_deref(), Some(&prfix()));

    let other = CapabilityBinding::new("prfix", json!({ "required_approvals": 2 })).unwrap();
    w.amend(vec![Amendment::SetCapability {
        capability: Some(other.clone()),
    }]);
    assert_eq!(w.goal.spec.capability.as_deref(), Some(&other));

    w.amend(vec![Amendment::SetCapability { capability: None }]);
    assert_eq!(w.goal.spec.capability, None);
    assert_eq!(GoalState::replay(&w.log).unwrap(), w.goal);
}

#[test]
fn only_the_owner_changes_the_binding() {
    let mut w = World::with(|spec| spec.capability = Some(Box::new(prfix())));
    let expected_revision = w.goal.goal_revision;
    let refusal = w.refuse(
        &ag("a"),
        Command::AmendGoal {
            expected_revision,
            amendments: vec![Amendment::SetCapability { capability: None }],
        },
    );
    assert!(
        matches!(refusal, Refusal::NotGoalOwner { .. }),
        "{refusal:?}"
    );
    assert_eq!(w.goal.spec.capability.as_deref(), Some(&prfix()));
}
