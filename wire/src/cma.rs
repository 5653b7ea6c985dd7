//! RDMA CM (kernel `rdma_cm`, librdmacm) on top of the IB CM: service IDs, port spaces and the
//! `cma_hdr` that opens the private data of REQ and SIDR_REQ.
//!
//! **Service IDs.** An `AF_INET`/`AF_INET6` rdma_cm id listening on (or connecting to) port
//! `port` in port space `ps` uses service ID `(ps << 16) + port` (`rdma_get_service_id`). The
//! port spaces TCP, UDP and IB are `0x01xx`, so their service IDs have the IBA Annex A11 "IP
//! CM" form: the 40-bit prefix `0x0000000001`, then the protocol byte (0x06 TCP, 0x11 UDP, 0x3F
//! IB), then the port — e.g. rping's port 7174 over TCP gives `0x0000000001061C06`. IPoIB's
//! port space 0x0002 gives `0x0000000000020000 | port`, outside that prefix.
//!
//! **`cma_hdr`** (36 bytes; IBA Annex A11 calls it the IP CM private data header, with
//! MajV/MinV in byte 0, IPV in the high nibble of byte 1, SrcPort, SrcIP, DstIP):
//!
//! ```text
//!  0 cma_version (0x00)   1 ip_version 7:4 (4 or 6), 3:0 reserved
//!  2 port: the active side's rdma_cm source port (16)
//!  4 src_addr (16)   20 dst_addr (16): IPv6 as is; IPv4 as 12 zero bytes then the address
//! ```
//!
//! The kernel puts it first in every REQ and SIDR_REQ of an IP id (not of `AF_IB` ids, whose
//! user data starts at byte 0), then up to 56 (REQ) or 180 (SIDR_REQ) user bytes. The passive
//! side rejects a REQ whose `cma_version` is not 0 or whose `dst_addr` does not match the
//! listener (REJ 28).
use crate::field::*;
use crate::{Error, Result};
use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

mod field {
    use crate::field::Field;
    pub const CMA_VERSION: usize = 0;
    pub const IP_VERSION: usize = 1;
    pub const PORT: Field = 2..4;
    pub const SRC_ADDR: Field = 4..20;
    pub const DST_ADDR: Field = 20..36;
}

/// Length of the `cma_hdr`.
pub const HEADER_LEN: usize = 36;
/// `CMA_VERSION`: the only `cma_version` the kernel accepts.
pub const CMA_VERSION: u8 = 0x00;
/// User private data of an rdma_cm REQ: 92 − 36.
pub const REQ_USER_DATA_LEN: usize = crate::cm::req::PRIVATE_DATA_LEN - HEADER_LEN;
/// User private data of an rdma_cm SIDR_REQ: 216 − 36.
pub const SIDR_REQ_USER_DATA_LEN: usize = crate::cm::sidr_req::PRIVATE_DATA_LEN - HEADER_LEN;
/// `RDMA_UDP_QKEY`: the Q_Key of UDP and IB port-space UD ids (SIDR_REP Q_Key).
pub const RDMA_UDP_QKEY: u32 = 0x0123_4567;
/// `IB_CMA_SERVICE_ID`: the Annex A11 prefix of IP service IDs (with [`IB_CMA_SERVICE_ID_MASK`]).
pub const IB_CMA_SERVICE_ID: u64 = 0x0000_0000_0100_0000;
/// Mask of [`IB_CMA_SERVICE_ID`].
pub const IB_CMA_SERVICE_ID_MASK: u64 = 0xFFFF_FFFF_FF00_0000;

/// rdma_cm port spaces (`enum rdma_ucm_port_space`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortSpace {
    /// `RDMA_PS_IPOIB` 0x0002.
    Ipoib,
    /// `RDMA_PS_TCP` 0x0106: RC ids.
    Tcp,
    /// `RDMA_PS_UDP` 0x0111: UD ids (SIDR).
    Udp,
    /// `RDMA_PS_IB` 0x013F: RC or UD ids.
    Ib,
}

impl PortSpace {
    /// From the 16-bit value, `None` for values that are no port space.
    pub const fn from_code(v: u16) -> Option<PortSpace> {
        Some(match v {
            0x0002 => PortSpace::Ipoib,
            0x0106 => PortSpace::Tcp,
            0x0111 => PortSpace::Udp,
            0x013F => PortSpace::Ib,
            _ => return None,
        })
    }
    /// The 16-bit value.
    pub const fn code(self) -> u16 {
        match self {
            PortSpace::Ipoib => 0x0002,
            PortSpace::Tcp => 0x0106,
            PortSpace::Udp => 0x0111,
            PortSpace::Ib => 0x013F,
        }
    }
    /// `IPOIB`, `TCP`, `UDP`, `IB`.
    pub const fn name(self) -> &'static str {
        match self {
            PortSpace::Ipoib => "IPOIB",
            PortSpace::Tcp => "TCP",
            PortSpace::Udp => "UDP",
            PortSpace::Ib => "IB",
        }
    }
}

impl fmt::Display for PortSpace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The service ID of port `port` in port space `ps` (`rdma_get_service_id`).
pub const fn service_id(ps: PortSpace, port: u16) -> u64 {
    (ps.code() as u64) << 16 | port as u64
}

/// An rdma_cm service ID taken apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ServiceId {
    /// Port space (bits 31:16).
    pub port_space: PortSpace,
    /// Port (bits 15:0): the listener's port.
    pub port: u16,
}

impl ServiceId {
    /// `Some` when `sid` is an rdma_cm service ID: bits 63:32 zero and bits 31:16 one of the
    /// four port spaces (`rdma_ps_from_service_id`, `cma_port_from_service_id`).
    pub const fn from_u64(sid: u64) -> Option<ServiceId> {
        if sid >> 32 != 0 {
            return None;
        }
        match PortSpace::from_code((sid >> 16) as u16) {
            Some(port_space) => Some(ServiceId {
                port_space,
                port: sid as u16,
            }),
            None => None,
        }
    }
    /// The 64-bit service ID.
    pub const fn to_u64(self) -> u64 {
        service_id(self.port_space, self.port)
    }
}

impl fmt::Display for ServiceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} port {}", self.port_space, self.port)
    }
}

/// The flow label rdma_cm puts in a RoCE REQ path for an IPv4 id, or an IPv6 id without a flow
/// label of its own: `(src_port * 31 + dst_port) & 0xFFFFF` (`cma_get_roce_udp_flow_label`).
pub const fn roce_udp_flow_label(src_port: u16, dst_port: u16) -> u32 {
    (src_port as u32 * 31 + dst_port as u32) & 0xF_FFFF
}

/// The UDP source port rxe gives an RC QP whose path has flow label `fl`
/// (`rdma_get_udp_sport`): `(fl & 0x3FFF) ^ ((fl & 0xFC000) >> 14)`, OR 0xC000.
pub const fn udp_sport_from_flow_label(fl: u32) -> u16 {
    ((fl & 0x3FFF) ^ ((fl & 0xF_C000) >> 14)) as u16 | crate::ROCE_V2_SPORT_BASE
}

crate::field::fixed_view!(HEADER_LEN, "cma_hdr");

impl<T: AsRef<[u8]>> Packet<T> {
    /// cma_version.
    pub fn cma_version(&self) -> u8 {
        self.buffer.as_ref()[field::CMA_VERSION]
    }
    /// IP version (the high nibble of byte 1).
    pub fn ip_version(&self) -> u8 {
        self.buffer.as_ref()[field::IP_VERSION] >> 4
    }
    /// The active side's source port.
    pub fn port(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::PORT)
    }
    /// The 16 bytes of src_addr.
    pub fn src_addr_bytes(&self) -> [u8; 16] {
        addr16(self.buffer.as_ref(), field::SRC_ADDR)
    }
    /// The 16 bytes of dst_addr.
    pub fn dst_addr_bytes(&self) -> [u8; 16] {
        addr16(self.buffer.as_ref(), field::DST_ADDR)
    }
    /// src_addr read as `ip_version` says (IPv4: the last four bytes), `None` for other
    /// versions.
    pub fn src_addr(&self) -> Option<IpAddr> {
        addr_of(self.ip_version(), self.src_addr_bytes())
    }
    /// dst_addr read as `ip_version` says, `None` for other versions.
    pub fn dst_addr(&self) -> Option<IpAddr> {
        addr_of(self.ip_version(), self.dst_addr_bytes())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets cma_version.
    pub fn set_cma_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::CMA_VERSION] = v;
    }
    /// Sets the IP version nibble (the low nibble 0).
    pub fn set_ip_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::IP_VERSION] = (v & 0xF) << 4;
    }
    /// Sets the port.
    pub fn set_port(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::PORT, v)
    }
    /// Sets src_addr (IPv4: 12 zero bytes then the address).
    pub fn set_src_addr(&mut self, a: IpAddr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&bytes_of(a));
    }
    /// Sets dst_addr (IPv4: 12 zero bytes then the address).
    pub fn set_dst_addr(&mut self, a: IpAddr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&bytes_of(a));
    }
}

fn addr16(b: &[u8], f: Field) -> [u8; 16] {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[f]);
    a
}

fn addr_of(ip_version: u8, a: [u8; 16]) -> Option<IpAddr> {
    match ip_version {
        4 => Some(IpAddr::V4(Ipv4Addr::new(a[12], a[13], a[14], a[15]))),
        6 => Some(IpAddr::V6(Ipv6Addr::from(a))),
        _ => None,
    }
}

fn bytes_of(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(v4) => {
            let mut b = [0u8; 16];
            b[12..].copy_from_slice(&v4.octets());
            b
        }
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// High-level `cma_hdr`. Both addresses have the IP version of `src_addr` on the wire;
/// [`Repr::parse`] never yields a mix. The twelve bytes in front of an IPv4 address and the
/// low nibble of byte 1 are not kept (emitted 0, as the kernel sends them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// cma_version ([`CMA_VERSION`]; kept as found, the kernel rejects anything else).
    pub cma_version: u8,
    /// The active side's rdma_cm source port.
    pub port: u16,
    /// The active side's address.
    pub src_addr: IpAddr,
    /// The passive side's (listener's) address.
    pub dst_addr: IpAddr,
}

impl Repr {
    /// The header the kernel writes for a connection from `src` (its port) to `dst`.
    pub const fn new(src_addr: IpAddr, port: u16, dst_addr: IpAddr) -> Repr {
        Repr {
            cma_version: CMA_VERSION,
            port,
            src_addr,
            dst_addr,
        }
    }

    /// Parses a `cma_hdr`. [`Error::Malformed`] when the IP version is neither 4 nor 6.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        let (Some(src_addr), Some(dst_addr)) = (p.src_addr(), p.dst_addr()) else {
            return Err(Error::Malformed);
        };
        Ok(Repr {
            cma_version: p.cma_version(),
            port: p.port(),
            src_addr,
            dst_addr,
        })
    }

    /// Parses the `cma_hdr` at the start of a REQ or SIDR_REQ private data field.
    pub fn parse_private_data(private_data: &[u8]) -> Result<Repr> {
        Repr::parse(&Packet::new_checked(private_data)?)
    }

    /// Always [`HEADER_LEN`].
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// 4 or 6, from `src_addr`.
    pub const fn ip_version(&self) -> u8 {
        match self.src_addr {
            IpAddr::V4(_) => 4,
            IpAddr::V6(_) => 6,
        }
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_cma_version(self.cma_version);
        p.set_ip_version(self.ip_version());
        p.set_port(self.port);
        p.set_src_addr(self.src_addr);
        p.set_dst_addr(self.dst_addr);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cma_hdr v{} ", self.cma_version)?;
        match self.src_addr {
            IpAddr::V4(a) => write!(f, "{a}:{}", self.port)?,
            IpAddr::V6(a) => write!(f, "[{a}]:{}", self.port)?,
        }
        write!(f, " → {}", self.dst_addr)
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn service_ids_of_the_notes() {
        // rping (port 7174) and perftest (18515) over TCP, as captured (cm-notes §4, §8).
        assert_eq!(service_id(PortSpace::Tcp, 7174), 0x0000_0000_0106_1C06);
        assert_eq!(service_id(PortSpace::Tcp, 18515), 0x0000_0000_0106_4853);
        assert_eq!(service_id(PortSpace::Udp, 7174), 0x0000_0000_0111_1C06);
        assert_eq!(service_id(PortSpace::Ib, 1), 0x0000_0000_013F_0001);
        assert_eq!(service_id(PortSpace::Ipoib, 2), 0x0000_0000_0002_0002);
        let s = ServiceId::from_u64(0x0000_0000_0106_1C06).unwrap();
        assert_eq!((s.port_space, s.port), (PortSpace::Tcp, 7174));
        assert_eq!(s.to_string(), "TCP port 7174");
        assert_eq!(s.to_u64(), 0x0000_0000_0106_1C06);
        for ps in [PortSpace::Tcp, PortSpace::Udp, PortSpace::Ib] {
            assert_eq!(
                service_id(ps, 9) & IB_CMA_SERVICE_ID_MASK,
                IB_CMA_SERVICE_ID
            );
        }
        assert_eq!(ServiceId::from_u64(0x0000_0001_0106_1C06), None);
        assert_eq!(ServiceId::from_u64(0x0000_0000_0107_1C06), None);
        assert_eq!(ServiceId::from_u64(0x1000_0000_0000_0001), None);
    }

    #[test]
    fn flow_label_and_sport() {
        // (sport * 31 + dport) & 0xFFFFF, then rxe's fold to a UDP source port.
        assert_eq!(
            roce_udp_flow_label(40000, 7174),
            (40000 * 31 + 7174) & 0xF_FFFF
        );
        let fl = roce_udp_flow_label(40000, 7174);
        assert_eq!(fl, 0x3_07C6);
        // low 14 bits 0x07C6 XOR the top six 0x0C, OR 0xC000
        assert_eq!(udp_sport_from_flow_label(fl), 0xC7CA);
    }

    /// IPv4 `cma_hdr` laid out by hand from the notes' §4 table.
    #[test]
    fn ipv4_golden() {
        let mut b = [0u8; HEADER_LEN];
        b[0] = 0x00; // cma_version
        b[1] = 0x40; // IPv4
        b[2..4].copy_from_slice(&[0x9c, 0x40]); // port 40000
        b[16..20].copy_from_slice(&[10, 0, 0, 1]); // src_addr: 12 zero bytes then 10.0.0.1
        b[32..36].copy_from_slice(&[10, 0, 0, 2]); // dst_addr
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.cma_version(), p.ip_version(), p.port()), (0, 4, 40000));
        let r = Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Repr::new(
                Ipv4Addr::new(10, 0, 0, 1).into(),
                40000,
                Ipv4Addr::new(10, 0, 0, 2).into()
            )
        );
        assert_eq!(r.to_string(), "cma_hdr v0 10.0.0.1:40000 → 10.0.0.2");
        let mut out = [0xEEu8; HEADER_LEN];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, b);
        for n in 0..HEADER_LEN {
            assert_eq!(
                Repr::parse_private_data(&b[..n]).unwrap_err(),
                Error::Truncated
            );
        }
    }

    #[test]
    fn ipv6_golden_and_bad_version() {
        let src: Ipv6Addr = "fd00::1".parse().unwrap();
        let dst: Ipv6Addr = "fd00::2".parse().unwrap();
        let mut b = [0u8; HEADER_LEN];
        b[1] = 0x60;
        b[2..4].copy_from_slice(&[0x1c, 0x06]);
        b[4..20].copy_from_slice(&src.octets());
        b[20..36].copy_from_slice(&dst.octets());
        let r = Repr::parse_private_data(&b).unwrap();
        assert_eq!(r, Repr::new(src.into(), 7174, dst.into()));
        assert_eq!(r.to_string(), "cma_hdr v0 [fd00::1]:7174 → fd00::2");
        let mut out = [0u8; HEADER_LEN];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, b);
        // AF_IB private data or garbage: no IP version 4/6
        for v in [0x00, 0x10, 0x50, 0xF0] {
            b[1] = v;
            assert_eq!(Repr::parse_private_data(&b).unwrap_err(), Error::Malformed);
        }
        // the low nibble of ip_version is ignored
        b[1] = 0x6F;
        assert_eq!(Repr::parse_private_data(&b).unwrap().ip_version(), 6);
    }
}
