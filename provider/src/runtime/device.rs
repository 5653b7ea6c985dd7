//! Device lifecycle and API: [`Device::open`] (socket, engine, progress thread), the data-path
//! entry points (`post_send`, `post_recv`, `poll_cq`, …), handlers, statistics, and `Drop`.

use super::*;

impl Device {
    /// Binds `cfg.ip:4791`, creates the engine and starts the progress thread.
    pub fn open(mut cfg: Config) -> io::Result<Device> {
        init_logging();
        if cfg.shared && !cfg.shared_asked && crate::shared::helper_exe().is_none() {
            // Shared by default, but no `roce` executable to run the helper: as before sharing
            // was the default, this process binds the address itself.
            if !cfg.quiet {
                eprintln!(
                    "roce: {} is not shared with other processes: no roce executable for its \
                     steering helper (set ROCE_HELPER, or run the program with roce run)",
                    cfg.ip
                );
            }
            cfg.shared = false;
        }
        let mut ncfg = NicConfig::new(cfg.ip);
        ncfg.netdev_mtu = cfg.netdev_mtu();
        // The driver checks ICRCs (it knows the GRO segment index and the policy); the engine
        // is told "unknown IPv4 ID" so it does not compute the CRC a second time.
        ncfg.icrc_policy = roce_emu::IcrcPolicy::Trust;
        ncfg.min_unacked_psns = cfg.min_unacked_psns;
        // Memory keys and initial PSNs from the OS: never the same in two runs or containers.
        ncfg.entropy = Some(crate::entropy::seed()?);
        let mut sock_cfg = SocketConfig::default();
        if cfg.shared {
            // the steering helper owns ip:4791; this engine has a port of its own
            sock_cfg.port = 0;
        }
        let mut sock = Socket::bind(cfg.ip, sock_cfg).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "roce: cannot bind UDP {}:{}: {e}{}",
                    cfg.ip,
                    roce_wire::ROCE_V2_UDP_PORT,
                    if e.kind() == io::ErrorKind::AddrInUse {
                        " (another process has this NIC, and this one does not share it: \
                         drop ROCE_SHARED=0 / roce run --no-shared to share it)"
                    } else {
                        ""
                    }
                ),
            )
        })?;
        warn_small_rcvbuf(&cfg, sock.features().rcvbuf);
        let pcap = match &cfg.pcap {
            Some(p) => Some(
                PcapSink::create(p)
                    .map_err(|e| io::Error::other(format!("roce: pcap {}: {e}", p.display())))?,
            ),
            None => None,
        };
        // Everything leaves from the socket's own port (`SourcePorts::Fixed`): the engine seals
        // each ICRC for that port, so no packet needs its ICRC patched for the port on the way.
        if sock_cfg.source_ports == SourcePorts::Fixed {
            ncfg.udp_sport = Some(sock.source_port(0));
        }
        ncfg.gsi = true;
        let mut steer = if cfg.shared {
            let m = crate::shared::Membership::join(cfg.ip, sock.local_addr().port())?;
            ncfg.qpn_range = crate::shared::qpn_range(m.slot);
            Some(m)
        } else {
            None
        };
        let direct = match steer.as_mut().and_then(|m| m.ports.take()) {
            Some(t) if cfg.direct => Some(crate::shared::direct::Direct::new(cfg.ip, t)),
            _ => None,
        };
        let entropy = ncfg.entropy.unwrap_or_default();
        let cm = roce_cm::Endpoint::new(roce_cm::Config {
            node_guid: ncfg.node_guid(),
            addrs: vec![cfg.ip],
            path_mtu: roce_emu::Mtu::from_netdev_mtu(ncfg.netdev_mtu).bytes(),
            seed: u64::from_ne_bytes(entropy[24..32].try_into().unwrap_or_default()),
            max_cm_retries: cfg.cm_retries,
        });
        let mut cm = cm;
        if let Some(m) = &steer {
            cm.set_comm_id_slot(m.slot as u8);
        }
        let nic = Nic::new(ncfg);
        let waker = Arc::new(Waker::new()?);
        let stat_path = stat::stat_path(&cfg);
        let engine = Engine {
            nic,
            tx: TxBatch::new(16, MAX_PACKET),
            rx: Some(Box::new(RecvBatch::new(16))),
            fault: Fault::new(cfg.loss, cfg.reorder, cfg.fault_seed, cfg.fault_all)
                .with_acks(cfg.fault_acks),
            held: None,
            acks: AckQueue::new(),
            pcap,
            pcap_buf: vec![0; MAX_PACKET],
            comp: HashMap::new(),
            async_handler: None,
            cm,
            cm_handler: None,
            steer,
            direct,
            tx_deferred: false,
            doorbell: Doorbell::default(),
            retries_seen: 0,
            pieces_until: 0,
            tx_from: Vec::with_capacity(16),
            sock,
        };
        let shared = Arc::new(Shared {
            start_ns: roce_udp::os::monotonic_ns(),
            engine: Mutex::new(engine),
            cm_ports: Mutex::default(),
            waker,
            stop: AtomicBool::new(false),
            app_last: AtomicU64::new(0),
            app_last_got: AtomicBool::new(false),
            tx_deferred_pending: AtomicBool::new(false),
            doorbell_at: AtomicU64::new(u64::MAX),
            short_looks_until: AtomicU64::new(0),
            thread_until: AtomicU64::new(u64::MAX),
            thread_deadline: AtomicU64::new(u64::MAX),
            // What the thread will inherit from this one (`taskset -c N program`).
            thread_shares_cpu: roce_udp::os::cpus_allowed() == Some(1),
            ctr: RuntimeCounters::default(),
            icrc: IcrcCounters::default(),
            stat_path,
            quiet: cfg.quiet,
            cfg,
        });
        register_for_exit(&shared);
        let thread = if shared.cfg.progress_thread {
            let mut rsock = shared.lock().sock.try_clone()?;
            rsock.set_waker(Some(shared.waker.clone()));
            let s = shared.clone();
            Some(
                std::thread::Builder::new()
                    .name(format!("roce-{}", shared.cfg.name))
                    .spawn(move || progress_thread(s, rsock))?,
            )
        } else {
            None
        };
        tracing::debug!(ip = %shared.cfg.ip, mtu = shared.cfg.mtu, "roce device open");
        Ok(Device { shared, thread })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.shared.cfg
    }

    /// The device's IP address.
    pub fn ip(&self) -> IpAddr {
        self.shared.cfg.ip
    }

    /// Current virtual time (ns since [`Device::open`]).
    pub fn now(&self) -> Instant {
        self.shared.now()
    }

    /// Runs `f` on the engine (object creation, queries, modify_qp, …), then transmits whatever
    /// it queued. The lock is held during `f`: do not call back into the device from it.
    pub fn with_nic<R>(&self, f: impl FnOnce(&mut Nic) -> R) -> R {
        let mut e = self.shared.lock();
        let now = self.shared.now();
        e.doorbell.interrupt();
        if e.tx_deferred || e.doorbell.pending() {
            // Before e.g. destroy_qp or modify_qp: a deferred final ACK, or posts waiting for
            // their doorbell, must leave first.
            self.shared.transmit(&mut e, now);
        }
        let r = f(&mut e.nic);
        self.shared.transmit(&mut e, now);
        self.shared.dispatch_events(&mut e);
        drop(e);
        r
    }

    /// `ibv_post_send` of one WR. The first post after anything else transmits at once
    /// (inline progress); a post that directly follows another one (no poll in between, within
    /// [`DOORBELL_BURST_NS`]) rings a deferred doorbell instead, so a burst of one-WR posts
    /// leaves in one `sendmmsg` (see `Doorbell`).
    pub fn post_send(
        &self,
        qpn: u32,
        wr: &roce_emu::SendWr<'_>,
        inline: Option<&[u8]>,
    ) -> roce_emu::Result<()> {
        let sh = &self.shared;
        let mut e = sh.lock();
        e.nic.post_send_inline(qpn, wr, inline)?;
        let now = sh.now();
        let bytes = match inline {
            Some(d) => d.len() as u64,
            None => wr.sg_list.iter().map(|s| s.length as u64).sum(),
        };
        if e.doorbell.defer(now.as_nanos(), bytes) {
            sh.ctr.tx_doorbell_deferred.fetch_add(1, Relaxed);
            sh.arm_doorbell(now);
        } else {
            sh.progress_at(&mut e, Origin::Post, now);
            e.doorbell.transmitted_at(sh.now().as_nanos());
        }
        Ok(())
    }

    /// Posts several send WRs with one transmit at the end; returns how many were posted and
    /// the error that stopped the list, if any.
    pub fn post_send_list<'a>(
        &self,
        qpn: u32,
        wrs: impl IntoIterator<Item = (roce_emu::SendWr<'a>, Option<&'a [u8]>)>,
    ) -> (usize, roce_emu::Result<()>) {
        let mut e = self.shared.lock();
        let mut n = 0;
        let mut res = Ok(());
        for (wr, inline) in wrs {
            if let Err(err) = e.nic.post_send_inline(qpn, &wr, inline) {
                res = Err(err);
                break;
            }
            n += 1;
        }
        self.shared.progress(&mut e, Origin::Post);
        (n, res)
    }

    /// `ibv_post_recv` (no transmit needed; an RNR-waiting peer retries by itself).
    pub fn post_recv(&self, qpn: u32, wr: &roce_emu::RecvWr<'_>) -> roce_emu::Result<()> {
        self.shared.lock().nic.post_recv(qpn, wr)
    }

    /// `ibv_post_srq_recv`.
    pub fn post_srq_recv(
        &self,
        srq: roce_emu::Srq,
        wr: &roce_emu::RecvWr<'_>,
    ) -> roce_emu::Result<()> {
        self.shared.lock().nic.post_srq_recv(srq, wr)
    }

    /// `ibv_poll_cq`: returns completions; when the CQ is empty, progresses (receive, timers,
    /// transmit) in the caller's thread and looks again.
    pub fn poll_cq(&self, cq: Cq, wc: &mut [WorkCompletion]) -> usize {
        let mut e = self.shared.lock();
        let sh = &self.shared;
        let n = e.nic.poll_cq(cq, wc);
        if n > 0 || wc.is_empty() {
            if n > 0 {
                sh.app_last_got.store(true, Relaxed);
            }
            if e.doorbell.pending() {
                // The end of a burst of posts: ring the deferred doorbell now.
                let now = sh.now();
                sh.timers_and_transmit(&mut e, now);
                sh.dispatch_events(&mut e);
            }
            e.doorbell.interrupt();
            return n;
        }
        e.doorbell.interrupt();
        let now = sh.now();
        sh.app_last.store(now.as_nanos().max(1), Relaxed);
        sh.app_last_got.store(false, Relaxed);
        bump(&sh.ctr.progress_inline, 1);
        if sh.receive(&mut e, now) > 0 {
            let n = e.nic.poll_cq(cq, wc);
            if n > 0 {
                sh.app_last_got.store(true, Relaxed);
                sh.tx_deferred_pending.store(true, Relaxed);
                // Hand the completions over first; what the engine queued (ACKs, responses)
                // goes out at the program's next post or poll, or within 200 µs from
                // the progress thread: one system call less on the latency path.
                sh.dispatch_events(&mut e);
                bump(&sh.ctr.tx_deferred, 1);
                e.tx_deferred = true;
                return n;
            }
        }
        sh.finish(&mut e, now, true);
        e.nic.poll_cq(cq, wc)
    }

    /// One inline progress run (receive, timers, transmit, events); returns the datagrams moved.
    pub fn progress(&self) -> usize {
        let mut e = self.shared.lock();
        e.doorbell.interrupt();
        self.shared.progress(&mut e, Origin::Poll)
    }

    /// `ibv_req_notify_cq`: arms `cq`; the next (solicited) completion calls its comp handler.
    /// A program that asks for a notification is about to wait: deferred posts leave now.
    pub fn req_notify_cq(&self, cq: Cq, solicited_only: bool) -> roce_emu::Result<()> {
        let mut e = self.shared.lock();
        e.doorbell.interrupt();
        let r = e.nic.req_notify_cq(cq, solicited_only);
        if e.doorbell.pending() {
            let now = self.shared.now();
            self.shared.timers_and_transmit(&mut e, now);
            self.shared.dispatch_events(&mut e);
        }
        r
    }

    /// Sets (or clears) the handler called when `cq` produces a completion-channel event.
    pub fn set_comp_handler(&self, cq: Cq, h: Option<CompHandler>) {
        let mut e = self.shared.lock();
        match h {
            Some(h) => {
                e.comp.insert(cq, h);
            }
            None => {
                e.comp.remove(&cq);
            }
        }
    }

    /// Runs `f` on the device's connection manager at the current time, then sends the MADs it
    /// queued and hands its events to the [`CmHandler`]. The lock is held during `f`.
    pub fn cm<R>(&self, f: impl FnOnce(&mut roce_cm::Endpoint, Instant) -> R) -> R {
        let mut e = self.shared.lock();
        let now = self.shared.now();
        let r = f(&mut e.cm, now);
        let e = &mut *e;
        if let Some(m) = e.steer.as_mut() {
            m.set_listening(e.cm.listening_service_ids());
        }
        self.shared.finish(e, now, true);
        r
    }

    /// `rdma_bind_addr`: claims the port for the whole host (`cm_ports`: EADDRINUSE or
    /// EADDRNOTAVAIL when an id of any process holds it, as kernel rdma_cm's host-wide port
    /// table), then binds the id in this device's connection manager.
    pub fn cm_bind(&self, id: roce_cm::Id, addr: std::net::SocketAddr) -> Result<(), i32> {
        let (ps, bound) = self.cm(|c, _| (c.port_space(id), c.local_addr(id).is_some()));
        let ps = ps.ok_or(roce_cm::errno::EINVAL)?;
        let mut claims = self
            .shared
            .cm_ports
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if !bound {
            claims.claim(id, ps, addr, &[self.shared.cfg.ip])?;
        }
        let r = self.cm(|c, _| c.bind(id, addr));
        if r.is_err() && !bound {
            claims.release(id);
        }
        r
    }

    /// `rdma_destroy_id`: the connection manager's destroy, and the id's port claims freed.
    pub fn cm_destroy(&self, id: roce_cm::Id) {
        self.cm(|c, now| c.destroy_id(now, id));
        self.shared
            .cm_ports
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .release(id);
    }

    /// Sets (or clears) the handler of connection manager events.
    pub fn set_cm_handler(&self, h: Option<CmHandler>) {
        self.shared.lock().cm_handler = h;
    }

    /// The device's node GUID (EUI-64 of its MAC, as rxe), as a number.
    pub fn node_guid(&self) -> u64 {
        self.shared.lock().nic.config().node_guid()
    }

    /// Sets (or clears) the handler of asynchronous events (QP errors, CQ overflow, SRQ limit).
    pub fn set_async_handler(&self, h: Option<AsyncHandler>) {
        self.shared.lock().async_handler = h;
    }

    /// Runtime counters (datapath).
    pub fn runtime_counters(&self) -> &RuntimeCounters {
        &self.shared.ctr
    }

    /// Every counter: engine, ICRC, runtime.
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }

    /// Writes the statistics file now (the progress thread does it every
    /// [`Config::stat_interval`] too). Returns its path.
    pub fn write_stats(&self) -> Option<std::path::PathBuf> {
        self.shared.write_stats();
        self.shared.stat_path.clone()
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        self.shared.stop.store(true, Relaxed);
        self.shared.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let mut e = self.shared.lock();
        let now = self.shared.now();
        self.shared.transmit(&mut e, now);
        self.shared.report_diagnostics(&mut e);
        if let Some(p) = e.pcap.take() {
            let _ = p.finish();
        }
        drop(e);
        if std::env::var_os("ROCE_STATS_AT_CLOSE").is_some_and(|v| v == "1") {
            // The statistics file goes away with the device: print what it would hold (the
            // engine's counters, the driver's ICRC verdicts, the runtime's), the nonzero ones.
            use std::io::Write as _;
            let c: Vec<String> = self
                .shared
                .stats()
                .counters
                .into_iter()
                .filter(|(_, v)| *v != 0)
                .map(|(n, v)| format!("{n}={v}"))
                .collect();
            let _ = writeln!(io::stderr(), "roce {}: {}", self.shared.cfg.ip, c.join(" "));
        }
        if let Some(p) = &self.shared.stat_path {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Smallest receive buffer that holds a full window of one QP at MTU 4096 (128 packets of
/// 4 KiB, 512 KiB) twice over without a `roce:` warning.
const RCVBUF_WARN_BELOW: usize = 1 << 20;

/// One `roce:` line when the socket's receive buffer is too small for a window: without root
/// `SO_RCVBUFFORCE` fails and `net.core.rmem_max` (212,992 bytes by default) caps it, so a burst
/// from the peer beyond it is dropped by the kernel, counted as `rx_kernel_drops` (from
/// `SO_RXQ_OVFL`), and costs a retransmission.
fn warn_small_rcvbuf(cfg: &Config, rcvbuf: usize) {
    if rcvbuf < RCVBUF_WARN_BELOW && !cfg.quiet {
        eprintln!(
            "roce: the UDP receive buffer of {}:{} is {} KiB (net.core.rmem_max caps it without root); \
             a burst beyond it is dropped by the kernel (roce stat: rx_kernel_drops) and retransmitted. \
             Raise it as root: sysctl -w net.core.rmem_max=16777216",
            cfg.ip,
            roce_wire::ROCE_V2_UDP_PORT,
            rcvbuf / 1024
        );
    }
}
