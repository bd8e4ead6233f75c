//! The policy commands' front end (`policy list|check|explain`), `scan`, and their
//! rendering: each command returns its typed [`Report`]; [`render`] and [`render_scan`]
//! show it where the caller is (its terminal or pipe; a daemon's client renders its own).

use super::*;
use broker::report::policy::{Explained, PolicyOutcome, ScanOutcome};
use broker::report::{Json, Outcome};

/// `policy list`.
pub(super) fn list() -> Report {
    match policy::report::builtins() {
        Ok(rows) => Report::new(0, Outcome::Policy(PolicyOutcome::List(rows))),
        Err(e) => failed(exit::POLICY, e),
    }
}

/// `policy check FILE`: the file read with the caller's rights.
pub(super) fn check(cli: &Call, file: &Path) -> Report {
    match cli
        .cx
        .as_client(|| Policy::load_file(file))
        .map_err(|e| format!("policy {}: {e}", file.display()))
        .and_then(|r| r.map_err(|e| e.to_string()))
    {
        Ok(p) => Report::new(
            0,
            Outcome::Policy(PolicyOutcome::Checked {
                file: file.display().to_string(),
                checked: policy::report::Checked::loaded(&p),
            }),
        ),
        // Under `--json`, the error object (code `policy`), as every failure.
        Err(e) => failed(exit::POLICY, e),
    }
}

/// `policy explain [--credentials] -- CMD`.
pub(super) fn explain(cli: &Call, command: &[String], credentials: bool) -> Report {
    let policy = match load_policy(cli) {
        Ok(p) => p,
        Err(e) => return failed(exit::POLICY, e),
    };
    if credentials {
        return super::credentials::explain(cli, &policy);
    }
    let cwd = cli.cwd.clone().unwrap_or_else(|| PathBuf::from("."));
    match broker::explain(&cli.cx, &policy, command, &cwd, &state_dir(cli)) {
        Ok(x) => Report::new(
            0,
            Outcome::Policy(PolicyOutcome::Explained(Box::new(explained(&x)))),
        ),
        Err(e) => broker_failed(e),
    }
}

/// What `policy explain` shows of `x`.
fn explained(x: &broker::Explanation) -> Explained {
    let d = &x.decision;
    let s = &x.sandbox.confine;
    let paths = |v: &[PathBuf]| -> Vec<String> {
        v.iter().map(|p| p.to_string_lossy().into_owned()).collect()
    };
    Explained {
        json: Json::of(x),
        policy: x.policy.clone(),
        effect: d.effect.name().to_string(),
        commands: d.commands.clone(),
        rules: d
            .rules
            .iter()
            .map(|r| {
                [
                    r.effect.name().to_string(),
                    r.id.clone(),
                    r.reason.clone(),
                    r.subject.clone(),
                ]
            })
            .collect(),
        unanalysable: d.unanalysable.clone(),
        landlock_abi: x.landlock_abi,
        places: [
            ("read", &s.read),
            ("write", &s.write),
            ("exec", &s.exec),
            ("deny", &s.deny),
            ("protected", &s.protected),
            ("hidden", &s.hidden),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), paths(v)))
        .collect(),
        network: s.network.to_string(),
        limits: s.limits.to_string(),
        secrets: [x.secrets.output.to_string(), x.secrets.input.to_string()],
        secrets_in_argv: x
            .secrets_in_argv
            .iter()
            .map(|i| [i.place.to_string(), i.rule.to_string()])
            .collect(),
        env: x
            .sandbox
            .env
            .iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect(),
        layers: x.layers.clone(),
    }
}

/// Shows a policy command's result.
pub(super) fn render(cli: &Call, o: &PolicyOutcome) {
    match o {
        PolicyOutcome::List(rows) => {
            if cli.json {
                outln!(
                    cli,
                    "{}",
                    to_json(&broker::report::PolicyListReport { policies: rows })
                );
            } else {
                for r in rows {
                    outln!(
                        cli,
                        "{:<11} {:>2} rules  {}",
                        r.name,
                        r.rules,
                        r.description
                    );
                }
            }
        }
        PolicyOutcome::Checked { file, checked } => {
            if cli.json {
                outln!(cli, "{}", to_json(checked));
            } else {
                outln!(
                    cli,
                    "{file}: ok ({} rules, extends resolved)",
                    checked.rules.unwrap_or_default()
                );
            }
        }
        PolicyOutcome::Explained(x) => {
            if cli.json {
                outln!(
                    cli,
                    "{}",
                    serde_json::to_string_pretty(x.json.value()).unwrap_or_default()
                );
            } else {
                print_explanation(cli, x);
            }
        }
        PolicyOutcome::Reloaded { session, report } => {
            if cli.json {
                outln!(cli, "{}", to_json(report));
            } else {
                outln!(
                    cli,
                    "policy {} (sha256 {}) in force for session {session}, replacing sha256 {} [audit {}]",
                    report.policy,
                    report.sha256,
                    report.replaced,
                    report.audit_seq
                );
            }
        }
    }
}

fn print_explanation(cli: &Call, x: &Explained) {
    use crate::shown::{arg_shown, visible};
    use human::{Cell, Table, effect_style, paint};
    let on = human::colour(cli);
    outln!(cli, "policy:    {}", x.policy);
    outln!(
        cli,
        "decision:  {}",
        paint(&x.effect, effect_style(&x.effect), on)
    );
    for c in &x.commands {
        outln!(cli, "command:   {}", visible(c));
    }
    let mut t = Table::new(&[]);
    for [effect, id, reason, subject] in &x.rules {
        t.row(vec![
            Cell::styled(effect, effect_style(effect)),
            Cell::new(visible(id)),
            Cell::new(format!("{}  [{}]", visible(reason), visible(subject))),
        ]);
    }
    for l in t.lines(on) {
        outln!(cli, "  {l}");
    }
    for u in &x.unanalysable {
        outln!(cli, "unanalysable: {}", visible(u));
    }
    outln!(cli, "sandbox (landlock ABI {}):", x.landlock_abi);
    for (name, v) in &x.places {
        let items: Vec<String> = v.iter().map(|p| arg_shown(p).into_owned()).collect();
        let items = if items.is_empty() {
            "(none)".to_string()
        } else {
            items.join(" ")
        };
        outln!(cli, "{:<10} {items}", format!("  {name}"));
    }
    outln!(cli, "  network    {}", x.network);
    outln!(cli, "  limits     {}", x.limits);
    outln!(
        cli,
        "secrets:   output {}, input {}",
        x.secrets[0],
        x.secrets[1]
    );
    for [place, rule] in &x.secrets_in_argv {
        outln!(cli, "  {place} contains a secret (rule {rule})");
    }
    outln!(cli, "  env        {}", x.env.join(" "));
    for l in &x.layers {
        outln!(cli, "  layer      {l}");
    }
}

/// `scan`: the caller's files read with its rights; a progress line on this process's own
/// terminal while it runs.
pub(super) fn run_scan(
    cli: &Call,
    req: &broker::tools::scan::ScanRequest,
    format: ScanFormat,
) -> Report {
    let bar = (cli.cx.client().is_none() && crate::sandbox::stderr_is_tty()).then(|| {
        let b = indicatif::ProgressBar::new_spinner();
        b.set_draw_target(indicatif::ProgressDrawTarget::stderr_with_hz(4));
        b
    });
    let progress = |files: u64, bytes: u64| {
        if let Some(b) = &bar {
            b.set_message(format!(
                "scanning: {files} files, {:.1} MB",
                bytes as f64 / 1e6
            ));
            b.tick();
        }
    };
    let res = broker::tools::scan::scan_audited(
        &cli.cx,
        req,
        &progress,
        &cli.cx.session_id(),
        cli.cx.caller("cli"),
    );
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    match res {
        Ok(report) => Report::new(
            u8::from(!report.findings.is_empty()),
            Outcome::Scan(Box::new(ScanOutcome {
                format,
                known: report.known,
                redacted: report.redacted_files.len(),
                report,
            })),
        ),
        Err(e) => broker_failed(e),
    }
}

/// Shows a scan's findings: as JSON, SARIF, or one line each with a summary on stderr.
pub(super) fn render_scan(cli: &Call, s: &ScanOutcome) {
    let report = &s.report;
    match s.format {
        ScanFormat::Json => outln!(cli, "{}", to_json(report)),
        ScanFormat::Sarif => outln!(
            cli,
            "{}",
            serde_json::to_string_pretty(&broker::tools::scan::sarif(report)).unwrap_or_default()
        ),
        ScanFormat::Text => {
            let mut out = cli.cx.stdout_writer();
            for f in &report.findings {
                let _ = writeln!(
                    out,
                    "{}:{}:{}: {} ({} confidence, sha256 {})",
                    f.path,
                    f.line,
                    f.column,
                    f.rule,
                    f.confidence,
                    f.fingerprint.get(..12).unwrap_or(&f.fingerprint)
                );
            }
            let mb = report.bytes_scanned as f64 / 1e6;
            let secs = report.duration_ms.max(1) as f64 / 1e3;
            errln!(
                cli,
                "gateway scan: {} finding(s){} in {} files, {:.1} MB in {:.2}s ({:.0} MB/s){}",
                report.findings.len(),
                if s.known > 0 {
                    format!(" ({} more known to the baseline)", s.known)
                } else {
                    String::new()
                },
                report.files_scanned,
                mb,
                secs,
                mb / secs,
                if s.redacted == 0 {
                    String::new()
                } else {
                    format!(
                        "; redacted {} file(s) (old contents backed up in the state directory)",
                        s.redacted
                    )
                }
            );
        }
    }
}
