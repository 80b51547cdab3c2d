//! The incremental [`Decoder`] and its [`Limits`].
//!
//! Decoding runs in two phases. The scan walks the buffer once, item by item, keeping an
//! explicit stack of "elements still to come" per open aggregate, until one whole top-level
//! frame has been validated; it remembers where it stopped, so bytes are never scanned twice
//! across calls. Then the frame's bytes are split off and frozen once and the tree is built
//! from that [`Bytes`](bytes::Bytes) by slicing, without copying payloads.

use std::ops::Range;

use bytes::{Buf, BytesMut};

use crate::build;
use crate::item::{find_crlf, finish_body, parse_int, parse_item, Item, Line, Value, LEN_LINE_MAX};
use crate::{Frame, ProtocolError};

/// Nesting is never allowed deeper than this, whatever [`Limits::max_depth`] says: the tree
/// builder recurses once per level.
const DEPTH_CEILING: usize = 512;

/// Most buffer space reserved at once for a bulk body that has not arrived: the rest is
/// reserved step by step as its bytes come. A 12-byte header announcing 512 MiB must not
/// make the process allocate 512 MiB before a single byte of it was sent.
pub const RESERVE_STEP: usize = 1 << 20;

/// Bounds on what a peer may make the [`Decoder`] accept, each checked as soon as the header
/// that breaks it arrives.
///
/// ```
/// use keylatch_resp::{Decoder, Limits};
///
/// let limits = Limits { max_bulk_len: 1 << 20, ..Limits::default() };
/// let decoder = Decoder::new(limits);
/// # let _ = decoder;
/// assert_eq!(Limits::default().max_depth, 64);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest bulk string, blob error or verbatim string, in bytes (default 512 MiB, as in
    /// Redis). The decoder reserves buffer space for a bulk as its bytes arrive, at most
    /// [`RESERVE_STEP`] ahead of them.
    pub max_bulk_len: usize,
    /// Most elements in one aggregate; maps and attributes count two per pair (default
    /// 2^24).
    pub max_aggregate_len: usize,
    /// Deepest nesting of aggregates (default 64; values above 512 are treated as 512).
    pub max_depth: usize,
    /// Longest simple string, simple error, integer, double or big number line, in bytes,
    /// without its type byte and CRLF (default 64 KiB).
    pub max_line_len: usize,
    /// Most elements in one frame, all its aggregates together (maps and attributes count
    /// two per pair): bounds the memory of the tree built for it, about 44 bytes per element
    /// (default 2^22, about 185 MiB; an array of 2^24 nulls would take about 740 MiB).
    pub max_frame_items: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_bulk_len: 512 << 20,
            max_aggregate_len: 1 << 24,
            max_depth: 64,
            max_line_len: 64 << 10,
            max_frame_items: 1 << 22,
        }
    }
}

/// An open aggregate during the scan.
#[derive(Clone, Copy, Debug)]
struct Level {
    remaining: usize,
    /// Attributes annotate the frame after them and do not count as an element of their
    /// parent.
    attribute: bool,
}

/// A bulk body whose header has been read but whose bytes have not all arrived.
#[derive(Clone, Copy, Debug)]
struct PendingBody {
    kind: u8,
    body: usize,
    len: usize,
    end: usize,
}

/// What the scan concluded in one call.
enum Step {
    /// Incomplete; `reserve` more bytes should be reserved in the buffer (0 for none).
    Pending { reserve: usize },
    /// The frame is a single scalar (possibly after attributes, which the builder then
    /// wraps it with): no tree to build.
    Scalar {
        value: Value,
        payload: Range<usize>,
        end: usize,
    },
    /// The frame holds aggregates and spans `..end`.
    Tree { end: usize },
}

/// An incremental, resumable RESP2/RESP3 decoder over a [`BytesMut`] read buffer.
///
/// Feed it the same buffer, with new bytes appended, until it returns a frame. Partial state
/// refers to offsets in that buffer: if the buffer is replaced or drained by someone else,
/// call [`reset`](Self::reset) first.
///
/// ```
/// use bytes::BytesMut;
/// use keylatch_resp::{Decoder, Frame};
///
/// let mut decoder = Decoder::default();
/// let mut buf = BytesMut::from(&b"$5\r\nhel"[..]);
/// assert_eq!(decoder.decode(&mut buf)?, None);
/// assert_eq!(decoder.needed(), 4); // "lo\r\n"
/// buf.extend_from_slice(b"lo\r\n:1\r\n");
/// assert_eq!(decoder.decode(&mut buf)?, Some(Frame::Bulk("hello".into())));
/// assert_eq!(decoder.decode(&mut buf)?, Some(Frame::Integer(1)));
/// assert!(buf.is_empty());
/// # Ok::<(), keylatch_resp::ProtocolError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Decoder {
    limits: Limits,
    /// Start of the first item not yet validated.
    pos: usize,
    /// Where the search for the end of the item at `pos` continues (0: from its start).
    resume: usize,
    stack: Vec<Level>,
    body: Option<PendingBody>,
    needed: usize,
    /// Elements announced so far in the frame being scanned (for `max_frame_items`).
    items: usize,
    /// Bytes of line and header text examined, to prove in tests that nothing is rescanned.
    #[cfg(test)]
    pub(crate) scanned: usize,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new(Limits::default())
    }
}

impl Decoder {
    /// A decoder enforcing `limits` (with `max_depth` capped at 512).
    ///
    /// ```
    /// use keylatch_resp::{Decoder, Limits};
    ///
    /// let decoder = Decoder::new(Limits { max_depth: 8, ..Limits::default() });
    /// # let _ = decoder;
    /// ```
    pub fn new(mut limits: Limits) -> Self {
        limits.max_depth = limits.max_depth.min(DEPTH_CEILING);
        Self {
            limits,
            pos: 0,
            resume: 0,
            stack: Vec::new(),
            body: None,
            needed: 0,
            items: 0,
            #[cfg(test)]
            scanned: 0,
        }
    }

    /// Decodes the next frame from the front of `buf`.
    ///
    /// Returns `Ok(Some(frame))` and removes the frame's bytes from `buf`, or `Ok(None)` when
    /// `buf` does not yet hold a whole frame: then nothing is removed, and the next call
    /// resumes where this one stopped. Once a bulk header announces its length, room for it
    /// is reserved in `buf` as its bytes arrive ([`RESERVE_STEP`] at a time) and the buffer is
    /// not scanned again until it is all there.
    /// A frame that RESP3 attributes precede comes as [`Frame::Attributed`], carrying them
    /// (at the top level or on an element of an aggregate); their elements count toward the
    /// [`Limits`] like any other.
    ///
    /// # Errors
    ///
    /// A [`ProtocolError`] when the bytes are not valid RESP or break the [`Limits`]. The
    /// decoder then forgets its partial state; `buf` is left as it was, but the stream cannot
    /// be resynchronised and should be dropped.
    ///
    /// ```
    /// use bytes::BytesMut;
    /// use keylatch_resp::{Decoder, Frame};
    ///
    /// let mut buf = BytesMut::from(&b"|1\r\n+ttl\r\n:3\r\n%1\r\n+k\r\n#t\r\n"[..]);
    /// let mut decoder = Decoder::default();
    /// let frame = decoder.decode(&mut buf)?.unwrap();
    /// let map = Frame::Map(vec![(Frame::Simple("k".into()), Frame::Boolean(true))]);
    /// assert_eq!(frame.value(), &map);
    /// assert_eq!(frame.attributes(), Some(&[(Frame::Simple("ttl".into()), Frame::Integer(3))][..]));
    /// # Ok::<(), keylatch_resp::ProtocolError>(())
    /// ```
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, ProtocolError> {
        if self.resume == 0 && self.pos == 0 && self.body.is_none() && self.stack.is_empty() {
            if let Some(done) = self.fast(buf) {
                return Ok(done);
            }
        }
        let step = match self.scan(buf) {
            Ok(step) => step,
            Err(e) => {
                self.reset();
                return Err(e);
            }
        };
        match step {
            Step::Pending { reserve } => {
                if reserve > 0 {
                    buf.reserve(reserve);
                }
                Ok(None)
            }
            Step::Scalar {
                value,
                payload,
                end,
            } => {
                self.reset();
                if buf.first() == Some(&b'|') {
                    // Attributes before a scalar: the builder wraps it with them.
                    return self.tree(buf, end).map(Some);
                }
                scalar(buf, value, payload, end).map(Some)
            }
            Step::Tree { end } => {
                self.reset();
                self.tree(buf, end).map(Some)
            }
        }
    }

    /// Splits the validated frame `..end` off `buf` and builds its tree.
    fn tree(&self, buf: &mut BytesMut, end: usize) -> Result<Frame, ProtocolError> {
        if end > buf.len() {
            return Err(ProtocolError::MissingCrlf);
        }
        let src = buf.split_to(end).freeze();
        build::frame(&src, &self.limits)
    }

    /// How many more bytes the decoder knows it needs: the rest of a bulk body whose header
    /// has arrived, or 0 when unknown. Useful to size the next read.
    ///
    /// ```
    /// use bytes::BytesMut;
    /// use keylatch_resp::Decoder;
    ///
    /// let mut decoder = Decoder::default();
    /// let mut buf = BytesMut::from(&b"$10\r\n0123"[..]);
    /// assert_eq!(decoder.decode(&mut buf)?, None);
    /// assert_eq!(decoder.needed(), 8);
    /// # Ok::<(), keylatch_resp::ProtocolError>(())
    /// ```
    pub fn needed(&self) -> usize {
        self.needed
    }

    /// Forgets any partially scanned frame, as when the connection's socket is replaced and
    /// its buffer cleared.
    ///
    /// ```
    /// use bytes::BytesMut;
    /// use keylatch_resp::{Decoder, Frame};
    ///
    /// let mut decoder = Decoder::default();
    /// let mut buf = BytesMut::from(&b"*2\r\n:1\r\n"[..]);
    /// assert_eq!(decoder.decode(&mut buf)?, None);
    /// buf.clear();
    /// decoder.reset();
    /// buf.extend_from_slice(b"+OK\r\n");
    /// assert_eq!(decoder.decode(&mut buf)?, Some(Frame::Simple("OK".into())));
    /// # Ok::<(), keylatch_resp::ProtocolError>(())
    /// ```
    pub fn reset(&mut self) {
        self.pos = 0;
        self.resume = 0;
        self.stack.clear();
        self.body = None;
        self.needed = 0;
        self.items = 0;
    }

    /// The common replies (`+`, `-`, `:` and a complete `$` at the front of the buffer, with
    /// nothing pending) without the scan's bookkeeping. Gives the same verdict as the scan
    /// would; returns `None` to let the scan decide anything unusual (errors, attributes,
    /// aggregates, a bulk body still arriving).
    #[inline]
    fn fast(&mut self, buf: &mut BytesMut) -> Option<Option<Frame>> {
        let data: &[u8] = buf;
        let ty = *data.first()?;
        let max = if ty == b'$' {
            LEN_LINE_MAX
        } else {
            self.limits.max_line_len
        };
        if !matches!(ty, b'+' | b'-' | b':' | b'$') {
            return None;
        }
        let cr = match find_crlf(data, 1, 1, max).ok()? {
            Line::Cr(cr) => cr,
            Line::Partial(resume) => {
                // Exactly what the scan would record, so the next call resumes here.
                self.count(resume - 1);
                self.resume = resume;
                self.needed = 0;
                return Some(None);
            }
        };
        let text = data.get(1..cr)?;
        let frame = match ty {
            b':' => {
                let i = parse_int(text).ok()?;
                buf.advance(cr + 2);
                Frame::Integer(i)
            }
            b'$' => {
                if text.first() == Some(&b'+') {
                    return None;
                }
                let len = usize::try_from(parse_int(text).ok()?).ok()?;
                let end = (cr + 4).checked_add(len)?;
                if len > self.limits.max_bulk_len || data.get(end - 2..end)? != b"\r\n" {
                    return None;
                }
                Frame::Bulk(buf.split_to(end).freeze().slice(cr + 2..end - 2))
            }
            _ => {
                let line = buf.split_to(cr + 2).freeze().slice(1..cr);
                if ty == b'+' {
                    Frame::Simple(line)
                } else {
                    Frame::Error(line)
                }
            }
        };
        self.count(cr + 1);
        self.needed = 0;
        Some(Some(frame))
    }

    fn scan(&mut self, data: &[u8]) -> Result<Step, ProtocolError> {
        self.needed = 0;
        if let Some(step) = self.resume_body(data)? {
            return Ok(step);
        }
        loop {
            let start = self.pos;
            let from = self.resume.max(start + 1);
            let item = parse_item(data, start, from, &self.limits)?;
            self.resume = 0;
            let done = match item {
                Item::Incomplete { resume } => {
                    self.count(resume.saturating_sub(from));
                    self.resume = resume;
                    return Ok(Step::Pending { reserve: 0 });
                }
                Item::Scalar {
                    value,
                    payload,
                    end,
                } => {
                    self.count(end.saturating_sub(from));
                    self.pos = end;
                    self.element_done(Some((value, payload)), end)
                }
                Item::Body { kind, body, len } => {
                    self.count(body.saturating_sub(from));
                    self.body_item(data, start, kind, body, len)?
                }
                Item::Aggregate { kind, count, end } => {
                    self.count(end.saturating_sub(from));
                    self.open_aggregate(kind, count, end)?
                }
            };
            if let Some(step) = done {
                return Ok(step);
            }
        }
    }

    /// The bulk body a previous call stopped in: still pending (with the next step of room
    /// to reserve), or finished as one element. `None`: the scan goes on with the next item.
    #[inline]
    fn resume_body(&mut self, data: &[u8]) -> Result<Option<Step>, ProtocolError> {
        let Some(p) = self.body else {
            return Ok(None);
        };
        if data.len() < p.end {
            self.needed = p.end - data.len();
            // The next step of room, as the body's bytes come.
            return Ok(Some(Step::Pending {
                reserve: self.needed.min(RESERVE_STEP),
            }));
        }
        self.body = None;
        let (value, payload, end) = finish_body(data, p.kind, p.body, p.len)?;
        self.pos = end;
        Ok(self.element_done(Some((value, payload)), end))
    }

    /// A bulk header (of the item starting at `start`) announcing `len` bytes from `body`:
    /// the element when its bytes are all there, else the pending body remembered (the scan
    /// resumes at the item, without reading the header again) and the room to reserve.
    #[inline]
    fn body_item(
        &mut self,
        data: &[u8],
        start: usize,
        kind: u8,
        body: usize,
        len: usize,
    ) -> Result<Option<Step>, ProtocolError> {
        let end = body.checked_add(len).and_then(|e| e.checked_add(2)).ok_or(
            ProtocolError::BulkTooLong {
                len,
                max: self.limits.max_bulk_len,
            },
        )?;
        if data.len() < end {
            self.pos = start;
            self.body = Some(PendingBody {
                kind,
                body,
                len,
                end,
            });
            self.needed = end - data.len();
            return Ok(Some(Step::Pending {
                reserve: self.needed.min(RESERVE_STEP),
            }));
        }
        let (value, payload, end) = finish_body(data, kind, body, len)?;
        self.pos = end;
        Ok(self.element_done(Some((value, payload)), end))
    }

    /// An aggregate header announcing `count` elements, the first at `end`: the depth and
    /// per-frame element limits checked, then a level opened (an empty aggregate is a whole
    /// element at once; an empty attribute annotates the element still to come).
    #[inline]
    fn open_aggregate(
        &mut self,
        kind: u8,
        count: usize,
        end: usize,
    ) -> Result<Option<Step>, ProtocolError> {
        self.pos = end;
        if self.stack.len() >= self.limits.max_depth {
            return Err(ProtocolError::TooDeep {
                max: self.limits.max_depth,
            });
        }
        let attribute = kind == b'|';
        self.items = self.items.saturating_add(count);
        if self.items > self.limits.max_frame_items {
            return Err(ProtocolError::FrameTooLarge {
                items: self.items,
                max: self.limits.max_frame_items,
            });
        }
        if count > 0 {
            self.stack.push(Level {
                remaining: count,
                attribute,
            });
            Ok(None)
        } else if !attribute {
            Ok(self.element_done(None, end))
        } else {
            Ok(None)
        }
    }

    /// Records that one element (a scalar, or an empty aggregate when `scalar` is `None`)
    /// ended at `end`, closing every aggregate it completes. Returns the step to take when
    /// that completes the top-level frame.
    fn element_done(&mut self, scalar: Option<(Value, Range<usize>)>, end: usize) -> Option<Step> {
        if self.stack.is_empty() {
            return Some(match scalar {
                Some((value, payload)) => Step::Scalar {
                    value,
                    payload,
                    end,
                },
                None => Step::Tree { end },
            });
        }
        while let Some(top) = self.stack.last_mut() {
            top.remaining = top.remaining.saturating_sub(1);
            if top.remaining > 0 {
                return None;
            }
            let attribute = top.attribute;
            self.stack.pop();
            if attribute {
                return None;
            }
        }
        Some(Step::Tree { end })
    }

    #[cfg(test)]
    fn count(&mut self, n: usize) {
        self.scanned += n;
    }

    #[cfg(not(test))]
    #[inline(always)]
    fn count(&mut self, _: usize) {}
}

/// Takes a top-level scalar off the front of `buf` without building a tree; numbers need no
/// `Bytes` at all.
fn scalar(
    buf: &mut BytesMut,
    value: Value,
    payload: Range<usize>,
    end: usize,
) -> Result<Frame, ProtocolError> {
    if end > buf.len() {
        return Err(ProtocolError::MissingCrlf);
    }
    let frame = match value {
        Value::Integer(i) => Frame::Integer(i),
        Value::Double(d) => Frame::Double(d),
        Value::Boolean(b) => Frame::Boolean(b),
        Value::Null => Frame::Null,
        _ => {
            let src = buf.split_to(end).freeze();
            return build::bytes_frame(&src, value, payload);
        }
    };
    buf.advance(end);
    Ok(frame)
}
