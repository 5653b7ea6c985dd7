//! Randomness from the operating system (getrandom(2)) for what must differ between devices,
//! runs and containers: the seed of a device's memory keys and initial PSNs. Nothing here is
//! derived from the process ID or the time (a container's first process is always PID 1).

use std::io;

/// Fills `buf` from the kernel's entropy pool (getrandom(2), blocking until it is initialised).
pub fn fill(buf: &mut [u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let rest = &mut buf[done..];
        // SAFETY: `rest` is a valid, writable buffer of `rest.len()` bytes.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(io::Error::new(e.kind(), format!("roce: getrandom: {e}")));
        }
        done += n as usize;
    }
    Ok(())
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
