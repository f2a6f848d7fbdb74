//! A small, bounded reader and writer for the part of EDN that Jepsen histories use.
//!
//! [`parse_all`] reads every top-level value of a text into [`Node`]s: an [`Edn`] value plus
//! the line and column where it starts, so that a caller can say where a bad field is even
//! inside a map spread over several lines. [`Edn::write`] (and `Display`) turns a value back
//! into EDN text that `parse_all` reads back to an equal value.
//!
//! The reader is built to survive hostile input: it never panics, never recurses (collections,
//! tags and `#_` are kept on an explicit stack capped at [`MAX_DEPTH`]), never expands a number
//! (big integers and decimals stay as their text, and a number literal is at most
//! [`MAX_NUMBER_LEN`] characters), and does work linear in the size of the input.
//!
//! What is read:
//!
//! - whitespace is spaces, tabs, line breaks, form feeds and commas; `;` starts a comment that
//!   runs to the end of the line; a byte order mark at the very start is skipped;
//! - `nil`, `true`, `false`;
//! - numbers: an optional sign, digits, an optional fraction and exponent, and an optional
//!   `N` (big integer) or `M` (decimal) suffix; `##Inf`, `##-Inf` and `##NaN`. Integers with a
//!   leading zero (Clojure's octal), hexadecimal, radix and ratio (`1/2`) literals are errors;
//! - strings with the escapes `\" \\ \/ \n \t \r \b \f` and `\uXXXX` (exactly four hex digits;
//!   a UTF-16 surrogate pair, `\uD83D\uDE00`, is the one character it encodes, and a lone
//!   surrogate is an error); characters `\c`, `\newline`, `\space`, `\tab`, `\return`,
//!   `\formfeed`, `\backspace` and `\uXXXX`;
//! - keywords (`:name`, `:ns/name`) and symbols following EDN's rules;
//! - lists `( )`, vectors `[ ]`, maps `{ }`, sets `#{ }`, tagged values `#tag value`
//!   (such as `#inst "…"`, `#uuid "…"` or Jepsen's records `#jepsen.history.Op{…}`) and the
//!   discard `#_ value`. A map with two keys, or a set with two elements, that Clojure's `=`
//!   calls equal ([`Edn::equiv`]: `{:a 1 :a 2}`, `#{1 1N}`) is an error, as in Clojure's
//!   reader, located at the second one; finding them costs a hash per key or element, built
//!   from its parts' hashes, so the work stays linear.
//!
//! Not read (each is an error with its position): namespaced maps (`#:ns{…}`), regexes,
//! reader conditionals and the other Clojure-only `#` forms, `'`, `` ` ``, `~`, `@`, `^`.

use std::fmt;

/// The deepest nesting [`parse_all`] accepts, counting every open collection, every `#tag`
/// waiting for its value and every `#_` waiting for the value it discards. One level more is
/// the error "nested deeper than 256 levels".
pub const MAX_DEPTH: usize = 256;

/// The longest number literal [`parse_all`] accepts, in characters (suffix and sign included).
/// A longer one is the error "number too long".
pub const MAX_NUMBER_LEN: usize = 4096;

/// How many characters of offending text an error message quotes at most.
const QUOTE_LEN: usize = 40;

/// How many characters [`Edn::brief`] returns at most.
const BRIEF_LEN: usize = 60;

/// One EDN value. Collections hold [`Node`]s, so every element keeps its position.
///
/// Equality (`==`) is structural and ignores positions: sets and maps compare in file order
/// (`#{1 2}` is not equal to `#{2 1}`), numbers of different variants never compare equal
/// (`Int(1)` is not `Float(1.0)`, nor `BigInt("1")`), and two NaN floats compare equal so
/// that `##NaN` round-trips. That is what a round trip through the writer needs; Jepsen and
/// Knossos compare values with Clojure's `=` instead, which [`Edn::equiv`] and
/// [`Edn::canonical`] give.
#[derive(Debug, Clone)]
pub enum Edn {
    /// `nil`.
    Nil,
    /// `true` or `false`.
    Bool(bool),
    /// An integer literal without suffix that fits an `i64`.
    Int(i64),
    /// An integer literal with the `N` suffix, or without suffix but outside the `i64` range:
    /// its text as written, sign included and suffix removed (`-12N` is `"-12"`). Never
    /// converted, so its size is bounded by [`MAX_NUMBER_LEN`].
    BigInt(String),
    /// A literal with a fraction or exponent and no suffix, read with Rust's `f64` parser;
    /// out-of-range literals become infinite or zero. Also `##Inf`, `##-Inf` and `##NaN`.
    Float(f64),
    /// A literal with the `M` suffix: its text as written, sign included and suffix removed
    /// (`1.50M` is `"1.50"`). Its exponent must fit in 32 bits, as for Java's `BigDecimal`.
    Decimal(String),
    /// A string, escapes resolved.
    Str(String),
    /// A character literal.
    Char(char),
    /// A keyword's name without the colon, namespace kept: `:jepsen.history/op` is
    /// `"jepsen.history/op"`.
    Keyword(String),
    /// A symbol's text, namespace kept: `a.b/c` is `"a.b/c"`.
    Symbol(String),
    /// `( … )`.
    List(Vec<Node>),
    /// `[ … ]`.
    Vector(Vec<Node>),
    /// `#{ … }`, in file order. [`parse_all`] refuses equal elements (by Clojure's `=`); a
    /// set built in code may hold them.
    Set(Vec<Node>),
    /// `{ k v … }` as (key, value) pairs in file order. [`parse_all`] refuses equal keys (by
    /// Clojure's `=`); a map built in code may hold them, and [`Node::get`] returns the first.
    Map(Vec<(Node, Node)>),
    /// `#tag value`: the tag without `#` (`"inst"`, `"jepsen.history.Op"`) and the value.
    Tagged(String, Box<Node>),
}

/// A value and where it starts in the text it was read from.
///
/// Equality (`==`) compares only the values, never the positions.
#[derive(Debug, Clone)]
pub struct Node {
    /// The value.
    pub value: Edn,
    /// The 1-based line of the value's first character (its opening bracket for a
    /// collection, its `#` for a tagged value); 0 for a value built in code.
    pub line: usize,
    /// The 1-based column of the value's first character, counted in characters (not bytes);
    /// 0 for a value built in code.
    pub column: usize,
}

/// Why a text is not EDN that [`parse_all`] reads, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdnError {
    /// The 1-based line where the problem is (for an unterminated string or collection, where
    /// it was opened).
    pub line: usize,
    /// The 1-based column where the problem is, counted in characters.
    pub column: usize,
    /// What was expected and what was found, quoting at most about 40 characters of the text.
    pub message: String,
}

impl fmt::Display for EdnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.message
        )
    }
}

impl std::error::Error for EdnError {}

impl Node {
    /// A node for a value built in code, at line 0, column 0.
    pub fn new(value: Edn) -> Node {
        Node {
            value,
            line: 0,
            column: 0,
        }
    }

    /// The value of the first entry whose key is the keyword `keyword_name` (without the
    /// colon, namespace included: `"jepsen.history/op"`), if this node is a map or a tagged
    /// map (a record such as `#jepsen.history.Op{…}`); `None` if there is no such entry or
    /// this node is anything else.
    pub fn get(&self, keyword_name: &str) -> Option<&Node> {
        let map = match &self.value {
            Edn::Tagged(_, inner) => &inner.value,
            other => other,
        };
        match map {
            Edn::Map(entries) => entries
                .iter()
                .find(|(key, _)| matches!(&key.value, Edn::Keyword(name) if name == keyword_name))
                .map(|(_, value)| value),
            _ => None,
        }
    }
}

impl From<Edn> for Node {
    fn from(value: Edn) -> Node {
        Node::new(value)
    }
}

impl PartialEq for Node {
    fn eq(&self, other: &Node) -> bool {
        self.value == other.value
    }
}

impl PartialEq for Edn {
    fn eq(&self, other: &Edn) -> bool {
        match (self, other) {
            (Edn::Nil, Edn::Nil) => true,
            (Edn::Bool(a), Edn::Bool(b)) => a == b,
            (Edn::Int(a), Edn::Int(b)) => a == b,
            (Edn::Float(a), Edn::Float(b)) => a == b || (a.is_nan() && b.is_nan()),
            (Edn::Char(a), Edn::Char(b)) => a == b,
            (Edn::BigInt(a), Edn::BigInt(b))
            | (Edn::Decimal(a), Edn::Decimal(b))
            | (Edn::Str(a), Edn::Str(b))
            | (Edn::Keyword(a), Edn::Keyword(b))
            | (Edn::Symbol(a), Edn::Symbol(b)) => a == b,
            (Edn::List(a), Edn::List(b))
            | (Edn::Vector(a), Edn::Vector(b))
            | (Edn::Set(a), Edn::Set(b)) => a == b,
            (Edn::Map(a), Edn::Map(b)) => a == b,
            (Edn::Tagged(t, a), Edn::Tagged(u, b)) => t == u && a == b,
            _ => false,
        }
    }
}

impl Edn {
    /// What kind of value this is, for messages: "nil", "boolean", "integer", "big integer",
    /// "float", "decimal", "string", "character", "keyword", "symbol", "list", "vector",
    /// "set", "map" or "tagged value".
    pub fn type_name(&self) -> &'static str {
        match self {
            Edn::Nil => "nil",
            Edn::Bool(_) => "boolean",
            Edn::Int(_) => "integer",
            Edn::BigInt(_) => "big integer",
            Edn::Float(_) => "float",
            Edn::Decimal(_) => "decimal",
            Edn::Str(_) => "string",
            Edn::Char(_) => "character",
            Edn::Keyword(_) => "keyword",
            Edn::Symbol(_) => "symbol",
            Edn::List(_) => "list",
            Edn::Vector(_) => "vector",
            Edn::Set(_) => "set",
            Edn::Map(_) => "map",
            Edn::Tagged(..) => "tagged value",
        }
    }

    /// The value as EDN text cut to at most 60 characters (the last one `…` when cut), for
    /// error messages. Only about 60 characters are ever rendered, however big the value.
    pub fn brief(&self) -> String {
        let mut out = String::new();
        let mut sink = Sink {
            out: &mut out,
            room: Some(BRIEF_LEN),
            cut: false,
        };
        write_value(self, &mut sink);
        if sink.cut {
            out.pop();
            out.push('…');
        }
        out
    }

    /// Appends the value to `out` as EDN text that [`parse_all`] reads back to an equal value:
    /// strings and characters escaped, `[a b]`, `(a b)`, `#{a b}`, `{:k v, :k2 v2}`,
    /// `#tag value`, big integers with `N`, decimals with `M`, floats always with a `.` or an
    /// exponent (`1.0`, `1e300`) and `##NaN`, `##Inf`, `##-Inf`.
    ///
    /// Text kept in a value (symbols, keywords, tags, big integers, decimals) is written as it
    /// is, so a value built in code reads back only if that text is what the reader would have
    /// produced: a valid symbol that is not `nil`, `true` or `false`, a non-empty keyword name,
    /// a tag starting with a letter, a number literal without its suffix. Writing does not
    /// recurse, so any depth can be written (dropping or comparing a value built in code
    /// deeper than [`MAX_DEPTH`] does recurse).
    pub fn write(&self, out: &mut String) {
        let mut sink = Sink {
            out,
            room: None,
            cut: false,
        };
        write_value(self, &mut sink);
    }

    /// The value's canonical text: two values have the same canonical text exactly when
    /// Clojure's `=` calls them equal, which is how Knossos and Jepsen compare the values of a
    /// history. It is EDN that [`parse_all`] reads back to a value with the same canonical
    /// text:
    ///
    /// - sets and maps are order-free: set elements, and map entries by key, are sorted by
    ///   their canonical text (`#{2 1}` is `#{1 2}`, `{:b 2 :a 1}` is `{:a 1, :b 2}`);
    /// - lists and vectors are both sequential, and written `[…]` (`(1 2)` is `[1 2]`);
    /// - integers compare by value whatever their size or suffix (`1N` is `1`, `+007N` is
    ///   `7`); decimals compare by value, scale ignored (`1.50M` is `1.5M`, `1e2M` is
    ///   `100M`); floats as `f64`s (`-0.0` is `0.0`). The three kinds never equal each
    ///   other (`1`, `1.0` and `1M` differ), as in Clojure;
    /// - strings, characters, keywords and symbols are distinct kinds (`"a"`, `\a`, `:a` and
    ///   `a` differ), and `nil` is neither `false` nor anything else;
    /// - a tagged value equals one with the same tag and an equal value.
    ///
    /// Two departures from Clojure, both where Clojure's answer comes from Java rather than
    /// from the data: `##NaN` equals `##NaN` (Clojure's `=` never calls two NaNs read
    /// separately equal, so a register written NaN could never be read back), and tagged
    /// values compare by their text (`#inst "2024-01-01"` and `#inst
    /// "2024-01-01T00:00:00Z"`, the same instant, differ; Clojure compares the instants).
    ///
    /// Does not recurse. Each level of nesting copies the text of the levels below it, so the
    /// work is at most the value's size times its depth (at most [`MAX_DEPTH`] for a value
    /// read by [`parse_all`]).
    pub fn canonical(&self) -> String {
        fold(self, canonical_scalar, canonical_collection)
    }

    /// Whether Clojure's `=` calls the two values equal (with the departures
    /// [`Edn::canonical`] lists): their canonical texts are the same. `==` is stricter: it
    /// compares structure, order and number variants.
    pub fn equiv(&self, other: &Edn) -> bool {
        self.canonical() == other.canonical()
    }
}

impl fmt::Display for Edn {
    /// The value as EDN text, as [`Edn::write`] gives it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        self.write(&mut out);
        f.write_str(&out)
    }
}

impl fmt::Display for Node {
    /// The node's value as EDN text, as [`Edn::write`] gives it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value.fmt(f)
    }
}

// ---------------------------------------------------------------------------------------------
// Writer

/// Where written text goes; with `room`, at most that many characters, `cut` set when more
/// were offered.
struct Sink<'o> {
    out: &'o mut String,
    room: Option<usize>,
    cut: bool,
}

impl Sink<'_> {
    fn push(&mut self, c: char) {
        match &mut self.room {
            None => self.out.push(c),
            Some(0) => self.cut = true,
            Some(room) => {
                self.out.push(c);
                *room -= 1;
            }
        }
    }

    fn push_str(&mut self, text: &str) {
        if self.room.is_none() {
            self.out.push_str(text);
            return;
        }
        for c in text.chars() {
            if self.cut {
                return;
            }
            self.push(c);
        }
    }
}

/// Work left for the writer: collections are written one element at a time from here, so
/// neither the depth nor the size of a value makes the writer recurse or queue much.
enum Task<'v> {
    Value(&'v Edn),
    Text(&'static str),
    Items {
        items: &'v [Node],
        next: usize,
        close: &'static str,
    },
    Entries {
        entries: &'v [(Node, Node)],
        next: usize,
    },
}

fn write_value(value: &Edn, sink: &mut Sink<'_>) {
    let mut tasks = vec![Task::Value(value)];
    while let Some(task) = tasks.pop() {
        if sink.cut {
            return;
        }
        match task {
            Task::Items { items, next, close } => match items.get(next) {
                None => sink.push_str(close),
                Some(item) => {
                    if next > 0 {
                        sink.push(' ');
                    }
                    tasks.push(Task::Items {
                        items,
                        next: next + 1,
                        close,
                    });
                    tasks.push(Task::Value(&item.value));
                }
            },
            Task::Entries { entries, next } => match entries.get(next) {
                None => sink.push('}'),
                Some((key, value)) => {
                    if next > 0 {
                        sink.push_str(", ");
                    }
                    tasks.push(Task::Entries {
                        entries,
                        next: next + 1,
                    });
                    tasks.push(Task::Value(&value.value));
                    tasks.push(Task::Text(" "));
                    tasks.push(Task::Value(&key.value));
                }
            },
            Task::Text(text) => sink.push_str(text),
            Task::Value(value) => write_scalar_or_open(value, sink, &mut tasks),
        }
    }
}

/// Writes a scalar, or the opening of a collection and queues its elements.
fn write_scalar_or_open<'v>(value: &'v Edn, sink: &mut Sink<'_>, tasks: &mut Vec<Task<'v>>) {
    match value {
        Edn::Nil => sink.push_str("nil"),
        Edn::Bool(true) => sink.push_str("true"),
        Edn::Bool(false) => sink.push_str("false"),
        Edn::Int(n) => sink.push_str(&n.to_string()),
        Edn::BigInt(text) => {
            sink.push_str(text);
            sink.push('N');
        }
        Edn::Decimal(text) => {
            sink.push_str(text);
            sink.push('M');
        }
        Edn::Float(x) => write_float(*x, sink),
        Edn::Str(text) => write_string(text, sink),
        Edn::Char(c) => write_char(*c, sink),
        Edn::Keyword(name) => {
            sink.push(':');
            sink.push_str(name);
        }
        Edn::Symbol(name) => sink.push_str(name),
        Edn::List(items) | Edn::Vector(items) | Edn::Set(items) => {
            let (open, close) = match value {
                Edn::List(_) => ("(", ")"),
                Edn::Vector(_) => ("[", "]"),
                _ => ("#{", "}"),
            };
            sink.push_str(open);
            tasks.push(Task::Items {
                items,
                next: 0,
                close,
            });
        }
        Edn::Map(entries) => {
            sink.push('{');
            tasks.push(Task::Entries { entries, next: 0 });
        }
        Edn::Tagged(tag, inner) => {
            sink.push('#');
            sink.push_str(tag);
            sink.push(' ');
            tasks.push(Task::Value(&inner.value));
        }
    }
}

fn write_float(x: f64, sink: &mut Sink<'_>) {
    if x.is_nan() {
        sink.push_str("##NaN");
    } else if x == f64::INFINITY {
        sink.push_str("##Inf");
    } else if x == f64::NEG_INFINITY {
        sink.push_str("##-Inf");
    } else {
        // `{:?}` is the shortest text that reads back to the same f64, and always has a `.`
        // or an exponent (`1.0`, `1e300`, `1.5e-7`), so it reads back as a float.
        let text = format!("{x:?}");
        sink.push_str(&text);
        if !text.contains(['.', 'e', 'E']) {
            sink.push_str(".0");
        }
    }
}

fn write_string(text: &str, sink: &mut Sink<'_>) {
    sink.push('"');
    for c in text.chars() {
        if sink.cut {
            return;
        }
        match c {
            '"' => sink.push_str("\\\""),
            '\\' => sink.push_str("\\\\"),
            '\n' => sink.push_str("\\n"),
            '\t' => sink.push_str("\\t"),
            '\r' => sink.push_str("\\r"),
            '\u{8}' => sink.push_str("\\b"),
            '\u{c}' => sink.push_str("\\f"),
            c if c.is_control() => sink.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => sink.push(c),
        }
    }
    sink.push('"');
}

fn write_char(c: char, sink: &mut Sink<'_>) {
    match c {
        '\n' => sink.push_str("\\newline"),
        ' ' => sink.push_str("\\space"),
        '\t' => sink.push_str("\\tab"),
        '\r' => sink.push_str("\\return"),
        '\u{c}' => sink.push_str("\\formfeed"),
        '\u{8}' => sink.push_str("\\backspace"),
        // Control characters, all in the Basic Multilingual Plane (this includes the
        // vertical tab, the one whitespace character without a name).
        c if c.is_control() => sink.push_str(&format!("\\u{:04X}", u32::from(c))),
        c => {
            sink.push('\\');
            sink.push(c);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Clojure's equality

/// Folds a value bottom-up without recursion: `scalar` gives each scalar's result, and
/// `collection` each collection's or tagged value's from its children's results, in order (a
/// map's as key, value, key, value, …; a tagged value's is its value's alone).
fn fold<T>(value: &Edn, scalar: impl Fn(&Edn) -> T, collection: impl Fn(&Edn, Vec<T>) -> T) -> T {
    enum Step<'v> {
        Enter(&'v Edn),
        Close(&'v Edn, usize),
    }
    let mut steps = vec![Step::Enter(value)];
    let mut done: Vec<T> = Vec::new();
    while let Some(step) = steps.pop() {
        match step {
            Step::Enter(v) => {
                let children: Vec<&Edn> = match v {
                    Edn::List(items) | Edn::Vector(items) | Edn::Set(items) => {
                        items.iter().map(|n| &n.value).collect()
                    }
                    Edn::Map(entries) => entries
                        .iter()
                        .flat_map(|(k, v)| [&k.value, &v.value])
                        .collect(),
                    Edn::Tagged(_, inner) => vec![&inner.value],
                    _ => {
                        done.push(scalar(v));
                        continue;
                    }
                };
                steps.push(Step::Close(v, children.len()));
                // Pushed last to first, so that they are entered, and finished, in order.
                steps.extend(children.into_iter().rev().map(Step::Enter));
            }
            Step::Close(v, count) => {
                let children = done.split_off(done.len().saturating_sub(count));
                done.push(collection(v, children));
            }
        }
    }
    // One result is left: the value's (every step pushes one and a close takes its children's).
    done.pop().unwrap_or_else(|| scalar(&Edn::Nil))
}

/// The canonical text ([`Edn::canonical`]) of a value that is neither a collection nor tagged.
fn canonical_scalar(value: &Edn) -> String {
    let mut out = String::new();
    let mut sink = Sink {
        out: &mut out,
        room: None,
        cut: false,
    };
    match value {
        Edn::BigInt(text) => sink.push_str(&integer_text(text)),
        // `-0.0 == 0.0` for an f64, and for Clojure's `=`.
        Edn::Float(x) if *x == 0.0 => write_float(0.0, &mut sink),
        Edn::Decimal(text) => {
            sink.push_str(&decimal_text(text));
            sink.push('M');
        }
        // nil, booleans, integers that fit an i64, other floats, strings, characters,
        // keywords and symbols are canonical as the writer writes them.
        other => write_value(other, &mut sink),
    }
    out
}

/// The canonical text of a collection or tagged value from its children's canonical texts.
fn canonical_collection(value: &Edn, mut parts: Vec<String>) -> String {
    match value {
        Edn::Set(_) => {
            parts.sort();
            // A set read by `parse_all` has no equal elements; one built in code may.
            parts.dedup();
            format!("#{{{}}}", parts.join(" "))
        }
        Edn::Map(_) => {
            let mut entries: Vec<(String, String)> = Vec::with_capacity(parts.len() / 2);
            let mut parts = parts.into_iter();
            while let (Some(key), Some(value)) = (parts.next(), parts.next()) {
                entries.push((key, value));
            }
            // Stable, so that of equal keys (only in a map built in code) the first stays
            // first and is kept, as `Node::get` finds it.
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            entries.dedup_by(|later, earlier| later.0 == earlier.0);
            let entries: Vec<String> = entries.into_iter().map(|(k, v)| k + " " + &v).collect();
            format!("{{{}}}", entries.join(", "))
        }
        Edn::Tagged(tag, _) => format!("#{tag} {}", parts.concat()),
        // Lists and vectors: both sequential, equal when their elements are.
        _ => format!("[{}]", parts.join(" ")),
    }
}

/// A big integer's text as an integer's without suffix: no `+`, no leading zeros, `-` only
/// when it is not zero (`+007` is `7`, `-0` is `0`), so that `1N` and `1` read the same.
/// Text that is not a signed run of digits (only in a value built in code) is kept as it is.
fn integer_text(text: &str) -> String {
    let (negative, digits) = split_sign(text);
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return text.to_owned();
    }
    match digits.trim_start_matches('0') {
        "" => "0".to_owned(),
        digits if negative => format!("-{digits}"),
        digits => digits.to_owned(),
    }
}

/// Whether `text` starts with `-`, and the text after its sign.
fn split_sign(text: &str) -> (bool, &str) {
    match text.as_bytes().first() {
        Some(b'-') => (true, text.get(1..).unwrap_or("")),
        Some(b'+') => (false, text.get(1..).unwrap_or("")),
        _ => (false, text),
    }
}

/// How many zeros a decimal's canonical text writes out before it switches to an exponent.
const DECIMAL_ZEROS: i64 = 20;

/// A decimal's text (without `M`) by value: Clojure's `=` compares two decimals as
/// `BigDecimal.compareTo` does, ignoring their scale (`1.50` equals `1.5`, `1e2` equals `100`),
/// so the digits are kept without leading or trailing zeros, written plainly (`100`, `1.5`,
/// `0.05`) up to 20 zeros and with an exponent beyond (`1E25`). Text that is not a decimal
/// literal (only in a value built in code) is kept as it is.
fn decimal_text(text: &str) -> String {
    let (negative, rest) = split_sign(text);
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(at) => (&rest[..at], rest[at + 1..].parse::<i64>().ok()),
        None => (rest, Some(0)),
    };
    let (int, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all_digits = int
        .bytes()
        .chain(fraction.bytes())
        .all(|b| b.is_ascii_digit());
    let (Some(exponent), true) = (exponent, all_digits) else {
        return text.to_owned();
    };
    // The value is `digits` times ten to the `exponent`; the reader bounds the written
    // exponent to 32 bits and the literal to 4096 characters, so none of this overflows.
    let digits = format!("{int}{fraction}");
    let digits = digits.trim_start_matches('0');
    let significant = digits.trim_end_matches('0');
    if significant.is_empty() {
        return "0".to_owned();
    }
    let exponent = exponent - fraction.len() as i64 + (digits.len() - significant.len()) as i64;
    let sign = if negative { "-" } else { "" };
    let len = significant.len() as i64;
    if (0..=DECIMAL_ZEROS).contains(&exponent) {
        format!("{sign}{significant}{}", "0".repeat(exponent as usize))
    } else if exponent < 0 && -exponent < len {
        let (whole, part) = significant.split_at((len + exponent) as usize);
        format!("{sign}{whole}.{part}")
    } else if exponent < 0 && -exponent - len <= DECIMAL_ZEROS {
        let zeros = "0".repeat((-exponent - len) as usize);
        format!("{sign}0.{zeros}{significant}")
    } else {
        let (first, others) = significant.split_at(1);
        let point = if others.is_empty() { "" } else { "." };
        format!("{sign}{first}{point}{others}E{}", exponent + len - 1)
    }
}

/// A 128-bit hash of values that agrees with Clojure's `=` ([`Edn::equiv`]): equal values hash
/// alike. The reader computes it bottom-up, one node at a time, for the keys of maps and the
/// elements of sets (and everything inside them), so that finding equal ones costs a sort of
/// hashes rather than a comparison of every pair or a canonical text per level of nesting;
/// values whose hashes match are then compared exactly, so a collision costs time, never a
/// wrong answer. Two lanes of SplitMix64's finalizer over the words fed in.
struct Hasher {
    a: u64,
    b: u64,
}

/// What a [`Hasher`] hashes, fed first so that kinds never hash alike by accident.
#[derive(Clone, Copy)]
enum HashKind {
    Nil = 1,
    Bool,
    Integer,
    BigInteger,
    Float,
    Decimal,
    Str,
    Char,
    Keyword,
    Symbol,
    Sequential,
    Set,
    Map,
    Tagged,
}

fn splitmix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Hasher {
    fn new(kind: HashKind) -> Hasher {
        let mut hasher = Hasher {
            a: 0x9E37_79B9_7F4A_7C15,
            b: 0x6A09_E667_F3BC_C909,
        };
        hasher.word(kind as u64);
        hasher
    }

    fn word(&mut self, w: u64) {
        self.a = splitmix(self.a ^ w).wrapping_add(0x9E37_79B9_7F4A_7C15);
        self.b = splitmix(self.b.wrapping_add(w).rotate_left(23) ^ 0xC2B2_AE3D_27D4_EB4F);
    }

    fn bytes(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.word(u64::from_le_bytes(word));
        }
        // The length, so that texts padded with zeros differ from shorter ones.
        self.word(bytes.len() as u64);
    }

    fn hash(&mut self, hash: u128) {
        self.word(hash as u64);
        self.word((hash >> 64) as u64);
    }

    fn finish(&self) -> u128 {
        (u128::from(self.a) << 64) | u128::from(self.b)
    }
}

/// The [`Hasher`] hash of a value that is neither a collection nor tagged.
fn hash_scalar(value: &Edn) -> u128 {
    let text = |kind, text: &str| {
        let mut hasher = Hasher::new(kind);
        hasher.bytes(text.as_bytes());
        hasher.finish()
    };
    let word = |kind, word: u64| {
        let mut hasher = Hasher::new(kind);
        hasher.word(word);
        hasher.finish()
    };
    match value {
        Edn::Nil => Hasher::new(HashKind::Nil).finish(),
        Edn::Bool(b) => word(HashKind::Bool, u64::from(*b)),
        Edn::Int(n) => word(HashKind::Integer, *n as u64),
        // A big integer that fits an i64 equals that integer, so it hashes as one.
        Edn::BigInt(digits) => {
            let normal = integer_text(digits);
            match normal.parse::<i64>() {
                Ok(n) => word(HashKind::Integer, n as u64),
                Err(_) => text(HashKind::BigInteger, &normal),
            }
        }
        // `-0.0 == 0.0`, and every NaN is `##NaN`.
        Edn::Float(x) if *x == 0.0 => word(HashKind::Float, 0),
        Edn::Float(x) if x.is_nan() => word(HashKind::Float, f64::NAN.to_bits()),
        Edn::Float(x) => word(HashKind::Float, x.to_bits()),
        Edn::Decimal(digits) => text(HashKind::Decimal, &decimal_text(digits)),
        Edn::Str(s) => text(HashKind::Str, s),
        Edn::Char(c) => word(HashKind::Char, u64::from(*c)),
        Edn::Keyword(name) => text(HashKind::Keyword, name),
        Edn::Symbol(name) => text(HashKind::Symbol, name),
        Edn::List(_) | Edn::Vector(_) | Edn::Set(_) | Edn::Map(_) | Edn::Tagged(..) => {
            hash_collection(value, Vec::new())
        }
    }
}

/// The [`Hasher`] hash of a collection or tagged value from its children's, as
/// [`canonical_collection`] builds its text: sets and maps order-free, lists and vectors alike.
fn hash_collection(value: &Edn, mut children: Vec<u128>) -> u128 {
    let mut hasher;
    match value {
        Edn::Set(_) => {
            hasher = Hasher::new(HashKind::Set);
            children.sort_unstable();
            children.dedup();
            children.iter().for_each(|h| hasher.hash(*h));
            hasher.word(children.len() as u64);
        }
        Edn::Map(_) => {
            hasher = Hasher::new(HashKind::Map);
            let mut entries: Vec<(u128, u128)> =
                children.chunks_exact(2).map(|kv| (kv[0], kv[1])).collect();
            // Stable, and of equal keys the first is kept, as for the canonical text.
            entries.sort_by_key(|(key, _)| *key);
            entries.dedup_by_key(|(key, _)| *key);
            hasher.word(entries.len() as u64);
            for (key, value) in entries {
                hasher.hash(key);
                hasher.hash(value);
            }
        }
        Edn::Tagged(tag, _) => return hash_tagged(tag, children.first().copied().unwrap_or(0)),
        _ => {
            hasher = Hasher::new(HashKind::Sequential);
            hasher.word(children.len() as u64);
            children.iter().for_each(|h| hasher.hash(*h));
        }
    }
    hasher.finish()
}

/// The [`Hasher`] hash of a tagged value from its value's.
fn hash_tagged(tag: &str, inner: u128) -> u128 {
    let mut hasher = Hasher::new(HashKind::Tagged);
    hasher.bytes(tag.as_bytes());
    hasher.hash(inner);
    hasher.finish()
}

/// Of `items` (with their [`Hasher`] hashes, in file order), the first that equals an earlier
/// one by Clojure's `=`, and that earlier one: (earlier, later) positions in `items`.
fn first_duplicate(items: &[&Node], hashes: &[u128]) -> Option<(usize, usize)> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_unstable_by_key(|&i| (hashes.get(i).copied().unwrap_or(0), i));
    let mut found: Option<(usize, usize)> = None;
    // Runs of equal hashes: one element each but for equal values (and collisions).
    for run in order.chunk_by(|&a, &b| hashes.get(a) == hashes.get(b)) {
        for (at, &later) in run.iter().enumerate().skip(1) {
            if found.is_some_and(|(_, first)| first < later) {
                break;
            }
            let earlier = run[..at]
                .iter()
                .find(|&&earlier| items[earlier].value.equiv(&items[later].value));
            if let Some(&earlier) = earlier {
                found = Some((earlier, later));
                break;
            }
        }
    }
    found
}

// ---------------------------------------------------------------------------------------------
// Reader

/// Reads every top-level value of `text`, in order (an empty or all-comment text gives an
/// empty vector).
///
/// # Errors
///
/// An [`EdnError`] at the first problem: an unterminated string, collection, `#tag` or `#_`;
/// a closing bracket that closes nothing or the wrong collection; a map with an odd number of
/// forms; two keys of a map or elements of a set equal by Clojure's `=`; a bad escape or
/// character literal (including a lone surrogate); a bad number (ratio,
/// leading zero, misplaced suffix, decimal exponent beyond 32 bits) or one longer than
/// [`MAX_NUMBER_LEN`] characters; a bad symbol or keyword; an unexpected character; nesting
/// deeper than [`MAX_DEPTH`].
pub fn parse_all(text: &str) -> Result<Vec<Node>, EdnError> {
    Reader::new(text).read_all()
}

/// What a frame of the reader's stack is waiting for.
enum Open {
    List,
    Vector,
    Set,
    Map,
    /// A tag waiting for its value.
    Tag(String),
    /// A `#_` waiting for the value it discards.
    Discard,
}

/// An opened collection, tag or discard, where it was opened, and the elements read so far.
struct Frame {
    open: Open,
    line: usize,
    column: usize,
    items: Vec<Node>,
    /// Each item's [`Hasher`] hash where [`wants_hash`] asked for it when the item came, 0
    /// elsewhere.
    hashes: Vec<u128>,
    /// The hash of this frame's own value is wanted: it is a map's key or a set's element,
    /// or inside one.
    hashed: bool,
}

/// Whether the next item `frame` receives needs its hash: a set's element or a map's key
/// (to find equal ones), or anything whose enclosing value needs its own.
fn wants_hash(frame: &Frame) -> bool {
    frame.hashed
        || match frame.open {
            Open::Set => true,
            Open::Map => frame.items.len().is_multiple_of(2),
            _ => false,
        }
}

struct Reader<'t> {
    text: &'t str,
    /// Byte offset of the next character, always on a character boundary.
    pos: usize,
    line: usize,
    column: usize,
}

fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\u{b}' | '\u{c}' | ',')
}

/// Ends a symbol, keyword, number, tag or character name.
fn is_delimiter(c: char) -> bool {
    is_blank(c) || matches!(c, '(' | ')' | '[' | ']' | '{' | '}' | '"' | ';' | '\\')
}

/// May appear in a symbol or keyword (after the first character).
fn is_constituent(c: char) -> bool {
    c.is_alphanumeric() || ".*+!-_?$%&=<>/:#'".contains(c)
}

/// May start a symbol.
fn is_symbol_start(c: char) -> bool {
    c.is_alphabetic() || ".*+!-_?$%&=<>".contains(c)
}

/// The text in backticks, at most [`QUOTE_LEN`] characters of it, control characters escaped.
fn quote(text: &str) -> String {
    let mut quoted = String::from("`");
    for (i, c) in text.chars().enumerate() {
        if i == QUOTE_LEN {
            quoted.push('…');
            break;
        }
        if c.is_control() {
            quoted.extend(c.escape_default());
        } else {
            quoted.push(c);
        }
    }
    quoted.push('`');
    quoted
}

fn error<T>(line: usize, column: usize, message: String) -> Result<T, EdnError> {
    Err(EdnError {
        line,
        column,
        message,
    })
}

/// `name` (a symbol without namespace, or one half of a namespaced one) follows EDN's rules.
fn valid_symbol_part(name: &str) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    let second = chars.next();
    is_symbol_start(first)
        && !(matches!(first, '+' | '-' | '.') && second.is_some_and(|c| c.is_ascii_digit()))
        && name.chars().all(|c| is_constituent(c) && c != '/')
}

/// `text` is a valid symbol (also used for tags).
fn valid_symbol(text: &str) -> bool {
    if text == "/" {
        return true;
    }
    if text.contains("::") || text.ends_with(':') {
        return false;
    }
    match text.split_once('/') {
        None => valid_symbol_part(text),
        Some((namespace, name)) => valid_symbol_part(namespace) && valid_symbol_part(name),
    }
}

/// `name` (without the colon) is a valid keyword name: like a symbol, but a part may start
/// with a digit (`:1`, Clojure reads it).
fn valid_keyword(name: &str) -> bool {
    let part = |p: &str| {
        p.chars()
            .next()
            .is_some_and(|c| c != ':' && c != '#' && c != '\'')
            && p.chars().all(|c| is_constituent(c) && c != '/')
    };
    if name == "/" {
        return true;
    }
    if name.contains("::") || name.ends_with(':') {
        return false;
    }
    match name.split_once('/') {
        None => part(name),
        Some((namespace, rest)) => part(namespace) && part(rest),
    }
}

/// Reads `\uXXXX`'s four digits as a character: `None` if they are not four ASCII hex digits,
/// `Some(Err(code))` for a surrogate.
fn hex4(digits: &str) -> Option<Result<char, u32>> {
    if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let code = u32::from_str_radix(digits, 16).ok()?;
    Some(char::from_u32(code).ok_or(code))
}

impl<'t> Reader<'t> {
    fn new(text: &'t str) -> Reader<'t> {
        Reader {
            text,
            pos: 0,
            line: 1,
            column: 1,
        }
    }

    fn rest(&self) -> &'t str {
        self.text.get(self.pos..).unwrap_or("")
    }

    fn peek(&self) -> Option<char> {
        match self.text.as_bytes().get(self.pos) {
            // The common case, without decoding.
            Some(&byte) if byte.is_ascii() => Some(char::from(byte)),
            Some(_) => self.rest().chars().next(),
            None => None,
        }
    }

    fn peek_second(&self) -> Option<char> {
        self.rest().chars().nth(1)
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        if c == '\n' {
            self.line += 1;
            self.column = 1;
        } else {
            self.column += 1;
        }
        Some(c)
    }

    /// Skips whitespace, commas and `;` comments.
    fn skip_blank(&mut self) {
        while let Some(c) = self.peek() {
            if is_blank(c) {
                self.bump();
            } else if c == ';' {
                while self.peek().is_some_and(|c| c != '\n') {
                    self.bump();
                }
            } else {
                return;
            }
        }
    }

    /// The characters up to the next delimiter (possibly none), consumed.
    fn token(&mut self) -> &'t str {
        let start = self.pos;
        while self.peek().is_some_and(|c| !is_delimiter(c)) {
            self.bump();
        }
        self.text.get(start..self.pos).unwrap_or("")
    }

    fn read_all(mut self) -> Result<Vec<Node>, EdnError> {
        if self.text.starts_with('\u{feff}') {
            self.pos = '\u{feff}'.len_utf8();
        }
        let mut stack: Vec<Frame> = Vec::new();
        let mut done = Vec::new();
        loop {
            self.skip_blank();
            let (line, column) = (self.line, self.column);
            let Some(c) = self.peek() else {
                return match stack.last() {
                    None => Ok(done),
                    Some(frame) => Err(unterminated(frame)),
                };
            };
            let value = match c {
                '(' | '[' | '{' => {
                    self.bump();
                    let open = match c {
                        '(' => Open::List,
                        '[' => Open::Vector,
                        _ => Open::Map,
                    };
                    push_frame(&mut stack, open, line, column)?;
                    continue;
                }
                ')' | ']' | '}' => {
                    self.bump();
                    let (node, hash) = close(&mut stack, c, line, column)?;
                    deliver(node, hash, &mut stack, &mut done);
                    continue;
                }
                '#' => match self.peek_second() {
                    Some('{') => {
                        self.bump();
                        self.bump();
                        push_frame(&mut stack, Open::Set, line, column)?;
                        continue;
                    }
                    Some('_') => {
                        self.bump();
                        self.bump();
                        push_frame(&mut stack, Open::Discard, line, column)?;
                        continue;
                    }
                    Some('#') => {
                        self.bump();
                        self.bump();
                        self.symbolic(line, column)?
                    }
                    Some(first) if first.is_alphabetic() => {
                        self.bump();
                        let tag = self.token();
                        if !valid_symbol(tag) {
                            return error(
                                line,
                                column,
                                format!("bad tag {}: expected a symbol after `#`", quote(tag)),
                            );
                        }
                        push_frame(&mut stack, Open::Tag(tag.to_owned()), line, column)?;
                        continue;
                    }
                    other => {
                        let found = match other {
                            Some(c) => quote(&format!("#{c}")),
                            None => "`#` at the end of input".to_owned(),
                        };
                        return error(
                            line,
                            column,
                            format!(
                                "unexpected {found}: expected `#{{`, `#_`, `##Inf`, `##-Inf`, \
                                 `##NaN` or a tag such as `#inst`"
                            ),
                        );
                    }
                },
                '"' => self.string(line, column)?,
                '\\' => self.character(line, column)?,
                _ => self.atom(line, column)?,
            };
            let hash = stack
                .last()
                .filter(|frame| wants_hash(frame))
                .map(|_| hash_scalar(&value));
            deliver(
                Node {
                    value,
                    line,
                    column,
                },
                hash,
                &mut stack,
                &mut done,
            );
        }
    }

    /// `##Inf`, `##-Inf` or `##NaN`, the `##` already read.
    fn symbolic(&mut self, line: usize, column: usize) -> Result<Edn, EdnError> {
        match self.token() {
            "Inf" => Ok(Edn::Float(f64::INFINITY)),
            "-Inf" => Ok(Edn::Float(f64::NEG_INFINITY)),
            "NaN" => Ok(Edn::Float(f64::NAN)),
            other => error(
                line,
                column,
                format!(
                    "bad symbolic value {}: expected `##Inf`, `##-Inf` or `##NaN`",
                    quote(&format!("##{other}"))
                ),
            ),
        }
    }

    /// A string, at its opening quote.
    fn string(&mut self, line: usize, column: usize) -> Result<Edn, EdnError> {
        self.bump();
        let mut text = String::new();
        loop {
            let (esc_line, esc_column) = (self.line, self.column);
            let Some(c) = self.bump() else {
                return error(
                    line,
                    column,
                    "unterminated string: expected `\"` before the end of input".to_owned(),
                );
            };
            match c {
                '"' => return Ok(Edn::Str(text)),
                '\\' => {
                    let resolved = match self.bump() {
                        None => {
                            return error(
                                line,
                                column,
                                "unterminated string: expected `\"` before the end of input"
                                    .to_owned(),
                            )
                        }
                        Some('"') => '"',
                        Some('\\') => '\\',
                        Some('/') => '/',
                        Some('n') => '\n',
                        Some('t') => '\t',
                        Some('r') => '\r',
                        Some('b') => '\u{8}',
                        Some('f') => '\u{c}',
                        Some('u') => self.unicode_escape(esc_line, esc_column)?,
                        Some(other) => {
                            return error(
                                esc_line,
                                esc_column,
                                format!(
                                    "bad escape {} in string: expected one of \\\" \\\\ \\/ \\b \
                                     \\f \\n \\r \\t \\uXXXX",
                                    quote(&format!("\\{other}"))
                                ),
                            )
                        }
                    };
                    text.push(resolved);
                }
                c => text.push(c),
            }
        }
    }

    /// A string's `\uXXXX` escape, its `\u` read (the backslash at `line`, `column`): the
    /// character. A UTF-16 high surrogate (`\uD800` to `\uDBFF`) must be followed by an
    /// escaped low one (`\uDC00` to `\uDFFF`), and the pair is the one character they encode
    /// (`\uD83D\uDE00` is 😀), as Java's strings, and so Clojure's and Jepsen's, hold it. A
    /// surrogate alone is no character (a Rust string cannot hold it): an error.
    fn unicode_escape(&mut self, line: usize, column: usize) -> Result<char, EdnError> {
        let high = match self.hex4_escape(line, column)? {
            Ok(c) => return Ok(c),
            Err(code) => code,
        };
        let lone = |message: String| error(line, column, message);
        if high >= 0xDC00 {
            return lone(format!(
                "bad escape `\\u{high:04X}` in string: a low surrogate must follow a high one \
                 (`\\uD800` to `\\uDBFF`), as in `\\uD83D\\uDE00`"
            ));
        }
        let low = self
            .rest()
            .strip_prefix("\\u")
            .and_then(|digits| digits.get(..4))
            .and_then(hex4);
        match low {
            Some(Err(low)) if (0xDC00..=0xDFFF).contains(&low) => {
                for _ in 0..6 {
                    self.bump();
                }
                let code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                // Always a character: a pair encodes U+10000 to U+10FFFF.
                char::from_u32(code).map_or_else(
                    || lone(format!("bad escape pair for U+{code:X} in string")),
                    Ok,
                )
            }
            _ => lone(format!(
                "bad escape `\\u{high:04X}` in string: a high surrogate must be followed by a \
                 low one (`\\uDC00` to `\\uDFFF`), as in `\\uD83D\\uDE00`"
            )),
        }
    }

    /// The four hex digits after a string's `\u` (the backslash at `line`, `column`): the
    /// character, or `Err` with the code of a surrogate.
    fn hex4_escape(&mut self, line: usize, column: usize) -> Result<Result<char, u32>, EdnError> {
        // Up to four characters, stopping early at anything not a hex digit.
        let start = self.pos;
        for _ in 0..4 {
            if !self.peek().is_some_and(|h| h.is_ascii_hexdigit()) {
                break;
            }
            self.bump();
        }
        let digits = self.text.get(start..self.pos).unwrap_or("");
        match hex4(digits) {
            Some(read) => Ok(read),
            None => {
                let after: String = self.rest().chars().take(1).collect();
                error(
                    line,
                    column,
                    format!(
                        "bad escape {} in string: expected exactly 4 hex digits after `\\u`",
                        quote(&format!("\\u{digits}{after}"))
                    ),
                )
            }
        }
    }

    /// A character literal, at its backslash.
    fn character(&mut self, line: usize, column: usize) -> Result<Edn, EdnError> {
        self.bump();
        let start = self.pos;
        match self.bump() {
            // A comma after `\\` is the character `,`, not whitespace.
            Some(c) if c == ',' || !is_blank(c) => {
                let rest = self.token();
                if rest.is_empty() {
                    return Ok(Edn::Char(c));
                }
                let name = self.text.get(start..self.pos).unwrap_or("");
                let named = match name {
                    "newline" => Some('\n'),
                    "space" => Some(' '),
                    "tab" => Some('\t'),
                    "return" => Some('\r'),
                    "formfeed" => Some('\u{c}'),
                    "backspace" => Some('\u{8}'),
                    _ => None,
                };
                if let Some(c) = named {
                    return Ok(Edn::Char(c));
                }
                match name.strip_prefix('u').and_then(hex4) {
                    Some(Ok(c)) => Ok(Edn::Char(c)),
                    Some(Err(code)) => error(
                        line,
                        column,
                        format!(
                            "bad character `\\u{code:04X}`: surrogate code points are not \
                             characters"
                        ),
                    ),
                    None => error(
                        line,
                        column,
                        format!(
                            "bad character {}: expected one character, \\newline, \\space, \
                             \\tab, \\return, \\formfeed, \\backspace or \\uXXXX",
                            quote(&format!("\\{name}"))
                        ),
                    ),
                }
            }
            _ => error(
                line,
                column,
                "expected a character after `\\`, found whitespace or the end of input".to_owned(),
            ),
        }
    }

    /// A number, keyword, symbol, `nil`, `true` or `false`.
    fn atom(&mut self, line: usize, column: usize) -> Result<Edn, EdnError> {
        let token = self.token();
        let mut chars = token.chars();
        let first = chars.next().unwrap_or(' ');
        let second = chars.next();
        if first.is_ascii_digit()
            || (matches!(first, '+' | '-') && second.is_some_and(|c| c.is_ascii_digit()))
        {
            return number(token, line, column);
        }
        if let Some(name) = token.strip_prefix(':') {
            if name.starts_with(':') {
                return error(
                    line,
                    column,
                    format!(
                        "bad keyword {}: auto-resolved keywords (`::`) are not EDN",
                        quote(token)
                    ),
                );
            }
            if !valid_keyword(name) {
                return error(
                    line,
                    column,
                    format!(
                        "bad keyword {}: expected `:` and a name such as `:type` or \
                         `:jepsen.history/op`",
                        quote(token)
                    ),
                );
            }
            return Ok(Edn::Keyword(name.to_owned()));
        }
        match token {
            "nil" => return Ok(Edn::Nil),
            "true" => return Ok(Edn::Bool(true)),
            "false" => return Ok(Edn::Bool(false)),
            _ => {}
        }
        if !is_symbol_start(first) && first != '/' {
            return error(
                line,
                column,
                format!(
                    "unexpected character {}: expected a value (number, string, character, \
                     keyword, symbol, collection or tagged value)",
                    quote(&first.to_string())
                ),
            );
        }
        if !valid_symbol(token) {
            let hint = if first == '.' && second.is_some_and(|c| c.is_ascii_digit()) {
                "a number needs a digit before its `.`"
            } else {
                "expected a symbol such as `foo` or `a.b/c`"
            };
            return error(line, column, format!("bad symbol {}: {hint}", quote(token)));
        }
        Ok(Edn::Symbol(token.to_owned()))
    }
}

/// A number literal (`token` starts with a digit, or a sign and a digit).
fn number(token: &str, line: usize, column: usize) -> Result<Edn, EdnError> {
    let length = token.chars().count();
    if length > MAX_NUMBER_LEN {
        return error(
            line,
            column,
            format!(
                "number too long: {length} characters (at most {MAX_NUMBER_LEN}) in {}",
                quote(token)
            ),
        );
    }
    let bad = |why: &str| error(line, column, format!("bad number {}: {why}", quote(token)));
    let bytes = token.as_bytes();
    let digits_from = |mut i: usize| {
        while bytes.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        i
    };
    let mut i = 0;
    if matches!(bytes.first(), Some(b'+' | b'-')) {
        i += 1;
    }
    let int_start = i;
    i = digits_from(i);
    let int_digits = &bytes[int_start..i];
    let mut fractional = false;
    if bytes.get(i) == Some(&b'.') {
        fractional = true;
        i = digits_from(i + 1);
    }
    let mut exponent: Option<&str> = None;
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        let exp_start = i + 1;
        i = exp_start;
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let digits_start = i;
        i = digits_from(i);
        if i == digits_start {
            return bad("expected digits after the exponent's `e`");
        }
        exponent = token.get(exp_start..i);
    }
    let literal = token.get(..i).unwrap_or("");
    let suffix = token.get(i..).unwrap_or("");
    let is_float = fractional || exponent.is_some();
    let leading_zero = int_digits.len() > 1 && int_digits[0] == b'0';
    match suffix {
        "" if is_float => match literal.parse::<f64>() {
            Ok(x) => Ok(Edn::Float(x)),
            Err(_) => bad("expected a float"),
        },
        "" | "N" if leading_zero => {
            bad("an integer cannot start with 0 (octal literals are not supported)")
        }
        "" => Ok(match literal.parse::<i64>() {
            Ok(n) => Edn::Int(n),
            Err(_) => Edn::BigInt(literal.to_owned()),
        }),
        "N" if is_float => bad("the `N` suffix needs an integer (use `M` for a decimal)"),
        "N" => Ok(Edn::BigInt(literal.to_owned())),
        "M" => match exponent {
            Some(exp) if exp.parse::<i32>().is_err() => {
                bad("the decimal's exponent does not fit in 32 bits")
            }
            _ => Ok(Edn::Decimal(literal.to_owned())),
        },
        s if s.starts_with('/') => bad("ratios are not supported"),
        _ => bad("expected digits, a fraction, an exponent, then optionally `N` or `M`"),
    }
}

fn push_frame(
    stack: &mut Vec<Frame>,
    open: Open,
    line: usize,
    column: usize,
) -> Result<(), EdnError> {
    if stack.len() >= MAX_DEPTH {
        return error(
            line,
            column,
            format!("nested deeper than {MAX_DEPTH} levels"),
        );
    }
    // What a `#_` drops is never compared; a tag's value is wanted as its tagged value is.
    let hashed = !matches!(open, Open::Discard) && stack.last().is_some_and(wants_hash);
    stack.push(Frame {
        open,
        line,
        column,
        items: Vec::new(),
        hashes: Vec::new(),
        hashed,
    });
    Ok(())
}

/// The error for input ending while `frame` is open.
fn unterminated(frame: &Frame) -> EdnError {
    let message = match &frame.open {
        Open::List => "unterminated list: expected `)` before the end of input".to_owned(),
        Open::Vector => "unterminated vector: expected `]` before the end of input".to_owned(),
        Open::Set => "unterminated set: expected `}` before the end of input".to_owned(),
        Open::Map => "unterminated map: expected `}` before the end of input".to_owned(),
        Open::Tag(tag) => format!(
            "expected a value after {} before the end of input",
            quote(&format!("#{tag}"))
        ),
        Open::Discard => "expected a value after `#_` before the end of input".to_owned(),
    };
    EdnError {
        line: frame.line,
        column: frame.column,
        message,
    }
}

/// Closes the innermost collection with `closer` (at `line`, `column`), giving its node (at
/// the collection's opening bracket).
fn close(
    stack: &mut Vec<Frame>,
    closer: char,
    line: usize,
    column: usize,
) -> Result<(Node, Option<u128>), EdnError> {
    let Some(frame) = stack.pop() else {
        return error(
            line,
            column,
            format!("unmatched `{closer}`: no list, vector, set or map is open"),
        );
    };
    let (expected, what) = match &frame.open {
        Open::List => (')', "list"),
        Open::Vector => (']', "vector"),
        Open::Set => ('}', "set"),
        Open::Map => ('}', "map"),
        Open::Tag(tag) => {
            return error(
                line,
                column,
                format!(
                    "expected a value after {}, found `{closer}`",
                    quote(&format!("#{tag}"))
                ),
            )
        }
        Open::Discard => {
            return error(
                line,
                column,
                format!("expected a value after `#_`, found `{closer}`"),
            )
        }
    };
    if closer != expected {
        return error(
            line,
            column,
            format!(
                "expected `{expected}` to close the {what} opened at {}, found `{closer}`",
                opened_at(frame.line, frame.column, line)
            ),
        );
    }
    // Clojure's reader refuses a set with equal elements and a map with equal keys (equal by
    // its `=`: `#{1 1N}` too); so does this one, rather than keep one of them silently.
    match frame.open {
        Open::Set => {
            let items: Vec<&Node> = frame.items.iter().collect();
            if let Some((earlier, later)) = first_duplicate(&items, &frame.hashes) {
                return Err(duplicate("element", "set", items[earlier], items[later]));
            }
        }
        Open::Map => {
            let keys: Vec<&Node> = frame.items.iter().step_by(2).collect();
            let hashes: Vec<u128> = frame.hashes.iter().step_by(2).copied().collect();
            if let Some((earlier, later)) = first_duplicate(&keys, &hashes) {
                return Err(duplicate("key", "map", keys[earlier], keys[later]));
            }
        }
        _ => {}
    }
    let value = match frame.open {
        Open::List => Edn::List(frame.items),
        Open::Vector => Edn::Vector(frame.items),
        Open::Set => Edn::Set(frame.items),
        _ => {
            let count = frame.items.len();
            let mut entries = Vec::with_capacity(count / 2);
            let mut items = frame.items.into_iter();
            while let Some(key) = items.next() {
                let Some(value) = items.next() else {
                    return error(
                        key.line,
                        key.column,
                        format!(
                            "the map opened at {} has an odd number of forms ({count}): the key \
                             {} has no value",
                            opened_at(frame.line, frame.column, key.line),
                            key.value.brief()
                        ),
                    );
                };
                entries.push((key, value));
            }
            Edn::Map(entries)
        }
    };
    // Every item's hash is there when the frame's own is wanted (`wants_hash`).
    let hash = frame.hashed.then(|| hash_collection(&value, frame.hashes));
    let node = Node {
        value,
        line: frame.line,
        column: frame.column,
    };
    Ok((node, hash))
}

/// Where a collection was opened (`line`, `column`), for an error on line `here`: its column
/// alone on the same line, since the error's own position names the line already.
fn opened_at(line: usize, column: usize, here: usize) -> String {
    if line == here {
        format!("column {column}")
    } else {
        format!("line {line}, column {column}")
    }
}

/// The error for `later`, which equals `earlier` by Clojure's `=`, both elements of one set
/// (`what` "element", `within` "set") or keys of one map ("key", "map").
fn duplicate(what: &str, within: &str, earlier: &Node, later: &Node) -> EdnError {
    let (first, again) = (earlier.value.brief(), later.value.brief());
    // Equal values may be written differently (`1` and `1N`): then both are named.
    let it = if first == again {
        "it".to_owned()
    } else {
        format!("the equal {what} {first}")
    };
    let place = if earlier.line == later.line {
        format!("column {}", earlier.column)
    } else {
        format!("line {}, column {}", earlier.line, earlier.column)
    };
    EdnError {
        line: later.line,
        column: later.column,
        message: format!("duplicate {what} {again}: the {within} already has {it} at {place}"),
    }
}

/// Hands a finished value to the innermost frame: a collection keeps it, a tag wraps it (and
/// the tagged value is handed on in turn), a `#_` drops it; with no frame it is top-level.
fn deliver(mut node: Node, mut hash: Option<u128>, stack: &mut Vec<Frame>, done: &mut Vec<Node>) {
    loop {
        let Some(frame) = stack.last_mut() else {
            done.push(node);
            return;
        };
        if !matches!(frame.open, Open::Tag(_) | Open::Discard) {
            frame.items.push(node);
            frame.hashes.push(hash.unwrap_or(0));
            return;
        }
        let Some(frame) = stack.pop() else {
            return;
        };
        match frame.open {
            Open::Tag(tag) => {
                hash = hash
                    .filter(|_| frame.hashed)
                    .map(|inner| hash_tagged(&tag, inner));
                node = Node {
                    value: Edn::Tagged(tag, Box::new(node)),
                    line: frame.line,
                    column: frame.column,
                };
            }
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Knossos's test histories, read where they lie (never copied into the repository):
    /// `FENCESIM_KNOSSOS_DATA`, else the shared peers folder beside the repository.
    fn knossos_dir() -> std::path::PathBuf {
        std::env::var_os("FENCESIM_KNOSSOS_DATA").map_or_else(
            || {
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../../../shared/peers/knossos-data")
            },
            std::path::PathBuf::from,
        )
    }

    fn one(text: &str) -> Node {
        let mut nodes = parse_all(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert_eq!(nodes.len(), 1, "{text:?}");
        nodes.remove(0)
    }

    fn val(text: &str) -> Edn {
        one(text).value
    }

    fn err(text: &str) -> EdnError {
        match parse_all(text) {
            Ok(nodes) => panic!("{text:?} parsed: {nodes:?}"),
            Err(e) => e,
        }
    }

    fn n(value: Edn) -> Node {
        Node::new(value)
    }

    fn kw(name: &str) -> Node {
        n(Edn::Keyword(name.into()))
    }

    fn int(i: i64) -> Node {
        n(Edn::Int(i))
    }

    fn text_of(nodes: &[Node]) -> String {
        let mut out = String::new();
        for node in nodes {
            node.value.write(&mut out);
            out.push('\n');
        }
        out
    }

    fn written(value: &Edn) -> String {
        let mut out = String::new();
        value.write(&mut out);
        out
    }

    #[test]
    fn scalars() {
        assert_eq!(val("nil"), Edn::Nil);
        assert_eq!(val("true"), Edn::Bool(true));
        assert_eq!(val("false"), Edn::Bool(false));
        assert_eq!(val("0"), Edn::Int(0));
        assert_eq!(val("-0"), Edn::Int(0));
        assert_eq!(val("-17"), Edn::Int(-17));
        assert_eq!(val("+7"), Edn::Int(7));
        assert_eq!(val("9223372036854775807"), Edn::Int(i64::MAX));
        assert_eq!(val("-9223372036854775808"), Edn::Int(i64::MIN));
        assert_eq!(
            val("9223372036854775808"),
            Edn::BigInt("9223372036854775808".into())
        );
        assert_eq!(val("5N"), Edn::BigInt("5".into()));
        assert_eq!(val("-12N"), Edn::BigInt("-12".into()));
        assert_eq!(val("1.5"), Edn::Float(1.5));
        assert_eq!(val("-2.5e3"), Edn::Float(-2500.0));
        assert_eq!(val("1e10"), Edn::Float(1e10));
        assert_eq!(val("1E-2"), Edn::Float(0.01));
        assert_eq!(val("1."), Edn::Float(1.0));
        assert_eq!(val("1.e2"), Edn::Float(100.0));
        assert_eq!(val("+1.5"), Edn::Float(1.5));
        assert_eq!(val("-0.0"), Edn::Float(-0.0));
        assert_eq!(val("01.5"), Edn::Float(1.5));
        assert_eq!(val("1e400"), Edn::Float(f64::INFINITY));
        assert_eq!(val("1e446744073709551615"), Edn::Float(f64::INFINITY));
        assert_eq!(val("1.50M"), Edn::Decimal("1.50".into()));
        assert_eq!(val("1M"), Edn::Decimal("1".into()));
        assert_eq!(val("-3e10M"), Edn::Decimal("-3e10".into()));
        assert_eq!(val("##Inf"), Edn::Float(f64::INFINITY));
        assert_eq!(val("##-Inf"), Edn::Float(f64::NEG_INFINITY));
        assert!(matches!(val("##NaN"), Edn::Float(x) if x.is_nan()));
        assert_eq!(val(":type"), Edn::Keyword("type".into()));
        assert_eq!(
            val(":jepsen.history/op"),
            Edn::Keyword("jepsen.history/op".into())
        );
        assert_eq!(val(":1"), Edn::Keyword("1".into()));
        assert_eq!(val(":not-held"), Edn::Keyword("not-held".into()));
        for s in [
            "foo", "a.b/c", "+", "-", "/", "<=", "*x*", "a#", "é", "-foo", "..", "x'",
        ] {
            assert_eq!(val(s), Edn::Symbol(s.into()), "{s}");
        }
    }

    #[test]
    fn strings_and_characters() {
        assert_eq!(
            val(r#""a\"b\\c\nd\te\rf\bg\fh\/i\u00e9\u0041""#),
            Edn::Str("a\"b\\c\nd\te\rf\u{8}g\u{c}h/iéA".into())
        );
        assert_eq!(val("\"ƖƖ\nx\""), Edn::Str("ƖƖ\nx".into()));
        // A UTF-16 surrogate pair is one character, as in a Java string; either case of hex.
        assert_eq!(val(r#""\ud83d\ude00""#), Edn::Str("😀".into()));
        assert_eq!(
            val(r#""a\uD83D\uDE00b\uDBFF\uDFFF""#),
            Edn::Str("a😀b\u{10FFFF}".into())
        );
        assert_eq!(val(r#""\uD800\uDC00""#), Edn::Str("\u{10000}".into()));
        // Written back, the character is itself, and reads back alike.
        assert_eq!(written(&val(r#""\ud83d\ude00""#)), "\"😀\"");
        assert_eq!(val("\"\""), Edn::Str(String::new()));
        let chars = [
            ("\\a", 'a'),
            ("\\u", 'u'),
            ("\\n", 'n'),
            ("\\newline", '\n'),
            ("\\space", ' '),
            ("\\tab", '\t'),
            ("\\return", '\r'),
            ("\\formfeed", '\u{c}'),
            ("\\backspace", '\u{8}'),
            ("\\u0041", 'A'),
            ("\\u00e9", 'é'),
            ("\\Ɩ", 'Ɩ'),
            ("\\😀", '😀'),
            ("\\(", '('),
            ("\\\\", '\\'),
            ("\\\"", '"'),
            ("\\,", ','),
        ];
        for (text, c) in chars {
            assert_eq!(val(text), Edn::Char(c), "{text}");
        }
        // A character ends at a delimiter, including the next backslash.
        let nodes = parse_all("[\\a\\b \\c]").unwrap();
        assert_eq!(
            nodes[0].value,
            Edn::Vector(vec![
                n(Edn::Char('a')),
                n(Edn::Char('b')),
                n(Edn::Char('c'))
            ])
        );
    }

    #[test]
    fn collections_comments_discard_tags() {
        assert_eq!(val("[1 2, 3]"), Edn::Vector(vec![int(1), int(2), int(3)]));
        assert_eq!(val("(a)"), Edn::List(vec![n(Edn::Symbol("a".into()))]));
        assert_eq!(val("#{1 3 2}"), Edn::Set(vec![int(1), int(3), int(2)]));
        assert_eq!(val("[]"), Edn::Vector(vec![]));
        assert_eq!(val("{}"), Edn::Map(vec![]));
        assert_eq!(
            val("{:a 1, :b [2]}"),
            Edn::Map(vec![
                (kw("a"), int(1)),
                (kw("b"), n(Edn::Vector(vec![int(2)])))
            ])
        );
        assert_eq!(
            val("; leading\n[1 ; one\n #_ 2 #_#_ 3 4 5 #_[6 [7]]]"),
            Edn::Vector(vec![int(1), int(5)])
        );
        assert_eq!(val("{:a #_ :b 1}"), Edn::Map(vec![(kw("a"), int(1))]));
        assert_eq!(
            val("#inst \"2024-01-01T00:00:00Z\""),
            Edn::Tagged(
                "inst".into(),
                Box::new(n(Edn::Str("2024-01-01T00:00:00Z".into())))
            )
        );
        assert_eq!(
            val("#uuid\"f81d4fae-7dec-11d0-a765-00a0c91e6bf6\""),
            Edn::Tagged(
                "uuid".into(),
                Box::new(n(Edn::Str("f81d4fae-7dec-11d0-a765-00a0c91e6bf6".into())))
            )
        );
        let op = one("#jepsen.history.Op{:index 0, :type :invoke}");
        assert_eq!(
            op.value,
            Edn::Tagged(
                "jepsen.history.Op".into(),
                Box::new(n(Edn::Map(vec![
                    (kw("index"), int(0)),
                    (kw("type"), kw("invoke"))
                ])))
            )
        );
        assert_eq!(
            op.get("type").map(|v| &v.value),
            Some(&Edn::Keyword("invoke".into()))
        );
        assert_eq!(val("#a #_ x #b y").type_name(), "tagged value");
        let all = parse_all(" 1 :a \"s\" [] ; end").unwrap();
        assert_eq!(all.len(), 4);
        assert!(parse_all("").unwrap().is_empty());
        assert!(parse_all(" ,, ; only a comment").unwrap().is_empty());
        assert_eq!(parse_all("\u{feff}1").unwrap()[0].value, Edn::Int(1));
        assert_eq!(parse_all("#_1").unwrap(), vec![]);
    }

    #[test]
    fn positions() {
        let text = "[{:process 1,\n  :type :invoke,\n  :value\n   \"ƖƖ\" :x 2}]";
        let top = one(text);
        assert_eq!((top.line, top.column), (1, 1));
        let Edn::Vector(items) = &top.value else {
            panic!("not a vector")
        };
        let op = &items[0];
        assert_eq!((op.line, op.column), (1, 2));
        let process = op.get("process").unwrap();
        assert_eq!((process.line, process.column), (1, 12));
        let typ = op.get("type").unwrap();
        assert_eq!((typ.line, typ.column), (2, 9));
        let value = op.get("value").unwrap();
        assert_eq!((value.line, value.column), (4, 4));
        // Columns count characters: `"ƖƖ"` is 4 characters, so `:x` is at column 9.
        let Edn::Map(entries) = &op.value else {
            panic!("not a map")
        };
        assert_eq!((entries[3].0.line, entries[3].0.column), (4, 9));
        let tagged = one("\n  #inst \"x\"");
        assert_eq!((tagged.line, tagged.column), (2, 3));
        let Edn::Tagged(_, inner) = &tagged.value else {
            panic!()
        };
        assert_eq!((inner.line, inner.column), (2, 9));
    }

    #[test]
    fn get_and_type_names() {
        let map = one("{:a 1 \"a\" 2 :ns/b 4}");
        assert_eq!(map.get("a").map(|v| &v.value), Some(&Edn::Int(1)));
        // Equal keys come only from code (the reader refuses them): the first is found.
        let twice = n(Edn::Map(vec![(kw("a"), int(1)), (kw("a"), int(3))]));
        assert_eq!(twice.get("a").map(|v| &v.value), Some(&Edn::Int(1)));
        assert_eq!(map.get("ns/b").map(|v| &v.value), Some(&Edn::Int(4)));
        assert!(map.get("b").is_none());
        assert!(map.get("missing").is_none());
        assert!(one("[:a 1]").get("a").is_none());
        let names = [
            ("nil", "nil"),
            ("true", "boolean"),
            ("1", "integer"),
            ("1N", "big integer"),
            ("1.0", "float"),
            ("1M", "decimal"),
            ("\"s\"", "string"),
            ("\\c", "character"),
            (":k", "keyword"),
            ("s", "symbol"),
            ("()", "list"),
            ("[]", "vector"),
            ("#{}", "set"),
            ("{}", "map"),
            ("#t 1", "tagged value"),
        ];
        for (text, name) in names {
            assert_eq!(val(text).type_name(), name, "{text}");
        }
    }

    #[test]
    fn brief_is_short() {
        assert_eq!(val("{:a [1 2.5 \"x\"]}").brief(), "{:a [1 2.5 \"x\"]}");
        let long = val(&format!("[{}]", "12345 ".repeat(100)));
        let brief = long.brief();
        assert_eq!(brief.chars().count(), 60);
        assert!(brief.starts_with("[12345 12345"));
        assert!(brief.ends_with('…'));
        let exactly_60 = Edn::Str("a".repeat(58));
        assert_eq!(exactly_60.brief(), format!("\"{}\"", "a".repeat(58)));
        let huge = Edn::Str("ƖƖ".repeat(500_000));
        let brief = huge.brief();
        assert_eq!(brief.chars().count(), 60);
        assert!(brief.starts_with("\"ƖƖ"));
        // Deep values built in code are written without recursion.
        let mut deep = Edn::Vector(vec![]);
        for _ in 0..5 {
            deep = Edn::Vector(vec![n(deep)]);
        }
        assert_eq!(deep.brief(), "[[[[[[]]]]]]");
    }

    #[test]
    fn writer_format() {
        let map = Edn::Map(vec![
            (kw("k"), n(Edn::Symbol("v".into()))),
            (kw("k2"), n(Edn::Vector(vec![int(1), int(2)]))),
            (n(Edn::Vector(vec![int(1)])), n(Edn::Nil)),
        ]);
        assert_eq!(written(&map), "{:k v, :k2 [1 2], [1] nil}");
        assert_eq!(map.to_string(), "{:k v, :k2 [1 2], [1] nil}");
        assert_eq!(written(&Edn::Float(1.0)), "1.0");
        assert_eq!(written(&Edn::Float(-0.5)), "-0.5");
        assert_eq!(written(&Edn::Float(1e300)), "1e300");
        assert_eq!(written(&Edn::Float(f64::NAN)), "##NaN");
        assert_eq!(written(&Edn::Float(f64::INFINITY)), "##Inf");
        assert_eq!(written(&Edn::Float(f64::NEG_INFINITY)), "##-Inf");
        assert_eq!(written(&Edn::BigInt("12".into())), "12N");
        assert_eq!(written(&Edn::Decimal("1.5".into())), "1.5M");
        assert_eq!(
            written(&Edn::Str("a\"\\\n\u{1}é".into())),
            "\"a\\\"\\\\\\n\\u0001é\""
        );
        assert_eq!(written(&Edn::Char('\n')), "\\newline");
        assert_eq!(written(&Edn::Char('\u{0}')), "\\u0000");
        assert_eq!(written(&Edn::Char('x')), "\\x");
        assert_eq!(written(&Edn::Set(vec![int(1), int(2)])), "#{1 2}");
        assert_eq!(
            written(&Edn::List(vec![int(1), n(Edn::List(vec![]))])),
            "(1 ())"
        );
        assert_eq!(
            written(&Edn::Tagged(
                "inst".into(),
                Box::new(n(Edn::Str("t".into())))
            )),
            "#inst \"t\""
        );
    }

    #[test]
    fn errors() {
        let cases: &[(&str, usize, usize, &str)] = &[
            ("\"abc", 1, 1, "unterminated string"),
            ("\"abc\\", 1, 1, "unterminated string"),
            ("[1 2", 1, 1, "unterminated vector"),
            (
                "[(1 2]",
                1,
                6,
                "expected `)` to close the list opened at column 2, found `]`",
            ),
            ("(", 1, 1, "unterminated list"),
            ("#{", 1, 1, "unterminated set"),
            ("\n {:a", 2, 2, "unterminated map"),
            ("1 )", 1, 3, "unmatched `)`"),
            (
                "{:a 1 :b}",
                1,
                7,
                "odd number of forms (3): the key :b has no value",
            ),
            ("\"a\\qb\"", 1, 3, "bad escape `\\q`"),
            ("\"\\u12\"", 1, 2, "exactly 4 hex digits"),
            ("\"\\uƖƖƖƖ\"", 1, 2, "exactly 4 hex digits"),
            (
                "\"\\uD800\"",
                1,
                2,
                "bad escape `\\uD800` in string: a high surrogate must be followed by a low one \
                 (`\\uDC00` to `\\uDFFF`), as in `\\uD83D\\uDE00`",
            ),
            (
                "\"ab\\udE00\"",
                1,
                4,
                "bad escape `\\uDE00` in string: a low surrogate must follow a high one \
                 (`\\uD800` to `\\uDBFF`), as in `\\uD83D\\uDE00`",
            ),
            (
                "\"\\uD83Dx\"",
                1,
                2,
                "a high surrogate must be followed by a low one",
            ),
            (
                "\"\\uD83D\\u0041\"",
                1,
                2,
                "a high surrogate must be followed",
            ),
            (
                "\"\\uD83D\\uD83D\"",
                1,
                2,
                "a high surrogate must be followed",
            ),
            (
                "\"\\uD83D\\uDE\"",
                1,
                2,
                "a high surrogate must be followed",
            ),
            (
                "\"\\uD83D \\uDE00\"",
                1,
                2,
                "a high surrogate must be followed",
            ),
            (
                "\"\\uD83D\\uDE00\\uDE00\"",
                1,
                14,
                "a low surrogate must follow a high one",
            ),
            ("\\uDFFF", 1, 1, "surrogate"),
            ("\\u12", 1, 1, "bad character"),
            ("\\abc", 1, 1, "bad character"),
            ("\\", 1, 1, "expected a character"),
            ("[\\ ]", 1, 2, "expected a character"),
            ("1/2", 1, 1, "ratios are not supported"),
            ("012", 1, 1, "cannot start with 0"),
            ("1e", 1, 1, "digits after the exponent"),
            ("1.5N", 1, 1, "`N` suffix needs an integer"),
            ("12abc", 1, 1, "bad number"),
            ("0x1F", 1, 1, "bad number"),
            ("1e99999999999M", 1, 1, "does not fit in 32 bits"),
            (".5", 1, 1, "digit before its `.`"),
            ("@x", 1, 1, "unexpected character `@`"),
            ("'x", 1, 1, "unexpected character `'`"),
            ("a::b", 1, 1, "bad symbol"),
            ("a/b/c", 1, 1, "bad symbol"),
            (":", 1, 1, "bad keyword"),
            ("::a", 1, 1, "auto-resolved"),
            ("#", 1, 1, "at the end of input"),
            ("#(+ 1)", 1, 1, "unexpected `#(`"),
            ("#:a{}", 1, 1, "unexpected `#:`"),
            ("##Foo", 1, 1, "bad symbolic value `##Foo`"),
            ("#_", 1, 1, "expected a value after `#_` before the end"),
            ("[#_]", 1, 4, "expected a value after `#_`, found `]`"),
            (
                "#inst",
                1,
                1,
                "expected a value after `#inst` before the end",
            ),
            ("[#inst]", 1, 7, "expected a value after `#inst`, found `]`"),
            ("#a/b/c 1", 1, 1, "bad tag"),
        ];
        for &(text, line, column, message) in cases {
            let e = err(text);
            assert!(
                e.message.contains(message),
                "{text:?}: {e} does not mention {message:?}"
            );
            assert_eq!((e.line, e.column), (line, column), "{text:?}: {e}");
        }
        let e = err("[1\n  )");
        assert_eq!(e.to_string(), "line 2, column 3: expected `]` to close the vector opened at line 1, column 1, found `)`");
        // Quotes are capped.
        let e = err(&format!("{}x", "1".repeat(1000)));
        assert!(e.message.contains(&format!("`{}…`", "1".repeat(40))), "{e}");
        assert!(e.message.len() < 200, "{e}");
        let e = err(&format!("a::{}", "b".repeat(1000)));
        assert!(e.message.len() < 200, "{e}");
        let boxed: Box<dyn std::error::Error> = Box::new(err("]"));
        assert!(boxed.to_string().starts_with("line 1, column 1: unmatched"));
    }

    #[test]
    fn hostile_inputs() {
        // edn-format 3.3.0 panics on this (byte slicing inside `Ɩ`).
        let e = err("dnu\\u\\lwƖƖw");
        assert!(e.message.contains("bad character"), "{e}");
        assert_eq!((e.line, e.column), (1, 6));
        // edn-format tries to allocate 446744073709551615 bytes for this one...
        let e = err("2000000000000000000000000000000000000018e446744073709551615M");
        assert!(e.message.contains("does not fit in 32 bits"), "{e}");
        // ... and hangs on longer ones.
        let e = err("2000000000000000000000000000000000000018e-9223372036854775808M");
        assert!(e.message.contains("does not fit in 32 bits"), "{e}");
        let e = err(&format!("{}e99999999999999999999999999M", "9".repeat(4000)));
        assert!(e.message.contains("does not fit in 32 bits"), "{e}");
        assert_eq!(val("1e2147483647M"), Edn::Decimal("1e2147483647".into()));
        for deep in [
            "[".repeat(10_000),
            "{:a ".repeat(10_000),
            "#_".repeat(10_000),
            "#a ".repeat(10_000),
            format!("{}{}", "(".repeat(10_000), ")".repeat(10_000)),
        ] {
            let e = err(&deep);
            assert_eq!(e.message, "nested deeper than 256 levels");
            assert_eq!(e.line, 1);
        }
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        let mut node = &one(&ok);
        let mut depth = 1;
        while let Edn::Vector(items) = &node.value {
            match items.first() {
                Some(inner) => {
                    node = inner;
                    depth += 1;
                }
                None => break,
            }
        }
        assert_eq!(depth, MAX_DEPTH);
        let e = err(&format!(
            "{}{}",
            "[".repeat(MAX_DEPTH + 1),
            "]".repeat(MAX_DEPTH + 1)
        ));
        assert_eq!(e.column, MAX_DEPTH + 1);
        // A megabyte of digits: one linear scan, then "number too long".
        let e = err(&format!("{}M", "7".repeat(1 << 20)));
        assert!(
            e.message.starts_with("number too long: 1048577 characters"),
            "{e}"
        );
        assert!(e.message.len() < 200);
        let e = err(&format!("[{}N]", "7".repeat(1 << 20)));
        assert!(e.message.starts_with("number too long"), "{e}");
        let longest = format!("{}M", "7".repeat(MAX_NUMBER_LEN - 1));
        assert_eq!(val(&longest), Edn::Decimal("7".repeat(MAX_NUMBER_LEN - 1)));
        // A megabyte string and a megabyte symbol are fine.
        let big = format!("\"{}\"", "ƖƖ\\n".repeat(1 << 18));
        assert!(matches!(val(&big), Edn::Str(s) if s.chars().count() == 3 << 18));
        assert!(matches!(val(&"x".repeat(1 << 20)), Edn::Symbol(s) if s.len() == 1 << 20));
        // Keys inside keys, 255 deep around a megabyte: each level hashes its key from its
        // children's hashes, never the whole key again, so this stays linear.
        let keys = format!(
            "{}\"{}\"{}",
            "{".repeat(MAX_DEPTH - 1),
            "k".repeat(1 << 20),
            " 1}".repeat(MAX_DEPTH - 1)
        );
        assert!(matches!(val(&keys), Edn::Map(m) if m.len() == 1));
        let sets = format!("{}1{}", "#{".repeat(MAX_DEPTH), "}".repeat(MAX_DEPTH));
        assert!(matches!(val(&sets), Edn::Set(s) if s.len() == 1));
        // Many values at one level are fine.
        let wide = format!("[{}]", "{:a 1} ".repeat(100_000));
        assert!(matches!(val(&wide), Edn::Vector(v) if v.len() == 100_000));
    }

    /// `nodes` without those equal by Clojure's `=` to an earlier one.
    fn distinct(nodes: Vec<Node>) -> Vec<Node> {
        let mut seen = std::collections::BTreeSet::new();
        nodes
            .into_iter()
            .filter(|node| seen.insert(node.value.canonical()))
            .collect()
    }

    fn sample_values() -> Vec<Edn> {
        let strings = [
            String::new(),
            "plain".into(),
            "q\"b\\s/n\nt\tr\rb\u{8}f\u{c}".into(),
            (0u8..0x20)
                .map(char::from)
                .chain(['\u{7f}', '\u{85}'])
                .collect(),
            "ƖƖ é 😀 \u{2028} \u{feff}".into(),
            "#{} [] ; not a comment".into(),
        ];
        let chars = [
            'a', 'u', 'n', '\\', '"', '(', ')', '[', ']', '{', '}', ';', ',', '#', ':', ' ', '\n',
            '\t', '\r', '\u{8}', '\u{c}', '\u{0}', '\u{b}', '\u{7f}', 'é', 'Ɩ', '😀', '\u{2028}',
            '\u{feff}',
        ];
        let floats = [
            0.0,
            -0.0,
            1.0,
            -1.5,
            0.1,
            1e16,
            1e300,
            -1e-300,
            5e-324,
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        let mut values = vec![
            Edn::Nil,
            Edn::Bool(true),
            Edn::Bool(false),
            Edn::Int(0),
            Edn::Int(-1),
            Edn::Int(i64::MAX),
            Edn::Int(i64::MIN),
            Edn::BigInt("0".into()),
            Edn::BigInt("-99999999999999999999999".into()),
            Edn::BigInt("+5".into()),
            Edn::Decimal("1.50".into()),
            Edn::Decimal("-3e-10".into()),
            Edn::Decimal("007".into()),
            Edn::Keyword("a".into()),
            Edn::Keyword("jepsen.history/op".into()),
            Edn::Keyword("1".into()),
            Edn::Keyword("nil".into()),
            Edn::Symbol("foo".into()),
            Edn::Symbol("a.b/c".into()),
            Edn::Symbol("/".into()),
            Edn::Symbol("-".into()),
            Edn::Symbol("<=>".into()),
        ];
        values.extend(strings.into_iter().map(Edn::Str));
        values.extend(chars.into_iter().map(Edn::Char));
        values.extend(floats.into_iter().map(Edn::Float));
        let scalars: Vec<Node> = values.iter().cloned().map(Node::new).collect();
        values.push(Edn::Vector(scalars.clone()));
        values.push(Edn::List(scalars.clone()));
        // Sets and map keys without values Clojure calls equal (`0` and `0N`, `0.0` and
        // `-0.0`), which the reader refuses.
        let distinct = distinct(scalars.clone());
        values.push(Edn::Set(distinct.clone()));
        values.push(Edn::Map(
            distinct
                .iter()
                .cloned()
                .zip(scalars.iter().rev().cloned())
                .collect(),
        ));
        values.push(Edn::Vector(vec![]));
        values.push(Edn::List(vec![]));
        values.push(Edn::Set(vec![]));
        values.push(Edn::Map(vec![]));
        values.push(Edn::Tagged(
            "jepsen.history.Op".into(),
            Box::new(n(Edn::Map(vec![
                (kw("index"), int(0)),
                (
                    kw("value"),
                    n(Edn::Vector(vec![n(Edn::Char('x')), n(Edn::Nil)])),
                ),
            ]))),
        ));
        values.push(Edn::Tagged(
            "a".into(),
            Box::new(n(Edn::Tagged("b/c".into(), Box::new(n(Edn::Char('u')))))),
        ));
        let mut deep = Edn::Map(vec![(n(Edn::Set(vec![])), n(Edn::Char('a')))]);
        for i in 0..MAX_DEPTH - 2 {
            deep = match i % 4 {
                0 => Edn::Vector(vec![n(deep), int(1)]),
                1 => Edn::List(vec![n(Edn::Char('\\')), n(deep)]),
                2 => Edn::Map(vec![(n(deep), n(Edn::Str("v".into())))]),
                _ => Edn::Set(vec![n(deep)]),
            };
        }
        values.push(deep);
        values
    }

    #[test]
    fn round_trip_hand_built() {
        let values = sample_values();
        for value in &values {
            let text = written(value);
            let back = parse_all(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_eq!(back.len(), 1, "{text:?}");
            assert_eq!(&back[0].value, value, "{text:?}");
            assert_eq!(written(&back[0].value), text);
        }
        let nodes: Vec<Node> = values.into_iter().map(Node::new).collect();
        let text = text_of(&nodes);
        assert_eq!(parse_all(&text).unwrap(), nodes);
    }

    /// A random value at most `depth` collections deep, from the sample scalars.
    fn random_value(rng: &mut Lcg, scalars: &[Edn], depth: usize) -> Edn {
        let pick = if depth == 0 { 0 } else { rng.below(7) };
        let items = |rng: &mut Lcg| -> Vec<Node> {
            (0..rng.below(5))
                .map(|_| Node::new(random_value(rng, scalars, depth - 1)))
                .collect()
        };
        match pick {
            0 | 1 => scalars[rng.below(scalars.len())].clone(),
            2 => Edn::Vector(items(rng)),
            3 => Edn::List(items(rng)),
            4 => Edn::Set(distinct(items(rng))),
            5 => {
                let keys = distinct(items(rng));
                let values = items(rng);
                Edn::Map(keys.into_iter().zip(values).collect())
            }
            _ => {
                let tags = ["inst", "uuid", "jepsen.history.Op", "a/b", "x#"];
                Edn::Tagged(
                    tags[rng.below(tags.len())].into(),
                    Box::new(Node::new(random_value(rng, scalars, depth - 1))),
                )
            }
        }
    }

    #[test]
    fn round_trip_random_values() {
        let scalars: Vec<Edn> = sample_values()
            .into_iter()
            .filter(|v| {
                !matches!(
                    v,
                    Edn::List(_) | Edn::Vector(_) | Edn::Set(_) | Edn::Map(_) | Edn::Tagged(..)
                )
            })
            .collect();
        let mut rng = Lcg(42);
        for case in 0..3000 {
            let value = random_value(&mut rng, &scalars, 6);
            let text = written(&value);
            let back = parse_all(&text).unwrap_or_else(|e| panic!("case {case}: {text:?}: {e}"));
            assert_eq!(back.len(), 1, "case {case}: {text:?}");
            assert_eq!(back[0].value, value, "case {case}: {text:?}");
            assert_eq!(written(&back[0].value), text, "case {case}");
            // The canonical text reads back to a value with the same canonical text.
            let canonical = value.canonical();
            let again =
                parse_all(&canonical).unwrap_or_else(|e| panic!("case {case}: {canonical:?}: {e}"));
            assert_eq!(again[0].value.canonical(), canonical, "case {case}");
            assert!(again[0].value.equiv(&value), "case {case}");
            let brief = value.brief();
            assert!(brief.chars().count() <= 60);
            if text.chars().count() <= 60 {
                assert_eq!(brief, text);
            } else {
                let kept: String = text.chars().take(59).collect();
                assert_eq!(brief, format!("{kept}…"));
            }
        }
    }

    #[test]
    fn equality_ignores_positions() {
        assert_eq!(
            parse_all("[1 {:a 2}]").unwrap(),
            parse_all("\n\n  [1\n{:a\n 2}]").unwrap()
        );
        assert_ne!(val("[1 2]"), val("[2 1]"));
        assert_ne!(val("#{1 2}"), val("#{2 1}"));
        assert_ne!(val("1"), val("1.0"));
        assert_ne!(val("1"), val("1N"));
        assert_ne!(val("1N"), val("1M"));
        assert_ne!(val(":a"), val("a"));
        assert_ne!(val("#a 1"), val("#b 1"));
        assert_eq!(val("##NaN"), Edn::Float(f64::NAN));
        assert_eq!(one("  [1]").to_string(), "[1]");
        let mut deep = Edn::Nil;
        for _ in 0..1000 {
            deep = Edn::Vector(vec![n(deep)]);
        }
        assert_eq!(written(&deep).len(), 2003);
        assert_eq!(
            err(&written(&deep)).message,
            "nested deeper than 256 levels"
        );
    }

    /// Clojure's answers to `(= a b)` (Clojure 1.11), one row each, and the canonical text
    /// both sides share when equal.
    #[test]
    fn equiv_is_clojures_equality() {
        let table: &[(&str, &str, bool)] = &[
            // Sets and maps are order-free.
            ("#{1 2}", "#{2 1}", true),
            ("{:a 1 :b 2}", "{:b 2 :a 1}", true),
            ("{:a #{1 2}}", "{:a #{2 1}}", true),
            ("#{[1 2] #{3 4}}", "#{#{4 3} (1 2)}", true),
            ("{#{1 2} :x}", "{#{2 1} :x}", true),
            ("#{1 2}", "#{1 2 3}", false),
            ("{:a 1}", "{:a 2}", false),
            ("{:a 1}", "{:b 1}", false),
            ("#{}", "{}", false),
            // Lists and vectors are sequential: equal when their elements are, in order.
            ("(1 2)", "[1 2]", true),
            ("[1 (2 3)]", "(1 [2 3])", true),
            ("()", "[]", true),
            ("[1 2]", "[2 1]", false),
            ("[1 2]", "#{1 2}", false),
            ("[]", "#{}", false),
            ("[nil]", "[]", false),
            // Integers compare by value, whatever their size or suffix.
            ("1N", "1", true),
            ("-0N", "0", true),
            ("+7N", "7", true),
            ("9223372036854775808", "9223372036854775808N", true),
            ("[1N {:a 2N}]", "[1 {:a 2}]", true),
            ("1N", "2", false),
            // Decimals compare by value, and never equal an integer or a float.
            ("1M", "1", false),
            ("1M", "1.0", false),
            ("1.50M", "1.5M", true),
            ("1e2M", "100M", true),
            ("0.00M", "-0M", true),
            ("1.5M", "1.6M", false),
            // Floats are apart from integers; -0.0 equals 0.0 as f64s do.
            ("1.0", "1", false),
            ("1.0", "1.00", true),
            ("1e2", "100.0", true),
            ("-0.0", "0.0", true),
            ("##Inf", "1e400", true),
            // Strings, characters, keywords and symbols are kinds apart.
            ("\"5\"", "5", false),
            ("\"a\"", "\\a", false),
            (":a", "\"a\"", false),
            (":a", "a", false),
            ("\"a\"", "\"a\"", true),
            ("\"\\u0041\"", "\"A\"", true),
            // nil is only nil.
            ("nil", "false", false),
            ("nil", "[]", false),
            ("nil", "nil", true),
            // Tagged values: same tag and equal value.
            ("#inst \"2024\"", "#inst \"2024\"", true),
            ("#t #{1 2}", "#t #{2 1}", true),
            ("#t 1", "#u 1", false),
            ("#t {:a 1}", "{:a 1}", false),
        ];
        for &(a, b, equal) in table {
            let (x, y) = (val(a), val(b));
            assert_eq!(x.equiv(&y), equal, "(= {a} {b})");
            assert_eq!(y.equiv(&x), equal, "(= {b} {a})");
            assert_eq!(x.canonical() == y.canonical(), equal, "{a} vs {b}");
        }
        let canonical = [
            ("#{2 1}", "#{1 2}"),
            ("{:b 2 :a 1}", "{:a 1, :b 2}"),
            ("(1 (2 #{:b :a}))", "[1 [2 #{:a :b}]]"),
            ("1N", "1"),
            ("-12N", "-12"),
            ("+5", "5"),
            ("99999999999999999999", "99999999999999999999"),
            ("1.50M", "1.5M"),
            ("1e2M", "100M"),
            ("-0.050M", "-0.05M"),
            ("1e25M", "1E25M"),
            ("1.5e-30M", "1.5E-30M"),
            ("0M", "0M"),
            ("-0.0", "0.0"),
            ("1e300", "1e300"),
            ("##NaN", "##NaN"),
            ("\"a\\tb\"", "\"a\\tb\""),
            ("\\a", "\\a"),
            (":k", ":k"),
            ("nil", "nil"),
            ("#inst \"t\"", "#inst \"t\""),
        ];
        for (text, expected) in canonical {
            assert_eq!(val(text).canonical(), expected, "{text}");
            // The canonical text reads back to itself.
            assert_eq!(val(expected).canonical(), expected, "{expected}");
        }
        // Values built in code may hold what the reader refuses: equal elements of a set
        // count once, and of equal map keys the first is kept.
        let set = Edn::Set(vec![int(2), int(1), n(Edn::BigInt("2".into()))]);
        assert_eq!(set.canonical(), "#{1 2}");
        let map = Edn::Map(vec![(kw("a"), int(1)), (kw("a"), int(2))]);
        assert_eq!(map.canonical(), "{:a 1}");
        // Deep values are canonical without recursion.
        let mut deep = Edn::Nil;
        for _ in 0..1_000 {
            deep = Edn::List(vec![n(deep)]);
        }
        assert_eq!(
            deep.canonical(),
            format!("{}nil{}", "[".repeat(1_000), "]".repeat(1_000))
        );
    }

    /// Clojure's reader refuses a map with equal keys and a set with equal elements, equal by
    /// its `=` (`Duplicate key: 1`); so does this one, at the second of them.
    #[test]
    fn equal_keys_and_elements_are_refused() {
        let cases: &[(&str, usize, usize, &str)] = &[
            (
                "{:a 1 :a 2}",
                1,
                7,
                "duplicate key :a: the map already has it at column 2",
            ),
            (
                "#{1 1}",
                1,
                5,
                "duplicate element 1: the set already has it at column 3",
            ),
            (
                "#{1 1N}",
                1,
                5,
                "duplicate element 1N: the set already has the equal element 1 at column 3",
            ),
            (
                "{:a 1\n :b 2\n :a 3}",
                3,
                2,
                "duplicate key :a: the map already has it at line 1, column 2",
            ),
            (
                "{[1 2] :x (1 2) :y}",
                1,
                11,
                "duplicate key (1 2): the map already has the equal key [1 2] at column 2",
            ),
            (
                "[{#{1 2} 1 #{2 1} 2}]",
                1,
                12,
                "duplicate key #{2 1}: the map already has the equal key #{1 2} at column 3",
            ),
            (
                "{{:k #{[1 (2)] 3}} 1 {:k #{3 [1 [2]]}} 2}",
                1,
                22,
                "duplicate key {:k #{3 [1 [2]]}}: the map already has the equal key",
            ),
            ("#{#t 1 #t 1N}", 1, 8, "duplicate element #t 1N"),
            ("#{1.50M 1.5M}", 1, 9, "duplicate element 1.5M"),
            ("#{0.0 -0.0}", 1, 7, "duplicate element -0.0"),
            // The first duplicate in file order is the one named.
            (
                "#{3 2 1 2 3}",
                1,
                9,
                "duplicate element 2: the set already has it at column 5",
            ),
        ];
        for &(text, line, column, message) in cases {
            let e = err(text);
            assert!(
                e.message.starts_with(message),
                "{text:?}: {e} does not start with {message:?}"
            );
            assert_eq!((e.line, e.column), (line, column), "{text:?}: {e}");
        }
        // Values Clojure tells apart are not duplicates, nor what `#_` drops, nor equal
        // values in a vector or a map's values.
        for text in [
            "#{1 1.0 1M \"1\" :1 \\1}",
            "{:a 1 \"a\" 2 a 3 \\a 4}",
            "#{nil false}",
            "#{[1 2] [2 1] #{1 2}}",
            "#{#t 1 #u 1 1}",
            "#{1 #_ 1}",
            "[1 1 {:a 1 :b 1}]",
            "{:a #{1} :b #{1}}",
        ] {
            assert!(parse_all(text).is_ok(), "{text}");
        }
        // A hash shared by unequal values is a collision, not a duplicate: values whose
        // hashes match are compared exactly.
        let (a, b, a_again) = (one("#{1 2}"), one("[1 2]"), one("#{2 1}"));
        assert_eq!(first_duplicate(&[&a, &b], &[7, 7]), None);
        assert_eq!(
            first_duplicate(&[&a, &b, &a_again], &[7, 7, 7]),
            Some((0, 2))
        );
        // The reader's hashes, built one node at a time, agree with Clojure's `=`.
        let hash = |text: &str| fold(&val(text), hash_scalar, hash_collection);
        assert_eq!(
            hash("{:a #{1 2N} :b (1.50M)}"),
            hash("{:b [1.5M] :a #{2 1}}")
        );
        assert_ne!(hash("[1 2]"), hash("#{1 2}"));
        assert_ne!(hash("5"), hash("\"5\""));
        assert_ne!(hash("#t 1"), hash("#u 1"));
    }

    /// Knuth's MMIX linear congruential generator: deterministic, no crate needed.
    struct Lcg(u64);

    impl Lcg {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            self.0 >> 33
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
    }

    #[test]
    fn mutation_fuzz() {
        let seeds: Vec<Vec<u8>> = [
            "[{:process 70, :type :invoke, :f :read, :value nil}\n {:process 7, :type :ok, :f :cas, :value [2 1], :time 99286665244}]",
            "{:type :fail, :error [:not-found \"etcd: lease\\n \\u00e9 not found\"], :index 1134, :x 1.5e-3, :y -2N, :z 3.25M}",
            "#jepsen.history.Op{:index 0, :time #inst \"2024-01-01\", :v #{:n1 :n2}} (a.b/c \\newline \\u0041 \\Ɩ) ; c\n #_ [1 2] ##Inf",
            "dnu\\u\\lwƖƖw 2000000000000000000000000000000000000018e446744073709551615M",
            "[[[[{:a \"ƖƖ\"}]]]] (((#{\"x\" \\y :z}))) #uuid \"f81d4fae\" ##NaN -0.0 +7 9223372036854775808",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        let snippets: &[&[u8]] = &[
            b"\\u",
            b"\\",
            b"\"",
            "Ɩ".as_bytes(),
            "😀".as_bytes(),
            b"#_",
            b"##",
            b"#{",
            b"#",
            b"e9",
            b"e-",
            b"M",
            b"N",
            b".",
            b"/",
            b":",
            b"::",
            b"[",
            b"]",
            b"{",
            b"}",
            b"(",
            b")",
            b";",
            b"\n",
            b" ",
            b",",
            b"0",
            b"9",
            b"-",
            b"+",
            b"nil",
            b"\\u0041",
            b"\\uD800",
            b"\\uD83D\\uDE00",
            b"\\newline",
            b"##-Inf",
            b"#inst ",
            b"99999999999999999999",
        ];
        let mut rng = Lcg(0x5eed_ed17);
        let mut current = seeds[0].clone();
        let (mut ok, mut failed) = (0u32, 0u32);
        for iteration in 0..200_000u32 {
            if current.len() > 2048 || rng.below(2) == 0 {
                current = seeds[rng.below(seeds.len())].clone();
            }
            for _ in 0..1 + rng.below(2) {
                let at = rng.below(current.len() + 1);
                match rng.below(5) {
                    0 if !current.is_empty() => {
                        let at = at.min(current.len() - 1);
                        current[at] = match rng.below(3) {
                            0 => rng.below(256) as u8,
                            _ => b"[]{}()#_\\\"u:;, 0123456789eEMN.+-/"[rng.below(33)],
                        };
                    }
                    1 | 2 => {
                        let snippet = snippets[rng.below(snippets.len())];
                        current.splice(at..at, snippet.iter().copied());
                    }
                    3 => {
                        let end = (at + 1 + rng.below(8)).min(current.len());
                        current.drain(at.min(end)..end);
                    }
                    _ => {
                        let end = (at + 1 + rng.below(16)).min(current.len());
                        let copy = current[at.min(end)..end].to_vec();
                        current.splice(at..at, copy);
                    }
                }
            }
            let text = String::from_utf8_lossy(&current);
            match parse_all(&text) {
                Ok(nodes) => {
                    ok += 1;
                    let first = text_of(&nodes);
                    let back = parse_all(&first).unwrap_or_else(|e| {
                        panic!("iteration {iteration}: {text:?} wrote {first:?}: {e}")
                    });
                    assert_eq!(back, nodes, "iteration {iteration}: {text:?} -> {first:?}");
                    assert_eq!(text_of(&back), first, "iteration {iteration}");
                }
                Err(e) => {
                    failed += 1;
                    assert!(e.line >= 1 && e.column >= 1, "{e}");
                    assert!(e.message.chars().count() < 400, "{e}");
                }
            }
        }
        println!("mutation fuzz: {ok} parsed and round-tripped, {failed} rejected");
        assert!(ok > 10_000 && failed > 10_000, "ok {ok}, failed {failed}");
    }

    fn knossos_file(relative: &str) -> Option<String> {
        let path = knossos_dir().join(relative);
        match std::fs::read_to_string(&path) {
            Ok(text) => Some(text),
            Err(e) => {
                println!("skipping {}: {e}", path.display());
                None
            }
        }
    }

    fn single_vector_len(nodes: &[Node]) -> usize {
        assert_eq!(nodes.len(), 1);
        match &nodes[0].value {
            Edn::Vector(items) | Edn::List(items) => items.len(),
            other => panic!("expected one vector, found a {}", other.type_name()),
        }
    }

    #[test]
    fn knossos_cas_failure() {
        let Some(text) = knossos_file("cas-register/bad/cas-failure.edn") else {
            return;
        };
        let nodes = parse_all(&text).unwrap();
        assert_eq!(single_vector_len(&nodes), 590);
        let Edn::Vector(ops) = &nodes[0].value else {
            panic!()
        };
        let nemesis = ops
            .iter()
            .find(|op| op.line == 475)
            .expect("an op starting on line 475");
        assert_eq!(nemesis.column, 2);
        assert_eq!(
            nemesis.get("process").map(|v| &v.value),
            Some(&Edn::Keyword("nemesis".into()))
        );
        let value = nemesis.get("value").unwrap();
        assert_eq!((value.line, value.column), (479, 3));
        assert!(matches!(&value.value, Edn::Str(s) if s.starts_with("Cut off [:n3 #[:n4")));
    }

    #[test]
    fn knossos_etcd_mutex() {
        let Some(text) = knossos_file("mutex/bad/etcd.edn") else {
            return;
        };
        let nodes = parse_all(&text).unwrap();
        assert_eq!(single_vector_len(&nodes), 1135);
        let Edn::Vector(ops) = &nodes[0].value else {
            panic!()
        };
        let last = &ops[1134];
        assert_eq!(last.get("index").map(|v| &v.value), Some(&Edn::Int(1134)));
        assert_eq!(
            last.get("time").map(|v| &v.value),
            Some(&Edn::Int(34_821_084_511))
        );
        let error = last.get("error").unwrap();
        assert_eq!(
            error.value,
            Edn::Vector(vec![
                kw("not-found"),
                n(Edn::Str("etcdserver: requested lease not found".into()))
            ])
        );
        assert_eq!(last.line, 1135);
    }

    fn edn_files(dir: &std::path::Path, found: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for path in paths {
            if path.is_dir() {
                edn_files(&path, found);
            } else if path.extension().is_some_and(|e| e == "edn") {
                found.push(path);
            }
        }
    }

    #[test]
    fn knossos_all_files() {
        let root = knossos_dir();
        if !root.is_dir() {
            println!("skipping: {} is absent", root.display());
            return;
        }
        let mut files = Vec::new();
        edn_files(&root, &mut files);
        assert!(!files.is_empty());
        let mut failures = Vec::new();
        let mut values = 0;
        for path in &files {
            let text = match std::fs::read_to_string(path) {
                Ok(text) => text,
                Err(e) => {
                    failures.push(format!("{}: unreadable: {e}", path.display()));
                    continue;
                }
            };
            match parse_all(&text) {
                Ok(nodes) => {
                    values += nodes.len();
                    let back = parse_all(&text_of(&nodes)).unwrap();
                    assert_eq!(back, nodes, "{}", path.display());
                }
                Err(e) => failures.push(format!("{}: {e}", path.display())),
            }
        }
        println!(
            "knossos: {} files, {values} top-level values, {} failures",
            files.len(),
            failures.len()
        );
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
