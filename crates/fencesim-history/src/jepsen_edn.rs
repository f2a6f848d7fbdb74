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

use std::collections::BTreeMap;
use std::io::{self, Write};

use edn_format::{Keyword, Value};

use crate::{Entry, Event, Header, History, HistoryError, Name, Op, OpFn, OpType, Phase, Stamp};

fn kw(name: &str) -> Value {
    Value::Keyword(Keyword::from_name(name))
}

fn string_or_nil(s: Option<&str>) -> Value {
    s.map_or(Value::Nil, |s| Value::String(s.to_owned()))
}

fn int_or_nil(n: Option<u64>) -> Value {
    n.map_or(Value::Nil, |n| Value::Integer(n as i64))
}

fn type_name(t: OpType) -> &'static str {
    match t {
        OpType::Invoke => "invoke",
        OpType::Ok => "ok",
        OpType::Fail => "fail",
        OpType::Info => "info",
    }
}

fn f_name(f: OpFn) -> &'static str {
    match f {
        OpFn::Acquire => "acquire",
        OpFn::Renew => "renew",
        OpFn::Release => "release",
        OpFn::Read => "read",
        OpFn::Write => "write",
    }
}

fn op_map(op: &Op) -> Value {
    let value = match op.f {
        OpFn::Read | OpFn::Write => Value::Vector(vec![
            string_or_nil(op.key.as_deref()),
            string_or_nil(op.value.as_deref()),
        ]),
        _ => Value::Vector(vec![
            string_or_nil(op.lock.as_deref()),
            int_or_nil(op.token),
        ]),
    };
    let mut m = BTreeMap::from([
        (kw("index"), Value::Integer(op.at.index as i64)),
        (kw("time"), Value::Integer(op.at.time_ns as i64)),
        (kw("process"), Value::Integer(op.process as i64)),
        (kw("type"), kw(type_name(op.op_type))),
        (kw("f"), kw(f_name(op.f))),
        (kw("value"), value),
        (kw("node"), Value::String(op.node.to_string())),
    ]);
    if let (Some(token), OpFn::Read | OpFn::Write) = (op.token, op.f) {
        m.insert(kw("token"), Value::Integer(token as i64));
    }
    if let Some(error) = &op.error {
        m.insert(kw("error"), Value::String(error.clone()));
    }
    Value::Map(m)
}

fn nemesis_map(e: &Event) -> Option<Value> {
    let phase = match e.phase? {
        Phase::Start => "start",
        Phase::End => "stop",
    };
    Some(Value::Map(BTreeMap::from([
        (kw("index"), Value::Integer(e.at.index as i64)),
        (kw("time"), Value::Integer(e.at.time_ns as i64)),
        (kw("process"), kw("nemesis")),
        (kw("type"), kw("info")),
        (kw("f"), kw(&format!("{phase}-{}", e.event.as_str()))),
        (kw("value"), string_or_nil(e.target.as_deref())),
    ])))
}

/// Write `history` in Jepsen's EDN form, one map per line.
pub fn write_jepsen_edn(history: &History, mut out: impl Write) -> io::Result<()> {
    for entry in &history.entries {
        let map = match entry {
            Entry::Op(op) => Some(op_map(op)),
            Entry::Event(e) if e.event.is_nemesis() => nemesis_map(e),
            Entry::Event(_) => None,
        };
        if let Some(map) = map {
            writeln!(out, "{}", edn_format::emit_str(&map))?;
        }
    }
    out.flush()
}

/// Read a Jepsen EDN history: operation maps (or tagged records of them), any number per line,
/// as loose values or inside a whole-file vector whose brackets may sit on the first and last
/// lines. An operation may not span lines. `name` becomes the header's scenario. Entries are
/// numbered in file order; `:time` (ns) is kept when present.
pub fn read_jepsen_edn(text: &str, name: &str) -> Result<History, HistoryError> {
    let mut entries = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let err = |message: String| HistoryError::Parse {
            line: i + 1,
            message,
        };
        for value in line_values(line).map_err(err)? {
            let map = match value {
                Value::Map(map) => map,
                Value::TaggedElement(_, inner) => match *inner {
                    Value::Map(map) => map,
                    other => return Err(err(not_an_op(&other))),
                },
                other => return Err(err(not_an_op(&other))),
            };
            let index = entries.len() as u64;
            if let Some(op) = read_op(&map, index).map_err(err)? {
                entries.push(Entry::from(op));
            }
        }
    }
    Ok(History {
        header: Header {
            format_version: crate::FORMAT_VERSION,
            scenario: name.to_owned(),
            seed: 0,
            tool_version: "jepsen-edn".to_owned(),
            token_order: Default::default(),
        },
        entries,
    })
}

fn not_an_op(v: &Value) -> String {
    format!(
        "expected an operation map {{:type ... :f ...}}, found {}",
        edn_format::emit_str(v)
    )
}

/// Every EDN value on one line, with a whole-file vector opened or closed on it taken apart.
fn line_values(line: &str) -> Result<Vec<Value>, String> {
    let parse = |text: &str| -> Result<Vec<Value>, edn_format::ParserError> {
        edn_format::Parser::from_str(text, edn_format::ParserOptions::default()).collect()
    };
    let trimmed = line.trim();
    let values = match parse(trimmed) {
        Ok(values) => values,
        // The first or last line of a whole-file vector spread over several lines.
        Err(first) => {
            let opened = trimmed.strip_prefix('[').unwrap_or(trimmed);
            let inner = opened.strip_suffix(']').unwrap_or(opened);
            parse(inner).map_err(|_| format!("not EDN: {first}"))?
        }
    };
    Ok(values
        .into_iter()
        .flat_map(|v| match v {
            Value::Vector(items) => items,
            other => vec![other],
        })
        .collect())
}

fn get<'m>(map: &'m BTreeMap<Value, Value>, key: &str) -> Option<&'m Value> {
    map.get(&kw(key))
}

fn keyword<'m>(map: &'m BTreeMap<Value, Value>, key: &str) -> Result<&'m str, String> {
    match get(map, key) {
        Some(Value::Keyword(k)) => Ok(k.name()),
        Some(other) => Err(format!(
            "field :{key}: expected a keyword, found {}",
            edn_format::emit_str(other)
        )),
        None => Err(format!("field :{key}: missing")),
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Nil => None,
        other => Some(edn_format::emit_str(other)),
    }
}

fn number(v: &Value) -> Option<u64> {
    match v {
        Value::Integer(n) if *n >= 0 => Some(*n as u64),
        _ => None,
    }
}

/// One operation; `None` for the nemesis's.
fn read_op(map: &BTreeMap<Value, Value>, index: u64) -> Result<Option<Op>, String> {
    let process = match get(map, "process") {
        Some(Value::Integer(p)) if *p >= 0 => *p as u64,
        Some(Value::Keyword(k)) if k.name() == "nemesis" => return Ok(None),
        Some(other) => {
            return Err(format!(
                "field :process: expected a process number or :nemesis, found {}",
                edn_format::emit_str(other)
            ))
        }
        None => return Err("field :process: missing".into()),
    };
    let op_type = match keyword(map, "type")? {
        "invoke" => OpType::Invoke,
        "ok" => OpType::Ok,
        "fail" => OpType::Fail,
        "info" => OpType::Info,
        other => {
            return Err(format!(
                "field :type: expected :invoke, :ok, :fail or :info, found :{other}"
            ))
        }
    };
    let f = match keyword(map, "f")? {
        "acquire" => OpFn::Acquire,
        "renew" => OpFn::Renew,
        "release" => OpFn::Release,
        "read" => OpFn::Read,
        "write" => OpFn::Write,
        other => {
            return Err(format!(
                "field :f: expected :acquire, :renew, :release, :read or :write, found :{other}"
            ))
        }
    };
    // `[key value]` (Jepsen's independent tuple) or a bare value on the default key.
    let (place, value) = match get(map, "value") {
        Some(Value::Vector(pair)) if pair.len() == 2 => (text(&pair[0]), Some(&pair[1])),
        other => (None, other),
    };
    let mut op = Op {
        at: Stamp {
            index,
            time_ns: get(map, "time").and_then(number).unwrap_or(index),
            mono_ms: 0,
            wall_ms: 0,
        },
        process,
        node: get(map, "node")
            .and_then(text)
            .map_or_else(|| format!("process-{process}").into(), Name::from),
        op_type,
        f,
        lock: None,
        key: None,
        token: get(map, "token").and_then(number),
        value: None,
        error: get(map, "error").and_then(text),
    };
    match f {
        OpFn::Read | OpFn::Write => {
            op.key = Some(place.map_or_else(|| "register".into(), Name::from));
            op.value = value.and_then(text);
        }
        _ => {
            op.lock = Some(place.map_or_else(|| "lock".into(), Name::from));
            op.token = op.token.or(value.and_then(number));
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
            error: None,
        };
        let history = History {
            header: Header {
                format_version: crate::FORMAT_VERSION,
                scenario: "s".into(),
                seed: 1,
                tool_version: "t".into(),
                token_order: Default::default(),
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
        assert_eq!(ops[1].value.as_deref(), Some("a \"quoted\" value"));
        assert_eq!(
            (ops[1].at.index, ops[1].at.time_ns, ops[1].token),
            (1, 20, Some(7))
        );
        assert_eq!(ops[1].key.as_deref(), Some("register"));
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
        let bad = read_jepsen_edn("{:type :ok, :f :cas, :process 0}\n", "x").unwrap_err();
        assert_eq!(
            bad.to_string(),
            "line 1: field :f: expected :acquire, :renew, :release, :read or :write, found :cas"
        );
        assert!(read_jepsen_edn("{:type :ok\n", "x")
            .unwrap_err()
            .to_string()
            .starts_with("line 1: not EDN"));
    }
}
