//! Experiment metrics bound to the run's revision.

use std::sync::Arc;

use loopx_kernel::ManualClock;
use loopx_kernel::seams::{ObserveRequest, Provider};
use loopx_kernel::{ObservationKey, SourceId, Timestamp};
use loopx_provider::metrics::{
    MetricsError, MetricsFormat, MetricsProvider, RunRevision, observations, parse_metrics,
};

fn run(code: &str) -> RunRevision {
    RunRevision {
        code_sha: code.into(),
        config_hash: "cfg-1a2b".into(),
        dataset: "sha256:dd00".into(),
    }
}

const JSONL: &str = r#"{"step": 1, "name": "loss", "value": 0.9}
{"step": 2, "name": "loss", "value": 0.5}

{"step": 2, "name": "accuracy", "value": 0.75}
"#;

const CSV: &str = "step,name,value\n1,loss,0.9\n2,loss,0.5\n2,accuracy,0.75\n";

#[test]
fn json_lines_and_csv_read_to_the_same_observations() {
    let at = Timestamp::from_millis(0);
    let a = parse_metrics(JSONL.as_bytes(), MetricsFormat::JsonLines).expect("jsonl");
    let b = parse_metrics(CSV.as_bytes(), MetricsFormat::Csv).expect("csv");
    assert_eq!(a, b);
    let obs = observations("mnist-small", &run("abc123"), &a, at).expect("observations");
    assert_eq!(obs.len(), 2);
    let loss = obs
        .iter()
        .find(|o| o.key.as_str() == "metric:mnist-small/loss")
        .expect("loss");
    assert_eq!(loss.subject.as_str(), "experiment:mnist-small");
    assert_eq!(loss.revision.as_str(), "run:abc123+cfg-1a2b+sha256:dd00");
    assert_eq!(loss.facts["last_value"], "0.5");
    assert_eq!(loss.facts["last_step"], "2");
    assert_eq!(loss.facts["min"], "0.5");
    assert_eq!(loss.facts["max"], "0.9");
    assert_eq!(loss.facts["points"], "2");
}

#[test]
fn the_revision_binds_code_config_and_dataset() {
    let at = Timestamp::from_millis(0);
    let points = parse_metrics(CSV.as_bytes(), MetricsFormat::Csv).expect("csv");
    let one = observations("e", &run("abc"), &points, at).expect("observations");
    let same = observations("e", &run("abc"), &points, Timestamp::from_millis(9)).expect("o");
    let other = observations("e", &run("def"), &points, at).expect("observations");
    assert_eq!(one[0].fingerprint, same[0].fingerprint);
    assert_ne!(one[0].revision, other[0].revision);
    assert_ne!(one[0].fingerprint, other[0].fingerprint);
    let mut more = points.clone();
    more.push(loopx_provider::metrics::MetricPoint {
        step: 3,
        name: "accuracy".into(),
        value: 0.8,
    });
    let grown = observations("e", &run("abc"), &more, at).expect("observations");
    assert_ne!(
        one[0].fingerprint, grown[0].fingerprint,
        "accuracy gained a point"
    );
    assert_eq!(
        one[1].fingerprint, grown[1].fingerprint,
        "loss did not change"
    );
}

#[test]
fn malformed_lines_are_named() {
    let bad = "{\"step\": 1, \"name\": \"loss\", \"value\": 0.9}\n{\"step\": \"x\"}\n";
    assert!(matches!(
        parse_metrics(bad.as_bytes(), MetricsFormat::JsonLines),
        Err(MetricsError::Malformed { line: 2, .. })
    ));
    let bad_csv = "step,name,value\n1,loss,0.9\nnope,loss,1\n";
    assert!(matches!(
        parse_metrics(bad_csv.as_bytes(), MetricsFormat::Csv),
        Err(MetricsError::Malformed { line: 3, .. })
    ));
    assert!(matches!(
        parse_metrics(b"step,value\n1,2\n", MetricsFormat::Csv),
        Err(MetricsError::Malformed { .. })
    ));
    let nan = parse_metrics(b"step,name,value\n1,loss,NaN\n", MetricsFormat::Csv).expect("nan");
    assert!(nan[0].value.is_nan());
}

#[tokio::test]
async fn the_provider_reads_the_file_each_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("metrics.csv");
    std::fs::write(&path, CSV).expect("write");
    let provider = MetricsProvider::new(
        SourceId::new("metrics").expect("id"),
        &path,
        "mnist",
        run("abc"),
        Arc::new(ManualClock::new(Timestamp::from_millis(7))),
    );
    let key = ObservationKey::new("metric:mnist/loss").expect("id");
    let request = ObserveRequest {
        key,
        known: None,
        etag: None,
    };
    let loss = provider.observe(&request).await.expect("observe");
    assert_eq!(loss.len(), 1);
    assert_eq!(loss[0].facts["last_value"], "0.5");
    std::fs::write(&path, format!("{CSV}3,loss,0.25\n")).expect("write");
    let later = provider.observe(&request).await.expect("observe");
    assert_eq!(later[0].facts["last_value"], "0.25");
    assert_ne!(later[0].fingerprint, loss[0].fingerprint);

    std::fs::remove_file(&path).expect("remove");
    assert!(provider.observe(&request).await.is_err());
}
