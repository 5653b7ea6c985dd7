//! The passive side: a responder thread in this process ([`LocalPassive`]) or a `--server` behind a
//! TCP control connection ([`RemotePassive`], [`serve`]).

use super::*;

/// What the active side asks the passive side for.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Setup {
    pub(super) op: Op,
    pub(super) size: usize,
    pub(super) endpoint: QueuePairEndpoint,
}

/// The passive side's answer.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Ready {
    pub(super) endpoint: QueuePairEndpoint,
    pub(super) remote: RemoteSlice,
}

pub(super) trait Passive {
    fn setup(&mut self, s: &Setup) -> Result<Ready, String>;
    fn stop(&mut self) -> Result<(), String>;
    /// The passive device when it is in this process.
    fn side(&self) -> Option<&Side> {
        None
    }
}

/// The passive side in this process: a device and, for Send and latency, a thread that reposts
/// receives (and echoes).
pub(super) struct LocalPassive {
    pub(super) side: Side,
    pub(super) running: Option<Running>,
}

/// A passive test in progress: its stop flag, its thread, its QP (kept alive until stop).
pub(super) type Running = (Arc<AtomicBool>, JoinHandle<Result<(), String>>, QueuePair);

impl Passive for LocalPassive {
    fn side(&self) -> Option<&Side> {
        Some(&self.side)
    }
    fn setup(&mut self, s: &Setup) -> Result<Ready, String> {
        self.stop()?;
        if s.size > self.side.mr.len() {
            return Err(format!(
                "size {} exceeds the passive side's region ({} B)",
                s.size,
                self.side.mr.len()
            ));
        }
        let cq = self.side.ctx.create_cq(4096).build().map_err(e2s)?;
        let qp = self.side.qp_for(Some(s.op), &cq, SQ_DEPTH, RQ_DEPTH)?;
        let size = if s.op == Op::Lat { 64 } else { s.size };
        let posted = match s.op {
            Op::Send => RQ_DEPTH as u64,
            Op::Lat => 16,
            _ => 0,
        };
        for i in 0..posted {
            qp.post_receive(&[self.side.mr.slice(..size)], i)
                .map_err(e2s)?;
        }
        let endpoint = qp.endpoint();
        let qp = qp.handshake(s.endpoint).map_err(e2s)?;
        let remote = self.side.mr.remote_slice(..s.size.max(64));
        let stop = Arc::new(AtomicBool::new(false));
        let h = if posted > 0 || !PROGRESS_THREAD.load(Ordering::Relaxed) {
            let (st, q, mr, op) = (stop.clone(), qp.clone(), self.side.mr.clone(), s.op);
            std::thread::spawn(move || responder(&q, &cq, &mr, op, size, &st))
        } else {
            // WRITE/READ: the device's progress thread answers; keep the CQ alive with the QP
            std::thread::spawn(move || {
                drop(cq);
                Ok(())
            })
        };
        self.running = Some((stop, h, qp));
        Ok(Ready { endpoint, remote })
    }
    fn stop(&mut self) -> Result<(), String> {
        if let Some((stop, h, _qp)) = self.running.take() {
            stop.store(true, Ordering::Relaxed);
            h.join()
                .map_err(|_| "passive thread panicked".to_string())??;
        }
        Ok(())
    }
}

/// Drives the passive device (polling its CQ progresses it: ACKs, READ responses); Send: reposts
/// every receive; latency: reposts and answers each message with one of its own.
pub(super) fn responder(
    qp: &QueuePair,
    cq: &CompletionQueue,
    mr: &MemoryRegion,
    op: Op,
    size: usize,
    stop: &AtomicBool,
) -> Result<(), String> {
    let mut wcs = [WorkCompletion::default(); 64];
    let payload = [0x5Au8; 64];
    if op == Op::Lat {
        // the echo side of the ping-pong, pinned like the raw UDP one
        baseline::pin(1);
    }
    while !stop.load(Ordering::Relaxed) {
        let n = cq.poll(&mut wcs).map_err(e2s)?.len();
        for wc in &wcs[..n] {
            if !wc.is_ok() {
                // the peer tore its QP down: stop quietly
                return Ok(());
            }
            if wc.opcode() == WcOpcode::Recv {
                qp.post_receive(&[mr.slice(..size)], 0).map_err(e2s)?;
                if op == Op::Lat {
                    qp.post(&SendRequest::send_inline(2, &payload))
                        .map_err(e2s)?;
                }
            }
        }
    }
    Ok(())
}

/// The passive side on another host, over the control connection.
pub(super) struct RemotePassive {
    pub(super) w: TcpStream,
    pub(super) r: BufReader<TcpStream>,
}

impl RemotePassive {
    fn call<T: Serialize, R: for<'de> Deserialize<'de>>(&mut self, msg: &T) -> Result<R, String> {
        let mut line = serde_json::to_string(msg).map_err(|e| e.to_string())?;
        line.push('\n');
        self.w
            .write_all(line.as_bytes())
            .map_err(|e| format!("control connection: {e}"))?;
        let mut got = String::new();
        self.r
            .read_line(&mut got)
            .map_err(|e| format!("control connection: {e}"))?;
        let v: serde_json::Value = serde_json::from_str(got.trim())
            .map_err(|e| format!("control connection: {e}: {got:?}"))?;
        if let Some(e) = v.get("error").and_then(|e| e.as_str()) {
            return Err(format!("server: {e}"));
        }
        serde_json::from_value(v).map_err(|e| format!("control connection: {e}"))
    }
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "lowercase")]
pub(super) enum Cmd {
    Setup(Setup),
    Stop,
}

impl Passive for RemotePassive {
    fn setup(&mut self, s: &Setup) -> Result<Ready, String> {
        self.call(&Cmd::Setup(Setup {
            op: s.op,
            size: s.size,
            endpoint: s.endpoint,
        }))
    }
    fn stop(&mut self) -> Result<(), String> {
        let _: serde_json::Value = self.call(&Cmd::Stop)?;
        Ok(())
    }
}

/// `roce bench --server`: serves clients one after another until killed.
pub fn serve(ip: IpAddr, port: u16, mtu: Mtu, err: &mut dyn Write) -> Result<(), String> {
    let side = Side::open(ip, mtu, 1 << 20, 0.0)?;
    let listener =
        TcpListener::bind((ip, port)).map_err(|e| format!("control port {ip}:{port}: {e}"))?;
    let _ = writeln!(
        err,
        "roce bench: serving on {ip} (RoCE {ip}:4791, control {ip}:{port}); Ctrl-C to stop"
    );
    let mut passive = LocalPassive {
        side,
        running: None,
    };
    loop {
        let (s, peer) = listener.accept().map_err(|e| e.to_string())?;
        let _ = writeln!(err, "roce bench: client {peer}");
        let mut w = s.try_clone().map_err(|e| e.to_string())?;
        let r = BufReader::new(s);
        for line in r.lines() {
            let Ok(line) = line else { break };
            let reply = match serde_json::from_str::<Cmd>(&line) {
                Ok(Cmd::Setup(su)) => match passive.setup(&su) {
                    Ok(rd) => serde_json::to_value(rd).map_err(|e| e.to_string()),
                    Err(e) => Err(e),
                },
                Ok(Cmd::Stop) => passive.stop().map(|_| serde_json::json!({"ok": true})),
                Err(e) => Err(format!("bad request: {e}")),
            };
            let v = reply.unwrap_or_else(|e| serde_json::json!({ "error": e }));
            if writeln!(w, "{v}").is_err() {
                break;
            }
        }
        let _ = passive.stop();
        let _ = writeln!(err, "roce bench: client {peer} done");
    }
}
