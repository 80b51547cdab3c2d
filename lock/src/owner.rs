//! `Owner`: an owner id, kept small.
//!
//! A handle made by `Locks` acts as `<client uuid>:<n>`. Kept as text in
//! every handle, that id cost 60 bytes of heap per held lock (a million
//! holds: 60 MB) for a string that takes a few dozen nanoseconds to write
//! out again. An owner this client made is kept as the client's id (shared
//! by every handle) and its number; any other (one the application gave,
//! a write hold's `<owner>:write` field, a semaphore's permit ids) as its
//! text.

use std::fmt;
use std::num::NonZeroU64;
use std::ops::Deref;
use std::sync::Arc;

/// The longest client id a made owner is kept beside (a uuid's text is 36
/// bytes); a longer one is kept as text.
const CLIENT_MAX: usize = 40;
/// Room for `<client id>:<n>`: the id, the colon, a `u64`'s 20 digits.
const TEXT_MAX: usize = CLIENT_MAX + 1 + 20;

/// An owner id (the hash field a hold is counted in). 16 bytes, as the
/// `Arc<str>` it replaces: a made id's number is never 0, which leaves room
/// for the other form's tag.
#[derive(Clone)]
pub(crate) struct Owner(Repr);

#[derive(Clone)]
enum Repr {
    /// `<client>:<n>`, made by this client; the client id at most
    /// [`CLIENT_MAX`] bytes (see [`Owner::made`]).
    Made { client: Arc<String>, n: NonZeroU64 },
    /// Any other text (a thin pointer: the number's niche holds the tag).
    Given(Arc<String>),
}

impl Owner {
    /// The `n`th owner id of client `client`: `<client>:<n>`.
    pub(crate) fn made(client: &Arc<String>, n: u64) -> Self {
        match NonZeroU64::new(n) {
            Some(n) if client.len() <= CLIENT_MAX => Self(Repr::Made {
                client: Arc::clone(client),
                n,
            }),
            _ => Self::given(&format!("{client}:{n}")),
        }
    }

    /// The owner id `text`, as given.
    pub(crate) fn given(text: &str) -> Self {
        Self(Repr::Given(Arc::new(text.to_owned())))
    }

    /// The text of an id kept as text; `None` for one made by this client
    /// (written out on use: see [`text`](Self::text)).
    pub(crate) fn given_text(&self) -> Option<&str> {
        match &self.0 {
            Repr::Made { .. } => None,
            Repr::Given(text) => Some(text),
        }
    }

    /// The id's text, written out (no allocation).
    pub(crate) fn text(&self) -> OwnerText<'_> {
        match &self.0 {
            Repr::Made { client, n } => {
                let mut buf = [0u8; TEXT_MAX];
                let id = client.as_bytes();
                let mut digits = itoa::Buffer::new();
                let digits = digits.format(n.get()).as_bytes();
                let len = id.len() + 1 + digits.len();
                // `made` keeps only ids that leave room for any number, so
                // this always writes.
                debug_assert!(len <= TEXT_MAX);
                if let Some(out) = buf.get_mut(..len) {
                    let (head, tail) = out.split_at_mut(id.len());
                    head.copy_from_slice(id);
                    if let Some((colon, rest)) = tail.split_first_mut() {
                        *colon = b':';
                        rest.copy_from_slice(digits);
                    }
                }
                OwnerText::Made {
                    buf,
                    len: len.min(TEXT_MAX) as u8,
                }
            }
            Repr::Given(text) => OwnerText::Given(text),
        }
    }
}

impl PartialEq for Owner {
    /// Equal when their texts are: a made owner and the same text given
    /// (`lock_with_owner(name, lock.owner())`) are one owner.
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Repr::Made { client: a, n: x }, Repr::Made { client: b, n: y })
                if Arc::ptr_eq(a, b) =>
            {
                x == y
            }
            (Repr::Given(a), Repr::Given(b)) if Arc::ptr_eq(a, b) => true,
            _ => *self.text() == *other.text(),
        }
    }
}

impl Eq for Owner {}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

impl fmt::Debug for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.text(), f)
    }
}

/// An owner id's text: written into a buffer on the stack for a made
/// owner, borrowed for a given one.
pub(crate) enum OwnerText<'a> {
    Made { buf: [u8; TEXT_MAX], len: u8 },
    Given(&'a str),
}

impl Deref for OwnerText<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        match self {
            // ASCII digits after a client id that was a `String`: the check
            // cannot fail (and costs a pass over 60 bytes, no unsafe).
            Self::Made { buf, len } => std::str::from_utf8(&buf[..usize::from(*len)]).unwrap_or(""),
            Self::Given(text) => text,
        }
    }
}

impl PartialEq for OwnerText<'_> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for OwnerText<'_> {}

impl PartialOrd for OwnerText<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// By text, as the `&str` it replaces was ordered (a multi-lock's order).
impl Ord for OwnerText<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (**self).cmp(&**other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> Arc<String> {
        Arc::new("0b8a4b8e-1c2d-4e5f-8a9b-0c1d2e3f4a5b".to_owned())
    }

    #[test]
    fn a_made_owner_reads_as_its_text() {
        let c = client();
        let o = Owner::made(&c, 17);
        assert!(o.given_text().is_none());
        assert_eq!(&*o.text(), "0b8a4b8e-1c2d-4e5f-8a9b-0c1d2e3f4a5b:17");
        assert_eq!(o.to_string(), "0b8a4b8e-1c2d-4e5f-8a9b-0c1d2e3f4a5b:17");
        let max = Owner::made(&c, u64::MAX);
        assert_eq!(&*max.text(), format!("{c}:{}", u64::MAX));
        assert_eq!(format!("{o:?}"), format!("{:?}", o.to_string()));
    }

    #[test]
    fn owners_are_equal_when_their_texts_are() {
        let c = client();
        let made = Owner::made(&c, 5);
        assert_eq!(made, Owner::made(&c, 5));
        assert_ne!(made, Owner::made(&c, 6));
        // The same text given, or made by another copy of the client id.
        assert_eq!(made, Owner::given(&format!("{c}:5")));
        assert_eq!(Owner::given(&format!("{c}:5")), made);
        assert_eq!(made, Owner::made(&Arc::new(c.to_string()), 5));
        assert_ne!(made, Owner::given(&format!("{c}:05")));
        assert_eq!(Owner::given("a b"), Owner::given("a b"));
        assert_ne!(Owner::given("a"), Owner::given("b"));
    }

    #[test]
    fn a_client_id_too_long_to_keep_beside_its_number_is_kept_as_text() {
        let long = Arc::new("x".repeat(CLIENT_MAX + 1));
        let o = Owner::made(&long, 3);
        assert!(o.given_text().is_some());
        assert_eq!(&*o.text(), format!("{long}:3"));
        let fits = Arc::new("y".repeat(CLIENT_MAX));
        let o = Owner::made(&fits, u64::MAX);
        assert!(o.given_text().is_none());
        assert_eq!(&*o.text(), format!("{fits}:{}", u64::MAX));
    }

    #[test]
    fn an_owner_is_no_bigger_than_the_shared_string_it_replaced() {
        // A lock handle keeps one: its size budget counts on 16 bytes.
        assert_eq!(
            std::mem::size_of::<Owner>(),
            std::mem::size_of::<Arc<str>>()
        );
    }

    #[test]
    fn number_zero_is_kept_as_text() {
        let c = client();
        let o = Owner::made(&c, 0);
        assert_eq!(o.given_text(), Some(format!("{c}:0").as_str()));
    }
}
