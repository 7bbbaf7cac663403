//! Numbers no candidate can predict: drawn from the operating system for every evaluation.

/// A fresh random `u64` from the operating system.
pub(crate) fn seed() -> u64 {
    let mut b = [0u8; 8];
    #[cfg(target_os = "linux")]
    // SAFETY: getrandom fills the 8-byte buffer it is given.
    let filled = unsafe { libc::getrandom(b.as_mut_ptr().cast(), 8, 0) } == 8;
    #[cfg(not(target_os = "linux"))]
    let filled = {
        // SAFETY: arc4random_buf fills the 8-byte buffer it is given, and cannot fail.
        unsafe { libc::arc4random_buf(b.as_mut_ptr().cast(), 8) };
        true
    };
    let clock = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    if filled {
        u64::from_ne_bytes(b) ^ clock
    } else {
        // Never seen: getrandom blocks until the pool is ready. The clock still varies.
        clock.wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn seeds_differ() {
        let a: std::collections::BTreeSet<u64> = (0..64).map(|_| super::seed()).collect();
        assert_eq!(a.len(), 64);
    }
}
