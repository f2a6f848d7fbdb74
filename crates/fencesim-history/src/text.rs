//! Text for error messages: capped and escaped quotes of the input, and the nearest name to a
//! slip of the keyboard.

/// The most characters of one quote of the input that an error message keeps
/// ([`cap_message`]): a message that quotes the input (serde's "invalid type: string ...", a
/// TOML value) must not become a line as long as the input.
pub const MAX_QUOTE_CHARS: usize = 80;

/// `message` with each quote of the input in it (between backticks or double quotes) cut to
/// at most [`MAX_QUOTE_CHARS`] characters, ending in `… (N more characters)`, and control
/// characters escaped (`\n`, `\u{1b}`): quoted input must not make an error as long as the
/// input, add lines to it, or reach the terminal as escape sequences. What the message says
/// is accepted (`expected one of pause, hold, ...`) is never cut. Every error a reader of
/// fencesim's formats returns goes through it.
pub fn cap_message(message: impl Into<String>) -> String {
    cap_quotes(&escape_controls(&message.into()))
}

/// `text` with its control characters escaped as Rust escapes them (`\n`, `\t`, `\u{1b}`):
/// a string that came from an input (a name in a history, a value in a scenario) must not add
/// lines to what fencesim prints or writes, or reach a terminal as an escape sequence. Text
/// without control characters comes back as it is, unallocated.
pub fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if needs_escape(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A path as fencesim prints it: [`Path::display`] with its control characters escaped, line
/// breaks included (a file name may hold a newline, which would otherwise start a line of
/// output that fencesim did not write).
///
/// [`Path::display`]: std::path::Path::display
pub fn display_path(path: &std::path::Path) -> String {
    escape_controls(&path.display().to_string()).into_owned()
}

/// `word` as one word of a shell's command line, for the commands fencesim prints to be run
/// again (`reproduce:` lines): as it is when every character is one no shell gives a meaning
/// to (letters, digits and `_ - . / : , + = @ %`), between single quotes otherwise
/// (`'it'\''s'`, so `$(...)`, backticks and spaces are text, in any POSIX shell), and in bash's
/// ANSI-C quoting (`$'a\nb'`, which bash and zsh read, a plain POSIX `sh` does not) when it
/// holds a character [`escape_controls`] escapes: a newline between single quotes would still
/// split the printed line. A word that begins with `-` is still one the command may read as
/// an option: a caller that prints a path writes it `./-...`.
pub fn shell_word(word: &str) -> std::borrow::Cow<'_, str> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./:,+=@%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        return std::borrow::Cow::Borrowed(word);
    }
    if !word.chars().any(needs_escape) {
        return std::borrow::Cow::Owned(format!("'{}'", word.replace('\'', r"'\''")));
    }
    let mut out = String::from("$'");
    for c in word.chars() {
        match c {
            '\\' | '\'' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str(r"\n"),
            '\t' => out.push_str(r"\t"),
            c if needs_escape(c) && c.is_ascii() => out.push_str(&format!(r"\x{:02x}", c as u32)),
            c if needs_escape(c) => out.push_str(&format!(r"\U{:08x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('\'');
    std::borrow::Cow::Owned(out)
}

/// Whether `c` may not reach a reader as it is: a control character (C0, DEL, C1), a line or
/// paragraph separator (a line break to some terminals and editors), or an invisible
/// formatting character that reorders or hides text (bidirectional overrides and isolates,
/// marks, zero-width characters, the byte-order mark: a name could display as another).
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}'                    // line and paragraph separators
                | '\u{200B}'..='\u{200F}'              // zero-width, LRM, RLM
                | '\u{202A}'..='\u{202E}'              // bidirectional embeddings, overrides
                | '\u{2060}'..='\u{2069}'              // word joiner .. bidirectional isolates
                | '\u{061C}' | '\u{FEFF}'              // Arabic letter mark, byte-order mark
        )
}

/// `text` with every quoted run (`` `...` `` or `"..."`, a backslash escaping the next
/// character) longer than [`MAX_QUOTE_CHARS`] cut, its closing quote kept.
fn cap_quotes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if c != '`' && c != '"' {
            continue;
        }
        let mut quote = String::new();
        let mut closed = false;
        while let Some(q) = chars.next() {
            if q == c {
                closed = true;
                break;
            }
            quote.push(q);
            if q == '\\' {
                if let Some(escaped) = chars.next() {
                    quote.push(escaped);
                }
            }
        }
        match quote.char_indices().nth(MAX_QUOTE_CHARS) {
            None => out.push_str(&quote),
            Some((cut, _)) => {
                let more = quote[cut..].chars().count();
                out.push_str(&quote[..cut]);
                out.push_str(&format!("… ({more} more characters)"));
            }
        }
        if closed {
            out.push(c);
        }
    }
    out
}

/// Levenshtein distance between `a` and `b`, in characters.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// The candidate nearest to `name` by edit distance, if one is near enough to be a slip of
/// the keyboard: at most a third of `name`'s characters differ. Ties go to the first in order.
pub fn nearest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = name.chars().count().div_ceil(3);
    candidates
        .into_iter()
        .map(|c| (edit_distance(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_of_the_input_are_cut_and_the_accepted_names_kept() {
        let names: Vec<String> = (0..40).map(|i| format!("kind-number-{i}")).collect();
        let long_input = "x".repeat(500);
        let message = format!(
            "unknown variant `{long_input}`, expected one of {}",
            names.join(", ")
        );
        let capped = cap_message(message);
        assert!(
            capped.starts_with(&format!(
                "unknown variant `{}… (420 more characters)`,",
                "x".repeat(80)
            )),
            "{capped}"
        );
        assert!(
            capped.ends_with("kind-number-38, kind-number-39"),
            "{capped}"
        );
        let quoted = cap_message(format!(
            "invalid type: string \"{}\\\"{}\", expected u64",
            "a".repeat(79),
            "b".repeat(30)
        ));
        assert!(
            quoted.contains("… (31 more characters)\", expected u64"),
            "{quoted}"
        );
        // An unclosed quote is cut too, and a short message is kept whole.
        assert_eq!(cap_message("a `b` \"c\" d"), "a `b` \"c\" d");
        assert!(cap_message(format!("`{}", "z".repeat(100))).ends_with("… (20 more characters)"));
        assert_eq!(
            cap_message("line\nbreak\u{1b}[2J"),
            "line\\nbreak\\u{1b}[2J"
        );
        // Invisible reorderings and separators too; ordinary non-ASCII text stays.
        assert_eq!(
            escape_controls("b\u{2028}FAKE\u{202e}evil\u{feff} é 😀"),
            "b\\u{2028}FAKE\\u{202e}evil\\u{feff} é 😀"
        );
    }

    #[test]
    fn a_shell_word_runs_as_the_text_it_was() {
        assert_eq!(
            shell_word("scenarios/incidents/k01.toml"),
            "scenarios/incidents/k01.toml"
        );
        assert_eq!(shell_word(""), "''");
        assert_eq!(shell_word("my file.toml"), "'my file.toml'");
        assert_eq!(shell_word("$(rm -rf ~)`id`"), "'$(rm -rf ~)`id`'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(
            shell_word("bad\nverdict: valid\u{1b}[2J'\\"),
            r"$'bad\nverdict: valid\x1b[2J\'\\'"
        );
        assert_eq!(
            shell_word("a\u{202e}b\u{85}é"),
            r"$'a\U0000202eb\U00000085é'"
        );
    }

    #[test]
    fn a_slip_finds_its_name_and_noise_finds_none() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(
            nearest("renw_ms", ["ttl_ms", "renew_ms", "work_ms"]),
            Some("renew_ms")
        );
        assert_eq!(nearest("zzzzzz", ["ttl_ms", "renew_ms"]), None);
    }
}
