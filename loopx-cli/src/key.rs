//! The acting actor's signing key: the file `--key-file` (or `LOOPX_KEY`) names holds an ed25519
//! seed as 64 hexadecimal digits (the kernel's [`SecretKey`] seed; surrounding whitespace is
//! ignored). With it every write is signed as the acting actor, and `loopx verdict` signs the
//! verdict it prints. The key is read only when a verb needs it, and never printed: an error
//! names the file, not its content.
//!
//! Where the key lives decides what a signature proves: a validator's key belongs where the
//! agent cannot read it (CI's secrets, another OS user), or the agent can sign as it.

use std::path::Path;

use loopx_kernel::SecretKey;

use crate::context::read_bytes;
use crate::error::CliError;

/// Reads the secret key in `path`.
///
/// # Errors
/// `key_invalid` (exit 7) when the file is unreadable or is not 64 hexadecimal digits.
pub fn read_key(path: &Path) -> Result<SecretKey, CliError> {
    let invalid = || {
        CliError::input(
            "key_invalid",
            format!(
                "`{}` is not a loopx key file (an ed25519 seed as 64 hexadecimal digits)",
                path.display()
            ),
            "pass the key file of the acting actor with --key-file FILE (or LOOPX_KEY)",
        )
    };
    let bytes = read_bytes(path).map_err(|_| invalid())?;
    let text = std::str::from_utf8(&bytes).map_err(|_| invalid())?.trim();
    if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(invalid());
    }
    let mut seed = [0u8; 32];
    for (byte, pair) in seed.iter_mut().zip(text.as_bytes().chunks_exact(2)) {
        let pair = std::str::from_utf8(pair).map_err(|_| invalid())?;
        *byte = u8::from_str_radix(pair, 16).map_err(|_| invalid())?;
    }
    Ok(SecretKey::from_seed(seed))
}
