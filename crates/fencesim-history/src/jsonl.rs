//! JSON Lines reading and writing: a header line, then one entry per line.

use std::io::{self, BufRead, Write};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Entry, Header, History};

/// A history file that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The underlying reader failed.
    #[error("cannot read history: {0}")]
    Io(#[from] io::Error),
    /// A line is not a valid record.
    #[error("line {line}: {message}")]
    Parse {
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        message: String,
    },
}

#[derive(Serialize, Deserialize)]
struct HeaderLine {
    record: String,
    #[serde(flatten)]
    header: Header,
}

/// Write `history` as JSON Lines: the header, then each entry, each followed by `\n`.
pub fn write_jsonl(history: &History, mut out: impl Write) -> io::Result<()> {
    let header = HeaderLine {
        record: "header".to_owned(),
        header: history.header.clone(),
    };
    serde_json::to_writer(&mut out, &header)?;
    out.write_all(b"\n")?;
    for entry in &history.entries {
        serde_json::to_writer(&mut out, entry)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

/// Read a JSON Lines history. The first non-empty line is the header, or (history format 3)
/// already an entry, and then the history has [`Header::unnamed`]: a recording of a real
/// system need not invent a scenario, seed or tool version. Nor need it invent what its
/// entries did not record: an entry without `index` is numbered by its position, entries
/// without `time_ns` (all of them, or none) take their index as their time, and a missing
/// `mono_ms` or `wall_ms` reads as 0 ([`crate::Stamp`]: no check reads them). An `index` given
/// must equal the entry's position, so a truncated or reordered file is caught.
///
/// Each field is checked against its type before the record is built, so an error names the
/// line once, the field and what it expected (``line 3: field `time_ns`: expected a
/// non-negative integer (true time, ns), found an integer -5``). Then each record must carry
/// what its kind needs and the operations must pair up, as for Jepsen EDN (`validate.rs`).
pub fn read_jsonl(input: impl BufRead) -> Result<History, HistoryError> {
    let mut header = None;
    let mut entries = Vec::new();
    let mut lines = Vec::new();
    let mut timed = None;
    for (i, line) in input.lines().enumerate() {
        let line = line?;
        let line_no = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let err = |message: String| HistoryError::Parse {
            line: line_no,
            message: crate::cap_message(message),
        };
        let mut fields = object(&line).map_err(err)?;
        let record = record_kind(&fields, header.is_none()).map_err(err)?;
        if header.is_none() {
            if record == "header" {
                header = Some(read_header(fields).map_err(err)?);
                continue;
            }
            header = Some(Header::unnamed());
        }
        let position = entries.len() as u64;
        let at = At {
            position,
            line: line_no,
        };
        let entry = read_entry(&mut fields, record, at, &mut timed).map_err(err)?;
        entries.push(entry);
        lines.push(line_no);
    }
    let header = header.ok_or(HistoryError::Parse {
        line: 1,
        message: "empty file: expected a header line or an entry".into(),
    })?;
    let history = History { header, entries };
    crate::validate::records(&history, &lines, crate::validate::Places::Named)?;
    Ok(history)
}

/// A record's fields in the order of the line. Read by hand rather than into a
/// `serde_json::Map`, which keeps the last of two equal keys in silence: a key given twice
/// is refused, as serde's derived readers refuse it.
struct Fields(serde_json::Map<String, Value>);

impl<'de> Deserialize<'de> for Fields {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Fields;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Fields, A::Error> {
                let mut fields = serde_json::Map::new();
                while let Some(key) = map.next_key::<String>()? {
                    if fields.contains_key(&key) {
                        return Err(serde::de::Error::custom(format!(
                            "field `{key}`: given twice"
                        )));
                    }
                    let value = map.next_value()?;
                    fields.insert(key, value);
                }
                Ok(Fields(fields))
            }
        }
        de.deserialize_map(Visit)
    }
}

/// serde_json's message without its "at line 1 column N": a record is one line, so the line
/// is the file's, given once by the caller, and the column is said apart.
fn json_message(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let location = format!(" at line {} column {}", e.line(), e.column());
    text.strip_suffix(&location).unwrap_or(&text).to_owned()
}

/// The line as a JSON object: its fields, or why it is not one.
fn object(line: &str) -> Result<serde_json::Map<String, Value>, String> {
    if !line.trim_start().starts_with('{') {
        // Say what the line is instead, if it is JSON at all.
        return Err(match serde_json::from_str::<Value>(line) {
            Ok(v) => format!(
                "expected a JSON object (one record per line), found {}",
                found(&v)
            ),
            Err(e) => format!("not JSON: column {}: {}", e.column(), json_message(&e)),
        });
    }
    match serde_json::from_str::<Fields>(line) {
        Ok(Fields(fields)) => Ok(fields),
        Err(e) if e.is_data() => Err(json_message(&e)),
        Err(e) => Err(format!(
            "not JSON: column {}: {}",
            e.column(),
            json_message(&e)
        )),
    }
}

/// The record's kind: `header` (only on the first line), `op` or `event`.
fn record_kind(
    fields: &serde_json::Map<String, Value>,
    first: bool,
) -> Result<&'static str, String> {
    let kinds: &[&'static str] = if first {
        &["header", "op", "event"]
    } else {
        &["op", "event"]
    };
    let expected = if first {
        "\"header\", \"op\" or \"event\""
    } else {
        "\"op\" or \"event\" (a header only on the first line)"
    };
    let v = match fields.get("record") {
        None | Some(Value::Null) => {
            return Err(format!("field `record`: missing: expected {expected}"))
        }
        Some(v) => v,
    };
    v.as_str()
        .and_then(|s| kinds.iter().find(|k| **k == s).copied())
        .ok_or_else(|| {
            format!(
                "field `record`: expected {expected}, found {}{}",
                found(v),
                did_you_mean(v, kinds)
            )
        })
}

/// The JSON types a record's fields hold.
#[derive(Clone, Copy)]
enum Shape {
    /// A non-negative integer (u64).
    Count,
    /// An integer of either sign (i64).
    Signed,
    /// A non-negative integer that fits a u32 (the format version, a key-set's `nodes`).
    Version,
    /// A string.
    Text,
    /// true or false.
    Flag,
    /// One of these strings, as `what` says.
    Name(&'static [&'static str], &'static str),
}

/// A field a record may have: its name, its shape, whether it must be there, and what it is,
/// for the error.
struct Field {
    name: &'static str,
    shape: Shape,
    required: bool,
    what: &'static str,
}

const fn field(name: &'static str, shape: Shape, required: bool, what: &'static str) -> Field {
    Field {
        name,
        shape,
        required,
        what,
    }
}

/// The names of [`crate::OpType`] in files.
const TYPES: &[&str] = &["invoke", "ok", "fail", "info"];
/// The names of [`crate::OpFn`] in files.
const FNS: &[&str] = &[
    "acquire", "renew", "release", "read", "write", "cas", "delete",
];
/// The names of [`crate::EventKind`] in files.
const EVENTS: &[&str] = &{
    let mut names = [""; crate::EventKind::ALL.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = crate::EventKind::ALL[i].as_str();
        i += 1;
    }
    names
};

const HEADER: &[Field] = &[
    field(
        "format_version",
        Shape::Version,
        true,
        "the history format version",
    ),
    field("scenario", Shape::Text, false, "the scenario's name"),
    field("seed", Shape::Count, false, "the root seed"),
    field(
        "tool_version",
        Shape::Text,
        false,
        "the recording tool's version",
    ),
    field(
        "token_order",
        Shape::Name(&["value", "acquisition"], "\"value\" or \"acquisition\""),
        false,
        "how tokens are ordered",
    ),
];

/// The fields every entry has; all may be left out ([`read_jsonl`] says what stands in).
const STAMP: &[Field] = &[
    field("index", Shape::Count, false, "position in the history"),
    field("time_ns", Shape::Count, false, "true time, ns"),
    field("mono_ms", Shape::Signed, false, "local monotonic clock, ms"),
    field("wall_ms", Shape::Signed, false, "local wall clock, ms"),
];

const OP: &[Field] = &[
    field("process", Shape::Count, true, "Jepsen process id"),
    field("node", Shape::Text, true, "the client's node"),
    field(
        "type",
        Shape::Name(TYPES, "\"invoke\", \"ok\", \"fail\" or \"info\""),
        true,
        "the operation's type",
    ),
    field(
        "f",
        Shape::Name(
            FNS,
            "\"acquire\", \"renew\", \"release\", \"read\", \"write\", \"cas\" or \"delete\"",
        ),
        true,
        "what the operation does",
    ),
    field("lock", Shape::Text, false, "the lock"),
    field("key", Shape::Text, false, "the resource key"),
    field("token", Shape::Count, false, "the fencing token"),
    field("value", Shape::Text, false, "the value"),
    field("expected", Shape::Text, false, "the value a cas expects"),
    field(
        "value_unknown",
        Shape::Flag,
        false,
        "whether the value read is unknown",
    ),
    field("ttl_ms", Shape::Count, false, "the TTL asked for, ms"),
    field("error", Shape::Text, false, "why it failed"),
];

const EVENT: &[Field] = &[
    field("node", Shape::Text, true, "the recording node"),
    field(
        "event",
        Shape::Name(EVENTS, "an event kind (docs/history-format.md lists them)"),
        true,
        "the event's kind",
    ),
    field(
        "phase",
        Shape::Name(&["start", "end"], "\"start\" or \"end\""),
        false,
        "start or end",
    ),
    field("lock", Shape::Text, false, "the lock"),
    field("key", Shape::Text, false, "the resource key"),
    field("holder", Shape::Text, false, "the holder or writer"),
    field("token", Shape::Count, false, "the fencing token"),
    field("highest", Shape::Count, false, "the highest accepted token"),
    field("expires_at_ms", Shape::Signed, false, "local clock, ms"),
    field("op", Shape::Count, false, "index of the invoke it answers"),
    field("target", Shape::Text, false, "the node acted on"),
    field("detail", Shape::Text, false, "free text"),
    field("window_ms", Shape::Count, false, "ms"),
    field(
        "ttl_ms",
        Shape::Count,
        false,
        "the key's time to live, or the TTL a grant or renewal promised, ms",
    ),
    field(
        "nodes",
        Shape::Version,
        false,
        "how many nodes the lock is spread over",
    ),
];

/// A JSON value in a few words, for errors: "an integer -5", "a string \"x\"", "an array".
fn found(v: &Value) -> String {
    match v {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("a boolean {b}"),
        Value::Number(n) if n.is_f64() => format!("a number {n}"),
        Value::Number(n) => format!("an integer {n}"),
        Value::String(s) => {
            // Quote at most 40 characters: the error is one line, whatever the input.
            let brief: String = s.chars().take(40).collect();
            let more = if brief.len() < s.len() { "…" } else { "" };
            format!("a string {brief:?}{more}")
        }
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

/// " (did you mean \"pause\"?)" for a string near one of `names`; empty otherwise.
fn did_you_mean(v: &Value, names: &[&str]) -> String {
    v.as_str()
        .and_then(|s| crate::nearest(s, names.iter().copied()))
        .map(|n| format!(" (did you mean \"{n}\"?)"))
        .unwrap_or_default()
}

/// Check `fields` against `known`: each known field present has its shape, each required one
/// is there. A `null` stands for a field left out. Keys not in `known` are left alone (a
/// reader ignores keys it does not know).
fn check_fields(
    fields: &mut serde_json::Map<String, Value>,
    known: &[Field],
) -> Result<(), String> {
    for f in known {
        if fields.get(f.name).is_some_and(Value::is_null) {
            fields.remove(f.name);
        }
        let Some(v) = fields.get(f.name) else {
            if f.required {
                return Err(format!(
                    "field `{}`: missing: expected {}",
                    f.name,
                    expected(f)
                ));
            }
            continue;
        };
        let fits = match f.shape {
            Shape::Count => v.as_u64().is_some(),
            Shape::Signed => v.as_i64().is_some(),
            Shape::Version => v.as_u64().is_some_and(|n| u32::try_from(n).is_ok()),
            Shape::Text => v.is_string(),
            Shape::Flag => v.is_boolean(),
            Shape::Name(names, _) => v.as_str().is_some_and(|s| names.contains(&s)),
        };
        if !fits {
            let hint = match f.shape {
                Shape::Name(names, _) => did_you_mean(v, names),
                _ => String::new(),
            };
            return Err(format!(
                "field `{}`: expected {}, found {}{hint}",
                f.name,
                expected(f),
                found(v)
            ));
        }
    }
    Ok(())
}

/// What a field takes, in words: its shape and what it is ("a non-negative integer (true
/// time, ns)"); a field of names lists them, which says enough.
fn expected(f: &Field) -> String {
    let shape = match f.shape {
        Shape::Count => "a non-negative integer",
        Shape::Signed => "an integer",
        Shape::Version => "a non-negative integer below 2^32",
        Shape::Text => "a string",
        Shape::Flag => "true or false",
        Shape::Name(_, names) => return names.to_owned(),
    };
    format!("{shape} ({})", f.what)
}

fn read_header(mut fields: serde_json::Map<String, Value>) -> Result<Header, String> {
    check_fields(&mut fields, HEADER)?;
    let h: HeaderLine = serde_json::from_value(Value::Object(fields)).map_err(|e| e.to_string())?;
    if h.header.format_version > crate::FORMAT_VERSION {
        return Err(format!(
            "format_version {} is newer than this reader's {}",
            h.header.format_version,
            crate::FORMAT_VERSION
        ));
    }
    Ok(h.header)
}

/// Where an entry is: its position among the entries and its line.
#[derive(Clone, Copy)]
struct At {
    position: u64,
    line: usize,
}

/// One entry from its checked fields, with what it left out of its stamp filled in. `timed`
/// is whether the first entry gave its true time, and its line: the others must do the same.
fn read_entry(
    fields: &mut serde_json::Map<String, Value>,
    record: &str,
    at: At,
    timed: &mut Option<(bool, usize)>,
) -> Result<Entry, String> {
    check_fields(fields, STAMP)?;
    check_fields(fields, if record == "op" { OP } else { EVENT })?;
    match fields.get("index").and_then(Value::as_u64) {
        Some(index) if index != at.position => {
            return Err(format!(
                "index {index} out of order, expected {}",
                at.position
            ))
        }
        Some(_) => {}
        None => {
            fields.insert("index".into(), at.position.into());
        }
    }
    let has_time = fields.contains_key("time_ns");
    let (first_timed, first_line) = *timed.get_or_insert((has_time, at.line));
    if has_time != first_timed {
        let (this, first) = if has_time {
            ("given", "gives none")
        } else {
            ("missing", "gives one")
        };
        return Err(format!(
            "field `time_ns`: {this}, though the first entry (line {first_line}) {first}: every \
             entry gives its true time, or none does and the file's order stands for it"
        ));
    }
    if !has_time {
        // Nothing judges durations on these stand-in times: what would is refused below.
        fields.insert("time_ns".into(), at.position.into());
        for (field, what) in [
            (
                "ttl_ms",
                "a lease's TTL is judged against the entries' true times",
            ),
            (
                "window_ms",
                "the window after a final heal is measured in true time",
            ),
        ] {
            if fields.contains_key(field) {
                return Err(format!(
                    "field `{field}`: {what}: give every entry its time_ns (ns) too"
                ));
            }
        }
    }
    for clock in ["mono_ms", "wall_ms"] {
        fields.entry(clock).or_insert(0.into());
    }
    // The record's kind was checked above: the record field says "op" or "event".
    serde_json::from_value(Value::Object(std::mem::take(fields))).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Event, EventKind, Op, OpFn, OpType, Stamp};

    fn sample() -> History {
        History {
            header: Header {
                format_version: crate::FORMAT_VERSION,
                scenario: "s".into(),
                seed: 7,
                tool_version: "0.1.0".into(),
                token_order: Default::default(),
                untimed: false,
            },
            entries: vec![
                Entry::from(Op {
                    at: Stamp {
                        index: 0,
                        time_ns: 5,
                        mono_ms: 0,
                        wall_ms: 0,
                    },
                    process: 0,
                    node: "client-1".into(),
                    op_type: OpType::Invoke,
                    f: OpFn::Write,
                    lock: None,
                    key: Some("k".into()),
                    token: Some(3),
                    value: Some("v".into()),
                    expected: None,
                    value_unknown: false,
                    ttl_ms: None,
                    error: None,
                }),
                Entry::from(Event {
                    at: Stamp {
                        index: 1,
                        time_ns: 9,
                        mono_ms: 0,
                        wall_ms: 0,
                    },
                    node: "resource".into(),

                    key: Some("k".into()),
                    token: Some(3),
                    highest: Some(3),
                    op: Some(0),
                    ..Event::new(EventKind::Accept)
                }),
            ],
        }
    }

    #[test]
    fn round_trips_and_has_the_documented_shape() {
        let mut bytes = Vec::new();
        write_jsonl(&sample(), &mut bytes).unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        let lines: Vec<_> = text.lines().collect();
        assert_eq!(
            lines[0],
            r#"{"record":"header","format_version":3,"scenario":"s","seed":7,"tool_version":"0.1.0"}"#
        );
        assert_eq!(
            lines[1],
            r#"{"record":"op","index":0,"time_ns":5,"mono_ms":0,"wall_ms":0,"process":0,"node":"client-1","type":"invoke","f":"write","key":"k","token":3,"value":"v"}"#
        );
        assert_eq!(
            lines[2],
            r#"{"record":"event","index":1,"time_ns":9,"mono_ms":0,"wall_ms":0,"node":"resource","event":"accept","key":"k","token":3,"highest":3,"op":0}"#
        );
        assert_eq!(read_jsonl(&bytes[..]).unwrap(), sample());
    }

    #[test]
    fn rejects_bad_lines_with_their_number() {
        let mut bytes = Vec::new();
        write_jsonl(&sample(), &mut bytes).unwrap();
        let text = String::from_utf8(bytes)
            .unwrap()
            .replace("\"index\":1", "\"index\":4");
        let err = read_jsonl(text.as_bytes()).unwrap_err().to_string();
        assert_eq!(err, "line 3: index 4 out of order, expected 1");
        let err = read_jsonl("{\"record\":\"op\"}\n".as_bytes())
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("line 1: "), "{err}");
        assert!(read_jsonl("".as_bytes()).is_err());
        // Without a header, the first line is read as an entry, and must be one.
        let op_first =
            r#"{"record":"op","format_version":1,"scenario":"s","seed":7,"tool_version":"x"}"#;
        let err = read_jsonl(op_first.as_bytes()).unwrap_err().to_string();
        assert_eq!(
            err,
            "line 1: field `process`: missing: expected a non-negative integer (Jepsen process id)"
        );
        let err = read_jsonl(r#"{"record":"footer"}"#.as_bytes())
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "line 1: field `record`: expected \"header\", \"op\" or \"event\", found a string \
             \"footer\""
        );
        let future =
            r#"{"record":"header","format_version":9,"scenario":"s","seed":7,"tool_version":"x"}"#;
        let err = read_jsonl(future.as_bytes()).unwrap_err().to_string();
        assert_eq!(
            err,
            "line 1: format_version 9 is newer than this reader's 3"
        );
    }

    /// Version 2 made local clocks signed: a version-1 file still reads, and a negative
    /// expiry (a service clock stepped back past 0) round-trips.
    #[test]
    fn reads_version_1_and_keeps_negative_expiries() {
        let v1 = concat!(
            r#"{"record":"header","format_version":1,"scenario":"s","seed":7,"tool_version":"x"}"#,
            "\n",
            r#"{"record":"event","index":0,"time_ns":3001000000,"mono_ms":3001,"wall_ms":-96999,"node":"lease-service","event":"grant","lock":"lock","holder":"client-1","token":1,"expires_at_ms":-91999}"#,
            "\n"
        );
        let h = read_jsonl(v1.as_bytes()).unwrap();
        assert_eq!(h.header.format_version, 1);
        let Entry::Event(grant) = &h.entries[0] else {
            panic!("an event")
        };
        assert_eq!(
            (grant.at.wall_ms, grant.expires_at_ms),
            (-96_999, Some(-91_999))
        );
        let mut bytes = Vec::new();
        write_jsonl(&h, &mut bytes).unwrap();
        assert!(String::from_utf8(bytes)
            .unwrap()
            .contains(r#""expires_at_ms":-91999"#));
    }

    /// Version 3: a file may start with its first entry (a recording of a real system has no
    /// scenario or seed); it gets the unnamed header. A header may leave out the scenario,
    /// seed and tool version too.
    #[test]
    fn the_header_is_optional() {
        let text = concat!(
            r#"{"record":"op","index":0,"time_ns":0,"mono_ms":0,"wall_ms":0,"process":0,"node":"c","type":"invoke","f":"cas","key":"k","expected":"1","value":"2"}"#,
            "\n",
            r#"{"record":"op","index":1,"time_ns":3,"mono_ms":0,"wall_ms":0,"process":0,"node":"c","type":"ok","f":"cas","key":"k","expected":"1","value":"2"}"#,
            "\n",
            r#"{"record":"op","index":2,"time_ns":4,"mono_ms":0,"wall_ms":0,"process":1,"node":"c","type":"invoke","f":"read","key":"k"}"#,
            "\n",
            r#"{"record":"op","index":3,"time_ns":5,"mono_ms":0,"wall_ms":0,"process":1,"node":"c","type":"ok","f":"read","key":"k","value_unknown":true}"#,
            "\n"
        );
        let h = read_jsonl(text.as_bytes()).unwrap();
        assert_eq!(h.header, Header::unnamed());
        assert_eq!((h.header.format_version, h.header.seed), (3, 0));
        let ops: Vec<&Op> = h.ops().collect();
        assert_eq!(
            (
                ops[0].f,
                ops[0].expected.as_deref(),
                ops[0].value.as_deref()
            ),
            (OpFn::Cas, Some("1"), Some("2"))
        );
        assert!(ops[3].value_unknown && !ops[0].value_unknown);
        // Written back, it gains a header and reads to the same history.
        let mut bytes = Vec::new();
        write_jsonl(&h, &mut bytes).unwrap();
        assert_eq!(read_jsonl(&bytes[..]).unwrap(), h);
        let bare = r#"{"record":"header","format_version":3}"#;
        assert_eq!(
            read_jsonl(bare.as_bytes()).unwrap().header,
            Header::unnamed()
        );
    }

    /// An operation that names nothing to judge it by is refused, not passed over in silence.
    #[test]
    fn an_operation_without_its_key_lock_or_cas_value_is_refused() {
        let op = |fields: &str| {
            format!(
                "{{\"record\":\"op\",\"index\":0,\"time_ns\":0,\"mono_ms\":0,\"wall_ms\":0,\
                 \"process\":0,\"node\":\"c\",\"type\":\"invoke\",{fields}}}\n"
            )
        };
        let refusal = |fields: &str| read_jsonl(op(fields).as_bytes()).unwrap_err().to_string();
        assert_eq!(
            refusal("\"f\":\"write\",\"value\":\"1\""),
            "line 1: field `key`: missing: a read, write, cas or delete names the key it is on"
        );
        assert_eq!(
            refusal("\"f\":\"acquire\""),
            "line 1: field `lock`: missing: an acquire, renew or release names the lock it is on"
        );
        assert_eq!(
            refusal("\"f\":\"cas\",\"key\":\"k\",\"expected\":\"1\""),
            "line 1: field `value`: missing: a cas invocation names the value it sets"
        );
        assert!(read_jsonl(op("\"f\":\"write\",\"key\":\"k\",\"value\":\"1\"").as_bytes()).is_ok());
    }

    /// A field of the wrong type is named, with what it expected and what it found.
    #[test]
    fn a_field_of_the_wrong_type_is_named() {
        let line = "{\"record\":\"op\",\"index\":0,\"time_ns\":0,\"mono_ms\":0,\"wall_ms\":0,\
                    \"process\":0,\"node\":\"c\",\"type\":\"invoke\",\"f\":\"write\",\
                    \"key\":\"k\",\"token\":\"1\"}\n";
        assert_eq!(
            read_jsonl(line.as_bytes()).unwrap_err().to_string(),
            "line 1: field `token`: expected a non-negative integer (the fencing token), found a \
             string \"1\""
        );
    }

    /// An op line (invoke of a write on `k` by process 0) with `from` replaced by `to`, as
    /// the second line of a file with a header.
    fn bad(from: &str, to: &str) -> String {
        let op = r#"{"record":"op","index":0,"time_ns":0,"mono_ms":0,"wall_ms":0,"process":0,"node":"c","type":"invoke","f":"write","key":"k","value":"1"}"#;
        assert!(op.contains(from), "{from}");
        let header = r#"{"record":"header","format_version":3}"#;
        let text = format!("{header}\n{}\n", op.replacen(from, to, 1));
        read_jsonl(text.as_bytes()).unwrap_err().to_string()
    }

    /// Issue 38 item 5: every error names the line once, the field, and what was expected.
    /// The clocks and the index were named by no field (they are flattened into the record);
    /// a number, array or object where a name belongs said "expected value".
    #[test]
    fn every_error_names_its_field_and_what_it_expected() {
        let int = "expected a non-negative integer";
        for (from, to, says) in [
            (
                r#""time_ns":0"#,
                r#""time_ns":-5"#,
                format!("field `time_ns`: {int} (true time, ns), found an integer -5"),
            ),
            (
                r#""index":0"#,
                r#""index":-1"#,
                format!("field `index`: {int} (position in the history), found an integer -1"),
            ),
            (
                r#""mono_ms":0"#,
                r#""mono_ms":"x""#,
                "field `mono_ms`: expected an integer (local monotonic clock, ms), found a string \
                 \"x\""
                    .to_owned(),
            ),
            (
                r#""wall_ms":0"#,
                r#""wall_ms":1.5"#,
                "field `wall_ms`: expected an integer (local wall clock, ms), found a number 1.5"
                    .to_owned(),
            ),
            (
                r#""process":0"#,
                r#""process":-1"#,
                format!("field `process`: {int} (Jepsen process id), found an integer -1"),
            ),
            (
                r#""type":"invoke""#,
                r#""type":5"#,
                "field `type`: expected \"invoke\", \"ok\", \"fail\" or \"info\", found an \
                 integer 5"
                    .to_owned(),
            ),
            (
                r#""type":"invoke""#,
                r#""type":["invoke"]"#,
                "field `type`: expected \"invoke\", \"ok\", \"fail\" or \"info\", found an \
                 array"
                    .to_owned(),
            ),
            (
                r#""f":"write""#,
                r#""f":{}"#,
                "field `f`: expected \"acquire\", \"renew\", \"release\", \"read\", \"write\", \
                 \"cas\" or \"delete\", found an object"
                    .to_owned(),
            ),
            (
                r#""f":"write""#,
                r#""f":"wirte""#,
                "field `f`: expected \"acquire\", \"renew\", \"release\", \"read\", \"write\", \
                 \"cas\" or \"delete\", found a string \"wirte\" (did you mean \
                 \"write\"?)"
                    .to_owned(),
            ),
            (
                r#""node":"c""#,
                r#""node":3"#,
                "field `node`: expected a string (the client's node), found an integer 3"
                    .to_owned(),
            ),
            (
                r#""key":"k""#,
                r#""key":"k","key":"j""#,
                "field `key`: given twice".to_owned(),
            ),
            (
                r#""value":"1"}"#,
                r#""value":"1""#,
                "not JSON: column 133: EOF while parsing an object".to_owned(),
            ),
        ] {
            assert_eq!(bad(from, to), format!("line 2: {says}"), "{to}");
        }
        let event = |fields: &str| {
            let line = format!(
                "{{\"record\":\"event\",\"index\":0,\"time_ns\":0,\"node\":\"nemesis\",{fields}}}"
            );
            read_jsonl(line.as_bytes()).unwrap_err().to_string()
        };
        assert_eq!(
            event(r#""event":"pause","phase":5"#),
            "line 1: field `phase`: expected \"start\" or \"end\", found an integer 5"
        );
        assert_eq!(
            event(r#""event":["pause"],"phase":"start""#),
            "line 1: field `event`: expected an event kind (docs/history-format.md lists them), \
             found an array"
        );
        assert_eq!(
            event(r#""event":"paws","phase":"start""#),
            "line 1: field `event`: expected an event kind (docs/history-format.md lists them), \
             found a string \"paws\" (did you mean \"pause\"?)"
        );
        let header = |fields: &str| {
            read_jsonl(format!("{{\"record\":\"header\",{fields}}}").as_bytes())
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            header(r#""format_version":-1"#),
            "line 1: field `format_version`: expected a non-negative integer below 2^32 (the \
             history format version), found an integer -1"
        );
        assert_eq!(
            header(r#""format_version":3,"seed":-1"#),
            format!("line 1: field `seed`: {int} (the root seed), found an integer -1")
        );
        assert_eq!(
            header(r#""format_version":3,"token_order":5"#),
            "line 1: field `token_order`: expected \"value\" or \"acquisition\", found an \
             integer 5"
        );
        assert_eq!(
            header(r#""format_version":3,"scenario":5"#),
            "line 1: field `scenario`: expected a string (the scenario's name), found an integer 5"
        );
        assert_eq!(
            header(r#""scenario":"s""#),
            "line 1: field `format_version`: missing: expected a non-negative integer below 2^32 \
             (the history format version)"
        );
        // Not JSON, or JSON that is no object: said once, with the column where it matters.
        for (text, says) in [
            ("not json", "not JSON: column 2: expected ident"),
            (
                "[1]",
                "expected a JSON object (one record per line), found an array",
            ),
            (
                "{\"record\":\"op\",",
                "not JSON: column 15: EOF while parsing a value",
            ),
        ] {
            assert_eq!(
                read_jsonl(text.as_bytes()).unwrap_err().to_string(),
                format!("line 1: {says}")
            );
        }
        // A header anywhere but first is no entry.
        let late = "{\"record\":\"header\",\"format_version\":3}\n{\"record\":\"header\",\"format_version\":3}\n";
        assert_eq!(
            read_jsonl(late.as_bytes()).unwrap_err().to_string(),
            "line 2: field `record`: expected \"op\" or \"event\" (a header only on the first \
             line), found a string \"header\""
        );
    }

    /// Issue 31 item 4: a recorded client history has no local clocks, and need not number
    /// its entries; without true times the file's order stands for them, all or nothing, and
    /// what needs a real duration is refused.
    #[test]
    fn clocks_and_indexes_may_be_left_out() {
        let text = concat!(
            r#"{"record":"op","process":0,"node":"c","type":"invoke","f":"write","key":"k","value":"1"}"#,
            "\n\n",
            r#"{"record":"op","index":1,"process":0,"node":"c","type":"ok","f":"write","key":"k","value":"1"}"#,
            "\n",
        );
        let h = read_jsonl(text.as_bytes()).unwrap();
        let stamps: Vec<Stamp> = h.entries.iter().map(|e| *e.at()).collect();
        assert_eq!(
            stamps,
            [
                Stamp {
                    index: 0,
                    time_ns: 0,
                    mono_ms: 0,
                    wall_ms: 0
                },
                Stamp {
                    index: 1,
                    time_ns: 1,
                    mono_ms: 0,
                    wall_ms: 0
                }
            ]
        );
        let timed = text.replace(
            r#""process":0,"node":"c","type":"ok""#,
            r#""time_ns":7,"process":0,"node":"c","type":"ok""#,
        );
        assert_eq!(
            read_jsonl(timed.as_bytes()).unwrap_err().to_string(),
            "line 3: field `time_ns`: given, though the first entry (line 1) gives none: every \
             entry gives its true time, or none does and the file's order stands for it"
        );
        let untimed = concat!(
            r#"{"record":"op","time_ns":5,"process":0,"node":"c","type":"invoke","f":"write","key":"k","value":"1"}"#,
            "\n",
            r#"{"record":"op","process":0,"node":"c","type":"ok","f":"write","key":"k","value":"1"}"#,
            "\n",
        );
        assert_eq!(
            read_jsonl(untimed.as_bytes()).unwrap_err().to_string(),
            "line 2: field `time_ns`: missing, though the first entry (line 1) gives one: every \
             entry gives its true time, or none does and the file's order stands for it"
        );
        let ttl = r#"{"record":"op","process":0,"node":"c","type":"invoke","f":"acquire","lock":"l","ttl_ms":500}"#;
        assert_eq!(
            read_jsonl(ttl.as_bytes()).unwrap_err().to_string(),
            "line 1: field `ttl_ms`: a lease's TTL is judged against the entries' true times: \
             give every entry its time_ns (ns) too"
        );
        // Local clocks alone may be left out while true times are given.
        let times_only = r#"{"record":"op","time_ns":9,"process":0,"node":"c","type":"invoke","f":"acquire","lock":"l","ttl_ms":500}"#;
        let h = read_jsonl(times_only.as_bytes()).unwrap();
        assert_eq!(
            (h.entries[0].at().time_ns, h.entries[0].at().mono_ms),
            (9, 0)
        );
    }

    /// The names the reader checks against are the names serde reads.
    #[test]
    fn the_reader_knows_every_type_fn_and_event_name() {
        for name in TYPES {
            serde_json::from_value::<crate::OpType>(Value::from(*name)).unwrap();
        }
        for name in FNS {
            serde_json::from_value::<OpFn>(Value::from(*name)).unwrap();
        }
        for f in [
            OpFn::Acquire,
            OpFn::Renew,
            OpFn::Release,
            OpFn::Read,
            OpFn::Write,
            OpFn::Cas,
            OpFn::Delete,
        ] {
            let name = serde_json::to_value(f).unwrap();
            assert!(FNS.contains(&name.as_str().unwrap()), "{name}");
        }
        assert_eq!(EVENTS.len(), EventKind::ALL.len());
        for name in EVENTS {
            serde_json::from_value::<EventKind>(Value::from(*name)).unwrap();
        }
    }
}
