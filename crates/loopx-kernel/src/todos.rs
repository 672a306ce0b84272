//! The goal's todos: an arena in creation order with an index by id.
//!
//! Todos are never removed, so a todo's slot in the arena is stable and creation order is slot
//! order. The state's derived indexes hold slots, which lets `decide` walk the pending set
//! without a lookup by id per todo.

use std::collections::BTreeMap;
use std::ops::Index;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::ids::TodoId;
use crate::todo::Todo;

/// Every todo of a goal, readable like a map from id to todo.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Todos {
    slots: Vec<Todo>,
    by_id: BTreeMap<TodoId, u32>,
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
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = BTreeMap::<TodoId, Todo>::deserialize(deserializer)?;
        let mut todos: Vec<Todo> = map.into_values().collect();
        todos.sort_by_key(|t| t.seq);
        let mut out = Todos::default();
        for todo in todos {
            out.push(todo);
        }
        Ok(out)
    }
}
