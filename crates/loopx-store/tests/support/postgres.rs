//! A real PostgreSQL for the tests: a throwaway cluster started with the `initdb` and `pg_ctl`
//! found in `LOOPX_PG_BIN` or on `PATH`, in a temporary directory, listening on a free port of
//! 127.0.0.1 only, and removed when the test binary exits (a watchdog process stops it and
//! deletes the directory even if the binary is killed). `LOOPX_TEST_POSTGRES_URL`
//! (`postgres://user:password@host:port/database`, a role allowed to create databases) points
//! at an existing server instead. When neither is available the tests fail with a message
//! saying so; they never skip.
//!
//! PostgreSQL refuses to run as root: when the tests run as root, the cluster runs as the
//! `postgres` OS user (`runuser -u postgres`), with its directory owned by that user.
//!
//! One cluster serves a whole test binary; every test gets a database of its own.
#![allow(dead_code, reason = "each test binary uses part of the harness")]

use std::env;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The server the tests use.
pub struct Cluster {
    /// A URL of the server without a database name at the end (ends with `/`).
    base: String,
    /// The query string of the URL, if any (kept on every database URL).
    query: String,
    local: Option<Local>,
}

/// A cluster this harness started.
pub struct Local {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    /// Run the binaries as this OS user (when the tests run as root).
    user: Option<String>,
}

static SHARED: OnceLock<Cluster> = OnceLock::new();
static DATABASES: AtomicU32 = AtomicU32::new(0);

/// The binary's one cluster: the server of `LOOPX_TEST_POSTGRES_URL`, or a throwaway one.
///
/// # Panics
/// With an explanation when neither is available.
pub fn cluster() -> &'static Cluster {
    SHARED.get_or_init(|| match env::var("LOOPX_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => Cluster::external(&url),
        _ => Cluster::start_local().unwrap_or_else(|error| panic!("{error}")),
    })
}

/// A throwaway cluster of this harness even when `LOOPX_TEST_POSTGRES_URL` is set: for the
/// tests that stop and restart the server.
///
/// # Panics
/// With an explanation when the binaries are not available.
pub fn local_cluster() -> &'static Cluster {
    static LOCAL: OnceLock<Cluster> = OnceLock::new();
    if cluster().local.is_some() {
        return cluster();
    }
    LOCAL.get_or_init(|| Cluster::start_local().unwrap_or_else(|error| panic!("{error}")))
}

fn run(command: &mut Command, what: &str) -> Result<(), String> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|error| format!("cannot run {what}: {error}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} failed ({}): {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

fn find_bin() -> Result<PathBuf, String> {
    if let Ok(dir) = env::var("LOOPX_PG_BIN") {
        let dir = PathBuf::from(dir);
        if dir.join("initdb").is_file() && dir.join("pg_ctl").is_file() {
            return Ok(dir);
        }
        return Err(format!(
            "LOOPX_PG_BIN is `{}` but holds no initdb and pg_ctl",
            dir.display()
        ));
    }
    env::split_paths(&env::var_os("PATH").unwrap_or_default())
        .find(|dir| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file())
        .ok_or_else(|| {
            "the PostgreSQL tests need a server: put PostgreSQL's initdb and pg_ctl on PATH (e.g. \
             `apt-get install postgresql`, then add /usr/lib/postgresql/<version>/bin), or set \
             LOOPX_PG_BIN to their directory, or set LOOPX_TEST_POSTGRES_URL to a server where \
             the user may create databases"
                .to_owned()
        })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(|error| format!("no free loopback port: {error}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|error| format!("no free loopback port: {error}"))
}

impl Cluster {
    fn external(url: &str) -> Cluster {
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

    fn start_local() -> Result<Cluster, String> {
        let bin = find_bin()?;
        let user = is_root().then(|| "postgres".to_owned());
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = env::temp_dir().join(format!("loopx-pg-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
        if let Some(user) = &user {
            run(
                Command::new("chown").arg(user).arg(&dir),
                "chown of the cluster directory to the postgres user",
            )
            .map_err(|error| {
                format!("{error}; the tests run as root, so the cluster runs as the `postgres` OS user, which must exist")
            })?;
        }
        let local = Local {
            bin,
            dir,
            port: free_port()?,
            user,
        };
        local.watchdog()?;
        local.initdb()?;
        local.start()?;
        Ok(Cluster {
            base: format!("postgres://loopx@127.0.0.1:{}/", local.port),
            query: String::new(),
            local: Some(local),
        })
    }

    /// The URL of database `name` on this server.
    pub fn url(&self, name: &str) -> String {
        format!("{}{name}{}", self.base, self.query)
    }

    /// A new, empty database; its URL.
    pub fn database(&self) -> String {
        let n = DATABASES.fetch_add(1, Ordering::Relaxed);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!("loopx_t{}_{n}_{nanos}", std::process::id());
        // Identifiers cannot be parameters; this one is made of digits, letters and `_` above.
        self.admin(&format!("CREATE DATABASE {name}"));
        self.url(&name)
    }

    /// Runs `sql` on the server's `postgres` database, on a thread of its own (callable from
    /// inside and outside a runtime).
    pub fn admin(&self, sql: &str) {
        let url = self.url("postgres");
        let statement = sql.to_owned();
        let result = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async {
                let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    .await
                    .map_err(|e| format!("cannot reach the test server: {e}"))?;
                tokio::spawn(connection);
                client
                    .batch_execute(&statement)
                    .await
                    .map_err(|e| e.to_string())
            })
        })
        .join()
        .unwrap_or_else(|_| Err("the admin thread panicked".into()));
        if let Err(error) = result {
            panic!("`{sql}` on the test server failed: {error}");
        }
    }

    /// The throwaway cluster, for tests that stop and restart it.
    pub fn local(&self) -> &Local {
        self.local
            .as_ref()
            .unwrap_or_else(|| panic!("this test needs a cluster of its own"))
    }
}

impl Local {
    fn command(&self, binary: &str) -> Command {
        let path = self.bin.join(binary);
        match &self.user {
            Some(user) => {
                let mut command = Command::new("runuser");
                command.arg("-u").arg(user).arg("--").arg(path);
                command
            }
            None => Command::new(path),
        }
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn initdb(&self) -> Result<(), String> {
        run(
            self.command("initdb").arg("-D").arg(self.data()).args([
                "-U",
                "loopx",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-locale",
                "--no-sync",
            ]),
            "initdb",
        )
    }

    /// Starts the server and waits until it accepts connections.
    pub fn start(&self) -> Result<(), String> {
        // fsync is off: these tests crash processes, not the machine, and the operating
        // system keeps what a killed server wrote.
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -c unix_socket_directories='' -c fsync=off \
             -c full_page_writes=off -c max_connections=300 -c shared_buffers=32MB",
            self.port
        );
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
            .map_err(|error| format!("cannot run pg_ctl: {error}"))?;
        if status.success() {
            return Ok(());
        }
        let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        Err(format!(
            "pg_ctl start failed ({status}); server log:\n{log}"
        ))
    }

    /// Stops the server the hard way: every server process exits at once, as in a crash.
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

    /// A process that waits for this test binary to exit, then stops the server and removes
    /// its directory.
    fn watchdog(&self) -> Result<(), String> {
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
            .map_err(|error| format!("cannot start the cluster's watchdog: {error}"))
    }
}

fn quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}
