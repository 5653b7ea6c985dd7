/* Two emulated NICs in one process (ROCE_IP=a,b gives rxe0 and rxe1, as a host with two NICs
 * has): both listed, both opened, an RC QP on each connected to the other, a SEND and an RDMA
 * WRITE from rxe0 to rxe1 and an RDMA READ back. Prints CHECK lines; exit 1 on any failure. */
#include "verbs_setup.h"

int main(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK("two devices", list && n == 2, "n=%d", n);
	if (!list || n != 2)
		return 1;
	CHECK("names", !strcmp(ibv_get_device_name(list[0]), "rxe0") &&
	                   !strcmp(ibv_get_device_name(list[1]), "rxe1"),
	      "%s %s", ibv_get_device_name(list[0]), ibv_get_device_name(list[1]));
	CHECK("guids differ", ibv_get_device_guid(list[0]) != ibv_get_device_guid(list[1]), "same");
	CHECK("index", ibv_get_device_index(list[1]) == 1, "%d", ibv_get_device_index(list[1]));
	struct ibv_context *ctx[2];
	struct ibv_pd *pd[2];
	struct ibv_cq *cq[2];
	struct ibv_qp *qp[2];
	struct ibv_mr *mr[2];
	union ibv_gid gid[2];
	static char buf[2][4096];
	for (int i = 0; i < 2; i++) {
		ctx[i] = ibv_open_device(list[i]);
		CHECK("open", ctx[i] != NULL, "device %d errno %d", i, errno);
		if (!ctx[i])
			return 1;
		CHECK("gid", ibv_query_gid(ctx[i], 1, 1, &gid[i]) == 0, "errno %d", errno);
		pd[i] = ibv_alloc_pd(ctx[i]);
		cq[i] = ibv_create_cq(ctx[i], 16, NULL, NULL, 0);
		qp[i] = new_qp(pd[i], cq[i], 1);
		mr[i] = ibv_reg_mr(pd[i], buf[i], sizeof buf[i],
		                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
		CHECK("objects", pd[i] && cq[i] && qp[i] && mr[i], "device %d errno %d", i, errno);
		if (!qp[i] || !mr[i])
			return 1;
	}
	CHECK("addresses differ", memcmp(&gid[0], &gid[1], 16) != 0, "same GID");
	CHECK("rts 0", to_rts(qp[0], &gid[1], qp[1]->qp_num) == 0, "errno %d", errno);
	CHECK("rts 1", to_rts(qp[1], &gid[0], qp[0]->qp_num) == 0, "errno %d", errno);

	struct ibv_sge rs = {(uintptr_t)buf[1], 64, mr[1]->lkey};
	struct ibv_recv_wr rwr = {.wr_id = 1, .sg_list = &rs, .num_sge = 1}, *brw;
	CHECK("post recv", ibv_post_recv(qp[1], &rwr, &brw) == 0, "errno %d", errno);
	strcpy(buf[0], "hello from rxe0");
	struct ibv_sge ss = {(uintptr_t)buf[0], 64, mr[0]->lkey};
	struct ibv_send_wr swr = {.wr_id = 2, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND}, *bsw;
	CHECK("post send", ibv_post_send(qp[0], &swr, &bsw) == 0, "errno %d", errno);
	struct ibv_wc wc;
	CHECK("send done", wait_wc(cq[0], &wc) == 1 && wc.status == IBV_WC_SUCCESS, "status %d", wc.status);
	CHECK("recv done", wait_wc(cq[1], &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
	                       !strcmp(buf[1], "hello from rxe0"), "status %d '%s'", wc.status, buf[1]);

	strcpy(buf[0] + 128, "written by rxe0");
	struct ibv_sge ws = {(uintptr_t)(buf[0] + 128), 32, mr[0]->lkey};
	struct ibv_send_wr wwr = {.wr_id = 3, .sg_list = &ws, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE};
	wwr.wr.rdma.remote_addr = (uintptr_t)(buf[1] + 1024);
	wwr.wr.rdma.rkey = mr[1]->rkey;
	CHECK("post write", ibv_post_send(qp[0], &wwr, &bsw) == 0, "errno %d", errno);
	CHECK("write done", wait_wc(cq[0], &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
	                        !strcmp(buf[1] + 1024, "written by rxe0"), "status %d", wc.status);

	strcpy(buf[1] + 2048, "read from rxe1");
	struct ibv_sge rds = {(uintptr_t)(buf[0] + 2048), 32, mr[0]->lkey};
	struct ibv_send_wr rdw = {.wr_id = 4, .sg_list = &rds, .num_sge = 1, .opcode = IBV_WR_RDMA_READ};
	rdw.wr.rdma.remote_addr = (uintptr_t)(buf[1] + 2048);
	rdw.wr.rdma.rkey = mr[1]->rkey;
	CHECK("post read", ibv_post_send(qp[0], &rdw, &bsw) == 0, "errno %d", errno);
	CHECK("read done", wait_wc(cq[0], &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
	                       !strcmp(buf[0] + 2048, "read from rxe1"), "status %d", wc.status);
	for (int i = 0; i < 2; i++) {
		ibv_destroy_qp(qp[i]);
		ibv_dereg_mr(mr[i]);
		ibv_destroy_cq(cq[i]);
		ibv_dealloc_pd(pd[i]);
		ibv_close_device(ctx[i]);
	}
	ibv_free_device_list(list);
	printf("done, %d failures\n", failures);
	return failures != 0;
}
