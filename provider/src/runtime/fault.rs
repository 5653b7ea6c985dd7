//! The fault injector on the transmit side of the UDP driver: drops a seeded fraction of
//! outgoing datagrams, and holds back another fraction to send it right after the next one
//! (delay-and-swap reordering). Deterministic for a given seed and packet sequence.

/// What to do with one outgoing datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultVerdict {
    /// Send it.
    Pass,
    /// Drop it.
    Drop,
    /// Hold it and send it after the next datagram (or at the end of this transmit burst).
    Hold,
}

/// Seeded loss / reorder decisions (splitmix64).
#[derive(Clone, Debug)]
pub struct Fault {
    loss: u64,
    reorder: u64,
    state: u64,
    all: bool,
    acks: bool,
}

fn threshold(p: f64) -> u64 {
    if p <= 0.0 {
        0
    } else if p >= 1.0 {
        u64::MAX
    } else {
        (p * u64::MAX as f64) as u64
    }
}

impl Fault {
    /// `loss` and `reorder` are fractions; `all`: also UC/UD (else RC only).
    pub fn new(loss: f64, reorder: f64, seed: u64, all: bool) -> Fault {
        Fault {
            loss: threshold(loss),
            reorder: threshold(reorder),
            state: seed,
            all,
            acks: false,
        }
    }

    /// Also drop/reorder plain RC ACK/NAK packets (default off: a lost *final* ACK makes a
    /// requester retry forever once its peer program has exited, with rxe's `retry_cnt = 7`
    /// meaning "infinite", which every ping-pong tool uses).
    pub fn with_acks(mut self, acks: bool) -> Fault {
        self.acks = acks;
        self
    }

    /// Is the injector doing anything?
    pub fn active(&self) -> bool {
        self.loss > 0 || self.reorder > 0
    }

    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Decides for a datagram whose BTH starts `packet` (the transport is in the opcode's top
    /// three bits: 0 = RC).
    pub fn decide(&mut self, packet: &[u8]) -> FaultVerdict {
        if !self.active() {
            return FaultVerdict::Pass;
        }
        let rc = packet.first().is_some_and(|op| op >> 5 == 0);
        if !rc && !self.all {
            return FaultVerdict::Pass;
        }
        if !self.acks && packet.first() == Some(&0x11) {
            return FaultVerdict::Pass;
        }
        if self.loss > 0 && self.next() < self.loss {
            return FaultVerdict::Drop;
        }
        if self.reorder > 0 && self.next() < self.reorder {
            return FaultVerdict::Hold;
        }
        FaultVerdict::Pass
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_are_roughly_right_and_seeded() {
        let mut f = Fault::new(0.02, 0.05, 7, false);
        let (mut d, mut h) = (0, 0);
        for _ in 0..100_000 {
            match f.decide(&[0x04]) {
                FaultVerdict::Drop => d += 1,
                FaultVerdict::Hold => h += 1,
                FaultVerdict::Pass => {}
            }
        }
        assert!((1500..2500).contains(&d), "{d}");
        assert!((4000..6000).contains(&h), "{h}");
        // UD (0x64 = UD SEND_ONLY) passes unless `all`.
        assert_eq!(
            Fault::new(1.0, 0.0, 1, false).decide(&[0x64]),
            FaultVerdict::Pass
        );
        assert_eq!(
            Fault::new(1.0, 0.0, 1, true).decide(&[0x64]),
            FaultVerdict::Drop
        );
        let a: Vec<_> = (0..50)
            .map(|_| Fault::new(0.3, 0.3, 9, false).decide(&[0]))
            .collect();
        let mut g = Fault::new(0.3, 0.3, 9, false);
        let _ = g.decide(&[0]);
        assert_eq!(a[0], Fault::new(0.3, 0.3, 9, false).decide(&[0]));
    }
}
