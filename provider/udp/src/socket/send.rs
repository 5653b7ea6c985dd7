//! [`Socket::send_batch`]: datagrams out with as few system calls as possible — a direct path
//! for a few datagrams that each make one message, and the general planner (GSO messages of at
//! most [`MAX_GSO_SEGMENTS`] segments, per-port sockets, the zero-checksum switch, waiting).

use super::*;

impl Socket {
    /// Sends `dgrams` with as few system calls as possible (`sendmmsg`, GSO where asked and
    /// available). Returns how many of `dgrams` were sent completely; with
    /// [`Wait::NonBlocking`] that can be fewer than `dgrams.len()` when the send buffer is full.
    /// A datagram is never left half-sent (its remaining GSO segments are waited for). An error
    /// is returned only when nothing was sent; otherwise the count so far is returned and the
    /// error repeats on the next call. Under `zero_checksum`, plain datagrams sent in the same
    /// call as a GSO datagram (through the same kernel socket) carry a valid checksum, like the
    /// GSO segments: one `sendmmsg` for all, and a `setsockopt` only when a call's mode differs
    /// from the previous call's.
    pub fn send_batch(&mut self, dgrams: &[OutDatagram<'_>], wait: Wait) -> io::Result<usize> {
        // The common case first: a few datagrams, each one message on the socket's own port.
        let mut done = match self.send_direct(dgrams) {
            Some(Ok(n)) => n,
            Some(Err(e)) => return Err(e),
            None => 0,
        };
        // When waiting began (read only if the socket is full: no clock read per send).
        let mut start = None;
        while done < dgrams.len() {
            // One run: consecutive datagrams using the same kernel socket and checksum mode.
            let sock_of = |s: &mut Self, d: &OutDatagram<'_>| match s.cfg.source_ports {
                SourcePorts::Fixed => 0,
                SourcePorts::PerPort => s.port_index(d.src_port).unwrap_or(0),
            };
            let wants_gso = |s: &Self, d: &OutDatagram<'_>| s.features.gso && d.segments() > 1;
            // A plain datagram does not need the zero checksum, only prefers it: it joins a
            // GSO datagram's run (and is sent with a valid checksum) instead of costing a
            // `setsockopt` and a `sendmmsg` of its own. The 16th packet of a 64 KiB message at
            // MTU 4096 (15 fit one GSO send) used to cost both, every message.
            let first = &dgrams[done];
            let sock = sock_of(self, first);
            let mut gso = wants_gso(self, first);
            let mut end = done + 1;
            while end < dgrams.len() && end - done < 1024 {
                let d = &dgrams[end];
                if sock_of(self, d) != sock {
                    break;
                }
                gso |= wants_gso(self, d);
                end += 1;
            }
            let n = match self.send_run(&dgrams[done..end], sock, gso, wait, &mut start) {
                Ok(n) => n,
                // Report what was sent; the error comes back on the next call.
                Err(_) if done > 0 => return Ok(done),
                Err(e) => return Err(e),
            };
            let stopped_early = done + n < end;
            done += n;
            if stopped_early {
                // The socket is full and `wait` does not allow more waiting.
                return Ok(done);
            }
        }
        Ok(done)
    }

    /// [`Socket::send_batch`] without its planning, for at most [`DIRECT_MAX`] datagrams that
    /// each make one `sendmmsg` message from the bound socket: plain datagrams, or GSO ones the
    /// kernel takes whole (at most [`MAX_GSO_SEGMENTS`] segments and [`MAX_UDP_PAYLOAD`]
    /// bytes, as [`super::coalesce::TxBatch`] builds them). One non-blocking `sendmmsg`;
    /// returns how many datagrams it took (the caller's general path sends the rest and does
    /// the waiting), or `None` when the batch does not qualify.
    fn send_direct(&mut self, dgrams: &[OutDatagram<'_>]) -> Option<io::Result<usize>> {
        if dgrams.is_empty()
            || dgrams.len() > DIRECT_MAX
            || self.cfg.source_ports != SourcePorts::Fixed
        {
            return None;
        }
        let mut gso = false;
        for d in dgrams {
            if d.segments() > 1 {
                let g = d.gso_size.unwrap_or(0) as usize;
                if !self.features.gso
                    || d.payload.len() > MAX_UDP_PAYLOAD
                    || d.payload.len().div_ceil(g) > MAX_GSO_SEGMENTS
                {
                    return None;
                }
                gso = true;
            }
        }
        if let Err(e) = self.set_run_checksum(0, gso) {
            return Some(Err(e));
        }
        while self.ctrl.len() < dgrams.len() {
            self.ctrl.push(AlignedBuf::new(cmsg::SEND_SPACE, 8));
            self.ctrl_len.push(0);
        }
        self.addrs.clear();
        let mut last: Option<SocketAddr> = None;
        for (i, d) in dgrams.iter().enumerate() {
            let to = SocketAddr::new(d.dst, d.dst_port);
            if last != Some(to) {
                self.addrs.push(SockAddr::from(to));
                last = Some(to);
            }
            let info = self.send_info(d, (d.segments() > 1).then(|| d.gso_size.unwrap_or(0)));
            self.ctrl_len[i] = cmsg::encode_send(self.ctrl[i].as_mut_slice(), self.v6, &info);
            // Index of this datagram's address: datagrams with one destination share one.
            self.plan_addr[i] = (self.addrs.len() - 1) as u8;
        }
        let fd = self.sock.as_raw_fd();
        let (addrs, ctrl, ctrl_len, plan_addr) =
            (&self.addrs, &self.ctrl, &self.ctrl_len, &self.plan_addr);
        let r = sys::sendmmsg(
            fd,
            dgrams.len(),
            |i| sys::SendMsg {
                addr: &addrs[plan_addr[i] as usize],
                data: dgrams[i].payload,
                control: &ctrl[i].as_slice()[..ctrl_len[i]],
            },
            &mut self.send_scratch,
        );
        Some(match r {
            Ok(n) => Ok(n),
            // Full, interrupted or refused: the general path retries, waits or reports.
            Err(_) => Ok(0),
        })
    }

    /// The control messages a message of `d` needs. TOS 0 and the default TTL are what the
    /// socket sends anyway: no cmsg for them (the wire is the same, the kernel parses less).
    fn send_info(&self, d: &OutDatagram<'_>, gso_size: Option<u16>) -> SendInfo {
        SendInfo {
            tos: d.tos.filter(|&t| t != 0),
            ttl: sendable_ttl(d.ttl).filter(|&t| Some(t) != self.default_ttl),
            gso_size,
        }
    }

    fn kernel_socket(&self, sock: usize) -> &socket2::Socket {
        if sock == 0 {
            &self.sock
        } else {
            &self.ports[sock - 1].sock
        }
    }

    fn set_run_checksum(&mut self, sock: usize, gso: bool) -> io::Result<()> {
        if !self.features.zero_checksum {
            return Ok(());
        }
        let want_no_check = !gso;
        let v6 = self.v6;
        let (s, cur) = if sock == 0 {
            (&self.sock, &mut self.no_check)
        } else {
            let p = &mut self.ports[sock - 1];
            (&p.sock, &mut p.no_check)
        };
        if *cur != want_no_check {
            set_no_check(s, v6, want_no_check)?;
            *cur = want_no_check;
        }
        Ok(())
    }

    /// Sends one run; returns the number of datagrams of `run` completely sent.
    fn send_run(
        &mut self,
        run: &[OutDatagram<'_>],
        sock: usize,
        gso: bool,
        wait: Wait,
        start: &mut Option<Instant>,
    ) -> io::Result<usize> {
        self.set_run_checksum(sock, gso)?;
        // Plan the messages.
        self.plan.clear();
        self.addrs.clear();
        let mut nctrl = 0usize;
        for (di, d) in run.iter().enumerate() {
            self.addrs
                .push(SockAddr::from(SocketAddr::new(d.dst, d.dst_port)));
            let segs = d.segments();
            let g = d.gso_size.unwrap_or(0) as usize;
            let mut push = |s: &mut Self, off: usize, len: usize, gso_size: Option<u16>| {
                if s.ctrl.len() <= nctrl {
                    s.ctrl.push(AlignedBuf::new(cmsg::SEND_SPACE, 8));
                    s.ctrl_len.push(0);
                }
                let info = s.send_info(d, gso_size);
                s.ctrl_len[nctrl] = cmsg::encode_send(s.ctrl[nctrl].as_mut_slice(), s.v6, &info);
                s.plan.push(Msg {
                    dgram: di as u32,
                    off: off as u32,
                    len: len as u32,
                    ctrl: nctrl as u32,
                });
                nctrl += 1;
            };
            if segs == 1 {
                push(self, 0, d.payload.len(), None);
            } else if gso {
                let per = Self::gso_per_message(g);
                let mut off = 0;
                while off < d.payload.len() {
                    let len = (per * g).min(d.payload.len() - off);
                    let gs = if len > g { Some(g as u16) } else { None };
                    push(self, off, len, gs);
                    off += len;
                }
            } else {
                let mut off = 0;
                while off < d.payload.len() {
                    let len = g.min(d.payload.len() - off);
                    push(self, off, len, None);
                    off += len;
                }
            }
        }
        // Send them.
        let fd = self.kernel_socket(sock).as_raw_fd();
        let mut sent = 0usize;
        let mut spin_until = None;
        while sent < self.plan.len() {
            let plan = &self.plan[sent..];
            let addrs = &self.addrs;
            let ctrl = &self.ctrl;
            let ctrl_len = &self.ctrl_len;
            let r = sys::sendmmsg(
                fd,
                plan.len(),
                |i| {
                    let m = plan[i];
                    let d = &run[m.dgram as usize];
                    sys::SendMsg {
                        addr: &addrs[m.dgram as usize],
                        data: &d.payload[m.off as usize..(m.off + m.len) as usize],
                        control: &ctrl[m.ctrl as usize].as_slice()[..ctrl_len[m.ctrl as usize]],
                    }
                },
                &mut self.send_scratch,
            );
            match r {
                Ok(n) => sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let mid_datagram =
                        sent > 0 && self.plan[sent].dgram == self.plan[sent - 1].dgram;
                    let w = if mid_datagram && wait == Wait::NonBlocking {
                        Wait::Block(Some(Duration::from_millis(100)))
                    } else {
                        wait
                    };
                    let start = *start.get_or_insert_with(Instant::now);
                    if !wait_ready(fd, true, w, start, &mut spin_until, None)? {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    if sent == 0 {
                        return Err(e);
                    }
                    break;
                }
            }
        }
        // Datagrams completely sent: those whose last message index < sent.
        let complete = if sent == self.plan.len() {
            run.len()
        } else {
            self.plan[sent].dgram as usize
        };
        Ok(complete)
    }
}
