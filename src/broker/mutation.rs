//! The broker's own mutations as tool calls (issue 24): `trash empty`, `log gc` and
//! `keys rotate` change what a person can recover or verify, so each goes through the
//! invocation skeleton (`broker::invoke`) like any tool — decided by the policy
//! (`tools = ["purge"]` for emptying the trash, `["maintenance"]` for the log's upkeep),
//! asked or confirmed on a terminal, performed, and recorded once, refusals as a `deny`
//! naming their rule. (`trash restore` and `undo` are file tools already: `fs.rs`.)

use super::BrokerError;
use super::refusal::Refusal;
use super::tools::fs::FsContext;
use crate::audit;
use crate::model::{Decision, Tool, ToolCall};
use std::path::PathBuf;

/// One mutation: what the policy decides on, what the record says, and the body.
pub(crate) struct Mutation<'b, T> {
    /// The record's tool name (`trash.empty`, `log.gc`, `keys.rotate`).
    pub name: &'static str,
    /// The policy's tool it is decided as.
    pub tool: Tool,
    /// The record's arguments (redacted here).
    pub args: Vec<String>,
    /// The paths it is decided on (what it removes or changes).
    pub paths: Vec<PathBuf>,
    /// The question that confirms an allowed call on a terminal (a permanent removal). With
    /// no one to ask, the call is not done (refused as not confirmed, naming `--yes`): a
    /// caller confirmed beforehand (`--yes`) gives `None`.
    pub confirm: Option<String>,
    /// The body.
    pub perform: Box<dyn FnOnce() -> Result<T, BrokerError> + 'b>,
    /// What it did, appended to the record's arguments.
    pub describe: fn(&T) -> Vec<String>,
    /// Whether the body replaces the log's signing key (the record is then written with
    /// the new one).
    pub reopens_log: bool,
}

/// What a performed mutation returned and where it was recorded.
pub struct Done<T> {
    /// The body's result.
    pub output: T,
    /// The audit record's seq.
    pub audit_seq: u64,
    /// The decision it was performed under.
    pub decision: Decision,
}

struct MutationTool<'c, 'a, 'b, T> {
    ctx: &'c FsContext<'a>,
    m: Option<Mutation<'b, T>>,
    describe: fn(&T) -> Vec<String>,
    name: &'static str,
    reopens_log: bool,
    decision: Option<Decision>,
    approved: Option<bool>,
    /// A confirmation was wanted and there was no one to ask.
    nobody_to_confirm: bool,
}

/// Runs `m` through the skeleton. A denied or unapproved call is recorded as a deny and
/// returned as [`BrokerError::Refused`] naming its rule.
pub(crate) fn run<T>(ctx: &FsContext<'_>, m: Mutation<'_, T>) -> Result<Done<T>, BrokerError> {
    let call = super::invoke::Call {
        policy: &ctx.policy.name,
        state_dir: &ctx.state_dir,
        session: &ctx.session,
        caller: &ctx.caller,
        context: &ctx.client,
    };
    let mut t = MutationTool {
        ctx,
        describe: m.describe,
        name: m.name,
        reopens_log: m.reopens_log,
        m: Some(m),
        decision: None,
        approved: None,
        nobody_to_confirm: false,
    };
    let done = super::invoke::invoke(&call, &mut t)?;
    let decision = t.decision.take().ok_or_else(|| BrokerError::Invariant {
        tool: t.name.to_string(),
        what: "performed without a decision",
    })?;
    match done.output {
        Some(output) => Ok(Done {
            output,
            audit_seq: done.seq,
            decision,
        }),
        None => Err(Refusal::of_decision(&decision, t.approved)
            .unwrap_or_else(|| Refusal::NotApproved {
                rules: vec!["confirm".into()],
                reasons: vec![if t.nobody_to_confirm {
                    "there is no terminal to confirm on: pass --yes to do it without asking".into()
                } else {
                    "not confirmed at the terminal".into()
                }],
            })
            .into()),
    }
}

impl<T> super::invoke::Tool for MutationTool<'_, '_, '_, T> {
    type Output = Option<T>;

    fn name(&self) -> &str {
        self.name
    }

    fn decide(&mut self, rec: &mut audit::Record) -> Result<Decision, BrokerError> {
        let m = self.m.as_ref().ok_or_else(|| BrokerError::Invariant {
            tool: self.name.to_string(),
            what: "decided twice",
        })?;
        // Recorded through the gate (`broker::gate::record`), like every field.
        rec.args = m.args.clone();
        rec.cwd = self.ctx.cwd.display().to_string();
        let mut decision = self.ctx.policy.evaluate(
            &ToolCall {
                tool: m.tool,
                argv: vec![],
                paths: m.paths.clone(),
                cwd: self.ctx.cwd.clone(),
            },
            &super::shell_env(&self.ctx.client, &self.ctx.cwd),
        );
        super::guard::redact_decision(&mut decision);
        self.decision = Some(decision.clone());
        Ok(decision)
    }

    fn ask(&mut self, decision: &Decision) -> bool {
        let rules = super::rules_lines(decision);
        let q = format!("gateway {} needs approval:{rules}\nDo it?", self.name);
        let a = self.person(decision, &q, true) == Some(true);
        self.approved = Some(a);
        a
    }

    fn confirm(&mut self, decision: &Decision) -> Option<bool> {
        let q = self.m.as_ref()?.confirm.clone()?;
        let a = self.person(decision, &q, false);
        self.nobody_to_confirm = a.is_none();
        let a = Some(a == Some(true));
        self.approved = a;
        a
    }

    fn not_performed(&mut self, _decision: Decision, _approved: Option<bool>) -> Option<T> {
        None
    }

    fn perform(&mut self, _d: Decision, _a: Option<bool>) -> Result<Option<T>, BrokerError> {
        let m = self.m.take().ok_or_else(|| BrokerError::Invariant {
            tool: self.name.to_string(),
            what: "performed twice",
        })?;
        (m.perform)().map(Some)
    }

    fn record(&mut self, res: &Result<Option<T>, BrokerError>, rec: &mut audit::Record) {
        if let Ok(Some(out)) = res {
            rec.exit_code = Some(0);
            rec.args.extend((self.describe)(out));
        }
    }

    fn reopens_log(&self) -> bool {
        self.reopens_log
    }
}

impl<T> MutationTool<'_, '_, '_, T> {
    /// Asks a person: the daemon's queue for its client, else the terminal.
    fn person(&self, decision: &Decision, question: &str, required: bool) -> Option<bool> {
        let ctx = self.ctx;
        let Some(c) = ctx.client.client() else {
            return (ctx.confirm)(question, required);
        };
        super::ask_person(
            &super::Asking {
                client: c,
                state_dir: &ctx.state_dir,
                session: &ctx.session,
                caller: &ctx.caller,
                policy: ctx.policy,
                tool: self.name,
                command: format!("gateway {}", self.name),
                decision,
                required,
                workspace: &super::workspace(&ctx.workspace)
                    .unwrap_or_else(|_| ctx.workspace.clone()),
                cwd: &super::workspace(&ctx.cwd).unwrap_or_else(|_| ctx.cwd.clone()),
                env_digest: String::new(),
            },
            question,
        )
    }
}
