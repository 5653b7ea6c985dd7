//! Deliveries due now, in transmission order: a ring of slots that keep their packet buffers.
//! On a zero-latency ideal link a NIC writes its datagram straight into the next free slot and
//! the receiver reads it from there: no buffer swap, no per-packet move of the metadata queue,
//! no allocation once the ring has grown to the burst size.
use super::BUF;
use crate::RxMeta;
use std::net::{IpAddr, Ipv4Addr};

pub(super) struct Slot {
    pub to: usize,
    pub meta: RxMeta,
    pub len: usize,
    pub data: Vec<u8>,
}

pub(super) struct Due {
    slots: Vec<Slot>,
    head: usize,
    len: usize,
}

fn empty_slot() -> Slot {
    let ip = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
    Slot {
        to: 0,
        meta: RxMeta {
            src_ip: ip,
            dst_ip: ip,
            src_port: 0,
            ipv4_id: None,
            tos: 0,
            ttl: 0,
            flow_label: 0,
        },
        len: 0,
        data: Vec::new(),
    }
}

impl Due {
    /// An empty ring of `cap` slots (a power of two); buffers are allocated on first use.
    pub fn new(cap: usize) -> Due {
        debug_assert!(cap.is_power_of_two());
        Due {
            slots: (0..cap).map(|_| empty_slot()).collect(),
            head: 0,
            len: 0,
        }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The free slot after the last queued one, with a buffer of [`BUF`] bytes; it becomes
    /// queued only by [`Due::commit`].
    #[inline]
    pub fn next_free(&mut self) -> &mut Slot {
        if self.len == self.slots.len() {
            self.grow();
        }
        let k = (self.head + self.len) & (self.slots.len() - 1);
        let s = &mut self.slots[k];
        if s.data.len() < BUF {
            s.data = vec![0; BUF];
        }
        s
    }

    /// Queues the slot [`Due::next_free`] returned.
    #[inline]
    pub fn commit(&mut self) {
        self.len += 1;
    }

    /// Queues `data[..len]` (an owned buffer of [`BUF`] bytes); returns the buffer it replaces.
    pub fn push_owned(&mut self, to: usize, meta: RxMeta, data: Vec<u8>, len: usize) -> Vec<u8> {
        let s = self.next_free();
        s.to = to;
        s.meta = meta;
        s.len = len;
        let old = std::mem::replace(&mut s.data, data);
        self.commit();
        old
    }

    /// The oldest queued slot.
    #[inline]
    pub fn front(&self) -> Option<&Slot> {
        (self.len > 0).then(|| &self.slots[self.head])
    }

    /// Drops the oldest queued slot (its buffer stays for reuse).
    #[inline]
    pub fn pop(&mut self) {
        if self.len > 0 {
            self.head = (self.head + 1) & (self.slots.len() - 1);
            self.len -= 1;
        }
    }

    fn grow(&mut self) {
        let cap = self.slots.len();
        let mut v: Vec<Slot> = Vec::with_capacity(cap * 2);
        for j in 0..cap {
            v.push(std::mem::replace(
                &mut self.slots[(self.head + j) & (cap - 1)],
                empty_slot(),
            ));
        }
        v.extend((cap..cap * 2).map(|_| empty_slot()));
        self.slots = v;
        self.head = 0;
    }
}
