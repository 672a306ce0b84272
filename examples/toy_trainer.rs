//! A toy trainer, shaped like a real one from the outside: arguments in, metrics out as JSON
//! lines (`{"step": 20, "name": "accuracy", "value": 0.79}`, the format the metrics provider
//! reads), an exit code at the end. It is deterministic and finishes in milliseconds.
//!
//! ```text
//! toy-trainer --lr 0.05 --seed 1 --dataset digits-v1 --split dev \
//!             --steps 200 --batch 64 --memory-mb 4096 --out metrics.jsonl
//! ```
//!
//! Accuracy peaks at a learning rate of 0.05 and falls off on either side; the seed moves it by
//! at most 0.0015; the holdout split reads 0.02 lower than dev. A batch needs 4 MB per example:
//! when it does not fit in `--memory-mb`, the trainer writes the points it got to, reports
//! "out of memory" and exits with 137, as a process killed for memory does.
//!
//! Run it by hand with `cargo run -p loopx-examples --bin toy-trainer -- --out m.jsonl` (every
//! other argument has a default).

use std::fmt::Write as _;

/// What one training run is asked to do.
#[derive(Debug, Clone)]
struct Args {
    lr: f64,
    seed: u64,
    dataset: String,
    split: String,
    steps: u64,
    batch: u64,
    memory_mb: u64,
    out: String,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut parsed = Args {
        lr: 0.01,
        seed: 1,
        dataset: "digits-v1".into(),
        split: "dev".into(),
        steps: 200,
        batch: 64,
        memory_mb: 4096,
        out: String::new(),
    };
    let mut pairs = args.iter();
    while let Some(flag) = pairs.next() {
        let value = pairs
            .next()
            .ok_or_else(|| format!("{flag} needs a value"))?;
        let number = |what: &str| format!("{flag} takes {what}, not `{value}`");
        match flag.as_str() {
            "--lr" => parsed.lr = value.parse().map_err(|_| number("a number"))?,
            "--seed" => parsed.seed = value.parse().map_err(|_| number("an integer"))?,
            "--steps" => parsed.steps = value.parse().map_err(|_| number("an integer"))?,
            "--batch" => parsed.batch = value.parse().map_err(|_| number("an integer"))?,
            "--memory-mb" => parsed.memory_mb = value.parse().map_err(|_| number("an integer"))?,
            "--dataset" => parsed.dataset.clone_from(value),
            "--split" => parsed.split.clone_from(value),
            "--out" => parsed.out.clone_from(value),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if !(parsed.lr.is_finite() && parsed.lr > 0.0) {
        return Err("--lr must be a positive number".into());
    }
    if parsed.out.is_empty() {
        return Err("--out names the metrics file to write".into());
    }
    if !["dev", "holdout"].contains(&parsed.split.as_str()) {
        return Err("--split is `dev` or `holdout`".into());
    }
    Ok(parsed)
}

/// The accuracy a run converges to.
fn ceiling(args: &Args) -> f64 {
    let off_peak = (args.lr / 0.05).log10();
    let seed = args.seed.wrapping_mul(2_654_435_761) >> 7;
    #[allow(clippy::cast_precision_loss)] // a value below 31
    let noise = (seed % 31) as f64 / 10_000.0 - 0.0015;
    let holdout = if args.split == "holdout" { 0.02 } else { 0.0 };
    0.85 - 0.1 * off_peak * off_peak + noise - holdout
}

/// Trains, writes the metrics and returns the exit code.
///
/// # Errors
/// Invalid arguments or a metrics file that cannot be written.
pub fn train(args: &[String]) -> Result<i32, String> {
    let args = parse(args)?;
    let fits = args.batch.saturating_mul(4) <= args.memory_mb;
    let top = ceiling(&args);
    let mut lines = String::new();
    for step in (20..=args.steps).step_by(20) {
        if !fits && step > 40 {
            break;
        }
        #[allow(clippy::cast_precision_loss)] // steps are small
        let accuracy = top * (1.0 - (-(step as f64) / 25.0).exp());
        let loss = 1.2 * (1.0 - accuracy);
        for (name, value) in [("accuracy", accuracy), ("loss", loss)] {
            let point = serde_json::json!({ "step": step, "name": name, "value": value });
            let _ = writeln!(lines, "{point}");
        }
    }
    std::fs::write(&args.out, lines).map_err(|e| format!("cannot write {}: {e}", args.out))?;
    if fits {
        println!(
            "trained on {} ({}) for {} steps at lr {}",
            args.dataset, args.split, args.steps, args.lr
        );
        Ok(0)
    } else {
        eprintln!(
            "out of memory: a batch of {} needs {} MB, the node has {} MB",
            args.batch,
            args.batch * 4,
            args.memory_mb
        );
        Ok(137)
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match train(&args) {
        Ok(code) => std::process::exit(code),
        Err(error) => {
            eprintln!("toy-trainer: {error}");
            std::process::exit(2);
        }
    }
}
