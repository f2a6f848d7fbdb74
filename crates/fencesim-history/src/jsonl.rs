//! JSON Lines reading and writing: a header line, then one entry per line.

use std::io::{self, BufRead, Write};

use serde::{Deserialize, Serialize};

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

/// Only the `record` field of a line, to tell a header from an entry.
#[derive(Deserialize)]
struct RecordKind {
    record: String,
}

/// Read a JSON Lines history. The first non-empty line is the header, or (history format 3)
/// already an entry, and then the history has [`Header::unnamed`]: a recording of a real
/// system need not invent a scenario, seed or tool version. Every entry's `index` must equal
/// its position, so a truncated or reordered file is caught.
pub fn read_jsonl(input: impl BufRead) -> Result<History, HistoryError> {
    let mut header = None;
    let mut entries = Vec::new();
    for (i, line) in input.lines().enumerate() {
        let line = line?;
        let line_no = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let parse_err = |e: serde_json::Error| HistoryError::Parse {
            line: line_no,
            message: crate::cap_message(e.to_string()),
        };
        if header.is_none() {
            let kind: RecordKind = serde_json::from_str(&line).map_err(parse_err)?;
            if kind.record == "header" {
                let h: HeaderLine = serde_json::from_str(&line).map_err(parse_err)?;
                check_header(&h, line_no)?;
                header = Some(h.header);
                continue;
            }
            header = Some(Header::unnamed());
        }
        let entry: Entry = serde_json::from_str(&line).map_err(|e| HistoryError::Parse {
            line: line_no,
            // serde's message for a record names no field (the record's kind is a tag, which
            // hides the path): read it again as its kind's type to name the field.
            message: field_of(&line).unwrap_or_else(|| crate::cap_message(e.to_string())),
        })?;
        if let Entry::Op(op) = &entry {
            op_fields(op).map_err(|message| HistoryError::Parse {
                line: line_no,
                message,
            })?;
        }
        let expected = entries.len() as u64;
        if entry.at().index != expected {
            return Err(HistoryError::Parse {
                line: line_no,
                message: format!(
                    "index {} out of order, expected {expected}",
                    entry.at().index
                ),
            });
        }
        entries.push(entry);
    }
    let header = header.ok_or(HistoryError::Parse {
        line: 1,
        message: "empty file: expected a header line or an entry".into(),
    })?;
    Ok(History { header, entries })
}

/// The error of a record that did not read, with the field that was wrong (`field `token`:
/// invalid type: string "1", expected u64`), when reading it as its kind's own type finds one.
fn field_of(line: &str) -> Option<String> {
    fn named<T: serde::de::DeserializeOwned>(line: &str) -> Option<String> {
        let mut de = serde_json::Deserializer::from_str(line);
        let e = serde_path_to_error::deserialize::<_, T>(&mut de).err()?;
        let path = e.path().to_string();
        // `?` and `.`: no field to name (the record as a whole, or a flattened part).
        let field = path.trim_start_matches('.');
        (!field.is_empty() && !field.contains('?')).then(|| {
            let inner = e.into_inner();
            // serde_json says "at line 1 column N": each record is a line of its own, so the
            // column is what tells where.
            let text = inner.to_string();
            let what = text.split(" at line ").next().unwrap_or(&text);
            crate::cap_message(format!(
                "field `{field}`: {what} (column {})",
                inner.column()
            ))
        })
    }
    match serde_json::from_str::<RecordKind>(line)
        .ok()?
        .record
        .as_str()
    {
        "op" => named::<crate::Op>(line),
        "event" => named::<crate::Event>(line),
        _ => None,
    }
}

/// What an operation must name to be judged at all: a read, write or cas its key, a lock
/// operation its lock, a cas invocation the value it sets. Without them the checks would pass
/// over the operation in silence.
fn op_fields(op: &crate::Op) -> Result<(), String> {
    use crate::{OpFn, OpType};
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

/// A header must be of a format this reader understands.
fn check_header(h: &HeaderLine, line: usize) -> Result<(), HistoryError> {
    let message = if h.header.format_version > crate::FORMAT_VERSION {
        format!(
            "format_version {} is newer than this reader's {}",
            h.header.format_version,
            crate::FORMAT_VERSION
        )
    } else {
        return Ok(());
    };
    Err(HistoryError::Parse {
        line,
        message: crate::cap_message(message),
    })
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
        assert_eq!(err, "line 1: missing field `process`");
        let err = read_jsonl(r#"{"record":"footer"}"#.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("line 1: unknown variant `footer`"), "{err}");
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
            r#"{"record":"op","index":1,"time_ns":5,"mono_ms":0,"wall_ms":0,"process":0,"node":"c","type":"ok","f":"read","key":"k","value_unknown":true}"#,
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
        assert!(ops[1].value_unknown && !ops[0].value_unknown);
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

    /// A field of the wrong type is named, with its column.
    #[test]
    fn a_field_of_the_wrong_type_is_named() {
        let line = "{\"record\":\"op\",\"index\":0,\"time_ns\":0,\"mono_ms\":0,\"wall_ms\":0,\
                    \"process\":0,\"node\":\"c\",\"type\":\"invoke\",\"f\":\"write\",\
                    \"key\":\"k\",\"token\":\"1\"}\n";
        assert_eq!(
            read_jsonl(line.as_bytes()).unwrap_err().to_string(),
            "line 1: field `token`: invalid type: string \"1\", expected u64 (column 133)"
        );
    }
}
