//! loopx's durable step beside the peers' (`cargo bench -p loopx-benches --bench store -- peers`,
//! run by `benches/peers/run`, which makes the peers' virtual environment first).
//!
//! In one run, on one disk and one PostgreSQL cluster: loopx's settle commit and the raw
//! single-row commit of the same engine (the settle figure's own alternating rounds), then each
//! peer's durable step in a Python process of its own (`peers.py`, with the interpreter named by
//! `LOOPX_PEERS_PYTHON`), every rate given as a ratio to the raw commit of its backend.

use std::path::Path;
use std::process::Command;

use loopx_store::Durability;
use loopx_store::test_cluster::Cluster;
use serde_json::Value;
use tokio::runtime::Builder;

use super::{Failure, SettleFigures, postgres_settles, sqlite_settles};

/// Steps each peer times, as many as loopx's settle figure times turns.
const STEPS: usize = super::TURNS;

/// One row of the table.
struct Row {
    system: String,
    backend: &'static str,
    per_second: f64,
    median_ms: f64,
    bytes_per_step: f64,
    rss_kib: Option<u64>,
    step: &'static str,
}

/// Every figure of the comparison, printed as one table.
pub(super) fn figures(cluster: &Cluster, dir: &Path) -> Result<(), Failure> {
    let python = std::env::var("LOOPX_PEERS_PYTHON").map_err(|_| {
        "LOOPX_PEERS_PYTHON names no interpreter: run `benches/peers/run`, which installs the pinned peers into a virtual environment and sets it"
    })?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/peers.py");
    let runtime = Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;

    let sqlite = sqlite_settles(&runtime, dir, "peers", Durability::Full, "full")?;
    let postgres = postgres_settles(&runtime, cluster, "peers_")?;
    let loopx_rss = peak_rss_kib();

    let mut rows = vec![
        loopx_row("sqlite", &sqlite, loopx_rss),
        loopx_row("postgres", &postgres, loopx_rss),
    ];
    for peer in ["langgraph", "dbos"] {
        for backend in ["sqlite", "postgres"] {
            let database = match backend {
                "postgres" => Some(cluster.create_database(&format!("peers_{peer}"))?),
                _ => None,
            };
            rows.push(peer_row(
                &python,
                &script,
                peer,
                backend,
                database.as_deref(),
                dir,
            )?);
        }
    }
    print_table(&rows, sqlite.raw, postgres.raw);
    Ok(())
}

fn loopx_row(backend: &'static str, figures: &SettleFigures, rss_kib: Option<u64>) -> Row {
    Row {
        system: "loopx".to_owned(),
        backend,
        per_second: figures.settles,
        median_ms: figures.settle_median.as_secs_f64() * 1000.0,
        bytes_per_step: figures.bytes,
        rss_kib,
        step: "settle commit of a turn (verdict, usage, receipt, wake and frontier rows)",
    }
}

/// One peer on one backend, in a Python process of its own.
fn peer_row(
    python: &str,
    script: &Path,
    peer: &'static str,
    backend: &'static str,
    database: Option<&str>,
    dir: &Path,
) -> Result<Row, Failure> {
    let scratch = tempfile::tempdir_in(dir)?;
    let mut command = Command::new(python);
    command
        .arg(script)
        .args([peer, backend, "--steps", &STEPS.to_string()])
        .arg("--dir")
        .arg(scratch.path());
    if let Some(url) = database {
        command.arg("--postgres-url").arg(url);
    }
    let output = command.output()?;
    if !output.status.success() {
        return Err(format!(
            "{peer} on {backend} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
                .lines()
                .last()
                .unwrap_or("")
        )
        .into());
    }
    let line: Value = serde_json::from_slice(&output.stdout)?;
    let number = |field: &str| {
        line[field]
            .as_f64()
            .ok_or_else(|| format!("{peer} on {backend} printed no `{field}`"))
    };
    Ok(Row {
        system: format!("{peer} ({})", line["durability"].as_str().unwrap_or("?")),
        backend,
        per_second: number("per_second")?,
        median_ms: number("median_ms")?,
        bytes_per_step: number("bytes_per_step")?,
        rss_kib: line["rss_kib"].as_u64(),
        step: match peer {
            "langgraph" => "one super-step, checkpoint saved with durability=\"sync\"",
            _ => "one @DBOS.step, its output recorded before the workflow goes on",
        },
    })
}

fn print_table(rows: &[Row], sqlite_raw: f64, postgres_raw: f64) {
    println!("durable steps side by side, one run on this machine (fsync on everywhere)");
    println!("raw single-row commits: SQLite {sqlite_raw:.0}/s, PostgreSQL {postgres_raw:.0}/s");
    println!(
        "| system | backend | steps/s | vs raw commit | median ms | bytes/step | client peak RSS | step |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for row in rows {
        let raw = if row.backend == "sqlite" {
            sqlite_raw
        } else {
            postgres_raw
        };
        let rss = row.rss_kib.map_or_else(
            || "?".to_owned(),
            |kib| format!("{} MiB", kib.div_ceil(1024)),
        );
        println!(
            "| {} | {} | {:.0} | {:.2}x | {:.2} | {:.0} | {} | {} |",
            row.system,
            row.backend,
            row.per_second,
            row.per_second / raw,
            row.median_ms,
            row.bytes_per_step,
            rss,
            row.step,
        );
    }
    for backend in ["sqlite", "postgres"] {
        let Some(loopx) = rows
            .iter()
            .find(|r| r.system == "loopx" && r.backend == backend)
        else {
            continue;
        };
        for peer in rows
            .iter()
            .filter(|r| r.system != "loopx" && r.backend == backend)
        {
            println!(
                "loopx vs {} @{backend}: {:.1}x the steps per second",
                peer.system,
                loopx.per_second / peer.per_second
            );
        }
    }
}

/// This process's peak resident set (`VmHWM`), where the platform tells.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}
