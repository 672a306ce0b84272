//! The tools' definitions and the kernel's schemas: every tool listed with an object schema,
//! and each kernel type's schema accepting exactly what the type serializes (checked with a
//! JSON Schema validator, formats included), and refusing what its decoder refuses.

use std::sync::Arc;

use loopx_kernel::seams::Store;
use loopx_kernel::{
    Actor, Amounts, Continuation, Duration, EvidenceId, ExpiryPolicy, FailureClass, GateScope,
    HandoffNote, Lineage, ManualClock, MonitorSpec, NewEvidence, NewGate, NewTodo, Observation,
    ObservedInput, Outcome, OutcomeResolution, PlanChange, Priority, ResumeCondition, Settlement,
    Signature, Timestamp, TodoClass, TodoId, Transition, TurnFailure, Verdict, VerdictOutcome,
    WriteSet,
};
use loopx_server::mcp::LoopxMcp;
use loopx_store::MemoryStore;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};

fn at(text: &str) -> Timestamp {
    Timestamp::parse(text).expect("a timestamp")
}

fn id<T: std::str::FromStr>(text: &str) -> T
where
    T::Err: std::fmt::Debug,
{
    text.parse().expect("an id")
}

fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .expect("a valid JSON Schema")
}

/// The schema of `T` accepts `value`'s serialization.
fn accepts<T: JsonSchema + Serialize>(value: &T) {
    let schema = serde_json::to_value(schemars::schema_for!(T)).expect("a schema");
    let wire = serde_json::to_value(value).expect("serializes");
    let check = validator(&schema);
    let errors: Vec<String> = check.iter_errors(&wire).map(|e| e.to_string()).collect();
    assert!(
        errors.is_empty(),
        "the schema of {} refuses its own serialization {wire}: {errors:?}\nschema: {schema}",
        std::any::type_name::<T>()
    );
}

/// The schema of `T` refuses `wire`.
fn refuses<T: JsonSchema>(wire: &Value) {
    let schema = serde_json::to_value(schemars::schema_for!(T)).expect("a schema");
    assert!(
        !validator(&schema).is_valid(wire),
        "the schema of {} accepts {wire}",
        std::any::type_name::<T>()
    );
}

fn evidence() -> NewEvidence {
    NewEvidence {
        id: id("tests@git:abc123"),
        check: id("tests"),
        subject: id("repo:acme/cli"),
        revision: id("git:abc123"),
        outcome: Outcome::Pass,
        summary: "cargo test passed".to_owned(),
        observed_at: at("2026-11-29T10:11:00Z"),
        ttl: Some(Duration::hours(24)),
        inputs: Lineage {
            evidence: vec![id("build@git:abc123")],
            observations: vec![ObservedInput {
                key: id("git-head:acme/cli"),
                fingerprint: id("abc123"),
            }],
        },
    }
}

fn observation() -> Observation {
    Observation {
        key: id("git-head:acme/cli"),
        subject: id("repo:acme/cli"),
        revision: id("git:abc123"),
        fingerprint: id("abc123"),
        observed_at: at("2026-11-29T10:11:00.250Z"),
        summary: "head at abc123".to_owned(),
        facts: [("branch".to_owned(), "main".to_owned())].into(),
        order: Some(loopx_kernel::SourceOrder {
            step: 2,
            ..loopx_kernel::SourceOrder::at(at("2026-11-29T10:10:00Z"))
        }),
        etag: Some("W/\"abc\"".to_owned()),
    }
}

fn todo() -> NewTodo {
    let mut todo = NewTodo::advance(id("watch-ci"), "watch CI");
    todo.class = TodoClass::Monitor(MonitorSpec {
        watches: id("ci:acme/cli#12"),
        cadence: Duration::minutes(5),
    });
    todo.priority = Priority::P1;
    todo.depends_on.insert(id("edit"));
    todo.writes = Some(WriteSet {
        repository: "github.com/acme/cli".to_owned(),
        scopes: ["src".to_owned()].into(),
    });
    todo.expected_usage = Some(Box::new(Amounts::ONE_TURN));
    todo
}

fn settlement() -> Settlement {
    Settlement {
        todo: id("edit"),
        epoch: 3,
        turn: id("t1"),
        verdict: Verdict {
            validator: Actor::Validator(id("cargo-test")),
            outcome: VerdictOutcome::Passed,
            summary: "cargo test passed".to_owned(),
            signature: Some(Signature::from_bytes([7; 64])),
        },
        evidence: vec![evidence()],
        observations: vec![observation()],
        transition: Transition::Complete {
            continuation: Continuation::Successors(vec![todo()]),
        },
        usage: Amounts {
            turns: 1,
            tokens: 18_000,
            cost_micros: 0,
            wall_ms: 420_000,
        },
        failure: Some(TurnFailure {
            class: FailureClass::TimedOut,
            detail: "ran past 30m".to_owned(),
        }),
    }
}

#[test]
fn each_kernel_type_a_tool_carries_has_a_schema_that_accepts_its_serialization() {
    accepts(&settlement());
    let mut plain = settlement();
    plain.verdict.signature = None;
    plain.failure = None;
    plain.transition = Transition::Defer {
        until: ResumeCondition::GateSettled { gate: id("g1") },
    };
    accepts(&plain);
    accepts(&evidence());
    accepts(&observation());
    accepts(&todo());
    accepts(&NewTodo::advance(id("edit"), "edit"));
    accepts(&HandoffNote {
        next_action: "run the tests".to_owned(),
        stop_condition: "they pass".to_owned(),
        evidence: vec![EvidenceId::new("tests@git:abc123").expect("an id")],
    });
    accepts(&Amounts::ONE_TURN);
    accepts(&NewGate {
        id: id("error-code-name"),
        question: "is error_code acceptable?".to_owned(),
        owner: Actor::Person(id("maintainer")),
        scope: GateScope {
            todos: [TodoId::new("document-json").expect("an id")].into(),
            ..GateScope::default()
        },
        deadline: Some(at("2026-11-30T17:00:00Z")),
        on_expiry: ExpiryPolicy::KeepAsking,
    });
    for until in [
        ResumeCondition::At {
            at: at("2026-12-01T00:00:00+02:00"),
        },
        ResumeCondition::TodoDone { todo: id("edit") },
        ResumeCondition::ObservationChanged {
            key: id("ci:acme/cli#12"),
        },
    ] {
        accepts(&until);
    }
    accepts(&vec![
        PlanChange::AddTodo { todo: todo() },
        PlanChange::Supersede {
            todo: id("old"),
            reason: "the route is closed".to_owned(),
            replacement: None,
        },
        PlanChange::DeclareClosure {
            reason: "done".to_owned(),
        },
    ]);
    accepts(&OutcomeResolution::Absent {
        note: "no commit was pushed".to_owned(),
    });
    accepts(&OutcomeResolution::Committed {
        settlement: Box::new(settlement()),
    });
}

#[test]
fn the_hand_written_schemas_refuse_what_the_decoders_refuse() {
    for (bad, why) in [
        (json!("has space"), "outside the id grammar"),
        (json!("-flag"), "an id starts with a letter or digit"),
        (json!(""), "an id is never empty"),
        (json!("x".repeat(129)), "an id is at most 128 bytes"),
        (json!(7), "an id is a string"),
    ] {
        assert!(
            serde_json::from_value::<TodoId>(bad.clone()).is_err(),
            "{why}"
        );
        refuses::<TodoId>(&bad);
    }
    for bad in [
        json!("2026-11-29 10:00"),
        json!("2026-11-29T10:00:00"),
        json!(0),
    ] {
        assert!(serde_json::from_value::<Timestamp>(bad.clone()).is_err());
        refuses::<Timestamp>(&bad);
    }
    refuses::<Duration>(&json!("30m"));
    refuses::<Signature>(&json!("ABCD"));
    refuses::<Amounts>(&json!({ "turns": 1, "dollars": 3 }));
    refuses::<Outcome>(&json!("maybe"));
}

#[test]
fn every_tool_is_listed_with_a_lean_object_schema() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let tools = LoopxMcp::new(
        store,
        Arc::new(ManualClock::new(at("2026-11-29T10:00:00Z"))),
    )
    .tools();
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "begin",
            "block",
            "brief",
            "claim",
            "defer",
            "discharge",
            "evidence_add",
            "gate_open",
            "handoff",
            "next",
            "observe",
            "ready",
            "release",
            "renew",
            "resolve_outcome",
            "settle",
            "status",
        ]
    );
    let mut bytes = 0;
    for tool in &tools {
        let schema = Value::Object((*tool.input_schema).clone());
        assert_eq!(schema["type"], "object", "{}: {schema}", tool.name);
        // Each schema is a valid JSON Schema.
        validator(&schema);
        let description = tool.description.as_deref().unwrap_or_default();
        assert!(
            !description.is_empty() && description.len() <= 140,
            "{}: a lean description: {description}",
            tool.name
        );
        bytes += schema.to_string().len() + description.len();
    }
    // Every byte is sent with every request of a runtime: a bound, so the definitions never
    // grow unnoticed (about four bytes a token: some 8k tokens for all 17 tools, most of it
    // the settlement's and the plan changes' shapes).
    println!(
        "{} tools, {bytes} bytes of definitions (~{} tokens)",
        tools.len(),
        bytes / 4
    );
    assert!(bytes < 34_000, "{bytes} bytes of tool definitions");
}

#[test]
fn a_tool_schema_accepts_the_input_its_tool_decodes_and_refuses_a_bad_one() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let tools = LoopxMcp::new(
        store,
        Arc::new(ManualClock::new(at("2026-11-29T10:00:00Z"))),
    )
    .tools();
    let schema_of = |name: &str| {
        let tool = tools.iter().find(|t| t.name == name).expect("the tool");
        validator(&Value::Object((*tool.input_schema).clone()))
    };
    let settle = json!({ "goal": "cli-json-output", "settlement": settlement() });
    assert!(schema_of("settle").is_valid(&settle));
    let mut wrong = settle.clone();
    wrong["settlement"]["epoch"] = json!("three");
    assert!(!schema_of("settle").is_valid(&wrong));
    let claim = json!({ "goal": "g", "todo": "edit", "ttl": 1_800_000 });
    assert!(schema_of("claim").is_valid(&claim));
    assert!(
        !schema_of("claim").is_valid(&json!({ "goal": "g" })),
        "todo is required"
    );
    assert!(
        !schema_of("claim")
            .is_valid(&json!({ "goal": "g", "todo": "edit", "now": "2026-11-29T10:00:00Z" })),
        "no tool takes a time to act at"
    );
    assert!(
        schema_of("brief").is_valid(&json!({})),
        "brief works across goals"
    );
    assert!(schema_of("ready").is_valid(&json!({})));
}
