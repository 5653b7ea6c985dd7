//! The real backend: the verbs of [`DeviceContext`] over the roce runtime
//! ([`roce_provider::runtime::Device`], one `emu::Nic` on one UDP socket).
//!
//! * The runtime device is opened lazily, on the first verb that needs the engine (`alloc_pd`,
//!   `create_cq`, …), so `ibv_devices`/`ibv_devinfo` never bind the UDP port and can run next
//!   to a program using the same address. All contexts of a process on one address share one
//!   runtime device (a second bind of `IP:4791` would fail).
//! * Settings: `ROCE_IP`, `ROCE_DEV_NAME`, `ROCE_MTU` as the rest of the library reads them
//!   (`config.rs`), everything else (`ROCE_PCAP`, `ROCE_LOSS`, `ROCE_LOG`, …) from
//!   [`roce_provider::runtime::Config::from_env`].
//! * Completion channels: the runtime's comp handler of a CQ calls its [`CqNotifier`].
//!   Async events: QP/CQ/SRQ events go to the [`AsyncEventSink`] of the context that created
//!   the object, with the cookie the C layer gave at creation (the runtime device has one
//!   async handler, which forwards to every context on it).

#![forbid(unsafe_code)]

use crate::abi::*;
use crate::backend::*;
use crate::config::DeviceConfig;
use roce_emu as emu;
use roce_provider::runtime::{Config, Device};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// The backend of the process.
pub struct Engine;

/// The contexts using one runtime device, for its async events: each event goes to the
/// context whose cookies name the object (one device has one async handler, and every context
/// on it has objects of its own).
#[derive(Default)]
struct Listeners(Mutex<Vec<(Weak<Mutex<Cookies>>, AsyncEventSink)>>);

impl Listeners {
    fn add(&self, cookies: &Arc<Mutex<Cookies>>, sink: AsyncEventSink) {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        g.retain(|(c, _)| c.strong_count() > 0);
        g.push((Arc::downgrade(cookies), sink));
    }

    /// Runs in the runtime's async handler (engine lock held; never calls back into it).
    fn dispatch(&self, ev: emu::AsyncEvent) {
        let g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for (cookies, sink) in g.iter() {
            let Some(cookies) = cookies.upgrade() else {
                continue;
            };
            let c = cookies.lock().unwrap_or_else(|e| e.into_inner());
            match ev {
                emu::AsyncEvent::Qp { qpn, event } => {
                    if let Some(&k) = c.qps.get(&qpn) {
                        sink.post(AsyncElement::Qp(k), event as u32);
                    }
                }
                emu::AsyncEvent::CqErr(cq) => {
                    if let Some(&k) = c.cqs.get(&cq.0) {
                        sink.post(AsyncElement::Cq(k), IBV_EVENT_CQ_ERR);
                    }
                }
                emu::AsyncEvent::SrqLimitReached(s) => {
                    if let Some(&k) = c.srqs.get(&s.0) {
                        sink.post(AsyncElement::Srq(k), IBV_EVENT_SRQ_LIMIT_REACHED);
                    }
                }
            }
        }
    }
}

/// Runtime devices of this process by address (shared by all contexts on that address), with
/// the contexts listening to their async events.
#[allow(clippy::type_complexity)]
static DEVICES: Mutex<Vec<(IpAddr, Weak<Device>, Arc<Listeners>)>> = Mutex::new(Vec::new());

fn open_shared(cfg: &DeviceConfig) -> Result<(Arc<Device>, Arc<Listeners>), Errno> {
    let mut g = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
    g.retain(|(_, w, _)| w.strong_count() > 0);
    if let Some(d) = g
        .iter()
        .find(|(ip, ..)| *ip == cfg.ip)
        .and_then(|(_, w, l)| Some((w.upgrade()?, l.clone())))
    {
        return Ok(d);
    }
    let mut rc = Config::from_env();
    rc.ip = cfg.ip;
    rc.name = cfg.name.clone();
    rc.mtu = 128 << cfg.active_mtu;
    match Device::open(rc) {
        Ok(d) => {
            let d = Arc::new(d);
            let l = Arc::new(Listeners::default());
            let to = l.clone();
            d.set_async_handler(Some(Arc::new(move |ev| to.dispatch(ev))));
            g.push((cfg.ip, Arc::downgrade(&d), l.clone()));
            Ok((d, l))
        }
        Err(e) => {
            crate::log::warn(&format!("{e}"));
            Err(Errno(e.raw_os_error().unwrap_or(libc::ENODEV)))
        }
    }
}

/// The runtime device of `cfg`'s address, shared with every context on it (for RDMA CM).
pub fn runtime_device(cfg: &DeviceConfig) -> Result<Arc<Device>, Errno> {
    open_shared(cfg).map(|(d, _)| d)
}

/// Writes `a` into the C struct (`ibv_query_qp`, `rdma_init_qp_attr`).
pub fn qp_attr_to_c(a: &emu::QpAttr, attr: &mut ibv_qp_attr) {
    attr.qp_state = a.qp_state as u32;
    attr.cur_qp_state = a.cur_qp_state as u32;
    attr.path_mtu = a.path_mtu as u32;
    attr.qkey = a.qkey;
    attr.rq_psn = a.rq_psn;
    attr.sq_psn = a.sq_psn;
    attr.dest_qp_num = a.dest_qp_num;
    attr.qp_access_flags = a.qp_access_flags.bits();
    attr.cap = cap_from_emu(&a.cap);
    attr.ah_attr = ah_from_emu(&a.ah_attr);
    attr.pkey_index = a.pkey_index;
    attr.en_sqd_async_notify = a.en_sqd_async_notify as u8;
    attr.sq_draining = a.sq_draining as u8;
    attr.max_rd_atomic = a.max_rd_atomic;
    attr.max_dest_rd_atomic = a.max_dest_rd_atomic;
    attr.min_rnr_timer = a.min_rnr_timer;
    attr.port_num = a.port_num;
    attr.timeout = a.timeout;
    attr.retry_cnt = a.retry_cnt;
    attr.rnr_retry = a.rnr_retry;
}

#[derive(Default)]
struct Cookies {
    qps: HashMap<u32, u64>,
    cqs: HashMap<u32, u64>,
    srqs: HashMap<u32, u64>,
    /// Type and capacities of each QP (they never change), for [`check_send`].
    shapes: HashMap<u32, (emu::QpType, emu::QpCap)>,
}

/// One `ibv_context` on the runtime.
pub struct EngineContext {
    cfg: DeviceConfig,
    events: AsyncEventSink,
    dev: OnceLock<Result<Arc<Device>, Errno>>,
    cookies: Arc<Mutex<Cookies>>,
}

impl Backend for Engine {
    fn open_device(
        &self,
        cfg: &DeviceConfig,
        events: AsyncEventSink,
    ) -> VerbResult<Box<dyn DeviceContext>> {
        Ok(Box::new(EngineContext {
            cfg: cfg.clone(),
            events,
            dev: OnceLock::new(),
            cookies: Default::default(),
        }))
    }
}

fn err(e: emu::Error) -> Errno {
    Errno(e.errno())
}

fn qp_state(v: u32) -> Result<emu::QpState, Errno> {
    Ok(match v {
        IBV_QPS_RESET => emu::QpState::Reset,
        IBV_QPS_INIT => emu::QpState::Init,
        IBV_QPS_RTR => emu::QpState::Rtr,
        IBV_QPS_RTS => emu::QpState::Rts,
        IBV_QPS_SQD => emu::QpState::Sqd,
        IBV_QPS_SQE => emu::QpState::Sqe,
        IBV_QPS_ERR => emu::QpState::Err,
        _ => return Err(Errno::EINVAL),
    })
}

fn ah_to_emu(a: &ibv_ah_attr) -> emu::AhAttr {
    emu::AhAttr {
        dgid: a.grh.dgid.raw,
        flow_label: a.grh.flow_label,
        sgid_index: a.grh.sgid_index,
        hop_limit: a.grh.hop_limit,
        traffic_class: a.grh.traffic_class,
        is_global: a.is_global != 0,
        sl: a.sl,
        port_num: a.port_num,
    }
}

fn ah_from_emu(a: &emu::AhAttr) -> ibv_ah_attr {
    ibv_ah_attr {
        grh: ibv_global_route {
            dgid: ibv_gid { raw: a.dgid },
            flow_label: a.flow_label,
            sgid_index: a.sgid_index,
            hop_limit: a.hop_limit,
            traffic_class: a.traffic_class,
        },
        dlid: 0,
        sl: a.sl,
        src_path_bits: 0,
        static_rate: 0,
        is_global: a.is_global as u8,
        port_num: a.port_num,
    }
}

fn cap_to_emu(c: &ibv_qp_cap) -> emu::QpCap {
    emu::QpCap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

fn cap_from_emu(c: &emu::QpCap) -> ibv_qp_cap {
    ibv_qp_cap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

/// Copies an `ibv_sge` list into `buf` as engine SGEs.
fn sges<'b>(sg: &[ibv_sge], buf: &'b mut [emu::Sge]) -> Result<&'b [emu::Sge], Errno> {
    if sg.len() > buf.len() {
        return Err(Errno::EINVAL);
    }
    for (d, s) in buf.iter_mut().zip(sg) {
        *d = emu::Sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        };
    }
    Ok(&buf[..sg.len()])
}

/// Most SGEs a work request may carry here.
const MAX_SGE: usize = 32;

/// Runs `f` on `sg` converted to engine SGEs, in a 4-entry stack array when that is enough (most
/// WRs have one SGE: zeroing 32, 512 bytes, was a visible part of every post).
fn with_sges<R>(
    sg: &[ibv_sge],
    f: impl FnOnce(&[emu::Sge]) -> Result<R, Errno>,
) -> Result<R, Errno> {
    if sg.len() <= 4 {
        let mut buf = [emu::Sge::default(); 4];
        f(sges(sg, &mut buf)?)
    } else {
        let mut buf = [emu::Sge::default(); MAX_SGE];
        f(sges(sg, &mut buf)?)
    }
}

/// A send WR as the engine takes it, over SGEs already converted with [`sges`].
fn emu_send_wr<'b>(wr: &SendWr<'_>, sg_list: &'b [emu::Sge]) -> Result<emu::SendWr<'b>, Errno> {
    let opcode = emu::WrOpcode::from_raw(wr.opcode).ok_or(Errno::EINVAL)?;
    let (imm, inv) = match opcode {
        emu::WrOpcode::SendWithInv | emu::WrOpcode::LocalInv => (0, wr.imm_data),
        _ => (u32::from_be(wr.imm_data), 0),
    };
    let mut w = emu::SendWr {
        wr_id: wr.wr_id,
        sg_list,
        opcode,
        send_flags: emu::SendFlags(wr.send_flags),
        imm_data: imm,
        invalidate_rkey: inv,
        remote_addr: wr.remote_addr,
        rkey: wr.rkey,
        compare_add: wr.compare_add,
        swap: wr.swap,
        ah: None,
        remote_qpn: 0,
        remote_qkey: 0,
        bind: emu::MwBind {
            mw_rkey: wr.bind.mw_rkey,
            rkey: wr.bind.rkey,
            mr_lkey: wr.bind.mr_lkey,
            addr: wr.bind.addr,
            length: wr.bind.length,
            access: emu::AccessFlags(wr.bind.access),
        },
        flush: emu::FlushWr {
            length: wr.flush.length,
            placement_type: wr.flush.placement_type,
            level: wr.flush.level,
        },
    };
    if let Some(ud) = wr.ud {
        w.ah = Some(emu::Ah(ud.ah.0 as u32));
        w.remote_qpn = ud.remote_qpn;
        w.remote_qkey = ud.remote_qkey;
    }
    Ok(w)
}

/// The checks `emu::Nic::post_send_inline` makes that depend on the WR and on the QP's type and
/// capacities only (not on its state, its address handles or the room left in its SQ), so
/// that a batch is refused before any of it is posted. Keep in step with the engine's.
fn check_send(
    t: emu::QpType,
    cap: &emu::QpCap,
    w: &emu::SendWr<'_>,
    inline_data: Option<&[u8]>,
) -> Result<(), Errno> {
    use emu::WrOpcode as O;
    let op_ok = match t {
        emu::QpType::Ud => matches!(w.opcode, O::Send | O::SendWithImm),
        emu::QpType::Uc => matches!(
            w.opcode,
            O::Send | O::SendWithImm | O::RdmaWrite | O::RdmaWriteWithImm | O::BindMw
        ),
        emu::QpType::Rc => true,
    };
    if !op_ok || w.sg_list.len() > cap.max_send_sge as usize {
        return Err(Errno::EINVAL);
    }
    let inline = w.send_flags.contains(emu::SendFlags::INLINE)
        && !w.opcode.takes_rd_atomic_credit()
        && !w.opcode.is_local();
    let length = match (inline, inline_data) {
        (true, Some(d)) => d.len() as u64,
        _ if w.opcode == O::Flush => u64::from(w.flush.length),
        _ => w.sg_list.iter().map(|s| u64::from(s.length)).sum(),
    };
    if (w.opcode.is_atomic() && (w.remote_addr & 7 != 0 || length < 8))
        || (inline && length > u64::from(cap.max_inline_data))
        || length > 1 << 31
        || (t == emu::QpType::Ud && w.ah.is_none())
    {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

fn wc_from_emu(w: &emu::WorkCompletion) -> ibv_wc {
    let with_inv = w.wc_flags.contains(emu::WcFlags::WITH_INV);
    ibv_wc {
        wr_id: w.wr_id,
        status: w.status as u32,
        opcode: w.opcode as u32,
        vendor_err: w.vendor_err,
        byte_len: w.byte_len,
        // `imm_data` is __be32 as the program reads it; `invalidated_rkey` is host order.
        imm_data: if with_inv {
            w.imm_data
        } else {
            w.imm_data.to_be()
        },
        qp_num: w.qp_num,
        src_qp: w.src_qp,
        wc_flags: w.wc_flags.bits(),
        pkey_index: w.pkey_index,
        slid: w.slid,
        sl: w.sl,
        dlid_path_bits: w.dlid_path_bits,
    }
}

impl EngineContext {
    fn dev(&self) -> Result<&Arc<Device>, Errno> {
        self.dev
            .get_or_init(|| {
                let (d, listeners) = open_shared(&self.cfg)?;
                listeners.add(&self.cookies, self.events.clone());
                Ok(d)
            })
            .as_ref()
            .map_err(|e| *e)
    }

    fn cookies(&self) -> std::sync::MutexGuard<'_, Cookies> {
        self.cookies.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl DeviceContext for EngineContext {
    fn alloc_pd(&self) -> VerbResult<PdId> {
        let p = self.dev()?.with_nic(|n| n.alloc_pd()).map_err(err)?;
        Ok(PdId(p.0 as u64))
    }
    fn dealloc_pd(&self, pd: PdId) -> VerbResult<()> {
        self.dev()?
            .with_nic(|n| n.dealloc_pd(emu::Pd(pd.0 as u32)))
            .map_err(err)
    }

    fn reg_mr(&self, pd: PdId, mem: MrMemory, iova: u64, access: i32) -> VerbResult<MrInfo> {
        let mr = self
            .dev()?
            .with_nic(|n| {
                n.reg_mr(
                    emu::Pd(pd.0 as u32),
                    Arc::new(mem),
                    iova,
                    emu::AccessFlags(access as u32),
                )
            })
            .map_err(err)?;
        Ok(MrInfo {
            id: MrId(mr.lkey as u64 | (mr.rkey as u64) << 32),
            lkey: mr.lkey,
            rkey: mr.rkey,
        })
    }
    fn dereg_mr(&self, mr: MrId) -> VerbResult<()> {
        let m = emu::Mr {
            lkey: mr.0 as u32,
            rkey: (mr.0 >> 32) as u32,
        };
        self.dev()?.with_nic(|n| n.dereg_mr(m)).map_err(err)
    }

    fn alloc_mw(&self, pd: PdId, mw_type: u32) -> VerbResult<u32> {
        let ty = match mw_type {
            IBV_MW_TYPE_1 => emu::MwType::Type1,
            IBV_MW_TYPE_2 => emu::MwType::Type2,
            _ => return Err(Errno::EINVAL),
        };
        self.dev()?
            .with_nic(|n| n.alloc_mw(emu::Pd(pd.0 as u32), ty))
            .map_err(err)
    }
    fn dealloc_mw(&self, rkey: u32) -> VerbResult<()> {
        self.dev()?.with_nic(|n| n.dealloc_mw(rkey)).map_err(err)
    }

    fn create_cq(&self, init: CqInit) -> VerbResult<CqInfo> {
        let d = self.dev()?;
        let cq = d.with_nic(|n| n.create_cq(init.cqe)).map_err(err)?;
        if let Some(nt) = init.notifier {
            d.set_comp_handler(cq, Some(Arc::new(move || nt.notify())));
        }
        self.cookies().cqs.insert(cq.0, init.cookie);
        Ok(CqInfo {
            id: CqId(cq.0 as u64),
            cqe: emu::Nic::cq_depth(init.cqe),
        })
    }
    fn resize_cq(&self, cq: CqId, cqe: u32) -> VerbResult<u32> {
        let c = emu::Cq(cq.0 as u32);
        self.dev()?.with_nic(|n| n.resize_cq(c, cqe)).map_err(err)
    }
    fn destroy_cq(&self, cq: CqId) -> VerbResult<()> {
        let d = self.dev()?;
        let c = emu::Cq(cq.0 as u32);
        d.with_nic(|n| n.destroy_cq(c)).map_err(err)?;
        d.set_comp_handler(c, None);
        self.cookies().cqs.remove(&c.0);
        Ok(())
    }
    fn poll_cq(&self, cq: CqId, wc: &mut [ibv_wc]) -> VerbResult<usize> {
        let d = self.dev()?;
        let c = emu::Cq(cq.0 as u32);
        let mut tmp = [emu::WorkCompletion::default(); 16];
        let mut done = 0;
        while done < wc.len() {
            let want = (wc.len() - done).min(tmp.len());
            let n = d.poll_cq(c, &mut tmp[..want]);
            for (o, w) in wc[done..done + n].iter_mut().zip(&tmp[..n]) {
                *o = wc_from_emu(w);
            }
            done += n;
            if n < want {
                break;
            }
        }
        Ok(done)
    }
    fn req_notify_cq(&self, cq: CqId, solicited_only: bool) -> VerbResult<()> {
        self.dev()?
            .req_notify_cq(emu::Cq(cq.0 as u32), solicited_only)
            .map_err(err)
    }

    fn create_qp(&self, init: QpInit) -> VerbResult<QpInfo> {
        let qp_type = match init.qp_type {
            IBV_QPT_RC => emu::QpType::Rc,
            IBV_QPT_UC => emu::QpType::Uc,
            IBV_QPT_UD => emu::QpType::Ud,
            _ => return Err(Errno::EOPNOTSUPP),
        };
        let ia = emu::QpInitAttr {
            send_cq: emu::Cq(init.send_cq.0 as u32),
            recv_cq: emu::Cq(init.recv_cq.0 as u32),
            srq: init.srq.map(|s| emu::Srq(s.0 as u32)),
            cap: cap_to_emu(&init.cap),
            qp_type,
            sq_sig_all: init.sq_sig_all,
        };
        let d = self.dev()?;
        let (qpn, attr) = d
            .with_nic(|n| {
                let qpn = n.create_qp(emu::Pd(init.pd.0 as u32), &ia)?;
                Ok((qpn, n.query_qp(qpn)?))
            })
            .map_err(err)?;
        let mut c = self.cookies();
        c.qps.insert(qpn, init.cookie);
        c.shapes.insert(qpn, (qp_type, attr.cap));
        drop(c);
        Ok(QpInfo {
            id: QpId(qpn as u64),
            qp_num: qpn,
            cap: cap_from_emu(&attr.cap),
        })
    }

    fn modify_qp(&self, qp: QpId, attr: &ibv_qp_attr, mask: i32) -> VerbResult<()> {
        let mask = emu::QpAttrMask(mask as u32);
        let mut a = emu::QpAttr::default();
        if mask.contains(emu::QpAttrMask::STATE) {
            a.qp_state = qp_state(attr.qp_state)?;
        }
        if mask.contains(emu::QpAttrMask::CUR_STATE) {
            a.cur_qp_state = qp_state(attr.cur_qp_state)?;
        }
        if mask.contains(emu::QpAttrMask::PATH_MTU) {
            a.path_mtu = emu::Mtu::from_raw(attr.path_mtu).ok_or(Errno::EINVAL)?;
        }
        a.qkey = attr.qkey;
        a.rq_psn = attr.rq_psn;
        a.sq_psn = attr.sq_psn;
        a.dest_qp_num = attr.dest_qp_num;
        a.qp_access_flags = emu::AccessFlags(attr.qp_access_flags);
        a.cap = cap_to_emu(&attr.cap);
        a.ah_attr = ah_to_emu(&attr.ah_attr);
        a.pkey_index = attr.pkey_index;
        a.en_sqd_async_notify = attr.en_sqd_async_notify != 0;
        a.max_rd_atomic = attr.max_rd_atomic;
        a.max_dest_rd_atomic = attr.max_dest_rd_atomic;
        a.min_rnr_timer = attr.min_rnr_timer;
        a.port_num = attr.port_num;
        a.timeout = attr.timeout;
        a.retry_cnt = attr.retry_cnt;
        a.rnr_retry = attr.rnr_retry;
        self.dev()?
            .with_nic(|n| n.modify_qp(qp.0 as u32, &a, mask))
            .map_err(err)
    }

    fn query_qp(&self, qp: QpId, _mask: i32, attr: &mut ibv_qp_attr) -> VerbResult<ibv_qp_cap> {
        let a = self
            .dev()?
            .with_nic(|n| n.query_qp(qp.0 as u32))
            .map_err(err)?;
        qp_attr_to_c(&a, attr);
        Ok(attr.cap)
    }

    fn destroy_qp(&self, qp: QpId) -> VerbResult<()> {
        self.dev()?
            .with_nic(|n| n.destroy_qp(qp.0 as u32))
            .map_err(err)?;
        let mut c = self.cookies();
        c.qps.remove(&(qp.0 as u32));
        c.shapes.remove(&(qp.0 as u32));
        Ok(())
    }

    fn post_send(&self, qp: QpId, wr: &SendWr<'_>) -> VerbResult<()> {
        with_sges(wr.sg_list, |sg| {
            let w = emu_send_wr(wr, sg)?;
            self.dev()?
                .post_send(qp.0 as u32, &w, wr.inline_data)
                .map_err(err)
        })
    }

    /// All or nothing as far as the WRs and the QP's type and capacities go: every WR is
    /// checked first. The engine can still refuse one after others were posted when the SQ
    /// fills up (ENOMEM) — it has no way to post a batch atomically yet (fuzz/README.md).
    fn post_send_batch(&self, qp: QpId, wrs: &[SendWr<'_>]) -> VerbResult<()> {
        let qpn = qp.0 as u32;
        let (t, cap) = *self.cookies().shapes.get(&qpn).ok_or(Errno::EINVAL)?;
        if wrs.len() > cap.max_send_wr as usize {
            return Err(Errno::ENOMEM);
        }
        let mut flat = Vec::with_capacity(wrs.iter().map(|w| w.sg_list.len()).sum());
        for wr in wrs {
            with_sges(wr.sg_list, |sg| {
                flat.extend_from_slice(sg);
                Ok(())
            })?;
        }
        let mut list = Vec::with_capacity(wrs.len());
        let mut at = 0;
        for wr in wrs {
            let sg = &flat[at..at + wr.sg_list.len()];
            at += sg.len();
            let w = emu_send_wr(wr, sg)?;
            check_send(t, &cap, &w, wr.inline_data)?;
            list.push((w, wr.inline_data));
        }
        let (_, r) = self.dev()?.post_send_list(qpn, list);
        r.map_err(err)
    }

    fn post_recv(&self, qp: QpId, wr: &RecvWr<'_>) -> VerbResult<()> {
        with_sges(wr.sg_list, |sg_list| {
            self.dev()?
                .post_recv(
                    qp.0 as u32,
                    &emu::RecvWr {
                        wr_id: wr.wr_id,
                        sg_list,
                    },
                )
                .map_err(err)
        })
    }

    fn create_srq(&self, pd: PdId, attr: ibv_srq_attr, cookie: u64) -> VerbResult<SrqInfo> {
        let a = emu::SrqAttr {
            max_wr: attr.max_wr,
            max_sge: attr.max_sge,
            srq_limit: attr.srq_limit,
        };
        let (s, q) = self
            .dev()?
            .with_nic(|n| {
                let s = n.create_srq(emu::Pd(pd.0 as u32), a)?;
                Ok((s, n.query_srq(s)?))
            })
            .map_err(err)?;
        self.cookies().srqs.insert(s.0, cookie);
        Ok(SrqInfo {
            id: SrqId(s.0 as u64),
            attr: ibv_srq_attr {
                max_wr: q.max_wr,
                max_sge: q.max_sge,
                srq_limit: q.srq_limit,
            },
        })
    }
    fn modify_srq(&self, srq: SrqId, attr: &ibv_srq_attr, mask: i32) -> VerbResult<()> {
        let a = emu::SrqAttr {
            max_wr: attr.max_wr,
            max_sge: attr.max_sge,
            srq_limit: attr.srq_limit,
        };
        self.dev()?
            .with_nic(|n| n.modify_srq(emu::Srq(srq.0 as u32), a, mask as u32))
            .map_err(err)
    }
    fn query_srq(&self, srq: SrqId) -> VerbResult<ibv_srq_attr> {
        let q = self
            .dev()?
            .with_nic(|n| n.query_srq(emu::Srq(srq.0 as u32)))
            .map_err(err)?;
        Ok(ibv_srq_attr {
            max_wr: q.max_wr,
            max_sge: q.max_sge,
            srq_limit: q.srq_limit,
        })
    }
    fn destroy_srq(&self, srq: SrqId) -> VerbResult<()> {
        self.dev()?
            .with_nic(|n| n.destroy_srq(emu::Srq(srq.0 as u32)))
            .map_err(err)?;
        self.cookies().srqs.remove(&(srq.0 as u32));
        Ok(())
    }
    fn post_srq_recv(&self, srq: SrqId, wr: &RecvWr<'_>) -> VerbResult<()> {
        with_sges(wr.sg_list, |sg_list| {
            self.dev()?
                .post_srq_recv(
                    emu::Srq(srq.0 as u32),
                    &emu::RecvWr {
                        wr_id: wr.wr_id,
                        sg_list,
                    },
                )
                .map_err(err)
        })
    }

    fn create_ah(&self, pd: PdId, attr: &ibv_ah_attr) -> VerbResult<AhId> {
        let a = ah_to_emu(attr);
        let ah = self
            .dev()?
            .with_nic(|n| n.create_ah(emu::Pd(pd.0 as u32), a))
            .map_err(err)?;
        Ok(AhId(ah.0 as u64))
    }
    fn destroy_ah(&self, ah: AhId) -> VerbResult<()> {
        self.dev()?
            .with_nic(|n| n.destroy_ah(emu::Ah(ah.0 as u32)))
            .map_err(err)
    }
}
