//! The lease-record design: leases as records in a linearizable compare-and-swap store, with
//! expiry judged by the candidates rather than by the store. It is the design of Kubernetes
//! `coordination.k8s.io` Lease objects with client-go's leader election, and of the DynamoDB
//! Lock Client.
//!
//! The store only versions records ([`store`]). A candidate reads the record and remembers,
//! on its own clock, when it first saw the current version; if the version has not changed for
//! a lease duration, it judges the holder gone and takes the record over by compare-and-swap on
//! that version ([`candidate`]). The holder renews by swapping in a new version before others
//! judge it gone. Which duration a candidate waits is the crux of case K11: the one the holder
//! recorded, or the candidate's own configured one (the defect). Claiming by an unconditional
//! update instead of a compare-and-swap is case K21.
//!
//! The fencing token of a lease is the record version at which its holder acquired it: it
//! grows with every takeover, as etcd's revisions do.
//!
//! On fencesim's design API, the store is one [`LockNode`](fencesim_design::LockNode)
//! ([`StoreNode`]), and the candidates' side a [`ClientProtocol`](fencesim_design::ClientProtocol)
//! ([`RecordClient`]); they speak [`RecordMessage`].
#![deny(missing_docs)]

pub mod candidate;
mod client;
mod message;
mod node;
mod spec;
pub mod store;

pub use candidate::{Candidate, ExpiryJudgement, Judgement};
pub use client::{RecordClient, Takeover, CLAIM_SENT, RENEWAL_SENT};
pub use message::{Purpose, RecordMessage};
pub use node::StoreNode;
pub use spec::{record_client_settings, LeaseRecordDesign, STORE_NODE};
pub use store::{CasOutcome, LeaseRecord, RecordStore, Versioned};
