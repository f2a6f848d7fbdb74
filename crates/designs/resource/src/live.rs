//! The fenced resource's live form (`[resource] mode = "fenced"` or `"unfenced"` in live mode,
//! docs/live.md): a PostgreSQL table with one row per key, holding the value, the token it was
//! written with and the highest accepted token. Each write is one transaction that also logs
//! its accept or reject under the key's row lock, so the log's order is the table's.
//!
//! - fenced, `check = "atomic"`: the conditional update of Kleppmann 2016 and the design note,
//!   `UPDATE ... WHERE highest <= $token`, one statement: a stale token changes nothing;
//! - fenced, `check = "check-then-apply"` (K20): `SELECT highest`, then `pg_sleep` for
//!   `apply_delay_ms`, then a blind `UPDATE`, two statements at READ COMMITTED: two writers
//!   can both pass the check, and the older may be stored last;
//! - unfenced: a blind `UPDATE`; the highest token is only remembered.

use fencesim_live::form::{
    only_knobs, DbError, Endpoints, PgConnection, PgResource, ReadAnswer, ResourceForm,
    ResourceSession, Unknown, WriteAnswer, WriteCall, LOG_TABLE,
};
use fencesim_live::postgres::{Client, Transaction};
use fencesim_live::toml;

/// The fenced table's entry in a registry's live forms.
pub const FENCED_LIVE: ResourceForm = ResourceForm { make: make_fenced };

/// The unfenced table's entry.
pub const UNFENCED_LIVE: ResourceForm = ResourceForm {
    make: make_unfenced,
};

const TABLE: &str = "fencesim_resource";

/// How the table checks a write's token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PgFence {
    /// One conditional `UPDATE` (safe).
    Atomic,
    /// `SELECT` the highest token, wait `apply_delay_ms` (`pg_sleep`), then a blind `UPDATE`.
    CheckThenApply {
        /// The window between the check and the update, ms.
        apply_delay_ms: u64,
    },
    /// No check at all.
    Unfenced,
}

/// The resource table on PostgreSQL.
#[derive(Clone, Copy, Debug)]
pub struct PgTable {
    fence: PgFence,
}

const STORE_KNOBS: &[(&str, &[&str])] = &[
    ("check", &["atomic", "check-then-apply"]),
    ("apply_delay_ms", &[]),
    // Only deletes carry no token, and live clients do not delete yet (cleanup is refused).
    ("tokenless", &[]),
];

fn make_fenced(knobs: &toml::Table) -> Result<Box<dyn PgResource>, String> {
    only_knobs("[resource]", knobs, STORE_KNOBS)?;
    let fence = match knobs.get("check").and_then(|c| c.as_str()) {
        Some("check-then-apply") => PgFence::CheckThenApply {
            apply_delay_ms: knobs
                .get("apply_delay_ms")
                .and_then(|d| d.as_integer())
                .map_or(0, |d| d.max(0) as u64),
        },
        _ => PgFence::Atomic,
    };
    Ok(Box::new(PgTable { fence }))
}

fn make_unfenced(knobs: &toml::Table) -> Result<Box<dyn PgResource>, String> {
    only_knobs("[resource]", knobs, STORE_KNOBS)?;
    Ok(Box::new(PgTable {
        fence: PgFence::Unfenced,
    }))
}

fn log(
    tx: &mut Transaction<'_>,
    event: &str,
    call: &WriteCall<'_>,
    highest: i64,
) -> Result<(), DbError> {
    tx.execute(
        &format!(
            "INSERT INTO {LOG_TABLE} (node, event, key, holder, token, highest, op) \
             VALUES ('resource', $1, $2, $3, $4, $5, $6)"
        ),
        &[
            &event,
            &call.key,
            &call.holder,
            &(call.token as i64),
            &highest,
            &call.op,
        ],
    )?;
    Ok(())
}

impl PgTable {
    /// Store the write without any check; the highest token after it.
    fn apply(&self, tx: &mut Transaction<'_>, call: &WriteCall<'_>) -> Result<i64, DbError> {
        let highest = match self.fence {
            // A blind update remembers the highest token it has seen.
            PgFence::Unfenced => "GREATEST(highest, $2)",
            // Check-then-apply stores the token it checked, even if a newer one landed since.
            _ => "$2",
        };
        let row = tx.query_one(
            &format!(
                "UPDATE {TABLE} SET value = $3, token = $2, highest = {highest} \
                 WHERE key = $1 RETURNING highest"
            ),
            &[&call.key, &(call.token as i64), &call.value],
        )?;
        Ok(row.get(0))
    }

    fn highest(tx: &mut Transaction<'_>, key: &str) -> Result<i64, DbError> {
        let row = tx.query_one(
            &format!("SELECT highest FROM {TABLE} WHERE key = $1"),
            &[&key],
        )?;
        Ok(row.get(0))
    }
}

impl PgResource for PgTable {
    fn session(&self, endpoints: &Endpoints) -> Result<Box<dyn ResourceSession>, String> {
        Ok(Box::new(TableSession {
            table: *self,
            db: PgConnection::open(&endpoints.for_resource())?,
        }))
    }

    fn schema(&self) -> &'static str {
        "CREATE TABLE fencesim_resource (
            key text PRIMARY KEY,
            value text,
            token bigint,
            highest bigint NOT NULL DEFAULT 0
        );"
    }

    fn add_key(&self, db: &mut Client, key: &str) -> Result<(), DbError> {
        db.execute(
            &format!("INSERT INTO {TABLE} (key) VALUES ($1) ON CONFLICT DO NOTHING"),
            &[&key],
        )?;
        Ok(())
    }
}

impl PgTable {
    fn read(&self, db: &mut Client, key: &str) -> Result<ReadAnswer, DbError> {
        let row = db.query_opt(
            &format!("SELECT value, token FROM {TABLE} WHERE key = $1"),
            &[&key],
        )?;
        Ok(row.map_or_else(ReadAnswer::default, |r| ReadAnswer {
            value: r.get(0),
            token: r.get::<_, Option<i64>>(1).map(|t| t as u64),
        }))
    }

    fn write(&self, db: &mut Client, call: &WriteCall<'_>) -> Result<WriteAnswer, DbError> {
        let mut tx = db.transaction()?;
        let token = call.token as i64;
        let answer = match self.fence {
            PgFence::Atomic => {
                let updated = tx.query_opt(
                    &format!(
                        "UPDATE {TABLE} SET value = $3, token = $2, highest = $2 \
                         WHERE key = $1 AND highest <= $2 RETURNING highest"
                    ),
                    &[&call.key, &token, &call.value],
                )?;
                match updated {
                    Some(row) => WriteAnswer::Accepted {
                        highest: row.get::<_, i64>(0) as u64,
                    },
                    // Not updated: the row's highest beat the token (read under the same lock).
                    None => WriteAnswer::Rejected {
                        highest: Self::highest(&mut tx, call.key)? as u64,
                    },
                }
            }
            PgFence::CheckThenApply { apply_delay_ms } => {
                let highest = Self::highest(&mut tx, call.key)?;
                if token < highest {
                    WriteAnswer::Rejected {
                        highest: highest as u64,
                    }
                } else {
                    let seconds = apply_delay_ms as f64 / 1000.0;
                    tx.execute("SELECT pg_sleep($1)", &[&seconds])?;
                    WriteAnswer::Accepted {
                        highest: self.apply(&mut tx, call)? as u64,
                    }
                }
            }
            PgFence::Unfenced => WriteAnswer::Accepted {
                highest: self.apply(&mut tx, call)? as u64,
            },
        };
        match answer {
            WriteAnswer::Accepted { highest } => log(&mut tx, "accept", call, highest as i64)?,
            WriteAnswer::Rejected { highest } => log(&mut tx, "reject", call, highest as i64)?,
        }
        tx.commit()?;
        Ok(answer)
    }
}

/// A client's connection to the table.
struct TableSession {
    table: PgTable,
    db: PgConnection,
}

impl ResourceSession for TableSession {
    fn read(&mut self, key: &str) -> Result<ReadAnswer, Unknown> {
        let table = self.table;
        self.db.call(|db| table.read(db, key))
    }

    fn write(&mut self, call: &WriteCall<'_>) -> Result<WriteAnswer, Unknown> {
        let table = self.table;
        self.db.call(|db| table.write(db, call))
    }
}
