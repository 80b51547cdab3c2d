//! Hash slots: which of the 16384 slots a key belongs to.

/// Number of hash slots in a Redis Cluster.
pub const SLOT_COUNT: u16 = 16384;

/// A hash slot, always below [`SLOT_COUNT`].
///
/// ```
/// use keylatch_cluster::Slot;
/// assert_eq!(Slot::of(b"foo").get(), 12182);
/// assert_eq!(Slot::of(b"{user1000}.following"), Slot::of(b"{user1000}.followers"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Slot(u16);

impl Slot {
    /// The slot of a key: CRC16-XMODEM of its hash tag (or of the whole key
    /// when it has none) modulo 16384.
    ///
    /// ```
    /// use keylatch_cluster::Slot;
    /// assert_eq!(Slot::of(b"foo").get(), 12182);
    /// // Keys with the same hash tag share a slot.
    /// assert_eq!(Slot::of(b"{order:42}:lock"), Slot::of(b"{order:42}:token"));
    /// ```
    pub fn of(key: &[u8]) -> Self {
        let crc = crc16::State::<crc16::XMODEM>::calculate(hash_tag(key));
        Slot(crc % SLOT_COUNT)
    }

    /// A slot from its number, if below 16384.
    ///
    /// ```
    /// assert!(keylatch_cluster::Slot::new(16384).is_none());
    /// ```
    pub fn new(n: u16) -> Option<Self> {
        (n < SLOT_COUNT).then_some(Slot(n))
    }

    /// The slot number.
    ///
    /// ```
    /// use keylatch_cluster::{Slot, SLOT_COUNT};
    /// assert_eq!(Slot::new(42).map(Slot::get), Some(42));
    /// assert!(Slot::of(b"any key").get() < SLOT_COUNT);
    /// ```
    pub fn get(self) -> u16 {
        self.0
    }
}

impl std::fmt::Display for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The part of a key that is hashed: the bytes between the first `{` and the
/// first `}` after it, when that is not empty; otherwise the whole key.
///
/// ```
/// use keylatch_cluster::hash_tag;
/// assert_eq!(hash_tag(b"{user}:lock"), b"user");
/// assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
/// assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
/// ```
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_vectors() {
        assert_eq!(
            crc16::State::<crc16::XMODEM>::calculate(b"123456789"),
            0x31C3
        );
        assert_eq!(Slot::of(b"foo").get(), 12182);
        assert_eq!(Slot::of(b"123456789").get(), 0x31C3); // below 16384 already
        assert_eq!(
            Slot::of(b"{user1000}.following"),
            Slot::of(b"{user1000}.followers")
        );
        // Empty tag: the whole key is hashed.
        assert_eq!(
            Slot::of(b"foo{}{bar}"),
            Slot(crc16::State::<crc16::XMODEM>::calculate(b"foo{}{bar}") % SLOT_COUNT)
        );
        assert_eq!(Slot::of(b"foo{{bar}}zap"), Slot::of(b"{bar"));
        assert_eq!(Slot::of(b"foo{bar}{zap}"), Slot::of(b"bar"));
        assert_eq!(hash_tag(b"no-close{brace"), b"no-close{brace");
        assert_eq!(hash_tag(b""), b"");
    }

    #[test]
    fn slots_stay_in_range() {
        for i in 0..5000u32 {
            let k = format!("key:{i}");
            assert!(Slot::of(k.as_bytes()).get() < SLOT_COUNT);
        }
        assert_eq!(Slot::new(16383).map(Slot::get), Some(16383));
    }
}
