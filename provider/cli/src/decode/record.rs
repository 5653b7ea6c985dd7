//! One decoded RoCE packet, as `roce decode` prints it (text line or JSON object).
//!
//! Everything is read through the `roce-wire` header views on the bytes the capture holds, so
//! truncated packets show whichever headers were captured.
use super::cm::Mad;
use roce_wire::frame::{fmt_mac, RoceFrame, RoceVersion, Verdict};
use roce_wire::opcode::{hdr_len, Offsets};
use roce_wire::{aeth, atomic_ack_eth, atomic_eth, bth, deth, feth, ieth, immdt, mad, rdeth, reth};
use roce_wire::{transport, Error, Opcode, Support, ICRC_LEN};
use serde::Serialize;
use std::fmt::Write as _;
use std::time::Duration;

/// RETH fields.
#[derive(Debug, Clone, Serialize)]
pub struct Reth {
    /// Virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// DMA length.
    pub dma_len: u32,
}

/// AETH fields.
#[derive(Debug, Clone, Serialize)]
pub struct Aeth {
    /// Raw syndrome byte.
    pub syndrome: u8,
    /// Decoded syndrome, e.g. `ACK credits=31`.
    pub syndrome_text: String,
    /// Message sequence number.
    pub msn: u32,
}

/// DETH fields.
#[derive(Debug, Clone, Serialize)]
pub struct Deth {
    /// Queue key.
    pub qkey: u32,
    /// Source QP.
    pub src_qp: u32,
}

/// AtomicETH fields.
#[derive(Debug, Clone, Serialize)]
pub struct AtomicEth {
    /// Virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap or add operand.
    pub swap_add: u64,
    /// Compare operand.
    pub compare: u64,
}

/// FETH fields (RDMA FLUSH).
#[derive(Debug, Clone, Serialize)]
pub struct Feth {
    /// Placement type bits (1 global visibility, 2 persistence).
    pub placement_type: u8,
    /// Selectivity level (0 the RETH's range, 1 the whole region).
    pub selectivity_level: u8,
    /// Reserved bits 31:6 (0 from a correct sender).
    pub reserved: u32,
}

/// Extension headers present (and captured) in a packet.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Extensions {
    /// RDETH EE-context (RD/DC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rdeth_eec: Option<u32>,
    /// DETH.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deth: Option<Deth>,
    /// XRCETH SRQ number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xrc_srqn: Option<u32>,
    /// FETH.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feth: Option<Feth>,
    /// RETH.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reth: Option<Reth>,
    /// AtomicETH.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub atomic_eth: Option<AtomicEth>,
    /// AETH.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aeth: Option<Aeth>,
    /// AtomicAckETH original remote data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub atomic_ack_orig: Option<u64>,
    /// Immediate data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub immdt: Option<u32>,
    /// IETH R_Key to invalidate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ieth_rkey: Option<u32>,
    /// The 8-byte value of an ATOMIC WRITE (its payload, when it is 8 bytes and captured).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub atomic_write_data: Option<u64>,
}

/// BTH fields.
#[derive(Debug, Clone, Serialize)]
pub struct Bth {
    /// Opcode.
    pub opcode: u8,
    /// Opcode name, e.g. `RC SEND_ONLY` or `RC unknown(0x15)`.
    pub name: String,
    /// `supported`, `unsupported` (RD/DC/XRC) or `unknown` (reserved).
    pub support: &'static str,
    /// Destination QP.
    pub qpn: u32,
    /// PSN.
    pub psn: u32,
    /// AckReq.
    pub ack_req: bool,
    /// Solicited event.
    pub se: bool,
    /// MigReq.
    pub migreq: bool,
    /// Pad count.
    pub pad: u8,
    /// Partition key.
    pub pkey: u16,
    /// FECN.
    pub fecn: bool,
    /// BECN.
    pub becn: bool,
}

/// A decoded packet.
#[derive(Debug, Clone, Serialize)]
pub struct PacketRecord {
    /// Always `"packet"`.
    pub kind: &'static str,
    /// Capture file.
    pub file: String,
    /// 1-based frame number in the file.
    pub frame: u64,
    /// Seconds since the first frame of the file.
    pub time: f64,
    /// Seconds since the Unix epoch.
    pub timestamp: f64,
    /// `v1`, `v2`, or `null` when the frame could not be identified.
    pub version: Option<&'static str>,
    /// Source address (GID for RoCEv1).
    pub src: Option<String>,
    /// Destination address.
    pub dst: Option<String>,
    /// UDP source port (RoCEv2).
    pub sport: Option<u16>,
    /// UDP destination port (RoCEv2).
    pub dport: Option<u16>,
    /// Source MAC.
    pub src_mac: Option<String>,
    /// Destination MAC.
    pub dst_mac: Option<String>,
    /// VLAN IDs, outermost first.
    pub vlans: Vec<u16>,
    /// IPv4 identification.
    pub ip_id: Option<u16>,
    /// TOS / traffic class.
    pub tos: Option<u8>,
    /// TTL / hop limit.
    pub ttl: Option<u8>,
    /// BTH, when captured.
    pub bth: Option<Bth>,
    /// Extension headers.
    pub ext: Extensions,
    /// Payload length (without pad), from the IP/UDP lengths.
    pub payload_len: Option<usize>,
    /// Bytes after the BTH of a ConnectX DC packet (opcodes 0x40–0x5F), which follow a vendor
    /// layout and are not decoded: the DC extension, the extension headers and the payload,
    /// without the ICRC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dc_undecoded_len: Option<usize>,
    /// The management datagram of a UD SEND to QP 1 (CM messages decoded), when captured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mad: Option<Mad>,
    /// `valid`, `invalid`, `truncated` or `malformed`.
    pub icrc: &'static str,
    /// ICRC computed (when invalid).
    pub icrc_expected: Option<u32>,
    /// ICRC found (when invalid).
    pub icrc_found: Option<u32>,
    /// Why the packet is malformed, or why the transport headers do not parse.
    pub error: Option<String>,
}

/// `RC SEND_ONLY`, `DC RDMA_WRITE_ONLY`, `RC unknown(0x15)`. The RD opcode space is named DC
/// on RoCE, as Wireshark names it (see [`Opcode::is_roce_dc`]).
pub fn opcode_name(op: u8) -> String {
    let op = Opcode(op);
    match (op.is_roce_dc(), op.info().is_known()) {
        (true, true) => format!("DC {}", op.info().name),
        (true, false) => format!("DC unknown({:#04x})", op.0),
        _ => op.to_string(),
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn take(t: &[u8], off: Option<usize>, len: usize) -> Option<&[u8]> {
    off.and_then(|o| t.get(o..o.checked_add(len)?))
}

fn extensions(t: &[u8], o: &Offsets) -> Extensions {
    Extensions {
        rdeth_eec: take(t, o.rdeth, hdr_len::RDETH)
            .map(|b| rdeth::Packet::new_unchecked(b).ee_context()),
        deth: take(t, o.deth, hdr_len::DETH).map(|b| {
            let d = deth::Packet::new_unchecked(b);
            Deth {
                qkey: d.qkey(),
                src_qp: d.src_qp(),
            }
        }),
        xrc_srqn: take(t, o.xrceth, hdr_len::XRCETH)
            .map(|b| u32::from_be_bytes([0, b[1], b[2], b[3]])),
        feth: take(t, o.feth, hdr_len::FETH).map(|b| {
            let f = feth::Packet::new_unchecked(b);
            Feth {
                placement_type: f.placement_type(),
                selectivity_level: f.selectivity_level(),
                reserved: f.reserved(),
            }
        }),
        reth: take(t, o.reth, hdr_len::RETH).map(|b| {
            let r = reth::Packet::new_unchecked(b);
            Reth {
                va: r.va(),
                rkey: r.rkey(),
                dma_len: r.dma_len(),
            }
        }),
        atomic_eth: take(t, o.atmeth, hdr_len::ATMETH).map(|b| {
            let a = atomic_eth::Packet::new_unchecked(b);
            AtomicEth {
                va: a.va(),
                rkey: a.rkey(),
                swap_add: a.swap_add(),
                compare: a.compare(),
            }
        }),
        aeth: take(t, o.aeth, hdr_len::AETH).map(|b| {
            let a = aeth::Packet::new_unchecked(b);
            Aeth {
                syndrome: a.syndrome_byte(),
                syndrome_text: a.syndrome().to_string(),
                msn: a.msn(),
            }
        }),
        atomic_ack_orig: take(t, o.atmack, hdr_len::ATMACK)
            .map(|b| atomic_ack_eth::Packet::new_unchecked(b).orig()),
        immdt: take(t, o.immdt, hdr_len::IMMDT).map(|b| immdt::Packet::new_unchecked(b).imm()),
        ieth_rkey: take(t, o.ieth, hdr_len::IETH).map(|b| ieth::Packet::new_unchecked(b).rkey()),
        atomic_write_data: None,
    }
}

impl PacketRecord {
    fn empty(file: &str, frame: u64, rel: Duration, ts: Duration) -> PacketRecord {
        PacketRecord {
            kind: "packet",
            file: file.to_string(),
            frame,
            time: secs(rel),
            timestamp: secs(ts),
            version: None,
            src: None,
            dst: None,
            sport: None,
            dport: None,
            src_mac: None,
            dst_mac: None,
            vlans: Vec::new(),
            ip_id: None,
            tos: None,
            ttl: None,
            bth: None,
            ext: Extensions::default(),
            payload_len: None,
            dc_undecoded_len: None,
            mad: None,
            icrc: "malformed",
            icrc_expected: None,
            icrc_found: None,
            error: None,
        }
    }

    /// A frame that is (possibly) RoCE but whose headers could not be made sense of.
    pub fn malformed(file: &str, frame: u64, rel: Duration, ts: Duration, e: Error) -> Self {
        let mut r = Self::empty(file, frame, rel, ts);
        r.error = Some(e.to_string());
        r
    }

    /// A RoCE packet and its verdict.
    pub fn new(
        file: &str,
        frame: u64,
        rel: Duration,
        ts: Duration,
        f: &RoceFrame<'_>,
        v: Verdict,
    ) -> Self {
        let mut r = Self::empty(file, frame, rel, ts);
        r.version = Some(match f.version {
            RoceVersion::V1 => "v1",
            RoceVersion::V2 => "v2",
        });
        r.src = Some(f.l3.src.to_string());
        r.dst = Some(f.l3.dst.to_string());
        r.sport = f.udp.map(|u| u.src_port);
        r.dport = f.udp.map(|u| u.dst_port);
        r.src_mac = f.l2.src_mac.as_ref().map(fmt_mac);
        r.dst_mac = f.l2.dst_mac.as_ref().map(fmt_mac);
        r.vlans = f.l2.vlans.iter().flatten().map(|t| t.vid).collect();
        r.ip_id = f.l3.ip_id;
        r.tos = Some(f.l3.tos);
        r.ttl = Some(f.l3.ttl);
        r.icrc = match v {
            Verdict::IcrcValid => "valid",
            Verdict::IcrcInvalid { expected, found } => {
                r.icrc_expected = Some(expected);
                r.icrc_found = Some(found);
                "invalid"
            }
            Verdict::Truncated => "truncated",
            Verdict::NotRoce | Verdict::Malformed(_) => "malformed",
        };
        if let Verdict::Malformed(e) = v {
            r.error = Some(e.to_string());
        }
        let t = f.transport;
        if let Ok(b) = bth::Packet::new_checked(t) {
            let op = b.opcode();
            let info = op.info();
            r.bth = Some(Bth {
                opcode: op.0,
                name: opcode_name(op.0),
                support: match info.support {
                    Support::Supported => "supported",
                    Support::KnownUnsupported => "unsupported",
                    Support::Unknown => "unknown",
                },
                qpn: b.dest_qp(),
                psn: b.psn().value(),
                ack_req: b.ack_req(),
                se: b.se(),
                migreq: b.migreq(),
                pad: b.pad_cnt(),
                pkey: b.pkey(),
                fecn: b.fecn(),
                becn: b.becn(),
            });
            if op.is_roce_dc() {
                // A vendor layout: show the BTH only, and how many bytes follow it.
                r.dc_undecoded_len = f.transport_len.checked_sub(bth::HEADER_LEN + ICRC_LEN);
            } else if info.is_known() {
                let o = info.offsets();
                r.ext = extensions(t, &o);
                r.payload_len = f
                    .transport_len
                    .checked_sub(o.payload + b.pad_cnt() as usize + ICRC_LEN);
                if info.flags.contains(roce_wire::OpFlags::ATOMIC_WRITE) && r.payload_len == Some(8)
                {
                    r.ext.atomic_write_data = take(t, Some(o.payload), 8)
                        .map(|v| u64::from_be_bytes(v.try_into().expect("8 bytes")));
                }
                let ud_send =
                    op == Opcode::UD_SEND_ONLY || op == Opcode::UD_SEND_ONLY_WITH_IMMEDIATE;
                if ud_send && b.dest_qp() == mad::GSI_QPN {
                    let end = r
                        .payload_len
                        .map_or(t.len(), |n| o.payload + n)
                        .min(t.len());
                    r.mad = t.get(o.payload..end).and_then(Mad::decode);
                }
            }
            // For complete packets, say why the transport layer does not parse, if it does not.
            if !f.truncated && r.error.is_none() && !op.is_roce_dc() {
                let p = transport::Packet::new_unchecked(t);
                if let Err(e) = transport::Repr::parse(&p) {
                    r.error = Some(e.to_string());
                }
            }
        } else if r.error.is_none() && !f.truncated {
            r.error = Some(Error::BadLength.to_string());
        }
        r
    }

    /// The one-line text form.
    pub fn text(&self) -> String {
        let mut s = format!("{:>6} {:>11.6} ", self.frame, self.time);
        let (Some(src), Some(dst)) = (&self.src, &self.dst) else {
            let _ = write!(
                s,
                "? malformed ({})",
                self.error.as_deref().unwrap_or("unknown")
            );
            return s;
        };
        match (self.sport, self.dport) {
            (Some(sp), Some(dp)) => {
                let _ = write!(s, "{src}:{sp} → {dst}:{dp} RoCEv2");
            }
            _ => {
                let _ = write!(s, "{src} → {dst} RoCEv1");
            }
        }
        match &self.bth {
            None => s.push_str(" (BTH not captured)"),
            Some(b) => {
                let _ = write!(s, " {}", b.name);
                if b.support == "unsupported" {
                    s.push_str(" [unsupported]");
                }
                let _ = write!(s, " QP={:#08x} PSN={}", b.qpn, b.psn);
                for (on, what) in [
                    (b.ack_req, " A"),
                    (b.se, " SE"),
                    (b.migreq, " M"),
                    (b.fecn, " FECN"),
                    (b.becn, " BECN"),
                ] {
                    if on {
                        s.push_str(what);
                    }
                }
                if b.pad != 0 {
                    let _ = write!(s, " pad={}", b.pad);
                }
                if b.pkey != roce_wire::DEFAULT_PKEY {
                    let _ = write!(s, " pkey={:#06x}", b.pkey);
                }
            }
        }
        self.ext_text(&mut s);
        if let Some(m) = &self.mad {
            m.text(&mut s);
        }
        if let Some(n) = self.payload_len {
            let _ = write!(s, " len={n}");
        }
        if let Some(n) = self.dc_undecoded_len {
            let _ = write!(s, " DC vendor layout, BTH only: {n} bytes not decoded");
        }
        match self.icrc {
            "valid" => s.push_str(" ICRC ok"),
            "invalid" => {
                let _ = write!(
                    s,
                    " ICRC BAD (computed {:#010x}, found {:#010x})",
                    self.icrc_expected.unwrap_or(0),
                    self.icrc_found.unwrap_or(0)
                );
            }
            "truncated" => s.push_str(" truncated"),
            other => {
                let _ = write!(s, " {other}");
            }
        }
        if let Some(e) = &self.error {
            let _ = write!(s, " [{e}]");
        }
        s
    }

    fn ext_text(&self, s: &mut String) {
        let e = &self.ext;
        if let Some(v) = e.rdeth_eec {
            let _ = write!(s, " RDETH(eec={v:#x})");
        }
        if let Some(d) = &e.deth {
            let _ = write!(s, " DETH(qkey={:#x} srcqp={:#x})", d.qkey, d.src_qp);
        }
        if let Some(v) = e.xrc_srqn {
            let _ = write!(s, " XRCETH(srqn={v:#x})");
        }
        if let Some(f) = &e.feth {
            let r = feth::Repr {
                placement_type: f.placement_type,
                selectivity_level: f.selectivity_level,
                resv: f.reserved,
            };
            let _ = write!(s, " {r}");
        }
        if let Some(r) = &e.reth {
            let _ = write!(
                s,
                " RETH(va={:#x} rkey={:#x} len={})",
                r.va, r.rkey, r.dma_len
            );
        }
        if let Some(a) = &e.atomic_eth {
            let _ = write!(
                s,
                " AtomicETH(va={:#x} rkey={:#x} swap_add={:#x} cmp={:#x})",
                a.va, a.rkey, a.swap_add, a.compare
            );
        }
        if let Some(a) = &e.aeth {
            let _ = write!(s, " AETH({} msn={})", a.syndrome_text, a.msn);
        }
        if let Some(v) = e.atomic_ack_orig {
            let _ = write!(s, " AtomicAckETH(orig={v:#x})");
        }
        if let Some(v) = e.immdt {
            let _ = write!(s, " ImmDt({v:#010x})");
        }
        if let Some(v) = e.ieth_rkey {
            let _ = write!(s, " IETH(rkey={v:#x})");
        }
        if let Some(v) = e.atomic_write_data {
            let _ = write!(s, " AtomicWrite(data={v:#018x})");
        }
    }
}
