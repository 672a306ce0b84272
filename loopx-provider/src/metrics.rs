//! Experiment metrics: the JSON lines or CSV a training process writes (`step`, `name`,
//! `value`), bound to the run's revision (code sha + config hash + dataset fingerprint).
//!
//! Each metric name becomes one observation: stream `metric:<experiment>/<name>`, subject
//! `experiment:<experiment>`, revision `run:<code>+<config>+<dataset>`; its facts are the
//! kernel's [`Metric`] schema (`points`, `last_step`, `last_value`, `min`, `max` and the run's
//! parts), the definition capabilities read them back with. A rewritten file with the same points fingerprints
//! alike; a new point, a new code sha, config or dataset changes the fingerprint, and a new
//! revision makes evidence about the old run stale.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use loopx_kernel::facts::metrics::{self, Metric};
use loopx_kernel::seams::{Clock, ObserveRequest, Provider, ProviderError};
use loopx_kernel::{Observation, SourceId, Timestamp};
use serde::Deserialize;

use crate::fact::{FactBuilder, id_component};

/// The largest metrics file read, in bytes (64 MiB).
pub const MAX_METRICS_BYTES: u64 = 64 * 1024 * 1024;

/// One recorded value.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
pub struct MetricPoint {
    /// The training step.
    pub step: u64,
    /// The metric's name, e.g. `loss`.
    pub name: String,
    /// Its value (NaN and infinities are kept: a diverged loss is a fact).
    pub value: f64,
}

/// The file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsFormat {
    /// One JSON object per line: `{"step": 1, "name": "loss", "value": 0.5}`.
    JsonLines,
    /// CSV with a header naming `step`, `name` and `value` (in any order; other columns ignored).
    Csv,
}

impl MetricsFormat {
    /// `Csv` for a `.csv` path, `JsonLines` otherwise.
    pub fn from_path(path: &Path) -> Self {
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("csv"))
        {
            MetricsFormat::Csv
        } else {
            MetricsFormat::JsonLines
        }
    }
}

/// Which run the metrics belong to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRevision {
    /// The commit the training code ran at.
    pub code_sha: String,
    /// A hash of the run's configuration.
    pub config_hash: String,
    /// The dataset's fingerprint.
    pub dataset: String,
}

impl RunRevision {
    /// `run:<code>+<config>+<dataset>`, each part encoded for the kernel's id alphabet (and the
    /// whole cut to the id length limit with a digest suffix when long).
    pub fn revision(&self) -> String {
        format!(
            "run:{}+{}+{}",
            id_component(&self.code_sha),
            id_component(&self.config_hash),
            id_component(&self.dataset)
        )
    }
}

/// Why metrics could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MetricsError {
    /// The file could not be read.
    #[error("cannot read `{path}`: {detail}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's reason.
        detail: String,
    },
    /// The file exceeds [`MAX_METRICS_BYTES`].
    #[error("the metrics file is {size} bytes, over the bound of {limit}")]
    TooLarge {
        /// Its size.
        size: u64,
        /// The bound.
        limit: u64,
    },
    /// A line or record is not a metric point.
    #[error("line {line}: {detail}")]
    Malformed {
        /// One-based line (JSON lines) or record (CSV) number.
        line: u64,
        /// What was wrong.
        detail: String,
    },
}

/// Parses metric points from `bytes`. Blank JSON lines are skipped.
///
/// # Errors
/// [`MetricsError::TooLarge`] or [`MetricsError::Malformed`] naming the first bad line.
pub fn parse_metrics(
    bytes: &[u8],
    format: MetricsFormat,
) -> Result<Vec<MetricPoint>, MetricsError> {
    if bytes.len() as u64 > MAX_METRICS_BYTES {
        return Err(MetricsError::TooLarge {
            size: bytes.len() as u64,
            limit: MAX_METRICS_BYTES,
        });
    }
    match format {
        MetricsFormat::JsonLines => {
            let mut points = Vec::new();
            for (index, line) in bytes.split(|b| *b == b'\n').enumerate() {
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let point = serde_json::from_slice(line).map_err(|e| MetricsError::Malformed {
                    line: index as u64 + 1,
                    detail: e.to_string(),
                })?;
                points.push(point);
            }
            Ok(points)
        }
        MetricsFormat::Csv => {
            let mut reader = csv::ReaderBuilder::new()
                .trim(csv::Trim::All)
                .from_reader(bytes);
            let mut points = Vec::new();
            for (index, record) in reader.deserialize::<MetricPoint>().enumerate() {
                points.push(record.map_err(|e| MetricsError::Malformed {
                    line: e.position().map_or(index as u64 + 2, csv::Position::line),
                    detail: e.to_string(),
                })?);
            }
            Ok(points)
        }
    }
}

#[derive(Default)]
struct Summary {
    points: u64,
    last_step: u64,
    last_value: f64,
    min: f64,
    max: f64,
}

/// Binds points to a run: one observation per metric name, sorted by name.
///
/// The last point is the one with the highest step (the later line on a tie).
///
/// # Errors
/// [`MetricsError::Malformed`] when the experiment or a metric name cannot form an id.
pub fn observations(
    experiment: &str,
    run: &RunRevision,
    points: &[MetricPoint],
    observed_at: Timestamp,
) -> Result<Vec<Observation>, MetricsError> {
    let mut by_name: BTreeMap<&str, Summary> = BTreeMap::new();
    for point in points {
        let summary = by_name.entry(point.name.as_str()).or_insert(Summary {
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            ..Summary::default()
        });
        summary.points += 1;
        if summary.points == 1 || point.step >= summary.last_step {
            summary.last_step = point.step;
            summary.last_value = point.value;
        }
        summary.min = summary.min.min(point.value);
        summary.max = summary.max.max(point.value);
    }
    let exp = id_component(experiment);
    let subject = metrics::subject(&exp);
    let revision = run.revision();
    by_name
        .into_iter()
        .map(|(name, s)| {
            FactBuilder::new(&Metric::key(&exp, &id_component(name)), &subject, &revision)
                .summary(format!(
                    "{name} = {} at step {} ({} points) for code {}",
                    s.last_value,
                    s.last_step,
                    s.points,
                    run.code_sha.get(..7).unwrap_or(&run.code_sha)
                ))
                .facts(&Metric {
                    name: name.to_owned(),
                    points: s.points,
                    last_step: s.last_step,
                    last_value: s.last_value,
                    min: s.min,
                    max: s.max,
                    code_sha: run.code_sha.clone(),
                    config_hash: run.config_hash.clone(),
                    dataset: run.dataset.clone(),
                })
                .build(observed_at)
                .map_err(|e| MetricsError::Malformed {
                    line: 0,
                    detail: e.to_string(),
                })
        })
        .collect()
}

/// Reads a metrics file on every observation.
pub struct MetricsProvider {
    source: SourceId,
    path: PathBuf,
    experiment: String,
    run: RunRevision,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for MetricsProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsProvider")
            .field("source", &self.source)
            .field("path", &self.path)
            .field("experiment", &self.experiment)
            .field("run", &self.run)
            .finish_non_exhaustive()
    }
}

impl MetricsProvider {
    /// A provider reading `path` (format by extension) for `experiment` at `run`.
    pub fn new(
        source: SourceId,
        path: impl Into<PathBuf>,
        experiment: impl Into<String>,
        run: RunRevision,
        clock: Arc<dyn Clock>,
    ) -> Self {
        MetricsProvider {
            source,
            path: path.into(),
            experiment: experiment.into(),
            run,
            clock,
        }
    }

    /// Reads the file and builds its observations.
    ///
    /// # Errors
    /// Any [`MetricsError`].
    pub async fn read(&self) -> Result<Vec<Observation>, MetricsError> {
        let io = |e: std::io::Error| MetricsError::Io {
            path: self.path.clone(),
            detail: e.to_string(),
        };
        let size = tokio::fs::metadata(&self.path).await.map_err(io)?.len();
        if size > MAX_METRICS_BYTES {
            return Err(MetricsError::TooLarge {
                size,
                limit: MAX_METRICS_BYTES,
            });
        }
        let bytes = tokio::fs::read(&self.path).await.map_err(io)?;
        let points = parse_metrics(&bytes, MetricsFormat::from_path(&self.path))?;
        observations(&self.experiment, &self.run, &points, self.clock.now())
    }
}

#[async_trait]
impl Provider for MetricsProvider {
    fn source(&self) -> &SourceId {
        &self.source
    }

    /// Observes every metric in the file; `request.key` selects one stream when it names a
    /// metric of this experiment, otherwise all are returned.
    async fn observe(&self, request: &ObserveRequest) -> Result<Vec<Observation>, ProviderError> {
        let all = self.read().await.map_err(|e| match e {
            MetricsError::Io { .. } => ProviderError::Failed(e.to_string()),
            other => ProviderError::Invalid(other.to_string()),
        })?;
        if all.iter().any(|o| o.key == request.key) {
            Ok(all.into_iter().filter(|o| o.key == request.key).collect())
        } else {
            Ok(all)
        }
    }
}
