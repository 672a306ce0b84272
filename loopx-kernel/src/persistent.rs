//! Ordered maps and sets whose clone is O(1): the collections of a [`GoalState`].
//!
//! A goal's state grows with its history (every turn, todo, piece of evidence), and it is shared:
//! a store keeps the state of a goal in a cache, hands each caller an owned copy and folds new
//! events onto a copy of the state at the expected revision. With ordinary trees every such copy
//! costs the whole history, so a commit got slower as the goal aged. The collections here are
//! persistent B-trees: a clone shares every node with the original, and a mutation copies only
//! the path to what it changes (O(log n)), so a copy costs nothing until it diverges and then
//! only what it changes.
//!
//! [`Map`] and [`Set`] read like [`BTreeMap`] and
//! [`BTreeSet`]: the same lookups, iteration in key order, and the
//! same serde form (a map, a sequence) byte for byte. They decode only what they write: keys
//! (values) unique and in order, so a stored text that was changed is refused rather than read
//! as something the kernel never held. They are changed only by the kernel, as the state is. The kernel's arenas (indexed by slot) use a chunked `Arena` instead of a tree,
//! so a read costs two hops: `decide` walks thousands of slots per call.
//!
//! [`GoalState`]: crate::GoalState

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::iter::FusedIterator;
use std::marker::PhantomData;
use std::ops::{Index, RangeBounds};
use std::sync::Arc;

use imbl::shared_ptr::DefaultSharedPtr;
use imbl::{OrdMap, OrdSet, ordmap, ordset};
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An ordered map from keys to values whose clone shares its contents (O(1)); reads like a
/// [`BTreeMap`].
#[derive(Clone)]
pub struct Map<K, V>(OrdMap<K, V>);

/// An ordered set whose clone shares its contents (O(1)); reads like a
/// [`BTreeSet`].
#[derive(Clone)]
pub struct Set<T>(OrdSet<T>);

impl<K, V> Default for Map<K, V> {
    fn default() -> Self {
        Map(OrdMap::new())
    }
}

impl<K: Ord, V> Map<K, V> {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// The value for this key.
    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.0.get(key)
    }

    /// True when the map has this key.
    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.0.contains_key(key)
    }

    /// How many entries there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every entry, in key order.
    pub fn iter(&self) -> Iter<'_, K, V> {
        Iter(self.0.iter())
    }

    /// Every key, in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &K> + ExactSizeIterator + '_ {
        self.iter().map(|(key, _)| key)
    }

    /// Every value, in key order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator + '_ {
        self.iter().map(|(_, value)| value)
    }

    /// The entries whose keys fall in `range`, in key order.
    pub fn range<Q, R>(&self, range: R) -> Range<'_, K, V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
        R: RangeBounds<Q>,
    {
        Range(self.0.range(range))
    }

    /// The entry with the smallest key.
    pub fn first_key_value(&self) -> Option<(&K, &V)> {
        self.0.get_min().map(|(key, value)| (key, value))
    }

    /// The entry with the largest key.
    pub fn last_key_value(&self) -> Option<(&K, &V)> {
        self.0.get_max().map(|(key, value)| (key, value))
    }
}

impl<K: Ord + Clone, V: Clone> Map<K, V> {
    /// Sets the value of `key`, returning the one it replaces. Copies only the path to the
    /// entry when the map shares it with a clone.
    pub(crate) fn insert(&mut self, key: K, value: V) -> Option<V> {
        self.0.insert(key, value)
    }

    /// Removes `key`, returning its value.
    pub(crate) fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.0.remove(key)
    }

    /// The value for this key, to change in place (unshared from any clone first).
    pub(crate) fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.0.get_mut(key)
    }

    /// The value for this key, inserting the default first when there is none.
    pub(crate) fn get_or_default(&mut self, key: K) -> &mut V
    where
        V: Default,
    {
        self.0.entry(key).or_default()
    }
}

impl<K: Ord, V: PartialEq> PartialEq for Map<K, V> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl<K: Ord, V: Eq> Eq for Map<K, V> {}

impl<K: Ord, V: PartialEq> PartialEq<BTreeMap<K, V>> for Map<K, V> {
    /// True when both hold the same entries.
    fn eq(&self, other: &BTreeMap<K, V>) -> bool {
        self.len() == other.len() && self.iter().eq(other)
    }
}

impl<K: Ord + fmt::Debug, V: fmt::Debug> fmt::Debug for Map<K, V> {
    /// As a [`BTreeMap`] prints.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: Ord + Borrow<Q>, Q: Ord + ?Sized, V> Index<&Q> for Map<K, V> {
    type Output = V;

    /// # Panics
    /// When the map has no such key, like indexing a `BTreeMap`.
    fn index(&self, key: &Q) -> &V {
        self.get(key).expect("no entry found for key")
    }
}

impl<K: Ord + Clone, V: Clone> FromIterator<(K, V)> for Map<K, V> {
    /// A map of these entries; a repeated key keeps its last value.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(entries: I) -> Self {
        Map(entries.into_iter().collect())
    }
}

impl<'a, K: Ord, V> IntoIterator for &'a Map<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = Iter<'a, K, V>;

    /// Every entry, in key order.
    fn into_iter(self) -> Iter<'a, K, V> {
        self.iter()
    }
}

/// The entries of a [`Map`], in key order.
pub struct Iter<'a, K, V>(ordmap::Iter<'a, K, V, DefaultSharedPtr>);

impl<'a, K, V> Iterator for Iter<'a, K, V> {
    type Item = (&'a K, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl<K, V> DoubleEndedIterator for Iter<'_, K, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back()
    }
}

impl<K, V> ExactSizeIterator for Iter<'_, K, V> {}

impl<K, V> FusedIterator for Iter<'_, K, V> {}

/// The entries of a [`Map`] whose keys fall in a range, in key order.
pub struct Range<'a, K, V>(ordmap::RangedIter<'a, K, V, DefaultSharedPtr>);

impl<'a, K: Ord, V> Iterator for Range<'a, K, V> {
    type Item = (&'a K, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl<K: Ord, V> DoubleEndedIterator for Range<'_, K, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back()
    }
}

impl<K: Ord, V> FusedIterator for Range<'_, K, V> {}

impl<K: Ord + Serialize, V: Serialize> Serialize for Map<K, V> {
    /// A map in key order, exactly as a `BTreeMap` serializes.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de, K, V> Deserialize<'de> for Map<K, V>
where
    K: Ord + Clone + Deserialize<'de>,
    V: Clone + Deserialize<'de>,
{
    /// The map [`Serialize`] writes, and nothing else: its keys in strictly increasing order.
    /// A repeated or out-of-order key is refused (where a `BTreeMap` would keep the last value
    /// or sort silently): the kernel never writes one, so it means the stored text was changed.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MapVisitor<K, V>(PhantomData<(K, V)>);

        impl<'de, K, V> Visitor<'de> for MapVisitor<K, V>
        where
            K: Ord + Clone + Deserialize<'de>,
            V: Clone + Deserialize<'de>,
        {
            type Value = Map<K, V>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<Self::Value, A::Error> {
                let mut map: OrdMap<K, V> = OrdMap::new();
                while let Some((key, value)) = entries.next_entry::<K, V>()? {
                    if map.get_max().is_some_and(|(last, _)| *last >= key) {
                        return Err(de::Error::custom(
                            "map keys out of order or repeated: written keys are unique and sorted",
                        ));
                    }
                    map.insert(key, value);
                }
                Ok(Map(map))
            }
        }

        deserializer.deserialize_map(MapVisitor(PhantomData))
    }
}

impl<T> Default for Set<T> {
    fn default() -> Self {
        Set(OrdSet::new())
    }
}

impl<T: Ord> Set<T> {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// True when the set holds this value.
    pub fn contains<Q>(&self, value: &Q) -> bool
    where
        T: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.0.contains(value)
    }

    /// How many values there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every value, in order.
    pub fn iter(&self) -> SetIter<'_, T> {
        SetIter(self.0.iter())
    }

    /// The smallest value.
    pub fn first(&self) -> Option<&T> {
        self.0.get_min()
    }

    /// The largest value.
    pub fn last(&self) -> Option<&T> {
        self.0.get_max()
    }
}

impl<T: Ord + Clone> Set<T> {
    /// Adds `value`; false when the set already held an equal value (which `value` replaces:
    /// equal values are interchangeable wherever the kernel keeps a set).
    pub(crate) fn insert(&mut self, value: T) -> bool {
        self.0.insert(value).is_none()
    }

    /// Removes `value`; false when the set did not hold it.
    pub(crate) fn remove<Q>(&mut self, value: &Q) -> bool
    where
        T: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.0.remove(value).is_some()
    }
}

impl<T: Ord> PartialEq for Set<T> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl<T: Ord> Eq for Set<T> {}

impl<T: Ord> PartialEq<BTreeSet<T>> for Set<T> {
    /// True when both hold the same values.
    fn eq(&self, other: &BTreeSet<T>) -> bool {
        self.len() == other.len() && self.iter().eq(other)
    }
}

impl<T: Ord + fmt::Debug> fmt::Debug for Set<T> {
    /// As a [`BTreeSet`] prints.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl<T: Ord + Clone> FromIterator<T> for Set<T> {
    /// A set of these values.
    fn from_iter<I: IntoIterator<Item = T>>(values: I) -> Self {
        Set(values.into_iter().collect())
    }
}

impl<'a, T: Ord> IntoIterator for &'a Set<T> {
    type Item = &'a T;
    type IntoIter = SetIter<'a, T>;

    /// Every value, in order.
    fn into_iter(self) -> SetIter<'a, T> {
        self.iter()
    }
}

/// The values of a [`Set`], in order.
pub struct SetIter<'a, T>(ordset::Iter<'a, T, DefaultSharedPtr>);

impl<'a, T: Ord> Iterator for SetIter<'a, T> {
    type Item = &'a T;

    fn next(&mut self) -> Option<&'a T> {
        self.0.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl<T: Ord> DoubleEndedIterator for SetIter<'_, T> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back()
    }
}

impl<T: Ord> ExactSizeIterator for SetIter<'_, T> {}

impl<T: Ord> FusedIterator for SetIter<'_, T> {}

impl<T: Ord + Serialize> Serialize for Set<T> {
    /// A sequence in order, exactly as a `BTreeSet` serializes.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de, T: Ord + Clone + Deserialize<'de>> Deserialize<'de> for Set<T> {
    /// The sequence [`Serialize`] writes, and nothing else: its values in strictly increasing
    /// order. A repeated or out-of-order value is refused (where a `BTreeSet` would collapse
    /// or sort silently): the kernel never writes one.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SetVisitor<T>(PhantomData<T>);

        impl<'de, T: Ord + Clone + Deserialize<'de>> Visitor<'de> for SetVisitor<T> {
            type Value = Set<T>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a sequence")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut values: A) -> Result<Self::Value, A::Error> {
                let mut set: Set<T> = Set::new();
                while let Some(value) = values.next_element::<T>()? {
                    if set.last().is_some_and(|last| *last >= value) {
                        return Err(de::Error::custom(
                            "set values out of order or repeated: written values are unique and sorted",
                        ));
                    }
                    set.insert(value);
                }
                Ok(set)
            }
        }

        deserializer.deserialize_seq(SetVisitor(PhantomData))
    }
}

/// How many values share one chunk of an [`Arena`].
const CHUNK: usize = 64;

/// A growable array whose clone is O(1): chunks of values behind shared pointers. A read costs
/// two hops and no search; changing a value of an arena shared with a clone copies the list of
/// chunk pointers (one per `CHUNK` values) and the one chunk it is in.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Arena<T> {
    chunks: Arc<Vec<Arc<Vec<T>>>>,
    len: usize,
}

impl<T> Default for Arena<T> {
    fn default() -> Self {
        Arena {
            chunks: Arc::default(),
            len: 0,
        }
    }
}

impl<T> Arena<T> {
    /// How many values there are.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// True when there are none.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The value at `index`.
    pub(crate) fn get(&self, index: usize) -> Option<&T> {
        self.chunks.get(index / CHUNK)?.get(index % CHUNK)
    }

    /// Every value, in index order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.chunks.iter().flat_map(|chunk| chunk.iter())
    }
}

impl<T: Clone> Arena<T> {
    /// The value at `index`, to change in place (its chunk unshared from any clone first).
    pub(crate) fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        if index >= self.len {
            return None;
        }
        let chunk = Arc::make_mut(&mut self.chunks).get_mut(index / CHUNK)?;
        Arc::make_mut(chunk).get_mut(index % CHUNK)
    }

    /// Appends `value`.
    pub(crate) fn push(&mut self, value: T) {
        let chunks = Arc::make_mut(&mut self.chunks);
        match chunks.last_mut() {
            Some(chunk) if chunk.len() < CHUNK => Arc::make_mut(chunk).push(value),
            _ => {
                let mut chunk = Vec::with_capacity(CHUNK);
                chunk.push(value);
                chunks.push(Arc::new(chunk));
            }
        }
        self.len += 1;
    }
}

impl<T: fmt::Debug> fmt::Debug for Arena<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T> Index<usize> for Arena<T> {
    type Output = T;

    /// # Panics
    /// When `index` is out of bounds, like indexing a slice.
    fn index(&self, index: usize) -> &T {
        &self.chunks[index / CHUNK][index % CHUNK]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs() -> Vec<(String, u32)> {
        (0..500_u32)
            .map(|n| (format!("k{}", (n * 7919) % 503), n))
            .collect()
    }

    #[test]
    fn a_map_serializes_and_reads_as_a_btreemap_does() {
        let ours: Map<String, u32> = pairs().into_iter().collect();
        let theirs: BTreeMap<String, u32> = pairs().into_iter().collect();
        let text = serde_json::to_string(&ours).unwrap();
        assert_eq!(text, serde_json::to_string(&theirs).unwrap());
        assert_eq!(format!("{ours:?}"), format!("{theirs:?}"));
        assert!(ours.iter().eq(theirs.iter()));
        for input in [text.as_str(), "{}", "[]", r#"{"a":"x"}"#] {
            let ours = serde_json::from_str::<Map<String, u32>>(input).map_err(|e| e.to_string());
            let theirs =
                serde_json::from_str::<BTreeMap<String, u32>>(input).map_err(|e| e.to_string());
            assert_eq!(
                ours.map(|m| m.iter().map(|(k, v)| (k.clone(), *v)).collect()),
                theirs,
                "on {input}"
            );
        }
        // What the kernel never writes is refused, where a `BTreeMap` reads it silently.
        for input in [
            r#"{"b":1,"a":2}"#,
            r#"{"a":1,"a":2}"#,
            r#"{"a":1,"b":2,"b":3}"#,
        ] {
            assert!(serde_json::from_str::<BTreeMap<String, u32>>(input).is_ok());
            let refused = serde_json::from_str::<Map<String, u32>>(input).unwrap_err();
            assert!(
                refused.to_string().contains("out of order or repeated"),
                "{refused}"
            );
        }
    }

    #[test]
    fn a_set_serializes_and_reads_as_a_btreeset_does() {
        let ours: Set<String> = pairs().into_iter().map(|(k, _)| k).collect();
        let theirs: BTreeSet<String> = pairs().into_iter().map(|(k, _)| k).collect();
        let text = serde_json::to_string(&ours).unwrap();
        assert_eq!(text, serde_json::to_string(&theirs).unwrap());
        assert_eq!(format!("{ours:?}"), format!("{theirs:?}"));
        for input in [text.as_str(), "[]", "{}", "[1]"] {
            let ours = serde_json::from_str::<Set<String>>(input).map_err(|e| e.to_string());
            let theirs = serde_json::from_str::<BTreeSet<String>>(input).map_err(|e| e.to_string());
            assert_eq!(
                ours.map(|s| s.iter().cloned().collect()),
                theirs,
                "on {input}"
            );
        }
        for input in [r#"["b","a"]"#, r#"["a","a"]"#] {
            assert!(serde_json::from_str::<BTreeSet<String>>(input).is_ok());
            assert!(
                serde_json::from_str::<Set<String>>(input).is_err(),
                "{input}"
            );
        }
    }

    #[test]
    fn a_clone_shares_until_it_diverges() {
        let original: Map<String, u32> = pairs().into_iter().collect();
        let mut copy = original.clone();
        copy.insert("new".to_owned(), 1);
        *copy.get_mut("k0").unwrap() = 99;
        copy.remove("k1");
        *copy.get_or_default("k2".to_owned()) += 1;
        let expected: BTreeMap<String, u32> = pairs().into_iter().collect();
        assert_eq!(original, expected);
        assert_ne!(original, copy);
        assert_eq!(copy.get("k0"), Some(&99));
        assert!(!copy.contains_key("k1") && original.contains_key("k1"));

        let set: Set<u32> = (0..1000).collect();
        let mut other = set.clone();
        assert!(other.remove(&5) && !other.remove(&5));
        assert!(other.insert(5000) && !other.insert(5000));
        assert!(set.contains(&5) && !set.contains(&5000));
        assert_eq!((set.len(), other.len()), (1000, 1000));
        assert_eq!((set.first(), set.last()), (Some(&0), Some(&999)));
        let within = || "k10".to_owned().."k12".to_owned();
        assert!(original.range(within()).eq(expected.range(within())));

        let mut arena = Arena::default();
        for n in 0..1000_u32 {
            arena.push(n);
        }
        let mut copy = arena.clone();
        *copy.get_mut(130).unwrap() = 7;
        copy.push(1000);
        assert!(arena.iter().copied().eq(0..1000));
        assert_eq!(
            (arena[130], copy[130], copy.len(), copy.get(1000)),
            (130, 7, 1001, Some(&1000))
        );
        assert_eq!((arena.get(1000), arena.clone().get_mut(1000)), (None, None));
    }
}
