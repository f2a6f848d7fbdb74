//! One history from a trial's three sources: the client processes' records (stamped with
//! `CLOCK_MONOTONIC`), the database's log (its decisions in its own order, stamped with its
//! clock), and the harness's own nemesis events.
//!
//! A logged decision happened inside its operation's window (between the client's invoke and
//! its completion), and the log's order is the database's order of decisions. So each log
//! row's time is its database stamp on the trial's monotonic axis, moved, if the two clocks'
//! few microseconds of disagreement put it outside, into its window and after the row before
//! it. Lease expiries are not decisions anyone logs: an expiry is the moment the database's
//! clock passed the lease's `expires_at`, which is when the next grant of the lock (or the
//! trial's end) finds it past.

use std::collections::BTreeMap;

use fencesim_history::{Entry, Event, EventKind, Header, History, Name, OpType, Stamp};

use crate::clock::Origin;

/// A record from a client process.
#[derive(Clone, Debug)]
pub struct ClientRecord {
    /// ns since the trial's origin.
    pub t_ns: u64,
    /// The client's name.
    pub client: String,
    /// The operation's number within the client (operations only).
    pub seq: Option<u64>,
    /// The record.
    pub entry: Entry,
}

/// A row of the database's decision log (`fencesim_log`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogRow {
    /// The database's order.
    pub seq: i64,
    /// The database's `clock_timestamp()`, µs since the epoch.
    pub at_us: i64,
    /// `lease-service` or `resource`.
    pub node: String,
    /// A history event kind (`grant`, `accept`, ...).
    pub event: String,
    /// The lock.
    pub lock: Option<String>,
    /// The key.
    pub key: Option<String>,
    /// Holder or writer.
    pub holder: Option<String>,
    /// Token.
    pub token: Option<i64>,
    /// Highest accepted token after (accept) or above (reject).
    pub highest: Option<i64>,
    /// The lease's end by the database's clock, µs since the epoch.
    pub expires_at_us: Option<i64>,
    /// The invoking operation, `<client>#<seq>`.
    pub op: Option<String>,
}

/// What goes into the history, before its stamps are final.
struct Item {
    t_ns: u64,
    /// Ties at one instant: an invoke first, then decisions, then completions.
    rank: u8,
    entry: Entry,
    /// An invoke's reference (`<client>#<seq>`), for the events that answer it.
    invoke_ref: Option<String>,
    /// The reference of the invoke a decision answers.
    answers: Option<String>,
}

/// Build the trial's history. `end_ns`: when the trial ended (leases past their end by then
/// expired within the trial). `tool_version`: written in the header.
///
/// # Errors
/// A log row whose `event` is not a history event kind.
pub fn assemble(
    scenario: &str,
    tool_version: &str,
    origin: &Origin,
    clients: Vec<ClientRecord>,
    mut log: Vec<LogRow>,
    nemesis: Vec<(u64, Event)>,
    end_ns: u64,
) -> Result<History, String> {
    let mut windows: BTreeMap<String, (u64, Option<u64>)> = BTreeMap::new();
    let mut items = Vec::new();
    for r in clients {
        let reference = r.seq.map(|s| crate::wire::op_ref(&r.client, s));
        let (rank, invoke_ref) = match &r.entry {
            Entry::Op(op) if op.op_type == OpType::Invoke => {
                if let Some(reference) = &reference {
                    windows.insert(reference.clone(), (r.t_ns, None));
                }
                (0, reference)
            }
            Entry::Op(_) => {
                if let Some(w) = reference.as_ref().and_then(|x| windows.get_mut(x)) {
                    w.1 = Some(r.t_ns);
                }
                (2, None)
            }
            Entry::Event(_) => (2, None),
        };
        items.push(Item {
            t_ns: r.t_ns,
            rank,
            entry: r.entry,
            invoke_ref,
            answers: None,
        });
    }
    log.sort_by_key(|row| row.seq);
    let mut previous_ns = 0;
    let mut leases = Leases::default();
    for row in &log {
        let mut t = origin.wall_to_ns(row.at_us).max(previous_ns);
        if let Some((invoked, completed)) = row.op.as_ref().and_then(|r| windows.get(r)) {
            t = t.max(*invoked);
            if let Some(done) = completed {
                t = t.min(*done);
            }
        }
        previous_ns = t;
        let event = event_of(row, origin)?;
        if let Some(expired) = leases.apply(&event, t, origin, row) {
            items.push(decision(expired.0, expired.1, None));
        }
        items.push(decision(t, event, row.op.clone()));
    }
    for (t, expired) in leases.expired_by(end_ns) {
        items.push(decision(t, expired, None));
    }
    for (t, event) in nemesis {
        items.push(decision(t, event, None));
    }
    items.sort_by_key(|i| (i.t_ns, i.rank));
    Ok(stamp(scenario, tool_version, items))
}

fn decision(t_ns: u64, event: Event, answers: Option<String>) -> Item {
    Item {
        t_ns,
        rank: 1,
        entry: Entry::Event(event),
        invoke_ref: None,
        answers,
    }
}

/// The history event a log row records.
fn event_of(row: &LogRow, origin: &Origin) -> Result<Event, String> {
    let kind: EventKind = serde_json::from_value(serde_json::Value::String(row.event.clone()))
        .map_err(|_| {
            format!(
                "log row {}: event {:?} is not a history event kind",
                row.seq, row.event
            )
        })?;
    let mut e = Event::new(kind);
    e.node = Name::from(row.node.as_str());
    e.lock = row.lock.as_deref().map(Name::from);
    e.key = row.key.as_deref().map(Name::from);
    e.holder = row.holder.as_deref().map(Name::from);
    e.token = row.token.map(|t| t as u64);
    e.highest = row.highest.map(|t| t as u64);
    e.expires_at_ms = row
        .expires_at_us
        .map(|us| (origin.wall_to_ns(us) / 1_000_000) as i64);
    Ok(e)
}

/// The leases the log has granted and not yet ended, per lock, to find their expiries.
#[derive(Default)]
struct Leases {
    /// lock → (the lease's grant event, its end on the trial's axis, ns).
    live: BTreeMap<String, (Event, u64)>,
}

impl Leases {
    /// Follow `event`; if it is a grant over a lease that had run out, that lease's expiry
    /// (its time and event), which goes before the grant.
    fn apply(
        &mut self,
        event: &Event,
        t: u64,
        origin: &Origin,
        row: &LogRow,
    ) -> Option<(u64, Event)> {
        let lock = event.lock.as_deref()?.to_owned();
        let end = row.expires_at_us.map(|us| origin.wall_to_ns(us));
        match event.event {
            EventKind::Grant => {
                let before = self.live.remove(&lock);
                if let Some(end) = end {
                    self.live.insert(lock, (event.clone(), end));
                }
                before.map(|(lease, end)| (end.min(t), expire(&lease)))
            }
            EventKind::Renew => {
                if let (Some((lease, old)), Some(end)) = (self.live.get_mut(&lock), end) {
                    *old = end;
                    lease.expires_at_ms = event.expires_at_ms;
                }
                None
            }
            EventKind::Release | EventKind::Revoke | EventKind::Expire => {
                self.live.remove(&lock);
                None
            }
            _ => None,
        }
    }

    /// The leases still live in the log whose end came before `end_ns`.
    fn expired_by(self, end_ns: u64) -> Vec<(u64, Event)> {
        self.live
            .into_values()
            .filter(|(_, end)| *end <= end_ns)
            .map(|(lease, end)| (end, expire(&lease)))
            .collect()
    }
}

fn expire(lease: &Event) -> Event {
    let mut e = Event::new(EventKind::Expire);
    e.node = lease.node.clone();
    e.lock = lease.lock.clone();
    e.holder = lease.holder.clone();
    e.token = lease.token;
    e.expires_at_ms = lease.expires_at_ms;
    e
}

/// Number the items in order, stamp them, and point each decision at its invoke's index.
fn stamp(scenario: &str, tool_version: &str, items: Vec<Item>) -> History {
    let mut invoke_index = BTreeMap::new();
    for (i, item) in items.iter().enumerate() {
        if let Some(r) = &item.invoke_ref {
            invoke_index.insert(r.clone(), i as u64);
        }
    }
    let entries = items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let ms = (item.t_ns / 1_000_000) as i64;
            let at = Stamp {
                index: i as u64,
                time_ns: item.t_ns,
                mono_ms: ms,
                wall_ms: ms,
            };
            let mut entry = item.entry;
            match &mut entry {
                Entry::Op(op) => op.at = at,
                Entry::Event(e) => {
                    e.at = at;
                    e.op = item.answers.and_then(|r| invoke_index.get(&r).copied());
                }
            }
            entry
        })
        .collect();
    History {
        header: Header {
            scenario: scenario.to_owned(),
            tool_version: tool_version.to_owned(),
            ..Header::unnamed()
        },
        entries,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencesim_history::{Op, OpFn};

    fn origin() -> Origin {
        Origin {
            mono_ns: 1_000_000_000,
            wall_us: 1_700_000_000_000_000,
        }
    }

    fn op(t_ns: u64, client: &str, seq: u64, op_type: OpType, f: OpFn) -> ClientRecord {
        ClientRecord {
            t_ns,
            client: client.to_owned(),
            seq: Some(seq),
            entry: Entry::Op(Op {
                at: Stamp::default(),
                process: 0,
                node: Name::from(client),
                op_type,
                f,
                lock: Some(Name::from("lock")),
                key: None,
                token: None,
                value: None,
                expected: None,
                value_unknown: false,
                ttl_ms: None,
                error: None,
            }),
        }
    }

    fn row(
        seq: i64,
        at_ms: i64,
        event: &str,
        holder: &str,
        token: i64,
        until_ms: i64,
        op: &str,
    ) -> LogRow {
        let us = |ms: i64| origin().wall_us + ms * 1000;
        LogRow {
            seq,
            at_us: us(at_ms),
            node: "lease-service".into(),
            event: event.into(),
            lock: Some("lock".into()),
            holder: Some(holder.into()),
            token: Some(token),
            expires_at_us: Some(us(until_ms)),
            op: Some(op.into()),
            ..LogRow::default()
        }
    }

    #[test]
    fn decisions_land_in_their_windows_and_expiries_carry_the_renewed_end() {
        let ms = |m: u64| m * 1_000_000;
        let clients = vec![
            op(ms(0), "c1", 1, OpType::Invoke, OpFn::Acquire),
            op(ms(5), "c1", 1, OpType::Ok, OpFn::Acquire),
            op(ms(100), "c1", 2, OpType::Invoke, OpFn::Renew),
            op(ms(110), "c1", 2, OpType::Ok, OpFn::Renew),
            op(ms(2000), "c2", 1, OpType::Invoke, OpFn::Acquire),
            op(ms(2010), "c2", 1, OpType::Ok, OpFn::Acquire),
        ];
        // The renewal's stamp is 1 ms before its invoke (two clocks a hair apart): it is moved
        // into its window. Rows arrive out of order: the log's `seq` decides.
        let log = vec![
            row(3, 2003, "grant", "c2", 2, 3003, "c2#1"),
            row(1, 2, "grant", "c1", 1, 1002, "c1#1"),
            row(2, 99, "renew", "c1", 1, 1599, "c1#2"),
        ];
        let h = assemble("s", "0.1.0", &origin(), clients, log, Vec::new(), ms(2500)).unwrap();
        // (ms, kind, token, expires_at_ms, op)
        type Seen<'a> = (u64, &'a str, Option<u64>, Option<i64>, Option<u64>);
        let events: Vec<Seen> = h
            .entries
            .iter()
            .filter_map(|e| match e {
                Entry::Event(e) => Some((
                    e.at.time_ns / 1_000_000,
                    e.event.as_str(),
                    e.token,
                    e.expires_at_ms,
                    e.op,
                )),
                Entry::Op(_) => None,
            })
            .collect();
        assert_eq!(
            events,
            [
                (2, "grant", Some(1), Some(1002), Some(0)),
                (100, "renew", Some(1), Some(1599), Some(3)),
                (1599, "expire", Some(1), Some(1599), None),
                (2003, "grant", Some(2), Some(3003), Some(7)),
            ]
        );
        for (i, e) in h.entries.iter().enumerate() {
            assert_eq!(e.at().index, i as u64);
        }
        // c2's lease had not ended by the trial's end (2.5 s): no expiry for it.
        assert_eq!(events.iter().filter(|e| e.1 == "expire").count(), 1);
    }
}
