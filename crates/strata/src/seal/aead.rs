//! XChaCha20-Poly1305 as ring's assembly ChaCha20-Poly1305 under an HChaCha20 subkey, and
//! the per-thread nonce generator.
//!
//! XChaCha20-Poly1305 (draft-irtf-cfrg-xchacha-03, §2.3) is exactly
//!
//! ```text
//! subkey = HChaCha20(key, nonce[0..16])
//! XChaCha20-Poly1305(key, nonce, aad, m) = ChaCha20-Poly1305(subkey, 0^4 ‖ nonce[16..24], aad, m)
//! ```
//!
//! (RFC 8439's AEAD with a 96-bit nonce). The subkey comes from the `chacha20` crate
//! (`chacha20::hchacha`), the bulk encryption and the Poly1305 tag from `ring`'s
//! `CHACHA20_POLY1305` (BoringSSL's hand-optimized assembly, AVX2 selected at run time), so
//! the bytes are those of the `chacha20poly1305` crate's `XChaCha20Poly1305` — proved by
//! the property test in this module's `tests` (against that crate) and the sealed fixtures of
//! `tests/it/seal_fixture.rs`. No cipher code of ours beyond that composition.
//!
//! Nonces: 24 bytes from a per-thread ChaCha20 generator (`chacha20::ChaCha20Rng`) seeded
//! from the operating system (`getrandom`), reseeded every [`RESEED_AFTER`] nonces and
//! whenever the process id changed since it was seeded (a forked child never replays its
//! parent's nonces). The data key is held zeroized-on-drop; the per-record subkey is wiped
//! from our copy after use, but `ring` keeps its own copy of a key in its stack frames
//! without wiping it (it does not zeroize): a leaked subkey opens that one record only.

use super::SealError;
use chacha20::rand_core::{Rng, SeedableRng};
use chacha20::{ChaCha20Rng, R20};
use ring::aead::{Aad, LessSafeKey, Nonce, Tag, UnboundKey, CHACHA20_POLY1305};
use std::cell::RefCell;
use zeroize::{Zeroize, Zeroizing};

/// Length of a key (256 bits).
pub(crate) const KEY_LEN: usize = 32;
/// Length of an XChaCha20-Poly1305 nonce.
pub(crate) const XNONCE_LEN: usize = 24;
/// Length of the Poly1305 tag.
pub(crate) const TAG_LEN: usize = 16;
/// Nonces a thread's generator hands out before it is reseeded from the OS.
pub(crate) const RESEED_AFTER: u32 = 1 << 16;

/// One XChaCha20-Poly1305 key (zeroized on drop).
pub(crate) struct XChaCha {
    key: Zeroizing<[u8; KEY_LEN]>,
}

fn invalid(reason: &str) -> SealError {
    SealError::InvalidParameters {
        reason: reason.into(),
    }
}

impl XChaCha {
    /// The cipher of `key` (copied; the copy is zeroized on drop).
    pub(crate) fn new(key: &[u8; KEY_LEN]) -> Self {
        XChaCha {
            key: Zeroizing::new(*key),
        }
    }

    /// Runs `f` with ring's ChaCha20-Poly1305 key under the HChaCha20 subkey of `nonce`
    /// and the 96-bit nonce `0^4 ‖ nonce[16..24]`. Inlined into its caller, so ring's key
    /// (544 bytes) is built in the frame that uses it instead of being moved out of a
    /// helper on every record.
    #[inline(always)]
    fn with_key<R>(
        &self,
        nonce: &[u8; XNONCE_LEN],
        f: impl FnOnce(&LessSafeKey, Nonce) -> R,
    ) -> Result<R, SealError> {
        let (head, tail) = nonce.split_at(16);
        let head: &[u8; 16] = head
            .try_into()
            .map_err(|_| invalid("nonce prefix is not 16 bytes"))?;
        let mut subkey = chacha20::hchacha::<R20>(&(*self.key).into(), &(*head).into());
        let unbound = UnboundKey::new(&CHACHA20_POLY1305, subkey.as_slice());
        subkey.as_mut_slice().zeroize();
        let unbound = unbound.map_err(|_| invalid("ring refused a 32-byte ChaCha20 key"))?;
        let mut n = [0u8; 12];
        n[4..].copy_from_slice(tail);
        let key = LessSafeKey::new(unbound);
        Ok(f(&key, Nonce::assume_unique_for_key(n)))
    }

    /// Encrypts `in_out` in place under `nonce`, returning the tag.
    pub(crate) fn seal_in_place(
        &self,
        nonce: &[u8; XNONCE_LEN],
        aad: &[u8],
        in_out: &mut [u8],
    ) -> Result<[u8; TAG_LEN], SealError> {
        let tag = self
            .with_key(nonce, |key, n| {
                key.seal_in_place_separate_tag(n, Aad::from(aad), in_out)
            })?
            .map_err(|_| invalid("plaintext too long for XChaCha20-Poly1305"))?;
        let mut out = [0u8; TAG_LEN];
        out.copy_from_slice(tag.as_ref());
        Ok(out)
    }

    /// Decrypts `in_out` in place when it authenticates under `nonce`, `aad` and `tag`;
    /// `false` (and `in_out` unspecified) when it does not.
    pub(crate) fn open_in_place(
        &self,
        nonce: &[u8; XNONCE_LEN],
        aad: &[u8],
        tag: &[u8; TAG_LEN],
        in_out: &mut [u8],
    ) -> bool {
        self.open_within(nonce, aad, tag, in_out, 0)
    }

    /// Decrypts the ciphertext `in_out[shift..]` when it authenticates under `nonce`,
    /// `aad` and `tag`, writing the plaintext to the front of the buffer
    /// (`in_out[..in_out.len() - shift]`, ring's overlapping `open_within`: no second
    /// buffer, no copy); `false` (and `in_out` unspecified) when it does not.
    pub(crate) fn open_within(
        &self,
        nonce: &[u8; XNONCE_LEN],
        aad: &[u8],
        tag: &[u8; TAG_LEN],
        in_out: &mut [u8],
        shift: usize,
    ) -> bool {
        if shift > in_out.len() {
            return false;
        }
        self.with_key(nonce, |key, n| {
            key.open_in_place_separate_tag(n, Aad::from(aad), Tag::from(*tag), in_out, shift..)
                .is_ok()
        })
        .unwrap_or(false)
    }
}

/// A thread's nonce generator and what decides when it is reseeded.
struct NonceRng {
    rng: ChaCha20Rng,
    pid: u32,
    left: u32,
}

thread_local! {
    static NONCES: RefCell<Option<NonceRng>> = const { RefCell::new(None) };
}

/// Fills `N` bytes from the operating system's generator.
pub(crate) fn os_random<const N: usize>() -> Result<[u8; N], SealError> {
    let mut out = [0u8; N];
    getrandom::fill(&mut out).map_err(|e| SealError::Random {
        reason: e.to_string(),
    })?;
    Ok(out)
}

/// A fresh 192-bit nonce from this thread's generator (see the module docs); straight
/// from the OS while the thread is being torn down (its generator already dropped).
pub(crate) fn nonce() -> Result<[u8; XNONCE_LEN], SealError> {
    let pid = std::process::id();
    let drawn = NONCES.try_with(|cell| {
        let mut slot = cell.borrow_mut();
        let g = match slot.take() {
            Some(g) if g.pid == pid && g.left > 0 => slot.insert(g),
            // First use on this thread, budget spent, or a forked child: a new seed.
            _ => {
                let seed = Zeroizing::new(os_random::<KEY_LEN>()?);
                slot.insert(NonceRng {
                    rng: ChaCha20Rng::from_seed(*seed),
                    pid,
                    left: RESEED_AFTER,
                })
            }
        };
        g.left -= 1;
        let mut out = [0u8; XNONCE_LEN];
        g.rng.fill_bytes(&mut out);
        Ok(out)
    });
    drawn.unwrap_or_else(|_| os_random::<XNONCE_LEN>())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    /// draft-irtf-cfrg-xchacha-03, appendix A.3.1 (AEAD_XChaCha20_Poly1305 test vector).
    #[test]
    fn draft_xchacha_test_vector() {
        let hex = |s: &str| -> Vec<u8> {
            let s: String = s.split_whitespace().collect();
            (0..s.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
                .collect()
        };
        let plaintext = b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.";
        let aad = hex("50515253c0c1c2c3c4c5c6c7");
        let key: [u8; 32] = hex("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f")
            .try_into()
            .unwrap();
        let nonce: [u8; 24] = hex("404142434445464748494a4b4c4d4e4f5051525354555657")
            .try_into()
            .unwrap();
        let want_ct = hex(
            "bd6d179d3e83d43b9576579493c0e939572a1700252bfaccbed2902c21396cbb
             731c7f1b0b4aa6440bf3a82f4eda7e39ae64c6708c54c216cb96b72e1213b452
             2f8c9ba40db5d945b11b69b982c1bb9e3f3fac2bc369488f76b2383565d3fff9
             21f9664c97637da9768812f615c68b13b52e",
        );
        let want_tag = hex("c0875924c1c7987947deafd8780acf49");
        let c = XChaCha::new(&key);
        let mut buf = plaintext.to_vec();
        let tag = c.seal_in_place(&nonce, &aad, &mut buf).unwrap();
        assert_eq!(buf, want_ct);
        assert_eq!(tag.as_slice(), want_tag.as_slice());
        assert!(c.open_in_place(&nonce, &aad, &tag, &mut buf));
        assert_eq!(buf, plaintext);
        let mut bad = tag;
        bad[0] ^= 1;
        let mut ct = want_ct.clone();
        assert!(!c.open_in_place(&nonce, &aad, &bad, &mut ct));
    }

    /// The reference implementation: the `chacha20poly1305` crate (what sealed every
    /// record before this composition).
    fn reference_seal(key: &[u8; 32], nonce: &[u8; 24], aad: &[u8], m: &[u8]) -> Vec<u8> {
        use chacha20poly1305::aead::AeadInOut;
        use chacha20poly1305::{KeyInit, XChaCha20Poly1305, XNonce};
        let c = XChaCha20Poly1305::new(&(*key).into());
        let mut buf = m.to_vec();
        let tag = c
            .encrypt_inout_detached(&XNonce::from(*nonce), aad, buf.as_mut_slice().into())
            .unwrap();
        buf.extend_from_slice(&tag);
        buf
    }

    fn reference_open(key: &[u8; 32], nonce: &[u8; 24], aad: &[u8], ct: &[u8]) -> Option<Vec<u8>> {
        use chacha20poly1305::aead::AeadInOut;
        use chacha20poly1305::{KeyInit, Tag, XChaCha20Poly1305, XNonce};
        let c = XChaCha20Poly1305::new(&(*key).into());
        let (body, tag) = ct.split_at(ct.len() - TAG_LEN);
        let tag: [u8; TAG_LEN] = tag.try_into().unwrap();
        let mut buf = body.to_vec();
        c.decrypt_inout_detached(
            &XNonce::from(*nonce),
            aad,
            buf.as_mut_slice().into(),
            &Tag::from(tag),
        )
        .ok()?;
        Some(buf)
    }

    fn ours_seal(key: &[u8; 32], nonce: &[u8; 24], aad: &[u8], m: &[u8]) -> Vec<u8> {
        let mut buf = m.to_vec();
        let tag = XChaCha::new(key)
            .seal_in_place(nonce, aad, &mut buf)
            .unwrap();
        buf.extend_from_slice(&tag);
        buf
    }

    fn ours_open(key: &[u8; 32], nonce: &[u8; 24], aad: &[u8], ct: &[u8]) -> Option<Vec<u8>> {
        let (body, tag) = ct.split_at(ct.len() - TAG_LEN);
        let tag: [u8; TAG_LEN] = tag.try_into().unwrap();
        let mut buf = body.to_vec();
        XChaCha::new(key)
            .open_in_place(nonce, aad, &tag, &mut buf)
            .then_some(buf)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Byte-identical to the `chacha20poly1305` crate's XChaCha20-Poly1305 for
        /// arbitrary keys, nonces, associated data and messages (sizes across the
        /// 64-byte block and the 16-byte Poly1305 block boundaries, up to 4 KiB); each
        /// side opens the other's ciphertext; a flipped bit fails both.
        #[test]
        fn identical_to_the_chacha20poly1305_crate(
            key in proptest::array::uniform32(proptest::prelude::any::<u8>()),
            nonce in proptest::array::uniform24(proptest::prelude::any::<u8>()),
            aad in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
            m in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..4200),
            flip in proptest::prelude::any::<proptest::sample::Index>(),
        ) {
            let ours = ours_seal(&key, &nonce, &aad, &m);
            let reference = reference_seal(&key, &nonce, &aad, &m);
            proptest::prop_assert_eq!(&ours, &reference);
            proptest::prop_assert_eq!(ours_open(&key, &nonce, &aad, &reference), Some(m.clone()));
            proptest::prop_assert_eq!(reference_open(&key, &nonce, &aad, &ours), Some(m.clone()));
            let mut bad = ours.clone();
            let i = flip.index(bad.len());
            bad[i] ^= 0x20;
            proptest::prop_assert_eq!(ours_open(&key, &nonce, &aad, &bad), None);
            proptest::prop_assert_eq!(reference_open(&key, &nonce, &aad, &bad), None);
            let mut other = nonce;
            other[23] ^= 1;
            proptest::prop_assert_eq!(ours_open(&key, &other, &aad, &ours), None);
            // Opened within one buffer, the plaintext shifted to its front (the sealed
            // read path: key id + nonce in front of the ciphertext).
            let (body, tag) = reference.split_at(reference.len() - TAG_LEN);
            let tag: [u8; TAG_LEN] = tag.try_into().unwrap();
            for shift in [0usize, 1, 28, 45] {
                let mut buf = vec![0xEEu8; shift];
                buf.extend_from_slice(body);
                let c = XChaCha::new(&key);
                proptest::prop_assert!(c.open_within(&nonce, &aad, &tag, &mut buf, shift));
                proptest::prop_assert_eq!(&buf[..m.len()], m.as_slice());
                let mut bad_tag = tag;
                bad_tag[0] ^= 1;
                let mut buf = vec![0u8; shift];
                buf.extend_from_slice(body);
                proptest::prop_assert!(!c.open_within(&nonce, &aad, &bad_tag, &mut buf, shift));
            }
        }
    }

    #[test]
    fn nonces_differ_and_reseed() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            assert!(seen.insert(nonce().unwrap()));
        }
        // Force the reseed path: exhaust this thread's budget.
        NONCES.with(|c| c.borrow_mut().as_mut().unwrap().left = 0);
        assert!(seen.insert(nonce().unwrap()));
        let left = NONCES.with(|c| c.borrow().as_ref().unwrap().left);
        assert_eq!(left, RESEED_AFTER - 1, "reseeded with a fresh budget");
        // A changed pid (as after fork) reseeds too.
        NONCES.with(|c| c.borrow_mut().as_mut().unwrap().pid ^= 1);
        let before = NONCES.with(|c| c.borrow().as_ref().unwrap().rng.get_seed());
        assert!(seen.insert(nonce().unwrap()));
        let after = NONCES.with(|c| c.borrow().as_ref().unwrap().rng.get_seed());
        assert_ne!(before, after, "a new seed from the OS");
    }

    #[test]
    fn threads_draw_distinct_nonces() {
        let handles: Vec<_> = (0..4)
            .map(|_| std::thread::spawn(|| (0..100).map(|_| nonce().unwrap()).collect::<Vec<_>>()))
            .collect();
        let mut seen = std::collections::HashSet::new();
        for h in handles {
            for n in h.join().unwrap() {
                assert!(seen.insert(n));
            }
        }
        assert_eq!(seen.len(), 400);
    }
}
