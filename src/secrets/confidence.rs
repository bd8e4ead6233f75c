//! How sure a finding is: `high` for a validated vendor format (a known prefix or shape, with
//! its structure checked where it has one: a JWT's header decodes to JSON naming its `alg`;
//! GitHub's and npm's tokens end in a CRC32 of their random part, which must verify),
//! `medium` for what a keyword assigned (`password = ...`) or a credential in a URL, `low` for
//! bare entropy.

use super::scan::Finding;
use serde::{Deserialize, Serialize};

/// A finding's confidence; ordered `low < medium < high`.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    /// Bare entropy: a random-looking string.
    #[default]
    Low,
    /// A value assigned to a secret-like name, or the password of a URL.
    Medium,
    /// A validated vendor format.
    High,
}

impl Confidence {
    /// `low`, `medium` or `high`.
    pub fn as_str(self) -> &'static str {
        match self {
            Confidence::Low => "low",
            Confidence::Medium => "medium",
            Confidence::High => "high",
        }
    }
}

impl std::fmt::Display for Confidence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Rules whose findings are `medium`: no vendor shape, only their context says "secret".
const MEDIUM_RULES: &[&str] = &["database-url", "basic-auth-url"];

impl Finding {
    /// This finding's confidence; `text` is the text it was found in.
    pub fn confidence(&self, text: &[u8]) -> Confidence {
        if !self.specific {
            return Confidence::Low;
        }
        let rule = super::rules::RULES.iter().find(|r| r.id == self.rule);
        if rule.is_none_or(|r| r.generic || r.named) || MEDIUM_RULES.contains(&self.rule) {
            return Confidence::Medium;
        }
        // A vendor checksum that does not verify: the shape of a token, not one issued.
        if let Some(sum) = rule.and_then(|r| r.checksum)
            && !text.get(self.start..self.end).is_some_and(sum)
        {
            return Confidence::Medium;
        }
        if self.rule == "jwt" && !jwt_header_names_alg(text.get(self.start..self.end)) {
            return Confidence::Medium;
        }
        Confidence::High
    }
}

/// A JWT's header (its first part) decodes to a JSON object with an `alg` member.
fn jwt_header_names_alg(token: Option<&[u8]>) -> bool {
    use base64::Engine;
    let Some(token) = token else { return false };
    let header = token.split(|&b| b == b'.').next().unwrap_or(&[]);
    let header: Vec<u8> = header.iter().copied().filter(|&b| b != b'=').collect();
    let Ok(h) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(&header) else {
        return false;
    };
    serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(&h)
        .is_ok_and(|m| m.get("alg").is_some_and(serde_json::Value::is_string))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::{TextKind, scanner};
    use base64::Engine;

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s)
    }

    /// `prefix` + `random` (30 base62 characters) + the CRC32 of `random` in 6 base62 digits:
    /// encoded here digit by digit, independently of the decoder under test.
    fn checksummed(prefix: &str, random: &str) -> String {
        const DIGITS: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
        let mut n = crc32fast::hash(random.as_bytes());
        let mut tail = [b'0'; 6];
        for d in tail.iter_mut().rev() {
            *d = DIGITS[(n % 62) as usize];
            n /= 62;
        }
        format!("{prefix}{random}{}", String::from_utf8_lossy(&tail))
    }

    #[test]
    fn github_and_npm_tokens_whose_crc32_verifies_are_high_and_others_medium() {
        let randoms = [
            "0123456789abcdefABCDEF01234567",
            "Zq8xK2mP4vR7Zq8xK2mP4vR7Zq8xK2",
            "Tm3Wc9Lq0Xb7Ys2Kd8Vf1Hn6Jr4Pg5",
        ];
        let rules = [
            ("ghp_", "github-pat"),
            ("gho_", "github-oauth-token"),
            ("ghu_", "github-app-token"),
            ("ghs_", "github-app-token"),
            ("ghr_", "github-refresh-token"),
            ("npm_", "npm-token"),
        ];
        for (prefix, rule) in rules {
            for random in randoms {
                let good = checksummed(prefix, random);
                assert_eq!(
                    one(&format!("t = {good}\n"), TextKind::Stream, false),
                    (rule.to_string(), Confidence::High),
                    "{good}"
                );
                // One character of the random part changed, or of the checksum: still a
                // finding of the same rule, but medium.
                for i in [4, 20, 33, 39] {
                    let mut bad = good.clone().into_bytes();
                    bad[i] = if bad[i] == b'q' { b'r' } else { b'q' };
                    let bad = String::from_utf8(bad).expect("ascii");
                    assert_eq!(
                        one(&format!("t = {bad}\n"), TextKind::Stream, false),
                        (rule.to_string(), Confidence::Medium),
                        "{bad}"
                    );
                }
            }
        }
        // A checksum digit string above u32 (`zzzzzz`) never verifies, and no other length does.
        assert!(!crate::secrets::rules::base62_crc32_verifies(
            format!("ghp_{}zzzzzz", "a".repeat(30)).as_bytes()
        ));
        let good = checksummed("ghp_", randoms[0]);
        assert!(crate::secrets::rules::base62_crc32_verifies(
            good.as_bytes()
        ));
        assert!(!crate::secrets::rules::base62_crc32_verifies(
            format!("{good}0").as_bytes()
        ));
        // The legacy npm form (a UUID under a registry scope) has no checksum: high.
        let t = "//registry.npmjs.org/:_authToken=6f1c2a9e-7b3d-4e8f-a1c5-9d2b7e4f3a60\n";
        assert_eq!(
            one(t, TextKind::Config, false),
            ("npm-token".into(), Confidence::High)
        );
    }

    fn one(text: &str, kind: TextKind, entropy: bool) -> (String, Confidence) {
        let f = scanner().scan(text.as_bytes(), kind, entropy);
        assert_eq!(f.len(), 1, "one finding in {text:?}: {f:?}");
        (f[0].rule.to_string(), f[0].confidence(text.as_bytes()))
    }

    #[test]
    fn confidence_of_a_jwt_with_a_json_header_naming_alg_is_high() {
        let t = format!(
            "token {}.{}.c2lnbmF0dXJlX2J5dGVz\n",
            b64(r#"{"alg":"HS256","typ":"JWT"}"#),
            b64(r#"{"sub":"1234567890"}"#)
        );
        assert_eq!(
            one(&t, TextKind::Stream, false),
            ("jwt".into(), Confidence::High)
        );
    }

    #[test]
    fn confidence_of_a_jwt_whose_header_is_not_json_is_not_high() {
        // Looks like JSON to a byte search ({ … "typ" …) but does not parse, and names no alg;
        // then a JSON header without `alg`: neither is high.
        for header in [r#"{"typ":"JWT", not json"#, r#"{"typ":"JWT"}"#] {
            let t = format!(
                "token {}.{}.c2lnbmF0dXJlX2J5dGVz\n",
                b64(header),
                b64(r#"{"sub":"1234567890"}"#)
            );
            let f = scanner().scan(t.as_bytes(), TextKind::Stream, false);
            assert!(
                f.iter()
                    .all(|x| x.confidence(t.as_bytes()) < Confidence::High),
                "{header}: {f:?}"
            );
        }
    }

    #[test]
    fn confidence_is_high_for_vendor_medium_for_keywords_low_for_entropy() {
        assert_eq!(
            one(
                &format!(
                    "x = {}\n",
                    checksummed("ghp_", "0123456789abcdefABCDEF01234567")
                ),
                TextKind::Stream,
                false
            ),
            ("github-pat".into(), Confidence::High)
        );
        assert_eq!(
            one("password = hunter2isnotsafe\n", TextKind::Config, false).1,
            Confidence::Medium
        );
        assert_eq!(
            one(
                "url = \"postgres://app:s3cretpw@db.example:5432/x\"\n",
                TextKind::Code,
                false
            ),
            ("database-url".into(), Confidence::Medium)
        );
        assert_eq!(
            one(
                "NAME=\"9fK2xQ7vLm3pR8sT1wYz4bN6cD0eH5jA\"\n",
                TextKind::Config,
                true
            )
            .1,
            Confidence::Low
        );
        assert!(Confidence::Low < Confidence::Medium && Confidence::Medium < Confidence::High);
    }
}
