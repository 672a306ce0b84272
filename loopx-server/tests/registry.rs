//! The registry turns a goal's binding into its capability: each shipped capability is built
//! from its configuration, and an unknown name, a configuration that does not decode and one
//! the capability refuses are each a typed error that says what is known or what is wrong.

use loopx_kernel::{Actor, CapabilityBinding, SourceId};
use loopx_server::capabilities::{Bound, ConfigProblem, Registry, RegistryError};
use serde_json::{Value, json};

fn binding(name: &str, config: Value) -> CapabilityBinding {
    CapabilityBinding::new(name, config).expect("a valid name")
}

fn id(text: &str) -> SourceId {
    SourceId::new(text).expect("a valid id")
}

fn error(name: &str, config: Value) -> RegistryError {
    Registry::shipped()
        .bind(&binding(name, config))
        .expect_err("refused")
}

#[test]
fn the_shipped_registry_knows_prfix_automl_and_research() {
    let registry = Registry::shipped();
    let names: Vec<&str> = registry.names().collect();
    assert_eq!(names, ["automl", "prfix", "research"]);
}

#[test]
fn prfix_is_built_from_its_config_and_asks_for_its_pulls_through_github() {
    let bound = Registry::shipped()
        .bind(&binding(
            "prfix",
            json!({ "pulls": ["acme/cli#42", "acme/cli#7"], "required_approvals": 2 }),
        ))
        .expect("built");
    assert_eq!(bound.capability().source(), &id("prfix"));
    let watched: Vec<(&str, &str)> = bound
        .watches()
        .iter()
        .map(|w| (w.provider.as_str(), w.key.as_str()))
        .collect();
    assert_eq!(
        watched,
        [("github", "pr:acme/cli#42"), ("github", "pr:acme/cli#7")]
    );
    assert_eq!(
        bound.actors(),
        [
            Actor::Capability(id("prfix")),
            Actor::Provider(id("github"))
        ]
    );
    // No configuration at all is the default one, watching nothing.
    for empty in [json!({}), Value::Null] {
        let bound = Registry::shipped()
            .bind(&binding("prfix", empty))
            .expect("built");
        assert!(bound.watches().is_empty());
        assert_eq!(bound.actors(), [Actor::Capability(id("prfix"))]);
    }
}

#[test]
fn automl_is_built_from_its_contract() {
    let bound = Registry::shipped()
        .bind(&binding(
            "automl",
            json!({ "primary": "accuracy", "direction": "higher_is_better",
                    "min_effect": 0.01, "baseline": "base" }),
        ))
        .expect("built");
    assert_eq!(bound.capability().source(), &id("automl"));
    assert!(bound.watches().is_empty());
}

#[test]
fn research_is_built_from_its_config_under_its_configured_name() {
    let bound = Registry::shipped()
        .bind(&binding("research", json!({ "decider": "olivia" })))
        .expect("built");
    assert_eq!(bound.capability().source(), &id("research"));
    let renamed = Registry::shipped()
        .bind(&binding("research", json!({ "name": "lab" })))
        .expect("built");
    assert_eq!(renamed.actor(), Actor::Capability(id("lab")));
}

#[test]
fn an_unknown_name_lists_the_known_ones() {
    let error = error("triage", json!({}));
    assert_eq!(
        error,
        RegistryError::Unknown {
            name: id("triage"),
            known: vec!["automl".into(), "prfix".into(), "research".into()],
        }
    );
    assert_eq!(
        error.to_string(),
        "no capability named `triage` is registered; known: automl, prfix, research"
    );
}

#[test]
fn a_malformed_config_names_the_field_that_is_wrong() {
    let wrong_type = error("prfix", json!({ "required_approvals": "two" }));
    let RegistryError::Malformed { name, path, detail } = &wrong_type else {
        panic!("{wrong_type:?}");
    };
    assert_eq!(
        (name.as_str(), path.as_str()),
        ("prfix", "required_approvals")
    );
    assert!(detail.contains("invalid type"), "{detail}");

    let unknown_field = error("prfix", json!({ "merge": true }));
    assert!(
        matches!(&unknown_field, RegistryError::Malformed { detail, .. } if detail.contains("unknown field `merge`")),
        "{unknown_field:?}"
    );

    let nested = error(
        "automl",
        json!({ "primary": "accuracy", "direction": "higher_is_better", "baseline": "base",
                "guardrails": { "cost_cap": "lots" } }),
    );
    assert!(
        matches!(&nested, RegistryError::Malformed { path, .. } if path == "guardrails.cost_cap"),
        "{nested:?}"
    );

    let missing = error("automl", json!({}));
    assert!(
        matches!(&missing, RegistryError::Malformed { path, detail, .. } if path == "." && detail.contains("missing field `primary`")),
        "{missing:?}"
    );
    assert!(
        matches!(
            error("research", json!([1])),
            RegistryError::Malformed { .. }
        ),
        "a list is not a configuration"
    );
    assert_eq!(
        wrong_type.to_string(),
        format!(
            "the configuration of capability `prfix` is malformed at `required_approvals`: {detail}"
        )
    );
}

#[test]
fn a_config_the_capability_refuses_is_refused_in_its_words() {
    let cases = [
        (
            "prfix",
            json!({ "required_approvals": 0 }),
            "required_approvals must be at least 1",
        ),
        (
            "prfix",
            json!({ "pulls": ["acme/cli"] }),
            "pull request `acme/cli` is not written owner/name#number",
        ),
        (
            "automl",
            json!({ "primary": "accuracy", "direction": "higher_is_better", "baseline": "base",
                    "max_attempts": 0 }),
            "max_attempts must be at least 1",
        ),
        (
            "research",
            json!({ "decision_window": 0 }),
            "decision_window must be longer than zero",
        ),
    ];
    for (name, config, words) in cases {
        let error = error(name, config);
        let RegistryError::Refused {
            name: refused,
            detail,
        } = &error
        else {
            panic!("{name}: {error:?}");
        };
        assert_eq!(refused.as_str(), name);
        assert!(detail.starts_with(words), "{name}: {detail}");
        assert!(
            error.to_string().starts_with(&format!(
                "capability `{name}` refused its configuration: {words}"
            )),
            "{error}"
        );
    }
}

#[test]
fn a_host_adds_and_replaces_capabilities_by_name() {
    struct Quiet(SourceId);
    impl loopx_kernel::seams::Capability for Quiet {
        fn source(&self) -> &SourceId {
            &self.0
        }
        fn judge(
            &self,
            _: &loopx_kernel::GoalState,
            _: &loopx_kernel::AgentId,
            _: loopx_kernel::Timestamp,
        ) -> Vec<loopx_kernel::seams::Proposal> {
            Vec::new()
        }
    }
    let registry = Registry::shipped()
        .with("quiet", |name: &SourceId, config: &Value| {
            if config.as_object().is_some_and(|c| !c.is_empty()) {
                return Err(ConfigProblem::Refused("takes no configuration".into()));
            }
            Ok(Bound::new(Quiet(name.clone())))
        })
        .with("prfix", |_: &SourceId, _: &Value| {
            Ok(Bound::new(Quiet(
                SourceId::new("own-prfix").expect("an id"),
            )))
        });
    assert_eq!(
        registry.names().collect::<Vec<_>>(),
        ["automl", "prfix", "quiet", "research"]
    );
    let quiet = registry.build(&binding("quiet", json!({}))).expect("built");
    assert_eq!(quiet.source(), &id("quiet"));
    let replaced = registry
        .build(&binding("prfix", json!({ "anything": 1 })))
        .expect("the host's own prfix");
    assert_eq!(replaced.source(), &id("own-prfix"));
    assert_eq!(
        registry
            .bind(&binding("quiet", json!({ "x": 1 })))
            .err()
            .map(|e| e.to_string()),
        Some("capability `quiet` refused its configuration: takes no configuration".into())
    );
}
