//! `gateway log ...` and `gateway keys ...`.

use super::{Call, broker_failed, exit, failed, state_dir, to_json};
use crate::broker::authz;
use crate::broker::log::{self, Filter, Record, Stored};
use crate::broker::refusal::Refusal;
use crate::broker::report::log::LogOutcome;
use crate::broker::report::{Outcome, Report};
use crate::broker::request::{KeysRequest as KeysCmd, LogRequest as LogCmd};
use std::io::Write;
use std::time::Duration;

/// A log result's report.
fn done(o: LogOutcome) -> Report {
    Report::new(0, Outcome::Log(o))
}

#[allow(clippy::too_many_lines, reason = "one arm per log subcommand")]
pub(super) fn run(cli: &Call, cmd: &LogCmd) -> Report {
    let state = state_dir(cli);
    // Through the daemon, a client sees its own records (an auditor or the admin all).
    let ctx = cli.cx.clone();
    let seen_uid = authz::seen_uid(&ctx);
    match cmd {
        LogCmd::Verify { anchor, key } => {
            match log::verify(&cli.cx, &state, anchor.as_deref(), key.as_deref()) {
                Ok(verified) => Report::new(
                    if verified.ok { 0 } else { exit::VERIFY_FAILED },
                    Outcome::Log(LogOutcome::Verify {
                        verified,
                        anchored: anchor.is_some(),
                    }),
                ),
                Err(e) => broker_failed(e),
            }
        }
        LogCmd::Query { filter, limit } => {
            // As the records write times; a time past what RFC 3339 writes (a request can
            // carry any) is its last second, which orders the same against every record.
            let time = |t: &Option<std::time::SystemTime>| {
                t.map(|t| {
                    let last = std::time::UNIX_EPOCH + Duration::from_secs(253_402_300_799);
                    humantime::format_rfc3339_micros(t.clamp(std::time::UNIX_EPOCH, last))
                        .to_string()
                })
            };
            let f = Filter {
                tool: filter.tool.clone(),
                decision: filter.decision.map(|d| d.as_str().to_string()),
                since: time(&filter.since),
                until: time(&filter.until),
                session: filter.session.clone(),
                path: filter.path.clone(),
                contains: filter.contains.clone(),
                exit_code: filter.exit_code,
                limit: *limit,
                uid: seen_uid,
            };
            match log::query(&state, &f) {
                Ok(result) => done(LogOutcome::Query { result }),
                Err(e) => broker_failed(e),
            }
        }
        LogCmd::Tail { lines, follow } => {
            let f = Filter {
                limit: *lines,
                uid: seen_uid,
                ..Filter::default()
            };
            let r = match log::query(&state, &f) {
                Ok(r) => r,
                Err(e) => return broker_failed(e),
            };
            if !*follow {
                return done(LogOutcome::Tail { records: r.records });
            }
            // `-f` shows records as they come, until the call ends: they go to the call's
            // streams as it runs, the first ones too (in order before them).
            let mut last = r.records.last().map_or(0, |r| r.seq);
            emit(cli, cli.json, &r.records);
            loop {
                // The call ends with its client (or its server): a daemon's client that went
                // away leaves no follower behind holding a slot.
                if cli.cx.cancelled() {
                    return Report::streamed(130);
                }
                match log::show(&state, last + 1) {
                    Ok(Some(s)) => {
                        last = s.record.seq;
                        if seen_uid.is_none_or(|u| u == s.record.caller.uid) {
                            emit(cli, cli.json, std::slice::from_ref(&s.record));
                        }
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(200)),
                    Err(e) => return broker_failed(e),
                }
            }
        }
        LogCmd::Show { seq, output_limit } => match log::show(&state, *seq) {
            Ok(None) => failed(1, format!("no record {seq} in {}", state.display())),
            Ok(Some(shown))
                if authz::may_see(&ctx, shown.record.caller.uid, String::new).is_err() =>
            {
                let r = Refusal::NotYours {
                    what: format!("record {seq} (and its stored output)"),
                };
                let args = vec!["show".into(), seq.to_string()];
                broker_failed(authz::refused(&state, &ctx, "log", args, r).into())
            }
            Ok(Some(mut shown)) => {
                for a in &mut shown.artifacts {
                    match output_limit {
                        None => a.omit(),
                        Some(n) => a.limit(*seq, *n),
                    }
                }
                done(LogOutcome::Show {
                    shown: Box::new(shown),
                })
            }
            Err(e) => broker_failed(e),
        },
        LogCmd::Checkpoint { export } => match log::checkpoint(&cli.cx, &state) {
            Ok(Some(checkpoint)) => done(LogOutcome::Checkpoint {
                checkpoint,
                export: *export,
            }),
            Ok(None) => failed(
                1,
                format!(
                    "no checkpoint yet in {} (nothing recorded)",
                    state.display()
                ),
            ),
            Err(e) => broker_failed(e),
        },
        LogCmd::Gc => {
            if let Err(r) = authz::require_admin(&ctx, "log gc") {
                let args = vec!["gc".into()];
                return broker_failed(authz::refused(&state, &ctx, "log", args, r).into());
            }
            let policy = match super::load_policy(cli) {
                Ok(p) => p,
                Err(e) => return failed(exit::POLICY, e),
            };
            match log::gc(&super::fs::context(cli, &policy)) {
                Ok(collected) => done(LogOutcome::Gc { collected }),
                Err(e) => broker_failed(e),
            }
        }
    }
}

/// Prints records as `log tail -f` streams them: outside a report, so each passes the gate
/// here (a record written before the gate existed, or by another build, is shown redacted).
fn emit(cli: &Call, json: bool, records: &[Record]) {
    let records: Vec<Record> = records
        .iter()
        .map(|r| {
            let mut r = r.clone();
            crate::broker::gate::record(&mut r);
            r
        })
        .collect();
    let records = &records[..];
    if json {
        let mut out = cli.cx.stdout_writer();
        for r in records {
            let _ = writeln!(out, "{}", to_json(r));
        }
        let _ = out.flush();
    } else {
        print_table(cli, records);
    }
}

fn print_table(cli: &Call, records: &[Record]) {
    use super::human::{Cell, Table, colour, effect_style};
    let mut t = Table::new(&[true, false, false, false, true, false]);
    for r in records {
        let status = match (r.exit_code, r.signal, &r.error) {
            (Some(c), _, _) => c.to_string(),
            (None, Some(s), _) => format!("sig{s}"),
            (None, None, Some(_)) => "error".into(),
            _ => "-".into(),
        };
        // The argv shell-quoted and escaped; a long one is cut visibly, saying how much is
        // left out and where it is shown whole.
        let mut args = crate::shown::argv_shown(&r.args);
        if args.chars().count() > 100 {
            let total = args.chars().count();
            args = args.chars().take(80).collect();
            args.push_str(&format!(
                " …[{} more characters: gateway log show {}]",
                total - 80,
                r.seq
            ));
        }
        let effect = crate::shown::visible(&r.decision.effect).into_owned();
        t.row(vec![
            Cell::new(r.seq.to_string()),
            Cell::new(r.time.get(..19).unwrap_or(&r.time)),
            Cell::new(crate::shown::visible(&r.tool)),
            Cell::styled(effect.clone(), effect_style(&effect)),
            Cell::new(status),
            Cell::new(args),
        ]);
    }
    let mut out = cli.cx.stdout_writer();
    for l in t.lines(colour(cli)) {
        let _ = writeln!(out, "{l}");
    }
    let _ = out.flush();
}

pub(super) fn keys(cli: &Call, cmd: KeysCmd) -> Report {
    let state = state_dir(cli);
    match cmd {
        KeysCmd::Export => {
            if let Err(e) = log::ensure_keys(&state) {
                return broker_failed(e);
            }
            match log::public_keys(&state) {
                Ok(keys) => done(LogOutcome::KeysExport { keys }),
                Err(e) => broker_failed(e),
            }
        }
        KeysCmd::Rotate => match super::load_policy(cli) {
            Err(e) => failed(exit::POLICY, e),
            Ok(policy) => match authz::require_admin(&cli.cx, "keys rotate")
                .map_err(|r| {
                    let ctx = cli.cx.clone();
                    authz::refused(&state, &ctx, "keys", vec!["rotate".into()], r)
                })
                .map_err(crate::broker::BrokerError::from)
                .and_then(|()| log::rotate(&super::fs::context(cli, &policy)))
            {
                Ok(rotated) => done(LogOutcome::KeysRotate { rotated }),
                Err(e) => broker_failed(e),
            },
        },
    }
}

/// Renders a log result here (the caller's terminal or pipe): under `--json` its JSON, else
/// its human text.
#[allow(clippy::too_many_lines, reason = "one arm per result")]
pub(super) fn render(cli: &Call, o: &LogOutcome) {
    let json = cli.json;
    match o {
        LogOutcome::Verify { verified: v, .. } if json => outln!(cli, "{}", to_json(v)),
        LogOutcome::Verify {
            verified: v,
            anchored,
        } => {
            let r = &v.report;
            if v.ok {
                outln!(
                    cli,
                    "gateway log verify: ok: {} record(s), {} checkpoint(s) checked, {} key epoch(s); the newest checkpoint covers {} record(s){}{}; root {}",
                    r.records,
                    r.checkpoints,
                    r.epochs,
                    r.checkpointed,
                    if r.newer > 0 {
                        format!(
                            " ({} newer record(s), appended while this ran, go into the daemon's next checkpoint)",
                            r.newer
                        )
                    } else {
                        String::new()
                    },
                    if *anchored { ", the anchor holds" } else { "" },
                    r.root
                );
            } else {
                if let Some(p) = r.problems.first() {
                    errln!(cli, "gateway log verify: FAILED: {p}");
                }
                for p in r.problems.iter().skip(1).take(9) {
                    errln!(cli, "  also: {p}");
                }
                if r.problems.len() > 10 {
                    errln!(cli, "  ({} more)", r.problems.len() - 10);
                }
            }
        }
        LogOutcome::Query { result } if json => outln!(cli, "{}", to_json(result)),
        LogOutcome::Query { result } => print_table(cli, &result.records),
        LogOutcome::Tail { records } => emit(cli, json, records),
        LogOutcome::Show { shown } if json => outln!(cli, "{}", to_json(shown)),
        LogOutcome::Show { shown } => print_shown(cli, shown),
        LogOutcome::Checkpoint { checkpoint, .. } if json => {
            outln!(cli, "{}", to_json(checkpoint));
        }
        LogOutcome::Checkpoint { checkpoint, export } => {
            // Said before the checkpoint it introduces.
            if !*export {
                errln!(
                    cli,
                    "gateway: the newest signed checkpoint (copy it off this host; check later with `gateway log verify --anchor FILE`):"
                );
            }
            outs!(cli, "{}", checkpoint.checkpoint);
        }
        LogOutcome::Gc { collected } if json => outln!(cli, "{}", to_json(collected)),
        LogOutcome::Gc { collected: c } => outln!(
            cli,
            "gateway log gc: removed {} file(s) (artifacts and backups), {} bytes",
            c.removed,
            c.bytes
        ),
        LogOutcome::KeysExport { keys } if json => outln!(cli, "{}", to_json(keys)),
        LogOutcome::KeysExport { keys } => {
            for k in &keys.keys {
                outln!(cli, "{k}");
            }
        }
        LogOutcome::KeysRotate { rotated } if json => outln!(cli, "{}", to_json(rotated)),
        LogOutcome::KeysRotate { rotated } => {
            outln!(cli, "{}", rotated.key);
            errln!(
                cli,
                "gateway keys rotate: new signing key above; the old key signed it and was destroyed"
            );
        }
    }
}

/// `log show`'s human text: the record, then each stored stream.
fn print_shown(cli: &Call, shown: &log::Shown) {
    let seq = shown.record.seq;
    // JSON escapes control characters; bidi and zero-width ones it leaves.
    outln!(
        cli,
        "{}",
        crate::shown::visible_lines(
            &serde_json::to_string_pretty(&shown.record).unwrap_or_default()
        )
    );
    let mut out = cli.cx.stdout_writer();
    for a in &shown.artifacts {
        let (name, d) = (a.stream, &a.digest);
        let _ = writeln!(
            out,
            "--- {name}: {} bytes, {} {}{} ---",
            d.bytes,
            d.hash().map_or("hash", |(a, _)| a.name()),
            d.hash().map_or("none", |(_, h)| h),
            if d.artifact_truncated {
                " (stored: the first part only)"
            } else {
                ""
            }
        );
        match &a.content {
            Stored::Content(c) => {
                // The command's output: escaped like any untrusted text (`--json` has the
                // exact bytes).
                let c = String::from_utf8_lossy(c);
                let c = crate::shown::visible_lines(&c);
                let _ = out.write_all(c.as_bytes());
                if !c.ends_with('\n') {
                    let _ = writeln!(out);
                }
            }
            Stored::Unavailable(e) => {
                let _ = writeln!(out, "({e})");
            }
            Stored::Omitted(_) => {
                let _ = writeln!(
                    out,
                    "(left out: --no-output; `gateway log show {seq}` shows it)"
                );
            }
        }
    }
    if !shown.connections.is_empty() {
        let _ = writeln!(
            out,
            "--- connections: {} (`gateway log show SEQ` for one) ---",
            shown.connections.len()
        );
        for c in &shown.connections {
            let Some(n) = &c.net else { continue };
            let _ = writeln!(
                out,
                "{:>6}  {:<5}  {:<7}  {}  {}  up {} B  down {} B  {:.0} ms  [{}]",
                c.seq,
                c.decision.effect,
                n.protocol,
                crate::shown::visible(&format!("{}:{}", n.host, n.port)),
                n.address.as_deref().unwrap_or("-"),
                n.bytes_up,
                n.bytes_down,
                n.duration_ms,
                crate::shown::visible(&c.decision.rules.join(", "))
            );
        }
    }
}
