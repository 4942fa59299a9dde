/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP/1.1 on the listeners' connections (net/conn.c), for an owner whose
 * gw_conn_ops.http1 is set: a small, strict request reader (the head, up to
 * gw_listener_config.max_head_bytes and max_head_lines, read by
 * common/http1.h; a body framed by Content-Length or chunked) that hands a
 * request's parts to the same stream functions HTTP/2 uses, and writes the
 * answer (without its body for HEAD). One request at a time per connection:
 * pipelined requests are read once the one before is answered (requests are
 * answered as they are read); bytes that arrive while a request is still
 * being processed end the connection after its answer; with
 * gw_conn_ops.http1_close every answer ends it.
 */
#ifndef SR_GW_NET_H1_H
#define SR_GW_NET_H1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Request line and headers of one request, CRLFs included (431 past it), unless the listener sets its own. */
#define GW_H1_MAX_HEAD_BYTES 16384
/* Header lines of one request (431 past it), unless the listener sets its own; max_header_list_bytes usually binds first. */
#define GW_H1_MAX_HEADERS 1024
/* Body bytes read and thrown away after an early answer (e.g. 413) so the client sees it; then we close. */
#define GW_H1_MAX_DISCARD_BYTES (64u << 20)

struct conn;
struct h2stream;
struct gw_h1;

int gw_h1_start(struct conn *c);
void gw_h1_free(struct gw_h1 *h);
/* Bytes from the client; <0: close the connection now. */
int gw_h1_feed(struct conn *c, const uint8_t *data, size_t len);
/* The next bytes to send (valid until the next call); 0 when there are none. */
ssize_t gw_h1_pull(struct conn *c, const uint8_t **data);
/* Everything is answered and sent, and the connection is to be closed. */
bool gw_h1_finished(struct conn *c);
/* The request being served, if any. */
struct h2stream *gw_h1_current(struct conn *c);
/* Answers the current request (called through gw_net_respond_ex); takes body. */
void gw_h1_respond(struct h2stream *s, int status, const char *content_type, uint8_t *body, size_t len,
		   uint32_t retry_after_ms);
/* Close after the request being served, or now when there is none. */
void gw_h1_goaway(struct conn *c);
/*
 * Reading and throwing away the body of a request answered early: bounded in
 * time by the caller (request_timeout from the answer), since a client that
 * stops sending would otherwise hold the connection for good.
 */
bool gw_h1_discarding(struct conn *c);
/*
 * When the head of a request after the connection's first began to arrive
 * (0: none is being read): header_timeout bounds it as it bounds the first
 * (a keep-alive connection is otherwise bounded only by idle_timeout).
 */
uint64_t gw_h1_head_started_ms(struct conn *c);

#endif
