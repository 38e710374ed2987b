//! The process's WebAssembly engine: one [`Engine`] for every hook (compiled code is shared
//! per engine), its pooling allocator, and the epoch ticker that meters running guests.

use std::{
    path::PathBuf,
    sync::{
        Arc, OnceLock,
        atomic::{AtomicUsize, Ordering},
    },
    thread::{self, Thread},
    time::Duration,
};

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::WasmError;

/// How often the epoch advances while a guest runs: the unit of a hook's CPU limit.
pub(crate) const TICK: Duration = Duration::from_millis(1);

/// Instances that can be live at once, across every hook of the process (the pooling
/// allocator's slots). A call that finds every slot taken waits for one.
pub const MAX_INSTANCES: u32 = 1_000;

/// The largest linear memory any hook may ask for (its own limit is at most this).
pub const MAX_MEMORY_LIMIT: usize = 1 << 30;

/// The deepest a guest's stack may grow before it traps (deep recursion is a hook failure,
/// never a crash of the process).
pub const MAX_WASM_STACK: usize = 512 << 10;

/// The engine and what goes with it.
pub(crate) struct Runtime {
    pub(crate) engine: Engine,
    ticker: Ticker,
    /// The pooling allocator's slots, as permits: taken by an instance for its life.
    pub(crate) slots: Arc<tokio::sync::Semaphore>,
}

static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();

/// The process's runtime, made on first use.
pub(crate) fn runtime() -> Result<&'static Runtime, WasmError> {
    RUNTIME
        .get_or_init(|| Runtime::new().map_err(|e| format!("{e:?}")))
        .as_ref()
        .map_err(|e| WasmError::new(format!("the WebAssembly engine cannot start: {e}")))
}

impl Runtime {
    fn new() -> wasmtime::Result<Runtime> {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(MAX_INSTANCES)
            // A component made from one module has a few core instances (the module and
            // its adapters' shims).
            .total_core_instances(MAX_INSTANCES * 4)
            .total_memories(MAX_INSTANCES)
            .total_tables(MAX_INSTANCES * 2)
            .total_stacks(MAX_INSTANCES)
            .max_memory_size(MAX_MEMORY_LIMIT)
            .max_memories_per_component(4)
            .max_tables_per_component(8);
        let mut config = Config::new();
        config
            .wasm_component_model(true)
            .epoch_interruption(true)
            .max_wasm_stack(MAX_WASM_STACK)
            .async_stack_size(MAX_WASM_STACK + (256 << 10))
            // Virtual address space per memory slot: a hook's memory is bounds-checked
            // within it (1 GiB each, not the default 4 GiB, for 1,000 slots).
            .memory_reservation(MAX_MEMORY_LIMIT as u64)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        if let Some(dir) = default_cache_dir() {
            let mut cache = wasmtime::CacheConfig::new();
            cache.with_directory(dir);
            config.cache(Some(wasmtime::Cache::new(cache)?));
        }
        let engine = Engine::new(&config)?;
        let ticker = Ticker::start(engine.clone())
            .map_err(|e| wasmtime::format_err!("cannot start the epoch thread: {e}"))?;
        Ok(Runtime {
            ticker,
            engine,
            slots: Arc::new(tokio::sync::Semaphore::new(MAX_INSTANCES as usize)),
        })
    }

    /// Keeps the epoch advancing while the guard lives (a guest is running).
    pub(crate) fn running(&self) -> Running<'_> {
        self.ticker.start_one()
    }
}

/// The cache directory [`set_cache_dir`] chose, if it was called.
static CACHE_DIR: OnceLock<Option<PathBuf>> = OnceLock::new();

/// Chooses where the process's compiled hooks are cached (`None`: nowhere), instead of the
/// default (see [the crate docs](crate#the-compiled-code-cache)). It must come before the
/// first hook is loaded: the engine reads it once, when it starts; later, or a second time,
/// it is an error.
pub fn set_cache_dir(dir: Option<PathBuf>) -> Result<(), WasmError> {
    if RUNTIME.get().is_some() {
        return Err(WasmError::new(
            "the WebAssembly engine has started: its cache directory is set",
        ));
    }
    CACHE_DIR
        .set(dir)
        .map_err(|_| WasmError::new("the cache directory was already chosen"))
}

/// Where the process's compiled hooks are cached (see [`set_cache_dir`]); `None`: nowhere.
pub fn cache_dir() -> Option<PathBuf> {
    default_cache_dir()
}

/// Where compiled hooks are cached: the directory [`set_cache_dir`] chose, else
/// `$TOWER_AGENT_WASM_CACHE`, else
/// `$XDG_CACHE_HOME/tower-agent/wasm`, else `$HOME/.cache/tower-agent/wasm`; none when it is
/// set to the empty string or no home is known.
fn default_cache_dir() -> Option<PathBuf> {
    if let Some(chosen) = CACHE_DIR.get() {
        return chosen.clone();
    }
    if let Some(dir) = std::env::var_os("TOWER_AGENT_WASM_CACHE") {
        return (!dir.is_empty()).then(|| PathBuf::from(dir));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("tower-agent").join("wasm"))
}

/// A thread that advances the engine's epoch every [`TICK`] while any guest runs, and sleeps
/// (parked) while none does.
struct Ticker {
    active: Arc<AtomicUsize>,
    thread: Thread,
}

impl Ticker {
    fn start(engine: Engine) -> std::io::Result<Ticker> {
        let active = Arc::new(AtomicUsize::new(0));
        let running = Arc::clone(&active);
        let thread = thread::Builder::new()
            .name("tower-agent-wasm-epoch".into())
            .spawn(move || {
                loop {
                    if running.load(Ordering::Acquire) == 0 {
                        thread::park();
                        continue;
                    }
                    thread::sleep(TICK);
                    engine.increment_epoch();
                }
            })?
            .thread()
            .clone();
        Ok(Ticker { active, thread })
    }

    fn start_one(&self) -> Running<'_> {
        if self.active.fetch_add(1, Ordering::AcqRel) == 0 {
            self.thread.unpark();
        }
        Running(self)
    }
}

/// See [`Runtime::running`].
pub(crate) struct Running<'a>(&'a Ticker);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::AcqRel);
    }
}
