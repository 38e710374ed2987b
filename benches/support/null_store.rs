//! A store that keeps nothing, for the benches that measure runs without persistence.

use futures_util::future::BoxFuture;
use tower_agent::{
    BoxError,
    store::{Thread, ThreadStore},
};

/// A store that keeps nothing: what runs cost without persistence.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NullStore;

impl ThreadStore for NullStore {
    fn load<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Option<Thread>, BoxError>> {
        Box::pin(async { Ok(None) })
    }

    fn save<'a>(&'a self, _: &'a Thread) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async { Ok(()) })
    }

    fn delete<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async { Ok(()) })
    }
}
