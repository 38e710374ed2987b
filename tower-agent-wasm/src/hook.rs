//! [`WasmHook`]: a component compiled once, its instances made from a pre-instantiated
//! template, called with an event's JSON under its limits.

use std::{
    fmt,
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use serde_json::{Map, Value};
use tokio::sync::OwnedSemaphorePermit;
use wasmtime::{
    ResourceLimiter, Store, UpdateDeadline,
    component::{Component, ComponentExportIndex, Func, Instance, InstancePre, Linker},
};
use wasmtime_wasi::{WasiCtxView, WasiView};

use super::{
    WasmError,
    engine::{Runtime, TICK, runtime},
    wasi::{Wasi, WasmGrants},
};

/// The limits of a hook's instance. The defaults are the constants of this module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct WasmLimits {
    /// The most linear memory an instance may have, in bytes (at most
    /// [`MAX_MEMORY_LIMIT`](super::MAX_MEMORY_LIMIT)). Default
    /// [`DEFAULT_MEMORY`]: 64 MiB.
    pub memory: usize,
    /// The longest a call may run, counted in milliseconds of running (a guest that waits does
    /// not spend it). Default [`DEFAULT_CPU`]: 100 ms. The handler's `timeout` (wall clock)
    /// applies besides.
    pub cpu: Duration,
    /// The longest answer, in bytes. Default [`DEFAULT_ANSWER`]: 1 MiB (a command hook's
    /// stdout cap).
    pub answer: usize,
}

/// The default memory limit: 64 MiB.
pub const DEFAULT_MEMORY: usize = 64 << 20;
/// The default CPU limit: 100 ms of running per call.
pub const DEFAULT_CPU: Duration = Duration::from_millis(100);
/// The default answer cap: 1 MiB.
pub const DEFAULT_ANSWER: usize = 1 << 20;
/// How long `describe` may run when a hook is loaded.
const DESCRIBE_CPU: Duration = Duration::from_secs(1);
/// Idle instances kept per stateless hook, for the next calls.
const MAX_IDLE: usize = 16;
/// The most table elements an instance may have.
const MAX_TABLE_ELEMENTS: usize = 100_000;

impl Default for WasmLimits {
    fn default() -> Self {
        WasmLimits {
            memory: DEFAULT_MEMORY,
            cpu: DEFAULT_CPU,
            answer: DEFAULT_ANSWER,
        }
    }
}

impl WasmLimits {
    /// These limits with `bytes` of memory at most.
    #[must_use]
    pub fn memory(mut self, bytes: usize) -> Self {
        self.memory = bytes;
        self
    }

    /// These limits with `cpu` of running per call at most.
    #[must_use]
    pub fn cpu(mut self, cpu: Duration) -> Self {
        self.cpu = cpu;
        self
    }

    /// These limits with answers of `bytes` at most.
    #[must_use]
    pub fn answer(mut self, bytes: usize) -> Self {
        self.answer = bytes;
        self
    }
}

/// What a hook answered to one event.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum WasmAnswer {
    /// `ok("")`: nothing to say (a command hook that exits 0 and prints nothing).
    Nothing,
    /// `ok(json)`: its decision, as a command hook prints it on stdout.
    Json(Map<String, Value>),
    /// `err(reason)`: a blocking error (a command hook's exit 2, the reason its stderr).
    Block(String),
}

/// A hook compiled from a WebAssembly component that implements the `hook` world of
/// [`WIT`](super::WIT). Cheap to clone: clones share the compiled code and the idle
/// instances.
#[derive(Clone)]
pub struct WasmHook {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    /// The file it was loaded from, if any.
    path: Option<PathBuf>,
    /// The component's SHA-256: hooks of the same component, limits and grants are the same
    /// hook (settings that name it twice run it once).
    digest: [u8; 32],
    pre: InstancePre<Host>,
    describe: ComponentExportIndex,
    handle: ComponentExportIndex,
    grants: WasmGrants,
    /// The granted variables' values, read when the hook was built.
    env: Vec<(String, String)>,
    limits: WasmLimits,
    stateless: bool,
    description: Map<String, Value>,
    idle: Mutex<Vec<Live>>,
    /// Instances alive: idle, or in a call.
    live: Arc<AtomicUsize>,
}

impl PartialEq for WasmHook {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (&self.inner, &other.inner);
        Arc::ptr_eq(a, b)
            || (a.digest == b.digest
                && a.limits == b.limits
                && a.stateless == b.stateless
                && a.grants == b.grants)
    }
}

impl Eq for WasmHook {}

impl std::hash::Hash for WasmHook {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.inner.digest.hash(state);
    }
}

impl fmt::Debug for WasmHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WasmHook")
            .field("name", &self.inner.name)
            .field("limits", &self.inner.limits)
            .field("stateless", &self.inner.stateless)
            .finish_non_exhaustive()
    }
}

/// Builds a [`WasmHook`]: where its component comes from, its limits.
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct WasmHookBuilder {
    path: Option<PathBuf>,
    bytes: Option<(String, Vec<u8>)>,
    limits: WasmLimits,
    grants: WasmGrants,
    stateless: Option<bool>,
}

impl WasmHookBuilder {
    /// What the hook may reach (default: nothing).
    pub fn grants(mut self, grants: WasmGrants) -> Self {
        self.grants = grants;
        self
    }

    /// The component in the file at `path` (binary).
    pub fn path(mut self, path: impl Into<PathBuf>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// The component in `bytes`, named `name` in errors and logs.
    pub fn bytes(mut self, name: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Self {
        self.bytes = Some((name.into(), bytes.into()));
        self
    }

    /// The instance's limits (default [`WasmLimits::default`]).
    pub fn limits(mut self, limits: WasmLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Whether one instance may serve call after call, whatever the component's `describe`
    /// says (its `"stateless"`; by default each call gets a fresh instance).
    pub fn stateless(mut self, stateless: bool) -> Self {
        self.stateless = Some(stateless);
        self
    }

    /// Compiles the component (or takes it from the cache), checks its imports and asks it
    /// what it handles.
    pub fn build(self) -> Result<WasmHook, WasmError> {
        let from_file = self.bytes.is_none();
        let (name, bytes) = match (self.bytes, &self.path) {
            (Some(named), _) => named,
            (None, Some(path)) => (path.display().to_string(), read(path)?),
            (None, None) => return Err(WasmError::new("a WasmHook needs a path or bytes")),
        };
        if self.limits.memory > super::MAX_MEMORY_LIMIT {
            return Err(WasmError::new(format!(
                "hook {name}: a memory limit of {} bytes is over the most any hook may have ({} bytes)",
                self.limits.memory,
                super::MAX_MEMORY_LIMIT
            )));
        }
        let digest: [u8; 32] = <sha2::Sha256 as sha2::Digest>::digest(&bytes).into();
        let rt = runtime()?;
        let fail = |what: &str, e: wasmtime::Error| {
            WasmError::new(format!("hook {name}: {what}: {}", chain(&e)))
        };
        let component =
            Component::new(&rt.engine, &bytes).map_err(|e| fail("not a valid component", e))?;
        let mut linker = Linker::<Host>::new(&rt.engine);
        super::wasi::link(&mut linker, &self.grants)
            .map_err(|e| fail("its grants cannot be linked", e))?;
        let pre = linker
            .instantiate_pre(&component)
            .map_err(|e| fail("it imports what the host does not grant", e))?;
        let export = |func: &str| {
            component.get_export_index(None, func).ok_or_else(|| {
                WasmError::new(format!(
                    "hook {name}: exports no `{func}` function (see the `hook` world of the crate's WIT)"
                ))
            })
        };
        let env = super::wasi::env_values(&self.grants);
        let (describe, handle) = (export("describe")?, export("handle")?);
        let mut inner = Inner {
            name,
            path: self.path.clone().filter(|_| from_file),
            digest,
            pre,
            describe,
            handle,
            grants: self.grants,
            env,
            limits: self.limits,
            stateless: false,
            description: Map::new(),
            idle: Mutex::new(Vec::new()),
            live: Arc::new(AtomicUsize::new(0)),
        };
        let description = describe_now(inner)?;
        inner = description.0;
        inner.stateless = self
            .stateless
            .unwrap_or_else(|| description.1.get("stateless") == Some(&Value::Bool(true)));
        inner.description = description.1;
        Ok(WasmHook {
            inner: Arc::new(inner),
        })
    }
}

/// Asks the hook of `inner` what it handles, on a thread of its own with a runtime of its own
/// (a build may happen anywhere: in an async task or not): `inner` back, and the answer.
fn describe_now(inner: Inner) -> Result<(Inner, Map<String, Value>), WasmError> {
    std::thread::scope(|scope| {
        scope
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| WasmError::new(format!("no runtime to describe the hook: {e}")))?;
                let hook = WasmHook {
                    inner: Arc::new(inner),
                };
                let description = rt.block_on(hook.describe())?;
                let inner = Arc::try_unwrap(hook.inner)
                    .map_err(|_| WasmError::new("the hook is still in use"))?;
                Ok((inner, description))
            })
            .join()
            .unwrap_or_else(|_| Err(WasmError::new("describing the hook panicked")))
    })
}

fn read(path: &Path) -> Result<Vec<u8>, WasmError> {
    std::fs::read(path)
        .map_err(|e| WasmError::new(format!("hook {}: cannot be read: {e}", path.display())))
}

/// An error and its causes, on one line.
fn chain(e: &wasmtime::Error) -> String {
    format!("{e:#}")
}

impl WasmHook {
    /// The hook in the component file at `path`, with the default limits.
    pub fn load(path: impl Into<PathBuf>) -> Result<WasmHook, WasmError> {
        WasmHook::builder().path(path).build()
    }

    /// A builder.
    pub fn builder() -> WasmHookBuilder {
        WasmHookBuilder::default()
    }

    /// The hook's name: its file, or the name it was given with its bytes.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The file it was loaded from (`None`: it was given as bytes).
    pub fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    /// The SHA-256 of its component, as lowercase hex: the value a trust pin of it takes
    /// (`tower_agent::command::CommandHooksBuilder::trust`, a handler's `sha256`).
    pub fn sha256(&self) -> String {
        self.inner
            .digest
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Its limits.
    pub fn limits(&self) -> WasmLimits {
        self.inner.limits
    }

    /// Whether one instance serves call after call.
    pub fn is_stateless(&self) -> bool {
        self.inner.stateless
    }

    /// The instances of this hook alive now: idle ones kept for the next calls (a stateless
    /// hook's, at most 16) and those in a call. An instance that failed is gone.
    pub fn instances(&self) -> usize {
        self.inner.live.load(Ordering::Acquire)
    }

    /// What its `describe` answered (`events`, `matcher`, `stateless`, …).
    pub fn description(&self) -> &Map<String, Value> {
        &self.inner.description
    }

    /// Calls the hook's `handle` with an event's JSON. A stateless hook's instance is kept for
    /// the next call when this one succeeds; any failure discards the instance, and so does
    /// dropping the future (a timeout): the next call gets a fresh one.
    pub async fn call(&self, input: &str) -> Result<WasmAnswer, WasmError> {
        let rt = runtime()?;
        let idle = self.inner.stateless.then(|| self.take_idle()).flatten();
        let mut live = match idle {
            Some(live) => live,
            None => self.instantiate(rt).await?,
        };
        let answer = {
            let _running = rt.running();
            self.handle(&mut live, input).await?
        };
        if self.inner.stateless {
            self.put_idle(live);
        }
        Ok(answer)
    }

    /// Calls `describe` on a fresh instance: its JSON object.
    async fn describe(&self) -> Result<Map<String, Value>, WasmError> {
        let rt = runtime()?;
        let mut live = self.instantiate(rt).await?;
        let store = &mut live.store;
        store.data_mut().cpu_ticks = ticks(DESCRIBE_CPU);
        let func = live
            .instance
            .get_typed_func::<(), (String,)>(&mut *store, &self.inner.describe)
            .map_err(|e| {
                self.failure(store, "its `describe` has another type than the WIT's", &e)
            })?;
        let (text,) = {
            let _running = rt.running();
            func.call_async(&mut *store, ())
                .await
                .map_err(|e| self.failure(store, "`describe` failed", &e))?
        };
        if text.len() > self.inner.limits.answer {
            return Err(self.error("`describe` answered more than its answer limit"));
        }
        match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(map)) => Ok(map),
            _ => Err(self.error(
                "`describe` must answer a JSON object (`{\"events\": [...], \"matcher\": \"...\"}`)",
            )),
        }
    }

    fn take_idle(&self) -> Option<Live> {
        self.inner
            .idle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
    }

    fn put_idle(&self, live: Live) {
        let mut idle = self.inner.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(live);
        }
    }

    async fn instantiate(&self, rt: &Runtime) -> Result<Live, WasmError> {
        let permit = Arc::clone(&rt.slots)
            .acquire_owned()
            .await
            .map_err(|_| WasmError::new("the WebAssembly engine is closed"))?;
        let inner = &self.inner;
        let wasi = if inner.grants.is_empty() {
            None
        } else {
            Some(Box::new(
                Wasi::new(&inner.grants, &inner.env).map_err(|e| self.error(&e.to_string()))?,
            ))
        };
        let mut store = new_store(rt, inner.limits, wasi);
        let _running = rt.running();
        let instance = self
            .inner
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| self.failure(&store, "cannot be instantiated", &e))?;
        let handle = instance
            .get_func(&mut store, self.inner.handle)
            .ok_or_else(|| self.error("its `handle` export is not a function"))?;
        Ok(Live {
            store,
            instance,
            handle,
            _slot: Slot::new(permit, &self.inner.live),
        })
    }

    /// One call of `handle` on `live`.
    async fn handle(&self, live: &mut Live, input: &str) -> Result<WasmAnswer, WasmError> {
        let store = &mut live.store;
        store.data_mut().ticks = 0;
        store.set_epoch_deadline(1);
        let func = live
            .handle
            .typed::<(&str,), (Result<String, String>,)>(&*store)
            .map_err(|e| self.failure(store, "its `handle` has another type than the WIT's", &e))?;
        // The answer is copied out of the guest as it returns (the guest's post-return may
        // reuse its memory): its size is bounded by the guest's memory limit, then capped.
        let (answer,) = func
            .call_async(&mut *store, (input,))
            .await
            .map_err(|e| self.failure(store, "failed", &e))?;
        let (text, blocks) = match answer {
            Ok(text) => (text, false),
            Err(text) => (text, true),
        };
        let cap = self.inner.limits.answer;
        if text.len() > cap {
            return Err(self.error(&format!(
                "answered {} bytes, over its limit of {cap} bytes",
                text.len()
            )));
        }
        if blocks {
            return Ok(WasmAnswer::Block(text));
        }
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Ok(WasmAnswer::Nothing);
        }
        match serde_json::from_str::<Value>(trimmed) {
            Ok(Value::Object(map)) => Ok(WasmAnswer::Json(map)),
            Ok(_) => Err(self.error("answered JSON that is not an object")),
            Err(e) => Err(self.error(&format!("answered something that is not JSON ({e})"))),
        }
    }

    fn error(&self, why: &str) -> WasmError {
        WasmError::new(format!("hook {}: {why}", self.inner.name))
    }

    /// The error of a failed instantiation or call, naming its cause: the CPU or memory limit
    /// when the guest reached one, else the trap.
    fn failure(&self, store: &Store<Host>, what: &str, e: &wasmtime::Error) -> WasmError {
        let host = store.data();
        let limits = self.inner.limits;
        if let Some(asked) = host.memory_refused {
            return self.error(&format!(
                "{what}: it asked for {asked} bytes of memory, over its limit of {} bytes",
                limits.memory
            ));
        }
        if let Some(e) = e.downcast_ref::<std::str::Utf8Error>() {
            return self.error(&format!("answered a string that is not UTF-8: {e}"));
        }
        if host.ticks > host.cpu_ticks {
            // The store's own limit: a call's, or `describe`'s.
            let ms = u128::from(host.cpu_ticks) * TICK.as_millis();
            return self.error(&format!("{what}: it ran past its CPU limit of {ms} ms"));
        }
        self.error(&format!("{what}: {}", chain(e)))
    }
}

/// An instance, ready for a call.
struct Live {
    store: Store<Host>,
    instance: Instance,
    handle: Func,
    _slot: Slot,
}

/// An instance's slot of the pooling allocator, and its place in its hook's count.
struct Slot {
    _permit: OwnedSemaphorePermit,
    live: Arc<AtomicUsize>,
}

impl Slot {
    fn new(permit: OwnedSemaphorePermit, live: &Arc<AtomicUsize>) -> Slot {
        live.fetch_add(1, Ordering::AcqRel);
        Slot {
            _permit: permit,
            live: Arc::clone(live),
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A store's data: the limits the host enforces, and the instance's WASI state when it was
/// granted anything.
struct Host {
    wasi: Option<Box<Wasi>>,
    memory_limit: usize,
    /// The memory a guest asked for and was refused.
    memory_refused: Option<usize>,
    /// Ticks of running in this call, and the most it may have.
    ticks: u64,
    cpu_ticks: u64,
}

impl WasiView for Host {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        self.wasi
            .get_or_insert_with(|| Box::new(Wasi::empty()))
            .view()
    }
}

impl ResourceLimiter for Host {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_limit {
            self.memory_refused = Some(desired);
            wasmtime::bail!("memory limit reached");
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

/// A store under `limits`: a call yields to the executor every tick and traps once it has
/// run for more ticks than its CPU limit.
fn new_store(rt: &Runtime, limits: WasmLimits, wasi: Option<Box<Wasi>>) -> Store<Host> {
    let cpu_ticks = ticks(limits.cpu);
    let mut store = Store::new(
        &rt.engine,
        Host {
            wasi,
            memory_limit: limits.memory,
            memory_refused: None,
            ticks: 0,
            cpu_ticks,
        },
    );
    store.limiter(|host| host as &mut dyn ResourceLimiter);
    store.epoch_deadline_callback(|mut cx| {
        let host = cx.data_mut();
        host.ticks += 1;
        if host.ticks > host.cpu_ticks {
            wasmtime::bail!("CPU limit reached");
        }
        Ok(UpdateDeadline::Yield(1))
    });
    store.set_epoch_deadline(1);
    store
}

/// `cpu` in ticks (at least one).
fn ticks(cpu: Duration) -> u64 {
    u64::try_from(cpu.as_nanos() / TICK.as_nanos())
        .unwrap_or(u64::MAX)
        .max(1)
}
