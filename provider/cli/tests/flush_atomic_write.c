/* RDMA FLUSH and ATOMIC WRITE (IBA 1.5; kernel rxe has them since Linux 6.2) through the roce
 * drop-in libibverbs.so.1, between two emulated NICs in one process (rxe0 posts, rxe1 owns the
 * memory): the capability bits of ibv_query_device_ex, IBV_QP_EX_WITH_ATOMIC_WRITE / _FLUSH at
 * ibv_create_qp_ex (RC yes, UC no), IBV_ACCESS_FLUSH_GLOBAL / _PERSISTENT at ibv_reg_mr, an
 * ATOMIC WRITE landing its 8 bytes and FLUSHes completing (IBV_WC_ATOMIC_WRITE 9,
 * IBV_WC_FLUSH 8), both refused in ibv_post_send (EINVAL), a FLUSH of a region without FLUSH
 * access (remote access error) and a misaligned ATOMIC WRITE (remote invalid request).
 * Compiled against the installed verbs.h (rdma-core v44 on Debian 12: no FLUSH names yet) and
 * run by provider/cli/tests/flush_atomic_write.rs through `roce run --ip A,B`. Prints one
 * "CHECK <name> ok|FAIL ..." line per check and exits 0 iff all pass. */
#include "verbs_setup.h"

/* rdma-core v45's names, absent from v44's verbs.h, with v45's values; and v45's ibv_qp_ex,
 * which is v44's with wr_flush appended: what a program built against newer headers uses. */
#define V45_WC_FLUSH 8
#define V45_WR_FLUSH 14
#define V45_QP_EX_WITH_FLUSH (1ULL << 11)
#define V45_ACCESS_FLUSH_GLOBAL (1 << 8)
#define V45_ACCESS_FLUSH_PERSISTENT (1 << 9)
#define V45_FLUSH_GLOBAL 1
#define V45_FLUSH_RANGE 0
#define V45_FLUSH_MR 1
/* IB_UVERBS_DEVICE_* bits of device_cap_flags_ex */
#define DEV_FLUSH_GLOBAL (1ULL << 38)
#define DEV_FLUSH_PERSISTENT (1ULL << 39)
#define DEV_ATOMIC_WRITE (1ULL << 40)

struct qp_ex_v45 {
	struct ibv_qp_ex base;
	void (*wr_flush)(struct ibv_qp_ex *qp, uint32_t rkey, uint64_t remote_addr, size_t len,
	                 uint8_t type, uint8_t level);
};

#define REMOTE (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

static struct ibv_context *ctx[2];
static struct ibv_pd *pd[2];
static struct ibv_cq *cq[2];
static union ibv_gid gid[2];
static char buf[2][4096];

static struct ibv_qp *ext_qp(enum ibv_qp_type t, uint64_t ops)
{
	struct ibv_qp_init_attr_ex ia;
	memset(&ia, 0, sizeof ia);
	ia.send_cq = cq[0];
	ia.recv_cq = cq[0];
	ia.qp_type = t;
	ia.sq_sig_all = 1;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.pd = pd[0];
	ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ia.send_ops_flags = ops;
	return ibv_create_qp_ex(ctx[0], &ia);
}

/* A fresh connected pair: an extended RC QP on rxe0, a plain one on rxe1 allowing `access`. */
static struct ibv_qp *pair(struct ibv_qp **b, int access)
{
	struct ibv_qp *a = ext_qp(IBV_QPT_RC, IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_ATOMIC_WRITE |
	                                          V45_QP_EX_WITH_FLUSH);
	*b = new_qp(pd[1], cq[1], 1);
	if (!a || !*b || to_rts(a, &gid[1], (*b)->qp_num) ||
	    to_rts_access(*b, &gid[0], a->qp_num, access))
		return NULL;
	return a;
}

static void atomic_write(struct ibv_qp *qp, uint64_t id, uint32_t rkey, void *at, uint64_t v)
{
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qp);
	x->wr_id = id;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_write(x, rkey, (uintptr_t)at, &v);
}

static void flush(struct ibv_qp *qp, uint64_t id, uint32_t rkey, void *at, size_t len, int level)
{
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qp);
	x->wr_id = id;
	x->wr_flags = IBV_SEND_SIGNALED;
	((struct qp_ex_v45 *)x)->wr_flush(x, rkey, (uintptr_t)at, len, V45_FLUSH_GLOBAL, level);
}

int main(void)
{
	/* 67 ms per try: the first packets between the two devices must not run out of retries
	 * while a loaded machine delays the peer's engine (seen once in 25 runs at 4 ms) */
	rts_timeout = 14;
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK("two devices", list && n == 2, "n=%d", n);
	if (!list || n != 2)
		return 1;
	for (int i = 0; i < 2; i++) {
		ctx[i] = ibv_open_device(list[i]);
		if (!ctx[i] || ibv_query_gid(ctx[i], 1, 1, &gid[i]))
			return 1;
		pd[i] = ibv_alloc_pd(ctx[i]);
		cq[i] = ibv_create_cq(ctx[i], 16, NULL, NULL, 0);
		if (!pd[i] || !cq[i])
			return 1;
	}

	struct ibv_device_attr_ex ax;
	memset(&ax, 0, sizeof ax);
	int r = ibv_query_device_ex(ctx[0], NULL, &ax);
	uint64_t want = DEV_FLUSH_GLOBAL | DEV_FLUSH_PERSISTENT | DEV_ATOMIC_WRITE;
	CHECK("device_cap_flags_ex FLUSH_GLOBAL FLUSH_PERSISTENT ATOMIC_WRITE",
	      r == 0 && (ax.device_cap_flags_ex & want) == want &&
	          (uint32_t)ax.device_cap_flags_ex == ax.orig_attr.device_cap_flags,
	      "ret %d flags 0x%llx", r, (unsigned long long)ax.device_cap_flags_ex);
	printf("device_cap_flags_ex 0x%llx\n", (unsigned long long)ax.device_cap_flags_ex);

	/* registration: FLUSH_GLOBAL yes, FLUSH_PERSISTENT refused as rxe on ordinary memory */
	struct ibv_mr *fmr = ibv_reg_mr(pd[1], buf[1], 2048, REMOTE | V45_ACCESS_FLUSH_GLOBAL);
	CHECK("reg_mr FLUSH_GLOBAL", fmr != NULL, "errno %d", errno);
	errno = 0;
	struct ibv_mr *pmr = ibv_reg_mr(pd[1], buf[1], 2048, REMOTE | V45_ACCESS_FLUSH_PERSISTENT);
	CHECK("reg_mr FLUSH_PERSISTENT -> EINVAL", pmr == NULL && errno == EINVAL, "mr %p errno %d",
	      (void *)pmr, errno);
	struct ibv_mr *plain = ibv_reg_mr(pd[1], buf[1] + 2048, 2048, REMOTE);
	if (!fmr || !plain)
		return 1;

	/* QP creation: RC takes both operations, UC neither (as rxe's provider) */
	errno = 0;
	struct ibv_qp *uc = ext_qp(IBV_QPT_UC, IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_ATOMIC_WRITE);
	CHECK("UC WITH_ATOMIC_WRITE -> EOPNOTSUPP", uc == NULL && errno == EOPNOTSUPP, "errno %d", errno);
	errno = 0;
	uc = ext_qp(IBV_QPT_UC, IBV_QP_EX_WITH_RDMA_WRITE | V45_QP_EX_WITH_FLUSH);
	CHECK("UC WITH_FLUSH -> EOPNOTSUPP", uc == NULL && errno == EOPNOTSUPP, "errno %d", errno);
	struct ibv_qp *b, *a = pair(&b, IBV_ACCESS_REMOTE_WRITE | V45_ACCESS_FLUSH_GLOBAL);
	CHECK("RC WITH_ATOMIC_WRITE | WITH_FLUSH", a != NULL, "errno %d", errno);
	if (!a)
		return 1;
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(a);
	CHECK("wr_atomic_write and wr_flush set", x && x->wr_atomic_write &&
	                                              ((struct qp_ex_v45 *)x)->wr_flush, "unset");

	/* an ATOMIC WRITE lands 8 bytes; FLUSHes of a range and of the region complete */
	uint64_t v = 0x0123456789abcdefULL;
	memset(buf[1], 0xee, 64);
	ibv_wr_start(x);
	atomic_write(a, 1, fmr->rkey, buf[1] + 8, v);
	flush(a, 2, fmr->rkey, buf[1], 64, V45_FLUSH_RANGE);
	flush(a, 3, fmr->rkey, buf[1], 0, V45_FLUSH_MR);
	CHECK("wr_complete", ibv_wr_complete(x) == 0, "errno %d", errno);
	struct ibv_wc wc[3];
	int got = 0;
	for (int i = 0; i < 3; i++)
		got += wait_wc(cq[0], &wc[i]);
	CHECK("three completions", got == 3, "got %d", got);
	if (got != 3)
		return 1;
	CHECK("atomic write completion", wc[0].wr_id == 1 && wc[0].status == IBV_WC_SUCCESS &&
	                                     wc[0].opcode == IBV_WC_ATOMIC_WRITE && wc[0].byte_len == 8,
	      "wr_id %llu status %d opcode %d byte_len %u", (unsigned long long)wc[0].wr_id,
	      wc[0].status, wc[0].opcode, wc[0].byte_len);
	CHECK("atomic write landed 8 bytes", !memcmp(buf[1] + 8, &v, 8) &&
	                                         (uint8_t)buf[1][7] == 0xee && (uint8_t)buf[1][16] == 0xee,
	      "memory differs");
	CHECK("flush range completion", wc[1].wr_id == 2 && wc[1].status == IBV_WC_SUCCESS &&
	                                    wc[1].opcode == V45_WC_FLUSH && wc[1].byte_len == 64,
	      "wr_id %llu status %d opcode %d byte_len %u", (unsigned long long)wc[1].wr_id,
	      wc[1].status, wc[1].opcode, wc[1].byte_len);
	CHECK("flush region completion", wc[2].wr_id == 3 && wc[2].status == IBV_WC_SUCCESS &&
	                                     wc[2].opcode == V45_WC_FLUSH,
	      "wr_id %llu status %d opcode %d", (unsigned long long)wc[2].wr_id, wc[2].status,
	      wc[2].opcode);

	/* ibv_post_send cannot carry their operands: EINVAL, bad_wr set, the QP still usable */
	struct ibv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = 4;
	wr.opcode = IBV_WR_ATOMIC_WRITE;
	wr.wr.rdma.remote_addr = (uintptr_t)(buf[1] + 8);
	wr.wr.rdma.rkey = fmr->rkey;
	CHECK("post_send IBV_WR_ATOMIC_WRITE -> EINVAL", ibv_post_send(a, &wr, &bad) == EINVAL && bad == &wr,
	      "bad %p", (void *)bad);
	wr.opcode = V45_WR_FLUSH;
	bad = NULL;
	CHECK("post_send IBV_WR_FLUSH -> EINVAL", ibv_post_send(a, &wr, &bad) == EINVAL && bad == &wr,
	      "bad %p", (void *)bad);
	ibv_wr_start(x);
	atomic_write(a, 5, fmr->rkey, buf[1] + 16, v + 1);
	r = ibv_wr_complete(x);
	CHECK("QP usable after", r == 0 && wait_wc(cq[0], &wc[0]) == 1 &&
	                             wc[0].status == IBV_WC_SUCCESS && *(uint64_t *)(buf[1] + 16) == v + 1,
	      "ret %d status %d", r, wc[0].status);

	/* a FLUSH of a region registered without FLUSH access: remote access error */
	ibv_wr_start(x);
	flush(a, 6, plain->rkey, buf[1] + 2048, 64, V45_FLUSH_RANGE);
	r = ibv_wr_complete(x);
	CHECK("flush without FLUSH access -> IBV_WC_REM_ACCESS_ERR",
	      r == 0 && wait_wc(cq[0], &wc[0]) == 1 && wc[0].wr_id == 6 &&
	          wc[0].status == IBV_WC_REM_ACCESS_ERR,
	      "ret %d wr_id %llu status %d", r, (unsigned long long)wc[0].wr_id, wc[0].status);
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	while (ibv_poll_cq(cq[1], 1, &wc[0]) > 0)
		;

	/* a misaligned ATOMIC WRITE: remote invalid request */
	a = pair(&b, IBV_ACCESS_REMOTE_WRITE | V45_ACCESS_FLUSH_GLOBAL);
	if (!a)
		return 1;
	x = ibv_qp_to_qp_ex(a);
	ibv_wr_start(x);
	atomic_write(a, 7, fmr->rkey, buf[1] + 12, v);
	r = ibv_wr_complete(x);
	CHECK("misaligned atomic write -> IBV_WC_REM_INV_REQ_ERR",
	      r == 0 && wait_wc(cq[0], &wc[0]) == 1 && wc[0].wr_id == 7 &&
	          wc[0].status == IBV_WC_REM_INV_REQ_ERR,
	      "ret %d wr_id %llu status %d", r, (unsigned long long)wc[0].wr_id, wc[0].status);
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);

	ibv_dereg_mr(fmr);
	ibv_dereg_mr(plain);
	for (int i = 0; i < 2; i++) {
		ibv_destroy_cq(cq[i]);
		ibv_dealloc_pd(pd[i]);
		ibv_close_device(ctx[i]);
	}
	ibv_free_device_list(list);
	return done();
}
