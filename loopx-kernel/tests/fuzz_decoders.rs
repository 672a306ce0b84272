//! Fuzz targets for every decoder of stored or outside input the kernel owns: state snapshots,
//! stored events (and the histories they fold into), and the shapes the CLI reads from files
//! (goal specs, amendments, todos, gates, evidence, settlements).
//!
//! Each target is a bounded proptest over arbitrary bytes and over valid inputs mutated byte
//! by byte (flipped, cut, deleted, repeated, spliced). The seeds are the kernel's own output for
//! the histories in `tests/snapshots/wire_format__*.snap`. Whatever the input, a decoder
//! returns a typed error or a value, never panics; a decoded snapshot re-encodes to exactly the
//! bytes it was decoded from; a decoded state or history can be decided on without a panic.
//!
//! 256 cases per target by default, so CI runs them briefly; run longer by hand with
//! `PROPTEST_CASES=20000 cargo test -p loopx-kernel --test fuzz_decoders --release`.

use std::sync::OnceLock;

use loopx_kernel::testkit::config;
use loopx_kernel::{
    AgentId, Amendment, GoalSpec, GoalState, NewEvidence, NewGate, NewTodo, RecordedEvent,
    Settlement, Snapshot, SnapshotError, Timestamp, decide,
};
use proptest::prelude::*;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The JSON body of an insta snapshot file.
fn snap_body(text: &str) -> &str {
    let body = text.splitn(3, "---").nth(2).expect("an insta snapshot");
    body.trim()
}

/// The history whose events and state the wire-format test snapshots.
fn stored_events() -> &'static Vec<RecordedEvent> {
    static EVENTS: OnceLock<Vec<RecordedEvent>> = OnceLock::new();
    EVENTS.get_or_init(|| {
        let text = include_str!("snapshots/wire_format__events_json.snap");
        serde_json::from_str(snap_body(text)).expect("the snapshotted history decodes")
    })
}

fn stored_state() -> GoalState {
    let text = include_str!("snapshots/wire_format__state_json.snap");
    serde_json::from_str(snap_body(text)).expect("the snapshotted state decodes")
}

/// Valid snapshot texts, exactly as a store writes them: the snapshotted goal, the goal at
/// a few points of its history, and a goal with many plain todos.
fn snapshot_seeds() -> &'static Vec<String> {
    static SEEDS: OnceLock<Vec<String>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let events = stored_events();
        let mut states = vec![stored_state()];
        for cut in [1, 6, events.len() / 2] {
            states.push(GoalState::replay(&events[..cut]).expect("a prefix folds"));
        }
        states
            .iter()
            .map(|s| serde_json::to_string(&s.snapshot()).expect("encodes"))
            .collect()
    })
}

/// Valid stored histories: the whole log and a prefix of it, as one JSON array each.
fn history_seeds() -> &'static Vec<String> {
    static SEEDS: OnceLock<Vec<String>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let events = stored_events();
        vec![
            serde_json::to_string(events).expect("encodes"),
            serde_json::to_string(&events[..8]).expect("encodes"),
        ]
    })
}

/// Every value inside `value`, objects also without their `type` tag (an event's payload is
/// the fields of a command's shape beside the tag).
fn every_value(value: &Value, out: &mut Vec<Value>) {
    out.push(value.clone());
    match value {
        Value::Object(map) => {
            if map.contains_key("type") {
                let mut untagged = map.clone();
                untagged.remove("type");
                // A settled turn's event records as `charged` what its settlement calls `usage`,
                // and adds what the kernel classified the turn as.
                if let Some(charged) = untagged.remove("charged") {
                    let mut settlement = untagged.clone();
                    settlement.remove("result");
                    settlement.insert("usage".into(), charged);
                    out.push(Value::Object(settlement));
                }
                out.push(Value::Object(untagged));
            }
            for inner in map.values() {
                every_value(inner, out);
            }
        }
        Value::Array(items) => {
            for inner in items {
                every_value(inner, out);
            }
        }
        _ => {}
    }
}

/// The texts of every value inside the stored history that decodes as a `T`, re-encoded by
/// the kernel: the seeds of a CLI input shape.
fn seeds_of<T: DeserializeOwned + serde::Serialize>() -> Vec<String> {
    let mut values = Vec::new();
    every_value(
        &serde_json::to_value(stored_events()).expect("encodes"),
        &mut values,
    );
    let mut seeds: Vec<String> = values
        .into_iter()
        .filter_map(|v| serde_json::from_value::<T>(v).ok())
        .map(|t| serde_json::to_string(&t).expect("encodes"))
        .collect();
    seeds.sort();
    seeds.dedup();
    seeds
}

/// One edit of a byte string.
#[derive(Debug, Clone)]
enum Edit {
    /// XOR the byte at a position with a mask.
    Flip(usize, u8),
    /// Set the byte at a position to a character JSON gives meaning to.
    Set(usize, u8),
    /// Remove a range.
    Delete(usize, usize),
    /// Repeat a range in place.
    Repeat(usize, usize),
    /// Cut the text at a position.
    Truncate(usize),
    /// Copy a range over another place.
    Splice(usize, usize, usize),
}

const MEANINGFUL: &[u8] = b"{}[]:,\"\\0123456789-.eE+ntfrua_ \n\t";

fn edit() -> impl Strategy<Value = Edit> {
    let at = any::<prop::sample::Index>();
    prop_oneof![
        (at.clone(), 1..=255_u8).prop_map(|(i, m)| Edit::Flip(i.index(usize::MAX), m)),
        (at.clone(), prop::sample::select(MEANINGFUL))
            .prop_map(|(i, c)| Edit::Set(i.index(usize::MAX), c)),
        (at.clone(), 1..64_usize).prop_map(|(i, n)| Edit::Delete(i.index(usize::MAX), n)),
        (at.clone(), 1..64_usize).prop_map(|(i, n)| Edit::Repeat(i.index(usize::MAX), n)),
        at.clone().prop_map(|i| Edit::Truncate(i.index(usize::MAX))),
        (at.clone(), at, 1..64_usize).prop_map(|(a, b, n)| Edit::Splice(
            a.index(usize::MAX),
            b.index(usize::MAX),
            n
        )),
    ]
}

/// Applies `edits` to `seed`; positions wrap around its length.
fn mutate(seed: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut bytes = seed.to_vec();
    for edit in edits {
        let len = bytes.len().max(1);
        match *edit {
            Edit::Flip(i, mask) => {
                if let Some(b) = bytes.get_mut(i % len) {
                    *b ^= mask;
                }
            }
            Edit::Set(i, c) => {
                if let Some(b) = bytes.get_mut(i % len) {
                    *b = c;
                }
            }
            Edit::Delete(i, n) => {
                let start = (i % len).min(bytes.len());
                let end = (start + n).min(bytes.len());
                bytes.drain(start..end);
            }
            Edit::Repeat(i, n) => {
                let start = (i % len).min(bytes.len());
                let end = (start + n).min(bytes.len());
                let piece = bytes[start..end].to_vec();
                bytes.splice(end..end, piece);
            }
            Edit::Truncate(i) => bytes.truncate(i % len),
            Edit::Splice(from, to, n) => {
                let start = (from % len).min(bytes.len());
                let end = (start + n).min(bytes.len());
                let piece = bytes[start..end].to_vec();
                let to = (to % len).min(bytes.len());
                let over = (to + piece.len()).min(bytes.len());
                bytes.splice(to..over, piece);
            }
        }
    }
    bytes
}

/// A seed (by index) and one to four edits.
fn mutation() -> impl Strategy<Value = (prop::sample::Index, Vec<Edit>)> {
    (
        any::<prop::sample::Index>(),
        prop::collection::vec(edit(), 1..=4),
    )
}

fn agents() -> Vec<AgentId> {
    ["a", "b", "c", "nobody"]
        .into_iter()
        .map(|a| AgentId::new(a).expect("an agent id"))
        .collect()
}

/// Decides for every agent at a few times: a state that decoded must be one `decide` can
/// read without a panic.
fn decide_on(state: &GoalState) {
    for agent in agents() {
        for at in [state.created_at, Timestamp::from_millis(i64::MAX / 4)] {
            let _ = decide(state, &agent, at);
        }
    }
    // The arena and its index agree: every todo is found under its own id.
    assert_eq!(state.todos.iter().count(), state.todos.len());
    for todo in state.todos.values() {
        assert_eq!(state.todos.get(&todo.id), Some(todo));
    }
}

/// The snapshot target: a typed error, or a snapshot that re-encodes to exactly `bytes`.
fn snapshot_target(bytes: &[u8]) {
    let Ok(text) = std::str::from_utf8(bytes) else {
        // A store's text column cannot hold it; the generic decoder still must not panic.
        assert!(serde_json::from_slice::<Snapshot>(bytes).is_err());
        return;
    };
    match Snapshot::decode(text) {
        Ok(snapshot) => {
            let again = serde_json::to_string(&snapshot).expect("a decoded snapshot encodes");
            assert_eq!(again, text, "decoded, but re-encodes to other bytes");
            decide_on(&snapshot.state);
        }
        Err(SnapshotError::Malformed { line, column, .. }) => {
            assert!(line >= 1 || column == 0, "{line}:{column}");
        }
        Err(SnapshotError::NotCanonical { offset }) => assert!(offset <= text.len()),
        Err(other) => panic!("an unexpected error: {other}"),
    }
    // The lenient path (pretty or reordered JSON) never builds a state the kernel cannot read.
    if let Ok(snapshot) = serde_json::from_str::<Snapshot>(text) {
        decide_on(&snapshot.state);
    }
}

/// The history target: events decode or fail typed; a decoded history folds or fails typed;
/// a folded state can be decided on and snapshotted.
fn history_target(bytes: &[u8]) {
    let Ok(events) = serde_json::from_slice::<Vec<RecordedEvent>>(bytes) else {
        return;
    };
    for event in &events {
        let text = serde_json::to_string(event).expect("a decoded event encodes");
        let again: RecordedEvent = serde_json::from_str(&text).expect("an encoded event decodes");
        assert_eq!(&again, event);
    }
    if let Ok(state) = GoalState::replay(&events) {
        decide_on(&state);
        let text = serde_json::to_string(&state.snapshot()).expect("encodes");
        let decoded = Snapshot::decode(&text).expect("a folded state's snapshot decodes");
        assert_eq!(decoded.state, state);
    }
}

/// A CLI input target: a `T` or a typed serde error, and a decoded `T` round-trips.
fn input_target<T>(bytes: &[u8])
where
    T: DeserializeOwned + serde::Serialize + PartialEq + std::fmt::Debug,
{
    match serde_json::from_slice::<T>(bytes) {
        Ok(value) => {
            let text = serde_json::to_string(&value).expect("a decoded input encodes");
            let again: T = serde_json::from_str(&text).expect("an encoded input decodes");
            assert_eq!(again, value);
        }
        Err(error) => assert!(!error.to_string().is_empty()),
    }
}

fn pick(seeds: &[String], index: prop::sample::Index) -> Vec<u8> {
    seeds[index.index(seeds.len())].as_bytes().to_vec()
}

macro_rules! input_targets {
    ($($name:ident: $ty:ty;)*) => {
        $(
            mod $name {
                use super::*;

                fn seeds() -> &'static Vec<String> {
                    static SEEDS: OnceLock<Vec<String>> = OnceLock::new();
                    SEEDS.get_or_init(|| {
                        let seeds = seeds_of::<$ty>();
                        assert!(!seeds.is_empty(), "no seed of {}", stringify!($ty));
                        seeds
                    })
                }

                proptest! {
                    #![proptest_config(config(256))]

                    #[test]
                    fn arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
                        input_target::<$ty>(&bytes);
                    }

                    #[test]
                    fn mutated_inputs((seed, edits) in mutation()) {
                        input_target::<$ty>(&mutate(&pick(seeds(), seed), &edits));
                    }
                }
            }
        )*
    };
}

input_targets! {
    goal_spec: GoalSpec;
    amendments: Vec<Amendment>;
    new_todo: NewTodo;
    new_gate: NewGate;
    new_evidence: NewEvidence;
    settlement: Settlement;
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn snapshots_from_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        snapshot_target(&bytes);
    }

    #[test]
    fn mutated_snapshots((seed, edits) in mutation()) {
        snapshot_target(&mutate(&pick(snapshot_seeds(), seed), &edits));
    }

    #[test]
    fn histories_from_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        history_target(&bytes);
    }

    #[test]
    fn mutated_histories((seed, edits) in mutation()) {
        history_target(&mutate(&pick(history_seeds(), seed), &edits));
    }
}

#[test]
fn every_seed_is_valid_and_mutations_reach_the_decoders() {
    for seed in snapshot_seeds() {
        let decoded = Snapshot::decode(seed).expect("a seed decodes");
        assert_eq!(&serde_json::to_string(&decoded).unwrap(), seed);
    }
    for seed in history_seeds() {
        let events: Vec<RecordedEvent> = serde_json::from_str(seed).expect("a seed decodes");
        assert!(GoalState::replay(&events).is_ok());
    }
    // A flip inside a seed is refused or re-encodes to itself; one edit must be able to break
    // a seed, or the mutated targets would test nothing.
    let seed = snapshot_seeds()[0].as_bytes();
    let broken = mutate(seed, &[Edit::Truncate(seed.len() / 2)]);
    assert!(Snapshot::decode(std::str::from_utf8(&broken).unwrap()).is_err());
}
