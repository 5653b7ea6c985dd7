//! Helpers of the hostile-peer tests: ICRC-valid injection into one NIC of a connected pair,
//! draining what it answers, request builders, and reviving an errored QP.
#![allow(dead_code)]
use crate::common::*;
use roce_emu::sim::LinkConfig;
use roce_emu::*;
use roce_wire::transport::{Packet, Repr};
use roce_wire::{aeth, atomic_eth, bth, reth, Opcode, Psn};
use std::net::IpAddr;

pub const ACK: u8 = aeth::Syndrome::ACK.to_byte();
pub const NAK_SEQ: u8 = aeth::Syndrome::Nak(aeth::NakCode::PsnSeqError).to_byte();
pub const NAK_INV: u8 = aeth::Syndrome::Nak(aeth::NakCode::InvalidRequest).to_byte();
pub const NAK_ACC: u8 = aeth::Syndrome::Nak(aeth::NakCode::RemoteAccessError).to_byte();

pub fn pair(seed: u64) -> Pair {
    Pair::new(seed, LinkConfig::ideal(), Opts::default())
}

pub fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Emits `r` with `payload`, seals it as sent `src → dst` and hands it to NIC `to`.
pub fn inject_raw(p: &mut Pair, to: usize, src: IpAddr, dst: IpAddr, r: &Repr, payload: &[u8]) {
    let mut buf = vec![0u8; r.buffer_len()];
    r.emit(&mut Packet::new_unchecked(&mut buf[..]));
    let h = r.header_len();
    buf[h..h + payload.len()].copy_from_slice(payload);
    let t = Transmit {
        src_ip: src,
        dst_ip: dst,
        src_port: 0xC123,
        dst_port: 4791,
        tos: 0,
        ttl: 64,
        flow_label: 0,
        ipv4_id: 0,
        len: buf.len(),
    };
    assert!(roce_emu::net::seal(&t, &mut buf));
    let meta = RxMeta {
        src_ip: src,
        dst_ip: dst,
        src_port: 0xC123,
        ipv4_id: Some(0),
        tos: 0,
        ttl: 64,
        flow_label: 0,
    };
    let now = p.net.now;
    p.net.nics[to].handle_datagram(now, &meta, &buf);
}

/// A request to B from A's address.
pub fn to_b(p: &mut Pair, r: &Repr, payload: &[u8]) {
    let (a, b, i) = (p.a.ip, p.b.ip, p.b.idx);
    inject_raw(p, i, a, b, r, payload);
}

/// A response to A from B's address.
pub fn to_a(p: &mut Pair, r: &Repr, payload: &[u8]) {
    let (a, b, i) = (p.a.ip, p.b.ip, p.a.idx);
    inject_raw(p, i, b, a, r, payload);
}

/// Everything NIC `i` wants to send now, parsed.
pub fn sent(p: &mut Pair, i: usize) -> Vec<Repr> {
    let mut v = Vec::new();
    let mut buf = vec![0u8; 8192];
    let now = p.net.now;
    while let Some(t) = p.net.nics[i].poll_transmit(now, &mut buf) {
        v.push(Repr::parse(&Packet::new_checked(&buf[..t.len]).unwrap()).unwrap());
    }
    v
}

/// What these tests compare of a packet: its opcode, PSN, AETH syndrome (a byte, `None`
/// without an AETH) and payload length, as [`packet_text`] renders them, e.g.
/// `RC ACKNOWLEDGE psn=256 AETH(NAK RemoteAccessError) len=0`.
pub fn pkt(op: Opcode, psn: u32, syn: Option<u8>, len: usize) -> String {
    let syn = syn.map(aeth::Syndrome::from_byte);
    packet_text(op, psn, false, syn, None, Some(len))
}

/// [`pkt`] of a parsed packet.
pub fn line(r: &Repr) -> String {
    let syn = r.aeth.map(|a| a.syndrome.to_byte());
    pkt(r.bth.opcode, r.bth.psn.value(), syn, r.payload_len)
}

/// [`line`]s of everything NIC `i` wants to send now.
pub fn out(p: &mut Pair, i: usize) -> Vec<String> {
    sent(p, i).iter().map(line).collect()
}

pub fn out_b(p: &mut Pair) -> Vec<String> {
    let i = p.b.idx;
    out(p, i)
}

/// Everything B wants to send now, parsed.
pub fn sent_b(p: &mut Pair) -> Vec<Repr> {
    let i = p.b.idx;
    sent(p, i)
}

/// The single ACK or NAK at `psn` with syndrome `syn`, as [`out`] renders it.
pub fn nak(psn: u32, syn: u8) -> Vec<String> {
    vec![pkt(Opcode::RC_ACKNOWLEDGE, psn, Some(syn), 0)]
}

pub fn req(p: &Pair, op: Opcode, psn: u32) -> Repr {
    let mut b = bth::Repr::new(op, p.b.qpn, Psn::new(psn));
    b.ack_req = true;
    Repr::new(b)
}

pub fn write(p: &Pair, psn: u32, va: u64, rkey: u32, len: usize) -> Repr {
    let mut r = req(p, Opcode::RC_RDMA_WRITE_ONLY, psn);
    r.reth = Some(reth::Repr {
        va,
        rkey,
        dma_len: len as u32,
    });
    r.set_payload_len(len);
    r
}

pub fn read(p: &Pair, psn: u32, va: u64, rkey: u32, len: u32) -> Repr {
    let mut r = req(p, Opcode::RC_RDMA_READ_REQUEST, psn);
    r.reth = Some(reth::Repr {
        va,
        rkey,
        dma_len: len,
    });
    r
}

pub fn atomic(p: &Pair, op: Opcode, psn: u32, va: u64, rkey: u32) -> Repr {
    let mut r = req(p, op, psn);
    r.atomic_eth = Some(atomic_eth::Repr {
        va,
        rkey,
        swap_add: 0x1111,
        compare: 0,
    });
    r
}

/// Puts B's QP back to RTS with RQ PSN 0x100 after a NAK moved it to ERR.
pub fn revive_b(p: &mut Pair) {
    let (o, q) = (p.opts, p.b.qpn);
    let reset = QpAttr {
        qp_state: QpState::Reset,
        ..Default::default()
    };
    p.nic_b().modify_qp(q, &reset, QpAttrMask::STATE).unwrap();
    let (bs, as_) = (side_copy(&p.b), side_copy(&p.a));
    let i = p.b.idx;
    connect(&mut p.net.nics[i], &bs, &as_, &o, o.b_psn, o.a_psn);
    Pair::poll(&mut p.net.nics[i], bs.rcq);
}

pub fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

pub fn side_copy(s: &Side) -> Side {
    Side {
        idx: s.idx,
        ip: s.ip,
        pd: s.pd,
        scq: s.scq,
        rcq: s.rcq,
        qpn: s.qpn,
        mem: s.mem.clone(),
        mr: s.mr,
    }
}

/// A posts `wr` and transmits it (the packets go nowhere); returns what A sent.
pub fn a_sends(p: &mut Pair, wr: SendWr<'_>) -> Vec<Repr> {
    p.post_a(wr);
    let i = p.a.idx;
    sent(p, i)
}

/// A response to A's QP.
pub fn ack_to_a(p: &Pair, op: Opcode, psn: u32, syn: u8) -> Repr {
    let mut r = Repr::new(bth::Repr::new(op, p.a.qpn, Psn::new(psn)));
    r.aeth = Some(aeth::Repr {
        syndrome: aeth::Syndrome::from_byte(syn),
        msn: 1,
    });
    r
}
