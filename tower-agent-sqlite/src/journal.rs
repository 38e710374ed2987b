//! The tool-call journal of [`Sqlite`]: the table `journal` (schema version 4).

use std::collections::HashMap;

use futures_util::future::BoxFuture;
use rusqlite::{OptionalExtension, params};
use tower_agent_core::{
    error::BoxError,
    message::{ToolCall, ToolOutput},
    store::journal::{JournalEntry, ToolJournal},
};

use super::{Sqlite, Write};

impl ToolJournal for Sqlite {
    fn started<'a>(
        &'a self,
        thread: &'a str,
        call: &'a ToolCall,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        let (thread, id, tool) = (thread.to_owned(), call.id.clone(), call.name.clone());
        let arguments = call.arguments.to_string();
        Box::pin(self.write(Write::Exec(Box::new(move |conn| {
            conn.prepare_cached(
                "INSERT INTO journal (thread_id, call_id, tool, arguments, output)
                 VALUES (?1, ?2, ?3, ?4, NULL)
                 ON CONFLICT (thread_id, call_id) DO UPDATE
                 SET tool = excluded.tool, arguments = excluded.arguments, output = NULL",
            )?
            .execute(params![thread, id, tool, arguments])?;
            Ok(())
        }))))
    }

    fn finished<'a>(
        &'a self,
        thread: &'a str,
        call: &'a ToolCall,
        output: &'a ToolOutput,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        let (thread, id) = (thread.to_owned(), call.id.clone());
        let output = serde_json::to_string(output);
        Box::pin(async move {
            let output = output?;
            self.write(Write::Exec(Box::new(move |conn| {
                // Only a started record is finished (see `ToolJournal::finished`).
                conn.prepare_cached(
                    "UPDATE journal SET output = ?3 WHERE thread_id = ?1 AND call_id = ?2",
                )?
                .execute(params![thread, id, output])?;
                Ok(())
            })))
            .await
        })
    }

    fn entries<'a>(
        &'a self,
        thread: &'a str,
        call_ids: &'a [String],
    ) -> BoxFuture<'a, Result<HashMap<String, JournalEntry>, BoxError>> {
        let (thread, ids) = (thread.to_owned(), call_ids.to_vec());
        Box::pin(self.read(move |conn, _| {
            let mut stmt = conn.prepare_cached(
                "SELECT tool, arguments, output FROM journal WHERE thread_id = ?1 AND call_id = ?2",
            )?;
            let mut entries = HashMap::new();
            for id in ids {
                let row = stmt
                    .query_row(params![thread, id], |row| {
                        Ok((
                            row.get::<_, String>(0)?,
                            row.get::<_, String>(1)?,
                            row.get::<_, Option<String>>(2)?,
                        ))
                    })
                    .optional()?;
                if let Some((tool, arguments, output)) = row {
                    let entry = tower_agent_core::store::sql::decode_journal_entry(
                        id.clone(),
                        tool,
                        &arguments,
                        output,
                    )?;
                    entries.insert(id, entry);
                }
            }
            Ok(entries)
        }))
    }
}
