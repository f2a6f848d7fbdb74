//! What a history's records must say of themselves and of each other, whichever format they
//! were read from: each record names what its kind is about (an accept its key, a grant its
//! lock, holder and token), and the operations pair up as Jepsen's processes do. Both readers
//! call [`records`] once a file is read, so a JSON Lines history and a Jepsen EDN history are
//! refused for the same inconsistencies, each naming the file's lines.
//!
//! Without it, a record that says nothing was passed over by every check (a lone `accept`
//! without key or token made a history valid), and operations that do not pair (a `write`
//! invoked and completed by an `ok` `read`, one operation completed twice, a completion with
//! no invocation) were paired as best they could be and judged.

use std::collections::BTreeMap;

use crate::{Entry, Event, EventKind, History, HistoryError, Op, OpFn, OpType, Phase};

/// Whether a format's completions name their own key or lock, or may carry the reader's
/// default for one they leave out.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Places {
    /// Every operation names its key or lock (JSON Lines): a completion on another key or lock
    /// than its invocation is refused.
    Named,
    /// A completion may leave its place out and get the reader's default (Jepsen EDN: a
    /// completion without `:value` is on `register` or `lock`, whatever its invocation was
    /// on). A completion on the default place matches any invocation; one on another place
    /// than its invocation's is refused.
    Defaulted {
        /// The key a read, write, cas or delete without one is on.
        key: &'static str,
        /// The lock an acquire, renew or release without one is on.
        lock: &'static str,
    },
}

/// Check every record of `history` on its own and against the others. `lines[i]` is the
/// 1-based line of the file where entry `i` starts, for the error, which names the line of
/// the record that does not fit and, where another record is involved, that record's line.
pub(crate) fn records(
    history: &History,
    lines: &[usize],
    places: Places,
) -> Result<(), HistoryError> {
    let line = |i: usize| lines.get(i).copied().unwrap_or(i + 1);
    let mut pairs = Pairs::default();
    for (i, entry) in history.entries.iter().enumerate() {
        let checked = match entry {
            Entry::Op(op) => op_fields(op).and_then(|()| pairs.add(i, op, history, places, line)),
            Entry::Event(e) => event_fields(e).and_then(|()| answers(e, history, line)),
        };
        checked.map_err(|message| HistoryError::Parse {
            line: line(i),
            message: crate::cap_message(message),
        })?;
    }
    Ok(())
}

/// What an operation must name to be judged at all: a read, write, cas or delete its key, a
/// lock operation its lock, a cas invocation the value it sets. Without them the checks would
/// pass over the operation in silence.
fn op_fields(op: &Op) -> Result<(), String> {
    let missing = |field: &str, why: &str| Err(format!("field `{field}`: missing: {why}"));
    match op.f {
        OpFn::Read | OpFn::Write | OpFn::Cas | OpFn::Delete if op.key.is_none() => {
            missing("key", "a read, write, cas or delete names the key it is on")
        }
        OpFn::Acquire | OpFn::Renew | OpFn::Release if op.lock.is_none() => missing(
            "lock",
            "an acquire, renew or release names the lock it is on",
        ),
        OpFn::Cas if op.op_type == OpType::Invoke && op.value.is_none() => {
            missing("value", "a cas invocation names the value it sets")
        }
        _ => Ok(()),
    }
}

/// What an event of each kind must carry for any check to judge it, as docs/history-format.md
/// lists the fields of each kind. The lease's end events (expire, revoke) may leave out the
/// holder, which the grant of their lock and token names; a resource's accept or reject may
/// leave out its token (a token-less mutation, which `unfenced-mutation` judges) and its
/// writer.
fn event_fields(e: &Event) -> Result<(), String> {
    let kind = e.event.as_str();
    let needs: &[(&str, bool)] = match e.event {
        EventKind::Grant | EventKind::Renew | EventKind::Release => &[
            ("lock", e.lock.is_some()),
            ("holder", e.holder.is_some()),
            ("token", e.token.is_some()),
        ],
        EventKind::Expire | EventKind::Revoke => {
            &[("lock", e.lock.is_some()), ("token", e.token.is_some())]
        }
        EventKind::Accept | EventKind::Reject => &[("key", e.key.is_some())],
        EventKind::Belief => &[
            ("phase", e.phase.is_some()),
            ("lock", e.lock.is_some()),
            ("token", e.token.is_some() || e.phase == Some(Phase::End)),
        ],
        EventKind::Leader => &[],
        EventKind::KeySet => &[
            ("lock", e.lock.is_some()),
            ("holder", e.holder.is_some()),
            ("token", e.token.is_some()),
            ("ttl_ms", e.ttl_ms.is_some()),
            ("nodes", e.nodes.is_some()),
        ],
        EventKind::KeyExtend => &[
            ("lock", e.lock.is_some()),
            ("holder", e.holder.is_some()),
            ("token", e.token.is_some()),
            ("ttl_ms", e.ttl_ms.is_some()),
        ],
        EventKind::KeyDelete | EventKind::KeyExpire => {
            &[("lock", e.lock.is_some()), ("token", e.token.is_some())]
        }
        EventKind::KeyRefuse => &[("lock", e.lock.is_some())],
        EventKind::FinalHeal => &[
            ("phase", e.phase.is_some()),
            (
                "window_ms",
                e.window_ms.is_some() || e.phase != Some(Phase::Start),
            ),
        ],
        _ => &[("phase", e.phase.is_some())],
    };
    let Some((field, _)) = needs.iter().find(|(_, present)| !present) else {
        // A lock spread over no nodes has no majority to judge by.
        if e.event == EventKind::KeySet && e.nodes == Some(0) {
            return Err(
                "field `nodes`: 0: a key-set names how many nodes the lock is spread over, at \
                 least 1"
                    .to_owned(),
            );
        }
        return Ok(());
    };
    let why = match e.event {
        EventKind::Grant | EventKind::Renew | EventKind::Release => {
            format!("a {kind} names the lock, holder and token of its lease")
        }
        EventKind::Expire | EventKind::Revoke => format!(
            "{} {kind} names the lock and token of the lease it ends",
            article(kind)
        ),
        EventKind::Accept | EventKind::Reject => {
            format!("{} {kind} names the key written", article(kind))
        }
        EventKind::Belief => {
            "a belief starts or ends (phase), on a lock, and a start names its token".to_owned()
        }
        EventKind::FinalHeal => {
            "a final-heal starts or ends (phase), and its start gives the window in which a \
             write is due"
                .to_owned()
        }
        EventKind::KeySet => "a key-set names the lock, holder, value (token), PX (ttl_ms) and \
                              how many nodes the lock is spread over (nodes)"
            .to_owned(),
        EventKind::KeyExtend => {
            "a key-extend names the lock, holder, value (token) and PX (ttl_ms)".to_owned()
        }
        EventKind::KeyDelete | EventKind::KeyExpire => {
            format!("a {kind} names the lock and the value (token) of the key it ends")
        }
        EventKind::KeyRefuse => "a key-refuse names the lock".to_owned(),
        _ => format!("a nemesis action ({kind}) starts or ends: phase \"start\" or \"end\""),
    };
    Err(format!("field `{field}`: missing: {why}"))
}

/// An event's `op` is the index of the invoke it answers: it must be one.
fn answers(e: &Event, history: &History, line: impl Fn(usize) -> usize) -> Result<(), String> {
    let Some(op) = e.op else {
        return Ok(());
    };
    let found = history
        .entries
        .binary_search_by_key(&op, |entry| entry.at().index)
        .ok();
    match found.map(|i| (i, &history.entries[i])) {
        Some((i, Entry::Op(invoke))) if invoke.op_type == OpType::Invoke => {
            match answered_by(e.event) {
                Some(fns) if !fns.contains(&invoke.f) => Err(format!(
                    "field `op`: a {} answers {}, found {op}, which is {} at line {}",
                    e.event.as_str(),
                    fns.iter()
                        .map(|f| f.as_str())
                        .collect::<Vec<_>>()
                        .join(" or "),
                    describe(&history.entries[i]),
                    line(i)
                )),
                _ => Ok(()),
            }
        }
        Some((i, other)) => Err(format!(
            "field `op`: expected the index of the invoke this {} answers, found {op}, which is \
             {} at line {}",
            e.event.as_str(),
            describe(other),
            line(i)
        )),
        None => Err(format!(
            "field `op`: expected the index of the invoke this {} answers, found {op}, which no \
             entry has (the history has {} entries)",
            e.event.as_str(),
            history.entries.len()
        )),
    }
}

/// The operations an event of `kind` may answer (a grant an acquire, an accept a write), or
/// `None` for a kind that answers none in particular.
fn answered_by(kind: crate::EventKind) -> Option<&'static [OpFn]> {
    use crate::EventKind as K;
    match kind {
        K::Grant => Some(&[OpFn::Acquire]),
        K::Renew => Some(&[OpFn::Renew]),
        K::Release => Some(&[OpFn::Release]),
        K::Accept | K::Reject => Some(&[OpFn::Write, OpFn::Cas, OpFn::Delete]),
        _ => None,
    }
}

/// "an ok read", "a grant event": a record in a few words.
fn describe(entry: &Entry) -> String {
    match entry {
        Entry::Op(op) => op_words(op),
        Entry::Event(e) => format!("a {} event", e.event.as_str()),
    }
}

/// "an" before a vowel, "a" otherwise.
fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

/// "an ok read", "an invoke of a write".
fn op_words(op: &Op) -> String {
    let (t, f) = (op.op_type.as_str(), op.f.as_str());
    if op.op_type == OpType::Invoke {
        format!("an invoke of {} {f}", article(f))
    } else {
        format!("{} {t} {f}", article(t))
    }
}

/// The place an operation is on: its key or its lock, with the word for it.
fn place(op: &Op) -> (&'static str, Option<&str>) {
    match op.f {
        OpFn::Read | OpFn::Write | OpFn::Cas | OpFn::Delete => ("key", op.key.as_deref()),
        OpFn::Acquire | OpFn::Renew | OpFn::Release => ("lock", op.lock.as_deref()),
    }
}

/// Jepsen's processes, followed through the history: each runs one operation at a time, so
/// an invocation opens the process's operation and the next completion of that process ends
/// it. Positions are entry numbers.
#[derive(Default)]
struct Pairs {
    /// Per process, its invocation still open.
    open: BTreeMap<u64, usize>,
    /// Per process, its last operation completed: (invocation, completion).
    done: BTreeMap<u64, (usize, usize)>,
}

impl Pairs {
    /// Follow entry `i`, the operation `op`; why it does not fit, if it does not.
    ///
    /// An invocation on a process whose last operation ended `info` is let through: Jepsen
    /// gives a crashed process a new number, but a history that reuses it is judged the same,
    /// since the checks keep an `info` operation pending from its invoke to the end of the
    /// history, whichever process comes next.
    fn add(
        &mut self,
        i: usize,
        op: &Op,
        history: &History,
        places: Places,
        line: impl Fn(usize) -> usize,
    ) -> Result<(), String> {
        let op_at = |j: usize| match &history.entries[j] {
            Entry::Op(o) => o,
            Entry::Event(_) => unreachable!("Pairs holds operations only"),
        };
        let p = op.process;
        if op.op_type == OpType::Invoke {
            if let Some(&open) = self.open.get(&p) {
                return Err(format!(
                    "{} on process {p}, whose {} invoked at line {} has not completed: a process \
                     runs one operation at a time (Jepsen's rule), so a completion is missing or \
                     two processes share a number",
                    op_words(op),
                    op_at(open).f.as_str(),
                    line(open)
                ));
            }
            self.open.insert(p, i);
            return Ok(());
        }
        let Some(invoked) = self.open.remove(&p) else {
            let before = match self.done.get(&p) {
                Some(&(inv, done)) => format!(
                    "process {p}'s {} invoked at line {} was already completed ({}) at line {}",
                    op_at(inv).f.as_str(),
                    line(inv),
                    op_at(done).op_type.as_str(),
                    line(done)
                ),
                None => format!("process {p} invoked nothing before it"),
            };
            return Err(format!("{} completes no operation: {before}", op_words(op)));
        };
        let invoke = op_at(invoked);
        if invoke.f != op.f {
            return Err(format!(
                "{} on process {p} completes its {} invoked at line {}: a completion has its \
                 invocation's f",
                op_words(op),
                invoke.f.as_str(),
                line(invoked)
            ));
        }
        let (word, here) = place(op);
        let (_, there) = place(invoke);
        let defaulted = match places {
            Places::Named => false,
            Places::Defaulted { key, lock } => here == Some(if word == "key" { key } else { lock }),
        };
        if here != there && !defaulted {
            let name = |p: Option<&str>| p.map_or("none".to_owned(), |p| format!("{p:?}"));
            return Err(format!(
                "{} on {word} {} completes process {p}'s {} on {word} {} invoked at line {}: a \
                 completion is on its invocation's {word}",
                op_words(op),
                name(here),
                invoke.f.as_str(),
                name(there),
                line(invoked)
            ));
        }
        self.done.insert(p, (invoked, i));
        Ok(())
    }
}
