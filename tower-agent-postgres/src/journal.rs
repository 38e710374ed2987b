//! The tool-call journal of [`Postgres`]: the table `tower_agent_journal` (schema version 3).
//! Records are written by the store's writer task with its saves (group commit, see
//! [`Postgres`]): many records and saves in one transaction, one statement for the records
//! of the calls started and one for those finished; each is committed before the call that
//! wrote it returns.

use std::collections::HashMap;

use futures_util::future::BoxFuture;
use tower_agent_core::{
    error::BoxError,
    message::{ToolCall, ToolOutput},
    store::{
        journal::{JournalEntry, ToolJournal},
        sql::decode_journal_entry,
    },
};

use super::{
    Postgres,
    writer::{Queued, Record},
};

impl Postgres {
    /// Writes a record through the writer task: committed (in the transaction of its batch)
    /// before this returns.
    async fn record(
        &self,
        thread: &str,
        call: &ToolCall,
        output: Option<String>,
    ) -> Result<(), BoxError> {
        let record = Record {
            thread: thread.to_owned(),
            call: call.id.clone(),
            tool: call.name.clone(),
            arguments: call.arguments.to_string(),
            output,
        };
        self.queue(thread, record, Queued::Record).await
    }
}

impl ToolJournal for Postgres {
    fn started<'a>(
        &'a self,
        thread: &'a str,
        call: &'a ToolCall,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(self.record(thread, call, None))
    }

    fn finished<'a>(
        &'a self,
        thread: &'a str,
        call: &'a ToolCall,
        output: &'a ToolOutput,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            let output = serde_json::to_string(output)?;
            self.record(thread, call, Some(output)).await
        })
    }

    fn entries<'a>(
        &'a self,
        thread: &'a str,
        call_ids: &'a [String],
    ) -> BoxFuture<'a, Result<HashMap<String, JournalEntry>, BoxError>> {
        Box::pin(async move {
            let rows = self
                .with_client(async |client| {
                    let stmt = client
                        .prepare_cached(
                            "SELECT call_id, tool, arguments, output FROM tower_agent_journal
                             WHERE thread_id = $1 AND call_id = ANY($2)",
                        )
                        .await?;
                    Ok(client.query(&stmt, &[&thread, &call_ids]).await?)
                })
                .await?;
            let mut entries = HashMap::new();
            for row in rows {
                let id: String = row.try_get(0)?;
                let entry = decode_journal_entry(
                    id.clone(),
                    row.try_get(1)?,
                    row.try_get(2)?,
                    row.try_get(3)?,
                )?;
                entries.insert(id, entry);
            }
            Ok(entries)
        })
    }
}
