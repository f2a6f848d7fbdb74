//! Connection strings that may carry a password: what live mode connects with, and what it
//! shows. No secret may reach a file, stdout or stderr: every line fencesim writes about a
//! server of the user's (the reproduce line, the servers a report names, an error about the
//! option) shows [`Endpoint::shown`], where a password reads `***`.
//!
//! Passwords are also taken from where PostgreSQL's and Redis's own tools take them, so that a
//! user need not write one on the command line (where `ps` and the shell's history see it):
//! `PGPASSWORD`, then the password file (`PGPASSFILE`, else `~/.pgpass`) as libpq reads it,
//! which the `postgres` crate does not do by itself; `REDISCLI_AUTH` for Redis, as
//! `redis-cli` reads it; and `ETCDCTL_PASSWORD` for etcd, as `etcdctl` reads it (docs/live.md,
//! "What runs", servers of your own).

use std::path::{Path, PathBuf};

/// What stands for a password wherever one is shown.
pub const MASK: &str = "***";

/// A server of the user's: the string to connect with (a password from the environment
/// filled in) and the same string with every password masked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// What the clients connect with. Never printed or written to a file.
    connect: String,
    /// What every message and report shows: `postgresql://USER:***@HOST/DB`.
    pub shown: String,
    /// What a reproduce line gives, to be run again: the string with its password left out
    /// (`postgresql://USER@HOST/DB`), so that the rerun takes it from the environment as
    /// this run may have (a `***` would be sent as the password itself).
    pub rerun: String,
    /// Where the password came from (`the URL`, `PGPASSWORD`, `/home/u/.pgpass`), if there
    /// is one.
    pub password_from: Option<String>,
    /// The password, to mask in what others say ([`Endpoint::scrub`]).
    password: Option<Vec<u8>>,
}

impl Endpoint {
    /// The connection string, password included: for connecting, never for showing.
    pub fn connect(&self) -> &str {
        &self.connect
    }

    /// `text` (a server's or a library's message) with this endpoint's password masked,
    /// wherever and however (raw or percent-encoded) it appears.
    pub fn scrub(&self, text: &str) -> String {
        scrub(text, self.password.as_deref())
    }
}

/// Where live mode looks for passwords: the environment's variables and the home folder (a
/// value, so that tests give their own).
#[derive(Clone, Debug, Default)]
pub struct PasswordSources {
    /// `PGPASSWORD`.
    pub pg_password: Option<String>,
    /// `PGPASSFILE`, else `~/.pgpass`.
    pub pg_pass_file: Option<PathBuf>,
    /// `REDISCLI_AUTH`.
    pub redis_auth: Option<String>,
    /// `ETCDCTL_PASSWORD`.
    pub etcd_password: Option<String>,
}

impl PasswordSources {
    /// The process's own: `PGPASSWORD`, `PGPASSFILE` or `$HOME/.pgpass`, `REDISCLI_AUTH`,
    /// `ETCDCTL_PASSWORD`.
    pub fn from_env() -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        PasswordSources {
            pg_password: var("PGPASSWORD"),
            pg_pass_file: var("PGPASSFILE")
                .map(PathBuf::from)
                .or_else(|| var("HOME").map(|h| Path::new(&h).join(".pgpass"))),
            redis_auth: var("REDISCLI_AUTH"),
            etcd_password: var("ETCDCTL_PASSWORD"),
        }
    }
}

/// `--postgres`'s value: a libpq connection string (`host=... password=...`) or a
/// `postgres://`/`postgresql://` URL. A password missing from it is taken from `PGPASSWORD`,
/// else from the password file's first line that matches host, port, database and user
/// (`*` matching anything, as libpq reads it; a file that others may read is ignored, with
/// the reason in `warnings`, as libpq ignores it).
///
/// # Errors
/// The string does not parse, or names no host. The message does not quote it: a string
/// that does not parse cannot be told to hold no password (`passwrd=...`).
pub fn postgres(given: &str, sources: &PasswordSources) -> Result<(Endpoint, Vec<String>), String> {
    let shown = hide_postgres(given, Hide::Mask);
    let config: postgres::Config = given.parse().map_err(|e| {
        format!(
            "--postgres (not shown: it may hold a password) is not a libpq connection string or \
             postgres:// URL: {}",
            crate::describe(&e)
        )
    })?;
    if config.get_hosts().is_empty() && config.get_hostaddrs().is_empty() {
        return Err(format!(
            "--postgres {:?} names no host: give host=... (or a Unix socket's folder) or \
             postgresql://USER@HOST:PORT/DATABASE",
            shown_capped(&shown)
        ));
    }
    let mut warnings = Vec::new();
    let (password, from) = match config.get_password() {
        Some(p) => (Some(p.to_vec()), Some("the URL".to_owned())),
        None => match &sources.pg_password {
            Some(p) => (Some(p.as_bytes().to_vec()), Some("PGPASSWORD".to_owned())),
            None => match &sources.pg_pass_file {
                Some(file) => match pgpass_lookup(file, &config, &mut warnings) {
                    Some(p) => (Some(p.into_bytes()), Some(file.display().to_string())),
                    None => (None, None),
                },
                None => (None, None),
            },
        },
    };
    let connect = match (&from, &password) {
        (Some(f), Some(p)) if f != "the URL" => {
            with_pg_password(given, &String::from_utf8_lossy(p))
        }
        _ => given.to_owned(),
    };
    let shown = scrub(&shown, password.as_deref());
    let rerun = scrub(&hide_postgres(given, Hide::Drop), password.as_deref());
    Ok((
        Endpoint {
            connect,
            shown,
            rerun,
            password_from: from,
            password,
        },
        warnings,
    ))
}

/// `--redis`'s value, a `redis://[USER][:PASSWORD@]HOST:PORT/` URL (or `rediss://`,
/// `redis+unix://`, `unix://`). A password missing from it is taken from `REDISCLI_AUTH`.
///
/// # Errors
/// The URL does not parse. The message does not quote it (a URL that does not parse cannot
/// be told to hold no password).
pub fn redis(given: &str, sources: &PasswordSources) -> Result<Endpoint, String> {
    use redis::IntoConnectionInfo;
    let shown = hide_url(given, Hide::Mask);
    let info = given.into_connection_info().map_err(|e| {
        format!("--redis (not shown: it may hold a password) is not a Redis URL: {e}")
    })?;
    let (connect, from, password) = match (info.redis.password, &sources.redis_auth) {
        (Some(p), _) => (given.to_owned(), Some("the URL".to_owned()), Some(p)),
        (None, Some(auth)) => (
            with_url_password(given, auth).unwrap_or_else(|| given.to_owned()),
            Some("REDISCLI_AUTH".to_owned()),
            Some(auth.clone()),
        ),
        (None, None) => (given.to_owned(), None, None),
    };
    let password = password.map(String::into_bytes);
    let shown = scrub(&shown, password.as_deref());
    let rerun = scrub(&hide_url(given, Hide::Drop), password.as_deref());
    Ok(Endpoint {
        connect,
        shown,
        rerun,
        password_from: from,
        password,
    })
}

/// `--etcd`'s value: an etcd member's client URL, `http://[USER[:PASSWORD]@]HOST:PORT`. A
/// user name makes the clients authenticate as that user (etcd's auth, `Authenticate`, whose
/// token goes with every call: [`crate::etcd_server::Gateway`]); a password missing from the
/// URL is taken from `ETCDCTL_PASSWORD`.
///
/// # Errors
/// Not an `http://HOST:PORT` URL: another scheme (`https://` needs TLS, which live mode's HTTP
/// client is built without), no port, a path, or a password without a user. The message does
/// not quote the URL when it could hold a password.
pub fn etcd(given: &str, sources: &PasswordSources) -> Result<Endpoint, String> {
    let shown = hide_url(given, Hide::Mask);
    let not_shown = "--etcd (not shown: it may hold a password)";
    // A URL's scheme is case-insensitive (RFC 3986).
    let scheme_ends = given.find("://").map_or(0, |i| i + 3);
    let rest = given[..scheme_ends]
        .eq_ignore_ascii_case("http://")
        .then(|| &given[scheme_ends..]);
    let Some(rest) = rest else {
        let why = if given.to_ascii_lowercase().starts_with("https://") {
            "https:// needs TLS, which live mode's etcd client is built without; give the \
             member's plain http:// client URL"
        } else {
            "expected http://[USER[:PASSWORD]@]HOST:PORT, a member's client URL"
        };
        return Err(match given.contains('@') {
            true => format!("{not_shown}: {why}"),
            false => format!("--etcd {:?}: {why}", shown_capped(&shown)),
        });
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    let (userinfo, host) = match authority.rfind('@') {
        Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
        None => (None, authority),
    };
    let port_ok = host
        .rsplit_once(':')
        .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0));
    if host.contains(['/', '?', '#']) || !port_ok {
        let why = "expected http://[USER[:PASSWORD]@]HOST:PORT (a member's client URL, with \
                   its port and nothing after it)";
        return Err(match userinfo {
            Some(_) => format!("{not_shown}: {why}"),
            None => format!("--etcd {:?}: {why}", shown_capped(&shown)),
        });
    }
    let (user, password) = match userinfo.map(|u| u.split_once(':').unwrap_or((u, ""))) {
        None => (None, None),
        Some(("", _)) => {
            return Err(format!(
                "{not_shown}: a password needs a user name (http://USER:PASSWORD@HOST:PORT): etcd \
                 authenticates a user"
            ))
        }
        Some((user, "")) => (Some(percent_decode(user)), None),
        Some((user, password)) => (Some(percent_decode(user)), Some(percent_decode(password))),
    };
    let (password, from) = match (password, &sources.etcd_password, &user) {
        (Some(p), _, _) => (Some(p), Some("the URL".to_owned())),
        (None, Some(p), Some(_)) => (Some(p.clone()), Some("ETCDCTL_PASSWORD".to_owned())),
        _ => (None, None),
    };
    let connect = match (&user, &password) {
        (Some(user), Some(password)) => format!(
            "http://{}:{}@{host}",
            percent_encode(user),
            percent_encode(password)
        ),
        (Some(user), None) => format!("http://{}@{host}", percent_encode(user)),
        _ => format!("http://{host}"),
    };
    let password = password.map(String::into_bytes);
    let shown = scrub(&shown, password.as_deref());
    let rerun = scrub(&hide_url(given, Hide::Drop), password.as_deref());
    Ok(Endpoint {
        connect,
        shown,
        rerun,
        password_from: from,
        password,
    })
}

/// `value` with its `%XX` escapes decoded (a malformed one kept as it is).
pub fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `shown` (a masked connection string) cut for a message: at most 200 characters, so that a
/// 100 KB option does not become a 100 KB error line.
pub fn shown_capped(shown: &str) -> String {
    match shown.char_indices().nth(200) {
        None => shown.to_owned(),
        Some((cut, _)) => format!(
            "{}… ({} more characters)",
            &shown[..cut],
            shown[cut..].chars().count()
        ),
    }
}

/// What becomes of a password in a connection string that is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hide {
    /// It reads [`MASK`]: for messages, which should say that there was one.
    Mask,
    /// It is left out, with its key: for a line to run again.
    Drop,
}

/// A PostgreSQL connection string with its password masked, in either form.
pub fn mask_postgres(conn: &str) -> String {
    hide_postgres(conn, Hide::Mask)
}

fn hide_postgres(conn: &str, hide: Hide) -> String {
    if conn.contains("://") {
        hide_url(conn, hide)
    } else {
        hide_keyword_value(conn, hide).trim().to_owned()
    }
}

/// A URL with the password of its user info (`scheme://user:PASSWORD@host`) and of its query
/// (`?password=...`, `?pass=...`) masked.
pub fn mask_url(url: &str) -> String {
    hide_url(url, Hide::Mask)
}

fn hide_url(url: &str, hide: Hide) -> String {
    let Some(start) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    // The user info ends at the last `@` before the query: a password may hold a raw `@`
    // (or a `/`, which the URL would not parse with, but must not be shown either), while a
    // raw `?` would start the query. An `@` in a path without user info masks a little more
    // than needed, never less.
    let rest = &url[start..];
    let query = rest.find('?').unwrap_or(rest.len());
    let mut out = url[..start].to_owned();
    let authority_end = match rest[..query].rfind('@') {
        Some(at) => {
            let userinfo = &rest[..at];
            match (userinfo.find(':'), hide) {
                (Some(colon), Hide::Mask) => {
                    out.push_str(&userinfo[..=colon]);
                    out.push_str(MASK);
                }
                (Some(colon), Hide::Drop) => out.push_str(&userinfo[..colon]),
                (None, _) => out.push_str(userinfo),
            }
            // `redis://:PASSWORD@host` without its password has no user info left.
            if out.len() == start {
                at + 1
            } else {
                at
            }
        }
        None => 0,
    };
    let tail = &rest[authority_end..];
    match tail.find('?') {
        Some(q) => {
            let params: Vec<String> = tail[q + 1..]
                .split('&')
                .filter_map(|pair| match pair.split_once('=') {
                    Some((key, _)) if is_password_key(key) => match hide {
                        Hide::Mask => Some(format!("{key}={MASK}")),
                        Hide::Drop => None,
                    },
                    _ => Some(pair.to_owned()),
                })
                .collect();
            out.push_str(&tail[..q]);
            if !params.is_empty() {
                out.push('?');
                out.push_str(&params.join("&"));
            }
        }
        None => out.push_str(tail),
    }
    out
}

fn is_password_key(key: &str) -> bool {
    matches!(
        key.to_ascii_lowercase().as_str(),
        "password" | "pass" | "passwd"
    )
}

/// A libpq `keyword = value` string with the value of `password` masked or dropped (quoted
/// values with `\'` and `\\` escapes, as libpq reads them).
fn hide_keyword_value(conn: &str, hide: Hide) -> String {
    let mut out = String::with_capacity(conn.len());
    let mut rest = conn;
    loop {
        let trimmed = rest.trim_start();
        out.push_str(&rest[..rest.len() - trimmed.len()]);
        rest = trimmed;
        if rest.is_empty() {
            return out;
        }
        let key_end = rest.find(['=', ' ', '\t', '\n']).unwrap_or(rest.len());
        let key = &rest[..key_end];
        let after_key = &rest[key_end..];
        let eq_pos = after_key.len() - after_key.trim_start().len();
        if !after_key[eq_pos..].starts_with('=') {
            // Not `key=value`: libpq refuses it; keep it as it is (it carries no value).
            out.push_str(rest);
            return out;
        }
        let after_eq = &after_key[eq_pos + 1..];
        let value_start = after_eq.len() - after_eq.trim_start().len();
        let value_text = &after_eq[value_start..];
        let value_len = value_length(value_text);
        let is_password = key.eq_ignore_ascii_case("password");
        if is_password && hide == Hide::Drop {
            // The pair goes, and the blank before it: what follows keeps its own.
            let kept = out.trim_end().len();
            out.truncate(kept);
        } else {
            out.push_str(&rest[..rest.len() - value_text.len()]);
            if is_password {
                out.push_str(MASK);
            } else {
                out.push_str(&value_text[..value_len]);
            }
        }
        rest = &value_text[value_len..];
    }
}

/// How long the value at the start of `text` is: a quoted one up to its closing quote, or a
/// bare one up to white space (both with backslash escapes).
fn value_length(text: &str) -> usize {
    let mut chars = text.char_indices();
    let quoted = text.starts_with('\'');
    if quoted {
        chars.next();
    }
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '\'' if quoted => return i + 1,
            c if !quoted && c.is_whitespace() => return i,
            _ => {}
        }
    }
    text.len()
}

/// `text` with every occurrence of `password` (as given, and percent-encoded) masked: what
/// the masking by form might have missed in a string that parsed in some other way.
pub fn scrub(text: &str, password: Option<&[u8]>) -> String {
    let Some(password) = password.filter(|p| !p.is_empty()) else {
        return text.to_owned();
    };
    let raw = String::from_utf8_lossy(password);
    // A password of a character or two would mask half the line; the forms' masking has
    // taken it out already.
    if raw.chars().count() < 3 || raw == MASK {
        return text.to_owned();
    }
    text.replace(raw.as_ref(), MASK)
        .replace(&percent_encode(&raw), MASK)
}

/// `value` with everything but unreserved URL characters percent-encoded.
fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `conn` with `password` added: a query parameter of a URL, a `password='...'` pair of a
/// keyword string.
fn with_pg_password(conn: &str, password: &str) -> String {
    if conn.contains("://") {
        let glue = if conn.contains('?') { '&' } else { '?' };
        format!("{conn}{glue}password={}", percent_encode(password))
    } else {
        let quoted = password.replace('\\', "\\\\").replace('\'', "\\'");
        format!("{conn} password='{quoted}'")
    }
}

/// A Redis URL with `password` in its user info, or `None` for a form without one
/// (`unix://`, which takes `?pass=`).
fn with_url_password(url: &str, password: &str) -> Option<String> {
    let start = url.find("://")? + 3;
    if url.starts_with("unix://") || url.starts_with("redis+unix://") {
        let glue = if url.contains('?') { '&' } else { '?' };
        return Some(format!("{url}{glue}pass={}", percent_encode(password)));
    }
    let rest = &url[start..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (user, host) = match rest[..authority_end].rfind('@') {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => ("", rest),
    };
    Some(format!(
        "{}{}:{}@{host}",
        &url[..start],
        user.split(':').next().unwrap_or_default(),
        percent_encode(password)
    ))
}

/// The password for `config` in libpq's password file: lines `host:port:database:user:password`,
/// `*` matching anything, `\:` and `\\` escaped, `#` a comment; the first match wins. A Unix
/// socket host matches `localhost`, as in libpq. A file that group or others may read is not
/// used (libpq's rule), and `warnings` says so.
fn pgpass_lookup(
    file: &Path,
    config: &postgres::Config,
    warnings: &mut Vec<String>,
) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(file).ok()?;
    if meta.permissions().mode() & 0o077 != 0 {
        warnings.push(format!(
            "password file {} has group or world access; it is not used (chmod 0600 it, as \
             libpq requires)",
            file.display()
        ));
        return None;
    }
    let text = std::fs::read_to_string(file).ok()?;
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "localhost".to_owned(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let user = config.get_user().unwrap_or_default().to_owned();
    let database = config
        .get_dbname()
        .map_or_else(|| user.clone(), str::to_owned);
    let wanted = [host.as_str(), &port, &database, &user];
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
        .map(pgpass_fields)
        .find(|fields| {
            fields.len() >= 5
                && fields[..4]
                    .iter()
                    .zip(wanted)
                    .all(|(field, want)| field == "*" || field == want)
        })
        .map(|fields| fields[4..].join(":"))
}

/// A password file line's fields, split at unescaped `:`.
fn pgpass_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    fields.last_mut().expect("never empty").push(next);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => fields.last_mut().expect("never empty").push(c),
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_passwords_are_masked_in_the_user_info_and_the_query() {
        assert_eq!(
            mask_url("postgresql://alice:s3cret@127.0.0.1:5433/postgres"),
            "postgresql://alice:***@127.0.0.1:5433/postgres"
        );
        assert_eq!(
            mask_url("postgres://alice:p@ss@db/x?sslmode=disable&password=two"),
            "postgres://alice:***@db/x?sslmode=disable&password=***"
        );
        assert_eq!(
            mask_url("redis://:hunter22@10.0.0.1:6379/0"),
            "redis://:***@10.0.0.1:6379/0"
        );
        assert_eq!(
            mask_url("redis://bob:pw/with/slash@h:1/"),
            "redis://bob:***@h:1/"
        );
        assert_eq!(
            mask_url("redis://127.0.0.1:6379/"),
            "redis://127.0.0.1:6379/"
        );
        assert_eq!(
            mask_url("unix:///tmp/r.sock?pass=xyz"),
            "unix:///tmp/r.sock?pass=***"
        );
        assert_eq!(
            mask_url("postgresql://alice@db/x"),
            "postgresql://alice@db/x"
        );
    }

    #[test]
    fn keyword_passwords_are_masked_quoted_or_bare() {
        assert_eq!(
            mask_postgres("host=127.0.0.1 user=u password=s3cret dbname=postgres"),
            "host=127.0.0.1 user=u password=*** dbname=postgres"
        );
        assert_eq!(
            mask_postgres("host=h password = 'it\\'s a secret' user=u"),
            "host=h password = *** user=u"
        );
        assert_eq!(mask_postgres("PASSWORD=x host=h"), "PASSWORD=*** host=h");
        assert_eq!(mask_postgres("host=h user=u"), "host=h user=u");
    }

    #[test]
    fn a_line_to_run_again_leaves_the_password_out() {
        let drop = |conn: &str| hide_postgres(conn, Hide::Drop);
        assert_eq!(
            drop("postgresql://alice:s3cret@127.0.0.1:5433/postgres"),
            "postgresql://alice@127.0.0.1:5433/postgres"
        );
        assert_eq!(
            drop("postgres://alice@db/x?password=two&sslmode=disable"),
            "postgres://alice@db/x?sslmode=disable"
        );
        assert_eq!(
            drop("postgres://alice@db/x?pass=two"),
            "postgres://alice@db/x"
        );
        assert_eq!(
            hide_url("redis://:hunter22@10.0.0.1:6379/0", Hide::Drop),
            "redis://10.0.0.1:6379/0"
        );
        assert_eq!(
            drop("host=127.0.0.1 user=u password='it\\'s' dbname=postgres"),
            "host=127.0.0.1 user=u dbname=postgres"
        );
        assert_eq!(drop("password=x host=h"), "host=h");
        let sources = PasswordSources::default();
        let (e, _) = postgres("host=h user=u password=s3cret", &sources).unwrap();
        assert_eq!(e.rerun, "host=h user=u");
        assert_eq!(e.shown, "host=h user=u password=***");
        let e = redis("redis://bob:pw22@h:1/", &sources).unwrap();
        assert_eq!(
            (e.rerun.as_str(), e.shown.as_str()),
            ("redis://bob@h:1/", "redis://bob:***@h:1/")
        );
    }

    #[test]
    fn a_password_from_the_environment_is_used_and_never_shown() {
        let sources = PasswordSources {
            pg_password: Some("from-env".to_owned()),
            ..PasswordSources::default()
        };
        let (e, _) = postgres("postgresql://u@127.0.0.1:5/db", &sources).unwrap();
        assert_eq!(
            e.connect(),
            "postgresql://u@127.0.0.1:5/db?password=from-env"
        );
        assert_eq!(e.shown, "postgresql://u@127.0.0.1:5/db");
        assert_eq!(e.password_from.as_deref(), Some("PGPASSWORD"));
        let (e, _) = postgres("host=h user=u", &sources).unwrap();
        assert_eq!(e.connect(), "host=h user=u password='from-env'");
        let parsed: postgres::Config = e.connect().parse().unwrap();
        assert_eq!(parsed.get_password(), Some(&b"from-env"[..]));

        let redis_sources = PasswordSources {
            redis_auth: Some("r p/w".to_owned()),
            ..PasswordSources::default()
        };
        let e = redis("redis://127.0.0.1:7000/", &redis_sources).unwrap();
        assert_eq!(e.connect(), "redis://:r%20p%2Fw@127.0.0.1:7000/");
        assert_eq!(e.shown, "redis://127.0.0.1:7000/");
        use redis::IntoConnectionInfo;
        let info = e.connect().into_connection_info().unwrap();
        assert_eq!(info.redis.password.as_deref(), Some("r p/w"));
    }

    #[test]
    fn a_url_that_does_not_parse_is_reported_masked() {
        let sources = PasswordSources::default();
        let err = postgres("postgresql://u:topsecret@[nope", &sources).unwrap_err();
        assert!(!err.contains("topsecret"), "{err}");
        assert!(
            err.starts_with("--postgres (not shown: it may hold a password) is not"),
            "{err}"
        );
        // A misspelt keyword's value is not known to be a password: not quoted at all.
        let err = postgres("host=h passwrd=topsecret", &sources).unwrap_err();
        assert!(
            !err.contains("topsecret") && err.contains("passwrd"),
            "{err}"
        );
        let err = redis("redis://u:topsecret@host:notaport/", &sources).unwrap_err();
        assert!(!err.contains("topsecret"), "{err}");
        let err = redis(":topsecret@127.0.0.1:1", &sources).unwrap_err();
        assert!(!err.contains("topsecret"), "{err}");
        // Parsed, but no host: named, masked and capped.
        let err = postgres(
            &format!("user=u password=topsecret dbname={}", "d".repeat(500)),
            &sources,
        )
        .unwrap_err();
        assert!(
            !err.contains("topsecret") && err.contains("names no host"),
            "{err}"
        );
        assert!(err.len() < 600, "{err}");
    }

    #[test]
    fn the_password_file_is_read_as_libpq_reads_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("fencesim-pgpass-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("pgpass");
        std::fs::write(
            &file,
            "# comment\nother:*:*:*:wrong\n127.0.0.1:5433:*:alice:a\\:b\\\\c\n*:*:*:*:fallback\n",
        )
        .unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let sources = PasswordSources {
            pg_pass_file: Some(file.clone()),
            ..PasswordSources::default()
        };
        let (e, warnings) = postgres("postgresql://alice@127.0.0.1:5433/db", &sources).unwrap();
        assert!(warnings.is_empty());
        let parsed: postgres::Config = e.connect().parse().unwrap();
        assert_eq!(parsed.get_password(), Some(&b"a:b\\c"[..]));
        let (e, _) = postgres("host=127.0.0.1 port=5434 user=bob", &sources).unwrap();
        let parsed: postgres::Config = e.connect().parse().unwrap();
        assert_eq!(parsed.get_password(), Some(&b"fallback"[..]));
        // Readable by others: not used, and said so.
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let (e, warnings) = postgres("postgresql://alice@127.0.0.1:5433/db", &sources).unwrap();
        assert_eq!(e.password_from, None);
        assert!(
            warnings[0].contains("group or world access"),
            "{warnings:?}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn scrub_masks_a_password_however_it_was_written() {
        assert_eq!(scrub("a s3cr/t b s3cr%2Ft", Some(b"s3cr/t")), "a *** b ***");
        assert_eq!(scrub("nothing here", None), "nothing here");
    }
    #[test]
    fn an_etcd_url_keeps_its_password_out_of_every_shown_form() {
        let none = PasswordSources::default();
        let e = etcd("http://root:s3cr%2Ft@127.0.0.1:2379/", &none).unwrap();
        assert_eq!(e.connect(), "http://root:s3cr%2Ft@127.0.0.1:2379");
        assert_eq!(e.shown, "http://root:***@127.0.0.1:2379/");
        assert_eq!(e.rerun, "http://root@127.0.0.1:2379/");
        assert_eq!(e.password_from.as_deref(), Some("the URL"));
        assert_eq!(e.scrub("token for s3cr/t"), "token for ***");
        // The password from ETCDCTL_PASSWORD, for a URL that names a user only.
        let env = PasswordSources {
            etcd_password: Some("p w".to_owned()),
            ..PasswordSources::default()
        };
        let e = etcd("http://root@127.0.0.1:2379", &env).unwrap();
        assert_eq!(e.connect(), "http://root:p%20w@127.0.0.1:2379");
        assert_eq!(e.shown, "http://root@127.0.0.1:2379");
        assert_eq!(e.password_from.as_deref(), Some("ETCDCTL_PASSWORD"));
        // The scheme in any case.
        assert_eq!(etcd("HTTP://h:1", &none).unwrap().connect(), "http://h:1");
        // No user, no authentication: the variable is not used.
        let e = etcd("http://127.0.0.1:2379", &env).unwrap();
        assert_eq!(
            (e.connect(), &e.password_from),
            ("http://127.0.0.1:2379", &None)
        );
    }

    #[test]
    fn a_bad_etcd_url_is_refused_without_its_password() {
        let none = PasswordSources::default();
        for (given, expected) in [
            ("https://u:topsecret@h:2379", "needs TLS"),
            ("etcd://h:2379", "expected http://"),
            ("http://h", "with its port"),
            ("http://u:topsecret@h:2379/v3", "with its port"),
            ("http://:topsecret@h:2379", "needs a user name"),
            ("http://h:0", "with its port"),
        ] {
            let err = etcd(given, &none).unwrap_err();
            assert!(err.contains(expected), "{given}: {err}");
            assert!(!err.contains("topsecret"), "{err}");
        }
        assert_eq!(percent_decode("a%2Fb%zz%4"), "a/b%zz%4");
    }
}
