//! Explicit pipelines: several commands, one write per node, replies in order.

use keylatch_resp::{Cmd, ToArg};

use crate::script::Script;

/// A batch of commands sent in one write with
/// [`Connection::pipeline`](crate::Connection::pipeline) or
/// [`Client::pipeline`](crate::Client::pipeline) (which splits it per node
/// in a cluster and puts the replies back in order).
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
    /// `(index, script)` for entries added with [`Pipeline::add_script`], so
    /// a `NOSCRIPT` reply can be healed by loading the script.
    scripts: Vec<(usize, &'static Script)>,
}

impl Pipeline {
    /// An empty pipeline.
    ///
    /// ```
    /// use keylatch_cluster::Pipeline;
    /// let p = Pipeline::new();
    /// assert!(p.is_empty());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty pipeline with room for `n` commands.
    ///
    /// ```
    /// use keylatch_cluster::Pipeline;
    /// let p = Pipeline::with_capacity(16);
    /// assert_eq!(p.len(), 0); // room, not commands
    /// ```
    pub fn with_capacity(n: usize) -> Self {
        Self {
            cmds: Vec::with_capacity(n),
            scripts: Vec::new(),
        }
    }

    /// Appends a command.
    ///
    /// ```
    /// use keylatch_cluster::Pipeline;
    /// use keylatch_resp::Cmd;
    /// let mut p = Pipeline::new();
    /// for key in ["a", "b", "c"] {
    ///     p.add(Cmd::new("INCR").key(key));
    /// }
    /// assert_eq!(p.len(), 3);
    /// ```
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

    /// Appends an `EVALSHA` of `script`. With
    /// [`Client::pipeline`](crate::Client::pipeline), entries that meet
    /// `NOSCRIPT` are healed: each missing script is loaded once per node and
    /// only the failed entries are sent again, in order.
    ///
    /// ```
    /// use keylatch_cluster::{Pipeline, Script};
    /// static INCR: Script = Script::new("incr", "return redis.call('INCR', KEYS[1])");
    /// let mut p = Pipeline::new();
    /// p.add_script(&INCR, &["a"], &[] as &[&str]);
    /// assert_eq!(p.len(), 1);
    /// ```
    pub fn add_script<K: ToArg, A: ToArg>(
        &mut self,
        script: &'static Script,
        keys: &[K],
        args: &[A],
    ) -> &mut Self {
        self.scripts.push((self.cmds.len(), script));
        self.cmds.push(script.evalsha_cmd(keys, args));
        self
    }

    /// Number of commands.
    ///
    /// ```
    /// use keylatch_cluster::Pipeline;
    /// use keylatch_resp::Cmd;
    /// let p = Pipeline::new().cmd(Cmd::new("PING")).cmd(Cmd::new("DBSIZE"));
    /// assert_eq!(p.len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.cmds.len()
    }

    /// True when there are no commands.
    ///
    /// ```
    /// use keylatch_cluster::Pipeline;
    /// use keylatch_resp::Cmd;
    /// let mut p = Pipeline::new();
    /// assert!(p.is_empty());
    /// p.add(Cmd::new("PING"));
    /// assert!(!p.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.cmds.is_empty()
    }

    /// The commands, in order.
    ///
    /// ```
    /// use keylatch_cluster::Pipeline;
    /// use keylatch_resp::Cmd;
    /// let p = Pipeline::new().cmd(Cmd::new("GET").key("a")).cmd(Cmd::new("DBSIZE"));
    /// let names: Vec<&[u8]> = p.cmds().iter().map(|c| c.name()).collect();
    /// assert_eq!(names, [&b"GET"[..], b"DBSIZE"]);
    /// ```
    pub fn cmds(&self) -> &[Cmd] {
        &self.cmds
    }

    /// Takes the commands out.
    ///
    /// ```
    /// use keylatch_cluster::Pipeline;
    /// use keylatch_resp::Cmd;
    /// let p: Pipeline = ["a", "b"].into_iter().map(|k| Cmd::new("DEL").key(k)).collect();
    /// let cmds = p.into_cmds();
    /// assert_eq!(cmds.len(), 2);
    /// assert_eq!(cmds[1].first_key(), Some(&b"b"[..]));
    /// ```
    pub fn into_cmds(self) -> Vec<Cmd> {
        self.cmds
    }

    /// The commands with the script (if any) behind each.
    pub(crate) fn into_entries(self) -> Vec<(Cmd, Option<&'static Script>)> {
        let mut scripts = self.scripts.into_iter().peekable();
        self.cmds
            .into_iter()
            .enumerate()
            .map(|(i, cmd)| {
                let script = match scripts.peek() {
                    Some(&(j, s)) if j == i => {
                        scripts.next();
                        Some(s)
                    }
                    _ => None,
                };
                (cmd, script)
            })
            .collect()
    }
}

impl FromIterator<Cmd> for Pipeline {
    fn from_iter<I: IntoIterator<Item = Cmd>>(iter: I) -> Self {
        Self {
            cmds: iter.into_iter().collect(),
            scripts: Vec::new(),
        }
    }
}
