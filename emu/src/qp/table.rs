//! The QP table: QP number → QP by direct index (QPNs are small: 17 .. 0x20000, allocated
//! cyclically), so the per-packet lookup is one bounds check and one load, not a tree walk or a
//! hash. Slots are boxed so the index costs 8 bytes per QPN up to the highest one in use (at
//! most 1 MiB at QPN 0x1FFFF) and a QP never moves.
use super::Qp;

#[derive(Default)]
pub(crate) struct QpTable {
    slots: Vec<Option<Box<Qp>>>,
    len: usize,
}

impl QpTable {
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn get(&self, qpn: u32) -> Option<&Qp> {
        self.slots.get(qpn as usize)?.as_deref()
    }

    #[inline]
    pub fn get_mut(&mut self, qpn: u32) -> Option<&mut Qp> {
        self.slots.get_mut(qpn as usize)?.as_deref_mut()
    }

    pub fn contains(&self, qpn: u32) -> bool {
        self.get(qpn).is_some()
    }

    /// Inserts `qp` under `qpn` (which must be free).
    pub fn insert(&mut self, qpn: u32, qp: Qp) {
        let i = qpn as usize;
        if i >= self.slots.len() {
            self.slots.resize_with(i + 1, || None);
        }
        debug_assert!(self.slots[i].is_none());
        self.slots[i] = Some(Box::new(qp));
        self.len += 1;
    }

    pub fn remove(&mut self, qpn: u32) -> Option<Qp> {
        let qp = self.slots.get_mut(qpn as usize)?.take()?;
        self.len -= 1;
        Some(*qp)
    }

    /// Every QP, by ascending QPN.
    pub fn values(&self) -> impl Iterator<Item = &Qp> {
        self.slots.iter().filter_map(|s| s.as_deref())
    }
}
