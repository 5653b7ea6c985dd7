//! A small deterministic PRNG (splitmix64) seeded from `Config::seed`: the kernel draws its
//! comm-ID XOR operand, starting PSNs and ephemeral ports from `get_random_*`; here every draw
//! is reproducible from the seed.

/// splitmix64.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// A random 24-bit PSN (`get_random_u32() & 0xffffff`, cma.c `__rdma_create_id`).
    pub(crate) fn psn(&mut self) -> u32 {
        self.next_u32() & 0xFF_FFFF
    }

    /// A random port in the default `ip_local_port_range`, 32768..=60999.
    pub(crate) fn ephemeral_port(&mut self) -> u16 {
        let (lo, hi) = (
            crate::ports::EPHEMERAL_LOW as u32,
            crate::ports::EPHEMERAL_HIGH as u32,
        );
        (lo + self.next_u32() % (hi - lo + 1)) as u16
    }
}
