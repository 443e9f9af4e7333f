//! The per-collection cutover checkpoint (see the [parent module](super) for its bytes).

use crate::pass::{CheckpointCodec, RecordError};

/// Prefix of cutover checkpoints.
pub const CUTOVER_PREFIX: &[u8] = crate::keys::CUTOVER_PREFIX;
/// Magic of a cutover checkpoint.
pub const CUTOVER_MAGIC: [u8; 4] = *b"NXCU";

/// The key of `collection`'s cutover checkpoint.
pub fn cutover_key(collection: &str) -> Vec<u8> {
    [CUTOVER_PREFIX, collection.as_bytes()].concat()
}

/// The cutover checkpoint codec (see the module docs for the bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutoverCheckpoint {
    key: Vec<u8>,
    target_hash: String,
}

impl CutoverCheckpoint {
    /// The checkpoint of `collection`'s cutover toward `target_hash`.
    pub fn new(collection: &str, target_hash: &str) -> Self {
        CutoverCheckpoint {
            key: cutover_key(collection),
            target_hash: target_hash.to_string(),
        }
    }

    fn bytes(&self, done: bool, cursor: &[u8]) -> Vec<u8> {
        let hash = self.target_hash.as_bytes();
        let mut out = Vec::with_capacity(7 + hash.len() + cursor.len());
        out.extend_from_slice(&CUTOVER_MAGIC);
        out.push(1);
        out.push(u8::from(done));
        out.push(u8::try_from(hash.len()).unwrap_or(u8::MAX));
        out.extend_from_slice(&hash[..hash.len().min(255)]);
        out.extend_from_slice(cursor);
        out
    }

    /// Decodes a stored value: `(done, cursor)`.
    pub fn parse(&self, value: &[u8]) -> Result<(bool, Vec<u8>), String> {
        if value.len() < 7 || value[..4] != CUTOVER_MAGIC {
            return Err("not a cutover checkpoint (missing `NXCU` magic)".into());
        }
        if value[4] != 1 {
            return Err(format!(
                "unsupported cutover checkpoint format {}",
                value[4]
            ));
        }
        let done = match value[5] {
            0 => false,
            1 => true,
            s => return Err(format!("invalid cutover checkpoint state {s}")),
        };
        let n = usize::from(value[6]);
        let Some(hash) = value.get(7..7 + n) else {
            return Err("truncated cutover checkpoint".into());
        };
        if hash != self.target_hash.as_bytes() {
            return Err(format!(
                "the checkpoint belongs to a cutover toward schema {}, not {}; finish or revert that cutover first",
                String::from_utf8_lossy(hash),
                self.target_hash
            ));
        }
        Ok((done, value[7 + n..].to_vec()))
    }
}

/// The schema hash the cutover checkpoint `value` moves its collection toward (`None`
/// when it is not a readable cutover checkpoint): what a repaired fence needs to keep that
/// cutover pending and resumable.
pub fn checkpoint_target(value: &[u8]) -> Option<String> {
    if value.len() < 7 || value[..4] != CUTOVER_MAGIC || value[4] != 1 || value[5] > 1 {
        return None;
    }
    let n = usize::from(value[6]);
    let hash = value.get(7..7 + n)?;
    String::from_utf8(hash.to_vec()).ok()
}

impl CheckpointCodec for CutoverCheckpoint {
    fn key(&self) -> &[u8] {
        &self.key
    }
    fn encode(&self, cursor: &[u8]) -> Vec<u8> {
        self.bytes(false, cursor)
    }
    fn decode(&self, value: &[u8]) -> Result<Vec<u8>, RecordError> {
        match self.parse(value)? {
            (false, cursor) => Ok(cursor),
            (true, _) => Err(RecordError::new(
                "the cutover of this collection is already done",
            )),
        }
    }
    fn finished(&self) -> Option<Vec<u8>> {
        Some(self.bytes(true, b""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_bytes_roundtrip() {
        let c = CutoverCheckpoint::new("inv", "ab12");
        let v = c.encode(b"__nx/doc/inv/k");
        assert_eq!(v, b"NXCU\x01\x00\x04ab12__nx/doc/inv/k".to_vec());
        assert_eq!(c.decode(&v).unwrap(), b"__nx/doc/inv/k".to_vec());
        assert_eq!(c.finished().unwrap(), b"NXCU\x01\x01\x04ab12".to_vec());
        assert!(c.decode(&c.finished().unwrap()).is_err());
        let other = CutoverCheckpoint::new("inv", "ffff");
        assert!(other
            .decode(&v)
            .unwrap_err()
            .reason()
            .contains("toward schema ab12"));
        assert!(c.decode(b"NXMG\x01").is_err());
        assert_eq!(checkpoint_target(&v).as_deref(), Some("ab12"));
        assert_eq!(
            checkpoint_target(&c.finished().unwrap()).as_deref(),
            Some("ab12")
        );
        assert_eq!(checkpoint_target(b"NXCU\x01\x00\x09ab"), None);
        assert_eq!(checkpoint_target(b"NXMG\x01\x00\x00"), None);
    }
}
