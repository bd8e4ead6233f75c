//! RFC 6962 Merkle tree hashing over the log's lines, kept as a compact range (the roots of
//! the perfect subtrees that make up the first n leaves): appending costs O(1) amortised and
//! the root of the first n leaves is O(log n), with no tree stored.

use sha2::{Digest, Sha256};

/// A SHA-256 hash.
pub type Hash = [u8; 32];

/// `SHA-256(0x00 || line)`: the leaf hash of a record (its line without the newline). It is
/// also the `prev` that the next record holds, so each line is hashed once.
pub fn leaf_hash(line: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update([0u8]);
    h.update(line);
    h.finalize().into()
}

/// `SHA-256(0x01 || left || right)`.
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut h = Sha256::new();
    h.update([1u8]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// The root of the empty tree: `SHA-256("")`.
pub fn empty_root() -> Hash {
    Sha256::digest(b"").into()
}

/// The perfect subtrees covering leaves `0..size`, largest first (one per set bit of `size`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactRange {
    size: u64,
    /// Subtree roots, largest (leftmost) first.
    roots: Vec<Hash>,
}

impl CompactRange {
    /// The empty range.
    pub fn new() -> CompactRange {
        CompactRange::default()
    }

    /// Rebuilds a range from its parts; `None` if `roots` does not fit `size`.
    pub fn from_parts(size: u64, roots: Vec<Hash>) -> Option<CompactRange> {
        (roots.len() == size.count_ones() as usize).then_some(CompactRange { size, roots })
    }

    /// Leaves covered.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The subtree roots, largest first.
    pub fn roots(&self) -> &[Hash] {
        &self.roots
    }

    /// Appends a leaf hash.
    pub fn push(&mut self, leaf: Hash) {
        self.roots.push(leaf);
        // Merge equal-sized subtrees: as many as trailing one bits of the old size.
        let mut merges = self.size.trailing_ones();
        while merges > 0 {
            let right = self.roots.pop().unwrap_or_default();
            let left = self.roots.pop().unwrap_or_default();
            self.roots.push(node_hash(&left, &right));
            merges -= 1;
        }
        self.size += 1;
    }

    /// The tree head of the leaves covered (RFC 6962 `MTH`).
    pub fn root(&self) -> Hash {
        let mut it = self.roots.iter().rev();
        let Some(mut acc) = it.next().copied() else {
            return empty_root();
        };
        for left in it {
            acc = node_hash(left, &acc);
        }
        acc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6962's recursive definition, as the reference.
    fn mth(leaves: &[Hash]) -> Hash {
        match leaves.len() {
            0 => empty_root(),
            1 => leaves[0],
            n => {
                let k = 1usize << (usize::BITS - 1 - (n - 1).leading_zeros());
                node_hash(&mth(&leaves[..k]), &mth(&leaves[k..]))
            }
        }
    }

    #[test]
    fn compact_range_matches_the_rfc_definition() {
        let mut r = CompactRange::new();
        let mut leaves = Vec::new();
        assert_eq!(r.root(), mth(&leaves));
        for i in 0..200u32 {
            let l = leaf_hash(format!("record {i}").as_bytes());
            leaves.push(l);
            r.push(l);
            assert_eq!(r.size(), leaves.len() as u64);
            assert_eq!(r.root(), mth(&leaves), "size {}", leaves.len());
            let back = CompactRange::from_parts(r.size(), r.roots().to_vec());
            assert_eq!(back.as_ref(), Some(&r));
        }
        assert!(CompactRange::from_parts(3, vec![[0; 32]]).is_none());
    }

    #[test]
    fn known_vector() {
        // RFC 6962 test vector (certificate-transparency-go): the empty tree and one leaf of
        // the empty string.
        assert_eq!(
            crate::durable::hex(&empty_root()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            crate::durable::hex(&leaf_hash(b"")),
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
        );
    }
}
