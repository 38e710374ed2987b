//! Resolving the order of hooks: priorities and `before`/`after` constraints.

use std::{collections::HashMap, fmt};

use super::Registration;

/// Why the hooks could not be ordered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookOrderError {
    message: String,
    hooks: Vec<String>,
}

impl HookOrderError {
    /// The hooks involved (names, or `#index (event)` for unnamed ones).
    pub fn hooks(&self) -> &[String] {
        &self.hooks
    }
}

impl fmt::Display for HookOrderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for HookOrderError {}

/// The registrations' indices in run order: a topological sort of the constraints that,
/// among the hooks free to go next, picks the highest priority, then the first registered.
pub(super) fn resolve(regs: &[Registration]) -> Result<Vec<usize>, HookOrderError> {
    let mut by_name: HashMap<&str, usize> = HashMap::new();
    for (i, r) in regs.iter().enumerate() {
        if let Some(name) = &r.name
            && let Some(&first) = by_name.get(name.as_str())
        {
            // Both carry the name: tell them apart by position and event.
            let (a, b) = (regs[first].unnamed_label(first), r.unnamed_label(i));
            return Err(HookOrderError {
                message: format!("two hooks are named `{name}`: {a} and {b}"),
                hooks: vec![a, b],
            });
        }
        if let Some(name) = &r.name {
            by_name.insert(name, i);
        }
    }
    let lookup = |i: usize, name: &str, how: &str| {
        by_name.get(name).copied().ok_or_else(|| HookOrderError {
            message: format!(
                "hook {} must run {how} `{name}`, but no hook is named `{name}`",
                regs[i].label(i)
            ),
            hooks: vec![regs[i].label(i)],
        })
    };
    // edges[a] = hooks that must run after a
    let mut edges: Vec<Vec<usize>> = vec![Vec::new(); regs.len()];
    let mut indegree = vec![0usize; regs.len()];
    for (i, r) in regs.iter().enumerate() {
        for name in &r.before {
            let j = lookup(i, name, "before")?;
            edges[i].push(j);
            indegree[j] += 1;
        }
        for name in &r.after {
            let j = lookup(i, name, "after")?;
            edges[j].push(i);
            indegree[i] += 1;
        }
    }
    let mut order = Vec::with_capacity(regs.len());
    let mut done = vec![false; regs.len()];
    while order.len() < regs.len() {
        // Hooks are few; a linear scan for the best ready one keeps this simple.
        let next = (0..regs.len())
            .filter(|&i| !done[i] && indegree[i] == 0)
            .max_by(|&a, &b| regs[a].priority.cmp(&regs[b].priority).then(b.cmp(&a)));
        let Some(i) = next else {
            let cycle = find_cycle(&edges, &done);
            let names: Vec<String> = cycle.iter().map(|&i| regs[i].label(i)).collect();
            let mut path = names.clone();
            path.push(names[0].clone());
            return Err(HookOrderError {
                message: format!("the hook order has a cycle: {}", path.join(" → ")),
                hooks: names,
            });
        };
        done[i] = true;
        order.push(i);
        for &j in &edges[i] {
            indegree[j] -= 1;
        }
    }
    Ok(order)
}

/// A cycle among the hooks not yet ordered. Each of them still has a predecessor among them
/// (else it would have been ordered), so walking predecessors must come back to a hook.
fn find_cycle(edges: &[Vec<usize>], done: &[bool]) -> Vec<usize> {
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); edges.len()];
    for (a, succ) in edges.iter().enumerate() {
        for &b in succ {
            preds[b].push(a);
        }
    }
    let mut cur = (0..edges.len())
        .find(|&i| !done[i])
        .expect("a hook is left");
    let mut seen: HashMap<usize, usize> = HashMap::new();
    let mut path = Vec::new();
    loop {
        if let Some(&at) = seen.get(&cur) {
            // path[at..] walks backwards along the cycle: turn it around.
            let mut cycle = path[at..].to_vec();
            cycle.reverse();
            return cycle;
        }
        seen.insert(cur, path.len());
        path.push(cur);
        cur = preds[cur]
            .iter()
            .copied()
            .find(|&p| !done[p])
            .expect("an unordered hook has an unordered predecessor");
    }
}
