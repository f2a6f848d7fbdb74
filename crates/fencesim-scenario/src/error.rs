//! Located scenario errors: one line, `file:line:column: field `name`: what was expected`.

use std::ops::Range;

/// Why a scenario could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{file}: cannot read scenario: {message}")]
    Io {
        /// The path as given.
        file: String,
        /// The operating system's reason.
        message: String,
    },
    /// The file was read but a field is wrong.
    #[error("{file}:{line}:{column}: field `{field}`: {message}")]
    Invalid {
        /// The path as given.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column (in characters).
        column: usize,
        /// The offending field (`clients.ttl_ms`-style where known, else the key on that line).
        field: String,
        /// What was wrong and what was expected.
        message: String,
    },
}

impl ScenarioError {
    /// An error at byte `span` of `source`.
    pub(crate) fn at(
        source: &str,
        file: &str,
        span: Range<usize>,
        field: &str,
        message: impl Into<String>,
    ) -> Self {
        let (line, column) = line_column(source, span.start);
        ScenarioError::Invalid {
            file: file.to_owned(),
            line,
            column,
            field: fencesim_history::cap_message(field),
            message: fencesim_history::cap_message(message),
        }
    }

    /// Translate a TOML or serde error, guessing the field from the message or the source
    /// lines (the key of a value that spans lines is on the line that opens it), qualified by
    /// the table it is in (`clients.renew_ms`). An unknown field gets the nearest known name.
    pub(crate) fn from_toml(err: &toml::de::Error, source: &str, file: &str) -> Self {
        let span = err.span().unwrap_or(0..0);
        let mut message = plain_words(err.message().trim(), source, &span);
        // `[[resource]]`: whatever serde made of an array where one table belongs.
        let line = line_at(source, span.start)
            .map(str::trim)
            .unwrap_or_default();
        let single = ["network", "lock_service", "resource", "nemesis", "expect"];
        if single.iter().any(|t| line == format!("[[{t}]]")) {
            message = "expected a table, found an array (`[[...]]` is an array of tables)".into();
        }
        let key = quoted_field(&message).or_else(|| key_above(source, span.start));
        if let Some(known) = key.as_deref().and_then(|k| suggestion(k, &message)) {
            let unknown = key.as_deref().unwrap_or_default();
            message = message.replacen(
                &format!("`{unknown}`"),
                &format!("`{unknown}` (did you mean `{known}`?)"),
                1,
            );
        }
        let header = line_at(source, span.start).and_then(table_header);
        let field = match (key, table_at(source, span.start)) {
            (Some(key), Some(table)) => format!("{table}.{key}"),
            (Some(key), None) => key,
            // A whole table of the wrong shape (`[[lock_service]]`) is reported at its header.
            (None, Some(table)) if header.is_some() => table,
            // A syntax error (a broken header, say) names no field.
            (None, _) => "(document)".to_owned(),
        };
        Self::at(source, file, span, &field, message)
    }
}

/// serde's and toml's words for a value of the wrong shape, in the scenario format's terms:
/// no Rust type (`i128`, `u64`), no `map` or `sequence`. Other messages are kept, on one line.
fn plain_words(message: &str, source: &str, span: &Range<usize>) -> String {
    let message = message.replace('\n', " ");
    let limit = crate::validate::MAX_NUMBER;
    // An integer beyond i64 (toml reads it as i128) or u64.
    let too_large = message.contains("` as i128") || message.contains("u64 value was too large");
    if too_large {
        let text = source.get(span.clone()).unwrap_or_default().trim();
        let found = if text.is_empty() || text.len() > 40 {
            "a larger one".to_owned()
        } else {
            text.to_owned()
        };
        return format!("expected an integer between -{limit} and {limit}, found {found}");
    }
    if let Some((found, expected)) = message
        .strip_prefix("invalid type: ")
        .and_then(|m| m.split_once(", expected "))
    {
        let expected = match expected {
            "a map" => "a table",
            "a sequence" if found == "map" => "an array of tables (`[[...]]`)",
            "a sequence" => "an array",
            e if e.starts_with("struct ") => "a table",
            "i8" | "i16" | "i32" | "i64" | "i128" | "u8" | "u16" | "u32" | "u64" | "u128"
            | "usize" => "an integer",
            "f32" | "f64" => "a number",
            e => e,
        };
        let found = match found {
            "map" => "a table".to_owned(),
            "sequence" if expected == "a table" => {
                "an array (`[[...]]` is an array of tables)".to_owned()
            }
            "sequence" => "an array".to_owned(),
            f => f.replace('`', ""),
        };
        return format!("expected {expected}, found {found}");
    }
    // A table written as an array (`resource = ["a"]`), or a single table as an array of them.
    if message.starts_with("invalid length ") && message.contains("expected struct ") {
        return "expected a table, found an array".to_owned();
    }
    // toml's words for an enum given a value that is no name (`kind = 5`): every enum of the
    // format is written as a string, so a table is no option.
    if message.starts_with("wanted string or table") {
        let text = source.get(span.clone()).unwrap_or_default().trim();
        let value = format!("value = {text}").parse::<toml::Table>().ok();
        return match value.as_ref().and_then(|t| t.get("value")) {
            Some(found) => format!(
                "expected a string, found {}",
                fencesim_design::knobs::describe(found)
            ),
            None => "expected a string".to_owned(),
        };
    }
    if message.starts_with("wanted exactly 1 element") {
        return "expected one table, found an array of tables (`[[...]]`)".to_owned();
    }
    message
}

/// The line of `source` that byte `offset` is on.
fn line_at(source: &str, offset: usize) -> Option<&str> {
    let offset = offset.min(source.len());
    let start = source[..offset].rfind('\n').map_or(0, |i| i + 1);
    source[start..].lines().next()
}

/// For serde's "unknown field `x`, expected one of `a`, `b`": the listed name meant by `x`,
/// the name with its unit left off (`ttl` for `ttl_ms`) or else the nearest by edit distance.
fn suggestion<'m>(unknown: &str, message: &'m str) -> Option<&'m str> {
    message.strip_prefix("unknown field `")?;
    let (_, listed) = message.split_once("expected one of ")?;
    let names = || listed.split('`').skip(1).step_by(2);
    let with_unit = names().find(|n| {
        n.strip_prefix(unknown)
            .is_some_and(|unit| matches!(unit, "_ms" | "_ppm"))
    });
    with_unit.or_else(|| fencesim_history::nearest(unknown, names()))
}

/// The name of the table (`[name]` or `[[name]]`) that byte `offset` is in, if any. The
/// offset's own line counts: a table that lacks a required field is reported at its header.
fn table_at(source: &str, offset: usize) -> Option<String> {
    let offset = offset.min(source.len());
    let end = source[offset..]
        .find('\n')
        .map_or(source.len(), |i| offset + i);
    source[..end].lines().rev().find_map(table_header)
}

/// The name in a `[name]` or `[[name]]` line (not an array's continuation such as `[1, 2],`).
fn table_header(line: &str) -> Option<String> {
    let line = line.trim();
    let inner = line.strip_prefix("[[").and_then(|l| l.strip_suffix("]]"));
    let inner = inner.or_else(|| line.strip_prefix('[').and_then(|l| l.strip_suffix(']')))?;
    bare_key(inner.trim()).then(|| inner.trim().to_owned())
}

/// Whether `key` is a bare TOML key (dotted or not).
fn bare_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// The key of the `key = value` at byte `offset`: on its line, or, for a value that spans
/// lines (an array), on the line that opens it: the lines between end in `,` or `[`.
fn key_above(source: &str, offset: usize) -> Option<String> {
    let offset = offset.min(source.len());
    let end = source[offset..]
        .find('\n')
        .map_or(source.len(), |i| offset + i);
    let lines: Vec<&str> = source[..end].lines().collect();
    let (last, above) = lines.split_last()?;
    if let Some(key) = key_of(last) {
        return Some(key);
    }
    for line in above.iter().rev() {
        let line = line.trim_end();
        if !(line.ends_with(',') || line.ends_with('[')) {
            return None;
        }
        if let Some(key) = key_of(line) {
            return Some(key);
        }
    }
    None
}

/// The key of a `key = value` line.
fn key_of(line: &str) -> Option<String> {
    let (key, _) = line.split_once('=')?;
    let key = key.trim();
    bare_key(key).then(|| key.to_owned())
}

/// 1-based line and column of byte `offset`.
fn line_column(source: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(source.len());
    let before = &source[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// The field named in serde's "unknown field `x`" / "missing field `x`" messages.
fn quoted_field(message: &str) -> Option<String> {
    let rest = message
        .strip_prefix("unknown field `")
        .or_else(|| message.strip_prefix("missing field `"))?;
    rest.split('`').next().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based() {
        assert_eq!(line_column("ab\ncd", 0), (1, 1));
        assert_eq!(line_column("ab\ncd", 4), (2, 2));
    }

    #[test]
    fn field_guesses() {
        assert_eq!(
            quoted_field("unknown field `ttl`, expected one of"),
            Some("ttl".into())
        );
        assert_eq!(
            key_above("a = 1\n ttl_ms = \"x\"\n", 12),
            Some("ttl_ms".into())
        );
        let nemesis = "[nemesis]\nkinds = [\"pause\",\n  \"hold-al\"]\n";
        let at = nemesis.find("hold-al").unwrap();
        assert_eq!(key_above(nemesis, at), Some("kinds".into()));
        assert_eq!(table_at(nemesis, at), Some("nemesis".into()));
        assert_eq!(
            table_at("[[clients]]\nname = 1", 14),
            Some("clients".into())
        );
        let missing = "[resource]\nmode = \"fenced\"\n[nemesis]\nkinds = [\"pause\"]\n";
        assert_eq!(
            table_at(missing, missing.find("[nemesis]").unwrap()),
            Some("nemesis".into()),
            "a missing field is reported at its own table's header, not the one above"
        );
        assert_eq!(
            key_above("a = 1\n[expect", 10),
            None,
            "a broken header is no value of `a`"
        );
        let arrays = "[network]\nlinks = [\n[1, 2],\n  \"x\"]";
        let at = arrays.find("\"x\"").unwrap();
        assert_eq!(
            (key_above(arrays, at), table_at(arrays, at)),
            (Some("links".into()), Some("network".into()))
        );
        let unknown = "unknown field `renw_ms`, expected one of `name`, `renew_ms`, `ttl_ms`";
        assert_eq!(suggestion("renw_ms", unknown), Some("renew_ms"));
        assert_eq!(
            suggestion("ttl", unknown),
            Some("ttl_ms"),
            "the unit left off"
        );
        assert_eq!(suggestion("zzz", unknown), None);
    }
}
