//! Who a request acts for. Every command is signed (the trust model): a server instance over
//! stdio acts for one actor with its key; over streamable HTTP each request presents a bearer
//! token, mapped to one actor and its key. Tokens are kept as SHA-256 digests, compared in
//! constant time, and never logged, printed or stored.

use std::fmt;
use std::sync::Arc;

use loopx_kernel::{Actor, Signer};
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

/// The actor a request acts for and the key its commands are signed with.
#[derive(Clone)]
pub struct Acting {
    actor: Actor,
    signer: Option<Arc<dyn Signer>>,
}

impl Acting {
    /// `actor`, signing with `signer` (its key registered with the goals it writes).
    pub fn signed(actor: Actor, signer: Arc<dyn Signer>) -> Self {
        Acting {
            actor,
            signer: Some(signer),
        }
    }

    /// `actor` without a key: its commands go unsigned, which only a goal of declared
    /// identity accepts (a signed goal refuses them with `signature_missing`).
    pub fn unsigned(actor: Actor) -> Self {
        Acting {
            actor,
            signer: None,
        }
    }

    /// The actor.
    pub fn actor(&self) -> &Actor {
        &self.actor
    }

    /// The key its commands are signed with, if any.
    pub fn signer(&self) -> Option<&dyn Signer> {
        self.signer.as_deref()
    }
}

impl fmt::Debug for Acting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The key is never shown; its public half is enough to tell keys apart.
        f.debug_struct("Acting")
            .field("actor", &self.actor)
            .field("key", &self.signer.as_ref().map(|s| s.public_key()))
            .finish()
    }
}

/// The bearer tokens of the HTTP transport, each mapped to the actor it acts for.
#[derive(Clone, Default)]
pub struct Tokens {
    entries: Vec<([u8; 32], Acting)>,
}

impl Tokens {
    /// No tokens: every request is refused.
    pub fn new() -> Self {
        Tokens::default()
    }

    /// The same, with `token` acting as `acting`. A token given twice keeps its first actor.
    #[must_use]
    pub fn with(mut self, token: &str, acting: Acting) -> Self {
        self.entries.push((digest(token), acting));
        self
    }

    /// The actor `presented` acts for, or `None` for an unknown token. Every registered token
    /// is compared, each in constant time, so the answer's timing tells nothing about which
    /// token matched or how much of one did.
    pub fn find(&self, presented: &str) -> Option<&Acting> {
        let presented = digest(presented);
        let mut found = None;
        for (known, acting) in &self.entries {
            let equal: bool = known.ct_eq(&presented).into();
            if equal && found.is_none() {
                found = Some(acting);
            }
        }
        found
    }

    /// How many tokens are registered.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when none is.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the tokens, not even their digests: only whom they act for.
        f.debug_list()
            .entries(self.entries.iter().map(|(_, acting)| acting.actor()))
            .finish()
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}
