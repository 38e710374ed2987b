//! The run's data saved with its thread ([`ThreadData`], see [`context::data`](crate::context::data)):
//! the [`RunContext`] methods that read and write it, and the built-ins' entries in it (the
//! todo list, the files written: [`ThreadData::todos`], [`ThreadData::files`]).
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
struct Todos(Vec<Todo>);

impl Persisted for Todos {
    const KEY: &'static str = "tower_agent.todos";
}

/// What every key of a file written starts with (the filesystem built-ins'): one key per
/// file, this prefix followed by its path, its content a JSON string. One key per file, so
/// that a step that edits one file of many writes one row.
const FILES: &str = "tower_agent.files/";

/// The built-ins' entries: the todo list and the files written, as
/// [`Thread`](crate::store::Thread) shows them (its methods of the same names read these).
/// In a run, reach them through [`RunContext::with_thread_data`].
impl ThreadData {
    /// The todo list (of the todo built-in, under the key `tower_agent.todos`); empty if
    /// there is none, or if what is stored there is not a todo list (which is logged with
    /// `tracing::warn!`).
    ///
    /// ```
    /// use tower_agent_core::{context::Todo, store::ThreadData};
    ///
    /// let mut data = ThreadData::new();
    /// data.set_todos(vec![Todo::new("1", "Write the docs")]);
    /// assert_eq!(data.todos()[0].title, "Write the docs");
    /// ```
    pub fn todos(&self) -> Vec<Todo> {
        match self.get::<Todos>() {
            Ok(todos) => todos.map(|t| t.0).unwrap_or_default(),
            Err(e) => {
                tracing::warn!("the thread's todo list (`{}`) is not one: {e}", Todos::KEY);
                Vec::new()
            }
        }
    }

    /// Replaces the todo list.
    pub fn set_todos(&mut self, todos: Vec<Todo>) {
        let value = serde_json::to_value(Todos(todos)).expect("a todo list is JSON");
        self.set_value(Todos::KEY, value);
    }

    /// The files written or edited in the thread (by the filesystem built-ins, one key per
    /// file: `tower_agent.files/` followed by its path, its content a JSON string): path →
    /// content. A value that is not a string is left out.
    pub fn files(&self) -> BTreeMap<String, Arc<str>> {
        self.with_prefix(FILES)
            .filter_map(|(key, value)| {
                let content = value.as_str()?;
                Some((key[FILES.len()..].to_owned(), Arc::from(content)))
            })
            .collect()
    }

    /// The paths of the [`files`](Self::files), in order (their contents are not copied).
    pub fn file_paths(&self) -> impl Iterator<Item = &str> {
        self.with_prefix(FILES).map(|(key, _)| &key[FILES.len()..])
    }

    /// Sets the content of file `path` among the [`files`](Self::files) (only its key
    /// changes: a store writes that one).
    pub fn set_file(&mut self, path: &str, content: &str) {
        self.set_value(
            format!("{FILES}{path}"),
            serde_json::Value::String(content.to_owned()),
        );
    }

    /// Removes file `path` from the [`files`](Self::files); whether it was there.
    pub fn remove_file(&mut self, path: &str) -> bool {
        self.remove_value(&format!("{FILES}{path}")).is_some()
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
