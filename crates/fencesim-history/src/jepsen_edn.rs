//! Jepsen's EDN history form: one operation map per line, as `jepsen.store` writes
//! `history.edn`, so that fencesim's histories can be checked by Knossos and Elle and histories
//! recorded by Jepsen can be checked by fencesim.
//!
//! An operation is written as
//! `{:index 4, :time 1028001082, :process 0, :type :invoke, :f :write, :value ["register" "client-1/1"], :token 1, :node "client-1"}`:
//! reads and writes carry Jepsen's independent-key tuple `[key value]` (a read's value is what
//! it saw, `nil` before a write), acquire, renew and release carry `[lock token]`, and the
//! fencing token, the client node and any error ride along as extra keys, which Jepsen's
//! checkers ignore. Service and nemesis events are not operations: the nemesis's are written as
//! `:process :nemesis` `:info` operations (`:f :start-pause`, `:value "client-1"`), the others
//! are left out. Reading ignores `:nemesis` operations; a history read back has client
//! operations only, and the checker says which checks that leaves it unable to run.

use std::collections::btree_map::{self, BTreeMap};
use std::io::{self, Write};

use crate::edn::{parse_all, Edn, Node};
use crate::{Entry, Event, Header, History, HistoryError, Name, Op, OpFn, OpType, Phase, Stamp};

fn kw(name: &str) -> Node {
    Node::new(Edn::Keyword(name.to_owned()))
}

fn int(n: u64) -> Node {
    // Indexes, times, processes and tokens of a history fit an i64; a larger one (a token of
    // 2^63 or more) is written as a big integer rather than wrapped.
    Node::new(i64::try_from(n).map_or_else(|_| Edn::BigInt(n.to_string()), Edn::Int))
}

fn string_or_nil(s: Option<&str>) -> Node {
    Node::new(s.map_or(Edn::Nil, |s| Edn::Str(s.to_owned())))
}

fn int_or_nil(n: Option<u64>) -> Node {
    n.map_or(Node::new(Edn::Nil), int)
}

fn map(entries: Vec<(&str, Node)>) -> Edn {
    Edn::Map(entries.into_iter().map(|(k, v)| (kw(k), v)).collect())
}

/// `op` as Jepsen's map. `fences`: whether its tokens are fencing tokens (a history whose
/// tokens are opaque lock values, ordered by acquisition, leaves them out: Jepsen's form has
/// no header to say so, and read back they would be judged as fences).
fn op_map(op: &Op, fences: bool) -> Edn {
    let value = match op.f {
        // A read of a register never written is `nil` too: Jepsen has no other way to say
        // "no value", and read back it matches any value (weaker, never wrong).
        OpFn::Read | OpFn::Write | OpFn::Delete => Edn::Vector(vec![
            string_or_nil(op.key.as_deref()),
            string_or_nil(op.value.as_deref()),
        ]),
        OpFn::Cas => Edn::Vector(vec![
            string_or_nil(op.key.as_deref()),
            Node::new(Edn::Vector(vec![
                string_or_nil(op.expected.as_deref()),
                string_or_nil(op.value.as_deref()),
            ])),
        ]),
        _ => Edn::Vector(vec![
            string_or_nil(op.lock.as_deref()),
            int_or_nil(op.token.filter(|_| fences)),
        ]),
    };
    let mut entries = vec![
        ("index", int(op.at.index)),
        ("time", int(op.at.time_ns)),
        ("process", int(op.process)),
        ("type", kw(op.op_type.as_str())),
        ("f", kw(op.f.as_str())),
        ("value", Node::new(value)),
        ("node", Node::new(Edn::Str(op.node.to_string()))),
    ];
    if let (Some(token), OpFn::Read | OpFn::Write | OpFn::Cas | OpFn::Delete, true) =
        (op.token, op.f, fences)
    {
        entries.push(("token", int(token)));
    }
    if let Some(ttl_ms) = op.ttl_ms {
        entries.push(("ttl-ms", int(ttl_ms)));
    }
    if let Some(error) = &op.error {
        entries.push(("error", Node::new(Edn::Str(error.clone()))));
    }
    map(entries)
}

fn nemesis_map(e: &Event) -> Option<Edn> {
    let phase = match e.phase? {
        Phase::Start => "start",
        Phase::End => "stop",
    };
    Some(map(vec![
        ("index", int(e.at.index)),
        ("time", int(e.at.time_ns)),
        ("process", kw("nemesis")),
        ("type", kw("info")),
        ("f", kw(&format!("{phase}-{}", e.event.as_str()))),
        ("value", string_or_nil(e.target.as_deref())),
    ]))
}

/// What [`write_jepsen_edn`] left out: the service and resource events that are not
/// operations (grants, expiries, accepts, rejects, beliefs), which the checks that judge
/// ground truth need.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EdnExport {
    /// Operation maps written (client operations and nemesis actions).
    pub written: u64,
    /// Events dropped, because Jepsen's form has no place for them.
    pub dropped_events: u64,
    /// Tokens left out, because they are opaque lock values (a history whose header says
    /// `token_order: acquisition`), which Jepsen's form would present as fencing tokens.
    pub dropped_tokens: u64,
}

/// Write `history` in Jepsen's EDN form, one map per line. Returns what was written and what
/// was dropped, so that a caller can say which checks the file can no longer support.
pub fn write_jepsen_edn(history: &History, mut out: impl Write) -> io::Result<EdnExport> {
    let mut export = EdnExport::default();
    let mut line = String::new();
    let fences = history.header.token_order.is_value();
    for entry in &history.entries {
        if let (Entry::Op(op), false) = (entry, fences) {
            export.dropped_tokens += u64::from(op.token.is_some());
        }
        let value = match entry {
            Entry::Op(op) => Some(op_map(op, fences)),
            Entry::Event(e) if e.event.is_nemesis() => nemesis_map(e),
            Entry::Event(_) => None,
        };
        let Some(value) = value else {
            export.dropped_events += 1;
            continue;
        };
        line.clear();
        value.write(&mut line);
        writeln!(out, "{line}")?;
        export.written += 1;
    }
    out.flush()?;
    Ok(export)
}

/// Read a Jepsen EDN history: operation maps (or tagged records of them, such as
/// `#jepsen.history.Op{...}`) as loose values, one or more per line or spread over several
/// lines, or inside one whole-file vector or list, as `jepsen.store` and Knossos's test data
/// write them. `name` becomes the header's scenario. Entries keep the file's `:index` when
/// every operation has one (then the indexes must increase in file order), and are numbered
/// in file order when none has; `:time` (ns) is kept when present (the index stands in for
/// it otherwise). Errors name the line where the offending value starts.
///
/// A register's values are read as their canonical text ([`crate::edn::Edn::canonical`]), so
/// that the checker, which compares text, compares them as Knossos does, with Clojure's `=`:
/// `#{1 2}` and `#{2 1}` are one value, the integer `5` and the string `"5"` two. Keys and
/// locks are names: a string as it is, another value by its canonical text; a string and
/// another value with the same text are an error rather than one key.
///
/// The reader ([`crate::edn`]) bounds its work by the input's size: numbers are never
/// expanded, nesting is at most [`crate::edn::MAX_DEPTH`] deep, and error messages quote at
/// most a few dozen characters of the input.
pub fn read_jepsen_edn(text: &str, name: &str) -> Result<History, HistoryError> {
    let nodes = parse_all(text).map_err(|e| HistoryError::Parse {
        line: e.line,
        message: format!("not EDN: column {}: {}", e.column, e.message),
    })?;
    let ops: Vec<Node> = match <[Node; 1]>::try_from(nodes) {
        // A whole-file vector or list of operations.
        Ok(
            [Node {
                value: Edn::Vector(items) | Edn::List(items),
                ..
            }],
        ) => items,
        Ok([one]) => vec![one],
        Err(nodes) => nodes,
    };
    let mut entries = Vec::with_capacity(ops.len());
    let mut lines = Vec::with_capacity(ops.len());
    let mut places = Places::default();
    let mut numbering = Numbering::default();
    for node in &ops {
        let err = |message: String| HistoryError::Parse {
            line: node.line,
            message,
        };
        let is_map = match &node.value {
            Edn::Map(_) => true,
            Edn::Tagged(_, inner) => matches!(inner.value, Edn::Map(_)),
            _ => false,
        };
        if !is_map {
            return Err(err(format!(
                "expected an operation map such as {{:process 0, :type :invoke, :f :read}}, \
                 found {}",
                found(node)
            )));
        }
        let index = numbering.index(node, entries.len() as u64).map_err(err)?;
        if let Some(op) = read_op(node, index, &mut places).map_err(err)? {
            entries.push(Entry::from(op));
            lines.push(node.line);
        }
    }
    let history = History {
        header: Header {
            format_version: crate::FORMAT_VERSION,
            scenario: name.to_owned(),
            seed: 0,
            tool_version: "jepsen-edn".to_owned(),
            token_order: Default::default(),
            untimed: false,
        },
        entries,
    };
    // The same records and pairing as JSON Lines; a completion without `:value` is on the
    // default key or lock.
    let defaults = crate::validate::Places::Defaulted {
        key: "register",
        lock: "lock",
    };
    crate::validate::records(&history, &lines, defaults)?;
    Ok(history)
}

/// The largest `:index` read: Jepsen's indexes are Java longs, and the checker takes
/// `u64::MAX` for the completion of an operation that never completed.
const MAX_INDEX: u64 = i64::MAX as u64;

/// How a file's operations are numbered: by their `:index` when every operation has one (as
/// `jepsen.store` writes them), so that a violation's witnesses name the operations as the
/// file does; by their position among the client operations when none has.
#[derive(Default)]
struct Numbering {
    /// Whether the first operation had an `:index`, and its line: every other must agree.
    first: Option<(bool, usize)>,
    /// The last `:index` read, and its operation's line.
    last: Option<(u64, usize)>,
}

impl Numbering {
    /// The index of operation `map` (nemesis operations included, so that the order of every
    /// `:index` is checked), `position` if the file numbers none.
    ///
    /// # Errors
    ///
    /// Some operations with an `:index` and some without, an `:index` that does not increase
    /// in file order (repeated or going back: a file spliced or reordered, whose witnesses
    /// would name the wrong operations), or one that is not a non-negative integer up to
    /// [`MAX_INDEX`]; each names the other operation's line. Renumbering such a file by
    /// position instead would make its witnesses disagree with the file's own numbers.
    fn index(&mut self, map: &Node, position: u64) -> Result<u64, String> {
        let field = map.get("index");
        let index = count(map, ":index", field)?;
        let (numbered, first) = *self.first.get_or_insert((index.is_some(), map.line));
        let advice = "give every operation an :index, or none (they are then numbered in file \
                      order)";
        let Some(index) = index else {
            if numbered {
                return Err(format!(
                    "field :index: missing, though the operation at line {first} has one: \
                     {advice}"
                ));
            }
            return Ok(position);
        };
        let at = field.map(|v| at(map, v)).unwrap_or_default();
        if !numbered {
            return Err(format!(
                "field :index{at}: present, though the operation at line {first} has none: \
                 {advice}"
            ));
        }
        if index > MAX_INDEX {
            return Err(format!(
                "field :index{at}: {index} is beyond Jepsen's indexes (at most {MAX_INDEX}, a \
                 Java long)"
            ));
        }
        if let Some((last, line)) = self.last.filter(|(last, _)| index <= *last) {
            let what = if index == last {
                "repeats"
            } else {
                "comes after"
            };
            return Err(format!(
                "field :index{at}: {index} {what} the :index {last} of the operation at line \
                 {line}: indexes must increase in file order"
            ));
        }
        self.last = Some((index, map.line));
        Ok(index)
    }
}

/// "a keyword :x", "an integer -1": a foreign value named by its type and a short rendering;
/// "nil" alone for nil.
fn found(v: &Node) -> String {
    if let Edn::Nil = v.value {
        return "nil".to_owned();
    }
    format!("{} {}", a_type(&v.value), v.value.brief())
}

/// "an integer", "a string": the value's type with its article.
fn a_type(v: &Edn) -> String {
    let name = v.type_name();
    let article = if name.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {name}")
}

/// A field that must be a non-negative integer when present (a token, a time): `None` if it
/// is absent or nil, an error naming the field if it is anything else, so that a token
/// written as a string or a float is not silently read as no token at all.
fn count(map: &Node, field: &str, v: Option<&Node>) -> Result<Option<u64>, String> {
    match v {
        None => Ok(None),
        Some(Node {
            value: Edn::Nil, ..
        }) => Ok(None),
        Some(v) => number(v).map(Some).ok_or_else(|| {
            format!(
                "field {field}{}: expected a non-negative integer, found {}",
                at(map, v),
                found(v)
            )
        }),
    }
}

/// The line a field's value starts on, when it is not the map's own.
fn at(map: &Node, v: &Node) -> String {
    if v.line != map.line && v.line > 0 {
        format!(" (line {})", v.line)
    } else {
        String::new()
    }
}

/// The keyword name of field `key` (`:type`, `:f`); an error saying what was `expected` (the
/// keywords it may be) and what was found, or that it is missing.
fn keyword<'m>(map: &'m Node, key: &str, expected: &str) -> Result<&'m str, String> {
    match map.get(key) {
        Some(Node {
            value: Edn::Keyword(k),
            ..
        }) => Ok(k),
        Some(other) => Err(format!(
            "field :{key}{}: expected {expected}, found {}",
            at(map, other),
            found(other)
        )),
        None => Err(format!("field :{key}: missing: expected {expected}")),
    }
}

/// What `:type` may be.
const TYPES: &str = ":invoke, :ok, :fail or :info";

/// What `:f` may be.
const FUNCTIONS: &str = ":acquire, :renew, :release, :read, :write, :cas or :delete";

/// A field kept as words (`:node`, `:error`): a string as it is, `nil` as nothing, anything
/// else as its EDN text.
fn text(v: &Node) -> Option<String> {
    match &v.value {
        Edn::Str(s) => Some(s.clone()),
        Edn::Nil => None,
        other => Some(other.to_string()),
    }
}

/// A register's value as the checker compares it: its canonical text ([`Edn::canonical`]),
/// which two values share exactly when Clojure's `=`, Knossos's comparison, calls them equal
/// (`#{1 2}` and `#{2 1}`, `1N` and `1`); `nil` is no value. A string keeps its quotes, so
/// that `"5"` never equals the integer `5`.
///
/// Reports show this text, not the file's: it is what the checker compared, so two values
/// shown alike were judged alike (`#{2 1}` is shown `#{1 2}`), and it is EDN, which reads
/// back as the value. Keeping the file's text as well would take another field in every
/// record, and in history.jsonl.
fn value_text(v: &Node) -> Option<String> {
    match &v.value {
        Edn::Nil => None,
        other => Some(other.canonical()),
    }
}

/// The keys and locks named so far, each with where it was first named: fencesim names a key
/// by text, a string as it is (`"k"` is `k`, as its own histories name keys) and another value
/// by its canonical text (`#{2 1}` is `#{1 2}`), so a string and another value with the same
/// text (the key `"1"` and the key `1`), which Clojure's `=` tells apart, would be judged as
/// one key. [`Places::name`] refuses that instead.
#[derive(Default)]
struct Places(BTreeMap<(bool, String), Named>);

/// The first naming of a key or lock.
struct Named {
    /// Named by a string (or by default).
    string: bool,
    /// As an error names it: `"1" (a string`, closed by the caller.
    described: String,
    line: usize,
}

impl Places {
    /// The name of the key (or, with `lock`, the lock) that `node` holds in `map`'s `:value`;
    /// the default one (`register`, `lock`) without `node` or for `nil`.
    fn name(&mut self, lock: bool, node: Option<&Node>, map: &Node) -> Result<Name, String> {
        let (what, default) = if lock {
            ("lock", "lock")
        } else {
            ("key", "register")
        };
        let node = node.filter(|n| !matches!(n.value, Edn::Nil));
        let (name, string) = match node.map(|n| &n.value) {
            None => (default.to_owned(), true),
            Some(Edn::Str(s)) => (s.clone(), true),
            Some(other) => (other.canonical(), false),
        };
        let describe = || match node {
            Some(n) => format!("{} ({}", n.value.brief(), a_type(&n.value)),
            None => format!("{default:?} (the default of a bare :value"),
        };
        let line = node.filter(|n| n.line > 0).map_or(map.line, |n| n.line);
        match self.0.entry((lock, name)) {
            btree_map::Entry::Vacant(slot) => {
                let name = Name::from(slot.key().1.as_str());
                slot.insert(Named {
                    string,
                    described: describe(),
                    line,
                });
                Ok(name)
            }
            btree_map::Entry::Occupied(first) if first.get().string != string => {
                let first = first.get();
                Err(format!(
                    "field :value{}: the {what} {}) and the {what} {}, line {}) have the same \
                     text, and fencesim would judge them as one {what}: use {what}s of one type",
                    node.map(|n| at(map, n)).unwrap_or_default(),
                    describe(),
                    first.described,
                    first.line
                ))
            }
            btree_map::Entry::Occupied(first) => Ok(Name::from(first.key().1.as_str())),
        }
    }
}

/// A non-negative integer: an `Int`, or a big integer (`5N`, or what the writer makes of a
/// value above `i64::MAX`) that fits a `u64`.
fn number(v: &Node) -> Option<u64> {
    match &v.value {
        Edn::Int(n) => u64::try_from(*n).ok(),
        Edn::BigInt(text) => text.trim_start_matches('+').parse().ok(),
        _ => None,
    }
}

/// A `:cas` value: `[from to]` on the default key, or `[key [from to]]` (Jepsen's independent
/// tuple, its second element a pair itself); its key and `[from to]` pair. A completion may
/// leave the value out (the invocation has it); an invocation may not.
fn cas_value(map: &Node, op_type: OpType) -> Result<(Option<&Node>, Option<&[Node]>), String> {
    fn pair(v: &Node) -> Option<&[Node]> {
        match &v.value {
            Edn::Vector(p) | Edn::List(p) if p.len() == 2 => Some(p.as_slice()),
            _ => None,
        }
    }
    let v = match map.get("value") {
        None
        | Some(Node {
            value: Edn::Nil, ..
        }) if op_type != OpType::Invoke => return Ok((None, None)),
        None => return Err("field :value: missing: a :cas needs [from to]".into()),
        Some(v) => v,
    };
    // A register's values are scalars: a collection where `from` or `to` should be is a
    // malformed `[key [from to]]` (`["k" [1]]`), not a value.
    let scalar = |n: &Node| !matches!(n.value, Edn::Vector(_) | Edn::List(_) | Edn::Map(_));
    match pair(v) {
        Some([key, inner]) if pair(inner).is_some() => Ok((Some(key), pair(inner))),
        Some(p) if p.iter().all(scalar) => Ok((None, Some(p))),
        _ => Err(format!(
            "field :value{}: expected [from to] or [key [from to]] for a :cas, found {}",
            at(map, v),
            found(v)
        )),
    }
}

/// One operation; `None` for the nemesis's.
fn read_op(map: &Node, index: u64, places: &mut Places) -> Result<Option<Op>, String> {
    let process = match map.get("process") {
        Some(v) => match (&v.value, number(v)) {
            (_, Some(p)) => p,
            (Edn::Keyword(k), _) if k == "nemesis" => return Ok(None),
            _ => {
                return Err(format!(
                    "field :process{}: expected a process number or :nemesis, found {}",
                    at(map, v),
                    found(v)
                ))
            }
        },
        None => {
            return Err("field :process: missing: expected a process number or :nemesis".into())
        }
    };
    let op_type = match keyword(map, "type", TYPES)? {
        "invoke" => OpType::Invoke,
        "ok" => OpType::Ok,
        "fail" => OpType::Fail,
        "info" => OpType::Info,
        other => {
            return Err(format!(
                "field :type: expected {TYPES}, found :{}",
                Edn::Keyword(other.to_owned())
                    .brief()
                    .trim_start_matches(':')
            ))
        }
    };
    let f = match keyword(map, "f", FUNCTIONS)? {
        "acquire" => OpFn::Acquire,
        "renew" => OpFn::Renew,
        "release" => OpFn::Release,
        "read" => OpFn::Read,
        "write" => OpFn::Write,
        "cas" => OpFn::Cas,
        "delete" => OpFn::Delete,
        other => {
            let other = Edn::Keyword(other.to_owned()).brief();
            let other = other.trim_start_matches(':');
            // Knossos's multi-register model: one operation over several keys, which the
            // per-key register search cannot judge.
            let why = if other == "txn" {
                " (multi-register transactions are not supported)"
            } else {
                ""
            };
            return Err(format!(
                "field :f: expected {FUNCTIONS}, found :{other}{why}"
            ));
        }
    };
    let (place, value, expected) = if f == OpFn::Cas {
        let (place, pair) = cas_value(map, op_type)?;
        (
            place,
            pair.map(|p| &p[1]),
            pair.and_then(|p| value_text(&p[0])),
        )
    } else {
        // `[key value]` (Jepsen's independent tuple) or a bare value on the default key.
        match map.get("value") {
            Some(Node {
                value: Edn::Vector(pair),
                ..
            }) if pair.len() == 2 => (Some(&pair[0]), Some(&pair[1]), None),
            other => (None, other, None),
        }
    };
    let token = count(map, ":token", map.get("token"))?;
    let mut op = Op {
        at: Stamp {
            index,
            time_ns: count(map, ":time", map.get("time"))?.unwrap_or(index),
            mono_ms: 0,
            wall_ms: 0,
        },
        process,
        node: map
            .get("node")
            .and_then(text)
            .map_or_else(|| format!("process-{process}").into(), Name::from),
        op_type,
        f,
        lock: None,
        key: None,
        token,
        value: None,
        expected,
        value_unknown: false,
        ttl_ms: None,
        error: map.get("error").and_then(text),
    };
    match f {
        OpFn::Read | OpFn::Write | OpFn::Cas | OpFn::Delete => {
            op.key = Some(places.name(false, place, map)?);
            op.value = value.and_then(value_text);
            // Knossos's convention: a read that completed `ok` with `nil` (or no value) saw
            // something nobody recorded, which any value matches.
            op.value_unknown = f == OpFn::Read && op_type == OpType::Ok && op.value.is_none();
        }
        _ => {
            op.lock = Some(places.name(true, place, map)?);
            if op.token.is_none() {
                op.token = count(map, ":value's token", value)?;
            }
            op.ttl_ms = count(map, ":ttl-ms", map.get("ttl-ms"))?;
            // A TTL is judged against the operations' times: without them (the reader numbers
            // operations instead) it would be judged against nothing real.
            if op.ttl_ms.is_some() && map.get("time").is_none() {
                return Err(
                    "field :ttl-ms: a lease's TTL needs the operation's :time (ns) too".into(),
                );
            }
        }
    }
    Ok(Some(op))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_round_trip_and_events_are_dropped() {
        let op = |index, op_type, f, value: Option<&str>| Op {
            at: Stamp {
                index,
                time_ns: index * 10,
                mono_ms: 0,
                wall_ms: 0,
            },
            process: 3,
            node: "client-1".into(),
            op_type,
            f,
            lock: None,
            key: Some("register".into()),
            token: Some(7),
            value: value.map(str::to_owned),
            expected: None,
            value_unknown: false,
            ttl_ms: None,
            error: None,
        };
        let history = History {
            header: Header {
                format_version: crate::FORMAT_VERSION,
                scenario: "s".into(),
                seed: 1,
                tool_version: "t".into(),
                token_order: Default::default(),
                untimed: false,
            },
            entries: vec![
                Entry::from(op(
                    0,
                    OpType::Invoke,
                    OpFn::Write,
                    Some("a \"quoted\" value"),
                )),
                Entry::from(Event {
                    at: Stamp {
                        index: 1,
                        ..Stamp::default()
                    },
                    ..Event::new(crate::EventKind::Grant)
                }),
                Entry::from(op(2, OpType::Ok, OpFn::Write, Some("a \"quoted\" value"))),
            ],
        };
        let mut out = Vec::new();
        write_jepsen_edn(&history, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(text.contains(":f :write"), "{text}");
        let back = read_jepsen_edn(&text, "s").unwrap();
        let ops: Vec<&Op> = back.ops().collect();
        assert_eq!(ops.len(), 2);
        // fencesim's values are strings, written as EDN strings: read back, a value is its
        // EDN text, quotes and all, so that it keeps its type.
        assert_eq!(ops[1].value.as_deref(), Some(r#""a \"quoted\" value""#));
        // The export writes each operation's index as `:index`, and it is read back: the
        // witnesses of a check of the EDN name the operations as the history.jsonl does.
        assert_eq!(
            (ops[1].at.index, ops[1].at.time_ns, ops[1].token),
            (2, 20, Some(7))
        );
        assert_eq!(ops[1].key.as_deref(), Some("register"));
    }

    /// A token above `i64::MAX` is written as a big integer (`...N`) and read back as itself.
    #[test]
    fn a_token_past_i64_reads_back() {
        let text = "{:process 18446744073709551615N, :type :invoke, :f :acquire, :value [\"l\" nil]}\n\
                    {:process 18446744073709551615N, :type :ok, :f :acquire, :value [\"l\" 18446744073709551615N]}\n";
        let h = read_jepsen_edn(text, "big").unwrap();
        let op = h.ops().nth(1).unwrap();
        assert_eq!((op.process, op.token), (u64::MAX, Some(u64::MAX)));
        let mut out = Vec::new();
        write_jepsen_edn(&h, &mut out).unwrap();
        let back = read_jepsen_edn(std::str::from_utf8(&out).unwrap(), "big").unwrap();
        assert_eq!(back.entries, h.entries);
    }

    /// A cas whose pair holds a collection is a malformed `[key [from to]]`, refused; nil is
    /// named as nil.
    #[test]
    fn a_malformed_cas_pair_is_refused() {
        let err = read_jepsen_edn(
            "{:process 0, :type :invoke, :f :cas, :value [\"k\" [1]]}\n",
            "x",
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 1: field :value: expected [from to] or [key [from to]] for a :cas, found a \
             vector [\"k\" [1]]"
        );
        let err =
            read_jepsen_edn("{:process 0, :type :invoke, :f :cas, :value nil}\n", "x").unwrap_err();
        assert!(err.to_string().ends_with("for a :cas, found nil"), "{err}");
    }

    #[test]
    fn a_jepsen_register_history_reads_with_defaults_and_bad_lines_are_located() {
        let text = "[{:type :invoke, :f :write, :value 3, :process 0, :time 5}\n\
                    {:type :ok, :f :write, :value 3, :process 0, :time 9}\n\
                    {:type :info, :f :start, :process :nemesis}]\n";
        let h = read_jepsen_edn(text, "jepsen").unwrap();
        let ops: Vec<&Op> = h.ops().collect();
        assert_eq!(ops.len(), 2);
        assert_eq!(
            (
                ops[0].key.as_deref(),
                ops[0].value.as_deref(),
                ops[0].node.as_str()
            ),
            (Some("register"), Some("3"), "process-0")
        );
        let bad = read_jepsen_edn("{:type :ok, :f :frob, :process 0}\n", "x").unwrap_err();
        assert_eq!(
            bad.to_string(),
            "line 1: field :f: expected :acquire, :renew, :release, :read, :write, :cas or \
             :delete, found :frob"
        );
        assert!(read_jepsen_edn("{:type :ok\n", "x")
            .unwrap_err()
            .to_string()
            .starts_with("line 1: not EDN"));
    }

    /// `:cas` values: `[from to]` on the default key and `[key [from to]]` on a named one,
    /// written back as `[key [from to]]` and read again to the same operations.
    #[test]
    fn cas_reads_in_both_shapes_and_round_trips() {
        let text = "[{:process 0, :type :invoke, :f :cas, :value [0 1]}\n\
                    {:process 0, :type :fail, :f :cas, :value [0 1]}\n\
                    {:process 1, :type :invoke, :f :cas, :value [\"k\" [nil 2]]}\n\
                    {:process 1, :type :info, :f :cas}]";
        let h = read_jepsen_edn(text, "cas").unwrap();
        let ops: Vec<&Op> = h.ops().collect();
        let shape = |o: &Op| {
            (
                o.f,
                o.key.clone().unwrap_or_default(),
                o.expected.clone(),
                o.value.clone(),
            )
        };
        assert_eq!(
            shape(ops[0]),
            (
                OpFn::Cas,
                "register".into(),
                Some("0".into()),
                Some("1".into())
            )
        );
        assert_eq!(
            shape(ops[2]),
            (OpFn::Cas, "k".into(), None, Some("2".into()))
        );
        assert_eq!(shape(ops[3]), (OpFn::Cas, "register".into(), None, None));
        let mut out = Vec::new();
        write_jepsen_edn(&h, &mut out).unwrap();
        let written = String::from_utf8(out).unwrap();
        assert!(
            written.contains(":f :cas, :value [\"register\" [\"0\" \"1\"]]"),
            "{written}"
        );
        // Written back, the integers are strings (fencesim's values are text): read again,
        // each is that string's EDN text, the rest unchanged.
        let as_string = |v: &Option<String>| v.clone().map(|v| Edn::Str(v).canonical());
        let strings: Vec<Entry> = h
            .ops()
            .map(|o| {
                Entry::from(Op {
                    value: as_string(&o.value),
                    expected: as_string(&o.expected),
                    ..o.clone()
                })
            })
            .collect();
        let again = read_jepsen_edn(&written, "cas").unwrap();
        assert_eq!(again.entries, strings);
        assert_eq!(again.ops().next().unwrap().value.as_deref(), Some("\"1\""));
    }

    /// Knossos's conventions: an `ok` read of `nil` is an unknown value (an invoke's `nil` is
    /// nothing), nemesis operations of any `:f` are skipped, and what cannot be read is
    /// located.
    #[test]
    fn knossos_conventions_and_located_refusals() {
        let text = "[{:process 0, :type :invoke, :f :read, :value nil}\n\
                    {:process :nemesis, :type :info, :f :isolate, :value {:a 1}}\n\
                    {:process 0, :type :ok, :f :read, :value nil}\n\
                    {:process 1, :type :invoke, :f :read}\n\
                    {:process 1, :type :ok, :f :read, :value 3}]";
        let h = read_jepsen_edn(text, "k").unwrap();
        let unknown: Vec<(OpType, bool, Option<String>)> = h
            .ops()
            .map(|o| (o.op_type, o.value_unknown, o.value.clone()))
            .collect();
        assert_eq!(
            unknown,
            [
                (OpType::Invoke, false, None),
                (OpType::Ok, true, None),
                (OpType::Invoke, false, None),
                (OpType::Ok, false, Some("3".into())),
            ]
        );
        let refused = |text: &str| read_jepsen_edn(text, "k").unwrap_err().to_string();
        assert_eq!(
            refused("{:process 0, :type :invoke, :f :cas, :value 3}"),
            "line 1: field :value: expected [from to] or [key [from to]] for a :cas, found an \
             integer 3"
        );
        assert_eq!(
            refused("{:process 0, :type :invoke, :f :cas}"),
            "line 1: field :value: missing: a :cas needs [from to]"
        );
        assert_eq!(
            refused("[{:process 0, :type :ok, :f :read, :value 1}\n{:type :invoke,\n :f :txn, :process 2}]"),
            "line 2: field :f: expected :acquire, :renew, :release, :read, :write, :cas or \
             :delete, found :txn (multi-register transactions are not supported)"
        );
    }

    /// Values are read as their canonical text: values Clojure's `=` calls equal read alike,
    /// and values of different types (the integer 5, the string "5") read apart.
    #[test]
    fn values_read_as_their_canonical_text() {
        // Each read's invocation (of nil) reads as no value, and is left out below.
        let text = "{:process 0, :type :invoke, :f :write, :value [\"k\" #{2 1}]}\n\
                    {:process 0, :type :ok, :f :write, :value [\"k\" {:b (1 2N) :a 1.50M}]}\n\
                    {:process 1, :type :invoke, :f :cas, :value [\"k\" [5 \"5\"]]}\n\
                    {:process 1, :type :fail, :f :cas, :value [\"k\" [5 \"5\"]]}\n\
                    {:process 1, :type :invoke, :f :read, :value [\"k\" nil]}\n\
                    {:process 1, :type :ok, :f :read, :value [\"k\" :a]}\n\
                    {:process 2, :type :invoke, :f :read, :value [\"k\" nil]}\n\
                    {:process 2, :type :ok, :f :read, :value [\"k\" a]}\n\
                    {:process 2, :type :invoke, :f :read, :value [\"k\" nil]}\n\
                    {:process 2, :type :ok, :f :read, :value [\"k\" \\a]}\n\
                    {:process 2, :type :invoke, :f :read, :value [\"k\" nil]}\n\
                    {:process 2, :type :ok, :f :read, :value [\"k\" false]}";
        let h = read_jepsen_edn(text, "v").unwrap();
        let values: Vec<(Option<&str>, Option<&str>)> = h
            .ops()
            .filter(|o| o.value.is_some())
            .map(|o| (o.expected.as_deref(), o.value.as_deref()))
            .collect();
        assert_eq!(
            values,
            [
                (None, Some("#{1 2}")),
                (None, Some("{:a 1.5M, :b [1 2]}")),
                (Some("5"), Some("\"5\"")),
                (Some("5"), Some("\"5\"")),
                (None, Some(":a")),
                (None, Some("a")),
                (None, Some("\\a")),
                (None, Some("false")),
            ]
        );
        // Keys stay plain names: a string as it is, anything else by its canonical text.
        let keys = read_jepsen_edn(
            "{:process 0, :type :invoke, :f :read, :value [#{2 1} nil]}\n\
             {:process 0, :type :ok, :f :read, :value [#{2 1} 1]}\n\
             {:process 0, :type :invoke, :f :read, :value [7N nil]}\n\
             {:process 0, :type :ok, :f :read, :value [7N 1]}\n\
             {:process 0, :type :invoke, :f :acquire, :value [:l nil]}\n\
             {:process 0, :type :ok, :f :acquire, :value [:l 1]}",
            "keys",
        )
        .unwrap();
        let names: Vec<Option<&str>> = keys
            .ops()
            .filter(|o| o.op_type == OpType::Ok)
            .map(|o| o.key.as_deref().or(o.lock.as_deref()))
            .collect();
        assert_eq!(names, [Some("#{1 2}"), Some("7"), Some(":l")]);
    }

    /// A key that a string and another value name alike (the string "1", the integer 1) would
    /// be one key to the checker though Clojure tells them apart: refused, located.
    #[test]
    fn keys_of_different_types_with_one_name_are_refused() {
        let refused = |text: &str| read_jepsen_edn(text, "k").unwrap_err().to_string();
        assert_eq!(
            refused(
                "{:process 0, :type :invoke, :f :write, :value [\"1\" 5]}\n\
                 {:process 1, :type :invoke, :f :write,\n :value [1 5]}"
            ),
            "line 2: field :value (line 3): the key 1 (an integer) and the key \"1\" (a string, \
             line 1) have the same text, and fencesim would judge them as one key: use keys of \
             one type"
        );
        assert_eq!(
            refused(
                "{:process 0, :type :invoke, :f :write, :value 5}\n\
                 {:process 1, :type :invoke, :f :read, :value [register nil]}"
            ),
            "line 2: field :value: the key register (a symbol) and the key \"register\" (the \
             default of a bare :value, line 1) have the same text, and fencesim would judge \
             them as one key: use keys of one type"
        );
        // Locks are named apart from keys, by the same rule.
        assert!(read_jepsen_edn(
            "{:process 0, :type :invoke, :f :acquire, :value [\"l\" nil]}\n\
             {:process 0, :type :ok, :f :acquire, :value [\"l\" 1]}\n\
             {:process 1, :type :invoke, :f :write, :value [l 1]}\n\
             {:process 1, :type :ok, :f :write, :value [l 1]}",
            "k"
        )
        .is_ok());
        assert!(refused(
            "{:process 0, :type :ok, :f :acquire, :value [\"l\" 1]}\n\
             {:process 1, :type :ok, :f :acquire, :value [l 2]}"
        )
        .contains("the lock l (a symbol) and the lock \"l\" (a string, line 1)"));
    }

    /// Operations keep the file's `:index` when all have one; none having one, they are
    /// numbered by position. Mixed, repeated, decreasing or out-of-range indexes are refused,
    /// naming the other operation's line.
    #[test]
    fn the_files_index_numbers_the_operations() {
        let indexes = |text: &str| -> Vec<u64> {
            read_jepsen_edn(text, "i")
                .unwrap()
                .ops()
                .map(|o| o.at.index)
                .collect()
        };
        // Nemesis operations are numbered too, and their numbers skipped.
        assert_eq!(
            indexes(
                "{:index 3, :process 0, :type :invoke, :f :read}\n\
                 {:index 4, :process :nemesis, :type :info, :f :start}\n\
                 {:index 10, :process 0, :type :ok, :f :read, :value 1}\n\
                 {:index 11N, :process 1, :type :invoke, :f :read}"
            ),
            [3, 10, 11]
        );
        assert_eq!(
            indexes(
                "{:process 0, :type :invoke, :f :read}\n\
                 {:process :nemesis, :type :info, :f :start}\n\
                 {:process 0, :type :ok, :f :read, :value 1, :index nil}"
            ),
            [0, 1]
        );
        // Without :time, the index stands in for it.
        let h = read_jepsen_edn("{:index 7, :process 0, :type :invoke, :f :read}", "i").unwrap();
        assert_eq!(h.ops().next().unwrap().at.time_ns, 7);
        let refused = |text: &str| read_jepsen_edn(text, "i").unwrap_err().to_string();
        assert_eq!(
            refused(
                "{:index 0, :process 0, :type :invoke, :f :read}\n\
                 {:process 0, :type :ok, :f :read}"
            ),
            "line 2: field :index: missing, though the operation at line 1 has one: give every \
             operation an :index, or none (they are then numbered in file order)"
        );
        assert_eq!(
            refused(
                "{:process :nemesis, :type :info, :f :start}\n\
                 {:process 0, :type :ok, :f :read,\n :index 1}"
            ),
            "line 2: field :index (line 3): present, though the operation at line 1 has none: \
             give every operation an :index, or none (they are then numbered in file order)"
        );
        assert_eq!(
            refused(
                "{:index 5, :process 0, :type :invoke, :f :read}\n\
                 {:index 5, :process 0, :type :ok, :f :read}"
            ),
            "line 2: field :index: 5 repeats the :index 5 of the operation at line 1: indexes \
             must increase in file order"
        );
        assert_eq!(
            refused(
                "[{:index 5, :process 0, :type :invoke, :f :read}\n\
                 {:index 6, :process :nemesis, :type :info, :f :start}\n\
                 {:index 2, :process 0, :type :ok, :f :read}]"
            ),
            "line 3: field :index: 2 comes after the :index 6 of the operation at line 2: \
             indexes must increase in file order"
        );
        assert_eq!(
            refused("{:index -1, :process 0, :type :invoke, :f :read}"),
            "line 1: field :index: expected a non-negative integer, found an integer -1"
        );
        assert_eq!(
            refused("{:index \"0\", :process 0, :type :invoke, :f :read}"),
            "line 1: field :index: expected a non-negative integer, found a string \"0\""
        );
        assert_eq!(
            refused("{:index 9223372036854775808, :process 0, :type :invoke, :f :read}"),
            "line 1: field :index: 9223372036854775808 is beyond Jepsen's indexes (at most \
             9223372036854775807, a Java long)"
        );
    }

    /// What is not an operation map, or lacks a field, is named plainly: what was expected,
    /// what was found (nil as nil, with the right article), once, at its line.
    #[test]
    fn refusals_say_what_was_expected_and_found() {
        let refused = |text: &str| read_jepsen_edn(text, "e").unwrap_err().to_string();
        let map = "expected an operation map such as {:process 0, :type :invoke, :f :read}";
        for (text, says) in [
            ("nil", format!("line 1: {map}, found nil")),
            ("[nil]", format!("line 1: {map}, found nil")),
            ("\n\n(nil)", format!("line 3: {map}, found nil")),
            ("1", format!("line 1: {map}, found an integer 1")),
            (
                "[{:process 0, :type :ok, :f :read}\n 2.5]",
                format!("line 2: {map}, found a float 2.5"),
            ),
            ("\"op\"", format!("line 1: {map}, found a string \"op\"")),
            (
                "#inst \"x\"",
                format!("line 1: {map}, found a tagged value #inst \"x\""),
            ),
            (
                "{:process 0, :f :read}",
                "line 1: field :type: missing: expected :invoke, :ok, :fail or :info".to_owned(),
            ),
            (
                "{:process 0, :type :ok}",
                "line 1: field :f: missing: expected :acquire, :renew, :release, :read, :write, \
                 :cas or :delete"
                    .to_owned(),
            ),
            (
                "{:type :ok, :f :read}",
                "line 1: field :process: missing: expected a process number or :nemesis".to_owned(),
            ),
            (
                "{:process 0, :type \"ok\", :f :read}",
                "line 1: field :type: expected :invoke, :ok, :fail or :info, found a string \"ok\""
                    .to_owned(),
            ),
            (
                "{:process 0, :type :ok,\n :f nil}",
                "line 1: field :f (line 2): expected :acquire, :renew, :release, :read, :write, \
                 :cas or :delete, found nil"
                    .to_owned(),
            ),
            (
                "{:process 0 :type :ok :f :read :value [1\n 2)}",
                "line 2: not EDN: column 3: expected `]` to close the vector opened at line 1, \
                 column 39, found `)`"
                    .to_owned(),
            ),
            (
                "{:process 0 :type :ok :f :read :value [1 2)}",
                "line 1: not EDN: column 43: expected `]` to close the vector opened at column \
                 39, found `)`"
                    .to_owned(),
            ),
            (
                "{:process 0 :type :ok :f}",
                "line 1: not EDN: column 23: the map opened at column 1 has an odd number of \
                 forms (5): the key :f has no value"
                    .to_owned(),
            ),
        ] {
            assert_eq!(refused(text), says, "{text:?}");
        }
    }
}
