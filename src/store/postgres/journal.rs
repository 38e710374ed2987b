//! The tool-call journal of [`Postgres`]: the table `tower_agent_journal` (schema version 3).
//! Each record is one statement in its own transaction, committed before the call returns.

use std::collections::HashMap;

use futures_util::future::BoxFuture;

use super::Postgres;
use crate::{
    error::BoxError,
    message::{ToolCall, ToolOutput},
    store::journal::{JournalEntry, ToolJournal, decode},
};

impl ToolJournal for Postgres {
    fn started<'a>(
        &'a self,
        thread: &'a str,
        call: &'a ToolCall,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            let arguments = call.arguments.to_string();
            self.with_client(async |client| {
                let stmt = client
                    .prepare_cached(
                        "INSERT INTO tower_agent_journal (thread_id, call_id, tool, arguments, output)
                         VALUES ($1, $2, $3, $4, NULL)
                         ON CONFLICT (thread_id, call_id) DO UPDATE
                         SET tool = excluded.tool, arguments = excluded.arguments, output = NULL",
                    )
                    .await?;
                client
                    .execute(&stmt, &[&thread, &call.id, &call.name, &arguments])
                    .await?;
                Ok(())
            })
            .await
        })
    }

    fn finished<'a>(
        &'a self,
        thread: &'a str,
        call: &'a ToolCall,
        output: &'a ToolOutput,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            let arguments = call.arguments.to_string();
            let output = serde_json::to_string(output)?;
            self.with_client(async |client| {
                let stmt = client
                    .prepare_cached(
                        "INSERT INTO tower_agent_journal (thread_id, call_id, tool, arguments, output)
                         VALUES ($1, $2, $3, $4, $5)
                         ON CONFLICT (thread_id, call_id) DO UPDATE SET output = excluded.output",
                    )
                    .await?;
                client
                    .execute(&stmt, &[&thread, &call.id, &call.name, &arguments, &output])
                    .await?;
                Ok(())
            })
            .await
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
                let entry = decode(
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
