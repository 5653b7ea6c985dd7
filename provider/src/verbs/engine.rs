//! The seam between the verbs API and whatever moves datagrams: the UDP runtime
//! ([`crate::runtime::Device`], real sockets) or the deterministic simulated network
//! ([`super::sim::SimFabric`]).
use roce_emu::{Cq, Nic, RecvWr, SendWr, WorkCompletion};
use std::sync::Arc;
use std::time::Duration;

/// Called (with the engine lock held) when an armed CQ gets a completion.
pub(crate) type CompHandler = Arc<dyn Fn() + Send + Sync>;

/// One device's engine: the NIC state machine behind a lock plus a way to make progress.
pub(crate) trait Engine: Send + Sync + 'static {
    /// Runs `f` with the NIC locked, then transmits what it queued.
    fn with_nic_dyn(&self, f: &mut dyn FnMut(&mut Nic));
    /// Posts one send WR and transmits at once.
    fn post_send(&self, qpn: u32, wr: &SendWr<'_>, inline: Option<&[u8]>) -> roce_emu::Result<()>;
    /// Posts one receive WR. Nothing to transmit: what the engine holds back (a deferred ACK)
    /// leaves with the next post_send or poll, together with it, not in a system call of its
    /// own.
    fn post_recv(&self, qpn: u32, wr: &RecvWr<'_>) -> roce_emu::Result<()> {
        let mut r = Ok(());
        self.with_nic_dyn(&mut |n| r = n.post_recv(qpn, wr));
        r
    }
    /// Posts one receive WR to a shared receive queue (see `post_recv`).
    fn post_srq_recv(&self, srq: roce_emu::Srq, wr: &RecvWr<'_>) -> roce_emu::Result<()> {
        let mut r = Ok(());
        self.with_nic_dyn(&mut |n| r = n.post_srq_recv(srq, wr));
        r
    }
    /// Polls `cq`; when it is empty, makes one round of progress and polls again.
    fn poll_cq(&self, cq: Cq, wc: &mut [WorkCompletion]) -> usize;
    /// One round of progress without blocking (receive, timers, transmit, events).
    fn progress(&self);
    /// True when a background thread makes progress by itself (timers, arriving packets).
    fn background(&self) -> bool;
    /// Waits a little for something to happen (at most `timeout`).
    fn park(&self, timeout: Duration);
    /// Sets or clears the completion-channel handler of `cq`.
    fn set_comp_handler(&self, cq: Cq, h: Option<CompHandler>);
    /// Device name.
    fn name(&self) -> String;
    /// Next asynchronous event (QP errors, CQ overflow, SRQ limit).
    fn poll_async_event(&self) -> Option<roce_emu::AsyncEvent>;
    /// The runtime device, when this engine is one.
    fn runtime(&self) -> Option<&crate::runtime::Device> {
        None
    }
}

impl dyn Engine {
    /// Runs `f` with the NIC locked and returns its result.
    pub(crate) fn with_nic<R>(&self, f: impl FnOnce(&mut Nic) -> R) -> R {
        let mut f = Some(f);
        let mut r = None;
        self.with_nic_dyn(&mut |n| r = Some((f.take().expect("called once"))(n)));
        r.expect("engine ran the closure")
    }
}

/// The UDP runtime as an engine.
pub(crate) struct UdpEngine {
    dev: crate::runtime::Device,
    events: Arc<std::sync::Mutex<std::collections::VecDeque<roce_emu::AsyncEvent>>>,
}

impl UdpEngine {
    pub(crate) fn new(dev: crate::runtime::Device) -> UdpEngine {
        let events: Arc<std::sync::Mutex<std::collections::VecDeque<roce_emu::AsyncEvent>>> =
            Arc::default();
        let q = events.clone();
        // runs with the engine lock held: only queue the event
        dev.set_async_handler(Some(Arc::new(move |ev| {
            let mut q = q.lock().unwrap_or_else(|e| e.into_inner());
            if q.len() < 4096 {
                q.push_back(ev);
            }
        })));
        UdpEngine { dev, events }
    }
}

impl Engine for UdpEngine {
    fn with_nic_dyn(&self, f: &mut dyn FnMut(&mut Nic)) {
        self.dev.with_nic(f)
    }
    fn post_send(&self, qpn: u32, wr: &SendWr<'_>, inline: Option<&[u8]>) -> roce_emu::Result<()> {
        self.dev.post_send(qpn, wr, inline)
    }
    fn post_recv(&self, qpn: u32, wr: &RecvWr<'_>) -> roce_emu::Result<()> {
        self.dev.post_recv(qpn, wr)
    }
    fn post_srq_recv(&self, srq: roce_emu::Srq, wr: &RecvWr<'_>) -> roce_emu::Result<()> {
        self.dev.post_srq_recv(srq, wr)
    }
    fn poll_cq(&self, cq: Cq, wc: &mut [WorkCompletion]) -> usize {
        self.dev.poll_cq(cq, wc)
    }
    fn progress(&self) {
        self.dev.progress();
    }
    fn background(&self) -> bool {
        self.dev.config().progress_thread
    }
    fn park(&self, timeout: Duration) {
        std::thread::sleep(timeout.min(Duration::from_micros(50)));
    }
    fn set_comp_handler(&self, cq: Cq, h: Option<CompHandler>) {
        self.dev.set_comp_handler(cq, h)
    }
    fn name(&self) -> String {
        self.dev.config().name.clone()
    }
    fn runtime(&self) -> Option<&crate::runtime::Device> {
        Some(&self.dev)
    }
    fn poll_async_event(&self) -> Option<roce_emu::AsyncEvent> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front()
    }
}
