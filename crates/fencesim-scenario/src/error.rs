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

    /// Translate a TOML or serde error, guessing the field from the message or the source line.
    pub(crate) fn from_toml(err: &toml::de::Error, source: &str, file: &str) -> Self {
        let span = err.span().unwrap_or(0..0);
        let message = err.message().trim().replace('\n', " ");
        let field = quoted_field(&message)
            .or_else(|| key_on_line(source, span.start))
            .unwrap_or_else(|| "(document)".to_owned());
        Self::at(source, file, span, &field, message)
    }
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

/// The `key` of a `key = value` line containing byte `offset`.
fn key_on_line(source: &str, offset: usize) -> Option<String> {
    let offset = offset.min(source.len());
    let start = source[..offset].rfind('\n').map_or(0, |i| i + 1);
    let end = source[offset..]
        .find('\n')
        .map_or(source.len(), |i| offset + i);
    let (key, _) = source[start..end].split_once('=')?;
    let key = key.trim();
    (!key.is_empty()).then(|| key.to_owned())
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
            key_on_line("a = 1\n ttl_ms = \"x\"\n", 12),
            Some("ttl_ms".into())
        );
    }
}
