//! The hand-written decoders of [`TodoClass`] and [`Todo`]: tag first, straight from the input,
//! accepting what serde's derived decoders accept (the tests compare the two), except that a
//! todo refuses a key it does not know under every status (the derived decoder of a todo,
//! whose status is flattened, skips unknown keys under `open` and would drop them unread), and
//! `{"kind": "advance"}` refuses any other key (serde skips keys beside a unit variant's tag).

use std::fmt;

use serde::de::{self, DeserializeOwned, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::{Buffered, Key, RestOf};
use crate::budget::{Amounts, Ledger};
use crate::ids::{AgentId, Fingerprint, TodoId, TurnId};
use crate::time::Timestamp;
use crate::todo::{
    ContinuationRecord, HandoffNote, Lease, MonitorSpec, MonitorState, ResumeCondition, Todo,
    TodoClass, TodoStatus, WriteSet,
};

/// serde's derived decoder of [`TodoClass`], kept for input whose tag is not its first key.
#[derive(Deserialize)]
#[serde(
    remote = "TodoClass",
    tag = "kind",
    rename_all = "snake_case",
    deny_unknown_fields
)]
enum DerivedClass {
    // Braced, so that `deny_unknown_fields` refuses a key beside the tag, as it does for the
    // other variants.
    Advance {},
    Monitor(MonitorSpec),
    Review { of: TodoId },
}

/// The tag of a [`TodoClass`].
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum ClassTag {
    Advance,
    Monitor,
    Review,
}

/// The fields of [`TodoClass::Review`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReviewFields {
    of: TodoId,
}

impl<'de> Deserialize<'de> for TodoClass {
    /// Reads the tag first when it is the first key (as the kernel writes it) and decodes the
    /// variant straight from the input; anything else goes through the derived decoder.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ClassVisitor;

        impl<'de> Visitor<'de> for ClassVisitor {
            type Value = TodoClass;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("internally tagged enum TodoClass")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TodoClass, A::Error> {
                let Some(first) = map.next_key::<Key<'de>>()? else {
                    return Err(de::Error::missing_field("kind"));
                };
                if first.as_str() != "kind" {
                    return super::map_fallback(first, map, DerivedClass::deserialize);
                }
                let tag: ClassTag = map.next_value()?;
                let rest = RestOf::new(&mut map, "kind");
                Ok(match tag {
                    ClassTag::Advance => {
                        rest.none()?;
                        TodoClass::Advance
                    }
                    ClassTag::Monitor => TodoClass::Monitor(MonitorSpec::deserialize(rest)?),
                    ClassTag::Review => TodoClass::Review {
                        of: ReviewFields::deserialize(rest)?.of,
                    },
                })
            }

            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<TodoClass, A::Error> {
                super::seq_fallback(seq, DerivedClass::deserialize)
            }
        }

        deserializer.deserialize_any(ClassVisitor)
    }
}

/// The tag of a [`TodoStatus`].
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum StatusTag {
    Open,
    Blocked,
    Deferred,
    Done,
    Superseded,
}

impl StatusTag {
    /// The variant's fields, as the derived decoder names them when it refuses another.
    fn fields(self) -> &'static [&'static str] {
        match self {
            StatusTag::Open => &[],
            StatusTag::Blocked => &["reason"],
            StatusTag::Deferred => &["until", "baseline"],
            StatusTag::Done => &["continuation", "by", "turn", "at"],
            StatusTag::Superseded => &["reason", "replacement"],
        }
    }
}

/// Where a status field's value is read from: the input, or a buffer filled before the tag
/// was known.
enum Source<'m, A> {
    Input(&'m mut A),
    Buffer(Buffered),
}

impl<'de, A: MapAccess<'de>> Source<'_, A> {
    fn take<T: DeserializeOwned>(self, field: &'static str) -> Result<T, A::Error> {
        match self {
            Source::Input(map) => map.next_value(),
            Source::Buffer(value) => value.decode(field),
        }
    }

    fn buffer(self) -> Result<Buffered, A::Error> {
        match self {
            Source::Input(map) => Buffered::next(map),
            Source::Buffer(value) => Ok(value),
        }
    }
}

/// Sets a field once; a second value is refused as the derived decoder refuses it.
fn put<'de, T: DeserializeOwned, A: MapAccess<'de>>(
    slot: &mut Option<T>,
    field: &'static str,
    source: Source<'_, A>,
) -> Result<(), A::Error> {
    if slot.is_some() {
        return Err(de::Error::duplicate_field(field));
    }
    *slot = Some(source.take(field)?);
    Ok(())
}

/// A required field, or the derived decoder's error for its absence.
fn required<T, E: de::Error>(slot: Option<T>, field: &'static str) -> Result<T, E> {
    slot.ok_or_else(|| E::missing_field(field))
}

/// A [`TodoStatus`] as its fields arrive. An optional field is `Some(None)` once it was
/// given as `null`, so that a repetition is refused as the derived decoder refuses it.
#[derive(Default)]
#[allow(clippy::option_option)]
struct StatusParts {
    tag: Option<StatusTag>,
    reason: Option<String>,
    until: Option<ResumeCondition>,
    baseline: Option<Option<Fingerprint>>,
    continuation: Option<ContinuationRecord>,
    by: Option<AgentId>,
    turn: Option<TurnId>,
    at: Option<Timestamp>,
    replacement: Option<Option<TodoId>>,
}

impl StatusParts {
    /// A key that is not one of the todo's own fields, under the status `tag`: a field of the
    /// variant is decoded; anything else is an unknown field, under `open` too (the kernel
    /// never writes one, and skipping it would lose what it holds).
    fn field<'de, A: MapAccess<'de>>(
        &mut self,
        tag: StatusTag,
        key: &str,
        source: Source<'_, A>,
    ) -> Result<(), A::Error> {
        match (tag, key) {
            (StatusTag::Blocked | StatusTag::Superseded, "reason") => {
                put(&mut self.reason, "reason", source)
            }
            (StatusTag::Deferred, "until") => put(&mut self.until, "until", source),
            (StatusTag::Deferred, "baseline") => put(&mut self.baseline, "baseline", source),
            (StatusTag::Done, "continuation") => {
                put(&mut self.continuation, "continuation", source)
            }
            (StatusTag::Done, "by") => put(&mut self.by, "by", source),
            (StatusTag::Done, "turn") => put(&mut self.turn, "turn", source),
            (StatusTag::Done, "at") => put(&mut self.at, "at", source),
            (StatusTag::Superseded, "replacement") => {
                put(&mut self.replacement, "replacement", source)
            }
            (tag, other) => Err(de::Error::unknown_field(other, tag.fields())),
        }
    }

    fn finish<E: de::Error>(self) -> Result<TodoStatus, E> {
        Ok(match required(self.tag, "status")? {
            StatusTag::Open => TodoStatus::Open,
            StatusTag::Blocked => TodoStatus::Blocked {
                reason: required(self.reason, "reason")?,
            },
            StatusTag::Deferred => TodoStatus::Deferred {
                until: required(self.until, "until")?,
                baseline: self.baseline.flatten(),
            },
            StatusTag::Done => TodoStatus::Done {
                continuation: required(self.continuation, "continuation")?,
                by: required(self.by, "by")?,
                turn: required(self.turn, "turn")?,
                at: required(self.at, "at")?,
            },
            StatusTag::Superseded => TodoStatus::Superseded {
                reason: required(self.reason, "reason")?,
                replacement: self.replacement.flatten(),
            },
        })
    }
}

impl<'de> Deserialize<'de> for Todo {
    /// Decodes a todo in one pass over its keys, the status's fields straight into their
    /// types once `status` has been read (the kernel writes it before them). Fields of the
    /// status that come before `status` are buffered until the tag says what they are.
    ///
    /// This accepts what serde's derived decoder (with `#[serde(flatten)]` on `status`)
    /// accepts, less unknown keys: those are refused under every status (the derived decoder
    /// skips them under `open`); a repeated key is refused; missing required fields are
    /// refused.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TodoVisitor;

        impl<'de> Visitor<'de> for TodoVisitor {
            type Value = Todo;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("struct Todo")
            }

            #[allow(clippy::too_many_lines)] // one arm per field
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Todo, A::Error> {
                let mut id = None;
                let mut title = None;
                let mut class = None;
                let mut priority = None;
                let mut depends_on = None;
                let mut requires_decisions = None;
                let mut excluded_agents = None;
                let mut assignee: Option<Option<AgentId>> = None;
                let mut writes: Option<Option<Box<WriteSet>>> = None;
                let mut idempotent = None;
                let mut budget: Option<Option<Box<Ledger>>> = None;
                let mut expected_usage: Option<Option<Box<Amounts>>> = None;
                let mut created_by = None;
                let mut created_at = None;
                let mut seq = None;
                let mut lease: Option<Option<Box<Lease>>> = None;
                let mut last_epoch = None;
                let mut monitor: Option<Option<MonitorState>> = None;
                let mut handoff: Option<Option<Box<HandoffNote>>> = None;
                let mut status = StatusParts::default();
                let mut early: Vec<(String, Buffered)> = Vec::new();
                while let Some(key) = map.next_key::<Key<'de>>()? {
                    let input = Source::Input(&mut map);
                    match key.as_str() {
                        "id" => put(&mut id, "id", input)?,
                        "title" => put(&mut title, "title", input)?,
                        "class" => put(&mut class, "class", input)?,
                        "priority" => put(&mut priority, "priority", input)?,
                        "depends_on" => put(&mut depends_on, "depends_on", input)?,
                        "requires_decisions" => {
                            put(&mut requires_decisions, "requires_decisions", input)?;
                        }
                        "excluded_agents" => put(&mut excluded_agents, "excluded_agents", input)?,
                        "assignee" => put(&mut assignee, "assignee", input)?,
                        "writes" => put(&mut writes, "writes", input)?,
                        "idempotent" => put(&mut idempotent, "idempotent", input)?,
                        "budget" => put(&mut budget, "budget", input)?,
                        "expected_usage" => put(&mut expected_usage, "expected_usage", input)?,
                        "created_by" => put(&mut created_by, "created_by", input)?,
                        "created_at" => put(&mut created_at, "created_at", input)?,
                        "seq" => put(&mut seq, "seq", input)?,
                        "lease" => put(&mut lease, "lease", input)?,
                        "last_epoch" => put(&mut last_epoch, "last_epoch", input)?,
                        "monitor" => put(&mut monitor, "monitor", input)?,
                        "handoff" => put(&mut handoff, "handoff", input)?,
                        "status" => put(&mut status.tag, "status", input)?,
                        other => match status.tag {
                            Some(tag) => status.field(tag, other, input)?,
                            None => early.push((key.into_string(), input.buffer()?)),
                        },
                    }
                }
                if let Some(tag) = status.tag {
                    for (key, value) in early {
                        status.field::<A>(tag, &key, Source::Buffer(value))?;
                    }
                }
                Ok(Todo {
                    id: required(id, "id")?,
                    title: required(title, "title")?,
                    class: required(class, "class")?,
                    priority: required(priority, "priority")?,
                    depends_on: depends_on.unwrap_or_default(),
                    requires_decisions: requires_decisions.unwrap_or_default(),
                    excluded_agents: excluded_agents.unwrap_or_default(),
                    assignee: assignee.flatten(),
                    writes: writes.flatten(),
                    idempotent: idempotent.unwrap_or_default(),
                    budget: budget.flatten(),
                    expected_usage: expected_usage.flatten(),
                    created_by: required(created_by, "created_by")?,
                    created_at: required(created_at, "created_at")?,
                    seq: required(seq, "seq")?,
                    status: status.finish()?,
                    lease: lease.flatten(),
                    last_epoch: required(last_epoch, "last_epoch")?,
                    monitor: monitor.flatten(),
                    handoff: handoff.flatten(),
                })
            }
        }

        deserializer.deserialize_map(TodoVisitor)
    }
}

#[cfg(test)]
mod tests {
    //! The hand-written decoders against serde's derived ones, on the kernel's own output and
    //! on every reordering, omission, repetition and addition of keys around it.

    use serde::{Deserialize, Serialize};
    use serde_json::{Value, json};

    use super::*;
    use crate::actor::Actor;

    use crate::ids::DecisionScope;
    use crate::time::Duration;
    use crate::todo::*;

    /// serde's derived decoder of [`Todo`], the reference.
    #[derive(Deserialize)]
    #[serde(remote = "Todo")]
    struct DerivedTodo {
        id: TodoId,
        title: String,
        class: TodoClass,
        priority: Priority,
        #[serde(default)]
        depends_on: Vec<TodoId>,
        #[serde(default)]
        requires_decisions: Vec<DecisionScope>,
        #[serde(default)]
        excluded_agents: Vec<AgentId>,
        #[serde(default)]
        assignee: Option<AgentId>,
        #[serde(default)]
        writes: Option<Box<WriteSet>>,
        #[serde(default)]
        idempotent: bool,
        #[serde(default)]
        budget: Option<Box<Ledger>>,
        #[serde(default)]
        expected_usage: Option<Box<Amounts>>,
        created_by: Actor,
        created_at: Timestamp,
        seq: u64,
        #[serde(flatten)]
        status: TodoStatus,
        #[serde(default)]
        lease: Option<Box<Lease>>,
        last_epoch: u64,
        #[serde(default)]
        monitor: Option<MonitorState>,
        #[serde(default)]
        handoff: Option<Box<HandoffNote>>,
    }

    /// What the derived decoder accepts, less objects with a key that is neither a todo's
    /// field nor one of its status's: those the hand-written decoder refuses.
    fn derived_todo(text: &str) -> Option<Todo> {
        let mut de = serde_json::Deserializer::from_str(text);
        let todo = DerivedTodo::deserialize(&mut de).ok()?;
        de.end().ok()?;
        let keys: serde_json::Map<String, Value> = serde_json::from_str(text).ok()?;
        let status = match &todo.status {
            TodoStatus::Open => &[][..],
            TodoStatus::Blocked { .. } => &["reason"][..],
            TodoStatus::Deferred { .. } => &["until", "baseline"][..],
            TodoStatus::Done { .. } => &["continuation", "by", "turn", "at"][..],
            TodoStatus::Superseded { .. } => &["reason", "replacement"][..],
        };
        let own = [
            "id",
            "title",
            "class",
            "priority",
            "depends_on",
            "requires_decisions",
            "excluded_agents",
            "assignee",
            "writes",
            "idempotent",
            "budget",
            "expected_usage",
            "created_by",
            "created_at",
            "seq",
            "status",
            "lease",
            "last_epoch",
            "monitor",
            "handoff",
        ];
        keys.keys()
            .all(|k| own.contains(&k.as_str()) || status.contains(&k.as_str()))
            .then_some(todo)
    }

    fn derived_class(text: &str) -> Option<TodoClass> {
        let mut de = serde_json::Deserializer::from_str(text);
        let class = DerivedClass::deserialize(&mut de).ok()?;
        de.end().ok()?;
        Some(class)
    }

    fn at(text: &str) -> Timestamp {
        Timestamp::parse(text).expect("a valid timestamp")
    }

    fn id<T: TryFrom<&'static str>>(text: &'static str) -> T {
        T::try_from(text).ok().expect("a valid id")
    }

    fn todo(status: TodoStatus, class: TodoClass) -> Todo {
        Todo {
            id: id("t1"),
            title: "work".into(),
            class,
            priority: Priority::P1,
            depends_on: vec![id("t0")],
            requires_decisions: vec![],
            excluded_agents: vec![],
            assignee: Some(id("a1")),
            writes: None,
            idempotent: true,
            budget: None,
            expected_usage: Some(Box::new(Amounts {
                tokens: 4_000,
                ..Amounts::ONE_TURN
            })),
            created_by: Actor::Person(id("owner")),
            created_at: at("2026-11-29T10:00:00Z"),
            seq: 3,
            status,
            lease: Some(Box::new(Lease {
                holder: id("a1"),
                epoch: 2,
                acquired_at: at("2026-11-29T10:00:00Z"),
                expires_at: at("2026-11-29T11:00:00Z"),
                workspace: None,
                turn: None,
            })),
            last_epoch: 2,
            monitor: None,
            handoff: None,
        }
    }

    fn todos() -> Vec<Todo> {
        let monitor = TodoClass::Monitor(MonitorSpec {
            watches: id("ci"),
            cadence: Duration::minutes(5),
        });
        vec![
            todo(TodoStatus::Open, TodoClass::Advance),
            todo(
                TodoStatus::Blocked {
                    reason: "ci".into(),
                },
                monitor,
            ),
            todo(
                TodoStatus::Deferred {
                    until: ResumeCondition::At {
                        at: at("2026-11-30T10:00:00Z"),
                    },
                    baseline: Some(id("fp")),
                },
                TodoClass::Review { of: id("t0") },
            ),
            todo(
                TodoStatus::Done {
                    continuation: ContinuationRecord::Successors(vec![id("t2")]),
                    by: id("a1"),
                    turn: id("u1"),
                    at: at("2026-11-29T10:30:00Z"),
                },
                TodoClass::Advance,
            ),
            todo(
                TodoStatus::Superseded {
                    reason: "replanned".into(),
                    replacement: None,
                },
                TodoClass::Advance,
            ),
        ]
    }

    /// A JSON object written from `(key, raw JSON)` entries, in their order.
    fn object(entries: &[(String, String)]) -> String {
        let fields: Vec<String> = entries
            .iter()
            .map(|(k, v)| format!("{}:{v}", Value::from(k.as_str())))
            .collect();
        format!("{{{}}}", fields.join(","))
    }

    /// Every variation of `entries` that the comparison runs on.
    fn variations(entries: &[(String, String)]) -> Vec<String> {
        let extras: Vec<(&str, String)> = vec![
            ("reason", json!("why").to_string()),
            (
                "until",
                json!({"when": "at", "at": "2026-12-01T00:00:00Z"}).to_string(),
            ),
            (
                "until",
                r#"{"when":"at","at":"2026-12-01T00:00:00Z","at":"2026-12-02T00:00:00Z"}"#
                    .to_owned(),
            ),
            ("baseline", json!("fp2").to_string()),
            ("baseline", "null".to_owned()),
            ("continuation", json!({"kind": "no_follow_up"}).to_string()),
            (
                "continuation",
                r#"{"kind":"successors","todos":["t3"],"kind":"no_follow_up"}"#.to_owned(),
            ),
            ("by", json!("a2").to_string()),
            ("turn", json!("u2").to_string()),
            ("at", json!("2026-12-01T00:00:00Z").to_string()),
            ("replacement", json!("t9").to_string()),
            ("replacement", "null".to_owned()),
            ("status", json!("open").to_string()),
            ("status", json!("done").to_string()),
            ("status", json!("nonsense").to_string()),
            ("unknown", json!({"a": 1, "a": 2}).to_string()),
            ("by", "5".to_owned()),
            ("until", "\"soon\"".to_owned()),
            ("assignee", "null".to_owned()),
            ("class", json!({"kind": "advance"}).to_string()),
        ];
        let mut out = Vec::new();
        let mut orders = vec![entries.to_vec()];
        let mut sorted = entries.to_vec();
        sorted.sort();
        orders.push(sorted.clone());
        sorted.reverse();
        orders.push(sorted);
        let (tag, rest): (Vec<_>, Vec<_>) =
            entries.iter().cloned().partition(|(k, _)| k == "status");
        orders.push(tag.iter().chain(&rest).cloned().collect());
        orders.push(rest.iter().chain(&tag).cloned().collect());
        for order in &orders {
            out.push(object(order));
            for skip in 0..order.len() {
                let mut fewer = order.clone();
                fewer.remove(skip);
                out.push(object(&fewer));
                let mut more = order.clone();
                more.push(order[skip].clone());
                out.push(object(&more));
            }
            for (key, value) in &extras {
                for place in [0, order.len() / 2, order.len()] {
                    let mut more = order.clone();
                    more.insert(place, ((*key).to_owned(), value.clone()));
                    out.push(object(&more));
                }
            }
        }
        out
    }

    /// The entries of `value`'s JSON in the order the kernel writes them.
    fn entries<T: Serialize>(value: &T) -> Vec<(String, String)> {
        struct Ordered(Vec<(String, String)>);
        impl<'de> Deserialize<'de> for Ordered {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = Ordered;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str("an object")
                    }
                    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ordered, A::Error> {
                        let mut out = Vec::new();
                        while let Some((k, v)) = map.next_entry::<String, Value>()? {
                            out.push((k, v.to_string()));
                        }
                        Ok(Ordered(out))
                    }
                }
                d.deserialize_map(V)
            }
        }
        let text = serde_json::to_string(value).expect("encodes");
        serde_json::from_str::<Ordered>(&text).expect("an object").0
    }

    #[test]
    fn todos_decode_as_the_derived_decoder_decodes_them() {
        let mut accepted = 0;
        let mut refused = 0;
        for todo in todos() {
            let text = serde_json::to_string(&todo).expect("encodes");
            assert_eq!(
                serde_json::from_str::<Todo>(&text).ok().as_ref(),
                Some(&todo)
            );
            for variation in variations(&entries(&todo)) {
                let ours = serde_json::from_str::<Todo>(&variation).ok();
                assert_eq!(ours, derived_todo(&variation), "on {variation}");
                if ours.is_some() {
                    accepted += 1;
                } else {
                    refused += 1;
                }
            }
        }
        // Both outcomes are well represented.
        assert!(
            accepted > 100 && refused > 100,
            "{accepted} accepted, {refused} refused"
        );
    }

    #[test]
    fn a_tag_after_the_status_fields_is_buffered_and_decoded_the_same() {
        let done = &todos()[3];
        let mut order = entries(done);
        let tag = order
            .iter()
            .position(|(k, _)| k == "status")
            .expect("a tag");
        let tag = order.remove(tag);
        order.push(tag);
        let text = object(&order);
        assert_eq!(
            serde_json::from_str::<Todo>(&text).ok().as_ref(),
            Some(done)
        );
        // An unknown key is refused under every status, wherever the tag is: the derived
        // decoder skips it under `open`, which would drop what it holds.
        let open = r#"{"id":"t1","title":"w","class":{"kind":"advance"},"priority":"P2","created_by":{"kind":"person","id":"o"},"created_at":"2026-11-29T10:00:00Z","seq":1,"by":5,"x":{"a":1,"a":2},"status":"open","last_epoch":0}"#;
        assert!(serde_json::from_str::<Todo>(open).is_err());
        let mut de = serde_json::Deserializer::from_str(open);
        assert!(DerivedTodo::deserialize(&mut de).is_ok());
        assert!(derived_todo(open).is_none());
        let known = open.replace(r#""by":5,"x":{"a":1,"a":2},"#, "");
        assert!(serde_json::from_str::<Todo>(&known).is_ok());
        let done = open.replace(r#""status":"open""#, r#""status":"done""#);
        assert!(serde_json::from_str::<Todo>(&done).is_err());
        assert!(derived_todo(&done).is_none());
    }

    #[test]
    fn classes_decode_as_the_derived_decoder_decodes_them() {
        let inputs = [
            r#"{"kind":"advance"}"#,
            r#"{"kind":"advance","x":{"a":1,"a":2}}"#,
            r#"{"x":1,"kind":"advance"}"#,
            r#"{"kind":"advance","kind":"advance"}"#,
            r#"{"kind":"advance","x":1,"kind":"review"}"#,
            r#"{"kind":"review","of":"t1"}"#,
            r#"{"of":"t1","kind":"review"}"#,
            r#"{"kind":"review","of":"t1","x":1}"#,
            r#"{"x":1,"kind":"review","of":"t1"}"#,
            r#"{"kind":"review"}"#,
            r#"{"kind":"review","of":"t1","of":"t2"}"#,
            r#"{"of":"t1","of":"t2","kind":"review"}"#,
            r#"{"kind":"review","of":"not an id"}"#,
            r#"{"kind":"review","of":null}"#,
            r#"{"kind":"monitor","watches":"ci","cadence":5}"#,
            r#"{"cadence":5,"kind":"monitor","watches":"ci"}"#,
            r#"{"kind":"monitor","watches":"ci"}"#,
            r#"{"kind":"monitor","watches":"ci","cadence":5,"z":null}"#,
            r#"{"kind":"monitor","watches":"ci","cadence":5.5}"#,
            r#"{"kind":"monitor","watches":"ci","cadence":-1}"#,
            r#"{"kind":"monitor","cadence":5,"watches":"ci","kind":"monitor"}"#,
            r#"["advance"]"#,
            r#"["review","t1"]"#,
            r#"["monitor","ci",5]"#,
            r#"["monitor",{"watches":"ci","cadence":5}]"#,
            r"[]",
            r#""advance""#,
            "5",
            "null",
            "{}",
            r#"{"kind":"nope"}"#,
            r#"{"kind":5}"#,
            r#"{"kind":null}"#,
        ];
        for input in inputs {
            assert_eq!(
                serde_json::from_str::<TodoClass>(input).ok(),
                derived_class(input),
                "on {input}"
            );
        }
    }

    #[test]
    fn ids_and_timestamps_report_what_the_string_path_reported() {
        #[derive(Debug, Deserialize)]
        #[serde(try_from = "String")]
        struct ViaString(#[allow(dead_code)] TodoId);
        impl TryFrom<String> for ViaString {
            type Error = crate::ids::InvalidId;
            fn try_from(text: String) -> Result<Self, Self::Error> {
                TodoId::new(text).map(ViaString)
            }
        }
        #[derive(Debug, Deserialize)]
        #[serde(try_from = "String")]
        struct StampViaString(#[allow(dead_code)] Timestamp);
        impl TryFrom<String> for StampViaString {
            type Error = crate::time::TimestampError;
            fn try_from(text: String) -> Result<Self, Self::Error> {
                Timestamp::parse(&text).map(StampViaString)
            }
        }
        for input in [
            r#""t1""#,
            r#""bad id""#,
            r#""""#,
            r#""t\u0031""#,
            "5",
            "null",
            "[]",
            r#""2026-11-29T10:00:00Z""#,
            r#""2026-11-29T10:00:00""#,
        ] {
            let ours = serde_json::from_str::<TodoId>(input).map_err(|e| e.to_string());
            let theirs = serde_json::from_str::<ViaString>(input).map_err(|e| e.to_string());
            assert_eq!(ours.map(|_| ()), theirs.map(|_| ()), "on {input}");
            let ours = serde_json::from_str::<Timestamp>(input).map_err(|e| e.to_string());
            let theirs = serde_json::from_str::<StampViaString>(input).map_err(|e| e.to_string());
            assert_eq!(ours.map(|_| ()), theirs.map(|_| ()), "on {input}");
        }
    }
}
