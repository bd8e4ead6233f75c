//! Paths as bytes in what the broker stores as JSON (the journal, snapshot indexes, the trash
//! info it reports) and sends its worker: a Unix name is any byte string but `/` and NUL, and
//! JSON strings are Unicode, so `serde_json` refuses a `PathBuf` that is not UTF-8 — which made
//! a whole group's journal append fail (issue 37).
//!
//! A path that is UTF-8 is a plain string, as before (existing journals and indexes read as
//! they are); any other is `{"bytes_b64": "<standard base64 of its bytes>"}`. Reading accepts
//! both, and JSON byte arrays too. Use with `#[serde(with = "pathbytes")]` on a `PathBuf`,
//! `#[serde(with = "pathbytes::option")]` on an `Option<PathBuf>`, or the [`BytesPath`]
//! newtype inside other types; `#[schemars(with = "PathBytes")]` documents the schema.

use base64::Engine;
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

const KEY: &str = "bytes_b64";

/// A path as JSON: its text when it is UTF-8, else its bytes in standard base64.
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
#[allow(
    dead_code,
    reason = "only its schema is used: the serde code is by hand"
)]
pub enum PathBytes {
    /// A path that is UTF-8.
    Text(String),
    /// A path that is not: its bytes.
    Bytes {
        /// The path's bytes, standard base64.
        bytes_b64: String,
    },
}

/// Writes `p` as a string when it is UTF-8, else as `{"bytes_b64": ...}`.
pub fn serialize<S: Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
    match p.to_str() {
        Some(t) => s.serialize_str(t),
        None => {
            use serde::ser::SerializeMap;
            let mut m = s.serialize_map(Some(1))?;
            let b = base64::engine::general_purpose::STANDARD.encode(p.as_os_str().as_bytes());
            m.serialize_entry(KEY, &b)?;
            m.end()
        }
    }
}

/// Reads a path written by [`serialize`] (or by serde's own `PathBuf`).
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
    d.deserialize_any(PathVisitor)
}

struct PathVisitor;

impl<'de> Visitor<'de> for PathVisitor {
    type Value = PathBuf;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a path: a string, or {\"bytes_b64\": ...}")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<PathBuf, E> {
        Ok(PathBuf::from(v))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<PathBuf, E> {
        Ok(PathBuf::from(v))
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<PathBuf, E> {
        Ok(PathBuf::from(OsString::from_vec(v.to_vec())))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<PathBuf, A::Error> {
        let mut out = Vec::new();
        while let Some(b) = seq.next_element::<u8>()? {
            out.push(b);
        }
        Ok(PathBuf::from(OsString::from_vec(out)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<PathBuf, A::Error> {
        let mut out = None;
        while let Some(k) = m.next_key::<String>()? {
            if k == KEY {
                let v: String = m.next_value()?;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(v.as_bytes())
                    .map_err(|e| de::Error::custom(format!("{KEY}: {e}")))?;
                out = Some(PathBuf::from(OsString::from_vec(bytes)));
            } else {
                m.next_value::<de::IgnoredAny>()?;
            }
        }
        out.ok_or_else(|| de::Error::missing_field(KEY))
    }
}

/// A `PathBuf` that serializes as [`serialize`] does: for paths inside other types (tuples,
/// lists).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BytesPath(pub PathBuf);

impl Serialize for BytesPath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize(&self.0, s)
    }
}

impl<'de> Deserialize<'de> for BytesPath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<BytesPath, D::Error> {
        deserialize(d).map(BytesPath)
    }
}

impl schemars::JsonSchema for BytesPath {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        PathBytes::schema_name()
    }

    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        PathBytes::json_schema(g)
    }
}

/// For `Option<PathBuf>` fields.
pub mod option {
    use super::BytesPath;
    use serde::{Deserialize, Deserializer, Serializer};
    use std::path::PathBuf;

    /// `None` as null, a path as [`super::serialize`] writes it.
    pub fn serialize<S: Serializer>(p: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
        match p {
            Some(p) => s.serialize_some(&super::Ref(p)),
            None => s.serialize_none(),
        }
    }

    /// Null or a path.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
        Ok(Option::<BytesPath>::deserialize(d)?.map(|b| b.0))
    }
}

/// For a list of (path, value) pairs (snapshot reports).
pub mod pairs {
    use serde::Serializer;
    use serde::ser::SerializeSeq;
    use std::path::PathBuf;

    /// Each pair as a two-element array, the path as [`super::serialize`] writes it.
    pub fn serialize<S: Serializer, T: serde::Serialize>(
        v: &[(PathBuf, T)],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(v.len()))?;
        for (p, t) in v {
            seq.serialize_element(&(super::Ref(p), t))?;
        }
        seq.end()
    }
}

/// For a list of paths.
pub mod list {
    use serde::Serializer;
    use serde::ser::SerializeSeq;
    use std::path::PathBuf;

    /// Each path as [`super::serialize`] writes it.
    pub fn serialize<S: Serializer>(v: &[PathBuf], s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(v.len()))?;
        for p in v {
            seq.serialize_element(&super::Ref(p))?;
        }
        seq.end()
    }
}

/// A borrowed path that serializes as [`serialize`] does.
struct Ref<'a>(&'a Path);

impl Serialize for Ref<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize(self.0, s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct T {
        #[serde(with = "super")]
        p: PathBuf,
        #[serde(default, with = "option")]
        o: Option<PathBuf>,
    }

    #[test]
    fn any_byte_string_round_trips_and_utf8_stays_a_string() {
        let bad = PathBuf::from(OsString::from_vec(b"/w/a\xff\xfe b".to_vec()));
        let t = T {
            p: bad.clone(),
            o: Some(PathBuf::from("/w/ok")),
        };
        let j = serde_json::to_string(&t).expect("encode");
        assert_eq!(j, r#"{"p":{"bytes_b64":"L3cvYf/+IGI="},"o":"/w/ok"}"#);
        assert_eq!(serde_json::from_str::<T>(&j).expect("decode"), t);
        // What serde's PathBuf wrote reads as before; a missing option is None.
        let old: T = serde_json::from_str(r#"{"p":"/w/é"}"#).expect("old");
        assert_eq!(old.p, PathBuf::from("/w/é"));
        assert_eq!(old.o, None);
        let o = T { p: bad, o: None };
        let j = serde_json::to_string(&o).expect("encode");
        assert_eq!(serde_json::from_str::<T>(&j).expect("decode"), o);
        assert!(serde_json::from_str::<T>(r#"{"p":{"bytes_b64":"%%"}}"#).is_err());
        assert!(serde_json::from_str::<T>(r#"{"p":{}}"#).is_err());
    }
}
