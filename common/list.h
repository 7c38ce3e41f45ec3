/* SPDX-License-Identifier: MIT */
#pragma once

/* Intrusive doubly linked lists, the way systemd's list.h has them: an item carries
 * LIST_FIELDS(Type, name) and can sit in as many lists as it has names. */

#define LIST_FIELDS(t, name) t *name##_next, *name##_prev

#define LIST_PREPEND(name, head, item)                                                     \
        do {                                                                               \
                __typeof__(*(head)) **_head = &(head), *_item = (item);                    \
                _item->name##_next = *_head;                                               \
                if (_item->name##_next)                                                    \
                        _item->name##_next->name##_prev = _item;                           \
                _item->name##_prev = NULL;                                                 \
                *_head = _item;                                                            \
        } while (0)

#define LIST_REMOVE(name, head, item)                                                      \
        do {                                                                               \
                __typeof__(*(head)) **_head = &(head), *_item = (item);                    \
                if (_item->name##_next)                                                    \
                        _item->name##_next->name##_prev = _item->name##_prev;              \
                if (_item->name##_prev)                                                    \
                        _item->name##_prev->name##_next = _item->name##_next;              \
                else                                                                       \
                        *_head = _item->name##_next;                                       \
                _item->name##_next = _item->name##_prev = NULL;                            \
        } while (0)
