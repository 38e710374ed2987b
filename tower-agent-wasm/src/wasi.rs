//! What a hook may be granted, through WASI 0.2 (Wasmtime's `wasmtime-wasi`): directories
//! (read-only or read-write), named environment variables, clocks, randomness. Nothing by
//! default: an interface that is not granted is not linked, so a component that imports it
//! fails to load, naming the import. With a directory granted read-write, `wasmtime-wasi`'s
//! `symlink-at`, `rename-at` and `link-at` are shadowed by guarded ones (see
//! [the crate docs](crate#links-in-a-granted-directory)).

use std::{
    future::Future,
    path::{Component, Path, PathBuf},
};

use wasmtime::{
    StoreContextMut,
    component::{HasData, Linker, Resource, ResourceTable},
};
use wasmtime_wasi::{
    FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView,
    cli::{WasiCli, WasiCliView},
    clocks::{WasiClocks, WasiClocksView},
    filesystem::{Descriptor, WasiFilesystem, WasiFilesystemCtxView, WasiFilesystemView},
    p2::{
        FsResult,
        bindings::{
            cli, clocks,
            filesystem::{
                self,
                types::{self, ErrorCode, HostDescriptor},
            },
            io, random,
        },
    },
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
    /// Whether the hook may write in it (create, change, remove files; links and moves as
    /// [the module docs](crate#links-in-a-granted-directory) say); else read only.
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

    /// These grants and the directory `host`, read and write, as `guest` for the hook (no
    /// symbolic link it makes or moves may lead out: see
    /// [the module docs](crate#links-in-a-granted-directory)).
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
        if grants.dirs.iter().any(|d| d.write) {
            guard_links(l)?;
        }
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

/// The name of `wasi:filesystem/types` in the WASI that `wasmtime-wasi` links (a guest's
/// import of any 0.2 version resolves to it).
const FILESYSTEM_TYPES: &str = "wasi:filesystem/types@0.2.12";
const SYMLINK_AT: &str = "[method]descriptor.symlink-at";
const LINK_AT: &str = "[method]descriptor.link-at";
const RENAME_AT: &str = "[method]descriptor.rename-at";

/// Replaces `wasmtime-wasi`'s `symlink-at`, `link-at` and `rename-at` with
/// [`symlink_at`], [`link_at`] and [`rename_at`], which refuse a link whose target climbs.
/// Fails (the hook does not load) when one of them is not there to replace under
/// [`FILESYSTEM_TYPES`]: a `wasmtime-wasi` that names its interface otherwise would leave
/// the guest the unguarded ones.
fn guard_links<T: WasiView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    let define = |linker: &mut Linker<T>| -> wasmtime::Result<()> {
        let mut types = linker.instance(FILESYSTEM_TYPES)?;
        types.func_wrap_async(SYMLINK_AT, symlink_at::<T>)?;
        types.func_wrap_async(LINK_AT, link_at::<T>)?;
        types.func_wrap_async(RENAME_AT, rename_at::<T>)
    };
    // Without shadowing, each definition fails only because the name is taken.
    for name in [SYMLINK_AT, LINK_AT, RENAME_AT] {
        let mut types = linker.instance(FILESYSTEM_TYPES)?;
        if types.func_wrap_async(name, symlink_at::<T>).is_ok() {
            wasmtime::bail!("no `{name}` in `{FILESYSTEM_TYPES}` to guard");
        }
    }
    linker.allow_shadowing(true);
    let guarded = define(linker);
    linker.allow_shadowing(false);
    guarded
}

/// What a guarded method returns (theirs: `result<_, error-code>`).
type Done<'a> = Box<dyn Future<Output = wasmtime::Result<(Result<(), ErrorCode>,)>> + Send + 'a>;

/// `descriptor.symlink-at(old-path, new-path)`: `not-permitted` when the target `old-path`
/// does not descend (see [`descends`]), else `wasmtime-wasi`'s own.
fn symlink_at<T: WasiView + 'static>(
    mut store: StoreContextMut<'_, T>,
    (dir, target, link): (Resource<Descriptor>, String, String),
) -> Done<'_> {
    Box::new(async move {
        if !descends(&target) {
            return Ok((Err(ErrorCode::NotPermitted),));
        }
        let mut fs = store.data_mut().filesystem();
        let done = HostDescriptor::symlink_at(&mut fs, dir, target, link).await;
        answer(&mut fs, done)
    })
}

/// `descriptor.link-at(old-path-flags, old-path, new-descriptor, new-path)`: a hard link of
/// a symbolic link is a copy of it; `not-permitted` when it climbs (see [`may_move`]).
fn link_at<T: WasiView + 'static>(
    mut store: StoreContextMut<'_, T>,
    (dir, flags, old, new_dir, new): (
        Resource<Descriptor>,
        types::PathFlags,
        String,
        Resource<Descriptor>,
        String,
    ),
) -> Done<'_> {
    Box::new(async move {
        let mut fs = store.data_mut().filesystem();
        // A directory has no hard link: whether it may move is left to the method.
        if !may_move(&mut fs, &dir, &old, true).await? {
            return Ok((Err(ErrorCode::NotPermitted),));
        }
        let done = HostDescriptor::link_at(&mut fs, dir, flags, old, new_dir, new).await;
        answer(&mut fs, done)
    })
}

/// `descriptor.rename-at(old-path, new-descriptor, new-path)`: `not-permitted` for a
/// symbolic link that climbs, or a directory moved out of its parent (see [`may_move`]).
fn rename_at<T: WasiView + 'static>(
    mut store: StoreContextMut<'_, T>,
    (dir, old, new_dir, new): (Resource<Descriptor>, String, Resource<Descriptor>, String),
) -> Done<'_> {
    Box::new(async move {
        let same_parent =
            dir.rep() == new_dir.rep() && Path::new(&old).parent() == Path::new(&new).parent();
        let mut fs = store.data_mut().filesystem();
        if !may_move(&mut fs, &dir, &old, same_parent).await? {
            return Ok((Err(ErrorCode::NotPermitted),));
        }
        let done = HostDescriptor::rename_at(&mut fs, dir, old, new_dir, new).await;
        answer(&mut fs, done)
    })
}

/// `done` as the guest gets it: the error code of a failure (or the trap it is).
fn answer(
    fs: &mut WasiFilesystemCtxView<'_>,
    done: FsResult<()>,
) -> wasmtime::Result<(Result<(), ErrorCode>,)> {
    match done {
        Ok(()) => Ok((Ok(()),)),
        Err(e) => Ok((Err(types::Host::convert_error_code(fs, e)?),)),
    }
}

/// Whether what is at `path` in `dir` may move (be renamed, or hard-linked) elsewhere in the
/// granted directories: not a symbolic link whose target climbs (moved nearer the top it
/// could lead out) or is not UTF-8 (it cannot be checked), nor a directory unless
/// `dir_moves` (it moves within its parent: every link in it still leads where it did; moved
/// nearer the top, one that climbs could lead out). Anything else, or nothing there, is left
/// to the method itself.
async fn may_move(
    fs: &mut WasiFilesystemCtxView<'_>,
    dir: &Resource<Descriptor>,
    path: &str,
    dir_moves: bool,
) -> wasmtime::Result<bool> {
    let borrow = || Resource::<Descriptor>::new_borrow(dir.rep());
    let here = path.to_owned();
    let stat = match HostDescriptor::stat_at(fs, borrow(), types::PathFlags::empty(), here).await {
        Ok(stat) => stat,
        Err(e) => return types::Host::convert_error_code(fs, e).map(|_| true),
    };
    Ok(match stat.type_ {
        types::DescriptorType::SymbolicLink => {
            let target = HostDescriptor::readlink_at(fs, borrow(), path.to_owned()).await;
            target.is_ok_and(|t| descends(&t))
        }
        types::DescriptorType::Directory => dir_moves,
        _ => true,
    })
}

/// Whether a link's `target` descends from the directory that holds the link: names (and
/// `.`) only — no root, no drive, no `..`. Such a link leads inside the granted directory
/// wherever in it the link is or is later moved, and so does a chain of them; one with `..`
/// could be moved to where it leads out, so it is refused even when it lands inside from
/// where it is made.
fn descends(target: &str) -> bool {
    let mut names = 0;
    for part in Path::new(target).components() {
        match part {
            Component::Normal(_) => names += 1,
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    names > 0
}
