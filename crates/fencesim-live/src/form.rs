//! A design's live form: what its lock service and its resource do against a real server.
//!
//! A simulated design is a state machine the harness drives; its live form is the same design
//! spoken to real servers through the ecosystem's client libraries (the `postgres` crate, the
//! blocking face of `tokio-postgres`, and the `redis` crate). The forms belong to their designs
//! (the single lease service's in `fencesim-single`, Redlock's in `fencesim-redlock`, the fenced
//! table's in `fencesim-resource`, each behind the crate's `live` feature); the registry hands
//! them to the harness, which knows none of them. A form says what it needs started
//! ([`Needs`]) and opens a session per client process ([`LockSession`], [`ResourceSession`]);
//! it reads no clock of its own (it is fed [`LockCall::now_ms`]).
//!
//! # The log table
//! Every decision a form makes on PostgreSQL (a grant, a renewal, a release, an accepted or a
//! rejected write) is also inserted into [`LOG_TABLE`], *in the same transaction and under the
//! same row lock*, so that the order of the log's `seq` is the database's own order of those
//! decisions, not the order in which the clients heard of them. The harness reads the log
//! after the trial and turns each row into the history's service or resource event. Its
//! columns: `node` (`lease-service` or `resource`), `event` (a history event kind: `grant`,
//! `renew`, `release`, `accept`, `reject`), `lock`, `key`, `holder`, `token`, `highest`,
//! `expires_at_us` (the lease's end by the database's clock, microseconds since the Unix epoch)
//! and `op` (the invoking operation's reference, as given to the form). `seq` and `at_us` (the
//! database's `clock_timestamp()`) fill themselves.

pub use fencesim_history::TokenOrder;
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

/// A lock operation's answer: `Ok` with what it gave (a [`Grant`] for an acquire), or `Err`
/// with the service's reason for refusing, as the history's `fail` error shows it.
pub type LockAnswer<T> = Result<T, String>;

/// A call whose outcome is unknown (a timeout, a lost connection): what happened, one line. The
/// client records `info`.
pub type Unknown = String;

/// A granted lease, as the client sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The fencing token (or, for a design with opaque tokens, the lock value).
    pub token: u64,
    /// Until when the client may believe it holds the lease, on the clock of
    /// [`LockCall::now_ms`]; `None`: the request's time plus the TTL less the client's
    /// `safety_margin_ms` (the lease services' rule). Redlock's is start + TTL - drift.
    pub valid_until_ms: Option<i64>,
}

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
    /// The client's `safety_margin_ms`: a form that computes its own deadline
    /// ([`Grant::valid_until_ms`]) takes it off, as the default rule does.
    pub safety_margin_ms: u64,
    /// The fencing token held (renew, release; 0 for an acquire).
    pub token: u64,
    /// The operation's reference, to store in the log's `op` column.
    pub op: &'a str,
    /// The client's monotonic clock, ms: the only clock a form may read (it is fed `now`, as
    /// the sans-IO cores are).
    pub now_ms: fn() -> i64,
    /// A random number for the form's own use (Redlock's lock value), drawn by the client.
    pub random: u64,
    /// Record what the form observed of a server's state, from its replies, as an event of
    /// the history stamped now by the client (Redlock's nodes' key events: a key set,
    /// extended, deleted or refused, docs/history-format.md). Only what a reply shows: a
    /// server's own expiry or a restart that lost a key has no reply, and no record.
    pub observe: fn(fencesim_history::Event),
}

/// Where a form's sessions find their servers.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Endpoints {
    /// libpq connection string of the database for the lock service's session (its search
    /// path set to the trial's schema; through the `lease-service` link's proxy if the trial
    /// has network faults).
    pub postgres: String,
    /// The same for the resource's session (the `resource` link).
    pub resource: String,
    /// `redis://127.0.0.1:PORT/` of each Redis node, in the design's node order.
    pub redis: Vec<String>,
    /// Put before every key or lock name a form writes: empty on the servers fencesim starts;
    /// on servers of the user's, beside their own keys, `fencesim-live-<pid>-<trial>:` for
    /// Redis (`--redis`) and `fencesim-live-<pid>-<trial>/` for etcd (`--etcd`).
    #[serde(default)]
    pub key_prefix: String,
    /// `http://127.0.0.1:PORT` of each etcd member, in the design's node order; or the
    /// client URLs of a cluster of the user's (`--etcd`, `http://[USER[:PASSWORD]@]HOST:PORT`).
    #[serde(default)]
    pub etcd: Vec<String>,
    /// How long the client waits for any one answer, ms (its `timeout_ms`).
    pub timeout_ms: u64,
}

impl Endpoints {
    /// The endpoints as the resource's session uses them: `postgres` is the resource's link.
    pub fn for_resource(&self) -> Endpoints {
        Endpoints {
            postgres: self.resource.clone(),
            ..self.clone()
        }
    }
}

/// What a lock service's live form needs started for a trial.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// Its tables on PostgreSQL (SQL run once per trial after [`LOG_SCHEMA`]), if it has any.
    pub postgres_schema: Option<&'static str>,
    /// Redis nodes, if it runs on Redis.
    pub redis: Option<RedisNeeds>,
    /// etcd members, if it runs on etcd.
    pub etcd: Option<EtcdNeeds>,
}

/// The etcd cluster a form runs on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdNeeds {
    /// Its members' names (`etcd-1`..), as the scenario's faults name them.
    pub nodes: Vec<String>,
}

/// The Redis nodes a form runs on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisNeeds {
    /// Their names (`redis-1`..), as the scenario's faults name them.
    pub nodes: Vec<String>,
    /// What each node keeps over a crash.
    pub persistence: RedisPersistence,
}

/// What a Redis node keeps over a crash (SIGKILL): the scenario's `fsync`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedisPersistence {
    /// `appendonly yes`, `appendfsync always`: every write is on disk before it is
    /// acknowledged, and a restarted node has every key (`fsync = "always"`).
    Always,
    /// No persistence (`appendonly no`, no snapshots): a restarted node has no key, as a node
    /// that had synced none of its writes before a power loss (`fsync = "never"`).
    None,
}

/// An open connection of a client to a lock service's live form: its three operations. Each
/// is atomic on the servers, and a form that logs decisions logs them in the same step.
pub trait LockSession {
    /// Ask for a lease on `call.lock`.
    ///
    /// # Errors
    /// The outcome is unknown (a timeout or a lost connection).
    fn acquire(&mut self, call: &LockCall<'_>) -> Result<LockAnswer<Grant>, Unknown>;

    /// Extend the holder's lease by `call.ttl_ms` (a keepalive); `Ok(Some(until))` moves the
    /// client's belief to `until` (clock of `now_ms`), `Ok(None)` to now + TTL - margin.
    ///
    /// # Errors
    /// As [`LockSession::acquire`].
    fn renew(&mut self, call: &LockCall<'_>) -> Result<LockAnswer<Option<i64>>, Unknown>;

    /// Give the lease back.
    ///
    /// # Errors
    /// As [`LockSession::acquire`].
    fn release(&mut self, call: &LockCall<'_>) -> Result<LockAnswer<()>, Unknown>;
}

/// A lock service's live form: what it needs started, how its tokens are ordered, and a
/// session per client.
pub trait LiveLockService: Send + Sync {
    /// The servers and tables it needs.
    fn needs(&self) -> Needs;

    /// How its tokens are ordered in the history ([`TokenOrder::Acquisition`] for opaque lock
    /// values).
    fn token_order(&self) -> TokenOrder {
        TokenOrder::Value
    }

    /// What the history of a trial cannot show of this service's state, one sentence each,
    /// which the trial prints as notes and keeps in its report (`live.notes`): a live form
    /// sees the servers only through their replies ([`LockCall::observe`]). Default: nothing.
    fn unobserved(&self) -> Vec<String> {
        Vec::new()
    }

    /// A client's session.
    ///
    /// # Errors
    /// It could not connect (one line).
    fn session(&self, endpoints: &Endpoints) -> Result<Box<dyn LockSession>, String>;
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

/// An open connection of a client to the resource.
pub trait ResourceSession {
    /// Read `key`.
    ///
    /// # Errors
    /// The outcome is unknown.
    fn read(&mut self, key: &str) -> Result<ReadAnswer, Unknown>;

    /// Write `call.value` with `call.token`, accepted or rejected as the resource decides, and
    /// logged in the same transaction.
    ///
    /// # Errors
    /// The outcome is unknown.
    fn write(&mut self, call: &WriteCall<'_>) -> Result<WriteAnswer, Unknown>;
}

/// A resource's live form on PostgreSQL: its table, its keys, and a session per client.
pub trait PgResource: Send + Sync {
    /// SQL creating its tables, run once per trial, with every key of the scenario inserted
    /// afterwards by [`PgResource::add_key`].
    fn schema(&self) -> &'static str;

    /// Create `key`'s row, never written.
    ///
    /// # Errors
    /// What the database reported.
    fn add_key(&self, db: &mut Client, key: &str) -> Result<(), DbError>;

    /// A client's session.
    ///
    /// # Errors
    /// It could not connect (one line).
    fn session(&self, endpoints: &Endpoints) -> Result<Box<dyn ResourceSession>, String>;
}

/// Connect to the database of `endpoints` with the client's timeout as `statement_timeout`: a
/// statement that takes longer ends as `info`, as a simulated request without a reply does.
///
/// # Errors
/// The connection or the setting failed.
pub fn connect_postgres(endpoints: &Endpoints) -> Result<Client, DbError> {
    let mut db = Client::connect(&endpoints.postgres, postgres::NoTls)?;
    db.batch_execute(&format!(
        "SET statement_timeout = {}",
        endpoints.timeout_ms.max(1)
    ))?;
    Ok(db)
}

/// A PostgreSQL connection that reconnects after it broke (a session's connection).
pub struct PgConnection {
    endpoints: Endpoints,
    db: Option<Client>,
}

impl PgConnection {
    /// Connect now.
    ///
    /// # Errors
    /// The first connection failed (one line).
    pub fn open(endpoints: &Endpoints) -> Result<Self, String> {
        let db = connect_postgres(endpoints)
            .map_err(|e| format!("cannot connect to PostgreSQL: {e}"))?;
        Ok(PgConnection {
            endpoints: endpoints.clone(),
            db: Some(db),
        })
    }

    /// Run `f` on the connection (connecting again first if the last one broke); an error is
    /// the call's unknown outcome.
    ///
    /// # Errors
    /// What the database or the connection reported.
    pub fn call<T>(
        &mut self,
        f: impl FnOnce(&mut Client) -> Result<T, DbError>,
    ) -> Result<T, Unknown> {
        if self.db.as_ref().is_none_or(Client::is_closed) {
            self.db = Some(connect_postgres(&self.endpoints).map_err(|e| crate::describe(&e))?);
        }
        let db = self.db.as_mut().expect("connected above");
        f(db).map_err(|e| crate::describe(&e))
    }
}

/// A lock service's live form in the registry, which files it under its design's `kind`.
#[derive(Clone, Copy, Debug)]
pub struct LockServiceForm {
    /// Build it from `[lock_service]`'s resolved knobs, or say (one line) which knob value has
    /// no live form.
    pub make: fn(&toml::Table) -> Result<Box<dyn LiveLockService>, String>,
    /// Check a client's resolved protocol knobs (the design's client knobs), naming the
    /// client's `name`, in the same way.
    pub client: fn(&str, &toml::Table) -> Result<(), String>,
}

/// A resource's live form in the registry, which files it under its resource's `mode`.
#[derive(Clone, Copy, Debug)]
pub struct ResourceForm {
    /// Build it from `[resource]`'s resolved knobs, or say which has no live form.
    pub make: fn(&toml::Table) -> Result<Box<dyn PgResource>, String>,
}

/// The live forms a binary knows, by lock service `kind` and resource `mode`. The harness
/// knows no design: the registry of the binary (fencesim's built-ins, or a user's) fills this.
#[derive(Clone, Debug, Default)]
pub struct LiveForms {
    /// Lock services, by `[lock_service] kind`.
    pub lock_services: Vec<(&'static str, LockServiceForm)>,
    /// Resources, by `[resource] mode`.
    pub resources: Vec<(&'static str, ResourceForm)>,
}

impl LiveForms {
    fn service_form(&self, kind: &str) -> Result<&LockServiceForm, String> {
        self.lock_services
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, form)| form)
            .ok_or_else(|| {
                format!(
                    "[lock_service] kind = {kind:?} has no live form (live mode runs: {})",
                    names(self.lock_services.iter().map(|(k, _)| *k))
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
    ) -> Result<Box<dyn LiveLockService>, String> {
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
        let (_, form) = self
            .resources
            .iter()
            .find(|(m, _)| *m == mode)
            .ok_or_else(|| {
                format!(
                    "[resource] mode = {mode:?} has no live form (live mode runs: {})",
                    names(self.resources.iter().map(|(m, _)| *m))
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
