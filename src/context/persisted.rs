//! The run data saved with its thread ([`Thread`](crate::store::Thread)): the built-ins' todo
//! list and the files they wrote. Typed entries of the run's data
//! ([`RunContext::with_data`](super::RunContext::with_data)) that the agent restores from the
//! thread when a run starts and saves with it after every step.

use std::{collections::BTreeMap, sync::Arc};

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

/// The run's todo list: a typed entry of the run's data, restored from the thread and saved
/// with it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Todos(pub(crate) Vec<Todo>);

/// The files written or edited in the run's thread: a typed entry of the run's data, restored
/// from the thread and saved with it (contents shared, so saving after every step does not
/// copy them).
#[derive(Debug, Clone, Default)]
pub(crate) struct FilesWritten(pub(crate) BTreeMap<String, Arc<str>>);
