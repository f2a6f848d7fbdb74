//! The `resource` node's decisions as the history records them: each write or delete it
//! decided becomes an `accept` or `reject` event, in the order it decided them, the order the
//! checker judges by; and the safepoint after it, which event-triggered faults strike at.

use fencesim_design::WriteOutcome;
use fencesim_history::{Event, EventKind};
use fencesim_scenario::{NodeEvent, RESOURCE_NODE};

/// A write (`delete: false`) or delete of `key` by `holder` with `token`, within client
/// operation `op`, that the resource decided as `outcome`: its history event, and the
/// safepoint after it (`accept` or `reject`).
pub fn mutation_event(
    key: &str,
    holder: &str,
    token: Option<u64>,
    op: Option<u64>,
    delete: bool,
    outcome: &WriteOutcome,
) -> (Event, NodeEvent) {
    let (kind, highest, after) = match *outcome {
        WriteOutcome::Accepted { highest } => (EventKind::Accept, highest, NodeEvent::Accept),
        WriteOutcome::Rejected { highest, .. } => (EventKind::Reject, highest, NodeEvent::Reject),
    };
    let event = Event {
        node: RESOURCE_NODE.into(),
        key: Some(key.into()),
        holder: Some(holder.into()),
        token,
        highest: Some(highest),
        op,
        detail: delete.then(|| "delete".to_owned()),
        ..Event::new(kind)
    };
    (event, after)
}

#[cfg(test)]
mod tests {
    use fencesim_design::WriteOutcome;
    use fencesim_history::EventKind;
    use fencesim_scenario::NodeEvent;

    use super::mutation_event;

    #[test]
    fn a_rejected_delete_is_a_reject_event_with_its_detail() {
        let outcome = WriteOutcome::Rejected {
            presented: 3,
            highest: 7,
        };
        let (event, after) = mutation_event("k", "client-2", Some(3), Some(4), true, &outcome);
        assert_eq!(after, NodeEvent::Reject);
        assert_eq!(event.event, EventKind::Reject);
        assert_eq!(
            (event.token, event.highest, event.op),
            (Some(3), Some(7), Some(4))
        );
        assert_eq!(event.detail.as_deref(), Some("delete"));
        assert_eq!(event.holder.as_deref(), Some("client-2"));
    }
}
