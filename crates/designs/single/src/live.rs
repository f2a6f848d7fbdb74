//! The single lease service's live form (`kind = "single"` in live mode, docs/live.md): a
//! lease table on PostgreSQL, one row per lock, as the design note's `GetLockForUpdate`
//! describes. Each operation is one transaction that locks the lock's row (`SELECT ... FOR
//! UPDATE`), reads the database's clock, decides as the simulated `LeaseNode` does (grant if
//! free or expired with the next token, renew or release only the holder's unexpired lease),
//! and logs its decision in the same transaction (`fencesim_live::form`'s log table).
//!
//! Expiry is by the database's clock (`clock_timestamp()`), whatever the scenario's
//! `expiry_clock`: the two clocks agree on a machine whose clock is not stepped, and clock
//! faults are refused on PostgreSQL.

use fencesim_live::form::{
    only_knobs, DbError, Endpoints, Grant, LiveLockService, LockAnswer, LockCall, LockServiceForm,
    LockSession, Needs, PgConnection, Unknown, LOG_TABLE,
};
use fencesim_live::postgres::{Client, Transaction};
use fencesim_live::toml;

/// The single lease service's entry in a registry's live forms.
pub const SINGLE_LIVE: LockServiceForm = LockServiceForm {
    make: make_single,
    client: check_client,
};

/// The lease table's name.
const TABLE: &str = "fencesim_leases";

/// The single service on PostgreSQL.
#[derive(Clone, Copy, Debug, Default)]
pub struct PgSingleService;

fn make_single(knobs: &toml::Table) -> Result<Box<dyn LiveLockService>, String> {
    only_knobs(
        "[lock_service]",
        knobs,
        &[
            // Every commit is synced before it is acknowledged (fsync=on, synchronous_commit).
            ("fsync", &["always"]),
            ("expiry_clock", &["monotonic", "wall"]),
            ("token_counter", &["durable"]),
            ("restart_grace_ms", &["0"]),
            ("acquire", &["fail-fast"]),
            ("reaper", &["respects-leases"]),
            ("release", &["compare-and-delete"]),
        ],
    )?;
    Ok(Box::new(PgSingleService))
}

/// The live client asks for a deadline from its request, stops at a refused renewal, retries
/// one without an answer, and never reclaims a lease by name: the lease clients' defaults.
fn check_client(name: &str, knobs: &toml::Table) -> Result<(), String> {
    only_knobs(
        &format!("[[clients]] {name}:"),
        knobs,
        &[
            ("deadline_from", &["request"]),
            ("renew_after_failure", &["retry"]),
            ("reclaim", &["by-session"]),
            ("on_lost_lease", &["stop"]),
        ],
    )
}

/// A lock's row, locked, with the database's clock read in the same transaction.
struct Row {
    holder: Option<String>,
    token: i64,
    expires_at_us: i64,
    now_us: i64,
}

impl Row {
    fn live_holder(&self) -> Option<&str> {
        self.holder
            .as_deref()
            .filter(|_| self.expires_at_us > self.now_us)
    }
}

fn lock_row(tx: &mut Transaction<'_>, lock: &str) -> Result<Row, DbError> {
    tx.execute(
        &format!("INSERT INTO {TABLE} (lock) VALUES ($1) ON CONFLICT DO NOTHING"),
        &[&lock],
    )?;
    let row = tx.query_one(
        &format!(
            "SELECT holder, token, expires_at_us, \
             (extract(epoch FROM clock_timestamp()) * 1000000)::bigint \
             FROM {TABLE} WHERE lock = $1 FOR UPDATE"
        ),
        &[&lock],
    )?;
    Ok(Row {
        holder: row.get(0),
        token: row.get(1),
        expires_at_us: row.get(2),
        now_us: row.get(3),
    })
}

fn log(
    tx: &mut Transaction<'_>,
    event: &str,
    call: &LockCall<'_>,
    token: i64,
    at_us: i64,
    expires_at_us: Option<i64>,
) -> Result<(), DbError> {
    tx.execute(
        &format!(
            "INSERT INTO {LOG_TABLE} (at_us, node, event, lock, holder, token, expires_at_us, op) \
             VALUES ($1, 'lease-service', $2, $3, $4, $5, $6, $7)"
        ),
        &[
            &at_us,
            &event,
            &call.lock,
            &call.holder,
            &token,
            &expires_at_us,
            &call.op,
        ],
    )?;
    Ok(())
}

fn ttl_us(call: &LockCall<'_>) -> i64 {
    i64::try_from(call.ttl_ms.saturating_mul(1000)).unwrap_or(i64::MAX / 2)
}

impl LiveLockService for PgSingleService {
    fn needs(&self) -> Needs {
        Needs {
            postgres_schema: Some(SCHEMA),
            ..Needs::default()
        }
    }

    fn session(&self, endpoints: &Endpoints) -> Result<Box<dyn LockSession>, String> {
        Ok(Box::new(SingleSession {
            db: PgConnection::open(endpoints)?,
        }))
    }
}

/// The lease table.
const SCHEMA: &str = "CREATE TABLE fencesim_leases (
    lock text PRIMARY KEY,
    holder text,
    token bigint NOT NULL DEFAULT 0,
    expires_at_us bigint NOT NULL DEFAULT 0
);";

/// A client's connection to the lease table.
struct SingleSession {
    db: PgConnection,
}

impl LockSession for SingleSession {
    fn acquire(&mut self, call: &LockCall<'_>) -> Result<LockAnswer<Grant>, Unknown> {
        self.db.call(|db| acquire(db, call))
    }

    fn renew(&mut self, call: &LockCall<'_>) -> Result<LockAnswer<Option<i64>>, Unknown> {
        self.db.call(|db| renew(db, call)).map(|a| a.map(|()| None))
    }

    fn release(&mut self, call: &LockCall<'_>) -> Result<LockAnswer<()>, Unknown> {
        self.db.call(|db| release(db, call))
    }
}

/// One acquire: lock the row, read the clock, grant the next token if the lease is free or
/// expired, log the grant.
fn acquire(db: &mut Client, call: &LockCall<'_>) -> Result<LockAnswer<Grant>, DbError> {
    let mut tx = db.transaction()?;
    let row = lock_row(&mut tx, call.lock)?;
    if let Some(holder) = row.live_holder() {
        let left_ms = (row.expires_at_us - row.now_us) / 1000;
        let refused = format!("held by {holder} for another {left_ms} ms");
        tx.rollback()?;
        return Ok(Err(refused));
    }
    // The next token: the row's counter survives every lease, so tokens only grow.
    let token = row.token + 1;
    let expires_at_us = row.now_us + ttl_us(call);
    tx.execute(
        &format!("UPDATE {TABLE} SET holder = $2, token = $3, expires_at_us = $4 WHERE lock = $1"),
        &[&call.lock, &call.holder, &token, &expires_at_us],
    )?;
    log(
        &mut tx,
        "grant",
        call,
        token,
        row.now_us,
        Some(expires_at_us),
    )?;
    tx.commit()?;
    Ok(Ok(Grant {
        token: token as u64,
        valid_until_ms: None,
    }))
}

/// One renewal of the holder's own unexpired lease.
fn renew(db: &mut Client, call: &LockCall<'_>) -> Result<LockAnswer<()>, DbError> {
    let mut tx = db.transaction()?;
    let row = lock_row(&mut tx, call.lock)?;
    if row.live_holder() != Some(call.holder) || row.token != call.token as i64 {
        tx.rollback()?;
        return Ok(Err("lease lost: not the holder".to_owned()));
    }
    let expires_at_us = row.now_us + ttl_us(call);
    tx.execute(
        &format!("UPDATE {TABLE} SET expires_at_us = $2 WHERE lock = $1"),
        &[&call.lock, &expires_at_us],
    )?;
    log(
        &mut tx,
        "renew",
        call,
        row.token,
        row.now_us,
        Some(expires_at_us),
    )?;
    tx.commit()?;
    Ok(Ok(()))
}

/// One release (compare-and-delete) of the holder's own unexpired lease.
fn release(db: &mut Client, call: &LockCall<'_>) -> Result<LockAnswer<()>, DbError> {
    let mut tx = db.transaction()?;
    let row = lock_row(&mut tx, call.lock)?;
    // Compare-and-delete: only the holder's own, unexpired lease.
    if row.live_holder() != Some(call.holder) || row.token != call.token as i64 {
        tx.rollback()?;
        return Ok(Err("not the holder".to_owned()));
    }
    tx.execute(
        &format!("UPDATE {TABLE} SET holder = NULL, expires_at_us = 0 WHERE lock = $1"),
        &[&call.lock],
    )?;
    log(&mut tx, "release", call, row.token, row.now_us, None)?;
    tx.commit()?;
    Ok(Ok(()))
}
