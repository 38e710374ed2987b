//! [`ThreadData`]: the typed data a thread keeps besides its messages, saved with it by every
//! store, and [`Persisted`], how a type of yours is kept in it.
//!
//! A run restores the thread's data when it starts and saves it with the thread after every
//! step; tools, layers and stages read and write it through the run's context
//! ([`RunContext::persisted`](crate::context::RunContext::persisted),
//! [`RunContext::persist`](crate::context::RunContext::persist),
//! [`RunContext::with_thread_data`](crate::context::RunContext::with_thread_data)). The
//! built-ins keep theirs here too: the todo list ([`builtins::todo`][facade-todo])
//! and the files written ([`builtins::filesystem`][facade-filesystem]).
//!
//! The data is a map from a key to a JSON value. Every store keeps it as one row per key
//! (the SQL stores: table `data` / `tower_agent_data`) and writes only the keys whose value
//! changed since its last save of the thread ([`ThreadData::changes_since`]): keep data that
//! changes piece by piece under several keys (the filesystem built-in keeps one key per
//! file), data that changes whole under one.
//!
//! # Keys
//!
//! A key is any text (PostgreSQL refuses the NUL character in it). Keys starting with
//! `tower_agent.` are this crate's: `tower_agent.todos` (the todo list) and
//! `tower_agent.files/` followed by a path (a file written, its content as a JSON string).
//! Name yours after your crate or application (`my_app.counter`), so that they never meet
//! another library's.
//!
//! # Example
//!
//! A tool that counts its calls over the whole conversation: the count is restored from the
//! thread at every run and saved with it after every step.
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use tower_agent_core::{
//!     Agent, AgentRequest, BoxError,
//!     model::ScriptedModel,
//!     store::{MemoryStore, Persisted},
//!     tool::tool_fn,
//! };
//!
//! #[derive(Serialize, Deserialize, Default)]
//! struct Calls(u32);
//!
//! impl Persisted for Calls {
//!     const KEY: &'static str = "my_app.calls";
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), BoxError> {
//! let count = tool_fn("count", "counts its calls", serde_json::json!({"type": "object"}),
//!     |_args, ctx| async move {
//!         let Calls(n) = ctx.persisted::<Calls>()?.unwrap_or_default();
//!         ctx.persist(&Calls(n + 1))?;
//!         Ok(format!("call {}", n + 1))
//!     });
//! let store = MemoryStore::new();
//! let agent = Agent::builder()
//!     .model(
//!         ScriptedModel::new()
//!             .tool_call("count", serde_json::json!({}))
//!             .text("Counted.")
//!             .per_run(),
//!     )
//!     .tool(count)
//!     .store(store.clone())
//!     .build();
//! agent.run(AgentRequest::new("Count.").thread("t1")).await?;
//! agent.run(AgentRequest::new("Again.").thread("t1")).await?;
//!
//! let thread = store.get("t1").unwrap();
//! assert_eq!(thread.data.get::<Calls>()?.map(|c| c.0), Some(2));
//! # Ok(())
//! # }
//! ```
//!
//! [facade-todo]: https://docs.rs/tower-agent/latest/tower_agent/builtins/todo/index.html
//! [facade-filesystem]: https://docs.rs/tower-agent/latest/tower_agent/builtins/filesystem/index.html

use std::{collections::BTreeMap, fmt, ops::Bound, sync::Arc};

use serde::{Deserialize, Deserializer, Serialize, Serializer, de::DeserializeOwned};
use serde_json::Value;

/// A type kept in a thread's [`ThreadData`] under its own key: restored from the thread when
/// a run starts, saved with it after every step. See the [module docs](self).
///
/// Read and write it in a run with [`RunContext::persisted`](crate::context::RunContext::persisted)
/// and [`RunContext::persist`](crate::context::RunContext::persist), or on a
/// [`Thread`](crate::store::Thread) with [`ThreadData::get`] and [`ThreadData::set`].
pub trait Persisted: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The key it is kept under. Name it after your crate or application
    /// (`"my_app.calls"`); keys starting with `tower_agent.` are this crate's.
    const KEY: &'static str;
}

/// The data a [`Thread`](crate::store::Thread) keeps besides its messages: key → JSON value, saved
/// with the thread by every store. See the [module docs](self).
///
/// Cloning it is one reference count (values are shared too), so saving after every step
/// copies nothing; a change clones the map of keys once (not the values) when a saved copy
/// shares it. Empty, it allocates nothing.
#[derive(Clone, Default)]
pub struct ThreadData {
    /// `None`: empty.
    entries: Option<Arc<Entries>>,
}

/// One change of a [`ThreadData`] since an earlier copy of it, from
/// [`ThreadData::changes_since`]: a row a store writes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DataChange<'a> {
    /// The key holds this value now (it is new, or held another one).
    Set(&'a str, &'a Value),
    /// The key is gone.
    Removed(&'a str),
}

type Entries = BTreeMap<Arc<str>, Arc<Value>>;

/// The entries of every empty [`ThreadData`].
static EMPTY: Entries = BTreeMap::new();

impl ThreadData {
    /// No data.
    pub fn new() -> Self {
        Self::default()
    }

    /// The value of `T`, decoded from its key; `None` if there is none.
    ///
    /// # Errors
    ///
    /// The stored value is not a `T` (e.g. written by another version of your type).
    pub fn get<T: Persisted>(&self) -> Result<Option<T>, serde_json::Error> {
        self.value(T::KEY).map(T::deserialize).transpose()
    }

    /// Sets the value of `T` (under [`T::KEY`](Persisted::KEY)).
    ///
    /// # Errors
    ///
    /// `value` cannot be represented in JSON (e.g. a map whose keys are not strings); nothing
    /// is changed then.
    pub fn set<T: Persisted>(&mut self, value: &T) -> Result<(), serde_json::Error> {
        self.set_value(T::KEY, serde_json::to_value(value)?);
        Ok(())
    }

    /// Removes the value of `T`; whether there was one.
    pub fn remove<T: Persisted>(&mut self) -> bool {
        self.remove_value(T::KEY).is_some()
    }

    /// The JSON value under `key`.
    pub fn value(&self, key: &str) -> Option<&Value> {
        self.entries().get(key).map(|v| &**v)
    }

    /// Sets the JSON value under `key`, returning the previous one. Setting the value a key
    /// already holds changes nothing (a store writes nothing for it).
    pub fn set_value(
        &mut self,
        key: impl Into<Arc<str>>,
        value: impl Into<Arc<Value>>,
    ) -> Option<Arc<Value>> {
        let (key, value) = (key.into(), value.into());
        if let Some(old) = self.entries().get(&key)
            && (Arc::ptr_eq(old, &value) || old == &value)
        {
            return Some(value);
        }
        self.entries_mut().insert(key, value)
    }

    /// Removes the value under `key`, returning it.
    pub fn remove_value(&mut self, key: &str) -> Option<Arc<Value>> {
        if !self.entries().contains_key(key) {
            return None;
        }
        self.entries_mut().remove(key)
    }

    /// Every key and value, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.entries().iter().map(|(k, v)| (&**k, &**v))
    }

    /// The keys starting with `prefix` and their values, in key order (e.g. the files of the
    /// filesystem built-in, under `tower_agent.files/`).
    pub fn with_prefix<'a>(
        &'a self,
        prefix: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a Value)> {
        self.entries()
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .map(|(k, v)| (&**k, &**v))
            .take_while(move |(k, _)| k.starts_with(prefix))
    }

    /// How many keys it holds.
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    /// Whether it holds no key.
    pub fn is_empty(&self) -> bool {
        self.entries().is_empty()
    }

    /// What changed in this data since `old`, an earlier copy of it (the data a store saved
    /// last): first the keys removed, then the keys set (new, or holding another value), each
    /// in key order. A store of yours writes these, and only these, rows.
    ///
    /// Nothing when `self` is a clone of `old` that nothing changed since (one comparison,
    /// however many keys); else one lookup per key of each side, a value compared by pointer
    /// first (the values a run did not set are shared with the saved copy's), then by value
    /// (setting a key to the value it holds is no change).
    ///
    /// ```
    /// use serde_json::json;
    /// use tower_agent_core::store::{DataChange, ThreadData};
    ///
    /// let mut data = ThreadData::new();
    /// data.set_value("my_app.a", json!(1));
    /// data.set_value("my_app.b", json!(2));
    /// let saved = data.clone(); // what the store wrote
    /// assert_eq!(data.changes_since(&saved).count(), 0);
    ///
    /// data.set_value("my_app.a", json!(1)); // the same value: no change
    /// data.set_value("my_app.b", json!(3));
    /// data.remove_value("my_app.a");
    /// let changes: Vec<_> = data.changes_since(&saved).collect();
    /// assert_eq!(
    ///     changes,
    ///     [DataChange::Removed("my_app.a"), DataChange::Set("my_app.b", &json!(3))]
    /// );
    /// ```
    pub fn changes_since<'a>(
        &'a self,
        old: &'a ThreadData,
    ) -> impl Iterator<Item = DataChange<'a>> + 'a {
        let (old, new) = if self.ptr_eq(old) {
            (&EMPTY, &EMPTY)
        } else {
            (old.entries(), self.entries())
        };
        let removed = old
            .keys()
            .filter(|k| !new.contains_key(*k))
            .map(|k| DataChange::Removed(k));
        let set = new
            .iter()
            .filter(|(key, value)| {
                !old.get(*key)
                    .is_some_and(|o| Arc::ptr_eq(o, value) || o == *value)
            })
            .map(|(k, v)| DataChange::Set(k, v));
        removed.chain(set)
    }

    /// Whether `self` and `other` are clones of one map (then they are equal, and a store
    /// has nothing to compare).
    pub(crate) fn ptr_eq(&self, other: &Self) -> bool {
        match (&self.entries, &other.entries) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        }
    }

    /// The shared entries (to compare values by pointer first).
    pub(crate) fn entries(&self) -> &Entries {
        self.entries.as_deref().unwrap_or(&EMPTY)
    }

    /// The entries, to change: copied first if a clone shares them.
    fn entries_mut(&mut self) -> &mut Entries {
        Arc::make_mut(self.entries.get_or_insert_with(Default::default))
    }
}

impl PartialEq for ThreadData {
    fn eq(&self, other: &Self) -> bool {
        self.ptr_eq(other) || self.entries() == other.entries()
    }
}

impl fmt::Debug for ThreadData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for ThreadData {
    /// A JSON object: key → value.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for ThreadData {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = BTreeMap::<String, Value>::deserialize(deserializer)?;
        Ok(map.into_iter().collect())
    }
}

impl<K: Into<Arc<str>>, V: Into<Arc<Value>>> FromIterator<(K, V)> for ThreadData {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let entries: Entries = iter
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        ThreadData {
            entries: (!entries.is_empty()).then(|| Arc::new(entries)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Count(u32);

    impl Persisted for Count {
        const KEY: &'static str = "test.count";
    }

    #[test]
    fn typed_and_raw_access() {
        let mut data = ThreadData::new();
        assert_eq!(data.get::<Count>().unwrap(), None);
        data.set(&Count(3)).unwrap();
        assert_eq!(data.get::<Count>().unwrap(), Some(Count(3)));
        assert_eq!(data.value("test.count"), Some(&json!(3)));
        data.set_value("test.count", json!("three"));
        assert!(data.get::<Count>().is_err());
        assert!(data.remove::<Count>());
        assert!(!data.remove::<Count>());
        assert!(data.is_empty());
    }

    #[test]
    fn clones_share_until_changed() {
        let mut data = ThreadData::new();
        data.set_value("a/1", json!(1));
        data.set_value("a/2", json!(2));
        data.set_value("b", json!(3));
        let saved = data.clone();
        assert!(saved.ptr_eq(&data));
        // The same value again changes nothing.
        data.set_value("a/1", json!(1));
        assert!(saved.ptr_eq(&data));
        data.set_value("a/2", json!(20));
        assert!(!saved.ptr_eq(&data));
        assert!(Arc::ptr_eq(&saved.entries()["a/1"], &data.entries()["a/1"]));
        assert_eq!(saved.value("a/2"), Some(&json!(2)));
        let prefixed: Vec<_> = data.with_prefix("a/").map(|(k, _)| k).collect();
        assert_eq!(prefixed, ["a/1", "a/2"]);
        assert_eq!(data.with_prefix("c").count(), 0);
    }

    #[test]
    fn serializes_as_an_object() {
        let data: ThreadData = [("k", json!({"x": [1, "two"]}))].into_iter().collect();
        let text = serde_json::to_string(&data).unwrap();
        assert_eq!(text, r#"{"k":{"x":[1,"two"]}}"#);
        assert_eq!(serde_json::from_str::<ThreadData>(&text).unwrap(), data);
    }
}
