//! Randomness from the operating system (getrandom(2)) for what must differ between devices,
//! runs and containers: the seed of a device's memory keys and initial PSNs. Nothing here is
//! derived from the process ID or the time (a container's first process is always PID 1).

use std::io;

/// Fills `buf` from the kernel's entropy pool (getrandom(2), blocking until it is initialised).
pub fn fill(buf: &mut [u8]) -> io::Result<()> {
    roce_udp::os::getrandom(buf)
        .map_err(|e| io::Error::new(e.kind(), format!("roce: getrandom: {e}")))
}

/// 256 random bits: [`roce_emu::NicConfig::entropy`] of a device on a real network.
pub fn seed() -> io::Result<[u8; 32]> {
    let mut s = [0u8; 32];
    fill(&mut s)?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    #[test]
    fn two_seeds_differ() {
        // 256 random bits twice: equal only if getrandom returned nothing random.
        assert_ne!(super::seed().unwrap(), super::seed().unwrap());
    }
}
