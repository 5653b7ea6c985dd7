//! QP1, the General Services Interface, as kernel rxe runs it for the connection manager:
//! MADs carried as UD SEND_ONLY packets between the QP1s of two ports (rdma-cm-notes §1).
//!
//! The NIC only moves MADs: [`Nic::poll_mad`] hands each accepted one to the host's CM and
//! [`Nic::send_mad`] queues one for transmission. What a MAD means is the CM's business
//! (`roce-cm`); the checks here are rxe's for a packet to QP1 (`rxe_recv.c`: UD opcode class,
//! P_Key, Q_Key `0x80010000`; no source address or PSN check) plus the MAD layer's length rule
//! (a base-version-1 MAD is always 256 bytes: shorter payloads are dropped, longer ones cut).
//! A packet for QP1 on a NIC without GSI ([`NicConfig::gsi`](crate::NicConfig::gsi) false) is
//! `no_qp`, as before.
//!
//! Sends are built as rxe builds them from its GSI QP: opcode 0x64, AckReq set (rxe's rule
//! exempts only UD and UC QPs, and QP1 is GSI), P_Key 0xFFFF, DETH Q_Key `0x80010000` and
//! source QP 1, PSN from one counter per port starting at 0, and UDP source port
//! `0xC000 | hash_32(1, 14)` (0xD872) unless the driver sends everything from one port.
use crate::net::Transmit;
use crate::Instant;
use roce_wire::{bth, deth, mad, opcode::Opcode, Psn};
use std::collections::VecDeque;
use std::net::IpAddr;

/// Received MADs kept for the CM before new ones are dropped (`gsi_dropped`): the kernel's
/// MAD layer queues receives on a QP1 receive queue of 512 WRs.
const RX_QUEUE: usize = 512;
/// MADs waiting for the transmit path.
const TX_QUEUE: usize = 1024;

/// One MAD received on QP1, with what the CM needs to know of its IP header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GsiMad {
    /// IP source (the peer's GID).
    pub src_ip: IpAddr,
    /// IP destination (our GID).
    pub dst_ip: IpAddr,
    /// IPv4 TOS / IPv6 traffic class.
    pub traffic_class: u8,
    /// TTL / hop limit.
    pub hop_limit: u8,
    /// IPv6 flow label (0 over IPv4).
    pub flow_label: u32,
    /// DETH source QP (1 from every kernel CM).
    pub src_qp: u32,
    /// When it was handled.
    pub at: Instant,
    /// The MAD.
    pub bytes: [u8; mad::MAD_LEN],
}

/// Where a MAD goes: the IP header fields of its datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GsiPath {
    /// Our address (the source GID).
    pub src_ip: IpAddr,
    /// The peer's address.
    pub dst_ip: IpAddr,
    /// TOS / traffic class.
    pub traffic_class: u8,
    /// TTL / hop limit (rdma_cm: 64).
    pub hop_limit: u8,
    /// IPv6 flow label.
    pub flow_label: u32,
}

/// QP1's queues.
#[derive(Default)]
pub(crate) struct Gsi {
    rx: VecDeque<GsiMad>,
    tx: VecDeque<(GsiPath, u32, Box<[u8; mad::MAD_LEN]>)>,
    psn: u32,
}

/// Why a packet for QP1 was not handed to the CM.
pub(crate) enum Refused {
    /// Not a UD SEND_ONLY (with or without immediate).
    Opcode,
    /// DETH Q_Key is not the GSI Q_Key.
    Qkey,
    /// Payload shorter than a MAD.
    Truncated,
    /// The receive queue is full.
    Dropped,
}

impl Gsi {
    /// Takes one packet addressed to QP1 (ICRC, TVer, padding and P_Key already checked).
    pub(crate) fn receive(
        &mut self,
        now: Instant,
        meta: &crate::RxMeta,
        p: &roce_wire::transport::Packet<&[u8]>,
    ) -> Result<(), Refused> {
        let op = p.bth().opcode();
        if op != Opcode::UD_SEND_ONLY && op != Opcode::UD_SEND_ONLY_WITH_IMMEDIATE {
            return Err(Refused::Opcode);
        }
        let Some(d) = p.deth() else {
            return Err(Refused::Opcode);
        };
        if d.qkey() != mad::GSI_QKEY {
            return Err(Refused::Qkey);
        }
        let payload = p.payload();
        if payload.len() < mad::MAD_LEN {
            return Err(Refused::Truncated);
        }
        if self.rx.len() >= RX_QUEUE {
            return Err(Refused::Dropped);
        }
        let mut bytes = [0u8; mad::MAD_LEN];
        bytes.copy_from_slice(&payload[..mad::MAD_LEN]);
        self.rx.push_back(GsiMad {
            src_ip: meta.src_ip,
            dst_ip: meta.dst_ip,
            traffic_class: meta.tos,
            hop_limit: meta.ttl,
            flow_label: meta.flow_label,
            src_qp: d.src_qp(),
            at: now,
            bytes,
        });
        Ok(())
    }

    pub(crate) fn poll_mad(&mut self) -> Option<GsiMad> {
        self.rx.pop_front()
    }

    /// Queues a MAD; false when the queue is full.
    pub(crate) fn send(&mut self, path: GsiPath, dest_qp: u32, bytes: &[u8; mad::MAD_LEN]) -> bool {
        if self.tx.len() >= TX_QUEUE {
            return false;
        }
        self.tx.push_back((path, dest_qp, Box::new(*bytes)));
        true
    }

    pub(crate) fn may_transmit(&self) -> bool {
        !self.tx.is_empty()
    }

    /// Writes the next queued MAD's datagram (BTH..ICRC) into `buf`.
    pub(crate) fn transmit(
        &mut self,
        buf: &mut [u8],
        sport: u16,
        ipv4_id: u16,
    ) -> Option<Transmit> {
        let len = bth::HEADER_LEN + deth::HEADER_LEN + mad::MAD_LEN + roce_wire::ICRC_LEN;
        loop {
            let (path, dest_qp, bytes) = self.tx.pop_front()?;
            if buf.len() < len {
                return None;
            }
            let mut b = bth::Repr::new(Opcode::UD_SEND_ONLY, dest_qp, Psn::new(self.psn));
            b.ack_req = true;
            b.emit(&mut bth::Packet::new_unchecked(&mut buf[..bth::HEADER_LEN]));
            deth::Repr {
                qkey: mad::GSI_QKEY,
                resv: 0,
                src_qp: roce_wire::Qpn::new(mad::GSI_QPN),
            }
            .emit(&mut deth::Packet::new_unchecked(
                &mut buf[bth::HEADER_LEN..bth::HEADER_LEN + deth::HEADER_LEN],
            ));
            let at = bth::HEADER_LEN + deth::HEADER_LEN;
            buf[at..at + mad::MAD_LEN].copy_from_slice(&bytes[..]);
            let t = Transmit {
                src_ip: path.src_ip,
                dst_ip: path.dst_ip,
                src_port: sport,
                dst_port: roce_wire::ROCE_V2_UDP_PORT,
                tos: path.traffic_class,
                ttl: path.hop_limit,
                flow_label: path.flow_label,
                ipv4_id,
                len,
            };
            // mixed address families cannot be sealed: such a MAD is dropped
            if crate::net::fill_icrc_of(t.src_ip, t.dst_ip, sport, ipv4_id, &mut buf[..len]) {
                self.psn = (self.psn + 1) & 0xFF_FFFF;
                return Some(t);
            }
        }
    }
}
