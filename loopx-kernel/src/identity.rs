//! Who issued a command, proven rather than declared.
//!
//! A goal is **signed** by default: every command reaches it with an ed25519 signature by its
//! actor over the goal, the operation id and the command's [digest](crate::write::digest), and
//! the write path verifies it against the keys the goal's owner registered for that actor
//! before any other check. A goal created with `identity: declared` takes every actor at its
//! word, for local experiments only; `status` says so. A goal recorded before signing existed
//! (a signed spec with no key at all) reads as [`IdentityMode::Unsigned`] and is treated as
//! declared.
//!
//! A settlement's verdict is signed too, by its validator ([`verdict_message`],
//! [`verify_verdict`]): on a signed goal the kernel accepts a verdict only under a key the goal
//! registers for that validator, and evidence counts for a criterion only from the validators
//! the owner registered for its check ([`GoalSpec::validators`], [`may_establish`]). An agent
//! can carry the verdict its validator produced; it cannot make one. The independence is only
//! as real as the validator key's home: it must live where the agent cannot read it (CI's
//! secrets, another OS user, another machine); a host that runs the validator in the agent's
//! own process holds both keys and proves only that the host signed.
//!
//! Verification and signing with a given key are pure computation and live here; generating
//! keys and keeping them in files do not (the provider crate's `keys` module does both).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::actor::Actor;
use crate::command::{Command, Settlement, Verdict, VerdictOutcome};
use crate::evidence::NewEvidence;
use crate::goal::GoalSpec;
use crate::ids::{CheckId, GoalId, OperationId, TodoId, TurnId, sha256_hex};
use crate::refusal::Refusal;
use crate::write::canonical_json;

/// How a goal knows who issued a command.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Identity {
    /// Every command carries its actor's signature by a key registered with the goal.
    #[default]
    Signed,
    /// Every actor is taken at its word: for local experiments, never for independent
    /// validation.
    Declared,
}

impl Identity {
    pub(crate) fn is_signed(self) -> bool {
        matches!(self, Identity::Signed)
    }
}

/// How a goal's identity works out in effect, as `status` states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IdentityMode {
    /// Signatures are required and verified.
    Signed,
    /// The goal declared that actors are taken at their word.
    Declared,
    /// The goal was recorded before commands were signed (no key was ever registered): actors
    /// are taken at their word, as under `declared`.
    Unsigned,
}

impl GoalSpec {
    /// Whether commands to this goal must be signed.
    pub fn identity_mode(&self) -> IdentityMode {
        match self.identity {
            Identity::Declared => IdentityMode::Declared,
            Identity::Signed if self.keys.is_empty() => IdentityMode::Unsigned,
            Identity::Signed => IdentityMode::Signed,
        }
    }

    /// The keys registered for `actor`, in registration order.
    pub fn keys_of<'a>(&'a self, actor: &'a Actor) -> impl Iterator<Item = &'a PublicKey> + 'a {
        self.keys
            .iter()
            .filter(move |k| &k.actor == actor)
            .map(|k| &k.key)
    }
}

/// An actor's public key, registered with a goal by its owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisteredKey {
    /// Whose key it is.
    pub actor: Actor,
    /// The key.
    pub key: PublicKey,
}

/// An ed25519 public key; on the wire `ed25519:` and 64 lowercase hexadecimal digits. Its curve
/// point is decompressed once, when the key is made or read, so that a verification under it
/// costs the verification alone. Keys compare, order and hash by their bytes.
#[derive(Clone, Copy)]
pub struct PublicKey {
    bytes: [u8; 32],
    /// `None` for bytes that are no curve point: such a key verifies nothing.
    point: Option<ed25519_dalek::VerifyingKey>,
}

impl PartialEq for PublicKey {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for PublicKey {}

impl PartialOrd for PublicKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for PublicKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.bytes.cmp(&other.bytes)
    }
}

impl std::hash::Hash for PublicKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.bytes.hash(state);
    }
}

/// An ed25519 signature; on the wire 128 lowercase hexadecimal digits.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Signature([u8; 64]);

/// Why a key or signature text was not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} must be {shape}")]
pub struct InvalidKey {
    what: &'static str,
    shape: &'static str,
}

const KEY_PREFIX: &str = "ed25519:";

impl PublicKey {
    /// The key from its 32 bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> PublicKey {
        PublicKey {
            bytes,
            point: ed25519_dalek::VerifyingKey::from_bytes(&bytes).ok(),
        }
    }

    /// Its 32 bytes.
    pub fn to_bytes(&self) -> [u8; 32] {
        self.bytes
    }

    /// Reads `ed25519:<64 hex digits>`.
    ///
    /// # Errors
    /// [`InvalidKey`] for any other text.
    pub fn parse(text: &str) -> Result<PublicKey, InvalidKey> {
        let invalid = InvalidKey {
            what: "a public key",
            shape: "`ed25519:` and 64 hexadecimal digits",
        };
        let hex = text.strip_prefix(KEY_PREFIX).ok_or(invalid.clone())?;
        unhex(hex).map(PublicKey::from_bytes).ok_or(invalid)
    }

    /// Whether `signature` is this key's signature of `message` (strict verification: no
    /// malleable or small-order forms).
    pub fn verifies(&self, message: &[u8], signature: &Signature) -> bool {
        let Some(key) = &self.point else {
            return false;
        };
        let signature = ed25519_dalek::Signature::from_bytes(&signature.0);
        key.verify_strict(message, &signature).is_ok()
    }
}

impl Signature {
    /// The signature from its 64 bytes.
    pub fn from_bytes(bytes: [u8; 64]) -> Signature {
        Signature(bytes)
    }

    /// Its 64 bytes.
    pub fn to_bytes(&self) -> [u8; 64] {
        self.0
    }

    /// Reads 128 hexadecimal digits.
    ///
    /// # Errors
    /// [`InvalidKey`] for any other text.
    pub fn parse(text: &str) -> Result<Signature, InvalidKey> {
        unhex(text).map(Signature).ok_or(InvalidKey {
            what: "a signature",
            shape: "128 hexadecimal digits",
        })
    }
}

fn unhex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let digits = text.as_bytes();
    if digits.len() != 2 * N {
        return None;
    }
    let value = |d: u8| match d {
        b'0'..=b'9' => Some(d - b'0'),
        b'a'..=b'f' => Some(d - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        *byte = value(pair[0])? << 4 | value(pair[1])?;
    }
    Some(out)
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{KEY_PREFIX}{}", crate::ids::hex(&self.bytes))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::ids::hex(&self.0))
    }
}

impl fmt::Debug for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Serialize for PublicKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PublicKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(deserializer)?;
        PublicKey::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl Serialize for Signature {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Signature {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(deserializer)?;
        Signature::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Something that signs as one actor: a key held in memory ([`SecretKey`]), or a host's own
/// signer (an agent, a hardware token). Signing never fails; a signer that cannot sign is not
/// a signer.
pub trait Signer: Send + Sync {
    /// The public key its signatures verify under.
    fn public_key(&self) -> PublicKey;
    /// Its signature of `message`.
    fn sign(&self, message: &[u8]) -> Signature;
}

/// An ed25519 secret key held in memory. Its `Debug` shows only the public key, and its bytes
/// are wiped when it is dropped; it is never serialized.
#[derive(Clone)]
pub struct SecretKey(ed25519_dalek::SigningKey);

impl SecretKey {
    /// The key from its 32-byte seed (where the seed comes from — a key file, a secret store,
    /// a test's fixed bytes — is the caller's business; the kernel generates no keys).
    pub fn from_seed(seed: [u8; 32]) -> SecretKey {
        SecretKey(ed25519_dalek::SigningKey::from_bytes(&seed))
    }

    /// Its 32-byte seed, for writing it to a key file.
    pub fn seed(&self) -> [u8; 32] {
        self.0.to_bytes()
    }
}

impl Signer for SecretKey {
    fn public_key(&self) -> PublicKey {
        let point = self.0.verifying_key();
        PublicKey {
            bytes: point.to_bytes(),
            point: Some(point),
        }
    }

    fn sign(&self, message: &[u8]) -> Signature {
        use ed25519_dalek::Signer as _;
        Signature(self.0.sign(message).to_bytes())
    }
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretKey({})", self.public_key())
    }
}

/// The signers a host holds, by the actor each signs as: what the engine signs its agent's,
/// its capabilities', its providers' and its validator's commands with.
#[derive(Clone, Default)]
pub struct Keyring {
    signers: BTreeMap<Actor, Arc<dyn Signer>>,
}

impl Keyring {
    /// An empty keyring: commands go unsigned (accepted by declared goals only).
    pub fn new() -> Keyring {
        Keyring::default()
    }

    /// The keyring with `signer` signing as `actor` (replacing any signer it had).
    #[must_use]
    pub fn with(mut self, actor: Actor, signer: Arc<dyn Signer>) -> Keyring {
        self.signers.insert(actor, signer);
        self
    }

    /// The signer of `actor`, if the keyring has one.
    pub fn signer(&self, actor: &Actor) -> Option<&dyn Signer> {
        self.signers.get(actor).map(|s| &**s)
    }

    /// The actors it signs as.
    pub fn actors(&self) -> impl Iterator<Item = &Actor> {
        self.signers.keys()
    }
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.signers.iter().map(|(a, s)| (a, s.public_key())))
            .finish()
    }
}

/// The bytes an actor signs to issue a command: `loopx.command.v1`, the goal, the operation id
/// and the command's digest (which covers the actor and the command), each on its own line.
/// Binding the goal and the operation means a signature replayed on another goal or under
/// another operation id verifies nowhere else.
pub fn command_message(goal: &GoalId, operation: &OperationId, digest: &str) -> Vec<u8> {
    format!("loopx.command.v1\n{goal}\n{operation}\n{digest}").into_bytes()
}

/// Checks that `actor` issued `command` to `goal` under `operation`: on a signed goal,
/// `signature` must verify over [`command_message`] under one of the keys the goal registers
/// for `actor`. `state_spec` is the goal's spec as loaded (none for a goal that does not exist
/// yet); a `create_goal` is checked against the keys its own spec registers, so only the
/// holder of the owner's key creates a signed goal. Declared and unsigned goals accept every
/// actor at its word.
///
/// # Errors
/// [`Refusal::SignatureMissing`], [`Refusal::KeyUnregistered`] or
/// [`Refusal::SignatureInvalid`]; nothing else is checked first.
pub fn authenticate(
    state_spec: Option<&GoalSpec>,
    goal: &GoalId,
    actor: &Actor,
    command: &Command,
    operation: &OperationId,
    digest: &str,
    signature: Option<&Signature>,
) -> Result<(), Refusal> {
    let spec = match (state_spec, command) {
        (Some(spec), _) => spec,
        (None, Command::CreateGoal { spec }) => {
            if spec.identity.is_signed() && spec.keys_of(actor).next().is_none() {
                return Err(Refusal::KeyUnregistered {
                    actor: actor.clone(),
                });
            }
            spec
        }
        // Nothing to check against: the kernel refuses the command on an unknown goal.
        (None, _) => return Ok(()),
    };
    if spec.identity_mode() != IdentityMode::Signed {
        return Ok(());
    }
    let Some(signature) = signature else {
        return Err(Refusal::SignatureMissing {
            actor: actor.clone(),
        });
    };
    let mut keys = spec.keys_of(actor).peekable();
    if keys.peek().is_none() {
        return Err(Refusal::KeyUnregistered {
            actor: actor.clone(),
        });
    }
    let message = command_message(goal, operation, digest);
    if keys.any(|key| key.verifies(&message, signature)) {
        Ok(())
    } else {
        Err(Refusal::SignatureInvalid {
            actor: actor.clone(),
        })
    }
}

/// The bytes a validator signs to give a verdict: `loopx.verdict.v1`, the goal, the todo, the
/// turn, the lease epoch, the validator, the outcome, the SHA-256 of the summary and the
/// SHA-256 of each piece of evidence's canonical JSON, in the settlement's order, each on its
/// own line. A verdict so signed is bound to one turn under one lease and to exactly the
/// evidence it vouches for: an agent can carry it into its settlement but cannot change what it
/// says, move it to another turn, or make one.
pub fn verdict_message(
    goal: &GoalId,
    todo: &TodoId,
    turn: &TurnId,
    epoch: u64,
    verdict: &Verdict,
    evidence: &[NewEvidence],
) -> Vec<u8> {
    let outcome = match verdict.outcome {
        VerdictOutcome::Passed => "passed",
        VerdictOutcome::Progress => "progress",
        VerdictOutcome::Failed => "failed",
    };
    let mut text = format!(
        "loopx.verdict.v1\n{goal}\n{todo}\n{turn}\n{epoch}\n{}\n{outcome}\n{}",
        verdict.validator,
        sha256_hex(verdict.summary.as_bytes())
    );
    for piece in evidence {
        text.push('\n');
        text.push_str(&sha256_hex(canonical_json(piece).as_bytes()));
    }
    text.into_bytes()
}

/// `verdict` with its validator's signature over [`verdict_message`], for the settlement of
/// `turn` of `todo` under `epoch` carrying `evidence`: what a validator (or the host that runs
/// it, holding its key) hands the agent.
pub fn sign_verdict(
    signer: &dyn Signer,
    goal: &GoalId,
    todo: &TodoId,
    turn: &TurnId,
    epoch: u64,
    mut verdict: Verdict,
    evidence: &[NewEvidence],
) -> Verdict {
    verdict.signature = None;
    let message = verdict_message(goal, todo, turn, epoch, &verdict, evidence);
    verdict.signature = Some(signer.sign(&message));
    verdict
}

/// Whether `actor` may establish evidence of `check` on a goal with `spec`: on a signed goal
/// whose owner registered validators for the check, only those; on a signed goal that names
/// none for it, and on every declared or unsigned goal, anyone who may record evidence at all
/// (on a signed goal that is still only an actor whose key the goal registers, since every
/// command and every verdict is signed).
pub fn may_establish(spec: &GoalSpec, check: &CheckId, actor: &Actor) -> bool {
    spec.identity_mode() != IdentityMode::Signed
        || spec
            .validators
            .get(check)
            .is_none_or(|registered| registered.contains(actor))
}

/// Checks a settlement's verdict on a goal with `spec`: on a signed goal it must carry its
/// validator's signature over [`verdict_message`], by a key the goal registers for that
/// validator, and the validator must be registered for the check of every piece of evidence
/// it vouches for. `agents` are the agents that could have made the verdict themselves (the
/// lease holder, the settling actor). Declared and unsigned goals take the verdict at its
/// word, as they take every actor.
///
/// # Errors
/// [`Refusal::VerdictUnsigned`], [`Refusal::VerdictSelfSigned`],
/// [`Refusal::ValidatorUnregistered`], [`Refusal::ValidatorNotRegisteredForCheck`] or
/// [`Refusal::VerdictSignatureInvalid`], in that order.
pub fn verify_verdict(
    spec: &GoalSpec,
    settlement: &Settlement,
    agents: &[&Actor],
) -> Result<(), Refusal> {
    if spec.identity_mode() != IdentityMode::Signed {
        return Ok(());
    }
    let verdict = &settlement.verdict;
    let validator = &verdict.validator;
    let Some(signature) = &verdict.signature else {
        return Err(Refusal::VerdictUnsigned {
            validator: validator.clone(),
        });
    };
    let message = verdict_message(
        &spec.id,
        &settlement.todo,
        &settlement.turn,
        settlement.epoch,
        verdict,
        &settlement.evidence,
    );
    // The common case first, with one verification: a signature by a key of the validator's
    // that no agent holds cannot be an agent's own (a strict ed25519 signature verifies under
    // one key), so only the registration per check remains to be checked.
    let agent_keys = || {
        agents
            .iter()
            .filter(|a| *a != &validator)
            .flat_map(|agent| spec.keys_of(agent))
    };
    if spec
        .keys_of(validator)
        .filter(|key| agent_keys().all(|agent_key| agent_key != *key))
        .any(|key| key.verifies(&message, signature))
    {
        return registered_for_checks(spec, settlement, validator);
    }
    // An agent's own key over the verdict: it made the verdict it carries.
    for agent in agents.iter().filter(|a| *a != &validator) {
        if spec
            .keys_of(agent)
            .any(|key| key.verifies(&message, signature))
        {
            return Err(Refusal::VerdictSelfSigned {
                validator: validator.clone(),
                agent: (*agent).clone(),
            });
        }
    }
    let mut keys = spec.keys_of(validator).peekable();
    if keys.peek().is_none() {
        return Err(Refusal::ValidatorUnregistered {
            validator: validator.clone(),
        });
    }
    registered_for_checks(spec, settlement, validator)?;
    if keys.any(|key| key.verifies(&message, signature)) {
        Ok(())
    } else {
        Err(Refusal::VerdictSignatureInvalid {
            validator: validator.clone(),
        })
    }
}

/// Whether `validator` may establish every piece of evidence `settlement` carries.
fn registered_for_checks(
    spec: &GoalSpec,
    settlement: &Settlement,
    validator: &Actor,
) -> Result<(), Refusal> {
    match settlement
        .evidence
        .iter()
        .find(|e| !may_establish(spec, &e.check, validator))
    {
        Some(evidence) => Err(Refusal::ValidatorNotRegisteredForCheck {
            validator: validator.clone(),
            check: evidence.check.clone(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> SecretKey {
        SecretKey::from_seed([n; 32])
    }

    #[test]
    fn keys_and_signatures_round_trip_their_text() {
        let secret = key(7);
        let public = secret.public_key();
        let text = public.to_string();
        assert!(
            text.starts_with("ed25519:") && text.len() == 8 + 64,
            "{text}"
        );
        assert_eq!(PublicKey::parse(&text), Ok(public));
        let signature = secret.sign(b"message");
        assert_eq!(Signature::parse(&signature.to_string()), Ok(signature));
        assert!(PublicKey::parse("ed25519:00").is_err());
        assert!(PublicKey::parse(&text.to_uppercase()).is_err());
        assert!(Signature::parse("zz").is_err());
        assert!(format!("{secret:?}").contains(&text));
    }

    #[test]
    fn a_signature_verifies_only_its_message_under_its_key() {
        let signature = key(1).sign(b"message");
        assert!(key(1).public_key().verifies(b"message", &signature));
        assert!(!key(1).public_key().verifies(b"messagf", &signature));
        assert!(!key(2).public_key().verifies(b"message", &signature));
        let mut bytes = signature.to_bytes();
        bytes[0] ^= 1;
        assert!(
            !key(1)
                .public_key()
                .verifies(b"message", &Signature::from_bytes(bytes))
        );
        // Not a point on the curve: never a panic, never valid.
        assert!(!PublicKey::from_bytes([0xff; 32]).verifies(b"message", &signature));
    }
}
