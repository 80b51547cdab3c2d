//! [`PermitId`]: a leased permit's id, as Redisson writes it.

use std::fmt;
use std::str::FromStr;

/// A permit id: 16 random bytes, shown as 32 hex digits (Redisson's
/// `RPermitExpirableSemaphore` ids; stored raw in `{name}:timeout`).
///
/// ```
/// use keylatch_lock::PermitId;
/// let id: PermitId = "00112233445566778899aabbccddeeff".parse().unwrap();
/// assert_eq!(id.to_string(), "00112233445566778899aabbccddeeff");
/// assert!("xyz".parse::<PermitId>().is_err());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PermitId(pub(super) [u8; 16]);

impl PermitId {
    pub(super) fn random() -> Self {
        Self(*uuid::Uuid::new_v4().as_bytes())
    }

    /// The raw 16 bytes, as stored on the server.
    ///
    /// ```
    /// use keylatch_lock::PermitId;
    /// let id: PermitId = "000102030405060708090a0b0c0d0e0f".parse().unwrap();
    /// assert_eq!(id.as_bytes()[15], 15);
    /// ```
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }
}

impl fmt::Display for PermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for PermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PermitId({self})")
    }
}

/// A text that is not 32 hex digits.
///
/// ```
/// assert!("nope".parse::<keylatch_lock::PermitId>().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadPermitId;

impl fmt::Display for BadPermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a permit id is 32 hex digits")
    }
}

impl std::error::Error for BadPermitId {}

impl FromStr for PermitId {
    type Err = BadPermitId;

    fn from_str(s: &str) -> Result<Self, BadPermitId> {
        let b = s.as_bytes();
        if b.len() != 32 {
            return Err(BadPermitId);
        }
        let mut out = [0u8; 16];
        for (i, pair) in b.chunks(2).enumerate() {
            let hex = std::str::from_utf8(pair).map_err(|_| BadPermitId)?;
            out[i] = u8::from_str_radix(hex, 16).map_err(|_| BadPermitId)?;
        }
        Ok(Self(out))
    }
}
