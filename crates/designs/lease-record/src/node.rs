//! The store node (the `lease-service` node of a lease-record scenario): the compare-and-swap
//! store, synced on every swap. It never expires anything; its events say what each swap meant.

use fencesim_design::{
    Durability, LockNode, NodeCtx, NodeStart, Origin, ServiceEvent, ServiceEventKind,
};

use crate::message::{Purpose, RecordMessage};
use crate::store::{CasOutcome, LeaseRecord, RecordStore, Versioned};

/// The store as a lock-service node. Its durable state is the whole store, synced on every
/// successful swap, so a crash loses nothing.
#[derive(Clone, Debug, Default)]
pub struct StoreNode {
    store: RecordStore,
}

type Ctx<'a> = NodeCtx<'a, RecordMessage, RecordStore>;

impl LockNode for StoreNode {
    type Msg = RecordMessage;
    type Durable = RecordStore;
    type Config = ();

    /// Start from what the disk kept (nothing on the first start: an empty store).
    fn start(_: &(), start: NodeStart<RecordStore>, _: &mut Ctx<'_>) -> Self {
        StoreNode {
            store: start.durable.unwrap_or_default(),
        }
    }

    fn on_message(&mut self, origin: &Origin, msg: RecordMessage, ctx: &mut Ctx<'_>) {
        match msg {
            RecordMessage::Get { lock } => {
                ctx.reply(origin, RecordMessage::GetReply(self.store.get(&lock)));
            }
            RecordMessage::Cas {
                lock,
                expected_version,
                record,
                purpose,
            } => {
                let before = self.store.get(&lock);
                let takeover = purpose == Purpose::Acquire;
                let outcome = match (expected_version, &record) {
                    (Some(v), _) => self.store.cas(&lock, v, record.clone(), takeover),
                    (None, Some(r)) => self.store.put(&lock, r.clone()),
                    // An unconditional release is never sent: release always compares.
                    (None, None) => self.store.cas(&lock, before.version, None, takeover),
                };
                if let CasOutcome::Swapped {
                    acquired_version, ..
                } = outcome
                {
                    let swap = Swap {
                        lock: &lock,
                        before: &before,
                        record: record.as_ref(),
                        acquired_version,
                    };
                    record_swap(&swap, origin.op(), ctx);
                    ctx.persist(self.store.clone(), Durability::Synced);
                }
                ctx.reply(origin, RecordMessage::CasReply { outcome, purpose });
            }
            // Replies never come to the store.
            RecordMessage::GetReply(_) | RecordMessage::CasReply { .. } => {}
        }
    }
}

/// One successful swap: the record before it, the one swapped in, and the holder's token after.
struct Swap<'a> {
    lock: &'a str,
    before: &'a Versioned,
    record: Option<&'a LeaseRecord>,
    acquired_version: u64,
}

/// Record what a swap meant: a `renew` when the holder swapped its own record and kept its
/// token, a `grant` (after the previous holder's `revoke`) when someone took the record, a
/// `release` when it was cleared.
fn record_swap(swap: &Swap<'_>, op: Option<u64>, ctx: &mut Ctx<'_>) {
    let event = |kind, holder: &str, token| ServiceEvent::new(kind, swap.lock, holder, token, op);
    let before = swap.before;
    let previous = before.record.as_ref().map(|r| r.holder.as_str());
    match (previous, swap.record) {
        (Some(old), Some(new))
            if old == new.holder && swap.acquired_version == before.acquired_version =>
        {
            ctx.record(event(ServiceEventKind::Renew, old, swap.acquired_version));
        }
        (previous, Some(new)) => {
            if let Some(old) = previous {
                let mut revoke = event(ServiceEventKind::Revoke, old, before.acquired_version);
                revoke.detail = Some(format!("taken over by {}", new.holder));
                ctx.record(revoke);
            }
            ctx.record(event(
                ServiceEventKind::Grant,
                &new.holder,
                swap.acquired_version,
            ));
        }
        (previous, None) => {
            let holder = previous.unwrap_or_default();
            ctx.record(event(
                ServiceEventKind::Release,
                holder,
                before.acquired_version,
            ));
        }
    }
}
