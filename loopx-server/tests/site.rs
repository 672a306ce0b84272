//! The service knows where it is served: a request for a host it does not answer to is refused
//! on every route (the precondition of DNS rebinding), a browser's post from another origin is
//! refused, the inbox's cookies are named after the listener and secured with an https public
//! URL, and the inbox never repeats text a link brought.

#[allow(dead_code, reason = "each test tells part of the story")]
#[path = "support/story.rs"]
mod story;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use loopx_server::{Service, Site};
use story::{GATE, GOAL, MAINTAINER_TOKEN, Story};

/// The board and the house routes of `story`, served on a loopback port as `site_of` says the
/// listener's site is; the listener's address.
async fn serve(story: &Story, site_of: impl FnOnce(std::net::SocketAddr) -> Site) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let address = listener.local_addr().expect("an address");
    let site = site_of(address);
    let clock: Arc<dyn loopx_kernel::seams::Clock> = story.clock.clone();
    let board =
        loopx_server::board::router(story.store.clone(), clock.clone(), story.tokens(), &site);
    let router = Service::new(story.store.clone(), clock)
        .site(site)
        .mount(board)
        .router();
    tokio::spawn(loopx_server::serve(
        listener,
        router,
        std::future::pending(),
    ));
    address.to_string()
}

/// One request written as is; the answer's status, headers and body (read until the service
/// closes, or for two seconds at most — an event stream never ends).
async fn raw(address: &str, request: String) -> (u16, String, String) {
    let address = address.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut stream = TcpStream::connect(&address).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(2)))
            .expect("a timeout");
        stream.write_all(request.as_bytes()).expect("send");
        let mut bytes = Vec::new();
        let _ = stream.read_to_end(&mut bytes);
        let answer = String::from_utf8_lossy(&bytes).into_owned();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        let code = head
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        (code, head.to_owned(), body.to_owned())
    })
    .await
    .expect("the request")
}

fn get(path: &str, host: &str, extra: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n{extra}\r\n")
}

fn post(path: &str, host: &str, extra: &str, form: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n{extra}\r\n{form}",
        form.len()
    )
}

/// The value of cookie `name` set by an answer's head, and its whole `Set-Cookie` line.
fn set_cookie(head: &str, name: &str) -> Option<(String, String)> {
    head.lines()
        .filter_map(|line| line.strip_prefix("set-cookie: "))
        .find(|value| value.starts_with(&format!("{name}=")))
        .map(|value| {
            let cookie = value[name.len() + 1..]
                .split(';')
                .next()
                .unwrap_or_default();
            (cookie.to_owned(), value.to_owned())
        })
}

/// The sign-in form's CSRF token and its cookie, from an anonymous inbox.
async fn sign_in_form(address: &str, cookie_name: &str) -> (String, String) {
    let (code, head, body) = raw(address, get("/inbox", address, "")).await;
    assert_eq!(code, 200);
    let (bound, _) = set_cookie(&head, cookie_name).expect("the sign-in cookie, by its site name");
    assert!(body.contains(&bound), "the form carries the cookie's token");
    let cookie = format!("{cookie_name}={bound}");
    (bound, cookie)
}

fn sign_in_body(csrf: &str) -> String {
    format!("csrf={csrf}&token={MAINTAINER_TOKEN}")
}

#[tokio::test]
async fn every_route_refuses_a_host_the_service_does_not_answer_to() {
    let story = Story::gate_open().await;
    let address = serve(&story, Site::local).await;
    let routes = [
        "/".to_owned(),
        format!("/goals/{GOAL}"),
        "/inbox".to_owned(),
        "/events".to_owned(),
        "/metrics".to_owned(),
        "/healthz".to_owned(),
    ];
    for route in &routes {
        let (code, _, body) = raw(&address, get(route, "evil.example", "")).await;
        assert_eq!(code, 421, "{route} for a foreign host");
        assert!(
            body.contains("\"code\":\"host_not_allowed\""),
            "{route}: {body}"
        );
        assert!(
            !body.contains(GOAL) && !body.contains(GATE),
            "{route} shows nothing: {body}"
        );
        let port = address.rsplit(':').next().expect("a port");
        let rebound = format!("evil.example:{port}");
        let (code, _, _) = raw(&address, get(route, &rebound, "")).await;
        assert_eq!(
            code, 421,
            "{route} for a foreign host on the service's port"
        );
    }
    for host in [address.as_str(), "localhost", "LOCALHOST:1"] {
        let (code, _, body) = raw(&address, get(&format!("/goals/{GOAL}"), host, "")).await;
        assert_eq!(code, 200, "the goal for host {host}");
        assert!(body.contains(GOAL));
    }
}

#[tokio::test]
async fn an_allowed_or_public_host_is_answered() {
    let story = Story::gate_open().await;
    let address = serve(&story, |at| {
        Site::local(at)
            .public_url("https://loopx.example.com")
            .and_then(|site| site.allow_host("loopx.internal"))
            .expect("a site")
    })
    .await;
    for host in ["loopx.example.com", "loopx.internal:8080"] {
        let (code, _, _) = raw(&address, get("/", host, "")).await;
        assert_eq!(code, 200, "{host}");
    }
    let (code, _, _) = raw(&address, get("/", "loopx.example.org", "")).await;
    assert_eq!(code, 421);
}

#[tokio::test]
async fn a_browsers_post_from_another_origin_is_refused_and_changes_nothing() {
    let story = Story::gate_open().await;
    let address = serve(&story, Site::local).await;
    let port = address.rsplit(':').next().expect("a port").to_owned();
    let cookie_name = format!("loopx_sign_in_{port}");
    let (csrf, cookie) = sign_in_form(&address, &cookie_name).await;
    let session = format!("loopx_session_{port}");
    // Another port of the same host is the same site to the browser, but another origin.
    for from in [
        "Origin: http://127.0.0.1:3000\r\n".to_owned(),
        "Origin: null\r\n".to_owned(),
        format!("Origin: http://evil.example:{port}\r\n"),
        "Sec-Fetch-Site: same-site\r\n".to_owned(),
        "Sec-Fetch-Site: cross-site\r\n".to_owned(),
    ] {
        let extra = format!("Cookie: {cookie}\r\n{from}");
        let request = post("/inbox/sign-in", &address, &extra, &sign_in_body(&csrf));
        let (code, head, body) = raw(&address, request).await;
        assert_eq!(code, 403, "{from}");
        assert!(body.contains("\"code\":\"cross_origin\""), "{body}");
        assert!(
            set_cookie(&head, &session).is_none(),
            "no session for {from}"
        );
    }
    // The same post from the service's own page signs in.
    let own =
        format!("Cookie: {cookie}\r\nOrigin: http://{address}\r\nSec-Fetch-Site: same-origin\r\n");
    let request = post("/inbox/sign-in", &address, &own, &sign_in_body(&csrf));
    let (code, head, _) = raw(&address, request).await;
    assert_eq!(code, 303, "{head}");
    assert!(set_cookie(&head, &session).is_some(), "{head}");
}

#[tokio::test]
async fn the_inbox_cookies_are_named_after_the_listener_and_other_names_do_not_sign_in() {
    let story = Story::gate_open().await;
    let address = serve(&story, Site::local).await;
    let port = address.rsplit(':').next().expect("a port").to_owned();
    let (csrf, cookie) = sign_in_form(&address, &format!("loopx_sign_in_{port}")).await;
    let request = post(
        "/inbox/sign-in",
        &address,
        &format!("Cookie: {cookie}\r\n"),
        &sign_in_body(&csrf),
    );
    let (code, head, _) = raw(&address, request).await;
    assert_eq!(code, 303);
    let name = format!("loopx_session_{port}");
    let (id, line) = set_cookie(&head, &name).expect("the session cookie, by the listener's name");
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(line.contains(attribute), "{line}");
    }
    assert!(!line.contains("Secure"), "plain http: {line}");
    let signed_in = |cookie: String| {
        let address = address.clone();
        async move {
            let (_, _, body) = raw(
                &address,
                get("/inbox", &address, &format!("Cookie: {cookie}\r\n")),
            )
            .await;
            body.contains("Signed in as")
        }
    };
    assert!(signed_in(format!("{name}={id}")).await);
    // The id under another listener's name (or the unbound name) is no session here.
    assert!(!signed_in(format!("loopx_session={id}")).await);
    assert!(!signed_in(format!("loopx_session_1={id}")).await);
}

#[tokio::test]
async fn an_https_public_url_makes_the_cookies_secure_and_host_bound() {
    let story = Story::gate_open().await;
    let address = serve(&story, |at| {
        Site::local(at)
            .public_url("https://loopx.example.com")
            .expect("a site")
    })
    .await;
    let port = address.rsplit(':').next().expect("a port").to_owned();
    let (code, head, _) = raw(&address, get("/inbox", "loopx.example.com", "")).await;
    assert_eq!(code, 200);
    let (_, line) = set_cookie(&head, &format!("__Host-loopx_sign_in_{port}")).expect("{head}");
    assert!(
        line.contains("; Secure") && line.contains("Path=/"),
        "{line}"
    );
}

#[tokio::test]
async fn the_inbox_repeats_no_text_a_link_brought() {
    let story = Story::gate_open().await;
    let address = serve(&story, Site::local).await;
    let path = "/inbox?answered=%3Cscript%3Ealert(1)%3C%2Fscript%3E";
    let (code, _, body) = raw(&address, get(path, &address, "")).await;
    assert_eq!(code, 200);
    assert!(
        !body.contains("alert(1)") && !body.contains("script&gt;"),
        "{body}"
    );
    assert!(
        !body.contains("was recorded"),
        "no notice for an unknown gate"
    );
    // A gate the store holds is named.
    let (_, _, body) = raw(
        &address,
        get(&format!("/inbox?answered={GATE}"), &address, ""),
    )
    .await;
    assert!(
        body.contains(&format!("Your answer to gate `{GATE}` was recorded.")),
        "{body}"
    );
}
