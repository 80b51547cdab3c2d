//! Redis Cluster key slots, computed here rather than asked from a server so
//! the harness can pick keys for a slot before any server runs, and so the
//! client's own slot code is checked against an independent implementation.

/// Number of hash slots in a Redis Cluster.
pub(crate) const SLOTS: u16 = 16384;

/// How many `k{n}` candidates [`keys_for_slot`] tries. Every slot is reached
/// well before this (the sweep test finds all 16384 within ~200k keys); the
/// bound only turns a bug into a panic instead of an endless loop.
const KEY_SEARCH_LIMIT: u64 = 10_000_000;

/// CRC16-XMODEM (polynomial 0x1021, initial value 0, no reflection), the
/// checksum Redis Cluster uses for key slots. Bitwise: the harness hashes a
/// few thousand short keys at most, a table would be noise.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The slot of `key`: only the hash tag is hashed when the key has one
/// (bytes between the first `{` and the first `}` after it, if non-empty).
pub(crate) fn slot_for_key(key: &[u8]) -> u16 {
    let hashed = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            rest.iter()
                .position(|&b| b == b'}')
                .map(|close| &rest[..close])
        })
        .filter(|tag| !tag.is_empty())
        .unwrap_or(key);
    crc16(hashed) % SLOTS
}

/// The `count` first keys `k0`, `k1`, … that hash to `slot`.
///
/// Plain names without hash tags, so a key is also valid for tests that add
/// their own tag around it.
pub(crate) fn keys_for_slot(slot: u16, count: usize) -> Vec<String> {
    assert!(slot < SLOTS, "slot {slot} out of range 0..{SLOTS}");
    let keys: Vec<String> = (0..KEY_SEARCH_LIMIT)
        .map(|n| format!("k{n}"))
        .filter(|key| slot_for_key(key.as_bytes()) == slot)
        .take(count)
        .collect();
    assert!(
        keys.len() == count,
        "only {} of {count} keys for slot {slot} among the first {KEY_SEARCH_LIMIT} candidates",
        keys.len()
    );
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_xmodem_check_value() {
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(crc16(b""), 0);
    }

    #[test]
    fn slots_match_redis() {
        // Values from the Redis Cluster spec and `CLUSTER KEYSLOT`.
        assert_eq!(slot_for_key(b"foo"), 12182);
        assert_eq!(slot_for_key(b"123456789"), 0x31C3 % SLOTS);
        assert_eq!(
            slot_for_key(b"{user1000}.following"),
            slot_for_key(b"{user1000}.followers")
        );
        assert_eq!(
            slot_for_key(b"{user1000}.following"),
            slot_for_key(b"user1000")
        );
    }

    #[test]
    fn hash_tag_edge_cases() {
        // Empty tag: the whole key is hashed.
        assert_eq!(slot_for_key(b"{}foo"), crc16(b"{}foo") % SLOTS);
        // Only the first `{` counts, and the first `}` after it.
        assert_eq!(slot_for_key(b"foo{bar}{zap}"), slot_for_key(b"bar"));
        assert_eq!(slot_for_key(b"foo{{bar}}zap"), slot_for_key(b"{bar"));
        // No closing brace: the whole key.
        assert_eq!(slot_for_key(b"foo{bar"), crc16(b"foo{bar") % SLOTS);
    }

    #[test]
    fn keys_for_slot_hash_there() {
        for slot in [0, 1, 5460, 5461, 12182, SLOTS - 1] {
            let keys = keys_for_slot(slot, 3);
            assert_eq!(keys.len(), 3);
            for key in &keys {
                assert_eq!(slot_for_key(key.as_bytes()), slot, "{key}");
            }
        }
    }

    #[test]
    fn every_slot_has_a_key_within_the_limit() {
        let mut seen = vec![false; usize::from(SLOTS)];
        let mut missing = seen.len();
        let mut n = 0u64;
        while missing > 0 {
            assert!(n < KEY_SEARCH_LIMIT, "{missing} slots unreachable");
            let slot = usize::from(slot_for_key(format!("k{n}").as_bytes()));
            if !seen[slot] {
                seen[slot] = true;
                missing -= 1;
            }
            n += 1;
        }
    }
}
