//! What a hook may be granted, through WASI 0.2 (Wasmtime's `wasmtime-wasi`): directories
//! (read-only or read-write), named environment variables, clocks, randomness. Nothing by
//! default: an interface that is not granted is not linked, so a component that imports it
//! fails to load, naming the import.

use std::path::PathBuf;

use wasmtime::component::{HasData, Linker, ResourceTable};
use wasmtime_wasi::{
    FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView,
    cli::{WasiCli, WasiCliView},
    clocks::{WasiClocks, WasiClocksView},
    filesystem::{WasiFilesystem, WasiFilesystemView},
    p2::bindings::{cli, clocks, filesystem, io, random},
    random::{WasiRandom, WasiRandomView},
};

use super::WasmError;

/// What a hook may reach. Empty by default: no file, variable, clock or random number.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct WasmGrants {
    /// Directories the hook sees (WASI preopens).
    pub dirs: Vec<GrantedDir>,
    /// Names of environment variables the hook sees, with the values they have in this
    /// process when the hook is built (an unset one is left out).
    pub env: Vec<String>,
    /// The wall and monotonic clocks (`wasi:clocks`).
    pub clocks: bool,
    /// Random numbers (`wasi:random`).
    pub random: bool,
}

/// A directory granted to a hook.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct GrantedDir {
    /// The directory on this machine.
    pub host: PathBuf,
    /// The path the hook opens it by.
    pub guest: String,
    /// Whether the hook may write in it (create, change, remove files); else read only.
    pub write: bool,
}

impl WasmGrants {
    /// These grants and the directory `host`, read only, as `guest` for the hook.
    #[must_use]
    pub fn read_dir(mut self, host: impl Into<PathBuf>, guest: impl Into<String>) -> Self {
        self.dirs.push(GrantedDir {
            host: host.into(),
            guest: guest.into(),
            write: false,
        });
        self
    }

    /// These grants and the directory `host`, read and write, as `guest` for the hook.
    #[must_use]
    pub fn write_dir(mut self, host: impl Into<PathBuf>, guest: impl Into<String>) -> Self {
        self.dirs.push(GrantedDir {
            host: host.into(),
            guest: guest.into(),
            write: true,
        });
        self
    }

    /// These grants and the environment variable `name`.
    #[must_use]
    pub fn env(mut self, name: impl Into<String>) -> Self {
        self.env.push(name.into());
        self
    }

    /// These grants and the clocks.
    #[must_use]
    pub fn clocks(mut self) -> Self {
        self.clocks = true;
        self
    }

    /// These grants and random numbers.
    #[must_use]
    pub fn random(mut self) -> Self {
        self.random = true;
        self
    }

    /// Whether nothing is granted.
    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty() && self.env.is_empty() && !self.clocks && !self.random
    }
}

/// An instance's WASI state: its context (what it was granted) and its resources.
pub(crate) struct Wasi {
    ctx: WasiCtx,
    table: ResourceTable,
}

impl Wasi {
    /// The state of an instance under `grants`; `env` holds the granted variables' values.
    pub(crate) fn new(grants: &WasmGrants, env: &[(String, String)]) -> Result<Wasi, WasmError> {
        let mut builder = WasiCtxBuilder::new();
        for (name, value) in env {
            builder.env(name, value);
        }
        for dir in &grants.dirs {
            let perms = if dir.write {
                FsPerms::ReadWrite
            } else {
                FsPerms::ReadOnly
            };
            builder
                .preopened_dir(&dir.host, &dir.guest, perms)
                .map_err(|e| {
                    WasmError::new(format!(
                        "the granted directory {} cannot be opened: {e}",
                        dir.host.display()
                    ))
                })?;
        }
        Ok(Wasi {
            ctx: builder.build(),
            table: ResourceTable::new(),
        })
    }

    /// The state of an instance granted nothing (its linker has no WASI interface either).
    pub(crate) fn empty() -> Wasi {
        Wasi {
            ctx: WasiCtxBuilder::new().build(),
            table: ResourceTable::new(),
        }
    }

    pub(crate) fn view(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.ctx,
            table: &mut self.table,
        }
    }
}

/// The values of the granted variables set in this process.
pub(crate) fn env_values(grants: &WasmGrants) -> Vec<(String, String)> {
    grants
        .env
        .iter()
        .filter_map(|name| std::env::var(name).ok().map(|v| (name.clone(), v)))
        .collect()
}

/// The resource table, for `wasi:io`.
struct Io;

impl HasData for Io {
    type Data<'a> = &'a mut ResourceTable;
}

/// Links the WASI interfaces `grants` open: none when nothing is granted; else `wasi:io` and
/// `wasi:cli` (the granted variables; no arguments; stdin empty; stdout and stderr
/// discarded), plus `wasi:filesystem` with directories, `wasi:clocks` and `wasi:random` when
/// granted. Never `wasi:sockets` or `wasi:http`.
pub(crate) fn link<T: WasiView + 'static>(
    linker: &mut Linker<T>,
    grants: &WasmGrants,
) -> wasmtime::Result<()> {
    if grants.is_empty() {
        return Ok(());
    }
    let l = linker;
    io::error::add_to_linker::<T, Io>(l, |t| t.ctx().table)?;
    io::poll::add_to_linker::<T, Io>(l, |t| t.ctx().table)?;
    io::streams::add_to_linker::<T, Io>(l, |t| t.ctx().table)?;
    cli::exit::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::environment::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stdin::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stdout::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stderr::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_input::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_output::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stdin::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stdout::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stderr::add_to_linker::<T, WasiCli>(l, T::cli)?;
    if !grants.dirs.is_empty() {
        filesystem::types::add_to_linker::<T, WasiFilesystem>(l, T::filesystem)?;
        filesystem::preopens::add_to_linker::<T, WasiFilesystem>(l, T::filesystem)?;
    }
    if grants.clocks {
        clocks::wall_clock::add_to_linker::<T, WasiClocks>(l, T::clocks)?;
        clocks::monotonic_clock::add_to_linker::<T, WasiClocks>(l, T::clocks)?;
    }
    if grants.random {
        random::random::add_to_linker::<T, WasiRandom>(l, T::random)?;
        random::insecure::add_to_linker::<T, WasiRandom>(l, T::random)?;
        random::insecure_seed::add_to_linker::<T, WasiRandom>(l, T::random)?;
    }
    Ok(())
}
