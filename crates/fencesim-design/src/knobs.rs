//! A design's knobs: the settings of its part of a scenario's `[lock_service]` table, read with
//! located errors.
//!
//! The scenario parser hands a design's [`DesignSpec::resolve`](crate::DesignSpec::resolve) the
//! `[lock_service]` table as written, less `kind` and the fields every design shares
//! (`max_ttl_ms`). The design reads each knob it has through a typed getter that names the
//! knob, checks its value and fills in the default; a wrong value is a [`KnobError`] at the
//! value's place in the file (the parser turns it into `file:line:column: field
//! `lock_service.NAME``). Each value read, default or given, is kept in the knobs'
//! [resolved](Knobs::into_resolved) table: that table is what a report carries, what `to_toml`
//! writes back and what the design's simulator glue reads again to build its settings, so
//! validation and simulation cannot disagree about a knob. A knob the design never reads is
//! refused by the parser, with the designs that do have it.

use std::collections::BTreeMap;
use std::ops::Range;

/// A byte range in the scenario file.
pub type Span = Range<usize>;

/// A knob's value as written: a TOML value (the `toml` crate's), so that a design needs no
/// dependency of its own to look at one.
pub type KnobValue = toml::Value;

/// The largest number a knob takes: 10^12, as every number of a scenario (in ms, about 31
/// years of simulated time; every time stays inside u64 nanoseconds with room for sums).
pub const MAX_KNOB_NUMBER: i64 = 1_000_000_000_000;

/// A knob's value was wrong: where, which knob, and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnobError {
    /// Where in the scenario file: the value, or the `[lock_service]` header for a knob that
    /// is missing or two knobs that disagree.
    pub span: Span,
    /// The knob's name (`replicas`); the parser qualifies it (`lock_service.replicas`).
    pub field: String,
    /// What was wrong and what was expected, one line.
    pub message: String,
}

/// The knobs of one `[lock_service]` table: the values as written (with their places in the
/// file), and the values read so far, defaults filled in.
#[derive(Debug, Clone, Default)]
pub struct Knobs {
    given: BTreeMap<String, toml::Spanned<toml::Value>>,
    resolved: toml::Table,
    header: Span,
}

impl Knobs {
    /// The knobs as written. `header` is the place of the `[lock_service]` header, where an
    /// error that belongs to no single value is reported.
    pub fn new(given: BTreeMap<String, toml::Spanned<toml::Value>>, header: Span) -> Self {
        Knobs {
            given,
            resolved: toml::Table::new(),
            header,
        }
    }

    /// Knobs written as the body of a TOML table (`"replicas = 5\nfsync = \"never\""`), with
    /// spans into `source`: for a design's unit tests, and tools that read knobs alone.
    ///
    /// # Errors
    /// `source` is not TOML.
    pub fn from_toml(source: &str) -> Result<Self, toml::de::Error> {
        Ok(Knobs::new(toml::from_str(source)?, 0..0))
    }

    /// Knobs from a table resolved earlier (a report's, or one a test edited): the same
    /// getters read it again, with every span empty.
    pub fn from_resolved(table: &toml::Table) -> Self {
        let given = table
            .iter()
            .map(|(k, v)| (k.clone(), toml::Spanned::new(0..0, v.clone())))
            .collect();
        Knobs::new(given, 0..0)
    }

    /// The values read so far, every default filled in, in the order the design read them
    /// (its own order, which `to_toml` and reports keep).
    pub fn resolved(&self) -> &toml::Table {
        &self.resolved
    }

    /// The values read, and the names of the knobs given but never read (the parser refuses
    /// those), each with its place.
    pub fn into_resolved(self) -> (toml::Table, Vec<(String, Span)>) {
        let unread = self
            .given
            .into_iter()
            .filter(|(name, _)| !self.resolved.contains_key(name))
            .map(|(name, value)| (name, value.span()))
            .collect();
        (self.resolved, unread)
    }

    /// Knob `name`'s value as written, if it was.
    pub fn given(&self, name: &str) -> Option<&toml::Value> {
        self.given.get(name).map(|v| v.get_ref())
    }

    /// Whether knob `name` was written in the file.
    pub fn is_given(&self, name: &str) -> bool {
        self.given.contains_key(name)
    }

    /// Where knob `name`'s value is, or the table's header if it was not written.
    pub fn span(&self, name: &str) -> Span {
        self.given
            .get(name)
            .map_or_else(|| self.header.clone(), |v| v.span())
    }

    /// An error about knob `name`, at its value (or the header if it was not written).
    pub fn error(&self, name: &str, message: impl Into<String>) -> KnobError {
        KnobError {
            span: self.span(name),
            field: name.to_owned(),
            message: message.into(),
        }
    }

    /// An integer knob in `min..=MAX_KNOB_NUMBER`, `default` if not written.
    pub fn integer(&mut self, name: &str, min: u64, default: u64) -> Result<u64, KnobError> {
        self.integer_in(name, min, MAX_KNOB_NUMBER as u64, default)
    }

    /// An integer knob in `min..=MAX_KNOB_NUMBER` with no default: `None` if not written (and
    /// then nothing is kept in the resolved table).
    pub fn optional_integer(&mut self, name: &str, min: u64) -> Result<Option<u64>, KnobError> {
        self.optional_integer_in(name, min, MAX_KNOB_NUMBER as u64)
    }

    /// An integer knob in `min..=max` (at most [`MAX_KNOB_NUMBER`]), `default` if not written.
    pub fn integer_in(
        &mut self,
        name: &str,
        min: u64,
        max: u64,
        default: u64,
    ) -> Result<u64, KnobError> {
        let value = self.optional_integer_in(name, min, max)?.unwrap_or(default);
        self.keep(name, toml::Value::Integer(value as i64));
        Ok(value)
    }

    fn optional_integer_in(
        &mut self,
        name: &str,
        min: u64,
        max: u64,
    ) -> Result<Option<u64>, KnobError> {
        let Some(given) = self.given.get(name) else {
            return Ok(None);
        };
        let found = match given.get_ref() {
            toml::Value::Integer(n) => *n,
            other => return Err(self.wrong_type(name, "an integer", other)),
        };
        let max = max.min(MAX_KNOB_NUMBER as u64);
        if found < min as i64 || found > max as i64 {
            let m = match (min, max == MAX_KNOB_NUMBER as u64) {
                (0, true) => format!("expected an integer >= 0 of at most {max}, found {found}"),
                (1, true) => format!("expected a positive integer of at most {max}, found {found}"),
                _ => format!("expected an integer from {min} to {max}, found {found}"),
            };
            return Err(self.error(name, m));
        }
        self.keep(name, toml::Value::Integer(found));
        Ok(Some(found as u64))
    }

    /// An integer knob that must be one of `allowed`, `default` if not written; `refusal`
    /// says what was wrong with a value given (it gets the value).
    pub fn one_of(
        &mut self,
        name: &str,
        allowed: &[u64],
        default: u64,
        refusal: impl Fn(i64) -> String,
    ) -> Result<u64, KnobError> {
        let value = match self.given.get(name).map(|v| v.get_ref()) {
            None => default,
            Some(toml::Value::Integer(n)) if *n >= 0 && allowed.contains(&(*n as u64)) => *n as u64,
            Some(toml::Value::Integer(n)) => return Err(self.error(name, refusal(*n))),
            Some(other) => return Err(self.wrong_type(name, "an integer", other)),
        };
        self.keep(name, toml::Value::Integer(value as i64));
        Ok(value)
    }

    /// A boolean knob, `default` if not written.
    pub fn boolean(&mut self, name: &str, default: bool) -> Result<bool, KnobError> {
        let value = match self.given.get(name).map(|v| v.get_ref()) {
            None => default,
            Some(toml::Value::Boolean(b)) => *b,
            Some(other) => return Err(self.wrong_type(name, "true or false", other)),
        };
        self.keep(name, toml::Value::Boolean(value));
        Ok(value)
    }

    /// A knob that names one of `options` (`("never", Fsync::Never)`, ...), `default` if not
    /// written. The resolved table keeps the name.
    pub fn choice<T: Copy + PartialEq>(
        &mut self,
        name: &str,
        options: &[(&str, T)],
        default: T,
    ) -> Result<T, KnobError> {
        let names = || {
            let quoted: Vec<String> = options.iter().map(|(n, _)| format!("`{n}`")).collect();
            match quoted.split_last() {
                Some((last, [])) => last.clone(),
                Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
                None => "nothing".to_owned(),
            }
        };
        let (word, value) = match self.given.get(name).map(|v| v.get_ref()) {
            None => options
                .iter()
                .find(|(_, v)| *v == default)
                .map(|(n, v)| (*n, *v))
                .expect("a choice's default is one of its options"),
            Some(toml::Value::String(s)) => match options.iter().find(|(n, _)| n == s) {
                Some((n, v)) => (*n, *v),
                None => {
                    let m = format!("unknown variant `{s}`, expected {}", names());
                    return Err(self.error(name, m));
                }
            },
            Some(other) => {
                let expected = format!("a string, one of {}", names());
                return Err(self.wrong_type(name, &expected, other));
            }
        };
        self.keep(name, toml::Value::String(word.to_owned()));
        Ok(value)
    }

    /// Keep `value` as knob `name`'s resolved value (a design that reads a knob of a shape the
    /// getters do not cover keeps it itself).
    pub fn keep(&mut self, name: &str, value: toml::Value) {
        self.resolved.insert(name.to_owned(), value);
    }

    fn wrong_type(&self, name: &str, expected: &str, found: &toml::Value) -> KnobError {
        self.error(
            name,
            format!("expected {expected}, found {}", describe(found)),
        )
    }
}

/// A TOML value as an error names it: its type, and the value itself if it is short.
/// A value found where another was expected, in the words the scenario parser's own errors
/// use (`string "5s"`, `floating point 1.5`, `an array`), so that a design knob's error and a
/// fixed field's read alike. A scalar longer than 40 characters is named by its type alone.
pub fn describe(value: &toml::Value) -> String {
    let kind = match value {
        toml::Value::Array(_) => return "an array".to_owned(),
        toml::Value::Table(_) => return "a table".to_owned(),
        toml::Value::Float(_) => "floating point",
        other => other.type_str(),
    };
    let text = value.to_string();
    if text.chars().count() <= 40 {
        format!("{kind} {text}")
    } else {
        kind.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn knobs(source: &str) -> Knobs {
        Knobs::from_toml(source).expect("test source parses")
    }

    #[test]
    fn values_are_read_located_and_kept_with_defaults() {
        let mut k = knobs("replicas = 5\nfsync = \"never\"\n");
        assert_eq!(k.one_of("replicas", &[3, 5], 3, |n| format!("{n}")), Ok(5));
        assert_eq!(k.choice("fsync", &[("always", 1), ("never", 2)], 1), Ok(2));
        assert_eq!(k.boolean("revoke_term_check", true), Ok(true));
        let (resolved, unread) = k.into_resolved();
        assert!(unread.is_empty());
        assert_eq!(
            resolved.to_string(),
            "replicas = 5\nfsync = \"never\"\nrevoke_term_check = true\n",
            "in the order the design read them"
        );
    }

    #[test]
    fn a_wrong_value_is_an_error_at_the_value() {
        let source = "drift_ppm = -3\ntoken_source = \"sequence\"\nrecheck = 1\n";
        let mut k = knobs(source);
        let e = k.integer("drift_ppm", 0, 10).unwrap_err();
        assert_eq!(&source[e.span.clone()], "-3");
        assert_eq!(
            e.message,
            "expected an integer >= 0 of at most 1000000000000, found -3"
        );
        let e = k
            .choice("token_source", &[("random", 0), ("counter", 1)], 0)
            .unwrap_err();
        assert_eq!(&source[e.span.clone()], "\"sequence\"");
        assert_eq!(
            e.message,
            "unknown variant `sequence`, expected `random` or `counter`"
        );
        let e = k.boolean("recheck", true).unwrap_err();
        assert_eq!(e.message, "expected true or false, found integer 1");
        assert_eq!(e.field, "recheck");
    }

    #[test]
    fn knobs_never_read_are_reported_with_their_places() {
        let source = "replicas = 3\nreaper = \"ignores-leases\"\n";
        let mut k = knobs(source);
        k.integer("replicas", 1, 3).unwrap();
        let (_, unread) = k.into_resolved();
        assert_eq!(unread.len(), 1);
        assert_eq!(unread[0].0, "reaper");
        assert_eq!(&source[unread[0].1.clone()], "\"ignores-leases\"");
    }

    #[test]
    fn a_resolved_table_reads_back_to_the_same_values() {
        let mut k = knobs("node_timeout_ms = 50\n");
        k.integer("node_timeout_ms", 1, 10).unwrap();
        k.integer("drift_ppm", 0, 10).unwrap();
        let (resolved, _) = k.into_resolved();
        let mut again = Knobs::from_resolved(&resolved);
        assert_eq!(again.integer("node_timeout_ms", 1, 10), Ok(50));
        assert_eq!(again.integer("drift_ppm", 0, 99), Ok(10));
    }

    #[test]
    fn a_bounded_integer_says_its_bounds() {
        let mut k = knobs("drift_ppm = -1");
        let e = k.integer_in("drift_ppm", 0, 999_999, 10).unwrap_err();
        assert_eq!(e.message, "expected an integer from 0 to 999999, found -1");
        assert_eq!(knobs("n = 7").integer_in("n", 0, 9, 1), Ok(7));
    }
}
