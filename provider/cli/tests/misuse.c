/* Misuse of the verbs C ABI on the roce drop-in libibverbs.so.1: every mistake must come back as
 * the documented errno or work-completion status, never a crash. Compiled and run by
 * provider/cli/tests/misuse.rs through `roce run --ip 127.0.0.1`.
 *
 * RC QPs are connected to themselves or to each other on the same NIC (same GID), so sends and
 * RDMA go out on UDP and come back to the same emulated NIC. Prints one "CHECK <name> ok|FAIL ..." line per check and exits 0
 * iff all pass. */
#include "verbs_setup.h"

int main(void)
{
	int num;
	union ibv_gid gid;
	struct ibv_context *ctx = open_first_device(&gid);

	/* NULL pointers */
	errno = 0;
	CHECK("alloc_pd(NULL)", ibv_alloc_pd(NULL) == NULL && errno == EINVAL, "errno %d", errno);
	errno = 0;
	CHECK("reg_mr(NULL pd)", ibv_reg_mr(NULL, &num, 4, 0) == NULL && errno == EINVAL, "errno %d", errno);
	errno = 0;
	CHECK("create_cq(NULL ctx)", ibv_create_cq(NULL, 4, NULL, NULL, 0) == NULL && errno == EINVAL, "errno %d", errno);
	CHECK("dealloc_pd(NULL)", ibv_dealloc_pd(NULL) == EINVAL, "");
	CHECK("destroy_qp(NULL)", ibv_destroy_qp(NULL) == EINVAL, "");
	errno = 0;
	CHECK("create_qp(pd, NULL attr)", ibv_create_qp(ibv_alloc_pd(ctx), NULL) == NULL && errno == EINVAL, "errno %d", errno);

	/* Destroyed objects */
	struct ibv_pd *gone = ibv_alloc_pd(ctx);
	CHECK("dealloc_pd", gone && ibv_dealloc_pd(gone) == 0, "");
	CHECK("dealloc_pd(destroyed)", ibv_dealloc_pd(gone) == EINVAL, "");
	errno = 0;
	CHECK("alloc_mr on destroyed pd", ibv_reg_mr(gone, &num, 4, 0) == NULL && errno == EINVAL, "errno %d", errno);
	struct ibv_cq *gcq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	CHECK("destroy_cq", gcq && ibv_destroy_cq(gcq) == 0, "");
	CHECK("destroy_cq(destroyed)", ibv_destroy_cq(gcq) == EINVAL, "");

	struct ibv_pd *pd = ibv_alloc_pd(ctx), *pd2 = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	char *buf = aligned_alloc(4096, 8192), *buf2 = aligned_alloc(4096, 4096);
	memset(buf, 0x5a, 8192);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	struct ibv_mr *mr2 = ibv_reg_mr(pd2, buf2, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK("setup", pd && pd2 && cq && mr && mr2, "pd %p pd2 %p cq %p mr %p mr2 %p", pd, pd2, cq, mr, mr2);
	CHECK("dealloc_pd in use -> EBUSY", ibv_dealloc_pd(pd) == EBUSY, "");

	/* QP in the wrong state */
	struct ibv_qp *qp = new_qp(pd, cq, 2);
	CHECK("create_qp", qp != NULL, "errno %d", errno);
	struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey};
	struct ibv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = 1;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	int r = ibv_post_send(qp, &wr, &bad);
	CHECK("post_send on RESET QP -> EINVAL", r == EINVAL && bad == &wr, "ret %d", r);
	struct ibv_recv_wr rwr, *rbad = NULL;
	memset(&rwr, 0, sizeof rwr);
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	r = ibv_post_recv(qp, &rwr, &rbad);
	CHECK("post_recv on RESET QP -> EINVAL", r == EINVAL, "ret %d", r);
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	r = ibv_modify_qp(qp, &a, IBV_QP_STATE);
	CHECK("modify RESET->RTS -> EINVAL", r == EINVAL, "ret %d", r);

	r = to_rts(qp, &gid, qp->qp_num);
	CHECK("connect QP to itself", r == 0, "step %d errno %d", r, errno);

	/* Too many SGEs */
	struct ibv_sge sges[4] = {sge, sge, sge, sge};
	wr.sg_list = sges;
	wr.num_sge = 4;
	bad = NULL;
	r = ibv_post_send(qp, &wr, &bad);
	CHECK("post_send with 4 SGEs on max_send_sge 2 -> EINVAL", r == EINVAL && bad == &wr, "ret %d", r);
	rwr.sg_list = sges;
	rwr.num_sge = 4;
	r = ibv_post_recv(qp, &rwr, &rbad);
	CHECK("post_recv with 4 SGEs -> EINVAL", r == EINVAL, "ret %d", r);

	/* A good loopback send first */
	struct ibv_sge rs = {.addr = (uintptr_t)buf + 4096, .length = 4096, .lkey = mr->lkey};
	rwr.sg_list = &rs;
	rwr.num_sge = 1;
	rwr.wr_id = 7;
	CHECK("post_recv", ibv_post_recv(qp, &rwr, &rbad) == 0, "");
	wr.sg_list = &sge;
	wr.num_sge = 1;
	CHECK("post_send", ibv_post_send(qp, &wr, &bad) == 0, "");
	struct ibv_wc wc;
	int got = 0, ok = 1;
	for (int i = 0; i < 2; i++) {
		if (wait_wc(cq, &wc) == 1) {
			got++;
			ok &= wc.status == IBV_WC_SUCCESS;
		}
	}
	CHECK("loopback send/recv completes", got == 2 && ok, "got %d ok %d status %d", got, ok, wc.status);

	/* Wrong PD: an lkey of another PD's MR */
	struct ibv_sge wsge = {.addr = (uintptr_t)buf2, .length = 64, .lkey = mr2->lkey};
	wr.sg_list = &wsge;
	wr.wr_id = 2;
	r = ibv_post_send(qp, &wr, &bad);
	int n = wait_wc(cq, &wc);
	CHECK("send with another PD's lkey -> IBV_WC_LOC_PROT_ERR", r == 0 && n == 1 && wc.status == IBV_WC_LOC_PROT_ERR,
	      "ret %d n %d status %d (%s)", r, n, wc.status, ibv_wc_status_str(wc.status));
	/* The QP is now in ERR: later work is flushed. */
	wr.sg_list = &sge;
	wr.wr_id = 3;
	r = ibv_post_send(qp, &wr, &bad);
	n = wait_wc(cq, &wc);
	CHECK("send on an errored QP -> IBV_WC_WR_FLUSH_ERR", (r == 0 && n == 1 && wc.status == IBV_WC_WR_FLUSH_ERR) || r == EINVAL,
	      "ret %d n %d status %d", r, n, wc.status);
	while (ibv_poll_cq(cq, 1, &wc) > 0)
		;

	/* Bad rkey: RDMA WRITE with a wrong rkey between two QPs of this NIC (a QP connected to
	 * itself would move to ERR as the responder before it sees the NAK, and flush). */
	struct ibv_cq *cq2 = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp *qp2 = new_qp(pd, cq, 2), *peer = new_qp(pd, cq2, 2);
	r = to_rts(qp2, &gid, peer->qp_num) | to_rts(peer, &gid, qp2->qp_num);
	memset(&wr, 0, sizeof wr);
	wr.wr_id = 4;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = (uintptr_t)buf + 4096;
	wr.wr.rdma.rkey = mr->rkey ^ 0x5a5a0000;
	r |= ibv_post_send(qp2, &wr, &bad);
	n = wait_wc(cq, &wc);
	CHECK("RDMA WRITE with a bad rkey -> IBV_WC_REM_ACCESS_ERR", r == 0 && n == 1 && wc.status == IBV_WC_REM_ACCESS_ERR,
	      "ret %d n %d status %d (%s)", r, n, wc.status, ibv_wc_status_str(wc.status));
	while (ibv_poll_cq(cq, 1, &wc) > 0)
		;

	/* CQ overflow: 8 signaled sends into a CQ of 2 entries, never polled */
	struct ibv_cq *small = ibv_create_cq(ctx, 2, NULL, NULL, 0);
	struct ibv_qp *qp3 = new_qp(pd, small, 1);
	r = to_rts(qp3, &gid, qp3->qp_num);
	memset(&wr, 0, sizeof wr);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = (uintptr_t)buf + 4096;
	wr.wr.rdma.rkey = mr->rkey;
	for (int i = 0; i < 8; i++) {
		wr.wr_id = 100 + i;
		r |= ibv_post_send(qp3, &wr, &bad);
	}
	struct pollfd pfd = {.fd = ctx->async_fd, .events = POLLIN};
	int ready = poll(&pfd, 1, 3000);
	struct ibv_async_event ev;
	memset(&ev, 0, sizeof ev);
	int ge = ready == 1 ? ibv_get_async_event(ctx, &ev) : -1;
	CHECK("CQ overflow -> IBV_EVENT_CQ_ERR on the CQ", r == 0 && ge == 0 && ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == small,
	      "post %d poll %d get %d type %d (%s)", r, ready, ge, ev.event_type, ibv_event_type_str(ev.event_type));
	if (ge == 0)
		ibv_ack_async_event(&ev);

	printf("%d failures\n", failures);
	return failures ? 1 : 0;
}
