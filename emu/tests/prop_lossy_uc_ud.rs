//! Properties of the unreliable transports over an impaired simulated network: UC delivers
//! only whole messages, in order; UD delivers only whole datagrams with a valid ICRC and the
//! right Q_Key. Seeds as in `prop_lossy.rs` (`ROCE_PROPTEST_SEEDS`, default 200 in debug builds
//! and 3000 in release; `ROCE_PROPTEST_SEED0`); a failure prints the seed.
mod common;
use common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use roce_emu::sim::LinkConfig;
use roce_emu::*;

const RECV_SLOT: u64 = 0x2000; // B's receive buffers

/// UC over a lossy link: every receive completion carries exactly one whole message that was
/// sent, messages arrive in order (a subsequence of what was sent), never partially, and every
/// send completes successfully on transmission.
fn run_uc(seed: u64) -> std::result::Result<(), String> {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x0C);
    let link = LinkConfig {
        latency_ns: rng.gen_range(500..5_000),
        loss: rng.gen_range(0.0..0.2),
        ..Default::default()
    };
    let o = Opts {
        qp_type: QpType::Uc,
        mtu: [Mtu::Mtu256, Mtu::Mtu1024][rng.gen_range(0..2)],
        ..Default::default()
    };
    let mut p = Pair::new(seed, link, o);
    let n = rng.gen_range(1..30u64);
    let src = pattern(0x1_0000, seed as u8);
    p.a.mem.store(0, &src);
    for i in 0..n {
        p.recv_b(i, RECV_SLOT * i, RECV_SLOT as u32);
    }
    let mut sent = Vec::new();
    for i in 0..n {
        let len = gen_msg_len(&mut rng);
        let off = rng.gen_range(0..0x1_0000 - len as u64);
        sent.push((len, off));
        p.post_a(SendWr {
            wr_id: i,
            sg_list: &[sge(&p.a, off, len)],
            opcode: WrOpcode::Send,
            send_flags: SendFlags::SIGNALED,
            ..Default::default()
        });
    }
    p.run(100);
    let wc = p.scq_a();
    if wc.len() as u64 != n || wc.iter().any(|w| w.status != WcStatus::Success) {
        return Err(format!("send completions {wc:?}"));
    }
    let rc = p.rcq_b();
    let mut next = 0usize;
    for (k, w) in rc.iter().enumerate() {
        if w.wr_id != k as u64 || w.status != WcStatus::Success {
            return Err(format!("recv completion {k}: {w:?}"));
        }
        let data =
            p.b.mem
                .load((RECV_SLOT * k as u64) as usize, w.byte_len as usize);
        // find the message in order
        let found = (next..sent.len()).find(|&j| {
            let (len, off) = sent[j];
            len == w.byte_len && data == src[off as usize..(off + len as u64) as usize]
        });
        match found {
            Some(j) => next = j + 1,
            None => {
                return Err(format!(
                    "recv {k} ({} bytes) is not a whole later message",
                    w.byte_len
                ))
            }
        }
    }
    Ok(())
}

#[test]
fn uc_over_lossy_network_delivers_whole_messages_in_order() {
    let failures = failing_seeds(prop_seeds(200, 3000), run_uc);
    assert!(failures.is_empty(), "failing seeds: {failures:?}");
}

/// UD over an impaired link, some datagrams with a wrong Q_Key: every receive completion is one
/// whole datagram that was sent with the right Q_Key (GRH ahead of it, `src_qp` right), none
/// with a wrong Q_Key is ever delivered, all sends complete successfully.
fn run_ud(seed: u64) -> std::result::Result<(), String> {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x0D0D);
    let link = LinkConfig {
        latency_ns: rng.gen_range(500..5_000),
        loss: rng.gen_range(0.0..0.2),
        duplicate: rng.gen_range(0.0..0.1),
        reorder: rng.gen_range(0.0..0.2),
        reorder_delay_ns: 10_000,
        corrupt: rng.gen_range(0.0..0.05),
        ..Default::default()
    };
    let mut p = Pair::new(
        seed,
        link,
        Opts {
            qp_type: QpType::Ud,
            ..Default::default()
        },
    );
    let n = rng.gen_range(1..30u64);
    let src = pattern(0x1_0000, seed as u8);
    p.a.mem.store(0, &src);
    for i in 0..2 * n {
        p.recv_b(i, RECV_SLOT * i, RECV_SLOT as u32);
    }
    let (pd, bip, bq, aq) = (p.a.pd, p.b.ip, p.b.qpn, p.a.qpn);
    let ah = p.nic_a().create_ah(pd, AhAttr::to_ip(bip)).unwrap();
    let mut sent = Vec::new();
    for i in 0..n {
        let len = rng.gen_range(0..=1024u32);
        let off = rng.gen_range(0..0x1_0000 - len as u64);
        let good = rng.gen_bool(0.85);
        let qkey = if good { 0x1111_1111 } else { 0x2222_2222 };
        sent.push((len, off, good));
        p.post_a(SendWr {
            wr_id: i,
            sg_list: &[sge(&p.a, off, len)],
            opcode: WrOpcode::Send,
            send_flags: SendFlags::SIGNALED,
            ah: Some(ah),
            remote_qpn: bq,
            remote_qkey: qkey,
            ..Default::default()
        });
    }
    p.run(100);
    let wc = p.scq_a();
    if wc.len() as u64 != n || wc.iter().any(|w| w.status != WcStatus::Success) {
        return Err(format!("send completions {wc:?}"));
    }
    for (k, w) in p.rcq_b().iter().enumerate() {
        if w.wr_id != k as u64 || w.status != WcStatus::Success || w.src_qp != aq || w.byte_len < 40
        {
            return Err(format!("recv completion {k}: {w:?}"));
        }
        let got =
            p.b.mem
                .load((RECV_SLOT * k as u64) as usize, w.byte_len as usize);
        if got[20] != 0x45 || got[..20] != [0; 20] {
            return Err(format!("recv {k}: bad GRH"));
        }
        let body = &got[40..];
        let ok = sent.iter().any(|&(len, off, good)| {
            good && len as usize == body.len()
                && body == &src[off as usize..off as usize + len as usize]
        });
        if !ok {
            return Err(format!(
                "recv {k}: {} bytes match no datagram sent with the right Q_Key",
                body.len()
            ));
        }
    }
    Ok(())
}

#[test]
fn ud_over_impaired_network_delivers_only_whole_valid_datagrams() {
    let failures = failing_seeds(prop_seeds(200, 3000), run_ud);
    assert!(failures.is_empty(), "failing seeds: {failures:?}");
}
