//! One gate for everything that leaves the broker (DESIGN.md, "Secrets never recorded or
//! shown"; issue 38): an audit record before it is appended, a call's report before a front
//! end renders or sends it, an MCP tool result before it is bounded. The gate takes the
//! typed value whole — every string in it, at any depth, object keys too — so that a field
//! added to a record or a report later cannot be forgotten, as one field redacted by name
//! (`rec.cwd`, `url`, ...) could be.
//!
//! A string is scanned whole (the engine's prefilter makes a clean one cheap); each finding
//! is replaced by `[REDACTED:<rule>]`. Text redacted before (the output of a command, a diff)
//! keeps its markers: a finding that covers only markers (a keyword rule reading
//! `password=[REDACTED:github-pat]`) is not redacted again into another rule's name.
//!
//! Records are also bounded: a string over [`RECORD_STRING_MAX`] bytes keeps its head and
//! its tail around a marker saying how much was cut (a 100 KB command line wrapped in
//! `eval`s once made a record of megabytes).
//!
//! What stays raw, by design: the undo store (backups, journal, snapshot indexes) keeps the
//! real names of the files it restores; every view of it is a report and passes here.

use crate::secrets::{TextKind, scanner};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;

/// The longest string an audit record keeps, in bytes (a command line's argument, an
/// error): past it, head and tail around a marker.
pub const RECORD_STRING_MAX: usize = 64 << 10;

/// The record's fields that hold digests the broker computed (hex): never text from a
/// caller, so never scanned (a digest is not a secret, and a changed one would point
/// nowhere). Only a value that is hex through and through is let by.
const RECORD_DIGESTS: &[&str] = &[
    "prev",
    "sha256",
    "blake3",
    "artifact",
    "policy_sha256",
    "policy_replaced",
];

/// Whether `t` is only redaction markers (`[REDACTED:<rule>]`, `[REDACTED]`) and the
/// quotes, spaces and punctuation around them: what an earlier redaction left.
fn only_markers(t: &[u8]) -> bool {
    let mut i = 0;
    let mut marker = false;
    while i < t.len() {
        if t[i..].starts_with(b"[REDACTED") {
            match memchr::memchr(b']', &t[i..]) {
                Some(n) => {
                    i += n + 1;
                    marker = true;
                    continue;
                }
                None => return false,
            }
        }
        if t[i].is_ascii_alphanumeric() || t[i] >= 0x80 {
            return false;
        }
        i += 1;
    }
    marker
}

/// `text` with every secret replaced by `[REDACTED:<rule>]`; unchanged (borrowed) when it
/// holds none. Markers of an earlier redaction are kept as they are.
pub fn text(text: &str) -> Cow<'_, str> {
    let raw = text.as_bytes();
    if memchr::memchr2(0x1b, 0, raw).is_some() {
        // Escape sequences or UTF-16 (NUL-interleaved): read normalised, as output is.
        let r = super::redact_text(text);
        return if r == text {
            Cow::Borrowed(text)
        } else {
            Cow::Owned(r)
        };
    }
    let found = scanner().scan(raw, TextKind::Stream, false);
    let mut out: Vec<u8> = Vec::new();
    let mut pos = 0;
    for f in found {
        if f.start < pos || only_markers(&raw[f.start..f.end]) {
            continue;
        }
        if out.is_empty() {
            out.reserve(raw.len());
        }
        out.extend_from_slice(&raw[pos..f.start]);
        out.extend_from_slice(b"[REDACTED:");
        out.extend_from_slice(f.rule.as_bytes());
        out.push(b']');
        pos = f.end;
    }
    if pos == 0 {
        return Cow::Borrowed(text);
    }
    out.extend_from_slice(&raw[pos..]);
    Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

/// Every string of `v` (values and object keys, at any depth) redacted; whether any changed.
pub fn value(v: &mut Value) -> bool {
    strings(v, &|_, _| false)
}

/// Every string of `v` redacted but those `skip(key, string)` lets by. The strings are
/// scanned together, one scan over all of them joined by newlines (a report of 150,000
/// lines scanned line by line took a minute; joined, well under a second), and each finding
/// is cut out of the strings it covers: a secret split over two strings (a key block over
/// a file's lines) goes from each.
fn strings(v: &mut Value, skip: &dyn Fn(&str, &str) -> bool) -> bool {
    let joined = joined_strings(v, skip);
    // A string holding escape sequences or NULs is read normalised on its own too, as
    // output is (`ghp_…ESC[0m…` in an argument: the joined scan reads it raw).
    let normalised = walk(v, &mut |key, s| {
        if skip(key, s) || memchr::memchr2(0x1b, 0, s.as_bytes()).is_none() {
            return false;
        }
        match text(s) {
            Cow::Owned(r) => {
                *s = r;
                true
            }
            Cow::Borrowed(_) => false,
        }
    });
    joined | normalised
}

/// [`strings`]' scan of every string joined (see there).
fn joined_strings(v: &mut Value, skip: &dyn Fn(&str, &str) -> bool) -> bool {
    let mut joined: Vec<u8> = Vec::new();
    let mut spans: Vec<(usize, usize)> = Vec::new();
    walk(v, &mut |key, s| {
        if !skip(key, s) {
            spans.push((joined.len(), joined.len() + s.len()));
            joined.extend_from_slice(s.as_bytes());
            joined.push(b'\n');
        } else {
            spans.push((usize::MAX, usize::MAX));
        }
        false
    });
    let found: Vec<_> = scanner()
        .scan(&joined, TextKind::Stream, false)
        .into_iter()
        .filter(|f| !only_markers(&joined[f.start..f.end]))
        .collect();
    if found.is_empty() {
        return false;
    }
    let mut i = 0;
    walk(v, &mut |_, s| {
        let (start, end) = spans[i];
        i += 1;
        if start == usize::MAX {
            return false;
        }
        let hits: Vec<(usize, usize, &str)> = found
            .iter()
            .filter(|f| f.start < end && start < f.end)
            .map(|f| (f.start.max(start) - start, f.end.min(end) - start, f.rule))
            .collect();
        if hits.is_empty() {
            return false;
        }
        let raw = s.as_bytes();
        let mut out = Vec::with_capacity(raw.len());
        let mut pos = 0;
        for (a, b, rule) in hits {
            if a < pos {
                continue;
            }
            out.extend_from_slice(&raw[pos..a]);
            out.extend_from_slice(format!("[REDACTED:{rule}]").as_bytes());
            pos = b;
        }
        out.extend_from_slice(&raw[pos..]);
        *s = String::from_utf8_lossy(&out).into_owned();
        true
    })
}

/// Calls `f(key, string)` on every string of `v`, `key` the name of the object field that
/// holds it (directly or in an array); object keys are passed (and may be changed) with the
/// key `""`. Returns whether any call said it changed something.
fn walk(v: &mut Value, f: &mut dyn FnMut(&str, &mut String) -> bool) -> bool {
    fn go(v: &mut Value, key: &str, f: &mut dyn FnMut(&str, &mut String) -> bool) -> bool {
        match v {
            Value::String(s) => f(key, s),
            Value::Array(a) => a.iter_mut().fold(false, |c, x| go(x, key, f) | c),
            Value::Object(m) => {
                let mut changed = false;
                for (k, x) in m.iter_mut() {
                    changed |= go(x, k, f);
                }
                // Keys after the values (the order of a walk is the same whether or not it
                // changes keys): a changed key moves its value.
                let renamed: Vec<(String, String)> = m
                    .keys()
                    .filter_map(|k| {
                        let mut n = k.clone();
                        f("", &mut n).then(|| (k.clone(), n))
                    })
                    .collect();
                for (old, new) in renamed {
                    if let Some(x) = m.remove(&old) {
                        m.insert(new, x);
                        changed = true;
                    }
                }
                changed
            }
            _ => false,
        }
    }
    go(v, "", f)
}

/// A typed value through the gate: every string in what it serializes to redacted, and the
/// value read back when something was. A value that does not serialize or read back (a bug:
/// the gate's types do both) is left as it was, and the error returned.
pub fn typed<T: Serialize + DeserializeOwned>(t: &mut T) -> Result<(), serde_json::Error> {
    if let Some(n) = gated(t)? {
        *t = n;
    }
    Ok(())
}

/// `t` through the gate, when it holds something to redact (`None`: it is shown as it is).
pub fn gated<T: Serialize + DeserializeOwned>(t: &T) -> Result<Option<T>, serde_json::Error> {
    let mut v = serde_json::to_value(t)?;
    if value(&mut v) {
        return T::deserialize(v).map(Some);
    }
    Ok(None)
}

/// `s` cut to at most about `max` bytes: its head and its tail around a marker saying how
/// many bytes were cut; unchanged when it fits. Cuts fall on character boundaries.
pub fn bounded(s: &mut String, max: usize) -> bool {
    if s.len() <= max {
        return false;
    }
    let half = max / 2;
    let mut h = half;
    while !s.is_char_boundary(h) {
        h -= 1;
    }
    let mut t = s.len() - half;
    while !s.is_char_boundary(t) {
        t += 1;
    }
    let cut = t - h;
    *s = format!(
        "{}[gateway: {cut} bytes cut here; the record keeps at most {max} bytes of one field]{}",
        &s[..h],
        &s[t..]
    );
    true
}

/// An audit record before it is appended: every string redacted, then bounded to
/// [`RECORD_STRING_MAX`] bytes, except the digests the broker computed ([`RECORD_DIGESTS`]).
pub fn record(rec: &mut crate::audit::Record) {
    let Ok(mut v) = serde_json::to_value(&*rec) else {
        return;
    };
    let digest = |key: &str, s: &str| {
        RECORD_DIGESTS.contains(&key) && s.bytes().all(|b| b.is_ascii_hexdigit())
    };
    let redacted = strings(&mut v, &digest);
    let cut = walk(&mut v, &mut |_, s| bounded(s, RECORD_STRING_MAX));
    if (redacted || cut)
        && let Ok(r) = crate::audit::Record::deserialize(v)
    {
        *rec = r;
    }
}

#[cfg(test)]
#[path = "gate_tests.rs"]
mod tests;
