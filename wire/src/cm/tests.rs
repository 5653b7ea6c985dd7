//! Golden vectors for every CM message, laid out by hand from the field tables (IBA Tables
//! 106–120 as `ibta_vol1_c12.h` declares them, cross-checked against rdma-cm-notes §3): each
//! vector lists `(offset, bytes)` per field, independently of the views' `field` modules.
//! The values are those kernel rdma_cm on rxe sends (notes §8) where the notes give them.
use super::*;
use crate::cma;
use crate::Psn;
use core::net::Ipv4Addr;

/// A 232-byte payload holding `fields`, zero elsewhere. Panics if two fields overlap.
fn payload(fields: &[(usize, &[u8])]) -> [u8; PAYLOAD_LEN] {
    let mut b = [0u8; PAYLOAD_LEN];
    let mut used = [false; PAYLOAD_LEN];
    for &(at, bytes) in fields {
        for (i, &v) in bytes.iter().enumerate() {
            assert!(!used[at + i], "field at {at} overlaps at byte {}", at + i);
            used[at + i] = true;
            b[at + i] = v;
        }
    }
    b
}

/// The whole 256-byte MAD: the kernel CM header (notes §2) with `attr` and `tid`, then `p`.
fn mad_bytes(attr: u16, tid: u64, p: &[u8; PAYLOAD_LEN]) -> [u8; 256] {
    let mut m = [0u8; 256];
    m[..4].copy_from_slice(&[0x01, 0x07, 0x02, 0x03]);
    m[8..16].copy_from_slice(&tid.to_be_bytes());
    m[16..18].copy_from_slice(&attr.to_be_bytes());
    m[24..].copy_from_slice(p);
    m
}

const LCID_A: [u8; 4] = [0x12, 0x34, 0x56, 0x78];
const LCID_P: [u8; 4] = [0x9a, 0xbc, 0xde, 0xf0];
const SID_TCP_7174: [u8; 8] = [0x00, 0x00, 0x00, 0x00, 0x01, 0x06, 0x1c, 0x06];
const GUID_A: [u8; 8] = [0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55];
const GUID_P: [u8; 8] = [0x02, 0x66, 0x77, 0xff, 0xfe, 0x88, 0x99, 0xaa];
const GID_10_0_0_1: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1];
const GID_10_0_0_2: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2];
/// `cma_hdr` (notes §4): version 0, IPv4, port 40000, 10.0.0.1 → 10.0.0.2, IPv4 addresses in
/// the last four of sixteen bytes.
const CMA_HDR_V4: [u8; 36] = [
    0x00, 0x40, 0x9c, 0x40, //
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 1, //
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2,
];

/// A REQ as rping's (notes §8 row 1): RC, resp res 1, init depth 1, timeouts 20/20, retry 7,
/// RNR 7, MTU 3, max CM retries 15, P_Key 0xFFFF, LIDs 0xFFFF, IPv4-mapped GIDs, flow label
/// (40000·31 + 7174) & 0xFFFFF = 0x307C6, hop limit 64, ACK timeout 19, cma_hdr + "hello".
fn req_golden() -> [u8; PAYLOAD_LEN] {
    payload(&[
        (0, &LCID_A),                    // Local Communication ID
        (8, &SID_TCP_7174),              // Service ID
        (16, &GUID_A),                   // Local CA GUID
        (32, &[0x00, 0x00, 0x11]),       // Local QPN
        (35, &[0x01]),                   // Responder Resources
        (39, &[0x01]),                   // Initiator Depth
        (43, &[20 << 3]),                // Remote CM Response Timeout 20, RC, no E2E
        (44, &[0xab, 0xcd, 0xef]),       // Starting PSN
        (47, &[20 << 3 | 7]),            // Local CM Response Timeout 20, Retry Count 7
        (48, &[0xff, 0xff]),             // Partition Key
        (50, &[3 << 4 | 7]),             // MTU 1024, no RDC, RNR Retry Count 7
        (51, &[15 << 4]),                // Max CM Retries 15, no SRQ, ext 0
        (52, &[0xff, 0xff, 0xff, 0xff]), // Primary Local / Remote Port LID
        (56, &GID_10_0_0_1),             // Primary Local Port GID
        (72, &GID_10_0_0_2),             // Primary Remote Port GID
        (88, &[0x30, 0x7c, 0x60, 0x00]), // Flow Label 0x307C6, Packet Rate 0
        (93, &[64]),                     // Hop Limit (Traffic Class 0, SL 0 around it)
        (95, &[19 << 3]),                // Primary Local ACK Timeout
        (140, &CMA_HDR_V4),              // Private Data: cma_hdr
        (176, b"hello"),                 // … then user data
    ])
}

#[test]
fn req_golden_fields_and_round_trip() {
    let b = req_golden();
    let p = req::Packet::new_checked(&b[..]).unwrap();
    assert_eq!(p.local_comm_id(), 0x1234_5678);
    assert_eq!(p.vendor_id(), 0);
    assert_eq!(p.service_id(), cma::service_id(cma::PortSpace::Tcp, 7174));
    assert_eq!(p.local_ca_guid(), 0x0211_22ff_fe33_4455);
    assert_eq!(p.local_qkey(), 0);
    assert_eq!(p.local_qpn(), 0x11);
    assert_eq!((p.responder_resources(), p.initiator_depth()), (1, 1));
    assert_eq!((p.local_eecn(), p.remote_eecn()), (0, 0));
    assert_eq!(p.remote_cm_response_timeout(), 20);
    assert_eq!(p.transport_service_type(), req::service_type::RC);
    assert!(!p.end_to_end_flow_control());
    assert_eq!(p.starting_psn(), Psn::new(0xab_cdef));
    assert_eq!((p.local_cm_response_timeout(), p.retry_count()), (20, 7));
    assert_eq!(p.partition_key(), 0xFFFF);
    assert_eq!(
        (p.path_mtu(), p.rdc_exists(), p.rnr_retry_count()),
        (3, false, 7)
    );
    assert_eq!(
        (p.max_cm_retries(), p.srq(), p.extended_transport_type()),
        (15, false, 0)
    );
    let pp = p.primary_path();
    assert_eq!(
        (pp.local_port_lid(), pp.remote_port_lid()),
        (0xFFFF, 0xFFFF)
    );
    assert_eq!(pp.local_port_gid(), GID_10_0_0_1);
    assert_eq!(pp.remote_port_gid(), GID_10_0_0_2);
    assert_eq!(pp.flow_label(), cma::roce_udp_flow_label(40000, 7174));
    assert_eq!(pp.packet_rate(), 0);
    assert_eq!((pp.traffic_class(), pp.hop_limit(), pp.sl()), (0, 64, 0));
    assert!(!pp.subnet_local());
    assert_eq!(pp.local_ack_timeout(), 19);
    assert_eq!(p.alternate_path().local_port_lid(), 0);
    assert!(!p.sap_supported());
    let r = req::Repr::parse(&p).unwrap();
    assert!(!r.alternate_path.is_present());
    assert_eq!(r.qp_type_name(), "RC");
    let h = cma::Repr::parse_private_data(&r.private_data).unwrap();
    assert_eq!(
        h,
        cma::Repr::new(
            Ipv4Addr::new(10, 0, 0, 1).into(),
            40000,
            Ipv4Addr::new(10, 0, 0, 2).into()
        )
    );
    assert_eq!(&r.private_data[cma::HEADER_LEN..][..5], b"hello");
    let mut out = [0x5au8; PAYLOAD_LEN];
    r.emit(&mut req::Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, b);
    assert_eq!(
        r.to_string(),
        "REQ lcid=0x12345678 sid=0x0000000001061c06 guid=0x021122fffe334455 RC qpn=0x11 \
         psn=11259375 resp_res=1 init_depth=1 mtu=1024 retry=7 rnr_retry=7 timeouts=20/20 \
         max_cm_retries=15 pkey=0xffff path[10.0.0.1 → 10.0.0.2 lid 0xffff→0xffff \
         fl=0x307c6 rate=0 tc=0 hl=64 sl=0 ack_timeout=19]"
    );
}

#[test]
fn req_every_bit_field_at_its_place() {
    // XRC over SRQ with E2E, RDC, SAP, subnet local, SL 15, rate 63, alternate path, ECE vendor.
    let b = payload(&[
        (5, &[0x00, 0x02, 0xc9]),         // Vendor ID
        (28, &[0x01, 0x23, 0x45, 0x67]),  // Local Q_Key
        (36, &[0xaa, 0xbb, 0xcc]),        // Local EECN
        (40, &[0x11, 0x22, 0x33]),        // Remote EECN
        (43, &[31 << 3 | 3 << 1 | 1]),    // timeout 31, type 3, E2E
        (47, &[1 << 3 | 1]),              // timeout 1, retry 1
        (50, &[5 << 4 | 1 << 3 | 1]),     // MTU 4096, RDC, RNR 1
        (51, &[1 << 4 | 1 << 3 | 1]),     // retries 1, SRQ, XRC
        (88, &[0xff, 0xff, 0xf0, 0x3f]),  // flow label 0xFFFFF, rate 63
        (92, &[0xb8, 1, 0xf8, 31 << 3]),  // TC, hop limit, SL 15 + subnet local, ACK
        (96, &[0x00, 0x05, 0x00, 0x06]),  // alternate LIDs 5 and 6
        (132, &[0x00, 0x00, 0x10, 0x01]), // alternate flow label 1, rate 1
        (139, &[7 << 3 | 1 << 2]),        // alternate ACK timeout 7, SAP Supported
    ]);
    let p = req::Packet::new_checked(&b[..]).unwrap();
    assert_eq!(p.vendor_id(), 0x0002c9);
    assert_eq!(p.local_qkey(), 0x0123_4567);
    assert_eq!((p.local_eecn(), p.remote_eecn()), (0xaabbcc, 0x112233));
    assert_eq!(p.remote_cm_response_timeout(), 31);
    assert_eq!(p.transport_service_type(), req::service_type::EXTENDED);
    assert!(p.end_to_end_flow_control());
    assert_eq!((p.local_cm_response_timeout(), p.retry_count()), (1, 1));
    assert_eq!(
        (p.path_mtu(), p.rdc_exists(), p.rnr_retry_count()),
        (5, true, 1)
    );
    assert_eq!(
        (p.max_cm_retries(), p.srq(), p.extended_transport_type()),
        (1, true, 1)
    );
    let pp = p.primary_path();
    assert_eq!((pp.flow_label(), pp.packet_rate()), (0xF_FFFF, 63));
    assert_eq!((pp.traffic_class(), pp.hop_limit(), pp.sl()), (0xb8, 1, 15));
    assert!(pp.subnet_local());
    assert_eq!(pp.local_ack_timeout(), 31);
    let ap = p.alternate_path();
    assert_eq!((ap.local_port_lid(), ap.remote_port_lid()), (5, 6));
    assert_eq!((ap.flow_label(), ap.packet_rate()), (1, 1));
    assert_eq!(ap.local_ack_timeout(), 7);
    assert!(p.sap_supported());
    let r = req::Repr::parse(&p).unwrap();
    assert_eq!(r.qp_type_name(), "XRC");
    assert!(r.alternate_path.is_present());
    assert_eq!(mtu_bytes(r.path_mtu), 4096);
    let mut out = [0u8; PAYLOAD_LEN];
    r.emit(&mut req::Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, b);
}

#[test]
fn req_reserved_bits_are_dropped_and_emitted_zero() {
    let mut b = req_golden();
    for (at, v) in [
        (4, 0xff),
        (24, 0xff),
        (27, 0xff),
        (91, 0xc0),
        (94, 0x07),
        (95, 0x07),
    ] {
        b[at] |= v;
    }
    let r = req::Repr::parse(&req::Packet::new_checked(&b[..]).unwrap()).unwrap();
    let mut out = [0xffu8; PAYLOAD_LEN];
    r.emit(&mut req::Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, req_golden());
}

fn rep_golden() -> [u8; PAYLOAD_LEN] {
    payload(&[
        (0, &LCID_P),              // Local Communication ID
        (4, &LCID_A),              // Remote Communication ID
        (12, &[0x00, 0x00, 0x12]), // Local QPN (Local Q_Key 0 before it)
        (20, &[0x12, 0x34, 0x56]), // Starting PSN
        (24, &[0x01, 0x01]),       // Responder Resources, Initiator Depth
        (26, &[15 << 3]),          // Target ACK Delay 15, failover 0, no E2E
        (27, &[7 << 5]),           // RNR Retry Count 7, no SRQ
        (28, &GUID_P),             // Local CA GUID
        (36, b"accepted"),         // Private Data
    ])
}

#[test]
fn rep_golden_fields_and_round_trip() {
    let b = rep_golden();
    let p = rep::Packet::new_checked(&b[..]).unwrap();
    assert_eq!(
        (p.local_comm_id(), p.remote_comm_id()),
        (0x9abc_def0, 0x1234_5678)
    );
    assert_eq!(
        (p.local_qkey(), p.local_qpn(), p.local_eecn()),
        (0, 0x12, 0)
    );
    assert_eq!(p.starting_psn(), Psn::new(0x12_3456));
    assert_eq!((p.responder_resources(), p.initiator_depth()), (1, 1));
    assert_eq!((p.target_ack_delay(), p.failover_accepted()), (15, 0));
    assert!(!p.end_to_end_flow_control());
    assert_eq!((p.rnr_retry_count(), p.srq()), (7, false));
    assert_eq!(p.local_ca_guid(), 0x0266_77ff_fe88_99aa);
    assert_eq!(&p.private_data()[..8], b"accepted");
    assert_eq!(p.vendor_id(), 0);
    let r = rep::Repr::parse(&p).unwrap();
    let mut out = [0xffu8; PAYLOAD_LEN];
    r.emit(&mut rep::Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, b);
    assert_eq!(
        r.to_string(),
        "REP lcid=0x9abcdef0 rcid=0x12345678 guid=0x026677fffe8899aa qpn=0x12 psn=1193046 \
         resp_res=1 init_depth=1 ack_delay=15 rnr_retry=7"
    );
}

#[test]
fn rep_vendor_id_srq_failover_e2e() {
    let b = payload(&[
        (8, &[0x01, 0x23, 0x45, 0x67]),  // Local Q_Key
        (12, &[0xff, 0xff, 0xfe, 0x00]), // Local QPN, Vendor ID 23:16
        (16, &[0x00, 0x00, 0x07, 0x02]), // Local EECN, Vendor ID 15:8
        (20, &[0xff, 0xff, 0xff, 0xc9]), // Starting PSN, Vendor ID 7:0
        (26, &[1 << 3 | 2 << 1 | 1]),    // ack delay 1, failover 2, E2E
        (27, &[1 << 5 | 1 << 4]),        // RNR 1, SRQ
    ]);
    let p = rep::Packet::new_checked(&b[..]).unwrap();
    assert_eq!(p.vendor_id(), 0x0002c9);
    assert_eq!((p.local_qpn(), p.local_eecn()), (0xff_fffe, 7));
    assert_eq!(p.starting_psn(), Psn::new(0xff_ffff));
    assert_eq!((p.target_ack_delay(), p.failover_accepted()), (1, 2));
    assert!(p.end_to_end_flow_control());
    assert_eq!((p.rnr_retry_count(), p.srq()), (1, true));
    let r = rep::Repr::parse(&p).unwrap();
    let mut out = [0u8; PAYLOAD_LEN];
    r.emit(&mut rep::Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, b);
}

#[test]
fn rtu_dreq_drep_golden() {
    let b = payload(&[(0, &LCID_A), (4, &LCID_P)]);
    let r = rtu::Repr::parse(&rtu::Packet::new_checked(&b[..]).unwrap()).unwrap();
    assert_eq!(r, rtu::Repr::new(0x1234_5678, 0x9abc_def0));
    assert_eq!(r.to_string(), "RTU lcid=0x12345678 rcid=0x9abcdef0");
    let mut out = [0xffu8; PAYLOAD_LEN];
    r.emit(&mut rtu::Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, b);

    // DREQ from the active side: Remote QPN/EECN = the passive side's QPN (notes §8 row 64).
    let b = payload(&[(0, &LCID_A), (4, &LCID_P), (8, &[0x00, 0x00, 0x12])]);
    let p = dreq::Packet::new_checked(&b[..]).unwrap();
    assert_eq!(p.remote_qpn_eecn(), 0x12);
    let r = dreq::Repr::parse(&p).unwrap();
    assert_eq!(r, dreq::Repr::new(0x1234_5678, 0x9abc_def0, 0x12));
    assert_eq!(
        r.to_string(),
        "DREQ lcid=0x12345678 rcid=0x9abcdef0 remote_qpn=0x12"
    );
    let mut out = [0xffu8; PAYLOAD_LEN];
    r.emit(&mut dreq::Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, b);

    // DREP: the comm IDs swapped, 224 bytes of private data from byte 8.
    let b = payload(&[(0, &LCID_P), (4, &LCID_A), (8, b"bye"), (231, &[0xee])]);
    let r = drep::Repr::parse(&drep::Packet::new_checked(&b[..]).unwrap()).unwrap();
    assert_eq!(
        (r.local_comm_id, r.remote_comm_id),
        (0x9abc_def0, 0x1234_5678)
    );
    assert_eq!(
        (&r.private_data[..3], r.private_data[223]),
        (&b"bye"[..], 0xee)
    );
    let mut out = [0u8; PAYLOAD_LEN];
    r.emit(&mut drep::Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, b);
}

#[test]
fn rej_consumer_reject_with_private_data() {
    // rdma_reject: reason 28, REQ rejected, no ARI, Local Comm ID = the passive id.
    let b = payload(&[
        (0, &LCID_P),
        (4, &LCID_A),
        (10, &[0x00, 28]),  // Reason (Message REJected 0, info length 0 before it)
        (84, b"no thanks"), // Private Data
        (231, &[0x01]),     // its 148th byte
    ]);
    let p = rej::Packet::new_checked(&b[..]).unwrap();
    assert_eq!(
        (p.local_comm_id(), p.remote_comm_id()),
        (0x9abc_def0, 0x1234_5678)
    );
    assert_eq!(p.message_rejected(), MsgResponse::Req);
    assert_eq!(p.reject_info_length(), 0);
    assert_eq!(p.reason(), RejReason::ConsumerDefined);
    let r = rej::Repr::parse(&p).unwrap();
    assert_eq!(r.ari(), &[] as &[u8]);
    let mut pd = [0u8; rej::PRIVATE_DATA_LEN];
    pd[..9].copy_from_slice(b"no thanks");
    pd[147] = 1;
    assert_eq!(
        r,
        rej::Repr::new(0x9abc_def0, 0x1234_5678, RejReason::ConsumerDefined, &pd).unwrap()
    );
    assert!(rej::Repr::new(0, 0, RejReason::ConsumerDefined, &[0; 149]).is_none());
    let mut out = [0xffu8; PAYLOAD_LEN];
    r.emit(&mut rej::Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, b);
    assert_eq!(
        r.to_string(),
        "REJ lcid=0x9abcdef0 rcid=0x12345678 rejected=REQ reason=28 (consumer defined)"
    );
}

#[test]
fn rej_timeout_with_ari_and_reason_codes() {
    // Destroying an id in REQ_SENT: reason 4 with ARI = own node GUID (8 bytes); REP rejected.
    let b = payload(&[
        (0, &LCID_A),
        (8, &[1 << 6, 8 << 1]),
        (10, &[0, 4]),
        (12, &GUID_A),
    ]);
    let r = rej::Repr::parse(&rej::Packet::new_checked(&b[..]).unwrap()).unwrap();
    assert_eq!(r.message_rejected, MsgResponse::Rep);
    assert_eq!((r.reason, r.reject_info_length), (RejReason::Timeout, 8));
    assert_eq!(r.ari(), &GUID_A);
    assert!(r
        .to_string()
        .ends_with("rejected=REP reason=4 (timeout) ari=021122fffe334455"));
    let mut out = [0u8; PAYLOAD_LEN];
    r.emit(&mut rej::Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, b);
    // Reject Info Length over 72 is malformed; 72 is fine.
    let mut bad = b;
    bad[9] = 73 << 1;
    let e = rej::Repr::parse(&rej::Packet::new_checked(&bad[..]).unwrap()).unwrap_err();
    assert_eq!(e, Error::Malformed);
    bad[9] = 72 << 1;
    assert!(rej::Repr::parse(&rej::Packet::new_checked(&bad[..]).unwrap()).is_ok());
    // Every code round-trips; the kernel's names for the ones it sends (notes §5.1).
    for c in 0..=u16::MAX {
        assert_eq!(RejReason::from_code(c).code(), c);
    }
    assert_eq!(RejReason::from_code(8), RejReason::InvalidServiceId);
    assert_eq!(RejReason::from_code(10), RejReason::StaleConn);
    assert_eq!(RejReason::from_code(12).text(), Some("invalid GID"));
    assert_eq!(RejReason::from_code(34), RejReason::Other(34));
    assert_eq!(
        RejReason::from_code(35),
        RejReason::VendorOptionNotSupported
    );
}

#[test]
fn mra_golden() {
    // The kernel's MRA for a duplicate REQ: Message MRAed 0 (REQ), Service Timeout 24.
    let b = payload(&[(0, &LCID_P), (4, &LCID_A), (9, &[24 << 3]), (10, b"wait")]);
    let p = mra::Packet::new_checked(&b[..]).unwrap();
    assert_eq!(
        (p.message_mraed(), p.service_timeout()),
        (MsgResponse::Req, 24)
    );
    let r = mra::Repr::parse(&p).unwrap();
    assert_eq!(&r.private_data[..4], b"wait");
    let mut out = [0xffu8; PAYLOAD_LEN];
    r.emit(&mut mra::Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, b);
    assert_eq!(
        r.to_string(),
        "MRA lcid=0x9abcdef0 rcid=0x12345678 mraed=REQ service_timeout=24"
    );
    let b = payload(&[(8, &[2 << 6]), (9, &[31 << 3])]);
    let p = mra::Packet::new_checked(&b[..]).unwrap();
    assert_eq!(
        (p.message_mraed(), p.service_timeout()),
        (MsgResponse::Other, 31)
    );
}

#[test]
fn sidr_req_rep_golden() {
    // udaddy-style SIDR: UDP port space, port 7174; P_Key 0xFFFF; cma_hdr first.
    let sid = [0x00, 0x00, 0x00, 0x00, 0x01, 0x11, 0x1c, 0x06];
    let b = payload(&[
        (0, &[0, 0, 0, 0x42]),
        (4, &[0xff, 0xff]),
        (8, &sid),
        (16, &CMA_HDR_V4),
    ]);
    let p = sidr_req::Packet::new_checked(&b[..]).unwrap();
    assert_eq!((p.request_id(), p.partition_key()), (0x42, 0xFFFF));
    assert_eq!(p.service_id(), cma::service_id(cma::PortSpace::Udp, 7174));
    let r = sidr_req::Repr::parse(&p).unwrap();
    assert_eq!(
        cma::Repr::parse_private_data(&r.private_data).unwrap().port,
        40000
    );
    let mut out = [0xffu8; PAYLOAD_LEN];
    r.emit(&mut sidr_req::Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, b);
    assert_eq!(
        r.to_string(),
        "SIDR_REQ request_id=0x00000042 sid=0x0000000001111c06 pkey=0xffff"
    );

    // rdma_accept on a UD id: status 0, QPN, service ID echoed, Q_Key 0x01234567.
    let b = payload(&[
        (0, &[0, 0, 0, 0x42]),
        (8, &[0x00, 0x00, 0x13]), // QPN (Status 0, info length 0, vendor 0 before)
        (12, &sid),               // Service ID
        (20, &[0x01, 0x23, 0x45, 0x67]), // Q_Key
        (96, b"ud ok"),           // Private Data
    ]);
    let p = sidr_rep::Packet::new_checked(&b[..]).unwrap();
    assert_eq!(
        (p.request_id(), p.status(), p.qpn()),
        (0x42, SidrStatus::Success, 0x13)
    );
    assert_eq!((p.qkey(), p.vendor_id()), (cma::RDMA_UDP_QKEY, 0));
    let r = sidr_rep::Repr::parse(&p).unwrap();
    assert_eq!(&r.private_data[..5], b"ud ok");
    let mut out = [0xffu8; PAYLOAD_LEN];
    r.emit(&mut sidr_rep::Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, b);
    assert_eq!(
        r.to_string(),
        "SIDR_REP request_id=0x00000042 status=0 (success) sid=0x0000000001111c06 qpn=0x13 \
         qkey=0x1234567"
    );

    // No listener: status 1; vendor ID split over bytes 6–7 and 11; info length 4.
    let b = payload(&[(4, &[1, 4, 0x00, 0x02]), (11, &[0xc9]), (24, &[1, 2, 3, 4])]);
    let r = sidr_rep::Repr::parse(&sidr_rep::Packet::new_checked(&b[..]).unwrap()).unwrap();
    assert_eq!((r.status, r.vendor_id), (SidrStatus::Unsupported, 0x0002c9));
    assert_eq!(r.additional_info_length, 4);
    let mut out = [0u8; PAYLOAD_LEN];
    r.emit(&mut sidr_rep::Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, b);
    let mut bad = b;
    bad[5] = 73;
    let e = sidr_rep::Repr::parse(&sidr_rep::Packet::new_checked(&bad[..]).unwrap());
    assert_eq!(e.unwrap_err(), Error::Malformed);
    for c in 0..=255u8 {
        assert_eq!(SidrStatus::from_code(c).code(), c);
    }
}

/// Every message's golden payload with its attribute ID.
fn all_golden() -> [(u16, [u8; PAYLOAD_LEN]); 9] {
    [
        (0x0010, req_golden()),
        (
            0x0011,
            payload(&[(0, &LCID_P), (4, &LCID_A), (9, &[24 << 3])]),
        ),
        (
            0x0012,
            payload(&[(0, &LCID_P), (4, &LCID_A), (10, &[0, 28])]),
        ),
        (0x0013, rep_golden()),
        (0x0014, payload(&[(0, &LCID_A), (4, &LCID_P)])),
        (
            0x0015,
            payload(&[(0, &LCID_A), (4, &LCID_P), (8, &[0, 0, 0x12])]),
        ),
        (0x0016, payload(&[(0, &LCID_P), (4, &LCID_A)])),
        (
            0x0017,
            payload(&[(0, &[0, 0, 0, 0x42]), (4, &[0xff, 0xff]), (16, &CMA_HDR_V4)]),
        ),
        (
            0x0018,
            payload(&[(0, &[0, 0, 0, 0x42]), (8, &[0, 0, 0x13])]),
        ),
    ]
}

#[test]
fn whole_mads_parse_and_emit_byte_for_byte() {
    let tid = 0x0000_002a_7856_3412;
    for (attr, p) in all_golden() {
        let m = mad_bytes(attr, tid, &p);
        let mad = Mad::parse(&m).unwrap();
        assert_eq!(mad.header, crate::mad::Repr::cm(attr, tid));
        assert_eq!(mad.message.attr_id().to_u16(), attr);
        assert_eq!(Mad::new(tid, mad.message), mad);
        let mut out = [0xa5u8; 256];
        mad.emit(&mut out).unwrap();
        assert_eq!(out, m, "{}", mad.message.name());
        assert!(mad
            .to_string()
            .starts_with(&format!("CM {} ", mad.message.name())));
        // A longer buffer (a capture with trailing bytes) parses the same.
        let mut long = [0u8; 300];
        long[..256].copy_from_slice(&m);
        assert_eq!(Mad::parse(&long).unwrap(), mad);
        assert_eq!(mad.emit(&mut [0u8; 255]), Err(Error::Truncated));
    }
    let req = Mad::parse(&mad_bytes(0x0010, tid, &req_golden())).unwrap();
    assert_eq!(req.message.local_comm_id(), 0x1234_5678);
    assert_eq!(req.message.remote_comm_id(), None);
    assert_eq!(req.message.service_id(), Some(0x0000_0000_0106_1c06));
    assert_eq!(req.message.private_data().len(), req::PRIVATE_DATA_LEN);
}

#[test]
fn private_data_lengths_are_the_specs() {
    // IBA Tables 106–120 (bits in ibta_vol1_c12.h / 8) and notes §2.
    assert_eq!(req::PRIVATE_DATA_LEN, 92);
    assert_eq!(mra::PRIVATE_DATA_LEN, 222);
    assert_eq!(rej::PRIVATE_DATA_LEN, 148);
    assert_eq!(rep::PRIVATE_DATA_LEN, 196);
    assert_eq!(rtu::PRIVATE_DATA_LEN, 224);
    assert_eq!(dreq::PRIVATE_DATA_LEN, 220);
    assert_eq!(drep::PRIVATE_DATA_LEN, 224);
    assert_eq!(sidr_req::PRIVATE_DATA_LEN, 216);
    assert_eq!(sidr_rep::PRIVATE_DATA_LEN, 136);
    assert_eq!(
        (cma::REQ_USER_DATA_LEN, cma::SIDR_REQ_USER_DATA_LEN),
        (56, 180)
    );
}

#[test]
fn truncated_at_every_length_is_an_error() {
    let tid = 7;
    for (attr, p) in all_golden() {
        for n in 0..PAYLOAD_LEN {
            assert_eq!(
                Message::parse(attr, &p[..n]),
                Err(Error::Truncated),
                "{attr:#x} {n}"
            );
        }
        assert!(Message::parse(attr, &p).is_ok());
        let m = mad_bytes(attr, tid, &p);
        for n in 0..256 {
            assert_eq!(Mad::parse(&m[..n]), Err(Error::Truncated), "{attr:#x} {n}");
        }
    }
    let b = [0u8; PAYLOAD_LEN];
    for n in 0..PAYLOAD_LEN {
        let s = &b[..n];
        assert!(req::Packet::new_checked(s).is_err());
        assert!(rep::Packet::new_checked(s).is_err());
        assert!(rtu::Packet::new_checked(s).is_err());
        assert!(rej::Packet::new_checked(s).is_err());
        assert!(mra::Packet::new_checked(s).is_err());
        assert!(dreq::Packet::new_checked(s).is_err());
        assert!(drep::Packet::new_checked(s).is_err());
        assert!(sidr_req::Packet::new_checked(s).is_err());
        assert!(sidr_rep::Packet::new_checked(s).is_err());
    }
    for n in 0..path::LEN {
        assert!(path::Packet::new_checked(&b[..n]).is_err());
    }
}

#[test]
fn not_cm_and_unknown_attributes() {
    let p = [0u8; PAYLOAD_LEN];
    let mut m = mad_bytes(0x0010, 1, &req_golden());
    // LAP, APR, ClassPortInfo and others are not messages this crate parses.
    for attr in [0x0001u16, 0x0019, 0x001A, 0x0000, 0xFFFF] {
        assert_eq!(Message::parse(attr, &p), Err(Error::UnknownAttribute(attr)));
        m[16..18].copy_from_slice(&attr.to_be_bytes());
        assert_eq!(Mad::parse(&m), Err(Error::UnknownAttribute(attr)));
    }
    m[16..18].copy_from_slice(&[0, 0x10]);
    for (at, v) in [(0, 2), (1, 0x03), (2, 1)] {
        let mut bad = m;
        bad[at] = v;
        assert_eq!(Mad::parse(&bad), Err(Error::NotCm), "byte {at}");
    }
    for v in 0..=0xFFFFu16 {
        assert_eq!(AttrId::from_u16(v).to_u16(), v);
    }
    assert_eq!(AttrId::from_u16(0x18).to_string(), "SIDR_REP");
    assert_eq!(AttrId::from_u16(0x99).to_string(), "attr(0x0099)");
}

#[test]
fn gid_and_mtu_helpers() {
    assert_eq!(gid_addr(&GID_10_0_0_1).to_string(), "10.0.0.1");
    let mut g = [0u8; 16];
    g[0] = 0xfe;
    g[1] = 0x80;
    g[15] = 1;
    assert_eq!(gid_addr(&g).to_string(), "fe80::1");
    for (e, b) in [(1, 256), (2, 512), (3, 1024), (4, 2048), (5, 4096)] {
        assert_eq!((mtu_bytes(e), mtu_enum(b)), (b, Some(e)));
    }
    assert_eq!((mtu_bytes(0), mtu_bytes(6), mtu_enum(1500)), (0, 0, None));
}
