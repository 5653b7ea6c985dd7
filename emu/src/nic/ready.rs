//! The ready queue: QPs that may have a packet to send, served round robin. Each QP is in it at
//! most once (`Qp::in_ready`), so it never holds more entries than there are QPs; a ring of
//! QP numbers whose capacity is a power of two (push and pop are a mask and a store, no
//! `VecDeque` growth checks on the per-packet path). It grows only when more QPs are ready
//! at once than it has ever held.
pub(super) struct Ready {
    slots: Vec<u32>,
    head: usize,
    len: usize,
    /// Packets the front QP has sent in its current turn.
    turn: usize,
}

impl Ready {
    /// An empty queue with room for `cap` QPs (rounded up to a power of two).
    pub fn with_capacity(cap: usize) -> Ready {
        Ready {
            slots: vec![0; cap.max(1).next_power_of_two()],
            head: 0,
            len: 0,
            turn: 0,
        }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    pub fn push_back(&mut self, qpn: u32) {
        if self.len == self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        self.slots[(self.head + self.len) & mask] = qpn;
        self.len += 1;
    }

    /// The QP at the front, left in line.
    #[inline]
    pub fn front(&self) -> Option<u32> {
        (self.len > 0).then(|| self.slots[self.head])
    }

    /// Moves the front QP to the back (round robin); nothing to do when it is alone.
    #[inline]
    pub fn rotate(&mut self) {
        if self.len > 1 {
            let mask = self.slots.len() - 1;
            let q = self.slots[self.head];
            self.head = (self.head + 1) & mask;
            self.slots[(self.head + self.len - 1) & mask] = q;
        }
    }

    /// The front QP, whose packets carry up to `mtu` payload bytes, sent one and has more to
    /// send: it keeps its place until it has sent about `turn_bytes`, then goes to the back.
    /// Free when it is alone. (Counted in packets: reading the packet's length here made
    /// the caller copy its `Transmit` once more, 26 instructions per packet.)
    #[inline]
    pub fn served(&mut self, mtu: u32, turn_bytes: usize) {
        if self.len > 1 {
            self.turn += 1;
            if self.turn * (mtu as usize + 32) >= turn_bytes {
                self.turn = 0;
                self.rotate();
            }
        }
    }

    #[inline]
    pub fn pop_front(&mut self) -> Option<u32> {
        self.turn = 0;
        if self.len == 0 {
            return None;
        }
        let q = self.slots[self.head];
        self.head = (self.head + 1) & (self.slots.len() - 1);
        self.len -= 1;
        Some(q)
    }

    #[cold]
    fn grow(&mut self) {
        let cap = self.slots.len();
        let mut v = Vec::with_capacity(cap * 2);
        v.extend((0..self.len).map(|j| self.slots[(self.head + j) & (cap - 1)]));
        v.resize(cap * 2, 0);
        self.slots = v;
        self.head = 0;
    }
}

#[cfg(test)]
mod test {
    use super::Ready;

    #[test]
    fn fifo_across_wrap_and_growth() {
        let mut r = Ready::with_capacity(2);
        let mut model = std::collections::VecDeque::new();
        for i in 0..100u32 {
            r.push_back(i);
            model.push_back(i);
            if i % 3 == 0 {
                assert_eq!(r.pop_front(), model.pop_front());
            }
        }
        for _ in 0..7 {
            r.rotate();
            model.rotate_left(1);
        }
        while let Some(x) = model.pop_front() {
            assert_eq!(r.front(), Some(x));
            assert_eq!(r.pop_front(), Some(x));
        }
        assert!(r.is_empty());
        assert_eq!(r.pop_front(), None);
    }
}
