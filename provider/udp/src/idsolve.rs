//! Recovering the IPv4 identification from the ICRC.
//!
//! A UDP socket cannot see the IPv4 identification, which the ICRC covers. But a CRC is affine
//! over GF(2): changing the 16 identification bits changes the CRC by `L(id_a ^ id_b)`, where `L`
//! is a linear map from 16 to 32 bits that depends only on how many bytes follow the field. Given
//! the stored ICRC and the CRC computed with a guessed identification, solving the 32×16 linear
//! system yields the one identification (if any) that makes the ICRC match. The CRC-32 detects
//! every burst of ≤ 32 bits, so `L` is injective and the answer is unique.
//!
//! The price is strength: a corrupted packet passes with probability 2⁻¹⁶ instead of 2⁻³², since
//! 16 of the 32 check bits are spent finding the identification. A per-thread cache keeps, per
//! packet length, the 16-word basis and its elimination, so a solve is at most 32 table steps
//! once the length was seen; the same basis patches a CRC for a changed 16-bit field in ~15 ns
//! ([`field_delta_crc`]).
//!
//! Shifting a CRC state through `n` zero bytes is multiplication by `x^(8n) mod P`, computed as in
//! zlib's `crc32_combine` (`multmodp`, `x2nmodp`).

const POLY: u32 = 0xEDB8_8320;

/// `a * b mod P` for reflected CRC-32 polynomials.
fn multmodp(a: u32, mut b: u32) -> u32 {
    let mut m = 1u32 << 31;
    let mut p = 0u32;
    loop {
        if a & m != 0 {
            p ^= b;
            if a & (m - 1) == 0 {
                break;
            }
        }
        m >>= 1;
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
    }
    p
}

const fn x2n_table() -> [u32; 32] {
    // x^(2^k) mod P; const-evaluated with an inlined multmodp.
    const fn mm(a: u32, mut b: u32) -> u32 {
        let mut m = 1u32 << 31;
        let mut p = 0u32;
        loop {
            if a & m != 0 {
                p ^= b;
                if a & (m - 1) == 0 {
                    break;
                }
            }
            m >>= 1;
            b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
        }
        p
    }
    let mut t = [0u32; 32];
    let mut p = 1u32 << 30; // x^1
    t[0] = p;
    let mut n = 1;
    while n < 32 {
        p = mm(p, p);
        t[n] = p;
        n += 1;
    }
    t
}

static X2N: [u32; 32] = x2n_table();

/// `x^(8 * n) mod P`: the operator that shifts a CRC state through `n` zero bytes.
fn x8n(mut n: u64) -> u32 {
    let mut p = 1u32 << 31; // x^0
    let mut k = 3usize;
    while n != 0 {
        if n & 1 != 0 {
            p = multmodp(X2N[k & 31], p);
        }
        n >>= 1;
        k += 1;
    }
    p
}

/// Raw CRC-32 state (zero init, no final xor) of `bytes`.
fn raw_crc(bytes: &[u8]) -> u32 {
    let mut s = 0u32;
    for &b in bytes {
        s ^= b as u32;
        for _ in 0..8 {
            s = if s & 1 != 0 { (s >> 1) ^ POLY } else { s >> 1 };
        }
    }
    s
}

/// The CRC difference caused by XOR-ing `delta` into a big-endian 16-bit field followed by
/// `after` more bytes, for each of the 16 unit deltas (bit `i` of the field value).
fn basis_uncached(after: u64) -> [u32; 16] {
    let shift = x8n(after);
    let mut v = [0u32; 16];
    for (i, out) in v.iter_mut().enumerate() {
        let d = 1u16 << i;
        *out = multmodp(shift, raw_crc(&d.to_be_bytes()));
    }
    v
}

/// The eliminated basis: `rows[b]` is `(r, m)` with `L(m) == r` and `b` the highest set bit of
/// `r` (`(0, 0)`: no row has that top bit).
type Rows = [(u32, u16); 32];

/// What is cached per length: the basis (for patches) and its elimination (for solves).
#[derive(Clone, Copy)]
struct Tables {
    after: u64,
    basis: [u32; 16],
    rows: Rows,
}

/// Runs `f` on the tables for `after` from a small per-thread direct-mapped cache: packet lengths
/// repeat, and computing a basis (~1 µs) and eliminating it are most of the cost of a patch or a
/// solve.
fn with_tables<R>(after: u64, f: impl FnOnce(&Tables) -> R) -> R {
    use std::cell::RefCell;
    const EMPTY: Tables = Tables {
        after: u64::MAX,
        basis: [0; 16],
        rows: [(0, 0); 32],
    };
    thread_local! {
        static CACHE: RefCell<[Tables; 8]> = const { RefCell::new([EMPTY; 8]) };
    }
    CACHE.with(|c| {
        let mut t = c.borrow_mut();
        let slot = (after ^ (after >> 3) ^ (after >> 7)) as usize & 7;
        if t[slot].after != after {
            let basis = basis_uncached(after);
            t[slot] = Tables {
                after,
                basis,
                rows: eliminate(&basis),
            };
        }
        f(&t[slot])
    })
}

/// Finds `delta` (16 bits) with `L(delta) == diff`, where `L` is the CRC effect of XOR-ing
/// `delta` into a 16-bit big-endian field followed by `after` bytes. `None` if no delta fits.
pub fn solve_field_delta(diff: u32, after: u64) -> Option<u16> {
    with_tables(after, |t| reduce(&t.rows, diff))
}

/// Reduces `diff` by the eliminated rows: the combination of unit deltas that produces it.
fn reduce(rows: &Rows, diff: u32) -> Option<u16> {
    let (mut t, mut x) = (diff, 0u16);
    while t != 0 {
        let top = 31 - t.leading_zeros() as usize;
        if rows[top].0 == 0 {
            return None;
        }
        t ^= rows[top].0;
        x ^= rows[top].1;
    }
    Some(x)
}

/// Gaussian elimination of the basis: rows keyed by their highest set bit.
fn eliminate(v: &[u32; 16]) -> Rows {
    let mut rows: Rows = [(0, 0); 32];
    for (i, &vi) in v.iter().enumerate() {
        let (mut r, mut m) = (vi, 1u16 << i);
        while r != 0 {
            let top = 31 - r.leading_zeros() as usize;
            if rows[top].0 == 0 {
                rows[top] = (r, m);
                break;
            }
            r ^= rows[top].0;
            m ^= rows[top].1;
        }
    }
    rows
}

/// The CRC change caused by XOR-ing `delta` into a big-endian 16-bit field that is followed by
/// `after` more bytes of CRC input. XOR it into a CRC to patch the field without recomputing.
pub fn field_delta_crc(delta: u16, after: u64) -> u32 {
    if delta == 0 {
        return 0;
    }
    with_tables(after, |t| {
        let mut r = 0u32;
        let mut d = delta;
        while d != 0 {
            let i = d.trailing_zeros() as usize;
            r ^= t.basis[i];
            d &= d - 1;
        }
        r
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The full CRC-32 (init and final xor `0xFFFFFFFF`), as the ICRC uses.
    fn crc(b: &[u8]) -> u32 {
        let mut s = !0u32;
        for &x in b {
            s ^= x as u32;
            for _ in 0..8 {
                s = if s & 1 != 0 { (s >> 1) ^ POLY } else { s >> 1 };
            }
        }
        !s
    }

    #[test]
    fn shift_matches_real_crc() {
        // raw(A || 0^n) == shift(raw(A), n)
        let a = [1u8, 2, 3, 4, 5];
        for n in [0usize, 1, 7, 64, 1000, 4096] {
            let mut m = a.to_vec();
            m.resize(a.len() + n, 0);
            assert_eq!(raw_crc(&m), multmodp(x8n(n as u64), raw_crc(&a)), "n={n}");
        }
    }

    #[test]
    fn recovers_any_field_value() {
        let mut msg: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        let at = 12;
        let after = (msg.len() - at - 2) as u64;
        for id in [0u16, 1, 2, 0x1234, 0x8000, 0xFFFF, 47729] {
            msg[at..at + 2].copy_from_slice(&id.to_be_bytes());
            let real = crc(&msg);
            msg[at..at + 2].copy_from_slice(&0u16.to_be_bytes());
            let guess = crc(&msg);
            assert_eq!(solve_field_delta(real ^ guess, after), Some(id));
        }
    }

    #[test]
    fn patching_equals_recomputing() {
        let mut msg: Vec<u8> = (0..500u32).map(|i| (i * 13 + 1) as u8).collect();
        for (at, old, new) in [(12usize, 0u16, 7u16), (28, 4791, 0xC123), (100, 0xFFFF, 0)] {
            msg[at..at + 2].copy_from_slice(&old.to_be_bytes());
            let before = crc(&msg);
            msg[at..at + 2].copy_from_slice(&new.to_be_bytes());
            let after = (msg.len() - at - 2) as u64;
            assert_eq!(before ^ field_delta_crc(old ^ new, after), crc(&msg));
        }
    }

    #[test]
    fn most_random_differences_have_no_solution() {
        // Only 2^16 of 2^32 differences are reachable.
        let mut none = 0;
        for i in 0..1000u32 {
            let d = i.wrapping_mul(0x9E37_79B9) | 1;
            if solve_field_delta(d, 100).is_none() {
                none += 1;
            }
        }
        assert!(none > 990, "{none}");
    }
}
