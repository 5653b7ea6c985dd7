//! Completion queues, work completions and completion channels.
use super::device::{Context, CtxInner};
use super::error::{Error, Result};
use roce_emu::{WcFlags, WcOpcode, WcStatus};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// A work completion (`struct ibv_wc`). On an error status only `wr_id`, `status`, `qp_num` and
/// `vendor_err` are meaningful, as in libibverbs.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
#[repr(transparent)]
pub struct WorkCompletion(pub roce_emu::WorkCompletion);

impl WorkCompletion {
    /// The id given when posting.
    pub fn wr_id(&self) -> u64 {
        self.0.wr_id
    }
    /// The status.
    pub fn status(&self) -> WcStatus {
        self.0.status
    }
    /// True on success.
    pub fn is_ok(&self) -> bool {
        self.0.status == WcStatus::Success
    }
    /// `Ok(())` on success, else [`Error::Completion`] with the status.
    pub fn result(&self) -> Result<()> {
        if self.is_ok() {
            Ok(())
        } else {
            Err(Error::Completion {
                wr_id: self.0.wr_id,
                status: self.0.status,
            })
        }
    }
    /// What completed.
    pub fn opcode(&self) -> WcOpcode {
        self.0.opcode
    }
    /// Bytes received (receive completions) or read.
    pub fn byte_len(&self) -> u32 {
        self.0.byte_len
    }
    /// The rkey a SEND with invalidate invalidated (`IBV_WC_WITH_INV`, `invalidated_rkey`).
    pub fn invalidated_rkey(&self) -> Option<u32> {
        self.0
            .wc_flags
            .contains(WcFlags::WITH_INV)
            .then_some(self.0.imm_data)
    }
    /// Immediate data, when the sender attached some.
    pub fn imm_data(&self) -> Option<u32> {
        self.0
            .wc_flags
            .contains(WcFlags::WITH_IMM)
            .then_some(self.0.imm_data)
    }
    /// The local QP number.
    pub fn qp_num(&self) -> u32 {
        self.0.qp_num
    }
    /// UD: the sender's QP number.
    pub fn src_qp(&self) -> u32 {
        self.0.src_qp
    }
    /// Flags (`GRH`, `WITH_IMM`, …).
    pub fn wc_flags(&self) -> WcFlags {
        self.0.wc_flags
    }
}

impl std::fmt::Debug for WorkCompletion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("WorkCompletion");
        d.field("wr_id", &self.0.wr_id)
            .field("status", &self.0.status)
            .field("qp_num", &self.0.qp_num);
        if self.is_ok() {
            d.field("opcode", &self.0.opcode)
                .field("byte_len", &self.0.byte_len);
            if let Some(i) = self.imm_data() {
                d.field("imm_data", &i);
            }
        }
        d.finish()
    }
}

#[allow(unsafe_code)] // a cast between layout-identical types (lib.rs docs)
fn as_emu(wc: &mut [WorkCompletion]) -> &mut [roce_emu::WorkCompletion] {
    // SAFETY: `WorkCompletion` is `repr(transparent)` over `roce_emu::WorkCompletion`.
    unsafe { std::slice::from_raw_parts_mut(wc.as_mut_ptr().cast(), wc.len()) }
}

/// Builder for a [`CompletionQueue`] (`ibv_create_cq`).
pub struct CqBuilder<'a> {
    ctx: &'a Context,
    cqe: u32,
    channel: Option<Arc<ChanInner>>,
}

impl<'a> CqBuilder<'a> {
    pub(crate) fn new(ctx: &'a Context, cqe: u32) -> Self {
        CqBuilder {
            ctx,
            cqe,
            channel: None,
        }
    }
    /// Delivers this CQ's notifications ([`CompletionQueue::req_notify`]) to `channel`.
    pub fn set_comp_channel(mut self, channel: &CompletionChannel) -> Self {
        self.channel = Some(channel.inner.clone());
        self
    }
    /// Creates the CQ.
    pub fn build(self) -> Result<CompletionQueue> {
        let cqe = self.cqe;
        let cq = self
            .ctx
            .inner
            .nic(|n| n.create_cq(cqe))
            .map_err(|source| Error::CreateCq { cqe, source })?;
        if let Some(ch) = &self.channel {
            if !Arc::ptr_eq(&ch.ctx, &self.ctx.inner) {
                let _ = self.ctx.inner.nic(|n| n.destroy_cq(cq));
                return Err(Error::WrongPd(
                    "create_cq with a completion channel of another device",
                ));
            }
            let w = Arc::downgrade(ch);
            let id = cq.0;
            self.ctx.inner.engine.set_comp_handler(
                cq,
                Some(Arc::new(move || {
                    if let Some(c) = w.upgrade() {
                        c.push(id)
                    }
                })),
            );
        }
        Ok(CompletionQueue {
            inner: Arc::new(CqInner {
                ctx: self.ctx.inner.clone(),
                cq,
                cqe: AtomicU32::new(roce_emu::Nic::cq_depth(cqe)),
                channel: self.channel,
            }),
        })
    }
}

/// A completion queue (`struct ibv_cq`). Cheap to clone; QPs keep it alive.
///
/// Polling also drives the device: when nothing is ready, [`CompletionQueue::poll`] runs one
/// round of progress (receive, timers, transmit) in the calling thread before looking again,
/// which is the fast path for a busy-polling program.
#[derive(Clone)]
pub struct CompletionQueue {
    pub(crate) inner: Arc<CqInner>,
}

pub(crate) struct CqInner {
    pub(crate) ctx: Arc<CtxInner>,
    pub(crate) cq: roce_emu::Cq,
    /// Entries as created, or as the last [`CompletionQueue::resize`] rounded them.
    cqe: AtomicU32,
    channel: Option<Arc<ChanInner>>,
}

impl Drop for CqInner {
    fn drop(&mut self) {
        let cq = self.cq;
        if self.channel.is_some() {
            self.ctx.engine.set_comp_handler(cq, None);
        }
        let _ = self.ctx.nic(|n| n.destroy_cq(cq));
    }
}

impl CompletionQueue {
    /// Entries it holds: what it was created with or last resized to, rounded up as rxe rounds
    /// it (to one less than a power of two: 16 gives 31).
    pub fn capacity(&self) -> u32 {
        self.inner.cqe.load(Relaxed)
    }

    /// `ibv_resize_cq`: makes room for `cqe` completions and returns the depth given, rounded
    /// up as rxe rounds it (to one less than a power of two: 100 gives 127), which
    /// [`CompletionQueue::capacity`] reports from then on. The completions queued now stay, in
    /// order, and a pending [`CompletionQueue::req_notify`] stays armed. Fails (as rxe, with
    /// `EINVAL`) when `cqe` is 0, above the device's `max_cqe`, or below the number of
    /// completions queued now: poll some first.
    ///
    /// ```
    /// # use roce_provider::verbs::{sim::SimFabric, DeviceConfig};
    /// # let ctx = SimFabric::new(1, Default::default()).open(DeviceConfig::new("10.0.0.1".parse().unwrap()))?;
    /// let cq = ctx.create_cq(16).build()?;
    /// assert_eq!(cq.resize(100)?, 127);
    /// assert_eq!(cq.capacity(), 127);
    /// # Ok::<(), roce_provider::verbs::Error>(())
    /// ```
    pub fn resize(&self, cqe: u32) -> Result<u32> {
        let cq = self.inner.cq;
        let n = self
            .inner
            .ctx
            .nic(|n| n.resize_cq(cq, cqe))
            .map_err(|source| Error::ResizeCq { cqe, source })?;
        self.inner.cqe.store(n, Relaxed);
        Ok(n)
    }

    /// `ibv_poll_cq`: moves up to `out.len()` completions into `out` and returns the filled
    /// part (possibly empty). Never blocks.
    ///
    /// ```
    /// # use roce_provider::verbs::{sim::SimFabric, DeviceConfig, WorkCompletion};
    /// # let ctx = SimFabric::new(1, Default::default()).open(DeviceConfig::new("10.0.0.1".parse().unwrap()))?;
    /// let cq = ctx.create_cq(64).build()?;
    /// let mut wc = [WorkCompletion::default(); 16];
    /// assert!(cq.poll(&mut wc)?.is_empty());
    /// # Ok::<(), roce_provider::verbs::Error>(())
    /// ```
    pub fn poll<'w>(&self, out: &'w mut [WorkCompletion]) -> Result<&'w mut [WorkCompletion]> {
        let n = self.inner.ctx.engine.poll_cq(self.inner.cq, as_emu(out));
        Ok(&mut out[..n])
    }

    /// Busy-polls (with progress) until at least one completion arrives or `timeout` passes;
    /// after a short spin it also parks the thread between rounds.
    pub fn wait<'w>(
        &self,
        out: &'w mut [WorkCompletion],
        timeout: Duration,
    ) -> Result<&'w mut [WorkCompletion]> {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            let n = self.poll(out)?.len();
            if n > 0 {
                return Ok(&mut out[..n]);
            }
            if start.elapsed() >= timeout {
                return Err(Error::Timeout(timeout));
            }
            spins += 1;
            if spins > 2000 {
                self.inner.ctx.engine.park(Duration::from_micros(200));
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// Waits for one completion and returns it (convenience over [`CompletionQueue::wait`]).
    pub fn wait_one(&self, timeout: Duration) -> Result<WorkCompletion> {
        let mut wc = [WorkCompletion::default()];
        self.wait(&mut wc, timeout)?;
        Ok(wc[0])
    }

    /// `ibv_req_notify_cq`: the next completion (only solicited ones with `solicited_only`)
    /// sends one notification to this CQ's completion channel.
    pub fn req_notify(&self, solicited_only: bool) -> Result<()> {
        if self.inner.channel.is_none() {
            return Err(Error::NoCompChannel);
        }
        let cq = self.inner.cq;
        self.inner
            .ctx
            .nic(|n| n.req_notify_cq(cq, solicited_only))
            .map_err(Error::NotifyCq)
    }

    pub(crate) fn same_device(&self, ctx: &Arc<CtxInner>) -> bool {
        Arc::ptr_eq(&self.inner.ctx, ctx)
    }
}

impl std::fmt::Debug for CompletionQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CompletionQueue({}, {} entries)",
            self.inner.cq.0,
            self.capacity()
        )
    }
}

/// A completion channel (`struct ibv_comp_channel`): where armed CQs report that they have
/// completions, so a thread can sleep instead of polling.
///
/// The usual loop: `cq.req_notify(false)`, then `channel.get_cq_event(timeout)`, then poll the
/// CQ until empty, re-arm, repeat.
#[derive(Clone)]
pub struct CompletionChannel {
    inner: Arc<ChanInner>,
}

pub(crate) struct ChanInner {
    ctx: Arc<CtxInner>,
    pending: Mutex<VecDeque<u32>>,
    cond: Condvar,
}

impl ChanInner {
    pub(crate) fn push(&self, cq: u32) {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(cq);
        self.cond.notify_all();
    }
}

impl CompletionChannel {
    pub(crate) fn new(ctx: &Context) -> CompletionChannel {
        CompletionChannel {
            inner: Arc::new(ChanInner {
                ctx: ctx.inner.clone(),
                pending: Mutex::new(VecDeque::new()),
                cond: Condvar::new(),
            }),
        }
    }

    /// `ibv_get_cq_event`: waits until an armed CQ of this channel has a completion and
    /// returns that CQ's handle number, or times out.
    pub fn get_cq_event(&self, timeout: Duration) -> Result<u32> {
        let start = Instant::now();
        let engine = &self.inner.ctx.engine;
        loop {
            let mut g = self.inner.pending.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(cq) = g.pop_front() {
                return Ok(cq);
            }
            let left = timeout.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Err(Error::Timeout(timeout));
            }
            if engine.background() {
                // The progress thread receives and calls our handler, which notifies us.
                let _ = self
                    .inner
                    .cond
                    .wait_timeout(g, left.min(Duration::from_millis(10)));
            } else {
                drop(g);
                engine.progress();
                engine.park(left);
            }
        }
    }

    /// True when `cq` reports to this channel.
    pub fn owns(&self, cq: &CompletionQueue) -> bool {
        cq.inner
            .channel
            .as_ref()
            .is_some_and(|c| Arc::ptr_eq(c, &self.inner))
    }
}
