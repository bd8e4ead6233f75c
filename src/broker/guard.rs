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

/// What quote removal made of one byte of a shell word.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Quoting {
    /// Kept (content).
    Content,
    /// A quote that opens or closes `'...'` or `"..."`: removed.
    Quote,
    /// A backslash that escapes the next byte: removed.
    Escape,
}

/// Shell quote removal (POSIX: `'...'`, `"..."` with its backslash escapes, `\x` outside
/// quotes) of `s`, with for each byte of the result the offset in `s` it came from, and what
/// each byte of `s` was. A secret split by quoting (`gh''p_...`, `"gh"p_...`, `gh\p_...`) is
/// whole in the result; the map brings its span back to `s` for redaction.
fn dequote(s: &[u8]) -> (Vec<u8>, Vec<usize>, Vec<Quoting>) {
    let mut out = Vec::with_capacity(s.len());
    let mut map = Vec::with_capacity(s.len());
    let mut kind = vec![Quoting::Content; s.len()];
    let (mut single, mut double) = (false, false);
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let escapes_next = c == b'\\'
            && !single
            && i + 1 < s.len()
            && (!double || b"$`\"\\\n".contains(&s[i + 1]));
        if !double && c == b'\'' {
            single = !single;
            kind[i] = Quoting::Quote;
        } else if !single && c == b'"' {
            double = !double;
            kind[i] = Quoting::Quote;
        } else if escapes_next {
            kind[i] = Quoting::Escape;
            out.push(s[i + 1]);
            map.push(i + 1);
            i += 1;
        } else {
            out.push(c);
            map.push(i);
        }
        i += 1;
    }
    (out, map, kind)
}

/// One argument with every secret replaced by `[REDACTED:<rule>]`, found in the raw text and
/// after quote removal; returns the rules. A secret found after quote removal is replaced in
/// the raw text over its whole span, keeping the quotes inside it (so the quoting of the rest
/// of a shell string is unchanged).
fn redact_arg(a: &str) -> (String, Vec<&'static str>) {
    redact_levels(a, 1)
}

/// [`redact_arg`] through `levels` of quoting (a command shown shell-quoted whose argument is
/// itself a shell string: `sh -c 'echo "gh"p_...'`). Quotes of any level inside a secret's span
/// are kept.
fn redact_levels(a: &str, levels: usize) -> (String, Vec<&'static str>) {
    let raw = a.as_bytes();
    // (start, end, rule) in raw offsets.
    let mut spans: Vec<(usize, usize, &'static str)> = Vec::new();
    let mut quote = vec![false; raw.len()];
    let mut text = raw.to_vec();
    let mut orig: Vec<usize> = (0..raw.len()).collect();
    for _ in 0..levels {
        let (plain, map, kind) = dequote(&text);
        if plain.len() == text.len() {
            break;
        }
        for (j, k) in kind.iter().enumerate() {
            if *k == Quoting::Quote {
                quote[orig[j]] = true;
            }
        }
        for h in scanner().scan(&plain, TextKind::Stream, false) {
            let mut start = map[h.start];
            if start > 0 && kind[start - 1] == Quoting::Escape {
                start -= 1;
            }
            let (start, end) = (orig[start], orig[map[h.end - 1]] + 1);
            if !spans.iter().any(|&(s, e, _)| s < end && start < e) {
                spans.push((start, end, h.rule));
            }
        }
        orig = map.iter().map(|&j| orig[j]).collect();
        text = plain;
    }
    let kind: Vec<Quoting> = quote
        .iter()
        .map(|&q| if q { Quoting::Quote } else { Quoting::Content })
        .collect();
    for h in scanner().scan(raw, TextKind::Stream, false) {
        if !spans.iter().any(|&(s, e, _)| s < h.end && h.start < e) {
            spans.push((h.start, h.end, h.rule));
        }
    }
    if spans.is_empty() {
        return (a.to_string(), vec![]);
    }
    // A secret that is a flag's or an assignment's value is redacted whole, whatever its
    // length and punctuation (the scan may stop at a `;` or after its longest match).
    for sp in &mut spans {
        sp.1 = value_end(raw, sp.0, sp.1, levels == 1);
    }
    spans.sort();
    let mut out = Vec::with_capacity(raw.len());
    let mut rules = Vec::new();
    let mut pos = 0;
    for (start, end, rule) in spans {
        if start < pos {
            // Overlaps the previous replacement: already gone with it.
            let end = end.max(pos);
            out.extend(
                (pos..end)
                    .filter(|&j| kind[j] == Quoting::Quote)
                    .map(|j| raw[j]),
            );
            pos = end;
            continue;
        }
        out.extend_from_slice(&raw[pos..start]);
        out.extend_from_slice(format!("[REDACTED:{rule}]").as_bytes());
        out.extend(
            (start..end)
                .filter(|&j| kind[j] == Quoting::Quote)
                .map(|j| raw[j]),
        );
        rules.push(rule);
        pos = end;
    }
    out.extend_from_slice(&raw[pos..]);
    (String::from_utf8_lossy(&out).into_owned(), rules)
}

/// Where the secret found at `start..end` of `raw` ends when it is the value of a flag or an
/// assignment (`--password=...`, `AWS_SESSION_TOKEN=...`, `'NAME=...'`): a secret's value is
/// all of it, whatever its length or shape (`a;b`, 900 bytes of session token), so the span
/// runs to the value's closing quote, else to the next whitespace — else, for a whole argv
/// word (`word`) that is a flag or holds no whitespace, to the word's end. `end` when the
/// finding is not such a value (it does not start where the value does).
pub(crate) fn value_end(raw: &[u8], start: usize, end: usize, word: bool) -> usize {
    let ws = raw[..start]
        .iter()
        .rposition(u8::is_ascii_whitespace)
        .map_or(0, |i| i + 1);
    let mut before = &raw[ws..start];
    let mut quote = None;
    // `'NAME=value`, `NAME='value`.
    if let [q @ (b'\'' | b'"'), rest @ ..] = before {
        quote = Some(*q);
        before = rest;
    }
    if let [rest @ .., q @ (b'\'' | b'"')] = before
        && rest.ends_with(b"=")
    {
        quote = Some(*q);
        before = rest;
    }
    let Some(name) = before.strip_suffix(b"=") else {
        return end;
    };
    let name = name
        .strip_prefix(b"--")
        .or_else(|| name.strip_prefix(b"-"))
        .unwrap_or(name);
    let named = name
        .first()
        .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_')
        && name
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || b"_.-".contains(c));
    if !named || end > raw.len() {
        return end;
    }
    let rest = &raw[end..];
    if word
        && ws == 0
        && quote.is_none()
        && (raw[0] == b'-' || !rest.iter().any(u8::is_ascii_whitespace))
    {
        return raw.len();
    }
    let n = match quote {
        Some(q) => memchr::memchr(q, rest),
        None => rest.iter().position(u8::is_ascii_whitespace),
    };
    end + n.unwrap_or(rest.len())
}

/// argv as records, displays and approvals keep it: every argument redacted, in its raw text
/// and after shell quote removal (whatever `secrets.input` says: a record never keeps a
/// secret).
/// A secret the shell analyser finds only after its own expansions (`gh{p_...,}`) cannot be
/// cut out exactly: the argument (shell string) it comes from is replaced whole.
pub fn redact_argv(argv: &[String]) -> Vec<String> {
    let mut out: Vec<String> = argv.iter().map(|a| redact_arg(a).0).collect();
    for (i, s, e, rule) in command_line_secrets(&out) {
        out[i].replace_range(s..e, &format!("[REDACTED:{rule}]"));
    }
    if analysed_secret(&crate::policy::shell::analyse_argv(
        &out,
        &Default::default(),
    ))
    .is_none()
    {
        return out;
    }
    for a in out.iter_mut().skip(1) {
        let analysis = crate::policy::shell::analyse_script(a, &Default::default());
        if let Some(rule) = analysed_secret(&analysis) {
            *a = format!("[REDACTED:{rule}]");
        }
    }
    if analysed_secret(&crate::policy::shell::analyse_argv(
        &out,
        &Default::default(),
    ))
    .is_some()
    {
        for a in out.iter_mut().skip(1) {
            *a = "[REDACTED]".into();
        }
    }
    out
}

/// The rule of the first secret in a word of the analysed commands, or in a command's words
/// read together (a flag's value: `mysql -p...`, `--password ...`).
fn analysed_secret(analysis: &crate::policy::shell::Analysis) -> Option<&'static str> {
    analysis
        .commands
        .iter()
        .flat_map(|c| &c.argv)
        .find_map(|w| {
            scanner()
                .scan(w.text().as_bytes(), TextKind::Stream, false)
                .first()
                .map(|h| h.rule)
        })
        .or_else(|| {
            analysis.commands.iter().find_map(|c| {
                let words: Vec<String> = c.argv.iter().map(|w| w.text().to_string()).collect();
                command_line_secrets(&words).first().map(|f| f.3)
            })
        })
}

/// Secrets that only the words of a command read together show: a flag's value
/// (`mysql -p...`, `--password ...`, `-u user:...`), found by the scanner's context
/// tokenizer in the words joined by spaces. Each is (word, start, end, rule) within one
/// word (a flag's value is one word), in reverse order so that replacing them in turn keeps
/// the offsets valid.
fn command_line_secrets(words: &[String]) -> Vec<(usize, usize, usize, &'static str)> {
    let mut line = String::new();
    let mut starts = Vec::with_capacity(words.len());
    for w in words {
        if !line.is_empty() {
            line.push(' ');
        }
        starts.push(line.len());
        line.push_str(w);
    }
    let mut out = Vec::new();
    for f in scanner().scan(line.as_bytes(), TextKind::Stream, false) {
        let i = starts.partition_point(|&s| s <= f.start).saturating_sub(1);
        let (ws, we) = (starts[i], starts[i] + words[i].len());
        if f.start < ws || f.start >= we {
            continue;
        }
        let (s, mut e) = (f.start - ws, f.end.min(we) - ws);
        // Findings inside one word are the per-word scan's (redacted before this).
        let own = scanner()
            .scan(words[i].as_bytes(), TextKind::Stream, false)
            .iter()
            .any(|h| h.start <= s && e <= h.end);
        // A flag's value is the whole word (`--password` `a;b`, `-pa;b`), whatever its shape.
        if s == 0 || words[i].starts_with('-') {
            e = words[i].len();
        }
        if !own && words[i].is_char_boundary(s) && words[i].is_char_boundary(e) {
            out.push((i, s, e, f.rule));
        }
    }
    out.reverse();
    out
}

/// Checks argv under the policy: deny → error naming the first secret; redact → argv
/// rewritten; warn → reported only. Each argument is checked raw and after shell quote
/// removal; then the commands the shell analyser finds in what is left (`sh -c`, wrappers,
/// brace expansion, `$HOME`) are checked word by word, after its quote removal and the
/// expansions it can resolve. A secret found only there cannot be cut out of argv, so under
/// `redact` it is refused as under `deny` (fail closed).
pub fn check_argv(
    profile: &SecretsProfile,
    argv: &mut [String],
) -> Result<Vec<InputSecret>, BrokerError> {
    let mut found = Vec::new();
    let mut rest = Vec::with_capacity(argv.len());
    for (i, a) in argv.iter_mut().enumerate() {
        let (redacted, rules) = redact_arg(a);
        for rule in &rules {
            found.push(InputSecret {
                place: format!("argument {i}"),
                rule,
            });
        }
        if !rules.is_empty() {
            match profile.input {
                SecretsInput::Deny => return Err(denied(&found[found.len() - rules.len()])),
                SecretsInput::Redact => *a = redacted.clone(),
                SecretsInput::Warn => {}
            }
        }
        rest.push(redacted);
    }
    for (i, s, e, rule) in command_line_secrets(&rest) {
        let secret = InputSecret {
            place: format!("argument {i}"),
            rule,
        };
        // `rest` (what the analyser reads next) never holds it, whatever the policy.
        rest[i].replace_range(s..e, &format!("[REDACTED:{rule}]"));
        match profile.input {
            SecretsInput::Deny => return Err(denied(&secret)),
            SecretsInput::Redact => argv[i] = rest[i].clone(),
            SecretsInput::Warn => {}
        }
        found.push(secret);
    }
    let analysis = crate::policy::shell::analyse_argv(&rest, &Default::default());
    for cmd in &analysis.commands {
        for w in &cmd.argv {
            for h in scanner().scan(w.text().as_bytes(), TextKind::Stream, false) {
                let s = InputSecret {
                    place: "the command line after shell expansion".into(),
                    rule: h.rule,
                };
                if profile.input != SecretsInput::Warn {
                    return Err(denied(&s));
                }
                found.push(s);
            }
        }
        let words: Vec<String> = cmd.argv.iter().map(|w| w.text().to_string()).collect();
        for (_, _, _, rule) in command_line_secrets(&words) {
            let s = InputSecret {
                place: "the command line after shell expansion".into(),
                rule,
            };
            if profile.input != SecretsInput::Warn {
                return Err(denied(&s));
            }
            found.push(s);
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

/// Checks the parts of a request the broker sends for the caller (an `http` call's URL,
/// headers and body), like [`check_env`]: `deny` refuses naming the place; `redact` replaces
/// each secret by `[REDACTED:<rule>]` where a part may be cut (`redactable`), and refuses
/// where it may not (a URL with a marker in it is another request: fail closed); `warn`
/// reports only.
pub(crate) fn check_parts(
    profile: &SecretsProfile,
    parts: &mut [(String, Vec<u8>, bool)],
) -> Result<Vec<InputSecret>, BrokerError> {
    let mut found = Vec::new();
    for (place, v, redactable) in parts.iter_mut() {
        let hits = scanner().scan(v, TextKind::Stream, false);
        if hits.is_empty() {
            continue;
        }
        let first = found.len();
        for h in &hits {
            found.push(InputSecret {
                place: place.clone(),
                rule: h.rule,
            });
        }
        match profile.input {
            SecretsInput::Deny => return Err(denied(&found[first])),
            SecretsInput::Redact if !*redactable => return Err(denied(&found[first])),
            SecretsInput::Redact => *v = redact_all(v).0,
            SecretsInput::Warn => {}
        }
    }
    Ok(found)
}

/// `data` through the secrets redactor of output, at the policy's confidence: the bytes
/// shown (redacted, or cut before the first secret under `block`, or unchanged under
/// `warn`), the rules found, and whether `block` cut it.
pub(crate) fn redact_output(
    profile: &SecretsProfile,
    data: &[u8],
) -> (Vec<u8>, Vec<&'static str>, bool) {
    let mut r = Redactor::new(TextKind::Stream).with_min_confidence(profile.redact_min_confidence);
    let mut out = Vec::with_capacity(data.len());
    r.feed(data, &mut out);
    r.finish(&mut out);
    let rules = r.findings().to_vec();
    match profile.output {
        SecretsOutput::Warn => (data.to_vec(), rules, false),
        SecretsOutput::Block if !rules.is_empty() => {
            let marker = format!("[REDACTED:{}]", rules[0]);
            let cut = memchr::memmem::find(&out, marker.as_bytes()).unwrap_or(0);
            out.truncate(cut);
            (out, rules, true)
        }
        _ => (out, rules, false),
    }
}

/// Who a guard's delivery is for: under `secrets.output = "warn"` the caller gets the output
/// unchanged and the record (artifacts, inline output) its redacted copy, so that nothing
/// stored keeps a secret; under `redact` and `block` both get the same bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum To {
    /// The caller and the record.
    Both,
    /// The caller only.
    Caller,
    /// The record only.
    Record,
}

/// The [`StreamIo`] of an exec: output through redactors per stream, stdin through one.
pub struct Guard<'a> {
    profile: SecretsProfile,
    out: Redactor,
    err: Redactor,
    stdin: Redactor,
    sink: &'a mut dyn FnMut(Stream, &[u8], To),
    buf: Vec<u8>,
    /// Filled as the run goes.
    pub report: SecretsReport,
    /// Hashes (and stores) what the command reads on stdin, after redaction.
    pub stdin_tap: Option<crate::audit::artifacts::ArtifactWriter>,
}

impl<'a> Guard<'a> {
    /// A guard delivering to `sink`.
    pub fn new(profile: SecretsProfile, sink: &'a mut dyn FnMut(Stream, &[u8], To)) -> Guard<'a> {
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
                (self.sink)(stream, &self.buf[..cut], To::Both);
                self.buf.clear();
                self.report.blocked = Some(InputSecret {
                    place: name.to_string(),
                    rule: rules[0],
                });
                return false;
            }
        }
        // Warn delivered the raw bytes to the caller already: the record (artifacts, inline
        // heads and tails) gets these, redacted. Redact and (so far clean) block deliver
        // these to both.
        if !self.buf.is_empty() {
            let to = if self.profile.output == SecretsOutput::Warn {
                To::Record
            } else {
                To::Both
            };
            (self.sink)(stream, &self.buf, to);
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
            // Unchanged to the caller; scanned for the report, and recorded redacted.
            (self.sink)(stream, data, To::Caller);
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
        // The stored copy is redacted whatever the command is given (under `warn`, its
        // input unchanged): an artifact never keeps a secret.
        let redacted = (self.profile.input == SecretsInput::Warn).then(|| buf.clone());
        let go = self.stdin_result(before, buf, data, out);
        match redacted {
            Some(r) => self.tap_stdin(&r),
            None => self.tap_stdin(&out[from..]),
        }
        go
    }

    fn input_end(&mut self, out: &mut Vec<u8>) -> bool {
        let before = self.stdin.findings().len();
        let mut buf = Vec::new();
        self.stdin.finish(&mut buf);
        let from = out.len();
        // The stored copy is redacted whatever the command is given (under `warn`, its
        // input unchanged): an artifact never keeps a secret.
        let redacted = (self.profile.input == SecretsInput::Warn).then(|| buf.clone());
        let go = self.stdin_result(before, buf, &[], out);
        match redacted {
            Some(r) => self.tap_stdin(&r),
            None => self.tap_stdin(&out[from..]),
        }
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
    // Commands are shown shell-quoted: a secret split by quoting is cut out too.
    let fix = |t: &mut String| {
        let (out, rules) = redact_levels(t, 3);
        if !rules.is_empty() {
            *t = out;
        }
    };
    d.commands.iter_mut().for_each(fix);
    d.unanalysable.iter_mut().for_each(fix);
    for r in &mut d.rules {
        fix(&mut r.subject);
    }
}

/// `text` with every secret replaced by `[REDACTED:<rule>]` (for messages that quote input).
pub fn redact_text(text: &str) -> String {
    // Through the redactor, as output: what it scans is normalised (escape sequences
    // removed), which a scan of the raw text is not.
    let (out, found) = redact_all(text.as_bytes());
    if found.is_empty() {
        return text.to_string();
    }
    String::from_utf8_lossy(&out).into_owned()
}
