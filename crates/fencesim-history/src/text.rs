//! Text for error messages: capped and escaped quotes of the input, and the nearest name to a
//! slip of the keyboard.

/// The most characters of an error message [`cap_message`] keeps: a message that quotes the
/// input (serde's "invalid type: string ...", a TOML value) must not become a line as long as
/// the input.
pub const MAX_MESSAGE_CHARS: usize = 240;

/// `message` cut to at most [`MAX_MESSAGE_CHARS`] characters, ending in `… (N more
/// characters)` when cut, with control characters escaped (`\n`, `\u{1b}`): quoted input
/// must not add lines to an error or reach the terminal as escape sequences. Every error a
/// reader of fencesim's formats returns goes through it.
pub fn cap_message(message: impl Into<String>) -> String {
    let mut message = message.into();
    if message.chars().any(char::is_control) {
        message = message
            .chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect();
    }
    match message.char_indices().nth(MAX_MESSAGE_CHARS) {
        None => message,
        Some((cut, _)) => {
            let more = message[cut..].chars().count();
            format!("{}… ({more} more characters)", &message[..cut])
        }
    }
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
    fn a_slip_finds_its_name_and_noise_finds_none() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(
            nearest("renw_ms", ["ttl_ms", "renew_ms", "work_ms"]),
            Some("renew_ms")
        );
        assert_eq!(nearest("zzzzzz", ["ttl_ms", "renew_ms"]), None);
    }
}
