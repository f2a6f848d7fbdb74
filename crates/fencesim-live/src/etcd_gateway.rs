//! etcd's JSON gateway (gRPC-gateway over plain HTTP, `/v3/...`) as live mode calls it: the
//! etcd design's client sessions, the harness asking which member leads, and the check of a
//! cluster of the user's (`--etcd`). One POST per call, each with a deadline; a member of a
//! cluster with auth enabled is called with the token of an `Authenticate` (etcd's simple or
//! JWT token in the `Authorization` header), asked for again once when the server says the
//! token is no longer valid.

use std::time::Duration;

use serde_json::{json, Value};

use crate::secret::percent_decode;

/// An HTTP agent whose every call gives up after `timeout`.
pub fn agent(timeout: Duration) -> ureq::Agent {
    ureq::AgentBuilder::new().timeout(timeout).build()
}

/// POST `body` (JSON) to `url` + `path` and parse the answer.
///
/// # Errors
/// The call failed or timed out, or the answer is not JSON (one line).
pub fn post(agent: &ureq::Agent, url: &str, path: &str, body: &Value) -> Result<Value, String> {
    post_as(agent, url, path, body, None)
}

fn post_as(
    agent: &ureq::Agent,
    url: &str,
    path: &str,
    body: &Value,
    token: Option<&str>,
) -> Result<Value, String> {
    let mut request = agent
        .post(&format!("{url}{path}"))
        .set("Content-Type", "application/json");
    if let Some(token) = token {
        request = request.set("Authorization", token);
    }
    let text = match request.send_string(&body.to_string()) {
        Ok(response) => response.into_string().map_err(|e| e.to_string())?,
        Err(ureq::Error::Status(code, response)) => {
            let text = body_of(response);
            // The gateway's error, `{"error": "etcdserver: ...", "code": 3}`, in etcd's words.
            let error = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v.get("error").and_then(Value::as_str).map(str::to_owned));
            // Not etcd's JSON (another server's page): its start, not all of it.
            let text = match text.char_indices().nth(200) {
                Some((cut, _)) => format!("{}…", &text[..cut]),
                None => text,
            };
            return Err(format!("HTTP {code}: {}", error.unwrap_or(text)));
        }
        Err(e) => return Err(e.to_string()),
    };
    serde_json::from_str(&text).map_err(|e| format!("{path}: not JSON ({e}): {text}"))
}

/// What a response's body holds, as far as it could be read: the gateway ends an error's
/// chunked body with a trailer (`Grpc-Trailer-Content-Type`) that the HTTP client refuses,
/// after the JSON.
fn body_of(response: ureq::Response) -> String {
    use std::io::Read;
    let mut bytes = Vec::new();
    let mut reader = response.into_reader().take(64 * 1024);
    let mut chunk = [0u8; 4096];
    while let Ok(n @ 1..) = reader.read(&mut chunk) {
        bytes.extend_from_slice(&chunk[..n]);
    }
    String::from_utf8_lossy(&bytes).trim().to_owned()
}

/// One member as a client calls it: its URL without credentials, the user and password it
/// authenticates with (from `http://USER:PASSWORD@HOST:PORT`, percent-decoded), and the
/// token the last `Authenticate` gave.
#[derive(Clone)]
pub struct Gateway {
    base: String,
    credentials: Option<(String, String)>,
    token: Option<String>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Neither the password nor the token is shown.
        f.debug_struct("Gateway")
            .field("base", &self.base)
            .field("user", &self.credentials.as_ref().map(|c| &c.0))
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// The member at `url` (`http://[USER[:PASSWORD]@]HOST:PORT`, as
    /// [`crate::secret::etcd`] writes it to connect with).
    pub fn new(url: &str) -> Gateway {
        let (scheme, rest) = url.split_once("://").unwrap_or(("http", url));
        let (credentials, host) = match rest.rfind('@') {
            Some(at) => {
                let (user, password) = rest[..at].split_once(':').unwrap_or((&rest[..at], ""));
                let credentials = (percent_decode(user), percent_decode(password));
                (Some(credentials), &rest[at + 1..])
            }
            None => (None, rest),
        };
        Gateway {
            base: format!("{scheme}://{}", host.trim_end_matches('/')),
            credentials,
            token: None,
        }
    }

    /// Its URL, without credentials: what messages may show.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// POST `body` to `path`, authenticated if the URL named a user: the first call asks
    /// for a token, and a call the server refuses for its token asks again, once.
    ///
    /// # Errors
    /// As [`post`], and the user's authentication refused (etcd's own words).
    pub fn post(&mut self, agent: &ureq::Agent, path: &str, body: &Value) -> Result<Value, String> {
        if self.credentials.is_none() {
            return post(agent, &self.base, path, body);
        }
        if self.token.is_none() {
            self.authenticate(agent)?;
        }
        let answer = post_as(agent, &self.base, path, body, self.token.as_deref());
        match answer {
            // Simple tokens lapse after --auth-token-ttl (300 s) without use.
            Err(e) if e.contains("invalid auth token") => {
                self.authenticate(agent)?;
                post_as(agent, &self.base, path, body, self.token.as_deref())
            }
            answer => answer,
        }
    }

    fn authenticate(&mut self, agent: &ureq::Agent) -> Result<(), String> {
        let Some((user, password)) = &self.credentials else {
            return Ok(());
        };
        let body = json!({ "name": user, "password": password });
        let answer = post(agent, &self.base, "/v3/auth/authenticate", &body)
            .map_err(|e| format!("authenticating as {user:?}: {e}"))?;
        let token = answer.get("token").and_then(Value::as_str).ok_or_else(|| {
            format!("authenticating as {user:?}: no token in the answer (is auth enabled?)")
        })?;
        self.token = Some(token.to_owned());
        Ok(())
    }
}

/// Run `call` (a blocking lock call) while a thread keeps `lease` alive through `gateway`,
/// one keepalive every third of `ttl_ms` (as clientv3's session does), until `call` returns:
/// etcd keeps no blocked caller's lease alive itself. Live mode is the one place with threads.
pub fn keeping_alive<T>(
    gateway: &Gateway,
    lease: &str,
    ttl_ms: u64,
    call: impl FnOnce() -> T,
) -> T {
    let every = Duration::from_millis((ttl_ms / 3).max(1));
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let mut gateway = gateway.clone();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let agent = agent(every);
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every)
            {
                let _ = gateway.post(&agent, "/v3/lease/keepalive", &json!({ "ID": lease }));
            }
        });
        let answer = call();
        let _ = stop.send(());
        answer
    })
}

/// The name of the member that leads, asked of the members at `urls` in turn (the first that
/// answers says which member id leads; the member list names it). `None`: no member answered
/// or none leads.
pub fn leader(urls: &[String]) -> Option<String> {
    let agent = agent(Duration::from_millis(1_000));
    for url in urls {
        let Ok(status) = post(&agent, url, "/v3/maintenance/status", &json!({})) else {
            continue;
        };
        let Some(leader) = status.get("leader").and_then(Value::as_str) else {
            continue;
        };
        let Ok(list) = post(&agent, url, "/v3/cluster/member/list", &json!({})) else {
            continue;
        };
        let members = list.get("members").and_then(Value::as_array)?;
        return members
            .iter()
            .find(|m| m.get("ID").and_then(Value::as_str) == Some(leader))
            .and_then(|m| m.get("name").and_then(Value::as_str))
            .map(str::to_owned);
    }
    None
}

/// What `--etcd`'s members answer before a trial: the cluster each belongs to and the member
/// it is (`cluster_id` and `member_id` of `Status`'s header, decimal), after a key put and
/// deleted under `prefix`, which proves the user may write there as the lock recipe does.
///
/// # Errors
/// A member does not answer, refuses the user, or refuses the write: etcd's own words, with
/// a hint where etcd's are terse.
pub fn cluster_of(url: &str, prefix: &str) -> Result<(String, String), String> {
    let agent = agent(Duration::from_secs(2));
    let mut gateway = Gateway::new(url);
    let key = base64_of(&format!("{prefix}probe"));
    let probe = gateway
        .post(&agent, "/v3/kv/put", &json!({ "key": key, "value": "" }))
        .and_then(|_| gateway.post(&agent, "/v3/kv/deleterange", &json!({ "key": key })));
    probe.map_err(|e| hint(&e, prefix, gateway.credentials.is_some()))?;
    let status = gateway.post(&agent, "/v3/maintenance/status", &json!({}))?;
    let id = |field: &str| {
        status["header"]
            .get(field)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| format!("/v3/maintenance/status: no {field} in {status}"))
    };
    Ok((id("cluster_id")?, id("member_id")?))
}

/// etcd's refusal `error`, with what the user can do about it.
fn hint(error: &str, prefix: &str, has_user: bool) -> String {
    let what = if error.contains("user name is empty") {
        "the cluster has auth enabled: give a user in the URL (http://USER@HOST:PORT, the \
         password in ETCDCTL_PASSWORD)"
            .to_owned()
    } else if error.contains("permission denied") {
        format!("the user may not write under {prefix:?}: it needs read and write on the prefix \"fencesim-live-\"")
    } else if error.contains("invalid user ID or password") && has_user {
        "the user or password is wrong (a password missing from the URL comes from \
         ETCDCTL_PASSWORD)"
            .to_owned()
    } else {
        return error.to_owned();
    };
    format!("{error}: {what}")
}

/// `text` as the gateway writes bytes: standard base64.
fn base64_of(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gateway_keeps_its_credentials_out_of_its_url() {
        let g = Gateway::new("http://root:p%20w@127.0.0.1:2379");
        assert_eq!(g.base(), "http://127.0.0.1:2379");
        assert_eq!(g.credentials, Some(("root".to_owned(), "p w".to_owned())));
        assert!(!format!("{g:?}").contains("p w"), "{g:?}");
        let g = Gateway::new("http://127.0.0.1:2379/");
        assert_eq!((g.base(), &g.credentials), ("http://127.0.0.1:2379", &None));
    }

    #[test]
    fn etcds_terse_refusals_get_a_hint() {
        let empty = hint("HTTP 400: etcdserver: user name is empty", "p-", false);
        assert!(
            empty.ends_with(
                "give a user in the URL (http://USER@HOST:PORT, the password in ETCDCTL_PASSWORD)"
            ),
            "{empty}"
        );
        let denied = hint("HTTP 403: etcdserver: permission denied", "p-", true);
        assert!(denied.contains("may not write under \"p-\""), "{denied}");
        let wrong = "HTTP 400: etcdserver: authentication failed, invalid user ID or password";
        assert!(hint(wrong, "p-", true).contains("ETCDCTL_PASSWORD"));
        assert_eq!(hint("HTTP 500: other", "p-", true), "HTTP 500: other");
    }
}
