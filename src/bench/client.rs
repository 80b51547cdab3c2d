//! What a lock client has to offer to be measured: a handle per lock name
//! that acquires (waiting up to a bound) and releases.

use std::future::Future;
use std::time::Duration;

/// A failed benchmark: one line saying what went wrong (a client error, a
/// task that panicked, a file that could not be written).
///
/// ```
/// let e = keylatch_cli::bench::BenchError::new("server went away");
/// assert_eq!(e.to_string(), "server went away");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BenchError(String);

impl BenchError {
    /// An error with this message.
    ///
    /// ```
    /// let e = keylatch_cli::bench::BenchError::new(format!("acquire: {}", "NOPERM"));
    /// assert!(e.to_string().contains("NOPERM"));
    /// ```
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

impl std::fmt::Display for BenchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BenchError {}

impl From<keylatch::LockError> for BenchError {
    fn from(e: keylatch::LockError) -> Self {
        Self(e.to_string())
    }
}

impl From<keylatch::Error> for BenchError {
    fn from(e: keylatch::Error) -> Self {
        Self(e.to_string())
    }
}

/// The benchmarks' result type.
///
/// ```
/// fn check(n: u64) -> keylatch_cli::bench::BenchResult<u64> {
///     if n == 0 { Err(keylatch_cli::bench::BenchError::new("no operations")) } else { Ok(n) }
/// }
/// assert!(check(0).is_err());
/// ```
pub type BenchResult<T> = Result<T, BenchError>;

/// A lock client under test: hands out one [`LockHandle`] per lock name
/// and task, built before timing starts (as an application keeps a lock
/// handle or its key names rather than rebuilding them per use).
///
/// ```
/// use std::time::Duration;
/// use keylatch_cli::bench::{BenchResult, LockClient, LockHandle};
///
/// /// A pretend client whose locks are always free.
/// struct Free;
/// struct FreeHandle;
/// impl LockClient for Free {
///     type Handle = FreeHandle;
///     fn label(&self) -> &str { "free" }
///     fn handle(&self, _name: &str) -> FreeHandle { FreeHandle }
/// }
/// impl LockHandle for FreeHandle {
///     type Held = ();
///     async fn try_acquire(&mut self, _wait: Duration) -> BenchResult<Option<()>> { Ok(Some(())) }
///     async fn release(&mut self, _held: ()) -> BenchResult<()> { Ok(()) }
/// }
/// assert_eq!(Free.label(), "free");
/// ```
pub trait LockClient: Send + Sync + 'static {
    /// One lock name, as one owner.
    type Handle: LockHandle;

    /// The client's name in tables and plots.
    ///
    /// ```no_run
    /// use keylatch_cli::bench::LockClient;
    /// # async fn demo() -> keylatch::LockResult<()> {
    /// let locks = keylatch::Locks::connect("redis://127.0.0.1:6379").await?;
    /// assert_eq!(locks.label(), "keylatch");
    /// # Ok(()) }
    /// ```
    fn label(&self) -> &str;

    /// A handle for lock `name`; each call is a distinct owner.
    ///
    /// ```no_run
    /// use keylatch_cli::bench::LockClient;
    /// # async fn demo(locks: keylatch::Locks) {
    /// let (a, b) = (LockClient::handle(&locks, "x"), LockClient::handle(&locks, "x"));
    /// assert_ne!(a.owner(), b.owner());
    /// # }
    /// ```
    fn handle(&self, name: &str) -> Self::Handle;
}

/// One lock name as one owner: the operations the scenarios time.
/// [`LockClient`] shows an implementation; keylatch's [`Lock`](keylatch::Lock)
/// is one.
///
/// ```no_run
/// use std::time::Duration;
/// use keylatch_cli::bench::{LockClient, LockHandle};
/// # async fn demo(locks: keylatch::Locks) -> keylatch_cli::bench::BenchResult<()> {
/// let mut lock = LockClient::handle(&locks, "reports");
/// if let Some(held) = LockHandle::try_acquire(&mut lock, Duration::from_secs(1)).await? {
///     LockHandle::release(&mut lock, held).await?;
/// }
/// # Ok(()) }
/// ```
pub trait LockHandle: Send + 'static {
    /// Proof of a hold, given back to [`release`](Self::release).
    type Held: Send;

    /// Acquires the lock, waiting up to `wait` (zero: one attempt);
    /// `Ok(None)` when it stayed busy. Clients without a way to wait for a
    /// release retry on their own schedule (say which in the report).
    ///
    /// See [`LockHandle`] for an example.
    ///
    /// # Errors
    /// The client failed (unreachable server, error reply).
    fn try_acquire(
        &mut self,
        wait: Duration,
    ) -> impl Future<Output = BenchResult<Option<Self::Held>>> + Send;

    /// Releases a hold.
    ///
    /// See [`LockHandle`] for an example.
    ///
    /// # Errors
    /// The client failed.
    fn release(&mut self, held: Self::Held) -> impl Future<Output = BenchResult<()>> + Send;
}
