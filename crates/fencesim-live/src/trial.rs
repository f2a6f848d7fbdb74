//! One live trial: fresh tables and servers, a process per client (`processes.rs`), the
//! scenario's faults applied while it runs (`nemesis.rs`), and the history assembled from what
//! everyone recorded.

use std::path::Path;
use std::sync::mpsc;

use fencesim_history::History;

use crate::assemble::{assemble, ClientRecord, LogRow};
use crate::clock::{mono_ns, Origin};
use crate::form::{Endpoints, LiveForms, RedisPersistence, LOG_SCHEMA};
use crate::nemesis::Running;
use crate::plan::LivePlan;
use crate::processes::Processes;
use crate::proxy::Proxy;
use crate::redis_server::RedisNode;
use crate::server_node::ServerProcess;
use crate::wire::ClientConfig;
use crate::LiveError;

/// The schema a run's tables live in, `fencesim_live_<pid>`: created for each trial and
/// dropped after it, so that a server the user already runs keeps everything else it has, and
/// two runs against one server do not touch each other's tables.
pub fn schema() -> String {
    format!("fencesim_live_{}", std::process::id())
}

/// What a trial needs besides its plan.
pub struct TrialSetup<'a> {
    /// The binary to run as `PROGRAM live-client` (the running `fencesim`, or a user's own).
    pub program: &'a Path,
    /// The forms of the binary's designs.
    pub forms: &'a LiveForms,
    /// libpq connection string of the database.
    pub conninfo: &'a str,
    /// Written in the history's header.
    pub tool_version: &'a str,
    /// Asked between steps: stop the trial early (Ctrl-C), keeping what was recorded.
    pub interrupted: &'a (dyn Fn() -> bool + Sync),
    /// The PostgreSQL server fencesim started (`None`: the user's own, which live mode does
    /// not pause or crash).
    pub postgres: Option<&'a std::sync::Mutex<crate::pg_server::PgServer>>,
    /// Its port (`None`: the user's own, which live mode puts no proxy before).
    pub postgres_port: Option<u16>,
    /// Servers of the user's for the design's own nodes, instead of those fencesim starts (no
    /// faults on them then): Redis servers (`--redis`), one per node; or the client URLs of an
    /// etcd cluster (`--etcd`). Which, the plan's needs say.
    pub own_servers: Option<&'a [String]>,
}

/// A finished trial.
#[derive(Clone, Debug)]
pub struct TrialRecord {
    /// The history.
    pub history: History,
    /// How long it ran, real ms.
    pub real_ms: u64,
    /// Whether it stopped early (interrupted, or past the scenario's `duration_ms`).
    pub cut_short: Option<String>,
    /// What real time disturbed, in words: each fault, resume or restart that took effect
    /// later than [`crate::LATE_MS`] after its time (a busy machine). Its schedule
    /// is then not the one the scenario wrote, and its verdict may differ from the
    /// simulation's for that reason alone.
    pub disturbed: Vec<String>,
}

/// The connection string with the run's schema first on the search path: a libpq
/// `key=value` string gets an `options` pair, a `postgres://` or `postgresql://` URL an
/// `options` query parameter.
pub fn with_schema(conninfo: &str) -> String {
    let schema = schema();
    if conninfo.starts_with("postgres://") || conninfo.starts_with("postgresql://") {
        let glue = if conninfo.contains('?') { '&' } else { '?' };
        return format!("{conninfo}{glue}options=-c%20search_path%3D{schema}");
    }
    format!("{conninfo} options='-c search_path={schema}'")
}

/// Run trial `trial` of `plan`.
///
/// # Errors
/// The database could not be prepared or read, or a client process could not start.
pub fn run_trial(
    plan: &LivePlan,
    setup: &TrialSetup<'_>,
    trial: u64,
) -> Result<TrialRecord, LiveError> {
    let scenario = &plan.scenario;
    let conninfo = with_schema(setup.conninfo);
    let mut admin = postgres::Client::connect(setup.conninfo, postgres::NoTls).map_err(db)?;
    prepare(&mut admin, plan, setup.forms)?;
    drop(admin);
    let (servers, peer_links) = match setup.own_servers {
        Some(_) => (Vec::new(), Vec::new()),
        None => start_servers(plan, trial)?,
    };
    let mut proxies = start_proxies(plan, &servers, setup.postgres_port, trial)?;
    proxies.extend(peer_links);

    let (tx, rx) = mpsc::channel();
    let mut processes = Processes::default();
    for (i, client) in scenario.clients.iter().enumerate() {
        let config = ClientConfig {
            client: client.clone(),
            lock_kind: scenario.lock_service.kind.clone(),
            lock_knobs: scenario.lock_service.knobs.clone(),
            resource_mode: scenario.resource.mode.clone(),
            resource_knobs: scenario.resource.knobs.clone(),
            endpoints: match setup.own_servers {
                Some(urls) => own_endpoints(plan, urls, &conninfo, trial, client.timeout_ms),
                None => endpoints(
                    plan,
                    &client.name,
                    &conninfo,
                    &servers,
                    &proxies,
                    client.timeout_ms,
                ),
            },
            process: i as u64,
            process_stride: scenario.clients.len() as u64,
            armed: plan.armed(i),
            // Live runs are not reproducible from a seed anyway: the values (Redlock's lock
            // values, the backoffs) differ from run to run, as a real client's would.
            rng_seed: (Origin::now().wall_us as u64) ^ (trial << 20) ^ i as u64,
        };
        processes.spawn(setup.program, &config, i, tx.clone())?;
    }
    drop(tx);
    let origin = processes.start_together(&rx)?;

    let mut run = Running::new(plan, origin, processes, servers, setup.postgres);
    run.proxies = proxies;
    let cut_short = run.drive(&rx, setup.interrupted);
    let end_ns = origin.since_ns(mono_ns());
    let Running {
        records,
        nemesis,
        failure,
        mut disturbed,
        ..
    } = run;
    disturbed.extend(late_starts(plan, &records));
    if let Some(failure) = failure {
        return Err(failure);
    }
    // A fresh connection: one opened before the trial would have died with a crashed server.
    let mut admin = postgres::Client::connect(&conninfo, postgres::NoTls).map_err(db)?;
    let log = read_log(&mut admin)?;
    // The history has what the tables said; they go.
    let _ = admin.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", schema()));
    let mut history = assemble(
        &scenario.name,
        setup.tool_version,
        &origin,
        records,
        log,
        nemesis,
        end_ns,
    )
    .map_err(LiveError::Server)?;
    history.header.token_order = plan.token_order;
    Ok(TrialRecord {
        history,
        real_ms: end_ns / 1_000_000,
        cut_short,
        disturbed,
    })
}

/// Each client whose first operation came later than [`crate::LATE_MS`] after its `start_ms`
/// (its process was not scheduled in time), in words: its schedule against the faults is not
/// the scenario's. A client that a fault strikes at one of its own safepoints is left out: a
/// pause before its first acquire delays it by design.
fn late_starts(plan: &LivePlan, records: &[ClientRecord]) -> Vec<String> {
    let struck_at_safepoints: Vec<String> = plan
        .faults
        .iter()
        .filter(|f| matches!(f.at, crate::plan::FaultAt::Safepoint(_)))
        .map(|f| plan.name(f.target))
        .collect();
    plan.scenario
        .clients
        .iter()
        .filter(|c| !struck_at_safepoints.contains(&c.name))
        .filter_map(|c| {
            let first = records
                .iter()
                .find(|r| r.client == c.name && r.seq.is_some())?;
            let late_ms = (first.t_ns / 1_000_000).saturating_sub(c.start_ms);
            (late_ms > crate::LATE_MS).then(|| {
                format!(
                    "{}'s first operation came {late_ms} ms late (start_ms = {})",
                    c.name, c.start_ms
                )
            })
        })
        .collect()
}

/// A proxy on every link from a client to a server, if the plan has network faults.
fn start_proxies(
    plan: &LivePlan,
    servers: &[Box<dyn ServerProcess>],
    postgres_port: Option<u16>,
    trial: u64,
) -> Result<Vec<Proxy>, LiveError> {
    if !plan.uses_network() {
        return Ok(Vec::new());
    }
    let postgres_port = postgres_port.ok_or_else(|| {
        LiveError::Server(
            "network faults need the PostgreSQL server fencesim starts, not --postgres".to_owned(),
        )
    })?;
    let mut proxies = Vec::new();
    for (c, client) in plan.scenario.clients.iter().enumerate() {
        for (s, server) in plan.servers().iter().enumerate() {
            let target = match plan.server_nodes().iter().position(|r| r == server) {
                Some(i) => servers[i].port(),
                None => postgres_port,
            };
            let seed = trial << 32 | (c as u64) << 16 | s as u64;
            let proxy = Proxy::start(&client.name, server, target, seed)?;
            // PostgreSQL's client library cannot time a call out: a cut link resets.
            proxy.set(|l| l.reset_when_stopped = servers.iter().all(|r| r.name() != *server));
            proxies.push(proxy);
        }
    }
    Ok(proxies)
}

/// Where client `client`'s sessions connect: straight to the servers, or through its links'
/// proxies.
fn endpoints(
    plan: &LivePlan,
    client: &str,
    conninfo: &str,
    servers: &[Box<dyn ServerProcess>],
    proxies: &[Proxy],
    timeout_ms: u64,
) -> Endpoints {
    let via = |server: &str| {
        proxies
            .iter()
            .find(|p| p.client == client && p.server == server)
            .map(|p| p.port)
    };
    // Each node's URL, through its link's proxy if it has one.
    let urls = |nodes: &[String]| -> Vec<String> {
        nodes
            .iter()
            .zip(servers)
            .map(|(name, node)| node.url_at(via(name).unwrap_or(node.port())))
            .collect()
    };
    let postgres = |server: &str| match via(server) {
        Some(port) => with_schema(&crate::pg_server::conninfo(port)),
        None => conninfo.to_owned(),
    };
    Endpoints {
        // A design on Redis has no lock service node on PostgreSQL; its sessions never use it.
        postgres: postgres(&plan.postgres_service_node().unwrap_or_default()),
        resource: postgres(fencesim_scenario::RESOURCE_NODE),
        redis: urls(plan.redis_nodes()),
        key_prefix: String::new(),
        etcd: urls(plan.etcd_nodes()),
        timeout_ms,
    }
}

/// Where a client's sessions connect on servers of the user's: the URLs as given, and a
/// prefix that keeps a trial's keys and lock names apart from the user's own and from the last
/// trial's (whose keys may still be within their TTL).
fn own_endpoints(
    plan: &LivePlan,
    urls: &[String],
    conninfo: &str,
    trial: u64,
    timeout_ms: u64,
) -> Endpoints {
    let on_etcd = plan.needs.etcd.is_some();
    let glue = if on_etcd { '/' } else { ':' };
    Endpoints {
        postgres: conninfo.to_owned(),
        resource: conninfo.to_owned(),
        redis: if on_etcd { Vec::new() } else { urls.to_vec() },
        key_prefix: format!("{}{trial}{glue}", own_prefix()),
        etcd: if on_etcd { urls.to_vec() } else { Vec::new() },
        timeout_ms,
    }
}

/// `fencesim-live-<pid>-`: what a run's keys and lock names on servers of the user's begin
/// with, before the trial's number.
pub fn own_prefix() -> String {
    format!("fencesim-live-{}-", std::process::id())
}

/// The design's own servers, fresh for the trial: its Redis nodes (those whose clocks a
/// fault steps under a clock library), or its etcd cluster, with the links between its
/// members if a partition cuts between them.
fn start_servers(plan: &LivePlan, trial: u64) -> Result<ServersAndLinks, LiveError> {
    if let Some(needs) = &plan.needs.etcd {
        let cluster =
            crate::etcd_server::start_cluster(&needs.nodes, plan.cuts_between_members(), trial)?;
        let members = cluster
            .members
            .into_iter()
            .map(|m| Box::new(m) as Box<dyn ServerProcess>)
            .collect();
        return Ok((members, cluster.peer_links));
    }
    let Some(needs) = &plan.needs.redis else {
        return Ok((Vec::new(), Vec::new()));
    };
    let nodes = needs
        .nodes
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let persistence: RedisPersistence = needs.persistence;
            RedisNode::start(name, persistence, plan.faked_clocks.contains(&i))
                .map(|node| Box::new(node) as Box<dyn ServerProcess>)
        })
        .collect::<Result<_, _>>()?;
    Ok((nodes, Vec::new()))
}

/// A trial's server processes, and the proxies on the links between them.
type ServersAndLinks = (Vec<Box<dyn ServerProcess>>, Vec<Proxy>);

fn db(e: postgres::Error) -> LiveError {
    LiveError::Server(format!("database: {}", crate::describe(&e)))
}

/// Drop and create the trial's schema, the log, the forms' tables and the resource's keys.
fn prepare(
    admin: &mut postgres::Client,
    plan: &LivePlan,
    forms: &LiveForms,
) -> Result<(), LiveError> {
    let scenario = &plan.scenario;
    admin
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}; SET search_path = {schema};",
            schema = schema()
        ))
        .map_err(db)?;
    let resource = forms
        .resource(&scenario.resource.mode, &scenario.resource.knobs)
        .map_err(LiveError::Server)?;
    admin.batch_execute(LOG_SCHEMA).map_err(db)?;
    if let Some(schema) = plan.needs.postgres_schema {
        admin.batch_execute(schema).map_err(db)?;
    }
    admin.batch_execute(resource.schema()).map_err(db)?;
    let mut keys: Vec<&str> = scenario.resource.keys.iter().map(String::as_str).collect();
    keys.extend(scenario.clients.iter().map(|c| c.key.as_str()));
    keys.sort_unstable();
    keys.dedup();
    for key in keys {
        resource.add_key(admin, key).map_err(db)?;
    }
    Ok(())
}

fn read_log(admin: &mut postgres::Client) -> Result<Vec<LogRow>, LiveError> {
    let rows = admin
        .query(
            "SELECT seq, at_us, node, event, lock, key, holder, token, highest, expires_at_us, op \
             FROM fencesim_log ORDER BY seq",
            &[],
        )
        .map_err(db)?;
    Ok(rows
        .iter()
        .map(|r| LogRow {
            seq: r.get(0),
            at_us: r.get(1),
            node: r.get(2),
            event: r.get(3),
            lock: r.get(4),
            key: r.get(5),
            holder: r.get(6),
            token: r.get(7),
            highest: r.get(8),
            expires_at_us: r.get(9),
            op: r.get(10),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_goes_on_the_search_path_in_both_connection_string_forms() {
        let schema = schema();
        assert_eq!(
            with_schema("host=h dbname=d"),
            format!("host=h dbname=d options='-c search_path={schema}'")
        );
        assert_eq!(
            with_schema("postgresql://u@h:5432/d"),
            format!("postgresql://u@h:5432/d?options=-c%20search_path%3D{schema}")
        );
        assert_eq!(
            with_schema("postgres://u@h/d?sslmode=disable"),
            format!("postgres://u@h/d?sslmode=disable&options=-c%20search_path%3D{schema}")
        );
        for form in [
            with_schema("host=h dbname=d"),
            with_schema("postgresql://u@h/d"),
        ] {
            let config: postgres::Config = form.parse().expect("parses");
            assert_eq!(
                config.get_options(),
                Some(format!("-c search_path={schema}").as_str())
            );
        }
    }
}
