//! `gateway http`'s front end: the body read (a file or stdin, with the caller's rights), the
//! broker's `http` tool called, and its report rendered — the response body on stdout (a
//! text body; a binary one is in the record), what happened on stderr, or the typed
//! `HttpReport` under `--json` — with its exit code (0 when a response came, whatever its
//! status; 120 refused, 121 not approved).

use super::*;
use broker::report::{Note, Outcome};
use broker::request::{Content, Http, Input};
use broker::tools::http::{self as bh, HttpReport};

/// Runs `gateway http`.
pub(super) fn run_http(cli: &Call, h: &Http) -> Report {
    let policy = match load_policy(cli) {
        Ok(p) => p,
        Err(e) => return failed(exit::POLICY, e),
    };
    let body = match &h.body {
        None => None,
        Some(c) => match body_of(cli, c) {
            Ok(b) => Some(b),
            Err(e) => return failed(exit::USAGE, e),
        },
    };
    let place = effective_place(cli);
    let req = bh::HttpCall {
        policy: &policy,
        state_dir: state_dir(cli),
        session: cli.cx.session_id(),
        caller: cli.cx.caller("cli"),
        context: cli.cx.clone(),
        workspace: place.workspace,
        method: h.method.clone(),
        url: h.url.clone(),
        headers: h
            .headers
            .iter()
            .map(|x| (x.name.clone(), x.value.clone()))
            .collect(),
        body,
        timeout: h.timeout,
        max_redirects: h.max_redirects,
        max_body: h.max_body,
        cancel: None,
    };
    let command = format!("{} {}", h.method, broker::redact_text(&h.url));
    let mut ask = |d: &Decision| {
        tty_confirm(&format!(
            "gateway: this HTTP request needs approval:\n  {}{}\nSend it? [y/N] ",
            crate::shown::visible(&command),
            crate::shown::visible_lines(&rules_text(d))
        )) == Some(true)
    };
    match bh::http(req, &mut ask) {
        Ok(r) => report_of(&r),
        Err(e) => broker_failed(e),
    }
}

/// The request body: the text given, or what the file or stdin holds (with the caller's
/// rights, at most [`bh::MAX_BODY`] bytes).
fn body_of(cli: &Call, c: &Content) -> Result<Vec<u8>, String> {
    let max = bh::MAX_BODY;
    let v = match c {
        Content::Text(t) => t.clone().into_bytes(),
        Content::From(Input::Stdin) => {
            let mut v = Vec::new();
            cli.cx
                .read_stdin_up_to(&mut v, max)
                .map_err(|e| format!("--data-file -: reading stdin: {e}"))?;
            v
        }
        Content::From(Input::File(f)) => cli
            .cx
            .as_client(|| crate::sandbox::read_named(f, max, cli.cx.cancel()))
            .and_then(|r| r)
            .map_err(|e| format!("--data-file {}: {e}", f.display()))?,
    };
    if v.len() as u64 > max {
        return Err(format!(
            "--data-file: the body is over {max} bytes, the most `http` sends"
        ));
    }
    Ok(v)
}

/// The report of a call, with its exit code and what a person reads beside the body.
fn report_of(r: &HttpReport) -> Report {
    let exit = match r.refusal.as_ref().and_then(|v| v["kind"].as_str()) {
        None => 0,
        Some("not_approved") => exit::NOT_APPROVED,
        Some(_) => exit::DENIED,
    };
    let mut notes = Vec::new();
    if let Some(v) = &r.refusal {
        notes.push(Note::new(format!(
            "{} (rule {})",
            v["message"].as_str().unwrap_or("refused"),
            v["rule"].as_str().unwrap_or("?")
        )));
    }
    let hops = r.redirects.len();
    if hops > 1 {
        let chain: Vec<String> = r
            .redirects
            .iter()
            .map(|h| match h.status {
                Some(s) => format!("{s} {}", h.url),
                None => format!("refused {}", h.url),
            })
            .collect();
        notes.push(Note::new(format!("redirects: {}", chain.join(" -> "))));
    }
    if r.body_binary {
        notes.push(Note::new(format!(
            "the body is binary ({} bytes): not printed; {}",
            r.body_bytes,
            match &r.body_artifact {
                Some(_) => format!("`gateway log show {}` has it", r.audit_seq),
                None => "it was not stored ([audit] store_output = false)".into(),
            }
        )));
    }
    if r.body_truncated {
        notes.push(Note::new(format!(
            "the body was cut at {} bytes (--max-body)",
            r.body_bytes
        )));
    }
    if r.body_blocked {
        notes.push(Note::new(
            "the body was cut before a secret ([secrets] output = \"block\")",
        ));
    }
    Report {
        exit,
        outcome: Outcome::Http(broker::report::Json::of(r)),
        notes,
    }
}

/// Renders an `http` report: the JSON under `--json`, else the text body on stdout.
pub(super) fn render(cli: &Call, j: &broker::report::Json<HttpReport>) {
    if cli.json {
        outln!(cli, "{}", j.value());
    } else if let Some(b) = j.value()["body"].as_str() {
        outs!(cli, "{b}");
    }
}
