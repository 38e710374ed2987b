//! The errors of a [`Postgres`](super::Postgres) store: [`Conflict`] (a lost
//! compare-and-swap), [`ConnectError`], and how they name the server without the password.

use std::{error::Error as StdError, fmt};

use tokio_postgres::config::Host;
use tower_agent_core::error::BoxError;

/// A save lost its compare-and-swap: another store saved or deleted the thread since this
/// store last loaded or saved it. Nothing was written. Load the thread again to continue
/// from what the other writer saved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub(super) thread: String,
    /// `None`: the store found no thread.
    pub(super) expected: Option<i64>,
    /// `None`: the thread was deleted.
    pub(super) found: Option<i64>,
}

impl Conflict {
    /// The thread whose save was refused.
    pub fn thread(&self) -> &str {
        &self.thread
    }

    /// The conflict in an error chain (e.g. an [`Error`](tower_agent_core::Error) of a run whose save
    /// was refused), if there is one.
    pub fn find<'e>(mut error: &'e (dyn StdError + 'static)) -> Option<&'e Conflict> {
        loop {
            if let Some(conflict) = error.downcast_ref::<Conflict>() {
                return Some(conflict);
            }
            error = error.source()?;
        }
    }
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "thread `{}` was changed by another writer since this store read it (",
            self.thread
        )?;
        match self.expected {
            Some(expected) => write!(f, "revision {expected} expected, ")?,
            None => f.write_str("no thread expected, ")?,
        }
        match self.found {
            Some(found) => write!(f, "{found} found")?,
            None => f.write_str("the thread was deleted")?,
        }
        f.write_str("); nothing was saved: load the thread again")
    }
}

impl StdError for Conflict {}

/// Why [`Postgres::connect`](super::Postgres::connect) failed. Its `Display` names the server and database, never the
/// password.
pub struct ConnectError {
    pub(super) target: String,
    pub(super) kind: ConnectErrorKind,
    pub(super) source: Option<BoxError>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ConnectErrorKind {
    Url,
    Connect,
    Schema,
    /// The database's schema version (`found`) is past the newest this crate knows.
    TooNew {
        found: i32,
        newest: i32,
    },
    Migration {
        to: i32,
    },
}

impl ConnectError {
    /// The server and database, as the error names them (no password).
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The URL could not be parsed.
    pub fn is_bad_url(&self) -> bool {
        self.kind == ConnectErrorKind::Url
    }

    /// The server could not be reached, or refused the connection or the login.
    pub fn is_connect(&self) -> bool {
        self.kind == ConnectErrorKind::Connect
    }

    /// The database was written by a newer version of this crate (its schema version is
    /// higher than [`SCHEMA_VERSION`](crate::SCHEMA_VERSION)); it was left untouched.
    pub fn is_too_new(&self) -> bool {
        matches!(self.kind, ConnectErrorKind::TooNew { .. })
    }
}

impl fmt::Debug for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectError")
            .field("target", &self.target)
            .field("kind", &self.kind)
            .field("source", &self.source)
            .finish()
    }
}

impl fmt::Display for ConnectError {
    /// ``cannot open postgres thread store TARGET: WHAT IS WRONG: THE CAUSE``.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot open postgres thread store {}: ", self.target)?;
        match self.kind {
            ConnectErrorKind::Url => f.write_str("bad database URL"),
            ConnectErrorKind::Connect => f.write_str("cannot connect"),
            ConnectErrorKind::Schema => f.write_str("cannot read or create the schema"),
            ConnectErrorKind::TooNew { found, newest } => write!(
                f,
                "its schema version is {found}, newer than the {newest} this version of \
                 tower-agent knows; upgrade tower-agent (the database was left untouched)"
            ),
            ConnectErrorKind::Migration { to } => {
                write!(f, "cannot migrate its schema to version {to}")
            }
        }?;
        match &self.source {
            Some(source) => write!(f, ": {}", chain(&**source)),
            None => Ok(()),
        }
    }
}

impl StdError for ConnectError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn StdError + 'static))
    }
}

/// An error and its causes, `: `-separated (tokio-postgres puts the server's message and the
/// OS error in the causes).
pub(super) fn chain(e: &(dyn StdError + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// `` `DB` on HOST:PORT as USER `` (no password).
pub(super) fn describe(config: &tokio_postgres::Config) -> String {
    let ports = config.get_ports();
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            match host {
                Host::Tcp(name) => format!("{name}:{port}"),
                #[cfg(unix)]
                Host::Unix(dir) => format!("{}/.s.PGSQL.{port}", dir.display()),
            }
        })
        .collect();
    let hosts = if hosts.is_empty() {
        "localhost:5432".to_owned()
    } else {
        hosts.join(",")
    };
    let user = config.get_user().unwrap_or("(default user)");
    let db = config.get_dbname().unwrap_or(user);
    format!("`{db}` on {hosts} as {user}")
}

/// A URL that could not be parsed, with any `user:password@` part's password removed.
pub(super) fn redact_url(url: &str) -> String {
    let text = match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if scheme < at => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.find(':') {
                Some(colon) => format!(
                    "{}{}:***{}",
                    &url[..scheme + 3],
                    &userinfo[..colon],
                    &url[at..]
                ),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    };
    // A `key=value` string may carry `password=…`.
    let text = match text.find("password=") {
        Some(at) => {
            let rest = &text[at + "password=".len()..];
            let end = rest.find(' ').map_or(text.len(), |i| at + 9 + i);
            format!("{}password=***{}", &text[..at], &text[end..])
        }
        None => text,
    };
    format!("`{text}`")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_redacted() {
        assert_eq!(
            redact_url("postgres://ada:s3cret@db:5x/app"),
            "`postgres://ada:***@db:5x/app`"
        );
        assert_eq!(
            redact_url("host=db password=s3cret port=x"),
            "`host=db password=*** port=x`"
        );
        assert_eq!(redact_url("password=s3cret"), "`password=***`");
        assert_eq!(redact_url("postgres://db/app"), "`postgres://db/app`");
    }

    #[test]
    fn targets_name_host_and_database() {
        let config: tokio_postgres::Config = "postgresql://ada:s3cret@db.internal:6543/agents"
            .parse()
            .unwrap();
        assert_eq!(describe(&config), "`agents` on db.internal:6543 as ada");
    }
}
