//! Allocations per model call on the bare agent step (issue 16, target 4), counted by a
//! counting global allocator: at most 12, so that it cannot silently regress. Figures:
//! `cargo bench --bench allocations`.
//!
//! A test binary of its own (`cargo test --all-features --test allocations`), not a module of
//! a group: the allocator counts every allocation of the process, and must not count other
//! tests' work.

#[path = "support/alloc_steps.rs"]
mod alloc_steps;

use std::alloc::System;

use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The bound of issue 16, target 4.
const MAX_PER_MODEL_CALL: f64 = 12.0;

#[test]
fn bare_step_allocates_at_most_twelve_times_per_model_call() {
    let m = alloc_steps::measure(GLOBAL, 5);
    eprintln!(
        "allocator calls per step {}, per tool call {}, per model call {} (store {})",
        m.step.calls(),
        m.tool_call.calls(),
        m.model_call.calls(),
        m.model_call.store
    );
    // The counting is real: a run and a tool call do allocate (a tool call copies its call
    // into its request, and its output into the history).
    assert!(
        m.run.calls() > 0.0 && m.tool_call.loop_calls() >= 1.0,
        "{m:#?}"
    );
    // The whole path: the loop, the model and the (in-memory) store's saves.
    let per_call = m.model_call.calls();
    assert!(
        per_call <= MAX_PER_MODEL_CALL,
        "{per_call} allocations per model call, the store's included (bound \
         {MAX_PER_MODEL_CALL}): {m:#?}"
    );
}
