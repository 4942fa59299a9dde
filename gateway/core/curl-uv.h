/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libcurl's multi-socket interface driven by a libuv loop, after curl's
 * docs/examples/multi-uv.c: curl says which sockets to watch (one uv_poll_t
 * each) and when to wake it (one uv_timer_t); the driver tells curl what
 * happened with curl_multi_socket_action() and hands each finished transfer
 * to the completion callback given when its easy handle was added.
 *
 * The owner configures its easy handles (URL, headers, write and header
 * callbacks: whatever its requests mean) and keeps them; the driver only runs
 * them. One driver per owner: requests to one backend share connections
 * (HTTP/2: one connection, CURLPIPE_MULTIPLEX).
 */
#ifndef GW_CURL_UV_H
#define GW_CURL_UV_H

#include <curl/curl.h>
#include <uv.h>

struct gw_curl_uv;
struct gw_curl_uv_xfer;

/*
 * Called once per added easy handle when curl is done with it (result is
 * CURLE_OK or why the transfer failed), from the loop, never from inside
 * gw_curl_uv__add(). The handle is still added: the callback removes it (or
 * not, and the owner removes it later), and may add new handles or close the
 * driver.
 */
typedef void (*gw_curl_uv_done_fn)(struct gw_curl_uv_xfer *x, CURLcode result);

/*
 * Embedded by the owner in its per-transfer state, like a uv_req_t; the
 * callback gets it back and SR_CONTAINER_OF() finds the owner's state. It
 * must stay alive while its easy handle is added.
 */
struct gw_curl_uv_xfer {
	gw_curl_uv_done_fn done;
	CURL *easy;
};

/* A driver on loop; NULL and errno (ENOMEM, EIO: libcurl failed to initialise). */
struct gw_curl_uv *gw_curl_uv__new(uv_loop_t *loop);

/*
 * Starts easy (configured by the caller) and calls done when it ends. The
 * driver owns CURLOPT_PRIVATE of easy (it points at x). Returns 0, -EINVAL,
 * -ECANCELED once the driver is closing, or -ENOMEM (curl refused the
 * handle); on error done is never called.
 */
int gw_curl_uv__add(struct gw_curl_uv *d, struct gw_curl_uv_xfer *x, CURL *easy, gw_curl_uv_done_fn done);

/* Stops x's transfer without calling done; the easy handle stays the caller's. Accepts a removed x. */
void gw_curl_uv__remove(struct gw_curl_uv *d, struct gw_curl_uv_xfer *x);

/*
 * Closes the driver: the caller has removed its transfers first (a transfer
 * still added is dropped without done). Idle connections are closed, and
 * the driver's handles with uv_close(); its memory is freed when the last
 * one's close callback has run, after which close_cb(userdata) is called
 * (if not NULL). Accepts NULL; a second call does nothing.
 */
void gw_curl_uv__close(struct gw_curl_uv *d, void (*close_cb)(void *userdata), void *userdata);

#endif
