//! Allocations of the bare agent step (issue 16, target 4: at most 12 per model call), counted
//! by a counting global allocator ([`stats_alloc`], no unsafe code here).
//!
//! The step is the one of `agent_step/history/10` in `benches/overhead.rs`: a scripted model
//! (`per_run`) calling a `tool_fn` echo tool, no layers, a thread of 10 messages in the
//! in-memory store. Printed: allocator calls (allocations + reallocations) and bytes per step,
//! per tool call and per model call, and of a whole run; `store` is the part made inside the
//! store's own methods (its copies of the thread and of each call for its journal), included
//! in each figure. See `tests/support/alloc_steps.rs` for how each figure is derived;
//! `tests/allocations.rs` asserts the bound.
//!
//! Run with `cargo bench --bench allocations`.

#[path = "../tests/support/alloc_steps.rs"]
mod alloc_steps;

use std::alloc::System;

use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn main() {
    // `cargo bench` passes `--bench`; a filter that does not name this bench skips it.
    let filter = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_default();
    if !"allocations".contains(filter.as_str()) && !filter.contains("alloc") {
        return;
    }
    let m = alloc_steps::measure(GLOBAL, 5);
    println!("===== allocations of the bare agent step (fewest of 5 runs) =====");
    for (what, a) in [
        ("per model call", m.model_call),
        ("per tool call", m.tool_call),
        ("per step (1 call)", m.step),
        ("per run (1 step)", m.run),
    ] {
        println!(
            "{what:<18} {:6.1} allocator calls ({:5.1} allocs + {:4.1} reallocs), {:8.1} bytes; \
             loop and model {:6.1}, store {:5.1}",
            a.calls(),
            a.allocs,
            a.reallocs,
            a.bytes,
            a.loop_calls(),
            a.store,
        );
    }
    let per_call = m.model_call.loop_calls();
    println!(
        "target <= 12 per model call (loop and model): {per_call:.1} {}",
        if per_call <= 12.0 { "MET" } else { "NOT MET" }
    );
}
