package command

import (
	"container/list"
	"sync"
)

// cache is a bounded LRU of loaded aggregate instances, keyed by stream.
// An instance taken from it is used only under its stream's lock, so it is
// never shared by two dispatches at once; whatever makes it stale (a
// conflict, a failed or uncertain append) evicts it.
type cache struct {
	mu    sync.Mutex
	size  int
	order *list.List // front: most recently used
	items map[string]*list.Element
}

type cacheEntry struct {
	stream string
	inst   any
}

func newCache(size int) *cache {
	if size <= 0 {
		return nil
	}
	return &cache{size: size, order: list.New(), items: make(map[string]*list.Element)}
}

func (c *cache) get(stream string) any {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.items[stream]
	if el == nil {
		return nil
	}
	c.order.MoveToFront(el)
	return el.Value.(*cacheEntry).inst
}

func (c *cache) put(stream string, inst any) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.items[stream]; el != nil {
		el.Value.(*cacheEntry).inst = inst
		c.order.MoveToFront(el)
		return
	}
	c.items[stream] = c.order.PushFront(&cacheEntry{stream: stream, inst: inst})
	for c.order.Len() > c.size {
		old := c.order.Remove(c.order.Back()).(*cacheEntry)
		delete(c.items, old.stream)
	}
}

func (c *cache) evict(stream string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.items[stream]; el != nil {
		c.order.Remove(el)
		delete(c.items, stream)
	}
}

func (c *cache) len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
