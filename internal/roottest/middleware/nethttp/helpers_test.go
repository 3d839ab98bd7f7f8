package outboxhttp_test

import (
	"strings"
	"sync"
)

// callLog records, in order, the calls of the functions fn returns.
type callLog struct {
	mu  sync.Mutex
	log []string
}

func (l *callLog) fn(s string) func() {
	return func() {
		l.mu.Lock()
		l.log = append(l.log, s)
		l.mu.Unlock()
	}
}

func (l *callLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.log, ",")
}
