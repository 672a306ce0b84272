//! The hand-written wire decoders of the hot model types, and their building blocks.
//!
//! serde's derived decoder for an internally tagged enum (`#[serde(tag = "…")]`), and for a
//! struct with a `#[serde(flatten)]` field, first copies the whole object into an owned buffer
//! and only then decodes the variant from it, whatever order the keys come in. A snapshot holds
//! every todo of a goal, each with its status (flattened, internally tagged) and its class
//! (internally tagged), so a cold load spent most of its time building and dropping those
//! buffers. The kernel writes the tag first, so the decoders here read the tag first and decode
//! the rest straight from the input; only an object whose tag comes later (hand-edited JSON) is
//! buffered, and then decoded exactly as the derived decoder would.
//!
//! Each type accepts what the derived decoder accepts, less what the kernel could never have
//! written where the derived decoder would drop it unread (a todo's unknown keys); the tests of
//! each decoder compare it with the derived one on the same inputs. A stored snapshot is held
//! to more than that: [`Snapshot::decode`](crate::Snapshot::decode) accepts only the exact
//! bytes the kernel writes.

use std::borrow::Cow;
use std::fmt;

use serde::de::value::{MapDeserializer, SeqDeserializer};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::forward_to_deserialize_any;
use serde_json::Value;

mod todo;

/// A map key, borrowed from the input when it can be.
pub(crate) struct Key<'de>(Cow<'de, str>);

impl Key<'_> {
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    pub(crate) fn into_string(self) -> String {
        self.0.into_owned()
    }
}

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;

        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }

            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }

            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }

        deserializer.deserialize_identifier(KeyVisitor)
    }
}

/// The entries of a map after its tag, as a map of their own: what an internally tagged
/// enum's variant is decoded from once its tag has been read. A second tag is refused, as the
/// derived decoder refuses it.
pub(crate) struct RestOf<'a, A> {
    map: &'a mut A,
    tag: &'static str,
}

impl<'a, A> RestOf<'a, A> {
    /// The entries of `map` that follow its tag `tag`.
    pub(crate) fn new(map: &'a mut A, tag: &'static str) -> Self {
        RestOf { map, tag }
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for RestOf<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        let Some(key) = self.map.next_key::<Key<'de>>()? else {
            return Ok(None);
        };
        if key.as_str() == self.tag {
            return Err(de::Error::duplicate_field(self.tag));
        }
        let key = match key.0 {
            Cow::Borrowed(text) => seed.deserialize(de::value::BorrowedStrDeserializer::new(text)),
            Cow::Owned(text) => seed.deserialize(de::value::StringDeserializer::new(text)),
        };
        key.map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

impl<'de, A: MapAccess<'de>> Deserializer<'de> for RestOf<'_, A> {
    type Error = A::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, A::Error> {
        visitor.visit_map(self)
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

impl<'de, A: MapAccess<'de>> RestOf<'_, A> {
    /// Refuses any entry after the tag: a variant without fields knows no other key.
    pub(crate) fn none(self) -> Result<(), A::Error> {
        match self.map.next_key::<Key<'de>>()? {
            None => Ok(()),
            Some(key) if key.as_str() == self.tag => Err(de::Error::duplicate_field(self.tag)),
            Some(key) => Err(de::Error::unknown_field(key.as_str(), &[])),
        }
    }
}

/// An error of decoding from a buffer, as an error of the input's own deserializer.
pub(crate) fn rethrow<E: de::Error>(error: &serde_json::Error) -> E {
    E::custom(error)
}

/// Buffers the rest of a map whose first key was `first` (not the tag) and decodes it with
/// `derived`, the derived decoder of the type: the slow path for hand-edited JSON.
pub(crate) fn map_fallback<'de, A, T>(
    first: Key<'de>,
    mut map: A,
    derived: impl FnOnce(
        MapDeserializer<'de, std::vec::IntoIter<(String, Value)>, serde_json::Error>,
    ) -> Result<T, serde_json::Error>,
) -> Result<T, A::Error>
where
    A: MapAccess<'de>,
{
    let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0) + 1);
    entries.push((first.into_string(), map.next_value::<Value>()?));
    while let Some(key) = map.next_key::<Key<'de>>()? {
        entries.push((key.into_string(), map.next_value::<Value>()?));
    }
    derived(MapDeserializer::new(entries.into_iter())).map_err(|e| rethrow(&e))
}

/// Buffers a sequence and decodes it with `derived` (derived decoders of internally tagged
/// enums also accept `[tag, fields…]`).
pub(crate) fn seq_fallback<'de, A, T>(
    mut seq: A,
    derived: impl FnOnce(
        SeqDeserializer<std::vec::IntoIter<Value>, serde_json::Error>,
    ) -> Result<T, serde_json::Error>,
) -> Result<T, A::Error>
where
    A: SeqAccess<'de>,
{
    let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
    while let Some(item) = seq.next_element::<Value>()? {
        items.push(item);
    }
    derived(SeqDeserializer::new(items.into_iter())).map_err(|e| rethrow(&e))
}

/// A value buffered before the tag that says how to decode it, with a note of whether any
/// object inside it repeated a key (a buffer keeps only the last, where decoding straight from
/// the input would have refused the repetition).
pub(crate) struct Buffered {
    value: Value,
    repeated_key: bool,
}

impl Buffered {
    /// Reads the next value of `map` into a buffer.
    pub(crate) fn next<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Self, A::Error> {
        let mut repeated_key = false;
        let value = map.next_value_seed(BufferSeed(&mut repeated_key))?;
        Ok(Buffered {
            value,
            repeated_key,
        })
    }

    /// Decodes the buffered value as a `T`, refusing a repeated key inside it.
    pub(crate) fn decode<T: de::DeserializeOwned, E: de::Error>(
        self,
        field: &'static str,
    ) -> Result<T, E> {
        if self.repeated_key {
            return Err(E::custom(format_args!(
                "a key is repeated inside field `{field}`"
            )));
        }
        T::deserialize(self.value).map_err(|e| rethrow(&e))
    }
}

/// Builds a [`Value`], noting a repeated key in any object.
struct BufferSeed<'a>(&'a mut bool);

impl<'de> DeserializeSeed<'de> for BufferSeed<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for BufferSeed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(BufferSeed(&mut *self.0))? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(BufferSeed(&mut *self.0))?;
            if object.insert(key, value).is_some() {
                *self.0 = true;
            }
        }
        Ok(Value::Object(object))
    }
}
