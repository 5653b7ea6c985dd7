//! Work queues with storage allocated once at creation: posting and completing never allocate.
use crate::verbs::{AhAttr, SendFlags, Sge, WcStatus, WorkCompletion, WrOpcode};
use roce_wire::Psn;
use std::collections::VecDeque;

/// Progress of a send WQE (rxe `enum wqe_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum WqeState {
    /// Posted, not started (or rewound for retry).
    #[default]
    Posted,
    /// Some packets sent.
    Processing,
    /// All packets sent, awaiting the response (RC).
    Pending,
    /// Finished (UC/UD after transmission), awaiting completion.
    Done,
    /// Failed locally; `status` says how.
    Error,
}

/// A BIND_MW WQE keeps its `MwBind` in fields it has no other use for (the WQE stays small):
/// `inv_rkey` the window's rkey, `rkey` the new rkey, `imm` the region's lkey, `remote_addr`
/// and `compare_add` the address and length, `swap` the access flags ([`SendWqe::bind`]).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SendWqe {
    pub wr_id: u64,
    pub opcode: WrOpcode,
    pub flags: SendFlags,
    pub imm: u32,
    pub inv_rkey: u32,
    pub remote_addr: u64,
    pub rkey: u32,
    pub compare_add: u64,
    pub swap: u64,
    pub av: Option<AhAttr>,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
    pub num_sge: u16,
    pub inline: bool,
    pub length: u32,
    pub state: WqeState,
    pub status: WcStatus,
    /// PSN of the START packet of the current (re)transmission.
    pub first_psn: Psn,
    /// PSN of the last packet (or last read response).
    pub last_psn: Psn,
    /// PSN of the message's first packet in its original transmission (data placement).
    pub orig_first_psn: Psn,
    /// Bytes of the message already turned into packets.
    pub sent: u32,
    pub has_rd_atomic: bool,
}

impl SendWqe {
    /// The bind of a BIND_MW WQE (see the type's note on where it is kept).
    pub fn bind(&self) -> crate::verbs::MwBind {
        crate::verbs::MwBind {
            mw_rkey: self.inv_rkey,
            rkey: self.rkey,
            mr_lkey: self.imm,
            addr: self.remote_addr,
            length: self.compare_add,
            access: crate::verbs::AccessFlags(self.swap as u32),
        }
    }
}

/// A ring of send WQEs: `head` = oldest not completed, `req` = next for the requester,
/// `tail` = next free. Counters wrap; slot = counter & mask over storage rounded up to a power
/// of two (a mask, not a division, per access; consistent across the u32 wrap), of which at
/// most `cap` slots are in use.
pub(crate) struct SendQueue {
    pub wqes: Vec<SendWqe>,
    cap: u32,
    mask: u32,
    pub sges: Vec<Sge>,
    pub inline: Vec<u8>,
    pub max_sge: usize,
    pub max_inline: usize,
    pub head: u32,
    pub req: u32,
    pub tail: u32,
}

impl SendQueue {
    pub fn new(cap: u32, max_sge: u32, max_inline: u32) -> SendQueue {
        let cap = cap.max(1);
        let slots = cap.next_power_of_two() as usize;
        SendQueue {
            wqes: vec![SendWqe::default(); slots],
            cap,
            mask: slots as u32 - 1,
            sges: vec![Sge::default(); slots * max_sge as usize],
            inline: vec![0; slots * max_inline as usize],
            max_sge: max_sge as usize,
            max_inline: max_inline as usize,
            head: 0,
            req: 0,
            tail: 0,
        }
    }
    #[inline]
    pub fn cap(&self) -> u32 {
        self.cap
    }
    #[inline]
    pub fn len(&self) -> u32 {
        self.tail.wrapping_sub(self.head)
    }
    #[inline]
    pub fn slot(&self, i: u32) -> usize {
        (i & self.mask) as usize
    }
    #[inline]
    pub fn get(&self, i: u32) -> &SendWqe {
        &self.wqes[self.slot(i)]
    }
    #[inline]
    pub fn get_mut(&mut self, i: u32) -> &mut SendWqe {
        let s = self.slot(i);
        &mut self.wqes[s]
    }
    #[inline]
    pub fn sges_of(&self, i: u32) -> &[Sge] {
        let s = self.slot(i);
        let w = &self.wqes[s];
        &self.sges[s * self.max_sge..s * self.max_sge + w.num_sge as usize]
    }
    #[inline]
    pub fn inline_of(&self, i: u32) -> &[u8] {
        let s = self.slot(i);
        let w = &self.wqes[s];
        &self.inline[s * self.max_inline..s * self.max_inline + w.length as usize]
    }
    pub fn clear(&mut self) {
        self.head = 0;
        self.req = 0;
        self.tail = 0;
    }
}

#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RecvWqe {
    pub wr_id: u64,
    pub num_sge: u16,
    pub length: u64,
}

/// A ring of receive WQEs (QP RQ or SRQ), storage rounded up to a power of two as
/// [`SendQueue`]'s.
pub(crate) struct RecvQueue {
    pub wqes: Vec<RecvWqe>,
    cap: u32,
    mask: u32,
    pub sges: Vec<Sge>,
    pub max_sge: usize,
    pub head: u32,
    pub tail: u32,
}

impl RecvQueue {
    pub fn new(cap: u32, max_sge: u32) -> RecvQueue {
        let cap = cap.max(1);
        let slots = cap.next_power_of_two() as usize;
        RecvQueue {
            wqes: vec![RecvWqe::default(); slots],
            cap,
            mask: slots as u32 - 1,
            sges: vec![Sge::default(); slots * max_sge.max(1) as usize],
            max_sge: max_sge.max(1) as usize,
            head: 0,
            tail: 0,
        }
    }
    #[inline]
    pub fn cap(&self) -> u32 {
        self.cap
    }
    #[inline]
    pub fn len(&self) -> u32 {
        self.tail.wrapping_sub(self.head)
    }
    #[inline]
    fn slot(&self, i: u32) -> usize {
        (i & self.mask) as usize
    }
    #[inline]
    pub fn push(&mut self, wr_id: u64, sges: &[Sge]) -> bool {
        if self.len() >= self.cap() || sges.len() > self.max_sge {
            return false;
        }
        let s = self.slot(self.tail);
        crate::mem::copy_sges(
            &mut self.sges[s * self.max_sge..s * self.max_sge + sges.len()],
            sges,
        );
        self.wqes[s] = RecvWqe {
            wr_id,
            num_sge: sges.len() as u16,
            length: crate::mem::sge_total(sges),
        };
        self.tail = self.tail.wrapping_add(1);
        true
    }
    #[inline]
    pub fn front(&self) -> Option<(&RecvWqe, &[Sge])> {
        if self.len() == 0 {
            return None;
        }
        let s = self.slot(self.head);
        let w = &self.wqes[s];
        Some((
            w,
            &self.sges[s * self.max_sge..s * self.max_sge + w.num_sge as usize],
        ))
    }
    #[inline]
    pub fn pop(&mut self) {
        if self.len() > 0 {
            self.head = self.head.wrapping_add(1);
        }
    }
    pub fn clear(&mut self) {
        self.head = 0;
        self.tail = 0;
    }
}

/// A completion queue.
pub(crate) struct CqState {
    pub cap: usize,
    pub q: VecDeque<WorkCompletion>,
    /// `Some(solicited_only)` when armed by `req_notify_cq`.
    pub armed: Option<bool>,
    pub overflowed: bool,
    pub users: u32,
}

impl CqState {
    pub fn new(cap: u32) -> CqState {
        CqState {
            cap: cap as usize,
            q: VecDeque::with_capacity(cap as usize),
            armed: None,
            overflowed: false,
            users: 0,
        }
    }
}

/// A shared receive queue.
pub(crate) struct SrqState {
    pub pd: crate::Pd,
    pub rq: RecvQueue,
    pub limit: u32,
    pub users: u32,
}
