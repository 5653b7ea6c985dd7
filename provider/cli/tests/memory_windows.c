/* Memory windows on the roce drop-in libibverbs.so.1 (issue 22 item 1), as kernel rxe has them:
 * ibv_alloc_mw / ibv_dealloc_mw, a type 1 window bound by ibv_bind_mw, type 2 windows bound by
 * IBV_WR_BIND_MW (ibv_post_send) and ibv_wr_bind_mw (extended QP), remote WRITE/READ through a
 * window's rkey, an access outside the window refused, LOCAL_INV (ibv_post_send and
 * ibv_wr_local_inv) and SEND with invalidate (ibv_post_send and ibv_wr_send_inv) with
 * IBV_WC_WITH_INV and invalidated_rkey, use after invalidation refused, the busy rules.
 * Compiled and run by provider/cli/tests/memory_windows.rs through `roce run`.
 *
 * Each phase connects a fresh pair of RC QPs on one NIC (an access error moves both to ERR):
 * A is the requester, B owns the windows. Prints one "CHECK <name> ok|FAIL ..." line per check
 * and exits 0 iff all pass. */
#include "verbs_setup.h"

#define WIN_OFF 1024
#define WIN_LEN 256
#define REMOTE (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

static union ibv_gid gid;
static struct ibv_pd *pd;
static struct ibv_mr *mr, *bmr; /* A's buffer; B's region (LOCAL_WRITE | MW_BIND) */
static char *abuf, *bbuf;

static int pair(struct ibv_cq *cq, struct ibv_qp *a, struct ibv_qp *b)
{
	return a && b && !to_rts(a, &gid, b->qp_num) && !to_rts(b, &gid, a->qp_num);
}

static struct ibv_qp *ext_qp(struct ibv_context *ctx, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr_ex ia;
	memset(&ia, 0, sizeof ia);
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.sq_sig_all = 1;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.pd = pd;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ia.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_BIND_MW |
	                    IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV;
	return ibv_create_qp_ex(ctx, &ia);
}

/* One completion of `cq` (2 s); its status, or -1. */
static int one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	return wait_wc(cq, wc) == 1 ? (int)wc->status : -1;
}

/* Waits for the completion with wr_id id on cq (others are skipped). */
static int wait_id(struct ibv_cq *cq, uint64_t id, struct ibv_wc *wc)
{
	for (int i = 0; i < 4; i++)
		if (wait_wc(cq, wc) == 1 && wc->wr_id == id)
			return 1;
	return 0;
}

/* A: RDMA WRITE (or READ) of len bytes of abuf at off to addr behind rkey; the status. */
static int rdma(struct ibv_qp *a, struct ibv_cq *cq, int op, uint64_t addr, uint32_t rkey,
                int off, int len)
{
	struct ibv_sge s = {.addr = (uintptr_t)abuf + off, .length = len, .lkey = mr->lkey};
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = 0xa0;
	wr.sg_list = &s;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(a, &wr, &bad))
		return -2;
	return wait_id(cq, 0xa0, &wc) ? (int)wc.status : -1;
}

/* B: IBV_WR_BIND_MW of mw with key byte of `rkey` over the window; the completion's status
 * (and *op its opcode). */
static int bind2(struct ibv_qp *b, struct ibv_cq *cq, struct ibv_mw *mw, uint32_t rkey, int *op)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = 0xb1;
	wr.opcode = IBV_WR_BIND_MW;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info.mr = bmr;
	wr.bind_mw.bind_info.addr = (uintptr_t)bbuf + WIN_OFF;
	wr.bind_mw.bind_info.length = WIN_LEN;
	wr.bind_mw.bind_info.mw_access_flags = REMOTE;
	if (ibv_post_send(b, &wr, &bad))
		return -2;
	int st = one(cq, &wc);
	*op = wc.opcode;
	return st;
}

static int local_inv(struct ibv_qp *b, struct ibv_cq *cq, uint32_t rkey, int *op)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;
	memset(&wr, 0, sizeof wr);
	wr.opcode = IBV_WR_LOCAL_INV;
	wr.invalidate_rkey = rkey;
	if (ibv_post_send(b, &wr, &bad))
		return -2;
	int st = one(cq, &wc);
	*op = wc.opcode;
	return st;
}

static int post_recv(struct ibv_qp *b, uint64_t id)
{
	struct ibv_sge s = {.addr = (uintptr_t)bbuf, .length = 64, .lkey = bmr->lkey};
	struct ibv_recv_wr rwr = {.wr_id = id, .sg_list = &s, .num_sge = 1}, *bad;
	return ibv_post_recv(b, &rwr, &bad);
}

int main(void)
{
	int op = -1;
	struct ibv_context *ctx = open_first_device(&gid);
	struct ibv_device_attr da;
	ibv_query_device(ctx, &da);
	CHECK("device reports MEM_WINDOW and MEM_WINDOW_TYPE_2B",
	      (da.device_cap_flags & IBV_DEVICE_MEM_WINDOW) &&
	          (da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) && da.max_mw > 0,
	      "flags %#x max_mw %d", da.device_cap_flags, da.max_mw);

	pd = ibv_alloc_pd(ctx);
	abuf = aligned_alloc(4096, 8192);
	bbuf = aligned_alloc(4096, 8192);
	memset(abuf, 0, 8192);
	memset(bbuf, 0, 8192);
	for (int i = 0; i < 64; i++)
		abuf[i] = (char)(i * 7 + 1);
	mr = ibv_reg_mr(pd, abuf, 8192, IBV_ACCESS_LOCAL_WRITE);
	bmr = ibv_reg_mr(pd, bbuf, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK("setup", pd && mr && bmr && cq, "errno %d", errno);
	if (!pd || !mr || !bmr || !cq)
		return 1;
	uint64_t win = (uintptr_t)bbuf + WIN_OFF;

	/* phase 1: type 2 via ibv_post_send */
	struct ibv_qp *a = new_qp(pd, cq, 1), *b = new_qp(pd, cq, 1);
	CHECK("connect 1", pair(cq, a, b), "errno %d", errno);
	struct ibv_mw *mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	CHECK("ibv_alloc_mw type 2", mw2 && mw2->type == IBV_MW_TYPE_2 && mw2->pd == pd, "errno %d", errno);
	if (!mw2)
		return 1;
	uint32_t k1 = ibv_inc_rkey(mw2->rkey);
	int st = bind2(b, cq, mw2, k1, &op);
	CHECK("IBV_WR_BIND_MW completes BIND_MW", st == IBV_WC_SUCCESS && op == IBV_WC_BIND_MW, "st %d op %d", st, op);
	mw2->rkey = k1; /* type 2: the program keeps the window's rkey */
	st = rdma(a, cq, IBV_WR_RDMA_WRITE, win, k1, 0, 64);
	CHECK("WRITE through the window", st == IBV_WC_SUCCESS && !memcmp(bbuf + WIN_OFF, abuf, 64), "st %d", st);
	st = rdma(a, cq, IBV_WR_RDMA_READ, win, k1, 512, 64);
	CHECK("READ through the window", st == IBV_WC_SUCCESS && !memcmp(abuf + 512, abuf, 64), "st %d", st);
	st = local_inv(b, cq, k1, &op);
	CHECK("IBV_WR_LOCAL_INV completes LOCAL_INV", st == IBV_WC_SUCCESS && op == IBV_WC_LOCAL_INV, "st %d op %d", st, op);
	uint32_t k2 = ibv_inc_rkey(k1);
	st = bind2(b, cq, mw2, k2, &op);
	CHECK("a free type 2 window binds again", st == IBV_WC_SUCCESS, "st %d", st);
	mw2->rkey = k2;
	CHECK("dereg_mr of a region with a bound window -> EINVAL", ibv_dereg_mr(bmr) == EINVAL, "");
	CHECK("dealloc_pd with windows -> EBUSY", ibv_dealloc_pd(pd) == EBUSY, "");
	post_recv(b, 0x77);
	{
		struct ibv_sge s = {.addr = (uintptr_t)abuf, .length = 16, .lkey = mr->lkey};
		struct ibv_send_wr wr, *bad;
		struct ibv_wc wc;
		memset(&wr, 0, sizeof wr);
		wr.wr_id = 0xa2;
		wr.sg_list = &s;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND_WITH_INV;
		wr.invalidate_rkey = k2;
		int p = ibv_post_send(a, &wr, &bad);
		int got = !p && wait_id(cq, 0x77, &wc);
		CHECK("SEND_WITH_INV: receive completion WITH_INV and the rkey",
		      got && wc.status == IBV_WC_SUCCESS && (wc.wc_flags & IBV_WC_WITH_INV) &&
		          wc.invalidated_rkey == k2 && wc.byte_len == 16,
		      "post %d got %d status %d flags %#x rkey %#x/%#x", p, got, wc.status, wc.wc_flags,
		      wc.invalidated_rkey, k2);
	}
	st = rdma(a, cq, IBV_WR_RDMA_WRITE, win, k2, 0, 8);
	CHECK("WRITE after the invalidation -> REM_ACCESS_ERR", st == IBV_WC_REM_ACCESS_ERR, "st %d", st);
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	while (ibv_poll_cq(cq, 1, &(struct ibv_wc){0}) > 0)
		;

	/* phase 2: type 1 via ibv_bind_mw; out-of-window access */
	a = new_qp(pd, cq, 1);
	b = new_qp(pd, cq, 1);
	CHECK("connect 2", pair(cq, a, b), "errno %d", errno);
	struct ibv_mw *mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	CHECK("ibv_alloc_mw type 1", mw1 && mw1->type == IBV_MW_TYPE_1, "errno %d", errno);
	if (!mw1)
		return 1;
	uint32_t old = mw1->rkey;
	struct ibv_mw_bind mb;
	memset(&mb, 0, sizeof mb);
	mb.wr_id = 0xb2;
	mb.send_flags = IBV_SEND_SIGNALED;
	mb.bind_info.mr = bmr;
	mb.bind_info.addr = win;
	mb.bind_info.length = WIN_LEN;
	mb.bind_info.mw_access_flags = REMOTE;
	int r = ibv_bind_mw(b, mw1, &mb);
	struct ibv_wc wc;
	st = one(cq, &wc);
	CHECK("ibv_bind_mw: posted, mw->rkey's key byte incremented, completes BIND_MW",
	      r == 0 && mw1->rkey == ibv_inc_rkey(old) && st == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW &&
	          wc.wr_id == 0xb2,
	      "ret %d rkey %#x old %#x st %d op %d", r, mw1->rkey, old, st, wc.opcode);
	memset(abuf + 512, 0, 64);
	st = rdma(a, cq, IBV_WR_RDMA_READ, win, mw1->rkey, 512, 64);
	CHECK("READ through the type 1 window", st == IBV_WC_SUCCESS && !memcmp(abuf + 512, abuf, 64), "st %d", st);
	mb.bind_info.mw_access_flags |= IBV_ACCESS_ZERO_BASED;
	CHECK("ibv_bind_mw zero-based -> EINVAL", ibv_bind_mw(b, mw1, &mb) == EINVAL, "");
	st = rdma(a, cq, IBV_WR_RDMA_WRITE, win + WIN_LEN - 4, mw1->rkey, 0, 8);
	CHECK("WRITE past the window's end (inside the region) -> REM_ACCESS_ERR", st == IBV_WC_REM_ACCESS_ERR,
	      "st %d", st);
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	while (ibv_poll_cq(cq, 1, &wc) > 0)
		;

	/* phase 3: extended QPs: ibv_wr_bind_mw, ibv_wr_send_inv, ibv_wr_local_inv */
	a = ext_qp(ctx, cq);
	b = ext_qp(ctx, cq);
	CHECK("create_qp_ex with BIND_MW | LOCAL_INV | SEND_WITH_INV", a && b, "errno %d", errno);
	if (!a || !b)
		return 1;
	CHECK("connect 3", pair(cq, a, b), "errno %d", errno);
	struct ibv_qp_ex *ax = ibv_qp_to_qp_ex(a), *bx = ibv_qp_to_qp_ex(b);
	struct ibv_mw *mw3 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	struct ibv_mw_bind_info bi = {.mr = bmr, .addr = win, .length = WIN_LEN, .mw_access_flags = REMOTE};
	uint32_t k3 = ibv_inc_rkey(mw3->rkey);
	ibv_wr_start(bx);
	bx->wr_id = 0xb3;
	bx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(bx, mw3, k3, &bi);
	r = ibv_wr_complete(bx);
	st = one(cq, &wc);
	CHECK("ibv_wr_bind_mw", r == 0 && st == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW, "ret %d st %d", r, st);
	mw3->rkey = k3;
	st = rdma(a, cq, IBV_WR_RDMA_WRITE, win, k3, 0, 32);
	CHECK("WRITE through the ibv_wr_bind_mw window", st == IBV_WC_SUCCESS, "st %d", st);
	post_recv(b, 0x78);
	ibv_wr_start(ax);
	ax->wr_id = 0xa3;
	ax->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_inv(ax, k3);
	ibv_wr_set_sge(ax, mr->lkey, (uintptr_t)abuf, 8);
	r = ibv_wr_complete(ax);
	int got = !r && wait_id(cq, 0x78, &wc);
	CHECK("ibv_wr_send_inv: WITH_INV and the rkey", got && (wc.wc_flags & IBV_WC_WITH_INV) && wc.invalidated_rkey == k3,
	      "ret %d got %d flags %#x", r, got, wc.wc_flags);
	/* the sender's completion follows the receiver's (it waits for the ACK) */
	CHECK("ibv_wr_send_inv completes", wait_id(cq, 0xa3, &wc) && wc.status == IBV_WC_SUCCESS, "");
	uint32_t k4 = ibv_inc_rkey(k3);
	ibv_wr_start(bx);
	bx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(bx, mw3, k4, &bi);
	ibv_wr_local_inv(bx, k4);
	r = ibv_wr_complete(bx);
	int st1 = one(cq, &wc), op1 = wc.opcode;
	int st2 = one(cq, &wc), op2 = wc.opcode;
	CHECK("ibv_wr_bind_mw + ibv_wr_local_inv in one batch, in order",
	      r == 0 && st1 == IBV_WC_SUCCESS && op1 == IBV_WC_BIND_MW && st2 == IBV_WC_SUCCESS && op2 == IBV_WC_LOCAL_INV,
	      "ret %d %d/%d %d/%d", r, st1, op1, st2, op2);
	st = rdma(a, cq, IBV_WR_RDMA_WRITE, win, k4, 0, 8);
	CHECK("WRITE after ibv_wr_local_inv -> REM_ACCESS_ERR", st == IBV_WC_REM_ACCESS_ERR, "st %d", st);
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	while (ibv_poll_cq(cq, 1, &wc) > 0)
		;

	/* windows go while bound; then the region and the PD can */
	CHECK("dealloc_mw of bound and free windows", !ibv_dealloc_mw(mw1) && !ibv_dealloc_mw(mw2) && !ibv_dealloc_mw(mw3), "");
	CHECK("dereg_mr once no window is bound", ibv_dereg_mr(bmr) == 0, "");
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	CHECK("dealloc_pd", ibv_dealloc_pd(pd) == 0, "");
	ibv_close_device(ctx);
	return done();
}
