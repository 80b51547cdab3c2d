//! What an election's keys show: who leads (the hash's one owner), with
//! the proclamation's token and value when it is that owner's, of the
//! latest term; and the other reads' verdicts.

use keylatch_resp::Frame;

/// Who leads an election, as its proclamation says.
///
/// ```
/// let who = keylatch_lock::LeaderInfo::default();
/// assert!(who.owner.is_empty() && who.value.is_none());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaderInfo {
    /// The leader's owner id (the lock hash's holder).
    pub owner: String,
    /// Its fencing token, once proclaimed.
    pub token: Option<u64>,
    /// What it proclaimed (its address, say); `None` in the moment between
    /// its election and its proclamation.
    pub value: Option<String>,
}

/// Whether a read failed because its key holds another type (only
/// WRONGTYPE: a refused command or a dropped connection is no reused name).
pub(super) fn is_wrong_type(e: &keylatch_cluster::Error) -> bool {
    e.as_server_error().is_some_and(|s| s.code() == "WRONGTYPE")
}

/// Whether an election's hash is a read-write lock's (a `mode` field).
pub(super) fn has_mode(hash: &Frame) -> bool {
    match hash.value() {
        Frame::Array(items) => items.chunks(2).any(|kv| {
            kv.first()
                .and_then(Frame::as_bytes)
                .is_some_and(|k| k[..] == b"mode"[..])
        }),
        Frame::Map(pairs) => pairs
            .iter()
            .any(|(k, _)| k.as_bytes().is_some_and(|k| k[..] == b"mode"[..])),
        _ => false,
    }
}

/// The leader an election's hash and proclamation show: the hash's one
/// owner (no leader when it has none, or holds some other lock), with the
/// proclamation's token and value when the proclamation is that owner's
/// and of the latest term (`term`, the fencing counter, when there is one:
/// a term of the same owner lost before this one leaves its proclamation
/// behind).
pub(super) fn leader_of(hash: &Frame, text: &Frame, term: Option<u64>) -> Option<LeaderInfo> {
    let fields: Vec<Vec<u8>> = match hash.value() {
        Frame::Array(items) => items
            .iter()
            .filter_map(|f| f.as_bytes().map(|b| b.to_vec()))
            .collect(),
        Frame::Map(pairs) => pairs
            .iter()
            .flat_map(|(k, v)| [k, v])
            .filter_map(|f| f.as_bytes().map(|b| b.to_vec()))
            .collect(),
        _ => return None,
    };
    let owner = fields
        .chunks(2)
        .filter(|kv| {
            kv.len() == 2 && std::str::from_utf8(&kv[1]).is_ok_and(|v| v.parse::<u64>().is_ok())
        })
        .map(|kv| String::from_utf8_lossy(&kv[0]).into_owned())
        .find(|f| !f.starts_with("keylatch_"))?;
    let mut info = LeaderInfo {
        owner,
        token: None,
        value: None,
    };
    if let Some(text) = text
        .as_bytes()
        .map(|b| String::from_utf8_lossy(b).into_owned())
    {
        let mut parts = text.splitn(3, '\n');
        if let (Some(token), Some(by), Some(value)) = (parts.next(), parts.next(), parts.next()) {
            let token = token.parse().ok();
            // No counter to compare with (deleted behind the election):
            // the owner alone decides, as it did before terms were told.
            if by == info.owner && token.is_some() && (term.is_none() || token == term) {
                info.token = token;
                info.value = Some(value.to_owned());
            }
        }
    }
    Some(info)
}

pub(super) fn pttl_of(f: &Frame) -> Option<u64> {
    match f.value() {
        Frame::Integer(n) if *n > 0 => Some(n.unsigned_abs()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(pairs: &[(&str, &str)]) -> Frame {
        Frame::Array(
            pairs
                .iter()
                .flat_map(|(k, v)| {
                    [
                        Frame::Bulk(k.to_string().into()),
                        Frame::Bulk(v.to_string().into()),
                    ]
                })
                .collect(),
        )
    }

    #[test]
    fn a_proclamation_counts_only_while_its_owner_holds_the_lock() {
        let text = Frame::Bulk("17\nu:1\n10.0.0.7:80".into());
        assert_eq!(
            leader_of(&hash(&[("u:1", "1")]), &text, Some(17)),
            Some(LeaderInfo {
                owner: "u:1".into(),
                token: Some(17),
                value: Some("10.0.0.7:80".into()),
            })
        );
        // Another holds it now: the old proclamation is not shown.
        assert_eq!(
            leader_of(
                &hash(&[("u:2", "1"), ("keylatch_waiters", "1")]),
                &text,
                Some(17)
            ),
            Some(LeaderInfo {
                owner: "u:2".into(),
                token: None,
                value: None,
            })
        );
        // Nobody holds it; a read-write lock's hash is no leader either.
        assert_eq!(leader_of(&hash(&[]), &text, Some(17)), None);
        assert_eq!(
            leader_of(&hash(&[("mode", "write")]), &Frame::Null, None),
            None
        );
        // The same owner elected again (term 18): its lost term's
        // proclamation is not this term's.
        assert_eq!(
            leader_of(&hash(&[("u:1", "1")]), &text, Some(18)),
            Some(LeaderInfo {
                owner: "u:1".into(),
                token: None,
                value: None,
            })
        );
        // A value with newlines of its own stays whole.
        let multi = Frame::Bulk("3\nu:1\na\nb".into());
        assert_eq!(
            leader_of(&hash(&[("u:1", "1")]), &multi, Some(3)).and_then(|l| l.value),
            Some("a\nb".into())
        );
    }
}
