//! Benchmarks of the built-in hooks' linear work: eviction of a huge tool output and token
//! estimation of a large conversation. Targets (DESIGN §8): linear, ≥ 1 GB/s.
//!
//! ```text
//! cargo bench --bench builtins
//! ```

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use tower_agent::{
    layers::{
        evict::truncate_middle,
        summarize::{BytesPerFour, TokenCounter},
    },
    message::{Message, Messages, ToolCall, ToolOutput},
};

const MB: usize = 1 << 20;

fn evict(c: &mut Criterion) {
    let mut group = c.benchmark_group("evict");
    // ASCII and multi-byte outputs of 10 MB: the character count is the linear pass.
    let ascii = "log line: all good\n".repeat(10 * MB / 19);
    let multibyte = "journal: ça marche — ✓\n".repeat(10 * MB / 27);
    for (name, text) in [("10MB_ascii", &ascii), ("10MB_multibyte", &multibyte)] {
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function(name, |b| {
            b.iter(|| truncate_middle(black_box(text), 80_000, 2_000, 2_000, None).unwrap())
        });
    }
    group.finish();
}

/// A conversation of about 1 MB: user turns, tool calls with arguments, tool results.
fn conversation() -> Messages {
    let mut messages = Messages::new();
    messages.push(Message::system("You are a careful assistant."));
    let mut size = 0;
    let mut i = 0;
    while size < MB {
        let text = format!("step {i}: {}", "please look at the next file ".repeat(20));
        size += text.len();
        messages.push(Message::user(text));
        let args =
            json!({ "path": format!("src/file_{i}.rs"), "content": "fn main() {}\n".repeat(40) });
        size += args.to_string().len();
        messages.push(Message::assistant("").with_tool_calls(vec![ToolCall::new(
            format!("c{i}"),
            "write_file",
            args,
        )]));
        let out = ToolOutput::text(format!("c{i}"), "wrote the file ".repeat(30));
        size += out.content.len();
        messages.push(Message::from(out));
        i += 1;
    }
    messages
}

fn tokens(c: &mut Criterion) {
    let messages = conversation();
    let bytes: usize = messages
        .iter()
        .map(|m| {
            m.content_len()
                + m.tool_calls
                    .iter()
                    .map(|c| c.arguments.to_string().len())
                    .sum::<usize>()
        })
        .sum();
    let mut group = c.benchmark_group("tokens");
    group.throughput(Throughput::Bytes(bytes as u64));
    group.bench_function("1MB_conversation", |b| {
        b.iter(|| BytesPerFour.count_messages(black_box(&messages)))
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(3));
    targets = evict, tokens
}
criterion_main!(benches);
