package logging

import (
	"sync"
	"time"
)

// Limiter lets at most N lines of one kind through per interval and counts
// the rest, so that a flood of events an outsider can cause (refused
// connections, decisions of a node in TEST) cannot fill the disk the raft
// log shares. The next line let through reports how many were dropped.
type Limiter struct {
	n   int
	per time.Duration
	now func() time.Time

	mu         sync.Mutex
	start      time.Time
	used       int
	suppressed int
}

// NewLimiter lets n lines through per interval per.
func NewLimiter(n int, per time.Duration) *Limiter {
	return &Limiter{n: max(n, 1), per: per, now: time.Now}
}

// Allow reports whether a line may be written now and, when it may, how
// many were held back since the last one that was.
func (l *Limiter) Allow() (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now := l.now(); now.Sub(l.start) >= l.per {
		l.start, l.used = now, 0
	}
	if l.used >= l.n {
		l.suppressed++
		return false, 0
	}
	l.used++
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}
