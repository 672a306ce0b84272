//! The goal's todos: an arena in creation order with an index by id.
//!
//! Creation order is slot order. A todo's slot is stable until a retirement drops todos (see
//! [`crate::retire`]), after which the state rebuilds its derived indexes, which hold slots so
//! that `decide` walks the pending set without a lookup by id per todo.
//!
//! Both halves are persistent (see [`crate::persistent`]): a clone of the state shares them, and
//! changing a todo of a shared arena copies only its chunk.

use std::fmt;
use std::ops::Index;

use serde::de::{self, MapAccess, Visitor};
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

    /// Drops the todos with these ids, keeping the others in creation order (their slots
    /// change: the caller rebuilds what indexes them).
    pub(crate) fn remove_all(&mut self, ids: &std::collections::BTreeSet<&TodoId>) {
        let kept: Vec<Todo> = self
            .slots
            .iter()
            .filter(|t| !ids.contains(&t.id))
            .cloned()
            .collect();
        *self = Todos::default();
        for todo in kept {
            self.push(todo);
        }
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
    /// The JSON object [`Serialize`] writes, and nothing else: ids in strictly increasing order,
    /// each the key of the todo with that id, every todo's creation sequence number distinct.
    /// Anything else is refused: the kernel never writes it, and reading it would build an
    /// arena whose slots and ids disagree (a todo shown twice, another not at all).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TodosVisitor;

        impl<'de> Visitor<'de> for TodosVisitor {
            type Value = Vec<Todo>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map from todo id to todo")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut todos: Vec<Todo> =
                    Vec::with_capacity(map.size_hint().unwrap_or(0).min(4096));
                while let Some(key) = map.next_key::<TodoId>()? {
                    if todos.last().is_some_and(|last| last.id >= key) {
                        return Err(de::Error::custom(format_args!(
                            "todo `{key}` is out of order or repeated: written ids are unique and sorted"
                        )));
                    }
                    let todo: Todo = map.next_value()?;
                    if todo.id != key {
                        return Err(de::Error::custom(format_args!(
                            "the todo under key `{key}` has id `{}`",
                            todo.id
                        )));
                    }
                    todos.push(todo);
                }
                Ok(todos)
            }
        }

        let mut todos = deserializer.deserialize_map(TodosVisitor)?;
        todos.sort_by_key(|t| t.seq);
        if let Some(pair) = todos.windows(2).find(|w| w[0].seq == w[1].seq) {
            return Err(de::Error::custom(format_args!(
                "todos `{}` and `{}` share creation sequence number {}",
                pair[0].id, pair[1].id, pair[0].seq
            )));
        }
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
            r#"{{"id":"{id}","title":"{title}","class":{{"kind":"advance"}},"priority":"P2","created_by":{{"kind":"person","id":"o"}},"created_at":"2026-11-29T10:00:00.000Z","seq":{seq},"status":"open","last_epoch":0}}"#
        )
    }

    fn decoded(text: &str) -> Result<Vec<(String, u64)>, String> {
        serde_json::from_str::<Todos>(text)
            .map(|t| t.values().map(|t| (t.id.to_string(), t.seq)).collect())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn todos_decode_in_creation_order() {
        let text = format!(r#"{{"a":{},"b":{}}}"#, todo("a", "x", 1), todo("b", "y", 0));
        assert_eq!(
            decoded(&text),
            Ok(vec![("b".to_owned(), 0), ("a".to_owned(), 1)])
        );
        assert_eq!(decoded("{}"), Ok(vec![]));
        let todos: Todos = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_string(&todos).unwrap(), text);
        assert_eq!(
            (todos.slot(&"a".parse().unwrap()), todos.len()),
            (Some(1), 2)
        );
    }

    #[test]
    fn todos_refuse_what_the_kernel_never_writes() {
        let refused = [
            // A key that is not the todo's id: slots and ids would disagree.
            (format!(r#"{{"b":{}}}"#, todo("a", "x", 0)), "has id `a`"),
            (
                format!(r#"{{"a":{},"c":{}}}"#, todo("a", "x", 0), todo("b", "y", 1)),
                "has id `b`",
            ),
            // Repeated and unordered ids.
            (
                format!(r#"{{"a":{},"a":{}}}"#, todo("a", "x", 0), todo("a", "z", 1)),
                "out of order or repeated",
            ),
            (
                format!(r#"{{"b":{},"a":{}}}"#, todo("b", "y", 0), todo("a", "x", 1)),
                "out of order or repeated",
            ),
            // Two todos created at once.
            (
                format!(r#"{{"a":{},"b":{}}}"#, todo("a", "x", 4), todo("b", "y", 4)),
                "share creation sequence number 4",
            ),
            ("[]".to_owned(), "a map from todo id to todo"),
            (
                format!(r#"{{"not an id":{}}}"#, todo("a", "x", 1)),
                "invalid todo id",
            ),
        ];
        for (input, problem) in &refused {
            let error = decoded(input).expect_err(input);
            assert!(error.contains(problem), "on {input}: {error}");
        }
    }
}
