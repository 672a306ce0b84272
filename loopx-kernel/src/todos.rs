//! The goal's todos: an arena in creation order with an index by id.
//!
//! Todos are never removed, so a todo's slot in the arena is stable and creation order is slot
//! order. The state's derived indexes hold slots, which lets `decide` walk the pending set
//! without a lookup by id per todo.
//!
//! Both halves are persistent (see [`crate::persistent`]): a clone of the state shares them, and
//! changing a todo of a shared arena copies only its chunk.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Index;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::ids::TodoId;
use crate::persistent::{Arena, Map};
use crate::todo::Todo;

/// Every todo of a goal, readable like a map from id to todo.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Todos {
    slots: Arena<Todo>,
    by_id: Map<TodoId, u32>,
}

impl Todos {
    /// The todo with this id.
    pub fn get(&self, id: &TodoId) -> Option<&Todo> {
        self.by_id.get(id).map(|&slot| self.at(slot))
    }

    /// True when a todo has this id.
    pub fn contains_key(&self, id: &TodoId) -> bool {
        self.by_id.contains_key(id)
    }

    /// How many todos there are.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Every todo, in creation order.
    pub fn values(&self) -> impl Iterator<Item = &Todo> + '_ {
        self.slots.iter()
    }

    /// Every todo with its id, in id order (as a map would iterate).
    pub fn iter(&self) -> impl Iterator<Item = (&TodoId, &Todo)> + '_ {
        self.by_id.iter().map(|(id, &slot)| (id, self.at(slot)))
    }

    pub(crate) fn slot(&self, id: &TodoId) -> Option<u32> {
        self.by_id.get(id).copied()
    }

    pub(crate) fn at(&self, slot: u32) -> &Todo {
        &self.slots[slot as usize]
    }

    pub(crate) fn get_mut(&mut self, id: &TodoId) -> Option<&mut Todo> {
        let slot = *self.by_id.get(id)?;
        self.slots.get_mut(slot as usize)
    }

    /// Adds a todo at the next slot; the caller has checked that its id is new.
    pub(crate) fn push(&mut self, todo: Todo) -> u32 {
        let slot = u32::try_from(self.slots.len()).unwrap_or(u32::MAX);
        self.by_id.insert(todo.id.clone(), slot);
        self.slots.push(todo);
        slot
    }
}

impl Index<&TodoId> for Todos {
    type Output = Todo;

    /// # Panics
    /// When no todo has this id, like indexing a map.
    fn index(&self, id: &TodoId) -> &Todo {
        match self.get(id) {
            Some(todo) => todo,
            None => panic!("no todo `{id}`"),
        }
    }
}

impl<'a> IntoIterator for &'a Todos {
    type Item = (&'a TodoId, &'a Todo);
    type IntoIter = Box<dyn Iterator<Item = (&'a TodoId, &'a Todo)> + 'a>;

    /// Every todo with its id, in id order.
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl Serialize for Todos {
    /// A JSON object from id to todo, in id order.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Todos {
    /// The JSON object [`Serialize`] writes. Read as a map would be (a repeated id keeps its
    /// last todo), then put in creation order. The kernel writes the ids in order, so the todos
    /// are collected in a vector and only a repeated or unordered id pays for a map.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TodosVisitor;

        impl<'de> Visitor<'de> for TodosVisitor {
            type Value = Vec<(TodoId, Todo)>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0).min(4096));
                while let Some(entry) = map.next_entry::<TodoId, Todo>()? {
                    entries.push(entry);
                }
                Ok(entries)
            }
        }

        let entries = deserializer.deserialize_map(TodosVisitor)?;
        let mut todos: Vec<Todo> = if entries.windows(2).all(|w| w[0].0 < w[1].0) {
            entries.into_iter().map(|(_, todo)| todo).collect()
        } else {
            entries
                .into_iter()
                .collect::<BTreeMap<_, _>>()
                .into_values()
                .collect()
        };
        todos.sort_by_key(|t| t.seq);
        let mut out = Todos::default();
        for todo in todos {
            out.push(todo);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn todo(id: &str, title: &str, seq: u64) -> String {
        format!(
            r#"{{"id":"{id}","title":"{title}","class":{{"kind":"advance"}},"priority":"P2","created_by":{{"kind":"person","id":"o"}},"created_at":"2026-11-29T10:00:00Z","seq":{seq},"status":"open","last_epoch":0}}"#
        )
    }

    /// What the decoder did before: a map (a repeated id keeps its last todo), then creation
    /// order.
    fn through_a_map(text: &str) -> Option<Vec<Todo>> {
        let map: BTreeMap<TodoId, Todo> = serde_json::from_str(text).ok()?;
        let mut todos: Vec<Todo> = map.into_values().collect();
        todos.sort_by_key(|t| t.seq);
        Some(todos)
    }

    #[test]
    fn todos_decode_as_through_a_map_in_any_key_order() {
        let inputs = [
            format!(r#"{{"a":{},"b":{}}}"#, todo("a", "x", 1), todo("b", "y", 0)),
            format!(r#"{{"b":{},"a":{}}}"#, todo("b", "y", 0), todo("a", "x", 1)),
            format!(
                r#"{{"a":{},"b":{},"a":{}}}"#,
                todo("a", "x", 1),
                todo("b", "y", 0),
                todo("a", "z", 2)
            ),
            format!(r#"{{"a":{},"a":{}}}"#, todo("a", "x", 1), todo("a", "z", 1)),
            "{}".to_owned(),
            "[]".to_owned(),
            format!(r#"{{"not an id":{}}}"#, todo("a", "x", 1)),
        ];
        for input in &inputs {
            let ours: Option<Vec<Todo>> = serde_json::from_str::<Todos>(input)
                .ok()
                .map(|t| t.values().cloned().collect());
            assert_eq!(ours, through_a_map(input), "on {input}");
        }
    }
}
