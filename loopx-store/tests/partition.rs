//! Three agent hosts and one PostgreSQL, each in a network namespace of the test's own making,
//! joined by veth links; the links are cut (the interface down, or every packet dropped by
//! black-hole routes at both ends) and healed while the hosts' engines run turns. The hosts reach the server over
//! TLS, checking a certificate the test made. Afterwards the goal's log must show that no todo
//! ever had two live leases, that every settlement ran under the epoch current at its commit,
//! that every turn a host saw acknowledged is there, and that all hosts' decisions converge.
//!
//! It needs root (network namespaces) and `ip`, as the project's CI gives it. The binary
//! re-executes itself as a host inside a namespace with `LOOPX_PARTITION_HOST` set.
//! `LOOPX_PARTITION_SECONDS` changes how long the links are cut and healed (default 24).

use std::collections::{BTreeMap, BTreeSet};
use std::env;
use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr};
use std::process::{Child, Command as Process, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration as StdDuration, Instant};

use async_trait::async_trait;
use loopx_kernel::engine::{Engine, EngineOptions, TurnOutcome};
use loopx_kernel::seams::{
    Clock, Executor, Store, TurnError, TurnReport, TurnRequest, Validation, Validator,
};
use loopx_kernel::{
    Actor, AgentId, Command, Decision, Duration, Event, GoalId, GoalSpec, Limits, NewTodo,
    OperationId, PersonId, Policy, SourceId, Timestamp, TodoId, submit,
};
use loopx_provider::clock::SystemClock;
use loopx_store::PostgresStore;
use loopx_store::test_cluster::Cluster;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};

const HOST: &str = "LOOPX_PARTITION_HOST";
const HOSTS: usize = 3;
const TODOS: usize = 150;
/// Short leases, so that a cut longer than one moves the host's work to another.
const LEASE_TTL: Duration = Duration::from_millis(2_000);
/// How long a turn's work takes.
const TURN_WORK: StdDuration = StdDuration::from_millis(400);
/// How long the hosts get to finish once every link is healed.
const FINISH: StdDuration = StdDuration::from_secs(90);
/// How long the hosts get, once the work is done, to each step again and see it done.
const CONVERGE: StdDuration = StdDuration::from_secs(30);

fn main() -> ExitCode {
    if env::var(HOST).is_ok() {
        return host(&env::args().skip(1).collect::<Vec<_>>());
    }
    let args: Vec<String> = env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        println!("partitioned_hosts_keep_every_lease_single_and_every_ack: test");
        return ExitCode::SUCCESS;
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    if !filters.is_empty()
        && !filters
            .iter()
            .any(|f| "partitioned_hosts".contains(f.as_str()))
    {
        println!("\nrunning 0 tests\n\ntest result: ok. 0 passed; 0 failed");
        return ExitCode::SUCCESS;
    }
    println!("\nrunning 1 test");
    partitioned_hosts();
    println!(
        "test partitioned_hosts_keep_every_lease_single_and_every_ack ... ok\n\ntest result: ok. 1 passed; 0 failed"
    );
    ExitCode::SUCCESS
}

// ----- the network ----------------------------------------------------------------------------

/// Runs `ip`/`tc` with `args`; panics with its output when it fails.
fn sh(program: &str, args: &[&str]) {
    let output = Process::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        output.status.success(),
        "{program} {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The namespaces and links of one run, removed when dropped (removing a namespace removes the
/// links in it).
struct Net {
    tag: String,
    subnet: u8,
}

impl Net {
    /// `db`, `h1` … `h3`, and a veth from `db` to each host and one to the caller's namespace
    /// (`d0`), so that the test can administer the server. Link `i` is 10.S.i.0/24, the server's
    /// end `.1`, the other `.2`.
    fn build() -> Net {
        let id = std::process::id();
        let net = Net {
            tag: format!("lxp{}", id % 100_000),
            subnet: u8::try_from(100 + id % 100).expect("below 256"),
        };
        sh("ip", &["netns", "add", &net.ns("db")]);
        sh("ip", &["-n", &net.ns("db"), "link", "set", "lo", "up"]);
        for i in 0..=HOSTS {
            let (server_end, host_end) = (net.link(i), format!("{}h{i}", net.tag));
            sh(
                "ip",
                &[
                    "link",
                    "add",
                    &host_end,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &server_end,
                ],
            );
            sh("ip", &["link", "set", &server_end, "netns", &net.ns("db")]);
            let db = net.ns("db");
            sh(
                "ip",
                &[
                    "-n",
                    &db,
                    "addr",
                    "add",
                    &format!("{}/24", net.server(i)),
                    "dev",
                    &server_end,
                ],
            );
            sh("ip", &["-n", &db, "link", "set", &server_end, "up"]);
            let mut at_host: Vec<String> = Vec::new();
            if i > 0 {
                let ns = net.ns(&format!("h{i}"));
                sh("ip", &["netns", "add", &ns]);
                sh("ip", &["link", "set", &host_end, "netns", &ns]);
                sh("ip", &["-n", &ns, "link", "set", "lo", "up"]);
                at_host = vec!["-n".into(), ns];
            }
            let run = |rest: &[&str]| {
                let mut args: Vec<&str> = at_host.iter().map(String::as_str).collect();
                args.extend_from_slice(rest);
                sh("ip", &args);
            };
            run(&[
                "addr",
                "add",
                &format!("10.{}.{i}.2/24", net.subnet),
                "dev",
                &host_end,
            ]);
            run(&["link", "set", &host_end, "up"]);
        }
        net
    }

    fn ns(&self, name: &str) -> String {
        format!("{}{name}", self.tag)
    }

    /// The server's end of link `i`.
    fn link(&self, i: usize) -> String {
        format!("{}d{i}", self.tag)
    }

    /// The server's address on link `i`.
    fn server(&self, i: usize) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(
            10,
            self.subnet,
            u8::try_from(i).expect("few links"),
            1,
        ))
    }

    fn cut(&self, i: usize, how: Cut) {
        match how {
            Cut::Down => self.link_state(i, "down"),
            Cut::Drop => self.blackhole(i, "add"),
        }
    }

    fn heal(&self, i: usize, how: Cut) {
        match how {
            Cut::Down => self.link_state(i, "up"),
            Cut::Drop => self.blackhole(i, "del"),
        }
    }

    fn link_state(&self, i: usize, state: &str) {
        sh(
            "ip",
            &["-n", &self.ns("db"), "link", "set", &self.link(i), state],
        );
    }

    /// Routes each end's packets to the other into a black hole (both directions, silently:
    /// connections hang rather than fail), or back (`del`).
    fn blackhole(&self, i: usize, verb: &str) {
        let host = format!("10.{}.{i}.2/32", self.subnet);
        sh(
            "ip",
            &["-n", &self.ns("db"), "route", verb, "blackhole", &host],
        );
        let server = format!("{}/32", self.server(i));
        let ns = self.ns(&format!("h{i}"));
        sh("ip", &["-n", &ns, "route", verb, "blackhole", &server]);
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for name in ["db", "h1", "h2", "h3"] {
            let _ = Process::new("ip")
                .args(["netns", "del", &self.ns(name)])
                .output();
        }
        let _ = Process::new("ip")
            .args(["link", "del", &format!("{}h0", self.tag)])
            .output();
    }
}

#[derive(Debug, Clone, Copy)]
enum Cut {
    /// The link goes down: connections fail at once.
    Down,
    /// Every packet is dropped (black-hole routes at both ends): connections hang until the link
    /// heals.
    Drop,
}

/// A root and the server's certificate, issued for every address of the server.
fn certificates(net: &Net) -> (String, String, String) {
    let root_key = KeyPair::generate().expect("a key");
    let mut root = CertificateParams::new(Vec::<String>::new()).expect("root params");
    root.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let root_cert = root.self_signed(&root_key).expect("the root");
    let issuer = Issuer::new(root, root_key);
    let key = KeyPair::generate().expect("a key");
    let mut server = CertificateParams::new(Vec::<String>::new()).expect("server params");
    server.subject_alt_names = (0..=HOSTS)
        .map(|i| SanType::IpAddress(net.server(i)))
        .collect();
    let cert = server
        .signed_by(&key, &issuer)
        .expect("the server certificate");
    (root_cert.pem(), cert.pem(), key.serialize_pem())
}

// ----- the driver -----------------------------------------------------------------------------

fn is_root() -> bool {
    Process::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

fn agent(i: usize) -> AgentId {
    AgentId::new(format!("host{i}")).expect("an id")
}

fn spec(goal: &GoalId) -> GoalSpec {
    GoalSpec {
        id: goal.clone(),
        objective: "finish the work whatever the network does".into(),
        owner: PersonId::new("olivia").expect("an id"),
        criteria: vec![],
        agents: (1..=HOSTS).map(agent).collect(),
        budget: Limits::UNLIMITED,
        policy: Policy {
            lease_ttl: LEASE_TTL,
            ..Policy::default()
        },
        grants: BTreeMap::default(),
        identity: loopx_kernel::Identity::Declared,
        keys: Vec::new(),
        validators: BTreeMap::new(),
        capability: None,
    }
}

/// The host processes, stopped when dropped (a failed assertion must not leave them running).
struct Hosts(Vec<Child>);

impl Hosts {
    fn stop(&mut self) {
        for host in &mut self.0 {
            let _ = host.kill();
            let _ = host.wait();
        }
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What the hosts printed, line by line, with the host's number.
type Lines = Arc<Mutex<Vec<(usize, String)>>>;

fn spawn_host(net: &Net, i: usize, url: &str, goal: &GoalId, lines: &Lines) -> Child {
    let exe = env::current_exe().expect("the test binary");
    let mut child = Process::new("ip")
        .args(["netns", "exec", &net.ns(&format!("h{i}"))])
        .arg(exe)
        .args([&i.to_string(), url, goal.as_str()])
        .env(HOST, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("a host process");
    let stdout = child.stdout.take().expect("piped");
    let lines = lines.clone();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            lines.lock().expect("lines").push((i, line));
        }
    });
    child
}

fn partitioned_hosts() {
    assert!(
        is_root(),
        "the partition test makes network namespaces and veth links, which needs root (the project's CI runs it as root)"
    );
    let seconds: u64 = env::var("LOOPX_PARTITION_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24);
    let net = Net::build();
    let (root_pem, cert_pem, key_pem) = certificates(&net);
    let dir = tempfile::tempdir().expect("a directory");
    let root = dir.path().join("root.pem");
    std::fs::write(&root, &root_pem).expect("the root file");
    let mut builder = Cluster::builder()
        .in_netns(&net.ns("db"))
        .tls(&cert_pem, &key_pem);
    for i in 0..=HOSTS {
        builder = builder.listen_on(net.server(i));
    }
    let cluster = builder
        .allow_clients(&format!("10.{}.0.0/16", net.subnet))
        .start()
        .expect("the server in its namespace");
    let database = "fleet";
    cluster.create_database(database).expect("a database");
    let url = |i: usize| {
        format!(
            "postgres://loopx@{}:{}/{database}?sslmode=verify-full&sslrootcert={}",
            net.server(i),
            cluster.local().port(),
            root.display()
        )
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let goal = GoalId::new("partitioned").expect("an id");
    let admin = runtime
        .block_on(PostgresStore::connect(&url(0)))
        .expect("the test's own link, over TLS");
    runtime.block_on(seed(&admin, &goal));

    let lines: Lines = Arc::new(Mutex::new(Vec::new()));
    let mut hosts = Hosts(
        (1..=HOSTS)
            .map(|i| spawn_host(&net, i, &url(i), &goal, &lines))
            .collect(),
    );

    // Cut one link at a time, for longer than a lease lives, then heal it.
    let started = Instant::now();
    let mut cuts = 0;
    while started.elapsed() < StdDuration::from_secs(seconds) {
        let i = cuts % HOSTS + 1;
        let how = if cuts % 2 == 0 { Cut::Down } else { Cut::Drop };
        thread::sleep(StdDuration::from_millis(1_200));
        net.cut(i, how);
        cuts += 1;
        thread::sleep(StdDuration::from_millis(3_500));
        net.heal(i, how);
    }

    // Every link up: the hosts must finish the work.
    let healed = Instant::now();
    let finished = loop {
        let state = runtime
            .block_on(admin.load(&goal))
            .expect("a load")
            .expect("the goal");
        let open = state
            .todos
            .values()
            .filter(|t| !t.status.is_closed())
            .count();
        if open == 0 {
            break true;
        }
        if healed.elapsed() > FINISH {
            break false;
        }
        thread::sleep(StdDuration::from_millis(300));
    };
    await_convergence(&lines);
    hosts.stop();
    assert!(
        finished,
        "the hosts did not finish the work within {FINISH:?} of the heal"
    );

    let events = runtime.block_on(all_events(&admin, &goal));
    let printed = lines.lock().expect("lines").clone();
    let figures = verify(&events, &printed);
    println!(
        "partition: {cuts} cuts in {seconds} s, {} turns settled, {} leases taken over after expiry, {} commands refused (stale epoch or lost race), {} store errors ridden out, {} acknowledged settlements all in the log",
        figures.settled, figures.takeovers, figures.refused, figures.errors, figures.acknowledged
    );
    assert!(
        figures.takeovers > 0,
        "no cut outlived a lease: the test proved nothing about epochs"
    );
}

/// Waits until every host has said where the work stands after it was done, or for at most
/// [`CONVERGE`]: each host steps again within its wait (at most a second when nothing wakes
/// it), however slowly a loaded machine lets it.
fn await_convergence(lines: &Lines) {
    let started = Instant::now();
    while started.elapsed() < CONVERGE {
        let printed = lines.lock().expect("lines").clone();
        let last = last_decisions(&printed);
        if last.len() == HOSTS && last.values().all(|d| *d == "terminal") {
            return;
        }
        thread::sleep(StdDuration::from_millis(200));
    }
}

/// Each host's last printed decision.
fn last_decisions(printed: &[(usize, String)]) -> BTreeMap<usize, &str> {
    printed
        .iter()
        .filter_map(|(host, line)| line.strip_prefix("decision ").map(|d| (*host, d)))
        .collect()
}

async fn seed(store: &PostgresStore, goal: &GoalId) {
    let owner = Actor::Person(PersonId::new("olivia").expect("an id"));
    let now = SystemClock.now();
    let op = |name: String| OperationId::new(name).expect("an id");
    let create = Command::CreateGoal { spec: spec(goal) };
    submit(store, goal, &owner, now, &create, &op("create".into()))
        .await
        .expect("the goal");
    for t in 0..TODOS {
        let mut todo = NewTodo::advance(
            TodoId::new(format!("t{t:02}")).expect("an id"),
            "a step of the work",
        );
        todo.idempotent = true;
        submit(
            store,
            goal,
            &owner,
            now,
            &Command::AddTodo { todo },
            &op(format!("add-{t}")),
        )
        .await
        .expect("a todo");
    }
}

async fn all_events(store: &PostgresStore, goal: &GoalId) -> Vec<loopx_kernel::RecordedEvent> {
    let mut events = Vec::new();
    loop {
        let after = events
            .last()
            .map_or(0, |e: &loopx_kernel::RecordedEvent| e.revision);
        let page = store.events(goal, after, 1_000).await.expect("events");
        if page.is_empty() {
            return events;
        }
        events.extend(page);
    }
}

#[derive(Debug, Default)]
struct Figures {
    settled: usize,
    takeovers: usize,
    refused: usize,
    errors: usize,
    acknowledged: usize,
}

/// The lease a todo is under, as the log tells it.
#[derive(Debug, Clone)]
struct Held {
    holder: AgentId,
    epoch: u64,
    expires_at: Timestamp,
}

/// Checks the log and what the hosts printed; panics naming the first violation.
fn verify(events: &[loopx_kernel::RecordedEvent], printed: &[(usize, String)]) -> Figures {
    let mut figures = Figures::default();
    let mut held: BTreeMap<TodoId, Held> = BTreeMap::new();
    let mut settled: BTreeSet<String> = BTreeSet::new();
    for recorded in events {
        let at = recorded.at;
        match &recorded.event {
            Event::LeaseAcquired {
                todo,
                holder,
                epoch,
                expires_at,
                ..
            } => {
                if let Some(before) = held.get(todo) {
                    assert!(
                        before.expires_at <= at,
                        "two live leases on {todo}: {} (epoch {}, until {}) and {holder} from {at}",
                        before.holder,
                        before.epoch,
                        before.expires_at
                    );
                    // A lease that was neither released nor settled expired: taken over.
                    figures.takeovers += 1;
                    assert!(
                        *epoch > before.epoch,
                        "{todo}: epoch {epoch} after {}",
                        before.epoch
                    );
                }
                held.insert(
                    todo.clone(),
                    Held {
                        holder: holder.clone(),
                        epoch: *epoch,
                        expires_at: *expires_at,
                    },
                );
            }
            Event::LeaseRenewed {
                todo,
                epoch,
                expires_at,
            }
            | Event::TurnTakenOver {
                todo,
                epoch,
                expires_at,
                ..
            } => {
                let lease = held
                    .get_mut(todo)
                    .unwrap_or_else(|| panic!("{todo} renewed unleased"));
                assert!(
                    *epoch >= lease.epoch,
                    "{todo}: renewal under stale epoch {epoch}"
                );
                lease.epoch = *epoch;
                lease.expires_at = *expires_at;
            }
            Event::LeaseReleased { todo, epoch } => {
                let lease = held
                    .remove(todo)
                    .unwrap_or_else(|| panic!("{todo} released unleased"));
                assert_eq!(*epoch, lease.epoch, "{todo}: released under a stale epoch");
            }
            Event::TurnSettled {
                todo, epoch, turn, ..
            } => {
                let lease = held
                    .remove(todo)
                    .unwrap_or_else(|| panic!("{todo} settled unleased"));
                assert_eq!(
                    *epoch, lease.epoch,
                    "{todo}: turn {turn} settled under stale epoch {epoch}, current {}",
                    lease.epoch
                );
                figures.settled += 1;
                settled.insert(turn.to_string());
            }
            _ => {}
        }
    }
    verify_printed(printed, &settled, &mut figures);
    figures
}

/// What the hosts printed: every settlement they saw acknowledged is in the log, and their last
/// decisions agree.
fn verify_printed(printed: &[(usize, String)], settled: &BTreeSet<String>, figures: &mut Figures) {
    for (host, line) in printed {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["settled", turn, ..] => {
                figures.acknowledged += 1;
                assert!(
                    settled.contains(*turn),
                    "host {host} saw turn {turn} settle, the log has no such settlement"
                );
            }
            ["refused", ..] => figures.refused += 1,
            ["error", ..] => figures.errors += 1,
            _ => {}
        }
    }
    let last = last_decisions(printed);
    let decisions: BTreeSet<&str> = last.values().copied().collect();
    assert_eq!(
        last.len(),
        HOSTS,
        "every host reports its last decision: {last:?}"
    );
    assert_eq!(
        decisions.len(),
        1,
        "the hosts' last decisions differ: {last:?}"
    );
}

// ----- a host ---------------------------------------------------------------------------------

/// Prints a line for the driver; a host whose driver is gone has no one to work for, and exits.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if writeln!(std::io::stdout(), $($arg)*).is_err() {
            std::process::exit(0);
        }
    }};
}

/// Work that takes a little while and always completes its todo.
struct Work;

#[async_trait]
impl Executor for Work {
    async fn run(&self, _turn: &TurnRequest) -> Result<TurnReport, TurnError> {
        tokio::time::sleep(TURN_WORK).await;
        Ok(TurnReport::complete("a step done"))
    }
}

/// A validator that passes every turn.
struct Checks;

#[async_trait]
impl Validator for Checks {
    fn actor(&self) -> Actor {
        Actor::Validator(SourceId::new("ci").expect("an id"))
    }

    async fn validate(&self, _: &TurnRequest, _: &TurnReport) -> Result<Validation, TurnError> {
        Ok(Validation::passed("checked"))
    }
}

/// A host: its engine steps the goal until the work is done, backing off when the store is out
/// of reach, and prints what it saw acknowledged (`settled TURN TODO`), refused, and its last
/// decision (`decision NAME`).
fn host(args: &[String]) -> ExitCode {
    let [number, url, goal] = args else {
        say!("a host takes NUMBER URL GOAL");
        return ExitCode::from(2);
    };
    let (Ok(number), Ok(goal)) = (number.parse::<usize>(), GoalId::new(goal.as_str())) else {
        say!("a host takes NUMBER URL GOAL");
        return ExitCode::from(2);
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let store: Arc<dyn Store> = loop {
            match PostgresStore::connect(url).await {
                Ok(store) => break Arc::new(store),
                Err(error) => {
                    say!("error {error}");
                    tokio::time::sleep(StdDuration::from_millis(300)).await;
                }
            }
        };
        let options = EngineOptions {
            lease_ttl: Some(LEASE_TTL),
            renew_every: Duration::from_millis(400),
            max_wait: Duration::from_millis(1_000),
            ..EngineOptions::default()
        };
        let engine = Engine::builder(
            agent(number),
            store,
            Arc::new(SystemClock),
            Arc::new(Work),
            Arc::new(Checks),
        )
        .options(options)
        .build();
        let mut pause = StdDuration::from_millis(100);
        loop {
            match engine.step(&goal).await {
                Ok(report) => {
                    pause = StdDuration::from_millis(100);
                    match &report.turn {
                        Some(TurnOutcome::Settled {
                            todo,
                            turn,
                            resumed,
                            ..
                        }) => {
                            say!(
                                "settled {turn} {todo}{}",
                                if *resumed { " resumed" } else { "" }
                            );
                        }
                        Some(
                            TurnOutcome::LeaseLost { todo, refusal, .. }
                            | TurnOutcome::NotStarted { todo, refusal },
                        ) => {
                            say!("refused {} {todo}", refusal.code());
                        }
                        _ => {}
                    }
                    say!("decision {}", decision_name(&report.decision));
                    if matches!(report.decision, Decision::Terminal { .. }) {
                        // Stay up, answering the same, until the driver stops the host.
                        tokio::time::sleep(StdDuration::from_millis(500)).await;
                        continue;
                    }
                    if let Err(error) = engine.wait(&report).await {
                        say!("error {error}");
                    }
                }
                Err(error) => {
                    say!("error {error}");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(StdDuration::from_secs(2));
                }
            }
        }
    })
}

fn decision_name(decision: &Decision) -> &'static str {
    match decision {
        Decision::Continue(_) => "continue",
        Decision::Wait { .. } => "wait",
        Decision::Ask { .. } => "ask",
        Decision::Replan { .. } => "replan",
        Decision::Repair { .. } => "repair",
        Decision::Terminal { .. } => "terminal",
    }
}
