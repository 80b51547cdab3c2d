//! Explicit pipelines: several commands, one write, replies in order.

use keylatch_resp::Cmd;

/// A batch of commands sent in one write with
/// [`Connection::pipeline`](crate::Connection::pipeline).
///
/// ```
/// use keylatch_cluster::Pipeline;
/// use keylatch_resp::Cmd;
/// let mut p = Pipeline::with_capacity(2);
/// p.add(Cmd::new("INCR").key("a")).add(Cmd::new("GET").key("a"));
/// assert_eq!(p.len(), 2);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Pipeline {
    cmds: Vec<Cmd>,
}

impl Pipeline {
    /// An empty pipeline.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty pipeline with room for `n` commands.
    pub fn with_capacity(n: usize) -> Self {
        Self {
            cmds: Vec::with_capacity(n),
        }
    }

    /// Appends a command.
    pub fn add(&mut self, cmd: Cmd) -> &mut Self {
        self.cmds.push(cmd);
        self
    }

    /// Appends a command (builder form).
    ///
    /// ```
    /// use keylatch_cluster::Pipeline;
    /// use keylatch_resp::Cmd;
    /// let p = Pipeline::new().cmd(Cmd::new("PING")).cmd(Cmd::new("PING"));
    /// assert_eq!(p.len(), 2);
    /// ```
    pub fn cmd(mut self, cmd: Cmd) -> Self {
        self.cmds.push(cmd);
        self
    }

    /// Number of commands.
    pub fn len(&self) -> usize {
        self.cmds.len()
    }

    /// True when there are no commands.
    pub fn is_empty(&self) -> bool {
        self.cmds.is_empty()
    }

    /// The commands, in order.
    pub fn cmds(&self) -> &[Cmd] {
        &self.cmds
    }

    /// Takes the commands out.
    pub fn into_cmds(self) -> Vec<Cmd> {
        self.cmds
    }
}

impl FromIterator<Cmd> for Pipeline {
    fn from_iter<I: IntoIterator<Item = Cmd>>(iter: I) -> Self {
        Self {
            cmds: iter.into_iter().collect(),
        }
    }
}
