//! `loopx serve` under load, as a real process with short bounds set by its flags: many
//! unsigned 24 MB deliveries at once, connections that trickle their headers, stall their body,
//! send nothing, or stop reading an event stream. The service's memory stays under
//! [`RSS_BOUND`], `/healthz` answers within a second throughout, and every slow connection is
//! closed within its timeout.

mod support;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use support::{Loopx, listening};

const SECRET_VAR: &str = "LOOPX_TEST_WEBHOOK_SECRET";
/// The bound the service's resident memory stays under throughout.
const RSS_BOUND: u64 = 256 * 1024 * 1024;
/// The timeouts the service is started with.
const HEADER_TIMEOUT: Duration = Duration::from_secs(2);
const BODY_TIMEOUT: Duration = Duration::from_secs(3);
const IDLE_TIMEOUT: Duration = Duration::from_secs(4);
/// How late past its timeout a connection may be closed (scheduling on a busy machine).
const SLACK: Duration = Duration::from_millis(1500);
/// How many connections of each kind are open at once (five kinds, at most 200 in all).
const EACH: usize = 36;
/// The size of each unsigned upload.
const UPLOAD: usize = 24 * 1024 * 1024;
/// How long the uploads keep coming.
const ATTACK: Duration = Duration::from_secs(10);

/// `loopx serve` with the short bounds, and the address it listens on.
fn serve(lx: &Loopx) -> (std::process::Child, String) {
    let mut child = lx.spawn_env(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--webhook-secret-env",
            SECRET_VAR,
            "--header-timeout",
            "2s",
            "--body-timeout",
            "3s",
            "--idle-timeout",
            "4s",
            "--max-connections",
            "400",
            "--body-budget",
            "32MiB",
        ],
        &[(SECRET_VAR, "a webhook secret"), ("LOOPX_LOG", "error")],
    );
    let stdout = child.stdout.take().expect("piped stdout");
    let url = listening(stdout);
    // The log must never block the service on a full pipe.
    let mut stderr = child.stderr.take().expect("piped stderr");
    thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    let address = url.strip_prefix("http://").expect("an http URL").to_owned();
    (child, address)
}

/// The process's resident memory, from `/proc`.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the status");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.split_whitespace().next())
        .and_then(|value| value.parse().ok())
        .expect("VmRSS");
    kib * 1024
}

fn connect(address: &str) -> TcpStream {
    let stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("a read timeout");
    stream
}

/// Reads until the service closes the connection; how long after `since` that was.
fn closed_after(mut stream: TcpStream, since: Instant) -> Duration {
    let mut buffer = [0u8; 4096];
    while matches!(stream.read(&mut buffer), Ok(n) if n > 0) {}
    since.elapsed()
}

/// `GET /healthz` on a fresh connection: its status and how long the answer took.
fn health(address: &str) -> (u16, Duration) {
    let start = Instant::now();
    let Ok(mut stream) = TcpStream::connect(address) else {
        return (0, start.elapsed());
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = "GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    if stream.write_all(request.as_bytes()).is_err() {
        return (0, start.elapsed());
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    let code = answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, start.elapsed())
}

/// Unsigned 24 MB deliveries, one after another until `stop`: what each was answered.
fn upload(address: &str, body: &[u8], stop: &AtomicBool) -> Vec<u16> {
    let mut codes = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let mut stream = connect(address);
        let head = format!(
            "POST /github/webhook HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
             Content-Length: {}\r\nX-GitHub-Event: push\r\nX-GitHub-Delivery: d-{}\r\n\r\n",
            body.len(),
            codes.len()
        );
        // The service may answer and close before taking the whole body.
        let _ = stream
            .write_all(head.as_bytes())
            .and_then(|()| stream.write_all(body));
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        codes.push(
            answer
                .split(' ')
                .nth(1)
                .and_then(|c| c.parse().ok())
                .unwrap_or(0),
        );
    }
    codes
}

/// A connection that sends a header line's byte each second and never finishes its headers.
fn slow_headers(address: &str) -> Duration {
    let mut stream = connect(address);
    let start = Instant::now();
    let _ = stream.write_all(b"POST /github/webhook HTTP/1.1\r\nHost: localhost\r\nX-Slow: ");
    let writer = stream.try_clone().expect("a second handle");
    thread::spawn(move || {
        let mut writer = writer;
        while writer.write_all(b"a").is_ok() {
            thread::sleep(Duration::from_secs(1));
        }
    });
    closed_after(stream, start)
}

/// A delivery whose headers are whole but whose body stops after a few bytes.
fn stalled_body(address: &str, n: usize) -> Duration {
    let mut stream = connect(address);
    let start = Instant::now();
    let head = format!(
        "POST /github/webhook HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\
         X-GitHub-Event: push\r\nX-GitHub-Delivery: stalled-{n}\r\n\r\n{{\"ref\":"
    );
    let _ = stream.write_all(head.as_bytes());
    closed_after(stream, start)
}

/// A connection that sends nothing at all.
fn silent(address: &str) -> Duration {
    let stream = connect(address);
    closed_after(stream, Instant::now())
}

/// An event stream whose reader never reads past its first bytes: nothing moves once its
/// answer began.
fn unread_events(address: &str) -> Duration {
    let mut stream = connect(address);
    let start = Instant::now();
    let _ = stream
        .write_all(b"GET /events HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n\r\n");
    closed_after(stream, start)
}

#[test]
fn serve_stays_bounded_and_healthy_under_slow_and_heavy_connections() {
    let lx = Loopx::sqlite();
    lx.ok(&["init"]);
    let (mut child, address) = serve(&lx);
    let pid = child.id();
    let before = rss(pid);
    let stop = Arc::new(AtomicBool::new(false));
    let body: Arc<Vec<u8>> = Arc::new(vec![b'x'; UPLOAD]);

    let uploads: Vec<_> = (0..EACH)
        .map(|_| {
            let (address, body, stop) = (address.clone(), body.clone(), stop.clone());
            thread::spawn(move || upload(&address, &body, &stop))
        })
        .collect();
    let slow: Vec<(&str, Duration, thread::JoinHandle<Duration>)> = (0..EACH)
        .flat_map(|n| {
            let a = [
                address.clone(),
                address.clone(),
                address.clone(),
                address.clone(),
            ];
            let [a1, a2, a3, a4] = a;
            [
                (
                    "slow headers",
                    HEADER_TIMEOUT,
                    thread::spawn(move || slow_headers(&a1)),
                ),
                (
                    "stalled body",
                    BODY_TIMEOUT,
                    thread::spawn(move || stalled_body(&a2, n)),
                ),
                ("silent", HEADER_TIMEOUT, thread::spawn(move || silent(&a3))),
                (
                    "unread events",
                    IDLE_TIMEOUT,
                    thread::spawn(move || unread_events(&a4)),
                ),
            ]
        })
        .collect();

    let start = Instant::now();
    let mut peak = before;
    let mut checks = 0;
    while start.elapsed() < ATTACK {
        peak = peak.max(rss(pid));
        let (code, took) = health(&address);
        assert_eq!(code, 200, "/healthz answers throughout");
        assert!(took < Duration::from_secs(1), "/healthz took {took:?}");
        checks += 1;
        thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    for (kind, timeout, handle) in slow {
        let open = handle.join().expect("the connection thread");
        assert!(
            open <= timeout + SLACK,
            "a {kind} connection stayed open {open:?}, past its {timeout:?}"
        );
    }
    let mut answered = std::collections::BTreeMap::<u16, usize>::new();
    for handle in uploads {
        for code in handle.join().expect("the upload thread") {
            *answered.entry(code).or_default() += 1;
            peak = peak.max(rss(pid));
        }
    }
    println!(
        "RSS {} MiB before, {} MiB at peak (bound {} MiB); {checks} health checks; uploads answered {answered:?}",
        before >> 20,
        peak >> 20,
        RSS_BOUND >> 20
    );
    assert!(peak < RSS_BOUND, "peak RSS {} MiB", peak >> 20);
    assert!(
        answered.get(&401).copied().unwrap_or(0) > 0,
        "some unsigned uploads were read and refused for their signature: {answered:?}"
    );
    assert!(
        answered.keys().all(|code| [401, 503, 0].contains(code)),
        "each upload is refused unsigned (401) or for want of room (503): {answered:?}"
    );
    let (code, _) = health(&address);
    assert_eq!(code, 200, "healthy after the load");
    child.kill().expect("stop the service");
    let _ = child.wait();
}
