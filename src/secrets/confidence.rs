//! How sure a finding is: `high` for a validated vendor format (a known prefix or shape, with
//! its structure checked where it has one: a JWT's header decodes to JSON naming its `alg`),
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
        let generic = super::rules::RULES
            .iter()
            .find(|r| r.id == self.rule)
            .is_none_or(|r| r.generic);
        if generic || MEDIUM_RULES.contains(&self.rule) {
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
                "x = ghp_0123456789abcdefABCDEF0123456789abcd\n",
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
