//! `verbs::cm`, the Rust API for RDMA CM: two NICs on loopback (real UDP sockets, one process)
//! connect with no out-of-band exchange, move data over the connection, and disconnect; a
//! rejected request carries its private data back; a port nobody listens on is refused.
use roce_provider::verbs::{cm, AccessFlags, Device, DeviceConfig, Error, QpType};
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

fn open(ip: &str) -> roce_provider::verbs::Context {
    Device::open(DeviceConfig::new(ip.parse().unwrap())).expect("open device")
}

#[test]
fn connect_accept_write_send_disconnect() {
    let (sa, ca) = (open("127.0.19.101"), open("127.0.19.102"));
    let listener = cm::Listener::bind(&sa, 0).unwrap();
    let to = listener.local_addr();
    assert_eq!(to.ip(), sa.ip());
    assert!(to.port() >= 32768, "an ephemeral port: {to}");

    let server = std::thread::spawn(move || {
        let pd = sa.alloc_pd().unwrap();
        let cq = sa.create_cq(16).build().unwrap();
        let buf = pd
            .allocate(64, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)
            .unwrap();
        let req = listener.next_request(T).unwrap();
        assert_eq!(&req.private_data()[..5], b"hello");
        assert_eq!(
            req.peer_addr().map(|a| a.ip()),
            Some("127.0.19.102".parse().unwrap())
        );
        let qp = pd.create_qp(&cq, &cq, QpType::Rc).build().unwrap();
        qp.post_receive(&[buf.slice(32..64)], 7).unwrap();
        // the region's address and rkey travel in the REP's private data
        let mut rep = Vec::new();
        rep.extend_from_slice(&buf.remote().addr.to_be_bytes());
        rep.extend_from_slice(&buf.remote().rkey.to_be_bytes());
        let conn = req.accept(qp, &rep, T).unwrap();
        let wc = cq.wait_one(T).unwrap();
        wc.result().unwrap();
        assert_eq!(wc.wr_id(), 7);
        let v = buf.to_vec();
        assert_eq!(&v[..11], b"rdma write!");
        assert_eq!(&v[32..37], b"send!");
        conn.wait_disconnect(T).unwrap();
    });

    let pd = ca.alloc_pd().unwrap();
    let cq = ca.create_cq(16).build().unwrap();
    let qp = pd.create_qp(&cq, &cq, QpType::Rc).build().unwrap();
    let conn = cm::connect(&ca, qp, to, b"hello", T).unwrap();
    let pdata = conn.private_data();
    let addr = u64::from_be_bytes(pdata[..8].try_into().unwrap());
    let rkey = u32::from_be_bytes(pdata[8..12].try_into().unwrap());
    let src = pd
        .register(b"rdma write!send!".to_vec(), AccessFlags::LOCAL_WRITE)
        .unwrap();
    let remote = roce_provider::verbs::RemoteSlice {
        addr,
        rkey,
        len: 11,
    };
    conn.qp().post_write(&[src.slice(..11)], remote, 1).unwrap();
    cq.wait_one(T).unwrap().result().unwrap();
    conn.qp().post_send(&[src.slice(11..16)], 2).unwrap();
    cq.wait_one(T).unwrap().result().unwrap();
    conn.disconnect(T).unwrap();
    server.join().unwrap();
    let stats = ca.runtime().unwrap().stats();
    let get = |n: &str| stats.counters.iter().find(|(k, _)| k == n).map(|(_, v)| *v);
    // REQ, RTU, DREQ out; REP, DREP in
    assert_eq!(
        get("cm_mads_sent"),
        Some(3),
        "{stats:?}",
        stats = stats.counters
    );
    assert_eq!(get("cm_mads_received"), Some(2));
}

#[test]
fn a_rejected_request_returns_the_reason_and_private_data() {
    let (sa, ca) = (open("127.0.19.103"), open("127.0.19.104"));
    let listener = cm::Listener::bind(&sa, 0).unwrap();
    let to = listener.local_addr();
    let server = std::thread::spawn(move || {
        listener
            .next_request(T)
            .unwrap()
            .reject(b"go away")
            .unwrap();
    });
    let pd = ca.alloc_pd().unwrap();
    let cq = ca.create_cq(16).build().unwrap();
    let qp = pd.create_qp(&cq, &cq, QpType::Rc).build().unwrap();
    match cm::connect(&ca, qp, to, b"", T) {
        Err(Error::CmRefused {
            event,
            status,
            private_data,
        }) => {
            assert_eq!(event, cm::EventKind::Rejected);
            assert_eq!(status, 28, "consumer reject");
            assert_eq!(&private_data[..7], b"go away");
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("connected"),
    }
    server.join().unwrap();
}

#[test]
fn nobody_listening_is_refused_at_once() {
    let (sa, ca) = (open("127.0.19.105"), open("127.0.19.106"));
    let pd = ca.alloc_pd().unwrap();
    let cq = ca.create_cq(16).build().unwrap();
    let qp = pd.create_qp(&cq, &cq, QpType::Rc).build().unwrap();
    let t = std::time::Instant::now();
    let r = cm::connect(&ca, qp, (sa.ip(), 4000).into(), b"", T);
    assert!(
        matches!(r, Err(Error::CmRefused { status: 8, .. })),
        "{:?}",
        r.err()
    );
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
}
