//! The run's data saved with its thread ([`ThreadData`], see [`context::data`](crate::context::data)):
//! the [`RunContext`] methods that read and write it.
//!
//! The run's thread data is an entry of its typed data
//! ([`RunContext::with_data`](super::RunContext::with_data)): the agent puts the thread's
//! there when a run starts and saves it with the thread after every step.

use super::RunContext;
use super::data::{Persisted, ThreadData};

/// The run's data saved with its thread ([`ThreadData`], see
/// [`context::data`](crate::context::data)): restored from the thread when the run starts, saved
/// with it after every step. A run without a thread id keeps it for the run only.
impl RunContext {
    /// The value of `T` in the run's thread data (see [`Persisted`]); `None` if there is none.
    ///
    /// # Errors
    ///
    /// The stored value is not a `T` (e.g. written by another version of your type).
    pub fn persisted<T: Persisted>(&self) -> Result<Option<T>, serde_json::Error> {
        // Decoded out of the run's lock.
        let value = self.with_data(|d| d.get::<ThreadData>()?.entries().get(T::KEY).cloned());
        value.map(|v| T::deserialize(&*v)).transpose()
    }

    /// Sets the value of `T` in the run's thread data: saved with the thread after the step.
    ///
    /// # Errors
    ///
    /// `value` cannot be represented in JSON; nothing is changed then.
    pub fn persist<T: Persisted>(&self, value: &T) -> Result<(), serde_json::Error> {
        let value = serde_json::to_value(value)?;
        self.with_thread_data(|d| d.set_value(T::KEY, value));
        Ok(())
    }

    /// Runs `f` on the run's thread data (untyped keys, several values at once), under the
    /// run's lock as [`with_data`](Self::with_data).
    pub fn with_thread_data<R>(&self, f: impl FnOnce(&mut ThreadData) -> R) -> R {
        self.with_data(|d| f(d.get_or_default::<ThreadData>()))
    }
}
