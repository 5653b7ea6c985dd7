use super::*;
use crate::device::tests::rxe0;

const SO: SockOpts = SockOpts {
    portid: 4242,
    cap_ack: true,
    ext_ack: true,
};

fn request(op: u16, flags: u16, seq: u32, a: &[(u16, u32)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut m = Msg::begin(&mut out, msg_type(RDMA_NL_NLDEV, op), flags, seq, 0);
    for (k, v) in a {
        m.u32(*k, *v);
    }
    m.end();
    out
}

/// A message's attributes: `(type, data)`.
type Attrs = Vec<(u16, Vec<u8>)>;

/// `(header, attributes)` of every message in a datagram.
fn decode(gram: &[u8]) -> Vec<(Header, Attrs)> {
    wire::messages(gram)
        .map(|(h, _, p)| (h, wire::attrs(p).map(|(k, d)| (k, d.to_vec())).collect()))
        .collect()
}

fn kinds(a: &[(u16, Vec<u8>)]) -> Vec<u16> {
    a.iter().map(|(k, _)| *k).collect()
}

/// The error code and echoed header of an `NLMSG_ERROR`.
fn error_of(gram: &[u8]) -> (Header, i32, Header) {
    let (h, _, p) = wire::messages(gram).next().expect("one message");
    assert_eq!(h.kind, wire::NLMSG_ERROR);
    let code = i32::from_ne_bytes(p[..4].try_into().unwrap());
    (h, code, Header::parse(&p[4..]).unwrap())
}

const F_REQ_ACK: u16 = wire::F_REQUEST | wire::F_ACK;

#[test]
fn a_device_dump_is_one_part_per_device_with_nldev_attributes_then_done() {
    let req = request(cmd::GET, F_REQ_ACK | wire::F_DUMP, 99, &[]);
    let grams = answer(&req, &SO, &[rxe0()]);
    assert_eq!(grams.len(), 1, "parts and DONE in one datagram");
    let msgs = decode(&grams[0]);
    assert_eq!(msgs.len(), 2);
    let (h, a) = &msgs[0];
    assert_eq!(
        (h.kind, h.flags, h.seq, h.pid),
        (0x1401, wire::F_MULTI, 99, 4242)
    );
    // nldev.c's fill_dev_info order; no FW_VERSION for an empty fw_ver (as rxe)
    assert_eq!(
        kinds(a),
        [
            attr::DEV_INDEX,
            attr::DEV_NAME,
            attr::PORT_INDEX,
            attr::CAP_FLAGS,
            attr::NODE_GUID,
            attr::SYS_IMAGE_GUID,
            attr::DEV_NODE_TYPE,
            attr::DEV_DIM,
            attr::DEV_PROTOCOL
        ]
    );
    assert_eq!(a[1].1, b"rxe0\0");
    assert_eq!(a[2].1, 1u32.to_ne_bytes());
    assert_eq!(a[3].1, 0x1223c76u64.to_ne_bytes());
    assert_eq!(a[4].1, 0x5054_00ff_fe18_0002u64.to_ne_bytes());
    assert_eq!(a[8].1, b"roce\0");
    let (h, a) = &msgs[1];
    assert_eq!(
        (h.kind, h.flags, h.seq, h.pid),
        (wire::NLMSG_DONE, wire::F_MULTI, 99, 4242)
    );
    assert!(a.is_empty());
    assert_eq!(h.len, 20, "DONE carries one int");
}

#[test]
fn a_port_request_gets_the_port_then_an_ack_echoing_the_request_header() {
    let req = request(
        cmd::PORT_GET,
        F_REQ_ACK,
        7,
        &[(attr::DEV_INDEX, 0), (attr::PORT_INDEX, 1)],
    );
    let grams = answer(&req, &SO, &[rxe0()]);
    assert_eq!(grams.len(), 2);
    let msgs = decode(&grams[0]);
    let (h, a) = &msgs[0];
    assert_eq!((h.kind, h.flags, h.seq, h.pid), (0x1401, 0, 7, 4242));
    // RoCE port: no cap flags, subnet prefix, LIDs or LMC (those are for InfiniBand ports)
    assert_eq!(
        kinds(a),
        [
            attr::DEV_INDEX,
            attr::DEV_NAME,
            attr::PORT_INDEX,
            attr::PORT_STATE,
            attr::PORT_PHYS_STATE,
            attr::NDEV_INDEX,
            attr::NDEV_NAME
        ]
    );
    assert_eq!((a[3].1[0], a[4].1[0]), (4, 5));
    assert_eq!(a[5].1, 2u32.to_ne_bytes());
    assert_eq!(a[6].1, b"eth0\0");
    let (h, code, echoed) = error_of(&grams[1]);
    assert_eq!(
        (h.flags, h.seq, h.pid, h.len),
        (wire::F_CAPPED, 7, 4242, 36)
    );
    assert_eq!(code, 0);
    assert_eq!(echoed, Header::parse(&req).unwrap());
}

#[test]
fn a_port_dump_uses_the_port_get_type_and_ends_with_done() {
    let req = request(
        cmd::PORT_GET,
        F_REQ_ACK | wire::F_DUMP,
        3,
        &[(attr::DEV_INDEX, 0)],
    );
    let msgs = decode(&answer(&req, &SO, &[rxe0()])[0]);
    assert_eq!(msgs.len(), 2);
    assert_eq!((msgs[0].0.kind, msgs[0].0.flags), (0x1405, wire::F_MULTI));
    assert_eq!(msgs[1].0.kind, wire::NLMSG_DONE);
}

#[test]
fn an_unknown_device_or_port_is_einval_as_in_nldev() {
    for a in [
        vec![(attr::DEV_INDEX, 1), (attr::PORT_INDEX, 1)],
        vec![(attr::DEV_INDEX, 0), (attr::PORT_INDEX, 2)],
        vec![(attr::DEV_INDEX, 0)],
    ] {
        let grams = answer(&request(cmd::PORT_GET, F_REQ_ACK, 5, &a), &SO, &[rxe0()]);
        assert_eq!(grams.len(), 1);
        assert_eq!(error_of(&grams[0]).1, -libc::EINVAL, "{a:?}");
    }
    let grams = answer(&request(cmd::GET, F_REQ_ACK, 5, &[]), &SO, &[rxe0()]);
    assert_eq!(error_of(&grams[0]).1, -libc::EINVAL);
}

#[test]
fn unimplemented_commands_fail_with_eopnotsupp_and_a_message() {
    // RES_GET (rdma res), STAT_GET (rdma statistic), SET, NEWLINK; dump and do
    for (op, flags) in [
        (9, F_REQ_ACK | wire::F_DUMP),
        (9, F_REQ_ACK),
        (17, F_REQ_ACK | wire::F_DUMP),
        (2, F_REQ_ACK),
        (3, F_REQ_ACK),
    ] {
        let req = request(op, flags, 11, &[(attr::DEV_INDEX, 0)]);
        let grams = answer(&req, &SO, &[rxe0()]);
        assert_eq!(grams.len(), 1, "op {op}");
        let (h, code, _) = error_of(&grams[0]);
        assert_eq!(code, -libc::EOPNOTSUPP, "op {op}");
        assert_eq!(h.flags, wire::F_CAPPED | wire::F_ACK_TLVS);
        let tail = &grams[0][wire::HDR_LEN + 4 + wire::HDR_LEN..];
        let m: Vec<_> = wire::attrs(tail).collect();
        assert_eq!(m[0].0, wire::NLMSGERR_ATTR_MSG);
        assert!(m[0].1.starts_with(b"roce: "));
    }
    // another client (RDMA_NL_LS) too
    let mut req = Vec::new();
    Msg::begin(&mut req, msg_type(4, 0), F_REQ_ACK, 1, 0).end();
    assert_eq!(error_of(&answer(&req, &SO, &[])[0]).1, -libc::EOPNOTSUPP);
}

#[test]
fn without_cap_ack_the_whole_request_is_echoed_and_without_ext_ack_no_message() {
    let so = SockOpts {
        portid: 1,
        cap_ack: false,
        ext_ack: false,
    };
    let req = request(9, F_REQ_ACK, 2, &[(attr::DEV_INDEX, 0)]);
    let grams = answer(&req, &so, &[rxe0()]);
    let (h, code, _) = error_of(&grams[0]);
    assert_eq!((code, h.flags), (-libc::EOPNOTSUPP, 0));
    assert_eq!(&grams[0][wire::HDR_LEN + 4..], &req[..]);
}

#[test]
fn system_get_reports_shared_netns_and_copy_on_fork() {
    let grams = answer(&request(cmd::SYS_GET, F_REQ_ACK, 8, &[]), &SO, &[]);
    assert_eq!(grams.len(), 2);
    let msgs = decode(&grams[0]);
    assert_eq!(msgs[0].0.kind, 0x1406);
    assert_eq!(
        msgs[0].1,
        [
            (attr::SYS_NETNS_MODE, vec![1]),
            (attr::SYS_COPY_ON_FORK, vec![1])
        ]
    );
    assert_eq!(error_of(&grams[1]).1, 0);
}

#[test]
fn requests_without_the_request_flag_and_garbage_get_nothing() {
    let mut req = request(cmd::GET, wire::F_DUMP, 1, &[]);
    assert!(answer(&req, &SO, &[rxe0()]).is_empty());
    req.truncate(10);
    assert!(answer(&req, &SO, &[rxe0()]).is_empty());
    assert!(answer(&[0xff; 64], &SO, &[rxe0()]).is_empty());
}

#[test]
fn arbitrary_bytes_never_panic_and_every_answer_is_well_formed() {
    // A fixed-seed generator: valid headers with random types, flags and attribute bytes,
    // and plain noise.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..20_000 {
        let len = (next() % 96) as usize;
        let mut buf: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if i % 2 == 0 && len >= wire::HDR_LEN {
            let ops = [cmd::GET, cmd::PORT_GET, cmd::SYS_GET, 9, 17, 0x3ff];
            let kind = msg_type(RDMA_NL_NLDEV, ops[(next() % 6) as usize]);
            buf[..4].copy_from_slice(&(len as u32).to_ne_bytes());
            buf[4..6].copy_from_slice(&kind.to_ne_bytes());
            buf[6] |= wire::F_REQUEST as u8;
        }
        let so = SockOpts {
            portid: 9,
            cap_ack: i % 3 == 0,
            ext_ack: i % 5 == 0,
        };
        for g in answer(&buf, &so, &[rxe0()]) {
            let total: usize = wire::messages(&g)
                .map(|(h, _, _)| wire::align(h.len as usize))
                .sum();
            assert_eq!(total, g.len(), "answer to {buf:02x?}");
            assert!(wire::messages(&g).all(|(h, _, _)| h.pid == 9));
        }
    }
}
