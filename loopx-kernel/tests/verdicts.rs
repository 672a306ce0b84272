//! Validators registered per check, verdicts signed by them: on a signed goal an agent carries
//! the verdict its validator signed but cannot make one, and evidence counts for a criterion
//! only from the validators the owner registered for its check.

mod world;

use loopx_kernel::{
    Amendment, CheckId, Command, CriterionStatus, OutcomeResolution, Transition, VerdictOutcome,
};
use proptest::prelude::*;
use world::{
    EvidenceExt, World, ag, criterion, ev, lint, owner, provider, settlement, sign, signed_spec,
    todo, validator,
};

fn check() -> CheckId {
    CheckId::new("tests.json_schema").unwrap()
}

/// A signed goal with criterion `schema` on `tests.json_schema`, `edit` leased by agent `a` and
/// turn `t1` in flight.
fn in_flight() -> World {
    let mut w = World::with(|spec| {
        signed_spec(spec);
        spec.criteria.push(criterion(
            "schema",
            "the JSON schema holds",
            "tests.json_schema",
        ));
    });
    w.add(todo("edit", "change the output layer"));
    w.claim("a", "edit");
    w.begin("a", "edit", "t1");
    w
}

fn schema_settlement() -> loopx_kernel::Settlement {
    let mut s = settlement("edit", 1, "t1");
    s.evidence = vec![ev("t1.schema", "tests.json_schema", "git:abc123").seen_at("10:00")];
    s
}

fn status(w: &World) -> CriterionStatus {
    w.goal
        .criterion_status(&"schema".parse().unwrap(), w.now)
        .expect("the criterion exists")
}

#[test]
fn a_verdict_its_validator_signed_settles_and_its_evidence_meets_the_criterion() {
    let mut w = in_flight();
    assert_eq!(status(&w), CriterionStatus::NoEvidence);
    w.run(&ag("a"), Command::SettleTurn(sign(schema_settlement(), 2)));
    assert!(status(&w).is_met(), "{:?}", status(&w));
    let evidence = &w.goal.evidence[&"t1.schema".parse().unwrap()];
    assert_eq!(evidence.produced_by, validator());
    // The recorded verdict keeps its signature, so the log can be checked again later.
    let Some(loopx_kernel::Event::TurnSettled { verdict, .. }) = w
        .log
        .iter()
        .rev()
        .map(|e| &e.event)
        .find(|e| e.name() == "turn_settled")
    else {
        panic!("no settlement recorded");
    };
    assert!(verdict.signature.is_some());
}

/// A validator key that the lease holder holds too is the holder's own: the verdict it signs
/// is the agent's, however the owner registered the key.
#[test]
fn a_verdict_signed_by_a_key_the_holder_shares_with_its_validator_is_self_signed() {
    use loopx_kernel::Signer as _;
    let mut w = World::with(|spec| {
        signed_spec(spec);
        spec.criteria.push(criterion(
            "schema",
            "the JSON schema holds",
            "tests.json_schema",
        ));
        spec.keys.push(loopx_kernel::RegisteredKey {
            actor: validator(),
            key: world::key_of(3).public_key(),
        });
    });
    w.add(todo("edit", "change the output layer"));
    w.claim("a", "edit");
    w.begin("a", "edit", "t1");
    let refusal = w.refuse(&ag("a"), Command::SettleTurn(sign(schema_settlement(), 3)));
    assert_eq!(refusal.code(), "verdict_self_signed");
}

#[test]
fn evidence_from_a_validator_not_registered_for_the_check_is_ignored_with_its_reason() {
    let mut w = in_flight();
    // `lint` holds a key and may record evidence, but is not registered for the check.
    let evidence = ev("lint.schema", "tests.json_schema", "git:abc123").seen_at("10:00");
    w.run(&lint(), Command::RecordEvidence { evidence });
    assert_eq!(
        status(&w),
        CriterionStatus::UnregisteredValidator {
            evidence: "lint.schema".parse().unwrap(),
            produced_by: lint(),
        }
    );
    // The owner registers `lint` for the check: its evidence counts from then on.
    w.amend(vec![Amendment::RegisterValidator {
        check: check(),
        validator: lint(),
    }]);
    assert!(status(&w).is_met(), "{:?}", status(&w));
    // Withdrawn again, it stops counting, what it established before included.
    w.amend(vec![Amendment::UnregisterValidator {
        check: check(),
        validator: lint(),
    }]);
    assert!(matches!(
        status(&w),
        CriterionStatus::UnregisteredValidator { .. }
    ));
    // Registering a validator twice, or withdrawing one never registered, changes nothing.
    let twice = w.try_run(
        &owner(),
        Command::AmendGoal {
            expected_revision: w.goal.goal_revision,
            amendments: vec![Amendment::RegisterValidator {
                check: check(),
                validator: validator(),
            }],
        },
    );
    assert_eq!(twice.map_err(|r| r.code()), Err("duplicate_id"));
}

#[test]
fn a_declared_goal_keeps_taking_the_verdict_and_evidence_at_their_word() {
    let mut w = World::with(|spec| {
        spec.criteria.push(criterion(
            "schema",
            "the JSON schema holds",
            "tests.json_schema",
        ));
        spec.validators.insert(check(), [validator()].into());
    });
    w.add(todo("edit", "change the output layer"));
    w.claim("a", "edit");
    w.begin("a", "edit", "t1");
    let mut s = schema_settlement();
    s.verdict.validator = lint();
    w.run(&ag("a"), Command::SettleTurn(s));
    assert!(status(&w).is_met(), "{:?}", status(&w));
}

#[test]
fn a_readback_commits_a_settlement_only_with_its_validators_signature() {
    let mut w = in_flight();
    w.at("11:00");
    let resolve = |s| Command::ResolveOutcome {
        todo: "edit".parse().unwrap(),
        turn: "t1".parse().unwrap(),
        resolution: OutcomeResolution::Committed {
            settlement: Box::new(s),
        },
        grant_reason: None,
    };
    let refused = w.refuse(&ag("a"), resolve(schema_settlement()));
    assert_eq!(refused.code(), "verdict_unsigned");
    let refused = w.refuse(&ag("a"), resolve(sign(schema_settlement(), 3)));
    assert_eq!(refused.code(), "verdict_self_signed");
    w.run(&ag("a"), resolve(sign(schema_settlement(), 2)));
    assert!(status(&w).is_met(), "{:?}", status(&w));
}

#[test]
fn history_written_before_reads_the_same() {
    // A spec and a verdict as written before the registry and verdict signatures existed.
    let mut spec = world::spec();
    let text = serde_json::to_string(&spec).unwrap();
    assert!(!text.contains("validators"), "{text}");
    let read: loopx_kernel::GoalSpec = serde_json::from_str(&text).unwrap();
    assert_eq!(read, spec);
    spec.validators.insert(check(), [validator()].into());
    let text = serde_json::to_string(&spec).unwrap();
    assert!(
        text.contains(r#""validators":{"tests.json_schema":[{"kind":"validator","id":"ci"}]}"#),
        "{text}"
    );
    let verdict = settlement("edit", 1, "t1").verdict;
    let text = serde_json::to_string(&verdict).unwrap();
    assert!(!text.contains("signature"), "{text}");
    let signed = sign(settlement("edit", 1, "t1"), 2).verdict;
    let back: loopx_kernel::Verdict =
        serde_json::from_str(&serde_json::to_string(&signed).unwrap()).unwrap();
    assert_eq!(back, signed);
}

/// Who signs the verdict: nobody, or the key of seed n (2 `ci`, 3 the holder `a`, 4 `lint`,
/// 5 agent `b`, 6 a key no one registered).
fn signer() -> impl Strategy<Value = Option<u8>> {
    prop_oneof![Just(None), (2u8..=6).prop_map(Some)]
}

#[derive(Debug, Clone, Copy)]
enum Tamper {
    None,
    Outcome,
    Summary,
    Evidence,
    Epoch,
}

fn tamper() -> impl Strategy<Value = Tamper> {
    prop_oneof![
        Just(Tamper::None),
        Just(Tamper::Outcome),
        Just(Tamper::Summary),
        Just(Tamper::Evidence),
        Just(Tamper::Epoch),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Whoever signs, whichever validator the verdict names, whatever the agent changes after
    /// signing: the settlement is accepted exactly when the named validator, registered for the
    /// evidence's check, signed exactly this verdict; otherwise it is refused with the code of
    /// the first rule it breaks, nothing changes and nothing is charged (`World::refuse`).
    #[test]
    fn a_settlement_goes_through_only_with_its_registered_validators_signature(
        named in 0usize..3,
        signer in signer(),
        tamper in tamper(),
        registered_check in any::<bool>(),
    ) {
        let mut w = in_flight();
        let mut s = settlement("edit", 1, "t1");
        s.transition = Transition::KeepOpen;
        let checked = if registered_check { "tests.json_schema" } else { "docs.build" };
        s.evidence = vec![ev("t1.e", checked, "git:abc123").seen_at("10:00")];
        s.verdict.validator = [validator(), lint(), provider()][named].clone();
        let named_seed = [2u8, 4, 0][named];
        if let Some(seed) = signer {
            s = sign(s, seed);
        }
        match tamper {
            Tamper::None => {}
            Tamper::Outcome => s.verdict.outcome = VerdictOutcome::Progress,
            Tamper::Summary => s.verdict.summary.push('!'),
            Tamper::Evidence => s.evidence[0].outcome = loopx_kernel::Outcome::Fail,
            Tamper::Epoch => s.epoch = 2,
        }
        let intact = matches!(tamper, Tamper::None);
        let expected = match signer {
            None => Some("verdict_unsigned"),
            Some(3) if intact => Some("verdict_self_signed"),
            Some(_) if named == 2 => Some("validator_unregistered"),
            Some(_) if named == 1 && registered_check => {
                Some("validator_not_registered_for_check")
            }
            Some(seed) if seed == named_seed && intact => None,
            Some(_) => Some("verdict_signature_invalid"),
        };
        // A moved epoch is a stale lease before it is a bad signature.
        let expected = if matches!(tamper, Tamper::Epoch) {
            Some("stale_lease_epoch")
        } else {
            expected
        };
        let command = Command::SettleTurn(s);
        if let Some(code) = expected {
            prop_assert_eq!(w.refuse(&ag("a"), command).code(), code);
        } else {
            let spent = w.goal.ledger.spent;
            w.run(&ag("a"), command);
            prop_assert_eq!(w.goal.ledger.spent.turns, spent.turns + 1);
        }
    }
}
