/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An intrusive doubly linked list with head and tail, for LRU orders: the
 * node is embedded in the entry (SR_CONTAINER_OF() gets the entry back), so
 * moving an entry to the front or evicting the tail is O(1) and allocates
 * nothing. Not thread-safe: the owner's lock covers it.
 */
#ifndef SR_LIST_H
#define SR_LIST_H

#include <stddef.h>

#include "common/macro.h"

struct sr_list_node {
	struct sr_list_node *prev, *next;
};

/* head: the front (most recently used, for an LRU); tail: the back. Zeroed is empty. */
struct sr_list {
	struct sr_list_node *head, *tail;
};

/* The entry of type holding node as member, or NULL for a NULL node. */
#define SR_LIST_ENTRY(node, type, member) ((node) ? SR_CONTAINER_OF((node), type, member) : NULL)

static inline void sr_list__unlink(struct sr_list *l, struct sr_list_node *n)
{
	if (n->prev)
		n->prev->next = n->next;
	else
		l->head = n->next;
	if (n->next)
		n->next->prev = n->prev;
	else
		l->tail = n->prev;
	n->prev = n->next = NULL;
}

static inline void sr_list__push_front(struct sr_list *l, struct sr_list_node *n)
{
	n->prev = NULL;
	n->next = l->head;
	if (l->head)
		l->head->prev = n;
	l->head = n;
	if (!l->tail)
		l->tail = n;
}

#endif
