/* ibv_resize_cq on the roce drop-in libibverbs.so.1, with completions queued (issue 22 item 2),
 * as kernel rxe does it: the size is rounded to one less than a power of two and reported in
 * cq->cqe, a size below the number of queued completions (or 0, or above max_cqe) fails with
 * EINVAL and changes nothing, queued completions stay in order, an armed notification stays
 * armed. Compiled and run by provider/cli/tests/resize_cq.rs through `roce run`.
 *
 * QP A sends to QP B on the same NIC; B's receive CQ is the one resized. A's send completion
 * comes after B's ACK, which B sends after queuing the receive completion, so once A has its
 * completions, B's are queued. Prints one "CHECK <name> ok|FAIL ..." line per check and exits 0
 * iff all pass. */
#include "verbs_setup.h"

/* B receives SENDs first..last-1 (wr_id = i on both sides); waits for A's send completions.
 * Returns how many succeeded. */
static int deliver(struct ibv_qp *a, struct ibv_qp *b, struct ibv_cq *scq, struct ibv_mr *mr,
                   char *buf, int first, int last, int solicited)
{
	int ok = 0;
	for (int i = first; i < last; i++) {
		struct ibv_sge rs = {.addr = (uintptr_t)buf + 4096 + 64 * i, .length = 64, .lkey = mr->lkey};
		struct ibv_recv_wr rwr = {.wr_id = i, .sg_list = &rs, .num_sge = 1}, *rbad;
		struct ibv_sge ss = {.addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey};
		struct ibv_send_wr wr, *bad;
		memset(&wr, 0, sizeof wr);
		wr.wr_id = i;
		wr.sg_list = &ss;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = solicited ? IBV_SEND_SOLICITED : 0;
		if (ibv_post_recv(b, &rwr, &rbad) || ibv_post_send(a, &wr, &bad))
			return ok;
	}
	for (int i = first; i < last; i++) {
		struct ibv_wc wc;
		if (wait_wc(scq, &wc) != 1 || wc.status != IBV_WC_SUCCESS)
			return ok;
		ok++;
	}
	return ok;
}

/* 1 when the channel has an event within ms milliseconds. */
static int readable(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	return poll(&p, 1, ms) == 1;
}

int main(void)
{
	union ibv_gid gid;
	struct ibv_context *ctx = open_first_device(&gid);
	struct ibv_device_attr da;
	ibv_query_device(ctx, &da);

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	char *buf = aligned_alloc(4096, 8192);
	memset(buf, 0x5a, 8192);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 8192, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *scq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
	struct ibv_cq *rcq = ibv_create_cq(ctx, 4, NULL, ch, 0);
	struct ibv_qp *a = pd && scq ? new_rc_qp(pd, scq, scq, 32, 1) : NULL;
	struct ibv_qp *b = pd && scq && rcq ? new_rc_qp(pd, scq, rcq, 32, 1) : NULL;
	CHECK("setup", pd && mr && ch && scq && rcq && a && b, "errno %d", errno);
	if (!a || !b)
		return 1;
	CHECK("connect", !to_rts(a, &gid, b->qp_num) && !to_rts(b, &gid, a->qp_num), "errno %d", errno);
	int cqe0 = rcq->cqe;
	CHECK("create_cq(4) -> cqe 7 (rounded as rxe)", cqe0 == 7 && scq->cqe == 63, "cqe %d %d", cqe0,
	      scq->cqe);

	/* 4 completions in the CQ asked for 4; armed for solicited ones only */
	CHECK("req_notify_cq(solicited)", ibv_req_notify_cq(rcq, 1) == 0, "");
	CHECK("4 receives queued", deliver(a, b, scq, mr, buf, 0, 4, 0) == 4, "");

	int r = ibv_resize_cq(rcq, 3);
	CHECK("resize below the queued count -> EINVAL", r == EINVAL && rcq->cqe == cqe0, "ret %d cqe %d", r, rcq->cqe);
	r = ibv_resize_cq(rcq, 0);
	CHECK("resize to 0 -> EINVAL", r == EINVAL, "ret %d", r);
	r = ibv_resize_cq(rcq, da.max_cqe + 1);
	CHECK("resize above max_cqe -> EINVAL", r == EINVAL && rcq->cqe == cqe0, "ret %d max_cqe %d", r, da.max_cqe);

	/* grow with 4 queued: 100 -> 127 */
	r = ibv_resize_cq(rcq, 100);
	CHECK("grow to 100 -> cqe 127", r == 0 && rcq->cqe == 127, "ret %d cqe %d", r, rcq->cqe);
	CHECK("8 more receives queued", deliver(a, b, scq, mr, buf, 4, 12, 0) == 8, "");
	CHECK("no notification for unsolicited completions", !readable(ch->fd, 100), "");

	/* shrink with 12 queued */
	r = ibv_resize_cq(rcq, 11);
	CHECK("shrink below 12 queued -> EINVAL", r == EINVAL && rcq->cqe == 127, "ret %d cqe %d", r, rcq->cqe);
	r = ibv_resize_cq(rcq, 12);
	CHECK("shrink to 12 -> cqe 15", r == 0 && rcq->cqe == 15, "ret %d cqe %d", r, rcq->cqe);

	/* three more fill it; the solicited one fires the notification armed before the resizes */
	CHECK("2 more receives queued", deliver(a, b, scq, mr, buf, 12, 14, 0) == 2, "");
	CHECK("still no notification", !readable(ch->fd, 100), "");
	CHECK("1 solicited receive queued", deliver(a, b, scq, mr, buf, 14, 15, 1) == 1, "");
	struct ibv_cq *ev_cq = NULL;
	void *ev_ctx = NULL;
	int ge = readable(ch->fd, 2000) ? ibv_get_cq_event(ch, &ev_cq, &ev_ctx) : -1;
	CHECK("solicited completion notifies the resized CQ", ge == 0 && ev_cq == rcq, "ge %d cq %p", ge, (void *)ev_cq);
	if (ge == 0)
		ibv_ack_cq_events(rcq, 1);

	/* every completion once, in order */
	struct ibv_wc wc[32];
	int got = 0, order = 1, ok = 1;
	for (int tries = 0; tries < 1000 && got < 32; tries++) {
		int n = ibv_poll_cq(rcq, 32 - got, wc + got);
		if (n < 0)
			break;
		got += n;
		if (n == 0 && got >= 15)
			break;
	}
	for (int i = 0; i < got; i++) {
		order &= wc[i].wr_id == (uint64_t)i && wc[i].opcode == IBV_WC_RECV;
		ok &= wc[i].status == IBV_WC_SUCCESS && wc[i].byte_len == 8;
	}
	CHECK("15 completions, in order, each once", got == 15 && order && ok, "got %d order %d ok %d", got, order, ok);
	CHECK("no CQ error event", !readable(ctx->async_fd, 100), "");

	/* a resize on an empty CQ; then destroy */
	r = ibv_resize_cq(rcq, 1);
	CHECK("resize empty CQ to 1 -> cqe 1", r == 0 && rcq->cqe == 1, "ret %d cqe %d", r, rcq->cqe);

	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	CHECK("destroy resized CQ", ibv_destroy_cq(rcq) == 0, "");
	ibv_destroy_cq(scq);
	ibv_destroy_comp_channel(ch);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return done();
}
