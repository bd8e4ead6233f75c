//! C2SP signed notes (<https://c2sp.org/signed-note>) with Ed25519 signatures, and
//! transparency-log checkpoints (<https://c2sp.org/tlog-checkpoint>).
//!
//! Written by hand: the Rust crates for this format wrap other signature libraries; the
//! format is a few lines of text, and signing and verifying go through `ring`.

use super::merkle::Hash;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};
use sha2::{Digest, Sha256};

/// Signature type byte of Ed25519 in key hashes and verifier keys.
const ALG_ED25519: u8 = 0x01;
/// Starts every signature line.
const SIG_PREFIX: &str = "\u{2014} ";

/// A public key with its name, as in a verifier key `name+hash+base64(0x01 || key)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifierKey {
    /// Key name (no spaces, no `+`).
    pub name: String,
    /// The 32-byte Ed25519 public key.
    pub key: [u8; 32],
}

impl VerifierKey {
    /// The 4-byte key hash: `SHA-256(name || "\n" || 0x01 || key)[..4]`.
    pub fn key_hash(&self) -> [u8; 4] {
        let mut h = Sha256::new();
        h.update(self.name.as_bytes());
        h.update(b"\n");
        h.update([ALG_ED25519]);
        h.update(self.key);
        let d = h.finalize();
        [d[0], d[1], d[2], d[3]]
    }

    /// The verifier key text.
    pub fn encode(&self) -> String {
        let mut k = vec![ALG_ED25519];
        k.extend_from_slice(&self.key);
        format!(
            "{}+{}+{}",
            self.name,
            crate::durable::hex(&self.key_hash()),
            B64.encode(k)
        )
    }

    /// Parses a verifier key text (checks its hash).
    pub fn decode(s: &str) -> Option<VerifierKey> {
        let mut parts = s.trim().splitn(3, '+');
        let name = parts.next()?;
        let hash = parts.next()?;
        let key = B64.decode(parts.next()?).ok()?;
        if name.is_empty() || name.contains(char::is_whitespace) {
            return None;
        }
        let (&alg, key) = key.split_first()?;
        let key: [u8; 32] = key.try_into().ok()?;
        let vk = VerifierKey {
            name: name.to_string(),
            key,
        };
        (alg == ALG_ED25519 && crate::durable::hex(&vk.key_hash()) == hash).then_some(vk)
    }

    /// Whether `sig` is this key's signature of `msg`.
    pub fn verify(&self, msg: &[u8], sig: &[u8]) -> bool {
        UnparsedPublicKey::new(&ED25519, self.key)
            .verify(msg, sig)
            .is_ok()
    }
}

/// A signing key with its name.
pub struct Signer {
    /// Key name.
    pub name: String,
    /// The key pair.
    pub pair: Ed25519KeyPair,
}

impl Signer {
    /// The public half.
    pub fn verifier(&self) -> VerifierKey {
        let mut key = [0u8; 32];
        key.copy_from_slice(self.pair.public_key().as_ref());
        VerifierKey {
            name: self.name.clone(),
            key,
        }
    }

    /// Signs `text` (which must end with a newline) into a note.
    pub fn sign(&self, text: &str) -> String {
        let sig = self.pair.sign(text.as_bytes());
        let mut blob = self.verifier().key_hash().to_vec();
        blob.extend_from_slice(sig.as_ref());
        format!("{text}\n{SIG_PREFIX}{} {}\n", self.name, B64.encode(blob))
    }
}

/// A parsed note: its text and signature lines (name, key hash, signature).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// The signed text, ending with a newline.
    pub text: String,
    /// (key name, key hash, signature bytes).
    pub sigs: Vec<(String, [u8; 4], Vec<u8>)>,
}

impl Note {
    /// Whether `key` signed this note.
    pub fn signed_by(&self, key: &VerifierKey) -> bool {
        let h = key.key_hash();
        self.sigs
            .iter()
            .any(|(n, kh, s)| *n == key.name && *kh == h && key.verify(self.text.as_bytes(), s))
    }

    /// The note as text: the signed text, a blank line, the signature lines.
    pub fn encode(&self) -> String {
        let mut out = format!("{}\n", self.text);
        for (name, kh, sig) in &self.sigs {
            let mut blob = kh.to_vec();
            blob.extend_from_slice(sig);
            out.push_str(&format!("{SIG_PREFIX}{name} {}\n", B64.encode(blob)));
        }
        out
    }

    /// The names of the keys that claim to have signed it.
    pub fn signer_names(&self) -> Vec<&str> {
        self.sigs.iter().map(|(n, _, _)| n.as_str()).collect()
    }
}

/// Parses a sequence of notes (as the checkpoint file holds them, blank lines between).
/// `Err(line)`: the first line (1-based) that does not fit the format.
pub fn parse_notes(data: &str) -> Result<Vec<Note>, usize> {
    let lines: Vec<&str> = data.split_inclusive('\n').collect();
    let mut notes = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i] == "\n" {
            i += 1;
            continue;
        }
        let start = i;
        let mut text = String::new();
        while i < lines.len() && lines[i] != "\n" {
            if !lines[i].ends_with('\n') || lines[i].starts_with(SIG_PREFIX) {
                return Err(i + 1);
            }
            text.push_str(lines[i]);
            i += 1;
        }
        if i >= lines.len() {
            return Err(start + 1);
        }
        i += 1; // the blank line
        let mut sigs = Vec::new();
        while i < lines.len() && lines[i].starts_with(SIG_PREFIX) {
            let l = lines[i].strip_suffix('\n').ok_or(i + 1)?;
            let l = &l[SIG_PREFIX.len()..];
            let (name, b) = l.split_once(' ').ok_or(i + 1)?;
            let blob = B64.decode(b).map_err(|_| i + 1)?;
            if name.is_empty() || blob.len() < 5 {
                return Err(i + 1);
            }
            let kh = [blob[0], blob[1], blob[2], blob[3]];
            sigs.push((name.to_string(), kh, blob[4..].to_vec()));
            i += 1;
        }
        if sigs.is_empty() {
            return Err(i.min(lines.len()) + 1);
        }
        notes.push(Note { text, sigs });
    }
    Ok(notes)
}

/// A checkpoint body: origin, tree size, root hash.
#[derive(Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct Checkpoint {
    /// The log's origin line.
    pub origin: String,
    /// Records committed to.
    pub size: u64,
    /// RFC 6962 root of the first `size` records.
    pub root: Hash,
}

impl Checkpoint {
    /// The note text.
    pub fn text(&self) -> String {
        format!(
            "{}\n{}\n{}\n",
            self.origin,
            self.size,
            B64.encode(self.root)
        )
    }

    /// Parses a note text (extension lines after the root are allowed and ignored).
    pub fn parse(text: &str) -> Option<Checkpoint> {
        let mut l = text.lines();
        let origin = l.next()?.to_string();
        let size_s = l.next()?;
        if size_s.is_empty() || !size_s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let size = size_s.parse().ok()?;
        let root: Hash = B64.decode(l.next()?).ok()?.try_into().ok()?;
        (!origin.is_empty()).then_some(Checkpoint { origin, size, root })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::rand::SystemRandom;

    fn signer(name: &str) -> Signer {
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).expect("keygen");
        Signer {
            name: name.into(),
            pair: Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("key"),
        }
    }

    #[test]
    fn sign_parse_verify_roundtrip() {
        let s = signer("gateway/abc/e0");
        let cp = Checkpoint {
            origin: "gateway/abc".into(),
            size: 42,
            root: [7; 32],
        };
        let note = s.sign(&cp.text());
        let both = format!("{note}\n{note}");
        let notes = parse_notes(&both).expect("parse");
        assert_eq!(notes.len(), 2);
        assert!(notes[0].signed_by(&s.verifier()));
        assert_eq!(Checkpoint::parse(&notes[0].text), Some(cp));
        assert!(!notes[0].signed_by(&signer("gateway/abc/e0").verifier()));
        let vk = VerifierKey::decode(&s.verifier().encode()).expect("vkey");
        assert_eq!(vk, s.verifier());
        // One changed byte of text or signature fails.
        let edited = note.replacen("42", "43", 1);
        assert!(!parse_notes(&edited).expect("parse")[0].signed_by(&vk));
    }

    #[test]
    fn rejects_malformed() {
        assert!(parse_notes("origin\n1\n").is_err());
        assert!(parse_notes("origin\n1\n\nno signature\n").is_err());
        assert!(parse_notes("origin\n1\n\n\u{2014} k !!!\n").is_err());
        assert!(VerifierKey::decode("a+00000000+AQ==").is_none());
        assert!(Checkpoint::parse("o\n-1\nAAAA\n").is_none());
        assert!(Checkpoint::parse("o\n1\nAAAA\n").is_none());
    }

    /// The C2SP signed-note specification's example key and note.
    #[test]
    fn spec_example_verifies() {
        let vk = VerifierKey::decode(
            "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        )
        .expect("vkey");
        let note = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n\n\u{2014} PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n";
        let notes = parse_notes(note).expect("parse");
        assert!(notes[0].signed_by(&vk));
    }
}
