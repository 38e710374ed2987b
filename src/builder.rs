//! [`ServiceBuilderExt`]: the hook layers as [`ServiceBuilder`](tower::ServiceBuilder)
//! methods (the crate [`tower_agent_layers`], re-exported here).

#[doc(inline)]
pub use tower_agent_layers::builder::ServiceBuilderExt;
