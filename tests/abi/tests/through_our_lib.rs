//! Verbs called through rdma-sys — its `extern "C"` bindings to `libibverbs.so.1` and its Rust
//! re-implementations of the inline verbs (`___ibv_query_port`, `ibv_query_device_ex`) — with our
//! library loaded in place of rdma-core's (`LD_LIBRARY_PATH`, set by the driver test
//! provider/libibverbs/tests/abi_rdma_sys.rs).
//!
//! Note rdma-sys 0.3.0's `verbs_get_ctx` bug (roce-spec-notes F): it compares `abi_compat` with
//! `u32::MAX`, so on 64-bit its inline verbs never see our `verbs_context` and take the legacy
//! path (`___ibv_query_port` → exported `ibv_query_port`, 48 bytes). The test checks the context
//! layout the correct `verbs_get_ctx` relies on itself.

use rdma_sys as rs;
use std::ffi::CStr;

/// True iff the process loaded our library (not rdma-core's).
fn ours_loaded() -> bool {
    std::fs::read_to_string("/proc/self/maps").is_ok_and(|m| m.contains("libroce_ibverbs.so"))
}

#[test]
fn device_context_and_queries_through_rdma_sys() {
    // Make sure libibverbs is mapped before looking (lazy binding aside, it is NEEDED).
    let mut n = 0;
    // SAFETY: plain verbs calls with valid arguments, as a C program would make them.
    let list = unsafe { rs::ibv_get_device_list(&mut n) };
    if !ours_loaded() {
        let msg = "this test must run with LD_LIBRARY_PATH pointing at our libibverbs.so.1 \
                   (run provider/libibverbs/tests/abi_rdma_sys.rs)";
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("FAIL: {msg}");
        }
        eprintln!("\n*** SKIP: {msg} ***\n");
        return;
    }
    unsafe {
        assert!(!list.is_null());
        assert_eq!(n, 1);
        let dev = *list;
        let name = CStr::from_ptr(rs::ibv_get_device_name(dev)).to_str().unwrap();
        assert_eq!(name, "rxe0");
        assert_eq!((*dev).transport_type, rs::ibv_transport_type::IBV_TRANSPORT_IB);
        let ctx = rs::ibv_open_device(dev);
        assert!(!ctx.is_null());

        // The extended context as libibverbs's verbs_get_ctx() finds it.
        assert_eq!((*ctx).abi_compat as usize, usize::MAX);
        let off = std::mem::offset_of!(rs::verbs_context, context);
        let vctx = (ctx as *mut u8).sub(off) as *mut rs::verbs_context;
        assert!((*vctx).sz >= std::mem::size_of::<rs::verbs_context>());
        let qp = (*vctx).query_port.expect("verbs_context.query_port");
        let mut pa: rs::ibv_port_attr = std::mem::zeroed();
        assert_eq!(qp(ctx, 1, &mut pa, std::mem::size_of::<rs::ibv_port_attr>()), 0);
        assert_eq!(pa.state, rs::ibv_port_state::IBV_PORT_ACTIVE);
        assert_eq!(pa.link_layer, 2);

        // rdma-sys's inline re-implementations (legacy path, see module docs).
        let mut pa2: rs::ibv_port_attr = std::mem::zeroed();
        assert_eq!(rs::___ibv_query_port(ctx, 1, &mut pa2), 0);
        assert_eq!(pa2.active_mtu, rs::ibv_mtu::IBV_MTU_1024);
        assert_eq!(pa2.gid_tbl_len, 1024);
        let mut da: rs::ibv_device_attr_ex = std::mem::zeroed();
        assert_eq!(rs::ibv_query_device_ex(ctx, std::ptr::null(), &mut da), 0);
        assert_eq!(da.orig_attr.phys_port_cnt, 1);
        assert_eq!(da.orig_attr.max_qp_wr, 0x4000);

        let mut gid: rs::ibv_gid = std::mem::zeroed();
        assert_eq!(rs::ibv_query_gid(ctx, 1, 1, &mut gid), 0);
        assert_eq!(&gid.raw[10..], &[0xff, 0xff, 127, 0, 0, 1]);

        // A completion channel is a real fd.
        let ch = rs::ibv_create_comp_channel(ctx);
        assert!(!ch.is_null());
        assert!(libc::fcntl((*ch).fd, libc::F_GETFD) >= 0);
        assert_eq!(rs::ibv_destroy_comp_channel(ch), 0);

        // Verbs that need the NIC engine report EOPNOTSUPP until it is plugged in; once it is,
        // this is where rdma-sys's ibv_post_send/ibv_poll_cq get exercised.
        let pd = rs::ibv_alloc_pd(ctx);
        if pd.is_null() {
            assert_eq!(*libc::__errno_location(), libc::EOPNOTSUPP);
        } else {
            assert_eq!(rs::ibv_dealloc_pd(pd), 0);
        }

        assert_eq!(rs::ibv_close_device(ctx), 0);
        rs::ibv_free_device_list(list);
    }
}
