//! The run's data saved with its thread ([`ThreadData`], see [`context::data`](crate::context::data)):
//! the [`RunContext`] methods that read and write it, and the built-ins' entries in it (the
//! todo list, the files written).
//!
//! The run's thread data is an entry of its typed data
//! ([`RunContext::with_data`](super::RunContext::with_data)): the agent puts the thread's
//! there when a run starts and saves it with the thread after every step.

use std::{collections::BTreeMap, sync::Arc};

use super::RunContext;
use super::data::{Persisted, ThreadData};

/// One item of the todo list.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Todo {
    /// Its id.
    pub id: String,
    /// What is to be done.
    pub title: String,
    /// How far it is.
    pub status: TodoStatus,
}

impl Todo {
    /// A pending todo.
    pub fn new(id: impl Into<String>, title: impl Into<String>) -> Self {
        Todo {
            id: id.into(),
            title: title.into(),
            status: TodoStatus::Pending,
        }
    }
}

/// The status of a [`Todo`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Finished.
    Done,
}

/// The thread's todo list (the todo built-in's): a JSON array of [`Todo`]s under
/// `tower_agent.todos`.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub(crate) struct Todos(pub(crate) Vec<Todo>);

impl Persisted for Todos {
    const KEY: &'static str = "tower_agent.todos";
}

impl Todos {
    /// The todo list of `data` (empty if there is none, or if it is not a todo list: logged).
    pub(crate) fn of(data: &ThreadData) -> Vec<Todo> {
        match data.get::<Todos>() {
            Ok(todos) => todos.map(|t| t.0).unwrap_or_default(),
            Err(e) => {
                tracing::warn!("the thread's todo list (`{}`) is not one: {e}", Self::KEY);
                Vec::new()
            }
        }
    }

    /// Sets the todo list of `data`.
    pub(crate) fn set(data: &mut ThreadData, todos: Vec<Todo>) {
        let value = serde_json::to_value(Todos(todos)).expect("a todo list is JSON");
        data.set_value(Self::KEY, value);
    }
}

/// The files written or edited in the thread (the filesystem built-ins'): one key per file,
/// `tower_agent.files/` followed by its path, its content a JSON string. One key per file,
/// so that a step that edits one file of many writes one row.
pub(crate) struct FilesWritten;

impl FilesWritten {
    /// What every key of a file starts with.
    pub(crate) const PREFIX: &'static str = "tower_agent.files/";

    /// The files of `data`: path → content.
    pub(crate) fn of(data: &ThreadData) -> BTreeMap<String, Arc<str>> {
        data.with_prefix(Self::PREFIX)
            .filter_map(|(key, value)| {
                let content = value.as_str()?;
                Some((key[Self::PREFIX.len()..].to_owned(), Arc::from(content)))
            })
            .collect()
    }

    /// The paths of the files of `data`.
    #[cfg_attr(not(feature = "axum"), allow(dead_code))]
    pub(crate) fn paths(data: &ThreadData) -> Vec<String> {
        data.with_prefix(Self::PREFIX)
            .map(|(key, _)| key[Self::PREFIX.len()..].to_owned())
            .collect()
    }

    /// Records `content` as the content of file `path` in `data`.
    pub(crate) fn record(data: &mut ThreadData, path: &str, content: &str) {
        data.set_value(
            format!("{}{path}", Self::PREFIX),
            serde_json::Value::String(content.to_owned()),
        );
    }

    /// Removes file `path` from `data`; whether it was there.
    pub(crate) fn remove(data: &mut ThreadData, path: &str) -> bool {
        data.remove_value(&format!("{}{path}", Self::PREFIX))
            .is_some()
    }
}

/// The run's data saved with its thread ([`ThreadData`], see
/// [`context::data`](crate::context::data)): restored from the thread when the run starts, saved
/// with it after every step. A run without a thread id keeps it for the run only.
impl RunContext {
    /// The value of `T` in the run's thread data (see [`Persisted`]); `None` if there is none.
    ///
    /// # Errors
    ///
    /// The stored value is not a `T` (e.g. written by another version of your type).
    pub fn persisted<T: Persisted>(&self) -> Result<Option<T>, serde_json::Error> {
        // Decoded out of the run's lock.
        let value = self.with_data(|d| d.get::<ThreadData>()?.entries().get(T::KEY).cloned());
        value.map(|v| T::deserialize(&*v)).transpose()
    }

    /// Sets the value of `T` in the run's thread data: saved with the thread after the step.
    ///
    /// # Errors
    ///
    /// `value` cannot be represented in JSON; nothing is changed then.
    pub fn persist<T: Persisted>(&self, value: &T) -> Result<(), serde_json::Error> {
        let value = serde_json::to_value(value)?;
        self.with_thread_data(|d| d.set_value(T::KEY, value));
        Ok(())
    }

    /// Runs `f` on the run's thread data (untyped keys, several values at once), under the
    /// run's lock as [`with_data`](Self::with_data).
    pub fn with_thread_data<R>(&self, f: impl FnOnce(&mut ThreadData) -> R) -> R {
        self.with_data(|d| f(d.get_or_default::<ThreadData>()))
    }
}
