//! A real PostgreSQL for tests and benchmarks (feature `test-cluster`): a throwaway cluster
//! started with the `initdb` and `pg_ctl` found in `LOOPX_PG_BIN` or on `PATH`, in a temporary
//! directory, listening on a free port of 127.0.0.1 only, and removed when the process that
//! started it exits (a watchdog process stops it and deletes the directory even if the process
//! is killed).
//!
//! [`Cluster::start`] runs the server with `fsync` off (for tests that crash processes, not the
//! machine); [`Cluster::start_durable`] keeps PostgreSQL's durable defaults (`fsync`,
//! `synchronous_commit` and full-page writes on), for figures that include the cost of a
//! durable commit. [`Cluster::builder`] adds TLS with a certificate the caller made (the server
//! then accepts TCP clients over TLS only), further listen addresses and client networks (for
//! hosts in other network namespaces).
//!
//! PostgreSQL refuses to run as root: when the process runs as root, the cluster runs as the
//! `postgres` OS user (`runuser -u postgres`), with its directory owned by that user.
//!
//! For test binaries, [`cluster`] gives one shared server per binary — the server of
//! `LOOPX_TEST_POSTGRES_URL` (`postgres://user:password@host:port/database`, a role allowed to
//! create databases) when set, a throwaway cluster otherwise — and [`Cluster::database`] a new
//! empty database for each test. When neither is available they panic with a message saying
//! what to install; tests using them never skip.
//!
//! ```no_run
//! use loopx_store::test_cluster::Cluster;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let cluster = Cluster::start_durable()?;
//! let url = cluster.create_database("figures")?;
//! # let _ = url;
//! # Ok(())
//! # }
//! ```

use std::env;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Why a cluster could not be started or used: no PostgreSQL binaries, a failed `initdb` or
/// `pg_ctl`, an unreachable server or a refused statement. The message says what happened
/// and, when the binaries are missing, what to install.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterError {
    message: String,
}

impl ClusterError {
    fn new(message: impl Into<String>) -> ClusterError {
        ClusterError {
            message: message.into(),
        }
    }
}

impl fmt::Display for ClusterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ClusterError {}

/// A PostgreSQL server: a throwaway cluster started here, or an existing server given by URL.
#[derive(Debug)]
pub struct Cluster {
    /// A URL of the server without a database name at the end (ends with `/`).
    base: String,
    /// The query string of the URL, if any (kept on every database URL).
    query: String,
    local: Option<Local>,
}

/// A throwaway cluster started by [`Cluster::start`] or [`Cluster::start_durable`].
#[derive(Debug)]
pub struct Local {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    /// Run the binaries as this OS user (when the process runs as root).
    user: Option<String>,
    /// `fsync` and full-page writes on.
    durable: bool,
    /// The addresses the server listens on.
    listen: Vec<IpAddr>,
    /// TLS on, and required of every client over TCP.
    tls: bool,
    /// Networks clients may connect from, besides loopback.
    clients: Vec<String>,
    /// The network namespace the server runs in, if not the caller's.
    netns: Option<String>,
}

/// The settings of a throwaway cluster, from [`Cluster::builder`]: `fsync` off, listening on
/// 127.0.0.1 only, no TLS, unless told otherwise.
#[derive(Debug, Clone, Default)]
pub struct ClusterBuilder {
    durable: bool,
    tls: Option<(String, String)>,
    listen: Vec<IpAddr>,
    clients: Vec<String>,
    netns: Option<String>,
}

impl ClusterBuilder {
    /// PostgreSQL's durable defaults (`fsync`, `synchronous_commit` and full-page writes on).
    #[must_use]
    pub fn durable(mut self) -> ClusterBuilder {
        self.durable = true;
        self
    }

    /// TLS with this certificate chain and private key (PEM): the server then accepts TCP
    /// connections over TLS only.
    #[must_use]
    pub fn tls(mut self, certificate_pem: &str, key_pem: &str) -> ClusterBuilder {
        self.tls = Some((certificate_pem.to_owned(), key_pem.to_owned()));
        self
    }

    /// Listens on `address` too (127.0.0.1 always), e.g. an address of a network namespace's
    /// interface.
    #[must_use]
    pub fn listen_on(mut self, address: IpAddr) -> ClusterBuilder {
        self.listen.push(address);
        self
    }

    /// Lets clients connect from `network` (CIDR, e.g. `10.10.0.0/16`), besides loopback.
    #[must_use]
    pub fn allow_clients(mut self, network: &str) -> ClusterBuilder {
        self.clients.push(network.to_owned());
        self
    }

    /// Runs the server in the network namespace `name` (made with `ip netns add`; needs
    /// root): its URLs then name the first address given to [`ClusterBuilder::listen_on`],
    /// which must be reachable from the caller's namespace.
    #[must_use]
    pub fn in_netns(mut self, name: &str) -> ClusterBuilder {
        self.netns = Some(name.to_owned());
        self
    }

    /// Starts the cluster.
    ///
    /// # Errors
    /// As [`Cluster::start`], and when the certificate files cannot be written.
    pub fn start(self) -> Result<Cluster, ClusterError> {
        Cluster::start_local(self)
    }
}

static SHARED: OnceLock<Cluster> = OnceLock::new();
static DATABASES: AtomicU32 = AtomicU32::new(0);

/// The process's one shared server, for tests: the server of `LOOPX_TEST_POSTGRES_URL`, or a
/// throwaway cluster (with `fsync` off).
///
/// # Panics
/// With an explanation when neither is available.
pub fn cluster() -> &'static Cluster {
    SHARED.get_or_init(|| match env::var("LOOPX_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => Cluster::external(&url),
        _ => Cluster::start().unwrap_or_else(|error| panic!("{error}")),
    })
}

/// A throwaway cluster even when `LOOPX_TEST_POSTGRES_URL` is set: for the tests that stop and
/// restart the server.
///
/// # Panics
/// With an explanation when the binaries are not available.
pub fn local_cluster() -> &'static Cluster {
    static LOCAL: OnceLock<Cluster> = OnceLock::new();
    if cluster().local.is_some() {
        return cluster();
    }
    LOCAL.get_or_init(|| Cluster::start().unwrap_or_else(|error| panic!("{error}")))
}

fn run(command: &mut Command, what: &str) -> Result<(), ClusterError> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|error| ClusterError::new(format!("cannot run {what}: {error}")))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(ClusterError::new(format!(
            "{what} failed ({}): {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )))
    }
}

fn find_bin() -> Result<PathBuf, ClusterError> {
    if let Ok(dir) = env::var("LOOPX_PG_BIN") {
        let dir = PathBuf::from(dir);
        if dir.join("initdb").is_file() && dir.join("pg_ctl").is_file() {
            return Ok(dir);
        }
        return Err(ClusterError::new(format!(
            "LOOPX_PG_BIN is `{}` but holds no initdb and pg_ctl",
            dir.display()
        )));
    }
    env::split_paths(&env::var_os("PATH").unwrap_or_default())
        .find(|dir| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file())
        .ok_or_else(|| {
            ClusterError::new(
                "no PostgreSQL server binaries found: put PostgreSQL's initdb and pg_ctl on PATH \
                 (e.g. install the `postgresql` package, then add its bin directory), or set \
                 LOOPX_PG_BIN to their directory (tests may instead set \
                 LOOPX_TEST_POSTGRES_URL to a server where the user may create databases)",
            )
        })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

fn free_port() -> Result<u16, ClusterError> {
    let unavailable =
        |error: std::io::Error| ClusterError::new(format!("no free loopback port: {error}"));
    let listener = TcpListener::bind("127.0.0.1:0").map_err(unavailable)?;
    listener.local_addr().map(|a| a.port()).map_err(unavailable)
}

fn nanos() -> u32 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos())
}

impl Cluster {
    /// An existing server at `url` (`postgres://user:password@host:port/database`); the
    /// database name of the URL is replaced by each database asked for.
    pub fn external(url: &str) -> Cluster {
        let (url, query) = match url.split_once('?') {
            Some((url, query)) => (url, format!("?{query}")),
            None => (url, String::new()),
        };
        let scheme_end = url.find("://").map_or(0, |i| i + 3);
        let base = match url[scheme_end..].find('/') {
            Some(slash) => url[..=(scheme_end + slash)].to_owned(),
            None => format!("{url}/"),
        };
        Cluster {
            base,
            query,
            local: None,
        }
    }

    /// Starts a throwaway cluster with `fsync` and full-page writes off: fast, and safe against
    /// killed processes (the operating system keeps what a killed server wrote), not against a
    /// machine crash.
    ///
    /// # Errors
    /// When no `initdb` and `pg_ctl` are found, or `initdb`, `pg_ctl start` or the watchdog
    /// fails; the message says which, and what to install when the binaries are missing.
    pub fn start() -> Result<Cluster, ClusterError> {
        Cluster::builder().start()
    }

    /// The settings of a throwaway cluster to start, for tests that need TLS, a durable server
    /// or other addresses than loopback.
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::default()
    }

    /// Starts a throwaway cluster with PostgreSQL's durable defaults (`fsync`,
    /// `synchronous_commit` and full-page writes on), so each commit waits for its WAL to
    /// reach the disk.
    ///
    /// # Errors
    /// As [`Cluster::start`].
    pub fn start_durable() -> Result<Cluster, ClusterError> {
        Cluster::builder().durable().start()
    }

    fn start_local(settings: ClusterBuilder) -> Result<Cluster, ClusterError> {
        let bin = find_bin()?;
        let user = is_root().then(|| "postgres".to_owned());
        let dir = env::temp_dir().join(format!("loopx-pg-{}-{}", std::process::id(), nanos()));
        std::fs::create_dir_all(&dir).map_err(|error| {
            ClusterError::new(format!("cannot create {}: {error}", dir.display()))
        })?;
        if let Some(user) = &user {
            run(
                Command::new("chown").arg(user).arg(&dir),
                "chown of the cluster directory to the postgres user",
            )
            .map_err(|error| {
                ClusterError::new(format!(
                    "{error}; running as root, the cluster runs as the `postgres` OS user, \
                     which must exist"
                ))
            })?;
        }
        let mut listen = vec![IpAddr::V4(Ipv4Addr::LOCALHOST)];
        listen.extend(settings.listen);
        // Seen from outside a namespace of its own, the server is at its first other address.
        let host = match (&settings.netns, listen.get(1)) {
            (Some(_), Some(address)) => address.to_string(),
            _ => "127.0.0.1".to_owned(),
        };
        let local = Local {
            bin,
            dir,
            port: free_port()?,
            user,
            durable: settings.durable,
            listen,
            tls: settings.tls.is_some(),
            clients: settings.clients,
            netns: settings.netns,
        };
        local.watchdog()?;
        local.initdb()?;
        if let Some((certificate, key)) = &settings.tls {
            local.write_private("server.crt", certificate)?;
            local.write_private("server.key", key)?;
        }
        local.write_hba()?;
        local.start()?;
        Ok(Cluster {
            base: format!("postgres://loopx@{host}:{}/", local.port),
            query: String::new(),
            local: Some(local),
        })
    }

    /// The URL of database `name` on this server.
    pub fn url(&self, name: &str) -> String {
        format!("{}{name}{}", self.base, self.query)
    }

    /// A new, empty database with a unique name; its URL.
    ///
    /// # Panics
    /// When the server refuses to create it.
    pub fn database(&self) -> String {
        let n = DATABASES.fetch_add(1, Ordering::Relaxed);
        let name = format!("loopx_t{}_{n}_{}", std::process::id(), nanos());
        self.create_database(&name)
            .unwrap_or_else(|error| panic!("{error}"))
    }

    /// Creates the empty database `name` (ASCII letters, digits and `_`, starting with a
    /// letter); its URL.
    ///
    /// # Errors
    /// When `name` is not such an identifier, or the server cannot be reached or refuses.
    pub fn create_database(&self, name: &str) -> Result<String, ClusterError> {
        let identifier = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !identifier {
            return Err(ClusterError::new(format!(
                "`{name}` is not a plain database name"
            )));
        }
        // Identifiers cannot be parameters; this one was checked above.
        self.admin(&format!("CREATE DATABASE {name}"))?;
        Ok(self.url(name))
    }

    /// Runs `sql` on the server's `postgres` database, on a thread of its own (callable from
    /// inside and outside a tokio runtime).
    ///
    /// # Errors
    /// When the server cannot be reached or the statement fails.
    pub fn admin(&self, sql: &str) -> Result<(), ClusterError> {
        Cluster::execute(&self.url("postgres"), sql)
    }

    /// Runs `sql` (one or more statements) on the database at `url`, on a thread of its own:
    /// for tests that change rows behind the store's back.
    ///
    /// # Errors
    /// When the server cannot be reached or the statements fail.
    pub fn execute(url: &str, sql: &str) -> Result<(), ClusterError> {
        let url = url.to_owned();
        let statement = sql.to_owned();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async {
                let client = crate::postgres::connect_client(&url)
                    .await
                    .map_err(|e| format!("cannot reach the server: {e}"))?;
                client
                    .batch_execute(&statement)
                    .await
                    .map_err(|e| e.to_string())
            })
        })
        .join()
        .unwrap_or_else(|_| Err("the admin thread panicked".into()))
        .map_err(|error| ClusterError::new(format!("`{sql}` on the server failed: {error}")))
    }

    /// The throwaway cluster, if this server is one.
    pub fn try_local(&self) -> Option<&Local> {
        self.local.as_ref()
    }

    /// The throwaway cluster, for tests that stop and restart it.
    ///
    /// # Panics
    /// When this server is an existing one given by URL.
    pub fn local(&self) -> &Local {
        self.local
            .as_ref()
            .unwrap_or_else(|| panic!("this test needs a cluster of its own"))
    }
}

impl Local {
    fn command(&self, binary: &str) -> Command {
        let mut words: Vec<std::ffi::OsString> = Vec::new();
        if let Some(netns) = &self.netns {
            words.extend(["ip", "netns", "exec", netns.as_str()].map(Into::into));
        }
        if let Some(user) = &self.user {
            words.extend(["runuser", "-u", user.as_str(), "--"].map(Into::into));
        }
        words.push(self.bin.join(binary).into());
        let mut command = Command::new(&words[0]);
        command.args(&words[1..]);
        command
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// The loopback port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether the server runs with `fsync` and full-page writes on.
    pub fn durable(&self) -> bool {
        self.durable
    }

    /// Writes `name` into the data directory, readable by the server's user alone (the server
    /// refuses a key others can read).
    fn write_private(&self, name: &str, contents: &str) -> Result<(), ClusterError> {
        use std::os::unix::fs::PermissionsExt;
        let path = self.data().join(name);
        let failed = |error: std::io::Error| {
            ClusterError::new(format!("cannot write {}: {error}", path.display()))
        };
        std::fs::write(&path, contents).map_err(failed)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).map_err(failed)?;
        if let Some(user) = &self.user {
            run(
                Command::new("chown").arg(user).arg(&path),
                "chown of a TLS file",
            )?;
        }
        Ok(())
    }

    /// Who may connect: everyone on loopback and the allowed networks, without a password; over
    /// TLS only when TLS is on.
    fn write_hba(&self) -> Result<(), ClusterError> {
        let kind = if self.tls { "hostssl" } else { "host" };
        let mut hba = String::from("local all all trust\n");
        let loopback = ["127.0.0.1/32", "::1/128"].map(str::to_owned);
        for network in loopback.iter().chain(&self.clients) {
            hba.push_str(kind);
            hba.push_str(" all all ");
            hba.push_str(network);
            hba.push_str(" trust\n");
        }
        self.write_private("pg_hba.conf", &hba)
    }

    fn initdb(&self) -> Result<(), ClusterError> {
        let mut command = self.command("initdb");
        command.arg("-D").arg(self.data()).args([
            "-U",
            "loopx",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-locale",
        ]);
        if !self.durable {
            command.arg("--no-sync");
        }
        run(&mut command, "initdb")
    }

    /// Starts the server (again, after [`Local::stop_immediate`]) and waits until it accepts
    /// connections.
    ///
    /// # Errors
    /// When `pg_ctl start` cannot run or fails; the message holds the server log.
    pub fn start(&self) -> Result<(), ClusterError> {
        let addresses: Vec<String> = self.listen.iter().map(ToString::to_string).collect();
        let mut options = format!(
            "-c listen_addresses={} -p {} -c unix_socket_directories='' \
             -c max_connections=300 -c shared_buffers=32MB",
            addresses.join(","),
            self.port
        );
        if self.tls {
            let files = format!(
                " -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
                quote(&self.data().join("server.crt")),
                quote(&self.data().join("server.key")),
            );
            options.push_str(&files);
        }
        if !self.durable {
            // Crashed processes, not a crashed machine: the operating system keeps what a
            // killed server wrote.
            options.push_str(" -c fsync=off -c full_page_writes=off");
        }
        let status = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .arg("-l")
            .arg(self.dir.join("server.log"))
            .args(["-w", "-t", "60", "-o", &options, "start"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|error| ClusterError::new(format!("cannot run pg_ctl: {error}")))?;
        if status.success() {
            return Ok(());
        }
        let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        Err(ClusterError::new(format!(
            "pg_ctl start failed ({status}); server log:\n{log}"
        )))
    }

    /// Stops the server the hard way: every server process exits at once, as in a crash.
    ///
    /// # Panics
    /// When `pg_ctl stop -m immediate` fails.
    pub fn stop_immediate(&self) {
        let status = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .args(["-w", "-m", "immediate", "stop"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        assert!(
            status.as_ref().is_ok_and(std::process::ExitStatus::success),
            "pg_ctl stop -m immediate failed: {status:?}"
        );
    }

    /// A process that waits for this process to exit, then stops the server and removes its
    /// directory.
    fn watchdog(&self) -> Result<(), ClusterError> {
        let stop = format!(
            "{} {} -D {} -m immediate stop",
            self.user
                .as_ref()
                .map_or(String::new(), |u| format!("runuser -u {u} --")),
            quote(&self.bin.join("pg_ctl")),
            quote(&self.data()),
        );
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 0.3; done; \
             if [ -f {pidfile} ]; then {stop}; fi; rm -rf {dir}",
            pid = std::process::id(),
            pidfile = quote(&self.data().join("postmaster.pid")),
            dir = quote(&self.dir),
        );
        Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map(drop)
            .map_err(|error| {
                ClusterError::new(format!("cannot start the cluster's watchdog: {error}"))
            })
    }
}

fn quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}
