//! The docs agree with what they describe: the feature tables of the crate docs (`src/lib.rs`)
//! and of the features guide page (`src/guide/features.md`) list every feature of
//! `Cargo.toml`, none that is not there, and say which are on by default; the command hooks'
//! docs link to the one table of events instead of keeping their own.

use std::collections::BTreeMap;

/// A file of the crate, by its path from the crate's root.
fn read(path: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `Cargo.toml`'s `[features]`: each feature with what it turns on.
fn cargo_features() -> BTreeMap<String, Vec<String>> {
    let manifest: toml::Table = read("Cargo.toml").parse().expect("Cargo.toml parses");
    let features = manifest["features"].as_table().expect("a [features] table");
    features
        .iter()
        .map(|(name, on)| {
            let on = on.as_array().expect("a feature is a list");
            let on = on.iter().map(|v| v.as_str().unwrap().to_owned()).collect();
            (name.clone(), on)
        })
        .collect()
}

/// The rows of the Markdown table under the heading `heading` in `text`: each row's cells,
/// trimmed (the header and its rule left out).
fn table_after(text: &str, heading: &str) -> Vec<Vec<String>> {
    let start = text
        .find(heading)
        .unwrap_or_else(|| panic!("no `{heading}`"));
    text[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            let cells = l.trim().trim_matches('|').split(" | ");
            cells.map(|c| c.trim().to_owned()).collect()
        })
        .collect()
}

/// The crate docs: the `//!` lines of `src/lib.rs`.
fn crate_docs() -> String {
    read("src/lib.rs")
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| l.strip_prefix(' ').unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Checks one feature table (`| `name` | yes/no | … |`) against `Cargo.toml`.
fn check_table(page: &str, rows: &[Vec<String>]) {
    let features = cargo_features();
    let default = &features["default"];
    let listed: Vec<&str> = rows.iter().map(|r| r[0].trim_matches('`')).collect();
    for name in features.keys().filter(|n| *n != "default") {
        assert!(
            listed.contains(&name.as_str()),
            "{page}: the feature table lacks `{name}` (listed: {listed:?})"
        );
    }
    for row in rows {
        let name = row[0].trim_matches('`');
        assert!(
            features.contains_key(name) && name != "default",
            "{page}: `{name}` is not a feature of Cargo.toml"
        );
        let on_by_default = default.iter().any(|d| d == name);
        let says = row[1].as_str();
        assert_eq!(
            says,
            if on_by_default { "yes" } else { "no" },
            "{page}: `{name}` is{} on by default",
            if on_by_default { "" } else { " not" }
        );
    }
}

#[test]
fn the_crate_docs_feature_table_lists_every_feature() {
    check_table("src/lib.rs", &table_after(&crate_docs(), "# Feature flags"));
}

#[test]
fn the_features_guide_page_lists_every_feature() {
    let page = read("src/guide/features.md");
    check_table("src/guide/features.md", &table_after(&page, "| Feature |"));
}

/// `full` turns on every other feature: the tables say so.
#[test]
fn full_turns_on_every_feature() {
    let features = cargo_features();
    for name in features
        .keys()
        .filter(|n| !matches!(n.as_str(), "default" | "full"))
    {
        assert!(
            features["full"].contains(name),
            "Cargo.toml: `full` lacks `{name}`"
        );
    }
}

/// The command hooks' docs link to the one table of events (`HookEvent`'s docs, in
/// tower-agent-layers) and keep no table of events of their own
/// (one written by hand lacked 8 of the events).
#[test]
fn the_command_hooks_docs_link_to_the_one_table() {
    let docs = read("tower-agent-command/src/lib.rs");
    let start = docs.find("//! # Events\n").expect("an Events section");
    let end = start + docs[start..].find("//! ## ").expect("a next section");
    let section = &docs[start..end];
    assert!(
        !section.lines().any(|l| l.starts_with("//! |")),
        "{section}"
    );
    assert!(section.contains("[`HookEvent`]"), "{section}");
}
