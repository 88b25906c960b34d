package workflow

import (
	"context"
	"sync"
)

// listeners is a set of functions told of something; safe for
// concurrent use. A listener must return quickly (hand the news to a
// goroutine of its own): it runs on the path of a call or a reload.
type listeners[T any] struct {
	mu   sync.Mutex
	next int
	fns  map[int]func(context.Context, T)
}

func (l *listeners[T]) add(f func(context.Context, T)) (cancel func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fns == nil {
		l.fns = map[int]func(context.Context, T){}
	}
	id := l.next
	l.next++
	l.fns[id] = f
	return func() {
		l.mu.Lock()
		delete(l.fns, id)
		l.mu.Unlock()
	}
}

func (l *listeners[T]) tell(ctx context.Context, v T) {
	l.mu.Lock()
	if len(l.fns) == 0 {
		l.mu.Unlock()
		return
	}
	fns := make([]func(context.Context, T), 0, len(l.fns))
	for _, f := range l.fns {
		fns = append(fns, f)
	}
	l.mu.Unlock()
	for _, f := range fns {
		f(ctx, v)
	}
}
