//! Secret detection and redaction; pure (no I/O but what callers hand in).
//!
//! - [`rules`]: the detectors as data (keywords + ASCII byte regex + checks).
//! - [`Scanner`]: one Aho-Corasick automaton over every rule's keywords finds the places worth
//!   looking at; each rule's regex then runs only on the lines around its keyword hits (as
//!   trufflehog does), never over whole inputs. Regexes compile on first use, so a command
//!   whose output never mentions a keyword compiles none. Optional high-entropy detection
//!   (detect-secrets' Base64/Hex plugins and heuristic filters) for files.
//! - [`Redactor`]: streaming redaction over chunks, correct across chunk boundaries.
//! - [`baseline`]: known findings, keyed by a hash of the secret.
//!
//! Secret values never leave this module except inside the caller's own buffers: findings
//! carry the rule, the byte span and a fingerprint (SHA-256 of the secret, hex).

mod confidence;
mod context;
mod entropy;
mod normalise;
mod pairs;
mod precision;
pub(crate) mod prefilter;
mod redact;
pub mod rules;
mod scan;
mod weak;

pub use confidence::Confidence;
pub use normalise::{decode_utf16, encode_like};
pub use redact::Redactor;
pub use scan::{Finding, Scanner, scanner};

use std::path::Path;

/// What kind of text is scanned: it decides which assignment syntaxes count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextKind {
    /// Source code: keyword assignments count only with quoted values (`password = x` in code
    /// assigns a variable, not a secret).
    Code,
    /// Configuration and environment files (.env, YAML, INI, properties, TOML): unquoted values
    /// count, and `NAME=value` lines are checked for entropy.
    Config,
    /// Shell scripts and profiles, prose, logs and Makefiles: unquoted keyword values count
    /// (`export DB_PASSWORD=...`, `Password: ...`), as in configuration, but bare `NAME = value`
    /// lines are not checked for entropy (in these files they are test vectors, checksums and
    /// commit ids: `Key = <hex>` in a crypto crate's `*_tests.txt`) and an indented line after
    /// `Password:` is prose, not an INI continuation value.
    Prose,
    /// Dependency lock files: only specific-pattern rules (hashes are not secrets).
    Lock,
    /// Command lines, environment values, program output: like configuration, without entropy.
    Stream,
}

impl TextKind {
    /// The kind of a file, from its name.
    pub fn of_path(path: &Path) -> TextKind {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        const LOCKS: &[&str] = &[
            "cargo.lock",
            "package-lock.json",
            "npm-shrinkwrap.json",
            "yarn.lock",
            "pnpm-lock.yaml",
            "gemfile.lock",
            "poetry.lock",
            "pipfile.lock",
            "composer.lock",
            "go.sum",
            "flake.lock",
            "mix.lock",
            "podfile.lock",
            "packages.lock.json",
            "uv.lock",
            "bun.lock",
            ".cargo-checksum.json",
        ];
        if LOCKS.contains(&name.as_str()) {
            return TextKind::Lock;
        }
        if name.starts_with(".env")
            || name.ends_with(".env")
            || name == ".netrc"
            || name == ".npmrc"
            || name == ".pypirc"
        {
            return TextKind::Config;
        }
        // Shell profiles and scripts, prose, logs, Makefiles: `export DB_PASSWORD=...`,
        // `password = ...`, `Password: ...` are values there, as in configuration (detect-secrets
        // reads them so too). Files without an extension (`credentials`, a kube `config`) are
        // configuration.
        const SHELL_PROSE: &[&str] = &[
            ".bashrc",
            ".bash_profile",
            ".profile",
            ".zshrc",
            ".zprofile",
            ".envrc",
            "makefile",
            "gnumakefile",
            "readme",
            "license",
            "licence",
            "copying",
            "notice",
            "authors",
            "contributors",
            "changelog",
            "changes",
            "history",
            "news",
        ];
        if SHELL_PROSE.contains(&name.as_str()) {
            return TextKind::Prose;
        }
        if !name.contains('.') {
            return TextKind::Config;
        }
        let ext = name.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
        match ext {
            "sh" | "bash" | "zsh" | "ksh" | "txt" | "md" | "markdown" | "log" | "mk" | "rst" => {
                TextKind::Prose
            }
            "yaml" | "yml" | "ini" | "cfg" | "conf" | "properties" | "toml" | "env" | "config"
            | "tfvars" | "hcl" => TextKind::Config,
            _ => TextKind::Code,
        }
    }
}

/// File extensions that are never text (images, archives, binaries): not scanned.
pub fn is_non_text_path(path: &Path) -> bool {
    const EXT: &[&str] = &[
        "png", "jpg", "jpeg", "gif", "bmp", "ico", "webp", "tiff", "psd", "svgz", "mp3", "mp4",
        "avi", "mov", "mkv", "wav", "flac", "ogg", "zip", "gz", "tgz", "bz2", "xz", "zst", "7z",
        "rar", "tar", "jar", "war", "class", "so", "dll", "dylib", "exe", "o", "a", "rlib", "pyc",
        "pyo", "whl", "pdf", "woff", "woff2", "ttf", "otf", "eot", "bin", "dat", "db", "sqlite",
        "wasm", "crate", "deb", "rpm", "iso", "img",
    ];
    path.extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .is_some_and(|e| EXT.contains(&e.as_str()))
}

/// The fingerprint of a secret: SHA-256 (hex) of its bytes. Reports and baselines carry this,
/// never the secret.
pub fn fingerprint(secret: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(secret);
    let mut s = String::with_capacity(64);
    for b in d.iter() {
        s.push(char::from(b"0123456789abcdef"[(b >> 4) as usize]));
        s.push(char::from(b"0123456789abcdef"[(b & 15) as usize]));
    }
    s
}

/// Line (1-based) and column (1-based, in bytes) of a byte offset.
pub fn line_col(text: &[u8], offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = memchr::memchr_iter(b'\n', before).count() + 1;
    let col = match memchr::memrchr(b'\n', before) {
        Some(i) => offset - i,
        None => offset + 1,
    };
    (line, col)
}

#[cfg(test)]
mod context_tests;
#[cfg(test)]
mod rules_tests;
#[cfg(test)]
mod tests;

/// Fuzz entry (fuzz/fuzz_targets/secrets_scan.rs): scanning any bytes, of any kind, never
/// panics, and findings are sorted, in bounds and non-overlapping.
pub fn fuzz_scan(data: &[u8]) {
    for kind in [
        TextKind::Code,
        TextKind::Config,
        TextKind::Lock,
        TextKind::Stream,
        TextKind::Prose,
    ] {
        let f = scanner().scan(data, kind, kind != TextKind::Stream);
        for w in f.windows(2) {
            assert!(w[0].end <= w[1].start, "overlapping findings {w:?}");
        }
        for x in &f {
            assert!(x.start < x.end && x.end <= data.len(), "bad span {x:?}");
        }
    }
}

/// `input` with every secret a scan of the whole text finds replaced by its marker: what
/// the streaming redactor must produce, however the stream is chunked or paused. (The text
/// scanned is normalised as the redactor's: escape sequences and UTF-16's NULs removed.)
pub(crate) fn redacted_whole(input: &[u8]) -> Vec<u8> {
    normalise::redact_whole(input)
}

/// Fuzz entry (fuzz/fuzz_targets/secrets_redact.rs): the first byte picks chunk sizes and
/// whether lines are flushed between chunks; the redactor's output must be exactly the input
/// with every secret the scanner finds in it replaced by its marker, however it was chunked.
pub fn fuzz_redact(data: &[u8]) {
    let Some((&sel, input)) = data.split_first() else {
        return;
    };
    let chunk = 1 + (sel as usize % 64) * 37;
    let flush = sel & 0x80 != 0;
    let expected = redacted_whole(input);
    let mut out = Vec::new();
    let mut r = Redactor::new(TextKind::Stream);
    for c in input.chunks(chunk) {
        r.feed(c, &mut out);
        if flush {
            r.flush_lines(&mut out);
        }
    }
    r.finish(&mut out);
    assert!(
        out == expected,
        "chunked redaction (chunk {chunk}, flush {flush}) differs from the scan of the whole input"
    );
}

/// Fuzz entry (fuzz/fuzz_targets/secrets_time.rs): scanning and redaction take time
/// proportional to the input's length whatever its shape. The input is repeated to
/// [`FUZZ_TIME_LEN`] bytes (so that work per byte, not fixed costs, is measured, and a unit
/// the fuzzer finds is tried as a long run of itself), scanned as every kind and redacted
/// as a stream; the time must stay within [`FUZZ_TIME_FACTOR`] times that of as much
/// ordinary text (measured once per process, in the same build), else it fails.
///
/// Time is this thread's CPU time where the kernel tells it (`/proc/thread-self/schedstat`,
/// updated at scheduler ticks: 4 ms here, ~2% of the fuzz build's reference), else the wall
/// clock: on a machine shared with other fuzzers, the wall clock counted their
/// time too (`password=  'x` repeated took 24x ordinary text's wall time in one run, 5x its
/// CPU time in the same build).
pub fn fuzz_time_budget(data: &[u8]) {
    use std::sync::OnceLock;
    use std::time::Instant;
    /// Seconds on a clock that counts this thread's work only, where there is one.
    fn now() -> f64 {
        static WALL: OnceLock<Instant> = OnceLock::new();
        let cpu = std::fs::read_to_string("/proc/thread-self/schedstat")
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok());
        // Decided once per process, so that both ends of a measure use the same clock.
        static THREAD_CPU: OnceLock<bool> = OnceLock::new();
        if *THREAD_CPU.get_or_init(|| cpu.is_some()) {
            cpu.map_or(f64::NAN, |ns| ns as f64 / 1e9)
        } else {
            WALL.get_or_init(Instant::now).elapsed().as_secs_f64()
        }
    }
    fn work(text: &[u8]) -> f64 {
        let t = now();
        for kind in [TextKind::Code, TextKind::Config, TextKind::Stream] {
            std::hint::black_box(scanner().scan(text, kind, kind != TextKind::Stream));
        }
        let mut r = Redactor::new(TextKind::Stream);
        let mut out = Vec::with_capacity(text.len());
        for c in text.chunks(64 * 1024) {
            r.feed(c, &mut out);
            r.flush_lines(&mut out);
        }
        r.finish(&mut out);
        std::hint::black_box(out);
        now() - t
    }
    fn repeated(unit: &[u8]) -> Vec<u8> {
        unit.iter().copied().cycle().take(FUZZ_TIME_LEN).collect()
    }
    static REFERENCE: OnceLock<f64> = OnceLock::new();
    let reference = *REFERENCE.get_or_init(|| {
        // Ordinary output: log lines mentioning keywords, a secret now and then.
        let text = repeated(
            b"2026-11-25 build step 42 finished: api_key lookup ok, password policy applied, \
              token cache warm; ghp_0123456789abcdefABCDEF0123456789abcd rotated\n",
        );
        let _ = scanner().compile_all();
        (0..3).map(|_| work(&text)).fold(f64::INFINITY, f64::min)
    });
    if data.is_empty() {
        return;
    }
    let text = repeated(data);
    // Measured again when over (the best of two), so that a pause of the machine is not
    // taken for the input's cost; an input within the budget is measured once.
    let mut t = work(&text);
    if t > FUZZ_TIME_FACTOR * reference {
        t = t.min(work(&text));
    }
    assert!(
        t <= FUZZ_TIME_FACTOR * reference,
        "{FUZZ_TIME_LEN} bytes of {:?} repeated took {t:.3} s, more than \
         {FUZZ_TIME_FACTOR} times the {reference:.3} s of as much ordinary text",
        String::from_utf8_lossy(&data[..data.len().min(64)])
    );
}

/// The length [`fuzz_time_budget`] repeats its input to.
pub const FUZZ_TIME_LEN: usize = 256 * 1024;
/// How many times ordinary text's time [`fuzz_time_budget`] allows.
pub const FUZZ_TIME_FACTOR: f64 = 20.0;
