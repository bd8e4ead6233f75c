//! Recall benchmark (issue 16), side by side in one run: gateway, detect-secrets 1.5.0 and
//! gitleaks on the labelled cases of public scanners' own test suites.
//!
//! The cases are `benches/corpus/cases.jsonl`, extracted by `benches/corpus/extract.py` from
//! gitleaks' rule tps/fps, detect-secrets' plugin tests and ripsecrets' test files (the commits
//! read are on its first line). Their secret parts are generator specs, expanded here with a new
//! seed on each run (printed; `RECALL_SEED` repeats a run). Each `value` case is embedded in every
//! context below, one file per case and context under a name that context lives in (`.env`,
//! `Dockerfile`, `.bashrc`, ...); each `text` case (a line or file published as is) is written
//! once. The three tools scan the same tree:
//!   gateway        `gateway scan --format json .` (this build's release binary)
//!   detect-secrets `detect-secrets scan --all-files .` (`pip install detect-secrets==1.5.0`)
//!   gitleaks       `gitleaks dir --no-banner --report-format json --report-path F .`
//!                  (GITLEAKS, else target/tools/gitleaks/usr/bin/gitleaks, else PATH; .ci/run
//!                  installs Debian's 8.26.0 package there)
//! A tool that is missing is reported as missing, and its columns stay empty.
//!
//! A positive is found when a finding is on its line in its file (text cases: anywhere in the
//! file); a negative is a false positive when its file has any finding. Prints recall and false
//! positives per family and per context, then totals; writes every case's result to
//! `target/recall.json`.
//!
//! Run: `cargo bench --bench recall` (`RECALL_BEFORE=<gateway binary>`: another build scans the
//! same tree in the same run, and the cases whose result differs are listed). `RECALL_BRIEF=1` (CI): six contexts; `RECALL_CONTEXTS=a,b`
//! picks contexts by name; `RECALL_KEEP=1` keeps the tree (its path is printed).

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::expect_used,
    clippy::disallowed_methods,
    clippy::too_many_lines,
    clippy::cast_precision_loss,
    reason = "a benchmark: a program of its own that reads its settings and prints its figures"
)]

#[path = "support/gitleaks.rs"]
mod support_gitleaks;
use support_gitleaks::gitleaks_bin;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

const CASES: &str = include_str!("corpus/cases.jsonl");
/// Where the generated value goes in a context's text.
const MARK: &str = "\u{1}";

struct Case {
    id: String,
    family: String,
    /// The value shows its vendor by itself (a prefix or shape).
    vendor: bool,
    positive: bool,
    /// A negative with generated parts: a random value that is not the vendor's format. It goes
    /// under a neutral key and only in contexts that do not declare a secret (in `--password=`
    /// a random value is rightly a finding).
    randomised: bool,
    text: bool,
    key: String,
    file: String,
    template: Vec<serde_json::Value>,
}

/// xorshift64*: the corpus generator (seeded per run).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn pick(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).expect("index")
    }
}

/// Expands a ranges string (`0-9a-f_-`) into its characters.
fn class(spec: &str) -> Vec<char> {
    let c: Vec<char> = spec.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        if i + 2 < c.len() && c[i + 1] == '-' {
            out.extend(c[i]..=c[i + 2]);
            i += 3;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

fn expand(template: &[serde_json::Value], rng: &mut Rng) -> String {
    let mut out = String::new();
    for seg in template {
        if let Some(s) = seg.as_str() {
            out.push_str(s);
        } else {
            let chars = class(seg["c"].as_str().expect("class"));
            for _ in 0..seg["n"].as_u64().expect("count") {
                out.push(chars[rng.pick(chars.len())]);
            }
        }
    }
    out
}

fn upper_snake(key: &str, suffix: &str) -> String {
    let k: String = key
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("{}_{}", k.to_ascii_uppercase(), suffix.to_ascii_uppercase())
}
fn lower_snake(key: &str, suffix: &str) -> String {
    upper_snake(key, suffix).to_ascii_lowercase()
}
fn camel(key: &str, suffix: &str) -> String {
    let k: String = key.chars().filter(char::is_ascii_alphanumeric).collect();
    format!("{}{suffix}", k.to_ascii_lowercase())
}

/// The contexts: (name, file name, text with MARK where the value goes). `K` is the
/// upper-snake key, `k` lower-snake, `c` camelCase (`GITHUB_TOKEN`, `github_token`,
/// `githubToken`; `..._NAME` for randomised negatives).
const CONTEXTS: &[(&str, &str, &str)] = &[
    ("env-unquoted", ".env", "DEBUG=false\n{K}=\u{1}\n"),
    (
        "python-quoted",
        "settings.py",
        "import os\n\n{k} = \"\u{1}\"\n",
    ),
    ("export", ".bashrc", "alias ll='ls -l'\nexport {K}=\u{1}\n"),
    (
        "dockerfile-env",
        "Dockerfile",
        "FROM alpine:3.20\nENV {K}=\u{1}\n",
    ),
    (
        "dockerfile-arg",
        "Dockerfile",
        "FROM alpine:3.20\nARG {K}=\u{1}\n",
    ),
    ("bat-set", "setenv.bat", "@echo off\nset {K}=\u{1}\n"),
    (
        "yaml",
        "config.yaml",
        "service:\n  name: api\n  {k}: \u{1}\n",
    ),
    (
        "toml",
        "config.toml",
        "[service]\nname = \"api\"\n{k} = \"\u{1}\"\n",
    ),
    (
        "ini",
        "settings.ini",
        "[service]\nname = api\n{k} = \u{1}\n",
    ),
    (
        "properties",
        "application.properties",
        "service.name=api\nservice.{c}=\u{1}\n",
    ),
    (
        "xml-element",
        "config.xml",
        "<config>\n  <{c}>\u{1}</{c}>\n</config>\n",
    ),
    (
        "xml-attribute",
        "web.config",
        "<appSettings>\n  <add key=\"{c}\" value=\"\u{1}\" />\n</appSettings>\n",
    ),
    (
        "json",
        "config.json",
        "{\n  \"name\": \"api\",\n  \"{k}\": \"\u{1}\"\n}\n",
    ),
    (
        "json-escaped",
        "state.json",
        "{\"config.env\": \"{K}=\u{1}\\nDEBUG=false\"}\n",
    ),
    (
        "go-backticks",
        "main.go",
        "package main\n\nconst {c} = `\u{1}`\n",
    ),
    (
        "csharp-verbatim",
        "Program.cs",
        "class P {\n  const string {c} = @\"\u{1}\";\n}\n",
    ),
    (
        "flag-p",
        "db.sh",
        "#!/bin/sh\nmysql -h db.internal -u admin -p\u{1} app\n",
    ),
    (
        "flag-password",
        "deploy.sh",
        "#!/bin/sh\n./deploy --user admin --password=\u{1}\n",
    ),
    (
        "curl-u",
        "fetch.sh",
        "#!/bin/sh\ncurl -u admin:\u{1} https://api.example.com/v1/items\n",
    ),
    (
        "curl-H",
        "call.sh",
        "#!/bin/sh\ncurl -H 'Authorization: Bearer \u{1}' https://api.example.com/\n",
    ),
    (
        "http-header",
        "request.http",
        "GET /v1/items HTTP/1.1\nHost: api.example.com\nAuthorization: Bearer \u{1}\n",
    ),
    (
        "conn-url",
        "database.env",
        "DATABASE_URL=postgres://admin:\u{1}@db.example.com:5432/app\n",
    ),
    (
        "conn-kv",
        "appsettings.txt",
        "Server=db.example.com;Database=app;User Id=admin;Password=\u{1};\n",
    ),
    (
        "shell-split",
        "run.sh",
        "#!/bin/sh\n./client --token \u{2}\n",
    ),
    (
        "prose",
        "NOTES",
        "The staging account uses \u{1} until we rotate it.\n",
    ),
    (
        "markdown",
        "README.md",
        "# Setup\n\nSet the {k} to `\u{1}` before running.\n",
    ),
    (
        "log",
        "app.log",
        "2026-11-25T10:00:00Z INFO auth ok user=admin {k}=\u{1} took=3ms\n",
    ),
    ("txt", "notes.txt", "staging\n{k}: \u{1}\n"),
    ("makefile", "Makefile", "{K} = \u{1}\n\nall:\n\t./build\n"),
];
const BRIEF: &[&str] = &[
    "env-unquoted",
    "python-quoted",
    "yaml",
    "json",
    "prose",
    "curl-H",
];

/// Contexts whose text itself says the value is a secret (`shell-split` writes `--token`
/// whatever the key: a random value there is declared a token, as after `--password=`).
const DECLARE_SECRET: &[&str] = &[
    "shell-split",
    "flag-p",
    "flag-password",
    "curl-u",
    "curl-H",
    "http-header",
    "conn-url",
    "conn-kv",
];

/// Renders a context for key and value; returns (text, 1-based line of the value).
fn render(tpl: &str, key: &str, suffix: &str, value: &str) -> (String, usize) {
    let t = tpl
        .replace("{K}", &upper_snake(key, suffix))
        .replace("{k}", &lower_snake(key, suffix))
        .replace("{c}", &camel(key, suffix));
    let t = if t.contains('\u{2}') {
        // A shell word split by quotes: the value's halves joined by an empty '' pair.
        let mid = value.len() / 2;
        let mid = (mid..value.len())
            .find(|&i| value.is_char_boundary(i))
            .unwrap_or(value.len());
        t.replace('\u{2}', &format!("{}''{}", &value[..mid], &value[mid..]))
            .replace(MARK, value)
    } else {
        t.replace(MARK, value)
    };
    let at = tpl
        .find(MARK)
        .or_else(|| tpl.find('\u{2}'))
        .expect("context has a mark");
    let line = tpl[..at].matches('\n').count() + 1;
    (t, line)
}

/// Findings per tool: relative path -> lines.
type Found = HashMap<String, Vec<(u64, u64)>>;

fn norm(p: &str, root: &Path) -> String {
    let p = p
        .strip_prefix(root.to_str().expect("utf-8 root"))
        .unwrap_or(p);
    p.trim_start_matches("./")
        .trim_start_matches('/')
        .to_string()
}

fn run_gateway(gw: &str, root: &Path, state: &Path) -> Result<Found, String> {
    let out = Command::new(gw)
        .args(["scan", "--format", "json", "."])
        .current_dir(root)
        .env("GATEWAY_STATE_DIR", state)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("{gw}: {e}"))?;
    if !matches!(out.status.code(), Some(0 | 1)) {
        return Err(format!("gateway scan exited {:?}", out.status));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("gateway json: {e}"))?;
    let mut f = Found::new();
    for x in v["findings"].as_array().into_iter().flatten() {
        let l = x["line"].as_u64().unwrap_or(0);
        f.entry(norm(x["path"].as_str().unwrap_or(""), root))
            .or_default()
            .push((l, l));
    }
    Ok(f)
}

fn run_detect_secrets(root: &Path) -> Result<(Found, String), String> {
    let version = Command::new("detect-secrets")
        .arg("--version")
        .output()
        .map_err(|e| {
            format!("detect-secrets not available ({e}): pip install detect-secrets==1.5.0")
        })?;
    let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
    // detect-secrets scans one file at a time on one core: the case directories are split
    // between as many processes as there are cores, run at once.
    let mut dirs: Vec<String> = std::fs::read_dir(root)
        .map_err(|e| format!("{}: {e}", root.display()))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    dirs.sort();
    let jobs = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let shards: Vec<Vec<String>> = (0..jobs)
        .map(|j| dirs.iter().skip(j).step_by(jobs).cloned().collect())
        .filter(|d: &Vec<String>| !d.is_empty())
        .collect();
    let outs: Vec<Result<Vec<u8>, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = shards
            .iter()
            .map(|shard| {
                s.spawn(move || {
                    let out = Command::new("detect-secrets")
                        .args(["scan", "--all-files"])
                        .args(shard)
                        .current_dir(root)
                        .stderr(Stdio::null())
                        .output()
                        .map_err(|e| format!("detect-secrets: {e}"))?;
                    if out.status.success() {
                        Ok(out.stdout)
                    } else {
                        Err(format!("detect-secrets scan exited {:?}", out.status))
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("detect-secrets thread"))
            .collect()
    });
    let mut f = Found::new();
    for out in outs {
        let v: serde_json::Value =
            serde_json::from_slice(&out?).map_err(|e| format!("detect-secrets json: {e}"))?;
        for (path, list) in v["results"].as_object().into_iter().flatten() {
            for x in list.as_array().into_iter().flatten() {
                let l = x["line_number"].as_u64().unwrap_or(0);
                f.entry(norm(path, root)).or_default().push((l, l));
            }
        }
    }
    Ok((f, format!("{version}, {} processes", shards.len())))
}

fn run_gitleaks(root: &Path, report: &Path) -> Result<(Found, String), String> {
    let bin = gitleaks_bin().ok_or(
        "gitleaks not available: .ci/run installs Debian's gitleaks 8.26.0 into target/tools/gitleaks (or set GITLEAKS)",
    )?;
    let version = Command::new(&bin)
        .arg("version")
        .output()
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    let version = format!(
        "{} ({})",
        String::from_utf8_lossy(&version.stdout).trim(),
        bin.display()
    );
    let out = Command::new(&bin)
        .args([
            "dir",
            "--no-banner",
            "--log-level",
            "error",
            "--report-format",
            "json",
            "--report-path",
        ])
        .arg(report)
        .arg(".")
        .current_dir(root)
        .stdout(Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    // Exit 1: leaks found.
    if !matches!(out.status.code(), Some(0 | 1)) {
        return Err(format!(
            "gitleaks exited {:?}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let v: serde_json::Value = serde_json::from_slice(
        &std::fs::read(report).map_err(|e| format!("gitleaks report: {e}"))?,
    )
    .map_err(|e| format!("gitleaks json: {e}"))?;
    let mut f = Found::new();
    for x in v.as_array().into_iter().flatten() {
        let a = x["StartLine"].as_u64().unwrap_or(0);
        let b = x["EndLine"].as_u64().unwrap_or(a);
        f.entry(norm(x["File"].as_str().unwrap_or(""), root))
            .or_default()
            .push((a, b));
    }
    Ok((f, version))
}

/// One written file: which case, which context, which line holds the value (0: any).
struct Placed {
    case: usize,
    context: &'static str,
    path: String,
    line: u64,
}

/// `RECALL_BEFORE=<gateway binary>`: the same tree scanned by another build, in this run; prints
/// both builds' totals and every case whose result differs between them.
fn compare_before(
    before: &str,
    root: &Path,
    state: &Path,
    placed: &[Placed],
    cases: &[Case],
    now: Option<&Found>,
) {
    let (Some(now), Ok(old)) = (now, run_gateway(before, root, state)) else {
        println!("RECALL_BEFORE: {before} did not run");
        return;
    };
    let (mut pos, mut found, mut fp, mut neg) = ([0usize; 2], [0usize; 2], [0usize; 2], 0usize);
    let mut changed = Vec::new();
    for p in placed {
        let c = &cases[p.case];
        let r = [hit(&old, p), hit(now, p)];
        if c.positive {
            pos[0] += 1;
            pos[1] += 1;
        } else {
            neg += 1;
        }
        for k in 0..2 {
            if r[k] {
                if c.positive {
                    found[k] += 1;
                } else {
                    fp[k] += 1;
                }
            }
        }
        if r[0] != r[1] {
            changed.push(format!(
                "  {} {} {} ({}): before {}, now {}",
                if c.positive { "positive" } else { "negative" },
                c.id,
                p.context,
                p.path,
                r[0],
                r[1]
            ));
        }
    }
    let pct = |a: usize, b: usize| 100.0 * a as f64 / b.max(1) as f64;
    println!(
        "before ({before}): recall {}/{} ({:.1}%), false positives {}/{neg}\nthis build: recall {}/{} ({:.1}%), false positives {}/{neg}\ncases that differ: {}",
        found[0],
        pos[0],
        pct(found[0], pos[0]),
        fp[0],
        found[1],
        pos[1],
        pct(found[1], pos[1]),
        fp[1],
        changed.len()
    );
    for l in changed.iter().take(60) {
        println!("{l}");
    }
}

fn hit(found: &Found, p: &Placed) -> bool {
    found.get(&p.path).is_some_and(|v| {
        v.iter()
            .any(|&(a, b)| p.line == 0 || (a <= p.line && p.line <= b.max(a)))
    })
}

#[derive(Default, Clone, Copy)]
struct Tally {
    pos: usize,
    neg: usize,
    found: [usize; 3],
    fp: [usize; 3],
}

fn cell(n: usize, of: usize, avail: bool) -> String {
    if !avail {
        "-".into()
    } else if of == 0 {
        "".into()
    } else {
        format!("{:.0}%", 100.0 * n as f64 / of as f64)
    }
}

fn table(title: &str, rows: &BTreeMap<String, Tally>, avail: [bool; 3]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\n{title:<40} {:>5} {:>8} {:>8} {:>8} | {:>5} {:>6} {:>6} {:>6}",
        "pos", "gateway", "d-s", "gitleak", "neg", "FP gw", "FP d-s", "FP gl"
    );
    for (name, t) in rows {
        let fp = |i: usize| {
            if avail[i] {
                t.fp[i].to_string()
            } else {
                "-".into()
            }
        };
        let _ = writeln!(
            s,
            "{name:<40} {:>5} {:>8} {:>8} {:>8} | {:>5} {:>6} {:>6} {:>6}",
            t.pos,
            cell(t.found[0], t.pos, avail[0]),
            cell(t.found[1], t.pos, avail[1]),
            cell(t.found[2], t.pos, avail[2]),
            t.neg,
            fp(0),
            fp(1),
            fp(2)
        );
    }
    s
}

fn main() {
    let seed = std::env::var("RECALL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let n = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos());
            u64::try_from(n % u128::from(u64::MAX)).expect("seed") | 1
        });
    let mut rng = Rng(seed | 1);
    let brief = std::env::var_os("RECALL_BRIEF").is_some();
    let only: Option<HashSet<String>> = std::env::var("RECALL_CONTEXTS")
        .ok()
        .map(|s| s.split(',').map(str::to_string).collect());
    let contexts: Vec<&(&str, &str, &str)> = CONTEXTS
        .iter()
        .filter(|c| match &only {
            Some(set) => set.contains(c.0),
            None => !brief || BRIEF.contains(&c.0),
        })
        .collect();

    let mut lines = CASES.lines();
    let head: serde_json::Value =
        serde_json::from_str(lines.next().expect("header")).expect("header json");
    let cases: Vec<Case> = lines
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("case json");
            let template = v["template"].as_array().expect("template").clone();
            let positive = v["label"] == "positive";
            Case {
                vendor: v["vendor_format"] == true,
                randomised: !positive && template.iter().any(|s| !s.is_string()),
                id: v["id"].as_str().expect("id").into(),
                family: v["family"].as_str().expect("family").into(),
                positive,
                text: v["kind"] == "text",
                key: v["key"].as_str().unwrap_or("secret").into(),
                file: v["file"].as_str().unwrap_or("snippet.txt").into(),
                template,
            }
        })
        .collect();

    let tmp = std::env::temp_dir().join(format!("gateway-recall-{}", std::process::id()));
    let root = tmp.join("tree");
    let state = tmp.join("state");
    std::fs::create_dir_all(&root).expect("tree dir");
    std::fs::create_dir_all(&state).expect("state dir");

    let mut placed = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let value = expand(&c.template, &mut rng);
        if c.text {
            let rel = format!("{i:04}/verbatim/{}", c.file);
            let path = root.join(&rel);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, format!("{value}\n")).expect("write");
            placed.push(Placed {
                case: i,
                context: "verbatim",
                path: rel,
                line: 0,
            });
            continue;
        }
        for &&(name, file, tpl) in &contexts {
            if c.randomised && DECLARE_SECRET.contains(&name) {
                continue;
            }
            let suffix = if c.randomised { "Name" } else { "Token" };
            let (text, line) = render(tpl, &c.key, suffix, &value);
            let rel = format!("{i:04}/{name}/{file}");
            let path = root.join(&rel);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, text).expect("write");
            placed.push(Placed {
                case: i,
                context: name,
                path: rel,
                line: u64::try_from(line).expect("line"),
            });
        }
    }
    println!(
        "recall corpus: {} cases ({} positive, {} negative) from {}, seed {seed} (RECALL_SEED={seed} repeats it), {} contexts{}, {} files in {}",
        cases.len(),
        cases.iter().filter(|c| c.positive).count(),
        cases.iter().filter(|c| !c.positive).count(),
        head["sources"]
            .as_object()
            .map(|m| m
                .iter()
                .map(|(k, v)| format!("{k}@{}", &v["commit"].as_str().unwrap_or("?")[..12]))
                .collect::<Vec<_>>()
                .join(", "))
            .unwrap_or_default(),
        contexts.len(),
        if brief { " (brief)" } else { "" },
        placed.len(),
        root.display()
    );

    let t = Instant::now();
    let gw = run_gateway(env!("CARGO_BIN_EXE_gateway"), &root, &state);
    let gw_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let ds = run_detect_secrets(&root);
    let ds_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let gl = run_gitleaks(&root, &tmp.join("gitleaks.json"));
    let gl_secs = t.elapsed().as_secs_f64();
    let gw = match gw {
        Ok(f) => {
            println!("gateway {} ({gw_secs:.1} s)", env!("CARGO_PKG_VERSION"));
            Some(f)
        }
        Err(e) => {
            println!("gateway: {e}");
            None
        }
    };
    let ds = match ds {
        Ok((f, v)) => {
            println!("detect-secrets {v} ({ds_secs:.1} s)");
            Some(f)
        }
        Err(e) => {
            println!("detect-secrets: {e}");
            None
        }
    };
    let gl = match gl {
        Ok((f, v)) => {
            println!("gitleaks {v} ({gl_secs:.1} s)");
            Some(f)
        }
        Err(e) => {
            println!("gitleaks: {e}");
            None
        }
    };
    let tools = [gw, ds, gl];
    let avail = [tools[0].is_some(), tools[1].is_some(), tools[2].is_some()];

    let mut by_family: BTreeMap<String, Tally> = BTreeMap::new();
    let mut by_context: BTreeMap<String, Tally> = BTreeMap::new();
    let mut total = Tally::default();
    let mut vendor = Tally::default();
    let mut records = Vec::new();
    for p in &placed {
        let c = &cases[p.case];
        let res: Vec<Option<bool>> = tools
            .iter()
            .map(|f| f.as_ref().map(|f| hit(f, p)))
            .collect();
        for t in [
            by_family.entry(c.family.clone()).or_default(),
            by_context.entry(p.context.to_string()).or_default(),
            &mut total,
        ]
        .into_iter()
        .chain(c.vendor.then_some(&mut vendor))
        {
            if c.positive {
                t.pos += 1;
            } else {
                t.neg += 1;
            }
            for (k, r) in res.iter().enumerate() {
                if *r == Some(true) {
                    if c.positive {
                        t.found[k] += 1;
                    } else {
                        t.fp[k] += 1;
                    }
                }
            }
        }
        records.push(serde_json::json!({
            "id": c.id, "family": c.family, "label": if c.positive { "positive" } else { "negative" },
            "context": p.context, "path": p.path,
            "gateway": res[0], "detect_secrets": res[1], "gitleaks": res[2],
        }));
    }
    if let Ok(before) = std::env::var("RECALL_BEFORE") {
        compare_before(&before, &root, &state, &placed, &cases, tools[0].as_ref());
    }
    print!("{}", table("family", &by_family, avail));
    print!("{}", table("context", &by_context, avail));
    let mut totals = BTreeMap::new();
    totals.insert("all".to_string(), total);
    totals.insert("vendor-format families".to_string(), vendor);
    print!("{}", table("totals (case x context)", &totals, avail));
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/recall.json");
    let doc = serde_json::json!({
        "seed": seed, "sources": head["sources"], "contexts": contexts.iter().map(|c| c.0).collect::<Vec<_>>(),
        "results": records,
    });
    std::fs::write(&out, serde_json::to_vec_pretty(&doc).expect("json")).expect("recall.json");
    println!("\nper-case results: {}", out.display());
    if std::env::var_os("RECALL_KEEP").is_some() {
        println!("tree kept: {}", root.display());
    } else {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    assert!(avail[0], "gateway did not run");
}
