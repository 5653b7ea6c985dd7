//! Request headers written straight from the send WQE at the offsets the opcode table fixes:
//! the same bytes `roce_wire::transport::Repr::emit_into` writes for the `Repr` the requester
//! would build (tested below against it), without assembling a `Repr` per packet.
use crate::queue::SendWqe;
use crate::verbs::WrOpcode;
use roce_wire::opcode::hdr_len;
use roce_wire::transport::pad_for;
use roce_wire::{atomic_eth, bth, deth, feth, ieth, immdt, reth};
use roce_wire::{OpFlags, Opcode, Psn, ICRC_LEN};

/// Everything the headers of one request packet hold.
pub(crate) struct RequestHeaders<'a> {
    pub op: Opcode,
    pub se: bool,
    pub ack_req: bool,
    pub dest_qp: u32,
    pub psn: Psn,
    /// This QP (the DETH's source QP).
    pub src_qp: u32,
    pub wqe: &'a SendWqe,
    /// Bytes of the message not yet sent (the RETH's DMA length).
    pub resid: u32,
    pub payload: u32,
}

impl RequestHeaders<'_> {
    /// Writes BTH, extension headers and zero pad into the front of `buf`; returns the packet
    /// length including the (unwritten) payload and ICRC, or `None` (nothing written) when
    /// `buf` is shorter.
    #[inline]
    pub fn emit(&self, buf: &mut [u8]) -> Option<usize> {
        let info = self.op.info();
        let f = info.flags;
        let hdr = info.hdr_len as usize;
        let payload = self.payload as usize;
        let pad = pad_for(payload);
        let len = hdr + payload + pad as usize + ICRC_LEN;
        let b = buf.get_mut(..len)?;
        let w = self.wqe;
        // the BTH in one 8-byte and one 4-byte store (see `bth::fast`), each extension header
        // by its own module
        let h: &mut [u8; hdr_len::BTH] = (&mut b[..hdr_len::BTH]).try_into().ok()?;
        bth::fast::Words::new(
            self.op,
            self.se,
            pad,
            roce_wire::DEFAULT_PKEY,
            self.dest_qp,
            self.ack_req,
            self.psn,
        )
        .store(h);
        let mut at = hdr_len::BTH;
        if f.contains(OpFlags::DETH) {
            deth::Repr {
                qkey: w.remote_qkey,
                resv: 0,
                src_qp: roce_wire::Qpn::new(self.src_qp),
            }
            .emit(&mut deth::Packet::new_unchecked(&mut b[at..]));
            at += hdr_len::DETH;
        }
        if f.contains(OpFlags::FETH) {
            // a FLUSH WQE keeps its FETH word in `imm`
            feth::Repr::from_raw(w.imm).emit(&mut feth::Packet::new_unchecked(&mut b[at..]));
            at += hdr_len::FETH;
        }
        if f.contains(OpFlags::RETH) {
            reth::Repr {
                va: w.remote_addr.wrapping_add(w.sent as u64),
                rkey: w.rkey,
                dma_len: self.resid,
            }
            .emit(&mut reth::Packet::new_unchecked(&mut b[at..]));
            at += hdr_len::RETH;
        }
        if f.contains(OpFlags::ATMETH) {
            let (swap_add, compare) = match w.opcode {
                WrOpcode::AtomicCmpAndSwp => (w.swap, w.compare_add),
                _ => (w.compare_add, 0),
            };
            atomic_eth::Repr {
                va: w.remote_addr,
                rkey: w.rkey,
                swap_add,
                compare,
            }
            .emit(&mut atomic_eth::Packet::new_unchecked(&mut b[at..]));
            at += hdr_len::ATMETH;
        }
        if f.contains(OpFlags::IMMDT) {
            immdt::Packet::new_unchecked(&mut b[at..]).set_imm(w.imm);
            at += hdr_len::IMMDT;
        }
        if f.contains(OpFlags::IETH) {
            ieth::Packet::new_unchecked(&mut b[at..]).set_rkey(w.inv_rkey);
        }
        if pad != 0 {
            b[hdr + payload..hdr + payload + pad as usize].fill(0);
        }
        Some(len)
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::verbs::SendFlags;
    use roce_wire::transport::Repr;
    use roce_wire::Transport;

    /// What the requester built before: a `Repr` emitted by `roce_wire`.
    fn via_repr(h: &RequestHeaders<'_>, buf: &mut [u8]) -> Option<usize> {
        let w = h.wqe;
        let flags = h.op.flags();
        let mut b = bth::Repr::new(h.op, h.dest_qp, h.psn);
        b.se = h.se;
        b.ack_req = h.ack_req;
        let mut r = Repr::new(b);
        if flags.contains(OpFlags::FETH) {
            r.feth = Some(roce_wire::feth::Repr::from_raw(w.imm));
        }
        if flags.contains(OpFlags::RETH) {
            r.reth = Some(reth::Repr {
                va: w.remote_addr.wrapping_add(w.sent as u64),
                rkey: w.rkey,
                dma_len: h.resid,
            });
        }
        if flags.contains(OpFlags::ATMETH) {
            let (swap_add, compare) = match w.opcode {
                WrOpcode::AtomicCmpAndSwp => (w.swap, w.compare_add),
                _ => (w.compare_add, 0),
            };
            r.atomic_eth = Some(atomic_eth::Repr {
                va: w.remote_addr,
                rkey: w.rkey,
                swap_add,
                compare,
            });
        }
        if flags.contains(OpFlags::IMMDT) {
            r.immdt = Some(immdt::Repr { imm: w.imm });
        }
        if flags.contains(OpFlags::IETH) {
            r.ieth = Some(ieth::Repr { rkey: w.inv_rkey });
        }
        if flags.contains(OpFlags::DETH) {
            r.deth = Some(deth::Repr {
                qkey: w.remote_qkey,
                resv: 0,
                src_qp: roce_wire::Qpn::new(h.src_qp),
            });
        }
        r.set_payload_len(h.payload as usize);
        r.emit_into(buf)
    }

    #[test]
    fn same_bytes_as_repr_emit_for_every_request_opcode() {
        let ops = [
            WrOpcode::Flush,
            WrOpcode::Send,
            WrOpcode::AtomicCmpAndSwp,
            WrOpcode::AtomicFetchAndAdd,
            WrOpcode::RdmaWriteWithImm,
        ];
        let mut n = 0;
        for t in [Transport::Rc, Transport::Uc, Transport::Ud] {
            for low in 0..0x20u8 {
                let op = Opcode::with_transport(t, low);
                // what `next_opcode` produces: SEND/WRITE/READ/atomics/SEND with invalidate
                // ... and FLUSH, ATOMIC WRITE
                let requester_op =
                    matches!(low, 0x00..=0x0C | 0x13 | 0x14 | 0x16 | 0x17 | 0x1C | 0x1D);
                if !requester_op || !op.flags().contains(OpFlags::REQ) || op.info().hdr_len == 0 {
                    continue;
                }
                for (k, payload) in [0u32, 1, 2, 3, 4, 61, 64].into_iter().enumerate() {
                    let wqe = SendWqe {
                        opcode: ops[k % ops.len()],
                        flags: SendFlags::SOLICITED,
                        imm: 0x1122_3344,
                        inv_rkey: 0x5566_7788,
                        remote_addr: 0x0102_0304_0506_0708,
                        rkey: 0x99AA_BBCC,
                        compare_add: 0x1111_2222_3333_4444,
                        swap: 0x5555_6666_7777_8888,
                        remote_qkey: 0x8000_0011,
                        sent: 4096,
                        ..Default::default()
                    };
                    let h = RequestHeaders {
                        op,
                        se: k & 1 == 0,
                        ack_req: k & 2 == 0,
                        dest_qp: 0x12_3456 | (k as u32) << 24,
                        psn: Psn::new(0xFF_FFF0 + k as u32),
                        src_qp: 0x11,
                        wqe: &wqe,
                        resid: 100_000 + k as u32,
                        payload,
                    };
                    let (mut a, mut b) = ([0xEEu8; 200], [0xEEu8; 200]);
                    let la = h.emit(&mut a);
                    let lb = via_repr(&h, &mut b);
                    assert_eq!(la, lb, "{op:?} payload {payload}");
                    let l = la.unwrap();
                    let hl = op.info().hdr_len as usize;
                    // headers and pad equal; the payload bytes are the caller's
                    assert_eq!(a[..hl], b[..hl], "{op:?}");
                    assert_eq!(
                        a[hl + payload as usize..l - 4],
                        b[hl + payload as usize..l - 4]
                    );
                    assert_eq!(h.emit(&mut a[..l - 1]), None);
                    n += 1;
                }
            }
        }
        assert!(n > 100, "{n}");
    }
}
