//! The todo, skills and memory built-ins, end to end with real temporary files.

use crate::support;

use futures_util::StreamExt;
use serde_json::{Value, json};
use support::write_skill;
use tower_agent::{
    Agent, AgentRequest,
    agent::AgentEvent,
    builtins::{
        memory::Memory,
        skills::Skills,
        todo::{TodoList, TodoStatus, Todos},
    },
    message::{Message, Messages, Role},
    model::{ModelRequest, ModelResponse, ScriptedModel},
    store::MemoryStore,
};

/// The system message of a request ("" if none).
fn system(req: &ModelRequest) -> String {
    req.system()
        .map(|m| m.text().into_owned())
        .unwrap_or_default()
}

/// The tool result messages of a run.
fn tool_results(messages: &Messages) -> Vec<Message> {
    messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .cloned()
        .collect()
}

fn skill_md(name: &str, description: &str, extra: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n{extra}---\n\n{body}\n")
}

async fn warnings(agent: &Agent, request: impl Into<AgentRequest>) -> Vec<String> {
    let mut stream = agent.stream(request);
    let mut warnings = Vec::new();
    while let Some(event) = stream.next().await {
        if let AgentEvent::Warning { message } = event {
            warnings.push(message);
        }
    }
    let resp = stream.take_response().unwrap().unwrap();
    assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
    warnings
}

// ===== todo =====

#[tokio::test]
async fn todo_summary_json() {
    let model = ScriptedModel::new()
        .tool_call(
            "write_todos",
            json!({ "todos": [
                { "id": "1", "title": "Parse config file", "status": "done" },
                { "id": "2", "title": "Implement handler", "status": "in_progress" },
                { "id": "3", "title": "Write tests", "status": "pending" },
                { "id": "4", "title": "Write docs", "status": "pending" },
            ]}),
        )
        .text("ok");
    let agent = Agent::builder().model(model).setup(TodoList::new()).build();
    assert!(agent.tools().is_empty(), "the tool is registered per run");
    let resp = agent.run("plan").await.unwrap();
    let results = tool_results(&resp.messages);
    assert_eq!(results.len(), 1);
    assert!(!results[0].is_error);
    let value: Value = serde_json::from_str(&results[0].text()).unwrap();
    assert_eq!(
        value,
        json!({
            "success": true,
            "todos": [
                { "id": "1", "title": "Parse config file", "status": "done" },
                { "id": "2", "title": "Implement handler", "status": "in_progress" },
                { "id": "3", "title": "Write tests", "status": "pending" },
                { "id": "4", "title": "Write docs", "status": "pending" },
            ],
            "summary": { "total": 4, "completed": 1, "in_progress": 1, "pending": 2 },
        })
    );
}

#[tokio::test]
async fn todo_invalid_status_is_an_error_output() {
    let store = MemoryStore::new();
    let model = ScriptedModel::new()
        .tool_call(
            "write_todos",
            json!({ "todos": [{ "id": "1", "title": "a", "status": "pending" }] }),
        )
        .tool_call(
            "write_todos",
            json!({ "todos": [
                { "id": "1", "title": "a", "status": "done" },
                { "id": "2", "title": "b", "status": "finished" },
            ]}),
        )
        .text("ok");
    let agent = Agent::builder()
        .model(model)
        .store(store.clone())
        .setup(TodoList::new())
        .build();
    let resp = agent
        .run(AgentRequest::new("plan").thread("t"))
        .await
        .unwrap();
    assert!(resp.outcome.is_finished());
    let results = tool_results(&resp.messages);
    let error = &results[1];
    assert!(error.is_error);
    let text = error.text();
    assert!(
        text.contains("todos[1].status: \"finished\" is not a valid status"),
        "{text}"
    );
    assert!(
        text.contains("Valid statuses are: pending, in_progress, done."),
        "{text}"
    );
    // The list is unchanged.
    let todos = Todos::of(&store.get("t").unwrap().data);
    assert_eq!(todos.len(), 1);
    assert_eq!(todos[0].status, TodoStatus::Pending);
}

#[tokio::test]
async fn todo_list_persists_with_the_thread() {
    let store = MemoryStore::new();
    let model = ScriptedModel::new()
        .tool_call(
            "write_todos",
            json!({ "todos": [
                { "id": "1", "title": "Parse config file", "status": "done" },
                { "id": "2", "title": "Write tests", "status": "in_progress" },
            ]}),
        )
        .text("planned")
        .text("resumed")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .store(store.clone())
        .stage(TodoList::new())
        .build();
    agent
        .run(AgentRequest::new("plan").thread("t"))
        .await
        .unwrap();
    assert_eq!(Todos::of(&store.get("t").unwrap().data).len(), 2);

    let second = agent
        .run(AgentRequest::new("go on").thread("t"))
        .await
        .unwrap();
    assert_eq!(second.text, "resumed");
    let requests = model.requests();
    // Empty list: nothing shown; then the list, on the next step and in the next run, as a
    // reminder at the end of the request (not in the system message, which must stay the
    // same for prompt caching).
    let last = |r: &ModelRequest| r.messages.last().unwrap().text().into_owned();
    assert!(!last(&requests[0]).contains("todo list"));
    let expected = "<system-reminder>\nYour todo list (update it with write_todos):\n\
                    - [done] 1: Parse config file\n\
                    - [in_progress] 2: Write tests\n</system-reminder>";
    for request in &requests[1..] {
        assert_eq!(last(request), expected);
        assert_eq!(system(request), "");
    }
    // The request's copy only: the thread keeps neither a system message nor the reminder.
    assert!(second.messages.iter().all(|m| m.role != Role::System));
    assert!(
        second
            .messages
            .iter()
            .all(|m| !m.text().contains("todo list"))
    );
}

#[tokio::test]
async fn todo_tool_can_be_renamed() {
    let model = ScriptedModel::new()
        .tool_call("update_plan", json!({ "todos": [] }))
        .text("ok");
    let agent = Agent::builder()
        .model(model)
        .setup(TodoList::new().tool_name("update_plan"))
        .build();
    let resp = agent.run("plan").await.unwrap();
    let results = tool_results(&resp.messages);
    let value: Value = serde_json::from_str(&results[0].text()).unwrap();
    assert_eq!(value["summary"]["total"], 0);
}

// ===== skills =====

#[tokio::test]
async fn skills_catalog_lines_exact() {
    let dir = tempfile::tempdir().unwrap();
    let a = write_skill(
        dir.path(),
        "b-dir",
        &skill_md("pdf", "Fill in PDF forms", "", "body"),
    );
    let b = write_skill(
        dir.path(),
        "a-dir",
        &skill_md(
            "csv-cleanup",
            ">\n  Clean up CSV\n  files",
            "keywords: [spreadsheet]\nlicense: MIT\n",
            "body",
        ),
    );
    // Not skills: a directory without SKILL.md, a file, a hidden directory.
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    std::fs::write(dir.path().join("README.md"), "hi").unwrap();
    write_skill(dir.path(), ".hidden", &skill_md("hidden", "h", "", ""));

    let model = ScriptedModel::from_fn(|req| Ok(ModelResponse::text(system(req))));
    let agent = Agent::builder()
        .model(model)
        .system_prompt("Base.")
        .stage(
            Skills::new([dir.path().to_path_buf(), dir.path().join("missing")]).heading("Skills:"),
        )
        .build();
    let text = agent.run("hi").await.unwrap().text;
    assert_eq!(
        text,
        format!(
            "Base.\n\nSkills:\n\n\
             [csv-cleanup] Clean up CSV files → Read {} for full instructions\n\
             [pdf] Fill in PDF forms → Read {} for full instructions",
            b.display(),
            a.display()
        )
    );
}

#[tokio::test]
async fn skills_default_heading_and_relative_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_skill(
        &dir.path().join("skills"),
        "pdf",
        &skill_md("pdf", "PDF forms", "", ""),
    );
    let model = ScriptedModel::from_fn(|req| Ok(ModelResponse::text(system(req))));
    let agent = Agent::builder()
        .model(model)
        .stage(Skills::new(["skills"]))
        .build();
    let text = agent
        .run(AgentRequest::new("hi").cwd(dir.path()))
        .await
        .unwrap()
        .text;
    assert_eq!(
        text,
        format!(
            "{}\n\n[pdf] PDF forms → Read {} for full instructions",
            tower_agent::builtins::skills::DEFAULT_HEADING,
            path.display()
        )
    );
    assert!(path.is_absolute());
}

#[tokio::test]
async fn skills_none_found_injects_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let model = ScriptedModel::from_fn(|req| Ok(ModelResponse::text(system(req))));
    let agent = Agent::builder()
        .model(model)
        .system_prompt("Base.")
        .stage(Skills::new([
            dir.path().join("nope"),
            dir.path().to_path_buf(),
        ]))
        .build();
    assert_eq!(agent.run("hi").await.unwrap().text, "Base.");
}

#[tokio::test]
async fn skills_broken_front_matter_is_skipped_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let good = write_skill(dir.path(), "good", &skill_md("good", "Works", "", ""));
    let none = write_skill(dir.path(), "no-front-matter", "# Just markdown\n");
    let bad_yaml = write_skill(
        dir.path(),
        "bad-yaml",
        "---\nname: [unclosed\ndescription: x\n---\n",
    );
    let no_desc = write_skill(
        dir.path(),
        "no-description",
        "---\nname: nodesc\n---\nbody\n",
    );
    let unclosed = write_skill(dir.path(), "unclosed", "---\nname: u\ndescription: d\n");

    let model = ScriptedModel::from_fn(|req| Ok(ModelResponse::text(system(req)))).recording();
    let agent = Agent::builder()
        .model(model.clone())
        .stage(Skills::new([dir.path()]).heading(""))
        .build();
    let warnings = warnings(&agent, "hi").await;
    assert_eq!(warnings.len(), 4, "{warnings:#?}");
    for (path, why) in [
        (&bad_yaml, "invalid YAML front matter"),
        (&no_desc, "no `description`"),
        (&none, "no YAML front matter"),
        (&unclosed, "not closed"),
    ] {
        let prefix = format!("skills: skipped {}: ", path.display());
        assert!(
            warnings
                .iter()
                .any(|w| w.starts_with(&prefix) && w.contains(why)),
            "{prefix}{why} not in {warnings:#?}"
        );
    }
    assert_eq!(
        system(&model.requests()[0]),
        format!(
            "[good] Works → Read {} for full instructions",
            good.display()
        )
    );
}

#[tokio::test]
async fn skills_later_directory_overrides_same_name() {
    let builtin = tempfile::tempdir().unwrap();
    let user = tempfile::tempdir().unwrap();
    write_skill(builtin.path(), "pdf", &skill_md("pdf", "Old", "", ""));
    write_skill(builtin.path(), "zip", &skill_md("zip", "Zips", "", ""));
    let mine = write_skill(user.path(), "my-pdf", &skill_md("pdf", "New", "", ""));
    let skills = Skills::new([builtin.path(), user.path()]);
    let model = ScriptedModel::from_fn(|req| Ok(ModelResponse::text(system(req))));
    let agent = Agent::builder()
        .model(model)
        .stage(skills.heading(""))
        .build();
    let text = agent.run("hi").await.unwrap().text;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(
        lines[0],
        format!("[pdf] New → Read {} for full instructions", mine.display())
    );
    assert!(lines[1].starts_with("[zip] Zips"));
}

#[tokio::test]
async fn skills_just_in_time_on_name_or_keyword_only() {
    let dir = tempfile::tempdir().unwrap();
    write_skill(
        dir.path(),
        "pdf",
        &skill_md(
            "pdf-forms",
            "Fill in PDF forms",
            "keywords: [acroform, Fillable]\n",
            "Use pdftk.",
        ),
    );
    write_skill(
        dir.path(),
        "csv",
        &skill_md("csv", "CSV files", "", "Use the csv crate."),
    );
    let model = ScriptedModel::from_fn(|req| Ok(ModelResponse::text(system(req))));
    let agent = Agent::builder()
        .model(model)
        .stage(Skills::new([dir.path()]).heading("").just_in_time(true))
        .build();

    let jit = "The following skills match this request; follow their instructions:\n\n\
               <skill name=\"pdf-forms\">\nUse pdftk.\n</skill>";
    for prompt in [
        "Please complete this FILLABLE form.",
        "Is there an acroform in it?",
        "Use pdf-forms here",
        "use the PDF forms skill",
    ] {
        let text = agent.run(prompt).await.unwrap().text;
        assert!(text.ends_with(jit), "{prompt}: {text}");
        assert!(!text.contains("<skill name=\"csv\">"), "{prompt}: {text}");
    }
    for prompt in ["Fill in the form", "pdf-formsx", "unfillable", "csvs"] {
        let text = agent.run(prompt).await.unwrap().text;
        assert!(!text.contains("<skill"), "{prompt}: {text}");
    }
    // Two matches, in catalog order.
    let text = agent.run("acroform to CSV").await.unwrap().text;
    assert!(
        text.contains(
            "<skill name=\"csv\">\nUse the csv crate.\n</skill>\n\n<skill name=\"pdf-forms\">"
        ),
        "{text}"
    );

    // Off by default.
    let model = ScriptedModel::from_fn(|req| Ok(ModelResponse::text(system(req))));
    let agent = Agent::builder()
        .model(model)
        .stage(Skills::new([dir.path()]))
        .build();
    let text = agent.run("acroform").await.unwrap().text;
    assert!(!text.contains("<skill"), "{text}");
}

#[tokio::test]
async fn skills_just_in_time_follows_the_run_prompt_on_every_step() {
    let dir = tempfile::tempdir().unwrap();
    write_skill(dir.path(), "pdf", &skill_md("pdf", "PDF", "", "Use pdftk."));
    let model = ScriptedModel::new()
        .tool_call("write_todos", json!({ "todos": [] }))
        .text("done")
        .tool_call("write_todos", json!({ "todos": [] }))
        .text("done")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .store(MemoryStore::new())
        .setup(TodoList::new())
        .stage(Skills::new([dir.path()]).just_in_time(true))
        .build();
    agent
        .run(AgentRequest::new("fill the pdf").thread("t"))
        .await
        .unwrap();
    // The second run on the thread has the first prompt in its history, but not in its own.
    agent
        .run(AgentRequest::new("now the spreadsheet").thread("t"))
        .await
        .unwrap();
    let requests = model.requests();
    assert_eq!(requests.len(), 4);
    assert!(system(&requests[0]).contains("<skill name=\"pdf\">"));
    assert!(system(&requests[1]).contains("<skill name=\"pdf\">"));
    assert!(!system(&requests[2]).contains("<skill"));
    assert!(!system(&requests[3]).contains("<skill"));
}

#[tokio::test]
async fn two_skills_stages_do_not_collide() {
    let one = tempfile::tempdir().unwrap();
    let two = tempfile::tempdir().unwrap();
    write_skill(one.path(), "a", &skill_md("a", "A", "", ""));
    write_skill(two.path(), "b", &skill_md("b", "B", "", ""));
    let model = ScriptedModel::from_fn(|req| Ok(ModelResponse::text(system(req))));
    let agent = Agent::builder()
        .model(model)
        .stage(Skills::new([one.path()]).heading("One:"))
        .stage(Skills::new([two.path()]).heading("Two:"))
        .build();
    let text = agent.run("hi").await.unwrap().text;
    let text: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(text.len(), 4, "{text:#?}");
    assert_eq!(text[0], "One:");
    assert!(text[1].starts_with("[a] A"));
    assert_eq!(text[2], "Two:");
    assert!(text[3].starts_with("[b] B"));
}

// ===== memory =====

const GUIDELINES: &str = "Guidelines for agent memory:
- This memory persists across conversations
- You can update it by using edit_file on the AGENTS.md file
- Use it to track important context, decisions, and patterns
- Keep entries concise and organized";

#[tokio::test]
async fn memory_joins_files_and_skips_missing_ones() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("AGENTS.md"), "# Project\n- use cargo\n").unwrap();
    std::fs::create_dir(dir.path().join("home")).unwrap();
    let home = dir.path().join("home/AGENTS.md");
    std::fs::write(&home, "\n- the user likes short answers\n\n").unwrap();

    let model = ScriptedModel::from_fn(|req| Ok(ModelResponse::text(system(req))));
    let memory = Memory::new([
        home.clone(),
        dir.path().join("missing/AGENTS.md"),
        "AGENTS.md".into(),
    ]);
    let agent = Agent::builder()
        .model(model)
        .system_prompt("Base.")
        .cwd(dir.path())
        .stage(memory)
        .build();
    let warnings = warnings(&agent, "hi").await;
    assert!(warnings.is_empty(), "{warnings:?}");
    let text = agent.run("hi").await.unwrap().text;
    assert_eq!(
        text,
        format!(
            "Base.\n\n<agent_memory>\n\
             - the user likes short answers\n\n---\n\n# Project\n- use cargo\n\
             </agent_memory>\n\n{GUIDELINES}"
        )
    );
}

#[tokio::test]
async fn memory_without_files_injects_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("EMPTY.md"), " \n\n").unwrap();
    let model = ScriptedModel::from_fn(|req| Ok(ModelResponse::text(system(req))));
    let agent = Agent::builder()
        .model(model)
        .system_prompt("Base.")
        .stage(Memory::new([
            dir.path().join("AGENTS.md"),
            dir.path().join("EMPTY.md"),
        ]))
        .build();
    assert_eq!(agent.run("hi").await.unwrap().text, "Base.");
}

#[tokio::test]
async fn memory_non_utf8_file_is_skipped_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("BAD.md");
    std::fs::write(&bad, [0xff, 0xfe, 0x00, 0x80]).unwrap();
    std::fs::write(dir.path().join("AGENTS.md"), "fine").unwrap();
    let model = ScriptedModel::from_fn(|req| Ok(ModelResponse::text(system(req)))).recording();
    let memory = Memory::new([bad.clone(), dir.path().join("AGENTS.md")]).without_guidelines();
    let agent = Agent::builder().model(model.clone()).stage(memory).build();
    let warnings = warnings(&agent, "hi").await;
    assert_eq!(
        warnings,
        [format!(
            "memory: skipped {}: not valid UTF-8",
            bad.display()
        )]
    );
    assert_eq!(
        system(&model.requests()[0]),
        "<agent_memory>\nfine\n</agent_memory>"
    );
}

#[tokio::test]
async fn memory_is_reread_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("AGENTS.md");
    std::fs::write(&file, "one").unwrap();
    let memory = Memory::new([file.clone()]).guidelines("Edit it.");
    let model = ScriptedModel::from_fn(|req| Ok(ModelResponse::text(system(req))));
    let agent = Agent::builder().model(model).stage(memory).build();
    assert_eq!(
        agent.run("hi").await.unwrap().text,
        "<agent_memory>\none\n</agent_memory>\n\nEdit it."
    );
    std::fs::write(&file, "two").unwrap();
    assert_eq!(
        agent.run("hi").await.unwrap().text,
        "<agent_memory>\ntwo\n</agent_memory>\n\nEdit it."
    );
}

// ===== together =====

#[tokio::test]
async fn prepare_output_on_every_model_call() {
    let dir = tempfile::tempdir().unwrap();
    let skill = write_skill(
        &dir.path().join("skills"),
        "pdf",
        &skill_md("pdf", "PDF forms", "", ""),
    );
    std::fs::write(dir.path().join("AGENTS.md"), "remember this").unwrap();
    let model = ScriptedModel::new()
        .tool_call(
            "write_todos",
            json!({ "todos": [{ "id": "1", "title": "a", "status": "in_progress" }] }),
        )
        .tool_call(
            "write_todos",
            json!({ "todos": [{ "id": "1", "title": "a", "status": "done" }] }),
        )
        .text("all done")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .system_prompt("Base.")
        .cwd(dir.path())
        .setup(TodoList::new())
        .stage(Skills::new(["skills"]).heading("Skills:"))
        .stage(Memory::new(["AGENTS.md"]).without_guidelines())
        .build();
    let resp = agent.run("go").await.unwrap();
    assert_eq!(resp.text, "all done");
    let expected = format!(
        "Base.\n\nSkills:\n\n[pdf] PDF forms → Read {} for full instructions\n\n\
         <agent_memory>\nremember this\n</agent_memory>",
        skill.display()
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    for (i, req) in requests.iter().enumerate() {
        assert_eq!(system(req), expected, "model call {i}");
        assert!(req.tools.iter().any(|t| t.name == "write_todos"));
    }
    // The thread keeps the plain system prompt.
    assert_eq!(resp.messages.first().unwrap().text(), "Base.");
}

#[tokio::test]
async fn loaded_reports_the_run_data() {
    let dir = tempfile::tempdir().unwrap();
    write_skill(
        dir.path(),
        "pdf",
        &skill_md("pdf", "PDF", "keywords: a, b\n", "x"),
    );
    std::fs::write(dir.path().join("AGENTS.md"), "m").unwrap();
    let skills = Skills::new([dir.path()]);
    let memory = Memory::new([dir.path().join("AGENTS.md")]);
    let (s, m) = (skills.clone(), memory.clone());
    let model = ScriptedModel::from_fn(move |req| {
        let loaded = s.loaded(&req.ctx);
        assert_eq!(loaded.len(), 1);
        assert_eq!(loaded[0].keywords, ["a", "b"]);
        assert_eq!(loaded[0].body, "x");
        assert_eq!(m.loaded(&req.ctx).as_deref(), Some("m"));
        Ok(ModelResponse::text("ok"))
    });
    let agent = Agent::builder()
        .model(model)
        .stage(skills)
        .stage(memory)
        .build();
    assert!(agent.run("hi").await.unwrap().outcome.is_finished());
}

/// An `AGENTS.md` that is a FIFO is refused at once (it used to block the run forever), and
/// one over [`MAX_MEMORY_FILE`] is skipped rather than put whole into the system prompt.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_fifo_and_huge_files_are_skipped_at_once() {
    use tower_agent::builtins::memory::MAX_MEMORY_FILE;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("FIFO.md");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let huge = dir.path().join("HUGE.md");
    std::fs::write(&huge, "x".repeat(MAX_MEMORY_FILE as usize + 1)).unwrap();
    std::fs::write(dir.path().join("AGENTS.md"), "fine").unwrap();
    let memory = Memory::new([fifo.clone(), huge.clone(), dir.path().join("AGENTS.md")])
        .without_guidelines();
    let model = ScriptedModel::from_fn(|req| Ok(ModelResponse::text(system(req)))).recording();
    let agent = Agent::builder().model(model.clone()).stage(memory).build();
    let run = tokio::time::timeout(crate::support::PATIENCE, warnings(&agent, "hi")).await;
    let Ok(warnings) = run else {
        // Release the thread blocked in `open` before failing.
        let _ = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fifo);
        panic!("the memory stage blocked on a FIFO");
    };
    assert_eq!(
        warnings,
        [
            format!("memory: skipped {}: not a regular file", fifo.display()),
            format!("memory: skipped {}: larger than 1 MiB", huge.display()),
        ]
    );
    assert_eq!(
        system(&model.requests()[0]),
        "<agent_memory>\nfine\n</agent_memory>"
    );
}
