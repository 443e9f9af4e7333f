//! Credentials and key derivation: the passphrase (Argon2id) or raw key that opens a
//! keyring entry, and how an entry's key-encryption key is obtained.

use super::cipher::{self, DATA_KEY_LEN};
use super::SealError;
use argon2::{Algorithm, Argon2, Params, Version};
use std::fmt;
use zeroize::Zeroizing;

/// Length of an Argon2id salt in a passphrase entry.
pub const SALT_LEN: usize = 16;

pub(super) const KIND_PASSPHRASE: u8 = 1;
pub(super) const KIND_RAW: u8 = 2;
/// Upper bound on the Argon2 memory cost (2 GiB, the largest of RFC 9106's
/// recommendations), checked on every entry created and every entry read, so a tampered
/// keyring cannot ask for an absurd allocation.
pub const MAX_KDF_M_COST_KIB: u32 = 2 * 1024 * 1024;
/// Upper bound on the Argon2 work, memory × passes (8 GiB·passes: 2 GiB × 4 passes, or the
/// default 19 MiB × 431 passes; several seconds of one core), so a tampered keyring cannot
/// make an unlock run for hours.
pub const MAX_KDF_WORK_KIB: u64 = 8 * 1024 * 1024;
/// Upper bound on the Argon2 passes.
pub const MAX_KDF_T_COST: u32 = 1024;
/// Upper bound on the Argon2 lanes.
pub const MAX_KDF_PARALLELISM: u32 = 64;

/// Argon2id parameters for deriving a key-encryption key from a passphrase. Stored in the
/// passphrase's wrapping entry, so unlocking always uses the parameters it was created
/// with.
///
/// The default is the OWASP recommendation for Argon2id (19 MiB of memory, 2 passes, 1
/// lane): about 20-50 ms per unlock on a current machine. Raise `m_cost_kib` for stronger
/// protection of weak passphrases; tests may use [`KdfParams::insecure_fast`].
///
/// Every entry created and every entry read is checked against [`MAX_KDF_M_COST_KIB`]
/// (2 GiB), [`MAX_KDF_WORK_KIB`] (memory × passes ≤ 8 GiB), [`MAX_KDF_T_COST`] and
/// [`MAX_KDF_PARALLELISM`] before Argon2 runs: larger parameters are refused when
/// creating an entry, and a stored entry asking for them is a corrupted keyring (a
/// tampered record cannot make an unlock allocate gigabytes or run for hours).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KdfParams {
    /// Memory cost in KiB (≥ 8 × `parallelism`).
    pub m_cost_kib: u32,
    /// Number of passes (≥ 1).
    pub t_cost: u32,
    /// Lanes (≥ 1).
    pub parallelism: u32,
}

impl Default for KdfParams {
    fn default() -> Self {
        KdfParams {
            m_cost_kib: 19 * 1024,
            t_cost: 2,
            parallelism: 1,
        }
    }
}

impl KdfParams {
    /// The cheapest parameters Argon2 accepts (8 KiB, 1 pass). For tests only: they
    /// offer no protection against guessing a passphrase.
    pub fn insecure_fast() -> Self {
        KdfParams {
            m_cost_kib: 8,
            t_cost: 1,
            parallelism: 1,
        }
    }

    /// Checks the parameters against this build's limits ([`MAX_KDF_M_COST_KIB`],
    /// [`MAX_KDF_WORK_KIB`], [`MAX_KDF_T_COST`], [`MAX_KDF_PARALLELISM`]) without running
    /// Argon2: `Err` says which limit is exceeded.
    pub(super) fn check(&self) -> Result<(), String> {
        let work = u64::from(self.m_cost_kib) * u64::from(self.t_cost);
        if self.m_cost_kib > MAX_KDF_M_COST_KIB
            || work > MAX_KDF_WORK_KIB
            || self.t_cost > MAX_KDF_T_COST
            || self.parallelism > MAX_KDF_PARALLELISM
        {
            return Err(format!(
                "Argon2id parameters {} KiB × {} passes × {} lanes exceed this build's limits (memory ≤ {MAX_KDF_M_COST_KIB} KiB, memory × passes ≤ {MAX_KDF_WORK_KIB} KiB, passes ≤ {MAX_KDF_T_COST}, lanes ≤ {MAX_KDF_PARALLELISM})",
                self.m_cost_kib, self.t_cost, self.parallelism
            ));
        }
        Params::new(
            self.m_cost_kib,
            self.t_cost,
            self.parallelism,
            Some(DATA_KEY_LEN),
        )
        .map(|_| ())
        .map_err(|e| {
            format!(
                "Argon2id parameters {} KiB × {} passes × {} lanes are invalid ({e})",
                self.m_cost_kib, self.t_cost, self.parallelism
            )
        })
    }

    pub(super) fn argon2(&self) -> Result<Argon2<'static>, SealError> {
        self.check()
            .map_err(|reason| SealError::InvalidParameters {
                reason: format!("{reason}; choose smaller `KdfParams`"),
            })?;
        let params = Params::new(
            self.m_cost_kib,
            self.t_cost,
            self.parallelism,
            Some(DATA_KEY_LEN),
        )
        .map_err(|e| SealError::InvalidParameters {
            reason: format!(
                "Argon2id parameters {}/{}/{}: {e}",
                self.m_cost_kib, self.t_cost, self.parallelism
            ),
        })?;
        Ok(Argon2::new(Algorithm::Argon2id, Version::V0x13, params))
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum CredentialKind {
    Passphrase,
    Raw,
}

/// A secret that opens a keyring: a passphrase, or raw 256-bit key bytes supplied by the
/// application. Zeroized on drop; `Debug` shows only its kind.
pub struct Credential {
    kind: CredentialKind,
    secret: Zeroizing<Vec<u8>>,
    kdf: KdfParams,
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            CredentialKind::Passphrase => "passphrase",
            CredentialKind::Raw => "raw key",
        };
        f.debug_struct("Credential")
            .field("kind", &kind)
            .finish_non_exhaustive()
    }
}

impl Credential {
    /// A passphrase. When it creates an entry, the KEK is derived with the default
    /// [`KdfParams`] unless [`Credential::with_kdf`] says otherwise.
    pub fn passphrase(passphrase: impl Into<String>) -> Self {
        Credential {
            kind: CredentialKind::Passphrase,
            secret: Zeroizing::new(passphrase.into().into_bytes()),
            kdf: KdfParams::default(),
        }
    }

    /// Raw key bytes from the application (exactly 32 bytes, used directly as the KEK).
    pub fn raw_key(key: &[u8]) -> Result<Self, SealError> {
        if key.len() != DATA_KEY_LEN {
            return Err(SealError::InvalidParameters {
                reason: format!(
                    "a raw key is {DATA_KEY_LEN} bytes, got {}; pass 256 bits of key material",
                    key.len()
                ),
            });
        }
        Ok(Credential {
            kind: CredentialKind::Raw,
            secret: Zeroizing::new(key.to_vec()),
            kdf: KdfParams::default(),
        })
    }

    /// The Argon2id parameters used when this passphrase creates a new entry (ignored
    /// for raw keys and when unlocking: entries keep their own).
    pub fn with_kdf(mut self, kdf: KdfParams) -> Self {
        self.kdf = kdf;
        self
    }

    /// An empty passphrase protects nothing (an unset variable read with
    /// `unwrap_or_default()` gives one): refused.
    fn check_not_empty(&self) -> Result<(), SealError> {
        if self.secret.is_empty() {
            return Err(SealError::InvalidParameters {
                reason: "the passphrase is empty, which protects nothing; pass a non-empty passphrase (check that the variable or file it comes from is set)".into(),
            });
        }
        Ok(())
    }

    /// A fresh KEK specification for a new entry wrapped by this credential.
    pub(super) fn new_spec(&self) -> Result<KekSpec, SealError> {
        Ok(match self.kind {
            CredentialKind::Passphrase => {
                self.check_not_empty()?;
                self.kdf.argon2()?;
                KekSpec::Passphrase {
                    salt: cipher::random::<SALT_LEN>()?,
                    params: self.kdf,
                }
            }
            CredentialKind::Raw => KekSpec::Raw,
        })
    }

    /// The KEK this credential gives for `spec`, or `None` when the kinds differ.
    pub(super) fn kek(
        &self,
        spec: &KekSpec,
    ) -> Result<Option<Zeroizing<[u8; DATA_KEY_LEN]>>, SealError> {
        let mut kek = Zeroizing::new([0u8; DATA_KEY_LEN]);
        match (spec, self.kind) {
            (KekSpec::Passphrase { salt, params }, CredentialKind::Passphrase) => {
                self.check_not_empty()?;
                params
                    .argon2()?
                    .hash_password_into(&self.secret, salt, kek.as_mut_slice())
                    .map_err(|e| SealError::InvalidParameters {
                        reason: format!("Argon2id failed: {e}"),
                    })?;
            }
            (KekSpec::Raw, CredentialKind::Raw) => kek.copy_from_slice(&self.secret),
            _ => return Ok(None),
        }
        Ok(Some(kek))
    }
}

/// How a wrapping entry's key-encryption key is obtained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum KekSpec {
    Passphrase {
        salt: [u8; SALT_LEN],
        params: KdfParams,
    },
    Raw,
}

impl KekSpec {
    pub(super) fn kind(&self) -> u8 {
        match self {
            KekSpec::Passphrase { .. } => KIND_PASSPHRASE,
            KekSpec::Raw => KIND_RAW,
        }
    }

    pub(super) fn encode_params(&self, out: &mut Vec<u8>) {
        if let KekSpec::Passphrase { salt, params } = self {
            out.extend_from_slice(salt);
            out.extend_from_slice(&params.m_cost_kib.to_be_bytes());
            out.extend_from_slice(&params.t_cost.to_be_bytes());
            out.extend_from_slice(&params.parallelism.to_be_bytes());
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn default_kdf_parameters_are_the_owasp_ones() {
        assert_eq!(
            KdfParams::default(),
            KdfParams {
                m_cost_kib: 19456,
                t_cost: 2,
                parallelism: 1
            }
        );
        assert!(KdfParams::default().argon2().is_ok());
        let absurd = KdfParams {
            m_cost_kib: u32::MAX,
            t_cost: 1,
            parallelism: 1,
        };
        assert!(matches!(
            absurd.argon2(),
            Err(SealError::InvalidParameters { .. })
        ));
    }
}
