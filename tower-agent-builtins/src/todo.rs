//! [`TodoList`]: the `write_todos` tool, a todo list kept in the run's data (read it with
//! [`todos`], set it with [`set_todos`]) and saved with the thread.
//!
//! # Example
//!
//! ```
//! use serde_json::{Value, json};
//! use tower_agent_builtins::todo::TodoList;
//! use tower_agent_core::{Agent, message::Role, model::ScriptedModel};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let agent = Agent::builder()
//!     .model(
//!         ScriptedModel::new()
//!             .tool_call("write_todos", json!({ "todos": [
//!                 { "id": "1", "title": "Read the spec", "status": "done" },
//!                 { "id": "2", "title": "Write the code", "status": "in_progress" },
//!                 { "id": "3", "title": "Write the tests", "status": "pending" },
//!             ]}))
//!             .text("Working on the code."),
//!     )
//!     .setup(TodoList::new())
//!     .build();
//!
//! let resp = agent.run("Implement the spec").await?;
//! let result = resp.messages.iter().find(|m| m.role == Role::Tool).unwrap();
//! let result: Value = serde_json::from_str(&result.text())?;
//! assert_eq!(result["success"], true);
//! assert_eq!(
//!     result["summary"],
//!     json!({ "total": 3, "completed": 1, "in_progress": 1, "pending": 1 })
//! );
//! # Ok(())
//! # }
//! ```
//!
//! # The tool
//!
//! `write_todos` takes the complete list, `{ "todos": [{ "id", "title", "status" }] }` with the
//! statuses `pending`, `in_progress` and `done`, and replaces the run's list ([`todos`]) with
//! it. A run on a thread loads the
//! thread's list and saves it after every step, so the list carries over to the next run.
//!
//! It answers with JSON text (what the plan-completion reminder of the
//! reminders layer, `tower_agent::layers::reminders`, reads):
//!
//! ```text
//! {"success":true,"todos":[...],"summary":{"total":3,"completed":1,"in_progress":1,"pending":1}}
//! ```
//!
//! Invalid arguments (an unknown status, a missing title, a repeated id …) leave the list
//! unchanged and give an error output that says what is wrong and lists the valid statuses.
//!
//! # Task hooks
//!
//! Before the list is replaced, the agent's TaskCreated hooks
//! (`tower_agent::layers::hooks::Hooks::on_task_created`) run for each todo
//! whose id is not in the current list, then its TaskCompleted hooks
//! (`tower_agent::layers::hooks::Hooks::on_task_completed`) for each todo
//! that becomes `done` (in list order; `task_id` is the todo's id, `task_subject` its title).
//! A hook that blocks stops there: the list is left unchanged and the call's error output is
//! `the todo list was not changed: <feedback>`, for the model to act on.
//!
//! # Setup or stage
//!
//! Add it with [`setup`](tower_agent_core::agent::AgentBuilder::setup) for the tool alone, or with
//! [`stage`](tower_agent_core::agent::AgentBuilder::stage) to also show the current list in the system
//! prompt before every model call (nothing is shown while the list is empty).

use std::{collections::HashSet, fmt, sync::Arc};

use futures_util::future::BoxFuture;
use serde::Serialize;
use serde_json::{Value, json};

use tower_agent_core::{
    agent::{Prepare, Setup, SetupContext},
    context::RunContext,
    error::BoxError,
    message::{ToolOutput, ToolSpec},
    model::ModelRequest,
    store::{Persisted, ThreadData},
    tool::{Tool, ToolRequest},
};

/// The default name of the tool.
pub const TOOL_NAME: &str = "write_todos";

/// The default description of the tool, for the model.
pub const TOOL_DESCRIPTION: &str = "Replace your todo list. Use it to plan a task of several \
steps and to track your progress: send the complete list every time (it replaces the current \
one), with exactly one item `in_progress` while you work and items marked `done` as soon as \
they are finished. Statuses: pending, in_progress, done.";

/// Every status, in the order they are listed to the model.
const STATUSES: [TodoStatus; 3] = [
    TodoStatus::Pending,
    TodoStatus::InProgress,
    TodoStatus::Done,
];

fn status_name(status: TodoStatus) -> &'static str {
    match status {
        TodoStatus::Pending => "pending",
        TodoStatus::InProgress => "in_progress",
        TodoStatus::Done => "done",
    }
}

fn valid_statuses() -> String {
    STATUSES
        .iter()
        .map(|s| status_name(*s))
        .collect::<Vec<_>>()
        .join(", ")
}

// ===== TodoList =====

/// The todo-list stage: registers the [`WriteTodos`] tool; as a [`Prepare`] stage, shows the
/// current list to the model at the end of each request
/// ([`ModelRequest::append_reminder`](tower_agent_core::model::ModelRequest::append_reminder)), so the
/// request's prefix stays stable for prompt caching while the list changes.
///
/// See the [module docs](crate::todo) for an example.
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct TodoList {
    tool: WriteTodos,
    heading: Option<Arc<str>>,
}

impl TodoList {
    /// The stage with the tool `write_todos`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Names the tool `name` instead of `write_todos` (e.g. `update_plan`).
    pub fn tool_name(mut self, name: impl Into<String>) -> Self {
        self.tool.spec.name = name.into();
        self
    }

    /// Describes the tool to the model with `description` instead of [`TOOL_DESCRIPTION`].
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.tool.spec.description = description.into();
        self
    }

    /// The line above the list in its reminder (when used as a [`Prepare`] stage); by
    /// default `Your todo list (update it with write_todos):`.
    pub fn heading(mut self, heading: impl Into<String>) -> Self {
        self.heading = Some(heading.into().into());
        self
    }

    /// The tool this stage registers, to add it to an agent or router yourself.
    pub fn tool(&self) -> WriteTodos {
        self.tool.clone()
    }

    /// The system-prompt text showing `todos`, or `None` if there are none.
    fn prompt_text(&self, todos: &[Todo]) -> Option<String> {
        if todos.is_empty() {
            return None;
        }
        let mut text = match &self.heading {
            Some(heading) => heading.to_string(),
            None => format!("Your todo list (update it with {}):", self.tool.spec.name),
        };
        for todo in todos {
            text.push_str(&format!(
                "\n- [{}] {}: {}",
                status_name(todo.status),
                todo.id,
                todo.title
            ));
        }
        Some(text)
    }
}

impl Setup for TodoList {
    fn setup(&self, cx: SetupContext) -> BoxFuture<'_, Result<(), BoxError>> {
        cx.add_tool(self.tool.clone());
        Box::pin(async { Ok(()) })
    }
}

impl Prepare for TodoList {
    /// Appends the current list at the end of the request (nothing if it is empty).
    fn prepare(&self, req: &mut ModelRequest) -> Result<(), BoxError> {
        let text = self.prompt_text(&todos(&req.ctx));
        if let Some(text) = text {
            // At the end of the request, not in the system message: the list changes during a
            // run, and the request's prefix must not (prompt caching).
            req.append_reminder(&text);
        }
        Ok(())
    }
}

// ===== WriteTodos =====

/// The `write_todos` [`Tool`]: replaces the run's todo list. See the [module
/// docs](crate::todo).
///
/// [`TodoList`] registers it in its setup; use [`TodoList::tool`] to register it yourself.
#[derive(Clone)]
pub struct WriteTodos {
    spec: ToolSpec,
}

impl Default for WriteTodos {
    fn default() -> Self {
        WriteTodos {
            spec: ToolSpec::new(TOOL_NAME, TOOL_DESCRIPTION, parameters()),
        }
    }
}

impl fmt::Debug for WriteTodos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteTodos")
            .field("name", &self.spec.name)
            .finish_non_exhaustive()
    }
}

fn parameters() -> Value {
    let statuses: Vec<&str> = STATUSES.iter().map(|s| status_name(*s)).collect();
    json!({
        "type": "object",
        "properties": {
            "todos": {
                "type": "array",
                "description": "The complete todo list; it replaces the current one.",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {
                            "type": "string",
                            "description": "A short id, unique in the list, such as \"1\"."
                        },
                        "title": {
                            "type": "string",
                            "description": "What is to be done."
                        },
                        "status": {
                            "type": "string",
                            "enum": statuses,
                            "description": "pending (not started), in_progress (being worked on) or done (finished)."
                        }
                    },
                    "required": ["id", "title", "status"]
                }
            }
        },
        "required": ["todos"]
    })
}

impl Tool for WriteTodos {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    async fn call(&self, req: ToolRequest) -> Result<ToolOutput, BoxError> {
        let id = req.call.id;
        match parse_todos(&req.call.arguments) {
            Ok(todos) => {
                if let Err(feedback) = task_hooks(&req.ctx, &todos).await {
                    return Ok(ToolOutput::error(
                        id,
                        format!("the todo list was not changed: {feedback}"),
                    ));
                }
                let report = Report {
                    success: true,
                    summary: Summary::of(&todos),
                    todos: &todos,
                };
                let text = serde_json::to_string(&report)?;
                set_todos(&req.ctx, todos);
                Ok(ToolOutput::text(id, text))
            }
            Err(problems) => Ok(ToolOutput::error(
                id,
                error_text(&self.spec.name, &problems),
            )),
        }
    }
}

/// TaskCreated for each todo that is new (an id not in the current list), then TaskCompleted
/// for each todo that becomes `done`, in list order; the first block is the feedback.
async fn task_hooks(ctx: &RunContext, new: &[Todo]) -> Result<(), String> {
    use tower_agent_core::agent::{TaskEvent, TaskInput};
    let Some(hooks) = tower_agent_core::agent::RunHooks::of(ctx) else {
        return Ok(());
    };
    let (created, completed) = (
        hooks.has_task(TaskEvent::Created),
        hooks.has_task(TaskEvent::Completed),
    );
    if !created && !completed {
        return Ok(());
    }
    let old = todos(ctx);
    let before = |id: &str| old.iter().find(|t| t.id == id);
    if created {
        for todo in new.iter().filter(|t| before(&t.id).is_none()) {
            let input = TaskInput::new(TaskEvent::Created, &todo.id, &todo.title);
            hooks.task(input, ctx).await?;
        }
    }
    if completed {
        let done = |t: &&Todo| {
            t.status == TodoStatus::Done
                && before(&t.id).is_none_or(|b| b.status != TodoStatus::Done)
        };
        for todo in new.iter().filter(done) {
            let input = TaskInput::new(TaskEvent::Completed, &todo.id, &todo.title);
            hooks.task(input, ctx).await?;
        }
    }
    Ok(())
}

/// What the tool answers.
#[derive(Serialize)]
struct Report<'a> {
    success: bool,
    todos: &'a [Todo],
    summary: Summary,
}

#[derive(Serialize)]
struct Summary {
    total: usize,
    completed: usize,
    in_progress: usize,
    pending: usize,
}

impl Summary {
    fn of(todos: &[Todo]) -> Self {
        let count = |status| todos.iter().filter(|t| t.status == status).count();
        Summary {
            total: todos.len(),
            completed: count(TodoStatus::Done),
            in_progress: count(TodoStatus::InProgress),
            pending: count(TodoStatus::Pending),
        }
    }
}

fn error_text(tool: &str, problems: &[String]) -> String {
    let mut text = String::from("invalid todo list, nothing was changed:");
    for p in problems {
        text.push_str("\n- ");
        text.push_str(p);
    }
    text.push_str(&format!(
        "\nValid statuses are: {}. Each todo is an object such as \
         {{\"id\": \"1\", \"title\": \"Write the tests\", \"status\": \"pending\"}}. \
         Call {tool} again with the complete list.",
        valid_statuses()
    ));
    text
}

/// The list in `args`, or every problem found in it.
fn parse_todos(args: &Value) -> Result<Vec<Todo>, Vec<String>> {
    let todos = match args.get("todos") {
        Some(Value::Array(items)) => items,
        // Some models send the list JSON-encoded in a string.
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Array(items)) => return parse_items(&items),
            _ => return Err(vec!["`todos` must be an array of todos".into()]),
        },
        Some(_) => return Err(vec!["`todos` must be an array of todos".into()]),
        None => return Err(vec!["missing `todos`: the complete list of todos".into()]),
    };
    parse_items(todos)
}

fn parse_items(items: &[Value]) -> Result<Vec<Todo>, Vec<String>> {
    let mut problems = Vec::new();
    let mut todos = Vec::with_capacity(items.len());
    let mut ids = HashSet::new();
    for (i, item) in items.iter().enumerate() {
        let Value::Object(obj) = item else {
            problems.push(format!("todos[{i}] must be an object"));
            continue;
        };
        let id = match obj.get("id") {
            Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_owned()),
            Some(Value::Number(n)) => Some(n.to_string()),
            Some(_) => {
                problems.push(format!("todos[{i}].id must be a non-empty string"));
                None
            }
            None => {
                problems.push(format!("todos[{i}] has no `id`"));
                None
            }
        };
        let title = match obj.get("title") {
            Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_owned()),
            Some(_) => {
                problems.push(format!("todos[{i}].title must be a non-empty string"));
                None
            }
            None => {
                problems.push(format!("todos[{i}] has no `title`"));
                None
            }
        };
        let status = match obj.get("status") {
            Some(Value::String(s)) => {
                match serde_json::from_value::<TodoStatus>(Value::String(s.clone())) {
                    Ok(status) => Some(status),
                    Err(_) => {
                        problems.push(format!("todos[{i}].status: {s:?} is not a valid status"));
                        None
                    }
                }
            }
            Some(other) => {
                problems.push(format!("todos[{i}].status: {other} is not a valid status"));
                None
            }
            None => {
                problems.push(format!("todos[{i}] has no `status`"));
                None
            }
        };
        if let Some(id) = &id
            && !ids.insert(id.clone())
        {
            problems.push(format!("todos[{i}].id: {id:?} is used by an earlier todo"));
        }
        if let (Some(id), Some(title), Some(status)) = (id, title, status) {
            todos.push(Todo { id, title, status });
        }
    }
    if problems.is_empty() {
        Ok(todos)
    } else {
        Err(problems)
    }
}

// ===== the list =====

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

/// The todo list as thread data ([`Persisted`]): a JSON array of [`Todo`]s under the key
/// `tower_agent.todos` of a thread's [`data`](tower_agent_core::store::Thread::data).
///
/// ```
/// use tower_agent_builtins::todo::{Todo, Todos};
/// use tower_agent_core::store::Thread;
///
/// let mut thread = Thread::new("t1");
/// thread.data.set(&Todos(vec![Todo::new("1", "Write the docs")]))?;
/// assert_eq!(Todos::of(&thread.data)[0].title, "Write the docs");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Todos(pub Vec<Todo>);

impl Persisted for Todos {
    const KEY: &'static str = "tower_agent.todos";
}

impl Todos {
    /// Replaces the todo list in `data`.
    pub fn set(data: &mut ThreadData, todos: Vec<Todo>) {
        let value = serde_json::to_value(Todos(todos)).expect("a todo list is JSON");
        data.set_value(Todos::KEY, value);
    }

    /// The todo list in `data`; empty if there is none, or if what is stored there is not a
    /// todo list (which is logged with `tracing::warn!`).
    pub fn of(data: &ThreadData) -> Vec<Todo> {
        match data.get::<Todos>() {
            Ok(todos) => todos.map(|t| t.0).unwrap_or_default(),
            Err(e) => {
                tracing::warn!("the thread's todo list (`{}`) is not one: {e}", Todos::KEY);
                Vec::new()
            }
        }
    }
}

/// The run's todo list (empty if none was written). It is kept in the run's thread data
/// ([`store::data`](tower_agent_core::store::data), key `tower_agent.todos`), restored from the thread
/// and saved with it; [`Todos::of`] reads it from a thread's data.
pub fn todos(ctx: &RunContext) -> Vec<Todo> {
    ctx.with_thread_data(|d| Todos::of(d))
}

/// Replaces the run's todo list (saved with the thread after the step).
pub fn set_todos(ctx: &RunContext, todos: Vec<Todo>) {
    ctx.with_thread_data(|d| Todos::set(d, todos));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_follow_serde() {
        for status in STATUSES {
            assert_eq!(
                serde_json::to_value(status).unwrap(),
                Value::String(status_name(status).into())
            );
        }
    }

    #[test]
    fn numeric_ids_and_json_string() {
        let todos = parse_todos(&json!({
            "todos": "[{\"id\": 1, \"title\": \"a\", \"status\": \"done\"}]"
        }))
        .unwrap();
        assert_eq!(todos[0].id, "1");
        assert_eq!(todos[0].status, TodoStatus::Done);
    }

    #[test]
    fn all_problems_reported() {
        let problems = parse_todos(&json!({ "todos": [
            { "id": "1", "title": "a", "status": "finished" },
            { "id": "1", "status": "done" },
            "x",
        ]}))
        .unwrap_err();
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(problems[0].contains("\"finished\" is not a valid status"));
        assert!(problems[1].contains("no `title`"));
        assert!(problems[2].contains("used by an earlier todo"));
        assert!(problems[3].contains("must be an object"));
    }

    #[test]
    fn prompt_text_lists_todos() {
        let stage = TodoList::new();
        assert_eq!(stage.prompt_text(&[]), None);
        let mut todo = Todo::new("2", "b");
        todo.status = TodoStatus::InProgress;
        assert_eq!(
            stage.prompt_text(&[Todo::new("1", "a"), todo]).unwrap(),
            "Your todo list (update it with write_todos):\n- [pending] 1: a\n- [in_progress] 2: b"
        );
    }
}
