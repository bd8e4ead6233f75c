//! MCP results within a budget (issue 15): each tool result's text — its JSON, which is also
//! its structured content — is at most `[output] mcp_budget` characters (default 30,000), or
//! what the call asked with `max_output_chars` (within `OutputProfile::MCP_BUDGET_MIN..=MAX`).
//! A longer output keeps its head and its tail; the middle is replaced by a marker saying how
//! much was cut and where the whole is (`gateway log show SEQ`, the artifact id).
//!
//! What is cut last: the decision, the rules, a refusal and an error — a budget cuts them only
//! when the rest of the result, cut, still leaves it over, and then visibly, head and tail
//! kept around the same marker (issue 38: a 100 KB command wrapped in `eval`s came back as
//! 3.4 M characters of decision against a budget of 4,000). The whole result is bounded.

use serde_json::Value;

use crate::model::OutputProfile;

/// Keys whose values are shortened last: why a call was refused or failed, and what decided.
const KEPT: &[&str] = &[
    "error",
    "refusal",
    "rules",
    "decision",
    "budget",
    "gateway_notice",
    "audit",
    "enforcement",
    "unanalysable",
    "commands",
];

/// The budget of one call: the call's `max_output_chars` within the hard bounds, else the
/// policy's.
pub fn of_call(policy: &OutputProfile, asked: Option<u64>) -> usize {
    let b = asked.map_or(policy.mcp_budget, |a| {
        a.clamp(OutputProfile::MCP_BUDGET_MIN, OutputProfile::MCP_BUDGET_MAX)
    });
    usize::try_from(b).unwrap_or(usize::MAX)
}

/// Characters `c` takes in JSON text (serde_json's escapes).
fn escaped(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        _ => 1,
    }
}

/// Characters `s` takes as a JSON string, quotes included.
pub fn str_len(s: &str) -> usize {
    2 + s.chars().map(escaped).sum::<usize>()
}

/// Characters of `v` as compact JSON text (what the result's text content is).
pub fn value_len(v: &Value) -> usize {
    v.to_string().chars().count()
}

/// The longest head of `s` taking at most `max` JSON characters, ended at a line break when
/// one is in its second half.
pub fn head_within(s: &str, max: usize) -> &str {
    let mut used = 0;
    let mut end = s.len();
    for (i, c) in s.char_indices() {
        used += escaped(c);
        if used > max {
            end = i;
            break;
        }
    }
    let h = &s[..end];
    if end == s.len() {
        return h;
    }
    match h.rfind('\n') {
        Some(n) if n + 1 >= h.len() / 2 => &h[..=n],
        _ => h,
    }
}

/// The longest tail of `s` taking at most `max` JSON characters, started after a line break
/// when one is in its first half.
pub fn tail_within(s: &str, max: usize) -> &str {
    let mut used = 0;
    let mut start = 0;
    for (i, c) in s.char_indices().rev() {
        used += escaped(c);
        if used > max {
            start = i + c.len_utf8();
            break;
        }
    }
    let t = &s[start..];
    if start == 0 {
        return t;
    }
    match t.find('\n') {
        Some(n) if n < t.len() / 2 => &t[n + 1..],
        _ => t,
    }
}

/// `head` + a marker + `tail`, the marker saying `cut` (what was left out) and `whole`
/// (where all of it is).
pub fn joined(head: &str, cut: &str, tail: &str, whole: &str) -> String {
    let mut s = String::with_capacity(head.len() + tail.len() + 200);
    s.push_str(head);
    if !head.is_empty() && !head.ends_with('\n') {
        s.push('\n');
    }
    s.push_str(&format!(
        "[gateway: {cut} cut here to keep this result within its output budget; {whole}]\n"
    ));
    s.push_str(tail);
    s
}

/// How many characters a marker of [`joined`] takes at most (JSON-escaped).
fn marker_len(whole: &str) -> usize {
    str_len(&joined("", "18446744073709551615 characters", "", whole)) + 2
}

/// Shortens `v` (a tool's report) to `budget` characters of JSON: the largest strings and
/// arrays outside [`KEPT`] lose their middle (head and tail kept), longest first; then, if it
/// is still over, those inside [`KEPT`] too. Returns the characters cut, 0 when it fitted.
/// `whole` says where the whole output is.
pub fn fit(v: &mut Value, budget: usize, whole: &str) -> usize {
    let mut cut = 0;
    for kept in [false, true] {
        // A few rounds: each shortens the largest part by what is over, and escaping or
        // markers may leave a little over.
        for _ in 0..64 {
            let len = value_len(v);
            if len <= budget {
                return cut;
            }
            let over = len - budget;
            let Some(part) = largest(v, kept).and_then(|p| v.pointer_mut(&p)) else {
                break;
            };
            let size = part_len(part);
            let target = size.saturating_sub(over);
            let before = size;
            shrink(part, target, whole);
            let after = part_len(part);
            if after >= before {
                break;
            }
            cut += before - after;
        }
    }
    cut
}

fn part_len(v: &Value) -> usize {
    match v {
        Value::String(s) => str_len(s),
        v => value_len(v),
    }
}

/// The JSON pointer of the largest string or array (of more than two items) outside
/// [`KEPT`] (inside too, with `kept`).
fn largest(v: &Value, kept: bool) -> Option<String> {
    fn walk(v: &Value, at: &str, best: &mut Option<(usize, String)>, kept: bool) {
        let size = match v {
            Value::String(s) if s.len() > 64 => str_len(s),
            Value::Array(a) if a.len() > 2 => value_len(v),
            _ => 0,
        };
        if size > 0 && best.as_ref().is_none_or(|(b, _)| size > *b) {
            // A candidate array is cut item by item, not searched inside.
            *best = Some((size, at.to_string()));
            return;
        }
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    if kept || !KEPT.contains(&k.as_str()) {
                        let k = k.replace('~', "~0").replace('/', "~1");
                        walk(x, &format!("{at}/{k}"), best, kept);
                    }
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    walk(x, &format!("{at}/{i}"), best, kept);
                }
            }
            _ => {}
        }
    }
    let mut best = None;
    walk(v, "", &mut best, kept);
    best.map(|(_, p)| p)
}

/// Shortens one string or array to about `target` characters.
fn shrink(v: &mut Value, target: usize, whole: &str) {
    match v {
        Value::String(s) => {
            let room = target.saturating_sub(marker_len(whole)) / 2;
            let head = head_within(s, room);
            let tail = tail_within(&s[head.len()..], room);
            let middle = &s[head.len()..s.len() - tail.len()];
            let (n, lines) = (middle.chars().count(), middle.matches('\n').count());
            *s = joined(
                head,
                &format!("{n} characters ({lines} lines)"),
                tail,
                whole,
            );
        }
        Value::Array(a) => {
            // Items from both ends, alternately, while they fit.
            let room = target.saturating_sub(2);
            let sizes: Vec<usize> = a.iter().map(|x| value_len(x) + 1).collect();
            let (mut i, mut j, mut used) = (0, a.len(), 0);
            loop {
                let front = i < j && used + sizes[i] <= room / 2 + room % 2;
                if front {
                    used += sizes[i];
                    i += 1;
                }
                let back = i < j && used + sizes[j - 1] <= room;
                if back {
                    used += sizes[j - 1];
                    j -= 1;
                }
                if !front && !back {
                    break;
                }
            }
            // An array whose first item alone is over its share keeps that item (cut in
            // its turn, as a string of its own), not nothing.
            let i = i.max(1).min(j);
            a.drain(i..j);
        }
        _ => {}
    }
}

/// The note a cut result carries (top-level `budget`): the limit, what was cut and where
/// the whole output is. Arrays cut keep their items' shape, so this note is what says so.
pub fn note(budget: usize, cut: usize, whole: &str) -> Value {
    serde_json::to_value(crate::broker::report::BudgetNote {
        limit_chars: budget,
        cut_chars: cut,
        whole,
    })
    .unwrap_or_default()
}

/// Bounds a report value: fits it within `budget` (keeping room for the note) and, when
/// something was cut, adds the `budget` note.
pub fn bound(v: &mut Value, budget: usize, whole: &str) {
    if value_len(v) <= budget {
        return;
    }
    let room = budget.saturating_sub(value_len(&note(budget, usize::MAX, whole)) + 12);
    let cut = fit(v, room, whole);
    if cut > 0
        && let Value::Object(m) = v
    {
        m.insert("budget".into(), note(budget, cut, whole));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_string_keeps_head_and_tail_within_the_budget() {
        let s: String = (1..=100_000).map(|i| format!("{i}\n")).collect();
        let mut v = serde_json::json!({"decision": "allow", "stdout": s, "error": "x".repeat(10)});
        bound(&mut v, 5_000, "see `gateway log show 7`");
        assert!(value_len(&v) <= 5_000, "{}", value_len(&v));
        let out = v["stdout"].as_str().expect("stdout");
        assert!(out.starts_with("1\n2\n3\n"), "{out}");
        assert!(out.ends_with("99999\n100000\n"), "{out}");
        assert!(
            out.contains("cut here") && out.contains("`gateway log show 7`"),
            "{out}"
        );
        assert!(
            v["budget"]["cut_chars"]
                .as_u64()
                .is_some_and(|c| c > 500_000),
            "{v}"
        );
    }

    #[test]
    fn errors_and_refusals_are_cut_last_and_visibly() {
        // Issue 38: what decided and why it was refused once kept any length (3.4 M
        // characters of an `eval`-wrapped command against a budget of 4,000).
        let long = "why ".repeat(5_000);
        let mut v = serde_json::json!({
            "error": "short",
            "refusal": {"reason": long},
            "decision": {"commands": [long, long, long, long]},
            "x": "y".repeat(100),
        });
        bound(&mut v, 2_000, "see `gateway log show 9`");
        assert!(value_len(&v) <= 2_000, "{}", value_len(&v));
        // The rest was cut first: a short error stays whole.
        assert_eq!(v["error"].as_str(), Some("short"));
        let r = v["refusal"]["reason"].as_str().expect("reason");
        assert!(r.starts_with("why why") && r.contains("cut here"), "{r}");
        assert!(r.contains("`gateway log show 9`"), "{r}");
        assert!(
            !v["decision"]["commands"]
                .as_array()
                .expect("commands")
                .is_empty()
        );
        // A kept part under budget is not touched when the rest fits.
        let mut w = serde_json::json!({"refusal": {"reason": "no"}, "stdout": long});
        bound(&mut w, 2_000, "w");
        assert_eq!(w["refusal"]["reason"].as_str(), Some("no"));
    }

    #[test]
    fn arrays_lose_middle_items_whole() {
        let lines: Vec<Value> = (1..=10_000)
            .map(|i| serde_json::json!([i, format!("line {i}")]))
            .collect();
        let mut v = serde_json::json!({"output": {"kind": "read", "lines": lines}});
        bound(&mut v, 3_000, "w");
        assert!(value_len(&v) <= 3_000, "{}", value_len(&v));
        let l = v["output"]["lines"].as_array().expect("lines");
        assert_eq!(l[0], serde_json::json!([1, "line 1"]));
        assert_eq!(l[l.len() - 1], serde_json::json!([10_000, "line 10000"]));
        assert!(l.len() > 20, "{}", l.len());
    }

    #[test]
    fn escaping_is_counted() {
        // Quotes and control characters take more than one character of JSON text each.
        let s = "\"\u{1}".repeat(20_000);
        let mut v = serde_json::json!({"stdout": s});
        bound(&mut v, 4_000, "w");
        assert!(value_len(&v) <= 4_000, "{}", value_len(&v));
    }

    #[test]
    fn call_budgets_are_bounded() {
        let p = OutputProfile::default();
        assert_eq!(of_call(&p, None), 30_000);
        assert_eq!(of_call(&p, Some(5)), 4_000);
        assert_eq!(of_call(&p, Some(u64::MAX)), 200_000);
        assert_eq!(of_call(&p, Some(50_000)), 50_000);
    }
}
