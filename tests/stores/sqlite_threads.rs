//! `store::Sqlite` under load: the number of OS threads stays bounded (one writer and
//! [`READERS`] reader threads per store, whatever the number of operations in flight), and
//! dropping the last handle stops them. The test counts the process's threads, so nothing
//! else may run beside it: it runs alone in a child process (`support::alone`).

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use tower_agent::{
    message::Message,
    store::{
        Sqlite, Thread, ThreadStore,
        sqlite::{READERS, WRITE_QUEUE},
    },
};

use crate::support;

/// The process's OS threads (`Threads:` in `/proc/self/status`).
fn threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Threads of the store (named `tower-agent-sqlite-*`; the kernel keeps 15 bytes of a name).
fn store_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("tower-agent-sql"))
        .count()
}

fn names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .collect()
}

#[test]
fn threads_stay_bounded_under_2000_concurrent_operations_and_stop_on_drop() {
    if !support::alone(&support::test_name!(
        "threads_stay_bounded_under_2000_concurrent_operations_and_stop_on_drop"
    )) {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let baseline = threads();
    let store = Sqlite::open(dir.path().join("threads.db")).unwrap();
    // A new thread names itself once it runs: wait for that.
    let started = std::time::Instant::now();
    while store_threads() < 1 + READERS && started.elapsed() < support::PATIENCE {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(store_threads(), 1 + READERS, "{:?}", names());
    assert_eq!(threads(), baseline + 1 + READERS);
    // The documented bound: the writer and the readers, nothing per operation.
    let bound = baseline + 1 + READERS;
    let most = Arc::new(AtomicUsize::new(0));

    rt.block_on(async {
        // More operations in flight than the write queue holds: callers wait for room.
        let n = 2 * WRITE_QUEUE.max(1000);
        let tasks = (0..n).map(|i| {
            let (store, most) = (store.clone(), Arc::clone(&most));
            tokio::spawn(async move {
                let mut thread = Thread::new(format!("t{i}"));
                for j in 0..10 {
                    thread
                        .messages
                        .push(Message::user(format!("message {j} of {i}")));
                }
                store.save(&thread).await.unwrap();
                most.fetch_max(threads(), Ordering::Relaxed);
                thread.messages.push(Message::assistant("step"));
                store.save(&thread).await.unwrap();
                let loaded = store.load(&thread.id).await.unwrap().unwrap();
                most.fetch_max(threads(), Ordering::Relaxed);
                assert_eq!(loaded, thread);
            })
        });
        for task in futures_util::future::join_all(tasks).await {
            task.unwrap();
        }
        assert_eq!(store.list_threads().await.unwrap().len(), n);
    });
    let most = most.load(Ordering::Relaxed);
    assert!(
        most <= bound,
        "{most} OS threads under load, more than the {baseline} before the store + {}",
        1 + READERS
    );

    // Dropping the last handle stops (joins) the store's threads and closes the database.
    let clone = store.clone();
    drop(store);
    assert_eq!(store_threads(), 1 + READERS, "a clone still holds them");
    drop(clone);
    assert_eq!(store_threads(), 0);
    assert_eq!(threads(), baseline);
}
