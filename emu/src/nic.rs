//! One emulated RDMA device: object tables, the verbs-side API, datagram dispatch (rxe
//! `rxe_recv.c`) and the sans-IO output surface.
//!
//! Call order, as quinn documents it: after any `handle_*` or verbs call, drain
//! [`Nic::poll_transmit`] until it returns `None`, then ask [`Nic::poll_timeout`] when to call
//! [`Nic::handle_timeout`]; completions come out of [`Nic::poll_cq`], async events out of
//! [`Nic::poll_event`], CQ notifications out of [`Nic::poll_comp_event`]. `now` must never
//! decrease between calls.
use crate::counters::Counters;
use crate::mem::MrTable;
use crate::net::{IcrcPolicy, Transmit};
use crate::qp::table::QpTable;
use crate::qp::{Ctx, Qp, Shared};
use crate::queue::{SendWqe, WqeState};
use crate::slab::Slab;
use crate::time::Instant;
use crate::verbs::*;
use crate::{Cq, Error, Pd, Result};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::net::{IpAddr, Ipv6Addr};

/// Device configuration.
#[derive(Clone, Debug)]
pub struct NicConfig {
    /// The device's IP address (GID index 1 for IPv4 as `::ffff:a.b.c.d`, index 0 is link-local).
    pub ip: IpAddr,
    /// MAC address (for the link-local GID, `fe80::` + EUI-64, as rxe shows it).
    pub mac: [u8; 6],
    /// Netdev MTU; the active IB MTU is the largest that fits after 80 header bytes.
    pub netdev_mtu: u32,
    /// What to do when the IPv4 ID of a received datagram is unknown.
    pub icrc_policy: IcrcPolicy,
    /// Seed of the device's generator of memory keys and initial PSNs, for reproducible runs
    /// (tests, the simulated network). Used only when [`entropy`](Self::entropy) is `None`.
    pub seed: u64,
    /// 256 bits from the operating system's entropy (getrandom(2)) for the generator of memory
    /// keys and initial PSNs. A driver on a real network sets it, so that no two devices, runs
    /// or containers share keys or PSNs; the engine does no I/O and never asks for it itself.
    pub entropy: Option<[u8; 32]>,
    /// Device limits (rxe's defaults).
    pub device_attr: DeviceAttr,
    /// IPv4 identification the ICRC of transmitted datagrams covers. 0 by default: what Linux
    /// puts in a DF datagram from an unconnected UDP socket. The driver must send this value.
    pub tx_ipv4_id: u16,
    /// How low an RC requester's limit on unacknowledged PSNs goes after a loss (README,
    /// deviation 12): 32 by default ([`MIN_UNACKED_PSNS`](crate::MIN_UNACKED_PSNS)); 128 keeps
    /// rxe's fixed limit (a driver that answers a NAK within a fraction of a window).
    pub min_unacked_psns: u32,
    /// The UDP source port of every datagram the device sends. `None` (the default): rxe's
    /// per-QP port, `0xC000 | hash_32(qpn, 14)`. A driver that sends everything from one
    /// socket sets that socket's port, so that the ICRC is sealed for the port really used
    /// instead of being patched per packet.
    pub udp_sport: Option<u16>,
    /// Run QP1 (the General Services Interface) for a host connection manager: MADs sent to
    /// QP1 are kept for [`Nic::poll_mad`] and [`Nic::send_mad`] sends them (`crate::gsi`).
    /// Off by default: packets for QP1 are then `no_qp`.
    pub gsi: bool,
    /// The QP numbers this NIC hands out, `[first, end)` (default rxe's 17..0x20000). A device
    /// shared by several processes gives each engine its own range, so that a QPN names one
    /// process and is unique on the device.
    pub qpn_range: (u32, u32),
}

impl NicConfig {
    /// The node GUID rxe gives a device on a netdev with this MAC: its EUI-64 (the U/L bit
    /// flipped, `ff:fe` inserted), read as a big-endian number.
    pub fn node_guid(&self) -> u64 {
        let m = self.mac;
        u64::from_be_bytes([m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]])
    }

    /// Defaults for a device at `ip` (MTU 1500 → IB MTU 1024, as rxe on a standard netdev).
    pub fn new(ip: IpAddr) -> NicConfig {
        NicConfig {
            ip,
            mac: crate::net::synthetic_mac(ip),
            netdev_mtu: 1500,
            icrc_policy: IcrcPolicy::Strict,
            seed: 0x5eed,
            entropy: None,
            device_attr: DeviceAttr::default(),
            tx_ipv4_id: 0,
            min_unacked_psns: crate::MIN_UNACKED_PSNS,
            udp_sport: None,
            gsi: false,
            qpn_range: (MIN_QPN, MAX_QPN),
        }
    }
}

macro_rules! ctx {
    ($s:ident) => {
        Ctx {
            mrs: &$s.mrs,
            s: &mut $s.sh,
        }
    };
}

mod objects;
mod ready;
mod receive;
mod timers;

/// An emulated RoCEv2 device (sans-IO).
pub struct Nic {
    cfg: NicConfig,
    /// Memory keys and initial PSNs (ChaCha12: what one key shows does not predict the next).
    rng: StdRng,
    pds: Slab<()>,
    mrs: MrTable,
    /// CQs, SRQs, AHs, counters, diagnostics, events, GIDs: what the engines may change.
    sh: Shared,
    qps: QpTable,
    next_qpn: u32,
    ready: ready::Ready,
    /// Armed QP timers, earliest first; entries whose QP no longer has that deadline are stale
    /// and dropped lazily (the top is always live after every `&mut self` call).
    timers: BinaryHeap<Reverse<(Instant, u32)>>,
    scratch: Vec<u32>,
    active_mtu: Mtu,
    span: tracing::Span,
    /// QP1, when [`NicConfig::gsi`] is set.
    gsi: Option<Box<crate::gsi::Gsi>>,
}

/// A QP with more to send keeps the transmit path for about this many bytes (its MTU + 32 per
/// packet) before the next ready QP gets its turn (rxe's tasks, too, run a QP's requester many packets at a time). Packet by
/// packet round robin interleaved the messages of QPs that became ready together, so a driver
/// could batch no two consecutive packets into one GSO send (they differ in UDP source port):
/// 64 KiB is one GSO send's worth.
const QP_TURN_BYTES: usize = 64 << 10;

const MIN_QPN: u32 = 17;
const MAX_QPN: u32 = 0x20000;

impl Nic {
    /// A device with `cfg`.
    pub fn new(cfg: NicConfig) -> Nic {
        let m = cfg.mac;
        let ll = Ipv6Addr::from([
            0xfe,
            0x80,
            0,
            0,
            0,
            0,
            0,
            0,
            m[0] ^ 2,
            m[1],
            m[2],
            0xff,
            0xfe,
            m[3],
            m[4],
            m[5],
        ]);
        let gids = vec![ll.octets(), gid_from_ip(cfg.ip)];
        let active_mtu = Mtu::from_netdev_mtu(cfg.netdev_mtu);
        let span = tracing::debug_span!("nic", ip = %cfg.ip);
        Nic {
            rng: match cfg.entropy {
                Some(e) => StdRng::from_seed(e),
                None => StdRng::seed_from_u64(cfg.seed),
            },
            pds: Slab::default(),
            mrs: MrTable::default(),
            sh: Shared {
                cqs: Slab::default(),
                srqs: Slab::default(),
                ahs: Slab::default(),
                mws: Default::default(),
                ctr: Counters::default(),
                diags: Default::default(),
                events: VecDeque::new(),
                comp_events: VecDeque::new(),
                gids,
                port_mtu: active_mtu.bytes(),
                tx_ipv4_id: cfg.tx_ipv4_id,
                ud_tx: None,
                last_tx_qpn: 0,
            },
            qps: QpTable::default(),
            next_qpn: cfg.qpn_range.0.max(2),
            ready: ready::Ready::with_capacity(64),
            timers: BinaryHeap::with_capacity(64),
            scratch: Vec::with_capacity(64),
            active_mtu,
            span,
            gsi: cfg.gsi.then(Default::default),
            cfg,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &NicConfig {
        &self.cfg
    }
    /// `ibv_query_device`.
    pub fn query_device(&self) -> DeviceAttr {
        self.cfg.device_attr
    }
    /// `ibv_query_port` (port 1).
    pub fn query_port(&self) -> PortAttr {
        PortAttr {
            state: 4,
            max_mtu: Mtu::Mtu4096,
            active_mtu: self.active_mtu,
            gid_tbl_len: 1024,
            // IB_PORT_CM_SUP, what rxe reports (RXE_PORT_CAP_FLAGS) in ibv_query_port and sysfs cap_mask
            port_cap_flags: 1 << 16,
            max_msg_sz: 0x80_0000,
            bad_pkey_cntr: self.sh.ctr.bad_pkey as u32,
            qkey_viol_cntr: self.sh.ctr.qkey_violation as u32,
            pkey_tbl_len: 64,
            link_layer: 2,
            phys_state: 5,
        }
    }
    /// An initial PSN (24 bits) for a new QP, from the generator of memory keys
    /// ([`NicConfig::entropy`], or the seed). In verbs the program chooses PSNs; this is for a
    /// verbs layer that picks them on its behalf.
    pub fn random_psn(&mut self) -> u32 {
        self.rng.gen::<u32>() & 0xFF_FFFF
    }
    /// The GID table (index 0 link-local IPv6, index 1 the configured address).
    pub fn gids(&self) -> &[Gid] {
        &self.sh.gids
    }
    /// `ibv_query_gid`: a zero GID for an empty slot, as libibverbs does.
    pub fn query_gid(&self, index: usize) -> Gid {
        self.sh.gids.get(index).copied().unwrap_or([0; 16])
    }
    /// Counters.
    pub fn counters(&self) -> &Counters {
        &self.sh.ctr
    }

    /// The next diagnostic (QP number, cause): each cause is reported once per QP; every
    /// occurrence is counted in the `diag_*` counters.
    pub fn poll_diagnostic(&mut self) -> Option<(u32, crate::diag::Diagnostic)> {
        self.sh.diags.pop()
    }

    /// For the driver: a datagram of QP `qpn` (see [`Nic::last_transmit_qpn`]) to `dst` could
    /// not leave the host. Counted in `diag_unroutable`; reported once per QP and cause.
    pub fn report_unroutable(&mut self, qpn: u32, dst: IpAddr, cause: crate::diag::Unroutable) {
        self.sh
            .diag(qpn, crate::diag::Diagnostic::Unroutable { dst, cause });
    }

    // ---------------------------------------------------------------- QPs

    /// `ibv_create_qp`: returns the QP number (17, 18, … allocated cyclically, as rxe does).
    pub fn create_qp(&mut self, pd: Pd, init: &QpInitAttr) -> Result<u32> {
        self.pds.get(pd.0).ok_or(Error::Invalid)?;
        let d = &self.cfg.device_attr;
        let c = init.cap;
        if c.max_send_wr > d.max_qp_wr
            || c.max_send_sge > d.max_sge
            || c.max_inline_data > d.max_inline_data
            || (init.srq.is_none() && (c.max_recv_wr > d.max_qp_wr || c.max_recv_sge > d.max_sge))
        {
            return Err(Error::Invalid);
        }
        if self.qps.len() >= d.max_qp as usize {
            return Err(Error::NoMem);
        }
        self.sh.cqs.get(init.send_cq.0).ok_or(Error::Invalid)?;
        self.sh.cqs.get(init.recv_cq.0).ok_or(Error::Invalid)?;
        let mut srq_sge = 0;
        if let Some(s) = init.srq {
            let s = self.sh.srqs.get(s.0).ok_or(Error::Invalid)?;
            srq_sge = s.rq.max_sge;
        }
        let (lo, hi) = self.cfg.qpn_range;
        let (lo, hi) = (lo.max(2), hi.min(MAX_QPN).max(lo.max(2) + 1));
        let next = |q: u32| if q + 1 >= hi { lo } else { q + 1 };
        let mut qpn = self.next_qpn.clamp(lo, hi - 1);
        let mut tries = hi - lo;
        while self.qps.contains(qpn) {
            tries -= 1;
            if tries == 0 {
                return Err(Error::NoMem);
            }
            qpn = next(qpn);
        }
        self.next_qpn = next(qpn);
        let sport = self
            .cfg
            .udp_sport
            .unwrap_or_else(|| crate::net::rxe_udp_sport(qpn));
        let mut qp = Qp::new(qpn, pd, init, sport);
        qp.req.floor = self
            .cfg
            .min_unacked_psns
            .clamp(1, crate::qp::MAX_UNACKED_PSNS);
        qp.resp.srq_sges.reserve_exact(srq_sge);
        self.sh.cqs.get_mut(init.send_cq.0).expect("checked").users += 1;
        self.sh.cqs.get_mut(init.recv_cq.0).expect("checked").users += 1;
        if let Some(s) = init.srq {
            self.sh.srqs.get_mut(s.0).expect("checked").users += 1;
        }
        tracing::debug!(parent: &self.span, qpn, qp_type = ?init.qp_type, "create_qp");
        self.qps.insert(qpn, qp);
        Ok(qpn)
    }

    /// `ibv_destroy_qp`.
    pub fn destroy_qp(&mut self, qpn: u32) -> Result<()> {
        let qp = self.qps.remove(qpn).ok_or(Error::NotFound)?;
        for cq in [qp.send_cq, qp.recv_cq] {
            if let Some(c) = self.sh.cqs.get_mut(cq.0) {
                c.users -= 1;
            }
        }
        if let Some(s) = qp.srq.and_then(|s| self.sh.srqs.get_mut(s.0)) {
            s.users -= 1;
        }
        self.sh.diags.forget(qpn);
        self.sh.mws.qp_destroyed(qpn);
        self.clean_timers();
        Ok(())
    }

    /// `ibv_modify_qp` with the attribute-mask rules of C.11.
    pub fn modify_qp(&mut self, qpn: u32, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        let qp = self.qps.get_mut(qpn).ok_or(Error::NotFound)?;
        let before = qp.deadline();
        let mut ctx = ctx!(self);
        let span = self.span.clone();
        let _g = span.enter();
        let r = qp.modify(&mut ctx, attr, mask, Mtu::Mtu4096);
        if r.is_ok() && !qp.in_ready {
            qp.in_ready = true;
            self.ready.push_back(qpn);
        }
        self.sync_timer(qpn, before);
        r
    }

    /// `ibv_query_qp`.
    pub fn query_qp(&self, qpn: u32) -> Result<QpAttr> {
        self.qps.get(qpn).map(|q| q.query()).ok_or(Error::NotFound)
    }

    /// Per-QP memory: (state bytes, queue storage bytes).
    pub fn qp_memory(&self, qpn: u32) -> Option<(usize, usize)> {
        self.qps
            .get(qpn)
            .map(|q| (q.state_bytes(), q.queue_bytes()))
    }

    /// The requester's current limit on unacknowledged PSNs (RC): 128 as rxe, halved when a
    /// retry starts, grown back on acknowledgements (emu README, deviations).
    pub fn qp_unacked_limit(&self, qpn: u32) -> Option<u32> {
        self.qps.get(qpn).map(|q| q.req.window)
    }

    // ---------------------------------------------------------------- data path

    /// `ibv_post_send` (one WR; the caller walks `next`). With `SendFlags::INLINE`, the data is
    /// copied now from `inline_data` (or, when `None`, gathered through the SGEs' keys).
    pub fn post_send(&mut self, qpn: u32, wr: &SendWr<'_>) -> Result<()> {
        self.post_send_inline(qpn, wr, None)
    }

    /// [`Nic::post_send`] with explicit inline bytes (what a C caller's pointers hold).
    pub fn post_send_inline(
        &mut self,
        qpn: u32,
        wr: &SendWr<'_>,
        inline_data: Option<&[u8]>,
    ) -> Result<()> {
        let qp = self.qps.get_mut(qpn).ok_or(Error::NotFound)?;
        if qp.state == QpState::Reset {
            let d = crate::diag::Diagnostic::WrongState {
                verb: "ibv_post_send",
                state: qp.state,
            };
            self.sh.diags.report(&mut self.sh.ctr, qpn, d);
            return Err(Error::Invalid);
        }
        let ok_op = match qp.qp_type {
            QpType::Ud => matches!(wr.opcode, WrOpcode::Send | WrOpcode::SendWithImm),
            QpType::Uc => matches!(
                wr.opcode,
                WrOpcode::Send
                    | WrOpcode::SendWithImm
                    | WrOpcode::RdmaWrite
                    | WrOpcode::RdmaWriteWithImm
                    | WrOpcode::BindMw
            ),
            QpType::Rc => true,
        };
        if !ok_op || wr.sg_list.len() > qp.cap.max_send_sge as usize {
            return Err(Error::Invalid);
        }
        let local = wr.opcode.is_local();
        // FLUSH and ATOMIC WRITE carry no gather list: a length and an 8-byte value
        let no_sges = local || wr.opcode.is_flush_or_atomic_write();
        let inline = wr.send_flags.contains(SendFlags::INLINE)
            && !wr.opcode.takes_rd_atomic_credit()
            && !local;
        let length: u64 = match (inline, inline_data) {
            (true, Some(d)) => d.len() as u64,
            _ if wr.opcode == WrOpcode::Flush => wr.flush.length as u64,
            _ => crate::mem::sge_total(wr.sg_list),
        };
        if wr.opcode.is_atomic() && (wr.remote_addr & 7 != 0 || length < 8) {
            return Err(Error::Invalid);
        }
        if inline && length > qp.cap.max_inline_data as u64 {
            return Err(Error::Invalid);
        }
        if length > 1 << 31 {
            return Err(Error::Invalid);
        }
        let av = if qp.qp_type == QpType::Ud {
            let ah = wr.ah.ok_or(Error::Invalid)?;
            let (pd, a) = *self.sh.ahs.get(ah.0).ok_or(Error::Invalid)?;
            if pd != qp.pd {
                return Err(Error::Invalid);
            }
            Some(a)
        } else {
            None
        };
        if qp.sq.len() >= qp.sq.cap() || qp.cap.max_send_wr == 0 {
            return Err(Error::NoMem);
        }
        let t = qp.sq.tail;
        let slot = qp.sq.slot(t);
        if inline {
            let dst = &mut qp.sq.inline
                [slot * qp.sq.max_inline..slot * qp.sq.max_inline + length as usize];
            match inline_data {
                Some(d) => dst.copy_from_slice(d),
                None => self
                    .mrs
                    .gather(qp.pd, wr.sg_list, 0, dst)
                    .map_err(|_| Error::Invalid)?,
            }
        } else {
            let ms = qp.sq.max_sge;
            crate::mem::copy_sges(
                &mut qp.sq.sges[slot * ms..slot * ms + wr.sg_list.len()],
                wr.sg_list,
            );
        }
        let length = if wr.opcode.is_atomic() || wr.opcode == WrOpcode::AtomicWrite {
            8
        } else if local {
            0
        } else {
            length as u32
        };
        qp.sq.wqes[slot] = SendWqe {
            wr_id: wr.wr_id,
            opcode: wr.opcode,
            flags: wr.send_flags,
            imm: wr.imm_data,
            inv_rkey: wr.invalidate_rkey,
            remote_addr: wr.remote_addr,
            rkey: wr.rkey,
            compare_add: wr.compare_add,
            swap: wr.swap,
            av,
            remote_qpn: wr.remote_qpn,
            remote_qkey: wr.remote_qkey,
            num_sge: if inline || no_sges {
                0
            } else {
                wr.sg_list.len() as u16
            },
            inline,
            length,
            state: WqeState::Posted,
            ..Default::default()
        };
        if wr.opcode == WrOpcode::Flush {
            // the FETH word, in a field a FLUSH has no other use for
            let feth = roce_wire::feth::Repr::new(wr.flush.placement_type, wr.flush.level);
            qp.sq.wqes[slot].imm = feth.to_raw();
        }
        if wr.opcode == WrOpcode::BindMw {
            let w = &mut qp.sq.wqes[slot];
            w.inv_rkey = wr.bind.mw_rkey;
            w.rkey = wr.bind.rkey;
            w.imm = wr.bind.mr_lkey;
            w.remote_addr = wr.bind.addr;
            w.compare_add = wr.bind.length;
            w.swap = wr.bind.access.0 as u64;
        }
        qp.sq.tail = t.wrapping_add(1);
        if qp.state == QpState::Err {
            let mut ctx = ctx!(self);
            qp.flush(&mut ctx);
        } else if !qp.in_ready {
            qp.in_ready = true;
            self.ready.push_back(qpn);
        }
        Ok(())
    }

    /// `ibv_post_recv`.
    pub fn post_recv(&mut self, qpn: u32, wr: &RecvWr<'_>) -> Result<()> {
        let qp = self.qps.get_mut(qpn).ok_or(Error::NotFound)?;
        if qp.state == QpState::Reset {
            let d = crate::diag::Diagnostic::WrongState {
                verb: "ibv_post_recv",
                state: qp.state,
            };
            self.sh.diags.report(&mut self.sh.ctr, qpn, d);
            return Err(Error::Invalid);
        }
        let rq = qp.rq.as_mut().ok_or(Error::Invalid)?;
        if wr.sg_list.len() > rq.max_sge || rq.len() >= qp.cap.max_recv_wr {
            return Err(if wr.sg_list.len() > rq.max_sge {
                Error::Invalid
            } else {
                Error::NoMem
            });
        }
        if !rq.push(wr.wr_id, wr.sg_list) {
            return Err(Error::NoMem);
        }
        if qp.state == QpState::Err {
            let mut ctx = ctx!(self);
            qp.flush(&mut ctx);
        }
        Ok(())
    }

    /// The device span, unless tracing had no subscriber for it (then entering it is a no-op
    /// and the clone per datagram is wasted work).
    #[inline]
    fn live_span(&self) -> Option<tracing::Span> {
        (!self.span.is_disabled()).then(|| self.span.clone())
    }

    /// The IPv4 identification the ICRCs of the next datagrams cover (initially
    /// [`NicConfig::tx_ipv4_id`]; each [`Transmit`] says what it was sealed with). For a driver
    /// that knows where the kernel puts the next packet: segment *k* of a GSO send from an
    /// unconnected DF socket carries ID *k*, so sealing it for *k* saves patching its ICRC.
    #[inline]
    pub fn set_tx_ipv4_id(&mut self, id: u16) {
        self.sh.tx_ipv4_id = id;
    }

    /// The QP that produced the datagram [`Nic::poll_transmit`] returned last (its request or
    /// its response), for a driver that reports a datagram it could not send.
    #[inline]
    pub fn last_transmit_qpn(&self) -> u32 {
        self.sh.last_tx_qpn
    }

    /// False when [`Nic::poll_transmit`] would return `None` at once (no QP is ready to
    /// send); lets a driver skip preparing a buffer.
    #[inline]
    pub fn may_transmit(&self) -> bool {
        !self.ready.is_empty() || self.gsi.as_ref().is_some_and(|g| g.may_transmit())
    }

    /// The next MAD QP1 received (`NicConfig::gsi`), for the host's connection manager.
    pub fn poll_mad(&mut self) -> Option<crate::gsi::GsiMad> {
        self.gsi.as_mut()?.poll_mad()
    }

    /// Queues `mad` for QP `dest_qp` (1 for a CM) of the port at `path.dst_ip`, sent from QP1
    /// as rxe sends MADs. False when the NIC has no GSI or its send queue is full (counted in
    /// `gsi_dropped`).
    pub fn send_mad(
        &mut self,
        path: crate::gsi::GsiPath,
        dest_qp: u32,
        mad: &[u8; roce_wire::mad::MAD_LEN],
    ) -> bool {
        let ok = self
            .gsi
            .as_mut()
            .is_some_and(|g| g.send(path, dest_qp, mad));
        if !ok {
            self.sh.ctr.gsi_dropped += 1;
        }
        ok
    }

    /// QP1's next datagram, once no other QP has anything to send (MADs are rare; a
    /// connection's first data follows its RTU anyway).
    #[cold]
    fn gsi_transmit(&mut self, buf: &mut [u8]) -> Option<Transmit> {
        let g = self.gsi.as_mut()?;
        let sport = self
            .cfg
            .udp_sport
            .unwrap_or_else(|| crate::net::rxe_udp_sport(roce_wire::mad::GSI_QPN));
        let t = g.transmit(buf, sport, self.sh.tx_ipv4_id)?;
        self.sh.last_tx_qpn = roce_wire::mad::GSI_QPN;
        self.sh.ctr.gsi_sent += 1;
        Some(t)
    }

    /// Writes the next datagram (BTH..ICRC) into `buf` and returns where it goes. QPs are served
    /// round robin; a QP's responses go before its requests. `buf` should hold 4096 + 64 bytes.
    #[inline]
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        if self.ready.is_empty() {
            return self.gsi_transmit(buf);
        }
        // The record is built here, in the caller, from the QP's copy (written long before):
        // see `qp::requester::seal`.
        let (qpn, len) = self.poll_ready(now, buf)?;
        self.sh.last_tx_qpn = qpn;
        let qp = self.qps.get(qpn)?;
        let t = if qp.qp_type == QpType::Ud {
            self.sh.ud_tx.as_ref()?
        } else {
            qp.tx.as_ref()?
        };
        Some(Transmit {
            len: len as usize,
            ipv4_id: self.sh.tx_ipv4_id,
            ..*t
        })
    }

    /// [`Nic::poll_transmit`] with a QP in the ready queue (kept out of line so the common
    /// "nothing to send" answer costs the caller a compare, not a call frame): the QP that
    /// sent and the datagram's length, small enough to come back in registers.
    #[inline(never)]
    fn poll_ready(&mut self, now: Instant, buf: &mut [u8]) -> Option<(u32, u32)> {
        if self.span.is_disabled() {
            self.transmit_next(now, buf)
        } else {
            let span = self.span.clone();
            let _d = span.enter();
            self.transmit_next(now, buf)
        }
    }

    #[inline(always)]
    fn transmit_next(&mut self, now: Instant, buf: &mut [u8]) -> Option<(u32, u32)> {
        while let Some(qpn) = self.ready.front() {
            let Some(qp) = self.qps.get_mut(qpn) else {
                self.ready.pop_front();
                continue;
            };
            if qp.state == QpState::Reset || !qp.may_transmit() {
                qp.in_ready = false;
                self.ready.pop_front();
                continue;
            }
            let before = qp.deadline();
            let mut ctx = ctx!(self);
            // (responses first; an empty job queue needs no call to find out)
            let mut t = None;
            if !qp.resp.jobs.is_empty() {
                t = qp.responder_next(&mut ctx, buf);
            }
            if t.is_none() {
                t = qp.requester_next(&mut ctx, now, buf);
            }
            // Back in line (at the end: round robin) only with more to send, after its turn
            // (`QP_TURN_BYTES`): a QP with nothing left would be dropped by the next poll anyway
            // (any input that gives it work again puts it back), so the driver's final poll
            // costs a compare, not a QP visit.
            let more = t.is_some() && qp.may_transmit();
            let timer_moved = qp.deadline() != before;
            if more {
                self.ready.served(qp.mtu, QP_TURN_BYTES);
            } else {
                qp.in_ready = false;
                self.ready.pop_front();
            }
            if timer_moved {
                self.sync_timer(qpn, before);
            }
            if let Some(len) = t {
                self.sh.ctr.sent_pkts += 1;
                return Some((qpn, len as u32));
            }
        }
        None
    }

    /// Next asynchronous event (`ibv_get_async_event`).
    pub fn poll_event(&mut self) -> Option<AsyncEvent> {
        self.sh.events.pop_front()
    }

    /// Next completion-channel notification (`ibv_get_cq_event`).
    pub fn poll_comp_event(&mut self) -> Option<Cq> {
        self.sh.comp_events.pop_front()
    }
}
