// Package lru is a bounded cache, least recently used out first: the
// command bus keeps loaded aggregates in one, a saga runner its instances'
// latest steps.
package lru

import (
	"container/list"
	"sync"
)

// Cache maps keys to values, holding at most its size. A nil *Cache holds
// nothing: Get misses and Put does nothing. Its methods are safe for
// concurrent use.
type Cache[V any] struct {
	mu    sync.Mutex
	size  int
	order *list.List // front: most recently used
	items map[string]*list.Element
}

type entry[V any] struct {
	key   string
	value V
}

// New returns a cache of at most size values, or nil (no cache) for a size
// that is not positive.
func New[V any](size int) *Cache[V] {
	if size <= 0 {
		return nil
	}
	return &Cache[V]{size: size, order: list.New(), items: make(map[string]*list.Element)}
}

// Get returns the value of key, and whether there is one.
func (c *Cache[V]) Get(key string) (V, bool) {
	var zero V
	if c == nil {
		return zero, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.items[key]
	if el == nil {
		return zero, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*entry[V]).value, true
}

// Put sets the value of key, dropping the least recently used value when
// the cache is full.
func (c *Cache[V]) Put(key string, value V) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.items[key]; el != nil {
		el.Value.(*entry[V]).value = value
		c.order.MoveToFront(el)
		return
	}
	c.items[key] = c.order.PushFront(&entry[V]{key: key, value: value})
	c.trim()
}

// trim drops the least recently used values past the cache's size; the
// caller holds c.mu.
func (c *Cache[V]) trim() {
	for c.order.Len() > c.size {
		old := c.order.Remove(c.order.Back()).(*entry[V])
		delete(c.items, old.key)
	}
}

// GetOrAdd returns the value of key, adding add() first when there is
// none, in one step: two callers asking for a missing key get one value.
// A nil *Cache returns add() and keeps nothing.
func (c *Cache[V]) GetOrAdd(key string, add func() V) V {
	if c == nil {
		return add()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.items[key]; el != nil {
		c.order.MoveToFront(el)
		return el.Value.(*entry[V]).value
	}
	v := add()
	c.items[key] = c.order.PushFront(&entry[V]{key: key, value: v})
	c.trim()
	return v
}

// Evict drops the value of key.
func (c *Cache[V]) Evict(key string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.items[key]; el != nil {
		c.order.Remove(el)
		delete(c.items, key)
	}
}

// Len returns how many values the cache holds.
func (c *Cache[V]) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
