//! The throwaway PostgreSQL cluster of the tests: the crate's `test_cluster` module (feature
//! `test-cluster`, which `--all-features` enables), re-exported for the test binaries.

#[cfg(feature = "test-cluster")]
#[allow(unused_imports, reason = "some test binaries use only the fixtures")]
pub use loopx_store::test_cluster::*;

#[cfg(not(feature = "test-cluster"))]
compile_error!(
    "the PostgreSQL tests start their server with feature `test-cluster`: run them with \
     `--features test-cluster` or `--all-features`"
);
