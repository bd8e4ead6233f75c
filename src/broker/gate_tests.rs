//! The gate: every string of every record and report type, planted with a token, comes out
//! without it.

use super::*;

/// A GitHub-token-shaped string made at run time (no secret-looking literal in the source).
fn token(seed: u64) -> String {
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut x = seed
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    let body: String = (0..36)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ALNUM[((x >> 33) % ALNUM.len() as u64) as usize] as char
        })
        .collect();
    format!("{}{}", ["gh", "p_"].concat(), body)
}

#[test]
fn a_token_is_redacted_and_a_marker_is_kept_as_it_is() {
    let t = token(1);
    let s = format!("before {t} after");
    let out = text(&s);
    assert!(!out.contains(&t), "{out}");
    assert!(out.contains("[REDACTED:github-pat]"), "{out}");
    // Text redacted before keeps its markers: not redacted again under another rule.
    let again = text(&out).into_owned();
    assert_eq!(again, out);
    for kept in [
        "password=[REDACTED:github-pat]",
        "\"token\": \"[REDACTED:keyword-secret]\"",
        "DB_PASSWORD='[REDACTED]'",
    ] {
        assert_eq!(text(kept), kept);
    }
    assert!(matches!(
        text("nothing here"),
        std::borrow::Cow::Borrowed(_)
    ));
}

#[test]
fn a_long_record_field_keeps_head_and_tail() {
    let mut s = "a".repeat(RECORD_STRING_MAX) + &"b".repeat(RECORD_STRING_MAX);
    assert!(bounded(&mut s, RECORD_STRING_MAX));
    assert!(s.len() < RECORD_STRING_MAX + 200, "{}", s.len());
    assert!(s.starts_with("aaa") && s.ends_with("bbb") && s.contains("bytes cut here"));
}
