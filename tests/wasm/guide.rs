//! The WebAssembly hooks guide (`src/guide/wasm_hooks.md`) against what it quotes, so that a
//! user who copies from it gets what this crate uses: the Cranelift profile of its own
//! `Cargo.toml`, componentize-py at the version `.ci/wasm-guests` pins, installed as that
//! script installs it (in a virtual environment), and the WIT of [`tower_agent::wasm::WIT`].

use toml::Table;

const GUIDE: &str = include_str!("../../src/guide/wasm_hooks.md");
const MANIFEST: &str = include_str!("../../Cargo.toml");
const GUESTS: &str = include_str!("../../.ci/wasm-guests");

/// The `[profile.dev.package.*]` tables of a TOML text.
fn dev_package_profiles(text: &str) -> Table {
    let table: Table = text.parse().unwrap_or_else(|e| panic!("{e}\n{text}"));
    table
        .get("profile")
        .and_then(|p| p.get("dev"))
        .and_then(|d| d.get("package"))
        .and_then(|p| p.as_table())
        .cloned()
        .unwrap_or_default()
}

/// The guide's code blocks of `language`, in order.
fn blocks<'a>(language: &str) -> Vec<&'a str> {
    let fence = format!("```{language}\n");
    GUIDE
        .split(fence.as_str())
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap())
        .collect()
}

/// Cargo applies a profile only in the workspace that declares it: the guide gives a user's
/// workspace the crate's own optimised-Cranelift lines, every one of them.
#[test]
fn the_guide_gives_the_crates_own_cranelift_profile() {
    let ours = dev_package_profiles(MANIFEST);
    assert!(ours.contains_key("cranelift-codegen"), "{ours:?}");
    let given: Vec<Table> = blocks("toml")
        .into_iter()
        .map(dev_package_profiles)
        .filter(|t| !t.is_empty())
        .collect();
    assert_eq!(given, [ours], "the guide's [profile.dev.package.*] lines");
}

/// componentize-py is installed in a virtual environment, at the version the crate's own
/// guests are built with, and run from there on the WIT written out of `wasm::WIT`.
#[test]
fn the_guide_installs_componentize_py_as_the_crate_does() {
    let pin = GUESTS
        .lines()
        .find_map(|l| l.strip_prefix("COMPONENTIZE_PY=\""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("the pin in .ci/wasm-guests");
    let shell = blocks("sh").join("\n");
    let venv = shell.find("python3 -m venv .venv").expect("a venv");
    let install = shell
        .find(&format!(".venv/bin/pip install {pin}"))
        .unwrap_or_else(|| panic!("`pip install {pin}` in the venv:\n{shell}"));
    assert!(venv < install, "{shell}");
    assert!(
        shell.contains(".venv/bin/componentize-py -d hook.wit "),
        "{shell}"
    );
    assert!(
        GUIDE.contains("std::fs::write(&path, tower_agent::wasm::WIT)"),
        "the guide shows how to write the WIT out"
    );
}
