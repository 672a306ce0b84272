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

/// The fewest characters a bearer token may have: 32 hexadecimal digits are 128 bits, and a
/// token is as good as the guesses it takes. Make one with `openssl rand -hex 32`.
pub const MIN_TOKEN_CHARS: usize = 32;

/// Why a token was not registered. Names actors, never a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// The token is shorter than [`MIN_TOKEN_CHARS`].
    #[error(
        "the token of {actor} is too short: a token needs at least {MIN_TOKEN_CHARS} characters (e.g. `openssl rand -hex 32`)"
    )]
    TooShort {
        /// Whose token it is.
        actor: Actor,
    },
    /// Two actors were given one token, which would act for the first only.
    #[error("{first} and {second} were given the same token; give each actor a token of its own")]
    Shared {
        /// The actor it was registered for first.
        first: Actor,
        /// The actor it was given to again.
        second: Actor,
    },
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

    /// The same, with `token` acting as `acting`. Surrounding whitespace is not part of a token
    /// (a presented one is read without it).
    ///
    /// # Errors
    /// [`TokenError::TooShort`] below [`MIN_TOKEN_CHARS`] characters; [`TokenError::Shared`]
    /// when another actor already has the token.
    pub fn with(mut self, token: &str, acting: Acting) -> Result<Self, TokenError> {
        let token = token.trim();
        if token.chars().count() < MIN_TOKEN_CHARS {
            return Err(TokenError::TooShort {
                actor: acting.actor.clone(),
            });
        }
        let digest = digest(token);
        match self.entries.iter().find(|(known, _)| *known == digest) {
            Some((_, first)) if first.actor == acting.actor => {}
            Some((_, first)) => {
                return Err(TokenError::Shared {
                    first: first.actor.clone(),
                    second: acting.actor,
                });
            }
            None => self.entries.push((digest, acting)),
        }
        Ok(self)
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

#[cfg(test)]
mod tests {
    use super::*;
    use loopx_kernel::{AgentId, PersonId};

    const STRONG: &str = "4f3c2b1a0918273645546372819aabbccddeeff00112233445566778899aabbcc";

    fn agent(name: &str) -> Acting {
        Acting::unsigned(Actor::Agent(AgentId::new(name).expect("an agent id")))
    }

    #[test]
    fn a_short_token_and_one_token_for_two_actors_are_refused_naming_actors_only() {
        let short = Tokens::new().with("hunter2", agent("agent-a")).map(|_| ());
        assert_eq!(
            short,
            Err(TokenError::TooShort {
                actor: agent("agent-a").actor
            })
        );
        let maria = Acting::unsigned(Actor::Person(PersonId::new("maria").expect("an id")));
        let shared = Tokens::new()
            .with(STRONG, maria)
            .and_then(|t| t.with(&format!(" {STRONG}\n"), agent("agent-a")))
            .map(|_| ());
        let Err(error) = shared else {
            panic!("one token for two actors is refused");
        };
        let words = error.to_string();
        assert!(
            words.contains("person:maria") && words.contains("agent:agent-a"),
            "{words}"
        );
        assert!(!words.contains(STRONG), "{words}");
    }

    #[test]
    fn a_token_registered_with_surrounding_whitespace_is_found_as_presented() {
        let tokens = Tokens::new()
            .with(&format!("{STRONG}\n"), agent("agent-a"))
            .expect("registered");
        assert!(tokens.find(STRONG).is_some());
        assert!(tokens.find(&STRONG[1..]).is_none());
        assert!(!format!("{tokens:?}").contains(STRONG));
    }
}
