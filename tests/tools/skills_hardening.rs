//! `SKILL.md` files written by a hostile party (issue 10, item 5): nested YAML aliases ("billion
//! laughs"), oversized files and front matter. Each is skipped with a warning, and the run's
//! memory stays bounded, measured in a child process under an address-space limit.

use crate::support;

use std::{path::Path, time::Instant};

use futures_util::StreamExt;
use proptest::prelude::*;
use support::{
    passed, peak_rss_kib, reported, reported_all, reported_number, rerun_after, write_skill,
};
use tower_agent::{
    Agent,
    agent::AgentEvent,
    builtins::skills::{MAX_FRONT_MATTER, MAX_SKILL_FILE, Skill, Skills},
    model::{ModelResponse, ScriptedModel},
};

/// A 9-level "billion laughs": 9^9 = 387,420,489 strings once the aliases are expanded, from a
/// file of about 400 bytes (`yaml_rust2::YamlLoader` needs over 20 GB for it).
fn billion_laughs() -> String {
    let mut yaml = String::from("---\nname: lol\ndescription: laughs\n");
    yaml.push_str("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..9 {
        let refs = vec![format!("*a{}", i - 1); 9].join(", ");
        yaml.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
    }
    yaml.push_str("---\nLaugh.\n");
    yaml
}

/// The warnings and the system prompt of one run of a [`Skills`] stage over `dir`.
async fn run_skills(dir: &Path) -> (Vec<String>, String) {
    let agent = Agent::builder()
        .model(ScriptedModel::from_fn(|req| {
            Ok(ModelResponse::text(
                req.system().unwrap().text().into_owned(),
            ))
        }))
        .system_prompt("Base.")
        .stage(Skills::new([dir]))
        .build();
    let mut stream = agent.stream("hi");
    let mut warnings = Vec::new();
    while let Some(event) = stream.next().await {
        if let AgentEvent::Warning { message } = event {
            warnings.push(message);
        }
    }
    let resp = stream.take_response().unwrap().unwrap();
    (warnings, resp.text)
}

const CHILD_DIR: &str = "TOWER_AGENT_TEST_SKILLS_DIR";

/// Child role: runs the skills stage over the directory of the parent and reports.
#[tokio::test]
#[ignore = "a child role: run by its parent test through `rerun`"]
async fn child_runs_skills() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let (warnings, system) = run_skills(Path::new(&dir)).await;
    for w in warnings {
        println!("WARNING={w}");
    }
    println!("SYSTEM={}", system.replace('\n', " | "));
    println!("PEAK_RSS_KIB={}", peak_rss_kib());
}

/// The address-space limit of the child process: 2 GiB (the old code needed over 20 GB).
const ADDRESS_SPACE_KIB: u64 = 2 * 1024 * 1024;

/// The peak resident set the child may reach: 64 MiB (a test binary starts at about 10).
const PEAK_RSS_LIMIT_KIB: u64 = 64 * 1024;

#[test]
fn hostile_skill_files_are_skipped_within_a_measured_memory_bound() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let lol = write_skill(root, "lol", &billion_laughs());
    assert!(billion_laughs().len() < 600);
    // 512 MiB of a sparse file, no front matter: only the first MiB may be read.
    let huge = write_skill(root, "huge", "");
    std::fs::File::options()
        .write(true)
        .open(&huge)
        .unwrap()
        .set_len(512 * 1024 * 1024)
        .unwrap();
    // A front matter just over its 64 KiB cap, in a file well under 1 MiB.
    let wide = write_skill(
        root,
        "wide",
        &format!(
            "---\nname: wide\ndescription: {}\n---\n",
            "w".repeat(MAX_FRONT_MATTER)
        ),
    );
    // Anchors and aliases that expand to little still work, and `&`/`*` in quoted text are
    // text.
    write_skill(
        root,
        "pdf",
        "---\nname: &n pdf\ndescription: \"Fill in *PDF* forms & &more\"\nkeywords: [*n, form]\n---\nUse pdftk.\n",
    );

    let started = Instant::now();
    let out = rerun_after(
        &[],
        &format!("ulimit -v {ADDRESS_SPACE_KIB}"),
        &support::test_name!("child_runs_skills"),
    )
    .env(CHILD_DIR, root)
    .output()
    .unwrap();
    let stdout = passed(
        &out,
        "child_runs_skills (the old code aborts: memory allocation failed)",
    );
    assert!(started.elapsed().as_secs() < 20, "{:?}", started.elapsed());

    let peak = reported_number(&out, "PEAK_RSS_KIB");
    assert!(
        peak < PEAK_RSS_LIMIT_KIB,
        "peak RSS {peak} KiB, over {PEAK_RSS_LIMIT_KIB} KiB"
    );

    let warnings: Vec<&str> = reported_all(&stdout, "WARNING").collect();
    assert_eq!(warnings.len(), 3, "{warnings:#?}");
    let warned = |path: &Path, why: &str| {
        let prefix = format!("skills: skipped {}: ", path.display());
        assert!(
            warnings
                .iter()
                .any(|w| w.starts_with(&prefix) && w.contains(why)),
            "{prefix}…{why} not in {warnings:#?}"
        );
    };
    warned(&lol, "too large once its aliases are expanded");
    warned(&huge, &format!("larger than {} MiB", MAX_SKILL_FILE >> 20));
    warned(&wide, "the front matter is larger than 64 KiB");

    let system = reported(&stdout, "SYSTEM").unwrap();
    assert!(
        system.contains("[pdf] Fill in *PDF* forms & &more → Read"),
        "{system}"
    );
    assert!(
        !system.contains("[lol]") && !system.contains("[wide]"),
        "{system}"
    );
}

#[test]
fn aliases_within_the_limits_expand() {
    let skill = Skill::parse(
        "/s/SKILL.md",
        "---\nbase: &base [pdf, form]\nname: &n pdf\ndescription: *n\nkeywords: *base\n---\n",
    )
    .unwrap();
    assert_eq!(skill.description, "pdf");
    assert_eq!(skill.keywords, ["pdf", "form"]);

    // An alias to an anchor whose node is not finished (a cycle) is an error, not a hang.
    let err = Skill::parse("/s/SKILL.md", "---\nname: &a [*a]\ndescription: d\n---\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("invalid YAML front matter"), "{err}");

    // Deep nesting is refused before it is built: by the front matter's limit, and deeper
    // still by the YAML scanner's own.
    let deep = |levels: usize| {
        let text = format!(
            "---\nname: n\ndescription: d\nx: {}{}\n---\n",
            "[".repeat(levels),
            "]".repeat(levels)
        );
        Skill::parse("/s/SKILL.md", &text).unwrap_err().to_string()
    };
    assert!(
        Skill::parse(
            "/s/SKILL.md",
            &format!(
                "---\nname: n\ndescription: d\nx: {}{}\n---\n",
                "[".repeat(63),
                "]".repeat(63)
            )
        )
        .is_ok()
    );
    let err = deep(100);
    assert!(err.contains("nested more than 64 levels"), "{err}");
    let err = deep(30_000);
    assert!(err.contains("recursion limit"), "{err}");
    // Aliases count toward the depth.
    let err = Skill::parse(
        "/s/SKILL.md",
        &format!(
            "---\nname: n\ndescription: d\nx: &x {}{}\ny: {}*x{}\n---\n",
            "[".repeat(40),
            "]".repeat(40),
            "[".repeat(40),
            "]".repeat(40)
        ),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("nested more than 64 levels"), "{err}");
}

// ===== fuzz =====

/// A YAML document of anchors and aliases: each level a list or mapping referring to earlier
/// anchors, some levels nested, with `name` and `description` somewhere.
fn alias_heavy() -> impl Strategy<Value = String> {
    let level = (
        prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        any::<bool>(),
        any::<bool>(),
    );
    (prop::collection::vec(level, 1..14), any::<bool>()).prop_map(|(levels, named)| {
        let mut yaml = String::from("---\n");
        if named {
            yaml.push_str("name: fuzz\ndescription: &d fuzzed\n");
        }
        for (i, (refs, mapping, nest)) in levels.iter().enumerate() {
            let items: Vec<String> = refs
                .iter()
                .map(|r| {
                    if i == 0 {
                        "lol".to_owned()
                    } else {
                        format!("*a{}", r.index(i))
                    }
                })
                .collect();
            let body = if *mapping {
                let pairs: Vec<String> = items
                    .iter()
                    .enumerate()
                    .map(|(k, v)| format!("k{k}: {v}"))
                    .collect();
                format!("{{{}}}", pairs.join(", "))
            } else {
                format!("[{}]", items.join(", "))
            };
            let body = if *nest { format!("[{body}, *d]") } else { body };
            let body = if *nest && !named {
                format!("[{body}]")
            } else {
                body
            };
            yaml.push_str(&format!("a{i}: &a{i} {body}\n"));
        }
        yaml.push_str("---\nbody\n");
        yaml
    })
}

/// Pieces of YAML syntax that random text is made of.
const YAML_TOKENS: &[&str] = &[
    "-",
    ":",
    "&",
    "*",
    "!",
    ",",
    "#",
    "'",
    "\"",
    "|",
    ">",
    "?",
    "%",
    "@",
    " ",
    "\t",
    "\n",
    "[",
    "]",
    "{",
    "}",
    "a",
    "b",
    "0",
    "1",
    "name: ",
    "description: ",
    "&a ",
    "*a ",
    "&b ",
    "*b ",
    "!!str ",
    "!!int ",
    "---\n",
    "...\n",
    "  ",
    "- ",
    "key: ",
    "\u{feff}",
    "é",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn front_matter_of_arbitrary_text_never_panics(text in "\\PC{0,300}") {
        let started = Instant::now();
        let _ = Skill::parse("/s/SKILL.md", &text);
        let _ = Skill::parse("/s/SKILL.md", &format!("---\n{text}\n---\nbody"));
        prop_assert!(started.elapsed().as_millis() < 500);
    }

    #[test]
    fn yaml_like_text_never_panics(
        text in prop::collection::vec(prop::sample::select(YAML_TOKENS), 0..80)
            .prop_map(|tokens| tokens.concat())
    ) {
        let started = Instant::now();
        let _ = Skill::parse("/s/SKILL.md", &format!("---\n{text}\n---\nbody"));
        prop_assert!(started.elapsed().as_millis() < 500);
    }

}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn alias_heavy_front_matter_is_bounded(yaml in alias_heavy()) {
        let started = Instant::now();
        match Skill::parse("/s/SKILL.md", &yaml) {
            Ok(skill) => prop_assert_eq!(skill.name, "fuzz"),
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
        prop_assert!(started.elapsed().as_millis() < 500, "{:?}", started.elapsed());
    }
}
