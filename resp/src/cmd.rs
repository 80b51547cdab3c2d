//! Commands ([`Cmd`]) and their arguments ([`ToArg`]).

use bytes::{Bytes, BytesMut};

use crate::encode::{header_len, DoubleText};

/// A command to send: an array of bulk strings, the name first.
///
/// Arguments are stored already encoded (`$<len>\r\n<arg>\r\n`) one after the other in a
/// single buffer, so [`encode`](Self::encode) writes the array header and copies once. Key
/// arguments added with [`key`](Self::key) have their byte ranges recorded, so a cluster router
/// can hash them without re-parsing the command.
///
/// ```
/// use bytes::BytesMut;
/// use keylatch_resp::Cmd;
///
/// let cmd = Cmd::new("SET").key("lock:a").arg("token").arg("PX").arg(100_u64).arg("NX");
/// let mut out = BytesMut::new();
/// cmd.encode(&mut out);
/// assert_eq!(
///     &out[..],
///     &b"*6\r\n$3\r\nSET\r\n$6\r\nlock:a\r\n$5\r\ntoken\r\n$2\r\nPX\r\n$3\r\n100\r\n$2\r\nNX\r\n"[..]
/// );
/// assert_eq!(cmd.first_key(), Some(&b"lock:a"[..]));
/// ```
///
/// Its `Debug` prints the arguments as text with secrets masked (`AUTH`,
/// `HELLO … AUTH`, `MIGRATE … AUTH`/`AUTH2`, `CONFIG SET requirepass`/
/// `masterauth`, `ACL SETUSER` passwords): see `cmd_debug.rs`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Cmd {
    /// Every argument, encoded.
    args: Vec<u8>,
    argc: usize,
    /// Byte ranges of the key payloads in `args`, in order.
    keys: KeyRanges,
}

/// Where the keys are: the first few inline (a lock script has two or three, and a `Vec`
/// per command showed up as two allocations per lock pair), the rest spilled.
#[derive(Clone, Default, PartialEq, Eq)]
struct KeyRanges {
    inline: [(u32, u32); INLINE_KEYS],
    inline_len: u8,
    /// Keys past the inline ones, or at offsets beyond `u32`; once a key spills, every later
    /// key does too, so the order is inline then spilled.
    spilled: Vec<(usize, usize)>,
}

const INLINE_KEYS: usize = 4;

impl std::fmt::Debug for KeyRanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The ranges in use, not the unused inline slots.
        f.debug_list().entries(self.iter()).finish()
    }
}

impl KeyRanges {
    fn push(&mut self, (start, end): (usize, usize)) {
        let n = usize::from(self.inline_len);
        if let (true, Some(slot), Ok(s), Ok(e)) = (
            self.spilled.is_empty(),
            self.inline.get_mut(n),
            u32::try_from(start),
            u32::try_from(end),
        ) {
            *slot = (s, e);
            self.inline_len += 1;
        } else {
            self.spilled.push((start, end));
        }
    }

    fn iter(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.inline
            .iter()
            .take(usize::from(self.inline_len))
            .map(|&(s, e)| (s as usize, e as usize))
            .chain(self.spilled.iter().copied())
    }

    fn first(&self) -> Option<(usize, usize)> {
        self.iter().next()
    }
}

impl Cmd {
    /// A command with just its name.
    ///
    /// ```
    /// use keylatch_resp::Cmd;
    ///
    /// assert_eq!(Cmd::new("PING").name(), b"PING");
    /// ```
    pub fn new(name: impl ToArg) -> Self {
        // Room for a typical lock command up front: growing 8 -> 16 -> 32 -> 64 bytes
        // reallocates three times.
        Self::with_capacity(name, 64)
    }

    /// A command with room for `bytes` bytes of encoded arguments (each takes its length plus
    /// about 5 to 10 bytes of framing), so building it does not reallocate.
    ///
    /// ```
    /// use keylatch_resp::Cmd;
    ///
    /// let cmd = Cmd::with_capacity("MGET", 256).key("a").key("b");
    /// assert_eq!(cmd.argc(), 3);
    /// ```
    pub fn with_capacity(name: impl ToArg, bytes: usize) -> Self {
        let mut cmd = Self {
            args: Vec::with_capacity(bytes),
            ..Self::default()
        };
        cmd.push_arg(name);
        cmd
    }

    /// Appends an argument.
    ///
    /// ```
    /// use keylatch_resp::Cmd;
    ///
    /// let cmd = Cmd::new("EXPIRE").key("k").arg(30);
    /// assert_eq!(cmd.args().last(), Some(&b"30"[..]));
    /// ```
    #[must_use]
    pub fn arg(mut self, a: impl ToArg) -> Self {
        self.push_arg(a);
        self
    }

    /// Appends an argument that is a key, recording where it is.
    ///
    /// ```
    /// use keylatch_resp::Cmd;
    ///
    /// let cmd = Cmd::new("DEL").key("a").key("b");
    /// assert_eq!(cmd.keys().collect::<Vec<_>>(), [&b"a"[..], b"b"]);
    /// ```
    #[must_use]
    pub fn key(mut self, k: impl ToArg) -> Self {
        self.push_key(k);
        self
    }

    /// Appends an argument in place, for loops.
    ///
    /// ```
    /// use keylatch_resp::Cmd;
    ///
    /// let mut cmd = Cmd::new("EVALSHA").arg("abc").arg(0);
    /// for v in ["x", "y"] {
    ///     cmd.push_arg(v);
    /// }
    /// assert_eq!(cmd.argc(), 5);
    /// ```
    pub fn push_arg(&mut self, a: impl ToArg) {
        a.write_arg(&mut self.args);
        self.argc += 1;
    }

    /// Appends a key argument in place, recording where it is.
    ///
    /// ```
    /// use keylatch_resp::Cmd;
    ///
    /// let mut cmd = Cmd::new("UNLINK");
    /// for k in ["a", "b", "c"] {
    ///     cmd.push_key(k);
    /// }
    /// assert_eq!(cmd.keys().count(), 3);
    /// ```
    pub fn push_key(&mut self, k: impl ToArg) {
        let at = self.args.len();
        self.push_arg(k);
        // A foreign `ToArg` that breaks its contract leaves the key unrecorded rather than
        // recording garbage.
        if let Some((range, _)) = arg_at(&self.args, at) {
            self.keys.push(range);
        }
    }

    /// A copy with room for `extra` more bytes of encoded arguments, for commands built from a
    /// prepared prefix: one allocation and one copy, where pushing every argument again would
    /// encode each (and a plain `clone` has no room, so the next push reallocates).
    ///
    /// ```
    /// use keylatch_resp::Cmd;
    ///
    /// let prefix = Cmd::new("EVALSHA").arg("sha").arg(1).key("k");
    /// let cmd = prefix.clone_with_room(16).arg(7);
    /// assert_eq!(cmd.args().collect::<Vec<_>>(), [&b"EVALSHA"[..], b"sha", b"1", b"k", b"7"]);
    /// assert_eq!(cmd.first_key(), Some(&b"k"[..]));
    /// ```
    #[must_use]
    pub fn clone_with_room(&self, extra: usize) -> Self {
        let mut args = Vec::with_capacity(self.args.len().saturating_add(extra));
        args.extend_from_slice(&self.args);
        Self {
            args,
            argc: self.argc,
            keys: self.keys.clone(),
        }
    }

    /// Number of arguments, the name included.
    ///
    /// ```
    /// use keylatch_resp::Cmd;
    ///
    /// assert_eq!(Cmd::new("GET").key("k").argc(), 2);
    /// ```
    pub fn argc(&self) -> usize {
        self.argc
    }

    /// The raw bytes of every argument, the name first.
    ///
    /// ```
    /// use keylatch_resp::Cmd;
    ///
    /// let cmd = Cmd::new("INCRBY").key("n").arg(-5_i64);
    /// assert_eq!(cmd.args().collect::<Vec<_>>(), [&b"INCRBY"[..], b"n", b"-5"]);
    /// ```
    pub fn args(&self) -> impl Iterator<Item = &[u8]> {
        let mut at = 0;
        std::iter::from_fn(move || {
            let ((start, end), next) = arg_at(&self.args, at)?;
            at = next;
            self.args.get(start..end)
        })
    }

    /// The command name (the first argument); empty for a default `Cmd`.
    ///
    /// ```
    /// use keylatch_resp::Cmd;
    ///
    /// assert_eq!(Cmd::new("GET").name(), b"GET");
    /// ```
    pub fn name(&self) -> &[u8] {
        self.args().next().unwrap_or_default()
    }

    /// The key arguments, in the order they were added.
    ///
    /// ```
    /// use keylatch_resp::Cmd;
    ///
    /// let cmd = Cmd::new("RENAME").key("a").key("b");
    /// assert_eq!(cmd.keys().collect::<Vec<_>>(), [&b"a"[..], b"b"]);
    /// ```
    pub fn keys(&self) -> impl Iterator<Item = &[u8]> {
        self.keys
            .iter()
            .filter_map(|(start, end)| self.args.get(start..end))
    }

    /// The first key argument, which decides the cluster slot.
    ///
    /// ```
    /// use keylatch_resp::Cmd;
    ///
    /// assert_eq!(Cmd::new("GET").key("k").first_key(), Some(&b"k"[..]));
    /// assert_eq!(Cmd::new("PING").first_key(), None);
    /// ```
    pub fn first_key(&self) -> Option<&[u8]> {
        let (start, end) = self.keys.first()?;
        self.args.get(start..end)
    }

    /// The exact number of bytes [`encode`](Self::encode) writes.
    ///
    /// ```
    /// use keylatch_resp::Cmd;
    ///
    /// assert_eq!(Cmd::new("PING").encoded_len(), b"*1\r\n$4\r\nPING\r\n".len());
    /// ```
    pub fn encoded_len(&self) -> usize {
        header_len(self.argc) + self.args.len()
    }

    /// Appends the command as a RESP array of bulk strings to `dst`, reserving
    /// [`encoded_len`](Self::encoded_len) bytes once.
    ///
    /// ```
    /// use bytes::BytesMut;
    /// use keylatch_resp::Cmd;
    ///
    /// let mut out = BytesMut::new();
    /// Cmd::new("GET").key("k").encode(&mut out);
    /// assert_eq!(&out[..], b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
    /// ```
    pub fn encode(&self, dst: &mut BytesMut) {
        dst.reserve(self.encoded_len());
        dst.extend_from_slice(b"*");
        dst.extend_from_slice(itoa::Buffer::new().format(self.argc).as_bytes());
        dst.extend_from_slice(b"\r\n");
        dst.extend_from_slice(&self.args);
    }
}

/// The payload range of the encoded argument at `at`, and where the next one starts.
fn arg_at(buf: &[u8], at: usize) -> Option<((usize, usize), usize)> {
    let rest = buf.get(at..)?.strip_prefix(b"$")?;
    let digits = rest.iter().position(|&b| b == b'\r')?;
    let mut len: usize = 0;
    for &d in rest.get(..digits)? {
        if !d.is_ascii_digit() {
            return None;
        }
        len = len.checked_mul(10)?.checked_add(usize::from(d - b'0'))?;
    }
    let start = at + 1 + digits + 2;
    let end = start.checked_add(len)?;
    let next = end.checked_add(2)?;
    (next <= buf.len()).then_some(((start, end), next))
}

/// Something that can be a command argument.
///
/// Strings and byte slices are sent as is; integers in decimal; `f64` as the shortest decimal
/// that parses back exactly (`inf` and `-inf` for the infinities, exponent form for very
/// large or small magnitudes). To implement it for your own type, delegate to one of these,
/// as `self.as_bytes().write_arg(out)`.
///
/// ```
/// use keylatch_resp::ToArg;
///
/// let mut out = Vec::new();
/// 42_u32.write_arg(&mut out);
/// "hi".write_arg(&mut out);
/// f64::NEG_INFINITY.write_arg(&mut out);
/// assert_eq!(out, b"$2\r\n42\r\n$2\r\nhi\r\n$4\r\n-inf\r\n");
/// ```
pub trait ToArg {
    /// Appends exactly one argument, encoded as `$<len>\r\n<bytes>\r\n`, to `out`.
    ///
    /// ```
    /// use keylatch_resp::ToArg;
    ///
    /// let mut out = Vec::new();
    /// b"k".write_arg(&mut out);
    /// assert_eq!(out, b"$1\r\nk\r\n");
    /// ```
    fn write_arg(&self, out: &mut Vec<u8>);
}

fn put(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = bytes.len();
    // Most arguments of lock commands are under ten bytes ("0", "1", a lease): their header
    // is one fixed-size store, with no digit formatting and no copy call.
    if let Some(&digit) = b"0123456789".get(len) {
        out.reserve(len + 6);
        out.extend_from_slice(&[b'$', digit, b'\r', b'\n']);
    } else {
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(len).as_bytes();
        // Exact, so a command sized up front never reallocates here.
        out.reserve(digits.len().saturating_add(len).saturating_add(5));
        out.push(b'$');
        out.extend_from_slice(digits);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

impl<T: ToArg + ?Sized> ToArg for &T {
    fn write_arg(&self, out: &mut Vec<u8>) {
        (**self).write_arg(out);
    }
}

impl ToArg for str {
    fn write_arg(&self, out: &mut Vec<u8>) {
        put(out, self.as_bytes());
    }
}

impl ToArg for String {
    fn write_arg(&self, out: &mut Vec<u8>) {
        put(out, self.as_bytes());
    }
}

impl ToArg for [u8] {
    fn write_arg(&self, out: &mut Vec<u8>) {
        put(out, self);
    }
}

impl<const N: usize> ToArg for [u8; N] {
    fn write_arg(&self, out: &mut Vec<u8>) {
        put(out, self);
    }
}

impl ToArg for Vec<u8> {
    fn write_arg(&self, out: &mut Vec<u8>) {
        put(out, self);
    }
}

impl ToArg for Bytes {
    fn write_arg(&self, out: &mut Vec<u8>) {
        put(out, self);
    }
}

macro_rules! int_args {
    ($($t:ty),*) => {$(
        impl ToArg for $t {
            fn write_arg(&self, out: &mut Vec<u8>) {
                put(out, itoa::Buffer::new().format(*self).as_bytes());
            }
        }
    )*};
}

int_args!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);

impl ToArg for f64 {
    fn write_arg(&self, out: &mut Vec<u8>) {
        put(out, DoubleText::new(*self).as_bytes());
    }
}

#[allow(clippy::unwrap_used)] // a panic is how a test fails
#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(cmd: &Cmd) -> Vec<u8> {
        let mut out = BytesMut::new();
        cmd.encode(&mut out);
        assert_eq!(out.len(), cmd.encoded_len());
        out.to_vec()
    }

    #[test]
    fn set_px_nx_exact_bytes() {
        let cmd = Cmd::new("SET")
            .key("key")
            .arg("value")
            .arg("PX")
            .arg(100)
            .arg("NX");
        assert_eq!(
            encoded(&cmd),
            b"*6\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n$2\r\nPX\r\n$3\r\n100\r\n$2\r\nNX\r\n"
        );
        assert_eq!(cmd.argc(), 6);
        assert_eq!(cmd.name(), b"SET");
        assert_eq!(cmd.keys().collect::<Vec<_>>(), [b"key"]);
        assert_eq!(cmd.first_key(), Some(&b"key"[..]));
        assert!(
            cmd.keys.spilled.capacity() == 0,
            "one key must not allocate"
        );
    }

    #[test]
    fn every_arg_type() {
        let s = String::from("s");
        let v = vec![b'v'];
        let nested: &&&str = &&"deref";
        let cmd = Cmd::new("X")
            .arg(&s)
            .arg(s.clone())
            .arg(&v)
            .arg(v.clone())
            .arg(&b"ab"[..])
            .arg(*b"cd")
            .arg(b"ef")
            .arg(Bytes::from_static(b"g"))
            .arg(Bytes::from_static(b"h"))
            .arg(-1_i8)
            .arg(-2_i16)
            .arg(-3_i32)
            .arg(i64::MIN)
            .arg(-5_isize)
            .arg(255_u8)
            .arg(7_u16)
            .arg(8_u32)
            .arg(u64::MAX)
            .arg(10_usize)
            .arg(0.5)
            .arg(f64::INFINITY)
            .arg(f64::NEG_INFINITY)
            .arg(1e300)
            .arg(nested);
        let args: Vec<&[u8]> = cmd.args().collect();
        let want: Vec<&[u8]> = vec![
            b"X",
            b"s",
            b"s",
            b"v",
            b"v",
            b"ab",
            b"cd",
            b"ef",
            b"g",
            b"h",
            b"-1",
            b"-2",
            b"-3",
            b"-9223372036854775808",
            b"-5",
            b"255",
            b"7",
            b"8",
            b"18446744073709551615",
            b"10",
            b"0.5",
            b"inf",
            b"-inf",
            b"1e300",
            b"deref",
        ];
        assert_eq!(args, want);
        assert_eq!(cmd.argc(), want.len());
        let enc = encoded(&cmd);
        assert!(enc.starts_with(b"*25\r\n$1\r\nX\r\n"));
    }

    #[test]
    fn many_keys_and_binary_args() {
        let mut cmd = Cmd::with_capacity("MSET", 64);
        for i in 0..12_u32 {
            cmd.push_key(format!("k{i}"));
            cmd.push_arg(&b"\r\n$0\r\n"[..]);
        }
        let keys: Vec<Vec<u8>> = cmd.keys().map(<[u8]>::to_vec).collect();
        let want: Vec<Vec<u8>> = (0..12).map(|i| format!("k{i}").into_bytes()).collect();
        assert_eq!(keys, want);
        assert_eq!(cmd.args().count(), 25);
        assert_eq!(cmd.args().nth(2), Some(&b"\r\n$0\r\n"[..]));
        // The encoding is a valid RESP array of exactly these bulks.
        let mut buf = BytesMut::from(&encoded(&cmd)[..]);
        let frame = crate::Decoder::default().decode(&mut buf).unwrap().unwrap();
        let crate::Frame::Array(items) = frame else {
            panic!("not an array")
        };
        assert_eq!(items.len(), 25);
        assert_eq!(items[24], "\r\n$0\r\n");
    }

    #[test]
    fn keys_inline_then_spilled_in_order() {
        let mut cmd = Cmd::new("DEL");
        for i in 0..INLINE_KEYS {
            cmd.push_key(format!("k{i}"));
        }
        assert_eq!(
            cmd.keys.spilled.capacity(),
            0,
            "inline keys must not allocate"
        );
        cmd.push_key("last");
        assert_eq!(cmd.keys.spilled.len(), 1);
        let keys: Vec<&[u8]> = cmd.keys().collect();
        assert_eq!(keys, [&b"k0"[..], b"k1", b"k2", b"k3", b"last"]);
        let copy = cmd.clone_with_room(8).key("more");
        assert_eq!(copy.keys().count(), 6);
        assert_eq!(copy.keys().last(), Some(&b"more"[..]));
        assert_eq!(copy.first_key(), Some(&b"k0"[..]));
    }

    #[test]
    fn reserve_happens_once() {
        let cmd = Cmd::new("SET")
            .key("key")
            .arg(vec![7_u8; 300])
            .arg("PX")
            .arg(100);
        let mut out = BytesMut::new();
        cmd.encode(&mut out);
        assert_eq!(out.capacity(), cmd.encoded_len(), "one exact reservation");

        let mut out = BytesMut::with_capacity(cmd.encoded_len());
        let before = out.as_ptr();
        cmd.encode(&mut out);
        assert_eq!(out.as_ptr(), before, "no reallocation when room exists");
    }

    #[test]
    fn default_and_foreign_args() {
        let empty = Cmd::default();
        assert_eq!(empty.name(), b"");
        assert_eq!(empty.argc(), 0);
        assert_eq!(encoded(&empty), b"*0\r\n");

        struct Broken;
        impl ToArg for Broken {
            fn write_arg(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(b"garbage");
            }
        }
        let cmd = Cmd::new("X").key(Broken);
        assert_eq!(cmd.first_key(), None);
        assert_eq!(cmd.args().collect::<Vec<_>>(), [b"X"]);
    }
}
