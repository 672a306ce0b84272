//! Who a person is at a provider: the logins the goal's owner maps to people, and what a
//! provider carries when it relays a person's answer from there.
//!
//! A provider (the service receiving GitHub's deliveries, say) proves only that a delivery came
//! from GitHub and which login wrote it. Whether that login speaks for a person of the goal is
//! the owner's word, recorded as an amendment ([`Amendment::MapLogin`](crate::Amendment)): the
//! kernel accepts a relayed answer to a gate only when the login it names is mapped to the
//! gate's owner under the relaying provider.

use serde::{Deserialize, Serialize};

/// Longest accepted login, in bytes (GitHub's own limit is 39).
pub const MAX_LOGIN: usize = 100;

/// Checks that `login` reads as a provider login: a letter or digit first, then letters,
/// digits, `-`, `_`, `.`, or a `[bot]`-style suffix's brackets, at most [`MAX_LOGIN`] bytes.
/// Logins compare case-insensitively (GitHub's do), so the kernel keys them in lower case.
///
/// # Errors
/// What is wrong with it, in words.
pub fn check_login(login: &str) -> Result<(), String> {
    let Some(first) = login.chars().next() else {
        return Err("a login must not be empty".into());
    };
    if login.len() > MAX_LOGIN {
        return Err(format!("a login is at most {MAX_LOGIN} bytes"));
    }
    if !first.is_ascii_alphanumeric() {
        return Err("a login starts with a letter or a digit".into());
    }
    if let Some(bad) = login
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '[' | ']')))
    {
        return Err(format!(
            "a login holds letters, digits, `-`, `_`, `.`, `[` and `]` only, not {bad:?}"
        ));
    }
    Ok(())
}

/// The form a login is kept and compared in.
pub(crate) fn login_key(login: &str) -> String {
    login.to_ascii_lowercase()
}

/// Where a relayed answer came from: the login that wrote it at the relaying provider (the
/// command's actor) and the provider's own references to the message, recorded with the
/// answer so that the log shows who answered, where.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Relay {
    /// The login that wrote the answer, as the provider authenticated it.
    pub login: String,
    /// The provider's id of the delivery that carried it (GitHub's `X-GitHub-Delivery`).
    pub delivery: String,
    /// The provider's id of the message itself (a comment's or a review's id), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::check_login;

    #[test]
    fn logins_read_as_providers_write_them() {
        for good in ["maria-gh", "M4ria", "dependabot[bot]", "a.b_c"] {
            assert_eq!(check_login(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "-maria",
            "maria gh",
            "maria\n",
            "@maria",
            &"a".repeat(101),
        ] {
            assert!(check_login(bad).is_err(), "{bad:?}");
        }
    }
}
