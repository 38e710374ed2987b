//! Hand-written guests: core modules in WAT (the `wat` crate), made components of the crate's
//! `hook` world with `wit-component`, the way `wasm-tools component new` does.
//!
//! Each guest has a bump allocator (`cabi_realloc`) reset after every call
//! (`cabi_post_handle`), its strings in data segments, `describe` answering its description,
//! and a `handle` whose body is the guest's own: it can call `$ok` / `$err` with a string's
//! offset and length to answer, and read the event's JSON at `$ptr`/`$len`.

/// Where the guest's strings start.
const DATA: usize = 1024;
/// The first byte of the heap, past the strings.
const HEAP: usize = 32 * 1024;

/// A guest being written.
pub(crate) struct Guest {
    describe: String,
    strings: Vec<Vec<u8>>,
    body: String,
    funcs: String,
    wit: String,
}

impl Guest {
    /// A guest describing itself with `describe` (JSON).
    pub(crate) fn new(describe: &str) -> Self {
        Guest {
            describe: describe.to_owned(),
            strings: Vec::new(),
            body: String::new(),
            funcs: String::new(),
            wit: tower_agent::wasm::WIT.to_owned(),
        }
    }

    /// Adds a string to the guest's data: its `(offset, length)` as WAT constants.
    pub(crate) fn string(&mut self, bytes: impl AsRef<[u8]>) -> (String, String) {
        let offset = DATA
            + 64
            + self.describe.len()
            + self.strings.iter().map(|s| s.len() + 8).sum::<usize>();
        self.strings.push(bytes.as_ref().to_vec());
        let len = bytes.as_ref().len();
        (
            format!("(i32.const {offset})"),
            format!("(i32.const {len})"),
        )
    }

    /// `handle`'s body: WAT instructions ending with an `i32` (what `$ok` / `$err` return).
    pub(crate) fn handle(mut self, body: &str) -> Self {
        self.body = body.to_owned();
        self
    }

    /// More functions (and imports) for the module.
    pub(crate) fn funcs(mut self, funcs: &str) -> Self {
        self.funcs.push_str(funcs);
        self
    }

    /// Another WIT (a world `hook` that imports more).
    pub(crate) fn wit(mut self, wit: &str) -> Self {
        self.wit = wit.to_owned();
        self
    }

    /// The module's text.
    pub(crate) fn wat(&self) -> String {
        let mut data = String::new();
        let describe_at = DATA;
        data.push_str(&segment(describe_at, self.describe.as_bytes()));
        let mut at = DATA + 64 + self.describe.len();
        for s in &self.strings {
            data.push_str(&segment(at, s));
            at += s.len() + 8;
        }
        assert!(at < HEAP - 64, "the guest's strings overflow into its heap");
        format!(
            r#"(module
  {funcs_imports}
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const {HEAP}))
  {data}
  (func $realloc (export "cabi_realloc")
    (param $old i32) (param $old_size i32) (param $align i32) (param $size i32) (result i32)
    (local $at i32) (local $end i32)
    (local.set $at (i32.and
      (i32.add (global.get $heap) (i32.sub (local.get $align) (i32.const 1)))
      (i32.sub (i32.const 0) (local.get $align))))
    (local.set $end (i32.add (local.get $at) (local.get $size)))
    (if (i32.gt_u (local.get $end) (i32.mul (memory.size) (i32.const 65536)))
      (then
        (if (i32.eq
              (memory.grow (i32.add (i32.const 1) (i32.shr_u
                (i32.sub (local.get $end) (i32.mul (memory.size) (i32.const 65536)))
                (i32.const 16))))
              (i32.const -1))
          (then unreachable))))
    (if (i32.gt_u (local.get $old_size) (i32.const 0))
      (then (memory.copy (local.get $at) (local.get $old) (local.get $old_size))))
    (global.set $heap (local.get $end))
    (local.get $at))
  (func $answer (param $tag i32) (param $ptr i32) (param $len i32) (result i32)
    (local $at i32)
    (local.set $at (call $realloc (i32.const 0) (i32.const 0) (i32.const 4) (i32.const 12)))
    (i32.store8 (local.get $at) (local.get $tag))
    (i32.store offset=4 (local.get $at) (local.get $ptr))
    (i32.store offset=8 (local.get $at) (local.get $len))
    (local.get $at))
  (func $ok (param $ptr i32) (param $len i32) (result i32)
    (call $answer (i32.const 0) (local.get $ptr) (local.get $len)))
  (func $err (param $ptr i32) (param $len i32) (result i32)
    (call $answer (i32.const 1) (local.get $ptr) (local.get $len)))
  (func (export "describe") (result i32)
    (i32.store (i32.const {ret}) (i32.const {describe_at}))
    (i32.store (i32.const {ret4}) (i32.const {describe_len}))
    (i32.const {ret}))
  (func (export "cabi_post_describe") (param i32))
  (func (export "handle") (param $ptr i32) (param $len i32) (result i32)
    {body})
  (func (export "cabi_post_handle") (param i32)
    (global.set $heap (i32.const {HEAP})))
  {funcs}
)"#,
            funcs_imports = imports(&self.funcs),
            funcs = without_imports(&self.funcs),
            body = self.body,
            ret = HEAP - 64,
            ret4 = HEAP - 60,
            describe_len = self.describe.len(),
        )
    }

    /// The component.
    pub(crate) fn build(&self) -> Vec<u8> {
        component(&self.wat(), &self.wit)
    }
}

/// The import lines of `funcs` (WAT wants imports before the rest).
fn imports(funcs: &str) -> String {
    funcs
        .lines()
        .filter(|l| l.trim_start().starts_with("(import"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn without_imports(funcs: &str) -> String {
    funcs
        .lines()
        .filter(|l| !l.trim_start().starts_with("(import"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A data segment of `bytes` at `offset`, every byte escaped.
fn segment(offset: usize, bytes: &[u8]) -> String {
    let escaped: String = bytes.iter().map(|b| format!("\\{b:02x}")).collect();
    format!("(data (i32.const {offset}) \"{escaped}\")\n")
}

/// The component of the core module `wat`, of the world `hook` of `wit`.
pub(crate) fn component(wat: &str, wit: &str) -> Vec<u8> {
    let mut resolve = wit_parser::Resolve::default();
    resolve.push_str("hook.wit", wit).expect("the WIT parses");
    let (world, _) = resolve
        .worlds
        .iter()
        .find(|(_, w)| w.name == "hook")
        .expect("the world `hook`");
    let mut module = wat::parse_str(wat).expect("the guest's WAT parses");
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
        false,
    )
    .expect("the metadata embeds");
    wit_component::ComponentEncoder::default()
        .module(&module)
        .expect("the module is a component's")
        .validate(true)
        .encode()
        .expect("the component encodes")
}

/// A guest that answers `answer` (ok) to every event of `describe`.
pub(crate) fn answering(describe: &str, answer: &str) -> Vec<u8> {
    let mut g = Guest::new(describe);
    let (ptr, len) = g.string(answer);
    g.handle(&format!("(call $ok {ptr} {len})")).build()
}

/// A PreToolUse guard for `bash`: denies a command that contains `rm -rf` (searching the event's
/// JSON byte by byte), answers nothing otherwise. Stateless.
pub(crate) fn rm_rf_guard() -> Vec<u8> {
    let mut g = Guest::new(r#"{"events": ["PreToolUse"], "matcher": "bash", "stateless": true}"#);
    let (needle, needle_len) = g.string("rm -rf");
    let (deny, deny_len) = g.string(
        r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "rm -rf is not allowed (wasm guard)"}}"#,
    );
    let (empty, _) = g.string("");
    g.handle(&format!(
        "(if (result i32) (call $contains (local.get $ptr) (local.get $len) {needle} {needle_len})
           (then (call $ok {deny} {deny_len}))
           (else (call $ok {empty} (i32.const 0))))"
    ))
    .funcs(
        r#"(func $contains (param $h i32) (param $hl i32) (param $n i32) (param $nl i32) (result i32)
    (local $i i32) (local $j i32)
    (block $no
      (loop $outer
        (br_if $no (i32.gt_u (i32.add (local.get $i) (local.get $nl)) (local.get $hl)))
        (local.set $j (i32.const 0))
        (block $mismatch
          (loop $inner
            (if (i32.eq (local.get $j) (local.get $nl)) (then (return (i32.const 1))))
            (br_if $mismatch (i32.ne
              (i32.load8_u (i32.add (local.get $h) (i32.add (local.get $i) (local.get $j))))
              (i32.load8_u (i32.add (local.get $n) (local.get $j)))))
            (local.set $j (i32.add (local.get $j) (i32.const 1)))
            (br $inner)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $outer)))
    (i32.const 0))"#,
    )
    .build()
}

/// Command hooks holding `hook` alone (as `CommandHooksBuilder::wasm_hook` adds it), with
/// `project` as their project directory and no transcripts.
pub(crate) fn command_hooks(
    hook: tower_agent::wasm::WasmHook,
    project: &std::path::Path,
) -> tower_agent::command::CommandHooks {
    tower_agent::command::CommandHooks::builder()
        .wasm_hook(hook)
        .project_dir(project)
        .without_transcripts()
        .build()
        .expect("command hooks of one wasm hook")
}

/// The guest `name` written in `language` (`py`, `js`; `tests/wasm/guests_src/`), built (once)
/// by the project's `.ci/wasm-guests`.
pub(crate) fn built(name: &str, language: &str) -> std::path::PathBuf {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/wasm-guests");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .output()
        .expect("running .ci/wasm-guests");
    assert!(
        out.status.success(),
        ".ci/wasm-guests failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = String::from_utf8(out.stdout).expect("a directory");
    std::path::Path::new(dir.trim()).join(format!("{name}-{language}.wasm"))
}
