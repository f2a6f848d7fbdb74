//! Scripted faults (`[[faults]]`): what the nemesis does, to whom, when, and for how long.
//!
//! The fault kinds follow Jepsen's nemeses (pause, partition, clock, kill) and the failure
//! schedules of ../cases: a fault has an [`Action`], a [`Trigger`] and, for faults that are
//! undone, a `duration_ms` after which the nemesis reverts it.

use serde::{Deserialize, Serialize};

use crate::model::{LatencyRange, MessageKind, NodeEvent};

/// When a node-bound fault fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trigger {
    /// At a true time, simulated ms.
    At {
        /// Simulated ms since the start.
        at_ms: u64,
    },
    /// Right after the node's `nth` (1-based) occurrence of `event` at or after
    /// `count_from_ms`.
    After {
        /// The event.
        event: NodeEvent,
        /// Which occurrence.
        nth: u64,
        /// Occurrences are counted from this true time, simulated ms (0: from the start).
        /// `nth = 1, count_from_ms = 20000` is the first occurrence at or after 20 s, however
        /// many came before: a fault aimed at a time that still strikes at a node's event.
        #[serde(default, skip_serializing_if = "is_zero")]
        count_from_ms: u64,
    },
    /// Right before the node's `nth` occurrence of `event` at or after `count_from_ms`.
    Before {
        /// The event.
        event: NodeEvent,
        /// Which occurrence.
        nth: u64,
        /// As for [`Trigger::After`].
        #[serde(default, skip_serializing_if = "is_zero")]
        count_from_ms: u64,
    },
}

fn is_zero(ms: &u64) -> bool {
    *ms == 0
}

/// Which messages a network fault applies to: `None` matches any node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkSel {
    /// Sender, or any.
    pub from: Option<String>,
    /// Receiver, or any.
    pub to: Option<String>,
}

impl LinkSel {
    /// Whether a message from `src` to `dst` is selected.
    pub fn matches(&self, src: &str, dst: &str) -> bool {
        self.from.as_deref().is_none_or(|f| f == src) && self.to.as_deref().is_none_or(|t| t == dst)
    }
}

/// Which links a partition cuts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cut {
    /// Every link to and from the node.
    Isolate(String),
    /// Nodes talk only if they share a group; a node in no group keeps every link (so a node
    /// listed in two groups bridges them, as Jepsen's bridge nemesis does).
    Groups(Vec<Vec<String>>),
    /// Messages from `from` to `to` only: one-way link loss.
    OneWay {
        /// Sender whose messages are lost.
        from: String,
        /// Receiver that no longer hears `from`.
        to: String,
    },
}

impl Cut {
    /// Whether this cut stops a message from `src` to `dst`.
    pub fn blocks(&self, src: &str, dst: &str) -> bool {
        match self {
            Cut::Isolate(n) => src != dst && (src == n || dst == n),
            Cut::Groups(groups) => {
                let member = |n: &str| groups.iter().any(|g| g.iter().any(|m| m == n));
                let share = groups
                    .iter()
                    .any(|g| g.iter().any(|m| m == src) && g.iter().any(|m| m == dst));
                member(src) && member(dst) && !share
            }
            Cut::OneWay { from, to } => src == from && dst == to,
        }
    }
}

/// A fault's kind: the `kind` of a `[[faults]]` entry, of an [`Action`], and what a random
/// nemesis draws from (`[nemesis] kinds`). Every place that must decide something per kind
/// (what a kind requires, whether a random nemesis draws it, how it is drawn and probed, its
/// live form) matches on it without a wildcard, so a new kind is a compile error at each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// A process pause (GC, VM migration, `SIGSTOP`): [`Action::Pause`].
    Pause,
    /// One message held back: [`Action::Hold`].
    Hold,
    /// Every message of a kind held back: [`Action::HoldAll`].
    HoldAll,
    /// Extra delay on links: [`Action::Latency`].
    Latency,
    /// Messages dropped: [`Action::Loss`].
    Loss,
    /// Messages delivered twice: [`Action::Duplicate`].
    Duplicate,
    /// Messages delivered out of order: [`Action::Reorder`].
    Reorder,
    /// Links cut: [`Action::Partition`].
    Partition,
    /// Every partition ended: [`Action::Heal`].
    Heal,
    /// A wall clock stepped: [`Action::ClockJump`].
    ClockJump,
    /// A wall clock offset for a while: [`Action::ClockSkew`].
    ClockSkew,
    /// A clock running fast or slow: [`Action::ClockDrift`].
    ClockDrift,
    /// A wall clock flipping between two offsets: [`Action::ClockStrobe`].
    ClockStrobe,
    /// A process killed (and restarted after `duration_ms`): [`Action::Crash`].
    Crash,
    /// A crashed process started again: [`Action::Restart`].
    Restart,
    /// A client's renewals held back: [`Action::StallRenewals`].
    StallRenewals,
    /// A client's session taken away at the service: [`Action::Deregister`].
    Deregister,
    /// The lease service restored from an old backup: [`Action::Restore`].
    Restore,
    /// The random nemesis's last act: [`Action::FinalHeal`].
    FinalHeal,
}

impl FaultKind {
    /// Every kind, in the order the scenario format's documentation lists them.
    pub const ALL: [FaultKind; 19] = [
        FaultKind::Pause,
        FaultKind::Hold,
        FaultKind::HoldAll,
        FaultKind::Latency,
        FaultKind::Loss,
        FaultKind::Duplicate,
        FaultKind::Reorder,
        FaultKind::Partition,
        FaultKind::Heal,
        FaultKind::ClockJump,
        FaultKind::ClockSkew,
        FaultKind::ClockDrift,
        FaultKind::ClockStrobe,
        FaultKind::Crash,
        FaultKind::Restart,
        FaultKind::StallRenewals,
        FaultKind::Deregister,
        FaultKind::Restore,
        FaultKind::FinalHeal,
    ];

    /// The name used in files (`clock-jump`).
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Pause => "pause",
            FaultKind::Hold => "hold",
            FaultKind::HoldAll => "hold-all",
            FaultKind::Latency => "latency",
            FaultKind::Loss => "loss",
            FaultKind::Duplicate => "duplicate",
            FaultKind::Reorder => "reorder",
            FaultKind::Partition => "partition",
            FaultKind::Heal => "heal",
            FaultKind::ClockJump => "clock-jump",
            FaultKind::ClockSkew => "clock-skew",
            FaultKind::ClockDrift => "clock-drift",
            FaultKind::ClockStrobe => "clock-strobe",
            FaultKind::Crash => "crash",
            FaultKind::Restart => "restart",
            FaultKind::StallRenewals => "stall-renewals",
            FaultKind::Deregister => "deregister",
            FaultKind::Restore => "restore",
            FaultKind::FinalHeal => "final-heal",
        }
    }

    /// Whether a random nemesis may draw it (`[nemesis] kinds`): every timed fault that
    /// undoes itself and needs nothing the nemesis cannot choose. Targeted faults (a held
    /// message, a stalled renewal, a deregistered session, a restore) and the heals are
    /// scripted only.
    pub fn is_drawable(self) -> bool {
        match self {
            FaultKind::Pause
            | FaultKind::Partition
            | FaultKind::Crash
            | FaultKind::ClockJump
            | FaultKind::ClockSkew
            | FaultKind::ClockDrift
            | FaultKind::ClockStrobe
            | FaultKind::Loss
            | FaultKind::Duplicate
            | FaultKind::Reorder
            | FaultKind::Latency
            | FaultKind::HoldAll => true,
            FaultKind::Hold
            | FaultKind::Heal
            | FaultKind::Restart
            | FaultKind::StallRenewals
            | FaultKind::Deregister
            | FaultKind::Restore
            | FaultKind::FinalHeal => false,
        }
    }

    /// Whether it moves a node's clock (`clock-*`).
    pub fn is_clock(self) -> bool {
        matches!(
            self,
            FaultKind::ClockJump
                | FaultKind::ClockSkew
                | FaultKind::ClockDrift
                | FaultKind::ClockStrobe
        )
    }
}

impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a fault does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Action {
    /// Freeze the node (a GC or VM pause): its timers fire late and its messages queue, but
    /// messages it already sent are unaffected. Undone after `duration_ms`.
    Pause {
        /// The node.
        node: String,
    },
    /// Keep the `nth` (1-based) `message` sent by `from` in the network for `duration_ms`
    /// instead of its drawn latency (its trigger is unused: the message picks the moment).
    Hold {
        /// The sender.
        from: String,
        /// The message kind.
        message: MessageKind,
        /// Which one of that sender's messages of that kind.
        nth: u64,
        /// If set, the network also delivers a copy of it this many ms after its send: a
        /// duplicate of this one message (a verify counterexample's duplication, written as
        /// a scenario).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        copy_ms: Option<u64>,
    },
    /// Hold every `message` (optionally only from `from`) sent during the window until the
    /// window ends.
    HoldAll {
        /// The message kind.
        message: MessageKind,
        /// Only this sender's, if set.
        from: Option<String>,
    },
    /// Change the latency of the selected links for the window.
    Latency {
        /// The links.
        link: LinkSel,
        /// The latency inside the window.
        latency_ms: LatencyRange,
    },
    /// Drop each selected message with probability `rate` during the window.
    Loss {
        /// The links.
        link: LinkSel,
        /// Probability in [0, 1].
        rate: f64,
    },
    /// Deliver each selected message twice with probability `rate` during the window.
    Duplicate {
        /// The links.
        link: LinkSel,
        /// Probability in [0, 1].
        rate: f64,
    },
    /// Add a random extra delay in [0, window_ms] to each message during the window, so
    /// messages overtake each other.
    Reorder {
        /// The largest extra delay, ms.
        window_ms: u64,
    },
    /// Cut links. Undone after `duration_ms`, or by a `heal`.
    Partition {
        /// Which links.
        cut: Cut,
    },
    /// Undo every partition in force.
    Heal,
    /// Step the node's wall clock by `delta_ms` (either sign). Instantaneous.
    ClockJump {
        /// The node.
        node: String,
        /// The step, local ms.
        delta_ms: i64,
    },
    /// Step the node's wall clock so it reads true time + `offset_ms`; after `duration_ms`, if
    /// set, the step is taken back (jumps made meanwhile stay).
    ClockSkew {
        /// The node.
        node: String,
        /// Offset from true time, ms.
        offset_ms: i64,
    },
    /// Make the node's clocks (monotonic and wall: one oscillator) run `ppm` parts per million
    /// faster (slower, if negative) than they do; overlapping drifts add up. Undone after
    /// `duration_ms` if set.
    ClockDrift {
        /// The node.
        node: String,
        /// Rate error, parts per million.
        ppm: i64,
    },
    /// Flip the node's wall clock between its offset and its offset + `offset_ms` every
    /// `period_ms` for `duration_ms`, then leave it where it was (Jepsen's strobe).
    ClockStrobe {
        /// The node.
        node: String,
        /// The size of each flip, ms.
        offset_ms: i64,
        /// Time between flips, ms.
        period_ms: u64,
    },
    /// Kill the node: volatile state and unsynced writes are lost. Restarted after
    /// `duration_ms` if set, else by a `restart`.
    Crash {
        /// The node.
        node: String,
    },
    /// Stall the client's keepalive: it sends no renewal while the fault is in force, but
    /// its work goes on (a renewal thread starved of CPU, case K18). Undone after
    /// `duration_ms`.
    StallRenewals {
        /// The client.
        node: String,
    },
    /// A maintenance job (a dead-node reaper) deregisters the client: the lock service is
    /// asked to end every lease the client holds (case K16). Whether it does, while the
    /// client still renews, is the service's `reaper` knob. Instantaneous.
    Deregister {
        /// The client.
        node: String,
    },
    /// Start a crashed node again.
    Restart {
        /// The node.
        node: String,
    },
    /// The final heal: every fault ends, every node resumes (and restarts if crashed), every
    /// wall clock is set back to true time and all drift stops (monotonic clocks keep the offset
    /// drift gave them: they never step). Afterwards a fenced write must be accepted within
    /// `window_ms`. Drawn by `[nemesis]`, or written as `kind = "final-heal"` in `[[faults]]`
    /// (at most one, and not beside a `[nemesis]`), as a drawn schedule is when written out.
    FinalHeal {
        /// The recovery window, simulated ms.
        window_ms: u64,
    },
    /// Crash the lease service and bring it back from its durable state as it was at
    /// `snapshot_at_ms` (a backup restore).
    Restore {
        /// The node.
        node: String,
        /// The moment whose synced state is restored, simulated ms.
        snapshot_at_ms: u64,
    },
}

impl Action {
    /// Its kind.
    pub fn kind(&self) -> FaultKind {
        match self {
            Action::Pause { .. } => FaultKind::Pause,
            Action::Hold { .. } => FaultKind::Hold,
            Action::HoldAll { .. } => FaultKind::HoldAll,
            Action::Latency { .. } => FaultKind::Latency,
            Action::Loss { .. } => FaultKind::Loss,
            Action::Duplicate { .. } => FaultKind::Duplicate,
            Action::Reorder { .. } => FaultKind::Reorder,
            Action::Partition { .. } => FaultKind::Partition,
            Action::Heal => FaultKind::Heal,
            Action::ClockJump { .. } => FaultKind::ClockJump,
            Action::ClockSkew { .. } => FaultKind::ClockSkew,
            Action::ClockDrift { .. } => FaultKind::ClockDrift,
            Action::ClockStrobe { .. } => FaultKind::ClockStrobe,
            Action::Crash { .. } => FaultKind::Crash,
            Action::Restart { .. } => FaultKind::Restart,
            Action::StallRenewals { .. } => FaultKind::StallRenewals,
            Action::Deregister { .. } => FaultKind::Deregister,
            Action::Restore { .. } => FaultKind::Restore,
            Action::FinalHeal { .. } => FaultKind::FinalHeal,
        }
    }

    /// The same action aimed at `node` instead (resolving `leader` when the fault starts).
    pub fn retarget(&self, node: &str) -> Action {
        let mut action = self.clone();
        match &mut action {
            Action::Pause { node: n }
            | Action::ClockJump { node: n, .. }
            | Action::ClockSkew { node: n, .. }
            | Action::ClockDrift { node: n, .. }
            | Action::ClockStrobe { node: n, .. }
            | Action::Crash { node: n }
            | Action::Restart { node: n }
            | Action::StallRenewals { node: n }
            | Action::Deregister { node: n }
            | Action::Restore { node: n, .. }
            | Action::Partition {
                cut: Cut::Isolate(n),
            } => *n = node.to_owned(),
            // Aimed at links, messages or the whole network, not at one node: unchanged. Each
            // kind is named, so that a new one must say which it is.
            Action::Hold { .. }
            | Action::HoldAll { .. }
            | Action::Latency { .. }
            | Action::Loss { .. }
            | Action::Duplicate { .. }
            | Action::Reorder { .. }
            | Action::Partition {
                cut: Cut::Groups(_) | Cut::OneWay { .. },
            }
            | Action::Heal
            | Action::FinalHeal { .. } => {}
        }
        action
    }

    /// The node the action is aimed at, if it is aimed at one.
    pub fn node(&self) -> Option<&str> {
        match self {
            Action::Pause { node }
            | Action::ClockJump { node, .. }
            | Action::ClockSkew { node, .. }
            | Action::ClockDrift { node, .. }
            | Action::ClockStrobe { node, .. }
            | Action::Crash { node }
            | Action::Restart { node }
            | Action::StallRenewals { node }
            | Action::Deregister { node }
            | Action::Restore { node, .. } => Some(node),
            Action::Partition {
                cut: Cut::Isolate(node),
            } => Some(node),
            Action::Hold { .. }
            | Action::HoldAll { .. }
            | Action::Latency { .. }
            | Action::Loss { .. }
            | Action::Duplicate { .. }
            | Action::Reorder { .. }
            | Action::Partition {
                cut: Cut::Groups(_) | Cut::OneWay { .. },
            }
            | Action::Heal
            | Action::FinalHeal { .. } => None,
        }
    }
}

/// A scripted fault.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fault {
    /// What it does.
    #[serde(flatten)]
    pub action: Action,
    /// When it starts.
    pub trigger: Trigger,
    /// How long until the nemesis undoes it (`None`: it stays, or it is instantaneous).
    pub duration_ms: Option<u64>,
}
