// Package lru is a bounded cache, least recently used out first: the
// command bus keeps loaded aggregates in one, a saga runner its instances'
// latest steps.
package lru

import "sync"

// Cache maps keys to values, holding at most its size. A nil *Cache holds
// nothing: Get misses and Put does nothing. Its methods are safe for
// concurrent use.
//
// Its entries are the nodes of its recency list themselves, and a full
// cache's Put takes the node of the entry it drops for the one it adds:
// the bus puts every aggregate it loads, and a container/list element, an
// entry behind it and the map's pointer to the element were three places
// in memory, each to fetch again between two round trips to the store,
// and two allocations.
type Cache[V any] struct {
	mu    sync.Mutex
	size  int
	items map[string]*node[V]
	// ring is the recency list's sentinel: ring.next is the most recently
	// used entry, ring.prev the least; an empty list is ring alone.
	ring node[V]
	len  int
}

// node is an entry, linked into the recency list.
type node[V any] struct {
	key        string
	value      V
	prev, next *node[V]
}

// New returns a cache of at most size values, or nil (no cache) for a size
// that is not positive.
func New[V any](size int) *Cache[V] {
	if size <= 0 {
		return nil
	}
	c := &Cache[V]{size: size, items: make(map[string]*node[V])}
	c.ring.prev, c.ring.next = &c.ring, &c.ring
	return c
}

// Get returns the value of key, and whether there is one.
func (c *Cache[V]) Get(key string) (V, bool) {
	var zero V
	if c == nil {
		return zero, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.items[key]
	if n == nil {
		return zero, false
	}
	c.toFront(n)
	return n.value, true
}

// Put sets the value of key, dropping the least recently used value if
// the cache is full.
func (c *Cache[V]) Put(key string, value V) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.items[key]; n != nil {
		n.value = value
		c.toFront(n)
		return
	}
	c.add(key, value)
}

// GetOrAdd returns the value of key, adding the one add returns (under the
// cache's lock) if there is none.
func (c *Cache[V]) GetOrAdd(key string, add func() V) V {
	if c == nil {
		return add()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.items[key]; n != nil {
		c.toFront(n)
		return n.value
	}
	v := add()
	c.add(key, v)
	return v
}

// Evict drops key's value, if any.
func (c *Cache[V]) Evict(key string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.items[key]; n != nil {
		c.unlink(n)
		delete(c.items, key)
		c.len--
	}
}

// Len returns how many values the cache holds.
func (c *Cache[V]) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.len
}

// add adds key, which the cache does not hold, as the most recently used
// entry: in the node of the least recently used one, which it drops, when
// the cache is full.
func (c *Cache[V]) add(key string, value V) {
	var n *node[V]
	if c.len >= c.size {
		n = c.ring.prev
		c.unlink(n)
		delete(c.items, n.key)
	} else {
		n = new(node[V])
		c.len++
	}
	n.key, n.value = key, value
	c.link(n)
	c.items[key] = n
}

// toFront makes n the most recently used entry.
func (c *Cache[V]) toFront(n *node[V]) {
	if c.ring.next != n {
		c.unlink(n)
		c.link(n)
	}
}

// link puts n, which is in no list, first in the recency list.
func (c *Cache[V]) link(n *node[V]) {
	n.prev, n.next = &c.ring, c.ring.next
	c.ring.next.prev = n
	c.ring.next = n
}

// unlink takes n out of the recency list.
func (c *Cache[V]) unlink(n *node[V]) {
	n.prev.next = n.next
	n.next.prev = n.prev
	n.prev, n.next = nil, nil
}
