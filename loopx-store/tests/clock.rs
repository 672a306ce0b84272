//! Time cannot be forged forward, as a property: whatever `now` a caller gives, a command moved
//! behind the goal's last commit is brought up to it (and stamped there), and one beyond the
//! store's clock plus the goal's skew is refused with `clock_ahead` and changes nothing —
//! no state, no event, no receipt, no charge. Run on memory and on SQLite (the conformance
//! suite runs the same on PostgreSQL).

use std::time::{SystemTime, UNIX_EPOCH};

use loopx_kernel::seams::Store;
use loopx_kernel::{
    Actor, AgentId, Command, DEFAULT_CLOCK_SKEW, Duration, GoalId, GoalSpec, Limits, NewTodo,
    OperationId, PersonId, Policy, Refusal, SubmitError, Timestamp, TodoId, submit,
};
use loopx_store::{MemoryStore, SqliteStore};
use proptest::prelude::*;

/// How a step moves the caller's clock.
#[derive(Debug, Clone)]
enum Shift {
    /// This many minutes behind the goal's last commit.
    Behind(i64),
    /// This many seconds behind the wall clock (at most a minute): within the skew.
    Within(i64),
    /// This many minutes beyond the wall clock plus the skew (at least one, so that the store's
    /// clock, read later, cannot catch up while the step runs).
    Beyond(i64),
}

fn shift() -> impl Strategy<Value = Shift> {
    prop_oneof![
        (1_i64..=3 * 24 * 60).prop_map(Shift::Behind),
        (0_i64..=60).prop_map(Shift::Within),
        (1_i64..=365 * 24 * 60).prop_map(Shift::Beyond),
    ]
}

fn wall_clock() -> Timestamp {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    Timestamp::from_millis(i64::try_from(millis).unwrap())
}

fn agent(name: &str) -> Actor {
    Actor::Agent(AgentId::new(name).unwrap())
}

fn spec(goal: &GoalId) -> GoalSpec {
    GoalSpec {
        id: goal.clone(),
        objective: "keep time honest".into(),
        owner: PersonId::new("olivia").unwrap(),
        criteria: vec![],
        agents: [AgentId::new("a").unwrap(), AgentId::new("b").unwrap()].into(),
        budget: Limits::turns(100),
        policy: Policy::default(),
        grants: std::collections::BTreeMap::default(),
        identity: loopx_kernel::Identity::Declared,
        keys: Vec::new(),
        validators: std::collections::BTreeMap::new(),
        capability: None,
    }
}

fn claim(todo: &str) -> Command {
    Command::Claim {
        todo: TodoId::new(todo).unwrap(),
        ttl: Some(Duration::minutes(15)),
        workspace: None,
        grant_reason: None,
    }
}

/// Drives one goal of `store` through `steps`; each step is b claiming `a`'s todo (when
/// `take`) or adding a todo, at the shifted time.
fn run<S: Store>(store: &S, steps: &[(Shift, bool)]) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let goal = GoalId::new("clocked").unwrap();
    let owner = Actor::Person(PersonId::new("olivia").unwrap());
    let mut ops = 0_u32;
    let mut go = |actor: &Actor, now: Timestamp, command: &Command| {
        ops += 1;
        let op = OperationId::new(format!("op-{ops}")).unwrap();
        (
            op.clone(),
            runtime.block_on(submit(store, &goal, actor, now, command, &op)),
        )
    };
    let start = wall_clock();
    let created = Timestamp::from_millis(start.as_millis() - Duration::hours(96).as_millis());
    let create = Command::CreateGoal { spec: spec(&goal) };
    go(&owner, created, &create).1.unwrap();
    let add = |n: usize| Command::AddTodo {
        todo: NewTodo::advance(TodoId::new(format!("t{n}")).unwrap(), "a step"),
    };
    go(&agent("a"), start, &add(0)).1.unwrap();
    go(&agent("a"), start, &claim("t0")).1.unwrap();
    for (n, (shift, take)) in steps.iter().enumerate() {
        let before = runtime.block_on(store.load(&goal)).unwrap().unwrap();
        let events_before = runtime
            .block_on(store.events(&goal, 0, usize::MAX))
            .unwrap();
        let last = before.last_commit();
        let now = match shift {
            Shift::Behind(minutes) => {
                Timestamp::from_millis(last.as_millis() - Duration::minutes(*minutes).as_millis())
            }
            Shift::Within(seconds) => Timestamp::from_millis(
                wall_clock().as_millis() - Duration::seconds(*seconds).as_millis(),
            ),
            Shift::Beyond(minutes) => wall_clock()
                .plus(DEFAULT_CLOCK_SKEW)
                .plus(Duration::minutes(*minutes)),
        };
        let command = if *take { claim("t0") } else { add(n + 1) };
        let (op, result) = go(&agent("b"), now, &command);
        match shift {
            Shift::Beyond(_) => {
                match result {
                    Err(SubmitError::Refused(Refusal::ClockAhead {
                        at,
                        store_time,
                        skew,
                    })) => {
                        prop_assert_eq!(at, now);
                        prop_assert_eq!(skew, DEFAULT_CLOCK_SKEW);
                        prop_assert!(at > store_time.plus(skew));
                    }
                    other => prop_assert!(false, "beyond the skew: {other:?}"),
                }
                let after = runtime.block_on(store.load(&goal)).unwrap().unwrap();
                prop_assert_eq!(&after, &before, "a refusal changes nothing");
                let events = runtime
                    .block_on(store.events(&goal, 0, usize::MAX))
                    .unwrap();
                prop_assert_eq!(events, events_before);
                prop_assert_eq!(runtime.block_on(store.receipt(&goal, &op)).unwrap(), None);
            }
            Shift::Behind(_) | Shift::Within(_) => {
                let expected = now.max(last);
                let done = match result {
                    Ok(done) => done,
                    // b may not take a's live lease: refused by the kernel at the goal's time.
                    Err(SubmitError::Refused(Refusal::LeaseHeld { .. })) if *take => continue,
                    Err(error) => return Err(TestCaseError::fail(format!("{error}"))),
                };
                prop_assert_eq!(done.receipt.committed_at, expected);
                prop_assert!(done.events.iter().all(|e| e.at == expected));
                prop_assert_eq!(
                    done.state.last_commit(),
                    expected,
                    "time never runs backwards"
                );
            }
        }
    }
    let events = runtime
        .block_on(store.events(&goal, 0, usize::MAX))
        .unwrap();
    prop_assert!(events.windows(2).all(|w| w[0].at <= w[1].at));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn memory(steps in prop::collection::vec((shift(), any::<bool>()), 1..10)) {
        run(&MemoryStore::new(), &steps)?;
    }

    #[test]
    fn sqlite(steps in prop::collection::vec((shift(), any::<bool>()), 1..10)) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::create(dir.path().join("clock.db")).unwrap();
        run(&store, &steps)?;
    }
}
