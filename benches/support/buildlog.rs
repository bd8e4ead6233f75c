//! A generated build log: what CI prints for cargo build and test, npm install, pip install,
//! pytest, go test and docker build (BuildKit and the classic builder), with their commit
//! hashes, sha256 digests, UUIDs, `sha512-` integrity strings, go.sum `h1:` hashes, build ids,
//! timestamps and paths, and what it prints about keys, signatures and caches (cache keys,
//! registry signatures, key ids, fingerprints, public keys) — text whose lines a redactor must
//! leave alone (issue 38: at least 99.9% of them). Pure and seeded: [`build_log`] gives the same text for the same seed.
//!
//! Shared by the test that measures it (`tests/secrets/buildlog.rs`) and benchmarks
//! (`#[path = "support/buildlog.rs"]`); a benchmark wanting N MiB calls [`build_log`] with
//! successive seeds until it has them.
//!
//! Over 1,000 lines: data — one writer per tool, each line of its output a format string of
//! its own (rustfmt lays each `writeln!` over several lines).

#![allow(dead_code, reason = "each user takes what it needs")]

use std::fmt::Write as _;

/// A splitmix64 generator.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// In `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// In `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    pub fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len() as u64) as usize]
    }
    fn of(&mut self, alphabet: &[u8], n: usize) -> String {
        (0..n)
            .map(|_| char::from(alphabet[self.below(alphabet.len() as u64) as usize]))
            .collect()
    }
    pub fn hex(&mut self, n: usize) -> String {
        self.of(b"0123456789abcdef", n)
    }
    pub fn b64(&mut self, n: usize) -> String {
        self.of(
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
            n,
        )
    }
    pub fn lower(&mut self, n: usize) -> String {
        self.of(b"abcdefghijklmnopqrstuvwxyz0123456789_", n)
    }
    pub fn uuid(&mut self) -> String {
        let h = self.hex(32);
        format!(
            "{}-{}-4{}-{}-{}",
            &h[..8],
            &h[8..12],
            &h[13..16],
            &h[16..20],
            &h[20..]
        )
    }
    pub fn version(&mut self) -> String {
        format!("{}.{}.{}", self.below(5), self.below(40), self.below(30))
    }
    /// A duration as the tools print it (`0.31s`).
    pub fn secs(&mut self, max_ms: u64) -> String {
        let ms = self.below(max_ms);
        format!("{}.{:02}s", ms / 1000, (ms % 1000) / 10)
    }
}

const CRATES: &[&str] = &[
    "proc-macro2",
    "unicode-ident",
    "quote",
    "syn",
    "libc",
    "cfg-if",
    "serde",
    "serde_derive",
    "serde_json",
    "itoa",
    "ryu",
    "memchr",
    "aho-corasick",
    "regex-syntax",
    "regex-automata",
    "regex",
    "once_cell",
    "log",
    "bitflags",
    "smallvec",
    "autocfg",
    "scopeguard",
    "lock_api",
    "parking_lot_core",
    "parking_lot",
    "pin-project-lite",
    "bytes",
    "mio",
    "socket2",
    "tokio",
    "tokio-macros",
    "futures-core",
    "futures-util",
    "http",
    "httparse",
    "hyper",
    "tower",
    "tracing",
    "tracing-core",
    "ring",
    "rustls",
    "rustls-pemfile",
    "webpki-roots",
    "base64",
    "sha2",
    "digest",
    "generic-array",
    "typenum",
    "rand",
    "rand_core",
    "getrandom",
    "uuid",
    "chrono",
    "time",
    "anyhow",
    "thiserror",
    "clap",
    "clap_builder",
    "clap_derive",
    "strsim",
    "anstyle",
    "anstream",
    "secrecy",
    "zeroize",
    "hmac",
    "jsonwebtoken",
    "oauth2",
    "keyring",
];
const NPM: &[&str] = &[
    "react",
    "react-dom",
    "lodash",
    "express",
    "@babel/core",
    "@babel/preset-env",
    "webpack",
    "webpack-cli",
    "typescript",
    "eslint",
    "prettier",
    "jest",
    "@types/node",
    "axios",
    "dotenv",
    "jsonwebtoken",
    "bcryptjs",
    "passport",
    "passport-jwt",
    "uuid",
    "chalk",
    "commander",
    "semver",
    "glob",
    "minimatch",
    "debug",
    "ms",
    "esbuild",
    "vite",
    "rollup",
    "postcss",
    "autoprefixer",
    "tailwindcss",
    "@vitejs/plugin-react",
    "zod",
    "next",
];
const PYPI: &[&str] = &[
    "requests",
    "urllib3",
    "idna",
    "charset-normalizer",
    "certifi",
    "flask",
    "werkzeug",
    "jinja2",
    "markupsafe",
    "itsdangerous",
    "click",
    "sqlalchemy",
    "psycopg2-binary",
    "pydantic",
    "pydantic-core",
    "typing-extensions",
    "fastapi",
    "starlette",
    "uvicorn",
    "pyjwt",
    "cryptography",
    "cffi",
    "pycparser",
    "boto3",
    "botocore",
    "s3transfer",
    "jmespath",
    "python-dateutil",
    "six",
    "pytest",
    "pluggy",
    "iniconfig",
    "packaging",
    "keyring",
    "python-dotenv",
    "passlib",
    "bcrypt",
];
const GO_MODS: &[&str] = &[
    "github.com/stretchr/testify",
    "golang.org/x/sys",
    "golang.org/x/net",
    "golang.org/x/crypto",
    "golang.org/x/oauth2",
    "github.com/google/uuid",
    "github.com/spf13/cobra",
    "github.com/spf13/pflag",
    "go.uber.org/zap",
    "github.com/golang-jwt/jwt/v5",
    "google.golang.org/grpc",
    "google.golang.org/protobuf",
    "github.com/prometheus/client_golang",
    "github.com/aws/aws-sdk-go-v2",
    "github.com/hashicorp/vault/api",
];
const TEST_WORDS: &[&str] = &[
    "parses_config",
    "rejects_expired_token",
    "refreshes_access_token",
    "hashes_password",
    "verifies_signature",
    "rotates_secret",
    "loads_credentials_from_env",
    "round_trips",
    "handles_empty_input",
    "redacts_api_key_in_logs",
    "decodes_jwt_header",
    "retries_on_503",
    "computes_digest",
    "validates_uuid",
    "keeps_session_cookie",
    "signs_request",
];

/// `2024-03-01T10:22:31.1234567Z ` (a GitHub Actions line prefix), advancing `t`.
fn stamp(r: &mut Rng, t: &mut u64) -> String {
    *t += r.below(900);
    let s = *t / 1000;
    format!(
        "2024-03-01T{:02}:{:02}:{:02}.{:07}Z ",
        10 + s / 3600 % 12,
        s / 60 % 60,
        s % 60,
        r.below(10_000_000)
    )
}

fn cargo_build(r: &mut Rng, o: &mut String) {
    let proj = r.pick(&["gateway", "indexer", "billing-api", "edge-proxy"]);
    let _ = writeln!(o, "    Updating crates.io index");
    let n = r.range(12, 60);
    let _ = writeln!(
        o,
        "     Locking {} packages to latest compatible versions",
        n * 4
    );
    for _ in 0..n {
        let c = r.pick(CRATES);
        let v = r.version();
        let _ = writeln!(o, "  Downloaded {c} v{v}");
    }
    let _ = writeln!(
        o,
        "  Downloaded {n} crates ({}.{} MB) in {}",
        r.below(20),
        r.below(10),
        r.secs(4000)
    );
    if r.below(3) == 0 {
        let repo = r.pick(&[
            "tokio-rs/axum",
            "rust-lang/cargo",
            "hyperium/h2",
            "acme/internal-sdk",
        ]);
        let rev = r.hex(40);
        let _ = writeln!(o, "    Updating git repository `https://github.com/{repo}`");
        let name = repo.rsplit('/').next().unwrap_or(repo);
        let _ = writeln!(
            o,
            "   Compiling {name} v{} (https://github.com/{repo}?rev={}#{})",
            r.version(),
            &rev[..7],
            &rev[..8]
        );
    }
    for _ in 0..r.range(20, 90) {
        let c = r.pick(CRATES);
        let v = r.version();
        match r.below(12) {
            0 => {
                let _ = writeln!(
                    o,
                    "     Running `/home/runner/work/{proj}/{proj}/target/debug/build/{c}-{}/build-script-build`",
                    r.hex(16)
                );
            }
            1 => {
                let _ = writeln!(
                    o,
                    "     Running `rustc --crate-name {} --edition=2021 /home/runner/.cargo/registry/src/index.crates.io-{}/{c}-{v}/src/lib.rs --error-format=json --json=diagnostic-rendered-ansi,artifacts,future-incompat --crate-type lib --emit=dep-info,metadata,link -C embed-bitcode=no -C debuginfo=2 -C metadata={} -C extra-filename=-{} --out-dir /home/runner/work/{proj}/{proj}/target/debug/deps -L dependency=/home/runner/work/{proj}/{proj}/target/debug/deps --cap-lints allow`",
                    c.replace('-', "_"),
                    r.hex(16),
                    r.hex(16),
                    r.hex(16)
                );
            }
            2 => {
                let _ = writeln!(o, "       Fresh {c} v{v}");
            }
            _ => {
                let _ = writeln!(o, "   Compiling {c} v{v}");
            }
        }
    }
    if r.below(2) == 0 {
        let var = r.pick(&["token", "secret", "password_hash", "api_key", "digest"]);
        let line = r.range(10, 400);
        let _ = writeln!(o, "warning: unused variable: `{var}`");
        let _ = writeln!(o, "  --> src/auth.rs:{line}:9");
        let _ = writeln!(o, "   |");
        let _ = writeln!(o, "{line} |     let {var} = load(&config)?;");
        let _ = writeln!(
            o,
            "   |         ^^^^^ help: if this is intentional, prefix it with an underscore: `_{var}`"
        );
        let _ = writeln!(o, "   |");
        let _ = writeln!(o, "   = note: `#[warn(unused_variables)]` on by default");
        let _ = writeln!(o);
    }
    let _ = writeln!(
        o,
        "   Compiling {proj} v{} (/home/runner/work/{proj}/{proj})",
        r.version()
    );
    let _ = writeln!(
        o,
        "    Finished `dev` profile [unoptimized + debuginfo] target(s) in {}m {:02}s",
        r.below(4),
        r.below(60)
    );
}

fn cargo_test(r: &mut Rng, o: &mut String) {
    let proj = r.pick(&["gateway", "indexer", "billing_api", "edge_proxy"]);
    for target in ["src/lib.rs", "src/main.rs", "tests/main.rs"] {
        let _ = writeln!(
            o,
            "     Running unittests {target} (target/debug/deps/{proj}-{})",
            r.hex(16)
        );
        let n = r.range(5, 120);
        let _ = writeln!(o);
        let _ = writeln!(o, "running {n} tests");
        for _ in 0..n {
            let m = r.pick(&[
                "auth", "config", "secrets", "http", "store", "cli", "crypto",
            ]);
            let t = r.pick(TEST_WORDS);
            let res = if r.below(40) == 0 { "ignored" } else { "ok" };
            let _ = writeln!(o, "test {m}::tests::{t}_{} ... {res}", r.below(50));
        }
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "test result: ok. {n} passed; 0 failed; {} ignored; 0 measured; 0 filtered out; finished in {}",
            r.below(3),
            r.secs(9000)
        );
        let _ = writeln!(o);
    }
    let _ = writeln!(o, "   Doc-tests {proj}");
    let _ = writeln!(o);
    let _ = writeln!(o, "running 3 tests");
    for i in 0..3 {
        let _ = writeln!(
            o,
            "test src/lib.rs - Config::load (line {}) ... ok",
            40 + i * 17
        );
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in {}",
        r.secs(3000)
    );
}

fn npm_install(r: &mut Rng, o: &mut String) {
    let _ = writeln!(o, "npm verbose cli /usr/local/bin/node /usr/local/bin/npm");
    let _ = writeln!(o, "npm info using npm@10.{}.{}", r.below(9), r.below(9));
    let _ = writeln!(o, "npm info using node@v20.{}.{}", r.below(19), r.below(9));
    let _ = writeln!(o, "npm verbose title npm ci");
    let _ = writeln!(o, "npm verbose argv \"ci\" \"--loglevel\" \"verbose\"");
    let _ = writeln!(
        o,
        "npm verbose logfile /home/runner/.npm/_logs/2024-03-01T10_22_31_{:03}Z-debug-0.log",
        r.below(1000)
    );
    for _ in 0..r.range(30, 120) {
        let p = r.pick(NPM);
        let v = r.version();
        let enc = p.replace('/', "%2f");
        let base = p.rsplit('/').next().unwrap_or(p);
        match r.below(6) {
            0 => {
                let _ = writeln!(
                    o,
                    "npm http fetch GET 200 https://registry.npmjs.org/{enc} {}ms (cache revalidated)",
                    r.range(8, 900)
                );
            }
            1 => {
                let _ = writeln!(
                    o,
                    "npm http fetch GET 200 https://registry.npmjs.org/{p}/-/{base}-{v}.tgz {}ms (cache miss)",
                    r.range(8, 900)
                );
            }
            2 => {
                let _ = writeln!(
                    o,
                    "npm verbose reify {p}@{v} integrity sha512-{}==",
                    r.b64(86)
                );
            }
            3 => {
                let _ = writeln!(
                    o,
                    "npm silly tarball no local data for {p}@https://registry.npmjs.org/{p}/-/{base}-{v}.tgz. Extracting by manifest."
                );
            }
            4 => {
                let _ = writeln!(
                    o,
                    "npm warn deprecated {base}@{v}: This version is no longer maintained. Please upgrade to the latest version."
                );
            }
            _ => {
                let _ = writeln!(
                    o,
                    "npm info run {p}@{v} postinstall node_modules/{p} node install.js"
                );
            }
        }
    }
    if r.below(2) == 0 {
        // A lock file that changed: CI prints the diff.
        let _ = writeln!(o, "diff --git a/package-lock.json b/package-lock.json");
        let _ = writeln!(o, "index {}..{} 100644", r.hex(7), r.hex(7));
        let _ = writeln!(o, "--- a/package-lock.json");
        let _ = writeln!(o, "+++ b/package-lock.json");
        let _ = writeln!(
            o,
            "@@ -{},7 +{},7 @@",
            r.range(100, 9000),
            r.range(100, 9000)
        );
        for _ in 0..r.range(2, 6) {
            let p = r.pick(NPM);
            let base = p.rsplit('/').next().unwrap_or(p);
            let (a, b) = (r.version(), r.version());
            let _ = writeln!(o, "     \"node_modules/{p}\": {{");
            let _ = writeln!(o, "-      \"version\": \"{a}\",");
            let _ = writeln!(
                o,
                "-      \"resolved\": \"https://registry.npmjs.org/{p}/-/{base}-{a}.tgz\","
            );
            let _ = writeln!(o, "-      \"integrity\": \"sha512-{}==\",", r.b64(86));
            let _ = writeln!(o, "+      \"version\": \"{b}\",");
            let _ = writeln!(
                o,
                "+      \"resolved\": \"https://registry.npmjs.org/{p}/-/{base}-{b}.tgz\","
            );
            let _ = writeln!(o, "+      \"integrity\": \"sha512-{}==\",", r.b64(86));
            let _ = writeln!(o, "       \"dev\": true,");
        }
    }
    let n = r.range(200, 1800);
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "added {n} packages, and audited {} packages in {}s",
        n + 1,
        r.range(3, 90)
    );
    let _ = writeln!(o);
    let _ = writeln!(o, "{} packages are looking for funding", r.range(10, 300));
    let _ = writeln!(o, "  run `npm fund` for details");
    let _ = writeln!(o);
    let _ = writeln!(o, "found 0 vulnerabilities");
    let _ = writeln!(o, "npm verbose exit 0");
    let _ = writeln!(o, "npm info ok");
}

fn pip_install(r: &mut Rng, o: &mut String) {
    let _ = writeln!(o, "Looking in indexes: https://pypi.org/simple");
    let mut installed = Vec::new();
    for i in 0..r.range(8, 30) {
        let p = r.pick(PYPI);
        let v = r.version();
        let file = format!("{}-{v}-py3-none-any.whl", p.replace('-', "_"));
        let _ = writeln!(
            o,
            "Collecting {p}=={v} (from -r requirements.txt (line {}))",
            i + 1
        );
        if r.below(3) == 0 {
            let _ = writeln!(
                o,
                "  Using cached https://files.pythonhosted.org/packages/{}/{}/{}/{file} ({} kB)",
                r.hex(2),
                r.hex(2),
                r.hex(60),
                r.range(10, 900)
            );
        } else {
            let kb = r.range(10, 900);
            let _ = writeln!(
                o,
                "  Downloading {file}.metadata ({}.{} kB)",
                r.below(9),
                r.below(9)
            );
            let _ = writeln!(o, "  Downloading {file} ({kb} kB)");
            let _ = writeln!(
                o,
                "     \u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501}\u{2501} {kb}.0/{kb}.0 kB {}.{} MB/s eta 0:00:00",
                r.below(30),
                r.below(9)
            );
        }
        if r.below(4) == 0 {
            let _ = writeln!(o, "    {p}=={v} --hash=sha256:{}", r.hex(64));
        }
        installed.push(format!("{p}-{v}"));
    }
    let name = r.pick(&["billing", "ingest", "webhooks", "authsvc"]);
    let v = r.version();
    let _ = writeln!(o, "Building wheels for collected packages: {name}");
    let _ = writeln!(o, "  Building wheel for {name} (pyproject.toml) ... done");
    let _ = writeln!(
        o,
        "  Created wheel for {name}: filename={name}-{v}-py3-none-any.whl size={} sha256={}",
        r.range(2000, 90000),
        r.hex(64)
    );
    let _ = writeln!(
        o,
        "  Stored in directory: /tmp/pip-ephem-wheel-cache-{}/wheels/{}/{}/{}",
        r.lower(8),
        r.hex(2),
        r.hex(2),
        r.hex(60)
    );
    let _ = writeln!(o, "Successfully built {name}");
    let _ = writeln!(
        o,
        "Installing collected packages: {}",
        installed
            .iter()
            .map(|s| s.rsplit_once('-').map_or(s.as_str(), |(a, _)| a))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        o,
        "Successfully installed {} {name}-{v}",
        installed.join(" ")
    );
}

fn pytest(r: &mut Rng, o: &mut String) {
    let n = r.range(40, 400);
    let _ = writeln!(
        o,
        "============================= test session starts =============================="
    );
    let _ = writeln!(
        o,
        "platform linux -- Python 3.12.{}, pytest-8.{}.{}, pluggy-1.{}.0 -- /opt/venv/bin/python",
        r.below(9),
        r.below(4),
        r.below(9),
        r.below(6)
    );
    let _ = writeln!(o, "cachedir: .pytest_cache");
    let _ = writeln!(o, "rootdir: /home/runner/work/app/app");
    let _ = writeln!(o, "configfile: pyproject.toml");
    let _ = writeln!(o, "plugins: cov-5.0.0, xdist-3.5.0, anyio-4.3.0");
    let _ = writeln!(o, "collecting ... collected {n} items");
    let _ = writeln!(o);
    for i in 0..n {
        let f = r.pick(&[
            "test_auth",
            "test_api",
            "test_models",
            "test_webhooks",
            "test_tokens",
            "test_secrets",
        ]);
        let t = r.pick(TEST_WORDS);
        let param = match r.below(4) {
            0 => format!("[{}]", r.uuid()),
            1 => format!("[{}]", r.hex(8)),
            _ => String::new(),
        };
        let res = if r.below(60) == 0 {
            "SKIPPED"
        } else {
            "PASSED"
        };
        let _ = writeln!(
            o,
            "tests/{f}.py::test_{t}{param} {res:<30} [{:>3}%]",
            i * 100 / n
        );
    }
    let a = r.hex(40);
    let b = r.hex(40);
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "=================================== FAILURES ==================================="
    );
    let _ = writeln!(
        o,
        "____________________________ test_webhook_signature ____________________________"
    );
    let _ = writeln!(o);
    let _ = writeln!(o, "    def test_webhook_signature():");
    let _ = writeln!(o, "        payload = load_fixture(\"push.json\")");
    let _ = writeln!(o, ">       assert sign(payload) == EXPECTED");
    let _ = writeln!(o, "E       AssertionError: assert '{a}' == '{b}'");
    let _ = writeln!(o, "E         ");
    let _ = writeln!(o, "E         - {b}");
    let _ = writeln!(o, "E         + {a}");
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "tests/test_webhooks.py:{}: AssertionError",
        r.range(20, 200)
    );
    let _ = writeln!(
        o,
        "---------- coverage: platform linux, python 3.12.3-final-0 -----------"
    );
    let _ = writeln!(o, "Name                    Stmts   Miss  Cover");
    let _ = writeln!(o, "-------------------------------------------");
    for m in [
        "app/__init__.py",
        "app/auth.py",
        "app/tokens.py",
        "app/webhooks.py",
    ] {
        let s = r.range(10, 300);
        let miss = r.below(s / 4 + 1);
        let _ = writeln!(o, "{m:<24}{s:>5}{miss:>7}{:>6}%", 100 - miss * 100 / s);
    }
    let _ = writeln!(
        o,
        "=========================== short test summary info ============================"
    );
    let _ = writeln!(
        o,
        "FAILED tests/test_webhooks.py::test_webhook_signature - AssertionError: assert '{}...' == '{}...'",
        &a[..12],
        &b[..12]
    );
    let _ = writeln!(
        o,
        "================== 1 failed, {} passed, 2 warnings in {} ==================",
        n - 1,
        r.secs(60000)
    );
}

fn go_test(r: &mut Rng, o: &mut String) {
    for _ in 0..r.range(3, 12) {
        let m = r.pick(GO_MODS);
        if r.below(3) == 0 {
            let _ = writeln!(
                o,
                "go: downloading {m} v0.0.0-2024{:02}{:02}{:06}-{}",
                r.range(1, 12),
                r.range(1, 28),
                r.below(240_000),
                r.hex(12)
            );
        } else {
            let _ = writeln!(o, "go: downloading {m} v{}", r.version());
        }
    }
    for pkg in [
        "internal/auth",
        "internal/config",
        "internal/store",
        "pkg/tokens",
        "cmd/server",
    ] {
        if pkg.starts_with("cmd") {
            let _ = writeln!(o, "?   \tgithub.com/acme/app/{pkg}\t[no test files]");
            continue;
        }
        for _ in 0..r.range(3, 25) {
            let name = r.pick(&[
                "ParseConfig",
                "TokenExpiry",
                "SignRequest",
                "RotateSecret",
                "HashPassword",
                "LoadCredentials",
                "Digest",
            ]);
            let _ = writeln!(o, "=== RUN   Test{name}");
            if r.below(3) == 0 {
                let _ = writeln!(
                    o,
                    "    {}_test.go:{}: request {} took {}",
                    pkg.rsplit('/').next().unwrap_or(pkg),
                    r.range(20, 300),
                    r.uuid(),
                    r.secs(400)
                );
            }
            if r.below(4) == 0 {
                let sub = r.pick(&["expired", "valid", "empty", "unicode"]);
                let _ = writeln!(o, "=== RUN   Test{name}/{sub}");
                let _ = writeln!(o, "--- PASS: Test{name} ({})", r.secs(100));
                let _ = writeln!(o, "    --- PASS: Test{name}/{sub} ({})", r.secs(100));
            } else {
                let _ = writeln!(o, "--- PASS: Test{name} ({})", r.secs(100));
            }
        }
        let cov = r.range(300, 990);
        let _ = writeln!(o, "PASS");
        let _ = writeln!(o, "coverage: {}.{}% of statements", cov / 10, cov % 10);
        let _ = writeln!(
            o,
            "ok  \tgithub.com/acme/app/{pkg}\t{}\tcoverage: {}.{}% of statements",
            r.secs(3000),
            cov / 10,
            cov % 10
        );
    }
    if r.below(2) == 0 {
        let _ = writeln!(o, "$ go version -m ./bin/server");
        let _ = writeln!(o, "./bin/server: go1.22.{}", r.below(9));
        let _ = writeln!(o, "\tpath\tgithub.com/acme/app/cmd/server");
        let _ = writeln!(o, "\tmod\tgithub.com/acme/app\t(devel)\t");
        for _ in 0..r.range(3, 10) {
            let m = r.pick(GO_MODS);
            let _ = writeln!(o, "\tdep\t{m}\tv{}\th1:{}=", r.version(), r.b64(43));
        }
        let _ = writeln!(o, "\tbuild\t-buildmode=exe");
        let _ = writeln!(o, "\tbuild\tCGO_ENABLED=0");
        let _ = writeln!(o, "\tbuild\tvcs=git");
        let _ = writeln!(o, "\tbuild\tvcs.revision={}", r.hex(40));
        let _ = writeln!(o, "\tbuild\tvcs.time=2024-03-01T10:22:31Z");
        let _ = writeln!(o, "\tbuild\tvcs.modified=false");
    }
}

fn docker_buildkit(r: &mut Rng, o: &mut String) {
    let base = r.pick(&[
        "python:3.12-slim",
        "node:20-alpine",
        "rust:1.78-slim",
        "golang:1.22-bookworm",
    ]);
    let _ = writeln!(
        o,
        "#0 building with \"default\" instance using docker driver"
    );
    let _ = writeln!(o);
    let _ = writeln!(o, "#1 [internal] load build definition from Dockerfile");
    let _ = writeln!(
        o,
        "#1 transferring dockerfile: {}.{}kB done",
        r.below(4),
        r.below(99)
    );
    let _ = writeln!(o, "#1 DONE 0.0s");
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "#2 [internal] load metadata for docker.io/library/{base}"
    );
    let _ = writeln!(o, "#2 DONE {}", r.secs(3000));
    let _ = writeln!(o);
    let d = r.hex(64);
    let _ = writeln!(o, "#3 [1/6] FROM docker.io/library/{base}@sha256:{d}");
    let _ = writeln!(
        o,
        "#3 resolve docker.io/library/{base}@sha256:{d} 0.0s done"
    );
    let layers: Vec<String> = (0..r.range(3, 7)).map(|_| r.hex(64)).collect();
    for l in &layers {
        let mb = r.range(1, 90);
        let _ = writeln!(
            o,
            "#3 sha256:{l} {mb}.{}MB / {mb}.{}MB {} done",
            r.below(99),
            r.below(99),
            r.secs(4000)
        );
    }
    for l in &layers {
        let _ = writeln!(o, "#3 extracting sha256:{l} {} done", r.secs(3000));
    }
    let _ = writeln!(o, "#3 DONE {}", r.secs(9000));
    let steps = [
        "WORKDIR /app",
        "COPY requirements.txt .",
        "RUN pip install --no-cache-dir -r requirements.txt",
        "COPY . .",
        "RUN python -m compileall -q app",
    ];
    for (i, s) in steps.iter().enumerate() {
        let k = i + 4;
        let _ = writeln!(o);
        let _ = writeln!(o, "#{k} [{}/6] {s}", i + 2);
        if s.starts_with("RUN pip") {
            let mut inner = String::new();
            pip_install(r, &mut inner);
            let mut t = 0.3;
            for l in inner.lines() {
                t += 0.05;
                let _ = writeln!(o, "#{k} {t:.3} {l}");
            }
        }
        if r.below(3) == 0 {
            let _ = writeln!(o, "#{k} CACHED");
        } else {
            let _ = writeln!(o, "#{k} DONE {}", r.secs(20000));
        }
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "#10 exporting to image");
    let _ = writeln!(o, "#10 exporting layers {} done", r.secs(3000));
    let _ = writeln!(o, "#10 writing image sha256:{} done", r.hex(64));
    let _ = writeln!(o, "#10 naming to docker.io/acme/app:{} done", r.hex(7));
    let _ = writeln!(o, "#10 DONE {}", r.secs(3000));
    if r.below(2) == 0 {
        let _ = writeln!(
            o,
            "The push refers to repository [123456789012.dkr.ecr.us-east-1.amazonaws.com/acme/app]"
        );
        for _ in 0..r.range(3, 8) {
            let _ = writeln!(
                o,
                "{}: {}",
                r.hex(12),
                r.pick(&["Pushed", "Layer already exists"])
            );
        }
        let _ = writeln!(
            o,
            "{}: digest: sha256:{} size: {}",
            r.hex(7),
            r.hex(64),
            r.range(900, 3000)
        );
    }
}

fn docker_classic(r: &mut Rng, o: &mut String) {
    let n = r.range(5, 10);
    let _ = writeln!(
        o,
        "Sending build context to Docker daemon  {}.{}MB",
        r.below(90),
        r.below(99)
    );
    for i in 1..=n {
        let step = match i {
            1 => "FROM node:20-alpine".to_string(),
            2 => "WORKDIR /usr/src/app".to_string(),
            3 => "COPY package*.json ./".to_string(),
            4 => "RUN npm ci --omit=dev".to_string(),
            _ => format!("ENV BUILD_ID={}", r.range(1000, 99999)),
        };
        let _ = writeln!(o, "Step {i}/{n} : {step}");
        if i > 1 && r.below(3) == 0 {
            let _ = writeln!(o, " ---> Using cache");
        } else if i > 1 {
            let c = r.hex(12);
            let _ = writeln!(o, " ---> Running in {c}");
            let _ = writeln!(o, "Removing intermediate container {c}");
        }
        let _ = writeln!(o, " ---> {}", r.hex(12));
    }
    let id = r.hex(12);
    let _ = writeln!(o, "Successfully built {id}");
    let _ = writeln!(o, "Successfully tagged acme/web:{}", r.hex(7));
}

fn ci_prelude(r: &mut Rng, o: &mut String) {
    let sha = r.hex(40);
    let lines = [
        format!(
            "Current runner version: '2.{}.{}'",
            r.range(300, 320),
            r.below(9)
        ),
        "Operating System".to_string(),
        "  Ubuntu".to_string(),
        "  22.04.4".to_string(),
        format!("Runner Image Provisioner: {}", r.range(20240200, 20240300)),
        format!("Job id: {}", r.uuid()),
        format!(
            "Download action repository 'actions/checkout@v4' (SHA:{})",
            r.hex(40)
        ),
        format!(
            "Download action repository 'actions/cache@v4' (SHA:{})",
            r.hex(40)
        ),
        "GITHUB_TOKEN Permissions".to_string(),
        "  Contents: read".to_string(),
        "  Metadata: read".to_string(),
        "  Packages: write".to_string(),
        "Secret source: Actions".to_string(),
        "Prepare workflow directory".to_string(),
        "Prepare all required actions".to_string(),
        "Complete job name: build (ubuntu-latest)".to_string(),
        format!("Run actions/checkout@{}", r.hex(40)),
        "Syncing repository: acme/app".to_string(),
        "[command]/usr/bin/git init /home/runner/work/app/app".to_string(),
        format!(
            "[command]/usr/bin/git -c protocol.version=2 fetch --no-tags --prune --no-recurse-submodules --depth=1 origin +{sha}:refs/remotes/pull/{}/merge",
            r.range(100, 9999)
        ),
        format!("remote: Enumerating objects: {}, done.", r.range(100, 9999)),
        format!(
            "Receiving objects: 100% ({0}/{0}), {1}.{2} MiB | {3}.{4} MiB/s, done.",
            r.range(100, 9999),
            r.below(40),
            r.below(99),
            r.below(40),
            r.below(99)
        ),
        format!("Resolving deltas: 100% ({0}/{0}), done.", r.range(10, 999)),
        format!(
            "HEAD is now at {} Merge {} into {}",
            &sha[..7],
            r.hex(40),
            r.hex(40)
        ),
        "[command]/usr/bin/git log -1 --format=%H".to_string(),
        sha.clone(),
        format!("Cache restored from key: Linux-cargo-{}", r.hex(64)),
        format!(
            "Run docker build --build-arg GIT_SHA={sha} --build-arg BUILD_ID={} -t ghcr.io/acme/app:{} .",
            r.range(1000, 99999),
            &sha[..7]
        ),
        "  env:".to_string(),
        "    CARGO_TERM_COLOR: always".to_string(),
        "    REGISTRY: ghcr.io".to_string(),
        "    IMAGE_NAME: acme/app".to_string(),
        format!("    CACHE_KEY: Linux-cargo-{}", r.hex(64)),
        format!(
            "Received {} of {} (100.0%), {}.{} MBs/sec",
            r.range(1_000_000, 900_000_000),
            r.range(1_000_000, 900_000_000),
            r.below(200),
            r.below(9)
        ),
    ];
    for l in lines {
        let _ = writeln!(o, "{l}");
    }
}

/// What CI prints about keys, signatures and caches that is no secret: actions/cache key
/// lines, `npm publish`'s notice and `npm view`'s registry signatures, gpg and apt key ids
/// and fingerprints, ssh host key fingerprints, terraform's key names and public keys, cargo
/// and go checksums, a cosign verification: names holding `key`, `sig`, `signature`, `auth`
/// and `session` with values that are digests and identifiers.
fn keys_and_signatures(r: &mut Rng, o: &mut String) {
    let os = r.pick(&["Linux", "macOS", "Windows"]);
    let tool = r.pick(&["cargo", "npm", "pip", "gradle"]);
    let h = r.hex(64);
    let _ = writeln!(o, "Run actions/cache@v4");
    let _ = writeln!(o, "  with:");
    let _ = writeln!(o, "    path: ~/.{tool}");
    let _ = writeln!(o, "    key: {os}-{tool}-{h}");
    let _ = writeln!(o, "    restore-keys: {os}-{tool}-");
    let _ = writeln!(o, "    enableCrossOsArchive: false");
    let _ = writeln!(o, "Cache key: {os}-{tool}-{h}");
    let _ = writeln!(
        o,
        "Cache not found for input keys: {os}-{tool}-{h}, {os}-{tool}-"
    );
    let _ = writeln!(o, "##[debug]Resolved Keys:");
    let _ = writeln!(o, "##[debug][\"{os}-{tool}-{h}\",\"{os}-{tool}-\"]");
    let _ = writeln!(o, "Cache saved with key: {os}-{tool}-{h}");
    let _ = writeln!(o, "Cache Size: ~{0} MB ({0}123456 B)", r.range(10, 900));
    let (pkg, v) = (r.pick(CRATES), r.version());
    let _ = writeln!(o, "npm notice");
    let _ = writeln!(o, "npm notice package: @acme/{pkg}@{v}");
    let _ = writeln!(o, "npm notice shasum: {}", r.hex(40));
    let _ = writeln!(
        o,
        "npm notice integrity: sha512-{}[...]{}==",
        r.b64(13),
        r.b64(13)
    );
    let _ = writeln!(o, "npm notice total files: {}", r.range(3, 90));
    let _ = writeln!(
        o,
        "npm notice Publishing to https://registry.npmjs.org/ with tag latest and public access"
    );
    let _ = writeln!(o, "$ npm view @acme/{pkg}@{v} dist --json");
    let _ = writeln!(o, "{{");
    let _ = writeln!(o, "  \"integrity\": \"sha512-{}==\",", r.b64(86));
    let _ = writeln!(o, "  \"shasum\": \"{}\",", r.hex(40));
    let _ = writeln!(o, "  \"signatures\": [");
    let _ = writeln!(o, "    {{");
    let _ = writeln!(o, "      \"keyid\": \"SHA256:{}\",", r.b64(43));
    let _ = writeln!(o, "      \"sig\": \"MEUCI{}\"", r.b64(91));
    let _ = writeln!(o, "    }}");
    let _ = writeln!(o, "  ]");
    let _ = writeln!(o, "}}");
    let _ = writeln!(
        o,
        "audited {0} packages in {1}\n\n{0} packages have verified registry signatures",
        r.range(100, 2000),
        r.secs(4000)
    );
    let fpr = r.hex(40).to_ascii_uppercase();
    let kid = fpr[24..].to_string();
    let _ = writeln!(o, "gpg: Signature made Fri Mar  1 10:22:31 2024 UTC");
    let _ = writeln!(o, "gpg:                using RSA key {fpr}");
    let _ = writeln!(
        o,
        "gpg: Good signature from \"Acme Release Signing <release@example.com>\" [unknown]"
    );
    let spaced: Vec<&str> = (0..10).map(|i| &fpr[i * 4..i * 4 + 4]).collect();
    let _ = writeln!(o, "Primary key fingerprint: {}", spaced.join(" "));
    let _ = writeln!(
        o,
        "W: GPG error: https://repo.example.com stable InRelease: The following signatures couldn't be verified because the public key is not available: NO_PUBKEY {kid}"
    );
    let _ = writeln!(o, "signingkey = {kid}");
    let _ = writeln!(o, "key_id: {kid}");
    let _ = writeln!(o, "fingerprint={fpr}");
    let _ = writeln!(
        o,
        "Warning: Permanently added 'github.com' (ED25519) to the list of known hosts."
    );
    let _ = writeln!(
        o,
        "256 SHA256:{} runner@fv-az{}-{} (ED25519)",
        r.b64(43),
        r.range(100, 999),
        r.range(100, 999)
    );
    let _ = writeln!(o, "Host key fingerprint is SHA256:{}", r.b64(43));
    let _ = writeln!(o, "  # aws_key_pair.deployer will be created");
    let _ = writeln!(o, "  + resource \"aws_key_pair\" \"deployer\" {{");
    let _ = writeln!(o, "      + fingerprint = (known after apply)");
    let _ = writeln!(o, "      + key_name    = \"deployer-{}\"", r.hex(8));
    let _ = writeln!(o, "      + key_pair_id = (known after apply)");
    let _ = writeln!(
        o,
        "      + public_key  = \"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{} deploy@ci\"",
        r.b64(43)
    );
    let _ = writeln!(
        o,
        "      + kms_key_id  = \"arn:aws:kms:us-east-1:123456789012:key/{}\"",
        r.uuid()
    );
    let _ = writeln!(o, "    }}");
    let _ = writeln!(o, "Initializing the backend...");
    let _ = writeln!(o, "  bucket = \"acme-tfstate\"");
    let _ = writeln!(o, "  key    = \"env/prod/{}/terraform.tfstate\"", r.hex(8));
    let _ = writeln!(
        o,
        "- Installed hashicorp/aws v{} (signed by HashiCorp)",
        r.version()
    );
    let _ = writeln!(o, "checksum = \"{}\"", r.hex(64));
    let _ = writeln!(
        o,
        "verifying github.com/acme/lib@v{}: checksum mismatch",
        r.version()
    );
    let _ = writeln!(o, "\tdownloaded: h1:{}=", r.b64(43));
    let _ = writeln!(o, "\tgo.sum:     h1:{}=", r.b64(43));
    let d = r.hex(64);
    let _ = writeln!(o, "Verification for ghcr.io/acme/app@sha256:{d} --");
    let _ = writeln!(
        o,
        "The following checks were performed on each of these signatures:"
    );
    let _ = writeln!(o, "  - The cosign claims were validated");
    let _ = writeln!(
        o,
        "[{{\"critical\":{{\"identity\":{{\"docker-reference\":\"ghcr.io/acme/app\"}},\"image\":{{\"docker-manifest-digest\":\"sha256:{d}\"}},\"type\":\"cosign container image signature\"}},\"optional\":{{\"Bundle\":{{\"SignedEntryTimestamp\":\"{}\",\"Payload\":{{\"logIndex\":{},\"logID\":\"{}\"}}}}}}}}]",
        r.b64(96),
        r.range(1_000_000, 90_000_000),
        r.hex(64)
    );
    let _ = writeln!(o, "session: {}", r.uuid());
    let _ = writeln!(o, "Session ID: {}", r.hex(32));
    let _ = writeln!(o, "auth: token (from GITHUB_TOKEN)");
    let _ = writeln!(
        o,
        "Credentials: using ambient credentials from the runner (OIDC)"
    );
    let _ = writeln!(o, "##[debug]Evaluating: secrets.NPM_AUTH");
    let _ = writeln!(o, "keys: {} loaded, {} skipped", r.range(1, 9), r.below(3));
    let _ = writeln!(
        o,
        "error code: {}  exit code: {}",
        r.range(400, 599),
        r.below(3)
    );
}

/// A build log of at least `min_lines` lines, the same for the same seed.
pub fn build_log(seed: u64, min_lines: usize) -> String {
    let mut r = Rng::new(seed);
    let mut out = String::new();
    let mut t = 0u64;
    let mut lines = 0;
    while lines < min_lines {
        let mut section = String::new();
        match r.below(10) {
            0 => cargo_build(&mut r, &mut section),
            1 => cargo_test(&mut r, &mut section),
            2 => npm_install(&mut r, &mut section),
            3 => pip_install(&mut r, &mut section),
            4 => pytest(&mut r, &mut section),
            5 => go_test(&mut r, &mut section),
            6 => docker_buildkit(&mut r, &mut section),
            7 => docker_classic(&mut r, &mut section),
            8 => keys_and_signatures(&mut r, &mut section),
            _ => ci_prelude(&mut r, &mut section),
        }
        // Half the sections as GitHub Actions shows them: each line stamped.
        let stamped = r.below(2) == 0;
        for l in section.lines() {
            if stamped {
                let s = stamp(&mut r, &mut t);
                out.push_str(&s);
            }
            out.push_str(l);
            out.push('\n');
            lines += 1;
        }
    }
    out
}
