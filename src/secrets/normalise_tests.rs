//! Tests of normalisation before matching: coloured and UTF-16 output as tools print it,
//! redacted whole and fed in every split, the value gone and every other byte as it came.
//! Values are generated at run time (no secret-looking literal in the repository).

use super::super::{Redactor, TextKind};
use super::*;

/// A random value of `n` characters of `alphabet` (xorshift64*, from `seed`).
fn random_of(alphabet: &[u8], n: usize, seed: u64) -> String {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
            alphabet[(r % alphabet.len() as u64) as usize] as char
        })
        .collect()
}

const AN: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const B64: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/";
const B32: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/// `input` fed to a redactor in pieces ending at `cuts`, pausing after each when `pause`.
fn fed(input: &[u8], cuts: &[usize], pause: bool) -> Vec<u8> {
    let mut r = Redactor::new(TextKind::Stream);
    let mut out = Vec::new();
    let mut at = 0;
    for &c in cuts {
        r.feed(&input[at..c], &mut out);
        if pause {
            r.flush_lines(&mut out);
        }
        at = c;
    }
    r.feed(&input[at..], &mut out);
    r.finish(&mut out);
    out
}

/// The redaction of `input` fed whole; checks that it is the same fed in every split (one
/// cut anywhere, with and without a pause; one byte at a time, pausing after each) and the
/// same as the reference computed from the whole ([`redact_whole`]).
fn redacted_every_way(input: &[u8]) -> Vec<u8> {
    let whole = fed(input, &[], false);
    let show = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    assert!(
        whole == redact_whole(input),
        "the stream fed whole differs from the whole text's redaction: {:?} vs {:?}",
        show(&whole),
        show(&redact_whole(input))
    );
    for i in 0..=input.len() {
        for pause in [false, true] {
            let s = fed(input, &[i], pause);
            assert!(
                s == whole,
                "cut at {i} (pause {pause}): {:?}, fed whole: {:?}",
                show(&s),
                show(&whole)
            );
        }
    }
    let bytes: Vec<usize> = (1..input.len()).collect();
    let s = fed(input, &bytes, true);
    assert!(
        s == whole,
        "byte by byte: {:?} vs {:?}",
        show(&s),
        show(&whole)
    );
    whole
}

/// Asserts `out` is `before`, one marker, `after`: the value (and only it) redacted.
fn assert_redacted(out: &[u8], before: &str, after: &str, value: &str) {
    let o = String::from_utf8_lossy(out);
    assert!(!o.contains(value), "the value is shown: {o:?}");
    let ok = o.len() > before.len() + after.len()
        && o.starts_with(before)
        && o.ends_with(after)
        && is_marker(&o[before.len()..o.len() - after.len()]);
    assert!(ok, "not {before:?} [REDACTED:...] {after:?} but {o:?}");
}

fn is_marker(s: &str) -> bool {
    s.strip_prefix("[REDACTED:")
        .and_then(|r| r.strip_suffix(']'))
        .is_some_and(|r| {
            !r.is_empty()
                && r.bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        })
}

/// One coloured line: the text before the value, the value's raw bytes (escapes inside it
/// perhaps), the text after, and the value's parts that must not be shown.
struct Case {
    before: String,
    value: String,
    after: String,
    parts: Vec<String>,
}

fn case(before: &str, value: &str, after: &str, parts: &[&str]) -> Case {
    Case {
        before: before.into(),
        value: value.into(),
        after: after.into(),
        parts: parts.iter().map(|p| p.to_string()).collect(),
    }
}

fn coloured_cases(seed: u64) -> Vec<Case> {
    let v = random_of(AN, 24, seed);
    let (a, b) = v.split_at(11);
    let k = random_of(B64, 40, seed + 1);
    let akia = format!("AKIA{}", random_of(B32, 16, seed + 2));
    let (ka, kb) = akia.split_at(9);
    vec![
        // A coloured value.
        case("PASSWORD=\x1b[31m", &v, "\x1b[0m\n", &[&v]),
        // A coloured name.
        case("\x1b[1mpassword\x1b[0m: ", &v, "\n", &[&v]),
        // A value split by an SGR sequence: the sequence goes with it.
        case("password=", &format!("{a}\x1b[1m{b}"), "\x1b[0m\n", &[a, b]),
        case(
            "key ",
            &format!("{ka}\x1b[38;5;208m{kb}"),
            "\x1b[0m used\n",
            &[ka, kb],
        ),
        // grep --color=always password
        case(
            "config.env:\x1b[01;31m\x1b[Kpassword\x1b[m\x1b[K=",
            &v,
            "\n",
            &[&v],
        ),
        case(
            "\x1b[35m\x1b[Kconfig.env\x1b[m\x1b[K\x1b[36m\x1b[K:\x1b[m\x1b[KDB_\x1b[01;31m\x1b[KPASSWORD\x1b[m\x1b[K=",
            &v,
            "\n",
            &[&v],
        ),
        // git diff --color
        case("+\x1b[32mAWS_SECRET_ACCESS_KEY=", &k, "\x1b[m\n", &[&k]),
        case(
            "\x1b[32m+\x1b[m\x1b[32mAWS_SECRET_ACCESS_KEY=",
            &k,
            "\x1b[m\n",
            &[&k],
        ),
        // ... with the changed part highlighted (diff-highlight, `--color-words`).
        case(
            "\x1b[32m+AWS_SECRET_ACCESS_KEY=\x1b[m\x1b[7;32m",
            &k,
            "\x1b[m\n",
            &[&k],
        ),
        case(
            "AWS_SECRET_ACCESS_KEY=\x1b[31m",
            &format!("{}\x1b[m\x1b[32m{}", &k[..20], &k[20..]),
            "\x1b[m\n",
            &[&k[..20], &k[20..]],
        ),
        // jq -C
        case(
            "\x1b[1;39m{\n  \x1b[0m\x1b[34;1m\"password\"\x1b[0m\x1b[1;39m:\x1b[0;32m\"",
            &v,
            "\"\x1b[0m\x1b[1;39m\n\x1b[1;39m}\x1b[0m\n",
            &[&v],
        ),
        // An OSC 8 hyperlink around the value, and one between the name and it.
        case(
            "password=\x1b]8;;https://example.invalid/x\x1b\\",
            &v,
            "\x1b]8;;\x1b\\\n",
            &[&v],
        ),
        case(
            "\x1b]8;id=1;file:///etc/app.env\x07DB_PASSWORD\x1b]8;;\x07=",
            &v,
            "\n",
            &[&v],
        ),
        // `ESC ( B` (tput sgr0), a window title before the line.
        case(
            "\x1b]0;deploy\x07password=\x1b[31m",
            &v,
            "\x1b(B\x1b[m\n",
            &[&v],
        ),
    ]
}

/// Coloured output as tools print it (git diff, grep, jq, coloured logs, hyperlinks): the
/// value is redacted, the escapes before and after it stay, and so does every other byte,
/// whole and in every split. (Before normalisation, the escapes between a name and its
/// value, or inside a value, hid it.)
#[test]
fn coloured_values_are_redacted_and_every_other_byte_kept() {
    for seed in 1..3 {
        for c in coloured_cases(seed) {
            let input = format!("{}{}{}", c.before, c.value, c.after);
            let out = redacted_every_way(input.as_bytes());
            for p in &c.parts {
                assert!(
                    !String::from_utf8_lossy(&out).contains(p.as_str()),
                    "{p:?} shown in {:?}",
                    String::from_utf8_lossy(&out)
                );
            }
            assert_redacted(&out, &c.before, &c.after, &c.value);
        }
    }
}

/// The 8-bit CSI (`0x9b`) after an ASCII byte is a sequence, inside a value too.
#[test]
fn an_8_bit_csi_after_ascii_is_a_sequence() {
    let v = random_of(AN, 24, 7);
    let (a, b) = v.split_at(10);
    let mut input = b"password=\x9b31m".to_vec();
    input.extend_from_slice(a.as_bytes());
    input.extend_from_slice(b"\x9b1m");
    input.extend_from_slice(b.as_bytes());
    input.extend_from_slice(b"\x9b0m\n");
    let out = redacted_every_way(&input);
    let mut want = b"password=\x9b31m".to_vec();
    let marker = &out[want.len().min(out.len())..out.len().saturating_sub(4)];
    assert!(
        is_marker(&String::from_utf8_lossy(marker)),
        "{:?}",
        String::from_utf8_lossy(&out)
    );
    want.extend_from_slice(marker);
    want.extend_from_slice(b"\x9b0m\n");
    assert_eq!(out, want);
}

/// A coloured structured log, lines of it: each line's value redacted, nothing else
/// changed.
#[test]
fn coloured_structured_log_lines_are_redacted_line_by_line() {
    let mut input = String::new();
    let mut want = String::new();
    let mut values = Vec::new();
    for i in 0..6 {
        let v = random_of(AN, 20, 40 + i);
        let head = format!(
            "\x1b[2m2026-12-07T21:0{i}:00Z\x1b[0m \x1b[32m INFO\x1b[0m \x1b[2mapp::db\x1b[0m: connecting \x1b[3mdb_password\x1b[0m\x1b[2m=\x1b[0m"
        );
        input.push_str(&format!(
            "{head}{v} \x1b[3mhost\x1b[0m\x1b[2m=\x1b[0mdb{i}\n"
        ));
        want.push_str(&format!(
            "{head}[REDACTED:@] \x1b[3mhost\x1b[0m\x1b[2m=\x1b[0mdb{i}\n"
        ));
        values.push(v);
    }
    let out = String::from_utf8_lossy(&redacted_every_way(input.as_bytes())).into_owned();
    for v in &values {
        assert!(!out.contains(v.as_str()), "{v} shown in {out:?}");
    }
    // The same, markers aside.
    let mut rest = out.as_str();
    let mut got = String::new();
    while let Some(i) = rest.find("[REDACTED:") {
        got.push_str(&rest[..i]);
        got.push_str("[REDACTED:@]");
        rest = &rest[i..];
        rest = &rest[rest.find(']').map_or(rest.len(), |j| j + 1)..];
    }
    got.push_str(rest);
    assert_eq!(got, want);
}

/// A secret inside a string sequence's payload (a hyperlink's URI) is found and redacted
/// there; the link's text and the sequence's frame stay.
#[test]
fn a_secret_in_a_hyperlinks_uri_is_redacted_in_it() {
    for seed in 1..3 {
        let akia = format!("AKIA{}", random_of(B32, 16, seed));
        let input = format!(
            "see \x1b]8;;https://example.invalid/k/{akia}\x1b\\the key\x1b]8;;\x1b\\ now\n"
        );
        let out = redacted_every_way(input.as_bytes());
        assert_redacted(
            &out,
            "see \x1b]8;;https://example.invalid/k/",
            "\x1b\\the key\x1b]8;;\x1b\\ now\n",
            &akia,
        );
    }
}

/// Text with escapes and no secret, and escapes that are not sequences (a stray `ESC`, an
/// `ESC [` never finished, `0x9b` inside UTF-8, a sequence cut by the end of the stream),
/// comes out byte for byte, in every split.
#[test]
fn text_without_secrets_is_unchanged_whatever_its_escapes() {
    let cases: Vec<Vec<u8>> = vec![
        b"\x1b[1;32mok\x1b[0m build \x1b]8;;http://x/\x1b\\link\x1b]8;;\x1b\\ done\n".to_vec(),
        b"stray \x1b and \x1b[ never finished\nnext \x1b[12;".to_vec(),
        "caf\u{00db} \u{06db}\u{3b9b} \x1b[0m end\n"
            .as_bytes()
            .to_vec(),
        b"\x1b]0;title without end\nline\n".to_vec(),
        b"progress 10%\r\x1b[Kprogress 20%\r\x1b[K done\n\x1b".to_vec(),
        b"c1 \x9b1m bold \x9b0m\n\xc3\x9b\x9b".to_vec(),
    ];
    for c in &cases {
        let out = redacted_every_way(c);
        assert!(
            out == *c,
            "{:?} came out as {:?}",
            String::from_utf8_lossy(c),
            String::from_utf8_lossy(&out)
        );
    }
}

/// The normalised text and its map: sequences gone, a finding's span mapped back to its
/// raw bytes with the escapes inside it and none around it.
#[test]
fn the_map_brings_a_span_back_to_its_raw_bytes() {
    let raw = b"a\x1b[31mbc\x1b[0m\x1b[1md\x9b2me\x1b]8;;u\x07f";
    let (norm, esc) = strip_escapes(raw);
    assert_eq!(norm, b"abcdef");
    let span = |s: usize, e: usize| &raw[esc.raw_of(s)..esc.raw_of(e - 1) + 1];
    assert_eq!(span(0, 1), b"a");
    assert_eq!(span(1, 3), b"bc");
    assert_eq!(span(1, 4), b"bc\x1b[0m\x1b[1md");
    assert_eq!(span(4, 6), b"e\x1b]8;;u\x07f");
    assert_eq!(esc.raw_of(6), raw.len());
    assert_eq!(
        esc.strings
            .iter()
            .map(|&(s, e)| &raw[s..e])
            .collect::<Vec<_>>(),
        [b"8;;u"]
    );
}

fn utf16(s: &str, be: bool, bom: bool) -> Vec<u8> {
    let mut out = Vec::new();
    if bom {
        out.extend_from_slice(if be { &[0xfe, 0xff] } else { &[0xff, 0xfe] });
    }
    for u in s.encode_utf16() {
        out.extend_from_slice(&if be { u.to_be_bytes() } else { u.to_le_bytes() });
    }
    out
}

/// UTF-16 output (LE with and without a BOM, BE with one): the value is redacted, the
/// marker written in UTF-16, the BOM and every other code unit kept, whole and in every
/// split (a code unit cut between chunks).
#[test]
fn utf16_values_are_redacted_in_utf16() {
    for seed in 1..3 {
        let v = random_of(AN, 24, seed);
        let k = random_of(B64, 40, seed + 1);
        let lines = [
            (
                "Name: app\r\nPassword: ".to_string(),
                v.clone(),
                "\r\nPort: 5432\r\n".to_string(),
            ),
            (
                "C:\\> type config.env\r\nAWS_SECRET_ACCESS_KEY=".to_string(),
                k.clone(),
                "\r\n".to_string(),
            ),
            // Coloured as well (a Windows terminal's escapes, in UTF-16).
            (
                "PASSWORD=\x1b[31m".to_string(),
                v.clone(),
                "\x1b[0m\r\n".to_string(),
            ),
        ];
        for (before, value, after) in &lines {
            for (be, bom) in [(false, true), (false, false), (true, true)] {
                let input = utf16(&format!("{before}{value}{after}"), be, bom);
                let out = redacted_every_way(&input);
                let body = if bom { &out[2..] } else { &out[..] };
                if bom {
                    assert_eq!(out[..2], input[..2], "the BOM");
                }
                let units: Vec<u16> = body
                    .chunks_exact(2)
                    .map(|p| {
                        if be {
                            u16::from_be_bytes([p[0], p[1]])
                        } else {
                            u16::from_le_bytes([p[0], p[1]])
                        }
                    })
                    .collect();
                assert_eq!(body.len() % 2, 0, "code units stay aligned");
                let text = String::from_utf16(&units).unwrap_or_default();
                assert_redacted(text.as_bytes(), before, after, value);
            }
        }
    }
}

/// UTF-16 without a secret, with characters outside the BMP, lone surrogates and an odd
/// last byte, comes out byte for byte in every split; so does text that only starts like
/// UTF-16.
#[test]
fn utf16_without_secrets_is_unchanged() {
    let mut lone = utf16("lone \u{1f600} surrogates: ", false, true);
    lone.extend_from_slice(&[0x00, 0xd8, 0x41, 0x00, 0x00, 0xdc, 0x00, 0xd8]);
    lone.push(0x7a);
    let cases = vec![
        utf16("build ok \u{e9}\u{1f600}\r\n", false, true),
        utf16(
            "build ok without a BOM, long enough to tell\r\n",
            false,
            false,
        ),
        utf16("big-endian \u{4e2d}\u{6587}\r\n", true, true),
        lone,
        b"a\0b\0 then bytes that are not UTF-16 at all\n".to_vec(),
        vec![0xff],
        vec![0, 0, 0, 1, 0],
    ];
    for c in &cases {
        let out = redacted_every_way(c);
        assert!(out == *c, "{c:?} came out as {out:?}");
    }
}

#[test]
fn utf16_is_told_by_its_bom_or_its_nuls() {
    let le = Encoding::Utf16 {
        be: false,
        bom: false,
    };
    assert_eq!(detect(&utf16("hello there", false, false), true), Some(le));
    assert_eq!(detect(&utf16("h", false, false), false), None);
    assert_eq!(
        detect(&[0xfe, 0xff], false),
        Some(Encoding::Utf16 {
            be: true,
            bom: true
        })
    );
    assert_eq!(detect(b"hello", false), Some(Encoding::Bytes));
    assert_eq!(detect(&[0, 0, 0, 0, 0, 0], true), Some(Encoding::Bytes));
    let file = utf16("password: x\r\n", false, true);
    assert_eq!(
        decode_utf16(&file).as_deref(),
        Some(&b"password: x\r\n"[..])
    );
    assert_eq!(encode_like(&file, b"password: x\r\n"), file);
    assert_eq!(decode_utf16(b"plain"), None);
}

/// UTF-16 anywhere in a stream, and ASCII after UTF-16: each is read (the stream was decided
/// UTF-16 or not by its first bytes: a BOM turned redaction off for the ASCII after it, and
/// UTF-16 after some ASCII was never decoded). At either alignment, LE and BE.
#[test]
fn utf16_and_ascii_mixed_in_one_stream_are_both_read() {
    let v = random_of(AN, 24, 7);
    let w = random_of(AN, 24, 8);
    let line = |val: &str| format!("DB_PASSWORD={val}\n");
    let ascii = line(&v);
    for be in [false, true] {
        for bom in [false, true] {
            // UTF-16 first, then ASCII (`cat notes-utf16.txt .env`).
            let mut input = utf16(&format!("notes\r\n{}", line(&w)), be, bom);
            input.extend_from_slice(ascii.as_bytes());
            // ASCII first (one byte or more: both alignments), then UTF-16.
            for pre in ["ok", "x", "some output first\n"] {
                input.extend_from_slice(pre.as_bytes());
                input.extend_from_slice(&utf16(&line(&w), be, false));
            }
            let out = redacted_every_way(&input);
            let shown: Vec<u8> = out.iter().copied().filter(|&b| b != 0).collect();
            let shown = String::from_utf8_lossy(&shown);
            assert!(!shown.contains(&v[4..]), "be {be} bom {bom}: {shown:?}");
            assert!(!shown.contains(&w[4..]), "be {be} bom {bom}: {shown:?}");
            assert_eq!(shown.matches("[REDACTED:").count(), 5, "{shown:?}");
        }
    }
}

/// What a terminal shows nothing for does not hide a token: a NUL inside a sequence inside
/// it, a sequence with many parameters. (A lone NUL inside a token is binary data's
/// separator, kept: see `binary_strings_are_not_joined_across_their_nuls`.)
#[test]
fn nuls_inside_a_token_or_its_sequences_do_not_hide_it() {
    let v = format!("ghp_{}", random_of(AN, 36, 9));
    let (a, b) = v.split_at(10);
    for mid in [
        "\x1b[3\x001m".to_string(),
        "\x1b\0[0m".to_string(),
        format!("\x1b[{}m", "1;".repeat(40)),
        format!("\x1b[{}m", "38;5;1;".repeat(100)),
    ] {
        let input = format!("the token {a}{mid}{b} here\n");
        let out = redacted_every_way(input.as_bytes());
        let o = String::from_utf8_lossy(&out);
        assert!(!o.contains(a) && !o.contains(b), "{mid:?}: {o:?}");
    }
}

/// Binary data's NULs are kept between its strings: removed, they joined an ELF's string
/// table into keyword values (`current_token == STRING\0parse_string`), and `cat` of gdb,
/// unzip or passwd came back changed. NUL runs and NULs between strings stay text; UTF-16's
/// (`NUL X NUL`) alone go.
#[test]
fn binary_strings_are_not_joined_across_their_nuls() {
    let cases: Vec<Vec<u8>> = vec![
        b"current_token == STRING\0parse_string\0Could\0".to_vec(),
        b"secret: \0GLIBC_2.2.5\0GLIBC_2.14\0".to_vec(),
        b"OLDPWD=\0chdir\0eLP\0HOME\0".to_vec(),
        b"New Password: \0Re-enter new password: \0\0\0".to_vec(),
        b"--private-key=)\0\0\0\0\0\0token\0\0\0Defl:#\0\0Def64#".to_vec(),
        [
            &b"\x7fELF\x02\x01\x01"[..],
            &[0u8; 4096],
            b"password=\0\0\0\0hunter2and_more\0",
        ]
        .concat(),
    ];
    for c in &cases {
        let out = redacted_every_way(c);
        assert!(
            out == *c,
            "{:?} came out as {:?}",
            String::from_utf8_lossy(c),
            String::from_utf8_lossy(&out)
        );
    }
}
