//! The socket a connection owns: plain TCP, or TLS over TCP (`rediss://`).
//!
//! [`Stream`] is an enum, not a trait object: the TCP variant costs one
//! `match` per poll and is otherwise the bare `TcpStream` (no box, no
//! dynamic dispatch). The TLS variant is boxed because rustls' state is
//! large and would bloat every TCP connection's task.
//!
//! A TLS stream buffers: `poll_write` may accept bytes that rustls has
//! encrypted but not yet handed to the socket (when the socket would block).
//! Owners therefore call `poll_flush` once their own buffer is empty, which
//! for TCP is a no-op.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::config::ConnectionConfig;
use crate::error::{Error, Result};

#[cfg(feature = "tls")]
use tokio_rustls::{client::TlsStream, TlsConnector};

/// A connected socket, TLS or not.
#[derive(Debug)]
pub(crate) enum Stream {
    Tcp(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<TlsStream<TcpStream>>),
}

impl Stream {
    /// Opens a TCP connection to `cfg`'s host and port (TCP_NODELAY on);
    /// [`over`](Self::over) makes the stream from it. Two steps, so a
    /// timeout can say which one was waited for.
    pub(crate) async fn tcp(cfg: &ConnectionConfig) -> Result<TcpStream> {
        let tcp = TcpStream::connect((cfg.host.as_str(), cfg.port))
            .await
            .map_err(|e| {
                Error::io(io::Error::new(
                    e.kind(),
                    format!("connect to {}: {e}", cfg.addr()),
                ))
            })?;
        // Requests are small and latency-bound; Nagle would hold them back.
        tcp.set_nodelay(true)?;
        Ok(tcp)
    }

    /// The stream over a TCP connection made: as it is, or after the TLS
    /// handshake when `cfg.tls` is set, verifying the certificate against
    /// `cfg.host`.
    pub(crate) async fn over(cfg: &ConnectionConfig, tcp: TcpStream) -> Result<Self> {
        match &cfg.tls {
            None => Ok(Stream::Tcp(tcp)),
            #[cfg(feature = "tls")]
            Some(tls) => {
                let config = tls.client_config()?;
                let name = crate::tls::server_name(&cfg.host)?;
                let stream = TlsConnector::from(config)
                    .connect(name, tcp)
                    .await
                    .map_err(|e| crate::tls::io_error(&cfg.addr(), e))?;
                Ok(Stream::Tls(Box::new(stream)))
            }
            #[cfg(not(feature = "tls"))]
            Some(_) => Err(Error::Config(crate::tls::NO_TLS.to_owned())),
        }
    }

    /// An I/O error from this stream as keylatch's error (TLS alerts and
    /// certificate errors become [`Error::Tls`]).
    pub(crate) fn error(&self, addr: &str, e: io::Error) -> Error {
        match self {
            Stream::Tcp(_) => {
                let _ = addr;
                Error::io(e)
            }
            #[cfg(feature = "tls")]
            Stream::Tls(_) => crate::tls::io_error(addr, e),
        }
    }
}

impl AsyncRead for Stream {
    #[inline]
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    #[inline]
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    #[inline]
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    #[inline]
    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Tcp(s) => s.is_write_vectored(),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }

    #[inline]
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            // TcpStream has no buffer: Ready at once, no syscall.
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    #[inline]
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
