//! The design API: what a lock design implements so that fencesim can simulate it.
//!
//! A design is a lock service and the client protocol that talks to it. Both are sans-IO state
//! machines, in the style of stateright's `Actor` with its `Out` effects and raft-rs's
//! `step`/`ready`: the harness hands them a message or a timer together with `now` read from
//! the node's own clocks ([`Now`]), and they answer with effects pushed into a context
//! ([`NodeCtx`], [`ClientCtx`]). They never sleep, read a clock, spawn a task or draw a random
//! number of their own, so the harness can run them under its simulated network, clocks and
//! faults, one seed at a time, and get the same history every time.
//!
//! - A lock-service node implements [`LockNode`]: it starts from what its disk kept across a
//!   crash ([`Durability`] says whether a write is synced), and its effects send messages, set
//!   timers, persist state and record the ground-truth [`ServiceEvent`]s (grant, renew,
//!   release, expire, revoke) that the history's service events and the checkers come from.
//! - The client side implements [`ClientProtocol`]: the harness's workload loop begins each
//!   lock operation ([`LockOp`]: acquire, renew, release) as one Jepsen operation, and the
//!   protocol completes it ([`OpResult`]: ok, fail, or info when the outcome is unknown) after
//!   as many requests, to as many nodes, as it needs. It also says what its client believes
//!   about its own lease ([`ClientCtx::believe`], [`ClientCtx::lost`]), the client view the
//!   mutual-exclusion check judges.
//! - Messages are the design's own type ([`DesignMessage`]); each names its [`MessageKind`], so
//!   `hold` faults and the targeted nemesis can aim at it.
//!
//! The harness keeps everything else: transport and message faults, per-node clocks, crash and
//! restart with fsync semantics, the workload loop and its safepoints, the nemesis, history,
//! checkers, explore, shrink and replay. This crate has no dependency on madsim, async code,
//! clocks or randomness; `cargo tree -p fencesim-design` shows it.
//!
//! # Where it stands
//!
//! All five built-in designs (the single lease service, primary-backup, Raft, Redlock and the
//! lease record) and the built-in resource run on this API, each one value ([`Design`],
//! [`ResourceDesign`]); the simulator and the scenario parser name no design and none of a
//! design's nodes. A design of your own plugs in the same way: the `fencesim` crate's
//! `Registry::with_design` adds it beside the built-ins
//! (docs/designs.md in the repository walks through one, and docs/design-api.md says what is
//! left).
//!
//! Some limits of the API as it is:
//! - A client's timers (`after_ms`) run on simulated true time: its clock's drift or a clock
//!   jump moves what `now` reads, not when a timer fires. A node can also set a timer at a
//!   [`Deadline`] on its own clock, which follows the clock's faults.
//! - [`MessageKind`] is a closed list: a design's messages travel as the lock operations they
//!   implement (or as `raft`, `replicate`, `redirect`).
//! - Clients address the service's nodes by index in [`ClientInfo::service_nodes`]; nodes
//!   address anyone by name, and learn the service's node names from
//!   [`NodeStart::service_nodes`].
//! - A message that answers no request arrives through `on_message` only while an operation
//!   is in progress; one that arrives between operations is read at the next one, unless the
//!   workload's own read or write of the resource skips past it first (it is then dropped).
//! - Clients may not take a name of the scenario's design's nodes (its `ServiceShape::nodes`),
//!   nor `resource`, `leader`, `nemesis` or `network`; the harness knows no other design's
//!   node names.
#![deny(missing_docs)]

pub mod client;
pub mod design;
pub mod event;
pub mod explore;
pub mod host;
pub mod knobs;
pub mod message;
pub mod node;
pub mod resource;
pub mod safe;
pub mod spec;
pub mod time;

pub use client::{
    ClientCtx, ClientEffect, ClientEnv, ClientInfo, ClientProtocol, LockOp, OpResult,
};
pub use design::{Design, ResourceDesign, Settings};
pub use event::{HeldLease, KeyEvent, KeyEventKind, ServiceEvent, ServiceEventKind};
pub use explore::Explorable;
pub use host::{Disk, NodeHost};
pub use knobs::{KnobError, KnobValue, Knobs, Span, MAX_KNOB_NUMBER};
pub use message::{DesignMessage, MessageKind, Origin, RequestId};
pub use node::{Durability, FsyncPolicy, LockNode, NodeCtx, NodeEffect, NodeStart};
pub use resource::{FencedResource, ReadValue, ResourceModeSpec, WriteDecision, WriteOutcome};
pub use safe::{SafeKnob, SafeValue};
pub use spec::{
    Catalog, ClientWorkload, DesignSpec, Designs, Register, Safepoint, SafepointSide, ServiceShape,
    TokenKind,
};
pub use time::{Clock, Deadline, Now, TimerId};
