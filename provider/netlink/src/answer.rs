//! The kernel's side of an RDMA netlink socket (`RDMA_NL_NLDEV`), for the requests `rdma dev`,
//! `rdma link` and `rdma system` send: what `drivers/infiniband/core/nldev.c` answers, with
//! the same attributes in the same order, the same framing (dump parts with `NLM_F_MULTI`
//! and `NLMSG_DONE`, a reply then an ack for a request with `NLM_F_ACK`, errors as
//! `NLMSG_ERROR`), the request's sequence number and the socket's port id. Everything else
//! (resource tracking, statistics, set / add / delete, other clients) gets `NLMSG_ERROR`
//! with `-EOPNOTSUPP`, so the tool fails loudly.

use crate::device::Device;
use crate::wire::{self, Header, Msg};

/// `RDMA_NL_NLDEV`: the client number in the high bits of the message type.
pub const RDMA_NL_NLDEV: u16 = 5;

/// `RDMA_NL_GET_TYPE(client, op)`.
pub fn msg_type(client: u16, op: u16) -> u16 {
    (client << 10) + op
}

/// `enum rdma_nldev_command` (the ones answered).
pub mod cmd {
    /// `RDMA_NLDEV_CMD_GET`: devices (doit and dump).
    pub const GET: u16 = 1;
    /// `RDMA_NLDEV_CMD_PORT_GET`: ports (doit and dump).
    pub const PORT_GET: u16 = 5;
    /// `RDMA_NLDEV_CMD_SYS_GET`: the subsystem's settings.
    pub const SYS_GET: u16 = 6;
}

/// `enum rdma_nldev_attr` (the ones written or read).
pub mod attr {
    /// u32
    pub const DEV_INDEX: u16 = 1;
    /// string
    pub const DEV_NAME: u16 = 2;
    /// u32 (for a device: its number of ports)
    pub const PORT_INDEX: u16 = 3;
    /// u64
    pub const CAP_FLAGS: u16 = 4;
    /// string
    pub const FW_VERSION: u16 = 5;
    /// u64
    pub const NODE_GUID: u16 = 6;
    /// u64
    pub const SYS_IMAGE_GUID: u16 = 7;
    /// u64
    pub const SUBNET_PREFIX: u16 = 8;
    /// u32
    pub const LID: u16 = 9;
    /// u32
    pub const SM_LID: u16 = 10;
    /// u8
    pub const LMC: u16 = 11;
    /// u8
    pub const PORT_STATE: u16 = 12;
    /// u8
    pub const PORT_PHYS_STATE: u16 = 13;
    /// u8
    pub const DEV_NODE_TYPE: u16 = 14;
    /// u32
    pub const NDEV_INDEX: u16 = 50;
    /// string
    pub const NDEV_NAME: u16 = 51;
    /// u8 (`RDMA_NLDEV_SYS_ATTR_NETNS_MODE`)
    pub const SYS_NETNS_MODE: u16 = 66;
    /// string
    pub const DEV_PROTOCOL: u16 = 67;
    /// u8
    pub const DEV_DIM: u16 = 84;
    /// u8 (`RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK`)
    pub const SYS_COPY_ON_FORK: u16 = 93;
}

/// The extended-ack text sent with `-EOPNOTSUPP` when the socket asked for extended acks.
pub const NOT_IMPLEMENTED: &str = "roce: this RDMA netlink request is not implemented for the \
     emulated device (roce run answers rdma dev, link and system show only)";

/// The socket options that change the framing of acks and errors.
#[derive(Debug, Clone, Copy, Default)]
pub struct SockOpts {
    /// The socket's port id (the kernel's answers carry it in `nlmsg_pid`).
    pub portid: u32,
    /// `NETLINK_CAP_ACK`: errors and acks echo only the request's header.
    pub cap_ack: bool,
    /// `NETLINK_EXT_ACK`: errors may carry a message.
    pub ext_ack: bool,
}

fn put_dev(m: &mut Msg<'_>, d: &Device) {
    m.u32(attr::DEV_INDEX, d.index).str(attr::DEV_NAME, &d.name);
}

fn dev_info(m: &mut Msg<'_>, d: &Device) {
    put_dev(m, d);
    m.u32(attr::PORT_INDEX, d.ports.len() as u32);
    if let Some(c) = d.caps {
        m.u64(attr::CAP_FLAGS, c);
    }
    if !d.fw.is_empty() {
        m.str(attr::FW_VERSION, &d.fw);
    }
    m.u64(attr::NODE_GUID, d.node_guid)
        .u64(attr::SYS_IMAGE_GUID, d.sys_image_guid)
        .u8(attr::DEV_NODE_TYPE, d.node_type)
        .u8(attr::DEV_DIM, 0)
        .str(attr::DEV_PROTOCOL, d.protocol());
}

fn port_info(m: &mut Msg<'_>, d: &Device, p: &crate::device::Port) {
    put_dev(m, d);
    m.u32(attr::PORT_INDEX, p.index);
    if let Some(ib) = &p.ib {
        m.u64(attr::CAP_FLAGS, ib.cap_flags)
            .u64(attr::SUBNET_PREFIX, ib.subnet_prefix)
            .u32(attr::LID, ib.lid)
            .u32(attr::SM_LID, ib.sm_lid)
            .u8(attr::LMC, ib.lmc);
    }
    m.u8(attr::PORT_STATE, p.state)
        .u8(attr::PORT_PHYS_STATE, p.phys_state);
    if let Some((name, idx)) = &p.netdev {
        m.u32(attr::NDEV_INDEX, *idx).str(attr::NDEV_NAME, name);
    }
}

/// An `NLMSG_ERROR` answering the request `req` (whole message) with `error` (0: an ack).
fn error(out: &mut Vec<u8>, so: &SockOpts, h: &Header, req: &[u8], error: i32) {
    let msg = so.ext_ack && error != 0;
    let mut flags = 0;
    if so.cap_ack {
        flags |= wire::F_CAPPED;
    }
    if msg {
        flags |= wire::F_ACK_TLVS;
    }
    let mut m = Msg::begin(out, wire::NLMSG_ERROR, flags, h.seq, so.portid);
    let echo = if so.cap_ack {
        &req[..wire::HDR_LEN]
    } else {
        req
    };
    let mut body = error.to_ne_bytes().to_vec();
    body.extend_from_slice(echo);
    m.raw(&body);
    if msg {
        m.str(wire::NLMSGERR_ATTR_MSG, NOT_IMPLEMENTED);
    }
    m.end();
}

fn done(out: &mut Vec<u8>, so: &SockOpts, h: &Header) {
    Msg::begin(out, wire::NLMSG_DONE, wire::F_MULTI, h.seq, so.portid)
        .raw(&0i32.to_ne_bytes())
        .end();
}

/// What one request produces: datagrams to deliver, in order.
fn one(h: &Header, req: &[u8], payload: &[u8], so: &SockOpts, devs: &[Device]) -> Vec<Vec<u8>> {
    let client = h.kind >> 10;
    let op = h.kind & 0x3ff;
    let dump = h.flags & wire::F_DUMP != 0;
    let (seq, pid) = (h.seq, so.portid);
    let dev = || {
        let i = wire::attr_u32(payload, attr::DEV_INDEX)?;
        devs.iter().find(|d| d.index == i)
    };
    let mut out = Vec::new();
    let err = match (client, op) {
        (RDMA_NL_NLDEV, cmd::GET) if dump => {
            for d in devs {
                let mut m = Msg::begin(&mut out, h.kind, wire::F_MULTI, seq, pid);
                dev_info(&mut m, d);
                m.end();
            }
            done(&mut out, so, h);
            return vec![out];
        }
        (RDMA_NL_NLDEV, cmd::GET) => match dev() {
            Some(d) => {
                let mut m = Msg::begin(&mut out, msg_type(RDMA_NL_NLDEV, cmd::GET), 0, seq, pid);
                dev_info(&mut m, d);
                m.end();
                0
            }
            None => -libc::EINVAL,
        },
        (RDMA_NL_NLDEV, cmd::PORT_GET) if dump => match dev() {
            Some(d) => {
                for p in &d.ports {
                    let mut m = Msg::begin(&mut out, h.kind, wire::F_MULTI, seq, pid);
                    port_info(&mut m, d, p);
                    m.end();
                }
                done(&mut out, so, h);
                return vec![out];
            }
            None => -libc::EINVAL,
        },
        (RDMA_NL_NLDEV, cmd::PORT_GET) => {
            let port = wire::attr_u32(payload, attr::PORT_INDEX);
            match dev().and_then(|d| Some((d, d.ports.iter().find(|p| Some(p.index) == port)?))) {
                Some((d, p)) => {
                    // nldev.c answers a single port with the GET type
                    let kind = msg_type(RDMA_NL_NLDEV, cmd::GET);
                    let mut m = Msg::begin(&mut out, kind, 0, seq, pid);
                    port_info(&mut m, d, p);
                    m.end();
                    0
                }
                None => -libc::EINVAL,
            }
        }
        (RDMA_NL_NLDEV, cmd::SYS_GET) if !dump => {
            // Devices are shared between network namespaces (the default), and registered
            // memory stays with the parent on fork (the emulator pins nothing).
            Msg::begin(&mut out, h.kind, 0, seq, pid)
                .u8(attr::SYS_NETNS_MODE, 1)
                .u8(attr::SYS_COPY_ON_FORK, 1)
                .end();
            0
        }
        _ => -libc::EOPNOTSUPP,
    };
    let mut grams = Vec::new();
    if err != 0 {
        let mut e = Vec::new();
        error(&mut e, so, h, req, err);
        grams.push(e);
        return grams;
    }
    grams.push(out);
    if h.flags & wire::F_ACK != 0 {
        let mut a = Vec::new();
        error(&mut a, so, h, req, 0);
        grams.push(a);
    }
    grams
}

/// The datagrams the kernel would queue on the socket for what was sent in `buf` (one
/// `send`: any number of requests).
pub fn answer(buf: &[u8], so: &SockOpts, devs: &[Device]) -> Vec<Vec<u8>> {
    let mut grams = Vec::new();
    for (h, msg, payload) in wire::messages(buf) {
        if h.flags & wire::F_REQUEST == 0 {
            continue;
        }
        if h.kind < wire::NLMSG_MIN_TYPE {
            // control messages: nothing to do, acked if asked
            if h.flags & wire::F_ACK != 0 {
                let mut a = Vec::new();
                error(&mut a, so, &h, msg, 0);
                grams.push(a);
            }
            continue;
        }
        grams.extend(one(&h, msg, payload, so, devs));
    }
    grams
}

#[cfg(test)]
#[path = "answer_tests.rs"]
mod tests;
