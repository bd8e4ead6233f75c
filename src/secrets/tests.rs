use super::*;

fn rules_found(text: &str, kind: TextKind) -> Vec<&'static str> {
    scanner()
        .scan(text.as_bytes(), kind, true)
        .into_iter()
        .map(|f| f.rule)
        .collect()
}

#[test]
fn every_rule_compiles() {
    scanner().compile_all().unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn rule_ids_are_unique() {
    let mut ids: Vec<&str> = rules::RULES.iter().map(|r| r.id).collect();
    ids.sort();
    let n = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), n);
}

#[test]
fn finds_and_spans_secret_only() {
    let text = "token = \"ghp_0123456789abcdefABCDEF0123456789abcd\"\n";
    let f = scanner().scan(text.as_bytes(), TextKind::Code, true);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].rule, "github-pat");
    assert_eq!(
        &text[f[0].start..f[0].end],
        "ghp_0123456789abcdefABCDEF0123456789abcd"
    );
}

#[test]
fn pragma_allowlists() {
    let s = "ghp_0123456789abcdefABCDEF0123456789abcd";
    assert!(
        rules_found(
            &format!("x = \"{s}\"  # pragma: allowlist secret\n"),
            TextKind::Code
        )
        .is_empty()
    );
    assert!(
        rules_found(
            &format!("// pragma: allowlist nextline secret\nx = \"{s}\"\n"),
            TextKind::Code
        )
        .is_empty()
    );
    assert_eq!(
        rules_found(
            &format!("x = \"{s}\"  # allowlist secret\n"),
            TextKind::Code
        ),
        ["github-pat"]
    );
    // nextline applies to the next line only.
    assert_eq!(
        rules_found(
            &format!("# pragma: allowlist nextline secret\n\nx = \"{s}\"\n"),
            TextKind::Code
        ),
        ["github-pat"]
    );
}

#[test]
fn keyword_rule_respects_file_kind() {
    assert_eq!(
        rules_found("password = \"Tr0ub4dor&3\"\n", TextKind::Code),
        ["keyword-secret"]
    );
    assert!(rules_found("password = get_password()\n", TextKind::Config).is_empty());
    assert!(rules_found("password = user_input\n", TextKind::Code).is_empty());
    assert_eq!(
        rules_found("DB_PASSWORD=Tr0ub4dor3\n", TextKind::Config),
        ["keyword-secret"]
    );
    assert!(rules_found("password: ${DB_PASSWORD}\n", TextKind::Config).is_empty());
}

#[test]
fn entropy_and_filters() {
    assert_eq!(
        rules_found("k = \"Zq8vL3mR9wT2xK7pB4nY6cJ1hF5sD0gQ\"\n", TextKind::Code),
        ["high-entropy-base64"]
    );
    assert_eq!(
        rules_found("k = \"8f3a9c2e7b1d4f6a0c5e9b2d7f1a3c8e\"\n", TextKind::Code),
        ["high-entropy-hex"]
    );
    assert!(
        rules_found(
            "commit = \"8f3a9c2e7b1d4f6a0c5e9b2d7f1a3c8e\"\n",
            TextKind::Code
        )
        .is_empty()
    );
    assert!(
        rules_found(
            "user_id = \"Zq8vL3mR9wT2xK7pB4nY6cJ1hF5sD0gQ\"\n",
            TextKind::Code
        )
        .is_empty()
    );
    assert!(rules_found("k = \"Zq8vL3mR9wT2xK7pB4nY6cJ1hF5sD0gQ\"\n", TextKind::Lock).is_empty());
    // Entropy is off for streams.
    assert!(
        scanner()
            .scan(
                b"k = \"Zq8vL3mR9wT2xK7pB4nY6cJ1hF5sD0gQ\"\n",
                TextKind::Stream,
                false
            )
            .is_empty()
    );
}

fn redact_chunks(input: &[u8], chunk: usize, flush_each: bool) -> Vec<u8> {
    let mut r = Redactor::new(TextKind::Stream);
    let mut out = Vec::new();
    for c in input.chunks(chunk.max(1)) {
        r.feed(c, &mut out);
        if flush_each {
            r.flush_lines(&mut out);
        }
    }
    r.finish(&mut out);
    out
}

#[test]
fn redactor_handles_any_split() {
    let secret = "ghp_0123456789abcdefABCDEF0123456789abcd";
    let key = format!(
        "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n{}\n-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
        "QyNTUxOQAAACBhbGljZS1ib2ItY2Fyb2wtZGF2ZS1lbGxlbi1mcmFuay1nZW9yZ2UtaGFu"
    );
    let input = format!("line one\ntoken {secret} end\n{key}\npassword=Tr0ub4dor3\nlast\n");
    let want = "line one\ntoken [REDACTED:github-pat] end\n[REDACTED:private-key]\npassword=[REDACTED:keyword-secret]\nlast\n";
    for chunk in [1, 2, 3, 7, 16, 41, 100, 1000] {
        for flush in [false, true] {
            let out = redact_chunks(input.as_bytes(), chunk, flush);
            assert_eq!(
                String::from_utf8_lossy(&out),
                want,
                "chunk {chunk} flush {flush}"
            );
        }
    }
}

#[test]
fn redactor_large_stream_keeps_everything_else() {
    let mut input = Vec::new();
    for i in 0..20_000 {
        input.extend_from_slice(format!("row {i} nothing to see here\n").as_bytes());
        if i % 997 == 0 {
            input.extend_from_slice(b"key AKIAIOSFODNN7EXAMPLE\n");
        }
    }
    let out = redact_chunks(&input, 65536, false);
    let s = String::from_utf8_lossy(&out);
    assert!(!s.contains("AKIAIOSFODNN7EXAMPLE"));
    assert_eq!(s.matches("[REDACTED:aws-access-key-id]").count(), 21);
    assert_eq!(s.matches("nothing to see here").count(), 20_000);
}

#[test]
fn fingerprint_is_sha256_hex() {
    assert_eq!(
        fingerprint(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}

#[test]
fn line_col_counts() {
    assert_eq!(line_col(b"ab\ncd", 4), (2, 2));
    assert_eq!(line_col(b"ab\ncd", 0), (1, 1));
}

#[test]
fn prefilter_anchors_fit_teddy() {
    let (folded, exact) = scanner().anchor_counts();
    assert!(folded <= 120 && exact <= 120, "{folded} {exact}");
    assert!(folded > 0 && exact > 0);
}
#[test]
fn prefilter_finds_keywords_across_block_edges() {
    // A keyword straddling the prefilter's 32 KiB block boundary is found.
    for pad in 32 * 1024 - 8..32 * 1024 + 2 {
        let mut text = vec![b'x'; pad];
        text.extend_from_slice(b" ghp_0123456789abcdefABCDEF0123456789abcd\n");
        let f = scanner().scan(&text, TextKind::Stream, false);
        assert_eq!(f.len(), 1, "pad {pad}");
        assert_eq!(f[0].rule, "github-pat");
    }
}

#[test]
fn anchor_tables_are_current() {
    let (f, e) = prefilter::computed_anchors();
    let show = |v: &[Vec<u8>]| {
        v.iter()
            .map(|a| format!("{:?}", String::from_utf8_lossy(a)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (tf, te) = prefilter::anchor_tables();
    assert!(
        tf == f && te == e,
        "the rules changed: replace ANCHORS_FOLDED with [{}] and ANCHORS_EXACT with [{}]",
        show(&f),
        show(&e)
    );
}

#[test]
fn legacy_whitelist_pragma_is_honoured() {
    let s = "ghp_0123456789abcdefABCDEF0123456789abcd";
    assert!(
        rules_found(
            &format!("x = \"{s}\"  # pragma: whitelist secret\n"),
            TextKind::Code
        )
        .is_empty()
    );
    assert!(
        rules_found(
            &format!("# pragma: whitelist nextline secret\nx = \"{s}\"\n"),
            TextKind::Code
        )
        .is_empty()
    );
}

#[test]
fn ini_continuation_values() {
    let text =
        "[s]\nsecrets_for_no_one =\n    hunter2\n    Tr0ub4dor3\n    0123456789a\nnext = 1\n";
    assert_eq!(
        rules_found(text, TextKind::Config),
        ["keyword-secret", "keyword-secret"]
    );
    // Nested YAML keys are not values.
    assert!(rules_found("password:\n    secure: Tr0ub4dor3x\n", TextKind::Config).is_empty());
    // In code, indented lines after `password =` are not values.
    assert!(rules_found(text, TextKind::Code).is_empty());
}
