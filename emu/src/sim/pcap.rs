//! A [`PacketSink`] that writes what crossed the simulated network as an Ethernet pcap file
//! (Wireshark dissects it as RoCEv2/InfiniBand). Frames are built with
//! `roce_wire::frame::write_ipv4_frame` / `write_ipv6_frame` using the headers the sending NIC
//! used for its ICRC (IPv4 ID 0, DF); the delivered ICRC bytes are kept as they were, so a
//! datagram the network corrupted shows up with a bad ICRC.
use super::PacketSink;
use crate::{Instant, RxMeta};
use roce_wire::frame::{write_ipv4_frame, write_ipv6_frame, Ipv4FrameSpec, Ipv6FrameSpec};
use roce_wire::pcap::{Precision, Writer};
use std::io::Write;
use std::net::IpAddr;
use std::time::Duration;

/// Writes every delivered datagram to a pcap stream (nanosecond timestamps).
pub struct PcapSink<W: Write> {
    w: Option<Writer<W>>,
    frame: Vec<u8>,
    /// Datagrams that could not be written (I/O errors, unparsable corrupted headers).
    pub errors: u64,
}

impl PcapSink<std::io::BufWriter<std::fs::File>> {
    /// Creates (truncates) `path`.
    pub fn create(path: impl AsRef<std::path::Path>) -> Result<Self, roce_wire::pcap::Error> {
        Ok(PcapSink {
            w: Some(Writer::create(path, Precision::Nano)?),
            frame: vec![0; 10_000],
            errors: 0,
        })
    }
}

impl<W: Write> PcapSink<W> {
    /// Wraps a writer.
    pub fn new(w: W) -> Result<Self, roce_wire::pcap::Error> {
        Ok(PcapSink {
            w: Some(Writer::new(w, Precision::Nano)?),
            frame: vec![0; 10_000],
            errors: 0,
        })
    }
    /// Flushes and returns the inner writer.
    pub fn finish(mut self) -> Option<W> {
        self.w.take().and_then(|w| w.into_inner().ok())
    }
}

impl<W: Write> PacketSink for PcapSink<W> {
    fn packet(
        &mut self,
        time: Instant,
        src_ip: IpAddr,
        dst_ip: IpAddr,
        src_port: u16,
        bytes: &[u8],
    ) {
        let meta = RxMeta {
            src_ip,
            dst_ip,
            src_port,
            ipv4_id: Some(0),
            tos: 0,
            ttl: 64,
            flow_label: 0,
        };
        self.packet_meta(time, &meta, bytes)
    }

    fn packet_meta(&mut self, time: Instant, m: &RxMeta, bytes: &[u8]) {
        let (src_ip, dst_ip, src_port) = (m.src_ip, m.dst_ip, m.src_port);
        let Some(w) = self.w.as_mut() else { return };
        let n = match (src_ip, dst_ip) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let spec = Ipv4FrameSpec {
                    src_mac: crate::net::synthetic_mac(src_ip),
                    dst_mac: crate::net::synthetic_mac(dst_ip),
                    src_ip: s,
                    dst_ip: d,
                    src_port,
                    ip_id: m.ipv4_id.unwrap_or(0),
                    tos: m.tos,
                    ttl: m.ttl,
                    ..Default::default()
                };
                write_ipv4_frame(&spec, bytes, &mut self.frame)
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                let spec = Ipv6FrameSpec {
                    src_mac: crate::net::synthetic_mac(src_ip),
                    dst_mac: crate::net::synthetic_mac(dst_ip),
                    src_ip: s,
                    dst_ip: d,
                    src_port,
                    traffic_class: m.tos,
                    flow_label: m.flow_label,
                    hop_limit: m.ttl,
                    ..Default::default()
                };
                write_ipv6_frame(&spec, bytes, &mut self.frame)
            }
            _ => {
                self.errors += 1;
                return;
            }
        };
        let Ok(n) = n else {
            self.errors += 1;
            return;
        };
        // keep the ICRC as delivered
        let k = bytes.len().min(4);
        self.frame[n - k..n].copy_from_slice(&bytes[bytes.len() - k..]);
        if w.write(Duration::from_nanos(time.as_nanos()), &self.frame[..n])
            .is_err()
        {
            self.errors += 1;
        }
    }
}
