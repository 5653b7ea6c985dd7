/* ECE (RDMACM_1.3) through the drop-in librdmacm.so.1, as librdmacm v44 and kernel rdma_cm
 * behave over rxe (whose provider has no ECE: ibv_query_ece / ibv_set_ece say EOPNOTSUPP).
 * Compiled and run by provider/cli/tests/cm_ece.rs under `roce run --ip IP`: one process, a
 * listener and a client on the same address (the CM MADs go out and come back on QP1).
 *
 *   cm_ece IP PORT
 *
 * 1. rdma_set_local_ece / rdma_get_remote_ece argument rules (EINVAL: no ece, vendor 0,
 *    comp_mask, an id with a QP); a fresh id's remote ECE is all zero.
 * 2. Programs that bring their own QP (conn_param.qp_num; rdma-core's
 *    test_rdmacm_async_traffic_external_qp): the client's ECE reaches the server's
 *    CONNECT_REQUEST, the server's options (with the echoed vendor) reach the client's
 *    CONNECT_RESPONSE; the QPs answer ibv_query_ece / ibv_set_ece with EOPNOTSUPP.
 * 3. rdma_create_qp replaces the local ECE by its QP's (none), so the request offers none;
 *    rdma_reject_ece answers with REJ reason 35 and the private data (149 bytes: EINVAL).
 *
 * Prints "CHECK <name> ok|FAIL ..." and "DONE failures <n>"; exits 0 iff no check failed. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>
#include "verbs_setup.h"

#define WAIT_MS 20000
#define VENDOR 0x1a2b3c


/* The next event on `ch` (bounded wait), checked to be `type`; exits on a timeout. */
static struct rdma_cm_event *next(struct rdma_event_channel *ch, enum rdma_cm_event_type type,
				  const char *name)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	if (poll(&p, 1, WAIT_MS) != 1 || rdma_get_cm_event(ch, &ev)) {
		CHECK(name, 0, "no event within %d ms (errno %d)", WAIT_MS, errno);
		exit(done());
	}
	CHECK(name, ev->event == type, "got %s status %d, want %s", rdma_event_str(ev->event),
	      ev->status, rdma_event_str(type));
	return ev;
}

/* A client id on `ch` with its address and route resolved to `dst`. */
static struct rdma_cm_id *client(struct rdma_event_channel *ch, struct sockaddr_in *dst)
{
	struct rdma_cm_id *id;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		CHECK("create client id", 0, "errno %d", errno);
		exit(done());
	}
	rdma_resolve_addr(id, NULL, (struct sockaddr *)dst, 2000);
	rdma_ack_cm_event(next(ch, RDMA_CM_EVENT_ADDR_RESOLVED, "client addr resolved"));
	rdma_resolve_route(id, 2000);
	rdma_ack_cm_event(next(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, "client route resolved"));
	return id;
}

/* An RC QP of the program's own on the id's device (not rdma_create_qp). */
static struct ibv_qp *own_qp(struct rdma_cm_id *id)
{
	struct ibv_cq *cq = ibv_create_cq(id->verbs, 4, NULL, NULL, 0);
	struct ibv_qp_init_attr a = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp *qp = cq ? ibv_create_qp(id->pd, &a) : NULL;

	if (!qp) {
		CHECK("own QP", 0, "errno %d", errno);
		exit(done());
	}
	return qp;
}

static void destroy_own_qp(struct ibv_qp *qp)
{
	struct ibv_cq *cq = qp->send_cq;

	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
}

static int fails_with(int ret, int err)
{
	return ret == -1 && errno == err;
}

int main(int argc, char **argv)
{
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel();
	struct sockaddr_in addr = { .sin_family = AF_INET };
	struct rdma_cm_id *listen_id, *cid, *child;
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct ibv_ece e;
	struct ibv_qp *cqp, *sqp;
	char big[149];
	int r;

	if (argc != 3 || !sch || !cch) {
		fprintf(stderr, "usage: cm_ece IP PORT\n");
		return 2;
	}
	inet_pton(AF_INET, argv[1], &addr.sin_addr);
	addr.sin_port = htons(atoi(argv[2]));
	if (rdma_create_id(sch, &listen_id, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(listen_id, (struct sockaddr *)&addr) || rdma_listen(listen_id, 4)) {
		CHECK("listen", 0, "errno %d", errno);
		return done();
	}

	/* 1. argument rules */
	cid = client(cch, &addr);
	CHECK("set_local_ece NULL", fails_with(rdma_set_local_ece(cid, NULL), EINVAL), "errno %d",
	      errno);
	e = (struct ibv_ece){ .vendor_id = 0, .options = 1 };
	CHECK("set_local_ece vendor 0", fails_with(rdma_set_local_ece(cid, &e), EINVAL),
	      "errno %d", errno);
	e = (struct ibv_ece){ .vendor_id = VENDOR, .options = 1, .comp_mask = 1 };
	CHECK("set_local_ece comp_mask", fails_with(rdma_set_local_ece(cid, &e), EINVAL),
	      "errno %d", errno);
	CHECK("get_remote_ece NULL", fails_with(rdma_get_remote_ece(cid, NULL), EINVAL),
	      "errno %d", errno);
	memset(&e, 0xff, sizeof(e));
	r = rdma_get_remote_ece(cid, &e);
	CHECK("fresh id: remote ECE zero", r == 0 && !e.vendor_id && !e.options && !e.comp_mask,
	      "ret %d vendor %#x options %#x comp_mask %#x", r, e.vendor_id, e.options,
	      e.comp_mask);

	/* 2. the program's own QPs: both ECEs travel */
	e = (struct ibv_ece){ .vendor_id = VENDOR, .options = 0x55 };
	CHECK("set_local_ece", rdma_set_local_ece(cid, &e) == 0, "errno %d", errno);
	cqp = own_qp(cid);
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = cqp->qp_num;
	cp.responder_resources = cp.initiator_depth = 1;
	cp.retry_count = cp.rnr_retry_count = 7;
	CHECK("connect", rdma_connect(cid, &cp) == 0, "errno %d", errno);
	ev = next(sch, RDMA_CM_EVENT_CONNECT_REQUEST, "request (own QP)");
	child = ev->id;
	rdma_ack_cm_event(ev);
	r = rdma_get_remote_ece(child, &e);
	CHECK("server sees the client's ECE", r == 0 && e.vendor_id == VENDOR && e.options == 0x55,
	      "ret %d vendor %#x options %#x", r, e.vendor_id, e.options);
	e = (struct ibv_ece){ .vendor_id = VENDOR, .options = 0x77 };
	CHECK("server set_local_ece", rdma_set_local_ece(child, &e) == 0, "errno %d", errno);
	sqp = own_qp(child);
	cp.qp_num = sqp->qp_num;
	CHECK("accept", rdma_accept(child, &cp) == 0, "errno %d", errno);
	ev = next(cch, RDMA_CM_EVENT_CONNECT_RESPONSE, "response (own QP)");
	rdma_ack_cm_event(ev);
	r = rdma_get_remote_ece(cid, &e);
	CHECK("client sees the server's ECE", r == 0 && e.vendor_id == VENDOR && e.options == 0x77,
	      "ret %d vendor %#x options %#x", r, e.vendor_id, e.options);
	CHECK("ibv_set_ece EOPNOTSUPP (as rxe)", ibv_set_ece(cqp, &e) == EOPNOTSUPP, "%s", "other");
	memset(&e, 0, sizeof(e));
	CHECK("ibv_query_ece EOPNOTSUPP (as rxe)", ibv_query_ece(cqp, &e) == EOPNOTSUPP, "%s", "other");
	CHECK("establish", rdma_establish(cid) == 0, "errno %d", errno);
	rdma_ack_cm_event(next(sch, RDMA_CM_EVENT_ESTABLISHED, "server established"));
	rdma_disconnect(cid);
	rdma_ack_cm_event(next(sch, RDMA_CM_EVENT_DISCONNECTED, "server disconnected"));
	rdma_disconnect(child);
	rdma_ack_cm_event(next(cch, RDMA_CM_EVENT_DISCONNECTED, "client disconnected"));
	rdma_destroy_id(child);
	rdma_destroy_id(cid);
	destroy_own_qp(cqp);
	destroy_own_qp(sqp);

	/* 3. rdma_create_qp's QP has no ECE; rdma_reject_ece */
	cid = client(cch, &addr);
	e = (struct ibv_ece){ .vendor_id = VENDOR, .options = 0x55 };
	CHECK("set_local_ece before rdma_create_qp", rdma_set_local_ece(cid, &e) == 0, "errno %d",
	      errno);
	{
		struct ibv_qp_init_attr a = {
			.cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1,
				 .max_recv_sge = 1 },
			.qp_type = IBV_QPT_RC,
		};
		CHECK("rdma_create_qp", rdma_create_qp(cid, NULL, &a) == 0, "errno %d", errno);
	}
	CHECK("set_local_ece with a QP", fails_with(rdma_set_local_ece(cid, &e), EINVAL),
	      "errno %d", errno);
	CHECK("get_remote_ece with a QP", fails_with(rdma_get_remote_ece(cid, &e), EINVAL),
	      "errno %d", errno);
	CHECK("connect (rdma_create_qp)", rdma_connect(cid, NULL) == 0, "errno %d", errno);
	ev = next(sch, RDMA_CM_EVENT_CONNECT_REQUEST, "request (rdma_create_qp)");
	child = ev->id;
	rdma_ack_cm_event(ev);
	memset(&e, 0xff, sizeof(e));
	r = rdma_get_remote_ece(child, &e);
	CHECK("request offers no ECE", r == 0 && !e.vendor_id && !e.options,
	      "ret %d vendor %#x options %#x", r, e.vendor_id, e.options);
	memset(big, 'x', sizeof(big));
	CHECK("reject_ece 149 bytes", fails_with(rdma_reject_ece(child, big, 149), EINVAL),
	      "errno %d", errno);
	CHECK("reject_ece", rdma_reject_ece(child, "no such option", 15) == 0, "errno %d", errno);
	ev = next(cch, RDMA_CM_EVENT_REJECTED, "client rejected");
	CHECK("reason 35 and the private data",
	      ev->status == 35 && ev->param.conn.private_data_len == 148 &&
		      !memcmp(ev->param.conn.private_data, "no such option", 15),
	      "status %d private_data_len %d", ev->status, ev->param.conn.private_data_len);
	rdma_ack_cm_event(ev);
	rdma_destroy_id(child);
	rdma_destroy_qp(cid);
	rdma_destroy_id(cid);
	rdma_destroy_id(listen_id);
	rdma_destroy_event_channel(sch);
	rdma_destroy_event_channel(cch);
	return done();
}
