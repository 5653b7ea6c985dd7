//! The responder's output queue: a fixed ring of [`Job`]s allocated once per QP.
//!
//! A `VecDeque` would do, but its `push_back` stays out of line (it carries the growth path)
//! and reads the job back from the caller's stack right after the caller's narrower stores, a
//! store-forwarding stall on every ACK (measured: 3% of the engine benchmark). This ring never
//! grows, so every operation inlines to a few instructions.
use super::Job;

pub(crate) struct JobRing {
    slots: Box<[Job]>,
    head: usize,
    len: usize,
}

impl Default for JobRing {
    /// A ring with no room (a placeholder while a QP is rebuilt).
    fn default() -> JobRing {
        JobRing {
            slots: Box::default(),
            head: 0,
            len: 0,
        }
    }
}

impl std::fmt::Debug for JobRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries((0..self.len).map(|i| &self.slots[self.at(i)]))
            .finish()
    }
}

impl JobRing {
    /// Room for `cap` jobs (a power of two).
    pub fn with_capacity(cap: usize) -> JobRing {
        assert!(cap.is_power_of_two());
        let filler = Job::Ack {
            psn: Default::default(),
            syndrome: 0,
            msn: 0,
        };
        JobRing {
            slots: vec![filler; cap].into_boxed_slice(),
            head: 0,
            len: 0,
        }
    }
    /// The slot of the `i`-th job (wrapping: `back_mut` asks for index `len - 1` before it
    /// knows the ring is not empty).
    #[inline(always)]
    fn at(&self, i: usize) -> usize {
        self.head.wrapping_add(i) & self.slots.len().wrapping_sub(1)
    }
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    #[inline(always)]
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }
    #[inline(always)]
    pub fn clear(&mut self) {
        self.len = 0;
    }
    #[inline(always)]
    pub fn front(&self) -> Option<&Job> {
        (self.len > 0).then(|| &self.slots[self.head])
    }
    #[inline(always)]
    pub fn front_mut(&mut self) -> Option<&mut Job> {
        (self.len > 0).then(|| &mut self.slots[self.head])
    }
    #[inline(always)]
    pub fn back(&self) -> Option<&Job> {
        (self.len > 0).then(|| &self.slots[self.at(self.len - 1)])
    }
    #[inline(always)]
    pub fn back_mut(&mut self) -> Option<&mut Job> {
        let i = self.at(self.len.wrapping_sub(1));
        (self.len > 0).then(|| &mut self.slots[i])
    }
    /// False (job dropped) when full.
    #[inline(always)]
    pub fn push_back(&mut self, job: Job) -> bool {
        if self.len >= self.slots.len() {
            return false;
        }
        let i = self.at(self.len);
        self.slots[i] = job;
        self.len += 1;
        true
    }
    /// False (job dropped) when full.
    #[inline(always)]
    pub fn push_front(&mut self, job: Job) -> bool {
        if self.len >= self.slots.len() {
            return false;
        }
        self.head = self.head.wrapping_sub(1) & (self.slots.len() - 1);
        self.slots[self.head] = job;
        self.len += 1;
        true
    }
    #[inline(always)]
    pub fn pop_front(&mut self) -> Option<Job> {
        if self.len == 0 {
            return None;
        }
        let j = self.slots[self.head];
        self.head = self.at(1);
        self.len -= 1;
        Some(j)
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use roce_wire::Psn;

    fn ack(n: u32) -> Job {
        Job::Ack {
            psn: Psn::new(n),
            syndrome: 0,
            msn: n,
        }
    }
    fn msn(j: Option<&Job>) -> Option<u32> {
        match j {
            Some(Job::Ack { msn, .. }) => Some(*msn),
            _ => None,
        }
    }

    #[test]
    fn fifo_order_wraps_and_refuses_when_full() {
        let mut r = JobRing::with_capacity(4);
        for round in 0..3u32 {
            for i in 0..4 {
                assert!(r.push_back(ack(round * 10 + i)));
            }
            assert!(!r.push_back(ack(99)), "full ring refuses");
            assert_eq!(msn(r.back()), Some(round * 10 + 3));
            for i in 0..4 {
                assert_eq!(msn(r.front()), Some(round * 10 + i));
                assert!(r.pop_front().is_some());
            }
            assert!(r.is_empty() && r.pop_front().is_none() && r.back().is_none());
            r.push_back(ack(7));
            r.pop_front();
        }
    }

    #[test]
    fn push_front_goes_first_and_default_has_no_room() {
        let mut r = JobRing::with_capacity(2);
        r.push_back(ack(1));
        assert!(r.push_front(ack(0)));
        assert!(!r.push_front(ack(5)));
        assert_eq!(msn(r.pop_front().as_ref()), Some(0));
        assert_eq!(msn(r.pop_front().as_ref()), Some(1));
        let mut d = JobRing::default();
        assert!(!d.push_back(ack(1)) && d.is_empty() && d.back_mut().is_none());
    }
}
