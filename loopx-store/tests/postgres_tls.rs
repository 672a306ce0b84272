//! TLS to PostgreSQL as libpq users configure it: a server whose certificate the test makes,
//! which accepts TLS connections only, and the `sslmode`s that must connect or refuse.
#![cfg(feature = "postgres")]

mod support;

use std::path::Path;

use loopx_kernel::seams::{Store, StoreError};
use loopx_store::PostgresStore;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use support::postgres::Cluster;
use support::{create_goal, goal_id};

/// A root and a server certificate it signed, issued for `localhost` only.
struct Pki {
    root_pem: String,
    server_pem: String,
    server_key: String,
}

fn make_pki(names: &[&str]) -> Pki {
    let root_key = KeyPair::generate().expect("a key");
    let mut root = CertificateParams::new(Vec::<String>::new()).expect("root params");
    root.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let root_cert = root.self_signed(&root_key).expect("the root");
    let issuer = Issuer::new(root, root_key);
    let server_key = KeyPair::generate().expect("a key");
    let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    let server = CertificateParams::new(names)
        .expect("server params")
        .signed_by(&server_key, &issuer)
        .expect("the server certificate");
    Pki {
        root_pem: root_cert.pem(),
        server_pem: server.pem(),
        server_key: server_key.serialize_pem(),
    }
}

fn write(dir: &Path, name: &str, pem: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, pem).expect("a PEM file");
    path.display().to_string()
}

/// `url` with `host` for its host and `query` appended.
fn at(url: &str, host: &str, query: &str) -> String {
    format!("{}?{query}", url.replacen("127.0.0.1", host, 1))
}

async fn refusal(url: &str) -> String {
    match PostgresStore::connect(url).await {
        Ok(_) => panic!("{url} connected"),
        Err(StoreError::Unavailable { detail }) => detail,
        Err(other) => panic!("{url}: not unavailable: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_speaks_tls_as_sslmode_says() {
    let pki = make_pki(&["localhost"]);
    let stranger = make_pki(&["localhost"]);
    let dir = tempfile::tempdir().expect("a directory");
    let root = write(dir.path(), "root.pem", &pki.root_pem);
    let wrong_root = write(dir.path(), "other-root.pem", &stranger.root_pem);
    let cluster = Cluster::builder()
        .tls(&pki.server_pem, &pki.server_key)
        .start()
        .expect("a TLS cluster");
    let url = cluster.create_database("tls").expect("a database");

    // Checked all the way: the chain and the name.
    let full = at(
        &url,
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={root}"),
    );
    let store = PostgresStore::connect(&full)
        .await
        .expect("verify-full connects");
    assert_eq!(create_goal(&store).await.state.revision, 1);
    assert_eq!(
        store
            .load(&goal_id())
            .await
            .expect("a load")
            .map(|s| s.revision),
        Some(1)
    );

    // The server accepts TLS only, so a client that will not speak it is turned away.
    let plain = refusal(&at(&url, "127.0.0.1", "sslmode=disable")).await;
    assert!(
        plain.contains("pg_hba.conf") || plain.contains("no encryption"),
        "{plain}"
    );

    // The certificate is for `localhost`, not for the address: verify-full refuses it there,
    // verify-ca (the chain only) and require (encrypted, unchecked) connect.
    let by_address = format!("sslrootcert={root}");
    let name = refusal(&at(
        &url,
        "127.0.0.1",
        &format!("sslmode=verify-full&{by_address}"),
    ))
    .await;
    assert!(name.contains("certificate"), "{name}");
    PostgresStore::connect(&at(
        &url,
        "127.0.0.1",
        &format!("sslmode=verify-ca&{by_address}"),
    ))
    .await
    .expect("verify-ca connects");
    PostgresStore::connect(&at(&url, "127.0.0.1", "sslmode=require"))
        .await
        .expect("require connects");

    // Another root signed none of it.
    let stranger_root = format!("sslmode=verify-ca&sslrootcert={wrong_root}");
    let chain = refusal(&at(&url, "localhost", &stranger_root)).await;
    assert!(chain.contains("certificate"), "{chain}");

    // Verification without any root is refused before connecting, saying what to set.
    let missing = refusal(&at(
        &url,
        "localhost",
        "sslmode=verify-full&sslrootcert=/nonexistent/root.pem",
    ))
    .await;
    assert!(missing.contains("/nonexistent/root.pem"), "{missing}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_tls_is_refused_when_tls_is_required_and_used_plain_when_preferred() {
    let cluster = Cluster::start().expect("a cluster");
    let url = cluster.create_database("plain").expect("a database");
    let required = refusal(&at(&url, "127.0.0.1", "sslmode=require")).await;
    assert!(
        required.to_lowercase().contains("tls") || required.contains("SSL"),
        "{required}"
    );
    PostgresStore::connect(&url)
        .await
        .expect("prefer, libpq's default, falls back to plain");
}
