//! The secrets policy applied to one exec: inputs (argv, environment, stdin) before the
//! command sees them, output before the caller does.

use super::BrokerError;
use crate::model::{SecretsInput, SecretsOutput, SecretsProfile};
use crate::sandbox::{Stream, StreamIo};
use crate::secrets::{Redactor, TextKind, scanner};
use serde::Serialize;
use std::ffi::OsString;

/// A secret found in an input: where and by which rule (never the value).
#[derive(Clone, Debug, Serialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct InputSecret {
    /// `argument N` (0 = the program), `environment variable NAME`, or `stdin`.
    pub place: String,
    /// The rule.
    pub rule: &'static str,
}

/// A secret found in output.
#[derive(Clone, Debug, Serialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct OutputSecret {
    /// `stdout` or `stderr`.
    pub stream: &'static str,
    /// The rule.
    pub rule: &'static str,
}

/// What the secrets policy found and did in one exec.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct SecretsReport {
    /// Secrets in argv, environment, stdin.
    pub input: Vec<InputSecret>,
    /// Secrets in output.
    pub output: Vec<OutputSecret>,
    /// Set when `secrets.output = "block"` or `secrets.input = "deny"` (stdin) stopped the run.
    pub blocked: Option<InputSecret>,
}

fn denied(s: &InputSecret) -> BrokerError {
    BrokerError::Refused(super::refusal::Refusal::SecretInInput {
        place: s.place.clone(),
        rule: s.rule.into(),
    })
}

/// Replaces each finding in `text` by `[REDACTED:<rule>]`; returns the rules.
fn redact_all(text: &[u8]) -> (Vec<u8>, Vec<&'static str>) {
    let mut r = Redactor::new(TextKind::Stream);
    let mut out = Vec::with_capacity(text.len());
    r.feed(text, &mut out);
    r.finish(&mut out);
    (out, r.findings().to_vec())
}

/// Checks argv under the policy: deny → error naming the first secret; redact → argv
/// rewritten; warn → reported only.
pub fn check_argv(
    profile: &SecretsProfile,
    argv: &mut [String],
) -> Result<Vec<InputSecret>, BrokerError> {
    let mut found = Vec::new();
    for (i, a) in argv.iter_mut().enumerate() {
        let hits = scanner().scan(a.as_bytes(), TextKind::Stream, false);
        if hits.is_empty() {
            continue;
        }
        for h in &hits {
            found.push(InputSecret {
                place: format!("argument {i}"),
                rule: h.rule,
            });
        }
        match profile.input {
            SecretsInput::Deny => return Err(denied(&found[found.len() - hits.len()])),
            SecretsInput::Redact => {
                let (out, _) = redact_all(a.as_bytes());
                *a = String::from_utf8_lossy(&out).into_owned();
            }
            SecretsInput::Warn => {}
        }
    }
    Ok(found)
}

/// Checks the environment the command will get, like [`check_argv`].
pub fn check_env(
    profile: &SecretsProfile,
    env: &mut [(OsString, OsString)],
) -> Result<Vec<InputSecret>, BrokerError> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let mut found = Vec::new();
    for (k, v) in env.iter_mut() {
        let hits = scanner().scan(v.as_bytes(), TextKind::Stream, false);
        if hits.is_empty() {
            continue;
        }
        for h in &hits {
            found.push(InputSecret {
                place: format!("environment variable {}", k.to_string_lossy()),
                rule: h.rule,
            });
        }
        match profile.input {
            SecretsInput::Deny => return Err(denied(&found[found.len() - hits.len()])),
            SecretsInput::Redact => {
                let (out, _) = redact_all(v.as_bytes());
                *v = OsString::from_vec(out);
            }
            SecretsInput::Warn => {}
        }
    }
    Ok(found)
}

/// The [`StreamIo`] of an exec: output through redactors per stream, stdin through one.
pub struct Guard<'a> {
    profile: SecretsProfile,
    out: Redactor,
    err: Redactor,
    stdin: Redactor,
    sink: &'a mut dyn FnMut(Stream, &[u8]),
    buf: Vec<u8>,
    /// Filled as the run goes.
    pub report: SecretsReport,
    /// Hashes (and stores) what the command reads on stdin, after redaction.
    pub stdin_tap: Option<crate::audit::artifacts::ArtifactWriter>,
}

impl<'a> Guard<'a> {
    /// A guard delivering to `sink`.
    pub fn new(profile: SecretsProfile, sink: &'a mut dyn FnMut(Stream, &[u8])) -> Guard<'a> {
        Guard {
            profile,
            out: Redactor::new(TextKind::Stream).with_min_confidence(profile.redact_min_confidence),
            err: Redactor::new(TextKind::Stream).with_min_confidence(profile.redact_min_confidence),
            stdin: Redactor::new(TextKind::Stream),
            sink,
            buf: Vec::new(),
            report: SecretsReport::default(),
            stdin_tap: None,
        }
    }

    fn redactor(&mut self, stream: Stream) -> &mut Redactor {
        match stream {
            Stream::Stdout => &mut self.out,
            Stream::Stderr => &mut self.err,
        }
    }

    /// Delivers `self.buf` (redacted output of `stream`); in block mode, only what precedes
    /// the first secret, and then stops. Returns false when blocked.
    fn deliver(&mut self, stream: Stream, before: usize) -> bool {
        let after = self.redactor(stream).findings().len();
        let name = match stream {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        };
        if after > before {
            let rules: Vec<&'static str> = self.redactor(stream).findings()[before..].to_vec();
            for rule in &rules {
                self.report.output.push(OutputSecret { stream: name, rule });
            }
            if self.profile.output == SecretsOutput::Block {
                let marker = format!("[REDACTED:{}]", rules[0]);
                let cut = memchr::memmem::find(&self.buf, marker.as_bytes()).unwrap_or(0);
                (self.sink)(stream, &self.buf[..cut]);
                self.buf.clear();
                self.report.blocked = Some(InputSecret {
                    place: name.to_string(),
                    rule: rules[0],
                });
                return false;
            }
        }
        // Warn delivered the raw bytes already; redact and (so far clean) block deliver these.
        if self.profile.output != SecretsOutput::Warn && !self.buf.is_empty() {
            (self.sink)(stream, &self.buf);
        }
        self.buf.clear();
        true
    }

    /// End of the run: flushes what the redactors hold.
    pub fn finish(&mut self) {
        if self.report.blocked.is_some() {
            return;
        }
        for stream in [Stream::Stdout, Stream::Stderr] {
            let before = self.redactor(stream).findings().len();
            let mut buf = std::mem::take(&mut self.buf);
            self.redactor(stream).finish(&mut buf);
            self.buf = buf;
            if !self.deliver(stream, before) {
                return;
            }
        }
    }
}

impl StreamIo for Guard<'_> {
    fn output(&mut self, stream: Stream, data: &[u8]) -> bool {
        if self.report.blocked.is_some() {
            return false;
        }
        if self.profile.output == SecretsOutput::Warn {
            // Unchanged to the caller; scanned for the report.
            (self.sink)(stream, data);
        }
        let before = self.redactor(stream).findings().len();
        let mut buf = std::mem::take(&mut self.buf);
        self.redactor(stream).feed(data, &mut buf);
        self.buf = buf;
        self.deliver(stream, before)
    }

    fn output_idle(&mut self) -> bool {
        for stream in [Stream::Stdout, Stream::Stderr] {
            if self.report.blocked.is_some() {
                return false;
            }
            let before = self.redactor(stream).findings().len();
            let mut buf = std::mem::take(&mut self.buf);
            self.redactor(stream).flush_lines(&mut buf);
            self.buf = buf;
            if !self.deliver(stream, before) {
                return false;
            }
        }
        true
    }

    fn input(&mut self, data: &[u8], out: &mut Vec<u8>) -> bool {
        let before = self.stdin.findings().len();
        let mut buf = Vec::new();
        self.stdin.feed(data, &mut buf);
        self.stdin.flush_lines(&mut buf);
        let from = out.len();
        let go = self.stdin_result(before, buf, data, out);
        self.tap_stdin(&out[from..]);
        go
    }

    fn input_end(&mut self, out: &mut Vec<u8>) -> bool {
        let before = self.stdin.findings().len();
        let mut buf = Vec::new();
        self.stdin.finish(&mut buf);
        let from = out.len();
        let go = self.stdin_result(before, buf, &[], out);
        self.tap_stdin(&out[from..]);
        go
    }
}

impl Guard<'_> {
    fn tap_stdin(&mut self, data: &[u8]) {
        if let Some(t) = &mut self.stdin_tap {
            t.write(data);
        }
    }

    fn stdin_result(&mut self, before: usize, buf: Vec<u8>, raw: &[u8], out: &mut Vec<u8>) -> bool {
        let new: Vec<&'static str> = self.stdin.findings()[before..].to_vec();
        for rule in &new {
            self.report.input.push(InputSecret {
                place: "stdin".into(),
                rule,
            });
        }
        match self.profile.input {
            SecretsInput::Warn => {
                out.extend_from_slice(raw);
                true
            }
            SecretsInput::Redact => {
                out.extend_from_slice(&buf);
                true
            }
            SecretsInput::Deny => {
                if let Some(rule) = new.first() {
                    let marker = format!("[REDACTED:{rule}]");
                    let cut = memchr::memmem::find(&buf, marker.as_bytes()).unwrap_or(0);
                    out.extend_from_slice(&buf[..cut]);
                    self.report.blocked = Some(InputSecret {
                        place: "stdin".into(),
                        rule,
                    });
                    false
                } else {
                    out.extend_from_slice(&buf);
                    true
                }
            }
        }
    }
}

/// Replaces secrets in the text a decision carries (the analysed commands, rule subjects,
/// reasons for unanalysable parts), so that results and explanations never show them.
pub fn redact_decision(d: &mut crate::model::Decision) {
    let fix = |t: &mut String| {
        if scanner()
            .scan(t.as_bytes(), TextKind::Stream, false)
            .is_empty()
        {
            return;
        }
        let (out, _) = redact_all(t.as_bytes());
        *t = String::from_utf8_lossy(&out).into_owned();
    };
    d.commands.iter_mut().for_each(fix);
    d.unanalysable.iter_mut().for_each(fix);
    for r in &mut d.rules {
        fix(&mut r.subject);
    }
}

/// `text` with every secret replaced by `[REDACTED:<rule>]` (for messages that quote input).
pub fn redact_text(text: &str) -> String {
    if scanner()
        .scan(text.as_bytes(), TextKind::Stream, false)
        .is_empty()
    {
        return text.to_string();
    }
    String::from_utf8_lossy(&redact_all(text.as_bytes()).0).into_owned()
}
