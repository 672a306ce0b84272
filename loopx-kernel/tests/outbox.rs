//! The outbox: effects fenced by the store, not by a process. The kernel's rules for an
//! effect's intent and its record, the decision over a pending intent, and the engine that
//! runs a turn's effects through it (against a stand-in effector; the crash test with real
//! processes and HTTP is in the provider's `effect_crash.rs`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use loopx_kernel::ManualClock;
use loopx_kernel::engine::{EffectStep, Engine, TurnOutcome};
use loopx_kernel::outbox::{self, Resolution};
use loopx_kernel::seams::{
    Effect, EffectRequest, EffectStatus, Effector, ProviderError, Store, TurnError, TurnReport,
    TurnRequest, Validation, Validator,
};
use loopx_kernel::*;
use loopx_store::MemoryStore;

fn id<T: TryFrom<String>>(text: &str) -> T {
    T::try_from(text.to_owned()).unwrap_or_else(|_| panic!("`{text}` is a valid id"))
}

fn start() -> Timestamp {
    Timestamp::parse("2026-11-29T10:00:00Z").expect("a valid instant")
}

fn owner() -> Actor {
    Actor::Person(id("olivia"))
}

fn alice() -> Actor {
    Actor::Agent(id("alice"))
}

fn bob() -> Actor {
    Actor::Agent(id("bob"))
}

fn spec() -> GoalSpec {
    GoalSpec {
        id: id("g"),
        objective: "comment on the pull request".into(),
        owner: id("olivia"),
        criteria: vec![],
        agents: [id("alice"), id("bob")].into(),
        budget: Limits::UNLIMITED,
        policy: Policy::default(),
        grants: BTreeMap::default(),
        identity: loopx_kernel::Identity::Declared,
        keys: Vec::new(),
        validators: std::collections::BTreeMap::new(),
        capability: None,
    }
}

fn comment(name: &str) -> EffectIntent {
    let params = [
        ("repo", "acme/cli"),
        ("number", "12"),
        ("body", "CI is green."),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    EffectIntent::new(
        id(name),
        "github.comment",
        "acme/cli#12",
        format!("g/{name}"),
        params,
    )
}

/// A goal with one idempotent todo `fix`, claimed by alice (epoch 1) with turn `t1` begun.
fn leased() -> GoalState {
    let mut state = GoalState::create(&owner(), start(), &spec()).expect("created");
    let mut fix = NewTodo::advance(id("fix"), "fix the build");
    fix.idempotent = true;
    state
        .handle(&owner(), start(), &Command::AddTodo { todo: fix })
        .expect("added");
    claim_and_begin(&mut state, &alice(), start(), "t1");
    state
}

fn claim_and_begin(state: &mut GoalState, who: &Actor, at: Timestamp, turn: &str) -> u64 {
    let claim = Command::Claim {
        todo: id("fix"),
        ttl: None,
        workspace: None,
        grant_reason: None,
    };
    state.handle(who, at, &claim).expect("claimed");
    let epoch = state.todos.get(&id("fix")).expect("fix").last_epoch;
    let begin = Command::BeginTurn {
        todo: id("fix"),
        epoch,
        turn: id(turn),
        reserve: None,
    };
    state.handle(who, at, &begin).expect("begun");
    epoch
}

fn intend(epoch: u64, effect: EffectIntent) -> Command {
    Command::IntendEffect {
        todo: id("fix"),
        epoch,
        effect,
    }
}

fn record(name: &str, outcome: EffectOutcome) -> Command {
    Command::RecordEffect {
        id: id(name),
        outcome,
        note: None,
        grant_reason: None,
    }
}

fn code(result: Result<Vec<RecordedEvent>, Refusal>) -> &'static str {
    match result {
        Ok(events) => panic!("expected a refusal, got {events:?}"),
        Err(refusal) => refusal.code(),
    }
}

/// After the lease's time-to-live: the lease has expired.
fn later() -> Timestamp {
    start()
        .plus(Policy::default().lease_ttl)
        .plus(Duration::minutes(1))
}

#[test]
fn only_the_live_holder_at_the_current_epoch_commits_an_intent() {
    let mut state = leased();
    let before = state.clone();
    // Another agent, the owner, a wrong epoch: refused, nothing changes.
    assert_eq!(
        code(state.handle(&bob(), start(), &intend(1, comment("c1")))),
        "not_lease_holder"
    );
    assert_eq!(
        code(state.handle(&owner(), start(), &intend(1, comment("c1")))),
        "not_lease_holder"
    );
    assert_eq!(
        code(state.handle(&alice(), start(), &intend(2, comment("c1")))),
        "stale_lease_epoch"
    );
    // A digest that does not match what would be performed.
    let mut forged = comment("c1");
    forged.params.insert("body".into(), "something else".into());
    assert_eq!(
        code(state.handle(&alice(), start(), &intend(1, forged))),
        "invalid_input"
    );
    assert_eq!(state, before, "refused intents change nothing");

    let events = state
        .handle(&alice(), start(), &intend(1, comment("c1")))
        .expect("the holder intends");
    assert_eq!(events[0].event.name(), "effect_intended");
    assert!(state.pending_effects.contains_key(&id::<EffectId>("c1")));
}

#[test]
fn a_holder_fenced_out_by_a_newer_epoch_or_an_expired_lease_cannot_commit_an_intent() {
    // Expired, not yet taken over: no live lease.
    let mut state = leased();
    assert_eq!(
        code(state.handle(&alice(), later(), &intend(1, comment("c1")))),
        "no_live_lease"
    );
    // Taken over by a second process of the same agent, which claims again with epoch 2: the
    // first process still believes it holds epoch 1, and the store refuses it.
    let epoch = claim_and_begin(&mut state, &alice(), later(), "t2");
    assert_eq!(epoch, 2);
    let before = state.clone();
    assert_eq!(
        code(state.handle(&alice(), later(), &intend(1, comment("c1")))),
        "stale_lease_epoch"
    );
    assert_eq!(state, before);
    state
        .handle(&alice(), later(), &intend(2, comment("c1")))
        .expect("the current epoch intends");
    // And by another agent: bob takes it over after alice's lease expires again.
    let much_later = later()
        .plus(Policy::default().lease_ttl)
        .plus(Duration::minutes(1));
    state
        .handle(
            &alice(),
            much_later,
            &record("c1", EffectOutcome::Performed),
        )
        .expect("the former holder records its own effect");
    claim_and_begin(&mut state, &bob(), much_later, "t3");
    assert_eq!(
        code(state.handle(&alice(), much_later, &intend(2, comment("c2")))),
        "stale_lease_epoch"
    );
}

#[test]
fn an_effect_id_once_intended_is_never_intended_again() {
    let mut state = leased();
    state
        .handle(&alice(), start(), &intend(1, comment("c1")))
        .expect("intended");
    // Again while pending, after it was recorded, and under a newer epoch: refused.
    assert_eq!(
        code(state.handle(&alice(), start(), &intend(1, comment("c1")))),
        "duplicate_id"
    );
    state
        .handle(&alice(), start(), &record("c1", EffectOutcome::Absent))
        .expect("recorded");
    assert_eq!(
        code(state.handle(&alice(), start(), &intend(1, comment("c1")))),
        "duplicate_id"
    );
    claim_and_begin(&mut state, &alice(), later(), "t2");
    assert_eq!(
        code(state.handle(&alice(), later(), &intend(2, comment("c1")))),
        "duplicate_id"
    );
    // Recording it twice, or an effect never intended, is refused too.
    assert_eq!(
        code(state.handle(&alice(), later(), &record("c1", EffectOutcome::Performed))),
        "no_visible_change"
    );
    assert_eq!(
        code(state.handle(&alice(), later(), &record("c9", EffectOutcome::Performed))),
        "unknown_reference"
    );
}

#[test]
fn a_live_intent_is_its_holders_to_record_and_a_fenced_one_its_holders_or_the_owners() {
    let mut state = leased();
    state
        .handle(&alice(), start(), &intend(1, comment("c1")))
        .expect("intended");
    // While the lease is live even the owner may not: the holder may be performing it.
    assert_eq!(
        code(state.handle(&owner(), start(), &record("c1", EffectOutcome::Absent))),
        "not_lease_holder"
    );
    assert_eq!(
        code(state.handle(&bob(), later(), &record("c1", EffectOutcome::Absent))),
        "grant_required"
    );
    state
        .handle(&owner(), later(), &record("c1", EffectOutcome::Absent))
        .expect("the owner records a fenced intent");
    assert!(state.pending_effects.is_empty());
}

#[test]
fn a_pending_intent_whose_lease_is_gone_goes_to_repair_and_holds_the_goal_open() {
    let mut state = leased();
    state
        .handle(&alice(), start(), &intend(1, comment("c1")))
        .expect("intended");
    // Live: the holder resumes its own turn; nothing to repair.
    assert!(matches!(
        decide(&state, &id("alice"), start()),
        Decision::Continue(_)
    ));
    // The lease expired: the holder reads it back first; another agent waits for it.
    match decide(&state, &id("alice"), later()) {
        Decision::Repair {
            issue: RepairIssue::EffectUnresolved { effect, holder, .. },
        } => {
            assert_eq!(effect.as_str(), "c1");
            assert_eq!(holder.as_str(), "alice");
        }
        other => panic!("expected the effect's repair, got {other:?}"),
    }
    let fix = RepairIssue::EffectUnresolved {
        effect: id("c1"),
        todo: id("fix"),
        holder: id("alice"),
    }
    .fix();
    assert_eq!(fix.verb, "effect resolve");
    assert_eq!(fix.call.as_deref(), Some("record_effect"));
    // Closing everything else still leaves the goal open while the effect is pending.
    state
        .handle(
            &owner(),
            later(),
            &Command::AbandonGoal {
                reason: "stop".into(),
            },
        )
        .expect("abandoned");
    assert_eq!(terminal(&state, later()), None);
    state
        .handle(&alice(), later(), &record("c1", EffectOutcome::Performed))
        .expect("recorded on an abandoned goal");
    assert_eq!(terminal(&state, later()), Some(TerminalOutcome::Abandoned));
}

#[test]
fn the_resolution_rule_performs_only_a_live_intent_and_repairs_what_nobody_can_tell() {
    use EffectStatus::{Absent, Committed, Unknown};
    assert_eq!(
        outbox::resolve(Committed, true),
        Resolution::RecordPerformed
    );
    assert_eq!(
        outbox::resolve(Committed, false),
        Resolution::RecordPerformed
    );
    assert_eq!(outbox::resolve(Absent, true), Resolution::Perform);
    assert_eq!(outbox::resolve(Absent, false), Resolution::RecordAbsent);
    assert_eq!(outbox::resolve(Unknown, true), Resolution::Repair);
    assert_eq!(outbox::resolve(Unknown, false), Resolution::Repair);
    // A new epoch makes a new effect id, under the same idempotency key.
    let (todo, turn): (TodoId, TurnId) = (id("fix"), id("fix@r3"));
    assert_ne!(
        outbox::effect_id(&todo, &turn, 1, 1, 0),
        outbox::effect_id(&todo, &turn, 1, 2, 0)
    );
    assert_eq!(
        outbox::idempotency_key(&id("g"), &todo, &turn, 1, 0),
        outbox::idempotency_key(&id("g"), &todo, &turn, 1, 0)
    );
}

/// The turn in flight on `fix`.
fn in_flight(state: &GoalState) -> TurnInFlight {
    state
        .todos
        .get(&id("fix"))
        .and_then(Todo::turn_in_flight)
        .cloned()
        .expect("a turn in flight")
}

#[test]
fn every_run_of_a_turn_id_has_its_own_effect_ids_and_keys_and_a_takeover_keeps_its_key() {
    let goal: GoalId = id("g");
    let (fix, t1): (TodoId, TurnId) = (id("fix"), id("t1"));
    let mut state = leased();
    let first = in_flight(&state);
    assert_eq!(first.began_under, 1);
    // Taken over under epoch 2, the run keeps the epoch it began under, and so its keys.
    let take_over = Command::TakeOverTurn {
        todo: fix.clone(),
        epoch: 1,
        turn: t1.clone(),
        ttl: None,
    };
    state
        .handle(&alice(), start(), &take_over)
        .expect("taken over");
    assert_eq!(in_flight(&state).began_under, 1);
    // The lease expires; bob claims the idempotent todo and runs the same turn id again.
    let second_epoch = claim_and_begin(&mut state, &bob(), later(), "t1");
    assert_eq!(second_epoch, 3);
    assert_eq!(in_flight(&state).began_under, 3);
    let keys = [(1, 1), (1, 2), (3, 3)].map(|(began, epoch)| {
        (
            outbox::effect_id(&fix, &t1, began, epoch, 0),
            outbox::idempotency_key(&goal, &fix, &t1, began, 0),
        )
    });
    assert_ne!(keys[0].0, keys[1].0, "a takeover intends under a new id");
    assert_eq!(keys[0].1, keys[1].1, "under the run's one key");
    assert_ne!(keys[1].0, keys[2].0, "another run has other ids");
    assert_ne!(keys[1].1, keys[2].1, "and another key");
    // The same turn id on another todo under the same epoch: other ids and keys again.
    let docs: TodoId = id("docs");
    assert_ne!(
        outbox::effect_id(&docs, &t1, 1, 1, 0),
        outbox::effect_id(&fix, &t1, 1, 1, 0)
    );
    assert_ne!(
        outbox::idempotency_key(&goal, &docs, &t1, 1, 0),
        outbox::idempotency_key(&goal, &fix, &t1, 1, 0)
    );
    // A run begun before the epoch was recorded keeps the forms its effects were intended with.
    assert_eq!(outbox::effect_id(&fix, &t1, 0, 2, 0).as_str(), "t1-e2-x0");
    assert_eq!(outbox::idempotency_key(&goal, &fix, &t1, 0, 0), "g/t1/0");
}

// ----- the engine -------------------------------------------------------------------------

/// A stand-in for the outside world: the keys written, how often each was written, and what a
/// readback answers when it cannot look.
#[derive(Default)]
struct World {
    written: Mutex<Vec<String>>,
    blind: Mutex<bool>,
    failing: Mutex<bool>,
}

#[async_trait]
impl Effector for World {
    async fn perform(&self, effect: &Effect) -> Result<EffectStatus, ProviderError> {
        if *self.failing.lock().expect("lock") {
            return Err(ProviderError::Failed("503".into()));
        }
        let mut written = self.written.lock().expect("lock");
        if !written.contains(&effect.idempotency_key) {
            written.push(effect.idempotency_key.clone());
        }
        Ok(EffectStatus::Committed)
    }

    async fn readback(&self, effect: &Effect) -> Result<EffectStatus, ProviderError> {
        if *self.blind.lock().expect("lock") {
            return Ok(EffectStatus::Unknown);
        }
        let written = self.written.lock().expect("lock");
        Ok(if written.contains(&effect.idempotency_key) {
            EffectStatus::Committed
        } else {
            EffectStatus::Absent
        })
    }
}

/// Completes every turn asking for one comment.
struct Commenting;

#[async_trait]
impl loopx_kernel::seams::Executor for Commenting {
    async fn run(&self, _: &TurnRequest) -> Result<TurnReport, TurnError> {
        Ok(TurnReport::complete("fixed").with_effect(EffectRequest {
            kind: "github.comment".into(),
            target: "acme/cli#12".into(),
            params: [("body".to_owned(), "fixed".to_owned())].into(),
        }))
    }
}

struct Passing;

#[async_trait]
impl Validator for Passing {
    fn actor(&self) -> Actor {
        Actor::Validator(id("ci"))
    }

    async fn validate(&self, _: &TurnRequest, _: &TurnReport) -> Result<Validation, TurnError> {
        Ok(Validation::passed("ok"))
    }
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(future)
}

async fn goal_with_fix(store: &MemoryStore) -> GoalId {
    let goal = id::<GoalId>("g");
    submit(
        store,
        &goal,
        &owner(),
        start(),
        &Command::CreateGoal { spec: spec() },
        &id("create"),
    )
    .await
    .expect("created");
    // Idempotent: a turn found in flight is run again, and its effects go through the outbox
    // again, where a pending intent is read back before anything is performed.
    let mut fix = NewTodo::advance(id("fix"), "fix the build");
    fix.idempotent = true;
    let command = Command::AddTodo { todo: fix };
    submit(store, &goal, &owner(), start(), &command, &id("add"))
        .await
        .expect("added");
    goal
}

fn engine(store: &Arc<MemoryStore>, clock: &Arc<ManualClock>, world: &Arc<World>) -> Engine {
    Engine::builder(
        id("alice"),
        store.clone(),
        clock.clone(),
        Arc::new(Commenting),
        Arc::new(Passing),
    )
    .effector(world.clone())
    .build()
}

#[test]
fn the_engine_commits_the_intent_performs_once_records_and_then_settles() {
    block_on(async {
        let store = Arc::new(MemoryStore::new());
        let clock = Arc::new(ManualClock::new(start()));
        let world = Arc::new(World::default());
        let goal = goal_with_fix(&store).await;
        let report = engine(&store, &clock, &world)
            .step(&goal)
            .await
            .expect("a step");
        assert!(matches!(report.turn, Some(TurnOutcome::Settled { .. })));
        assert_eq!(report.effects.len(), 1);
        assert_eq!(report.effects[0].outcome, EffectStep::Performed);
        assert_eq!(world.written.lock().expect("lock").len(), 1);
        let events = store.events(&goal, 0, usize::MAX).await.expect("events");
        let names: Vec<&str> = events.iter().map(|e| e.event.name()).collect();
        let at = |name: &str| names.iter().position(|n| *n == name).expect(name);
        assert!(at("turn_begun") < at("effect_intended"));
        assert!(at("effect_intended") < at("effect_recorded"));
        assert!(at("effect_recorded") < at("turn_settled"));
        let state = store.load(&goal).await.expect("load").expect("goal");
        assert!(state.pending_effects.is_empty());
    });
}

#[test]
fn an_effect_nobody_can_read_back_goes_to_repair_and_is_never_performed_twice() {
    block_on(async {
        let store = Arc::new(MemoryStore::new());
        let clock = Arc::new(ManualClock::new(start()));
        let world = Arc::new(World::default());
        let goal = goal_with_fix(&store).await;
        // The call fails and the readback cannot tell: the intent stays pending, repair.
        *world.failing.lock().expect("lock") = true;
        *world.blind.lock().expect("lock") = true;
        let report = engine(&store, &clock, &world)
            .step(&goal)
            .await
            .expect("a step");
        assert!(
            matches!(
                report.decision,
                Decision::Repair {
                    issue: RepairIssue::EffectUnresolved { .. }
                }
            ),
            "{:?}",
            report.decision
        );
        // The world recovers. The engine's next step takes the turn over (a new epoch), which
        // fences the pending intent: read back absent, it is recorded absent and the effect is
        // intended again under the new epoch and performed once; then the turn settles.
        *world.failing.lock().expect("lock") = false;
        *world.blind.lock().expect("lock") = false;
        let report = engine(&store, &clock, &world)
            .step(&goal)
            .await
            .expect("a step");
        assert!(
            matches!(report.turn, Some(TurnOutcome::Settled { .. })),
            "{report:?}"
        );
        assert_eq!(world.written.lock().expect("lock").len(), 1);
        let state = store.load(&goal).await.expect("load").expect("goal");
        assert!(state.pending_effects.is_empty());
        assert_eq!(
            state.used_effects.len(),
            2,
            "the fenced intent, recorded absent, and the one performed"
        );
    });
}

#[test]
fn a_turn_that_asks_for_an_effect_without_an_effector_fails_and_nothing_is_intended() {
    block_on(async {
        let store = Arc::new(MemoryStore::new());
        let clock = Arc::new(ManualClock::new(start()));
        let goal = goal_with_fix(&store).await;
        let engine = Engine::builder(
            id("alice"),
            store.clone(),
            clock.clone(),
            Arc::new(Commenting),
            Arc::new(Passing),
        )
        .build();
        let report = engine.step(&goal).await.expect("a step");
        let Some(TurnOutcome::Settled { result, .. }) = &report.turn else {
            panic!("expected a settled turn, got {:?}", report.turn);
        };
        assert!(result.as_ref().is_some_and(TurnResult::is_failure));
        let state = store.load(&goal).await.expect("load").expect("goal");
        assert!(state.used_effects.is_empty());
    });
}

/// Asks for a comment, but while it runs its lease expires and a second process (another
/// agent here; a fresh process of the same agent alike) takes the todo over with a new epoch.
struct OvertakenWhileRunning {
    store: Arc<MemoryStore>,
    clock: Arc<ManualClock>,
}

#[async_trait]
impl loopx_kernel::seams::Executor for OvertakenWhileRunning {
    async fn run(&self, turn: &TurnRequest) -> Result<TurnReport, TurnError> {
        // Past the lease's time-to-live (the default policy's).
        let now = later();
        self.clock.set(now);
        let claim = Command::Claim {
            todo: turn.todo.clone(),
            ttl: None,
            workspace: None,
            grant_reason: None,
        };
        submit(
            &*self.store,
            &turn.goal,
            &bob(),
            now,
            &claim,
            &id("bob-claim"),
        )
        .await
        .expect("bob takes the expired lease over");
        loopx_kernel::seams::Executor::run(&Commenting, turn).await
    }
}

#[test]
fn a_holder_fenced_out_while_its_turn_ran_never_performs_its_effect() {
    block_on(async {
        let store = Arc::new(MemoryStore::new());
        let clock = Arc::new(ManualClock::new(start()));
        let world = Arc::new(World::default());
        let goal = goal_with_fix(&store).await;
        let executor = Arc::new(OvertakenWhileRunning {
            store: store.clone(),
            clock: clock.clone(),
        });
        let engine = Engine::builder(
            id("alice"),
            store.clone(),
            clock.clone(),
            executor,
            Arc::new(Passing),
        )
        .effector(world.clone())
        .build();
        let report = engine.step(&goal).await.expect("a step");
        assert!(
            matches!(report.turn, Some(TurnOutcome::LeaseLost { .. })),
            "{report:?}"
        );
        assert!(
            world.written.lock().expect("lock").is_empty(),
            "the fenced holder performed nothing"
        );
        let state = store.load(&goal).await.expect("load").expect("goal");
        assert!(state.used_effects.is_empty(), "no intent committed");
        assert_eq!(state.todos.get(&id("fix")).expect("fix").last_epoch, 2);
    });
}
