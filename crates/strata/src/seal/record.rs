//! The keyring record: wrapping entries, each data key sealed under an entry's KEK, and
//! the record's byte encoding (`docs/format.md`, "Sealed documents").

use super::cipher::{self, DATA_KEY_LEN, NONCE_LEN, TAG_LEN};
use super::credential::{KdfParams, KekSpec, KIND_PASSPHRASE, KIND_RAW, SALT_LEN};
use super::SealError;
use zeroize::Zeroizing;

/// Magic bytes at the start of a keyring record.
pub const KEYRING_MAGIC: [u8; 4] = *b"NXKR";
/// The keyring format this build writes and reads.
pub const KEYRING_FORMAT: u8 = 1;
/// Length of a wrapped data key: 32 ciphertext bytes + 16 tag bytes.
pub const WRAPPED_KEY_LEN: usize = DATA_KEY_LEN + TAG_LEN;
/// Longest wrapping-entry label.
pub const MAX_LABEL_LEN: usize = 64;

const WRAP_AAD_MAGIC: &[u8; 4] = b"NXKW";

/// One data key sealed under an entry's KEK.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct Wrap {
    pub(super) key_id: u32,
    /// `nonce | ciphertext | tag` (24 + 32 + 16 bytes).
    pub(super) sealed: Vec<u8>,
}

/// Wrapped key bytes are never printed, not even by `{:?}`: only their length.
impl std::fmt::Debug for Wrap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wrap")
            .field("key_id", &self.key_id)
            .field(
                "sealed",
                &format_args!("<{} bytes, redacted>", self.sealed.len()),
            )
            .finish()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) label: String,
    pub(super) spec: KekSpec,
    pub(super) wraps: Vec<Wrap>,
}

impl Entry {
    fn wrap_aad(&self, keyring: &[u8], key_id: u32) -> Vec<u8> {
        let mut aad = Vec::with_capacity(48 + keyring.len() + self.label.len());
        aad.extend_from_slice(WRAP_AAD_MAGIC);
        aad.push(KEYRING_FORMAT);
        // Keyring keys are short: the store key of a scope (bounded by collection names).
        aad.extend_from_slice(&(keyring.len() as u64).to_be_bytes());
        aad.extend_from_slice(keyring);
        aad.extend_from_slice(&(self.label.len() as u64).to_be_bytes());
        aad.extend_from_slice(self.label.as_bytes());
        aad.push(self.spec.kind());
        self.spec.encode_params(&mut aad);
        aad.extend_from_slice(&key_id.to_be_bytes());
        aad
    }

    /// A new entry wrapping every key of `keys` under `kek`.
    pub(super) fn wrap_all(
        keyring: &[u8],
        label: &str,
        spec: KekSpec,
        kek: &[u8; DATA_KEY_LEN],
        keys: &[(u32, Zeroizing<[u8; DATA_KEY_LEN]>)],
    ) -> Result<Entry, SealError> {
        let mut entry = Entry {
            label: label.to_owned(),
            spec,
            wraps: Vec::with_capacity(keys.len()),
        };
        let c = cipher::cipher(kek);
        for (id, key) in keys {
            let mut sealed = Vec::with_capacity(NONCE_LEN + WRAPPED_KEY_LEN);
            cipher::seal_raw(
                &c,
                &entry.wrap_aad(keyring, *id),
                key.as_slice(),
                &mut sealed,
            )?;
            entry.wraps.push(Wrap {
                key_id: *id,
                sealed,
            });
        }
        Ok(entry)
    }

    /// Opens every wrap with `kek`: `Ok(None)` when the KEK is not this entry's (its
    /// first wrap does not open), an error when only some wraps open (tampered).
    #[allow(clippy::type_complexity)]
    pub(super) fn unwrap_all(
        &self,
        keyring: &[u8],
        kek: &[u8; DATA_KEY_LEN],
    ) -> Result<Option<Vec<(u32, Zeroizing<[u8; DATA_KEY_LEN]>)>>, SealError> {
        let c = cipher::cipher(kek);
        let mut keys = Vec::with_capacity(self.wraps.len());
        for (i, w) in self.wraps.iter().enumerate() {
            let Some(plain) = cipher::open_raw(&c, &self.wrap_aad(keyring, w.key_id), &w.sealed)
            else {
                if i == 0 {
                    return Ok(None);
                }
                return Err(SealError::CorruptedKeyring {
                    keyring: keyring.to_vec(),
                    reason: format!(
                        "entry `{}` opens data key {} but not data key {}",
                        self.label, self.wraps[0].key_id, w.key_id
                    ),
                });
            };
            let plain = Zeroizing::new(plain);
            let mut key = Zeroizing::new([0u8; DATA_KEY_LEN]);
            if plain.len() != DATA_KEY_LEN {
                return Err(SealError::CorruptedKeyring {
                    keyring: keyring.to_vec(),
                    reason: format!("entry `{}` wraps a key of the wrong length", self.label),
                });
            }
            key.copy_from_slice(&plain);
            keys.push((w.key_id, key));
        }
        Ok(Some(keys))
    }
}

/// What [`KeyringRecord::entries`] tells about one wrapping entry (no secrets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryInfo {
    /// The entry's label.
    pub label: String,
    /// `passphrase` (Argon2id) or `raw key`.
    pub kind: &'static str,
    /// The Argon2id parameters of a passphrase entry.
    pub kdf: Option<KdfParams>,
    /// Ids of the data keys it wraps.
    pub key_ids: Vec<u32>,
}

/// A decoded keyring record. Holds only wrapped keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyringRecord {
    pub(super) active: u32,
    pub(super) retiring: Option<u32>,
    pub(super) entries: Vec<Entry>,
}

fn corrupted(keyring: &[u8], reason: impl Into<String>) -> SealError {
    SealError::CorruptedKeyring {
        keyring: keyring.to_vec(),
        reason: reason.into(),
    }
}

/// Checks a wrapping-entry label: 1-[`MAX_LABEL_LEN`] characters of
/// `A-Z a-z 0-9 _ - .` ([`SealError::InvalidLabel`] otherwise).
pub fn validate_label(label: &str) -> Result<(), SealError> {
    let ok = !label.is_empty()
        && label.len() <= MAX_LABEL_LEN
        && label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(SealError::InvalidLabel {
            label: label.to_owned(),
        })
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    keyring: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], SealError> {
        if self.bytes.len() < n {
            return Err(corrupted(self.keyring, format!("truncated in {what}")));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }
    fn u8(&mut self, what: &str) -> Result<u8, SealError> {
        Ok(self.take(1, what)?[0])
    }
    fn u32(&mut self, what: &str) -> Result<u32, SealError> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

impl KeyringRecord {
    /// The id of the data key new seals use.
    pub fn active_key_id(&self) -> u32 {
        self.active
    }

    /// The id of the data key a rotation in progress is retiring (`None`: no rotation).
    pub fn retiring_key_id(&self) -> Option<u32> {
        self.retiring
    }

    /// The wrapping entries (labels, kinds, parameters; never key material).
    pub fn entries(&self) -> Vec<EntryInfo> {
        self.entries
            .iter()
            .map(|e| EntryInfo {
                label: e.label.clone(),
                kind: match e.spec {
                    KekSpec::Passphrase { .. } => "passphrase",
                    KekSpec::Raw => "raw key",
                },
                kdf: match &e.spec {
                    KekSpec::Passphrase { params, .. } => Some(*params),
                    KekSpec::Raw => None,
                },
                key_ids: e.wraps.iter().map(|w| w.key_id).collect(),
            })
            .collect()
    }

    fn key_ids(&self) -> Vec<u32> {
        let mut ids = vec![self.active];
        ids.extend(self.retiring);
        ids
    }

    /// The record's bytes (layout in `docs/format.md`, "Sealed documents").
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(14 + self.entries.len() * 120);
        out.extend_from_slice(&KEYRING_MAGIC);
        out.push(KEYRING_FORMAT);
        out.extend_from_slice(&self.active.to_be_bytes());
        out.extend_from_slice(&self.retiring.unwrap_or(0).to_be_bytes());
        // Entry and wrap counts and label lengths are bounded on every constructing path
        // (≤ 255 entries, ≤ 2 wraps, labels ≤ 64 bytes).
        out.push(u8::try_from(self.entries.len()).unwrap_or(u8::MAX));
        for e in &self.entries {
            out.push(u8::try_from(e.label.len()).unwrap_or(u8::MAX));
            out.extend_from_slice(e.label.as_bytes());
            out.push(e.spec.kind());
            e.spec.encode_params(&mut out);
            out.push(u8::try_from(e.wraps.len()).unwrap_or(u8::MAX));
            for w in &e.wraps {
                out.extend_from_slice(&w.key_id.to_be_bytes());
                out.extend_from_slice(&w.sealed);
            }
        }
        out
    }

    /// Decodes and checks a keyring record read at `keyring` (the store key, for errors).
    pub fn decode(keyring: &[u8], bytes: &[u8]) -> Result<KeyringRecord, SealError> {
        let mut r = Reader { bytes, keyring };
        if r.take(4, "magic")? != KEYRING_MAGIC {
            return Err(corrupted(keyring, "it does not start with `NXKR`"));
        }
        let format = r.u8("format")?;
        if format != KEYRING_FORMAT {
            return Err(corrupted(
                keyring,
                format!("format {format} is not supported (this build reads format 1)"),
            ));
        }
        let active = r.u32("active key id")?;
        let retiring = match r.u32("retiring key id")? {
            0 => None,
            id => Some(id),
        };
        if active == 0 || retiring == Some(active) {
            return Err(corrupted(keyring, "invalid data key ids"));
        }
        let count = r.u8("entry count")?;
        if count == 0 {
            return Err(corrupted(keyring, "it has no wrapping entry"));
        }
        let mut rec = KeyringRecord {
            active,
            retiring,
            entries: Vec::with_capacity(usize::from(count)),
        };
        let expected = rec.key_ids();
        for _ in 0..count {
            let len = r.u8("label length")?;
            let label = std::str::from_utf8(r.take(usize::from(len), "label")?)
                .map_err(|_| corrupted(keyring, "an entry label is not UTF-8"))?
                .to_owned();
            validate_label(&label)
                .map_err(|_| corrupted(keyring, format!("invalid entry label `{label}`")))?;
            if rec.entries.iter().any(|e| e.label == label) {
                return Err(corrupted(keyring, format!("entry `{label}` appears twice")));
            }
            let spec = match r.u8("entry kind")? {
                KIND_PASSPHRASE => {
                    let mut salt = [0u8; SALT_LEN];
                    salt.copy_from_slice(r.take(SALT_LEN, "salt")?);
                    let params = KdfParams {
                        m_cost_kib: r.u32("memory cost")?,
                        t_cost: r.u32("time cost")?,
                        parallelism: r.u32("parallelism")?,
                    };
                    // Checked before Argon2 ever runs: a tampered record must not make an
                    // unlock allocate gigabytes or run for hours.
                    if let Err(reason) = params.check() {
                        return Err(corrupted(keyring, format!("entry `{label}`: {reason}")));
                    }
                    KekSpec::Passphrase { salt, params }
                }
                KIND_RAW => KekSpec::Raw,
                other => {
                    return Err(corrupted(
                        keyring,
                        format!("entry `{label}` has unknown kind {other}"),
                    ))
                }
            };
            let wraps = r.u8("wrap count")?;
            let mut entry = Entry {
                label,
                spec,
                wraps: Vec::with_capacity(usize::from(wraps)),
            };
            for _ in 0..wraps {
                let key_id = r.u32("wrapped key id")?;
                let sealed = r.take(NONCE_LEN + WRAPPED_KEY_LEN, "wrapped key")?.to_vec();
                entry.wraps.push(Wrap { key_id, sealed });
            }
            let ids: Vec<u32> = entry.wraps.iter().map(|w| w.key_id).collect();
            if ids != expected {
                return Err(corrupted(
                    keyring,
                    format!(
                        "entry `{}` wraps data keys {ids:?}, expected {expected:?}",
                        entry.label
                    ),
                ));
            }
            rec.entries.push(entry);
        }
        if !r.bytes.is_empty() {
            return Err(corrupted(
                keyring,
                format!("{} trailing bytes", r.bytes.len()),
            ));
        }
        Ok(rec)
    }

    /// The record with the retiring key removed (the end of a rotation).
    pub fn finish_rotation(&self, keyring: &[u8]) -> Result<KeyringRecord, SealError> {
        let Some(retiring) = self.retiring else {
            return Err(SealError::RotationState {
                keyring: keyring.to_vec(),
                state: "has no data-key rotation in progress",
                remedy: "there is nothing to finish",
            });
        };
        let mut next = self.clone();
        next.retiring = None;
        for e in &mut next.entries {
            e.wraps.retain(|w| w.key_id != retiring);
        }
        Ok(next)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn sample() -> KeyringRecord {
        KeyringRecord {
            active: 2,
            retiring: Some(1),
            entries: vec![
                Entry {
                    label: "alice".into(),
                    spec: KekSpec::Passphrase {
                        salt: [0x11; SALT_LEN],
                        params: KdfParams {
                            m_cost_kib: 19456,
                            t_cost: 2,
                            parallelism: 1,
                        },
                    },
                    wraps: vec![
                        Wrap {
                            key_id: 2,
                            sealed: vec![0xA2; 72],
                        },
                        Wrap {
                            key_id: 1,
                            sealed: vec![0xA1; 72],
                        },
                    ],
                },
                Entry {
                    label: "kms".into(),
                    spec: KekSpec::Raw,
                    wraps: vec![
                        Wrap {
                            key_id: 2,
                            sealed: vec![0xB2; 72],
                        },
                        Wrap {
                            key_id: 1,
                            sealed: vec![0xB1; 72],
                        },
                    ],
                },
            ],
        }
    }

    /// The byte layout documented in docs/format.md ("Sealed documents" → keyring).

    #[test]
    fn keyring_exact_bytes() {
        let mut want = Vec::new();
        want.extend_from_slice(b"NXKR"); // magic
        want.push(1); // format
        want.extend_from_slice(&[0, 0, 0, 2]); // active key id
        want.extend_from_slice(&[0, 0, 0, 1]); // retiring key id
        want.push(2); // entry count
        want.push(5); // label length
        want.extend_from_slice(b"alice");
        want.push(1); // kind: passphrase
        want.extend_from_slice(&[0x11; 16]); // salt
        want.extend_from_slice(&[0x00, 0x00, 0x4c, 0x00]); // m_cost 19456 KiB
        want.extend_from_slice(&[0, 0, 0, 2]); // t_cost
        want.extend_from_slice(&[0, 0, 0, 1]); // parallelism
        want.push(2); // wrap count
        want.extend_from_slice(&[0, 0, 0, 2]);
        want.extend_from_slice(&[0xA2; 72]);
        want.extend_from_slice(&[0, 0, 0, 1]);
        want.extend_from_slice(&[0xA1; 72]);
        want.push(3);
        want.extend_from_slice(b"kms");
        want.push(2); // kind: raw key, no parameters
        want.push(2);
        want.extend_from_slice(&[0, 0, 0, 2]);
        want.extend_from_slice(&[0xB2; 72]);
        want.extend_from_slice(&[0, 0, 0, 1]);
        want.extend_from_slice(&[0xB1; 72]);
        let rec = sample();
        assert_eq!(rec.encode(), want);
        assert_eq!(
            want.len(),
            14 + (1 + 5 + 1 + 28 + 1 + 152) + (1 + 3 + 1 + 1 + 152)
        );
        assert_eq!(KeyringRecord::decode(b"k", &want).unwrap(), rec);
    }

    #[test]
    fn decode_refuses_malformed_records() {
        let good = sample().encode();
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("magic", [b"NXKX".as_slice(), &good[4..]].concat()),
            ("format", [&good[..4], &[2u8][..], &good[5..]].concat()),
            ("trailing", [good.as_slice(), &[0u8][..]].concat()),
            ("truncated", good[..good.len() - 1].to_vec()),
            (
                "zero active",
                [&good[..5], &[0u8, 0, 0, 0][..], &good[9..]].concat(),
            ),
            ("no entries", [&good[..13], &[0u8][..]].concat()),
            ("unknown kind", {
                let mut b = good.clone();
                b[20] = 9;
                b
            }),
            ("missing retiring wrap", {
                let mut r = sample();
                r.entries[1].wraps.pop();
                r.encode()
            }),
            ("duplicate label", {
                let mut r = sample();
                r.entries[1].label = "alice".into();
                r.encode()
            }),
            ("bad label", {
                let mut r = sample();
                r.entries[1].label = "k/s".into();
                r.encode()
            }),
        ];
        for (what, bytes) in cases {
            let err = KeyringRecord::decode(b"__nx/keys/database", &bytes).unwrap_err();
            assert!(
                matches!(err, SealError::CorruptedKeyring { .. }),
                "{what}: {err}"
            );
            assert!(err.to_string().contains("`__nx/keys/database`"), "{what}");
        }
    }

    #[test]
    fn finish_rotation_drops_the_retiring_wraps() {
        let next = sample().finish_rotation(b"k").unwrap();
        assert_eq!(next.retiring_key_id(), None);
        assert_eq!(next.active_key_id(), 2);
        for e in next.entries() {
            assert_eq!(e.key_ids, vec![2]);
        }
        assert!(matches!(
            next.finish_rotation(b"k"),
            Err(SealError::RotationState { .. })
        ));
        assert_eq!(KeyringRecord::decode(b"k", &next.encode()).unwrap(), next);
    }
}
