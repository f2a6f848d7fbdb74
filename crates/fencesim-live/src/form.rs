//! A design's live form: what its lock service and its resource do against a real server.
//!
//! A simulated design is a state machine the harness drives; its live form is the same design
//! spoken to a real server through the ecosystem's client library (here the `postgres` crate,
//! the blocking face of `tokio-postgres`). The forms belong to their designs (the single lease
//! service's in `fencesim-lease`, the fenced table's in `fencesim-resource`, each behind the
//! crate's `live` feature); the registry hands them to the harness, which knows none of them.
//!
//! # The log table
//! Every decision a form makes on the server (a grant, a renewal, a release, an accepted or a
//! rejected write) is also inserted into [`LOG_TABLE`], *in the same transaction and under the
//! same row lock*, so that the order of the log's `seq` is the database's own order of those
//! decisions, not the order in which the clients heard of them. The harness reads the log
//! after the trial and turns each row into the history's service or resource event. Its
//! columns: `node` (`lease-service` or `resource`), `event` (a history event kind: `grant`,
//! `renew`, `release`, `accept`, `reject`), `lock`, `key`, `holder`, `token`, `highest`,
//! `expires_at_us` (the lease's end by the database's clock, microseconds since the Unix epoch)
//! and `op` (the invoking operation's reference, as given to the form). `seq` and `at_us` (the
//! database's `clock_timestamp()`) fill themselves.

use postgres::Client;

/// The table every live form logs its decisions into (module docs).
pub const LOG_TABLE: &str = "fencesim_log";

/// SQL creating [`LOG_TABLE`].
pub const LOG_SCHEMA: &str = "
CREATE TABLE fencesim_log (
    seq bigserial PRIMARY KEY,
    at_us bigint NOT NULL DEFAULT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint,
    node text NOT NULL,
    event text NOT NULL,
    lock text,
    key text,
    holder text,
    token bigint,
    highest bigint,
    expires_at_us bigint,
    op text
);";

/// A database error, as the client library reports it.
pub type DbError = postgres::Error;

/// A lock operation's answer: `Ok` with the fencing token (acquire) or nothing (renew,
/// release), or `Err` with the service's reason for refusing, as the history's `fail` error
/// shows it.
pub type LockAnswer<T> = Result<T, String>;

/// A write's answer from the resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteAnswer {
    /// Applied; the key's highest accepted token is now `highest`.
    Accepted {
        /// Highest accepted token after the write.
        highest: u64,
    },
    /// Refused as stale: `highest` is the token that beat it.
    Rejected {
        /// Highest accepted token, above the one presented.
        highest: u64,
    },
}

/// A read's answer: the value and the token of the last accepted write (`None`: never written).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadAnswer {
    /// The stored value.
    pub value: Option<String>,
    /// The token it was written with.
    pub token: Option<u64>,
}

/// One lock operation, as a client asks it.
#[derive(Clone, Copy, Debug)]
pub struct LockCall<'a> {
    /// The lock's name.
    pub lock: &'a str,
    /// The client asking (the lease's holder).
    pub holder: &'a str,
    /// The TTL asked for, ms (acquire, renew).
    pub ttl_ms: u64,
    /// The fencing token held (renew, release; 0 for an acquire).
    pub token: u64,
    /// The operation's reference, to store in the log's `op` column.
    pub op: &'a str,
}

/// A lock service's live form on PostgreSQL: its tables, and its three operations, each one
/// transaction that also logs its decision (module docs).
pub trait PgLockService: Send + Sync {
    /// SQL creating its tables, run once per trial on an empty database (after
    /// [`LOG_SCHEMA`]).
    fn schema(&self) -> &'static str;

    /// Ask for a lease on `call.lock`: `Ok(token)` granted, `Err(reason)` refused.
    ///
    /// # Errors
    /// What the database or the connection reported (the operation's outcome is unknown).
    fn acquire(&self, db: &mut Client, call: &LockCall<'_>) -> Result<LockAnswer<u64>, DbError>;

    /// Extend the holder's lease by `call.ttl_ms` from now (a keepalive).
    ///
    /// # Errors
    /// As [`PgLockService::acquire`].
    fn renew(&self, db: &mut Client, call: &LockCall<'_>) -> Result<LockAnswer<()>, DbError>;

    /// Give the lease back.
    ///
    /// # Errors
    /// As [`PgLockService::acquire`].
    fn release(&self, db: &mut Client, call: &LockCall<'_>) -> Result<LockAnswer<()>, DbError>;
}

/// One mutation of the resource.
#[derive(Clone, Copy, Debug)]
pub struct WriteCall<'a> {
    /// The key written.
    pub key: &'a str,
    /// The fencing token presented.
    pub token: u64,
    /// The value written.
    pub value: &'a str,
    /// The writer.
    pub holder: &'a str,
    /// The operation's reference, for the log.
    pub op: &'a str,
}

/// A resource's live form on PostgreSQL: its table, a read, and a write that logs whether it
/// was accepted (module docs).
pub trait PgResource: Send + Sync {
    /// SQL creating its tables, run once per trial, with every key of the scenario inserted
    /// afterwards by [`PgResource::add_key`].
    fn schema(&self) -> &'static str;

    /// Create `key`'s row, never written.
    ///
    /// # Errors
    /// What the database reported.
    fn add_key(&self, db: &mut Client, key: &str) -> Result<(), DbError>;

    /// Read `key`.
    ///
    /// # Errors
    /// What the database or the connection reported.
    fn read(&self, db: &mut Client, key: &str) -> Result<ReadAnswer, DbError>;

    /// Write `call.value` with `call.token`, accepted or rejected as the resource decides.
    ///
    /// # Errors
    /// What the database or the connection reported (the write's outcome is unknown).
    fn write(&self, db: &mut Client, call: &WriteCall<'_>) -> Result<WriteAnswer, DbError>;
}

/// A lock service's live form in the registry.
#[derive(Clone, Copy, Debug)]
pub struct LockServiceForm {
    /// Its `[lock_service] kind`.
    pub kind: &'static str,
    /// Build it from `[lock_service]`'s resolved knobs, or say (one line) which knob value has
    /// no live form.
    pub make: fn(&toml::Table) -> Result<Box<dyn PgLockService>, String>,
    /// Check a client's resolved protocol knobs (the design's client knobs), naming the
    /// client's `name`, in the same way.
    pub client: fn(&str, &toml::Table) -> Result<(), String>,
}

/// A resource's live form in the registry.
#[derive(Clone, Copy, Debug)]
pub struct ResourceForm {
    /// Its `[resource] mode`.
    pub mode: &'static str,
    /// Build it from `[resource]`'s resolved knobs, or say which has no live form.
    pub make: fn(&toml::Table) -> Result<Box<dyn PgResource>, String>,
}

/// The live forms a binary knows, by lock service `kind` and resource `mode`. The harness
/// knows no design: the registry of the binary (fencesim's built-ins, or a user's) fills this.
#[derive(Clone, Debug, Default)]
pub struct LiveForms {
    /// Lock services.
    pub lock_services: Vec<LockServiceForm>,
    /// Resources.
    pub resources: Vec<ResourceForm>,
}

impl LiveForms {
    fn service_form(&self, kind: &str) -> Result<&LockServiceForm, String> {
        self.lock_services
            .iter()
            .find(|f| f.kind == kind)
            .ok_or_else(|| {
                format!(
                    "[lock_service] kind = {kind:?} has no live form (live mode runs: {})",
                    names(self.lock_services.iter().map(|f| f.kind))
                )
            })
    }

    /// The lock service form of `kind` built from its knobs.
    ///
    /// # Errors
    /// No form for `kind`, or knobs it cannot honour, as one line.
    pub fn lock_service(
        &self,
        kind: &str,
        knobs: &toml::Table,
    ) -> Result<Box<dyn PgLockService>, String> {
        (self.service_form(kind)?.make)(knobs)
    }

    /// Check client `name`'s protocol knobs against the live form of `kind`.
    ///
    /// # Errors
    /// As [`LiveForms::lock_service`].
    pub fn client(&self, kind: &str, name: &str, knobs: &toml::Table) -> Result<(), String> {
        (self.service_form(kind)?.client)(name, knobs)
    }

    /// The resource form of `mode` built from its knobs.
    ///
    /// # Errors
    /// As [`LiveForms::lock_service`].
    pub fn resource(&self, mode: &str, knobs: &toml::Table) -> Result<Box<dyn PgResource>, String> {
        let form = self
            .resources
            .iter()
            .find(|f| f.mode == mode)
            .ok_or_else(|| {
                format!(
                    "[resource] mode = {mode:?} has no live form (live mode runs: {})",
                    names(self.resources.iter().map(|f| f.mode))
                )
            })?;
        (form.make)(knobs)
    }
}

fn names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Refuse any knob of `knobs` whose value differs from the live form's only one, naming the
/// table (`[lock_service]`), the knob, its value and what the live form does instead: a knob
/// value with no live meaning is an error, never a silent drop. `allowed` lists each knob the
/// form honours with the values it accepts; knobs not listed must be absent.
///
/// # Errors
/// The first knob refused, as one line.
pub fn only_knobs(
    table: &str,
    knobs: &toml::Table,
    allowed: &[(&str, &[&str])],
) -> Result<(), String> {
    for (name, value) in knobs {
        let shown = match value {
            toml::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        match allowed.iter().find(|(n, _)| n == name) {
            Some((_, values)) if values.is_empty() || values.contains(&shown.as_str()) => {}
            Some((_, values)) => {
                return Err(format!(
                    "{table} {name} = {shown:?} has no live form (live mode takes {})",
                    names(values.iter().copied())
                ))
            }
            None => return Err(format!("{table} {name} = {shown} has no live form")),
        }
    }
    Ok(())
}
