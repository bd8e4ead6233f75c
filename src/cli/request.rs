//! clap's parse → a typed [`Request`] (or a command that runs in this process): the one place
//! where the command line's text becomes durations, times, environment variables and the
//! forms of an edit. Its errors are [`RequestError`]s (exit 122, usage).

use super::args::{
    Cli, Cmd, ConfigCmd, FsCmd, GrepModeArg, KeysCmd, LogCmd, PolicyCmd, ScanFormat, TrashCmd,
};
use crate::broker::request::{
    self as rq, ChangesRequest, Content, EnvVar, Exec, FsRequest, Input, LogFilter, LogRequest,
    Options, PolicyRequest, Request, Roots, ToolName, TrashRequest, UndoAction,
};
use crate::fsops::search::GrepMode;
use crate::fsops::text::Edit;
use crate::model::RequestError;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// What runs in this process, whatever daemon there is: the front ends, and the binary's
/// own documentation and configuration.
pub(crate) enum Local {
    /// `gateway serve`.
    Serve {
        socket: Option<PathBuf>,
        max_clients: usize,
        call_timeout: Duration,
    },
    /// `gateway repl`.
    Repl,
    /// `gateway mcp`.
    Mcp,
    /// `gateway config show`: this process's configuration.
    ConfigShow,
    /// `gateway completions SHELL`.
    Completions(clap_complete::Shell),
    /// `gateway man`.
    Man,
}

/// A command line, typed.
pub(crate) enum Parsed {
    /// Runs here.
    Local(Local),
    /// A request: to the daemon when one serves, else to the embedded broker.
    Call(Request),
}

/// The command line `cli`, typed.
pub(crate) fn of(cli: Cli) -> Result<(Options, Parsed), RequestError> {
    let options = Options {
        state_dir: cli.state_dir,
        policy: cli.policy,
        cwd: cli.cwd,
        json: cli.json,
    };
    let parsed = match cli.cmd {
        Cmd::Serve {
            socket,
            max_clients,
            call_timeout,
        } => Parsed::Local(Local::Serve {
            socket,
            max_clients,
            call_timeout: Duration::try_from_secs_f64(call_timeout)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| RequestError::Duration {
                    option: "--call-timeout",
                    given: call_timeout.to_string(),
                })?,
        }),
        Cmd::Repl => Parsed::Local(Local::Repl),
        Cmd::Mcp => Parsed::Local(Local::Mcp),
        Cmd::Config {
            cmd: ConfigCmd::Show,
        } => Parsed::Local(Local::ConfigShow),
        Cmd::Completions { shell } => Parsed::Local(Local::Completions(shell)),
        Cmd::Man => Parsed::Local(Local::Man),
        cmd => Parsed::Call(request_of(cmd)?),
    };
    Ok((options, parsed))
}

/// A command that is a request, typed.
#[allow(clippy::too_many_lines, reason = "one arm per command")]
fn request_of(cmd: Cmd) -> Result<Request, RequestError> {
    Ok(match cmd {
        Cmd::Exec {
            timeout,
            env,
            snapshot,
            no_snapshot,
            review,
            no_review,
            command,
        } => Request::Exec(Exec {
            argv: command,
            timeout: timeout.as_deref().map(timeout_of).transpose()?,
            env: env
                .iter()
                .map(|kv| EnvVar::parse(kv))
                .collect::<Result<_, _>>()?,
            snapshot: match (snapshot, no_snapshot) {
                (true, _) => Some(true),
                (_, true) => Some(false),
                _ => None,
            },
            review: match (review, no_review) {
                (true, _) => Some(true),
                (_, true) => Some(false),
                _ => None,
            },
            stdin: None,
        }),
        Cmd::Sh { args } => Request::Sh {
            argv: super::sh_command(&args).map_err(|why| RequestError::Shell { why })?,
        },
        Cmd::Tool {
            name,
            args,
            root,
            no_roots,
        } => tool_of(&name, args.as_deref(), root, no_roots)?,
        Cmd::Pending => Request::Pending,
        Cmd::Approve {
            id,
            always_for_session,
        } => Request::Answer {
            id,
            approve: true,
            always_for_session,
        },
        Cmd::Deny { id } => Request::Answer {
            id,
            approve: false,
            always_for_session: false,
        },
        Cmd::Scan {
            paths,
            format,
            redact,
            baseline,
            exclude,
            no_ignore,
            min_confidence,
        } => Request::Scan(rq::Scan {
            paths,
            format: match format {
                ScanFormat::Text => rq::ScanFormat::Text,
                ScanFormat::Json => rq::ScanFormat::Json,
                ScanFormat::Sarif => rq::ScanFormat::Sarif,
            },
            redact,
            baseline,
            exclude,
            no_ignore,
            min_confidence,
        }),
        Cmd::Http {
            method,
            url,
            header,
            data,
            data_file,
            timeout,
            max_redirects,
            max_body,
        } => Request::Http(rq::Http {
            method,
            url,
            headers: header
                .iter()
                .map(|h| rq::Header::parse(h))
                .collect::<Result<_, _>>()?,
            body: match (data, data_file) {
                (Some(d), _) => Some(Content::Text(d)),
                (None, Some(f)) => Some(Content::From(Input::of(f))),
                (None, None) => None,
            },
            timeout: timeout.as_deref().map(timeout_of).transpose()?,
            max_redirects,
            max_body,
        }),
        Cmd::Policy { cmd } => Request::Policy(match cmd {
            PolicyCmd::Check { file } => PolicyRequest::Check { file },
            PolicyCmd::Explain {
                command,
                credentials,
            } => PolicyRequest::Explain {
                command,
                credentials,
            },
            PolicyCmd::List => PolicyRequest::List,
            PolicyCmd::Reload { name } => PolicyRequest::Reload { name },
        }),
        Cmd::Log { cmd } => Request::Log(log_of(cmd)?),
        Cmd::Keys { cmd } => Request::Keys(match cmd {
            KeysCmd::Export => rq::KeysRequest::Export,
            KeysCmd::Rotate => rq::KeysRequest::Rotate,
        }),
        Cmd::Fs { cmd } => Request::Fs(fs_of(cmd)?),
        Cmd::History { all, limit, since } => Request::History {
            all,
            limit,
            since: since
                .as_deref()
                .map(|s| time_of("--since", s))
                .transpose()?,
        },
        Cmd::Trash { cmd } => Request::Trash(match cmd {
            TrashCmd::List => TrashRequest::List,
            TrashCmd::Restore { name } => TrashRequest::Restore { name },
            TrashCmd::Empty { older_than, yes } => TrashRequest::Empty {
                older_than: older_than
                    .as_deref()
                    .map(|d| {
                        humantime::parse_duration(d).map_err(|_| RequestError::Duration {
                            option: "--older-than",
                            given: crate::shown::visible(d).into_owned(),
                        })
                    })
                    .transpose()?,
                yes,
            },
        }),
        Cmd::Changes { id: None, .. } => Request::Changes(ChangesRequest::List),
        Cmd::Changes { id: Some(id), diff } => Request::Changes(ChangesRequest::Show { id, diff }),
        Cmd::Apply { id } => Request::Changes(ChangesRequest::Apply { id }),
        Cmd::Discard { id } => Request::Changes(ChangesRequest::Discard { id }),
        Cmd::Undo {
            id,
            dry_run,
            force,
            skip,
            all,
        } => Request::Undo {
            id,
            all,
            action: if skip {
                UndoAction::Skip
            } else {
                UndoAction::Undo { dry_run, force }
            },
        },
        // [`of`] takes these before it asks for a request.
        Cmd::Serve { .. }
        | Cmd::Repl
        | Cmd::Mcp
        | Cmd::Config { .. }
        | Cmd::Completions { .. }
        | Cmd::Man => return Err(RequestError::NotARequest),
    })
}

/// `gateway tool NAME [ARGS] [--root DIR]... [--no-roots]`.
fn tool_of(
    name: &str,
    args: Option<&str>,
    root: Vec<PathBuf>,
    no_roots: bool,
) -> Result<Request, RequestError> {
    let name = ToolName::of(name)?;
    let bad = |why: String| RequestError::ToolArgs {
        name: name.as_str().to_string(),
        why,
    };
    let args = match args {
        // No arguments: the empty object (an argument, not a result).
        None => serde_json::Map::new(),
        Some(a) => match serde_json::from_str(a) {
            Ok(serde_json::Value::Object(m)) => m,
            Ok(_) => return Err(bad("must be a JSON object".into())),
            Err(e) => return Err(bad(format!("are not JSON: {e}"))),
        },
    };
    let roots = if no_roots {
        Roots::Nothing
    } else if root.is_empty() {
        Roots::Policy
    } else {
        Roots::Dirs(root)
    };
    Ok(Request::Tool { name, args, roots })
}

/// `gateway log ...`.
fn log_of(cmd: LogCmd) -> Result<LogRequest, RequestError> {
    Ok(match cmd {
        LogCmd::Verify { anchor, key } => LogRequest::Verify { anchor, key },
        LogCmd::Query { filter, limit } => LogRequest::Query {
            filter: LogFilter {
                tool: filter.tool,
                decision: filter.decision.as_deref().map(|d| match d {
                    "allow" => rq::Effect::Allow,
                    "deny" => rq::Effect::Deny,
                    "ask" => rq::Effect::Ask,
                    // clap admits only the four.
                    _ => rq::Effect::Error,
                }),
                since: filter
                    .since
                    .as_deref()
                    .map(|t| time_of("--since", t))
                    .transpose()?,
                until: filter
                    .until
                    .as_deref()
                    .map(|t| time_of("--until", t))
                    .transpose()?,
                session: filter.session,
                path: filter.path,
                contains: filter.contains,
                exit_code: filter.exit_code,
            },
            limit,
        },
        LogCmd::Tail { lines, follow } => LogRequest::Tail { lines, follow },
        LogCmd::Show {
            seq,
            no_output,
            output_limit,
        } => LogRequest::Show {
            seq,
            output_limit: (!no_output).then_some(output_limit),
        },
        LogCmd::Checkpoint { export } => LogRequest::Checkpoint { export },
        LogCmd::Gc => LogRequest::Gc,
    })
}

/// `gateway fs ...`.
#[allow(clippy::too_many_lines, reason = "one arm per file tool")]
fn fs_of(cmd: FsCmd) -> Result<FsRequest, RequestError> {
    Ok(match cmd {
        FsCmd::Probe { path } => FsRequest::Probe { path },
        FsCmd::Rm {
            path,
            recursive,
            permanent,
        } => FsRequest::Rm {
            path,
            recursive,
            permanent,
        },
        FsCmd::Mkdir { path, parents } => FsRequest::Mkdir { path, parents },
        FsCmd::Mv { src, dst } => FsRequest::Mv { src, dst },
        FsCmd::Cd { path } => FsRequest::Cd { path },
        FsCmd::Ls { path } => FsRequest::Ls { path },
        FsCmd::Glob { pattern, path } => FsRequest::Glob { pattern, path },
        FsCmd::Grep {
            regex,
            path,
            glob,
            context,
            ignore_case,
            mode,
            max,
        } => FsRequest::Grep {
            regex,
            path,
            glob,
            context,
            ignore_case,
            mode: match mode {
                GrepModeArg::Content => GrepMode::Content,
                GrepModeArg::Files => GrepMode::Files,
                GrepModeArg::Count => GrepMode::Count,
            },
            max,
        },
        FsCmd::Read {
            path,
            offset,
            limit,
            binary,
        } => FsRequest::Read {
            path,
            offset,
            limit,
            binary,
        },
        FsCmd::Write {
            path,
            content,
            content_file,
            diff,
        } => FsRequest::Write {
            path,
            content: match (content, content_file) {
                (Some(c), _) => Content::Text(c),
                (None, Some(f)) => Content::From(Input::of(f)),
                (None, None) => return Err(RequestError::NoContent),
            },
            diff,
        },
        FsCmd::Edit {
            path,
            old,
            new,
            all,
            insert_at,
            text,
            append,
            delete_lines,
            edits,
            dry_run,
            diff,
        } => {
            let mut v = Vec::new();
            if let (Some(old), Some(new)) = (old, new) {
                v.push(Edit::Replace { old, new, all });
            }
            if let (Some(line), Some(text)) = (insert_at, text) {
                v.push(Edit::InsertAt { line, text });
            }
            if let Some(text) = append {
                v.push(Edit::Append { text });
            }
            if let Some(r) = delete_lines {
                let (a, b) = r.split_once('-').unwrap_or((&r, &r));
                let (Ok(from), Ok(to)) = (a.trim().parse(), b.trim().parse()) else {
                    return Err(RequestError::LineRange { given: r });
                };
                v.push(Edit::DeleteLines { from, to });
            }
            let edits_from = edits.map(Input::of);
            if v.is_empty() && edits_from.is_none() {
                return Err(RequestError::NoEdit);
            }
            FsRequest::Edit {
                path,
                edits: v,
                edits_from,
                dry_run,
                diff,
            }
        }
    })
}

/// `--timeout`: seconds (30, 2.5) or a duration ("30s", "10m", "1h"), positive.
pub(super) fn timeout_of(t: &str) -> Result<Duration, RequestError> {
    let s = t.trim();
    let d = match s.parse::<f64>() {
        // Too long for any clock: kept as the longest, which the broker refuses (and records)
        // as longer than the policy allows.
        Ok(secs) if secs.is_finite() && secs > 0.0 => {
            Some(Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX))
        }
        Ok(_) => None,
        Err(_) => humantime::parse_duration(s).ok(),
    };
    match d {
        Some(d) if !d.is_zero() => Ok(d),
        _ => Err(RequestError::Duration {
            option: "--timeout",
            given: crate::shown::visible(t).into_owned(),
        }),
    }
}

/// `--since`/`--until`: an RFC 3339 time or a duration ago. A time before 1970 (`60y` ago)
/// is 1970: no record is older, and a request carries no earlier time.
fn time_of(option: &'static str, s: &str) -> Result<SystemTime, RequestError> {
    humantime::parse_rfc3339_weak(s)
        .ok()
        .or_else(|| SystemTime::now().checked_sub(humantime::parse_duration(s).ok()?))
        .map(|t| t.max(SystemTime::UNIX_EPOCH))
        .ok_or_else(|| RequestError::Time {
            option,
            given: crate::shown::visible(s).into_owned(),
        })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_time_before_1970_is_1970() {
        // Issue 35 (attacker): `--since 60y` was a time before the epoch, which the protocol
        // cannot carry (the client sent an empty frame) and the query's formatting panicked on.
        for s in ["60y", "100y"] {
            assert_eq!(
                super::time_of("--since", s),
                Ok(std::time::SystemTime::UNIX_EPOCH),
                "{s}"
            );
        }
        assert!(super::time_of("--since", "1h").is_ok_and(|t| t > std::time::UNIX_EPOCH));
        assert!(super::time_of("--since", "soon").is_err());
    }

    use super::timeout_of as parse_timeout;
    use std::time::Duration;

    #[test]
    fn timeout_takes_seconds_and_durations() {
        for (s, d) in [
            ("30", Duration::from_secs(30)),
            ("2.5", Duration::from_millis(2500)),
            ("30s", Duration::from_secs(30)),
            ("10m", Duration::from_secs(600)),
            ("1h 30m", Duration::from_secs(5400)),
            ("500ms", Duration::from_millis(500)),
            // Longer than any clock: the longest (the broker refuses it, rule limits.timeout).
            ("1e20", Duration::MAX),
        ] {
            assert_eq!(parse_timeout(s), Ok(d), "{s}");
        }
        for s in ["0", "-1", "0s", "abc", "", "inf", "NaN", "1e400", "30x"] {
            let e = parse_timeout(s).expect_err(s).to_string();
            assert!(e.contains("--timeout") && e.contains("30s"), "{s}: {e}");
        }
    }
}
