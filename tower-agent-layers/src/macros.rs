//! Macros of this crate, not exported.

/// `get_ref`, `get_mut` and `into_inner` for a middleware service whose inner service is the
/// field `inner: S` (as tower-http's `define_inner_service_accessors!`). Use inside
/// `impl<S> Foo<S> { … }`.
macro_rules! inner_service_accessors {
    () => {
        /// The inner service.
        pub fn get_ref(&self) -> &S {
            &self.inner
        }

        /// The inner service, mutably.
        pub fn get_mut(&mut self) -> &mut S {
            &mut self.inner
        }

        /// The inner service, consuming this one.
        pub fn into_inner(self) -> S {
            self.inner
        }
    };
}
